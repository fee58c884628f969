//! What `[storage]` asks for, once checked (`spec/storage.rs` checks it): where the
//! block devices of the `image`, `dedicated` and `shared` levels keep their backing
//! files, their size and how a `shared` device is striped.

use std::path::PathBuf;

use isolab_cgroups::Bytes;

/// Size of each backing file when `[storage] size` is not given.
pub const DEFAULT_SIZE: Bytes = Bytes(1 << 30);
/// Loop devices a `shared` device stripes over when `[storage]` names fewer than two
/// backing directories.
pub const DEFAULT_STRIPES: u32 = 2;

/// `[storage]`: where the block devices of the `image`, `dedicated` and `shared`
/// levels keep their backing files, and their size.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StorageSpec {
    /// Directories for the backing files (`backing`), used in turn: a `shared`
    /// device's stripes go one per directory; empty = the working directory base.
    pub backing: Vec<PathBuf>,
    /// Size of each device (`size`): a `shared` device has this size in total.
    pub size: Bytes,
    /// Loop devices a `shared` device stripes over (`stripes`).
    pub stripes: u32,
    /// What stripes a `shared` device over them (`striping`).
    pub striping: Striping,
}

/// What stripes the loop devices of a `shared` level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Striping {
    /// A device-mapper `striped` target in 64 KiB chunks, ext4 on it (the default).
    DeviceMapper,
    /// One btrfs file system over the loop devices, data and metadata in `raid0`
    /// (btrfs stripes in 64 KiB chunks too): for kernels without device-mapper.
    Btrfs,
}

impl Striping {
    /// Its word in specs.
    pub fn as_str(self) -> &'static str {
        match self {
            Striping::DeviceMapper => "device-mapper",
            Striping::Btrfs => "btrfs",
        }
    }
}

impl Default for StorageSpec {
    fn default() -> Self {
        StorageSpec {
            backing: Vec::new(),
            size: DEFAULT_SIZE,
            stripes: DEFAULT_STRIPES,
            striping: Striping::DeviceMapper,
        }
    }
}
