//! OCI hooks: programs run with the container's state JSON on standard input, at the
//! points of the lifecycle the runtime spec names. This module runs those of the
//! runtime's namespaces (`prestart`, `createRuntime`, `poststart`, `poststop`); the
//! container's process runs `createContainer` and `startContainer` itself
//! (`container::child`), with the state [`state_parts`] prepares. A `prestart`,
//! `createRuntime`, `createContainer` or `startContainer` hook that fails (or outlives
//! its `timeout`) fails the operation and the container; a failing `poststart` or
//! `poststop` hook is only a warning, as the spec says.

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
    let (head, tail) = state_parts(config, oci, status);
    format!("{head}{pid}{tail}")
}

/// [`state_json`] in two parts, for a process that knows the pid only when it runs the
/// hook (the container's own, as its namespace shows it): `head`, the pid's decimal
/// digits and `tail` make the JSON.
pub fn state_parts(
    config: &ContainerConfig,
    oci: Option<&OciInfo>,
    status: &str,
) -> (String, String) {
    let info = oci.cloned().unwrap_or_default();
    let without_pid = serde_json::json!({
        "ociVersion": OCI_VERSION,
        "id": config.id.as_str(),
        "status": status,
        "bundle": info.bundle,
        "annotations": info.annotations,
    })
    .to_string();
    // An object's text ends with its `}`: the pid goes last.
    let open = without_pid.trim_end_matches('}');
    (format!("{open},\"pid\":"), "}".to_owned())
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

/// What a hook that did not succeed did, in the words of an error message: `exit
/// status: 1`, `killed by signal 9`, `killed after its timeout of 2 s`.
pub fn failure_text(status: i32, timeout: Option<u64>) -> String {
    if status == -libc::ETIMEDOUT {
        return format!("killed after its timeout of {} s", timeout.unwrap_or(0));
    }
    if status < 0 {
        return format!(
            "cannot start it: {}",
            std::io::Error::from_raw_os_error(-status)
        );
    }
    if libc::WIFEXITED(status) {
        let code = libc::WEXITSTATUS(status);
        let hint = if code == 127 {
            " (not found or not executable)"
        } else {
            ""
        };
        format!("exit status: {code}{hint}")
    } else if libc::WIFSIGNALED(status) {
        format!("killed by signal {}", libc::WTERMSIG(status))
    } else {
        format!("wait status {status}")
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Rootfs;

    fn config() -> ContainerConfig {
        let mut c = ContainerConfig::new(
            Rootfs::Dir {
                path: "/r".into(),
                readonly: false,
            },
            vec!["true".into()],
        );
        c.id = "h1".parse().unwrap();
        c
    }

    #[test]
    fn the_state_is_whole_json_with_the_pid_last() {
        let oci = OciInfo {
            bundle: "/b".into(),
            annotations: [("k".to_owned(), "v".to_owned())].into(),
            ..OciInfo::default()
        };
        let json = state_json(&config(), Some(&oci), "created", 42);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["pid"], 42);
        assert_eq!(v["status"], "created");
        assert_eq!(v["bundle"], "/b");
        assert_eq!(v["annotations"]["k"], "v");
        assert_eq!(v["id"], "h1");
        let (head, tail) = state_parts(&config(), None, "created");
        assert!(head.ends_with(",\"pid\":") && tail == "}", "{head} {tail}");
    }

    #[test]
    fn failures_read_as_what_happened() {
        assert_eq!(failure_text(1 << 8, None), "exit status: 1");
        assert!(failure_text(127 << 8, None).contains("not found"));
        assert_eq!(failure_text(libc::SIGKILL, None), "killed by signal 9");
        assert_eq!(
            failure_text(-libc::ETIMEDOUT, Some(2)),
            "killed after its timeout of 2 s"
        );
        assert!(failure_text(-libc::EAGAIN, None).starts_with("cannot start it"));
    }

    #[test]
    fn a_hook_gets_the_state_and_its_timeout_kills_it() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("state");
        let hook = Hook {
            path: "/bin/sh".into(),
            args: vec!["sh".into(), "-c".into(), format!("cat > {}", out.display())],
            env: Vec::new(),
            timeout: Some(5),
        };
        run(&hook, "prestart", "{\"pid\":1}").unwrap();
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "{\"pid\":1}");
        let slow = Hook {
            args: vec!["sh".into(), "-c".into(), "sleep 10".into()],
            timeout: Some(1),
            ..hook.clone()
        };
        let started = Instant::now();
        let e = run(&slow, "poststart", "{}").unwrap_err().to_string();
        assert!(e.contains("timeout of 1 s"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
        let failing = Hook {
            args: vec!["sh".into(), "-c".into(), "echo bad >&2; exit 3".into()],
            ..hook
        };
        let e = run_all(&[failing], "createRuntime", "{}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("createRuntime") && e.contains("bad"), "{e}");
    }
}
