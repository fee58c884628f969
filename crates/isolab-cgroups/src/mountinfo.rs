//! The mount table of a process, `/proc/PID/mountinfo` (proc(5)): [`MountEntry`],
//! [`parse_mountinfo`] for its text and [`read_mountinfo`] for the file.
//!
//! Each line is `ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE
//! SOURCE SUPER_OPTIONS`; the kernel escapes space, tab, newline and backslash in
//! paths as `\040`, `\011`, `\012` and `\134`. This is isolab's one reader of it:
//! cgroup detection ([`crate::Hierarchy`]), the engines' cleanup (mounts below a
//! run's directory, cgroup hierarchies) and the image builder's safety check all
//! use it.

use std::path::{Path, PathBuf};

use crate::device::DeviceNumber;
use crate::error::{Error, InvalidValue};
use crate::file;

/// The mount table of the calling process, relative to a proc file system's root:
/// `<proc>/self/mountinfo` (see [`mountinfo_path`]).
const SELF_MOUNTINFO: &str = "self/mountinfo";

/// One line of a `mountinfo` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Unique id of the mount (may be reused after an unmount).
    pub mount_id: u32,
    /// Id of the parent mount (its own id for the root of the namespace's tree).
    pub parent_id: u32,
    /// `st_dev` of files on this file system.
    pub device: DeviceNumber,
    /// The directory of the file system that forms the root of this mount (`/`
    /// unless it is a bind mount of a subdirectory), escapes decoded.
    pub root: PathBuf,
    /// Where it is mounted, relative to the process's root, escapes decoded.
    pub mount_point: PathBuf,
    /// Per-mount options (`rw,nosuid,relatime`).
    pub options: String,
    /// Optional fields before the ` - ` separator (`shared:9`, `master:1`, …).
    pub optional_fields: Vec<String>,
    /// File system type (`cgroup`, `cgroup2`, `overlay`, `ext4`, …).
    pub fstype: String,
    /// File-system-specific source (`/dev/vda1`, `cgroup`, `tmpfs`), escapes decoded.
    pub source: String,
    /// Per-superblock options; for cgroup v1 they name the controllers (`rw,cpu,cpuacct`).
    pub super_options: String,
}

/// What a mountinfo line looks like (in errors).
pub(crate) const LINE_FORMAT: &str =
    "\"ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS\"";

impl MountEntry {
    /// Parses one line of a `mountinfo` file (without its newline).
    pub fn parse(line: &str) -> Result<MountEntry, InvalidValue> {
        let invalid = || InvalidValue::new("mountinfo line", line, LINE_FORMAT);
        let fields: Vec<&str> = line.split(' ').collect();
        let sep = fields
            .iter()
            .skip(6)
            .position(|f| *f == "-")
            .map(|i| i + 6)
            .ok_or_else(invalid)?;
        let (Some(fstype), Some(source), Some(super_options)) = (
            fields.get(sep + 1),
            fields.get(sep + 2),
            fields.get(sep + 3),
        ) else {
            return Err(invalid());
        };
        Ok(MountEntry {
            mount_id: fields[0].parse().map_err(|_| invalid())?,
            parent_id: fields[1].parse().map_err(|_| invalid())?,
            device: fields[2].parse().map_err(|_| invalid())?,
            root: PathBuf::from(unescape_octal(fields[3])),
            mount_point: PathBuf::from(unescape_octal(fields[4])),
            options: fields[5].to_owned(),
            optional_fields: fields[6..sep].iter().map(|f| (*f).to_owned()).collect(),
            fstype: (*fstype).to_owned(),
            source: unescape_octal(source),
            super_options: (*super_options).to_owned(),
        })
    }

    /// Whether `option` is one of the comma-separated super options (for cgroup v1
    /// hierarchies: whether it holds controller `option`).
    pub fn has_super_option(&self, option: &str) -> bool {
        self.super_options.split(',').any(|o| o == option)
    }

    /// Whether this is a cgroup hierarchy, v1 (`cgroup`) or v2 (`cgroup2`).
    pub fn is_cgroup(&self) -> bool {
        self.fstype == "cgroup" || self.fstype == "cgroup2"
    }
}

/// What to do with a line that is not a mount entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Malformed {
    /// Fail with [`Error::Mountinfo`] naming the line: for decisions made from the
    /// table (which cgroup layout the host has).
    Fail,
    /// Skip it: for best-effort cleanup, where one line that cannot be read must not
    /// stop the removal of what the others name.
    Skip,
}

/// Parses the text of a `mountinfo` file, in the order of its lines (a mount listed
/// later is mounted over an earlier one at the same point). Empty lines are ignored;
/// `path` only names the file in errors.
pub fn parse_mountinfo(
    path: &Path,
    text: &str,
    malformed: Malformed,
) -> Result<Vec<MountEntry>, Error> {
    let mut entries = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match MountEntry::parse(line) {
            Ok(entry) => entries.push(entry),
            Err(_) if malformed == Malformed::Skip => {}
            Err(e) => {
                return Err(Error::Mountinfo {
                    path: path.to_owned(),
                    line_no: i + 1,
                    line: line.to_owned(),
                    expected: e.expected,
                })
            }
        }
    }
    Ok(entries)
}

/// Reads and parses the `mountinfo` file at `path` (usually
/// [`mountinfo_path`]`("/proc")`); errors name the file.
pub fn read_mountinfo(path: &Path, malformed: Malformed) -> Result<Vec<MountEntry>, Error> {
    parse_mountinfo(path, &file::read(path)?, malformed)
}

/// The calling process's mount table in the proc file system mounted at `proc`
/// (normally `/proc`): `<proc>/self/mountinfo`.
pub fn mountinfo_path(proc: &Path) -> PathBuf {
    proc.join(SELF_MOUNTINFO)
}

/// Undoes the kernel's octal escaping of space, tab, newline and backslash in
/// mountinfo paths (`\040`, `\011`, `\012`, `\134`). A backslash not followed by
/// three octal digits stays as it is.
fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                let v = d.iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
                out.push(u8::try_from(v).unwrap_or(b'?'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: &str = "/proc/self/mountinfo";

    #[test]
    fn every_field_with_optional_fields() {
        let e = MountEntry::parse(
            "36 25 0:31 / /sys/fs/cgroup/cpu rw,nosuid,relatime shared:12 master:3 - cgroup cgroup rw,cpu",
        )
        .unwrap();
        assert_eq!(e.mount_id, 36);
        assert_eq!(e.parent_id, 25);
        assert_eq!(
            e.device,
            DeviceNumber {
                major: 0,
                minor: 31
            }
        );
        assert_eq!(e.root, Path::new("/"));
        assert_eq!(e.mount_point, Path::new("/sys/fs/cgroup/cpu"));
        assert_eq!(e.options, "rw,nosuid,relatime");
        assert_eq!(e.optional_fields, ["shared:12", "master:3"]);
        assert_eq!(e.fstype, "cgroup");
        assert_eq!(e.source, "cgroup");
        assert_eq!(e.super_options, "rw,cpu");
        assert!(e.has_super_option("cpu") && !e.has_super_option("cpuacct"));
        assert!(e.is_cgroup());

        // No optional fields; a bind mount of a subdirectory; an empty source.
        let e = MountEntry::parse("44 27 254:0 /d /var/lib/isolab/docker rw - ext4 /dev/vda rw")
            .unwrap();
        assert!(e.optional_fields.is_empty());
        assert_eq!(e.root, Path::new("/d"));
        assert_eq!(e.source, "/dev/vda");
        assert!(!e.is_cgroup());
        let e = MountEntry::parse("50 1 0:50 / /mnt rw - tmpfs  rw").unwrap();
        assert_eq!((e.source.as_str(), e.super_options.as_str()), ("", "rw"));
    }

    #[test]
    fn mountinfo_escapes() {
        // Moved from `hierarchy.rs`.
        let e = MountEntry::parse(
            r"40 31 0:37 / /mnt/my\040cgroups\134x rw,relatime - cgroup cgroup rw,pids",
        )
        .unwrap();
        assert_eq!(e.mount_point, Path::new("/mnt/my cgroups\\x"));
        assert_eq!(e.fstype, "cgroup");
        assert_eq!(e.super_options, "rw,pids");
        assert_eq!(unescape_octal(r"a\011b\012c\9"), "a\tb\nc\\9");
        assert_eq!(unescape_octal(r"tail\04"), r"tail\04");
        // Moved from `isolab-image`'s skeleton.
        assert_eq!(unescape_octal("/a\\040b"), "/a b");
        assert!(MountEntry::parse("1 2 3 4 5 6 - cgroup").is_err());
        // The root and the source are decoded too.
        let e = MountEntry::parse(r"41 31 0:37 /a\011b /mnt rw - tmpfs my\040src rw").unwrap();
        assert_eq!(e.root, Path::new("/a\tb"));
        assert_eq!(e.source, "my src");
    }

    #[test]
    fn malformed_lines_fail_or_are_skipped() {
        // Moved from the oci engine's tests: its cleanup skips what it cannot read.
        let text = "36 25 0:31 / /sys/fs/cgroup/cpu rw,nosuid,relatime shared:12 - cgroup cgroup rw,cpu\n\
                    40 22 0:50 / /run/isolab/oci/a\\040b/rootfs rw,relatime - overlay overlay rw,lowerdir=/x\n\
                    garbage\n";
        let m = parse_mountinfo(Path::new(P), text, Malformed::Skip).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].mount_point, Path::new("/sys/fs/cgroup/cpu"));
        assert_eq!(m[0].fstype, "cgroup");
        assert_eq!(m[0].super_options, "rw,cpu");
        assert_eq!(m[0].options, "rw,nosuid,relatime");
        assert_eq!(m[1].mount_point, Path::new("/run/isolab/oci/a b/rootfs"));

        let err = parse_mountinfo(Path::new(P), text, Malformed::Fail)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("line 3") && err.contains(P) && err.contains("\"garbage\""),
            "{err}"
        );
        // Not numbers where the ids and the device are.
        for bad in [
            "x 1 0:1 / / rw - ext4 /dev/vda rw",
            "1 1 0-1 / / rw - ext4 /dev/vda rw",
        ] {
            assert!(MountEntry::parse(bad).is_err(), "{bad}");
        }
        assert!(parse_mountinfo(Path::new(P), "\n\n", Malformed::Fail)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn the_file_is_read_from_a_proc_root() {
        let dir = tempfile::tempdir().unwrap();
        let path = mountinfo_path(dir.path());
        assert_eq!(path, dir.path().join("self/mountinfo"));
        let err = read_mountinfo(&path, Malformed::Skip)
            .unwrap_err()
            .to_string();
        assert!(err.contains("self/mountinfo"), "{err}");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "22 1 0:5 / /proc rw - proc proc rw\n").unwrap();
        let m = read_mountinfo(&path, Malformed::Fail).unwrap();
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].fstype, "proc");
    }

    #[test]
    fn this_process_table_parses_strictly() {
        let m = read_mountinfo(&mountinfo_path(Path::new("/proc")), Malformed::Fail).unwrap();
        assert!(m.iter().any(|e| e.mount_point == Path::new("/")));
    }
}
