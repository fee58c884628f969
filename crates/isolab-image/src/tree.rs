//! Walking an image tree in a fixed order, digesting it, measuring it and copying it faithfully.

use std::collections::HashMap;
use std::ffi::CString;
use std::fs::Metadata;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{ImageError, IoContext};
use crate::manifest::MANIFEST_FILE;

/// The kind of a tree entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
    CharDevice,
    BlockDevice,
    Fifo,
    Socket,
}

impl Kind {
    fn of(meta: &Metadata) -> Kind {
        let t = meta.file_type();
        if t.is_dir() {
            Kind::Dir
        } else if t.is_symlink() {
            Kind::Symlink
        } else if t.is_char_device() {
            Kind::CharDevice
        } else if t.is_block_device() {
            Kind::BlockDevice
        } else if t.is_fifo() {
            Kind::Fifo
        } else if t.is_socket() {
            Kind::Socket
        } else {
            Kind::File
        }
    }

    fn letter(self) -> &'static str {
        match self {
            Kind::Dir => "d",
            Kind::File => "f",
            Kind::Symlink => "l",
            Kind::CharDevice => "c",
            Kind::BlockDevice => "b",
            Kind::Fifo => "p",
            Kind::Socket => "s",
        }
    }
}

/// One entry below the root (the root itself is not listed).
#[derive(Debug)]
pub(crate) struct Entry {
    /// Path relative to the root ("bin/sh").
    pub rel: PathBuf,
    /// Absolute path on the host.
    pub abs: PathBuf,
    /// `lstat` of the entry.
    pub meta: Metadata,
    /// The entry's kind.
    pub kind: Kind,
}

impl Entry {
    /// Permission bits including setuid, setgid and sticky.
    pub fn mode(&self) -> u32 {
        self.meta.mode() & 0o7777
    }
}

/// All entries below `root`, depth first, each directory's children sorted by their bytes
/// (the order of GNU tar's `--sort=name`). `root` itself may be a symbolic link to the
/// tree (`make image` links /var/lib/isolab/images/bench to its recipe); links below it
/// are entries, never followed.
pub(crate) fn walk(root: &Path) -> Result<Vec<Entry>, ImageError> {
    let meta = std::fs::metadata(root).ctx("read", root)?;
    if !meta.is_dir() {
        return Err(ImageError::io(
            "walk",
            root,
            std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        ));
    }
    let mut out = Vec::new();
    walk_into(root, Path::new(""), &mut out)?;
    Ok(out)
}

fn walk_into(abs_dir: &Path, rel_dir: &Path, out: &mut Vec<Entry>) -> Result<(), ImageError> {
    let mut names = Vec::new();
    for d in std::fs::read_dir(abs_dir).ctx("list directory", abs_dir)? {
        names.push(d.ctx("list directory", abs_dir)?.file_name());
    }
    names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    for name in names {
        let abs = abs_dir.join(&name);
        let rel = rel_dir.join(&name);
        let meta = std::fs::symlink_metadata(&abs).ctx("read", &abs)?;
        let kind = Kind::of(&meta);
        out.push(Entry {
            rel: rel.clone(),
            abs: abs.clone(),
            meta,
            kind,
        });
        if kind == Kind::Dir {
            walk_into(&abs, &rel, out)?;
        }
    }
    Ok(())
}

/// SHA-256 (lower-case hex) of a file's contents.
pub fn sha256_file(path: &Path) -> Result<String, ImageError> {
    let mut f = std::fs::File::open(path).ctx("open", path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).ctx("read", path)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// SHA-256 (lower-case hex) of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A digest of a whole tree for the environment record: SHA-256 (hex) over, for every entry in
/// depth-first order with each directory's children sorted by name, `path NUL kind NUL mode(octal) NUL uid NUL gid NUL content NL`, where content is
/// the file's SHA-256, the symlink target or the device number. Timestamps are left out, and so is
/// the manifest at the root (it holds the build time): two builds of the same inputs digest equally.
pub fn tree_digest(root: &Path) -> Result<String, ImageError> {
    let mut h = Sha256::new();
    for e in walk(root)? {
        if e.rel.as_os_str() == MANIFEST_FILE {
            continue;
        }
        let content = match e.kind {
            Kind::File => sha256_file(&e.abs)?,
            Kind::Symlink => {
                let t = std::fs::read_link(&e.abs).ctx("read link", &e.abs)?;
                String::from_utf8_lossy(t.as_os_str().as_bytes()).into_owned()
            }
            Kind::CharDevice | Kind::BlockDevice => {
                format!(
                    "{}:{}",
                    libc::major(e.meta.rdev()),
                    libc::minor(e.meta.rdev())
                )
            }
            Kind::Dir | Kind::Fifo | Kind::Socket => String::new(),
        };
        h.update(e.rel.as_os_str().as_bytes());
        h.update(
            format!(
                "\0{}\0{:o}\0{}\0{}\0{}\n",
                e.kind.letter(),
                e.mode(),
                e.meta.uid(),
                e.meta.gid(),
                content
            )
            .as_bytes(),
        );
    }
    Ok(hex(&h.finalize()))
}

/// Bytes the tree occupies on disk: allocated blocks of every inode counted once, plus the root.
pub(crate) fn used_bytes(root: &Path) -> Result<u64, ImageError> {
    let mut seen = std::collections::HashSet::new();
    let root_meta = std::fs::symlink_metadata(root).ctx("read", root)?;
    let mut total = root_meta.blocks() * 512;
    for e in walk(root)? {
        if e.meta.nlink() > 1 && e.kind != Kind::Dir && !seen.insert((e.meta.dev(), e.meta.ino())) {
            continue;
        }
        total += (e.meta.blocks() * 512).max(e.meta.len().min(4096));
    }
    Ok(total)
}

fn cstring(path: &Path) -> Result<CString, ImageError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        ImageError::io(
            "use path",
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "path contains a NUL byte"),
        )
    })
}

/// Set owner, permission bits (in that order: chown clears setuid) and timestamps of `dst` from
/// `meta`, without following a symlink at `dst`.
fn apply_metadata(dst: &Path, meta: &Metadata, kind: Kind) -> Result<(), ImageError> {
    std::os::unix::fs::lchown(dst, Some(meta.uid()), Some(meta.gid()))
        .ctx("change owner of", dst)?;
    apply_mode_and_times(dst, meta, kind)
}

/// `meta`'s mode (not a symlink's) and access and modification times on `dst`, by path:
/// what a copy keeps when it cannot keep the owner.
pub(crate) fn apply_mode_and_times(
    dst: &Path,
    meta: &Metadata,
    kind: Kind,
) -> Result<(), ImageError> {
    if kind != Kind::Symlink {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dst, std::fs::Permissions::from_mode(meta.mode() & 0o7777))
            .ctx("change mode of", dst)?;
    }
    let c = cstring(dst)?;
    let times = [
        libc::timespec {
            tv_sec: meta.atime() as libc::time_t,
            tv_nsec: meta.atime_nsec() as _,
        },
        libc::timespec {
            tv_sec: meta.mtime() as libc::time_t,
            tv_nsec: meta.mtime_nsec() as _,
        },
    ];
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call and `times` points to
    // two initialised timespecs, as utimensat(2) requires.
    let rc = unsafe {
        libc::utimensat(
            libc::AT_FDCWD,
            c.as_ptr(),
            times.as_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return Err(ImageError::io(
            "set times of",
            dst,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Copy the tree at `src` into the (existing, empty) directory `dst`, preserving kinds, modes
/// (setuid included), numeric owners, timestamps, symlinks, device nodes, fifos and hard links
/// inside the tree. Sockets are skipped (they are meaningless in an image); extended attributes
/// are not copied. Files are copied, never hard-linked to the source: a container writing into its
/// bundle must not change the image.
pub fn copy_tree(src: &Path, dst: &Path) -> Result<u64, ImageError> {
    let mut links: HashMap<(u64, u64), PathBuf> = HashMap::new();
    let mut dirs = Vec::new();
    let mut bytes = 0u64;
    for e in walk(src)? {
        let to = dst.join(&e.rel);
        match e.kind {
            Kind::Dir => {
                std::fs::create_dir(&to).ctx("create directory", &to)?;
                dirs.push((to, e));
                continue;
            }
            Kind::Socket => continue,
            _ => {}
        }
        let key = (e.meta.dev(), e.meta.ino());
        if e.meta.nlink() > 1 {
            if let Some(first) = links.get(&key) {
                std::fs::hard_link(first, &to).ctx("hard-link", &to)?;
                continue;
            }
            links.insert(key, to.clone());
        }
        match e.kind {
            Kind::File => {
                bytes += std::fs::copy(&e.abs, &to).ctx("copy into", &to)?;
            }
            Kind::Symlink => {
                let target = std::fs::read_link(&e.abs).ctx("read link", &e.abs)?;
                std::os::unix::fs::symlink(&target, &to).ctx("create symlink", &to)?;
            }
            Kind::CharDevice | Kind::BlockDevice | Kind::Fifo => {
                let c = cstring(&to)?;
                // SAFETY: `c` is a valid NUL-terminated path; mode and device come from lstat of
                // an existing node of the same kind.
                let rc = unsafe {
                    libc::mknod(
                        c.as_ptr(),
                        e.meta.mode() as libc::mode_t,
                        e.meta.rdev() as libc::dev_t,
                    )
                };
                if rc != 0 {
                    return Err(ImageError::io(
                        "create node",
                        &to,
                        std::io::Error::last_os_error(),
                    ));
                }
            }
            Kind::Dir | Kind::Socket => {}
        }
        apply_metadata(&to, &e.meta, e.kind)?;
    }
    // Directories last and deepest first: filling them changed their mtime, and a read-only
    // mode would have stopped the copy.
    for (to, e) in dirs.iter().rev() {
        apply_metadata(to, &e.meta, Kind::Dir)?;
    }
    let root_meta = std::fs::symlink_metadata(src).ctx("read", src)?;
    apply_metadata(dst, &root_meta, Kind::Dir)?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn sample(root: &Path) {
        std::fs::create_dir_all(root.join("b/sub")).unwrap();
        std::fs::create_dir(root.join("a")).unwrap();
        std::fs::write(root.join("b/sub/file"), "hello").unwrap();
        std::fs::write(root.join("a/x"), "x").unwrap();
        std::fs::hard_link(root.join("a/x"), root.join("a/y")).unwrap();
        std::os::unix::fs::symlink("/bin/busybox", root.join("b/sh")).unwrap();
        std::fs::set_permissions(root.join("a/x"), std::fs::Permissions::from_mode(0o4755))
            .unwrap();
        std::fs::set_permissions(root.join("b/sub"), std::fs::Permissions::from_mode(0o555))
            .unwrap();
    }

    #[test]
    fn walk_is_sorted_depth_first() {
        let d = tempfile::tempdir().unwrap();
        sample(d.path());
        let rels: Vec<String> = walk(d.path())
            .unwrap()
            .iter()
            .map(|e| e.rel.display().to_string())
            .collect();
        assert_eq!(
            rels,
            ["a", "a/x", "a/y", "b", "b/sh", "b/sub", "b/sub/file"]
        );
        // A root given as a symbolic link to the tree walks the tree.
        let link = tempfile::tempdir().unwrap();
        let root = link.path().join("image");
        std::os::unix::fs::symlink(d.path(), &root).unwrap();
        let through_link: Vec<String> = walk(&root)
            .unwrap()
            .iter()
            .map(|e| e.rel.display().to_string())
            .collect();
        assert_eq!(through_link, rels);
        assert_eq!(tree_digest(&root).unwrap(), tree_digest(d.path()).unwrap());
    }

    #[test]
    fn digest_ignores_manifest_and_times_but_sees_modes_and_content() {
        let d = tempfile::tempdir().unwrap();
        sample(d.path());
        let a = tree_digest(d.path()).unwrap();
        std::fs::write(d.path().join(MANIFEST_FILE), "{}").unwrap();
        assert_eq!(tree_digest(d.path()).unwrap(), a);
        std::fs::set_permissions(d.path().join("a/x"), std::fs::Permissions::from_mode(0o755))
            .unwrap();
        let b = tree_digest(d.path()).unwrap();
        assert_ne!(a, b);
        std::fs::write(d.path().join("a/x"), "y").unwrap();
        assert_ne!(tree_digest(d.path()).unwrap(), b);
        assert_eq!(a.len(), 64);
    }

    #[test]
    fn copy_preserves_the_tree() {
        let s = tempfile::tempdir().unwrap();
        let t = tempfile::tempdir().unwrap();
        sample(s.path());
        let bytes = copy_tree(s.path(), t.path()).unwrap();
        assert_eq!(bytes, 6, "x once (hard link) and hello");
        assert_eq!(
            tree_digest(s.path()).unwrap(),
            tree_digest(t.path()).unwrap()
        );
        let x = std::fs::metadata(t.path().join("a/x")).unwrap();
        let y = std::fs::metadata(t.path().join("a/y")).unwrap();
        assert_eq!(x.ino(), y.ino(), "hard link kept");
        assert_eq!(x.mode() & 0o7777, 0o4755, "setuid kept");
        assert_eq!(
            std::fs::read_link(t.path().join("b/sh")).unwrap(),
            Path::new("/bin/busybox")
        );
        let src_mtime = std::fs::metadata(s.path().join("b/sub")).unwrap().mtime();
        assert_eq!(
            std::fs::metadata(t.path().join("b/sub")).unwrap().mtime(),
            src_mtime
        );
        assert!(used_bytes(s.path()).unwrap() > 0);
        // Let tempdir clean up a read-only directory.
        for r in [s.path(), t.path()] {
            std::fs::set_permissions(r.join("b/sub"), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
    }

    #[test]
    fn sha256_of_a_known_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        std::fs::write(&p, "abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(matches!(
            sha256_file(&d.path().join("none")),
            Err(ImageError::Io { op: "open", .. })
        ));
    }
}
