//! v1 `cpuset` controller: `cpuset.cpus` and `cpuset.mems`.
//!
//! A new v1 cpuset starts with both files empty, and a cgroup with an empty cpuset
//! cannot hold a process, so [`copy_from_parent`] fills them for each new level.

use std::path::Path;

use crate::error::Error;
use crate::file;
use crate::format::Expected;
use crate::idset::IdSet;

pub(crate) fn parse_id_set(text: &str) -> Result<IdSet, Expected> {
    text.parse()
        .map_err(|_| Expected("a list of ids such as \"0-2,4\""))
}

/// Writes the cpus, then the memory nodes.
pub(crate) fn apply(dir: &Path, cpus: Option<&IdSet>, mems: Option<&IdSet>) -> Result<(), Error> {
    if let Some(cpus) = cpus {
        file::write_limit(&dir.join("cpuset.cpus"), &cpus.to_string(), "cpuset")?;
    }
    if let Some(mems) = mems {
        file::write_limit(
            &dir.join("cpuset.mems"),
            &mems.to_string(),
            "memory-node set",
        )?;
    }
    Ok(())
}

/// The cgroup's own cpus and memory nodes (always set on v1, so never inherited).
pub(crate) fn read(dir: &Path) -> Result<(Option<IdSet>, Option<IdSet>), Error> {
    Ok((
        file::read_parsed_opt(&dir.join("cpuset.cpus"), parse_id_set)?,
        file::read_parsed_opt(&dir.join("cpuset.mems"), parse_id_set)?,
    ))
}

/// Copies `cpuset.cpus` and `cpuset.mems` from `parent` into the new cgroup `dir`.
pub(crate) fn copy_from_parent(dir: &Path, parent: &Path) -> Result<(), Error> {
    for name in ["cpuset.cpus", "cpuset.mems"] {
        let value = file::read(&parent.join(name))?;
        let value = value.trim();
        if !value.is_empty() {
            file::write(&dir.join(name), value)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_then_applies() {
        let parent = tempfile::tempdir().unwrap();
        let child = parent.path().join("a");
        std::fs::create_dir(&child).unwrap();
        for (dir, cpus, mems) in [(parent.path(), "0-1\n", "0\n"), (&child, "", "")] {
            std::fs::write(dir.join("cpuset.cpus"), cpus).unwrap();
            std::fs::write(dir.join("cpuset.mems"), mems).unwrap();
        }
        assert_eq!(
            read(&child).unwrap(),
            (Some(IdSet::default()), Some(IdSet::default()))
        );
        copy_from_parent(&child, parent.path()).unwrap();
        let set = |s: &str| s.parse::<IdSet>().unwrap();
        assert_eq!(read(&child).unwrap(), (Some(set("0-1")), Some(set("0"))));
        apply(&child, Some(&set("1")), None).unwrap();
        assert_eq!(read(&child).unwrap(), (Some(set("1")), Some(set("0"))));
    }
}
