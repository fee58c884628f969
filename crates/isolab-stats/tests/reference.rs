//! isolab-stats against SciPy/NumPy: the vectors in `reference/vectors.json` are written
//! by `reference/generate.py` (see its docstring for what comes from which SciPy/NumPy
//! function) and committed.
//!
//! Tolerances:
//! - [`EXACT`] = 1e-9 relative for values with a closed form or an exact distribution:
//!   Mann-Whitney exact p, Benjamini-Hochberg, percentiles, median CI, Hodges-Lehmann
//!   estimate and CI, the power formula, mean/median/stdev/CV, and also for the
//!   deterministic formulas built on special functions — the Mann-Whitney normal
//!   approximation (erfc), Welch's t-test and the Student-t interval of the mean
//!   (incomplete beta and its inverse). Observed worst relative errors when this was
//!   written: 9e-11 (normal-approximation p), 6e-14 (Welch), below 1e-14 elsewhere.
//! - Hodges-Lehmann for large samples (C(n₁+n₂, n₁) > 2⁵³) uses the normal approximation
//!   of the critical rank: its CI must equal the formula's at [`EXACT`], and that rank is
//!   within [`HL_NORMAL_RANKS`] order statistics of the exact-distribution rank on every
//!   vector.
//! - Bootstrap: not an equality with SciPy (different random streams). Checked: the same
//!   seed reproduces the interval bit for bit, the interval contains the sample's ratio
//!   of means, and each end lies within a quarter of SciPy's interval width of SciPy's
//!   `bootstrap(method='percentile')` end (Monte-Carlo error; 10 000 resamples here,
//!   20 000 in SciPy).
//! - Scalability fits: `reference/scalability.json`, written by `reference/scalability.py`
//!   with `scipy.optimize.curve_fit(method='trf', bounds=...)`. Parameters must match to
//!   [`FIT_PARAMS`] = 1e-4 relative and the RSS to [`FIT_RSS`] = 1e-6 relative; a σ or κ
//!   that SciPy leaves on (within 1e-9 of) its lower bound 0 must be within
//!   [`AT_BOUND`] of 0 here too (trf approaches a bound from inside, our projection
//!   lands on it).

use std::path::PathBuf;

use isolab_stats::{
    benjamini_hochberg, bootstrap_ratio_ci, hodges_lehmann, mann_whitney, median_ci, percentile,
    runs_for_power, welch_t_test, Center, Direction, Fit, Interval, Sample, ScalingData,
    ScalingModel,
};
use serde::Deserialize;

const EXACT: f64 = 1e-9;
const HL_NORMAL_RANKS: i64 = 2;
const FIT_PARAMS: f64 = 1e-4;
const FIT_RSS: f64 = 1e-6;
const AT_BOUND: f64 = 1e-9;

#[derive(Deserialize)]
struct Vectors {
    mann_whitney: Vec<MwCase>,
    hodges_lehmann: Vec<HlCase>,
    benjamini_hochberg: Vec<BhCase>,
    percentile: Vec<PercentileCase>,
    median_ci: Vec<MedianCiCase>,
    power: Vec<PowerCase>,
    welch: Vec<WelchCase>,
    sample: Vec<SampleCase>,
    bootstrap: Vec<BootstrapCase>,
}

#[derive(Deserialize)]
struct MwCase {
    name: String,
    a: Vec<f64>,
    b: Vec<f64>,
    u: f64,
    p_exact: Option<f64>,
    p_asymptotic: f64,
    exact_expected: bool,
}

#[derive(Deserialize)]
struct HlCase {
    name: String,
    a: Vec<f64>,
    b: Vec<f64>,
    level: f64,
    estimate: f64,
    method: String,
    k: Option<i64>,
    k_exact: Option<i64>,
    ci: Option<[f64; 2]>,
}

#[derive(Deserialize)]
struct BhCase {
    name: String,
    p: Vec<f64>,
    q: Vec<f64>,
}

#[derive(Deserialize)]
struct PercentileCase {
    name: String,
    values: Vec<f64>,
    q: Vec<f64>,
    result: Vec<f64>,
}

#[derive(Deserialize)]
struct MedianCiCase {
    name: String,
    values: Vec<f64>,
    level: f64,
    ci: Option<[f64; 2]>,
}

#[derive(Deserialize)]
struct PowerCase {
    cv: f64,
    effect: f64,
    alpha: f64,
    power: f64,
    n: u32,
}

#[derive(Deserialize)]
struct WelchCase {
    name: String,
    a: Vec<f64>,
    b: Vec<f64>,
    t: f64,
    df: f64,
    p: f64,
}

#[derive(Deserialize)]
struct SampleCase {
    name: String,
    values: Vec<f64>,
    mean: f64,
    median: f64,
    stdev: f64,
    cv: f64,
    mean_ci: std::collections::BTreeMap<String, [f64; 2]>,
}

#[derive(Deserialize)]
struct BootstrapCase {
    name: String,
    a: Vec<f64>,
    b: Vec<f64>,
    level: f64,
    true_ratio: f64,
    scipy_ci: [f64; 2],
}

#[derive(Deserialize)]
struct ScalabilityVectors {
    cases: Vec<ScalabilityCase>,
}

#[derive(Deserialize)]
struct ScalabilityCase {
    name: String,
    n: Vec<f64>,
    x: Vec<f64>,
    amdahl: ScipyFit,
    usl: ScipyFit,
}

#[derive(Deserialize)]
struct ScipyFit {
    lambda: f64,
    sigma: f64,
    kappa: f64,
    at_bound: AtBound,
    rss: f64,
    aic: f64,
    peak: Option<f64>,
}

#[derive(Deserialize)]
struct AtBound {
    sigma: bool,
    kappa: bool,
}

fn read_json<T: serde::de::DeserializeOwned>(file: &str) -> T {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("reference")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
}

fn vectors() -> Vectors {
    read_json("vectors.json")
}

fn sample(v: &[f64]) -> Sample {
    Sample::new(v.to_vec()).expect("reference samples are valid")
}

#[track_caller]
fn assert_close(what: &str, got: f64, want: f64, rel: f64) {
    let ok = got == want || (got - want).abs() <= rel * got.abs().max(want.abs());
    assert!(
        ok,
        "{what}: got {got:e}, want {want:e} (relative error {:e} > {rel:e})",
        ((got - want) / want).abs()
    );
}

#[track_caller]
fn assert_interval(what: &str, got: Option<Interval>, want: Option<[f64; 2]>, rel: f64) {
    match (got, want) {
        (None, None) => {}
        (Some(g), Some([low, high])) => {
            assert_close(&format!("{what} low"), g.low, low, rel);
            assert_close(&format!("{what} high"), g.high, high, rel);
        }
        (g, w) => panic!("{what}: got {g:?}, want {w:?}"),
    }
}

#[test]
fn mann_whitney_matches_scipy() {
    let v = vectors();
    assert!(v.mann_whitney.iter().any(|c| c.exact_expected));
    assert!(v.mann_whitney.iter().any(|c| !c.exact_expected));
    for c in &v.mann_whitney {
        let r = mann_whitney(&sample(&c.a), &sample(&c.b));
        assert_eq!(r.exact, c.exact_expected, "{}: method", c.name);
        assert_close(&format!("{} U", c.name), r.u, c.u, EXACT);
        let want = if r.exact {
            c.p_exact.expect("exact cases carry SciPy's exact p")
        } else {
            c.p_asymptotic
        };
        assert_close(&format!("{} p", c.name), r.p, want, EXACT);
    }
}

#[test]
fn hodges_lehmann_matches_reference() {
    let v = vectors();
    for c in &v.hodges_lehmann {
        let what = format!("{} at {}", c.name, c.level);
        let h = hodges_lehmann(&sample(&c.a), &sample(&c.b), c.level);
        assert_close(&format!("{what} estimate"), h.estimate, c.estimate, EXACT);
        assert_interval(&format!("{what} ci"), h.ci, c.ci, EXACT);
        if c.method == "normal" {
            let (k, k_exact) = (
                c.k.expect("large samples"),
                c.k_exact.expect("large samples"),
            );
            assert!(
                (k - k_exact).abs() <= HL_NORMAL_RANKS,
                "{what}: normal rank {k} vs exact {k_exact}"
            );
        } else {
            assert_eq!(c.k, c.k_exact, "{what}");
        }
    }
}

#[test]
fn benjamini_hochberg_matches_scipy() {
    for c in &vectors().benjamini_hochberg {
        let q = benjamini_hochberg(&c.p);
        assert_eq!(q.len(), c.q.len(), "{}", c.name);
        for (i, (got, want)) in q.iter().zip(&c.q).enumerate() {
            assert_close(&format!("{}[{i}]", c.name), *got, *want, EXACT);
        }
    }
}

#[test]
fn percentile_matches_numpy() {
    for c in &vectors().percentile {
        for (q, want) in c.q.iter().zip(&c.result) {
            let got = percentile(&c.values, *q).expect("valid input");
            assert_close(&format!("{} p{q}", c.name), got, *want, EXACT);
        }
    }
}

#[test]
fn median_ci_matches_binomial_order_statistics() {
    for c in &vectors().median_ci {
        let got = median_ci(&sample(&c.values), c.level);
        assert_interval(&format!("{} at {}", c.name, c.level), got, c.ci, EXACT);
    }
}

#[test]
fn power_formula_matches_scipy() {
    for c in &vectors().power {
        assert_eq!(
            runs_for_power(c.cv, c.effect, c.alpha, c.power),
            c.n,
            "cv {} effect {} alpha {} power {}",
            c.cv,
            c.effect,
            c.alpha,
            c.power
        );
    }
}

#[test]
fn welch_matches_scipy() {
    for c in &vectors().welch {
        let r = welch_t_test(&sample(&c.a), &sample(&c.b));
        assert_close(&format!("{} t", c.name), r.t, c.t, EXACT);
        assert_close(&format!("{} df", c.name), r.df, c.df, EXACT);
        assert_close(&format!("{} p", c.name), r.p, c.p, EXACT);
    }
}

#[test]
fn sample_statistics_match_numpy_and_scipy() {
    for c in &vectors().sample {
        let s = sample(&c.values);
        assert_close(&format!("{} mean", c.name), s.mean(), c.mean, EXACT);
        assert_close(&format!("{} median", c.name), s.median(), c.median, EXACT);
        assert_close(&format!("{} stdev", c.name), s.stdev(), c.stdev, EXACT);
        assert_close(&format!("{} cv", c.name), s.cv(), c.cv, EXACT);
        for (level, want) in &c.mean_ci {
            let level: f64 = level.parse().expect("levels are numbers");
            let what = format!("{} mean ci at {level}", c.name);
            assert_interval(&what, Some(s.mean_ci(level)), Some(*want), EXACT);
        }
    }
}

#[test]
fn bootstrap_is_reproducible_and_agrees_with_scipy_loosely() {
    for c in &vectors().bootstrap {
        let (a, b) = (sample(&c.a), sample(&c.b));
        let run = |seed| {
            bootstrap_ratio_ci(
                &a,
                &b,
                Center::Mean,
                Direction::Lower,
                c.level,
                10_000,
                seed,
            )
        };
        let ci = run(42).expect("means are non-zero");
        assert_eq!(Some(ci), run(42), "{}: same seed, same interval", c.name);
        assert_ne!(
            Some(ci),
            run(43),
            "{}: another seed, another interval",
            c.name
        );
        assert!(
            ci.low < c.true_ratio && c.true_ratio < ci.high,
            "{}: {ci:?} misses {}",
            c.name,
            c.true_ratio
        );
        let [low, high] = c.scipy_ci;
        let slack = (high - low) / 4.0;
        assert!(
            (ci.low - low).abs() <= slack && (ci.high - high).abs() <= slack,
            "{}: {ci:?} vs SciPy [{low}, {high}]",
            c.name
        );
        // Higher-is-better orientation inverts the ratio: a/b instead of b/a.
        let inv = bootstrap_ratio_ci(&a, &b, Center::Mean, Direction::Higher, c.level, 10_000, 42)
            .expect("means are non-zero");
        assert!(inv.low < 1.0 / c.true_ratio && 1.0 / c.true_ratio < inv.high);
    }
}

#[track_caller]
fn assert_param(what: &str, got: f64, want: f64, at_bound: bool) {
    if at_bound {
        assert!(
            got.abs() <= AT_BOUND,
            "{what}: SciPy leaves it on its bound ({want:e}), got {got:e}"
        );
    } else {
        assert_close(what, got, want, FIT_PARAMS);
    }
}

#[track_caller]
fn assert_fit_matches(what: &str, got: &Fit, want: &ScipyFit) {
    assert!(got.converged, "{what}: did not converge: {got:?}");
    assert_close(
        &format!("{what} lambda"),
        got.lambda,
        want.lambda,
        FIT_PARAMS,
    );
    assert_param(
        &format!("{what} sigma"),
        got.sigma,
        want.sigma,
        want.at_bound.sigma,
    );
    assert_param(
        &format!("{what} kappa"),
        got.kappa,
        want.kappa,
        want.at_bound.kappa,
    );
    assert_close(&format!("{what} rss"), got.rss, want.rss, FIT_RSS);
    // AIC = n ln(RSS/n) + 2k: follows from the RSS (absolute, since AIC may be near 0).
    assert!(
        (got.aic - want.aic).abs() <= 1e-6 * want.aic.abs().max(1.0),
        "{what} aic"
    );
    match (got.peak, want.peak) {
        (Some(g), Some(w)) => assert_close(&format!("{what} peak"), g, w, FIT_PARAMS),
        (None, None) => {}
        // κ on its bound: SciPy's κ ≈ 1e-17 would give a meaningless peak; ours is None
        // or astronomically far.
        (g, None) => assert!(g.is_none_or(|p| p > 1e4), "{what} peak {g:?}"),
        (g, w) => panic!("{what} peak: got {g:?}, want {w:?}"),
    }
}

#[test]
fn scalability_fits_match_scipy_curve_fit() {
    let v: ScalabilityVectors = read_json("scalability.json");
    assert!(v.cases.len() >= 5);
    for c in &v.cases {
        let data = ScalingData::new(c.n.iter().copied().zip(c.x.iter().copied()))
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        let cmp = data.compare();
        assert_fit_matches(&format!("{} amdahl", c.name), &cmp.amdahl, &c.amdahl);
        assert_fit_matches(&format!("{} usl", c.name), &cmp.usl, &c.usl);
        assert_eq!(cmp.amdahl.model, ScalingModel::Amdahl);
        let want = if c.usl.aic < c.amdahl.aic {
            ScalingModel::Usl
        } else {
            ScalingModel::Amdahl
        };
        // Where both RSS are equal to rounding (κ on its bound), AIC prefers Amdahl by 2.
        assert_eq!(cmp.preferred, want, "{}: preferred model", c.name);
    }
}

/// Vectors of `reference/paired.py` (SciPy's `wilcoxon` and the Walsh-average interval).
#[derive(Deserialize)]
struct PairedVectors {
    signed_rank: Vec<SignedRankCase>,
    paired_hodges_lehmann: Vec<PairedHlCase>,
}

#[derive(Deserialize)]
struct SignedRankCase {
    name: String,
    d: Vec<f64>,
    exact_expected: bool,
    statistic: f64,
    p_approx: f64,
    p_exact: Option<f64>,
}

#[derive(Deserialize)]
struct PairedHlCase {
    name: String,
    d: Vec<f64>,
    level: f64,
    estimate: f64,
    ci: Option<[f64; 2]>,
}

fn paired_vectors() -> PairedVectors {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("reference/paired.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn signed_rank_matches_scipy() {
    let v = paired_vectors();
    assert!(v.signed_rank.iter().any(|c| c.exact_expected));
    assert!(v.signed_rank.iter().any(|c| !c.exact_expected));
    for c in &v.signed_rank {
        let r = isolab_stats::signed_rank(&c.d);
        assert_eq!(r.exact, c.exact_expected, "{}: method", c.name);
        assert_close(
            &format!("{} statistic", c.name),
            r.statistic,
            c.statistic,
            EXACT,
        );
        let want = if r.exact {
            c.p_exact.expect("exact cases carry SciPy's exact p")
        } else {
            c.p_approx
        };
        assert_close(&format!("{} p", c.name), r.p, want, EXACT);
    }
}

#[test]
fn paired_hodges_lehmann_matches_reference() {
    for c in &paired_vectors().paired_hodges_lehmann {
        let what = format!("{} at {}", c.name, c.level);
        let h = isolab_stats::paired_hodges_lehmann(&c.d, c.level).expect("finite");
        assert_close(&format!("{what} estimate"), h.estimate, c.estimate, EXACT);
        assert_interval(&format!("{what} ci"), h.ci, c.ci, EXACT);
    }
}
