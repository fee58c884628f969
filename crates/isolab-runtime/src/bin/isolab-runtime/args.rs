//! Command-line flags, their validation into a [`ContainerConfig`], and the
//! subcommands.

use std::path::{Path, PathBuf};

use crate::oci_cli::{self, CreateArgs, ExecArgs, Format, Global};
use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use isolab_cgroups::{Bytes, CpuQuota, DeviceNumber, Hierarchy, IdSet, IoThrottle};
use isolab_runtime::security::{SeccompChoice, SecurityConfig};
use isolab_runtime::{
    backing_device, default_security, oci, trace_json, BindMount, ContainerConfig, ContainerId,
    NetworkChoice, PortMapping, Report, Rootfs,
};

/// isolab's container runtime.
#[derive(Debug, Parser)]
#[command(name = "isolab-runtime", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a command in a new container and exit with its status.
    Run {
        #[command(flatten)]
        container: ContainerArgs,
        /// Run an OCI bundle (DIR/config.json with its rootfs) instead of ROOTFS -- CMD.
        #[arg(long, value_name = "DIR", conflicts_with_all = ["rootfs", "command"])]
        bundle: Option<PathBuf>,
        /// After the container ends, write a JSON report to FILE (atomically): id,
        /// cgroup, status, trace, limits, stats, notes, error (status null and the
        /// message in error when the runtime fails).
        #[arg(long, value_name = "FILE")]
        report: Option<PathBuf>,
    },
    /// Print the OCI runtime spec (config.json) of a configuration.
    Spec {
        #[command(flatten)]
        container: ContainerArgs,
    },
    /// OCI: create a container from a bundle; its process waits for `start`.
    Create(CreateArgs),
    /// OCI: run another process in a running container.
    Exec(ExecArgs),
    /// OCI: let a created container execute its command.
    Start {
        /// Container id.
        id: String,
    },
    /// OCI: print a container's state as JSON.
    State {
        /// Container id.
        id: String,
    },
    /// OCI: send a signal to a container's process.
    Kill {
        /// Signal every process in the container's cgroup.
        #[arg(long, short)]
        all: bool,
        /// Container id.
        id: String,
        /// Signal name (TERM, KILL, SIGUSR1, …) or number [default: TERM].
        signal: Option<String>,
    },
    /// OCI: remove a stopped or created container (--force: also a running one).
    Delete {
        /// Kill a running container first.
        #[arg(long, short)]
        force: bool,
        /// Container id.
        id: String,
    },
    /// OCI: list the containers of the state directory.
    List {
        /// table or json.
        #[arg(long, short, value_enum, default_value = "table")]
        format: Format,
        /// Ids only.
        #[arg(long, short)]
        quiet: bool,
    },
    /// OCI: list the processes of a container (json: their host pids).
    Ps {
        /// table (`ps -f` of them) or json.
        #[arg(long, short, value_enum, default_value = "table")]
        format: Format,
        /// Container id.
        id: String,
        /// Options for ps (table format).
        #[arg(last = true)]
        ps_args: Vec<String>,
    },
    /// Remove cgroups, loop devices, directories and state files left by killed runtimes.
    Gc {
        /// State directory.
        #[arg(long, default_value_os_t = isolab_runtime::config::default_state_dir())]
        state_dir: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum RootfsType {
    Dir,
    Overlay,
    Ext4,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum NetworkMode {
    None,
    Host,
    Bridge,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum SeccompMode {
    Default,
    Unconfined,
}

#[derive(Debug, Args)]
pub(crate) struct ContainerArgs {
    /// Container id: 2 to 64 lowercase letters, digits, '-', '_' or '.', starting with a
    /// letter or digit (default: generated).
    #[arg(long)]
    pub(crate) id: Option<String>,
    /// Hostname (default: the id).
    #[arg(long)]
    pub(crate) hostname: Option<String>,
    /// Kind of ROOTFS: a directory, the lower directory of an overlay, an ext4 image.
    #[arg(long, value_enum, default_value = "dir")]
    pub(crate) rootfs_type: RootfsType,
    /// Mount the root read-only (dir, ext4).
    #[arg(long)]
    pub(crate) readonly: bool,
    /// Keep the overlay's upper layer in DIR (default: a throw-away tmpfs).
    #[arg(long, value_name = "DIR")]
    pub(crate) upper: Option<PathBuf>,
    /// CPU quota in cpus (e.g. 0.5), over --cpu-period.
    #[arg(long)]
    pub(crate) cpus: Option<f64>,
    /// The CFS period of --cpus in microseconds, 1000 to 1000000 (default 100000).
    #[arg(long, value_name = "MICROSECONDS", requires = "cpus")]
    pub(crate) cpu_period: Option<u64>,
    /// Cpus the container may run on (e.g. 0-1,3).
    #[arg(long, value_name = "LIST")]
    pub(crate) cpuset: Option<String>,
    /// Memory nodes the container may allocate from (e.g. 0).
    #[arg(long, value_name = "LIST")]
    pub(crate) cpuset_mems: Option<String>,
    /// Memory limit (bytes, or 512M, 1G).
    #[arg(long)]
    pub(crate) memory: Option<String>,
    /// Memory plus swap limit (cgroup v1 semantics; equal to --memory = no swap).
    #[arg(long)]
    pub(crate) memory_swap: Option<String>,
    /// Maximum number of tasks.
    #[arg(long)]
    pub(crate) pids: Option<u64>,
    /// Read bandwidth limit, `RATE` (on the disk holding ROOTFS) or `DEV=RATE`
    /// (DEV = /dev/NAME or MAJOR:MINOR); RATE in bytes/s (10M = 10 MiB/s).
    #[arg(long, value_name = "[DEV=]RATE")]
    pub(crate) io_read_bps: Vec<String>,
    /// Write bandwidth limit, as --io-read-bps.
    #[arg(long, value_name = "[DEV=]RATE")]
    pub(crate) io_write_bps: Vec<String>,
    /// Network: none (loopback only), host, bridge.
    #[arg(long, value_enum, default_value = "none")]
    pub(crate) network: NetworkMode,
    /// Publish a port, HOST:CONTAINER (bridge network).
    #[arg(long, value_name = "HOST:CONTAINER")]
    pub(crate) publish: Vec<String>,
    /// Run in a new user namespace (container root = host uid 100000).
    #[arg(long)]
    pub(crate) userns: bool,
    /// Add a capability to Docker's default set (NET_ADMIN, ALL).
    #[arg(long)]
    pub(crate) cap_add: Vec<String>,
    /// Drop a capability from the default set.
    #[arg(long)]
    pub(crate) cap_drop: Vec<String>,
    /// Every capability, no seccomp, nothing masked.
    #[arg(long)]
    pub(crate) privileged: bool,
    /// Seccomp profile.
    #[arg(long, value_enum, default_value = "default")]
    pub(crate) seccomp: SeccompMode,
    /// Do not set no_new_privs.
    #[arg(long)]
    pub(crate) allow_new_privs: bool,
    /// Environment entry NAME=value (added to PATH and TERM).
    #[arg(long, short)]
    pub(crate) env: Vec<String>,
    /// Working directory inside the container.
    #[arg(long, short = 'w', default_value = "/")]
    pub(crate) cwd: PathBuf,
    /// Bind-mount a host file or directory, SRC:DST or SRC:DST:ro (repeatable; SRC
    /// must exist, DST is absolute and created in the root when missing).
    #[arg(long, value_name = "SRC:DST[:ro]")]
    pub(crate) bind: Vec<String>,
    /// Parent of the container's cgroup, relative to each controller's mount
    /// (created when missing, and then removed again) [default: isolab].
    #[arg(long, value_name = "PATH")]
    pub(crate) cgroup_parent: Option<PathBuf>,
    /// Print phase timestamps (and notes) as JSON on stderr.
    #[arg(long)]
    pub(crate) trace: bool,
    /// State directory.
    #[arg(long, default_value_os_t = isolab_runtime::config::default_state_dir())]
    pub(crate) state_dir: PathBuf,
    /// Root filesystem: directory, overlay lower directory, or ext4 image.
    pub(crate) rootfs: Option<PathBuf>,
    /// The command and its arguments (after `--`).
    #[arg(last = true)]
    pub(crate) command: Vec<String>,
}

/// Runs the subcommand; returns the exit status.
/// `started`: the process's start (`CLOCK_MONOTONIC` ns), the origin of `--trace`.
pub fn dispatch(cli: Cli, started: u64) -> Result<i32> {
    let global = cli.global;
    global.check()?;
    match cli.command {
        Command::Create(args) => oci_cli::create(&global, &args, started),
        Command::Start { id } => oci_cli::start(&global, &id),
        Command::Exec(args) => oci_cli::exec(&global, &args),
        Command::State { id } => oci_cli::state(&global, &id),
        Command::Kill { all, id, signal } => oci_cli::kill(&global, &id, signal.as_deref(), all),
        Command::Delete { force, id } => oci_cli::delete(&global, &id, force),
        Command::List { format, quiet } => oci_cli::list(&global, format, quiet),
        Command::Ps {
            format,
            id,
            ps_args,
        } => oci_cli::ps(&global, &id, format, &ps_args),
        Command::Run {
            mut container,
            bundle,
            report,
        } => {
            if let Some(root) = &global.root {
                container.state_dir = root.clone();
            }
            let config = match bundle {
                Some(dir) => container.bundle_config(&dir),
                None => container.to_config(),
            };
            let config = match config {
                Ok(config) => config,
                Err(e) => {
                    if let Some(path) = &report {
                        let id = container.id.clone().unwrap_or_default();
                        write_failure(path, &Report::failed(&id, Path::new(""), chain(&e)));
                    }
                    return Err(e);
                }
            };
            run(
                ContainerConfig {
                    trace_origin: Some(started),
                    ..config
                },
                report.as_deref(),
            )
        }
        Command::Spec { mut container } => {
            if let Some(root) = &global.root {
                container.state_dir = root.clone();
            }
            let config = container.to_config()?;
            let spec = isolab_runtime::oci_spec(&config)?;
            let mut value = serde_json::to_value(&spec)?;
            sort_capabilities(&mut value);
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(0)
        }
        Command::Gc { state_dir } => {
            let state_dir = global.root.unwrap_or(state_dir);
            let h = Hierarchy::detect().context("detect the cgroup mounts")?;
            for id in isolab_runtime::gc(&state_dir, &h)? {
                println!("removed {id}");
            }
            Ok(0)
        }
    }
}

/// `oci-spec` keeps capabilities in hash sets: sort each list so that the same
/// configuration always prints the same spec.
fn sort_capabilities(spec: &mut serde_json::Value) {
    if let Some(caps) = spec
        .pointer_mut("/process/capabilities")
        .and_then(|c| c.as_object_mut())
    {
        for list in caps.values_mut() {
            if let Some(items) = list.as_array_mut() {
                items.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
        }
    }
}

fn run(mut config: ContainerConfig, report: Option<&Path>) -> Result<i32> {
    config.forward_signals = true;
    // Only the report shows the counters.
    config.read_counters = report.is_some();
    let exit = match isolab_runtime::run(&config) {
        Ok(exit) => exit,
        Err(e) => {
            let e = anyhow::Error::from(e);
            if let Some(path) = report {
                let failed = Report::failed(config.id.as_str(), &config.cgroup_rel(), chain(&e));
                write_failure(path, &failed);
            }
            return Err(e);
        }
    };
    if config.trace {
        eprintln!("{}", trace_json(&exit.trace));
        for note in &exit.notes {
            eprintln!("isolab-runtime: note: {note}");
        }
    }
    if let Some(path) = report {
        Report::from_exit(&config, &exit).write(path)?;
    }
    Ok(exit.status)
}

/// Writes the report of a failed run; a failure to write it is only printed (the
/// run's own error is what the caller gets).
fn write_failure(path: &Path, report: &Report) {
    if let Err(e) = report.write(path) {
        eprintln!("isolab-runtime: error: {e}");
    }
}

/// The error and its causes, skipping a cause already spelled out by the message
/// before it (library errors include their source in their message).
pub fn chain(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
    }
    out
}

impl ContainerArgs {
    /// `--id`, checked; a generated id without it.
    fn container_id(&self) -> Result<ContainerId> {
        match &self.id {
            Some(id) => Ok(id.parse()?),
            None => Ok(ContainerId::generate()),
        }
    }

    /// `run --bundle DIR`: the bundle's configuration, with the id, state directory,
    /// trace, extra binds and cgroup parent of the flags.
    fn bundle_config(&self, dir: &Path) -> Result<ContainerConfig> {
        let mut config = oci::from_bundle(dir, &self.container_id()?)?;
        config.state_dir = self.state_dir.clone();
        config.trace = self.trace;
        config.binds.extend(self.binds()?);
        if let Some(parent) = self.cgroup_parent() {
            config.cgroup_parent = parent;
        }
        config.validate()?;
        Ok(config)
    }

    /// `--bind` flags; each source must exist and is made absolute.
    fn binds(&self) -> Result<Vec<BindMount>> {
        self.bind
            .iter()
            .map(|spec| {
                let mut bind = BindMount::parse(spec)?;
                bind.validate()?;
                // Absolute, so that `spec` writes a source runc and crun find too
                // (OCI reads a relative source as relative to the bundle).
                bind.source = bind.source.canonicalize().with_context(|| {
                    format!(
                        "--bind {spec:?}: source {} does not exist",
                        bind.source.display()
                    )
                })?;
                Ok(bind)
            })
            .collect()
    }

    /// `--cgroup-parent`, a leading `/` dropped (cgroup paths are often written
    /// absolute, as in OCI's `cgroupsPath`).
    fn cgroup_parent(&self) -> Option<PathBuf> {
        self.cgroup_parent.as_ref().map(|p| {
            p.strip_prefix("/")
                .map_or_else(|_| p.clone(), Path::to_path_buf)
        })
    }

    fn to_config(&self) -> Result<ContainerConfig> {
        let Some(source) = self.rootfs.clone() else {
            bail!("no root filesystem: give ROOTFS (or --bundle DIR for `run`)");
        };
        let rootfs = match self.rootfs_type {
            RootfsType::Dir => Rootfs::Dir {
                path: source,
                readonly: self.readonly,
            },
            RootfsType::Overlay => Rootfs::Overlay {
                lower: source,
                upper: self.upper.clone(),
            },
            RootfsType::Ext4 => Rootfs::Ext4Image {
                file: source,
                readonly: self.readonly,
            },
        };
        if self.upper.is_some() && self.rootfs_type != RootfsType::Overlay {
            bail!("--upper only applies to --rootfs-type overlay");
        }
        let mut config = ContainerConfig::new(rootfs, self.command.clone());
        config.id = self.container_id()?;
        config.hostname = self
            .hostname
            .clone()
            .unwrap_or_else(|| config.id.to_string());
        config.env.extend(self.env.iter().cloned());
        config.cwd = self.cwd.clone();
        config.trace = self.trace;
        config.state_dir = self.state_dir.clone();
        // Without root a user namespace is what makes the mounts possible.
        config.user_namespace = self.userns || isolab_runtime::config::rootless();
        config.binds = self.binds()?;
        if let Some(parent) = self.cgroup_parent() {
            config.cgroup_parent = parent;
        }
        config.network = match self.network {
            NetworkMode::None => NetworkChoice::None,
            NetworkMode::Host => NetworkChoice::Host,
            NetworkMode::Bridge => NetworkChoice::Bridge {
                publish: self
                    .publish
                    .iter()
                    .map(|p| parse_publish(p))
                    .collect::<Result<_>>()?,
            },
        };
        if self.network == NetworkMode::Bridge && isolab_runtime::config::rootless() {
            bail!(
                "--network bridge needs root (a veth pair, a bridge and NAT in the host's \
                 network namespace); without root use --network none or host"
            );
        }
        if !self.publish.is_empty() && self.network != NetworkMode::Bridge {
            bail!("--publish needs --network bridge");
        }
        config.security = self.security()?;
        let limits = &mut config.limits;
        if let Some(cpus) = self.cpus {
            let period = self
                .cpu_period
                .map_or(CpuQuota::DEFAULT_PERIOD, std::time::Duration::from_micros);
            limits.cpu = Some(CpuQuota::from_cpus(cpus, period)?);
        }
        if let Some(set) = &self.cpuset {
            limits.cpuset = Some(set.parse::<IdSet>()?);
        }
        if let Some(set) = &self.cpuset_mems {
            limits.mems = Some(set.parse::<IdSet>()?);
        }
        if let Some(m) = &self.memory {
            limits.memory_max = Some(m.parse::<Bytes>()?);
        }
        if let Some(m) = &self.memory_swap {
            limits.memory_swap_max = Some(m.parse::<Bytes>()?);
        }
        limits.pids_max = self.pids;
        let disk = || backing_device(config.rootfs.source());
        let mut io: Vec<IoThrottle> = Vec::new();
        for (list, write) in [(&self.io_read_bps, false), (&self.io_write_bps, true)] {
            for item in list {
                let (device, rate) = parse_io(item, &disk)?;
                let pos = io
                    .iter()
                    .position(|t| t.device == device)
                    .unwrap_or_else(|| {
                        io.push(IoThrottle::unlimited(device));
                        io.len() - 1
                    });
                if write {
                    io[pos].write_bps = Some(rate);
                } else {
                    io[pos].read_bps = Some(rate);
                }
            }
        }
        config.limits.io = io;
        config.validate()?;
        Ok(config)
    }

    fn security(&self) -> Result<SecurityConfig> {
        if self.privileged {
            return Ok(SecurityConfig::privileged());
        }
        let mut s = default_security()
            .with_cap_drop(&self.cap_drop)?
            .with_cap_add(&self.cap_add)?;
        s.no_new_privs = !self.allow_new_privs;
        s.seccomp = match self.seccomp {
            SeccompMode::Default => SeccompChoice::Default,
            SeccompMode::Unconfined => SeccompChoice::Unconfined,
        };
        Ok(s)
    }
}

fn parse_publish(s: &str) -> Result<PortMapping> {
    let (h, c) = s
        .split_once(':')
        .with_context(|| format!("--publish {s:?}: expected HOST:CONTAINER, e.g. 8080:80"))?;
    Ok(PortMapping {
        host: h
            .parse()
            .with_context(|| format!("--publish {s:?}: bad host port"))?,
        container: c
            .parse()
            .with_context(|| format!("--publish {s:?}: bad container port"))?,
    })
}

/// `RATE` or `DEV=RATE`.
fn parse_io(
    s: &str,
    disk: &dyn Fn() -> Result<DeviceNumber, isolab_runtime::RuntimeError>,
) -> Result<(DeviceNumber, u64)> {
    let (device, rate) = match s.split_once('=') {
        Some((dev, rate)) => (parse_device(dev)?, rate),
        None => (
            disk().context("find the disk holding the root filesystem (or give DEV=RATE)")?,
            s,
        ),
    };
    let rate = rate
        .parse::<Bytes>()
        .with_context(|| format!("io rate {s:?}"))?;
    Ok((device, rate.0))
}

fn parse_device(dev: &str) -> Result<DeviceNumber> {
    if dev.starts_with('/') {
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(Path::new(dev)).with_context(|| format!("stat {dev}"))?;
        Ok(DeviceNumber::from_dev(meta.rdev()))
    } else {
        Ok(dev.parse()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ContainerConfig> {
        let cli = Cli::try_parse_from(args)?;
        match cli.command {
            Command::Run { container, .. } | Command::Spec { container } => container.to_config(),
            _ => bail!("not a container command"),
        }
    }

    #[test]
    fn flags_become_a_config() {
        let c = parse(&[
            "isolab-runtime",
            "run",
            "--id",
            "x1",
            "--cpus",
            "0.5",
            "--cpuset",
            "0",
            "--memory",
            "64M",
            "--pids",
            "20",
            "--io-read-bps",
            "8:0=1M",
            "--network",
            "host",
            "--cap-drop",
            "ALL",
            "/srv/root",
            "--",
            "sh",
            "-c",
            "true",
        ])
        .unwrap();
        assert_eq!(c.id, "x1");
        assert_eq!(c.hostname, "x1");
        assert_eq!(c.args, ["sh", "-c", "true"]);
        assert_eq!(c.limits.memory_max, Some(Bytes::mib(64)));
        assert_eq!(c.limits.io[0].read_bps, Some(1 << 20));
        assert_eq!(c.network, NetworkChoice::Host);
        assert!(c.security.capabilities.is_empty());
        assert!(c.security.no_new_privs);
        assert_eq!(c.cgroup_parent, PathBuf::from("isolab"));
        assert!(c.binds.is_empty());
    }

    #[test]
    fn binds_cgroup_parent_and_report() {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().to_str().unwrap();
        let ro = format!("{src}:/data:ro");
        let rw = format!("{src}:/out");
        let c = parse(&[
            "isolab-runtime",
            "run",
            "--id",
            "b1",
            "--bind",
            &ro,
            "--bind",
            &rw,
            "--cgroup-parent",
            "/isolab/lab-2",
            "/srv/root",
            "--",
            "true",
        ])
        .unwrap();
        assert_eq!(c.binds.len(), 2);
        assert!(c.binds[0].readonly && !c.binds[1].readonly);
        assert_eq!(c.binds[1].destination, PathBuf::from("/out"));
        assert_eq!(c.cgroup_parent, PathBuf::from("isolab/lab-2"));
        assert_eq!(c.cgroup_rel(), PathBuf::from("isolab/lab-2/rt-b1"));
        for bad in ["/no/such/dir:/x", "/tmp:relative", "/tmp"] {
            assert!(
                parse(&["isolab-runtime", "run", "--bind", bad, "/r", "--", "true"]).is_err(),
                "{bad}"
            );
        }
        assert!(parse(&[
            "isolab-runtime",
            "run",
            "--cgroup-parent",
            "a/../b",
            "/r",
            "--",
            "true"
        ])
        .is_err());
        let cli = Cli::try_parse_from([
            "isolab-runtime",
            "run",
            "--report",
            "/tmp/r.json",
            "/r",
            "--",
            "true",
        ])
        .unwrap();
        assert!(matches!(
            cli.command,
            Command::Run {
                report: Some(_),
                ..
            }
        ));
        assert!(Cli::try_parse_from([
            "isolab-runtime",
            "spec",
            "--report",
            "/tmp/r.json",
            "/r",
            "--",
            "true"
        ])
        .is_err());
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&[
            "isolab-runtime",
            "run",
            "--publish",
            "80:80",
            "/r",
            "--",
            "true"
        ])
        .is_err());
        assert!(parse(&["isolab-runtime", "run", "--upper", "/u", "/r", "--", "true"]).is_err());
        assert!(parse(&["isolab-runtime", "run", "--cpus", "0", "/r", "--", "true"]).is_err());
        assert!(parse_publish("80").is_err());
    }
}
