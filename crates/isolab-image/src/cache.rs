//! The cache of recipe images: [`ensure`] builds a [`Recipe`]'s image once into
//! `<cache_root>/recipe-<first 16 hex digits of its hash>` (staged, then renamed into place;
//! concurrent builders take turns on a lock file) and returns it from then on. What a recipe
//! is, and what its hash covers, is in `recipe.rs`.

use std::os::fd::AsRawFd;
use std::path::Path;

use isolab_tools::{SystemTools, ToolRunner};

use crate::error::{ImageError, IoContext};
use crate::manifest::{Image, ImageKind, RecipeRecord};
use crate::skeleton::{remove_tree, Staging};
use crate::{apt, HostPaths};

use crate::bench::install_root;
use crate::recipe::{Recipe, DIR_PREFIX};

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
    use std::path::PathBuf;

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
