//! An image of one's own, imported by isolab-image from a container image
//! (`[experiment] image = "docker-archive:FILE"`, …): Docker and Podman load its Docker
//! archive ([`OwnImage::archive`]) instead of importing a flattened tar, so that they run
//! the image's own layers under its own ID, the digest every platform records; the other
//! engines use its root file system as they use any image directory.

use std::path::{Path, PathBuf};

/// What Docker and Podman need of an imported image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OwnImage {
    /// Its Docker archive, beside its root file system.
    pub archive: PathBuf,
    /// The name the archive is tagged with (`isolab/imported-<16 hex>:latest`).
    pub name: String,
    /// The configuration digest of its Docker archive, `sha256:…`: the ID Docker and
    /// Podman give it (the image's own digest for an image that came as a Docker image).
    pub digest: String,
    /// Whether it has an entrypoint, which a workload's command must not run under.
    pub entrypoint: bool,
}

/// The image of one's own whose root file system is `dir`, when it is one.
pub(crate) fn own_image(dir: &Path) -> Option<OwnImage> {
    let manifest = isolab_image::Manifest::load(dir).ok()?;
    let record = manifest.imported?;
    Some(OwnImage {
        archive: isolab_image::docker_archive_of(dir)?,
        name: record.docker_name,
        digest: record.docker_digest,
        entrypoint: !record.config.entrypoint.is_empty(),
    })
}

/// The flags that clear an image's entrypoint (`--entrypoint ""`), so that the workload's
/// command runs as it is, as on every other platform.
pub(crate) fn entrypoint_flags(image_dir: &Path) -> Vec<String> {
    match own_image(image_dir) {
        Some(own) if own.entrypoint => vec!["--entrypoint".into(), String::new()],
        _ => Vec::new(),
    }
}
