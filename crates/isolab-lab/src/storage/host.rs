//! The host effects of the storage levels ([`StorageHost`]): backing files, loop
//! devices (`losetup`), device-mapper targets (`dmsetup`), ext4 (`mkfs.ext4`), mounts,
//! and the tables `gc` reads (loop devices' backing files, device-mapper names, the
//! mount table). [`SystemStorageHost`] is the real one; [`FakeStorageHost`] (tests and
//! the `testing` feature) keeps them in memory.

use std::io;
use std::path::{Path, PathBuf};

use isolab_cgroups::MountEntry;
use isolab_tools::{SystemTools, ToolCommand, ToolError, ToolRunner};

/// The host effects of the storage levels. Every call names what it acts on, so that an
/// error can say it.
pub trait StorageHost: Send + Sync + std::fmt::Debug {
    /// Creates `file` of `size` bytes, its blocks allocated (fallocate).
    fn create_file(&self, file: &Path, size: u64) -> io::Result<()>;
    /// Attaches `file` to a free loop device and returns the device (`/dev/loopN`).
    fn attach_loop(&self, file: &Path) -> Result<PathBuf, ToolError>;
    /// Detaches loop device `device`.
    fn detach_loop(&self, device: &Path) -> Result<(), ToolError>;
    /// Creates device-mapper device `name` from `table` (`dmsetup create`); returns
    /// `/dev/mapper/<name>`.
    fn create_dm(&self, name: &str, table: &str) -> Result<PathBuf, ToolError>;
    /// Removes device-mapper device `name`.
    fn remove_dm(&self, name: &str) -> Result<(), ToolError>;
    /// Makes an ext4 file system on `device`, its inode tables and journal written now
    /// (no lazy initialisation writing behind a measurement).
    fn mkfs_ext4(&self, device: &Path) -> Result<(), ToolError>;
    /// Makes one btrfs file system over `devices`, data and metadata striped
    /// (`raid0`).
    fn mkfs_btrfs_raid0(&self, devices: &[PathBuf]) -> Result<(), ToolError>;
    /// Mounts `source` on `target` as `fstype` with options `data`.
    fn mount(&self, source: &str, target: &Path, fstype: &str, data: &str) -> io::Result<()>;
    /// Binds directory `source` on `target` (`mount --bind`).
    fn bind(&self, source: &Path, target: &Path) -> io::Result<()>;
    /// Unmounts `target` (lazily when it is busy).
    fn unmount(&self, target: &Path) -> io::Result<()>;
    /// This process's mount table.
    fn mounts(&self) -> Vec<MountEntry>;
    /// Every attached loop device with its backing file.
    fn loops(&self) -> Vec<(PathBuf, PathBuf)>;
    /// The names of every device-mapper device.
    fn dm_names(&self) -> Vec<String>;
    /// Whether isolab process `pid` still runs (its leftovers are not `gc`'s).
    fn owner_alive(&self, pid: u32) -> bool;
}

/// The real [`StorageHost`]: fallocate(2), `losetup`, `dmsetup`, `mkfs.ext4`,
/// mount(2) and umount2(2), `/sys/block` and `/proc/self/mountinfo`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemStorageHost;

fn tool(program: &str, package: &str, args: &[&str]) -> Result<String, ToolError> {
    let cmd = args
        .iter()
        .fold(ToolCommand::new(program, package), |c, a| c.arg(a));
    let out = SystemTools.run(&cmd)?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The entries of `/sys/block` whose name starts with `prefix`, with the text of their
/// file `file` (e.g. `loop/backing_file`).
fn sys_block(prefix: &str, file: &str) -> Vec<(String, String)> {
    let Ok(entries) = std::fs::read_dir("/sys/block") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with(prefix) {
                return None;
            }
            let text = std::fs::read_to_string(e.path().join(file)).ok()?;
            Some((name, text.trim().to_owned()))
        })
        .collect()
}

impl StorageHost for SystemStorageHost {
    fn create_file(&self, file: &Path, size: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .create_new(true)
            .write(true)
            .open(file)?;
        let len = libc::off_t::try_from(size)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "size out of range"))?;
        // SAFETY: posix_fallocate(3) takes an open descriptor and two integers.
        match unsafe { libc::posix_fallocate(f.as_raw_fd(), 0, len) } {
            0 => Ok(()),
            // A file system without fallocate: a sparse file of the size.
            libc::EOPNOTSUPP => f.set_len(size),
            e => Err(io::Error::from_raw_os_error(e)),
        }
    }

    fn attach_loop(&self, file: &Path) -> Result<PathBuf, ToolError> {
        let file = file.to_string_lossy();
        tool("losetup", "mount", &["--find", "--show", &file]).map(PathBuf::from)
    }

    fn detach_loop(&self, device: &Path) -> Result<(), ToolError> {
        tool("losetup", "mount", &["--detach", &device.to_string_lossy()]).map(|_| ())
    }

    fn create_dm(&self, name: &str, table: &str) -> Result<PathBuf, ToolError> {
        tool("dmsetup", "dmsetup", &["create", name, "--table", table])?;
        Ok(Path::new("/dev/mapper").join(name))
    }

    fn remove_dm(&self, name: &str) -> Result<(), ToolError> {
        tool("dmsetup", "dmsetup", &["remove", "--retry", name]).map(|_| ())
    }

    fn mkfs_ext4(&self, device: &Path) -> Result<(), ToolError> {
        let device = device.to_string_lossy();
        tool(
            "mkfs.ext4",
            "e2fsprogs",
            &[
                "-q",
                "-F",
                "-E",
                "lazy_itable_init=0,lazy_journal_init=0",
                "-L",
                "isolab",
                &device,
            ],
        )
        .map(|_| ())
    }

    fn mkfs_btrfs_raid0(&self, devices: &[PathBuf]) -> Result<(), ToolError> {
        let devices: Vec<String> = devices
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        let mut args = vec!["-q", "-f", "-d", "raid0", "-m", "raid0", "-L", "isolab"];
        args.extend(devices.iter().map(String::as_str));
        tool("mkfs.btrfs", "btrfs-progs", &args).map(|_| ())
    }

    fn mount(&self, source: &str, target: &Path, fstype: &str, data: &str) -> io::Result<()> {
        isolab_engines::host::sys_mount(source, target, fstype, data)
    }

    fn bind(&self, source: &Path, target: &Path) -> io::Result<()> {
        tool(
            "mount",
            "mount",
            &[
                "--bind",
                &source.to_string_lossy(),
                &target.to_string_lossy(),
            ],
        )
        .map(|_| ())
        .map_err(io::Error::other)
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        use isolab_engines::host::Host;
        isolab_engines::host::SystemHost.unmount(target).map(|_| ())
    }

    fn mounts(&self) -> Vec<MountEntry> {
        mount_table()
    }

    fn loops(&self) -> Vec<(PathBuf, PathBuf)> {
        sys_block("loop", "loop/backing_file")
            .into_iter()
            .map(|(name, file)| (Path::new("/dev").join(name), PathBuf::from(file)))
            .collect()
    }

    fn dm_names(&self) -> Vec<String> {
        sys_block("dm-", "dm/name")
            .into_iter()
            .map(|(_, name)| name)
            .collect()
    }

    fn owner_alive(&self, pid: u32) -> bool {
        pid != std::process::id() && crate::platform::isolab_running(Path::new("/proc"), pid)
    }
}

/// This process's mount table (`/proc/self/mountinfo`), read again only when it changed:
/// the kernel marks an open mountinfo file with POLLPRI after any mount or unmount in its
/// mount namespace. Every run reads the table (its working directory's file system); a
/// run that mounts nothing then reads it once per process.
pub(crate) fn mount_table() -> Vec<MountEntry> {
    use std::os::fd::AsRawFd;
    static CACHE: std::sync::Mutex<Option<(std::fs::File, Vec<MountEntry>)>> =
        std::sync::Mutex::new(None);
    let path = isolab_cgroups::mountinfo_path(Path::new("/proc"));
    let read = || isolab_cgroups::read_mountinfo(&path, isolab_cgroups::Malformed::Skip);
    let Ok(mut cache) = CACHE.lock() else {
        return read().unwrap_or_default();
    };
    if let Some((file, table)) = cache.as_ref() {
        let mut pfd = libc::pollfd {
            fd: file.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        };
        // A mount or unmount since the last poll shows as POLLPRI (with POLLERR); no
        // event at all is an unchanged table.
        // SAFETY: polling one valid pollfd, without waiting.
        if unsafe { libc::poll(&mut pfd, 1, 0) } == 0 {
            return table.clone();
        }
    }
    // Opened before the read: a change between the two shows at the next poll.
    let watch = std::fs::File::open(&path);
    let table = read().unwrap_or_default();
    *cache = match watch {
        Ok(file) if !table.is_empty() => Some((file, table.clone())),
        _ => None,
    };
    table
}

/// A [`StorageHost`] in memory: backing files are created for real (in a test's
/// temporary directory), devices and mounts only listed, and every call logged.
#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Default)]
pub struct FakeStorageHost {
    state: std::sync::Mutex<FakeState>,
}

#[cfg(any(test, feature = "testing"))]
#[derive(Debug, Default)]
struct FakeState {
    calls: Vec<String>,
    loops: Vec<(PathBuf, PathBuf)>,
    next_loop: u32,
    dms: Vec<String>,
    mounts: Vec<MountEntry>,
    alive: Vec<u32>,
    fail_mkfs: bool,
}

#[cfg(any(test, feature = "testing"))]
impl FakeStorageHost {
    /// A fake host without devices or mounts, where no isolab runs.
    pub fn new() -> FakeStorageHost {
        FakeStorageHost::default()
    }

    /// Every call so far, one line each (`losetup /dev/loop0 FILE`, `mount …`).
    pub fn calls(&self) -> Vec<String> {
        self.state().calls.clone()
    }

    /// Marks isolab process `pid` as running.
    pub fn alive(&self, pid: u32) {
        self.state().alive.push(pid);
    }

    /// Makes every later `mkfs.ext4` fail.
    pub fn fail_mkfs(&self) {
        self.state().fail_mkfs = true;
    }

    /// Whether no loop device, device-mapper device or mount is left.
    pub fn is_clean(&self) -> bool {
        let s = self.state();
        s.loops.is_empty() && s.dms.is_empty() && s.mounts.is_empty()
    }

    /// Adds a mount to the table as another program would (its source as given).
    pub fn add_mount(&self, source: &str, target: &Path, fstype: &str) {
        let mut s = self.state();
        let entry = fake_mount(s.mounts.len() as u32, source, target, fstype);
        s.mounts.push(entry);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(any(test, feature = "testing"))]
fn fake_mount(id: u32, source: &str, target: &Path, fstype: &str) -> MountEntry {
    let line = format!(
        "{} 1 0:{id} / {} rw - {fstype} {source} rw",
        100 + id,
        target.display()
    );
    isolab_cgroups::parse_mountinfo(Path::new("fake"), &line, isolab_cgroups::Malformed::Fail)
        .expect("a fake mount line parses")
        .remove(0)
}

#[cfg(any(test, feature = "testing"))]
impl StorageHost for FakeStorageHost {
    fn create_file(&self, file: &Path, size: u64) -> io::Result<()> {
        self.state()
            .calls
            .push(format!("create {} {size}", file.display()));
        std::fs::write(file, b"")
    }

    fn attach_loop(&self, file: &Path) -> Result<PathBuf, ToolError> {
        let mut s = self.state();
        let dev = PathBuf::from(format!("/dev/loop{}", s.next_loop));
        s.next_loop += 1;
        s.calls
            .push(format!("losetup {} {}", dev.display(), file.display()));
        s.loops.push((dev.clone(), file.to_path_buf()));
        Ok(dev)
    }

    fn detach_loop(&self, device: &Path) -> Result<(), ToolError> {
        let mut s = self.state();
        s.calls.push(format!("losetup -d {}", device.display()));
        s.loops.retain(|(d, _)| d != device);
        Ok(())
    }

    fn create_dm(&self, name: &str, table: &str) -> Result<PathBuf, ToolError> {
        let mut s = self.state();
        s.calls.push(format!("dmsetup create {name} {table}"));
        s.dms.push(name.to_owned());
        Ok(Path::new("/dev/mapper").join(name))
    }

    fn remove_dm(&self, name: &str) -> Result<(), ToolError> {
        let mut s = self.state();
        s.calls.push(format!("dmsetup remove {name}"));
        s.dms.retain(|d| d != name);
        Ok(())
    }

    fn mkfs_ext4(&self, device: &Path) -> Result<(), ToolError> {
        let mut s = self.state();
        s.calls.push(format!("mkfs.ext4 {}", device.display()));
        if s.fail_mkfs {
            return Err(ToolError::Failed {
                command: format!("mkfs.ext4 {}", device.display()),
                status: "exit status: 1".into(),
                stderr: "fake failure".into(),
            });
        }
        Ok(())
    }

    fn mkfs_btrfs_raid0(&self, devices: &[PathBuf]) -> Result<(), ToolError> {
        let list: Vec<String> = devices.iter().map(|d| d.display().to_string()).collect();
        self.state()
            .calls
            .push(format!("mkfs.btrfs raid0 {}", list.join(" ")));
        Ok(())
    }

    fn mount(&self, source: &str, target: &Path, fstype: &str, data: &str) -> io::Result<()> {
        let mut s = self.state();
        s.calls.push(format!(
            "mount {source} {} {fstype} {data}",
            target.display()
        ));
        let entry = fake_mount(s.mounts.len() as u32, source, target, fstype);
        s.mounts.push(entry);
        Ok(())
    }

    fn bind(&self, source: &Path, target: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.calls
            .push(format!("bind {} {}", source.display(), target.display()));
        // As the kernel shows a bind: the file system holding the source.
        let under = s
            .mounts
            .iter()
            .filter(|m| source.starts_with(&m.mount_point))
            .max_by_key(|m| m.mount_point.components().count())
            .map(|m| (m.source.clone(), m.fstype.clone()))
            .unwrap_or_else(|| ("none".into(), "none".into()));
        let entry = fake_mount(s.mounts.len() as u32, &under.0, target, &under.1);
        s.mounts.push(entry);
        Ok(())
    }

    fn unmount(&self, target: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.calls.push(format!("umount {}", target.display()));
        match s.mounts.iter().rposition(|m| m.mount_point == target) {
            Some(i) => {
                s.mounts.remove(i);
                Ok(())
            }
            None => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    fn mounts(&self) -> Vec<MountEntry> {
        self.state().mounts.clone()
    }

    fn loops(&self) -> Vec<(PathBuf, PathBuf)> {
        self.state().loops.clone()
    }

    fn dm_names(&self) -> Vec<String> {
        self.state().dms.clone()
    }

    fn owner_alive(&self, pid: u32) -> bool {
        self.state().alive.contains(&pid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cached table follows a mount and an unmount made behind its back.
    #[test]
    fn the_mount_table_is_read_again_after_a_mount_and_an_unmount() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            isolab_skip::skip("mounting a tmpfs needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("m");
        std::fs::create_dir(&target).unwrap();
        let has = |table: &[MountEntry]| table.iter().any(|m| m.mount_point == target);
        // Twice, the second from the cache.
        assert!(!has(&mount_table()));
        assert!(!has(&mount_table()));
        SystemStorageHost
            .mount("isolab-test", &target, "tmpfs", "size=1m")
            .unwrap();
        let mounted = mount_table();
        SystemStorageHost.unmount(&target).unwrap();
        assert!(has(&mounted), "the tmpfs at {}", target.display());
        assert!(!has(&mount_table()), "{} still listed", target.display());
    }
}
