//! What every image root shares: the staging directory a build writes into (renamed over the
//! target only on success), safe removal, mount points and the basic `/etc` files.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use isolab_cgroups::{mountinfo_path, read_mountinfo, Malformed};

use crate::error::{ImageError, IoContext};

/// The hostname written into every image.
pub const IMAGE_HOSTNAME: &str = "isolab";

/// Directories every root gets, with their modes: mount points for the runtime and the usual
/// writable places.
pub(crate) const ROOT_DIRS: &[(&str, u32)] = &[
    ("bin", 0o755),
    ("dev", 0o755),
    ("etc", 0o755),
    ("proc", 0o555),
    ("root", 0o700),
    ("run", 0o755),
    ("sbin", 0o755),
    ("sys", 0o555),
    ("tmp", 0o1777),
    ("usr", 0o755),
    ("usr/bin", 0o755),
    ("usr/sbin", 0o755),
    ("var", 0o755),
];

/// Create `ROOT_DIRS` under `root` that do not exist yet, and force the modes of those that do
/// exist for tmp (1777), proc and sys.
pub(crate) fn make_root_dirs(root: &Path) -> Result<(), ImageError> {
    for (rel, mode) in ROOT_DIRS {
        let p = root.join(rel);
        match std::fs::symlink_metadata(&p) {
            Ok(_) => {
                if matches!(*rel, "tmp" | "proc" | "sys") {
                    set_mode(&p, *mode)?;
                }
            }
            Err(_) => {
                std::fs::DirBuilder::new()
                    .mode(*mode)
                    .create(&p)
                    .ctx("create directory", &p)?;
                // The umask may have cleared bits (sticky, group/other write of tmp).
                set_mode(&p, *mode)?;
            }
        }
    }
    Ok(())
}

pub(crate) fn set_mode(p: &Path, mode: u32) -> Result<(), ImageError> {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).ctx("change mode of", p)
}

/// Write `content` to `root/rel` with `mode`, replacing a file or symlink that is there.
pub(crate) fn write_file(
    root: &Path,
    rel: &str,
    content: &str,
    mode: u32,
) -> Result<(), ImageError> {
    let p = root.join(rel);
    if std::fs::symlink_metadata(&p).is_ok() {
        std::fs::remove_file(&p).ctx("remove", &p)?;
    }
    std::fs::write(&p, content).ctx("write", &p)?;
    set_mode(&p, mode)
}

/// The host identity files the runtime expects: `/etc/hostname`, `/etc/hosts` and an empty
/// `/etc/resolv.conf` (nothing of the build host leaks into the image).
pub(crate) fn write_identity(root: &Path) -> Result<(), ImageError> {
    write_file(root, "etc/hostname", &format!("{IMAGE_HOSTNAME}\n"), 0o644)?;
    write_file(
        root,
        "etc/hosts",
        &format!(
            "127.0.0.1\tlocalhost\n127.0.1.1\t{IMAGE_HOSTNAME}\n::1\tlocalhost ip6-localhost ip6-loopback\n"
        ),
        0o644,
    )?;
    write_file(root, "etc/resolv.conf", "", 0o644)
}

/// Where the proc file system is mounted (its `self/mountinfo` is read).
const PROC: &str = "/proc";

/// Mount points at or below `path`, from `/proc/self/mountinfo` (none when it cannot
/// be read).
fn mounts_below(path: &Path) -> Vec<PathBuf> {
    let table = mountinfo_path(Path::new(PROC));
    read_mountinfo(&table, Malformed::Skip)
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_point)
        .filter(|m| m.starts_with(path))
        .collect()
}

/// `remove_dir_all` that refuses to run when something is mounted below `path` (a failed
/// debootstrap could leave /proc or a bind of /dev there; deleting through it would hurt the host).
pub(crate) fn remove_tree(path: &Path) -> Result<(), ImageError> {
    let abs = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    if let Some(m) = mounts_below(&abs).first() {
        return Err(ImageError::io(
            "remove",
            path,
            std::io::Error::new(
                std::io::ErrorKind::ResourceBusy,
                format!(
                    "{} is mounted inside it; unmount it (umount -R) and retry",
                    m.display()
                ),
            ),
        ));
    }
    match std::fs::remove_dir_all(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ImageError::io("remove", path, e)),
    }
}

fn is_empty_dir(p: &Path) -> Result<Option<bool>, ImageError> {
    match std::fs::read_dir(p) {
        Ok(mut it) => Ok(Some(it.next().is_none())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotADirectory => Ok(Some(false)),
        Err(e) => Err(ImageError::io("list directory", p, e)),
    }
}

/// A sibling directory a build writes into; [`Staging::commit`] renames it over the target,
/// dropping it uncommitted removes it. A failed build never leaves a half tree at the target.
#[derive(Debug)]
pub(crate) struct Staging {
    target: PathBuf,
    path: PathBuf,
    committed: bool,
}

impl Staging {
    /// Check the target (it must be absent or empty unless `force`) and create the staging directory.
    pub fn new(target: &Path, force: bool) -> Result<Staging, ImageError> {
        if is_empty_dir(target)? == Some(false) && !force {
            return Err(ImageError::TargetExists {
                path: target.to_path_buf(),
            });
        }
        let name = target.file_name().ok_or_else(|| {
            ImageError::io(
                "build into",
                target,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "the path has no final component",
                ),
            )
        })?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).ctx("create directory", &parent)?;
        let path = parent.join(format!(
            ".{}.isolab-build-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        remove_tree(&path)?;
        std::fs::DirBuilder::new()
            .mode(0o755)
            .create(&path)
            .ctx("create directory", &path)?;
        set_mode(&path, 0o755)?;
        Ok(Staging {
            target: target.to_path_buf(),
            path,
            committed: false,
        })
    }

    /// Where the build writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Move the finished tree to the target, replacing what was there.
    pub fn commit(mut self) -> Result<PathBuf, ImageError> {
        let mut old = self.path.clone().into_os_string();
        old.push("-old");
        let old = PathBuf::from(old);
        match is_empty_dir(&self.target)? {
            None => {}
            Some(true) => std::fs::remove_dir(&self.target).ctx("remove", &self.target)?,
            Some(false) => std::fs::rename(&self.target, &old).ctx("move aside", &self.target)?,
        }
        std::fs::rename(&self.path, &self.target).ctx("move into place", &self.target)?;
        self.committed = true;
        if std::fs::symlink_metadata(&old).is_ok() {
            if std::fs::symlink_metadata(&old)
                .map(|m| m.is_dir())
                .unwrap_or(false)
            {
                remove_tree(&old)?;
            } else {
                std::fs::remove_file(&old).ctx("remove", &old)?;
            }
        }
        Ok(self.target.clone())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the error was already reported by the build that failed.
            let _ = remove_tree(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn staging_refuses_a_full_target_unless_forced_and_cleans_up() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("img");
        std::fs::create_dir(&target).unwrap();
        std::fs::write(target.join("old"), "x").unwrap();
        let err = Staging::new(&target, false).unwrap_err();
        assert!(matches!(err, ImageError::TargetExists { .. }), "{err}");

        let s = Staging::new(&target, true).unwrap();
        let staged = s.path().to_path_buf();
        std::fs::write(staged.join("new"), "y").unwrap();
        drop(s);
        assert!(!staged.exists(), "uncommitted staging is removed");
        assert!(target.join("old").exists(), "target untouched");

        let s = Staging::new(&target, true).unwrap();
        std::fs::write(s.path().join("new"), "y").unwrap();
        s.commit().unwrap();
        assert!(target.join("new").exists() && !target.join("old").exists());
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the target remains");
    }

    #[test]
    fn root_dirs_and_identity_files() {
        let d = tempfile::tempdir().unwrap();
        make_root_dirs(d.path()).unwrap();
        write_identity(d.path()).unwrap();
        let tmp = std::fs::metadata(d.path().join("tmp")).unwrap();
        assert_eq!(tmp.mode() & 0o7777, 0o1777);
        assert_eq!(
            std::fs::read_to_string(d.path().join("etc/hostname")).unwrap(),
            "isolab\n"
        );
        assert_eq!(
            std::fs::read(d.path().join("etc/resolv.conf")).unwrap(),
            b""
        );
        assert!(std::fs::read_to_string(d.path().join("etc/hosts"))
            .unwrap()
            .contains("localhost"));
    }

    #[test]
    fn mountinfo_escapes() {
        // Unescaping moved with the parser to `isolab_cgroups::mountinfo` (its test
        // `mountinfo_escapes` checks `\040`).
        assert!(!mounts_below(Path::new("/proc")).is_empty());
        let d = tempfile::tempdir().unwrap();
        assert!(mounts_below(d.path()).is_empty());
    }
}
