//! `isolab advise EXP`: the seeds' best practices checked on a stored experiment
//! ([`isolab_report::advice`]).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use isolab_report::advice::{advise as check_rules, Environment, Input, MultitaskPair, Outcome};
use isolab_report::compare::CompareOptions;

use super::Exit;
use crate::cli::AdviseArgs;
use crate::host;

pub fn advise(db: &Path, args: AdviseArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve(&args.experiment)?;
    let data = isolab_report::ExperimentData::load(&store, id)?;
    // The stored spec, or why it cannot be read (the rules that need its platforms then
    // say so).
    let spec = super::stored_spec_anywhere(&data.record).map_err(|e| format!("{e:#}"));
    let compare = CompareOptions {
        rule: super::compare::rule(&args.verdict, &super::spec_rule(spec.as_ref().ok()))?,
        ..CompareOptions::default()
    };
    let options = super::spec_options(&data, spec.as_ref().ok(), false);
    let analysis = isolab_report::analyse(&data, options, &compare);
    let input = Input {
        data: &data,
        analysis: &analysis,
        compare,
        platforms: spec.as_ref().map(platforms).map_err(Clone::clone),
        multitask: spec
            .as_ref()
            .map(|s| multitask_pairs(s, &data))
            .unwrap_or_default(),
    };
    let advice = check_rules(&input);
    if args.json {
        println!("{}", super::json::document("advice", &advice)?);
        return Ok(Exit::Success);
    }
    let r = &data.record;
    println!(
        "experiment {} ({}): {} rules of the seeds' best practices",
        r.id,
        r.name,
        advice.len()
    );
    for a in &advice {
        println!("\n[{}] {}: {}", a.outcome.word(), a.rule, a.practice);
        println!("  source: {}", a.source);
        match &a.outcome {
            Outcome::Applies { evidence } | Outcome::DoesNotApply { evidence } => {
                for e in evidence {
                    println!("  - {e}");
                }
            }
            Outcome::CannotCheck { missing } => println!("  needs: {missing}"),
        }
    }
    Ok(Exit::Success)
}

/// The environment of every platform level of the stored spec's cells.
fn platforms(spec: &isolab_lab::ExperimentSpec) -> BTreeMap<String, Environment> {
    spec.cells
        .iter()
        .map(|c| {
            let p = &c.platform;
            let emulated = p.accel == Some(isolab_lab::platform::Accel::Tcg);
            let env = if p.kind.is_vm() {
                if p.kind.to_string().contains('+') {
                    Environment::VmContainer { emulated }
                } else {
                    Environment::Vm { emulated }
                }
            } else if p.kind.to_string() == "host" {
                Environment::BareMetal
            } else {
                Environment::Container
            };
            (p.name.clone(), env)
        })
        .collect()
}

/// Seed 002's multitasking pairs among the spec's workloads: two that do the same work
/// (the same amount of the same inputs, as their assets name them), one of which
/// reports the `processes` it split the work into in `data` and the other not.
fn multitask_pairs(
    spec: &isolab_lab::ExperimentSpec,
    data: &isolab_report::ExperimentData,
) -> Vec<MultitaskPair> {
    let mut workloads: Vec<&isolab_workloads::WorkloadDef> = Vec::new();
    for c in &spec.cells {
        if !workloads.iter().any(|w| w.name == c.workload.name) {
            workloads.push(&c.workload);
        }
    }
    // The workloads whose runs report the processes they split their work into.
    let cell_workload: BTreeMap<i64, &str> = data
        .cells
        .iter()
        .filter_map(|c| {
            let w = c.levels.iter().find(|(f, _)| f == "workload")?;
            Some((c.id, w.1.as_str()))
        })
        .collect();
    let splitting: std::collections::BTreeSet<&str> = data
        .runs
        .iter()
        .filter(|r| r.metrics.iter().any(|m| m.name == "processes"))
        .filter_map(|r| cell_workload.get(&r.cell).copied())
        .collect();
    let splits = |name: &str| splitting.contains(name);
    let inputs = |w: &isolab_workloads::WorkloadDef| -> Vec<String> {
        w.assets.iter().map(|a| a.name.clone()).collect()
    };
    let mut pairs = Vec::new();
    for one in &workloads {
        for split in &workloads {
            let same_work = one.name != split.name
                && one.work.as_ref().map(|w| w.amount) == split.work.as_ref().map(|w| w.amount)
                && one.work.is_some()
                && !one.assets.is_empty()
                && inputs(one) == inputs(split);
            if same_work && splits(&split.name) && !splits(&one.name) {
                pairs.push(MultitaskPair {
                    one_job: one.name.clone(),
                    split: split.name.clone(),
                });
            }
        }
    }
    pairs
}
