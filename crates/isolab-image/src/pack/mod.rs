//! Packing an image tree for each engine: an ext4 file (our runtime's loop-device root, later a raw
//! VM disk), a reproducible tar (Docker/Podman `import`) and an OCI bundle (runc, crun, isolab-runtime).

mod ext4;
mod oci;
mod tarball;

use std::path::{Path, PathBuf};

use crate::error::ImageError;
use isolab_tools::{SystemTools, ToolRunner};

pub use ext4::{default_ext4_size, EXT4_LABEL};
pub use oci::{default_spec, OCI_CONFIG, OCI_ROOTFS};
pub use tarball::TAR_MTIME;

/// What to pack an image into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackTarget {
    /// An ext4 file system in a sparse file, made by `mkfs.ext4 -d` (e2fsprogs), label `isolab`.
    ///
    /// The file is a whole-disk file system without a partition table, so it is usable later as a
    /// raw VM disk as is: `qemu-system-x86_64 -drive file=FILE,format=raw,if=virtio -kernel … -append
    /// root=/dev/vda` (direct kernel boot; no boot loader is installed).
    Ext4 {
        /// The image file to write (replaced if it exists).
        file: PathBuf,
        /// Size in bytes; `None` = used size × 1.3 + 64 MiB, rounded up to whole MiB.
        size: Option<u64>,
    },
    /// A reproducible tar of the tree (sorted, mtime [`TAR_MTIME`], numeric owners, no device
    /// nodes), for `docker import` / `podman import`.
    Tar {
        /// The tar file to write (replaced if it exists).
        file: PathBuf,
    },
    /// An OCI runtime bundle: `rootfs/` (a faithful copy) and `config.json` (the default spec).
    Oci {
        /// The bundle directory; it must not exist or be empty.
        bundle: PathBuf,
    },
}

/// The result of [`pack`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packed {
    /// The file or bundle directory written.
    pub path: PathBuf,
    /// Its size in bytes: the file length (apparent size of a sparse ext4 file), or for a bundle
    /// the bytes of file content copied into `rootfs/`.
    pub bytes: u64,
    /// SHA-256 (hex) of the file, or for a bundle the [`crate::tree_digest`] of `rootfs/` (equal to
    /// the image's own tree digest, since the copy is faithful).
    pub sha256: String,
}

/// Pack the image tree at `image_dir` into `target`, running tools on this host.
pub fn pack(image_dir: &Path, target: &PackTarget) -> Result<Packed, ImageError> {
    pack_with(image_dir, target, &SystemTools)
}

/// [`pack`] with an explicit [`ToolRunner`] (mkfs.ext4 is the only tool it runs).
pub fn pack_with(
    image_dir: &Path,
    target: &PackTarget,
    tools: &dyn ToolRunner,
) -> Result<Packed, ImageError> {
    let meta = std::fs::metadata(image_dir)
        .map_err(|e| ImageError::io("read image directory", image_dir, e))?;
    if !meta.is_dir() {
        return Err(ImageError::io(
            "read image directory",
            image_dir,
            std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
        ));
    }
    match target {
        PackTarget::Ext4 { file, size } => ext4::pack_ext4(image_dir, file, *size, tools),
        PackTarget::Tar { file } => tarball::pack_tar(image_dir, file),
        PackTarget::Oci { bundle } => oci::pack_oci(image_dir, bundle),
    }
}

/// `file` with a temporary sibling name, written first and renamed over `file` on success.
pub(crate) fn temp_sibling(file: &Path) -> PathBuf {
    let mut s = file.as_os_str().to_os_string();
    s.push(format!(".isolab-tmp-{}", std::process::id()));
    PathBuf::from(s)
}

/// Removes a temporary file unless disarmed.
pub(crate) struct TempFile(pub Option<PathBuf>);

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            // Best effort: the error that made us drop it was already returned.
            let _ = std::fs::remove_file(p);
        }
    }
}
