//! `isolab gate EXP|SPEC`: a stored experiment (or SPEC, run first) decided against a
//! reference from the store's history ([`isolab_report::gate`]), refused when the
//! reference's host fingerprint differs unless the drift is allowed; and `isolab tag`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::{bail, Result};
use isolab_report::fingerprint::{self, Drift};
use isolab_report::gate::{gate as decide, gate_table, GateInput};
use isolab_report::ExperimentData;
use isolab_store::{ExperimentId, ExperimentStatus, Store};

use super::run::{execute, Settings, Start};
use super::Exit;
use crate::cli::{GateArgs, TagArgs};
use crate::host;

/// An earlier experiment of the candidate's spec: its id, the cell keys it shares with
/// the candidate (same levels, same workload definition) and its drift.
pub(super) struct Earlier {
    pub(super) id: ExperimentId,
    pub(super) cells: BTreeSet<String>,
    drift: Vec<Drift>,
}

/// The stored spec's cell keys with their workload digests; empty when it no longer
/// parses (then no cell can be matched).
fn digests(record: &isolab_store::ExperimentRecord) -> BTreeMap<String, String> {
    super::stored_spec_anywhere(record)
        .map(|s| s.workload_digests())
        .unwrap_or_default()
}

/// The complete experiments created before `candidate` that share at least one cell
/// with it, newest first.
pub(super) fn earlier(store: &Store, candidate: ExperimentId) -> Result<Vec<Earlier>> {
    let record = store.experiment(candidate)?;
    let mine = digests(&record);
    let print = fingerprint::fingerprint(&store.environment(candidate)?);
    let mut out = Vec::new();
    let mut all = store.experiments()?;
    all.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
    for e in all {
        if e.id == candidate
            || e.status != ExperimentStatus::Complete
            || e.created_at > record.created_at
        {
            continue;
        }
        // Cheap first: shared cell keys; then the workload definitions.
        let keys: BTreeSet<String> = store
            .cells(e.id)?
            .into_iter()
            .map(|c| c.key)
            .filter(|k| mine.contains_key(k))
            .collect();
        if keys.is_empty() {
            continue;
        }
        let theirs = digests(&store.experiment(e.id)?);
        let cells: BTreeSet<String> = keys
            .into_iter()
            .filter(|k| theirs.get(k) == mine.get(k))
            .collect();
        if cells.is_empty() {
            continue;
        }
        let drift =
            fingerprint::drift(&fingerprint::fingerprint(&store.environment(e.id)?), &print);
        out.push(Earlier {
            id: e.id,
            cells,
            drift,
        });
    }
    Ok(out)
}

/// The reference: the latest `k` tagged experiments, or the latest `k` on the candidate's
/// fingerprint when at least [`isolab_stats::MIN_HISTORY`] are, else the latest `k`
/// whatever their fingerprint (whose drift must then be allowed). Returns it with how
/// it was chosen.
fn reference(
    store: &Store,
    earlier: Vec<Earlier>,
    args: &GateArgs,
) -> Result<(Vec<Earlier>, String)> {
    if let Some(tag) = &args.reference {
        let tagged = store.tagged(tag)?;
        if tagged.is_empty() {
            bail!("no experiment is tagged `{tag}`: tag the reference with `isolab tag EXP {tag}`");
        }
        let chosen: Vec<Earlier> = earlier
            .into_iter()
            .filter(|e| tagged.contains(&e.id))
            .take(args.history.max(1))
            .collect();
        if chosen.is_empty() {
            bail!("the experiments tagged `{tag}` ({tagged:?}) share no cell and workload definition with the candidate, or are not complete and older than it");
        }
        let n = chosen.len();
        return Ok((chosen, format!("the latest {n} tagged {tag}")));
    }
    let k = args.history.max(1);
    let same = earlier
        .iter()
        .filter(|e| e.drift.is_empty())
        .take(k)
        .count();
    if same >= isolab_stats::MIN_HISTORY {
        let chosen = earlier
            .into_iter()
            .filter(|e| e.drift.is_empty())
            .take(k)
            .collect();
        return Ok((
            chosen,
            format!("the latest {same} of the same spec on this fingerprint"),
        ));
    }
    let chosen: Vec<Earlier> = earlier.into_iter().take(k).collect();
    let n = chosen.len();
    Ok((chosen, format!("the latest {n} of the same spec")))
}

pub fn gate(db: &Path, args: GateArgs) -> Result<Exit> {
    let (store, candidate) = candidate(db, &args)?;
    let record = store.experiment(candidate)?;
    if record.status != ExperimentStatus::Complete {
        bail!(
            "experiment {candidate} ({}) is {}: a gate decides a complete experiment (finish it with `isolab run --resume {candidate}`)",
            record.name,
            record.status.as_str()
        );
    }
    let (chosen, rule_text) = reference(&store, earlier(&store, candidate)?, &args)?;
    let allowed: BTreeSet<&str> = args.allow_drift.iter().map(String::as_str).collect();
    let mut drift: Vec<Drift> = Vec::new();
    for e in &chosen {
        for d in &e.drift {
            if !drift.iter().any(|x| x.key == d.key) {
                drift.push(d.clone());
            }
        }
    }
    let refused: Vec<&Drift> = drift
        .iter()
        .filter(|d| !allowed.contains(d.key.as_str()))
        .collect();
    if !refused.is_empty() {
        let ids: Vec<String> = chosen
            .iter()
            .filter(|e| e.drift.iter().any(|d| !allowed.contains(d.key.as_str())))
            .map(|e| e.id.to_string())
            .collect();
        let keys: Vec<&str> = refused.iter().map(|d| d.key.as_str()).collect();
        eprintln!(
            "gate: refused: the host fingerprint of experiment {candidate} differs from reference experiment{} {}: {}\n\
             A result across this drift is not the same measurement. Accept it with --allow-drift {} (the drift is then named as a candidate cause), \
             or decide against experiments on this fingerprint (run the spec again, or tag a new reference with `isolab tag`).",
            if ids.len() == 1 { "" } else { "s" },
            ids.join(", "),
            fingerprint::describe(&refused.into_iter().cloned().collect::<Vec<_>>()),
            keys.join(",")
        );
        return Ok(Exit::Refused);
    }
    let data = ExperimentData::load(&store, candidate)?;
    let reference: Vec<ExperimentData> = chosen
        .iter()
        .map(|e| ExperimentData::load(&store, e.id))
        .collect::<Result<_, _>>()?;
    let same_cell = |i: usize, key: &str| chosen[i].cells.contains(key);
    let primary = super::summary_options(&data, args.all_metrics).primary;
    let g = decide(&GateInput {
        candidate: &data,
        reference: &reference,
        same_cell: &same_cell,
        reference_rule: rule_text,
        drift,
        primary: &primary,
        all_metrics: args.all_metrics,
        rule: super::stored_rule(&record),
    });
    match super::table_style(args.format.get()) {
        None => println!("{}", super::json::document("gate", &g)?),
        Some(style) => print!("{}", gate_table(&g, style)),
    }
    Ok(if g.worse > 0 {
        Exit::Worse
    } else if args.strict && g.undecided > 0 {
        Exit::Undecided
    } else {
        Exit::Success
    })
}

/// The experiment to decide: the stored one named, or a spec file run now.
fn candidate(db: &Path, args: &GateArgs) -> Result<(Store, ExperimentId)> {
    let path = Path::new(&args.target);
    if !path.is_file() {
        let store = host::existing_store(db)?;
        let id = store.resolve(&args.target)?;
        return Ok((store, id));
    }
    let facts = host::facts()?;
    let spec = super::load_spec(path, &facts)?;
    let settings = Settings {
        workdir: args.workdir.clone(),
        keep_workdirs: false,
        quiet: args.format.get() == crate::cli::TableFormat::Json,
        json: false,
    };
    let (store, outcome) = execute(host::open_store(db)?, &spec, Start::New, &settings)?;
    if outcome.status != ExperimentStatus::Complete {
        bail!(
            "experiment {} of {} ended {}: nothing to decide (resume it with `isolab run --resume {}`, then `isolab gate {}`)",
            outcome.experiment,
            path.display(),
            outcome.status.as_str(),
            outcome.experiment,
            outcome.experiment
        );
    }
    Ok((store, outcome.experiment))
}

pub fn tag(db: &Path, args: TagArgs) -> Result<Exit> {
    let tag = args.tag.trim();
    if tag.is_empty() || tag.parse::<i64>().is_ok() || tag.chars().any(char::is_whitespace) {
        bail!(
            "a tag is a word that is not a number, e.g. baseline-2026-11; got `{}`",
            args.tag
        );
    }
    let mut store = host::existing_store(db)?;
    let id = store.resolve(&args.experiment)?;
    let what = if args.remove {
        if store.untag(id, tag)? {
            "removed from"
        } else {
            "was not on"
        }
    } else if store.tag(id, tag)? {
        "added to"
    } else {
        "was already on"
    };
    let now: Vec<ExperimentId> = store.tagged(tag)?;
    println!(
        "tag `{tag}` {what} experiment {id}; it tags {}",
        if now.is_empty() {
            "no experiment".to_owned()
        } else {
            format!(
                "experiment{} {}",
                if now.len() == 1 { "" } else { "s" },
                now.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    Ok(Exit::Success)
}
