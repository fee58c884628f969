//! Seeded percentile bootstrap of the overhead ratio.

use rand::distributions::{Distribution, Uniform};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::order::{percentile_selected, percentile_sorted};
use crate::{measures::overhead_ratio, Direction, Interval, Sample};

/// Which centre of each sample a ratio compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Center {
    /// The arithmetic mean.
    Mean,
    /// The median (linear interpolation, as [`crate::percentile`] at 50): for
    /// start-up latencies and other samples with a long tail, where a claim is
    /// about the typical run.
    Median,
}

/// Percentile bootstrap confidence interval of the overhead ratio of `center`s
/// (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, §13.3).
///
/// Each of `resamples` replicates draws `a.len()` values from `a` and `b.len()` values
/// from `b` with replacement, independently (a two-sample bootstrap), and computes
/// r* = [`overhead_ratio`]`(center(a*), center(b*), direction)` — `b/a` for
/// lower-is-better, `a/b` for higher-is-better, so above 1 means B is worse. The
/// interval is [P(α/2), P(1 − α/2)] of the sorted replicates, α = 1 − `level`, with the
/// linear-interpolation percentile of [`crate::percentile`] (as
/// `scipy.stats.bootstrap(..., method='percentile')` and `numpy.percentile` do).
///
/// Reproducible: the generator is `Xoshiro256PlusPlus::seed_from_u64(seed)`, and each replicate
/// draws its `a` indices then its `b` indices with `gen_range(0..n)`; the same inputs and
/// seed give the same interval on every platform.
///
/// `None` when `resamples` is 0, `level` is not in (0, 1), or any replicate has a zero
/// divisor centre (the ratio is then undefined and so is its distribution).
pub fn bootstrap_ratio_ci(
    a: &Sample,
    b: &Sample,
    center: Center,
    direction: Direction,
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<Interval> {
    let statistic: fn(&[f64], &mut Xoshiro256PlusPlus) -> f64 = match center {
        Center::Mean => resampled_mean,
        Center::Median => resampled_median,
    };
    if resamples == 0 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let ma = statistic(a.values(), &mut rng);
        let mb = statistic(b.values(), &mut rng);
        ratios.push(overhead_ratio(ma, mb, direction)?);
    }
    let half_alpha = (1.0 - level) / 2.0;
    Some(Interval {
        low: percentile_selected(&mut ratios, 100.0 * half_alpha),
        high: percentile_selected(&mut ratios, 100.0 * (1.0 - half_alpha)),
        level,
    })
}

/// Median of one resample with replacement of `values` (non-empty).
fn resampled_median(values: &[f64], rng: &mut Xoshiro256PlusPlus) -> f64 {
    let index = Uniform::new(0, values.len());
    let mut drawn: Vec<f64> = (0..values.len())
        .map(|_| values[index.sample(rng)])
        .collect();
    drawn.sort_by(f64::total_cmp);
    percentile_sorted(&drawn, 50.0)
}

/// Mean of one resample with replacement of `values` (non-empty).
fn resampled_mean(values: &[f64], rng: &mut Xoshiro256PlusPlus) -> f64 {
    let n = values.len();
    // One uniform distribution per call, not per draw: the draws dominate the cost of
    // a report over many cells.
    let index = Uniform::new(0, n);
    let sum: f64 = (0..n).map(|_| values[index.sample(rng)]).sum();
    sum / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Sample {
        Sample::new(v.to_vec()).unwrap()
    }

    #[test]
    fn median_ratio_interval_holds_the_ratio_of_medians_despite_a_tail() {
        // b is 2x a in the typical run; one huge outlier in a moves its mean a lot.
        let a = s(&[5.0, 5.1, 4.9, 5.2, 5.0, 4.8, 5.1, 50.0]);
        let b = s(&[10.0, 10.2, 9.8, 10.4, 10.0, 9.6, 10.2, 10.1]);
        let med =
            bootstrap_ratio_ci(&a, &b, Center::Median, Direction::Lower, 0.95, 2000, 3).unwrap();
        assert!(med.low <= 2.0 && 2.0 <= med.high, "{med:?}");
        assert!(med.high < 2.3, "{med:?}");
        let mean =
            bootstrap_ratio_ci(&a, &b, Center::Mean, Direction::Lower, 0.95, 2000, 3).unwrap();
        assert!(
            mean.low < 1.5,
            "the outlier drags the ratio of means: {mean:?}"
        );
        let again =
            bootstrap_ratio_ci(&a, &b, Center::Median, Direction::Lower, 0.95, 2000, 3).unwrap();
        assert_eq!(med, again);
    }

    #[test]
    fn same_seed_same_interval_other_seed_other_interval() {
        let a = s(&[10.0, 10.5, 9.8, 10.2, 10.1, 9.9]);
        let b = s(&[12.0, 12.4, 11.7, 12.1, 12.3, 11.9]);
        let x = bootstrap_ratio_ci(&a, &b, Center::Mean, Direction::Lower, 0.95, 2000, 7).unwrap();
        let y = bootstrap_ratio_ci(&a, &b, Center::Mean, Direction::Lower, 0.95, 2000, 7).unwrap();
        let z = bootstrap_ratio_ci(&a, &b, Center::Mean, Direction::Lower, 0.95, 2000, 8).unwrap();
        assert_eq!(x, y);
        assert_ne!(x, z);
        assert!(x.low < 1.2 && 1.2 < x.high, "{x:?}");
    }

    #[test]
    fn direction_inverts_the_ratio() {
        let a = s(&[100.0, 101.0, 99.0, 100.5]);
        let b = s(&[80.0, 81.0, 79.0, 80.5]);
        let hi = bootstrap_ratio_ci(&a, &b, Center::Mean, Direction::Higher, 0.9, 1000, 1).unwrap();
        assert!(hi.low > 1.2 && hi.high < 1.3, "{hi:?}");
        let lo = bootstrap_ratio_ci(&a, &b, Center::Mean, Direction::Lower, 0.9, 1000, 1).unwrap();
        assert!(lo.low > 0.77 && lo.high < 0.83, "{lo:?}");
    }

    #[test]
    fn refuses_bad_arguments_and_zero_means() {
        let a = s(&[1.0, 2.0]);
        assert_eq!(
            bootstrap_ratio_ci(&a, &a, Center::Mean, Direction::Lower, 0.95, 0, 1),
            None
        );
        assert_eq!(
            bootstrap_ratio_ci(&a, &a, Center::Mean, Direction::Lower, 1.0, 10, 1),
            None
        );
        let zero = s(&[0.0, 0.0]);
        assert_eq!(
            bootstrap_ratio_ci(&zero, &a, Center::Mean, Direction::Lower, 0.95, 10, 1),
            None
        );
    }
}
