//! Fleets: one spec run by many hosts, each host's run an experiment of its own.
//!
//! `isolab fleet submit` records a fleet ([`Store::create_fleet`]) with its spec and seed,
//! then the scheduler's job id ([`Store::set_fleet_job`]). Each host's task creates its
//! experiment linked to the fleet in one transaction ([`Store::create_fleet_experiment`]);
//! a second experiment for the same host is refused ([`Error::FleetHostTaken`]), so a
//! requeued task resumes its host's experiment instead of starting another.

use std::time::SystemTime;

use crate::backend::args;
use crate::backend::Begin;
use crate::encoding::time_to_millis;
use crate::error::{Error, Kind};
use crate::model::{ExperimentId, NewExperiment};
use crate::store::{create_experiment, At, Db};
use crate::Store;

pub use crate::model::FleetId;

/// A fleet to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewFleet {
    /// The spec's experiment name.
    pub name: String,
    /// The spec exactly as read; every host runs it.
    pub spec_toml: String,
    /// Where it was read from.
    pub spec_path: Option<String>,
    /// The fleet's seed; each host's shuffle seed is derived from it and the host name.
    pub seed: u64,
    /// When it was submitted.
    pub created_at: SystemTime,
    /// Which scheduler runs it (`slurm`).
    pub scheduler: String,
    /// What was asked of the scheduler, as given (`--nodes 4`, `--nodelist a,b`, the
    /// partition).
    pub request: String,
    /// Each host runs only a share of the cells (faster, but each configuration is then
    /// measured on one host, confounded with it) instead of every cell.
    pub split_cells: bool,
}

/// One host of a fleet and its experiment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FleetHost {
    /// The host's name (as `hostname` gives it).
    pub host: String,
    /// Its experiment.
    pub experiment: ExperimentId,
}

/// A stored fleet.
#[derive(Debug, Clone, PartialEq)]
pub struct FleetRecord {
    /// Its identifier.
    pub id: FleetId,
    /// See [`NewFleet`].
    pub name: String,
    /// See [`NewFleet`].
    pub spec_toml: String,
    /// See [`NewFleet`].
    pub spec_path: Option<String>,
    /// See [`NewFleet`].
    pub seed: u64,
    /// See [`NewFleet`].
    pub created_at: SystemTime,
    /// See [`NewFleet`].
    pub scheduler: String,
    /// See [`NewFleet`].
    pub request: String,
    /// See [`NewFleet`].
    pub split_cells: bool,
    /// The scheduler's job id, once submitted.
    pub job_id: Option<String>,
    /// The hosts that have started, by name.
    pub hosts: Vec<FleetHost>,
}

impl Store {
    /// Records a fleet; its job id is set once the scheduler accepted it.
    pub fn create_fleet(&mut self, f: &NewFleet) -> Result<FleetId, Error> {
        self.db().query_one(
            "INSERT INTO fleets (name, spec_toml, spec_path, seed, created_at_ms, scheduler, \
             request, split_cells, job_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, NULL) \
             RETURNING id",
            &args![
                f.name,
                f.spec_toml,
                f.spec_path,
                f.seed.to_string(),
                time_to_millis(f.created_at),
                f.scheduler,
                f.request,
                f.split_cells
            ],
            || format!("recording fleet `{}`", f.name),
            |r| r.get(0),
        )
    }

    /// Records the scheduler's job id of a fleet.
    pub fn set_fleet_job(&mut self, fleet: FleetId, job_id: &str) -> Result<(), Error> {
        let changed = self.db().execute(
            "UPDATE fleets SET job_id = ?2 WHERE id = ?1",
            &args![fleet, job_id],
            || format!("recording the job id of fleet {fleet}"),
        )?;
        if changed == 0 {
            return Err(missing_fleet(self.db(), &fleet.to_string()));
        }
        Ok(())
    }

    /// Resolves `"3"` (an id) or a name (the newest fleet with that name) to a fleet id.
    pub fn resolve_fleet(&self, id_or_name: &str) -> Result<FleetId, Error> {
        let wanted = id_or_name.trim();
        let found: Option<FleetId> = match wanted.parse::<FleetId>() {
            Ok(id) => self.db().query_optional(
                "SELECT id FROM fleets WHERE id = ?1",
                &args![id],
                || format!("looking up fleet {id}"),
                |r| r.get(0),
            )?,
            Err(_) => None,
        };
        let found = match found {
            Some(id) => Some(id),
            None => self.db().query_optional(
                "SELECT id FROM fleets WHERE name = ?1 ORDER BY id DESC LIMIT 1",
                &args![wanted],
                || format!("looking up fleet `{wanted}`"),
                |r| r.get(0),
            )?,
        };
        found.ok_or_else(|| missing_fleet(self.db(), wanted))
    }

    /// A fleet with the hosts that have started.
    pub fn fleet(&self, id: FleetId) -> Result<FleetRecord, Error> {
        let tx = self.read()?;
        let db = tx.db();
        type Raw = (
            String,
            String,
            Option<String>,
            String,
            i64,
            String,
            String,
            bool,
            Option<String>,
        );
        let raw: Option<Raw> = db.query_optional(
            "SELECT name, spec_toml, spec_path, seed, created_at_ms, scheduler, request, \
             split_cells, job_id FROM fleets WHERE id = ?1",
            &args![id],
            || format!("reading fleet {id}"),
            crate::backend::FromRow::from_row,
        )?;
        let Some((
            name,
            spec_toml,
            spec_path,
            seed,
            created,
            scheduler,
            request,
            split_cells,
            job_id,
        )) = raw
        else {
            return Err(missing_fleet(db, &id.to_string()));
        };
        let at = At::new("fleets", format!("id {id}"));
        let hosts = db
            .query_rows::<(String, ExperimentId)>(
                "SELECT host, experiment_id FROM fleet_hosts WHERE fleet_id = ?1 ORDER BY host",
                &args![id],
                || format!("reading the hosts of fleet {id}"),
            )?
            .into_iter()
            .map(|(host, experiment)| FleetHost { host, experiment })
            .collect();
        Ok(FleetRecord {
            id,
            name,
            spec_toml,
            spec_path,
            seed: at.parse("seed", &seed)?,
            created_at: at.time("created_at_ms", created)?,
            scheduler,
            request,
            split_cells,
            job_id,
            hosts,
        })
    }

    /// Creates `host`'s experiment of `fleet` (as [`Store::create_experiment`]) and links
    /// it, in one transaction. A host that already has one is refused with
    /// [`Error::FleetHostTaken`], which names it.
    pub fn create_fleet_experiment(
        &mut self,
        e: &NewExperiment,
        fleet: FleetId,
        host: &str,
    ) -> Result<ExperimentId, Error> {
        let what = || format!("creating host `{host}`'s experiment of fleet {fleet}");
        let tx = self.begin(Begin::Write, what)?;
        let db = tx.db();
        if let Some(existing) = host_experiment(db, fleet, host)? {
            return Err(Error::FleetHostTaken {
                fleet,
                host: host.to_owned(),
                experiment: existing,
            });
        }
        let id = create_experiment(db, e)?;
        let linked = db.execute(
            "INSERT INTO fleet_hosts (fleet_id, host, experiment_id) VALUES (?1, ?2, ?3)",
            &args![fleet, host, id],
            what,
        );
        match linked {
            Err(Error::Sql { source, .. }) if source.kind() == Kind::UniqueViolation => {
                // Another task of this host got there first (PostgreSQL lets both try).
                drop(tx);
                let existing = host_experiment(self.db(), fleet, host)?.unwrap_or(-1);
                return Err(Error::FleetHostTaken {
                    fleet,
                    host: host.to_owned(),
                    experiment: existing,
                });
            }
            other => other?,
        };
        tx.commit(what)?;
        Ok(id)
    }

    /// `host`'s experiment of `fleet`, if it has started.
    pub fn fleet_experiment(
        &self,
        fleet: FleetId,
        host: &str,
    ) -> Result<Option<ExperimentId>, Error> {
        host_experiment(self.db(), fleet, host)
    }
}

fn host_experiment(db: Db<'_>, fleet: FleetId, host: &str) -> Result<Option<ExperimentId>, Error> {
    db.query_optional(
        "SELECT experiment_id FROM fleet_hosts WHERE fleet_id = ?1 AND host = ?2",
        &args![fleet, host],
        || format!("looking up host `{host}` in fleet {fleet}"),
        |r| r.get(0),
    )
}

/// [`Error::NoSuchFleet`] listing what exists, or the error that prevented listing.
fn missing_fleet(db: Db<'_>, requested: &str) -> Error {
    let known = db.query_rows("SELECT id, name FROM fleets ORDER BY id DESC", &[], || {
        "listing fleets".to_owned()
    });
    match known {
        Ok(known) => Error::NoSuchFleet {
            requested: requested.to_owned(),
            known,
        },
        Err(e) => e,
    }
}
