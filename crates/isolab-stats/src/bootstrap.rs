//! Seeded percentile bootstrap of the overhead ratio.

use rand::{RngCore, SeedableRng};
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
/// draws its `a` indices then its `b` indices, two 32-bit draws from each 64-bit output
/// (see [`draw`]); the same inputs and seed give the same interval on every platform.
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
    let mut drawn = Vec::with_capacity(values.len());
    draw(values, rng, |v| drawn.push(v));
    drawn.sort_by(f64::total_cmp);
    percentile_sorted(&drawn, 50.0)
}

/// Mean of one resample with replacement of `values` (non-empty): the values [`draw`]
/// takes, in two sums, one for the low halves' draws and one for the high halves', so
/// that the additions of one do not wait for the other's (a single chain of dependent
/// additions is what limits the bootstrap of a report over many cells).
pub(crate) fn resampled_mean(values: &[f64], rng: &mut Xoshiro256PlusPlus) -> f64 {
    let indices = Indices::new(values.len());
    let (mut low, mut high) = (0.0, 0.0);
    let mut left = values.len();
    while left >= 2 {
        let word = rng.next_u64();
        match (indices.of(word as u32), indices.of((word >> 32) as u32)) {
            (Some(i), Some(j)) => {
                low += values[i];
                high += values[j];
                left -= 2;
            }
            (Some(i), None) | (None, Some(i)) => {
                low += values[i];
                left -= 1;
            }
            (None, None) => {}
        }
    }
    while left == 1 {
        let word = rng.next_u64();
        if let Some(i) = indices
            .of(word as u32)
            .or_else(|| indices.of((word >> 32) as u32))
        {
            low += values[i];
            left = 0;
        }
    }
    (low + high) / values.len() as f64
}

/// Indices below n from 32-bit draws by Lemire's multiply-shift: the high half of
/// draw × n, rejecting the few draws that would bias it (D. Lemire, "Fast Random
/// Integer Generation in an Interval", ACM TOMACS 29(1), 2019), so that every index
/// has probability 1/n exactly.
#[derive(Clone, Copy)]
struct Indices {
    n: u32,
    /// 2^32 mod n: draws whose low product half is below it are rejected.
    reject_below: u32,
}

impl Indices {
    fn new(n: usize) -> Indices {
        let n = u32::try_from(n).expect("a sample of fewer than 2^32 values");
        Indices {
            n,
            reject_below: n.wrapping_neg() % n,
        }
    }

    fn of(self, draw: u32) -> Option<usize> {
        let product = u64::from(draw) * u64::from(self.n);
        (product as u32 >= self.reject_below).then_some((product >> 32) as usize)
    }
}

/// Draws `values.len()` values of `values` uniformly with replacement, in order, into
/// `take`. Each 64-bit output of the generator gives two 32-bit draws, its low half
/// first, each made an index by [`Indices`]; a half left over at the end is dropped.
/// The draws are the bootstrap's cost in a report over many cells: this takes one
/// generator output for two of them.
fn draw(values: &[f64], rng: &mut Xoshiro256PlusPlus, mut take: impl FnMut(f64)) {
    let indices = Indices::new(values.len());
    let mut left = values.len();
    while left > 0 {
        let word = rng.next_u64();
        for half in [word as u32, (word >> 32) as u32] {
            if let Some(i) = indices.of(half).filter(|_| left > 0) {
                take(values[i]);
                left -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_are_uniform_indices_two_to_a_generator_output() {
        let values: Vec<f64> = (0..7).map(f64::from).collect();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut counts = [0u32; 7];
        for _ in 0..10_000 {
            draw(&values, &mut rng, |v| counts[v as usize] += 1);
        }
        // 70 000 draws: each index 10 000 ± 4 standard deviations (≈ 93).
        for (i, c) in counts.iter().enumerate() {
            assert!((9_620..=10_380).contains(c), "index {i}: {c} of 70 000");
        }
        // Seven draws take four outputs (the eighth half is dropped): the next
        // replicate starts on a fresh output.
        let mut a = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut b = Xoshiro256PlusPlus::seed_from_u64(3);
        draw(&values, &mut a, |_| {});
        for _ in 0..4 {
            b.next_u64();
        }
        assert_eq!(a.next_u64(), b.next_u64());
        // The mean takes the same draws (summed in another order).
        let values: Vec<f64> = (0..25).map(|i| f64::from(i * i)).collect();
        for seed in 0..50 {
            let mut a = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut b = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut drawn = Vec::new();
            draw(&values, &mut a, |v| drawn.push(v));
            let mean = drawn.iter().sum::<f64>() / 25.0;
            assert!((resampled_mean(&values, &mut b) - mean).abs() < 1e-9);
            assert_eq!(a.next_u64(), b.next_u64(), "seed {seed}");
        }
        // One value: every draw is it.
        let mut one = Vec::new();
        draw(&[5.0], &mut rng, |v| one.push(v));
        assert_eq!(one, [5.0]);
    }

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
