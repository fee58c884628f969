//! Attribution: for a decided effect (a point judged worse or better), which recorded
//! counters moved with it and which [`Mechanism`] they point to.
//!
//! Every counter (a [`Telemetry`] key whose [`role`] is a counter) recorded in at least
//! two counted runs of both cells is tested exactly as the metric was
//! ([`isolab_stats::test_change`], the part of the metric's test that gives p and
//! the change: paired by round when both cells shared at least
//! [`isolab_stats::MIN_PAIRS`] rounds, else unpaired), with Benjamini-Hochberg across
//! the counters of that cell pair. A counter **moved** when its adjusted p is below α
//! and its relative change is beyond the noise threshold Δ (the verdict rule of a
//! metric), or, when it was 0 on side A, when it is significantly above 0 on B.
//!
//! Moved counters are ranked by effect size in tiers. Counters of causes come before
//! counters of consequences: the work the subject did (its cpu time, which falls when it
//! waits and rises when it spins) and its start-up phases say *that* it ran differently,
//! not why, so they rank last ([`Mechanism::is_context`]). Among causes, the counters of
//! a limit the two sides set differently come first ([`varied`]): the experiment changed
//! that limit, and its counters moving the effect's way show it bit. The stalls it brings
//! elsewhere follow it: a memory limit below the working set evicts pages that are read
//! back from the disk, so io pressure rises with memory pressure, and by about as many
//! seconds, though the disk is the same on both sides. Within each, counters of time
//! (stall time from PSI, throttled time: unit seconds) come first, by how many seconds
//! per run they changed, `|mean_B − mean_A|`: time the workload lost to (or won from)
//! the mechanism, directly comparable with a change of its wall time. The other
//! counters follow by the absolute log ratio of their means, `|ln(mean_B / mean_A)|`
//! (one that appears from 0, or vanishes, first among them); ties by q. A counter recorded on one side only (perf counters that do not follow a
//! workload into some engines, a VM's QEMU counters) is listed as *not comparable*,
//! never as unchanged; where no counter moved, the attribution says so.
//!
//! A counter is named as a **cause** only when it moved the way the effect went
//! ([`crate::mechanism::harm`]): more throttling, stalls, contention, faults,
//! migrations or interrupts on the worse side (less achieved load there). One that
//! moved the other way (less throttling on the worse side) cannot have made it worse: it
//! is listed apart, as a difference between the configurations ([`Attribution::against`]),
//! and when nothing moved the effect's way the line says so, with the limits both sides
//! read back where they differ (a quota over two cpus against one pinned cpu).

use std::collections::BTreeMap;

use isolab_stats::{
    benjamini_hochberg, pairs_by_round, ChangeTest, Direction, Interval, Method, PendingChange,
    PointData, VerdictRule,
};
use isolab_store::{RunRecord, Telemetry};

use crate::mechanism::{harm, role, Harm, Mechanism, Role};

/// Which side of a compared cell pair did worse, from its decided points.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorseSide {
    /// A (the first side) did worse: B's decided points are better.
    A,
    /// B did worse.
    B,
}

/// Each counter's observations with the round of each, by stored name.
pub type Counters = BTreeMap<String, Vec<(u32, f64)>>;

/// The counters of `runs` (counted runs of one cell): every telemetry value whose key
/// is a counter ([`Role::Counter`]); settings and names this version does not know are
/// left out, and so are values that are not finite. A key recorded twice in one run
/// counts once: its first finite value.
///
/// Which names are counters is worked out once per list of names, not per value: the
/// runs of a cell share one ([`isolab_store::TelemetrySet::shares_names`]), so over a
/// large experiment this is a walk over the values alone.
pub fn counters<'a>(runs: impl IntoIterator<Item = &'a RunRecord>) -> Counters {
    // Each counter's name and observations, in the order first met.
    let mut out: Vec<(&'a str, Vec<(u32, f64)>)> = Vec::new();
    // For the current list of names: the counter each position feeds.
    let mut current: Option<(&'a isolab_store::TelemetrySet, Vec<Option<usize>>)> = None;
    // The run each counter last took a value of (a key recorded twice counts once).
    let mut taken: Vec<usize> = Vec::new();
    let runs = runs.into_iter();
    // A counter's observations: one a run, mostly.
    let expected = runs.size_hint().0;
    for (n, run) in runs.enumerate() {
        let telemetry = &run.telemetry;
        if !matches!(&current, Some((seen, _)) if seen.shares_names(telemetry)) {
            let slots = telemetry
                .names()
                .iter()
                .map(|name| {
                    let key = Telemetry::parse(name)?;
                    if role(&key) == Role::Excluded {
                        return None;
                    }
                    let slot = out.iter().position(|(c, _)| c == name).unwrap_or_else(|| {
                        out.push((name, Vec::with_capacity(expected)));
                        taken.push(usize::MAX);
                        out.len() - 1
                    });
                    Some(slot)
                })
                .collect();
            current = Some((telemetry, slots));
        }
        let Some((_, slots)) = &current else {
            continue;
        };
        for (slot, &value) in slots.iter().zip(telemetry.values()) {
            let Some(slot) = *slot else { continue };
            if value.is_finite() && taken[slot] != n {
                taken[slot] = n;
                out[slot].1.push((run.round, value));
            }
        }
    }
    out.into_iter()
        .filter(|(_, values)| !values.is_empty())
        .map(|(name, values)| (name.to_owned(), values))
        .collect()
}

/// A counter that moved with an effect.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Moved {
    /// The stored telemetry name.
    pub counter: String,
    /// Its unit symbol (empty for counts).
    pub unit: String,
    /// What it points to.
    pub mechanism: Mechanism,
    /// Its mean per run on side A.
    pub mean_a: f64,
    /// Its mean per run on side B.
    pub mean_b: f64,
    /// `mean_b / mean_a`; `None` when A's mean is 0.
    pub ratio: Option<f64>,
    /// Relative change of B against A (Hodges-Lehmann shift over A's median, positive
    /// = more), as a point's change; `None` when A's median is 0.
    pub change: Option<f64>,
    /// Its confidence interval.
    pub change_ci: Option<Interval>,
    /// Whether the counter is a time (seconds), ranked by the seconds it changed.
    pub seconds: bool,
    /// Paired by round or not.
    pub method: Method,
    /// Its p-value before the adjustment.
    pub p: f64,
    /// Benjamini-Hochberg adjusted p across the counters of this attribution.
    pub q: f64,
}

impl Moved {
    /// The effect size it is ranked by within its tier: for a time, the seconds per
    /// run it changed; otherwise `|ln(mean_b / mean_a)|`, infinite when one side's mean
    /// is 0.
    pub fn effect(&self) -> f64 {
        if self.seconds {
            (self.mean_b - self.mean_a).abs()
        } else if self.mean_a > 0.0 && self.mean_b > 0.0 {
            (self.mean_b / self.mean_a).ln().abs()
        } else {
            f64::INFINITY
        }
    }
}

/// What moved with the effects of one cell pair (B against A).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Attribution {
    /// The levels the two cells share (the comparison's match key).
    pub levels: Vec<(String, String)>,
    /// Counters that moved the way the effect went, ranked (see the module
    /// documentation): its candidate causes.
    pub moved: Vec<Moved>,
    /// Counters that moved the other way (less throttling on the worse side): differences
    /// between the two configurations that cannot have caused the effect.
    pub against: Vec<Moved>,
    /// Which side did worse (`None` when its decided points go both ways: then every
    /// counter that moved is in `moved`).
    pub worse: Option<WorseSide>,
    /// The limits each side read back (A's, B's summaries), when they differ.
    pub limits: Option<(String, String)>,
    /// The mechanisms whose limits the two sides set differently ([`varied`]): their
    /// counters rank first among causes.
    pub varied: Vec<Mechanism>,
    /// When none moved: the counters that would have, judged by their p before the
    /// false-discovery adjustment (p < α, change beyond Δ), ranked the same way. With
    /// few runs the adjustment over many counters lets nothing through (6 pairs give
    /// p ≥ 0.031 at best); these say where to look, not what is shown.
    pub unadjusted: Vec<Moved>,
    /// Counters recorded on both sides and tested.
    pub tested: usize,
    /// Counters recorded on one side only: not comparable.
    pub not_comparable: Vec<String>,
}

impl Attribution {
    /// The mechanism the top counter points to.
    pub fn mechanism(&self) -> Option<Mechanism> {
        self.moved.first().map(|m| m.mechanism)
    }
}

/// The sides of one attributed cell pair: which did worse, and the limits each read back.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Effect {
    /// Which side did worse, when its decided points agree.
    pub worse: Option<WorseSide>,
    /// A's and B's limits, as their runs' `limits.summary` read them back.
    pub limits: (Option<String>, Option<String>),
    /// The mechanisms whose limits the two sides set differently ([`varied`]).
    pub varied: Vec<Mechanism>,
}

/// The limits of the run's own cgroup (an `applied` object of its stored limits) and the
/// mechanism each belongs to. The others (pids, memory nodes, huge pages, unified
/// files) point to no mechanism.
const LIMIT_MECHANISMS: [(&str, Mechanism); 7] = [
    ("cpu", Mechanism::Quota),
    ("cpuset", Mechanism::Placement),
    ("cpu_weight", Mechanism::CpuContention),
    ("memory_max", Mechanism::Memory),
    ("memory_swap_max", Mechanism::Memory),
    ("memory_reservation", Mechanism::Memory),
    ("io", Mechanism::Disk),
];

/// The mechanisms whose limits two runs' stored limits (`a`, `b`: a run's `limits`)
/// set differently: the subject's `applied` limits, or, for a stack, those of each
/// component both sides have. A limit unset on one side and set on the other differs;
/// limits neither side stored (failed runs, old stores) differ in nothing.
pub fn varied(a: &serde_json::Value, b: &serde_json::Value) -> Vec<Mechanism> {
    let mut applied: Vec<(&serde_json::Value, &serde_json::Value)> = Vec::new();
    if let (Some(la), Some(lb)) = (a.get("applied"), b.get("applied")) {
        applied.push((la, lb));
    }
    if let (Some(ca), Some(cb)) = (
        a.get("components").and_then(|c| c.as_object()),
        b.get("components").and_then(|c| c.as_object()),
    ) {
        for (name, component) in ca {
            if let (Some(la), Some(lb)) = (
                component.get("applied"),
                cb.get(name).and_then(|c| c.get("applied")),
            ) {
                applied.push((la, lb));
            }
        }
    }
    // A field's value; an absent one is unset (serde skips some when unset), and so is an
    // empty list (no io throttle).
    fn value<'v>(limits: &'v serde_json::Value, field: &str) -> Option<&'v serde_json::Value> {
        limits.get(field).filter(|v| {
            !v.is_null() && !matches!(v, serde_json::Value::Array(list) if list.is_empty())
        })
    }
    let mut out: Vec<Mechanism> = Vec::new();
    for (la, lb) in applied {
        for (field, mechanism) in LIMIT_MECHANISMS {
            if value(la, field) != value(lb, field) && !out.contains(&mechanism) {
                out.push(mechanism);
            }
        }
    }
    out
}

/// Tests every counter of `a` and `b` (the counted runs of cells A and B) as a point is
/// tested, pairing by round when `pairable`, and ranks those that moved: the way
/// `effect` went as causes, the other way apart.
pub fn attribute(
    levels: &[(String, String)],
    a: &Counters,
    b: &Counters,
    pairable: bool,
    rule: &VerdictRule,
    level: f64,
    effect: &Effect,
) -> Attribution {
    let mut not_comparable: Vec<String> = Vec::new();
    // Each tested counter's name, means, p and, when p is below α, its whole test. Only
    // such a counter can move: its adjusted p is never below its p (Benjamini-Hochberg
    // multiplies each p by m/rank ≥ 1 and takes minima of such products), and a
    // counter moves only when that, or its p where nothing moved, is below α. The
    // others' change is never read, and is not computed.
    type Tested = (String, f64, f64, f64, Option<ChangeTest>);
    let mut tested: Vec<Tested> = Vec::new();
    for name in a.keys().chain(b.keys().filter(|k| !a.contains_key(*k))) {
        let (Some(va), Some(vb)) = (a.get(name), b.get(name)) else {
            not_comparable.push(name.clone());
            continue;
        };
        if va.len() < 2 || vb.len() < 2 {
            not_comparable.push(name.clone());
            continue;
        }
        let values = |v: &[(u32, f64)]| v.iter().map(|(_, x)| *x).collect::<Vec<f64>>();
        let (xa, xb) = (values(va), values(vb));
        let mean = |x: &[f64]| x.iter().sum::<f64>() / x.len() as f64;
        let (mean_a, mean_b) = (mean(&xa), mean(&xb));
        // The same value in every run of both cells (a counter that stayed 0): nothing
        // to test.
        // (Its p is 1, and a change of 0 is never material: no test to finish.)
        if xa.iter().chain(&xb).all(|x| *x == xa[0]) {
            tested.push((name.clone(), mean_a, mean_b, 1.0, None));
            continue;
        }
        let pairs = if pairable {
            pairs_by_round(va, vb)
        } else {
            Vec::new()
        };
        let data = PointData {
            a: &xa,
            b: &xb,
            pairs: &pairs,
            direction: Direction::Lower,
        };
        if let Some(pending) = PendingChange::of(data) {
            let p = pending.p();
            let test = (p < rule.alpha).then(|| pending.finish(level));
            tested.push((name.clone(), mean_a, mean_b, p, test));
        }
    }
    let ps: Vec<f64> = tested.iter().map(|(_, _, _, p, _)| *p).collect();
    let qs = benjamini_hochberg(&ps);
    let candidate = |((name, mean_a, mean_b, p, t), q): (&Tested, f64), adjusted: bool| {
        let judged = if adjusted { q } else { *p };
        // (A NaN p or q is not significant.)
        if judged.is_nan() || judged >= rule.alpha {
            return None;
        }
        // Below α, so its p is too (see `tested`): its test was made.
        let t = t.as_ref()?;
        let material = match t.change {
            Some(c) => c.abs() > rule.noise,
            // A's median is 0: material when B's is not.
            None => *mean_b != *mean_a,
        };
        if !material {
            return None;
        }
        let key = Telemetry::parse(name)?;
        let Role::Counter(mechanism) = role(&key) else {
            return None;
        };
        Some(Moved {
            counter: name.clone(),
            unit: key.unit().symbol().to_owned(),
            mechanism,
            mean_a: *mean_a,
            mean_b: *mean_b,
            ratio: (*mean_a != 0.0).then(|| mean_b / mean_a),
            change: t.change,
            change_ci: t.change_ci,
            seconds: key.unit() == isolab_store::Unit::Seconds,
            method: t.method,
            p: t.p,
            q,
        })
    };
    let varied = |m: &Moved| effect.varied.contains(&m.mechanism);
    let rank = |list: &mut Vec<Moved>| {
        list.sort_by(|x, y| {
            x.mechanism
                .is_context()
                .cmp(&y.mechanism.is_context())
                .then(varied(y).cmp(&varied(x)))
                .then(y.seconds.cmp(&x.seconds))
                .then(y.effect().total_cmp(&x.effect()))
                .then(x.q.total_cmp(&y.q))
                .then(x.counter.cmp(&y.counter))
        })
    };
    // Whether a moved counter went the effect's way.
    let causal = |m: &Moved| {
        let Some(worse) = effect.worse else {
            return true;
        };
        let (on_worse, on_better) = match worse {
            WorseSide::A => (m.mean_a, m.mean_b),
            WorseSide::B => (m.mean_b, m.mean_a),
        };
        match Telemetry::parse(&m.counter).map_or(Harm::More, |k| harm(&k)) {
            Harm::More => on_worse > on_better,
            Harm::Less => on_worse < on_better,
            Harm::Either => true,
        }
    };
    let (mut moved, mut against): (Vec<Moved>, Vec<Moved>) = tested
        .iter()
        .zip(qs.iter().copied())
        .filter_map(|c| candidate(c, true))
        .partition(causal);
    rank(&mut moved);
    rank(&mut against);
    let mut unadjusted: Vec<Moved> = if moved.is_empty() {
        tested
            .iter()
            .zip(qs.iter().copied())
            .filter_map(|c| candidate(c, false))
            .filter(causal)
            .collect()
    } else {
        Vec::new()
    };
    rank(&mut unadjusted);
    let limits = match &effect.limits {
        (Some(la), Some(lb)) if la != lb => Some((la.clone(), lb.clone())),
        _ => None,
    };
    Attribution {
        levels: levels.to_vec(),
        moved,
        against,
        worse: effect.worse,
        limits,
        varied: effect.varied.clone(),
        unadjusted,
        tested: tested.len(),
        not_comparable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64]) -> Vec<(u32, f64)> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| (i as u32, *v))
            .collect()
    }

    fn side(entries: &[(&str, &[f64])]) -> Counters {
        entries
            .iter()
            .map(|(n, v)| (n.to_string(), series(v)))
            .collect()
    }

    #[test]
    fn throttling_from_zero_ranks_first_and_steady_counters_do_not_move() {
        let a = side(&[
            ("nr_throttled", &[0.0; 8]),
            (
                "cpu_migrations",
                &[40.0, 42.0, 41.0, 39.0, 40.0, 43.0, 41.0, 40.0],
            ),
            ("cpu_usage_s", &[1.0, 1.01, 0.99, 1.0, 1.02, 1.0, 0.98, 1.0]),
            ("context_switches", &[100.0; 8]),
        ]);
        let b = side(&[
            (
                "nr_throttled",
                &[500.0, 510.0, 490.0, 505.0, 498.0, 502.0, 507.0, 495.0],
            ),
            (
                "cpu_migrations",
                &[80.0, 85.0, 82.0, 79.0, 81.0, 84.0, 83.0, 80.0],
            ),
            ("cpu_usage_s", &[1.0, 0.99, 1.01, 1.0, 1.0, 1.01, 0.99, 1.0]),
            ("context_switches", &[100.0; 8]),
            (
                "qemu_cpu_usage_s",
                &[3.0, 3.1, 3.0, 3.2, 3.0, 3.1, 3.0, 3.1],
            ),
        ]);
        let at = attribute(
            &[],
            &a,
            &b,
            true,
            &VerdictRule::default(),
            0.95,
            &Effect::default(),
        );
        let names: Vec<&str> = at.moved.iter().map(|m| m.counter.as_str()).collect();
        assert_eq!(names, ["nr_throttled", "cpu_migrations"], "{at:?}");
        assert_eq!(at.mechanism(), Some(Mechanism::Quota));
        assert_eq!(at.tested, 4);
        assert_eq!(at.not_comparable, ["qemu_cpu_usage_s"]);
        assert_eq!(at.moved[0].ratio, None);
        assert!((at.moved[1].ratio.unwrap() - 2.0).abs() < 0.05);
        let line = crate::table::attribution_line(&at);
        assert!(line.starts_with("why: nr_throttled 0 → 500.9 (cpu quota); cpu_migrations 40.75 → 81.75 (2.01×, placement) — the CFS quota"), "{line}");
        assert!(
            line.ends_with("not comparable (recorded on one side only): qemu_cpu_usage_s"),
            "{line}"
        );
        assert_eq!(
            crate::table::attribution_short(&at),
            "cpu quota (nr_throttled)"
        );
    }

    /// The review's case: B (a pinned cpu) did worse than A (a quota over both cpus), and
    /// A was throttled where B was not. Less throttling cannot make B worse: it is a
    /// difference, not a cause, and the line says that nothing moved the effect's way,
    /// with the limits each side read back.
    #[test]
    fn a_counter_that_moved_against_the_effect_is_not_named_its_cause() {
        let a = side(&[
            ("throttled_s", &[2.6, 2.7, 2.65, 2.7, 2.68, 2.66, 2.7, 2.64]),
            ("cpu_usage_s", &[1.0, 1.01, 0.99, 1.0, 1.02, 1.0, 0.98, 1.0]),
        ]);
        let b = side(&[
            ("throttled_s", &[0.0; 8]),
            ("cpu_usage_s", &[1.0, 0.99, 1.01, 1.0, 1.0, 1.01, 0.99, 1.0]),
        ]);
        let effect = Effect {
            worse: Some(WorseSide::B),
            limits: (
                Some("quota 1.00 cpu (100ms/100ms), cpus 0-1, memory 1 GiB".into()),
                Some("no quota, cpus 1, memory 1 GiB".into()),
            ),
            varied: vec![Mechanism::Quota, Mechanism::Placement],
        };
        let at = attribute(&[], &a, &b, true, &VerdictRule::default(), 0.95, &effect);
        assert!(at.moved.is_empty(), "{at:?}");
        assert_eq!(at.against.len(), 1);
        assert_eq!(at.against[0].counter, "throttled_s");
        let line = crate::table::attribution_line(&at);
        assert_eq!(
            line,
            "no recorded counter moved the way the effect went (2 tested); moved the other way, so not a cause: throttled_s 2.666 → 0 s (cpu quota); the limits read back differ: quota 1.00 cpu (100ms/100ms), cpus 0-1, memory 1 GiB against no quota, cpus 1, memory 1 GiB"
        );
        // Had A done worse, the quota's throttling would be its cause.
        let a_worse = Effect {
            worse: Some(WorseSide::A),
            ..effect
        };
        let at = attribute(&[], &a, &b, true, &VerdictRule::default(), 0.95, &a_worse);
        assert_eq!(at.mechanism(), Some(Mechanism::Quota));
        assert!(at.against.is_empty());
    }

    /// The failure CI met: a memory limit below the working set (48 MiB against 1 GiB)
    /// evicts the file a scan reads, so the scan stalls on memory (0 → 0.061 s a run) and
    /// waits on the disk reading the pages back (0.109 → 0.175 s: 0.066 s more). The disk
    /// is the same on both sides; the memory limit is what differs, and it comes first.
    #[test]
    fn a_limit_the_sides_set_differently_ranks_its_counters_first() {
        let a = side(&[
            (
                "psi_io_some_s",
                &[0.108, 0.110, 0.107, 0.109, 0.108, 0.111, 0.109, 0.108],
            ),
            ("psi_memory_some_s", &[0.0; 8]),
        ]);
        let b = side(&[
            (
                "psi_io_some_s",
                &[0.174, 0.176, 0.175, 0.173, 0.177, 0.175, 0.174, 0.176],
            ),
            (
                "psi_memory_some_s",
                &[0.060, 0.062, 0.061, 0.060, 0.063, 0.061, 0.062, 0.060],
            ),
        ]);
        let limits = |memory: &str| {
            serde_json::json!({
                "applied": { "cpu": null, "cpuset": "1", "memory_max": memory, "io": [] },
                "summary": format!("no quota, cpus 1, memory {memory}"),
            })
        };
        let varied = varied(&limits("1 GiB"), &limits("48 MiB"));
        assert_eq!(varied, [Mechanism::Memory]);
        let effect = Effect {
            worse: Some(WorseSide::B),
            varied,
            ..Effect::default()
        };
        let at = attribute(&[], &a, &b, true, &VerdictRule::default(), 0.95, &effect);
        let names: Vec<&str> = at.moved.iter().map(|m| m.counter.as_str()).collect();
        assert_eq!(names, ["psi_memory_some_s", "psi_io_some_s"], "{at:?}");
        assert_eq!(at.mechanism(), Some(Mechanism::Memory));
        let line = crate::table::attribution_line(&at);
        assert!(
            line.ends_with("or it stalled on memory (a limit the two sides set differently)"),
            "{line}"
        );
        // With the same limits on both sides, the seconds decide: the disk's 0.066 s.
        let same = Effect {
            worse: Some(WorseSide::B),
            ..Effect::default()
        };
        let at = attribute(&[], &a, &b, true, &VerdictRule::default(), 0.95, &same);
        assert_eq!(at.mechanism(), Some(Mechanism::Disk), "{at:?}");
    }

    #[test]
    fn the_limits_that_differ_are_read_from_the_subject_or_each_component() {
        let run =
            |applied: serde_json::Value| serde_json::json!({ "applied": applied, "summary": "-" });
        // Unset and absent are the same; an empty io list is none set.
        assert!(varied(
            &run(serde_json::json!({ "cpu": null, "io": [] })),
            &run(serde_json::json!({}))
        )
        .is_empty());
        assert_eq!(
            varied(
                &run(serde_json::json!({ "cpu": { "quota": 50000 }, "cpuset": "0-1" })),
                &run(serde_json::json!({ "cpuset": "1", "pids_max": 64 }))
            ),
            [Mechanism::Quota, Mechanism::Placement]
        );
        let stack = |rate: u64| {
            serde_json::json!({ "components": {
                "db": { "applied": { "io": [{ "device": "254:0", "read_bps": rate }] } },
                "app": { "applied": { "memory_max": "1 GiB" } },
            }})
        };
        assert_eq!(varied(&stack(1 << 20), &stack(2 << 20)), [Mechanism::Disk]);
        assert!(varied(&stack(1 << 20), &stack(1 << 20)).is_empty());
        // Nothing stored (a failed run, an old store): nothing differs.
        assert!(varied(&serde_json::Value::Null, &run(serde_json::json!({}))).is_empty());
    }

    #[test]
    fn nothing_moved_is_said_and_settings_are_not_counters() {
        let a = side(&[("cpu_usage_s", &[1.0, 1.1, 0.9, 1.0, 1.05, 0.95])]);
        let b = side(&[("cpu_usage_s", &[1.0, 0.9, 1.1, 1.05, 0.95, 1.0])]);
        let at = attribute(
            &[],
            &a,
            &b,
            false,
            &VerdictRule::default(),
            0.95,
            &Effect::default(),
        );
        assert!(at.moved.is_empty());
        assert_eq!(
            crate::table::attribution_line(&at),
            "no recorded counter explains it (1 tested)"
        );
        assert_eq!(crate::table::attribution_short(&at), "nothing moved");
    }

    #[test]
    fn a_long_not_comparable_list_is_cut_to_four_and_counted() {
        let a = side(&[("cpu_usage_s", &[1.0, 1.1, 0.9, 1.0])]);
        let mut b = a.clone();
        for name in ["q1", "q2", "q3", "q4", "q5", "q6"] {
            b.insert(name.into(), series(&[1.0, 2.0]));
        }
        let at = attribute(
            &[],
            &a,
            &b,
            false,
            &VerdictRule::default(),
            0.95,
            &Effect::default(),
        );
        assert_eq!(at.not_comparable.len(), 6);
        let line = crate::table::attribution_line(&at);
        assert!(
            line.ends_with("not comparable (recorded on one side only): q1, q2, q3, q4 and 2 more"),
            "{line}"
        );
    }

    #[test]
    fn with_six_runs_a_clear_change_is_named_before_the_adjustment_not_as_moved() {
        // Six paired rounds: the smallest p is 2/2⁶ = 0.031, and over 20 counters the
        // false-discovery control lets nothing through. 19 counters stay as they were.
        let steady = [
            "cpu_usage_s",
            "cpu_user_s",
            "cpu_system_s",
            "context_switches",
            "cpu_migrations",
            "ctx_switches_voluntary",
            "ctx_switches_involuntary",
            "minor_faults",
            "major_faults",
            "interrupts",
            "softirqs",
            "memory_major_faults",
            "psi_cpu_some_s",
            "psi_cpu_full_s",
            "psi_io_some_s",
            "psi_io_full_s",
            "psi_memory_some_s",
            "psi_memory_full_s",
            "nr_periods",
        ];
        let same = series(&[10.0, 11.0, 10.5, 10.2, 10.8, 10.1]);
        let mut a = side(&[("nr_throttled", &[420.0, 430.0, 426.0, 424.0, 431.0, 427.0])]);
        let mut b = side(&[("nr_throttled", &[0.0; 6])]);
        for name in steady {
            a.insert(name.into(), same.clone());
            b.insert(name.into(), same.clone());
        }
        let at = attribute(
            &[],
            &a,
            &b,
            true,
            &VerdictRule::default(),
            0.95,
            &Effect::default(),
        );
        assert!(at.moved.is_empty(), "{at:?}");
        assert_eq!(at.tested, 20);
        assert_eq!(at.unadjusted.len(), 1, "{at:?}");
        assert_eq!(at.unadjusted[0].counter, "nr_throttled");
        assert!((at.unadjusted[0].p - 0.03125).abs() < 1e-9);
        let line = crate::table::attribution_line(&at);
        assert!(
            line.starts_with("no counter moved significantly after the false-discovery control over 20 counters (too few runs to tell); before it (p < α): nr_throttled 426.3 → 0 (cpu quota) [p 0.03125] — cpu quota?"),
            "{line}"
        );
        assert_eq!(
            crate::table::attribution_short(&at),
            "cpu quota? (nr_throttled, unadjusted)"
        );
    }

    /// A counted run of round `round` with `telemetry`.
    fn run_with(round: u32, telemetry: isolab_store::TelemetrySet) -> RunRecord {
        RunRecord {
            id: round as i64,
            cell: 0,
            repetition: round,
            warmup: false,
            round,
            status: isolab_store::RunStatus::Ok,
            exit_code: Some(0),
            started_at: std::time::SystemTime::UNIX_EPOCH,
            wall: std::time::Duration::from_secs(1),
            error: None,
            limits: serde_json::Value::Null.into(),
            metrics: vec![],
            telemetry,
            notes: vec![],
        }
    }

    #[test]
    fn counters_of_runs_keep_counters_only() {
        let run = |round: u32, target: f64, throttled: f64| {
            run_with(
                round,
                vec![
                    ("wall_s".to_string(), 1.0),
                    ("neighbour_target_util_pct".to_string(), target),
                    ("nr_throttled".to_string(), throttled),
                    ("from_the_future".to_string(), 3.0),
                ]
                .into(),
            )
        };
        let runs = [run(0, 50.0, 3.0), run(1, 50.0, 4.0)];
        let c = counters(runs.iter());
        assert_eq!(c.keys().collect::<Vec<_>>(), ["nr_throttled"]);
        assert_eq!(c["nr_throttled"], [(0, 3.0), (1, 4.0)]);
    }

    #[test]
    fn a_counter_recorded_twice_counts_once_with_its_first_finite_value() {
        let run = run_with;
        let twice: isolab_store::TelemetrySet = vec![
            ("nr_throttled".to_string(), f64::NAN),
            ("cpu_migrations".to_string(), 2.0),
            ("nr_throttled".to_string(), 5.0),
            ("nr_throttled".to_string(), 6.0),
        ]
        .into();
        let other: isolab_store::TelemetrySet = vec![("cpu_migrations".to_string(), 9.0)].into();
        // Runs 0 and 1 share one list of names (a clone), run 2 has its own.
        let runs = [run(0, twice.clone()), run(1, twice), run(2, other)];
        let c = counters(runs.iter());
        assert_eq!(c["nr_throttled"], [(0, 5.0), (1, 5.0)]);
        assert_eq!(c["cpu_migrations"], [(0, 2.0), (1, 2.0), (2, 9.0)]);
        assert_eq!(c.len(), 2);
    }
}
