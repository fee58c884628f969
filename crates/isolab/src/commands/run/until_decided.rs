//! `isolab run --resume EXP --until-decided --a LEVELS --b LEVELS`: a stored
//! experiment's cells A and B in further rounds until the comparison of B against A is
//! decided (the lab's [`UntilDecided`] rule) or they reach `max`, then the comparison
//! as `isolab compare EXP --a LEVELS --b LEVELS` prints it.

use std::path::Path;

use anyhow::{bail, Result};
use isolab_lab::runner::UntilDecided;
use isolab_lab::ExperimentSpec;
use isolab_report::compare::CompareOptions;
use isolab_store::ExperimentStatus;

use super::{execute, interrupted, write_report, Settings, Start};
use crate::cli::{RunArgs, TableFormat};
use crate::commands::{compare, Exit};
use crate::host;

pub fn run(db: &Path, args: RunArgs) -> Result<Exit> {
    let Some(exp) = args.resume.as_deref() else {
        bail!("--until-decided continues a stored experiment: pass --resume EXP");
    };
    let facts = host::facts()?;
    let store = host::existing_store(db)?;
    let id = store.resolve(exp)?;
    let record = store.experiment(id)?;
    // The spec's warnings were shown when the experiment ran; its cells are the same.
    let spec = crate::commands::stored_spec(&record, &facts)?;
    let (sel_a, sel_b) = (
        compare::selectors(&args.a, "--a")?,
        compare::selectors(&args.b, "--b")?,
    );
    let until = UntilDecided {
        a: select_cell(&spec, id, &sel_a, "--a")?,
        b: select_cell(&spec, id, &sel_b, "--b")?,
    };
    if until.a == until.b {
        bail!(
            "--a and --b select the same cell `{}` of experiment {id}: a comparison of it with itself says nothing; choose another level on one side",
            spec.cells[until.a].key()
        );
    }
    let (store, outcome) = execute(
        store,
        &spec,
        Start::UntilDecided(id, until),
        &Settings::of(&args),
    )?;
    if outcome.status == ExperimentStatus::Interrupted {
        let again = format!(
            " --until-decided --a {} --b {}",
            args.a.join(","),
            args.b.join(",")
        );
        return Ok(interrupted(&store, db, &outcome, &again));
    }

    let data = isolab_report::ExperimentData::load(&store, id)?;
    let a = compare::side(&data, sel_a, false, args.all_metrics);
    let b = compare::side(&data, sel_b, false, args.all_metrics);
    let options = CompareOptions {
        rule: spec.verdict_rule(),
        all_metrics: args.all_metrics,
        ..CompareOptions::default()
    };
    if args.output.json {
        let comparison = isolab_report::compare::compare(&a, &b, &options)?;
        println!(
            "{}",
            super::super::json::line(
                &serde_json::json!({ "event": "comparison", "experiment": id, "comparison": comparison })
            )?
        );
    } else if !args.output.quiet {
        let (label_a, label_b) = (format!("`{}`", a.label), format!("`{}`", b.label));
        println!(
            "\nexperiment {id} ({}): {} runs this time, of {label_a} and {label_b} only",
            spec.name, outcome.runs,
        );
        let max = spec.repetitions.max;
        let at_max: Vec<&str> = [(until.a, &label_a), (until.b, &label_b)]
            .into_iter()
            .filter(|&(i, _)| counted(&data, i) >= max)
            .map(|(_, label)| label.as_str())
            .collect();
        if !at_max.is_empty() {
            println!(
                "{} reached the spec's max of {max} runs: the comparison below is final for this experiment",
                at_max.join(" and ")
            );
        }
        compare::print(&a, &b, &options, TableFormat::Text)?;
    }
    write_report(
        &args,
        &data,
        &super::super::analyse(&data, args.all_metrics),
    )?;
    Ok(super::ending(&outcome))
}

/// Counted runs (failed ones included, as the runner counts them) of cell `index`.
fn counted(data: &isolab_report::ExperimentData, index: usize) -> u32 {
    let id = data.cells[index].id;
    data.runs
        .iter()
        .filter(|r| r.cell == id && !r.warmup)
        .count() as u32
}

/// The index of the one cell of experiment `id`'s `spec` that has every level of
/// `select` (given as `flag`); an error naming the selector and listing the cells when
/// none or several have them.
fn select_cell(
    spec: &ExperimentSpec,
    id: i64,
    select: &[(String, String)],
    flag: &str,
) -> Result<usize> {
    let matching: Vec<usize> = (0..spec.cells.len())
        .filter(|&i| {
            select
                .iter()
                .all(|pair| spec.cells[i].levels.contains(pair))
        })
        .collect();
    let words = flag_words(select);
    // Up to a dozen keys, so that a large matrix's error stays readable.
    let keys = |cells: &[usize]| {
        let mut shown = cells
            .iter()
            .take(12)
            .map(|&i| format!("`{}`", spec.cells[i].key()))
            .collect::<Vec<_>>()
            .join(", ");
        if cells.len() > 12 {
            shown.push_str(&format!(", … ({} in all)", cells.len()));
        }
        shown
    };
    match matching[..] {
        [one] => Ok(one),
        [] => bail!(
            "{flag} {words} matches no cell of experiment {id}: its cells are {}",
            keys(&(0..spec.cells.len()).collect::<Vec<_>>())
        ),
        [first, ..] => bail!(
            "{flag} {words} matches {} cells of experiment {id} ({}): --until-decided compares two cells, so give {flag} the levels of one, e.g. {flag} {}",
            matching.len(),
            keys(&matching),
            flag_words(&spec.cells[first].levels)
        ),
    }
}

/// `factor=level` pairs as a flag takes them: `workload=a,platform=host`.
fn flag_words(levels: &[(String, String)]) -> String {
    levels
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(words: &[&str]) -> Vec<(String, String)> {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        compare::selectors(&words, "--a").unwrap()
    }

    #[test]
    fn a_selector_must_select_one_cell_and_says_which_it_matched() {
        let text = "[experiment]\nname = \"x\"\n[matrix]\nplacement = [\"shared\", \"quota\"]\nworkload = [\"sysbench-cpu\", \"sysbench-memory\"]\n";
        let host = isolab_lab::HostFacts {
            cpus: "0-1".parse().unwrap(),
            storage: Some(isolab_lab::spec::StorageSupport {
                device_mapper: true,
                btrfs: true,
            }),
        };
        let spec = ExperimentSpec::parse(isolab_lab::Source::new("x.toml", text), &host).unwrap();
        let one = pairs(&["placement=quota", "workload=sysbench-memory"]);
        assert_eq!(select_cell(&spec, 4, &one, "--b").unwrap(), 3);
        let none = select_cell(&spec, 4, &pairs(&["workload=fio"]), "--a").unwrap_err();
        assert_eq!(
            none.to_string(),
            "--a workload=fio matches no cell of experiment 4: its cells are `placement=shared workload=sysbench-cpu`, `placement=shared workload=sysbench-memory`, `placement=quota workload=sysbench-cpu`, `placement=quota workload=sysbench-memory`"
        );
        let several = select_cell(&spec, 4, &pairs(&["placement=quota"]), "--b").unwrap_err();
        assert_eq!(
            several.to_string(),
            "--b placement=quota matches 2 cells of experiment 4 (`placement=quota workload=sysbench-cpu`, `placement=quota workload=sysbench-memory`): --until-decided compares two cells, so give --b the levels of one, e.g. --b placement=quota,workload=sysbench-cpu"
        );
    }
}
