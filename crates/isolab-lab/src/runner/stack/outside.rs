//! Programs run on the host against a service stack, outside the platform: the
//! measured client and the load generator, each in a cgroup of its own on the cpus
//! the components leave, while the components are watched (one that exits stops
//! the program and fails the run); the generator's results as metrics, telemetry
//! and intervals.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use isolab_cgroups::{IdSet, Limits};
use isolab_store::{Telemetry, TelemetrySet};
use isolab_workloads::{load, LoadDef, Params, WorkloadDef};

use super::{stack_timeout, tail, Services};
use crate::platform::{Execution, Interrupt, Job, PlatformDef, PlatformError};
use crate::runner::finished::Done;
use crate::runner::job::{create_dir, metric_value, parse_metrics, render};
use crate::runner::Runner;
use crate::spec::ExperimentSpec;

/// How often the components are checked while the load runs.
const WATCH: Duration = Duration::from_millis(100);

impl Runner<'_> {
    /// Runs `w`'s command on the host, outside the platform, on the cpus the
    /// components leave, against them; its metrics from `w`'s parser, with each
    /// component's cpu time during it (`NAME_cpu_time`, from its cgroup) and the
    /// data set the data load stated in `{workdir}/data-set.json` (stored with the
    /// limits). Its `{cpus}` are the client's own cpus (pgbench's `--jobs`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn run_client(
        &self,
        spec: &ExperimentSpec,
        w: &WorkloadDef,
        name: &str,
        workdir: &Path,
        params: &Params,
        services: &Services<'_>,
        pool: &IdSet,
    ) -> Result<Done, PlatformError> {
        let used = components_cpus(services);
        let (cpus, shares) = generator_cpus(pool, &used);
        let own = Params {
            cpus: cpus.len().max(1) as u32,
            ..params.clone()
        };
        let argv = render(&w.command, &own)?;
        let job = host_job(
            format!("{name}-client"),
            workdir,
            argv,
            (&cpus, shares),
            stack_timeout(spec),
        );
        let before: Vec<_> = services.iter().map(|(_, s)| s.cpu_usage()).collect();
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
        execution
            .notes
            .extend(self.sibling_note("client", &cpus, &used));
        let mut metrics = parse_metrics(w, &execution, &job);
        if let Ok(metrics) = &mut metrics {
            for ((component, service), before) in services.iter().zip(before) {
                if let (Some(a), Some(b)) = (before, service.cpu_usage()) {
                    metrics.push(metric_value(isolab_workloads::Metric::new(
                        format!("{component}_cpu_time"),
                        "s",
                        isolab_stats::Direction::Lower,
                        b.saturating_sub(a).as_secs_f64(),
                    )));
                }
            }
        }
        // The client's own counters are the measurement's, not the subject's: the
        // components' are recorded around it (see `execute_stack`).
        execution.telemetry = generator_telemetry(&execution, (&cpus, shares)).0;
        // Where a data load states the data set it made (JSON).
        let data_set = std::fs::read_to_string(workdir.join(isolab_workloads::oltp::DATA_SET_FILE))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok());
        Ok(Done {
            limits: serde_json::json!({
                "client_cpus": cpus.to_string(),
                "client_shares_cpus": shares,
                "data_set": data_set,
            }),
            execution,
            metrics,
            load: None,
        })
    }

    /// Runs the load generator on the host against `l.target` while watching the
    /// components; its metrics, telemetry and intervals.
    pub(super) fn drive_load(
        &self,
        name: &str,
        workdir: &Path,
        l: &LoadDef,
        services: &Services<'_>,
        pool: &IdSet,
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
        let (cpus, shares) = generator_cpus(pool, &used);
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
        let job = load_job(format!("{name}-load"), &dir, l, target, (&cpus, shares))?;
        let execution = self.run_outside(
            &job,
            services,
            generator.as_str(),
            "the load ran (the load generator was stopped)",
        );
        let mut execution = execution?;
        execution
            .notes
            .extend(self.sibling_note("load generator", &cpus, &used));
        Ok(load_done(l, &dir, execution, target, (&cpus, shares)))
    }

    /// Runs `job` (a [`host_job`]) while watching the components: one that dies
    /// stops it and fails the run, `during` saying what was going on. `what` names
    /// the program in errors.
    fn run_outside(
        &self,
        job: &Job,
        services: &Services<'_>,
        what: &str,
        during: &str,
    ) -> Result<Execution, PlatformError> {
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

/// The job that runs `l`'s generator against `target` on the host, in `dir`
/// (created here, with the files the generator reads), on `cpus`.
fn load_job(
    name: String,
    dir: &Path,
    l: &LoadDef,
    target: SocketAddr,
    (cpus, shares): (&IdSet, bool),
) -> Result<Job, PlatformError> {
    let generator = l.spec.generator;
    create_dir(dir)?;
    let base_url = format!("http://{target}");
    let inv = load::invocation(&l.spec, &base_url, dir, cpus.len().max(1) as u32).map_err(|e| {
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
    Ok(host_job(name, dir, argv, (cpus, shares), timeout))
}

/// The load generator's (or a client's) own cpu use, from the `execution` of its job
/// on the host on `cpus` (`shares`: those the components use too), as telemetry, and
/// the share of its cpus it kept busy.
fn generator_telemetry(
    execution: &Execution,
    (cpus, shares): (&IdSet, bool),
) -> (TelemetrySet, f64) {
    let gen_cpu = execution.telemetry.get(Telemetry::CpuUsage).unwrap_or(0.0);
    let wall = execution.wall.as_secs_f64().max(1e-9);
    let fraction = gen_cpu / wall / cpus.len().max(1) as f64;
    let mut telemetry = TelemetrySet::new();
    telemetry.push(Telemetry::GeneratorCpu, gen_cpu);
    telemetry.push(Telemetry::GeneratorCpuUtil, 100.0 * fraction);
    telemetry.push(Telemetry::GeneratorCpus, cpus.len() as f64);
    telemetry.push(Telemetry::GeneratorSharesCpus, f64::from(u8::from(shares)));
    (telemetry, fraction)
}

/// What the load generator's `execution` in `dir` gave: its results as metrics
/// and intervals (or why there are none), its own cpu use and the load it
/// achieved as telemetry, and whether it saturated.
fn load_done(
    l: &LoadDef,
    dir: &Path,
    mut execution: Execution,
    target: SocketAddr,
    (cpus, shares): (&IdSet, bool),
) -> Done {
    let generator = l.spec.generator;
    let result = if execution.exit.success() {
        load::parse_load(generator, dir, &execution.stdout, &execution.stderr)
            .map_err(|e| format!("cannot parse the results of {generator}: {e}"))
    } else {
        Err(format!(
            "the load generator {generator} ended with {}: {}",
            execution.exit,
            tail(&execution.stderr, 1500)
        ))
    };
    let (mut telemetry, fraction) = generator_telemetry(&execution, (cpus, shares));
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
    Done {
        execution,
        metrics,
        limits: serde_json::json!({
            "generator": generator.as_str(),
            "generator_cpus": cpus.to_string(),
            "target": target.to_string(),
        }),
        load: result,
    }
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
        stack: None,
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

/// The cpus the components are bound to; `None` when one of them may run anywhere.
fn components_cpus(services: &Services<'_>) -> Option<IdSet> {
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

impl Runner<'_> {
    /// A note when the `what` (a client or load generator) on `cpus` shares a core
    /// (an SMT sibling) with the components' cpus `used`, though on other cpus.
    fn sibling_note(&self, what: &str, cpus: &IdSet, used: &Option<IdSet>) -> Option<String> {
        let used = used.as_ref()?;
        let shared = self.config.topology.shared_cores(used, cpus);
        (!shared.is_empty() && cpus.iter().all(|c| !used.contains(*c))).then(|| {
            format!(
                "the {what} on cpus {cpus} runs on SMT siblings of the components' cpus {shared}: it shares their cores"
            )
        })
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

#[cfg(test)]
mod tests {
    use super::*;

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
