//! Create, limit, attach, measure and remove Linux control groups, cgroup v1 and v2
//! behind one interface.
//!
//! - [`Hierarchy`] says where the controllers are mounted: detected from
//!   `/proc/self/mountinfo`, parsed from its text, or built from a root directory
//!   ([`Hierarchy::v1_under`], [`Hierarchy::v2`]) so that tests can use a fake
//!   cgroupfs in a temporary directory. v1 with separate or co-mounted controllers,
//!   pure v2, and hybrid mode (v1 controllers plus a cgroup2 mount used for PSI and
//!   `cgroup.kill`) are supported.
//! - [`Cgroup`] is one control group across every controller: [`Cgroup::create`]
//!   (with intermediate directories, v1 cpuset initialisation and v2
//!   `cgroup.subtree_control`), [`Cgroup::apply`] / [`Cgroup::read_limits`] of
//!   [`Limits`], [`Cgroup::attach`] or [`Cgroup::attacher`] for a child that attaches
//!   itself before `exec` ([`Cgroup::clone_target`] for a `clone3` caller),
//!   [`Cgroup::stats`] ([`Stats`], with [`Pressure`]),
//!   [`Cgroup::kill_all`] and [`Cgroup::remove`].
//! - [`list_below`] finds leftovers for `isolab gc`.
//! - Without root: [`Delegated`] checks that the caller's cgroup v2 subtree is delegated to
//!   it (and which controllers), and [`Delegated::claim`] moves the caller into a leaf so
//!   that the subtree can pass controllers on to the cgroups it creates.
//! - [`read_mountinfo`] is isolab's one reader of `/proc/self/mountinfo`: typed
//!   [`MountEntry`] lines with octal escapes decoded, errors naming the file and
//!   line ([`mountinfo_path`] takes the proc root as a parameter).
//! - Cgroup subtrees, also in hierarchies isolab does not manage: [`subtree`] walks
//!   one children first, [`has_processes`], [`populated`] and [`deepest_populated`]
//!   find processes in it, [`remove_tree`] removes it bottom-up (optionally killing
//!   what is inside, retrying busy directories) and [`rmdir_retrying`] waits for
//!   one busy directory.
//! - Value types: [`IdSet`] (cpu lists like `0-2,4`), [`Bytes`], [`CpuQuota`],
//!   [`CpuWeight`] (v1 shares or v2 weight, each convertible to the other),
//!   [`DeviceNumber`], [`IoThrottle`], [`HugePageSize`] and [`HugetlbLimit`].
//! - [`Error`] names the path of every failure and, for writes, the data written.
//!
//! Directory creation, removal and `kill(2)` go through the [`Syscalls`] trait
//! ([`RealSyscalls`] by default) so that a test double can emulate the kernel on a
//! plain directory tree (`testing::FakeKernel`, with the feature `testing`). Each
//! controller's files are handled in one module per controller under `v1/` and `v2/`; the parsers of the kernel's file formats are
//! pure functions with unit tests.
//!
//! ```no_run
//! use isolab_cgroups::{Bytes, Cgroup, CpuQuota, Hierarchy, Limits};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let h = Hierarchy::detect()?;
//! let cgroup = Cgroup::create(&h, "isolab/1/run-1".as_ref())?;
//! cgroup.apply(&Limits {
//!     cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD)?),
//!     memory_max: Some(Bytes::mib(256)),
//!     ..Limits::default()
//! })?;
//! cgroup.attach(std::process::id())?;
//! println!("{:?}", cgroup.stats()?.cpu_usage);
//! # Ok(()) }
//! ```

mod borrowed_v1;
mod bytes;
mod cgroup;
mod clone3;
mod controller;
mod delegation;
mod device;
mod error;
mod file;
mod format;
mod hierarchy;
mod idset;
mod limits;
mod mountinfo;
mod psi;
mod stats;
mod syscalls;
#[cfg(feature = "testing")]
pub mod testing;
mod tree;
mod v1;
mod v2;

pub use borrowed_v1::{borrow_listed, cgroup2_listed, listed_in_cgroup2, BorrowedV1};
pub use bytes::Bytes;
pub use cgroup::{list_below, Attacher, Cgroup, CloneTarget, Entered};
pub use clone3::{clone3, clone3_vfork, CloneArgs, VforkChild, CLONE_INTO_CGROUP};
pub use controller::Controller;
pub use delegation::{
    own_v2_path, Access, Claimed, Delegated, DelegationError, HostAccess, SUPERVISOR_LEAF,
};
pub use device::DeviceNumber;
pub use error::{Error, InvalidValue};
pub use file::read_pseudo_file;
pub use hierarchy::{Hierarchy, Version};
pub use idset::IdSet;
pub use limits::{CpuQuota, CpuWeight, HugePageSize, HugetlbLimit, IoThrottle, Limits};
pub use mountinfo::{mountinfo_path, parse_mountinfo, read_mountinfo, Malformed, MountEntry};
pub use psi::{Pressure, Psi, PsiLines};
pub use stats::Stats;
pub use syscalls::{RealSyscalls, Syscalls};
pub use tree::{
    deepest_populated, has_processes, populated, procs, remove_tree, rmdir_retrying, subtree,
    RemoveTree, RemovedTree, PROCESS_LEAF,
};
