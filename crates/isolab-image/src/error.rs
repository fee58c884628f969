//! The one error type of the crate: every variant names the path or tool involved and what to do.

use std::path::PathBuf;

/// Everything that can go wrong while building or packing an image.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A file-system operation failed on a path.
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// What was being done ("create directory", "read", …).
        op: &'static str,
        /// The path it was done on.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// An external tool is not installed, could not be started or failed.
    #[error(transparent)]
    Tool(#[from] isolab_tools::ToolError),
    /// A host file the build reads from does not exist.
    #[error("{path} not found: apt-get install {package}")]
    SourceMissing {
        /// The missing file.
        path: PathBuf,
        /// The Debian package that provides it.
        package: String,
    },
    /// The build target exists and replacing it was not asked for.
    #[error("{path} already exists and is not empty: remove it or build with force (--force) to replace it")]
    TargetExists {
        /// The existing directory.
        path: PathBuf,
    },
    /// A pack target (OCI bundle) exists and is not empty.
    #[error(
        "{path} already exists and is not empty: remove it or choose another bundle directory"
    )]
    BundleExists {
        /// The existing bundle directory.
        path: PathBuf,
    },
    /// The directory has no readable image manifest.
    #[error("{path} is not an isolab image (no {file}): build it with `isolab image build busybox|bench DIR`")]
    NotAnImage {
        /// The directory that was expected to hold an image.
        path: PathBuf,
        /// The manifest file name that is missing.
        file: &'static str,
    },
    /// The image manifest could not be parsed or written.
    #[error("invalid image manifest {path}: {source}; rebuild the image")]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// An image reference names a transport but nothing after it.
    #[error("image reference `{reference}`: {reason} (expected e.g. `docker-archive:/path/app.tar`, `oci:/path/layout:tag` or `docker-daemon:app:1.0`)")]
    BadReference {
        /// The reference as written.
        reference: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An image file or layout named by a reference does not exist.
    #[error("image reference `{reference}`: {path} does not exist")]
    ImageMissing {
        /// The reference as written.
        reference: String,
        /// The missing file or directory.
        path: PathBuf,
    },
    /// An image's configuration (as `skopeo inspect --config` printed it) is not JSON of
    /// the OCI image configuration's form.
    #[error("image `{reference}`: its configuration is not an OCI image configuration: {source}")]
    BadConfig {
        /// The reference of the image.
        reference: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// The host's apt sources name no Debian mirror usable for the bench image.
    #[error("no Debian {suite} mirror with component main in {path}: add one (e.g. `deb http://deb.debian.org/debian {suite} main`) to the apt sources")]
    NoMirror {
        /// The apt configuration directory that was searched.
        path: PathBuf,
        /// The suite that was looked for.
        suite: String,
    },
    /// The OCI runtime configuration could not be built or written.
    #[error("cannot write OCI runtime config {path}: {source}")]
    OciSpec {
        /// The config.json path.
        path: PathBuf,
        /// The oci-spec error.
        #[source]
        source: oci_spec::OciSpecError,
    },
    /// The requested ext4 size cannot hold the tree.
    #[error("ext4 size {size} bytes for {path} is smaller than the {needed} bytes the tree needs: pass a larger size or none for the default")]
    Ext4TooSmall {
        /// The image file.
        path: PathBuf,
        /// The requested size in bytes.
        size: u64,
        /// The minimum size in bytes.
        needed: u64,
    },
    /// A recipe names a package that is not a valid Debian package name.
    #[error("`{name}` is not a Debian package name: names are lowercase letters, digits, `+`, `-` and `.`, at least two characters, starting with a letter or digit (e.g. `jq`, `php8.2-fpm`)")]
    InvalidPackageName {
        /// The name as given.
        name: String,
    },
    /// The Debian archive has no package of that name (apt: `Unable to locate package`).
    #[error("Debian {suite} has no package {}: check the spelling (`apt-cache policy NAME` on a {suite} host, or packages.debian.org) and fix the recipe's packages (`packages = [...]` of the spec or `--packages`)", quoted(packages))]
    UnknownPackages {
        /// The packages apt could not find, sorted.
        packages: Vec<String>,
        /// The suite searched ("bookworm").
        suite: String,
    },
    /// apt found the packages but cannot install them together (unmet dependencies).
    #[error("cannot install {} in a Debian {suite} image: unmet dependencies:\n{}\nremove the package(s) from the recipe or add what they depend on", quoted(packages), details.join("\n"))]
    UnmetDependencies {
        /// The packages whose dependencies cannot be met, sorted.
        packages: Vec<String>,
        /// The suite ("bookworm").
        suite: String,
        /// apt's lines describing each unmet dependency.
        details: Vec<String>,
    },
    /// A path inside the tree cannot be stored in the target format.
    #[error("cannot store {path} in {format}: {reason}")]
    Unstorable {
        /// The offending path.
        path: PathBuf,
        /// "tar", "ext4", …
        format: &'static str,
        /// Why.
        reason: String,
    },
}

/// `a`, `b` and `c`, each in backquotes.
fn quoted(names: &[String]) -> String {
    let q: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    match q.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl ImageError {
    /// Shorthand for [`ImageError::Io`].
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            op,
            path: path.into(),
            source,
        }
    }
}

/// Attach an operation and a path to `std::io::Result`s.
pub(crate) trait IoContext<T> {
    /// Map the error to [`ImageError::Io`].
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T, ImageError>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: impl Into<PathBuf>) -> Result<T, ImageError> {
        self.map_err(|e| ImageError::io(op, path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_path_and_remedy() {
        let e = ImageError::from(isolab_tools::ToolError::from(isolab_tools::NotInstalled {
            program: "mkfs.ext4".into(),
            package: "e2fsprogs".into(),
        }));
        assert_eq!(
            e.to_string(),
            "`mkfs.ext4` is not installed: install the Debian package `e2fsprogs` \
             (`apt-get install e2fsprogs`) or run `scripts/setup.sh engines`"
        );
        let e = ImageError::io(
            "read",
            "/x/y",
            std::io::Error::from_raw_os_error(libc::ENOENT),
        );
        assert!(e.to_string().starts_with("cannot read /x/y: "));
    }
}
