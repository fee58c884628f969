//! The container's cgroup for an engine that does not create one itself (nspawn
//! without systemd): [`create_limited`] creates it below the lab's parent with the
//! request's limits, in the hierarchies `isolab_cgroups` manages, through the
//! [`Host`], so that the lab finds it and reads the limits back
//! ([`crate::find_container_cgroup`]). The engines' `run_state::Cleanup` removes it.

use std::path::Path;
use std::sync::Arc;

use isolab_cgroups::{Cgroup, Hierarchy, Limits, MountEntry};

use crate::host::{Host, HostCalls};
use crate::EngineError;

/// Creates the cgroup `rel` (relative to every hierarchy's root) in the cgroup
/// hierarchies of `mounts` (each v1 controller isolab uses and the hybrid cgroup2
/// directory, or the v2 directory; [`Cgroup::create`]: a new v1 cpuset level gets its
/// parent's cpus and memory nodes) and applies `limits` to it. On failure nothing is
/// left; the returned handle leaves the cgroup in place when dropped.
pub fn create_limited(
    engine: &'static str,
    host: &Arc<dyn Host>,
    mounts: &[MountEntry],
    rel: &Path,
    limits: &Limits,
) -> Result<Cgroup, EngineError> {
    let error = |action: &'static str| {
        move |source: isolab_cgroups::Error| EngineError::Cgroup {
            engine,
            action,
            source,
        }
    };
    let hierarchy = Hierarchy::from_mounts(mounts)
        .map_err(error("find the cgroup hierarchies"))?
        .with_syscalls(Arc::new(HostCalls(Arc::clone(host))));
    let cgroup = Cgroup::create(&hierarchy, rel).map_err(error("create the container's cgroup"))?;
    if let Err(e) = cgroup.apply(limits) {
        // The limits' error matters more than a failed rollback.
        let _ = cgroup.remove();
        return Err(error("apply the limits to the container's cgroup")(e));
    }
    Ok(cgroup)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::{FakeHost, FakeSystem};
    use crate::mounts::mount_table;
    use isolab_cgroups::{CpuQuota, IdSet};

    fn read(path: std::path::PathBuf) -> String {
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }

    #[test]
    fn the_cgroup_is_created_below_the_parent_with_the_limits() {
        let dir = tempfile::tempdir().unwrap();
        let sys = FakeSystem::v1(dir.path(), "");
        sys.lab_parent("isolab/t1/c0-r1");
        let mounts = mount_table("nspawn", &sys.mountinfo).unwrap();
        let host: Arc<dyn Host> = Arc::new(FakeHost::default());
        let rel = Path::new("isolab/t1/c0-r1/isolab-t1-c0-r1");
        let limits = Limits {
            cpu: Some(CpuQuota::from_cpus(1.0, CpuQuota::DEFAULT_PERIOD).unwrap()),
            cpuset: Some("1".parse::<IdSet>().unwrap()),
            pids_max: Some(64),
            ..Limits::default()
        };
        // A v1 cpuset level starts empty: the parent's cpus and memory nodes are copied.
        let err = create_limited("nspawn", &host, &mounts, rel, &limits).unwrap_err();
        assert!(err.to_string().contains("cpuset.cpus"), "{err}");
        assert!(!sys.cg("cpu").join(rel).exists(), "rolled back");
        for (file, value) in [("cpuset.cpus", "0-1\n"), ("cpuset.mems", "0\n")] {
            std::fs::write(sys.cg("cpuset/isolab/t1/c0-r1").join(file), value).unwrap();
        }
        let cgroup = create_limited("nspawn", &host, &mounts, rel, &limits).unwrap();
        assert_eq!(
            read(sys.cg("cpu").join(rel).join("cpu.cfs_quota_us")),
            "100000"
        );
        assert_eq!(read(sys.cg("cpuset").join(rel).join("cpuset.cpus")), "1");
        assert_eq!(read(sys.cg("cpuset").join(rel).join("cpuset.mems")), "0");
        assert_eq!(read(sys.cg("pids").join(rel).join("pids.max")), "64");
        assert!(sys.cg("unified").join(rel).is_dir());
        // Only the hierarchies isolab uses: not `devices` or `name=systemd`.
        assert!(!sys.cg("devices").join(rel).exists());
        assert!(cgroup
            .paths()
            .contains(&sys.cg("memory").join(rel).as_path()));
        let again = create_limited("nspawn", &host, &mounts, rel, &limits).unwrap_err();
        assert!(matches!(again, EngineError::Cgroup { .. }), "{again}");
    }
}
