//! The `isolab` platform: the workload runs in a container of isolab's own runtime.
//!
//! The lab starts the `isolab-runtime` binary like any measured command: in an
//! unlimited instance cgroup of its own (`isolab/exp3-pid42/c0-r1`), with perf
//! counters that the container's processes inherit and the host sampler running.
//! The shape and placement become runtime flags (`--cpus`, `--cpuset`,
//! `--memory`, `--pids`, `--io-read-bps`…), so the runtime applies them to the
//! container's cgroup, nested in the instance's (`…/c0-r1/rt-<id>`), and reads
//! them back. The root is a throw-away overlay on the experiment's image; the run's
//! working directory is bind-mounted at the same path, so templates and parsers
//! see the same `{workdir}` as on the host and disk workloads hit the same disk.
//!
//! The runtime's `--report` file brings back what only it can see: the limits
//! read back from the container's cgroup, that cgroup's counters read after the
//! command ended and before the cgroup was removed, and the start-up phases. The
//! container's counters replace the instance's in the run's telemetry, so throttling
//! and memory peak describe the container and not the runtime around it.
//!
//! A workload's server runs on the host, in the instance cgroup, outside the
//! container's limits; a container on the `bridge` network reaches it at the
//! bridge's host address (`{server}`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_runtime::{ContainerId, Report};

use isolab_engines::Capabilities;

use super::driver::{Driver, Executed, PlatformInfo, PlatformKind, Unavailable};
use super::instance::Supervisor;
use super::limit_flags::runtime_limit_flags;
use super::service::{self, LimitsAt, Remove, ServiceSpec, Started};
use super::{container_id, Execution, Interrupt, Job, Network, PlatformError};

/// How long the runtime has, after SIGTERM, to stop its container and tear it
/// down before it is killed (and its leftovers collected).
const GRACE: Duration = Duration::from_secs(10);

/// The program name of the runtime.
pub const RUNTIME_PROGRAM: &str = isolab_runtime::config::PROGRAM;

/// Where the `isolab` platform finds its runtime and keeps its state.
#[derive(Debug, Clone)]
pub struct IsolabConfig {
    /// The `isolab-runtime` executable.
    pub program: PathBuf,
    /// The runtime's state directory (`/run/isolab`; without root `$XDG_RUNTIME_DIR/isolab`).
    pub state_dir: PathBuf,
    /// Without root: where the user's copies of images are kept
    /// ([`isolab_image::user_copy`]); containers run on the copy, never on the image.
    pub user_images: Option<PathBuf>,
}

impl IsolabConfig {
    /// The runtime as [`isolab_runtime::config::locate_program`] finds it: next to
    /// the running executable, else on `PATH`; `ISOLAB_RUNTIME` overrides both.
    pub fn discover() -> IsolabConfig {
        IsolabConfig {
            program: isolab_runtime::config::locate_program(),
            state_dir: isolab_runtime::config::default_state_dir(),
            user_images: isolab_runtime::config::rootless().then(isolab_image::user_copy_root),
        }
    }

    /// The root a container runs on: `image`, or without root the user's copy of it
    /// (made the first time).
    fn root_of(&self, image: &Path) -> Result<PathBuf, PlatformError> {
        let image = check_image(image)?;
        match &self.user_images {
            None => Ok(image.to_path_buf()),
            Some(root) => isolab_image::user_copy(image, root)
                .map(|c| c.dir)
                .map_err(|e| PlatformError::Engine {
                    engine: RUNTIME_PROGRAM.into(),
                    message: format!(
                        "without root, containers run on your copy of image {}, and making it failed: {e}",
                        image.display()
                    ),
                }),
        }
    }
}

/// The `isolab-runtime run` command line that runs `job` in container `id` whose
/// cgroup is nested in `instance_cgroup`, writing its report to `report`.
pub(crate) fn runtime_argv(
    program: &Path,
    id: &ContainerId,
    job: &Job,
    image: &Path,
    instance_cgroup: &Path,
    report: &Path,
) -> Vec<String> {
    let mut a: Vec<String> = vec![
        program.display().to_string(),
        "run".into(),
        "--id".into(),
        id.to_string(),
        "--rootfs-type".into(),
        "overlay".into(),
        "--cgroup-parent".into(),
        instance_cgroup.display().to_string(),
        "--network".into(),
        job.platform.network.as_str().into(),
        "--report".into(),
        report.display().to_string(),
        "--bind".into(),
        format!("{0}:{0}", job.workdir.display()),
        "--cwd".into(),
        job.workdir.display().to_string(),
    ];
    a.extend(runtime_limit_flags(&job.limits));
    a.push(image.display().to_string());
    a.push("--".into());
    a.extend(job.argv.iter().cloned());
    a
}

/// Neighbours in isolab containers on the experiment's image, network none.
struct IsolabNeighbours<'a> {
    config: &'a IsolabConfig,
    image: &'a Path,
    hierarchy: &'a isolab_cgroups::Hierarchy,
}

impl super::NeighbourContainers for IsolabNeighbours<'_> {
    fn wrap(
        &self,
        id: &str,
        argv: &[String],
        cgroup_parent: &Path,
        workdir: &Path,
    ) -> Result<Vec<String>, PlatformError> {
        let mut a: Vec<String> = [
            self.config.program.display().to_string(),
            "run".into(),
            "--id".into(),
            container_id("", id)?.to_string(),
            "--rootfs-type".into(),
            "overlay".into(),
            "--cgroup-parent".into(),
            cgroup_parent.display().to_string(),
            "--network".into(),
            "none".into(),
            "--bind".into(),
            format!("{0}:{0}", workdir.display()),
            "--cwd".into(),
            workdir.display().to_string(),
            self.image.display().to_string(),
            "--".into(),
        ]
        .into();
        a.extend(argv.iter().cloned());
        Ok(a)
    }

    fn collect(&self, _id: &str) -> Result<(), PlatformError> {
        // The runtime was killed with its container: gc finds it dead and removes
        // its cgroup, mounts and state.
        isolab_runtime::gc(&self.config.state_dir, self.hierarchy)
            .map(drop)
            .map_err(|e| PlatformError::Runtime {
                action: "collecting a neighbour's container",
                source: Box::new(e),
            })
    }
}

/// The `isolab` platform's driver.
pub(crate) struct IsolabDriver {
    config: IsolabConfig,
}

impl IsolabDriver {
    pub(crate) fn new(config: IsolabConfig) -> IsolabDriver {
        IsolabDriver { config }
    }
}

impl Driver for IsolabDriver {
    fn info(&self) -> PlatformInfo {
        use isolab_engines::NetworkMode as N;
        PlatformInfo {
            kind: PlatformKind::ISOLAB,
            summary: "isolab's own container runtime (isolab-runtime) on the experiment's image",
            capabilities: Capabilities::container(&[N::None, N::Bridge, N::Host]),
        }
    }

    fn available(&self) -> Result<String, Unavailable> {
        isolab_tools::find_program(&self.config.program)
            .map(|p| p.display().to_string())
            .ok_or(Unavailable::Runtime {
                program: RUNTIME_PROGRAM,
            })
    }

    fn prepare(
        &self,
        _levels: &[&super::PlatformDef],
        image: Option<&Path>,
    ) -> Result<Vec<(String, String)>, PlatformError> {
        let Some(image) = image else {
            return Ok(Vec::new());
        };
        let mut entries = super::image_entries(PlatformKind::ISOLAB.as_str(), image);
        if let Some(root) = &self.config.user_images {
            let copy = isolab_image::user_copy(check_image(image)?, root).map_err(|e| {
                PlatformError::Engine {
                    engine: RUNTIME_PROGRAM.into(),
                    message: format!("making your copy of image {}: {e}", image.display()),
                }
            })?;
            entries.push((
                "engine.isolab.user_copy".into(),
                copy.dir.display().to_string(),
            ));
            entries.push((
                "engine.isolab.user_copy_left_out".into(),
                copy.left_out.join(","),
            ));
        }
        Ok(entries)
    }

    fn execute(&self, supervisor: &Supervisor, job: &Job, interrupt: &Interrupt) -> Executed {
        execute(supervisor, &self.config, job, interrupt)
    }

    fn beside_neighbours(
        &self,
        supervisor: &Supervisor,
        job: &Job,
        interrupt: &Interrupt,
        body: &mut dyn FnMut() -> Executed,
    ) -> Executed {
        let neighbours = IsolabNeighbours {
            config: &self.config,
            image: &self.config.root_of(job.container_image(RUNTIME_PROGRAM)?)?,
            hierarchy: supervisor.hierarchy(),
        };
        supervisor.beside_neighbours(
            job,
            interrupt,
            super::NeighbourHost::Containers(&neighbours),
            body,
        )
    }

    fn start_service(&self, sup: &Supervisor, job: &Job, spec: ServiceSpec) -> Started<'_> {
        let image = self.config.root_of(job.container_image(RUNTIME_PROGRAM)?)?;
        let id = container_id("", &job.name)?;
        let report = job.workdir.join(".isolab-service.json");
        let instance = sup.instance_path(&job.name);
        let argv = runtime_argv(&self.config.program, &id, job, &image, &instance, &report);
        // A runtime killed after its grace leaves its container behind.
        let hierarchy = sup.hierarchy().clone();
        let remove: Remove<'_> = Box::new(move || {
            isolab_runtime::gc(&self.config.state_dir, &hierarchy)
                .map(|_| ())
                .map_err(|e| PlatformError::Engine {
                    engine: RUNTIME_PROGRAM.into(),
                    message: format!("collecting the service's container: {e}"),
                })
        });
        service::start(sup, job, spec, LimitsAt::Container, || {
            Ok((argv, Some(remove)))
        })
    }
}

/// Runs `job` in an `isolab-runtime` container inside an instance of `host`.
pub(crate) fn execute(
    host: &Supervisor,
    config: &IsolabConfig,
    job: &Job,
    interrupt: &Interrupt,
) -> Result<Execution, PlatformError> {
    let image = &config.root_of(job.container_image(RUNTIME_PROGRAM)?)?;
    if job.server.is_some() && job.platform.network == Network::None {
        return Err(PlatformError::Engine {
            engine: RUNTIME_PROGRAM.into(),
            message: format!(
                "platform `{}` has network `none`, so the command cannot reach its server",
                job.platform.name
            ),
        });
    }
    let report_path = job.workdir.join(".isolab-runtime.json");
    let instance = host.instance_path(&job.name);
    let id = container_id("", &job.name)?;
    let argv = runtime_argv(&config.program, &id, job, image, &instance, &report_path);
    let neighbours = IsolabNeighbours {
        config,
        image,
        hierarchy: host.hierarchy(),
    };
    host.instance_with(
        job,
        interrupt,
        super::NeighbourHost::Containers(&neighbours),
        |cgroup| {
            let _ = std::fs::remove_file(&report_path);
            let measured = host.measured(job, &argv, cgroup, interrupt, GRACE);
            // A runtime killed after its grace leaves its container behind: collect it
            // before the instance cgroup (its parent) is removed.
            let collected = isolab_runtime::gc(&config.state_dir, host.hierarchy());
            let mut measured = measured?;
            if let Err(e) = collected {
                measured
                    .notes
                    .push(format!("collecting leftover containers failed: {e}"));
            }
            let report = Report::read(&report_path).map_err(|e| PlatformError::Engine {
                engine: RUNTIME_PROGRAM.into(),
                message: format!(
                    "{} ended with {} without a readable report {}: {e}; its stderr: {}",
                    RUNTIME_PROGRAM,
                    measured.exit,
                    report_path.display(),
                    super::process::read_tail(
                        &super::launch::log_path(&job.workdir, "command", "stderr"),
                        2000
                    )
                ),
            })?;
            if let Some(message) = report.error {
                return Err(PlatformError::Engine {
                    engine: RUNTIME_PROGRAM.into(),
                    message,
                });
            }
            let differences = job.limits.differences(&report.limits);
            if !differences.is_empty() {
                return Err(PlatformError::LimitMismatch {
                    cgroup: report.cgroup.display().to_string(),
                    detail: differences.join("; "),
                });
            }
            // The container's counters, not those of the instance around the runtime.
            measured.stats = report.stats.ok_or_else(|| report.notes.join("; "));
            measured.notes.extend(report.notes);
            let mut execution = measured.into_execution(&job.workdir, report.limits);
            for (phase, at) in &report.trace {
                execution.telemetry.push(
                    isolab_store::Telemetry::RuntimePhase(phase.name().into()),
                    at.as_secs_f64(),
                );
            }
            Ok(execution)
        },
    )
}

/// `image`, which must be a directory with a shell, or the container cannot start.
fn check_image(image: &Path) -> Result<&Path, PlatformError> {
    if image.join("bin/sh").exists() || image.join("usr/bin/sh").exists() {
        return Ok(image);
    }
    Err(PlatformError::Engine {
        engine: RUNTIME_PROGRAM.into(),
        message: format!(
            "image {} is not a root filesystem (no bin/sh): build it with `isolab image build bench {}` (about a minute), or name another with `image = \"…\"` in [experiment]",
            image.display(),
            image.display()
        ),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use isolab_cgroups::Limits;

    use super::*;
    use crate::platform::{PlatformDef, PlatformKind};

    fn job(limits: Limits) -> Job {
        Job {
            platform: PlatformDef::new(PlatformKind::ISOLAB),
            image: Some("/img".into()),
            name: "exp3-pid42/c0-r1".into(),
            argv: vec!["sysbench".into(), "cpu".into(), "run".into()],
            prepare: None,
            cleanup: None,
            server: None,
            workdir: "/var/tmp/isolab run/exp3-pid42-c0-r1".into(),
            limits,
            timeout: Duration::from_secs(60),
            neighbours: None,
            uses_disk: false,
            stack: None,
        }
    }

    #[test]
    fn the_workdir_is_bound_at_the_same_path_and_the_command_follows_the_separator() {
        let j = job(Limits::default());
        let argv = runtime_argv(
            Path::new("/usr/bin/isolab-runtime"),
            &container_id("", &j.name).unwrap(),
            &j,
            Path::new("/img"),
            Path::new("isolab/exp3-pid42/c0-r1"),
            Path::new("/w/.isolab-runtime.json"),
        );
        let at = |flag: &str| {
            let i = argv.iter().position(|a| a == flag).unwrap();
            argv[i + 1].clone()
        };
        assert_eq!(at("--id"), "exp3-pid42-c0-r1");
        assert_eq!(at("--cgroup-parent"), "isolab/exp3-pid42/c0-r1");
        assert_eq!(at("--network"), "none");
        assert_eq!(
            at("--bind"),
            "/var/tmp/isolab run/exp3-pid42-c0-r1:/var/tmp/isolab run/exp3-pid42-c0-r1"
        );
        let sep = argv.iter().position(|a| a == "--").unwrap();
        assert_eq!(argv[sep - 1], "/img");
        assert_eq!(argv[sep + 1..], ["sysbench", "cpu", "run"]);
    }

    #[test]
    fn a_directory_without_a_shell_is_not_an_image() {
        let dir = tempfile::tempdir().unwrap();
        let err = check_image(dir.path()).unwrap_err().to_string();
        assert!(err.contains("isolab image build bench"), "{err}");
        std::fs::create_dir_all(dir.path().join("bin")).unwrap();
        std::fs::write(dir.path().join("bin/sh"), "").unwrap();
        assert!(check_image(dir.path()).is_ok());
    }
}
