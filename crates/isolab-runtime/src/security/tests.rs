//! Tests of the security module: configuration, the order of `apply` against a fake, and the
//! real thing in forked child processes (root only; skipped with a reason otherwise).

use std::io;
use std::os::fd::RawFd;

use super::*;

/// Records calls instead of making them.
#[derive(Default)]
struct Fake {
    bounding: u64,
    permitted: u64,
    calls: Vec<String>,
    fail_filter: bool,
}

impl SecuritySyscalls for Fake {
    fn read_bounding(&self) -> io::Result<CapabilitySet> {
        Ok(CapabilitySet::from_mask(self.bounding))
    }
    fn read_permitted(&self) -> io::Result<CapabilitySet> {
        Ok(CapabilitySet::from_mask(self.permitted))
    }
    fn drop_bounding(&mut self, cap: u8) -> io::Result<()> {
        self.calls.push(format!("drop {cap}"));
        Ok(())
    }
    fn clear_ambient(&mut self) -> io::Result<()> {
        self.calls.push("ambient".into());
        Ok(())
    }
    fn raise_ambient(&mut self, cap: u8) -> io::Result<()> {
        self.calls.push(format!("raise {cap}"));
        Ok(())
    }
    fn set_caps(&mut self, e: CapabilitySet, p: CapabilitySet, i: CapabilitySet) -> io::Result<()> {
        self.calls.push(format!(
            "capset {:x} {:x} {:x}",
            e.mask(),
            p.mask(),
            i.mask()
        ));
        Ok(())
    }
    fn set_no_new_privs(&mut self) -> io::Result<()> {
        self.calls.push("nnp".into());
        Ok(())
    }
    fn install_filter(&mut self, program: &[SockFilter], flags: u32) -> io::Result<()> {
        if self.fail_filter {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let flags = if flags == 0 {
            String::new()
        } else {
            format!(" flags {flags}")
        };
        self.calls
            .push(format!("seccomp {}{flags}", !program.is_empty()));
        Ok(())
    }
}

fn full_fake() -> Fake {
    Fake {
        bounding: CapabilitySet::all().mask(),
        permitted: CapabilitySet::all().mask(),
        ..Fake::default()
    }
}

#[test]
fn default_config_is_docker() {
    let cfg = SecurityConfig::default();
    assert_eq!(cfg.capabilities.mask(), 0xa804_25fb);
    assert!(!cfg.no_new_privs);
    assert_eq!(cfg.seccomp, SeccompChoice::Default);
    assert_eq!(cfg.masked_paths.len(), 11);
    assert!(cfg.masked_paths.iter().any(|p| p == "/proc/kcore"));
    assert_eq!(cfg.readonly_paths, READONLY_PATHS);
    assert_eq!(cfg.devices, default_devices());
    let p = SecurityConfig::privileged();
    assert_eq!(p.capabilities, CapabilitySet::all());
    assert_eq!(p.seccomp, SeccompChoice::Unconfined);
    assert!(p.masked_paths.is_empty() && p.readonly_paths.is_empty());
}

#[test]
fn cap_add_and_drop_change_the_mask() {
    let cfg = SecurityConfig::default()
        .with_cap_drop(["NET_RAW"])
        .unwrap()
        .with_cap_add(["CAP_SYS_ADMIN"])
        .unwrap();
    assert_eq!(
        cfg.capabilities.mask(),
        (0xa804_25fb & !(1 << 13)) | (1 << 21)
    );
    let only = SecurityConfig::default()
        .with_cap_drop(["ALL"])
        .unwrap()
        .with_cap_add(["kill"])
        .unwrap();
    assert_eq!(only.capabilities.mask(), 1 << 5);
    assert!(matches!(
        SecurityConfig::default().with_cap_add(["CAP_NOPE"]),
        Err(SecurityError::UnknownCapability { .. })
    ));
}

#[test]
fn apply_order_without_no_new_privs_puts_seccomp_before_capset() {
    let fake = full_fake();
    let prepared = prepare_with(&SecurityConfig::default(), &fake).unwrap();
    assert_eq!(prepared.kept_capabilities().unwrap().mask(), 0xa804_25fb);
    // One program: libseccomp puts the clone3 → ENOSYS rule in the same program as the
    // default EPERM (seccompiler needed a second one).
    assert_eq!(prepared.seccomp_programs(), 1);
    let mut fake = fake;
    prepared.apply_with(&mut fake).unwrap();
    let drops = CapabilitySet::all()
        .difference(CapabilitySet::docker_default())
        .iter()
        .count();
    assert_eq!(fake.calls.len(), drops + 1 + 1 + 1);
    assert!(fake.calls[..drops].iter().all(|c| c.starts_with("drop ")));
    assert_eq!(
        &fake.calls[drops..],
        ["ambient", "seccomp true", "capset a80425fb a80425fb 0"]
    );
}

#[test]
fn oci_capability_sets_are_set_and_ambient_raised() {
    let chown = CapabilitySet::from_names(&["CAP_CHOWN".to_string()]).unwrap();
    let kill = CapabilitySet::from_names(&["CAP_KILL".to_string()]).unwrap();
    let both = chown.union(kill);
    let cfg = SecurityConfig {
        capabilities: both,
        seccomp: SeccompChoice::Unconfined,
        sets: Some(CapabilitySets {
            effective: chown,
            permitted: both,
            inheritable: kill,
            ambient: kill,
        }),
        ..SecurityConfig::default()
    };
    let mut fake = full_fake();
    let prepared = prepare_with(&cfg, &fake).unwrap();
    prepared.apply_with(&mut fake).unwrap();
    let tail: Vec<&str> = fake
        .calls
        .iter()
        .rev()
        .take(3)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "ambient",
            &format!(
                "capset {:x} {:x} {:x}",
                chown.mask(),
                both.mask(),
                kill.mask()
            ),
            "raise 5"
        ]
    );
    // A set beyond what this process holds is refused before anything is applied.
    let fake = Fake {
        bounding: chown.mask(),
        permitted: chown.mask(),
        ..Fake::default()
    };
    assert!(prepare_with(&cfg, &fake).is_err());
}

#[test]
fn apply_order_with_no_new_privs_puts_seccomp_last() {
    let cfg = SecurityConfig {
        no_new_privs: true,
        ..SecurityConfig::default()
    };
    let mut fake = full_fake();
    let prepared = prepare_with(&cfg, &fake).unwrap();
    prepared.apply_with(&mut fake).unwrap();
    let tail: Vec<&str> = fake
        .calls
        .iter()
        .rev()
        .take(4)
        .rev()
        .map(String::as_str)
        .collect();
    assert_eq!(
        tail,
        [
            "ambient",
            "capset a80425fb a80425fb 0",
            "nnp",
            "seccomp true"
        ]
    );
}

#[test]
fn privileged_touches_nothing_and_unconfined_installs_nothing() {
    let mut fake = Fake::default();
    let prepared = prepare_with(&SecurityConfig::privileged(), &fake).unwrap();
    assert_eq!(prepared.kept_capabilities(), None);
    assert_eq!(prepared.seccomp_programs(), 0);
    prepared.apply_with(&mut fake).unwrap();
    assert!(fake.calls.is_empty(), "{:?}", fake.calls);
}

#[test]
fn missing_capabilities_and_filter_failures_are_reported() {
    // A process without CAP_SYS_RESOURCE cannot hand it to the container.
    let fake = Fake {
        bounding: CapabilitySet::all().mask() & !(1 << 24),
        permitted: CapabilitySet::all().mask() & !(1 << 24),
        ..Fake::default()
    };
    let cfg = SecurityConfig::default()
        .with_cap_add(["SYS_RESOURCE"])
        .unwrap();
    let err = prepare_with(&cfg, &fake).unwrap_err();
    assert!(err.to_string().contains("CAP_SYS_RESOURCE"), "{err}");

    let mut fake = Fake {
        fail_filter: true,
        ..full_fake()
    };
    let prepared = prepare_with(&SecurityConfig::default(), &fake).unwrap();
    let err = prepared.apply_with(&mut fake).unwrap_err();
    assert!(err.to_string().contains("CAP_SYS_ADMIN"), "{err}");
}

#[test]
fn oci_fragments_parse_as_oci_spec() {
    let cfg = SecurityConfig::default();
    let caps = cfg.oci_capabilities_spec().unwrap();
    assert_eq!(caps.bounding().as_ref().unwrap().len(), 14);
    assert!(caps.inheritable().is_none());
    assert!(cfg.oci_seccomp_spec().unwrap().is_some());
    assert!(SecurityConfig::privileged()
        .oci_seccomp_spec()
        .unwrap()
        .is_none());
    let linux = cfg.oci_linux().unwrap();
    assert_eq!(linux["maskedPaths"].as_array().unwrap().len(), 11);
    assert_eq!(linux["resources"]["devices"][0]["allow"], false);
    assert_eq!(linux["seccomp"]["defaultErrnoRet"], 1);
    let spec: oci_spec::runtime::Linux = serde_json::from_value(linux).unwrap();
    assert!(spec.seccomp().is_some());
    assert_eq!(
        oci_capabilities()["effective"].as_array().unwrap().len(),
        14
    );
    assert_eq!(
        oci_linux_seccomp().unwrap()["defaultAction"],
        "SCMP_ACT_ERRNO"
    );
}

// ---------------------------------------------------------------------------------------------
// Real tests in forked children.

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// How a forked child ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    Exit(i32),
    Signal(i32),
}

/// Forks; the child runs `body` with the write end of a pipe and exits with its return value;
/// the parent collects what the child wrote and how it ended.
fn forked(body: impl FnOnce(RawFd) -> i32) -> (Ended, String) {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2 to fill.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: the child only runs `body` (syscalls and glibc calls, which are fork-safe in
    // a single-threaded child) and then `_exit`s without returning into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed: {}", io::Error::last_os_error());
    if pid == 0 {
        // SAFETY: closing our copy of the read end.
        unsafe { libc::close(rd) };
        let code =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| body(wr))).unwrap_or(101);
        // SAFETY: terminate the child at once, skipping the harness's atexit handlers.
        unsafe { libc::_exit(code) };
    }
    // SAFETY: closing the parent's copy of the write end.
    unsafe { libc::close(wr) };
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        // SAFETY: reading into a stack buffer of the given length.
        let n = unsafe { libc::read(rd, buf.as_mut_ptr().cast(), buf.len()) };
        if n <= 0 {
            break;
        }
        out.extend_from_slice(&buf[..n as usize]);
    }
    // SAFETY: closing the read end we own.
    unsafe { libc::close(rd) };
    let mut status = 0;
    // SAFETY: waiting for our own child.
    assert_eq!(unsafe { libc::waitpid(pid, &mut status, 0) }, pid);
    let ended = if libc::WIFEXITED(status) {
        Ended::Exit(libc::WEXITSTATUS(status))
    } else {
        Ended::Signal(libc::WTERMSIG(status))
    };
    (ended, String::from_utf8_lossy(&out).into_owned())
}

fn send(fd: RawFd, text: &str) {
    // SAFETY: writing a byte slice we own to a pipe fd we own.
    unsafe { libc::write(fd, text.as_ptr().cast(), text.len()) };
}

/// Sends `/proc/self/status` through the pipe.
fn send_status(fd: RawFd) {
    match std::fs::read_to_string("/proc/self/status") {
        Ok(s) => send(fd, &s),
        Err(e) => send(fd, &format!("status error {e}\n")),
    }
}

/// `name` → hex value of a `/proc/<pid>/status` line.
fn status_field(status: &str, name: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        .unwrap_or_else(|| panic!("no {name} in {status}"))
}

fn cap_field(status: &str, name: &str) -> u64 {
    u64::from_str_radix(&status_field(status, name), 16).unwrap()
}

/// Runs a raw syscall and reports `name=ok` or `name=<errno>`.
fn probe(fd: RawFd, name: &str, f: impl FnOnce() -> libc::c_long) {
    let rc = f();
    let result = if rc < 0 {
        io::Error::last_os_error().raw_os_error().unwrap_or(-1)
    } else {
        0
    };
    send(fd, &format!("probe {name}={result}\n"));
}

fn probes(out: &str) -> std::collections::HashMap<String, i32> {
    out.lines()
        .filter_map(|l| l.strip_prefix("probe "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
        .collect()
}

/// A raw syscall with up to five integer arguments (pointers passed as integers).
fn raw(nr: libc::c_long, a: [libc::c_long; 5]) -> libc::c_long {
    // SAFETY: the probes pass integers, null pointers or pointers to live C strings; calls
    // that could succeed and change something only affect the throw-away child.
    unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4]) }
}

/// The probes run in the child after `apply`.
fn run_probes(fd: RawFd) {
    use libc::c_long;
    probe(fd, "getpid", || raw(libc::SYS_getpid, [0; 5]));
    probe(fd, "write", || {
        raw(libc::SYS_write, [c_long::from(fd), 0, 0, 0, 0])
    });
    probe(fd, "unshare_user", || {
        raw(
            libc::SYS_unshare,
            [c_long::from(libc::CLONE_NEWUSER), 0, 0, 0, 0],
        )
    });
    probe(fd, "unshare_uts", || {
        raw(
            libc::SYS_unshare,
            [c_long::from(libc::CLONE_NEWUTS), 0, 0, 0, 0],
        )
    });
    // KEYCTL_GET_KEYRING_ID of the session keyring (-3), without creating it.
    probe(fd, "keyctl", || raw(libc::SYS_keyctl, [0, -3, 0, 0, 0]));
    probe(fd, "add_key", || raw(libc::SYS_add_key, [0; 5]));
    probe(fd, "mount", || raw(libc::SYS_mount, [0; 5]));
    // Wrong magic numbers: never reboots; EINVAL if both seccomp and caps let it through.
    probe(fd, "reboot", || raw(libc::SYS_reboot, [0; 5]));
    probe(fd, "clone3", || raw(libc::SYS_clone3, [0; 5]));
    let clone_and_reap = |flags: c_long| -> c_long {
        // A plain fork through the raw clone syscall; the grandchild exits at once.
        let pid = raw(libc::SYS_clone, [flags, 0, 0, 0, 0]);
        if pid == 0 {
            // SAFETY: leave the grandchild immediately.
            unsafe { libc::_exit(0) };
        }
        if pid > 0 {
            let mut st = 0;
            // SAFETY: reap our own child.
            unsafe { libc::waitpid(pid as libc::pid_t, &mut st, 0) };
        }
        pid
    };
    probe(fd, "clone_plain", || {
        clone_and_reap(c_long::from(libc::SIGCHLD))
    });
    probe(fd, "clone_newuser", || {
        clone_and_reap(c_long::from(libc::CLONE_NEWUSER | libc::SIGCHLD))
    });
    let socket = |family: libc::c_int| -> c_long {
        let s = raw(
            libc::SYS_socket,
            [
                c_long::from(family),
                c_long::from(libc::SOCK_STREAM),
                0,
                0,
                0,
            ],
        );
        if s >= 0 {
            // SAFETY: closing the fd we just got.
            unsafe { libc::close(s as RawFd) };
        }
        s
    };
    probe(fd, "socket_unix", || socket(libc::AF_UNIX));
    probe(fd, "socket_vsock", || socket(libc::AF_VSOCK));
    probe(fd, "personality_query", || {
        raw(libc::SYS_personality, [0xffff_ffff, 0, 0, 0, 0])
    });
    // READ_IMPLIES_EXEC, not in Docker's list.
    probe(fd, "personality_exec", || {
        raw(libc::SYS_personality, [0x0040_0000, 0, 0, 0, 0])
    });
}

#[test]
fn security_forked_default_profile_caps_nnp_and_blocked_calls() {
    if !is_root() {
        isolab_skip::skip("applying capabilities and seccomp in a child needs root");
        return;
    }
    let cfg = SecurityConfig::default();
    let prepared = prepare(&cfg).unwrap();
    let (ended, out) = forked(|fd| {
        if let Err(e) = prepared.apply() {
            send(fd, &format!("apply error: {e}\n"));
            return 2;
        }
        send_status(fd);
        run_probes(fd);
        0
    });
    assert_eq!(ended, Ended::Exit(0), "{out}");
    assert_eq!(cap_field(&out, "CapEff:"), 0xa804_25fb);
    assert_eq!(cap_field(&out, "CapPrm:"), 0xa804_25fb);
    assert_eq!(cap_field(&out, "CapBnd:"), 0xa804_25fb);
    assert_eq!(cap_field(&out, "CapInh:"), 0);
    assert_eq!(cap_field(&out, "CapAmb:"), 0);
    assert_eq!(status_field(&out, "NoNewPrivs:"), "0");
    assert_eq!(status_field(&out, "Seccomp:"), "2");
    assert_eq!(status_field(&out, "Seccomp_filters:"), "1");
    let p = probes(&out);
    let eperm = libc::EPERM;
    assert_eq!(p["getpid"], 0);
    assert_eq!(p["write"], 0);
    assert_eq!(p["unshare_user"], eperm);
    assert_eq!(p["unshare_uts"], eperm);
    assert_eq!(p["keyctl"], eperm);
    assert_eq!(p["add_key"], eperm);
    assert_eq!(p["mount"], eperm);
    assert_eq!(p["reboot"], eperm);
    assert_eq!(p["clone3"], libc::ENOSYS);
    assert_eq!(p["clone_plain"], 0);
    assert_eq!(p["clone_newuser"], eperm);
    assert_eq!(p["socket_unix"], 0);
    assert_eq!(p["socket_vsock"], eperm);
    assert_eq!(p["personality_query"], 0);
    assert_eq!(p["personality_exec"], eperm);
}

#[test]
fn security_forked_no_new_privs_and_exec_keep_the_profile() {
    if !is_root() {
        isolab_skip::skip("applying capabilities and seccomp in a child needs root");
        return;
    }
    let cat = std::path::Path::new("/bin/cat");
    if !cat.exists() {
        isolab_skip::skip("no /bin/cat to exec");
        return;
    }
    let cfg = SecurityConfig {
        no_new_privs: true,
        ..SecurityConfig::default()
    };
    let prepared = prepare(&cfg).unwrap();
    let prog = std::ffi::CString::new("/bin/cat").unwrap();
    let arg = std::ffi::CString::new("/proc/self/status").unwrap();
    let argv = [prog.as_ptr(), arg.as_ptr(), std::ptr::null()];
    let (ended, out) = forked(|fd| {
        if let Err(e) = prepared.apply() {
            send(fd, &format!("apply error: {e}\n"));
            return 2;
        }
        // SAFETY: stdout becomes the pipe; argv is NUL-terminated and its strings outlive
        // the call (execv only returns on failure).
        unsafe {
            libc::dup2(fd, 1);
            libc::execv(prog.as_ptr(), argv.as_ptr());
        }
        send(fd, &format!("exec error: {}\n", io::Error::last_os_error()));
        3
    });
    assert_eq!(ended, Ended::Exit(0), "{out}");
    // What the exec'd program sees: root keeps exactly the bounding set.
    assert_eq!(cap_field(&out, "CapEff:"), 0xa804_25fb);
    assert_eq!(cap_field(&out, "CapBnd:"), 0xa804_25fb);
    assert_eq!(status_field(&out, "NoNewPrivs:"), "1");
    assert_eq!(status_field(&out, "Seccomp:"), "2");
}

#[test]
fn security_forked_cap_add_widens_caps_and_profile() {
    if !is_root() {
        isolab_skip::skip("applying capabilities and seccomp in a child needs root");
        return;
    }
    let cfg = SecurityConfig::default()
        .with_cap_drop(["NET_RAW", "SYS_CHROOT"])
        .unwrap()
        .with_cap_add(["SYS_ADMIN"])
        .unwrap();
    let want = (0xa804_25fbu64 & !(1 << 13) & !(1 << 18)) | (1 << 21);
    let prepared = prepare(&cfg).unwrap();
    assert_eq!(prepared.seccomp_programs(), 1);
    let root = std::ffi::CString::new("/").unwrap();
    let (ended, out) = forked(|fd| {
        if let Err(e) = prepared.apply() {
            send(fd, &format!("apply error: {e}\n"));
            return 2;
        }
        send_status(fd);
        run_probes(fd);
        // chroot("/") changes nothing visible.
        probe(fd, "chroot", || {
            raw(
                libc::SYS_chroot,
                [root.as_ptr() as libc::c_long, 0, 0, 0, 0],
            )
        });
        0
    });
    assert_eq!(ended, Ended::Exit(0), "{out}");
    assert_eq!(cap_field(&out, "CapEff:"), want);
    assert_eq!(status_field(&out, "Seccomp_filters:"), "1");
    let p = probes(&out);
    // With CAP_SYS_ADMIN the profile allows namespaces and clone3, as Docker's does.
    assert_eq!(p["unshare_uts"], 0);
    assert_eq!(p["clone3"], libc::EINVAL);
    // Without CAP_SYS_CHROOT, chroot is neither allowed by seccomp nor by capabilities.
    assert_eq!(p["chroot"], libc::EPERM);
    // Still blocked for everyone.
    assert_eq!(p["keyctl"], libc::EPERM);
    assert_eq!(p["reboot"], libc::EPERM);
}

#[test]
fn security_forked_privileged_leaves_everything() {
    let before = std::fs::read_to_string("/proc/self/status").unwrap();
    let prepared = prepare(&SecurityConfig::privileged()).unwrap();
    let (ended, out) = forked(|fd| {
        if let Err(e) = prepared.apply() {
            send(fd, &format!("apply error: {e}\n"));
            return 2;
        }
        send_status(fd);
        0
    });
    assert_eq!(ended, Ended::Exit(0), "{out}");
    for field in ["CapEff:", "CapPrm:", "CapBnd:", "CapInh:", "CapAmb:"] {
        assert_eq!(cap_field(&out, field), cap_field(&before, field), "{field}");
    }
    assert_eq!(
        status_field(&out, "Seccomp:"),
        status_field(&before, "Seccomp:")
    );
    assert_eq!(
        status_field(&out, "NoNewPrivs:"),
        status_field(&before, "NoNewPrivs:")
    );
}

/// i386 `getpid` (20) through `int 0x80`.
#[cfg(target_arch = "x86_64")]
fn int80_getpid() -> i64 {
    let ret: i64;
    // SAFETY: i386 getpid (20) through int 0x80: no memory arguments; rax is the only
    // register read and written by the call besides those the kernel preserves.
    unsafe {
        std::arch::asm!("int 0x80", inlateout("rax") 20i64 => ret, options(nostack));
    }
    ret
}

/// Without a filter: does this kernel have the i386 ABI at all?
#[cfg(target_arch = "x86_64")]
fn has_i386_abi() -> Result<(), String> {
    let (ended, _) = forked(|_| if int80_getpid() > 0 { 0 } else { 1 });
    if ended == Ended::Exit(0) {
        Ok(())
    } else {
        Err(format!("no i386 syscall ABI on this kernel ({ended:?})"))
    }
}

/// A call through the i386 ABI (`int 0x80`) is a foreign architecture for the filter: the
/// process is killed with SIGSYS.
#[cfg(target_arch = "x86_64")]
#[test]
fn security_forked_wrong_arch_is_killed() {
    if !is_root() {
        isolab_skip::skip("applying seccomp without no_new_privs in a child needs root");
        return;
    }
    if let Err(why) = has_i386_abi() {
        isolab_skip::skip(why);
        return;
    }
    let prepared = prepare(&SecurityConfig::default()).unwrap();
    let (ended, out) = forked(|fd| {
        if let Err(e) = prepared.apply() {
            send(fd, &format!("apply error: {e}\n"));
            return 2;
        }
        int80_getpid();
        0
    });
    assert_eq!(ended, Ended::Signal(libc::SIGSYS), "{out}");
}

// ---------------------------------------------------------------------------------------------
// Engines' own profiles (OCI `linux.seccomp`), installed in forked children.

const DOCKER_PROFILE: &str = include_str!("seccomp/fixtures/docker-20.10.24.json");
const PODMAN_PROFILE: &str = include_str!("seccomp/fixtures/podman-4.3.1.json");

/// Docker's defaults with an OCI profile instead of the built-in one.
fn with_oci_profile(json: &str) -> SecurityConfig {
    SecurityConfig {
        seccomp: SeccompChoice::Oci(Box::new(serde_json::from_str(json).unwrap())),
        ..SecurityConfig::default()
    }
}

/// `fork()` through libc (glibc's `clone` with `CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID |
/// SIGCHLD`); the grandchild exits at once.
fn fork_and_reap() -> libc::c_long {
    // SAFETY: the grandchild only calls _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: leave the grandchild immediately.
        unsafe { libc::_exit(0) };
    }
    if pid > 0 {
        let mut st = 0;
        // SAFETY: reap our own child.
        unsafe { libc::waitpid(pid, &mut st, 0) };
    }
    libc::c_long::from(pid)
}

/// Applies `cfg` in a child and runs `body` there; the probes it sent.
fn probes_under(
    cfg: &SecurityConfig,
    body: impl FnOnce(RawFd),
) -> std::collections::HashMap<String, i32> {
    let prepared = prepare(cfg).unwrap();
    let (ended, out) = forked(|fd| {
        if let Err(e) = prepared.apply() {
            send(fd, &format!("apply error: {e}\n"));
            return 2;
        }
        send_status(fd);
        body(fd);
        0
    });
    assert_eq!(ended, Ended::Exit(0), "{out}");
    assert_eq!(status_field(&out, "Seccomp:"), "2");
    probes(&out)
}

#[test]
fn security_forked_default_profile_read_back_from_oci_behaves_the_same() {
    if !is_root() {
        isolab_skip::skip("applying capabilities and seccomp in a child needs root");
        return;
    }
    let builtin = SecurityConfig::default();
    let as_oci = SecurityConfig {
        seccomp: SeccompChoice::Oci(Box::new(builtin.oci_seccomp_spec().unwrap().unwrap())),
        ..SecurityConfig::default()
    };
    let a = probes_under(&builtin, run_probes);
    let b = probes_under(&as_oci, run_probes);
    assert_eq!(a, b);
    assert_eq!(b["clone_newuser"], libc::EPERM);
    assert_eq!(b["clone3"], libc::ENOSYS);
}

#[test]
fn security_forked_docker_bundle_profile() {
    if !is_root() {
        isolab_skip::skip("applying capabilities and seccomp in a child needs root");
        return;
    }
    let p = probes_under(&with_oci_profile(DOCKER_PROFILE), |fd| {
        run_probes(fd);
        probe(fd, "fork", fork_and_reap);
        #[cfg(target_arch = "x86_64")]
        if has_i386_abi().is_ok() {
            // The profile lists SCMP_ARCH_X86: an i386 call is filtered, not killed.
            probe(fd, "int80_getpid", || int80_getpid() as libc::c_long);
        }
    });
    let eperm = libc::EPERM;
    assert_eq!(p["getpid"], 0);
    assert_eq!(p["write"], 0);
    // fork and a plain clone go through clone's SCMP_CMP_MASKED_EQ (valueTwo omitted: 0).
    assert_eq!(p["fork"], 0);
    assert_eq!(p["clone_plain"], 0);
    assert_eq!(p["clone_newuser"], eperm);
    assert_eq!(p["clone3"], libc::ENOSYS);
    for blocked in [
        "unshare_user",
        "unshare_uts",
        "keyctl",
        "add_key",
        "mount",
        "reboot",
    ] {
        assert_eq!(p[blocked], eperm, "{blocked}");
    }
    assert_eq!(p["socket_unix"], 0);
    // dockerd 20.10's profile has no AF_VSOCK rule (moby added it later): whatever the kernel
    // says, not seccomp's EPERM.
    assert_ne!(p["socket_vsock"], eperm);
    assert_eq!(p["personality_query"], 0);
    assert_eq!(p["personality_exec"], eperm);
    if let Some(&r) = p.get("int80_getpid") {
        assert_eq!(r, 0);
    }
}

#[test]
fn security_forked_podman_bundle_profile() {
    if !is_root() {
        isolab_skip::skip("applying capabilities and seccomp in a child needs root");
        return;
    }
    use libc::c_long;
    let p = probes_under(&with_oci_profile(PODMAN_PROFILE), |fd| {
        probe(fd, "getpid", || raw(libc::SYS_getpid, [0; 5]));
        probe(fd, "fork", fork_and_reap);
        // A plain clone and clone3 are in Podman's allowlist (clone3 with no arguments:
        // the kernel's EINVAL).
        probe(fd, "clone3", || raw(libc::SYS_clone3, [0; 5]));
        // Not in the profile: the default action, ERRNO(38).
        probe(fd, "add_key", || raw(libc::SYS_add_key, [0; 5]));
        probe(fd, "personality_exec", || {
            raw(libc::SYS_personality, [0x0040_0000, 0, 0, 0, 0])
        });
        probe(fd, "personality_query", || {
            raw(libc::SYS_personality, [0xffff_ffff, 0, 0, 0, 0])
        });
        // An ERRNO(1) rule.
        probe(fd, "kexec_load", || raw(libc::SYS_kexec_load, [0; 5]));
        let socket = |family: libc::c_int, kind: libc::c_int, proto: libc::c_int| {
            let s = raw(
                libc::SYS_socket,
                [
                    c_long::from(family),
                    c_long::from(kind),
                    c_long::from(proto),
                    0,
                    0,
                ],
            );
            if s >= 0 {
                // SAFETY: closing the fd we just got.
                unsafe { libc::close(s as RawFd) };
            }
            s
        };
        // The two-argument rule: AF_NETLINK and NETLINK_AUDIT → EINVAL.
        probe(fd, "netlink_audit", || {
            socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_AUDIT)
        });
        probe(fd, "netlink_route", || {
            socket(libc::AF_NETLINK, libc::SOCK_RAW, libc::NETLINK_ROUTE)
        });
        probe(fd, "socket_unix", || {
            socket(libc::AF_UNIX, libc::SOCK_STREAM, 0)
        });
    });
    assert_eq!(p["getpid"], 0);
    assert_eq!(p["fork"], 0);
    assert_eq!(p["clone3"], libc::EINVAL);
    assert_eq!(p["add_key"], libc::ENOSYS);
    assert_eq!(p["personality_exec"], libc::ENOSYS);
    assert_eq!(p["personality_query"], 0);
    assert_eq!(p["kexec_load"], libc::EPERM);
    assert_eq!(p["netlink_audit"], libc::EINVAL);
    assert_eq!(p["netlink_route"], 0);
    assert_eq!(p["socket_unix"], 0);
}

#[test]
fn compiled_programs_are_cached_by_profile() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = SecurityConfig::default();
    let first = compile_filters(&cfg, Some(dir.path())).unwrap();
    let files = || std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files(), 1);
    // Read back: the same programs, no new file.
    assert_eq!(compile_filters(&cfg, Some(dir.path())).unwrap(), first);
    assert_eq!(files(), 1);
    // Another profile (fewer capabilities: clone's namespace flags stay denied, other
    // rules change) is another entry.
    let fewer = SecurityConfig {
        capabilities: CapabilitySet::docker_default()
            .difference(CapabilitySet::from_names(&["CAP_SYS_CHROOT".to_string()]).unwrap()),
        ..SecurityConfig::default()
    };
    compile_filters(&fewer, Some(dir.path())).unwrap();
    assert_eq!(files(), 2);
    assert_eq!(compile_filters(&cfg, None).unwrap(), first);
}

/// The seccomp cache key of Docker's default profile follows its rule table: the same
/// table gives the same key, the table with one syscall changed another (an edited
/// allow-list must never load the program an older build stored), and so do other
/// capabilities.
#[test]
fn the_seccomp_cache_key_changes_with_one_syscall_of_the_table() {
    let caps = CapabilitySet::from_names(default_capabilities()).unwrap();
    let key = |rules: &[seccomp::ProfileRule], caps: CapabilitySet| {
        seccomp::cache::key(&default_identity(seccomp::table_digest(rules), caps))
    };
    let table = seccomp::DEFAULT_PROFILE;
    assert_eq!(key(table, caps), key(table, caps));
    // The start uses the digest the compiler computed.
    assert_eq!(
        seccomp::table_digest(table),
        seccomp::DEFAULT_PROFILE_DIGEST
    );
    // One name of the first rule replaced by another syscall.
    let mut edited = table.to_vec();
    let mut names = edited[0].names.to_vec();
    let was = names[0];
    names[0] = if was == "getpid" { "getppid" } else { "getpid" };
    edited[0].names = Box::leak(names.into_boxed_slice());
    assert_ne!(key(table, caps), key(&edited, caps), "{was} replaced");
    // One rule fewer.
    assert_ne!(key(table, caps), key(&table[1..], caps));
    assert_ne!(key(table, caps), key(table, CapabilitySet::empty()));
}

/// An unprivileged user holds no capability, but the first process of a new user
/// namespace holds every one, whatever this process's bounding set (the kernel's
/// set_cred_user_ns): Docker's default list is refused in the caller's namespace and
/// kept in a new one, and so is a capability this process's bounding set lacks.
#[test]
fn a_new_user_namespace_holds_every_capability() {
    let unprivileged = Fake {
        bounding: CapabilitySet::all().mask(),
        permitted: 0,
        ..Fake::default()
    };
    let cfg = SecurityConfig::default();
    let err = prepare_with(&cfg, &unprivileged).unwrap_err();
    assert!(err.to_string().contains("CAP_CHOWN"), "{err}");
    prepare_in_new_user_namespace(&cfg, &unprivileged).unwrap();

    let bounded = Fake {
        bounding: CapabilitySet::all().mask() & !(1 << 24),
        permitted: 0,
        ..Fake::default()
    };
    let cfg = SecurityConfig::default()
        .with_cap_add(["SYS_RESOURCE"])
        .unwrap();
    let err = prepare_with(&cfg, &bounded).unwrap_err();
    assert!(err.to_string().contains("CAP_SYS_RESOURCE"), "{err}");
    prepare_in_new_user_namespace(&cfg, &bounded).unwrap();
    // The new namespace starts with the full bounding set: what is not kept is dropped
    // from it, also a capability this process's bounding set lacked.
    let mut fake = Fake {
        calls: Vec::new(),
        ..bounded
    };
    let prepared = prepare_in_new_user_namespace(&SecurityConfig::default(), &fake).unwrap();
    prepared.apply_with(&mut fake).unwrap();
    assert!(
        fake.calls.contains(&"drop 24".to_owned()),
        "{:?}",
        fake.calls
    );
}
