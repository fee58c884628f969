//! False-discovery-rate control across the points of one comparison.

/// Benjamini-Hochberg adjusted p-values (q-values), in the order of the input
/// (Y. Benjamini & Y. Hochberg, "Controlling the false discovery rate", J. R. Stat. Soc.
/// B 57, 1995): with p₍₁₎ ≤ … ≤ p₍ₘ₎ sorted, q₍ᵢ₎ = min over j ≥ i of min(1, p₍ⱼ₎·m/j).
/// Declaring every point with q < α significant keeps the expected share of false
/// discoveries at most α (for independent or positively dependent tests).
///
/// The output is monotone in the order of the sorted input, never below the input
/// p-value, and capped at 1. Matches `scipy.stats.false_discovery_control(p,
/// method='bh')` bit for bit on valid input. Where SciPy refuses, this function
/// degrades instead of failing: a NaN stays NaN in its place and is not counted in m
/// (a point without a p-value is not a test), and other values are first clamped to
/// [0, 1].
pub fn benjamini_hochberg(p: &[f64]) -> Vec<f64> {
    let mut out = vec![f64::NAN; p.len()];
    let mut order: Vec<usize> = (0..p.len()).filter(|&i| !p[i].is_nan()).collect();
    let clamped = |i: usize| p[i].clamp(0.0, 1.0);
    order.sort_by(|&i, &j| clamped(i).total_cmp(&clamped(j)));
    let m = order.len() as f64;
    let mut running = 1.0_f64;
    for (rank0, &i) in order.iter().enumerate().rev() {
        let rank = (rank0 + 1) as f64;
        running = running.min(clamped(i) * (m / rank));
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn matches_scipy_example() {
        // scipy.stats.false_discovery_control([0.01, 0.04, 0.03, 0.2]) =
        // [0.04, 0.05333333, 0.05333333, 0.2]
        let q = benjamini_hochberg(&[0.01, 0.04, 0.03, 0.2]);
        let want = [0.04, 0.16 / 3.0, 0.16 / 3.0, 0.2];
        for (got, want) in q.iter().zip(want) {
            assert!((got - want).abs() < 1e-15, "{q:?}");
        }
    }

    #[test]
    fn nan_stays_in_place_and_is_not_counted() {
        let q = benjamini_hochberg(&[0.02, f64::NAN, 0.04]);
        assert_eq!(q[0], 0.04);
        assert!(q[1].is_nan());
        assert_eq!(q[2], 0.04);
        assert!(benjamini_hochberg(&[]).is_empty());
    }

    #[test]
    fn out_of_range_values_are_clamped() {
        assert_eq!(benjamini_hochberg(&[-0.5, 3.0]), vec![0.0, 1.0]);
    }

    proptest! {
        #[test]
        fn monotone_at_least_p_and_at_most_one(p in prop::collection::vec(0.0f64..=1.0, 0..60)) {
            let q = benjamini_hochberg(&p);
            let mut order: Vec<usize> = (0..p.len()).collect();
            order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
            for w in order.windows(2) {
                prop_assert!(q[w[0]] <= q[w[1]], "not monotone: {p:?} -> {q:?}");
            }
            for (pi, qi) in p.iter().zip(&q) {
                prop_assert!(qi >= pi && *qi <= 1.0, "{pi} -> {qi}");
            }
        }
    }
}
