//! A controller borrowed from cgroup v2 into a v1 hierarchy of its own for a while, and
//! given back.
//!
//! crun refuses a hybrid host whose cgroup2 mount still lists a controller in
//! `cgroup.controllers` ("cgroups in hybrid mode not supported"); mounting a v1 hierarchy
//! for that controller empties the list. Giving it back takes care: the kernel frees a v1
//! hierarchy (and hands its controller back to cgroup2) only when it is unmounted without
//! children, and a removed cgroup stays a child until the kernel has released it, some
//! milliseconds after its `rmdir`. [`BorrowedV1`] waits for that before it unmounts, and a
//! hierarchy that outlived its unmount anyway is mounted again (which reuses it) and
//! unmounted once more, until cgroup2 lists the controller again.

use std::ffi::CString;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A v1 hierarchy of one controller mounted at `ROOT/CONTROLLER`; on drop it is unmounted,
/// its mount point removed, and the controller is back in cgroup2.
#[derive(Debug)]
pub struct BorrowedV1 {
    controller: String,
    mount_point: PathBuf,
    unified: PathBuf,
}

impl BorrowedV1 {
    /// Mounts a v1 hierarchy of `controller` at `root/controller` (creating the mount
    /// point), where `unified` is the hybrid host's cgroup2 mount. Fails when the mount
    /// point exists already (someone else's hierarchy) or the mount fails.
    pub fn mount(root: &Path, unified: &Path, controller: &str) -> io::Result<BorrowedV1> {
        let mount_point = root.join(controller);
        std::fs::create_dir(&mount_point).map_err(|e| {
            io::Error::new(e.kind(), format!("mkdir {}: {e}", mount_point.display()))
        })?;
        if let Err(e) = mount_v1(controller, &mount_point) {
            let _ = std::fs::remove_dir(&mount_point);
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "mount -t cgroup -o {controller} cgroup {}: {e}",
                    mount_point.display()
                ),
            ));
        }
        Ok(BorrowedV1 {
            controller: controller.to_owned(),
            mount_point,
            unified: unified.to_path_buf(),
        })
    }

    /// Where the hierarchy is mounted.
    pub fn mount_point(&self) -> &Path {
        &self.mount_point
    }
}

/// The controllers the cgroup2 mount at `unified` lists in `cgroup.controllers`.
pub fn cgroup2_listed(unified: &Path) -> Vec<String> {
    std::fs::read_to_string(unified.join("cgroup.controllers"))
        .map(|c| c.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Borrows every controller the hybrid host's cgroup2 mount at `unified` lists into a
/// v1 hierarchy of its own below `root` (what crun needs to run), all given back when
/// the guards are dropped; the first that cannot be mounted is the error.
pub fn borrow_listed(root: &Path, unified: &Path) -> io::Result<Vec<BorrowedV1>> {
    cgroup2_listed(unified)
        .iter()
        .map(|c| BorrowedV1::mount(root, unified, c))
        .collect()
}

/// Whether the cgroup2 mount at `unified` lists `controller` in `cgroup.controllers`.
pub fn listed_in_cgroup2(unified: &Path, controller: &str) -> bool {
    cgroup2_listed(unified).iter().any(|n| n == controller)
}

/// The cgroups of `controller`'s hierarchy, its root included (`/proc/cgroups`).
fn hierarchy_cgroups(controller: &str) -> Option<u32> {
    let table = std::fs::read_to_string("/proc/cgroups").ok()?;
    let line = table
        .lines()
        .find(|l| l.split('\t').next() == Some(controller))?;
    line.split('\t').nth(2)?.parse().ok()
}

/// Polls `done` every 20 ms for up to `limit`.
fn wait_for(limit: Duration, done: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

fn c_string(text: &str) -> io::Result<CString> {
    CString::new(text).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

/// `mount -t cgroup -o CONTROLLER cgroup TARGET`.
fn mount_v1(controller: &str, target: &Path) -> io::Result<()> {
    let (src, fstype) = (c_string("cgroup")?, c_string("cgroup")?);
    let (target, data) = (c_string(&target.to_string_lossy())?, c_string(controller)?);
    // SAFETY: every pointer is a valid NUL-terminated string that outlives the call.
    let rc = unsafe {
        libc::mount(
            src.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            data.as_ptr().cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn umount(target: &Path) -> io::Result<()> {
    let target = c_string(&target.to_string_lossy())?;
    // SAFETY: `target` is a valid NUL-terminated path.
    if unsafe { libc::umount2(target.as_ptr(), 0) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Removes the cgroups below `dir`, deepest first (a cgroup with processes stays).
fn remove_children(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            remove_children(&entry.path());
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

impl Drop for BorrowedV1 {
    fn drop(&mut self) {
        let c = self.controller.as_str();
        // Cgroups a runtime left (parents of its containers' cgroups).
        remove_children(&self.mount_point);
        // Cgroups removed just now are released by the kernel a little later.
        wait_for(Duration::from_secs(10), || {
            hierarchy_cgroups(c).is_none_or(|n| n <= 1)
        });
        if let Err(e) = umount(&self.mount_point) {
            eprintln!("umount {}: {e}", self.mount_point.display());
        }
        for _ in 0..3 {
            if wait_for(Duration::from_secs(2), || {
                listed_in_cgroup2(&self.unified, c)
            }) {
                break;
            }
            // It outlived its unmount: mounting reuses it, unmounting now frees it.
            if mount_v1(c, &self.mount_point).is_ok() {
                let _ = umount(&self.mount_point);
            }
        }
        let _ = std::fs::remove_dir(&self.mount_point);
        if !listed_in_cgroup2(&self.unified, c) {
            eprintln!("{c} did not return to cgroup2 after its v1 hierarchy was unmounted (see /proc/cgroups)");
        }
    }
}
