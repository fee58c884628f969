//! The container's cgroups (step 1 of the module documentation of `container`): its
//! cgroup, created, limited and read back; its v1 devices cgroup (the device
//! allowlist); its counters after it exited; the limits as a hierarchy takes them.

use std::borrow::Cow;
use std::path::Path;

use isolab_cgroups::{Bytes, Cgroup, CloneTarget, Limits, Version};

use crate::config::ContainerConfig;
use crate::error::RuntimeError;

use super::{child, devices, Instance};

impl Instance {
    /// Creates the container's cgroup, applies the limits and reads them back
    /// (refusing a difference), and opens what the child joins it by.
    pub(super) fn create_cgroup(
        &mut self,
        config: &ContainerConfig,
        rel: &Path,
    ) -> Result<CloneTarget, RuntimeError> {
        let cgroup_err = |op: &'static str| {
            let rel = rel.to_owned();
            move |source| RuntimeError::Cgroup { rel, op, source }
        };
        let cgroup = Cgroup::create(&self.hierarchy, rel).map_err(cgroup_err("create"))?;
        let cgroup = self.cgroup.insert(cgroup);
        if !config.limits.is_empty() {
            let wanted = for_hierarchy(&config.limits, self.hierarchy.version())?;
            cgroup
                .apply(&wanted)
                .map_err(cgroup_err("apply the limits"))?;
            let mut got = cgroup
                .read_limits()
                .map_err(cgroup_err("read the limits back"))?;
            // What the unified files hold now, in the kernel's formatting.
            got.unified = cgroup
                .read_unified(config.limits.unified.keys().map(String::as_str))
                .map_err(cgroup_err("read the unified files back"))?;
            if !wanted.differences(&got).is_empty() {
                return Err(RuntimeError::LimitsMismatch {
                    rel: rel.to_owned(),
                    wanted: format!("{wanted:?}"),
                    got: format!("{got:?}"),
                });
            }
            self.limits = Some(got);
        }
        let target = cgroup
            .clone_target()
            .map_err(cgroup_err("open the task lists"))?;
        if target.v1.len() > child::MAX_CGROUP_FILES {
            return Err(RuntimeError::InvalidConfig {
                what: "v1 cgroup hierarchies",
                value: target.v1.len().to_string(),
                expected: "at most 16",
            });
        }
        Ok(target)
    }

    /// The device allowlist: a v1 devices cgroup next to the container's cgroup, or a
    /// note saying why it is not enforced.
    pub(super) fn setup_devices(
        &mut self,
        config: &ContainerConfig,
        rel: &Path,
    ) -> Result<(), RuntimeError> {
        match (&self.state.devices_mount, self.hierarchy.version()) {
            (Some(mount), _) => {
                let cgroup = devices::DevicesCgroup::create(mount, rel, &config.security.devices)?;
                self.devices = Some(cgroup);
            }
            (None, Version::V2) => self.notes.push(
                "device allowlist not enforced: on cgroup v2 it needs a BPF_CGROUP_DEVICE \
                 program, which isolab-runtime does not load yet (the container's /dev holds \
                 only the allowed devices, but CAP_MKNOD lets it create others; drop it with \
                 --cap-drop MKNOD)"
                    .to_owned(),
            ),
            (None, Version::V1) => self.notes.push(
                "device allowlist not enforced: no cgroup v1 devices hierarchy is mounted \
                 next to the other controllers"
                    .to_owned(),
            ),
        }
        Ok(())
    }

    /// Reads the cgroup's counters (and the limits, when none were asked for) after
    /// the container exited; failures become notes.
    pub(super) fn read_counters(&mut self) {
        let Some(cgroup) = self.cgroup.as_ref() else {
            return;
        };
        let rel = self.state.cgroup.display().to_string();
        match cgroup.stats() {
            Ok(stats) => self.stats = Some(stats),
            Err(e) => self
                .notes
                .push(format!("statistics of cgroup {rel} not read: {e}")),
        }
        if self.limits.is_none() {
            match cgroup.read_limits() {
                Ok(limits) => self.limits = Some(limits),
                Err(e) => self
                    .notes
                    .push(format!("limits of cgroup {rel} not read back: {e}")),
            }
        }
    }
}

/// The whole-disk block device that holds `path` (for io throttling of a root
/// filesystem): `stat` gives the file system's device; a partition is mapped to its
/// disk through `/sys/dev/block`.
pub fn backing_device(path: &Path) -> Result<isolab_cgroups::DeviceNumber, RuntimeError> {
    let disk =
        isolab_cgroups::DeviceNumber::backing_disk(path, Path::new("/sys")).map_err(|source| {
            RuntimeError::Host {
                op: "stat",
                path: path.to_owned(),
                source,
            }
        })?;
    disk.ok_or_else(|| RuntimeError::InvalidConfig {
        what: "io throttle device",
        value: path.display().to_string(),
        expected: "a path on a block device (tmpfs and overlay have none; pass MAJOR:MINOR)",
    })
}

/// The limits to write on a hierarchy of `version`. The runtime's interface (`--memory-swap`,
/// OCI's `memory.swap`) gives the swap limit as memory **plus** swap, as cgroup v1's memsw;
/// v2's `memory.swap.max` is swap alone, so there it is the difference (runc and crun convert
/// the same way), and a swap limit without a memory limit, or below it, cannot be expressed.
/// Borrowed as given unless there is something to convert (the start path copies nothing).
pub(super) fn for_hierarchy(
    limits: &Limits,
    version: Version,
) -> Result<Cow<'_, Limits>, RuntimeError> {
    let Some(memsw) = limits.memory_swap_max.filter(|_| version == Version::V2) else {
        return Ok(Cow::Borrowed(limits));
    };
    let memory = limits
        .memory_max
        .filter(|m| m.0 <= memsw.0)
        .ok_or_else(|| RuntimeError::InvalidConfig {
            what: "memory plus swap limit",
            value: format!("{memsw} with memory limit {:?}", limits.memory_max),
            expected: "a memory limit too, at most the memory plus swap limit",
        })?;
    let mut out = limits.clone();
    out.memory_swap_max = Some(Bytes(memsw.0 - memory.0));
    Ok(Cow::Owned(out))
}
