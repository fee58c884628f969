//! `hugetlb` controller: one limit file per huge page size the kernel has,
//! `hugetlb.<size>.limit_in_bytes` on v1 and `hugetlb.<size>.max` on v2 (whose module
//! uses these functions with its own suffix and parser).

use std::fs;
use std::path::Path;

use crate::bytes::Bytes;
use crate::error::Error;
use crate::file;
use crate::format::Expected;
use crate::limits::{HugePageSize, HugetlbLimit};
use crate::v1::memory::parse_limit;

/// The v1 limit file of a page size ends so.
const V1_SUFFIX: &str = ".limit_in_bytes";

/// Writes each limit to `hugetlb.<size><suffix>`, and to the limit of reservations,
/// `hugetlb.<size>.rsvd<suffix>`, where the kernel has one (Linux 5.7+), as runc does
/// (OCI: "reservation limits if supported"); a page size the kernel does not have
/// (no such file) is [`Error::MissingFile`].
pub(crate) fn apply_files(dir: &Path, suffix: &str, limits: &[HugetlbLimit]) -> Result<(), Error> {
    for l in limits {
        let value = l.limit.0.to_string();
        file::write_limit(
            &dir.join(format!("hugetlb.{}{suffix}", l.page_size)),
            &value,
            "huge page limit (of a page size this kernel has: see /sys/kernel/mm/hugepages)",
        )?;
        let rsvd = dir.join(format!("hugetlb.{}.rsvd{suffix}", l.page_size));
        if rsvd.exists() {
            file::write(&rsvd, &value)?;
        }
    }
    Ok(())
}

/// The limits in the files `hugetlb.<size><suffix>` of `dir`, by page size; a file
/// that `parse` reads as unlimited (`None`) is left out, and so are files of other
/// kinds (`hugetlb.2MB.usage_in_bytes`, `hugetlb.2MB.rsvd.max`).
pub(crate) fn read_files(
    dir: &Path,
    suffix: &str,
    parse: fn(&str) -> Result<Option<u64>, Expected>,
) -> Result<Vec<HugetlbLimit>, Error> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::ReadDir {
                path: dir.to_owned(),
                source,
            })
        }
    };
    let mut limits = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(size) = name
            .to_str()
            .and_then(|n| n.strip_prefix("hugetlb."))
            .and_then(|n| n.strip_suffix(suffix))
            .and_then(|size| size.parse::<HugePageSize>().ok())
        else {
            continue;
        };
        if let Some(Some(limit)) = file::read_parsed_opt(&entry.path(), parse)? {
            limits.push(HugetlbLimit {
                page_size: size,
                limit: Bytes(limit),
            });
        }
    }
    limits.sort_by_key(|l| l.page_size);
    Ok(limits)
}

/// Writes each limit to `hugetlb.<size>.limit_in_bytes`.
pub(crate) fn apply(dir: &Path, limits: &[HugetlbLimit]) -> Result<(), Error> {
    apply_files(dir, V1_SUFFIX, limits)
}

/// The limited page sizes, by size.
pub(crate) fn read(dir: &Path) -> Result<Vec<HugetlbLimit>, Error> {
    read_files(dir, V1_SUFFIX, |text| {
        parse_limit(text).map(|limit| limit.map(|b| b.0))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_round_trip_and_unlimited_sizes_are_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let unlimited = "9223372036854771712\n";
        for f in [
            "hugetlb.2MB.limit_in_bytes",
            "hugetlb.1GB.limit_in_bytes",
            "hugetlb.2MB.usage_in_bytes",
        ] {
            fs::write(dir.path().join(f), unlimited).unwrap();
        }
        assert_eq!(read(dir.path()).unwrap(), Vec::new());
        let two_mb: HugePageSize = "2MB".parse().unwrap();
        let limit = HugetlbLimit {
            page_size: two_mb,
            limit: Bytes::mib(64),
        };
        apply(dir.path(), &[limit]).unwrap();
        assert_eq!(read(dir.path()).unwrap(), vec![limit]);
        assert!(!dir.path().join("hugetlb.2MB.rsvd.limit_in_bytes").exists());
        // The limit of reservations too, where the kernel has one.
        let rsvd = dir.path().join("hugetlb.1GB.rsvd.limit_in_bytes");
        fs::write(&rsvd, unlimited).unwrap();
        let one_gb = HugetlbLimit {
            page_size: "1GB".parse().unwrap(),
            limit: Bytes::gib(1),
        };
        apply(dir.path(), &[one_gb]).unwrap();
        assert_eq!(fs::read_to_string(&rsvd).unwrap(), "1073741824");
        assert_eq!(read(dir.path()).unwrap(), vec![limit, one_gb]);
        // A page size this kernel does not have.
        let err = apply(
            dir.path(),
            &[HugetlbLimit {
                page_size: "16GB".parse().unwrap(),
                limit: Bytes::gib(16),
            }],
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("hugetlb.16GB.limit_in_bytes") && err.contains("huge page limit"),
            "{err}"
        );
    }
}
