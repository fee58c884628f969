//! `isolab gate`'s decision: every point of a candidate experiment against the same
//! point in earlier experiments of the same spec ([`isolab_stats::test_against_history`],
//! whose documentation states the rule), Benjamini-Hochberg over the points, a verdict
//! each, and for a decided point the counters that moved with it against the newest
//! reference experiment ([`crate::attribution`]).

use std::collections::BTreeMap;

use isolab_stats::{
    benjamini_hochberg, history_verdict, test_against_history, Direction, HistoryTest,
    MedianEstimate, Verdict, VerdictRule,
};
use isolab_store::ExperimentId;

use crate::compare::{compare, CompareOptions, Side};
use crate::data::ExperimentData;
use crate::fingerprint::Drift;

/// One point of the gate: a cell of the candidate and one of its metrics.
#[derive(Debug, Clone, serde::Serialize)]
pub struct GatePoint {
    /// The cell's levels.
    pub levels: Vec<(String, String)>,
    /// The cell's key (its levels as one word).
    pub cell: String,
    /// The metric.
    pub metric: String,
    /// Its unit.
    pub unit: String,
    /// Which way is better.
    pub direction: Direction,
    /// The candidate's counted runs of the cell.
    pub n: usize,
    /// The candidate's estimate: the median of those runs.
    pub candidate: f64,
    /// The history's experiments that hold the point, newest first, with their estimate.
    pub history: Vec<(ExperimentId, f64)>,
    /// The test, when the history is long enough.
    pub test: Option<HistoryTest>,
    /// The test's p after Benjamini-Hochberg over the gate's tested points.
    pub q: Option<f64>,
    /// The verdict (`?` when untested).
    pub verdict: Verdict,
    /// Why the point was not tested.
    pub untested: Option<String>,
    /// For a worse or better point: the counters that moved with it, against the newest
    /// reference experiment, as one line.
    pub attribution: Option<String>,
}

/// A gate's decision.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Gate {
    /// The candidate experiment.
    pub candidate: ExperimentId,
    /// The reference experiments, newest first.
    pub reference: Vec<ExperimentId>,
    /// How the reference was chosen (`the latest 10 …`, `tag baseline`).
    pub reference_rule: String,
    /// Fingerprint keys that differ between the candidate and a reference experiment,
    /// allowed by `--allow-drift`: candidate causes of any change.
    pub drift: Vec<Drift>,
    /// The rule: α and the floor of the thresholds (the spec's `noise`).
    pub rule: VerdictRule,
    /// Every point, in the candidate's cell order.
    pub points: Vec<GatePoint>,
    /// Points judged worse.
    pub worse: usize,
    /// Points judged better.
    pub better: usize,
    /// Points judged equivalent.
    pub equivalent: usize,
    /// Points undecided (or untested).
    pub undecided: usize,
}

/// The estimate of `metric` in the cell keyed `key` of `data` (the median of its
/// counted, successful runs and its uncertainty), with their number, unit and direction.
fn estimate(
    data: &ExperimentData,
    key: &str,
    metric: &str,
) -> Option<(MedianEstimate, usize, String, Direction)> {
    let (values, unit, direction) = data.counted_values(key, metric)?;
    let sample = isolab_stats::Sample::new(values).ok()?;
    Some((MedianEstimate::of(&sample), sample.len(), unit, direction))
}

/// The metrics of the candidate's cell `index` that the gate decides: its primary one,
/// or every one it recorded with `all_metrics`.
fn metrics_of(
    candidate: &ExperimentData,
    cell: &isolab_store::CellRecord,
    primary: &BTreeMap<u32, String>,
    all_metrics: bool,
) -> Vec<String> {
    let mut names: Vec<String> = candidate
        .runs
        .iter()
        .filter(|r| r.cell == cell.id && r.is_counted())
        .flat_map(|r| r.metrics.iter().map(|m| m.name.clone()))
        .collect();
    names.sort();
    names.dedup();
    match primary.get(&cell.index) {
        Some(p) if !all_metrics => names.into_iter().filter(|n| n == p).collect(),
        _ => names,
    }
}

/// What the gate is asked to decide.
pub struct GateInput<'a> {
    /// The candidate.
    pub candidate: &'a ExperimentData,
    /// The reference experiments, newest first; each point's history is those of them
    /// whose cell of the same key runs the same workload definition (`same_cell`).
    pub reference: &'a [ExperimentData],
    /// Whether reference experiment `i`'s cell `key` is the candidate's cell: same
    /// levels and the same workload definition.
    pub same_cell: &'a dyn Fn(usize, &str) -> bool,
    /// How the reference was chosen, for the output.
    pub reference_rule: String,
    /// Allowed drift.
    pub drift: Vec<Drift>,
    /// The candidate's primary metric per cell index.
    pub primary: &'a BTreeMap<u32, String>,
    /// Every metric instead of the primary ones.
    pub all_metrics: bool,
    /// α and the thresholds' floor.
    pub rule: VerdictRule,
}

/// Decides every point of the candidate against its history.
pub fn gate(input: &GateInput) -> Gate {
    let c = input.candidate;
    let mut points = Vec::new();
    for cell in &c.cells {
        for metric in metrics_of(c, cell, input.primary, input.all_metrics) {
            let Some((candidate, n, unit, direction)) = estimate(c, &cell.key, &metric) else {
                continue;
            };
            let history: Vec<(ExperimentId, f64)> = input
                .reference
                .iter()
                .enumerate()
                .filter(|(i, _)| (input.same_cell)(*i, &cell.key))
                .filter_map(|(_, r)| {
                    estimate(r, &cell.key, &metric).map(|e| (r.record.id, e.0.value))
                })
                .collect();
            let values: Vec<f64> = history.iter().map(|(_, v)| *v).collect();
            let test = test_against_history(&values, candidate, direction, &input.rule);
            let untested = test.is_none().then(|| {
                if values.len() < isolab_stats::MIN_HISTORY {
                    format!(
                        "history of {} experiment{} (the gate needs {})",
                        values.len(),
                        if values.len() == 1 { "" } else { "s" },
                        isolab_stats::MIN_HISTORY
                    )
                } else {
                    "a value is not positive: no relative change is defined".to_owned()
                }
            });
            points.push(GatePoint {
                levels: cell.levels.clone(),
                cell: cell.key.clone(),
                metric,
                unit,
                direction,
                n,
                candidate: candidate.value,
                history,
                test,
                q: None,
                verdict: Verdict::Inconclusive,
                untested,
                attribution: None,
            });
        }
    }
    let tested: Vec<usize> = (0..points.len())
        .filter(|&i| points[i].test.is_some())
        .collect();
    let p: Vec<f64> = tested
        .iter()
        .map(|&i| points[i].test.as_ref().map_or(1.0, |t| t.p))
        .collect();
    for (&i, q) in tested.iter().zip(benjamini_hochberg(&p)) {
        let point = &mut points[i];
        point.q = Some(q);
        if let Some(t) = &point.test {
            point.verdict = history_verdict(&input.rule, t, q);
        }
    }
    attribute(input, &mut points);
    let count = |v: Verdict| points.iter().filter(|p| p.verdict == v).count();
    Gate {
        candidate: c.record.id,
        reference: input.reference.iter().map(|r| r.record.id).collect(),
        reference_rule: input.reference_rule.clone(),
        drift: input.drift.clone(),
        rule: input.rule.clone(),
        worse: count(Verdict::Worse),
        better: count(Verdict::Better),
        equivalent: count(Verdict::Equivalent),
        undecided: count(Verdict::Inconclusive),
        points,
    }
}

/// The counters that moved with each decided point, from a comparison of the candidate
/// against the newest reference experiment (runs of two days: a counter that moved says
/// where to look, the verdict is the gate's).
fn attribute(input: &GateInput, points: &mut [GatePoint]) {
    let decided = points
        .iter()
        .any(|p| matches!(p.verdict, Verdict::Worse | Verdict::Better));
    let Some(newest) = input.reference.first().filter(|_| decided) else {
        return;
    };
    let a = Side {
        data: newest,
        select: Vec::new(),
        primary: input.primary.clone(),
        label: format!("experiment {}", newest.record.id),
    };
    let b = Side {
        data: input.candidate,
        select: Vec::new(),
        primary: input.primary.clone(),
        label: format!("experiment {}", input.candidate.record.id),
    };
    let options = CompareOptions {
        rule: input.rule.clone(),
        all_metrics: input.all_metrics,
        ..CompareOptions::default()
    };
    let Ok(comparison) = compare(&a, &b, &options) else {
        return;
    };
    for p in points
        .iter_mut()
        .filter(|p| matches!(p.verdict, Verdict::Worse | Verdict::Better))
    {
        p.attribution = comparison
            .attribution(&p.levels)
            .map(crate::table::attribution_line);
    }
}

/// A relative change as a signed percentage, `+3.1%`.
fn pct(v: f64) -> String {
    format!("{:+.1}%", v * 100.0)
}

/// The gate as text or Markdown: a line saying what it decided against, the drift it
/// was allowed, a table of the points, the worse points' attributions, and the counts.
pub fn gate_table(g: &Gate, style: impl Into<crate::table::Style>) -> String {
    use crate::table::{num, text_lines, Table};
    let style = style.into();
    let mut head = format!(
        "gate: experiment {} against {} ({}); a point's threshold is the larger of the spec's noise ±{:.1}% and the history's band; α = {}\n",
        g.candidate,
        match g.reference.len() {
            0 => "no reference experiment".to_owned(),
            n => format!(
                "{n} reference experiment{}: {}",
                if n == 1 { "" } else { "s" },
                g.reference
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
        g.reference_rule,
        g.rule.noise * 100.0,
        g.rule.alpha,
    );
    if !g.drift.is_empty() {
        head.push_str(&format!(
            "drift allowed (a candidate cause of any change): {}\n",
            crate::fingerprint::describe(&g.drift)
        ));
    }
    let mut out = text_lines(&head, style);
    let mut table = Table::new(
        [
            "cell",
            "metric",
            "n",
            "candidate",
            "history",
            "k",
            "spread",
            "threshold",
            "change",
            "90% PI",
            "p",
            "q",
            "verdict",
        ]
        .map(String::from)
        .to_vec(),
        vec![
            false, false, true, true, true, true, true, true, true, true, true, true, false,
        ],
    );
    for p in &g.points {
        let t = p.test.as_ref();
        let dash = || "-".to_owned();
        table.push(vec![
            p.cell.clone(),
            if p.unit.is_empty() {
                p.metric.clone()
            } else {
                format!("{} ({})", p.metric, p.unit)
            },
            p.n.to_string(),
            num(p.candidate),
            t.map_or_else(dash, |t| num(t.reference)),
            p.history.len().to_string(),
            t.map_or_else(dash, |t| format!("{:.2}%", t.spread * 100.0)),
            t.map_or_else(dash, |t| format!("±{:.1}%", t.threshold * 100.0)),
            t.map_or_else(dash, |t| pct(t.change)),
            t.map_or_else(dash, |t| {
                format!("[{}, {}]", pct(t.interval.low), pct(t.interval.high))
            }),
            t.map_or_else(dash, |t| format!("{:.3}", t.p)),
            p.q.map_or_else(dash, |q| format!("{q:.3}")),
            match &p.untested {
                Some(why) => format!("? ({why})"),
                None => p.verdict.as_str().to_owned(),
            },
        ]);
    }
    out.push_str(&table.render(style));
    let mut tail = String::new();
    for p in g
        .points
        .iter()
        .filter(|p| matches!(p.verdict, Verdict::Worse | Verdict::Better))
    {
        tail.push_str(&format!(
            "{} {} {}: {}\n",
            p.verdict.as_str(),
            p.cell,
            p.metric,
            p.attribution
                .as_deref()
                .unwrap_or("no counter moved with it against the newest reference experiment")
        ));
    }
    tail.push_str(&format!(
        "worse {}, better {}, ≈ {}, ? {}\n",
        g.worse, g.better, g.equivalent, g.undecided
    ));
    out.push_str(&text_lines(&tail, style));
    out
}
