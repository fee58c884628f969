//! Removing what Podman leaves: containers it lost track of ([`Podman::remove_orphans`]),
//! the conmon monitors a removal waits for, and everything [`Engine::ensure_ready`](crate::Engine::ensure_ready) did
//! ([`Podman::shutdown_report`]).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::tool::argv;
use crate::EngineError;

use super::network::{holds_reservations, NetState};
use super::{io_err, lock, Podman, ENGINE};

impl Podman {
    /// Removes a container Podman lost track of: when the `podman run` command is
    /// SIGKILLed while the OCI runtime creates the container, Podman forgets it
    /// (`podman ps -a` and `podman rm` do not see it) but conmon and the runtime's
    /// `init` stay, in `<parent>/libpod-<id>`. Everything below `parent` is the
    /// container's, so each such cgroup is handed to `<runtime> delete --force <id>`
    /// (which also drops the runtime's state) and whatever is left is killed and
    /// removed. Returns what was done.
    pub fn remove_orphans(&self, parent: &Path) -> Vec<String> {
        let h = &self.config.hierarchy;
        let rel = parent.strip_prefix("/").unwrap_or(parent);
        let Ok(below) = isolab_cgroups::list_below(h, rel) else {
            return Vec::new();
        };
        let mut done = Vec::new();
        let runtime = &self.effective_runtime().unwrap_or(self.runtime).program();
        for c in &below {
            let Some(id) = c
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("libpod-"))
            else {
                continue;
            };
            if !id.bytes().all(|b| b.is_ascii_hexdigit()) {
                continue;
            }
            if let Some(bin) = self.tools.which(runtime) {
                // Best effort: the kill below is the fallback.
                let _ = self.tools.run(&argv([
                    bin.display().to_string(),
                    "delete".into(),
                    "--force".into(),
                    id.to_owned(),
                ]));
                done.push(format!("{runtime} delete --force {id}"));
            }
        }
        for c in below {
            if let Ok(cg) = isolab_cgroups::Cgroup::open(h, &c) {
                if cg.remove().is_ok() {
                    done.push(format!("removed the cgroup {}", c.display()));
                }
            }
        }
        done
    }

    /// The pids of the conmon processes that monitor the container named `name`
    /// (`conmon … -n <name> …`), from the proc file system.
    pub(super) fn monitor_pids(&self, name: &str) -> Vec<u32> {
        let Ok(entries) = std::fs::read_dir(&self.config.proc) else {
            return Vec::new();
        };
        let mut pids = Vec::new();
        for e in entries.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(raw) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<&[u8]> = raw.split(|&b| b == 0).collect();
            let is_conmon = args
                .first()
                .is_some_and(|a| a.rsplit(|&b| b == b'/').next() == Some(b"conmon"));
            if is_conmon
                && args
                    .windows(2)
                    .any(|w| w[0] == b"-n" && w[1] == name.as_bytes())
            {
                pids.push(pid);
            }
        }
        pids
    }

    /// Waits up to `limit` for the container's conmon to exit (it outlives `podman
    /// rm` by a moment: it still runs Podman's cleanup command), then kills what is
    /// left so no process of the container survives its removal.
    pub(super) fn wait_for_monitors(&self, name: &str, limit: Duration) {
        let start = Instant::now();
        loop {
            let pids = self.monitor_pids(name);
            if pids.is_empty() {
                return;
            }
            if start.elapsed() >= limit {
                // Best effort, like the orphans' removal: `kill` (procps) may be
                // missing, and a conmon may have exited since it was listed.
                if let Some(kill) = self.tools.which("kill") {
                    for pid in pids {
                        let _ = self.tools.run(&argv([
                            kill.display().to_string(),
                            "-KILL".into(),
                            pid.to_string(),
                        ]));
                    }
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Undoes [`Engine::ensure_ready`](crate::Engine::ensure_ready) and reports one line per thing undone.
    pub fn shutdown_report(&self) -> Result<Vec<String>, EngineError> {
        // Run parents that were still in use when their runs ended.
        self.foreign.retry(&self.config.proc);
        let mut done = Vec::new();
        done.extend(
            self.hybrid_fix(Path::new("mount"))
                .release(&mut |controller, path| self.undo_mount(controller, path))?,
        );
        if let Some(state) = std::fs::read_to_string(self.net_file())
            .ok()
            .and_then(|t| serde_json::from_str::<NetState>(&t).ok())
        {
            done.extend(state.net.restore(
                ENGINE,
                &*self.tools,
                &self.config.proc,
                &self.config.sys,
                &self.config.state_dir,
            )?);
            let cni = &self.config.cni_state_dir;
            if !state.cni_state_existed && cni.exists() && !holds_reservations(cni) {
                std::fs::remove_dir_all(cni).map_err(io_err("remove", cni))?;
                done.push(format!("removed {}", cni.display()));
            }
            let file = self.net_file();
            std::fs::remove_file(&file).map_err(io_err("remove", &file))?;
        }
        *lock(&self.resolved) = None;
        Ok(done)
    }
}
