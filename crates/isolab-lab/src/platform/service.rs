//! Long-running services: a process started inside a platform's instance, with
//! the cell's limits applied and read back, reachable at an address, that lives
//! until it is stopped (a database or web server a load generator outside drives).
//!
//! Every platform whose run is one foreground command (the host's own command,
//! `isolab-runtime run`, an engine's `docker run` / `runc run` / …) starts a
//! service the same way, here: the experiment's scope cgroup, an instance cgroup
//! of the job's name, the command started in it through the supervisor's
//! launcher, readiness when a TCP socket listens on its port in the network
//! namespace it serves from (failing at once when the command exits first), then
//! the service's own cgroup — the instance on the host, the deepest populated cgroup
//! below it in a container — whose limits are read back from the kernel and compared
//! with the job's. Reading the namespace's `/proc/…/net/tcp{,6}` costs about 3.5 ms of
//! kernel time a look on this project's machines (the kernel walks its whole TCP hash
//! table), one look every 50 ms until the service listens.
//! [`Service::stop`] (or dropping it) sends SIGTERM, kills what is left after a
//! grace period, removes the engine's container and the instance cgroup.
//!
//! Services reach the host over the host network, or on a bridge at the
//! container's own address, read from the network namespace of a process of the
//! container's cgroup (`/proc/PID/net/fib_trie`: the engine's bridge, whichever it
//! is, needs no engine-specific lookup); a level with network `none` cannot serve
//! anyone. The VM platforms start
//! their services themselves (`vm.rs`: the guest's address on isolab's bridge)
//! and hand them over with [`Service::in_instance`] and [`wait_ready`].

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use isolab_cgroups::{Cgroup, Limits, Stats};

use super::instance::{container_below, container_mount, Supervisor};
use super::launch::{ended_within, log_path, Launch, Process};
use super::limit::limit;
use super::process::{
    in_other_network_namespace, listens_in_other_namespace, read_tail, tcp_listening,
};
use super::{Job, Network, PlatformError};

/// How long a stopped service has after SIGTERM before its cgroup is killed.
const GRACE: Duration = Duration::from_secs(10);

/// Where a service listens and how long it may take to be ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServiceSpec {
    /// The TCP port it listens on.
    pub port: u16,
    /// How long it may take to accept a connection.
    pub ready_timeout: Duration,
}

/// Where a platform applies the job's limits.
pub(crate) enum LimitsAt {
    /// On the instance cgroup itself (the host platform).
    Instance,
    /// On a container cgroup the engine creates below the instance.
    Container,
}

/// Removes what an engine left for a service (its container).
pub(crate) type Remove<'p> = Box<dyn FnOnce() -> Result<(), PlatformError> + Send + 'p>;

/// A running service, on the platforms it was started from.
pub struct Service<'p> {
    /// Where clients reach it.
    pub address: SocketAddr,
    /// The cgroup that holds its processes, relative to the hierarchy roots.
    pub cgroup: PathBuf,
    /// Its limits as read back from that cgroup.
    pub limits_applied: Limits,
    process: Option<Box<dyn Process>>,
    instance: Option<Cgroup>,
    remove: Option<Remove<'p>>,
    /// Its standard error's log file.
    log: Option<PathBuf>,
    /// What the platform runs itself instead of a process here (a VM's guest).
    guest: Option<Box<dyn Guest + 'p>>,
}

/// A service a platform runs itself, not as a process of this host's launcher (a
/// VM's guest): whether it runs, what it said, and its stop.
pub(crate) trait Guest: Send + Sync {
    /// Whether it still runs.
    fn is_running(&self) -> bool;
    /// The end of its standard error (or what the platform has instead), at most
    /// `max` bytes.
    fn stderr_tail(&self, max: usize) -> String;
    /// Stops it and releases what it holds outside its instance cgroup.
    fn stop(self: Box<Self>) -> Result<(), PlatformError>;
    /// The counters of what it runs in, when the service has no instance of its own
    /// (a component in a shared guest: QEMU's, for the one component that counts them).
    fn stats(&self) -> Option<Stats> {
        None
    }
    /// Whether it shares its guest with other services (their counters are the
    /// guest's, counted once).
    fn shares_guest(&self) -> bool {
        false
    }
    /// What the run should record about its guest (the arrangement, the guest's
    /// address, the containers in it), or `Null`.
    fn facts(&self) -> serde_json::Value {
        serde_json::Value::Null
    }
}

impl std::fmt::Debug for Service<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("address", &self.address)
            .field("cgroup", &self.cgroup)
            .field("limits_applied", &self.limits_applied)
            .finish_non_exhaustive()
    }
}

impl Service<'_> {
    /// Whether its foreground process still runs.
    pub fn is_running(&self) -> bool {
        match (&self.process, &self.guest) {
            (Some(p), _) => p.is_running(),
            (None, Some(g)) => g.is_running(),
            (None, None) => false,
        }
    }

    /// The end of its standard error (its log in the job's working directory).
    pub fn stderr_tail(&self, max: usize) -> String {
        match (&self.log, &self.guest) {
            (Some(path), _) => read_tail(path, max),
            (None, Some(g)) => g.stderr_tail(max),
            (None, None) => String::new(),
        }
    }

    /// Cpu time its instance cgroup has used so far (its processes, with a
    /// container's below it), when the cgroup can be read.
    pub fn cpu_usage(&self) -> Option<Duration> {
        self.instance.as_ref()?.stats().ok()?.cpu_usage
    }

    /// The counters of the cgroup its limits apply to ([`Service::cgroup`]: a
    /// container's own cgroup, else its instance), when that cgroup can be read. For a
    /// VM's guest, its instance: QEMU's process.
    pub fn stats(&self) -> Option<Stats> {
        let Some(instance) = self.instance.as_ref() else {
            return self.guest.as_ref()?.stats();
        };
        if self.cgroup == instance.rel() {
            return instance.stats().ok();
        }
        Cgroup::open(instance.hierarchy(), &self.cgroup)
            .ok()?
            .stats()
            .ok()
    }

    /// Whether the platform runs it in a guest (a VM): its [`Service::stats`] are then
    /// QEMU's, the host's cost of the guest, not the service's own.
    pub fn in_guest(&self) -> bool {
        self.guest.is_some()
    }

    /// Whether it shares its guest with other services ([`Guest::shares_guest`]).
    pub fn shares_guest(&self) -> bool {
        self.guest.as_ref().is_some_and(|g| g.shares_guest())
    }

    /// What the platform records about its guest ([`Guest::facts`]), or `Null`.
    pub fn guest_facts(&self) -> serde_json::Value {
        self.guest
            .as_ref()
            .map_or(serde_json::Value::Null, |g| g.facts())
    }

    /// The file holding its instance cgroup's cpu time
    /// ([`isolab_cgroups::Cgroup::cpu_usage_file`]).
    pub fn cpu_usage_file(&self) -> Option<std::path::PathBuf> {
        self.instance.as_ref()?.cpu_usage_file()
    }

    /// Stops it: SIGTERM, then everything in its instance killed after a grace
    /// period; its container and instance cgroup removed.
    pub fn stop(mut self) -> Result<(), PlatformError> {
        self.teardown()
    }

    fn teardown(&mut self) -> Result<(), PlatformError> {
        if let Some(process) = self.process.take() {
            if !ended_within(&*process, libc::SIGTERM, GRACE) {
                if let Some(instance) = &self.instance {
                    let _ = instance.kill_all();
                }
            }
            let _ = process.reap();
        }
        let stopped = self.guest.take().map_or(Ok(()), |guest| guest.stop());
        let removed = self.remove.take().map_or(Ok(()), |remove| remove());
        let removed = stopped.and(removed);
        if let Some(instance) = self.instance.take() {
            let _ = instance.kill_all();
            match instance.remove() {
                // An OCI runtime's delete may take the empty parent with it.
                Ok(()) | Err(isolab_cgroups::Error::NotFound { .. }) => {}
                Err(e) => return Err(e.into()),
            }
        }
        removed
    }
}

impl Drop for Service<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.teardown() {
            eprintln!("warning: stopping service at {}: {e}", self.address);
        }
    }
}

impl<'p> Service<'p> {
    /// A service the platform runs itself (a VM's guest) in `instance`: until
    /// [`Service::set_guest`], dropping it removes the instance only; after, it
    /// stops the guest first.
    pub(crate) fn in_instance(instance: Cgroup, address: SocketAddr) -> Service<'p> {
        Service {
            address,
            cgroup: instance.rel().to_path_buf(),
            limits_applied: Limits::default(),
            process: None,
            instance: Some(instance),
            remove: None,
            log: None,
            guest: None,
        }
    }

    /// A service the platform runs in a guest it shares with other services (a
    /// stack's component in a container host): no instance of its own; `cgroup` is
    /// the guest's (QEMU's), `limits_applied` what its container in the guest was given.
    pub(crate) fn in_shared_guest(
        address: SocketAddr,
        cgroup: PathBuf,
        limits_applied: Limits,
        guest: Box<dyn Guest + 'p>,
    ) -> Service<'p> {
        Service {
            address,
            cgroup,
            limits_applied,
            process: None,
            instance: None,
            remove: None,
            log: None,
            guest: Some(guest),
        }
    }

    /// The instance cgroup of [`Service::in_instance`].
    pub(crate) fn instance(&self) -> Option<&Cgroup> {
        self.instance.as_ref()
    }

    /// Hands over the running guest, with its limits as read back.
    pub(crate) fn set_guest(&mut self, limits_applied: Limits, guest: Box<dyn Guest + 'p>) {
        self.limits_applied = limits_applied;
        self.guest = Some(guest);
    }
}

/// Why `job`'s level cannot serve clients on the host, if it cannot.
fn unreachable(job: &Job) -> Option<PlatformError> {
    let why = match job.platform.network {
        Network::Host | Network::Bridge => return None,
        Network::None => "its network is `none`, so no client outside can reach it",
    };
    Some(PlatformError::NoServices {
        platform: job.platform.name.clone(),
        why: why.into(),
    })
}

/// What a driver's start of a service gives.
pub(crate) type Started<'p> = Result<Service<'p>, PlatformError>;

/// What a platform runs for a service: the foreground command (the job's own, or
/// the engine's around it) and what removes the engine's container after it.
pub(crate) type Command<'p> = (Vec<String>, Option<Remove<'p>>);

/// Starts the service of `job` in an instance of `sup`: `command` makes the
/// platform's command once the instance cgroup exists (an engine may prepare
/// cgroups below it); its `Remove` runs on every failure after that too.
pub(crate) fn start<'p>(
    sup: &Supervisor,
    job: &Job,
    spec: ServiceSpec,
    limits_at: LimitsAt,
    command: impl FnOnce() -> Result<Command<'p>, PlatformError>,
) -> Started<'p> {
    if let Some(e) = unreachable(job) {
        return Err(e);
    }
    let mut service = Service {
        address: SocketAddr::from((Ipv4Addr::LOCALHOST, spec.port)),
        cgroup: PathBuf::new(),
        limits_applied: Limits::default(),
        process: None,
        instance: None,
        remove: None,
        log: Some(log_path(&job.workdir, &log_name(job), "stderr")),
        guest: None,
    };
    // On any error below, dropping `service` tears down what was made.
    let instance = sup.create_instance(&job.name)?;
    service.cgroup = instance.rel().to_path_buf();
    let instance = service.instance.insert(instance);
    if let LimitsAt::Instance = limits_at {
        service.limits_applied = limit(instance, &job.limits)?;
    }
    let (argv, remove) = command()?;
    service.remove = remove;
    let argv = &argv;
    let log = log_name(job);
    let process = sup.launcher().start(Launch {
        argv,
        workdir: &job.workdir,
        log: &log,
        cgroup: Some(instance),
        count: false,
    })?;
    let process = service.process.insert(process);
    if job.platform.network == Network::Bridge {
        let ip = bridge_address(
            sup,
            &service.cgroup,
            &mut || process.is_running(),
            spec.ready_timeout,
        )
        .map_err(|waited| PlatformError::Engine {
            engine: job.platform.kind.to_string(),
            message: format!(
                "the service's container had no address on the bridge after {waited:.1?} (no process of a cgroup below {} has a network namespace with one); its stderr ends: {}",
                service.cgroup.display(),
                read_tail(&log_path(&job.workdir, &log_name(job), "stderr"), 2000)
            ),
        })?;
        service.address = SocketAddr::from((ip, spec.port));
    }
    let network = job.platform.network;
    let cgroup = service.cgroup.clone();
    wait_until(
        &mut |_| listens(sup, &cgroup, network, spec.port),
        &mut || process.is_running(),
        spec.ready_timeout,
    )
    .map_err(|waited| PlatformError::ServerNotReady {
        command: argv.join(" "),
        port: spec.port,
        waited,
        stderr: read_tail(&log_path(&job.workdir, &log, "stderr"), 2000),
    })?;
    if let LimitsAt::Container = limits_at {
        let rel = container_mount(sup.hierarchy())
            .and_then(|mount| container_below(mount, &service.cgroup))
            .ok_or_else(|| PlatformError::Engine {
                engine: job.platform.kind.to_string(),
                message: format!(
                    "the service listens but no cgroup below {} holds its processes",
                    service.cgroup.display()
                ),
            })?;
        let read = Cgroup::open(sup.hierarchy(), &rel)?.read_limits()?;
        let differences = job.limits.differences(&read);
        if !differences.is_empty() {
            return Err(PlatformError::LimitMismatch {
                cgroup: rel.display().to_string(),
                detail: differences.join("; "),
            });
        }
        service.cgroup = rel;
        service.limits_applied = read;
    }
    Ok(service)
}

/// The name of a service's log files in its working directory,
/// `.isolab-service-<last part of the job's name>.stdout|stderr`, so that the
/// components of one stack can share a directory.
fn log_name(job: &Job) -> String {
    format!(
        "service-{}",
        job.name.rsplit('/').next().unwrap_or_default()
    )
}

/// Whether the service of the instance cgroup `instance` listens on `port`: a TCP
/// socket in LISTEN in the network namespace it serves from, isolab's own on the host
/// network, on a bridge that of a process of the container's cgroup. Read, not
/// probed: a server such as `iperf3 -s` takes a probe's connection as a client, closes
/// its listening socket and opens it again after, and a client connecting in between
/// (the run's, started at once) is refused.
fn listens(sup: &Supervisor, instance: &Path, network: Network, port: u16) -> bool {
    let proc_root = sup.proc_root();
    if network != Network::Bridge {
        return tcp_listening(&proc_root.join("self"), port);
    }
    container_pids(sup, instance)
        .into_iter()
        .any(|pid| listens_in_other_namespace(proc_root, pid, port))
}

/// The processes of the deepest cgroup below `instance` that holds any (an engine's
/// container).
fn container_pids(sup: &Supervisor, instance: &Path) -> Vec<u32> {
    container_mount(sup.hierarchy())
        .and_then(|mount| container_below(mount, instance))
        .and_then(|rel| Cgroup::open(sup.hierarchy(), &rel).ok())
        .and_then(|c| c.pids().ok())
        .unwrap_or_default()
}

/// The address of the container below `instance` on its bridge: the first local
/// IPv4 address other than loopback of the network namespace of a process in the
/// container's cgroup, a namespace other than isolab's own. Polled, as the engine connects the container after its first
/// process starts; `Err` with the time waited when `running` says the service ended
/// or `timeout` passes.
fn bridge_address(
    sup: &Supervisor,
    instance: &Path,
    running: &mut dyn FnMut() -> bool,
    timeout: Duration,
) -> Result<Ipv4Addr, Duration> {
    let started = Instant::now();
    let proc_root = sup.proc_root();
    loop {
        for pid in container_pids(sup, instance) {
            // The engine's first process can be in the container's cgroup before it
            // enters the container's network namespace (runc's init): the host's
            // addresses are not the container's.
            if !in_other_network_namespace(proc_root, pid) {
                continue;
            }
            let trie =
                std::fs::read_to_string(proc_root.join(pid.to_string()).join("net/fib_trie"));
            if let Some(ip) = trie
                .ok()
                .and_then(|t| local_addresses(&t).into_iter().next())
            {
                return Ok(ip);
            }
        }
        if !running() || started.elapsed() >= timeout {
            return Err(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The local IPv4 addresses other than loopback in a `/proc/net/fib_trie`: each
/// `|-- ADDRESS` leaf followed by `/32 host LOCAL`, in order, once each.
pub(crate) fn local_addresses(fib_trie: &str) -> Vec<Ipv4Addr> {
    let mut out = Vec::new();
    let mut leaf: Option<Ipv4Addr> = None;
    for line in fib_trie.lines().map(str::trim) {
        if let Some(a) = line.strip_prefix("|-- ") {
            leaf = a.parse().ok();
        } else if line.starts_with("/32 host LOCAL") {
            if let Some(ip) = leaf.filter(|ip| !ip.is_loopback() && !out.contains(ip)) {
                out.push(ip);
            }
        }
    }
    out
}

/// Waits until `address` accepts a TCP connection; `Err` with the time waited
/// when `running` says the service ended first or `timeout` passes.
pub(crate) fn wait_ready(
    running: &mut dyn FnMut() -> bool,
    address: SocketAddr,
    timeout: Duration,
) -> Result<(), Duration> {
    wait_until(
        &mut |_| TcpStream::connect_timeout(&address, Duration::from_millis(200)).is_ok(),
        running,
        timeout,
    )
}

/// Waits until `ready` (given the time left) says so, 50 ms between looks; `Err` with
/// the time waited when `running` says the service ended first or `timeout` passes.
pub(crate) fn wait_until(
    ready: &mut dyn FnMut(Duration) -> bool,
    running: &mut dyn FnMut() -> bool,
    timeout: Duration,
) -> Result<(), Duration> {
    let started = Instant::now();
    loop {
        if ready(timeout.saturating_sub(started.elapsed())) {
            return Ok(());
        }
        if !running() || started.elapsed() >= timeout {
            return Err(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/proc/PID/net/fib_trie` of a container on isolab's bridge (this kernel's
    /// format: the `Main:` and `Local:` tables list the local address each).
    const CONTAINER_FIB_TRIE: &str = "Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 10.213.0.0/24 2 0 2
        +-- 10.213.0.0/29 2 0 2
           |-- 10.213.0.0
              /24 link UNICAST
           |-- 10.213.0.5
              /32 host LOCAL
        |-- 10.213.0.255
           /32 link BROADCAST
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
        |-- 127.255.255.255
           /32 link BROADCAST
Local:
  +-- 0.0.0.0/0 3 0 5
     +-- 10.213.0.0/24 2 0 2
        +-- 10.213.0.0/29 2 0 2
           |-- 10.213.0.5
              /32 host LOCAL
     +-- 127.0.0.0/8 2 0 2
           |-- 127.0.0.1
              /32 host LOCAL
";

    #[test]
    fn a_container_s_bridge_address_is_its_local_address_other_than_loopback() {
        assert_eq!(
            local_addresses(CONTAINER_FIB_TRIE),
            [Ipv4Addr::new(10, 213, 0, 5)]
        );
        // A namespace with loopback only (network `none`, or not connected yet).
        let lo_only =
            "Main:\n  +-- 127.0.0.0/8 2 0 2\n     |-- 127.0.0.1\n        /32 host LOCAL\n";
        assert!(local_addresses(lo_only).is_empty());
        // This process's own namespace parses too (whatever it holds).
        let own = std::fs::read_to_string("/proc/self/net/fib_trie").unwrap_or_default();
        assert!(local_addresses(&own).iter().all(|ip| !ip.is_loopback()));
    }
}
