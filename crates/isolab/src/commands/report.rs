//! `isolab report EXP`: the self-contained HTML report.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::Exit;
use crate::cli::ReportArgs;
use crate::host;

pub fn report(db: &Path, args: ReportArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve(&args.experiment)?;
    let data = isolab_report::ExperimentData::load(&store, id)?;
    let mut analysis = super::analyse(&data, args.all_metrics);
    analysis.trend = super::trend::history_trend(&store, id, None)?;
    let html = isolab_report::html::html(&data, &analysis);
    let path = args
        .output
        .unwrap_or_else(|| PathBuf::from(format!("isolab-report-{id}.html")));
    std::fs::write(&path, html)
        .with_context(|| format!("cannot write the report to {}", path.display()))?;
    println!("{}", path.display());
    Ok(Exit::Success)
}
