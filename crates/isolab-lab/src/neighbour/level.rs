//! Levels of the `neighbour` factor: `KIND`, `KIND*N` or `KIND@P%`.

use std::fmt;
use std::str::FromStr;

use super::kind::NeighbourKind;

/// Most instances a count may ask for (seed 001 went to 128 containers).
pub const MAX_COUNT: u32 = 256;

/// The syntax, for error messages.
const SYNTAX: &str = "expected KIND, KIND*N or KIND@P% (e.g. `cpu`, `disk*2`, `cpu@90%`) with KIND one of cpu, memory, fork, disk, network, cache (`network-tx`, `network-rx`: which way the network neighbours' traffic flows)";

/// How hard neighbours push.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Intensity {
    /// This many instances at full intensity (`cpu*4`; `cpu` is `cpu*1`).
    Count(u32),
    /// The contended resource used to this share (0.01..=1.0) in total, the
    /// subject included (`cpu@90%` is `Utilisation(0.90)`).
    Utilisation(f64),
}

/// Which way a network neighbour's traffic flows, seen from its instance (the
/// iperf3 client in its cgroup, under the reservation): seed 001's network transmit
/// (Table 5.8) and receive (Table 5.9) isolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum NetDirection {
    /// The instance sends (`network`, `network-tx`).
    #[default]
    Transmit,
    /// The instance receives: its client asks the server to send (`iperf3 -R`).
    Receive,
}

impl NetDirection {
    /// Its suffix in a level: `tx`, `rx`.
    pub fn as_str(self) -> &'static str {
        match self {
            NetDirection::Transmit => "tx",
            NetDirection::Receive => "rx",
        }
    }
}

/// A level of the `neighbour` factor.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct NeighbourLevel {
    /// What it stresses.
    pub kind: NeighbourKind,
    /// How hard.
    pub intensity: Intensity,
    /// For network neighbours written `network-tx` or `network-rx`: which way their
    /// traffic flows (`network` alone transmits).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<NetDirection>,
}

impl NeighbourLevel {
    /// Which way a network neighbour's traffic flows (transmit unless written `-rx`).
    pub fn net_direction(&self) -> NetDirection {
        self.direction.unwrap_or_default()
    }
}

/// A neighbour level that cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LevelError {
    /// The kind is not one isolab knows.
    #[error("unknown neighbour kind `{kind}` in `{level}`: {SYNTAX}")]
    UnknownKind {
        /// The level as written.
        level: String,
        /// The kind part.
        kind: String,
    },
    /// `*N` is not a count in 1..=MAX_COUNT.
    #[error("bad count in neighbour level `{level}`: N in KIND*N must be a whole number from 1 to {MAX_COUNT}; {SYNTAX}")]
    BadCount {
        /// The level as written.
        level: String,
    },
    /// `@P%` is not a percentage in 1..=100.
    #[error("bad utilisation in neighbour level `{level}`: P in KIND@P% must be a number from 1 to 100 followed by `%`; {SYNTAX}")]
    BadPercent {
        /// The level as written.
        level: String,
    },
}

impl FromStr for NeighbourLevel {
    type Err = LevelError;

    fn from_str(s: &str) -> Result<NeighbourLevel, LevelError> {
        let level = s.trim();
        let (kind_text, intensity) = if let Some((kind, n)) = level.split_once('*') {
            let n: u32 = n
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=MAX_COUNT).contains(n))
                .ok_or_else(|| LevelError::BadCount {
                    level: level.into(),
                })?;
            (kind, Intensity::Count(n))
        } else if let Some((kind, p)) = level.split_once('@') {
            let pct: f64 = p
                .trim()
                .strip_suffix('%')
                .and_then(|p| p.trim().parse().ok())
                .filter(|p: &f64| (1.0..=100.0).contains(p))
                .ok_or_else(|| LevelError::BadPercent {
                    level: level.into(),
                })?;
            (kind, Intensity::Utilisation(pct / 100.0))
        } else {
            (level, Intensity::Count(1))
        };
        let kind_text = kind_text.trim();
        let (kind_text, direction) = match kind_text {
            "network-tx" => ("network", Some(NetDirection::Transmit)),
            "network-rx" => ("network", Some(NetDirection::Receive)),
            other => (other, None),
        };
        let kind = NeighbourKind::ALL
            .into_iter()
            .find(|k| k.as_str() == kind_text)
            .ok_or_else(|| LevelError::UnknownKind {
                level: level.into(),
                kind: kind_text.into(),
            })?;
        Ok(NeighbourLevel {
            kind,
            intensity,
            direction,
        })
    }
}

/// A percentage without float noise: `90`, `92.5`.
pub(crate) fn percent_text(pct: f64) -> String {
    let rounded = (pct * 1000.0).round() / 1000.0;
    if rounded.fract() == 0.0 {
        format!("{rounded:.0}")
    } else {
        format!("{rounded}")
    }
}

impl fmt::Display for NeighbourLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.direction {
            Some(d) => format!("{}-{}", self.kind, d.as_str()),
            None => self.kind.to_string(),
        };
        match self.intensity {
            Intensity::Count(1) => write!(f, "{kind}"),
            Intensity::Count(n) => write!(f, "{kind}*{n}"),
            Intensity::Utilisation(u) => write!(f, "{kind}@{}%", percent_text(u * 100.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(s: &str) -> NeighbourLevel {
        s.parse().unwrap()
    }

    #[test]
    fn parses_counts_and_utilisations() {
        assert_eq!(
            level("cpu"),
            NeighbourLevel {
                kind: NeighbourKind::Cpu,
                intensity: Intensity::Count(1),
                direction: None,
            }
        );
        assert_eq!(level("cpu*4").intensity, Intensity::Count(4));
        assert_eq!(level("cpu@90%").intensity, Intensity::Utilisation(0.90));
        assert_eq!(level("disk@100%").intensity, Intensity::Utilisation(1.0));
        assert_eq!(level("network@1%").intensity, Intensity::Utilisation(0.01));
        for kind in NeighbourKind::ALL {
            assert_eq!(level(kind.as_str()).kind, kind);
        }
    }

    #[test]
    fn round_trips_through_display() {
        for s in [
            "cpu",
            "cpu*4",
            "cpu@90%",
            "cpu@100%",
            "disk*2",
            "memory*64",
            "network@92.5%",
            "cache",
            "fork*32",
        ] {
            assert_eq!(level(s).to_string(), s);
        }
        assert_eq!(level("cpu*1").to_string(), "cpu");
        assert_eq!(level(" disk @ 90 % ").to_string(), "disk@90%");
    }

    #[test]
    fn errors_say_the_syntax_and_kinds() {
        let e = "gpu@90%".parse::<NeighbourLevel>().unwrap_err();
        assert!(matches!(e, LevelError::UnknownKind { ref kind, .. } if kind == "gpu"));
        let text = e.to_string();
        assert!(text.contains("KIND@P%"), "{text}");
        assert!(
            text.contains("cpu, memory, fork, disk, network, cache"),
            "{text}"
        );
        for bad in ["cpu*0", "cpu*x", "cpu*-1", "cpu*100000"] {
            assert!(matches!(
                bad.parse::<NeighbourLevel>(),
                Err(LevelError::BadCount { .. })
            ));
        }
        for bad in ["cpu@0%", "cpu@101%", "cpu@90", "cpu@%", "cpu@NaN%"] {
            assert!(
                matches!(
                    bad.parse::<NeighbourLevel>(),
                    Err(LevelError::BadPercent { .. })
                ),
                "{bad}"
            );
        }
        assert!("".parse::<NeighbourLevel>().is_err());
        assert!("Cpu".parse::<NeighbourLevel>().is_err());
    }

    #[test]
    fn a_network_level_names_its_direction() {
        for (text, direction) in [
            ("network@90%", None),
            ("network-tx@90%", Some(NetDirection::Transmit)),
            ("network-rx*2", Some(NetDirection::Receive)),
        ] {
            let l = level(text);
            assert_eq!(l.kind, NeighbourKind::Network, "{text}");
            assert_eq!(l.direction, direction, "{text}");
            assert_eq!(l.to_string(), text);
        }
        assert_eq!(level("network").net_direction(), NetDirection::Transmit);
        assert_eq!(level("network-rx").net_direction(), NetDirection::Receive);
        assert!("cpu-rx".parse::<NeighbourLevel>().is_err());
    }
}
