//! [`Hierarchy`]: where the cgroup controllers are mounted, v1, v2 or hybrid.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::controller::Controller;
use crate::error::Error;
use crate::mountinfo::{mountinfo_path, parse_mountinfo, read_mountinfo, Malformed, MountEntry};
use crate::syscalls::{RealSyscalls, Syscalls};

/// The cgroup interface version of a [`Hierarchy`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Version {
    /// One hierarchy per controller (or group of co-mounted controllers).
    V1,
    /// The unified hierarchy.
    V2,
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Layout {
    V1 {
        /// Mount point of each mounted controller; co-mounted ones share a path.
        mounts: BTreeMap<Controller, PathBuf>,
        /// A cgroup2 mount next to them (hybrid mode), used for PSI and `cgroup.kill`.
        unified: Option<PathBuf>,
    },
    V2 {
        root: PathBuf,
    },
}

/// The role of one mount point in a cgroup's set of directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MountRole {
    /// A v1 hierarchy holding these controllers.
    V1(Vec<Controller>),
    /// The cgroup2 mount of a hybrid layout.
    Unified,
    /// The cgroup2 mount of a pure v2 layout.
    V2,
}

/// Where the controllers live: the cgroup mount points, always given explicitly so
/// that tests can point a [`Hierarchy`] at a fake cgroupfs in a temporary directory.
#[derive(Clone)]
pub struct Hierarchy {
    pub(crate) layout: Layout,
    pub(crate) sys: Arc<dyn Syscalls>,
}

impl fmt::Debug for Hierarchy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hierarchy")
            .field("layout", &self.layout)
            .field("sys", &self.sys)
            .finish()
    }
}

const PROC: &str = "/proc";

impl Hierarchy {
    /// Finds the cgroup mounts of this process's mount namespace in
    /// `/proc/self/mountinfo`.
    pub fn detect() -> Result<Hierarchy, Error> {
        let path = mountinfo_path(Path::new(PROC));
        Hierarchy::from_mounts(&read_mountinfo(&path, Malformed::Fail)?)
    }

    /// Finds the cgroup mounts in the text of a `mountinfo` file (errors name it
    /// `/proc/self/mountinfo`); see [`Hierarchy::from_mounts`].
    pub fn from_mountinfo(text: &str) -> Result<Hierarchy, Error> {
        let path = mountinfo_path(Path::new(PROC));
        Hierarchy::from_mounts(&parse_mountinfo(&path, text, Malformed::Fail)?)
    }

    /// Finds the cgroup mounts in a parsed mount table ([`crate::read_mountinfo`]).
    ///
    /// A v1 controller mounted on its own (`cpu`) or co-mounted (`cpu,cpuacct`) maps
    /// to its mount point; the first mount of a controller wins. When any of the
    /// controllers of interest but freezer and hugetlb is mounted as v1 the layout is
    /// v1, and a cgroup2
    /// mount next to them (systemd's hybrid mode, usually `/sys/fs/cgroup/unified`,
    /// without controllers) is kept for PSI and `cgroup.kill`. Otherwise a cgroup2
    /// mount makes a pure v2 layout.
    pub fn from_mounts(entries: &[MountEntry]) -> Result<Hierarchy, Error> {
        let mut mounts = BTreeMap::new();
        let mut cgroup2 = None;
        for entry in entries {
            match entry.fstype.as_str() {
                "cgroup" => {
                    for option in entry.super_options.split(',') {
                        if let Some(c) = Controller::from_v1_option(option) {
                            mounts.entry(c).or_insert_with(|| entry.mount_point.clone());
                        }
                    }
                }
                "cgroup2" if cgroup2.is_none() => cgroup2 = Some(entry.mount_point.clone()),
                _ => {}
            }
        }
        // A v1 freezer or hugetlb mount alone (one a tool made next to cgroup2) does
        // not make a v1 host.
        let layout = if mounts
            .keys()
            .any(|&c| !matches!(c, Controller::Freezer | Controller::Hugetlb))
        {
            Layout::V1 {
                mounts,
                unified: cgroup2,
            }
        } else if let Some(root) = cgroup2 {
            Layout::V2 { root }
        } else {
            return Err(Error::NoCgroupMount {
                path: mountinfo_path(Path::new(PROC)),
            });
        };
        Ok(Hierarchy::with_layout(layout))
    }

    /// A v1 layout rooted at `root`: each of `root/{cpu,cpuacct,cpuset,memory,pids,
    /// blkio,freezer,hugetlb}` that is a directory, `root/cpu,cpuacct` (or `cpuacct,cpu`) for
    /// cpu and cpuacct when they are co-mounted without the usual symlinks, and
    /// `root/unified` as the hybrid cgroup2 mount when present. Symlinks (systemd's
    /// `cpu -> cpu,cpuacct`) are resolved, so co-mounted controllers share one
    /// directory.
    pub fn v1_under(root: &Path) -> Hierarchy {
        let mut mounts = BTreeMap::new();
        for c in Controller::V1 {
            let dir = root.join(c.name());
            if dir.is_dir() {
                let is_link = dir
                    .symlink_metadata()
                    .is_ok_and(|m| m.file_type().is_symlink());
                let dir = if is_link {
                    dir.canonicalize().unwrap_or(dir)
                } else {
                    dir
                };
                mounts.insert(c, dir);
            }
        }
        for comount in ["cpu,cpuacct", "cpuacct,cpu"] {
            let dir = root.join(comount);
            if dir.is_dir() {
                for c in [Controller::Cpu, Controller::Cpuacct] {
                    mounts.entry(c).or_insert_with(|| dir.clone());
                }
            }
        }
        let unified = root.join("unified");
        let unified = unified.is_dir().then_some(unified);
        Hierarchy::with_layout(Layout::V1 { mounts, unified })
    }

    /// A pure v2 layout: the cgroup2 mount at `root`.
    pub fn v2(root: &Path) -> Hierarchy {
        Hierarchy::with_layout(Layout::V2 {
            root: root.to_owned(),
        })
    }

    fn with_layout(layout: Layout) -> Hierarchy {
        Hierarchy {
            layout,
            sys: Arc::new(RealSyscalls),
        }
    }

    /// The same hierarchy making its system calls through `sys` (a test double).
    pub fn with_syscalls(mut self, sys: Arc<dyn Syscalls>) -> Hierarchy {
        self.sys = sys;
        self
    }

    /// v1 (including hybrid) or v2.
    pub fn version(&self) -> Version {
        match self.layout {
            Layout::V1 { .. } => Version::V1,
            Layout::V2 { .. } => Version::V2,
        }
    }

    /// Where `controller` is mounted (v1), or the cgroup2 root (v2, for every
    /// controller; whether it is available there is known per cgroup).
    pub fn mount(&self, controller: Controller) -> Option<&Path> {
        match &self.layout {
            Layout::V1 { mounts, .. } => mounts.get(&controller).map(PathBuf::as_path),
            Layout::V2 { root } => Some(root),
        }
    }

    /// The cgroup2 mount: the root of a v2 layout, the hybrid mount of a v1 one.
    pub fn unified(&self) -> Option<&Path> {
        match &self.layout {
            Layout::V1 { unified, .. } => unified.as_deref(),
            Layout::V2 { root } => Some(root),
        }
    }

    /// Short human description, e.g. `"v1 under /sys/fs/cgroup (hybrid: PSI from
    /// /sys/fs/cgroup/unified)"` or `"v2 at /sys/fs/cgroup"`.
    pub fn describe(&self) -> String {
        match &self.layout {
            Layout::V2 { root } => format!("v2 at {}", root.display()),
            Layout::V1 { mounts, unified } => {
                let parents: Vec<Option<&Path>> = mounts.values().map(|p| p.parent()).collect();
                let mut text = match parents.first() {
                    Some(Some(first)) if parents.iter().all(|p| p == &Some(*first)) => {
                        format!("v1 under {}", first.display())
                    }
                    Some(_) => {
                        let list: Vec<String> = mounts
                            .iter()
                            .map(|(c, p)| format!("{c} at {}", p.display()))
                            .collect();
                        format!("v1 ({})", list.join(", "))
                    }
                    None => "v1 (no controllers mounted)".to_owned(),
                };
                if let Some(u) = unified {
                    text.push_str(&format!(" (hybrid: PSI from {})", u.display()));
                }
                text
            }
        }
    }

    /// The mount points a cgroup has a directory under, each with its role, in a
    /// stable order (v1 mounts sorted by their first controller, then unified).
    pub(crate) fn roots(&self) -> Vec<(MountRole, PathBuf)> {
        match &self.layout {
            Layout::V2 { root } => vec![(MountRole::V2, root.clone())],
            Layout::V1 { mounts, unified } => {
                let mut roots: Vec<(MountRole, PathBuf)> = Vec::new();
                for (&c, path) in mounts {
                    match roots.iter_mut().find(|(_, p)| p == path) {
                        Some((MountRole::V1(cs), _)) => cs.push(c),
                        _ => roots.push((MountRole::V1(vec![c]), path.clone())),
                    }
                }
                if let Some(u) = unified {
                    roots.push((MountRole::Unified, u.clone()));
                }
                roots
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's table: separate cpu and cpuacct mounts, hybrid cgroup2.
    const SEPARATE_HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/devices rw,relatime - cgroup cgroup rw,devices
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
38 31 0:35 / /sys/fs/cgroup/blkio rw,relatime - cgroup cgroup rw,blkio
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    /// A systemd v1 table: co-mounted cpu,cpuacct with optional fields, no cgroup2.
    const COMOUNTED: &str = "\
25 18 0:22 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
26 25 0:23 / /sys/fs/cgroup/systemd rw,nosuid shared:10 - cgroup cgroup rw,xattr,name=systemd
29 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:13 - cgroup cgroup rw,cpu,cpuacct
30 25 0:27 / /sys/fs/cgroup/memory rw,nosuid shared:14 - cgroup cgroup rw,memory
";

    const PURE_V2: &str = "\
30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    #[test]
    fn separate_mounts_with_hybrid_unified() {
        let h = Hierarchy::from_mountinfo(SEPARATE_HYBRID).unwrap();
        assert_eq!(h.version(), Version::V1);
        assert_eq!(
            h.mount(Controller::Cpu),
            Some(Path::new("/sys/fs/cgroup/cpu"))
        );
        assert_eq!(
            h.mount(Controller::Cpuacct),
            Some(Path::new("/sys/fs/cgroup/cpuacct"))
        );
        assert_eq!(
            h.mount(Controller::Freezer),
            Some(Path::new("/sys/fs/cgroup/freezer"))
        );
        assert_eq!(h.mount(Controller::Io), None);
        assert_eq!(h.unified(), Some(Path::new("/sys/fs/cgroup/unified")));
        assert_eq!(
            h.describe(),
            "v1 under /sys/fs/cgroup (hybrid: PSI from /sys/fs/cgroup/unified)"
        );
        let roots = h.roots();
        assert_eq!(roots.len(), 8);
        assert_eq!(
            roots[0],
            (
                MountRole::V1(vec![Controller::Cpu]),
                "/sys/fs/cgroup/cpu".into()
            )
        );
        assert_eq!(
            roots[7],
            (MountRole::Unified, "/sys/fs/cgroup/unified".into())
        );
    }

    #[test]
    fn comounted_cpu_cpuacct() {
        let h = Hierarchy::from_mountinfo(COMOUNTED).unwrap();
        assert_eq!(h.version(), Version::V1);
        let both = Path::new("/sys/fs/cgroup/cpu,cpuacct");
        assert_eq!(h.mount(Controller::Cpu), Some(both));
        assert_eq!(h.mount(Controller::Cpuacct), Some(both));
        assert_eq!(h.unified(), None);
        assert_eq!(h.describe(), "v1 under /sys/fs/cgroup");
        let roots = h.roots();
        assert_eq!(roots.len(), 2);
        assert_eq!(
            roots[0],
            (
                MountRole::V1(vec![Controller::Cpu, Controller::Cpuacct]),
                both.to_owned()
            )
        );
    }

    #[test]
    fn a_second_mount_of_a_hierarchy_is_ignored() {
        let text = "\
29 25 0:26 / /sys/fs/cgroup/cpu,cpuacct rw shared:13 - cgroup cgroup rw,cpu,cpuacct
50 25 0:26 / /mnt/cpuacct rw - cgroup cgroup rw,cpuacct,cpu
51 25 0:27 / /mnt/memory rw - cgroup cgroup rw,memory
";
        let h = Hierarchy::from_mountinfo(text).unwrap();
        let both = Path::new("/sys/fs/cgroup/cpu,cpuacct");
        assert_eq!(h.mount(Controller::Cpuacct), Some(both));
        assert_eq!(h.roots().len(), 2);
        assert_eq!(h.describe(), "v1 (cpu at /sys/fs/cgroup/cpu,cpuacct, cpuacct at /sys/fs/cgroup/cpu,cpuacct, memory at /mnt/memory)");
    }

    #[test]
    fn pure_v2() {
        let h = Hierarchy::from_mountinfo(PURE_V2).unwrap();
        assert_eq!(h.version(), Version::V2);
        assert_eq!(h.describe(), "v2 at /sys/fs/cgroup");
        assert_eq!(h.mount(Controller::Io), Some(Path::new("/sys/fs/cgroup")));
    }

    #[test]
    fn named_systemd_hierarchy_alone_is_not_v1() {
        let text = format!(
            "{}26 25 0:23 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,xattr,name=systemd\n",
            PURE_V2
        );
        assert_eq!(
            Hierarchy::from_mountinfo(&text).unwrap().version(),
            Version::V2
        );
    }

    #[test]
    fn no_cgroup_mount_is_an_error() {
        let err = Hierarchy::from_mountinfo("22 1 0:5 / /proc rw - proc proc rw\n").unwrap_err();
        assert!(matches!(err, Error::NoCgroupMount { .. }), "{err}");
        let err = Hierarchy::from_mountinfo("garbage\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn v1_under_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        for d in ["cpu,cpuacct", "memory", "unified", "devices"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let h = Hierarchy::v1_under(dir.path());
        assert_eq!(h.version(), Version::V1);
        assert_eq!(
            h.mount(Controller::Cpu),
            Some(dir.path().join("cpu,cpuacct").as_path())
        );
        assert_eq!(
            h.mount(Controller::Cpuacct),
            Some(dir.path().join("cpu,cpuacct").as_path())
        );
        assert_eq!(h.mount(Controller::Pids), None);
        assert_eq!(h.unified(), Some(dir.path().join("unified").as_path()));
        assert_eq!(h.roots().len(), 3);

        // systemd's symlinks resolve to the co-mounted directory.
        std::os::unix::fs::symlink("cpu,cpuacct", dir.path().join("cpu")).unwrap();
        std::os::unix::fs::symlink("cpu,cpuacct", dir.path().join("cpuacct")).unwrap();
        let h = Hierarchy::v1_under(dir.path());
        let real = dir.path().join("cpu,cpuacct").canonicalize().unwrap();
        assert_eq!(h.mount(Controller::Cpu), Some(real.as_path()));
        assert_eq!(h.mount(Controller::Cpuacct), Some(real.as_path()));
        assert_eq!(h.roots().len(), 3);
    }
}
