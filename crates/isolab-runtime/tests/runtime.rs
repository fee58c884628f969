//! Privileged end-to-end tests of the runtime on a busybox root (skipped with a
//! printed reason when not root or busybox-static is missing). They run the real
//! `isolab-runtime` binary and check, after each container, that nothing is left:
//! cgroup, mount, loop device, state file, process.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::thread::sleep;
use std::time::{Duration, Instant};

use isolab_runtime::{ContainerConfig, Phase, Rootfs};

/// Containers share the machine's two cpus: run one test at a time so that the
/// timing-sensitive ones (cpu quota) measure only themselves.
static SERIAL: Mutex<()> = Mutex::new(());

fn lock() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root".into());
    }
    if !Path::new("/bin/busybox").exists() {
        return Some("/bin/busybox missing (apt-get install busybox-static)".into());
    }
    None
}

macro_rules! require_root {
    () => {
        if let Some(reason) = skip_reason() {
            eprintln!("skipped: {reason}");
            return;
        }
    };
}

/// A busybox root in a temporary directory: /bin with every applet as a relative
/// symlink, /etc/passwd, /etc/group, /tmp, and the mount points.
struct BusyboxRoot {
    dir: tempfile::TempDir,
}

impl BusyboxRoot {
    fn new() -> BusyboxRoot {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        for d in ["bin", "etc", "tmp", "proc", "sys", "dev", "root"] {
            fs::create_dir_all(root.join(d)).unwrap();
        }
        fs::copy("/bin/busybox", root.join("bin/busybox")).unwrap();
        let list = Command::new("/bin/busybox").arg("--list").output().unwrap();
        for applet in String::from_utf8_lossy(&list.stdout).lines() {
            let link = root.join("bin").join(applet);
            if applet != "busybox" && !link.exists() {
                symlink("busybox", link).unwrap();
            }
        }
        fs::write(root.join("etc/passwd"), "root:x:0:0:root:/root:/bin/sh\n").unwrap();
        fs::write(root.join("etc/group"), "root:x:0:\n").unwrap();
        BusyboxRoot { dir }
    }

    fn rootfs(&self) -> PathBuf {
        self.dir.path().join("rootfs")
    }

    fn state_dir(&self) -> PathBuf {
        self.dir.path().join("state")
    }

    /// An ext4 image of the root (`mkfs.ext4 -d`).
    fn ext4(&self) -> PathBuf {
        let img = self.dir.path().join("root.img");
        let out = Command::new("mkfs.ext4")
            .args(["-q", "-d"])
            .arg(self.rootfs())
            .arg(&img)
            .arg("64M")
            .output()
            .unwrap();
        assert!(out.status.success(), "mkfs.ext4: {out:?}");
        img
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_isolab-runtime")
}

/// `isolab-runtime run --id ID --state-dir … FLAGS ROOTFS -- sh -c SCRIPT`.
fn run(root: &BusyboxRoot, id: &str, flags: &[&str], script: &str) -> Output {
    run_on(root, &root.rootfs(), id, flags, script)
}

fn run_on(root: &BusyboxRoot, rootfs: &Path, id: &str, flags: &[&str], script: &str) -> Output {
    let out = Command::new(bin())
        .arg("run")
        .args(["--id", id, "--state-dir"])
        .arg(root.state_dir())
        .args(flags)
        .arg(rootfs)
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    let problems = leftovers(root, id, None);
    assert!(problems.is_empty(), "left behind: {problems:?}");
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn ok(out: &Output) -> String {
    assert!(out.status.success(), "{out:?}\nstderr: {}", stderr(out));
    stdout(out)
}

/// Everything container `id` could have left: cgroup directories, mounts under the
/// state directory, loop devices on `image`, state files.
fn leftovers(root: &BusyboxRoot, id: &str, image: Option<&Path>) -> Vec<String> {
    let mut found = Vec::new();
    for entry in fs::read_dir("/sys/fs/cgroup").unwrap().flatten() {
        let dir = entry.path().join("isolab").join(format!("rt-{id}"));
        if dir.exists() {
            found.push(format!("cgroup {}", dir.display()));
        }
    }
    let state = root.state_dir();
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    for line in mountinfo.lines() {
        if line.contains(state.to_str().unwrap()) {
            found.push(format!("mount {line}"));
        }
    }
    if let Some(image) = image {
        for (device, backing) in isolab_runtime::loopdev::attached() {
            if backing == image {
                found.push(format!("loop device {}", device.display()));
            }
        }
    }
    if state.join(format!("{id}.json")).exists() || state.join(id).exists() {
        found.push(format!("state of {id} in {}", state.display()));
    }
    found
}

#[test]
fn pid_namespace_and_init() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let out = ok(&run(
        &root,
        "t-pid",
        &[],
        "echo $$ $PPID; cat /proc/1/status | grep '^Name'; ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '",
    ));
    let lines: Vec<&str> = out.lines().collect();
    // Our init is PID 1; the command is its child, PID 2.
    assert_eq!(lines[0], "2 1", "{out}");
    assert!(lines[1].contains("isolab-init"), "{out}");
    let pids: Vec<u32> = lines[2]
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert!(pids.iter().all(|p| *p < 10), "host pids visible: {pids:?}");
}

#[test]
fn hostname_and_mounts_are_isolated() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let host_name = fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let out = ok(&run(
        &root,
        "t-uts",
        &["--hostname", "box"],
        "hostname; cat /proc/self/mountinfo",
    ));
    assert!(out.starts_with("box\n"), "{out}");
    assert_eq!(
        fs::read_to_string("/proc/sys/kernel/hostname").unwrap(),
        host_name
    );
    for host_only in ["/sys/fs/cgroup", "/work", "/run/isolab", "/boot"] {
        assert!(
            !out.lines()
                .skip(1)
                .any(|l| l.split(' ').nth(4) == Some(host_only)),
            "host mount {host_only} visible:\n{out}"
        );
    }
    // A mount made inside stays inside.
    let before = fs::read_to_string("/proc/self/mountinfo").unwrap();
    ok(&run(
        &root,
        "t-mnt",
        &["--privileged"],
        "mount -t tmpfs marker /tmp && touch /tmp/inside && grep -q marker /proc/self/mountinfo",
    ));
    let after = fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!after.contains("marker"));
    assert_eq!(before.lines().count(), after.lines().count());
}

#[test]
fn masked_and_readonly_paths() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let out = ok(&run(
        &root,
        "t-mask",
        &[],
        "for f in /proc/kcore /proc/keys /proc/timer_list; do echo $f $(cat $f | wc -c); done; \
         echo firmware $(ls /sys/firmware | wc -l); \
         if echo 1 > /proc/sys/kernel/ns_last_pid; then echo sys-writable; else echo sys-ro; fi; \
         if echo h > /proc/sysrq-trigger; then echo sysrq-writable; else echo sysrq-ro; fi; \
         grep -E 'NoNewPrivs|^Seccomp:' /proc/self/status",
    ));
    for expected in [
        "/proc/kcore 0",
        "/proc/keys 0",
        "/proc/timer_list 0",
        "firmware 0",
        "sys-ro",
        "sysrq-ro",
    ] {
        assert!(out.contains(expected), "missing {expected:?} in\n{out}");
    }
    assert!(
        out.contains("NoNewPrivs:\t1") && out.contains("Seccomp:\t2"),
        "{out}"
    );
}

#[test]
fn exit_codes_and_signals_propagate() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    assert_eq!(run(&root, "t-exit", &[], "exit 3").status.code(), Some(3));
    assert_eq!(
        run(&root, "t-kill", &[], "kill -9 $$").status.code(),
        Some(137)
    );
    assert_eq!(
        run(&root, "t-term", &[], "kill -TERM $$").status.code(),
        Some(143)
    );
    let missing = run(&root, "t-enoent", &[], "true");
    assert!(missing.status.success());
    let out = Command::new(bin())
        .args(["run", "--id", "t-nocmd", "--state-dir"])
        .arg(root.state_dir())
        .arg(root.rootfs())
        .args(["--", "no-such-program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("no-such-program"), "{}", stderr(&out));
    assert!(leftovers(&root, "t-nocmd", None).is_empty());
}

#[test]
fn sigterm_to_the_runtime_reaches_the_command() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let child = Command::new(bin())
        .args(["run", "--id", "t-sig", "--state-dir"])
        .arg(root.state_dir())
        .arg(root.rootfs())
        .args([
            "--",
            "sh",
            "-c",
            "trap 'echo got-term; exit 7' TERM; echo ready; while true; do sleep 0.05; done",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    sleep(Duration::from_millis(500));
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert!(stdout(&out).contains("got-term"));
    assert!(leftovers(&root, "t-sig", None).is_empty());
}

#[test]
fn memory_limit_oom_kills_inside() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let out = run(
        &root,
        "t-oom",
        &["--memory", "32M", "--memory-swap", "32M"],
        "a=xxxxxxxxxxxxxxxx; while true; do a=$a$a; done",
    );
    assert_eq!(out.status.code(), Some(137), "{out:?}");
}

#[test]
fn pids_limit_stops_a_fork_bomb() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let out = run(
        &root,
        "t-pids",
        &["--pids", "16"],
        "n=0; for i in $(seq 40); do sleep 2 & n=$((n+1)); done; echo started; kill $(jobs -p) 2>/dev/null; exit 0",
    );
    assert!(
        stderr(&out).contains("can't fork") || stderr(&out).contains("Resource temporarily"),
        "{out:?}"
    );
    // The host keeps spawning.
    assert!(Command::new("true").status().unwrap().success());
}

#[test]
fn cpuset_equals_affinity() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let out = ok(&run(
        &root,
        "t-cpuset",
        &["--cpuset", "0"],
        "grep Cpus_allowed_list /proc/self/status",
    ));
    assert!(out.trim().ends_with("\t0"), "{out}");
}

#[test]
fn cpu_quota_half_a_cpu() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    // Busy for 3 s of wall time; user+sys of the whole tree over real ≈ 0.5.
    let out = run(
        &root,
        "t-quota",
        &["--cpus", "0.5"],
        "time -p sh -c 'end=$(( $(date +%s) + 3 )); while [ $(date +%s) -lt $end ]; do :; done'",
    );
    assert!(out.status.success(), "{out:?}");
    let err = stderr(&out);
    let field = |name: &str| -> f64 {
        err.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {err}"))
    };
    let ratio = (field("user") + field("sys")) / field("real");
    assert!(
        (0.45..=0.55).contains(&ratio),
        "cpu ratio {ratio:.3}\n{err}"
    );
}

#[test]
fn ext4_image_root_and_readonly() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let img = root.ext4();
    let out = ok(&run_on(
        &root,
        &img,
        "t-ext4",
        &["--rootfs-type", "ext4"],
        "grep ' / ' /proc/self/mountinfo; echo data > /tmp/f; cat /tmp/f",
    ));
    assert!(out.contains("ext4") && out.contains("data"), "{out}");
    let ro = run_on(
        &root,
        &img,
        "t-ext4ro",
        &["--rootfs-type", "ext4", "--readonly"],
        "touch /x",
    );
    assert!(!ro.status.success());
    assert!(stderr(&ro).contains("Read-only"), "{ro:?}");
    assert!(leftovers(&root, "t-ext4", Some(&img)).is_empty());
}

#[test]
fn overlay_roots() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    ok(&run(
        &root,
        "t-ovl",
        &["--rootfs-type", "overlay"],
        "touch /scratch-file && ls /scratch-file",
    ));
    assert!(!root.rootfs().join("scratch-file").exists());
    let upper = root.dir.path().join("upper");
    let upper_s = upper.to_str().unwrap();
    ok(&run(
        &root,
        "t-ovl2",
        &["--rootfs-type", "overlay", "--upper", upper_s],
        "touch /kept",
    ));
    assert!(upper.join("kept").exists());
    assert!(!root.dir.path().join("upper.work").exists());
}

#[test]
fn library_run_reports_phases_in_order() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let mut config = ContainerConfig::new(
        Rootfs::Dir {
            path: root.rootfs(),
            readonly: true,
        },
        vec!["true".into()],
    );
    config.id = "t-lib".into();
    config.state_dir = root.state_dir();
    config.stdio = isolab_runtime::Stdio::Null;
    let exit = isolab_runtime::run(&config).unwrap();
    assert_eq!(exit.status, 0);
    let phases: Vec<Phase> = exit.trace.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        phases,
        [
            Phase::Cgroup,
            Phase::Clone,
            Phase::Network,
            Phase::Mounts,
            Phase::Pivot,
            Phase::Seccomp,
            Phase::Exec,
            Phase::Exit
        ]
    );
    assert!(exit.trace.windows(2).all(|w| w[0].1 <= w[1].1));
    assert!(leftovers(&root, "t-lib", None).is_empty());
}

#[test]
fn kill_9_then_gc_leaves_nothing() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let img = root.ext4();
    let mut child = Command::new(bin())
        .args([
            "run",
            "--id",
            "t-gc",
            "--rootfs-type",
            "ext4",
            "--state-dir",
        ])
        .arg(root.state_dir())
        .arg(&img)
        .args(["--", "sleep", "100"])
        .spawn()
        .unwrap();
    let state_file = root.state_dir().join("t-gc.json");
    let start = Instant::now();
    let init_pid = loop {
        let state = fs::read_to_string(&state_file).unwrap_or_default();
        let procs = fs::read_to_string("/sys/fs/cgroup/pids/isolab/rt-t-gc/cgroup.procs")
            .unwrap_or_default();
        if procs.lines().count() >= 2 {
            let v: serde_json::Value = serde_json::from_str(&state).unwrap();
            break v["init_pid"].as_u64().unwrap();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "container did not start"
        );
        sleep(Duration::from_millis(20));
    };
    child.kill().unwrap();
    child.wait().unwrap();
    let gc = Command::new(bin())
        .args(["gc", "--state-dir"])
        .arg(root.state_dir())
        .output()
        .unwrap();
    assert!(gc.status.success(), "{gc:?}");
    assert!(stdout(&gc).contains("removed t-gc"), "{gc:?}");
    // The loop device detaches asynchronously once the last mount is gone.
    let start = Instant::now();
    while !leftovers(&root, "t-gc", Some(&img)).is_empty()
        && start.elapsed() < Duration::from_secs(3)
    {
        sleep(Duration::from_millis(20));
    }
    assert_eq!(leftovers(&root, "t-gc", Some(&img)), Vec::<String>::new());
    // The init is gone (or a zombie waiting for the host's init to reap it).
    let start = Instant::now();
    let alive = || {
        fs::read_to_string(format!("/proc/{init_pid}/stat"))
            .map(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            })
            .unwrap_or(false)
    };
    while alive() && start.elapsed() < Duration::from_secs(3) {
        sleep(Duration::from_millis(20));
    }
    assert!(!alive(), "init {init_pid} still runs");
}

/// Writes `spec` output plus a rootfs link into a bundle directory.
fn bundle(root: &BusyboxRoot, id: &str) -> PathBuf {
    let dir = root.dir.path().join(format!("bundle-{id}"));
    fs::create_dir_all(&dir).unwrap();
    let out = Command::new(bin())
        .args([
            "spec", "--id", id, "--pids", "64", "--memory", "64M", "--cpus", "1",
        ])
        .arg(root.rootfs())
        .args(["--", "sh", "-c", "echo bundle-ok $(hostname) $$"])
        .output()
        .unwrap();
    let json = ok(&out);
    fs::write(dir.join("config.json"), json).unwrap();
    dir
}

#[test]
fn oci_bundle_runs_on_isolab_runc_and_crun() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let dir = bundle(&root, "t-oci");
    let ours = Command::new(bin())
        .args(["run", "--id", "t-oci", "--state-dir"])
        .arg(root.state_dir())
        .arg("--bundle")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(ok(&ours).contains("bundle-ok t-oci"), "{ours:?}");
    for engine in ["runc", "crun"] {
        let id = format!("t-oci-{engine}");
        let out = match Command::new(engine)
            .args(["run", "--bundle"])
            .arg(&dir)
            .arg(&id)
            .output()
        {
            Ok(out) => out,
            Err(e) => {
                eprintln!("skipped {engine}: cannot start it ({e})");
                continue;
            }
        };
        let err = stderr(&out);
        if !out.status.success() && (err.contains("hybrid") || err.contains("cgroup v2")) {
            eprintln!("skipped {engine}: environmental cgroup setup refused: {err}");
            let _ = Command::new(engine).args(["delete", "-f", &id]).output();
            prune_engine_parents();
            continue;
        }
        let _ = Command::new(engine).args(["delete", "-f", &id]).output();
        prune_engine_parents();
        assert!(
            stdout(&out).contains("bundle-ok t-oci"),
            "{engine}: {out:?}\n{err}"
        );
    }
    prune_engine_parents();
}

/// runc and crun create the bundle's `cgroupsPath` parents (`isolab`) in every
/// mounted hierarchy, devices and name=systemd included, and leave them when the
/// container is deleted. Remove them while empty (rmdir fails on a busy one).
fn prune_engine_parents() {
    for controller in fs::read_dir("/sys/fs/cgroup")
        .into_iter()
        .flatten()
        .flatten()
    {
        let _ = fs::remove_dir(controller.path().join("isolab"));
    }
}

#[test]
fn bridge_network_reaches_the_host_side_and_cleans_up() {
    require_root!();
    let _l = lock();
    if !Path::new("/usr/lib/cni/bridge").exists() {
        eprintln!("skipped: /usr/lib/cni/bridge missing (containernetworking-plugins)");
        return;
    }
    let root = BusyboxRoot::new();
    let veths = || {
        fs::read_dir("/sys/class/net")
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("veth"))
            .count()
    };
    let before = veths();
    // Only the gateway, i.e. the host side of our own bridge, is contacted.
    let out = ok(&run(
        &root,
        "t-br",
        &["--network", "bridge"],
        "gw=$(ip route | awk '/default/{print $3}'); ping -c1 -W2 $gw >/dev/null && echo gw-ok",
    ));
    assert!(out.contains("gw-ok"), "{out}");
    assert_eq!(veths(), before, "a veth was left behind");
    // The bridge outlives containers (like docker0); the test removes it, with its
    // NAT rule and state, so that the machine is as it was.
    let removed =
        isolab_runtime::network::remove_bridge(&isolab_runtime::network::BridgeConfig::default())
            .expect("remove the test's bridge");
    assert!(
        !Path::new("/sys/class/net/isolab0").exists(),
        "bridge left: {removed:?}"
    );
    let _ = fs::remove_dir_all("/run/isolab/cni");
    let _ = fs::remove_dir("/run/isolab");
}
