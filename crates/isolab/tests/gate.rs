//! Continuous benchmarking for real (root, sysbench): `isolab gate` against the store's
//! history (an A/A experiment passes; a regression made outside the spec, as a new build
//! of an application makes one, fails with exit 4; a reference on another host
//! fingerprint is refused with exit 6 and the key named, and accepted with
//! --allow-drift), `isolab tag` and `gate --reference`, `isolab trend` and the report's
//! trend section, and a bundle from SQLite through PostgreSQL and back with nothing
//! duplicated on a second import.
//!
//! One test: its steps build on one store, and one step changes the host's transparent
//! huge pages setting (put back by a guard, also on failure), which no other test of
//! this binary may see.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn isolab(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_isolab"));
    c.arg("--db").arg(db).env("NO_COLOR", "1");
    c
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

/// Runs `cmd`, asserts its exit status, returns stdout and stderr together.
fn status(cmd: &mut Command, want: i32) -> String {
    let out: Output = cmd.output().expect("isolab runs");
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(want), "{cmd:?}:\n{all}");
    all
}

const THP: &str = "/sys/kernel/mm/transparent_hugepage/enabled";

/// Puts THP's setting back when dropped.
struct ThpGuard(String);

impl Drop for ThpGuard {
    fn drop(&mut self) {
        let _ = std::fs::write(THP, &self.0);
    }
}

/// The selected word of THP's setting (`always [madvise] never` → `madvise`).
fn thp() -> String {
    let text = std::fs::read_to_string(THP).unwrap();
    text.split_whitespace()
        .find_map(|w| w.strip_prefix('[').and_then(|w| w.strip_suffix(']')))
        .unwrap()
        .to_owned()
}

/// The spec: one cell whose fixed work is read from `work` at run time, outside the spec.
/// Its `noise` is 90%: this test's regression is ten times the work, and the cpus of the
/// machines it runs on (virtual ones) at times take 1.7 times as long for many seconds
/// (measured: 25 runs of 0.5 s in a row after runs of 0.31 s), which a smaller threshold
/// would rightly call a change.
fn spec(dir: &Path, work: &Path) -> PathBuf {
    let path = dir.join("app.toml");
    std::fs::write(
        &path,
        format!(
            "[experiment]\nname = \"app\"\nnoise = 0.9\nrepetitions = {{ warmup = 0, min = 6, max = 6, target_cv = 0.05 }}\n\
             [matrix]\nplatform = [\"host\"]\nworkload = [\"app\"]\n\
             [workload.app]\ncommand = \"sh -c 'exec sysbench cpu --cpu-max-prime=2000 --threads=1 --time=0 --events=$(cat {}) run'\"\n\
             parser = \"time\"\nprimary = \"wall_time\"\npackages = [\"sysbench\"]\n",
            work.display()
        ),
    )
    .unwrap();
    path
}

#[test]
fn gate_trend_tags_and_bundles_over_a_real_history() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        isolab_skip::skip("runs need root (cgroups)");
        return;
    }
    if isolab_tools::find_program("sysbench").is_none() {
        isolab_skip::skip("sysbench is not installed (scripts/setup.sh quickstart installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("gate.db");
    let work = dir.path().join("work");
    let spec = spec(dir.path(), &work);
    let run = || {
        status(
            isolab(&db)
                .args(["run", "--no-report", "-q"])
                .arg(&spec)
                .arg("--workdir")
                .arg(dir.path().join("runs")),
            0,
        )
    };
    std::fs::write(&work, "400").unwrap();
    for _ in 0..4 {
        run();
    }

    // A/A: experiment 4 against 1-3, the latest on this fingerprint.
    let aa = status(isolab(&db).args(["gate", "app"]), 0);
    assert!(
        aa.contains("gate: experiment 4 against 3 reference experiments: 3, 2, 1 (the latest 3 of the same spec on this fingerprint)"),
        "{aa}"
    );
    assert!(aa.contains("worse 0"), "{aa}");
    let json = status(isolab(&db).args(["gate", "4", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["schema_version"].is_number(), "{json}");
    assert_eq!(v["worse"], 0, "{json}");
    assert_eq!(v["points"][0]["metric"], "wall_time", "{json}");
    assert_eq!(v["points"][0]["history"].as_array().unwrap().len(), 3);

    // Drift: the same spec with THP changed is not the same measurement.
    let before = thp();
    let _guard = ThpGuard(before.clone());
    let other = if before == "never" {
        "madvise"
    } else {
        "never"
    };
    std::fs::write(THP, other).unwrap();
    run();
    let refused = status(isolab(&db).args(["gate", "app"]), 6);
    assert!(
        refused.contains(&format!("thp {before} → {other}"))
            && refused.contains("--allow-drift thp"),
        "{refused}"
    );
    let allowed = status(isolab(&db).args(["gate", "app", "--allow-drift", "thp"]), 0);
    assert!(
        allowed.contains(&format!(
            "drift allowed (a candidate cause of any change): thp {before} → {other}"
        )),
        "{allowed}"
    );
    // compare across the two experiments says so in one line.
    let across = status(isolab(&db).args(["compare", "4", "5"]), 0);
    assert!(
        across.contains(&format!("note: the host fingerprints of experiments 4 and 5 differ, a candidate cause of any change: thp {before} → {other}")),
        "{across}"
    );
    std::fs::write(THP, &before).unwrap();

    // A regression outside the spec: ten times the work. `gate SPEC` runs it first; its
    // reference is the latest on this fingerprint again (1-4), not the THP experiment.
    std::fs::write(&work, "4000").unwrap();
    let worse = status(isolab(&db).arg("gate").arg(&spec), 4);
    assert!(
        worse.contains("gate: experiment 6 against 4 reference experiments: 4, 3, 2, 1"),
        "{worse}"
    );
    assert!(worse.contains("worse 1, better 0"), "{worse}");
    let md = status(isolab(&db).args(["gate", "6", "--format", "md"]), 4);
    assert!(md.contains("| cell |") && md.contains("| worse |"), "{md}");

    // A tag as the reference.
    for id in ["1", "2", "3"] {
        status(isolab(&db).args(["tag", id, "baseline-1"]), 0);
    }
    let tagged = status(
        isolab(&db).args(["gate", "6", "--reference", "baseline-1"]),
        4,
    );
    assert!(
        tagged.contains("(the latest 3 tagged baseline-1)"),
        "{tagged}"
    );
    let none = status(isolab(&db).args(["gate", "6", "--reference", "nope"]), 1);
    assert!(none.contains("no experiment is tagged `nope`"), "{none}");

    // The trend: six experiments, the regression a change point, the THP experiment's
    // fingerprint change named (and the one after it, back).
    let trend = status(isolab(&db).args(["trend", "app"]), 0);
    assert!(
        trend.contains("6 experiments on its longest line"),
        "{trend}"
    );
    let last = trend.lines().last().unwrap();
    assert!(
        last.trim_start().starts_with('6') && last.contains("worse"),
        "{trend}"
    );
    assert!(
        trend.contains(&format!("thp {before} → {other}")),
        "{trend}"
    );
    assert!(
        trend.contains(&format!("thp {other} → {before}")),
        "{trend}"
    );
    let html = dir.path().join("r.html");
    status(isolab(&db).args(["report", "6", "-o"]).arg(&html), 0);
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("Trend over the stored experiments") && page.contains("change point"));

    // A bundle: SQLite → PostgreSQL → SQLite, ids remapped, nothing doubled.
    let bundle = dir.path().join("app.bundle");
    let out = status(
        isolab(&db)
            .args(["export", "--bundle"])
            .arg(&bundle)
            .args(["1", "2", "3", "6"]),
        0,
    );
    assert!(out.contains("4 copied, 0 already there"), "{out}");
    let cluster = match isolab_store::testing::Cluster::start() {
        Ok(c) => c,
        Err(e) => panic!("PostgreSQL for the bundle's round trip: {e}"),
    };
    let pg = PathBuf::from(cluster.create_database("bundles").unwrap());
    let first = status(isolab(&pg).arg("import").arg(&bundle), 0);
    assert!(first.contains("4 copied, 0 already there"), "{first}");
    let again = status(isolab(&pg).arg("import").arg(&bundle), 0);
    assert!(again.contains("0 copied, 4 already there"), "{again}");
    let back = dir.path().join("back.bundle");
    status(
        isolab(&pg)
            .args(["export", "--bundle"])
            .arg(&back)
            .args(["1", "2", "3", "4"]),
        0,
    );
    let home = dir.path().join("home.db");
    status(isolab(&home).arg("import").arg(&back), 0);
    let listed = status(isolab(&home).args(["list", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(&listed).unwrap();
    assert_eq!(v["experiments"].as_array().unwrap().len(), 4, "{listed}");
    // The tags travelled with their experiments, and the gate decides as at home.
    let from_bundle = status(
        isolab(&home).args(["gate", "4", "--reference", "baseline-1"]),
        4,
    );
    assert!(from_bundle.contains("worse 1"), "{from_bundle}");
}
