//! [`NeighbourKind`]: what a neighbour stresses. Below the levels of the `neighbour`
//! factor and the reservations, which both name kinds.

use std::fmt;

/// What a neighbour stresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NeighbourKind {
    /// Tight integer and floating-point loops.
    Cpu,
    /// Allocates and touches memory without releasing it, within its own limit.
    Memory,
    /// Continuous process creation, held by its own pids limit.
    Fork,
    /// Random 50/50 read/write of 32 KiB blocks with direct I/O.
    Disk,
    /// TCP streams between two network namespaces of this host.
    Network,
    /// Cache and memory-bandwidth thrashing.
    Cache,
}

impl NeighbourKind {
    /// Every kind, in documentation order.
    pub const ALL: [NeighbourKind; 6] = [
        NeighbourKind::Cpu,
        NeighbourKind::Memory,
        NeighbourKind::Fork,
        NeighbourKind::Disk,
        NeighbourKind::Network,
        NeighbourKind::Cache,
    ];

    /// Its name in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            NeighbourKind::Cpu => "cpu",
            NeighbourKind::Memory => "memory",
            NeighbourKind::Fork => "fork",
            NeighbourKind::Disk => "disk",
            NeighbourKind::Network => "network",
            NeighbourKind::Cache => "cache",
        }
    }

    /// Whether a utilisation target can be set for it (`cpu`, `disk`, `network`).
    ///
    /// Memory, fork and cache pressure cannot be held at a share of a capacity:
    /// seed 001 increases their count instead.
    pub fn takes_utilisation(self) -> bool {
        matches!(
            self,
            NeighbourKind::Cpu | NeighbourKind::Disk | NeighbourKind::Network
        )
    }
}

impl fmt::Display for NeighbourKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
