//! Reservations (seed 001's "resource reservation tools"): limits that protect the
//! subject from its neighbours by leaving it what it uses alone (its solo profile,
//! measured like seed 001's Table 5.2). Each becomes limits on the neighbours (and,
//! for `cpuset`, a binding of the subject), applied and read back like every limit.
//!
//! | level | subject | every neighbour |
//! |---|---|---|
//! | `none` | its placement | no limits beyond the safety ones below |
//! | `cpuset` | bound to the highest-numbered cpus its shape needs | bound to the other cpus |
//! | `quota` | its placement | together at most the cpus the subject's shape leaves free (CFS quota) |
//! | `memory` | its placement | together at most the memory the subject's shape leaves free |
//! | `pids` | its placement | at most [`NEIGHBOUR_PIDS`] tasks each |
//! | `io` | its placement | together at most the disk's measured IOPS minus the subject's solo IOPS (blkio `throttle.*_iops_device` / `io.max`), half for reads and half for writes |
//! | `net` | its placement | together at most the network's measured throughput minus the subject's solo throughput (a `tc` token bucket on the neighbours' interface) |
//!
//! Safety limits hold whatever the level: a memory bomb without a memory limit gets
//! [`MEMORY_BOMB_SHARE`] of the host's memory (shared among the instances), a fork
//! bomb without a pids limit gets `4 ×` [`NEIGHBOUR_PIDS`] tasks, so the host survives
//! them.

use std::fmt;

use isolab_cgroups::{Bytes, CpuQuota, DeviceNumber, IdSet, IoThrottle, Limits};

use crate::neighbour::NeighbourKind;

/// Tasks a neighbour may have under the `pids` reservation.
pub const NEIGHBOUR_PIDS: u64 = 64;

/// The share of the host's memory that memory bombs without a memory reservation
/// may fill together.
pub const MEMORY_BOMB_SHARE: f64 = 0.25;

/// The least a neighbour keeps under `io` and `net` (as a fraction of the measured
/// capacity), so that a subject that alone fills the resource still meets
/// neighbours that do something.
pub const MIN_NEIGHBOUR_SHARE: f64 = 0.02;

/// A reservation level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Reservation {
    /// Nothing reserved.
    None,
    /// Subject and neighbours on disjoint cpus.
    Cpuset,
    /// A CFS quota on the neighbours.
    Quota,
    /// A memory limit on the neighbours.
    Memory,
    /// A pids limit on the neighbours.
    Pids,
    /// An IOPS throttle on the neighbours.
    Io,
    /// A rate limit on the neighbours' network interface.
    Net,
}

impl Reservation {
    /// Every level, in documentation order.
    pub const ALL: [Reservation; 7] = [
        Reservation::None,
        Reservation::Cpuset,
        Reservation::Quota,
        Reservation::Memory,
        Reservation::Pids,
        Reservation::Io,
        Reservation::Net,
    ];

    /// Parses a level name.
    pub fn parse(s: &str) -> Option<Reservation> {
        Reservation::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Its name in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Reservation::None => "none",
            Reservation::Cpuset => "cpuset",
            Reservation::Quota => "quota",
            Reservation::Memory => "memory",
            Reservation::Pids => "pids",
            Reservation::Io => "io",
            Reservation::Net => "net",
        }
    }

    /// Whether it needs the disk's capacity and the subject's solo IOPS.
    pub fn needs_disk_capacity(self) -> bool {
        self == Reservation::Io
    }

    /// Whether it needs the network's capacity and the subject's solo throughput.
    pub fn needs_net_capacity(self) -> bool {
        self == Reservation::Net
    }
}

impl fmt::Display for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The disk a reservation shares: the device, its measured capacity and what the
/// subject does on it alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiskShare {
    /// The working directory's disk.
    pub device: DeviceNumber,
    /// IOPS it sustains (the calibration).
    pub capacity_iops: f64,
    /// IOPS the subject does alone.
    pub solo_iops: f64,
}

/// The network a reservation shares: its measured capacity and what the subject
/// moves alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NetShare {
    /// Throughput of one unlimited stream (the calibration), Mbit/s.
    pub capacity_mbps: f64,
    /// Throughput of the subject alone, Mbit/s.
    pub solo_mbps: f64,
}

/// What a reservation is made from.
#[derive(Debug, Clone, Copy)]
pub struct ReserveRequest<'a> {
    /// The level.
    pub reservation: Reservation,
    /// The subject's limits from its shape and placement.
    pub subject: &'a Limits,
    /// Its shape's cpu count.
    pub subject_cpus: u32,
    /// The cpus isolab may use.
    pub host_cpus: &'a IdSet,
    /// The host's memory.
    pub host_memory: Bytes,
    /// How many neighbour instances share what is left (0 in a cell without
    /// neighbour, where only the subject's side matters).
    pub neighbours: u32,
    /// Their kind, for the safety limits.
    pub kind: Option<NeighbourKind>,
    /// The disk, for `io`.
    pub disk: Option<DiskShare>,
    /// The network, for `net`.
    pub net: Option<NetShare>,
}

/// The limits of a subject and of each of its neighbours under a reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct Reserved {
    /// The subject's limits (its shape and placement, bound for `cpuset`).
    pub subject: Limits,
    /// Each neighbour's limits.
    pub neighbour: Limits,
    /// The rate of the neighbours' network interface, all of them together (`net`).
    pub neighbour_net_mbps: Option<u64>,
    /// The cpus all neighbours together may use (the host's, or what `cpuset` and
    /// `quota` leave them): the most a utilisation target can get from them.
    pub neighbour_cpus: f64,
}

/// Why a reservation cannot be made on this host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReservationError {
    /// The subject's shape takes every cpu: none is left for the neighbours.
    #[error("reservation `{reservation}` leaves no cpu for the neighbours: the subject's shape takes {subject} of the host's {host} cpus; choose a smaller shape")]
    NoCpuLeft {
        /// The reservation.
        reservation: Reservation,
        /// Cpus the subject takes.
        subject: u32,
        /// Cpus of the host.
        host: u32,
    },
    /// The subject's shape takes all of the host's memory.
    #[error("reservation `memory` leaves no memory for the neighbours: the subject's shape takes {subject} of the host's {host}")]
    NoMemoryLeft {
        /// The subject's memory.
        subject: Bytes,
        /// The host's memory.
        host: Bytes,
    },
    /// The capacity the reservation divides was not measured.
    #[error("reservation `{0}` needs the measured capacity of the resource (the runner calibrates it before the first run of such a cell)")]
    CapacityUnknown(Reservation),
}

/// The limits of subject and neighbours under `request.reservation`, with the
/// safety limits of memory and fork bombs.
pub fn reserve(request: &ReserveRequest<'_>) -> Result<Reserved, ReservationError> {
    let ReserveRequest {
        reservation,
        subject,
        subject_cpus,
        host_cpus,
        host_memory,
        neighbours,
        kind,
        disk,
        net,
    } = *request;
    let host = host_cpus.len() as u32;
    let neighbours = neighbours.max(1);
    let mut out = Reserved {
        subject: subject.clone(),
        neighbour: Limits::default(),
        neighbour_net_mbps: None,
        neighbour_cpus: f64::from(host),
    };
    let no_cpu_left = || ReservationError::NoCpuLeft {
        reservation,
        subject: subject_cpus,
        host,
    };
    match reservation {
        Reservation::None => {}
        Reservation::Cpuset => {
            let ids: Vec<u32> = host_cpus.iter().copied().collect();
            if subject_cpus >= host {
                return Err(no_cpu_left());
            }
            let split = ids.len() - subject_cpus as usize;
            out.subject.cpuset = Some(IdSet::from_iter(ids[split..].iter().copied()));
            out.subject.cpu = None;
            out.neighbour.cpuset = Some(IdSet::from_iter(ids[..split].iter().copied()));
            out.neighbour_cpus = split as f64;
        }
        Reservation::Quota => {
            if subject_cpus >= host {
                return Err(no_cpu_left());
            }
            let total = f64::from(host - subject_cpus);
            out.neighbour.cpu =
                CpuQuota::from_cpus(total / f64::from(neighbours), CpuQuota::DEFAULT_PERIOD).ok();
            out.neighbour_cpus = total;
        }
        Reservation::Memory => {
            let taken = subject.memory_max.unwrap_or(host_memory);
            if taken.0 >= host_memory.0 {
                return Err(ReservationError::NoMemoryLeft {
                    subject: taken,
                    host: host_memory,
                });
            }
            // Whole pages, shared among the neighbours.
            let each = (host_memory.0 - taken.0) / u64::from(neighbours) / 4096 * 4096;
            out.neighbour.memory_max = Some(Bytes(each));
        }
        Reservation::Pids => out.neighbour.pids_max = Some(NEIGHBOUR_PIDS),
        Reservation::Io => {
            let d = disk.ok_or(ReservationError::CapacityUnknown(reservation))?;
            let total = left(d.capacity_iops, d.solo_iops);
            // Reads and writes are throttled apart: half of the share each.
            let each = (total / f64::from(neighbours) / 2.0).round().max(1.0) as u64;
            out.neighbour.io = vec![IoThrottle {
                read_iops: Some(each),
                write_iops: Some(each),
                ..IoThrottle::unlimited(d.device)
            }];
        }
        Reservation::Net => {
            let n = net.ok_or(ReservationError::CapacityUnknown(reservation))?;
            out.neighbour_net_mbps =
                Some(left(n.capacity_mbps, n.solo_mbps).round().max(1.0) as u64);
        }
    }
    match kind {
        Some(NeighbourKind::Memory) if out.neighbour.memory_max.is_none() => {
            let share = (host_memory.0 as f64 * MEMORY_BOMB_SHARE) as u64;
            out.neighbour.memory_max = Some(Bytes(share / u64::from(neighbours) / 4096 * 4096));
        }
        Some(NeighbourKind::Fork) if out.neighbour.pids_max.is_none() => {
            out.neighbour.pids_max = Some(NEIGHBOUR_PIDS * 4);
        }
        _ => {}
    }
    Ok(out)
}

/// What `capacity` leaves after `solo`, at least [`MIN_NEIGHBOUR_SHARE`] of it.
fn left(capacity: f64, solo: f64) -> f64 {
    (capacity - solo.max(0.0)).max(capacity * MIN_NEIGHBOUR_SHARE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(cpus: f64) -> Option<CpuQuota> {
        CpuQuota::from_cpus(cpus, CpuQuota::DEFAULT_PERIOD).ok()
    }

    fn request<'a>(
        reservation: Reservation,
        subject: &'a Limits,
        subject_cpus: u32,
        host: &'a IdSet,
        neighbours: u32,
    ) -> ReserveRequest<'a> {
        ReserveRequest {
            reservation,
            subject,
            subject_cpus,
            host_cpus: host,
            host_memory: Bytes::gib(8),
            neighbours,
            kind: None,
            disk: None,
            net: None,
        }
    }

    #[test]
    fn levels_parse_and_print() {
        for r in Reservation::ALL {
            assert_eq!(Reservation::parse(r.as_str()), Some(r));
        }
        assert_eq!(Reservation::parse("blkio"), None);
    }

    #[test]
    fn cpuset_binds_subject_high_and_neighbours_low() {
        let host: IdSet = "0-3".parse().unwrap();
        let subject = Limits {
            cpu: quota(1.0),
            ..Limits::default()
        };
        let r = reserve(&request(Reservation::Cpuset, &subject, 1, &host, 2)).unwrap();
        assert_eq!(r.subject.cpuset, Some("3".parse().unwrap()));
        assert_eq!(r.subject.cpu, None, "bound, not throttled");
        assert_eq!(r.neighbour.cpuset, Some("0-2".parse().unwrap()));
        assert_eq!(r.neighbour_cpus, 3.0);
        let full = reserve(&request(Reservation::Cpuset, &subject, 4, &host, 1));
        assert!(matches!(full, Err(ReservationError::NoCpuLeft { .. })));
    }

    #[test]
    fn quota_shares_what_the_subject_leaves() {
        let host: IdSet = "0-1".parse().unwrap();
        let subject = Limits::default();
        let r = reserve(&request(Reservation::Quota, &subject, 1, &host, 2)).unwrap();
        assert_eq!(r.neighbour.cpu, quota(0.5));
        assert_eq!(r.neighbour_cpus, 1.0);
        assert_eq!(r.subject, Limits::default());
        let none = reserve(&request(Reservation::None, &subject, 1, &host, 2)).unwrap();
        assert_eq!(
            none.neighbour_cpus, 2.0,
            "all cpus when nothing is reserved"
        );
    }

    #[test]
    fn memory_and_pids_limit_the_neighbours() {
        let host: IdSet = "0-1".parse().unwrap();
        let subject = Limits {
            memory_max: Some(Bytes::gib(4)),
            ..Limits::default()
        };
        let r = reserve(&request(Reservation::Memory, &subject, 1, &host, 2)).unwrap();
        assert_eq!(r.neighbour.memory_max, Some(Bytes::gib(2)));
        let unlimited = Limits::default();
        let none = reserve(&request(Reservation::Memory, &unlimited, 1, &host, 1));
        assert!(matches!(none, Err(ReservationError::NoMemoryLeft { .. })));
        let p = reserve(&request(Reservation::Pids, &subject, 1, &host, 1)).unwrap();
        assert_eq!(p.neighbour.pids_max, Some(NEIGHBOUR_PIDS));
    }

    #[test]
    fn io_leaves_the_subject_its_solo_iops() {
        let host: IdSet = "0-1".parse().unwrap();
        let subject = Limits::default();
        let device = DeviceNumber {
            major: 254,
            minor: 0,
        };
        let mut req = request(Reservation::Io, &subject, 1, &host, 2);
        assert_eq!(
            reserve(&req),
            Err(ReservationError::CapacityUnknown(Reservation::Io))
        );
        req.disk = Some(DiskShare {
            device,
            capacity_iops: 10_000.0,
            solo_iops: 2_000.0,
        });
        // 8000 left for 2 neighbours: 4000 each, 2000 reads + 2000 writes.
        let r = reserve(&req).unwrap();
        assert_eq!(
            r.neighbour.io,
            vec![IoThrottle {
                read_iops: Some(2000),
                write_iops: Some(2000),
                ..IoThrottle::unlimited(device)
            }]
        );
        // A subject that fills the disk alone still leaves the neighbours a trickle.
        req.disk = Some(DiskShare {
            device,
            capacity_iops: 10_000.0,
            solo_iops: 12_000.0,
        });
        assert_eq!(reserve(&req).unwrap().neighbour.io[0].read_iops, Some(50));
    }

    #[test]
    fn net_rates_the_neighbours_interface() {
        let host: IdSet = "0-1".parse().unwrap();
        let subject = Limits::default();
        let mut req = request(Reservation::Net, &subject, 1, &host, 3);
        assert!(reserve(&req).is_err());
        req.net = Some(NetShare {
            capacity_mbps: 20_000.0,
            solo_mbps: 5_000.0,
        });
        let r = reserve(&req).unwrap();
        assert_eq!(r.neighbour_net_mbps, Some(15_000), "one interface for all");
        assert_eq!(r.neighbour, Limits::default());
    }

    #[test]
    fn bombs_keep_their_safety_limits_unless_the_reservation_sets_tighter_ones() {
        let host: IdSet = "0-1".parse().unwrap();
        let subject = Limits::default();
        let mut req = request(Reservation::None, &subject, 1, &host, 2);
        req.kind = Some(NeighbourKind::Memory);
        // A quarter of 8 GiB for two bombs: 1 GiB each.
        assert_eq!(
            reserve(&req).unwrap().neighbour.memory_max,
            Some(Bytes::gib(1))
        );
        req.kind = Some(NeighbourKind::Fork);
        assert_eq!(
            reserve(&req).unwrap().neighbour.pids_max,
            Some(NEIGHBOUR_PIDS * 4)
        );
        req.reservation = Reservation::Pids;
        assert_eq!(
            reserve(&req).unwrap().neighbour.pids_max,
            Some(NEIGHBOUR_PIDS)
        );
        req.kind = Some(NeighbourKind::Cpu);
        req.reservation = Reservation::None;
        assert_eq!(reserve(&req).unwrap().neighbour, Limits::default());
    }
}
