//! Test doubles shared by the engines' unit tests.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use crate::host::Host;
use crate::tool::{Output, Tools};
use crate::{NetworkMode, PreparedImage, RunRequest};

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A fake [`Tools`]: records every argv and answers the first canned reply
/// whose pattern the joined command line contains (a reply given once first, and
/// only once).
#[derive(Default)]
pub(crate) struct Fake {
    pub calls: Mutex<Vec<Vec<String>>>,
    pub replies: Mutex<Vec<(String, Output)>>,
    pub once: Mutex<Vec<(String, Output)>>,
    pub missing: Vec<String>,
}

impl Fake {
    pub fn reply(&self, pattern: &str, status: i32, stdout: &str, stderr: &str) {
        lock(&self.replies).push((
            pattern.to_owned(),
            Output {
                status,
                stdout: stdout.to_owned(),
                stderr: stderr.to_owned(),
            },
        ));
    }

    /// Like [`Fake::reply`], for the first matching call only.
    pub fn reply_once(&self, pattern: &str, status: i32, stdout: &str, stderr: &str) {
        lock(&self.once).push((
            pattern.to_owned(),
            Output {
                status,
                stdout: stdout.to_owned(),
                stderr: stderr.to_owned(),
            },
        ));
    }

    pub fn calls(&self) -> Vec<String> {
        lock(&self.calls).iter().map(|c| c.join(" ")).collect()
    }
}

impl Tools for Fake {
    fn run(&self, argv: &[String]) -> std::io::Result<Output> {
        lock(&self.calls).push(argv.to_vec());
        let line = argv.join(" ");
        {
            let mut once = lock(&self.once);
            if let Some(i) = once.iter().position(|(p, _)| line.contains(p.as_str())) {
                return Ok(once.remove(i).1);
            }
        }
        Ok(lock(&self.replies)
            .iter()
            .find(|(p, _)| line.contains(p.as_str()))
            .map(|(_, o)| o.clone())
            .unwrap_or(Output {
                status: 0,
                stdout: String::new(),
                stderr: String::new(),
            }))
    }

    fn which(&self, program: &str) -> Option<PathBuf> {
        if self.missing.iter().any(|m| m == program) {
            return None;
        }
        Some(if program.contains('/') {
            PathBuf::from(program)
        } else {
            PathBuf::from("/usr/bin").join(program)
        })
    }
}

/// What a [`FakeTools`] does to the fake host when it runs a command (the kernel's part
/// of a `mount` or `umount`).
pub type Effect = Box<dyn FnMut() + Send>;

/// Records command lines; answers by the program's file name and first argument.
#[derive(Default)]
pub struct FakeTools {
    pub calls: Mutex<Vec<Vec<String>>>,
    pub answers: Mutex<HashMap<String, Output>>,
    pub missing: Vec<String>,
    /// Effects by the command line's beginning, each run once, at its first match.
    pub effects: Mutex<Vec<(String, Effect)>>,
}

impl FakeTools {
    pub fn answer(&self, key: &str, status: i32, stdout: &str) {
        self.answers.lock().unwrap().insert(
            key.to_owned(),
            Output {
                status,
                stdout: stdout.to_owned(),
                stderr: if status == 0 {
                    String::new()
                } else {
                    "boom".into()
                },
            },
        );
    }

    /// Runs `effect` when a command line beginning with `prefix` is run (once).
    pub fn on_run(&self, prefix: &str, effect: impl FnMut() + Send + 'static) {
        self.effects
            .lock()
            .unwrap()
            .push((prefix.to_owned(), Box::new(effect)));
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .map(|c| c.join(" "))
            .collect()
    }
}

impl Tools for FakeTools {
    fn run(&self, argv: &[String]) -> io::Result<Output> {
        self.calls.lock().unwrap().push(argv.to_vec());
        let line = argv.join(" ");
        let mut effects = self.effects.lock().unwrap();
        if let Some(i) = effects
            .iter()
            .position(|(p, _)| line.starts_with(p.as_str()))
        {
            let (_, mut effect) = effects.remove(i);
            effect();
        }
        drop(effects);
        let program = Path::new(&argv[0])
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let key = format!(
            "{program} {}",
            argv.get(1).map(String::as_str).unwrap_or("")
        );
        Ok(self
            .answers
            .lock()
            .unwrap()
            .get(&key)
            .cloned()
            .unwrap_or(Output {
                status: 0,
                stdout: String::new(),
                stderr: String::new(),
            }))
    }

    fn which(&self, program: &str) -> Option<PathBuf> {
        (!self.missing.iter().any(|m| m == program))
            .then(|| PathBuf::from("/usr/bin").join(program))
    }
}

/// Records host effects; rmdir removes a fake cgroup directory with its files.
#[derive(Default)]
pub struct FakeHost {
    pub calls: Mutex<Vec<String>>,
}

impl FakeHost {
    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap().clone()
    }
}

impl Host for FakeHost {
    fn mount_tmpfs(&self, target: &Path) -> io::Result<()> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("tmpfs {}", target.display()));
        Ok(())
    }
    fn mount_overlay(
        &self,
        lower: &Path,
        upper: &Path,
        work: &Path,
        target: &Path,
    ) -> io::Result<()> {
        self.calls.lock().unwrap().push(format!(
            "overlay {} {} {} {}",
            lower.display(),
            upper.display(),
            work.display(),
            target.display()
        ));
        Ok(())
    }
    fn unmount(&self, target: &Path) -> io::Result<bool> {
        self.calls
            .lock()
            .unwrap()
            .push(format!("umount {}", target.display()));
        Ok(false)
    }
    fn kill(&self, pid: u32) -> io::Result<()> {
        self.calls.lock().unwrap().push(format!("kill {pid}"));
        Ok(())
    }
    /// Creates the directory with the (empty) interface files the kernel would put
    /// there, of every controller.
    fn mkdir(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir(path)?;
        for file in CGROUP_FILES {
            std::fs::write(path.join(file), "")?;
        }
        Ok(())
    }
    fn rmdir(&self, path: &Path) -> io::Result<()> {
        if std::fs::read_dir(path)?
            .flatten()
            .any(|e| e.path().is_dir())
        {
            return Err(io::Error::from_raw_os_error(libc::ENOTEMPTY));
        }
        std::fs::remove_dir_all(path)?;
        self.calls
            .lock()
            .unwrap()
            .push(format!("rmdir {}", path.display()));
        Ok(())
    }
}

/// The interface files [`FakeHost::mkdir`] creates: those `isolab_cgroups` writes
/// when it creates a cgroup and applies limits (v1 and v2).
pub const CGROUP_FILES: [&str; 18] = [
    "cgroup.procs",
    "cgroup.subtree_control",
    "cpu.cfs_period_us",
    "cpu.cfs_quota_us",
    "cpu.max",
    "cpuset.cpus",
    "cpuset.mems",
    "memory.limit_in_bytes",
    "memory.memsw.limit_in_bytes",
    "memory.max",
    "memory.swap.max",
    "pids.max",
    "io.max",
    "blkio.throttle.read_bps_device",
    "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device",
    "blkio.throttle.write_iops_device",
    "cgroup.controllers",
];

/// A fake v1 host in `root`: `root/cg/<ctrl>` hierarchies, a mountinfo file
/// listing them plus `extra` lines, and a workdir.
pub struct FakeSystem {
    pub root: PathBuf,
    pub mountinfo: PathBuf,
    pub workdir: PathBuf,
}

pub const V1_CONTROLLERS: [&str; 9] = [
    "cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "freezer", "devices", "systemd",
];

impl FakeSystem {
    pub fn v1(root: &Path, extra: &str) -> FakeSystem {
        let mut info = String::from("22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n");
        info.push_str(&format!(
            "30 22 0:26 / {} rw,nosuid,nodev,noexec - tmpfs tmpfs rw,mode=755\n",
            root.join("cg").display()
        ));
        for (i, c) in V1_CONTROLLERS.iter().enumerate() {
            let dir = root.join("cg").join(c);
            std::fs::create_dir_all(&dir).unwrap();
            let opt = if *c == "systemd" {
                "name=systemd".to_string()
            } else {
                c.to_string()
            };
            info.push_str(&format!(
                "{} 30 0:{} / {} rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,{opt}\n",
                31 + i,
                40 + i,
                dir.display()
            ));
        }
        std::fs::create_dir_all(root.join("cg/unified")).unwrap();
        info.push_str(&format!(
            "50 30 0:60 / {} rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n",
            root.join("cg/unified").display()
        ));
        info.push_str(extra);
        FakeSystem::with_mountinfo(root, &info)
    }

    pub fn v2(root: &Path) -> FakeSystem {
        let cg = root.join("cg");
        std::fs::create_dir_all(&cg).unwrap();
        let info = format!(
                "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n30 22 0:26 / {} rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw\n",
                cg.display()
            );
        FakeSystem::with_mountinfo(root, &info)
    }

    /// A fake system under `root` whose mount table is `info`, with a work directory.
    fn with_mountinfo(root: &Path, info: &str) -> FakeSystem {
        let mountinfo = root.join("mountinfo");
        std::fs::write(&mountinfo, info).unwrap();
        let workdir = root.join("work");
        std::fs::create_dir_all(&workdir).unwrap();
        FakeSystem {
            root: root.to_path_buf(),
            mountinfo,
            workdir,
        }
    }

    pub fn cg(&self, rel: &str) -> PathBuf {
        self.root.join("cg").join(rel)
    }

    /// Creates `rel` in the lab's hierarchies (those isolab_cgroups uses).
    pub fn lab_parent(&self, rel: &str) {
        for c in [
            "cpu", "cpuacct", "cpuset", "memory", "pids", "blkio", "freezer", "unified",
        ] {
            std::fs::create_dir_all(self.cg(c).join(rel)).unwrap();
        }
    }
}

/// A request to run `sysbench cpu run` as `isolab-t1-c0-r1` in `workdir`, network
/// `none`, no limits, below the lab's `/isolab/t1/c0-r1`, with `FOO=bar`.
pub fn request(workdir: &Path) -> RunRequest {
    RunRequest {
        id: "isolab-t1-c0-r1".parse().unwrap(),
        argv: vec!["sysbench".into(), "cpu".into(), "run".into()],
        workdir: workdir.to_path_buf(),
        network: NetworkMode::None,
        limits: isolab_cgroups::Limits::default(),
        cgroup_parent: PathBuf::from("/isolab/t1/c0-r1"),
        env: vec!["FOO=bar".into()],
    }
}

/// The image directory `/images/bench` as a prepared image.
pub fn image() -> PreparedImage {
    PreparedImage {
        reference: "/images/bench".into(),
        digest: "sha256:x".into(),
        source: "/images/bench".into(),
    }
}
