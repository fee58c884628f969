//! Noisy neighbours (seed 001's stress "bombs"): what they are, how hard they push,
//! and the commands that realise them.
//!
//! - [`NeighbourLevel`] is a level of the `neighbour` factor: a [`NeighbourKind`] and
//!   an [`Intensity`], written `cpu` (one instance), `cpu*4` (four instances) or
//!   `cpu@90%` (the contended resource 90% used, the subject included).
//! - [`plan()`] turns a level, the host's [`Capacity`] and the subject's solo
//!   [`SoloProfile`] into a [`NeighbourPlan`]: how many instances and at which
//!   [`Rate`] each runs. It is pure arithmetic, unit-tested with fakes.
//! - [`commands()`] turns a plan into one argv per instance, each a Debian tool run
//!   without a shell: `stress-ng` (cpu, memory, fork, cache), `fio` (disk) and
//!   `iperf3` (network, between the namespaces of a [`NeighbourNet`]).
//! - Calibration: [`disk_capacity_command`] / [`parse_fio_iops`] measure the disk's
//!   capacity, [`net_capacity_command`] / [`parse_iperf3_gbps`] the network's; both
//!   read the tools' JSON output. `Calibrations` runs them (and the subject's solo
//!   run) once per process on the platform, for the runner.
//! - While a run lasts: `start_neighbours` starts the instances in cgroups of their
//!   own next to the subject's, through the platform's launcher, and stops them
//!   after the subject, adding their telemetry and notes to its run.
//! - Verification: [`achieved`] computes the utilisation reached from telemetry
//!   ([`Observed`]) and [`off_target`] flags runs more than
//!   [`OFF_TARGET_POINTS`] percentage points away from their target.
//!
//! | kind | tool | intensity |
//! |---|---|---|
//! | `cpu` | `stress-ng --cpu 1 --cpu-method all --cpu-load P` | count, or utilisation of all cpus |
//! | `memory` | `stress-ng --vm 1 --vm-bytes B --vm-keep` (allocates, touches, never releases) | count only |
//! | `fork` | `stress-ng --fork 1`, held by the caller's pids limit | count only |
//! | `disk` | `fio` random 50/50 read/write, 32 KiB, psync, direct, optional `--rate_iops` | count, or utilisation of the measured iops |
//! | `network` | `iperf3` TCP client in namespace a (in a guest: on isolab's bridge) to a server in namespace b, optional `-b` | count, or utilisation of the measured throughput |
//! | `cache` | `stress-ng --cache 1` (even instances), `--stream 1` (odd ones) | count only |

mod bridge;
mod calibrate;
mod command;
mod kind;
mod level;
mod measure;
mod net;
mod plan;
mod run;
mod shaping;

pub use bridge::{BridgeAddress, BridgeError, BridgePort, RuntimeBridge};
pub(crate) use calibrate::{Calibrations, SoloRun};
pub use command::{
    command, commands, disk_capacity_command, net_capacity_command, parse_fio_iops,
    parse_iperf3_gbps, CommandContext, JsonError, DEFAULT_MEMORY_BYTES, DISK_FILE_SIZE,
    MEMORY_FILL,
};
pub use kind::NeighbourKind;
pub use level::{Intensity, LevelError, NeighbourLevel, NetDirection, MAX_COUNT};
pub use measure::{
    achieved, busiest_rx, disk_ios, disk_name, diskstats_ios, net_dev_rx, net_rx, off_target,
    Observed, OFF_TARGET_POINTS,
};
pub use net::{
    namespace_pids, rate_differs, stale_namespaces, IpCommands, NeighbourNet, NetCommands,
    NetError, NetNames, BASE_PORT,
};
pub use plan::{plan, Capacity, NeighbourPlan, PlanError, Rate, SoloProfile, CALIBRATION_IODEPTH};
pub(crate) use run::{start_neighbours, NeighbourSite};
pub use shaping::{ifb_name, stale_ifbs, ShapedTap};
