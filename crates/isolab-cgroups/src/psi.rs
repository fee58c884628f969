//! Pressure stall information (PSI) of a cgroup: `cpu.pressure`, `memory.pressure`
//! and `io.pressure` of a v2 cgroup, or of the unified directory in hybrid mode.

use std::path::Path;
use std::time::Duration;

use crate::error::Error;
use crate::file;
use crate::format::{nested_keyed, Expected};

/// One PSI line: the share of wall time in which tasks stalled on the resource.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Psi {
    /// Percentage of the last 10 s (exponentially weighted).
    pub avg10: f64,
    /// Percentage of the last 60 s.
    pub avg60: f64,
    /// Percentage of the last 300 s.
    pub avg300: f64,
    /// Total stall time since the cgroup was created (cumulative: subtract two
    /// readings to get the stall time of an interval).
    pub total: Duration,
}

/// The lines of one pressure file.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PsiLines {
    /// Some tasks stalled.
    pub some: Psi,
    /// All non-idle tasks stalled at once (absent for cpu on kernels before 5.13).
    pub full: Option<Psi>,
}

/// The pressure files of a cgroup; a file that is absent or disabled is `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Pressure {
    /// `cpu.pressure`.
    pub cpu: Option<PsiLines>,
    /// `memory.pressure`.
    pub memory: Option<PsiLines>,
    /// `io.pressure`.
    pub io: Option<PsiLines>,
}

impl Psi {
    /// The interval from `before`: total stall time subtracted (0 if it went
    /// backwards), the averages as this reading has them.
    fn since(&self, before: &Psi) -> Psi {
        Psi {
            total: self.total.saturating_sub(before.total),
            ..*self
        }
    }

    /// Two cgroups' lines together: totals summed, averages the larger.
    fn plus(&self, other: &Psi) -> Psi {
        Psi {
            avg10: self.avg10.max(other.avg10),
            avg60: self.avg60.max(other.avg60),
            avg300: self.avg300.max(other.avg300),
            total: self.total + other.total,
        }
    }
}

impl PsiLines {
    fn combine(&self, other: &PsiLines, f: impl Fn(&Psi, &Psi) -> Psi) -> PsiLines {
        PsiLines {
            some: f(&self.some, &other.some),
            full: match (&self.full, &other.full) {
                (Some(x), Some(y)) => Some(f(x, y)),
                _ => None,
            },
        }
    }
}

impl Pressure {
    fn combine(&self, other: &Pressure, f: impl Fn(&Psi, &Psi) -> Psi + Copy) -> Pressure {
        let lines = |x: &Option<PsiLines>, y: &Option<PsiLines>| match (x, y) {
            (Some(x), Some(y)) => Some(x.combine(y, f)),
            _ => None,
        };
        Pressure {
            cpu: lines(&self.cpu, &other.cpu),
            memory: lines(&self.memory, &other.memory),
            io: lines(&self.io, &other.io),
        }
    }

    /// The interval from `before` (see [`crate::Stats::since`]); a file only one
    /// reading has is `None`.
    pub fn since(&self, before: &Pressure) -> Pressure {
        self.combine(before, Psi::since)
    }

    /// Two cgroups' pressure together (see [`crate::Stats::plus`]).
    pub fn plus(&self, other: &Pressure) -> Pressure {
        self.combine(other, Psi::plus)
    }
}

const EXPECTED: Expected =
    Expected("lines \"some|full avg10=F avg60=F avg300=F total=MICROSECONDS\"");

/// Parses a pressure file:
/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` and optionally a `full` line.
pub(crate) fn parse_pressure(text: &str) -> Result<PsiLines, Expected> {
    let mut some = None;
    let mut full = None;
    for (name, pairs) in nested_keyed(text)? {
        let mut psi = Psi::default();
        let mut seen = 0;
        for (key, value) in pairs {
            let avg = || value.parse::<f64>().map_err(|_| EXPECTED);
            match key {
                "avg10" => psi.avg10 = avg()?,
                "avg60" => psi.avg60 = avg()?,
                "avg300" => psi.avg300 = avg()?,
                "total" => {
                    psi.total = Duration::from_micros(value.parse().map_err(|_| EXPECTED)?);
                }
                _ => continue,
            }
            seen += 1;
        }
        if seen != 4 {
            return Err(EXPECTED);
        }
        match name {
            "some" => some = Some(psi),
            "full" => full = Some(psi),
            _ => {}
        }
    }
    Ok(PsiLines {
        some: some.ok_or(EXPECTED)?,
        full,
    })
}

/// Reads the pressure files in `dir`; `None` when none of them is provided.
pub(crate) fn read_pressure(dir: &Path) -> Result<Option<Pressure>, Error> {
    let read = |name: &str| file::read_parsed_opt(&dir.join(name), parse_pressure);
    let pressure = Pressure {
        cpu: read("cpu.pressure")?,
        memory: read("memory.pressure")?,
        io: read("io.pressure")?,
    };
    let any = pressure.cpu.is_some() || pressure.memory.is_some() || pressure.io.is_some();
    Ok(any.then_some(pressure))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_some_and_full() {
        let lines = parse_pressure(
            "some avg10=18.15 avg60=4.37 avg300=1.58 total=7376122\n\
             full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        )
        .unwrap();
        assert_eq!(lines.some.avg10, 18.15);
        assert_eq!(lines.some.avg60, 4.37);
        assert_eq!(lines.some.avg300, 1.58);
        assert_eq!(lines.some.total, Duration::from_micros(7_376_122));
        assert_eq!(lines.full.unwrap().total, Duration::ZERO);
    }

    #[test]
    fn full_is_optional_some_is_not() {
        let lines = parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n").unwrap();
        assert_eq!(lines.full, None);
        assert!(parse_pressure("full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n").is_err());
        assert!(parse_pressure("some avg10=x avg60=0.00 avg300=0.00 total=0\n").is_err());
        assert!(parse_pressure("some avg10=0.00 total=0\n").is_err());
        assert!(parse_pressure("").is_err());
    }

    #[test]
    fn reads_a_directory() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read_pressure(dir.path()).unwrap(), None);
        std::fs::write(
            dir.path().join("io.pressure"),
            "some avg10=1.00 avg60=0.00 avg300=0.00 total=10\n",
        )
        .unwrap();
        let p = read_pressure(dir.path()).unwrap().unwrap();
        assert_eq!(p.cpu, None);
        assert_eq!(p.io.unwrap().some.avg10, 1.0);
    }
}
