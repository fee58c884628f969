//! [`DeviceNumber`]: a block device's `major:minor`, as the mount table, the kernel's
//! io files and io limits name it.

use std::fmt;
use std::str::FromStr;

use crate::error::InvalidValue;

/// A block device number, `major:minor` as in `/sys/dev/block/254:0` and the
/// kernel's io files.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct DeviceNumber {
    /// Major number (the driver).
    pub major: u32,
    /// Minor number (the device or partition).
    pub minor: u32,
}

impl DeviceNumber {
    /// The whole-disk block device holding `path` (what io throttles apply to):
    /// `stat` gives the file system's device; a partition maps to its disk through
    /// `<sys>/dev/block` (`sys` is normally `/sys`). `Ok(None)` when the file system
    /// has no block device (tmpfs, overlay, proc).
    pub fn backing_disk(
        path: &std::path::Path,
        sys: &std::path::Path,
    ) -> std::io::Result<Option<DeviceNumber>> {
        use std::os::unix::fs::MetadataExt;
        let dev = DeviceNumber::from_dev(std::fs::metadata(path)?.dev());
        let block = sys.join(format!("dev/block/{dev}"));
        if dev.major == 0 || !block.exists() {
            return Ok(None);
        }
        if !block.join("partition").exists() {
            return Ok(Some(dev));
        }
        let disk = std::fs::canonicalize(&block)
            .ok()
            .and_then(|p| p.parent().map(|p| p.join("dev")))
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|s| s.trim().parse().ok());
        Ok(Some(disk.unwrap_or(dev)))
    }

    /// Decodes a Linux `dev_t` (as in `st_dev` / `st_rdev` of
    /// `std::os::unix::fs::MetadataExt`), using glibc's `major()`/`minor()` encoding.
    pub fn from_dev(dev: u64) -> DeviceNumber {
        let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
        let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
        DeviceNumber {
            major: major as u32,
            minor: minor as u32,
        }
    }
}

impl FromStr for DeviceNumber {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidValue::new("device number", s, "MAJOR:MINOR such as \"254:0\"");
        let (major, minor) = s.trim().split_once(':').ok_or_else(invalid)?;
        Ok(DeviceNumber {
            major: major.parse().map_err(|_| invalid())?,
            minor: minor.parse().map_err(|_| invalid())?,
        })
    }
}

impl fmt::Display for DeviceNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.major, self.minor)
    }
}

impl TryFrom<String> for DeviceNumber {
    type Error = InvalidValue;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<DeviceNumber> for String {
    fn from(d: DeviceNumber) -> String {
        d.to_string()
    }
}
