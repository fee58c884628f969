//! Root integration tests of the Docker and Podman drivers on this host: real
//! containers of the bench image (`/var/lib/isolab/images/bench`) with limits, their
//! cgroups found below a parent the test creates and read back from the kernel,
//! SIGTERM, the bridge network, and nothing left afterwards (containers, cgroups,
//! mounts, and for the daemon isolab starts: iptables, `ip_forward`, `docker0`).
//!
//! Each test is skipped (`isolab_skip`) with its reason when not run as root, when the bench
//! image is missing or when the engine is not installed. The tests share the host's
//! netfilter tables and cgroup mounts, so they run one at a time.

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isolab_cgroups::{
    Bytes, Cgroup, Controller, CpuQuota, CpuWeight, Hierarchy, IdSet, Limits, Version,
};
use isolab_engines::docker::Docker;
use isolab_engines::host_net::normalized_rules;
use isolab_engines::podman::{OciRuntime, Podman};
use isolab_engines::tool::{SystemTools, Tools};
use isolab_engines::{find_container_cgroup, Engine, NetworkMode, PreparedImage, RunRequest};

const BENCH: &str = "/var/lib/isolab/images/bench";

static SERIAL: Mutex<()> = Mutex::new(());

fn skip_reason(programs: &[&str]) -> Option<String> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some(format!("the {} test needs root", programs.join(" and ")));
    }
    if !Path::new(BENCH).join(".isolab-image.json").is_file() {
        return Some(format!("no bench image at {BENCH} (make image)"));
    }
    for p in programs {
        if SystemTools.which(p).is_none() {
            return Some(format!(
                "{p} is not installed (scripts/setup.sh installs it)"
            ));
        }
    }
    None
}

/// The host state that must be equal before and after an engine's test.
#[derive(Debug, PartialEq, Eq)]
struct HostState {
    iptables: String,
    ip6tables: String,
    ip_forward: String,
    links: BTreeSet<String>,
    unified_controllers: String,
}

fn host_state() -> HostState {
    let save = |p: &str| {
        Command::new(p)
            .output()
            .map(|o| normalized_rules(&String::from_utf8_lossy(&o.stdout)))
            .unwrap_or_default()
    };
    HostState {
        iptables: save("iptables-save"),
        ip6tables: save("ip6tables-save"),
        ip_forward: std::fs::read_to_string("/proc/sys/net/ipv4/ip_forward").unwrap_or_default(),
        links: std::fs::read_dir("/sys/class/net")
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default(),
        unified_controllers: std::fs::read_to_string("/sys/fs/cgroup/unified/cgroup.controllers")
            .unwrap_or_default(),
    }
}

fn mount_points() -> BTreeSet<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4).map(str::to_owned))
        .collect()
}

/// Mount points that appeared since `before` and belong to an engine or a container.
fn new_engine_mounts(before: &BTreeSet<String>, id: &str) -> Vec<String> {
    let roots = [
        "/var/lib/isolab/docker",
        "/run/isolab/dockerd",
        "/var/lib/isolab/podman",
        "/run/isolab/podman",
        "/run/netns",
        "/var/run/netns",
        "/var/lib/docker",
        "/var/lib/containers",
    ];
    mount_points()
        .difference(before)
        // dockerd's bind mount of the host's network namespace, made on the first
        // host-network run, is the daemon's: it goes at shutdown (checked there).
        .filter(|m| !m.ends_with("/netns/default"))
        .filter(|m| m.contains(id) || roots.iter().any(|r| m.starts_with(r)))
        .cloned()
        .collect()
}

/// Asserts that `rel` exists in no cgroup hierarchy at all (including those the lab
/// does not manage, such as `devices` and `name=systemd`).
fn assert_no_cgroup_anywhere(rel: &Path) {
    for e in std::fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let p = e.path().join(rel);
        assert!(!p.exists(), "{} was left behind", p.display());
    }
}

/// On a failed test: removes the test's containers and cgroups and undoes the
/// engine's host changes, so that the next run starts clean.
struct Cleanup<'a> {
    engine: &'a dyn Engine,
    base: String,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let _ = self.engine.gc(&self.base);
        for e in std::fs::read_dir("/sys/fs/cgroup")
            .into_iter()
            .flatten()
            .flatten()
        {
            let root = e.path().join(&self.base);
            let mut dirs: Vec<PathBuf> = Vec::new();
            let mut stack = vec![root.clone()];
            while let Some(d) = stack.pop() {
                for c in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                    if c.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(c.path());
                    }
                }
                dirs.push(d);
            }
            for d in dirs.iter().rev() {
                let _ = std::fs::remove_dir(d);
            }
        }
        let _ = self.engine.shutdown();
    }
}

fn process_cmdlines_containing(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        if let Ok(c) = std::fs::read(e.path().join("cmdline")) {
            let c = String::from_utf8_lossy(&c).replace('\0', " ");
            if c.contains(needle) {
                found.push(c);
            }
        }
    }
    found
}

struct Outcome {
    status: i32,
    stdout: String,
    limits: Option<Limits>,
    cgroup: Option<PathBuf>,
}

/// Runs the engine's command inside `parent` as the lab does, finds the container's
/// cgroup while it runs and reads its limits until they equal `want` (runc moves its
/// init process into the cgroup before it writes the limits, so the first reading
/// may come too early); `term_after` sends SIGTERM to the CLI once the container's
/// cgroup exists.
fn run_in(
    h: &Hierarchy,
    parent: &Cgroup,
    argv: &[String],
    want: &Limits,
    term_after: Option<Duration>,
) -> Outcome {
    let attacher = parent.attacher().unwrap();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: attach_self only calls write(2) on pre-opened descriptors and
    // allocates nothing, so it is safe between fork and exec.
    unsafe { cmd.pre_exec(move || attacher.attach_self()) };
    let mut child = cmd.spawn().unwrap();
    let pid = child.id();
    let done = Arc::new(AtomicBool::new(false));
    let cpu_mount = h.mount(Controller::Cpu).unwrap().to_path_buf();
    let rel = parent.rel().to_path_buf();
    let (h2, done2, want) = (h.clone(), done.clone(), want.clone());
    let poller = std::thread::spawn(move || {
        let start = Instant::now();
        let mut last = (None, None);
        while !done2.load(Ordering::SeqCst) && start.elapsed() < Duration::from_secs(60) {
            if let Some(found) = find_container_cgroup(&cpu_mount, &rel) {
                let rel_found = found.strip_prefix("/").unwrap_or(&found).to_path_buf();
                if let Ok(l) = Cgroup::open(&h2, &rel_found).and_then(|c| c.read_limits()) {
                    let equal = want.differences(&l).is_empty();
                    last = (Some(l), Some(found));
                    if equal {
                        if let Some(t) = term_after {
                            std::thread::sleep(t);
                            // SAFETY: kill has no memory effects; pid is our child.
                            unsafe { libc::kill(pid as i32, libc::SIGTERM) };
                        }
                        return last;
                    }
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        last
    });
    let mut stdout = String::new();
    let mut stderr = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    done.store(true, Ordering::SeqCst);
    let (limits, cgroup) = poller.join().unwrap();
    use std::os::unix::process::ExitStatusExt;
    let status = status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
    if status != 0 && term_after.is_none() {
        eprintln!(
            "command failed ({status}): {}\nstderr: {stderr}",
            argv.join(" ")
        );
    }
    Outcome {
        status,
        stdout,
        limits,
        cgroup,
    }
}

/// Removes `request`'s container, then its parent cgroup, and checks that no cgroup
/// is left below the parent or anywhere under its path.
fn remove_without_leftovers(
    engine: &dyn Engine,
    request: &RunRequest,
    h: &Hierarchy,
    parent: Cgroup,
) {
    engine.remove(request).unwrap();
    let rel = parent.rel().to_path_buf();
    assert_eq!(
        isolab_cgroups::list_below(h, &rel).unwrap(),
        Vec::<PathBuf>::new()
    );
    parent.remove().unwrap();
    assert_no_cgroup_anywhere(&rel);
}

/// Runs every case of the file on `engine`: two limited sysbench runs, SIGTERM and
/// (when `bridge`) the bridge network.
fn exercise(engine: &dyn Engine, tag: &str, bridge: bool) {
    let h = Hierarchy::detect().unwrap();
    let pid = std::process::id();
    let base = format!("isolab-test-{pid}");
    let _cleanup = Cleanup {
        engine,
        base: base.clone(),
    };
    engine.ensure_ready().unwrap();
    let version = engine.version().unwrap();
    eprintln!("{tag}: {version}");
    let t = Instant::now();
    let image: PreparedImage = engine.prepare_image(Path::new(BENCH)).unwrap();
    eprintln!(
        "{tag}: image {} ({}) in {:?}",
        image.reference,
        image.digest,
        t.elapsed()
    );
    assert!(image.digest.starts_with("sha256:"), "{image:?}");
    // The second preparation is cheap.
    let t = Instant::now();
    assert_eq!(engine.prepare_image(Path::new(BENCH)).unwrap(), image);
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let workdir = tempfile::tempdir().unwrap();
    let sysbench: Vec<String> = "sysbench cpu --cpu-max-prime=2000 --time=1 run"
        .split(' ')
        .map(str::to_owned)
        .collect();
    let cases = [
        (
            "quota",
            Limits {
                cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
                ..Limits::default()
            },
        ),
        (
            "pinned",
            Limits {
                cpuset: Some("1".parse::<IdSet>().unwrap()),
                memory_max: Some(Bytes::mib(256)),
                pids_max: Some(128),
                ..Limits::default()
            },
        ),
    ];
    for (case, limits) in cases {
        let rel = PathBuf::from(format!("{base}/{tag}-{case}"));
        let parent = Cgroup::create(&h, &rel).unwrap();
        let request = RunRequest {
            id: format!("isolab-test-{pid}-{tag}-{case}").parse().unwrap(),
            argv: sysbench.clone(),
            workdir: workdir.path().to_path_buf(),
            network: NetworkMode::None,
            limits: limits.clone(),
            cgroup_parent: rel.clone(),
            env: vec!["ISOLAB_TEST=1".into()],
        };
        let mounts = mount_points();
        let argv = engine.run_command(&request, &image).unwrap();
        let out = run_in(&h, &parent, &argv, &limits, None);
        assert_eq!(out.status, 0, "{tag} {case}: {}", out.stdout);
        assert!(
            out.stdout.contains("events per second"),
            "{tag} {case}: sysbench's output did not come through: {}",
            out.stdout
        );
        let read = out
            .limits
            .unwrap_or_else(|| panic!("{tag} {case}: no container cgroup below {rel:?}"));
        eprintln!("{tag} {case}: cgroup {:?}", out.cgroup);
        assert_eq!(
            limits.differences(&read),
            Vec::<String>::new(),
            "{tag} {case}"
        );
        engine.remove(&request).unwrap();
        engine.remove(&request).unwrap();
        assert_eq!(
            engine.gc(request.id.as_str()).unwrap(),
            Vec::<String>::new()
        );
        assert_eq!(
            isolab_cgroups::list_below(&h, &rel).unwrap(),
            Vec::<PathBuf>::new(),
            "{tag} {case}: cgroups left below the parent"
        );
        assert_eq!(
            new_engine_mounts(&mounts, request.id.as_str()),
            Vec::<String>::new()
        );
        parent.remove().unwrap();
        assert_no_cgroup_anywhere(&rel);
    }

    // SIGTERM to the CLI stops the container.
    let rel = PathBuf::from(format!("{base}/{tag}-term"));
    let parent = Cgroup::create(&h, &rel).unwrap();
    let request = RunRequest {
        id: format!("isolab-test-{pid}-{tag}-term").parse().unwrap(),
        argv: vec!["sleep".into(), "30".into()],
        workdir: workdir.path().to_path_buf(),
        network: NetworkMode::None,
        limits: Limits::default(),
        cgroup_parent: rel.clone(),
        env: Vec::new(),
    };
    let t = Instant::now();
    let out = run_in(
        &h,
        &parent,
        &engine.run_command(&request, &image).unwrap(),
        &request.limits,
        Some(Duration::from_millis(200)),
    );
    assert!(out.cgroup.is_some(), "{tag}: sleep never started");
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "{tag}: SIGTERM did not stop the container ({:?})",
        t.elapsed()
    );
    assert_ne!(out.status, 0);
    remove_without_leftovers(engine, &request, &h, parent);

    // The CLI SIGKILLed (as after a crash of the lab): the container keeps running
    // until gc finds it by prefix; remove is then idempotent.
    let rel = PathBuf::from(format!("{base}/{tag}-kill"));
    let parent = Cgroup::create(&h, &rel).unwrap();
    let request = RunRequest {
        id: format!("isolab-test-{pid}-{tag}-kill").parse().unwrap(),
        argv: vec!["sleep".into(), "30".into()],
        workdir: workdir.path().to_path_buf(),
        network: NetworkMode::None,
        limits: Limits::default(),
        cgroup_parent: rel.clone(),
        env: Vec::new(),
    };
    let argv = engine.run_command(&request, &image).unwrap();
    let attacher = parent.attacher().unwrap();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: attach_self only calls write(2); see run_in.
    unsafe { cmd.pre_exec(move || attacher.attach_self()) };
    let mut cli = cmd.spawn().unwrap();
    let cpu_mount = h.mount(Controller::Cpu).unwrap().to_path_buf();
    let start = Instant::now();
    while find_container_cgroup(&cpu_mount, &rel).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{tag}: sleep never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    cli.kill().unwrap();
    cli.wait().unwrap();
    // Docker's daemon always knows the container; Podman forgets one whose `run`
    // was killed while the runtime created it (then `remove` cleans up).
    let removed = engine.gc(&format!("isolab-test-{pid}-{tag}-")).unwrap();
    assert!(removed.len() <= 1, "{tag}: gc found {removed:?}");
    if tag == "docker" {
        assert_eq!(removed, vec![format!("docker container {}", request.id)]);
    }
    engine.remove(&request).unwrap();
    assert_eq!(
        process_cmdlines_containing(request.id.as_str()),
        Vec::<String>::new()
    );
    let start = Instant::now();
    while !isolab_cgroups::list_below(&h, &rel).unwrap().is_empty() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{tag}: container cgroup left"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    parent.remove().unwrap();
    assert_no_cgroup_anywhere(&rel);

    // The host network (the container sees the host's interfaces) and, when
    // supported, the bridge (its own eth0, no veth left afterwards).
    let networks: &[NetworkMode] = if bridge {
        &[NetworkMode::Host, NetworkMode::Bridge]
    } else {
        &[NetworkMode::Host]
    };
    for &network in networks {
        let name = format!("{network:?}").to_lowercase();
        let rel = PathBuf::from(format!("{base}/{tag}-{name}"));
        let parent = Cgroup::create(&h, &rel).unwrap();
        let request = RunRequest {
            id: format!("isolab-test-{pid}-{tag}-{name}").parse().unwrap(),
            argv: vec!["cat".into(), "/proc/net/dev".into()],
            workdir: workdir.path().to_path_buf(),
            network,
            limits: Limits::default(),
            cgroup_parent: rel.clone(),
            env: Vec::new(),
        };
        let mounts = mount_points();
        let links: BTreeSet<String> = host_state().links;
        let out = run_in(
            &h,
            &parent,
            &engine.run_command(&request, &image).unwrap(),
            &request.limits,
            None,
        );
        assert_eq!(out.status, 0, "{tag}: {name} run failed");
        let seen: BTreeSet<String> = out
            .stdout
            .lines()
            .filter_map(|l| l.split_once(':').map(|(n, _)| n.trim().to_owned()))
            .collect();
        if network == NetworkMode::Host {
            assert!(links.is_subset(&seen), "{tag}: host network saw {seen:?}");
        } else {
            assert!(seen.contains("eth0") && seen.contains("lo"), "{seen:?}");
            assert!(!seen.iter().any(|l| l.starts_with("ifb")), "{seen:?}");
            let gw = engine.host_address(NetworkMode::Bridge);
            eprintln!("{tag}: bridge gateway {gw:?}");
            assert!(gw.is_some_and(|g| g.parse::<std::net::Ipv4Addr>().is_ok()));
        }
        engine.remove(&request).unwrap();
        assert_eq!(
            new_engine_mounts(&mounts, request.id.as_str()),
            Vec::<String>::new()
        );
        // Only the engine's bridge may have appeared, no veth.
        let now = host_state().links;
        let added: Vec<&String> = now.difference(&links).collect();
        assert!(
            added
                .iter()
                .all(|l| *l == "docker0" || l.contains("podman")),
            "{tag}: interfaces left: {added:?}"
        );
        parent.remove().unwrap();
        assert_no_cgroup_anywhere(&rel);
    }
    assert_eq!(
        engine.host_address(NetworkMode::Host),
        Some("127.0.0.1".into())
    );
    assert_eq!(engine.host_address(NetworkMode::None), None);
    assert_no_cgroup_anywhere(Path::new(&base));
}

#[test]
fn docker_runs_limited_containers_and_restores_the_host() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(why) = skip_reason(&["dockerd", "iptables-save"]) {
        isolab_skip::skip(why);
        return;
    }
    if Path::new(isolab_engines::docker::SYSTEM_SOCKET).exists() {
        eprintln!("note: a host dockerd may be running; the test uses it and restores nothing");
    }
    let before = host_state();
    let docker = Docker::new();
    let stale_pid = docker.config().pidfile();
    // A stale pidfile and socket from a daemon that died are cleared.
    std::fs::create_dir_all(&docker.config().run_dir).unwrap();
    std::fs::write(&stale_pid, "999999\n").unwrap();
    std::fs::write(docker.config().socket(), "").unwrap();
    exercise(&docker, "docker", true);
    let started = docker.started_daemon() == Some(true);
    let report = docker.shutdown_report().unwrap();
    eprintln!("docker shutdown: {report:?}");
    if started {
        assert!(
            report.iter().any(|r| r.starts_with("stopped dockerd")),
            "{report:?}"
        );
        let after = host_state();
        assert_eq!(before, after, "the host differs after dockerd's shutdown");
        let run_dir = docker.config().run_dir.display().to_string();
        assert_eq!(process_cmdlines_containing(&run_dir), Vec::<String>::new());
        assert!(!docker.config().pidfile().exists() && !docker.config().socket().exists());
        let ours = [
            docker.config().run_dir.display().to_string(),
            docker.config().data_root.display().to_string(),
        ];
        let left: Vec<String> = mount_points()
            .into_iter()
            .filter(|m| ours.iter().any(|o| m.starts_with(o.as_str())))
            .collect();
        assert_eq!(left, Vec::<String>::new(), "mounts left by dockerd");
    }
    // Idempotent.
    docker.shutdown().unwrap();
}

/// `argv` (an engine's `docker run …` command) with `flags` right after `run`.
fn with_run_flags(mut argv: Vec<String>, flags: &[&str]) -> Vec<String> {
    let at = argv
        .iter()
        .position(|a| a == "run")
        .expect("a `run` command")
        + 1;
    argv.splice(at..at, flags.iter().map(|f| f.to_string()));
    argv
}

/// Docker with isolab-runtime (`docker run --runtime isolab`): `--cpu-shares 512
/// --memory-reservation 64m` reach the container's cgroup (they used to be dropped
/// without a word), read back from the host while it runs and by the container from
/// its own /sys/fs/cgroup; a limit the runtime does not apply (`--memory-swappiness`)
/// makes `docker run` fail with the runtime's error instead of running without it.
/// The files are those of the host's cgroup version: v1 `cpu.shares` 512 and
/// `memory.soft_limit_in_bytes`, v2 `cpu.weight` 59 and `memory.low`.
#[test]
fn docker_with_isolab_runtime_applies_cpu_shares_and_memory_reservation() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(why) = skip_reason(&["dockerd", "iptables-save"]) {
        isolab_skip::skip(format!("docker with isolab-runtime: {why}"));
        return;
    }
    let runtime = isolab_runtime::config::locate_program();
    if !runtime.is_file() {
        isolab_skip::skip(format!(
            "isolab-runtime is not built ({} missing): cargo build -p isolab-runtime, or set \
             ISOLAB_RUNTIME",
            runtime.display()
        ));
        return;
    }
    if Path::new(isolab_engines::docker::SYSTEM_SOCKET).exists() {
        eprintln!("note: a host dockerd may be running; it must know the `isolab` runtime");
    }
    let docker = Docker::new().with_isolab_runtime();
    let h = Hierarchy::detect().unwrap();
    let v2 = h.version() == Version::V2;
    let pid = std::process::id();
    let base = format!("isolab-test-{pid}");
    let _cleanup = Cleanup {
        engine: &docker,
        base: base.clone(),
    };
    docker.ensure_ready().unwrap();
    eprintln!(
        "docker+isolab: {}, runtime {}",
        docker.version().unwrap(),
        runtime.display()
    );
    let image = docker.prepare_image(Path::new(BENCH)).unwrap();
    let workdir = tempfile::tempdir().unwrap();
    let (shares_file, shares) = if v2 {
        ("/sys/fs/cgroup/cpu.weight", "59")
    } else {
        ("/sys/fs/cgroup/cpu/cpu.shares", "512")
    };
    let low_file = if v2 {
        "/sys/fs/cgroup/memory.low"
    } else {
        "/sys/fs/cgroup/memory/memory.soft_limit_in_bytes"
    };
    let request = |case: &str, rel: &Path| RunRequest {
        id: format!("isolab-test-{pid}-shares-{case}").parse().unwrap(),
        argv: vec![
            "sh".into(),
            "-c".into(),
            format!("cat {shares_file} {low_file}; sleep 1"),
        ],
        workdir: workdir.path().to_path_buf(),
        network: NetworkMode::None,
        limits: Limits::default(),
        cgroup_parent: rel.to_path_buf(),
        env: Vec::new(),
    };

    // Applied: read back from the container's cgroup by the host and by the container.
    let rel = PathBuf::from(format!("{base}/docker-isolab-shares"));
    let parent = Cgroup::create(&h, &rel).unwrap();
    let run = request("applied", &rel);
    let flags = ["--cpu-shares", "512", "--memory-reservation", "64m"];
    let argv = with_run_flags(docker.run_command(&run, &image).unwrap(), &flags);
    eprintln!("docker+isolab: {}", argv.join(" "));
    let want = Limits {
        cpu_weight: Some(CpuWeight::Shares(512)),
        memory_reservation: Some(Bytes::mib(64)),
        ..Limits::default()
    };
    let out = run_in(&h, &parent, &argv, &want, None);
    assert_eq!(out.status, 0, "docker+isolab: {}", out.stdout);
    let read = out
        .limits
        .unwrap_or_else(|| panic!("docker+isolab: no container cgroup below {rel:?}"));
    eprintln!(
        "docker+isolab: cgroup {:?} read back from the host: cpu weight {:?}, memory \
         reservation {:?}; inside: {shares_file} {low_file} = {:?}",
        out.cgroup, read.cpu_weight, read.memory_reservation, out.stdout
    );
    assert_eq!(want.differences(&read), Vec::<String>::new());
    let expected_weight = if v2 {
        CpuWeight::Weight(59)
    } else {
        CpuWeight::Shares(512)
    };
    assert_eq!(read.cpu_weight, Some(expected_weight));
    assert_eq!(read.memory_reservation, Some(Bytes(67_108_864)));
    assert_eq!(
        out.stdout.split_whitespace().collect::<Vec<_>>(),
        [shares, "67108864"],
        "what the container reads from its own cgroup"
    );
    remove_without_leftovers(&docker, &run, &h, parent);

    // Not applied by isolab-runtime: docker run fails and says which field and why.
    let rel = PathBuf::from(format!("{base}/docker-isolab-refused"));
    let parent = Cgroup::create(&h, &rel).unwrap();
    let run = request("refused", &rel);
    let flags = ["--cpu-shares", "512", "--kernel-memory", "64m"];
    let argv = with_run_flags(docker.run_command(&run, &image).unwrap(), &flags);
    let out = Command::new(&argv[0]).args(&argv[1..]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    eprintln!(
        "docker+isolab with --kernel-memory 64m: {}\n{err}",
        out.status
    );
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("memory.kernel = 67108864") && err.contains("does not apply"),
        "{err}"
    );
    remove_without_leftovers(&docker, &run, &h, parent);
    docker.shutdown().unwrap();
}

fn podman_test(runtime: OciRuntime, allow_host_fixes: bool) {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(why) = skip_reason(&["podman", &runtime.program(), "iptables-save"]) {
        isolab_skip::skip(why);
        return;
    }
    let before = host_state();
    let podman = Podman::new(runtime, allow_host_fixes);
    let tag = format!("podman-{}", runtime.program());
    podman.ensure_ready().unwrap();
    eprintln!("{tag}: notes {:?}", podman.notes());
    exercise(&podman, &tag, true);
    let report = podman.shutdown_report().unwrap();
    eprintln!("{tag} shutdown: {report:?}");
    assert_eq!(
        before,
        host_state(),
        "the host differs after {tag}'s shutdown"
    );
    podman.shutdown().unwrap();
}

#[test]
fn podman_with_crun_runs_limited_containers() {
    // crun needs hugetlb out of cgroup2 on this hybrid host: isolab may mount it as
    // v1 for the test and must undo it (checked by comparing the host state).
    podman_test(OciRuntime::Crun, true);
}

#[test]
fn podman_with_runc_runs_limited_containers() {
    podman_test(OciRuntime::Runc, false);
}

/// Start-to-exit latency of `true` (median of 10) per engine, for the benchmark
/// notes: `cargo test -p isolab-engines --test docker_podman -- --ignored --nocapture`.
#[test]
#[ignore]
fn latency_of_true() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(why) = skip_reason(&["dockerd", "podman"]) {
        isolab_skip::skip(why);
        return;
    }
    let h = Hierarchy::detect().unwrap();
    let engines: Vec<(String, Box<dyn Engine>)> = vec![
        ("docker".into(), Box::new(Docker::new())),
        (
            "podman-crun".into(),
            Box::new(Podman::new(OciRuntime::Crun, true)),
        ),
        (
            "podman-runc".into(),
            Box::new(Podman::new(OciRuntime::Runc, false)),
        ),
    ];
    for (tag, engine) in &engines {
        engine.ensure_ready().unwrap();
        let image = engine.prepare_image(Path::new(BENCH)).unwrap();
        let rel = PathBuf::from(format!("isolab-test-{}/{tag}-lat", std::process::id()));
        let parent = Cgroup::create(&h, &rel).unwrap();
        let mut times = Vec::new();
        for i in 0..10 {
            let request = RunRequest {
                id: format!("isolab-lat-{tag}-{i}").parse().unwrap(),
                argv: vec!["true".into()],
                workdir: std::env::temp_dir(),
                network: NetworkMode::None,
                limits: Limits::default(),
                cgroup_parent: rel.clone(),
                env: Vec::new(),
            };
            let argv = engine.run_command(&request, &image).unwrap();
            let attacher = parent.attacher().unwrap();
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..]);
            // SAFETY: attach_self only calls write(2); see run_in.
            unsafe { cmd.pre_exec(move || attacher.attach_self()) };
            let t = Instant::now();
            let st = cmd.status().unwrap();
            times.push(t.elapsed());
            assert!(st.success());
            engine.remove(&request).unwrap();
        }
        times.sort();
        eprintln!(
            "{tag}: median {:?} (min {:?}, max {:?}) of 10 runs of true; version {}",
            (times[4] + times[5]) / 2,
            times[0],
            times[9],
            engine.version().unwrap()
        );
        parent.remove().unwrap();
    }
    for (_, engine) in &engines {
        engine.shutdown().unwrap();
    }
}
