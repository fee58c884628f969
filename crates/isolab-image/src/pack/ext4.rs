//! ext4 image files through `mkfs.ext4 -d` (e2fsprogs ≥ 1.43), which copies a tree into a new file
//! system without mounting anything.

use std::path::Path;

use super::{temp_sibling, Packed, TempFile};
use crate::error::{ImageError, IoContext};
use crate::tree;
use isolab_tools::{ToolCommand, ToolRunner};

/// The file-system label of every image.
pub const EXT4_LABEL: &str = "isolab";

const MIB: u64 = 1 << 20;

/// The default ext4 size for a tree occupying `used` bytes: used × 1.3 + 64 MiB (room for the
/// journal, metadata and writes inside the container), rounded up to whole MiB.
pub fn default_ext4_size(used: u64) -> u64 {
    let raw = used.saturating_add(used / 10 * 3).saturating_add(64 * MIB);
    raw.div_ceil(MIB).saturating_mul(MIB)
}

/// The mkfs command for `dir` into `file` of `size` bytes (a whole number of KiB).
pub(crate) fn mkfs_command(dir: &Path, file: &Path, size: u64) -> ToolCommand {
    ToolCommand::new("mkfs.ext4", "e2fsprogs")
        .arg("-q")
        .arg("-F")
        .arg("-d")
        .arg(dir)
        .arg("-L")
        .arg(EXT4_LABEL)
        .arg(file)
        .arg(format!("{}k", size / 1024))
}

pub(crate) fn pack_ext4(
    dir: &Path,
    file: &Path,
    size: Option<u64>,
    tools: &dyn ToolRunner,
) -> Result<Packed, ImageError> {
    let used = tree::used_bytes(dir)?;
    let size = match size {
        Some(s) if s < used => {
            return Err(ImageError::Ext4TooSmall {
                path: file.to_path_buf(),
                size: s,
                needed: used,
            })
        }
        Some(s) => s.div_ceil(1024) * 1024,
        None => default_ext4_size(used),
    };
    let tmp = temp_sibling(file);
    let mut guard = TempFile(Some(tmp.clone()));
    let f = std::fs::File::create(&tmp).ctx("create", &tmp)?;
    // A sparse file: only what mkfs writes takes space.
    f.set_len(size).ctx("resize", &tmp)?;
    drop(f);
    tools.run(&mkfs_command(dir, &tmp, size))?;
    std::fs::rename(&tmp, file).ctx("move into place", file)?;
    guard.0 = None;
    Ok(Packed {
        path: file.to_path_buf(),
        bytes: size,
        sha256: tree::sha256_file(file)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use isolab_tools::{ToolError, ToolOutput};
    use std::cell::RefCell;

    struct Recorder(RefCell<Vec<String>>, bool);
    impl ToolRunner for Recorder {
        fn run(&self, cmd: &ToolCommand) -> Result<ToolOutput, ToolError> {
            self.0.borrow_mut().push(cmd.display());
            if self.1 {
                Ok(ToolOutput::default())
            } else {
                Err(ToolError::Failed {
                    command: cmd.display(),
                    status: "exit status: 1".into(),
                    stderr: "no space".into(),
                })
            }
        }
    }

    #[test]
    fn default_size_rounds_to_mib() {
        assert_eq!(default_ext4_size(0), 64 * MIB);
        assert_eq!(default_ext4_size(10 * MIB), 77 * MIB);
        assert_eq!(default_ext4_size(1), 65 * MIB);
    }

    #[test]
    fn packs_with_the_expected_command_into_a_sparse_file() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("f"), "x").unwrap();
        let out = d.path().join("root.ext4");
        let rec = Recorder(RefCell::new(Vec::new()), true);
        let p = pack_ext4(&src, &out, Some(8 * MIB + 1), &rec).unwrap();
        assert_eq!(p.bytes, 8 * MIB + 1024);
        assert_eq!(std::fs::metadata(&out).unwrap().len(), 8 * MIB + 1024);
        let cmd = &rec.0.borrow()[0];
        assert!(
            cmd.starts_with(&format!("mkfs.ext4 -q -F -d {} -L isolab ", src.display())),
            "{cmd}"
        );
        assert!(cmd.ends_with(" 8193k"), "{cmd}");
        assert_eq!(p.sha256.len(), 64);
    }

    #[test]
    fn failure_and_too_small_leave_nothing() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::write(src.join("f"), vec![1u8; 100_000]).unwrap();
        let out = d.path().join("root.ext4");
        let err = pack_ext4(
            &src,
            &out,
            Some(1000),
            &Recorder(RefCell::new(Vec::new()), true),
        )
        .unwrap_err();
        assert!(matches!(err, ImageError::Ext4TooSmall { .. }), "{err}");
        let err =
            pack_ext4(&src, &out, None, &Recorder(RefCell::new(Vec::new()), false)).unwrap_err();
        assert!(err.to_string().contains("mkfs.ext4 -q -F"), "{err}");
        let left: Vec<_> = std::fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only src remains");
    }
}
