//! Benchmark: how fast SQLite gives back an experiment's telemetry in each candidate
//! layout, the measurement that chose the store's layout (schema version 4). Run with
//! `cargo run --release -p isolab-store --example bench_telemetry_layout -- [RUNS] [COUNTERS]`
//! (defaults: 100000 runs, 50 counters a run).
//!
//! For each layout it writes RUNS runs with COUNTERS counters each into a fresh file in
//! one transaction (so that the write time is the layout's, not the disk's), then times
//! reading every counter of every run back into `(name, value)` pairs in run order, and
//! reading only three named counters (what the report's summary needs):
//!
//! - `rows`: one row per counter, `(run_id, position, key, value)` (schema versions 1-3);
//! - `blob+names`: one row per run, a BLOB of `(name id: u16, value: f64)` pairs, the
//!   names in a table of their own;
//! - `blob inline`: one row per run, a BLOB of `(name length: u8, name, value: f64)`;
//! - `layout+values`: one row per run, the id of its list of names and a BLOB of values
//!   (schema version 4: the fastest to write and to read a few counters, the smallest,
//!   and as fast as `blob+names` to read them all);
//! - `json`: one row per run, a JSON object of name to value.
//!
//! Decoding mirrors the store: every value of a row is copied out of SQLite (the store's
//! backend reads rows whole), names become shared ids, not strings per value.

use std::collections::HashMap;
use std::time::Instant;

use rusqlite::{params, Connection};

/// The stored names of the benchmark's counters (what a real run on a 16-core host stores).
fn names(n: usize) -> Vec<String> {
    let fixed = [
        "nr_throttled",
        "cpu_migrations",
        "cpu_usage_s",
        "throttled_s",
        "context_switches",
        "ctx_switches_involuntary",
        "psi_cpu_some_s",
        "psi_io_some_s",
        "minor_faults",
        "major_faults",
        "irqs",
        "host_util_pct",
        "wall_s",
        "cpu_user_s",
        "cpu_system_s",
        "cpu_util_pct",
        "nr_periods",
        "nr_bursts",
        "burst_s",
        "memory_peak_bytes",
        "memory_major_faults",
        "io_read_bytes",
        "io_write_bytes",
        "psi_cpu_full_s",
        "psi_memory_some_s",
        "psi_memory_full_s",
        "psi_io_full_s",
        "ctx_switches_voluntary",
        "max_rss_kib",
        "softirqs",
        "softirqs_net",
        "sched_latency_p50_ms",
        "sched_latency_p99_ms",
        "sched_latency_max_ms",
    ];
    let mut out: Vec<String> = fixed.iter().map(|s| (*s).to_owned()).collect();
    out.extend((0..16).map(|c| format!("host_cpu{c}_util_pct")));
    out.truncate(n);
    out
}

/// The three counters the summary and quality checks read.
const WANTED: [&str; 3] = ["nr_throttled", "cpu_migrations", "cpu_usage_s"];

/// One candidate layout: its tables, how a run is written, how runs are read back.
trait Layout {
    fn name(&self) -> &'static str;
    fn create(&self, db: &Connection);
    fn write(&self, db: &Connection, run: i64, values: &[(usize, f64)], names: &[String]);
    /// Every run's pairs as `(name id, value)`, the ids into `names`, which grows as new
    /// names are met; only the names in `wanted` when given.
    fn read(
        &self,
        db: &Connection,
        names: &mut Interner,
        wanted: Option<&[&str]>,
    ) -> Vec<(i64, Vec<(u32, f64)>)>;
}

/// Names to small ids, as a report holds them.
#[derive(Default)]
struct Interner {
    ids: HashMap<String, u32>,
}

impl Interner {
    fn id(&mut self, name: &str) -> u32 {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = self.ids.len() as u32;
        self.ids.insert(name.to_owned(), id);
        id
    }
}

/// Appends `(run, pair)` to the last run's list, or starts a run's list.
fn push(out: &mut Vec<(i64, Vec<(u32, f64)>)>, run: i64, pair: (u32, f64)) {
    match out.last_mut() {
        Some((r, pairs)) if *r == run => pairs.push(pair),
        _ => out.push((run, vec![pair])),
    }
}

/// Runs `sql` and hands each row to `each`.
fn each_row(db: &Connection, sql: &str, mut each: impl FnMut(&rusqlite::Row<'_>)) {
    let mut stmt = db.prepare(sql).unwrap();
    let mut rows = stmt.query([]).unwrap();
    while let Some(row) = rows.next().unwrap() {
        each(row);
    }
}

/// Each run's row of a one-row-per-run layout, in run order: `SELECT t.run_id, COLUMNS`.
fn each_run(db: &Connection, columns: &str, each: impl FnMut(&rusqlite::Row<'_>)) {
    each_row(
        db,
        &format!(
            "SELECT t.run_id, {columns} FROM runs r JOIN telemetry t ON t.run_id = r.id \
             WHERE r.experiment_id = 1 ORDER BY r.id"
        ),
        each,
    );
}

/// Creates the one-row-per-run `telemetry` table with `columns` after `run_id`.
fn create_per_run(db: &Connection, columns: &str) {
    db.execute_batch(&format!(
        "CREATE TABLE telemetry (run_id INTEGER PRIMARY KEY REFERENCES runs (id), {columns})"
    ))
    .unwrap();
}

/// The id of `key` in the dictionary `table` (`id`, `column`), inserted when missing.
fn dictionary_id(db: &Connection, table: &str, column: &str, key: &str) -> i64 {
    db.prepare_cached(&format!("SELECT id FROM {table} WHERE {column} = ?1"))
        .unwrap()
        .query_row([key], |r| r.get(0))
        .or_else(|_| {
            db.prepare_cached(&format!(
                "INSERT INTO {table} ({column}) VALUES (?1) RETURNING id"
            ))
            .unwrap()
            .query_row([key], |r| r.get(0))
        })
        .unwrap()
}

struct Rows;

impl Layout for Rows {
    fn name(&self) -> &'static str {
        "rows"
    }
    fn create(&self, db: &Connection) {
        db.execute_batch(
            "CREATE TABLE telemetry (run_id INTEGER NOT NULL REFERENCES runs (id), \
             position INTEGER NOT NULL, key TEXT NOT NULL, value REAL, \
             PRIMARY KEY (run_id, position))",
        )
        .unwrap();
    }
    fn write(&self, db: &Connection, run: i64, values: &[(usize, f64)], names: &[String]) {
        let mut stmt = db
            .prepare_cached("INSERT INTO telemetry VALUES (?1, ?2, ?3, ?4)")
            .unwrap();
        for (position, (name, value)) in values.iter().enumerate() {
            stmt.execute(params![run, position as i64, names[*name], value])
                .unwrap();
        }
    }
    fn read(
        &self,
        db: &Connection,
        names: &mut Interner,
        wanted: Option<&[&str]>,
    ) -> Vec<(i64, Vec<(u32, f64)>)> {
        let filter = wanted.map_or(String::new(), |w| {
            format!(
                " AND t.key IN ({})",
                w.iter()
                    .map(|n| format!("'{n}'"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        });
        let sql = format!(
            "SELECT t.run_id, t.key, t.value FROM runs r JOIN telemetry t \
             ON t.run_id = r.id WHERE r.experiment_id = 1{filter} \
             ORDER BY r.id, t.position"
        );
        let mut out = Vec::new();
        each_row(db, &sql, |row| {
            let run: i64 = row.get(0).unwrap();
            // The store's backend copies each text out of SQLite.
            let key: String = row.get(1).unwrap();
            let value: Option<f64> = row.get(2).unwrap();
            push(&mut out, run, (names.id(&key), value.unwrap_or(f64::NAN)));
        });
        out
    }
}

struct BlobNames;

impl Layout for BlobNames {
    fn name(&self) -> &'static str {
        "blob+names"
    }
    fn create(&self, db: &Connection) {
        db.execute_batch(
            "CREATE TABLE telemetry_names (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)",
        )
        .unwrap();
        create_per_run(db, "counters BLOB NOT NULL");
    }
    fn write(&self, db: &Connection, run: i64, values: &[(usize, f64)], names: &[String]) {
        let mut blob = Vec::with_capacity(values.len() * 10);
        for (name, value) in values {
            let id = dictionary_id(db, "telemetry_names", "name", &names[*name]);
            blob.extend_from_slice(&(id as u16).to_le_bytes());
            blob.extend_from_slice(&value.to_le_bytes());
        }
        db.prepare_cached("INSERT INTO telemetry VALUES (?1, ?2)")
            .unwrap()
            .execute(params![run, blob])
            .unwrap();
    }
    fn read(
        &self,
        db: &Connection,
        names: &mut Interner,
        wanted: Option<&[&str]>,
    ) -> Vec<(i64, Vec<(u32, f64)>)> {
        let mut table: Vec<Option<u32>> = vec![None; 1 << 16];
        each_row(db, "SELECT id, name FROM telemetry_names", |row| {
            let id: i64 = row.get(0).unwrap();
            let name: String = row.get(1).unwrap();
            let keep = wanted.is_none_or(|w| w.contains(&name.as_str()));
            table[id as usize] = keep.then(|| names.id(&name));
        });
        let mut out = Vec::new();
        each_run(db, "t.counters", |row| {
            let run: i64 = row.get(0).unwrap();
            let blob: Vec<u8> = row.get(1).unwrap();
            let mut pairs = Vec::with_capacity(blob.len() / 10);
            for pair in blob.chunks_exact(10) {
                let id = u16::from_le_bytes([pair[0], pair[1]]);
                if let Some(ours) = table[id as usize] {
                    let value = f64::from_le_bytes(pair[2..].try_into().unwrap());
                    pairs.push((ours, value));
                }
            }
            out.push((run, pairs));
        });
        out
    }
}

struct BlobInline;

impl Layout for BlobInline {
    fn name(&self) -> &'static str {
        "blob inline"
    }
    fn create(&self, db: &Connection) {
        create_per_run(db, "counters BLOB NOT NULL");
    }
    fn write(&self, db: &Connection, run: i64, values: &[(usize, f64)], names: &[String]) {
        let mut blob = Vec::new();
        for (name, value) in values {
            let name = names[*name].as_bytes();
            blob.push(name.len() as u8);
            blob.extend_from_slice(name);
            blob.extend_from_slice(&value.to_le_bytes());
        }
        db.prepare_cached("INSERT INTO telemetry VALUES (?1, ?2)")
            .unwrap()
            .execute(params![run, blob])
            .unwrap();
    }
    fn read(
        &self,
        db: &Connection,
        names: &mut Interner,
        wanted: Option<&[&str]>,
    ) -> Vec<(i64, Vec<(u32, f64)>)> {
        let mut out = Vec::new();
        each_run(db, "t.counters", |row| {
            let run: i64 = row.get(0).unwrap();
            let blob: Vec<u8> = row.get(1).unwrap();
            let mut pairs = Vec::new();
            let mut at = 0;
            while at < blob.len() {
                let len = blob[at] as usize;
                let name = std::str::from_utf8(&blob[at + 1..at + 1 + len]).unwrap();
                let value =
                    f64::from_le_bytes(blob[at + 1 + len..at + 9 + len].try_into().unwrap());
                at += 9 + len;
                if wanted.is_none_or(|w| w.contains(&name)) {
                    pairs.push((names.id(name), value));
                }
            }
            out.push((run, pairs));
        });
        out
    }
}

struct LayoutValues;

impl Layout for LayoutValues {
    fn name(&self) -> &'static str {
        "layout+values"
    }
    fn create(&self, db: &Connection) {
        db.execute_batch(
            "CREATE TABLE telemetry_layouts (id INTEGER PRIMARY KEY, names TEXT NOT NULL UNIQUE)",
        )
        .unwrap();
        create_per_run(
            db,
            "layout INTEGER NOT NULL REFERENCES telemetry_layouts (id), values_ BLOB NOT NULL",
        );
    }
    fn write(&self, db: &Connection, run: i64, values: &[(usize, f64)], names: &[String]) {
        let list = values
            .iter()
            .map(|(n, _)| names[*n].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let id = dictionary_id(db, "telemetry_layouts", "names", &list);
        let blob: Vec<u8> = values.iter().flat_map(|(_, v)| v.to_le_bytes()).collect();
        db.prepare_cached("INSERT INTO telemetry VALUES (?1, ?2, ?3)")
            .unwrap()
            .execute(params![run, id, blob])
            .unwrap();
    }
    fn read(
        &self,
        db: &Connection,
        names: &mut Interner,
        wanted: Option<&[&str]>,
    ) -> Vec<(i64, Vec<(u32, f64)>)> {
        let mut layouts: HashMap<i64, Vec<Option<u32>>> = HashMap::new();
        each_row(db, "SELECT id, names FROM telemetry_layouts", |row| {
            let id: i64 = row.get(0).unwrap();
            let list: String = row.get(1).unwrap();
            let ids = list
                .split('\n')
                .map(|n| wanted.is_none_or(|w| w.contains(&n)).then(|| names.id(n)))
                .collect();
            layouts.insert(id, ids);
        });
        let mut out = Vec::new();
        each_run(db, "t.layout, t.values_", |row| {
            let run: i64 = row.get(0).unwrap();
            let layout: i64 = row.get(1).unwrap();
            let blob: Vec<u8> = row.get(2).unwrap();
            let ids = &layouts[&layout];
            let pairs = ids
                .iter()
                .zip(blob.chunks_exact(8))
                .filter_map(|(id, v)| Some(((*id)?, f64::from_le_bytes(v.try_into().ok()?))))
                .collect();
            out.push((run, pairs));
        });
        out
    }
}

struct Json;

impl Layout for Json {
    fn name(&self) -> &'static str {
        "json"
    }
    fn create(&self, db: &Connection) {
        create_per_run(db, "counters TEXT NOT NULL");
    }
    fn write(&self, db: &Connection, run: i64, values: &[(usize, f64)], names: &[String]) {
        let map: serde_json::Map<String, serde_json::Value> = values
            .iter()
            .map(|(n, v)| (names[*n].clone(), serde_json::json!(v)))
            .collect();
        db.prepare_cached("INSERT INTO telemetry VALUES (?1, ?2)")
            .unwrap()
            .execute(params![run, serde_json::Value::Object(map).to_string()])
            .unwrap();
    }
    fn read(
        &self,
        db: &Connection,
        names: &mut Interner,
        wanted: Option<&[&str]>,
    ) -> Vec<(i64, Vec<(u32, f64)>)> {
        let mut out = Vec::new();
        each_run(db, "t.counters", |row| {
            let run: i64 = row.get(0).unwrap();
            let text: String = row.get(1).unwrap();
            let map: HashMap<&str, f64> = serde_json::from_str(&text).unwrap();
            let pairs = map
                .into_iter()
                .filter(|(n, _)| wanted.is_none_or(|w| w.contains(n)))
                .map(|(n, v)| (names.id(n), v))
                .collect();
            out.push((run, pairs));
        });
        out
    }
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let runs = args.first().copied().unwrap_or(100_000);
    let counters = args.get(1).copied().unwrap_or(50);
    let names = names(counters);
    let dir = tempfile_dir();
    let layouts: Vec<Box<dyn Layout>> = vec![
        Box::new(Rows),
        Box::new(BlobNames),
        Box::new(BlobInline),
        Box::new(LayoutValues),
        Box::new(Json),
    ];
    println!(
        "{runs} runs, {} counters a run; best of 3 reads, in seconds",
        names.len()
    );
    println!("| layout | file (MiB) | write | read all | read 3 |\n|---|---|---|---|---|");
    for layout in &layouts {
        let path = dir.join(format!("{}.db", layout.name().replace(['+', ' '], "-")));
        let _ = std::fs::remove_file(&path);
        let db = Connection::open(&path).unwrap();
        db.execute_batch(
            "PRAGMA journal_mode = WAL; \
             CREATE TABLE runs (id INTEGER PRIMARY KEY, experiment_id INTEGER NOT NULL); \
             CREATE INDEX runs_by_experiment ON runs (experiment_id, id);",
        )
        .unwrap();
        layout.create(&db);
        let t = Instant::now();
        db.execute_batch("BEGIN").unwrap();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for run in 1..=runs as i64 {
            db.prepare_cached("INSERT INTO runs VALUES (?1, 1)")
                .unwrap()
                .execute([run])
                .unwrap();
            let values: Vec<(usize, f64)> = (0..names.len())
                .map(|i| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (i, (x % 100_000) as f64 / 7.0)
                })
                .collect();
            layout.write(&db, run, &values, &names);
        }
        db.execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        let write = t.elapsed().as_secs_f64();
        let size = std::fs::metadata(&path).unwrap().len() as f64 / (1024.0 * 1024.0);
        let best = |wanted: Option<&[&str]>| {
            (0..3)
                .map(|_| {
                    let t = Instant::now();
                    let mut interner = Interner::default();
                    let read = layout.read(&db, &mut interner, wanted);
                    let elapsed = t.elapsed().as_secs_f64();
                    let values: usize = read.iter().map(|(_, p)| p.len()).sum();
                    let expected = runs * wanted.map_or(names.len(), |w| w.len().min(names.len()));
                    assert_eq!(values, expected, "{}", layout.name());
                    elapsed
                })
                .fold(f64::INFINITY, f64::min)
        };
        let all = best(None);
        let three = best(Some(&WANTED));
        println!(
            "| {} | {size:.1} | {write:.2} | {all:.3} | {three:.3} |",
            layout.name()
        );
        drop(db);
        let _ = std::fs::remove_file(&path);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("isolab-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
