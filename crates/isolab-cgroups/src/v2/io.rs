//! v2 `io` controller: `io.max` throttles and `io.stat` counters.

use std::collections::BTreeMap;
use std::path::Path;

use crate::bytes::Bytes;
use crate::device::DeviceNumber;
use crate::error::Error;
use crate::file;
use crate::format::{nested_keyed, Expected};
use crate::limits::IoThrottle;
use crate::stats::Stats;

/// One `io.max` line: `MAJ:MIN rbps=.. wbps=.. riops=.. wiops=..` with only the
/// limited directions.
pub(crate) fn io_max_line(t: &IoThrottle) -> String {
    let mut line = t.device.to_string();
    for (key, value) in [
        ("rbps", t.read_bps),
        ("wbps", t.write_bps),
        ("riops", t.read_iops),
        ("wiops", t.write_iops),
    ] {
        if let Some(v) = value {
            line.push_str(&format!(" {key}={v}"));
        }
    }
    line
}

pub(crate) fn apply(dir: &Path, throttles: &[IoThrottle]) -> Result<(), Error> {
    for t in throttles {
        file::write_limit(&dir.join("io.max"), &io_max_line(t), "io throttle")?;
    }
    Ok(())
}

/// `io.max`: one line per throttled device, `max` for an unlimited direction.
pub(crate) fn parse_io_max(text: &str) -> Result<Vec<IoThrottle>, Expected> {
    const EXPECTED: Expected =
        Expected("lines of \"MAJOR:MINOR rbps=N|max wbps=N|max riops=N|max wiops=N|max\"");
    let mut by_device = BTreeMap::new();
    for (dev, pairs) in nested_keyed(text).map_err(|_| EXPECTED)? {
        let dev: DeviceNumber = dev.parse().map_err(|_| EXPECTED)?;
        let mut t = IoThrottle::unlimited(dev);
        for (key, value) in pairs {
            let value = match value {
                "max" => None,
                v => Some(v.parse::<u64>().map_err(|_| EXPECTED)?),
            };
            match key {
                "rbps" => t.read_bps = value,
                "wbps" => t.write_bps = value,
                "riops" => t.read_iops = value,
                "wiops" => t.write_iops = value,
                _ => {}
            }
        }
        by_device.insert(dev, t);
    }
    Ok(by_device.into_values().collect())
}

pub(crate) fn read(dir: &Path) -> Result<Vec<IoThrottle>, Error> {
    Ok(file::read_parsed_opt(&dir.join("io.max"), parse_io_max)?.unwrap_or_default())
}

/// `io.stat`: `MAJ:MIN rbytes=N wbytes=N rios=N wios=N dbytes=N dios=N` per device;
/// returns read and written bytes summed over devices.
pub(crate) fn parse_io_stat(text: &str) -> Result<(u64, u64), Expected> {
    const EXPECTED: Expected = Expected("lines of \"MAJOR:MINOR rbytes=N wbytes=N ...\"");
    let (mut read, mut write) = (0u64, 0u64);
    for (_dev, pairs) in nested_keyed(text).map_err(|_| EXPECTED)? {
        for (key, value) in pairs {
            let sum = match key {
                "rbytes" => &mut read,
                "wbytes" => &mut write,
                _ => continue,
            };
            *sum = sum.saturating_add(value.parse().map_err(|_| EXPECTED)?);
        }
    }
    Ok((read, write))
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    if let Some((read, write)) = file::read_parsed_opt(&dir.join("io.stat"), parse_io_stat)? {
        stats.io_read = Some(Bytes(read));
        stats.io_write = Some(Bytes(write));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(major: u32, minor: u32) -> DeviceNumber {
        DeviceNumber { major, minor }
    }

    #[test]
    fn io_max_lines() {
        let t = IoThrottle {
            read_bps: Some(2_097_152),
            ..IoThrottle::unlimited(dev(254, 0))
        };
        assert_eq!(io_max_line(&t), "254:0 rbps=2097152");
        let all = IoThrottle {
            device: dev(8, 16),
            read_bps: Some(1),
            write_bps: Some(2),
            read_iops: Some(3),
            write_iops: Some(4),
        };
        assert_eq!(io_max_line(&all), "8:16 rbps=1 wbps=2 riops=3 wiops=4");
        let parsed = parse_io_max(
            "8:16 rbps=1 wbps=2 riops=3 wiops=4\n254:0 rbps=2097152 wbps=max riops=max wiops=max\n",
        )
        .unwrap();
        assert_eq!(parsed, vec![all, t]);
        assert!(parse_io_max("sda rbps=1\n").is_err());
        assert!(parse_io_max("8:0 rbps=fast\n").is_err());
    }

    #[test]
    fn sums_io_stat() {
        let text = "254:0 rbytes=4096 wbytes=8192 rios=1 wios=2 dbytes=0 dios=0\n\
                    8:0 rbytes=1 wbytes=2 rios=1 wios=1 dbytes=0 dios=0\n";
        assert_eq!(parse_io_stat(text), Ok((4097, 8194)));
        assert_eq!(parse_io_stat(""), Ok((0, 0)));
        assert!(parse_io_stat("8:0 rbytes=x\n").is_err());
    }
}
