//! systemd-nspawn: [`Nspawn`] runs each request in a container of systemd's own
//! container manager (Debian package `systemd-container`), on a host whose PID 1 is
//! not systemd (no D-Bus, no `systemd-machined`).
//!
//! # One run
//! [`Engine::run_command`] creates the container's cgroup with the request's limits
//! (see *cgroups*), saves the run's state in `/run/isolab/nspawn/<id>/isolab-run.json`
//! (what [`Engine::remove`] undoes) and returns
//!
//! ```text
//! sh -c '<move into the cgroup; exec>' isolab-nspawn <cgroup.procs files…> -- \
//!   systemd-nspawn --quiet --register=no --keep-unit --machine=<id> \
//!     --directory=<image> --volatile=overlay --console=pipe --link-journal=no \
//!     --resolv-conf=off --timezone=off --kill-signal=SIGTERM \
//!     --bind-ro=/usr/bin/tini-static:/.isolab-init --bind=<workdir> --chdir=<workdir> \
//!     --setenv=PATH=… --setenv=TERM=xterm --setenv=<request's variables…> \
//!     [--private-network] -- /.isolab-init -- <argv…>
//! ```
//!
//! - `--register=no --keep-unit`: without them nspawn asks systemd (over D-Bus) for a
//!   scope unit and machined to register the machine, neither of which runs here.
//!   For the same reason `--property=CPUQuota=…` and friends cannot work: the limits
//!   are on a cgroup this driver creates.
//! - `--volatile=overlay`: the root is an overlay of the image directory with a tmpfs
//!   as upper layer, mounted by nspawn inside the container's mount namespace (the
//!   tmpfs on a `/tmp/nspawn-volatile-XXXXXX` directory that nspawn removes as soon as
//!   the overlay is mounted); the image is not modified (checked: nothing in the
//!   image directory changes, though nspawn creates its mount points under the image
//!   path, in the overlay) and the container's mounts are not visible on the host.
//!   `SYSTEMD_NSPAWN_LOCK=0` keeps nspawn from taking its image lock, whose files
//!   (`.#<image>.lck` next to the image, `/run/systemd/nspawn/locks/…`) a killed run
//!   would leave. `--link-journal=no`, `--resolv-conf=off` and `--timezone=off` keep
//!   nspawn from touching the host's journal directory or the container's `/etc`: the
//!   image's own files are used, as with runc, crun and LXC.
//! - PID 1 is `tini` (Debian's static `tini-static`, bind-mounted read-only at
//!   `/.isolab-init`, as the runc/crun driver does). `--as-pid2` was tried first: its
//!   stub init ignores SIGTERM, and on nspawn's halt signal (`--kill-signal=SIGRTMIN+3`)
//!   it stops the workload but then powers the namespace off, so nspawn exits 0 for a
//!   workload killed by SIGTERM (checked). With tini, SIGTERM to the command makes nspawn
//!   send SIGTERM to tini (`--kill-signal=SIGTERM`), tini forwards it to the workload and
//!   exits with its status (143), which nspawn returns (checked, within 0.1 s).
//!   Without `--kill-signal` nspawn SIGKILLs the container and exits 1.
//! - `--console=pipe`: the workload's stdin, stdout and stderr are the command's own
//!   (no pseudo terminal); nspawn exits with the container's exit status; `--quiet`
//!   keeps nspawn's banner out of the output. nspawn still writes one line to stderr
//!   at the end of every run (`Attempted to remove disk file system under
//!   "/run/systemd/nspawn/propagate/<id>"`: it refuses to empty that directory
//!   recursively because `/run` is not a tmpfs here; it is empty and removed all the
//!   same) and, on SIGTERM, `Trying to halt container…`.
//! - the working directory is bind-mounted at the same path and is the command's
//!   working directory; the environment is isolab-runtime's `PATH` and `TERM` and the
//!   request's variables (nspawn adds `container=systemd-nspawn`, `container_uuid`,
//!   `HOME`, `USER`, `LOGNAME`, `NOTIFY_SOCKET` and `LANG`);
//! - network `none`: `--private-network` (a network namespace with only `lo`, which
//!   nspawn brings up); `host`: nspawn's default, the host's network namespace;
//!   `bridge`: [`EngineError::Unsupported`] (nspawn's `--network-veth` and
//!   `--network-bridge` need systemd-networkd or a bridge and addresses of isolab's
//!   own on the host side, which this driver does not manage; use docker/podman or the
//!   `isolab` platform for a bridged container).
//!
//! # cgroups
//! The lab starts the command in the instance cgroup ([`RunRequest::cgroup_parent`]);
//! the container's cgroup is `<cgroup_parent>/<id>`, created by [`Engine::run_command`]
//! in every hierarchy isolab uses, with the limits written before anything runs
//! ([`crate::container_cgroup::create_limited`]: v1 cpu quota, cpuset, memory and swap,
//! pids, blkio throttles).
//!
//! The command gets there by a small `/bin/sh` wrapper: it writes its own pid into each
//! of the cgroup's `cgroup.procs` files (given as arguments, so no path is quoted into
//! the script) and `exec`s systemd-nspawn, which therefore has the command's pid and
//! starts in the limited cgroup; every process of the container descends from it and
//! stays there, and perf counters opened on the command follow the workload. Debian's
//! `cgexec` (`cgroup-tools`) does the same but is one more package, whose libcgroup
//! reads its own view of the mounts and configuration (`cgrules`, `--sticky`); the
//! wrapper needs nothing but `sh` and the cgroupfs. (A failed write exits with 125
//! before nspawn starts.)
//!
//! nspawn itself, with `--keep-unit` on this hybrid host, only touches the
//! `name=systemd` and cgroup2 (`unified`) hierarchies: it creates `<id>/payload` for
//! the container and `<id>/supervisor` for itself there. In the controllers' v1
//! hierarchies it moves nothing, so the container's processes stay in
//! `<cgroup_parent>/<id>` (checked in `/proc/<pid>/cgroup` while sysbench runs), the
//! deepest cgroup with processes below the parent in the cpu hierarchy, where
//! [`crate::find_container_cgroup`] finds it and the limits are read back. The
//! `systemd-nspawn` process shares that cgroup with the container (it has no cgroup of
//! its own to go to without systemd): its resident memory is charged to the
//! container's limit and its (idle: `--console=pipe` forwards nothing) cpu time to
//! the quota.
//!
//! For a few milliseconds at start, nspawn (252, `sync_cgroup`) mounts a cgroup
//! hierarchy on a `/tmp/unifiedXXXXXX` directory in the host's mount namespace to
//! give the payload the same place in the `name=systemd` hierarchy as in cgroup2 (the
//! host's systemd controller is the cgroup2 one, the container's the v1 one: the image
//! has no systemd), then unmounts and removes it (the mkdir, umount and rmdir seen
//! with strace). An nspawn killed within that window leaves that mount, which
//! [`Engine::remove`] does not know of.
//!
//! A pure cgroup v2 host is refused ([`EngineError::Unsupported`]). There the lab's
//! instance cgroup cannot both hold the command and have controllers enabled for the
//! container's, and nspawn would move its payload into a `payload` child of the
//! container's cgroup, where the lab would read no limits (inferred from what it does
//! in the cgroup2 hierarchy here, not run). This driver has been run on a hybrid host
//! only.
//!
//! # Security compared with isolab-runtime
//! nspawn's defaults: its capability set keeps e.g. `sys_admin`, `mknod`, `sys_ptrace`
//! and `net_admin` with a private network (isolab-runtime: Docker's 14), its seccomp
//! filter is an allowlist of its own, and `/proc/sys`, `/sys` are read-only. Without
//! systemd no device policy applies: nspawn's `DeviceAllow=` entries are properties
//! of the scope unit it does not create here, so no `devices` cgroup restricts the
//! container (isolab-runtime and runc, crun, LXC apply a device allowlist).
//!
//! # Removing
//! [`Engine::remove`] kills what is left in the container's cgroups (nspawn when the
//! command was SIGKILLed, and with it the container), removes the cgroups in every
//! hierarchy (also the `payload` and `supervisor` nspawn made, and the parent levels it
//! created in `name=systemd`), the run directory and nspawn's
//! `/run/systemd/nspawn/propagate/<id>` (which a killed nspawn leaves). [`Engine::gc`]
//! does that for every run directory and every propagate directory whose id has the
//! prefix. [`Engine::shutdown`] removes `/run/systemd/nspawn/propagate` and
//! `/run/systemd/nspawn` when they are empty and were not there when the engine was
//! made ready (nspawn creates them on its first run).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use isolab_cgroups::Version;
use isolab_runtime::ContainerId;

use crate::container_cgroup::create_limited;
use crate::dir_image::prepare_dir_image;
use crate::host::{Host, SystemHost};
use crate::mounts::{cgroup_version, mount_table};
use crate::request::{base_env, parent_rel, path_str};
use crate::run_state::{create_dir, gc_runs, Cleanup, RunState};
use crate::tool::{argv, require, version, SystemTools, Tools};
use crate::{Capabilities, Engine, EngineError, NetworkMode, PreparedImage, RunRequest};

const ENGINE: &str = "nspawn";
/// The container manager's program.
pub const PROGRAM: &str = "systemd-nspawn";
/// The Debian package of [`PROGRAM`].
pub const PACKAGE: &str = "systemd-container";
/// The static init bind-mounted as PID 1 (Debian package `tini`).
pub const INIT_PROGRAM: &str = "tini-static";
/// Where the init is bind-mounted in the container.
pub const INIT_PATH: &str = "/.isolab-init";
/// Where run directories live by default.
pub const DEFAULT_RUN_DIR: &str = "/run/isolab/nspawn";
/// Where nspawn makes a directory per machine (`<dir>/<machine name>`), bind-mounted
/// at `/run/host/incoming` in the container.
pub const DEFAULT_PROPAGATE_DIR: &str = "/run/systemd/nspawn/propagate";

/// The wrapper's script: writes its pid to each `cgroup.procs` file before `--`, then
/// runs the rest (see the module docs).
const WRAPPER: &str = r#"while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift
export SYSTEMD_NSPAWN_LOCK=0
exec "$@""#;

/// The host paths [`Nspawn`] uses; [`NspawnPaths::default`] gives this host's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NspawnPaths {
    /// One run directory per container (its state file).
    pub run_dir: PathBuf,
    /// This process's mount table (`/proc/self/mountinfo`).
    pub mountinfo: PathBuf,
    /// nspawn's directory of per-machine directories ([`DEFAULT_PROPAGATE_DIR`]).
    pub propagate: PathBuf,
}

impl Default for NspawnPaths {
    fn default() -> Self {
        NspawnPaths {
            run_dir: PathBuf::from(DEFAULT_RUN_DIR),
            mountinfo: PathBuf::from("/proc/self/mountinfo"),
            propagate: PathBuf::from(DEFAULT_PROPAGATE_DIR),
        }
    }
}

/// systemd-nspawn (Debian's `systemd-container` 252) as an [`Engine`].
pub struct Nspawn {
    /// The host paths.
    pub paths: NspawnPaths,
    tools: Arc<dyn Tools>,
    host: Arc<dyn Host>,
    /// nspawn's directories that did not exist when the engine was made ready (deepest
    /// first) and are still there, for [`Engine::shutdown`]; `None` before, and once
    /// shutdown removed them.
    absent_at_start: Mutex<Option<Vec<PathBuf>>>,
}

impl std::fmt::Debug for Nspawn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nspawn")
            .field("paths", &self.paths)
            .finish_non_exhaustive()
    }
}

impl Default for Nspawn {
    fn default() -> Self {
        Nspawn::new()
    }
}

impl Nspawn {
    /// systemd-nspawn on this host.
    pub fn new() -> Nspawn {
        Nspawn::with(
            NspawnPaths::default(),
            Arc::new(SystemTools),
            Arc::new(SystemHost),
        )
    }

    /// systemd-nspawn with explicit paths, programs and host effects (tests pass fakes).
    pub fn with(paths: NspawnPaths, tools: Arc<dyn Tools>, host: Arc<dyn Host>) -> Nspawn {
        Nspawn {
            paths,
            tools,
            host,
            absent_at_start: Mutex::new(None),
        }
    }

    /// The paths of systemd-nspawn, tini and sh, or what to install.
    fn programs(&self) -> Result<[PathBuf; 3], EngineError> {
        Ok([
            require(&*self.tools, ENGINE, PROGRAM, PACKAGE)?,
            require(&*self.tools, ENGINE, INIT_PROGRAM, "tini")?,
            require(&*self.tools, ENGINE, "sh", "dash")?,
        ])
    }

    /// Refuses a pure cgroup v2 host (see the module docs).
    fn check_cgroups(&self) -> Result<(), EngineError> {
        match cgroup_version(ENGINE, &self.paths.mountinfo)? {
            Version::V1 => Ok(()),
            Version::V2 => Err(EngineError::Unsupported {
                engine: ENGINE,
                detail: "this host has cgroup v2 only: the nspawn driver needs the v1 (or hybrid) controllers, where nspawn without systemd leaves its container in the limited cgroup isolab creates; use runc, crun, lxc, docker or podman".into(),
            }),
        }
    }

    fn run_dir(&self, id: &ContainerId) -> PathBuf {
        self.paths.run_dir.join(id)
    }

    fn remove_id(
        &self,
        id: &ContainerId,
        fallback_parent: &Path,
    ) -> Result<Vec<String>, EngineError> {
        let dir = self.run_dir(id);
        let state = RunState::load(ENGINE, &dir)?
            .unwrap_or_else(|| RunState::fallback(id, fallback_parent));
        let cleanup = Cleanup {
            engine: ENGINE,
            host: &self.host,
            mountinfo: &self.paths.mountinfo,
        };
        let mut lines = cleanup.run(&dir, &state)?;
        let machine = self.paths.propagate.join(id);
        match std::fs::remove_dir_all(&machine) {
            Ok(()) => lines.push(format!("{ENGINE}: removed {}", machine.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(EngineError::io(ENGINE, "remove", &machine)(e)),
        }
        Ok(lines)
    }

    /// nspawn's directories that do not exist now, deepest first.
    fn absent_nspawn_dirs(&self) -> Vec<PathBuf> {
        let top = self.paths.propagate.parent();
        [Some(self.paths.propagate.as_path()), top]
            .into_iter()
            .flatten()
            .filter(|d| !d.exists())
            .map(Path::to_path_buf)
            .collect()
    }
}

impl Engine for Nspawn {
    fn name(&self) -> &'static str {
        ENGINE
    }

    fn summary(&self) -> &'static str {
        "systemd-nspawn without systemd: a volatile overlay of the image, tini as PID 1, limits on a cgroup of the driver's own"
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::container(&[NetworkMode::None, NetworkMode::Host])
    }

    fn available(&self) -> Result<(), EngineError> {
        self.programs().map(|_| ())
    }

    fn version(&self) -> Result<String, EngineError> {
        let [nspawn, ..] = self.programs()?;
        version(
            &*self.tools,
            ENGINE,
            &nspawn,
            "a first line such as `systemd 252 (252.39-1~deb12u2)`",
            parse_version,
        )
    }

    fn ensure_ready(&self) -> Result<(), EngineError> {
        self.programs()?;
        self.check_cgroups()?;
        let mut absent = self
            .absent_at_start
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if absent.is_none() {
            *absent = Some(self.absent_nspawn_dirs());
        }
        Ok(())
    }

    fn prepare_image(&self, image: &Path) -> Result<PreparedImage, EngineError> {
        prepare_dir_image(ENGINE, image)
    }

    fn command(
        &self,
        request: &RunRequest,
        image: &PreparedImage,
    ) -> Result<Vec<String>, EngineError> {
        check_nspawn_request(request, Path::new(&image.reference))?;
        let [nspawn, init, sh] = self.programs()?;
        self.check_cgroups()?;
        let dir = self.run_dir(&request.id);
        if dir.exists() || self.paths.propagate.join(&request.id).exists() {
            // A leftover of a killed run with the same id.
            self.remove_id(&request.id, &request.cgroup_parent)?;
        }
        let mounts = mount_table(ENGINE, &self.paths.mountinfo)?;
        let rel = parent_rel(&request.cgroup_parent).join(&request.id);
        let state = RunState::new(request, vec![rel.clone()], Vec::new(), &mounts);
        let prepared = (|| {
            create_dir(ENGINE, &dir, "create the run directory")?;
            state.save(ENGINE, &dir)?;
            create_limited(ENGINE, &self.host, &mounts, &rel, &request.limits)
        })();
        let cgroup = match prepared {
            Ok(c) => c,
            Err(e) => {
                let _ = self.remove_id(&request.id, &request.cgroup_parent);
                return Err(e);
            }
        };
        let mut command = argv([path_str(&sh).as_str(), "-c", WRAPPER, "isolab-nspawn"]);
        command.extend(
            cgroup
                .paths()
                .into_iter()
                .map(|p| path_str(&p.join("cgroup.procs"))),
        );
        command.push("--".into());
        command.push(path_str(&nspawn));
        command.extend(nspawn_flags(request, &image.reference, &init));
        command.extend(argv(["--", INIT_PATH, "--"]));
        command.extend(request.argv.iter().cloned());
        Ok(command)
    }

    fn remove_container(&self, request: &RunRequest) -> Result<(), EngineError> {
        self.remove_id(&request.id, &request.cgroup_parent)
            .map(|_| ())
    }

    fn gc(&self, prefix: &str) -> Result<Vec<String>, EngineError> {
        // Also machines whose run directory is gone (it is removed first).
        let dirs = [self.paths.run_dir.clone(), self.paths.propagate.clone()];
        gc_runs(ENGINE, &dirs, prefix, |id| {
            self.remove_id(id, Path::new(""))
        })
    }

    fn shutdown(&self) -> Result<(), EngineError> {
        let mut absent = self
            .absent_at_start
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut kept = Vec::new();
        let mut first_error = None;
        for dir in absent.take().unwrap_or_default() {
            match std::fs::remove_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // In use by a container of another run: its remove empties it, a
                // later shutdown removes it.
                Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => kept.push(dir),
                Err(e) => {
                    first_error = first_error.or(Some(EngineError::io(ENGINE, "remove", &dir)(e)));
                    kept.push(dir);
                }
            }
        }
        if !kept.is_empty() {
            *absent = Some(kept);
        }
        first_error.map_or(Ok(()), Err)
    }
}

/// What this driver or nspawn's command line cannot do: a bridged network, a path with
/// `:` in `--bind` (its separator), a machine name that is no host name.
fn check_nspawn_request(request: &RunRequest, image: &Path) -> Result<(), EngineError> {
    let bad = |detail: String| {
        Err(EngineError::Unsupported {
            engine: ENGINE,
            detail,
        })
    };
    if request.network == NetworkMode::Bridge {
        return bad("network `bridge`: nspawn's --network-veth and --network-bridge need systemd-networkd or a bridge with addresses on the host side, which isolab does not manage for nspawn; use network `none` or `host`, or docker/podman or the `isolab` platform for a bridged container".into());
    }
    for (what, path) in [
        ("working directory", request.workdir.as_path()),
        ("image", image),
    ] {
        if path_str(path).contains(':') {
            return bad(format!(
                "{what} {}: nspawn's --bind and --directory cannot take a path with ':'",
                path.display()
            ));
        }
    }
    let id = request.id.as_str();
    if id.contains("..") || id.ends_with('.') {
        return bad(format!(
            "container id {id}: nspawn's machine name must be a valid host name (no empty label)"
        ));
    }
    Ok(())
}

/// systemd-nspawn's flags for `request` (see the module docs), up to the command.
fn nspawn_flags(request: &RunRequest, image: &str, init: &Path) -> Vec<String> {
    let workdir = path_str(&request.workdir);
    let mut flags = argv([
        "--quiet",
        "--register=no",
        "--keep-unit",
        &format!("--machine={}", request.id),
        &format!("--directory={image}"),
        "--volatile=overlay",
        "--console=pipe",
        "--link-journal=no",
        "--resolv-conf=off",
        "--timezone=off",
        "--kill-signal=SIGTERM",
        &format!("--bind-ro={}:{INIT_PATH}", path_str(init)),
        &format!("--bind={workdir}"),
        &format!("--chdir={workdir}"),
    ]);
    flags.extend(base_env(request).iter().map(|e| format!("--setenv={e}")));
    if request.network == NetworkMode::None {
        flags.push("--private-network".into());
    }
    flags
}

/// `systemd 252 (252.39-1~deb12u2)` (the first line of `systemd-nspawn --version`) →
/// `nspawn 252 (252.39-1~deb12u2)`.
fn parse_version(out: &str) -> Option<String> {
    let first = out.lines().next()?.trim();
    let v = first.strip_prefix("systemd ")?;
    v.starts_with(|c: char| c.is_ascii_digit())
        .then(|| format!("{ENGINE} {v}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::*;
    use isolab_cgroups::{CpuQuota, IdSet, Limits};

    /// The shared request, with a cpu quota and a cpuset.
    fn limited(workdir: &Path) -> RunRequest {
        RunRequest {
            limits: Limits {
                cpu: Some(CpuQuota::from_cpus(1.0, CpuQuota::DEFAULT_PERIOD).unwrap()),
                cpuset: Some("1".parse::<IdSet>().unwrap()),
                ..Limits::default()
            },
            ..request(workdir)
        }
    }

    fn engine(sys: &FakeSystem, tools: Arc<FakeTools>, host: Arc<FakeHost>) -> Nspawn {
        Nspawn::with(
            NspawnPaths {
                run_dir: sys.root.join("run/nspawn"),
                mountinfo: sys.mountinfo.clone(),
                propagate: sys.root.join("run/systemd/nspawn/propagate"),
            },
            tools,
            host,
        )
    }

    /// A fake v1 host with the lab's instance cgroup (its cpuset initialised).
    fn lab(dir: &Path) -> FakeSystem {
        let sys = FakeSystem::v1(dir, "");
        sys.lab_parent("isolab/t1/c0-r1");
        for (file, value) in [("cpuset.cpus", "0-1\n"), ("cpuset.mems", "0\n")] {
            std::fs::write(sys.cg("cpuset/isolab/t1/c0-r1").join(file), value).unwrap();
        }
        sys
    }

    #[test]
    fn run_command_wraps_nspawn_in_the_limited_cgroup_and_remove_undoes_it() {
        let dir = tempfile::tempdir().unwrap();
        let sys = lab(dir.path());
        let host = Arc::new(FakeHost::default());
        let e = engine(&sys, Arc::default(), host.clone());
        let req = limited(&sys.workdir);
        let cmd = e.run_command(&req, &image()).unwrap();
        let leaf = "isolab/t1/c0-r1/isolab-t1-c0-r1";
        let procs: Vec<String> = [
            "blkio", "cpu", "cpuacct", "cpuset", "freezer", "memory", "pids", "unified",
        ]
        .iter()
        .map(|c| path_str(&sys.cg(c).join(leaf).join("cgroup.procs")))
        .collect();
        let mut got_procs = cmd[4..4 + procs.len()].to_vec();
        got_procs.sort();
        assert_eq!(got_procs, procs);
        assert_eq!(cmd[..4], ["/usr/bin/sh", "-c", WRAPPER, "isolab-nspawn"]);
        let wd = sys.workdir.display();
        let rest = &cmd[4 + procs.len()..];
        assert_eq!(rest[..2], ["--", "/usr/bin/systemd-nspawn"]);
        assert_eq!(
            rest[2..rest.len() - 6],
            nspawn_flags(&req, "/images/bench", Path::new("/usr/bin/tini-static"))
        );
        assert_eq!(
            rest[rest.len() - 6..],
            ["--", "/.isolab-init", "--", "sysbench", "cpu", "run"]
        );
        let flags = nspawn_flags(&req, "/img", Path::new("/usr/bin/tini-static"));
        for flag in [
            "--register=no",
            "--keep-unit",
            "--machine=isolab-t1-c0-r1",
            "--directory=/img",
            "--volatile=overlay",
            "--console=pipe",
            "--kill-signal=SIGTERM",
            "--bind-ro=/usr/bin/tini-static:/.isolab-init",
            &format!("--bind={wd}"),
            &format!("--chdir={wd}"),
            "--setenv=TERM=xterm",
            "--setenv=FOO=bar",
        ] {
            assert!(flags.iter().any(|f| f == flag), "{flag} in {flags:?}");
        }
        assert_eq!(flags.last().unwrap(), "--private-network");
        let on_host = RunRequest {
            network: NetworkMode::Host,
            ..req.clone()
        };
        assert!(!nspawn_flags(&on_host, "/img", Path::new("/t"))
            .contains(&"--private-network".to_string()));
        // The limits are on the container's cgroup before anything runs.
        let read = |p: PathBuf| std::fs::read_to_string(p).unwrap();
        assert_eq!(
            read(sys.cg("cpu").join(leaf).join("cpu.cfs_quota_us")),
            "100000"
        );
        assert_eq!(read(sys.cg("cpuset").join(leaf).join("cpuset.cpus")), "1");
        let run = sys.root.join("run/nspawn/isolab-t1-c0-r1");
        assert!(run.join("isolab-run.json").is_file());

        // What a run killed with its nspawn leaves: the workload in the v1 cgroups,
        // nspawn's payload and supervisor in name=systemd (with the parent levels it
        // created there) and in unified, its machine directory.
        std::fs::write(sys.cg("pids").join(leaf).join("cgroup.procs"), "777\n").unwrap();
        for c in ["systemd", "unified"] {
            for sub in ["payload", "supervisor"] {
                std::fs::create_dir_all(sys.cg(c).join(leaf).join(sub)).unwrap();
            }
        }
        let machine = sys
            .root
            .join("run/systemd/nspawn/propagate/isolab-t1-c0-r1");
        std::fs::create_dir_all(&machine).unwrap();
        e.remove(&req).unwrap();
        assert!(host.calls().contains(&"kill 777".to_string()));
        assert!(!run.exists() && !machine.exists());
        for c in V1_CONTROLLERS.iter().chain(&["unified"]) {
            assert!(!sys.cg(c).join(leaf).exists(), "{c}");
        }
        assert!(
            !sys.cg("systemd/isolab").exists(),
            "nspawn's levels are pruned"
        );
        assert!(
            sys.cg("cpu/isolab/t1/c0-r1").is_dir(),
            "the lab's parent stays"
        );
        e.remove(&req).unwrap();
    }

    #[test]
    fn a_failed_limit_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        // The instance's cpuset is not initialised: the child cannot be either.
        sys.lab_parent("isolab/t1/c0-r1");
        let e = engine(&sys, Arc::default(), Arc::default());
        let err = e.run_command(&request(&sys.workdir), &image()).unwrap_err();
        assert!(matches!(err, EngineError::Cgroup { .. }), "{err}");
        assert!(!sys.root.join("run/nspawn/isolab-t1-c0-r1").exists());
        assert!(!sys.cg("cpu/isolab/t1/c0-r1/isolab-t1-c0-r1").exists());
    }

    #[test]
    fn gc_finds_run_and_machine_directories_with_the_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let sys = lab(dir.path());
        let e = engine(&sys, Arc::default(), Arc::default());
        for d in [
            "run/nspawn/isolab-e1-a",
            "run/nspawn/isolab-e2-a",
            "run/systemd/nspawn/propagate/isolab-e1-b",
            "run/systemd/nspawn/propagate/other",
        ] {
            std::fs::create_dir_all(sys.root.join(d)).unwrap();
        }
        let lines = e.gc("isolab-e1-").unwrap();
        assert!(!sys.root.join("run/nspawn/isolab-e1-a").exists());
        assert!(sys.root.join("run/nspawn/isolab-e2-a").exists());
        assert!(!sys
            .root
            .join("run/systemd/nspawn/propagate/isolab-e1-b")
            .exists());
        assert!(sys.root.join("run/systemd/nspawn/propagate/other").exists());
        assert!(
            lines
                .iter()
                .any(|l| l == "nspawn: removed container isolab-e1-b"),
            "{lines:?}"
        );
    }

    #[test]
    fn shutdown_removes_only_the_empty_directories_nspawn_made() {
        let dir = tempfile::tempdir().unwrap();
        let sys = lab(dir.path());
        let e = engine(&sys, Arc::default(), Arc::default());
        e.ensure_ready().unwrap();
        let propagate = sys.root.join("run/systemd/nspawn/propagate");
        std::fs::create_dir_all(propagate.join("isolab-busy")).unwrap();
        e.shutdown().unwrap();
        assert!(propagate.join("isolab-busy").is_dir(), "in use: kept");
        std::fs::remove_dir(propagate.join("isolab-busy")).unwrap();
        e.ensure_ready().unwrap();
        e.shutdown().unwrap();
        assert!(!sys.root.join("run/systemd/nspawn").exists());
        assert!(sys.root.join("run/systemd").is_dir());
        // Directories that were there before are the host's.
        std::fs::create_dir_all(&propagate).unwrap();
        e.ensure_ready().unwrap();
        e.shutdown().unwrap();
        assert!(propagate.is_dir());
    }

    #[test]
    fn refusals_name_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let sys = lab(dir.path());
        let e = engine(&sys, Arc::default(), Arc::default());
        let mut req = request(&sys.workdir);
        req.network = NetworkMode::Bridge;
        let err = e.run_command(&req, &image()).unwrap_err().to_string();
        assert!(
            err.contains("bridge") && err.contains("docker/podman"),
            "{err}"
        );
        let colon = sys.root.join("a:b");
        std::fs::create_dir_all(&colon).unwrap();
        let err = e
            .run_command(&request(&colon), &image())
            .unwrap_err()
            .to_string();
        assert!(err.contains("':'"), "{err}");
        let mut dots = request(&sys.workdir);
        dots.id = "isolab-a..b".parse().unwrap();
        assert!(e.run_command(&dots, &image()).is_err());
        assert!(!sys.root.join("run/nspawn").exists(), "nothing was made");

        let v2 = tempfile::tempdir().unwrap();
        let sys2 = FakeSystem::v2(v2.path());
        let e2 = engine(&sys2, Arc::default(), Arc::default());
        let err = e2.ensure_ready().unwrap_err().to_string();
        assert!(err.contains("cgroup v2"), "{err}");

        let tools = Arc::new(FakeTools {
            missing: vec![PROGRAM.into()],
            ..FakeTools::default()
        });
        let e = engine(&sys, tools, Arc::default());
        let err = e.available().unwrap_err().to_string();
        assert!(err.contains("apt-get install systemd-container"), "{err}");
        assert_eq!(
            e.host_address(NetworkMode::Host).as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(e.host_address(NetworkMode::None), None);
    }

    #[test]
    fn versions() {
        let tools = Arc::new(FakeTools::default());
        tools.answer(
            "systemd-nspawn --version",
            0,
            "systemd 252 (252.39-1~deb12u2)\n+PAM +AUDIT default-hierarchy=unified\n",
        );
        let dir = tempfile::tempdir().unwrap();
        let sys = lab(dir.path());
        let e = engine(&sys, tools, Arc::default());
        assert_eq!(e.version().unwrap(), "nspawn 252 (252.39-1~deb12u2)");
        assert_eq!(parse_version("systemd-nspawn: unknown option\n"), None);
        assert_eq!(parse_version(""), None);
    }
}
