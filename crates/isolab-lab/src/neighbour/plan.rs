//! Calibration arithmetic: from a level, the host's capacity and the subject's solo
//! profile to a number of neighbour instances and the rate of each.

use super::kind::NeighbourKind;
use super::level::{percent_text, Intensity, NeighbourLevel};

/// Outstanding I/Os of the disk calibration run ([`super::disk_capacity_command`]).
pub const CALIBRATION_IODEPTH: u32 = 16;

/// Outstanding I/Os of each disk neighbour that has a utilisation target (libaio,
/// like the calibration). Synchronous (`psync`) jobs, one I/O each, cannot reach
/// a share of a capacity measured with 16 outstanding I/Os on a small host: each
/// costs a process and a system call per I/O, and here 11 of them did 24k IOPS
/// where the calibration did 35k (and next to a subject, half their target).
/// Counted disk neighbours (`disk*N`) stay one synchronous stream each, as the
/// study's FIO bomb threads.
pub const NEIGHBOUR_IODEPTH: u32 = 4;

/// What the host can do.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Capacity {
    /// Cpus the experiment may use.
    pub cpus: f64,
    /// Random 50/50 read/write IOPS (32 KiB blocks) of the working directory's
    /// disk, measured by [`super::disk_capacity_command`]; `None` until measured.
    pub disk_iops: Option<f64>,
    /// TCP throughput between the neighbour namespaces in Gbit/s, measured by
    /// [`super::net_capacity_command`]; `None` until measured.
    pub net_gbps: Option<f64>,
    /// The host's memory in bytes.
    pub memory_bytes: u64,
    /// Cpus the neighbours may use together under the cell's reservation
    /// (`cpuset`, `quota`); `None` = all of [`Capacity::cpus`].
    pub neighbour_cpus: Option<f64>,
}

/// What the subject uses alone, from the telemetry of its solo runs.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SoloProfile {
    /// Cpus used on average (cpu time / wall time).
    pub cpus_used: f64,
    /// Disk operations per second (reads + writes).
    pub disk_iops: f64,
    /// Network throughput in Gbit/s.
    pub net_gbps: f64,
}

/// How fast each neighbour instance runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Rate {
    /// As fast as it can.
    Unlimited,
    /// A cpu worker busy this percentage of the time (1..=100).
    CpuLoadPct(u32),
    /// At most this many disk operations per second, reads and writes together.
    Iops(u64),
    /// At most this many Mbit/s.
    Mbps(u64),
}

/// The neighbours of a run: how many and how fast.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct NeighbourPlan {
    /// What they stress.
    pub kind: NeighbourKind,
    /// How many instances.
    pub instances: u32,
    /// The rate of each (but the last when [`NeighbourPlan::last`] is set).
    pub per_instance: Rate,
    /// The rate of the last instance when it differs from the others: the part of
    /// a cpu target below one whole worker. Several workers at an equal partial
    /// duty cycle fall short of their sum (their busy phases collide on the cpus),
    /// whole workers plus one partial worker do not.
    pub last: Option<Rate>,
    /// Utilisation of the contended resource to reach, subject included, in percent
    /// of its capacity; `None` for counts.
    pub target: Option<f64>,
    /// When the reservation keeps the neighbours from reaching the target: the
    /// utilisation they can reach at most (the subject's solo use plus all the cpus
    /// they may use), in percent. Runs are checked against this instead.
    pub reachable: Option<f64>,
}

impl NeighbourPlan {
    /// The rate of instance `i` (0-based).
    pub fn rate_of(&self, i: u32) -> Rate {
        match self.last {
            Some(last) if i + 1 == self.instances => last,
            _ => self.per_instance,
        }
    }
}

/// Cpus of a cpu target below which the part beyond whole workers is left out: it
/// is within half of the 5-point tolerance on 2 cpus, and a worker at a 1-4% duty
/// cycle mostly adds scheduling noise.
pub const CPU_SLACK: f64 = 0.05;

/// A level that cannot be realised on this host.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// Memory, fork and cache neighbours have no capacity to take a share of.
    #[error("neighbour `{level}`: {kind} neighbours take a count only (e.g. `{kind}*4`), not a utilisation: their pressure cannot be held at a share of a capacity, so seed 001 increases their count instead")]
    CountOnly {
        /// The level as written.
        level: String,
        /// Its kind.
        kind: NeighbourKind,
    },
    /// The subject alone already uses at least the target.
    #[error("neighbour `{level}`: the subject alone already uses {solo} of the host's {capacity} ({solo_pct}%), which reaches the target of {target_pct}%; choose a higher target or a count (e.g. `{kind}*1`)")]
    SubjectExceedsTarget {
        /// The level as written.
        level: String,
        /// Its kind.
        kind: NeighbourKind,
        /// What the subject uses, with its unit.
        solo: String,
        /// The capacity, with its unit.
        capacity: String,
        /// The subject's share in percent.
        solo_pct: String,
        /// The target in percent.
        target_pct: String,
    },
    /// The capacity of the resource has not been measured.
    #[error("neighbour `{level}` needs the measured {what}; run its calibration first ({how})")]
    CapacityUnknown {
        /// The level as written.
        level: String,
        /// Which capacity.
        what: &'static str,
        /// How to measure it.
        how: &'static str,
    },
    /// A capacity is zero, negative or not a number.
    #[error("neighbour `{level}`: the host's {what} is {value}, which cannot be planned against; measure it again")]
    BadCapacity {
        /// The level as written.
        level: String,
        /// Which capacity.
        what: &'static str,
        /// Its value.
        value: f64,
    },
}

/// Plans the neighbours of `level` on a host with `capacity` next to a subject with
/// `solo` profile.
///
/// - `Count(n)`: `n` instances at full intensity ([`Rate::Unlimited`]; cpu workers
///   at [`Rate::CpuLoadPct`]`(100)`).
/// - `Utilisation(u)` of the contended resource, subject included: the neighbours
///   must add `need = u·capacity − solo`.
///   - cpu: `⌊need⌋` workers at full load plus one at the remaining part
///     ([`NeighbourPlan::last`]; left out when it is at most [`CPU_SLACK`]). At
///     full usage (`cpu@100%`) every worker is at full load (`⌈need − slack⌉` of
///     them): the neighbours take what the host has left. When the reservation
///     leaves the neighbours fewer cpus than `need`
///     ([`Capacity::neighbour_cpus`]), they get all of those at full load and
///     [`NeighbourPlan::reachable`] says how far that takes the host.
///   - disk: `k = ⌈need/capacity · CALIBRATION_IODEPTH / NEIGHBOUR_IODEPTH⌉` libaio
///     jobs of [`NEIGHBOUR_IODEPTH`] outstanding I/Os each (as many as the
///     calibration needed for that share), each limited to `need/k` IOPS; at full
///     usage not limited.
///   - network: one stream limited to `need` (one unlimited stream is what the
///     calibration measured); at full usage not limited.
///   - memory, fork, cache: [`PlanError::CountOnly`].
///
/// `need ≤ 0` is [`PlanError::SubjectExceedsTarget`].
pub fn plan(
    level: &NeighbourLevel,
    capacity: &Capacity,
    solo: &SoloProfile,
) -> Result<NeighbourPlan, PlanError> {
    let kind = level.kind;
    let u = match level.intensity {
        Intensity::Count(n) => {
            return Ok(NeighbourPlan {
                kind,
                instances: n,
                per_instance: match kind {
                    NeighbourKind::Cpu => Rate::CpuLoadPct(100),
                    _ => Rate::Unlimited,
                },
                last: None,
                target: None,
                reachable: None,
            })
        }
        Intensity::Utilisation(u) => u,
    };
    let name = level.to_string();
    let target = Some(100.0 * u);
    let usable = |what: &'static str, value: f64| {
        if value.is_finite() && value > 0.0 {
            Ok(value)
        } else {
            Err(PlanError::BadCapacity {
                level: name.clone(),
                what,
                value,
            })
        }
    };
    let exceeds = |cap: f64, used: f64, unit: &str| PlanError::SubjectExceedsTarget {
        level: name.clone(),
        kind,
        solo: format!("{used:.2} {unit}"),
        capacity: format!("{cap:.2} {unit}"),
        solo_pct: percent_text((100.0 * used / cap * 10.0).round() / 10.0),
        target_pct: percent_text(100.0 * u),
    };
    // Needs below this are rounding noise of a subject at the target.
    const EPS: f64 = 1e-9;
    // Full usage: the neighbours are not held to a rate but take what they can,
    // so that a reservation (which caps them) has something to hold back.
    let full = u >= 1.0 - EPS;
    match kind {
        NeighbourKind::Memory | NeighbourKind::Fork | NeighbourKind::Cache => {
            Err(PlanError::CountOnly { level: name, kind })
        }
        NeighbourKind::Cpu => {
            let cpus = usable("cpu count", capacity.cpus)?;
            let wanted = u * cpus - solo.cpus_used.max(0.0);
            if wanted <= EPS {
                return Err(exceeds(cpus, solo.cpus_used, "cpus"));
            }
            let allowed = capacity
                .neighbour_cpus
                .filter(|c| c.is_finite() && *c > 0.0)
                .unwrap_or(cpus);
            let need = wanted.min(allowed);
            let reachable = (wanted > allowed + EPS)
                .then(|| 100.0 * (solo.cpus_used.max(0.0) + allowed) / cpus);
            let pct = |cpus: f64| Rate::CpuLoadPct((cpus * 100.0).round().clamp(1.0, 100.0) as u32);
            // Whole workers at full load and one for the part of a cpu left (none
            // within the slack). At full usage every worker is whole: whatever the
            // neighbours may use, they use (the host is saturated).
            let (whole, part) = if full {
                ((need - CPU_SLACK).ceil().max(1.0) as u32, None)
            } else {
                let whole = (need + EPS).floor();
                let part = need - whole;
                (
                    whole as u32,
                    (part > CPU_SLACK || whole == 0.0).then(|| pct(part)),
                )
            };
            // A lone partial worker's rate is the per-instance rate.
            let (per_instance, last) = match (whole, part) {
                (0, Some(p)) => (p, None),
                (_, last) => (Rate::CpuLoadPct(100), last),
            };
            Ok(NeighbourPlan {
                kind,
                instances: whole + u32::from(part.is_some()),
                per_instance,
                last,
                target,
                reachable,
            })
        }
        NeighbourKind::Disk => {
            let iops = capacity.disk_iops.ok_or(PlanError::CapacityUnknown {
                level: name.clone(),
                what: "disk capacity (IOPS)",
                how: "`fio` as built by disk_capacity_command, read by parse_fio_iops",
            })?;
            let iops = usable("disk capacity (IOPS)", iops)?;
            let need = u * iops - solo.disk_iops.max(0.0);
            if need < 1.0 {
                return Err(exceeds(iops, solo.disk_iops, "IOPS"));
            }
            // As many outstanding I/Os as the calibration needed for that share,
            // NEIGHBOUR_IODEPTH per instance.
            let k = (need / iops * f64::from(CALIBRATION_IODEPTH / NEIGHBOUR_IODEPTH))
                .ceil()
                .clamp(1.0, f64::from(CALIBRATION_IODEPTH / NEIGHBOUR_IODEPTH));
            Ok(NeighbourPlan {
                kind,
                instances: k as u32,
                per_instance: if full {
                    Rate::Unlimited
                } else {
                    Rate::Iops((need / k).round().max(1.0) as u64)
                },
                last: None,
                target,
                reachable: None,
            })
        }
        NeighbourKind::Network => {
            let gbps = capacity.net_gbps.ok_or(PlanError::CapacityUnknown {
                level: name.clone(),
                what: "network capacity (Gbit/s)",
                how: "`iperf3` as built by net_capacity_command, read by parse_iperf3_gbps",
            })?;
            let gbps = usable("network capacity (Gbit/s)", gbps)?;
            let need = u * gbps - solo.net_gbps.max(0.0);
            if need * 1000.0 < 1.0 {
                return Err(exceeds(gbps, solo.net_gbps, "Gbit/s"));
            }
            Ok(NeighbourPlan {
                kind,
                instances: 1,
                per_instance: if full {
                    Rate::Unlimited
                } else {
                    Rate::Mbps((need * 1000.0).round().max(1.0) as u64)
                },
                last: None,
                target,
                reachable: None,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpus(n: f64) -> Capacity {
        Capacity {
            cpus: n,
            memory_bytes: 1 << 30,
            ..Capacity::default()
        }
    }

    fn subject(cpus_used: f64) -> SoloProfile {
        SoloProfile {
            cpus_used,
            ..SoloProfile::default()
        }
    }

    fn planned(
        level: &str,
        cap: &Capacity,
        solo: &SoloProfile,
    ) -> Result<NeighbourPlan, PlanError> {
        plan(&level.parse().unwrap(), cap, solo)
    }

    #[test]
    fn counts_run_at_full_intensity() {
        let p = planned("cpu*4", &cpus(2.0), &subject(1.0)).unwrap();
        assert_eq!(
            (p.instances, p.per_instance, p.target),
            (4, Rate::CpuLoadPct(100), None)
        );
        let p = planned("memory*64", &cpus(2.0), &subject(0.0)).unwrap();
        assert_eq!((p.instances, p.per_instance), (64, Rate::Unlimited));
        // Counts need no capacity measurement.
        let p = planned("disk*2", &cpus(2.0), &subject(0.0)).unwrap();
        assert_eq!((p.instances, p.per_instance), (2, Rate::Unlimited));
    }

    #[test]
    fn cpu_utilisation_adds_what_the_subject_leaves() {
        let rates = |p: &NeighbourPlan| (0..p.instances).map(|i| p.rate_of(i)).collect::<Vec<_>>();
        // 2 cpus, subject 1.0: 90% → 0.8 cpu → one worker at 80%.
        let p = planned("cpu@90%", &cpus(2.0), &subject(1.0)).unwrap();
        assert_eq!(
            (p.instances, p.per_instance, p.target),
            (1, Rate::CpuLoadPct(80), Some(90.0))
        );
        // 100% → one worker at 100%.
        let p = planned("cpu@100%", &cpus(2.0), &subject(1.0)).unwrap();
        assert_eq!((p.instances, p.per_instance), (1, Rate::CpuLoadPct(100)));
        // A solo calibration a little under one cpu does not split the need over
        // two half-busy workers (which reached 88% instead of 100% here).
        let p = planned("cpu@100%", &cpus(2.0), &subject(0.98)).unwrap();
        assert_eq!(rates(&p), [Rate::CpuLoadPct(100)]);
        let p = planned("cpu@90%", &cpus(2.0), &subject(0.97)).unwrap();
        assert_eq!(rates(&p), [Rate::CpuLoadPct(83)]);
        // 4 cpus, subject 0.5, 90%: 3.1 cpus → 3 workers at 100% and one at 10%.
        let p = planned("cpu@90%", &cpus(4.0), &subject(0.5)).unwrap();
        assert_eq!(
            rates(&p),
            [
                Rate::CpuLoadPct(100),
                Rate::CpuLoadPct(100),
                Rate::CpuLoadPct(100),
                Rate::CpuLoadPct(10)
            ]
        );
        // 2 cpus, subject 0.4 (a disk-bound subject), 90%: 1.4 → one whole worker
        // and one at 40%; at full usage two whole workers.
        let p = planned("cpu@90%", &cpus(2.0), &subject(0.4)).unwrap();
        assert_eq!(rates(&p), [Rate::CpuLoadPct(100), Rate::CpuLoadPct(40)]);
        let p = planned("cpu@100%", &cpus(2.0), &subject(0.4)).unwrap();
        assert_eq!(rates(&p), [Rate::CpuLoadPct(100), Rate::CpuLoadPct(100)]);
        // An idle subject: 2 cpus at 90% → 1.8 → one whole worker and one at 80%.
        let p = planned("cpu@90%", &cpus(2.0), &subject(0.0)).unwrap();
        assert_eq!(rates(&p), [Rate::CpuLoadPct(100), Rate::CpuLoadPct(80)]);
        // A part within the slack is left out: 2 cpus at 76%, subject 0.5 → 1.02.
        let p = planned("cpu@76%", &cpus(2.0), &subject(0.5)).unwrap();
        assert_eq!(rates(&p), [Rate::CpuLoadPct(100)]);
        // Exactly whole needs do not round up to an extra worker.
        let p = planned("cpu@100%", &cpus(2.0), &subject(0.0)).unwrap();
        assert_eq!((p.instances, p.per_instance), (2, Rate::CpuLoadPct(100)));
    }

    #[test]
    fn a_reservation_caps_what_cpu_neighbours_can_add() {
        // Subject bound to one of two cpus using 0.3 of it: 90% wants 1.5 cpus of
        // neighbours, the cpuset leaves them 1: one worker at 100%, 65% reachable.
        let cap = Capacity {
            neighbour_cpus: Some(1.0),
            ..cpus(2.0)
        };
        let p = planned("cpu@90%", &cap, &subject(0.3)).unwrap();
        assert_eq!((p.instances, p.per_instance), (1, Rate::CpuLoadPct(100)));
        assert_eq!(p.target, Some(90.0));
        assert!((p.reachable.unwrap() - 65.0).abs() < 1e-9, "{p:?}");
        // Within what the reservation leaves, nothing changes.
        let p = planned("cpu@90%", &cap, &subject(1.0)).unwrap();
        assert_eq!((p.per_instance, p.reachable), (Rate::CpuLoadPct(80), None));
    }

    #[test]
    fn a_subject_above_the_target_is_refused() {
        let e = planned("cpu@50%", &cpus(2.0), &subject(1.5)).unwrap_err();
        assert!(matches!(e, PlanError::SubjectExceedsTarget { .. }));
        let text = e.to_string();
        assert!(
            text.contains("subject alone already uses 1.50 cpus of the host's 2.00 cpus"),
            "{text}"
        );
        assert!(text.contains("75%"), "{text}");
        assert!(text.contains("target of 50%"), "{text}");
        // Exactly at the target is refused too: there is nothing left to add.
        assert!(planned("cpu@50%", &cpus(2.0), &subject(1.0)).is_err());
    }

    #[test]
    fn count_only_kinds_refuse_a_utilisation() {
        for l in ["memory@90%", "fork@50%", "cache@100%"] {
            let e = planned(l, &cpus(2.0), &subject(0.0)).unwrap_err();
            assert!(matches!(e, PlanError::CountOnly { .. }), "{e}");
            assert!(e.to_string().contains("increases their count"), "{e}");
        }
    }

    #[test]
    fn disk_utilisation_spreads_the_rate_over_libaio_jobs() {
        let cap = Capacity {
            disk_iops: Some(20_000.0),
            ..cpus(2.0)
        };
        let solo = SoloProfile {
            disk_iops: 2_000.0,
            ..SoloProfile::default()
        };
        // 90% of 20000 = 18000, minus 2000 = 16000 → 80% of 16 outstanding → 13
        // outstanding → 4 libaio jobs of 4.
        let p = planned("disk@90%", &cap, &solo).unwrap();
        assert_eq!(p.instances, 4);
        assert_eq!(p.per_instance, Rate::Iops(4000));
        assert_eq!(p.target, Some(90.0));
        // 30% → 4000 → 20% of 16 → 4 outstanding → one job.
        let p = planned("disk@30%", &cap, &solo).unwrap();
        assert_eq!((p.instances, p.per_instance), (1, Rate::Iops(4000)));
        // Full usage: not limited.
        let p = planned("disk@100%", &cap, &solo).unwrap();
        assert_eq!((p.instances, p.per_instance), (4, Rate::Unlimited));
        let e = planned("disk@90%", &cpus(2.0), &solo).unwrap_err();
        assert!(matches!(e, PlanError::CapacityUnknown { .. }));
        assert!(e.to_string().contains("disk_capacity_command"), "{e}");
        let zero = Capacity {
            disk_iops: Some(0.0),
            ..cpus(2.0)
        };
        assert!(matches!(
            planned("disk@90%", &zero, &solo),
            Err(PlanError::BadCapacity { .. })
        ));
    }

    #[test]
    fn network_utilisation_is_one_rate_limited_stream() {
        let cap = Capacity {
            net_gbps: Some(10.0),
            ..cpus(2.0)
        };
        let solo = SoloProfile {
            net_gbps: 1.5,
            ..SoloProfile::default()
        };
        let p = planned("network@90%", &cap, &solo).unwrap();
        assert_eq!((p.instances, p.per_instance), (1, Rate::Mbps(7500)));
        let p = planned("network@100%", &cap, &solo).unwrap();
        assert_eq!((p.instances, p.per_instance), (1, Rate::Unlimited));
        let high = SoloProfile {
            net_gbps: 9.5,
            ..SoloProfile::default()
        };
        assert!(matches!(
            planned("network@90%", &cap, &high),
            Err(PlanError::SubjectExceedsTarget { .. })
        ));
        assert!(matches!(
            planned("network@90%", &cpus(2.0), &solo),
            Err(PlanError::CapacityUnknown { .. })
        ));
    }
}
