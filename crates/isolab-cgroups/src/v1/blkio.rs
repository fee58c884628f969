//! v1 `blkio` controller: throttling (`blkio.throttle.{read,write}_{bps,iops}_device`)
//! and io statistics (`blkio.throttle.io_service_bytes_recursive`).

use std::collections::BTreeMap;
use std::path::Path;

use crate::bytes::Bytes;
use crate::device::DeviceNumber;
use crate::error::Error;
use crate::file;
use crate::format::Expected;
use crate::limits::IoThrottle;
use crate::stats::Stats;

type Getter = fn(&IoThrottle) -> Option<u64>;
type Setter = fn(&mut IoThrottle, u64);

/// The four throttle files and the [`IoThrottle`] field each one holds.
const FILES: [(&str, Getter, Setter); 4] = [
    (
        "blkio.throttle.read_bps_device",
        |t| t.read_bps,
        |t, v| t.read_bps = Some(v),
    ),
    (
        "blkio.throttle.write_bps_device",
        |t| t.write_bps,
        |t, v| t.write_bps = Some(v),
    ),
    (
        "blkio.throttle.read_iops_device",
        |t| t.read_iops,
        |t, v| t.read_iops = Some(v),
    ),
    (
        "blkio.throttle.write_iops_device",
        |t| t.write_iops,
        |t, v| t.write_iops = Some(v),
    ),
];

/// Writes `MAJ:MIN VALUE` to the file of each limited direction (the kernel takes
/// one device per write).
pub(crate) fn apply(dir: &Path, throttles: &[IoThrottle]) -> Result<(), Error> {
    for t in throttles {
        for (name, get, _) in FILES {
            if let Some(v) = get(t) {
                file::write_limit(&dir.join(name), &format!("{} {v}", t.device), "io throttle")?;
            }
        }
    }
    Ok(())
}

/// A throttle file: `MAJ:MIN VALUE` per line.
pub(crate) fn parse_device_values(text: &str) -> Result<Vec<(DeviceNumber, u64)>, Expected> {
    const EXPECTED: Expected = Expected("lines of \"MAJOR:MINOR VALUE\"");
    let mut values = Vec::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let (Some(dev), Some(value), None) = (words.next(), words.next(), words.next()) else {
            return Err(EXPECTED);
        };
        let dev = dev.parse().map_err(|_| EXPECTED)?;
        values.push((dev, value.parse().map_err(|_| EXPECTED)?));
    }
    Ok(values)
}

/// The throttles, merged per device and sorted by device.
pub(crate) fn read(dir: &Path) -> Result<Vec<IoThrottle>, Error> {
    let mut by_device: BTreeMap<DeviceNumber, IoThrottle> = BTreeMap::new();
    for (name, _, set) in FILES {
        for (dev, v) in
            file::read_parsed_opt(&dir.join(name), parse_device_values)?.unwrap_or_default()
        {
            set(
                by_device
                    .entry(dev)
                    .or_insert_with(|| IoThrottle::unlimited(dev)),
                v,
            );
        }
    }
    Ok(by_device.into_values().collect())
}

/// `blkio.*io_service_bytes*`: `MAJ:MIN OP BYTES` lines (OP = Read, Write, Sync,
/// Async, Discard, Total) and a final `Total BYTES`; returns the Read and Write
/// bytes summed over devices.
pub(crate) fn parse_io_service_bytes(text: &str) -> Result<(u64, u64), Expected> {
    const EXPECTED: Expected =
        Expected("lines of \"MAJOR:MINOR OPERATION BYTES\" and \"Total BYTES\"");
    let (mut read, mut write) = (0u64, 0u64);
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Total", n] => {
                n.parse::<u64>().map_err(|_| EXPECTED)?;
            }
            [_dev, op, n] => {
                let n: u64 = n.parse().map_err(|_| EXPECTED)?;
                match *op {
                    "Read" => read = read.saturating_add(n),
                    "Write" => write = write.saturating_add(n),
                    _ => {}
                }
            }
            _ => return Err(EXPECTED),
        }
    }
    Ok((read, write))
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    for name in [
        "blkio.throttle.io_service_bytes_recursive",
        "blkio.io_service_bytes_recursive",
    ] {
        if let Some((read, write)) = file::read_parsed_opt(&dir.join(name), parse_io_service_bytes)?
        {
            stats.io_read = Some(Bytes(read));
            stats.io_write = Some(Bytes(write));
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_service_bytes_ignoring_totals() {
        let text = "\
254:0 Read 4096
254:0 Write 8192
254:0 Sync 8192
254:0 Async 4096
254:0 Discard 0
254:0 Total 12288
8:0 Read 1
8:0 Write 2
8:0 Total 3
Total 12291
";
        assert_eq!(parse_io_service_bytes(text), Ok((4097, 8194)));
        assert_eq!(parse_io_service_bytes("Total 0\n"), Ok((0, 0)));
        assert_eq!(parse_io_service_bytes(""), Ok((0, 0)));
        assert!(parse_io_service_bytes("254:0 Read x\n").is_err());
        assert!(parse_io_service_bytes("254:0\n").is_err());
    }

    #[test]
    fn device_value_files() {
        let v = parse_device_values("254:0 1048576\n8:16 10\n").unwrap();
        assert_eq!(
            v[0],
            (
                DeviceNumber {
                    major: 254,
                    minor: 0
                },
                1_048_576
            )
        );
        assert_eq!(v[1].1, 10);
        assert!(parse_device_values("254:0\n").is_err());
        assert!(parse_device_values("sda 1\n").is_err());
    }

    #[test]
    fn apply_and_read_merge_per_device() {
        let dir = tempfile::tempdir().unwrap();
        for (name, _, _) in FILES {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let dev = DeviceNumber {
            major: 254,
            minor: 0,
        };
        let t = IoThrottle {
            read_bps: Some(1 << 20),
            write_iops: Some(100),
            ..IoThrottle::unlimited(dev)
        };
        apply(dir.path(), &[t]).unwrap();
        let text =
            std::fs::read_to_string(dir.path().join("blkio.throttle.read_bps_device")).unwrap();
        assert_eq!(text, "254:0 1048576");
        assert_eq!(read(dir.path()).unwrap(), vec![t]);
    }
}
