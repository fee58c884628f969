//! One run of a cell: its jobs executed in a working directory of its own (a
//! service stack, or one job per instance, with the cell's neighbours and
//! reservation), the finished run stored in its own transaction, and the cell's
//! progress updated, reported and stopped where the stopping rule says so.

use std::path::Path;
use std::time::SystemTime;

use isolab_stats::Sample;
use isolab_store::{ExperimentId, RunStatus};

use super::copies::copies_result;
use super::error::RunError;
use super::finished::{Done, FinishedRun};
use super::instances::{instances_metrics, measurement_windows, merge_instances};
use super::job::job_name;
use super::stopping::{stop_after, CellState};
use super::workdir::{run_workdir, DiskFacts, Removal};
use super::{Event, Runner, STORE_PATIENCE};
use crate::platform::PlatformError;
use crate::spec::{Cell, ExperimentSpec};

impl Runner<'_> {
    /// Executes and stores one run; `None` when it was interrupted. A `compared` cell
    /// is not stopped for a low CV: its comparisons decide (see
    /// [`super::stopping::decide_round`]).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn one_run(
        &mut self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        cell: &Cell,
        state: &mut CellState,
        round: u32,
        disk: &DiskFacts,
        compared: bool,
    ) -> Result<Option<()>, RunError> {
        let reps = spec.repetitions;
        let (repetition, warmup) = state.next_run(reps.warmup);
        let tag = format!(
            "c{}-{}{}",
            cell.index,
            if warmup { "w" } else { "r" },
            repetition
        );
        self.observer.event(&Event::RunStarted {
            cell: cell.key(),
            index: cell.index,
            repetition,
            warmup,
        });

        crate::phases::begin();
        let workdir = run_workdir(&self.config.workdir_base, id, &tag);
        let started_at = SystemTime::now();
        let result = self.on_storage(spec, cell, &workdir, disk, |disk| {
            self.execute(id, spec, cell, &tag, &workdir, disk)
        });
        crate::phases::mark("executed");
        // Removed while the run is stored (on two cores at once); the removal has
        // ended when this function returns, whichever way.
        let removal = (!self.config.keep_workdirs).then(|| Removal::start(&workdir));
        let finished = match result {
            Err(PlatformError::Interrupted) => return Ok(None),
            // Beside a neighbour, a subject that does not finish is the outcome.
            Err(PlatformError::TimedOut(t)) if cell.neighbour.is_some() => {
                let neighbour = cell.neighbour.as_ref().map(ToString::to_string);
                FinishedRun::did_not_report(t, &neighbour.unwrap_or_default(), disk.notes.clone())
            }
            Err(e) => FinishedRun::failed(&e, disk.notes.clone()),
            Ok(done) => FinishedRun::executed(done, cell, disk.notes.clone()),
        };
        let run = finished.into_new_run(state.id, repetition, warmup, round, started_at);
        crate::phases::mark("finished");
        self.store.insert_run_patiently(&run, STORE_PATIENCE)?;
        crate::phases::mark("stored");
        drop(removal);
        crate::phases::mark("workdir_removed");

        let primary = run.metrics.iter().find(|m| m.name == cell.workload.primary);
        let ok = run.status == RunStatus::Ok;
        state.record(
            warmup,
            repetition,
            primary.filter(|_| ok).map(|m| (round, m)),
        );
        let cv = Sample::new(state.primary_values()).ok().map(|s| s.cv());
        self.observer.event(&Event::RunFinished {
            cell: cell.key(),
            index: cell.index,
            repetition,
            warmup,
            ok,
            wall_s: run.wall.as_secs_f64(),
            primary: primary.map(|m| m.value),
            n: state.values.len(),
            cv,
            error: run.error.clone(),
        });
        if let Some(reason) = stop_after(&run, state, cv, reps, compared, &cell.workload.primary) {
            self.stop_cell(cell, state, reason)?;
        }
        crate::phases::mark("end");
        Ok(Some(()))
    }

    /// Runs `execute` with `cell`'s working directory `workdir` on the cell's storage
    /// (mounted before, removed after, also on failure) and the facts of the disk it
    /// is on, and records the storage, read back, in the run's limits and (but for
    /// the default, `bind`) its notes.
    fn on_storage(
        &self,
        spec: &ExperimentSpec,
        cell: &Cell,
        workdir: &Path,
        disk: &DiskFacts,
        execute: impl FnOnce(&DiskFacts) -> Result<Done, PlatformError>,
    ) -> Result<Done, PlatformError> {
        let volumes = PlatformVolumes {
            executor: self.platform,
            platform: &cell.platform,
        };
        // The storage goes when this returns, before the working directory is removed.
        let storage = crate::storage::prepare(
            self.config.storage_host.clone(),
            crate::storage::Request {
                level: cell.storage,
                spec: &spec.storage,
                base: &self.config.workdir_base,
                workdir,
                instances: cell.instances,
            },
            Some(&volumes),
        )?;
        let facts = storage.facts()?;
        crate::phases::mark("storage");
        // A mounted working directory is another file system: its own direct I/O
        // support, and its own device to throttle (a loop or device-mapper device).
        let mut done = if facts.mounts.is_empty() {
            execute(disk)?
        } else {
            execute(&DiskFacts::probe(workdir))?
        };
        // The default says nothing in the notes; its data says which disk.
        if facts.level != isolab_engines::StorageLevel::Bind {
            done.execution.notes.push(facts.note());
        }
        if let Some(limits) = done.limits.as_object_mut() {
            limits.insert("storage".into(), serde_json::json!(facts));
        }
        Ok(done)
    }

    /// Executes run `tag` of experiment `id`'s `cell` in `workdir`: a service stack
    /// (its measurement beside the cell's neighbours), or one job per instance with
    /// the cell's neighbours, their metrics aggregated and their executions merged
    /// into the run's; under the cell's reservation either way.
    fn execute(
        &self,
        id: ExperimentId,
        spec: &ExperimentSpec,
        cell: &Cell,
        tag: &str,
        workdir: &Path,
        disk: &DiskFacts,
    ) -> Result<Done, PlatformError> {
        let limits = self.subject_limits(cell, tag, disk)?;
        let name = job_name(id, tag);
        // A host cpu pool confines the engine's daemons for the run too.
        let confined = match cell.host_cpus {
            Some(_) => Some(
                self.platform
                    .confine_daemons(&cell.platform, &self.cell_cpus(cell))?,
            ),
            None => None,
        };
        let mut done = self.execute_confined((id, spec), cell, &name, workdir, disk, &limits)?;
        if let Some(c) = confined.filter(|c| !c.confined.is_empty()) {
            done.limits["placement"]["daemons"] = serde_json::json!(c.confined);
        }
        Ok(done)
    }

    /// [`Runner::execute`] once the daemons are confined.
    fn execute_confined(
        &self,
        (id, spec): (ExperimentId, &ExperimentSpec),
        cell: &Cell,
        name: &str,
        workdir: &Path,
        disk: &DiskFacts,
        limits: &isolab_cgroups::Limits,
    ) -> Result<Done, PlatformError> {
        if cell.workload.stack.is_some() {
            if cell.instances > 1 {
                return Err(PlatformError::NoServices {
                    platform: cell.platform.name.clone(),
                    why: "a service stack runs one instance in this version".into(),
                });
            }
            // The stack's subject side: the components' limits under the reservation,
            // and the neighbours that run beside its measurement, sized (where they
            // need it) against the stack run once alone in a directory of its own.
            let mut subject = self.stack_subject(spec, cell, name, workdir, limits);
            let alone = |start: &dyn Fn()| {
                let dir = solo_workdir(workdir);
                let alone = self.stack_subject(spec, cell, &format!("{name}-solo"), &dir, limits);
                let done =
                    self.execute_stack((id, spec), cell, (&alone, Some(start)), &dir, disk.direct);
                let _ = std::fs::remove_dir_all(&dir);
                Ok(done?.execution)
            };
            let note = self.set_neighbours(
                (cell, name, limits),
                std::slice::from_mut(&mut subject),
                disk,
                Some(&alone),
            )?;
            let mut done =
                self.execute_stack((id, spec), cell, (&subject, None), workdir, disk.direct)?;
            super::neighbours::stored_neighbour_limits(&done.execution, &mut done.limits);
            done.execution.notes.extend(note);
            return Ok(done);
        }
        let w = &cell.workload;
        let (mut jobs, copies) = if cell.copies > 1 {
            let (job, copies) = self.copies_job(spec, cell, name, workdir, disk, limits)?;
            (vec![job], copies)
        } else {
            let jobs = self.instance_jobs(spec, cell, name, workdir, disk, limits)?;
            (jobs, Vec::new())
        };
        crate::phases::mark("jobs");
        let calibration_note = self.set_neighbours((cell, name, limits), &mut jobs, disk, None)?;
        crate::phases::mark("neighbours");
        let executions = self.execute_jobs(&jobs)?;
        crate::phases::mark("execute_jobs");
        let (mut execution, metrics) = if copies.is_empty() {
            let windows = measurement_windows(w, &executions, &jobs);
            let metrics = instances_metrics(w, &executions, &jobs, &windows);
            (merge_instances(executions, &windows)?, metrics)
        } else {
            let instance = executions
                .into_iter()
                .next()
                .ok_or(PlatformError::Interrupted)?;
            copies_result(w, instance, &copies)
        };
        execution.notes.extend(calibration_note);
        let mut limits = serde_json::json!({
            "requested": jobs[0].limits,
            "applied": execution.limits_applied,
            "summary": crate::shape::describe_limits(&execution.limits_applied),
            "placement": self.placement_facts(cell, &jobs[0].limits),
        });
        super::neighbours::stored_neighbour_limits(&execution, &mut limits);
        Ok(Done {
            execution,
            metrics,
            limits,
            load: None,
        })
    }
}

/// Where a stack runs alone for its solo profile: beside the run's own working
/// directory (`…-solo`), so `gc` knows its owner.
fn solo_workdir(workdir: &Path) -> std::path::PathBuf {
    let mut name = workdir.file_name().unwrap_or_default().to_os_string();
    name.push("-solo");
    workdir.with_file_name(name)
}

/// The named volumes of a cell's platform, made by the runner's executor.
struct PlatformVolumes<'a> {
    executor: &'a dyn crate::platform::Executor,
    platform: &'a crate::platform::PlatformDef,
}

impl crate::storage::Volumes for PlatformVolumes<'_> {
    fn create_volume(&self, name: &str) -> Result<std::path::PathBuf, crate::storage::VolumeError> {
        Ok(self.executor.create_volume(self.platform, name)?)
    }

    fn remove_volume(&self, name: &str) -> Result<(), crate::storage::VolumeError> {
        Ok(self.executor.remove_volume(self.platform, name)?)
    }
}
