//! Image recipes: a Debian suite and a set of packages, built once into a cache directory named
//! by the recipe's content hash and reused by every experiment that needs the same image.
//!
//! An experiment's image is the bench base ([`Recipe::bench`]) plus the packages its workloads
//! need; [`ensure`] returns `<cache_root>/recipe-<first 16 hex digits of the hash>` when it is
//! complete, and otherwise builds it with mmdebstrap into a hidden sibling staging directory,
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
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use isolab_tools::{SystemTools, ToolRunner};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::bench::{install_root, BENCH_DOCKER_PACKAGES, BENCH_PACKAGES, BENCH_SUITE};
use crate::bench::{DPKG_OPTS, MMDEBSTRAP_OPTS};
use crate::error::{ImageError, IoContext};
use crate::manifest::{Image, ImageKind, RecipeRecord};
use crate::skeleton::{remove_tree, Staging};
use crate::{apt, HostPaths};

/// Version of the recipe build procedure, part of every hash: raise it when a change to the
/// build (skeleton files, options) changes what an image of the same packages contains.
pub const RECIPE_FORMAT: u32 = 1;

/// Where recipe images are cached unless told otherwise.
pub const DEFAULT_CACHE_ROOT: &str = "/var/lib/isolab/images";

/// Prefix of a recipe image's directory name in the cache.
const DIR_PREFIX: &str = "recipe-";

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

/// The complete image of `recipe` under `cache_root`, if it has been built.
pub fn cached(recipe: &Recipe, cache_root: &Path) -> Option<Image> {
    let hash = recipe.hash();
    Image::open(&recipe.dir_in(cache_root))
        .ok()
        .filter(|img| img.manifest.recipe.as_ref().is_some_and(|r| r.hash == hash))
}

/// The image of `recipe` under `cache_root` (see the module docs), built with this host's
/// mmdebstrap from the Debian mirror in its apt sources when it is not there yet. Building
/// needs root and takes one to two minutes; a cached image returns at once.
pub fn ensure(recipe: &Recipe, cache_root: &Path) -> Result<Image, ImageError> {
    ensure_with(recipe, cache_root, &HostPaths::default(), &SystemTools)
}

/// [`ensure`] with the host's files at `host` and mmdebstrap run through `tools`.
pub fn ensure_with(
    recipe: &Recipe,
    cache_root: &Path,
    host: &HostPaths,
    tools: &dyn ToolRunner,
) -> Result<Image, ImageError> {
    if let Some(img) = cached(recipe, cache_root) {
        return Ok(img);
    }
    let mirrors = apt::mirror_lines(&host.apt_dir, recipe.suite())?;
    std::fs::create_dir_all(cache_root).ctx("create directory", cache_root)?;
    let name = recipe.dir_name();
    let _lock = Lock::exclusive(&cache_root.join(format!(".{name}.lock")))?;
    // Another builder may have finished while this one waited.
    if let Some(img) = cached(recipe, cache_root) {
        return Ok(img);
    }
    remove_stale_staging(cache_root, &name)?;
    // A directory under the recipe's name without its manifest is not an image: replace it.
    let staging = Staging::new(&recipe.dir_in(cache_root), true)?;
    let packages: Vec<String> = recipe.packages().iter().cloned().collect();
    let mut manifest = install_root(
        ImageKind::Recipe,
        recipe.suite(),
        staging.path(),
        &mirrors,
        &packages,
        host,
        tools,
    )?;
    manifest.recipe = Some(RecipeRecord {
        hash: recipe.hash(),
        recipe: recipe.clone(),
    });
    manifest.save(staging.path())?;
    let dir = staging.commit()?;
    Ok(Image {
        dir,
        kind: ImageKind::Recipe,
        manifest,
    })
}

/// The complete recipe images under `cache_root`, sorted by directory name (none when it does
/// not exist).
pub fn cached_recipes(cache_root: &Path) -> Result<Vec<Image>, ImageError> {
    let entries = match std::fs::read_dir(cache_root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ImageError::io("list directory", cache_root, e)),
    };
    let mut out = Vec::new();
    for e in entries {
        let e = e.ctx("list directory", cache_root)?;
        let name = e.file_name().to_string_lossy().into_owned();
        if !name.starts_with(DIR_PREFIX) {
            continue;
        }
        if let Ok(img) = Image::open(&e.path()) {
            if img.manifest.recipe.is_some() {
                out.push(img);
            }
        }
    }
    out.sort_by(|a, b| a.dir.cmp(&b.dir));
    Ok(out)
}

/// Remove staging directories of `name` left by a builder that crashed (the caller holds the
/// recipe's lock, so no live builder owns one).
fn remove_stale_staging(cache_root: &Path, name: &str) -> Result<(), ImageError> {
    let prefix = format!(".{name}.isolab-build-");
    for e in std::fs::read_dir(cache_root).ctx("list directory", cache_root)? {
        let e = e.ctx("list directory", cache_root)?;
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            remove_tree(&e.path())?;
        }
    }
    Ok(())
}

/// An exclusive `flock` on a file, released when dropped (or when the process dies).
pub(crate) struct Lock {
    _file: std::fs::File,
}

impl Lock {
    /// Wait for the exclusive lock on `path` (created when missing).
    pub(crate) fn exclusive(path: &Path) -> Result<Lock, ImageError> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(path)
            .ctx("open lock file", path)?;
        loop {
            // SAFETY: the descriptor belongs to `file`, which outlives the call.
            let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
            if r == 0 {
                return Ok(Lock { _file: file });
            }
            let err = std::io::Error::last_os_error();
            if err.kind() != std::io::ErrorKind::Interrupted {
                return Err(ImageError::io("lock", path, err));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::tests::{fake_host, FakeMmdebstrap};
    use isolab_tools::{ToolCommand, ToolError, ToolOutput};
    use std::cell::RefCell;

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

    #[test]
    fn ensure_builds_once_then_returns_the_cache() {
        let d = tempfile::tempdir().unwrap();
        let host = fake_host(d.path());
        let cache = d.path().join("images");
        let runner = FakeMmdebstrap(RefCell::new(Vec::new()));
        let recipe = Recipe::bench().with(["jq"]).unwrap();
        assert!(cached(&recipe, &cache).is_none());
        let img = ensure_with(&recipe, &cache, &host, &runner).unwrap();
        assert_eq!(img.dir, cache.join(recipe.dir_name()));
        assert_eq!(img.kind, ImageKind::Recipe);
        let line = runner.0.borrow()[0].display();
        assert!(
            line.contains(" --include=fio,iperf3,jq,stress-ng,sysbench "),
            "{line}"
        );
        let again = ensure_with(&recipe, &cache, &host, &runner).unwrap();
        assert_eq!(runner.0.borrow().len(), 1, "the second call builds nothing");
        assert_eq!(again.manifest, img.manifest);
        let rec = again.manifest.recipe.unwrap();
        assert_eq!(rec.hash, recipe.hash());
        assert_eq!(rec.recipe, recipe);
        let listed = cached_recipes(&cache).unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].dir, img.dir);
        let names: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names.len(), 2, "the image and its lock file: {names:?}");
    }

    /// Plays mmdebstrap failing as apt does on an unknown package, after writing into the
    /// target (as the real one does).
    struct FailingMmdebstrap;
    impl ToolRunner for FailingMmdebstrap {
        fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
            let target = PathBuf::from(&cmd.args[cmd.args.len() - 4]);
            std::fs::create_dir_all(target.join("var/lib/dpkg")).unwrap();
            Err(ToolError::Failed {
                command: cmd.display(),
                status: "exit status: 25".into(),
                stderr: include_str!("testdata/mmdebstrap-unknown-package.txt").into(),
            })
        }
    }

    #[test]
    fn a_failed_build_names_the_package_and_leaves_no_directory() {
        let d = tempfile::tempdir().unwrap();
        let host = fake_host(d.path());
        let cache = d.path().join("images");
        let recipe = Recipe::bench().with(["isolab-bogus-pkg"]).unwrap();
        // A crashed builder's staging directory is cleaned up by the next build.
        std::fs::create_dir_all(cache.join(format!(".{}.isolab-build-1", recipe.dir_name())))
            .unwrap();
        let err = ensure_with(&recipe, &cache, &host, &FailingMmdebstrap).unwrap_err();
        assert!(
            matches!(&err, ImageError::UnknownPackages { packages, .. } if packages == &["isolab-bogus-pkg"]),
            "{err}"
        );
        let dirs: Vec<String> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert!(dirs.is_empty(), "{dirs:?}");
        assert!(cached_recipes(&cache).unwrap().is_empty());
    }

    #[test]
    fn concurrent_builders_build_once() {
        let d = tempfile::tempdir().unwrap();
        let host = fake_host(d.path());
        let cache = d.path().join("images");
        let recipe = Recipe::bench();
        let built = std::sync::atomic::AtomicUsize::new(0);
        struct Counting<'a>(&'a std::sync::atomic::AtomicUsize);
        impl ToolRunner for Counting<'_> {
            fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
                self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(100));
                FakeMmdebstrap(RefCell::new(Vec::new())).run(cmd)
            }
        }
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..3)
                .map(|_| s.spawn(|| ensure_with(&recipe, &cache, &host, &Counting(&built))))
                .collect();
            for h in handles {
                h.join().unwrap().unwrap();
            }
        });
        assert_eq!(built.load(std::sync::atomic::Ordering::SeqCst), 1);
    }
}
