//! isolab-runtime: a small, fast container runtime with secure defaults.
//!
//! [`run`] takes a [`ContainerConfig`] (built from flags, or from an OCI bundle with
//! [`oci::from_bundle`]) and runs one container to completion:
//!
//! - namespaces: pid (the runtime's init is PID 1, reaps zombies, forwards
//!   signals, exits with the command's status or 128 + signal), mount (private
//!   propagation, `pivot_root`, old root detached), uts, ipc, cgroup, net (unless
//!   `host`), user (optional);
//! - root filesystem ([`Rootfs`]): a directory (bind, optionally read-only), an
//!   overlay (throw-away tmpfs upper or a kept one), or an ext4 image on a loop
//!   device with autoclear ([`loopdev`]); minimal /dev, /proc, read-only /sys,
//!   Docker's masked and read-only paths; host files and directories bound in
//!   ([`BindMount`], read-write or read-only);
//! - security defaults ([`security`]): Docker's capabilities, `no_new_privs`, Docker's
//!   seccomp profile, and the device allowlist in a cgroup v1 `devices` cgroup (not
//!   enforced on cgroup v2 yet: [`Exit::notes`] says so);
//! - limits through `isolab-cgroups` under a configurable parent cgroup
//!   ([`ContainerConfig::cgroup_parent`], created when missing and removed again),
//!   applied and read back before the container runs any code ([`Exit::limits`]); the
//!   cgroup's counters are read after the container exits ([`Exit::stats`]);
//! - networks `none`, `host` and `bridge` with published ports ([`network`]);
//! - a [`Trace`] of phase timestamps ([`Phase`]), and a JSON [`Report`] of the whole
//!   run (`isolab-runtime run --report FILE`) that the lab reads back;
//! - state files under `/run/isolab` so that [`gc`] undoes what a killed runtime left;
//! - [`ContainerId`], the one container-id type of isolab: the runtime, the engines
//!   and the lab all name containers with it.
//!
//! [`oci_spec()`] turns the same configuration into an OCI runtime spec that runc and
//! crun run unchanged. The module docs of [`container`] explain how start-up is
//! sequenced so that the container never runs outside its cgroup.
//!
//! ```no_run
//! use isolab_runtime::{run, ContainerConfig, Rootfs};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rootfs = Rootfs::Dir { path: "/srv/busybox".into(), readonly: true };
//! let config = ContainerConfig::new(rootfs, vec!["sh".into(), "-c".into(), "echo $$".into()]);
//! let exit = run(&config)?;
//! assert_eq!(exit.status, 0);
//! # Ok(()) }
//! ```

pub mod config;
pub mod container;
pub mod error;
pub mod hooks;
pub mod id;
pub mod lifecycle;
pub mod loopdev;
pub mod network;
pub mod oci;
pub mod report;
pub mod security;
pub mod state;
mod sys;
pub mod trace;

pub use config::{
    default_security, BindMount, ContainerConfig, Lifecycle, NetworkChoice, PortMapping, Rootfs,
    Stdio,
};
pub use container::devices::remove_devices_mirror;
pub use container::{backing_device, create, run, run_in, Created, Exit};
pub use error::RuntimeError;
pub use id::{ContainerId, IdProblem, InvalidContainerId};
pub use oci::oci_spec;
pub use report::Report;
pub use state::gc;
pub use trace::{trace_json, Phase, Trace};
