//! youki, the OCI runtime written in Rust (<https://github.com/youki-dev/youki>), as
//! the `youki` platform: [`OciEngine`] runs it on the same bundle as runc and crun
//! (isolab-runtime's spec, tini as PID 1, the overlay root, the limits as
//! `linux.resources`, the container's cgroup below the lab's parent) with
//! `youki run --bundle DIR ID`.
//!
//! # Installation
//! Debian does not ship youki. `scripts/setup.sh` builds it from crates.io into
//! `/usr/local/bin` with the command [`YOUKI`] names as its package, so that a missing
//! youki says what to run (about 8 minutes on two cores; it needs the Debian packages
//! `libseccomp-dev` and `pkg-config`). The crate has no default features: without `v1`
//! and `v2` youki has no cgroup manager and runs no container, and without `seccomp` it
//! cannot apply the bundle's seccomp profile (Docker's, as runc and crun apply it).
//!
//! # What youki does differently (youki 0.7.0, checked on this host)
//! - It takes only the runtime spec's four `rootfsPropagation` words and applies each
//!   recursively: it refuses the bundle's `rprivate` ("unknown rootfs propagation"), so
//!   it gets `private`, the same mount flags ([`OciKind::root_propagation`]).
//! - It leaves `lo` down in the container's new network namespace, where runc and crun
//!   bring it up: for network `none` the bundle gets a `createContainer` hook, the
//!   host's `ip link set lo up` (Debian package `iproute2`), which youki runs in the
//!   container's namespaces before `pivot_root` ([`OciKind::brings_up_loopback`]). A
//!   youki start with network `none` includes that `ip` process.
//! - `youki list` prints its table whatever `--format` says: [`Engine::gc`] finds
//!   youki's containers as the directories of its state root `/run/youki`, as
//!   `youki list` itself does ([`Listing::StateRoot`]).
//! - `youki --version` prints `youki version: 0.7.0` (a colon after `version`).
//! - On a hybrid cgroup host it uses its v1 manager and ignores the cgroup2 mount, also
//!   when that lists a controller (`hugetlb` here), and skips a v1 controller that is
//!   mounted nowhere unless the spec limits it: it needs no host fix, where crun refuses
//!   such a host.
//! - Like runc, it moves its init process into the container's cgroup before it writes
//!   the limits there: a watcher can see the cgroup unlimited for a moment (seen in root
//!   test runs), and should read the limits once the workload runs.
//! - `youki run` forwards the signals it receives to PID 1 (tini, which forwards them to
//!   the workload: SIGTERM ends the run with 143) and deletes the container when PID 1
//!   exits. SIGKILL to it leaves the container running: [`Engine::remove`] (or
//!   [`Engine::gc`]) deletes it with `youki delete --force`.
//!
//! [`OciEngine`]: crate::oci::OciEngine
//! [`Engine::gc`]: crate::Engine::gc
//! [`Engine::remove`]: crate::Engine::remove

use crate::oci::{Listing, OciKind};

/// youki 0.7.0, built by `cargo install` with its cgroup managers and seccomp (see the
/// module docs): state in `/run/youki`, no JSON listing, runs on a hybrid cgroup host
/// as it is, leaves `lo` down.
pub const YOUKI: OciKind = OciKind {
    name: "youki",
    package:
        "cargo install youki --version 0.7.0 --locked --features v1,v2,seccomp --root /usr/local",
    state_root: "/run/youki",
    summary: "youki, the Rust OCI runtime, on the same bundle as runc (built by cargo install)",
    refuses_hybrid: false,
    listing: Listing::StateRoot,
    root_propagation: "private",
    brings_up_loopback: false,
};

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::fakes::{FakeHost, FakeTools};
    use crate::oci::{OciEngine, OciPaths};
    use crate::Engine;

    #[test]
    fn a_missing_youki_names_the_cargo_install_that_builds_it() {
        let tools = Arc::new(FakeTools {
            missing: vec!["youki".into()],
            ..FakeTools::default()
        });
        let e = OciEngine::with(
            YOUKI,
            OciPaths::new(YOUKI),
            tools,
            Arc::new(FakeHost::default()),
        );
        let err = e.available().unwrap_err().to_string();
        assert!(
            err.contains(
                "install it with `cargo install youki --version 0.7.0 --locked --features v1,v2,seccomp --root /usr/local`"
            ),
            "{err}"
        );
        assert!(!err.contains("apt-get"), "{err}");
        assert_eq!(e.paths.runtime_state, std::path::Path::new("/run/youki"));
    }

    #[test]
    fn setup_installs_the_youki_named_here() {
        let setup = include_str!("../../../scripts/setup.sh");
        let version = setup
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("YOUKI_VERSION="))
            .expect("setup.sh pins youki");
        assert!(
            YOUKI
                .package
                .starts_with(&format!("cargo install youki --version {version} ")),
            "{}",
            YOUKI.package
        );
        let flags = YOUKI.package.split_once(" --locked").unwrap().1;
        assert!(
            setup.contains(&format!("--locked{flags}")),
            "setup.sh builds youki with{flags}"
        );
    }
}
