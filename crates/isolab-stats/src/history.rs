//! A new experiment's estimate of one point against the same point's estimates in K
//! earlier experiments of the same spec: the test behind `isolab gate`.
//!
//! # The rule
//!
//! Runs of one experiment share the machine's state of that day; experiments do not.
//! Their estimates (a cell's median) scatter more than the runs of one experiment
//! promise, which is why gates on a run-level test, or on a hand-set ±% band, flake.
//! So the unit here is the experiment: with `x₁ … x_K` the natural logarithms of the
//! history's estimates, `x̄` their mean and `s` their standard deviation (K − 1 degrees
//! of freedom), and `x` the candidate's, the change `d = x − x̄` (oriented so that
//! positive is worse) is, when nothing changed, a draw from the history's own
//! scatter: `d / (s·√(1 + 1/K))` follows Student's t with K − 1 degrees of freedom (the
//! prediction interval of a new observation). A candidate whose own runs scattered more
//! than a typical experiment's is less certain than that: its part of the variance is
//! the larger of s² and the squared standard error of its own median's logarithm
//! (from the median's distribution-free interval), `se = √(s²/K + max(s², s_c²))`.
//! From it:
//!
//! - **p**: the two-sided p of `d / se` (Student's t, K − 1 degrees of freedom);
//! - **band**: the history's noise band, `t₁₋α/₂,K−1 · s · √(1 + 1/K)` as a relative
//!   change: how far a new experiment strays from the history with probability 1 − α;
//! - **threshold** `Δₚ = max(floor, band)`: the floor is the spec's `noise`, the
//!   smallest change that matters to the user; a noisy point's threshold is its band;
//! - the change's (1 − 2α) prediction interval `d ± t₁₋α,K−1 · se`;
//! - the verdict, with q the p after Benjamini-Hochberg over the gate's points:
//!   **worse** when q < α and the change > Δₚ (better: < −Δₚ); **≈** when the change's
//!   (1 − 2α) prediction interval lies within ± the floor (a noisy history's band is no
//!   reason to call a change equivalent); **?** otherwise.
//!
//! At least [`MIN_HISTORY`] estimates are needed: with two, one degree of freedom
//! leaves a band too wide to decide anything.

use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::{Direction, Interval, Sample, Verdict, VerdictRule};

/// Fewest earlier experiments a point's history needs.
pub const MIN_HISTORY: usize = 3;

/// A candidate's estimate of one point against its history.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct HistoryTest {
    /// Experiments in the history (K).
    pub k: usize,
    /// The history's estimate: the geometric mean of its K estimates.
    pub reference: f64,
    /// The history's scatter between experiments: the standard deviation of the
    /// estimates' logarithms (≈ their coefficient of variation).
    pub spread: f64,
    /// The history's noise band, a relative change (see the module's rule).
    pub band: f64,
    /// The point's threshold Δₚ = max(floor, band).
    pub threshold: f64,
    /// The relative change of the candidate against the reference, positive = worse.
    pub change: f64,
    /// The change's (1 − 2α) prediction interval, positive = worse.
    pub interval: Interval,
    /// The two-sided p of the change.
    pub p: f64,
}

/// An experiment's estimate of one point: the median of its counted runs and the
/// standard error of the median's logarithm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianEstimate {
    /// The median.
    pub value: f64,
    /// The standard error of ln(median), from the median's distribution-free 95% interval:
    /// ln(high / low) / (2·1.96); 0 when the runs are too few for an interval.
    pub se: f64,
}

impl MedianEstimate {
    /// The estimate of `sample`.
    pub fn of(sample: &Sample) -> MedianEstimate {
        MedianEstimate::from_interval(sample.median(), crate::median_ci(sample, 0.95))
    }

    /// The estimate of a median `value` with its 95% interval `ci` (when it has one).
    pub fn from_interval(value: f64, ci: Option<Interval>) -> MedianEstimate {
        let se = ci
            .filter(|ci| ci.low > 0.0 && ci.high > 0.0)
            .map_or(0.0, |ci| {
                (ci.high / ci.low).ln() / (2.0 * crate::rank::standard_normal_quantile(0.975))
            });
        MedianEstimate { value, se }
    }
}

/// Tests `candidate` against the `history` estimates of one point; `None` when the
/// history has fewer than [`MIN_HISTORY`] estimates or a value is not positive (no
/// relative change is defined).
pub fn test_against_history(
    history: &[f64],
    candidate: MedianEstimate,
    direction: Direction,
    rule: &VerdictRule,
) -> Option<HistoryTest> {
    let k = history.len();
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if k < MIN_HISTORY || !positive(candidate.value) || !history.iter().all(|&v| positive(v)) {
        return None;
    }
    let logs: Vec<f64> = history.iter().map(|v| v.ln()).collect();
    let mean = logs.iter().sum::<f64>() / k as f64;
    let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (k as f64 - 1.0);
    let spread = var.sqrt();
    let sign = match direction {
        Direction::Lower => 1.0,
        Direction::Higher => -1.0,
    };
    let d = sign * (candidate.value.ln() - mean);
    // The history's band: how far a new experiment of the history's kind strays.
    let typical = spread * (1.0 + 1.0 / k as f64).sqrt();
    // The candidate's own estimate is at least as uncertain as a typical experiment's,
    // more when its runs scattered more than usual.
    let own = if candidate.se.is_finite() {
        candidate.se.max(spread)
    } else {
        spread
    };
    let se = (spread * spread / k as f64 + own * own).sqrt();
    let t = StudentsT::new(0.0, 1.0, k as f64 - 1.0).ok()?;
    let p = if se > 0.0 {
        (2.0 * (1.0 - t.cdf((d / se).abs()))).clamp(0.0, 1.0)
    } else if d == 0.0 {
        1.0
    } else {
        0.0
    };
    let band = (t.inverse_cdf(1.0 - rule.alpha / 2.0) * typical).exp_m1();
    let half = t.inverse_cdf(1.0 - rule.alpha) * se;
    Some(HistoryTest {
        k,
        reference: mean.exp(),
        spread,
        band,
        threshold: rule.noise.max(band),
        change: d.exp_m1(),
        interval: Interval {
            low: (d - half).exp_m1(),
            high: (d + half).exp_m1(),
            level: 1.0 - 2.0 * rule.alpha,
        },
        p,
    })
}

/// The verdict of `test` whose p became `q` after Benjamini-Hochberg.
pub fn history_verdict(rule: &VerdictRule, test: &HistoryTest, q: f64) -> Verdict {
    if q < rule.alpha && test.change > test.threshold {
        Verdict::Worse
    } else if q < rule.alpha && test.change < -test.threshold {
        Verdict::Better
    } else if test.interval.low > -rule.noise && test.interval.high < rule.noise {
        Verdict::Equivalent
    } else {
        Verdict::Inconclusive
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(noise: f64) -> VerdictRule {
        VerdictRule { alpha: 0.05, noise }
    }

    /// A candidate `value` whose runs were as steady as a typical experiment's.
    fn bare(value: f64) -> MedianEstimate {
        MedianEstimate { value, se: 0.0 }
    }

    /// The test of a steady candidate `value` against `history` at noise `noise`.
    fn tested(history: &[f64], value: f64, direction: Direction, noise: f64) -> HistoryTest {
        test_against_history(history, bare(value), direction, &rule(noise)).unwrap()
    }

    /// Ten experiments scattering by about 0.5% between them.
    const HISTORY: [f64; 10] = [
        1.000, 1.004, 0.996, 1.007, 0.994, 1.002, 0.998, 1.005, 0.995, 1.001,
    ];

    #[test]
    fn a_candidate_inside_the_history_is_equivalent_and_a_3_percent_slowdown_is_worse() {
        let same = tested(&HISTORY, 1.001, Direction::Lower, 0.02);
        assert_eq!(same.k, 10);
        assert!((same.spread - 0.0043).abs() < 0.0005, "{same:?}");
        assert!(same.band < 0.02 && same.threshold == 0.02, "{same:?}");
        assert!(same.p > 0.5);
        assert_eq!(
            history_verdict(&rule(0.02), &same, same.p),
            Verdict::Equivalent
        );

        // A wall time 3% longer.
        let slow = tested(&HISTORY, 1.031, Direction::Lower, 0.02);
        assert!((slow.change - 0.031).abs() < 0.002, "{slow:?}");
        assert!(slow.p < 0.001);
        assert_eq!(history_verdict(&rule(0.02), &slow, slow.p), Verdict::Worse);
        // The same 3% less throughput is worse too; 3% more is better.
        let fewer = tested(&HISTORY, 0.969, Direction::Higher, 0.02);
        assert_eq!(
            history_verdict(&rule(0.02), &fewer, fewer.p),
            Verdict::Worse
        );
        let more = tested(&HISTORY, 1.031, Direction::Higher, 0.02);
        assert_eq!(history_verdict(&rule(0.02), &more, more.p), Verdict::Better);
    }

    #[test]
    fn a_candidate_whose_own_runs_scattered_is_less_certain() {
        // 2.5% slower: worse when the candidate's runs were as steady as usual, `?` when
        // its own median is uncertain by 2% (one of a noisy phase of the machine).
        let steady = tested(&HISTORY, 1.025, Direction::Lower, 0.02);
        assert_eq!(
            history_verdict(&rule(0.02), &steady, steady.p),
            Verdict::Worse
        );
        let shaky = MedianEstimate {
            value: 1.025,
            se: 0.02,
        };
        let t = test_against_history(&HISTORY, shaky, Direction::Lower, &rule(0.02)).unwrap();
        assert!(t.p > 0.2, "{t:?}");
        assert_eq!(t.band, steady.band, "the band is the history's");
        assert_eq!(history_verdict(&rule(0.02), &t, t.p), Verdict::Inconclusive);
        // The estimate of a sample: its median and the spread of its median's interval.
        let sample = Sample::new((0..16).map(|i| 1.0 + 0.001 * f64::from(i)).collect()).unwrap();
        let e = MedianEstimate::of(&sample);
        assert!(
            (e.value - 1.0075).abs() < 1e-9 && e.se > 0.0 && e.se < 0.005,
            "{e:?}"
        );
    }

    #[test]
    fn a_noisy_history_widens_the_threshold_to_its_band() {
        let noisy = [1.0, 1.06, 0.95, 1.04, 0.97, 1.02];
        let t = tested(&noisy, 1.05, Direction::Lower, 0.02);
        assert!(t.band > 0.1 && t.threshold == t.band, "{t:?}");
        // A 5% change inside that scatter decides nothing; nor does no change.
        assert_eq!(history_verdict(&rule(0.02), &t, t.p), Verdict::Inconclusive);
        let none = tested(&noisy, 1.0, Direction::Lower, 0.02);
        assert_eq!(
            history_verdict(&rule(0.02), &none, none.p),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn a_change_below_the_floor_is_not_worse_however_significant() {
        let t = tested(&HISTORY, 1.015, Direction::Lower, 0.02);
        assert!(t.p < 0.05);
        assert_ne!(history_verdict(&rule(0.02), &t, t.p), Verdict::Worse);
        // A user who asks for 0.5% gets the history's band (1.05%) as the threshold.
        let fine = tested(&HISTORY, 1.015, Direction::Lower, 0.005);
        assert!((fine.threshold - fine.band).abs() < 1e-12);
        assert_eq!(
            history_verdict(&rule(0.005), &fine, fine.p),
            Verdict::Worse,
            "{fine:?}"
        );
    }

    #[test]
    fn too_short_or_non_positive_histories_are_not_tested() {
        let r = rule(0.02);
        assert!(test_against_history(&[1.0, 1.01], bare(1.0), Direction::Lower, &r).is_none());
        assert!(test_against_history(&[1.0, 0.0, 1.0], bare(1.0), Direction::Lower, &r).is_none());
        assert!(test_against_history(&[1.0, 1.0, 1.0], bare(0.0), Direction::Lower, &r).is_none());
        // A history without scatter: any change is significant, none is within Δ's
        // reach unless it exceeds it.
        let flat = test_against_history(&[1.0, 1.0, 1.0], bare(1.0), Direction::Lower, &r).unwrap();
        assert_eq!(history_verdict(&r, &flat, flat.p), Verdict::Equivalent);
    }

    /// On A/A histories the gate's false verdicts stay below α/2 per point: 4,000
    /// simulated gates of log-normal noise between experiments.
    #[test]
    fn a_a_false_verdicts_stay_below_half_alpha() {
        let r = rule(0.0);
        let mut state: u64 = 0x15_01ab;
        let mut normal = move || {
            // Box-Muller on a 64-bit LCG (Knuth's MMIX constants).
            let mut uniform = || {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
            };
            let (u, v) = (uniform(), uniform());
            (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
        };
        let gates = 4000;
        let mut worse = 0;
        for _ in 0..gates {
            let history: Vec<f64> = (0..10).map(|_| (0.01 * normal()).exp()).collect();
            let candidate = (0.01 * normal()).exp();
            let t = test_against_history(&history, bare(candidate), Direction::Lower, &r).unwrap();
            if history_verdict(&r, &t, t.p) == Verdict::Worse {
                worse += 1;
            }
        }
        let rate = worse as f64 / gates as f64;
        assert!(rate < 0.035, "{rate}");
    }
}
