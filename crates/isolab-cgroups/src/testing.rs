//! A fake kernel for a cgroupfs in a plain directory (feature `testing`): creates
//! the interface files on `mkdir` as the kernel would, refuses `rmdir` of busy or
//! non-empty cgroups, and "kills" by dropping the pid from every `cgroup.procs`.
//! Limit files are plain files, so limits read back as written.
//!
//! ```no_run
//! use isolab_cgroups::{testing::FakeKernel, Hierarchy};
//! let root = std::path::Path::new("/tmp/fake-cgroup2");
//! // The root's own files (cgroup.controllers, cgroup.subtree_control, ...) are the
//! // test's to write.
//! let h = Hierarchy::v2(root).with_syscalls(FakeKernel::new(root, true));
//! ```

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::Syscalls;

/// The kernel's side of a fake cgroupfs below a root directory, v1 or v2.
#[derive(Debug)]
pub struct FakeKernel {
    root: PathBuf,
    v2: bool,
    killed: Mutex<Vec<u32>>,
}

/// Pressure stall information of an idle cgroup.
const PSI: &str = "some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n\
                   full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
/// v1's "unlimited" memory limit, as a fake v1 memory file holds it.
pub const V1_UNLIMITED: &str = "9223372036854771712\n";
/// The hugetlb limit files of a fake cgroup (v1, v2): x86-64's 2 MB and 1 GB pages.
const HUGE_PAGE_SIZES: [(&str, &str); 2] = [
    ("hugetlb.2MB.limit_in_bytes", "hugetlb.2MB.max"),
    ("hugetlb.1GB.limit_in_bytes", "hugetlb.1GB.max"),
];

impl FakeKernel {
    /// The kernel of the fake cgroupfs at `root`: cgroup2 when `v2`, else v1
    /// hierarchies in `root/<controller>` (see [`crate::Hierarchy::v1_under`]).
    pub fn new(root: &Path, v2: bool) -> Arc<FakeKernel> {
        Arc::new(FakeKernel {
            root: root.to_owned(),
            v2,
            killed: Mutex::new(Vec::new()),
        })
    }

    /// The files of a cgroup2 directory whose parent enabled `controllers`.
    pub fn v2_files(controllers: &[String]) -> Vec<(String, String)> {
        let mut files: Vec<(&str, String)> = vec![
            ("cgroup.controllers", controllers.join(" ") + "\n"),
            ("cgroup.subtree_control", String::new()),
            ("cgroup.procs", String::new()),
            ("cgroup.kill", String::new()),
            (
                "cpu.stat",
                "usage_usec 0\nuser_usec 0\nsystem_usec 0\n".into(),
            ),
            ("cpu.pressure", PSI.into()),
            ("memory.pressure", PSI.into()),
            ("io.pressure", PSI.into()),
        ];
        for c in controllers {
            match c.as_str() {
                "cpu" => {
                    files.push(("cpu.max", "max 100000\n".into()));
                    files.push(("cpu.weight", "100\n".into()));
                }
                "cpuset" => {
                    files.push(("cpuset.cpus", "\n".into()));
                    files.push(("cpuset.mems", "\n".into()));
                }
                "memory" => {
                    files.push(("memory.max", "max\n".into()));
                    files.push(("memory.swap.max", "max\n".into()));
                    files.push(("memory.low", "0\n".into()));
                    files.push(("memory.high", "max\n".into()));
                    files.push(("memory.current", "0\n".into()));
                    files.push(("memory.peak", "0\n".into()));
                }
                "pids" => {
                    files.push(("pids.max", "max\n".into()));
                    files.push(("pids.current", "0\n".into()));
                }
                "io" => {
                    files.push(("io.max", String::new()));
                    files.push(("io.stat", String::new()));
                }
                "hugetlb" => {
                    for size in HUGE_PAGE_SIZES {
                        files.push((size.1, "max\n".into()));
                    }
                }
                _ => {}
            }
        }
        if controllers.iter().any(|c| c == "cpu") {
            files[4]
                .1
                .push_str("nr_periods 0\nnr_throttled 0\nthrottled_usec 0\n");
        }
        files.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }

    /// The files of a v1 directory in the hierarchy called `mount`.
    pub fn v1_files(mount: &str) -> Vec<(&'static str, &'static str)> {
        let mut files = vec![
            ("cgroup.procs", ""),
            ("tasks", ""),
            ("notify_on_release", "0\n"),
        ];
        files.extend(match mount {
            "cpu" => vec![
                ("cpu.cfs_period_us", "100000\n"),
                ("cpu.cfs_quota_us", "-1\n"),
                ("cpu.shares", "1024\n"),
                (
                    "cpu.stat",
                    "nr_periods 0\nnr_throttled 0\nthrottled_time 0\n",
                ),
            ],
            "cpuacct" => vec![
                ("cpuacct.usage", "0\n"),
                ("cpuacct.stat", "user 0\nsystem 0\n"),
            ],
            "cpuset" => vec![("cpuset.cpus", "\n"), ("cpuset.mems", "\n")],
            "memory" => vec![
                ("memory.limit_in_bytes", V1_UNLIMITED),
                ("memory.memsw.limit_in_bytes", V1_UNLIMITED),
                ("memory.soft_limit_in_bytes", V1_UNLIMITED),
                ("memory.usage_in_bytes", "0\n"),
                ("memory.max_usage_in_bytes", "0\n"),
            ],
            "pids" => vec![("pids.max", "max\n"), ("pids.current", "0\n")],
            "blkio" => vec![
                ("blkio.throttle.read_bps_device", ""),
                ("blkio.throttle.write_bps_device", ""),
                ("blkio.throttle.read_iops_device", ""),
                ("blkio.throttle.write_iops_device", ""),
                ("blkio.throttle.io_service_bytes_recursive", "Total 0\n"),
            ],
            "freezer" => vec![("freezer.state", "THAWED\n")],
            "hugetlb" => HUGE_PAGE_SIZES
                .iter()
                .map(|&(v1, _)| (v1, V1_UNLIMITED))
                .collect(),
            "unified" => vec![
                ("cgroup.controllers", ""),
                ("cgroup.kill", ""),
                ("cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n"),
                ("cpu.pressure", PSI),
                ("memory.pressure", PSI),
                ("io.pressure", PSI),
            ],
            _ => vec![],
        });
        files
    }

    /// The pids it "killed", in order.
    pub fn killed(&self) -> Vec<u32> {
        self.killed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn procs_files(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let mut stack = vec![self.root.clone()];
        while let Some(dir) = stack.pop() {
            for entry in fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.file_name().is_some_and(|n| n == "cgroup.procs") {
                    out.push(path);
                }
            }
        }
        out
    }
}

impl Syscalls for FakeKernel {
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        fs::create_dir(path)?;
        let files: Vec<(String, String)> = if self.v2 {
            let parent = path.parent().expect("a parent");
            let enabled = fs::read_to_string(parent.join("cgroup.subtree_control"))?;
            let controllers: Vec<String> = enabled
                .split_whitespace()
                .map(|w| w.trim_start_matches('+').to_owned())
                .collect();
            FakeKernel::v2_files(&controllers)
        } else {
            let rel = path.strip_prefix(&self.root).expect("below the fake root");
            let mount = rel
                .components()
                .next()
                .expect("a mount")
                .as_os_str()
                .to_string_lossy();
            FakeKernel::v1_files(&mount)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect()
        };
        for (name, content) in files {
            fs::write(path.join(name), content)?;
        }
        Ok(())
    }

    fn rmdir(&self, path: &Path) -> io::Result<()> {
        let mut files = Vec::new();
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            if entry.file_type()?.is_dir() {
                return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
            }
            files.push(entry.path());
        }
        if !fs::read_to_string(path.join("cgroup.procs"))
            .unwrap_or_default()
            .trim()
            .is_empty()
        {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        for f in files {
            fs::remove_file(f)?;
        }
        fs::remove_dir(path)
    }

    fn kill(&self, pid: u32) -> io::Result<()> {
        self.killed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(pid);
        for procs in self.procs_files() {
            let text = fs::read_to_string(&procs)?;
            let kept: String = text
                .lines()
                .filter(|l| l.trim() != pid.to_string())
                .map(|l| format!("{l}\n"))
                .collect();
            fs::write(&procs, kept)?;
        }
        Ok(())
    }

    /// The caller is in the root cgroup of every hierarchy under the fake root.
    fn own_cgroups(&self) -> io::Result<String> {
        if self.v2 {
            return Ok("0::/\n".into());
        }
        let mut lines = String::new();
        let mut mounts: Vec<String> = fs::read_dir(&self.root)?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        mounts.sort();
        for (i, m) in mounts.iter().enumerate() {
            if m == "unified" {
                lines.push_str("0::/\n");
            } else {
                lines.push_str(&format!("{}:{m}:/\n", i + 1));
            }
        }
        Ok(lines)
    }
}
