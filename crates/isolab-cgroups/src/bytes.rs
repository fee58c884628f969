//! [`Bytes`]: a byte count, printed and parsed with binary units.

use std::fmt;
use std::str::FromStr;

use crate::error::InvalidValue;

/// A number of bytes (memory limits, memory usage, io counters).
///
/// Prints with the largest binary unit that keeps it readable: `"512 MiB"` when exact,
/// `"117.74 MiB"` (two decimals) otherwise. Parses `"1073741824"`, `"512MiB"`,
/// `"512 MiB"`, `"1G"`, `"1.5GiB"`; the suffixes `K`, `KB`, `KiB` (any case) all mean
/// 1024 as they do for the kernel's `memparse` and Docker, likewise `M`, `G`, `T`,
/// `P`, `E`. A fraction is rounded down to whole bytes.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Bytes(pub u64);

const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

const EXPECTED: &str = "a byte count such as \"1073741824\", \"512MiB\", \"1G\" or \"1.5 GiB\"";

impl Bytes {
    /// `n` kibibytes.
    pub const fn kib(n: u64) -> Bytes {
        Bytes(n << 10)
    }

    /// `n` mebibytes.
    pub const fn mib(n: u64) -> Bytes {
        Bytes(n << 20)
    }

    /// `n` gibibytes.
    pub const fn gib(n: u64) -> Bytes {
        Bytes(n << 30)
    }
}

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut exp = 0;
        while exp + 1 < UNITS.len() && self.0 >> (10 * (exp + 1)) > 0 {
            exp += 1;
        }
        let unit = 1u64 << (10 * exp);
        if self.0 & (unit - 1) == 0 {
            write!(f, "{} {}", self.0 / unit, UNITS[exp])
        } else {
            // Lossy by design: only for display.
            write!(f, "{:.2} {}", self.0 as f64 / unit as f64, UNITS[exp])
        }
    }
}

impl FromStr for Bytes {
    type Err = InvalidValue;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidValue::new("byte count", s, EXPECTED);
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (number, suffix) = t.split_at(split);
        let shift = match suffix.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 0,
            "k" | "kb" | "kib" => 10,
            "m" | "mb" | "mib" => 20,
            "g" | "gb" | "gib" => 30,
            "t" | "tb" | "tib" => 40,
            "p" | "pb" | "pib" => 50,
            "e" | "eb" | "eib" => 60,
            _ => return Err(invalid()),
        };
        let (int, frac) = number.split_once('.').unwrap_or((number, ""));
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        if frac.len() > 18 || !frac.bytes().all(|b| b.is_ascii_digit()) {
            return Err(invalid());
        }
        let int: u128 = int.parse().map_err(|_| invalid())?;
        let mut total = int.checked_shl(shift).ok_or_else(invalid)?;
        if !frac.is_empty() {
            let digits: u128 = frac.parse().map_err(|_| invalid())?;
            let scale = 10u128.pow(frac.len() as u32);
            total += (digits << shift) / scale;
        }
        u64::try_from(total).map(Bytes).map_err(|_| invalid())
    }
}

impl From<u64> for Bytes {
    fn from(n: u64) -> Bytes {
        Bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(s: &str) -> u64 {
        s.parse::<Bytes>().unwrap().0
    }

    #[test]
    fn parses_suffixes() {
        assert_eq!(b("1073741824"), 1 << 30);
        assert_eq!(b("512MiB"), 512 << 20);
        assert_eq!(b("512 MiB"), 512 << 20);
        assert_eq!(b("1G"), 1 << 30);
        assert_eq!(b("1g"), 1 << 30);
        assert_eq!(b("4k"), 4096);
        assert_eq!(b("1.5GiB"), 3 << 29);
        assert_eq!(b("0.5 K"), 512);
        assert_eq!(b("7 B"), 7);
        assert_eq!(b("15E"), 15 << 60);
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "", "MiB", "1 XB", "-1", "1..2G", ".5G", "16E", "1 G B", "1,5G",
        ] {
            assert!(bad.parse::<Bytes>().is_err(), "{bad}");
        }
    }

    #[test]
    fn displays_readably() {
        assert_eq!(Bytes(0).to_string(), "0 B");
        assert_eq!(Bytes(1023).to_string(), "1023 B");
        assert_eq!(Bytes::mib(512).to_string(), "512 MiB");
        assert_eq!(Bytes::gib(8).to_string(), "8 GiB");
        assert_eq!(Bytes(1536 << 20).to_string(), "1.50 GiB");
        assert_eq!(Bytes(123_456_789).to_string(), "117.74 MiB");
        assert_eq!(Bytes(u64::MAX).to_string(), "16.00 EiB");
    }

    #[test]
    fn exact_displays_round_trip() {
        for n in [0, 1, 4096, 512 << 20, 3 << 40] {
            assert_eq!(Bytes(n).to_string().parse::<Bytes>().unwrap(), Bytes(n));
        }
    }
}
