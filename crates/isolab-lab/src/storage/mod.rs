//! The `storage` factor at run time: before a run's jobs are made, [`prepare`] puts its
//! working directory on the cell's [`StorageLevel`] by mounting it on the host at the
//! working directory's path (a tmpfs, an overlay, an ext4 image file on a loop device,
//! a loop device per instance, or a device-mapper `striped` device over loop devices),
//! reads the mount table back ([`Mounted::facts`]: file system type and source of each
//! mount, the loop and device-mapper devices and the disk their backing files are on),
//! and removes everything again when the returned [`Mounted`] is dropped, also on
//! failure. Every platform binds the working directory at the same path, so a container
//! sees the mounted file system; `isolab gc` ([`gc`]) removes what a killed run left.
//!
//! Names let `gc` recognise its own: the run's working directory and the directory of
//! its backing files (`<backing>/exp<ID>-pid<PID>-<tag>.storage/`) carry the owner's
//! pid, and so does every device-mapper name (`isolab-exp<ID>-pid<PID>-<tag>`). The
//! host effects go through [`StorageHost`].

mod host;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use isolab_cgroups::MountEntry;
use isolab_engines::StorageLevel;

pub use host::{StorageHost, SystemStorageHost};

#[cfg(any(test, feature = "testing"))]
pub use host::FakeStorageHost;

mod spec;

pub use spec::{StorageSpec, Striping, DEFAULT_SIZE, DEFAULT_STRIPES};

/// Why an engine could not make or remove a volume (the platform's error, which this
/// module does not need to know).
pub type VolumeError = Box<dyn std::error::Error + Send + Sync>;

/// An engine's named volumes (storage `volume`), for the cell's platform.
pub trait Volumes: Sync {
    /// Creates volume `name` and returns the host directory that holds its data.
    fn create_volume(&self, name: &str) -> Result<PathBuf, VolumeError>;
    /// Removes volume `name`.
    fn remove_volume(&self, name: &str) -> Result<(), VolumeError>;
}

/// Sectors of a `shared` device's stripe chunk (64 KiB).
const CHUNK_SECTORS: u64 = 128;

/// Why a run's storage could not be made, or is not what was asked for.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// A directory or backing file could not be made.
    #[error("storage `{level}`: cannot {action} {path}: {source}")]
    Io {
        /// The level.
        level: StorageLevel,
        /// What was tried.
        action: &'static str,
        /// On what.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// `losetup`, `dmsetup` or `mkfs.ext4` failed.
    #[error("storage `{level}`: {source}")]
    Tool {
        /// The level.
        level: StorageLevel,
        /// The tool's failure.
        #[source]
        source: isolab_tools::ToolError,
    },
    /// The lab does not make this level itself (an engine's own storage).
    #[error("storage `{level}` is made by a platform's engine, not by the lab: run it on a platform whose capabilities list it")]
    Unsupported {
        /// The level.
        level: StorageLevel,
    },
    /// The engine could not make its volume.
    #[error("storage `volume`: cannot create volume {name}: {source}")]
    Volume {
        /// The volume.
        name: String,
        /// The engine's error.
        #[source]
        source: VolumeError,
    },
    /// The mount table does not show what was mounted.
    #[error("storage `{level}`: the mount table shows {found} at {path}, not {expected}: another program changed it")]
    Mismatch {
        /// The level.
        level: StorageLevel,
        /// The mount point.
        path: PathBuf,
        /// `fstype source` asked for.
        expected: String,
        /// What the table shows.
        found: String,
    },
}

/// One mount a run's storage made, as the mount table shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MountFact {
    /// The mount point (a working directory).
    pub path: PathBuf,
    /// Its file system type, read back (`ext4`, `tmpfs`, `overlay`).
    pub fstype: String,
    /// Its source, read back (`/dev/loop3`, `/dev/mapper/isolab-…`, `isolab-storage`).
    pub source: String,
}

/// What a run's storage is, recorded with the run (its `limits` data, under `storage`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StorageFacts {
    /// The level.
    pub level: StorageLevel,
    /// The mounts made, read back (none for `bind`).
    pub mounts: Vec<MountFact>,
    /// The block devices: what each is and over what.
    pub devices: Vec<String>,
    /// The file system of the working directory (for `bind`) or of each backing
    /// directory: `fstype source at mount point`.
    pub disks: Vec<String>,
}

impl StorageFacts {
    /// One sentence for the run's notes.
    pub fn note(&self) -> String {
        let mut s = format!("storage `{}`", self.level);
        if !self.mounts.is_empty() {
            let mounts: Vec<String> = self
                .mounts
                .iter()
                .map(|m| format!("{} {} at {}", m.fstype, m.source, m.path.display()))
                .collect();
            s.push_str(&format!(": {}", mounts.join("; ")));
        }
        if !self.devices.is_empty() {
            let dm = self.devices.iter().any(|d| d.starts_with("device-mapper"));
            s.push_str(&format!(
                "; block devices are loop devices over files, not disks of their own{}: {}",
                if dm {
                    ", with a device-mapper target over them"
                } else {
                    ""
                },
                self.devices.join("; ")
            ));
        }
        if !self.disks.is_empty() {
            s.push_str(&format!("; on {}", self.disks.join(", ")));
        }
        s
    }
}

/// A run's storage: removed (mounts, device-mapper devices, loop devices, backing
/// files, in that order) when dropped.
pub struct Mounted<'a> {
    host: Arc<dyn StorageHost>,
    /// The engine's volume, removed after the mounts.
    volume: Option<(&'a dyn Volumes, String)>,
    level: StorageLevel,
    mounts: Vec<(PathBuf, String, String)>,
    dms: Vec<String>,
    loops: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    devices: Vec<String>,
    disks: Vec<String>,
}

impl std::fmt::Debug for Mounted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted")
            .field("level", &self.level)
            .field("mounts", &self.mounts)
            .finish_non_exhaustive()
    }
}

impl Mounted<'_> {
    fn io(&self, action: &'static str, path: &Path, source: std::io::Error) -> StorageError {
        StorageError::Io {
            level: self.level,
            action,
            path: path.to_path_buf(),
            source,
        }
    }

    fn tool(&self, source: isolab_tools::ToolError) -> StorageError {
        StorageError::Tool {
            level: self.level,
            source,
        }
    }

    fn mkdir(&self, dir: &Path) -> Result<(), StorageError> {
        std::fs::create_dir_all(dir).map_err(|e| self.io("create directory", dir, e))
    }

    /// A new directory for backing files or layers, removed with the storage.
    fn backing_dir(&mut self, dir: PathBuf) -> Result<PathBuf, StorageError> {
        self.mkdir(&dir)?;
        self.dirs.push(dir.clone());
        let disk = describe_fs(&self.host.mounts(), &dir);
        if !self.disks.contains(&disk) {
            self.disks.push(disk);
        }
        Ok(dir)
    }

    fn mount(
        &mut self,
        source: &str,
        target: &Path,
        fstype: &str,
        data: &str,
    ) -> Result<(), StorageError> {
        self.mkdir(target)?;
        self.host
            .mount(source, target, fstype, data)
            .map_err(|e| self.io("mount on", target, e))?;
        self.mounts
            .push((target.to_path_buf(), fstype.to_owned(), source.to_owned()));
        Ok(())
    }

    /// A loop device over a new file `file` of `size` bytes.
    fn loop_device(&mut self, file: &Path, size: u64) -> Result<PathBuf, StorageError> {
        self.host
            .create_file(file, size)
            .map_err(|e| self.io("create backing file", file, e))?;
        let dev = self.host.attach_loop(file).map_err(|e| self.tool(e))?;
        self.loops.push(dev.clone());
        self.devices.push(format!(
            "{} over file {} ({})",
            dev.display(),
            file.display(),
            isolab_cgroups::Bytes(size)
        ));
        Ok(dev)
    }

    /// An ext4 file system on `device`, mounted on `target`.
    fn ext4(&mut self, device: &Path, target: &Path) -> Result<(), StorageError> {
        self.host.mkfs_ext4(device).map_err(|e| self.tool(e))?;
        self.mount(&device.to_string_lossy(), target, "ext4", "")
    }

    /// The mounts read back from the mount table: each must show the file system type
    /// and source mounted.
    pub fn facts(&self) -> Result<StorageFacts, StorageError> {
        // A level that mounted nothing (the host's `bind`) reads no mount table.
        let table = if self.mounts.is_empty() {
            Vec::new()
        } else {
            self.host.mounts()
        };
        let mut mounts = Vec::new();
        for (path, fstype, source) in &self.mounts {
            let found = table.iter().rev().find(|m| &m.mount_point == path);
            match found {
                Some(m) if &m.fstype == fstype && &m.source == source => mounts.push(MountFact {
                    path: path.clone(),
                    fstype: m.fstype.clone(),
                    source: m.source.clone(),
                }),
                _ => {
                    return Err(StorageError::Mismatch {
                        level: self.level,
                        path: path.clone(),
                        expected: format!("{fstype} {source}"),
                        found: found
                            .map_or("no mount".into(), |m| format!("{} {}", m.fstype, m.source)),
                    })
                }
            }
        }
        Ok(StorageFacts {
            level: self.level,
            mounts,
            devices: self.devices.clone(),
            disks: self.disks.clone(),
        })
    }
}

impl Drop for Mounted<'_> {
    fn drop(&mut self) {
        // Best effort, in the reverse order of making; what fails is left to `gc`.
        for (target, _, _) in self.mounts.iter().rev() {
            let _ = self.host.unmount(target);
        }
        for name in self.dms.iter().rev() {
            let _ = self.host.remove_dm(name);
        }
        for dev in self.loops.iter().rev() {
            let _ = self.host.detach_loop(dev);
        }
        for dir in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir_all(dir);
        }
        if let Some((volumes, name)) = &self.volume {
            let _ = volumes.remove_volume(name);
        }
    }
}

/// What one run's storage is made from.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// The cell's level.
    pub level: StorageLevel,
    /// `[storage]`.
    pub spec: &'a StorageSpec,
    /// The working directory base: the backing directory when `[storage]` names none,
    /// and where an overlay's layers go.
    pub base: &'a Path,
    /// The run's working directory (`<base>/exp<ID>-pid<PID>-<tag>`).
    pub workdir: &'a Path,
    /// Instances of the subject: instance `k` works in `<workdir>/i<k>` when more
    /// than one.
    pub instances: u32,
}

/// Puts the run's working directory on `request.level` (see the module's overview),
/// with the cell's platform's `volumes` for `volume`; `bind` mounts nothing and records
/// the file system the directory is on.
pub fn prepare<'v>(
    host: Arc<dyn StorageHost>,
    request: Request<'_>,
    volumes: Option<&'v dyn Volumes>,
) -> Result<Mounted<'v>, StorageError> {
    let Request {
        level,
        spec,
        base,
        workdir,
        instances,
    } = request;
    let mut m = Mounted {
        host,
        volume: None,
        level,
        mounts: Vec::new(),
        dms: Vec::new(),
        loops: Vec::new(),
        dirs: Vec::new(),
        devices: Vec::new(),
        disks: Vec::new(),
    };
    let run = workdir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let backing: Vec<&Path> = if spec.backing.is_empty() {
        vec![base]
    } else {
        spec.backing.iter().map(PathBuf::as_path).collect()
    };
    let store = format!("{run}.storage");
    let size = spec.size.0;
    match level {
        StorageLevel::Volume => {
            let volumes = volumes.ok_or(StorageError::Unsupported { level })?;
            let name = format!("isolab-{run}");
            let dir = volumes
                .create_volume(&name)
                .map_err(|source| StorageError::Volume {
                    name: name.clone(),
                    source,
                })?;
            m.volume = Some((volumes, name.clone()));
            // The engine's directory of the volume, bound at the working directory
            // as the engine binds a volume into a container: the mount shows the
            // file system that holds it.
            let table = m.host.mounts();
            let under = table
                .iter()
                .filter(|e| dir.starts_with(&e.mount_point))
                .max_by_key(|e| e.mount_point.components().count());
            let (fstype, source) = under.map_or((String::new(), String::new()), |e| {
                (e.fstype.clone(), e.source.clone())
            });
            m.mkdir(workdir)?;
            m.host
                .bind(&dir, workdir)
                .map_err(|e| m.io("bind the volume on", workdir, e))?;
            m.mounts.push((workdir.to_path_buf(), fstype, source));
            m.devices
                .push(format!("named volume {name} at {}", dir.display()));
            m.disks.push(describe_fs(&table, &dir));
        }
        StorageLevel::Bind => {
            m.mkdir(workdir)?;
            m.disks.push(describe_fs(&m.host.mounts(), workdir));
        }
        StorageLevel::Tmpfs => m.mount(
            "isolab-storage",
            workdir,
            "tmpfs",
            &format!("size={size},mode=0755"),
        )?,
        StorageLevel::Layer => {
            let dir = m.backing_dir(base.join(&store))?;
            let (lower, upper, work) = (dir.join("lower"), dir.join("upper"), dir.join("work"));
            for d in [&lower, &upper, &work] {
                m.mkdir(d)?;
            }
            let data = format!(
                "lowerdir={},upperdir={},workdir={}",
                lower.display(),
                upper.display(),
                work.display()
            );
            m.mount("isolab-storage", workdir, "overlay", &data)?;
        }
        StorageLevel::Image => {
            let dir = m.backing_dir(backing[0].join(&store))?;
            let dev = m.loop_device(&dir.join("image.ext4"), size)?;
            m.ext4(&dev, workdir)?;
        }
        StorageLevel::Dedicated => {
            for k in 0..instances {
                let dir = m.backing_dir(backing[k as usize % backing.len()].join(&store))?;
                let target = if instances == 1 {
                    workdir.to_path_buf()
                } else {
                    workdir.join(format!("i{k}"))
                };
                let dev = m.loop_device(&dir.join(format!("i{k}.ext4")), size)?;
                m.ext4(&dev, &target)?;
            }
        }
        StorageLevel::Shared => {
            let stripes = u64::from(spec.stripes);
            // Each stripe a whole number of chunks; the device their sum.
            let per = (size / 512 / stripes / CHUNK_SECTORS).max(1) * CHUNK_SECTORS;
            let mut devs = Vec::new();
            for k in 0..spec.stripes {
                let dir = m.backing_dir(backing[k as usize % backing.len()].join(&store))?;
                devs.push(m.loop_device(&dir.join(format!("stripe{k}.img")), per * 512)?);
            }
            if spec.striping == Striping::Btrfs {
                m.host.mkfs_btrfs_raid0(&devs).map_err(|e| m.tool(e))?;
                let list: Vec<String> = devs.iter().map(|d| d.display().to_string()).collect();
                m.devices.push(format!(
                    "btrfs raid0 (data and metadata striped in 64 KiB chunks) over {}",
                    list.join(", ")
                ));
                // Every device named, so that no `btrfs device scan` is needed.
                let data: Vec<String> = list.iter().map(|d| format!("device={d}")).collect();
                m.mount(&list[0], workdir, "btrfs", &data.join(","))?;
                return Ok(m);
            }
            let name = format!("isolab-{run}");
            let table = striped_table(&devs, per);
            let dev = m.host.create_dm(&name, &table).map_err(|e| m.tool(e))?;
            m.dms.push(name.clone());
            m.devices.push(format!(
                "device-mapper `striped` {} over {} in {} KiB chunks",
                dev.display(),
                devs.iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
                CHUNK_SECTORS / 2
            ));
            m.ext4(&dev, workdir)?;
        }
    }
    Ok(m)
}

/// The `dmsetup` table of a `striped` device over `devs`, `per` sectors each.
fn striped_table(devs: &[PathBuf], per: u64) -> String {
    let mut table = format!(
        "0 {} striped {} {CHUNK_SECTORS}",
        per * devs.len() as u64,
        devs.len()
    );
    for d in devs {
        table.push_str(&format!(" {} 0", d.display()));
    }
    table
}

/// `fstype source at mount point` of the file system holding `path` (the deepest
/// mount that is a prefix of it).
fn describe_fs(table: &[MountEntry], path: &Path) -> String {
    table
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .max_by_key(|m| m.mount_point.components().count())
        .map_or_else(
            || format!("an unknown file system at {}", path.display()),
            |m| format!("{} {} at {}", m.fstype, m.source, m.mount_point.display()),
        )
}

/// The owner pid of a name `exp<ID>-pid<PID>-…` (a run's working directory, its
/// backing directory, or a device-mapper name without its `isolab-` prefix).
fn owner(name: &str) -> Option<u32> {
    workdir_owner(name)
}

/// The owner pid in a working directory name `exp<ID>-pid<PID>-<tag>`.
pub(crate) fn workdir_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix("exp")?;
    let (_, after) = rest.split_once("-pid")?;
    after.split('-').next()?.parse().ok()
}

/// The owner of any component of `path` named `exp<ID>-pid<PID>-…`.
fn path_owner(path: &Path) -> Option<u32> {
    path.components()
        .find_map(|c| owner(&c.as_os_str().to_string_lossy()))
}

/// Removes the storage of runs whose isolab process is gone (after `kill -9`): their
/// mounts (deepest first), device-mapper devices, loop devices and the directories of
/// the loop devices' backing files. Returns what was removed.
pub fn gc(host: &dyn StorageHost) -> Vec<String> {
    let dead = |pid: Option<u32>| pid.is_some_and(|p| !host.owner_alive(p));
    let mut removed = Vec::new();
    let mut mounts: Vec<PathBuf> = host
        .mounts()
        .into_iter()
        .filter(|m| dead(path_owner(&m.mount_point)))
        .map(|m| m.mount_point)
        .collect();
    mounts.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    mounts.dedup();
    for target in mounts {
        if host.unmount(&target).is_ok() {
            removed.push(format!("storage mount {}", target.display()));
        }
    }
    for name in host.dm_names() {
        if dead(name.strip_prefix("isolab-").and_then(owner)) && host.remove_dm(&name).is_ok() {
            removed.push(format!("device-mapper device {name}"));
        }
    }
    for (dev, file) in host.loops() {
        // The kernel says `(deleted)` after a backing file that is gone.
        let file = PathBuf::from(file.to_string_lossy().trim_end_matches(" (deleted)"));
        let Some(dir) = file.parent() else { continue };
        let ours = dir
            .file_name()
            .is_some_and(|n| n.to_string_lossy().ends_with(".storage"));
        if ours && dead(path_owner(dir)) && host.detach_loop(&dev).is_ok() {
            removed.push(format!(
                "loop device {} over {}",
                dev.display(),
                file.display()
            ));
            if std::fs::remove_dir_all(dir).is_ok() {
                removed.push(format!("storage directory {}", dir.display()));
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests;
