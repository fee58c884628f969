//! Advice: the seeds' best practices checked on an experiment's own data
//! (`isolab advise EXP`).
//!
//! Every [`Rule`] states a practice, the seed it comes from and the data it needs. Its
//! check returns one [`Outcome`]: the practice **applies** here (the data goes its way,
//! with the cells, effects and verdicts that show it), **does not apply** (the data
//! goes against it, or shows no difference), or **cannot be checked** (which factor or
//! level is missing, or why the data cannot tell). Verdicts are those of `isolab
//! compare` ([`crate::compare`]): the same test, pairing and false-discovery control.
//!
//! A workload is **CPU-bound** when its subject kept at least 80% of its cpus busy
//! (median over its counted runs of `cpu_usage_s / (wall_s × shape_cpus)`, the shape's
//! cpus as the run read them back), **IO-bound** below 50% (it waited on I/O, the
//! network or clients more than it computed), mixed between; seed 002 splits its
//! workloads the same way (FFmpeg against WordPress and Cassandra).

use std::collections::BTreeMap;

use isolab_stats::Verdict;

use crate::analysis::Analysis;
use crate::compare::{compare, CompareOptions, Side};
use crate::data::ExperimentData;

/// Where a platform level runs its workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Environment {
    /// The host itself (seed 002's BM).
    BareMetal,
    /// A container on the host (CN).
    Container,
    /// A virtual machine; `emulated` when QEMU runs it with TCG.
    Vm {
        /// Software emulation, not virtualisation.
        emulated: bool,
    },
    /// A container inside a virtual machine (VMCN).
    VmContainer {
        /// Software emulation, not virtualisation.
        emulated: bool,
    },
}

impl Environment {
    fn emulated(self) -> bool {
        matches!(
            self,
            Environment::Vm { emulated: true } | Environment::VmContainer { emulated: true }
        )
    }
}

/// What a rule found.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Outcome {
    /// The data goes the practice's way.
    Applies {
        /// The cells, effects and verdicts that show it.
        evidence: Vec<String>,
    },
    /// The data goes against the practice or shows no difference.
    DoesNotApply {
        /// The cells, effects and verdicts that show it.
        evidence: Vec<String>,
    },
    /// The experiment cannot tell.
    CannotCheck {
        /// What is missing (a factor, a level, decided points).
        missing: String,
    },
}

impl Outcome {
    /// `applies`, `does not apply` or `cannot be checked`.
    pub fn word(&self) -> &'static str {
        match self {
            Outcome::Applies { .. } => "applies",
            Outcome::DoesNotApply { .. } => "does not apply",
            Outcome::CannotCheck { .. } => "cannot be checked",
        }
    }
}

/// What a rule reads.
pub struct Input<'a> {
    /// The experiment.
    pub data: &'a ExperimentData,
    /// Its analysis (rows with overheads against its baseline).
    pub analysis: &'a Analysis,
    /// How comparisons are made.
    pub compare: CompareOptions,
    /// The environment of each platform level (every level the cells use), or why it is
    /// not known (the stored spec could not be read).
    pub platforms: Result<BTreeMap<String, Environment>, String>,
    /// Seed 002's multitasking pairs among its workloads (none when the stored spec
    /// could not be read).
    pub multitask: Vec<MultitaskPair>,
}

/// Seed 002's multitasking design (its Fig. 8): two workloads of one experiment that
/// do the same work (the same input, the same amount) as one process and split into
/// several processes started together (`ffmpeg-transcode` and
/// `ffmpeg-transcode-split`); the split one reports how many (`processes`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MultitaskPair {
    /// The workload that does the work as one process.
    pub one_job: String,
    /// The workload that does it as several.
    pub split: String,
}

impl Input<'_> {
    /// The platforms' environments, or what a rule that needs them misses when they are
    /// not known.
    fn platforms(&self) -> Result<&BTreeMap<String, Environment>, String> {
        self.platforms.as_ref().map_err(|why| {
            format!("the platforms of the experiment's stored spec, which cannot be read: {why}")
        })
    }
}

/// One best practice and how it is checked.
pub struct Rule {
    /// A short name, e.g. `pin-small-containers`.
    pub id: &'static str,
    /// The practice, as the seed states it.
    pub practice: &'static str,
    /// Where it comes from.
    pub source: &'static str,
    /// The factors and levels its check needs.
    pub needs: &'static str,
    check: fn(&Input) -> Outcome,
}

impl Rule {
    /// Checks the rule on `input`.
    pub fn check(&self, input: &Input) -> Outcome {
        (self.check)(input)
    }
}

/// A checked rule.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Advice {
    /// The rule's name.
    pub rule: &'static str,
    /// The practice.
    pub practice: &'static str,
    /// Its source.
    pub source: &'static str,
    /// What its check needs.
    pub needs: &'static str,
    /// What the data says.
    #[serde(flatten)]
    pub outcome: Outcome,
}

/// Every rule, in the order `isolab advise` prints them.
pub const RULES: &[Rule] = &[
    Rule {
        id: "pin-small-containers",
        practice: "Avoid small vanilla (quota) containers: pin their cpus instead; pinning helps IO-bound work most",
        source: "seed 002 §III (Figs 3, 5, 6) and §VI best practices 1, 2",
        needs: "factor `placement` with `quota` and `pinned` on a container platform, a small container (at most 4 cpus)",
        check: pin_small_containers,
    },
    Rule {
        id: "do-not-pin-vms-for-cpu-bound-work",
        practice: "If VMs run CPU-bound work, do not bother pinning them: it neither improves performance nor lowers cost",
        source: "seed 002 §III.B and §VI best practice 3",
        needs: "factor `placement` with `quota` and `pinned` on a VM platform (KVM), a CPU-bound workload",
        check: do_not_pin_vms,
    },
    Rule {
        id: "container-in-vm-for-io-bound-work",
        practice: "For IO-bound services, when a pinned container is not an option, run the container inside a VM (VMCN): it costs less than a VM or a vanilla container",
        source: "seed 002 §III.C–D and §VI best practice 4",
        needs: "platforms of a VM and a container in a VM (KVM), an IO-bound workload",
        check: vmcn_for_io,
    },
    Rule {
        id: "container-size-chr",
        practice: "Container overhead falls as its share of the host's cores (CHR) grows: CPU-bound 0.07 < CHR < 0.14, IO-bound 0.14 < CHR < 0.28, ultra IO-bound (Cassandra) 0.28 < CHR < 0.57",
        source: "seed 002 §IV.A (Fig. 7) and §VI best practice 5",
        needs: "a baseline on bare metal and a container platform at two or more CHRs (factor `shape` or `host_cpus`)",
        check: container_size,
    },
    Rule {
        id: "multitasking-amplifies-overhead",
        practice: "More processes in a container amplify its overhead (scheduler and cgroup accounting)",
        source: "seed 002 §IV.D (Fig. 8)",
        needs: "a baseline on bare metal and a container platform at two or more `copies` (processes in one container), `threads` or `instances` levels, or the paper's pair of workloads: the same work as one job and split into processes",
        check: multitasking,
    },
    Rule {
        id: "quota-raises-tail-latency",
        practice: "A CPU quota hurts the tail more than the mean: for latency-sensitive services reserve cpus (pinned) rather than a quota",
        source: "isolab's quick start (its finding on the maximum latency under a quota)",
        needs: "factor `placement` with `quota` and another level, a workload with a tail latency (`latency_max`, else `latency_p99`) and a mean (`latency_mean` or `latency_avg`)",
        check: quota_tail,
    },
    Rule {
        id: "reserve-against-noisy-neighbours",
        practice: "Resource reservation (cgroups cpuset, io throttles) protects a container from a noisy neighbour, though not completely",
        source: "seed 001 §V (isolation study with reservation)",
        needs: "factor `neighbour` with `none` and a neighbour, factor `reservation` with `none` and a reservation",
        check: reservation,
    },
    Rule {
        id: "dedicated-storage-for-databases",
        practice: "Give a database dedicated storage rather than a device shared with others",
        source: "seed 000 (dedicated vs shared storage)",
        needs: "factor `storage` with `dedicated` and `shared` levels",
        check: dedicated_storage,
    },
];

/// Checks every rule on `input`.
pub fn advise(input: &Input) -> Vec<Advice> {
    RULES
        .iter()
        .map(|r| Advice {
            rule: r.id,
            practice: r.practice,
            source: r.source,
            needs: r.needs,
            outcome: r.check(input),
        })
        .collect()
}

/// How much of its cpus a workload kept busy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    CpuBound,
    IoBound,
    Mixed,
}

impl Class {
    fn word(self) -> &'static str {
        match self {
            Class::CpuBound => "CPU-bound",
            Class::IoBound => "IO-bound",
            Class::Mixed => "mixed",
        }
    }
}

/// Each workload's class (see the module documentation), with its busy share.
fn classes(data: &ExperimentData) -> BTreeMap<String, (Class, f64)> {
    let mut shares: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let by_cell = data.runs_by_cell();
    for cell in &data.cells {
        let Some(workload) = level(&cell.levels, "workload") else {
            continue;
        };
        for run in by_cell.get(&cell.id).into_iter().flatten() {
            if !run.is_counted() {
                continue;
            }
            let cpus = run
                .limits
                .pointer("/placement/shape_cpus")
                .and_then(serde_json::Value::as_f64);
            let usage = run.telemetry.get(isolab_store::Telemetry::CpuUsage);
            let wall = run.telemetry.get(isolab_store::Telemetry::Wall);
            if let (Some(cpus), Some(usage), Some(wall)) = (cpus, usage, wall) {
                if cpus > 0.0 && wall > 0.0 {
                    shares
                        .entry(workload.to_owned())
                        .or_default()
                        .push(usage / (wall * cpus));
                }
            }
        }
    }
    shares
        .into_iter()
        .filter_map(|(w, v)| {
            let share = isolab_stats::percentile(&v, 50.0)?;
            let class = if share >= 0.8 {
                Class::CpuBound
            } else if share < 0.5 {
                Class::IoBound
            } else {
                Class::Mixed
            };
            Some((w, (class, share)))
        })
        .collect()
}

fn level<'a>(levels: &'a [(String, String)], factor: &str) -> Option<&'a str> {
    levels
        .iter()
        .find(|(f, _)| f == factor)
        .map(|(_, l)| l.as_str())
}

/// The levels of `factor` among the cells, in first-seen order.
fn levels_of(data: &ExperimentData, factor: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &data.cells {
        if let Some(l) = level(&c.levels, factor) {
            if !out.iter().any(|o| o == l) {
                out.push(l.to_owned());
            }
        }
    }
    out
}

/// The environment of the cells with `levels`: their platform level's, or the
/// experiment's only platform when `platform` is not a factor.
fn environment(input: &Input, levels: &[(String, String)]) -> Option<Environment> {
    let platforms = input.platforms.as_ref().ok()?;
    match level(levels, "platform") {
        Some(p) => platforms.get(p).copied(),
        None if platforms.len() == 1 => platforms.values().next().copied(),
        None => None,
    }
}

fn join(levels: &[(String, String)]) -> String {
    if levels.is_empty() {
        return "every cell".into();
    }
    levels
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// One decided-or-not point of a contrast: B against A at `levels`.
struct Contrasted {
    levels: Vec<(String, String)>,
    metric: String,
    ratio: Option<f64>,
    verdict: Verdict,
}

impl Contrasted {
    /// `platform=docker-host shape=medium workload=w wall_time: pinned 1.25× better than quota
    /// (better)`: "better" and "worse" only for a decided point; an undecided or equivalent
    /// one gives its overhead ratio (`pinned at 1.00× of quota (?)`).
    fn evidence(&self, a: &str, b: &str) -> String {
        let effect = match (self.ratio, self.verdict) {
            (Some(r), Verdict::Worse) if r > 0.0 => format!("{r:.2}× worse than"),
            (Some(r), Verdict::Better) if r > 0.0 => format!("{:.2}× better than", 1.0 / r),
            (Some(r), _) if r > 0.0 => format!("at {r:.2}× of"),
            _ => "against".into(),
        };
        format!(
            "{} {}: {b} {effect} {a} ({})",
            join(&self.levels),
            self.metric,
            self.verdict
        )
    }
}

/// The cells of `input`'s experiment with `factor=level`, as a comparison side.
fn side<'a>(input: &Input<'a>, factor: &str, level: &str) -> Side<'a> {
    Side {
        data: input.data,
        select: vec![(factor.to_owned(), level.to_owned())],
        primary: input.analysis.options.primary.clone(),
        label: format!("{factor}={level}"),
    }
}

/// B (`factor=b`) against A (`factor=a`) over every matched point of the primary
/// metrics whose shared levels `keep` accepts.
fn contrast(
    input: &Input,
    factor: &str,
    a: &str,
    b: &str,
    keep: impl Fn(&[(String, String)]) -> bool,
) -> Vec<Contrasted> {
    let Ok(c) = compare(
        &side(input, factor, a),
        &side(input, factor, b),
        &input.compare,
    ) else {
        return Vec::new();
    };
    c.points
        .into_iter()
        .filter(|p| keep(&p.levels))
        .map(|p| Contrasted {
            levels: p.levels,
            metric: p.metric,
            ratio: p.ratio,
            verdict: p.verdict,
        })
        .collect()
}

/// The outcome of a contrast where `want` is the verdict the practice expects of B
/// against A: applies when most decided points have it, does not apply when most
/// decided points go the other way or are equivalent, cannot be checked when none is
/// decided.
fn judge(points: &[Contrasted], want: Verdict, a: &str, b: &str, missing: &str) -> Outcome {
    if points.is_empty() {
        return Outcome::CannotCheck {
            missing: missing.to_owned(),
        };
    }
    let evidence: Vec<String> = points.iter().map(|p| p.evidence(a, b)).collect();
    let decided: Vec<&Contrasted> = points.iter().filter(|p| p.verdict.is_decided()).collect();
    if decided.is_empty() {
        return Outcome::CannotCheck {
            missing: format!(
                "no point is decided yet (every one is ?): run more repetitions; the points: {}",
                evidence.join("; ")
            ),
        };
    }
    let agree = decided.iter().filter(|p| p.verdict == want).count();
    if 2 * agree > decided.len() {
        Outcome::Applies { evidence }
    } else {
        Outcome::DoesNotApply { evidence }
    }
}

fn has_levels(data: &ExperimentData, factor: &str, wanted: &[&str]) -> bool {
    let levels = levels_of(data, factor);
    wanted.iter().all(|w| levels.iter().any(|l| l == w))
}

/// The most cpus a container may have and still be "small" (seed 002's small instances:
/// Large, 2 cores, and xLarge, 4, against hosts of 112).
const SMALL_CPUS: f64 = 4.0;

fn pin_small_containers(input: &Input) -> Outcome {
    if !has_levels(input.data, "placement", &["quota", "pinned"]) {
        return Outcome::CannotCheck {
            missing: "factor `placement` with levels `quota` and `pinned`".into(),
        };
    }
    if let Err(missing) = input.platforms() {
        return Outcome::CannotCheck { missing };
    }
    let classes = classes(input.data);
    let mut points = contrast(input, "placement", "quota", "pinned", |levels| {
        environment(input, levels) == Some(Environment::Container)
            && shape_cpus(input.data, levels).is_some_and(|c| c <= SMALL_CPUS)
    });
    for p in &mut points {
        let cpus = shape_cpus(input.data, &p.levels).unwrap_or_default();
        if let Some((class, share)) = level(&p.levels, "workload").and_then(|w| classes.get(w)) {
            p.metric = format!(
                "{} ({cpus} cpu{}, {}, {:.0}% of its cpus busy)",
                p.metric,
                if cpus == 1.0 { "" } else { "s" },
                class.word(),
                share * 100.0
            );
        }
    }
    judge(
        &points,
        Verdict::Better,
        "quota",
        "pinned",
        "a small container (at most 4 cpus, as seed 002's Large and xLarge) on a container platform (docker, podman, isolab, …) with both placements",
    )
}

/// The cpus of the shape of the cells whose levels include `levels`, as their first
/// counted run read them back.
fn shape_cpus(data: &ExperimentData, levels: &[(String, String)]) -> Option<f64> {
    let cells: Vec<i64> = data
        .cells
        .iter()
        .filter(|c| levels.iter().all(|l| c.levels.contains(l)))
        .map(|c| c.id)
        .collect();
    data.runs
        .iter()
        .find(|r| cells.contains(&r.cell) && r.is_counted())?
        .limits
        .pointer("/placement/shape_cpus")?
        .as_f64()
}

fn do_not_pin_vms(input: &Input) -> Outcome {
    if !has_levels(input.data, "placement", &["quota", "pinned"]) {
        return Outcome::CannotCheck {
            missing: "factor `placement` with levels `quota` and `pinned`".into(),
        };
    }
    let platforms = match input.platforms() {
        Ok(p) => p,
        Err(missing) => return Outcome::CannotCheck { missing },
    };
    let vms: Vec<Environment> = platforms
        .values()
        .copied()
        .filter(|e| matches!(e, Environment::Vm { .. }))
        .collect();
    if vms.is_empty() {
        return Outcome::CannotCheck {
            missing: "a VM platform (`vm`)".into(),
        };
    }
    if vms.iter().all(|e| e.emulated()) {
        return Outcome::CannotCheck {
            missing: "VMs under KVM: this experiment's VMs are QEMU's emulation (TCG), whose overhead is emulation's, not a hypervisor's".into(),
        };
    }
    let classes = classes(input.data);
    let points = contrast(input, "placement", "quota", "pinned", |levels| {
        environment(input, levels) == Some(Environment::Vm { emulated: false })
            && level(levels, "workload")
                .and_then(|w| classes.get(w))
                .is_some_and(|(c, _)| *c == Class::CpuBound)
    });
    judge(
        &points,
        Verdict::Equivalent,
        "quota",
        "pinned",
        "a CPU-bound workload on a KVM VM with both placements",
    )
}

fn vmcn_for_io(input: &Input) -> Outcome {
    let platforms = match input.platforms() {
        Ok(p) => p,
        Err(missing) => return Outcome::CannotCheck { missing },
    };
    let level_of = |want: fn(Environment) -> bool| {
        platforms
            .iter()
            .find(|(_, e)| want(**e))
            .map(|(l, e)| (l.clone(), *e))
    };
    let vm = level_of(|e| matches!(e, Environment::Vm { .. }));
    let vmcn = level_of(|e| matches!(e, Environment::VmContainer { .. }));
    let (Some((vm, vm_env)), Some((vmcn, vmcn_env))) = (vm, vmcn) else {
        return Outcome::CannotCheck {
            missing: "factor `platform` with a VM (`vm`) and a container in a VM (`vm+docker` or `vm+isolab`)".into(),
        };
    };
    if vm_env.emulated() || vmcn_env.emulated() {
        return Outcome::CannotCheck {
            missing: "VMs under KVM: this experiment's VMs are QEMU's emulation (TCG)".into(),
        };
    }
    let classes = classes(input.data);
    let io = |levels: &[(String, String)]| {
        level(levels, "workload")
            .and_then(|w| classes.get(w))
            .is_some_and(|(c, _)| *c == Class::IoBound)
    };
    let points = contrast(input, "platform", &vm, &vmcn, io);
    judge(
        &points,
        Verdict::Better,
        &vm,
        &vmcn,
        "an IO-bound workload on both the VM and the container in a VM",
    )
}

/// The rows of container cells with an overhead against a bare-metal baseline, or
/// why there are none.
fn container_overheads<'a>(
    input: &'a Input<'a>,
) -> Result<Vec<&'a crate::summary::MetricRow>, String> {
    let baseline = &input.analysis.options.baseline;
    let platforms = input.platforms()?;
    let on_bare_metal = level(baseline, "platform")
        .and_then(|p| platforms.get(p))
        .is_some_and(|e| *e == Environment::BareMetal);
    if !on_bare_metal {
        return Err(
            "a baseline on bare metal (`baseline = { platform = \"host\" }`), so that each container cell has an overhead ratio"
                .into(),
        );
    }
    Ok(input
        .analysis
        .rows
        .iter()
        .filter(|r| {
            input.analysis.options.is_primary(r)
                && !r.is_baseline
                && r.overhead.is_some()
                && environment(input, &r.levels) == Some(Environment::Container)
        })
        .collect())
}

/// The CHR of a cell as its first counted run read it back.
fn chr(data: &ExperimentData, cell_index: u32) -> Option<f64> {
    let cell = data.cells.iter().find(|c| c.index == cell_index)?;
    data.runs
        .iter()
        .find(|r| r.cell == cell.id && r.is_counted())?
        .limits
        .pointer("/placement/chr")?
        .as_f64()
}

/// Applies when, for each group of rows that differ only in `by`, the overhead moves
/// the way `falls` says as `key` grows, in most groups.
fn trend(
    rows: &[&crate::summary::MetricRow],
    by: &[&str],
    key: impl Fn(&crate::summary::MetricRow) -> Option<f64>,
    name: &str,
    falls: bool,
) -> Outcome {
    let mut groups: BTreeMap<String, Vec<(f64, f64, String)>> = BTreeMap::new();
    for r in rows {
        let (Some(k), Some(o)) = (key(r), r.overhead) else {
            continue;
        };
        let others: Vec<(String, String)> = r
            .levels
            .iter()
            .filter(|(f, _)| !by.contains(&f.as_str()))
            .cloned()
            .collect();
        let verdict = r.verdict.map_or("-".into(), |v| v.to_string());
        groups
            .entry(format!("{} {}", join(&others), r.metric))
            .or_default()
            .push((k, o, verdict));
    }
    groups.retain(|_, v| {
        let mut keys: Vec<f64> = v.iter().map(|(k, _, _)| *k).collect();
        keys.dedup();
        keys.len() >= 2
    });
    if groups.is_empty() {
        return Outcome::CannotCheck {
            missing: format!("container cells at two or more {name} values, each with an overhead against the bare-metal baseline"),
        };
    }
    // A group counts when its ends were decided against the baseline (worse, better or
    // ≈): a trend between two `?` estimates is not evidence.
    let decided = |verdict: &str| verdict != "?" && verdict != "-";
    let (mut agree, mut counted) = (0, 0);
    let mut evidence = Vec::new();
    for (group, mut v) in groups {
        v.sort_by(|x, y| x.0.total_cmp(&y.0));
        let (first, last) = (&v[0], &v[v.len() - 1]);
        if decided(&first.2) && decided(&last.2) {
            counted += 1;
            if (last.1 < first.1) == falls {
                agree += 1;
            }
        }
        evidence.push(format!(
            "{group}: {}",
            v.iter()
                .map(|(k, o, verdict)| format!(
                    "{name} {k}: {o:.3}× against bare metal ({verdict})"
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if counted == 0 {
        return Outcome::CannotCheck {
            missing: format!(
                "no {name} trend is decided yet (the overheads at its ends are `?`): run more repetitions; {}",
                evidence.join("; ")
            ),
        };
    }
    if 2 * agree > counted {
        Outcome::Applies { evidence }
    } else {
        Outcome::DoesNotApply { evidence }
    }
}

fn container_size(input: &Input) -> Outcome {
    let rows = match container_overheads(input) {
        Ok(rows) => rows,
        Err(missing) => return Outcome::CannotCheck { missing },
    };
    let outcome = trend(
        &rows,
        &["shape", "host_cpus"],
        |r| chr(input.data, r.cell),
        "CHR",
        true,
    );
    // Seed 002 §IV's split of the same overheads over the shapes' sizes.
    let fits = input
        .analysis
        .sizes
        .iter()
        .filter(|s| environment(input, &s.levels) == Some(Environment::Container))
        .map(crate::sizes::evidence);
    match outcome {
        Outcome::Applies { mut evidence } => {
            evidence.extend(fits);
            Outcome::Applies { evidence }
        }
        Outcome::DoesNotApply { mut evidence } => {
            evidence.extend(fits);
            Outcome::DoesNotApply { evidence }
        }
        other => other,
    }
}

fn multitasking(input: &Input) -> Outcome {
    let rows = match container_overheads(input) {
        Ok(rows) => rows,
        Err(missing) => return Outcome::CannotCheck { missing },
    };
    // Copies first: N processes in one container is the paper's own design (Fig. 8).
    let factor = ["copies", "threads", "instances"]
        .into_iter()
        .find(|f| levels_of(input.data, f).len() >= 2);
    if let Some(factor) = factor {
        return trend(
            &rows,
            &[factor],
            |r| level(&r.levels, factor).and_then(|l| l.parse().ok()),
            factor,
            false,
        );
    }
    // The paper's pair: one job against the same work split into processes (its
    // design has one pair; with more, the first, as their rows would share groups).
    if let Some(pair) = input.multitask.first() {
        let processes = split_processes(input.data);
        return trend(
            &rows,
            &["workload"],
            |r| match level(&r.levels, "workload") {
                Some(w) if w == pair.one_job => Some(1.0),
                Some(w) if w == pair.split => processes.get(&r.cell).copied(),
                _ => None,
            },
            "processes",
            false,
        );
    }
    Outcome::CannotCheck {
        missing: "factor `copies`, `threads` or `instances` with two or more levels, or seed 002's pair of workloads doing the same work as one job and split into processes (`from = \"ffmpeg-transcode\"` and `from = \"ffmpeg-transcode-split\"` with one `work`)".into(),
    }
}

/// The mean number of processes each cell's counted runs report (`processes`: a
/// split workload's), by cell index.
fn split_processes(data: &ExperimentData) -> BTreeMap<u32, f64> {
    let index: BTreeMap<i64, u32> = data.cells.iter().map(|c| (c.id, c.index)).collect();
    let mut sums: BTreeMap<u32, (f64, u32)> = BTreeMap::new();
    for run in data.runs.iter().filter(|r| r.is_counted()) {
        let Some(cell) = index.get(&run.cell) else {
            continue;
        };
        if let Some(m) = run.metrics.iter().find(|m| m.name == "processes") {
            let e = sums.entry(*cell).or_default();
            e.0 += m.value;
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|(cell, (sum, n))| (cell, sum / f64::from(n)))
        .collect()
}

fn quota_tail(input: &Input) -> Outcome {
    let placements = levels_of(input.data, "placement");
    let Some(other) = placements.iter().find(|p| *p != "quota") else {
        return Outcome::CannotCheck {
            missing: "factor `placement` with `quota` and another level".into(),
        };
    };
    if !placements.iter().any(|p| p == "quota") {
        return Outcome::CannotCheck {
            missing: "factor `placement` with a `quota` level".into(),
        };
    }
    let options = CompareOptions {
        all_metrics: true,
        ..input.compare.clone()
    };
    let Ok(c) = compare(
        &side(input, "placement", other),
        &side(input, "placement", "quota"),
        &options,
    ) else {
        return Outcome::CannotCheck {
            missing: "cells of both placements with the other factors matched".into(),
        };
    };
    let mut evidence = Vec::new();
    let (mut agree, mut decided) = (0, 0);
    // The farthest tail recorded, the maximum, else the 99th percentile, against the
    // body, the mean. (The quick start's sysbench shows why the farthest: a quota's
    // stall at the end of each period hits fewer than 1% of its events, so their p99
    // even improves on two threads sharing one pinned cpu, while the maximum is the
    // stall.)
    let tails = ["latency_max", "latency_p99"];
    let bodies = ["latency_mean", "latency_avg"];
    let mut seen: Vec<&[(String, String)]> = Vec::new();
    let candidates = tails
        .iter()
        .flat_map(|t| c.points.iter().filter(move |p| p.metric == *t));
    for p99 in candidates {
        if seen.contains(&p99.levels.as_slice()) {
            continue;
        }
        let Some(mean) = bodies.iter().find_map(|b| {
            c.points
                .iter()
                .find(|p| p.metric == *b && p.levels == p99.levels)
        }) else {
            continue;
        };
        seen.push(&p99.levels);
        let (Some(rt), Some(rm)) = (p99.ratio, mean.ratio) else {
            continue;
        };
        if p99.verdict.is_decided() {
            decided += 1;
            if p99.verdict == Verdict::Worse && rt > rm {
                agree += 1;
            }
        }
        evidence.push(format!(
            "{}: quota against {other}: {} {rt:.2}× ({}), {} {rm:.2}× ({})",
            join(&p99.levels),
            p99.metric,
            p99.verdict,
            mean.metric,
            mean.verdict
        ));
    }
    if evidence.is_empty() {
        return Outcome::CannotCheck {
            missing:
                "a workload that records a tail latency (`latency_max`, else `latency_p99`) and its mean (`latency_mean` or `latency_avg`): a service under load, or sysbench"
                    .into(),
        };
    }
    if decided == 0 {
        return Outcome::CannotCheck {
            missing: format!(
                "no tail-latency point is decided yet: run more repetitions; {}",
                evidence.join("; ")
            ),
        };
    }
    if 2 * agree > decided {
        Outcome::Applies { evidence }
    } else {
        Outcome::DoesNotApply { evidence }
    }
}

fn reservation(input: &Input) -> Outcome {
    let neighbours = levels_of(input.data, "neighbour");
    if !neighbours.iter().any(|n| n == "none") || neighbours.len() < 2 {
        return Outcome::CannotCheck {
            missing: "factor `neighbour` with `none` and at least one neighbour".into(),
        };
    }
    let reservations = levels_of(input.data, "reservation");
    let reserved: Vec<&String> = reservations.iter().filter(|r| *r != "none").collect();
    if !reservations.iter().any(|r| r == "none") || reserved.is_empty() {
        return Outcome::CannotCheck {
            missing: "factor `reservation` with `none` and a reservation (`cpuset`, `io`, …)"
                .into(),
        };
    }
    // With a neighbour, the reserved cell against the unreserved one.
    let mut points = Vec::new();
    for r in &reserved {
        points.extend(contrast(input, "reservation", "none", r, |levels| {
            level(levels, "neighbour").is_some_and(|n| n != "none")
        }));
    }
    judge(
        &points,
        Verdict::Better,
        "no reservation",
        "the reservation",
        "cells with a neighbour under both `reservation = none` and a reservation",
    )
}

fn dedicated_storage(input: &Input) -> Outcome {
    if !has_levels(input.data, "storage", &["dedicated", "shared"]) {
        return Outcome::CannotCheck {
            missing: "factor `storage` with levels `dedicated` and `shared`".into(),
        };
    }
    let points = contrast(input, "storage", "shared", "dedicated", |_| true);
    judge(
        &points,
        Verdict::Better,
        "shared",
        "dedicated",
        "cells on both storage levels with the other factors matched",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_store::{CellRecord, MetricValue, RunRecord, RunStatus};
    use std::time::{Duration, SystemTime};

    /// A docker experiment, quota against pinned, eight rounds; pinned is 20% faster.
    /// The workload keeps 30% of its one cpu busy: IO-bound.
    fn pinning() -> ExperimentData {
        let mut cells = Vec::new();
        let mut runs = Vec::new();
        for (i, placement) in ["quota", "pinned"].into_iter().enumerate() {
            let levels = vec![
                ("platform".to_string(), "docker".to_string()),
                ("placement".to_string(), placement.to_string()),
                ("workload".to_string(), "w".to_string()),
            ];
            cells.push(CellRecord {
                id: i as i64,
                index: i as u32,
                key: format!("platform=docker placement={placement} workload=w"),
                levels,
                stop_reason: None,
            });
            for round in 0..8u32 {
                let wall = if placement == "pinned" { 8.0 } else { 10.0 } + 0.01 * round as f64;
                runs.push(RunRecord {
                    id: runs.len() as i64 + 1,
                    cell: i as i64,
                    repetition: round,
                    warmup: false,
                    round,
                    status: RunStatus::Ok,
                    exit_code: Some(0),
                    started_at: SystemTime::UNIX_EPOCH,
                    wall: Duration::from_secs(10),
                    error: None,
                    limits: serde_json::json!({"placement": {"shape_cpus": 1.0, "chr": 0.5}})
                        .into(),
                    metrics: vec![MetricValue {
                        name: "wall_time".into(),
                        unit: "s".into(),
                        direction: isolab_stats::Direction::Lower,
                        value: wall,
                    }],
                    telemetry: vec![
                        ("wall_s".to_string(), wall),
                        ("cpu_usage_s".to_string(), 0.3 * wall),
                    ]
                    .into(),
                    notes: vec![],
                });
            }
        }
        ExperimentData::of("pinning", cells, runs)
    }

    fn advice_of(data: &ExperimentData) -> Vec<Advice> {
        let analysis = crate::analyse(
            data,
            crate::SummaryOptions::default(),
            &CompareOptions::default(),
        );
        let input = Input {
            data,
            analysis: &analysis,
            compare: CompareOptions::default(),
            platforms: Ok([("docker".to_string(), Environment::Container)].into()),
            multitask: Vec::new(),
        };
        advise(&input)
    }

    #[test]
    fn pinning_that_helps_a_small_container_applies_with_its_evidence() {
        let advice = advice_of(&pinning());
        let pin = advice
            .iter()
            .find(|a| a.rule == "pin-small-containers")
            .unwrap();
        let Outcome::Applies { evidence } = &pin.outcome else {
            panic!("{:?}", pin.outcome);
        };
        assert_eq!(evidence.len(), 1, "{evidence:?}");
        assert!(
            evidence[0].starts_with("platform=docker workload=w wall_time (1 cpu, IO-bound, 30% of its cpus busy): pinned 1.25× better than quota (better)"),
            "{}",
            evidence[0]
        );
    }

    #[test]
    fn rules_without_their_factors_say_what_is_missing() {
        let advice = advice_of(&pinning());
        let missing = |rule: &str| match &advice.iter().find(|a| a.rule == rule).unwrap().outcome {
            Outcome::CannotCheck { missing } => missing.clone(),
            other => panic!("{rule}: {other:?}"),
        };
        assert!(missing("reserve-against-noisy-neighbours").contains("factor `neighbour`"));
        assert!(missing("dedicated-storage-for-databases").contains("factor `storage`"));
        assert!(missing("do-not-pin-vms-for-cpu-bound-work").contains("VM platform"));
        assert!(missing("container-size-chr").contains("baseline on bare metal"));
        assert!(missing("quota-raises-tail-latency").contains("latency_p99"));
        assert_eq!(advice.len(), RULES.len());
    }

    #[test]
    fn every_rule_names_its_source_and_needs() {
        let mut ids: Vec<&str> = RULES.iter().map(|r| r.id).collect();
        for r in RULES {
            assert!(
                r.source.starts_with("seed ") || r.source.contains("quick start"),
                "{}",
                r.id
            );
            assert!(!r.needs.is_empty() && !r.practice.is_empty(), "{}", r.id);
        }
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), RULES.len());
    }

    /// One cell of a synthetic experiment: its levels, the mean of each metric (8
    /// rounds, a deterministic spread of ±0.6% around it), the shape's cpus and CHR, and
    /// the share of its cpus it keeps busy.
    struct Made<'a> {
        levels: Vec<(&'a str, &'a str)>,
        metrics: Vec<(&'a str, isolab_stats::Direction, f64)>,
        cpus: f64,
        chr: f64,
        busy: f64,
    }

    fn made<'a>(levels: &[(&'a str, &'a str)], metric: (&'a str, f64)) -> Made<'a> {
        Made {
            levels: levels.to_vec(),
            metrics: vec![(metric.0, isolab_stats::Direction::Lower, metric.1)],
            cpus: 1.0,
            chr: 0.5,
            busy: 0.3,
        }
    }

    fn experiment(cells: &[Made]) -> ExperimentData {
        let mut data = pinning();
        data.cells.clear();
        data.runs.clear();
        for (i, c) in cells.iter().enumerate() {
            let levels: Vec<(String, String)> = c
                .levels
                .iter()
                .map(|(f, l)| ((*f).to_owned(), (*l).to_owned()))
                .collect();
            data.cells.push(CellRecord {
                id: i as i64,
                index: i as u32,
                key: crate::advice::tests::key(&levels),
                levels,
                stop_reason: None,
            });
            for round in 0..8u32 {
                // A spread that sums to zero over the 8 rounds: each cell's mean is exact.
                const SPREAD: [f64; 8] = [-2.0, -1.0, 0.0, 1.0, 2.0, 1.0, 0.0, -1.0];
                let spread = 1.0 + 0.003 * SPREAD[(round as usize + 3 * i) % 8];
                let metrics: Vec<MetricValue> = c
                    .metrics
                    .iter()
                    .map(|(name, direction, mean)| MetricValue {
                        name: (*name).into(),
                        unit: "s".into(),
                        direction: *direction,
                        value: mean * spread,
                    })
                    .collect();
                data.runs.push(RunRecord {
                    id: data.runs.len() as i64 + 1,
                    cell: i as i64,
                    repetition: round,
                    warmup: false,
                    round,
                    status: RunStatus::Ok,
                    exit_code: Some(0),
                    started_at: SystemTime::UNIX_EPOCH,
                    wall: Duration::from_secs(10),
                    error: None,
                    limits: serde_json::json!({"placement": {"shape_cpus": c.cpus, "chr": c.chr}})
                        .into(),
                    metrics,
                    telemetry: vec![
                        ("wall_s".to_string(), 10.0),
                        ("cpu_usage_s".to_string(), 10.0 * c.cpus * c.busy),
                    ]
                    .into(),
                    notes: vec![],
                });
            }
        }
        data
    }

    fn key(levels: &[(String, String)]) -> String {
        levels
            .iter()
            .map(|(f, l)| format!("{f}={l}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Seed 002's pair when the experiment has workloads `onejob` and `split`.
    fn multitask_pairs(data: &ExperimentData) -> Vec<MultitaskPair> {
        let has = |w: &str| {
            data.cells
                .iter()
                .any(|c| c.levels.iter().any(|(f, l)| f == "workload" && l == w))
        };
        if has("onejob") && has("split") {
            vec![MultitaskPair {
                one_job: "onejob".into(),
                split: "split".into(),
            }]
        } else {
            Vec::new()
        }
    }

    /// The outcome of `rule` on `data`, with these platforms and this baseline.
    fn outcome(
        rule: &str,
        data: &ExperimentData,
        platforms: Result<BTreeMap<String, Environment>, String>,
        baseline: &[(&str, &str)],
    ) -> Outcome {
        let options = crate::SummaryOptions {
            baseline: baseline
                .iter()
                .map(|(f, l)| ((*f).to_owned(), (*l).to_owned()))
                .collect(),
            ..Default::default()
        };
        let analysis = crate::analyse(data, options, &CompareOptions::default());
        let input = Input {
            data,
            analysis: &analysis,
            compare: CompareOptions::default(),
            platforms,
            multitask: multitask_pairs(data),
        };
        RULES
            .iter()
            .find(|r| r.id == rule)
            .unwrap_or_else(|| panic!("no rule {rule}"))
            .check(&input)
    }

    fn platforms(list: &[(&str, Environment)]) -> Result<BTreeMap<String, Environment>, String> {
        Ok(list.iter().map(|(p, e)| ((*p).to_owned(), *e)).collect())
    }

    fn applies(o: &Outcome) -> bool {
        matches!(o, Outcome::Applies { .. })
    }

    fn does_not_apply(o: &Outcome) -> bool {
        matches!(o, Outcome::DoesNotApply { .. })
    }

    fn missing(o: &Outcome) -> String {
        match o {
            Outcome::CannotCheck { missing } => missing.clone(),
            other => panic!("{other:?}"),
        }
    }

    /// Two placements of one platform (and workload), B at `ratio` of A's time.
    fn placements(platform: &str, ratio: f64, cpus: f64, busy: f64) -> ExperimentData {
        experiment(&[
            Made {
                cpus,
                busy,
                ..made(
                    &[
                        ("platform", platform),
                        ("placement", "quota"),
                        ("workload", "w"),
                    ],
                    ("wall_time", 10.0),
                )
            },
            Made {
                cpus,
                busy,
                ..made(
                    &[
                        ("platform", platform),
                        ("placement", "pinned"),
                        ("workload", "w"),
                    ],
                    ("wall_time", 10.0 * ratio),
                )
            },
        ])
    }

    #[test]
    fn pin_small_containers_applies_does_not_or_says_why_not() {
        let docker = platforms(&[("docker", Environment::Container)]);
        let rule = "pin-small-containers";
        assert!(applies(&outcome(
            rule,
            &placements("docker", 0.8, 2.0, 0.3),
            docker.clone(),
            &[]
        )));
        let worse = outcome(
            rule,
            &placements("docker", 1.2, 2.0, 0.3),
            docker.clone(),
            &[],
        );
        assert!(does_not_apply(&worse), "{worse:?}");
        // A container of 8 cpus is not small (seed 002's small instances have 2 and 4).
        let large = outcome(
            rule,
            &placements("docker", 0.8, 8.0, 0.3),
            docker.clone(),
            &[],
        );
        assert!(
            missing(&large).contains("a small container (at most 4 cpus"),
            "{large:?}"
        );
        // The stored spec's error is said, not dropped.
        let unknown = outcome(
            rule,
            &placements("docker", 0.8, 2.0, 0.3),
            Err("exp.toml:1:1: bad".into()),
            &[],
        );
        assert!(
            missing(&unknown).contains("cannot be read: exp.toml:1:1: bad"),
            "{unknown:?}"
        );
    }

    #[test]
    fn an_undecided_point_is_neither_better_nor_worse_in_the_evidence() {
        let point = Contrasted {
            levels: vec![("platform".into(), "isolab".into())],
            metric: "events_per_second".into(),
            ratio: Some(0.998),
            verdict: Verdict::Inconclusive,
        };
        assert_eq!(
            point.evidence("quota", "pinned"),
            "platform=isolab events_per_second: pinned at 1.00× of quota (?)"
        );
    }

    #[test]
    fn do_not_pin_vms_applies_when_pinning_changes_nothing_for_cpu_bound_work() {
        let kvm = platforms(&[("vm", Environment::Vm { emulated: false })]);
        let rule = "do-not-pin-vms-for-cpu-bound-work";
        let same = outcome(rule, &placements("vm", 1.0, 2.0, 0.95), kvm.clone(), &[]);
        assert!(applies(&same), "{same:?}");
        let helps = outcome(rule, &placements("vm", 0.8, 2.0, 0.95), kvm, &[]);
        assert!(does_not_apply(&helps), "{helps:?}");
        let tcg = platforms(&[("vm", Environment::Vm { emulated: true })]);
        let emulated = outcome(rule, &placements("vm", 1.0, 2.0, 0.95), tcg, &[]);
        assert!(missing(&emulated).contains("TCG"), "{emulated:?}");
    }

    #[test]
    fn container_in_vm_for_io_bound_work_applies_does_not_or_needs_kvm() {
        let rule = "container-in-vm-for-io-bound-work";
        let two = |ratio: f64| {
            experiment(&[
                made(
                    &[("platform", "vm"), ("workload", "w")],
                    ("latency_mean", 10.0),
                ),
                made(
                    &[("platform", "vm+docker"), ("workload", "w")],
                    ("latency_mean", 10.0 * ratio),
                ),
            ])
        };
        let kvm = platforms(&[
            ("vm", Environment::Vm { emulated: false }),
            ("vm+docker", Environment::VmContainer { emulated: false }),
        ]);
        assert!(applies(&outcome(rule, &two(0.8), kvm.clone(), &[])));
        assert!(does_not_apply(&outcome(rule, &two(1.2), kvm, &[])));
        let tcg = platforms(&[
            ("vm", Environment::Vm { emulated: true }),
            ("vm+docker", Environment::VmContainer { emulated: true }),
        ]);
        assert!(missing(&outcome(rule, &two(0.8), tcg, &[])).contains("KVM"));
        let one = platforms(&[("vm", Environment::Vm { emulated: false })]);
        assert!(missing(&outcome(rule, &two(0.8), one, &[])).contains("container in a VM"));
    }

    /// Bare metal and Docker at two sizes (CHR 0.25 and 0.5), Docker at `small` and
    /// `large` times the host's time.
    fn sizes(small: f64, large: f64) -> ExperimentData {
        let cell = |platform, shape, chr, t| Made {
            chr,
            ..made(
                &[("platform", platform), ("shape", shape)],
                ("wall_time", t),
            )
        };
        experiment(&[
            cell("host", "small", 0.25, 10.0),
            cell("host", "large", 0.5, 10.0),
            cell("docker", "small", 0.25, 10.0 * small),
            cell("docker", "large", 0.5, 10.0 * large),
        ])
    }

    #[test]
    fn container_size_follows_the_overhead_trend_over_the_chr() {
        let rule = "container-size-chr";
        let envs = platforms(&[
            ("host", Environment::BareMetal),
            ("docker", Environment::Container),
        ]);
        let host = [("platform", "host")];
        let falls = outcome(rule, &sizes(1.3, 1.05), envs.clone(), &host);
        let Outcome::Applies { evidence } = &falls else {
            panic!("{falls:?}");
        };
        assert!(
            evidence[0].contains("CHR 0.25: 1.300× against bare metal (worse)")
                && evidence[0].contains("CHR 0.5: 1.050× against bare metal (worse)"),
            "{evidence:?}"
        );
        assert!(does_not_apply(&outcome(
            rule,
            &sizes(1.05, 1.3),
            envs.clone(),
            &host
        )));
        // Without a bare-metal baseline there is no overhead to follow.
        let no_baseline = outcome(rule, &sizes(1.3, 1.05), envs, &[]);
        assert!(
            missing(&no_baseline).contains("baseline on bare metal"),
            "{no_baseline:?}"
        );
    }

    #[test]
    fn multitasking_follows_the_overhead_trend_over_threads() {
        let rule = "multitasking-amplifies-overhead";
        let envs = platforms(&[
            ("host", Environment::BareMetal),
            ("docker", Environment::Container),
        ]);
        let threads = |one: f64, four: f64| {
            let cell = |platform, threads, t| {
                made(
                    &[("platform", platform), ("threads", threads)],
                    ("wall_time", t),
                )
            };
            experiment(&[
                cell("host", "1", 10.0),
                cell("host", "4", 10.0),
                cell("docker", "1", 10.0 * one),
                cell("docker", "4", 10.0 * four),
            ])
        };
        let host = [("platform", "host")];
        assert!(applies(&outcome(
            rule,
            &threads(1.05, 1.3),
            envs.clone(),
            &host
        )));
        assert!(does_not_apply(&outcome(
            rule,
            &threads(1.3, 1.05),
            envs.clone(),
            &host
        )));
        let no_factor = outcome(rule, &sizes(1.3, 1.05), envs.clone(), &host);
        assert!(
            missing(&no_factor).contains("`threads` or `instances`"),
            "{no_factor:?}"
        );
        // Seed 002's own design: the same work as N processes in one container (`copies`).
        let copies = experiment(&[
            made(
                &[("platform", "host"), ("copies", "1")],
                ("wall_time", 10.0),
            ),
            made(
                &[("platform", "host"), ("copies", "4")],
                ("wall_time", 10.0),
            ),
            made(
                &[("platform", "docker"), ("copies", "1")],
                ("wall_time", 10.5),
            ),
            made(
                &[("platform", "docker"), ("copies", "4")],
                ("wall_time", 13.0),
            ),
        ]);
        assert!(applies(&outcome(rule, &copies, envs.clone(), &host)));
        // The paper's pair (Fig. 8): one job against the same work as 2 processes.
        let pair = |one: f64, split: f64| {
            let cell = |platform, workload, t, processes: Option<f64>| {
                let mut m = made(
                    &[("platform", platform), ("workload", workload)],
                    ("wall_time", t),
                );
                m.metrics
                    .extend(processes.map(|p| ("processes", isolab_stats::Direction::Higher, p)));
                m
            };
            experiment(&[
                cell("host", "onejob", 10.0, None),
                cell("host", "split", 8.0, Some(2.0)),
                cell("docker", "onejob", 10.0 * one, None),
                cell("docker", "split", 8.0 * split, Some(2.0)),
            ])
        };
        let amplified = outcome(rule, &pair(1.0, 1.2), envs.clone(), &host);
        let Outcome::Applies { evidence } = &amplified else {
            panic!("{amplified:?}");
        };
        assert!(
            evidence[0].contains("processes 1: 1.000×")
                && evidence[0].contains("processes 2: 1.200×"),
            "{evidence:?}"
        );
        assert!(does_not_apply(&outcome(rule, &pair(1.2, 1.0), envs, &host)));
    }

    #[test]
    fn quota_tail_reads_a_services_or_sysbenchs_latencies() {
        let rule = "quota-raises-tail-latency";
        let isolab = platforms(&[("isolab", Environment::Container)]);
        let tail =
            |tail_ratio: f64, mean_ratio: f64, tail_name: &'static str, mean_name: &'static str| {
                let cell = |placement, t: f64, m: f64| Made {
                    metrics: vec![
                        (tail_name, isolab_stats::Direction::Lower, t),
                        (mean_name, isolab_stats::Direction::Lower, m),
                    ],
                    ..made(&[("placement", placement)], ("unused", 1.0))
                };
                experiment(&[
                    cell("pinned", 8.0, 2.0),
                    cell("quota", 8.0 * tail_ratio, 2.0 * mean_ratio),
                ])
            };
        // The quick start's sysbench: its maximum and its mean.
        let sysbench = outcome(
            rule,
            &tail(6.8, 1.05, "latency_max", "latency_avg"),
            isolab.clone(),
            &[],
        );
        let Outcome::Applies { evidence } = &sysbench else {
            panic!("{sysbench:?}");
        };
        assert!(
            evidence[0].contains("latency_max 6.80× (worse), latency_avg 1.05× (worse)"),
            "{evidence:?}"
        );
        // A service's p99 and mean.
        assert!(applies(&outcome(
            rule,
            &tail(3.0, 1.1, "latency_p99", "latency_mean"),
            isolab.clone(),
            &[]
        )));
        // The tail no worse than the mean: the practice's claim does not hold here.
        assert!(does_not_apply(&outcome(
            rule,
            &tail(1.5, 1.5, "latency_p99", "latency_mean"),
            isolab,
            &[]
        )));
    }

    #[test]
    fn reservation_and_dedicated_storage_apply_or_not_by_their_effect() {
        let docker = platforms(&[("docker", Environment::Container)]);
        let reservation = |ratio: f64| {
            experiment(&[
                made(
                    &[("neighbour", "none"), ("reservation", "none")],
                    ("wall_time", 10.0),
                ),
                made(
                    &[("neighbour", "none"), ("reservation", "cpuset")],
                    ("wall_time", 10.0),
                ),
                made(
                    &[("neighbour", "cpu"), ("reservation", "none")],
                    ("wall_time", 20.0),
                ),
                made(
                    &[("neighbour", "cpu"), ("reservation", "cpuset")],
                    ("wall_time", 20.0 * ratio),
                ),
            ])
        };
        let rule = "reserve-against-noisy-neighbours";
        assert!(applies(&outcome(
            rule,
            &reservation(0.6),
            docker.clone(),
            &[]
        )));
        assert!(does_not_apply(&outcome(
            rule,
            &reservation(1.0),
            docker.clone(),
            &[]
        )));
        let storage = |ratio: f64| {
            experiment(&[
                made(&[("storage", "shared")], ("iops_time", 10.0)),
                made(&[("storage", "dedicated")], ("iops_time", 10.0 * ratio)),
            ])
        };
        let rule = "dedicated-storage-for-databases";
        assert!(applies(&outcome(rule, &storage(0.7), docker.clone(), &[])));
        assert!(does_not_apply(&outcome(rule, &storage(1.0), docker, &[])));
    }
}
