//! The v1 interface: one hierarchy per controller, one file per controller here.
//!
//! Each function takes the cgroup's directory in each mounted controller; a limit
//! whose controller is not mounted is [`Error::NotMounted`], and cgroup v2 files
//! (`unified`) are [`Error::UnifiedOnV1`], both checked before anything is written.

pub(crate) mod blkio;
pub(crate) mod cpu;
pub(crate) mod cpuacct;
pub(crate) mod cpuset;
pub(crate) mod freezer;
pub(crate) mod hugetlb;
pub(crate) mod memory;
pub(crate) mod pids;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::controller::Controller;
use crate::error::Error;
use crate::limits::{IoThrottle, Limits};
use crate::stats::Stats;

/// The cgroup's directory in each mounted v1 controller.
pub(crate) type Dirs = BTreeMap<Controller, PathBuf>;

fn need(dirs: &Dirs, controller: Controller) -> Result<&Path, Error> {
    dirs.get(&controller)
        .map(PathBuf::as_path)
        .ok_or(Error::NotMounted { controller })
}

fn limited_io(limits: &Limits) -> Vec<IoThrottle> {
    limits
        .io
        .iter()
        .filter(|t| !t.is_unlimited())
        .copied()
        .collect()
}

pub(crate) fn apply(dirs: &Dirs, limits: &Limits) -> Result<(), Error> {
    if !limits.unified.is_empty() {
        return Err(Error::UnifiedOnV1 {
            names: limits.unified.keys().cloned().collect(),
        });
    }
    let io = limited_io(limits);
    // Check every controller first so that a missing one leaves nothing half-applied.
    let wanted = limits.controllers_needed(Controller::Blkio, !io.is_empty());
    for (controller, wanted) in wanted {
        if wanted {
            need(dirs, controller)?;
        }
    }
    if let Some(q) = &limits.cpu {
        cpu::apply(need(dirs, Controller::Cpu)?, q)?;
    }
    if let Some(w) = limits.cpu_weight {
        cpu::apply_weight(need(dirs, Controller::Cpu)?, w)?;
    }
    if limits.cpuset.is_some() || limits.mems.is_some() {
        cpuset::apply(
            need(dirs, Controller::Cpuset)?,
            limits.cpuset.as_ref(),
            limits.mems.as_ref(),
        )?;
    }
    if limits.memory_max.is_some() || limits.memory_swap_max.is_some() {
        memory::apply(
            need(dirs, Controller::Memory)?,
            limits.memory_max,
            limits.memory_swap_max,
        )?;
    }
    if let Some(r) = limits.memory_reservation {
        memory::apply_reservation(need(dirs, Controller::Memory)?, r)?;
    }
    if !limits.v1_only().is_empty() {
        memory::apply_v1_only(need(dirs, Controller::Memory)?, limits)?;
    }
    if let Some(max) = limits.pids_max {
        pids::apply(need(dirs, Controller::Pids)?, max)?;
    }
    if !io.is_empty() {
        blkio::apply(need(dirs, Controller::Blkio)?, &io)?;
    }
    if !limits.hugetlb.is_empty() {
        hugetlb::apply(need(dirs, Controller::Hugetlb)?, &limits.hugetlb)?;
    }
    Ok(())
}

pub(crate) fn read_limits(dirs: &Dirs) -> Result<Limits, Error> {
    let mut limits = Limits::default();
    if let Some(dir) = dirs.get(&Controller::Cpu) {
        limits.cpu = cpu::read(dir)?;
        limits.cpu_weight = cpu::read_weight(dir)?;
    }
    if let Some(dir) = dirs.get(&Controller::Cpuset) {
        (limits.cpuset, limits.mems) = cpuset::read(dir)?;
    }
    if let Some(dir) = dirs.get(&Controller::Memory) {
        (limits.memory_max, limits.memory_swap_max) = memory::read(dir)?;
        limits.memory_reservation = memory::read_reservation(dir)?;
        memory::read_v1_only(dir, &mut limits)?;
    }
    if let Some(dir) = dirs.get(&Controller::Pids) {
        limits.pids_max = pids::read(dir)?;
    }
    if let Some(dir) = dirs.get(&Controller::Blkio) {
        limits.io = blkio::read(dir)?;
    }
    if let Some(dir) = dirs.get(&Controller::Hugetlb) {
        limits.hugetlb = hugetlb::read(dir)?;
    }
    Ok(limits)
}

pub(crate) fn stats(dirs: &Dirs, stats: &mut Stats) -> Result<(), Error> {
    if let Some(dir) = dirs.get(&Controller::Cpuacct) {
        cpuacct::stats(dir, stats)?;
    }
    if let Some(dir) = dirs.get(&Controller::Cpu) {
        cpu::stats(dir, stats)?;
    }
    if let Some(dir) = dirs.get(&Controller::Memory) {
        memory::stats(dir, stats)?;
    }
    if let Some(dir) = dirs.get(&Controller::Blkio) {
        blkio::stats(dir, stats)?;
    }
    if let Some(dir) = dirs.get(&Controller::Pids) {
        pids::stats(dir, stats)?;
    }
    Ok(())
}
