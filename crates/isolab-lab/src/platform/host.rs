//! The `host` platform: the workload runs as a child of isolab, confined in a cgroup
//! of its own that carries the shape's and placement's limits. The instance's life
//! (scope, prepare and cleanup, neighbours, probe, removal) is the
//! [`Supervisor`]'s, as on every platform.

use std::sync::Arc;
use std::time::Duration;

use super::instance::{limit, HostPlatformConfig, Supervisor};
use super::launch::{Launcher, RealLauncher};
use super::{Execution, Interrupt, Job, Platform, PlatformError};

/// The bare-host platform.
#[derive(Debug)]
pub struct HostPlatform {
    supervisor: Supervisor,
}

impl HostPlatform {
    /// A host platform using `config`, running real processes.
    pub fn new(config: HostPlatformConfig) -> Self {
        HostPlatform::with_launcher(config, RealLauncher::shared())
    }

    /// A host platform using `config`, starting every process with `launcher`.
    pub fn with_launcher(config: HostPlatformConfig, launcher: Arc<dyn Launcher>) -> Self {
        HostPlatform {
            supervisor: Supervisor::new(config, launcher),
        }
    }

    /// The supervisor of its instances, which every platform's instances share.
    pub(crate) fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }
}

impl Platform for HostPlatform {
    fn execute(&self, job: &Job, interrupt: &Interrupt) -> Result<Execution, PlatformError> {
        let supervisor = &self.supervisor;
        supervisor.instance(job, interrupt, |cgroup| {
            let applied = limit(cgroup, &job.limits)?;
            let measured =
                supervisor.measured(job, &job.argv, cgroup, interrupt, Duration::ZERO)?;
            Ok(measured.into_execution(&job.workdir, applied))
        })
    }

    fn gc(&self) -> Result<Vec<String>, PlatformError> {
        self.supervisor.gc()
    }
}
