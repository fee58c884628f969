//! The command-line flags that apply a job's [`Limits`] to a container of
//! isolab-runtime: the `isolab` platform's own containers and the ones it runs inside
//! a VM (`vm+isolab`) share them. (Docker's flags, which `vm+docker` uses in its
//! guest, are the engines crate's [`isolab_engines::run_flags`].)

use isolab_cgroups::{CpuQuota, Limits};

/// The isolab-runtime flags that apply `limits`.
pub(crate) fn runtime_limit_flags(limits: &Limits) -> Vec<String> {
    let mut a = Vec::new();
    let mut flag = |name: &str, value: String| {
        a.push(format!("--{name}"));
        a.push(value);
    };
    if let Some(q) = &limits.cpu {
        let cpus = q.quota.as_micros() as f64 / q.period.as_micros() as f64;
        flag("cpus", format!("{cpus}"));
        if q.period != CpuQuota::DEFAULT_PERIOD {
            flag("cpu-period", q.period.as_micros().to_string());
        }
    }
    if let Some(set) = &limits.cpuset {
        flag("cpuset", set.to_string());
    }
    if let Some(set) = &limits.mems {
        flag("cpuset-mems", set.to_string());
    }
    if let Some(m) = limits.memory_max {
        flag("memory", m.0.to_string());
    }
    if let Some(m) = limits.memory_swap_max {
        flag("memory-swap", m.0.to_string());
    }
    if let Some(p) = limits.pids_max {
        flag("pids", p.to_string());
    }
    for t in &limits.io {
        if let Some(r) = t.read_bps {
            flag("io-read-bps", format!("{}={r}", t.device));
        }
        if let Some(w) = t.write_bps {
            flag("io-write-bps", format!("{}={w}", t.device));
        }
    }
    a
}

#[cfg(test)]
mod tests {
    use isolab_cgroups::{Bytes, DeviceNumber, IoThrottle};

    use super::*;

    #[test]
    fn shape_and_placement_become_runtime_flags() {
        let limits = Limits {
            cpu: Some(CpuQuota::from_cpus(1.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
            cpuset: Some("1".parse().unwrap()),
            memory_max: Some(Bytes::gib(4)),
            pids_max: Some(512),
            io: vec![IoThrottle {
                read_bps: Some(1 << 20),
                ..IoThrottle::unlimited(DeviceNumber {
                    major: 254,
                    minor: 0,
                })
            }],
            ..Limits::default()
        };
        let flags = runtime_limit_flags(&limits);
        assert_eq!(
            flags,
            [
                "--cpus",
                "1.5",
                "--cpuset",
                "1",
                "--memory",
                "4294967296",
                "--pids",
                "512",
                "--io-read-bps",
                "254:0=1048576"
            ]
        );
    }

    #[test]
    fn a_short_period_and_memory_nodes_become_runtime_flags() {
        let limits = Limits {
            cpu: Some(CpuQuota::from_cpus(0.5, std::time::Duration::from_millis(10)).unwrap()),
            cpuset: Some("2-3".parse().unwrap()),
            mems: Some("0".parse().unwrap()),
            ..Limits::default()
        };
        assert_eq!(
            runtime_limit_flags(&limits),
            [
                "--cpus",
                "0.5",
                "--cpu-period",
                "10000",
                "--cpuset",
                "2-3",
                "--cpuset-mems",
                "0"
            ]
        );
    }
}
