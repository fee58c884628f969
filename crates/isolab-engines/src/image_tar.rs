//! The experiment's image as a tar for `docker import` / `podman import`: packed once
//! into a cache keyed on the image's manifest ([`cached_tar_in`]), and the repository
//! name an imported image gets (`repository`).

use std::path::{Path, PathBuf};

use crate::EngineError;

/// Where packed image tars are cached by default.
pub const DEFAULT_CACHE_DIR: &str = "/var/lib/isolab/cache";

/// The tar of `image_dir` for `docker import` / `podman import`, packed once into
/// [`DEFAULT_CACHE_DIR`], with its SHA-256 (hex). See [`cached_tar_in`].
pub fn cached_tar(
    engine: &'static str,
    image_dir: &Path,
) -> Result<(PathBuf, String), EngineError> {
    cached_tar_in(engine, Path::new(DEFAULT_CACHE_DIR), image_dir)
}

/// A cache entry: which image it was packed from and the tar's digest.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
struct CacheRecord {
    image: PathBuf,
    key: String,
    tar_sha256: String,
    tar_bytes: u64,
}

/// The tar of `image_dir`, packed with `isolab_image::pack` into `cache_dir` unless
/// a packed tar of the same image is already there, with its SHA-256 (hex).
///
/// The cache is keyed on the SHA-256 of the image's manifest (`.isolab-image.json`,
/// which every isolab build writes with its build time and the exact package
/// versions): hashing the manifest takes microseconds, whereas
/// `isolab_image::tree_digest` reads all 272 MB of the bench image (seconds, more
/// in a debug build), and packing takes about as long. A tree changed by hand
/// without a rebuild is therefore not noticed: rebuild it (or delete the cache
/// entry). A directory without a manifest is keyed on its `tree_digest`. Errors
/// name `engine`, the driver that asked.
pub fn cached_tar_in(
    engine: &'static str,
    cache_dir: &Path,
    image_dir: &Path,
) -> Result<(PathBuf, String), EngineError> {
    let io = |action: &'static str, path: &Path| EngineError::io(engine, action, path);
    let manifest = image_dir.join(isolab_image::MANIFEST_FILE);
    let key = if manifest.is_file() {
        isolab_image::sha256_file(&manifest)
    } else {
        isolab_image::tree_digest(image_dir)
    }
    .map_err(|e| pack_error(engine, image_dir, e))?;
    let short = &key[..key.len().min(16)];
    // The entries' mtime is part of the name: a tar packed with another one (the Unix
    // epoch, before) is not this format's.
    let mtime = isolab_image::TAR_MTIME;
    let tar = cache_dir.join(format!("image-{short}-t{mtime}.tar"));
    let record_file = cache_dir.join(format!("image-{short}-t{mtime}.json"));
    remove_older_formats(cache_dir);
    if let Ok(text) = std::fs::read_to_string(&record_file) {
        if let Ok(rec) = serde_json::from_str::<CacheRecord>(&text) {
            let len = std::fs::metadata(&tar).map(|m| m.len()).ok();
            if rec.key == key && len == Some(rec.tar_bytes) {
                return Ok((tar, rec.tar_sha256));
            }
        }
    }
    std::fs::create_dir_all(cache_dir).map_err(io("create the cache directory", cache_dir))?;
    let packed = isolab_image::pack(
        image_dir,
        &isolab_image::PackTarget::Tar { file: tar.clone() },
    )
    .map_err(|e| pack_error(engine, image_dir, e))?;
    let rec = CacheRecord {
        image: image_dir.to_path_buf(),
        key,
        tar_sha256: packed.sha256.clone(),
        tar_bytes: packed.bytes,
    };
    let text = serde_json::to_string_pretty(&rec).unwrap_or_default();
    std::fs::write(&record_file, text).map_err(io("write the cache record", &record_file))?;
    Ok((tar, packed.sha256))
}

/// Removes the tars (and their records) that isolab before the named format packed
/// into `cache_dir`, `image-<KEY>.tar` with every entry's mtime 0: no lookup names
/// them any more, and each is the size of an image. Best effort.
fn remove_older_formats(cache_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(cache_dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(key) = name.strip_prefix("image-").and_then(|rest| {
            rest.strip_suffix(".tar")
                .or_else(|| rest.strip_suffix(".json"))
        }) else {
            continue;
        };
        if key.len() == 16 && key.chars().all(|c| c.is_ascii_hexdigit()) {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

fn pack_error(engine: &'static str, image_dir: &Path, e: isolab_image::ImageError) -> EngineError {
    EngineError::Command {
        engine,
        command: format!("isolab image pack --to tar {}", image_dir.display()),
        status: "failed".into(),
        stderr: e.to_string(),
    }
}

/// The repository of an imported image: `isolab/<kind>` from the image's manifest.
pub(crate) fn repository(image_dir: &Path) -> String {
    let kind = isolab_image::Manifest::load(image_dir)
        .map(|m| m.kind.as_str().to_owned())
        .unwrap_or_else(|_| "image".into());
    format!("isolab/{kind}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A tiny image tree with a manifest of `kind`, as a recipe build leaves it.
    fn image(dir: &Path, kind: isolab_image::ImageKind) {
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::fs::write(dir.join("etc/hostname"), "isolab\n").unwrap();
        isolab_image::Manifest::new(kind).save(dir).unwrap();
    }

    #[test]
    fn tars_of_the_older_format_are_removed_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        let names = [
            "image-0123456789abcdef.tar",
            "image-0123456789abcdef.json",
            "image-0123456789abcdef-t315532800.tar",
            "image-0123456789abcdef-t315532800.json",
            "image-notes.json",
            "other.tar",
        ];
        for n in names {
            std::fs::write(cache.join(n), "x").unwrap();
        }
        let a = d.path().join("recipe-a");
        image(&a, isolab_image::ImageKind::Recipe);
        cached_tar_in("docker", &cache, &a).unwrap();
        for n in &names[..2] {
            assert!(!cache.join(n).exists(), "{n} left");
        }
        for n in &names[2..] {
            assert!(cache.join(n).exists(), "{n} removed");
        }
    }

    #[test]
    fn a_new_image_is_packed_again_and_an_unchanged_one_is_not() {
        let d = tempfile::tempdir().unwrap();
        let cache = d.path().join("cache");
        let (a, b) = (d.path().join("recipe-a"), d.path().join("recipe-b"));
        image(&a, isolab_image::ImageKind::Recipe);
        image(&b, isolab_image::ImageKind::Recipe);
        // Another build has another manifest (its time and package versions; here its
        // kind), so another cache entry.
        let mut m = isolab_image::Manifest::load(&b).unwrap();
        m.kind = isolab_image::ImageKind::Bench;
        m.save(&b).unwrap();

        let (tar_a, sha_a) = cached_tar_in("docker", &cache, &a).unwrap();
        let mtime = std::fs::metadata(&tar_a).unwrap().modified().unwrap();
        let (again, sha_again) = cached_tar_in("docker", &cache, &a).unwrap();
        assert_eq!((&again, &sha_again), (&tar_a, &sha_a));
        assert_eq!(
            std::fs::metadata(&again).unwrap().modified().unwrap(),
            mtime,
            "an unchanged image is not packed again"
        );
        let (tar_b, sha_b) = cached_tar_in("docker", &cache, &b).unwrap();
        assert_ne!(tar_b, tar_a);
        assert_ne!(sha_b, sha_a);
        assert_eq!(repository(&a), "isolab/recipe");
    }

    #[test]
    fn a_packed_image_s_files_have_a_time_php_s_opcache_caches() {
        let d = tempfile::tempdir().unwrap();
        let img = d.path().join("recipe-a");
        image(&img, isolab_image::ImageKind::Recipe);
        std::fs::write(img.join("index.php"), "<?php echo 1;").unwrap();
        let (tar, _) = cached_tar_in("docker", &d.path().join("cache"), &img).unwrap();
        let mut archive = tar::Archive::new(std::fs::File::open(&tar).unwrap());
        let mut seen = 0;
        for entry in archive.entries().unwrap() {
            let entry = entry.unwrap();
            // Not 0 (opcache's "no timestamp"), not before 1980 (ZIP's first time).
            assert!(entry.header().mtime().unwrap() >= 315_532_800);
            seen += 1;
        }
        assert!(seen >= 2, "{seen} entries");
    }
}
