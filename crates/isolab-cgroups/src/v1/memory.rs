//! v1 `memory` controller: `memory.limit_in_bytes`, `memory.memsw.limit_in_bytes`
//! (memory plus swap), `memory.soft_limit_in_bytes` (the reservation), usage and peak.

use std::path::Path;

use crate::bytes::Bytes;
use crate::error::Error;
use crate::file;
use crate::format::{flat_get, flat_keyed, single_u64, Expected};
use crate::stats::Stats;

/// The kernel reports "no limit" as `PAGE_COUNTER_MAX` pages in bytes: `LONG_MAX`
/// rounded down to the page size (9223372036854771712 with 4 KiB pages). Anything
/// from `LONG_MAX` rounded down to 64 KiB pages up counts as unlimited.
const UNLIMITED_FROM: u64 = 0x7FFF_FFFF_FFFF_0000;

/// A v1 memory limit file: a byte count, `None` when it means unlimited.
pub(crate) fn parse_limit(text: &str) -> Result<Option<Bytes>, Expected> {
    let v = single_u64(text)?;
    Ok((v < UNLIMITED_FROM).then_some(Bytes(v)))
}

/// Writes the memory limit first, then the memory+swap limit (which the kernel
/// requires to be at least the memory limit).
pub(crate) fn apply(dir: &Path, max: Option<Bytes>, memsw: Option<Bytes>) -> Result<(), Error> {
    if let Some(max) = max {
        file::write_limit(
            &dir.join("memory.limit_in_bytes"),
            &max.0.to_string(),
            "memory limit",
        )?;
    }
    if let Some(memsw) = memsw {
        file::write_limit(
            &dir.join("memory.memsw.limit_in_bytes"),
            &memsw.0.to_string(),
            "memory+swap limit (v1 needs the kernel booted with swapaccount=1)",
        )?;
    }
    Ok(())
}

/// Writes the reservation to `memory.soft_limit_in_bytes`.
pub(crate) fn apply_reservation(dir: &Path, reservation: Bytes) -> Result<(), Error> {
    file::write_limit(
        &dir.join("memory.soft_limit_in_bytes"),
        &reservation.0.to_string(),
        "memory reservation",
    )
}

/// `memory.soft_limit_in_bytes`, `None` when unlimited or not provided.
pub(crate) fn read_reservation(dir: &Path) -> Result<Option<Bytes>, Error> {
    let path = dir.join("memory.soft_limit_in_bytes");
    Ok(file::read_parsed_opt(&path, parse_limit)?.flatten())
}

/// (memory limit, memory+swap limit), `None` when unlimited or not provided.
pub(crate) fn read(dir: &Path) -> Result<(Option<Bytes>, Option<Bytes>), Error> {
    let read = |name| file::read_parsed_opt(&dir.join(name), parse_limit).map(Option::flatten);
    Ok((
        read("memory.limit_in_bytes")?,
        read("memory.memsw.limit_in_bytes")?,
    ))
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    let read = |name| file::read_parsed_opt(&dir.join(name), single_u64).map(|v| v.map(Bytes));
    stats.memory_current = read("memory.usage_in_bytes")?;
    stats.memory_peak = read("memory.max_usage_in_bytes")?;
    // `total_`: the cgroup and its descendants, as v2's keys are.
    stats.memory_major_faults = file::read_parsed_opt(&dir.join("memory.stat"), |text| {
        flat_keyed(text).map(|pairs| flat_get(&pairs, "total_pgmajfault"))
    })?
    .flatten();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_limits_are_unlimited() {
        assert_eq!(parse_limit("9223372036854771712\n"), Ok(None));
        assert_eq!(parse_limit("9223372036854710272\n"), Ok(None));
        assert_eq!(parse_limit("268435456\n"), Ok(Some(Bytes::mib(256))));
        assert!(parse_limit("max").is_err());
    }
}
