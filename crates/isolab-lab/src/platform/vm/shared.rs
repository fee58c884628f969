//! A service stack's components in one guest (seed 003's container host): on `vm+isolab` and
//! `vm+docker` with `stack_guests = "shared"` (their default), the first component of a stack
//! run boots a guest for the whole stack and every component runs in it as a container of the
//! level's engine ([`isolab_vm::ContainerHost`]) on the guest's network, so that they reach
//! each other inside the guest and the host reaches them at the guest's one address. The guest
//! is stopped when the last component stops, also when a start fails.
//!
//! Its size: the level's `guest_shape` (vCPUs, RAM), else every cpu isolab may use and the
//! components' memory together plus [`INNER_HEADROOM`]. Its vCPUs are pinned one to one to the
//! host's cpus when the stack is pinned and the guest has as many vCPUs as the host has cpus, so
//! that a component's cpuset means the same cpus in the guest as on the host. QEMU's cgroup is
//! not limited (the guest is the machine's container host); each component's limits are its
//! container's in the guest.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use isolab_cgroups::{Bytes, Cgroup, IdSet, Limits, Stats};
use isolab_vm::{ContainerHost, GuestCommand, InnerContainer, InnerDocker, InnerEngine};

use super::super::instance::Supervisor;
use super::super::limit::limit;
use super::super::limit_flags::runtime_limit_flags;
use super::super::service::{Guest, Service, ServiceSpec, Started};
use super::super::{Job, PlatformError, StackPlace};
use super::net::VmNet;
use super::{
    guest_plan, vm_error, GuestEngine, VmPlatform, DEFAULT_GUEST_MEMORY, DOCKER_REPORT,
    INNER_HEADROOM,
};

/// How long a component has to stop after SIGTERM before the guest's shutdown ends it.
const COMPONENT_GRACE: Duration = Duration::from_secs(15);

/// How long the launcher in the guest may take to list the containers.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);

/// The running shared guests, by stack run (held weakly: the components hold them).
#[derive(Default)]
pub(super) struct SharedGuests(Mutex<HashMap<String, Weak<SharedGuest>>>);

impl std::fmt::Debug for SharedGuests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let guests = self.0.lock().unwrap_or_else(|e| e.into_inner());
        f.debug_list().entries(guests.keys()).finish()
    }
}

/// A stack run's shared guest while any of its components runs.
pub(super) struct SharedGuest {
    /// Its job name (`<stack run>-host`).
    name: String,
    host: Mutex<Option<ContainerHost>>,
    net: Mutex<Option<VmNet>>,
    /// QEMU's cgroup.
    instance: Mutex<Option<Cgroup>>,
    cgroup: PathBuf,
    ip: Ipv4Addr,
    /// Its vCPUs, and the host cpu each is pinned to (when the stack is pinned).
    vcpus: u32,
    pin: Option<Vec<u32>>,
    /// What the run records about it (without the container list).
    facts: serde_json::Value,
    /// The engine's container list, and when it was read.
    listed: Mutex<Option<(Instant, String)>>,
    /// The component whose service counts the guest's counters (the first started).
    counted_by: String,
}

impl SharedGuest {
    /// Stops the guest, releases its address and removes QEMU's cgroup; idempotent.
    fn close(&self) -> Result<(), PlatformError> {
        let host = self.host.lock().unwrap_or_else(|e| e.into_inner()).take();
        let stopped = host.map_or(Ok(()), |h| {
            h.shutdown().map(drop).map_err(PlatformError::from)
        });
        let net = self.net.lock().unwrap_or_else(|e| e.into_inner()).take();
        let released = net.map_or(Ok(()), VmNet::release);
        let instance = self
            .instance
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let removed = instance.map_or(Ok(()), |c| {
            let _ = c.kill_all();
            c.remove().map_err(PlatformError::from)
        });
        stopped.and(released).and(removed)
    }

    fn with_host<T>(&self, f: impl FnOnce(&mut ContainerHost) -> T) -> Option<T> {
        self.host
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_mut()
            .map(f)
    }

    /// The engine's container list (read again when older than 2 s).
    fn containers(&self) -> String {
        let mut listed = self.listed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((at, text)) = listed.as_ref() {
            if at.elapsed() < Duration::from_secs(2) {
                return text.clone();
            }
        }
        let text = match self.with_host(|h| h.containers(LIST_TIMEOUT)) {
            Some(Ok(text)) => text,
            Some(Err(e)) => format!("(the list failed: {e})"),
            None => "(the guest was stopped)".into(),
        };
        *listed = Some((Instant::now(), text.clone()));
        text
    }
}

impl Drop for SharedGuest {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            eprintln!("warning: stopping the shared guest {}: {e}", self.name);
        }
    }
}

/// The engine of the container host, without a component's flags.
fn host_engine(engine: &GuestEngine, workdir: &std::path::Path) -> InnerEngine {
    match engine {
        GuestEngine::Isolab(runtime) => InnerEngine::Isolab(InnerContainer {
            runtime: runtime.program.clone(),
            flags: Vec::new(),
            image: None,
        }),
        GuestEngine::Docker => InnerEngine::Docker(InnerDocker {
            flags: Vec::new(),
            report: workdir.join(DOCKER_REPORT),
        }),
    }
}

/// The shared guest's vCPUs, their pins and its RAM for a stack whose components together
/// have `total`, on `host`, the cpus isolab may use (ascending): vCPU i is pinned to the i-th.
fn host_size(
    total: &Limits,
    shape: Option<&crate::platform::GuestShape>,
    host: &[u32],
) -> (u32, Option<Vec<u32>>, Bytes) {
    let vcpus = shape.map_or(host.len() as u32, |s| s.vcpus).max(1);
    let pin = (total.cpuset.is_some() && vcpus as usize == host.len()).then(|| host.to_vec());
    let memory = shape.and_then(|s| s.memory).unwrap_or_else(|| {
        Bytes(total.memory_max.unwrap_or(DEFAULT_GUEST_MEMORY).0 + INNER_HEADROOM.0)
    });
    (vcpus, pin, Bytes(memory.0.div_ceil(1 << 20) << 20))
}

/// Where a component starts: its platform, its job and its place in the stack run.
struct Site<'a> {
    sup: &'a Supervisor,
    vm: &'a VmPlatform,
    engine: &'a GuestEngine,
    host_cpus: usize,
    job: &'a Job,
    place: &'a StackPlace,
}

/// Boots the shared guest of the stack run `place.run`.
fn boot(site: &Site<'_>) -> Result<SharedGuest, PlatformError> {
    let (sup, vm, engine, job, place) = (site.sup, site.vm, site.engine, site.job, site.place);
    let host_cpus = site.host_cpus;
    let host_job = Job {
        name: format!("{}-host", place.run),
        limits: place.total.clone(),
        argv: vec!["sh".into()],
        stack: None,
        server: None,
        neighbours: None,
        ..job.clone()
    };
    let mut plan = guest_plan(vm, None, host_cpus, &host_job)?;
    let allowed: Vec<u32> = crate::environment::allowed_cpus()
        .map(|set| set.iter().copied().collect())
        .unwrap_or_else(|_| (0..host_cpus as u32).collect());
    let (vcpus, pin, memory) = host_size(&place.total, job.platform.guest_shape.as_ref(), &allowed);
    plan.config.vcpus = vcpus;
    plan.config.pin = pin.clone();
    plan.config.memory = memory;
    plan.config.scratch_disk = None;
    let instance = sup.create_instance(&host_job.name)?;
    let cgroup = instance.rel().to_path_buf();
    let net = match VmNet::attach(&host_job) {
        Ok(net) => net,
        Err(e) => {
            let _ = instance.remove();
            return Err(e);
        }
    };
    let ip = net.ip().unwrap_or(Ipv4Addr::UNSPECIFIED);
    plan.config.network = net.guest();
    let mut guest = SharedGuest {
        name: host_job.name.clone(),
        host: Mutex::new(None),
        net: Mutex::new(Some(net)),
        instance: Mutex::new(Some(instance)),
        cgroup,
        ip,
        vcpus,
        pin: pin.clone(),
        facts: serde_json::Value::Null,
        listed: Mutex::new(None),
        counted_by: place.component.clone(),
    };
    // From here on, dropping `guest` stops whatever was started. QEMU's cgroup is not
    // limited: the guest is the container host of the whole machine (or of its shape),
    // its vCPUs pinned one to one when the stack is pinned, and the components' limits
    // hold their containers inside it.
    let (applied, attacher) = {
        let held = guest.instance.lock().unwrap_or_else(|e| e.into_inner());
        let cgroup = held
            .as_ref()
            .ok_or_else(|| vm_error("the shared guest has no cgroup"))?;
        (limit(cgroup, &Limits::default())?, cgroup.attacher()?)
    };
    let engine_host = host_engine(engine, &job.workdir);
    let mut host = isolab_vm::start_container_host(&plan.config, &engine_host, Some(attacher))?;
    let boot = host.vm().boot().as_secs_f64();
    let pid = host.vm().pid();
    guest.facts = serde_json::json!({
        "arrangement": "shared",
        "guest": host_job.name,
        "address": ip.to_string(),
        "qemu_pid": pid,
        "vcpus": vcpus,
        "pinned": pin,
        "memory_bytes": memory.0,
        "guest_shape": job.platform.guest_shape.as_ref().map(|s| s.shape.clone()),
        "qemu_cgroup": applied,
        "boot_s": boot,
    });
    *guest.host.lock().unwrap_or_else(|e| e.into_inner()) = Some(host);
    Ok(guest)
}

/// The shared guest of `site.place.run`, booted by its first component.
fn guest_of(site: &Site<'_>) -> Result<Arc<SharedGuest>, PlatformError> {
    let mut guests = site.vm.shared.0.lock().unwrap_or_else(|e| e.into_inner());
    guests.retain(|_, g| g.strong_count() > 0);
    if let Some(g) = guests.get(&site.place.run).and_then(Weak::upgrade) {
        return Ok(g);
    }
    let g = Arc::new(boot(site)?);
    guests.insert(site.place.run.clone(), Arc::downgrade(&g));
    Ok(g)
}

/// A component's container name in the guest, and the name of its files.
fn component_name(component: &str) -> String {
    let mut name: String = component
        .chars()
        .map(|c| match c {
            'a'..='z' | '0'..='9' | '-' | '_' => c,
            'A'..='Z' => c.to_ascii_lowercase(),
            _ => '-',
        })
        .collect();
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        name.insert(0, 'c');
    }
    name.truncate(48);
    name
}

/// The component's cpuset in the guest: the vCPUs pinned to its host cpus (`pin[i]` is
/// vCPU i's host cpu), or, in a guest whose vCPUs float, the same numbers, which the guest
/// must have.
fn inner_cpuset(
    limits: &Limits,
    pin: Option<&[u32]>,
    vcpus: u32,
    component: &str,
) -> Result<Limits, PlatformError> {
    let mut inner = limits.clone();
    inner.mems = None;
    inner.io = Vec::new();
    if let Some(set) = &limits.cpuset {
        let vcpu_of = |c: u32| match pin {
            Some(pin) => pin.iter().position(|&p| p == c).map(|i| i as u32),
            None => (c < vcpus).then_some(c),
        };
        let inside: Option<IdSet> = set.iter().map(|&c| vcpu_of(c)).collect();
        let Some(inside) = inside else {
            return Err(vm_error(format!(
                "component {component} is pinned to host cpus {set}, but the guest its stack shares has {vcpus} vCPUs (vCPU i runs on host cpu i): give the level a `guest_shape` with more cpus, or let the stack share {vcpus} cpus"
            )));
        };
        inner.cpuset = Some(inside);
    }
    Ok(inner)
}

/// The component's command in the guest: its engine's container, named `stack-NAME`, on the
/// guest's network, with its limits.
fn component_command(
    engine: &GuestEngine,
    job: &Job,
    name: &str,
    limits: &Limits,
) -> Result<GuestCommand, PlatformError> {
    let mut command = GuestCommand::new(job.argv.clone(), Duration::from_secs(24 * 3600));
    let network = ["--network".to_owned(), "host".to_owned()];
    command.inner = Some(match engine {
        GuestEngine::Isolab(runtime) => {
            let mut flags = runtime_limit_flags(limits);
            flags.extend(["--id".into(), format!("stack-{name}")]);
            flags.extend(network);
            InnerEngine::Isolab(InnerContainer {
                runtime: runtime.program.clone(),
                flags,
                image: None,
            })
        }
        GuestEngine::Docker => {
            let mut flags = isolab_engines::run_flags::docker_limit_flags(
                limits,
                isolab_cgroups::Version::V2,
                std::path::Path::new("/sys"),
            )?;
            flags.extend(["--name".into(), format!("stack-{name}")]);
            flags.extend(network);
            InnerEngine::Docker(InnerDocker {
                flags,
                report: job.workdir.join(format!("{DOCKER_REPORT}-{name}")),
            })
        }
    });
    Ok(command)
}

/// Starts component `place.component` of a stack in its run's shared guest (booting it
/// first when it is the first component), ready when a socket of the guest listens on
/// `spec.port` ([`ContainerHost::listening`]: a probe's connection would be a client to a
/// server that takes each as one, as `iperf3 -s` does, which then stops listening a
/// moment and refuses the run's own client).
pub(super) fn start_component<'p>(
    sup: &Supervisor,
    vm: &VmPlatform,
    engine: &GuestEngine,
    host_cpus: usize,
    job: &Job,
    place: &StackPlace,
    spec: ServiceSpec,
) -> Started<'p> {
    let guest = guest_of(&Site {
        sup,
        vm,
        engine,
        host_cpus,
        job,
        place,
    })?;
    let name = component_name(&place.component);
    let limits = inner_cpuset(
        &job.limits,
        guest.pin.as_deref(),
        guest.vcpus,
        &place.component,
    )?;
    let command = component_command(engine, job, &name, &limits)?;
    guest
        .with_host(|h| h.run(&name, &command))
        .ok_or_else(|| vm_error("the shared guest was stopped"))??;
    let component = SharedComponent {
        guest,
        name: name.clone(),
        component: place.component.clone(),
    };
    let address = SocketAddr::from((component.guest.ip, spec.port));
    // Until it is handed over, dropping `component` stops it (and the guest, if last).
    if let Err(waited) = component.wait_listening(spec.port, spec.ready_timeout) {
        let stderr = component.stderr_tail(2000);
        let _ = Box::new(component).stop();
        return Err(PlatformError::ServerNotReady {
            command: job.argv.join(" "),
            port: spec.port,
            waited,
            stderr,
        });
    }
    let cgroup = component.guest.cgroup.clone();
    Ok(Service::in_shared_guest(
        address,
        cgroup,
        limits,
        Box::new(component),
    ))
}

/// A component in a shared guest.
struct SharedComponent {
    guest: Arc<SharedGuest>,
    /// Its name in the guest (files and container `stack-NAME`).
    name: String,
    /// Its name in the stack.
    component: String,
}

impl SharedComponent {
    /// Waits until a socket of the guest listens on `port`; `Err` with the time waited
    /// when the component ended first or `timeout` passed.
    fn wait_listening(&self, port: u16, timeout: Duration) -> Result<(), Duration> {
        let mut listening = |left: Duration| {
            self.guest
                .with_host(|h| h.listening(port, left.min(LIST_TIMEOUT)))
                .is_some_and(|answer| answer.is_ok_and(|yes| yes))
        };
        super::super::service::wait_until(&mut listening, &mut || self.is_running(), timeout)
    }
}

impl Guest for SharedComponent {
    fn is_running(&self) -> bool {
        self.guest
            .with_host(|h| h.is_running(&self.name))
            .unwrap_or(false)
    }

    fn stderr_tail(&self, max: usize) -> String {
        let text = self
            .guest
            .with_host(|h| h.output_tail(&self.name, 40))
            .unwrap_or_default();
        isolab_engines::tool::tail(&text, max).to_owned()
    }

    fn stop(self: Box<Self>) -> Result<(), PlatformError> {
        let SharedComponent { guest, name, .. } = *self;
        let stopped = guest
            .with_host(|h| h.stop(&name, COMPONENT_GRACE))
            .transpose()
            .map_err(PlatformError::from);
        // The last component stops the guest, and says how that went.
        let closed = match Arc::try_unwrap(guest) {
            Ok(last) => last.close(),
            Err(_) => Ok(()),
        };
        stopped.map(drop).and(closed)
    }

    fn stats(&self) -> Option<Stats> {
        if self.component != self.guest.counted_by {
            return None;
        }
        let held = self
            .guest
            .instance
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        held.as_ref()?.stats().ok()
    }

    fn shares_guest(&self) -> bool {
        true
    }

    fn facts(&self) -> serde_json::Value {
        let mut facts = self.guest.facts.clone();
        facts["container"] = format!("stack-{}", self.name).into();
        facts["containers"] = self.guest.containers().into();
        facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_guest_is_sized_by_its_shape_or_by_the_stack() {
        let pinned = Limits {
            cpuset: Some("0-1".parse().unwrap()),
            memory_max: Some(Bytes::gib(2)),
            ..Limits::default()
        };
        // Every host cpu as a vCPU, pinned one to one; the stack's memory plus headroom.
        assert_eq!(
            host_size(&pinned, None, &[0, 1]),
            (
                2,
                Some(vec![0, 1]),
                Bytes(Bytes::gib(2).0 + INNER_HEADROOM.0)
            )
        );
        let shape = crate::platform::GuestShape {
            shape: "xlarge".into(),
            vcpus: 4,
            memory: Some(Bytes::gib(8)),
        };
        // A shape of another size: its vCPUs float.
        assert_eq!(
            host_size(&pinned, Some(&shape), &[0, 1]),
            (4, None, Bytes::gib(8))
        );
        let quota = Limits::default();
        assert_eq!(
            host_size(&quota, None, &[0, 1]),
            (2, None, Bytes(DEFAULT_GUEST_MEMORY.0 + INNER_HEADROOM.0))
        );
    }

    #[test]
    fn a_component_keeps_its_cpus_in_the_guest_or_is_refused() {
        let limits = Limits {
            cpuset: Some("1".parse().unwrap()),
            ..Limits::default()
        };
        assert_eq!(
            inner_cpuset(&limits, None, 2, "db").unwrap().cpuset,
            Some("1".parse().unwrap())
        );
        // Pinned vCPUs: the vCPU on the component's host cpu (here vCPU 0 on cpu 1).
        assert_eq!(
            inner_cpuset(&limits, Some(&[1, 2]), 2, "db")
                .unwrap()
                .cpuset,
            Some("0".parse().unwrap())
        );
        let e = inner_cpuset(&limits, None, 1, "db")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("component db is pinned to host cpus 1") && e.contains("guest_shape"),
            "{e}"
        );
        assert_eq!(component_name("php-fpm"), "php-fpm");
        assert_eq!(component_name("Web.1"), "web-1");
        assert_eq!(component_name("_x"), "c_x");
    }
}
