//! `[experiment]`: the name, repetitions, order, what to do with impossible cells, the
//! seed, duration, timeout, latency probe and image directory. Its `baseline` names
//! levels of the matrix, so the matrix checks it (`matrix.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use super::check::Validator;
use super::raw::{RawExperiment, RawLevel, RawRepetitions};
use super::{Impossible, Order, Repetitions, DEFAULT_IMAGE};
use crate::probe::ProbeConfig;

/// `[experiment] baseline` as written.
pub(super) type RawBaseline = Option<Spanned<BTreeMap<String, Spanned<RawLevel>>>>;

/// `[experiment]` checked, but for its `baseline`.
pub(super) struct Settings {
    pub(super) name: String,
    pub(super) description: Option<String>,
    pub(super) repetitions: Repetitions,
    pub(super) order: Order,
    pub(super) impossible: Impossible,
    pub(super) seed: Option<u64>,
    pub(super) duration: Duration,
    pub(super) timeout: Duration,
    pub(super) probe: Option<ProbeConfig>,
    /// `image`, relative to the spec's directory, else [`DEFAULT_IMAGE`].
    pub(super) image: PathBuf,
    /// Whether the table has an `image` key (then `[image]` is an error).
    pub(super) image_given: bool,
}

impl Validator<'_> {
    /// The `[experiment]` table's settings, and its `baseline` for the matrix to check.
    pub(super) fn experiment(&mut self, raw: RawExperiment) -> (Settings, RawBaseline) {
        let name = self.experiment_name(&raw.name);
        let repetitions = self.repetitions(raw.repetitions);
        let order = self.order(raw.order.as_ref());
        let impossible = self.impossible(raw.impossible.as_ref());
        let seed = self.seed(raw.seed);
        let duration = self.run_duration(raw.duration);
        let timeout = self.run_timeout(raw.timeout, duration);
        let probe = self.probe(raw.probe_threshold.as_ref());
        let image = self.image_dir(raw.image.as_ref());
        let settings = Settings {
            name,
            description: raw.description,
            repetitions,
            order,
            impossible,
            seed,
            duration,
            timeout,
            probe,
            image,
            image_given: raw.image.is_some(),
        };
        (settings, raw.baseline)
    }

    fn experiment_name(&mut self, raw: &Spanned<String>) -> String {
        let name = raw.get_ref().trim().to_owned();
        if name.is_empty() || name.parse::<i64>().is_ok() {
            self.err(
                raw.span(),
                "experiment name must be non-empty and not a number (numbers are experiment ids)",
            );
        }
        name
    }

    fn repetitions(&mut self, raw: Option<Spanned<RawRepetitions>>) -> Repetitions {
        let mut r = Repetitions::default();
        let Some(raw) = raw else { return r };
        let span = raw.span();
        let raw = raw.into_inner();
        let mut count = |v: Option<Spanned<i64>>, name: &str, least: i64| -> Option<u32> {
            let v = v?;
            match u32::try_from(*v.get_ref()) {
                Ok(n) if i64::from(n) >= least => Some(n),
                _ => {
                    self.errors.push(self.source.error(
                        Some(v.span()),
                        format!("repetitions.{name} must be a whole number ≥ {least}"),
                    ));
                    None
                }
            }
        };
        if let Some(w) = count(raw.warmup, "warmup", 0) {
            r.warmup = w;
        }
        if let Some(m) = count(raw.min, "min", 2) {
            r.min = m;
            r.max = r.max.max(m);
        }
        if let Some(m) = count(raw.max, "max", 2) {
            r.max = m;
        }
        if let Some(cv) = raw.target_cv {
            let v = *cv.get_ref();
            if v.is_finite() && v > 0.0 && v < 1.0 {
                r.target_cv = v;
            } else {
                self.err(
                    cv.span(),
                    "repetitions.target_cv must be a fraction between 0 and 1, e.g. 0.05 for 5%",
                );
            }
        }
        if r.max < r.min {
            self.err(
                span,
                format!(
                    "repetitions.max ({}) is below repetitions.min ({})",
                    r.max, r.min
                ),
            );
        }
        r
    }

    fn order(&mut self, raw: Option<&Spanned<String>>) -> Order {
        match raw.map(|o| (o.get_ref().as_str(), o.span())) {
            None | Some(("interleaved", _)) => Order::Interleaved,
            Some(("sequential", _)) => Order::Sequential,
            Some((other, span)) => {
                self.err(
                    span,
                    format!("unknown order `{other}`: expected `interleaved` or `sequential`"),
                );
                Order::Interleaved
            }
        }
    }

    fn impossible(&mut self, raw: Option<&Spanned<String>>) -> Impossible {
        match raw.map(|o| (o.get_ref().as_str(), o.span())) {
            None | Some(("error", _)) => Impossible::Error,
            Some(("skip", _)) => Impossible::Skip,
            Some((other, span)) => {
                self.err(
                    span,
                    format!("unknown value `{other}` for impossible: expected `error` or `skip`"),
                );
                Impossible::Error
            }
        }
    }

    fn seed(&mut self, raw: Option<Spanned<i64>>) -> Option<u64> {
        raw.and_then(|s| match u64::try_from(*s.get_ref()) {
            Ok(v) => Some(v),
            Err(_) => {
                self.err(s.span(), "seed must be a non-negative integer");
                None
            }
        })
    }

    /// `duration`: the length of time-bound workloads, 10 s unless given.
    fn run_duration(&mut self, raw: Option<Spanned<String>>) -> Duration {
        let Some(d) = raw else {
            return Duration::from_secs(10);
        };
        match humantime::parse_duration(d.get_ref()) {
            Ok(v) if v >= Duration::from_secs(1) => v,
            Ok(_) => {
                self.err(
                    d.span(),
                    "duration must be at least 1s (tools take whole seconds)",
                );
                Duration::from_secs(1)
            }
            Err(e) => {
                self.err(
                    d.span(),
                    format!(
                        "invalid duration `{}`: {e}; expected e.g. \"10s\" or \"2m\"",
                        d.get_ref()
                    ),
                );
                Duration::from_secs(10)
            }
        }
    }

    /// `timeout`: at least `duration`; four times it plus two minutes unless given.
    fn run_timeout(&mut self, raw: Option<Spanned<String>>, duration: Duration) -> Duration {
        let default = duration * 4 + Duration::from_secs(120);
        let Some(t) = raw else { return default };
        match humantime::parse_duration(t.get_ref()) {
            Ok(v) if v >= duration => v,
            Ok(_) => {
                self.err(
                    t.span(),
                    format!(
                        "timeout must be at least the duration ({})",
                        humantime::format_duration(duration)
                    ),
                );
                default
            }
            Err(e) => {
                self.err(
                    t.span(),
                    format!(
                        "invalid timeout `{}`: {e}; expected e.g. \"10m\"",
                        t.get_ref()
                    ),
                );
                default
            }
        }
    }

    /// `probe_threshold`: a duration of at least 50 ms, or `off`.
    fn probe(&mut self, raw: Option<&Spanned<String>>) -> Option<ProbeConfig> {
        let Some(t) = raw else {
            return Some(ProbeConfig::default());
        };
        if t.get_ref() == "off" {
            return None;
        }
        match humantime::parse_duration(t.get_ref()) {
            Ok(v) if v >= Duration::from_millis(50) => Some(ProbeConfig {
                threshold: v,
                ..ProbeConfig::default()
            }),
            _ => {
                self.err(
                    t.span(),
                    format!(
                        "invalid probe_threshold `{}`: expected a duration of at least 50ms (e.g. \"500ms\", \"2s\") or \"off\"",
                        t.get_ref()
                    ),
                );
                None
            }
        }
    }

    /// `image`: a directory, relative to the spec's directory.
    fn image_dir(&mut self, raw: Option<&Spanned<String>>) -> PathBuf {
        match raw {
            None => PathBuf::from(DEFAULT_IMAGE),
            Some(i) if i.get_ref().trim().is_empty() => {
                self.err(
                    i.span(),
                    "image must be a directory path, e.g. \"/var/lib/isolab/images/bench\"",
                );
                PathBuf::from(DEFAULT_IMAGE)
            }
            Some(i) => {
                let path = PathBuf::from(i.get_ref());
                match Path::new(&self.source.name).parent() {
                    Some(dir) if path.is_relative() => dir.join(path),
                    _ => path,
                }
            }
        }
    }
}
