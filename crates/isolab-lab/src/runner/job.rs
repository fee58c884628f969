//! A run's jobs: the subject's limits and one job per instance, its templates
//! rendered for its own working directory (created here, with the workload's
//! assets and files), and the metrics its parser reads from what the job left.

use std::path::Path;

use isolab_cgroups::{IdSet, Limits};
use isolab_store::{ExperimentId, MetricValue};
use isolab_workloads::{Params, RunOutput, WorkloadDef};

use super::workdir::DiskFacts;
use super::{host_memory, Runner};
use crate::platform::{Execution, Job, PlatformError};
use crate::shape::limits_for;
use crate::spec::{Cell, ExperimentSpec};

/// The name of run `tag` of experiment `id`'s jobs (instances add `-i<k>`).
pub(super) fn job_name(id: ExperimentId, tag: &str) -> String {
    format!("exp{id}-pid{}/{tag}", std::process::id())
}

impl Runner<'_> {
    /// The cpus `cell` may use: its host cpu pool (`host_cpus` cpus of the runner's,
    /// packed by the topology like a pinned instance: whole cores, one node), else
    /// every cpu of the runner.
    pub(super) fn cell_cpus(&self, cell: &Cell) -> IdSet {
        cell.host_cpus
            .and_then(|n| self.config.topology.pick(&self.config.cpus, n, false))
            .unwrap_or_else(|| self.config.cpus.clone())
    }

    /// The subject's limits for `cell`'s shape and placement on the cell's cpus
    /// (with io limits on the `disk`'s device); run `tag` names it in the error. In a
    /// host cpu pool a subject that is not pinned is bound to the pool.
    pub(super) fn subject_limits(
        &self,
        cell: &Cell,
        tag: &str,
        disk: &DiskFacts,
    ) -> Result<Limits, PlatformError> {
        let cpus = self.cell_cpus(cell);
        let topology = &self.config.topology;
        let mut limits = limits_for(&cell.shape, cell.placement, &cpus, topology, disk.device)
            .ok_or_else(|| PlatformError::LimitMismatch {
                cgroup: tag.to_owned(),
                detail: format!(
                    "shape `{}` needs {} cpus but only {cpus} are available",
                    cell.shape.name,
                    cell.shape.cpus()
                ),
            })?;
        if cell.host_cpus.is_some() && limits.cpuset.is_none() {
            if topology.node_count() > 1 {
                limits.mems = Some(topology.nodes_of(&cpus));
            }
            limits.cpuset = Some(cpus);
        }
        Ok(limits)
    }

    /// What the run's data says of where the subject's cpus are: the cell's pool, and
    /// for a cpuset its nodes, packages, cores and the cores it shares with anything
    /// else isolab may run on them.
    pub(super) fn placement_facts(&self, cell: &Cell, limits: &Limits) -> serde_json::Value {
        let pool = self.cell_cpus(cell);
        let mut facts = serde_json::json!({
            "host_cpus": pool.to_string(),
            "shape_cpus": cell.shape.cpu_count(),
            "chr": cell.shape.cpu_count() / pool.len().max(1) as f64,
        });
        if let Some(set) = &limits.cpuset {
            let placed = self.config.topology.describe(set, &pool);
            facts["cpus"] = serde_json::json!(placed.cpus.to_string());
            facts["nodes"] = serde_json::json!(placed.nodes.to_string());
            facts["packages"] = serde_json::json!(placed.packages.to_string());
            facts["cores"] = serde_json::json!(placed.cores);
            facts["split_cores"] = serde_json::json!(placed.split_cores);
        }
        facts
    }

    /// One job per instance of `cell`'s subject, each with `limits`: instance `k`
    /// works in `<workdir>/i<k>` (a single instance in `workdir` itself).
    pub(super) fn instance_jobs(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: &str,
        workdir: &Path,
        disk: &DiskFacts,
        limits: &Limits,
    ) -> Result<Vec<Job>, PlatformError> {
        (0..cell.instances)
            .map(|k| {
                let (name, workdir) = if cell.instances == 1 {
                    (name.to_owned(), workdir.to_path_buf())
                } else {
                    (format!("{name}-i{k}"), workdir.join(format!("i{k}")))
                };
                self.job(spec, cell, name, &workdir, disk, limits.clone())
            })
            .collect()
    }

    /// The job of one instance (or copy) of `cell`'s subject, its templates rendered
    /// for `workdir` (created here) and a free port of its own.
    pub(super) fn job(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        name: String,
        workdir: &Path,
        disk: &DiskFacts,
        limits: Limits,
    ) -> Result<Job, PlatformError> {
        create_dir(workdir)?;
        let w = &cell.workload;
        let port = if w.server.is_some() { free_port()? } else { 0 };
        let params = self.params(spec, cell, workdir, &limits, disk.direct, port);
        self.place_inputs(w, &params)?;
        let env = image_config(spec, cell).map(|c| c.env.as_slice());
        let render = |t: &str| render(t, &params).map(|argv| with_image_env(env, argv));
        Ok(Job {
            platform: cell.platform.clone(),
            image: spec.job_image(&cell.platform),
            name,
            argv: render(&w.command)?,
            prepare: w.prepare.as_deref().map(render).transpose()?,
            cleanup: w.cleanup.as_deref().map(render).transpose()?,
            server: w
                .server
                .as_deref()
                .map(render)
                .transpose()?
                .map(|argv| crate::platform::Server { argv, port }),
            workdir: workdir.to_path_buf(),
            limits,
            timeout: spec.timeout,
            neighbours: None,
            uses_disk: w.uses_disk,
            stack: None,
        })
    }

    /// What `cell`'s templates are rendered with: `workdir` and `port`, the memory
    /// of the subject's `limits` (the host's without one), and whether the disk
    /// takes `direct` I/O.
    pub(super) fn params(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        workdir: &Path,
        limits: &Limits,
        direct: bool,
        port: u16,
    ) -> Params {
        Params {
            cpus: cell.shape.cpus(),
            threads: cell.thread_count(),
            duration: spec.duration,
            workdir: workdir.to_path_buf(),
            port,
            server: self.platform.server_address(&cell.platform),
            direct,
            memory: limits.memory_max.unwrap_or_else(host_memory).0,
            work: cell.workload.work.as_ref().map_or(0, |w| w.amount),
            components: Vec::new(),
            image_command: image_config(spec, cell).map_or_else(Vec::new, |c| c.command()),
        }
    }

    /// Places what `w` reads into `params.workdir`: its assets and its files,
    /// rendered with `params`.
    pub(super) fn place_inputs(
        &self,
        w: &WorkloadDef,
        params: &Params,
    ) -> Result<(), PlatformError> {
        self.place_assets(w, params)?;
        for f in &w.files {
            let text = isolab_workloads::render_text(&f.contents, params).map_err(|source| {
                PlatformError::Template {
                    action: "cannot render the file",
                    path: params.workdir.join(&f.path),
                    source,
                }
            })?;
            write_file(&params.workdir, f, &text)?;
        }
        Ok(())
    }

    /// Places the assets `w` needs, prepared before the runs for `params.work`,
    /// into `params.workdir`.
    pub(super) fn place_assets(
        &self,
        w: &WorkloadDef,
        params: &Params,
    ) -> Result<(), PlatformError> {
        let workdir = &params.workdir;
        for a in &w.assets {
            let built = self
                .config
                .assets
                .get(&a.name, params.work)
                .ok_or_else(|| PlatformError::AssetMissing {
                    path: workdir.join(&a.name),
                    asset: a.name.clone(),
                    workload: w.name.clone(),
                })?;
            crate::assets::place(built, workdir).map_err(|source| PlatformError::Asset {
                path: workdir.join(&a.name),
                source: Box::new(source),
            })?;
        }
        Ok(())
    }
}

/// Creates a run's working directory.
pub(super) fn create_dir(dir: &Path) -> Result<(), PlatformError> {
    std::fs::create_dir_all(dir).map_err(|source| PlatformError::Io {
        action: "cannot create working directory",
        path: dir.to_path_buf(),
        source,
    })
}

/// Writes `text`, file `f` of a workload or component rendered, into `workdir`.
pub(super) fn write_file(
    workdir: &Path,
    f: &isolab_workloads::FileTemplate,
    text: &str,
) -> Result<(), PlatformError> {
    let path = workdir.join(&f.path);
    if let Some(dir) = path.parent() {
        create_dir(dir)?;
    }
    std::fs::write(&path, text).map_err(|source| PlatformError::Io {
        action: "cannot write the file",
        path,
        source,
    })
}

/// A free TCP port on loopback for a job's server or a stack's component.
pub(super) fn free_port() -> Result<u16, PlatformError> {
    crate::platform::free_port().map_err(|source| PlatformError::Io {
        action: "cannot find a free port on",
        path: "127.0.0.1".into(),
        source,
    })
}

/// Template `t` rendered into an argv with `params`.
pub(super) fn render(t: &str, params: &Params) -> Result<Vec<String>, PlatformError> {
    isolab_workloads::render(t, params).map_err(|source| PlatformError::Template {
        action: "cannot render the command template for",
        path: params.workdir.clone(),
        source,
    })
}

/// The metrics of `w`'s parser from what `job` left in execution `e`.
pub(super) fn parse_metrics(
    w: &WorkloadDef,
    e: &Execution,
    job: &Job,
) -> Result<Vec<MetricValue>, String> {
    isolab_workloads::parse(w.parser, &output(e, job))
        .map(|ms| ms.into_iter().map(metric_value).collect())
        .map_err(|e| format!("cannot parse the output of {}: {e}", w.name))
}

/// A workload's metric as the store keeps it.
pub(super) fn metric_value(m: isolab_workloads::Metric) -> MetricValue {
    MetricValue {
        name: m.name,
        unit: m.unit,
        direction: m.direction,
        value: m.value,
    }
}

/// What the parsers read of an instance's execution.
pub(super) fn output<'a>(e: &'a Execution, job: &'a Job) -> RunOutput<'a> {
    RunOutput {
        stdout: &e.stdout,
        stderr: &e.stderr,
        workdir: &job.workdir,
        wall: e.wall,
    }
}

/// The configuration of the image of one's own that `cell` runs from, if it runs from one.
fn image_config<'a>(
    spec: &'a ExperimentSpec,
    cell: &Cell,
) -> Option<&'a isolab_image::ImageConfig> {
    spec.image_config
        .as_ref()
        .filter(|_| cell.platform.kind.needs_image())
}

/// `argv` under the image's environment: `env NAME=value … argv` when the image sets any
/// variable besides the default `PATH` (Docker and Podman apply it themselves too; the
/// other runtimes and the VMs' agents would not).
fn with_image_env(env: Option<&[String]>, argv: Vec<String>) -> Vec<String> {
    let own: Vec<&String> = env
        .into_iter()
        .flatten()
        .filter(|e| e.as_str() != isolab_runtime::config::DEFAULT_PATH)
        .collect();
    if own.is_empty() {
        return argv;
    }
    let mut wrapped = vec!["env".to_owned()];
    wrapped.extend(own.into_iter().cloned());
    wrapped.extend(argv);
    wrapped
}

#[cfg(test)]
mod tests {
    use std::error::Error;
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_template_that_does_not_render_says_why_and_keeps_the_cause() {
        let params = Params {
            cpus: 1,
            threads: 1,
            duration: Duration::from_secs(1),
            workdir: "/w".into(),
            port: 0,
            server: std::net::Ipv4Addr::LOCALHOST,
            direct: false,
            memory: 1 << 30,
            work: 0,
            components: Vec::new(),
            image_command: Vec::new(),
        };
        let cause = isolab_workloads::render("echo 'open", &params).unwrap_err();
        let e = render("echo 'open", &params).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("cannot render the command template for /w: {cause}")
        );
        let source = e.source().and_then(|s| s.downcast_ref());
        assert_eq!(source, Some(&cause));
    }
}
