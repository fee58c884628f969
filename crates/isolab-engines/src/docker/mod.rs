//! Docker: the `docker` CLI in the foreground, against a running `dockerd` or one
//! isolab starts and stops itself.
//!
//! **Which daemon.** [`Engine::ensure_ready`] uses the host's daemon when
//! `/var/run/docker.sock` answers. Otherwise it starts Debian's `dockerd` (package
//! `docker.io`) itself, with everything of its own under [`DockerConfig::run_dir`]
//! (`/run/isolab/dockerd`: socket `docker.sock`, pidfile `dockerd.pid`, exec-root
//! `exec/`, state `state.json`), its log in [`DockerConfig::log_file`]
//! (`/var/log/isolab/dockerd.log`, kept for post-mortems) and its data-root in
//! [`DockerConfig::data_root`] (`/var/lib/isolab/docker`). The data-root is
//! **not** Docker's default `/var/lib/docker`: a daemon started with isolab's flags
//! (cgroupfs driver, its own socket) on a user's store would restart the user's
//! containers that have a restart policy and mix isolab's images into theirs; a
//! store of our own can be deleted at any time (`rm -rf /var/lib/isolab/docker`).
//! The daemon runs with `--exec-opt native.cgroupdriver=cgroupfs` (PID 1 may not be
//! systemd) in a process group of its own, so that a Ctrl-C of the lab does not kill
//! it before isolab restored the host.
//!
//! **Host state.** Before it starts the daemon, isolab records `iptables-save` and
//! `ip6tables-save`, `/proc/sys/net/ipv4/ip_forward` and whether the `docker0` bridge
//! exists ([`HostNetSnapshot`]) in `state.json` (so that another isolab process can
//! still undo it after a crash). [`Engine::shutdown`] stops that daemon (SIGTERM, up
//! to [`DockerConfig::stop_timeout`], then SIGKILL), unmounts what it left under
//! its data-root and exec-root, deletes exactly the rules and chains that appeared
//! since the snapshot **and** belong to Docker (they name a `DOCKER*` chain, the
//! bridge or the bridge's subnet: rules another program added meanwhile are kept),
//! restores changed chain policies, deletes tables that did not exist before and
//! are empty again (nf_tables backend: `nft delete table`), writes `ip_forward` back
//! and deletes `docker0` when it did not exist. A daemon isolab did not start is
//! never stopped. A stale pidfile or socket (the process is gone or is not
//! `dockerd`) is removed before starting.
//!
//! **Client.** `/usr/bin/docker` (from docker.io, the engine's own version) is
//! preferred over the one on `PATH` (here a newer static client, 28.x, that the
//! 20.10 engine (API 1.41) does not speak by default). Every command runs as
//! `env DOCKER_API_VERSION=<the server's ApiVersion> <client> -H unix://<socket> …`
//! so that any client talks the server's API; everything parsed comes from
//! `--format '{{json .}}'`.
//!
//! **Images.** [`cached_tar`](crate::image_tar::cached_tar) packs an image tree once into a reproducible tar in a
//! cache (`/var/lib/isolab/cache`), keyed on the image's manifest; `docker import`
//! makes it `isolab/<kind>:<first 12 hex of the tar's sha256>` unless that tag
//! exists; the digest recorded is Docker's image ID.
//!
//! **Runs.** `docker run --rm --init --name <id> --cgroup-parent /<parent> …`: the
//! container's cgroup is `<parent>/<container id>` in every hierarchy (runc, with the
//! cgroupfs driver); limits become `--cpu-period`/`--cpu-quota` (exact
//! microseconds, where `--cpus` could round), `--cpuset-cpus`, `--cpuset-mems`,
//! `--memory`, `--memory-swap` (Docker's value is always memory **plus** swap: on
//! cgroup v1 that is isolab's value, on v2 isolab's swap-only value is added to the
//! memory limit; with a memory limit and no swap limit `-1`, unlimited, instead of
//! Docker's default of twice the memory), `--pids-limit` and
//! `--device-{read,write}-{bps,iops} /dev/<name>:<value>` (the device's name from
//! `/sys/dev/block/M:m/uevent`). `--init` (docker-init) is PID 1: without it a
//! workload that installs no SIGTERM handler ignores the SIGTERM that `docker run`
//! forwards (its signal proxy) and the container would not stop; with it a SIGTERM
//! to the CLI stops the container (exit status 143). [`Engine::remove`] runs
//! `docker rm -f` (for a CLI that was SIGKILLed) and removes the copies of the
//! parent cgroup that runc creates in the hierarchies the lab does not manage
//! (`devices`, `name=systemd`, …: `parent_cgroups.rs`); without that every run
//! would leave `isolab/<exp>/<run>` there.
//!
//! Measured here (2 cores, Debian 12, median of 10, `--network none`, through
//! [`Engine::run_command`]): `docker run --rm … true` takes about 340–390 ms.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use isolab_cgroups::Version;

use crate::host_net::{first_host, HostNetSnapshot};
use crate::image_tar::{cached_tar_in, repository, DEFAULT_CACHE_DIR};
use crate::own_image::{entrypoint_flags, own_image, OwnImage};
use crate::parent_cgroups::ForeignParents;
use crate::run_flags::{common_run_flags, limit_flags};
use crate::tool::{argv, require, run_ok, tail, SystemTools, Tools};
use crate::volumes;
use crate::{
    Capabilities, Engine, EngineError, NetworkMode, PreparedImage, RunRequest, StorageLevel,
};

mod daemon;
const ENGINE: &str = "docker";

/// The host daemon's socket, used when it answers.
pub const SYSTEM_SOCKET: &str = "/var/run/docker.sock";

/// Where and how the Docker driver works; [`DockerConfig::default`] is this host's.
#[derive(Debug, Clone)]
pub struct DockerConfig {
    /// The host daemon's socket ([`SYSTEM_SOCKET`]).
    pub system_socket: PathBuf,
    /// isolab's own daemon's runtime directory: socket, pidfile, exec-root, state.
    pub run_dir: PathBuf,
    /// isolab's own daemon's data-root (images, containers).
    pub data_root: PathBuf,
    /// isolab's own daemon's log file (appended to).
    pub log_file: PathBuf,
    /// Where [`cached_tar_in`] keeps packed images.
    pub cache_dir: PathBuf,
    /// The proc file system (`/proc`): `sys/net/ipv4/ip_forward`, process states.
    pub proc: PathBuf,
    /// The sys file system (`/sys`): block device names, network interfaces.
    pub sys: PathBuf,
    /// The host's cgroup version (decides how a swap limit is translated).
    pub cgroup_version: Version,
    /// How long to wait for a started daemon to answer.
    pub ready_timeout: Duration,
    /// How long to wait for the daemon to exit after SIGTERM before SIGKILL.
    pub stop_timeout: Duration,
    /// OCI runtimes isolab's own daemon registers besides runc (`--add-runtime
    /// NAME=PATH`): `isolab` = isolab-runtime, for the `docker+isolab` platform.
    pub runtimes: Vec<(String, PathBuf)>,
}

/// The name isolab-runtime is registered under in dockerd (`docker run --runtime isolab`).
pub const ISOLAB_RUNTIME_NAME: &str = "isolab";

impl Default for DockerConfig {
    fn default() -> Self {
        DockerConfig {
            system_socket: PathBuf::from(SYSTEM_SOCKET),
            run_dir: PathBuf::from("/run/isolab/dockerd"),
            data_root: PathBuf::from("/var/lib/isolab/docker"),
            log_file: PathBuf::from("/var/log/isolab/dockerd.log"),
            cache_dir: PathBuf::from(DEFAULT_CACHE_DIR),
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
            cgroup_version: host_cgroup_version(),
            ready_timeout: Duration::from_secs(60),
            stop_timeout: Duration::from_secs(20),
            // Registered only when it exists (dockerd would keep a runtime it cannot
            // start); without it `docker+isolab` is not usable and says why.
            runtimes: Some(isolab_runtime::config::locate_program())
                .filter(|p| p.is_file())
                .map(|p| (ISOLAB_RUNTIME_NAME.to_string(), p))
                .into_iter()
                .collect(),
        }
    }
}

/// This host's cgroup version (v1 when it cannot be told).
pub(crate) fn host_cgroup_version() -> Version {
    isolab_cgroups::Hierarchy::detect()
        .map(|h| h.version())
        .unwrap_or(Version::V1)
}

impl DockerConfig {
    /// The socket of isolab's own daemon.
    pub fn socket(&self) -> PathBuf {
        self.run_dir.join("docker.sock")
    }

    /// The pidfile of isolab's own daemon.
    pub fn pidfile(&self) -> PathBuf {
        self.run_dir.join("dockerd.pid")
    }

    /// The exec-root of isolab's own daemon (its containerd, netns files, shims).
    pub fn exec_root(&self) -> PathBuf {
        self.run_dir.join("exec")
    }

    /// The state file that records what isolab changed when it started the daemon.
    pub fn state_file(&self) -> PathBuf {
        self.run_dir.join("state.json")
    }

    /// The command line that starts isolab's own daemon.
    pub fn dockerd_argv(&self, dockerd: &Path) -> Vec<String> {
        argv([
            dockerd.display().to_string(),
            "--exec-opt".into(),
            "native.cgroupdriver=cgroupfs".into(),
            "--host".into(),
            format!("unix://{}", self.socket().display()),
            "--pidfile".into(),
            self.pidfile().display().to_string(),
            "--exec-root".into(),
            self.exec_root().display().to_string(),
            "--data-root".into(),
            self.data_root.display().to_string(),
        ])
        .into_iter()
        .chain(self.runtimes.iter().flat_map(|(name, path)| {
            [
                "--add-runtime".to_string(),
                format!("{name}={}", path.display()),
            ]
        }))
        .collect()
    }
}

/// Whether process `pid` is alive (not gone, not a zombie) and named `comm`.
pub(crate) fn process_is(proc: &Path, pid: u32, comm: &str) -> bool {
    let Ok(stat) = std::fs::read_to_string(proc.join(pid.to_string()).join("stat")) else {
        return false;
    };
    // "pid (comm) state …": comm may contain spaces and parentheses.
    let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
        return false;
    };
    let name = &stat[open + 1..close];
    let state = stat[close + 1..].split_whitespace().next().unwrap_or("");
    name == comm && state != "Z" && state != "X"
}

/// A daemon connection: how to call the CLI and what the server said.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Conn {
    /// `env DOCKER_API_VERSION=… <client> -H unix://<socket>`.
    prefix: Vec<String>,
    /// The server's version, e.g. `20.10.24+dfsg1`.
    server_version: String,
    /// Whether isolab started this daemon.
    ours: bool,
}

/// What a started daemon changed, kept in [`DockerConfig::state_file`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct DaemonState {
    pid: Option<u32>,
    net: HostNetSnapshot,
}

/// The Docker engine (see the module documentation).
pub struct Docker {
    config: DockerConfig,
    /// The OCI runtime containers run with: `None` = the daemon's default (runc),
    /// or a name the daemon registers ([`DockerConfig::runtimes`]).
    runtime: Option<&'static str>,
    tools: Arc<dyn Tools>,
    conn: Mutex<Option<Conn>>,
    child: Mutex<Option<Child>>,
    foreign: ForeignParents,
}

impl std::fmt::Debug for Docker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Docker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Default for Docker {
    fn default() -> Self {
        Docker::new()
    }
}

impl Docker {
    /// Docker on this host with the default paths.
    pub fn new() -> Docker {
        Docker::with(DockerConfig::default(), Arc::new(SystemTools))
    }

    /// Docker with explicit paths and tools (tests pass a fake).
    pub fn with(config: DockerConfig, tools: Arc<dyn Tools>) -> Docker {
        Docker {
            config,
            runtime: None,
            tools,
            conn: Mutex::new(None),
            child: Mutex::new(None),
            foreign: ForeignParents::default(),
        }
    }

    /// The `docker+isolab` platform: containers run with isolab-runtime
    /// (`docker run --runtime isolab`, registered by isolab's daemon).
    pub fn with_isolab_runtime(mut self) -> Docker {
        self.runtime = Some(ISOLAB_RUNTIME_NAME);
        self
    }

    /// Checks that the daemon knows the runtime this engine asks for (`docker info`
    /// lists it); a host daemon isolab did not start may not.
    fn check_runtime(&self) -> Result<(), EngineError> {
        let Some(name) = self.runtime else {
            return Ok(());
        };
        let cmd = self.docker(["info", "--format", "{{json .Runtimes}}"])?;
        let out = run_ok(&*self.tools, ENGINE, &cmd)?;
        let known: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
        if known.get(name).is_some() {
            return Ok(());
        }
        let path = self
            .config
            .runtimes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, p)| p.display().to_string())
            .unwrap_or_else(|| isolab_runtime::config::PROGRAM.into());
        Err(EngineError::Unsupported {
            engine: self.name(),
            detail: format!(
                "the running dockerd has no OCI runtime `{name}` (it knows {}): add \
                 {{\"runtimes\": {{\"{name}\": {{\"path\": \"{path}\"}}}}}} to \
                 /etc/docker/daemon.json and restart it, or stop it so that isolab starts \
                 its own daemon, which registers it",
                known
                    .as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
                    .unwrap_or_default()
            ),
        })
    }

    /// Connects to the host's daemon, or to isolab's own (starting it when needed).
    fn ensure_daemon(&self) -> Result<(), EngineError> {
        let mut conn = lock(&self.conn);
        if conn.is_some() {
            return Ok(());
        }
        if let Some(c) = self.connect(&self.config.system_socket, false)? {
            *conn = Some(c);
            return Ok(());
        }
        let pid = self.pid_from_file();
        if pid.is_some_and(|p| process_is(&self.config.proc, p, "dockerd")) {
            // Ours, started earlier (by this or another isolab process).
            let start = Instant::now();
            while start.elapsed() < self.config.ready_timeout {
                if let Some(c) = self.connect(&self.config.socket(), true)? {
                    *conn = Some(c);
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            let log = std::fs::read_to_string(&self.config.log_file).unwrap_or_default();
            return Err(EngineError::DaemonNotReady {
                engine: ENGINE,
                socket: self.config.socket(),
                waited_s: start.elapsed().as_secs(),
                log: tail(&log, 2000),
            });
        }
        *conn = Some(self.start_daemon()?);
        Ok(())
    }

    /// The configuration in use.
    pub fn config(&self) -> &DockerConfig {
        &self.config
    }

    /// Whether the daemon in use was started by isolab (`None` before
    /// [`Engine::ensure_ready`]).
    pub fn started_daemon(&self) -> Option<bool> {
        lock(&self.conn).as_ref().map(|c| c.ours)
    }

    fn client(&self) -> Result<PathBuf, EngineError> {
        if let Some(p) = self.tools.which("/usr/bin/docker") {
            return Ok(p);
        }
        require(&*self.tools, ENGINE, "docker", "docker.io")
    }

    /// Asks the daemon on `socket` for its version: `(Version, ApiVersion)`.
    fn probe(&self, client: &Path, socket: &Path) -> Option<(String, String)> {
        let out = self
            .tools
            .run(&argv([
                client.display().to_string(),
                "-H".into(),
                format!("unix://{}", socket.display()),
                "version".into(),
                "--format".into(),
                "{{json .}}".into(),
            ]))
            .ok()?;
        parse_server_version(&out.stdout)
    }

    fn connect(&self, socket: &Path, ours: bool) -> Result<Option<Conn>, EngineError> {
        let client = self.client()?;
        let Some((version, api)) = self.probe(&client, socket) else {
            return Ok(None);
        };
        let env = require(&*self.tools, ENGINE, "env", "coreutils")?;
        Ok(Some(Conn {
            prefix: argv([
                env.display().to_string(),
                format!("DOCKER_API_VERSION={api}"),
                client.display().to_string(),
                "-H".into(),
                format!("unix://{}", socket.display()),
            ]),
            server_version: version,
            ours,
        }))
    }

    /// The connection, made ready on first use.
    fn conn(&self) -> Result<Conn, EngineError> {
        if let Some(c) = lock(&self.conn).as_ref() {
            return Ok(c.clone());
        }
        self.ensure_ready()?;
        lock(&self.conn)
            .as_ref()
            .cloned()
            .ok_or_else(|| EngineError::DaemonNotReady {
                engine: ENGINE,
                socket: self.config.socket(),
                waited_s: 0,
                log: "the daemon went away".into(),
            })
    }

    fn docker<I, S>(&self, args: I) -> Result<Vec<String>, EngineError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut v = self.conn()?.prefix;
        v.extend(args.into_iter().map(Into::into));
        Ok(v)
    }

    /// An image of one's own, loaded once from its Docker archive (its layers and ID kept).
    fn load_own_image(&self, image: &Path, own: &OwnImage) -> Result<PreparedImage, EngineError> {
        if self.image_id(&own.name)?.as_deref() != Some(own.digest.as_str()) {
            let cmd = self.docker([
                "load".to_string(),
                "--quiet".into(),
                "--input".into(),
                own.archive.display().to_string(),
            ])?;
            run_ok(&*self.tools, ENGINE, &cmd)?;
        }
        let loaded = self.image_id(&own.name)?;
        if loaded.as_deref() != Some(own.digest.as_str()) {
            return Err(EngineError::Unexpected {
                engine: ENGINE,
                command: format!("docker load --input {}", own.archive.display()),
                detail: format!(
                    "{} has ID {} after the load, not the image's {}",
                    own.name,
                    loaded.as_deref().unwrap_or("(none)"),
                    own.digest
                ),
            });
        }
        Ok(PreparedImage {
            reference: own.name.clone(),
            digest: own.digest.clone(),
            source: image.to_path_buf(),
        })
    }

    fn image_id(&self, reference: &str) -> Result<Option<String>, EngineError> {
        let cmd = self.docker(["image", "inspect", "--format", "{{json .Id}}", reference])?;
        let out = self.tools.run(&cmd).map_err(|e| EngineError::Command {
            engine: ENGINE,
            command: cmd.join(" "),
            status: "not started".into(),
            stderr: e.to_string(),
        })?;
        if out.status != 0 {
            return Ok(None);
        }
        let id: String =
            serde_json::from_str(out.stdout.trim()).map_err(|e| EngineError::Unexpected {
                engine: ENGINE,
                command: cmd.join(" "),
                detail: format!("not a JSON string ({e}): {}", tail(&out.stdout, 200)),
            })?;
        Ok(Some(id))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `(Version, ApiVersion)` of the server from `docker version --format '{{json .}}'`.
pub(crate) fn parse_server_version(stdout: &str) -> Option<(String, String)> {
    let v: serde_json::Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l.trim()).ok())?;
    let server = v.get("Server")?;
    let version = server.get("Version")?.as_str()?.to_owned();
    let api = server.get("ApiVersion")?.as_str()?.to_owned();
    Some((version, api))
}

/// The gateway of Docker's `bridge` network from `docker network inspect bridge
/// --format '{{json .}}'`: the IPAM gateway, else the first host of its subnet.
pub(crate) fn parse_bridge_gateway(stdout: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    let configs = v.get("IPAM")?.get("Config")?.as_array()?;
    for c in configs {
        if let Some(g) = c.get("Gateway").and_then(|g| g.as_str()) {
            if !g.is_empty() && !g.contains(':') {
                return Some(g.to_owned());
            }
        }
    }
    configs
        .iter()
        .filter_map(|c| c.get("Subnet").and_then(|s| s.as_str()))
        .find_map(first_host)
}

/// Container names from `docker ps --format '{{json .}}'` (one object a line).
pub(crate) fn parse_ps_names(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .filter_map(|v| v.get("Names").and_then(|n| n.as_str()).map(str::to_owned))
        .flat_map(|n| n.split(',').map(str::to_owned).collect::<Vec<_>>())
        .collect()
}

impl Engine for Docker {
    fn name(&self) -> &'static str {
        match self.runtime {
            Some(_) => "docker+isolab",
            None => ENGINE,
        }
    }

    fn summary(&self) -> &'static str {
        match self.runtime {
            Some(_) => "Docker with isolab-runtime as its OCI runtime (`--runtime isolab`)",
            None => "Docker (Debian docker.io): `docker run`; isolab starts dockerd when none runs",
        }
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // The container is a child of containerd, not of the client isolab
            // starts, so the client's perf counters would not describe it.
            perf_follows_workload: false,
            daemons: &[
                "dockerd",
                "containerd",
                "containerd-shim-runc-v2",
                "docker-proxy",
            ],
            // Named volumes too (`docker volume create`).
            storage: &StorageLevel::ALL,
            ..Capabilities::container(&[NetworkMode::None, NetworkMode::Bridge, NetworkMode::Host])
        }
    }

    fn available(&self) -> Result<(), EngineError> {
        self.client()?;
        if !self.config.system_socket.exists() {
            require(&*self.tools, ENGINE, "dockerd", "docker.io")?;
        }
        if let Some(name) = self.runtime {
            let path = self
                .config
                .runtimes
                .iter()
                .find(|(n, _)| n == name)
                .map_or_else(
                    || isolab_runtime::config::PROGRAM.to_string(),
                    |(_, p)| p.display().to_string(),
                );
            require(
                &*self.tools,
                ENGINE,
                &path,
                "isolab-runtime (cargo build --release -p isolab-runtime)",
            )?;
        }
        Ok(())
    }

    fn version(&self) -> Result<String, EngineError> {
        Ok(self.conn()?.server_version)
    }

    fn ensure_ready(&self) -> Result<(), EngineError> {
        self.ensure_daemon()?;
        self.check_runtime()
    }

    fn prepare_image(&self, image: &Path) -> Result<PreparedImage, EngineError> {
        if let Some(own) = own_image(image) {
            return self.load_own_image(image, &own);
        }
        let (tar, sha) = cached_tar_in(ENGINE, &self.config.cache_dir, image)?;
        let reference = format!("{}:{}", repository(image), &sha[..12.min(sha.len())]);
        let digest = match self.image_id(&reference)? {
            Some(id) => id,
            None => {
                let cmd = self.docker([
                    "import".to_string(),
                    tar.display().to_string(),
                    reference.clone(),
                ])?;
                run_ok(&*self.tools, ENGINE, &cmd)?;
                self.image_id(&reference)?
                    .ok_or_else(|| EngineError::Unexpected {
                        engine: ENGINE,
                        command: cmd.join(" "),
                        detail: format!("{reference} does not exist after the import"),
                    })?
            }
        };
        Ok(PreparedImage {
            reference,
            digest,
            source: image.to_path_buf(),
        })
    }

    fn shares_names(&self) -> bool {
        true
    }

    fn command(
        &self,
        request: &RunRequest,
        image: &PreparedImage,
    ) -> Result<Vec<String>, EngineError> {
        let mut cmd = self.docker(["run", "--rm", "--init"])?;
        if let Some(name) = self.runtime {
            cmd.extend(["--runtime".to_string(), name.to_string()]);
        }
        cmd.extend(common_run_flags(request));
        cmd.extend(limit_flags(
            ENGINE,
            &request.limits,
            self.config.cgroup_version,
            &self.config.sys,
        )?);
        cmd.extend(entrypoint_flags(&image.source));
        cmd.push(image.reference.clone());
        cmd.extend(request.argv.iter().cloned());
        Ok(cmd)
    }

    fn remove_container(&self, request: &RunRequest) -> Result<(), EngineError> {
        let cmd = self.docker(["rm", "-f", request.id.as_str()])?;
        let mut result = self.tools.run(&cmd);
        // A container started with `--rm` whose processes were killed is being removed
        // by dockerd already ("removal of container … is already in progress"): wait for
        // that removal to finish (up to 10 s) instead of reporting it as a failure.
        for _ in 0..100 {
            match &result {
                Ok(out) if out.status != 0 && out.stderr.contains("already in progress") => {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                    result = self.tools.run(&cmd);
                }
                _ => break,
            }
        }
        match result {
            Ok(out) if out.status == 0 || out.stderr.contains("No such container") => {
                self.foreign
                    .remove(&self.config.proc, &request.cgroup_parent);
                Ok(())
            }
            Ok(out) => Err(EngineError::Command {
                engine: ENGINE,
                command: cmd.join(" "),
                status: format!("exit status {}", out.status),
                stderr: tail(&out.stderr, 2000),
            }),
            Err(e) => Err(EngineError::Command {
                engine: ENGINE,
                command: cmd.join(" "),
                status: "not started".into(),
                stderr: e.to_string(),
            }),
        }
    }

    fn host_address(&self, network: NetworkMode) -> Option<String> {
        match network {
            NetworkMode::None => None,
            NetworkMode::Host => Some("127.0.0.1".into()),
            NetworkMode::Bridge => {
                let cmd = self
                    .docker(["network", "inspect", "bridge", "--format", "{{json .}}"])
                    .ok()?;
                let out = run_ok(&*self.tools, ENGINE, &cmd).ok()?;
                parse_bridge_gateway(&out)
            }
        }
    }

    fn gc(&self, prefix: &str) -> Result<Vec<String>, EngineError> {
        // Listing must not start a daemon: with none answering, no container of a
        // dead experiment runs (they are all `--rm`).
        if lock(&self.conn).is_none() {
            let found = match self.connect(&self.config.system_socket, false)? {
                Some(c) => Some(c),
                None => self.connect(&self.config.socket(), true)?,
            };
            match found {
                Some(c) => *lock(&self.conn) = Some(c),
                None => return Ok(Vec::new()),
            }
        }
        let cmd = self.docker([
            "ps".to_string(),
            "-a".into(),
            "--filter".into(),
            format!("name=^{prefix}"),
            "--format".into(),
            "{{json .}}".into(),
        ])?;
        let out = run_ok(&*self.tools, ENGINE, &cmd)?;
        let mut removed = Vec::new();
        for name in parse_ps_names(&out) {
            if !name.starts_with(prefix) {
                continue;
            }
            run_ok(
                &*self.tools,
                ENGINE,
                &self.docker(["rm", "-f", name.as_str()])?,
            )?;
            removed.push(format!("docker container {name}"));
        }
        // Then the volumes of storage `volume`, which their containers no longer use.
        let cli = self.docker(Vec::<String>::new())?;
        removed.extend(volumes::gc(&*self.tools, ENGINE, &cli, prefix)?);
        Ok(removed)
    }

    fn create_volume(&self, name: &str) -> Result<PathBuf, EngineError> {
        let cli = self.docker(Vec::<String>::new())?;
        volumes::create(&*self.tools, ENGINE, &cli, name)
    }

    fn remove_volume(&self, name: &str) -> Result<(), EngineError> {
        let cli = self.docker(Vec::<String>::new())?;
        volumes::remove(&*self.tools, ENGINE, &cli, name)
    }

    fn shutdown(&self) -> Result<(), EngineError> {
        self.shutdown_report().map(|_| ())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fakes::Fake;
    use crate::mounts::mounts_below;
    use crate::tool::Output;
    use isolab_cgroups::{Bytes, Limits, Malformed, MountEntry};
    use isolab_cgroups::{CpuQuota, DeviceNumber, IdSet, IoThrottle};

    fn parse(mountinfo: &str) -> Vec<MountEntry> {
        isolab_cgroups::parse_mountinfo(Path::new("mountinfo"), mountinfo, Malformed::Fail).unwrap()
    }

    pub(crate) const VERSION_JSON: &str = r#"{"Client":{"Version":"28.2.2","ApiVersion":"1.50"},"Server":{"Version":"20.10.24+dfsg1","ApiVersion":"1.41","MinAPIVersion":"1.12"}}"#;

    fn config(dir: &Path, version: Version) -> DockerConfig {
        DockerConfig {
            system_socket: dir.join("system.sock"),
            run_dir: dir.join("run"),
            data_root: dir.join("data"),
            log_file: dir.join("log/dockerd.log"),
            cache_dir: dir.join("cache"),
            proc: dir.join("proc"),
            sys: dir.join("sys"),
            cgroup_version: version,
            ready_timeout: Duration::from_millis(300),
            stop_timeout: Duration::from_millis(300),
            runtimes: vec![("isolab".into(), dir.join("isolab-runtime"))],
        }
    }

    fn request() -> RunRequest {
        RunRequest {
            id: "isolab-e1-r1".parse().unwrap(),
            argv: argv(["sysbench", "cpu", "run"]),
            workdir: PathBuf::from("/tmp/wd"),
            network: NetworkMode::None,
            limits: Limits::default(),
            cgroup_parent: PathBuf::from("isolab/e1/r1"),
            env: vec!["A=1".into()],
        }
    }

    fn image() -> PreparedImage {
        PreparedImage {
            reference: "isolab/bench:0123456789ab".into(),
            digest: "sha256:feed".into(),
            source: PathBuf::from("/var/lib/isolab/images/bench"),
        }
    }

    fn ready_docker(dir: &Path, version: Version) -> (Docker, Arc<Fake>) {
        let fake = Arc::new(Fake::default());
        fake.reply("system.sock version", 0, VERSION_JSON, "");
        let d = Docker::with(config(dir, version), fake.clone());
        d.ensure_ready().unwrap();
        (d, fake)
    }

    #[test]
    fn a_running_host_daemon_is_used_and_its_api_version_pinned() {
        let dir = tempfile::tempdir().unwrap();
        let (d, fake) = ready_docker(dir.path(), Version::V1);
        assert_eq!(d.started_daemon(), Some(false));
        assert_eq!(d.version().unwrap(), "20.10.24+dfsg1");
        let cmd = d.run_command(&request(), &image()).unwrap();
        let sock = format!("unix://{}", dir.path().join("system.sock").display());
        assert_eq!(
            cmd[..5],
            argv([
                "/usr/bin/env",
                "DOCKER_API_VERSION=1.41",
                "/usr/bin/docker",
                "-H",
                sock.as_str()
            ])[..]
        );
        // The Debian client is preferred; the probe asked for JSON.
        assert!(fake.calls()[0].ends_with("version --format {{json .}}"));
        // Shutting down never stops a daemon isolab did not start.
        d.shutdown().unwrap();
        assert!(!fake.calls().iter().any(|c| c.contains("kill")));
    }

    #[test]
    fn run_command_maps_every_limit_to_docker_flags() {
        let dir = tempfile::tempdir().unwrap();
        let uevent = dir.path().join("sys/dev/block/254:0");
        std::fs::create_dir_all(&uevent).unwrap();
        std::fs::write(
            uevent.join("uevent"),
            "MAJOR=254\nMINOR=0\nDEVNAME=vda\nDEVTYPE=disk\n",
        )
        .unwrap();
        let (d, _) = ready_docker(dir.path(), Version::V1);
        let mut r = request();
        r.limits = Limits {
            cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
            cpuset: Some("1".parse::<IdSet>().unwrap()),
            mems: Some("0".parse::<IdSet>().unwrap()),
            memory_max: Some(Bytes::mib(256)),
            memory_swap_max: Some(Bytes::mib(512)),
            pids_max: Some(128),
            io: vec![IoThrottle {
                read_bps: Some(1_000_000),
                write_iops: Some(50),
                ..IoThrottle::unlimited(DeviceNumber {
                    major: 254,
                    minor: 0,
                })
            }],
            ..Limits::default()
        };
        let cmd = d.run_command(&r, &image()).unwrap();
        let tail = cmd[5..].join(" ");
        assert_eq!(
            tail,
            "run --rm --init --name isolab-e1-r1 --cgroup-parent /isolab/e1/r1 --network none \
             -v /tmp/wd:/tmp/wd -w /tmp/wd -e A=1 --cpu-period 100000 --cpu-quota 50000 \
             --cpuset-cpus 1 --cpuset-mems 0 --memory 268435456 --memory-swap 536870912 \
             --pids-limit 128 --device-read-bps /dev/vda:1000000 --device-write-iops /dev/vda:50 \
             isolab/bench:0123456789ab sysbench cpu run"
        );
    }

    #[test]
    fn swap_limits_follow_the_cgroup_version() {
        let sys = Path::new("/nonexistent");
        let limits = Limits {
            memory_max: Some(Bytes::mib(256)),
            memory_swap_max: Some(Bytes::mib(64)),
            ..Limits::default()
        };
        // v2: isolab's value is swap alone; Docker wants memory + swap.
        let f = limit_flags(ENGINE, &limits, Version::V2, sys).unwrap();
        assert_eq!(
            f,
            argv(["--memory", "268435456", "--memory-swap", "335544320"])
        );
        // v1: memory+swap below memory is impossible.
        assert!(limit_flags(ENGINE, &limits, Version::V1, sys).is_err());
        // No swap limit asked: unlimited, not Docker's default of twice the memory.
        let only_mem = Limits {
            memory_max: Some(Bytes::mib(256)),
            ..Limits::default()
        };
        for v in [Version::V1, Version::V2] {
            assert_eq!(
                limit_flags(ENGINE, &only_mem, v, sys).unwrap(),
                argv(["--memory", "268435456", "--memory-swap", "-1"])
            );
        }
        let only_swap = Limits {
            memory_swap_max: Some(Bytes::mib(64)),
            ..Limits::default()
        };
        assert!(limit_flags(ENGINE, &only_swap, Version::V2, sys).is_err());
        // An unknown device is an error naming the file.
        let io = Limits {
            io: vec![IoThrottle {
                read_bps: Some(1),
                ..IoThrottle::unlimited(DeviceNumber { major: 8, minor: 0 })
            }],
            ..Limits::default()
        };
        let err = limit_flags(ENGINE, &io, Version::V1, sys).unwrap_err();
        assert!(
            err.to_string()
                .contains("/nonexistent/dev/block/8:0/uevent"),
            "{err}"
        );
    }

    #[test]
    fn bad_ids_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (d, _) = ready_docker(dir.path(), Version::V1);
        let mut r = request();
        r.id = "other-1".parse().unwrap();
        assert!(d.run_command(&r, &image()).is_err());
        assert!(d.remove(&r).is_err());
        // Capitals cannot reach a request: the id's type refuses them.
        assert!("isolab-UPPER"
            .parse::<isolab_runtime::ContainerId>()
            .is_err());
    }

    #[test]
    fn remove_ignores_missing_containers_and_gc_removes_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let (d, fake) = ready_docker(dir.path(), Version::V1);
        fake.reply(
            "rm -f isolab-e1-r1",
            1,
            "",
            "Error: No such container: isolab-e1-r1",
        );
        d.remove(&request()).unwrap();
        // Killed under `--rm`, dockerd is removing it already: wait for that.
        fake.reply_once(
            "rm -f isolab-e1-r1",
            1,
            "",
            "Error response from daemon: removal of container isolab-e1-r1 is already in progress",
        );
        let before = fake.calls().len();
        d.remove(&request()).unwrap();
        assert_eq!(fake.calls().len() - before, 2, "{:?}", fake.calls());
        fake.reply(
            "ps -a",
            0,
            "{\"ID\":\"a\",\"Names\":\"isolab-x-1\"}\n{\"ID\":\"b\",\"Names\":\"isolab-x-2\"}\n",
            "",
        );
        let removed = d.gc("isolab-x-").unwrap();
        assert_eq!(
            removed,
            vec![
                "docker container isolab-x-1".to_string(),
                "docker container isolab-x-2".to_string()
            ]
        );
        let calls = fake.calls();
        assert!(calls
            .iter()
            .any(|c| c.ends_with("ps -a --filter name=^isolab-x- --format {{json .}}")));
        assert!(calls.iter().any(|c| c.ends_with("rm -f isolab-x-2")));
        fake.reply("rm -f isolab-bad", 1, "", "permission denied");
        let mut r = request();
        r.id = "isolab-bad".parse().unwrap();
        assert!(d
            .remove(&r)
            .unwrap_err()
            .to_string()
            .contains("permission denied"));
    }

    #[test]
    fn volumes_are_labelled_inspected_for_their_directory_and_collected_by_prefix() {
        let dir = tempfile::tempdir().unwrap();
        let (d, fake) = ready_docker(dir.path(), Version::V1);
        fake.reply(
            "{{.Mountpoint}} isolab-x-c0-r1",
            0,
            "/var/lib/docker/volumes/isolab-x-c0-r1/_data\n",
            "",
        );
        assert_eq!(
            d.create_volume("isolab-x-c0-r1").unwrap(),
            PathBuf::from("/var/lib/docker/volumes/isolab-x-c0-r1/_data")
        );
        fake.reply("ps -a", 0, "", "");
        fake.reply("volume ls", 0, "isolab-x-c0-r1\nisolab-y-c0-r1\n", "");
        assert_eq!(d.gc("isolab-x-").unwrap(), ["docker volume isolab-x-c0-r1"]);
        let calls = fake.calls();
        assert!(calls
            .iter()
            .any(|c| c.ends_with("volume create --label isolab.storage=1 isolab-x-c0-r1")));
        assert!(calls
            .iter()
            .any(|c| c.ends_with("volume ls --quiet --filter label=isolab.storage")));
        assert!(calls
            .iter()
            .any(|c| c.ends_with("volume rm --force isolab-x-c0-r1")));
        assert!(!calls
            .iter()
            .any(|c| c.ends_with("volume rm --force isolab-y-c0-r1")));
        // A volume whose directory docker does not say is removed again.
        fake.reply("{{.Mountpoint}} isolab-x-c0-r2", 0, "\n", "");
        assert!(d.create_volume("isolab-x-c0-r2").is_err());
        assert!(fake
            .calls()
            .iter()
            .any(|c| c.ends_with("volume rm --force isolab-x-c0-r2")));
    }

    #[test]
    fn host_addresses() {
        let dir = tempfile::tempdir().unwrap();
        let (d, fake) = ready_docker(dir.path(), Version::V1);
        assert_eq!(d.host_address(NetworkMode::None), None);
        assert_eq!(d.host_address(NetworkMode::Host), Some("127.0.0.1".into()));
        fake.reply(
            "network inspect bridge",
            0,
            r#"{"Name":"bridge","IPAM":{"Driver":"default","Config":[{"Subnet":"172.17.0.0/16"}]}}"#,
            "",
        );
        assert_eq!(
            d.host_address(NetworkMode::Bridge),
            Some("172.17.0.1".into())
        );
        assert_eq!(
            parse_bridge_gateway(
                r#"{"IPAM":{"Config":[{"Subnet":"10.1.0.0/24","Gateway":"10.1.0.254"}]}}"#
            ),
            Some("10.1.0.254".into())
        );
        assert_eq!(first_host("192.168.7.9/24"), Some("192.168.7.1".into()));
        assert_eq!(first_host("nonsense"), None);
    }

    #[test]
    fn prepare_image_imports_once_per_tar_digest() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        std::fs::create_dir_all(img.join("bin")).unwrap();
        std::fs::write(img.join("bin/hello"), "hi\n").unwrap();
        let (d, fake) = ready_docker(dir.path(), Version::V1);
        let (tar, sha) = cached_tar_in(ENGINE, &dir.path().join("cache"), &img).unwrap();
        assert!(tar.is_file());
        let reference = format!("isolab/image:{}", &sha[..12]);
        // The tag exists already.
        fake.reply(
            &format!("image inspect --format {{{{json .Id}}}} {reference}"),
            0,
            "\"sha256:abc\"\n",
            "",
        );
        let p = d.prepare_image(&img).unwrap();
        assert_eq!(p.reference, reference);
        assert_eq!(p.digest, "sha256:abc");
        // Already imported: no import at all.
        assert!(!fake.calls().iter().any(|c| c.contains(" import ")));
        // The cache is reused: same path and digest, tar not rewritten.
        let mtime = std::fs::metadata(&tar).unwrap().modified().unwrap();
        let again = cached_tar_in(ENGINE, &dir.path().join("cache"), &img).unwrap();
        assert_eq!(again, (tar.clone(), sha.clone()));
        assert_eq!(std::fs::metadata(&tar).unwrap().modified().unwrap(), mtime);
    }

    #[test]
    fn prepare_image_imports_a_missing_tag() {
        let dir = tempfile::tempdir().unwrap();
        let img = dir.path().join("img");
        std::fs::create_dir_all(&img).unwrap();
        std::fs::write(img.join("f"), "x").unwrap();
        let fake = Arc::new(Fake::default());
        fake.reply("system.sock version", 0, VERSION_JSON, "");
        // First inspect fails, the import succeeds, then the inspect finds it.
        struct Seq(Arc<Fake>, Mutex<u32>);
        impl Tools for Seq {
            fn run(&self, argv: &[String]) -> std::io::Result<Output> {
                let line = argv.join(" ");
                if line.contains("image inspect") {
                    let mut n = lock(&self.1);
                    *n += 1;
                    lock(&self.0.calls).push(argv.to_vec());
                    return Ok(if *n == 1 {
                        Output {
                            status: 1,
                            stdout: "[]".into(),
                            stderr: "No such image".into(),
                        }
                    } else {
                        Output {
                            status: 0,
                            stdout: "\"sha256:new\"".into(),
                            stderr: String::new(),
                        }
                    });
                }
                self.0.run(argv)
            }
            fn which(&self, p: &str) -> Option<PathBuf> {
                self.0.which(p)
            }
        }
        let d = Docker::with(
            config(dir.path(), Version::V1),
            Arc::new(Seq(fake.clone(), Mutex::new(0))),
        );
        let p = d.prepare_image(&img).unwrap();
        assert_eq!(p.digest, "sha256:new");
        let imports: Vec<String> = fake
            .calls()
            .into_iter()
            .filter(|c| c.contains(" import "))
            .collect();
        assert_eq!(imports.len(), 1);
        assert!(
            imports[0].ends_with(&format!(
                " import {} {}",
                dir.path()
                    .join("cache")
                    .join(format!(
                        "image-{}-t{}.tar",
                        &isolab_image::tree_digest(&img).unwrap()[..16],
                        isolab_image::TAR_MTIME
                    ))
                    .display(),
                p.reference
            )),
            "{imports:?}"
        );
    }

    #[test]
    fn dockerd_flags_and_a_missing_daemon() {
        let dir = tempfile::tempdir().unwrap();
        let c = config(dir.path(), Version::V1);
        let a = c.dockerd_argv(Path::new("/usr/sbin/dockerd")).join(" ");
        assert!(a.contains("--exec-opt native.cgroupdriver=cgroupfs"), "{a}");
        assert!(a.contains(&format!("--pidfile {}", c.pidfile().display())));
        assert!(a.contains(&format!("--data-root {}", c.data_root.display())));
        assert!(a.contains(&format!("--host unix://{}", c.socket().display())));
        assert!(
            a.contains(&format!(
                "--add-runtime isolab={}",
                dir.path().join("isolab-runtime").display()
            )),
            "{a}"
        );
        let fake = Arc::new(Fake {
            missing: vec!["dockerd".into()],
            ..Fake::default()
        });
        fake.reply("version", 1, "", "Cannot connect to the Docker daemon");
        let d = Docker::with(c, fake);
        let err = d.ensure_ready().unwrap_err().to_string();
        assert!(err.contains("apt-get install docker.io"), "{err}");
    }

    #[test]
    fn stale_pidfiles_and_sockets_are_cleared() {
        let dir = tempfile::tempdir().unwrap();
        let c = config(dir.path(), Version::V1);
        std::fs::create_dir_all(&c.run_dir).unwrap();
        std::fs::create_dir_all(c.proc.join("77")).unwrap();
        std::fs::write(c.pidfile(), "77\n").unwrap();
        std::fs::write(c.socket(), "").unwrap();
        // Pid 77 is a zombie dockerd: stale.
        std::fs::write(c.proc.join("77/stat"), "77 (dockerd) Z 1 77 77 0").unwrap();
        let d = Docker::with(c.clone(), Arc::new(Fake::default()));
        d.clear_stale().unwrap();
        assert!(!c.pidfile().exists() && !c.socket().exists());
        // A live dockerd keeps its files.
        std::fs::write(c.pidfile(), "77\n").unwrap();
        std::fs::write(c.proc.join("77/stat"), "77 (dockerd) S 1 77 77 0").unwrap();
        d.clear_stale().unwrap();
        assert!(c.pidfile().exists());
        // A live process of another name does not.
        std::fs::write(c.proc.join("77/stat"), "77 (bash) S 1 77 77 0").unwrap();
        d.clear_stale().unwrap();
        assert!(!c.pidfile().exists());
    }

    #[test]
    fn process_states_and_mount_lists() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("5")).unwrap();
        std::fs::write(dir.path().join("5/stat"), "5 (a (b) c) R 1").unwrap();
        assert!(process_is(dir.path(), 5, "a (b) c"));
        assert!(!process_is(dir.path(), 6, "a (b) c"));
        let mi = "22 1 0:1 / / rw - ext4 /dev/vda rw\n\
                  44 27 254:0 /d /var/lib/isolab/docker rw - ext4 /dev/vda rw\n\
                  45 44 0:40 / /var/lib/isolab/docker/overlay2/x/merged rw - overlay o rw\n\
                  46 27 0:4 / /run/isolab/dockerd/exec/netns/default rw - nsfs nsfs rw\n";
        assert_eq!(
            mounts_below(
                &parse(mi),
                &[
                    Path::new("/var/lib/isolab/docker"),
                    Path::new("/run/isolab/dockerd/exec")
                ]
            ),
            vec![
                PathBuf::from("/var/lib/isolab/docker/overlay2/x/merged"),
                PathBuf::from("/run/isolab/dockerd/exec/netns/default"),
                PathBuf::from("/var/lib/isolab/docker"),
            ]
        );
    }
}
