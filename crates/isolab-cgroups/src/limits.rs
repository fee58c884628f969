//! What a cgroup may use: [`Limits`] and the value types it is made of.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::bytes::Bytes;
use crate::device::DeviceNumber;
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
        // Whole microseconds, the kernel's unit, rounded to the nearest so that 0.333
        // cpus of 100 ms is 33300 µs, not the 33299 a truncated 0.0333 s gives.
        let micros = (period.as_micros() as f64 * cpus).round();
        if micros >= u64::MAX as f64 {
            return Err(InvalidValue::new(
                "cpu quota",
                &input,
                "a quota that fits in a Duration",
            ));
        }
        let quota = Duration::from_micros(micros as u64);
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

/// How much cpu time a cgroup gets against its siblings while the cpus are contended
/// (a proportion, not a cap: what an idle sibling leaves goes to the others), in the
/// unit of one cgroup version. Either converts to the other's unit, so one value
/// applies on both: [`CpuWeight::shares`] for v1, [`CpuWeight::weight`] for v2.
/// [`Limits::cpu_weight`] `None` is the kernel's default, 1024 shares = weight 100.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuWeight {
    /// v1 `cpu.shares`, also OCI's `linux.resources.cpu.shares` and `docker run
    /// --cpu-shares`: 2 to 262144, the kernel's default 1024.
    Shares(u64),
    /// v2 `cpu.weight`: 1 to 10000, the kernel's default 100.
    Weight(u64),
}

impl CpuWeight {
    /// The kernel's default `cpu.shares` (v1).
    pub const DEFAULT_SHARES: u64 = 1024;
    /// The kernel's default `cpu.weight` (v2).
    pub const DEFAULT_WEIGHT: u64 = 100;
    /// The range of v1 shares (the kernel clamps a write into it).
    const SHARES: (u64, u64) = (2, 262_144);
    /// The range of v2 weights (the kernel refuses a write outside it).
    const WEIGHTS: (u64, u64) = (1, 10_000);

    /// As v1 `cpu.shares`, clamped into 2..=262144 as the kernel clamps a write. A
    /// weight converts with systemd's linear rule, `weight × 1024 / 100` clamped
    /// (`cgroup_cpu_weight_to_shares` in systemd's `src/core/cgroup.c`).
    pub fn shares(self) -> u64 {
        let (min, max) = Self::SHARES;
        match self {
            CpuWeight::Shares(s) => s.clamp(min, max),
            CpuWeight::Weight(w) => {
                (w.saturating_mul(Self::DEFAULT_SHARES) / Self::DEFAULT_WEIGHT).clamp(min, max)
            }
        }
    }

    /// As v2 `cpu.weight`, in 1..=10000. Shares convert as runc and crun convert
    /// OCI's `cpu.shares` on a v2 host (runc 1.4's `ConvertCPUSharesToCgroupV2Value`
    /// in opencontainers/cgroups `utils.go`; crun 1.23's `convert_shares_to_weight`
    /// in `src/libcrun/cgroup-internal.h`): at most 2 shares is weight 1, at least
    /// 262144 is 10000, and between them, with `l = log2(shares)`,
    ///
    /// `weight = ceil(10^((l² + 125·l) / 612 − 7/34))`,
    ///
    /// a quadratic in `l` fitted so that the minimum, the default (1024 → 100) and
    /// the maximum map onto each other. (runc before 1.4 and crun before 1.23 used the
    /// linear `1 + (shares − 2) · 9999 / 262142`, which maps the default 1024 to 39.)
    pub fn weight(self) -> u64 {
        let (min, max) = Self::WEIGHTS;
        match self {
            CpuWeight::Weight(w) => w.clamp(min, max),
            CpuWeight::Shares(s) if s <= Self::SHARES.0 => min,
            CpuWeight::Shares(s) if s >= Self::SHARES.1 => max,
            CpuWeight::Shares(s) => {
                let l = (s as f64).log2();
                let exponent = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
                (10f64.powf(exponent).ceil() as u64).clamp(min, max)
            }
        }
    }

    /// Whether `self`, asked for, is in force when a cgroup reads back `read`,
    /// compared in `read`'s unit. `None` is the default of either version (a read
    /// maps it to `None`): 1024 shares and weight 100 are each other's conversion.
    fn in_force(self, read: Option<CpuWeight>) -> bool {
        match read {
            Some(CpuWeight::Shares(r)) => self.shares() == r,
            Some(CpuWeight::Weight(r)) => self.weight() == r,
            None => self.shares() == Self::DEFAULT_SHARES || self.weight() == Self::DEFAULT_WEIGHT,
        }
    }
}

impl fmt::Display for CpuWeight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CpuWeight::Shares(s) => write!(f, "{s} shares"),
            CpuWeight::Weight(w) => write!(f, "weight {w}"),
        }
    }
}

/// The size of a huge page, as the hugetlb controller names its files
/// (`hugetlb.2MB.limit_in_bytes`, `hugetlb.1GB.max`) and OCI's `hugepageLimits`
/// give it: a whole number of `KB`, `MB` or `GB` (powers of 1024), the largest unit
/// that divides it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct HugePageSize(Bytes);

impl HugePageSize {
    /// The size in bytes.
    pub fn bytes(self) -> Bytes {
        self.0
    }
}

impl FromStr for HugePageSize {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid =
            || InvalidValue::new("huge page size", s, "a size such as \"2MB\" or \"1GB\"");
        let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(invalid)?;
        let (number, unit) = s.split_at(split);
        let shift = match unit {
            "KB" => 10,
            "MB" => 20,
            "GB" => 30,
            _ => return Err(invalid()),
        };
        let n: u64 = number.parse().map_err(|_| invalid())?;
        match n.checked_mul(1 << shift) {
            Some(bytes) if bytes > 0 => Ok(HugePageSize(Bytes(bytes))),
            _ => Err(invalid()),
        }
    }
}

impl fmt::Display for HugePageSize {
    /// The kernel's name (`mem_fmt` in `mm/hugetlb_cgroup.c`): `1GB`, `2MB`, `64KB`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0 .0;
        if b >= 1 << 30 {
            write!(f, "{}GB", b >> 30)
        } else if b >= 1 << 20 {
            write!(f, "{}MB", b >> 20)
        } else {
            write!(f, "{}KB", b >> 10)
        }
    }
}

impl TryFrom<String> for HugePageSize {
    type Error = InvalidValue;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<HugePageSize> for String {
    fn from(p: HugePageSize) -> String {
        p.to_string()
    }
}

/// A limit on the huge pages of one size a cgroup may use (hugetlb controller: v1
/// `hugetlb.<size>.limit_in_bytes`, v2 `hugetlb.<size>.max`). The kernel rounds the
/// limit down to whole pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct HugetlbLimit {
    /// The page size the limit is for.
    pub page_size: HugePageSize,
    /// The limit, in bytes.
    pub limit: Bytes,
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
    /// Cpu weight against sibling cgroups (v1 `cpu.shares`, v2 `cpu.weight`, each
    /// converted from the other's unit); `None` = the kernel's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_weight: Option<CpuWeight>,
    /// Memory the cgroup keeps when the host reclaims (OCI's `memory.reservation`,
    /// `docker run --memory-reservation`): v1 `memory.soft_limit_in_bytes` (above it
    /// the cgroup is reclaimed first), v2 `memory.low` (below it the cgroup is
    /// reclaimed last). `None` = none (v1 unlimited soft limit, v2 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_reservation: Option<Bytes>,
    /// Huge page limits, one per page size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hugetlb: Vec<HugetlbLimit>,
    /// Other cgroup v2 interface files to write, name to value (OCI's
    /// `linux.resources.unified`), after every limit above, so that they win. Only on
    /// v2: each name must be `CONTROLLER.FILE` of a controller enabled for the cgroup
    /// (the `cgroup.*` core files are the crate's), with no `/` and no `..`. A v1
    /// hierarchy refuses them ([`crate::Error::UnifiedOnV1`]).
    /// [`crate::Cgroup::read_limits`] cannot know which to read and leaves this empty;
    /// [`crate::Cgroup::read_unified`] reads given names back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub unified: BTreeMap<String, String>,
    /// How eagerly the kernel swaps the cgroup's anonymous memory, 0–100 (OCI's
    /// `memory.swappiness`): v1 `memory.swappiness`. Cgroup v2 has no such file: a v2
    /// hierarchy refuses it ([`crate::Error::V1Only`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_swappiness: Option<u64>,
    /// The limit of the cgroup's TCP buffer memory (OCI's `memory.kernelTCP`): v1
    /// `memory.kmem.tcp.limit_in_bytes`. Cgroup v2 counts it in `memory.max` and has no
    /// limit of its own: refused there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_tcp_max: Option<Bytes>,
    /// Whether a task over the memory limit waits for memory instead of being killed
    /// (OCI's `memory.disableOOMKiller`): v1 `memory.oom_control` = 1. Cgroup v2 has no
    /// such switch: refused there.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oom_kill_disabled: bool,
}

impl Limits {
    /// Each controller a write of these limits needs, with whether it is needed;
    /// `io` is the io controller of the layout (v1 blkio, v2 io), needed when
    /// `io_limited`.
    pub(crate) fn controllers_needed(
        &self,
        io: crate::controller::Controller,
        io_limited: bool,
    ) -> [(crate::controller::Controller, bool); 6] {
        use crate::controller::Controller;
        [
            (
                Controller::Cpu,
                self.cpu.is_some() || self.cpu_weight.is_some(),
            ),
            (
                Controller::Cpuset,
                self.cpuset.is_some() || self.mems.is_some(),
            ),
            (Controller::Memory, self.limits_memory()),
            (Controller::Pids, self.pids_max.is_some()),
            (io, io_limited),
            (Controller::Hugetlb, !self.hugetlb.is_empty()),
        ]
    }

    /// Whether a memory controller file is to be written.
    pub(crate) fn limits_memory(&self) -> bool {
        self.memory_max.is_some()
            || self.memory_swap_max.is_some()
            || self.memory_reservation.is_some()
            || !self.v1_only().is_empty()
    }

    /// The limits asked for that only cgroup v1 has, by their OCI names.
    pub(crate) fn v1_only(&self) -> Vec<&'static str> {
        [
            (self.memory_swappiness.is_some(), "memory.swappiness"),
            (self.memory_tcp_max.is_some(), "memory.kernelTCP"),
            (self.oom_kill_disabled, "memory.disableOOMKiller"),
        ]
        .into_iter()
        .filter_map(|(asked, name)| asked.then_some(name))
        .collect()
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
        let weight = |w: Option<CpuWeight>| w.map(|w| w.to_string());
        cmp(
            "cpu weight",
            weight(self.cpu_weight),
            weight(read.cpu_weight).or_else(|| Some("the default".into())),
            self.cpu_weight.is_none_or(|w| w.in_force(read.cpu_weight)),
        );
        cmp(
            "memory reservation",
            bytes(self.memory_reservation),
            bytes(read.memory_reservation),
            (self.memory_reservation == Some(Bytes(0)) && read.memory_reservation.is_none())
                || mem_same(self.memory_reservation, read.memory_reservation),
        );
        let number = |v: Option<u64>| v.map(|v| v.to_string());
        cmp(
            "memory swappiness",
            number(self.memory_swappiness),
            number(read.memory_swappiness),
            // Read back as `None` when equal to the parent's: in force if that is what
            // was asked.
            self.memory_swappiness.is_none()
                || read
                    .memory_swappiness
                    .is_none_or(|r| Some(r) == self.memory_swappiness),
        );
        cmp(
            "memory tcp",
            bytes(self.memory_tcp_max),
            bytes(read.memory_tcp_max),
            mem_same(self.memory_tcp_max, read.memory_tcp_max),
        );
        cmp(
            "oom killer disabled",
            self.oom_kill_disabled.then(|| "true".to_owned()),
            Some(read.oom_kill_disabled.to_string()),
            !self.oom_kill_disabled || read.oom_kill_disabled,
        );
        for h in &self.hugetlb {
            let found = read.hugetlb.iter().find(|r| r.page_size == h.page_size);
            let page = h.page_size.bytes().0;
            cmp(
                &format!("hugetlb {}", h.page_size),
                Some(h.limit.0.to_string()),
                found.map(|f| f.limit.0.to_string()),
                // The kernel keeps whole pages.
                found.is_some_and(|f| f.limit.0 <= h.limit.0 && h.limit.0 - f.limit.0 < page),
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
            && self.cpu_weight.is_none()
            && self.memory_reservation.is_none()
            && self.hugetlb.is_empty()
            && self.unified.is_empty()
            && self.v1_only().is_empty()
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
        // Rounded to the nearest microsecond, not truncated.
        let q = CpuQuota::from_cpus(0.333, CpuQuota::DEFAULT_PERIOD).unwrap();
        assert_eq!(q.quota, Duration::from_micros(33_300));
        let q = CpuQuota::from_cpus(1.5, Duration::from_millis(10)).unwrap();
        assert_eq!(q.quota, Duration::from_millis(15));
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
    fn shares_convert_to_weights_as_runc_and_crun_do() {
        // Computed with runc 1.4's ConvertCPUSharesToCgroupV2Value.
        let vectors = [
            (0, 1),
            (1, 1),
            (2, 1),
            (3, 2),
            (10, 4),
            (100, 17),
            (256, 35),
            (512, 59),
            (1000, 99),
            (1024, 100),
            (2048, 174),
            (4096, 303),
            (10_000, 627),
            (100_000, 4340),
            (262_143, 10_000),
            (262_144, 10_000),
            (500_000, 10_000),
        ];
        for (shares, weight) in vectors {
            assert_eq!(
                CpuWeight::Shares(shares).weight(),
                weight,
                "{shares} shares"
            );
        }
        assert_eq!(CpuWeight::Weight(0).weight(), 1);
        assert_eq!(CpuWeight::Weight(20_000).weight(), 10_000);
        // Weights to shares: systemd's linear rule, clamped as the kernel clamps.
        assert_eq!(CpuWeight::Weight(100).shares(), 1024);
        assert_eq!(CpuWeight::Weight(50).shares(), 512);
        assert_eq!(CpuWeight::Weight(1).shares(), 10);
        assert_eq!(CpuWeight::Weight(10_000).shares(), 102_400);
        assert_eq!(CpuWeight::Shares(1).shares(), 2);
        assert_eq!(CpuWeight::Shares(1 << 20).shares(), 262_144);
        assert_eq!(CpuWeight::Shares(512).to_string(), "512 shares");
        assert_eq!(
            serde_json::to_string(&CpuWeight::Weight(59)).unwrap(),
            r#"{"weight":59}"#
        );
    }

    #[test]
    fn huge_page_sizes_use_the_kernels_names() {
        for (name, bytes) in [("2MB", 2 << 20), ("1GB", 1 << 30), ("64KB", 64 << 10)] {
            let size: HugePageSize = name.parse().unwrap();
            assert_eq!(size.bytes(), Bytes(bytes));
            assert_eq!(size.to_string(), name);
        }
        assert_eq!("2048KB".parse::<HugePageSize>().unwrap().to_string(), "2MB");
        for bad in [
            "2M",
            "2mb",
            "MB",
            "0MB",
            "2 MB",
            "",
            "-2MB",
            "99999999999999GB",
        ] {
            assert!(bad.parse::<HugePageSize>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn differences_of_weights_reservations_and_huge_pages() {
        let two_mb: HugePageSize = "2MB".parse().unwrap();
        let asked = Limits {
            cpu_weight: Some(CpuWeight::Shares(512)),
            memory_reservation: Some(Bytes::mib(64)),
            hugetlb: vec![HugetlbLimit {
                page_size: two_mb,
                limit: Bytes::mib(5),
            }],
            unified: [("memory.high".to_string(), "64M".to_string())].into(),
            ..Limits::default()
        };
        let v1 = Limits {
            cpu_weight: Some(CpuWeight::Shares(512)),
            memory_reservation: Some(Bytes::mib(64)),
            // Whole pages: 5 MB of limit is two 2 MB pages.
            hugetlb: vec![HugetlbLimit {
                page_size: two_mb,
                limit: Bytes::mib(4),
            }],
            ..Limits::default()
        };
        assert_eq!(asked.differences(&v1), Vec::<String>::new());
        let v2 = Limits {
            cpu_weight: Some(CpuWeight::Weight(59)),
            ..v1.clone()
        };
        assert_eq!(asked.differences(&v2), Vec::<String>::new());
        let wrong = Limits {
            cpu_weight: Some(CpuWeight::Weight(60)),
            memory_reservation: None,
            hugetlb: Vec::new(),
            ..v1
        };
        assert_eq!(
            asked.differences(&wrong),
            [
                "cpu weight asked 512 shares read weight 60",
                "memory reservation asked 67108864 read unlimited",
                "hugetlb 2MB asked 5242880 read unlimited",
            ]
        );
        // The default of either version is in force when read back as None.
        let default = Limits {
            cpu_weight: Some(CpuWeight::Shares(1024)),
            ..Limits::default()
        };
        assert!(default.differences(&Limits::default()).is_empty());
        let not_default = Limits {
            cpu_weight: Some(CpuWeight::Shares(512)),
            ..Limits::default()
        };
        assert_eq!(
            not_default.differences(&Limits::default()),
            ["cpu weight asked 512 shares read the default"]
        );
        assert!(!asked.is_empty());
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
