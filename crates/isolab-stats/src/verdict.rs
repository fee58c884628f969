//! The per-point verdict, one of four: `worse`, `better`, `≈` (equivalent) or `?`
//! (inconclusive), and the test of one A/B measurement point it is decided from.
//!
//! # The rule
//!
//! With Δ the noise threshold (default 2%) and α the significance level (default
//! 0.05), for a point whose relative change of B against A is ĉ (the Hodges-Lehmann
//! shift over A's median, oriented so that positive is worse) and whose p-value is q
//! after Benjamini-Hochberg across the points of one comparison:
//!
//! - **worse** when q < α and ĉ > Δ; **better** when q < α and ĉ < −Δ: significant and
//!   the *point estimate* beyond the threshold (Firecracker's A/B rule, `tools/ab_test.py`:
//!   a significance test and a minimum relative change of the estimate);
//! - **≈** (equivalent) when the (1 − 2α) interval of the change lies inside (−Δ, Δ):
//!   two one-sided tests at level α each (D. J. Schuirmann, "A comparison of the two
//!   one-sided tests procedure and the power approach for assessing the equivalence of
//!   average bioavailability", J. Pharmacokinet. Biopharm. 15, 1987);
//! - **?** (inconclusive) otherwise, with an estimate of the runs that would decide
//!   ([`runs_to_decide`]).
//!
//! The outcomes exclude each other: a worse or better point has its estimate, and so
//! its interval, outside (−Δ, Δ). On A/A designs a false verdict needs a significant
//! test, so its rate stays at most α after FDR (and well below α where the threshold
//! binds); asking the whole interval to clear Δ instead (criterion.rs's rule, isolab's
//! before) needs about six times the runs to call a 3% effect at 2.5% CV.
//!
//! # The test
//!
//! [`test_point`] pairs runs of A and B that shared a round where it can (at least
//! [`MIN_PAIRS`] rounds: runs of one round share the machine's state) and then uses
//! the Wilcoxon signed-rank test with the paired Hodges-Lehmann shift; otherwise the
//! Mann-Whitney U test with the two-sample shift. The unpaired interval is computed
//! in both cases, so a report can show what pairing gained.

use std::fmt;

use crate::paired::{paired_hodges_lehmann, signed_rank};
use crate::rank::standard_normal_quantile;
use crate::{hodges_lehmann, mann_whitney, Direction, Interval, Sample};

/// Fewest rounds shared by A and B for the paired analysis: with 6 pairs the exact
/// signed-rank test can reach p = 2/2⁶ = 0.031 < 0.05; with 5 it cannot.
pub const MIN_PAIRS: usize = 6;

/// The significance level below which the runner may stop a cell *before* `max` on a
/// worse or better verdict (a Haybittle-Peto boundary: J. L. Haybittle, Br. J. Radiol.
/// 44, 1971; R. Peto et al., Br. J. Cancer 34, 1976). Interim looks at so strict a
/// level leave the false-verdict rate of the final look at about α; isolab's
/// simulations check it (`sequential_false_verdicts_stay_below_alpha`).
pub const INTERIM_ALPHA: f64 = 0.001;

/// A comparison verdict for one measurement point, B against A.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Verdict {
    /// B is significantly and materially worse. Shown and serialized as `worse`.
    #[serde(rename = "worse")]
    Worse,
    /// B is significantly and materially better. Shown and serialized as `better`.
    #[serde(rename = "better")]
    Better,
    /// A and B are equivalent within the noise threshold (two one-sided tests). Shown
    /// as `≈`, serialized as `equivalent`.
    #[serde(rename = "equivalent")]
    Equivalent,
    /// The data cannot tell yet. Shown as `?`, serialized as `inconclusive`.
    #[serde(rename = "inconclusive")]
    Inconclusive,
}

impl Verdict {
    /// The word or symbol shown in tables: `worse`, `better`, `≈` or `?`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Worse => "worse",
            Verdict::Better => "better",
            Verdict::Equivalent => "≈",
            Verdict::Inconclusive => "?",
        }
    }

    /// The word used in JSON and CSV: `worse`, `better`, `equivalent`, `inconclusive`.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Worse => "worse",
            Verdict::Better => "better",
            Verdict::Equivalent => "equivalent",
            Verdict::Inconclusive => "inconclusive",
        }
    }

    /// Whether the point is decided (anything but `?`).
    pub fn is_decided(self) -> bool {
        self != Verdict::Inconclusive
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Thresholds of the verdict rule (see the module documentation).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct VerdictRule {
    /// Significance level for the FDR-adjusted p-value; default 0.05. The equivalence
    /// interval is at level 1 − 2α.
    pub alpha: f64,
    /// Noise threshold Δ on the relative change, as a fraction (0.02 = 2%); default 0.02.
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

impl VerdictRule {
    /// The level of the equivalence interval, 1 − 2α.
    pub fn equivalence_level(&self) -> f64 {
        1.0 - 2.0 * self.alpha
    }
}

/// How a point was tested.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// Wilcoxon signed-rank on the runs of A and B that shared a round.
    Paired,
    /// Mann-Whitney U on all runs of A and B.
    Unpaired,
}

/// The observations of one measurement point on both sides.
#[derive(Debug, Clone, Copy)]
pub struct PointData<'a> {
    /// A's observations (the baseline).
    pub a: &'a [f64],
    /// B's observations.
    pub b: &'a [f64],
    /// (a, b) of the runs that shared a round; empty when the sides cannot be paired
    /// (e.g. two experiments).
    pub pairs: &'a [(f64, f64)],
    /// Which way is better.
    pub direction: Direction,
}

/// The test of one point, before false-discovery control.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PointTest {
    /// Paired or unpaired.
    pub method: Method,
    /// Rounds in which both sides ran.
    pub pairs: usize,
    /// Two-sided p-value of the test used.
    pub p: f64,
    /// Mann-Whitney's two-sided p-value on all runs (benchstat's test), whichever
    /// method decides.
    pub p_unpaired: f64,
    /// Relative change of B against A (shift over A's median), positive = worse;
    /// `None` when A's median is 0.
    pub change: Option<f64>,
    /// Its confidence interval at the comparison's level.
    pub change_ci: Option<Interval>,
    /// Its interval at level 1 − 2α, for the equivalence test.
    pub equivalence_ci: Option<Interval>,
    /// The unpaired (two-sample) interval of the change at the comparison's level, to
    /// show what pairing gained.
    pub unpaired_change_ci: Option<Interval>,
}

/// (a, b) of the rounds in which both sides have an observation, in round order, from
/// observations given as `(round, value)`; none when a side has two observations in one
/// round (then rounds cannot pair).
pub fn pairs_by_round(a: &[(u32, f64)], b: &[(u32, f64)]) -> Vec<(f64, f64)> {
    // Runs read in stored order have rising rounds, each once: then a merge of the two
    // lists pairs them in round order without a map (an attribution pairs every
    // counter of a cell pair).
    let rising = |v: &[(u32, f64)]| v.windows(2).all(|w| w[0].0 < w[1].0);
    if rising(a) && rising(b) {
        let mut out = Vec::with_capacity(a.len().min(b.len()));
        let (mut i, mut j) = (0, 0);
        while let (Some(&(ra, x)), Some(&(rb, y))) = (a.get(i), b.get(j)) {
            match ra.cmp(&rb) {
                std::cmp::Ordering::Less => i += 1,
                std::cmp::Ordering::Greater => j += 1,
                std::cmp::Ordering::Equal => {
                    out.push((x, y));
                    i += 1;
                    j += 1;
                }
            }
        }
        return out;
    }
    let by_round: std::collections::BTreeMap<u32, f64> = b.iter().copied().collect();
    let rounds_a: std::collections::BTreeSet<u32> = a.iter().map(|(r, _)| *r).collect();
    if by_round.len() != b.len() || rounds_a.len() != a.len() {
        return Vec::new();
    }
    let mut out: Vec<(u32, f64, f64)> = a
        .iter()
        .filter_map(|&(round, x)| by_round.get(&round).map(|&y| (round, x, y)))
        .collect();
    out.sort_by_key(|(round, _, _)| *round);
    out.into_iter().map(|(_, x, y)| (x, y)).collect()
}

/// Tests one point at confidence `level` (e.g. 0.95) under `rule` (whose α sets the
/// equivalence interval). `None` when either side has fewer than two observations or
/// a value that is not finite.
pub fn test_point(data: PointData, level: f64, rule: &VerdictRule) -> Option<PointTest> {
    let sides = Sides::new(&data)?;
    let p_unpaired = mann_whitney(&sides.a, &sides.b).p;
    let unpaired = hodges_lehmann(&sides.a, &sides.b, level);
    let unpaired_change_ci = unpaired.ci.and_then(|ci| sides.scale.relative(ci));
    if let Some(d) = paired_differences(data.pairs) {
        let shift = paired_hodges_lehmann(&d, level)?;
        let equivalence = paired_hodges_lehmann(&d, rule.equivalence_level())?;
        Some(PointTest {
            method: Method::Paired,
            pairs: d.len(),
            p: signed_rank(&d).p,
            p_unpaired,
            change: sides.scale.change(shift.estimate),
            change_ci: shift.ci.and_then(|ci| sides.scale.relative(ci)),
            equivalence_ci: equivalence.ci.and_then(|ci| sides.scale.relative(ci)),
            unpaired_change_ci,
        })
    } else {
        let equivalence = hodges_lehmann(&sides.a, &sides.b, rule.equivalence_level());
        Some(PointTest {
            method: Method::Unpaired,
            pairs: data.pairs.len(),
            p: p_unpaired,
            p_unpaired,
            change: sides.scale.change(unpaired.estimate),
            change_ci: unpaired_change_ci,
            equivalence_ci: equivalence.ci.and_then(|ci| sides.scale.relative(ci)),
            unpaired_change_ci,
        })
    }
}

/// The part of a [`PointTest`] that says whether and how much B changed, without the
/// equivalence interval and the unpaired alternatives that a verdict needs.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ChangeTest {
    /// Paired or unpaired.
    pub method: Method,
    /// Rounds in which both sides ran.
    pub pairs: usize,
    /// Two-sided p-value of the test used.
    pub p: f64,
    /// Relative change of B against A, as [`PointTest::change`].
    pub change: Option<f64>,
    /// Its confidence interval at `level`.
    pub change_ci: Option<Interval>,
}

/// The test of [`test_point`] with only what [`ChangeTest`] holds (the same values):
/// for the many secondary tests of an attribution, at a third of the cost.
pub fn test_change(data: PointData, level: f64) -> Option<ChangeTest> {
    Some(PendingChange::of(data)?.finish(level))
}

/// A [`test_change`] whose p is known and whose change is not computed yet: the
/// change and its interval take a Hodges-Lehmann estimate, a selection over every Walsh
/// average (paired) or pairwise difference (unpaired), most of the test's cost, which a
/// caller that acts on a change only when p is below α need not pay for the rest.
pub struct PendingChange {
    method: Method,
    pairs: usize,
    p: f64,
    samples: Pending,
}

/// What [`PendingChange::finish`] estimates the shift from.
enum Pending {
    /// The differences B − A by round, and the scale from A's median (no copy of
    /// either sample).
    Paired(Vec<f64>, Scale),
    Unpaired(Sides),
}

impl PendingChange {
    /// The test of `data` up to its p; `None` where [`test_change`] has no test (a
    /// sample [`Sample::new`] refuses; paired, a difference that is not finite, two
    /// finite values far apart, which the paired estimate refuses).
    pub fn of(data: PointData) -> Option<PendingChange> {
        if let Some(d) = paired_differences(data.pairs) {
            let scale = Scale::of(&data)?;
            if !d.iter().all(|v| v.is_finite()) {
                return None;
            }
            return Some(PendingChange {
                method: Method::Paired,
                pairs: d.len(),
                p: signed_rank(&d).p,
                samples: Pending::Paired(d, scale),
            });
        }
        let sides = Sides::new(&data)?;
        Some(PendingChange {
            method: Method::Unpaired,
            pairs: data.pairs.len(),
            p: mann_whitney(&sides.a, &sides.b).p,
            samples: Pending::Unpaired(sides),
        })
    }

    /// The test's two-sided p-value.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// The whole test: the change and its interval at `level`.
    pub fn finish(self, level: f64) -> ChangeTest {
        let (change, change_ci) = match &self.samples {
            Pending::Paired(d, scale) => {
                // Refused by `of` where it has no estimate (no pairs, one not finite).
                let shift = paired_hodges_lehmann(d, level);
                (
                    shift.as_ref().and_then(|s| scale.change(s.estimate)),
                    shift.and_then(|s| s.ci).and_then(|ci| scale.relative(ci)),
                )
            }
            Pending::Unpaired(sides) => {
                let shift = hodges_lehmann(&sides.a, &sides.b, level);
                (
                    sides.scale.change(shift.estimate),
                    shift.ci.and_then(|ci| sides.scale.relative(ci)),
                )
            }
        };
        ChangeTest {
            method: self.method,
            pairs: self.pairs,
            p: self.p,
            change,
            change_ci,
        }
    }
}

/// B − A of each pair, when there are enough pairs to pair and all are finite.
fn paired_differences(pairs: &[(f64, f64)]) -> Option<Vec<f64>> {
    let ok = pairs.len() >= MIN_PAIRS && pairs.iter().all(|(x, y)| x.is_finite() && y.is_finite());
    ok.then(|| pairs.iter().map(|(x, y)| y - x).collect())
}

/// What makes a shift relative to A's median and oriented (positive = worse): `sign /
/// |median of A|`, `None` when that median is 0 or not finite.
struct Scale(Option<f64>);

impl Scale {
    fn new(median_a: f64, direction: Direction) -> Scale {
        let sign = match direction {
            Direction::Lower => 1.0,
            Direction::Higher => -1.0,
        };
        Scale((median_a != 0.0 && median_a.is_finite()).then(|| sign / median_a.abs()))
    }

    /// The scale of `data` without copying its samples; `None` when a sample is one
    /// [`Sample::new`] refuses, as [`Sides::new`] is.
    fn of(data: &PointData) -> Option<Scale> {
        Sample::check(data.a).ok()?;
        Sample::check(data.b).ok()?;
        Some(Scale::new(crate::sample::median_of(data.a), data.direction))
    }

    /// A shift as a relative change.
    fn change(&self, shift: f64) -> Option<f64> {
        self.0.map(|s| shift * s)
    }

    /// An interval of the shift as one of the relative change.
    fn relative(&self, ci: Interval) -> Option<Interval> {
        self.0.map(|s| {
            let (x, y) = (ci.low * s, ci.high * s);
            Interval {
                low: x.min(y),
                high: x.max(y),
                level: ci.level,
            }
        })
    }
}

/// The two samples of a point and the scale that makes a shift relative to A's
/// median and oriented (positive = worse).
struct Sides {
    a: Sample,
    b: Sample,
    scale: Scale,
}

impl Sides {
    fn new(data: &PointData) -> Option<Sides> {
        let a = Sample::new(data.a.to_vec()).ok()?;
        let b = Sample::new(data.b.to_vec()).ok()?;
        let scale = Scale::new(a.median(), data.direction);
        Some(Sides { a, b, scale })
    }
}

/// Decides a point from its FDR-adjusted p-value `q`, its relative change and the
/// change's (1 − 2α) interval (see the module documentation). NaN inputs never give
/// worse, better or ≈.
pub fn verdict(
    rule: &VerdictRule,
    q: f64,
    change: Option<f64>,
    equivalence_ci: Option<Interval>,
) -> Verdict {
    let significant = q < rule.alpha;
    match change {
        Some(c) if significant && c > rule.noise => return Verdict::Worse,
        Some(c) if significant && c < -rule.noise => return Verdict::Better,
        _ => {}
    }
    match equivalence_ci {
        Some(ci) if ci.low > -rule.noise && ci.high < rule.noise => Verdict::Equivalent,
        _ => Verdict::Inconclusive,
    }
}

/// What the runner may conclude about a point *before* `max`: worse or better only
/// at [`INTERIM_ALPHA`] (and with the p-value, Bonferroni-adjusted for the `points` of
/// its comparison, below α, so that the report's FDR-controlled verdict agrees), ≈ by
/// the equivalence interval as in [`verdict`]; `None` while undecided.
pub fn interim_verdict(rule: &VerdictRule, test: &PointTest, points: usize) -> Option<Verdict> {
    let p = test.p;
    let strict = p < INTERIM_ALPHA && p * (points.max(1) as f64) < rule.alpha;
    let v = verdict(
        rule,
        if strict { p } else { f64::NAN },
        test.change,
        test.equivalence_ci,
    );
    v.is_decided().then_some(v)
}

/// For a `?` point with `n` runs on its smaller side: about how many runs per side
/// would decide it, from the observed change and the width of its interval (whose
/// standard error shrinks as 1/√n): n·(z₁₋α/₂·s/|ĉ|)² for significance when |ĉ| > Δ,
/// n·(z₁₋α·s/(Δ − |ĉ|))² for equivalence when |ĉ| < Δ, s = (width of the change
/// interval)/(2·z of its level). `None` when no number of runs up to 10⁵ is expected
/// to decide (|ĉ| at Δ, or no interval).
pub fn runs_to_decide(rule: &VerdictRule, test: &PointTest, n: usize) -> Option<u64> {
    let ci = test.change_ci?;
    let c = test.change?.abs();
    let z_level = standard_normal_quantile(0.5 + ci.level / 2.0);
    let s = (ci.high - ci.low) / (2.0 * z_level);
    if !(s.is_finite() && s > 0.0) || n == 0 {
        return None;
    }
    let needed = if c > rule.noise {
        let z = standard_normal_quantile(1.0 - rule.alpha / 2.0);
        n as f64 * (z * s / c).powi(2)
    } else if c < rule.noise {
        let z = standard_normal_quantile(1.0 - rule.alpha);
        n as f64 * (z * s / (rule.noise - c)).powi(2)
    } else {
        return None;
    };
    // A small-sample test may need more than the large-sample estimate: never fewer
    // than one more run, nor fewer than the paired minimum.
    let needed = needed.ceil().max((n + 1) as f64).max(MIN_PAIRS as f64);
    (needed <= 1e5).then_some(needed as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairing by round: rounds that rise on both sides (runs in stored order) pair by
    /// a merge, any other order by a map; both give the pairs of the shared rounds in
    /// round order, and none when a side ran twice in a round.
    #[test]
    fn pairs_by_round_pairs_shared_rounds_in_round_order() {
        let a = [(1, 1.0), (2, 2.0), (4, 4.0), (5, 5.0)];
        let b = [(2, 20.0), (3, 30.0), (5, 50.0), (6, 60.0)];
        let expected = vec![(2.0, 20.0), (5.0, 50.0)];
        assert_eq!(pairs_by_round(&a, &b), expected);
        let (mut a_shuffled, mut b_shuffled) = (a.to_vec(), b.to_vec());
        a_shuffled.reverse();
        b_shuffled.swap(0, 3);
        assert_eq!(pairs_by_round(&a_shuffled, &b_shuffled), expected);
        assert_eq!(pairs_by_round(&a, &[(2, 1.0), (2, 2.0)]), []);
        assert_eq!(pairs_by_round(&[(3, 1.0), (3, 2.0)], &b), []);
        assert_eq!(pairs_by_round(&a, &[]), []);
    }

    fn ci(low: f64, high: f64) -> Option<Interval> {
        Some(Interval {
            low,
            high,
            level: 0.9,
        })
    }

    #[test]
    fn the_change_test_gives_what_the_point_test_gives() {
        let a: Vec<f64> = (0..9).map(|i| 100.0 + (i * 7 % 5) as f64).collect();
        let b: Vec<f64> = (0..9).map(|i| 108.0 + (i * 3 % 4) as f64).collect();
        let pairs: Vec<(f64, f64)> = a.iter().copied().zip(b.iter().copied()).collect();
        let rule = VerdictRule::default();
        for (pairs, method) in [(&pairs[..], Method::Paired), (&[][..], Method::Unpaired)] {
            for direction in [Direction::Lower, Direction::Higher] {
                let data = || PointData {
                    a: &a,
                    b: &b,
                    pairs,
                    direction,
                };
                let full = test_point(data(), 0.95, &rule).unwrap();
                let part = test_change(data(), 0.95).unwrap();
                assert_eq!(part.method, method);
                assert_eq!(
                    (part.method, part.pairs, part.p, part.change, part.change_ci),
                    (full.method, full.pairs, full.p, full.change, full.change_ci)
                );
            }
        }
        // Every size (a median on the stack up to 64 values, on the heap beyond), and
        // samples a point test refuses.
        for n in [2_usize, 6, 25, 70] {
            let a: Vec<f64> = (0..n).map(|i| 100.0 + (i * 7 % 5) as f64).collect();
            let b: Vec<f64> = a.iter().map(|x| x * 1.05).collect();
            let pairs: Vec<(f64, f64)> = a.iter().copied().zip(b.iter().copied()).collect();
            let data = PointData {
                a: &a,
                b: &b,
                pairs: &pairs,
                direction: Direction::Lower,
            };
            let full = test_point(data, 0.95, &rule).map(|t| (t.p, t.change, t.change_ci));
            let part = test_change(data, 0.95).map(|t| (t.p, t.change, t.change_ci));
            assert_eq!(part, full, "{n} pairs");
        }
        let bad = [1.0, f64::NAN, 2.0, 3.0, 4.0, 5.0];
        let good = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let pairs: Vec<(f64, f64)> = good.iter().map(|&x| (x, x + 1.0)).collect();
        for (a, b) in [(&bad, &good), (&good, &bad)] {
            let data = PointData {
                a,
                b,
                pairs: &pairs,
                direction: Direction::Lower,
            };
            assert_eq!(test_change(data, 0.95), None);
            assert_eq!(test_point(data, 0.95, &rule), None);
        }
    }

    #[test]
    fn a_pending_change_test_gives_the_point_tests_p_then_its_change() {
        let n = 9;
        let a: Vec<f64> = (0..n).map(|i| 100.0 + (i * 7 % 5) as f64).collect();
        let b: Vec<f64> = (0..n).map(|i| 101.0 + (i * 3 % 4) as f64).collect();
        let same = a.clone();
        let pairs = |x: &[f64], y: &[f64]| -> Vec<(f64, f64)> {
            x.iter().copied().zip(y.iter().copied()).collect()
        };
        // Far apart, every value finite: a paired difference is not (paired HL refuses).
        let huge: Vec<f64> = (0..n).map(|i| 1.5e308 - i as f64 * 1e300).collect();
        let minus: Vec<f64> = huge.iter().map(|x| -x).collect();
        let zero_median = vec![0.0; n];
        let nan: Vec<f64> = (0..n)
            .map(|i| if i == 3 { f64::NAN } else { 1.0 })
            .collect();
        let cases: Vec<(&[f64], &[f64])> = vec![
            (&a, &b),
            (&a, &same),
            (&huge, &minus),
            (&zero_median, &b),
            (&nan, &b),
            (&a[..1], &b[..1]),
        ];
        for (x, y) in cases {
            for paired in [true, false] {
                let p = if paired { pairs(x, y) } else { Vec::new() };
                for direction in [Direction::Lower, Direction::Higher] {
                    let data = PointData {
                        a: x,
                        b: y,
                        pairs: &p,
                        direction,
                    };
                    let whole = test_point(data, 0.95, &VerdictRule::default());
                    let pending = PendingChange::of(data);
                    let p = pending.as_ref().map(|t| t.p().to_bits());
                    assert_eq!(p, whole.as_ref().map(|t| t.p.to_bits()), "{x:?} {y:?}");
                    let part = pending.map(|t| t.finish(0.95));
                    let part = part.map(|t| (t.method, t.pairs, t.change, t.change_ci));
                    let whole = whole.map(|t| (t.method, t.pairs, t.change, t.change_ci));
                    assert_eq!(part, whole, "{x:?} {y:?} paired {paired}");
                }
            }
        }
    }

    #[test]
    fn four_outcomes() {
        let r = VerdictRule::default();
        assert_eq!(
            verdict(&r, 0.01, Some(0.03), ci(0.01, 0.05)),
            Verdict::Worse
        );
        assert_eq!(
            verdict(&r, 0.01, Some(-0.03), ci(-0.05, -0.01)),
            Verdict::Better
        );
        // Significant but the estimate within the threshold, interval not inside it.
        assert_eq!(
            verdict(&r, 0.01, Some(0.015), ci(0.005, 0.025)),
            Verdict::Inconclusive
        );
        // Significant, small, and narrow: equivalent within ±2%.
        assert_eq!(
            verdict(&r, 0.01, Some(0.015), ci(0.01, 0.019)),
            Verdict::Equivalent
        );
        // Large change, not significant.
        assert_eq!(
            verdict(&r, 0.2, Some(0.2), ci(-0.1, 0.5)),
            Verdict::Inconclusive
        );
        assert_eq!(
            verdict(&r, f64::NAN, Some(0.2), ci(0.1, 0.3)),
            Verdict::Inconclusive
        );
        assert_eq!(
            verdict(&r, 0.01, None, ci(f64::NAN, f64::NAN)),
            Verdict::Inconclusive
        );
        // Exactly at α is not significant; exactly at the threshold is not beyond it.
        assert_eq!(
            verdict(&r, 0.05, Some(0.3), ci(0.1, 0.5)),
            Verdict::Inconclusive
        );
        assert_eq!(
            verdict(&r, 0.01, Some(0.02), ci(0.019, 0.021)),
            Verdict::Inconclusive
        );
    }

    #[test]
    fn words() {
        let all = [
            Verdict::Worse,
            Verdict::Better,
            Verdict::Equivalent,
            Verdict::Inconclusive,
        ];
        let shown: Vec<String> = all.iter().map(|v| v.to_string()).collect();
        assert_eq!(shown, ["worse", "better", "≈", "?"]);
        for v in all {
            assert_eq!(
                serde_json::to_string(&v).unwrap(),
                format!("\"{}\"", v.word())
            );
        }
    }

    fn linear(n: usize, start: f64, step: f64) -> Vec<f64> {
        (0..n)
            .map(|i| start + step * ((i * 7) % n) as f64)
            .collect()
    }

    #[test]
    fn pairs_are_used_from_six_rounds_on() {
        let rule = VerdictRule::default();
        let a = linear(8, 100.0, 1.0);
        let b: Vec<f64> = a.iter().map(|v| v * 1.1).collect();
        let pairs: Vec<(f64, f64)> = a.iter().copied().zip(b.iter().copied()).collect();
        let data = |pairs| PointData {
            a: &a,
            b: &b,
            pairs,
            direction: Direction::Lower,
        };
        let t = test_point(data(&pairs), 0.95, &rule).unwrap();
        assert_eq!(t.method, Method::Paired);
        // Every pair 10% slower: p = 2/2⁸, change about 10%.
        assert!((t.p - 2.0 / 256.0).abs() < 1e-12, "{t:?}");
        assert!((t.change.unwrap() - 0.1).abs() < 0.01, "{t:?}");
        let ci = t.change_ci.unwrap();
        let unpaired = t.unpaired_change_ci.unwrap();
        assert!(ci.high - ci.low < unpaired.high - unpaired.low, "{t:?}");
        let t5 = test_point(data(&pairs[..5]), 0.95, &rule).unwrap();
        assert_eq!(t5.method, Method::Unpaired);
        assert_eq!(t5.p, t5.p_unpaired);
    }

    #[test]
    fn direction_orients_the_change() {
        let rule = VerdictRule::default();
        let a = linear(10, 100.0, 0.1);
        let b: Vec<f64> = a.iter().map(|v| v + 10.0).collect();
        let higher = test_point(
            PointData {
                a: &a,
                b: &b,
                pairs: &[],
                direction: Direction::Higher,
            },
            0.95,
            &rule,
        )
        .unwrap();
        // Higher is better and B is higher: negative change (better).
        assert!(higher.change.unwrap() < -0.09, "{higher:?}");
        let v = verdict(&rule, higher.p, higher.change, higher.equivalence_ci);
        assert_eq!(v, Verdict::Better);
    }

    #[test]
    fn interim_needs_the_strict_level() {
        let rule = VerdictRule::default();
        let mut t = PointTest {
            method: Method::Paired,
            pairs: 6,
            p: 0.03,
            p_unpaired: 0.03,
            change: Some(0.5),
            change_ci: ci(0.3, 0.7),
            equivalence_ci: ci(0.35, 0.65),
            unpaired_change_ci: None,
        };
        assert_eq!(interim_verdict(&rule, &t, 1), None);
        t.p = 0.0005;
        assert_eq!(interim_verdict(&rule, &t, 1), Some(Verdict::Worse));
        // 100 points: Bonferroni 0.05 > α.
        assert_eq!(interim_verdict(&rule, &t, 100), None);
        t.change = Some(0.001);
        t.equivalence_ci = ci(-0.01, 0.012);
        assert_eq!(interim_verdict(&rule, &t, 1), Some(Verdict::Equivalent));
    }

    #[test]
    fn runs_to_decide_grows_with_the_spread() {
        let rule = VerdictRule::default();
        let t = PointTest {
            method: Method::Unpaired,
            pairs: 0,
            p: 0.2,
            p_unpaired: 0.2,
            change: Some(0.03),
            change_ci: Some(Interval {
                low: -0.01,
                high: 0.07,
                level: 0.95,
            }),
            equivalence_ci: None,
            unpaired_change_ci: None,
        };
        // s = 0.08/(2·1.96) = 0.0204; 10·(1.96·0.0204/0.03)² = 17.8 → 18.
        assert_eq!(runs_to_decide(&rule, &t, 10), Some(18));
        let mut eq = t.clone();
        eq.change = Some(0.0);
        // 10·(1.645·0.0204/0.02)² = 28.2 → 29.
        assert_eq!(runs_to_decide(&rule, &eq, 10), Some(29));
        eq.change = Some(0.02);
        assert_eq!(runs_to_decide(&rule, &eq, 10), None);
    }
}
