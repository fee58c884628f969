//! `isolab export EXP --format csv|json`: one row per metric observation.

use std::path::Path;

use anyhow::{Context, Result};

use super::Exit;
use crate::cli::{ExportArgs, ExportFormat};
use crate::host;

pub fn export(db: &Path, args: ExportArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve(&args.experiment)?;
    let obs = store.observations(id)?;
    let text = match args.format {
        ExportFormat::Csv => isolab_report::export::csv(&obs),
        ExportFormat::Json => isolab_report::export::json(&obs) + "\n",
    };
    match args.output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(Exit::Success)
}
