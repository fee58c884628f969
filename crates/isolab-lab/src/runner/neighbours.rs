//! A run's neighbours and the cell's reservation: what the neighbours are sized
//! against (capacities and the subject's solo profile, calibrated once per
//! process), the plan of neighbour instances within what the reservation leaves
//! them, and the limits of subject and neighbours under the reservation.

use std::time::Duration;

use isolab_cgroups::Limits;

use super::workdir::DiskFacts;
use super::{host_memory, Runner};
use crate::neighbour::{
    self, Capacity, CommandContext, Intensity, NeighbourKind, NeighbourLevel, NeighbourPlan, Rate,
    SoloProfile, SoloRun,
};
use crate::platform::{DiskTarget, Job, NeighbourJobs, NetTarget, PlatformError};
use crate::reservation::{reserve, DiskShare, NetShare, Reservation, ReserveRequest, Reserved};
use crate::spec::Cell;

/// How long neighbours run before the subject's command starts.
pub const NEIGHBOUR_SETTLE: Duration = Duration::from_secs(1);

/// What a run's neighbours are sized against.
#[derive(Debug, Default)]
struct Sizing {
    /// The kernel's name of the disk under the working directories.
    disk_name: Option<String>,
    /// The disk's capacity in IOPS, where the level or the reservation needs it.
    disk_iops: Option<f64>,
    /// The network's capacity in Mbit/s, where the level or the reservation needs it.
    net_mbps: Option<f64>,
    /// What the subject uses alone.
    solo: SoloProfile,
    /// Remarks on the calibrations measured for this run.
    notes: Vec<String>,
}

impl Runner<'_> {
    /// Gives `jobs`, a run of `cell` named `name` whose subject is limited to
    /// `limits`, the cell's neighbours (to the first job) and the subject's limits
    /// under the cell's reservation; with a note when something was calibrated for
    /// this run. Where the neighbours are sized against the subject's solo profile,
    /// `solo` measures it (a service stack's run alone); without, the first job is
    /// run alone.
    pub(super) fn set_neighbours(
        &self,
        (cell, name, limits): (&Cell, &str, &Limits),
        jobs: &mut [Job],
        disk: &DiskFacts,
        solo: Option<SoloRun<'_>>,
    ) -> Result<Option<String>, PlatformError> {
        let (subject, note) = if let Some(level) = &cell.neighbour {
            let (neighbours, subject, note) =
                self.neighbours(cell, level, (&jobs[0], solo), disk)?;
            jobs[0].neighbours = Some(neighbours);
            (subject, note)
        } else if cell.reservation != Reservation::None {
            (self.reserved_alone(cell, name, limits, disk)?, None)
        } else {
            return Ok(None);
        };
        for job in jobs {
            job.limits = subject.clone();
        }
        Ok(note)
    }

    /// The subject's limits under the cell's reservation without neighbour: bound
    /// (or limited) exactly as it is when they are there. Only cpuset changes the
    /// subject's side, so no capacity is measured here.
    fn reserved_alone(
        &self,
        cell: &Cell,
        name: &str,
        limits: &Limits,
        disk: &DiskFacts,
    ) -> Result<Limits, PlatformError> {
        let pool = self.cell_cpus(cell);
        let reserved = reserve(&ReserveRequest {
            reservation: cell.reservation,
            subject: limits,
            subject_cpus: cell.shape.cpus(),
            host_cpus: &pool,
            host_memory: host_memory(),
            neighbours: 0,
            kind: None,
            disk: disk.device.map(|device| DiskShare {
                device,
                capacity_iops: 1.0,
                solo_iops: 0.0,
            }),
            net: Some(NetShare {
                capacity_mbps: 1.0,
                solo_mbps: 0.0,
            }),
        })
        .map_err(|source| PlatformError::Reservation {
            job: name.to_owned(),
            source,
        })?;
        Ok(reserved.subject)
    }

    /// The neighbour instances of a run of `cell` and the subject's limits under the
    /// cell's reservation; with a note when the subject's solo profile was measured
    /// for this run.
    fn neighbours(
        &self,
        cell: &Cell,
        level: &NeighbourLevel,
        (job, solo): (&Job, Option<SoloRun<'_>>),
        disk: &DiskFacts,
    ) -> Result<(NeighbourJobs, Limits, Option<String>), PlatformError> {
        let memory = host_memory();
        let pool = self.cell_cpus(cell);
        let mut sizing = self.sizing(cell, level, (job, solo), disk)?;
        let refuse = |source| PlatformError::Reservation {
            job: job.name.clone(),
            source,
        };
        let request = |neighbours: u32| ReserveRequest {
            reservation: cell.reservation,
            subject: &job.limits,
            subject_cpus: cell.shape.cpus(),
            host_cpus: &pool,
            host_memory: memory,
            neighbours,
            kind: Some(level.kind),
            disk: match (disk.device, sizing.disk_iops) {
                (Some(device), Some(capacity_iops)) => Some(DiskShare {
                    device,
                    capacity_iops,
                    solo_iops: sizing.solo.disk_iops,
                }),
                _ => None,
            },
            net: sizing.net_mbps.map(|capacity_mbps| NetShare {
                capacity_mbps,
                solo_mbps: sizing.solo.net_gbps * 1000.0,
            }),
        };
        // What the reservation leaves the neighbours bounds what the plan can add;
        // then the limits are shared among the instances planned.
        let bound = reserve(&request(1)).map_err(refuse)?;
        let capacity = Capacity {
            cpus: pool.len() as f64,
            disk_iops: sizing.disk_iops,
            net_gbps: sizing.net_mbps.map(|m| m / 1000.0),
            memory_bytes: memory.0,
            neighbour_cpus: Some(bound.neighbour_cpus),
        };
        let plan = neighbour::plan(level, &capacity, &sizing.solo).map_err(|source| {
            PlatformError::NeighbourPlan {
                job: job.name.clone(),
                source: Box::new(source),
            }
        })?;
        let mut reserved = reserve(&request(plan.instances)).map_err(refuse)?;
        if cell.host_cpus.is_some() && reserved.neighbour.cpuset.is_none() {
            // The pool confines the neighbours too.
            reserved.neighbour.cpuset = Some(pool.clone());
        }
        let subject_cpus = reserved.subject.cpuset.as_ref().unwrap_or(&pool);
        let neighbour_cpus = reserved.neighbour.cpuset.as_ref().unwrap_or(&pool);
        // Bound apart, they may still share cores: SMT siblings.
        let apart = subject_cpus.iter().all(|c| !neighbour_cpus.contains(*c));
        let shared = self
            .config
            .topology
            .shared_cores(subject_cpus, neighbour_cpus);
        if apart && !shared.is_empty() {
            sizing.notes.push(format!(
                "the subject's cpus {shared} are SMT siblings of the neighbours' cpus {neighbour_cpus}: they share cores"
            ));
        }
        if let (Some(target), Some(reachable)) = (plan.target, plan.reachable) {
            sizing.notes.push(format!(
                "reservation `{}` leaves the neighbours {} cpus: with the subject's {:.2} they reach at most {reachable:.1}% of the target {target:.1}%, and runs are checked against that",
                cell.reservation, bound.neighbour_cpus, sizing.solo.cpus_used
            ));
        }
        let note = (!sizing.notes.is_empty()).then(|| sizing.notes.join("; "));
        let neighbours = neighbour_jobs(level, &plan, &reserved, sizing, disk, job);
        Ok((neighbours, reserved.subject, note))
    }

    /// What the neighbours of `level` in a run of `cell` are sized against: the
    /// capacities and the subject's solo profile that the level (a utilisation
    /// target) or the cell's reservation needs, each calibrated once per process;
    /// the solo profile by `solo`, or by running `job` alone.
    fn sizing(
        &self,
        cell: &Cell,
        level: &NeighbourLevel,
        (job, solo): (&Job, Option<SoloRun<'_>>),
        disk: &DiskFacts,
    ) -> Result<Sizing, PlatformError> {
        let mut sizing = Sizing {
            disk_name: disk.device.and_then(crate::neighbour::disk_name),
            ..Sizing::default()
        };
        let utilisation = matches!(level.intensity, Intensity::Utilisation(_));
        let wants_disk = utilisation && level.kind == NeighbourKind::Disk;
        // The `net` reservation rates the network neighbours' interface: other kinds
        // send nothing, so it changes nothing for them.
        let wants_net = level.kind == NeighbourKind::Network
            && (utilisation || cell.reservation.needs_net_capacity());
        if wants_disk || cell.reservation.needs_disk_capacity() {
            let (iops, note) =
                self.calibrations
                    .disk_capacity(self.platform, self.interrupt, job, disk.direct)?;
            sizing.notes.extend(note);
            sizing.disk_iops = Some(iops);
        }
        if wants_net {
            let (mbps, note) =
                self.calibrations
                    .net_capacity(self.platform, self.interrupt, job)?;
            sizing.notes.extend(note);
            sizing.net_mbps = Some(mbps);
        }
        if utilisation || cell.reservation.needs_disk_capacity() || wants_net {
            let alone = |start: &dyn Fn()| {
                let mut alone = job.clone();
                alone.neighbours = None;
                alone.name = format!("{}-solo", job.name);
                start();
                self.platform.execute(&alone, self.interrupt)
            };
            let (solo, note) = self.calibrations.solo_profile(
                cell,
                sizing.disk_name.as_deref(),
                solo.unwrap_or(&alone),
            )?;
            sizing.notes.extend(note);
            sizing.solo = solo;
        }
        Ok(sizing)
    }
}

/// The neighbour instances of `plan` for `level`, each limited to what the
/// reservation leaves them, working in `job`'s directory; with the targets their
/// load is checked against.
fn neighbour_jobs(
    level: &NeighbourLevel,
    plan: &NeighbourPlan,
    reserved: &Reserved,
    sizing: Sizing,
    disk: &DiskFacts,
    job: &Job,
) -> NeighbourJobs {
    let network = level.kind == NeighbourKind::Network;
    let limits = reserved.neighbour.clone();
    let instances = neighbour::commands(
        plan,
        &CommandContext {
            workdir: job.workdir.clone(),
            direct: disk.direct,
            memory_limit: limits.memory_max.map(|b| b.0),
            index: 0,
            direction: level.net_direction(),
        },
    );
    let target = match level.intensity {
        Intensity::Utilisation(u) => Some(100.0 * u),
        Intensity::Count(_) => None,
    };
    NeighbourJobs {
        level: level.to_string(),
        instances,
        limits,
        target_util_pct: target.filter(|_| level.kind == NeighbourKind::Cpu),
        reachable_util_pct: plan.reachable,
        disk_target: match (level.kind, target, sizing.disk_name, sizing.disk_iops) {
            (NeighbourKind::Disk, Some(t), Some(name), Some(cap)) => Some(DiskTarget {
                device: name,
                capacity_iops: cap,
                target_pct: t,
            }),
            _ => None,
        },
        net_target: match (network, target, sizing.net_mbps) {
            (true, Some(t), Some(cap)) => Some(NetTarget {
                capacity_mbps: cap,
                target_pct: t,
                direction: level.net_direction(),
            }),
            _ => None,
        },
        net_rate_mbps: reserved.neighbour_net_mbps.filter(|_| network),
        loads_pct: match level.kind {
            NeighbourKind::Cpu => (0..plan.instances)
                .map(|i| match plan.rate_of(i) {
                    Rate::CpuLoadPct(p) => f64::from(p),
                    _ => 100.0,
                })
                .collect(),
            _ => Vec::new(),
        },
        settle: NEIGHBOUR_SETTLE,
        network_servers: if network { plan.instances } else { 0 },
    }
}

/// The neighbours' limits of `execution` as stored with its run (`limits.neighbours`):
/// as read back from their cgroups, with their summary; nothing without neighbours.
pub(super) fn stored_neighbour_limits(
    execution: &crate::platform::Execution,
    limits: &mut serde_json::Value,
) {
    if let Some(applied) = &execution.neighbour_limits {
        limits["neighbours"] = serde_json::json!({
            "applied": applied,
            "summary": crate::shape::describe_limits(applied),
        });
    }
}
