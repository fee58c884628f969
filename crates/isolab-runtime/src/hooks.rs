//! OCI hooks: programs run in the runtime's namespaces with the container's state
//! JSON on standard input, at the points of the lifecycle the runtime spec names.
//! A `createRuntime` (or `prestart`) hook that fails fails `create`; a failing
//! `poststart` or `poststop` hook is only a warning, as the spec says.

use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::config::{ContainerConfig, Hook};
use crate::error::RuntimeError;
use crate::state::{OciInfo, OCI_VERSION};

/// The state a hook reads: `ociVersion`, `id`, `status`, `pid`, `bundle`,
/// `annotations`.
pub fn state_json(
    config: &ContainerConfig,
    oci: Option<&OciInfo>,
    status: &str,
    pid: u32,
) -> String {
    let info = oci.cloned().unwrap_or_default();
    serde_json::json!({
        "ociVersion": OCI_VERSION,
        "id": config.id.as_str(),
        "status": status,
        "pid": pid,
        "bundle": info.bundle,
        "annotations": info.annotations,
    })
    .to_string()
}

/// Runs one hook to completion; its output is returned in the error when it fails.
pub fn run(hook: &Hook, kind: &str, state: &str) -> Result<(), RuntimeError> {
    let fail = |problem: String| RuntimeError::Hook {
        kind: kind.to_owned(),
        path: hook.path.clone(),
        problem,
    };
    let mut cmd = Command::new(&hook.path);
    if let Some((arg0, rest)) = hook.args.split_first() {
        cmd.arg0(arg0).args(rest);
    }
    cmd.env_clear()
        .envs(hook.env.iter().filter_map(|e| e.split_once('=')))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("cannot start it: {e}")))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A hook that does not read its input is fine.
        let _ = stdin.write_all(state.as_bytes());
    }
    let deadline = hook
        .timeout
        .map(|t| Instant::now() + Duration::from_secs(t));
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(fail(format!("cannot wait for it: {e}"))),
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(fail(format!(
                "killed after its timeout of {} s",
                hook.timeout.unwrap_or(0)
            )));
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    if status.success() {
        return Ok(());
    }
    let mut output = String::new();
    for pipe in [
        child.stderr.take().map(|p| Box::new(p) as Box<dyn Read>),
        child.stdout.take().map(|p| Box::new(p) as Box<dyn Read>),
    ]
    .into_iter()
    .flatten()
    {
        let mut text = String::new();
        let _ = pipe.take(4096).read_to_string(&mut text);
        output.push_str(text.trim());
    }
    Err(fail(format!("{status}; output: {output:?}")))
}

/// Runs `hooks` in order, stopping at the first failure.
pub fn run_all(hooks: &[Hook], kind: &str, state: &str) -> Result<(), RuntimeError> {
    hooks.iter().try_for_each(|h| run(h, kind, state))
}

/// Runs every hook of `hooks`; returns the failures as warnings.
pub fn run_warn(hooks: &[Hook], kind: &str, state: &str) -> Vec<String> {
    hooks
        .iter()
        .filter_map(|h| run(h, kind, state).err().map(|e| e.to_string()))
        .collect()
}
