//! The matrix's `neighbour` levels: `none`, or a co-located stressor such as `cpu@90%` or
//! `fork*2` ([`NeighbourLevel`]), and the neighbour a cell's level stands for.

use super::check::Validator;
use super::matrix::{Level, Levels};
use crate::neighbour::NeighbourLevel;

impl Validator<'_> {
    /// `matrix.neighbour`: each `none` or a [`NeighbourLevel`]; `none` unless given.
    pub(super) fn neighbour_levels(&mut self, raw: Levels) -> Vec<Level> {
        self.levels("neighbour", raw, &["none"], |l| {
            if l == "none" {
                return Ok(());
            }
            l.parse::<NeighbourLevel>()
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

/// The neighbour of a checked level: `None` for `none`.
pub(super) fn neighbour(level: &str) -> Option<NeighbourLevel> {
    match level {
        "none" => None,
        l => l.parse::<NeighbourLevel>().ok(),
    }
}
