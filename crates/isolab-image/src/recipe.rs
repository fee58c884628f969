//! Image recipes: a Debian suite and a set of packages, built once into a cache directory named
//! by the recipe's content hash and reused by every experiment that needs the same image.
//!
//! An experiment's image is the bench base ([`Recipe::bench`]) plus the packages its workloads
//! need; [`ensure`](crate::ensure) (in `cache.rs`) returns `<cache_root>/recipe-<first 16 hex
//! digits of the hash>` when it is complete, and otherwise builds it with mmdebstrap into a hidden sibling staging directory,
//! renamed into place only once the tree and its manifest are complete. A crash leaves at worst
//! a hidden staging directory (removed by the next build of the same recipe), never a half
//! image under the final name; concurrent builders of one recipe take turns on a lock file
//! (`.recipe-<hash>.lock`, kept in the cache: removing a lock file others may hold is racy), so
//! the second finds the first one's image and returns it.
//!
//! **What the hash covers.** [`Recipe::canonical_text`]: a format version
//! ([`RECIPE_FORMAT`], raised whenever the build procedure changes what lands in the tree), the
//! suite, mmdebstrap's and dpkg's options, and the sorted package names. The mirror is *not*
//! part of it: every Debian mirror serves the same signed archive, so the same recipe from
//! another mirror gives the same packages; the mirror lines and the exact version of every
//! installed package are recorded in the manifest instead, where a lagging mirror (or a newer
//! point release since the build) shows up. To rebuild a cached image against a newer archive,
//! delete its directory.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::error::ImageError;

/// The Debian suite of the bench image.
pub const BENCH_SUITE: &str = "bookworm";

/// Packages installed on top of mmdebstrap's `apt` variant (essential packages plus apt): exactly
/// what the built-in workloads run.
pub const BENCH_PACKAGES: &[&str] = &["sysbench", "fio", "stress-ng", "iperf3"];

/// Packages a `bench-docker` image has beyond [`BENCH_PACKAGES`]: Docker's engine from Debian
/// (`dockerd`, `docker`, with containerd and runc as dependencies).
pub const BENCH_DOCKER_PACKAGES: &[&str] = &["docker.io"];

/// Documentation and translations are not installed (copyright files are kept).
pub(crate) const DPKG_OPTS: &[&str] = &[
    "path-exclude=/usr/share/man/*",
    "path-exclude=/usr/share/info/*",
    "path-exclude=/usr/share/locale/*",
    "path-exclude=/usr/share/doc/*",
    "path-include=/usr/share/doc/*/copyright",
];

/// mmdebstrap's options that shape the root (with [`DPKG_OPTS`]): part of a recipe's hash.
pub(crate) const MMDEBSTRAP_OPTS: &[&str] = &[
    "--variant=apt",
    "--format=directory",
    "--components=main",
    "--aptopt=Acquire::Languages \"none\"",
];

/// Version of the recipe build procedure, part of every hash: raise it when a change to the
/// build (skeleton files, options) changes what an image of the same packages contains.
pub const RECIPE_FORMAT: u32 = 1;

/// Where recipe images are cached unless told otherwise.
pub const DEFAULT_CACHE_ROOT: &str = "/var/lib/isolab/images";

/// Prefix of a recipe image's directory name in the cache.
pub(crate) const DIR_PREFIX: &str = "recipe-";

/// What an image contains: a Debian suite and a set of packages (installed on top of
/// mmdebstrap's `apt` variant, with their dependencies).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recipe {
    suite: String,
    packages: BTreeSet<String>,
}

impl Recipe {
    /// A recipe of `packages` from Debian `suite`; every name must be a Debian package name
    /// ([`check_package_name`]).
    pub fn new<I, S>(suite: &str, packages: I) -> Result<Recipe, ImageError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Recipe {
            suite: suite.to_owned(),
            packages: BTreeSet::new(),
        }
        .with(packages)
    }

    /// The bench image: bookworm with [`BENCH_PACKAGES`] (sysbench, fio, stress-ng, iperf3).
    pub fn bench() -> Recipe {
        Recipe {
            suite: BENCH_SUITE.to_owned(),
            packages: BENCH_PACKAGES.iter().map(|p| p.to_string()).collect(),
        }
    }

    /// The bench image plus Docker ([`BENCH_DOCKER_PACKAGES`]), the guest of `vm+docker`.
    pub fn bench_docker() -> Recipe {
        let mut r = Recipe::bench();
        r.packages
            .extend(BENCH_DOCKER_PACKAGES.iter().map(|p| p.to_string()));
        r
    }

    /// This recipe plus `packages` (checked as in [`Recipe::new`]).
    pub fn with<I, S>(mut self, packages: I) -> Result<Recipe, ImageError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for p in packages {
            let p = p.into();
            check_package_name(&p)?;
            self.packages.insert(p);
        }
        Ok(self)
    }

    /// The Debian suite ("bookworm").
    pub fn suite(&self) -> &str {
        &self.suite
    }

    /// The packages, sorted.
    pub fn packages(&self) -> &BTreeSet<String> {
        &self.packages
    }

    /// Everything that determines the image, one item a line, in a fixed order: the input of
    /// [`Recipe::hash`].
    pub fn canonical_text(&self) -> String {
        let mut t = format!(
            "isolab image recipe\nformat {RECIPE_FORMAT}\nsuite {}\n",
            self.suite
        );
        for o in MMDEBSTRAP_OPTS {
            t.push_str(&format!("mmdebstrap {o}\n"));
        }
        for o in DPKG_OPTS {
            t.push_str(&format!("dpkgopt {o}\n"));
        }
        for p in &self.packages {
            t.push_str(&format!("package {p}\n"));
        }
        t
    }

    /// SHA-256 (hex) of [`Recipe::canonical_text`]: equal recipes, and only they, share it
    /// (the mirror is not part of it; see the module docs).
    pub fn hash(&self) -> String {
        let digest = Sha256::digest(self.canonical_text().as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The image's directory name in the cache: `recipe-` and the first 16 hex digits of the hash.
    pub fn dir_name(&self) -> String {
        format!("{DIR_PREFIX}{}", &self.hash()[..16])
    }

    /// Where the image of this recipe lives under `cache_root`.
    pub fn dir_in(&self, cache_root: &Path) -> PathBuf {
        cache_root.join(self.dir_name())
    }
}

/// Check that `name` is a Debian package name (Debian policy §5.6.1: lowercase letters, digits,
/// `+`, `-` and `.`, at least two characters, starting with a letter or digit). This also keeps
/// names from smuggling options or lists into mmdebstrap's `--include=`.
pub fn check_package_name(name: &str) -> Result<(), ImageError> {
    let ok = name.len() >= 2
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "+-.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(ImageError::InvalidPackageName {
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_ignores_order_and_changes_with_packages() {
        let a = Recipe::new("bookworm", ["sysbench", "fio", "jq"]).unwrap();
        let b = Recipe::new("bookworm", ["jq", "fio", "sysbench", "fio"]).unwrap();
        assert_eq!(a.hash(), b.hash());
        assert_eq!(a.hash().len(), 64);
        let c = a.clone().with(["nginx"]).unwrap();
        assert_ne!(a.hash(), c.hash());
        let d = Recipe::new("trixie", ["sysbench", "fio", "jq"]).unwrap();
        assert_ne!(a.hash(), d.hash());
        assert_eq!(a.dir_name(), format!("recipe-{}", &a.hash()[..16]));
        assert_eq!(
            Recipe::bench_docker().packages().len(),
            Recipe::bench().packages().len() + 1
        );
    }

    #[test]
    fn hash_is_stable_across_releases() {
        // Changing this value means every cached image is rebuilt: do it on purpose only
        // (raise RECIPE_FORMAT when the build changes).
        assert_eq!(
            Recipe::bench().canonical_text(),
            "isolab image recipe\nformat 1\nsuite bookworm\nmmdebstrap --variant=apt\nmmdebstrap --format=directory\nmmdebstrap --components=main\nmmdebstrap --aptopt=Acquire::Languages \"none\"\ndpkgopt path-exclude=/usr/share/man/*\ndpkgopt path-exclude=/usr/share/info/*\ndpkgopt path-exclude=/usr/share/locale/*\ndpkgopt path-exclude=/usr/share/doc/*\ndpkgopt path-include=/usr/share/doc/*/copyright\npackage fio\npackage iperf3\npackage stress-ng\npackage sysbench\n"
        );
        assert_eq!(
            Recipe::bench().hash(),
            "abc91e78c8e76fa69e2ef907c95bfb8a61f94092dea063ceddc5a78669c1692e"
        );
    }

    #[test]
    fn package_names_are_checked() {
        for ok in ["jq", "php8.2-fpm", "libstdc++6", "0ad"] {
            check_package_name(ok).unwrap();
        }
        for bad in [
            "",
            "a",
            "Nginx",
            "-x",
            "a,b",
            "jq --yes",
            "pkg:amd64",
            "pkg=1.0",
        ] {
            let e = check_package_name(bad).unwrap_err();
            assert!(matches!(e, ImageError::InvalidPackageName { .. }), "{bad}");
        }
        let e = Recipe::new("bookworm", ["ok", "a,b"]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("`a,b` is not a Debian package name"),
            "{e}"
        );
    }
}
