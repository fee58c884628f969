//! Podman's default network: what it adds to the host (its bridge, its netfilter
//! rules, CNI's state directory), recorded before first use so that shutdown removes
//! exactly that.

use std::path::{Path, PathBuf};

use crate::host_net::{first_host, HostNetSnapshot};
use crate::tool::run_ok;
use crate::EngineError;

use super::{io_err, Podman, ENGINE};

/// Podman's state of the host network, kept in `net.json`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct NetState {
    pub(super) net: HostNetSnapshot,
    pub(super) cni_state_existed: bool,
}

impl Podman {
    pub(super) fn net_file(&self) -> PathBuf {
        self.config.state_dir.join("net.json")
    }
}

impl Podman {
    /// The default network's bridge, subnet and gateway (`podman network inspect
    /// podman`).
    pub(super) fn bridge_info(&self) -> Option<(String, String, String)> {
        let cmd = self
            .podman(["network", "inspect", "podman", "--format", "json"])
            .ok()?;
        parse_network(&run_ok(&*self.tools, ENGINE, &cmd).ok()?)
    }

    pub(super) fn take_net_snapshot(&self) -> Result<(), EngineError> {
        if self.net_file().exists() {
            return Ok(());
        }
        let (bridge, subnet, _) = self.bridge_info().unwrap_or_else(|| {
            (
                "cni-podman0".into(),
                "10.88.0.0/16".into(),
                "10.88.0.1".into(),
            )
        });
        let prefix = subnet_marker(&subnet);
        let markers = ["CNI-", "NETAVARK", bridge.as_str(), prefix.as_str()];
        let state = NetState {
            net: HostNetSnapshot::take(
                &*self.tools,
                &self.config.proc,
                &self.config.sys,
                &bridge,
                &markers,
            ),
            cni_state_existed: self.config.cni_state_dir.exists(),
        };
        let file = self.net_file();
        let text = serde_json::to_string_pretty(&state).unwrap_or_default();
        std::fs::write(&file, text).map_err(io_err("record the host network in", &file))
    }
}

/// `10.88.` for `10.88.0.0/16`: the text that marks the subnet's rules.
pub(super) fn subnet_marker(subnet: &str) -> String {
    let addr = subnet.split('/').next().unwrap_or_default();
    let len: usize = subnet
        .split('/')
        .nth(1)
        .and_then(|l| l.parse().ok())
        .unwrap_or(32);
    let octets: Vec<&str> = addr.split('.').collect();
    let keep = (len / 8).clamp(1, 4).min(octets.len());
    format!("{}.", octets[..keep].join("."))
}

/// Whether a CNI state directory holds an IP reservation (a file named like an
/// address) under `networks/*/`.
pub(super) fn holds_reservations(cni: &Path) -> bool {
    let Ok(nets) = std::fs::read_dir(cni.join("networks")) else {
        return false;
    };
    nets.flatten().any(|n| {
        std::fs::read_dir(n.path()).is_ok_and(|files| {
            files.flatten().any(|f| {
                f.file_name()
                    .to_str()
                    .is_some_and(|s| s.parse::<std::net::IpAddr>().is_ok())
            })
        })
    })
}

/// `(bridge, subnet, gateway)` of `podman network inspect podman --format json`.
pub(crate) fn parse_network(stdout: &str) -> Option<(String, String, String)> {
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).ok()?;
    let n = v.as_array()?.first()?;
    let bridge = n.get("network_interface")?.as_str()?.to_owned();
    let s = n.get("subnets")?.as_array()?.first()?;
    let subnet = s.get("subnet")?.as_str()?.to_owned();
    let gateway = s
        .get("gateway")
        .and_then(|g| g.as_str())
        .map(str::to_owned)
        .or_else(|| first_host(&subnet))?;
    Some((bridge, subnet, gateway))
}
