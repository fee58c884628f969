//! Every neighbour kind for real, as root, each instance in a cgroup of its own
//! made with isolab-cgroups: started, measured against its target for about two
//! seconds, stopped, and nothing left behind (no cgroup, no namespace, no process).
//! Skipped (`isolab_skip`) with the reason without root or without the tools.
//!
//! The tests take turns (one lock): they measure a 2-cpu host.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use isolab_cgroups::{Bytes, Cgroup, Hierarchy, Limits};
use isolab_lab::neighbour::{
    self, achieved, off_target, Capacity, CommandContext, NeighbourKind, NeighbourLevel,
    NeighbourNet, NeighbourPlan, NetDirection, Observed, Rate, SoloProfile,
};
use isolab_lab::telemetry::CpuSampler;

static TURN: Mutex<()> = Mutex::new(());

/// How long each neighbour is measured.
const MEASURE: Duration = Duration::from_secs(2);

fn base() -> PathBuf {
    PathBuf::from(format!("isolab/nbtest-{}", std::process::id()))
}

/// The cgroup hierarchy, or why the test cannot run.
fn setup(tools: &[&str]) -> Option<Hierarchy> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        isolab_skip::skip("neighbours need root to create cgroups and namespaces");
        return None;
    }
    for tool in tools {
        if isolab_tools::find_program(tool).is_none() {
            isolab_skip::skip(format!(
                "`{tool}` is not installed (scripts/setup.sh installs it)"
            ));
            return None;
        }
    }
    match Hierarchy::detect() {
        Ok(h) => Some(h),
        Err(e) => {
            isolab_skip::skip(format!("no cgroup hierarchy detected: {e}"));
            None
        }
    }
}

/// The parent cgroup of a test's groups, removed at its end (a group removes only
/// the ancestors it created, and only when they are empty).
struct Scope(Option<Cgroup>);

impl Scope {
    fn enter(h: &Hierarchy) -> Scope {
        Scope(Some(match Cgroup::create(h, &base()) {
            Ok(c) => c,
            Err(isolab_cgroups::Error::AlreadyExists { .. }) => Cgroup::open(h, &base()).unwrap(),
            Err(e) => panic!("{e}"),
        }))
    }

    /// Removes the scope and checks that nothing of the test is left.
    fn leave(mut self) {
        if let Some(c) = self.0.take() {
            c.remove().unwrap();
        }
        assert_nothing_left();
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        if let Some(c) = self.0.take() {
            let _ = c.remove();
        }
    }
}

/// Processes in one cgroup, stopped (killed, reaped, cgroup removed) on drop.
struct Group {
    cgroup: Option<Cgroup>,
    children: Vec<Child>,
    seen: Vec<u32>,
    rel: PathBuf,
}

impl Group {
    fn start(
        h: &Hierarchy,
        name: &str,
        limits: &Limits,
        argvs: &[Vec<String>],
        logs: &Path,
    ) -> Group {
        let rel = base().join(name);
        let cgroup = Cgroup::create(h, &rel).unwrap();
        cgroup.apply(limits).unwrap();
        assert!(limits
            .differences(&cgroup.read_limits().unwrap())
            .is_empty());
        let mut group = Group {
            cgroup: Some(cgroup),
            children: Vec::new(),
            seen: Vec::new(),
            rel,
        };
        for (i, argv) in argvs.iter().enumerate() {
            let attacher = group.cgroup().attacher().unwrap();
            let out = File::create(logs.join(format!("{name}-{i}.out"))).unwrap();
            let err = File::create(logs.join(format!("{name}-{i}.err"))).unwrap();
            let mut cmd = Command::new(&argv[0]);
            cmd.args(&argv[1..])
                .current_dir(logs)
                .stdin(Stdio::null())
                .stdout(out)
                .stderr(err);
            // SAFETY: attach_self only calls write(2) and allocates nothing.
            unsafe { cmd.pre_exec(move || attacher.attach_self()) };
            let child = cmd.spawn().unwrap();
            group.seen.push(child.id());
            group.children.push(child);
        }
        group
    }

    fn cgroup(&self) -> &Cgroup {
        self.cgroup.as_ref().unwrap()
    }

    fn cpu_s(&self) -> f64 {
        self.cgroup()
            .stats()
            .unwrap()
            .cpu_usage
            .unwrap()
            .as_secs_f64()
    }

    /// Remembers every process in the cgroup now (to check later that it is gone).
    fn note_pids(&mut self) {
        let pids = self.cgroup().pids().unwrap();
        self.seen.extend(pids);
    }

    fn all_alive(&mut self) -> bool {
        self.children
            .iter_mut()
            .all(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// A v1 controller file of the cgroup.
    fn v1_file(&self, controller: &str, file: &str) -> String {
        std::fs::read_to_string(
            Path::new("/sys/fs/cgroup")
                .join(controller)
                .join(&self.rel)
                .join(file),
        )
        .unwrap_or_default()
    }

    fn stop(&mut self) {
        if let Some(c) = self.cgroup.take() {
            c.remove().unwrap();
        }
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
        for pid in &self.seen {
            assert!(!running(*pid), "process {pid} survived its neighbour");
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(c) = self.cgroup.take() {
            let _ = c.remove();
        }
        for mut c in self.children.drain(..) {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Whether `pid` exists and is not a zombie.
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| !r.starts_with('Z')))
        .unwrap_or(false)
}

/// Nothing of this test binary is left: no cgroup under our base in any
/// controller, no namespace of ours, no stress-ng / fio / iperf3 of ours.
fn assert_nothing_left() {
    for controller in std::fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let p = controller.path().join(base());
        assert!(!p.exists(), "cgroup {} left behind", p.display());
    }
    let me = std::process::id();
    let ns: Vec<String> = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(&format!("isolab-nb{me}-")))
        .collect();
    assert!(ns.is_empty(), "namespaces left behind: {ns:?}");
    let marker = format!("nbtest-{me}");
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if !["stress-ng", "fio", "iperf3", "ip"].contains(&comm.trim()) || !running(pid) {
            continue;
        }
        let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, r)| r.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        assert!(
            !cgroup.contains(&marker) && ppid != Some(me),
            "{} (pid {pid}) left behind",
            comm.trim()
        );
    }
}

/// Checks `pct` against `target`, unless other work (not ours) kept more than 10
/// points of the host's cpus busy: rate-limited fio and iperf3 need cpu time to
/// keep their rate, and another build on the host takes it from them.
fn check_target(kind: &str, target: f64, pct: f64, others: f64) {
    if others <= 10.0 {
        assert!(
            !off_target(target, pct),
            "{kind}: {pct:.1}% for a {target}% target"
        );
    } else {
        eprintln!(
            "{kind}: other work used {others:.1} points of the host's cpus: achieved {pct:.1}% is reported, not checked (off target: {})",
            off_target(target, pct)
        );
    }
}

/// Host cpu utilisation (percent of all cpus) not spent by `ours_cpu_s` over `wall`.
fn others(host: &isolab_lab::telemetry::HostCpu, ours_cpu_s: f64, wall: f64) -> f64 {
    let per_core: Vec<f64> = host.mean.iter().map(|(_, u)| *u).collect();
    let host_pct = achieved(Observed::HostCpu(&per_core), &Capacity::default()).unwrap_or(0.0);
    host_pct - 100.0 * ours_cpu_s / wall / cpus()
}

/// Cpu seconds of process `pid` so far.
fn process_cpu_s(pid: u32) -> f64 {
    // SAFETY: sysconf has no preconditions.
    let tick = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let f: Vec<u64> = s
                .rsplit_once(") ")?
                .1
                .split_whitespace()
                .skip(11)
                .take(2)
                .filter_map(|v| v.parse().ok())
                .collect();
            Some(f.iter().sum::<u64>() as f64 / tick)
        })
        .unwrap_or(0.0)
}

fn cpus() -> f64 {
    std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
}

fn level(s: &str) -> NeighbourLevel {
    s.parse().unwrap()
}

fn ctx(dir: &Path, memory_limit: Option<u64>) -> CommandContext {
    CommandContext {
        workdir: dir.to_path_buf(),
        direct: true,
        memory_limit,
        index: 0,
        direction: NetDirection::Transmit,
    }
}

fn sv(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn cpu_at_90_percent_reaches_its_target_next_to_sysbench() {
    cpu_target_next_to_sysbench("cpu@90%", 90.0);
}

/// Full usage: whole workers at full load saturate the host (two workers at half
/// load each, from a solo profile just under one cpu, reached 88% here).
#[test]
fn cpu_at_full_usage_saturates_the_host_next_to_sysbench() {
    cpu_target_next_to_sysbench("cpu@100%", 100.0);
}

/// Plans `level` from the subject's solo profile, runs subject and neighbours, and
/// checks the utilisation reached against `target`.
fn cpu_target_next_to_sysbench(level_text: &str, target: f64) {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = setup(&["stress-ng", "sysbench"]) else {
        return;
    };
    let scope = Scope::enter(&h);
    let dir = tempfile::tempdir().unwrap();
    let subject = |secs: u32| {
        sv(&[
            "sysbench",
            "cpu",
            "--threads=1",
            &format!("--time={secs}"),
            "run",
        ])
    };

    // The subject's solo profile, from its cgroup's cpu time.
    let mut solo = Group::start(&h, "solo", &Limits::default(), &[subject(2)], dir.path());
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_millis(1500));
    let solo_cpus = solo.cpu_s() / t0.elapsed().as_secs_f64();
    solo.stop();
    eprintln!("subject alone: {solo_cpus:.2} cpus");

    let capacity = Capacity {
        cpus: cpus(),
        memory_bytes: 1 << 30,
        ..Capacity::default()
    };
    let plan = neighbour::plan(
        &level(level_text),
        &capacity,
        &SoloProfile {
            cpus_used: solo_cpus,
            ..SoloProfile::default()
        },
    )
    .unwrap();
    eprintln!("plan: {plan:?}");
    assert_eq!(plan.target, Some(target));
    // Other work on the host can slow the solo run below one cpu; the arithmetic
    // itself is unit-tested.
    let need = target / 100.0 * capacity.cpus - solo_cpus;
    let k = f64::from(plan.instances);
    assert!(
        k >= need.floor() && k <= need.ceil().max(1.0),
        "{plan:?} for {need}"
    );
    assert!(matches!(plan.per_instance, Rate::CpuLoadPct(1..=100)));

    let mut subject = Group::start(&h, "subject", &Limits::default(), &[subject(5)], dir.path());
    let mut bombs = Group::start(
        &h,
        "cpu",
        &Limits::default(),
        &neighbour::commands(&plan, &ctx(dir.path(), None)),
        dir.path(),
    );
    std::thread::sleep(Duration::from_millis(500));
    assert!(bombs.all_alive() && subject.all_alive());
    let (s0, b0, t0) = (subject.cpu_s(), bombs.cpu_s(), Instant::now());
    let sampler = CpuSampler::start(Path::new("/proc"), Duration::from_millis(100));
    std::thread::sleep(MEASURE);
    let host = sampler.finish();
    let wall = t0.elapsed().as_secs_f64();
    let (s1, b1) = (subject.cpu_s(), bombs.cpu_s());
    bombs.note_pids();
    subject.stop();
    bombs.stop();

    let per_core: Vec<f64> = host.mean.iter().map(|(_, u)| *u).collect();
    let host_pct = achieved(Observed::HostCpu(&per_core), &capacity).unwrap();
    // What subject and neighbours used, free of other activity on the host.
    let ours_pct = 100.0 * ((s1 - s0) + (b1 - b0)) / wall / capacity.cpus;
    eprintln!(
        "{level_text}: achieved {ours_pct:.1}% from the cgroups (subject {:.2} cpus, neighbours {:.2} cpus), host {host_pct:.1}% from /proc/stat (per core {per_core:?})",
        (s1 - s0) / wall,
        (b1 - b0) / wall
    );
    // Other work on the host (another build) takes cpu from ours; then only the
    // host-wide utilisation can be checked.
    let others = host_pct - ours_pct;
    if others <= 5.0 {
        assert!(
            !off_target(target, ours_pct),
            "cgroups: {ours_pct:.1}% for a {target}% target"
        );
    } else {
        eprintln!(
            "other work used {others:.1} points of the host: the cgroups' share is not checked"
        );
    }
    assert!(
        host_pct >= target - 5.0,
        "host utilisation {host_pct:.1}% for a {target}% target"
    );
    scope.leave();
}

#[test]
fn disk_neighbours_write_and_reach_a_share_of_the_measured_iops() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = setup(&["fio"]) else { return };
    let scope = Scope::enter(&h);
    let dir = tempfile::tempdir().unwrap();

    // Capacity: the calibration run, read from its JSON. The root blkio group's
    // byte counter must move with it, else this host's block layer accounts no I/O
    // to cgroups at all (seen on a virtio disk whose blk-throttle counters stay 0).
    let root_io = || {
        std::fs::read_to_string("/sys/fs/cgroup/blkio/blkio.throttle.io_service_bytes")
            .ok()
            .and_then(|t| {
                t.lines()
                    .find_map(|l| l.strip_prefix("Total ")?.trim().parse::<u64>().ok())
            })
    };
    // Earlier tests' dirty pages are written back first, not in the measured seconds.
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    let before = root_io();
    let iops = calibrate(dir.path());
    eprintln!("disk capacity: {iops:.0} IOPS (randrw 32k, iodepth 16, direct)");
    if let Some(bytes) = before.filter(|b| Some(*b) == root_io()) {
        isolab_skip::skip(format!(
            "blkio counts no I/O on this host: the root blkio group's \
             blkio.throttle.io_service_bytes stayed at {bytes} bytes through a direct fio run \
             of {iops:.0} IOPS, so no disk bomb's writes or operations can be measured"
        ));
        return;
    }

    // A count: two unlimited bombs that write.
    let plan = neighbour::plan(
        &level("disk*2"),
        &Capacity::default(),
        &SoloProfile::default(),
    )
    .unwrap();
    let mut bombs = Group::start(
        &h,
        "disk",
        &Limits::default(),
        &neighbour::commands(&plan, &ctx(dir.path(), None)),
        dir.path(),
    );
    std::thread::sleep(MEASURE);
    assert!(bombs.all_alive());
    let written = bombs.cgroup().stats().unwrap().io_write.unwrap_or(Bytes(0));
    bombs.note_pids();
    bombs.stop();
    eprintln!("disk*2: {} written in {MEASURE:?}", written);
    assert!(written.0 > 0, "the bombs wrote nothing");

    // A utilisation: rate-limited psync jobs, measured from the cgroup's operations.
    let capacity = Capacity {
        cpus: cpus(),
        disk_iops: Some(iops),
        ..Capacity::default()
    };
    let plan = neighbour::plan(&level("disk@50%"), &capacity, &SoloProfile::default()).unwrap();
    eprintln!("plan: {plan:?}");
    let mut bombs = Group::start(
        &h,
        "disk-util",
        &Limits::default(),
        &neighbour::commands(&plan, &ctx(dir.path(), None)),
        dir.path(),
    );
    let ops = |g: &Group| -> u64 {
        g.v1_file("blkio", "blkio.throttle.io_serviced")
            .lines()
            .find_map(|l| l.strip_prefix("Total "))
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or(0)
    };
    std::thread::sleep(Duration::from_millis(1000)); // files laid out, rate settled
    let disk = isolab_cgroups::DeviceNumber::backing_disk(dir.path(), Path::new("/sys"))
        .ok()
        .flatten()
        .and_then(neighbour::disk_name);
    let disk_ops = || {
        disk.as_deref()
            .and_then(|d| neighbour::disk_ios(Path::new("/proc"), d))
    };
    let (o0, c0, d0, t0) = (ops(&bombs), bombs.cpu_s(), disk_ops(), Instant::now());
    let sampler = CpuSampler::start(Path::new("/proc"), Duration::from_millis(100));
    std::thread::sleep(MEASURE);
    let host = sampler.finish();
    let wall = t0.elapsed().as_secs_f64();
    let ours = ops(&bombs) - o0;
    let measured = ours as f64 / wall;
    let others = others(&host, bombs.cpu_s() - c0, wall);
    // Operations on the disk that were not the bombs', as points of its capacity.
    let others_io = match (d0, disk_ops()) {
        (Some(a), Some(b)) => 100.0 * b.saturating_sub(a).saturating_sub(ours) as f64 / wall / iops,
        _ => 0.0,
    };
    assert!(bombs.all_alive());
    bombs.note_pids();
    bombs.stop();
    let pct = achieved(Observed::DiskIops(measured), &capacity).unwrap();
    eprintln!("disk@50%: achieved {pct:.1}% ({measured:.0} IOPS of {iops:.0})");
    assert!(measured > 0.0);
    // A virtual disk's capacity moves with what the machine under it does (37,000 then
    // 49,600 IOPS here, a minute apart). Measured again, where it differs by more
    // than a fifth from the first, or other work used a tenth of it, a share missed
    // may be of a capacity the disk no longer had: reported, not checked.
    let again = calibrate(dir.path());
    let drift = (again - iops).abs() / iops.max(again);
    eprintln!(
        "disk capacity after: {again:.0} IOPS; other work's operations: {others_io:.1} points"
    );
    if off_target(50.0, pct) && (drift > 0.2 || others_io > 10.0) {
        eprintln!(
            "disk@50%: the disk's capacity was {iops:.0} IOPS, then {again:.0}, and other work did \
             {others_io:.1} points of it: achieved {pct:.1}%, off target, is reported, not checked"
        );
    } else {
        check_target("disk@50%", 50.0, pct, others);
    }
    scope.leave();
}

/// The disk's capacity in operations a second: the calibration run, read from its JSON.
fn calibrate(dir: &Path) -> f64 {
    let cal = neighbour::disk_capacity_command(dir, true);
    let out = Command::new(&cal[0])
        .args(&cal[1..])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let iops = neighbour::parse_fio_iops(&String::from_utf8_lossy(&out.stdout)).unwrap();
    assert!(iops > 0.0);
    assert!(
        !dir.join("isolab-disk-capacity").exists(),
        "calibration file unlinked"
    );
    iops
}

#[test]
fn fork_bomb_is_held_by_its_pids_limit() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = setup(&["stress-ng"]) else {
        return;
    };
    let scope = Scope::enter(&h);
    let dir = tempfile::tempdir().unwrap();
    let plan = neighbour::plan(
        &level("fork*2"),
        &Capacity::default(),
        &SoloProfile::default(),
    )
    .unwrap();
    let limits = Limits {
        pids_max: Some(64),
        ..Limits::default()
    };
    let mut bombs = Group::start(
        &h,
        "fork",
        &limits,
        &neighbour::commands(&plan, &ctx(dir.path(), None)),
        dir.path(),
    );
    let deadline = Instant::now() + MEASURE;
    let mut most = 0;
    while Instant::now() < deadline {
        most = most.max(bombs.cgroup().pids().map(|p| p.len()).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(10));
    }
    // The host still forks.
    assert!(Command::new("true").status().unwrap().success());
    assert!(bombs.all_alive());
    let forks = bombs.v1_file("pids", "pids.events");
    bombs.note_pids();
    bombs.stop();
    eprintln!(
        "fork*2: at most {most} tasks seen under pids.max 64; pids.events: {}",
        forks.trim()
    );
    let refused: u64 = forks
        .trim()
        .strip_prefix("max ")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(most > 2, "the bombs did not fork");
    assert!(most <= 64);
    assert!(refused > 0, "the pids limit never refused a fork: {forks}");
    scope.leave();
}

#[test]
fn memory_bomb_fills_and_is_held_by_its_limit() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = setup(&["stress-ng"]) else {
        return;
    };
    let scope = Scope::enter(&h);
    let dir = tempfile::tempdir().unwrap();
    let limit = Bytes::mib(256);
    let plan = neighbour::plan(
        &level("memory"),
        &Capacity::default(),
        &SoloProfile::default(),
    )
    .unwrap();
    let limits = Limits {
        memory_max: Some(limit),
        ..Limits::default()
    };
    let mut bombs = Group::start(
        &h,
        "memory",
        &limits,
        &neighbour::commands(&plan, &ctx(dir.path(), Some(limit.0))),
        dir.path(),
    );
    std::thread::sleep(MEASURE);
    assert!(bombs.all_alive());
    let stats = bombs.cgroup().stats().unwrap();
    bombs.note_pids();
    bombs.stop();
    let used = stats.memory_current.unwrap().0;
    eprintln!(
        "memory (limit {limit}): {} in use, peak {:?}",
        Bytes(used),
        stats.memory_peak
    );
    assert!(used > limit.0 / 2, "only {used} bytes touched");
    assert!(used <= limit.0);
    scope.leave();
}

#[test]
fn cache_neighbours_thrash() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = setup(&["stress-ng"]) else {
        return;
    };
    let scope = Scope::enter(&h);
    let dir = tempfile::tempdir().unwrap();
    let plan = neighbour::plan(
        &level("cache*2"),
        &Capacity::default(),
        &SoloProfile::default(),
    )
    .unwrap();
    let mut bombs = Group::start(
        &h,
        "cache",
        &Limits::default(),
        &neighbour::commands(&plan, &ctx(dir.path(), None)),
        dir.path(),
    );
    let (c0, t0) = (bombs.cpu_s(), Instant::now());
    std::thread::sleep(MEASURE);
    let cpus_used = (bombs.cpu_s() - c0) / t0.elapsed().as_secs_f64();
    assert!(bombs.all_alive());
    bombs.note_pids();
    bombs.stop();
    eprintln!("cache*2 (cache + stream): {cpus_used:.2} cpus busy");
    assert!(cpus_used > 0.5);
    scope.leave();
}

#[test]
fn network_neighbours_stream_between_private_namespaces() {
    let _turn = TURN.lock().unwrap_or_else(|e| e.into_inner());
    let Some(h) = setup(&["iperf3", "ip", "tc"]) else {
        return;
    };
    let scope = Scope::enter(&h);
    let dir = tempfile::tempdir().unwrap();
    let net = NeighbourNet::create(2).unwrap();
    let names = net.names().clone();
    assert!(Path::new("/run/netns").join(&names.ns_a).exists());

    // Capacity: one unlimited stream, read from iperf3's JSON.
    let cal = neighbour::net_capacity_command(&names);
    let out = Command::new(&cal[0]).args(&cal[1..]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let gbps = neighbour::parse_iperf3_gbps(&String::from_utf8_lossy(&out.stdout)).unwrap();
    eprintln!("network capacity between the namespaces: {gbps:.2} Gbit/s");
    assert!(gbps > 0.0);

    let capacity = Capacity {
        cpus: cpus(),
        net_gbps: Some(gbps),
        ..Capacity::default()
    };
    // Throughput in Gbit/s, and the host cpu share of other work meanwhile.
    let servers_cpu_s = || {
        net.server_pids()
            .into_iter()
            .map(process_cpu_s)
            .sum::<f64>()
    };
    // Neighbours that send (`network`) or receive (`network-rx`: iperf3 -R).
    let measure_way = |plan: &NeighbourPlan, name: &str, direction: NetDirection| {
        let ctx = CommandContext {
            direction,
            ..ctx(dir.path(), None)
        };
        let mut clients = Group::start(
            &h,
            name,
            &Limits::default(),
            &neighbour::commands(plan, &ctx),
            dir.path(),
        );
        std::thread::sleep(Duration::from_millis(700));
        let ours = || clients.cpu_s() + servers_cpu_s();
        let carried = || net.carried_bytes(direction).unwrap();
        let (b0, c0, t0) = (carried(), ours(), Instant::now());
        let sampler = CpuSampler::start(Path::new("/proc"), Duration::from_millis(100));
        std::thread::sleep(MEASURE);
        let host = sampler.finish();
        let wall = t0.elapsed().as_secs_f64();
        let rate = (carried() - b0) as f64 * 8.0 / 1e9 / wall;
        let others = others(&host, ours() - c0, wall);
        assert!(clients.all_alive(), "iperf3 clients died");
        clients.note_pids();
        clients.stop();
        (rate, others)
    };
    let measure =
        |plan: &NeighbourPlan, name: &str| measure_way(plan, name, NetDirection::Transmit);

    let (count, _) = measure(
        &neighbour::plan(&level("network*2"), &capacity, &SoloProfile::default()).unwrap(),
        "network",
    );
    eprintln!("network*2: {count:.2} Gbit/s");
    assert!(count > 0.0);
    // Receiving: the servers send, counted on the servers' end as sent.
    let rx = neighbour::plan(&level("network-rx"), &capacity, &SoloProfile::default()).unwrap();
    let (received, _) = measure_way(&rx, "network-rx", NetDirection::Receive);
    eprintln!("network-rx: {received:.2} Gbit/s");
    assert!(received > 0.0);

    let plan = neighbour::plan(&level("network@50%"), &capacity, &SoloProfile::default()).unwrap();
    eprintln!("plan: {plan:?}");
    let (rate, others) = measure(&plan, "network-util");
    let pct = achieved(Observed::NetGbps(rate), &capacity).unwrap();
    eprintln!("network@50%: achieved {pct:.1}% ({rate:.2} of {gbps:.2} Gbit/s)");
    check_target("network@50%", 50.0, pct, others);

    // A `net` reservation's token bucket on the a end holds the clients.
    let tc = net.rate_limit_command(200);
    let status = Command::new(&tc[0]).args(&tc[1..]).status().unwrap();
    assert!(status.success(), "{}", tc.join(" "));
    let (limited, _) = measure(
        &neighbour::plan(&level("network"), &capacity, &SoloProfile::default()).unwrap(),
        "network-tbf",
    );
    eprintln!("network under tbf 200mbit: {:.0} Mbit/s", limited * 1000.0);
    assert!(
        limited > 0.0 && limited < 0.25,
        "{limited} Gbit/s through a 200 Mbit/s bucket"
    );
    // The reservation puts the bucket on both ends: receiving is held too.
    let read = net.rate_limit(200).unwrap();
    assert!((read - 200.0).abs() < 1.0, "{read} Mbit/s read back");
    let (limited, _) = measure_way(&rx, "network-rx-tbf", NetDirection::Receive);
    eprintln!(
        "network-rx under tbf 200mbit: {:.0} Mbit/s",
        limited * 1000.0
    );
    assert!(
        limited > 0.0 && limited < 0.25,
        "{limited} Gbit/s received through a 200 Mbit/s bucket"
    );

    net.remove().unwrap();
    scope.leave();
    // kind names round-trip
    assert_eq!(NeighbourKind::Network.to_string(), "network");
}
