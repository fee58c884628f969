//! The real host: cgroup layout, cpus, platform and store, with the checks a user
//! needs before anything starts.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use isolab_cgroups::{Cgroup, Controller, Hierarchy};
use isolab_lab::environment::{self, EnvRoots, SystemTools};
use isolab_lab::platform::{Drivers, IsolabConfig, PlatformKind};
use isolab_lab::telemetry::SAMPLE_INTERVAL;
use isolab_lab::{ExperimentSpec, HostFacts, Supervisor, SupervisorConfig};
use isolab_store::Store;

/// Parent of every cgroup isolab creates.
pub const CGROUP_BASE: &str = "isolab";

pub fn facts() -> Result<HostFacts> {
    let cpus = environment::allowed_cpus().context("cannot read this process's cpu affinity")?;
    Ok(HostFacts {
        cpus,
        storage: Some(isolab_lab::spec::StorageSupport::probe(Path::new("/proc"))),
    })
}

pub fn hierarchy() -> Result<Hierarchy> {
    Hierarchy::detect().context("cannot find the cgroup file systems in /proc/self/mountinfo")
}

/// Whether this process runs as root (effective uid 0).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Where isolab's cgroups go: [`CGROUP_BASE`] at the root of the hierarchy as root;
/// without root, `isolab` below the caller's cgroup v2 subtree that systemd (or root)
/// delegated to it, the caller moved into a leaf beside it for as long as this lives.
#[derive(Debug)]
pub struct Cgroups {
    pub hierarchy: Hierarchy,
    /// The parent of every cgroup isolab creates, relative to the hierarchy's roots.
    pub base: PathBuf,
    claimed: Option<isolab_cgroups::Claimed>,
}

impl Cgroups {
    /// As root: the hierarchy and [`CGROUP_BASE`]. Without root: the caller's delegated
    /// cgroup, checked to pass on the controllers in `needed` (a clear error says what to
    /// run when it does not), and claimed when `claim` (a command that creates cgroups).
    pub fn find(needed: &[Controller], claim: bool) -> Result<Cgroups> {
        let hierarchy = hierarchy()?;
        if is_root() {
            return Ok(Cgroups {
                hierarchy,
                base: PathBuf::from(CGROUP_BASE),
                claimed: None,
            });
        }
        let delegated = isolab_cgroups::Delegated::of_this_process(&hierarchy)?;
        delegated.require(needed)?;
        let base = delegated.rel().join(CGROUP_BASE);
        let claimed = match claim {
            true => Some(delegated.claim(std::process::id(), &isolab_cgroups::HostAccess)?),
            false => None,
        };
        Ok(Cgroups {
            hierarchy,
            base,
            claimed,
        })
    }

    /// Whether isolab works in a delegated cgroup (without root).
    pub fn delegated(&self) -> bool {
        self.claimed.is_some()
    }

    /// Removes the empty cgroups left below the base and gives the delegated cgroup back
    /// as it was found (the caller back in it, no controllers passed on); a failure is a
    /// warning, since the run's results are stored.
    pub fn release(self) {
        let Some(claimed) = self.claimed else { return };
        if let Some(root) = self.hierarchy.unified() {
            let (dirs, _) = isolab_cgroups::subtree(&root.join(&self.base));
            for dir in dirs {
                let _ = std::fs::remove_dir(&dir);
            }
        }
        if let Err(e) = claimed.release() {
            eprintln!("warning: cannot give the delegated cgroup back as it was: {e}");
        }
    }
}

/// The controllers a spec's cells use on the host: cpu and memory for every run's counters
/// (throttling, memory peak), and what the shapes and placements limit.
pub fn needed_controllers(spec: &ExperimentSpec) -> Vec<Controller> {
    let mut needed = vec![Controller::Cpu, Controller::Memory];
    for c in &spec.cells {
        let kinds = isolab_lab::shape::limit_kinds(&c.shape, c.placement);
        for (asked, controller) in [
            (kinds.cpuset, Controller::Cpuset),
            (kinds.pids, Controller::Pids),
            (kinds.io, Controller::Io),
        ] {
            if asked && !needed.contains(&controller) {
                needed.push(controller);
            }
        }
    }
    needed
}

/// Every platform of this build: the host, and containers of `isolab-runtime`, creating
/// their cgroups below `cgroup_base`.
pub fn platform(
    hierarchy: Hierarchy,
    cgroup_base: &Path,
    probe: Option<isolab_lab::probe::ProbeConfig>,
) -> Drivers {
    let host = Supervisor::new(SupervisorConfig {
        hierarchy,
        proc_root: PathBuf::from("/proc"),
        cgroup_base: cgroup_base.to_owned(),
        sample_interval: SAMPLE_INTERVAL,
        probe,
    });
    Drivers::new(host, IsolabConfig::discover())
}

/// Checks that the engines and the image the spec's cells need are there, so that a
/// missing one is reported once, before any run, with what to do.
pub fn preflight_engines(spec: &ExperimentSpec) -> Result<()> {
    use isolab_engines::StorageLevel;
    let mut kinds: Vec<PlatformKind> = spec.cells.iter().map(|c| c.platform.kind).collect();
    kinds.sort_unstable();
    kinds.dedup();
    if !is_root() {
        let needs_root: Vec<String> = kinds
            .iter()
            .filter(|k| !k.runs_without_root())
            .map(ToString::to_string)
            .collect();
        if !needs_root.is_empty() {
            bail!(
                "platform(s) {} need root (their daemons, taps, bridges and loop devices); without root isolab runs the host and isolab platforms: run as root or drop them from the matrix",
                needs_root.join(", ")
            );
        }
        let bridged: Vec<&str> = spec
            .cells
            .iter()
            .filter(|c| c.platform.network == isolab_lab::platform::Network::Bridge)
            .map(|c| c.platform.name.as_str())
            .collect();
        if let Some(name) = bridged.first() {
            bail!(
                "platform {name} has network `bridge`, which needs root (a veth pair, a bridge and NAT on the host); without root use network `none` or `host`"
            );
        }
        let mut mounted: Vec<&str> = spec
            .cells
            .iter()
            .filter(|c| c.storage != StorageLevel::Bind)
            .map(|c| c.storage.as_str())
            .collect();
        mounted.sort_unstable();
        mounted.dedup();
        if !mounted.is_empty() {
            bail!(
                "storage level(s) {} mount a file system on the host (an overlay, a tmpfs, a volume or loop devices), which needs root; without root the working directory is a bind mount: drop `storage` from the matrix or run as root",
                mounted.join(", ")
            );
        }
    }
    let missing = isolab_lab::platform::unavailable(&kinds);
    if !missing.is_empty() {
        let lines: Vec<String> = missing
            .iter()
            .map(|(kind, why)| format!("platform {kind}: {why}"))
            .collect();
        bail!(
            "{} (`isolab list --platforms` shows what this host can run)",
            lines.join("; ")
        );
    }
    let missing = missing_host_tools(spec);
    if !missing.is_empty() {
        bail!("{}", missing.join("; "));
    }
    if kinds.iter().any(|k| k.needs_image()) && !spec.image.join("bin/sh").exists() {
        bail!(
            "the container platforms of this spec need the image {0}, which is missing or not a root filesystem: build it with `isolab image build bench {0}` (about a minute), or name another with `image = \"…\"` in [experiment]",
            spec.image.display()
        );
    }
    let missing = missing_image_tools(spec);
    if !missing.is_empty() {
        bail!("{}", missing.join("; "));
    }
    Ok(())
}

/// Directories of an image's root where its programs are looked for (Debian's default
/// `PATH`, which isolab-runtime also sets).
const IMAGE_PATH: [&str; 6] = [
    "usr/local/sbin",
    "usr/local/bin",
    "usr/sbin",
    "usr/bin",
    "sbin",
    "bin",
];

/// The programs of command workloads on container and VM platforms that the image lacks,
/// one line each: an image of one's own (or a directory) must bring its workloads' tools,
/// where isolab's recipe images get them from the workloads' packages.
fn missing_image_tools(spec: &ExperimentSpec) -> Vec<String> {
    // A program named by a path (often in the run's working directory) is not looked up.
    let in_image = |tool: &str| {
        tool.contains('/')
            || IMAGE_PATH
                .iter()
                .any(|dir| std::fs::symlink_metadata(spec.image.join(dir).join(tool)).is_ok())
    };
    let mut lines: Vec<String> = Vec::new();
    let in_containers = spec
        .cells
        .iter()
        .filter(|c| c.platform.kind.needs_image() && c.workload.stack.is_none());
    for c in in_containers {
        for tool in c.workload.tools.iter().filter(|t| !in_image(t)) {
            let line = format!(
                "workload {} on platform {} runs `{tool}`, which the image {} lacks (looked for in /{}): {}",
                c.workload.name,
                c.platform.name,
                spec.image_ref
                    .as_ref()
                    .map_or_else(|| spec.image.display().to_string(), ToString::to_string),
                IMAGE_PATH.join(", /"),
                if c.workload.packages.is_empty() {
                    "add it to the image".to_owned()
                } else {
                    format!("add the Debian package(s) {} to the image", c.workload.packages.join(", "))
                }
            );
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    lines
}

/// The programs of command workloads that run from this host's own file system (the
/// `host` platform) and are missing here, one line each naming the Debian package and the
/// setup tier that bring it, when the workload says which.
fn missing_host_tools(spec: &ExperimentSpec) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let on_host = spec
        .cells
        .iter()
        .filter(|c| !c.platform.kind.needs_image() && c.workload.stack.is_none());
    for c in on_host {
        let w = &c.workload;
        // A program named by a path (often in the run's working directory) is not looked up.
        let missing = |t: &&String| !t.contains('/') && isolab_tools::find_program(t).is_none();
        for tool in w.tools.iter().filter(missing) {
            let package = w
                .packages
                .iter()
                .find(|p| *p == tool)
                .or(match w.packages.as_slice() {
                    [only] => Some(only),
                    _ => None,
                });
            let why = match package {
                Some(package) => isolab_tools::NotInstalled {
                    program: tool.clone(),
                    package: package.clone(),
                }
                .to_string(),
                None => format!(
                    "`{tool}` is not installed on this host (not on PATH, nor in /usr/sbin, /sbin, /usr/bin, /bin)"
                ),
            };
            let line = format!("workload {} on platform {}: {why}", w.name, c.platform.name);
            if !lines.contains(&line) {
                lines.push(line);
            }
        }
    }
    lines
}

/// Creates and removes a probe cgroup, so that a missing privilege is reported once,
/// clearly, before any run.
pub fn preflight(cgroups: &Cgroups) -> Result<()> {
    let probe = cgroups
        .base
        .join(format!("preflight-pid{}", std::process::id()));
    let cgroup = Cgroup::create(&cgroups.hierarchy, &probe).with_context(|| match cgroups.delegated() {
        true => format!(
            "isolab cannot create cgroups below its delegated cgroup {} ({})",
            cgroups.base.parent().unwrap_or(&cgroups.base).display(),
            cgroups.hierarchy.describe()
        ),
        false => format!(
            "isolab cannot create cgroups ({}): run it as root (or with CAP_SYS_ADMIN and write access to the cgroup file system)",
            cgroups.hierarchy.describe()
        ),
    })?;
    cgroup.remove().context("cannot remove the probe cgroup")?;
    Ok(())
}

/// Whether `--db` names a server (`postgres://…`, or any other `SCHEME://`, which the store
/// refuses with a clear error) rather than a file.
pub fn is_url(db: &Path) -> bool {
    db.to_str().is_some_and(|s| s.contains("://"))
}

/// Whether `--db` is a PostgreSQL URL.
pub fn is_postgres_url(db: &Path) -> bool {
    db.to_str()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

/// Opens the store `--db` names, creating an SQLite file (and its directory) when missing.
pub fn open_store(db: &Path) -> Result<Store> {
    if is_url(db) {
        return Ok(Store::open_location(&db.to_string_lossy())?);
    }
    if let Some(parent) = db.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).with_context(|| {
            format!("cannot create directory {} for the store", parent.display())
        })?;
    }
    Ok(Store::open(db)?)
}

/// Opens an existing store only (read commands must not create an empty file).
pub fn existing_store(db: &Path) -> Result<Store> {
    if is_url(db) {
        return Ok(Store::open_location(&db.to_string_lossy())?);
    }
    if !db.exists() {
        bail!(
            "no store at {}: run an experiment first (`isolab run`) or pass --db PATH",
            db.display()
        );
    }
    Ok(Store::open(db)?)
}

/// The environment for a spec: host facts plus the versions of the tools its workloads use.
pub fn environment(
    spec: Option<&ExperimentSpec>,
    hierarchy: Option<&Hierarchy>,
) -> Vec<(String, String)> {
    let tools: Vec<String> = match spec {
        Some(s) => s
            .cells
            .iter()
            .flat_map(|c| c.workload.tools.clone())
            .collect(),
        None => isolab_workloads::catalog()
            .into_iter()
            .flat_map(|w| w.tools)
            .collect(),
    };
    let mut env = environment::capture(&EnvRoots::default(), hierarchy, &tools, &SystemTools);
    if let Some(spec) = spec.filter(|s| s.cells.iter().any(|c| c.platform.kind.needs_image())) {
        env.extend(image_environment(spec, &tools));
    }
    env
}

/// A recipe image's hash and packages, and the packages whose versions in the image differ
/// from this host's now (`image.host_differs.PACKAGE` = "image V1, host V2").
fn recipe_environment(m: &isolab_image::Manifest) -> Vec<(String, String)> {
    let mut env = Vec::new();
    if let Some(r) = &m.recipe {
        env.push(("image.recipe.hash".into(), r.hash.clone()));
        let packages: Vec<&str> = r.recipe.packages().iter().map(String::as_str).collect();
        env.push(("image.recipe.packages".into(), packages.join(",")));
    }
    let host = isolab_image::installed_packages(std::path::Path::new("/var/lib/dpkg/status"))
        .unwrap_or_default();
    for d in isolab_image::version_differences(&m.sources, &host) {
        env.push((
            format!("image.host_differs.{}", d.package),
            format!("image {}, host {}", d.image, d.host),
        ));
    }
    env
}

/// What container platforms run on: the image (its manifest's digest, kind, build
/// time, and the versions of the spec's tools inside it) and the runtime's version.
fn image_environment(spec: &ExperimentSpec, tools: &[String]) -> Vec<(String, String)> {
    let mut env = vec![("image.path".to_owned(), spec.image.display().to_string())];
    let manifest_file = spec.image.join(isolab_image::MANIFEST_FILE);
    match isolab_image::Manifest::load(&spec.image) {
        Ok(m) => {
            env.push(("image.kind".into(), format!("{:?}", m.kind).to_lowercase()));
            env.push(("image.created".into(), m.created.clone()));
            if let Some(suite) = &m.suite {
                env.push(("image.suite".into(), suite.clone()));
            }
            for tool in tools {
                if let Some(p) = m.sources.iter().find(|p| &p.name == tool) {
                    env.push((format!("image.tool.{tool}"), p.version.clone()));
                }
            }
            env.extend(recipe_environment(&m));
            if let Some(r) = &m.imported {
                env.push(("image.reference".into(), r.reference.clone()));
                env.push(("image.digest".into(), r.digest.clone()));
                env.push(("image.manifest_digest".into(), r.manifest_digest.clone()));
                env.push(("image.layers".into(), r.layers.to_string()));
                env.push(("image.command".into(), r.config.command().join(" ")));
                env.push(("image.env".into(), r.config.env.join(" ")));
            }
            if let Ok(digest) = isolab_image::sha256_file(&manifest_file) {
                env.push(("image.manifest_sha256".into(), digest));
            }
        }
        Err(e) => env.push(("image.manifest".into(), format!("unavailable: {e}"))),
    }
    let runtime = IsolabConfig::discover().program;
    let version = std::process::Command::new(&runtime)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    env.push((
        "runtime.isolab-runtime".into(),
        version.unwrap_or_else(|| format!("not found ({})", runtime.display())),
    ));
    env
}
