//! [`ContainerId`]: the one name of a container on this host, valid for isolab's
//! runtime and for every engine isolab drives.

use std::fmt;
use std::str::FromStr;

/// The name of a container on this host: 2 to 64 bytes of lowercase ASCII letters,
/// digits, `-`, `_` and `.`, starting with a letter or a digit
/// (`[a-z0-9][a-z0-9_.-]{1,63}`). Validated on construction, so a function that takes
/// a `&ContainerId` never checks it again.
///
/// The same id names the container in isolab-runtime (state file `<id>.json`,
/// cgroup `rt-<id>`, mount directory, default hostname, CNI container id) and in every
/// engine isolab drives (Docker and Podman container names, runc, crun and LXC ids,
/// bundle and state directories, hostnames). The rule is therefore the strictest of
/// theirs, and it still accepts every id isolab makes: the lab's job ids
/// (`exp3-pid42-c0-r1`, `isolab-exp3-pid42-c0-r1-i1-nb0`), the bench ids
/// (`isolab-bench-4242-0-3`) and the runtime's generated ones ([`ContainerId::generate`],
/// `1a2b-3c4d5e0`).
///
/// - **At least 2 bytes**: Docker's names are `[a-zA-Z0-9][a-zA-Z0-9_.-]+`.
/// - **At most 64 bytes**: the id is the container's hostname (isolab-runtime's
///   default, runc and crun through the OCI spec, LXC's `lxc.uts.name`), and Linux
///   takes at most 64 (`HOST_NAME_MAX`).
/// - **A letter or digit first**: CNI (`[a-zA-Z0-9][a-zA-Z0-9_.-]*`) and Docker
///   require it; it also keeps `.`, `..` and hidden state files out, and an id is never
///   read as an option (`-x`) on an engine's command line.
/// - **Only `[a-z0-9_.-]`**: no `/`, so the id is one path component of the state,
///   bundle and cgroup paths built from it.
/// - **Lowercase only**: two ids that differ only in case would name the same host
///   (host names compare case-insensitively), and the Docker and Podman drivers have
///   always refused capitals; isolab never makes an id with one.
///
/// This replaced four rules: isolab-runtime's `--id` (1–64 of `[A-Za-z0-9_.-]`, not
/// starting with `.`), its network's CNI check (1–128, a letter or digit first), the
/// Docker/Podman drivers' (`[a-z0-9-]`, at most 64, starting with `isolab-`) and the
/// runc/crun/LXC drivers' (1–64 of `[A-Za-z0-9_.-]`, not starting with `.` or `-`).
/// The Docker/Podman drivers' `isolab-` prefix is not part of the id rule: it is how
/// their `gc` finds the containers isolab made, and they still require it.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct ContainerId(String);

impl ContainerId {
    /// The fewest bytes an id may have.
    pub const MIN_LEN: usize = 2;
    /// The most bytes an id may have.
    pub const MAX_LEN: usize = 64;
    /// The rule, as the error messages state it.
    pub const RULE: &'static str =
        "2 to 64 lowercase letters, digits, '-', '_' or '.', starting with a letter or digit";

    /// Checks `id` against the rule (see the type's documentation).
    pub fn new(id: &str) -> Result<ContainerId, InvalidContainerId> {
        match problem(id) {
            None => Ok(ContainerId(id.to_owned())),
            Some(problem) => Err(InvalidContainerId {
                id: id.to_owned(),
                problem,
            }),
        }
    }

    /// A fresh id: the process id, a nanosecond timestamp and a counter, all
    /// hexadecimal (`1a2b-3c4d5e0`).
    pub fn generate() -> ContainerId {
        use std::sync::atomic::{AtomicU32, Ordering};
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        // Hex digits and one '-', starting with a digit, 4 to 26 bytes: always valid.
        ContainerId(format!(
            "{:x}-{:x}{:x}",
            std::process::id(),
            nanos,
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What is wrong with `id`, or `None` when it follows the rule.
fn problem(id: &str) -> Option<IdProblem> {
    let mut chars = id.char_indices();
    match chars.next() {
        None => return Some(IdProblem::TooShort { len: 0 }),
        Some((_, c)) if !(c.is_ascii_lowercase() || c.is_ascii_digit()) => {
            return Some(IdProblem::BadStart { found: c })
        }
        Some(_) => {}
    }
    let bad = chars.find(|&(_, c)| {
        !(c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'))
    });
    if let Some((at, found)) = bad {
        return Some(IdProblem::BadChar { found, at });
    }
    let len = id.len();
    if len < ContainerId::MIN_LEN {
        Some(IdProblem::TooShort { len })
    } else if len > ContainerId::MAX_LEN {
        Some(IdProblem::TooLong { len })
    } else {
        None
    }
}

impl fmt::Display for ContainerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for ContainerId {
    type Err = InvalidContainerId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ContainerId::new(s)
    }
}

impl TryFrom<String> for ContainerId {
    type Error = InvalidContainerId;

    fn try_from(s: String) -> Result<Self, Self::Error> {
        match problem(&s) {
            None => Ok(ContainerId(s)),
            Some(problem) => Err(InvalidContainerId { id: s, problem }),
        }
    }
}

impl From<ContainerId> for String {
    fn from(id: ContainerId) -> String {
        id.0
    }
}

impl PartialEq<str> for ContainerId {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ContainerId {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl AsRef<str> for ContainerId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// An id is one plain path component (no `/`, not `.` or `..`), so paths may be built
/// from it: `state_dir.join(&id)`.
impl AsRef<std::path::Path> for ContainerId {
    fn as_ref(&self) -> &std::path::Path {
        std::path::Path::new(&self.0)
    }
}

/// A string that is not a [`ContainerId`]: which character or length is wrong, and
/// what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid container id {id:?}: {problem}; a container id is {}",
    ContainerId::RULE
)]
pub struct InvalidContainerId {
    id: String,
    problem: IdProblem,
}

impl InvalidContainerId {
    /// The rejected string.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// What is wrong with it.
    pub fn problem(&self) -> IdProblem {
        self.problem
    }
}

/// What is wrong with a rejected container id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdProblem {
    /// Fewer than [`ContainerId::MIN_LEN`] bytes.
    TooShort {
        /// Its length in bytes.
        len: usize,
    },
    /// More than [`ContainerId::MAX_LEN`] bytes.
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// The first character is not a lowercase letter or a digit.
    BadStart {
        /// The character.
        found: char,
    },
    /// A character after the first is not a lowercase letter, a digit, `-`, `_` or `.`.
    BadChar {
        /// The character.
        found: char,
        /// Its byte offset in the id.
        at: usize,
    },
}

impl fmt::Display for IdProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let case = |c: char| {
            if c.is_ascii_uppercase() {
                " (use lowercase)"
            } else {
                ""
            }
        };
        match *self {
            IdProblem::TooShort { len: 0 } => f.write_str("it is empty"),
            IdProblem::TooShort { len } => write!(
                f,
                "it is {len} byte{} long, shorter than {}",
                if len == 1 { "" } else { "s" },
                ContainerId::MIN_LEN
            ),
            IdProblem::TooLong { len } => write!(
                f,
                "it is {len} bytes long, longer than {}",
                ContainerId::MAX_LEN
            ),
            IdProblem::BadStart { found } => write!(
                f,
                "it starts with {found:?}, not a lowercase letter or digit{}",
                case(found)
            ),
            IdProblem::BadChar { found, at } => {
                write!(f, "{found:?} at byte {at} is not allowed{}", case(found))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem_of(id: &str) -> IdProblem {
        ContainerId::new(id).unwrap_err().problem()
    }

    #[test]
    fn ids_isolab_makes_are_accepted() {
        for id in [
            "exp3-pid42-c0-r1",
            "isolab-exp3-pid42-c0-r1",
            "isolab-exp12-pid4194304-c17-w2-i127-nb3",
            "exp3-pid42-c0-r1-diskcal",
            "isolab-bench-4242-0-3",
            "isolab-test-4242-docker-quota",
            "isolab-test4242-pinned",
            "t-oci-crun",
            "r1",
            "abc-123_x.y",
            "a.b",
            "0x",
        ] {
            let parsed = ContainerId::new(id).unwrap();
            assert_eq!(parsed.as_str(), id);
            assert_eq!(parsed.to_string(), id);
            assert_eq!(id.parse::<ContainerId>().unwrap(), parsed);
        }
        assert!(ContainerId::new(&"a".repeat(64)).is_ok());
    }

    #[test]
    fn generated_ids_are_valid_and_fresh() {
        let (a, b) = (ContainerId::generate(), ContainerId::generate());
        assert_ne!(a, b);
        for id in [a, b] {
            assert_eq!(ContainerId::new(id.as_str()), Ok(id));
        }
    }

    #[test]
    fn each_problem_is_named() {
        assert_eq!(problem_of(""), IdProblem::TooShort { len: 0 });
        assert_eq!(problem_of("a"), IdProblem::TooShort { len: 1 });
        assert_eq!(problem_of(&"a".repeat(65)), IdProblem::TooLong { len: 65 });
        assert_eq!(
            problem_of(&"a".repeat(129)),
            IdProblem::TooLong { len: 129 }
        );
        for (id, found) in [
            ("-abc", '-'),
            (".x", '.'),
            ("..", '.'),
            ("../x", '.'),
            ("../etc", '.'),
            ("_a", '_'),
            ("Abc", 'A'),
        ] {
            assert_eq!(problem_of(id), IdProblem::BadStart { found }, "{id}");
        }
        for (id, found, at) in [
            ("isolab-UPPER", 'U', 7),
            ("a/b", '/', 1),
            ("exp3-pid42/c0-r1", '/', 10),
            ("a b", ' ', 1),
            ("a:b", ':', 1),
            ("ab+c", '+', 2),
            ("aé", 'é', 1),
        ] {
            assert_eq!(problem_of(id), IdProblem::BadChar { found, at }, "{id}");
        }
    }

    #[test]
    fn the_message_says_what_is_wrong_and_what_is_allowed() {
        let e = ContainerId::new("isolab-UPPER").unwrap_err();
        assert_eq!(e.id(), "isolab-UPPER");
        assert_eq!(
            e.to_string(),
            "invalid container id \"isolab-UPPER\": 'U' at byte 7 is not allowed (use lowercase); \
             a container id is 2 to 64 lowercase letters, digits, '-', '_' or '.', starting with a letter or digit"
        );
        let e = ContainerId::new(&"x".repeat(70)).unwrap_err().to_string();
        assert!(e.contains("70 bytes long, longer than 64"), "{e}");
        let e = ContainerId::new("-x").unwrap_err().to_string();
        assert!(e.contains("starts with '-'"), "{e}");
        let e = ContainerId::new("a").unwrap_err().to_string();
        assert!(e.contains("1 byte long, shorter than 2"), "{e}");
        let e = ContainerId::new("").unwrap_err().to_string();
        assert!(e.contains("it is empty"), "{e}");
    }

    #[test]
    fn serde_checks_the_rule() {
        let id = ContainerId::new("t-gc").unwrap();
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"t-gc\"");
        assert_eq!(serde_json::from_str::<ContainerId>("\"t-gc\"").unwrap(), id);
        let e = serde_json::from_str::<ContainerId>("\"../x\"").unwrap_err();
        assert!(e.to_string().contains("invalid container id"), "{e}");
    }
}
