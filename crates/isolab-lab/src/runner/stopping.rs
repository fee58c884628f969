//! When a cell needs no more runs: each cell's progress ([`CellState`]), the
//! comparisons the runner decides between rounds and the stops they decide, and
//! the rule for a cell without comparisons ([`stop_reason`]: CV at most
//! `target_cv`, or `max`).

use isolab_stats::{Direction, Verdict};
use isolab_store::{CellId, MetricValue, NewRun, RunStatus};

use crate::spec::{Cell, ExperimentSpec, Repetitions};

/// A cell's progress: its runs so far and, once it needs no more, why.
#[derive(Debug, Default)]
pub(super) struct CellState {
    pub(super) id: CellId,
    pub(super) warmups: u32,
    pub(super) counted: u32,
    /// The primary metric of each successful counted run, with its round.
    pub(super) values: Vec<(u32, f64)>,
    /// The primary metric's direction, once a run reported it.
    pub(super) direction: Option<Direction>,
    pub(super) stopped: Option<String>,
}

impl CellState {
    pub(super) fn primary_values(&self) -> Vec<f64> {
        self.values.iter().map(|(_, v)| *v).collect()
    }

    /// The cell's next run when it has `warmups` warm-ups in all: its 1-based
    /// repetition number and whether it is a warm-up.
    pub(super) fn next_run(&self, warmups: u32) -> (u32, bool) {
        if self.warmups < warmups {
            (self.warmups + 1, true)
        } else {
            (self.counted + 1, false)
        }
    }

    /// Takes in a stored run: `repetition`, a warm-up or counted, and for a
    /// successful counted run its primary metric with the round it ran in.
    pub(super) fn record(
        &mut self,
        warmup: bool,
        repetition: u32,
        primary: Option<(u32, &MetricValue)>,
    ) {
        if warmup {
            self.warmups = self.warmups.max(repetition);
            return;
        }
        self.counted = self.counted.max(repetition);
        if let Some((round, m)) = primary {
            self.values.push((round, m.value));
            self.direction = Some(m.direction);
        }
    }

    /// Whether the cell stopped because a run failed.
    pub(super) fn failed(&self) -> bool {
        self.stopped
            .as_deref()
            .is_some_and(|r| r.starts_with("failed"))
    }
}

/// One comparison the runner decides: cell `other` against baseline cell `base`, as
/// the report compares them.
#[derive(Debug, Clone, PartialEq)]
pub struct Comparison {
    /// Index of the baseline cell.
    pub base: usize,
    /// Index of the compared cell.
    pub other: usize,
    /// Points in its comparison (cells of the same baseline-factor levels), for the
    /// multiplicity of the interim test.
    pub points: usize,
    /// Its verdict once decided (decisions are kept).
    pub decided: Option<Verdict>,
}

/// The comparisons of an experiment: every cell whose baseline-factor levels differ
/// from the baseline against the baseline cell with the same other levels.
pub fn comparisons(spec: &ExperimentSpec) -> Vec<Comparison> {
    if spec.baseline.is_empty() {
        return Vec::new();
    }
    let factors: Vec<&String> = spec.baseline.iter().map(|(f, _)| f).collect();
    let split = |cell: &Cell| {
        let (mut own, mut rest): (Vec<_>, Vec<_>) = cell
            .levels
            .iter()
            .cloned()
            .partition(|(f, _)| factors.contains(&f));
        own.sort();
        rest.sort();
        (own, rest)
    };
    let mut baseline = spec.baseline.clone();
    baseline.sort();
    let mut out = Vec::new();
    for (i, cell) in spec.cells.iter().enumerate() {
        let (own, rest) = split(cell);
        if own == baseline || own.len() != baseline.len() {
            continue;
        }
        let base = spec.cells.iter().position(|c| {
            let (o, r) = split(c);
            o == baseline && r == rest
        });
        if let Some(base) = base {
            out.push(Comparison {
                base,
                other: i,
                points: 0,
                decided: None,
            });
        }
    }
    let own_of = |i: usize| split(&spec.cells[i]).0;
    let combos: Vec<_> = out.iter().map(|c| own_of(c.other)).collect();
    for (k, c) in out.iter_mut().enumerate() {
        c.points = combos.iter().filter(|o| **o == combos[k]).count();
    }
    out
}

/// Decides every undecided comparison that its cells' primary values now decide,
/// paired by round as the report pairs them ([`isolab_stats::interim_verdict`] under
/// the default rule). Decisions are kept once made.
pub(super) fn decide_comparisons(comparisons: &mut [Comparison], states: &[CellState]) {
    let rule = isolab_stats::VerdictRule::default();
    for c in comparisons.iter_mut().filter(|c| c.decided.is_none()) {
        let (a, b) = (&states[c.base], &states[c.other]);
        let Some(direction) = a.direction.or(b.direction) else {
            continue;
        };
        let pairs = isolab_stats::pairs_by_round(&a.values, &b.values);
        let (va, vb) = (a.primary_values(), b.primary_values());
        let data = isolab_stats::PointData {
            a: &va,
            b: &vb,
            pairs: &pairs,
            direction,
        };
        if let Some(t) = isolab_stats::test_point(data, 0.95, &rule) {
            c.decided = isolab_stats::interim_verdict(&rule, &t, c.points);
        }
    }
}

/// After a round: decides the comparisons that the data now decide (worse or
/// better only at [`isolab_stats::INTERIM_ALPHA`]), and returns each compared cell
/// whose live comparisons are all decided, once it has at least `min` and
/// [`isolab_stats::MIN_PAIRS`] counted runs, with why it stops.
pub(super) fn decide_round(
    min: u32,
    comparisons: &mut [Comparison],
    states: &[CellState],
) -> Vec<(usize, String)> {
    decide_comparisons(comparisons, states);
    let floor = min.max(isolab_stats::MIN_PAIRS as u32);
    (0..states.len())
        .filter(|&i| states[i].stopped.is_none() && states[i].counted >= floor)
        .filter_map(|i| Some((i, all_decided(comparisons, states, i)?)))
        .collect()
}

/// Why cell `i` stops when every live comparison it takes part in is decided;
/// `None` while one is not, or when it takes part in none.
fn all_decided(comparisons: &[Comparison], states: &[CellState], i: usize) -> Option<String> {
    let mine: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| (c.base == i || c.other == i) && !partner_failed(c, states, i))
        .collect();
    if mine.is_empty() || mine.iter().any(|c| c.decided.is_none()) {
        return None;
    }
    let count = |v: Verdict| mine.iter().filter(|c| c.decided == Some(v)).count();
    let counted = states[i].counted;
    Some(if mine.len() == 1 && mine[0].other == i {
        format!(
            "decided: {} against the baseline after {counted} runs",
            mine[0].decided.map_or("?", |v| v.as_str()),
        )
    } else {
        format!(
            "decided: all {} comparisons ({} worse, {} better, {} ≈) after {counted} runs",
            mine.len(),
            count(Verdict::Worse),
            count(Verdict::Better),
            count(Verdict::Equivalent),
        )
    })
}

/// Whether the partner of cell `i` in `c` stopped because a run failed (the
/// comparison can then never be decided and does not hold `i` back).
fn partner_failed(c: &Comparison, states: &[CellState], i: usize) -> bool {
    let partner = if c.base == i { c.other } else { c.base };
    states[partner].failed()
}

/// Whether cell `i` takes part in a comparison whose partner has not failed.
pub(super) fn compared_live(comparisons: &[Comparison], states: &[CellState], i: usize) -> bool {
    comparisons
        .iter()
        .any(|c| (c.base == i || c.other == i) && !partner_failed(c, states, i))
}

/// Why a cell stops after its stored run `run`, `None` if it does not: a failed
/// run stops it, a warm-up never does, a counted run by [`stop_reason`] with the
/// CV `cv` of its primary metric `primary` (a `compared` cell only at `max`).
pub(super) fn stop_after(
    run: &NewRun,
    state: &CellState,
    cv: Option<f64>,
    reps: Repetitions,
    compared: bool,
    primary: &str,
) -> Option<String> {
    if run.status == RunStatus::Failed {
        return Some(format!(
            "failed: {} run {}: {}",
            if run.warmup { "warm-up" } else { "counted" },
            run.repetition,
            run.error.as_deref().unwrap_or_default()
        ));
    }
    if run.warmup {
        return None;
    }
    stop_reason(
        state.counted,
        cv,
        reps.min,
        reps.max,
        (!compared).then_some(reps.target_cv),
        primary,
    )
}

/// Why a cell with `n` counted runs and coefficient of variation `cv` needs no more
/// runs, or `None` if it does. `target_cv` is `None` for a cell whose comparisons
/// decide when it stops (then only `max` stops it here).
pub fn stop_reason(
    n: u32,
    cv: Option<f64>,
    min: u32,
    max: u32,
    target_cv: Option<f64>,
    primary: &str,
) -> Option<String> {
    if n < min {
        return None;
    }
    let Some(target_cv) = target_cv else {
        return (n >= max).then(|| {
            format!(
                "max: {n} runs reached before every comparison was decided (see `isolab compare`)"
            )
        });
    };
    match cv {
        Some(cv) if cv <= target_cv => Some(format!(
            "stable: CV of {primary} {:.2}% ≤ target {:.2}% after {n} runs",
            cv * 100.0,
            target_cv * 100.0
        )),
        _ if n >= max => Some(format!(
            "max: {n} runs reached with CV of {primary} {} > target {:.2}%",
            cv.map_or("unknown".into(), |c| format!("{:.2}%", c * 100.0)),
            target_cv * 100.0
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_rule() {
        assert_eq!(stop_reason(2, Some(0.0), 3, 5, Some(0.05), "m"), None);
        assert!(stop_reason(3, Some(0.04), 3, 5, Some(0.05), "m")
            .unwrap()
            .starts_with("stable"));
        assert_eq!(stop_reason(4, Some(0.06), 3, 5, Some(0.05), "m"), None);
        assert!(stop_reason(5, Some(0.06), 3, 5, Some(0.05), "m")
            .unwrap()
            .starts_with("max"));
        assert!(stop_reason(5, None, 3, 5, Some(0.05), "m")
            .unwrap()
            .contains("unknown"));
        // A compared cell: no CV rule, only max.
        assert_eq!(stop_reason(4, Some(0.0), 3, 5, None, "m"), None);
        assert!(stop_reason(5, Some(0.0), 3, 5, None, "m")
            .unwrap()
            .starts_with("max: 5 runs reached before every comparison was decided"));
    }
}
