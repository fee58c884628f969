//! Building the seccomp filter of Docker's default profile, specialised to Docker's 14 default
//! capabilities, with Firecracker's `seccompiler` (how isolab-runtime built it before) and
//! with libseccomp (how it builds it now), on equal work: both start from the same
//! [`ResolvedProfile`] (names already resolved to numbers) and end with the BPF
//! instructions in memory, ready for `seccomp(2)`.
//!
//! It prints, for each: the build time (median and 95th percentile over `--rounds` builds
//! after `--warmup` builds, the two interleaved and alternating which goes first), the size
//! of the programs in instructions, and the ratios libseccomp / seccompiler measured in this
//! run (with a 95% confidence interval of the median of the per-round ratios); then what the
//! runtime's OCI path takes for a bundle's profile (libseccomp only). Then, as root, it
//! installs each filter in forked children and checks the same behaviours (allowed and denied
//! calls, argument filters, `clone3` → `ENOSYS`, foreign ABIs) and times a few calls under
//! each filter; without root that part is skipped with the reason.
//!
//! ```text
//! cargo run --release -p isolab-runtime --example seccomp-build -- [--rounds 200] [--warmup 20]
//! ```

use std::collections::BTreeMap;
use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use isolab_runtime::security::seccomp::{oci, ArgOp, ArgWidth, Resolved, DEFAULT_ERRNO};
use isolab_runtime::security::{
    Arch, CapabilitySet, LinuxSecurity, ResolvedProfile, SecurityConfig, SecuritySyscalls,
    SockFilter,
};
use isolab_stats::{median_ci, percentile, Sample};
use oci_spec::runtime::LinuxSeccomp;
use seccompiler::{
    SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch,
};

/// dockerd 20.10.24's profile as it handed it to the runtime (the security module's fixture).
const DOCKERD_PROFILE: &str = include_str!("../src/security/seccomp/fixtures/docker-20.10.24.json");

fn main() {
    if let Err(e) = run() {
        eprintln!("seccomp-build: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let (rounds, warmup) = parse_args()?;
    let arch = Arch::native().map_err(|e| e.to_string())?;
    let profile = ResolvedProfile::docker_default(CapabilitySet::docker_default(), arch);
    println!(
        "Docker's default seccomp profile, 14 default capabilities, {}: {} syscalls",
        arch.name(),
        profile.calls.len()
    );
    println!(
        "libseccomp {} (system library), seccompiler 0.5",
        libseccomp_version()
    );

    let old = seccompiler_compile(&profile)?;
    let new = profile.compile().map_err(|e| e.to_string())?;

    // Timing, interleaved: round i builds A then B when i is even, B then A when odd.
    let time = |f: &dyn Fn()| {
        let start = Instant::now();
        f();
        start.elapsed()
    };
    let a = || {
        std::hint::black_box(seccompiler_compile(std::hint::black_box(&profile)).unwrap());
    };
    let b = || {
        std::hint::black_box(std::hint::black_box(&profile).compile().unwrap());
    };
    for _ in 0..warmup {
        a();
        b();
    }
    let (mut ta, mut tb) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for i in 0..rounds {
        if i % 2 == 0 {
            ta.push(time(&a));
            tb.push(time(&b));
        } else {
            tb.push(time(&b));
            ta.push(time(&a));
        }
    }
    let sa = summary(&ta)?;
    let sb = summary(&tb)?;
    let ratios: Vec<f64> = ta
        .iter()
        .zip(&tb)
        .map(|(a, b)| b.as_secs_f64() / a.as_secs_f64())
        .collect();
    let ratio_sample = Sample::new(ratios).map_err(|e| e.to_string())?;
    let ci = median_ci(&ratio_sample, 0.95).ok_or("too few rounds for a 95% interval")?;

    let size = |programs: &[Vec<SockFilter>]| -> (usize, String) {
        let total = programs.iter().map(Vec::len).sum();
        let parts: Vec<String> = programs.iter().map(|p| p.len().to_string()).collect();
        (total, parts.join(" + "))
    };
    let (na, pa) = size(&old);
    let (nb, pb) = size(&new);
    println!("\n{rounds} builds each after {warmup} warm-up builds, interleaved:\n");
    println!(
        "{:<12} {:>12} {:>12} {:>10} {:>18}",
        "", "median", "p95", "programs", "instructions"
    );
    for (name, s, n, parts, programs) in [
        ("seccompiler", &sa, na, &pa, old.len()),
        ("libseccomp", &sb, nb, &pb, new.len()),
    ] {
        println!(
            "{name:<12} {:>12} {:>12} {programs:>10} {:>18}",
            fmt(s.median),
            fmt(s.p95),
            format!("{n} ({parts})")
        );
    }
    println!(
        "\nlibseccomp / seccompiler: median {:.2}x, p95 {:.2}x, instructions {:.2}x",
        sb.median / sa.median,
        sb.p95 / sa.p95,
        nb as f64 / na as f64
    );
    println!(
        "median of the per-round ratios: {:.2}x (95% CI {:.2}x to {:.2}x)",
        ratio_sample.median(),
        ci.low,
        ci.high
    );

    // What a bundle's profile costs to build through the runtime's OCI path (libseccomp
    // only: seccompiler has neither per-rule errnos in one filter nor x86/x32 sections).
    println!("\nOCI profiles through the runtime's path (libseccomp), {rounds} builds each:");
    let spec_profile = SecurityConfig::default()
        .oci_seccomp_spec()
        .map_err(|e| e.to_string())?
        .ok_or("no default profile")?;
    let docker: LinuxSeccomp = serde_json::from_str(DOCKERD_PROFILE).map_err(|e| e.to_string())?;
    for (name, profile) in [
        (
            "Docker's default as `spec` writes it (1 arch)",
            &spec_profile,
        ),
        ("dockerd 20.10.24's own (x86_64, x86, x32)", &docker),
    ] {
        let build = || {
            std::hint::black_box(oci::compile(std::hint::black_box(profile)).unwrap());
        };
        for _ in 0..warmup {
            build();
        }
        let times: Vec<Duration> = (0..rounds).map(|_| time(&build)).collect();
        let s = summary(&times)?;
        let n = oci::compile(profile)
            .map_err(|e| e.to_string())?
            .program
            .len();
        println!(
            "  {name:<48} median {:>10}, p95 {:>10}, {n} instructions",
            fmt(s.median),
            fmt(s.p95)
        );
    }

    println!(
        "\nBehaviour on this kernel (each probe in a forked child that installed the filter):"
    );
    if !is_root() {
        println!(
            "skipped: installing a filter without no_new_privs needs root (CAP_SYS_ADMIN); \
             run as root"
        );
        return Ok(());
    }
    let mut failures = 0;
    println!(
        "\n{:<34} {:<22} {:<16} {:<16}",
        "probe", "Docker's semantics", "seccompiler", "libseccomp"
    );
    for p in PROBES {
        let ra = outcome(&old, p.call);
        let rb = outcome(&new, p.call);
        let mut mark = |r: &Outcome| {
            if (p.expect)(r) {
                format!("{r}")
            } else {
                failures += 1;
                format!("{r} !")
            }
        };
        let ma = mark(&ra);
        let mb = mark(&rb);
        println!("{:<34} {:<22} {ma:<16} {mb:<16}", p.name, p.docker);
    }
    println!("\n(! = differs from the expected behaviour; {failures} in all)");

    println!(
        "\nCost of a call under the filter (ns per call, median of 15 runs of {CALLS} calls in a \
         forked child; the kernel's seccomp cache skips the filter for calls it always allows):"
    );
    println!(
        "\n{:<34} {:>12} {:>12} {:>12}",
        "call", "no filter", "seccompiler", "libseccomp"
    );
    for (name, call) in COSTED {
        let cost = |programs: &[Vec<SockFilter>]| {
            call_cost(programs, *call).map_or("failed".to_string(), |ns| format!("{ns:.0}"))
        };
        println!(
            "{name:<34} {:>12} {:>12} {:>12}",
            cost(&[]),
            cost(&old),
            cost(&new)
        );
    }
    Ok(())
}

fn parse_args() -> Result<(usize, usize), String> {
    let (mut rounds, mut warmup) = (200usize, 20usize);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = |name: &str| -> Result<usize, String> {
            args.next()
                .and_then(|v| v.parse().ok())
                .ok_or(format!("{name} needs a whole number"))
        };
        match flag.as_str() {
            "--rounds" => rounds = value("--rounds")?.max(6),
            "--warmup" => warmup = value("--warmup")?,
            other => {
                return Err(format!(
                    "unknown argument {other:?}: use --rounds N (default 200) and \
                     --warmup N (default 20)"
                ))
            }
        }
    }
    Ok((rounds, warmup))
}

fn libseccomp_version() -> String {
    libseccomp::ScmpVersion::current()
        .map(|v| format!("{}.{}.{}", v.major, v.minor, v.micro))
        .unwrap_or_else(|e| format!("(version unknown: {e})"))
}

struct Summary {
    median: f64,
    p95: f64,
}

/// Median and 95th percentile (linear interpolation, Hyndman & Fan definition 7) in seconds.
fn summary(times: &[Duration]) -> Result<Summary, String> {
    let secs: Vec<f64> = times.iter().map(Duration::as_secs_f64).collect();
    let sample = Sample::new(secs.clone()).map_err(|e| e.to_string())?;
    Ok(Summary {
        median: sample.median(),
        p95: percentile(&secs, 95.0).ok_or("no times")?,
    })
}

fn fmt(secs: f64) -> String {
    if secs >= 1e-3 {
        format!("{:.3} ms", secs * 1e3)
    } else {
        format!("{:.1} µs", secs * 1e6)
    }
}

// ---------------------------------------------------------------------------------------------
// The baseline: isolab-runtime's seccompiler compiler before the switch to libseccomp (two
// programs: the allowlist with default EPERM, then one per other errno allowing the rest).

fn seccompiler_compile(profile: &ResolvedProfile) -> Result<Vec<Vec<SockFilter>>, String> {
    let target = match profile.arch {
        Arch::X86_64 => TargetArch::x86_64,
        Arch::Aarch64 => TargetArch::aarch64,
    };
    let err = |e: seccompiler::BackendError| e.to_string();
    let mut allow: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut errnos: BTreeMap<u32, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
    for (nr, decision) in profile.calls.values() {
        match decision {
            Resolved::Allow => {
                allow.insert(*nr, vec![]);
            }
            Resolved::AllowIf(alternatives) => {
                let mut rules = Vec::new();
                for checks in alternatives {
                    let conditions = checks
                        .iter()
                        .map(|c| {
                            let width = match c.width {
                                ArgWidth::Bits32 => SeccompCmpArgLen::Dword,
                                ArgWidth::Bits64 => SeccompCmpArgLen::Qword,
                            };
                            let op = match c.op {
                                ArgOp::Eq => SeccompCmpOp::Eq,
                                ArgOp::Ne => SeccompCmpOp::Ne,
                                ArgOp::MaskedEq { mask } => SeccompCmpOp::MaskedEq(mask),
                            };
                            SeccompCondition::new(c.index, width, op, c.value)
                        })
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(err)?;
                    rules.push(SeccompRule::new(conditions).map_err(err)?);
                }
                allow.insert(*nr, rules);
            }
            Resolved::Errno(e) => {
                errnos.entry(*e).or_default().insert(*nr, vec![]);
            }
        }
    }
    let convert = |p: seccompiler::BpfProgram| -> Vec<SockFilter> {
        p.into_iter()
            .map(|i| SockFilter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect()
    };
    let mut programs = Vec::with_capacity(1 + errnos.len());
    let filter = SeccompFilter::new(
        allow,
        SeccompAction::Errno(DEFAULT_ERRNO),
        SeccompAction::Allow,
        target,
    )
    .map_err(err)?;
    programs.push(convert(
        seccompiler::BpfProgram::try_from(filter).map_err(err)?,
    ));
    for (errno, rules) in errnos {
        let filter = SeccompFilter::new(
            rules,
            SeccompAction::Allow,
            SeccompAction::Errno(errno),
            target,
        )
        .map_err(err)?;
        programs.push(convert(
            seccompiler::BpfProgram::try_from(filter).map_err(err)?,
        ));
    }
    Ok(programs)
}

// ---------------------------------------------------------------------------------------------
// Behaviour: each probe in a forked child that installed the programs.

/// What a probe ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Ok,
    Errno(i32),
    Killed(i32),
    Broken,
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Ok => write!(f, "ok"),
            Outcome::Errno(e) => write!(f, "{}", errno_name(*e)),
            Outcome::Killed(s) if *s == libc::SIGSYS => write!(f, "killed (SIGSYS)"),
            Outcome::Killed(s) => write!(f, "killed (signal {s})"),
            Outcome::Broken => write!(f, "probe failed"),
        }
    }
}

fn errno_name(e: i32) -> String {
    match e {
        libc::EPERM => "EPERM".into(),
        libc::ENOSYS => "ENOSYS".into(),
        libc::EINVAL => "EINVAL".into(),
        libc::EFAULT => "EFAULT".into(),
        libc::EAFNOSUPPORT => "EAFNOSUPPORT".into(),
        other => format!("errno {other}"),
    }
}

struct Probe {
    name: &'static str,
    docker: &'static str,
    call: Call,
    expect: fn(&Outcome) -> bool,
}

fn is_ok(o: &Outcome) -> bool {
    *o == Outcome::Ok
}
fn is_eperm(o: &Outcome) -> bool {
    *o == Outcome::Errno(libc::EPERM)
}
fn is_enosys(o: &Outcome) -> bool {
    *o == Outcome::Errno(libc::ENOSYS)
}
fn is_denied(o: &Outcome) -> bool {
    matches!(
        o,
        Outcome::Errno(libc::EPERM) | Outcome::Killed(libc::SIGSYS)
    )
}
fn is_killed(o: &Outcome) -> bool {
    *o == Outcome::Killed(libc::SIGSYS)
}

fn raw(nr: libc::c_long, a: [libc::c_long; 3]) -> libc::c_long {
    // SAFETY: the probes pass integers or null pointers; calls that could succeed and change
    // something only affect the throw-away child.
    unsafe { libc::syscall(nr, a[0], a[1], a[2]) }
}

fn clone_and_reap(flags: libc::c_long) -> libc::c_long {
    let pid = raw(libc::SYS_clone, [flags, 0, 0]);
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
}

fn socket(family: libc::c_long) -> libc::c_long {
    let s = raw(
        libc::SYS_socket,
        [family, libc::c_long::from(libc::SOCK_STREAM), 0],
    );
    if s >= 0 {
        // SAFETY: closing the fd we just got.
        unsafe { libc::close(s as RawFd) };
    }
    s
}

#[cfg(target_arch = "x86_64")]
fn int80_getpid() -> libc::c_long {
    let ret: i64;
    // SAFETY: i386 getpid (20) through int 0x80: no memory arguments.
    unsafe { std::arch::asm!("int 0x80", inlateout("rax") 20i64 => ret, options(nostack)) };
    if ret < 0 {
        // SAFETY: errno location of this thread.
        unsafe { *libc::__errno_location() = -ret as i32 };
        return -1;
    }
    ret
}

#[cfg(target_arch = "x86_64")]
fn x32_getpid() -> libc::c_long {
    raw(libc::SYS_getpid | 0x4000_0000, [0, 0, 0])
}

const AF_VSOCK: libc::c_long = libc::AF_VSOCK as libc::c_long;

const PROBES: &[Probe] = &[
    Probe {
        name: "getpid",
        docker: "allowed",
        call: || raw(libc::SYS_getpid, [0; 3]),
        expect: is_ok,
    },
    Probe {
        name: "mount",
        docker: "EPERM",
        call: || raw(libc::SYS_mount, [0; 3]),
        expect: is_eperm,
    },
    Probe {
        name: "keyctl",
        docker: "EPERM",
        call: || raw(libc::SYS_keyctl, [0, -3, 0]),
        expect: is_eperm,
    },
    Probe {
        name: "unshare(CLONE_NEWUSER)",
        docker: "EPERM",
        call: || {
            raw(
                libc::SYS_unshare,
                [libc::c_long::from(libc::CLONE_NEWUSER), 0, 0],
            )
        },
        expect: is_eperm,
    },
    Probe {
        name: "clone(SIGCHLD)",
        docker: "allowed",
        call: || clone_and_reap(libc::c_long::from(libc::SIGCHLD)),
        expect: is_ok,
    },
    Probe {
        name: "fork() (glibc clone flags)",
        docker: "allowed",
        // SAFETY: the grandchild exits at once.
        call: || match unsafe { libc::fork() } {
            0 => {
                // SAFETY: leave the grandchild immediately.
                unsafe { libc::_exit(0) }
            }
            pid if pid > 0 => {
                let mut st = 0;
                // SAFETY: reap our own child.
                unsafe { libc::waitpid(pid, &mut st, 0) };
                libc::c_long::from(pid)
            }
            _ => -1,
        },
        expect: is_ok,
    },
    Probe {
        name: "clone(CLONE_NEWUSER|SIGCHLD)",
        docker: "EPERM (masked eq)",
        call: || clone_and_reap(libc::c_long::from(libc::CLONE_NEWUSER | libc::SIGCHLD)),
        expect: is_eperm,
    },
    Probe {
        name: "clone3",
        docker: "ENOSYS",
        call: || raw(libc::SYS_clone3, [0; 3]),
        expect: is_enosys,
    },
    Probe {
        name: "socket(AF_UNIX)",
        docker: "allowed",
        call: || socket(libc::c_long::from(libc::AF_UNIX)),
        expect: is_ok,
    },
    Probe {
        name: "socket(AF_VSOCK)",
        docker: "EPERM",
        call: || socket(AF_VSOCK),
        expect: is_eperm,
    },
    Probe {
        name: "socket(AF_VSOCK | 1 << 32)",
        docker: "EPERM (kernel: int)",
        call: || socket(AF_VSOCK | (1 << 32)),
        expect: is_eperm,
    },
    Probe {
        name: "personality(0xffffffff)",
        docker: "allowed",
        call: || raw(libc::SYS_personality, [0xffff_ffff, 0, 0]),
        expect: is_ok,
    },
    Probe {
        name: "personality(-1 sign-extended)",
        docker: "allowed (kernel: uint)",
        call: || raw(libc::SYS_personality, [-1, 0, 0]),
        expect: is_ok,
    },
    Probe {
        name: "personality(READ_IMPLIES_EXEC)",
        docker: "EPERM",
        call: || raw(libc::SYS_personality, [0x0040_0000, 0, 0]),
        expect: is_eperm,
    },
    #[cfg(target_arch = "x86_64")]
    Probe {
        name: "i386 getpid (int 0x80)",
        docker: "isolab: killed",
        call: int80_getpid,
        expect: is_killed,
    },
    #[cfg(target_arch = "x86_64")]
    Probe {
        name: "x32 getpid",
        docker: "isolab: denied",
        call: x32_getpid,
        expect: is_denied,
    },
];

/// A probe: a raw system call (or a few), its result as the kernel returned it.
type Call = fn() -> libc::c_long;

/// Calls timed per run.
const CALLS: u32 = 20_000;

/// Calls whose cost under each filter is measured: one the kernel caches as always allowed,
/// one with an argument check (never cached), one denied.
const COSTED: &[(&str, Call)] = &[
    ("getppid (always allowed)", || {
        raw(libc::SYS_getppid, [0; 3])
    }),
    ("personality(0xffffffff) (arg check)", || {
        raw(libc::SYS_personality, [0xffff_ffff, 0, 0])
    }),
    ("socket(AF_UNIX, -1) (arg check)", || {
        raw(libc::SYS_socket, [libc::c_long::from(libc::AF_UNIX), -1, 0])
    }),
    ("clone(-1) (masked eq, fails)", || {
        raw(libc::SYS_clone, [-1, 0, 0])
    }),
    ("keyctl (denied)", || raw(libc::SYS_keyctl, [0, -3, 0])),
];

/// Median nanoseconds per `call` in a forked child that installed `programs`.
/// Forks; the child installs `programs`, runs `work` and sends its 8-byte result back
/// through a pipe. Returns the wait status and the bytes (`None` when they did not all
/// arrive), or `None` when the fork failed.
fn in_filtered_child(
    programs: &[Vec<SockFilter>],
    work: impl Fn() -> [u8; 8],
) -> Option<(i32, Option<[u8; 8]>)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: `fds` is a valid two-element array for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return None;
    }
    let (rd, wr) = (fds[0], fds[1]);
    // SAFETY: the child makes system calls, reads the clock and `_exit`s.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let mut sys = LinuxSecurity;
        for p in programs {
            if sys.install_filter(p, 0).is_err() {
                // SAFETY: leave the child at once.
                unsafe { libc::_exit(3) };
            }
        }
        let out = work();
        // SAFETY: writing 8 bytes we own to our pipe, then leaving.
        unsafe {
            libc::write(wr, out.as_ptr().cast(), 8);
            libc::_exit(0);
        }
    }
    // SAFETY: closing the parent's copy of the write end.
    unsafe { libc::close(wr) };
    let mut buf = [0u8; 8];
    // SAFETY: reading at most 8 bytes into an 8-byte buffer.
    let n = unsafe { libc::read(rd, buf.as_mut_ptr().cast(), 8) };
    // SAFETY: closing the read end we own.
    unsafe { libc::close(rd) };
    let mut status = 0;
    // SAFETY: waiting for our own child.
    if pid < 0 || unsafe { libc::waitpid(pid, &mut status, 0) } != pid {
        return None;
    }
    Some((status, (n == 8).then_some(buf)))
}

fn call_cost(programs: &[Vec<SockFilter>], call: Call) -> Option<f64> {
    let (_, bytes) = in_filtered_child(programs, || {
        let mut runs = [0f64; 15];
        for run in runs.iter_mut() {
            let start = Instant::now();
            for _ in 0..CALLS {
                std::hint::black_box(call());
            }
            *run = start.elapsed().as_nanos() as f64 / f64::from(CALLS);
        }
        runs.sort_by(f64::total_cmp);
        runs[runs.len() / 2].to_ne_bytes()
    })?;
    bytes.map(f64::from_ne_bytes)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Forks; the child installs `programs` and runs `call`, reporting its result through a pipe.
fn outcome(programs: &[Vec<SockFilter>], call: Call) -> Outcome {
    let result = in_filtered_child(programs, || {
        let rc = call();
        let code: i64 = if rc < 0 {
            i64::from(io::Error::last_os_error().raw_os_error().unwrap_or(-1))
        } else {
            0
        };
        code.to_ne_bytes()
    });
    let Some((status, bytes)) = result else {
        return Outcome::Broken;
    };
    if libc::WIFSIGNALED(status) {
        return Outcome::Killed(libc::WTERMSIG(status));
    }
    match bytes.map(i64::from_ne_bytes) {
        Some(0) => Outcome::Ok,
        Some(e) => Outcome::Errno(e as i32),
        None => Outcome::Broken,
    }
}
