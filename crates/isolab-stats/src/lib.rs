//! Pure statistics for isolab: no I/O, no clocks, no randomness without a seed.
//!
//! - [`Direction`] says whether lower or higher values of a metric are better; every
//!   derived measure is oriented with it so that a **positive number means worse**.
//! - [`Sample`] holds at least two finite observations and gives [`Summary`]
//!   statistics: mean, median, standard deviation, coefficient of variation and the
//!   Student-t confidence interval of the mean.
//! - [`measures`] holds the derived measures of `DESIGN.md`: overhead ratio,
//!   degradation and regression, and the [`geometric_mean`] that summarises many
//!   overhead ratios.
//! - Order statistics: [`percentile`] (NumPy's linear interpolation) and
//!   [`median_ci`], the distribution-free confidence interval of the median from
//!   Binomial(n, ½) order statistics, as benchstat computes it.
//! - [`bootstrap_ratio_ci`]: the percentile-bootstrap interval of the overhead ratio
//!   of means or medians ([`Center`]), reproducible from an explicit seed
//!   (Xoshiro256++); [`Resamples`] draws its indices once for many pairs of samples of
//!   the same sizes (a report's cells), with the same intervals, bit for bit.
//! - [`outliers_mad`]: modified z-scores from the median and MAD (Iglewicz & Hoaglin);
//!   outliers are reported, never dropped.
//! - Two-sample comparisons: [`mann_whitney`] (exact for small samples without ties,
//!   else the normal approximation with tie and continuity correction),
//!   [`hodges_lehmann`] (shift estimate with its Moses confidence interval) and, as a
//!   secondary view, [`welch_t_test`].
//! - Paired comparisons for runs that shared a round: [`signed_rank`] (Wilcoxon) and
//!   [`paired_hodges_lehmann`] (the median of Walsh averages with Tukey's interval).
//! - [`test_point`] tests one A/B measurement point (paired by round from
//!   [`MIN_PAIRS`] shared rounds on, else unpaired); [`benjamini_hochberg`] adjusts the
//!   p-values of all points of one comparison for the false discovery rate; [`verdict`]
//!   then decides one of four outcomes ([`Verdict`]): `worse`/`better` (significant and
//!   the estimate beyond the noise threshold), `≈` (the 1 − 2α interval inside ±the
//!   threshold: two one-sided tests) or `?` (with [`runs_to_decide`]). The runner's
//!   early stops use [`interim_verdict`] at the Haybittle-Peto level [`INTERIM_ALPHA`].
//! - [`regression_histogram`]: the histogram of regression % of seed 000, with mean,
//!   percentiles and the counts of better and worse points.
//! - [`runs_for_verdict`]: the runs per side at which the rule calls an effect with a
//!   given power ([`verdict_power`], closed form), checked by the seeded simulation
//!   [`simulate_verdicts`] (normal or skewed noise, paired or not, fixed-N or
//!   sequential); [`runs_for_power`] is the plain test's number, for comparison.
//! - [`fit_size_overhead`]: seed 002's platform-type and platform-size overhead, the
//!   ratio against bare metal fitted as `a + b/size` with bootstrap intervals.
//! - [`scalability`]: Amdahl's law and the Universal Scalability Law fitted to
//!   throughput over concurrency ([`ScalingData::fit`], [`ScalingData::compare`] by
//!   AIC), with a seeded within-level bootstrap for parameter intervals and a band of
//!   the curve ([`ScalingData::bootstrap`], [`BootstrapFit::band`]).
//!
//! - [`blocked_ratio`]: a comparison over many hosts with the host as a block (per-host
//!   log ratios pooled with equal weights, Welch–Satterthwaite interval), Cochran's Q for
//!   an effect that differs between hosts, and [`unblocked_ratio`], the biased view that
//!   ignores the hosts.
//!
//! Every function's documentation cites the formula it implements and its source. The
//! values are checked against SciPy/NumPy on vectors recorded by
//! `reference/generate.py` into `reference/vectors.json`, and the scalability fits
//! against `scipy.optimize.curve_fit` on vectors recorded by `reference/scalability.py`
//! into `reference/scalability.json` (see `tests/reference.rs`).

mod blocks;
mod bootstrap;
mod fdr;
mod histogram;
mod history;
pub mod measures;
mod order;
mod outliers;
mod paired;
mod power;
mod rank;
mod sample;
pub mod scalability;
mod size_overhead;
mod verdict;
mod welch;

pub use blocks::{
    blocked_ratio, unblocked_ratio, BlockEffect, BlockError, BlockedComparison, Heterogeneity,
    HETEROGENEITY_ALPHA,
};
pub use bootstrap::{bootstrap_ratio_ci, Center, Resamples};
pub use fdr::benjamini_hochberg;
pub use histogram::{regression_histogram, Bin, Histogram, HISTOGRAM_PERCENTILES, MAX_BINS};
pub use history::{
    history_verdict, test_against_history, HistoryTest, MedianEstimate, MIN_HISTORY,
};
pub use measures::{degradation_pct, geometric_mean, overhead_ratio, regression_pct};
pub use order::{median_ci, percentile};
pub use outliers::{outliers_mad, Outliers, DEFAULT_OUTLIER_THRESHOLD};
pub use paired::{paired_hodges_lehmann, signed_rank, signed_rank_min_p, SignedRank};
pub use power::{
    runs_for_equivalence, runs_for_power, runs_for_verdict, simulate_verdicts, verdict_power,
    Design, Noise, Rates,
};
pub use rank::{hodges_lehmann, mann_whitney, mann_whitney_min_p, MannWhitney, Shift};
pub use sample::{Interval, Sample, SampleError, Summary};
pub use scalability::{
    BandPoint, BootstrapFit, Fit, ModelComparison, ScalabilityError, ScalingData, ScalingModel,
};
pub use size_overhead::{fit_size_overhead, Dominant, SizeOverheadFit, SizePoint};
pub use verdict::{
    interim_verdict, pairs_by_round, runs_to_decide, test_change, test_point, verdict, ChangeTest,
    Method, PendingChange, PointData, PointTest, Verdict, VerdictRule, INTERIM_ALPHA, MIN_PAIRS,
};
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
