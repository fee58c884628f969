//! An image directory used as it is, as the read-only lower layer of an overlay
//! (runc, crun, LXC): [`prepare_dir_image`].

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
    let manifest = dir.join(isolab_image::MANIFEST_FILE);
    let digest = isolab_image::sha256_file(&manifest).map_err(|e| EngineError::Io {
        engine,
        action: "hash the image manifest (build the image with `isolab image build`)",
        path: manifest.clone(),
        source: io::Error::other(e.to_string()),
    })?;
    Ok(PreparedImage {
        reference: path_str(&dir),
        digest: format!("sha256:{digest}"),
        source: image.to_path_buf(),
    })
}
