//! The conventions of a well-kept CLI, checked on the real binary without root: shell
//! completions and the man page generated from the clap definitions, `--color` and
//! NO_COLOR as no-color.org says, `schema_version` in every JSON output, `compare
//! --fail-on` exit statuses for CI, and outlier runs summed up in one line.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, UNIX_EPOCH};

use isolab_store::{MetricValue, NewCell, NewExperiment, NewRun, RunStatus, Store};

fn isolab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_isolab"))
}

fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("isolab runs")
}

fn text(o: &[u8]) -> String {
    String::from_utf8_lossy(o).into_owned()
}

fn program_exists(name: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The house keeps its shape (`scripts/house.py --check`): no non-test file over 1,000
/// lines, no function over 200, no circle of imports inside a crate, no import in
/// isolab-lab from a lower module up into the runner.
#[test]
fn the_house_has_no_large_file_long_function_or_circle() {
    if !program_exists("python3") {
        isolab_skip::skip("python3 is not installed: scripts/house.py is not run");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = run(Command::new("python3")
        .arg(root.join("scripts/house.py"))
        .arg("--check")
        .arg(&root));
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

#[test]
fn bash_completions_parse_and_zsh_and_fish_name_the_subcommands() {
    let out = run(isolab().args(["completions", "bash"]));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let script = text(&out.stdout);
    assert!(script.contains("compare"), "{script}");
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("isolab.bash");
    std::fs::write(&file, &script).unwrap();
    let check = run(Command::new("bash").arg("-n").arg(&file));
    assert!(check.status.success(), "bash -n: {}", text(&check.stderr));
    for shell in ["zsh", "fish"] {
        let out = run(isolab().args(["completions", shell]));
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        assert!(
            script.contains("isolab") && script.contains("fail-on"),
            "{shell}: {script}"
        );
    }
}

#[test]
fn the_man_page_renders_and_documents_exit_statuses_and_every_subcommand() {
    let out = run(isolab().arg("man"));
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH isolab"),
        "{page}"
    );
    assert!(page.contains("compare"), "{page}");
    let dir = tempfile::tempdir().unwrap();
    let out = run(isolab().args(["man", "--dir"]).arg(dir.path()));
    assert!(out.status.success(), "{}", text(&out.stderr));
    for page in [
        "isolab.1",
        "isolab-run.1",
        "isolab-compare.1",
        "isolab-man.1",
    ] {
        assert!(dir.path().join(page).is_file(), "{page} missing");
    }
    if !program_exists("man") {
        isolab_skip::skip("man is not installed (Debian's man-db): the page is not rendered");
        return;
    }
    let rendered = run(Command::new("man")
        .arg("-l")
        .arg(dir.path().join("isolab-compare.1"))
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100"));
    assert!(rendered.status.success(), "{}", text(&rendered.stderr));
    let rendered = text(&rendered.stdout);
    assert!(rendered.contains("--fail-on"), "{rendered}");
    let main = std::fs::read_to_string(dir.path().join("isolab.1")).unwrap();
    assert!(main.contains("Exit status: 0 success"), "{main}");
}

/// `list --shapes` under a pseudo-terminal (util-linux's `script`), with NO_COLOR as given.
fn shapes_on_a_terminal(color: &str, no_color: Option<&str>) -> String {
    let command = format!(
        "{} --color {color} list --shapes",
        env!("CARGO_BIN_EXE_isolab")
    );
    let mut cmd = Command::new("script");
    cmd.args(["-qec", &command, "/dev/null"]);
    match no_color {
        Some(v) => cmd.env("NO_COLOR", v),
        None => cmd.env_remove("NO_COLOR"),
    };
    let out = run(&mut cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

#[test]
fn colour_follows_the_flag_and_a_non_empty_no_color() {
    const ESC: char = '\u{1b}';
    // Not a terminal: auto never colours, always does, even with NO_COLOR set.
    let piped = text(&run(isolab().args(["list", "--shapes"])).stdout);
    assert!(!piped.contains(ESC), "{piped:?}");
    let forced = run(isolab()
        .args(["--color", "always", "list", "--shapes"])
        .env("NO_COLOR", "1"));
    assert!(
        text(&forced.stdout).contains(ESC),
        "{:?}",
        text(&forced.stdout)
    );
    if !program_exists("script") {
        isolab_skip::skip(
            "`script` (util-linux) is not installed: no pseudo-terminal to test `auto` on",
        );
        return;
    }
    assert!(shapes_on_a_terminal("auto", None).contains(ESC));
    // no-color.org: only a NO_COLOR that is present and not empty turns colour off.
    assert!(shapes_on_a_terminal("auto", Some("")).contains(ESC));
    assert!(!shapes_on_a_terminal("auto", Some("1")).contains(ESC));
    assert!(!shapes_on_a_terminal("never", None).contains(ESC));
}

/// A store with one experiment of four cells, `variant` a, a2 (the same distribution:
/// an A/A pair), b (10% slower: a known regression) and noisy (CV 40%, 3 runs: nothing can
/// be decided), 12 runs each but noisy's; a's 12th run is an outlier.
fn synthetic_store(path: &Path) {
    let mut store = Store::open(path).unwrap();
    let variants = ["a", "a2", "b", "noisy"];
    let cells = variants
        .iter()
        .enumerate()
        .map(|(i, v)| NewCell {
            index: i as u32,
            key: format!("variant={v}"),
            levels: vec![("variant".into(), (*v).into())],
        })
        .collect();
    let id = store
        .create_experiment(&NewExperiment {
            name: "conventions".into(),
            spec_toml: String::new(),
            spec_path: None,
            seed: 1,
            isolab_version: "test".into(),
            created_at: UNIX_EPOCH,
            cells,
            environment: vec![],
        })
        .unwrap();
    // A fixed, symmetric spread of ±0.5% around each cell's mean.
    let wiggle = [
        0.0, 0.004, -0.004, 0.002, -0.002, 0.005, -0.005, 0.001, -0.001, 0.003, -0.003, 0.0,
    ];
    for stored in store.cells(id).unwrap() {
        let variant = stored.key.trim_start_matches("variant=");
        let (mean, runs) = match variant {
            "b" => (110.0, 12),
            "noisy" => (100.0, 3),
            _ => (100.0, 12),
        };
        for r in 0..runs {
            let value = match (variant, r) {
                ("noisy", _) => mean * [0.6, 1.0, 1.4][r],
                ("a", 11) => mean * 1.6,
                ("a2", _) => mean * (1.0 + wiggle[(r + 5) % 12]),
                _ => mean * (1.0 + wiggle[r]),
            };
            store
                .insert_run(&NewRun {
                    cell: stored.id,
                    repetition: r as u32 + 1,
                    warmup: false,
                    round: r as u32 + 1,
                    status: RunStatus::Ok,
                    exit_code: Some(0),
                    started_at: UNIX_EPOCH,
                    wall: Duration::from_secs(1),
                    stdout: String::new(),
                    stderr: String::new(),
                    error: None,
                    limits: serde_json::json!({}),
                    metrics: vec![MetricValue {
                        name: "wall_time".into(),
                        unit: "s".into(),
                        direction: isolab_stats::Direction::Lower,
                        value,
                    }],
                    telemetry: Default::default(),
                    series: vec![],
                    intervals: vec![],
                    notes: vec![],
                })
                .unwrap();
        }
    }
}

fn compare(db: &Path, a: &str, b: &str, fail_on: &str) -> Output {
    run(isolab().arg("--db").arg(db).args([
        "compare",
        "conventions",
        "--a",
        &format!("variant={a}"),
        "--b",
        &format!("variant={b}"),
        "--fail-on",
        fail_on,
    ]))
}

#[test]
fn compare_fail_on_exits_4_on_a_regression_0_on_an_a_a_pair_and_5_when_undecided() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    synthetic_store(&db);
    let worse = compare(&db, "a2", "b", "worse");
    assert_eq!(worse.status.code(), Some(4), "{}", text(&worse.stdout));
    assert!(
        text(&worse.stdout).contains("worse"),
        "{}",
        text(&worse.stdout)
    );
    let aa = compare(&db, "a", "a2", "worse,undecided");
    assert_eq!(aa.status.code(), Some(0), "{}", text(&aa.stdout));
    // Better is not worse, but it is a change.
    let better = compare(&db, "b", "a2", "worse");
    assert_eq!(better.status.code(), Some(0), "{}", text(&better.stdout));
    let changed = compare(&db, "b", "a2", "changed");
    assert_eq!(changed.status.code(), Some(4), "{}", text(&changed.stdout));
    let undecided = compare(&db, "a2", "noisy", "worse,undecided");
    assert_eq!(
        undecided.status.code(),
        Some(5),
        "{}",
        text(&undecided.stdout)
    );
    // Without --fail-on, compare reports and succeeds.
    let plain = run(isolab().arg("--db").arg(&db).args([
        "compare",
        "conventions",
        "--a",
        "variant=a2",
        "--b",
        "variant=b",
    ]));
    assert_eq!(plain.status.code(), Some(0), "{}", text(&plain.stderr));
}

fn json_of(out: Output) -> serde_json::Value {
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out.stdout)))
}

#[test]
fn every_json_output_carries_its_schema_version() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    synthetic_store(&db);
    let version = serde_json::json!(isolab_report::SCHEMA_VERSION);
    let spec = dir.path().join("s.toml");
    std::fs::write(
        &spec,
        "[experiment]\nname = \"s\"\n\n[matrix]\nworkload = [\"w\"]\n\n[workload.w]\ncommand = \"true\"\nparser = \"time\"\n",
    )
    .unwrap();
    let db_args = |cmd: &mut Command| {
        cmd.arg("--db").arg(&db);
    };
    let outputs: Vec<(&str, Output)> = vec![
        ("list", {
            let mut c = isolab();
            db_args(&mut c);
            run(c.args(["list", "--json"]))
        }),
        (
            "list --shapes",
            run(isolab().args(["list", "--shapes", "--json"])),
        ),
        (
            "list --workloads",
            run(isolab().args(["list", "--workloads", "--json"])),
        ),
        (
            "list --platforms",
            run(isolab().args(["list", "--platforms", "--json"])),
        ),
        (
            "list --stacks",
            run(isolab().args(["list", "--stacks", "--json"])),
        ),
        ("check", run(isolab().args(["check", "--json"]).arg(&spec))),
        ("show", {
            let mut c = isolab();
            db_args(&mut c);
            run(c.args(["show", "conventions", "--json"]))
        }),
        ("compare", {
            let mut c = isolab();
            db_args(&mut c);
            run(c.args([
                "compare",
                "conventions",
                "--a",
                "variant=a",
                "--b",
                "variant=b",
                "--json",
            ]))
        }),
        ("export", {
            let mut c = isolab();
            db_args(&mut c);
            run(c.args(["export", "conventions", "--format", "json"]))
        }),
        ("export --series", {
            let mut c = isolab();
            db_args(&mut c);
            run(c.args(["export", "conventions", "--series", "--format", "json"]))
        }),
        ("advise", {
            let mut c = isolab();
            db_args(&mut c);
            run(c.args(["advise", "conventions", "--json"]))
        }),
        ("env", run(isolab().args(["env", "--json"]))),
    ];
    for (what, out) in outputs {
        let v = json_of(out);
        assert_eq!(v["schema_version"], version, "{what}: {v}");
    }
    let mut c = isolab();
    db_args(&mut c);
    let export = json_of(run(c.args(["export", "conventions", "--format", "json"])));
    let rows = export["observations"].as_array().expect("observations");
    assert_eq!(rows.len(), 12 * 3 + 3, "{export}");
    assert_eq!(rows[0]["levels"]["variant"], "a", "{export}");
}

#[test]
fn outlier_runs_are_one_line_unless_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("c.db");
    synthetic_store(&db);
    let show = |extra: &[&str]| {
        let out = run(isolab()
            .arg("--db")
            .arg(&db)
            .args(["show", "conventions"])
            .args(extra));
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    };
    let summary = show(&[]);
    let lines: Vec<&str> = summary.lines().filter(|l| l.contains("outlier")).collect();
    assert_eq!(lines.len(), 1, "{summary}");
    assert!(
        lines[0].starts_with("1 outlier run in 1 cell (modified z beyond ±3.5), kept, not dropped: `isolab show 1 --outliers`"),
        "{summary}"
    );
    let detail = show(&["--outliers"]);
    let lines: Vec<&str> = detail
        .lines()
        .filter(|l| l.starts_with("outlier: run "))
        .collect();
    assert_eq!(lines.len(), 1, "{detail}");
    assert!(lines[0].contains(" of variant=a = 160 "), "{detail}");
}
