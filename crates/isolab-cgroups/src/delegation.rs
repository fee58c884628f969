//! Working without root: a cgroup v2 subtree delegated to the calling user.
//!
//! systemd delegates a cgroup to a user with `Delegate=yes` (`systemd-run --user --scope -p
//! Delegate=yes CMD`): the directory and its `cgroup.procs`, `cgroup.subtree_control` and
//! `cgroup.threads` are chowned to the user, and the controllers its parent passes on are
//! listed in its `cgroup.controllers`. Without systemd, root does the same by hand. The
//! caller then owns everything below.
//!
//! Cgroup v2 lets a cgroup either hold processes or pass controllers on to children, not
//! both. So [`Delegated::claim`] moves the caller out of its own cgroup into a leaf
//! ([`SUPERVISOR_LEAF`]), after which the own cgroup can enable controllers for the
//! cgroups the caller creates beside that leaf; [`Claimed::release`] undoes both.
//!
//! The checks name what is wrong and what to run, as BenchExec and rootless Podman do: not
//! pure v2, the cgroup not the user's, a controller not delegated, other processes in it.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::controller::Controller;
use crate::error::Error;
use crate::file;
use crate::format::words;
use crate::hierarchy::{Hierarchy, Version};
use crate::syscalls::Syscalls;

/// The leaf below the delegated cgroup that the caller moves into.
pub const SUPERVISOR_LEAF: &str = "isolab-supervisor";

/// What systemd delegates to a user's service manager unless told otherwise.
const SYSTEMD_USER_DEFAULT: &str = "cpu memory pids";

/// How to start isolab in a delegated cgroup of its own.
const HOW_TO_START: &str = "start isolab in a delegated scope of its own: \
     `systemd-run --user --scope -p Delegate=yes isolab run SPEC` (or run it as root)";

/// Why the calling user cannot work in its cgroup.
#[derive(Debug, thiserror::Error)]
pub enum DelegationError {
    /// The host mounts cgroup v1 controllers: they cannot be delegated safely.
    #[error(
        "isolab runs without root only on a pure cgroup v2 host, and this one has cgroup v1 \
         controllers ({hierarchy}): run isolab as root here"
    )]
    NotPureV2 {
        /// [`Hierarchy::describe`].
        hierarchy: String,
    },

    /// `/proc/self/cgroup` has no cgroup v2 line.
    #[error("cannot find this process's cgroup v2 path in /proc/self/cgroup ({found:?})")]
    NoOwnCgroup {
        /// What the file held.
        found: String,
    },

    /// The caller's cgroup is the root, which no user is given.
    #[error("this process is in the root cgroup, which is not delegated to you: {HOW_TO_START}")]
    RootCgroup,

    /// A file of the caller's cgroup that delegation makes the user's is not writable.
    #[error(
        "your cgroup {path} is not delegated to you (uid {uid}): {file} is not writable \
         ({error}); {HOW_TO_START}"
    )]
    NotDelegated {
        /// The caller's cgroup directory.
        path: PathBuf,
        /// The file that refused.
        file: &'static str,
        /// The caller's effective uid.
        uid: u32,
        /// What `access(2)` said.
        error: io::Error,
    },

    /// Controllers the experiment needs are not delegated.
    #[error(
        "the cgroup controllers {} are not delegated to your cgroup {path} (its \
         cgroup.controllers lists {}), and isolab needs them for {}. systemd gives users \
         `{SYSTEMD_USER_DEFAULT}` by default: as root, write \
         /etc/systemd/system/user@.service.d/delegate.conf with `[Service]` and \
         `Delegate=cpu cpuset io memory pids`, run `systemctl daemon-reload`, log in again, and \
         {HOW_TO_START}. Without systemd, root enables them for you: `echo '{}' > \
         PARENT/cgroup.subtree_control` in each cgroup above yours",
        names(missing),
        list_or_none(have),
        purposes(missing),
        plus(missing)
    )]
    MissingControllers {
        /// The caller's cgroup directory.
        path: PathBuf,
        /// The controllers wanted and absent.
        missing: Vec<Controller>,
        /// What `cgroup.controllers` lists.
        have: Vec<String>,
    },

    /// Other processes share the caller's cgroup, so it cannot pass controllers on.
    #[error(
        "your cgroup {path} also holds {} ({}), but cgroup v2 lets a cgroup either hold \
         processes or pass controllers on to the ones isolab creates: {HOW_TO_START}",
        if others.len() == 1 { "another process" } else { "other processes" },
        describe_pids(others)
    )]
    NotAlone {
        /// The caller's cgroup directory.
        path: PathBuf,
        /// The other pids, with their command names where readable.
        others: Vec<(u32, String)>,
    },

    /// A cgroup file operation failed.
    #[error(transparent)]
    Cgroup(#[from] Error),
}

fn names(cs: &[Controller]) -> String {
    cs.iter().map(|c| c.name()).collect::<Vec<_>>().join(", ")
}

fn plus(cs: &[Controller]) -> String {
    cs.iter()
        .map(|c| format!("+{}", c.name()))
        .collect::<Vec<_>>()
        .join(" ")
}

fn purposes(cs: &[Controller]) -> String {
    cs.iter()
        .map(|c| format!("{} ({})", c.purpose(), c.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

fn list_or_none(have: &[String]) -> String {
    if have.is_empty() {
        "none".to_owned()
    } else {
        have.join(" ")
    }
}

fn describe_pids(others: &[(u32, String)]) -> String {
    let shown: Vec<String> = others
        .iter()
        .take(5)
        .map(|(pid, comm)| format!("pid {pid} {comm}"))
        .collect();
    let more = others.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}

/// The cgroup v2 path of the `0::PATH` line of a `/proc/PID/cgroup` text, relative to the
/// cgroup2 mount (`""` for the root).
pub fn own_v2_path(proc_cgroup: &str) -> Option<PathBuf> {
    proc_cgroup.lines().find_map(|line| {
        let path = line.strip_prefix("0::")?;
        // A cgroup removed under the process reads "/path (deleted)"; never work there.
        (!path.ends_with(" (deleted)")).then(|| PathBuf::from(path.trim_start_matches('/')))
    })
}

/// What the host does to check access: `access(2)` for writing, and the processes in a
/// cgroup. A trait so that the checks run on a directory tree in tests.
pub trait Access {
    /// Whether the caller may write `path` (`access(path, W_OK)`).
    fn writable(&self, path: &Path) -> io::Result<()>;
    /// The command name of `pid` (`/proc/PID/comm`), empty when unreadable.
    fn command(&self, pid: u32) -> String;
}

/// The real host's [`Access`].
#[derive(Debug, Clone, Copy, Default)]
pub struct HostAccess;

impl Access for HostAccess {
    fn writable(&self, path: &Path) -> io::Result<()> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // SAFETY: a NUL-terminated path; access(2) reads it and touches nothing else.
        if unsafe { libc::access(c.as_ptr(), libc::W_OK) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn command(&self, pid: u32) -> String {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    }
}

/// The caller's own cgroup, checked to be delegated to it.
#[derive(Debug, Clone)]
pub struct Delegated {
    sys: Arc<dyn Syscalls>,
    /// The cgroup2 mount.
    mount: PathBuf,
    /// The caller's cgroup, relative to the mount.
    rel: PathBuf,
    /// Its `cgroup.controllers`.
    controllers: Vec<String>,
}

impl Delegated {
    /// [`Delegated::inspect`] for this process: its `/proc/self/cgroup` and effective
    /// uid, with the host's access checks.
    pub fn of_this_process(h: &Hierarchy) -> Result<Delegated, DelegationError> {
        let own = file::read(Path::new("/proc/self/cgroup"))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let uid = unsafe { libc::geteuid() };
        Delegated::inspect(h, &own, uid, &HostAccess)
    }

    /// Checks that the caller's cgroup (the `0::` line of `proc_cgroup`, its
    /// `/proc/self/cgroup`) in the pure v2 hierarchy `h` is delegated to it: not the
    /// root, and its `cgroup.procs` and `cgroup.subtree_control` writable. `uid` is named
    /// in the error.
    pub fn inspect(
        h: &Hierarchy,
        proc_cgroup: &str,
        uid: u32,
        access: &dyn Access,
    ) -> Result<Delegated, DelegationError> {
        let mount = match (h.version(), h.unified()) {
            (Version::V2, Some(mount)) => mount.to_owned(),
            _ => {
                return Err(DelegationError::NotPureV2 {
                    hierarchy: h.describe(),
                })
            }
        };
        let rel = own_v2_path(proc_cgroup).ok_or_else(|| DelegationError::NoOwnCgroup {
            found: proc_cgroup.trim().to_owned(),
        })?;
        if rel.as_os_str().is_empty() {
            return Err(DelegationError::RootCgroup);
        }
        let path = mount.join(&rel);
        for file in ["cgroup.procs", "cgroup.subtree_control"] {
            access
                .writable(&path.join(file))
                .map_err(|error| DelegationError::NotDelegated {
                    path: path.clone(),
                    file,
                    uid,
                    error,
                })?;
        }
        let controllers = crate::v2::available(&path)?;
        Ok(Delegated {
            sys: h.sys.clone(),
            mount,
            rel,
            controllers,
        })
    }

    /// The caller's cgroup, relative to the cgroup2 mount.
    pub fn rel(&self) -> &Path {
        &self.rel
    }

    /// Its directory.
    pub fn path(&self) -> PathBuf {
        self.mount.join(&self.rel)
    }

    /// What its `cgroup.controllers` lists: the controllers delegated with it.
    pub fn controllers(&self) -> &[String] {
        &self.controllers
    }

    /// Checks that each of `needed` is delegated.
    pub fn require(&self, needed: &[Controller]) -> Result<(), DelegationError> {
        let mut missing: Vec<Controller> = needed
            .iter()
            .copied()
            .filter(|c| !self.controllers.iter().any(|have| have == c.name()))
            .collect();
        missing.sort_unstable_by_key(|c| c.name());
        missing.dedup();
        if missing.is_empty() {
            Ok(())
        } else {
            Err(DelegationError::MissingControllers {
                path: self.path(),
                missing,
                have: self.controllers.clone(),
            })
        }
    }

    /// Moves the calling process (`pid`, all its threads) into [`SUPERVISOR_LEAF`] below
    /// its cgroup, so that the cgroup can pass controllers on to the cgroups created
    /// beside the leaf. Refuses when other processes share the cgroup.
    pub fn claim(self, pid: u32, access: &dyn Access) -> Result<Claimed, DelegationError> {
        let dir = self.path();
        let others: Vec<(u32, String)> = crate::tree::procs(&dir)
            .into_iter()
            .filter(|p| *p != pid)
            .map(|p| (p, access.command(p)))
            .collect();
        if !others.is_empty() {
            return Err(DelegationError::NotAlone { path: dir, others });
        }
        let leaf = dir.join(SUPERVISOR_LEAF);
        let created = match self.sys.mkdir(&leaf) {
            Ok(()) => true,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => false,
            Err(source) => {
                return Err(Error::CreateDir {
                    path: leaf.clone(),
                    source,
                }
                .into())
            }
        };
        if let Err(e) = file::write(&leaf.join("cgroup.procs"), &pid.to_string()) {
            if created {
                let _ = self.sys.rmdir(&leaf);
            }
            return Err(e.into());
        }
        Ok(Claimed {
            sys: self.sys,
            dir,
            rel: self.rel,
            leaf,
            created,
            pid,
            released: false,
        })
    }
}

/// The caller, moved into [`SUPERVISOR_LEAF`] of its delegated cgroup. Dropping it
/// releases it (best effort).
#[derive(Debug)]
#[must_use = "dropping it moves the process back at once"]
pub struct Claimed {
    sys: Arc<dyn Syscalls>,
    dir: PathBuf,
    rel: PathBuf,
    leaf: PathBuf,
    created: bool,
    pid: u32,
    released: bool,
}

impl Claimed {
    /// The delegated cgroup, relative to the cgroup2 mount: create cgroups below it.
    pub fn rel(&self) -> &Path {
        &self.rel
    }

    /// Moves the caller back into its cgroup and removes the leaf, once the cgroups
    /// created below are gone: the controllers passed on are taken back first (v2 puts no
    /// process in a cgroup that passes controllers on), so the cgroup is as it was found.
    pub fn release(mut self) -> Result<(), Error> {
        self.released = true;
        self.undo()
    }

    fn undo(&self) -> Result<(), Error> {
        let control = self.dir.join("cgroup.subtree_control");
        let enabled = file::read_opt(&control)?.unwrap_or_default();
        let minus: Vec<String> = words(&enabled)
            .into_iter()
            .map(|c| format!("-{c}"))
            .collect();
        if !minus.is_empty() {
            file::write(&control, &minus.join(" "))?;
        }
        file::write(&self.dir.join("cgroup.procs"), &self.pid.to_string())?;
        if self.created {
            self.sys
                .rmdir(&self.leaf)
                .map_err(|source| Error::RemoveDir {
                    path: self.leaf.clone(),
                    source,
                })?;
        }
        Ok(())
    }
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if !self.released {
            // Best effort: there is no one to tell.
            let _ = self.undo();
        }
    }
}

impl fmt::Display for Claimed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "delegated cgroup {}", self.dir.display())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::fs;

    /// Access that refuses the paths it lists.
    #[derive(Default)]
    struct FakeAccess {
        refused: RefCell<Vec<PathBuf>>,
    }

    impl Access for FakeAccess {
        fn writable(&self, path: &Path) -> io::Result<()> {
            if self.refused.borrow().iter().any(|p| p == path) {
                Err(io::Error::from_raw_os_error(libc::EACCES))
            } else {
                Ok(())
            }
        }
        fn command(&self, pid: u32) -> String {
            format!("cmd{pid}")
        }
    }

    fn tree(controllers: &str, procs: &str) -> (tempfile::TempDir, Hierarchy) {
        let root = tempfile::tempdir().unwrap();
        let own = root.path().join("user.slice/run-1.scope");
        fs::create_dir_all(&own).unwrap();
        fs::write(own.join("cgroup.controllers"), controllers).unwrap();
        fs::write(own.join("cgroup.subtree_control"), "").unwrap();
        fs::write(own.join("cgroup.procs"), procs).unwrap();
        let h = Hierarchy::v2(root.path())
            .with_syscalls(crate::testing::FakeKernel::new(root.path(), true));
        (root, h)
    }

    const OWN: &str = "0::/user.slice/run-1.scope\n";

    #[test]
    fn finds_the_v2_line() {
        assert_eq!(
            own_v2_path("12:cpu,cpuacct:/x\n0::/a/b.scope\n"),
            Some(PathBuf::from("a/b.scope"))
        );
        assert_eq!(own_v2_path("0::/\n"), Some(PathBuf::new()));
        assert_eq!(own_v2_path("0::/gone (deleted)\n"), None);
        assert_eq!(own_v2_path("4:memory:/x\n"), None);
    }

    #[test]
    fn refuses_v1_the_root_and_what_is_not_ours() {
        let access = FakeAccess::default();
        let v1 = Hierarchy::v1_under(Path::new("/nonexistent"));
        let e = Delegated::inspect(&v1, OWN, 1000, &access).unwrap_err();
        assert!(e.to_string().contains("pure cgroup v2"), "{e}");

        let (_root, h) = tree("cpu memory pids", "");
        let e = Delegated::inspect(&h, "0::/\n", 1000, &access).unwrap_err();
        assert!(matches!(e, DelegationError::RootCgroup), "{e}");
        assert!(e
            .to_string()
            .contains("systemd-run --user --scope -p Delegate=yes"));

        let own = h.unified().unwrap().join("user.slice/run-1.scope");
        access
            .refused
            .borrow_mut()
            .push(own.join("cgroup.subtree_control"));
        let e = Delegated::inspect(&h, OWN, 1000, &access).unwrap_err();
        let text = e.to_string();
        assert!(text.contains("not delegated to you (uid 1000)"), "{text}");
        assert!(text.contains("cgroup.subtree_control"), "{text}");
    }

    #[test]
    fn names_the_controllers_that_are_not_delegated_and_how_to_delegate_them() {
        let (_root, h) = tree("cpu memory pids", "");
        let d = Delegated::inspect(&h, OWN, 1000, &FakeAccess::default()).unwrap();
        assert_eq!(d.controllers(), ["cpu", "memory", "pids"]);
        d.require(&[Controller::Cpu, Controller::Memory]).unwrap();
        let e = d
            .require(&[Controller::Cpuset, Controller::Cpu, Controller::Io])
            .unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with("the cgroup controllers cpuset, io are not delegated"),
            "{text}"
        );
        assert!(text.contains("lists cpu memory pids"), "{text}");
        assert!(
            text.contains("Delegate=cpu cpuset io memory pids"),
            "{text}"
        );
        assert!(text.contains("echo '+cpuset +io'"), "{text}");
    }

    #[test]
    fn claim_refuses_company_and_moves_into_the_leaf_and_back() {
        let (root, h) = tree("cpu memory pids", "7\n42\n");
        let access = FakeAccess::default();
        let d = Delegated::inspect(&h, OWN, 1000, &access).unwrap();
        let e = d.clone().claim(7, &access).unwrap_err();
        assert!(e.to_string().contains("pid 42 cmd42"), "{e}");

        let own = root.path().join("user.slice/run-1.scope");
        fs::write(own.join("cgroup.procs"), "7\n").unwrap();
        let claimed = d.claim(7, &access).unwrap();
        assert_eq!(claimed.rel(), Path::new("user.slice/run-1.scope"));
        let leaf = own.join(SUPERVISOR_LEAF);
        assert_eq!(fs::read_to_string(leaf.join("cgroup.procs")).unwrap(), "7");
        // What a run enabled is taken back before the move back.
        fs::write(own.join("cgroup.subtree_control"), "cpu memory").unwrap();
        // The fake kernel moves no pid: empty the leaf as the move back does.
        fs::write(leaf.join("cgroup.procs"), "").unwrap();
        claimed.release().unwrap();
        assert_eq!(
            fs::read_to_string(own.join("cgroup.subtree_control")).unwrap(),
            "-cpu -memory"
        );
        assert_eq!(fs::read_to_string(own.join("cgroup.procs")).unwrap(), "7");
        assert!(!leaf.exists());
    }
}
