//! v2 `memory` controller: `memory.max`, `memory.swap.max` (swap alone, unlike
//! v1's memsw), `memory.current` and `memory.peak` (Linux 5.19+).

use std::path::Path;

use crate::bytes::Bytes;
use crate::error::Error;
use crate::file;
use crate::format::{max_or_u64, single_u64};
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
    Ok(())
}
