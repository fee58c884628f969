//! A one-node Slurm cluster for tests (feature `testing`): MUNGE and Slurm's daemons from
//! Debian's `munge`, `slurmctld` and `slurmd` packages, with their key, configuration,
//! state, sockets and logs in a temporary directory, on free loopback ports. The node is
//! this host. [`SlurmCluster`] stops the daemons and removes the directory when dropped,
//! also when the test fails. Clients find the cluster through `SLURM_CONF`
//! ([`SlurmCluster::env`]). Needs root (slurmd starts jobs as their users).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A one-node Slurm cluster, stopped and removed on drop.
pub struct SlurmCluster {
    dir: tempfile::TempDir,
    daemons: Vec<(&'static str, Child)>,
    node: String,
}

impl std::fmt::Debug for SlurmCluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlurmCluster")
            .field("dir", &self.dir.path())
            .field("node", &self.node)
            .finish()
    }
}

fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))
}

/// `program` under /usr/sbin or /usr/bin, or what to install.
fn program(name: &str, package: &str) -> Result<PathBuf, String> {
    ["/usr/sbin", "/usr/bin", "/sbin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .ok_or_else(|| format!("{name} is missing: apt-get install {package}"))
}

impl SlurmCluster {
    /// Writes the configuration and starts munged, slurmctld and slurmd, then waits until
    /// the node is idle.
    pub fn start() -> Result<SlurmCluster, String> {
        let munged = program("munged", "munge")?;
        let slurmctld = program("slurmctld", "slurmctld")?;
        let slurmd = program("slurmd", "slurmd")?;
        let node = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map_err(|e| format!("hostname: {e}"))?
            .trim()
            .to_owned();
        let dir = tempfile::Builder::new()
            .prefix("isolab-slurm-")
            .tempdir()
            .map_err(|e| format!("temporary directory: {e}"))?;
        let d = dir.path();
        for sub in ["ctld", "spool"] {
            std::fs::create_dir(d.join(sub)).map_err(|e| format!("{sub}: {e}"))?;
        }
        // MUNGE's key: 1 KiB of random bytes, readable by its owner only.
        let key = random_bytes(1024)?;
        let key_path = d.join("munge.key");
        std::fs::write(&key_path, key).map_err(|e| format!("munge key: {e}"))?;
        set_mode(&key_path, 0o600)?;
        set_mode(d, 0o755)?;
        let socket = d.join("munge.socket");
        let (ctld_port, slurmd_port) = (free_port()?, free_port()?);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let conf = format!(
            "ClusterName=isolab-test\n\
             SlurmctldHost={node}(127.0.0.1)\n\
             SlurmctldPort={ctld_port}\n\
             SlurmdPort={slurmd_port}\n\
             AuthType=auth/munge\n\
             AuthInfo=socket={socket}\n\
             CredType=cred/munge\n\
             SlurmUser=root\n\
             SlurmdUser=root\n\
             StateSaveLocation={d}/ctld\n\
             SlurmdSpoolDir={d}/spool\n\
             SlurmctldPidFile={d}/slurmctld.pid\n\
             SlurmdPidFile={d}/slurmd.pid\n\
             SlurmctldLogFile={d}/slurmctld.log\n\
             SlurmdLogFile={d}/slurmd.log\n\
             ProctrackType=proctrack/linuxproc\n\
             TaskPlugin=task/none\n\
             JobAcctGatherType=jobacct_gather/none\n\
             AccountingStorageType=accounting_storage/none\n\
             JobCompType=jobcomp/none\n\
             SchedulerType=sched/builtin\n\
             SelectType=select/cons_tres\n\
             SelectTypeParameters=CR_Core\n\
             ReturnToService=2\n\
             MpiDefault=none\n\
             NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN\n\
             PartitionName=isolab Nodes={node} Default=YES MaxTime=INFINITE State=UP\n",
            socket = socket.display(),
            d = d.display(),
        );
        let conf_path = d.join("slurm.conf");
        std::fs::write(&conf_path, conf).map_err(|e| format!("slurm.conf: {e}"))?;

        let mut cluster = SlurmCluster {
            dir,
            daemons: Vec::new(),
            node,
        };
        let d = cluster.dir.path().to_owned();
        cluster.spawn(
            "munged",
            Command::new(munged)
                .arg("--foreground")
                .arg("--force")
                .arg(format!("--socket={}", socket.display()))
                .arg(format!("--key-file={}", key_path.display()))
                .arg(format!("--pid-file={}", d.join("munged.pid").display()))
                .arg(format!("--log-file={}", d.join("munged.log").display()))
                .arg(format!("--seed-file={}", d.join("munged.seed").display())),
        )?;
        wait_for(|| socket.exists(), "munged's socket", &d)?;
        cluster.spawn(
            "slurmctld",
            Command::new(slurmctld)
                .args(["-D", "-i", "-f"])
                .arg(&conf_path)
                .env("SLURM_CONF", &conf_path),
        )?;
        cluster.spawn(
            "slurmd",
            Command::new(slurmd)
                .args(["-D", "-f"])
                .arg(&conf_path)
                .env("SLURM_CONF", &conf_path),
        )?;
        let node = cluster.node.clone();
        let idle = || {
            Command::new("sinfo")
                .args(["--noheader", "--format=%T", "--nodes"])
                .arg(&node)
                .env("SLURM_CONF", &conf_path)
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "idle")
        };
        wait_for(idle, "the node to be idle", &d)?;
        Ok(cluster)
    }

    fn spawn(&mut self, name: &'static str, command: &mut Command) -> Result<(), String> {
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {name}: {e}"))?;
        self.daemons.push((name, child));
        Ok(())
    }

    /// The environment a Slurm client (and isolab) needs to use this cluster.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![(
            "SLURM_CONF".to_owned(),
            self.dir.path().join("slurm.conf").display().to_string(),
        )]
    }

    /// The partition jobs go to.
    pub fn partition(&self) -> &str {
        "isolab"
    }

    /// The node's name (this host's).
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The daemons' logs, for a failing test's message.
    pub fn logs(&self) -> String {
        ["munged.log", "slurmctld.log", "slurmd.log"]
            .iter()
            .map(|f| {
                let text = std::fs::read_to_string(self.dir.path().join(f)).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(30).collect();
                format!(
                    "--- {f}\n{}",
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        // slurmd first (it ends its jobs' steps), then the controller, then MUNGE.
        while let Some((name, mut child)) = self.daemons.pop() {
            let pid = child.id() as libc::pid_t;
            // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) => break,
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50))
                    }
                    _ => {
                        eprintln!("{name} did not stop on SIGTERM: killing it");
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                }
            }
        }
    }
}

/// Waits up to 30 s for `ready`.
fn wait_for(ready: impl Fn() -> bool, what: &str, dir: &Path) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready() {
        if Instant::now() > deadline {
            let logs: Vec<String> = ["munged.log", "slurmctld.log", "slurmd.log"]
                .iter()
                .map(|f| std::fs::read_to_string(dir.join(f)).unwrap_or_default())
                .collect();
            return Err(format!(
                "timed out waiting for {what}:\n{}",
                logs.join("\n")
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| format!("chmod {}: {e}", path.display()))
}

/// `n` random bytes from the kernel.
fn random_bytes(n: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| format!("/dev/urandom: {e}"))?;
    Ok(bytes)
}
