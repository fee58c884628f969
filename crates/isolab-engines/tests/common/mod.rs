//! What the root tests of the engines share: the bench image, a lab that creates the
//! instance cgroup and runs an engine's command in it as isolab's lab does (watching
//! for the container's cgroup and reading its limits back while the workload runs),
//! the host's cgroup mounts and mounts below a directory, and [`exercise`]: what
//! every engine that runs the bench image from a directory must do.
//!
//! Each test binary uses a part of it.
#![allow(dead_code)]

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isolab_cgroups::{Bytes, Cgroup, Controller, CpuQuota, Hierarchy, IdSet, Limits};
use isolab_engines::tool::Tools as _;
use isolab_engines::{find_container_cgroup, Engine, NetworkMode, PreparedImage, RunRequest};

pub const IMAGE: &str = "/var/lib/isolab/images/bench";
pub static SERIAL: Mutex<()> = Mutex::new(());

pub fn skip_reason(engine: &str, program: &str) -> Option<String> {
    // SAFETY: geteuid has no preconditions and touches no memory.
    if unsafe { libc::geteuid() } != 0 {
        return Some(format!("the {engine} test needs root"));
    }
    if !Path::new(IMAGE).join(".isolab-image.json").is_file() {
        return Some(format!("no bench image at {IMAGE} (make image)"));
    }
    if isolab_engines::tool::SystemTools.which(program).is_none() {
        return Some(format!(
            "{engine}: `{program}` is not installed (scripts/setup.sh installs it)"
        ));
    }
    None
}

/// What one container run gave.
#[derive(Debug)]
pub struct Ran {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
    /// The container's cgroup (relative, with a leading `/`), as found while it ran.
    pub cgroup: Option<PathBuf>,
    /// Limits read from it once the workload process was inside.
    pub limits: Option<Limits>,
    /// Limits read the first time the cgroup held any process.
    pub first_limits: Option<Limits>,
    pub wall: Duration,
}

pub struct Lab {
    pub hierarchy: Hierarchy,
    pub cpu_mount: PathBuf,
    pub parent: Option<Cgroup>,
    pub rel: PathBuf,
    pub workdir: tempfile::TempDir,
}

impl Lab {
    pub fn new(name: &str) -> Lab {
        let hierarchy = Hierarchy::detect().unwrap();
        let cpu_mount = hierarchy.mount(Controller::Cpu).unwrap().to_path_buf();
        let rel = PathBuf::from(format!("isolab-test-{}/{name}", std::process::id()));
        let parent = Cgroup::create(&hierarchy, &rel).unwrap();
        Lab {
            hierarchy,
            cpu_mount,
            parent: Some(parent),
            rel,
            workdir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn request(
        &self,
        id: &str,
        argv: &[&str],
        limits: Limits,
        network: NetworkMode,
    ) -> RunRequest {
        RunRequest {
            id: format!("isolab-test{}-{id}", std::process::id())
                .parse()
                .unwrap(),
            argv: argv.iter().map(|s| s.to_string()).collect(),
            workdir: self.workdir.path().to_path_buf(),
            network,
            limits,
            cgroup_parent: self.rel.clone(),
            env: vec!["ISOLAB_TEST=1".into()],
        }
    }

    /// Runs the engine's command inside the parent cgroup (as the lab does), watching
    /// for the container's cgroup from a thread; `on_start` is called with the
    /// command's pid once the workload `comm` runs in the container.
    pub fn run(
        &self,
        engine: &dyn Engine,
        request: &RunRequest,
        image: &PreparedImage,
        workload: &str,
        on_start: impl FnOnce(u32) + Send + 'static,
    ) -> Ran {
        let argv = engine.run_command(request, image).unwrap();
        let attacher = self.parent.as_ref().unwrap().attacher().unwrap();
        // Files, as the lab does: a container that outlives its killed command keeps
        // pipes open.
        let logs = tempfile::tempdir().unwrap();
        let (out_path, err_path) = (logs.path().join("stdout"), logs.path().join("stderr"));
        let mut command = Command::new(&argv[0]);
        command
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out_path).unwrap())
            .stderr(std::fs::File::create(&err_path).unwrap());
        // SAFETY: attach_self only calls write(2) on pre-opened descriptors and
        // allocates nothing, so it is safe between fork and exec.
        unsafe {
            command.pre_exec(move || attacher.attach_self());
        }
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut child = command.spawn().unwrap();
        let pid = child.id();
        let watcher = {
            let (h, mount, rel, stop) = (
                self.hierarchy.clone(),
                self.cpu_mount.clone(),
                self.rel.clone(),
                Arc::clone(&stop),
            );
            let workload = workload.to_owned();
            std::thread::spawn(move || watch(h, mount, rel, stop, workload, pid, on_start))
        };
        let status = child.wait().unwrap();
        let out = std::fs::read_to_string(&out_path).unwrap();
        let err = std::fs::read_to_string(&err_path).unwrap();
        let wall = started.elapsed();
        stop.store(true, Ordering::Release);
        let (cgroup, first_limits, limits) = watcher.join().unwrap();
        use std::os::unix::process::ExitStatusExt;
        Ran {
            status: status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0)),
            stdout: out,
            stderr: err,
            cgroup,
            limits,
            first_limits,
            wall,
        }
    }

    /// Asserts that nothing is left below the parent in any hierarchy, then removes
    /// the parent and asserts that `isolab-test-<pid>` is gone everywhere.
    pub fn finish(mut self) {
        for root in cgroup_mounts() {
            let dir = root.join(&self.rel);
            if let Ok(entries) = std::fs::read_dir(&dir) {
                let children: Vec<_> = entries
                    .flatten()
                    .filter(|e| e.path().is_dir())
                    .map(|e| e.path())
                    .collect();
                assert!(children.is_empty(), "left below the parent: {children:?}");
            }
        }
        self.parent.take().unwrap().remove().unwrap();
        let top = self.rel.components().next().unwrap();
        for root in cgroup_mounts() {
            assert!(
                !root.join(top).exists(),
                "{} is left",
                root.join(top).display()
            );
        }
    }
}

impl Drop for Lab {
    /// Removes the parent and everything below it in every cgroup hierarchy, the ones the
    /// lab does not manage too (nspawn's `payload` and `supervisor` in `name=systemd`, runc's
    /// copies in `devices`): a test that fails before its engine removed the container
    /// would otherwise leave them, and `isolab-test-PID` above them. What cannot be removed
    /// is printed.
    fn drop(&mut self) {
        if let Some(p) = self.parent.take() {
            let _ = p.remove();
        }
        let tree = isolab_cgroups::RemoveTree {
            keep_top: false,
            kill: true,
            patience: Duration::from_secs(2),
        };
        let top = self.rel.parent().filter(|t| !t.as_os_str().is_empty());
        for mount in cgroup_mounts() {
            let removed = isolab_cgroups::remove_tree(
                &isolab_cgroups::RealSyscalls,
                &mount.join(&self.rel),
                &tree,
            );
            if let Some((dir, e)) = removed.failed {
                eprintln!("left behind: cgroup {}: {e}", dir.display());
            }
            // Shared by the binary's other labs: removed once the last one is gone.
            if let Some(top) = top {
                let _ = std::fs::remove_dir(mount.join(top));
            }
        }
    }
}

/// Runs the engine's `gc` of this process's containers (`isolab-test<pid>-…`) when dropped:
/// declared after the [`Lab`], it collects what a test that fails before `remove` leaves
/// (nspawn's run directory, a container) before the lab removes its cgroups.
pub struct GcOnDrop<'a>(pub &'a dyn Engine);

impl Drop for GcOnDrop<'_> {
    fn drop(&mut self) {
        let prefix = format!("isolab-test{}-", std::process::id());
        if let Err(e) = self.0.gc(&prefix) {
            eprintln!("left behind: {} gc of {prefix}: {e}", self.0.name());
        }
    }
}

pub type Watched = (Option<PathBuf>, Option<Limits>, Option<Limits>);

pub fn watch(
    h: Hierarchy,
    mount: PathBuf,
    parent: PathBuf,
    stop: Arc<AtomicBool>,
    workload: String,
    pid: u32,
    on_start: impl FnOnce(u32),
) -> Watched {
    let (mut cgroup, mut first, mut limits) = (None, None, None);
    let mut on_start = Some(on_start);
    loop {
        let stopping = stop.load(Ordering::Acquire);
        if let Some(rel) = find_container_cgroup(&mount, &parent) {
            let plain = rel.strip_prefix("/").unwrap().to_path_buf();
            if cgroup.is_none() {
                first = Cgroup::open(&h, &plain).and_then(|c| c.read_limits()).ok();
                cgroup = Some(rel.clone());
            }
            if limits.is_none() {
                let procs = std::fs::read_to_string(mount.join(&plain).join("cgroup.procs"))
                    .unwrap_or_default();
                let running = procs.split_whitespace().any(|p| {
                    std::fs::read_to_string(format!("/proc/{p}/comm"))
                        .is_ok_and(|c| c.trim() == workload)
                });
                if running {
                    limits = Cgroup::open(&h, &plain).and_then(|c| c.read_limits()).ok();
                    if let Some(f) = on_start.take() {
                        f(pid);
                    }
                }
            }
        }
        if stopping {
            return (cgroup, first, limits);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

pub fn cgroup_mounts() -> Vec<PathBuf> {
    let table = isolab_cgroups::mountinfo_path(Path::new("/proc"));
    isolab_cgroups::read_mountinfo(&table, isolab_cgroups::Malformed::Fail)
        .unwrap()
        .into_iter()
        .filter(|m| m.is_cgroup())
        .map(|m| m.mount_point)
        .collect()
}

/// Whether a cgroup strictly below `dir` holds a process.
pub fn has_processes_below(dir: &Path) -> bool {
    isolab_cgroups::deepest_populated(dir).is_some()
}

pub fn mounts_below(dir: &str) -> Vec<String> {
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.split(' ').nth(4).is_some_and(|m| m.starts_with(dir)))
        .map(str::to_owned)
        .collect()
}

pub fn quota() -> Limits {
    Limits {
        cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
        ..Limits::default()
    }
}

pub fn pinned(version: isolab_cgroups::Version) -> Limits {
    Limits {
        cpuset: Some("1".parse::<IdSet>().unwrap()),
        memory_max: Some(Bytes::mib(256)),
        // No swap: memory + swap = memory on v1, swap 0 on v2.
        memory_swap_max: Some(match version {
            isolab_cgroups::Version::V1 => Bytes::mib(256),
            isolab_cgroups::Version::V2 => Bytes(0),
        }),
        pids_max: Some(128),
        ..Limits::default()
    }
}

pub const SYSBENCH: [&str; 5] = ["sysbench", "cpu", "--cpu-max-prime=2000", "--time=1", "run"];

/// Everything the three engines must do, on `engine`; `run_dir` is where its
/// per-run directories live and `gone` checks that the engine forgot a container.
pub fn exercise(engine: &dyn Engine, run_dir: &str, gone: &dyn Fn(&str) -> bool) {
    let name = engine.name();
    engine.ensure_ready().unwrap();
    let version = engine.version().unwrap();
    assert!(version.starts_with(name), "{version}");
    let image = engine.prepare_image(Path::new(IMAGE)).unwrap();
    assert!(image.digest.starts_with("sha256:") && image.digest.len() == 71);
    let lab = Lab::new(name);
    let cg_version = lab.hierarchy.version();

    let check_removed = |req: &RunRequest| {
        engine.remove(req).unwrap();
        assert!(
            gone(req.id.as_str()),
            "{name}: the engine still knows {}",
            req.id
        );
        assert!(!Path::new(run_dir).join(&req.id).exists());
        // Only this run's: another process may run these tests at the same time.
        let left = mounts_below(&format!("{run_dir}/{}", req.id));
        assert!(left.is_empty(), "{name}: mounts left: {left:?}");
    };

    for (case, limits) in [("quota", quota()), ("pinned", pinned(cg_version))] {
        let req = lab.request(case, &SYSBENCH, limits.clone(), NetworkMode::None);
        let ran = lab.run(engine, &req, &image, "sysbench", |_| {});
        assert_eq!(
            ran.status, 0,
            "{name} {case}: {}\n{}",
            ran.stdout, ran.stderr
        );
        assert!(ran.stdout.contains("events per second"), "{}", ran.stdout);
        let cgroup = ran
            .cgroup
            .clone()
            .expect("the container's cgroup was found");
        assert!(
            cgroup.starts_with(Path::new("/").join(&lab.rel)),
            "{cgroup:?}"
        );
        let read = ran.limits.clone().expect("limits read while sysbench ran");
        assert_eq!(
            limits.differences(&read),
            Vec::<String>::new(),
            "{name} {case}"
        );
        let first = ran.first_limits.clone().unwrap_or_default();
        let early = limits.differences(&first);
        eprintln!(
            "{name} {case}: cgroup {} in {:.2?}; limits at first sight of the cgroup: {}",
            cgroup.display(),
            ran.wall,
            if early.is_empty() {
                "already in force".into()
            } else {
                format!("not yet in force ({})", early.join("; "))
            }
        );
        check_removed(&req);
    }

    // Only loopback, and it is up; the environment and workdir come through.
    let script = "cat /proc/net/dev; cat /sys/class/net/lo/flags; echo \"env=$ISOLAB_TEST\"; pwd";
    let req = lab.request(
        "net",
        &["sh", "-c", script],
        Limits::default(),
        NetworkMode::None,
    );
    let ran = lab.run(engine, &req, &image, "sh", |_| {});
    assert_eq!(ran.status, 0, "{name}: {}", ran.stderr);
    let ifaces: Vec<&str> = ran
        .stdout
        .lines()
        .filter_map(|l| l.split_once(':').map(|(i, _)| i.trim()))
        .filter(|i| !i.contains('|') && !i.is_empty() && !i.starts_with("env"))
        .collect();
    assert_eq!(ifaces, ["lo"], "{name}: {}", ran.stdout);
    let flags = ran.stdout.lines().find(|l| l.starts_with("0x")).unwrap();
    let flags = u32::from_str_radix(flags.trim_start_matches("0x"), 16).unwrap();
    assert_eq!(flags & 1, 1, "{name}: lo is down: {}", ran.stdout);
    assert!(ran.stdout.contains("env=1"), "{}", ran.stdout);
    assert!(
        ran.stdout
            .contains(&lab.workdir.path().display().to_string()),
        "{}",
        ran.stdout
    );
    check_removed(&req);

    // Exit status, stdout and stderr pass through; the workdir is writable; host
    // network sees the host's interfaces.
    let script = "echo out; echo err >&2; echo data > result; grep -c : /proc/net/dev; exit 3";
    let req = lab.request(
        "status",
        &["sh", "-c", script],
        Limits::default(),
        NetworkMode::Host,
    );
    let ran = lab.run(engine, &req, &image, "sh", |_| {});
    assert_eq!(ran.status, 3, "{name}: {}", ran.stderr);
    assert!(ran.stdout.starts_with("out\n"), "{}", ran.stdout);
    assert!(ran.stderr.contains("err"), "{}", ran.stderr);
    let host_ifaces = std::fs::read_to_string("/proc/net/dev")
        .unwrap()
        .matches(':')
        .count();
    assert!(
        ran.stdout.contains(&format!("\n{host_ifaces}\n")),
        "{name}: host network expected {host_ifaces} interfaces: {}",
        ran.stdout
    );
    assert_eq!(
        std::fs::read_to_string(lab.workdir.path().join("result")).unwrap(),
        "data\n"
    );
    assert_eq!(
        engine.host_address(NetworkMode::Host).as_deref(),
        Some("127.0.0.1")
    );
    check_removed(&req);

    // SIGTERM to the engine's command stops the container.
    let req = lab.request(
        "term",
        &["sysbench", "cpu", "--time=60", "run"],
        Limits::default(),
        NetworkMode::None,
    );
    let sent = Arc::new(Mutex::new(None::<Instant>));
    let sent2 = Arc::clone(&sent);
    let ran = lab.run(engine, &req, &image, "sysbench", move |pid| {
        // SAFETY: kill(2) takes plain integers.
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        *sent2.lock().unwrap() = Some(Instant::now());
    });
    let sent = sent.lock().unwrap().expect("sysbench started");
    assert!(
        sent.elapsed() < Duration::from_secs(10) && ran.wall < Duration::from_secs(20),
        "{name}: SIGTERM did not stop the container ({:?})",
        ran.wall
    );
    assert_ne!(ran.status, 0, "{name}: {}", ran.stderr);
    eprintln!("{name} SIGTERM: exit status {}", ran.status);
    check_removed(&req);

    // SIGKILL to the engine's command (the lab's last resort) leaves the container
    // running; remove stops it and cleans up all the same.
    let req = lab.request(
        "kill",
        &["sysbench", "cpu", "--time=60", "run"],
        Limits::default(),
        NetworkMode::None,
    );
    let ran = lab.run(engine, &req, &image, "sysbench", |pid| {
        // SAFETY: kill(2) takes plain integers.
        unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    });
    assert_eq!(ran.status, 128 + libc::SIGKILL, "{name}");
    let orphans = cgroup_mounts()
        .iter()
        .map(|m| m.join(&lab.rel))
        .any(|d| has_processes_below(&d));
    eprintln!("{name} SIGKILL: container still running after its command was killed: {orphans}");
    check_removed(&req);

    // Bridge is refused clearly and leaves nothing.
    let req = lab.request("bridge", &["true"], Limits::default(), NetworkMode::Bridge);
    let err = engine.run_command(&req, &image).unwrap_err();
    assert!(
        matches!(err, isolab_engines::EngineError::Unsupported { .. }),
        "{err}"
    );
    check_removed(&req);

    lab.finish();
    assert_eq!(
        engine
            .gc(&format!("isolab-test{}-", std::process::id()))
            .unwrap(),
        Vec::<String>::new()
    );
}
