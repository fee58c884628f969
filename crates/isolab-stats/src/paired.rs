//! Paired comparisons: the Wilcoxon signed-rank test and the paired Hodges-Lehmann
//! shift, for runs of A and B that shared a round (and so the machine's state).

use crate::rank::{
    estimate_and_interval, largest_tail_rank, standard_normal_quantile, standard_normal_sf,
};
use crate::Shift;

/// Largest number of pairs for which the exact null distribution of the signed-rank
/// statistic is used: its 2ⁿ arrangements stay exact in an `f64` (SciPy's `auto`
/// method uses the exact distribution up to 50 pairs as well).
const MAX_EXACT_PAIRS: usize = 50;

/// Result of a two-sided Wilcoxon signed-rank test.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SignedRank {
    /// The statistic min(T⁺, T⁻): T⁺ is the sum of the (mid-)ranks of |dᵢ| over the
    /// positive differences, T⁻ over the negative ones.
    pub statistic: f64,
    /// Two-sided p-value.
    pub p: f64,
    /// Whether `p` comes from the exact null distribution (else the normal approximation).
    pub exact: bool,
    /// Number of non-zero differences that were ranked.
    pub n: usize,
}

/// Two-sided Wilcoxon signed-rank test of the paired differences `d` (dᵢ = bᵢ − aᵢ)
/// against a median of zero (F. Wilcoxon, "Individual comparisons by ranking
/// methods", Biometrics Bulletin 1, 1945). Zero differences are dropped before ranking
/// (Wilcoxon's own rule, SciPy's `zero_method='wilcox'`); |dᵢ| are ranked with
/// mid-ranks for ties.
///
/// - **exact** when no |dᵢ| is tied and n ≤ 50: p = 2·P(T ≤ min(T⁺, T⁻)) under the null
///   distribution of T⁺, whose counts are the number of subsets of {1, …, n} with each
///   sum (the coefficients of ∏ᵢ₌₁..ₙ (1 + qⁱ)), computed in exact integer arithmetic;
/// - otherwise the **normal approximation** with tie and continuity correction:
///   z = (|T⁺ − n(n + 1)/4| − ½)/σ, σ² = n(n + 1)(2n + 1)/24 − Σ(tₖ³ − tₖ)/48, and
///   p = 2·(1 − Φ(z)).
///
/// p is capped at 1, and is 1 when every difference is zero. Matches
/// `scipy.stats.wilcoxon(d, zero_method='wilcox', correction=True,
/// alternative='two-sided', method='exact' | 'approx')`.
pub fn signed_rank(d: &[f64]) -> SignedRank {
    let mut nonzero: Vec<f64> = d.iter().copied().filter(|v| *v != 0.0).collect();
    nonzero.sort_by(|x, y| x.abs().total_cmp(&y.abs()));
    let n = nonzero.len();
    if n == 0 {
        return SignedRank {
            statistic: 0.0,
            p: 1.0,
            exact: false,
            n: 0,
        };
    }
    let (mut t_plus, mut tie_term, mut ties) = (0.0, 0.0, false);
    let mut start = 0;
    while start < n {
        let mut end = start + 1;
        while end < n && nonzero[end].abs() == nonzero[start].abs() {
            end += 1;
        }
        let mid_rank = (start + 1 + end) as f64 / 2.0;
        let positive = nonzero[start..end].iter().filter(|v| **v > 0.0).count();
        t_plus += mid_rank * positive as f64;
        if end - start > 1 {
            ties = true;
            let t = (end - start) as f64;
            tie_term += t * t * t - t;
        }
        start = end;
    }
    let total = (n * (n + 1)) as f64 / 2.0;
    let statistic = t_plus.min(total - t_plus);
    let exact = !ties && n <= MAX_EXACT_PAIRS;
    let p = if exact {
        // Without ties T⁺ is an integer.
        2.0 * exact_cdf(statistic as usize, n)
    } else {
        let nf = n as f64;
        let var = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - tie_term / 48.0;
        if var <= 0.0 {
            1.0
        } else {
            let z = ((t_plus - total / 2.0).abs() - 0.5).max(0.0) / var.sqrt();
            2.0 * standard_normal_sf(z)
        }
    };
    SignedRank {
        statistic,
        p: p.clamp(0.0, 1.0),
        exact,
        n,
    }
}

/// Hodges-Lehmann estimate of the median of the paired differences `d`, with its
/// distribution-free confidence interval (J. W. Tukey's Walsh-average interval;
/// Hollander & Wolfe, *Nonparametric Statistical Methods*, 2nd ed., 1999, §3.2):
/// the estimate is the median of the M = n(n + 1)/2 Walsh averages (dᵢ + dⱼ)/2,
/// i ≤ j, and with W₍₁₎ ≤ … ≤ W₍M₎ sorted the interval is [W₍ₖ₎, W₍M₋ₖ₊₁₎].
///
/// k is the **largest** integer ≥ 1 with P(T⁺ ≤ k − 1) ≤ α/2 (α = 1 − `level`) from the
/// exact null distribution of the signed-rank statistic for n ≤ 50, else
/// k = round(M/2 − z₁₋α/₂·√(n(n + 1)(2n + 1)/24)). All n differences are used (zeros
/// included). `ci` is `None` when n is too small for the level.
pub fn paired_hodges_lehmann(d: &[f64], level: f64) -> Option<Shift> {
    let n = d.len();
    if n == 0 || d.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let mut walsh: Vec<f64> = Vec::with_capacity(n * (n + 1) / 2);
    for i in 0..n {
        for j in i..n {
            walsh.push((d[i] + d[j]) / 2.0);
        }
    }
    let (estimate, ci) = estimate_and_interval(&mut walsh, signed_rank_ci_rank(n, level), level);
    Some(Shift { estimate, ci })
}

/// The rank k (1-based) of [`paired_hodges_lehmann`]'s interval, or `None` when no
/// k ≥ 1 keeps each tail at most α/2 or the level is not in (0, 1).
pub(crate) fn signed_rank_ci_rank(n: usize, level: f64) -> Option<usize> {
    if !(level > 0.0 && level < 1.0) || n == 0 {
        return None;
    }
    let half_alpha = (1.0 - level) / 2.0;
    if n <= MAX_EXACT_PAIRS {
        largest_tail_rank(&t_counts(n), 2f64.powi(n as i32), half_alpha)
    } else {
        let nf = n as f64;
        let m = nf * (nf + 1.0) / 2.0;
        let sd = (nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0).sqrt();
        let k = (m / 2.0 - standard_normal_quantile(1.0 - half_alpha) * sd).round();
        (k >= 1.0).then_some(k as usize)
    }
}

/// The smallest two-sided p-value the exact signed-rank test can give with `n` pairs:
/// 2/2ⁿ (every difference of the same sign).
pub fn signed_rank_min_p(n: usize) -> f64 {
    if n == 0 {
        1.0
    } else {
        (2.0 / 2f64.powi(n.min(1023) as i32)).min(1.0)
    }
}

/// P(T⁺ ≤ t) under the exact null distribution with `n` pairs.
fn exact_cdf(t: usize, n: usize) -> f64 {
    let counts = t_counts(n);
    let upto: u128 = counts[..=t.min(counts.len() - 1)].iter().sum();
    upto as f64 / 2f64.powi(n as i32)
}

/// Distributions of T⁺ by number of pairs, computed once per thread.
type TCache = std::cell::RefCell<std::collections::HashMap<usize, std::rc::Rc<Vec<u128>>>>;

/// Number of subsets of {1, …, n} with sum k, for k = 0..=n(n + 1)/2: the
/// coefficients of ∏ᵢ (1 + qⁱ).
fn t_counts(n: usize) -> std::rc::Rc<Vec<u128>> {
    thread_local! {
        static CACHE: TCache = TCache::default();
    }
    CACHE.with(|c| {
        if let Some(v) = c.borrow().get(&n) {
            return std::rc::Rc::clone(v);
        }
        let mut poly: Vec<u128> = vec![1];
        for i in 1..=n {
            let mut next = vec![0u128; poly.len() + i];
            for (k, &v) in poly.iter().enumerate() {
                next[k] += v;
                next[k + i] += v;
            }
            poly = next;
        }
        let v = std::rc::Rc::new(poly);
        c.borrow_mut().insert(n, std::rc::Rc::clone(&v));
        v
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn subset_sum_counts() {
        assert_eq!(*t_counts(3), vec![1, 1, 1, 2, 1, 1, 1]);
        let c = t_counts(20);
        assert_eq!(c.iter().sum::<u128>(), 1 << 20);
        assert_eq!(c.len(), 211);
    }

    #[test]
    fn exact_small_sample() {
        // scipy.stats.wilcoxon([1, 2, 3, 4, 5, 6]) → statistic 0, p = 2/64 = 0.03125.
        let r = signed_rank(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert!(r.exact);
        assert_eq!(r.statistic, 0.0);
        assert!((r.p - 0.03125).abs() < 1e-15, "{r:?}");
        assert_eq!(r.p, signed_rank_min_p(6));
        // Five pairs can never reach 0.05.
        assert!(signed_rank_min_p(5) > 0.05);
    }

    #[test]
    fn zeros_are_dropped_and_all_zero_is_p_one() {
        assert_eq!(signed_rank(&[0.0, 0.0]).p, 1.0);
        let r = signed_rank(&[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(r.n, 6);
        assert!((r.p - 0.03125).abs() < 1e-15);
    }

    #[test]
    fn walsh_average_estimate() {
        let h = paired_hodges_lehmann(&[1.0, 2.0, 3.0], 0.5).unwrap();
        // Walsh averages 1, 1.5, 2, 2, 2.5, 3 → median 2.
        assert_eq!(h.estimate, 2.0);
        assert!(paired_hodges_lehmann(&[1.0, 2.0], 0.95)
            .unwrap()
            .ci
            .is_none());
        assert!(paired_hodges_lehmann(&[], 0.95).is_none());
    }

    proptest! {
        #[test]
        fn shifting_moves_the_estimate_and_flipping_keeps_p(
            d in prop::collection::vec((-400i32..400).prop_map(|v| f64::from(v) / 4.0), 1..40),
            x in -100f64..100.0,
        ) {
            let h0 = paired_hodges_lehmann(&d, 0.9).unwrap();
            let moved: Vec<f64> = d.iter().map(|v| v + x).collect();
            let h1 = paired_hodges_lehmann(&moved, 0.9).unwrap();
            let tol = 1e-9 * (1.0 + x.abs() + h0.estimate.abs());
            prop_assert!((h1.estimate - h0.estimate - x).abs() <= tol);
            let flipped: Vec<f64> = d.iter().map(|v| -v).collect();
            prop_assert_eq!(signed_rank(&d).p, signed_rank(&flipped).p);
            let p = signed_rank(&d).p;
            prop_assert!((0.0..=1.0).contains(&p));
        }
    }
}
