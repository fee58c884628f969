//! The instance supervisor: the life of every instance on every platform. The
//! experiment's scope cgroup, the prepare and cleanup commands, the instance's own
//! cgroup, the neighbours around the body, the latency probe, the measured command
//! (with the workload's server, the host sampler and perf counters), and the
//! removal of all of it, also on failure; and `gc` of what killed runs left.
//!
//! Every process goes through a [`Launcher`], so the whole life runs against a
//! scripted launcher and a fake cgroupfs in tests.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isolab_cgroups::{Cgroup, Controller, Hierarchy};

use super::launch::{ended_within, log_path, wait_or_kill, Launch, Launcher, Process};
use super::measured::Measured;
use super::process::{read_tail, wait_listening};
use super::{Execution, Interrupt, Job, NeighbourHost, PlatformError};
use crate::neighbour::{start_neighbours, NeighbourSite};
use crate::telemetry::CpuSampler;

/// Where the supervisor finds the kernel's interfaces.
#[derive(Debug, Clone)]
pub struct SupervisorConfig {
    /// The cgroup layout (v1, hybrid or v2).
    pub hierarchy: Hierarchy,
    /// The proc file system (`/proc`).
    pub proc_root: PathBuf,
    /// Parent of every cgroup isolab creates, relative to the cgroup roots (`isolab`).
    pub cgroup_base: PathBuf,
    /// Host utilisation sampling interval.
    pub sample_interval: Duration,
    /// The host scheduling-latency probe that runs during every run and aborts a
    /// run whose neighbours make the host unusable; `None` turns it off.
    pub probe: Option<crate::probe::ProbeConfig>,
}

/// Supervises instances: creates, measures and removes them.
///
/// The parent cgroup of a job (`isolab/exp3-pid42` for job `exp3-pid42/c0-r1`) is
/// created at the first job and kept until a job of another parent comes or the
/// supervisor is dropped, so that each run creates and removes only its own leaf.
#[derive(Debug)]
pub struct Supervisor {
    config: SupervisorConfig,
    launcher: Arc<dyn Launcher>,
    scope: Mutex<Option<Cgroup>>,
}

impl Supervisor {
    /// A supervisor on `config`'s interfaces, running real processes.
    pub fn new(config: SupervisorConfig) -> Self {
        Supervisor::with_launcher(config, super::launch::RealLauncher::shared())
    }

    /// A supervisor on `config`'s interfaces, starting processes with `launcher`.
    pub fn with_launcher(config: SupervisorConfig, launcher: Arc<dyn Launcher>) -> Self {
        Supervisor {
            config,
            launcher,
            scope: Mutex::new(None),
        }
    }

    /// Makes sure the parent cgroup of `job_name` exists for as long as it is used.
    fn enter_scope(&self, job_name: &str) -> Result<(), PlatformError> {
        let Some((scope, _)) = job_name.rsplit_once('/') else {
            return Ok(());
        };
        let path = self.cgroup_path(scope);
        let mut held = self.scope.lock().unwrap_or_else(|e| e.into_inner());
        if held.as_ref().is_some_and(|c| c.rel() == path) {
            return Ok(());
        }
        if let Some(old) = held.take() {
            self.remove_scope(old)?;
        }
        *held = Some(match Cgroup::create(&self.config.hierarchy, &path) {
            Ok(c) => c,
            Err(isolab_cgroups::Error::AlreadyExists { .. }) => {
                Cgroup::open(&self.config.hierarchy, &path)?
            }
            Err(e) => return Err(e.into()),
        });
        Ok(())
    }

    /// The instance cgroup of `name` (`isolab/exp3-pid42/c0-r1-db`), created empty
    /// and unlimited in the experiment's scope, for a caller that keeps it beyond
    /// one call (a service).
    pub(crate) fn create_instance(&self, name: &str) -> Result<Cgroup, PlatformError> {
        self.enter_scope(name)?;
        Ok(Cgroup::create(
            &self.config.hierarchy,
            &self.cgroup_path(name),
        )?)
    }

    /// How it starts processes.
    pub(crate) fn launcher(&self) -> &dyn Launcher {
        &*self.launcher
    }

    fn cgroup_path(&self, name: &str) -> PathBuf {
        self.config.cgroup_base.join(name)
    }

    /// Starts `argv` in `cgroup`, logged as `log` in `workdir`.
    fn start(
        &self,
        argv: &[String],
        workdir: &Path,
        log: &str,
        cgroup: &Cgroup,
        count: bool,
    ) -> Result<Box<dyn Process>, PlatformError> {
        self.launcher.start(Launch {
            argv,
            workdir,
            log,
            cgroup: Some(cgroup),
            count,
        })
    }

    /// Runs an unmeasured helper command (prepare/cleanup) in an unlimited cgroup of its own.
    fn helper(
        &self,
        phase: &'static str,
        name: &str,
        argv: &[String],
        workdir: &Path,
        interrupt: &Interrupt,
    ) -> Result<(), PlatformError> {
        let cgroup = Cgroup::create(
            &self.config.hierarchy,
            &self.cgroup_path(&format!("{name}-{phase}")),
        )?;
        let result = (|| {
            let child = self.start(argv, workdir, phase, &cgroup, false)?;
            match wait_or_kill(
                &*child,
                &cgroup,
                interrupt,
                Some(Instant::now() + Duration::from_secs(600)),
                Duration::ZERO,
            )? {
                Ok((exit, _, _)) if exit.success() => Ok(()),
                Ok((exit, _, _)) => Err(PlatformError::Helper {
                    phase,
                    command: argv.join(" "),
                    exit,
                    stderr: read_tail(&log_path(workdir, phase, "stderr"), 2000),
                }),
                Err(e) => Err(e),
            }
        })();
        let removed = cgroup.remove();
        result.and(removed.map_err(PlatformError::from))
    }

    /// Runs `argv` (the job's command, or an engine wrapping it) in `cgroup`, with
    /// the job's server started first; on interrupt or timeout the command gets
    /// SIGTERM and `grace` to end before everything in the cgroup is killed.
    pub(crate) fn measured(
        &self,
        job: &Job,
        argv: &[String],
        cgroup: &Cgroup,
        interrupt: &Interrupt,
        grace: Duration,
    ) -> Result<Measured, PlatformError> {
        // The server, when the workload has one, lives in the same instance.
        let server = self.start_server(job, cgroup)?;

        crate::phases::mark("limit");
        let sampler = CpuSampler::start(&self.config.proc_root, self.config.sample_interval);
        crate::phases::mark("sampler_start");
        let child = match self.start(argv, &job.workdir, "command", cgroup, true) {
            Ok(c) => c,
            Err(e) => {
                sampler.finish();
                stop_server(server, cgroup);
                return Err(e);
            }
        };
        crate::phases::mark("started");
        let started = child.started();
        let waited = wait_or_kill(
            &*child,
            cgroup,
            interrupt,
            Some(started + job.timeout),
            grace,
        );
        crate::phases::mark("wait");
        // The sampler takes its last reading on its thread while this one reads the
        // run's own counters.
        let sampler = sampler.stop();
        let perf = child.perf();
        crate::phases::mark("perf_read");
        let stats = cgroup.stats();
        crate::phases::mark("stats");
        let host_cpu = sampler.join();
        crate::phases::mark("sampler_finish");
        stop_server(server, cgroup);
        let (exit, rusage, ended) = match waited? {
            Ok(v) => v,
            Err(PlatformError::TimedOut(_)) => return Err(PlatformError::TimedOut(job.timeout)),
            Err(e) => return Err(e),
        };
        Ok(Measured {
            exit,
            started,
            rusage,
            wall: ended.duration_since(started),
            stats: stats.map_err(|e| e.to_string()),
            perf,
            host_cpu,
            notes: Vec::new(),
        })
    }

    /// Starts the job's server, when its workload has one, on the host in `cgroup`
    /// and waits until it listens on its port; [`stop_server`] ends it.
    pub(crate) fn start_server(
        &self,
        job: &Job,
        cgroup: &Cgroup,
    ) -> Result<Option<Box<dyn Process>>, PlatformError> {
        let Some(super::Server { argv, port }) = &job.server else {
            return Ok(None);
        };
        let child = self.start(argv, &job.workdir, "server", cgroup, false)?;
        let alive = || child.is_running();
        if !wait_listening(
            &self.config.proc_root,
            *port,
            Duration::from_secs(10),
            alive,
        ) {
            let _ = cgroup.kill_all();
            let _ = child.reap();
            return Err(PlatformError::ServerNotReady {
                command: argv.join(" "),
                port: *port,
                waited: Duration::from_secs(10),
                stderr: read_tail(&log_path(&job.workdir, "server", "stderr"), 2000),
            });
        }
        Ok(Some(child))
    }

    /// Removes an experiment's scope cgroup, and the devices-hierarchy directories
    /// that containers nested in it may have left (see
    /// [`isolab_runtime::remove_devices_mirror`]).
    fn remove_scope(&self, scope: Cgroup) -> Result<(), isolab_cgroups::Error> {
        let rel = scope.rel().to_path_buf();
        let h = &self.config.hierarchy;
        isolab_runtime::remove_devices_mirror(h, &rel);
        let removed = scope.remove();
        // The base too, when nothing else uses it (only the directory itself: a
        // container of another owner may be starting below it).
        if let Some(mount) = isolab_runtime::container::devices::devices_mount(h) {
            let _ = std::fs::remove_dir(mount.join(&self.config.cgroup_base));
        }
        removed
    }

    /// The life of one instance around `body`: the experiment's scope cgroup, the
    /// prepare command, the instance's own cgroup (created empty and unlimited;
    /// `body` limits it or nests an engine's cgroup in it), its removal, and the
    /// cleanup command, also when `body` fails.
    pub(crate) fn instance(
        &self,
        job: &Job,
        interrupt: &Interrupt,
        body: impl FnOnce(&Cgroup) -> Result<Execution, PlatformError>,
    ) -> Result<Execution, PlatformError> {
        self.instance_with(job, interrupt, NeighbourHost::Processes, body)
    }

    /// [`Self::instance`] with the neighbours run where `neighbours` says (in
    /// containers or guests of the subject's platform, or directly in their cgroups).
    pub(crate) fn instance_with(
        &self,
        job: &Job,
        interrupt: &Interrupt,
        neighbours: NeighbourHost<'_>,
        body: impl FnOnce(&Cgroup) -> Result<Execution, PlatformError>,
    ) -> Result<Execution, PlatformError> {
        self.enter_scope(&job.name)?;
        if let Some(prepare) = &job.prepare {
            self.helper("prepare", &job.name, prepare, &job.workdir, interrupt)?;
        }
        crate::phases::mark("scope");
        let result = self.with_neighbours(job, interrupt, neighbours, || {
            let cgroup = Cgroup::create(&self.config.hierarchy, &self.cgroup_path(&job.name))?;
            crate::phases::mark("cgroup_create");
            let run = body(&cgroup);
            crate::phases::mark("body");
            let removed = cgroup.remove();
            crate::phases::mark("cgroup_remove");
            let execution = run?;
            removed?;
            Ok(execution)
        });
        // Cleanup always runs, but not after Ctrl-C: the user wants out.
        if let Some(cleanup) = &job.cleanup {
            if !interrupt.is_triggered() {
                let cleaned = self.helper("cleanup", &job.name, cleanup, &job.workdir, interrupt);
                if let (Ok(_), Err(e)) = (&result, cleaned) {
                    return Err(e);
                }
            }
        }
        result
    }

    /// Runs `body` (the measurement of a service stack, whose components already run)
    /// beside `job`'s neighbours in the experiment's scope: they start before it and
    /// are stopped, their cgroups removed, after it, also when it fails. `job` names
    /// the neighbours' cgroups (`<job>-nb<i>`) and carries them; its own cgroup is
    /// not made. The neighbours' telemetry and notes and the latency probe's are
    /// added to the execution `body` returns.
    pub(crate) fn beside_neighbours(
        &self,
        job: &Job,
        interrupt: &Interrupt,
        neighbours: NeighbourHost<'_>,
        body: &mut dyn FnMut() -> Result<Execution, PlatformError>,
    ) -> Result<Execution, PlatformError> {
        self.enter_scope(&job.name)?;
        self.with_neighbours(job, interrupt, neighbours, body)
    }

    /// Runs `body` with `job`'s neighbours (if it has any) and the latency probe
    /// around it: the neighbours are stopped after it, also when it fails, and
    /// described in its execution; a probe breach makes the run an abort.
    fn with_neighbours(
        &self,
        job: &Job,
        interrupt: &Interrupt,
        neighbours: NeighbourHost<'_>,
        body: impl FnOnce() -> Result<Execution, PlatformError>,
    ) -> Result<Execution, PlatformError> {
        let host = neighbours;
        let neighbours = match &job.neighbours {
            Some(set) => {
                let site = NeighbourSite {
                    hierarchy: &self.config.hierarchy,
                    cgroups: self.neighbour_paths(job),
                    launcher: &*self.launcher,
                    proc_root: &self.config.proc_root,
                };
                Some(start_neighbours(&site, job, set, interrupt, host)?)
            }
            None => None,
        };
        let probe = self.start_probe(job);
        crate::phases::mark("probe_start");
        let run = body();
        let disk = job
            .neighbours
            .as_ref()
            .and_then(|n| n.disk_target.as_ref())
            .map(|d| d.device.as_str());
        let stopped = neighbours.map(|n| n.stop(disk));
        let probed = probe.map(crate::probe::LatencyProbe::finish);
        crate::phases::mark("probe_finish");
        if let Some(breach) = probed.as_ref().and_then(|r| r.breach.as_ref()) {
            return Err(PlatformError::Aborted {
                reason: breach.to_string(),
            });
        }
        let mut execution = run?;
        if let Some(stopped) = stopped {
            stopped.describe(job, &mut execution);
        }
        if let Some(report) = probed {
            execution.telemetry.extend(report.telemetry());
            execution.notes.extend(report.warnings);
        }
        Ok(execution)
    }

    /// The cgroups of `job`'s neighbour instances (`<job>-nb<i>`).
    fn neighbour_paths(&self, job: &Job) -> Vec<PathBuf> {
        let neighbours = job.neighbours.as_ref().map_or(0, |n| n.instances.len());
        (0..neighbours)
            .map(|i| self.cgroup_path(&format!("{}-nb{i}", job.name)))
            .collect()
    }

    /// Starts the latency probe for a run of `job`: on a breach it kills everything
    /// in the run's cgroups (neighbours first), so that the run ends at once and
    /// the caller reports it as aborted. `None` when the probe is off or cannot
    /// start (a run without a probe is still a valid run).
    fn start_probe(&self, job: &Job) -> Option<crate::probe::LatencyProbe> {
        let config = self.config.probe?;
        let hierarchy = self.config.hierarchy.clone();
        let mut paths = self.neighbour_paths(job);
        paths.push(self.cgroup_path(&job.name));
        let on_breach: crate::probe::OnBreach = Arc::new(move |_| {
            for path in &paths {
                if let Ok(c) = Cgroup::open(&hierarchy, path) {
                    let _ = c.kill_all();
                }
            }
        });
        crate::probe::LatencyProbe::start(config, on_breach).ok()
    }

    /// Cgroups of experiment runs (`exp<ID>-pid<PID>/…`, `preflight-pid<PID>`) whose
    /// isolab process is gone. Containers of isolab-runtime (`…/rt-<id>`) nested in
    /// them are not listed: they belong to `isolab-runtime gc`, which knows their
    /// loop devices and networks.
    fn orphans(&self) -> Result<Vec<PathBuf>, PlatformError> {
        let mut found = Vec::new();
        for rel in isolab_cgroups::list_below(&self.config.hierarchy, &self.config.cgroup_base)? {
            let Some(pid) = owner_pid(&rel, &self.config.cgroup_base) else {
                continue;
            };
            let container = rel
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("rt-"));
            if container
                || (pid != std::process::id()
                    && child_alive(pid as libc::pid_t)
                    && is_isolab(&self.config.proc_root, pid))
            {
                continue; // a container, or a live experiment owns it
            }
            found.push(rel);
        }
        Ok(found)
    }

    /// The experiment scopes (`exp3-pid42`) of orphaned run cgroups.
    pub(crate) fn orphan_experiments(&self) -> Result<Vec<String>, PlatformError> {
        let mut scopes: Vec<String> = self
            .orphans()?
            .iter()
            .filter_map(|rel| rel.strip_prefix(&self.config.cgroup_base).ok())
            .filter_map(|rest| rest.components().next())
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .filter(|s| s.starts_with("exp"))
            .collect();
        scopes.sort();
        scopes.dedup();
        Ok(scopes)
    }

    /// Kills the processes of orphaned run cgroups (e.g. an `isolab-runtime` whose
    /// isolab was killed), so that the containers they ran can be collected.
    pub(crate) fn kill_orphans(&self) -> Result<(), PlatformError> {
        for rel in self.orphans()? {
            Cgroup::open(&self.config.hierarchy, &rel)?.kill_all()?;
        }
        Ok(())
    }

    /// Removes the cgroups of orphaned runs (killing what is left in them), the
    /// devices-hierarchy directories of dead experiments' nested containers, and
    /// the base cgroup once empty. Returns what was removed, one line each.
    pub(crate) fn gc(&self) -> Result<Vec<String>, PlatformError> {
        let h = &self.config.hierarchy;
        let mut removed = Vec::new();
        for rel in self.orphans()? {
            isolab_runtime::remove_devices_mirror(h, &rel);
            let cgroup = Cgroup::open(h, &rel)?;
            let pids = cgroup.pids().unwrap_or_default();
            cgroup.remove()?;
            removed.push(format!(
                "cgroup {} ({} processes killed)",
                rel.display(),
                pids.len()
            ));
        }
        // An experiment directory (`exp1-pid123`) whose isolab is gone.
        let dead = |name: &str| {
            owner_pid(
                &self.config.cgroup_base.join(name),
                &self.config.cgroup_base,
            )
            .is_some_and(|pid| {
                pid != std::process::id()
                    && !(child_alive(pid as libc::pid_t) && is_isolab(&self.config.proc_root, pid))
            })
        };
        // Devices-hierarchy directories of dead experiments' nested containers.
        if let Some(mount) = isolab_runtime::container::devices::devices_mount(h) {
            let base = mount.join(&self.config.cgroup_base);
            for entry in std::fs::read_dir(&base).into_iter().flatten().flatten() {
                let rel = self.config.cgroup_base.join(entry.file_name());
                if dead(&entry.file_name().to_string_lossy())
                    && entry.file_type().is_ok_and(|t| t.is_dir())
                {
                    for dir in isolab_runtime::remove_devices_mirror(h, &rel) {
                        removed.push(format!("devices cgroup {}", dir.display()));
                    }
                }
            }
            if std::fs::remove_dir(&base).is_ok() {
                removed.push(format!("devices cgroup {}", base.display()));
            }
        }
        // The run parents OCI runtimes made in the other hierarchies the lab does not
        // manage (`name=systemd`, …) for dead experiments' containers.
        for dir in isolab_engines::remove_dead_foreign_parents(
            &self.config.proc_root,
            &self.config.cgroup_base,
            &dead,
        ) {
            removed.push(format!("cgroup {}", dir.display()));
        }
        // The base itself, once empty.
        if let Ok(base) = Cgroup::open(h, &self.config.cgroup_base) {
            if base.pids().map(|p| p.is_empty()).unwrap_or(false)
                && isolab_cgroups::list_below(h, &self.config.cgroup_base)
                    .map(|l| l.is_empty())
                    .unwrap_or(false)
                && base.remove().is_ok()
            {
                removed.push(format!("cgroup {}", self.config.cgroup_base.display()));
            }
        }
        Ok(removed)
    }

    /// The cgroup of job `name`, relative to the cgroup mounts.
    pub(crate) fn instance_path(&self, name: &str) -> PathBuf {
        self.cgroup_path(name)
    }

    /// The cgroup layout.
    pub(crate) fn hierarchy(&self) -> &Hierarchy {
        &self.config.hierarchy
    }

    /// Where /proc is read (a directory of the test's own in tests).
    pub(crate) fn proc_root(&self) -> &Path {
        &self.config.proc_root
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let held = self
            .scope
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(scope) = held {
            let _ = self.remove_scope(scope);
        }
    }
}

/// The mount in which an engine's container cgroup is looked for below an
/// instance: the cpu hierarchy's, else the memory hierarchy's.
pub(crate) fn container_mount(hierarchy: &Hierarchy) -> Option<&Path> {
    hierarchy
        .mount(Controller::Cpu)
        .or_else(|| hierarchy.mount(Controller::Memory))
}

/// The deepest cgroup below the instance `instance` that holds processes (an
/// engine's container), relative to the hierarchy roots like `instance`.
pub(crate) fn container_below(mount: &Path, instance: &Path) -> Option<PathBuf> {
    isolab_engines::find_container_cgroup(mount, instance)
        .map(|rel| rel.strip_prefix("/").unwrap_or(&rel).to_path_buf())
}

/// The pid of the isolab process that owns a run cgroup: its first component below
/// the base is named `exp<ID>-pid<PID>`.
fn owner_pid(rel: &Path, base: &Path) -> Option<u32> {
    let first = rel.strip_prefix(base).ok()?.components().next()?;
    let name = first.as_os_str().to_str()?;
    name.rsplit_once("-pid")?.1.parse().ok()
}

fn is_isolab(proc_root: &Path, pid: u32) -> bool {
    super::process::isolab_running(proc_root, pid)
}

fn child_alive(pid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Ends a server of [`Supervisor::start_server`]: SIGTERM, and after 2 s
/// everything in `cgroup` is killed.
pub(crate) fn stop_server(server: Option<Box<dyn Process>>, cgroup: &Cgroup) {
    if let Some(s) = server {
        if !ended_within(&*s, libc::SIGTERM, Duration::from_secs(2)) {
            s.signal_group(libc::SIGKILL);
            let _ = cgroup.kill_all();
            let _ = s.reap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zombies_are_not_live_owners() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("42");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("comm"), "isolab\n").unwrap();
        std::fs::write(p.join("stat"), "42 (isolab) Z 1 42 42 0 -1").unwrap();
        assert!(!is_isolab(dir.path(), 42));
        std::fs::write(p.join("stat"), "42 (isolab) S 1 42 42 0 -1").unwrap();
        assert!(is_isolab(dir.path(), 42));
        std::fs::write(p.join("comm"), "bash\n").unwrap();
        assert!(!is_isolab(dir.path(), 42));
    }

    #[test]
    fn finds_the_owner_of_a_run_cgroup() {
        let base = Path::new("isolab");
        assert_eq!(
            owner_pid(Path::new("isolab/exp3-pid4242/c1-r2"), base),
            Some(4242)
        );
        assert_eq!(owner_pid(Path::new("isolab/other"), base), None);
    }

    /// `gc` on a fake cgroupfs: the runs of a dead experiment go (their leftover
    /// process killed), those of a live isolab stay.
    #[cfg(feature = "testing")]
    #[test]
    fn gc_removes_the_runs_of_dead_experiments_only() {
        use crate::testing::{FakeCgroupfs, FakeLauncher};
        let cgroupfs = tempfile::tempdir().unwrap();
        let proc_root = tempfile::tempdir().unwrap();
        let hierarchy = FakeCgroupfs::create(cgroupfs.path()).unwrap();
        // A live isolab: our parent process, named so in the fake /proc.
        let live = std::os::unix::process::parent_id();
        let dir = proc_root.path().join(live.to_string());
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("comm"), "isolab\n").unwrap();
        std::fs::write(dir.join("stat"), format!("{live} (isolab) S 1")).unwrap();
        // No process has a pid above the largest pid_max.
        let dead = 4_194_399;
        for rel in [
            format!("isolab/exp3-pid{dead}/c0-r1"),
            format!("isolab/exp4-pid{live}/c0-r1"),
        ] {
            Cgroup::create(&hierarchy, Path::new(&rel)).unwrap();
        }
        let leftover = cgroupfs
            .path()
            .join(format!("isolab/exp3-pid{dead}/c0-r1/cgroup.procs"));
        std::fs::write(&leftover, "4194400\n").unwrap();
        let supervisor = Supervisor::with_launcher(
            SupervisorConfig {
                hierarchy,
                proc_root: proc_root.path().to_path_buf(),
                cgroup_base: PathBuf::from("isolab"),
                sample_interval: Duration::from_millis(100),
                probe: None,
            },
            Arc::new(FakeLauncher::new()),
        );
        assert_eq!(
            supervisor.orphan_experiments().unwrap(),
            [format!("exp3-pid{dead}")]
        );
        assert_eq!(
            supervisor.gc().unwrap(),
            [
                format!("cgroup isolab/exp3-pid{dead}/c0-r1 (1 processes killed)"),
                format!("cgroup isolab/exp3-pid{dead} (0 processes killed)"),
            ]
        );
        assert_eq!(
            FakeCgroupfs::cgroups(cgroupfs.path()),
            [
                PathBuf::from("isolab"),
                PathBuf::from(format!("isolab/exp4-pid{live}")),
                PathBuf::from(format!("isolab/exp4-pid{live}/c0-r1")),
            ]
        );
    }
}
