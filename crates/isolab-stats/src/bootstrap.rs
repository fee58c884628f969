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
/// (see [`draw`]); a replicate's mean is summed from how often it drew each value, in
/// the values' order ([`weighted_mean`]); the same inputs and seed give the same
/// interval on every platform. The draws depend on the sizes of `a` and `b` and the
/// seed alone, not on the values: [`Resamples`] makes them once for many pairs of
/// samples of those sizes, with the same intervals, bit for bit.
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
    if resamples == 0 || !(level > 0.0 && level < 1.0) {
        return None;
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let (mut draws_a, mut draws_b) = (Drawn::default(), Drawn::default());
    let mut ratios = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        draws_a.draw(a.len(), &mut rng);
        draws_b.draw(b.len(), &mut rng);
        let ma = center.of(a.values(), &draws_a.indices, &draws_a.counts);
        let mb = center.of(b.values(), &draws_b.indices, &draws_b.counts);
        ratios.push(overhead_ratio(ma, mb, direction)?);
    }
    Some(interval(&mut ratios, level))
}

/// [P(α/2), P(1 − α/2)] of `ratios` (any order), α = 1 − `level`.
fn interval(ratios: &mut [f64], level: f64) -> Interval {
    let half_alpha = (1.0 - level) / 2.0;
    Interval {
        low: percentile_selected(ratios, 100.0 * half_alpha),
        high: percentile_selected(ratios, 100.0 * (1.0 - half_alpha)),
        level,
    }
}

/// The draws of [`bootstrap_ratio_ci`] for samples of `a_len` and `b_len` values and
/// one seed, made once: [`Resamples::ratio_ci`] of any two samples of those sizes is
/// `bootstrap_ratio_ci` of them with that seed, bit for bit, without drawing again.
///
/// A report compares thousands of cell pairs that ran as many repetitions each, with
/// one seed: drawing the indices was most of the bootstrap's cost, and they are the
/// same for every pair. Each replicate keeps its indices (for the median) and how often
/// it drew each value (for the mean): `resamples × (a_len + b_len) × 12` bytes (1.2 MB
/// for 2 000 replicates of 25 against 25).
#[derive(Debug, Clone, PartialEq)]
pub struct Resamples {
    sizes: (usize, usize),
    seed: u64,
    replicates: usize,
    /// Every replicate's `a_len` indices into `a` then `b_len` indices into `b`, in
    /// draw order, one replicate after the other.
    indices: Vec<u32>,
    /// How often each replicate drew each value of `a`: value 0's count in every
    /// replicate, then value 1's, and so on (`a_len × resamples`), so that the means of
    /// all replicates are summed a value at a time, across replicates, which vectorises.
    counts_a: Vec<f64>,
    /// The same for `b`.
    counts_b: Vec<f64>,
}

impl Resamples {
    /// The draws of `resamples` replicates of samples of `a_len` and `b_len` values
    /// (each at least 1) from `seed`.
    ///
    /// # Panics
    ///
    /// When `a_len` or `b_len` is 0 (no [`Sample`] is empty).
    pub fn new(a_len: usize, b_len: usize, resamples: usize, seed: u64) -> Resamples {
        assert!(a_len > 0 && b_len > 0, "a resample of no values");
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut indices = Vec::with_capacity(resamples * (a_len + b_len));
        let mut counts_a = vec![0.0; a_len * resamples];
        let mut counts_b = vec![0.0; b_len * resamples];
        let mut drawn = Drawn::default();
        for r in 0..resamples {
            for (n, counts) in [(a_len, &mut counts_a), (b_len, &mut counts_b)] {
                drawn.draw(n, &mut rng);
                indices.extend_from_slice(&drawn.indices);
                for (i, &count) in drawn.counts.iter().enumerate() {
                    counts[i * resamples + r] = count;
                }
            }
        }
        Resamples {
            sizes: (a_len, b_len),
            seed,
            replicates: resamples,
            indices,
            counts_a,
            counts_b,
        }
    }

    /// The sizes of the samples these draws are for: `(a_len, b_len)`.
    pub fn sizes(&self) -> (usize, usize) {
        self.sizes
    }

    /// How many replicates these are.
    pub fn replicates(&self) -> usize {
        self.replicates
    }

    /// The seed they were drawn from.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// [`bootstrap_ratio_ci`] of `a` and `b` with these draws' replicates and seed.
    ///
    /// # Panics
    ///
    /// When the samples' sizes are not [`Resamples::sizes`].
    pub fn ratio_ci(
        &self,
        a: &Sample,
        b: &Sample,
        center: Center,
        direction: Direction,
        level: f64,
    ) -> Option<Interval> {
        assert_eq!(
            (a.len(), b.len()),
            self.sizes,
            "resamples drawn for other sample sizes"
        );
        if self.replicates == 0 || !(level > 0.0 && level < 1.0) {
            return None;
        }
        let (a, b) = (a.values(), b.values());
        let mut ratios = match center {
            Center::Mean => {
                let (mut ma, mut mb) = (vec![0.0; self.replicates], vec![0.0; self.replicates]);
                add_weighted(&mut ma, a, &self.counts_a);
                add_weighted(&mut mb, b, &self.counts_b);
                ratios_of_sums(&ma, &mb, (a.len(), b.len()), direction)?
            }
            Center::Median => {
                let width = a.len() + b.len();
                let mut ratios = Vec::with_capacity(self.replicates);
                for indices in self.indices.chunks_exact(width) {
                    let (ia, ib) = indices.split_at(a.len());
                    let (ma, mb) = (median_of(a, ia), median_of(b, ib));
                    ratios.push(overhead_ratio(ma, mb, direction)?);
                }
                ratios
            }
        };
        Some(interval(&mut ratios, level))
    }
}

impl Center {
    /// The centre of the resample of `values` that drew `indices`, value `i`
    /// `counts[i]` times: the mean as [`weighted_mean`] sums it, or the median.
    fn of(self, values: &[f64], indices: &[u32], counts: &[f64]) -> f64 {
        match self {
            Center::Mean => weighted_mean(values, counts),
            Center::Median => median_of(values, indices),
        }
    }
}

/// The median of the values at `indices`.
fn median_of(values: &[f64], indices: &[u32]) -> f64 {
    let mut drawn: Vec<f64> = indices.iter().map(|&i| values[i as usize]).collect();
    drawn.sort_by(f64::total_cmp);
    percentile_sorted(&drawn, 50.0)
}

/// The mean of a resample of `values` that drew value `i` `counts[i]` times (as many
/// counts as values, adding up to their number): Σ `counts[i] × values[i]` / n, added
/// in increasing `i`, each product rounded before it is added (Rust fuses no
/// multiply-add unless asked), so one result on every platform and the same as
/// [`add_weighted`]'s for many replicates at once.
fn weighted_mean(values: &[f64], counts: &[f64]) -> f64 {
    debug_assert_eq!(values.len(), counts.len());
    let mut sum = 0.0;
    for (v, c) in values.iter().zip(counts) {
        sum += c * v;
    }
    sum / values.len() as f64
}

/// Adds `values[i] × counts[i]` to each replicate's sum in `sums`, for every `i` in
/// increasing order, where `counts` holds value 0's count in every replicate, then value
/// 1's, and so on: each sum is then [`weighted_mean`]'s before its division, in the
/// same order. A value at a time across every replicate, the additions of replicates
/// do not wait for each other and the compiler makes them vector instructions; a sum
/// per replicate instead (or in draw order, a gather a draw) waits for each addition
/// before the next, and over a report's thousands of points that chain was most of the
/// bootstrap's time.
fn add_weighted(sums: &mut [f64], values: &[f64], counts: &[f64]) {
    let replicates = sums.len();
    debug_assert_eq!(counts.len(), values.len() * replicates);
    // A block of replicates' sums stays in registers while every value is added.
    let mut start = 0;
    for block in sums.chunks_mut(BLOCK) {
        let mut acc = [0.0; BLOCK];
        acc[..block.len()].copy_from_slice(block);
        if block.len() == BLOCK {
            for (i, &v) in values.iter().enumerate() {
                let c = &counts[i * replicates + start..][..BLOCK];
                for k in 0..BLOCK {
                    acc[k] += c[k] * v;
                }
            }
        } else {
            for (i, &v) in values.iter().enumerate() {
                let c = &counts[i * replicates + start..][..block.len()];
                for (sum, &c) in acc.iter_mut().zip(c) {
                    *sum += c * v;
                }
            }
        }
        block.copy_from_slice(&acc[..block.len()]);
        start += block.len();
    }
}

/// The replicates [`add_weighted`] sums at once.
const BLOCK: usize = 16;

/// [`overhead_ratio`] of each replicate's means, from their sums over `sizes` values
/// (as [`weighted_mean`] divides them); `None` when any divisor mean is zero.
///
/// [`overhead_ratio`]'s arithmetic is written out here so that the loop has no early
/// exit and vectorises: calling it made a point of 25 against 25 values 12% slower
/// (37 µs against 33). The bit-for-bit test of [`Resamples`] against
/// [`bootstrap_ratio_ci`], which calls it, holds the two equal in both directions.
fn ratios_of_sums(
    sums_a: &[f64],
    sums_b: &[f64],
    (n_a, n_b): (usize, usize),
    direction: Direction,
) -> Option<Vec<f64>> {
    let (n_a, n_b) = (n_a as f64, n_b as f64);
    let mut zero = false;
    let ratios = sums_a
        .iter()
        .zip(sums_b)
        .map(|(&sa, &sb)| {
            let (ma, mb) = (sa / n_a, sb / n_b);
            let (num, den) = match direction {
                Direction::Lower => (mb, ma),
                Direction::Higher => (ma, mb),
            };
            zero |= den == 0.0;
            num / den
        })
        .collect();
    (!zero).then_some(ratios)
}

/// One resample's draws: the indices in draw order, and how often each was drawn.
#[derive(Default)]
pub(crate) struct Drawn {
    indices: Vec<u32>,
    counts: Vec<f64>,
}

impl Drawn {
    /// Draws `n` indices below `n` (see [`draw`]) in place of the last draws.
    fn draw(&mut self, n: usize, rng: &mut Xoshiro256PlusPlus) {
        self.indices.clear();
        draw(n, rng, &mut self.indices);
        self.counts.clear();
        self.counts.resize(n, 0.0);
        for &i in &self.indices {
            self.counts[i as usize] += 1.0;
        }
    }
}

/// Draws `n` indices below `n` uniformly with replacement onto `indices`: each 64-bit
/// output of the generator gives two 32-bit draws, its low half first, each made an
/// index by [`Indices`]; a half left over at the end is dropped, and so is a half
/// [`Indices`] rejects.
fn draw(n: usize, rng: &mut Xoshiro256PlusPlus, indices: &mut Vec<u32>) {
    let of = Indices::new(n);
    let mut left = n;
    while left > 0 {
        let word = rng.next_u64();
        for half in [word as u32, (word >> 32) as u32] {
            if left > 0 {
                if let Some(i) = of.of(half) {
                    indices.push(i as u32);
                    left -= 1;
                }
            }
        }
    }
}

/// Mean of one resample with replacement of `values` (non-empty): the values [`draw`]
/// takes, summed as [`weighted_mean`] sums them. `drawn` is room for the draws, kept
/// between calls.
pub(crate) fn resampled_mean(
    values: &[f64],
    rng: &mut Xoshiro256PlusPlus,
    drawn: &mut Drawn,
) -> f64 {
    drawn.draw(values.len(), rng);
    weighted_mean(values, &drawn.counts)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One resample of `n` values: its indices in draw order and their counts.
    fn drawn(n: usize, rng: &mut Xoshiro256PlusPlus) -> Drawn {
        let mut drawn = Drawn::default();
        drawn.draw(n, rng);
        drawn
    }

    #[test]
    fn draws_are_uniform_indices_two_to_a_generator_output() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut counts = [0u32; 7];
        for _ in 0..10_000 {
            let d = drawn(7, &mut rng);
            assert_eq!(d.indices.len(), 7);
            assert_eq!(d.counts.iter().sum::<f64>(), 7.0);
            for i in &d.indices {
                counts[*i as usize] += 1;
            }
        }
        // 70 000 draws: each index 10 000 ± 4 standard deviations (≈ 93).
        for (i, c) in counts.iter().enumerate() {
            assert!((9_620..=10_380).contains(c), "index {i}: {c} of 70 000");
        }
        // Seven draws take four outputs (the eighth half is dropped): the next
        // replicate starts on a fresh output.
        let mut a = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut b = Xoshiro256PlusPlus::seed_from_u64(3);
        drawn(7, &mut a);
        for _ in 0..4 {
            b.next_u64();
        }
        assert_eq!(a.next_u64(), b.next_u64());
        // The mean takes the same draws and sums them in the same order.
        let values: Vec<f64> = (0..25).map(|i| f64::from(i * i) / 7.0).collect();
        for seed in 0..50 {
            let mut a = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut b = Xoshiro256PlusPlus::seed_from_u64(seed);
            let d = drawn(25, &mut a);
            let mean = Center::Mean.of(&values, &d.indices, &d.counts);
            let mut room = Drawn::default();
            assert_eq!(
                resampled_mean(&values, &mut b, &mut room).to_bits(),
                mean.to_bits()
            );
            assert_eq!(a.next_u64(), b.next_u64(), "seed {seed}");
        }
        // One value: every draw is it.
        let d = drawn(1, &mut rng);
        assert_eq!((d.indices, d.counts), (vec![0], vec![1.0]));
    }

    #[test]
    fn the_mean_of_counts_adds_in_the_values_order_for_one_replicate_or_many() {
        let values = [1e16, 3.0, -1e16, 5.0, 1.0, 7.0, 1.0];
        let counts = [2.0, 1.0, 2.0, 0.0, 1.0, 0.0, 1.0];
        let mut want = 0.0;
        for (c, v) in counts.iter().zip(values) {
            want += c * v;
        }
        let want = want / 7.0;
        assert_eq!(weighted_mean(&values, &counts).to_bits(), want.to_bits());
        // In draw order (value 0, 2, 0, 1, 4, 2, 6) the large values cancel before the
        // small ones are added: another result, and the reason the order is written down.
        let mut in_draw_order = 0.0;
        for i in [0, 2, 0, 1, 4, 2, 6] {
            in_draw_order += values[i];
        }
        assert_ne!((in_draw_order / 7.0).to_bits(), want.to_bits());
        // Every value drawn once: the plain mean.
        let v: Vec<f64> = (1..=9).map(f64::from).collect();
        assert_eq!(weighted_mean(&v, &[1.0; 9]), 5.0);
        // Many replicates at once, a value at a time across them (37: two blocks and a
        // part), each sum the one weighted_mean makes before dividing.
        let replicates = 37;
        let per: Vec<Vec<f64>> = (0..replicates)
            .map(|r| (0..7).map(|i| f64::from((r * 7 + i) % 3)).collect())
            .collect();
        let mut by_value = vec![0.0; 7 * replicates as usize];
        for (r, counts) in per.iter().enumerate() {
            for (i, &c) in counts.iter().enumerate() {
                by_value[i * replicates as usize + r] = c;
            }
        }
        let mut sums = vec![0.0; replicates as usize];
        add_weighted(&mut sums, &values, &by_value);
        for (sum, counts) in sums.iter().zip(&per) {
            let mean = weighted_mean(&values, counts);
            assert_eq!((sum / 7.0).to_bits(), mean.to_bits());
        }
    }

    /// The bootstrap as it was written before [`Resamples`]: each replicate's values
    /// taken straight from the generator, the mean by [`resampled_mean`], the median
    /// of the values in draw order.
    fn drawn_straight(
        a: &Sample,
        b: &Sample,
        center: Center,
        direction: Direction,
        level: f64,
        resamples: usize,
        seed: u64,
    ) -> Option<Interval> {
        fn median(values: &[f64], rng: &mut Xoshiro256PlusPlus) -> f64 {
            let indices = Indices::new(values.len());
            let mut drawn = Vec::new();
            while drawn.len() < values.len() {
                let word = rng.next_u64();
                for half in [word as u32, (word >> 32) as u32] {
                    if let Some(i) = indices.of(half).filter(|_| drawn.len() < values.len()) {
                        drawn.push(values[i]);
                    }
                }
            }
            drawn.sort_by(f64::total_cmp);
            percentile_sorted(&drawn, 50.0)
        }
        let statistic: fn(&[f64], &mut Xoshiro256PlusPlus) -> f64 = match center {
            Center::Mean => |values, rng| resampled_mean(values, rng, &mut Drawn::default()),
            Center::Median => median,
        };
        if resamples == 0 || !(level > 0.0 && level < 1.0) {
            return None;
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut ratios = Vec::new();
        for _ in 0..resamples {
            let ma = statistic(a.values(), &mut rng);
            let mb = statistic(b.values(), &mut rng);
            ratios.push(overhead_ratio(ma, mb, direction)?);
        }
        Some(interval(&mut ratios, level))
    }

    #[test]
    fn resamples_drawn_once_give_the_intervals_of_drawing_each_time_bit_for_bit() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut sample = |n: usize| {
            let v: Vec<f64> = (0..n)
                .map(|_| 10.0 + (rng.next_u64() % 1000) as f64 / 997.0)
                .collect();
            s(&v)
        };
        for (n_a, n_b) in [(2, 2), (3, 7), (25, 25), (24, 31), (101, 9)] {
            for seed in [0, 1, 0x1501_ab00] {
                let plan = Resamples::new(n_a, n_b, 500, seed);
                assert_eq!(plan.sizes(), (n_a, n_b));
                assert_eq!((plan.replicates(), plan.seed()), (500, seed));
                for _ in 0..3 {
                    let (a, b) = (sample(n_a), sample(n_b));
                    for center in [Center::Mean, Center::Median] {
                        for direction in [Direction::Lower, Direction::Higher] {
                            let want = drawn_straight(&a, &b, center, direction, 0.95, 500, seed)
                                .expect("non-zero centres");
                            let bits = |i: Interval| (i.low.to_bits(), i.high.to_bits());
                            let got =
                                bootstrap_ratio_ci(&a, &b, center, direction, 0.95, 500, seed);
                            assert_eq!(got.map(bits), Some(bits(want)), "{n_a} {n_b} {seed}");
                            let got = plan.ratio_ci(&a, &b, center, direction, 0.95);
                            assert_eq!(got.map(bits), Some(bits(want)), "{n_a} {n_b} {seed}");
                        }
                    }
                }
            }
        }
        // A zero centre and a bad level refuse as bootstrap_ratio_ci does.
        let zero = s(&[0.0, 0.0]);
        let plan = Resamples::new(2, 2, 10, 1);
        assert_eq!(
            plan.ratio_ci(&zero, &s(&[1.0, 2.0]), Center::Mean, Direction::Lower, 0.95),
            None
        );
        assert_eq!(
            plan.ratio_ci(
                &s(&[1.0, 2.0]),
                &s(&[1.0, 2.0]),
                Center::Mean,
                Direction::Lower,
                1.0
            ),
            None
        );
        assert_eq!(
            Resamples::new(2, 2, 0, 1).ratio_ci(&zero, &zero, Center::Mean, Direction::Lower, 0.9),
            None
        );
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
