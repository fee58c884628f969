//! v2 `cpu` controller: `cpu.max` ("QUOTA PERIOD"), `cpu.weight` and `cpu.stat` (usage
//! is reported even when the controller is not enabled, throttling only when it is).

use std::path::Path;
use std::time::Duration;

use crate::error::Error;
use crate::file;
use crate::format::{flat_get, flat_keyed, single_u64, Expected};
use crate::limits::{CpuQuota, CpuWeight};
use crate::stats::Stats;

pub(crate) fn apply(dir: &Path, q: &CpuQuota) -> Result<(), Error> {
    let data = format!("{} {}", q.quota.as_micros(), q.period.as_micros());
    file::write_limit(&dir.join("cpu.max"), &data, "cpu quota")
}

/// `cpu.max`: `max PERIOD` (unlimited) or `QUOTA PERIOD`, in microseconds.
pub(crate) fn parse_cpu_max(text: &str) -> Result<Option<CpuQuota>, Expected> {
    const EXPECTED: Expected = Expected("\"QUOTA PERIOD\" or \"max PERIOD\" in microseconds");
    let mut words = text.split_whitespace();
    let (Some(quota), period, None) = (words.next(), words.next(), words.next()) else {
        return Err(EXPECTED);
    };
    let period: u64 = match period {
        Some(p) => p.parse().map_err(|_| EXPECTED)?,
        None => 100_000,
    };
    if quota == "max" {
        return Ok(None);
    }
    let quota: u64 = quota.parse().map_err(|_| EXPECTED)?;
    Ok(Some(CpuQuota {
        quota: Duration::from_micros(quota),
        period: Duration::from_micros(period),
    }))
}

pub(crate) fn read(dir: &Path) -> Result<Option<CpuQuota>, Error> {
    Ok(file::read_parsed_opt(&dir.join("cpu.max"), parse_cpu_max)?.flatten())
}

/// Writes `cpu.weight` ([`CpuWeight::weight`]: shares are converted).
pub(crate) fn apply_weight(dir: &Path, w: CpuWeight) -> Result<(), Error> {
    file::write_limit(
        &dir.join("cpu.weight"),
        &w.weight().to_string(),
        "cpu weight",
    )
}

/// `cpu.weight`; `None` when it holds the default (100) or is not provided.
pub(crate) fn read_weight(dir: &Path) -> Result<Option<CpuWeight>, Error> {
    let weight = file::read_parsed_opt(&dir.join("cpu.weight"), single_u64)?;
    Ok(weight
        .filter(|&w| w != CpuWeight::DEFAULT_WEIGHT)
        .map(CpuWeight::Weight))
}

/// `cpu.stat` of v2: usage, user, system, and throttling, times in microseconds.
pub(crate) fn parse_cpu_stat(text: &str) -> Result<Stats, Expected> {
    let pairs = flat_keyed(text)?;
    let micros = |key| flat_get(&pairs, key).map(Duration::from_micros);
    Ok(Stats {
        cpu_usage: micros("usage_usec"),
        cpu_user: micros("user_usec"),
        cpu_system: micros("system_usec"),
        nr_periods: flat_get(&pairs, "nr_periods"),
        nr_throttled: flat_get(&pairs, "nr_throttled"),
        throttled: micros("throttled_usec"),
        nr_bursts: flat_get(&pairs, "nr_bursts"),
        burst: micros("burst_usec"),
        ..Stats::default()
    })
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    if let Some(s) = file::read_parsed_opt(&dir.join("cpu.stat"), parse_cpu_stat)? {
        stats.cpu_usage = s.cpu_usage;
        stats.cpu_user = s.cpu_user;
        stats.cpu_system = s.cpu_system;
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
    fn parses_cpu_max() {
        assert_eq!(parse_cpu_max("max 100000\n"), Ok(None));
        assert_eq!(
            parse_cpu_max("50000 100000\n"),
            Ok(Some(CpuQuota {
                quota: Duration::from_millis(50),
                period: Duration::from_millis(100)
            }))
        );
        assert!(parse_cpu_max("").is_err());
        assert!(parse_cpu_max("50000 x").is_err());
        assert!(parse_cpu_max("1 2 3").is_err());
    }

    #[test]
    fn shares_are_written_as_their_weight() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cpu.weight"), "100\n").unwrap();
        assert_eq!(read_weight(dir.path()).unwrap(), None);
        apply_weight(dir.path(), CpuWeight::Shares(512)).unwrap();
        let text = std::fs::read_to_string(dir.path().join("cpu.weight")).unwrap();
        assert_eq!(text, "59");
        assert_eq!(
            read_weight(dir.path()).unwrap(),
            Some(CpuWeight::Weight(59))
        );
        // The default maps onto the default.
        apply_weight(dir.path(), CpuWeight::Shares(1024)).unwrap();
        assert_eq!(read_weight(dir.path()).unwrap(), None);
    }

    #[test]
    fn parses_v2_cpu_stat() {
        let s = parse_cpu_stat(
            "usage_usec 134980736\nuser_usec 113402066\nsystem_usec 21578669\nnice_usec 0\n\
             nr_periods 20\nnr_throttled 10\nthrottled_usec 500000\nnr_bursts 0\nburst_usec 0\n",
        )
        .unwrap();
        assert_eq!(s.cpu_usage, Some(Duration::from_micros(134_980_736)));
        assert_eq!(s.cpu_user, Some(Duration::from_micros(113_402_066)));
        assert_eq!(s.cpu_system, Some(Duration::from_micros(21_578_669)));
        assert_eq!(s.nr_periods, Some(20));
        assert_eq!(s.nr_throttled, Some(10));
        assert_eq!(s.throttled, Some(Duration::from_millis(500)));
        // Without the cpu controller only the usage keys are present.
        let s = parse_cpu_stat("usage_usec 5\nuser_usec 3\nsystem_usec 2\n").unwrap();
        assert_eq!(s.nr_throttled, None);
    }
}
