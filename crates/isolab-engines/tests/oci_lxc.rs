//! Root tests of the runc, crun, youki and LXC drivers on this host: real containers on
//! the bench image, limits read back from the container's cgroup while the workload
//! runs, exit status and output passed through, SIGTERM, loopback-only networks, and
//! nothing left afterwards (containers, cgroups, mounts, bundle directories), also when
//! `gc` cleans up after a killed run of runc, crun or youki.
//!
//! Skipped with a printed reason when not root, when the bench image
//! (`/var/lib/isolab/images/bench`) is missing, or when an engine is not installed.
//! The tests run one at a time (a lock): crun's host fix mounts a `hugetlb` hierarchy
//! that the other engines' containers would otherwise get cgroups in.
//!
//! `cargo test -p isolab-engines --test oci_lxc -- --ignored --nocapture start_latency`
//! prints the start-to-exit latency of `true` per engine.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use isolab_cgroups::Limits;
use isolab_engines::lxc::Lxc;
use isolab_engines::oci::{self, Listing, OciEngine, OciKind};
use isolab_engines::youki::YOUKI;
use isolab_engines::{Engine, NetworkMode};

/// A run whose command was killed leaves its container running; `gc` with the
/// experiment's prefix (what `isolab gc` passes for a dead experiment) finds it,
/// deletes it and its bundle, and leaves nothing.
fn gc_finds_a_killed_run(engine: &dyn Engine, run_dir: &str, gone: &dyn Fn(&str) -> bool) {
    let name = engine.name();
    let image = engine.prepare_image(Path::new(IMAGE)).unwrap();
    let lab = Lab::new(&format!("{name}-gc"));
    let req = lab.request(
        "gc",
        &["sysbench", "cpu", "--time=60", "run"],
        quota(),
        NetworkMode::None,
    );
    let ran = lab.run(engine, &req, &image, "sysbench", |pid| {
        // SAFETY: kill(2) takes plain integers.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    assert_eq!(ran.status, 128 + libc::SIGKILL, "{name}");
    assert!(
        !gone(req.id.as_str()),
        "{name}: the killed run's container is gone"
    );
    let lines = engine
        .gc(&format!("isolab-test{}-", std::process::id()))
        .unwrap();
    let id = req.id.as_str();
    assert!(
        lines
            .iter()
            .any(|l| l.contains("deleted container") && l.contains(id)),
        "{name}: {lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("removed bundle") && l.contains(id)),
        "{name}: {lines:?}"
    );
    assert!(gone(id), "{name}: the engine still knows {id}");
    assert!(!Path::new(run_dir).join(id).exists());
    let left = mounts_below(&format!("{run_dir}/{id}"));
    assert!(left.is_empty(), "{name}: mounts left: {left:?}");
    lab.finish();
}

fn runtime_forgot(kind: OciKind) -> impl Fn(&str) -> bool {
    move |id: &str| {
        let known = match kind.listing {
            Listing::Json => {
                let out = Command::new(kind.name())
                    .args(["list", "--format", "json"])
                    .output()
                    .unwrap();
                String::from_utf8_lossy(&out.stdout).contains(&format!("\"{id}\""))
            }
            // youki's `list` is a table: ask for the container's state instead.
            Listing::StateRoot => Command::new(kind.name())
                .args(["state", id])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .unwrap()
                .success(),
        };
        !known && !kind.default_state_root().join(id).exists()
    }
}

#[test]
fn runc_runs_sysbench_with_limits_and_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("runc", "runc") {
        isolab_skip::skip(why);
        return;
    }
    let engine = OciEngine::new(oci::RUNC);
    exercise(&engine, "/run/isolab/oci", &runtime_forgot(oci::RUNC));
    gc_finds_a_killed_run(&engine, "/run/isolab/oci", &runtime_forgot(oci::RUNC));
    engine.shutdown().unwrap();
}

#[test]
fn crun_runs_sysbench_with_the_hybrid_fix_undone_afterwards() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("crun", "crun") {
        isolab_skip::skip(why);
        return;
    }
    let controllers =
        std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers").unwrap_or_default();
    let needs_fix = !controllers.trim().is_empty();
    let strict = OciEngine::new(oci::CRUN);
    if needs_fix {
        let err = strict.ensure_ready().unwrap_err().to_string();
        assert!(
            err.contains(controllers.split_whitespace().next().unwrap()),
            "{err}"
        );
    }
    let mounts_before = cgroup_mounts();
    let engine = OciEngine::new(oci::CRUN).allowing_host_fixes(true);
    exercise(&engine, "/run/isolab/oci", &runtime_forgot(oci::CRUN));
    gc_finds_a_killed_run(&engine, "/run/isolab/oci", &runtime_forgot(oci::CRUN));
    assert_eq!(engine.host_fixes().is_empty(), !needs_fix);
    engine.shutdown().unwrap();
    assert!(engine.host_fixes().is_empty());
    assert_eq!(
        cgroup_mounts(),
        mounts_before,
        "the host's cgroup mounts are restored"
    );
    if needs_fix {
        // The kernel hands the controller back to cgroup2 once the v1 hierarchy is gone.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let now = std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers")
                .unwrap_or_default();
            if now.trim() == controllers.trim() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "cgroup2 lists {now:?}, was {controllers:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

#[test]
fn youki_runs_sysbench_on_the_host_as_it_is_and_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("youki", "youki") {
        isolab_skip::skip(why);
        return;
    }
    // youki needs no host fix, also on a hybrid host whose cgroup2 mount lists
    // controllers (which crun refuses): the mounts stay as they are.
    let mounts_before = cgroup_mounts();
    let engine = OciEngine::new(YOUKI);
    exercise(&engine, "/run/isolab/oci", &runtime_forgot(YOUKI));
    gc_finds_a_killed_run(&engine, "/run/isolab/oci", &runtime_forgot(YOUKI));
    assert!(engine.host_fixes().is_empty());
    engine.shutdown().unwrap();
    assert_eq!(cgroup_mounts(), mounts_before, "no cgroup mount changed");
    let state: Vec<_> = std::fs::read_dir(YOUKI.default_state_root())
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(
        !state
            .iter()
            .any(|n| n.to_string_lossy().starts_with("isolab-test")),
        "youki's state root keeps {state:?}"
    );
}

#[test]
fn lxc_runs_sysbench_with_limits_and_leaves_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("lxc", "lxc-execute") {
        isolab_skip::skip(why);
        return;
    }
    let engine = Lxc::new();
    let gone = |id: &str| {
        !Path::new("/run/isolab/lxc").join(id).exists()
            && cgroup_mounts()
                .iter()
                .all(|m| !m.join("isolab-lxc").join(id).exists())
    };
    exercise(&engine, "/run/isolab/lxc", &gone);
    engine.shutdown().unwrap();
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Start-to-exit latency of `true` through each engine's run_command: the engine's
/// command alone, with the bundle/configuration preparation, and with remove too.
#[test]
#[ignore = "a measurement, not a check: run with --ignored --nocapture"]
fn start_latency() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(why) = skip_reason("runc", "runc") {
        isolab_skip::skip(why);
        return;
    }
    let mut engines: Vec<(String, Box<dyn Engine>)> = vec![
        ("runc (tini)".into(), Box::new(OciEngine::new(oci::RUNC))),
        (
            "crun (tini)".into(),
            Box::new(OciEngine::new(oci::CRUN).allowing_host_fixes(true)),
        ),
        ("youki (tini)".into(), Box::new(OciEngine::new(YOUKI))),
        ("lxc".into(), Box::new(Lxc::new())),
    ];
    for kind in [oci::RUNC, oci::CRUN, YOUKI] {
        let mut e = OciEngine::new(kind).allowing_host_fixes(true);
        e.init = false;
        engines.push((format!("{} (no init)", kind.name()), Box::new(e)));
    }
    for (label, engine) in &engines {
        engine.ensure_ready().unwrap();
        let image = engine.prepare_image(Path::new(IMAGE)).unwrap();
        let lab = Lab::new(engine.name());
        let (mut run, mut prep_run, mut all) = (Vec::new(), Vec::new(), Vec::new());
        for i in 0..11 {
            let req = lab.request(
                &format!("lat{i}"),
                &["true"],
                Limits::default(),
                NetworkMode::None,
            );
            let t0 = Instant::now();
            let argv = engine.run_command(&req, &image).unwrap();
            let t1 = Instant::now();
            let attacher = lab.parent.as_ref().unwrap().attacher().unwrap();
            let mut command = Command::new(&argv[0]);
            command.args(&argv[1..]).stdin(Stdio::null());
            // SAFETY: attach_self only calls write(2); no allocation after fork.
            unsafe {
                command.pre_exec(move || attacher.attach_self());
            }
            let status = command.status().unwrap();
            let t2 = Instant::now();
            engine.remove(&req).unwrap();
            let t3 = Instant::now();
            assert!(status.success(), "{label}");
            if i > 0 {
                // The first run warms the caches.
                run.push(t2 - t1);
                prep_run.push(t2 - t0);
                all.push(t3 - t0);
            }
        }
        eprintln!(
            "{label:<16} median of 10: run {:>7.1?}  prepare+run {:>7.1?}  prepare+run+remove {:>7.1?}",
            median(run),
            median(prep_run),
            median(all)
        );
        lab.finish();
    }
    for (_, engine) in &engines {
        engine.shutdown().unwrap();
    }
}
