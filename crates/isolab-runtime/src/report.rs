//! [`Report`]: how one container ended, as the JSON file `isolab-runtime run --report
//! FILE` writes and the lab reads back with the same type.
//!
//! ```json
//! {"id": "c1", "cgroup": "isolab/rt-c1", "status": 0,
//!  "trace": {"cgroup_us": 310, "clone_us": 402, …, "exit_us": 5120},
//!  "limits": {…}, "stats": {…}, "notes": [], "error": null}
//! ```
//!
//! `trace` is the object [`crate::trace_json`] prints; `limits` and `stats` are
//! `isolab_cgroups::Limits` and `isolab_cgroups::Stats` as serde writes them. When the
//! runtime itself failed (exit status 125) `status` is `null` and `error` holds the
//! message. The file is replaced atomically ([`Report::write`]): a reader never sees
//! half a report.

use std::fmt;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use isolab_cgroups::{Limits, Stats};
use serde::{Deserialize, Serialize};

use crate::config::ContainerConfig;
use crate::container::Exit;
use crate::error::RuntimeError;
use crate::trace::{Phase, Trace};

/// How one container ended (or why the runtime failed), for `--report FILE`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The container id.
    pub id: String,
    /// Its cgroup, relative to the cgroup mounts (`<cgroup_parent>/rt-<id>`); empty when
    /// the configuration could not be built.
    pub cgroup: PathBuf,
    /// The command's exit code or 128 + signal; `None` when the runtime failed.
    pub status: Option<i32>,
    /// Phase timestamps, as `{"<phase>_us": microseconds, …}` in phase order.
    #[serde(with = "trace_map")]
    pub trace: Trace,
    /// The limits read back from the cgroup ([`Exit::limits`]).
    pub limits: Limits,
    /// The cgroup's counters after the container exited ([`Exit::stats`]).
    pub stats: Option<Stats>,
    /// See [`Exit::notes`].
    pub notes: Vec<String>,
    /// Why the runtime failed (exit status 125); `None` when the container ran.
    pub error: Option<String>,
}

impl Report {
    /// The report of a container that ran.
    pub fn from_exit(config: &ContainerConfig, exit: &Exit) -> Report {
        Report {
            id: config.id.to_string(),
            cgroup: config.cgroup_rel(),
            status: Some(exit.status),
            trace: exit.trace.clone(),
            limits: exit.limits.clone(),
            stats: exit.stats.clone(),
            notes: exit.notes.clone(),
            error: None,
        }
    }

    /// The report of a run where the runtime failed: `status` null, `error` set.
    /// `id` and `cgroup` may be empty when no configuration could be built.
    pub fn failed(id: &str, cgroup: &Path, error: impl fmt::Display) -> Report {
        Report {
            id: id.to_owned(),
            cgroup: cgroup.to_owned(),
            status: None,
            trace: Trace::new(),
            limits: Limits::default(),
            stats: None,
            notes: Vec::new(),
            error: Some(error.to_string()),
        }
    }

    /// Writes the report as JSON to `<path>.tmp`, then renames it to `path`.
    pub fn write(&self, path: &Path) -> Result<(), RuntimeError> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        // Plain data (no maps with non-string keys): serialising cannot fail.
        let mut json = serde_json::to_vec_pretty(self).unwrap_or_default();
        json.push(b'\n');
        fs::write(&tmp, json).map_err(|source| RuntimeError::Host {
            op: "write the report",
            path: tmp.clone(),
            source,
        })?;
        fs::rename(&tmp, path).map_err(|source| {
            let _ = fs::remove_file(&tmp);
            RuntimeError::Host {
                op: "rename the report into place",
                path: path.to_owned(),
                source,
            }
        })
    }

    /// Reads a report written by [`Report::write`].
    pub fn read(path: &Path) -> Result<Report, RuntimeError> {
        let text = fs::read(path).map_err(|source| RuntimeError::Host {
            op: "read the report",
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_slice(&text).map_err(|source| RuntimeError::ReportParse {
            path: path.to_owned(),
            source,
        })
    }
}

/// A [`Trace`] as the object `{"<phase>_us": microseconds, …}`, order kept.
mod trace_map {
    use super::*;
    use serde::de::{Error as _, MapAccess, Visitor};
    use serde::ser::SerializeMap;
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(trace: &Trace, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(trace.len()))?;
        for (phase, at) in trace {
            let micros = u64::try_from(at.as_micros()).unwrap_or(u64::MAX);
            map.serialize_entry(&format!("{}_us", phase.name()), &micros)?;
        }
        map.end()
    }

    struct TraceVisitor;

    impl<'de> Visitor<'de> for TraceVisitor {
        type Value = Trace;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object of \"<phase>_us\": microseconds")
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Trace, A::Error> {
            let mut trace = Trace::new();
            while let Some((key, micros)) = map.next_entry::<String, u64>()? {
                let phase = key
                    .strip_suffix("_us")
                    .and_then(Phase::from_name)
                    .ok_or_else(|| A::Error::custom(format!("unknown trace key {key:?}")))?;
                trace.push((phase, Duration::from_micros(micros)));
            }
            Ok(trace)
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Trace, D::Error> {
        d.deserialize_map(TraceVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Rootfs;
    use isolab_cgroups::{Bytes, CpuQuota};

    fn exit() -> Exit {
        Exit {
            status: 3,
            trace: vec![
                (Phase::Cgroup, Duration::from_micros(10)),
                (Phase::Clone, Duration::from_micros(250)),
                (Phase::Exec, Duration::from_micros(900)),
                (Phase::Exit, Duration::from_micros(1500)),
            ],
            limits: Limits {
                cpu: Some(CpuQuota::from_cpus(0.5, CpuQuota::DEFAULT_PERIOD).unwrap()),
                cpuset: Some("0".parse().unwrap()),
                memory_max: Some(Bytes::mib(64)),
                ..Limits::default()
            },
            stats: Some(Stats {
                cpu_usage: Some(Duration::from_millis(12)),
                memory_peak: Some(Bytes(1 << 20)),
                ..Stats::default()
            }),
            notes: vec!["a note".into()],
        }
    }

    fn config() -> ContainerConfig {
        let mut c = ContainerConfig::new(
            Rootfs::Dir {
                path: "/r".into(),
                readonly: false,
            },
            vec!["true".into()],
        );
        c.id = "r1".parse().unwrap();
        c.cgroup_parent = "isolab/lab".into();
        c
    }

    #[test]
    fn json_round_trip_and_shape() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        let report = Report::from_exit(&config(), &exit());
        report.write(&path).unwrap();
        assert!(!dir.path().join("report.json.tmp").exists());
        assert_eq!(Report::read(&path).unwrap(), report);
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["id"], "r1");
        assert_eq!(v["cgroup"], "isolab/lab/rt-r1");
        assert_eq!(v["status"], 3);
        assert_eq!(v["error"], serde_json::Value::Null);
        assert_eq!(v["notes"][0], "a note");
        // The trace is exactly what trace_json prints.
        let printed: serde_json::Value =
            serde_json::from_str(&crate::trace_json(&report.trace)).unwrap();
        assert_eq!(v["trace"], printed);
        assert_eq!(v["trace"]["clone_us"], 250);
        let keys: Vec<&String> = v["trace"].as_object().unwrap().keys().collect();
        assert_eq!(keys.len(), 4);
    }

    #[test]
    fn failure_report() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        Report::failed("r2", Path::new("isolab/rt-r2"), "no such root")
            .write(&path)
            .unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["status"], serde_json::Value::Null);
        assert_eq!(v["error"], "no such root");
        assert_eq!(v["stats"], serde_json::Value::Null);
        let back = Report::read(&path).unwrap();
        assert_eq!(back.status, None);
        assert!(back.trace.is_empty());
    }

    #[test]
    fn bad_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.json");
        assert!(matches!(
            Report::read(&path),
            Err(RuntimeError::Host { .. })
        ));
        fs::write(&path, r#"{"id": "x", "trace": {"bogus_us": 1}}"#).unwrap();
        let e = Report::read(&path).unwrap_err();
        assert!(matches!(e, RuntimeError::ReportParse { .. }), "{e}");
        assert!(Report::failed("x", Path::new(""), "e")
            .write(&dir.path().join("missing/r.json"))
            .is_err());
    }
}
