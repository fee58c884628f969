//! When a cell needs no more runs: each cell's progress ([`CellState`]), the
//! comparisons the runner decides between rounds and the stops they decide, the
//! rule for a cell without comparisons ([`stop_reason`]: CV at most `target_cv`, or
//! `max`), and the rule of a stored experiment continued until one comparison is
//! decided ([`UntilDecided`]).

use isolab_stats::{Direction, Verdict};
use isolab_store::{CellId, ExperimentId, MetricValue, NewRun, RunStatus};

use super::error::RunError;
use super::finished::DNR_PREFIX;
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

    /// Whether the cell stopped without the data a comparison needs: a run failed or
    /// did not report (DNR).
    pub(super) fn ended_without_data(&self) -> bool {
        self.failed()
            || self
                .stopped
                .as_deref()
                .is_some_and(|r| r.starts_with("did not report"))
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
    /// For a comparison asked for after the experiment ([`UntilDecided`]), how stop
    /// reasons name it (`B against A` by the cells' keys); `None` for a comparison
    /// with the baseline.
    pub asked: Option<String>,
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
                asked: None,
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
/// `rule`, the spec's: its `noise` is the Δ). Decisions are kept once made.
pub(super) fn decide_comparisons(
    rule: &isolab_stats::VerdictRule,
    comparisons: &mut [Comparison],
    states: &[CellState],
) {
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
        if let Some(t) = isolab_stats::test_point(data, 0.95, rule) {
            c.decided = isolab_stats::interim_verdict(rule, &t, c.points);
        }
    }
}

/// After a round: decides the comparisons that the data now decide (worse or
/// better only at [`isolab_stats::INTERIM_ALPHA`]), and returns each compared cell
/// whose live comparisons are all decided, once it has at least `min` and
/// [`isolab_stats::MIN_PAIRS`] counted runs, with why it stops.
pub(super) fn decide_round(
    min: u32,
    rule: &isolab_stats::VerdictRule,
    comparisons: &mut [Comparison],
    states: &[CellState],
) -> Vec<(usize, String)> {
    decide_comparisons(rule, comparisons, states);
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
    if let [Comparison {
        asked: Some(asked),
        decided: Some(v),
        ..
    }] = mine[..]
    {
        return Some(format!(
            "decided: {v} ({asked}) after {counted} runs, continued until decided"
        ));
    }
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

/// A stored experiment continued until one comparison is decided (`isolab run
/// --resume EXP --until-decided --a … --b …`): cell `b` against cell `a` (indices of
/// the spec's cells). Only these two cells run, in rounds as before (shuffled with
/// the experiment's seed, so each round pairs them), and their one comparison decides
/// when they stop, as a comparison with the baseline does (`decide_round`: worse or
/// better at [`isolab_stats::INTERIM_ALPHA`], or ≈, never before `min` nor
/// [`isolab_stats::MIN_PAIRS`] rounds), or `max` stops them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UntilDecided {
    /// Index of cell A (the side compared against).
    pub a: usize,
    /// Index of cell B.
    pub b: usize,
}

impl UntilDecided {
    /// Readies the `states` of experiment `id`'s cells, as loaded from the store, for
    /// this rule, and returns the one comparison to decide. Every other cell sits the
    /// continuation out (in memory only: its stored stop reason stays); A and B are
    /// taken up again, unless one of them already has `max` counted runs (then
    /// neither runs: a side running alone pairs with nothing). Refused when another
    /// cell has not finished (the experiment was interrupted: resume it first) or
    /// when A or B stopped because a run failed.
    pub(super) fn focus(
        self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        states: &mut [CellState],
    ) -> Result<Vec<Comparison>, RunError> {
        let selected = |i: usize| i == self.a || i == self.b;
        let unfinished: Vec<String> = (0..states.len())
            .filter(|&i| !selected(i) && states[i].stopped.is_none())
            .map(|i| format!("`{}`", spec.cells[i].key()))
            .collect();
        if !unfinished.is_empty() {
            return Err(RunError::Unfinished {
                experiment: id,
                cells: unfinished.join(", "),
            });
        }
        for i in [self.a, self.b] {
            if states[i].ended_without_data() {
                return Err(RunError::FailedCell {
                    experiment: id,
                    cell: spec.cells[i].key(),
                    reason: states[i].stopped.clone().unwrap_or_default(),
                });
            }
        }
        let max = spec.repetitions.max;
        let at_max = [self.a, self.b].iter().any(|&i| states[i].counted >= max);
        for i in [self.a, self.b] {
            if at_max {
                let counted = states[i].counted;
                states[i].stopped = Some(format!(
                    "max: {counted} runs, and the comparison's cells may have at most {max}"
                ));
            } else {
                states[i].stopped = None;
            }
        }
        Ok(vec![Comparison {
            base: self.a,
            other: self.b,
            points: 1,
            decided: None,
            asked: Some(format!(
                "`{}` against `{}`",
                spec.cells[self.b].key(),
                spec.cells[self.a].key()
            )),
        }])
    }
}

/// Whether the partner of cell `i` in `c` stopped because a run failed or did not
/// report (the comparison can then never be decided and does not hold `i` back).
fn partner_failed(c: &Comparison, states: &[CellState], i: usize) -> bool {
    let partner = if c.base == i { c.other } else { c.base };
    states[partner].ended_without_data()
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
    if run.status == RunStatus::DidNotReport {
        // Every later run would wait out the same timeout beside the same neighbour.
        let error = run.error.as_deref().unwrap_or_default();
        return Some(format!(
            "did not report: {} run {}: {}",
            if run.warmup { "warm-up" } else { "counted" },
            run.repetition,
            error.strip_prefix(DNR_PREFIX).unwrap_or(error)
        ));
    }
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
    use crate::spec::{HostFacts, Source};
    use isolab_stats::VerdictRule;

    /// Three cells without a baseline (workload a, a2, b; A/A/B), at most `max` runs.
    fn aab(max: u32) -> ExperimentSpec {
        let mut text = format!("[experiment]\nname = \"aab\"\nrepetitions = {{ warmup = 0, min = 3, max = {max} }}\n[matrix]\nworkload = [\"a\", \"a2\", \"b\"]\n");
        for w in ["a", "a2", "b"] {
            text.push_str(&format!(
                "[workload.{w}]\ncommand = \"true\"\nparser = \"time\"\n"
            ));
        }
        let host = HostFacts {
            cpus: "0-1".parse().unwrap(),
            storage: Some(crate::spec::StorageSupport {
                device_mapper: true,
                btrfs: true,
            }),
        };
        ExperimentSpec::parse(Source::new("aab.toml", text), &host).unwrap()
    }

    /// A cell that ran `rounds` rounds from round 0, value `f(round)` each (a wall
    /// time: lower is better), stopped for `stopped`.
    fn ran(rounds: u32, f: impl Fn(u32) -> f64, stopped: Option<&str>) -> CellState {
        CellState {
            warmups: 0,
            counted: rounds,
            values: (0..rounds).map(|r| (r, f(r))).collect(),
            direction: Some(Direction::Lower),
            stopped: stopped.map(str::to_owned),
            ..CellState::default()
        }
    }

    /// ±1% of noise, different in every round and cell.
    fn noisy(base: f64, cell: u32) -> impl Fn(u32) -> f64 {
        move |r| base * (1.0 + ((f64::from(r * 3 + cell) * 0.618_034).fract() - 0.5) * 0.02)
    }

    const STABLE: Option<&str> = Some("stable: CV of wall_time 0.50% ≤ target 5.00% after 5 runs");

    #[test]
    fn until_decided_runs_only_its_two_cells_and_decides_their_comparison() {
        let spec = aab(30);
        let until = UntilDecided { a: 0, b: 2 };
        // After 5 rounds every cell stopped on its CV: too few rounds to decide.
        let mut states = vec![
            ran(5, noisy(1.0, 0), STABLE),
            ran(5, noisy(1.0, 1), STABLE),
            ran(5, noisy(1.03, 2), STABLE),
        ];
        let mut comparisons = until.focus(1, &spec, &mut states).unwrap();
        assert_eq!((comparisons[0].base, comparisons[0].other), (0, 2));
        assert_eq!(states[0].stopped, None, "A is taken up again");
        assert_eq!(states[2].stopped, None, "B is taken up again");
        assert_eq!(
            states[1].stopped.as_deref(),
            STABLE,
            "A2 sits out, as stored"
        );
        assert!(decide_round(3, &VerdictRule::default(), &mut comparisons, &states).is_empty());

        // Rounds go on for A and B only: a 3% slowdown of B with ±1% noise is called
        // worse once the signed-rank test passes the interim level (11 rounds).
        let mut rounds = 5;
        let stops = loop {
            rounds += 1;
            states[0] = ran(rounds, noisy(1.0, 0), None);
            states[2] = ran(rounds, noisy(1.03, 2), None);
            let stops = decide_round(3, &VerdictRule::default(), &mut comparisons, &states);
            if !stops.is_empty() || rounds == 30 {
                break stops;
            }
        };
        assert_eq!(rounds, 11);
        assert_eq!(comparisons[0].decided, Some(Verdict::Worse));
        let cells: Vec<usize> = stops.iter().map(|(i, _)| *i).collect();
        assert_eq!(cells, [0, 2], "A and B stop together, A2 is not touched");
        assert_eq!(
            stops[1].1,
            "decided: worse (`workload=b` against `workload=a`) after 11 runs, continued until decided"
        );
    }

    #[test]
    fn until_decided_calls_identical_cells_equivalent() {
        let spec = aab(30);
        let mut states = vec![
            ran(12, noisy(1.0, 0), STABLE),
            ran(12, noisy(1.0, 1), STABLE),
            ran(12, noisy(1.0, 2), STABLE),
        ];
        let until = UntilDecided { a: 0, b: 1 };
        let mut comparisons = until.focus(1, &spec, &mut states).unwrap();
        // Stored runs enough to decide: the runner stops both before any run.
        let stops = decide_round(3, &VerdictRule::default(), &mut comparisons, &states);
        assert_eq!(comparisons[0].decided, Some(Verdict::Equivalent));
        assert_eq!(stops.len(), 2);
        assert!(stops[0]
            .1
            .starts_with("decided: ≈ (`workload=a2` against `workload=a`)"));
    }

    #[test]
    fn until_decided_stops_at_max_and_refuses_what_cannot_be_decided() {
        // A cell at max: neither side runs (a side alone pairs with nothing).
        let spec = aab(8);
        let mut states = vec![
            ran(8, noisy(1.0, 0), Some("max: 8 runs reached")),
            ran(5, noisy(1.0, 1), STABLE),
            ran(5, noisy(1.03, 2), STABLE),
        ];
        let until = UntilDecided { a: 0, b: 2 };
        until.focus(1, &spec, &mut states).unwrap();
        assert!(states.iter().all(|s| s.stopped.is_some()));
        // Below max, `max` stops the continued cells as it stops compared cells.
        assert!(stop_reason(8, Some(0.0), 3, 8, None, "wall_time")
            .unwrap()
            .starts_with("max: 8 runs reached before every comparison was decided"));

        // Another cell unfinished (an interrupted experiment): finish it first.
        let mut states = vec![
            ran(5, noisy(1.0, 0), STABLE),
            ran(4, noisy(1.0, 1), None),
            ran(5, noisy(1.03, 2), STABLE),
        ];
        let err = until.focus(1, &spec, &mut states).unwrap_err();
        assert_eq!(
            err.to_string(),
            "experiment 1 has cells that have not finished (`workload=a2`): finish it first with `isolab run --resume 1`, then continue the comparison until it is decided"
        );
        // A side that failed cannot be decided.
        let mut states = vec![
            ran(5, noisy(1.0, 0), STABLE),
            ran(5, noisy(1.0, 1), STABLE),
            ran(
                1,
                noisy(1.03, 2),
                Some("failed: counted run 2: exit status 1"),
            ),
        ];
        let err = until.focus(1, &spec, &mut states).unwrap_err();
        assert!(
            err.to_string().starts_with("cell `workload=b` of experiment 1 stopped because a run failed or did not report (failed: counted run 2: exit status 1)"),
            "{err}"
        );
    }

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
