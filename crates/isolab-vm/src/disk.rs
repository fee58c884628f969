//! The guest's root disk: the bench image packed as a whole-disk ext4 file, cached once per
//! image build and shared read-only by every VM; each VM writes into its own qcow2 overlay.

use std::path::{Path, PathBuf};

use isolab_image::{pack, PackTarget, MANIFEST_FILE};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::{IoContext, VmError};
use isolab_tools::{ToolCommand, ToolRunner};

/// Free space added to the packed image, so that the guest can write to its root (the writes
/// land in the per-VM overlay; unused space costs nothing in the sparse file).
const HEADROOM: u64 = 1 << 30;

/// A packed root disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseDisk {
    /// The ext4 file (raw, read-only for VMs).
    pub path: PathBuf,
    /// SHA-256 (hex) of the file, for the environment record.
    pub sha256: String,
    /// Its size in bytes (apparent size of the sparse file).
    pub bytes: u64,
    /// The image directory it was made from.
    pub image: PathBuf,
    /// SHA-256 (hex) of the image's manifest: the cache key.
    pub manifest_sha256: String,
}

/// Makes (or finds) the ext4 disk of the image at `image_dir` in `cache/disk/`.
///
/// The cache key is the SHA-256 of the image's manifest (`.isolab-image.json`), which records
/// the build time and every package version: rebuilding the image changes it, and the disk is
/// made again; disks of earlier builds of the same image directory are removed. The disk is
/// made with [`isolab_image::pack`] (mkfs.ext4 -d, label `isolab`), 1 GiB larger than the default
/// size so that the guest has room to write, and made read-only (mode 0444).
pub fn prepare_disk(image_dir: &Path, cache: &Path) -> Result<BaseDisk, VmError> {
    let manifest_path = image_dir.join(MANIFEST_FILE);
    let manifest = std::fs::read(&manifest_path).ctx("read the image manifest", &manifest_path)?;
    let manifest_sha256 = hex(&Sha256::digest(&manifest));
    let dir = cache.join("disk");
    std::fs::create_dir_all(&dir).ctx("create directory", &dir)?;
    let key = &manifest_sha256[..16];
    let file = dir.join(format!("{key}.ext4"));
    let sidecar = dir.join(format!("{key}.json"));
    if let Ok(bytes) = std::fs::read(&sidecar) {
        if let Ok(disk) = serde_json::from_slice::<BaseDisk>(&bytes) {
            if disk.path == file && file.is_file() {
                return Ok(disk);
            }
        }
    }
    let image = image_dir.to_path_buf();
    let used = tree_size(image_dir)?;
    let size = isolab_image::default_ext4_size(used) + HEADROOM;
    let packed = pack(
        image_dir,
        &PackTarget::Ext4 {
            file: file.clone(),
            size: Some(size),
        },
    )
    .map_err(|source| VmError::Disk {
        image: image.clone(),
        source,
    })?;
    set_mode(&file, 0o444)?;
    let disk = BaseDisk {
        path: file,
        sha256: packed.sha256,
        bytes: packed.bytes,
        image,
        manifest_sha256,
    };
    remove_stale(&dir, &disk)?;
    let text = serde_json::to_vec_pretty(&disk).map_err(|e| VmError::Result {
        path: sidecar.clone(),
        reason: format!("cannot encode: {e}"),
    })?;
    std::fs::write(&sidecar, text).ctx("write", &sidecar)?;
    Ok(disk)
}

fn set_mode(path: &Path, mode: u32) -> Result<(), VmError> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).ctx("chmod", path)
}

/// Removes disks made earlier from the same image directory.
fn remove_stale(dir: &Path, current: &BaseDisk) -> Result<(), VmError> {
    for entry in std::fs::read_dir(dir).ctx("read directory", dir)? {
        let entry = entry.ctx("read directory", dir)?;
        let path = entry.path();
        if path.extension().is_some_and(|e| e == "json") {
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            let Ok(old) = serde_json::from_slice::<BaseDisk>(&bytes) else {
                continue;
            };
            if old.image == current.image && old.path != current.path {
                for p in [&old.path, &path] {
                    match std::fs::remove_file(p) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                        Err(e) => return Err(VmError::io("remove", p, e)),
                    }
                }
            }
        }
    }
    Ok(())
}

/// Bytes of regular files below `root` (symlinks not followed), plus a block per directory.
fn tree_size(root: &Path) -> Result<u64, VmError> {
    let mut total = 0u64;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        total += 4096;
        for entry in std::fs::read_dir(&dir).ctx("read directory", &dir)? {
            let entry = entry.ctx("read directory", &dir)?;
            let meta = entry.metadata().ctx("stat", &entry.path())?;
            if meta.is_dir() {
                stack.push(entry.path());
            } else if meta.is_file() {
                total += meta.len().div_ceil(4096) * 4096;
            }
        }
    }
    Ok(total)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Creates the per-VM overlay `overlay` (qcow2) over the read-only `base` (raw) with
/// `qemu-img create -f qcow2 -b BASE -F raw`.
pub(crate) fn create_overlay(
    runner: &dyn ToolRunner,
    base: &Path,
    overlay: &Path,
) -> Result<(), VmError> {
    runner.run(
        &ToolCommand::new("qemu-img", "qemu-utils")
            .arg("create")
            .arg("-q")
            .arg("-f")
            .arg("qcow2")
            .arg("-b")
            .arg(base)
            .arg("-F")
            .arg("raw")
            .arg(overlay),
    )?;
    Ok(())
}

/// Creates the scratch disk: a sparse file of `bytes` with an empty ext4 file system, inode
/// tables and journal written now (not lazily by the guest kernel while it measures).
pub(crate) fn create_scratch(
    runner: &dyn ToolRunner,
    file: &Path,
    bytes: u64,
) -> Result<(), VmError> {
    let f = std::fs::File::create(file).ctx("create", file)?;
    f.set_len(bytes).ctx("resize", file)?;
    drop(f);
    runner.run(
        &ToolCommand::new("mkfs.ext4", "e2fsprogs")
            .arg("-q")
            .arg("-F")
            .arg("-L")
            .arg("isolab-scratch")
            .arg("-E")
            .arg("lazy_itable_init=0,lazy_journal_init=0")
            .arg(file),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_runner::FakeRunner;

    #[test]
    fn overlay_and_scratch_commands() {
        let dir = tempfile::tempdir().unwrap();
        let r = FakeRunner::default()
            .answer("qemu-img", "")
            .answer("mkfs.ext4", "");
        create_overlay(&r, Path::new("/c/base.ext4"), Path::new("/run/root.qcow2")).unwrap();
        let scratch = dir.path().join("scratch.ext4");
        create_scratch(&r, &scratch, 64 << 20).unwrap();
        assert_eq!(std::fs::metadata(&scratch).unwrap().len(), 64 << 20);
        let log = r.log.borrow();
        assert_eq!(
            log[0],
            "qemu-img create -q -f qcow2 -b /c/base.ext4 -F raw /run/root.qcow2"
        );
        assert!(log[1].starts_with(
            "mkfs.ext4 -q -F -L isolab-scratch -E lazy_itable_init=0,lazy_journal_init=0 "
        ));
    }

    #[test]
    fn missing_manifest_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let e = prepare_disk(dir.path(), dir.path()).unwrap_err();
        assert!(e.to_string().contains(".isolab-image.json"), "{e}");
    }

    #[test]
    fn stale_disks_of_the_same_image_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let old = BaseDisk {
            path: dir.path().join("aaaa.ext4"),
            sha256: "x".into(),
            bytes: 1,
            image: "/img".into(),
            manifest_sha256: "aaaa".into(),
        };
        std::fs::write(&old.path, b"").unwrap();
        std::fs::write(
            dir.path().join("aaaa.json"),
            serde_json::to_vec(&old).unwrap(),
        )
        .unwrap();
        let mut other = old.clone();
        other.image = "/other".into();
        other.path = dir.path().join("bbbb.ext4");
        std::fs::write(&other.path, b"").unwrap();
        std::fs::write(
            dir.path().join("bbbb.json"),
            serde_json::to_vec(&other).unwrap(),
        )
        .unwrap();
        let mut current = old.clone();
        current.path = dir.path().join("cccc.ext4");
        remove_stale(dir.path(), &current).unwrap();
        assert!(!old.path.exists() && !dir.path().join("aaaa.json").exists());
        assert!(other.path.exists());
        let t = dir.path().join("t");
        std::fs::create_dir_all(t.join("d")).unwrap();
        std::fs::write(t.join("d/f"), [0u8; 5000]).unwrap();
        assert_eq!(tree_size(&t).unwrap(), 4096 * 2 + 8192);
    }
}
