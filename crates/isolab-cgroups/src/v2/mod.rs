//! The v2 interface: one directory per cgroup; controllers are enabled for children
//! through the parent's `cgroup.subtree_control`. One file per controller here
//! (`pids` shares the v1 file, whose interface is identical).

pub(crate) mod cpu;
pub(crate) mod cpuset;
pub(crate) mod hugetlb;
pub(crate) mod io;
pub(crate) mod memory;
pub(crate) mod unified;

use std::path::Path;

use crate::controller::Controller;
use crate::error::Error;
use crate::file;
use crate::format::words;
use crate::limits::{IoThrottle, Limits};
use crate::psi;
use crate::stats::Stats;
use crate::v1::pids;

/// The controllers listed in `dir/cgroup.controllers` (empty when absent).
pub(crate) fn available(dir: &Path) -> Result<Vec<String>, Error> {
    let text = file::read_opt(&dir.join("cgroup.controllers"))?.unwrap_or_default();
    Ok(words(&text).into_iter().map(str::to_owned).collect())
}

/// The controllers of interest that `parent` offers but does not yet pass on to its
/// children, as a `cgroup.subtree_control` write: `"+cpu +memory"`; `None` when
/// nothing is missing.
pub(crate) fn subtree_control_update(controllers: &str, subtree_control: &str) -> Option<String> {
    let available = words(controllers);
    let enabled = words(subtree_control);
    let missing: Vec<String> = Controller::V2
        .iter()
        .map(|c| c.name())
        .filter(|name| available.contains(name) && !enabled.contains(name))
        .map(|name| format!("+{name}"))
        .collect();
    (!missing.is_empty()).then(|| missing.join(" "))
}

/// Enables the controllers of interest that `parent` offers in its
/// `cgroup.subtree_control`, so that its children get them; a parent the caller may not
/// write (not its own) is left as it is.
pub(crate) fn enable_controllers(parent: &Path) -> Result<(), Error> {
    let Some(controllers) = file::read_opt(&parent.join("cgroup.controllers"))? else {
        return Ok(());
    };
    let control = parent.join("cgroup.subtree_control");
    let enabled = file::read_opt(&control)?.unwrap_or_default();
    match subtree_control_update(&controllers, &enabled) {
        // An ancestor that is not the caller's (above a subtree delegated to an unprivileged
        // user) passes on what its owner chose: what it does not is missing below, where a
        // limit that needs it names it (`Error::NotEnabled`).
        Some(data) => match file::write(&control, &data) {
            Err(Error::Write { source, .. })
                if matches!(source.raw_os_error(), Some(libc::EACCES | libc::EPERM)) =>
            {
                Ok(())
            }
            other => other,
        },
        None => Ok(()),
    }
}

fn limited_io(limits: &Limits) -> Vec<IoThrottle> {
    limits
        .io
        .iter()
        .filter(|t| !t.is_unlimited())
        .copied()
        .collect()
}

pub(crate) fn apply(dir: &Path, limits: &Limits) -> Result<(), Error> {
    if limits.is_empty() {
        return Ok(());
    }
    let v1_only = limits.v1_only();
    if !v1_only.is_empty() {
        return Err(Error::V1Only {
            names: v1_only.into_iter().map(str::to_owned).collect(),
        });
    }
    let io = limited_io(limits);
    let available = available(dir)?;
    let wanted = limits.controllers_needed(Controller::Io, !io.is_empty());
    // Check every controller first so that a missing one leaves nothing half-applied.
    for (controller, wanted) in wanted {
        if wanted && !available.iter().any(|a| a == controller.name()) {
            return Err(Error::NotEnabled {
                controller,
                path: dir.to_owned(),
            });
        }
    }
    unified::check(dir, &available, &limits.unified)?;
    if let Some(q) = &limits.cpu {
        cpu::apply(dir, q)?;
    }
    if let Some(w) = limits.cpu_weight {
        cpu::apply_weight(dir, w)?;
    }
    cpuset::apply(dir, limits.cpuset.as_ref(), limits.mems.as_ref())?;
    memory::apply(dir, limits.memory_max, limits.memory_swap_max)?;
    if let Some(r) = limits.memory_reservation {
        memory::apply_reservation(dir, r)?;
    }
    if let Some(max) = limits.pids_max {
        pids::apply(dir, max)?;
    }
    io::apply(dir, &io)?;
    hugetlb::apply(dir, &limits.hugetlb)?;
    // Last, so that they win over the typed limits (as with runc and crun).
    unified::apply(dir, &limits.unified)
}

pub(crate) fn read_limits(dir: &Path) -> Result<Limits, Error> {
    let (cpuset, mems) = cpuset::read(dir)?;
    let (memory_max, memory_swap_max) = memory::read(dir)?;
    Ok(Limits {
        cpu: cpu::read(dir)?,
        cpuset,
        mems,
        memory_max,
        memory_swap_max,
        pids_max: pids::read(dir)?,
        io: io::read(dir)?,
        cpu_weight: cpu::read_weight(dir)?,
        memory_reservation: memory::read_reservation(dir)?,
        hugetlb: hugetlb::read(dir)?,
        ..Limits::default()
    })
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    cpu::stats(dir, stats)?;
    memory::stats(dir, stats)?;
    io::stats(dir, stats)?;
    pids::stats(dir, stats)?;
    stats.psi = psi::read_pressure(dir)?;
    Ok(())
}

/// Writes `1` to `cgroup.kill` (Linux 5.14+), which SIGKILLs every process in the
/// cgroup and its descendants atomically. Returns `false` when the file is absent.
pub(crate) fn kill(dir: &Path) -> Result<bool, Error> {
    let path = dir.join("cgroup.kill");
    if !path.exists() {
        return Ok(false);
    }
    file::write(&path, "1")?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_only_v1_has_are_refused_by_name_before_anything_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            memory_max: Some(crate::Bytes::mib(64)),
            memory_swappiness: Some(10),
            oom_kill_disabled: true,
            ..Limits::default()
        };
        let err = apply(dir.path(), &limits).unwrap_err();
        assert!(
            matches!(&err, Error::V1Only { names } if names == &["memory.swappiness", "memory.disableOOMKiller"]),
            "{err:?}"
        );
        assert!(err.to_string().contains("cgroup v2 host"), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn subtree_control_adds_only_missing_available_controllers() {
        assert_eq!(
            subtree_control_update(
                "cpuset cpu io memory hugetlb pids rdma misc\n",
                "memory pids\n"
            ),
            Some("+cpu +cpuset +io +hugetlb".to_owned())
        );
        assert_eq!(subtree_control_update("cpu memory\n", "cpu memory\n"), None);
        // Controllers isolab does not use are not enabled.
        assert_eq!(subtree_control_update("rdma misc\n", ""), None);
    }
}
