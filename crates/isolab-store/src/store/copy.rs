//! Copying an experiment with everything stored about it into another store
//! ([`Store::copy_experiment`]).

use std::collections::HashMap;

use crate::backend::{args, Begin};
use crate::encoding::time_to_millis;
use crate::error::Error;
use crate::model::{CellId, ExperimentId, Interruption, NewCell, NewExperiment, NewRun};

use super::experiments::{create_experiment, read_cells};
use super::runs::{insert_run, record_interruption};
use super::Store;

/// An experiment [`Store::copy_experiment`] copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    /// Its id in the store it was copied to.
    pub id: ExperimentId,
    /// How many runs (warm-ups and failures included) it holds.
    pub runs: usize,
}

impl Store {
    /// Copies experiment `id` with everything stored about it (environment, cells and
    /// their stop reasons, every run with its metrics, telemetry, series, load intervals,
    /// notes and logs, interruptions, tags, status and times) into the store `to`, in one
    /// transaction there: the copy is whole or absent, and this store is only read. Ids
    /// are `to`'s own; the new experiment's id is returned with how many runs it holds.
    ///
    /// Refuses an experiment `to` already holds (same name, seed and creation time), so
    /// that copying twice never doubles its runs ([`Error::AlreadyCopied`]).
    pub fn copy_experiment(&self, id: ExperimentId, to: &mut Store) -> Result<Copied, Error> {
        let e = self.experiment(id)?;
        let environment = self.environment(id)?;
        let cells = self.cells(id)?;
        let runs = self.runs(id)?;
        let interruptions = self.interruptions(id)?;
        let tags = self.tags(id)?;
        let what = || {
            format!(
                "copying experiment {id} (`{}`) from {} to {}",
                e.name, self.location, to.location
            )
        };
        let tx = to.begin(Begin::Write, what)?;
        let db = tx.db();
        let existing: Option<ExperimentId> = db.query_optional(
            "SELECT id FROM experiments \
             WHERE name = ?1 AND seed = ?2 AND created_at_ms = ?3 ORDER BY id LIMIT 1",
            &args![e.name, e.seed.to_string(), time_to_millis(e.created_at)],
            what,
            |r| r.get(0),
        )?;
        if let Some(existing) = existing {
            return Err(Error::AlreadyCopied {
                experiment: id,
                name: e.name.clone(),
                store: to.location.clone(),
                existing,
            });
        }
        let copy = create_experiment(
            db,
            &NewExperiment {
                name: e.name.clone(),
                spec_toml: e.spec_toml.clone(),
                spec_path: e.spec_path.clone(),
                seed: e.seed,
                isolab_version: e.isolab_version.clone(),
                created_at: e.created_at,
                cells: cells
                    .iter()
                    .map(|c| NewCell {
                        index: c.index,
                        key: c.key.clone(),
                        levels: c.levels.clone(),
                    })
                    .collect(),
                environment,
            },
        )?;
        let by_index: HashMap<u32, CellId> = read_cells(db, copy)?
            .into_iter()
            .map(|c| (c.index, c.id))
            .collect();
        let new_cell: HashMap<CellId, CellId> = cells
            .iter()
            .filter_map(|c| by_index.get(&c.index).map(|&new| (c.id, new)))
            .collect();
        let cell_of = |old: CellId| {
            new_cell.get(&old).copied().ok_or(Error::NoSuchCell {
                cell: old,
                experiment: Some(id),
                context: "a run or interruption names it, but the experiment has no such cell"
                    .to_owned(),
            })
        };
        for c in &cells {
            if let Some(reason) = &c.stop_reason {
                db.execute(
                    "UPDATE cells SET stop_reason = ?2 WHERE id = ?1",
                    &args![cell_of(c.id)?, reason],
                    what,
                )?;
            }
        }
        for r in &runs {
            let (stdout, stderr) = self.run_logs(r.id)?;
            insert_run(
                db,
                &NewRun {
                    cell: cell_of(r.cell)?,
                    repetition: r.repetition,
                    warmup: r.warmup,
                    round: r.round,
                    status: r.status,
                    exit_code: r.exit_code,
                    started_at: r.started_at,
                    wall: r.wall,
                    stdout,
                    stderr,
                    error: r.error.clone(),
                    limits: (*r.limits).clone(),
                    metrics: r.metrics.clone(),
                    telemetry: r.telemetry.clone(),
                    series: self.series(r.id)?,
                    intervals: self.intervals(r.id)?,
                    notes: r.notes.clone(),
                },
            )?;
        }
        for i in &interruptions {
            record_interruption(
                db,
                &Interruption {
                    experiment: copy,
                    cell: cell_of(i.cell)?,
                    ..i.clone()
                },
            )?;
        }
        for name in &tags {
            super::tags::tag(db, copy, name)?;
        }
        db.execute(
            "UPDATE experiments SET status = ?2, finished_at_ms = ?3 WHERE id = ?1",
            &args![copy, e.status.as_str(), e.finished_at.map(time_to_millis)],
            what,
        )?;
        tx.commit(what)?;
        Ok(Copied {
            id: copy,
            runs: runs.len(),
        })
    }
}
