//! Published ports (`--publish HOST:CONTAINER[/PROTO]`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::NetworkError;

/// Transport protocol of a published port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Proto {
    /// TCP (the default).
    #[default]
    Tcp,
    /// UDP.
    Udp,
}

impl Proto {
    /// The lowercase name CNI and iptables use.
    pub fn as_str(self) -> &'static str {
        match self {
            Proto::Tcp => "tcp",
            Proto::Udp => "udp",
        }
    }
}

impl fmt::Display for Proto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One port published from the host into the container (DNAT by the CNI `portmap` plugin).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Publish {
    /// Port on every host address.
    pub host_port: u16,
    /// Port inside the container.
    pub container_port: u16,
    /// Protocol.
    pub protocol: Proto,
}

impl fmt::Display for Publish {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}/{}",
            self.host_port, self.container_port, self.protocol
        )
    }
}

fn parse_port(spec: &str, what: &str, s: &str) -> Result<u16, NetworkError> {
    match s.parse::<u16>() {
        Ok(0) | Err(_) => Err(NetworkError::InvalidPublish {
            spec: spec.to_owned(),
            reason: format!("{what} port {s:?} is not a number from 1 to 65535"),
        }),
        Ok(p) => Ok(p),
    }
}

impl FromStr for Publish {
    type Err = NetworkError;

    /// Parses `8080:80`, `8080:80/tcp` or `8080:80/udp`.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let (ports, proto) = match spec.split_once('/') {
            None => (spec, Proto::Tcp),
            Some((ports, "tcp")) => (ports, Proto::Tcp),
            Some((ports, "udp")) => (ports, Proto::Udp),
            Some((_, other)) => {
                return Err(NetworkError::InvalidPublish {
                    spec: spec.to_owned(),
                    reason: format!("protocol {other:?} is neither tcp nor udp"),
                })
            }
        };
        let Some((host, container)) = ports.split_once(':') else {
            return Err(NetworkError::InvalidPublish {
                spec: spec.to_owned(),
                reason: "missing ':' between host and container port".to_owned(),
            });
        };
        Ok(Publish {
            host_port: parse_port(spec, "host", host)?,
            container_port: parse_port(spec, "container", container)?,
            protocol: proto,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_tcp_by_default_and_udp_on_request() {
        let p: Publish = "8080:80".parse().unwrap();
        assert_eq!(
            p,
            Publish {
                host_port: 8080,
                container_port: 80,
                protocol: Proto::Tcp
            }
        );
        let p: Publish = "5353:53/udp".parse().unwrap();
        assert_eq!(p.protocol, Proto::Udp);
        assert_eq!(p.to_string(), "5353:53/udp");
        let p: Publish = "1:65535/tcp".parse().unwrap();
        assert_eq!(p.container_port, 65535);
    }

    #[test]
    fn rejects_bad_mappings_with_a_reason() {
        for bad in [
            "8080",
            "8080:",
            ":80",
            "0:80",
            "8080:70000",
            "a:80",
            "8080:80/sctp",
            "",
        ] {
            let err = bad.parse::<Publish>().unwrap_err();
            assert!(
                matches!(err, NetworkError::InvalidPublish { .. }),
                "{bad}: {err}"
            );
            assert!(err.to_string().contains("HOST:CONTAINER"));
        }
    }
}
