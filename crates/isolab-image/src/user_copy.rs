//! An unprivileged user's copy of an image.
//!
//! Without root, isolab-runtime maps the user alone to the container's root (one id in
//! the user namespace) and mounts the overlay of a container's root itself. The kernel
//! refuses to copy a file or directory owned by an id that namespace cannot name (the
//! image's root, uid 0 on the host) into the overlay's upper layer (`EOVERFLOW`), so a
//! container could not create a file anywhere in an image built by root. Rootless Podman
//! keeps its images in the user's own storage for the same reason; isolab does too: the
//! user's copy, owned by the user (the container's root), made once per image in
//! `$XDG_CACHE_HOME/isolab/images/<image>` and kept.
//!
//! What the user cannot read (`/etc/shadow`, `/etc/gshadow`, `/root`, apt's locks) cannot
//! be copied: such files are made empty, such directories empty, with their modes, and the
//! copy lists them ([`UserCopy::left_out`]); device nodes cannot be made without root and
//! are left out too (the runtime makes /dev's nodes itself).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ImageError, IoContext};
use crate::tree::{apply_mode_and_times, Kind};

/// The record written last into a complete copy: what was left out.
pub const USER_COPY_RECORD: &str = ".isolab-user-copy.json";

/// A user's copy of an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UserCopy {
    /// The copy's root file system.
    #[serde(skip)]
    pub dir: PathBuf,
    /// The image it copies.
    pub source: PathBuf,
    /// Paths (relative to the root) whose contents the user could not read: files made
    /// empty, directories made empty, device nodes not made.
    pub left_out: Vec<String>,
}

/// Where an unprivileged user keeps copies of images: `$XDG_CACHE_HOME/isolab/images`,
/// else `$HOME/.cache/isolab/images`, else `/var/tmp/isolab-<uid>/images`.
pub fn user_copy_root() -> PathBuf {
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("isolab/images");
    }
    if let Some(h) = std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        return PathBuf::from(h).join(".cache/isolab/images");
    }
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    PathBuf::from(format!("/var/tmp/isolab-{uid}/images"))
}

/// The user's copy of `image` under `root`: the existing one when complete, else made
/// (into a staging directory renamed into place, so an interrupted copy is never used).
pub fn user_copy(image: &Path, root: &Path) -> Result<UserCopy, ImageError> {
    let name = image
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "image".into());
    let dir = root.join(&name);
    if let Some(copy) = read_record(&dir) {
        return Ok(UserCopy { dir, ..copy });
    }
    fs::create_dir_all(root).ctx("create directory", root)?;
    let staging = root.join(format!(".{name}.staging-{}", std::process::id()));
    if staging.exists() {
        remove_copy(&staging)?;
    }
    let mut left_out = Vec::new();
    let result = copy_dir(image, &staging, Path::new(""), &mut left_out).and_then(|()| {
        let copy = UserCopy {
            dir: dir.clone(),
            source: image.to_path_buf(),
            left_out,
        };
        let json = serde_json::to_vec_pretty(&copy).unwrap_or_default();
        let record = staging.join(USER_COPY_RECORD);
        fs::write(&record, json).ctx("write", &record)?;
        if dir.exists() {
            remove_copy(&dir)?;
        }
        fs::rename(&staging, &dir).ctx("rename into place", &dir)?;
        Ok(copy)
    });
    if result.is_err() && staging.exists() {
        let _ = remove_copy(&staging);
    }
    result
}

fn read_record(dir: &Path) -> Option<UserCopy> {
    let text = fs::read(dir.join(USER_COPY_RECORD)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Removes a copy (read-only directories made writable first).
fn remove_copy(dir: &Path) -> Result<(), ImageError> {
    fn writable(dir: &Path) {
        let _ = fs::set_permissions(dir, fs::Permissions::from_mode(0o700));
        if let Ok(entries) = fs::read_dir(dir) {
            for e in entries.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    writable(&e.path());
                }
            }
        }
    }
    writable(dir);
    fs::remove_dir_all(dir).ctx("remove", dir)
}

fn copy_dir(
    src: &Path,
    dst: &Path,
    rel: &Path,
    left_out: &mut Vec<String>,
) -> Result<(), ImageError> {
    let meta = fs::symlink_metadata(src).ctx("read", src)?;
    fs::create_dir(dst).ctx("create directory", dst)?;
    // Writable while it is filled; its own mode last.
    fs::set_permissions(dst, fs::Permissions::from_mode(0o700)).ctx("chmod", dst)?;
    match fs::read_dir(src) {
        Ok(entries) => {
            let mut entries: Vec<_> = entries
                .collect::<Result<_, _>>()
                .ctx("read directory", src)?;
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let from = e.path();
                let to = dst.join(e.file_name());
                let rel = rel.join(e.file_name());
                let m = fs::symlink_metadata(&from).ctx("read", &from)?;
                let t = m.file_type();
                if t.is_dir() {
                    copy_dir(&from, &to, &rel, left_out)?;
                } else if t.is_symlink() {
                    let target = fs::read_link(&from).ctx("read link", &from)?;
                    std::os::unix::fs::symlink(&target, &to).ctx("create symlink", &to)?;
                } else if t.is_file() {
                    match fs::copy(&from, &to) {
                        Ok(_) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                            fs::File::create(&to).ctx("create", &to)?;
                            left_out.push(rel.display().to_string());
                        }
                        Err(e) => return Err(ImageError::io("copy into", &to, e)),
                    }
                    apply_mode_and_times(&to, &m, Kind::File)?;
                } else {
                    // Device nodes, fifos, sockets: none can be made or needed here.
                    left_out.push(rel.display().to_string());
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            left_out.push(format!("{}/", rel.display()));
        }
        Err(e) => return Err(ImageError::io("read directory", src, e)),
    }
    apply_mode_and_times(dst, &meta, Kind::Dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A tree with a file, a link and a read-only directory is copied with modes, links
    /// and times; a second call reuses the copy. (What the user cannot read is shown by
    /// the unprivileged guest test: root reads everything.)
    #[test]
    fn a_copy_keeps_kinds_modes_and_times_and_is_made_once() {
        let tmp = tempfile::tempdir().unwrap();
        let image = tmp.path().join("recipe-abc");
        fs::create_dir_all(image.join("etc")).unwrap();
        fs::create_dir_all(image.join("usr/bin")).unwrap();
        fs::write(image.join("usr/bin/tool"), b"#!/bin/sh\n").unwrap();
        fs::set_permissions(
            image.join("usr/bin/tool"),
            fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::os::unix::fs::symlink("usr/bin", image.join("bin")).unwrap();
        fs::write(image.join("etc/hostname"), b"lab\n").unwrap();
        fs::set_permissions(image.join("etc"), fs::Permissions::from_mode(0o555)).unwrap();
        let root = tmp.path().join("cache");
        let copy = user_copy(&image, &root).unwrap();
        assert_eq!(copy.dir, root.join("recipe-abc"));
        assert!(copy.left_out.is_empty(), "{:?}", copy.left_out);
        assert_eq!(
            fs::read(copy.dir.join("usr/bin/tool")).unwrap(),
            b"#!/bin/sh\n"
        );
        let m = fs::metadata(copy.dir.join("usr/bin/tool")).unwrap();
        assert_eq!(m.mode() & 0o777, 0o755);
        assert_eq!(
            m.modified().unwrap(),
            fs::metadata(image.join("usr/bin/tool"))
                .unwrap()
                .modified()
                .unwrap()
        );
        assert_eq!(
            fs::read_link(copy.dir.join("bin")).unwrap(),
            PathBuf::from("usr/bin")
        );
        assert_eq!(
            fs::metadata(copy.dir.join("etc")).unwrap().mode() & 0o777,
            0o555
        );
        // Made once: a change to the image after the copy is not seen.
        fs::set_permissions(image.join("etc"), fs::Permissions::from_mode(0o755)).unwrap();
        fs::write(image.join("etc/hostname"), b"changed\n").unwrap();
        let again = user_copy(&image, &root).unwrap();
        assert_eq!(again, copy);
        assert_eq!(fs::read(again.dir.join("etc/hostname")).unwrap(), b"lab\n");
        assert!(remove_copy(&copy.dir).is_ok());
    }
}
