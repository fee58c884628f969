//! The hooks the container's process runs itself, in its own namespaces:
//! `createContainer` (after the mounts, before `pivot_root`, so that the path of the
//! runtime's namespace resolves) and `startContainer` (after `start`, right before the
//! command's `execve`). Built in the parent as ready C strings, with the state JSON
//! split around the pid, which only the container's process knows as its pid
//! namespace shows it: the child forks and executes each hook without allocating.

use std::ffi::CString;

use crate::config::Hook;
use crate::error::RuntimeError;

use super::{cpath, CStrings};

/// One hook, ready for `execve`.
#[derive(Debug)]
pub(crate) struct HookExec {
    pub path: CString,
    pub argv: CStrings,
    pub envp: CStrings,
    /// `CLOCK_MONOTONIC` nanoseconds it may run before it is killed.
    pub timeout_ns: Option<u64>,
}

/// The hooks of one kind, with the state they read on standard input.
#[derive(Debug, Default)]
pub(crate) struct ContainerHooks {
    pub hooks: Vec<HookExec>,
    /// The state JSON up to the pid's value (see [`crate::hooks::state_parts`]).
    pub state_head: Vec<u8>,
    /// The rest of the state JSON after the pid.
    pub state_tail: Vec<u8>,
    /// The number of the first of these hooks in the child's reports: the
    /// `createContainer` hooks count from 0, the `startContainer` hooks after them.
    pub first: u32,
}

impl ContainerHooks {
    /// `list` ready to run, reading `state` (head, tail); a hook without an
    /// environment gets `default_env`.
    pub(crate) fn build(
        list: &[Hook],
        default_env: &[String],
        state: (String, String),
        first: u32,
    ) -> Result<ContainerHooks, RuntimeError> {
        let hooks = list
            .iter()
            .map(|h| hook_exec(h, default_env))
            .collect::<Result<_, _>>()?;
        Ok(ContainerHooks {
            hooks,
            state_head: state.0.into_bytes(),
            state_tail: state.1.into_bytes(),
            first,
        })
    }
}

fn hook_exec(hook: &Hook, default_env: &[String]) -> Result<HookExec, RuntimeError> {
    let path = cpath("hook path", &hook.path)?;
    let argv = if hook.args.is_empty() {
        CStrings::from_strings(vec![path.clone()])
    } else {
        CStrings::new("hook argument", hook.args.iter().map(String::as_str))?
    };
    let env = if hook.env.is_empty() {
        default_env
    } else {
        &hook.env
    };
    let envp = CStrings::new("hook environment entry", env.iter().map(String::as_str))?;
    Ok(HookExec {
        path,
        argv,
        envp,
        timeout_ns: hook.timeout.map(|s| s.saturating_mul(1_000_000_000)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hooks_are_ready_for_execve() {
        let list = [
            Hook {
                path: "/bin/true".into(),
                args: Vec::new(),
                env: Vec::new(),
                timeout: Some(2),
            },
            Hook {
                path: "/bin/sh".into(),
                args: vec!["sh".into(), "-c".into(), "cat".into()],
                env: vec!["A=1".into()],
                timeout: None,
            },
        ];
        let env = ["PATH=/bin".to_owned()];
        let h = ContainerHooks::build(&list, &env, ("{\"pid\":".into(), "}".into()), 3).unwrap();
        assert_eq!(h.first, 3);
        assert_eq!(h.hooks[0].argv.strings(), [c"/bin/true".to_owned()]);
        assert_eq!(h.hooks[0].envp.strings(), [c"PATH=/bin".to_owned()]);
        assert_eq!(h.hooks[0].timeout_ns, Some(2_000_000_000));
        assert_eq!(h.hooks[1].envp.strings(), [c"A=1".to_owned()]);
        assert_eq!(h.hooks[1].argv.strings().len(), 3);
        assert_eq!(h.state_head, b"{\"pid\":");
        let bad = [Hook {
            path: "/bin/x\0y".into(),
            ..list[0].clone()
        }];
        assert!(ContainerHooks::build(&bad, &env, Default::default(), 0).is_err());
    }
}
