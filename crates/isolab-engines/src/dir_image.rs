//! An image directory used as it is, as the read-only lower layer of an overlay
//! (runc, crun, LXC, nspawn): [`prepare_dir_image`].

use std::io;
use std::path::Path;

use crate::request::path_str;
use crate::{EngineError, PreparedImage};

/// An image directory as a [`PreparedImage`]: reference = the directory, digest =
/// `sha256:` + the SHA-256 of its manifest (see the module docs).
pub(crate) fn prepare_dir_image(
    engine: &'static str,
    image: &Path,
) -> Result<PreparedImage, EngineError> {
    let dir = std::fs::canonicalize(image).map_err(|source| EngineError::Io {
        engine,
        action: "open the image directory",
        path: image.to_path_buf(),
        source,
    })?;
    if !dir.is_dir() {
        return Err(EngineError::Io {
            engine,
            action: "use as the image (overlay lower layer)",
            path: dir,
            source: io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        });
    }
    let digest = isolab_image::image_digest(&dir).map_err(|source| EngineError::Image {
        engine,
        action: "hash the image manifest (build the image with `isolab image build`)",
        path: dir.join(isolab_image::MANIFEST_FILE),
        source: Box::new(source),
    })?;
    Ok(PreparedImage {
        reference: path_str(&dir),
        digest,
        source: image.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn images_are_the_directory_and_the_manifest_digest() {
        let dir = tempfile::tempdir().unwrap();
        let err = prepare_dir_image("runc", dir.path()).unwrap_err();
        assert!(err.to_string().contains("isolab image build"), "{err}");
        std::fs::write(dir.path().join(isolab_image::MANIFEST_FILE), "{}\n").unwrap();
        let p = prepare_dir_image("runc", dir.path()).unwrap();
        assert_eq!(p.reference, path_str(&dir.path().canonicalize().unwrap()));
        // sha256("{}\n")
        assert_eq!(
            p.digest,
            "sha256:ca3d163bab055381827226140568f3bef7eaac187cebd76878e0b63e9e442356"
        );
        assert!(prepare_dir_image("runc", &dir.path().join("none")).is_err());
    }
}
