//! Welch's unequal-variances t-test.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::Sample;

/// Result of a two-sided Welch t-test of the means of two samples.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct WelchTest {
    /// t statistic, (x̄ₐ − x̄ᵦ) / √(sₐ²/nₐ + sᵦ²/nᵦ).
    pub t: f64,
    /// Welch–Satterthwaite degrees of freedom.
    pub df: f64,
    /// Two-sided p-value, 2·(1 − F_t(|t|; df)).
    pub p: f64,
}

/// Welch's t-test (B. L. Welch, "The generalization of Student's problem when
/// several different population variances are involved", Biometrika 34, 1947):
/// t = (x̄ₐ − x̄ᵦ)/√(vₐ + vᵦ) with v = s²/n, and
/// df = (vₐ + vᵦ)² / (vₐ²/(nₐ − 1) + vᵦ²/(nᵦ − 1)). Matches
/// `scipy.stats.ttest_ind(a, b, equal_var=False)`.
///
/// When both samples have zero variance the test is undefined: equal means give
/// p = 1, different means p = 0.
pub fn welch_t_test(a: &Sample, b: &Sample) -> WelchTest {
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (a.stdev().powi(2) / na, b.stdev().powi(2) / nb);
    let diff = a.mean() - b.mean();
    if va + vb == 0.0 {
        let p = if diff == 0.0 { 1.0 } else { 0.0 };
        return WelchTest {
            t: if diff == 0.0 {
                0.0
            } else {
                diff.signum() * f64::INFINITY
            },
            df: na + nb - 2.0,
            p,
        };
    }
    let t = diff / (va + vb).sqrt();
    let df = (va + vb).powi(2) / (va.powi(2) / (na - 1.0) + vb.powi(2) / (nb - 1.0));
    let p = match StudentsT::new(0.0, 1.0, df) {
        Ok(dist) => (2.0 * (1.0 - dist.cdf(t.abs()))).clamp(0.0, 1.0),
        Err(_) => f64::NAN,
    };
    WelchTest { t, df, p }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Sample {
        Sample::new(v.to_vec()).unwrap()
    }

    #[test]
    fn matches_scipy() {
        // scipy.stats.ttest_ind(a, b, equal_var=False), SciPy 1.x.
        let r = welch_t_test(
            &s(&[10.0, 12.0, 11.0, 13.0, 14.0]),
            &s(&[15.0, 14.0, 16.0, 18.0, 17.5]),
        );
        assert!((r.t - -3.9822720356647845).abs() < 1e-12, "{r:?}");
        assert!((r.df - 7.974449964513839).abs() < 1e-9, "{r:?}");
        assert!((r.p - 0.0040750779493652425).abs() < 1e-9, "{r:?}");
        let r = welch_t_test(&s(&[794.9, 800.0, 790.0]), &s(&[795.0, 801.0, 789.5]));
        assert!((r.t - -0.045451936947141815).abs() < 1e-12, "{r:?}");
        assert!((r.p - 0.9659657738144818).abs() < 1e-9, "{r:?}");
    }

    #[test]
    fn swapping_flips_t_and_keeps_p() {
        let (a, b) = (s(&[1.0, 2.0, 3.0]), s(&[2.0, 3.0, 5.0]));
        let (x, y) = (welch_t_test(&a, &b), welch_t_test(&b, &a));
        assert_eq!(x.t, -y.t);
        assert_eq!(x.p, y.p);
    }

    #[test]
    fn constant_samples_are_handled() {
        assert_eq!(welch_t_test(&s(&[1.0, 1.0]), &s(&[1.0, 1.0])).p, 1.0);
        assert_eq!(welch_t_test(&s(&[1.0, 1.0]), &s(&[2.0, 2.0])).p, 0.0);
    }
}
