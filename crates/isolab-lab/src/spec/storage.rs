//! `[storage]` and the `storage` factor: where a run's working directory lives (a
//! bind-mounted host directory, a container's writable layer, an ext4 image on a loop
//! device, a tmpfs, a device per instance, or one striped device for all instances),
//! where the lab puts the backing files of its loop devices, and how large they are.
//! A level the cell's platform cannot apply makes the cell impossible
//! ([`unsupported`]).

use std::path::PathBuf;

use isolab_cgroups::Bytes;
use isolab_engines::StorageLevel;
use toml::Spanned;

use super::matrix::{Level, Levels};
use super::raw::RawStorage;
use super::validator::Validator;
use super::StorageSupport;
use crate::platform::PlatformDef;
pub use crate::storage::{StorageSpec, Striping, DEFAULT_SIZE, DEFAULT_STRIPES};

impl Validator<'_> {
    /// `[storage]`: every backing directory absolute, existing and a directory (not a
    /// device: the lab makes loop devices over files in it); the size and stripes.
    pub(super) fn storage(&mut self, raw: Option<Spanned<RawStorage>>) -> StorageSpec {
        let Some(raw) = raw else {
            return StorageSpec::default();
        };
        let raw = raw.into_inner();
        let mut spec = StorageSpec::default();
        for dir in raw.backing.unwrap_or_default() {
            let path = PathBuf::from(dir.get_ref());
            // A stored spec read on another machine names that machine's directories.
            let checked = self.host.storage.is_some();
            match backing_problem(&path).filter(|_| checked) {
                Some(problem) => self.err(dir.span(), format!("storage.backing: {problem}")),
                None => spec.backing.push(path),
            }
        }
        if let Some(size) = raw.size {
            match size.get_ref().parse::<Bytes>() {
                Ok(b) if b.0 >= 16 << 20 => spec.size = b,
                Ok(_) => self.err(
                    size.span(),
                    "storage.size must be at least 16MiB (an ext4 file system and a workload's files); expected e.g. \"1GiB\"",
                ),
                Err(e) => self.err(
                    size.span(),
                    format!("storage.size: {e}; expected e.g. \"1GiB\""),
                ),
            }
        }
        spec.stripes = match raw.stripes {
            Some(s) => match u32::try_from(*s.get_ref()) {
                Ok(n) if (2..=16).contains(&n) => n,
                _ => {
                    self.err(
                        s.span(),
                        "storage.stripes must be a whole number from 2 to 16 (the loop devices a `shared` device stripes over)",
                    );
                    DEFAULT_STRIPES
                }
            },
            None => (spec.backing.len() as u32).max(DEFAULT_STRIPES),
        };
        if let Some(w) = raw.striping {
            match w.get_ref().as_str() {
                "device-mapper" => spec.striping = Striping::DeviceMapper,
                "btrfs" => spec.striping = Striping::Btrfs,
                other => self.err(
                    w.span(),
                    format!("storage.striping `{other}`: expected \"device-mapper\" (a dm `striped` target with ext4) or \"btrfs\" (a btrfs raid0 over the loop devices)"),
                ),
            }
        }
        spec
    }

    /// The levels of the `storage` factor (default `bind`).
    pub(super) fn storage_levels(&mut self, raw: Levels) -> Vec<Level> {
        self.levels("storage", raw, &["bind"], |l| {
            StorageLevel::parse(l).map(|_| ()).ok_or_else(|| {
                format!(
                    "unknown storage `{l}`: expected one of {}",
                    super::validator::list(
                        &StorageLevel::ALL
                            .iter()
                            .map(|s| s.as_str().to_owned())
                            .collect::<Vec<_>>()
                    )
                )
            })
        })
    }
}

/// What is wrong with backing directory `path`, if anything.
fn backing_problem(path: &std::path::Path) -> Option<String> {
    use std::os::unix::fs::FileTypeExt;
    if !path.is_absolute() {
        return Some(format!(
            "`{}` is not an absolute path: name a directory on the disk to measure, e.g. \"/mnt/disk1/isolab\"",
            path.display()
        ));
    }
    match std::fs::metadata(path) {
        Err(e) => Some(format!(
            "`{}` cannot be used ({e}): create the directory, on the disk to measure, or name one that exists",
            path.display()
        )),
        Ok(m) if m.file_type().is_block_device() => Some(format!(
            "`{}` is a block device: isolab keeps its backing files in a directory and never formats a device of yours; mount a file system of that device and name a directory on it",
            path.display()
        )),
        Ok(m) if !m.is_dir() => Some(format!(
            "`{}` is not a directory: name a directory on the disk to measure",
            path.display()
        )),
        Ok(_) => None,
    }
}

/// Why `platform` cannot put a run's working directory on `level` on a host that
/// offers `support`, if it cannot.
pub(super) fn unsupported(
    platform: &PlatformDef,
    level: StorageLevel,
    striping: Striping,
    support: Option<StorageSupport>,
) -> Option<String> {
    let caps = platform.kind.capabilities();
    if caps.has_storage(level) {
        let support = support.filter(|_| level == StorageLevel::Shared)?;
        return match striping {
            Striping::DeviceMapper if !support.device_mapper => Some(
                "storage `shared` stripes with a device-mapper `striped` target, and this kernel has no device-mapper (no `device-mapper` in /proc/misc: CONFIG_BLK_DEV_DM); use a kernel with it (or `modprobe dm_mod`), or set `striping = \"btrfs\"` in [storage] to stripe with a btrfs raid0".to_owned(),
            ),
            Striping::Btrfs if !support.btrfs => Some(
                "storage `shared` with `striping = \"btrfs\"` needs btrfs, and this kernel has none (no `btrfs` in /proc/filesystems); use a kernel with it, or `striping = \"device-mapper\"`".to_owned(),
            ),
            _ => None,
        };
    }
    let why = match level {
        StorageLevel::Layer | StorageLevel::Volume if !caps.needs_image => {
            " (a container's writable layer and an engine's volumes have no meaning there)"
        }
        _ if caps.vm => " (the working directory reaches the guest as a directory of the host)",
        _ => "",
    };
    Some(format!(
        "platform `{}` cannot put the working directory on storage `{level}`{why}; it offers {}",
        platform.name,
        super::validator::list(
            &caps
                .storage
                .iter()
                .map(|s| s.as_str().to_owned())
                .collect::<Vec<_>>()
        )
    ))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, parse};
    use isolab_engines::StorageLevel;

    #[test]
    fn the_storage_factor_defaults_to_bind_and_reads_its_section() {
        let spec =
            parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(spec.cells[0].storage, StorageLevel::Bind);
        assert_eq!(spec.storage, super::StorageSpec::default());

        let dir = tempfile::tempdir().unwrap();
        let text = format!(
            "[experiment]\nname = \"x\"\n[storage]\nbacking = [\"{0}\", \"{0}\", \"{0}\"]\nsize = \"64MiB\"\n[matrix]\nplatform = [\"host\", \"isolab\"]\nstorage = [\"tmpfs\", \"shared\"]\nworkload = [\"sysbench-cpu\"]\n",
            dir.path().display()
        );
        let spec = parse(&text).unwrap();
        assert_eq!(spec.cells.len(), 4);
        assert_eq!(spec.cells[3].storage, StorageLevel::Shared);
        assert_eq!(
            spec.cells[3].key(),
            "platform=isolab workload=sysbench-cpu storage=shared"
        );
        assert_eq!(spec.storage.backing.len(), 3);
        assert_eq!(spec.storage.stripes, 3);
        assert_eq!(spec.storage.size, isolab_cgroups::Bytes(64 << 20));
    }

    #[test]
    fn a_level_the_platform_cannot_apply_is_impossible_at_the_level() {
        let errs = errors("[experiment]\nname = \"x\"\n[matrix]\nplatform = [\"host\", \"docker\"]\nstorage = [\"bind\", \"layer\"]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("exp.toml:5:20: platform `host` cannot put the working directory on storage `layer` (a container's writable layer and an engine's volumes have no meaning there); it offers `bind`, `image`, `tmpfs`, `dedicated`, `shared`; or exclude the cell"),
            "{}",
            errs[0]
        );
        let spec = parse("[experiment]\nname = \"x\"\nimpossible = \"skip\"\n[matrix]\nplatform = [\"host\", \"docker\"]\nstorage = [\"bind\", \"layer\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(spec.cells.len(), 3);
        assert_eq!(
            spec.dropped[0].key,
            "platform=host workload=sysbench-cpu storage=layer"
        );
    }

    #[test]
    fn shared_is_impossible_on_a_kernel_without_device_mapper() {
        let text = "[experiment]\nname = \"x\"\n[matrix]\nstorage = [\"dedicated\", \"shared\"]\nworkload = [\"sysbench-cpu\"]\n";
        let host = crate::spec::HostFacts {
            cpus: "0-1".parse().unwrap(),
            storage: Some(crate::spec::StorageSupport {
                device_mapper: false,
                btrfs: true,
            }),
        };
        let errs =
            crate::spec::ExperimentSpec::parse(crate::spec::Source::new("exp.toml", text), &host)
                .unwrap_err();
        assert_eq!(errs.0.len(), 1, "{errs:?}");
        assert!(errs.0[0].to_string().starts_with("exp.toml:4:25: storage `shared` stripes with a device-mapper `striped` target, and this kernel has no device-mapper"), "{errs:?}");
        assert!(
            errs.0[0].to_string().contains("set `striping = \"btrfs\"`"),
            "{errs:?}"
        );
        // Said explicitly, btrfs stripes instead; without btrfs, that is an error too.
        let btrfs = text.replace("[matrix]", "[storage]\nstriping = \"btrfs\"\n[matrix]");
        let spec =
            crate::spec::ExperimentSpec::parse(crate::spec::Source::new("exp.toml", &btrfs), &host)
                .unwrap();
        assert_eq!(spec.storage.striping, super::Striping::Btrfs);
        let no_btrfs = crate::spec::HostFacts {
            storage: Some(crate::spec::StorageSupport {
                device_mapper: false,
                btrfs: false,
            }),
            ..host.clone()
        };
        let errs = crate::spec::ExperimentSpec::parse(
            crate::spec::Source::new("exp.toml", &btrfs),
            &no_btrfs,
        )
        .unwrap_err();
        assert!(errs.0[0].to_string().contains("needs btrfs"), "{errs:?}");
        let bad = btrfs.replace("\"btrfs\"", "\"md\"");
        let errs =
            crate::spec::ExperimentSpec::parse(crate::spec::Source::new("exp.toml", &bad), &host)
                .unwrap_err();
        assert!(
            errs.0[0]
                .to_string()
                .starts_with("exp.toml:4:12: storage.striping `md`"),
            "{errs:?}"
        );
        // Read anywhere (a stored spec), nothing about the host's storage is checked.
        let anywhere = crate::spec::HostFacts {
            storage: None,
            ..host
        };
        let text = "[experiment]\nname = \"x\"\n[storage]\nbacking = [\"/elsewhere\"]\n[matrix]\nstorage = [\"shared\"]\nworkload = [\"sysbench-cpu\"]\n";
        assert!(crate::spec::ExperimentSpec::parse(
            crate::spec::Source::new("exp.toml", text),
            &anywhere
        )
        .is_ok());
    }

    #[test]
    fn bad_storage_input_says_what_to_change() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "").unwrap();
        let text = format!(
            "[experiment]\nname = \"x\"\n[storage]\nbacking = [\"relative\", \"/nonexistent/isolab\", \"{}\"]\nsize = \"1MiB\"\nstripes = 1\n[matrix]\nstorage = [\"nfs\"]\nworkload = [\"sysbench-cpu\"]\n",
            file.display()
        );
        let errs = errors(&text);
        assert_eq!(errs.len(), 6, "{errs:?}");
        assert!(
            errs[0].contains("storage.backing: `relative` is not an absolute path"),
            "{errs:?}"
        );
        assert!(
            errs[1].contains(
                "storage.backing: `/nonexistent/isolab` cannot be used (No such file or directory"
            ),
            "{errs:?}"
        );
        assert!(errs[2].contains("is not a directory"), "{errs:?}");
        assert!(
            errs[3].starts_with("exp.toml:5:8: storage.size must be at least 16MiB"),
            "{errs:?}"
        );
        assert!(
            errs[4]
                .starts_with("exp.toml:6:11: storage.stripes must be a whole number from 2 to 16"),
            "{errs:?}"
        );
        assert!(errs[5].starts_with("exp.toml:8:12: unknown storage `nfs`: expected one of `bind`, `layer`, `volume`, `image`, `tmpfs`, `dedicated`, `shared`"), "{errs:?}");
        let errs = errors("[experiment]\nname = \"x\"\n[storage]\nbacking = [\"/dev/null\"]\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(errs[0].contains("is not a directory"), "{errs:?}");
    }
}
