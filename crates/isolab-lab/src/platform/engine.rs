//! The third-party container engines as platforms: `docker`, `podman`, `runc`,
//! `crun` and `lxc`, each driven through [`isolab_engines::Engine`].
//!
//! A run is an instance of the host platform like every other: an empty, unlimited
//! instance cgroup (`isolab/exp3-pid42/c0-r1`) in which the lab starts the engine's
//! foreground command (`docker run --rm --cgroup-parent …`, `runc run`,
//! `lxc-execute …`). The engine creates the container's cgroup below the instance
//! and applies the shape and placement there, as its own flags or configuration.
//! While the command runs, a watcher finds that cgroup (the deepest one below the
//! instance that holds processes), **reads the limits back from the kernel** and
//! samples the container's counters every [`SAMPLE`], so that every row proves
//! what the engine gave it and its throttling and memory peak describe the
//! container, not the engine's client around it. The engine then removes what it
//! left (container, bundle, overlay) before the instance cgroup goes.
//!
//! Each engine is made ready once per process (Docker's daemon started when none
//! runs, crun's hybrid-cgroup fix), imports the experiment's image once, and is
//! shut down when the platforms are dropped (a daemon isolab started is stopped and
//! the host's iptables and `ip_forward` restored).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use isolab_cgroups::{Cgroup, Controller, Hierarchy, Limits, Stats};
use isolab_engines::{Engine, NetworkMode, PreparedImage, RunRequest, ID_PREFIX};

use super::cgroup_changes::{Changes, Stop};
use super::driver::{Driver, Executed, PlatformInfo, PlatformKind, Unavailable};
use super::instance::{container_below, container_mount, Supervisor};
use super::service::{self, LimitsAt, Remove, ServiceSpec, Started};
use super::{container_id, Execution, Interrupt, Job, Network, PlatformDef, PlatformError};

/// How often the container's counters are sampled while it runs (the last sample
/// before the engine removes its cgroup is what the run stores).
pub const SAMPLE: Duration = Duration::from_millis(50);

/// The controllers whose limits a run reads back: the watcher wakes on a write in
/// any of their hierarchies.
const LIMITED: [Controller; 6] = [
    Controller::Cpu,
    Controller::Cpuset,
    Controller::Memory,
    Controller::Pids,
    Controller::Blkio,
    Controller::Io,
];

/// How long an engine's client has, after SIGTERM, to stop its container.
const GRACE: Duration = Duration::from_secs(10);

/// One engine as a platform: the driver, whether it is ready, and the images it
/// has imported.
pub(crate) struct EngineDriver {
    engine: Box<dyn Engine>,
    ready: Mutex<Option<Result<String, Arc<isolab_engines::EngineError>>>>,
    /// When the engine was first asked to do anything (a daemon may have been
    /// started for it, even by `gc`), so that shutdown must run: 0 = never, else its
    /// place in the order of first use among all engines sharing `clock`.
    touched: AtomicU64,
    /// The order of first use, shared by the engines of one [`super::Drivers`].
    clock: Arc<AtomicU64>,
    images: Mutex<HashMap<PathBuf, PreparedImage>>,
}

impl std::fmt::Debug for EngineDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EngineDriver")
            .field("engine", &self.engine.name())
            .finish_non_exhaustive()
    }
}

fn engine_error(engine: &str, e: impl std::fmt::Display) -> PlatformError {
    PlatformError::Engine {
        engine: engine.to_owned(),
        message: e.to_string(),
    }
}

impl EngineDriver {
    /// The engine `engine`; engines that share `clock` record the order of their
    /// first use, so that they can be shut down in the reverse order.
    pub(crate) fn new(engine: Box<dyn Engine>, clock: Arc<AtomicU64>) -> EngineDriver {
        EngineDriver {
            engine,
            ready: Mutex::new(None),
            touched: AtomicU64::new(0),
            clock,
            images: Mutex::new(HashMap::new()),
        }
    }

    /// The engine's name.
    pub(crate) fn name(&self) -> &'static str {
        self.engine.name()
    }

    /// Makes the engine ready once and returns its version (the same error on every
    /// call when it cannot be).
    pub(crate) fn ready(&self) -> Result<String, PlatformError> {
        self.touch();
        let mut ready = self.ready.lock().unwrap_or_else(|e| e.into_inner());
        let state = ready.get_or_insert_with(|| {
            self.engine
                .ensure_ready()
                .and_then(|()| self.engine.version())
                .map_err(Arc::new)
        });
        state.clone().map_err(PlatformError::Driver)
    }

    /// The image `image` as this engine runs it, imported on first use.
    pub(crate) fn image(&self, image: &Path) -> Result<PreparedImage, PlatformError> {
        self.ready()?;
        let mut images = self.images.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = images.get(image) {
            return Ok(p.clone());
        }
        let prepared = self
            .engine
            .prepare_image(image)
            .map_err(PlatformError::from)?;
        images.insert(image.to_path_buf(), prepared.clone());
        Ok(prepared)
    }

    /// Where a container on `network` reaches a server on the host.
    pub(crate) fn host_address(&self, network: Network) -> Option<String> {
        self.ready().ok()?;
        self.engine.host_address(network)
    }

    /// Removes containers of dead experiments.
    pub(crate) fn gc(&self, prefix: &str) -> Result<Vec<String>, PlatformError> {
        // Listing may connect to a daemon isolab started earlier: shutdown stops it.
        self.touch();
        match self.engine.gc(prefix) {
            // An engine that is not installed ran no container.
            Err(isolab_engines::EngineError::Missing { .. }) => Ok(Vec::new()),
            other => other.map_err(PlatformError::from),
        }
    }

    fn touch(&self) {
        if self.touched.load(Ordering::Acquire) == 0 {
            let order = self.clock.fetch_add(1, Ordering::AcqRel) + 1;
            // Only the first use counts; a concurrent first use keeps the earlier one.
            let _ = self
                .touched
                .compare_exchange(0, order, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// When this engine was first used (0: never), in the order shared by its
    /// [`super::Drivers`]. Engines change the host on first use (dockerd's
    /// iptables rules and `ip_forward`, Podman's snapshot of them, crun's hugetlb
    /// hierarchy), each recording what it found, which may be another engine's
    /// change: they must be shut down last-used-first.
    pub(crate) fn first_used(&self) -> u64 {
        self.touched.load(Ordering::Acquire)
    }

    /// Undoes what [`Self::ready`] or [`Self::gc`] started (a daemon, a host fix).
    pub(crate) fn shutdown(&self) -> Result<(), PlatformError> {
        if self.first_used() == 0 {
            return Ok(());
        }
        self.engine.shutdown().map_err(PlatformError::from)
    }
}

impl Driver for EngineDriver {
    fn info(&self) -> PlatformInfo {
        PlatformInfo {
            kind: PlatformKind::from_engine(self.engine.name()),
            summary: self.engine.summary(),
            capabilities: self.engine.capabilities(),
        }
    }

    fn available(&self) -> Result<String, Unavailable> {
        self.engine.available()?;
        Ok("installed".to_owned())
    }

    fn prepare(
        &self,
        _levels: &[&PlatformDef],
        image: Option<&Path>,
    ) -> Result<Vec<(String, String)>, PlatformError> {
        let kind = self.name();
        let mut env = vec![(format!("engine.{kind}"), self.ready()?)];
        if let Some(image) = image {
            let prepared = self.image(image)?;
            env.push((format!("engine.{kind}.image"), prepared.reference));
            env.push((format!("engine.{kind}.image_digest"), prepared.digest));
        }
        Ok(env)
    }

    fn execute(&self, supervisor: &Supervisor, job: &Job, interrupt: &Interrupt) -> Executed {
        execute(supervisor, self, job, interrupt)
    }

    fn beside_neighbours(
        &self,
        supervisor: &Supervisor,
        job: &Job,
        interrupt: &Interrupt,
        body: &mut dyn FnMut() -> Executed,
    ) -> Executed {
        let prepared = self.image(job.container_image(self.name())?)?;
        let neighbours = EngineNeighbours {
            engine: self,
            image: &prepared,
            workdir: job.workdir.clone(),
        };
        supervisor.beside_neighbours(
            job,
            interrupt,
            super::NeighbourHost::Containers(&neighbours),
            body,
        )
    }

    fn start_service(&self, sup: &Supervisor, job: &Job, spec: ServiceSpec) -> Started<'_> {
        let prepared = self.image(job.container_image(self.name())?)?;
        let request = run_request(job, &sup.instance_path(&job.name))?;
        service::start(sup, job, spec, LimitsAt::Container, move || {
            let argv = self.engine.run_command(&request, &prepared);
            let remove: Remove<'_> = Box::new(move || Ok(self.engine.remove(&request)?));
            match argv {
                Ok(argv) => Ok((argv, Some(remove))),
                Err(e) => {
                    let _ = remove();
                    Err(e.into())
                }
            }
        })
    }

    fn server_address(&self, level: &PlatformDef) -> Option<std::net::Ipv4Addr> {
        self.host_address(level.network)
            .and_then(|a| a.parse().ok())
    }

    fn create_volume(&self, name: &str) -> Result<std::path::PathBuf, PlatformError> {
        self.touch();
        self.engine.create_volume(name).map_err(PlatformError::from)
    }

    fn remove_volume(&self, name: &str) -> Result<(), PlatformError> {
        self.engine.remove_volume(name).map_err(PlatformError::from)
    }

    fn gc(&self, prefixes: &[String]) -> Result<Vec<String>, PlatformError> {
        let mut removed = Vec::new();
        for prefix in prefixes {
            removed.extend(EngineDriver::gc(self, prefix)?);
        }
        // Host fixes outlive experiments: collected whether or not one died.
        match self.engine.gc_host_fixes() {
            Ok(lines) => removed.extend(lines),
            // An engine that is not installed changed nothing.
            Err(isolab_engines::EngineError::Missing { .. }) => {}
            Err(e) => return Err(PlatformError::from(e)),
        }
        Ok(removed)
    }

    fn first_used(&self) -> u64 {
        EngineDriver::first_used(self)
    }

    fn shutdown(&self) -> Result<(), PlatformError> {
        EngineDriver::shutdown(self)
    }
}

/// What the watcher saw of the container's cgroup.
#[derive(Debug, Default)]
struct Watched {
    /// The container's cgroup, relative to the hierarchy roots.
    cgroup: Option<PathBuf>,
    /// Its limits, as last read while it held processes.
    limits: Option<Result<Limits, String>>,
    /// Whether `limits` was read while the cgroup held processes (a reading during
    /// the engine's teardown may find some controllers' directories gone already,
    /// which reads as "unlimited").
    limits_live: bool,
    /// Its last counters.
    stats: Option<Stats>,
}

/// Watches the instance cgroup `instance` for the container's cgroup until
/// `stop` is set, then samples its limits and counters, keeping the last readings.
/// It samples at once whenever the engine makes a cgroup or writes a cgroup file
/// below the instance ([`Changes`]), so that a container of a few milliseconds is
/// read while it holds its process, and otherwise every [`SAMPLE`] once the
/// container's cgroup is found (5 ms before).
fn watch(hierarchy: Hierarchy, instance: PathBuf, stop: Arc<Stop>) -> Watched {
    let mut seen = Watched::default();
    let Some(mount) = container_mount(&hierarchy).map(Path::to_path_buf) else {
        return seen;
    };
    let mut roots: Vec<PathBuf> = Vec::new();
    for controller in LIMITED {
        if let Some(m) = hierarchy.mount(controller) {
            let root = m.join(&instance);
            if !roots.contains(&root) {
                roots.push(root);
            }
        }
    }
    let mut changes = Changes::below(&roots);
    loop {
        let stopping = stop.stopped();
        // Found again at every sample: an engine may hold its process in a cgroup of
        // its own setup below the instance for a moment (LXC's monitor, runc's init)
        // before the container's, deeper, cgroup exists. Once the container is gone
        // nothing is found and the last one stands.
        if let Some(rel) = container_below(&mount, &instance) {
            let deeper = seen
                .cgroup
                .as_ref()
                .is_none_or(|c| rel.components().count() > c.components().count());
            let emptied = seen
                .cgroup
                .as_ref()
                .is_some_and(|c| !isolab_cgroups::has_processes(&mount.join(c)));
            if seen.cgroup.as_ref() != Some(&rel) && (deeper || emptied) {
                // Readings of another cgroup are not this one's.
                seen.limits = None;
                seen.limits_live = false;
                seen.stats = None;
                seen.cgroup = Some(rel);
            }
        }
        if let Some(rel) = &seen.cgroup {
            // Limits are read at every sample and the last reading kept: runc moves
            // its init into the cgroup before it writes the limits there. A reading
            // counts only if the cgroup still held processes after it: LXC removes
            // the payload one hierarchy after the other once the container exited,
            // and a controller's missing files read as no limit.
            match Cgroup::open(&hierarchy, rel) {
                Ok(c) => {
                    match c.read_limits() {
                        Ok(l) => {
                            let live = isolab_cgroups::has_processes(&mount.join(rel));
                            if live || !seen.limits_live {
                                seen.limits = Some(Ok(l));
                                seen.limits_live = live;
                            }
                        }
                        Err(e) if seen.limits.is_none() => seen.limits = Some(Err(e.to_string())),
                        Err(_) => {} // gone at the end: the last reading stands
                    }
                    if let Ok(stats) = c.stats() {
                        seen.stats = Some(stats);
                    }
                }
                Err(e) if seen.limits.is_none() => seen.limits = Some(Err(e.to_string())),
                Err(_) => {}
            }
        }
        if stopping {
            return seen;
        }
        changes.wait(
            &stop,
            if seen.cgroup.is_some() {
                SAMPLE
            } else {
                Duration::from_millis(5)
            },
        );
    }
}

/// Neighbours in containers of the same engine (seed 001's stress containers),
/// network none, on the experiment's image.
struct EngineNeighbours<'a> {
    engine: &'a EngineDriver,
    image: &'a PreparedImage,
    workdir: PathBuf,
}

impl EngineNeighbours<'_> {
    fn request(
        &self,
        id: &str,
        argv: &[String],
        cgroup_parent: &Path,
    ) -> Result<RunRequest, PlatformError> {
        Ok(RunRequest {
            id: container_id(ID_PREFIX, id)?,
            argv: argv.to_vec(),
            workdir: self.workdir.clone(),
            network: NetworkMode::None,
            limits: Limits::default(),
            cgroup_parent: cgroup_parent.to_path_buf(),
            env: Vec::new(),
        })
    }
}

impl super::NeighbourContainers for EngineNeighbours<'_> {
    fn wrap(
        &self,
        id: &str,
        argv: &[String],
        cgroup_parent: &Path,
        _workdir: &Path,
    ) -> Result<Vec<String>, PlatformError> {
        self.engine
            .engine
            .run_command(&self.request(id, argv, cgroup_parent)?, self.image)
            .map_err(PlatformError::from)
    }

    fn collect(&self, id: &str) -> Result<(), PlatformError> {
        self.engine
            .engine
            .remove(&self.request(id, &[], Path::new(""))?)
            .map_err(PlatformError::from)
    }
}

/// The container of `job`, its cgroup below the instance cgroup `instance`.
fn run_request(job: &Job, instance: &Path) -> Result<RunRequest, PlatformError> {
    Ok(RunRequest {
        id: container_id(ID_PREFIX, &job.name)?,
        argv: job.argv.clone(),
        workdir: job.workdir.clone(),
        network: job.platform.network,
        limits: job.limits.clone(),
        cgroup_parent: instance.to_path_buf(),
        env: Vec::new(),
    })
}

/// Runs `job` in a container of `engine` inside an instance of `host`.
pub(crate) fn execute(
    host: &Supervisor,
    engine: &EngineDriver,
    job: &Job,
    interrupt: &Interrupt,
) -> Result<Execution, PlatformError> {
    let name = engine.name();
    let perf_follows = engine.engine.capabilities().perf_follows_workload;
    let image = job.container_image(name)?;
    if job.server.is_some() && job.platform.network == Network::None {
        return Err(engine_error(
            name,
            format!(
                "platform `{}` has network `none`, so the command cannot reach its server",
                job.platform.name
            ),
        ));
    }
    let prepared = engine.image(image)?;
    let instance = host.instance_path(&job.name);
    let request = run_request(job, &instance)?;
    let neighbours = EngineNeighbours {
        engine,
        image: &prepared,
        workdir: job.workdir.clone(),
    };
    host.instance_with(job, interrupt, super::NeighbourHost::Containers(&neighbours), |cgroup| {
        let argv = engine
            .engine
            .run_command(&request, &prepared)
            .map_err(PlatformError::from);
        let argv = match argv {
            Ok(a) => a,
            Err(e) => {
                let _ = engine.engine.remove(&request);
                return Err(e);
            }
        };
        let stop = Arc::new(Stop::new());
        let watcher = {
            let (h, stop) = (host.hierarchy().clone(), Arc::clone(&stop));
            let instance = instance.clone();
            std::thread::spawn(move || watch(h, instance, stop))
        };
        let measured = host.measured(job, &argv, cgroup, interrupt, GRACE);
        stop.stop();
        let watched = watcher.join().unwrap_or_default();
        let removed = engine.engine.remove(&request);
        let mut measured = measured?;
        if let Err(e) = removed {
            measured
                .notes
                .push(format!("removing the container failed: {e}"));
        }
        let seen = watched.limits.is_some();
        let limits = match watched.limits {
            Some(Ok(l)) => l,
            Some(Err(e)) => {
                return Err(engine_error(
                    name,
                    format!("cannot read the limits of the container's cgroup: {e}"),
                ))
            }
            None if measured.exit.success() => {
                return Err(engine_error(
                    name,
                    format!(
                        "the container's cgroup never appeared below {}: the engine did not nest it there, so its limits cannot be verified; stderr: {}",
                        instance.display(),
                        super::process::read_tail(&super::launch::log_path(&job.workdir, "command", "stderr"), 2000)
                    ),
                ))
            }
            // The engine failed before the container ran: the run fails on its exit.
            None => Limits::default(),
        };
        if seen || measured.exit.success() {
            let differences = job.limits.differences(&limits);
            if !differences.is_empty() {
                return Err(PlatformError::LimitMismatch {
                    cgroup: watched
                        .cgroup
                        .as_deref()
                        .unwrap_or(&instance)
                        .display()
                        .to_string(),
                    detail: differences.join("; "),
                });
            }
        }
        // The container's counters, not those of the engine's client around it.
        if let Some(stats) = watched.stats {
            measured.stats = Ok(stats);
        }
        if !perf_follows {
            // e.g. Docker's container is a child of containerd, not of the client
            // isolab starts, so the client's perf counters would not describe it.
            measured.perf = Err(format!(
                "perf counters unavailable on {name}: the container is not a descendant of the {name} client"
            ));
        }
        Ok(measured.into_execution(&job.workdir, limits))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An engine that only logs what is asked of it; the one named `missing` is
    /// not installed.
    struct Logged(&'static str, Arc<Mutex<Vec<String>>>);

    impl Engine for Logged {
        fn name(&self) -> &'static str {
            self.0
        }
        fn summary(&self) -> &'static str {
            "logged"
        }
        fn capabilities(&self) -> isolab_engines::Capabilities {
            isolab_engines::Capabilities::container(&[NetworkMode::None])
        }
        fn available(&self) -> Result<(), isolab_engines::EngineError> {
            Ok(())
        }
        fn version(&self) -> Result<String, isolab_engines::EngineError> {
            Ok("1".into())
        }
        fn ensure_ready(&self) -> Result<(), isolab_engines::EngineError> {
            self.1.lock().unwrap().push(format!("ready {}", self.0));
            if self.0 == "missing" {
                return Err(isolab_engines::EngineError::Missing {
                    engine: "missing",
                    missing: isolab_tools::NotInstalled {
                        program: "missingd".into(),
                        package: "missing-engine".into(),
                    },
                });
            }
            Ok(())
        }
        fn prepare_image(&self, _: &Path) -> Result<PreparedImage, isolab_engines::EngineError> {
            unreachable!("not used")
        }
        fn command(
            &self,
            _: &isolab_engines::RunRequest,
            _: &PreparedImage,
        ) -> Result<Vec<String>, isolab_engines::EngineError> {
            unreachable!("not used")
        }
        fn remove_container(
            &self,
            _: &isolab_engines::RunRequest,
        ) -> Result<(), isolab_engines::EngineError> {
            Ok(())
        }
        fn host_address(&self, _: NetworkMode) -> Option<String> {
            None
        }
        fn gc(&self, _: &str) -> Result<Vec<String>, isolab_engines::EngineError> {
            Ok(Vec::new())
        }
        fn shutdown(&self) -> Result<(), isolab_engines::EngineError> {
            self.1.lock().unwrap().push(format!("shutdown {}", self.0));
            Ok(())
        }
    }

    #[test]
    fn an_engine_that_cannot_be_made_ready_keeps_its_error_and_cause() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let e = EngineDriver::new(
            Box::new(Logged("missing", log.clone())),
            Arc::new(AtomicU64::new(0)),
        );
        let first = e.ready().unwrap_err();
        let second = e.ready().unwrap_err();
        match (&first, &second) {
            (PlatformError::Driver(a), PlatformError::Driver(b)) => {
                assert!(Arc::ptr_eq(a, b), "made ready once, the same error after");
                assert_eq!(*log.lock().unwrap(), ["ready missing"]);
                assert!(matches!(**a, isolab_engines::EngineError::Missing { .. }));
            }
            other => panic!("expected the driver's own error, got {other:?}"),
        }
        // The engine's own message, which names what to install, is the run's.
        let message = first.to_string();
        assert!(
            message.starts_with("missing: `missingd` is not installed"),
            "{message}"
        );
        assert!(
            message.contains("apt-get install missing-engine"),
            "{message}"
        );
    }

    #[test]
    fn engines_are_shut_down_last_used_first_and_unused_ones_not_at_all() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let clock = Arc::new(AtomicU64::new(0));
        let engines: Vec<EngineDriver> = ["docker", "podman", "crun", "lxc"]
            .into_iter()
            .map(|n| EngineDriver::new(Box::new(Logged(n, log.clone())), clock.clone()))
            .collect();
        // The spec's order: crun, docker, then podman; lxc is never used.
        engines[2].ready().unwrap();
        engines[0].ready().unwrap();
        engines[1].gc("isolab-exp9-").unwrap();
        engines[1].ready().unwrap();
        engines[0].ready().unwrap();
        assert!(
            super::super::driver::shutdown_all(engines.iter().map(|e| e as &dyn Driver)).is_empty()
        );
        assert_eq!(
            *log.lock().unwrap(),
            [
                "ready crun",
                "ready docker",
                "ready podman",
                "shutdown podman",
                "shutdown docker",
                "shutdown crun"
            ]
        );
    }

    /// Creates the fake cgroup directory `dir` with `files` (name, content) in it.
    fn fake_cgroup(dir: &Path, files: &[(&str, &str)]) {
        std::fs::create_dir_all(dir).unwrap();
        for (name, content) in files {
            std::fs::write(dir.join(name), content).unwrap();
        }
    }

    /// The watcher of the instance `isolab/exp1/c0-r1`, in a thread, and its stop flag.
    fn spawn_watcher(h: Hierarchy) -> (Arc<Stop>, std::thread::JoinHandle<Watched>) {
        let stop = Arc::new(Stop::new());
        let flag = stop.clone();
        let watcher =
            std::thread::spawn(move || watch(h, PathBuf::from("isolab/exp1/c0-r1"), flag));
        (stop, watcher)
    }

    #[test]
    fn the_watcher_moves_from_an_engine_setup_cgroup_to_the_deeper_container() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let h = Hierarchy::v2(&root);
        // First only the engine's own cgroup holds a process, with no limit.
        let setup = root.join("isolab/exp1/c0-r1/lxc-x");
        fake_cgroup(
            &setup,
            &[("cgroup.procs", "7\n"), ("cpu.max", "max 100000\n")],
        );
        let (stop, watcher) = spawn_watcher(h);
        std::thread::sleep(Duration::from_millis(200));
        // Then the container's cgroup, deeper, with its limit.
        let payload = setup.join("payload");
        fake_cgroup(
            &payload,
            &[("cpu.max", "50000 100000\n"), ("cgroup.procs", "42\n")],
        );
        std::thread::sleep(Duration::from_millis(300));
        // The container exits: the last reading stands.
        std::fs::write(payload.join("cgroup.procs"), "").unwrap();
        std::fs::write(setup.join("cgroup.procs"), "").unwrap();
        std::thread::sleep(Duration::from_millis(100));
        stop.stop();
        let seen = watcher.join().unwrap();
        assert_eq!(
            seen.cgroup,
            Some(PathBuf::from("isolab/exp1/c0-r1/lxc-x/payload"))
        );
        let limits = seen.limits.unwrap().unwrap();
        assert_eq!(limits.cpu.map(|c| c.quota), Some(Duration::from_millis(50)));
    }

    #[test]
    fn a_reading_during_the_engines_teardown_does_not_replace_a_live_one() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let h = Hierarchy::v2(&root);
        let payload = root.join("isolab/exp1/c0-r1/lxc-x/payload");
        fake_cgroup(
            &payload,
            &[
                ("cgroup.procs", "42\n"),
                ("memory.max", "4294967296\n"),
                ("cpuset.cpus", "1\n"),
            ],
        );
        let (stop, watcher) = spawn_watcher(h);
        std::thread::sleep(Duration::from_millis(200));
        // The container exited and the engine removed some controllers' files.
        std::fs::write(payload.join("cgroup.procs"), "").unwrap();
        std::fs::remove_file(payload.join("memory.max")).unwrap();
        std::fs::remove_file(payload.join("cpuset.cpus")).unwrap();
        std::thread::sleep(Duration::from_millis(150));
        stop.stop();
        let limits = watcher.join().unwrap().limits.unwrap().unwrap();
        assert_eq!(limits.memory_max.map(|b| b.0), Some(4294967296));
        assert_eq!(limits.cpuset.map(|c| c.to_string()), Some("1".to_owned()));
    }

    #[test]
    fn the_watcher_reads_limits_and_keeps_the_last_counters() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let h = Hierarchy::v2(root);
        let c = root.join("isolab/exp1/c0-r1/ctr");
        fake_cgroup(
            &c,
            &[
                ("cgroup.procs", "42\n"),
                ("cpu.max", "50000 100000\n"),
                ("pids.max", "128\n"),
                (
                    "cpu.stat",
                    "usage_usec 2000000\nuser_usec 1500000\nsystem_usec 500000\nnr_periods 10\nnr_throttled 3\nthrottled_usec 40000\n",
                ),
            ],
        );
        let stop = Arc::new(Stop::new());
        stop.stop();
        let seen = watch(h, PathBuf::from("isolab/exp1/c0-r1"), stop);
        assert_eq!(seen.cgroup, Some(PathBuf::from("isolab/exp1/c0-r1/ctr")));
        let limits = seen.limits.unwrap().unwrap();
        assert_eq!(limits.pids_max, Some(128));
        assert_eq!(limits.cpu.map(|q| q.cpus()), Some(0.5));
        assert_eq!(seen.stats.unwrap().nr_throttled, Some(3));
    }
}
