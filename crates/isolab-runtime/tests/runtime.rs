//! Privileged end-to-end tests of the runtime on a busybox root (skipped, through
//! `isolab_skip`, when not root or busybox-static is missing). They run the real
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
        return Some("the runtime's end-to-end tests need root".into());
    }
    if !Path::new("/bin/busybox").exists() {
        return Some("/bin/busybox missing (apt-get install busybox-static)".into());
    }
    None
}

macro_rules! require_root {
    () => {
        if let Some(reason) = skip_reason() {
            isolab_skip::skip(reason);
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
    let mut found: Vec<String> = cgroup_dirs(&format!("isolab/rt-{id}"))
        .into_iter()
        .map(|dir| format!("cgroup {}", dir.display()))
        .collect();
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
    config.id = "t-lib".parse().unwrap();
    config.state_dir = root.state_dir();
    config.stdio = isolab_runtime::Stdio::Null;
    let exit = isolab_runtime::run(&config).unwrap();
    assert_eq!(exit.status, 0);
    let phases: Vec<Phase> = exit.trace.iter().map(|(p, _)| *p).collect();
    assert_eq!(
        phases,
        [
            Phase::Setup,
            Phase::Cgroup,
            Phase::Plan,
            Phase::Clone,
            Phase::Network,
            Phase::Mounts,
            Phase::Pivot,
            Phase::Seccomp,
            Phase::Exec,
            Phase::Reaped,
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
    kill_9_then_gc(&root, "ext4", &img);
}

/// As above on a directory root (no loop device): the test guest of pure cgroup v2 has no
/// mkfs.ext4.
#[test]
fn kill_9_then_gc_leaves_nothing_of_a_directory_root() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    kill_9_then_gc(&root, "dir", &root.rootfs());
}

/// The `cgroup.procs` file of the container's cgroup `rel`: v1's pids hierarchy, or v2's.
fn procs_file(rel: &str) -> PathBuf {
    let base = match cgroup_version() {
        isolab_cgroups::Version::V1 => Path::new("/sys/fs/cgroup/pids").join(rel),
        isolab_cgroups::Version::V2 => Path::new("/sys/fs/cgroup").join(rel),
    };
    base.join("cgroup.procs")
}

/// Starts `sleep 100` in container t-gc on `rootfs` (of `rootfs_type`), kills the runtime with
/// SIGKILL, and checks that `gc` removes everything and the container's init is gone.
fn kill_9_then_gc(root: &BusyboxRoot, rootfs_type: &str, rootfs: &Path) {
    let image = (rootfs_type == "ext4").then_some(rootfs);
    let mut child = Command::new(bin())
        .args([
            "run",
            "--id",
            "t-gc",
            "--rootfs-type",
            rootfs_type,
            "--state-dir",
        ])
        .arg(root.state_dir())
        .arg(rootfs)
        .args(["--", "sleep", "100"])
        .spawn()
        .unwrap();
    let state_file = root.state_dir().join("t-gc.json");
    let procs_file = procs_file("isolab/rt-t-gc");
    let start = Instant::now();
    let init_pid = loop {
        let state = fs::read_to_string(&state_file).unwrap_or_default();
        let procs = fs::read_to_string(&procs_file).unwrap_or_default();
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
    while !leftovers(root, "t-gc", image).is_empty() && start.elapsed() < Duration::from_secs(3) {
        sleep(Duration::from_millis(20));
    }
    assert_eq!(leftovers(root, "t-gc", image), Vec::<String>::new());
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

/// `isolab-runtime run --bundle DIR` as container `id`, with the root's state directory.
fn run_bundle(root: &BusyboxRoot, id: &str, dir: &Path) -> Output {
    Command::new(bin())
        .args(["run", "--id", id, "--state-dir"])
        .arg(root.state_dir())
        .arg("--bundle")
        .arg(dir)
        .output()
        .unwrap()
}

/// Writes `spec` output plus a rootfs link into a bundle directory.
fn bundle(root: &BusyboxRoot, id: &str) -> PathBuf {
    let dir = root.dir.path().join(format!("bundle-{id}"));
    fs::create_dir_all(&dir).unwrap();
    // A read-only bind mount on an existing destination (runc and crun would create
    // a missing one in the shared rootfs directory).
    let share = root.dir.path().join("bundle-share");
    fs::create_dir_all(&share).unwrap();
    fs::write(share.join("marker"), "bound").unwrap();
    let bind = format!("{}:/tmp:ro", share.display());
    let out = Command::new(bin())
        .args([
            "spec", "--id", id, "--pids", "64", "--memory", "64M", "--cpus", "1", "--bind", &bind,
        ])
        .arg(root.rootfs())
        .args([
            "--",
            "sh",
            "-c",
            "echo bundle-ok $(hostname) $$ $(cat /tmp/marker); touch /tmp/x 2>/dev/null || echo bind-ro",
        ])
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
    let ours = run_bundle(&root, "t-oci", &dir);
    let printed = ok(&ours);
    assert!(printed.contains("bundle-ok t-oci"), "{ours:?}");
    assert!(
        printed.contains("bound") && printed.contains("bind-ro"),
        "{printed}"
    );
    for engine in ["runc", "crun"] {
        let id = format!("t-oci-{engine}");
        let run = || {
            Command::new(engine)
                .args(["run", "--bundle"])
                .arg(&dir)
                .arg(&id)
                .output()
        };
        let mut out = match run() {
            Ok(out) => out,
            Err(e) => {
                isolab_skip::skip(format!(
                    "{engine} cannot be started ({e}): apt-get install {engine}"
                ));
                continue;
            }
        };
        if !out.status.success() && stderr(&out).contains("hybrid mode") {
            // crun refuses a hybrid host while cgroup2 lists a controller: each listed
            // one in a v1 hierarchy for the run (as the engines' hybrid fix does),
            // given back to cgroup2 after it.
            let _ = Command::new(engine).args(["delete", "-f", &id]).output();
            let unified = Path::new("/sys/fs/cgroup/unified");
            let listed = isolab_cgroups::cgroup2_listed(unified);
            let borrowed = match isolab_cgroups::borrow_listed(Path::new("/sys/fs/cgroup"), unified)
            {
                Ok(borrowed) => borrowed,
                Err(e) => {
                    isolab_skip::skip(format!(
                        "{engine}: cannot mount a v1 hierarchy for cgroup2's controllers: {e}"
                    ));
                    continue;
                }
            };
            out = run().expect("started once already");
            let _ = Command::new(engine).args(["delete", "-f", &id]).output();
            prune_engine_parents();
            drop(borrowed);
            assert_eq!(
                isolab_cgroups::cgroup2_listed(unified),
                listed,
                "the controllers are back in cgroup2"
            );
        }
        let err = stderr(&out);
        if !out.status.success() && (err.contains("hybrid") || err.contains("cgroup v2")) {
            isolab_skip::skip(format!(
                "{engine} refused this host's cgroup setup: {}",
                err.trim()
            ));
            let _ = Command::new(engine).args(["delete", "-f", &id]).output();
            prune_engine_parents();
            continue;
        }
        let _ = Command::new(engine).args(["delete", "-f", &id]).output();
        prune_engine_parents();
        assert!(
            ["bundle-ok t-oci", "bound", "bind-ro"]
                .iter()
                .all(|w| stdout(&out).contains(w)),
            "{engine}: {out:?}\n{err}"
        );
    }
    prune_engine_parents();
}

/// A bundle's `cgroup` mount shows the container its own cgroup, with and without a
/// cgroup namespace of its own (Podman's default on cgroup v1 is the host's): the
/// memory limit of the bundle is what the container reads at /sys/fs/cgroup/memory.
#[test]
fn oci_cgroup_mount_shows_the_container_its_own_cgroup() {
    require_root!();
    // Where the container reads its memory limit under its cgroup mount.
    let version = cgroup_version();
    let _l = lock();
    let root = BusyboxRoot::new();
    for (id, own_namespace) in [("t-cgns", true), ("t-cghost", false)] {
        // v1: the container's own cgroups, bound per controller, either way. v2: the root of
        // the cgroup namespace, which is the host's without one of its own (as runc and crun:
        // a cgroup2 mount shows the mounter's namespace).
        let limit_file = match (version, own_namespace) {
            (isolab_cgroups::Version::V1, _) => {
                "/sys/fs/cgroup/memory/memory.limit_in_bytes".to_string()
            }
            (isolab_cgroups::Version::V2, true) => "/sys/fs/cgroup/memory.max".to_string(),
            (isolab_cgroups::Version::V2, false) => {
                format!("/sys/fs/cgroup/isolab/rt-{id}/memory.max")
            }
        };
        let dir_of_limit = Path::new(&limit_file).parent().unwrap().display();
        let script = format!("cat {limit_file}; touch {dir_of_limit}/x || echo ro");
        let dir = cgroup_bundle(&root, id, &script, |spec| {
            if !own_namespace {
                spec["linux"]["namespaces"]
                    .as_array_mut()
                    .unwrap()
                    .retain(|n| n["type"] != "cgroup");
            }
        });
        let out = run_bundle(&root, id, &dir);
        let printed = ok(&out);
        assert_eq!(
            printed.split_whitespace().collect::<Vec<_>>(),
            [(64u64 << 20).to_string().as_str(), "ro"],
            "{id}: {out:?}"
        );
        for d in cgroup_dirs(&format!("isolab/rt-{id}")) {
            assert!(!d.exists(), "{} left", d.display());
        }
    }
}

/// The host's cgroup files for a container's limits, as the container sees them
/// at /sys/fs/cgroup (with its own cgroup namespace).
struct CgroupFiles {
    hierarchy: isolab_cgroups::Hierarchy,
    v2: bool,
}

impl CgroupFiles {
    fn detect() -> CgroupFiles {
        let hierarchy = isolab_cgroups::Hierarchy::detect().unwrap();
        let v2 = hierarchy.version() == isolab_cgroups::Version::V2;
        CgroupFiles { hierarchy, v2 }
    }

    /// `file` of `controller` inside the container: `/sys/fs/cgroup/<file>` on v2,
    /// `/sys/fs/cgroup/<controller>/<file>` on v1.
    fn inside(&self, controller: &str, file: &str) -> String {
        if self.v2 {
            format!("/sys/fs/cgroup/{file}")
        } else {
            format!("/sys/fs/cgroup/{controller}/{file}")
        }
    }

    /// Whether the cgroups isolab makes get a hugetlb controller.
    fn has_hugetlb(&self) -> bool {
        if self.v2 {
            let root = self.hierarchy.unified().unwrap();
            fs::read_to_string(root.join("cgroup.controllers"))
                .is_ok_and(|c| c.split_whitespace().any(|w| w == "hugetlb"))
        } else {
            self.hierarchy
                .mount(isolab_cgroups::Controller::Hugetlb)
                .is_some()
        }
    }

    /// Whether `rel` is gone from every hierarchy.
    fn gone(&self, rel: &str) -> bool {
        isolab_cgroups::Cgroup::open(&self.hierarchy, Path::new(rel)).is_err()
    }
}

/// A bundle of `id` ([`bundle`]) whose process runs `script` with the cgroup file
/// system mounted read-only at /sys/fs/cgroup, its spec changed by `edit` last.
fn cgroup_bundle(
    root: &BusyboxRoot,
    id: &str,
    script: &str,
    edit: impl FnOnce(&mut serde_json::Value),
) -> PathBuf {
    let dir = bundle(root, id);
    let file = dir.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    spec["process"]["args"] = serde_json::json!(["sh", "-c", script]);
    spec["mounts"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({
            "destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup",
            "options": ["nosuid", "noexec", "nodev", "relatime", "ro"]
        }));
    edit(&mut spec);
    fs::write(&file, spec.to_string()).unwrap();
    dir
}

/// A [`cgroup_bundle`] whose `linux.resources` is extended by `resources` (merged
/// key by key).
fn resources_bundle(
    root: &BusyboxRoot,
    id: &str,
    script: &str,
    resources: serde_json::Value,
) -> PathBuf {
    cgroup_bundle(root, id, script, |spec| {
        for (key, value) in resources.as_object().unwrap() {
            let section = &mut spec["linux"]["resources"][key];
            match (section.as_object_mut(), value.as_object()) {
                (Some(section), Some(more)) => section.extend(more.clone()),
                _ => *section = value.clone(),
            }
        }
    })
}

/// `run --bundle DIR --report FILE`: the output and the report.
fn run_bundle_reported(
    root: &BusyboxRoot,
    id: &str,
    dir: &Path,
) -> (Output, isolab_runtime::Report) {
    let report = root.dir.path().join(format!("{id}.report.json"));
    let out = Command::new(bin())
        .args(["run", "--id", id, "--state-dir"])
        .arg(root.state_dir())
        .arg("--report")
        .arg(&report)
        .arg("--bundle")
        .arg(dir)
        .output()
        .unwrap();
    (out, isolab_runtime::Report::read(&report).unwrap())
}

/// OCI's cpu shares and memory reservation are applied (`docker run --cpu-shares 512
/// --memory-reservation 32m` used to change nothing): the container reads them from its
/// own cgroup, and the report records them. Huge page limits apply where the host has a
/// hugetlb controller and are refused where not; unified files apply on cgroup v2 and
/// are refused on v1; swappiness, kernelTCP and disableOOMKiller the other way round.
/// The test checks the files of the host's cgroup version, so it
/// runs for real on v1 and on v2 hosts alike.
#[test]
fn oci_shares_reservation_hugepages_and_unified_are_applied_or_refused() {
    if let Some(reason) = skip_reason() {
        isolab_skip::skip(format!(
            "{reason}: the runtime makes cgroups and namespaces"
        ));
        return;
    }
    let _l = lock();
    let root = BusyboxRoot::new();
    let cg = CgroupFiles::detect();
    let reservation = 32u64 << 20;

    // Shares and reservation, read inside the container and in the report.
    let id = "t-shares";
    let (weight_file, weight) = if cg.v2 {
        ("cpu.weight", "59")
    } else {
        ("cpu.shares", "512")
    };
    let low_file = if cg.v2 {
        "memory.low"
    } else {
        "memory.soft_limit_in_bytes"
    };
    let script = format!(
        "cat {} {}",
        cg.inside("cpu", weight_file),
        cg.inside("memory", low_file)
    );
    let dir = resources_bundle(
        &root,
        id,
        &script,
        serde_json::json!({"cpu": {"shares": 512}, "memory": {"reservation": reservation}}),
    );
    let (out, report) = run_bundle_reported(&root, id, &dir);
    let printed = ok(&out);
    eprintln!("{id}: {script} -> {printed:?}");
    assert_eq!(
        printed.split_whitespace().collect::<Vec<_>>(),
        [weight, &reservation.to_string()],
        "{out:?}"
    );
    let expected = if cg.v2 {
        isolab_cgroups::CpuWeight::Weight(59)
    } else {
        isolab_cgroups::CpuWeight::Shares(512)
    };
    assert_eq!(report.limits.cpu_weight, Some(expected), "{report:?}");
    assert_eq!(
        report.limits.memory_reservation,
        Some(isolab_cgroups::Bytes(reservation))
    );
    let json = fs::read_to_string(root.dir.path().join(format!("{id}.report.json"))).unwrap();
    eprintln!(
        "{id}: report limits {}",
        serde_json::from_str::<serde_json::Value>(&json).unwrap()["limits"]
    );
    assert!(leftovers(&root, id, None).is_empty() && cg.gone(&format!("isolab/rt-{id}")));

    // Unified files: applied on v2, refused on v1 before the container starts.
    let id = "t-unified";
    let dir = resources_bundle(
        &root,
        id,
        &format!("cat {}", cg.inside("memory", "memory.high")),
        serde_json::json!({"unified": {"memory.high": "48M"}}),
    );
    let (out, report) = run_bundle_reported(&root, id, &dir);
    let refusal = ["memory.high", "cgroup v1 host"];
    applied_or_refused(id, &out, cg.v2, "50331648", &refusal);
    if cg.v2 {
        assert_eq!(
            report.limits.unified.get("memory.high").map(String::as_str),
            Some("50331648")
        );
    } else {
        assert!(report.error.is_some_and(|e| e.contains("unified")));
    }
    assert!(leftovers(&root, id, None).is_empty() && cg.gone(&format!("isolab/rt-{id}")));

    // Swappiness, the TCP buffer limit and the OOM killer switch: applied on v1 (read
    // inside the container and in the report), refused by name on v2.
    let id = "t-v1mem";
    let script = if cg.v2 {
        "true".to_owned()
    } else {
        format!(
            "cat {} {}; grep oom_kill_disable {}",
            cg.inside("memory", "memory.swappiness"),
            cg.inside("memory", "memory.kmem.tcp.limit_in_bytes"),
            cg.inside("memory", "memory.oom_control")
        )
    };
    let dir = resources_bundle(
        &root,
        id,
        &script,
        serde_json::json!({"memory": {"swappiness": 7, "kernelTCP": 4 << 20, "disableOOMKiller": true}}),
    );
    let (out, report) = run_bundle_reported(&root, id, &dir);
    if cg.v2 {
        applied_or_refused(id, &out, false, "", &["memory.swappiness", "cgroup v2"]);
    } else {
        let printed = ok(&out);
        eprintln!("{id}: {script} -> {printed:?}");
        assert_eq!(
            printed.split_whitespace().collect::<Vec<_>>(),
            ["7", &(4u64 << 20).to_string(), "oom_kill_disable", "1"],
            "{out:?}"
        );
        assert_eq!(report.limits.memory_swappiness, Some(7));
        assert_eq!(
            report.limits.memory_tcp_max,
            Some(isolab_cgroups::Bytes::mib(4))
        );
        assert!(report.limits.oom_kill_disabled, "{report:?}");
    }
    assert!(leftovers(&root, id, None).is_empty() && cg.gone(&format!("isolab/rt-{id}")));

    // Huge page limits: applied with a hugetlb controller and 2 MB pages, else refused.
    let id = "t-hugetlb";
    let limit_file = if cg.v2 {
        "hugetlb.2MB.max"
    } else {
        "hugetlb.2MB.limit_in_bytes"
    };
    let dir = resources_bundle(
        &root,
        id,
        &format!("cat {}", cg.inside("hugetlb", limit_file)),
        serde_json::json!({"hugepageLimits": [{"pageSize": "2MB", "limit": 8 << 20}]}),
    );
    let (out, report) = run_bundle_reported(&root, id, &dir);
    let two_mb = Path::new("/sys/kernel/mm/hugepages/hugepages-2048kB").is_dir();
    let applied = cg.has_hugetlb() && two_mb;
    let limit = (8u64 << 20).to_string();
    applied_or_refused(id, &out, applied, &limit, &["hugetlb", "huge page"]);
    assert_eq!(
        report.limits.hugetlb.len(),
        usize::from(applied),
        "{report:?}"
    );
    assert!(leftovers(&root, id, None).is_empty() && cg.gone(&format!("isolab/rt-{id}")));
}

/// When `applied`, that the container of `id` ran and printed `printed`; else that the
/// runtime refused to start it (status 125) with an error naming each of `words`.
fn applied_or_refused(id: &str, out: &Output, applied: bool, printed: &str, words: &[&str]) {
    if applied {
        assert_eq!(ok(out).trim(), printed, "{id}: {out:?}");
        eprintln!("{id}: applied, the container read {printed}");
        return;
    }
    let err = stderr(out);
    eprintln!("{id}: refused: {err}");
    assert_eq!(out.status.code(), Some(125), "{id}: {out:?}");
    assert!(words.iter().all(|w| err.contains(w)), "{id}: {err}");
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
        isolab_skip::skip(
            "/usr/lib/cni/bridge missing (apt-get install containernetworking-plugins)",
        );
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

/// Cgroup directories of `rel` (relative to the mounts) that exist: under a pure v2 root, or
/// under any v1 controller mount (or the hybrid cgroup2 mount).
fn cgroup_dirs(rel: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    std::iter::once(root.join(rel))
        .chain(
            fs::read_dir(root)
                .unwrap()
                .flatten()
                .map(|e| e.path().join(rel)),
        )
        .filter(|p| p.is_dir())
        .collect()
}

/// The cgroup version of this host (v1 includes hybrid).
fn cgroup_version() -> isolab_cgroups::Version {
    isolab_cgroups::Hierarchy::detect()
        .expect("a cgroup hierarchy")
        .version()
}

/// Mounts of the host whose line mentions `needle`.
fn host_mounts_of(needle: &Path) -> Vec<String> {
    fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(needle.to_str().unwrap()))
        .map(str::to_owned)
        .collect()
}

#[test]
fn bind_mounts_read_write_read_only_and_created() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let share = root.dir.path().join("share");
    fs::create_dir(&share).unwrap();
    fs::write(share.join("in.txt"), "from-host\n").unwrap();
    let rw = format!("{}:/data", share.display());
    let ro = format!("{}:/ro/deep:ro", share.display());
    let file = format!("{}:/etc/in.txt:ro", share.join("in.txt").display());
    // An overlay root: the missing destinations are created in its throw-away upper.
    let out = ok(&run(
        &root,
        "t-bind",
        &[
            "--rootfs-type",
            "overlay",
            "--bind",
            &rw,
            "--bind",
            &ro,
            "--bind",
            &file,
        ],
        "echo written-inside > /data/out.txt; cat /etc/in.txt; \
         if touch /ro/deep/x 2>/tmp/err; then echo ro-writable; else cat /tmp/err; fi; \
         if echo x > /etc/in.txt 2>/tmp/err; then echo file-writable; else cat /tmp/err; fi; \
         ls /ro/deep",
    ));
    assert_eq!(
        fs::read_to_string(share.join("out.txt")).unwrap(),
        "written-inside\n"
    );
    assert!(out.contains("from-host"), "{out}");
    assert!(
        !out.contains("ro-writable") && !out.contains("file-writable"),
        "{out}"
    );
    assert_eq!(out.matches("Read-only file system").count(), 2, "{out}");
    assert!(
        out.contains("out.txt"),
        "the ro view shows the same directory: {out}"
    );
    assert!(!share.join("x").exists());
    assert_eq!(
        fs::read_to_string(share.join("in.txt")).unwrap(),
        "from-host\n"
    );
    for created in ["data", "ro", "etc/in.txt"] {
        assert!(
            !root.rootfs().join(created).exists(),
            "{created} reached the lower directory"
        );
    }
    assert!(host_mounts_of(&share).is_empty(), "a bind mount leaked");

    // A read-only root cannot get a missing destination: a clear error, nothing left.
    let missing = format!("{}:/nope", share.display());
    let out = run(
        &root,
        "t-bind-ro",
        &["--readonly", "--bind", &missing],
        "true",
    );
    assert_eq!(out.status.code(), Some(125), "{out:?}");
    let err = stderr(&out);
    assert!(
        err.contains("/nope") && err.contains("create it in the image"),
        "{err}"
    );
    assert!(!root.rootfs().join("nope").exists());
    // An existing destination on a read-only root is fine.
    let tmp = format!("{}:/tmp", share.display());
    let out = ok(&run(
        &root,
        "t-bind-ro2",
        &["--readonly", "--bind", &tmp],
        "cat /tmp/in.txt; touch /tmp/new && echo rw-bind-on-ro-root",
    ));
    assert!(
        out.contains("from-host") && out.contains("rw-bind-on-ro-root"),
        "{out}"
    );
    assert!(share.join("new").exists());
    // A missing source is refused before anything is created.
    let out = run(
        &root,
        "t-bind-nosrc",
        &["--bind", "/no/such/src:/x"],
        "true",
    );
    assert_eq!(out.status.code(), Some(125));
    assert!(stderr(&out).contains("/no/such/src"), "{out:?}");
}

#[test]
fn device_allowlist_denies_block_devices() {
    require_root!();
    let _l = lock();
    if !Path::new("/sys/fs/cgroup/devices/devices.list").exists() {
        isolab_skip::skip("no cgroup v1 devices hierarchy at /sys/fs/cgroup/devices (the v2 device rules are not enforced yet)");
        return;
    }
    let root = BusyboxRoot::new();
    let script = "mknod /tmp/sda b 8 0 && echo mknod-ok; \
                  if head -c1 /tmp/sda >/dev/null 2>/tmp/err; then echo opened; else cat /tmp/err; fi; \
                  echo x > /dev/null && echo null-ok; head -c4 /dev/zero | wc -c; \
                  stat -c 'mode-%a' /dev/null";
    let out = ok(&run(&root, "t-dev", &[], script));
    // CAP_MKNOD is in Docker's set, so mknod works, but opening is denied.
    assert!(out.contains("mknod-ok"), "{out}");
    assert!(out.contains("Operation not permitted"), "{out}");
    assert!(!out.contains("opened"), "{out}");
    assert!(out.contains("null-ok") && out.contains('4'), "{out}");
    // The mode asked for, not the umask's: any user may write /dev/null.
    assert!(out.contains("mode-666"), "{out}");
    // Privileged: the allowlist is "everything", and the same open reaches the
    // driver (no disk 8:0 here: ENXIO), which shows that the cgroup made the EPERM.
    let out = ok(&run(&root, "t-dev-priv", &["--privileged"], script));
    assert!(!out.contains("Operation not permitted"), "{out}");
    assert!(
        out.contains("No such device") || out.contains("opened"),
        "{out}"
    );
}

/// Removes the test's own parent cgroup on drop.
struct ParentCgroup(Option<isolab_cgroups::Cgroup>);

impl Drop for ParentCgroup {
    fn drop(&mut self) {
        if let Some(cg) = self.0.take() {
            let _ = cg.remove();
        }
    }
}

#[test]
fn cgroup_parent_existing_with_cpuset_and_missing() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let h = isolab_cgroups::Hierarchy::detect().unwrap();
    let parent_rel = format!("isolab/test-parent-{}", std::process::id());
    let parent = isolab_cgroups::Cgroup::create(&h, Path::new(&parent_rel)).unwrap();
    let guard = ParentCgroup(Some(parent));
    let limits = isolab_cgroups::Limits {
        cpuset: Some("0".parse().unwrap()),
        cpu: Some(
            isolab_cgroups::CpuQuota::from_cpus(0.5, isolab_cgroups::CpuQuota::DEFAULT_PERIOD)
                .unwrap(),
        ),
        ..Default::default()
    };
    guard.0.as_ref().unwrap().apply(&limits).unwrap();
    let report = root.dir.path().join("report.json");
    let report_s = report.to_str().unwrap();
    let out = ok(&run(
        &root,
        "t-cgp",
        &[
            "--cgroup-parent",
            &parent_rel,
            "--cpus",
            "0.25",
            "--report",
            report_s,
        ],
        "grep Cpus_allowed_list /proc/self/status; cat /proc/self/cgroup",
    ));
    assert!(out.lines().next().unwrap().ends_with("\t0"), "{out}");
    let r = isolab_runtime::Report::read(&report).unwrap();
    assert_eq!(r.status, Some(0));
    assert_eq!(r.cgroup, PathBuf::from(format!("{parent_rel}/rt-t-cgp")));
    match h.version() {
        isolab_cgroups::Version::V1 => assert_eq!(
            r.limits.cpuset,
            Some("0".parse().unwrap()),
            "copied from the parent"
        ),
        // v2 leaves the child's cpuset.cpus empty: it inherits the parent's (the affinity
        // above shows it took effect).
        isolab_cgroups::Version::V2 => assert_eq!(r.limits.cpuset, None),
    }
    assert_eq!(
        r.limits.cpu.map(|q| q.quota),
        Some(Duration::from_micros(25_000))
    );
    // The container's cgroup is gone everywhere; the test's parent stays, except in
    // the devices hierarchy, where the runtime created it and so removed it.
    assert!(cgroup_dirs(&format!("{parent_rel}/rt-t-cgp")).is_empty());
    match h.version() {
        isolab_cgroups::Version::V1 => {
            assert!(Path::new("/sys/fs/cgroup/cpu").join(&parent_rel).is_dir());
            assert!(!Path::new("/sys/fs/cgroup/devices")
                .join(&parent_rel)
                .exists());
        }
        // One hierarchy, and devices are a BPF program, not a cgroup directory.
        isolab_cgroups::Version::V2 => {
            assert!(Path::new("/sys/fs/cgroup").join(&parent_rel).is_dir());
        }
    }
    drop(guard);
    assert!(cgroup_dirs(&parent_rel).is_empty());

    // A parent that does not exist yet is created, then removed with the container.
    let missing = format!("isolab/test-missing-{}", std::process::id());
    let nested = format!("{missing}/deeper");
    let out = ok(&run(
        &root,
        "t-cgm",
        &["--cgroup-parent", &nested],
        "cat /proc/self/cgroup",
    ));
    assert!(!out.is_empty());
    assert!(
        cgroup_dirs(&missing).is_empty(),
        "{:?}",
        cgroup_dirs(&missing)
    );
}

#[test]
fn report_file_has_status_limits_and_stats() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let report = root.dir.path().join("out/report.json");
    fs::create_dir_all(report.parent().unwrap()).unwrap();
    let out = Command::new(bin())
        .args(["run", "--id", "t-rep", "--cpus", "0.5", "--report"])
        .arg(&report)
        .arg("--state-dir")
        .arg(root.state_dir())
        .arg(root.rootfs())
        .args([
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
        ])
        .output()
        .unwrap();
    ok(&out);
    assert!(leftovers(&root, "t-rep", None).is_empty());
    let r = isolab_runtime::Report::read(&report).unwrap();
    assert_eq!(r.status, Some(0));
    assert_eq!(r.error, None);
    assert_eq!(r.id, "t-rep");
    assert_eq!(
        r.limits.cpu,
        Some(
            isolab_cgroups::CpuQuota::from_cpus(0.5, isolab_cgroups::CpuQuota::DEFAULT_PERIOD)
                .unwrap()
        )
    );
    let stats = r.stats.expect("stats");
    assert!(
        stats.cpu_usage.is_some_and(|d| d > Duration::ZERO),
        "{stats:?}"
    );
    // The CLI's trace starts at its own start: setup (command line, cgroup mounts)
    // comes first, then the container's phases.
    assert_eq!(r.trace.first().map(|t| t.0), Some(Phase::Setup));
    assert_eq!(r.trace.get(1).map(|t| t.0), Some(Phase::Cgroup));
    assert_eq!(r.trace.last().map(|t| t.0), Some(Phase::Exit));
    let json: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&report).unwrap()).unwrap();
    assert!(json["trace"]["exec_us"].as_u64().is_some(), "{json}");
    assert!(!report.with_extension("json.tmp").exists());

    // The runtime fails: status null, the message in "error".
    let failed = Command::new(bin())
        .args(["run", "--id", "t-rep2", "--report"])
        .arg(&report)
        .arg("--state-dir")
        .arg(root.state_dir())
        .arg(root.dir.path().join("no-such-root"))
        .args(["--", "true"])
        .output()
        .unwrap();
    assert_eq!(failed.status.code(), Some(125));
    let r = isolab_runtime::Report::read(&report).unwrap();
    assert_eq!(r.status, None);
    assert!(
        r.error
            .as_deref()
            .is_some_and(|e| e.contains("no-such-root")),
        "{r:?}"
    );
    assert_eq!(r.cgroup, PathBuf::from("isolab/rt-t-rep2"));
}

/// The limits are in the container's cgroup files while it runs (read inside the container
/// through a read-only bind of the host's cgroupfs), and its init was born in that cgroup
/// (`CLONE_INTO_CGROUP` on v2): v1's per-controller files or v2's `cpu.max`,
/// `cpuset.cpus.effective`, `memory.max`, `pids.max` and `io.max`.
#[test]
fn limits_are_in_the_cgroup_files_while_the_container_runs() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let id = "t-lim";
    let rel = format!("isolab/rt-{id}");
    let dev = {
        use std::os::unix::fs::MetadataExt;
        let d = fs::metadata(root.rootfs()).unwrap().dev();
        format!("{}:{}", libc::major(d), libc::minor(d))
    };
    let files: Vec<(String, String)> = match cgroup_version() {
        isolab_cgroups::Version::V1 => vec![
            (format!("cpu/{rel}/cpu.cfs_quota_us"), "50000".into()),
            (format!("cpu/{rel}/cpu.cfs_period_us"), "100000".into()),
            (format!("cpuset/{rel}/cpuset.cpus"), "0".into()),
            (
                format!("memory/{rel}/memory.limit_in_bytes"),
                "67108864".into(),
            ),
            (format!("pids/{rel}/pids.max"), "32".into()),
            (
                format!("blkio/{rel}/blkio.throttle.read_bps_device"),
                format!("{dev} 10485760"),
            ),
        ],
        isolab_cgroups::Version::V2 => vec![
            (format!("{rel}/cpu.max"), "50000 100000".into()),
            (format!("{rel}/cpuset.cpus.effective"), "0".into()),
            (format!("{rel}/memory.max"), "67108864".into()),
            (format!("{rel}/pids.max"), "32".into()),
            (
                format!("{rel}/io.max"),
                format!("{dev} rbps=10485760 wbps=max riops=max wiops=max"),
            ),
        ],
    };
    let script: String = files
        .iter()
        .map(|(f, _)| format!("echo \"$(cat /host-cgroup/{f})\"; "))
        .chain(std::iter::once("cat /proc/1/cgroup".to_string()))
        .collect();
    let out = ok(&run(
        &root,
        id,
        &[
            "--cpus",
            "0.5",
            "--cpuset",
            "0",
            "--memory",
            "64M",
            "--pids",
            "32",
            "--io-read-bps",
            "10M",
            "--bind",
            "/sys/fs/cgroup:/host-cgroup:ro",
        ],
        &script,
    ));
    let lines: Vec<&str> = out.lines().collect();
    for (i, (file, want)) in files.iter().enumerate() {
        assert_eq!(lines.get(i).copied(), Some(want.as_str()), "{file}: {out}");
    }
    // The container's init sits in its own cgroup (the root of its cgroup namespace, or
    // the container's path without one).
    let own: Vec<&str> = lines[files.len()..].to_vec();
    assert!(
        own.iter()
            .any(|l| l.starts_with("0::/") && (l.ends_with("::/") || l.ends_with(&rel))),
        "{out}"
    );
}

#[test]
fn user_namespace_maps_root_to_100000() {
    require_root!();
    let _l = lock();
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let root = BusyboxRoot::new();
    // Container root is host uid 100000: it must be able to reach the root and the
    // shared directory.
    fs::set_permissions(root.dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let share = root.dir.path().join("share");
    fs::create_dir(&share).unwrap();
    fs::set_permissions(&share, fs::Permissions::from_mode(0o777)).unwrap();
    let bind = format!("{}:/tmp", share.display());
    let out = ok(&run(
        &root,
        "t-userns",
        &["--userns", "--bind", &bind],
        "cat /proc/self/uid_map /proc/self/gid_map; id -u; touch /tmp/made-inside",
    ));
    let fields: Vec<Vec<&str>> = out
        .lines()
        .take(2)
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(
        fields,
        [["0", "100000", "65536"], ["0", "100000", "65536"]],
        "{out}"
    );
    assert_eq!(out.lines().nth(2), Some("0"), "{out}");
    let meta = fs::metadata(share.join("made-inside")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (100_000, 100_000));
}

/// Removes the default bridge (and its NAT and portmap chains) on drop.
struct BridgeGuard;

impl Drop for BridgeGuard {
    fn drop(&mut self) {
        let _ = isolab_runtime::network::remove_bridge(
            &isolab_runtime::network::BridgeConfig::default(),
        );
        let _ = fs::remove_dir_all("/run/isolab/cni");
        let _ = fs::remove_dir("/run/isolab");
    }
}

/// Kills and reaps a spawned runtime on drop (a failed assertion must not leave it).
struct ChildGuard(Option<std::process::Child>);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[test]
fn published_port_reaches_the_container_from_localhost() {
    require_root!();
    let _l = lock();
    if !Path::new("/usr/lib/cni/portmap").exists() {
        isolab_skip::skip(
            "/usr/lib/cni/portmap missing (apt-get install containernetworking-plugins)",
        );
        return;
    }
    use std::io::Read;
    use std::net::{SocketAddr, TcpStream};
    let root = BusyboxRoot::new();
    let _bridge = BridgeGuard;
    let child = Command::new(bin())
        .args([
            "run",
            "--id",
            "t-pub",
            "--network",
            "bridge",
            "--publish",
            "18090:8080",
            "--state-dir",
        ])
        .arg(root.state_dir())
        .arg(root.rootfs())
        .args([
            "--",
            "sh",
            "-c",
            "echo hello-from-container | nc -l -p 8080",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut guard = ChildGuard(Some(child));
    // 127.0.0.1 works because portmap (snat) sets route_localnet on the bridge and
    // masquerades hairpin traffic; the DNAT target is our own container.
    let addr: SocketAddr = "127.0.0.1:18090".parse().unwrap();
    let start = Instant::now();
    let mut got = String::new();
    while start.elapsed() < Duration::from_secs(10) {
        if let Ok(mut s) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            got.clear();
            let _ = s.read_to_string(&mut got);
            if got.contains("hello-from-container") {
                break;
            }
        }
        sleep(Duration::from_millis(100));
    }
    let child = guard.0.take().unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(got.contains("hello-from-container"), "got {got:?}; {out:?}");
    assert!(out.status.success(), "{out:?}");
    assert!(leftovers(&root, "t-pub", None).is_empty());
}

/// `isolab-runtime --root STATE ARGS…` for the OCI operations.
fn oci(root: &BusyboxRoot, args: &[&str]) -> Output {
    Command::new(bin())
        .arg("--root")
        .arg(root.state_dir())
        .args(args)
        .output()
        .unwrap()
}

/// The `status` and `pid` fields of `state ID`.
fn oci_status(root: &BusyboxRoot, id: &str) -> (String, u64) {
    let out = oci(root, &["state", id]);
    let v: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    assert_eq!(v["id"], id);
    assert_eq!(v["ociVersion"], "1.0.2");
    (
        v["status"].as_str().unwrap().to_owned(),
        v["pid"].as_u64().unwrap(),
    )
}

/// A bundle running `script` (with its output in `log`), created with `--pid-file`;
/// returns the pid file's pid.
fn oci_create(root: &BusyboxRoot, id: &str, script: &str, log: &Path) -> u64 {
    oci_create_in(root, &bundle(root, id), id, script, log)
}

/// [`oci_create`] of the bundle in `dir`.
fn oci_create_in(root: &BusyboxRoot, dir: &Path, id: &str, script: &str, log: &Path) -> u64 {
    let file = dir.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    spec["process"]["args"] = serde_json::json!(["sh", "-c", script]);
    fs::write(&file, spec.to_string()).unwrap();
    let pid_file = dir.join("pid");
    // The container keeps create's stdout and stderr: files, so that nobody waits for
    // their EOF.
    let err = log.with_extension("err");
    let status = Command::new(bin())
        .arg("--root")
        .arg(root.state_dir())
        .args(["create", "--bundle"])
        .arg(dir)
        .arg("--pid-file")
        .arg(&pid_file)
        .arg(id)
        .stdout(fs::File::create(log).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .status()
        .unwrap();
    assert!(
        status.success(),
        "create: {}",
        fs::read_to_string(&err).unwrap_or_default()
    );
    fs::read_to_string(&pid_file).unwrap().parse().unwrap()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "timed out: {what}"
        );
        sleep(Duration::from_millis(20));
    }
}

#[test]
fn oci_operations_create_start_kill_delete() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let log = root.dir.path().join("t-life.log");
    let script = "trap 'echo got-term; exit 3' TERM; echo pid=$$; while :; do sleep 0.05; done";
    let pid = oci_create(&root, "t-life", script, &log);
    assert_eq!(oci_status(&root, "t-life"), ("created".into(), pid));
    // Created: set up, in its own pid namespace, nothing executed yet.
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    assert!(nspid.ends_with("\t1"), "{nspid}");
    assert_eq!(fs::read_to_string(&log).unwrap(), "");
    let listed = ok(&oci(&root, &["list", "--format", "json"]));
    assert!(listed.contains("\"t-life\""), "{listed}");

    ok(&oci(&root, &["start", "t-life"]));
    wait_for("the command's output", || {
        fs::read_to_string(&log).unwrap().contains("pid=1")
    });
    assert_eq!(oci_status(&root, "t-life"), ("running".into(), pid));
    let ps = ok(&oci(&root, &["ps", "--format", "json", "t-life"]));
    assert!(ps.contains(&pid.to_string()), "{ps}");
    // A second start is refused; so is deleting a running container.
    assert!(!oci(&root, &["start", "t-life"]).status.success());
    let refused = oci(&root, &["delete", "t-life"]);
    assert!(stderr(&refused).contains("is running"), "{refused:?}");

    ok(&oci(&root, &["kill", "t-life", "TERM"]));
    wait_for("stopped", || oci_status(&root, "t-life").0 == "stopped");
    assert!(fs::read_to_string(&log).unwrap().contains("got-term"));
    assert!(!oci(&root, &["kill", "t-life", "KILL"]).status.success());
    ok(&oci(&root, &["delete", "t-life"]));
    let problems = leftovers(&root, "t-life", None);
    assert!(problems.is_empty(), "left behind: {problems:?}");
    let gone = oci(&root, &["state", "t-life"]);
    assert!(stderr(&gone).contains("does not exist"), "{gone:?}");

    // delete --force of a running container, after an exec into it.
    oci_create(&root, "t-force", "sleep 100", &log);
    ok(&oci(&root, &["start", "t-force"]));
    let out = oci(
        &root,
        &[
            "exec",
            "t-force",
            "sh",
            "-c",
            "echo exec-pid=$$ $(hostname); exit 7",
        ],
    );
    assert_eq!(out.status.code(), Some(7), "{out:?}");
    assert_eq!(stdout(&out), "exec-pid=2 t-force\n");
    let process = root.dir.path().join("process.json");
    fs::write(
        &process,
        r#"{"args": ["sh", "-c", "sleep 30"], "cwd": "/", "user": {"uid": 1000, "gid": 1000}}"#,
    )
    .unwrap();
    let pid_file = root.dir.path().join("exec.pid");
    let out = Command::new(bin())
        .arg("--root")
        .arg(root.state_dir())
        .args(["exec", "--detach", "--process"])
        .arg(&process)
        .arg("--pid-file")
        .arg(&pid_file)
        .arg("t-force")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(out.success());
    let exec_pid: u32 = fs::read_to_string(&pid_file).unwrap().parse().unwrap();
    let status = fs::read_to_string(format!("/proc/{exec_pid}/status")).unwrap();
    assert!(status.contains("Uid:\t1000\t"), "{status}");
    let ps = ok(&oci(&root, &["ps", "--format", "json", "t-force"]));
    assert!(ps.contains(&exec_pid.to_string()), "{ps}");
    ok(&oci(&root, &["delete", "--force", "t-force"]));
    assert!(leftovers(&root, "t-force", None).is_empty());
}

#[test]
fn oci_kill_9_between_create_and_start_leaves_nothing() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let log = root.dir.path().join("t-k9.log");
    let pid = oci_create(&root, "t-k9", "echo never", &log);
    // SAFETY: kill with integer arguments.
    unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
    wait_for("stopped", || oci_status(&root, "t-k9").0 == "stopped");
    let refused = oci(&root, &["start", "t-k9"]);
    assert!(!refused.status.success(), "{refused:?}");
    // gc leaves a created container to its caller; delete removes it.
    Command::new(bin())
        .args(["gc", "--state-dir"])
        .arg(root.state_dir())
        .output()
        .unwrap();
    assert!(root.state_dir().join("t-k9.json").exists());
    ok(&oci(&root, &["delete", "t-k9"]));
    let problems = leftovers(&root, "t-k9", None);
    assert!(problems.is_empty(), "left behind: {problems:?}");
    assert_eq!(fs::read_to_string(&log).unwrap(), "");

    // A created container is not stopped: delete refuses it (the spec), --force kills
    // its process and removes it.
    let pid = oci_create(&root, "t-del", "echo never", &log);
    let refused = oci(&root, &["delete", "t-del"]);
    assert!(stderr(&refused).contains("is created"), "{refused:?}");
    assert_eq!(oci_status(&root, "t-del"), ("created".into(), pid));
    ok(&oci(&root, &["delete", "--force", "t-del"]));
    assert!(leftovers(&root, "t-del", None).is_empty());
    let alive = fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !s.rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    });
    assert!(!alive, "process {pid} survived delete");
}

/// The inode a `/proc/PID/ns/NAME` link names (`mnt:[4026531841]`).
fn ns_link(pid: u64, name: &str) -> String {
    fs::read_link(format!("/proc/{pid}/ns/{name}"))
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// Sets a bundle's `linux.namespaces` (and drops its masked and read-only paths and
/// its root propagation when asked: they need a mount namespace of the container's
/// own).
fn set_namespaces(dir: &Path, namespaces: serde_json::Value, drop_paths: bool) {
    let file = dir.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    spec["linux"]["namespaces"] = namespaces;
    if drop_paths {
        let linux = spec["linux"].as_object_mut().unwrap();
        linux.remove("maskedPaths");
        linux.remove("readonlyPaths");
        linux.remove("rootfsPropagation");
    }
    fs::write(&file, spec.to_string()).unwrap();
}

/// A created container, deleted (`--force`) when dropped: also when the test fails.
struct Created<'a>(&'a BusyboxRoot, &'a str);

impl Drop for Created<'_> {
    fn drop(&mut self) {
        let _ = oci(self.0, &["delete", "--force", self.1]);
    }
}

#[test]
fn oci_namespaces_joined_by_path_and_the_hosts_mount_namespace() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let log = root.dir.path().join("t-ns.log");

    // Joined by path: a pid and a mount namespace of a process of the test's own.
    // Killed (with its `sleep`, through `--kill-child`) when dropped, also on failure.
    let holder = ChildGuard(Some(
        Command::new("unshare")
            .args([
                "--pid",
                "--mount",
                "--fork",
                "--kill-child",
                "sleep",
                "1000",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    ));
    let hp = u64::from(holder.0.as_ref().unwrap().id());
    let me = u64::from(std::process::id());
    wait_for("the holder's namespaces", || {
        ns_link(hp, "mnt") != ns_link(me, "mnt")
            && ns_link(hp, "pid_for_children") != ns_link(me, "pid")
    });
    let target_pid = ns_link(hp, "pid_for_children");
    let target_mnt = ns_link(hp, "mnt");
    let dir = bundle(&root, "t-join");
    set_namespaces(
        &dir,
        serde_json::json!([
            {"type": "pid", "path": format!("/proc/{hp}/ns/pid_for_children")},
            {"type": "mount", "path": format!("/proc/{hp}/ns/mnt")},
            {"type": "uts"}, {"type": "ipc"}
        ]),
        false,
    );
    let pid = oci_create_in(&root, &dir, "t-join", "sleep 100", &log);
    let _created = Created(&root, "t-join");
    assert_eq!(ns_link(pid, "pid"), target_pid);
    assert_eq!(ns_link(pid, "mnt"), target_mnt);
    let status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let nspid = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    // The holder's `sleep` is 1 there; the container's process comes after it.
    assert!(!nspid.ends_with("\t1"), "{nspid}");
    ok(&oci(&root, &["delete", "--force", "t-join"]));
    drop(holder);
    let problems = leftovers(&root, "t-join", None);
    assert!(problems.is_empty(), "left behind: {problems:?}");

    // No mount namespace: chrooted, its mounts in the host's table until delete.
    let dir = bundle(&root, "t-hostns");
    set_namespaces(
        &dir,
        serde_json::json!([{"type": "pid"}, {"type": "uts"}]),
        false,
    );
    let refused = oci(
        &root,
        &["create", "--bundle", dir.to_str().unwrap(), "t-hostns"],
    );
    assert!(
        stderr(&refused).contains(
            "linux.maskedPaths, linux.readonlyPaths, linux.rootfsPropagation need a mount namespace"
        ),
        "{refused:?}"
    );
    set_namespaces(
        &dir,
        serde_json::json!([{"type": "pid"}, {"type": "uts"}]),
        true,
    );
    let pid = oci_create_in(&root, &dir, "t-hostns", "sleep 100", &log);
    let _created = Created(&root, "t-hostns");
    assert_eq!(ns_link(pid, "mnt"), ns_link(me, "mnt"));
    assert_ne!(ns_link(pid, "pid"), ns_link(me, "pid"));
    let rootfs = fs::canonicalize(root.rootfs()).unwrap();
    assert_eq!(fs::read_link(format!("/proc/{pid}/root")).unwrap(), rootfs);
    let mounted = host_mounts_of(&rootfs);
    assert!(
        mounted.iter().any(|l| l.contains(" proc ")),
        "the container's /proc in the host's table: {mounted:?}"
    );
    ok(&oci(&root, &["delete", "--force", "t-hostns"]));
    assert_eq!(host_mounts_of(&rootfs), Vec::<String>::new());
    let problems = leftovers(&root, "t-hostns", None);
    assert!(problems.is_empty(), "left behind: {problems:?}");
}

/// Sets `hooks` and `process.args` (`sh -c script`) of the bundle of `id`.
fn set_hooks(dir: &Path, hooks: serde_json::Value, script: &str) {
    let file = dir.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&file).unwrap()).unwrap();
    spec["hooks"] = hooks;
    spec["process"]["args"] = serde_json::json!(["sh", "-c", script]);
    spec["annotations"] = serde_json::json!({"org.isolab.test": "hooks"});
    fs::write(&file, spec.to_string()).unwrap();
}

/// `create` of an existing bundle directory, its output in `log`. Its stderr goes to a
/// file too (read back into the `Output`): the container keeps it, and a pipe would
/// make us wait for the container's end.
fn oci_create_dir(root: &BusyboxRoot, id: &str, dir: &Path, log: &Path) -> Output {
    let err = log.with_extension("err");
    let status = Command::new(bin())
        .arg("--root")
        .arg(root.state_dir())
        .args(["create", "--bundle"])
        .arg(dir)
        .arg(id)
        .stdout(fs::File::create(log).unwrap())
        .stderr(fs::File::create(&err).unwrap())
        .status()
        .unwrap();
    Output {
        status,
        stdout: Vec::new(),
        stderr: fs::read(&err).unwrap_or_default(),
    }
}

/// All six kinds of hooks run at their point of the lifecycle, in order, in their
/// namespaces, each with the container's state on its standard input; a hook that
/// fails or outlives its timeout fails its operation, and nothing is left.
#[test]
fn oci_hooks_run_in_order_with_the_state_and_their_timeouts() {
    require_root!();
    let _l = lock();
    let root = BusyboxRoot::new();
    let out = root.dir.path().join("hooks.out");
    let log = root.dir.path().join("t-hooks.log");
    let host = |kind: &str| {
        serde_json::json!([{"path": "/bin/sh", "timeout": 5, "args": ["sh", "-c",
            format!("echo {kind} $(readlink /proc/self/ns/mnt) $(cat) >> {}", out.display())]}])
    };
    let dir = bundle(&root, "t-hooks");
    set_hooks(
        &dir,
        serde_json::json!({
            "prestart": host("prestart"), "createRuntime": host("createRuntime"),
            "createContainer": host("createContainer"), "poststart": host("poststart"),
            "poststop": host("poststop"),
            // In the container: its own root, after pivot_root.
            "startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "cat > /dev/shm/state"]}],
        }),
        "cat /dev/shm/state",
    );
    let created = oci_create_dir(&root, "t-hooks", &dir, &log);
    assert!(created.status.success(), "{created:?}");
    let pid = oci_status(&root, "t-hooks").1;
    let lines = || fs::read_to_string(&out).unwrap_or_default();
    let kinds = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| l.split(' ').next().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        kinds(&lines()),
        ["prestart", "createRuntime", "createContainer"]
    );
    let host_mnt = fs::read_link("/proc/self/ns/mnt").unwrap();
    let container_mnt = fs::read_link(format!("/proc/{pid}/ns/mnt")).unwrap();
    let state = |line: &str| -> (String, serde_json::Value) {
        let (_, rest) = line.split_once(' ').unwrap();
        let (mnt, json) = rest.split_once(' ').unwrap();
        (mnt.to_owned(), serde_json::from_str(json).unwrap())
    };
    for line in lines().lines() {
        let (mnt, v) = state(line);
        assert_eq!(v["id"], "t-hooks");
        assert_eq!(v["status"], "created", "{line}");
        assert_eq!(v["bundle"], dir.to_str().unwrap());
        assert_eq!(v["annotations"]["org.isolab.test"], "hooks");
        if line.starts_with("createContainer") {
            // In the container's namespaces: its mount namespace, its own pid 1.
            assert_eq!(Path::new(&mnt), container_mnt);
            assert_eq!(v["pid"], 1);
        } else {
            assert_eq!(Path::new(&mnt), host_mnt);
            assert_eq!(v["pid"], pid);
        }
    }
    ok(&oci(&root, &["start", "t-hooks"]));
    wait_for("stopped", || oci_status(&root, "t-hooks").0 == "stopped");
    let (_, poststart) = state(lines().lines().nth(3).unwrap());
    assert_eq!(
        (&poststart["status"], &poststart["pid"]),
        (&"running".into(), &pid.into())
    );
    let start_state: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&log).unwrap()).unwrap();
    assert_eq!(
        (&start_state["status"], &start_state["pid"]),
        (&"created".into(), &1.into())
    );
    ok(&oci(&root, &["delete", "t-hooks"]));
    assert_eq!(
        kinds(&lines()),
        [
            "prestart",
            "createRuntime",
            "createContainer",
            "poststart",
            "poststop"
        ]
    );
    assert_eq!(
        state(lines().lines().nth(4).unwrap()).1["status"],
        "stopped"
    );
    assert!(leftovers(&root, "t-hooks", None).is_empty());

    // A createContainer hook past its timeout fails create, which leaves nothing.
    set_hooks(
        &dir,
        serde_json::json!({"createContainer": [{"path": "/bin/sleep", "args": ["sleep", "10"],
                                                "timeout": 1}]}),
        "true",
    );
    let started = Instant::now();
    let refused = oci_create_dir(&root, "t-hooks", &dir, &log);
    assert!(
        stderr(&refused)
            .contains("createContainer hook /bin/sleep: killed after its timeout of 1 s"),
        "{refused:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
    assert!(leftovers(&root, "t-hooks", None).is_empty());
    // A failing createRuntime hook too.
    set_hooks(
        &dir,
        serde_json::json!({"createRuntime": [{"path": "/bin/false"}]}),
        "true",
    );
    let refused = oci_create_dir(&root, "t-hooks", &dir, &log);
    assert!(
        stderr(&refused).contains("createRuntime hook /bin/false: exit status: 1"),
        "{refused:?}"
    );
    assert!(leftovers(&root, "t-hooks", None).is_empty());
    // A failing startContainer hook fails start; the container stops, delete removes it.
    set_hooks(
        &dir,
        serde_json::json!({"startContainer": [{"path": "/bin/sh", "args": ["sh", "-c", "exit 4"]}]}),
        "echo never",
    );
    assert!(oci_create_dir(&root, "t-hooks", &dir, &log)
        .status
        .success());
    let refused = oci(&root, &["start", "t-hooks"]);
    assert!(
        stderr(&refused).contains("startContainer hook /bin/sh: exit status: 4"),
        "{refused:?}"
    );
    assert_eq!(oci_status(&root, "t-hooks").0, "stopped");
    ok(&oci(&root, &["delete", "t-hooks"]));
    assert!(!fs::read_to_string(&log).unwrap().contains("never"));
    assert!(leftovers(&root, "t-hooks", None).is_empty());
}

/// Programs of the OCI runtime-tools validation suite (42 of 58) that isolab-runtime passes on
/// this kind of host (Debian bookworm, hybrid cgroup v1; the harness mounts a v1 hugetlb
/// hierarchy for crun). Every other program is in [`VALIDATION_EXCEPTIONS`] or
/// [`VALIDATION_NOT_YET`], with its reason.
const VALIDATION_MUST_PASS: &[&str] = &[
    "config_updates_without_affect",
    "create",
    "default",
    "delete",
    "delete_only_create_resources",
    "hooks_stdin",
    "hostname",
    "kill",
    "kill_no_effect",
    "killsig",
    "linux_cgroups_cpus",
    "linux_cgroups_devices",
    "linux_cgroups_hugetlb",
    "linux_cgroups_relative_cpus",
    "linux_cgroups_relative_devices",
    "linux_cgroups_relative_hugetlb",
    "linux_devices",
    "linux_masked_paths",
    "linux_mount_label",
    "linux_ns_itype",
    "linux_ns_nopath",
    "linux_ns_path",
    "linux_ns_path_type",
    "linux_process_apparmor_profile",
    "linux_readonly_paths",
    "linux_rootfs_propagation",
    "linux_seccomp",
    "linux_sysctl",
    "linux_uid_mappings",
    "misc_props",
    "mounts",
    "poststart_fail",
    "poststop",
    "poststop_fail",
    "prestart_fail",
    "process",
    "process_capabilities_fail",
    "process_oom_score_adj",
    "process_rlimits_fail",
    "process_user",
    "root_readonly_true",
    "state",
];

/// Programs that fail here for a reason outside isolab-runtime: a host facility this
/// machine lacks, or a bug of the suite (runtime-tools master of 2025-11-14) that runc
/// 1.1.5 fails on the same way. crun 1.8.1 gives no verdict on them: it refuses the
/// suite's ociVersion 1.3.0 in every program ("unknown version specified").
const VALIDATION_EXCEPTIONS: &[(&str, &str)] = &[
    ("delete_resources", PIDS_POINTERS),
    ("linux_cgroups_pids", PIDS_POINTERS),
    ("linux_cgroups_relative_pids", PIDS_POINTERS),
    (
        "hooks",
        "suite bug: expects the output \"post-start1\\n...\" while its hooks write \
         \"post-start1 called\"; it cannot match (runc fails the same)",
    ),
    (
        "prestart",
        "suite bug: wants prestart hooks after `start`; runtime-spec 1.0.2 and later (1.3.0 \
         here) run them during `create`, before pivot_root (runc fails the same)",
    ),
    (
        "start",
        "suite bug: #7 expects `create` of a bundle without `process` to succeed, which the \
         spec and runc refuse (runc fails #7 the same)",
    ),
    (
        "pidfile",
        "suite race: it kills the container after its `true` may have exited, and kill of a \
         stopped container MUST fail (runc fails the same: \"container not running\")",
    ),
    (
        "poststart",
        "suite race: wants the container's `sh -c 'echo ...'` to have written its line \
         before the poststart hook writes its own; the spec asks only that the hook run \
         after the process is executed, which `start` now waits for (passes in most runs, \
         2 of 3 here; runc failed it in the same session and passed in its baseline)",
    ),
    (
        "process_rlimits",
        "suite bug: runtimetest (Go) raises its own soft RLIMIT_NOFILE at start-up and reads \
         3999, not the 3000 set (runc fails #13 the same)",
    ),
    (
        "process_capabilities",
        "host: this machine's bounding set lacks CAP_SYS_RESOURCE, which the program asks \
         the container to keep; refused by name (runc: \"unable to apply caps\")",
    ),
    ("linux_cgroups_blkio", NO_BLKIO_WEIGHT),
    ("linux_cgroups_relative_blkio", NO_BLKIO_WEIGHT),
    ("linux_cgroups_network", NO_NET_CLS),
    ("linux_cgroups_relative_network", NO_NET_CLS),
    ("linux_cgroups_memory", NO_KMEM),
    ("linux_cgroups_relative_memory", NO_KMEM),
];

const PIDS_POINTERS: &str = "suite bug: ValidateLinuxResourcesPids compares two *int64 pointers \
     (the limit became a pointer in runtime-spec), so \"pids limit is set correctly\" fails \
     with the limit applied (runc fails the same)";
const NO_BLKIO_WEIGHT: &str = "host: no blkio weights on this hybrid v1 host (no BFQ \
     scheduler, so no blkio.weight or blkio.leaf_weight file; blkio counts no I/O here); \
     refused by name (runc: blkio.leaf_weight: no such file)";
const NO_NET_CLS: &str = "host: the net_cls and net_prio hierarchies are not mounted here \
     (/proc/cgroups: hierarchy 0); refused by name (runc: cannot set net_cls limit)";
const NO_KMEM: &str = "host: this kernel ignores memory.kmem.limit_in_bytes (a write reads \
     back unlimited), so \"memory kernel is set correctly\" cannot hold (runc fails it the \
     same); isolab-runtime refuses memory.kernel by name. With it removed from the bundle, \
     every other check passes: limit, reservation, swap, kernelTCP, swappiness, oom";

/// Programs that fail for what isolab-runtime does not do yet: none.
const VALIDATION_NOT_YET: &[(&str, &str)] = &[];

/// The OCI runtime-tools validation suite (scripts/oci-validation.sh: Go programs
/// built once through the module proxy, `scripts/setup.sh` does it) against this
/// build of isolab-runtime: the programs of [`VALIDATION_MUST_PASS`] pass, every other one
/// is listed with its reason, and the harness finds nothing of the run left (its exit
/// status). The Go toolchain is the
/// one the scripts use (`scripts/lib/go.sh`: the newest present; the suite's version
/// follows it).
#[test]
fn oci_runtime_tools_validation_suite() {
    require_root!();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let go = Command::new("bash")
        .arg(repo.join("scripts/lib/go.sh"))
        .output()
        .unwrap();
    if !go.status.success() {
        isolab_skip::skip(
            "no Go toolchain to build the suite with (scripts/setup.sh installs Debian's golang-go)",
        );
        return;
    }
    eprintln!("Go: {}", stdout(&go).trim());
    let _l = lock();
    let dir = tempfile::tempdir().unwrap();
    let tsv = dir.path().join("isolab-runtime.tsv");
    let out = Command::new("bash")
        .arg(repo.join("scripts/oci-validation.sh"))
        .arg(bin())
        .arg("--out")
        .arg(&tsv)
        .output()
        .unwrap();
    let console = stdout(&out);
    eprintln!("{console}");
    assert!(
        out.status.success(),
        "the harness failed or found leftovers: {}\n{console}",
        stderr(&out)
    );
    let table = fs::read_to_string(&tsv).unwrap();
    let status = |program: &str| {
        table
            .lines()
            .map(|l| l.split('\t').collect::<Vec<_>>())
            .find(|cols| cols.first() == Some(&program))
            .and_then(|cols| cols.get(4).map(|s| s.to_string()))
    };
    let failed: Vec<String> = VALIDATION_MUST_PASS
        .iter()
        .filter(|p| status(p).as_deref() != Some("pass"))
        .map(|p| format!("{p}: {:?}", status(p)))
        .collect();
    assert!(failed.is_empty(), "{failed:?}\n{table}");
    // Every program of the suite is in one list: a new one must be placed, with its
    // reason when it fails.
    let excused = || VALIDATION_EXCEPTIONS.iter().chain(VALIDATION_NOT_YET);
    let unplaced: Vec<&str> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').next())
        .filter(|p| !VALIDATION_MUST_PASS.contains(p) && !excused().any(|(e, _)| e == p))
        .collect();
    assert!(
        unplaced.is_empty(),
        "programs in no list: {unplaced:?}\n{table}"
    );
    for (p, reason) in excused() {
        if status(p).as_deref() == Some("pass") {
            eprintln!("{p} passed this time (listed as failing: {reason})");
        }
    }
}
