//! The image manifest (`.isolab-image.json` at the root of every image), what it records of
//! a recipe ([`RecipeRecord`]) and of an imported image ([`ImportRecord`]), and the [`Image`]
//! handle.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{ImageError, IoContext};

/// File name of the manifest at the root of an image tree.
pub const MANIFEST_FILE: &str = ".isolab-image.json";

/// Which recipe built an image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageKind {
    /// A busybox root (Debian's busybox-static), for tests and start-up benchmarks.
    Busybox,
    /// A Debian root with the benchmark tools (sysbench, fio, stress-ng, iperf3).
    Bench,
    /// The bench root plus Debian's Docker engine (`docker.io`), for `vm+docker` guests.
    #[serde(rename = "bench-docker")]
    BenchDocker,
    /// A Debian root built from a [`Recipe`](crate::Recipe): the bench packages plus what an
    /// experiment's workloads need, cached under its content hash.
    Recipe,
    /// An image of one's own, imported from a container image ([`crate::import_with`]).
    Imported,
}

impl ImageKind {
    /// The kind as written in the manifest and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageKind::Busybox => "busybox",
            ImageKind::Bench => "bench",
            ImageKind::BenchDocker => "bench-docker",
            ImageKind::Recipe => "recipe",
            ImageKind::Imported => "imported",
        }
    }
}

impl std::fmt::Display for ImageKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One input of an image: a Debian package (with its version) or a copied file (with its digest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Source {
    /// Package or file name ("busybox-static", "sysbench").
    pub name: String,
    /// Debian package version ("1:1.35.0-4+deb12u1+b1").
    pub version: String,
    /// Architecture as dpkg records it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub architecture: Option<String>,
    /// Where the content was taken from (a host path), when copied from the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
    /// SHA-256 (hex) of the copied file, when copied from the host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
}

/// What the lab records about an image: how, when and from what it was built.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The recipe.
    pub kind: ImageKind,
    /// Build time, RFC 3339 UTC ("2025-05-20T10:00:00Z").
    pub created: String,
    /// The builder, "isolab-image VERSION".
    pub builder: String,
    /// Debian suite of a bench image ("bookworm").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub suite: Option<String>,
    /// The apt source lines a bench image was built from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
    /// Host tools that built the image, with their package versions (e.g. mmdebstrap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Source>,
    /// The image's content: copied files or installed packages, sorted by name.
    pub sources: Vec<Source>,
    /// The recipe of a [`ImageKind::Recipe`] image, with its hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recipe: Option<RecipeRecord>,
    /// Packages installed both on the build host and in the image whose versions differ (at
    /// build time): the image's binaries are not the host's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_differences: Vec<VersionDifference>,
    /// Where an [`ImageKind::Imported`] image came from: its reference, digest and
    /// configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub imported: Option<ImportRecord>,
}

/// A recipe as recorded in its image's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecipeRecord {
    /// [`Recipe::hash`](crate::Recipe::hash): SHA-256 (hex) of the recipe's canonical text.
    pub hash: String,
    /// The recipe itself.
    #[serde(flatten)]
    pub recipe: crate::Recipe,
}

/// A package installed on the host and in an image with different versions.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionDifference {
    /// The Debian package.
    pub package: String,
    /// Its version in the image.
    pub image: String,
    /// Its version on the host.
    pub host: String,
}

impl std::fmt::Display for VersionDifference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: image {}, host {}",
            self.package, self.image, self.host
        )
    }
}

impl Manifest {
    /// A manifest for `kind` stamped with the current time and this crate's version.
    pub fn new(kind: ImageKind) -> Self {
        Manifest {
            kind,
            created: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            builder: format!("isolab-image {}", env!("CARGO_PKG_VERSION")),
            suite: None,
            mirrors: Vec::new(),
            tools: Vec::new(),
            sources: Vec::new(),
            recipe: None,
            host_differences: Vec::new(),
            imported: None,
        }
    }

    /// Read the manifest of the image rooted at `dir`.
    pub fn load(dir: &Path) -> Result<Manifest, ImageError> {
        let path = dir.join(MANIFEST_FILE);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ImageError::NotAnImage {
                    path: dir.to_path_buf(),
                    file: MANIFEST_FILE,
                })
            }
            Err(e) => return Err(ImageError::io("read", path, e)),
        };
        serde_json::from_slice(&text).map_err(|source| ImageError::Manifest { path, source })
    }

    /// Write the manifest into the image rooted at `dir` (mode 0644).
    pub fn save(&self, dir: &Path) -> Result<(), ImageError> {
        let path = dir.join(MANIFEST_FILE);
        let mut text = serde_json::to_vec_pretty(self).map_err(|source| ImageError::Manifest {
            path: path.clone(),
            source,
        })?;
        text.push(b'\n');
        std::fs::write(&path, text).ctx("write", &path)
    }

    /// The source entry named `name`, if any.
    pub fn source(&self, name: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.name == name)
    }
}

/// A built image: its root directory, recipe and manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The root directory of the tree.
    pub dir: PathBuf,
    /// The recipe that built it.
    pub kind: ImageKind,
    /// Its manifest, as stored in `dir/.isolab-image.json`.
    pub manifest: Manifest,
}

impl Image {
    /// Open an image built earlier, reading its manifest.
    pub fn open(dir: &Path) -> Result<Image, ImageError> {
        let manifest = Manifest::load(dir)?;
        Ok(Image {
            dir: dir.to_path_buf(),
            kind: manifest.kind,
            manifest,
        })
    }
}

/// What an image's configuration asks of the process that runs in it (the `config` of the
/// OCI image configuration, Docker's `Config`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `Entrypoint`: the program (and its first arguments) every command runs under.
    #[serde(default)]
    pub entrypoint: Vec<String>,
    /// `Cmd`: the default arguments (or command, without an entrypoint).
    #[serde(default)]
    pub cmd: Vec<String>,
    /// `Env`: `NAME=value` entries.
    #[serde(default)]
    pub env: Vec<String>,
    /// `WorkingDir`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_dir: Option<String>,
    /// `User`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
}

impl ImageConfig {
    /// The image's own command: its entrypoint followed by its command (what `docker run
    /// IMAGE` runs).
    pub fn command(&self) -> Vec<String> {
        self.entrypoint.iter().chain(&self.cmd).cloned().collect()
    }
}

/// Where an imported image came from, as recorded in its manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImportRecord {
    /// The reference it was imported from (`docker-archive:/tmp/app.tar`).
    pub reference: String,
    /// `sha256:` + the SHA-256 of its configuration blob: the image's ID, its cache key.
    pub digest: String,
    /// The digest of the manifest in the OCI layout skopeo wrote.
    pub manifest_digest: String,
    /// How many layers it has.
    pub layers: usize,
    /// What it asks of the process that runs in it.
    pub config: ImageConfig,
    /// The name its Docker archive is tagged with (`isolab/imported-<16 hex>:latest`).
    pub docker_name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_round_trips_and_open_reads_it() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = Manifest::new(ImageKind::Busybox);
        m.sources.push(Source {
            name: "busybox-static".into(),
            version: "1:1.35.0-4".into(),
            architecture: Some("amd64".into()),
            origin: Some("/bin/busybox".into()),
            sha256: Some("ab".repeat(32)),
        });
        m.save(dir.path()).unwrap();
        let text = std::fs::read_to_string(dir.path().join(MANIFEST_FILE)).unwrap();
        assert!(text.contains("\"kind\": \"busybox\""), "{text}");
        assert!(!text.contains("mirrors"), "empty lists are omitted: {text}");
        let img = Image::open(dir.path()).unwrap();
        assert_eq!(img.kind, ImageKind::Busybox);
        assert_eq!(img.manifest, m);
        assert_eq!(
            img.manifest.source("busybox-static").unwrap().version,
            "1:1.35.0-4"
        );
        assert!(
            m.created.ends_with('Z') && m.created.len() == 20,
            "{}",
            m.created
        );
    }

    #[test]
    fn missing_or_broken_manifest_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = Image::open(dir.path()).unwrap_err();
        assert!(matches!(err, ImageError::NotAnImage { .. }), "{err}");
        assert!(err.to_string().contains("isolab image build"));
        std::fs::write(dir.path().join(MANIFEST_FILE), "{nope").unwrap();
        let err = Image::open(dir.path()).unwrap_err();
        assert!(matches!(err, ImageError::Manifest { .. }), "{err}");
    }
}
