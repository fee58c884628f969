//! The per-point verdict: better, worse, or not distinguishable from noise (`~`).

use std::fmt;

use crate::Interval;

/// A comparison verdict for one measurement point, B against A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Verdict {
    /// B is significantly and materially better. Serialized and displayed as `better`.
    #[serde(rename = "better")]
    Better,
    /// B is significantly and materially worse. Serialized and displayed as `worse`.
    #[serde(rename = "worse")]
    Worse,
    /// No difference that is both significant and beyond the noise threshold.
    /// Serialized and displayed as `~` (benchstat's notation).
    #[serde(rename = "~")]
    Same,
}

impl Verdict {
    /// The word shown in tables and exports: `better`, `worse` or `~`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::Same => "~",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Thresholds of the verdict rule (see [`verdict`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct VerdictRule {
    /// Significance level for the FDR-adjusted p-value; default 0.05.
    pub alpha: f64,
    /// Noise threshold on the relative change, as a fraction (0.02 = 2%); default 0.02.
    pub noise: f64,
}

impl Default for VerdictRule {
    /// α = 0.05 and a 2% noise threshold.
    fn default() -> Self {
        VerdictRule {
            alpha: 0.05,
            noise: 0.02,
        }
    }
}

/// Decides a point's verdict from its FDR-adjusted p-value and the confidence interval
/// of its relative change (oriented so that positive is worse, as a fraction: 0.03 is
/// 3% worse):
///
/// - [`Verdict::Worse`] when `adjusted_p < alpha` **and** `change_ci.low > noise`;
/// - [`Verdict::Better`] when `adjusted_p < alpha` **and** `change_ci.high < −noise`;
/// - [`Verdict::Same`] otherwise, including a NaN p-value or interval bound.
///
/// This is the rule of criterion.rs (a change is reported only when it is statistically
/// significant at `significance_level`, default 0.05, *and* its confidence interval lies
/// beyond `noise_threshold`, default 1%; `criterion::Criterion::noise_threshold`) and of
/// Firecracker's A/B testing tool (`tools/ab_test.py`: a significance test *and* a
/// minimum relative change), with isolab's default noise threshold of 2%.
pub fn verdict(rule: &VerdictRule, adjusted_p: f64, change_ci: Interval) -> Verdict {
    let significant = adjusted_p < rule.alpha;
    if significant && change_ci.low > rule.noise {
        Verdict::Worse
    } else if significant && change_ci.high < -rule.noise {
        Verdict::Better
    } else {
        Verdict::Same
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ci(low: f64, high: f64) -> Interval {
        Interval {
            low,
            high,
            level: 0.95,
        }
    }

    #[test]
    fn needs_significance_and_an_interval_beyond_noise() {
        let r = VerdictRule::default();
        assert_eq!(verdict(&r, 0.01, ci(0.03, 0.06)), Verdict::Worse);
        assert_eq!(verdict(&r, 0.01, ci(-0.06, -0.03)), Verdict::Better);
        // Significant but the interval reaches into the noise band.
        assert_eq!(verdict(&r, 0.01, ci(0.01, 0.06)), Verdict::Same);
        // Large change, not significant.
        assert_eq!(verdict(&r, 0.2, ci(0.10, 0.30)), Verdict::Same);
        assert_eq!(verdict(&r, f64::NAN, ci(0.10, 0.30)), Verdict::Same);
        assert_eq!(verdict(&r, 0.01, ci(f64::NAN, f64::NAN)), Verdict::Same);
        // Exactly at the threshold is not beyond it.
        assert_eq!(verdict(&r, 0.05, ci(0.10, 0.30)), Verdict::Same);
    }

    #[test]
    fn words() {
        assert_eq!(Verdict::Better.to_string(), "better");
        assert_eq!(Verdict::Worse.to_string(), "worse");
        assert_eq!(Verdict::Same.to_string(), "~");
        for v in [Verdict::Better, Verdict::Worse, Verdict::Same] {
            assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{v}\""));
        }
    }
}
