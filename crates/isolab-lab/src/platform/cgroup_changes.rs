//! Waking the engine platforms' cgroup watcher when something changes below an
//! instance cgroup, instead of on its next poll.
//!
//! A container whose command ends in a few milliseconds (crun running `sh -c test …`)
//! has a cgroup that lives shorter than the watcher's 5 ms poll: the watcher could
//! miss it and the run failed with "the container's cgroup never appeared". The kernel
//! reports a `mkdir` below a cgroup directory and every write into a cgroup's files
//! (the engine moving its process into `cgroup.procs`, then writing the limits) to
//! inotify, on cgroupfs as on any file system, so [`Changes::wait`] returns as soon
//! as the engine touches the instance: the watcher reads the container's cgroup while
//! it holds the process and after the engine wrote its last limit. New directories are
//! watched as they appear (LXC nests its payload two levels down). [`Stop`] wakes the
//! watcher at once when the command has ended, rather than after its sleep.
//!
//! Where inotify cannot be had (no instance directory yet, no descriptors left),
//! waiting falls back to sleeping for the timeout: the poll of before.

use std::collections::HashMap;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What is watched in each directory: subdirectories made (to watch them too) and
/// files written or removed.
const MASK: u32 = libc::IN_CREATE | libc::IN_MODIFY | libc::IN_DELETE | libc::IN_ONLYDIR;

/// The watcher's stop signal: a flag, and an eventfd that wakes a [`Changes::wait`].
#[derive(Debug)]
pub(crate) struct Stop {
    flag: AtomicBool,
    wake: Option<OwnedFd>,
}

impl Stop {
    pub(crate) fn new() -> Stop {
        // SAFETY: eventfd takes no pointers; a negative result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        Stop {
            flag: AtomicBool::new(false),
            // SAFETY: fd is a fresh descriptor that nothing else owns.
            wake: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }),
        }
    }

    /// Stops the watcher, waking it if it waits.
    pub(crate) fn stop(&self) {
        self.flag.store(true, Ordering::Release);
        if let Some(fd) = &self.wake {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to an eventfd we own; a
            // failure (the counter full) still leaves it readable, so it wakes.
            unsafe { libc::write(fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }

    pub(crate) fn stopped(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}

/// Changes below one directory tree, by inotify.
#[derive(Debug)]
pub(crate) struct Changes {
    inotify: Option<OwnedFd>,
    /// The watched directories, by watch descriptor.
    dirs: HashMap<i32, PathBuf>,
}

impl Changes {
    /// Watches each of `roots` (one per cgroup v1 hierarchy that holds limits) and
    /// every directory below them; without inotify (or without any of them) it
    /// watches nothing and [`Changes::wait`] only sleeps.
    pub(crate) fn below(roots: &[PathBuf]) -> Changes {
        // SAFETY: inotify_init1 takes no pointers; a negative result is checked.
        let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
        let mut changes = Changes {
            // SAFETY: fd is a fresh descriptor that nothing else owns.
            inotify: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }),
            dirs: HashMap::new(),
        };
        let mut watched = false;
        for root in roots {
            watched |= changes.add_tree(root);
        }
        if !watched {
            changes.inotify = None;
        }
        changes
    }

    /// Watches `dir` and the directories below it; false if `dir` cannot be watched.
    fn add_tree(&mut self, dir: &Path) -> bool {
        if !self.add(dir) {
            return false;
        }
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    self.add_tree(&entry.path());
                }
            }
        }
        true
    }

    fn add(&mut self, dir: &Path) -> bool {
        let (Some(fd), Ok(path)) = (&self.inotify, CString::new(dir.as_os_str().as_bytes())) else {
            return false;
        };
        // SAFETY: path is a NUL-terminated string that outlives the call.
        let wd = unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), MASK) };
        if wd < 0 {
            return false;
        }
        self.dirs.insert(wd, dir.to_path_buf());
        true
    }

    /// Waits until something changes below the root, `stop` is signalled, or
    /// `timeout` passes; new directories are watched from then on.
    pub(crate) fn wait(&mut self, stop: &Stop, timeout: Duration) {
        let Some(inotify) = self.inotify.as_ref().map(AsRawFd::as_raw_fd) else {
            std::thread::sleep(timeout);
            return;
        };
        let pollfd = |fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // Without an eventfd, stop is seen at the next timeout: poll ignores fd -1.
        let wake = stop.wake.as_ref().map_or(-1, AsRawFd::as_raw_fd);
        let mut fds = [pollfd(inotify), pollfd(wake)];
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: fds is a live array of fds.len() pollfd structures.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if ready > 0 && fds[0].revents & libc::POLLIN != 0 {
            self.drain(inotify);
        }
    }

    /// Reads the pending events, watching each directory made.
    fn drain(&mut self, inotify: i32) {
        // Aligned for inotify_event, as read(2) on an inotify descriptor requires.
        let mut buf = [0u64; 512];
        loop {
            // SAFETY: reads at most size_of_val(&buf) bytes into a live buffer.
            let n = unsafe {
                libc::read(
                    inotify,
                    buf.as_mut_ptr().cast(),
                    std::mem::size_of_val(&buf),
                )
            };
            let Ok(n) = usize::try_from(n) else { return };
            if n == 0 {
                return;
            }
            // SAFETY: u64s viewed as their n bytes, all initialised by read.
            let bytes = unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n) };
            let mut made = Vec::new();
            let header = std::mem::size_of::<libc::inotify_event>();
            let mut at = 0;
            while at + header <= n {
                // SAFETY: the kernel wrote a whole inotify_event at `at` (header bytes
                // checked); read_unaligned copes with any offset.
                let event: libc::inotify_event =
                    unsafe { std::ptr::read_unaligned(bytes[at..].as_ptr().cast()) };
                let len = event.len as usize;
                let name = bytes.get(at + header..at + header + len).unwrap_or(&[]);
                let name = &name[..name.iter().position(|&b| b == 0).unwrap_or(name.len())];
                if event.mask & libc::IN_CREATE != 0 && event.mask & libc::IN_ISDIR != 0 {
                    if let Some(dir) = self.dirs.get(&event.wd) {
                        made.push(dir.join(std::ffi::OsStr::from_bytes(name)));
                    }
                }
                if event.mask & libc::IN_IGNORED != 0 {
                    self.dirs.remove(&event.wd);
                }
                at += header + len;
            }
            for dir in made {
                self.add_tree(&dir);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::time::Instant;

    #[test]
    fn a_directory_made_or_a_file_written_below_the_root_wakes_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("instance");
        std::fs::create_dir(&root).unwrap();
        let mut changes = Changes::below(std::slice::from_ref(&root));
        assert!(changes.inotify.is_some());
        let stop = Stop::new();
        let long = Duration::from_secs(30);

        // A directory made two levels down: both levels are watched as they appear.
        std::fs::create_dir_all(root.join("lxc-x/payload")).unwrap();
        let t = Instant::now();
        changes.wait(&stop, long);
        assert!(t.elapsed() < long);
        // Events of the nested mkdir may have come with the first; a write into the
        // deepest directory wakes the wait once it is watched.
        changes.wait(&stop, Duration::from_millis(50));
        assert!(changes.dirs.values().any(|d| d.ends_with("lxc-x/payload")));
        std::fs::write(root.join("lxc-x/payload/cgroup.procs"), "42\n").unwrap();
        let t = Instant::now();
        changes.wait(&stop, long);
        assert!(t.elapsed() < long);
    }

    #[test]
    fn stop_wakes_a_wait_and_nothing_to_watch_only_sleeps() {
        let dir = tempfile::tempdir().unwrap();
        let mut changes = Changes::below(&[dir.path().to_path_buf()]);
        let stop = Arc::new(Stop::new());
        let stopper = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                stop.stop();
            })
        };
        let t = Instant::now();
        changes.wait(&stop, Duration::from_secs(30));
        assert!(t.elapsed() < Duration::from_secs(30));
        assert!(stop.stopped());
        stopper.join().unwrap();

        let mut none = Changes::below(&[dir.path().join("missing")]);
        assert!(none.inotify.is_none());
        let t = Instant::now();
        none.wait(&stop, Duration::from_millis(20));
        assert!(t.elapsed() >= Duration::from_millis(20));
    }
}
