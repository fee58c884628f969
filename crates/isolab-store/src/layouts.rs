//! How a run's telemetry is stored from schema version 4 on: one `telemetry` row per run
//! (a run that recorded none has no row), holding the id of its **layout** — the list of
//! names its values are recorded under, in order, stored once in `telemetry_layouts` — and
//! its values packed in a BLOB (`encoding` has the byte layout). The runs of an experiment
//! record the same names in the same order, so a store holds a handful of layouts
//! and reading a run's telemetry is one row and one BLOB, not a row per value: a report
//! over 100 000 runs of 50 counters reads 100 000 rows instead of 5 000 000
//! (`examples/bench_telemetry_layout.rs` measured the candidates).
//!
//! A layout is found by its digest and its names ([`layout_id`]); none is ever changed or
//! deleted. Two PostgreSQL writers that store a new layout at once may both insert it:
//! the two ids then name equal lists, which readers do not mind.
//!
//! [`convert`] is the migration to version 4: it packs the rows of the earlier
//! `telemetry` table (one per value) into the new one.

use std::collections::HashMap;

use crate::backend::{args, Connection, Value};
use crate::encoding::{decode_names, encode_names, encode_values, names_digest, sql_to_real};
use crate::error::BackendError;
use crate::telemetry::TelemetrySet;

/// The id of the layout of `names`, inserted when the store has none.
pub(crate) fn layout_id(conn: &mut dyn Connection, names: &[String]) -> Result<i64, BackendError> {
    let text = encode_names(names);
    let digest = names_digest(&text);
    let candidates = conn.query(
        "SELECT id, names FROM telemetry_layouts WHERE digest = ?1 ORDER BY id",
        &args![digest],
    )?;
    for row in candidates {
        let stored: String = row.get(1)?;
        if decode_names(&stored).as_deref() == Some(names) {
            return row.get(0);
        }
    }
    let inserted = conn.query(
        "INSERT INTO telemetry_layouts (digest, names) VALUES (?1, ?2) RETURNING id",
        &args![digest, text],
    )?;
    inserted
        .first()
        .ok_or_else(|| BackendError::message("the insert returned no id".to_owned()))?
        .get(0)
}

/// Stores the telemetry of run `run` (nothing when the set is empty).
pub(crate) fn insert(
    conn: &mut dyn Connection,
    run: i64,
    telemetry: &TelemetrySet,
) -> Result<(), BackendError> {
    if telemetry.is_empty() {
        return Ok(());
    }
    let layout = layout_id(conn, telemetry.names())?;
    conn.execute(
        "INSERT INTO telemetry (run_id, layout_id, packed) VALUES (?1, ?2, ?3)",
        &args![run, layout, encode_values(telemetry.values())],
    )?;
    Ok(())
}

/// Runs converted per statement by [`convert`].
const BATCH: usize = 100;

/// Runs [`convert`] reads at a time.
const PAGE: usize = 10_000;

/// The migration to version 4's data step: packs every run's rows of the old
/// `telemetry` table (`run_id, position, key, value`, NaN as NULL) into rows of
/// `run_telemetry`, a run at a time in order of run id, in batches, so that a store of a
/// million runs converts without holding them all.
pub(crate) fn convert(conn: &mut dyn Connection) -> Result<(), BackendError> {
    convert_in_pages(conn, PAGE)
}

/// [`convert`], reading `page` runs at a time.
fn convert_in_pages(conn: &mut dyn Connection, page: usize) -> Result<(), BackendError> {
    let mut layouts: HashMap<Vec<String>, i64> = HashMap::new();
    let mut after: i64 = i64::MIN;
    loop {
        let ids = conn.query(
            "SELECT id FROM runs WHERE id > ?1 ORDER BY id LIMIT ?2",
            &args![after, page as i64],
        )?;
        let Some(last) = ids.last() else {
            return Ok(());
        };
        let last: i64 = last.get(0)?;
        let mut runs: Vec<(i64, Vec<String>, Vec<f64>)> = Vec::new();
        conn.query_each(
            "SELECT run_id, key, value FROM telemetry WHERE run_id > ?1 AND run_id <= ?2 \
             ORDER BY run_id, position",
            &args![after, last],
            &mut |row| {
                let run: i64 = row.get(0)?;
                let name: String = row.get(1)?;
                let value = sql_to_real(row.get(2)?);
                match runs.last_mut() {
                    Some((r, names, values)) if *r == run => {
                        names.push(name);
                        values.push(value);
                    }
                    _ => runs.push((run, vec![name], vec![value])),
                }
                Ok(())
            },
        )?;
        for batch in runs.chunks(BATCH) {
            let mut values: Vec<Value> = Vec::with_capacity(batch.len() * 3);
            for (run, names, vals) in batch {
                let layout = match layouts.get(names) {
                    Some(id) => *id,
                    None => {
                        let id = layout_id(conn, names)?;
                        layouts.insert(names.clone(), id);
                        id
                    }
                };
                values.extend(args![*run, layout, encode_values(vals)]);
            }
            let placeholders: Vec<String> = (0..batch.len())
                .map(|i| format!("(?{}, ?{}, ?{})", 3 * i + 1, 3 * i + 2, 3 * i + 3))
                .collect();
            conn.execute(
                &format!(
                    "INSERT INTO run_telemetry (run_id, layout_id, packed) VALUES {}",
                    placeholders.join(", ")
                ),
                &values,
            )?;
        }
        after = last;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sqlite::Sqlite;
    use crate::backend::Row;
    use crate::schema::tests::migration_sql;
    use crate::{Store, Telemetry};

    /// The `telemetry` table's rows, by run.
    fn telemetry_rows(conn: &mut Sqlite) -> Vec<Row> {
        conn.query("SELECT * FROM telemetry ORDER BY run_id", &[])
            .unwrap()
    }

    /// A store file at schema version 3 with `runs` runs of one experiment, run `i`'s
    /// telemetry rows as `telemetry(i)` gives them (`None` values stored as NULL).
    fn version_3_store(
        path: &std::path::Path,
        runs: i64,
        telemetry: impl Fn(i64) -> Vec<(&'static str, Option<f64>)>,
    ) {
        let mut conn = Sqlite::open(path).unwrap();
        for version in 1..=3 {
            conn.batch(migration_sql(version).0).unwrap();
        }
        conn.set_identity(3).unwrap();
        conn.batch(
            "INSERT INTO experiments (id, name, spec_toml, seed, isolab_version, \
             created_at_ms, status) VALUES (1, 'old', '', '1', '0.1.0', 0, 'complete'); \
             INSERT INTO cells (id, experiment_id, idx, key) VALUES (1, 1, 0, 'platform=host');",
        )
        .unwrap();
        for run in 1..=runs {
            conn.execute(
                "INSERT INTO runs (id, experiment_id, cell_id, repetition, warmup, round, \
                 status, started_at_ms, wall_ns, limits_json) \
                 VALUES (?1, 1, 1, ?1, 0, ?1, 'ok', 0, 0, '{}')",
                &args![run],
            )
            .unwrap();
            for (position, (key, value)) in telemetry(run).into_iter().enumerate() {
                conn.execute(
                    "INSERT INTO telemetry (run_id, position, key, value) \
                     VALUES (?1, ?2, ?3, ?4)",
                    &args![run, position as i64, key, value],
                )
                .unwrap();
            }
        }
    }

    /// What the test stores for run `i`: four kinds of runs in turn, the first two with
    /// the same names (one layout), one with none.
    fn rows_of(run: i64) -> Vec<(&'static str, Option<f64>)> {
        let v = run as f64;
        match run % 4 {
            // A key recorded twice, a name this version does not know, a NaN.
            0 => vec![
                ("cpu_usage_s", Some(v)),
                ("gpu_energy_j", None),
                ("cpu_usage_s", Some(v + 0.5)),
            ],
            1 => vec![
                ("cpu_usage_s", Some(v)),
                ("gpu_energy_j", Some(7.0)),
                ("cpu_usage_s", Some(0.25)),
            ],
            2 => vec![],
            _ => vec![("wall_s", Some(v))],
        }
    }

    #[test]
    fn version_4_packs_every_run_s_rows_and_reads_them_back_as_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        // 250 runs read 7 at a time, written 100 to a statement: pages and batches that
        // do not divide the runs.
        version_3_store(&path, 250, rows_of);
        let mut conn = Sqlite::open(&path).unwrap();
        conn.begin(crate::backend::Begin::Migrate).unwrap();
        let (v4, v4_after) = migration_sql(4);
        conn.batch(v4).unwrap();
        convert_in_pages(&mut conn, 7).unwrap();
        conn.batch(v4_after).unwrap();
        let converted = telemetry_rows(&mut conn);
        conn.rollback().unwrap();
        drop(conn);

        // The store's own migration (pages of 10 000) stores the same rows.
        let store = Store::open(&path).unwrap();
        assert_eq!(store.schema_version().unwrap(), crate::SCHEMA_VERSION);
        assert_eq!(telemetry_rows(&mut Sqlite::open(&path).unwrap()), converted);
        let runs = store.runs(1).unwrap();
        assert_eq!(runs.len(), 250);
        for r in &runs {
            let want = rows_of(r.id);
            let got = r.telemetry.clone().into_rows();
            assert_eq!(got.len(), want.len(), "run {}", r.id);
            for ((name, value), (n, v)) in got.iter().zip(&want) {
                assert_eq!(name, n, "run {}", r.id);
                let v = v.unwrap_or(f64::NAN);
                assert_eq!(value.to_bits(), v.to_bits(), "run {} {n}", r.id);
            }
        }
        // The first value of a key recorded twice; the unknown name kept.
        assert_eq!(runs[3].telemetry.get(Telemetry::CpuUsage), Some(4.0));
        assert!(runs[3]
            .telemetry
            .get_named("gpu_energy_j")
            .unwrap()
            .is_nan());
        // Runs with equal names share one list.
        assert!(runs[3].telemetry.shares_names(&runs[0].telemetry));
        assert!(!runs[3].telemetry.shares_names(&runs[2].telemetry));
        let count = |table: &str| -> i64 {
            let conn = rusqlite::Connection::open(&path).unwrap();
            conn.query_row(&format!("SELECT COUNT(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        // Two lists of names; a row per run that recorded telemetry (not runs 2, 6, …).
        assert_eq!(count("telemetry_layouts"), 2);
        assert_eq!(count("telemetry"), 250 - 63);
    }

    #[test]
    fn a_layout_is_stored_once_and_found_again() {
        let mut store = Sqlite::in_memory().unwrap();
        crate::schema::migrate(&mut store, ":memory:").unwrap();
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let a = layout_id(&mut store, &names(&["cpu_usage_s", "wall_s"])).unwrap();
        let b = layout_id(&mut store, &names(&["wall_s", "cpu_usage_s"])).unwrap();
        assert_ne!(a, b);
        assert_eq!(
            layout_id(&mut store, &names(&["cpu_usage_s", "wall_s"])).unwrap(),
            a
        );
        // A digest shared with other names (as a collision would) does not match them.
        store
            .execute(
                "UPDATE telemetry_layouts SET digest = ?1 WHERE id = ?2",
                &args![names_digest(&encode_names(&names(&["x"]))), b],
            )
            .unwrap();
        let x = layout_id(&mut store, &names(&["x"])).unwrap();
        assert!(x != a && x != b);
    }
}
