//! `isolab image build|ensure|import|list|pack`: root filesystems for containers, recipe
//! images cached by hash, images of one's own imported by digest, and packs for engines.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};
use isolab_image::{BuildOptions, Image, PackTarget, Recipe, DEFAULT_CACHE_ROOT};

use super::Exit;
use crate::cli::{ImageCommand, ImageKind, PackFormat};

pub fn image(command: ImageCommand) -> Result<Exit> {
    match command {
        ImageCommand::Build { kind, dir, force } => {
            let opts = BuildOptions { dir, force };
            let image = match kind {
                ImageKind::Busybox => isolab_image::build_busybox(&opts)?,
                ImageKind::Bench => isolab_image::build_bench(&opts)?,
                ImageKind::BenchDocker => isolab_image::build_bench_docker(&opts)?,
            };
            println!("built {:?} image in {}", image.kind, image.dir.display());
            for s in &image.manifest.sources {
                println!("  {} {}", s.name, s.version);
            }
        }
        ImageCommand::Ensure {
            spec,
            packages,
            link,
        } => {
            let recipe = match spec {
                Some(path) => {
                    let spec = super::load_spec(&path, &crate::host::facts()?)?;
                    let Some(recipe) = spec.recipe else {
                        println!(
                            "{} names its image directory ({}): it is used as it is, nothing to build",
                            path.display(),
                            spec.image.display()
                        );
                        return Ok(Exit::Success);
                    };
                    recipe
                }
                None => Recipe::bench().with(packages)?,
            };
            let image = ensure_recipe(&recipe, false)?;
            if let Some(link) = link {
                link_image(&link, &image.dir)?;
            }
            println!("{}", image.dir.display());
        }
        ImageCommand::Import { reference } => {
            let Some(parsed) = isolab_image::ImageReference::parse(&reference) else {
                anyhow::bail!(
                    "`{reference}` names no transport: an image of one's own is one of {}, followed by `:` and what it names (e.g. docker-archive:/tmp/app.tar)",
                    transports()
                );
            };
            let image = import_own(&parsed?, false)?;
            println!("{}", image.dir.display());
        }
        ImageCommand::List { json } => {
            let cache = Path::new(DEFAULT_CACHE_ROOT);
            let images = isolab_image::cached_recipes(cache)?;
            let imported = isolab_image::cached_imports(cache)?;
            if json.json {
                let rows: Vec<serde_json::Value> = images
                    .iter()
                    .chain(&imported)
                    .map(|i| {
                        serde_json::json!({
                            "dir": i.dir,
                            "kind": i.kind.as_str(),
                            "created": i.manifest.created,
                            "recipe": i.manifest.recipe,
                            "imported": i.manifest.imported,
                        })
                    })
                    .collect();
                println!("{}", super::json::document("images", &rows)?);
            } else if images.is_empty() && imported.is_empty() {
                println!("no recipe or imported images in {DEFAULT_CACHE_ROOT}");
            } else {
                for i in &imported {
                    let Some(r) = &i.manifest.imported else {
                        continue;
                    };
                    println!(
                        "{}  {}  {}  imported from {}",
                        i.dir.display(),
                        r.digest,
                        i.manifest.created,
                        r.reference
                    );
                }
                for i in &images {
                    let Some(r) = &i.manifest.recipe else {
                        continue;
                    };
                    let packages: Vec<&str> =
                        r.recipe.packages().iter().map(String::as_str).collect();
                    println!(
                        "{}  {}  {}  {}",
                        i.dir.display(),
                        short_hash(&i.dir, &r.hash)?,
                        i.manifest.created,
                        packages.join(",")
                    );
                }
            }
        }
        ImageCommand::Pack {
            dir,
            to,
            output,
            size,
        } => {
            let target = match to {
                PackFormat::Ext4 => PackTarget::Ext4 { file: output, size },
                PackFormat::Tar => PackTarget::Tar { file: output },
                PackFormat::Oci => PackTarget::Oci { bundle: output },
            };
            let packed = isolab_image::pack(&dir, &target)?;
            println!(
                "{} ({} bytes, sha256 {})",
                packed.path.display(),
                packed.bytes,
                packed.sha256
            );
        }
    }
    Ok(Exit::Success)
}

/// The transports an image of one's own may be named by, for messages.
fn transports() -> String {
    isolab_image::Transport::ALL
        .iter()
        .map(|t| format!("`{}:`", t.as_str()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The image of one's own `reference` in the cache, imported first when missing (skopeo
/// and umoci, once per configuration digest), with a line on standard error unless `quiet`.
pub fn import_own(reference: &isolab_image::ImageReference, quiet: bool) -> Result<Image> {
    let t = Instant::now();
    let image = isolab_image::import(reference, Path::new(DEFAULT_CACHE_ROOT))
        .with_context(|| format!("importing the image {reference}"))?;
    if !quiet {
        if let Some(r) = &image.manifest.imported {
            eprintln!(
                "image {reference}: {} ({} layers) in {} ({:.1?})",
                r.digest,
                r.layers,
                image.dir.display(),
                t.elapsed()
            );
        }
    }
    Ok(image)
}

/// The image of `recipe` in the cache, built first when missing, with a progress line on
/// standard error unless `quiet`; versions of the recipe's packages that differ from the host's
/// are warnings.
pub fn ensure_recipe(recipe: &Recipe, quiet: bool) -> Result<Image> {
    let cache = Path::new(DEFAULT_CACHE_ROOT);
    let packages: Vec<&str> = recipe.packages().iter().map(String::as_str).collect();
    let image = match isolab_image::cached(recipe, cache) {
        Some(image) => image,
        None => {
            if !quiet {
                eprintln!(
                    "building image {} (Debian {}: {}) with mmdebstrap, once: about 2 minutes",
                    recipe.dir_in(cache).display(),
                    recipe.suite(),
                    packages.join(", ")
                );
            }
            let t = Instant::now();
            let image = isolab_image::ensure(recipe, cache)
                .with_context(|| format!("building the image {}", recipe.dir_name()))?;
            if !quiet {
                eprintln!("built {} in {:.0?}", image.dir.display(), t.elapsed());
            }
            image
        }
    };
    if !quiet {
        for d in image
            .manifest
            .host_differences
            .iter()
            .filter(|d| recipe.packages().contains(&d.package))
        {
            eprintln!(
                "warning: the image's {d}: results inside and outside it run different builds"
            );
        }
    }
    Ok(image)
}

/// Make `link` a symlink to `target` (replacing a symlink that is there; a real directory or
/// file is left alone, with a note).
fn link_image(link: &Path, target: &Path) -> Result<()> {
    match std::fs::symlink_metadata(link) {
        Ok(m) if !m.file_type().is_symlink() => {
            eprintln!(
                "note: {} exists and is not a symlink: left as it is (remove it to link it to {})",
                link.display(),
                target.display()
            );
            return Ok(());
        }
        _ => {}
    }
    let mut tmp = link.as_os_str().to_owned();
    tmp.push(".isolab-link");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(target, &tmp)
        .with_context(|| format!("cannot create the symlink {}", tmp.display()))?;
    std::fs::rename(&tmp, link)
        .with_context(|| format!("cannot replace {} with a symlink", link.display()))?;
    Ok(())
}

/// The first 16 digits of a recipe image's hash, or an error naming its manifest when
/// the hash recorded there is not 64 hexadecimal digits (an edited or damaged manifest).
fn short_hash<'a>(dir: &Path, hash: &'a str) -> Result<&'a str> {
    if hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(&hash[..16]);
    }
    anyhow::bail!(
        "{}: the recipe hash {hash:?} is not 64 hexadecimal digits; the manifest was edited or damaged: remove the directory {} and run `isolab image ensure` (or the experiment) again to rebuild it",
        dir.join(isolab_image::MANIFEST_FILE).display(),
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_or_odd_recipe_hash_is_an_error_naming_the_manifest() {
        let dir = Path::new("/var/lib/isolab/images/recipe-x");
        let good = "0123456789abcdef".repeat(4);
        assert_eq!(short_hash(dir, &good).unwrap(), "0123456789abcdef");
        for bad in ["abc", "", "é".repeat(40).as_str(), &"g".repeat(64)] {
            let e = short_hash(dir, bad).unwrap_err().to_string();
            assert!(
                e.contains("/var/lib/isolab/images/recipe-x/.isolab-image.json")
                    && e.contains("isolab image ensure"),
                "{e}"
            );
        }
    }
}
