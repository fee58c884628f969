//! OCI runtime bundles: `rootfs/` and `config.json`, runnable by `runc run` and `crun run`.

use std::path::Path;

use oci_spec::runtime::{Root, Spec};

use super::Packed;
use crate::error::{ImageError, IoContext};
use crate::skeleton::IMAGE_HOSTNAME;
use crate::tree;

/// The root file-system directory inside a bundle.
pub const OCI_ROOTFS: &str = "rootfs";
/// The runtime configuration file inside a bundle.
pub const OCI_CONFIG: &str = "config.json";

/// The bundle's configuration: oci-spec's default spec (process `sh`, the usual namespaces,
/// mounts, masked paths and capabilities) with root `rootfs`, a writable root and hostname
/// `isolab`. The runtime writes richer specs per run; this one makes a bundle runnable as is.
pub fn default_spec() -> Spec {
    let mut spec = Spec::default();
    let mut root = Root::default();
    root.set_path(OCI_ROOTFS.into());
    root.set_readonly(Some(false));
    spec.set_root(Some(root));
    spec.set_hostname(Some(IMAGE_HOSTNAME.into()));
    spec
}

pub(crate) fn pack_oci(dir: &Path, bundle: &Path) -> Result<Packed, ImageError> {
    match std::fs::read_dir(bundle) {
        Ok(mut it) => {
            if it.next().is_some() {
                return Err(ImageError::BundleExists {
                    path: bundle.to_path_buf(),
                });
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(bundle).ctx("create directory", bundle)?;
        }
        Err(e) => return Err(ImageError::io("list directory", bundle, e)),
    }
    let rootfs = bundle.join(OCI_ROOTFS);
    let result = (|| {
        std::fs::create_dir(&rootfs).ctx("create directory", &rootfs)?;
        let bytes = tree::copy_tree(dir, &rootfs)?;
        let config = bundle.join(OCI_CONFIG);
        default_spec()
            .save(&config)
            .map_err(|source| ImageError::OciSpec {
                path: config,
                source,
            })?;
        Ok(Packed {
            path: bundle.to_path_buf(),
            bytes,
            sha256: tree::tree_digest(&rootfs)?,
        })
    })();
    if result.is_err() {
        // Leave the bundle directory as we found it (empty); best effort, the first error wins.
        let _ = crate::skeleton::remove_tree(&rootfs);
        let _ = std::fs::remove_file(bundle.join(OCI_CONFIG));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundle_has_rootfs_copy_and_default_config() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("bin")).unwrap();
        std::fs::write(src.join("bin/true"), "#!/bin/sh\n").unwrap();
        let bundle = d.path().join("b");
        let p = pack_oci(&src, &bundle).unwrap();
        assert_eq!(p.sha256, tree::tree_digest(&src).unwrap());
        assert_eq!(p.bytes, 10);
        let spec = Spec::load(bundle.join(OCI_CONFIG)).unwrap();
        let root = spec.root().as_ref().unwrap();
        assert_eq!(root.path(), Path::new("rootfs"));
        assert_eq!(root.readonly(), Some(false));
        let args = spec.process().as_ref().unwrap().args().clone().unwrap();
        assert_eq!(args, ["sh"]);
        let err = pack_oci(&src, &bundle).unwrap_err();
        assert!(matches!(err, ImageError::BundleExists { .. }), "{err}");
    }
}
