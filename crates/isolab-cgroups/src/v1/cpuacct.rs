//! v1 `cpuacct` controller: cpu usage (`cpuacct.usage`, nanoseconds) and its split
//! into user and system time (`cpuacct.stat`, `USER_HZ` ticks).

use std::path::Path;
use std::time::Duration;

use crate::error::Error;
use crate::file;
use crate::format::{flat_get, flat_keyed, single_u64, Expected};
use crate::stats::Stats;

/// `USER_HZ`, the unit of `cpuacct.stat` (100 on every mainstream architecture).
fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf(3) only reads a configuration value; it touches no memory of ours.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(hz).ok().filter(|&hz| hz > 0).unwrap_or(100)
}

fn ticks(n: u64, per_second: u64) -> Duration {
    let nanos = u128::from(n) * 1_000_000_000 / u128::from(per_second.max(1));
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// `cpuacct.stat`: `user TICKS` and `system TICKS` → (user, system).
pub(crate) fn parse_cpuacct_stat(
    text: &str,
    ticks_per_second: u64,
) -> Result<(Option<Duration>, Option<Duration>), Expected> {
    let pairs = flat_keyed(text)?;
    let get = |key| flat_get(&pairs, key).map(|n| ticks(n, ticks_per_second));
    Ok((get("user"), get("system")))
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    stats.cpu_usage =
        file::read_parsed_opt(&dir.join("cpuacct.usage"), single_u64)?.map(Duration::from_nanos);
    let hz = clock_ticks_per_second();
    if let Some((user, system)) =
        file::read_parsed_opt(&dir.join("cpuacct.stat"), |t| parse_cpuacct_stat(t, hz))?
    {
        stats.cpu_user = user;
        stats.cpu_system = system;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ticks() {
        let (user, system) = parse_cpuacct_stat("user 11409\nsystem 2171\n", 100).unwrap();
        assert_eq!(user, Some(Duration::from_millis(114_090)));
        assert_eq!(system, Some(Duration::from_millis(21_710)));
        let (user, _) = parse_cpuacct_stat("user 3\n", 300).unwrap();
        assert_eq!(user, Some(Duration::from_millis(10)));
        assert_eq!(parse_cpuacct_stat("", 100).unwrap(), (None, None));
        assert!(parse_cpuacct_stat("user -1\n", 100).is_err());
    }

    #[test]
    fn user_hz_is_sane() {
        assert!((1..=10_000).contains(&clock_ticks_per_second()));
    }
}
