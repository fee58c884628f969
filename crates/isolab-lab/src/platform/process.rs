//! Spawning a command into a cgroup and waiting for it without polling: the child
//! is born in the cgroup (see [`super::clone`]), software perf counters it inherits are
//! enabled when it execs (so the whole process tree is counted from its first
//! instruction), and the parent waits on a pidfd together with an interrupt pipe and
//! a timeout.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use isolab_cgroups::CloneTarget;

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// Exited with this status.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl ExitKind {
    /// Shell-style status: the code, or 128 + signal.
    pub fn status(self) -> i32 {
        match self {
            ExitKind::Code(c) => c,
            ExitKind::Signal(s) => 128 + s,
        }
    }

    /// Whether it exited with 0.
    pub fn success(self) -> bool {
        self == ExitKind::Code(0)
    }
}

impl fmt::Display for ExitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExitKind::Code(c) => write!(f, "exit status {c}"),
            ExitKind::Signal(s) => write!(f, "killed by signal {s}"),
        }
    }
}

/// Ctrl-C / SIGTERM delivery to whatever is running: a flag plus a self-pipe that
/// wakes the wait of the current command at once.
#[derive(Debug)]
pub struct Interrupt {
    flag: AtomicBool,
    read: OwnedFd,
    write: OwnedFd,
}

impl Interrupt {
    /// A fresh, untriggered interrupt.
    pub fn new() -> io::Result<Self> {
        let (read, write) = pipe()?;
        Ok(Interrupt {
            flag: AtomicBool::new(false),
            read,
            write,
        })
    }

    /// Marks the interrupt and wakes any wait. Safe to call from any thread, repeatedly.
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let byte = 1u8;
        // SAFETY: writing one byte from a valid stack buffer to a pipe fd we own.
        // A full pipe (EAGAIN) already wakes the reader, so the result is ignored.
        unsafe { libc::write(self.write.as_raw_fd(), std::ptr::from_ref(&byte).cast(), 1) };
    }

    /// Whether it was triggered.
    pub fn is_triggered(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe2 to fill.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both fds are open and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Counters of a process tree from software perf events.
#[derive(Debug, Clone, Copy, Default)]
pub struct PerfCounts {
    /// Context switches (voluntary and involuntary) of all tasks of the tree.
    pub context_switches: u64,
    /// Times a task of the tree moved to another cpu.
    pub cpu_migrations: u64,
}

/// Software perf counters that follow a process and its future children.
struct PerfCounters {
    ctx: OwnedFd,
    migrations: OwnedFd,
}

const PERF_TYPE_SOFTWARE: u32 = 1;
const PERF_COUNT_SW_CONTEXT_SWITCHES: u64 = 3;
const PERF_COUNT_SW_CPU_MIGRATIONS: u64 = 4;
// perf_event_attr bit flags (see perf_event_open(2)).
const ATTR_DISABLED: u64 = 1 << 0;
const ATTR_INHERIT: u64 = 1 << 1;
const ATTR_ENABLE_ON_EXEC: u64 = 1 << 12;
/// The kinds a run counts, in [`PerfCounters`]' order.
const KINDS: [u64; 2] = [PERF_COUNT_SW_CONTEXT_SWITCHES, PERF_COUNT_SW_CPU_MIGRATIONS];
/// A run's counters: disabled until the counted process execs, inherited by its children.
const RUN_FLAGS: u64 = ATTR_DISABLED | ATTR_INHERIT | ATTR_ENABLE_ON_EXEC;

/// The first 64 bytes of `struct perf_event_attr` (PERF_ATTR_SIZE_VER0), which is
/// all a counting software event needs.
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// The attributes of the software counter `config`.
fn software_counter(config: u64, flags: u64) -> PerfEventAttr {
    PerfEventAttr {
        kind: PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config,
        flags,
        ..PerfEventAttr::default()
    }
}

/// Opens the software counter `config` on `pid` (0: the calling thread), on any cpu.
fn open_software_counter(pid: libc::pid_t, config: u64, flags: u64) -> io::Result<OwnedFd> {
    let attr = software_counter(config, flags);
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr of the size it
    // declares; the other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            std::ptr::from_ref(&attr),
            pid,
            -1 as libc::c_int,
            -1 as libc::c_int,
            super::clone::PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the syscall returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// One disabled counter of each kind a run counts, opened on the calling thread the
/// first time a run's counters are, and held for the life of the process; `None` where
/// they cannot be opened (each run then opens and closes its own as before; where those
/// fail too, the run says why).
///
/// Why: the kernel switches its software-event hooks on when the first counter of a kind
/// is created and off when the last one is freed, and each switch rewrites kernel code
/// on every cpu (a static key: `static_key_slow_inc`/`_dec`, text patching with an
/// interrupt to each cpu). Without a counter held between runs every run switched both
/// kinds on and off again, about 0.3 ms a run on this project's two-cpu machines (see
/// docs/benchmarks.md). A disabled counter counts nothing; it only keeps the hooks on,
/// which they are anyway while a run is counted.
fn held_counters() -> Option<&'static [OwnedFd; 2]> {
    static HELD: OnceLock<Option<[OwnedFd; 2]>> = OnceLock::new();
    HELD.get_or_init(|| {
        let [ctx, migrations] = KINDS.map(|kind| open_software_counter(0, kind, ATTR_DISABLED));
        Some([ctx.ok()?, migrations.ok()?])
    })
    .as_ref()
}

/// The value of the counting perf event `fd`.
fn read_counter(fd: &OwnedFd) -> io::Result<u64> {
    let mut value = 0u64;
    // SAFETY: reading 8 bytes into a u64 on the stack from an fd we own.
    let n = unsafe { libc::read(fd.as_raw_fd(), std::ptr::from_mut(&mut value).cast(), 8) };
    if n == 8 {
        Ok(value)
    } else {
        Err(io::Error::last_os_error())
    }
}

impl PerfCounters {
    /// Opens both counters on the calling thread, disabled, inherited by the children
    /// it starts from now on and enabled in each when it execs (with [`held_counters`]
    /// held, so that no run switches the kernel's hooks). Only for a thread that starts
    /// one child and nothing else while they are open ([`start_counted_by_a_thread`]'s).
    fn open_inherited() -> io::Result<Self> {
        held_counters();
        Self::of(KINDS.map(|kind| open_software_counter(0, kind, RUN_FLAGS)))
    }

    /// The counters a child opened on itself ([`super::clone::start_counting`]): each
    /// descriptor is now this process's own, or the error that child got.
    fn from_child(own: &[super::clone::OwnCounter; 2]) -> io::Result<Self> {
        Self::of(
            own.each_ref()
                .map(|counter| match counter.fd.load(Ordering::Acquire) {
                    // SAFETY: the child opened it in the descriptor table it shared with this
                    // process, and nothing else knows of it.
                    fd if fd >= 0 => Ok(unsafe { OwnedFd::from_raw_fd(fd) }),
                    errno => Err(io::Error::from_raw_os_error(-errno)),
                }),
        )
    }

    /// Both counters, in [`KINDS`]' order, or the first error (the other is closed).
    fn of([ctx, migrations]: [io::Result<OwnedFd>; 2]) -> io::Result<Self> {
        Ok(PerfCounters {
            ctx: ctx?,
            migrations: migrations?,
        })
    }

    fn read(&self) -> io::Result<PerfCounts> {
        Ok(PerfCounts {
            context_switches: read_counter(&self.ctx)?,
            cpu_migrations: read_counter(&self.migrations)?,
        })
    }
}

/// A command to start inside a cgroup.
pub(crate) struct Spawn<'a> {
    pub argv: &'a [String],
    pub workdir: &'a Path,
    pub stdout: File,
    pub stderr: File,
    /// The cgroup to start in (its cgroup2 directory and v1 `tasks` files).
    pub cgroup: Option<CloneTarget>,
    /// Arm perf counters on the child before it execs.
    pub count: bool,
}

/// A started child.
pub(crate) struct Child {
    pub pid: libc::pid_t,
    pidfd: OwnedFd,
    perf: Result<PerfCounters, io::Error>,
    pub started: Instant,
}

/// How waiting for a child ended.
pub enum Waited {
    /// It exited; with its resource usage (of it and its reaped descendants).
    Exited {
        /// How it ended.
        exit: ExitKind,
        /// Its resource usage.
        rusage: libc::rusage,
        /// When the exit was seen.
        at: Instant,
    },
    /// The interrupt fired first.
    Interrupted,
    /// The deadline passed first.
    TimedOut,
}

impl Spawn<'_> {
    /// Starts the command: born in the cgroup (see [`super::clone`]), in a process group
    /// of its own, and (when counting) counted from its exec: the child opens the perf
    /// counters on itself, disabled until it execs and inherited by its children, in the
    /// descriptor table it shares with this process until then. (The parent opened them
    /// on the child's pid before, while the child waited on a pipe: a child sharing this
    /// process's memory until it execs cannot wait.) Where the child cannot share them,
    /// [`start_counted_by_a_thread`].
    pub fn start(self) -> io::Result<Child> {
        crate::phases::mark("launch");
        let exec = super::clone::Exec::new(self.argv, self.workdir)?;
        let devnull = File::open("/dev/null")?;
        let (v2_dir, v1) = match &self.cgroup {
            Some(t) => (
                t.v2_dir.as_ref().map(AsRawFd::as_raw_fd),
                t.v1.raw_fds().collect(),
            ),
            None => (None, Vec::new()),
        };
        let target = super::clone::Target {
            v2_dir,
            v1: &v1,
            stdio: [
                devnull.as_raw_fd(),
                self.stdout.as_raw_fd(),
                self.stderr.as_raw_fd(),
            ],
            counters: &[],
        };
        crate::phases::mark("prepare");
        // `started` is taken as soon as the clone returns: the child has then execed
        // (its clone waits for that, see `super::clone`).
        let (cloned, perf, started) = if self.count {
            held_counters();
            let attrs = KINDS.map(|kind| software_counter(kind, RUN_FLAGS));
            let own = attrs.each_ref().map(|attr| super::clone::OwnCounter {
                attr: std::ptr::from_ref(attr).cast(),
                fd: AtomicI32::new(-libc::ENOSYS),
            });
            let counting = super::clone::Target {
                counters: &own,
                ..target
            };
            match super::clone::start_counting(&exec, &counting)? {
                Some(cloned) => (cloned, PerfCounters::from_child(&own), Instant::now()),
                None => start_counted_by_a_thread(&exec, &target)?,
            }
        } else {
            let cloned = super::clone::start(&exec, &target)?;
            (cloned, Err(io::Error::other("not counted")), Instant::now())
        };
        crate::phases::mark("clone");
        cloned.exec()?;
        crate::phases::mark("exec");
        Ok(Child {
            pid: cloned.pid,
            pidfd: cloned.pidfd,
            perf,
            started,
        })
    }
}

/// Where a child cannot share this process's memory and descriptors until it execs
/// (see `super::clone`): started by a thread of its own that opens the perf counters on
/// itself first. The child inherits them, they are enabled in it when it execs (and in
/// its children), its counts go to them when it exits, and the thread ends once the
/// child has started, so that nothing else it starts is counted.
fn start_counted_by_a_thread(
    exec: &super::clone::Exec,
    target: &super::clone::Target<'_>,
) -> io::Result<(super::clone::Cloned, io::Result<PerfCounters>, Instant)> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("isolab-spawn".into())
            .stack_size(64 << 10)
            .spawn_scoped(scope, || {
                let perf = PerfCounters::open_inherited();
                let cloned = super::clone::start(exec, target)?;
                io::Result::Ok((cloned, perf, Instant::now()))
            })?
            .join()
            .map_err(|_| io::Error::other("the thread starting the command panicked"))?
    })
}

impl Child {
    /// Waits for exit, the interrupt, or the deadline, whichever comes first.
    pub fn wait(&self, interrupt: &Interrupt, deadline: Option<Instant>) -> io::Result<Waited> {
        loop {
            if interrupt.is_triggered() {
                return Ok(Waited::Interrupted);
            }
            let timeout_ms = match deadline {
                None => -1,
                Some(d) => {
                    let left = d.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Waited::TimedOut);
                    }
                    left.as_millis().min(i32::MAX as u128) as i32 + 1
                }
            };
            let mut fds = [
                libc::pollfd {
                    fd: self.pidfd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: interrupt.fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // SAFETY: polling two valid pollfds in a stack array.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout_ms) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[0].revents != 0 {
                let at = Instant::now();
                let (exit, rusage) = self.reap()?;
                return Ok(Waited::Exited { exit, rusage, at });
            }
        }
    }

    /// Reaps the (exited or killed) child, returning its status and rusage.
    pub fn reap(&self) -> io::Result<(ExitKind, libc::rusage)> {
        let mut status = 0;
        // SAFETY: rusage is plain old data; zeroed is a valid value.
        let mut rusage: libc::rusage = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: waiting for our own child with valid out-pointers.
            let r = unsafe { libc::wait4(self.pid, &mut status, 0, &mut rusage) };
            if r == self.pid {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        let exit = if libc::WIFSIGNALED(status) {
            ExitKind::Signal(libc::WTERMSIG(status))
        } else {
            ExitKind::Code(libc::WEXITSTATUS(status))
        };
        Ok((exit, rusage))
    }

    /// Sends `signal` to the child's process group.
    pub fn signal_group(&self, signal: libc::c_int) {
        // SAFETY: signalling the process group our child leads (setpgid in pre_exec).
        unsafe { libc::kill(-self.pid, signal) };
    }

    /// The perf counts so far, or why there are none.
    pub fn perf(&self) -> Result<PerfCounts, String> {
        match &self.perf {
            Ok(c) => c.read().map_err(|e| format!("reading perf counters: {e}")),
            Err(e) => Err(format!("perf counters unavailable: {e}")),
        }
    }
}

/// Waits until something listens on TCP `port` or has bound UDP `port` (IPv4 or
/// IPv6), reading `proc/net/{tcp,udp}{,6}`; false after `timeout` or when `alive`
/// says the server died.
pub(crate) fn wait_listening(
    proc_root: &Path,
    port: u16,
    timeout: Duration,
    alive: impl Fn() -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if listening(proc_root, port) {
            return true;
        }
        if !alive() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn listening(proc_root: &Path, port: u16) -> bool {
    // TCP sockets in LISTEN (0A); a bound, unconnected UDP socket shows state 07.
    [
        ("net/tcp", "0A"),
        ("net/tcp6", "0A"),
        ("net/udp", "07"),
        ("net/udp6", "07"),
    ]
    .iter()
    .any(|(f, state)| {
        std::fs::read_to_string(proc_root.join(f))
            .is_ok_and(|t| parse_ports(&t, state).contains(&port))
    })
}

/// Whether process `pid` is in a network namespace other than isolab's own: a
/// container's (`ip netns exec`'s child, or an engine's init, is in its cgroup or
/// running a moment before it switches, and its /proc/PID/net is ours until then).
pub(crate) fn in_other_network_namespace(proc_root: &Path, pid: u32) -> bool {
    let ns = |p: std::path::PathBuf| std::fs::read_link(p).ok();
    let theirs = ns(proc_root.join(pid.to_string()).join("ns/net"));
    theirs.is_some() && theirs != ns(proc_root.join("self/ns/net"))
}

/// Whether process `pid`, in a network namespace other than isolab's own, has a TCP
/// socket listening on `port` there.
pub(crate) fn listens_in_other_namespace(proc_root: &Path, pid: u32, port: u16) -> bool {
    in_other_network_namespace(proc_root, pid)
        && tcp_listening(&proc_root.join(pid.to_string()), port)
}

/// Whether the network namespace of the /proc entry `dir` (`/proc/self`,
/// `/proc/PID`) has a TCP socket listening on `port`, IPv4 or IPv6.
pub(crate) fn tcp_listening(dir: &Path, port: u16) -> bool {
    ["net/tcp", "net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(dir.join(f)).is_ok_and(|t| parse_ports(&t, "0A").contains(&port))
    })
}

/// Local ports of the sockets in `state` (hex, as the kernel prints it: `0A` is a
/// TCP socket in LISTEN) in a /proc/net/{tcp,udp} table.
pub(crate) fn parse_ports(table: &str, wanted: &str) -> Vec<u16> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let mut cols = line.split_whitespace();
            let local = cols.nth(1)?;
            let state = cols.nth(1)?;
            (state == wanted).then_some(())?;
            u16::from_str_radix(local.rsplit(':').next()?, 16).ok()
        })
        .collect()
}

/// Whether `pid` is a running isolab process (by its name), and not a zombie: a
/// killed isolab whose parent has not reaped it yet keeps its pid and name but owns
/// nothing any more, so `gc` may collect what it left.
pub(crate) fn isolab_running(proc_root: &Path, pid: u32) -> bool {
    let dir = proc_root.join(pid.to_string());
    let named =
        std::fs::read_to_string(dir.join("comm")).is_ok_and(|c| c.trim().starts_with("isolab"));
    let running = std::fs::read_to_string(dir.join("stat"))
        .ok()
        .and_then(|s| {
            s.rsplit_once(')')
                .and_then(|(_, rest)| rest.trim_start().chars().next())
        })
        .is_some_and(|state| state != 'Z' && state != 'X');
    named && running
}

/// A TCP port that is free on loopback right now.
pub(crate) fn free_port() -> io::Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

/// Tail of a log file, at most `max` bytes, as text.
pub(crate) fn read_tail(path: &Path, max: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let start = bytes.len().saturating_sub(max);
            let mut s = String::from_utf8_lossy(&bytes[start..]).into_owned();
            if start > 0 {
                s.insert_str(0, &format!("[… {start} earlier bytes not kept …]\n"));
            }
            s
        }
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_listening_ports() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1452 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 20 4 30 10 -1";
        assert_eq!(parse_ports(table, "0A"), vec![0x1451]);
    }

    #[test]
    fn a_bound_udp_socket_counts_as_listening() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("net")).unwrap();
        // A UDP server bound to 0.0.0.0:5299 (state 07), as in /proc/net/udp.
        let udp = "   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
  123: 00000000:14B3 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 0";
        std::fs::write(dir.path().join("net/udp"), udp).unwrap();
        assert!(listening(dir.path(), 5299));
        assert!(!listening(dir.path(), 5300));
    }

    /// Starts `argv` outside any cgroup, logging into a temporary directory.
    fn spawn(argv: &[String], count: bool) -> (tempfile::TempDir, Child) {
        let dir = tempfile::tempdir().unwrap();
        let stdout = File::create(dir.path().join("o")).unwrap();
        let stderr = File::create(dir.path().join("e")).unwrap();
        let child = Spawn {
            argv,
            workdir: dir.path(),
            stdout,
            stderr,
            cgroup: None,
            count,
        }
        .start()
        .unwrap();
        (dir, child)
    }

    #[test]
    fn interrupt_wakes_a_wait() {
        let argv = vec!["sleep".to_string(), "30".to_string()];
        let (_dir, child) = spawn(&argv, false);
        let interrupt = Interrupt::new().unwrap();
        interrupt.trigger();
        assert!(matches!(
            child.wait(&interrupt, None).unwrap(),
            Waited::Interrupted
        ));
        child.signal_group(libc::SIGKILL);
        let (exit, _) = child.reap().unwrap();
        assert_eq!(exit, ExitKind::Signal(libc::SIGKILL));
    }

    #[test]
    fn counts_a_process_tree_from_exec() {
        let argv: Vec<String> = ["sh", "-c", "for i in 1 2 3 4 5; do sleep 0.01; done"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (_dir, child) = spawn(&argv, true);
        let interrupt = Interrupt::new().unwrap();
        let Waited::Exited { exit, rusage, .. } = child
            .wait(&interrupt, Some(Instant::now() + Duration::from_secs(10)))
            .unwrap()
        else {
            panic!("expected exit");
        };
        assert!(exit.success());
        // Five sleeps in child processes: each blocks at least once.
        assert!(
            rusage.ru_nvcsw >= 5,
            "voluntary switches {}",
            rusage.ru_nvcsw
        );
        match child.perf() {
            Ok(c) => assert!(c.context_switches >= 5, "{c:?}"),
            Err(why) => isolab_skip::skip(format!("the perf counters' check: {why}")),
        }
    }

    /// Each counted command's counters are its own: one started while another runs is
    /// not counted in the other's (each child opens its own on itself), nor is an
    /// uncounted one started meanwhile.
    #[test]
    fn commands_started_meanwhile_are_not_counted_in_a_running_ones_counters() {
        let quiet = ["sh", "-c", "sleep 0.5"].map(String::from);
        let busy = ["sh", "-c", "for i in $(seq 20); do sleep 0.001; done"].map(String::from);
        let interrupt = Interrupt::new().unwrap();
        let (_d1, first) = spawn(&quiet, true);
        let (_d2, second) = spawn(&busy, true);
        let (_d3, uncounted) = spawn(&busy, false);
        for child in [&second, &uncounted, &first] {
            child.wait(&interrupt, None).unwrap();
        }
        let (first, second) = match (first.perf(), second.perf()) {
            (Ok(first), Ok(second)) => (first, second),
            (Err(why), _) | (_, Err(why)) => {
                isolab_skip::skip(format!("perf counters cannot be opened here: {why}"));
                return;
            }
        };
        // 20 sleeps in 20 child processes: each blocks at least once.
        assert!(second.context_switches >= 20, "{second:?}");
        assert!(
            first.context_switches < 20,
            "{first:?} (the second: {second:?})"
        );
        assert!(uncounted.perf().is_err());
    }

    /// Where the child cannot open its counters in a table it shares (a kernel or
    /// architecture without that way), a thread of its own opens them for it to inherit:
    /// the process tree is counted from its exec all the same.
    #[test]
    fn the_thread_way_counts_a_process_tree_from_exec_too() {
        let dir = tempfile::tempdir().unwrap();
        let out = File::create(dir.path().join("o")).unwrap();
        let argv = ["sh", "-c", "for i in 1 2 3 4 5; do sleep 0.01; done"].map(String::from);
        let exec = super::super::clone::Exec::new(&argv, dir.path()).unwrap();
        let target = super::super::clone::Target {
            v2_dir: None,
            v1: &[],
            stdio: [out.as_raw_fd(), out.as_raw_fd(), out.as_raw_fd()],
            counters: &[],
        };
        let (cloned, perf, _) = start_counted_by_a_thread(&exec, &target).unwrap();
        cloned.exec().unwrap();
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(cloned.pid, &mut status, 0) };
        assert_eq!(libc::WEXITSTATUS(status), 0);
        match perf.and_then(|p| p.read()) {
            Ok(c) => assert!(c.context_switches >= 5, "{c:?}"),
            Err(why) => isolab_skip::skip(format!("the perf counters' check: {why}")),
        }
    }

    /// The counters held between runs are opened once, stay open across runs, and count
    /// nothing (they are never enabled): they only keep the kernel's hooks on.
    #[test]
    fn the_held_counters_outlive_the_runs_and_count_nothing() {
        let argv = ["sh", "-c", "sleep 0.01"].map(String::from);
        let mut held = Vec::new();
        for _ in 0..2 {
            let (_dir, child) = spawn(&argv, true);
            child.wait(&Interrupt::new().unwrap(), None).unwrap();
            if let Err(why) = child.perf() {
                isolab_skip::skip(format!("perf counters cannot be opened here: {why}"));
                return;
            }
            let fds = held_counters().expect("held when a run's counters could be opened");
            held.push(fds.each_ref().map(AsRawFd::as_raw_fd));
            for fd in fds {
                let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()));
                assert_eq!(link.unwrap().to_string_lossy(), "anon_inode:[perf_event]");
                assert_eq!(read_counter(fd).unwrap(), 0);
            }
        }
        assert_eq!(held[0], held[1]);
    }

    #[test]
    fn deadline_times_out() {
        let argv = vec!["sleep".to_string(), "30".to_string()];
        let (_dir, child) = spawn(&argv, false);
        let interrupt = Interrupt::new().unwrap();
        assert!(matches!(
            child
                .wait(&interrupt, Some(Instant::now() + Duration::from_millis(50)))
                .unwrap(),
            Waited::TimedOut
        ));
        child.signal_group(libc::SIGKILL);
        child.reap().unwrap();
    }
}
