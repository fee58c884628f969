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
}
