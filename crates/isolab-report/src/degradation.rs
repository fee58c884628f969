//! Degradation in percent of a cell against a reference cell that differs from it in one
//! factor, as seed 001 prints it: the isolation tables (the same cell without neighbour,
//! [`crate::isolation`]) and Table 4.1 (the same cell on the host, [`crate::platforms`]).
//!
//! With `a` the reference's mean and `b` the cell's, the degradation is `100·(b − a)/a`
//! for a lower-is-better metric and `100·(a − b)/a` for a higher-is-better one (seed 001:
//! "(Native − SUT)/Native" of throughputs, "(BR − RST)/BR"), positive = worse. With the
//! overhead ratio `r` oriented so that above 1 is worse (`b/a` or `a/b`), it is
//! `100·(r − 1)` or `100·(1 − 1/r)`: increasing in `r`, so the ratio's bootstrap CI maps
//! to a CI of the degradation ([`degradation_of_ratio`], the one formula both tables
//! use). The verdict is the summary's when the summary compared the cell with that
//! reference (the reference is a baseline cell); otherwise it is decided here the way
//! the summary decides ([`entries`]).

use std::collections::HashMap;

use isolab_stats::{benjamini_hochberg, degradation_pct, Direction, Interval, Verdict};

use crate::compare::CompareOptions;
use crate::summary::MetricRow;
use crate::table::signed_pct;

/// One entry: a cell's degradation against its reference cell.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct DegradationEntry {
    /// Degradation in percent from the two means (positive = worse).
    pub degradation: Option<f64>,
    /// Its confidence interval, mapped from the overhead ratio's bootstrap CI.
    pub ci: Option<Interval>,
    /// Worse, better, `≈` or `?`; `None` when the pair could not be tested (fewer than two
    /// observations on a side).
    pub verdict: Option<Verdict>,
    /// Counted observations of the cell (with the neighbour; on the platform).
    pub n_with: usize,
    /// Counted observations of the reference (without neighbour; on the host).
    pub n_without: usize,
    /// The cell did not report (seed 001's DNR): its subject did not finish, the worst
    /// outcome; shown as `DNR`.
    pub did_not_report: bool,
}

/// An entry as text: `+12.3% [+8.1, +16.0] worse`, `+0.4% [-1.2, +1.9] ≈`,
/// `+3.1% [-1.2, +7.4] ?`, `+4.0% ? (n=1/8)` when untested, `DNR` when the cell did
/// not report.
pub fn entry_text(e: &DegradationEntry) -> String {
    if e.did_not_report {
        return "DNR".into();
    }
    let ci = e.ci.map_or(String::new(), |ci| {
        format!(" [{}, {}]", signed_pct(ci.low), signed_pct(ci.high))
    });
    match (e.verdict, e.degradation) {
        (Some(v), Some(d)) => format!("{}%{ci} {v}", signed_pct(d)),
        (Some(v), None) => format!("{v}{ci}"),
        (None, Some(d)) => format!("{}% ? (n={}/{})", signed_pct(d), e.n_with, e.n_without),
        (None, None) => format!("- (n={}/{})", e.n_with, e.n_without),
    }
}

/// The degradation in percent for an overhead ratio `r` (oriented so that above 1 is
/// worse): `100·(r − 1)` for lower-is-better metrics (`r = b/a`), `100·(1 − 1/r)` for
/// higher-is-better ones (`r = a/b`). `None` for a non-positive or non-finite ratio.
pub fn degradation_of_ratio(r: f64, direction: Direction) -> Option<f64> {
    if !(r.is_finite() && r > 0.0) {
        return None;
    }
    Some(match direction {
        Direction::Lower => 100.0 * (r - 1.0),
        Direction::Higher => 100.0 * (1.0 - 1.0 / r),
    })
}

/// The ratio's CI as a degradation CI (the map is increasing, so the ends stay in order).
pub(crate) fn degradation_ci(ci: Interval, direction: Direction) -> Option<Interval> {
    let low = degradation_of_ratio(ci.low, direction)?;
    let high = degradation_of_ratio(ci.high, direction)?;
    Some(Interval {
        low: low.min(high),
        high: low.max(high),
        level: ci.level,
    })
}

/// The level of `factor` in `levels`.
pub(crate) fn level<'a>(levels: &'a [(String, String)], factor: &str) -> Option<&'a str> {
    levels
        .iter()
        .find(|(f, _)| f == factor)
        .map(|(_, l)| l.as_str())
}

/// The position of `item` in `list`, pushed at the end when it is not there yet.
pub(crate) fn index_of(list: &mut Vec<String>, item: &str) -> usize {
    match list.iter().position(|x| x == item) {
        Some(i) => i,
        None => {
            list.push(item.to_owned());
            list.len() - 1
        }
    }
}

/// The entry of each pair `(cell, reference)`. Pairs whose summary verdict is against
/// another baseline than their reference are compared here, the way the summary
/// compares with its baseline: one comparison per `group` (a neighbour level, a
/// platform), with Benjamini-Hochberg over its points.
pub fn entries<'a>(
    pairs: &[(&'a MetricRow, &'a MetricRow)],
    group: impl Fn(usize) -> String,
) -> Vec<DegradationEntry> {
    let fallback = fallback_verdicts(pairs, group);
    pairs
        .iter()
        .enumerate()
        .map(|(i, (with, base))| entry(with, base, fallback.get(&i).copied()))
        .collect()
}

/// The verdict and ratio CI a pair shows when the summary compared it with another
/// baseline than its reference.
#[derive(Debug, Clone, Copy)]
struct Fallback {
    ratio_ci: Option<Interval>,
    verdict: Option<Verdict>,
}

/// Whether the summary's overhead, ratio CI and verdict of `with` are against `base`.
///
/// When `base` is a baseline cell and `with` is not, the two differ only in the factor
/// the table varies (the neighbour, the platform), so the baseline holds `base`'s level
/// of it and `with`'s baseline is `base`.
fn compared_with(with: &MetricRow, base: &MetricRow) -> bool {
    base.is_baseline && !with.is_baseline
}

fn fallback_verdicts(
    pairs: &[(&MetricRow, &MetricRow)],
    group: impl Fn(usize) -> String,
) -> HashMap<usize, Fallback> {
    let options = CompareOptions::default();
    let mut out = HashMap::new();
    let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
    for (i, (with, base)) in pairs.iter().enumerate() {
        if compared_with(with, base) {
            continue;
        }
        let g = group(i);
        match groups.iter_mut().find(|(x, _)| *x == g) {
            Some((_, v)) => v.push(i),
            None => groups.push((g, vec![i])),
        }
    }
    let mut draws = crate::compare::Draws::default();
    for (_, members) in groups {
        let points: Vec<crate::compare::Point> = members
            .iter()
            .map(|&i| {
                let (with, base) = pairs[i];
                // Rows keep no rounds: these points are tested unpaired.
                let indexed = |v: &[f64]| (0u32..).zip(v.iter().copied()).collect::<Vec<_>>();
                crate::compare::point(
                    &with.levels,
                    &with.metric,
                    &with.unit,
                    with.direction,
                    crate::compare::PointValues {
                        a: &indexed(&base.values),
                        b: &indexed(&with.values),
                    },
                    false,
                    &options,
                    &mut draws,
                )
            })
            .collect();
        let ps: Vec<f64> = points.iter().map(|p| p.p.unwrap_or(f64::NAN)).collect();
        let qs = benjamini_hochberg(&ps);
        for ((&i, p), q) in members.iter().zip(&points).zip(qs) {
            let verdict = p
                .change
                .map(|_| isolab_stats::verdict(&options.rule, q, p.change, p.equivalence_ci));
            out.insert(
                i,
                Fallback {
                    ratio_ci: p.ratio_ci,
                    verdict,
                },
            );
        }
    }
    out
}

fn entry(with: &MetricRow, base: &MetricRow, fallback: Option<Fallback>) -> DegradationEntry {
    if with.is_dnr() {
        return DegradationEntry {
            degradation: None,
            ci: None,
            verdict: Some(Verdict::Worse),
            n_with: 0,
            n_without: base.n,
            did_not_report: true,
        };
    }
    let degradation = match (base.mean(), with.mean()) {
        (Some(a), Some(b)) => degradation_pct(a, b, with.direction).filter(|d| d.is_finite()),
        _ => None,
    };
    let (ratio_ci, verdict) = match fallback {
        Some(f) => (f.ratio_ci, f.verdict),
        None => (with.ratio_ci, with.verdict),
    };
    DegradationEntry {
        degradation,
        ci: ratio_ci.and_then(|ci| degradation_ci(ci, with.direction)),
        verdict,
        n_with: with.n,
        n_without: base.n,
        did_not_report: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 001's own numbers, by hand: a throughput of 100 natively and 80 on the
    /// platform is (100 − 80)/100 = 20% worse (oriented ratio 100/80 = 1.25); a latency
    /// of 10 µs natively and 12 µs on the platform is (12 − 10)/10 = 20% worse (ratio
    /// 1.2). Both formulas agree with the means' direct form.
    #[test]
    fn both_directions_by_hand() {
        let higher = degradation_of_ratio(100.0 / 80.0, Direction::Higher).unwrap();
        assert!((higher - 20.0).abs() < 1e-9, "{higher}");
        assert_eq!(degradation_pct(100.0, 80.0, Direction::Higher), Some(20.0));
        let lower = degradation_of_ratio(12.0 / 10.0, Direction::Lower).unwrap();
        assert!((lower - 20.0).abs() < 1e-9, "{lower}");
        assert_eq!(degradation_pct(10.0, 12.0, Direction::Lower), Some(20.0));
        // A faster platform is a negative degradation either way: 125 vs 100 ops/s is
        // (100 − 125)/100 = −25%, ratio 0.8; 8 vs 10 µs is −20%, ratio 0.8.
        let better = degradation_of_ratio(100.0 / 125.0, Direction::Higher).unwrap();
        assert!((better + 25.0).abs() < 1e-9, "{better}");
        let faster = degradation_of_ratio(0.8, Direction::Lower).unwrap();
        assert!((faster + 20.0).abs() < 1e-9, "{faster}");
        // "1 − ratio" on the oriented ratio would say 1 − 1.25 = −25%: the wrong sign and size.
        assert!((higher - 100.0 * (1.0 - 1.25)).abs() > 40.0);
    }

    #[test]
    fn lower_is_better_maps_the_ratio_directly() {
        assert_eq!(degradation_of_ratio(1.25, Direction::Lower), Some(25.0));
        let d = degradation_of_ratio(1.25, Direction::Higher).unwrap();
        assert!((d - 20.0).abs() < 1e-9, "{d}");
        assert_eq!(degradation_of_ratio(0.0, Direction::Higher), None);
        assert_eq!(degradation_of_ratio(f64::NAN, Direction::Lower), None);
        let ci = degradation_ci(
            Interval {
                low: 0.9,
                high: 1.1,
                level: 0.95,
            },
            Direction::Lower,
        )
        .unwrap();
        assert!((ci.low + 10.0).abs() < 1e-9 && (ci.high - 10.0).abs() < 1e-9);
    }
}
