//! `isolab export EXP --format csv|json|benchstat`: one row per metric observation;
//! `isolab export EXP --series --format csv|json`: one row per load interval;
//! `isolab export --bundle FILE EXP…`: the experiments whole, into a bundle file.

use std::path::Path;

use anyhow::{bail, Context, Result};
use isolab_report::export::Format;

use super::Exit;
use crate::cli::{ExportArgs, ExportFormat};
use crate::host;

pub fn export(db: &Path, args: ExportArgs) -> Result<Exit> {
    let store = host::existing_store(db)?;
    if let Some(bundle) = &args.bundle {
        if host::is_url(bundle) {
            bail!(
                "a bundle is a file: --bundle takes a path, got {}",
                bundle.display()
            );
        }
        let mut to = host::open_store(bundle)?;
        super::store::copy(&store, &mut to, &args.experiments)?;
        return Ok(Exit::Success);
    }
    let [experiment] = &args.experiments[..] else {
        bail!("export writes one experiment's rows; name one, or use --bundle FILE for several");
    };
    let id = store.resolve(experiment)?;
    let format = match args.format {
        ExportFormat::Csv => Format::Csv,
        ExportFormat::Json => Format::Json,
        ExportFormat::Benchstat => Format::Benchstat,
    };
    let text = if args.series {
        let rows = store.interval_observations(id)?;
        let Some(text) = isolab_report::export::render_intervals(format, &rows) else {
            bail!("--series exports load intervals as csv or json; benchstat has no form for them: use --format csv or --format json");
        };
        if rows.is_empty() {
            eprintln!(
                "experiment {id} has no load intervals: only service workloads driven by a load generator record them"
            );
        }
        text
    } else {
        let obs = store.observations(id)?;
        // benchstat's file-level configuration: the cpu, as `go test` writes it.
        let config: Vec<(String, String)> = store
            .environment(id)?
            .into_iter()
            .filter(|(k, _)| k == "cpu_model")
            .map(|(_, v)| ("cpu".to_owned(), v))
            .collect();
        isolab_report::export::render(format, &obs, &config)
    };
    match args.output {
        Some(path) => std::fs::write(&path, text)
            .with_context(|| format!("cannot write {}", path.display()))?,
        None => print!("{text}"),
    }
    Ok(Exit::Success)
}
