//! The neighbour network of neighbour VMs: the iperf3 servers' namespace on
//! isolab's bridge, where the guests reach it as seed 001's stress VMs reached their
//! receiver on another node. [`BridgePort`] attaches and detaches that namespace (the
//! runtime's bridge networking for real, a fake in tests).

use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

use isolab_runtime::network::{BridgeConfig, NetworkMode, Networking};

/// The servers' namespace could not be attached to or detached from the bridge.
#[derive(Debug, thiserror::Error)]
#[error("the neighbour servers' namespace ({id}) on isolab's bridge: {detail}; `isolab gc` removes what a killed run left")]
pub struct BridgeError {
    /// The attachment's id.
    pub id: String,
    /// What went wrong.
    pub detail: String,
}

/// Where the servers' namespace sits on the bridge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BridgeAddress {
    /// Its leased address, which the guests' clients connect to.
    pub ip: Ipv4Addr,
    /// Its interface inside the namespace (`eth0`): where its traffic is counted.
    pub ifname: String,
    /// The veth end on the bridge, in the host's namespace (not the subject's traffic).
    pub host_veth: Option<String>,
}

/// Attaches a network namespace to isolab's bridge and detaches it again.
pub trait BridgePort: std::fmt::Debug + Send + Sync {
    /// Attaches the namespace at `netns` as `id` (an isolab container id, so that gc
    /// finds a dead experiment's lease).
    fn attach(&self, id: &str, netns: &Path) -> Result<BridgeAddress, BridgeError>;
    /// Undoes [`Self::attach`]: the veth, the lease, the bridge when it was the last.
    fn detach(&self, id: &str, netns: &Path) -> Result<(), BridgeError>;
}

/// The runtime's bridge networking ([`Networking::system`], bridge `isolab0`): the
/// same allocator, bridge and records as the VMs' taps.
#[derive(Debug, Clone, Copy, Default)]
pub struct RuntimeBridge;

fn bridge_error(id: &str, detail: impl std::fmt::Display) -> BridgeError {
    BridgeError {
        id: id.to_owned(),
        detail: detail.to_string(),
    }
}

fn container_id(id: &str) -> Result<isolab_runtime::ContainerId, BridgeError> {
    id.parse().map_err(|e| bridge_error(id, e))
}

impl BridgePort for RuntimeBridge {
    fn attach(&self, id: &str, netns: &Path) -> Result<BridgeAddress, BridgeError> {
        let mode = NetworkMode::Bridge(BridgeConfig::default());
        let cid = container_id(id)?;
        let net = Networking::system();
        let att = net
            .attach(&cid, netns, &mode)
            .map_err(|e| bridge_error(id, e))?
            .ok_or_else(|| bridge_error(id, "the bridge gave no address"))?;
        match att.ip {
            IpAddr::V4(ip) => Ok(BridgeAddress {
                ip,
                ifname: att.container_ifname,
                host_veth: att.host_veth,
            }),
            IpAddr::V6(ip) => {
                let _ = net.detach(&cid, netns, &mode);
                Err(bridge_error(id, format!("leased {ip}, not IPv4")))
            }
        }
    }

    fn detach(&self, id: &str, netns: &Path) -> Result<(), BridgeError> {
        let mode = NetworkMode::Bridge(BridgeConfig::default());
        Networking::system()
            .detach(&container_id(id)?, netns, &mode)
            .map_err(|e| bridge_error(id, e))
    }
}

/// `argv`, a network neighbour's client as [`super::command`] builds it for the
/// host (`ip netns exec NS iperf3 -c ADDRESS …`), as a guest runs it: iperf3 itself,
/// connecting to `server`. `None` when `argv` is not such a client.
pub fn in_guest(argv: &[String], namespace: &str, server: Ipv4Addr) -> Option<Vec<String>> {
    let rest = match argv {
        [ip, netns, exec, ns, rest @ ..]
            if ip == "ip" && netns == "netns" && exec == "exec" && ns == namespace =>
        {
            rest
        }
        _ => return None,
    };
    let at = rest.iter().position(|a| a == "-c")?;
    if rest.first().map(String::as_str) != Some("iperf3") || at + 1 >= rest.len() {
        return None;
    }
    let mut v = rest.to_vec();
    v[at + 1] = server.to_string();
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guest_runs_the_client_itself_against_the_bridged_server() {
        let argv: Vec<String> =
            "ip netns exec isolab-nb42-a iperf3 -c 10.214.42.2 -p 5202 -t 86400 -i 0 -R -b 300M"
                .split(' ')
                .map(String::from)
                .collect();
        let server = Ipv4Addr::new(10, 213, 0, 9);
        assert_eq!(
            in_guest(&argv, "isolab-nb42-a", server).unwrap().join(" "),
            "iperf3 -c 10.213.0.9 -p 5202 -t 86400 -i 0 -R -b 300M"
        );
        // Another process's namespace, or not a client: not rewritten.
        assert_eq!(in_guest(&argv, "isolab-nb43-a", server), None);
        let fio: Vec<String> = ["fio", "--name=bomb"].map(String::from).to_vec();
        assert_eq!(in_guest(&fio, "isolab-nb42-a", server), None);
        let cut: Vec<String> = ["ip", "netns", "exec", "isolab-nb42-a", "iperf3", "-c"]
            .map(String::from)
            .to_vec();
        assert_eq!(in_guest(&cut, "isolab-nb42-a", server), None);
    }
}
