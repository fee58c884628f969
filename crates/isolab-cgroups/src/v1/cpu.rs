//! v1 `cpu` controller: CFS bandwidth (`cpu.cfs_period_us`, `cpu.cfs_quota_us`), the
//! weight against siblings (`cpu.shares`) and throttling statistics (`cpu.stat`).

use std::path::Path;
use std::time::Duration;

use crate::error::Error;
use crate::file;
use crate::format::{flat_get, flat_keyed, signed_or_unlimited, single_u64, Expected};
use crate::limits::{CpuQuota, CpuWeight};
use crate::stats::Stats;

/// Writes the period first, then the quota, both in microseconds.
pub(crate) fn apply(dir: &Path, q: &CpuQuota) -> Result<(), Error> {
    let period = q.period.as_micros().to_string();
    let quota = q.quota.as_micros().to_string();
    file::write_limit(&dir.join("cpu.cfs_period_us"), &period, "cpu quota")?;
    file::write_limit(&dir.join("cpu.cfs_quota_us"), &quota, "cpu quota")
}

/// The quota, `None` when unlimited (`-1`) or not provided.
pub(crate) fn read(dir: &Path) -> Result<Option<CpuQuota>, Error> {
    let quota = file::read_parsed_opt(&dir.join("cpu.cfs_quota_us"), signed_or_unlimited)?;
    let Some(Some(quota)) = quota else {
        return Ok(None);
    };
    let period = file::read_parsed_opt(&dir.join("cpu.cfs_period_us"), single_u64)?;
    Ok(period.map(|period| CpuQuota {
        quota: Duration::from_micros(quota),
        period: Duration::from_micros(period),
    }))
}

/// Writes `cpu.shares` ([`CpuWeight::shares`]).
pub(crate) fn apply_weight(dir: &Path, w: CpuWeight) -> Result<(), Error> {
    file::write_limit(
        &dir.join("cpu.shares"),
        &w.shares().to_string(),
        "cpu weight",
    )
}

/// `cpu.shares`; `None` when it holds the default (1024) or is not provided.
pub(crate) fn read_weight(dir: &Path) -> Result<Option<CpuWeight>, Error> {
    let shares = file::read_parsed_opt(&dir.join("cpu.shares"), single_u64)?;
    Ok(shares
        .filter(|&s| s != CpuWeight::DEFAULT_SHARES)
        .map(CpuWeight::Shares))
}

/// `cpu.stat` of v1: `nr_periods`, `nr_throttled`, `throttled_time` (nanoseconds), and
/// since Linux 5.14 `nr_bursts`, `burst_time` (nanoseconds).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CpuStat {
    pub nr_periods: Option<u64>,
    pub nr_throttled: Option<u64>,
    pub throttled: Option<Duration>,
    pub nr_bursts: Option<u64>,
    pub burst: Option<Duration>,
}

pub(crate) fn parse_cpu_stat(text: &str) -> Result<CpuStat, Expected> {
    let pairs = flat_keyed(text)?;
    Ok(CpuStat {
        nr_periods: flat_get(&pairs, "nr_periods"),
        nr_throttled: flat_get(&pairs, "nr_throttled"),
        throttled: flat_get(&pairs, "throttled_time").map(Duration::from_nanos),
        nr_bursts: flat_get(&pairs, "nr_bursts"),
        burst: flat_get(&pairs, "burst_time").map(Duration::from_nanos),
    })
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    if let Some(s) = file::read_parsed_opt(&dir.join("cpu.stat"), parse_cpu_stat)? {
        stats.nr_periods = s.nr_periods;
        stats.nr_throttled = s.nr_throttled;
        stats.throttled = s.throttled;
        stats.nr_bursts = s.nr_bursts;
        stats.burst = s.burst;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_v1_cpu_stat() {
        let s = parse_cpu_stat(
            "nr_periods 12\nnr_throttled 9\nthrottled_time 456789012\nnr_bursts 0\nburst_time 0\n",
        )
        .unwrap();
        assert_eq!(s.nr_periods, Some(12));
        assert_eq!(s.nr_throttled, Some(9));
        assert_eq!(s.throttled, Some(Duration::from_nanos(456_789_012)));
        assert_eq!(s.nr_bursts, Some(0));
        assert_eq!(s.burst, Some(Duration::ZERO));
        assert_eq!(parse_cpu_stat("").unwrap(), CpuStat::default());
    }

    #[test]
    fn writes_period_then_quota() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["cpu.cfs_period_us", "cpu.cfs_quota_us"] {
            std::fs::write(dir.path().join(f), "-1\n").unwrap();
        }
        assert_eq!(read(dir.path()).unwrap(), None);
        let q = CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap();
        apply(dir.path(), &q).unwrap();
        let text = |f: &str| std::fs::read_to_string(dir.path().join(f)).unwrap();
        assert_eq!(text("cpu.cfs_period_us"), "100000");
        assert_eq!(text("cpu.cfs_quota_us"), "50000");
        assert_eq!(read(dir.path()).unwrap(), Some(q));
    }

    #[test]
    fn shares_round_trip_with_the_default_as_none() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_weight(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join("cpu.shares"), "1024\n").unwrap();
        assert_eq!(read_weight(dir.path()).unwrap(), None);
        apply_weight(dir.path(), CpuWeight::Shares(512)).unwrap();
        let text = std::fs::read_to_string(dir.path().join("cpu.shares")).unwrap();
        assert_eq!(text, "512");
        assert_eq!(
            read_weight(dir.path()).unwrap(),
            Some(CpuWeight::Shares(512))
        );
        // A v2 weight is written in shares.
        apply_weight(dir.path(), CpuWeight::Weight(50)).unwrap();
        assert_eq!(
            read_weight(dir.path()).unwrap(),
            Some(CpuWeight::Shares(512))
        );
    }
}
