//! The `experiments`, `cells` and `environment` tables: creating an experiment, finding
//! it, its status, its cells and its environment.

use std::time::SystemTime;

use crate::backend::{args, Begin, FromRow};
use crate::encoding::time_to_millis;
use crate::error::Error;
use crate::model::{
    CellId, CellRecord, ExperimentId, ExperimentRecord, ExperimentStatus, ExperimentSummary,
    NewExperiment, RunStatus,
};

use super::{attach, positions, At, Db, Store};

impl Store {
    /// Creates an experiment, its cells (with their levels) and its environment in one
    /// transaction, with status `running`.
    pub fn create_experiment(&mut self, e: &NewExperiment) -> Result<ExperimentId, Error> {
        let what = || format!("creating experiment `{}`", e.name);
        let tx = self.begin(Begin::Write, what)?;
        let id = create_experiment(tx.db(), e)?;
        tx.commit(what)?;
        Ok(id)
    }

    /// Resolves `"12"` (an id) or a name (the newest experiment with that name) to an id.
    /// A number that is no experiment's id is tried as a name.
    pub fn resolve(&self, id_or_name: &str) -> Result<ExperimentId, Error> {
        let wanted = id_or_name.trim();
        if let Ok(id) = wanted.parse::<ExperimentId>() {
            if experiment_exists(self.db(), id)? {
                return Ok(id);
            }
        }
        let by_name: Option<ExperimentId> = self.db().query_optional(
            "SELECT id FROM experiments WHERE name = ?1 ORDER BY id DESC LIMIT 1",
            &args![wanted],
            || format!("looking up experiment `{wanted}`"),
            |row| row.get(0),
        )?;
        match by_name {
            Some(id) => Ok(id),
            None => Err(missing_experiment(self.db(), wanted)),
        }
    }

    /// The experiment with this id.
    pub fn experiment(&self, id: ExperimentId) -> Result<ExperimentRecord, Error> {
        type Raw = (
            String,
            String,
            Option<String>,
            String,
            String,
            i64,
            Option<i64>,
            String,
        );
        let raw: Option<Raw> = self.db().query_optional(
            "SELECT name, spec_toml, spec_path, seed, isolab_version, created_at_ms, \
             finished_at_ms, status FROM experiments WHERE id = ?1",
            &args![id],
            || format!("reading experiment {id}"),
            Raw::from_row,
        )?;
        let Some((name, spec_toml, spec_path, seed, isolab_version, created, finished, status)) =
            raw
        else {
            return Err(missing_experiment(self.db(), &id.to_string()));
        };
        let at = At::new("experiments", format!("id {id}"));
        Ok(ExperimentRecord {
            id,
            name,
            spec_toml,
            spec_path,
            seed: at.parse("seed", &seed)?,
            isolab_version,
            created_at: at.time("created_at_ms", created)?,
            finished_at: finished
                .map(|ms| at.time("finished_at_ms", ms))
                .transpose()?,
            status: at.parse("status", &status)?,
        })
    }

    /// Every experiment, newest first, with its number of cells and of counted runs.
    pub fn experiments(&self) -> Result<Vec<ExperimentSummary>, Error> {
        self.db().decode_rows(
            "SELECT e.id, e.name, e.status, e.created_at_ms, \
             (SELECT count(*) FROM cells c WHERE c.experiment_id = e.id), \
             (SELECT count(*) FROM runs r WHERE r.experiment_id = e.id \
              AND r.warmup = 0 AND r.status = ?1) \
             FROM experiments e ORDER BY e.id DESC",
            &args![RunStatus::Ok.as_str()],
            || "listing experiments".to_owned(),
            |row: (i64, String, String, i64, i64, i64)| {
                let (id, name, status, created, cells, runs) = row;
                let at = At::new("experiments", format!("id {id}"));
                Ok(ExperimentSummary {
                    id,
                    name,
                    status: at.parse("status", &status)?,
                    created_at: at.time("created_at_ms", created)?,
                    cells: u32::try_from(cells).unwrap_or(u32::MAX),
                    runs: u32::try_from(runs).unwrap_or(u32::MAX),
                })
            },
        )
    }

    /// Sets an experiment's status. Leaving `running` records `at` as its finish time;
    /// going back to `running` (a resume) clears it.
    pub fn set_status(
        &mut self,
        id: ExperimentId,
        status: ExperimentStatus,
        at: SystemTime,
    ) -> Result<(), Error> {
        let finished = (status != ExperimentStatus::Running).then(|| time_to_millis(at));
        let changed = self.db().execute(
            "UPDATE experiments SET status = ?2, finished_at_ms = ?3 WHERE id = ?1",
            &args![id, status.as_str(), finished],
            || format!("setting the status of experiment {id} to {status}"),
        )?;
        if changed == 0 {
            return Err(missing_experiment(self.db(), &id.to_string()));
        }
        Ok(())
    }

    /// The cells of an experiment with their levels, ordered by index.
    pub fn cells(&self, id: ExperimentId) -> Result<Vec<CellRecord>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        read_cells(db, id)
    }

    /// Records why the runner stopped repeating a cell (e.g. `cv 0.031 <= 0.05 after 7 runs`).
    pub fn set_stop_reason(&mut self, cell: CellId, reason: &str) -> Result<(), Error> {
        let changed = self.db().execute(
            "UPDATE cells SET stop_reason = ?2 WHERE id = ?1",
            &args![cell, reason],
            || format!("setting the stop reason of cell {cell}"),
        )?;
        if changed == 0 {
            return Err(Error::NoSuchCell {
                cell,
                experiment: None,
                context: "cannot set its stop reason".to_owned(),
            });
        }
        Ok(())
    }
}

impl Store {
    /// The environment captured for an experiment, in capture order.
    pub fn environment(&self, id: ExperimentId) -> Result<Vec<(String, String)>, Error> {
        let tx = self.read()?;
        let db = tx.db();
        ensure_experiment(db, id)?;
        db.query_rows(
            "SELECT key, value FROM environment WHERE experiment_id = ?1 ORDER BY position",
            &args![id],
            || format!("reading the environment of experiment {id}"),
        )
    }
}

/// [`Store::create_experiment`] inside the caller's write transaction.
pub(crate) fn create_experiment(db: Db<'_>, e: &NewExperiment) -> Result<ExperimentId, Error> {
    let what = || format!("creating experiment `{}`", e.name);
    let id: ExperimentId = db.query_one(
        "INSERT INTO experiments (name, spec_toml, spec_path, seed, isolab_version, \
         created_at_ms, finished_at_ms, status) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7) RETURNING id",
        &args![
            e.name,
            e.spec_toml,
            e.spec_path,
            e.seed.to_string(),
            e.isolab_version,
            time_to_millis(e.created_at),
            ExperimentStatus::Running.as_str(),
        ],
        what,
        |row| row.get(0),
    )?;
    for (position, (key, value)) in e.environment.iter().enumerate() {
        db.execute(
            "INSERT INTO environment (experiment_id, position, key, value) \
             VALUES (?1, ?2, ?3, ?4)",
            &args![id, position as i64, key, value],
            || {
                format!(
                    "storing environment entry `{key}` of experiment `{}`",
                    e.name
                )
            },
        )?;
    }
    for cell in &e.cells {
        let cell_what = || {
            format!(
                "storing cell {} (`{}`) of experiment `{}` (cell indexes and keys \
                 must be unique)",
                cell.index, cell.key, e.name
            )
        };
        let cell_id: CellId = db.query_one(
            "INSERT INTO cells (experiment_id, idx, key, stop_reason) \
             VALUES (?1, ?2, ?3, NULL) RETURNING id",
            &args![id, cell.index, cell.key],
            cell_what,
            |row| row.get(0),
        )?;
        for (position, (factor, level)) in cell.levels.iter().enumerate() {
            db.execute(
                "INSERT INTO cell_levels (cell_id, position, factor, level) \
                 VALUES (?1, ?2, ?3, ?4)",
                &args![cell_id, position as i64, factor, level],
                cell_what,
            )?;
        }
    }
    Ok(id)
}

fn experiment_exists(db: Db<'_>, id: ExperimentId) -> Result<bool, Error> {
    db.query_one(
        "SELECT EXISTS (SELECT 1 FROM experiments WHERE id = ?1)",
        &args![id],
        || format!("looking up experiment {id}"),
        |r| r.get(0),
    )
}

pub(super) fn ensure_experiment(db: Db<'_>, id: ExperimentId) -> Result<(), Error> {
    if experiment_exists(db, id)? {
        Ok(())
    } else {
        Err(missing_experiment(db, &id.to_string()))
    }
}

/// [`Error::NoSuchExperiment`] listing what exists, or the error that prevented listing.
pub(super) fn missing_experiment(db: Db<'_>, requested: &str) -> Error {
    let known = db.query_rows(
        "SELECT id, name FROM experiments ORDER BY id DESC",
        &[],
        || "listing experiments".to_owned(),
    );
    match known {
        Ok(known) => Error::NoSuchExperiment {
            requested: requested.to_owned(),
            known,
        },
        Err(e) => e,
    }
}

pub(super) fn read_cells(db: Db<'_>, id: ExperimentId) -> Result<Vec<CellRecord>, Error> {
    let what = || format!("reading the cells of experiment {id}");
    let mut cells = db.decode_rows(
        "SELECT id, idx, key, stop_reason FROM cells WHERE experiment_id = ?1 \
         ORDER BY idx",
        &args![id],
        what,
        |row: (CellId, i64, String, Option<String>)| {
            let (cell, index, key, stop_reason) = row;
            Ok(CellRecord {
                id: cell,
                index: At::new("cells", format!("id {cell}")).u32("idx", index)?,
                key,
                levels: Vec::new(),
                stop_reason,
            })
        },
    )?;
    let levels: Vec<(CellId, String, String)> = db.query_rows(
        "SELECT l.cell_id, l.factor, l.level FROM cell_levels l \
         JOIN cells c ON c.id = l.cell_id \
         WHERE c.experiment_id = ?1 ORDER BY l.cell_id, l.position",
        &args![id],
        what,
    )?;
    let slot = positions(&cells, |c| c.id);
    let levels = levels
        .into_iter()
        .map(|(cell, factor, level)| (cell, (factor, level)));
    attach(&mut cells, &slot, levels, |c| &mut c.levels);
    Ok(cells)
}
