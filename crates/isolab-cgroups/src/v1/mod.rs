//! The v1 interface: one hierarchy per controller, one file per controller here.
//!
//! Each function takes the cgroup's directory in each mounted controller; a limit
//! whose controller is not mounted is [`Error::NotMounted`], checked before anything
//! is written.

pub(crate) mod blkio;
pub(crate) mod cpu;
pub(crate) mod cpuacct;
pub(crate) mod cpuset;
pub(crate) mod freezer;
pub(crate) mod memory;
pub(crate) mod pids;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::hierarchy::Controller;
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
    if let Some(max) = limits.pids_max {
        pids::apply(need(dirs, Controller::Pids)?, max)?;
    }
    if !io.is_empty() {
        blkio::apply(need(dirs, Controller::Blkio)?, &io)?;
    }
    Ok(())
}

pub(crate) fn read_limits(dirs: &Dirs) -> Result<Limits, Error> {
    let mut limits = Limits::default();
    if let Some(dir) = dirs.get(&Controller::Cpu) {
        limits.cpu = cpu::read(dir)?;
    }
    if let Some(dir) = dirs.get(&Controller::Cpuset) {
        (limits.cpuset, limits.mems) = cpuset::read(dir)?;
    }
    if let Some(dir) = dirs.get(&Controller::Memory) {
        (limits.memory_max, limits.memory_swap_max) = memory::read(dir)?;
    }
    if let Some(dir) = dirs.get(&Controller::Pids) {
        limits.pids_max = pids::read(dir)?;
    }
    if let Some(dir) = dirs.get(&Controller::Blkio) {
        limits.io = blkio::read(dir)?;
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
