//! [`Phase`] timestamps of a container's start.

use std::time::Duration;

/// A phase of a container's start, in the order they happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// The runtime's own start: from the front end's start (its command line, the
    /// bundle read, the cgroup mounts found) to the start of the container's setup.
    /// Zero when the caller gives no earlier origin ([`crate::ContainerConfig::trace_origin`]).
    Setup,
    /// The cgroup is created and limited.
    Cgroup,
    /// The child's plan is built (paths, arguments, the seccomp program).
    Plan,
    /// `clone3` returned in the parent.
    Clone,
    /// The network is configured (parent side; loopback for `none`).
    Network,
    /// The root filesystem and /proc, /sys, /dev are mounted (child side).
    Mounts,
    /// `pivot_root` is done and the old root detached (child side).
    Pivot,
    /// Right before the seccomp filter is loaded (the command's process).
    Seccomp,
    /// `create` only: the security settings are applied and the process waits for
    /// `start` on the exec FIFO.
    Created,
    /// The command's `execve` succeeded (its close-on-exec report pipe closed).
    Exec,
    /// The command exited and was reaped.
    Reaped,
    /// The cgroup's counters are read and everything is torn down.
    Exit,
}

impl Phase {
    /// Every phase.
    pub const ALL: [Phase; 12] = [
        Phase::Setup,
        Phase::Cgroup,
        Phase::Plan,
        Phase::Clone,
        Phase::Network,
        Phase::Mounts,
        Phase::Pivot,
        Phase::Seccomp,
        Phase::Created,
        Phase::Exec,
        Phase::Reaped,
        Phase::Exit,
    ];

    /// The phase's name in JSON: `cgroup`, `clone`, … (keys are `<name>_us`).
    pub fn name(self) -> &'static str {
        match self {
            Phase::Setup => "setup",
            Phase::Cgroup => "cgroup",
            Phase::Plan => "plan",
            Phase::Clone => "clone",
            Phase::Network => "network",
            Phase::Mounts => "mounts",
            Phase::Pivot => "pivot",
            Phase::Seccomp => "seccomp",
            Phase::Created => "created",
            Phase::Exec => "exec",
            Phase::Reaped => "reaped",
            Phase::Exit => "exit",
        }
    }

    /// Inverse of [`Phase::name`].
    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }

    /// Wire code on the child's report pipe.
    pub(crate) fn code(self) -> u32 {
        Phase::ALL.iter().position(|p| *p == self).unwrap_or(0) as u32
    }

    /// Inverse of [`Phase::code`].
    pub(crate) fn from_code(code: u32) -> Option<Phase> {
        Phase::ALL.get(code as usize).copied()
    }
}

/// Phase timestamps relative to the trace's origin (monotonic clock): the start of
/// [`crate::run`], or the front end's start when it gives one.
pub type Trace = Vec<(Phase, Duration)>;

/// `CLOCK_MONOTONIC` now, in nanoseconds: a trace origin for
/// [`crate::ContainerConfig::trace_origin`].
pub fn monotonic_now_ns() -> u64 {
    crate::sys::monotonic_ns()
}

/// The trace as a JSON object `{"phase": microseconds, …}` in phase order.
pub fn trace_json(trace: &Trace) -> String {
    let fields: Vec<String> = trace
        .iter()
        .map(|(p, d)| format!("\"{}_us\":{}", p.name(), d.as_micros()))
        .collect();
    format!("{{{}}}", fields.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for p in Phase::ALL {
            assert_eq!(Phase::from_code(p.code()), Some(p));
            assert_eq!(Phase::from_name(p.name()), Some(p));
            assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        }
        assert_eq!(Phase::from_code(99), None);
    }

    #[test]
    fn json() {
        let t = vec![
            (Phase::Clone, Duration::from_micros(120)),
            (Phase::Exec, Duration::from_micros(900)),
        ];
        assert_eq!(trace_json(&t), "{\"clone_us\":120,\"exec_us\":900}");
    }
}
