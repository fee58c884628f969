//! Named volumes through a Docker-compatible command line (`docker volume …`,
//! `podman volume …`: the same subcommands and flags), for storage `volume`: created
//! with the [`LABEL`] by which [`gc`] lists them, inspected for the host directory
//! that holds their data, removed by name.

use std::path::PathBuf;

use crate::tool::{run_ok, Tools};
use crate::EngineError;

/// The label of every named volume isolab creates.
pub(crate) const LABEL: &str = "isolab.storage";

/// The engine's command line `cli` (its program and global flags) with `args`.
fn with(cli: &[String], args: &[&str]) -> Vec<String> {
    let mut v = cli.to_vec();
    v.extend(args.iter().map(|a| (*a).to_owned()));
    v
}

/// Creates volume `name` and returns the directory that holds its data; a volume
/// whose directory the engine does not say is removed again.
pub(crate) fn create(
    tools: &dyn Tools,
    engine: &'static str,
    cli: &[String],
    name: &str,
) -> Result<PathBuf, EngineError> {
    let label = format!("{LABEL}=1");
    run_ok(
        tools,
        engine,
        &with(cli, &["volume", "create", "--label", &label, name]),
    )?;
    let inspect = with(
        cli,
        &["volume", "inspect", "--format", "{{.Mountpoint}}", name],
    );
    match run_ok(tools, engine, &inspect) {
        Ok(dir) if !dir.trim().is_empty() => Ok(PathBuf::from(dir.trim())),
        Ok(_) => {
            let _ = remove(tools, engine, cli, name);
            Err(EngineError::Unsupported {
                engine,
                detail: format!("volume {name} has no mount point on this host"),
            })
        }
        Err(e) => {
            let _ = remove(tools, engine, cli, name);
            Err(e)
        }
    }
}

/// Removes volume `name`.
pub(crate) fn remove(
    tools: &dyn Tools,
    engine: &'static str,
    cli: &[String],
    name: &str,
) -> Result<(), EngineError> {
    run_ok(
        tools,
        engine,
        &with(cli, &["volume", "rm", "--force", name]),
    )
    .map(|_| ())
}

/// Removes isolab's volumes whose name starts with `prefix`; one line each.
pub(crate) fn gc(
    tools: &dyn Tools,
    engine: &'static str,
    cli: &[String],
    prefix: &str,
) -> Result<Vec<String>, EngineError> {
    let filter = format!("label={LABEL}");
    let list = with(cli, &["volume", "ls", "--quiet", "--filter", &filter]);
    let mut removed = Vec::new();
    for name in run_ok(tools, engine, &list)?.lines().map(str::trim) {
        if name.starts_with(prefix) {
            remove(tools, engine, cli, name)?;
            removed.push(format!("{engine} volume {name}"));
        }
    }
    Ok(removed)
}
