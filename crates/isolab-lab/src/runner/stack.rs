//! One run of a service stack: its components started in the cell's platform with
//! the cell's limits (read back from each component's cgroup), ready-checked, the
//! data loaded, then measured — by a load generator on the host, in a cgroup of its
//! own on cpus the components do not use where there are such cpus, or by the
//! workload's command run in the platform — and the components always stopped, the
//! last started first, also when a step fails or the run is interrupted.
//!
//! While the generator runs, the components are watched: one that exits fails the
//! run at once (the generator is stopped) with the end of its log.

use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use isolab_cgroups::{IdSet, Limits};
use isolab_store::{Telemetry, TelemetrySet};
use isolab_workloads::load;
use isolab_workloads::{ComponentDef, Endpoint, LoadDef, Measure, Params, Ready, ShapeScope};

use super::finished::Done;
use super::job::{create_dir, free_port, metric_value, parse_metrics, render, write_file};
use super::Runner;
use crate::platform::{Interrupt, Job, PlatformDef, PlatformError, Service, ServiceSpec};
use crate::spec::{Cell, ExperimentSpec};

/// How often the components are checked while the load runs.
const WATCH: Duration = Duration::from_millis(100);

impl Runner<'_> {
    /// Runs one repetition of `cell`, whose workload is a service stack.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn execute_stack(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: &str,
        workdir: &Path,
        limits: &Limits,
        direct: bool,
    ) -> Result<Done, PlatformError> {
        let w = &cell.workload;
        let stack = w.stack.as_ref().ok_or_else(|| PlatformError::Engine {
            engine: "isolab".into(),
            message: format!("workload {} has no service stack", w.name),
        })?;
        create_dir(workdir)?;
        let mut params = Params {
            cpus: cell.shape.cpus,
            threads: cell.thread_count(),
            duration: spec.duration,
            workdir: workdir.to_path_buf(),
            port: 0,
            server: self.platform.server_address(&cell.platform),
            direct,
            memory: limits.memory_max.unwrap_or_else(super::host_memory).0,
            work: cell.workload.work.as_ref().map_or(0, |w| w.amount),
            components: Vec::new(),
        };
        let n = stack.components.len();
        let started = Instant::now();
        let mut services: Vec<(String, Service<'_>)> = Vec::new();
        // Whatever the steps below return, `stop_all` then stops every component
        // started, the last first.
        let result = (|| {
            for (k, c) in stack.components.iter().enumerate() {
                let own = match stack.shape {
                    ShapeScope::Component => limits.clone(),
                    ShapeScope::Stack => share(limits, k, n),
                };
                let service = self.start_component(spec, cell, name, c, own, &mut params)?;
                params.components.push(Endpoint {
                    name: c.name.clone(),
                    host: service.address.ip().to_string(),
                    port: service.address.port(),
                });
                services.push((c.name.clone(), service));
            }
            params.port = 0;
            if let Some(t) = &stack.data_load {
                let job = self.stack_job(spec, cell, format!("{name}-data"), t, &params, limits)?;
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
            }
            let ready = started.elapsed();
            let mut done = match &stack.measure {
                Measure::Load(l) => self.drive_load(name, workdir, l, &services)?,
                Measure::Client => self.run_client(spec, w, name, workdir, &params, &services)?,
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
                    Done {
                        limits: serde_json::Value::Null,
                        execution,
                        metrics,
                        load: None,
                    }
                }
            };
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
            let summary = services
                .iter()
                .map(|(c, s)| format!("{c}: {}", crate::shape::describe_limits(&s.limits_applied)))
                .collect::<Vec<_>>()
                .join("; ");
            done.limits = serde_json::json!({
                "summary": summary,
                "shape_applies": stack.shape.as_str(),
                "components": services.iter().map(|(c, s)| (c.clone(), serde_json::json!({
                    "cgroup": s.cgroup,
                    "address": s.address.to_string(),
                    "applied": s.limits_applied,
                    "summary": crate::shape::describe_limits(&s.limits_applied),
                }))).collect::<serde_json::Map<_, _>>(),
                "measured": done.limits,
            });
            Ok(done)
        })();
        let stopped = stop_all(services);
        let done = result?;
        stopped?;
        Ok(done)
    }

    /// Starts component `c` with `limits`, its files written and its prepare step run
    /// first; returns once its readiness check passed.
    fn start_component<'p>(
        &'p self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: &str,
        c: &ComponentDef,
        limits: Limits,
        params: &mut Params,
    ) -> Result<Service<'p>, PlatformError> {
        let failed = |what: String| PlatformError::Component {
            component: c.name.clone(),
            what,
        };
        params.port = free_port()?;
        for f in &c.files {
            let text = isolab_workloads::render_text(&f.contents, params)
                .map_err(|e| failed(format!("file {}: {e}", f.path)))?;
            write_file(&params.workdir, f, &text)?;
        }
        if let Some(t) = &c.prepare {
            let job = self.stack_job(
                spec,
                cell,
                format!("{name}-{}-prep", c.name),
                t,
                params,
                &limits,
            )?;
            let e = self.platform.execute(&job, self.interrupt)?;
            if !e.exit.success() {
                return Err(failed(format!(
                    "prepare `{}` ended with {}: {}",
                    job.argv.join(" "),
                    e.exit,
                    tail(&e.stderr, 1500)
                )));
            }
        }
        let mut job = self.stack_job(
            spec,
            cell,
            format!("{name}-{}", c.name),
            &c.command,
            params,
            &limits,
        )?;
        job.timeout = Duration::MAX;
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
            Ready::Http { path, status } => wait_http(
                service.address,
                path,
                *status,
                deadline,
                &service,
                self.interrupt,
            ),
            Ready::Command(t) => {
                let mut own = params.clone();
                own.components.push(Endpoint {
                    name: c.name.clone(),
                    host: service.address.ip().to_string(),
                    port: service.address.port(),
                });
                let argv = isolab_workloads::render(t, &own)
                    .map_err(|e| failed(format!("readiness command: {e}")))?;
                wait_command(&argv, deadline, &service, self.interrupt)
            }
        };
        match check {
            Ok(()) => Ok(service),
            Err(why) if self.interrupt.is_triggered() => {
                drop(why);
                Err(PlatformError::Interrupted)
            }
            Err(why) => Err(failed(format!(
                "did not become ready within {}: {why}; its log ends with: {}",
                humantime::format_duration(c.ready_timeout),
                service.stderr_tail(1500)
            ))),
        }
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
        let argv = render(t, params)?;
        Ok(Job {
            platform: cell.platform.clone(),
            image: cell.platform.kind.needs_image().then(|| spec.image.clone()),
            name,
            argv,
            prepare: None,
            cleanup: None,
            server: None,
            workdir: params.workdir.clone(),
            limits: limits.clone(),
            timeout: stack_timeout(spec),
            neighbours: None,
            uses_disk: cell.workload.uses_disk,
        })
    }

    /// Runs `w`'s command on the host, outside the platform, on the cpus the
    /// components leave, against them; its metrics from `w`'s parser.
    fn run_client(
        &self,
        spec: &ExperimentSpec,
        w: &isolab_workloads::WorkloadDef,
        name: &str,
        workdir: &Path,
        params: &Params,
        services: &[(String, Service<'_>)],
    ) -> Result<Done, PlatformError> {
        let used = components_cpus(services);
        let (cpus, shares) = generator_cpus(&self.config.cpus, &used);
        let argv = render(&w.command, params)?;
        let job = host_job(
            format!("{name}-client"),
            workdir,
            argv,
            (&cpus, shares),
            stack_timeout(spec),
        );
        let mut execution = self.run_outside(
            &job,
            services,
            "the client",
            "the client ran on the host (the client was stopped)",
        )?;
        if shares {
            execution.notes.push(format!(
                "the client on the host shared cpus {cpus} with the components (no cpu of this host was free of them): its cpu use competes with theirs"
            ));
        }
        let metrics = parse_metrics(w, &execution, &job);
        Ok(Done {
            limits: serde_json::json!({ "client_cpus": cpus.to_string(), "client_shares_cpus": shares }),
            execution,
            metrics,
            load: None,
        })
    }

    /// Runs the load generator on the host against `l.target` while watching the
    /// components; its metrics, telemetry and intervals.
    fn drive_load(
        &self,
        name: &str,
        workdir: &Path,
        l: &LoadDef,
        services: &[(String, Service<'_>)],
    ) -> Result<Done, PlatformError> {
        let generator = l.spec.generator;
        let target = services
            .iter()
            .find(|(c, _)| *c == l.target)
            .map(|(_, s)| s.address)
            .ok_or_else(|| PlatformError::Component {
                component: l.target.clone(),
                what: "is the load's target but was not started".into(),
            })?;
        let used = components_cpus(services);
        let (cpus, shares) = generator_cpus(&self.config.cpus, &used);
        let missing = generator_missing(generator);
        if !missing.is_empty() {
            return Err(PlatformError::Component {
                component: l.target.clone(),
                what: format!(
                    "cannot be loaded: the load generator {generator} is not installed on the host ({} missing): {}",
                    missing.join(", "),
                    generator.install_hint()
                ),
            });
        }
        let dir = workdir.join("load");
        create_dir(&dir)?;
        let base_url = format!("http://{target}");
        let inv =
            load::invocation(&l.spec, &base_url, &dir, cpus.len().max(1) as u32).map_err(|e| {
                PlatformError::Component {
                    component: l.target.clone(),
                    what: format!("cannot be loaded by {generator}: {e}"),
                }
            })?;
        for (file, text) in &inv.files {
            let path = dir.join(file);
            std::fs::write(&path, text).map_err(|source| PlatformError::Io {
                action: "cannot write the load generator's file",
                path,
                source,
            })?;
        }
        let argv = generator_argv(&inv.commands, &inv.env);
        if argv.is_empty() {
            return Err(PlatformError::Component {
                component: l.target.clone(),
                what: format!("got no command from {generator}"),
            });
        }
        let timeout = l.spec.profile.duration() * 2 + Duration::from_secs(300);
        let job = host_job(format!("{name}-load"), &dir, argv, (&cpus, shares), timeout);
        let execution = self.run_outside(
            &job,
            services,
            generator.as_str(),
            "the load ran (the load generator was stopped)",
        );
        let mut execution = execution?;
        let result = if execution.exit.success() {
            load::parse_load(generator, &dir, &execution.stdout, &execution.stderr)
                .map_err(|e| format!("cannot parse the results of {generator}: {e}"))
        } else {
            Err(format!(
                "the load generator {generator} ended with {}: {}",
                execution.exit,
                tail(&execution.stderr, 1500)
            ))
        };
        let gen_cpu = execution.telemetry.get(Telemetry::CpuUsage).unwrap_or(0.0);
        let wall = execution.wall.as_secs_f64().max(1e-9);
        let fraction = gen_cpu / wall / cpus.len().max(1) as f64;
        let mut telemetry = TelemetrySet::new();
        telemetry.push(Telemetry::GeneratorCpu, gen_cpu);
        telemetry.push(Telemetry::GeneratorCpuUtil, 100.0 * fraction);
        telemetry.push(Telemetry::GeneratorCpus, cpus.len() as f64);
        telemetry.push(Telemetry::GeneratorSharesCpus, f64::from(u8::from(shares)));
        if shares {
            execution.notes.push(format!(
                "the load generator shared cpus {cpus} with the components (no cpu of this host was free of them): its cpu use competes with theirs"
            ));
        }
        let (metrics, result) = match result {
            Ok(r) => {
                telemetry.push(Telemetry::LoadAchievedRate, r.achieved_rate());
                if let Some(target) = l.spec.profile.mean_target_rate() {
                    telemetry.push(Telemetry::LoadTargetRate, target);
                }
                let saturated = load::saturation(&l.spec.profile, &r, fraction);
                telemetry.push(
                    Telemetry::GeneratorSaturated,
                    f64::from(u8::from(saturated.is_some())),
                );
                execution.notes.extend(saturated);
                execution.notes.extend(r.notes.iter().cloned());
                (
                    Ok(r.metrics().into_iter().map(metric_value).collect()),
                    Some(r),
                )
            }
            Err(e) => (Err(e), None),
        };
        execution.telemetry = telemetry;
        Ok(Done {
            execution,
            metrics,
            limits: serde_json::json!({
                "generator": generator.as_str(),
                "generator_cpus": cpus.to_string(),
                "target": target.to_string(),
            }),
            load: result,
        })
    }

    /// Runs `job` (a [`host_job`]) while watching the components: one that dies
    /// stops it and fails the run, `during` saying what was going on. `what` names
    /// the program in errors.
    fn run_outside(
        &self,
        job: &Job,
        services: &[(String, Service<'_>)],
        what: &str,
        during: &str,
    ) -> Result<crate::platform::Execution, PlatformError> {
        let dir = &job.workdir;
        let own_interrupt = Interrupt::new().map_err(|source| PlatformError::Io {
            action: "cannot create an interrupt pipe for the program outside the platform",
            path: dir.to_path_buf(),
            source,
        })?;
        let mut died: Option<(String, String)> = None;
        let execution = std::thread::scope(|scope| {
            let run = scope.spawn(|| self.platform.execute(job, &own_interrupt));
            while !run.is_finished() {
                if self.interrupt.is_triggered() {
                    own_interrupt.trigger();
                } else if died.is_none() {
                    if let Some((c, s)) = services.iter().find(|(_, s)| !s.is_running()) {
                        died = Some((c.clone(), s.stderr_tail(1500)));
                        own_interrupt.trigger();
                    }
                }
                std::thread::sleep(WATCH);
            }
            run.join().unwrap_or_else(|_| {
                Err(PlatformError::Engine {
                    engine: what.into(),
                    message: format!("the thread running {what} panicked"),
                })
            })
        });
        if let Some((component, log)) = died {
            return Err(PlatformError::Component {
                component,
                what: format!("exited while {during}: {log}"),
            });
        }
        if self.interrupt.is_triggered() {
            return Err(PlatformError::Interrupted);
        }
        execution
    }
}

/// How long a stack's command in the platform or client on the host may take: the
/// spec's run timeout, at least four times the duration plus ten minutes.
fn stack_timeout(spec: &ExperimentSpec) -> Duration {
    spec.timeout
        .max(spec.duration * 4 + Duration::from_secs(600))
}

/// A job that runs `argv` on the host, outside the platform's limits, in a cgroup
/// of its own on `cpus` (not confined to them when `shares`: no cpu was free of
/// the components).
fn host_job(
    name: String,
    dir: &Path,
    argv: Vec<String>,
    (cpus, shares): (&IdSet, bool),
    timeout: Duration,
) -> Job {
    Job {
        platform: PlatformDef::new(crate::platform::PlatformKind::HOST),
        image: None,
        name,
        argv,
        prepare: None,
        cleanup: None,
        server: None,
        workdir: dir.to_path_buf(),
        limits: Limits {
            cpuset: (!shares).then(|| cpus.clone()),
            ..Limits::default()
        },
        timeout,
        neighbours: None,
        uses_disk: false,
    }
}

/// What of `generator` is missing on this host: its program and the files it needs
/// (JMeter's jars, Locust's venv); empty when it can run.
pub fn generator_missing(generator: load::Generator) -> Vec<&'static str> {
    std::iter::once(generator.program())
        .filter(|p| isolab_tools::find_program(p).is_none())
        .chain(
            generator
                .required_files()
                .iter()
                .copied()
                .filter(|f| !Path::new(f).exists()),
        )
        .collect()
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

/// The cpus the components are bound to; `None` when one of them may run anywhere.
fn components_cpus(services: &[(String, Service<'_>)]) -> Option<IdSet> {
    let mut all = std::collections::BTreeSet::new();
    for (_, s) in services {
        all.extend(s.limits_applied.cpuset.as_ref()?.iter().copied());
    }
    Some(IdSet(all))
}

/// The generator's cpus: those of `available` the components do not use; all of
/// `available`, shared, when they may use every cpu. Returns whether it shares.
pub(crate) fn generator_cpus(available: &IdSet, used: &Option<IdSet>) -> (IdSet, bool) {
    let free: std::collections::BTreeSet<u32> = match used {
        Some(used) => available
            .iter()
            .filter(|c| !used.contains(**c))
            .copied()
            .collect(),
        None => Default::default(),
    };
    if free.is_empty() {
        (available.clone(), true)
    } else {
        (IdSet(free), false)
    }
}

/// One argv for the generator's commands: the single command itself, or `sh -c`
/// running them in order (stopping at the first failure); environment by `env`.
fn generator_argv(commands: &[Vec<String>], env: &[(String, String)]) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    if !env.is_empty() {
        argv.push("env".into());
        argv.extend(env.iter().map(|(k, v)| format!("{k}={v}")));
    }
    match commands {
        [] => return Vec::new(),
        [one] => argv.extend(one.iter().cloned()),
        many => {
            let script = many
                .iter()
                .map(shell_words::join)
                .collect::<Vec<_>>()
                .join(" && ");
            argv.extend(["sh".to_owned(), "-c".to_owned(), script]);
        }
    }
    argv
}

/// The load's intervals as the store keeps them: the users of a closed-loop profile
/// where the generator did not report them, the target rate of an open loop.
pub(super) fn intervals(r: &load::LoadResult, cell: &Cell) -> Vec<isolab_store::LoadInterval> {
    let profile = cell.workload.stack.as_ref().and_then(|s| match &s.measure {
        Measure::Load(l) => Some(&l.spec.profile),
        Measure::Command | Measure::Client => None,
    });
    r.intervals
        .iter()
        .map(|i| {
            let at = Duration::from_secs_f64(i.start_s.max(0.0));
            let lat = i.latency_ms.as_ref();
            isolab_store::LoadInterval {
                request: i.request.clone(),
                start_s: i.start_s,
                users: i.users.or_else(|| profile.and_then(|p| p.users_at(at))),
                target_rate: profile.and_then(|p| p.rate_at(at)),
                requests: i.requests,
                failures: i.failures,
                latency_mean_ms: lat.map(|l| l.mean),
                latency_p50_ms: lat.map(|l| l.p50),
                latency_p90_ms: lat.map(|l| l.p90),
                latency_p99_ms: lat.map(|l| l.p99),
                latency_max_ms: lat.map(|l| l.max),
            }
        })
        .collect()
}

/// Waits until `GET path` on `address` answers `status`; why not, at `deadline`
/// or when the component exits or the run is interrupted.
fn wait_http(
    address: SocketAddr,
    path: &str,
    status: u16,
    deadline: Instant,
    service: &Service<'_>,
    interrupt: &Interrupt,
) -> Result<(), String> {
    loop {
        let last = match http_status(address, path) {
            Ok(s) if s == status => return Ok(()),
            Ok(s) => format!("GET {path} answered {s}, not {status}"),
            Err(e) => format!("GET {path}: {e}"),
        };
        if !service.is_running() {
            return Err(format!("it exited ({last})"));
        }
        if interrupt.is_triggered() || Instant::now() >= deadline {
            return Err(last);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The status code of an HTTP/1.0 `GET path` on `address`.
fn http_status(address: SocketAddr, path: &str) -> std::io::Result<u16> {
    use std::io::{Read, Write};
    let mut s = TcpStream::connect_timeout(&address, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "GET {path} HTTP/1.0\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )?;
    let mut head = [0u8; 64];
    let mut n = 0;
    while n < head.len() {
        match s.read(&mut head[n..])? {
            0 => break,
            k => n += k,
        }
        if head[..n].contains(&b'\n') {
            break;
        }
    }
    let line = String::from_utf8_lossy(&head[..n]);
    line.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {:?}", line.trim())))
}

/// Runs `argv` on the host until it exits 0; why not, at `deadline` or when the
/// component exits or the run is interrupted.
fn wait_command(
    argv: &[String],
    deadline: Instant,
    service: &Service<'_>,
    interrupt: &Interrupt,
) -> Result<(), String> {
    use isolab_tools::ToolRunner;
    let Some(program) = argv.first() else {
        return Err("the readiness command is empty".into());
    };
    if isolab_tools::find_program(program).is_none() {
        return Err(format!(
            "the readiness command `{program}` is not installed on the host"
        ));
    }
    let command = argv[1..]
        .iter()
        .fold(isolab_tools::ToolCommand::new(program, program), |c, a| {
            c.arg(a)
        });
    loop {
        let last = match isolab_tools::SystemTools.run(&command) {
            Ok(_) => return Ok(()),
            Err(e) => e.to_string(),
        };
        if !service.is_running() {
            return Err(format!("it exited ({last})"));
        }
        if interrupt.is_triggered() || Instant::now() >= deadline {
            return Err(last);
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn tail(s: &str, n: usize) -> &str {
    super::tail_chars(s.trim_end(), n)
}

/// Checks in the unit tests of the runner use these.
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

    #[test]
    fn the_generator_gets_the_cpus_the_components_leave() {
        let all = IdSet([0, 1].into());
        assert_eq!(
            generator_cpus(&all, &Some(IdSet([0].into()))),
            (IdSet([1].into()), false)
        );
        assert_eq!(generator_cpus(&all, &None), (all.clone(), true));
        assert_eq!(
            generator_cpus(&all, &Some(IdSet([0, 1].into()))),
            (all, true)
        );
    }

    #[test]
    fn several_generator_commands_run_in_order_through_sh() {
        let one = vec![vec!["wrk".to_owned(), "-c".into(), "8".into()]];
        assert_eq!(generator_argv(&one, &[]), ["wrk", "-c", "8"]);
        let two = vec![
            vec!["vegeta".to_owned(), "attack".into(), "-rate=100/s".into()],
            vec!["vegeta".to_owned(), "encode".into(), "a b".into()],
        ];
        assert_eq!(
            generator_argv(&two, &[("JVM_ARGS".into(), "-Xmx256m".into())]),
            [
                "env",
                "JVM_ARGS=-Xmx256m",
                "sh",
                "-c",
                "vegeta attack '-rate=100/s' && vegeta encode 'a b'"
            ]
        );
    }
}
