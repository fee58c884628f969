//! Rank-based two-sample comparisons: the Mann-Whitney U test and the Hodges-Lehmann shift.

use statrs::distribution::{ContinuousCDF, Normal};

use crate::{Interval, Sample};

/// Largest number of arrangements C(n₁ + n₂, n₁) for which the exact null distribution
/// of U is used: 2⁵³, so that every count and their total are exact in an `f64`.
const MAX_EXACT_ARRANGEMENTS: u128 = 1 << 53;

/// Result of a two-sided Mann-Whitney U test.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct MannWhitney {
    /// U of `a`: U₁ = R₁ − n₁(n₁ + 1)/2, R₁ the sum of the (mid-)ranks of `a` in the pooled
    /// sample; the number of pairs with aᵢ > bⱼ, ties counting ½.
    pub u: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether `p` comes from the exact null distribution (else the normal approximation).
    pub exact: bool,
}

/// Two-sided Mann-Whitney U test (H. B. Mann & D. R. Whitney, Ann. Math. Statist. 18,
/// 1947) of `a` against `b`.
///
/// With U = max(U₁, U₂), U₂ = n₁n₂ − U₁:
/// - **exact** when there are no ties and C(n₁ + n₂, n₁) ≤ 2⁵³ (which includes every
///   pair of samples of at most 28 observations each): p = 2·P(U' ≥ U) under the null
///   distribution of U', whose counts are the coefficients of the Gaussian binomial
///   [n₁ + n₂ choose n₁]_q = ∏ᵢ₌₁..ₙ₁ (1 − q^(n₂+i))/(1 − q^i) (Andrews, *The Theory of
///   Partitions*, 1976, Thm 3.1), computed in exact integer arithmetic;
/// - otherwise the **normal approximation** with tie and continuity correction:
///   z = (U − n₁n₂/2 − ½)/σ, σ² = n₁n₂/12·((n + 1) − Σ(tₖ³ − tₖ)/(n(n − 1))), tₖ the
///   sizes of the groups of tied values, and p = 2·(1 − Φ(z)).
///
/// p is capped at 1; when every value is tied (σ = 0) p = 1. Matches
/// `scipy.stats.mannwhitneyu(a, b, alternative='two-sided', use_continuity=True,
/// method='exact' | 'asymptotic')`, whose `statistic` is U₁.
pub fn mann_whitney(a: &Sample, b: &Sample) -> MannWhitney {
    let (n1, n2) = (a.len(), b.len());
    let ranked = Ranked::new(a.values(), b.values());
    let nn = (n1 * n2) as f64;
    let u1 = ranked.rank_sum_a - (n1 * (n1 + 1)) as f64 / 2.0;
    let u = u1.max(nn - u1);
    let exact = !ranked.has_ties && arrangements_within(n1, n2, MAX_EXACT_ARRANGEMENTS);
    let p = if exact {
        // Without ties U is an integer (U₁ counts pairs).
        2.0 * exact_sf(u as u64, n1, n2)
    } else {
        let n = (n1 + n2) as f64;
        let var = nn / 12.0 * ((n + 1.0) - ranked.tie_term / (n * (n - 1.0)));
        if var <= 0.0 {
            1.0
        } else {
            2.0 * standard_normal_sf((u - nn / 2.0 - 0.5) / var.sqrt())
        }
    };
    MannWhitney {
        u: u1,
        p: p.clamp(0.0, 1.0),
        exact,
    }
}

/// Hodges-Lehmann estimate of the shift of `b` relative to `a`, with its confidence interval.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Shift {
    /// Median of all pairwise differences bⱼ − aᵢ (positive: `b` is larger).
    pub estimate: f64,
    /// Distribution-free confidence interval of the shift; `None` when the samples are
    /// too small for the level or the level is not in (0, 1).
    pub ci: Option<Interval>,
}

/// Hodges-Lehmann shift estimate Δ̂ = median{bⱼ − aᵢ} over all n₁n₂ pairs (J. L. Hodges &
/// E. L. Lehmann, Ann. Math. Statist. 34, 1963) with the distribution-free confidence
/// interval of Moses (Hollander & Wolfe, *Nonparametric Statistical Methods*, 2nd ed.,
/// 1999, §4.3): with D₍₁₎ ≤ … ≤ D₍ₙ₁ₙ₂₎ the sorted differences, the interval is
/// [D₍ₖ₎, D₍ₙ₁ₙ₂₋ₖ₊₁₎], because under the shift model the number of differences below
/// the true shift has the null distribution of the Mann-Whitney U.
///
/// k is the **largest** integer ≥ 1 with P(U ≤ k − 1) ≤ α/2 (α = 1 − `level`), from the
/// exact distribution of U whenever C(n₁ + n₂, n₁) ≤ 2⁵³ (as [`mann_whitney`]), so the
/// coverage is at least `level` (this is R's `wilcox.test(conf.int = TRUE)` up to the
/// boundary case P(U ≤ k − 1) = α/2 exactly). For larger samples k is the large-sample
/// approximation k = round(n₁n₂/2 − z₁₋α/₂·√(n₁n₂(n₁ + n₂ + 1)/12)) (Hollander & Wolfe,
/// ibid.), which ignores ties; on the reference vectors (up to 60 × 60) it lands within
/// two order statistics of the exact rank. With tied data the interval is conservative.
///
/// Time O(n₁n₂·log(n₁n₂)) and memory O(n₁n₂) for the differences.
pub fn hodges_lehmann(a: &Sample, b: &Sample, level: f64) -> Shift {
    let mut diffs: Vec<f64> = Vec::with_capacity(a.len() * b.len());
    for &y in b.values() {
        for &x in a.values() {
            diffs.push(y - x);
        }
    }
    // Only four order statistics are needed: select them in about two passes instead
    // of sorting all m = n₁·n₂ differences (a report over 1000-run cells has 10⁶).
    let (estimate, ci) =
        estimate_and_interval(&mut diffs, shift_ci_rank(a.len(), b.len(), level), level);
    Shift { estimate, ci }
}

/// A Hodges-Lehmann estimate and interval from the `m` pairwise averages or differences
/// `values` (reordered): the estimate is their median (the mean of the middle two when
/// m is even), the interval `[W₍ₖ₎, W₍ₘ₋ₖ₊₁₎]` of the sorted values for the 1-based
/// rank `k` when there is one (`None`: no interval). The order statistics come from
/// [`crate::order::order_statistics`], bit for bit those of a sort.
pub(crate) fn estimate_and_interval(
    values: &mut [f64],
    k: Option<usize>,
    level: f64,
) -> (f64, Option<Interval>) {
    let m = values.len();
    let middle: &[usize] = if m % 2 == 1 {
        &[m / 2]
    } else {
        &[m / 2 - 1, m / 2]
    };
    let mut ranks: Vec<usize> = middle.to_vec();
    if let Some(k) = k {
        ranks.extend([k - 1, m - k]);
    }
    ranks.sort_unstable();
    let at = crate::order::order_statistics(values, &ranks);
    let rank = |r: usize| at[ranks.partition_point(|&x| x < r)];
    let estimate = if m % 2 == 1 {
        rank(m / 2)
    } else {
        (rank(m / 2 - 1) + rank(m / 2)) / 2.0
    };
    let ci = k.map(|k| Interval {
        low: rank(k - 1),
        high: rank(m - k),
        level,
    });
    (estimate, ci)
}

/// The rank k (1-based) of [`hodges_lehmann`]'s interval, or `None` when no k ≥ 1 keeps
/// each tail at most α/2 or the level is not in (0, 1).
pub(crate) fn shift_ci_rank(n1: usize, n2: usize, level: f64) -> Option<usize> {
    if !(level > 0.0 && level < 1.0) {
        return None;
    }
    let half_alpha = (1.0 - level) / 2.0;
    let pairs = n1 * n2;
    if arrangements_within(n1, n2, MAX_EXACT_ARRANGEMENTS) {
        let counts = u_counts(n1, n2);
        let total: u128 = counts.iter().sum();
        largest_tail_rank(&counts, total as f64, half_alpha)
    } else {
        let nn = pairs as f64;
        let z = standard_normal_quantile(1.0 - half_alpha);
        let sd = (nn * (n1 + n2 + 1) as f64 / 12.0).sqrt();
        let k = (nn / 2.0 - z * sd).round();
        (k >= 1.0).then_some(k as usize)
    }
}

/// The largest k ≥ 1 with P(S ≤ k − 1) ≤ `half_alpha`, for a statistic S whose null
/// distribution has `counts[s]` arrangements with S = s out of `total`; `None` when
/// even P(S ≤ 0) exceeds it. The critical rank of the distribution-free intervals
/// (Hollander & Wolfe, §3.2 and §4.3).
pub(crate) fn largest_tail_rank(counts: &[u128], total: f64, half_alpha: f64) -> Option<usize> {
    let mut below: u128 = 0;
    let mut k = 0;
    for (j, &c) in counts.iter().enumerate() {
        below += c;
        if below as f64 / total <= half_alpha {
            k = j + 1;
        } else {
            break;
        }
    }
    (k >= 1).then_some(k)
}

/// The pooled sample's rank information.
struct Ranked {
    /// Sum of the mid-ranks of `a`'s values.
    rank_sum_a: f64,
    /// Σ(t³ − t) over groups of tied values.
    tie_term: f64,
    /// Whether any value occurs more than once.
    has_ties: bool,
}

impl Ranked {
    fn new(a: &[f64], b: &[f64]) -> Self {
        let mut pooled: Vec<(f64, bool)> = a
            .iter()
            .map(|&x| (x, true))
            .chain(b.iter().map(|&y| (y, false)))
            .collect();
        pooled.sort_by(|x, y| x.0.total_cmp(&y.0));
        let (mut rank_sum_a, mut tie_term, mut has_ties) = (0.0, 0.0, false);
        let mut start = 0;
        while start < pooled.len() {
            let mut end = start + 1;
            while end < pooled.len() && pooled[end].0 == pooled[start].0 {
                end += 1;
            }
            // Positions start..end (0-based) share the mid-rank (start + 1 + end) / 2.
            let t = (end - start) as f64;
            let mid_rank = (start + 1 + end) as f64 / 2.0;
            let in_a = pooled[start..end].iter().filter(|(_, is_a)| *is_a).count();
            rank_sum_a += mid_rank * in_a as f64;
            if end - start > 1 {
                has_ties = true;
                tie_term += t * t * t - t;
            }
            start = end;
        }
        Ranked {
            rank_sum_a,
            tie_term,
            has_ties,
        }
    }
}

/// Whether C(n₁ + n₂, n₁) ≤ `limit`.
fn arrangements_within(n1: usize, n2: usize, limit: u128) -> bool {
    let (small, large) = (n1.min(n2) as u128, n1.max(n2) as u128);
    // C(large + i, i) for i = 0..=small, each step exact: C(l+i+1, i+1) = C(l+i, i)·(l+i+1)/(i+1).
    let mut c: u128 = 1;
    for i in 0..small {
        c = c * (large + i + 1) / (i + 1);
        if c > limit {
            return false;
        }
    }
    true
}

/// The smallest two-sided p-value the exact Mann-Whitney test can give with samples of
/// `n1` and `n2` observations without ties: 2 / C(n₁ + n₂, n₁) (the two samples fully
/// apart, in either order), capped at 1. Below it no unpaired comparison is significant.
pub fn mann_whitney_min_p(n1: usize, n2: usize) -> f64 {
    let (small, large) = (n1.min(n2) as f64, n1.max(n2) as f64);
    let mut arrangements = 1.0;
    let mut i = 1.0;
    while i <= small {
        arrangements *= (large + i) / i;
        i += 1.0;
    }
    (2.0 / arrangements).min(1.0)
}

/// Number of arrangements with U = k, for k = 0..=n₁n₂: the coefficients of the Gaussian
/// binomial [n₁ + n₂ choose n₁]_q, built as ∏ᵢ (1 − q^(n₂+i))/(1 − q^i) over i = 1..=min.
/// Every intermediate product is itself a Gaussian binomial, so the division is exact.
/// Distributions of U by (smaller, larger) sample size.
type UCache = std::cell::RefCell<std::collections::HashMap<(usize, usize), std::rc::Rc<Vec<u128>>>>;

fn u_counts(n1: usize, n2: usize) -> std::rc::Rc<Vec<u128>> {
    // Reports compare thousands of points of the same sizes: compute each
    // distribution once per thread.
    thread_local! {
        static CACHE: UCache = UCache::default();
    }
    let key = (n1.min(n2), n1.max(n2));
    CACHE.with(|c| {
        if let Some(v) = c.borrow().get(&key) {
            return std::rc::Rc::clone(v);
        }
        let v = std::rc::Rc::new(compute_u_counts(key.0, key.1));
        c.borrow_mut().insert(key, std::rc::Rc::clone(&v));
        v
    })
}

fn compute_u_counts(n1: usize, n2: usize) -> Vec<u128> {
    let (small, large) = (n1.min(n2), n1.max(n2));
    let mut poly: Vec<i128> = vec![1];
    for i in 1..=small {
        let shift = large + i;
        let mut next = vec![0i128; poly.len() + shift];
        for (k, &c) in poly.iter().enumerate() {
            next[k] += c;
            next[k + shift] -= c;
        }
        // Divide by (1 − q^i): r[k] = next[k] + r[k − i].
        for k in i..next.len() {
            next[k] += next[k - i];
        }
        next.truncate(i * large + 1);
        poly = next;
    }
    poly.into_iter().map(|c| c.unsigned_abs()).collect()
}

/// P(U ≥ u) under the exact null distribution for sizes n₁, n₂ (no ties).
fn exact_sf(u: u64, n1: usize, n2: usize) -> f64 {
    let counts = u_counts(n1, n2);
    let total: u128 = counts.iter().sum();
    let start = usize::try_from(u).unwrap_or(usize::MAX).min(counts.len());
    let upper: u128 = counts[start..].iter().sum();
    upper as f64 / total as f64
}

/// 1 − Φ(z) for the standard normal, accurate in the upper tail (via erfc).
pub(crate) fn standard_normal_sf(z: f64) -> f64 {
    standard_normal().sf(z)
}

/// Φ⁻¹(p) for the standard normal.
pub(crate) fn standard_normal_quantile(p: f64) -> f64 {
    standard_normal().inverse_cdf(p)
}

fn standard_normal() -> Normal {
    // Mean 0 and standard deviation 1 are valid parameters.
    Normal::standard()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &[f64]) -> Sample {
        Sample::new(v.to_vec()).unwrap()
    }

    #[test]
    fn gaussian_binomial_counts() {
        assert_eq!(*u_counts(3, 3), vec![1, 1, 2, 3, 3, 3, 3, 2, 1, 1]);
        assert_eq!(u_counts(2, 4), u_counts(4, 2));
        let c = u_counts(20, 20);
        assert_eq!(c.len(), 401);
        assert_eq!(c.iter().sum::<u128>(), 137_846_528_820); // C(40, 20)
        assert_eq!(c[0], 1);
        assert_eq!(c[1], 1);
        assert_eq!(c[2], 2);
    }

    #[test]
    fn arrangement_limit() {
        // C(56, 28) ≈ 7.6e15 ≤ 2⁵³ ≈ 9.0e15 < C(58, 29) ≈ 3.0e16.
        assert!(arrangements_within(28, 28, MAX_EXACT_ARRANGEMENTS));
        assert!(!arrangements_within(29, 29, MAX_EXACT_ARRANGEMENTS));
        assert!(arrangements_within(1, 1_000_000, MAX_EXACT_ARRANGEMENTS));
    }

    #[test]
    fn the_smallest_p_is_that_of_two_samples_fully_apart() {
        for n in 3..=6 {
            let a: Vec<f64> = (0..n).map(f64::from).collect();
            let b: Vec<f64> = (0..n).map(|v| f64::from(v) + 100.0).collect();
            let r = mann_whitney(&Sample::new(a).unwrap(), &Sample::new(b).unwrap());
            assert!(r.exact);
            assert!((r.p - mann_whitney_min_p(n as usize, n as usize)).abs() < 1e-12);
        }
        assert!((mann_whitney_min_p(4, 4) - 2.0 / 70.0).abs() < 1e-12);
        assert!(mann_whitney_min_p(3, 3) > 0.05 && mann_whitney_min_p(4, 4) < 0.05);
        assert_eq!(mann_whitney_min_p(0, 5), 1.0);
    }

    #[test]
    fn exact_small_sample() {
        // scipy.stats.mannwhitneyu([1,2,3], [4,5,6], method='exact') → U=0, p=0.1.
        let r = mann_whitney(&s(&[1.0, 2.0, 3.0]), &s(&[4.0, 5.0, 6.0]));
        assert_eq!(r.u, 0.0);
        assert!(r.exact);
        assert!((r.p - 0.1).abs() < 1e-15, "{r:?}");
    }

    #[test]
    fn identical_samples_give_p_one() {
        let r = mann_whitney(&s(&[2.0, 2.0, 2.0]), &s(&[2.0, 2.0]));
        assert!(!r.exact);
        assert_eq!(r.p, 1.0);
        assert_eq!(r.u, 3.0);
    }

    #[test]
    fn hodges_lehmann_of_a_clean_shift() {
        let a = s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
        let b = s(&[11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0]);
        let h = hodges_lehmann(&a, &b, 0.95);
        assert_eq!(h.estimate, 10.0);
        let ci = h.ci.unwrap();
        assert!(ci.low < 10.0 && 10.0 < ci.high, "{ci:?}");
        // Too small for 95%: P(U ≤ 0) = 1/C(4, 2) = 1/6 > 0.025.
        assert_eq!(
            hodges_lehmann(&s(&[1.0, 2.0]), &s(&[3.0, 4.0]), 0.95).ci,
            None
        );
    }

    #[test]
    fn large_sample_rank_uses_normal_approximation() {
        // 30 × 30 (C(60, 30) > 2⁵³): k = round(450 − 1.959964·√(900·61/12)) = round(450 − 132.57) = 317.
        assert_eq!(shift_ci_rank(30, 30, 0.95), Some(317));
        assert_eq!(shift_ci_rank(30, 30, 1.5), None);
    }

    fn sample_strategy() -> impl Strategy<Value = Vec<f64>> {
        // Integers scaled by ¼ give exact arithmetic and plenty of ties.
        prop::collection::vec((-400i32..400).prop_map(|v| f64::from(v) / 4.0), 2..30)
    }

    proptest! {
        #[test]
        fn shifting_b_moves_the_estimate(a in sample_strategy(), b in sample_strategy(), x in -1e3f64..1e3) {
            let (sa, sb) = (s(&a), s(&b));
            let moved = s(&b.iter().map(|v| v + x).collect::<Vec<_>>());
            let (h0, h1) = (hodges_lehmann(&sa, &sb, 0.95), hodges_lehmann(&sa, &moved, 0.95));
            let tol = 1e-9 * (1.0 + x.abs() + h0.estimate.abs());
            prop_assert!((h1.estimate - h0.estimate - x).abs() <= tol, "{h0:?} {h1:?} {x}");
            if let (Some(c0), Some(c1)) = (h0.ci, h1.ci) {
                prop_assert!((c1.low - c0.low - x).abs() <= tol);
                prop_assert!((c1.high - c0.high - x).abs() <= tol);
            } else {
                prop_assert_eq!(h0.ci.is_none(), h1.ci.is_none());
            }
        }

        #[test]
        fn swapping_flips_the_shift_and_keeps_p(a in sample_strategy(), b in sample_strategy()) {
            let (sa, sb) = (s(&a), s(&b));
            let (h_ab, h_ba) = (hodges_lehmann(&sa, &sb, 0.9), hodges_lehmann(&sb, &sa, 0.9));
            prop_assert_eq!(h_ab.estimate, -h_ba.estimate);
            if let (Some(x), Some(y)) = (h_ab.ci, h_ba.ci) {
                prop_assert_eq!((x.low, x.high), (-y.high, -y.low));
            }
            let (m_ab, m_ba) = (mann_whitney(&sa, &sb), mann_whitney(&sb, &sa));
            prop_assert_eq!(m_ab.p, m_ba.p);
            prop_assert_eq!(m_ab.exact, m_ba.exact);
            prop_assert_eq!(m_ab.u + m_ba.u, (a.len() * b.len()) as f64);
        }

        #[test]
        fn p_is_a_probability(a in sample_strategy(), b in sample_strategy()) {
            let r = mann_whitney(&s(&a), &s(&b));
            prop_assert!((0.0..=1.0).contains(&r.p), "{r:?}");
        }
    }
}
