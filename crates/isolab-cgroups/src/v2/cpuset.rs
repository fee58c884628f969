//! v2 `cpuset` controller: `cpuset.cpus` and `cpuset.mems`; empty means "inherit
//! the parent's".

use std::path::Path;

use crate::error::Error;
use crate::file;
use crate::idset::IdSet;
use crate::v1::cpuset::parse_id_set;

/// The files and their format are v1's: the cpus, then the memory nodes.
pub(crate) use crate::v1::cpuset::apply;

/// The cgroup's own cpus and memory nodes; `None` when empty (inherited).
pub(crate) fn read(dir: &Path) -> Result<(Option<IdSet>, Option<IdSet>), Error> {
    let read = |name| {
        file::read_parsed_opt(&dir.join(name), parse_id_set)
            .map(|set| set.filter(|s: &IdSet| !s.is_empty()))
    };
    Ok((read("cpuset.cpus")?, read("cpuset.mems")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_is_inherited() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("cpuset.cpus"), "\n").unwrap();
        std::fs::write(dir.path().join("cpuset.mems"), "\n").unwrap();
        assert_eq!(read(dir.path()).unwrap(), (None, None));
        let one: IdSet = "1".parse().unwrap();
        apply(dir.path(), Some(&one), None).unwrap();
        assert_eq!(read(dir.path()).unwrap(), (Some(one), None));
    }
}
