//! `isolab advise EXP`: the seeds' best practices checked on a stored experiment
//! ([`isolab_report::advice`]).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::Result;
use isolab_report::advice::{advise as check_rules, Environment, Input, Outcome};
use isolab_report::compare::CompareOptions;

use super::Exit;
use crate::cli::AdviseArgs;
use crate::host;

pub fn advise(db: &Path, args: AdviseArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve(&args.experiment)?;
    let data = isolab_report::ExperimentData::load(&store, id)?;
    let compare = CompareOptions {
        rule: super::compare::rule(args.verdict.alpha, args.verdict.noise)?,
        ..CompareOptions::default()
    };
    let options = super::summary_options(&data, false);
    let analysis = isolab_report::analyse(&data, options, &compare);
    let input = Input {
        data: &data,
        analysis: &analysis,
        compare,
        platforms: platforms(&data),
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

/// The environment of every platform level of the stored spec's cells, or why the
/// stored spec cannot be read (the rules that need platforms then say so).
fn platforms(
    data: &isolab_report::ExperimentData,
) -> Result<BTreeMap<String, Environment>, String> {
    let anywhere = isolab_lab::HostFacts {
        cpus: (0..4096).collect(),
        storage: None,
    };
    let spec = super::stored_spec(&data.record, &anywhere).map_err(|e| format!("{e:#}"))?;
    Ok(spec
        .cells
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
        .collect())
}
