//! Drivers of the third-party container engines isolab compares with its own
//! runtime: Docker, Podman, runc, crun, LXC and systemd-nspawn; and Docker and
//! Podman with isolab-runtime as their OCI runtime (`docker+isolab`,
//! `podman+isolab`).
//!
//! Each engine implements [`Engine`]: it checks that it is installed (and says which
//! Debian package to install when it is not), makes itself ready (Docker's daemon
//! is started by isolab when none runs, and stopped again with the host's iptables
//! and `ip_forward` restored), imports the experiment's image once
//! ([`Engine::prepare_image`]: `docker import`, `podman import`, an overlay root for
//! runc/crun, LXC and nspawn), and turns a [`RunRequest`] into the one foreground command
//! that runs the workload in a container: the shape and placement become the
//! engine's own flags or configuration (or, for nspawn without systemd, a cgroup
//! the driver creates), and the container's cgroup is nested below
//! the [`RunRequest::cgroup_parent`] the lab created, where the lab finds it
//! ([`find_container_cgroup`]) and reads the limits back from the kernel.
//!
//! The crate knows nothing of experiments; the lab's platform adapters use it.
//!
//! # Layout
//! One file per engine on top, shared helpers below them; an engine uses only the
//! helpers and this file, never another engine. `oci.rs` is the one driver every
//! OCI runtime shares (`OciEngine` over an `OciKind` descriptor; runc's and crun's
//! descriptors live there), so an OCI runtime's own file, such as `youki.rs`, is a
//! descriptor that uses it:
//!
//! ```text
//!  engines   docker.rs   podman.rs     oci.rs (runc, crun)   lxc.rs   nspawn.rs
//!                 \         /                    \            |         /
//!  helpers   host_net, image_tar,            host, request, dir_image,
//!            run_flags, parent_cgroups       run_state, container_cgroup
//!                 hybrid_fix (podman and runc/crun)
//!                        \                        /
//!  below all             mounts, tool, error (fakes: tests only)
//! ```
//!
//! - [`host_net`]: the netfilter rules, `ip_forward` and bridge a daemon changes,
//!   recorded before it starts and restored after (Docker, Podman).
//! - [`image_tar`]: the image packed once as a cached tar for `docker import` /
//!   `podman import`, and the imported image's repository name.
//! - [`run_flags`]: the `run` flags Docker and Podman share (name, cgroup parent,
//!   network, workdir, environment, limits).
//! - `parent_cgroups`: removal of the parent cgroup copies OCI runtimes leave in the
//!   v1 hierarchies the lab does not manage.
//! - `hybrid_fix`: the one hybrid-cgroup fix for crun (runc/crun driver, Podman
//!   with crun): v1 hierarchies mounted for the controllers cgroup2 lists, each step
//!   recorded on disk before it is taken, undone at shutdown, or by `gc` when the
//!   process that made it is gone.
//! - `mounts`: the host's mount table, its cgroup hierarchies and version.
//! - [`host`]: the host effects of the OCI-style drivers (mounts, signals, cgroup
//!   directories) behind [`host::Host`], with the real [`host::SystemHost`].
//! - `request`, `dir_image`, `run_state`: a request's checks, an image directory as
//!   an overlay's lower layer, run directories with their state file and cleanup
//!   (runc, crun, LXC, nspawn).
//! - [`container_cgroup`]: the container's cgroup with the request's limits, created
//!   below the lab's parent by a driver whose engine does not create one itself.
//! - [`tool`]: finding and running the engines' programs; [`error`]: [`EngineError`].
//! - `fakes` (tests only): the fake tools, host and cgroup trees the engines' unit
//!   tests share.

pub mod capabilities;
pub mod docker;
pub mod lxc;
pub mod nspawn;
pub mod oci;
pub mod podman;
pub mod youki;

pub mod container_cgroup;
mod dir_image;
pub mod error;
#[cfg(test)]
mod fakes;
pub mod host;
pub mod host_net;
mod hybrid_fix;
pub mod image_tar;
mod mounts;
mod own_image;
mod parent_cgroups;
mod request;
pub mod run_flags;
mod run_state;
pub mod tool;
mod volumes;

use std::path::{Path, PathBuf};

use isolab_cgroups::Limits;
use isolab_runtime::ContainerId;

pub use capabilities::{Capabilities, LimitKinds, StorageLevel};
pub use error::EngineError;
pub use parent_cgroups::remove_dead_foreign_parents;

/// Every container engine of this build, configured as the lab runs them: the one
/// list that spec validation, `isolab list --platforms`, `isolab bench-start` and
/// `isolab gc` read. A new engine is a new file and one line here.
///
/// crun (directly and under Podman) may fix a hybrid cgroup host for the
/// experiment (a v1 hierarchy for each controller the cgroup2 mount lists, recorded
/// on disk first and undone at shutdown or by `gc`).
pub fn registry() -> Vec<Box<dyn Engine>> {
    vec![
        Box::new(docker::Docker::new()),
        Box::new(docker::Docker::new().with_isolab_runtime()),
        Box::new(podman::Podman::new(podman::OciRuntime::Crun, true)),
        Box::new(podman::Podman::new(podman::OciRuntime::Isolab, false)),
        Box::new(oci::OciEngine::new(oci::RUNC)),
        Box::new(oci::OciEngine::new(oci::CRUN).allowing_host_fixes(true)),
        Box::new(oci::OciEngine::new(youki::YOUKI)),
        Box::new(lxc::Lxc::new()),
        Box::new(nspawn::Nspawn::new()),
    ]
}

/// The network an instance gets (a spec's `network = "…"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkMode {
    /// A network namespace of its own with only loopback.
    None,
    /// The host's network namespace.
    Host,
    /// Attached to the engine's bridge (isolab's `isolab0`, Docker's `docker0`,
    /// Podman's `podman` network, …).
    Bridge,
}

impl NetworkMode {
    /// Parses `none`, `host` or `bridge`.
    pub fn parse(s: &str) -> Option<NetworkMode> {
        match s {
            "none" => Some(NetworkMode::None),
            "host" => Some(NetworkMode::Host),
            "bridge" => Some(NetworkMode::Bridge),
            _ => None,
        }
    }

    /// Its name in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            NetworkMode::None => "none",
            NetworkMode::Host => "host",
            NetworkMode::Bridge => "bridge",
        }
    }
}

impl std::fmt::Display for NetworkMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One container to run in the foreground.
#[derive(Debug, Clone)]
pub struct RunRequest {
    /// Unique name of the container on this host. Docker and Podman also require
    /// it to start with [`ID_PREFIX`], so that [`Engine::gc`] finds it.
    pub id: ContainerId,
    /// The workload's command line, run in the container.
    pub argv: Vec<String>,
    /// Bind-mounted read-write at the same path in the container, and the command's
    /// working directory.
    pub workdir: PathBuf,
    /// The container's network.
    pub network: NetworkMode,
    /// The limits to apply to the container's cgroup.
    pub limits: Limits,
    /// The cgroup (relative to each hierarchy's root, e.g. `isolab/exp3-pid42/c0-r1`)
    /// below which the engine must create the container's cgroup.
    pub cgroup_parent: PathBuf,
    /// Environment variables for the command (`KEY=VALUE`).
    pub env: Vec<String>,
}

/// Prefix of every container id isolab creates.
pub const ID_PREFIX: &str = "isolab-";

/// Refuses an id without [`ID_PREFIX`] ([`EngineError::MissingIdPrefix`]), for engines
/// whose [`Engine::gc`] finds isolab's containers by it among everyone's.
fn check_id_prefix(engine: &'static str, id: &ContainerId) -> Result<(), EngineError> {
    if id.as_str().starts_with(ID_PREFIX) {
        Ok(())
    } else {
        Err(EngineError::MissingIdPrefix {
            engine,
            id: id.clone(),
            prefix: ID_PREFIX,
        })
    }
}

/// The experiment's image as an engine can run it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PreparedImage {
    /// What the engine's run command names: an image reference (`isolab/bench:<digest>`)
    /// or a root filesystem directory.
    pub reference: String,
    /// The digest or checksum that identifies the imported content (recorded in the
    /// experiment's environment).
    pub digest: String,
    /// The image directory it was prepared from.
    pub source: PathBuf,
}

/// A container engine.
pub trait Engine: Send + Sync {
    /// Its name as a platform engine in specs: `docker`, `podman`, `runc`, `crun`, `lxc`.
    fn name(&self) -> &'static str;

    /// One line saying what it is, for `isolab list --platforms`.
    fn summary(&self) -> &'static str;

    /// What it can do: networks, limits, whether perf counters follow the workload.
    fn capabilities(&self) -> Capabilities;

    /// Whether it can be used on this host, without changing anything (no daemon
    /// started): its programs are installed and the user may run them. The error
    /// says what to install or do.
    fn available(&self) -> Result<(), EngineError>;

    /// The engine's version (`docker version`'s server version, `runc --version`, …),
    /// or what to install when it is missing.
    fn version(&self) -> Result<String, EngineError>;

    /// Makes the engine usable: checks its programs, starts its daemon when it needs
    /// one and none runs. Idempotent.
    fn ensure_ready(&self) -> Result<(), EngineError>;

    /// Imports or converts the image directory `image` once for this engine (the
    /// second call with the same content is cheap).
    fn prepare_image(&self, image: &Path) -> Result<PreparedImage, EngineError>;

    /// Whether the engine keeps one namespace of container names for every user of
    /// the host (Docker, Podman), so that its [`Engine::gc`] finds isolab's containers
    /// by [`ID_PREFIX`] among everyone's: then every request's id must carry it. By
    /// default `false`: the engine's state directory is isolab's own (runc, crun,
    /// youki, LXC, nspawn).
    fn shares_names(&self) -> bool {
        false
    }

    /// Checks `request` before anything touches the host. Provided: an engine that
    /// [shares names](Engine::shares_names) needs the id prefix and a command (its
    /// daemon checks the rest); any other gets every check of an OCI-style driver
    /// (command, working directory, cgroup parent, environment).
    fn check_request(&self, request: &RunRequest) -> Result<(), EngineError> {
        if !self.shares_names() {
            return request::check_request(self.name(), request);
        }
        check_id_prefix(self.name(), &request.id)?;
        if request.argv.is_empty() {
            return Err(EngineError::Unsupported {
                engine: self.name(),
                detail: format!("run {}: empty command line", request.id),
            });
        }
        Ok(())
    }

    /// Prepares everything `request` needs (bundle, config file, overlay) and
    /// returns the foreground command that runs it: it exits with the workload's
    /// status, passes the workload's stdout and stderr through, and on SIGTERM stops
    /// the container. Provided: [`Engine::check_request`], then [`Engine::command`].
    fn run_command(
        &self,
        request: &RunRequest,
        image: &PreparedImage,
    ) -> Result<Vec<String>, EngineError> {
        self.check_request(request)?;
        self.command(request, image)
    }

    /// [`Engine::run_command`] after the request passed [`Engine::check_request`]:
    /// what only this engine does.
    fn command(
        &self,
        request: &RunRequest,
        image: &PreparedImage,
    ) -> Result<Vec<String>, EngineError>;

    /// Removes what [`Engine::run_command`] and the run left (container, bundle,
    /// overlay mount), also when the command was killed. Idempotent. Provided: an
    /// engine that [shares names](Engine::shares_names) removes only ids with
    /// [`ID_PREFIX`]; then [`Engine::remove_container`].
    fn remove(&self, request: &RunRequest) -> Result<(), EngineError> {
        if self.shares_names() {
            check_id_prefix(self.name(), &request.id)?;
        }
        self.remove_container(request)
    }

    /// [`Engine::remove`] after its check: what only this engine does.
    fn remove_container(&self, request: &RunRequest) -> Result<(), EngineError>;

    /// The address at which a container on `network` reaches a server listening on
    /// the host (Docker's bridge gateway, `127.0.0.1` for the host network), or
    /// `None` when it cannot. By default `127.0.0.1` on the host network and `None`
    /// on any other (engines without a bridge of their own).
    fn host_address(&self, network: NetworkMode) -> Option<String> {
        (network == NetworkMode::Host).then(|| "127.0.0.1".to_owned())
    }

    /// Creates the engine's named volume `name` (storage `volume`; `name` starts with
    /// [`ID_PREFIX`], so that [`Engine::gc`] finds it) and returns the host directory
    /// that holds its data. Only engines whose capabilities list
    /// [`StorageLevel::Volume`] have volumes.
    fn create_volume(&self, name: &str) -> Result<PathBuf, EngineError> {
        Err(EngineError::Unsupported {
            engine: self.name(),
            detail: format!("no named volumes (asked for `{name}`)"),
        })
    }

    /// Removes the named volume `name` made by [`Engine::create_volume`].
    fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        Err(EngineError::Unsupported {
            engine: self.name(),
            detail: format!("no named volumes (asked to remove `{name}`)"),
        })
    }

    /// Removes containers (and named volumes) whose name starts with `prefix` (e.g.
    /// those of a dead experiment); returns one line per thing removed.
    fn gc(&self, prefix: &str) -> Result<Vec<String>, EngineError>;

    /// Undoes host-wide changes of runs that are gone (a hybrid-cgroup fix whose
    /// every user was killed), whatever experiment they belonged to; one line per
    /// thing undone. Nothing by default.
    fn gc_host_fixes(&self) -> Result<Vec<String>, EngineError> {
        Ok(Vec::new())
    }

    /// Undoes [`Engine::ensure_ready`]: stops a daemon isolab started and restores
    /// the host state it changed. Idempotent.
    fn shutdown(&self) -> Result<(), EngineError>;
}

/// The container's cgroup below `parent` in the hierarchy mounted at `mount` (e.g.
/// `/sys/fs/cgroup/cpu`): the deepest descendant that holds processes
/// ([`isolab_cgroups::deepest_populated`]), or `None` while the container has not
/// started.
pub fn find_container_cgroup(mount: &Path, parent: &Path) -> Option<PathBuf> {
    let root = mount.join(parent.strip_prefix("/").unwrap_or(parent));
    isolab_cgroups::deepest_populated(&root)
        .and_then(|p| p.strip_prefix(mount).ok().map(|r| Path::new("/").join(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deepest_cgroup_with_processes_is_the_container() {
        let dir = tempfile::tempdir().unwrap();
        let m = dir.path();
        let parent = m.join("isolab/exp1/c0-r1");
        std::fs::create_dir_all(parent.join("docker-abc/inner")).unwrap();
        std::fs::write(parent.join("cgroup.procs"), "12\n").unwrap();
        std::fs::write(parent.join("docker-abc/cgroup.procs"), "").unwrap();
        assert_eq!(
            find_container_cgroup(m, Path::new("/isolab/exp1/c0-r1")),
            None
        );
        std::fs::write(parent.join("docker-abc/cgroup.procs"), "42\n").unwrap();
        assert_eq!(
            find_container_cgroup(m, Path::new("/isolab/exp1/c0-r1")),
            Some(PathBuf::from("/isolab/exp1/c0-r1/docker-abc"))
        );
        std::fs::write(parent.join("docker-abc/inner/cgroup.procs"), "43\n").unwrap();
        assert_eq!(
            find_container_cgroup(m, Path::new("isolab/exp1/c0-r1")),
            Some(PathBuf::from("/isolab/exp1/c0-r1/docker-abc/inner"))
        );
    }
}
