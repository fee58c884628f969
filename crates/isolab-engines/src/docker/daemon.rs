//! Docker's daemon, when isolab runs its own: its state file, a stale pidfile or socket
//! cleared, `dockerd` started with isolab's flags and waited for, stopped again, and the
//! host's netfilter rules and `ip_forward` put back as they were before it started.

use std::fs::OpenOptions;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{lock, process_is, Conn, DaemonState, Docker, ENGINE};
use crate::host_net::HostNetSnapshot;
use crate::mounts::{mounts_below, mounts_of};
use crate::tool::{argv, require, run_ok, tail};
use crate::EngineError;

impl Docker {
    pub(super) fn read_state(&self) -> Option<DaemonState> {
        let text = std::fs::read_to_string(self.config.state_file()).ok()?;
        serde_json::from_str(&text).ok()
    }

    pub(super) fn write_state(&self, state: &DaemonState) -> Result<(), EngineError> {
        let file = self.config.state_file();
        let text = serde_json::to_string_pretty(state).unwrap_or_default();
        std::fs::write(&file, text).map_err(|source| EngineError::Io {
            engine: ENGINE,
            action: "write the daemon state",
            path: file,
            source,
        })
    }

    pub(super) fn pid_from_file(&self) -> Option<u32> {
        std::fs::read_to_string(self.config.pidfile())
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Removes a pidfile and socket left by a daemon that is gone, and unmounts what
    /// it left mounted.
    pub(super) fn clear_stale(&self) -> Result<(), EngineError> {
        let pid = self.pid_from_file();
        if pid.is_some_and(|p| process_is(&self.config.proc, p, "dockerd")) {
            return Ok(());
        }
        for f in [self.config.pidfile(), self.config.socket()] {
            match std::fs::remove_file(&f) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(source) => {
                    return Err(EngineError::Io {
                        engine: ENGINE,
                        action: "remove the stale file",
                        path: f,
                        source,
                    })
                }
            }
        }
        self.unmount_leftovers()?;
        Ok(())
    }

    pub(super) fn unmount_leftovers(&self) -> Result<Vec<String>, EngineError> {
        let mounts = mounts_of(&self.config.proc);
        let exec = self.config.exec_root();
        let mut done = Vec::new();
        for m in mounts_below(&mounts, &[&self.config.data_root, &exec]) {
            let umount = require(&*self.tools, ENGINE, "umount", "mount")?;
            run_ok(
                &*self.tools,
                ENGINE,
                &argv([
                    umount.display().to_string(),
                    "-l".into(),
                    m.display().to_string(),
                ]),
            )?;
            done.push(format!("unmounted {}", m.display()));
        }
        Ok(done)
    }

    pub(super) fn start_daemon(&self) -> Result<Conn, EngineError> {
        let dockerd = require(&*self.tools, ENGINE, "dockerd", "docker.io")?;
        for dir in [
            self.config.run_dir.clone(),
            self.config.data_root.clone(),
            self.config
                .log_file
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default(),
        ] {
            if dir.as_os_str().is_empty() {
                continue;
            }
            std::fs::create_dir_all(&dir).map_err(|source| EngineError::Io {
                engine: ENGINE,
                action: "create the directory",
                path: dir.clone(),
                source,
            })?;
        }
        self.clear_stale()?;
        // A snapshot from an earlier start whose daemon died is older, hence right.
        let mut state = match self.read_state() {
            Some(s) => s,
            None => DaemonState {
                pid: None,
                net: HostNetSnapshot::take(
                    &*self.tools,
                    &self.config.proc,
                    &self.config.sys,
                    "docker0",
                    &["DOCKER", "docker0", "172.17."],
                ),
            },
        };
        self.write_state(&state)?;
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.config.log_file)
            .map_err(|source| EngineError::Io {
                engine: ENGINE,
                action: "open the daemon log",
                path: self.config.log_file.clone(),
                source,
            })?;
        let log2 = log.try_clone().map_err(|source| EngineError::Io {
            engine: ENGINE,
            action: "open the daemon log",
            path: self.config.log_file.clone(),
            source,
        })?;
        let args = self.config.dockerd_argv(&dockerd);
        let child = Command::new(&args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .process_group(0)
            .spawn()
            .map_err(|e| EngineError::Command {
                engine: ENGINE,
                command: args.join(" "),
                status: "not started".into(),
                stderr: e.to_string(),
            })?;
        state.pid = Some(child.id());
        self.write_state(&state)?;
        *lock(&self.child) = Some(child);
        let start = Instant::now();
        loop {
            if let Some(c) = self.connect(&self.config.socket(), true)? {
                return Ok(c);
            }
            let exited = lock(&self.child)
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if exited.is_some() || start.elapsed() > self.config.ready_timeout {
                let log = std::fs::read_to_string(&self.config.log_file).unwrap_or_default();
                let waited_s = start.elapsed().as_secs();
                if exited.is_none() {
                    // Best effort: the daemon's readiness failure is the error to report.
                    let _ = self.stop_daemon();
                    let _ = self.undo_host_changes();
                }
                return Err(EngineError::DaemonNotReady {
                    engine: ENGINE,
                    socket: self.config.socket(),
                    waited_s,
                    log: tail(&log, 2000),
                });
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub(super) fn stop_daemon(&self) -> Result<Vec<String>, EngineError> {
        let mut done = Vec::new();
        let pid = self
            .read_state()
            .and_then(|s| s.pid)
            .or_else(|| self.pid_from_file());
        let mut child = lock(&self.child).take();
        let Some(pid) = pid.or(child.as_ref().map(Child::id)) else {
            return Ok(done);
        };
        let alive = |child: &mut Option<Child>| match child {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => process_is(&self.config.proc, pid, "dockerd"),
        };
        if !alive(&mut child) {
            return Ok(done);
        }
        let kill = require(&*self.tools, ENGINE, "kill", "procps")?;
        for (signal, wait) in [
            ("-TERM", self.config.stop_timeout),
            ("-KILL", Duration::from_secs(5)),
        ] {
            // The process may exit between the check and the signal.
            let _ = self.tools.run(&argv([
                kill.display().to_string(),
                signal.into(),
                pid.to_string(),
            ]));
            let start = Instant::now();
            while alive(&mut child) && start.elapsed() < wait {
                std::thread::sleep(Duration::from_millis(100));
            }
            if !alive(&mut child) {
                done.push(format!("stopped dockerd {pid} with SIG{}", &signal[1..]));
                return Ok(done);
            }
        }
        Err(EngineError::Unexpected {
            engine: ENGINE,
            command: format!("kill -KILL {pid}"),
            detail: "dockerd did not exit; kill it by hand and run isolab gc".into(),
        })
    }

    /// Everything after the daemon stopped: mounts, netfilter, ip_forward, bridge,
    /// isolab's files.
    pub(super) fn undo_host_changes(&self) -> Result<Vec<String>, EngineError> {
        let mut done = self.unmount_leftovers()?;
        if let Some(state) = self.read_state() {
            done.extend(state.net.restore(
                ENGINE,
                &*self.tools,
                &self.config.proc,
                &self.config.sys,
                &self.config.run_dir,
            )?);
        }
        for f in [
            self.config.state_file(),
            self.config.pidfile(),
            self.config.socket(),
        ] {
            // Best effort: missing files are fine, and a leftover is harmless.
            let _ = std::fs::remove_file(f);
        }
        Ok(done)
    }

    /// Stops the daemon isolab started and restores the host; returns one line per
    /// thing undone (what [`Engine::shutdown`] does, with a report).
    pub fn shutdown_report(&self) -> Result<Vec<String>, EngineError> {
        let done = self.stop_and_undo();
        // Run parents that were still in use when their runs ended: with the daemon
        // stopped, their containers are gone.
        self.foreign.retry(&self.config.proc);
        done
    }

    pub(super) fn stop_and_undo(&self) -> Result<Vec<String>, EngineError> {
        let mut conn = lock(&self.conn);
        let ours = conn.as_ref().map(|c| c.ours);
        if ours == Some(false) {
            *conn = None;
            return Ok(Vec::new());
        }
        if self.read_state().is_none() && lock(&self.child).is_none() {
            *conn = None;
            return Ok(Vec::new());
        }
        let mut done = self.stop_daemon()?;
        done.extend(self.undo_host_changes()?);
        *conn = None;
        Ok(done)
    }
}
