//! Linux capabilities: names, numbers and sets as 64-bit masks.
//!
//! [`CapabilitySet`] is a bit mask over the capability numbers of `linux/capability.h`
//! (bit `n` = capability number `n`), the same layout as the `CapEff:` line of
//! `/proc/<pid>/status`. Names are accepted as `CAP_NET_ADMIN`, `NET_ADMIN` or `net_admin`.

use std::fmt;

use super::error::SecurityError;

/// The highest capability number this table knows (`CAP_CHECKPOINT_RESTORE`, Linux 5.9+).
pub const LAST_KNOWN_CAP: u8 = 40;

/// Capability names indexed by number (`CAP_NAMES[n]` is capability `n`).
const CAP_NAMES: [&str; LAST_KNOWN_CAP as usize + 1] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_DAC_READ_SEARCH",
    "CAP_FOWNER",
    "CAP_FSETID",
    "CAP_KILL",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE",
    "CAP_NET_BROADCAST",
    "CAP_NET_ADMIN",
    "CAP_NET_RAW",
    "CAP_IPC_LOCK",
    "CAP_IPC_OWNER",
    "CAP_SYS_MODULE",
    "CAP_SYS_RAWIO",
    "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE",
    "CAP_SYS_PACCT",
    "CAP_SYS_ADMIN",
    "CAP_SYS_BOOT",
    "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE",
    "CAP_SYS_TIME",
    "CAP_SYS_TTY_CONFIG",
    "CAP_MKNOD",
    "CAP_LEASE",
    "CAP_AUDIT_WRITE",
    "CAP_AUDIT_CONTROL",
    "CAP_SETFCAP",
    "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN",
    "CAP_SYSLOG",
    "CAP_WAKE_ALARM",
    "CAP_BLOCK_SUSPEND",
    "CAP_AUDIT_READ",
    "CAP_PERFMON",
    "CAP_BPF",
    "CAP_CHECKPOINT_RESTORE",
];

/// Docker's default capabilities (moby `oci/caps/defaults.go`), in Docker's order.
const DOCKER_DEFAULT_CAPS: [&str; 14] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// Docker's 14 default capabilities, by name (`CAP_CHOWN`, `CAP_DAC_OVERRIDE`, …).
pub fn default_capabilities() -> Vec<&'static str> {
    DOCKER_DEFAULT_CAPS.to_vec()
}

/// One Linux capability, by number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Capability(u8);

impl Capability {
    /// `CAP_SYS_ADMIN` (21), the one the seccomp profile looks at most.
    pub const SYS_ADMIN: Capability = Capability(21);

    /// The capability with this number, if the table knows it.
    pub fn from_number(number: u8) -> Option<Capability> {
        (number <= LAST_KNOWN_CAP).then_some(Capability(number))
    }

    /// Parses `CAP_NET_ADMIN`, `NET_ADMIN` or `net_admin`.
    pub fn from_name(name: &str) -> Result<Capability, SecurityError> {
        let upper = name.trim().to_ascii_uppercase();
        let full = if upper.starts_with("CAP_") {
            upper
        } else {
            format!("CAP_{upper}")
        };
        CAP_NAMES
            .iter()
            .position(|known| *known == full)
            .and_then(|n| u8::try_from(n).ok())
            .map(Capability)
            .ok_or_else(|| SecurityError::UnknownCapability {
                name: name.to_string(),
            })
    }

    /// The capability number (bit index in the masks).
    pub fn number(self) -> u8 {
        self.0
    }

    /// The canonical name, `CAP_…`.
    pub fn name(self) -> &'static str {
        CAP_NAMES[usize::from(self.0)]
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of capabilities as a bit mask (bit `n` = capability `n`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CapabilitySet {
    bits: u64,
}

impl CapabilitySet {
    /// No capabilities.
    pub const fn empty() -> CapabilitySet {
        CapabilitySet { bits: 0 }
    }

    /// Every capability this table knows (0 ..= [`LAST_KNOWN_CAP`]).
    pub const fn all() -> CapabilitySet {
        CapabilitySet {
            bits: (1u64 << (LAST_KNOWN_CAP + 1)) - 1,
        }
    }

    /// Docker's default set (see [`default_capabilities`]); its mask is `0xa80425fb`.
    pub fn docker_default() -> CapabilitySet {
        let mut set = CapabilitySet::empty();
        for name in DOCKER_DEFAULT_CAPS {
            if let Ok(cap) = Capability::from_name(name) {
                set.insert(cap);
            }
        }
        set
    }

    /// A set from a raw mask; bits above [`LAST_KNOWN_CAP`] are dropped.
    pub const fn from_mask(bits: u64) -> CapabilitySet {
        CapabilitySet {
            bits: bits & CapabilitySet::all().bits,
        }
    }

    /// Parses a list of names; `ALL` stands for [`CapabilitySet::all`].
    pub fn from_names<I, S>(names: I) -> Result<CapabilitySet, SecurityError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut set = CapabilitySet::empty();
        for name in names {
            let name = name.as_ref();
            if name.trim().eq_ignore_ascii_case("ALL") {
                set = set.union(CapabilitySet::all());
            } else {
                set.insert(Capability::from_name(name)?);
            }
        }
        Ok(set)
    }

    /// The raw mask, as printed (in hex) by `/proc/<pid>/status`.
    pub const fn mask(self) -> u64 {
        self.bits
    }

    /// Whether `cap` is in the set.
    pub fn contains(self, cap: Capability) -> bool {
        self.bits & (1u64 << cap.0) != 0
    }

    /// Adds `cap`.
    pub fn insert(&mut self, cap: Capability) {
        self.bits |= 1u64 << cap.0;
    }

    /// Removes `cap`.
    pub fn remove(&mut self, cap: Capability) {
        self.bits &= !(1u64 << cap.0);
    }

    /// Capabilities in either set.
    pub const fn union(self, other: CapabilitySet) -> CapabilitySet {
        CapabilitySet {
            bits: self.bits | other.bits,
        }
    }

    /// Capabilities in both sets.
    pub const fn intersection(self, other: CapabilitySet) -> CapabilitySet {
        CapabilitySet {
            bits: self.bits & other.bits,
        }
    }

    /// Capabilities in `self` but not in `other`.
    pub const fn difference(self, other: CapabilitySet) -> CapabilitySet {
        CapabilitySet {
            bits: self.bits & !other.bits,
        }
    }

    /// Whether the set is empty.
    pub const fn is_empty(self) -> bool {
        self.bits == 0
    }

    /// The capabilities in ascending number order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        (0..=LAST_KNOWN_CAP)
            .map(Capability)
            .filter(move |cap| self.contains(*cap))
    }

    /// The canonical names in ascending number order.
    pub fn names(self) -> Vec<&'static str> {
        self.iter().map(Capability::name).collect()
    }

    /// The two 32-bit words of the set, low word first, as `capset(2)` (version 3) wants them.
    pub(crate) fn words(self) -> [u32; 2] {
        // Truncation is the point: split the 64-bit mask into its two halves.
        [self.bits as u32, (self.bits >> 32) as u32]
    }
}

impl fmt::Display for CapabilitySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.names().join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docker_default_mask_matches_docker_proc_status() {
        // `docker run --rm alpine grep CapEff /proc/self/status` prints 00000000a80425fb.
        assert_eq!(CapabilitySet::docker_default().mask(), 0xa804_25fb);
        assert_eq!(CapabilitySet::docker_default().iter().count(), 14);
        assert_eq!(default_capabilities().len(), 14);
    }

    #[test]
    fn names_parse_in_every_spelling() {
        let a = Capability::from_name("CAP_NET_ADMIN").unwrap();
        assert_eq!(a.number(), 12);
        assert_eq!(Capability::from_name("net_admin").unwrap(), a);
        assert_eq!(Capability::from_name(" NET_ADMIN ").unwrap(), a);
        assert_eq!(a.to_string(), "CAP_NET_ADMIN");
        assert!(matches!(
            Capability::from_name("CAP_FLY"),
            Err(SecurityError::UnknownCapability { .. })
        ));
        assert_eq!(
            Capability::from_name("CAP_CHECKPOINT_RESTORE")
                .unwrap()
                .number(),
            40
        );
    }

    #[test]
    fn table_numbers_match_linux_capability_h() {
        for (name, number) in [
            ("CAP_CHOWN", 0),
            ("CAP_SETPCAP", 8),
            ("CAP_NET_RAW", 13),
            ("CAP_SYS_CHROOT", 18),
            ("CAP_SYS_ADMIN", 21),
            ("CAP_MKNOD", 27),
            ("CAP_AUDIT_WRITE", 29),
            ("CAP_SETFCAP", 31),
            ("CAP_SYSLOG", 34),
            ("CAP_BPF", 39),
        ] {
            assert_eq!(
                Capability::from_name(name).unwrap().number(),
                number,
                "{name}"
            );
        }
        assert_eq!(Capability::SYS_ADMIN.name(), "CAP_SYS_ADMIN");
        assert_eq!(Capability::from_number(41), None);
    }

    #[test]
    fn set_algebra_and_words() {
        let all = CapabilitySet::all();
        assert_eq!(all.mask(), 0x1ff_ffff_ffff);
        assert_eq!(all.iter().count(), 41);
        assert_eq!(all.words(), [0xffff_ffff, 0x1ff]);
        let set = CapabilitySet::from_names(["ALL"]).unwrap();
        assert_eq!(set, all);
        let d = CapabilitySet::docker_default();
        assert_eq!(all.intersection(d), d);
        assert!(d.difference(all).is_empty());
        assert_eq!(CapabilitySet::from_mask(u64::MAX), all);
        let mut s = CapabilitySet::empty();
        s.insert(Capability::SYS_ADMIN);
        assert!(s.contains(Capability::SYS_ADMIN));
        assert_eq!(s.names(), vec!["CAP_SYS_ADMIN"]);
        s.remove(Capability::SYS_ADMIN);
        assert!(s.is_empty());
        assert_eq!(
            CapabilitySet::from_names(["CAP_KILL", "chown"])
                .unwrap()
                .to_string(),
            "CAP_CHOWN,CAP_KILL"
        );
    }
}
