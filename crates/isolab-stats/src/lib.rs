//! Pure statistics for isolab: no I/O, no clocks, no randomness without a seed.
//!
//! - [`Direction`] says whether lower or higher values of a metric are better; every
//!   derived measure is oriented with it so that a **positive number means worse**.
//! - [`Sample`] holds at least two finite observations and gives [`Summary`]
//!   statistics: mean, median, standard deviation, coefficient of variation and the
//!   Student-t confidence interval of the mean.
//! - [`measures`] holds the derived measures of `DESIGN.md`: overhead ratio,
//!   degradation and regression.
//! - [`welch_t_test`] compares two samples' means (a first significance check; the
//!   non-parametric tests come with the statistics work).

pub mod measures;
mod sample;
mod welch;

pub use measures::{degradation_pct, overhead_ratio, regression_pct};
pub use sample::{Interval, Sample, SampleError, Summary};
pub use welch::{welch_t_test, WelchTest};

use std::fmt;
use std::str::FromStr;

/// Whether lower or higher values of a metric are better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Lower is better (latency, time).
    Lower,
    /// Higher is better (throughput, operations per second).
    Higher,
}

impl Direction {
    /// The word used in specs, the store and exports: `lower` or `higher`.
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Lower => "lower",
            Direction::Higher => "higher",
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A direction word other than `lower` or `higher`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown direction `{0}`: expected `lower` or `higher`")]
pub struct UnknownDirection(pub String);

impl FromStr for Direction {
    type Err = UnknownDirection;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "lower" => Ok(Direction::Lower),
            "higher" => Ok(Direction::Higher),
            other => Err(UnknownDirection(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direction_round_trips_through_its_word() {
        for d in [Direction::Lower, Direction::Higher] {
            assert_eq!(d.as_str().parse::<Direction>().unwrap(), d);
        }
        assert!("better".parse::<Direction>().is_err());
    }
}
