//! Reservations (seed 001's "resource reservation tools"): limits that protect the
//! subject from its neighbours. Each becomes cgroup limits on the neighbours (and,
//! for `cpuset`, a binding of the subject), applied and read back like every limit.
//!
//! | level | subject | every neighbour |
//! |---|---|---|
//! | `none` | its placement | no limits (beyond those that keep the host alive) |
//! | `cpuset` | bound to the highest-numbered cpus its shape needs | bound to the other cpus |
//! | `quota` | its placement | together at most the cpus the subject's shape leaves free (CFS quota) |
//! | `memory` | its placement | together at most the memory the subject's shape leaves free |
//! | `pids` | its placement | at most [`NEIGHBOUR_PIDS`] tasks each |
//!
//! `io` (blkio / io.max throttles) and `net` (tc rate on the neighbours' interfaces)
//! need the disk's and the network's measured capacity and are not offered yet.

use std::fmt;

use isolab_cgroups::{Bytes, CpuQuota, IdSet, Limits};

/// Tasks a neighbour may have under the `pids` reservation.
pub const NEIGHBOUR_PIDS: u64 = 64;

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
}

impl Reservation {
    /// Every level, in documentation order.
    pub const ALL: [Reservation; 5] = [
        Reservation::None,
        Reservation::Cpuset,
        Reservation::Quota,
        Reservation::Memory,
        Reservation::Pids,
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
        }
    }
}

impl fmt::Display for Reservation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The limits of a subject and of each of its neighbours under a reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct Reserved {
    /// The subject's limits (its shape and placement, bound for `cpuset`).
    pub subject: Limits,
    /// Each neighbour's limits.
    pub neighbour: Limits,
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
}

/// The limits of subject and neighbours: `subject` are the subject's limits from its
/// shape and placement, `subject_cpus` its shape's cpu count, `host_cpus` the cpus
/// isolab may use, `host_memory` the host's memory, `neighbours` how many neighbour
/// instances share what is left.
pub fn reserve(
    reservation: Reservation,
    subject: &Limits,
    subject_cpus: u32,
    host_cpus: &IdSet,
    host_memory: Bytes,
    neighbours: u32,
) -> Result<Reserved, ReservationError> {
    let host = host_cpus.len() as u32;
    let neighbours = neighbours.max(1);
    let mut out = Reserved {
        subject: subject.clone(),
        neighbour: Limits::default(),
    };
    match reservation {
        Reservation::None => {}
        Reservation::Cpuset => {
            let ids: Vec<u32> = host_cpus.iter().copied().collect();
            if subject_cpus >= host {
                return Err(ReservationError::NoCpuLeft {
                    reservation,
                    subject: subject_cpus,
                    host,
                });
            }
            let split = ids.len() - subject_cpus as usize;
            out.subject.cpuset = Some(IdSet::from_iter(ids[split..].iter().copied()));
            out.subject.cpu = None;
            out.neighbour.cpuset = Some(IdSet::from_iter(ids[..split].iter().copied()));
        }
        Reservation::Quota => {
            if subject_cpus >= host {
                return Err(ReservationError::NoCpuLeft {
                    reservation,
                    subject: subject_cpus,
                    host,
                });
            }
            let left = f64::from(host - subject_cpus) / f64::from(neighbours);
            out.neighbour.cpu = CpuQuota::from_cpus(left, CpuQuota::DEFAULT_PERIOD).ok();
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
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quota(cpus: f64) -> Option<CpuQuota> {
        CpuQuota::from_cpus(cpus, CpuQuota::DEFAULT_PERIOD).ok()
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
        let r = reserve(Reservation::Cpuset, &subject, 1, &host, Bytes::gib(8), 2).unwrap();
        assert_eq!(r.subject.cpuset, Some("3".parse().unwrap()));
        assert_eq!(r.subject.cpu, None, "bound, not throttled");
        assert_eq!(r.neighbour.cpuset, Some("0-2".parse().unwrap()));
        let full = reserve(Reservation::Cpuset, &subject, 4, &host, Bytes::gib(8), 1);
        assert!(matches!(full, Err(ReservationError::NoCpuLeft { .. })));
    }

    #[test]
    fn quota_shares_what_the_subject_leaves() {
        let host: IdSet = "0-1".parse().unwrap();
        let r = reserve(
            Reservation::Quota,
            &Limits::default(),
            1,
            &host,
            Bytes::gib(8),
            2,
        )
        .unwrap();
        assert_eq!(r.neighbour.cpu, quota(0.5));
        assert_eq!(r.subject, Limits::default());
    }

    #[test]
    fn memory_and_pids_limit_the_neighbours() {
        let host: IdSet = "0-1".parse().unwrap();
        let subject = Limits {
            memory_max: Some(Bytes::gib(4)),
            ..Limits::default()
        };
        let r = reserve(Reservation::Memory, &subject, 1, &host, Bytes::gib(8), 2).unwrap();
        assert_eq!(r.neighbour.memory_max, Some(Bytes::gib(2)));
        let none = reserve(
            Reservation::Memory,
            &Limits::default(),
            1,
            &host,
            Bytes::gib(8),
            1,
        );
        assert!(matches!(none, Err(ReservationError::NoMemoryLeft { .. })));
        let p = reserve(Reservation::Pids, &subject, 1, &host, Bytes::gib(8), 1).unwrap();
        assert_eq!(p.neighbour.pids_max, Some(NEIGHBOUR_PIDS));
    }
}
