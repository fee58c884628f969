//! v2 `hugetlb` controller: `hugetlb.<size>.max`, one file per huge page size (the
//! code is v1's, with v2's file suffix and `max`).

use std::path::Path;

use crate::error::Error;
use crate::format::max_or_u64;
use crate::limits::HugetlbLimit;
use crate::v1::hugetlb::{apply_files, read_files};

const SUFFIX: &str = ".max";

/// Writes each limit to `hugetlb.<size>.max`.
pub(crate) fn apply(dir: &Path, limits: &[HugetlbLimit]) -> Result<(), Error> {
    apply_files(dir, SUFFIX, limits)
}

/// The limited page sizes (`max` left out), by size.
pub(crate) fn read(dir: &Path) -> Result<Vec<HugetlbLimit>, Error> {
    read_files(dir, SUFFIX, max_or_u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bytes::Bytes;

    #[test]
    fn max_files_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["hugetlb.2MB.max", "hugetlb.1GB.max", "hugetlb.2MB.rsvd.max"] {
            std::fs::write(dir.path().join(f), "max\n").unwrap();
        }
        assert_eq!(read(dir.path()).unwrap(), Vec::new());
        let limit = HugetlbLimit {
            page_size: "1GB".parse().unwrap(),
            limit: Bytes::gib(2),
        };
        apply(dir.path(), &[limit]).unwrap();
        let text = std::fs::read_to_string(dir.path().join("hugetlb.1GB.max")).unwrap();
        assert_eq!(text, "2147483648");
        assert_eq!(read(dir.path()).unwrap(), vec![limit]);
    }
}
