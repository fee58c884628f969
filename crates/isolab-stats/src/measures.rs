//! Derived measures of `DESIGN.md`, oriented so that a positive number means worse.
//!
//! `a` is the baseline (or configuration A) mean and `b` the subject (or
//! configuration B) mean, both of the same metric.

use crate::Direction;

/// Overhead ratio (seed 002): `b / a` for lower-is-better, `a / b` for
/// higher-is-better; 1.0 means no overhead, above 1.0 means the subject is worse.
/// `None` when the divisor is zero.
pub fn overhead_ratio(a: f64, b: f64, direction: Direction) -> Option<f64> {
    let (num, den) = match direction {
        Direction::Lower => (b, a),
        Direction::Higher => (a, b),
    };
    (den != 0.0).then(|| num / den)
}

/// Degradation in percent (seed 001): `100·(b − a)/a` for lower-is-better,
/// `100·(a − b)/a` for higher-is-better. `None` when `a` is zero.
pub fn degradation_pct(a: f64, b: f64, direction: Direction) -> Option<f64> {
    if a == 0.0 {
        return None;
    }
    let worse_by = match direction {
        Direction::Lower => b - a,
        Direction::Higher => a - b,
    };
    Some(100.0 * worse_by / a)
}

/// Regression in percent (seed 000): `100·(b − a)/min(a, b)`, sign flipped for
/// higher-is-better. `None` when `min(a, b)` is zero.
pub fn regression_pct(a: f64, b: f64, direction: Direction) -> Option<f64> {
    let min = a.min(b);
    if min == 0.0 {
        return None;
    }
    let r = 100.0 * (b - a) / min;
    Some(match direction {
        Direction::Lower => r,
        Direction::Higher => -r,
    })
}

/// Geometric mean of positive values, as benchstat's `geomean` row summarises the
/// overhead ratios of many points: `G = exp((1/n)·Σ ln xᵢ) = (∏ xᵢ)^(1/n)` (computed
/// in logarithms, so a product of many ratios neither overflows nor underflows).
/// Proportional changes compose: doubling one of n ratios multiplies `G` by 2^(1/n),
/// and the geometric mean of reciprocals is the reciprocal of `G`, so B against A and
/// A against B agree, which the arithmetic mean of ratios does not.
///
/// `None` when `values` is empty or any value is not finite or not positive (a
/// logarithm must exist for every value; dropping such values silently would bias
/// the summary).
pub fn geometric_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|v| !v.is_finite() || *v <= 0.0) {
        return None;
    }
    let mean_log = values.iter().map(|v| v.ln()).sum::<f64>() / values.len() as f64;
    Some(mean_log.exp())
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::{Higher, Lower};

    #[test]
    fn positive_means_worse_in_both_directions() {
        // Time went from 10 s to 12 s: worse.
        assert_eq!(overhead_ratio(10.0, 12.0, Lower), Some(1.2));
        assert_eq!(degradation_pct(10.0, 12.0, Lower), Some(20.0));
        assert_eq!(regression_pct(10.0, 12.0, Lower), Some(20.0));
        // Throughput went from 100 to 80 ops/s: worse.
        assert_eq!(overhead_ratio(100.0, 80.0, Higher), Some(1.25));
        assert_eq!(degradation_pct(100.0, 80.0, Higher), Some(20.0));
        assert_eq!(regression_pct(100.0, 80.0, Higher), Some(25.0));
    }

    #[test]
    fn regression_is_symmetric_under_swap() {
        let r1 = regression_pct(10.0, 15.0, Lower).unwrap();
        let r2 = regression_pct(15.0, 10.0, Lower).unwrap();
        assert_eq!(r1, -r2);
    }

    #[test]
    fn zero_divisors_give_none() {
        assert_eq!(overhead_ratio(0.0, 1.0, Lower), None);
        assert_eq!(degradation_pct(0.0, 1.0, Higher), None);
        assert_eq!(regression_pct(0.0, 1.0, Lower), None);
    }

    #[test]
    fn geometric_mean_of_ratios() {
        let close = |a: f64, b: f64| (a - b).abs() < 1e-12;
        // (2 · 8)^(1/2) = 4.
        assert!(close(geometric_mean(&[2.0, 8.0]).unwrap(), 4.0));
        // A 10% overhead and a 10% gain do not cancel: √(1.1 · 0.9) < 1.
        assert!(close(
            geometric_mean(&[1.1, 0.9]).unwrap(),
            (1.1f64 * 0.9).sqrt()
        ));
        // Reciprocals give the reciprocal.
        let (r, inv) = ([1.2, 0.7, 3.0], [1.0 / 1.2, 1.0 / 0.7, 1.0 / 3.0]);
        assert!(close(
            geometric_mean(&r).unwrap() * geometric_mean(&inv).unwrap(),
            1.0
        ));
        assert!(close(geometric_mean(&[5.0]).unwrap(), 5.0));
    }

    #[test]
    fn geometric_mean_refuses_what_has_no_logarithm() {
        assert_eq!(geometric_mean(&[]), None);
        assert_eq!(geometric_mean(&[1.0, 0.0]), None);
        assert_eq!(geometric_mean(&[1.0, -2.0]), None);
        assert_eq!(geometric_mean(&[1.0, f64::NAN]), None);
        assert_eq!(geometric_mean(&[1.0, f64::INFINITY]), None);
    }
}
