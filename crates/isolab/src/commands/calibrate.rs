//! `isolab calibrate`: an A/A run that measures this host's noise.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use isolab_lab::spec::{aa_design, QUICK_START};
use isolab_lab::{ExperimentSpec, Source};
use isolab_report::compare::{compare, CompareOptions, Side};
use isolab_report::table::Table;
use isolab_report::ExperimentData;
use isolab_stats::{
    runs_for_equivalence, runs_for_power, runs_for_verdict, simulate_verdicts, Design, Noise,
    Verdict, VerdictRule,
};
use isolab_store::ExperimentStatus;

use super::run::{execute, Settings};
use super::Exit;
use crate::cli::CalibrateArgs;
use crate::host;

pub fn calibrate(db: &Path, args: CalibrateArgs) -> Result<Exit> {
    let facts = host::facts()?;
    let source = match &args.spec {
        Some(path) => Source::new(
            path.display().to_string(),
            std::fs::read_to_string(path)
                .with_context(|| format!("cannot read spec {}", path.display()))?,
        ),
        None => Source::new("built-in quick-start", QUICK_START),
    };
    let spec = ExperimentSpec::parse(aa_design(&source)?, &facts)?;
    let rule = super::compare::rule(&args.verdict, &spec.verdict_rule())?;
    let store = host::open_store(db)?;
    let settings = Settings {
        workdir: args.workdir.clone(),
        keep_workdirs: false,
        quiet: args.output.quiet,
        json: args.output.json,
    };
    let (store, outcome) = execute(store, &spec, super::run::Start::New, &settings)?;
    if outcome.status == ExperimentStatus::Interrupted {
        eprintln!("interrupted: resume with `isolab run --resume {}`, then `isolab compare {} --a replica=a --b replica=b`", outcome.experiment, outcome.experiment);
        return Ok(Exit::Interrupted);
    }
    let data = ExperimentData::load(&store, outcome.experiment)?;
    let primary = super::summary_options(&data, false).primary;
    let side = |replica: &str| Side {
        data: &data,
        select: vec![("replica".into(), replica.into())],
        primary: primary.clone(),
        label: format!("replica={replica}"),
    };
    let c = compare(
        &side("a"),
        &side("b"),
        &CompareOptions {
            rule: rule.clone(),
            ..CompareOptions::default()
        },
    )?;

    // Per workload: the worst CV seen, what pairing by round gained, A/A false
    // verdicts and equivalences, and the runs the rule needs.
    #[derive(Default)]
    struct PerWorkload {
        cv: Vec<f64>,
        gains: Vec<f64>,
        points: usize,
        false_verdicts: usize,
        equivalent: usize,
    }
    let mut by: BTreeMap<String, PerWorkload> = BTreeMap::new();
    for p in &c.points {
        let workload = p
            .levels
            .iter()
            .find(|(f, _)| f == "workload")
            .map_or_else(|| p.metric.clone(), |(_, l)| l.clone());
        let e = by.entry(format!("{workload} ({})", p.metric)).or_default();
        e.cv.extend(p.cv_a.into_iter().chain(p.cv_b));
        e.gains.extend(p.pairing_gain());
        e.points += 1;
        match p.verdict {
            Verdict::Worse | Verdict::Better => e.false_verdicts += 1,
            Verdict::Equivalent => e.equivalent += 1,
            Verdict::Inconclusive => {}
        }
    }
    let rows: Vec<serde_json::Value> = by
        .iter()
        .map(|(w, e)| {
            let cv = e.cv.iter().copied().fold(0.0_f64, f64::max);
            // Pairing by round narrows the change's interval by the median gain seen;
            // the rule then works at that effective CV.
            let gain = isolab_stats::percentile(&e.gains, 50.0).map_or(1.0, |g| g.min(1.0));
            let planned = plan(cv * gain, args.effect, &rule, args.power);
            serde_json::json!({
                "workload": w, "max_cv": cv, "pairing_gain": gain, "effective_cv": cv * gain,
                "points": e.points, "false_verdicts": e.false_verdicts, "equivalent": e.equivalent,
                "runs_for_plain_test": runs_for_power(cv, args.effect, rule.alpha, args.power),
                "runs_recommended": planned.runs,
                "runs_for_noise": NOISE_LEVELS.iter().map(|&noise| {
                    let n = runs_for_equivalence(cv * gain, &VerdictRule { noise, ..rule.clone() }, args.power);
                    (format!("{noise}"), serde_json::json!((n != u32::MAX).then_some(n)))
                }).collect::<serde_json::Map<_, _>>(),
                "power_normal": planned.normal, "power_skewed": planned.skewed,
            })
        })
        .collect();
    if args.output.json {
        println!(
            "{}",
            super::json::line(
                &serde_json::json!({ "event": "calibration", "experiment": outcome.experiment, "effect": args.effect, "power": args.power, "alpha": rule.alpha, "noise": rule.noise, "simulation": {"experiments": SIMULATED, "seed": SIMULATION_SEED}, "workloads": rows })
            )?
        );
        return Ok(Exit::Success);
    }
    if !args.output.quiet {
        println!("\nA/A calibration, experiment {} ({} points): false verdicts (worse or better) should be at most α = {} of the points after FDR control", outcome.experiment, c.points.len(), rule.alpha);
        let mut t = Table::new(
            vec![
                "workload (metric)".into(),
                "max CV".into(),
                "paired CI width".into(),
                "A/A points".into(),
                "false verdicts".into(),
                "≈".into(),
                format!(
                    "runs for {:.0}% at {:.0}% power",
                    args.effect * 100.0,
                    args.power * 100.0
                ),
                "simulated power (normal / skewed)".into(),
                "plain test's runs".into(),
            ],
            vec![false, true, true, true, true, true, true, true, true],
        );
        let pct = |v: &serde_json::Value| {
            v.as_f64()
                .map_or("-".to_owned(), |x| format!("{:.1}%", x * 100.0))
        };
        for r in &rows {
            t.push(vec![
                r["workload"].as_str().unwrap_or("").to_owned(),
                pct(&r["max_cv"]),
                format!("×{:.2}", r["pairing_gain"].as_f64().unwrap_or(1.0)),
                r["points"].to_string(),
                r["false_verdicts"].to_string(),
                r["equivalent"].to_string(),
                runs_text(r["runs_recommended"].as_u64()),
                format!("{} / {}", pct(&r["power_normal"]), pct(&r["power_skewed"])),
                runs_text(r["runs_for_plain_test"].as_u64()),
            ]);
        }
        print!("{}", t.render(super::color()));
        println!(
            "runs: per configuration for isolab's rule (worse when significant after FDR and the estimated change beyond ±{:.0}%), at the effective CV (max CV × the paired CI width against the unpaired one); closed form Φ((effect − max(Δ, z·s))/s), s = CV·√(2/n)·√(π/3), then raised until {} simulated experiments (seed {:#x}, normal and log-normal noise, exact tests) reach the power; the plain test's n = ⌈2·(z₁₋α/₂ + z_power)²·(CV/effect)²⌉ for comparison. Set repetitions.min from it (the runner stops a cell earlier once its comparisons are decided).",
            rule.noise * 100.0,
            SIMULATED,
            SIMULATION_SEED
        );
        let mut t = Table::new(
            std::iter::once("workload (metric)".to_owned())
                .chain(NOISE_LEVELS.iter().map(|n| format!("noise = {n}")))
                .collect(),
            std::iter::once(false)
                .chain(NOISE_LEVELS.iter().map(|_| true))
                .collect(),
        );
        for r in &rows {
            t.push(
                std::iter::once(r["workload"].as_str().unwrap_or("").to_owned())
                    .chain(
                        NOISE_LEVELS
                            .iter()
                            .map(|n| runs_text(r["runs_for_noise"][format!("{n}")].as_u64())),
                    )
                    .collect(),
            );
        }
        println!("\nThe Δ this host can decide: runs per cell before an unchanged point is called ≈ with {:.0}% probability, for each `[experiment] noise` (the runner stops a compared cell only once it is decided; set repetitions.max at least this high)", args.power * 100.0);
        print!("{}", t.render(super::color()));
        println!(
            "details: isolab compare {} --a replica=a --b replica=b",
            outcome.experiment
        );
    }
    Ok(Exit::Success)
}

/// The noise thresholds whose runs `calibrate` lists.
const NOISE_LEVELS: [f64; 4] = [0.005, 0.01, 0.02, 0.05];

/// Simulated experiments per check of the recommended runs.
const SIMULATED: usize = 2000;
/// The simulation's seed (fixed: the same calibration gives the same plan).
const SIMULATION_SEED: u64 = 0x15_01ab;

/// Runs per configuration and the simulated power at that number.
struct Plan {
    runs: Option<u32>,
    normal: Option<f64>,
    skewed: Option<f64>,
}

/// The runs at which the rule calls `effect` at a CV of `cv` with `power`: the closed
/// form of [`runs_for_verdict`], raised until the seeded simulation with the exact
/// tests reaches the power under normal and log-normal noise.
fn plan(cv: f64, effect: f64, rule: &VerdictRule, power: f64) -> Plan {
    let first = runs_for_verdict(cv, effect, rule, power);
    if first == u32::MAX || first > 2000 {
        // Never (the effect is inside the noise threshold), or too many runs to be
        // worth simulating: the closed form's number, without a simulated power.
        return Plan {
            runs: (first != u32::MAX).then_some(first),
            normal: None,
            skewed: None,
        };
    }
    let simulate = |n: u32, noise: Noise| {
        let design = Design {
            cv,
            effect,
            n,
            paired: true,
            noise,
            drift: 0.0,
            sequential_from: None,
        };
        simulate_verdicts(&design, rule, SIMULATED, SIMULATION_SEED).worse
    };
    let mut n = first;
    loop {
        let (normal, skewed) = (simulate(n, Noise::Normal), simulate(n, Noise::LogNormal));
        if (normal >= power && skewed >= power) || n >= first.saturating_mul(2) {
            return Plan {
                runs: Some(n),
                normal: Some(normal),
                skewed: Some(skewed),
            };
        }
        n += (n / 10).max(1);
    }
}

fn runs_text(runs: Option<u64>) -> String {
    match runs {
        Some(n) if n < u64::from(u32::MAX) => n.to_string(),
        _ => "never (effect ≤ threshold)".into(),
    }
}
