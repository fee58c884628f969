//! Network modes and their validation.

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};

use super::{NetworkError, Publish};

/// Name of the default bridge.
pub const DEFAULT_BRIDGE: &str = "isolab0";
/// Default container subnet. `10.213.0.0/24` sits outside the ranges Docker
/// (172.17.0.0/16 and up), Podman (10.88.0.0/16), libvirt (192.168.122.0/24),
/// LXD (10.x random /24 but rarely .213) and Kubernetes defaults use.
pub const DEFAULT_SUBNET: &str = "10.213.0.0/24";

/// How a container is connected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase", tag = "mode")]
pub enum NetworkMode {
    /// Own network namespace with only `lo` (brought up).
    #[default]
    None,
    /// The host's network namespace; nothing to set up.
    Host,
    /// Own namespace, attached to a bridge through a veth pair, with an
    /// address, default route, egress NAT and published ports.
    Bridge(BridgeConfig),
}

/// Configuration of the bridge network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BridgeConfig {
    /// Host bridge name (default `isolab0`); also the CNI network name and
    /// the IPAM allocator's directory name.
    pub bridge: String,
    /// IPv4 subnet the allocator hands addresses out of (default
    /// [`DEFAULT_SUBNET`]); the first address is the bridge's (the gateway).
    pub subnet: String,
    /// Ports published from the host into the container.
    pub publish: Vec<Publish>,
}

impl Default for BridgeConfig {
    fn default() -> Self {
        BridgeConfig {
            bridge: DEFAULT_BRIDGE.to_owned(),
            subnet: DEFAULT_SUBNET.to_owned(),
            publish: Vec::new(),
        }
    }
}

/// A validated IPv4 subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Subnet {
    /// Network address (host bits zero).
    pub network: Ipv4Addr,
    /// Prefix length.
    pub prefix: u8,
}

impl Ipv4Subnet {
    /// Parses `a.b.c.d/n`; the prefix must leave room for a gateway and at
    /// least one container (n ≤ 30) and the host bits must be zero.
    pub fn parse(s: &str) -> Result<Self, NetworkError> {
        let bad = |reason: &str| NetworkError::InvalidSubnet {
            subnet: s.to_owned(),
            reason: reason.to_owned(),
        };
        let (addr, prefix) = s.split_once('/').ok_or_else(|| bad("missing /prefix"))?;
        let network: Ipv4Addr = addr.parse().map_err(|_| bad("not an IPv4 address"))?;
        let prefix: u8 = prefix.parse().map_err(|_| bad("prefix is not a number"))?;
        if !(8..=30).contains(&prefix) {
            return Err(bad("prefix must be between /8 and /30"));
        }
        let mask = u32::MAX << (32 - u32::from(prefix));
        if u32::from(network) & !mask != 0 {
            return Err(NetworkError::InvalidSubnet {
                subnet: s.to_owned(),
                reason: format!(
                    "host bits are set; did you mean {}/{prefix}?",
                    Ipv4Addr::from(u32::from(network) & mask)
                ),
            });
        }
        Ok(Ipv4Subnet { network, prefix })
    }

    /// Whether `ip` lies inside the subnet.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - u32::from(self.prefix));
        u32::from(ip) & mask == u32::from(self.network)
    }
}

impl std::fmt::Display for Ipv4Subnet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

impl BridgeConfig {
    /// Checks the bridge name and subnet; returns the parsed subnet.
    pub fn validate(&self) -> Result<Ipv4Subnet, NetworkError> {
        validate_ifname(&self.bridge)?;
        Ipv4Subnet::parse(&self.subnet)
    }
}

/// Linux interface names: 1–15 bytes, no `/`, `:`, whitespace.
pub(crate) fn validate_ifname(name: &str) -> Result<(), NetworkError> {
    let bad = |reason| NetworkError::InvalidBridgeName {
        name: name.to_owned(),
        reason,
    };
    if name.is_empty() || name.len() > 15 {
        return Err(bad("must be 1 to 15 characters long"));
    }
    if name == "." || name == ".." {
        return Err(bad("must not be . or .."));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        return Err(bad("use only [A-Za-z0-9_.-]"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_bridge_config_is_valid() {
        let s = BridgeConfig::default().validate().unwrap();
        assert_eq!(s.to_string(), DEFAULT_SUBNET);
        assert!(s.contains(Ipv4Addr::new(10, 213, 0, 77)));
        assert!(!s.contains(Ipv4Addr::new(10, 213, 1, 1)));
    }

    #[test]
    fn subnets_are_checked() {
        assert!(Ipv4Subnet::parse("10.1.0.0/16").is_ok());
        for bad in [
            "10.1.0.0",
            "10.1.0.1/24",
            "10.1.0.0/31",
            "10.0.0.0/7",
            "::1/64",
            "x/24",
            "10.1.0.0/x",
        ] {
            let err = Ipv4Subnet::parse(bad).unwrap_err();
            assert!(matches!(err, NetworkError::InvalidSubnet { .. }), "{bad}");
        }
        let msg = Ipv4Subnet::parse("10.1.0.1/24").unwrap_err().to_string();
        assert!(msg.contains("10.1.0.0/24"), "{msg}");
    }

    #[test]
    fn interface_names_are_checked() {
        assert!(validate_ifname("isolab0").is_ok());
        assert!(validate_ifname("a-very-long-name0").is_err());
        assert!(validate_ifname("br/0").is_err());
        assert!(validate_ifname("").is_err());
    }

    #[test]
    fn modes_round_trip_through_json() {
        let mode = NetworkMode::Bridge(BridgeConfig {
            publish: vec!["8080:80".parse().unwrap()],
            ..BridgeConfig::default()
        });
        let json = serde_json::to_string(&mode).unwrap();
        assert_eq!(serde_json::from_str::<NetworkMode>(&json).unwrap(), mode);
        let none = serde_json::to_string(&NetworkMode::None).unwrap();
        assert_eq!(none, r#"{"mode":"none"}"#);
    }
}
