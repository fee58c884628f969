//! Device access rules: Docker's default allowlist and writing it to a cgroup v1 `devices`
//! controller.
//!
//! On cgroup v1 the rules are lines written to `devices.deny` / `devices.allow`
//! (`c 1:3 rwm`). On cgroup v2 device control is an eBPF program attached to the cgroup
//! (`BPF_CGROUP_DEVICE`); this module does not build one, and [`write_v1_rules`] refuses a v2
//! directory with [`SecurityError::DevicesCgroupV2`].

use std::fmt;
use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Value};

use super::error::SecurityError;

/// Which kind of device a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceKind {
    /// Every device, char and block (`a`).
    All,
    /// Character devices (`c`).
    Char,
    /// Block devices (`b`).
    Block,
}

impl DeviceKind {
    fn letter(self) -> char {
        match self {
            DeviceKind::All => 'a',
            DeviceKind::Char => 'c',
            DeviceKind::Block => 'b',
        }
    }
}

/// The operations a rule covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceAccess {
    /// Open for reading.
    pub read: bool,
    /// Open for writing.
    pub write: bool,
    /// `mknod` the device node.
    pub mknod: bool,
}

impl DeviceAccess {
    /// `rwm`.
    pub const ALL: DeviceAccess = DeviceAccess {
        read: true,
        write: true,
        mknod: true,
    };
    /// `m` only.
    pub const MKNOD: DeviceAccess = DeviceAccess {
        read: false,
        write: false,
        mknod: true,
    };
}

impl fmt::Display for DeviceAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (on, c) in [(self.read, 'r'), (self.write, 'w'), (self.mknod, 'm')] {
            if on {
                write!(f, "{c}")?;
            }
        }
        Ok(())
    }
}

/// One device cgroup rule: allow or deny `access` to devices of `kind` with this major and
/// minor (`None` = any, `*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceRule {
    /// Allow (`devices.allow`) or deny (`devices.deny`).
    pub allow: bool,
    /// Device kind.
    pub kind: DeviceKind,
    /// Major number, `None` for any.
    pub major: Option<u32>,
    /// Minor number, `None` for any.
    pub minor: Option<u32>,
    /// The operations covered.
    pub access: DeviceAccess,
}

impl DeviceRule {
    /// Allows `rwm` on the character device `major:minor` (`None` = any).
    pub const fn allow_char(major: u32, minor: Option<u32>) -> DeviceRule {
        DeviceRule {
            allow: true,
            kind: DeviceKind::Char,
            major: Some(major),
            minor,
            access: DeviceAccess::ALL,
        }
    }

    /// Denies everything (`a *:* rwm` in `devices.deny`), what [`write_v1_rules`]
    /// writes before the rules.
    pub const DENY_ALL: DeviceRule = DeviceRule {
        allow: false,
        kind: DeviceKind::All,
        major: None,
        minor: None,
        access: DeviceAccess::ALL,
    };

    /// Allows everything (`a *:* rwm`), the privileged rule.
    pub const fn allow_all() -> DeviceRule {
        DeviceRule {
            allow: true,
            kind: DeviceKind::All,
            major: None,
            minor: None,
            access: DeviceAccess::ALL,
        }
    }

    /// The cgroup v1 line, e.g. `c 1:3 rwm` or `c *:* m`.
    pub fn v1_line(&self) -> String {
        let num = |n: Option<u32>| n.map_or_else(|| "*".to_string(), |n| n.to_string());
        format!(
            "{} {}:{} {}",
            self.kind.letter(),
            num(self.major),
            num(self.minor),
            self.access
        )
    }

    /// The OCI `linux.resources.devices[]` entry.
    pub fn to_oci(&self) -> Value {
        let mut v = json!({"allow": self.allow, "access": self.access.to_string()});
        if self.kind != DeviceKind::All {
            v["type"] = json!(self.kind.letter().to_string());
        }
        if let Some(major) = self.major {
            v["major"] = json!(major);
        }
        if let Some(minor) = self.minor {
            v["minor"] = json!(minor);
        }
        v
    }
}

/// Docker's default device allowlist (runc's defaults as Docker uses them), applied after
/// "deny everything": `mknod` of any char or block device; `rwm` on `/dev/null` (1:3),
/// `/dev/zero` (1:5), `/dev/full` (1:7), `/dev/random` (1:8), `/dev/urandom` (1:9),
/// `/dev/tty` (5:0), `/dev/console` (5:1), `/dev/ptmx` (5:2) and `/dev/pts/*` (136:*).
/// `/dev/net/tun` (10:200), which older runc versions also allowed, is not included.
pub fn default_devices() -> Vec<DeviceRule> {
    vec![
        DeviceRule {
            allow: true,
            kind: DeviceKind::Char,
            major: None,
            minor: None,
            access: DeviceAccess::MKNOD,
        },
        DeviceRule {
            allow: true,
            kind: DeviceKind::Block,
            major: None,
            minor: None,
            access: DeviceAccess::MKNOD,
        },
        DeviceRule::allow_char(1, Some(3)),
        DeviceRule::allow_char(1, Some(5)),
        DeviceRule::allow_char(1, Some(7)),
        DeviceRule::allow_char(1, Some(8)),
        DeviceRule::allow_char(1, Some(9)),
        DeviceRule::allow_char(5, Some(0)),
        DeviceRule::allow_char(5, Some(1)),
        DeviceRule::allow_char(5, Some(2)),
        DeviceRule::allow_char(136, None),
    ]
}

/// The OCI `linux.resources.devices` list: "deny all", then `rules`.
pub fn oci_devices(rules: &[DeviceRule]) -> Value {
    let mut list = vec![json!({"allow": false, "access": "rwm"})];
    list.extend(rules.iter().map(DeviceRule::to_oci));
    Value::Array(list)
}

/// Writes `rules` into the cgroup v1 devices cgroup at `cgroup_dir`: first `a` to
/// `devices.deny` (deny everything), then each rule to `devices.allow` or `devices.deny`.
///
/// Refuses a cgroup v2 directory (one with `cgroup.controllers`), where device control is
/// an eBPF program this module does not build.
pub fn write_v1_rules(cgroup_dir: &Path, rules: &[DeviceRule]) -> Result<(), SecurityError> {
    // What kind of directory it is, asked only when it has no devices.deny (every
    // lookup in cgroupfs is a walk of the whole path).
    let mut deny = RuleFile::open(cgroup_dir, "devices.deny").map_err(|e| match e {
        SecurityError::WriteDevices { source, .. } if source.kind() == io::ErrorKind::NotFound => {
            if cgroup_dir.join("cgroup.controllers").exists() {
                SecurityError::DevicesCgroupV2 {
                    path: cgroup_dir.to_path_buf(),
                }
            } else {
                SecurityError::NotDevicesCgroup {
                    path: cgroup_dir.to_path_buf(),
                }
            }
        }
        other => other,
    })?;
    let mut allow = RuleFile::open(cgroup_dir, "devices.allow")?;
    deny.write("a")?;
    for rule in rules {
        let file = if rule.allow { &mut allow } else { &mut deny };
        file.write(&rule.v1_line())?;
    }
    Ok(())
}

/// `devices.allow` or `devices.deny`, opened once for all its rules (an open of a
/// cgroup file costs more than the write).
struct RuleFile {
    path: std::path::PathBuf,
    file: std::fs::File,
}

impl RuleFile {
    fn open(dir: &Path, name: &str) -> Result<RuleFile, SecurityError> {
        let path = dir.join(name);
        match std::fs::OpenOptions::new().append(true).open(&path) {
            Ok(file) => Ok(RuleFile { path, file }),
            Err(source) => Err(SecurityError::WriteDevices {
                path,
                data: "(open)".to_owned(),
                source,
            }),
        }
    }

    /// One `write(2)` per rule: cgroupfs parses each write as one rule.
    fn write(&mut self, line: &str) -> Result<(), SecurityError> {
        self.file
            .write_all(line.as_bytes())
            .map_err(|source| SecurityError::WriteDevices {
                path: self.path.clone(),
                data: line.to_string(),
                source,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_cgroup_v1_syntax() {
        let lines: Vec<String> = default_devices().iter().map(DeviceRule::v1_line).collect();
        assert_eq!(
            lines,
            [
                "c *:* m",
                "b *:* m",
                "c 1:3 rwm",
                "c 1:5 rwm",
                "c 1:7 rwm",
                "c 1:8 rwm",
                "c 1:9 rwm",
                "c 5:0 rwm",
                "c 5:1 rwm",
                "c 5:2 rwm",
                "c 136:* rwm"
            ]
        );
        assert_eq!(DeviceRule::allow_all().v1_line(), "a *:* rwm");
    }

    #[test]
    fn oci_list_starts_with_deny_all_and_parses() {
        let v = oci_devices(&default_devices());
        assert_eq!(v[0], json!({"allow": false, "access": "rwm"}));
        assert_eq!(
            v[3],
            json!({"allow": true, "type": "c", "major": 1, "minor": 3, "access": "rwm"})
        );
        assert_eq!(v[1], json!({"allow": true, "type": "c", "access": "m"}));
        let parsed: Vec<oci_spec::runtime::LinuxDeviceCgroup> = serde_json::from_value(v).unwrap();
        assert_eq!(parsed.len(), 12);
    }

    #[test]
    fn writes_into_a_fake_v1_dir_and_refuses_v2() {
        let dir = tempfile::tempdir().unwrap();
        for f in ["devices.allow", "devices.deny"] {
            std::fs::write(dir.path().join(f), "").unwrap();
        }
        write_v1_rules(dir.path(), &default_devices()).unwrap();
        // A regular file keeps every append, so the fake shows the exact bytes written.
        assert_eq!(
            std::fs::read_to_string(dir.path().join("devices.deny")).unwrap(),
            "a"
        );
        let allowed = std::fs::read_to_string(dir.path().join("devices.allow")).unwrap();
        assert!(allowed.starts_with("c *:* mb *:* mc 1:3 rwm"), "{allowed}");

        let v2 = tempfile::tempdir().unwrap();
        std::fs::write(v2.path().join("cgroup.controllers"), "").unwrap();
        assert!(matches!(
            write_v1_rules(v2.path(), &default_devices()),
            Err(SecurityError::DevicesCgroupV2 { .. })
        ));
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            write_v1_rules(empty.path(), &[]),
            Err(SecurityError::NotDevicesCgroup { .. })
        ));
    }

    #[test]
    fn writes_into_a_real_v1_devices_cgroup() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            isolab_skip::skip("writing a devices cgroup needs root");
            return;
        }
        let root = Path::new("/sys/fs/cgroup/devices");
        if !root.join("devices.allow").exists() {
            isolab_skip::skip(format!(
                "no cgroup v1 devices hierarchy at {} (the v2 device rules are not enforced yet)",
                root.display()
            ));
            return;
        }
        struct Guard(std::path::PathBuf);
        impl Drop for Guard {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir(&self.0);
            }
        }
        let dir = root.join(format!("isolab-sec-test-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let guard = Guard(dir.clone());
        write_v1_rules(&dir, &default_devices()).unwrap();
        let list = std::fs::read_to_string(dir.join("devices.list")).unwrap();
        let mut got: Vec<&str> = list.lines().collect();
        got.sort_unstable();
        let mut want: Vec<String> = default_devices().iter().map(DeviceRule::v1_line).collect();
        want.sort_unstable();
        assert_eq!(got, want);

        // The privileged rule turns it back into "a *:* rwm".
        write_v1_rules(&dir, &[DeviceRule::allow_all()]).unwrap();
        let list = std::fs::read_to_string(dir.join("devices.list")).unwrap();
        assert_eq!(list.trim(), "a *:* rwm");
        drop(guard);
        assert!(!dir.exists());
    }
}
