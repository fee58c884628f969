//! What a cgroup may use: [`Limits`] and the value types it is made of.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::bytes::Bytes;
use crate::error::InvalidValue;
use crate::idset::IdSet;

/// A CFS bandwidth limit: the cgroup may run for `quota` of cpu time in every
/// `period` of wall time, i.e. `quota / period` cpus ("vanilla" quota placement).
///
/// The kernel accepts periods from 1 ms to 1 s and quotas of at least 1 ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct CpuQuota {
    /// Cpu time per period.
    pub quota: Duration,
    /// Length of a period.
    pub period: Duration,
}

impl CpuQuota {
    /// The kernel's default period, 100 ms.
    pub const DEFAULT_PERIOD: Duration = Duration::from_millis(100);

    /// A quota of `cpus` cpus (may be fractional, e.g. 0.5) over `period`.
    pub fn from_cpus(cpus: f64, period: Duration) -> Result<CpuQuota, InvalidValue> {
        let ms = Duration::from_millis(1);
        let input = format!("{cpus} cpus per {period:?}");
        if !(cpus.is_finite() && cpus > 0.0) || period < ms || period > Duration::from_secs(1) {
            return Err(InvalidValue::new(
                "cpu quota",
                &input,
                "a positive number of cpus and a period between 1 ms and 1 s",
            ));
        }
        let quota = Duration::try_from_secs_f64(period.as_secs_f64() * cpus).map_err(|_| {
            InvalidValue::new("cpu quota", &input, "a quota that fits in a Duration")
        })?;
        // Whole microseconds, the kernel's unit.
        let quota = Duration::from_micros(quota.as_micros().min(u128::from(u64::MAX)) as u64);
        if quota < ms {
            return Err(InvalidValue::new(
                "cpu quota",
                &input,
                "at least 1 ms of cpu time per period (use more cpus or a longer period)",
            ));
        }
        Ok(CpuQuota { quota, period })
    }

    /// The number of cpus this quota is worth: `quota / period`.
    pub fn cpus(&self) -> f64 {
        if self.period.is_zero() {
            return 0.0;
        }
        self.quota.as_secs_f64() / self.period.as_secs_f64()
    }
}

/// A block device number, `major:minor` as in `/sys/dev/block/254:0` and the
/// kernel's io files.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct DeviceNumber {
    /// Major number (the driver).
    pub major: u32,
    /// Minor number (the device or partition).
    pub minor: u32,
}

impl DeviceNumber {
    /// The whole-disk block device holding `path` (what io throttles apply to):
    /// `stat` gives the file system's device; a partition maps to its disk through
    /// `<sys>/dev/block` (`sys` is normally `/sys`). `Ok(None)` when the file system
    /// has no block device (tmpfs, overlay, proc).
    pub fn backing_disk(
        path: &std::path::Path,
        sys: &std::path::Path,
    ) -> std::io::Result<Option<DeviceNumber>> {
        use std::os::unix::fs::MetadataExt;
        let dev = DeviceNumber::from_dev(std::fs::metadata(path)?.dev());
        let block = sys.join(format!("dev/block/{dev}"));
        if dev.major == 0 || !block.exists() {
            return Ok(None);
        }
        if !block.join("partition").exists() {
            return Ok(Some(dev));
        }
        let disk = std::fs::canonicalize(&block)
            .ok()
            .and_then(|p| p.parent().map(|p| p.join("dev")))
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|s| s.trim().parse().ok());
        Ok(Some(disk.unwrap_or(dev)))
    }

    /// Decodes a Linux `dev_t` (as in `st_dev` / `st_rdev` of
    /// `std::os::unix::fs::MetadataExt`), using glibc's `major()`/`minor()` encoding.
    pub fn from_dev(dev: u64) -> DeviceNumber {
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        DeviceNumber {
            major: major as u32,
            minor: minor as u32,
        }
    }
}

impl FromStr for DeviceNumber {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidValue::new("device number", s, "MAJOR:MINOR such as \"254:0\"");
        let (major, minor) = s.trim().split_once(':').ok_or_else(invalid)?;
        Ok(DeviceNumber {
            major: major.parse().map_err(|_| invalid())?,
            minor: minor.parse().map_err(|_| invalid())?,
        })
    }
}

impl fmt::Display for DeviceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl TryFrom<String> for DeviceNumber {
    type Error = InvalidValue;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<DeviceNumber> for String {
    fn from(d: DeviceNumber) -> String {
        d.to_string()
    }
}

/// Io throttling on one block device; `None` leaves that direction unlimited.
///
/// v1 writes `blkio.throttle.{read,write}_{bps,iops}_device`, v2 one `io.max` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct IoThrottle {
    /// The throttled device (a whole disk: throttling a partition has no effect on v1).
    pub device: DeviceNumber,
    /// Read bandwidth, bytes per second.
    pub read_bps: Option<u64>,
    /// Write bandwidth, bytes per second.
    pub write_bps: Option<u64>,
    /// Read operations per second.
    pub read_iops: Option<u64>,
    /// Write operations per second.
    pub write_iops: Option<u64>,
}

impl IoThrottle {
    /// A throttle on `device` with every direction unlimited.
    pub fn unlimited(device: DeviceNumber) -> IoThrottle {
        IoThrottle {
            device,
            read_bps: None,
            write_bps: None,
            read_iops: None,
            write_iops: None,
        }
    }

    /// Whether no direction is limited.
    pub fn is_unlimited(&self) -> bool {
        self.read_bps.is_none()
            && self.write_bps.is_none()
            && self.read_iops.is_none()
            && self.write_iops.is_none()
    }
}

/// The limits of a cgroup. `None` (or an empty `io`) means "leave as is": unlimited for
/// a new cgroup, inherited from the parent for cpusets.
///
/// [`crate::Cgroup::read_limits`] returns the same type; it lists `io` sorted by device.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Limits {
    /// CFS bandwidth limit; `None` = unlimited.
    pub cpu: Option<CpuQuota>,
    /// The cpus the cgroup may run on; `None` = inherit the parent's.
    pub cpuset: Option<IdSet>,
    /// The memory nodes the cgroup may allocate from; `None` = inherit.
    pub mems: Option<IdSet>,
    /// Memory limit (v1 `memory.limit_in_bytes`, v2 `memory.max`).
    pub memory_max: Option<Bytes>,
    /// Swap limit, **with different meanings per version**, exactly as the kernel has
    /// them: on v1 it is `memory.memsw.limit_in_bytes`, the limit of memory **plus**
    /// swap (must be at least `memory_max`; equal to it means "no swap"); on v2 it is
    /// `memory.swap.max`, the limit of swap **alone** (0 means "no swap").
    /// Check [`crate::Hierarchy::version`] before choosing the value.
    pub memory_swap_max: Option<Bytes>,
    /// Maximum number of tasks (processes and threads).
    pub pids_max: Option<u64>,
    /// Io throttles, one per device.
    pub io: Vec<IoThrottle>,
}

impl Limits {
    /// Each controller a write of these limits needs, with whether it is needed;
    /// `io` is the io controller of the layout (v1 blkio, v2 io), needed when
    /// `io_limited`.
    pub(crate) fn controllers_needed(
        &self,
        io: crate::hierarchy::Controller,
        io_limited: bool,
    ) -> [(crate::hierarchy::Controller, bool); 5] {
        use crate::hierarchy::Controller;
        [
            (Controller::Cpu, self.cpu.is_some()),
            (
                Controller::Cpuset,
                self.cpuset.is_some() || self.mems.is_some(),
            ),
            (
                Controller::Memory,
                self.memory_max.is_some() || self.memory_swap_max.is_some(),
            ),
            (Controller::Pids, self.pids_max.is_some()),
            (io, io_limited),
        ]
    }

    /// What differs between these limits, as asked for, and `read`, as read back from
    /// a cgroup: one line per limit that was asked for (`Some` / listed) and is not in
    /// force, e.g. `memory asked 1073741824 read 536870912`. Limits not asked for are
    /// not compared. Memory limits may read back up to one 4 KiB page lower: the
    /// kernel rounds them down to whole pages.
    pub fn differences(&self, read: &Limits) -> Vec<String> {
        const PAGE: u64 = 4096;
        let mut diffs = Vec::new();
        let mut cmp = |what: &str, asked: Option<String>, got: Option<String>, same: bool| {
            if let (Some(a), false) = (asked, same) {
                diffs.push(format!(
                    "{what} asked {a} read {}",
                    got.unwrap_or_else(|| "unlimited".into())
                ));
            }
        };
        let quota = |q: &Option<CpuQuota>| q.map(|q| format!("{:?}/{:?}", q.quota, q.period));
        cmp(
            "cpu quota",
            quota(&self.cpu),
            quota(&read.cpu),
            self.cpu.is_none() || self.cpu == read.cpu,
        );
        let set = |s: &Option<IdSet>| s.as_ref().map(ToString::to_string);
        cmp(
            "cpuset",
            set(&self.cpuset),
            set(&read.cpuset),
            self.cpuset.is_none() || self.cpuset == read.cpuset,
        );
        cmp(
            "mems",
            set(&self.mems),
            set(&read.mems),
            self.mems.is_none() || self.mems == read.mems,
        );
        let bytes = |b: Option<Bytes>| b.map(|b| b.0.to_string());
        let mem_same = |asked: Option<Bytes>, got: Option<Bytes>| match asked {
            None => true,
            Some(a) => got.is_some_and(|g| g.0 <= a.0 && a.0 - g.0 < PAGE),
        };
        cmp(
            "memory",
            bytes(self.memory_max),
            bytes(read.memory_max),
            mem_same(self.memory_max, read.memory_max),
        );
        cmp(
            "memory+swap",
            bytes(self.memory_swap_max),
            bytes(read.memory_swap_max),
            mem_same(self.memory_swap_max, read.memory_swap_max),
        );
        let pids = |p: Option<u64>| p.map(|p| p.to_string());
        cmp(
            "pids",
            pids(self.pids_max),
            pids(read.pids_max),
            self.pids_max.is_none() || self.pids_max == read.pids_max,
        );
        for t in &self.io {
            let found = read.io.iter().find(|r| r.device == t.device);
            cmp(
                &format!("io {}", t.device),
                Some(format!("{t:?}")),
                found.map(|f| format!("{f:?}")),
                found == Some(t),
            );
        }
        diffs
    }

    /// Whether nothing is limited.
    pub fn is_empty(&self) -> bool {
        self.cpu.is_none()
            && self.cpuset.is_none()
            && self.mems.is_none()
            && self.memory_max.is_none()
            && self.memory_swap_max.is_none()
            && self.pids_max.is_none()
            && self.io.iter().all(IoThrottle::is_unlimited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backing_disk_of_a_fake_sys_tree() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let dev = DeviceNumber::from_dev(std::fs::metadata(dir.path()).unwrap().dev());
        let sys = dir.path().join("sys");
        // No entry under dev/block: no block device (as for tmpfs).
        assert_eq!(DeviceNumber::backing_disk(dir.path(), &sys).unwrap(), None);
        // A partition whose disk is 8:0.
        let disk = sys.join("devices/sda");
        std::fs::create_dir_all(disk.join("sda1")).unwrap();
        std::fs::write(disk.join("dev"), "8:0\n").unwrap();
        std::fs::write(disk.join("sda1/partition"), "1\n").unwrap();
        std::fs::create_dir_all(sys.join("dev/block")).unwrap();
        std::os::unix::fs::symlink(disk.join("sda1"), sys.join(format!("dev/block/{dev}")))
            .unwrap();
        let got = DeviceNumber::backing_disk(dir.path(), &sys).unwrap();
        if dev.major != 0 {
            assert_eq!(got, Some(DeviceNumber { major: 8, minor: 0 }));
        }
        assert!(DeviceNumber::backing_disk(&dir.path().join("missing"), &sys).is_err());
    }

    #[test]
    fn differences_name_what_is_not_in_force() {
        let asked = Limits {
            cpu: Some(CpuQuota {
                quota: Duration::from_millis(100),
                period: Duration::from_millis(100),
            }),
            memory_max: Some(Bytes(1 << 30)),
            ..Limits::default()
        };
        assert!(asked.differences(&asked.clone()).is_empty());
        let read = Limits {
            memory_max: Some(Bytes(1 << 29)),
            ..asked.clone()
        };
        assert_eq!(
            asked.differences(&read),
            vec!["memory asked 1073741824 read 536870912".to_string()]
        );
        // Unasked limits are not compared; memory may be rounded down to a page.
        let read = Limits {
            pids_max: Some(10),
            memory_max: Some(Bytes((1 << 30) - 100)),
            ..asked.clone()
        };
        assert!(asked.differences(&read).is_empty());
        let read = Limits {
            cpu: None,
            ..asked.clone()
        };
        assert_eq!(
            asked.differences(&read),
            vec!["cpu quota asked 100ms/100ms read unlimited".to_string()]
        );
    }

    #[test]
    fn quota_from_cpus() {
        let q = CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap();
        assert_eq!(q.quota, Duration::from_millis(50));
        assert_eq!(q.cpus(), 0.5);
        let q = CpuQuota::from_cpus(2.0, Duration::from_millis(250)).unwrap();
        assert_eq!(q.quota, Duration::from_millis(500));
        assert!(CpuQuota::from_cpus(0.0, CpuQuota::DEFAULT_PERIOD).is_err());
        assert!(CpuQuota::from_cpus(f64::NAN, CpuQuota::DEFAULT_PERIOD).is_err());
        assert!(CpuQuota::from_cpus(1.0, Duration::from_secs(2)).is_err());
        assert!(CpuQuota::from_cpus(0.001, CpuQuota::DEFAULT_PERIOD).is_err());
        assert!(CpuQuota::from_cpus(1e30, CpuQuota::DEFAULT_PERIOD).is_err());
    }

    #[test]
    fn device_numbers() {
        let d: DeviceNumber = "254:0".parse().unwrap();
        assert_eq!(
            d,
            DeviceNumber {
                major: 254,
                minor: 0
            }
        );
        assert_eq!(d.to_string(), "254:0");
        assert!("254".parse::<DeviceNumber>().is_err());
        assert!("a:b".parse::<DeviceNumber>().is_err());
        // makedev(8, 16) and makedev(259, 70000) in glibc's encoding.
        assert_eq!(
            DeviceNumber::from_dev(0x810),
            DeviceNumber {
                major: 8,
                minor: 16
            }
        );
        let (major, minor) = (4100u64, 70000u64);
        let dev = ((major & 0xfff) << 8)
            | ((major & !0xfff) << 32)
            | (minor & 0xff)
            | ((minor & !0xff) << 12);
        assert_eq!(
            DeviceNumber::from_dev(dev),
            DeviceNumber {
                major: 4100,
                minor: 70000
            }
        );
    }

    #[test]
    fn empty_limits() {
        assert!(Limits::default().is_empty());
        let mut l = Limits::default();
        l.io.push(IoThrottle::unlimited(DeviceNumber { major: 8, minor: 0 }));
        assert!(l.is_empty());
        l.pids_max = Some(10);
        assert!(!l.is_empty());
    }
}
