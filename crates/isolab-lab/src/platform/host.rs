//! The `host` platform's driver: the workload runs as a child of isolab, confined in a
//! cgroup of its own that carries the shape's and placement's limits. The instance's
//! life (scope, prepare and cleanup, neighbours, probe, removal) is the
//! [`Supervisor`]'s, as on every platform.

use std::time::Duration;

use isolab_engines::{Capabilities, LimitKinds, NetworkMode};

use super::driver::{Driver, Executed, PlatformInfo, PlatformKind, Unavailable};
use super::instance::Supervisor;
use super::limit::limit;
use super::service::{self, ServiceSpec, Started};
use super::{Interrupt, Job};

/// The bare host.
pub(crate) struct HostDriver;

impl Driver for HostDriver {
    fn info(&self) -> PlatformInfo {
        PlatformInfo {
            kind: PlatformKind::HOST,
            summary: "the bare host: the workload runs as a child of isolab in a cgroup of its own",
            capabilities: Capabilities {
                networks: &[NetworkMode::Host],
                limits: LimitKinds::ALL,
                perf_follows_workload: true,
                needs_image: false,
                services: true,
                vm: false,
                daemons: &[],
                storage: isolab_engines::StorageLevel::MOUNTED,
            },
        }
    }

    fn available(&self) -> Result<String, Unavailable> {
        Ok("always".into())
    }

    fn execute(&self, supervisor: &Supervisor, job: &Job, interrupt: &Interrupt) -> Executed {
        supervisor.instance(job, interrupt, |cgroup| {
            let applied = limit(cgroup, &job.limits)?;
            let measured =
                supervisor.measured(job, &job.argv, cgroup, interrupt, Duration::ZERO)?;
            Ok(measured.into_execution(&job.workdir, applied))
        })
    }

    fn start_service(&self, supervisor: &Supervisor, job: &Job, spec: ServiceSpec) -> Started<'_> {
        service::start(supervisor, job, spec, service::LimitsAt::Instance, || {
            Ok((job.argv.clone(), None))
        })
    }
}
