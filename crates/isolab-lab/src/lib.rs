//! The isolab experiment model: everything between a spec file and the store.
//!
//! - [`spec`]: TOML specs parsed with spans, validated against the host
//!   ([`spec::HostFacts`]) and expanded into [`spec::Cell`]s; errors name file,
//!   line and column.
//! - [`shape`]: named instance sizes and placements (`shared`, `quota`, `pinned`),
//!   turned into cgroup [`isolab_cgroups::Limits`].
//! - [`platform`]: the [`platform::Executor`] trait and the `host` platform, which
//!   runs a workload in a cgroup of its own, reads its limits back, and collects
//!   telemetry (cgroup cpu, throttling, memory peak, io, PSI, context switches, cpu
//!   migrations, per-core host utilisation) into an [`isolab_store::TelemetrySet`],
//!   under the typed [`isolab_store::Telemetry`] keys the store and the report share.
//!   Every platform's instances live through one supervisor (scope cgroup,
//!   prepare and cleanup, neighbours, latency probe, removal), and every process
//!   starts through a [`platform::Launcher`] ([`platform::RealLauncher`] spawns
//!   real ones).
//! - [`neighbour`]: noisy neighbours: levels, plans, commands, their calibration
//!   and their start and stop around a run.
//! - [`runner`]: shuffled rounds, warm-ups, adaptive repetitions, one transaction
//!   per run, interruption and resume.
//! - [`storage`]: the `storage` factor at run time: the working directory mounted on a
//!   tmpfs, an overlay, an ext4 image, a loop device per instance or a striped
//!   device-mapper device, read back from the mount table and removed after the run
//!   and by `gc`.
//! - [`environment`]: what the host is, stored with every experiment.
//! - [`telemetry`]: the per-core utilisation sampler.
//! - `testing` (feature `testing`): a scripted launcher and a fake cgroupfs, with
//!   which a whole experiment runs through the real runner, platforms and store
//!   without root.

pub mod assets;
pub mod environment;
pub mod neighbour;
pub mod phases;
pub mod platform;
pub mod probe;
pub mod reservation;
pub mod reused;
pub mod runner;
pub mod shape;
pub mod spec;
pub mod storage;
pub mod telemetry;
#[cfg(feature = "testing")]
pub mod testing;
pub mod topology;

pub use platform::{Executor, Interrupt, PlatformKind, Supervisor, SupervisorConfig};
pub use runner::{Event, Observer, Outcome, RunError, Runner, RunnerConfig, Silent};
pub use spec::{Cell, Estimate, ExperimentSpec, HostFacts, Source, SpecError, SpecErrors};
