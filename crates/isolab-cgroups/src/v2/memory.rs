//! v2 `memory` controller: `memory.max`, `memory.swap.max` (swap alone, unlike
//! v1's memsw), `memory.low` (the reservation), `memory.current` and `memory.peak`
//! (Linux 5.19+).

use std::path::Path;

use crate::bytes::Bytes;
use crate::error::Error;
use crate::file;
use crate::format::{flat_get, flat_keyed, max_or_u64, single_u64};
use crate::stats::Stats;

pub(crate) fn apply(dir: &Path, max: Option<Bytes>, swap: Option<Bytes>) -> Result<(), Error> {
    if let Some(max) = max {
        file::write_limit(&dir.join("memory.max"), &max.0.to_string(), "memory limit")?;
    }
    if let Some(swap) = swap {
        file::write_limit(
            &dir.join("memory.swap.max"),
            &swap.0.to_string(),
            "swap limit (needs CONFIG_MEMCG_SWAP and swap accounting)",
        )?;
    }
    Ok(())
}

/// Writes the reservation to `memory.low`.
pub(crate) fn apply_reservation(dir: &Path, reservation: Bytes) -> Result<(), Error> {
    file::write_limit(
        &dir.join("memory.low"),
        &reservation.0.to_string(),
        "memory reservation",
    )
}

/// `memory.low`: `None` when 0 (no protection) or not provided; `max` (all of the
/// cgroup's memory) is `u64::MAX` bytes.
pub(crate) fn read_reservation(dir: &Path) -> Result<Option<Bytes>, Error> {
    let low = file::read_parsed_opt(&dir.join("memory.low"), max_or_u64)?;
    Ok(low
        .map(|v| v.unwrap_or(u64::MAX))
        .filter(|&v| v != 0)
        .map(Bytes))
}

/// (memory limit, swap limit), `None` when `max` or not provided.
pub(crate) fn read(dir: &Path) -> Result<(Option<Bytes>, Option<Bytes>), Error> {
    let read =
        |name| file::read_parsed_opt(&dir.join(name), max_or_u64).map(|v| v.flatten().map(Bytes));
    Ok((read("memory.max")?, read("memory.swap.max")?))
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    let read = |name| file::read_parsed_opt(&dir.join(name), single_u64).map(|v| v.map(Bytes));
    stats.memory_current = read("memory.current")?;
    stats.memory_peak = read("memory.peak")?;
    stats.memory_major_faults = file::read_parsed_opt(&dir.join("memory.stat"), |text| {
        flat_keyed(text).map(|pairs| flat_get(&pairs, "pgmajfault"))
    })?
    .flatten();
    Ok(())
}
