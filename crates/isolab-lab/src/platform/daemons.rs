//! Engine daemons in a host cpu pool (`host_cpus`): for a run of a cell with a
//! pool, the daemons of its platform's engine (dockerd, containerd and its shims,
//! LXC's monitor; [`isolab_engines::Capabilities::daemons`]) run on the pool's cpus
//! only, like the subject, its neighbours and the load generators, and get their
//! own cpus back when the run ends. Processes a confined daemon starts during the
//! run (a container's shim) inherit its affinity. Affinity is set on every thread
//! (`sched_setaffinity` on each task of `/proc/PID/task`), behind [`Affinity`] so
//! that the guard is tested without touching a process. While they are confined, a
//! record of their own cpus (`daemons-pid<PID>.json` in [`RECORD_DIR`]) lets
//! `isolab gc` give them back when the isolab that confined them was killed.

use std::io;
use std::path::{Path, PathBuf};

use isolab_cgroups::IdSet;

/// The host effects of confining processes: finding them and their threads, reading
/// and setting cpu affinity.
pub trait Affinity: Send + Sync {
    /// The pids and names of running processes whose name (`comm`, which the kernel
    /// cuts to 15 bytes) is one of `names` or a 15-byte cut of one.
    fn processes(&self, names: &[&str]) -> Vec<(u32, String)>;
    /// The thread ids of process `pid`.
    fn threads(&self, pid: u32) -> Vec<u32>;
    /// The cpus thread `tid` may run on.
    fn get(&self, tid: u32) -> io::Result<IdSet>;
    /// Lets thread `tid` run on `cpus` only.
    fn set(&self, tid: u32, cpus: &IdSet) -> io::Result<()>;
}

/// [`Affinity`] of this host, through `/proc` and the scheduler's system calls.
#[derive(Debug, Clone)]
pub struct RealAffinity {
    /// The proc file system (`/proc`).
    pub proc: PathBuf,
}

impl Default for RealAffinity {
    fn default() -> Self {
        RealAffinity {
            proc: PathBuf::from("/proc"),
        }
    }
}

/// Whether a process named `comm` is one of `names` (whose long names the kernel
/// cuts to 15 bytes).
fn named(comm: &str, names: &[&str]) -> bool {
    names
        .iter()
        .any(|n| *n == comm || (n.len() > 15 && n.as_bytes()[..15] == *comm.as_bytes()))
}

impl Affinity for RealAffinity {
    fn processes(&self, names: &[&str]) -> Vec<(u32, String)> {
        let Ok(entries) = std::fs::read_dir(&self.proc) else {
            return Vec::new();
        };
        let mut out: Vec<(u32, String)> = entries
            .flatten()
            .filter_map(|e| {
                let pid: u32 = e.file_name().to_str()?.parse().ok()?;
                let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
                let comm = comm.trim_end().to_owned();
                named(&comm, names).then_some((pid, comm))
            })
            .collect();
        out.sort_unstable();
        out
    }

    fn threads(&self, pid: u32) -> Vec<u32> {
        std::fs::read_dir(self.proc.join(pid.to_string()).join("task"))
            .map(|entries| {
                entries
                    .flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn get(&self, tid: u32) -> io::Result<IdSet> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: `set` is a cpu_set_t of the size passed.
        let rc = unsafe {
            libc::sched_getaffinity(tid as libc::pid_t, std::mem::size_of_val(&set), &mut set)
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        let max = 8 * std::mem::size_of_val(&set);
        // SAFETY: CPU_ISSET reads the set within its size.
        Ok((0..max)
            .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
            .map(|c| c as u32)
            .collect())
    }

    fn set(&self, tid: u32, cpus: &IdSet) -> io::Result<()> {
        // SAFETY: an all-zero cpu_set_t is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus.iter() {
            // SAFETY: CPU_SET ignores cpus beyond the set's size.
            unsafe { libc::CPU_SET(c as usize, &mut set) };
        }
        // SAFETY: `set` is a cpu_set_t of the size passed.
        let rc = unsafe {
            libc::sched_setaffinity(tid as libc::pid_t, std::mem::size_of_val(&set), &set)
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// Where confinements are recorded for `isolab gc`.
/// (A directory of its own: isolab-runtime reads every file of /run/isolab as a
/// container's state.)
pub const RECORD_DIR: &str = "/run/isolab/host-cpu-pools";

/// The record of process `pid`'s confinement in `dir`.
fn record_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("daemons-pid{pid}.json"))
}

/// Gives the threads recorded in `dir` by isolab processes that are no longer
/// `alive` their own cpus back, and removes the records. Returns what was restored.
pub fn gc(dir: &Path, affinity: &dyn Affinity, alive: impl Fn(u32) -> bool) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("daemons-pid")
            .and_then(|r| r.strip_suffix(".json"))
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if alive(pid) {
            continue;
        }
        let saved: Vec<(u32, String)> = std::fs::read_to_string(entry.path())
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let mut restored = 0;
        for (tid, cpus) in saved {
            if let Ok(cpus) = cpus.parse::<IdSet>() {
                restored += usize::from(affinity.set(tid, &cpus).is_ok());
            }
        }
        let _ = std::fs::remove_file(entry.path());
        out.push(format!(
            "cpu affinity of {restored} daemon threads confined by killed isolab pid {pid}"
        ));
    }
    out
}

/// Daemons confined to a pool's cpus until it is dropped, when every thread gets its
/// own cpus back (threads that ended meanwhile are skipped).
pub struct ConfinedDaemons {
    /// How the threads were confined; none when nothing was.
    affinity: Option<Box<dyn Affinity>>,
    saved: Vec<(u32, IdSet)>,
    record: Option<PathBuf>,
    /// The daemons confined, `NAME[PID]` each, for the run's data.
    pub confined: Vec<String>,
}

impl std::fmt::Debug for ConfinedDaemons {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfinedDaemons")
            .field("saved", &self.saved)
            .field("confined", &self.confined)
            .finish()
    }
}

impl ConfinedDaemons {
    /// Nothing confined (a cell without a pool, or an engine without daemons).
    pub fn none() -> ConfinedDaemons {
        ConfinedDaemons {
            affinity: None,
            saved: Vec::new(),
            record: None,
            confined: Vec::new(),
        }
    }

    /// Confines every running process named one of `names` (all its threads) to
    /// `cpus`, recording their own cpus in `record_dir` until the guard goes. A
    /// thread that ends meanwhile is skipped; one whose affinity cannot be set is an
    /// error naming it, after the threads confined so far got theirs back.
    pub fn confine(
        affinity: Box<dyn Affinity>,
        names: &[&str],
        cpus: &IdSet,
        record_dir: &Path,
    ) -> Result<ConfinedDaemons, String> {
        if names.is_empty() {
            return Ok(ConfinedDaemons::none());
        }
        let mut guard = ConfinedDaemons::none();
        // Every thread's own cpus, recorded once before any changes, so that gc can
        // undo them after a kill (restoring one that was not changed is harmless).
        let mut threads = Vec::new();
        for (pid, name) in affinity.processes(names) {
            for tid in affinity.threads(pid) {
                if let Ok(own) = affinity.get(tid) {
                    guard.saved.push((tid, own));
                    threads.push((pid, name.clone(), tid));
                }
            }
            guard.confined.push(format!("{name}[{pid}]"));
        }
        if guard.saved.is_empty() {
            return Ok(guard);
        }
        guard.write_record(record_dir)?;
        // From here the guard restores what was saved, also on an error below.
        let affinity = &**guard.affinity.insert(affinity);
        for (pid, name, tid) in threads {
            match affinity.set(tid, cpus) {
                // A thread that ended meanwhile has nothing to confine.
                Ok(()) => {}
                Err(e) if e.raw_os_error() == Some(libc::ESRCH) => {}
                Err(e) => {
                    return Err(format!(
                        "cannot confine {name} (pid {pid}, thread {tid}) to the host cpu pool {cpus}: {e}; run isolab as root, or leave host_cpus out of the matrix"
                    ));
                }
            }
        }
        Ok(guard)
    }

    /// Writes the threads' own cpus to this process's record in `dir`.
    fn write_record(&mut self, dir: &Path) -> Result<(), String> {
        let path = record_path(dir, std::process::id());
        let saved: Vec<(u32, String)> = self
            .saved
            .iter()
            .map(|(t, c)| (*t, c.to_string()))
            .collect();
        std::fs::create_dir_all(dir)
            .and_then(|()| std::fs::write(&path, serde_json::json!(saved).to_string()))
            .map_err(|e| {
                format!(
                    "cannot record the daemons confined to the host cpu pool in {}: {e}",
                    path.display()
                )
            })?;
        self.record = Some(path);
        Ok(())
    }
}

impl Drop for ConfinedDaemons {
    fn drop(&mut self) {
        if let Some(affinity) = &self.affinity {
            for (tid, own) in self.saved.drain(..) {
                // A thread that ended has nothing to restore.
                let _ = affinity.set(tid, &own);
            }
        }
        if let Some(path) = self.record.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    use super::*;

    /// Processes with threads and affinities in memory; `refuse` makes `set` fail.
    #[derive(Clone, Default)]
    struct FakeAffinity {
        procs: Vec<(u32, String, Vec<u32>)>,
        cpus: Arc<Mutex<BTreeMap<u32, IdSet>>>,
        refuse: Option<u32>,
    }

    impl Affinity for FakeAffinity {
        fn processes(&self, names: &[&str]) -> Vec<(u32, String)> {
            self.procs
                .iter()
                .filter(|(_, n, _)| named(n, names))
                .map(|(p, n, _)| (*p, n.clone()))
                .collect()
        }
        fn threads(&self, pid: u32) -> Vec<u32> {
            self.procs
                .iter()
                .find(|(p, _, _)| *p == pid)
                .map(|(_, _, t)| t.clone())
                .unwrap_or_default()
        }
        fn get(&self, tid: u32) -> io::Result<IdSet> {
            self.cpus
                .lock()
                .unwrap()
                .get(&tid)
                .cloned()
                .ok_or_else(|| io::Error::from_raw_os_error(libc::ESRCH))
        }
        fn set(&self, tid: u32, cpus: &IdSet) -> io::Result<()> {
            if self.refuse == Some(tid) {
                return Err(io::Error::from_raw_os_error(libc::EPERM));
            }
            self.cpus.lock().unwrap().insert(tid, cpus.clone());
            Ok(())
        }
    }

    fn fake() -> FakeAffinity {
        let all: IdSet = "0-3".parse().unwrap();
        let f = FakeAffinity {
            procs: vec![
                (10, "dockerd".into(), vec![10, 11]),
                (20, "containerd-shim".into(), vec![20]),
                (30, "sshd".into(), vec![30]),
            ],
            ..FakeAffinity::default()
        };
        for tid in [10, 11, 20, 30] {
            f.cpus.lock().unwrap().insert(tid, all.clone());
        }
        f
    }

    #[test]
    fn daemons_run_on_the_pool_until_the_guard_goes() {
        let f = fake();
        let pool: IdSet = "3".parse().unwrap();
        let names = ["dockerd", "containerd-shim-runc-v2"];
        let dir = tempfile::tempdir().unwrap();
        let guard =
            ConfinedDaemons::confine(Box::new(f.clone()), &names, &pool, dir.path()).unwrap();
        assert_eq!(guard.confined, ["dockerd[10]", "containerd-shim[20]"]);
        let record = record_path(dir.path(), std::process::id());
        assert!(record.exists());
        let now = |tid| f.cpus.lock().unwrap()[&tid].to_string();
        assert_eq!(
            (now(10), now(11), now(20), now(30)),
            ("3".into(), "3".into(), "3".into(), "0-3".into())
        );
        drop(guard);
        assert_eq!(
            (now(10), now(11), now(20)),
            ("0-3".into(), "0-3".into(), "0-3".into())
        );
        assert!(!record.exists(), "the record goes with the guard");
    }

    #[test]
    fn gc_gives_the_daemons_of_a_killed_isolab_their_cpus_back() {
        let f = fake();
        let dir = tempfile::tempdir().unwrap();
        let pool = "3".parse().unwrap();
        let guard =
            ConfinedDaemons::confine(Box::new(f.clone()), &["dockerd"], &pool, dir.path()).unwrap();
        // As after `kill -9`: the guard never drops.
        std::mem::forget(guard);
        assert_eq!(f.cpus.lock().unwrap()[&10].to_string(), "3");
        assert!(
            gc(dir.path(), &f, |_| true).is_empty(),
            "its isolab still runs"
        );
        let restored = gc(dir.path(), &f, |_| false);
        assert_eq!(restored.len(), 1, "{restored:?}");
        assert!(
            restored[0].starts_with("cpu affinity of 2 daemon threads"),
            "{restored:?}"
        );
        assert_eq!(f.cpus.lock().unwrap()[&10].to_string(), "0-3");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_refused_thread_is_an_error_and_the_others_get_their_cpus_back() {
        let f = FakeAffinity {
            refuse: Some(11),
            ..fake()
        };
        let dir = tempfile::tempdir().unwrap();
        let pool = "3".parse().unwrap();
        let err = ConfinedDaemons::confine(Box::new(f.clone()), &["dockerd"], &pool, dir.path())
            .unwrap_err();
        assert!(
            err.contains("cannot confine dockerd (pid 10, thread 11)"),
            "{err}"
        );
        assert_eq!(f.cpus.lock().unwrap()[&10].to_string(), "0-3");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn real_affinity_reads_and_sets_this_thread() {
        let a = RealAffinity::default();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        let own = a.get(tid).unwrap();
        assert!(!own.is_empty());
        let one: IdSet = std::iter::once(*own.iter().next().unwrap()).collect();
        a.set(tid, &one).unwrap();
        assert_eq!(a.get(tid).unwrap(), one);
        a.set(tid, &own).unwrap();
        assert!(a.threads(std::process::id()).contains(&tid));
        let me = std::fs::read_to_string("/proc/self/comm").unwrap();
        assert!(a
            .processes(&[me.trim_end()])
            .iter()
            .any(|(p, _)| *p == std::process::id()));
    }
}
