//! `isolab store copy SRC DST [EXP...]`: experiments from one results store to another;
//! `isolab import BUNDLE`, the same from a bundle that `isolab export --bundle` wrote.

use std::path::Path;

use anyhow::{bail, Context, Result};
use isolab_store::{Error as StoreError, Store};

use super::Exit;
use crate::cli::StoreCommand;
use crate::host;

pub fn store(command: StoreCommand) -> Result<Exit> {
    match command {
        StoreCommand::Copy {
            src,
            dst,
            experiments,
        } => {
            let from = host::existing_store(&src)?;
            let mut to = host::open_store(&dst)?;
            copy(&from, &mut to, &experiments)?;
            Ok(Exit::Success)
        }
    }
}

/// `isolab import BUNDLE`: every experiment of the bundle into the store `db`.
pub fn import(db: &Path, bundle: &Path) -> Result<Exit> {
    if !bundle.is_file() {
        bail!(
            "no bundle at {}: make one with `isolab export --bundle FILE EXP…`",
            bundle.display()
        );
    }
    let from = host::existing_store(bundle)?;
    let mut to = host::open_store(db)?;
    copy(&from, &mut to, &[])?;
    Ok(Exit::Success)
}

/// Copies `experiments` (ids or names; every one when empty) from `from` to `to`, each
/// whole or not at all, skipping those `to` holds; prints a line each and a total.
pub fn copy(from: &Store, to: &mut Store, experiments: &[String]) -> Result<()> {
    let ids = if experiments.is_empty() {
        let mut all: Vec<i64> = from.experiments()?.iter().map(|e| e.id).collect();
        all.sort_unstable();
        all
    } else {
        experiments
            .iter()
            .map(|e| from.resolve(e))
            .collect::<Result<Vec<_>, _>>()?
    };
    let (mut copied, mut skipped) = (0, 0);
    for id in ids {
        let record = from.experiment(id)?;
        match from.copy_experiment(id, to) {
            Ok(new) => {
                copied += 1;
                println!(
                    "copied experiment {id} ({}, {} runs) to {} as experiment {}",
                    record.name,
                    new.runs,
                    to.location(),
                    new.id
                );
            }
            Err(e @ StoreError::AlreadyCopied { .. }) => {
                skipped += 1;
                println!("skipped: {e}");
            }
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "copying experiment {id} ({}) stopped; the experiments \
                         copied before it are complete in {}, this one is not \
                         there at all: fix the cause and run the copy again",
                        record.name,
                        to.location()
                    )
                })
            }
        }
    }
    println!(
        "{copied} copied, {skipped} already there, from {} to {}",
        from.location(),
        to.location()
    );
    Ok(())
}
