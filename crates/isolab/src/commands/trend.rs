//! `isolab trend EXP [--metric M]`: each point of EXP's spec over the stored experiments
//! of that spec, in time order, with change points and fingerprint changes
//! ([`isolab_report::trend`]); the HTML report's trend section comes from here too.

use std::path::Path;

use anyhow::Result;
use isolab_report::trend::{trend as trend_of, trend_table, Trend};
use isolab_report::ExperimentData;
use isolab_store::{ExperimentId, Store};

use super::Exit;
use crate::cli::TrendArgs;
use crate::host;

/// The trend of `id`'s spec: `id` and every earlier complete experiment sharing a cell
/// with it ([`super::gate::earlier`]), oldest first; `metric` or each cell's primary one.
pub fn history_trend(store: &Store, id: ExperimentId, metric: Option<&str>) -> Result<Trend> {
    let earlier = super::gate::earlier(store, id)?;
    let mut experiments: Vec<ExperimentData> = earlier
        .iter()
        .rev()
        .map(|e| ExperimentData::load(store, e.id))
        .collect::<Result<_, _>>()?;
    let newest = ExperimentData::load(store, id)?;
    let spec = super::stored_spec_anywhere(&newest.record).ok();
    let primary = super::spec_options(&newest, spec.as_ref(), false).primary;
    let rule = super::spec_rule(spec.as_ref());
    experiments.push(newest);
    let n = experiments.len();
    let same_cell = |i: usize, key: &str| i + 1 == n || earlier[n - 2 - i].cells.contains(key);
    let metrics_of = |index: u32| match metric {
        Some(m) => vec![m.to_owned()],
        None => primary.get(&index).cloned().into_iter().collect(),
    };
    Ok(trend_of(&experiments, &same_cell, &metrics_of, &rule))
}

pub fn trend(db: &Path, args: TrendArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve(&args.experiment)?;
    let t = history_trend(&store, id, args.metric.as_deref())?;
    match super::table_style(args.format.get()) {
        None => println!("{}", super::json::document("trend", &t)?),
        Some(style) => {
            let experiments: usize = t.lines.iter().map(|l| l.points.len()).max().unwrap_or(0);
            println!(
                "trend of experiment {id}'s spec: {experiments} experiment{} on its longest line",
                if experiments == 1 { "" } else { "s" }
            );
            print!("{}", trend_table(&t, style));
        }
    }
    Ok(Exit::Success)
}
