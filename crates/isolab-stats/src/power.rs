//! How many runs a measurement point needs to detect a given relative effect.

use crate::rank::standard_normal_quantile;

/// Runs per group needed to detect a relative effect `effect` (e.g. 0.03 for 3%) with
/// probability `power` in a two-sided test at level `alpha`, for a metric whose
/// coefficient of variation is `cv`:
///
/// n = ⌈2·(z₁₋α/₂ + z_power)²·(cv/effect)²⌉, at least 2,
///
/// the normal approximation of the two-sample t-test with equal variances, σ = cv·μ and
/// δ = effect·μ (S.-C. Chow, J. Shao & H. Wang, *Sample Size Calculations in Clinical
/// Research*, 2nd ed., 2008, §3.2.1). The signs of `cv` and `effect` are ignored.
///
/// Returns `u32::MAX` ("no affordable number of runs is known to suffice") when `alpha`
/// or `power` is not in (0, 1), when `effect` is 0, or when any input is not finite;
/// very large results saturate at `u32::MAX` too.
pub fn runs_for_power(cv: f64, effect: f64, alpha: f64, power: f64) -> u32 {
    let valid = cv.is_finite()
        && effect.is_finite()
        && effect != 0.0
        && alpha > 0.0
        && alpha < 1.0
        && power > 0.0
        && power < 1.0;
    if !valid {
        return u32::MAX;
    }
    let z = standard_normal_quantile(1.0 - alpha / 2.0) + standard_normal_quantile(power);
    let n = (2.0 * z * z * (cv / effect).powi(2)).ceil();
    if n.is_nan() || n >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        // n is a non-negative integer below u32::MAX here.
        (n as u32).max(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn textbook_values() {
        // (1.959964 + 1.281552)² · 2 · (0.05/0.03)² = 58.38 → 59 runs.
        assert_eq!(runs_for_power(0.05, 0.03, 0.05, 0.9), 59);
        // Quiet metric: the floor of 2 applies.
        assert_eq!(runs_for_power(0.001, 0.03, 0.05, 0.9), 2);
        assert_eq!(runs_for_power(0.0, 0.03, 0.05, 0.9), 2);
        // Signs are ignored.
        assert_eq!(runs_for_power(-0.05, -0.03, 0.05, 0.9), 59);
    }

    #[test]
    fn impossible_requests_saturate() {
        assert_eq!(runs_for_power(0.05, 0.0, 0.05, 0.9), u32::MAX);
        assert_eq!(runs_for_power(0.05, 0.03, 0.0, 0.9), u32::MAX);
        assert_eq!(runs_for_power(0.05, 0.03, 0.05, 1.0), u32::MAX);
        assert_eq!(runs_for_power(f64::NAN, 0.03, 0.05, 0.9), u32::MAX);
        assert_eq!(runs_for_power(1e6, 1e-9, 0.05, 0.9), u32::MAX);
    }
}
