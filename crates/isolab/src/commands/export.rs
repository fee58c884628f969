//! `isolab export EXP --format csv|json|benchstat`: one row per metric observation.

use std::path::Path;

use anyhow::{Context, Result};
use isolab_report::export::Format;

use super::Exit;
use crate::cli::{ExportArgs, ExportFormat};
use crate::host;

pub fn export(db: &Path, args: ExportArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    let id = store.resolve(&args.experiment)?;
    let obs = store.observations(id)?;
    let format = match args.format {
        ExportFormat::Csv => Format::Csv,
        ExportFormat::Json => Format::Json,
        ExportFormat::Benchstat => Format::Benchstat,
    };
    // benchstat's file-level configuration: the cpu, as `go test` writes it.
    let config: Vec<(String, String)> = store
        .environment(id)?
        .into_iter()
        .filter(|(k, _)| k == "cpu_model")
        .map(|(_, v)| ("cpu".to_owned(), v))
        .collect();
    let text = isolab_report::export::render(format, &obs, &config);
    match args.output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(Exit::Success)
}
