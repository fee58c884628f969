//! isolab on a pure cgroup v2 host, for real: the hosts users have (Debian 12, Ubuntu ≥ 21.10,
//! Fedora, RHEL 9, Kubernetes nodes) mount one unified hierarchy, while this project's machines
//! are hybrid (cgroup v1 controllers). Each test boots a guest of the `vm` platform's kind
//! (`isolab_vm::test_guest`: pure cgroup2 with cpu, cpuset, memory, pids and io) and runs in
//! it, as root: the cgroups crate's real-cgroupfs tests, isolab-runtime's cgroup and lifecycle
//! tests, and `isolab run` of a small experiment on the `host` and `isolab` platforms.
//!
//! The test binaries are this workspace's own, found with `cargo test --no-run
//! --message-format=json` (all fresh in `cargo test --workspace`: the same build), and reach
//! the guest through read-only 9p shares at their host paths. In the guest a skip fails the
//! test (strict mode) unless it is one of the v1-only tests, which skip there by design
//! ([`GUEST_ALLOWED_SKIPS`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Instant;

use isolab_vm::agent::shell_quote;
use isolab_vm::test_guest::{GuestTest, GuestUnavailable, TestGuest};
use isolab_vm::GuestRun;
use serde_json::Value;

/// The allow-list of skips in the guest: tests of the v1 (and hybrid) paths, which run for
/// real on this project's hybrid hosts.
const GUEST_ALLOWED_SKIPS: &str = "\
# v1 and hybrid tests: they run for real on the hybrid hosts isolab is developed on.
this host is pure cgroup v2
";

/// The workspace's root (two levels above this crate).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/isolab has a workspace two levels up")
        .to_path_buf()
}

/// One executable cargo built for the workspace's tests.
#[derive(Debug, Clone)]
struct Artifact {
    package: String,
    target: String,
    /// Whether it is a test harness (unit or integration tests) rather than a program.
    test: bool,
    executable: PathBuf,
    /// The package's directory (the tests' working directory, `CARGO_MANIFEST_DIR`).
    manifest_dir: PathBuf,
}

/// Every executable of `cargo test --workspace --no-run` (fresh after the outer
/// `cargo test --workspace`, so the same binaries; built otherwise).
fn artifacts() -> &'static [Artifact] {
    static ARTIFACTS: OnceLock<Vec<Artifact>> = OnceLock::new();
    ARTIFACTS.get_or_init(|| {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let t = Instant::now();
        let out = Command::new(&cargo)
            .args([
                "test",
                "--workspace",
                "--locked",
                "--no-run",
                "--message-format=json",
            ])
            .current_dir(workspace())
            .output()
            .expect("run cargo test --no-run");
        assert!(
            out.status.success(),
            "cargo test --workspace --no-run failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut found = Vec::new();
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(msg) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let Some(executable) = msg["executable"].as_str() else {
                continue;
            };
            let manifest = PathBuf::from(msg["manifest_path"].as_str().unwrap_or_default());
            found.push(Artifact {
                package: msg["package_id"]
                    .as_str()
                    .and_then(package_name)
                    .unwrap_or_default(),
                target: msg["target"]["name"].as_str().unwrap_or_default().into(),
                test: msg["profile"]["test"].as_bool().unwrap_or(false),
                executable: executable.into(),
                manifest_dir: manifest.parent().unwrap_or(Path::new("/")).into(),
            });
        }
        eprintln!("{} test executables in {:?}", found.len(), t.elapsed());
        found
    })
}

/// The package name of a cargo package id: `path+file:///…/crates/isolab-cgroups#0.1.0` (the
/// name is the last path component unless `#name@version` names it).
fn package_name(id: &str) -> Option<String> {
    let (url, fragment) = id.split_once('#').unwrap_or((id, ""));
    match fragment.split_once('@') {
        Some((name, _)) => Some(name.to_string()),
        None => url.rsplit('/').next().map(str::to_string),
    }
}

fn artifact(package: &str, target: &str, test: bool) -> &'static Artifact {
    artifacts()
        .iter()
        .find(|a| a.package == package && a.target == target && a.test == test)
        .unwrap_or_else(|| panic!("cargo built no {package} target {target} (test: {test})"))
}

/// The guest, prepared once; `None` (the test skips) when this machine cannot boot one.
fn guest() -> Option<&'static TestGuest> {
    static GUEST: OnceLock<Result<TestGuest, String>> = OnceLock::new();
    let prepared = GUEST.get_or_init(|| match TestGuest::prepare() {
        Ok(g) => {
            eprintln!("test guest: {} ({})", g.accel().accel, g.accel().reason);
            Ok(g)
        }
        Err(GuestUnavailable::Skip(reason)) => Err(reason),
        Err(GuestUnavailable::Failed(e)) => panic!("cannot prepare the test guest: {e}"),
    });
    match prepared {
        Ok(g) => Some(g),
        Err(reason) => {
            isolab_skip::skip(reason);
            None
        }
    }
}

/// The read-only shares that make the workspace's binaries and fixtures appear at their host
/// paths in the guest: the workspace, and the target directory when it lies elsewhere.
fn shares() -> Vec<PathBuf> {
    let ws = workspace();
    let mut shares = vec![ws.clone()];
    let target = artifact("isolab", "isolab", false)
        .executable
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/isolab")
        .to_path_buf();
    if !target.starts_with(&ws) {
        shares.push(target);
    }
    shares
}

/// Boots the guest and runs `script` in a fresh workdir; returns the run and the workdir.
fn in_guest(
    guest: &TestGuest,
    script: &str,
    extra_shares: &[PathBuf],
) -> (GuestRun, tempfile::TempDir) {
    let work = tempfile::Builder::new()
        .prefix("isolab-v2-")
        .tempdir()
        .unwrap();
    std::fs::write(work.path().join("allowed-skips"), GUEST_ALLOWED_SKIPS).unwrap();
    let mut test = GuestTest {
        shares: shares(),
        ..GuestTest::default()
    };
    test.shares.extend(extra_shares.iter().cloned());
    test.env = vec![
        (
            "ISOLAB_STRICT_SKIPS".into(),
            work.path().join("allowed-skips").display().to_string(),
        ),
        (
            "ISOLAB_SKIP_LOG".into(),
            work.path().join("skips.log").display().to_string(),
        ),
        ("RUST_BACKTRACE".into(), "1".into()),
    ];
    let t = Instant::now();
    let run = guest.run(work.path(), script, &test).unwrap_or_else(|e| {
        // What the script left before the guest was stopped: a watched command's hang
        // report and the ends of its output.
        let mut names: Vec<PathBuf> = std::fs::read_dir(work.path())
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "txt" || x == "out" || x == "err")
            })
            .collect();
        names.sort();
        let left: String = names
            .iter()
            .filter_map(|path| {
                let name = path.file_name()?.to_string_lossy();
                let text = std::fs::read_to_string(path).ok()?;
                let tail: Vec<&str> = text.lines().rev().take(400).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                Some(format!("== {name} (its end)\n{}\n", tail.join("\n")))
            })
            .collect();
        panic!("the guest run failed: {e}\n{left}")
    });
    eprintln!(
        "guest: boot {:?}, script {:?}, total {:?} (host {:?}), status {}",
        run.boot,
        run.wall,
        run.total,
        t.elapsed(),
        run.exit_status
    );
    (run, work)
}

/// What a test binary did in the guest.
struct GuestTests {
    run: GuestRun,
    /// `(test, outcome)` from libtest's `test NAME ... OUTCOME` lines.
    results: Vec<(String, String)>,
    /// `(test, reason)` from the skip log.
    skips: Vec<(String, String)>,
    /// Cgroup directories left in the guest's hierarchy after the tests.
    leftover_cgroups: Vec<String>,
}

impl GuestTests {
    /// Asserts that each of `names` ran and passed (not skipped).
    fn assert_passed(&self, names: &[&str]) {
        for name in names {
            let outcome = self
                .results
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, o)| o.as_str());
            assert_eq!(
                outcome,
                Some("ok"),
                "{name} in the guest: {}",
                self.run.stdout
            );
            assert!(
                !self.skips.iter().any(|(n, _)| n == name),
                "{name} skipped in the guest: {:?}",
                self.skips
            );
        }
    }
}

/// Runs test binary `bin` with libtest `args` (filters, `--exact`) in the guest, strict about
/// skips, and lists what it left in the guest's cgroup hierarchy. Panics with the output when
/// a test fails.
fn guest_tests(guest: &TestGuest, bin: &Artifact, args: &[&str], setup: &str) -> GuestTests {
    let mut line = vec![
        bin.executable.display().to_string(),
        "--test-threads=1".into(),
    ];
    line.extend(args.iter().map(|a| a.to_string()));
    let quoted: Vec<String> = line.iter().map(|w| shell_quote(w)).collect();
    let script = format!(
        "{setup}\ncd {dir} || exit 99\nexport CARGO_MANIFEST_DIR={dir}\n{cmd}\nstatus=$?\n\
         echo '== leftover cgroups =='\nfind /sys/fs/cgroup -mindepth 1 -type d\nexit $status\n",
        dir = shell_quote(&bin.manifest_dir.to_string_lossy()),
        cmd = quoted.join(" "),
    );
    let (run, work) = in_guest(guest, &script, &[]);
    let (tests, leftovers) = run
        .stdout
        .split_once("== leftover cgroups ==\n")
        .unwrap_or((run.stdout.as_str(), ""));
    let results = tests
        .lines()
        .filter_map(|l| l.strip_prefix("test "))
        .filter_map(|l| l.split_once(" ... "))
        .map(|(name, outcome)| (name.to_string(), outcome.trim().to_string()))
        .collect();
    let skips = std::fs::read_to_string(work.path().join("skips.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(t, r)| (t.to_string(), r.to_string()))
        .collect::<Vec<_>>();
    for (test, reason) in &skips {
        eprintln!("skipped in the guest: {test}: {reason}");
    }
    assert_eq!(
        run.exit_status, 0,
        "{} {} failed in the pure cgroup v2 guest:\n{}\n{}",
        bin.package, bin.target, run.stdout, run.stderr
    );
    GuestTests {
        leftover_cgroups: leftovers.lines().map(str::to_string).collect(),
        results,
        skips,
        run,
    }
}

#[test]
fn the_cgroups_crates_real_tests_pass_on_pure_cgroup_v2() {
    let Some(g) = guest() else { return };
    let bin = artifact("isolab-cgroups", "cgroups", true);
    let t = guest_tests(g, bin, &["real_"], "");
    t.assert_passed(&[
        "real_v2_limits_throttle_and_cleanup",
        "real_v2_kill_all_stops_a_fork_loop",
        "real_v2_process_leaf_lets_a_container_cgroup_nest",
        "real_gc_of_leftovers",
        "real_enter_puts_what_the_caller_spawns_in_the_cgroup_and_leave_returns",
    ]);
    // The v1 and hybrid tests skip there, by design: they run on this project's hosts.
    for (test, reason) in &t.skips {
        assert!(
            reason.contains("this host is pure cgroup v2"),
            "{test}: {reason}"
        );
    }
    assert!(
        t.leftover_cgroups.is_empty(),
        "left behind: {:?}",
        t.leftover_cgroups
    );
}

/// isolab-runtime's cgroup and lifecycle tests: limits read back from `cpu.max`,
/// `cpuset.cpus.effective`, `memory.max`, `pids.max` and `io.max` while the container runs,
/// an OCI bundle's `cpu.shares` (v2: `cpu.weight`), `memory.reservation` (`memory.low`) and
/// `unified` applied,
/// its init born in its cgroup (`CLONE_INTO_CGROUP`), the OOM killer and a fork bomb stopped
/// by the limits, the quota measured, a cgroup mount, a cgroup parent, the OCI operations and
/// a `kill -9` of the runtime followed by `gc`, each leaving nothing behind.
const RUNTIME_TESTS: &[&str] = &[
    "limits_are_in_the_cgroup_files_while_the_container_runs",
    "oci_shares_reservation_hugepages_and_unified_are_applied_or_refused",
    "pid_namespace_and_init",
    "exit_codes_and_signals_propagate",
    "memory_limit_oom_kills_inside",
    "pids_limit_stops_a_fork_bomb",
    "cpuset_equals_affinity",
    "cpu_quota_half_a_cpu",
    "overlay_roots",
    "oci_cgroup_mount_shows_the_container_its_own_cgroup",
    "cgroup_parent_existing_with_cpuset_and_missing",
    "report_file_has_status_limits_and_stats",
    "kill_9_then_gc_leaves_nothing_of_a_directory_root",
    "oci_operations_create_start_kill_delete",
    "oci_kill_9_between_create_and_start_leaves_nothing",
];

#[test]
fn the_runtimes_cgroup_and_lifecycle_tests_pass_on_pure_cgroup_v2() {
    let Some(g) = guest() else { return };
    let bin = artifact("isolab-runtime", "runtime", true);
    let mut args = vec!["--exact"];
    args.extend_from_slice(RUNTIME_TESTS);
    // The runtime's tests build their roots from a static busybox: the agent's.
    let t = guest_tests(
        g,
        bin,
        &args,
        "cp /run/isolab-vm/busybox /bin/busybox || exit 98",
    );
    t.assert_passed(RUNTIME_TESTS);
    assert!(t.skips.is_empty(), "{:?}", t.skips);
    assert!(
        t.leftover_cgroups.is_empty(),
        "left behind: {:?}",
        t.leftover_cgroups
    );
}

/// A small experiment on the `host` and `isolab` platforms: quota and pinned placements,
/// alone and beside a cpu neighbour at 90% of the host, and half a cpu over a 10 ms
/// period alone (read back from `cpu.max` exactly), 2 runs a cell.
const PURE_V2_SPEC: &str = r#"[experiment]
name = "pure-v2"
seed = 3
repetitions = { warmup = 0, min = 2, max = 2, target_cv = 0.5 }
duration = "1s"
# The guest's two vCPUs take turns on one host thread (single-threaded TCG): a wake-up
# waits for the other vCPU's turn, beyond the latency probe's default of 500 ms at p99
# beside a neighbour at 90%.
probe_threshold = "5s"
baseline = { platform = "host" }

[shape.half]
cpus = 0.5
cpu_period = "10ms"

[matrix]
platform = ["host", "isolab"]
shape = ["medium", "half"]
placement = ["quota", "pinned"]
workload = ["sysbench-cpu"]
neighbour = ["none", "cpu@90%"]
exclude = [{ shape = "half", placement = "pinned" }, { shape = "half", neighbour = "cpu@90%" }]
"#;

/// What `isolab run` may leave in the guest: cgroups, mounts of the runtime, its state (the
/// seccomp cache is meant to stay), and processes other than kernel threads, the agent's
/// shell and what the script runs. Reading a process's command line waits for its memory
/// map's lock, which a process stuck in a page fault holds: each read has a time limit.
const GUEST_LEFTOVERS: &str = r#"
echo '== cgroups =='; find /sys/fs/cgroup -mindepth 1 -type d
echo '== mounts =='; grep -E 'isolab|overlay' /proc/mounts | grep -v -E '9p|/run/isolab-vm'
echo '== state =='; find /run/isolab -mindepth 1 -not -path '/run/isolab/seccomp-cache*' -not -name '*.lock' -not -name lock -not -name 'last_reserved_ip*' 2>/dev/null
echo '== processes =='; for p in /proc/[0-9]*; do a=$(timeout 5 tr -d '\0' < $p/cmdline 2>/dev/null); [ $? = 124 ] && { echo "${p#/proc/} $(cat $p/comm 2>/dev/null) (stuck: its command line cannot be read)"; continue; }; [ -n "$a" ] || continue; c=$(cat $p/comm 2>/dev/null); case "$c" in sh|busybox|cat|grep|find|sleep|tr|timeout|"") ;; *) echo "${p#/proc/} $c";; esac; done
echo '== end =='
"#;

/// The lines of section `name` of [`GUEST_LEFTOVERS`]'s output.
fn section<'a>(stdout: &'a str, name: &str) -> Vec<&'a str> {
    let start = format!("== {name} ==");
    stdout
        .lines()
        .skip_while(|l| *l != start)
        .skip(1)
        .take_while(|l| !l.starts_with("== "))
        .collect()
}

/// The isolab platform's images: the host's, shared read-only with the guest.
fn bench_images() -> PathBuf {
    let images = PathBuf::from("/var/lib/isolab/images");
    assert!(
        images.join("bench/bin/sh").exists(),
        "the bench image is missing at {}: make image-debug builds it (make test does)",
        images.display()
    );
    images
}

/// A spec written as `name` into a fresh temporary directory (the guest's share).
fn spec_file(prefix: &str, name: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let work = tempfile::Builder::new().prefix(prefix).tempdir().unwrap();
    let spec = work.path().join(name);
    std::fs::write(&spec, text).unwrap();
    (work, spec)
}

#[test]
fn isolab_runs_an_experiment_on_host_and_isolab_on_pure_cgroup_v2() {
    let Some(g) = guest() else { return };
    let isolab = &artifact("isolab", "isolab", false).executable;
    let images = bench_images();
    let (work, spec) = spec_file("isolab-v2-spec-", "pure-v2.toml", PURE_V2_SPEC);
    // The script's working directory is the guest run's workdir, read back below.
    let script = format!(
        "{GUEST_LEFTOVERS}\n\
         {run}\n\
         cp /root/v2.db v2.db\n\
         {GUEST_LEFTOVERS}\n\
         exit $status\n",
        run = watched(
            &format!(
                "{} --db /root/v2.db run --no-report --workdir /root/v2-work {} > run.out 2> run.err",
                shell_quote(&isolab.to_string_lossy()),
                shell_quote(&spec.to_string_lossy()),
            ),
            600
        ),
    );
    let (run, out) = in_guest(g, &script, &[work.path().to_path_buf(), images]);
    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap_or_default();
    let store = isolab_store::Store::open(&out.path().join("v2.db")).unwrap();
    let id = store.resolve("pure-v2").unwrap();
    let errors: Vec<String> = store
        .runs(id)
        .unwrap()
        .iter()
        .filter_map(|r| r.error.clone())
        .collect();
    assert_eq!(
        run.exit_status,
        0,
        "isolab run failed in the pure cgroup v2 guest:\n{}\n{}\nrun errors: {errors:#?}\n{}",
        read("run.out"),
        read("run.err"),
        read("hang.txt")
    );
    eprintln!("{}", read("run.out"));

    let env = store.environment(id).unwrap();
    let cgroups = env
        .iter()
        .find(|(k, _)| k.contains("cgroup"))
        .map(|(k, v)| format!("{k}={v}"));
    eprintln!("environment: {cgroups:?}");
    let cells = store.cells(id).unwrap();
    let runs = store.runs(id).unwrap();
    assert_eq!(cells.len(), 10, "{cells:?}");
    assert_eq!(runs.len(), 20);
    for run in &runs {
        let cell = cells.iter().find(|c| c.id == run.cell).unwrap();
        assert!(run.is_counted(), "{}: {:?}", cell.key, run.error);
        assert!(!run.metrics.is_empty(), "{}: no metrics", cell.key);
        let applied = &run.limits["applied"];
        if cell.key.contains("shape=half") {
            assert_eq!(
                applied["cpu"]["quota"]["nanos"], 5_000_000,
                "{}: {applied}",
                cell.key
            );
            assert_eq!(
                applied["cpu"]["period"]["nanos"], 10_000_000,
                "{}: {applied}",
                cell.key
            );
        } else {
            cpu_limit_read_back(&cell.key, run);
        }
        let t = |name: &str| telemetry(run, name);
        if cell.key.contains("placement=quota") {
            assert!(t("nr_periods").is_some_and(|n| n > 0.0), "{}", cell.key);
        }
        if cell.key.contains("cpu@90%") {
            assert!(t("neighbours").is_some_and(|n| n >= 1.0), "{}", cell.key);
            assert!(
                t("neighbours_cpu_s").is_some_and(|c| c > 0.0),
                "{}",
                cell.key
            );
        }
    }
    // Nothing left: what the guest had before the run, it has after.
    nothing_left(&run.stdout, &["cgroups", "mounts", "state", "processes"]);
}

/// Shell that runs `command` in the background and sets `status` to its exit status; if it
/// is still running after `secs` seconds, the kernel's list of blocked tasks goes to the
/// serial console (which a guest timeout reports), what every process waits in, the cgroups
/// with processes and the kernel log go to `hang.txt`, and it is sent SIGTERM (isolab then
/// tears down and says which runs it did not finish), then SIGKILL a minute later if
/// teardown hangs too: a hang in the guest is a failure that says where, not a VM killed at
/// the guest's timeout. Each read of the dump has a time limit: `ps` blocks on a process
/// stuck holding its memory map's lock.
fn watched(command: &str, secs: u32) -> String {
    format!(
        "{command} &\n\
         pid=$!\n\
         ( sleep {secs}; kill -0 $pid 2>/dev/null || exit 0\n\
           echo 8 > /proc/sys/kernel/printk; echo 1 > /proc/sys/kernel/sysrq\n\
           echo w > /proc/sysrq-trigger\n\
           {{ echo \"== still running after {secs} s\"\n\
             timeout 20 ps -eo pid,ppid,stat,wchan:32,etime,args\n\
             for p in /proc/[0-9]*; do echo \"== $p $(cat $p/comm 2>/dev/null)\"; timeout 2 cat $p/stack 2>/dev/null; done\n\
             timeout 20 grep -l . $(find /sys/fs/cgroup -name cgroup.procs) 2>/dev/null\n\
             dmesg | tail -200; }} > hang.txt 2>&1\n\
           kill -TERM $pid; sleep 60; kill -0 $pid 2>/dev/null || exit 0\n\
           echo \"== SIGTERM did not end it in 60 s\" >> hang.txt\n\
           echo w > /proc/sysrq-trigger; dmesg | tail -200 >> hang.txt 2>&1\n\
           kill -KILL $pid ) &\n\
         watch=$!\n\
         wait $pid; status=$?\n\
         pkill -P $watch 2>/dev/null; kill $watch 2>/dev/null; wait $watch 2>/dev/null"
    )
}

/// A run's counter `name`.
fn telemetry(run: &isolab_store::RunRecord, name: &str) -> Option<f64> {
    run.telemetry
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
}

/// A quota cell's 1 cpu (100 ms a 100 ms period) or a pinned cell's cpu 1 read back, and
/// cpu time used.
fn cpu_limit_read_back(key: &str, run: &isolab_store::RunRecord) {
    let applied = &run.limits["applied"];
    if key.contains("placement=quota") {
        assert_eq!(
            applied["cpu"]["quota"]["nanos"], 100_000_000,
            "{key}: {applied}"
        );
    } else {
        assert_eq!(applied["cpuset"], "1", "{key}: {applied}");
    }
    assert!(
        telemetry(run, "cpu_usage_s").is_some_and(|c| c > 0.1),
        "{key}: {:?}",
        run.telemetry
    );
}

/// The listing's `sections` after `== end ==` hold nothing they did not hold before it.
fn nothing_left(stdout: &str, sections: &[&str]) -> String {
    let (before, after) = stdout
        .split_once("== end ==")
        .expect("the leftover listing ran");
    for name in sections {
        let was = section(before, name);
        let left: Vec<&str> = section(after, name)
            .into_iter()
            .filter(|l| !was.contains(l))
            .collect();
        assert!(left.is_empty(), "{name} left behind in the guest: {left:?}");
    }
    after.to_string()
}

/// What an unprivileged user runs: the host and isolab platforms, quota and pinned, 2 runs a
/// cell.
const ROOTLESS_SPEC: &str = r#"[experiment]
name = "rootless"
seed = 5
repetitions = { warmup = 0, min = 2, max = 2, target_cv = 0.5 }
duration = "1s"
baseline = { platform = "host" }

[matrix]
platform = ["host", "isolab"]
shape = ["medium"]
placement = ["quota", "pinned"]
workload = ["sysbench-cpu"]
"#;

/// The guest's delegation, made by hand as systemd makes it for `Delegate=yes`: below
/// `lab.slice` (which passes every controller on), `user-1000.scope` chowned to uid 1000 with
/// its `cgroup.procs`, `cgroup.subtree_control` and `cgroup.threads`; `cpu-only.slice` passes
/// on only what systemd gives users by default (cpu memory pids) to a delegated
/// `user-1000.scope`; `not-mine` is root's.
const DELEGATE: &str = r#"
set -e
cg=/sys/fs/cgroup
mkdir $cg/lab.slice $cg/cpu-only.slice $cg/not-mine
echo '+cpu +cpuset +memory +pids +io' > $cg/lab.slice/cgroup.subtree_control
echo '+cpu +memory +pids' > $cg/cpu-only.slice/cgroup.subtree_control
for d in $cg/lab.slice/user-1000.scope $cg/cpu-only.slice/user-1000.scope; do
  mkdir $d
  chown 1000:1000 $d $d/cgroup.procs $d/cgroup.subtree_control $d/cgroup.threads
done
mkdir -p /home/lab /run/user/1000
chown 1000:1000 /home/lab /run/user/1000
chmod 700 /run/user/1000
set +e
"#;

/// Runs `command` as uid 1000 in cgroup `cgroup` (below /sys/fs/cgroup), the way `systemd-run
/// --user --scope` starts it: alone in the cgroup.
fn as_lab_user(cgroup: &str, command: &str) -> String {
    format!(
        "sh -c 'echo $$ > /sys/fs/cgroup/{cgroup}/cgroup.procs && exec setpriv --reuid=1000 \
         --regid=1000 --clear-groups env HOME=/home/lab XDG_RUNTIME_DIR=/run/user/1000 \
         sh -c \"cd /home/lab && exec {command}\"'"
    )
}

#[test]
fn an_unprivileged_user_runs_an_experiment_in_a_delegated_cgroup() {
    let Some(g) = guest() else { return };
    let isolab = artifact("isolab", "isolab", false)
        .executable
        .to_string_lossy()
        .into_owned();
    let images = bench_images();
    let (work, spec) = spec_file("isolab-v2-rootless-", "rootless.toml", ROOTLESS_SPEC);
    let spec = spec.to_string_lossy().into_owned();
    let run = |db: &str| format!("{isolab} --db {db} run --no-report {spec}");
    // The same experiment with its working directory on a tmpfs: a mount on the host.
    let tmpfs_spec = work.path().join("tmpfs.toml");
    std::fs::write(
        &tmpfs_spec,
        ROOTLESS_SPEC.replace("[matrix]\n", "[matrix]\nstorage = [\"tmpfs\"]\n"),
    )
    .unwrap();
    let tmpfs = format!(
        "{isolab} --db tmpfs.db run --no-report {}",
        tmpfs_spec.display()
    );
    let script = format!(
        "{DELEGATE}\n\
         {not_mine} > not-mine.out 2> not-mine.err; echo $? > not-mine.status\n\
         {cpu_only} > cpu-only.out 2> cpu-only.err; echo $? > cpu-only.status\n\
         {tmpfs} > tmpfs.out 2> tmpfs.err; echo $? > tmpfs.status\n\
         {GUEST_LEFTOVERS}\n\
         {lab}\n\
         cp /home/lab/lab.db lab.db\n\
         [ $status = 0 ] || {isolab} --db /home/lab/lab.db show rootless > show.out 2>&1\n\
         {GUEST_LEFTOVERS}\n\
         echo '== user files =='; find /sys/fs/cgroup /run/user/1000 /var/tmp -user 1000 -mindepth 1 \
           -not -path '/sys/fs/cgroup/*/user-1000.scope' -not -path '/sys/fs/cgroup/*/user-1000.scope/*' \
           -not -path '/run/user/1000/isolab/seccomp-cache*' \
           -not -name '*.lock' -not -name lock 2>/dev/null\n\
         echo '== end =='\n\
         exit $status\n",
        not_mine = as_lab_user("not-mine", &run("not-mine.db")),
        cpu_only = as_lab_user("cpu-only.slice/user-1000.scope", &run("cpu-only.db")),
        tmpfs = as_lab_user("lab.slice/user-1000.scope", &tmpfs),
        lab = watched(
            &format!(
                "{} > run.out 2> run.err",
                as_lab_user("lab.slice/user-1000.scope", &run("lab.db"))
            ),
            600
        ),
    );
    let (guest_run, out) = in_guest(g, &script, &[work.path().to_path_buf(), images]);
    let read = |name: &str| std::fs::read_to_string(out.path().join(name)).unwrap_or_default();

    // Refused before any run: what is wrong and what to do, and nothing stored.
    let refused = |name: &str, what: &str, says: [&str; 2]| {
        let err = read(&format!("{name}.err"));
        assert_eq!(read(&format!("{name}.status")).trim(), "1", "{err}");
        eprintln!("{what}:\n{err}");
        assert!(says.iter().all(|s| err.contains(s)), "{err}");
    };
    refused(
        "not-mine",
        "not delegated",
        [
            "/sys/fs/cgroup/not-mine is not delegated to you (uid 1000)",
            "systemd-run --user --scope -p Delegate=yes isolab run SPEC",
        ],
    );
    refused(
        "tmpfs",
        "storage that needs root",
        [
            "storage level(s) tmpfs mount a file system on the host",
            "drop `storage` from the matrix or run as root",
        ],
    );
    refused(
        "cpu-only",
        "cpuset not delegated",
        [
            "the cgroup controllers cpuset are not delegated",
            "Delegate=cpu cpuset io memory pids",
        ],
    );

    // Delegated: every run counted, the limits read back, nothing left.
    let store = isolab_store::Store::open(&out.path().join("lab.db")).unwrap();
    let runs = store
        .resolve("rootless")
        .and_then(|id| store.runs(id))
        .unwrap_or_default();
    let errors: Vec<String> = runs.iter().filter_map(|r| r.error.clone()).collect();
    assert_eq!(
        guest_run.exit_status,
        0,
        "isolab run as uid 1000 failed in the guest:\n{}\n{}\n{}\nrun errors: {errors:#?}\n{}",
        read("run.out"),
        read("run.err"),
        read("show.out"),
        read("hang.txt")
    );
    let id = store.resolve("rootless").unwrap();
    eprintln!("{}", read("run.out"));
    let cells = store.cells(id).unwrap();
    assert_eq!(cells.len(), 4, "{cells:?}");
    assert_eq!(runs.len(), 8);
    // The containers ran on the user's copy of the image, which says what it left out.
    let env = store.environment(id).unwrap();
    let value = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let copy = value("engine.isolab.user_copy").unwrap_or_default();
    assert!(
        copy.starts_with("/home/lab/.cache/isolab/images/"),
        "{env:?}"
    );
    assert!(
        value("engine.isolab.user_copy_left_out").is_some(),
        "{env:?}"
    );
    eprintln!(
        "user copy {copy}, left out: {}",
        value("engine.isolab.user_copy_left_out").unwrap_or_default()
    );
    for run in &runs {
        let cell = cells.iter().find(|c| c.id == run.cell).unwrap();
        assert!(run.is_counted(), "{}: {:?}", cell.key, run.error);
        cpu_limit_read_back(&cell.key, run);
    }
    let after = nothing_left(&guest_run.stdout, &["cgroups", "mounts", "processes"]);
    // The bases themselves stay, as root's /var/tmp/isolab and /run/isolab do.
    let left: Vec<&str> = section(&after, "user files")
        .into_iter()
        .filter(|l| !["/var/tmp/isolab-1000", "/run/user/1000/isolab"].contains(l))
        .collect();
    assert!(left.is_empty(), "uid 1000's files left behind: {left:?}");
}
