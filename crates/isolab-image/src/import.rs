//! An image of one's own: a container image named as skopeo names it, imported once into
//! isolab's image cache by its content digest, so that every platform runs the same image.
//!
//! The references are skopeo's transports, which users of containers know:
//! `oci:DIR[:TAG]` (an OCI image layout), `oci-archive:FILE[:TAG]`,
//! `docker-archive:FILE[:NAME:TAG]` (what `docker save` writes), `docker-daemon:NAME:TAG`
//! (the local Docker store) and `containers-storage:NAME[:TAG]` (the local Podman store).
//!
//! The formats are read by their reference implementations, packaged by Debian, instead of
//! by hand: **skopeo** (containers/image, the library Podman and CRI-O use) reads every
//! transport, prints the image's configuration and copies it into an OCI image layout and a
//! Docker archive; **umoci** (the OCI's own image tool) unpacks the layout's layers into a
//! root file system, whiteouts and ownership applied. isolab parses no layer, whiteout or
//! manifest; it reads only the configuration's JSON (entrypoint, command, environment) and
//! the layout's `index.json` for the manifest's digest.
//!
//! The cache key is the SHA-256 of the image's configuration blob: Docker's image ID, the
//! same whichever transport the image came through, and what `docker image inspect`
//! reports after the Docker archive is loaded. [`import_with`] makes
//! `CACHE/imported-<first 16 hex digits>/` with:
//! - `rootfs/`: the root file system (with isolab's `.isolab-image.json`, kind `imported`,
//!   whose [`ImportRecord`] says where it came from): what isolab-runtime, runc, crun,
//!   youki, LXC, systemd-nspawn and the VMs' disks use;
//! - `layout/`: the OCI image layout (tag `isolab`), as skopeo copied it;
//! - `docker.tar`: a Docker archive of the same layers and configuration, tagged
//!   `isolab/imported-<16 hex>:latest`, which the Docker and Podman platforms load.

use std::path::{Path, PathBuf};

use isolab_tools::{ToolCommand, ToolRunner};
use serde::{Deserialize, Serialize};

use crate::error::{ImageError, IoContext};
use crate::manifest::{Image, ImageConfig, ImageKind, ImportRecord, Manifest};
use crate::skeleton::Staging;

/// The Debian package of skopeo.
pub const SKOPEO_PACKAGE: &str = "skopeo";
/// The Debian package of umoci.
pub const UMOCI_PACKAGE: &str = "umoci";
/// The tag of the image in an imported entry's OCI layout.
const LAYOUT_TAG: &str = "isolab";
/// Prefix of imported entries' directories in the cache.
const DIR_PREFIX: &str = "imported-";

/// The transports an image of one's own may be named by, as skopeo names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// An OCI image layout directory: `oci:DIR[:TAG]`.
    Oci,
    /// An OCI layout in a tar: `oci-archive:FILE[:TAG]`.
    OciArchive,
    /// A Docker archive, as `docker save` writes it: `docker-archive:FILE[:NAME:TAG]`.
    DockerArchive,
    /// An image in the local Docker daemon's store: `docker-daemon:NAME:TAG`.
    DockerDaemon,
    /// An image in the local containers/storage (Podman's): `containers-storage:NAME[:TAG]`.
    ContainersStorage,
}

impl Transport {
    /// Every transport, in the order they are listed in messages.
    pub const ALL: [Transport; 5] = [
        Transport::Oci,
        Transport::OciArchive,
        Transport::DockerArchive,
        Transport::DockerDaemon,
        Transport::ContainersStorage,
    ];

    /// Its name, as in a reference (`docker-archive`).
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Oci => "oci",
            Transport::OciArchive => "oci-archive",
            Transport::DockerArchive => "docker-archive",
            Transport::DockerDaemon => "docker-daemon",
            Transport::ContainersStorage => "containers-storage",
        }
    }

    /// Whether its name is a file or directory path (whose first part must exist).
    fn names_a_path(self) -> bool {
        matches!(
            self,
            Transport::Oci | Transport::OciArchive | Transport::DockerArchive
        )
    }
}

/// An image of one's own: a transport and what it names (`docker-archive:/tmp/app.tar`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImageReference {
    /// How the image is read.
    pub transport: Transport,
    /// What the transport names: a path (with an optional `:TAG`) or `NAME:TAG`.
    pub name: String,
}

impl ImageReference {
    /// `text` as a reference when it starts with a transport's name and a colon; `None`
    /// when it does not (a directory path such as `/var/lib/isolab/images/bench`); an
    /// error when what follows the transport is empty.
    pub fn parse(text: &str) -> Option<Result<ImageReference, ImageError>> {
        let (prefix, name) = text.split_once(':')?;
        let transport = Transport::ALL.into_iter().find(|t| t.as_str() == prefix)?;
        Some(if name.is_empty() {
            Err(ImageError::BadReference {
                reference: text.to_owned(),
                reason: "nothing follows the transport",
            })
        } else {
            Ok(ImageReference {
                transport,
                name: name.to_owned(),
            })
        })
    }

    /// The file or directory a path transport names (the part before a `:TAG`).
    pub fn path(&self) -> Option<PathBuf> {
        self.transport
            .names_a_path()
            .then(|| PathBuf::from(self.name.split(':').next().unwrap_or(&self.name)))
    }
}

impl std::fmt::Display for ImageReference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.transport.as_str(), self.name)
    }
}

/// The OCI image configuration's parts isolab reads (Docker's image JSON is the same).
#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    config: Option<RawProcess>,
    #[serde(default)]
    rootfs: Option<RawRootfs>,
}

#[derive(Deserialize)]
struct RawProcess {
    #[serde(rename = "Entrypoint", default)]
    entrypoint: Option<Vec<String>>,
    #[serde(rename = "Cmd", default)]
    cmd: Option<Vec<String>>,
    #[serde(rename = "Env", default)]
    env: Option<Vec<String>>,
    #[serde(rename = "WorkingDir", default)]
    working_dir: Option<String>,
    #[serde(rename = "User", default)]
    user: Option<String>,
}

#[derive(Deserialize)]
struct RawRootfs {
    #[serde(default)]
    diff_ids: Vec<String>,
}

/// The entry of an imported image in `cache_root`: `imported-<first 16 hex digits>`.
fn entry_dir(cache_root: &Path, digest: &str) -> PathBuf {
    let hex = digest.strip_prefix("sha256:").unwrap_or(digest);
    cache_root.join(format!("{DIR_PREFIX}{}", &hex[..hex.len().min(16)]))
}

/// The root file system of an imported entry.
pub fn imported_rootfs(entry: &Path) -> PathBuf {
    entry.join("rootfs")
}

/// The Docker archive of the imported image whose root file system is `rootfs`, beside it.
pub fn docker_archive_of(rootfs: &Path) -> Option<PathBuf> {
    let tar = rootfs.parent()?.join("docker.tar");
    tar.is_file().then_some(tar)
}

/// The imported image of `digest` in `cache_root`, when it is complete.
fn cached_import(cache_root: &Path, digest: &str) -> Option<Image> {
    let rootfs = imported_rootfs(&entry_dir(cache_root, digest));
    let image = Image::open(&rootfs).ok()?;
    (image.manifest.imported.as_ref()?.digest == digest && docker_archive_of(&rootfs).is_some())
        .then_some(image)
}

/// Imports `reference` into `cache_root` (once per configuration digest) with the host's
/// skopeo and umoci, and returns the image, its root file system as [`Image::dir`].
pub fn import(reference: &ImageReference, cache_root: &Path) -> Result<Image, ImageError> {
    import_with(
        reference,
        cache_root,
        &crate::HostPaths::default().dpkg_status,
        &isolab_tools::SystemTools,
    )
}

/// [`import`] with the host's dpkg status at `dpkg_status` (for the tools' versions) and
/// the tools run through `tools`.
pub fn import_with(
    reference: &ImageReference,
    cache_root: &Path,
    dpkg_status: &Path,
    tools: &dyn ToolRunner,
) -> Result<Image, ImageError> {
    if let Some(path) = reference.path() {
        if !path.exists() {
            return Err(ImageError::ImageMissing {
                reference: reference.to_string(),
                path,
            });
        }
    }
    let skopeo = |args: &[&str]| {
        args.iter()
            .fold(ToolCommand::new("skopeo", SKOPEO_PACKAGE), |c, a| c.arg(a))
    };
    let shown = reference.to_string();
    let raw = tools
        .run(&skopeo(&["inspect", "--raw", "--config", &shown]))?
        .stdout;
    let digest = format!("sha256:{}", crate::tree::sha256_hex(&raw));
    if let Some(image) = cached_import(cache_root, &digest) {
        return Ok(image);
    }
    let parsed: RawConfig =
        serde_json::from_slice(&raw).map_err(|source| ImageError::BadConfig {
            reference: shown.clone(),
            source,
        })?;
    let process = parsed.config.unwrap_or(RawProcess {
        entrypoint: None,
        cmd: None,
        env: None,
        working_dir: None,
        user: None,
    });
    let config = ImageConfig {
        entrypoint: process.entrypoint.unwrap_or_default(),
        cmd: process.cmd.unwrap_or_default(),
        env: process.env.unwrap_or_default(),
        working_dir: process.working_dir.filter(|w| !w.is_empty()),
        user: process.user.filter(|u| !u.is_empty()),
    };

    std::fs::create_dir_all(cache_root).ctx("create directory", cache_root)?;
    let entry = entry_dir(cache_root, &digest);
    let name = entry
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let _lock = crate::cache::Lock::exclusive(&cache_root.join(format!(".{name}.lock")))?;
    if let Some(image) = cached_import(cache_root, &digest) {
        return Ok(image);
    }
    let staging = Staging::new(&entry, true)?;
    let layout = staging.path().join("layout");
    let layout_ref = format!("oci:{}:{LAYOUT_TAG}", layout.display());
    tools.run(&skopeo(&["copy", "--quiet", &shown, &layout_ref]))?;
    let rootfs = staging.path().join("rootfs");
    tools.run(
        &ToolCommand::new("umoci", UMOCI_PACKAGE)
            .arg("raw")
            .arg("unpack")
            .arg("--image")
            .arg(format!("{}:{LAYOUT_TAG}", layout.display()))
            .arg(&rootfs),
    )?;
    let docker_name = format!("isolab/{name}:latest");
    let archive = format!(
        "docker-archive:{}:{docker_name}",
        staging.path().join("docker.tar").display()
    );
    tools.run(&skopeo(&["copy", "--quiet", &layout_ref, &archive]))?;

    let mut manifest = Manifest::new(ImageKind::Imported);
    // A Debian-based image says which packages (and versions) it holds.
    manifest.sources =
        crate::dpkg::installed_packages(&rootfs.join("var/lib/dpkg/status")).unwrap_or_default();
    manifest.tools = [SKOPEO_PACKAGE, UMOCI_PACKAGE]
        .iter()
        .filter_map(|p| crate::dpkg::installed_package(dpkg_status, p))
        .collect();
    manifest.imported = Some(ImportRecord {
        reference: shown,
        digest,
        manifest_digest: layout_manifest_digest(&layout)?,
        layers: parsed.rootfs.map_or(0, |r| r.diff_ids.len()),
        config,
        docker_name,
    });
    manifest.save(&rootfs)?;
    let entry = staging.commit()?;
    Image::open(&imported_rootfs(&entry))
}

/// The digest of the first manifest of the OCI layout at `layout` (its `index.json`).
fn layout_manifest_digest(layout: &Path) -> Result<String, ImageError> {
    #[derive(Deserialize)]
    struct Index {
        manifests: Vec<Descriptor>,
    }
    #[derive(Deserialize)]
    struct Descriptor {
        digest: String,
    }
    let path = layout.join("index.json");
    let text = std::fs::read(&path).ctx("read", &path)?;
    let index: Index = serde_json::from_slice(&text).map_err(|source| ImageError::Manifest {
        path: path.clone(),
        source,
    })?;
    index
        .manifests
        .into_iter()
        .next()
        .map(|d| d.digest)
        .ok_or_else(|| {
            ImageError::io(
                "read the image manifest from",
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "index.json lists no manifest",
                ),
            )
        })
}

/// The complete imported images under `cache_root`, sorted by directory name.
pub fn cached_imports(cache_root: &Path) -> Result<Vec<Image>, ImageError> {
    let entries = match std::fs::read_dir(cache_root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ImageError::io("list directory", cache_root, e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.ctx("list directory", cache_root)?;
        if !e.file_name().to_string_lossy().starts_with(DIR_PREFIX) {
            continue;
        }
        if let Ok(image) = Image::open(&imported_rootfs(&e.path())) {
            if image.manifest.imported.is_some() {
                out.push(image);
            }
        }
    }
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_tools::{ToolError, ToolOutput};
    use std::sync::Mutex;

    /// A skopeo and umoci that answer as the real ones do: `inspect` prints `config`,
    /// `copy` to `oci:` writes an index.json, `unpack` makes a root with /bin/sh.
    struct FakeTools {
        config: Vec<u8>,
        calls: Mutex<Vec<String>>,
    }

    impl ToolRunner for FakeTools {
        fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
            self.calls.lock().unwrap().push(cmd.display());
            let args: Vec<String> = cmd
                .args
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect();
            match (cmd.program.name.as_str(), args[0].as_str()) {
                ("skopeo", "inspect") => Ok(ToolOutput {
                    stdout: self.config.clone(),
                    stderr: Vec::new(),
                }),
                ("skopeo", "copy") => {
                    let dest = args.last().unwrap();
                    if let Some(layout) = dest.strip_prefix("oci:") {
                        let dir = Path::new(layout.rsplit_once(':').unwrap().0);
                        std::fs::create_dir_all(dir).unwrap();
                        std::fs::write(
                            dir.join("index.json"),
                            r#"{"schemaVersion":2,"manifests":[{"digest":"sha256:abc","size":1}]}"#,
                        )
                        .unwrap();
                    } else {
                        let file = dest.strip_prefix("docker-archive:").unwrap();
                        std::fs::write(file.split(':').next().unwrap(), b"tar").unwrap();
                    }
                    Ok(ToolOutput::default())
                }
                ("umoci", "raw") => {
                    let root = Path::new(args.last().unwrap());
                    std::fs::create_dir_all(root.join("bin")).unwrap();
                    std::fs::write(root.join("bin/sh"), b"").unwrap();
                    Ok(ToolOutput::default())
                }
                other => panic!("unexpected {other:?}"),
            }
        }
    }

    const CONFIG: &str = r#"{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/bin:/bin","APP_MODE=bench"],"Entrypoint":["sysbench"],"Cmd":["cpu","run"],"WorkingDir":"/srv"},"rootfs":{"type":"layers","diff_ids":["sha256:1","sha256:2"]}}"#;

    #[test]
    fn references_use_skopeo_transport_names_and_plain_paths_are_not_references() {
        let r = ImageReference::parse("docker-archive:/tmp/app.tar")
            .unwrap()
            .unwrap();
        assert_eq!(r.transport, Transport::DockerArchive);
        assert_eq!(r.path(), Some(PathBuf::from("/tmp/app.tar")));
        assert_eq!(r.to_string(), "docker-archive:/tmp/app.tar");
        let r = ImageReference::parse("oci:/srv/layout:v2")
            .unwrap()
            .unwrap();
        assert_eq!(r.path(), Some(PathBuf::from("/srv/layout")));
        let r = ImageReference::parse("docker-daemon:app:1.0")
            .unwrap()
            .unwrap();
        assert_eq!((r.transport, r.path()), (Transport::DockerDaemon, None));
        assert!(ImageReference::parse("/var/lib/isolab/images/bench").is_none());
        assert!(ImageReference::parse("images:bench").is_none());
        let err = ImageReference::parse("oci-archive:").unwrap().unwrap_err();
        assert!(err.to_string().contains("oci-archive:"), "{err}");
    }

    #[test]
    fn an_image_is_imported_once_by_its_configuration_digest() {
        let archive = tempfile::NamedTempFile::new().unwrap();
        let cache = tempfile::tempdir().unwrap();
        let tools = FakeTools {
            config: CONFIG.as_bytes().to_vec(),
            calls: Mutex::new(Vec::new()),
        };
        let reference = ImageReference {
            transport: Transport::DockerArchive,
            name: archive.path().display().to_string(),
        };
        let status = Path::new("/nonexistent/status");
        let image = import_with(&reference, cache.path(), status, &tools).unwrap();
        let digest = format!("sha256:{}", crate::tree::sha256_hex(CONFIG.as_bytes()));
        let record = image.manifest.imported.clone().unwrap();
        assert_eq!(record.digest, digest);
        assert_eq!(record.manifest_digest, "sha256:abc");
        assert_eq!(record.layers, 2);
        assert_eq!(record.config.command(), ["sysbench", "cpu", "run"]);
        assert_eq!(record.config.env[1], "APP_MODE=bench");
        assert_eq!(record.config.working_dir.as_deref(), Some("/srv"));
        assert_eq!(image.kind, ImageKind::Imported);
        let entry = cache.path().join(format!("imported-{}", &digest[7..23]));
        assert_eq!(image.dir, entry.join("rootfs"));
        assert!(image.dir.join("bin/sh").is_file());
        assert_eq!(
            docker_archive_of(&image.dir),
            Some(entry.join("docker.tar"))
        );
        assert_eq!(
            record.docker_name,
            format!("isolab/imported-{}:latest", &digest[7..23])
        );
        let calls = tools.calls.lock().unwrap().clone();
        assert_eq!(calls.len(), 4, "{calls:?}");
        assert!(calls[0].starts_with("skopeo inspect --raw --config docker-archive:"));
        assert!(calls[2].starts_with("umoci raw unpack --image "));
        // Imported again: only the configuration is read.
        let again = import_with(&reference, cache.path(), status, &tools).unwrap();
        assert_eq!(again, image);
        assert_eq!(tools.calls.lock().unwrap().len(), 5);
        assert_eq!(cached_imports(cache.path()).unwrap(), vec![image]);
    }

    #[test]
    fn a_missing_archive_is_named_before_any_tool_runs() {
        let cache = tempfile::tempdir().unwrap();
        let tools = FakeTools {
            config: Vec::new(),
            calls: Mutex::new(Vec::new()),
        };
        let reference = ImageReference::parse("oci-archive:/nonexistent/app.tar")
            .unwrap()
            .unwrap();
        let err = import_with(&reference, cache.path(), Path::new("/x"), &tools).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/app.tar"), "{err}");
        assert!(tools.calls.lock().unwrap().is_empty());
    }
}
