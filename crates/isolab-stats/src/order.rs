//! Order statistics: percentiles and the distribution-free confidence interval of the median.

use statrs::distribution::{Binomial, DiscreteCDF};

use crate::{Interval, Sample};

/// Sorts a copy of `values` in ascending order (NaN last, by `f64::total_cmp`).
pub(crate) fn sorted(values: &[f64]) -> Vec<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v
}

/// The order statistics of `values` at each 0-based rank of `ranks` (ascending, all
/// below `values.len()`), by `f64::total_cmp`: what sorting `values` and reading
/// `sorted[rank]` gives, bit for bit, without sorting. The middle rank is selected
/// first (Hoare's selection, linear time); it leaves the values partitioned around it,
/// so the ranks below it are selected among the values below and the ranks above among
/// those above, and k ranks cost about two passes over `values` instead of k. The
/// values are reordered.
pub(crate) fn order_statistics(values: &mut [f64], ranks: &[usize]) -> Vec<f64> {
    let mut out = Vec::with_capacity(ranks.len());
    select_ranks(values, ranks, 0, &mut out);
    out
}

/// [`order_statistics`] of `values`, the part of a larger slice that starts at rank
/// `offset`; appends to `out` in the order of `ranks`.
fn select_ranks(values: &mut [f64], ranks: &[usize], offset: usize, out: &mut Vec<f64>) {
    let Some(&middle) = ranks.get(ranks.len() / 2) else {
        return;
    };
    let (below, at, above) = values.select_nth_unstable_by(middle - offset, f64::total_cmp);
    let at = *at;
    let lower = ranks.partition_point(|&r| r < middle);
    let upper = ranks.partition_point(|&r| r <= middle);
    select_ranks(below, &ranks[..lower], offset, out);
    out.extend(std::iter::repeat_n(at, upper - lower));
    select_ranks(above, &ranks[upper..], middle + 1, out);
}

/// Linear-interpolation percentile of already sorted values (see [`percentile`]).
/// `sorted` must be non-empty and `q` in [0, 100].
pub(crate) fn percentile_sorted(sorted: &[f64], q: f64) -> f64 {
    let n = sorted.len();
    let virtual_index = q / 100.0 * (n - 1) as f64;
    let below = virtual_index.floor();
    // `below` is in [0, n − 1] because q is in [0, 100].
    let lo = (below as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    let t = virtual_index - below;
    lerp(sorted[lo], sorted[hi], t)
}

/// [`percentile_sorted`] of `values` in any order, without sorting them: the two
/// order statistics it interpolates are selected in linear time (the values are
/// reordered). Bit-identical to sorting first. `values` must be non-empty and `q` in
/// [0, 100].
pub(crate) fn percentile_selected(values: &mut [f64], q: f64) -> f64 {
    let n = values.len();
    let virtual_index = q / 100.0 * (n - 1) as f64;
    let below = virtual_index.floor();
    let lo = (below as usize).min(n - 1);
    let t = virtual_index - below;
    let (_, low, above) = values.select_nth_unstable_by(lo, f64::total_cmp);
    let low = *low;
    // The next order statistic is the smallest of those above (itself when last).
    let high = above.iter().copied().min_by(f64::total_cmp).unwrap_or(low);
    lerp(low, high, t)
}

/// numpy's `_lerp`: a + (b − a)·t, computed from the nearer end for t ≥ ½ so that the
/// result is bit-identical to `numpy.percentile`.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

/// The `q`-th percentile of `values` by linear interpolation between the closest ranks:
/// with the values sorted as x₀ ≤ … ≤ xₙ₋₁ and h = (q/100)·(n − 1),
/// P = x⌊h⌋ + (h − ⌊h⌋)·(x⌊h⌋₊₁ − x⌊h⌋) (Hyndman & Fan 1996, definition 7; the default
/// `method='linear'` of `numpy.percentile`, which it matches bit for bit).
///
/// `None` for empty input or when `q` is not in [0, 100]. As in NumPy, a NaN among the
/// values makes the result NaN.
pub fn percentile(values: &[f64], q: f64) -> Option<f64> {
    if values.is_empty() || !(0.0..=100.0).contains(&q) {
        return None;
    }
    if values.iter().any(|v| v.is_nan()) {
        return Some(f64::NAN);
    }
    Some(percentile_sorted(&sorted(values), q))
}

/// Distribution-free confidence interval of the median from order statistics.
///
/// The number of observations below the population median is Binomial(n, ½), so with
/// k the **largest** integer ≥ 1 such that P(Binomial(n, ½) < k) ≤ α/2 (α = 1 − `level`),
/// the interval [x₍ₖ₎, x₍ₙ₋ₖ₊₁₎] (1-based order statistics) covers the median with
/// probability 1 − 2·P(Binomial(n, ½) ≤ k − 1) ≥ `level` (Conover, *Practical
/// Nonparametric Statistics*, 3rd ed., §3.2; the method of Go's benchstat,
/// `golang.org/x/perf/benchmath`). Checked against an independent computation with
/// `scipy.stats.binom.cdf` and against `scipy.stats.quantile_test(x, p=0.5)
/// .confidence_interval(level)`, which it equals except when P(Binomial(n, ½) ≤ k − 1)
/// is exactly α/2 (possible only for dyadic α/2 such as level 0.5; SciPy then takes the
/// wider interval).
///
/// `None` when `level` is not in (0, 1) or when n is too small for the level, i.e.
/// 2·(½)ⁿ > α — at 95% a sample needs at least 6 observations.
pub fn median_ci(s: &Sample, level: f64) -> Option<Interval> {
    if !(level > 0.0 && level < 1.0) {
        return None;
    }
    let n = s.len();
    let k = median_ci_rank(n, level)?;
    let x = sorted(s.values());
    Some(Interval {
        low: x[k - 1],
        high: x[n - k],
        level,
    })
}

/// The rank k of [`median_ci`] (1-based), or `None` when even k = 1 is too wide a tail.
fn median_ci_rank(n: usize, level: f64) -> Option<usize> {
    let half_alpha = (1.0 - level) / 2.0;
    let dist = Binomial::new(0.5, n as u64).ok()?;
    // P(B < k) = P(B ≤ k − 1) = cdf(k − 1), increasing in k; find the largest k ≥ 1 with
    // cdf(k − 1) ≤ α/2 by bisection over k ∈ [1, n/2 + 1] (cdf(k − 1) ≥ ½ beyond).
    let tail = |k: usize| dist.cdf((k - 1) as u64);
    if tail(1) > half_alpha {
        return None;
    }
    let (mut good, mut bad) = (1usize, n / 2 + 2);
    while bad - good > 1 {
        let mid = good + (bad - good) / 2;
        if tail(mid) <= half_alpha {
            good = mid;
        } else {
            bad = mid;
        }
    }
    Some(good)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_statistics_are_the_sorted_values_at_their_ranks() {
        let mut x: u64 = 7;
        for n in [1_usize, 2, 3, 10, 325, 1000] {
            let values: Vec<f64> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    // Ties as well: few distinct values.
                    ((x >> 33) % 97) as f64 / 4.0 - 7.0
                })
                .collect();
            let sorted = sorted(&values);
            let picks = [
                vec![0],
                vec![n - 1],
                vec![0, n / 2, n - 1],
                vec![n / 4, n / 4, n / 2, n - 1 - n / 4],
                (0..n).collect(),
            ];
            for ranks in picks {
                let mut v = values.clone();
                let got = order_statistics(&mut v, &ranks);
                let want: Vec<f64> = ranks.iter().map(|&r| sorted[r]).collect();
                assert_eq!(got, want, "n {n}, ranks {ranks:?}");
            }
        }
        assert!(order_statistics(&mut [1.0], &[]).is_empty());
    }
    use proptest::prelude::*;

    fn s(v: &[f64]) -> Sample {
        Sample::new(v.to_vec()).unwrap()
    }

    #[test]
    fn percentile_matches_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4], [0, 25, 50, 90, 100]) = [1, 1.75, 2.5, 3.7, 4]
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(percentile(&v, 0.0), Some(1.0));
        assert_eq!(percentile(&v, 25.0), Some(1.75));
        assert_eq!(percentile(&v, 50.0), Some(2.5));
        assert!((percentile(&v, 90.0).unwrap() - 3.7).abs() < 1e-12);
        assert_eq!(percentile(&v, 100.0), Some(4.0));
        assert_eq!(percentile(&[7.0], 33.0), Some(7.0));
    }

    #[test]
    fn percentile_refuses_bad_input() {
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1.0], -1.0), None);
        assert_eq!(percentile(&[1.0], 100.5), None);
        assert_eq!(percentile(&[1.0], f64::NAN), None);
        assert!(percentile(&[1.0, f64::NAN], 50.0).unwrap().is_nan());
    }

    #[test]
    fn median_ci_needs_six_values_at_95_percent() {
        assert_eq!(median_ci(&s(&[1.0, 2.0, 3.0, 4.0, 5.0]), 0.95), None);
        let ci = median_ci(&s(&[6.0, 1.0, 3.0, 2.0, 5.0, 4.0]), 0.95).unwrap();
        assert_eq!((ci.low, ci.high), (1.0, 6.0));
        // n = 5 is enough at 90%: 2·(½)⁵ = 0.0625 ≤ 0.1.
        let ci = median_ci(&s(&[1.0, 2.0, 3.0, 4.0, 5.0]), 0.90).unwrap();
        assert_eq!((ci.low, ci.high), (1.0, 5.0));
    }

    #[test]
    fn median_ci_rank_for_twenty() {
        // P(B(20, ½) ≤ 5) = 0.0207 ≤ 0.025 < P(B ≤ 6) = 0.0577, so k = 6: [x₆, x₁₅].
        assert_eq!(median_ci_rank(20, 0.95), Some(6));
    }

    #[test]
    fn median_ci_refuses_bad_levels() {
        let x = s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        assert_eq!(median_ci(&x, 0.0), None);
        assert_eq!(median_ci(&x, 1.0), None);
        assert_eq!(median_ci(&x, f64::NAN), None);
    }

    proptest! {
        #[test]
        fn percentiles_are_monotone_in_q(
            values in prop::collection::vec(-1e6f64..1e6, 1..50),
            q1 in 0.0f64..=100.0,
            q2 in 0.0f64..=100.0,
        ) {
            let (lo, hi) = if q1 <= q2 { (q1, q2) } else { (q2, q1) };
            let (a, b) = (percentile(&values, lo).unwrap(), percentile(&values, hi).unwrap());
            prop_assert!(a <= b, "p{lo} = {a} > p{hi} = {b}");
        }

        #[test]
        fn a_selected_percentile_is_the_sorted_one_bit_for_bit(
            values in prop::collection::vec(-1e6f64..1e6, 1..300),
            q in 0.0f64..=100.0,
        ) {
            let mut sorted = values.clone();
            sorted.sort_by(f64::total_cmp);
            let mut any_order = values;
            let selected = percentile_selected(&mut any_order, q);
            prop_assert_eq!(selected.to_bits(), percentile_sorted(&sorted, q).to_bits());
        }

        #[test]
        fn median_ci_contains_the_median(values in prop::collection::vec(-1e6f64..1e6, 6..60)) {
            let x = Sample::new(values).unwrap();
            let ci = median_ci(&x, 0.95).unwrap();
            prop_assert!(ci.low <= x.median() && x.median() <= ci.high);
        }
    }
}
