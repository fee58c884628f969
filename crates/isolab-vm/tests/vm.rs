//! Root integration tests: real QEMU guests (TCG on a host whose KVM cannot boot them).
//!
//! They need root, qemu-system-x86_64, qemu-img, busybox-static, the bench image at
//! /var/lib/isolab/images/bench (or $ISOLAB_BENCH_IMAGE), for `vm+docker` the bench-docker image
//! at /var/lib/isolab/images/bench-docker (or $ISOLAB_BENCH_DOCKER_IMAGE), and, once, access to
//! the Debian mirror for the kernel; each is skipped with a printed reason when something is missing. The kernel
//! and disk caches live in /var/lib/isolab/vm (or $ISOLAB_VM_CACHE).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use isolab_vm::test_guest::{GuestUnavailable, TestGuest};
use isolab_vm::{
    run, Accel, DockerReport, GuestClock, GuestCommand, InnerContainer, InnerDocker, InnerEngine,
    Shutdown, VmConfig, VmError,
};

/// A prepared guest (kernel, disk, accelerator): `isolab_vm::test_guest` does it, once per
/// image.
type Setup = TestGuest;

/// The setup in `cell` (made once), or `None` after a skip of the calling test with the
/// reason it could not be made; a preparation that fails where it should work fails the test.
fn cached_setup(
    cell: &'static OnceLock<Result<Setup, GuestUnavailable>>,
    var: &str,
    default: &str,
    recipe: &str,
) -> Option<&'static Setup> {
    match cell.get_or_init(|| TestGuest::prepare_image(var, default, recipe)) {
        Ok(s) => Some(s),
        Err(GuestUnavailable::Skip(reason)) => {
            isolab_skip::skip(reason);
            None
        }
        Err(GuestUnavailable::Failed(e)) => panic!("{e}"),
    }
}

fn setup() -> Option<&'static Setup> {
    static SETUP: OnceLock<Result<Setup, GuestUnavailable>> = OnceLock::new();
    cached_setup(
        &SETUP,
        "ISOLAB_BENCH_IMAGE",
        "/var/lib/isolab/images/bench",
        "bench",
    )
}

/// The guest of `vm+docker`: a disk of the bench-docker image (the bench image has no dockerd).
fn docker_setup() -> Option<&'static Setup> {
    static SETUP: OnceLock<Result<Setup, GuestUnavailable>> = OnceLock::new();
    cached_setup(
        &SETUP,
        "ISOLAB_BENCH_DOCKER_IMAGE",
        "/var/lib/isolab/images/bench-docker",
        "bench-docker",
    )
}

fn config(s: &Setup, workdir: &Path) -> VmConfig {
    let mut c = VmConfig::new(
        s.kernel().clone(),
        s.disk().clone(),
        s.accel().accel,
        workdir,
        workdir.parent().unwrap().join(format!(
            "run-{}",
            workdir.file_name().unwrap().to_string_lossy()
        )),
    );
    c.vcpus = 1;
    c.memory = isolab_cgroups::Bytes::mib(512);
    c
}

/// No QEMU process mentions `run_dir` and the directory is gone.
fn assert_nothing_left(run_dir: &Path) {
    assert!(!run_dir.exists(), "{} left behind", run_dir.display());
    let needle = run_dir.to_string_lossy().into_owned();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
        let cmdline = String::from_utf8_lossy(&cmdline);
        assert!(
            !cmdline.contains(&needle),
            "process {:?} still runs: {cmdline}",
            entry.file_name()
        );
    }
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains(&needle));
}

/// isolab-runtime beside this test binary's directory (target/<profile>/deps/..), wherever
/// the target directory is; `None` after a skip when it is not built.
fn runtime() -> Option<std::path::PathBuf> {
    let exe = std::env::current_exe().unwrap();
    let runtime = exe.parent()?.parent()?.join("isolab-runtime");
    if !runtime.is_file() {
        isolab_skip::skip(format!(
            "{} missing (cargo build -p isolab-runtime)",
            runtime.display()
        ));
        return None;
    }
    Some(runtime)
}

fn report(name: &str, r: &isolab_vm::GuestRun) {
    eprintln!(
        "{name}: status {} wall {:?} ({:?}) boot {:?} guest uptime {:?} total {:?} shutdown {:?}",
        r.exit_status, r.wall, r.clock, r.boot, r.guest_uptime, r.total, r.shutdown
    );
}

#[test]
fn sysbench_runs_in_a_tcg_guest() {
    let Some(s) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let c = config(s, &w);
    let cmd = GuestCommand::new(
        ["sysbench", "cpu", "--cpu-max-prime=2000", "--time=2", "run"],
        Duration::from_secs(120),
    );
    let r = run(&c, &cmd, None, &|| false).unwrap();
    report("sysbench", &r);
    assert_eq!(r.exit_status, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("events per second:"), "{}", r.stdout);
    assert_eq!(r.clock, GuestClock::Monotonic);
    assert!(
        r.wall >= Duration::from_secs(2) && r.wall < Duration::from_secs(60),
        "{:?}",
        r.wall
    );
    assert_eq!(r.shutdown, Shutdown::PoweredOff);
    assert_eq!(r.accel, s.accel().accel);
    assert_nothing_left(&c.run_dir);
}

#[test]
fn failing_command_returns_its_status_output_env_and_files() {
    let Some(s) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    std::fs::write(w.join("input"), "from the host\n").unwrap();
    let c = config(s, &w);
    let mut cmd = GuestCommand::new(
        [
            "sh",
            "-c",
            "cat input; echo \"X=$X pwd=$(pwd)\"; echo it\\'s an error >&2; \
             cat /proc/self/cgroup > cgroup.txt; cat /sys/fs/cgroup/cgroup.subtree_control >> cgroup.txt; \
             exit 3",
        ],
        Duration::from_secs(60),
    );
    cmd.env = vec![("X".into(), "a b 'c'".into())];
    let r = run(&c, &cmd, None, &|| false).unwrap();
    report("failing", &r);
    assert_eq!(r.exit_status, 3);
    assert_eq!(
        r.stdout,
        format!("from the host\nX=a b 'c' pwd={}\n", w.display())
    );
    assert_eq!(r.stderr, "it's an error\n");
    let cg = std::fs::read_to_string(w.join("cgroup.txt")).unwrap();
    assert!(cg.starts_with("0::/\n"), "pure cgroup2 in the guest: {cg}");
    for c in ["cpuset", "cpu", "io", "memory", "pids"] {
        assert!(cg.contains(c), "{c} enabled: {cg}");
    }
    assert_nothing_left(&c.run_dir);

    // a command that does not exist: 127 from the guest's env
    let run_dir2 = c.run_dir.with_extension("2");
    let c2 = VmConfig {
        run_dir: run_dir2.clone(),
        ..c.clone()
    };
    let r = run(
        &c2,
        &GuestCommand::new(["isolab-no-such-program"], Duration::from_secs(60)),
        None,
        &|| false,
    )
    .unwrap();
    assert_eq!(r.exit_status, 127, "{}", r.stderr);
    assert_nothing_left(&run_dir2);
}

#[test]
fn pinned_vcpu_thread_runs_on_host_cpu_1() {
    let Some(s) = setup() else { return };
    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        isolab_skip::skip("pinning a vcpu to host cpu 1 needs 2 host cpus");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let mut c = config(s, &w);
    c.pin = Some(vec![1]);
    let run_dir = c.run_dir.clone();
    // Watch the vCPU thread ("CPU 0/TCG" or "CPU 0/KVM") of the QEMU using our run dir.
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = done.clone();
        let needle = run_dir.to_string_lossy().into_owned();
        std::thread::spawn(move || -> Option<Vec<u32>> {
            while !done.load(Ordering::Relaxed) {
                for p in std::fs::read_dir("/proc").unwrap().flatten() {
                    let cmdline = std::fs::read(p.path().join("cmdline")).unwrap_or_default();
                    if !String::from_utf8_lossy(&cmdline).contains(&needle) {
                        continue;
                    }
                    let Ok(tasks) = std::fs::read_dir(p.path().join("task")) else {
                        continue;
                    };
                    for t in tasks.flatten() {
                        let comm =
                            std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                        if comm.starts_with("CPU 0/") {
                            let tid: i32 = t.file_name().to_string_lossy().parse().unwrap();
                            // wait until the guest is well into its run
                            std::thread::sleep(Duration::from_secs(2));
                            if let Ok(a) = isolab_vm::get_affinity(tid) {
                                return Some(a);
                            }
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            None
        })
    };
    let r = run(
        &c,
        &GuestCommand::new(["sleep", "3"], Duration::from_secs(60)),
        None,
        &|| false,
    );
    done.store(true, Ordering::Relaxed);
    let r = r.unwrap();
    report("pinned", &r);
    assert_eq!(r.exit_status, 0);
    assert_eq!(r.pinned.len(), 1);
    assert_eq!((r.pinned[0].vcpu, r.pinned[0].host_cpu), (0, 1));
    assert_eq!(
        watcher.join().unwrap(),
        Some(vec![1]),
        "vCPU thread affinity while running"
    );
    assert_nothing_left(&run_dir);
}

#[test]
fn vm_plus_isolab_runs_the_runtime_in_the_guest() {
    let Some(s) = setup() else { return };
    let Some(runtime) = runtime() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let c = config(s, &w);
    let report_file = w.join(".isolab-runtime.json");
    let mut cmd = GuestCommand::new(
        [
            "sh",
            "-c",
            "cat /proc/self/cgroup; pwd; echo hi > from-container",
        ],
        Duration::from_secs(120),
    );
    cmd.inner = Some(InnerEngine::Isolab(InnerContainer {
        runtime,
        flags: vec![
            "--cpus".into(),
            "0.5".into(),
            "--report".into(),
            report_file.to_string_lossy().into_owned(),
        ],
        image: None,
    }));
    let r = run(&c, &cmd, None, &|| false).unwrap();
    report("vm+isolab", &r);
    assert_eq!(
        r.exit_status, 0,
        "stdout:\n{}\nstderr:\n{}",
        r.stdout, r.stderr
    );
    assert!(r.stdout.contains("0::/"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&w.to_string_lossy().into_owned()),
        "{}",
        r.stdout
    );
    assert_eq!(
        std::fs::read_to_string(w.join("from-container")).unwrap(),
        "hi\n"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report_file).expect("runtime report")).unwrap();
    eprintln!("runtime report: {report}");
    assert_eq!(report["status"], 0, "{report}");
    assert!(
        report["cgroup"].as_str().unwrap().starts_with("isolab/"),
        "{report}"
    );
    assert!(
        !report["limits"]["cpu"].is_null(),
        "--cpus 0.5 applied: {report}"
    );
    assert_nothing_left(&c.run_dir);
}

/// `vm+docker`: the guest image's dockerd runs sysbench in a container on the guest's root with a
/// cpu quota, memory and pids limits, read back from the container's cgroup in the guest.
#[test]
fn vm_plus_docker_runs_the_command_under_dockerd_in_the_guest() {
    let Some(s) = docker_setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let mut c = config(s, &w);
    c.memory = isolab_cgroups::Bytes::mib(1024);
    let report_dir = w.join(".isolab-docker");
    let mut cmd = GuestCommand::new(
        [
            "sh",
            "-c",
            "cat /proc/self/cgroup; pwd; echo hi > from-container; \
             sysbench cpu --threads=1 --time=2 run",
        ],
        Duration::from_secs(300),
    );
    cmd.inner = Some(InnerEngine::Docker(InnerDocker {
        flags: [
            "--cpu-period",
            "100000",
            "--cpu-quota",
            "50000",
            "--memory",
            "268435456",
            "--pids-limit",
            "64",
        ]
        .map(String::from)
        .to_vec(),
        report: report_dir.clone(),
    }));
    let r = run(&c, &cmd, None, &|| false).unwrap();
    report("vm+docker", &r);
    eprintln!("dockerd and image ready in {:?} (guest time)", r.setup);
    assert_eq!(
        r.exit_status, 0,
        "stdout:\n{}\nstderr:\n{}",
        r.stdout, r.stderr
    );
    assert!(r.setup.is_some_and(|d| d < r.boot), "{:?}", r.setup);
    assert!(r.stdout.contains("0::/"), "cgroup namespace: {}", r.stdout);
    assert!(r.stdout.contains("events per second:"), "{}", r.stdout);
    assert_eq!(
        std::fs::read_to_string(w.join("from-container")).unwrap(),
        "hi\n"
    );
    let report = DockerReport::read(&report_dir).unwrap();
    eprintln!("limits read back: {:?}", report.limits);
    eprintln!("counters: {:?}", report.stats);
    let cpu = report.limits.cpu.expect("cpu quota read back");
    assert_eq!(
        (cpu.quota, cpu.period),
        (Duration::from_millis(50), Duration::from_millis(100))
    );
    assert_eq!(
        report.limits.memory_max,
        Some(isolab_cgroups::Bytes::mib(256))
    );
    assert_eq!(report.limits.pids_max, Some(64));
    let stats = report.stats.expect("counters after the command");
    assert!(stats.nr_throttled.unwrap_or(0) > 0, "{stats:?}");
    assert_nothing_left(&c.run_dir);
}

#[test]
fn scratch_disk_holds_the_workdir_and_is_copied_back() {
    let Some(s) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    std::fs::write(w.join("input"), "in\n").unwrap();
    let mut c = config(s, &w);
    c.scratch_disk = Some(isolab_cgroups::Bytes::mib(256));
    let cmd = GuestCommand::new(
        [
            "sh",
            "-c",
            "cat input; stat -f -c %T .; grep \" $PWD \" /proc/mounts; echo out > output",
        ],
        Duration::from_secs(60),
    );
    let r = run(&c, &cmd, None, &|| false).unwrap();
    report("scratch", &r);
    assert_eq!(r.exit_status, 0, "{}", r.stderr);
    assert!(r.stdout.starts_with("in\n"), "{}", r.stdout);
    assert!(r.stdout.contains("/dev/vdb"), "{}", r.stdout);
    assert!(r.stdout.contains(" ext4 "), "{}", r.stdout);
    assert_eq!(std::fs::read_to_string(w.join("output")).unwrap(), "out\n");
    assert_nothing_left(&c.run_dir);
}

#[test]
fn boot_timeout_reports_the_console_and_cleans_up() {
    let Some(s) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let mut c = config(s, &w);
    c.boot_timeout = Duration::from_millis(1500);
    let e = run(
        &c,
        &GuestCommand::new(["true"], Duration::from_secs(60)),
        None,
        &|| false,
    )
    .unwrap_err();
    assert!(matches!(e, VmError::BootTimeout { .. }), "{e}");
    assert!(e.to_string().contains("did not come up within 1.5s"), "{e}");
    assert_nothing_left(&c.run_dir);
}

#[test]
fn stop_kills_the_vm_and_leaves_nothing() {
    let Some(s) = setup() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let c = config(s, &w);
    let start = Instant::now();
    let stop = move || start.elapsed() > Duration::from_secs(3);
    let e = run(
        &c,
        &GuestCommand::new(["sleep", "600"], Duration::from_secs(600)),
        None,
        &stop,
    )
    .unwrap_err();
    assert!(matches!(e, VmError::Interrupted), "{e}");
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_nothing_left(&c.run_dir);
    // the accelerator under test is labelled
    assert!(matches!(s.accel().accel, Accel::Kvm | Accel::Tcg));
}

/// A container host (seed 003's VM running the stack's containers): two components started
/// side by side under isolab-runtime in one guest, listed by the runtime there, the port
/// one serves seen listening in the guest (and one nobody serves not), one stopped while
/// the other runs, then the guest shut down, leaving nothing.
#[test]
fn a_container_host_runs_two_components_side_by_side() {
    let Some(s) = setup() else { return };
    let Some(runtime) = runtime() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let w = tmp.path().join("w");
    std::fs::create_dir(&w).unwrap();
    let mut c = config(s, &w);
    c.vcpus = 2;
    let engine = |id: &str| {
        InnerEngine::Isolab(InnerContainer {
            runtime: runtime.clone(),
            // On the guest's network, as isolab runs a stack's components.
            flags: ["--id", id, "--pids", "64", "--network", "host"]
                .map(String::from)
                .to_vec(),
            image: None,
        })
    };
    let mut host = isolab_vm::start_container_host(&c, &engine("unused"), None).unwrap();
    for (name, serve) in [("web", "sleep 600"), ("db", "iperf3 -s -p 5399")] {
        let mut cmd = GuestCommand::new(
            [
                "sh",
                "-c",
                &format!("echo {name} > {name}-was-here; echo {name} up; exec {serve}"),
            ],
            Duration::from_secs(600),
        );
        cmd.inner = Some(engine(&format!("stack-{name}")));
        host.run(name, &cmd).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while !(w.join("web-was-here").exists() && w.join("db-was-here").exists()) {
        assert!(
            Instant::now() < deadline,
            "components did not start: web: {} db: {}",
            host.output_tail("web", 10),
            host.output_tail("db", 10)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(host.is_running("web") && host.is_running("db"));
    while !host.listening(5399, Duration::from_secs(60)).unwrap() {
        assert!(
            Instant::now() < deadline,
            "iperf3 never listened: {}",
            host.output_tail("db", 10)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!host.listening(5398, Duration::from_secs(60)).unwrap());
    let list = host.containers(Duration::from_secs(60)).unwrap();
    eprintln!("containers in the guest:\n{list}");
    assert!(
        list.contains("stack-web") && list.contains("stack-db"),
        "{list}"
    );
    // Starting a name twice is refused; stopping one leaves the other running.
    assert!(host
        .run("web", &GuestCommand::new(["true"], Duration::from_secs(1)))
        .is_err());
    let status = host.stop("web", Duration::from_secs(60)).unwrap();
    assert!(
        status.is_some(),
        "web did not stop: {}",
        host.output_tail("web", 10)
    );
    assert!(!host.is_running("web") && host.is_running("db"));
    let run_dir = c.run_dir.clone();
    let shutdown = host.shutdown().unwrap();
    eprintln!("container host shutdown: {shutdown:?}");
    assert_nothing_left(&run_dir);
}
