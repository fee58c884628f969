//! `isolab compare`: B against A, within one experiment or across two.

use std::path::Path;

use anyhow::{bail, Result};
use isolab_report::compare::{compare as compare_sides, CompareOptions, Comparison, Side};
use isolab_report::ExperimentData;
use isolab_stats::VerdictRule;

use super::Exit;
use crate::cli::{CompareArgs, FailOn, TableFormat};
use crate::host;

/// Parses `factor=level` words.
pub fn selectors(words: &[String], flag: &str) -> Result<Vec<(String, String)>> {
    words
        .iter()
        .map(|w| match w.split_once('=') {
            Some((f, l)) if !f.is_empty() && !l.is_empty() => {
                Ok((f.trim().to_owned(), l.trim().to_owned()))
            }
            _ => bail!("{flag} takes factor=level pairs such as `placement=quota`, got `{w}`"),
        })
        .collect()
}

/// The verdict rule of `--alpha` and `--noise`, `--noise` defaulting to `spec`'s rule's
/// (the experiment's `[experiment] noise`).
pub fn rule(verdict: &crate::cli::VerdictArgs, spec: &VerdictRule) -> Result<VerdictRule> {
    let (alpha, noise) = (verdict.alpha, verdict.noise.unwrap_or(spec.noise));
    if !(alpha > 0.0 && alpha < 1.0) {
        bail!("--alpha must be between 0 and 1, got {alpha}");
    }
    if !(0.0..1.0).contains(&noise) {
        bail!("--noise is a fraction between 0 and 1 (0.02 = 2%), got {noise}");
    }
    Ok(VerdictRule { alpha, noise })
}

pub fn compare(db: &Path, args: CompareArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let (sel_a, sel_b) = (selectors(&args.a, "--a")?, selectors(&args.b, "--b")?);
    let first = ExperimentData::load(&store, store.resolve(&args.experiments[0])?)?;
    let options = CompareOptions {
        rule: rule(&args.verdict, &super::stored_rule(&first.record))?,
        bin_width: args.bin_width,
        all_metrics: args.all_metrics,
        ..CompareOptions::default()
    };
    let second = match args.experiments.get(1) {
        Some(e) => Some(ExperimentData::load(&store, store.resolve(e)?)?),
        None => {
            if sel_a.is_empty() || sel_b.is_empty() {
                bail!("comparing within one experiment needs --a and --b, e.g. --a placement=quota --b placement=pinned; or name two experiments");
            }
            None
        }
    };
    if let Some(second) = &second {
        let drift = isolab_report::fingerprint::drift(
            &isolab_report::fingerprint::fingerprint(&first.environment),
            &isolab_report::fingerprint::fingerprint(&second.environment),
        );
        if !drift.is_empty() {
            eprintln!(
                "note: the host fingerprints of experiments {} and {} differ, a candidate cause of any change: {}",
                first.record.id,
                second.record.id,
                isolab_report::fingerprint::describe(&drift)
            );
        }
    }
    let data_b = second.as_ref().unwrap_or(&first);
    let across = second.is_some();
    let a = side(&first, sel_a, across, args.all_metrics);
    let b = side(data_b, sel_b, across, args.all_metrics);
    let comparison = print(&a, &b, &options, args.format.get())?;
    Ok(exit_status(&comparison, &args.fail_on))
}

/// The exit status `--fail-on` asks for: 4 when a point is worse (or, with `changed`,
/// better), else 5 when one is undecided and `undecided` was asked, else 0.
fn exit_status(comparison: &Comparison, fail_on: &[FailOn]) -> Exit {
    let changed = comparison.worse
        + if fail_on.contains(&FailOn::Changed) {
            comparison.better
        } else {
            0
        };
    if changed > 0 && (fail_on.contains(&FailOn::Worse) || fail_on.contains(&FailOn::Changed)) {
        Exit::Worse
    } else if comparison.inconclusive > 0 && fail_on.contains(&FailOn::Undecided) {
        Exit::Undecided
    } else {
        Exit::Success
    }
}

/// The side of a comparison that `select` picks in `data`, named by its levels, and
/// (`across` two experiments) by its experiment.
pub fn side(
    data: &ExperimentData,
    select: Vec<(String, String)>,
    across: bool,
    all_metrics: bool,
) -> Side<'_> {
    let levels = select
        .iter()
        .map(|(f, l)| format!("{f}={l}"))
        .collect::<Vec<_>>()
        .join(" ");
    let label = if across {
        format!(
            "experiment {} ({}){}",
            data.record.id,
            data.record.name,
            if levels.is_empty() {
                String::new()
            } else {
                format!(" {levels}")
            }
        )
    } else {
        levels
    };
    Side {
        data,
        select,
        primary: super::summary_options(data, all_metrics).primary,
        label,
    }
}

/// Compares `b` against `a`, prints the comparison in `format` and returns it.
pub fn print(
    a: &Side,
    b: &Side,
    options: &CompareOptions,
    format: TableFormat,
) -> Result<Comparison> {
    let comparison = compare_sides(a, b, options)?;
    match super::table_style(format) {
        None => println!("{}", super::json::document("comparison", &comparison)?),
        Some(style) => print!(
            "{}",
            isolab_report::table::comparison_table(&comparison, style)
        ),
    }
    Ok(comparison)
}
