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

/// Writes `memory.swappiness`, `memory.kmem.tcp.limit_in_bytes` and
/// `memory.oom_control` (1 disables the OOM killer) for what `limits` asks.
pub(crate) fn apply_v1_only(dir: &Path, limits: &crate::limits::Limits) -> Result<(), Error> {
    if let Some(s) = limits.memory_swappiness {
        file::write_limit(
            &dir.join("memory.swappiness"),
            &s.to_string(),
            "memory swappiness (0-100)",
        )?;
    }
    if let Some(tcp) = limits.memory_tcp_max {
        file::write_limit(
            &dir.join("memory.kmem.tcp.limit_in_bytes"),
            &tcp.0.to_string(),
            "TCP buffer memory limit",
        )?;
    }
    if limits.oom_kill_disabled {
        file::write_limit(&dir.join("memory.oom_control"), "1", "OOM killer switch")?;
    }
    Ok(())
}

/// Reads back what [`apply_v1_only`] writes: the swappiness when it is the cgroup's own
/// (every cgroup has one, inherited from its parent when created: `None` when it is
/// the parent's), the TCP limit when limited, and whether the OOM killer is off
/// (`oom_kill_disable 1` in `memory.oom_control`).
pub(crate) fn read_v1_only(dir: &Path, limits: &mut crate::limits::Limits) -> Result<(), Error> {
    let swappiness = |dir: &Path| file::read_parsed_opt(&dir.join("memory.swappiness"), single_u64);
    let own = swappiness(dir)?;
    let parent = match dir.parent() {
        Some(parent) => swappiness(parent).unwrap_or(None),
        None => None,
    };
    limits.memory_swappiness = own.filter(|v| Some(*v) != parent);
    limits.memory_tcp_max =
        file::read_parsed_opt(&dir.join("memory.kmem.tcp.limit_in_bytes"), parse_limit)?.flatten();
    limits.oom_kill_disabled = file::read_parsed_opt(&dir.join("memory.oom_control"), |text| {
        flat_keyed(text).map(|pairs| flat_get(&pairs, "oom_kill_disable") == Some(1))
    })?
    .unwrap_or(false);
    Ok(())
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
    fn v1_only_limits_are_written_and_read_back_the_parents_swappiness_as_unset() {
        let dir = tempfile::tempdir().unwrap();
        let leaf = dir.path().join("leaf");
        std::fs::create_dir(&leaf).unwrap();
        std::fs::write(dir.path().join("memory.swappiness"), "60\n").unwrap();
        for (file, text) in [
            ("memory.swappiness", "60\n"),
            ("memory.kmem.tcp.limit_in_bytes", "9223372036854771712\n"),
            (
                "memory.oom_control",
                "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
            ),
        ] {
            std::fs::write(leaf.join(file), text).unwrap();
        }
        let read = || {
            let mut l = crate::limits::Limits::default();
            read_v1_only(&leaf, &mut l).unwrap();
            (l.memory_swappiness, l.memory_tcp_max, l.oom_kill_disabled)
        };
        assert_eq!(read(), (None, None, false));
        let asked = crate::limits::Limits {
            memory_swappiness: Some(10),
            memory_tcp_max: Some(Bytes::mib(1)),
            oom_kill_disabled: true,
            ..Default::default()
        };
        apply_v1_only(&leaf, &asked).unwrap();
        let text = |f: &str| std::fs::read_to_string(leaf.join(f)).unwrap();
        assert_eq!(text("memory.swappiness"), "10");
        assert_eq!(text("memory.kmem.tcp.limit_in_bytes"), "1048576");
        // The kernel's file reads back as a flat keyed list; a plain file holds the "1".
        assert_eq!(text("memory.oom_control"), "1");
        std::fs::write(
            leaf.join("memory.oom_control"),
            "oom_kill_disable 1\nunder_oom 0\n",
        )
        .unwrap();
        assert_eq!(read(), (Some(10), Some(Bytes::mib(1)), true));
        let mut back = crate::limits::Limits::default();
        read_v1_only(&leaf, &mut back).unwrap();
        assert!(
            asked.differences(&back).is_empty(),
            "{:?}",
            asked.differences(&back)
        );
        // Asking for the parent's value reads back as unset, which is in force.
        let parents = crate::limits::Limits {
            memory_swappiness: Some(60),
            ..Default::default()
        };
        assert!(parents
            .differences(&crate::limits::Limits::default())
            .is_empty());
        let other = crate::limits::Limits {
            memory_swappiness: Some(5),
            ..Default::default()
        };
        assert_eq!(
            other.differences(&back),
            ["memory swappiness asked 5 read 10"]
        );
    }

    #[test]
    fn huge_limits_are_unlimited() {
        assert_eq!(parse_limit("9223372036854771712\n"), Ok(None));
        assert_eq!(parse_limit("9223372036854710272\n"), Ok(None));
        assert_eq!(parse_limit("268435456\n"), Ok(Some(Bytes::mib(256))));
        assert!(parse_limit("max").is_err());
    }
}
