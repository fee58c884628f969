//! Root tests of the nspawn driver on this host: everything every engine must do
//! ([`common::exercise`]), sysbench with a cpu quota and with pinned cpus in the
//! cgroup the driver creates (limits read back from the kernel, the workload's own
//! `/proc/<pid>/cgroup`), the image left unmodified, and `gc` removing what a killed
//! run left (processes, cgroups, mounts, run and machine directories).
//!
//! Skipped with a printed reason when not root, when the bench image
//! (`/var/lib/isolab/images/bench`) is missing, or when `systemd-nspawn` is not
//! installed (`apt-get install systemd-container`). The tests run one at a time.

mod common;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use common::*;
use isolab_cgroups::{CpuQuota, IdSet, Limits};
use isolab_engines::nspawn::{Nspawn, DEFAULT_PROPAGATE_DIR, DEFAULT_RUN_DIR};
use isolab_engines::{Engine, NetworkMode, RunRequest};

fn skip() -> Option<String> {
    skip_reason("nspawn", "systemd-nspawn")
}

/// Whether the driver and nspawn forgot the container.
fn gone(id: &str) -> bool {
    !Path::new(DEFAULT_RUN_DIR).join(id).exists()
        && !Path::new(DEFAULT_PROPAGATE_DIR).join(id).exists()
}

/// Asserts that nothing of `req` is left: the engine forgot it, no process or cgroup
/// below the lab's parent, no mount below the run directories.
fn assert_nothing_left(lab: &Lab, req: &RunRequest) {
    assert!(gone(req.id.as_str()), "{} is left", req.id);
    for root in cgroup_mounts() {
        let dir = root.join(&lab.rel);
        assert!(!has_processes_below(&dir), "processes left below {dir:?}");
        assert!(
            !dir.join(&req.id).exists(),
            "{:?} is left",
            dir.join(&req.id)
        );
    }
    let left = mounts_below(DEFAULT_RUN_DIR);
    assert!(left.is_empty(), "mounts left: {left:?}");
}

/// Paths in `dir` changed (ctime) since `since`, and names added next to it.
fn changed_since(dir: &Path, since: SystemTime) -> Vec<PathBuf> {
    let since = since
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let mut changed = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let m = e.path().symlink_metadata().unwrap();
            if m.ctime() >= since {
                changed.push(e.path());
            }
            if m.is_dir() {
                todo.push(e.path());
            }
        }
    }
    changed
}

#[test]
fn nspawn_does_what_every_engine_does() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip() {
        isolab_skip::skip(why);
        return;
    }
    let nspawn_dirs_before = Path::new("/run/systemd/nspawn").exists();
    let engine = Nspawn::new();
    exercise(&engine, DEFAULT_RUN_DIR, &gone);
    engine.shutdown().unwrap();
    if !nspawn_dirs_before {
        assert!(!Path::new("/run/systemd/nspawn").exists());
    }
}

#[test]
fn sysbench_runs_with_a_cpu_quota_and_with_pinned_cpus_in_the_drivers_cgroup() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip() {
        isolab_skip::skip(why);
        return;
    }
    // ctime has a granularity of a second: wait for the next one.
    let start = SystemTime::now() + std::time::Duration::from_secs(1);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let engine = Nspawn::new();
    engine.ensure_ready().unwrap();
    let image = engine.prepare_image(Path::new(IMAGE)).unwrap();
    let lab = Lab::new("nspawn-sysbench");
    let _gc = GcOnDrop(&engine);
    let cases = [
        (
            "cpu1",
            Limits {
                cpu: Some(CpuQuota::from_cpus(1.0, CpuQuota::DEFAULT_PERIOD).unwrap()),
                ..Limits::default()
            },
        ),
        (
            "cpuset1",
            Limits {
                cpuset: Some("1".parse::<IdSet>().unwrap()),
                ..Limits::default()
            },
        ),
    ];
    for (case, limits) in cases {
        let argv = ["sysbench", "cpu", "--threads=2", "--time=2", "run"];
        let req = lab.request(case, &argv, limits.clone(), NetworkMode::None);
        let container = Path::new("/").join(&lab.rel).join(&req.id);
        // The workload's own view of its cgroups, read while it runs.
        let seen = Arc::new(Mutex::new(None::<String>));
        let (seen2, cpu_dir) = (
            Arc::clone(&seen),
            lab.cpu_mount.join(&lab.rel).join(&req.id),
        );
        let ran = lab.run(&engine, &req, &image, "sysbench", move |_| {
            let sysbench = isolab_cgroups::procs(&cpu_dir).into_iter().find(|p| {
                std::fs::read_to_string(format!("/proc/{p}/comm"))
                    .is_ok_and(|c| c.trim() == "sysbench")
            });
            *seen2.lock().unwrap() =
                sysbench.and_then(|p| std::fs::read_to_string(format!("/proc/{p}/cgroup")).ok());
        });
        assert_eq!(ran.status, 0, "{case}: {}\n{}", ran.stdout, ran.stderr);
        assert!(
            ran.stdout.contains("Number of threads: 2") && ran.stdout.contains("events per second"),
            "{}",
            ran.stdout
        );
        assert_eq!(ran.cgroup.as_deref(), Some(container.as_path()), "{case}");
        let read = ran.limits.clone().expect("limits read while sysbench ran");
        assert_eq!(limits.differences(&read), Vec::<String>::new(), "{case}");
        let cgroups = seen.lock().unwrap().clone().expect("sysbench's cgroups");
        for line in cgroups.lines() {
            let (_, rest) = line.split_once(':').unwrap();
            let (controllers, path) = rest.split_once(':').unwrap();
            let expected = match controllers {
                "devices" => PathBuf::from("/"),
                // nspawn's own: below the container's cgroup.
                "name=systemd" | "" => container.join("payload"),
                _ => container.clone(),
            };
            assert_eq!(Path::new(path), expected, "{case}: {line}");
        }
        eprintln!(
            "nspawn {case}: cgroup {} in {:.2?}; sysbench's cgroups:\n{cgroups}",
            container.display(),
            ran.wall
        );
        engine.remove(&req).unwrap();
        assert_nothing_left(&lab, &req);
    }
    lab.finish();
    let changed = changed_since(Path::new(IMAGE).parent().unwrap(), start);
    assert!(changed.is_empty(), "the image changed: {changed:?}");
    engine.shutdown().unwrap();
}

#[test]
fn gc_removes_what_a_killed_run_left() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip() {
        isolab_skip::skip(why);
        return;
    }
    let engine = Nspawn::new();
    engine.ensure_ready().unwrap();
    let image = engine.prepare_image(Path::new(IMAGE)).unwrap();
    let lab = Lab::new("nspawn-gc");
    let argv = ["sysbench", "cpu", "--time=60", "run"];
    let prefix = format!("isolab-test{}-gc", std::process::id());

    // The lab was killed with `kill -9`: nspawn and its container run on, and a new
    // isolab's gc (a new driver) removes them.
    let req = lab.request("gc1", &argv, Limits::default(), NetworkMode::None);
    let lines = Arc::new(Mutex::new(Vec::new()));
    let (lines2, prefix2) = (Arc::clone(&lines), prefix.clone());
    let ran = lab.run(&engine, &req, &image, "sysbench", move |_| {
        *lines2.lock().unwrap() = Nspawn::new().gc(&prefix2).unwrap();
    });
    assert_eq!(ran.status, 128 + libc::SIGKILL, "{}", ran.stderr);
    let lines = lines.lock().unwrap().clone();
    assert!(
        lines.contains(&format!("nspawn: removed container {}", req.id)),
        "{lines:?}"
    );
    eprintln!("gc of a running container:\n{}", lines.join("\n"));
    assert_nothing_left(&lab, &req);

    // nspawn itself was killed with SIGKILL (the lab's last resort) and the lab then
    // died before its remove.
    let req = lab.request("gc2", &argv, Limits::default(), NetworkMode::None);
    let ran = lab.run(&engine, &req, &image, "sysbench", |pid| {
        // SAFETY: kill(2) takes plain integers.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    assert_eq!(ran.status, 128 + libc::SIGKILL);
    let orphans = cgroup_mounts()
        .iter()
        .any(|m| has_processes_below(&m.join(&lab.rel)));
    eprintln!("nspawn SIGKILL: container still running after nspawn was killed: {orphans}");
    assert!(!gone(req.id.as_str()));
    let lines = Nspawn::new().gc(&prefix).unwrap();
    assert!(
        lines.contains(&format!("nspawn: removed container {}", req.id)),
        "{lines:?}"
    );
    assert_nothing_left(&lab, &req);
    assert_eq!(Nspawn::new().gc(&prefix).unwrap(), Vec::<String>::new());
    lab.finish();
    engine.shutdown().unwrap();
}

/// A test that fails before its engine removed the container leaves the engine's cgroups
/// below the lab's parent, also in hierarchies the lab does not manage (nspawn's `payload`
/// and `supervisor` in `name=systemd`): dropping the lab removes them all.
#[test]
fn a_dropped_lab_removes_what_a_failed_run_left_in_every_hierarchy() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        isolab_skip::skip("creating cgroups needs root");
        return;
    }
    let lab = Lab::new("leftover");
    let rel = lab.rel.clone();
    let left: Vec<PathBuf> = cgroup_mounts()
        .into_iter()
        .map(|m| m.join(&rel).join("isolab-test-ctr/payload"))
        .collect();
    for dir in &left {
        std::fs::create_dir_all(dir).unwrap();
    }
    drop(lab);
    for dir in &left {
        let parent = dir.parent().unwrap().parent().unwrap();
        assert!(!parent.exists(), "{} left", parent.display());
    }
}
