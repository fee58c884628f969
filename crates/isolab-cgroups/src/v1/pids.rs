//! `pids` controller (same files on v1 and v2): `pids.max` and `pids.current`.

use std::path::Path;

use crate::error::Error;
use crate::file;
use crate::format::{max_or_u64, single_u64};
use crate::stats::Stats;

pub(crate) fn apply(dir: &Path, max: u64) -> Result<(), Error> {
    file::write_limit(&dir.join("pids.max"), &max.to_string(), "task limit")
}

/// `None` when unlimited (`max`) or not provided.
pub(crate) fn read(dir: &Path) -> Result<Option<u64>, Error> {
    Ok(file::read_parsed_opt(&dir.join("pids.max"), max_or_u64)?.flatten())
}

pub(crate) fn stats(dir: &Path, stats: &mut Stats) -> Result<(), Error> {
    stats.pids_current = file::read_parsed_opt(&dir.join("pids.current"), single_u64)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        std::fs::write(dir.path().join("pids.max"), "max\n").unwrap();
        assert_eq!(read(dir.path()).unwrap(), None);
        apply(dir.path(), 64).unwrap();
        assert_eq!(read(dir.path()).unwrap(), Some(64));
    }
}
