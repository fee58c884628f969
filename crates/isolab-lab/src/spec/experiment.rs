//! `[experiment]`: the name, repetitions, order, what to do with impossible cells, the
//! seed, duration, timeout, latency probe and image directory. Its `baseline` names
//! levels of the matrix, so the matrix checks it (`matrix.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use super::raw::{RawExperiment, RawLevel, RawRepetitions};
use super::validator::Validator;
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
    /// `image` when it names a container image of one's own (`docker-archive:FILE`, …).
    pub(super) image_ref: Option<isolab_image::ImageReference>,
    /// `noise`: the verdicts' Δ.
    pub(super) noise: f64,
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
        let (image, image_ref) = self.image(raw.image.as_ref());
        let noise = self.noise(raw.noise.as_ref());
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
            image_ref,
            noise,
        };
        (settings, raw.baseline)
    }

    /// `noise`: the Δ of the verdict rule, a fraction in (0, 1); 2% when not given.
    fn noise(&mut self, raw: Option<&Spanned<f64>>) -> f64 {
        let Some(raw) = raw else {
            return super::DEFAULT_NOISE;
        };
        let v = *raw.get_ref();
        if v.is_finite() && v > 0.0 && v < 1.0 {
            v
        } else {
            self.err(
                raw.span(),
                format!("noise is the smallest change that matters, a fraction between 0 and 1 (0.01 = 1%), got {v}"),
            );
            super::DEFAULT_NOISE
        }
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
        let words = [
            ("interleaved", Order::Interleaved),
            ("sequential", Order::Sequential),
        ];
        self.one_of(raw, words, |other| {
            format!("unknown order `{other}`: expected `interleaved` or `sequential`")
        })
    }

    fn impossible(&mut self, raw: Option<&Spanned<String>>) -> Impossible {
        let words = [("error", Impossible::Error), ("skip", Impossible::Skip)];
        self.one_of(raw, words, |other| {
            format!("unknown value `{other}` for impossible: expected `error` or `skip`")
        })
    }

    /// The value of the word `raw` names among `words`, the first's when it is absent;
    /// another word is an error (`unknown` says so) and gives the first's.
    fn one_of<T: Copy>(
        &mut self,
        raw: Option<&Spanned<String>>,
        words: [(&str, T); 2],
        unknown: impl Fn(&str) -> String,
    ) -> T {
        let Some(raw) = raw else { return words[0].1 };
        match words.iter().find(|(w, _)| w == raw.get_ref()) {
            Some((_, v)) => *v,
            None => {
                self.err(raw.span(), unknown(raw.get_ref()));
                words[0].1
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

    /// `image`: a directory, or a container image of one's own named as skopeo names it
    /// (`docker-archive:FILE`, `oci:DIR[:TAG]`, …); paths relative to the spec's directory.
    /// An image reference's directory is known once it is imported (`isolab run`): until
    /// then the reference stands in its place.
    fn image(
        &mut self,
        raw: Option<&Spanned<String>>,
    ) -> (PathBuf, Option<isolab_image::ImageReference>) {
        let spec_dir = Path::new(&self.source.name).parent().map(Path::to_path_buf);
        let relative = |path: PathBuf| match &spec_dir {
            Some(dir) if path.is_relative() => dir.join(path),
            _ => path,
        };
        match raw {
            None => (PathBuf::from(DEFAULT_IMAGE), None),
            Some(i) if i.get_ref().trim().is_empty() => {
                self.err(
                    i.span(),
                    "image must be a directory path, e.g. \"/var/lib/isolab/images/bench\", or a container image such as \"docker-archive:app.tar\"",
                );
                (PathBuf::from(DEFAULT_IMAGE), None)
            }
            Some(i) => match isolab_image::ImageReference::parse(i.get_ref()) {
                None => (relative(PathBuf::from(i.get_ref())), None),
                Some(Err(e)) => {
                    self.err(i.span(), e.to_string());
                    (PathBuf::from(DEFAULT_IMAGE), None)
                }
                Some(Ok(mut r)) => {
                    if let Some(path) = r.path().filter(|p| p.is_relative()) {
                        let rest = &r.name[path.as_os_str().len()..];
                        r.name = format!("{}{rest}", relative(path).display());
                    }
                    (PathBuf::from(r.to_string()), Some(r))
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, parse};
    use crate::spec::Order;
    use std::time::Duration;

    #[test]
    fn repetitions_and_durations_are_validated() {
        let errs = errors("[experiment]\nname = \"x\"\nrepetitions = { min = 1, target_cv = 5 }\nduration = \"fast\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(errs.len(), 3, "{errs:?}");
        assert!(errs[0].contains("repetitions.min must be a whole number ≥ 2"));
        assert!(errs[1].contains("target_cv must be a fraction"));
        assert!(errs[2].contains("invalid duration `fast`"));
    }

    #[test]
    fn noise_sets_the_verdicts_threshold_and_is_a_small_fraction() {
        let spec = |noise: &str| {
            format!(
                "[experiment]\nname = \"x\"\n{noise}\n[matrix]\nworkload = [\"sysbench-cpu\"]\n"
            )
        };
        let default = parse(&spec("")).unwrap();
        assert_eq!(default.noise, crate::spec::DEFAULT_NOISE);
        assert_eq!(default.verdict_rule(), isolab_stats::VerdictRule::default());
        let fine = parse(&spec("noise = 0.005")).unwrap();
        assert_eq!(fine.verdict_rule().noise, 0.005);
        assert_eq!(fine.verdict_rule().alpha, 0.05);
        for bad in ["noise = 0.0", "noise = 1.0", "noise = -0.01"] {
            let errs = errors(&spec(bad));
            assert!(
                errs[0].starts_with("exp.toml:3:9: noise is the smallest change that matters"),
                "{errs:?}"
            );
        }
    }

    #[test]
    fn the_probe_threshold_is_a_duration_or_off() {
        let spec = parse("[experiment]\nname = \"x\"\nprobe_threshold = \"2s\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        let probe = spec.probe.unwrap();
        assert_eq!(probe.threshold, std::time::Duration::from_secs(2));
        assert_eq!(
            probe.sustained_limit(),
            std::time::Duration::from_millis(400)
        );
        let off = parse("[experiment]\nname = \"x\"\nprobe_threshold = \"off\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert!(off.probe.is_none());
        let errs = errors("[experiment]\nname = \"x\"\nprobe_threshold = \"1ms\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert!(
            errs[0].starts_with("exp.toml:3:19: invalid probe_threshold `1ms`"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_run_s_timeout_defaults_from_the_duration_and_can_be_raised() {
        let base =
            "[experiment]\nname = \"x\"\nduration = \"10s\"\n[matrix]\nworkload = [\"hpl\"]\n";
        assert_eq!(parse(base).unwrap().timeout, Duration::from_secs(160));
        let raised = base.replace(
            "duration = \"10s\"",
            "duration = \"10s\"\ntimeout = \"30m\"",
        );
        assert_eq!(parse(&raised).unwrap().timeout, Duration::from_secs(1800));
        let short = base.replace("duration = \"10s\"", "duration = \"10s\"\ntimeout = \"5s\"");
        assert_eq!(
            errors(&short),
            ["exp.toml:4:11: timeout must be at least the duration (10s)"]
        );
    }

    #[test]
    fn order_seed_and_impossible_are_read() {
        let spec = parse("[experiment]\nname = \"x\"\norder = \"sequential\"\nseed = 7\nimpossible = \"skip\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(spec.order, Order::Sequential);
        assert_eq!(spec.seed, Some(7));
        assert_eq!(spec.duration, Duration::from_secs(10));
    }

    #[test]
    fn a_bad_name_order_seed_or_impossible_is_an_error_at_the_value() {
        let errs = errors("[experiment]\nname = \"42\"\norder = \"random\"\nseed = -1\nimpossible = \"maybe\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(
            errs,
            [
                "exp.toml:2:8: experiment name must be non-empty and not a number (numbers are experiment ids)",
                "exp.toml:3:9: unknown order `random`: expected `interleaved` or `sequential`",
                "exp.toml:4:8: seed must be a non-negative integer",
                "exp.toml:5:14: unknown value `maybe` for impossible: expected `error` or `skip`",
            ]
        );
    }
}
