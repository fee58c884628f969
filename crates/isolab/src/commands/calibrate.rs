//! `isolab calibrate`: an A/A run that measures this host's noise.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use isolab_lab::spec::{aa_design, QUICK_START};
use isolab_lab::{ExperimentSpec, Source};
use isolab_report::compare::{compare, CompareOptions, Side};
use isolab_report::table::Table;
use isolab_report::ExperimentData;
use isolab_stats::{runs_for_power, Verdict};
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
    let rule = super::compare::rule(args.verdict.alpha, args.verdict.noise)?;
    let store = host::open_store(db)?;
    let settings = Settings {
        workdir: args.workdir.clone(),
        keep_workdirs: false,
        quiet: args.output.quiet,
        json: args.output.json,
    };
    let (store, outcome) = execute(store, &spec, None, &settings)?;
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

    // Per workload: the worst CV seen, A/A false positives, and runs needed.
    #[derive(Default)]
    struct PerWorkload {
        cv: Vec<f64>,
        points: usize,
        false_positives: usize,
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
        e.points += 1;
        if p.verdict != Verdict::Same {
            e.false_positives += 1;
        }
    }
    let rows: Vec<serde_json::Value> = by
        .iter()
        .map(|(w, e)| {
            let cv = e.cv.iter().copied().fold(0.0_f64, f64::max);
            serde_json::json!({
                "workload": w, "max_cv": cv, "points": e.points, "false_positives": e.false_positives,
                "runs_needed": runs_for_power(cv, args.effect, rule.alpha, args.power),
            })
        })
        .collect();
    if args.output.json {
        println!(
            "{}",
            serde_json::json!({ "event": "calibration", "experiment": outcome.experiment, "effect": args.effect, "power": args.power, "alpha": rule.alpha, "workloads": rows })
        );
        return Ok(Exit::Success);
    }
    if !args.output.quiet {
        println!("\nA/A calibration, experiment {} ({} points): false positives should be at most α = {} of the points after FDR control", outcome.experiment, c.points.len(), rule.alpha);
        let mut t = Table::new(
            vec![
                "workload (metric)".into(),
                "max CV".into(),
                "A/A points".into(),
                "false positives".into(),
                format!(
                    "runs for {:.0}% at {:.0}% power",
                    args.effect * 100.0,
                    args.power * 100.0
                ),
            ],
            vec![false, true, true, true, true],
        );
        for r in &rows {
            t.push(vec![
                r["workload"].as_str().unwrap_or("").to_owned(),
                format!("{:.1}%", r["max_cv"].as_f64().unwrap_or(0.0) * 100.0),
                r["points"].to_string(),
                r["false_positives"].to_string(),
                r["runs_needed"].to_string(),
            ]);
        }
        print!("{}", t.render(super::color()));
        println!("runs needed: n = ⌈2·(z₁₋α/₂ + z_power)²·(CV/effect)²⌉ per configuration (normal approximation of the two-sample t-test); set repetitions.min/max from it");
        println!(
            "details: isolab compare {} --a replica=a --b replica=b",
            outcome.experiment
        );
    }
    Ok(Exit::Success)
}
