//! Services in VMs: the command runs in a guest booted on isolab's bridge, until
//! the service is stopped.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Mutex;

use super::super::instance::Supervisor;
use super::super::limit::limit;
use super::super::service::{Guest, Service, ServiceSpec, Started};
use super::super::{Job, PlatformError};
use super::net::VmNet;
use super::{guest_limits, guest_plan, qemu_limits, vm_error, GuestEngine, GuestPlan, VmPlatform};

/// Starts `job`'s command as a service in a QEMU guest: the VM boots on isolab's
/// bridge inside an instance of `host` with QEMU's limits, the command runs in the
/// guest (in `vm+ENGINE`, in the engine's container on the guest's host network),
/// and the service is ready when the guest's address accepts a TCP connection on
/// `spec.port` from the host. Stopping it powers the guest off (then QMP `quit`,
/// then SIGKILL) and releases the tap, the address and the instance.
pub(super) fn start_service<'p>(
    host: &Supervisor,
    vm: &VmPlatform,
    engine: Option<&GuestEngine>,
    host_cpus: usize,
    job: &Job,
    spec: ServiceSpec,
) -> Started<'p> {
    let GuestPlan {
        mut config,
        command,
        shape_memory,
        ..
    } = guest_plan(vm, engine, host_cpus, job)?;
    let instance = host.create_instance(&job.name)?;
    let net = match VmNet::attach(job) {
        Ok(net) => net,
        Err(e) => {
            let _ = instance.remove();
            return Err(e);
        }
    };
    let ip = net.ip().unwrap_or(Ipv4Addr::UNSPECIFIED);
    let address = SocketAddr::from((ip, spec.port));
    // On an error from here on, locals drop in reverse order: `running` kills QEMU,
    // `service` removes the instance, `net` closes the tap and releases the address.
    let mut service = Service::in_instance(instance, address);
    config.network = net.guest();
    let cgroup = service
        .instance()
        .ok_or_else(|| vm_error("the service has no instance"))?;
    let applied = limit(cgroup, &qemu_limits(&job.limits))?;
    let attacher = cgroup.attacher()?;
    let mut running = isolab_vm::start(&config, &command, Some(attacher))?;
    let (config_vcpus, config_memory) = (config.vcpus, config.memory.0);
    drop(config);
    super::super::service::wait_ready(&mut || running.is_running(), address, spec.ready_timeout)
        .map_err(|waited| PlatformError::ServerNotReady {
            command: job.argv.join(" "),
            port: spec.port,
            waited,
            stderr: running.stderr_tail().unwrap_or_else(|| {
                format!(
                    "(still running in the guest {ip}; the end of its console:)\n{}",
                    running.console_tail()
                )
            }),
        })?;
    let limits = guest_limits(applied, &job.limits, shape_memory);
    let facts = serde_json::json!({
        "arrangement": "per-component",
        "guest": job.name,
        "address": ip.to_string(),
        "qemu_pid": running.pid(),
        "vcpus": config_vcpus,
        "memory_bytes": config_memory,
        "boot_s": running.boot().as_secs_f64(),
    });
    service.set_guest(
        limits,
        Box::new(VmService {
            running: Mutex::new(running),
            net,
            facts,
        }),
    );
    Ok(service)
}

/// A service's VM and its place on the bridge.
struct VmService {
    running: Mutex<isolab_vm::RunningVm>,
    net: VmNet,
    /// What the run records about its guest.
    facts: serde_json::Value,
}

impl Guest for VmService {
    fn is_running(&self) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_running()
    }

    fn stderr_tail(&self, max: usize) -> String {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let text = running.stderr_tail().unwrap_or_else(|| {
            format!(
                "(running in the guest; the end of its console:)\n{}",
                running.console_tail()
            )
        });
        isolab_engines::tool::tail(&text, max)
    }

    fn facts(&self) -> serde_json::Value {
        self.facts.clone()
    }

    fn stop(self: Box<Self>) -> Result<(), PlatformError> {
        let VmService { running, net, .. } = *self;
        let stopped = running
            .into_inner()
            .unwrap_or_else(|e| e.into_inner())
            .stop();
        let released = net.release();
        stopped?;
        released
    }
}
