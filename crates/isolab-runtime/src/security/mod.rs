//! Security defaults of the container runtime, with Docker's semantics.
//!
//! A [`SecurityConfig`] says what the container keeps: capabilities (Docker's 14 by default,
//! [`default_capabilities`]), `no_new_privs`, a seccomp profile (Docker's default allowlist,
//! [`seccomp::DEFAULT_PROFILE`], specialised to the kept capabilities as Docker does, or an
//! OCI bundle's own profile, [`SeccompChoice::Oci`]), the paths to mask ([`MASKED_PATHS`]) and to make read-only ([`READONLY_PATHS`]) and the device
//! allowlist ([`default_devices`]).
//!
//! The work is split in two so that the forked container process only makes a few system
//! calls before `execve`:
//! - [`prepare`] (in the parent, before forking) resolves the capability masks, checks that
//!   this process has the capabilities to keep, and compiles the seccomp profile to BPF with
//!   libseccomp (Docker's default, or an OCI bundle's own profile, [`SeccompChoice::Oci`]);
//! - [`Prepared::apply`] (in the container process, right before `execve`) drops the bounding
//!   set, clears the ambient set, sets effective = permitted = the kept set with an empty
//!   inheritable set (Docker since CVE-2022-24769), sets `PR_SET_NO_NEW_PRIVS` when asked and
//!   installs the seccomp filter. It does not allocate.
//!
//! Seccomp goes last when `no_new_privs` is set. When it is not (Docker's default), the kernel
//! only accepts a filter from a thread with `CAP_SYS_ADMIN`, so, as runc does, the filter is
//! installed *before* the capabilities are reduced; the profile allows `capset` and `prctl`, so
//! the remaining steps still work.
//!
//! Masked and read-only paths are lists only: the mount code (`/dev/null` or an empty
//! read-only tmpfs over masked paths, read-only bind mounts over the others) lives with the
//! root filesystem. The same defaults are available for an OCI `config.json`
//! ([`SecurityConfig::oci_linux`], [`oci_linux_seccomp`], [`oci_capabilities`]) so that runc
//! and crun run with the same profile.

pub mod caps;
pub mod devices;
mod error;
pub mod seccomp;
pub mod sys;

use serde_json::{json, Value};

pub use caps::{default_capabilities, Capability, CapabilitySet};
pub use devices::{default_devices, write_v1_rules, DeviceAccess, DeviceKind, DeviceRule};
pub use error::SecurityError;
pub use seccomp::{Arch, CompiledFilter, ResolvedProfile, SockFilter};
pub use sys::{LinuxSecurity, SecuritySyscalls};

/// Docker's masked paths (moby `oci/defaults.go`): hidden inside the container.
pub const MASKED_PATHS: &[&str] = &[
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
];

/// Docker's read-only paths (moby `oci/defaults.go`): remounted read-only in the container.
pub const READONLY_PATHS: &[&str] = &[
    "/proc/bus",
    "/proc/fs",
    "/proc/irq",
    "/proc/sys",
    "/proc/sysrq-trigger",
];

/// Which seccomp profile the container gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeccompChoice {
    /// Docker's default profile, specialised to the kept capabilities.
    Default,
    /// No seccomp filter (`--security-opt seccomp=unconfined`).
    Unconfined,
    /// An OCI `linux.seccomp` section as given (an engine's own profile in a bundle's
    /// `config.json`), with runc's semantics; see [`seccomp::oci`] for what is supported.
    Oci(Box<oci_spec::runtime::LinuxSeccomp>),
}

/// The security settings of one container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityConfig {
    /// Capabilities the container keeps (bounding, permitted and effective sets).
    pub capabilities: CapabilitySet,
    /// Set `PR_SET_NO_NEW_PRIVS` (Docker: `--security-opt no-new-privileges`, off by default).
    pub no_new_privs: bool,
    /// The seccomp profile.
    pub seccomp: SeccompChoice,
    /// Paths to mask (see [`MASKED_PATHS`]).
    pub masked_paths: Vec<String>,
    /// Paths to make read-only (see [`READONLY_PATHS`]).
    pub readonly_paths: Vec<String>,
    /// Device rules applied after "deny all" (see [`default_devices`]).
    pub devices: Vec<DeviceRule>,
    /// The other capability sets, when they differ from `capabilities` (an OCI
    /// bundle's `process.capabilities`); `None` = effective = permitted =
    /// `capabilities`, inheritable and ambient empty.
    pub sets: Option<CapabilitySets>,
}

/// The capability sets of a process besides the bounding set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CapabilitySets {
    /// Effective.
    pub effective: CapabilitySet,
    /// Permitted.
    pub permitted: CapabilitySet,
    /// Inheritable.
    pub inheritable: CapabilitySet,
    /// Ambient (each also needs to be permitted and inheritable).
    pub ambient: CapabilitySet,
}

impl Default for SecurityConfig {
    /// Docker's defaults: 14 capabilities, `no_new_privs` off, the default seccomp profile,
    /// Docker's masked and read-only paths and device allowlist.
    fn default() -> Self {
        SecurityConfig {
            capabilities: CapabilitySet::docker_default(),
            no_new_privs: false,
            seccomp: SeccompChoice::Default,
            masked_paths: MASKED_PATHS.iter().map(|p| p.to_string()).collect(),
            readonly_paths: READONLY_PATHS.iter().map(|p| p.to_string()).collect(),
            devices: default_devices(),
            sets: None,
        }
    }
}

impl SecurityConfig {
    /// `--privileged`: every capability, no seccomp, nothing masked or read-only, every
    /// device. [`Prepared::apply`] then leaves the capabilities of the process as they are.
    pub fn privileged() -> Self {
        SecurityConfig {
            capabilities: CapabilitySet::all(),
            no_new_privs: false,
            seccomp: SeccompChoice::Unconfined,
            masked_paths: Vec::new(),
            readonly_paths: Vec::new(),
            devices: vec![DeviceRule::allow_all()],
            sets: None,
        }
    }

    /// `--cap-add`: adds capabilities by name (`NET_ADMIN`, `CAP_NET_ADMIN`, `ALL`).
    pub fn with_cap_add<I, S>(mut self, names: I) -> Result<Self, SecurityError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.capabilities = self.capabilities.union(CapabilitySet::from_names(names)?);
        Ok(self)
    }

    /// `--cap-drop`: removes capabilities by name (`ALL` removes every one; later
    /// [`with_cap_add`](Self::with_cap_add) calls add back, as with Docker's
    /// `--cap-drop ALL --cap-add X`).
    pub fn with_cap_drop<I, S>(mut self, names: I) -> Result<Self, SecurityError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        self.capabilities = self
            .capabilities
            .difference(CapabilitySet::from_names(names)?);
        Ok(self)
    }

    /// Docker's default profile as this configuration gets it on `arch` (`None` when
    /// unconfined or when the profile is an OCI section, [`SeccompChoice::Oci`]).
    pub fn seccomp_profile(&self, arch: Arch) -> Option<ResolvedProfile> {
        match self.seccomp {
            SeccompChoice::Default => {
                Some(ResolvedProfile::docker_default(self.capabilities, arch))
            }
            SeccompChoice::Unconfined | SeccompChoice::Oci(_) => None,
        }
    }

    /// OCI `process.capabilities`: bounding, effective and permitted = the kept set;
    /// inheritable and ambient empty (Docker since CVE-2022-24769).
    pub fn oci_capabilities(&self) -> Value {
        let names = self.capabilities.names();
        json!({"bounding": names, "effective": names, "permitted": names})
    }

    /// The same, as an `oci-spec` value.
    pub fn oci_capabilities_spec(
        &self,
    ) -> Result<oci_spec::runtime::LinuxCapabilities, SecurityError> {
        serde_json::from_value(self.oci_capabilities()).map_err(|source| {
            SecurityError::OciConversion {
                what: "capabilities",
                source,
            }
        })
    }

    /// OCI `linux.seccomp` (`None` when unconfined): Docker's default profile for the native
    /// architecture, or an OCI section as given.
    pub fn oci_seccomp(&self) -> Result<Option<Value>, SecurityError> {
        match &self.seccomp {
            SeccompChoice::Default => Ok(self.seccomp_profile(Arch::native()?).map(|p| p.to_oci())),
            SeccompChoice::Unconfined => Ok(None),
            SeccompChoice::Oci(profile) => {
                serde_json::to_value(profile).map(Some).map_err(|source| {
                    SecurityError::OciConversion {
                        what: "seccomp",
                        source,
                    }
                })
            }
        }
    }

    /// The same, as an `oci-spec` value.
    pub fn oci_seccomp_spec(
        &self,
    ) -> Result<Option<oci_spec::runtime::LinuxSeccomp>, SecurityError> {
        self.oci_seccomp()?
            .map(|v| {
                serde_json::from_value(v).map_err(|source| SecurityError::OciConversion {
                    what: "seccomp",
                    source,
                })
            })
            .transpose()
    }

    /// OCI `linux.resources.devices`: "deny all", then [`SecurityConfig::devices`].
    pub fn oci_devices(&self) -> Value {
        devices::oci_devices(&self.devices)
    }

    /// The security part of OCI `linux`: `maskedPaths`, `readonlyPaths`, `seccomp` (absent
    /// when unconfined) and `resources.devices`, to merge into a `config.json`. The
    /// capabilities and `noNewPrivileges` belong to `process` ([`Self::oci_capabilities`],
    /// [`SecurityConfig::no_new_privs`]).
    pub fn oci_linux(&self) -> Result<Value, SecurityError> {
        let mut linux = json!({
            "maskedPaths": self.masked_paths,
            "readonlyPaths": self.readonly_paths,
            "resources": {"devices": self.oci_devices()},
        });
        if let Some(seccomp) = self.oci_seccomp()? {
            linux["seccomp"] = seccomp;
        }
        Ok(linux)
    }
}

/// Docker's default seccomp profile as OCI `linux.seccomp`, for the native architecture.
pub fn oci_linux_seccomp() -> Result<Value, SecurityError> {
    Ok(ResolvedProfile::docker_default(CapabilitySet::docker_default(), Arch::native()?).to_oci())
}

/// Docker's default capabilities as OCI `process.capabilities`.
pub fn oci_capabilities() -> Value {
    SecurityConfig::default().oci_capabilities()
}

/// What [`Prepared::apply`] does to the capabilities.
#[derive(Debug, Clone, PartialEq, Eq)]
enum CapsPlan {
    /// Leave them as they are (privileged, or every capability kept).
    Keep,
    /// Drop these from the bounding set, then set effective = permitted = `keep` (or
    /// the sets of `sets`, raising its ambient capabilities).
    Restrict {
        keep: CapabilitySet,
        drop: Vec<u8>,
        sets: Option<CapabilitySets>,
    },
}

/// The settings resolved and compiled, ready for [`Prepared::apply`] in the container process.
#[derive(Debug, Clone)]
pub struct Prepared {
    caps: CapsPlan,
    no_new_privs: bool,
    filters: Vec<CompiledFilter>,
}

/// Resolves `cfg` against this process's capabilities and compiles its seccomp filter. Call it
/// before forking the container process.
pub fn prepare(cfg: &SecurityConfig) -> Result<Prepared, SecurityError> {
    prepare_with(cfg, &LinuxSecurity)
}

/// Which capabilities the container process will hold before it drops any: this
/// process's (a container in the caller's user namespace), or, in a new user namespace,
/// every one (the kernel's `set_cred_user_ns` gives the namespace's first process the
/// full permitted, effective and bounding sets, whatever the caller held): how an
/// unprivileged user's container keeps Docker's default list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Held {
    /// The container stays in this process's user namespace.
    Inherited,
    /// The container gets a new user namespace.
    NewUserNamespace,
}

/// [`prepare`], with the compiled seccomp programs kept in (and read back from) the
/// cache directory `cache` ([`seccomp::cache`]).
pub fn prepare_cached(
    cfg: &SecurityConfig,
    cache: &std::path::Path,
    held: Held,
) -> Result<Prepared, SecurityError> {
    prepare_inner(cfg, &LinuxSecurity, Some(cache), held)
}

/// What identifies, in the seccomp cache, the programs of a rule table whose
/// [`seccomp::table_digest`] is `table` for a container keeping `caps`.
fn default_identity(table: u64, caps: CapabilitySet) -> Vec<u8> {
    format!(
        "docker-default capabilities={:x} rules={table:016x}",
        caps.mask()
    )
    .into_bytes()
}

/// The seccomp programs of `cfg`: from the cache when it holds them, else compiled
/// (and stored there).
fn compile_filters(
    cfg: &SecurityConfig,
    cache: Option<&std::path::Path>,
) -> Result<Vec<CompiledFilter>, SecurityError> {
    let identity = match &cfg.seccomp {
        SeccompChoice::Unconfined => return Ok(Vec::new()),
        SeccompChoice::Default => {
            default_identity(seccomp::DEFAULT_PROFILE_DIGEST, cfg.capabilities)
        }
        SeccompChoice::Oci(profile) => {
            let mut v = b"oci ".to_vec();
            v.extend(serde_json::to_vec(profile).unwrap_or_default());
            v
        }
    };
    let key = cache.map(|_| seccomp::cache::key(&identity));
    if let (Some(dir), Some(key)) = (cache, &key) {
        if let Some(filters) = seccomp::cache::load(dir, key) {
            return Ok(filters);
        }
    }
    let filters = match &cfg.seccomp {
        SeccompChoice::Default => {
            ResolvedProfile::docker_default(cfg.capabilities, Arch::native()?)
                .compile()?
                .into_iter()
                .map(|program| CompiledFilter { program, flags: 0 })
                .collect()
        }
        SeccompChoice::Oci(profile) => vec![seccomp::oci::compile(profile)?],
        SeccompChoice::Unconfined => Vec::new(),
    };
    if let (Some(dir), Some(key)) = (cache, &key) {
        seccomp::cache::store(dir, key, &filters);
    }
    Ok(filters)
}

/// [`prepare`] with the capability reads going through `sys`.
pub fn prepare_with<S: SecuritySyscalls>(
    cfg: &SecurityConfig,
    sys: &S,
) -> Result<Prepared, SecurityError> {
    prepare_inner(cfg, sys, None, Held::Inherited)
}

/// [`prepare_with`] for a container that gets a new user namespace ([`Held`]).
pub fn prepare_in_new_user_namespace<S: SecuritySyscalls>(
    cfg: &SecurityConfig,
    sys: &S,
) -> Result<Prepared, SecurityError> {
    prepare_inner(cfg, sys, None, Held::NewUserNamespace)
}

fn prepare_inner<S: SecuritySyscalls>(
    cfg: &SecurityConfig,
    sys: &S,
    cache: Option<&std::path::Path>,
    held: Held,
) -> Result<Prepared, SecurityError> {
    let caps = if cfg.capabilities == CapabilitySet::all() && cfg.sets.is_none() {
        CapsPlan::Keep
    } else {
        let read = |what, r: std::io::Result<CapabilitySet>| {
            r.map_err(|source| SecurityError::ReadCapabilities { what, source })
        };
        let (bounding, permitted) = match held {
            Held::Inherited => (
                read("prctl(PR_CAPBSET_READ)", sys.read_bounding())?,
                read("capget", sys.read_permitted())?,
            ),
            Held::NewUserNamespace => (CapabilitySet::all(), CapabilitySet::all()),
        };
        let wanted = match &cfg.sets {
            Some(sets) => cfg
                .capabilities
                .union(sets.effective)
                .union(sets.permitted)
                .union(sets.ambient),
            None => cfg.capabilities,
        };
        let missing = wanted.difference(bounding.intersection(permitted));
        if !missing.is_empty() {
            return Err(SecurityError::CapabilitiesUnavailable {
                missing: missing.to_string(),
            });
        }
        CapsPlan::Restrict {
            keep: cfg.capabilities,
            drop: bounding
                .difference(cfg.capabilities)
                .iter()
                .map(Capability::number)
                .collect(),
            sets: cfg.sets,
        }
    };
    let filters = compile_filters(cfg, cache)?;
    Ok(Prepared {
        caps,
        no_new_privs: cfg.no_new_privs,
        filters,
    })
}

impl Prepared {
    /// The capabilities the process will keep (`None`: left as they are).
    pub fn kept_capabilities(&self) -> Option<CapabilitySet> {
        match &self.caps {
            CapsPlan::Keep => None,
            CapsPlan::Restrict { keep, .. } => Some(*keep),
        }
    }

    /// How many seccomp programs [`apply`](Self::apply) installs (0 when unconfined).
    pub fn seccomp_programs(&self) -> usize {
        self.filters.len()
    }

    /// Applies the settings to the calling thread. Call it in the container process, after
    /// any uid/gid change and right before `execve`; the process should be single-threaded
    /// (the filter is installed without `SECCOMP_FILTER_FLAG_TSYNC` unless an OCI profile
    /// asks for it).
    pub fn apply(&self) -> Result<(), SecurityError> {
        self.apply_with(&mut LinuxSecurity)
    }

    /// [`apply`](Self::apply) through `sys`.
    pub fn apply_with<S: SecuritySyscalls>(&self, sys: &mut S) -> Result<(), SecurityError> {
        let fail = |step, hint| move |source| SecurityError::Apply { step, hint, source };
        if let CapsPlan::Restrict { drop, .. } = &self.caps {
            for &cap in drop {
                sys.drop_bounding(cap).map_err(fail(
                    "prctl(PR_CAPBSET_DROP)",
                    " (dropping from the bounding set needs CAP_SETPCAP)",
                ))?;
            }
            sys.clear_ambient()
                .map_err(fail("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", ""))?;
        }
        if !self.no_new_privs {
            self.install_filters(sys)?;
        }
        match &self.caps {
            CapsPlan::Restrict {
                sets: Some(sets), ..
            } => {
                sys.set_caps(sets.effective, sets.permitted, sets.inheritable)
                    .map_err(fail("capset", ""))?;
                for cap in sets.ambient.iter() {
                    sys.raise_ambient(cap.number()).map_err(fail(
                        "prctl(PR_CAP_AMBIENT_RAISE)",
                        " (an ambient capability must also be permitted and inheritable)",
                    ))?;
                }
            }
            CapsPlan::Restrict { keep, .. } => {
                sys.set_caps(*keep, *keep, CapabilitySet::empty())
                    .map_err(fail("capset", ""))?;
            }
            CapsPlan::Keep => {}
        }
        if self.no_new_privs {
            sys.set_no_new_privs()
                .map_err(fail("prctl(PR_SET_NO_NEW_PRIVS)", ""))?;
            self.install_filters(sys)?;
        }
        Ok(())
    }

    fn install_filters<S: SecuritySyscalls>(&self, sys: &mut S) -> Result<(), SecurityError> {
        for filter in &self.filters {
            sys.install_filter(&filter.program, filter.flags)
                .map_err(|source| SecurityError::Apply {
                    step: "seccomp(SECCOMP_SET_MODE_FILTER)",
                    hint: " (without no_new_privs, installing a filter needs CAP_SYS_ADMIN: \
                           run as root or set no_new_privs)",
                    source,
                })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
