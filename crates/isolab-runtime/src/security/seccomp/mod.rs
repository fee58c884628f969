//! Seccomp: Docker's default profile as a data table, specialised to a capability set, and
//! OCI `linux.seccomp` profiles ([`oci`]), both compiled to classic BPF with libseccomp
//! ([`bpf`]).
//!
//! The default profile is moby's `profiles/seccomp/default.json` of Docker 28.2.2 (a test
//! checks the table against that file, `fixtures/moby-28.2.2-default.json`, rule by rule for
//! every capability and both architectures): the default action is `ERRNO(EPERM)`; 361
//! calls are allowed unconditionally (not the `io_uring_*` calls, which left it in moby 25); a few are allowed only with an argument check (`socket`
//! unless the family is `AF_VSOCK`, `personality` for five values, `clone` without namespace
//! flags); calls tied to a capability (`mount`, `unshare`, `setns`, `reboot`, `bpf`, …) are
//! allowed only when the container keeps that capability; without `CAP_SYS_ADMIN`, `clone3`
//! fails with `ENOSYS` so that libc falls back to `clone`, whose flags the filter can inspect.
//! Syscall names are resolved by libseccomp, for any architecture it knows; a name an
//! architecture does not have is skipped there.
//!
//! Differences from Docker, on purpose:
//! - only the native ABI is allowed: a call from another ABI (i386 `int 0x80` or x32 on
//!   x86_64, AArch32 on aarch64) kills the process (`SECCOMP_RET_KILL_PROCESS`). Docker also
//!   allows the x86/x32 (or arm) sub-architectures. (A bundle's own profile, see
//!   [`oci`], gets the architectures it lists.)
//! - `EQ` and `MASKED_EQ` checks on `int` arguments ([`ArgWidth::Bits32`]) compare the low 32
//!   bits only (what the kernel uses), as `MASKED_EQ` with the mask limited to 32 bits; an
//!   `NE` check on an `int` argument compares all 64 bits, as in Docker's profile under
//!   runc: libseccomp has no masked `NE` and refuses two checks of one argument in a rule.
//!
//! The BPF is one program: libseccomp returns a per-rule errno (the `clone3` → `ENOSYS`
//! rule) in the same program as the default `EPERM`.

pub mod bpf;
pub mod cache;
pub mod oci;

use std::collections::BTreeMap;

use libseccomp::{ScmpAction, ScmpArch, ScmpArgCompare, ScmpCompareOp, ScmpSyscall};
use serde_json::{json, Value};

use super::caps::{Capability, CapabilitySet};
use super::error::SecurityError;
pub use bpf::{BpfProgram, CompiledFilter, SockFilter};

/// `EPERM`, the errno Docker's profile returns for every call it does not allow.
pub const DEFAULT_ERRNO: u32 = libc::EPERM as u32;

/// The namespace flags Docker forbids in `clone` without `CAP_SYS_ADMIN`:
/// `CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
/// CLONE_NEWPID | CLONE_NEWNET` = `0x7E020000`.
pub const CLONE_NAMESPACE_FLAGS: u64 = 0x7E02_0000;

/// `AF_VSOCK`, the socket family Docker's profile refuses.
const AF_VSOCK: u64 = 40;

/// A CPU architecture the profile can be compiled for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// x86_64 (`AUDIT_ARCH_X86_64`).
    X86_64,
    /// aarch64 (`AUDIT_ARCH_AARCH64`).
    Aarch64,
}

impl Arch {
    /// The architecture this program runs on, if supported.
    pub fn native() -> Result<Arch, SecurityError> {
        match std::env::consts::ARCH {
            "x86_64" => Ok(Arch::X86_64),
            "aarch64" => Ok(Arch::Aarch64),
            other => Err(SecurityError::UnsupportedArch { arch: other }),
        }
    }

    /// The name used in messages (`x86_64`, `aarch64`).
    pub fn name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Aarch64 => "aarch64",
        }
    }

    /// The libseccomp / OCI name (`SCMP_ARCH_X86_64`, `SCMP_ARCH_AARCH64`).
    pub fn oci_name(self) -> &'static str {
        match self {
            Arch::X86_64 => "SCMP_ARCH_X86_64",
            Arch::Aarch64 => "SCMP_ARCH_AARCH64",
        }
    }

    /// libseccomp's architecture.
    pub fn scmp(self) -> ScmpArch {
        match self {
            Arch::X86_64 => ScmpArch::X8664,
            Arch::Aarch64 => ScmpArch::Aarch64,
        }
    }
}

/// The number of a syscall on `arch`, if libseccomp knows the name there (`None` for a name
/// it does not know, or that `arch` does not have, such as `chown32` on x86_64).
pub fn syscall_number(name: &str, arch: Arch) -> Option<i64> {
    ScmpSyscall::from_name_by_arch(name, arch.scmp())
        .ok()
        .map(|nr| i64::from(nr.as_raw_syscall()))
        .filter(|&nr| nr >= 0)
}

/// How wide the compared argument is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgWidth {
    /// The low 32 bits (for `int` / `unsigned int` arguments).
    Bits32,
    /// All 64 bits (for `unsigned long` arguments such as `clone` flags).
    Bits64,
}

/// A comparison of one syscall argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgOp {
    /// `arg == value`.
    Eq,
    /// `arg != value`.
    Ne,
    /// `arg & mask == value`.
    MaskedEq {
        /// The bits looked at.
        mask: u64,
    },
}

/// One argument condition of a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgCheck {
    /// Argument index, 0..=5.
    pub index: u8,
    /// Width of the comparison.
    pub width: ArgWidth,
    /// The comparison.
    pub op: ArgOp,
    /// The value compared with.
    pub value: u64,
}

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    /// Let the call through.
    Allow,
    /// Fail the call with this errno.
    Errno(u32),
}

/// One entry of the profile: names, an action, optional argument checks (all must hold), and
/// the capability/architecture conditions under which the entry is part of the profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileRule {
    /// Syscall names; names unknown on an architecture are skipped there.
    pub names: &'static [&'static str],
    /// What the rule does.
    pub action: RuleAction,
    /// Argument checks, all of which must hold (empty: the rule always matches).
    pub args: &'static [ArgCheck],
    /// The rule applies only if the container keeps all of these capabilities.
    pub includes_caps: &'static [&'static str],
    /// The rule applies only if the container keeps none of these capabilities.
    pub excludes_caps: &'static [&'static str],
    /// The rule applies only on these architectures (empty: on all).
    pub arches: &'static [Arch],
}

impl ProfileRule {
    const fn allow(names: &'static [&'static str]) -> ProfileRule {
        ProfileRule {
            names,
            action: RuleAction::Allow,
            args: &[],
            includes_caps: &[],
            excludes_caps: &[],
            arches: &[],
        }
    }

    const fn allow_with_cap(names: &'static [&'static str], cap: &'static [&'static str]) -> Self {
        ProfileRule {
            includes_caps: cap,
            ..ProfileRule::allow(names)
        }
    }

    const fn allow_if(names: &'static [&'static str], args: &'static [ArgCheck]) -> Self {
        ProfileRule {
            args,
            ..ProfileRule::allow(names)
        }
    }

    const fn allow_on(names: &'static [&'static str], arches: &'static [Arch]) -> Self {
        ProfileRule {
            arches,
            ..ProfileRule::allow(names)
        }
    }

    /// Whether the rule is part of the profile for this capability set and architecture.
    pub fn applies(&self, caps: CapabilitySet, arch: Arch) -> bool {
        let has = |name: &&str| Capability::from_name(name).is_ok_and(|cap| caps.contains(cap));
        (self.arches.is_empty() || self.arches.contains(&arch))
            && self.includes_caps.iter().all(has)
            && !self.excludes_caps.iter().any(has)
    }
}

const fn eq32(index: u8, value: u64) -> ArgCheck {
    ArgCheck {
        index,
        width: ArgWidth::Bits32,
        op: ArgOp::Eq,
        value,
    }
}

/// The unconditional allowlist of Docker's default profile (names of every architecture;
/// 32-bit-only names such as `chown32` have no number on x86_64/aarch64 and are skipped).
pub const DEFAULT_ALLOWED: &[&str] = &[
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "bind",
    "brk",
    "cachestat",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "clock_adjtime",
    "clock_adjtime64",
    "clock_getres",
    "clock_getres_time64",
    "clock_gettime",
    "clock_gettime64",
    "clock_nanosleep",
    "clock_nanosleep_time64",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fadvise64_64",
    "fallocate",
    "fanotify_mark",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchown32",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "ftruncate",
    "ftruncate64",
    "futex",
    "futex_requeue",
    "futex_time64",
    "futex_wait",
    "futex_waitv",
    "futex_wake",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "getegid32",
    "geteuid",
    "geteuid32",
    "getgid",
    "getgid32",
    "getgroups",
    "getgroups32",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresgid32",
    "getresuid",
    "getresuid32",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "get_thread_area",
    "gettid",
    "gettimeofday",
    "getuid",
    "getuid32",
    "getxattr",
    "getxattrat",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "ioctl",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "ipc",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lchown32",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listmount",
    "listxattr",
    "listxattrat",
    "llistxattr",
    "_llseek",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "lstat64",
    "madvise",
    "map_shadow_stack",
    "membarrier",
    "memfd_create",
    "memfd_secret",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mmap2",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedreceive_time64",
    "mq_timedsend",
    "mq_timedsend_time64",
    "mq_unlink",
    "mremap",
    "mseal",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "name_to_handle_at",
    "nanosleep",
    "newfstatat",
    "_newselect",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "ppoll_time64",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pselect6_time64",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recv",
    "recvfrom",
    "recvmmsg",
    "recvmmsg_time64",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "removexattrat",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "riscv_hwprobe",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_rr_get_interval_time64",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "semtimedop_time64",
    "send",
    "sendfile",
    "sendfile64",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsgid32",
    "setfsuid",
    "setfsuid32",
    "setgid",
    "setgid32",
    "setgroups",
    "setgroups32",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setregid32",
    "setresgid",
    "setresgid32",
    "setresuid",
    "setresuid32",
    "setreuid",
    "setreuid32",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_thread_area",
    "set_tid_address",
    "setuid",
    "setuid32",
    "setxattr",
    "setxattrat",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "sigprocmask",
    "sigreturn",
    "socketcall",
    "socketpair",
    "splice",
    "stat",
    "stat64",
    "statfs",
    "statfs64",
    "statmount",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_gettime64",
    "timer_settime",
    "timer_settime64",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_gettime64",
    "timerfd_settime",
    "timerfd_settime64",
    "times",
    "tkill",
    "truncate",
    "truncate64",
    "ugetrlimit",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "uretprobe",
    "utime",
    "utimensat",
    "utimensat_time64",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
];

/// Docker's default profile, entry by entry.
pub const DEFAULT_PROFILE: &[ProfileRule] = &[
    ProfileRule::allow(DEFAULT_ALLOWED),
    // moby gates these on kernel >= 4.8 (where ptrace can no longer bypass seccomp); the
    // runtime needs a newer kernel anyway (clone3, pidfds), so the gate is dropped.
    ProfileRule::allow(&["process_vm_readv", "process_vm_writev", "ptrace"]),
    ProfileRule::allow_if(
        &["socket"],
        &[ArgCheck {
            index: 0,
            width: ArgWidth::Bits32,
            op: ArgOp::Ne,
            value: AF_VSOCK,
        }],
    ),
    // PER_LINUX, PER_LINUX32, UNAME26, UNAME26|PER_LINUX32, and the 0xffffffff query.
    ProfileRule::allow_if(&["personality"], &[eq32(0, 0x0)]),
    ProfileRule::allow_if(&["personality"], &[eq32(0, 0x8)]),
    ProfileRule::allow_if(&["personality"], &[eq32(0, 0x2_0000)]),
    ProfileRule::allow_if(&["personality"], &[eq32(0, 0x2_0008)]),
    ProfileRule::allow_if(&["personality"], &[eq32(0, 0xffff_ffff)]),
    ProfileRule::allow_on(
        &[
            "arm_fadvise64_64",
            "arm_sync_file_range",
            "sync_file_range2",
            "breakpoint",
            "cacheflush",
            "set_tls",
        ],
        &[Arch::Aarch64],
    ),
    ProfileRule::allow_on(&["arch_prctl", "modify_ldt"], &[Arch::X86_64]),
    ProfileRule::allow_with_cap(&["open_by_handle_at"], &["CAP_DAC_READ_SEARCH"]),
    ProfileRule::allow_with_cap(
        &[
            "bpf",
            "clone",
            "clone3",
            "fanotify_init",
            "fsconfig",
            "fsmount",
            "fsopen",
            "fspick",
            "lookup_dcookie",
            "lsm_get_self_attr",
            "lsm_list_modules",
            "lsm_set_self_attr",
            "mount",
            "mount_setattr",
            "move_mount",
            "open_tree",
            "perf_event_open",
            "quotactl",
            "quotactl_fd",
            "setdomainname",
            "sethostname",
            "setns",
            "syslog",
            "umount",
            "umount2",
            "unshare",
        ],
        &["CAP_SYS_ADMIN"],
    ),
    ProfileRule {
        excludes_caps: &["CAP_SYS_ADMIN"],
        ..ProfileRule::allow_if(
            &["clone"],
            &[ArgCheck {
                index: 0,
                width: ArgWidth::Bits64,
                op: ArgOp::MaskedEq {
                    mask: CLONE_NAMESPACE_FLAGS,
                },
                value: 0,
            }],
        )
    },
    ProfileRule {
        action: RuleAction::Errno(libc::ENOSYS as u32),
        excludes_caps: &["CAP_SYS_ADMIN"],
        ..ProfileRule::allow(&["clone3"])
    },
    ProfileRule::allow_with_cap(&["reboot"], &["CAP_SYS_BOOT"]),
    ProfileRule::allow_with_cap(&["chroot"], &["CAP_SYS_CHROOT"]),
    ProfileRule::allow_with_cap(
        &["delete_module", "init_module", "finit_module"],
        &["CAP_SYS_MODULE"],
    ),
    ProfileRule::allow_with_cap(&["acct"], &["CAP_SYS_PACCT"]),
    ProfileRule::allow_with_cap(
        &[
            "kcmp",
            "pidfd_getfd",
            "process_madvise",
            "process_vm_readv",
            "process_vm_writev",
            "ptrace",
        ],
        &["CAP_SYS_PTRACE"],
    ),
    ProfileRule::allow_with_cap(&["iopl", "ioperm"], &["CAP_SYS_RAWIO"]),
    ProfileRule::allow_with_cap(
        &["settimeofday", "stime", "clock_settime", "clock_settime64"],
        &["CAP_SYS_TIME"],
    ),
    ProfileRule::allow_with_cap(&["vhangup"], &["CAP_SYS_TTY_CONFIG"]),
    ProfileRule::allow_with_cap(
        &[
            "get_mempolicy",
            "mbind",
            "set_mempolicy",
            "set_mempolicy_home_node",
        ],
        &["CAP_SYS_NICE"],
    ),
    ProfileRule::allow_with_cap(&["syslog"], &["CAP_SYSLOG"]),
    ProfileRule::allow_with_cap(&["bpf"], &["CAP_BPF"]),
    ProfileRule::allow_with_cap(&["perf_event_open"], &["CAP_PERFMON"]),
];

/// What one syscall ends up with in a specialised profile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolved {
    /// Allowed whatever its arguments.
    Allow,
    /// Allowed when one of these argument-check lists holds entirely (an OR of ANDs).
    AllowIf(Vec<&'static [ArgCheck]>),
    /// Fails with this errno (instead of the default `EPERM`).
    Errno(u32),
}

/// A digest (64-bit FNV-1a) of a rule table: every rule's names, action, argument
/// checks and capability and architecture conditions, in order. A `const fn`, so that
/// [`DEFAULT_PROFILE_DIGEST`] is computed by the compiler and a container's start pays
/// nothing for it; part of the cache key of the programs compiled from
/// [`DEFAULT_PROFILE`], so that an edited table never reuses an older program.
pub const fn table_digest(rules: &[ProfileRule]) -> u64 {
    let mut h = FNV_OFFSET;
    let mut r = 0;
    while r < rules.len() {
        let rule = &rules[r];
        h = fnv_strs(h, rule.names);
        h = match rule.action {
            RuleAction::Allow => fnv_u64(h, 0),
            RuleAction::Errno(e) => fnv_u64(fnv_u64(h, 1), e as u64),
        };
        let mut a = 0;
        while a < rule.args.len() {
            let c = &rule.args[a];
            h = fnv_u64(h, c.index as u64);
            h = fnv_u64(
                h,
                match c.width {
                    ArgWidth::Bits32 => 32,
                    ArgWidth::Bits64 => 64,
                },
            );
            h = match c.op {
                ArgOp::Eq => fnv_u64(h, 0),
                ArgOp::Ne => fnv_u64(h, 1),
                ArgOp::MaskedEq { mask } => fnv_u64(fnv_u64(h, 2), mask),
            };
            h = fnv_u64(h, c.value);
            a += 1;
        }
        h = fnv_strs(fnv_bytes(h, b"|"), rule.includes_caps);
        h = fnv_strs(fnv_bytes(h, b"|"), rule.excludes_caps);
        let mut i = 0;
        while i < rule.arches.len() {
            h = fnv_u64(
                h,
                match rule.arches[i] {
                    Arch::X86_64 => 1,
                    Arch::Aarch64 => 2,
                },
            );
            i += 1;
        }
        h = fnv_bytes(h, b";");
        r += 1;
    }
    h
}

/// [`table_digest`] of [`DEFAULT_PROFILE`], computed at compile time.
pub const DEFAULT_PROFILE_DIGEST: u64 = table_digest(DEFAULT_PROFILE);

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;

const fn fnv_bytes(mut h: u64, bytes: &[u8]) -> u64 {
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
        i += 1;
    }
    h
}

const fn fnv_u64(h: u64, v: u64) -> u64 {
    fnv_bytes(h, &v.to_le_bytes())
}

/// Each of `strs` followed by a comma (no name of the table holds one).
const fn fnv_strs(mut h: u64, strs: &[&str]) -> u64 {
    let mut i = 0;
    while i < strs.len() {
        h = fnv_bytes(fnv_bytes(h, strs[i].as_bytes()), b",");
        i += 1;
    }
    h
}

/// The profile specialised to a capability set and an architecture: syscall name and
/// number → what happens. Calls absent from the map fail with [`DEFAULT_ERRNO`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedProfile {
    /// The architecture it was resolved for.
    pub arch: Arch,
    /// `(name, number)` → decision, ordered by name.
    pub calls: BTreeMap<&'static str, (i64, Resolved)>,
}

impl ResolvedProfile {
    /// Specialises [`DEFAULT_PROFILE`] for a container keeping `caps`, on `arch`.
    pub fn docker_default(caps: CapabilitySet, arch: Arch) -> ResolvedProfile {
        ResolvedProfile::from_rules(DEFAULT_PROFILE, caps, arch)
    }

    /// Specialises any rule table (same semantics as the default one).
    pub fn from_rules(rules: &[ProfileRule], caps: CapabilitySet, arch: Arch) -> ResolvedProfile {
        let mut calls: BTreeMap<&'static str, (i64, Resolved)> = BTreeMap::new();
        for rule in rules.iter().filter(|r| r.applies(caps, arch)) {
            for &name in rule.names {
                let Some(nr) = syscall_number(name, arch) else {
                    continue;
                };
                let entry = calls.entry(name).or_insert((nr, Resolved::AllowIf(vec![])));
                entry.1 = match (&entry.1, rule.action) {
                    // An unconditional allow beats any conditional one.
                    (Resolved::Allow, _) => Resolved::Allow,
                    (_, RuleAction::Allow) if rule.args.is_empty() => Resolved::Allow,
                    (Resolved::AllowIf(prev), RuleAction::Allow) => {
                        let mut all = prev.clone();
                        all.push(rule.args);
                        Resolved::AllowIf(all)
                    }
                    (_, RuleAction::Errno(e)) => Resolved::Errno(e),
                    (Resolved::Errno(e), RuleAction::Allow) => Resolved::Errno(*e),
                };
            }
        }
        ResolvedProfile { arch, calls }
    }

    /// What happens to `name` (`None`: the default `EPERM`).
    pub fn decision(&self, name: &str) -> Option<&Resolved> {
        self.calls.get(name).map(|(_, d)| d)
    }

    /// Compiles the profile with libseccomp to BPF programs, to be installed in this order
    /// (one program: libseccomp returns the per-rule errnos in the same program).
    pub fn compile(&self) -> Result<Vec<BpfProgram>, SecurityError> {
        const WHAT: &str = "Docker's default profile";
        let mut filter = bpf::FilterBuilder::new(
            WHAT,
            ScmpAction::Errno(DEFAULT_ERRNO as i32),
            &[self.arch.scmp()],
        )?;
        for (&name, (_, decision)) in &self.calls {
            // Rules take the number of the *native* architecture; libseccomp translates it
            // by name to the filter's architecture.
            let syscall = bpf::resolve(name).ok_or(SecurityError::SeccompUnknownSyscall {
                name: name.to_string(),
            })?;
            let describe = |action: &'static str| move || format!("the rule {action} for {name}");
            match decision {
                Resolved::Allow => {
                    filter.add(ScmpAction::Allow, syscall, &[], describe("ALLOW"))?;
                }
                Resolved::AllowIf(alternatives) => {
                    for checks in alternatives {
                        let conditions: Vec<ScmpArgCompare> =
                            checks.iter().map(arg_compare).collect();
                        filter.add(
                            ScmpAction::Allow,
                            syscall,
                            &conditions,
                            describe("ALLOW with argument checks"),
                        )?;
                    }
                }
                Resolved::Errno(e) => {
                    filter.add(
                        ScmpAction::Errno(*e as i32),
                        syscall,
                        &[],
                        describe("ERRNO"),
                    )?;
                }
            }
        }
        Ok(vec![filter.export()?])
    }

    /// The same profile as an OCI `linux.seccomp` object (runc/crun, through libseccomp).
    pub fn to_oci(&self) -> Value {
        let mut plain: Vec<&str> = Vec::new();
        let mut entries: Vec<Value> = Vec::new();
        for (name, (_, decision)) in &self.calls {
            match decision {
                Resolved::Allow => plain.push(name),
                Resolved::AllowIf(alternatives) => {
                    for checks in alternatives {
                        entries.push(json!({
                            "names": [name],
                            "action": "SCMP_ACT_ALLOW",
                            "args": checks.iter().map(oci_arg).collect::<Vec<_>>(),
                        }));
                    }
                }
                Resolved::Errno(e) => entries.push(json!({
                    "names": [name],
                    "action": "SCMP_ACT_ERRNO",
                    "errnoRet": e,
                })),
            }
        }
        let mut syscalls = vec![json!({"names": plain, "action": "SCMP_ACT_ALLOW"})];
        syscalls.extend(entries);
        json!({
            "defaultAction": "SCMP_ACT_ERRNO",
            "defaultErrnoRet": DEFAULT_ERRNO,
            "architectures": [self.arch.oci_name()],
            "syscalls": syscalls,
        })
    }
}

/// The libseccomp comparison for one check: 64-bit ones as they are; 32-bit `EQ` and
/// `MASKED_EQ` as `MASKED_EQ` with the mask limited to the low 32 bits (exactly what the
/// kernel reads of an `int`); 32-bit `NE` over all 64 bits (see the module documentation).
fn arg_compare(check: &ArgCheck) -> ScmpArgCompare {
    const LOW32: u64 = 0xffff_ffff;
    let index = u32::from(check.index);
    match (check.width, check.op) {
        (ArgWidth::Bits64, ArgOp::Eq) => {
            ScmpArgCompare::new(index, ScmpCompareOp::Equal, check.value)
        }
        (ArgWidth::Bits64, ArgOp::MaskedEq { mask }) => {
            ScmpArgCompare::new(index, ScmpCompareOp::MaskedEqual(mask), check.value)
        }
        (ArgWidth::Bits32, ArgOp::Eq) => ScmpArgCompare::new(
            index,
            ScmpCompareOp::MaskedEqual(LOW32),
            check.value & LOW32,
        ),
        (ArgWidth::Bits32, ArgOp::MaskedEq { mask }) => ScmpArgCompare::new(
            index,
            ScmpCompareOp::MaskedEqual(mask & LOW32),
            check.value & LOW32,
        ),
        (_, ArgOp::Ne) => ScmpArgCompare::new(index, ScmpCompareOp::NotEqual, check.value),
    }
}

fn oci_arg(check: &ArgCheck) -> Value {
    match check.op {
        ArgOp::Eq => json!({"index": check.index, "value": check.value, "op": "SCMP_CMP_EQ"}),
        ArgOp::Ne => json!({"index": check.index, "value": check.value, "op": "SCMP_CMP_NE"}),
        // libseccomp's MASKED_EQ: (arg & value) == valueTwo.
        ArgOp::MaskedEq { mask } => json!({
            "index": check.index, "value": mask, "valueTwo": check.value, "op": "SCMP_CMP_MASKED_EQ"
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    use oci_spec::runtime::{LinuxSeccompAction, LinuxSeccompOperator, LinuxSyscall};

    fn default_caps() -> CapabilitySet {
        CapabilitySet::docker_default()
    }

    /// One argument check as an OCI profile writes it: `(index, op, value, valueTwo)`.
    type OciCheck = (usize, &'static str, u64, u64);

    /// What a profile does with one syscall name, in a form both a rule table and an OCI
    /// profile reduce to: allowed outright, allowed when one of these check sets holds (an OR
    /// of ANDs, each set ordered), or failing with an errno other than the default.
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Decision {
        allow: bool,
        allow_if: BTreeSet<Vec<OciCheck>>,
        errno: BTreeSet<u32>,
    }

    /// `table` specialised to `caps` on `arch`, name by name: every name of every rule that
    /// applies, whether or not this libseccomp knows its number on `arch` (so a name missing
    /// on one side shows even when neither side could compile it here).
    fn table_decisions(
        table: &[ProfileRule],
        caps: CapabilitySet,
        arch: Arch,
    ) -> BTreeMap<String, Decision> {
        let mut calls: BTreeMap<String, Decision> = BTreeMap::new();
        for rule in table.iter().filter(|r| r.applies(caps, arch)) {
            for name in rule.names {
                let d = calls.entry(name.to_string()).or_default();
                match rule.action {
                    RuleAction::Allow if rule.args.is_empty() => d.allow = true,
                    RuleAction::Allow => {
                        let mut checks: Vec<OciCheck> = rule
                            .args
                            .iter()
                            .map(|c| match c.op {
                                ArgOp::Eq => (c.index.into(), "EQ", c.value, 0),
                                ArgOp::Ne => (c.index.into(), "NE", c.value, 0),
                                ArgOp::MaskedEq { mask } => {
                                    (c.index.into(), "MASKED_EQ", mask, c.value)
                                }
                            })
                            .collect();
                        checks.sort_unstable();
                        d.allow_if.insert(checks);
                    }
                    RuleAction::Errno(e) => {
                        d.errno.insert(e);
                    }
                }
            }
        }
        calls
    }

    /// A rule of moby's `default.json`: an OCI syscall rule (read by the runtime's own parser,
    /// oci-spec's `LinuxSyscall`, which `oci::compile` takes) plus the conditions under which
    /// Docker puts it in a container's profile.
    #[derive(serde::Deserialize)]
    struct MobyRule {
        #[serde(flatten)]
        rule: LinuxSyscall,
        #[serde(default)]
        includes: MobyFilter,
        #[serde(default)]
        excludes: MobyFilter,
    }

    #[derive(serde::Deserialize, Default)]
    struct MobyFilter {
        #[serde(default)]
        caps: Vec<String>,
        /// moby's architecture names (`amd64`, `arm64`, `x32`, `s390x`, …).
        #[serde(default)]
        arches: Vec<String>,
        #[serde(rename = "minKernel")]
        min_kernel: Option<String>,
    }

    #[derive(serde::Deserialize)]
    struct MobyProfile {
        #[serde(rename = "defaultAction")]
        default_action: LinuxSeccompAction,
        #[serde(rename = "defaultErrnoRet")]
        default_errno_ret: Option<u32>,
        syscalls: Vec<MobyRule>,
    }

    /// moby's name of an architecture (`goToNative` in its `seccomp_linux.go`).
    fn moby_arch(arch: Arch) -> &'static str {
        match arch {
            Arch::X86_64 => "amd64",
            Arch::Aarch64 => "arm64",
        }
    }

    /// moby's profile as Docker specialises it for a container keeping `caps` on `arch`
    /// (`setupSeccomp` in moby's `seccomp_linux.go`: a rule is dropped when it excludes the
    /// architecture or a capability the container keeps, or includes an architecture list
    /// without this one or a capability the container lacks), name by name. A kernel gate
    /// (`minKernel` 4.8, of `ptrace` and `process_vm_*`) counts as met: the runtime needs
    /// newer kernels anyway, and the table drops that gate. Only `ALLOW` and `ERRNO` rules
    /// occur in moby's profile; another action or operator fails the test.
    fn moby_decisions(
        profile: &MobyProfile,
        caps: CapabilitySet,
        arch: Arch,
    ) -> BTreeMap<String, Decision> {
        let keeps = |name: &String| Capability::from_name(name).is_ok_and(|c| caps.contains(c));
        let arch = moby_arch(arch).to_string();
        let mut calls: BTreeMap<String, Decision> = BTreeMap::new();
        for MobyRule {
            rule,
            includes,
            excludes,
        } in &profile.syscalls
        {
            assert!(
                excludes.min_kernel.is_none(),
                "{:?}: a kernel exclusion",
                rule.names()
            );
            if excludes.arches.contains(&arch)
                || excludes.caps.iter().any(keeps)
                || (!includes.arches.is_empty() && !includes.arches.contains(&arch))
                || !includes.caps.iter().all(keeps)
            {
                continue;
            }
            for name in rule.names() {
                let d = calls.entry(name.clone()).or_default();
                let args = rule.args().clone().unwrap_or_default();
                match rule.action() {
                    LinuxSeccompAction::ScmpActAllow if args.is_empty() => d.allow = true,
                    LinuxSeccompAction::ScmpActAllow => {
                        let mut checks: Vec<OciCheck> = args
                            .iter()
                            .map(|a| {
                                let op = match a.op() {
                                    LinuxSeccompOperator::ScmpCmpEq => "EQ",
                                    LinuxSeccompOperator::ScmpCmpNe => "NE",
                                    LinuxSeccompOperator::ScmpCmpMaskedEq => "MASKED_EQ",
                                    other => panic!("{name}: operator {other:?}"),
                                };
                                (a.index(), op, a.value(), a.value_two().unwrap_or(0))
                            })
                            .collect();
                        checks.sort_unstable();
                        d.allow_if.insert(checks);
                    }
                    LinuxSeccompAction::ScmpActErrno => {
                        d.errno.insert(rule.errno_ret().unwrap_or(DEFAULT_ERRNO));
                    }
                    other => panic!("{name}: action {other:?}"),
                }
            }
        }
        calls
    }

    /// The built-in table is moby's default profile (`fixtures/moby-28.2.2-default.json`,
    /// `profiles/seccomp/default.json` of Docker 28.2.2): specialised as Docker does to a
    /// capability set and an architecture, both give every syscall name the same decision
    /// with the same argument checks. Checked on x86_64 and aarch64, for no capabilities,
    /// Docker's 14, all, and Docker's 14 with each capability added or removed, so that
    /// every capability and architecture `includes` and `excludes` of moby's rules is
    /// exercised both ways. The architectures a filter admits differ on purpose (see the
    /// module documentation): Docker also allows the sub-architectures (x86 and x32 on
    /// x86_64, arm on aarch64), the table the native one.
    #[test]
    fn the_default_table_is_mobys_default_profile() {
        const MOBY: &str = include_str!("fixtures/moby-28.2.2-default.json");
        let moby: MobyProfile = serde_json::from_str(MOBY).unwrap();
        assert_eq!(moby.default_action, LinuxSeccompAction::ScmpActErrno);
        assert_eq!(moby.default_errno_ret, Some(DEFAULT_ERRNO));
        let mut cap_sets = vec![CapabilitySet::empty(), default_caps(), CapabilitySet::all()];
        for cap in CapabilitySet::all().iter() {
            let mut more = default_caps();
            more.insert(cap);
            let mut fewer = default_caps();
            fewer.remove(cap);
            cap_sets.extend([more, fewer]);
        }
        // Each difference once, with the configurations it shows in.
        let mut failures: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for arch in [Arch::X86_64, Arch::Aarch64] {
            for &caps in &cap_sets {
                let theirs = moby_decisions(&moby, caps, arch);
                let ours = table_decisions(DEFAULT_PROFILE, caps, arch);
                let names =
                    |m: &BTreeMap<String, Decision>| m.keys().cloned().collect::<BTreeSet<_>>();
                let only_moby: Vec<_> = names(&theirs).difference(&names(&ours)).cloned().collect();
                let only_table: Vec<_> =
                    names(&ours).difference(&names(&theirs)).cloned().collect();
                let differ: Vec<String> = ours
                    .iter()
                    .filter_map(|(name, d)| {
                        let t = theirs.get(name)?;
                        (t != d).then(|| format!("{name}: table {d:?}, moby {t:?}"))
                    })
                    .collect();
                if !(only_moby.is_empty() && only_table.is_empty() && differ.is_empty()) {
                    failures
                        .entry(format!(
                            "only in moby's: {only_moby:?}; only in the table: {only_table:?}; \
                             different: {differ:?}"
                        ))
                        .or_default()
                        .push(format!("{arch:?} with [{caps}]"));
                }
            }
        }
        let report: Vec<String> = failures
            .iter()
            .map(|(what, cases)| format!("{what}\n  in {} cases, first {}", cases.len(), cases[0]))
            .collect();
        assert!(report.is_empty(), "{}", report.join("\n"));
    }

    #[test]
    fn syscall_numbers_match_libc_on_this_arch() {
        let arch = Arch::native().unwrap();
        for (name, nr) in [
            ("getpid", libc::SYS_getpid),
            ("write", libc::SYS_write),
            ("clone", libc::SYS_clone),
            ("clone3", libc::SYS_clone3),
            ("unshare", libc::SYS_unshare),
            ("mount", libc::SYS_mount),
            ("keyctl", libc::SYS_keyctl),
            ("add_key", libc::SYS_add_key),
            ("reboot", libc::SYS_reboot),
            ("socket", libc::SYS_socket),
            ("personality", libc::SYS_personality),
            ("execve", libc::SYS_execve),
            ("setns", libc::SYS_setns),
        ] {
            assert_eq!(syscall_number(name, arch), Some(nr), "{name}");
        }
        assert_eq!(syscall_number("close", Arch::X86_64), Some(3));
        assert_eq!(syscall_number("close", Arch::Aarch64), Some(57));
        assert_eq!(syscall_number("open", Arch::Aarch64), None);
        assert_eq!(syscall_number("nosuchcall", Arch::X86_64), None);
        // Known to libseccomp, but only on 32-bit architectures.
        assert_eq!(syscall_number("chown32", Arch::X86_64), None);
    }

    #[test]
    fn allowlist_has_docker_size_and_no_duplicates() {
        let mut names = DEFAULT_ALLOWED.to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DEFAULT_ALLOWED.len());
        assert!(DEFAULT_ALLOWED.len() > 340, "{}", DEFAULT_ALLOWED.len());
        for gone in [
            "io_uring_setup",
            "io_uring_enter",
            "keyctl",
            "add_key",
            "mount",
        ] {
            assert!(!names.contains(&gone), "{gone} must not be allowed");
        }
    }

    #[test]
    fn default_caps_profile_blocks_privileged_calls() {
        let p = ResolvedProfile::docker_default(default_caps(), Arch::X86_64);
        assert!(p.calls.len() > 300, "{}", p.calls.len());
        for blocked in [
            "mount",
            "umount2",
            "unshare",
            "setns",
            "reboot",
            "keyctl",
            "add_key",
            "bpf",
            "kcmp",
            "init_module",
            "clock_settime",
            "perf_event_open",
            "iopl",
        ] {
            assert_eq!(p.decision(blocked), None, "{blocked}");
        }
        assert_eq!(p.decision("getpid"), Some(&Resolved::Allow));
        assert_eq!(p.decision("chroot"), Some(&Resolved::Allow));
        assert_eq!(p.decision("ptrace"), Some(&Resolved::Allow));
        assert_eq!(p.decision("arch_prctl"), Some(&Resolved::Allow));
        assert_eq!(p.decision("clone3"), Some(&Resolved::Errno(38)));
        match p.decision("clone") {
            Some(Resolved::AllowIf(alts)) => {
                assert_eq!(alts.len(), 1);
                assert_eq!(
                    alts[0][0].op,
                    ArgOp::MaskedEq {
                        mask: CLONE_NAMESPACE_FLAGS
                    }
                );
            }
            other => panic!("clone: {other:?}"),
        }
        match p.decision("personality") {
            Some(Resolved::AllowIf(alts)) => assert_eq!(alts.len(), 5),
            other => panic!("personality: {other:?}"),
        }
        let aarch = ResolvedProfile::docker_default(default_caps(), Arch::Aarch64);
        assert_eq!(aarch.decision("arch_prctl"), None);
        assert_eq!(aarch.decision("open"), None);
        assert_eq!(aarch.decision("openat"), Some(&Resolved::Allow));
    }

    #[test]
    fn capabilities_widen_the_profile() {
        let mut caps = default_caps();
        caps.insert(Capability::SYS_ADMIN);
        let p = ResolvedProfile::docker_default(caps, Arch::X86_64);
        for call in ["mount", "unshare", "setns", "clone", "clone3", "bpf"] {
            assert_eq!(p.decision(call), Some(&Resolved::Allow), "{call}");
        }
        assert_eq!(p.decision("reboot"), None);
        let all = ResolvedProfile::docker_default(CapabilitySet::all(), Arch::X86_64);
        for call in [
            "reboot",
            "init_module",
            "clock_settime",
            "iopl",
            "vhangup",
            "mbind",
        ] {
            assert_eq!(all.decision(call), Some(&Resolved::Allow), "{call}");
        }
        let none = ResolvedProfile::docker_default(CapabilitySet::empty(), Arch::X86_64);
        assert_eq!(none.decision("chroot"), None);
    }

    #[test]
    fn compiles_for_both_arches_within_bpf_limits() {
        for arch in [Arch::X86_64, Arch::Aarch64] {
            for caps in [default_caps(), CapabilitySet::all(), CapabilitySet::empty()] {
                let programs = ResolvedProfile::docker_default(caps, arch)
                    .compile()
                    .unwrap();
                assert!(!programs.is_empty());
                assert!(programs.iter().all(|p| p.len() < bpf::BPF_MAXINSNS));
                // One program, with or without the clone3 → ENOSYS rule.
                assert_eq!(programs.len(), 1, "{arch:?} {caps}");
            }
        }
    }

    #[test]
    fn oci_profile_has_docker_shape() {
        let v = ResolvedProfile::docker_default(default_caps(), Arch::X86_64).to_oci();
        assert_eq!(v["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(v["defaultErrnoRet"], 1);
        assert_eq!(v["architectures"][0], "SCMP_ARCH_X86_64");
        let syscalls = v["syscalls"].as_array().unwrap();
        let plain = syscalls[0]["names"].as_array().unwrap();
        assert!(plain.iter().any(|n| n == "getpid"));
        assert!(!plain.iter().any(|n| n == "mount"));
        let clone = syscalls.iter().find(|s| s["names"][0] == "clone").unwrap();
        assert_eq!(clone["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
        assert_eq!(clone["args"][0]["value"], CLONE_NAMESPACE_FLAGS);
        assert_eq!(clone["args"][0]["valueTwo"], 0);
        let clone3 = syscalls.iter().find(|s| s["names"][0] == "clone3").unwrap();
        assert_eq!(clone3["errnoRet"], 38);
        let spec: oci_spec::runtime::LinuxSeccomp = serde_json::from_value(v).unwrap();
        assert_eq!(
            spec.default_action(),
            oci_spec::runtime::LinuxSeccompAction::ScmpActErrno
        );
    }
}
