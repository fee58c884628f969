//! Test doubles for running whole experiments without root and without waiting
//! for real work (feature `testing`; this crate's own tests enable it):
//!
//! - [`FakeLauncher`], a [`Launcher`] modelled on hyperfine's mock executor: a
//!   command "runs" by returning the result scripted for the first pattern its
//!   argv matches — exit status, standard output and error (so that a workload's
//!   parser finds its metric) and wall time, without sleeping. While "running",
//!   its fake pid is listed in its cgroup's `cgroup.procs`, so a cgroup cannot be
//!   removed under it and killing the cgroup ends it.
//! - [`FakeCgroupfs`], a cgroup2 tree in a directory with
//!   [`isolab_cgroups::testing::FakeKernel`] behind it: `mkdir` writes a cgroup's
//!   interface files (limit files read back as written), `rmdir` refuses busy or
//!   non-empty cgroups, and `kill` drops the pid from every `cgroup.procs`.
//!
//! ```no_run
//! # use std::time::Duration;
//! use isolab_lab::testing::{FakeCgroupfs, FakeLauncher, Scripted};
//! let root = tempfile::tempdir().unwrap();
//! let hierarchy = FakeCgroupfs::create(root.path()).unwrap();
//! let launcher = FakeLauncher::new().on(
//!     "sysbench cpu",
//!     [Scripted::success("events per second: 1000.00\n", Duration::from_secs(10))],
//! );
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use isolab_cgroups::testing::FakeKernel;
use isolab_cgroups::Hierarchy;

use crate::platform::launch::{log_path, Launch, Launcher, PerfCounts, Process, Waited};
use crate::platform::{ExitKind, Interrupt, PlatformError};

/// What a scripted command does.
#[derive(Debug, Clone, PartialEq)]
pub struct Scripted {
    /// How it ends.
    pub exit: ExitKind,
    /// What it prints on standard output.
    pub stdout: String,
    /// What it prints on standard error.
    pub stderr: String,
    /// How long it "runs": its exit is seen this long after its start, at once.
    pub wall: Duration,
}

impl Scripted {
    /// A command that prints `stdout` and exits with 0 after `wall`.
    pub fn success(stdout: impl Into<String>, wall: Duration) -> Scripted {
        Scripted {
            exit: ExitKind::Code(0),
            stdout: stdout.into(),
            stderr: String::new(),
            wall,
        }
    }
}

/// One start the [`FakeLauncher`] saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launched {
    /// The command.
    pub argv: Vec<String>,
    /// Its cgroup, relative to the mounts.
    pub cgroup: Option<PathBuf>,
    /// The name of its logs (`command`, `prepare`, `neighbour0`, …).
    pub log: String,
    /// Whether perf counters were asked for.
    pub count: bool,
}

#[derive(Debug)]
struct Rule {
    pattern: String,
    results: Vec<Scripted>,
    next: AtomicUsize,
}

/// Fake pids start above the largest `pid_max`, so they never name a real process.
const FIRST_FAKE_PID: u32 = 4_194_305;

/// A [`Launcher`] that runs nothing: see the [module](self) documentation.
#[derive(Debug)]
pub struct FakeLauncher {
    rules: Vec<Rule>,
    launched: Mutex<Vec<Launched>>,
    next_pid: AtomicU32,
}

impl Default for FakeLauncher {
    fn default() -> Self {
        FakeLauncher::new()
    }
}

impl FakeLauncher {
    /// A launcher with no scripts: every start fails as a missing program would.
    pub fn new() -> FakeLauncher {
        FakeLauncher {
            rules: Vec::new(),
            launched: Mutex::new(Vec::new()),
            next_pid: AtomicU32::new(FIRST_FAKE_PID),
        }
    }

    /// Commands whose argv, joined by spaces, contains `pattern` get `results` in
    /// turn, from the first again after the last. Patterns are tried in the order
    /// they were added.
    ///
    /// # Panics
    /// When `results` is empty.
    pub fn on(mut self, pattern: &str, results: impl IntoIterator<Item = Scripted>) -> Self {
        let results: Vec<Scripted> = results.into_iter().collect();
        assert!(!results.is_empty(), "no result scripted for `{pattern}`");
        self.rules.push(Rule {
            pattern: pattern.to_owned(),
            results,
            next: AtomicUsize::new(0),
        });
        self
    }

    /// Every start so far, in order.
    pub fn launched(&self) -> Vec<Launched> {
        self.launched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn script(&self, argv: &[String]) -> Option<Scripted> {
        let line = argv.join(" ");
        let rule = self.rules.iter().find(|r| line.contains(&r.pattern))?;
        let n = rule.next.fetch_add(1, Ordering::Relaxed);
        Some(rule.results[n % rule.results.len()].clone())
    }
}

impl Launcher for FakeLauncher {
    fn start(&self, launch: Launch<'_>) -> Result<Box<dyn Process>, PlatformError> {
        self.launched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Launched {
                argv: launch.argv.to_vec(),
                cgroup: launch.cgroup.map(|c| c.rel().to_path_buf()),
                log: launch.log.to_owned(),
                count: launch.count,
            });
        let program = launch.argv.first().cloned().unwrap_or_default();
        let Some(script) = self.script(launch.argv) else {
            return Err(PlatformError::Spawn {
                program,
                source: io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "the fake launcher has no script for `{}`",
                        launch.argv.join(" ")
                    ),
                ),
            });
        };
        let io_error = |path: PathBuf| {
            move |source| PlatformError::Io {
                action: "cannot write fake output",
                path,
                source,
            }
        };
        for (ext, text) in [("stdout", &script.stdout), ("stderr", &script.stderr)] {
            let path = log_path(launch.workdir, launch.log, ext);
            fs::write(&path, text).map_err(io_error(path.clone()))?;
        }
        let pid = self.next_pid.fetch_add(1, Ordering::Relaxed);
        let procs: Vec<PathBuf> = launch
            .cgroup
            .map(|c| c.paths().iter().map(|d| d.join("cgroup.procs")).collect())
            .unwrap_or_default();
        for path in &procs {
            add_pid(path, pid).map_err(io_error(path.clone()))?;
        }
        Ok(Box::new(FakeProcess {
            pid,
            script,
            started: Instant::now(),
            procs,
            signalled: Mutex::new(None),
            reaped: AtomicBool::new(false),
            count: launch.count,
        }))
    }
}

/// A scripted process.
#[derive(Debug)]
struct FakeProcess {
    pid: u32,
    script: Scripted,
    started: Instant,
    /// The `cgroup.procs` files that list it while it "runs".
    procs: Vec<PathBuf>,
    /// The signal that ended it, if one did.
    signalled: Mutex<Option<libc::c_int>>,
    reaped: AtomicBool,
    count: bool,
}

impl FakeProcess {
    fn signalled(&self) -> Option<libc::c_int> {
        *self.signalled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Ends it: its pid leaves its cgroup.
    fn end(&self) -> io::Result<(ExitKind, libc::rusage)> {
        self.reaped.store(true, Ordering::Relaxed);
        for path in &self.procs {
            remove_pid(path, self.pid)?;
        }
        let exit = self.signalled().map_or(self.script.exit, ExitKind::Signal);
        // SAFETY: rusage is plain old data; all-zero is a valid value.
        let rusage: libc::rusage = unsafe { std::mem::zeroed() };
        Ok((exit, rusage))
    }
}

impl Process for FakeProcess {
    fn started(&self) -> Instant {
        self.started
    }

    fn wait(&self, interrupt: &Interrupt, deadline: Option<Instant>) -> io::Result<Waited> {
        if self.signalled().is_some() {
            let (exit, rusage) = self.end()?;
            return Ok(Waited::Exited {
                exit,
                rusage,
                at: Instant::now(),
            });
        }
        if interrupt.is_triggered() {
            return Ok(Waited::Interrupted);
        }
        let at = self.started + self.script.wall;
        if deadline.is_some_and(|d| d < at) {
            return Ok(Waited::TimedOut);
        }
        let (exit, rusage) = self.end()?;
        Ok(Waited::Exited { exit, rusage, at })
    }

    fn reap(&self) -> io::Result<(ExitKind, libc::rusage)> {
        self.end()
    }

    fn signal_group(&self, signal: libc::c_int) {
        if signal == libc::SIGTERM || signal == libc::SIGKILL {
            let mut s = self.signalled.lock().unwrap_or_else(|e| e.into_inner());
            s.get_or_insert(signal);
        }
    }

    fn is_running(&self) -> bool {
        !self.reaped.load(Ordering::Relaxed)
            && self.signalled().is_none()
            && Instant::now() < self.started + self.script.wall
    }

    fn perf(&self) -> Result<PerfCounts, String> {
        if self.count {
            Ok(PerfCounts::default())
        } else {
            Err("perf counters unavailable: not counted".into())
        }
    }
}

fn add_pid(procs: &Path, pid: u32) -> io::Result<()> {
    let mut text = fs::read_to_string(procs)?;
    text.push_str(&format!("{pid}\n"));
    fs::write(procs, text)
}

fn remove_pid(procs: &Path, pid: u32) -> io::Result<()> {
    let text = match fs::read_to_string(procs) {
        Ok(t) => t,
        // Its cgroup is gone: so is it.
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let kept: String = text
        .lines()
        .filter(|l| l.trim() != pid.to_string())
        .map(|l| format!("{l}\n"))
        .collect();
    fs::write(procs, kept)
}

/// A cgroup2 file system in a directory, with the kernel's side faked by
/// [`isolab_cgroups::testing::FakeKernel`]: see the [module](self) documentation.
#[derive(Debug)]
pub struct FakeCgroupfs;

impl FakeCgroupfs {
    /// Writes the root cgroup of a fake cgroup2 mount (offering cpu, cpuset,
    /// memory, pids and io) into `root`, and returns the hierarchy on it.
    pub fn create(root: &Path) -> io::Result<Hierarchy> {
        fs::write(
            root.join("cgroup.controllers"),
            "cpuset cpu io memory pids\n",
        )?;
        fs::write(root.join("cgroup.subtree_control"), "")?;
        fs::write(root.join("cgroup.procs"), "")?;
        Ok(Hierarchy::v2(root).with_syscalls(FakeKernel::new(root, true)))
    }

    /// Every cgroup below the root, relative to it, sorted.
    pub fn cgroups(root: &Path) -> Vec<PathBuf> {
        let mut found = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    if let Ok(rel) = path.strip_prefix(root) {
                        found.push(rel.to_owned());
                    }
                    stack.push(path);
                }
            }
        }
        found.sort();
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_cgroups::{Cgroup, Limits};

    fn launch<'a>(argv: &'a [String], workdir: &'a Path, cgroup: &'a Cgroup) -> Launch<'a> {
        Launch {
            argv,
            workdir,
            log: "command",
            cgroup: Some(cgroup),
            count: true,
        }
    }

    /// A fake cgroupfs with the cgroup `isolab/t`, and a working directory.
    fn fixture() -> (tempfile::TempDir, tempfile::TempDir, Hierarchy, Cgroup) {
        let root = tempfile::tempdir().unwrap();
        let work = tempfile::tempdir().unwrap();
        let h = FakeCgroupfs::create(root.path()).unwrap();
        let cgroup = Cgroup::create(&h, Path::new("isolab/t")).unwrap();
        (root, work, h, cgroup)
    }

    #[test]
    fn a_scripted_command_logs_and_leaves_its_cgroup_when_reaped() {
        let (_root, work, _h, cgroup) = fixture();
        let launcher = FakeLauncher::new().on(
            "sleep",
            [
                Scripted::success("one\n", Duration::from_secs(5)),
                Scripted::success("two\n", Duration::from_secs(5)),
            ],
        );
        let argv = vec!["sleep".to_string(), "5".to_string()];
        let p = launcher.start(launch(&argv, work.path(), &cgroup)).unwrap();
        assert_eq!(cgroup.pids().unwrap(), vec![FIRST_FAKE_PID]);
        assert!(p.is_running());
        let interrupt = Interrupt::new().unwrap();
        let Waited::Exited { exit, at, .. } = p.wait(&interrupt, None).unwrap() else {
            panic!("expected an exit");
        };
        assert_eq!(exit, ExitKind::Code(0));
        assert_eq!(at - p.started(), Duration::from_secs(5));
        assert!(cgroup.pids().unwrap().is_empty());
        let out = fs::read_to_string(log_path(work.path(), "command", "stdout")).unwrap();
        assert_eq!(out, "one\n");
        // The next start gets the next result; an unknown command is not found.
        launcher.start(launch(&argv, work.path(), &cgroup)).unwrap();
        let out = fs::read_to_string(log_path(work.path(), "command", "stdout")).unwrap();
        assert_eq!(out, "two\n");
        let missing = vec!["nope".to_string()];
        let e = launcher
            .start(launch(&missing, work.path(), &cgroup))
            .err()
            .unwrap();
        assert!(matches!(e, PlatformError::Spawn { .. }), "{e}");
        assert_eq!(launcher.launched().len(), 3);
    }

    #[test]
    fn a_deadline_before_the_scripted_end_times_out_and_killing_the_cgroup_ends_it() {
        let (root, work, h, cgroup) = fixture();
        let launcher =
            FakeLauncher::new().on("x", [Scripted::success("", Duration::from_secs(60))]);
        let argv = vec!["x".to_string()];
        let p = launcher.start(launch(&argv, work.path(), &cgroup)).unwrap();
        let interrupt = Interrupt::new().unwrap();
        let soon = Some(Instant::now() + Duration::from_secs(1));
        assert!(matches!(
            p.wait(&interrupt, soon).unwrap(),
            Waited::TimedOut
        ));
        // Killing the cgroup drops its pid, as the kernel would.
        assert!(Cgroup::open(&h, Path::new("isolab/t"))
            .unwrap()
            .kill_all()
            .is_ok());
        p.signal_group(libc::SIGKILL);
        assert_eq!(p.reap().unwrap().0, ExitKind::Signal(libc::SIGKILL));
        cgroup.remove().unwrap();
        // The ancestors it created go with it.
        assert!(FakeCgroupfs::cgroups(root.path()).is_empty());
    }

    #[test]
    fn limits_are_read_back_as_written() {
        let (_root, _work, _h, cgroup) = fixture();
        let limits = Limits {
            cpuset: Some("1".parse().unwrap()),
            memory_max: Some(isolab_cgroups::Bytes::gib(1)),
            pids_max: Some(100),
            ..Limits::default()
        };
        let read = crate::platform::limit::limit(&cgroup, &limits).unwrap();
        assert!(limits.differences(&read).is_empty(), "{read:?}");
    }
}
