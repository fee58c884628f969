//! The `host` platform: the workload runs as a child of isolab, confined in a cgroup
//! of its own that carries the shape's and placement's limits.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use isolab_cgroups::{Cgroup, Hierarchy, Limits, Stats};
use isolab_store::{PsiLine, PsiResource, Telemetry as T, TelemetrySet};

use super::process::{read_tail, wait_listening, Child, PerfCounts, Spawn, Waited};
use super::{Execution, ExitKind, Interrupt, Job, NeighbourJobs, Platform, PlatformError};
use crate::telemetry::{CpuSampler, HostCpu};

/// Where the host platform finds the kernel's interfaces.
#[derive(Debug, Clone)]
pub struct HostPlatformConfig {
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

/// Largest part of a log kept with a run.
const LOG_TAIL: usize = 1 << 20;

/// The bare-host platform.
///
/// The parent cgroup of a job (`isolab/exp3-pid42` for job `exp3-pid42/c0-r1`) is
/// created at the first job and kept until a job of another parent comes or the
/// platform is dropped, so that each run creates and removes only its own leaf.
#[derive(Debug)]
pub struct HostPlatform {
    config: HostPlatformConfig,
    scope: Mutex<Option<Cgroup>>,
}

impl HostPlatform {
    /// A host platform using `config`.
    pub fn new(config: HostPlatformConfig) -> Self {
        HostPlatform {
            config,
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

    fn cgroup_path(&self, name: &str) -> PathBuf {
        self.config.cgroup_base.join(name)
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
            let (out, err) = log_files(workdir, phase)?;
            let child = start(argv, workdir, out, err, Some(&cgroup), false)?;
            match wait_or_kill(
                &child,
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
                    stderr: read_tail(&workdir.join(format!(".isolab-{phase}.stderr")), 2000),
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
        let server = match &job.server {
            None => None,
            Some((argv, port)) => {
                let (out, err) = log_files(&job.workdir, "server")?;
                let child = start(argv, &job.workdir, out, err, Some(cgroup), false)?;
                let alive = || child_alive(child.pid);
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
                        stderr: read_tail(&job.workdir.join(".isolab-server.stderr"), 2000),
                    });
                }
                Some(child)
            }
        };

        let (out, err) = log_files(&job.workdir, "command")?;
        let sampler = CpuSampler::start(&self.config.proc_root, self.config.sample_interval);
        let child = start(argv, &job.workdir, out, err, Some(cgroup), true);
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                sampler.finish();
                stop_server(server, cgroup);
                return Err(e);
            }
        };
        let waited = wait_or_kill(
            &child,
            cgroup,
            interrupt,
            Some(child.started + job.timeout),
            grace,
        );
        let host_cpu = sampler.finish();
        let perf = child.perf();
        let stats = cgroup.stats();
        stop_server(server, cgroup);
        let (exit, rusage, ended) = match waited? {
            Ok(v) => v,
            Err(PlatformError::TimedOut(_)) => return Err(PlatformError::TimedOut(job.timeout)),
            Err(e) => return Err(e),
        };
        Ok(Measured {
            exit,
            started: child.started,
            rusage,
            wall: ended.duration_since(child.started),
            stats: stats.map_err(|e| e.to_string()),
            perf,
            host_cpu,
            notes: Vec::new(),
        })
    }
}

/// What a measured command produced, before it becomes an [`Execution`].
pub(crate) struct Measured {
    pub exit: ExitKind,
    /// When the command started.
    pub started: Instant,
    pub rusage: libc::rusage,
    /// From the start of the command to its exit.
    pub wall: Duration,
    /// The instance's cgroup counters, or why there are none.
    pub stats: Result<Stats, String>,
    pub perf: Result<PerfCounts, String>,
    pub host_cpu: HostCpu,
    pub notes: Vec<String>,
}

impl Measured {
    /// The execution, with telemetry named with units, and the logs from `workdir`.
    pub(crate) fn into_execution(self, workdir: &Path, limits_applied: Limits) -> Execution {
        let Measured {
            exit,
            started,
            rusage,
            wall,
            stats,
            perf,
            host_cpu,
            mut notes,
        } = self;
        let mut telemetry = TelemetrySet::new();
        telemetry.push(T::Wall, wall.as_secs_f64());
        match stats {
            Ok(s) => {
                let t = &mut telemetry;
                t.push_some(T::CpuUsage, s.cpu_usage.map(|d| d.as_secs_f64()));
                t.push_some(T::CpuUser, s.cpu_user.map(|d| d.as_secs_f64()));
                t.push_some(T::CpuSystem, s.cpu_system.map(|d| d.as_secs_f64()));
                t.push_some(
                    T::CpuUtil,
                    s.cpu_usage
                        .map(|d| 100.0 * d.as_secs_f64() / wall.as_secs_f64().max(1e-9)),
                );
                t.push_some(T::NrPeriods, s.nr_periods.map(|v| v as f64));
                t.push_some(T::NrThrottled, s.nr_throttled.map(|v| v as f64));
                t.push_some(T::Throttled, s.throttled.map(|d| d.as_secs_f64()));
                t.push_some(T::MemoryPeak, s.memory_peak.map(|b| b.0 as f64));
                t.push_some(T::IoRead, s.io_read.map(|b| b.0 as f64));
                t.push_some(T::IoWrite, s.io_write.map(|b| b.0 as f64));
                if let Some(p) = &s.psi {
                    for (resource, lines) in
                        PsiResource::ALL.into_iter().zip([&p.cpu, &p.memory, &p.io])
                    {
                        if let Some(l) = lines {
                            t.push(T::Psi(resource, PsiLine::Some), l.some.total.as_secs_f64());
                            t.push_some(
                                T::Psi(resource, PsiLine::Full),
                                l.full.map(|f| f.total.as_secs_f64()),
                            );
                        }
                    }
                }
            }
            Err(e) => notes.push(format!("cgroup statistics unavailable: {e}")),
        }
        telemetry.push(T::CtxSwitchesVoluntary, rusage.ru_nvcsw as f64);
        telemetry.push(T::CtxSwitchesInvoluntary, rusage.ru_nivcsw as f64);
        telemetry.push(T::MaxRss, rusage.ru_maxrss as f64);
        match perf {
            Ok(c) => {
                telemetry.push(T::ContextSwitches, c.context_switches as f64);
                telemetry.push(T::CpuMigrations, c.cpu_migrations as f64);
            }
            Err(why) => notes.push(why),
        }
        if !host_cpu.mean.is_empty() {
            for (id, u) in &host_cpu.mean {
                telemetry.push(T::HostCoreUtil(*id), *u);
            }
            let mean =
                host_cpu.mean.iter().map(|(_, u)| u).sum::<f64>() / host_cpu.mean.len() as f64;
            telemetry.push(T::HostUtil, mean);
        }

        Execution {
            exit,
            stdout: read_tail(&workdir.join(".isolab-command.stdout"), LOG_TAIL),
            stderr: read_tail(&workdir.join(".isolab-command.stderr"), LOG_TAIL),
            wall,
            started,
            limits_applied,
            telemetry,
            series: host_cpu.series,
            notes,
        }
    }
}

impl Drop for HostPlatform {
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

impl HostPlatform {
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
}

impl HostPlatform {
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
        self.instance_with(job, interrupt, None, body)
    }

    /// [`Self::instance`] with the neighbours run by `containers` (in containers of
    /// the subject's platform) instead of directly in their cgroups.
    pub(crate) fn instance_with(
        &self,
        job: &Job,
        interrupt: &Interrupt,
        containers: Option<&dyn super::NeighbourContainers>,
        body: impl FnOnce(&Cgroup) -> Result<Execution, PlatformError>,
    ) -> Result<Execution, PlatformError> {
        self.enter_scope(&job.name)?;
        if let Some(prepare) = &job.prepare {
            self.helper("prepare", &job.name, prepare, &job.workdir, interrupt)?;
        }
        let result = (|| {
            let neighbours = match &job.neighbours {
                Some(n) => Some(self.start_neighbours(job, n, interrupt, containers)?),
                None => None,
            };
            let cgroup = match Cgroup::create(&self.config.hierarchy, &self.cgroup_path(&job.name))
            {
                Ok(c) => c,
                Err(e) => {
                    if let Some(n) = neighbours {
                        n.stop(&self.config.proc_root, None);
                    }
                    return Err(e.into());
                }
            };
            let probe = self.start_probe(job);
            let run = body(&cgroup);
            let disk = job
                .neighbours
                .as_ref()
                .and_then(|n| n.disk_target.as_ref())
                .map(|(d, _, _)| d.as_str());
            let stopped = neighbours.map(|n| n.stop(&self.config.proc_root, disk));
            let probed = probe.map(crate::probe::LatencyProbe::finish);
            let removed = cgroup.remove();
            if let Some(report) = &probed {
                if let Some(breach) = &report.breach {
                    removed?;
                    return Err(PlatformError::Aborted {
                        reason: breach.to_string(),
                    });
                }
            }
            let mut execution = run?;
            if let Some(stopped) = stopped {
                stopped.describe(job, &mut execution);
            }
            if let Some(report) = probed {
                execution.telemetry.extend(report.telemetry());
                execution.notes.extend(report.warnings);
            }
            removed?;
            Ok(execution)
        })();
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

    /// Starts the latency probe for a run of `job`: on a breach it kills everything
    /// in the run's cgroups (neighbours first), so that the run ends at once and
    /// the caller reports it as aborted. `None` when the probe is off or cannot
    /// start (a run without a probe is still a valid run).
    fn start_probe(&self, job: &Job) -> Option<crate::probe::LatencyProbe> {
        let config = self.config.probe?;
        let hierarchy = self.config.hierarchy.clone();
        let neighbours = job.neighbours.as_ref().map_or(0, |n| n.instances.len());
        let mut paths: Vec<PathBuf> = (0..neighbours)
            .map(|i| self.cgroup_path(&format!("{}-nb{i}", job.name)))
            .collect();
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

    /// Starts each neighbour instance of `job` in a cgroup of its own
    /// (`<job>-nb<i>`, limits applied and read back), then lets them run for their
    /// settle time. Everything started is stopped again on error.
    fn start_neighbours<'c>(
        &self,
        job: &Job,
        set: &NeighbourJobs,
        interrupt: &Interrupt,
        containers: Option<&'c dyn super::NeighbourContainers>,
    ) -> Result<RunningNeighbours<'c>, PlatformError> {
        // Network neighbours live in the neighbour namespaces, so on the host.
        let containers = containers.filter(|_| set.network_servers == 0);
        let net = if set.network_servers > 0 {
            Some(
                crate::neighbour::NeighbourNet::create(set.network_servers).map_err(|e| {
                    PlatformError::Helper {
                        phase: "neighbour network",
                        command: "ip netns add … (neighbour namespaces)".into(),
                        exit: ExitKind::Code(-1),
                        stderr: e.to_string(),
                    }
                })?,
            )
        } else {
            None
        };
        let mut net_rate = None;
        if let (Some(net), Some(mbps)) = (&net, set.net_rate_mbps) {
            let read = net.rate_limit(mbps).map_err(|e| PlatformError::Helper {
                phase: "net reservation",
                command: net.rate_limit_command(mbps).join(" "),
                exit: ExitKind::Code(-1),
                stderr: e.to_string(),
            })?;
            // tc stores the rate in bytes per second: a rounding, not a change.
            if (read - mbps as f64).abs() > 0.01 * mbps as f64 + 0.01 {
                return Err(PlatformError::LimitMismatch {
                    cgroup: format!("network namespace {}", net.namespace()),
                    detail: format!(
                        "rate of {} asked {mbps} Mbit/s read {read:.1} Mbit/s",
                        net.interface()
                    ),
                });
            }
            net_rate = Some(read);
        }
        let mut running = RunningNeighbours {
            instances: Vec::new(),
            containers,
            ids: Vec::new(),
            net,
            net_rate,
            disk_start: None,
            net_start: None,
        };
        for (i, argv) in set.instances.iter().enumerate() {
            let started = (|| {
                let cgroup = Cgroup::create(
                    &self.config.hierarchy,
                    &self.cgroup_path(&format!("{}-nb{i}", job.name)),
                )?;
                let spawned = (|| {
                    cgroup.apply(&set.limits)?;
                    let applied = cgroup.read_limits()?;
                    let differences = set.limits.differences(&applied);
                    if !differences.is_empty() {
                        return Err(PlatformError::LimitMismatch {
                            cgroup: cgroup.rel().display().to_string(),
                            detail: differences.join("; "),
                        });
                    }
                    let (out, err) = log_files(&job.workdir, &format!("neighbour{i}"))?;
                    match containers {
                        // Limited from outside: the container's cgroup nests in this one.
                        Some(c) => {
                            let id = format!("{}-nb{i}", job.name);
                            let wrapped = c.wrap(&id, argv, cgroup.rel(), &job.workdir)?;
                            start(&wrapped, &job.workdir, out, err, Some(&cgroup), false)
                        }
                        None => start(argv, &job.workdir, out, err, Some(&cgroup), false),
                    }
                })();
                match spawned {
                    Ok(child) => Ok((cgroup, child)),
                    Err(e) => {
                        let _ = cgroup.remove();
                        Err(e)
                    }
                }
            })();
            if containers.is_some() {
                running.ids.push(format!("{}-nb{i}", job.name));
            }
            match started {
                Ok(instance) => running.instances.push(instance),
                Err(e) => {
                    running.stop(&self.config.proc_root, None);
                    return Err(e);
                }
            }
        }
        // Let them reach their steady state; Ctrl-C cuts the wait short.
        let settled = Instant::now() + set.settle;
        while Instant::now() < settled && !interrupt.is_triggered() {
            std::thread::sleep(Duration::from_millis(20));
        }
        if interrupt.is_triggered() {
            running.stop(&self.config.proc_root, None);
            return Err(PlatformError::Interrupted);
        }
        if let Some((device, _, _)) = &set.disk_target {
            running.disk_start = crate::neighbour::disk_ios(&self.config.proc_root, device)
                .map(|n| (n, Instant::now()));
        }
        if let (Some(_), Some(net)) = (&set.net_target, &running.net) {
            running.net_start = net.received_bytes().ok().map(|neighbours| NetStart {
                neighbours,
                host: crate::neighbour::net_rx(&self.config.proc_root),
                at: Instant::now(),
            });
        }
        for (i, (_, child)) in running.instances.iter().enumerate() {
            if !child_alive_unreaped(child) {
                let stderr = read_tail(
                    &job.workdir.join(format!(".isolab-neighbour{i}.stderr")),
                    2000,
                );
                running.stop(&self.config.proc_root, None);
                return Err(PlatformError::Helper {
                    phase: "neighbour",
                    command: set.instances[i].join(" "),
                    exit: ExitKind::Code(-1),
                    stderr,
                });
            }
        }
        Ok(running)
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

    /// The cgroup of job `name`, relative to the cgroup mounts.
    pub(crate) fn instance_path(&self, name: &str) -> PathBuf {
        self.cgroup_path(name)
    }

    /// The cgroup layout.
    pub(crate) fn hierarchy(&self) -> &Hierarchy {
        &self.config.hierarchy
    }
}

impl Platform for HostPlatform {
    fn execute(&self, job: &Job, interrupt: &Interrupt) -> Result<Execution, PlatformError> {
        self.instance(job, interrupt, |cgroup| {
            cgroup.apply(&job.limits)?;
            let applied = cgroup.read_limits()?;
            let differences = job.limits.differences(&applied);
            if !differences.is_empty() {
                return Err(PlatformError::LimitMismatch {
                    cgroup: cgroup.rel().display().to_string(),
                    detail: differences.join("; "),
                });
            }
            let measured = self.measured(job, &job.argv, cgroup, interrupt, Duration::ZERO)?;
            Ok(measured.into_execution(&job.workdir, applied))
        })
    }

    fn gc(&self) -> Result<Vec<String>, PlatformError> {
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
        // Devices-hierarchy directories of dead experiments' nested containers.
        if let Some(mount) = isolab_runtime::container::devices::devices_mount(h) {
            let base = mount.join(&self.config.cgroup_base);
            for entry in std::fs::read_dir(&base).into_iter().flatten().flatten() {
                let rel = self.config.cgroup_base.join(entry.file_name());
                let dead = owner_pid(&rel, &self.config.cgroup_base).is_some_and(|pid| {
                    pid != std::process::id()
                        && !(child_alive(pid as libc::pid_t)
                            && is_isolab(&self.config.proc_root, pid))
                });
                if dead && entry.file_type().is_ok_and(|t| t.is_dir()) {
                    for dir in isolab_runtime::remove_devices_mirror(h, &rel) {
                        removed.push(format!("devices cgroup {}", dir.display()));
                    }
                }
            }
            if std::fs::remove_dir(&base).is_ok() {
                removed.push(format!("devices cgroup {}", base.display()));
            }
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

fn log_files(workdir: &Path, phase: &str) -> Result<(File, File), PlatformError> {
    let open = |ext: &str| {
        let path = workdir.join(format!(".isolab-{phase}.{ext}"));
        File::create(&path).map_err(|source| PlatformError::Io {
            action: "cannot create log file",
            path,
            source,
        })
    };
    Ok((open("stdout")?, open("stderr")?))
}

fn start(
    argv: &[String],
    workdir: &Path,
    out: File,
    err: File,
    cgroup: Option<&Cgroup>,
    count: bool,
) -> Result<Child, PlatformError> {
    let attacher = cgroup.map(|c| c.attacher()).transpose()?.map(Arc::new);
    Spawn {
        argv,
        workdir,
        stdout: out,
        stderr: err,
        attacher,
        count,
    }
    .start()
    .map_err(|source| PlatformError::Spawn {
        program: argv.first().cloned().unwrap_or_default(),
        source,
    })
}

type Finished = (ExitKind, libc::rusage, Instant);

/// Waits for the child; on interrupt or timeout kills the whole cgroup and reaps.
/// The outer error is a failure to wait at all.
fn wait_or_kill(
    child: &Child,
    cgroup: &Cgroup,
    interrupt: &Interrupt,
    deadline: Option<Instant>,
    grace: Duration,
) -> Result<Result<Finished, PlatformError>, PlatformError> {
    let waited = child
        .wait(interrupt, deadline)
        .map_err(|source| PlatformError::Io {
            action: "cannot wait for the command in",
            path: cgroup.rel().to_path_buf(),
            source,
        })?;
    match waited {
        Waited::Exited { exit, rusage, at } => Ok(Ok((exit, rusage, at))),
        other => {
            if !grace.is_zero() && ended_within(child, libc::SIGTERM, grace) {
                return Ok(Err(match other {
                    Waited::Interrupted => PlatformError::Interrupted,
                    _ => PlatformError::TimedOut(Duration::ZERO),
                }));
            }
            child.signal_group(libc::SIGKILL);
            cgroup.kill_all()?;
            let _ = child.reap();
            Ok(Err(match other {
                Waited::Interrupted => PlatformError::Interrupted,
                _ => PlatformError::TimedOut(Duration::ZERO),
            }))
        }
    }
}

/// Sends `signal` to the child's process group and waits up to `grace` for the
/// child to exit (and reaps it); whether it did.
fn ended_within(child: &Child, signal: libc::c_int, grace: Duration) -> bool {
    child.signal_group(signal);
    // The caller's interrupt has fired already; wait on a fresh one.
    Interrupt::new().ok().is_some_and(|i| {
        matches!(
            child.wait(&i, Some(Instant::now() + grace)),
            Ok(Waited::Exited { .. })
        )
    })
}

/// Neighbour instances while they run: each cgroup with its process.
struct RunningNeighbours<'c> {
    instances: Vec<(Cgroup, Child)>,
    /// Who runs them in containers, and the container ids (to collect after).
    containers: Option<&'c dyn super::NeighbourContainers>,
    ids: Vec<String>,
    /// The namespaces network neighbours stream between.
    net: Option<crate::neighbour::NeighbourNet>,
    /// The rate of the neighbours' interface read back, Mbit/s (`net` reservation).
    net_rate: Option<f64>,
    /// Operations completed on the target disk when the subject started.
    disk_start: Option<(u64, Instant)>,
    /// Network counters when the subject started (network utilisation target).
    net_start: Option<NetStart>,
}

/// Network counters at the subject's start.
struct NetStart {
    /// Bytes the neighbour network's server side had received.
    neighbours: u64,
    /// Bytes each interface of the host's namespace had received (the subject's
    /// traffic).
    host: Vec<(String, u64)>,
    at: Instant,
}

/// What the neighbours did, read before their cgroups were removed.
struct StoppedNeighbours {
    /// The counters of each instance.
    stats: Vec<Option<isolab_cgroups::Stats>>,
    /// IOPS on the target disk while subject and neighbours ran.
    disk_iops: Option<f64>,
    /// Mbit/s of the neighbours and of the subject while both ran.
    net_mbps: Option<(f64, f64)>,
    /// The rate of the neighbours' interface, Mbit/s.
    net_rate: Option<f64>,
    /// Whether they ran in containers of the subject's platform.
    in_containers: bool,
    /// Problems while stopping.
    notes: Vec<String>,
}

impl RunningNeighbours<'_> {
    /// Kills every instance, reads its counters, removes its cgroup.
    fn stop(self, proc_root: &Path, disk: Option<&str>) -> StoppedNeighbours {
        let disk_iops = match (self.disk_start, disk) {
            (Some((before, at)), Some(device)) => crate::neighbour::disk_ios(proc_root, device)
                .map(|after| {
                    after.saturating_sub(before) as f64 / at.elapsed().as_secs_f64().max(1e-3)
                }),
            _ => None,
        };
        let net_mbps = match (&self.net_start, &self.net) {
            (Some(start), Some(net)) => net.received_bytes().ok().map(|now| {
                let secs = start.at.elapsed().as_secs_f64().max(1e-3);
                let host =
                    crate::neighbour::busiest_rx(&start.host, &crate::neighbour::net_rx(proc_root));
                let mbps = |bytes: u64| bytes as f64 * 8.0 / 1e6 / secs;
                (mbps(now.saturating_sub(start.neighbours)), mbps(host))
            }),
            _ => None,
        };
        let mut stopped = StoppedNeighbours {
            stats: Vec::new(),
            disk_iops,
            net_mbps,
            net_rate: self.net_rate,
            in_containers: self.containers.is_some(),
            notes: Vec::new(),
        };
        for (i, (cgroup, child)) in self.instances.into_iter().enumerate() {
            child.signal_group(libc::SIGKILL);
            // A container's processes sit in cgroups nested in the instance's.
            let h = cgroup.hierarchy().clone();
            let mut nested = isolab_cgroups::list_below(&h, cgroup.rel()).unwrap_or_default();
            nested.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
            for rel in nested {
                if let Ok(c) = Cgroup::open(&h, &rel) {
                    let _ = c.kill_all();
                }
            }
            let _ = cgroup.kill_all();
            let _ = child.reap();
            stopped.stats.push(cgroup.stats().ok());
            if let (Some(c), Some(id)) = (self.containers, self.ids.get(i)) {
                if let Err(e) = c.collect(id) {
                    stopped
                        .notes
                        .push(format!("collecting neighbour container {id}: {e}"));
                }
            }
            if let Err(e) = cgroup.remove() {
                stopped
                    .notes
                    .push(format!("removing a neighbour's cgroup: {e}"));
            }
        }
        if let Some(net) = self.net {
            if let Err(e) = net.remove() {
                stopped
                    .notes
                    .push(format!("removing the neighbour network: {e}"));
            }
        }
        stopped
    }
}

impl StoppedNeighbours {
    /// Adds the neighbours' telemetry to the subject's run: their cpu time, and for
    /// a utilisation target, the target and what the host sampler measured, with a
    /// note when they are more than 5 percentage points apart.
    fn describe(self, job: &Job, execution: &mut Execution) {
        let Some(set) = &job.neighbours else { return };
        let stats: Vec<&isolab_cgroups::Stats> = self.stats.iter().flatten().collect();
        let sum = |f: &dyn Fn(&isolab_cgroups::Stats) -> Option<f64>| {
            let v: Vec<f64> = stats.iter().filter_map(|s| f(s)).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>())
        };
        let t = &mut execution.telemetry;
        let cpu = sum(&|s| s.cpu_usage.map(|d| d.as_secs_f64())).unwrap_or(0.0);
        t.push(T::NeighboursCpu, cpu);
        t.push(T::Neighbours, self.stats.len() as f64);
        t.push(
            T::NeighboursInContainers,
            if self.in_containers { 1.0 } else { 0.0 },
        );
        t.push_some(
            T::NeighboursMemoryPeak,
            stats
                .iter()
                .filter_map(|s| s.memory_peak.map(|b| b.0 as f64))
                .reduce(f64::max),
        );
        t.push_some(T::NeighboursIoRead, sum(&|s| s.io_read.map(|b| b.0 as f64)));
        t.push_some(
            T::NeighboursIoWrite,
            sum(&|s| s.io_write.map(|b| b.0 as f64)),
        );
        t.push_some(
            T::NeighboursThrottled,
            sum(&|s| s.throttled.map(|d| d.as_secs_f64())),
        );
        t.push_some(T::NeighboursNetRate, self.net_rate);
        // The io reservation's throttle of each instance, to compare with what they did.
        for io in &set.limits.io {
            t.push_some(T::NeighbourReadIopsLimit, io.read_iops.map(|r| r as f64));
            t.push_some(T::NeighbourWriteIopsLimit, io.write_iops.map(|w| w as f64));
        }
        execution.notes.extend(self.notes);
        if let (Some((capacity, target)), Some((neighbours, subject))) =
            (set.net_target, self.net_mbps)
        {
            let achieved = 100.0 * (neighbours + subject) / capacity;
            let t = &mut execution.telemetry;
            t.push(T::NeighbourTargetUtil, target);
            t.push(T::NeighbourAchievedUtil, achieved);
            t.push(T::NeighboursNetMbps, neighbours);
            t.push(T::SubjectNetMbps, subject);
            if crate::neighbour::off_target(target, achieved) {
                execution.notes.push(format!(
                    "neighbour {} off target: neighbours {neighbours:.0} + subject {subject:.0} Mbit/s, {achieved:.1}% of {capacity:.0} against {target:.1}% (more than {} points apart)",
                    set.level,
                    crate::neighbour::OFF_TARGET_POINTS
                ));
            }
        }
        if let (Some((_, capacity, target)), Some(iops)) = (&set.disk_target, self.disk_iops) {
            let achieved = 100.0 * iops / capacity;
            let t = &mut execution.telemetry;
            t.push(T::NeighbourTargetUtil, *target);
            t.push(T::NeighbourAchievedUtil, achieved);
            t.push(T::DiskIops, iops);
            if crate::neighbour::off_target(*target, achieved) {
                execution.notes.push(format!(
                    "neighbour {} off target: the disk did {iops:.0} IOPS, {achieved:.1}% of its {capacity:.0} against {target:.1}% (more than {} points apart)",
                    set.level,
                    crate::neighbour::OFF_TARGET_POINTS
                ));
            }
        }
        if let Some(requested) = set.target_util_pct {
            let t = &mut execution.telemetry;
            t.push(T::NeighbourTargetUtil, requested);
            t.push_some(T::NeighbourReachableUtil, set.reachable_util_pct);
            let target = set.reachable_util_pct.unwrap_or(requested);
            if let Some(achieved) = t.get(T::HostUtil) {
                t.push(T::NeighbourAchievedUtil, achieved);
                if crate::neighbour::off_target(target, achieved) {
                    execution.notes.push(format!(
                        "neighbour {} off target: host utilisation {achieved:.1}% against {target:.1}% (more than {} points apart)",
                        set.level,
                        crate::neighbour::OFF_TARGET_POINTS
                    ));
                }
            }
        }
    }
}

/// Whether the child is still running (not exited), without reaping it.
fn child_alive_unreaped(child: &Child) -> bool {
    let mut info: libc::siginfo_t = unsafe_zeroed_siginfo();
    // SAFETY: waitid with WNOHANG|WNOWAIT on our own child only inspects its state.
    let r = unsafe {
        libc::waitid(
            libc::P_PID,
            child.pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid to read after waitid filled (or zeroed) the struct.
    r == 0 && unsafe { info.si_pid() } == 0
}

fn unsafe_zeroed_siginfo() -> libc::siginfo_t {
    // SAFETY: siginfo_t is plain old data; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

fn stop_server(server: Option<Child>, cgroup: &Cgroup) {
    if let Some(s) = server {
        if !ended_within(&s, libc::SIGTERM, Duration::from_secs(2)) {
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
}
