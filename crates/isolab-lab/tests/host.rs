//! The host platform for real, as root: limits applied and read back, telemetry,
//! servers, timeouts, and nothing left behind. Skipped with a reason without root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{CpuQuota, Hierarchy, Limits};
use isolab_lab::platform::{
    Drivers, ExitKind, IsolabConfig, Job, PlatformDef, PlatformError, PlatformKind, Server,
};
use isolab_lab::{Executor, Interrupt, Supervisor, SupervisorConfig};

mod common;
use common::leftovers;

fn platform(base: &str) -> Option<Drivers> {
    platform_with(base, Some(isolab_lab::probe::ProbeConfig::default()))
}

fn platform_with(base: &str, probe: Option<isolab_lab::probe::ProbeConfig>) -> Option<Drivers> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        isolab_skip::skip("the host platform needs root to create cgroups");
        return None;
    }
    let hierarchy = match Hierarchy::detect() {
        Ok(h) => h,
        Err(e) => {
            isolab_skip::skip(format!("no cgroup hierarchy detected: {e}"));
            return None;
        }
    };
    let supervisor = Supervisor::new(SupervisorConfig {
        hierarchy,
        proc_root: "/proc".into(),
        cgroup_base: PathBuf::from(base),
        sample_interval: Duration::from_millis(100),
        probe,
    });
    Some(Drivers::new(supervisor, IsolabConfig::discover()))
}

fn job(name: &str, argv: &[&str], workdir: &Path, limits: Limits) -> Job {
    Job {
        platform: PlatformDef::new(PlatformKind::HOST),
        image: None,
        name: format!("scope/{name}"),
        argv: argv.iter().map(|s| s.to_string()).collect(),
        prepare: None,
        cleanup: None,
        server: None,
        workdir: workdir.to_path_buf(),
        limits,
        timeout: Duration::from_secs(30),
        neighbours: None,
        uses_disk: false,
        stack: None,
    }
}

fn telemetry(e: &isolab_lab::platform::Execution, key: &str) -> f64 {
    e.telemetry
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no {key} in {:?}", e.telemetry))
}

#[test]
fn quota_throttles_and_pinning_binds_and_nothing_is_left() {
    let base = format!("isolab-hosttest-{}", std::process::id());
    let Some(p) = platform(&base) else { return };
    let dir = tempfile::tempdir().unwrap();
    let interrupt = Interrupt::new().unwrap();

    // Two busy threads for 1 s under half a cpu of quota.
    let quota = Limits {
        cpu: Some(CpuQuota {
            quota: Duration::from_millis(50),
            period: Duration::from_millis(100),
        }),
        ..Limits::default()
    };
    let busy = [
        "sh",
        "-c",
        "timeout 1 sh -c 'while :; do :; done' & timeout 1 sh -c 'while :; do :; done'; wait",
    ];
    let e = p
        .execute(&job("quota", &busy, dir.path(), quota.clone()), &interrupt)
        .unwrap();
    assert!(e.exit.success(), "{:?} {}", e.exit, e.stderr);
    assert_eq!(e.limits_applied.cpu, quota.cpu, "limits read back");
    let util = telemetry(&e, "cpu_util_pct");
    assert!(
        (40.0..=60.0).contains(&util),
        "half a cpu of quota gave {util}% of one cpu"
    );
    assert!(telemetry(&e, "nr_throttled") >= 5.0);
    assert!(telemetry(&e, "context_switches") > 0.0);
    assert!(
        !e.series.is_empty() && e.series[0].points.len() >= 5,
        "host sampled at >= 5 Hz: {:?}",
        e.series
    );

    // Pinned to cpu 0: the child sees exactly that affinity.
    let pinned = Limits {
        cpuset: Some("0".parse().unwrap()),
        ..Limits::default()
    };
    let e = p
        .execute(
            &job(
                "pinned",
                &["grep", "Cpus_allowed_list", "/proc/self/status"],
                dir.path(),
                pinned,
            ),
            &interrupt,
        )
        .unwrap();
    assert!(
        e.stdout.trim().ends_with("\t0") || e.stdout.trim().ends_with(" 0"),
        "{}",
        e.stdout
    );
    assert_eq!(
        e.limits_applied.cpuset.map(|c| c.to_string()).as_deref(),
        Some("0")
    );

    // A failing command is reported with its status, not as a platform error.
    let e = p
        .execute(
            &job(
                "fails",
                &["sh", "-c", "exit 3"],
                dir.path(),
                Limits::default(),
            ),
            &interrupt,
        )
        .unwrap();
    assert_eq!(e.exit, ExitKind::Code(3));

    // A command that runs past its timeout is killed, with its children.
    let mut slow = job(
        "slow",
        &["sh", "-c", "sleep 30 & sleep 30"],
        dir.path(),
        Limits::default(),
    );
    slow.timeout = Duration::from_millis(300);
    assert!(matches!(
        p.execute(&slow, &interrupt),
        Err(PlatformError::TimedOut(_))
    ));

    // A missing program says so.
    let err = p
        .execute(
            &job(
                "missing",
                &["no-such-tool-isolab"],
                dir.path(),
                Limits::default(),
            ),
            &interrupt,
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("cannot start `no-such-tool-isolab`"),
        "{err}"
    );

    drop(p);
    assert!(leftovers(&base).is_empty(), "left: {:?}", leftovers(&base));
}

#[test]
fn a_server_is_ready_before_the_command_and_stopped_after() {
    let base = format!("isolab-hosttest-srv-{}", std::process::id());
    let Some(p) = platform(&base) else { return };
    if std::process::Command::new("iperf3")
        .arg("--version")
        .output()
        .is_err()
    {
        isolab_skip::skip("iperf3 is not installed (scripts/setup.sh installs it)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut j = job(
        "iperf",
        &[
            "iperf3",
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "1",
            "-J",
        ],
        dir.path(),
        Limits::default(),
    );
    j.server = Some(Server {
        argv: vec![
            "iperf3".into(),
            "-s".into(),
            "-1".into(),
            "-p".into(),
            port.to_string(),
        ],
        port,
    });
    let e = p.execute(&j, &Interrupt::new().unwrap()).unwrap();
    assert!(e.exit.success(), "{}", e.stderr);
    let v: serde_json::Value = serde_json::from_str(&e.stdout).unwrap();
    assert!(
        v["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    drop(p);
    assert!(leftovers(&base).is_empty());
}

#[test]
fn neighbours_run_beside_the_subject_and_a_latency_breach_aborts_the_run() {
    use isolab_lab::platform::NeighbourJobs;
    let base = format!("isolab-probetest-{}", std::process::id());
    // A threshold no host meets: the probe must abort the run at once.
    let strict = isolab_lab::probe::ProbeConfig {
        interval: Duration::from_millis(10),
        threshold: Duration::from_nanos(1),
        sustained: Duration::ZERO,
    };
    let Some(p) = platform_with(&base, Some(strict)) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let interrupt = Interrupt::new().unwrap();
    let mut j = job("aborted", &["sleep", "20"], dir.path(), Limits::default());
    j.neighbours = Some(NeighbourJobs {
        level: "cpu".into(),
        instances: vec![vec!["sleep".into(), "30".into()]],
        limits: Limits {
            pids_max: Some(8),
            ..Limits::default()
        },
        target_util_pct: None,
        disk_target: None,
        settle: Duration::from_millis(100),
        network_servers: 0,
        loads_pct: Vec::new(),
        reachable_util_pct: None,
        net_target: None,
        net_rate_mbps: None,
    });
    let started = std::time::Instant::now();
    let err = p.execute(&j, &interrupt).unwrap_err();
    assert!(matches!(err, PlatformError::Aborted { .. }), "{err}");
    assert!(err.to_string().contains("keep the host usable"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the run was cut short"
    );
    drop(p);
    assert!(leftovers(&base).is_empty(), "{:?}", leftovers(&base));

    // With the default probe the same neighbour runs beside the subject and its
    // cpu time and the probe's latencies are reported.
    let Some(p) = platform(&base) else { return };
    let mut j = job("beside", &["sleep", "0.3"], dir.path(), Limits::default());
    j.neighbours = Some(NeighbourJobs {
        level: "cpu".into(),
        instances: vec![vec!["sh".into(), "-c".into(), "while :; do :; done".into()]],
        limits: Limits::default(),
        target_util_pct: None,
        disk_target: None,
        settle: Duration::from_millis(100),
        network_servers: 0,
        loads_pct: Vec::new(),
        reachable_util_pct: None,
        net_target: None,
        net_rate_mbps: None,
    });
    let e = p.execute(&j, &interrupt).unwrap();
    assert!(e.exit.success());
    assert!(telemetry(&e, "neighbours_cpu_s") > 0.1, "{:?}", e.telemetry);
    assert_eq!(telemetry(&e, "neighbours"), 1.0);
    assert!(telemetry(&e, "probe_samples") > 5.0, "{:?}", e.telemetry);
    drop(p);
    assert!(leftovers(&base).is_empty(), "{:?}", leftovers(&base));
}
