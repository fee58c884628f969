//! The `tags` table: names a team gives experiments (`isolab tag EXP baseline-2026-11`),
//! several experiments under one name, e.g. the reference a gate decides against.

use std::time::SystemTime;

use crate::backend::{args, Begin};
use crate::encoding::time_to_millis;
use crate::error::Error;
use crate::model::ExperimentId;

use super::experiments::ensure_experiment;
use super::{Db, Store};

impl Store {
    /// Tags experiment `id` with `name`; tagging it again with the same name changes
    /// nothing. Returns whether the tag is new.
    pub fn tag(&mut self, id: ExperimentId, name: &str) -> Result<bool, Error> {
        let what = || format!("tagging experiment {id} `{name}`");
        let tx = self.begin(Begin::Write, what)?;
        let new = tag(tx.db(), id, name)?;
        tx.commit(what)?;
        Ok(new)
    }

    /// Removes tag `name` from experiment `id`; returns whether it had it.
    pub fn untag(&mut self, id: ExperimentId, name: &str) -> Result<bool, Error> {
        let what = || format!("removing tag `{name}` from experiment {id}");
        let tx = self.begin(Begin::Write, what)?;
        ensure_experiment(tx.db(), id)?;
        let removed = tx.db().execute(
            "DELETE FROM tags WHERE name = ?1 AND experiment_id = ?2",
            &args![name, id],
            what,
        )?;
        tx.commit(what)?;
        Ok(removed > 0)
    }

    /// The experiments tagged `name`, oldest first.
    pub fn tagged(&self, name: &str) -> Result<Vec<ExperimentId>, Error> {
        let tx = self.read()?;
        let rows: Vec<(ExperimentId,)> = tx.db().query_rows(
            "SELECT experiment_id FROM tags WHERE name = ?1 ORDER BY experiment_id",
            &args![name],
            || format!("reading the experiments tagged `{name}`"),
        )?;
        Ok(rows.into_iter().map(|(id,)| id).collect())
    }

    /// The tags of experiment `id`, by name.
    pub fn tags(&self, id: ExperimentId) -> Result<Vec<String>, Error> {
        let tx = self.read()?;
        tags_of(tx.db(), id)
    }
}

/// [`Store::tag`] inside the caller's write transaction.
pub(super) fn tag(db: Db<'_>, id: ExperimentId, name: &str) -> Result<bool, Error> {
    ensure_experiment(db, id)?;
    let added = db.execute(
        "INSERT INTO tags (name, experiment_id, created_at_ms) VALUES (?1, ?2, ?3) \
         ON CONFLICT (name, experiment_id) DO NOTHING",
        &args![name, id, time_to_millis(SystemTime::now())],
        || format!("tagging experiment {id} `{name}`"),
    )?;
    Ok(added > 0)
}

/// [`Store::tags`] inside the caller's transaction.
pub(super) fn tags_of(db: Db<'_>, id: ExperimentId) -> Result<Vec<String>, Error> {
    let rows: Vec<(String,)> = db.query_rows(
        "SELECT name FROM tags WHERE experiment_id = ?1 ORDER BY name",
        &args![id],
        || format!("reading the tags of experiment {id}"),
    )?;
    Ok(rows.into_iter().map(|(name,)| name).collect())
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use crate::model::{ExperimentId, NewExperiment};
    use crate::Store;

    fn experiment(store: &mut Store, name: &str) -> ExperimentId {
        store
            .create_experiment(&NewExperiment {
                name: name.into(),
                spec_toml: String::new(),
                spec_path: None,
                seed: 0,
                isolab_version: "0".into(),
                created_at: UNIX_EPOCH,
                cells: vec![],
                environment: vec![],
            })
            .unwrap()
    }

    #[test]
    fn tags_name_several_experiments_and_tagging_twice_changes_nothing() {
        let mut store = Store::open_in_memory().unwrap();
        let a = experiment(&mut store, "a");
        let b = experiment(&mut store, "b");
        assert!(store.tag(a, "baseline-2026-11").unwrap());
        assert!(!store.tag(a, "baseline-2026-11").unwrap());
        assert!(store.tag(b, "baseline-2026-11").unwrap());
        assert!(store.tag(b, "nightly").unwrap());
        assert_eq!(store.tagged("baseline-2026-11").unwrap(), vec![a, b]);
        assert_eq!(store.tags(b).unwrap(), ["baseline-2026-11", "nightly"]);
        assert!(store.untag(a, "baseline-2026-11").unwrap());
        assert!(!store.untag(a, "baseline-2026-11").unwrap());
        assert_eq!(store.tagged("baseline-2026-11").unwrap(), vec![b]);
        assert!(store.tag(999, "x").is_err());
        assert!(store.tagged("none").unwrap().is_empty());
    }
}
