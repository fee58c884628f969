//! One run of a service stack: its components started in the cell's platform with
//! the cell's limits (read back from each component's cgroup), ready-checked, the
//! data loaded, then measured — by a load generator on the host, in a cgroup of its
//! own on cpus the components do not use where there are such cpus, or by the
//! workload's command run in the platform — and the components always stopped, the
//! last started first, also when a step fails or the run is interrupted.
//!
//! While the generator runs, the components are watched: one that exits fails the
//! run at once (the generator is stopped) with the end of its log.
//!
//! With a neighbour level, the neighbours run beside the measurement only (started
//! through the platform's [`crate::platform::Executor::beside_neighbours`] once the
//! data is loaded, stopped after it), and the components carry the subject's limits
//! under the cell's reservation.

mod data;
mod outside;
mod ready;

use std::path::Path;
use std::time::{Duration, Instant};

use isolab_cgroups::{Bytes, IdSet, Limits, Stats};
use isolab_store::{ExperimentId, Telemetry};
use isolab_workloads::{ComponentDef, Endpoint, Measure, Params, Ready, ShapeScope, StackDef};

use super::finished::Done;
use super::job::{create_dir, free_port, parse_metrics, render, write_file};
use super::Runner;
use crate::platform::{
    push_host_util, push_interrupts, push_qemu_stats, push_stats, Execution, Job, PlatformError,
    Service, ServiceSpec, StackPlace,
};
use crate::spec::{Cell, ExperimentSpec};
use crate::telemetry::{cpu_times, utilisation, CpuTimes, Interrupts};
use data::KeptData;

pub(super) use data::KeptDataGuard;
pub use outside::generator_missing;

/// The started components of a stack, each with its name in the stack.
type Services<'p> = Vec<(String, Service<'p>)>;

impl Runner<'_> {
    /// Runs one repetition of `cell`, whose workload is a service stack: `subject`
    /// (see [`Runner::stack_subject`]) names the run, carries the components' limits
    /// and the neighbours that run beside the measurement; `on_measure`, when given, is
    /// called as the measurement starts (the components up, the data loaded).
    pub(super) fn execute_stack(
        &self,
        (id, spec): (ExperimentId, &ExperimentSpec),
        cell: &Cell,
        (subject, on_measure): (&Job, Option<&dyn Fn()>),
        workdir: &Path,
        direct: bool,
    ) -> Result<Done, PlatformError> {
        let (name, limits) = (subject.name.as_str(), &subject.limits);
        let w = &cell.workload;
        let stack = w.stack.as_ref().ok_or_else(|| PlatformError::Engine {
            engine: "isolab".into(),
            message: format!("workload {} has no service stack", w.name),
        })?;
        create_dir(workdir)?;
        let mut params = self.params(spec, cell, workdir, limits, direct, 0);
        // The stack's assets (Cassandra's jars, the OLAP workloads' data sets) and its
        // client's files are in its working directory too.
        self.place_inputs(w, &params)?;
        let pool = self.cell_cpus(cell);
        let started = Instant::now();
        // Data made once: copied in here, when an earlier run made it.
        let kept = KeptData::of(&self.config.workdir_base, id, cell);
        let copied = kept.as_ref().is_some_and(KeptData::is_made);
        if let Some(k) = kept.as_ref().filter(|_| copied) {
            k.restore(&stack.data_paths, workdir)?;
        }
        let mut services: Services<'_> = Vec::new();
        // Whatever the steps below return, `stop_all` then stops every component
        // started, the last first.
        let result = (|| {
            let start = (spec, cell, name, stack, limits);
            self.start_components(start, &mut params, &mut services, !copied)?;
            if !copied {
                if let Some(t) = &stack.data_load {
                    self.load_data(spec, cell, name, t, &params, limits)?;
                }
                if let Some(k) = &kept {
                    // Kept with the components stopped, then started again from it,
                    // as every later run starts.
                    stop_all(std::mem::take(&mut services))?;
                    k.keep(&stack.data_paths, workdir)?;
                    params.components.clear();
                    self.start_components(start, &mut params, &mut services, false)?;
                }
            }
            let ready = started.elapsed();
            // A command in the platform records its own cgroup's counters; around a
            // generator or client outside, the components' are read here.
            let outside = !matches!(stack.measure, Measure::Command);
            let measure = || {
                if let Some(on_measure) = on_measure {
                    on_measure();
                }
                let before = outside.then(|| Before::read(&services));
                let measuring = Instant::now();
                let mut done = match &stack.measure {
                    Measure::Load(l) => self.drive_load(name, workdir, l, &services, &pool),
                    Measure::Client => {
                        self.run_client(spec, w, name, workdir, &params, &services, &pool)
                    }
                    Measure::Command => {
                        let job = self.stack_job(
                            spec,
                            cell,
                            format!("{name}-client"),
                            &w.command,
                            &params,
                            limits,
                        )?;
                        let execution = self.platform.execute(&job, self.interrupt)?;
                        let metrics = parse_metrics(w, &execution, &job);
                        Ok(Done {
                            limits: serde_json::Value::Null,
                            execution,
                            metrics,
                            load: None,
                        })
                    }
                }?;
                // A generator or client outside recorded its own counters as the
                // measurement's; the components' are the subject's.
                if let Some(before) = &before {
                    let parts = record_components(
                        &mut done.execution,
                        &services,
                        before,
                        measuring.elapsed(),
                    );
                    // Which component worked, as a client's runs say it
                    // (`NAME_cpu_time`, see `run_client`).
                    if let (Measure::Load(_), Ok(metrics)) = (&stack.measure, &mut done.metrics) {
                        metrics.extend(parts.into_iter().map(|(component, cpu)| {
                            super::job::metric_value(isolab_workloads::Metric::new(
                                format!("{component}_cpu_time"),
                                "s",
                                isolab_stats::Direction::Lower,
                                cpu.as_secs_f64(),
                            ))
                        }));
                    }
                }
                Ok(done)
            };
            let mut done = self.beside_neighbours(subject, measure)?;
            if let Some((component, service)) = services.iter().find(|(_, s)| !s.is_running()) {
                return Err(PlatformError::Component {
                    component: component.clone(),
                    what: format!(
                        "exited while it was measured: {}",
                        service.stderr_tail(1500)
                    ),
                });
            }
            done.execution
                .telemetry
                .push(Telemetry::StackReady, ready.as_secs_f64());
            done.limits = stack_limits(stack, &services, std::mem::take(&mut done.limits));
            done.limits["placement"] = self.placement_facts(cell, limits);
            if kept.is_some() {
                done.limits["data"] = serde_json::json!(if copied {
                    "copied from the first run of this platform, workload and shape"
                } else {
                    "loaded in this run, and kept for the later runs of this platform, workload and shape"
                });
            }
            Ok(done)
        })();
        let stopped = stop_all(services);
        let done = result?;
        stopped?;
        Ok(done)
    }

    /// The job that stands for the subject of a stack run of `cell` named `name`: no
    /// command of its own, the components' `limits` and working directory, and, once
    /// [`Runner::set_neighbours`] gave them, the neighbours and the reservation's
    /// limits of the subject side.
    pub(super) fn stack_subject(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: &str,
        workdir: &Path,
        limits: &Limits,
    ) -> Job {
        Job {
            platform: cell.platform.clone(),
            image: spec.job_image(&cell.platform),
            name: name.to_owned(),
            argv: Vec::new(),
            prepare: None,
            cleanup: None,
            server: None,
            workdir: workdir.to_path_buf(),
            limits: limits.clone(),
            timeout: stack_timeout(spec),
            neighbours: None,
            uses_disk: cell.workload.uses_disk,
            stack: None,
        }
    }

    /// Runs `measure` beside `subject`'s neighbours, when it has any: they start
    /// before it and are stopped after it, also when it fails, and its execution
    /// gets their telemetry and notes.
    fn beside_neighbours(
        &self,
        subject: &Job,
        measure: impl FnOnce() -> Result<Done, PlatformError>,
    ) -> Result<Done, PlatformError> {
        if subject.neighbours.is_none() {
            return measure();
        }
        let mut measure = Some(measure);
        let mut rest = None;
        let execution = self
            .platform
            .beside_neighbours(subject, self.interrupt, &mut || {
                let measure = measure.take().ok_or_else(|| PlatformError::Engine {
                    engine: "isolab".into(),
                    message: "a stack's measurement was asked for twice".into(),
                })?;
                let Done {
                    execution,
                    metrics,
                    limits,
                    load,
                } = measure()?;
                rest = Some((metrics, limits, load));
                Ok(execution)
            })?;
        let (metrics, limits, load) = rest.ok_or_else(|| PlatformError::Engine {
            engine: "isolab".into(),
            message: "the platform ran no measurement beside the neighbours".into(),
        })?;
        Ok(Done {
            execution,
            metrics,
            limits,
            load,
        })
    }

    /// Starts the components of `stack` in order, each with its part of `limits`
    /// (and its prepare step run first when `prepare`), into `services`; `params`
    /// then name every component's endpoint.
    fn start_components<'p>(
        &'p self,
        (spec, cell, name, stack, limits): (&ExperimentSpec, &Cell, &str, &StackDef, &Limits),
        params: &mut Params,
        services: &mut Services<'p>,
        prepare: bool,
    ) -> Result<(), PlatformError> {
        let n = stack.components.len();
        let total = stack_total(stack.shape, limits, n);
        for (k, c) in stack.components.iter().enumerate() {
            let own = match stack.shape {
                ShapeScope::Component => limits.clone(),
                ShapeScope::Stack => share(limits, k, n),
            };
            let service =
                self.start_component((spec, cell, name, &total), c, own, params, prepare)?;
            params.components.push(endpoint(c, &service));
            services.push((c.name.clone(), service));
        }
        params.port = 0;
        Ok(())
    }

    /// Runs the stack's data load `t` in the platform, once its components are up.
    fn load_data(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: &str,
        t: &str,
        params: &Params,
        limits: &Limits,
    ) -> Result<(), PlatformError> {
        let job = self.stack_job(spec, cell, format!("{name}-data"), t, params, limits)?;
        let e = self.platform.execute(&job, self.interrupt)?;
        if !e.exit.success() {
            return Err(PlatformError::Component {
                component: "data_load".into(),
                what: format!(
                    "(the data load `{}`) ended with {}: {}",
                    job.argv.join(" "),
                    e.exit,
                    tail(&e.stderr, 1500)
                ),
            });
        }
        Ok(())
    }

    /// Starts component `c` with `limits`, its files written and (when `prepare`) its
    /// prepare step run first; returns once its readiness check passed.
    fn start_component<'p>(
        &'p self,
        (spec, cell, name, total): (&ExperimentSpec, &Cell, &str, &Limits),
        c: &ComponentDef,
        limits: Limits,
        params: &mut Params,
        prepare: bool,
    ) -> Result<Service<'p>, PlatformError> {
        params.port = free_port()?;
        self.prepare_component(spec, cell, name, c, &limits, params, prepare)?;
        let mut job = self.stack_job(
            spec,
            cell,
            format!("{name}-{}", c.name),
            &c.command,
            params,
            &limits,
        )?;
        job.timeout = Duration::MAX;
        job.stack = Some(StackPlace {
            run: name.to_owned(),
            component: c.name.clone(),
            total: total.clone(),
        });
        let service = self.platform.start_service(
            &job,
            ServiceSpec {
                port: params.port,
                ready_timeout: c.ready_timeout,
            },
        )?;
        let deadline = Instant::now() + c.ready_timeout;
        let check = match &c.ready {
            Ready::Tcp => Ok(()),
            Ready::Http { path, status } => ready::wait_http(
                service.address,
                path,
                *status,
                deadline,
                &service,
                self.interrupt,
            ),
            Ready::Command(t) => {
                let mut own = params.clone();
                own.components.push(endpoint(c, &service));
                let argv = isolab_workloads::render(t, &own)
                    .map_err(|e| component_failed(c, format!("readiness command: {e}")))?;
                ready::wait_command(&argv, deadline, &service, self.interrupt)
            }
        };
        match check {
            Ok(()) => Ok(service),
            Err(why) if self.interrupt.is_triggered() => {
                drop(why);
                Err(PlatformError::Interrupted)
            }
            Err(why) => Err(component_failed(
                c,
                format!(
                    "did not become ready within {}: {why}; its log ends with: {}",
                    humantime::format_duration(c.ready_timeout),
                    service.stderr_tail(1500)
                ),
            )),
        }
    }

    /// Writes component `c`'s files and runs its prepare step, if it has one and
    /// `prepare` says so.
    #[allow(clippy::too_many_arguments)]
    fn prepare_component(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: &str,
        c: &ComponentDef,
        limits: &Limits,
        params: &Params,
        prepare: bool,
    ) -> Result<(), PlatformError> {
        for f in &c.files {
            let text = isolab_workloads::render_text(&f.contents, params)
                .map_err(|e| component_failed(c, format!("file {}: {e}", f.path)))?;
            write_file(&params.workdir, f, &text)?;
        }
        let Some(t) = c.prepare.as_ref().filter(|_| prepare) else {
            return Ok(());
        };
        let job = self.stack_job(
            spec,
            cell,
            format!("{name}-{}-prep", c.name),
            t,
            params,
            limits,
        )?;
        let e = self.platform.execute(&job, self.interrupt)?;
        if !e.exit.success() {
            return Err(component_failed(
                c,
                format!(
                    "prepare `{}` ended with {}: {}",
                    job.argv.join(" "),
                    e.exit,
                    tail(&e.stderr, 1500)
                ),
            ));
        }
        Ok(())
    }

    /// A job of the cell's platform running template `t` (a component, its prepare,
    /// the data load or the measured client).
    fn stack_job(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: String,
        t: &str,
        params: &Params,
        limits: &Limits,
    ) -> Result<Job, PlatformError> {
        let mut job = self.stack_subject(spec, cell, &name, &params.workdir, limits);
        job.argv = render(t, params)?;
        Ok(job)
    }
}

/// Component `c` failed: `what` happened.
fn component_failed(c: &ComponentDef, what: String) -> PlatformError {
    PlatformError::Component {
        component: c.name.clone(),
        what,
    }
}

/// Where the other components and the client reach component `c`.
fn endpoint(c: &ComponentDef, service: &Service<'_>) -> Endpoint {
    Endpoint {
        name: c.name.clone(),
        host: service.address.ip().to_string(),
        port: service.address.port(),
        cpu_usage: service
            .cpu_usage_file()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
    }
}

/// The limits of a stack run as stored: each component's, read back from its
/// cgroup, and what the measuring step reported (`measured`).
fn stack_limits(
    stack: &StackDef,
    services: &Services<'_>,
    measured: serde_json::Value,
) -> serde_json::Value {
    let summary = services
        .iter()
        .map(|(c, s)| format!("{c}: {}", crate::shape::describe_limits(&s.limits_applied)))
        .collect::<Vec<_>>()
        .join("; ");
    // Read once: a shared guest's facts ask the guest for its containers.
    let guests: Vec<serde_json::Value> = services.iter().map(|(_, s)| s.guest_facts()).collect();
    // VM platforms: one guest for every component, or a guest each.
    let arrangement = guests.iter().find_map(|g| g.get("arrangement").cloned());
    serde_json::json!({
        "summary": summary,
        "shape_applies": stack.shape.as_str(),
        "components": services.iter().zip(guests).map(|((c, s), guest)| (c.clone(), serde_json::json!({
            "cgroup": s.cgroup,
            "address": s.address.to_string(),
            "applied": s.limits_applied,
            "summary": crate::shape::describe_limits(&s.limits_applied),
            "guest": guest,
        }))).collect::<serde_json::Map<_, _>>(),
        "stack_guests": arrangement,
        "measured": measured,
    })
}

/// How long a stack's command in the platform or client on the host may take: the
/// spec's run timeout, at least four times the duration plus ten minutes.
fn stack_timeout(spec: &ExperimentSpec) -> Duration {
    spec.timeout
        .max(spec.duration * 4 + Duration::from_secs(600))
}

/// Stops the components, the last started first; the first error.
fn stop_all(mut services: Vec<(String, Service<'_>)>) -> Result<(), PlatformError> {
    let mut first = Ok(());
    while let Some((_, s)) = services.pop() {
        if let Err(e) = s.stop() {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// The limits of a stack's `n` components together: the stack's `limits` when they
/// share them, else `n` times each one's cpu quota and memory.
fn stack_total(scope: ShapeScope, limits: &Limits, n: usize) -> Limits {
    let mut total = limits.clone();
    if scope == ShapeScope::Component {
        let n = n.max(1) as u32;
        if let Some(q) = &mut total.cpu {
            q.quota *= n;
        }
        total.memory_max = total.memory_max.map(|m| Bytes(m.0 * u64::from(n)));
    }
    total
}

/// Component `k`'s part of `limits` shared by `n` components: the cpu quota and the
/// memory and pids limits divided equally, the cpuset dealt out in turn (a component
/// gets at least one cpu, shared when there are fewer cpus than components).
pub(crate) fn share(limits: &Limits, k: usize, n: usize) -> Limits {
    let n_u = n.max(1) as u32;
    let mut own = limits.clone();
    if let Some(q) = &mut own.cpu {
        q.quota = (q.quota / n_u).max(Duration::from_millis(1));
    }
    if let Some(set) = &limits.cpuset {
        let ids: Vec<u32> = set.iter().copied().collect();
        if !ids.is_empty() {
            let mine: std::collections::BTreeSet<u32> = if ids.len() >= n {
                ids.iter().skip(k).step_by(n).copied().collect()
            } else {
                [ids[k % ids.len()]].into()
            };
            own.cpuset = Some(IdSet(mine));
        }
    }
    if let Some(m) = &mut own.memory_max {
        m.0 /= n as u64;
    }
    if let Some(p) = &mut own.pids_max {
        *p = (*p / n as u64).max(1);
    }
    own
}

fn tail(s: &str, n: usize) -> &str {
    super::tail_chars(s.trim_end(), n)
}

/// Each component's cgroup counters now, in start order (`None` where its cgroup
/// cannot be read).
fn component_stats(services: &Services<'_>) -> Vec<Option<Stats>> {
    services.iter().map(|(_, s)| s.stats()).collect()
}

/// The components' counters, the host's interrupts and its cpus' times, read when
/// the measurement starts.
struct Before {
    stats: Vec<Option<Stats>>,
    interrupts: Interrupts,
    cpu_times: Vec<(u32, CpuTimes)>,
}

impl Before {
    fn read(services: &Services<'_>) -> Before {
        Before {
            stats: component_stats(services),
            interrupts: Interrupts::read(Path::new("/proc")),
            cpu_times: cpu_times(Path::new("/proc")),
        }
    }
}

/// The cpus the components may use: the union of their cpusets, `None` (every cpu)
/// when one has none.
fn components_cpus(services: &Services<'_>) -> Option<IdSet> {
    let mut all = IdSet::default();
    for (_, s) in services {
        all.0
            .extend(s.limits_applied.cpuset.as_ref()?.0.iter().copied());
    }
    Some(all)
}

/// Records what the components did while they were measured as the subject's
/// telemetry: the counters of their cgroups from `before` to now, summed over the
/// components (cpu time and its share of `wall`, CFS throttling, major faults, block
/// io, PSI stall time; see [`Stats::plus`]), and `wall`, the measurement's duration.
/// A component in a VM's guest is read from QEMU's cgroup on the host: those counters
/// are recorded as QEMU's (`qemu_cpu_usage_s`, …), the host's cost of the guest. A
/// component whose cgroup could not be read before and after is left out and named
/// in a note. The interrupts the host's cpus served meanwhile are counted on the
/// components' cpus ([`push_interrupts`]), and the host's cpus' utilisation (what a
/// cpu neighbour's utilisation target is checked against). Returns each component's
/// cpu time over the measurement.
fn record_components(
    execution: &mut Execution,
    services: &Services<'_>,
    before: &Before,
    wall: Duration,
) -> Vec<(String, Duration)> {
    let interrupts = Interrupts::read(Path::new("/proc")).since(&before.interrupts);
    push_interrupts(
        &mut execution.telemetry,
        &interrupts,
        components_cpus(services).as_ref(),
    );
    push_host_util(
        &mut execution.telemetry,
        &utilisation(&before.cpu_times, &cpu_times(Path::new("/proc"))),
    );
    let before = &before.stats;
    let mut parts = Vec::new();
    let after = component_stats(services);
    let (mut own, mut qemu): (Option<Stats>, Option<Stats>) = (None, None);
    for (((component, service), before), after) in services.iter().zip(before).zip(&after) {
        let (Some(before), Some(after)) = (before, after) else {
            if service.shares_guest() {
                continue; // the guest's counters are counted once, with another component
            }
            execution.notes.push(format!(
                "no counters of component {component}: its cgroup could not be read before and after the measurement"
            ));
            continue;
        };
        let part = after.since(before);
        // A shared guest's counters are every component's: no one component's cpu time.
        if let Some(cpu) = part.cpu_usage.filter(|_| !service.shares_guest()) {
            parts.push((component.clone(), cpu));
        }
        let total = if service.in_guest() {
            &mut qemu
        } else {
            &mut own
        };
        *total = Some(match total.take() {
            Some(t) => t.plus(&part),
            None => part,
        });
    }
    let shared: Vec<&str> = services
        .iter()
        .filter(|(_, s)| s.shares_guest())
        .map(|(c, _)| c.as_str())
        .collect();
    if !shared.is_empty() {
        execution.notes.push(format!(
            "components {} share one guest: QEMU's counters are the whole guest's, recorded once",
            shared.join(", ")
        ));
    }
    let t = &mut execution.telemetry;
    if own.is_some() || qemu.is_some() {
        t.push(Telemetry::Wall, wall.as_secs_f64());
    }
    if let Some(own) = own {
        push_stats(t, &own, wall);
    }
    if let Some(q) = qemu {
        push_qemu_stats(t, &q);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_cgroups::{Bytes, CpuQuota};

    #[test]
    fn a_stack_shape_is_shared_between_its_components() {
        let limits = Limits {
            cpu: Some(CpuQuota {
                quota: Duration::from_millis(200),
                period: Duration::from_millis(100),
            }),
            cpuset: Some(IdSet([0, 1, 2].into())),
            memory_max: Some(Bytes(2 << 30)),
            pids_max: Some(100),
            ..Limits::default()
        };
        let db = share(&limits, 0, 2);
        let web = share(&limits, 1, 2);
        assert_eq!(db.cpu.unwrap().quota, Duration::from_millis(100));
        assert_eq!(db.cpuset, Some(IdSet([0, 2].into())));
        assert_eq!(web.cpuset, Some(IdSet([1].into())));
        assert_eq!(web.memory_max, Some(Bytes(1 << 30)));
        assert_eq!(web.pids_max, Some(50));
        let one = Limits {
            cpuset: Some(IdSet([3].into())),
            ..Limits::default()
        };
        assert_eq!(share(&one, 1, 2).cpuset, Some(IdSet([3].into())));
    }
}
