//! How many runs a measurement point needs: for a plain test against zero
//! ([`runs_for_power`]) and under isolab's verdict rule ([`runs_for_verdict`], checked by
//! the seeded simulation [`simulate_verdicts`]).

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::rank::standard_normal_quantile;
use crate::verdict::{interim_verdict, test_point, verdict, PointData, Verdict, VerdictRule};
use crate::Direction;

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

/// Approximate probability that isolab's rule calls a true relative effect `effect`
/// (worse, oriented positive) with `n` runs per side, for a metric of coefficient of
/// variation `cv`: the Hodges-Lehmann estimate ĉ is taken as normal around the effect
/// with standard error s = cv·√(2/n)·√(π/3) (the same for paired runs without round
/// effects): the difference of means' standard error inflated by the asymptotic
/// relative efficiency 3/π of the Wilcoxon tests and the Hodges-Lehmann estimate
/// against the t-test and the mean under normality (J. L. Hodges & E. L. Lehmann,
/// Ann. Math. Statist. 27, 1956, and 34, 1963). The rule needs q < α and ĉ > Δ, so
///
/// power ≈ Φ((effect − max(Δ, z₁₋α/₂·s))/s).
///
/// For one point (q = p). [`simulate_verdicts`] checks it with the exact tests.
pub fn verdict_power(cv: f64, effect: f64, n: u32, rule: &VerdictRule) -> f64 {
    if n < 2 || !(cv.is_finite() && effect.is_finite()) || cv <= 0.0 {
        return f64::NAN;
    }
    let s = cv.abs() * (2.0 / f64::from(n)).sqrt() * (std::f64::consts::PI / 3.0).sqrt();
    let z = standard_normal_quantile(1.0 - rule.alpha / 2.0);
    let bar = rule.noise.max(z * s);
    standard_normal_cdf((effect.abs() - bar) / s)
}

/// The fewest runs per side at which [`verdict_power`] reaches `power`, and never
/// fewer than the runs at which the exact tests can be significant at all
/// ([`crate::MIN_PAIRS`]). `u32::MAX` when the effect is not beyond the noise
/// threshold (the rule can never call it) or no n up to 10⁶ suffices.
pub fn runs_for_verdict(cv: f64, effect: f64, rule: &VerdictRule, power: f64) -> u32 {
    if effect.abs() <= rule.noise || !(power > 0.0 && power < 1.0) || !cv.is_finite() {
        return u32::MAX;
    }
    if cv == 0.0 {
        return crate::MIN_PAIRS as u32;
    }
    // Power grows with n: bisect on [MIN_PAIRS, 10⁶].
    let (mut lo, mut hi) = (crate::MIN_PAIRS as u32, 1_000_000u32);
    if verdict_power(cv, effect, hi, rule) < power {
        return u32::MAX;
    }
    if verdict_power(cv, effect, lo, rule) >= power {
        return lo;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if verdict_power(cv, effect, mid, rule) >= power {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// The fewest runs per side at which an unchanged point is called `≈` at the noise
/// threshold Δ = `rule.noise` with probability about `power`, for a metric of coefficient
/// of variation `cv`: the change's (1 − 2α) interval ĉ ± z₁₋α·s must lie inside ±Δ, with
/// ĉ normal around 0 and s = cv·√(2/n)·√(π/3) as in [`verdict_power`], which holds with
/// probability ≈ `power` when (z₁₋α + z₍₁₊power₎/₂)·s ≤ Δ:
///
/// n = ⌈2·(π/3)·((z₁₋α + z₍₁₊power₎/₂)·cv/Δ)²⌉, at least [`crate::MIN_PAIRS`].
///
/// What `calibrate` tells a user who asks for `[experiment] noise = Δ`: how many runs a
/// cell takes before the runner can stop it as decided when nothing changed.
/// `u32::MAX` for invalid inputs.
pub fn runs_for_equivalence(cv: f64, rule: &VerdictRule, power: f64) -> u32 {
    let valid = cv.is_finite()
        && rule.noise > 0.0
        && rule.alpha > 0.0
        && rule.alpha < 0.5
        && power > 0.0
        && power < 1.0;
    if !valid {
        return u32::MAX;
    }
    let z =
        standard_normal_quantile(1.0 - rule.alpha) + standard_normal_quantile((1.0 + power) / 2.0);
    let n = (2.0 * (std::f64::consts::PI / 3.0) * (z * cv.abs() / rule.noise).powi(2)).ceil();
    if n.is_nan() || n >= f64::from(u32::MAX) {
        u32::MAX
    } else {
        (n as u32).max(crate::MIN_PAIRS as u32)
    }
}

/// The shape of the noise in a simulated experiment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Noise {
    /// x = μ·(1 + cv·Z), Z standard normal.
    Normal,
    /// x = μ·exp(σZ − σ²/2) with σ² = ln(1 + cv²): mean μ and CV cv, skewed to the right
    /// (as run times are).
    LogNormal,
}

/// One simulated design: a point of A (mean 100, lower is better) against B, whose
/// mean is `100·(1 + effect)`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Design {
    /// Coefficient of variation of each run.
    pub cv: f64,
    /// True relative effect of B (0 for A/A).
    pub effect: f64,
    /// Runs per side (fixed-N), or the most runs per side when `sequential`.
    pub n: u32,
    /// Whether runs of A and B are paired by round.
    pub paired: bool,
    /// The shape of the noise.
    pub noise: Noise,
    /// Standard deviation of a per-round factor shared by A and B of the round (drift
    /// of the machine), as a fraction; 0 for none.
    pub drift: f64,
    /// Stop early like the runner: from this many runs on, after every round, stop
    /// when [`interim_verdict`] decides; `None` for fixed-N.
    pub sequential_from: Option<u32>,
}

/// The share of simulated experiments with each verdict.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Rates {
    /// Experiments simulated.
    pub experiments: usize,
    /// Share called worse.
    pub worse: f64,
    /// Share called better.
    pub better: f64,
    /// Share called equivalent.
    pub equivalent: f64,
    /// Share left inconclusive.
    pub inconclusive: f64,
    /// Mean runs per side taken.
    pub mean_runs: f64,
}

/// Simulates `experiments` experiments of `design` with a seeded generator
/// (Xoshiro256++ from `seed`, normal deviates by the Box-Muller transform) and
/// decides each with [`test_point`] and [`verdict`] at the 95% level, as a report
/// does for a comparison of one point. Deterministic for a given seed.
pub fn simulate_verdicts(
    design: &Design,
    rule: &VerdictRule,
    experiments: usize,
    seed: u64,
) -> Rates {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut normal = move || {
        // Box-Muller: two uniforms in (0, 1] give a standard normal deviate.
        let u1: f64 = 1.0 - rng.gen::<f64>();
        let u2: f64 = rng.gen::<f64>();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    };
    let draw = |mean: f64, z: f64| match design.noise {
        Noise::Normal => mean * (1.0 + design.cv * z),
        Noise::LogNormal => {
            let var = (1.0 + design.cv * design.cv).ln();
            mean * (var.sqrt() * z - var / 2.0).exp()
        }
    };
    let mut counts = [0usize; 4];
    let mut runs_total = 0u64;
    for _ in 0..experiments {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut decided = None;
        for round in 1..=design.n {
            let shared = 1.0 + design.drift * normal();
            a.push(draw(100.0 * shared, normal()));
            b.push(draw(100.0 * (1.0 + design.effect) * shared, normal()));
            let last = round == design.n;
            let look = design.sequential_from.is_some_and(|from| round >= from);
            if !(last || look) {
                continue;
            }
            let pairs: Vec<(f64, f64)> = if design.paired {
                a.iter().copied().zip(b.iter().copied()).collect()
            } else {
                Vec::new()
            };
            let data = PointData {
                a: &a,
                b: &b,
                pairs: &pairs,
                direction: Direction::Lower,
            };
            let Some(t) = test_point(data, 0.95, rule) else {
                continue;
            };
            if last {
                decided = Some(verdict(rule, t.p, t.change, t.equivalence_ci));
            } else if let Some(v) = interim_verdict(rule, &t, 1) {
                decided = Some(v);
            }
            if decided.is_some() {
                runs_total += u64::from(round);
                break;
            }
        }
        let i = match decided.unwrap_or(Verdict::Inconclusive) {
            Verdict::Worse => 0,
            Verdict::Better => 1,
            Verdict::Equivalent => 2,
            Verdict::Inconclusive => 3,
        };
        counts[i] += 1;
    }
    let share = |c: usize| c as f64 / experiments.max(1) as f64;
    Rates {
        experiments,
        worse: share(counts[0]),
        better: share(counts[1]),
        equivalent: share(counts[2]),
        inconclusive: share(counts[3]),
        mean_runs: runs_total as f64 / experiments.max(1) as f64,
    }
}

/// Φ(z) for the standard normal.
fn standard_normal_cdf(z: f64) -> f64 {
    1.0 - crate::rank::standard_normal_sf(z)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn design(cv: f64, effect: f64, n: u32) -> Design {
        Design {
            cv,
            effect,
            n,
            paired: true,
            noise: Noise::Normal,
            drift: 0.0,
            sequential_from: None,
        }
    }

    #[test]
    fn runs_for_the_rule_at_host_noise() {
        let rule = VerdictRule::default();
        // A 3% effect at 2.5% CV: the estimate must clear 2% with 90% probability,
        // s = 1%/1.2816 = 0.780% → n = 2·(2.5·√(π/3)/0.780)² = 21.5 → 22.
        assert_eq!(runs_for_verdict(0.025, 0.03, &rule, 0.9), 22);
        assert!(verdict_power(0.025, 0.03, 22, &rule) >= 0.9);
        assert!(verdict_power(0.025, 0.03, 21, &rule) < 0.9);
        // An effect inside the noise threshold is never called.
        assert_eq!(runs_for_verdict(0.025, 0.02, &rule, 0.9), u32::MAX);
        // A quiet metric needs only the runs the exact test needs.
        assert_eq!(runs_for_verdict(0.001, 0.5, &rule, 0.9), 6);
    }

    #[test]
    fn simulation_is_reproducible() {
        let rule = VerdictRule::default();
        let d = design(0.025, 0.03, 12);
        assert_eq!(
            simulate_verdicts(&d, &rule, 200, 7),
            simulate_verdicts(&d, &rule, 200, 7)
        );
    }

    /// The acceptance of the rule: thousands of simulated experiments with fixed seeds,
    /// normal and skewed noise, paired and unpaired, fixed-N and sequential.
    #[test]
    fn false_verdicts_stay_below_alpha_and_three_percent_is_called() {
        let rule = VerdictRule::default();
        for noise in [Noise::Normal, Noise::LogNormal] {
            for paired in [true, false] {
                for cv in [0.01, 0.025, 0.05, 0.15] {
                    let mut aa = design(cv, 0.0, 20);
                    aa.noise = noise;
                    aa.paired = paired;
                    let r = simulate_verdicts(&aa, &rule, 2000, 11);
                    // α = 5%, plus three binomial standard errors of 2000 experiments.
                    assert!(
                        r.worse + r.better <= 0.05 + 3.0 * (0.05 * 0.95 / 2000f64).sqrt(),
                        "A/A {noise:?} paired={paired} cv={cv}: {r:?}"
                    );
                }
                // A 3% effect at 2.5% CV at the runs calibrate recommends.
                let n = runs_for_verdict(0.025, 0.03, &rule, 0.9);
                let mut ab = design(0.025, 0.03, n);
                ab.noise = noise;
                ab.paired = paired;
                let r = simulate_verdicts(&ab, &rule, 2000, 12);
                assert!(
                    r.worse >= 0.9 - 3.0 * (0.09 / 2000f64).sqrt(),
                    "3% {noise:?} paired={paired} n={n}: {r:?}"
                );
                assert_eq!(r.better, 0.0, "{r:?}");
            }
        }
    }

    #[test]
    fn sequential_false_verdicts_stay_below_alpha() {
        let rule = VerdictRule::default();
        for noise in [Noise::Normal, Noise::LogNormal] {
            for cv in [0.01, 0.025, 0.05, 0.15] {
                let mut aa = design(cv, 0.0, 30);
                aa.noise = noise;
                aa.sequential_from = Some(6);
                let r = simulate_verdicts(&aa, &rule, 2000, 13);
                assert!(
                    r.worse + r.better <= 0.05 + 3.0 * (0.05 * 0.95 / 2000f64).sqrt(),
                    "sequential A/A {noise:?} cv={cv}: {r:?}"
                );
            }
        }
    }

    #[test]
    fn pairing_removes_drift() {
        let rule = VerdictRule::default();
        let mut d = design(0.01, 0.03, 12);
        d.drift = 0.05;
        let paired = simulate_verdicts(&d, &rule, 500, 14);
        d.paired = false;
        let unpaired = simulate_verdicts(&d, &rule, 500, 14);
        assert!(paired.worse > 0.95, "{paired:?}");
        assert!(unpaired.worse < 0.5, "{unpaired:?}");
    }

    #[test]
    fn a_several_fold_slowdown_is_called_early() {
        let rule = VerdictRule::default();
        let mut d = design(0.05, 6.0, 30);
        d.sequential_from = Some(6);
        let r = simulate_verdicts(&d, &rule, 200, 15);
        assert_eq!(r.worse, 1.0, "{r:?}");
        // The first interim look the exact test can pass: 2/2¹¹ < 0.001.
        assert_eq!(r.mean_runs, 11.0, "{r:?}");
    }

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

    #[test]
    fn equivalence_needs_four_times_the_runs_at_half_the_threshold() {
        let rule = |noise| VerdictRule { alpha: 0.05, noise };
        // 1% CV, Δ = 2%: 2·(π/3)·((1.645 + 1.645)·0.5)² = 5.67 → the floor of 6 runs.
        assert_eq!(
            runs_for_equivalence(0.01, &rule(0.02), 0.9),
            crate::MIN_PAIRS as u32
        );
        let at_1 = runs_for_equivalence(0.01, &rule(0.01), 0.9);
        let at_half = runs_for_equivalence(0.01, &rule(0.005), 0.9);
        assert_eq!(at_1, 23);
        assert!((4 * at_1).abs_diff(at_half) <= 4, "{at_1} {at_half}");
        assert_eq!(runs_for_equivalence(f64::NAN, &rule(0.01), 0.9), u32::MAX);
    }
}
