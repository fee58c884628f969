//! Checking a VM's configuration and its command before anything is made: guest
//! directories, the workdir, environment, inner engine, limits.

use std::path::Path;

use crate::agent::{DEFAULT_PATH, GUEST_DIR};
use crate::error::VmError;

use super::{GuestCommand, InnerEngine, VmConfig};

/// Guest paths where the VM's own things live; the workdir must not be among them.
pub(super) const RESERVED: &[&str] = &[GUEST_DIR, "/proc", "/sys", "/dev", "/run"];

pub(super) fn bad_config(field: &'static str, reason: impl Into<String>) -> VmError {
    VmError::Config {
        field,
        reason: reason.into(),
    }
}

pub(super) fn bad_command(reason: impl Into<String>) -> VmError {
    VmError::Command {
        reason: reason.into(),
    }
}

pub(super) fn is_under(path: &Path, dir: &str) -> bool {
    path.starts_with(dir)
}

/// A host directory that appears at the same path in the guest (`field` names it in the
/// error): absolute, not `/`, outside the guest's own /run, /proc, /sys and /dev, without a
/// line break (the agent reads paths a line each), and existing.
pub(super) fn guest_dir(field: &'static str, dir: &Path) -> Result<(), VmError> {
    if !dir.is_absolute()
        || dir == Path::new("/")
        || RESERVED.iter().any(|r| is_under(dir, r))
        || dir.to_string_lossy().contains('\n')
    {
        return Err(bad_config(
            field,
            format!(
                "{} must be an absolute path other than / without a line break, and outside /run, /proc, /sys and /dev",
                dir.display()
            ),
        ));
    }
    if !dir.is_dir() {
        return Err(bad_config(
            field,
            format!("{} is not a directory", dir.display()),
        ));
    }
    Ok(())
}

pub(crate) fn validate(config: &VmConfig, command: &GuestCommand) -> Result<(), VmError> {
    if config.vcpus == 0 || config.vcpus > 255 {
        return Err(bad_config(
            "vcpus",
            format!("{} is not in 1..=255", config.vcpus),
        ));
    }
    let mib = config.memory.0 >> 20;
    if config.memory.0 % (1 << 20) != 0 || mib < 128 {
        return Err(bad_config(
            "memory",
            format!(
                "{} is not a whole number of MiB of at least 128 MiB",
                config.memory
            ),
        ));
    }
    if let Some(pin) = &config.pin {
        if config.single_threaded_tcg {
            return Err(bad_config(
                "pin",
                "single-threaded TCG runs every vCPU on one host thread: there is no vCPU thread to pin"
                    .to_owned(),
            ));
        }
        if pin.len() != config.vcpus as usize {
            return Err(bad_config(
                "pin",
                format!(
                    "{} host cpus for {} vCPUs; give one per vCPU",
                    pin.len(),
                    config.vcpus
                ),
            ));
        }
    }
    guest_dir("workdir", &config.workdir)?;
    if config.boot_timeout.is_zero() {
        return Err(bad_config("boot_timeout", "must be more than zero"));
    }
    for share in &config.shares {
        guest_dir("shares", share)?;
    }
    if let Some(s) = config.scratch_disk {
        if s.0 < 64 << 20 {
            return Err(bad_config(
                "scratch_disk",
                format!("{s} is smaller than 64 MiB"),
            ));
        }
    }
    let has_nul = |s: &str| s.contains('\0');
    let Some(program) = command.argv.first() else {
        return Err(bad_command("argv is empty"));
    };
    if program.is_empty() || program.contains('=') || program.starts_with('-') {
        return Err(bad_command(format!(
            "program {program:?} must be non-empty, contain no '=' and not start with '-'"
        )));
    }
    if command.argv.iter().any(|a| has_nul(a)) {
        return Err(bad_command("an argument contains a NUL byte"));
    }
    for (k, v) in &command.env {
        if k.is_empty() || k.contains('=') || has_nul(k) || has_nul(v) {
            return Err(bad_command(format!(
                "environment variable {k:?} is not a valid name"
            )));
        }
    }
    if let Some(cwd) = &command.cwd {
        if !cwd.is_absolute() {
            return Err(bad_command(format!(
                "cwd {} is not absolute",
                cwd.display()
            )));
        }
    }
    if command.timeout.is_zero() {
        return Err(bad_command("timeout must be more than zero"));
    }
    match &command.inner {
        None => {}
        Some(InnerEngine::Isolab(inner)) => {
            if !inner.runtime.is_file() {
                return Err(bad_command(format!(
                    "the runtime {} is not a file; build it with `cargo build -p isolab-runtime`",
                    inner.runtime.display()
                )));
            }
            if inner.flags.iter().any(|f| has_nul(f)) {
                return Err(bad_command("a runtime flag contains a NUL byte"));
            }
        }
        Some(InnerEngine::Docker(docker)) => {
            crate::docker::check_image(&config.disk.image)?;
            let w = &config.workdir;
            if docker.flags.iter().any(|f| has_nul(f)) {
                return Err(bad_command("a docker run flag contains a NUL byte"));
            }
            if !docker.report.starts_with(w) || docker.report == *w {
                return Err(bad_command(format!(
                    "the Docker report directory {} is not inside the workdir {}",
                    docker.report.display(),
                    w.display()
                )));
            }
        }
    }
    Ok(())
}

/// The complete guest environment: the caller's, plus `PATH` and `HOME` when missing.
pub(super) fn full_env(env: &[(String, String)]) -> Vec<(String, String)> {
    let mut out = env.to_vec();
    if !out.iter().any(|(k, _)| k == "PATH") {
        out.insert(0, ("PATH".into(), DEFAULT_PATH.into()));
    }
    if !out.iter().any(|(k, _)| k == "HOME") {
        out.push(("HOME".into(), "/root".into()));
    }
    out
}
