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

use std::path::PathBuf;

use isolab_stats::{
    benjamini_hochberg, bootstrap_ratio_ci, hodges_lehmann, mann_whitney, median_ci, percentile,
    runs_for_power, welch_t_test, Direction, Interval, Sample,
};
use serde::Deserialize;

const EXACT: f64 = 1e-9;
const HL_NORMAL_RANKS: i64 = 2;

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

fn vectors() -> Vectors {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("reference/vectors.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("cannot parse {}: {e}", path.display()))
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
        let run = |seed| bootstrap_ratio_ci(&a, &b, Direction::Lower, c.level, 10_000, seed);
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
        let inv = bootstrap_ratio_ci(&a, &b, Direction::Higher, c.level, 10_000, 42)
            .expect("means are non-zero");
        assert!(inv.low < 1.0 / c.true_ratio && 1.0 / c.true_ratio < inv.high);
    }
}
