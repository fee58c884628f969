//! Reproducible tar archives: the same tree always gives the same bytes.

use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use tar::{Builder, EntryType, Header};

use super::{temp_sibling, Packed, TempFile};
use crate::error::{ImageError, IoContext};
use crate::tree::{self, Kind};

/// The modification time of every entry, so archives do not depend on when the tree was
/// built: 1980-01-01T00:00:00Z, the earliest time ZIP can store, as other reproducible
/// builds use. Not the Unix epoch: a file whose mtime is 0 is one PHP's opcache never
/// caches (it takes 0 for "no timestamp"), so WordPress in a container of an imported
/// image compiled every script on every request and used five times the cpu of the same
/// files anywhere else; and ZIP (Python's `zipfile`) refuses times before 1980.
pub const TAR_MTIME: u64 = 315_532_800;

fn header(kind: EntryType, mode: u32, uid: u32, gid: u32, size: u64) -> Header {
    let mut h = Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(uid.into());
    h.set_gid(gid.into());
    h.set_mtime(TAR_MTIME);
    h.set_size(size);
    h
}

/// Write every entry of `dir` in [`tree::walk`] order (GNU tar `--sort=name`): GNU headers,
/// numeric owners as in the tree (no user or group names), permission bits including setuid,
/// mtime [`TAR_MTIME`], symlinks as symlinks, hard links inside the tree as links to their first
/// path. Device nodes and sockets are left out: engines create `/dev` themselves and an
/// unprivileged `import` could not create them.
pub(crate) fn write_tar<W: Write>(dir: &Path, out: W) -> Result<W, ImageError> {
    let tar_err = |path: &Path, e: std::io::Error| ImageError::Unstorable {
        path: path.to_path_buf(),
        format: "tar",
        reason: e.to_string(),
    };
    let mut b = Builder::new(out);
    let mut links: HashMap<(u64, u64), PathBuf> = HashMap::new();
    for e in tree::walk(dir)? {
        let (uid, gid, mode) = (e.meta.uid(), e.meta.gid(), e.mode());
        if e.kind != Kind::Dir && e.meta.nlink() > 1 {
            let key = (e.meta.dev(), e.meta.ino());
            if let Some(first) = links.get(&key) {
                let mut h = header(EntryType::Link, mode, uid, gid, 0);
                b.append_link(&mut h, &e.rel, first)
                    .map_err(|x| tar_err(&e.abs, x))?;
                continue;
            }
            if matches!(e.kind, Kind::File | Kind::Symlink | Kind::Fifo) {
                links.insert(key, e.rel.clone());
            }
        }
        match e.kind {
            Kind::Dir => {
                let mut h = header(EntryType::Directory, mode, uid, gid, 0);
                b.append_data(&mut h, &e.rel, std::io::empty())
                    .map_err(|x| tar_err(&e.abs, x))?;
            }
            Kind::File => {
                let f = std::fs::File::open(&e.abs).ctx("open", &e.abs)?;
                let mut h = header(EntryType::Regular, mode, uid, gid, e.meta.len());
                b.append_data(&mut h, &e.rel, f)
                    .map_err(|x| tar_err(&e.abs, x))?;
            }
            Kind::Symlink => {
                let target = std::fs::read_link(&e.abs).ctx("read link", &e.abs)?;
                let mut h = header(EntryType::Symlink, mode, uid, gid, 0);
                b.append_link(&mut h, &e.rel, &target)
                    .map_err(|x| tar_err(&e.abs, x))?;
            }
            Kind::Fifo => {
                let mut h = header(EntryType::Fifo, mode, uid, gid, 0);
                b.append_data(&mut h, &e.rel, std::io::empty())
                    .map_err(|x| tar_err(&e.abs, x))?;
            }
            Kind::CharDevice | Kind::BlockDevice | Kind::Socket => {}
        }
    }
    b.into_inner().map_err(|x| tar_err(dir, x))
}

pub(crate) fn pack_tar(dir: &Path, file: &Path) -> Result<Packed, ImageError> {
    let tmp = temp_sibling(file);
    let mut guard = TempFile(Some(tmp.clone()));
    let f = std::fs::File::create(&tmp).ctx("create", &tmp)?;
    let mut w = write_tar(dir, BufWriter::new(f))?;
    w.flush().ctx("write", &tmp)?;
    drop(w);
    std::fs::rename(&tmp, file).ctx("move into place", file)?;
    guard.0 = None;
    Ok(Packed {
        path: file.to_path_buf(),
        bytes: std::fs::metadata(file).ctx("read", file)?.len(),
        sha256: tree::sha256_file(file)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archive_is_sorted_owned_numerically_and_reproducible() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("bin")).unwrap();
        std::fs::create_dir_all(src.join("a")).unwrap();
        std::fs::write(src.join("bin/busybox"), "bb").unwrap();
        std::fs::hard_link(src.join("bin/busybox"), src.join("a/hard")).unwrap();
        let long = "x".repeat(150);
        std::os::unix::fs::symlink(format!("/bin/{long}"), src.join("bin/sh")).unwrap();
        let bytes = write_tar(&src, Vec::new()).unwrap();
        let mut ar = tar::Archive::new(&bytes[..]);
        let mut seen = Vec::new();
        for e in ar.entries().unwrap() {
            let e = e.unwrap();
            let h = e.header();
            assert_eq!(h.mtime().unwrap(), TAR_MTIME);
            assert!(h.username().unwrap().unwrap_or("").is_empty());
            seen.push((
                e.path().unwrap().display().to_string(),
                h.entry_type(),
                e.link_name().unwrap().map(|l| l.display().to_string()),
            ));
        }
        let paths: Vec<&str> = seen.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(paths, ["a", "a/hard", "bin", "bin/busybox", "bin/sh"]);
        assert_eq!(
            seen[1].1,
            EntryType::Regular,
            "first occurrence carries the data"
        );
        assert_eq!(seen[3].1, EntryType::Link);
        assert_eq!(seen[3].2.as_deref(), Some("a/hard"));
        assert_eq!(
            seen[4].2,
            Some(format!("/bin/{long}")),
            "long link target kept"
        );

        let out = d.path().join("x.tar");
        let a = pack_tar(&src, &out).unwrap();
        let b = pack_tar(&src, &out).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.bytes, bytes.len() as u64);
    }
}
