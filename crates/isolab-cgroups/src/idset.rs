//! [`IdSet`]: a set of cpu or memory-node ids in the kernel's list format.

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use crate::error::InvalidValue;

/// A set of cpu or memory-node ids, parsed from and printed as the kernel's list
/// format (`cpuset.cpus`, `/sys/devices/system/cpu/online`): `"0-2,4"`.
///
/// The empty set prints as the empty string, which is also what an unset v1
/// `cpuset.cpus` contains.
#[derive(
    Debug,
    Clone,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct IdSet(pub BTreeSet<u32>);

const EXPECTED: &str =
    "a comma-separated list of ids and ranges such as \"0-2,4\", ids below 65536";

/// Ids at or above this are rejected: no kernel has that many cpus or nodes, and a
/// typo such as "0-4000000000" must not allocate gigabytes.
const ID_LIMIT: u32 = 1 << 16;

impl IdSet {
    /// The number of ids.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set holds no id.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The ids in increasing order.
    pub fn iter(&self) -> std::collections::btree_set::Iter<'_, u32> {
        self.0.iter()
    }

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        self.0.contains(&id)
    }

    /// Whether every id of `self` is also in `other`.
    pub fn is_subset(&self, other: &IdSet) -> bool {
        self.0.is_subset(&other.0)
    }
}

impl FromStr for IdSet {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidValue::new("id list", s, EXPECTED);
        let mut set = BTreeSet::new();
        for part in s.trim().split(',') {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (lo.trim(), hi.trim()),
                None => (part, part),
            };
            let lo: u32 = lo.parse().map_err(|_| invalid())?;
            let hi: u32 = hi.parse().map_err(|_| invalid())?;
            if lo > hi || hi >= ID_LIMIT {
                return Err(invalid());
            }
            set.extend(lo..=hi);
        }
        Ok(IdSet(set))
    }
}

impl fmt::Display for IdSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut ids = self.0.iter().copied().peekable();
        let mut first = true;
        while let Some(start) = ids.next() {
            let mut end = start;
            while let Some(next) = ids.next_if(|&id| Some(id) == end.checked_add(1)) {
                end = next;
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
        }
        Ok(())
    }
}

impl FromIterator<u32> for IdSet {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        IdSet(iter.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a IdSet {
    type Item = &'a u32;
    type IntoIter = std::collections::btree_set::Iter<'a, u32>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl TryFrom<String> for IdSet {
    type Error = InvalidValue;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<IdSet> for String {
    fn from(set: IdSet) -> String {
        set.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(s: &str) -> Vec<u32> {
        s.parse::<IdSet>().unwrap().iter().copied().collect()
    }

    #[test]
    fn parses_kernel_lists() {
        assert_eq!(ids("0-2,4"), vec![0, 1, 2, 4]);
        assert_eq!(ids("0\n"), vec![0]);
        assert_eq!(ids(""), Vec::<u32>::new());
        assert_eq!(ids(" 3 , 1-1 "), vec![1, 3]);
        assert_eq!(ids("1,0"), vec![0, 1]);
    }

    #[test]
    fn rejects_garbage() {
        for bad in ["a", "2-1", "1-", "-1", "0-2-3", "1;2", "0-4000000000"] {
            assert!(bad.parse::<IdSet>().is_err(), "{bad}");
        }
        let err = "x".parse::<IdSet>().unwrap_err().to_string();
        assert!(err.contains("\"x\""), "{err}");
    }

    #[test]
    fn prints_ranges() {
        let set: IdSet = [0, 1, 2, 4, 6, 7].into_iter().collect();
        assert_eq!(set.to_string(), "0-2,4,6-7");
        assert_eq!(IdSet::default().to_string(), "");
        let top: IdSet = [u32::MAX - 1, u32::MAX].into_iter().collect();
        assert_eq!(top.to_string(), format!("{}-{}", u32::MAX - 1, u32::MAX));
        assert_eq!("65535".parse::<IdSet>().unwrap().len(), 1);
    }

    #[test]
    fn round_trips() {
        for s in ["0-2,4", "7", "0-63", ""] {
            assert_eq!(s.parse::<IdSet>().unwrap().to_string(), s);
        }
    }
}
