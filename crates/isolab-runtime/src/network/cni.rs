//! The CNI protocol as far as we speak it: network configurations for the
//! `bridge` (+ `host-local` IPAM) and `portmap` plugins, the request a plugin
//! is executed with, and the result and error objects it prints.
//!
//! Spec: <https://github.com/containernetworking/cni/blob/main/SPEC.md>
//! (version 1.0.0, which Debian's plugins 1.1.1 support).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use super::config::Ipv4Subnet;
use super::{NetworkError, Publish};

/// CNI version we write in every configuration.
pub const CNI_VERSION: &str = "1.0.0";
/// Interface name inside the container.
pub const CONTAINER_IFNAME: &str = "eth0";

/// A CNI command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CniCommand {
    /// Attach.
    Add,
    /// Detach (idempotent).
    Del,
}

impl CniCommand {
    /// The value of `CNI_COMMAND`.
    pub fn as_str(self) -> &'static str {
        match self {
            CniCommand::Add => "ADD",
            CniCommand::Del => "DEL",
        }
    }
}

/// One plugin execution: everything that goes into its environment and stdin.
#[derive(Debug, Clone)]
pub struct PluginRequest {
    /// Plugin type, which is also its binary name (`bridge`, `portmap`).
    pub plugin: String,
    /// `CNI_COMMAND`.
    pub command: CniCommand,
    /// `CNI_CONTAINERID`.
    pub container_id: String,
    /// `CNI_NETNS`; `None` when the namespace is gone (DEL only).
    pub netns: Option<PathBuf>,
    /// `CNI_IFNAME`.
    pub ifname: String,
    /// The network configuration, written to stdin.
    pub config: Value,
}

/// The result object an ADD prints (only the fields we use).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniResult {
    /// Version of the result format.
    #[serde(rename = "cniVersion")]
    pub cni_version: String,
    /// Interfaces created or used.
    #[serde(default)]
    pub interfaces: Vec<CniInterface>,
    /// Addresses assigned.
    #[serde(default)]
    pub ips: Vec<CniIp>,
    /// Routes installed in the container.
    #[serde(default)]
    pub routes: Vec<CniRoute>,
    /// Everything else, kept verbatim so the result can be passed on as `prevResult`.
    #[serde(flatten)]
    pub rest: serde_json::Map<String, Value>,
}

/// An interface in a CNI result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniInterface {
    /// Interface name.
    pub name: String,
    /// MAC address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac: Option<String>,
    /// Namespace path when the interface is inside a container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<String>,
}

/// An address in a CNI result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniIp {
    /// Index into `interfaces`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interface: Option<usize>,
    /// `address/prefix`.
    pub address: String,
    /// Gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<IpAddr>,
}

/// A route in a CNI result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CniRoute {
    /// Destination `address/prefix`.
    pub dst: String,
    /// Next hop (absent: the interface's gateway).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gw: Option<IpAddr>,
}

/// The error object a failing plugin prints.
#[derive(Debug, Clone, Deserialize)]
pub struct CniErrorObject {
    /// Error code.
    #[serde(default)]
    pub code: u32,
    /// Short message.
    #[serde(default)]
    pub msg: String,
    /// Longer explanation.
    #[serde(default)]
    pub details: String,
}

/// The `bridge` plugin configuration: a gateway bridge, no per-container
/// masquerade chain (we install one rule per bridge instead, see
/// `iptables.rs`), hairpin so a container reaches its own published ports,
/// and `host-local` IPAM whose leases live under `ipam_dir`.
pub fn bridge_config(bridge: &str, subnet: Ipv4Subnet, ipam_dir: &Path) -> Value {
    json!({
        "cniVersion": CNI_VERSION,
        "name": bridge,
        "type": "bridge",
        "bridge": bridge,
        "isGateway": true,
        "ipMasq": false,
        "hairpinMode": true,
        "ipam": {
            "type": "host-local",
            "dataDir": ipam_dir,
            "ranges": [[{ "subnet": subnet.to_string() }]],
            "routes": [{ "dst": "0.0.0.0/0" }],
        },
    })
}

/// The `portmap` plugin configuration with its runtime port mappings.
///
/// portmap's DEL does nothing when the mapping list is empty, although it
/// only needs the network name and container id to find its chains; so a DEL
/// without known mappings passes a placeholder mapping.
pub fn portmap_config(network: &str, publish: &[Publish], prev: Option<&CniResult>) -> Value {
    let mut mappings: Vec<Value> = publish
        .iter()
        .map(|p| {
            json!({
                "hostPort": p.host_port,
                "containerPort": p.container_port,
                "protocol": p.protocol.as_str(),
            })
        })
        .collect();
    if mappings.is_empty() {
        mappings.push(json!({ "hostPort": 1, "containerPort": 1, "protocol": "tcp" }));
    }
    let mut config = json!({
        "cniVersion": CNI_VERSION,
        "name": network,
        "type": "portmap",
        "snat": true,
        "capabilities": { "portMappings": true },
        "runtimeConfig": { "portMappings": mappings },
    });
    if let (Some(prev), Some(obj)) = (prev, config.as_object_mut()) {
        obj.insert("prevResult".to_owned(), json!(prev));
    }
    config
}

/// Parses an ADD result.
pub fn parse_result(plugin: &str, stdout: &[u8]) -> Result<CniResult, NetworkError> {
    serde_json::from_slice(stdout).map_err(|e| NetworkError::PluginResult {
        plugin: plugin.to_owned(),
        command: CniCommand::Add.as_str(),
        reason: e.to_string(),
    })
}

/// The container's IPv4 address, prefix and gateway in a result.
pub fn ipv4_of(result: &CniResult, plugin: &str) -> Result<(IpAddr, u8, IpAddr), NetworkError> {
    let bad = |reason: String| NetworkError::PluginResult {
        plugin: plugin.to_owned(),
        command: CniCommand::Add.as_str(),
        reason,
    };
    for ip in &result.ips {
        let Some((addr, prefix)) = ip.address.split_once('/') else {
            return Err(bad(format!("address {:?} has no prefix", ip.address)));
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| bad(format!("address {:?} is not an IP address", ip.address)))?;
        let prefix: u8 = prefix
            .parse()
            .map_err(|_| bad(format!("address {:?} has a bad prefix", ip.address)))?;
        if addr.is_ipv4() {
            let gateway = ip
                .gateway
                .ok_or_else(|| bad(format!("address {} came without a gateway", ip.address)))?;
            return Ok((addr, prefix, gateway));
        }
    }
    Err(bad("no IPv4 address in the result".to_owned()))
}

/// Builds the error for a failed plugin from what it printed.
pub fn plugin_error(req: &PluginRequest, stdout: &[u8], stderr: &[u8]) -> NetworkError {
    let (code, msg, details) = match serde_json::from_slice::<CniErrorObject>(stdout) {
        Ok(e) if !e.msg.is_empty() => (e.code, e.msg, e.details),
        _ => {
            let text = String::from_utf8_lossy(if stderr.is_empty() { stdout } else { stderr });
            (0, text.trim().to_owned(), String::new())
        }
    };
    NetworkError::Plugin {
        plugin: req.plugin.clone(),
        command: req.command.as_str(),
        container_id: req.container_id.clone(),
        code,
        msg,
        details: if details.is_empty() {
            details
        } else {
            format!("; {details}")
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ADD: &str = r#"{
        "cniVersion": "1.0.0",
        "interfaces": [
            {"name": "isolab0", "mac": "36:49:1f:c6:0b:c3"},
            {"name": "veth576a7e68", "mac": "9e:55:b1:4e:09:82"},
            {"name": "eth0", "mac": "1e:fe:86:41:d5:f1", "sandbox": "/proc/26911/ns/net"}
        ],
        "ips": [{"interface": 2, "address": "10.213.99.2/24", "gateway": "10.213.99.1"}],
        "routes": [{"dst": "0.0.0.0/0"}],
        "dns": {}
    }"#;

    #[test]
    fn parses_a_bridge_result_and_keeps_unknown_fields() {
        let r = parse_result("bridge", ADD.as_bytes()).unwrap();
        assert_eq!(r.interfaces.len(), 3);
        let (ip, prefix, gw) = ipv4_of(&r, "bridge").unwrap();
        assert_eq!(ip.to_string(), "10.213.99.2");
        assert_eq!(prefix, 24);
        assert_eq!(gw.to_string(), "10.213.99.1");
        let back = serde_json::to_value(&r).unwrap();
        assert!(back.get("dns").is_some());
        assert_eq!(back["ips"][0]["interface"], 2);
    }

    #[test]
    fn result_without_ipv4_is_an_error() {
        let r = parse_result("bridge", br#"{"cniVersion":"1.0.0","ips":[]}"#).unwrap();
        assert!(ipv4_of(&r, "bridge").is_err());
        assert!(parse_result("bridge", b"not json").is_err());
    }

    #[test]
    fn configs_carry_what_the_plugins_need() {
        let subnet = Ipv4Subnet::parse("10.213.0.0/24").unwrap();
        let c = bridge_config("isolab0", subnet, Path::new("/run/isolab/cni/ipam"));
        assert_eq!(c["type"], "bridge");
        assert_eq!(c["isGateway"], true);
        assert_eq!(c["ipMasq"], false);
        assert_eq!(c["ipam"]["ranges"][0][0]["subnet"], "10.213.0.0/24");
        assert_eq!(c["ipam"]["dataDir"], "/run/isolab/cni/ipam");

        let prev = parse_result("bridge", ADD.as_bytes()).unwrap();
        let p = portmap_config("isolab0", &["8080:80/udp".parse().unwrap()], Some(&prev));
        assert_eq!(p["runtimeConfig"]["portMappings"][0]["protocol"], "udp");
        assert_eq!(p["prevResult"]["ips"][0]["address"], "10.213.99.2/24");
        let del = portmap_config("isolab0", &[], None);
        assert_eq!(
            del["runtimeConfig"]["portMappings"]
                .as_array()
                .map(Vec::len),
            Some(1)
        );
        assert!(del.get("prevResult").is_none());
    }

    #[test]
    fn plugin_errors_carry_code_and_message() {
        let req = PluginRequest {
            plugin: "bridge".into(),
            command: CniCommand::Add,
            container_id: "c1".into(),
            netns: None,
            ifname: CONTAINER_IFNAME.into(),
            config: Value::Null,
        };
        let e = plugin_error(
            &req,
            br#"{"code":11,"msg":"no IP addresses available","details":"range full"}"#,
            b"",
        );
        let s = e.to_string();
        assert!(
            s.contains("code 11") && s.contains("no IP addresses available; range full"),
            "{s}"
        );
        let e = plugin_error(&req, b"", b"panic: boom\n");
        assert!(e.to_string().contains("panic: boom"));
    }
}
