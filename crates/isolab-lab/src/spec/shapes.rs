//! `[shape.NAME]` tables over the built-in shapes, the matrix's `shape` levels, and the
//! cell a shape makes impossible: pinned to more cpus than the host offers.

use std::collections::BTreeMap;

use isolab_cgroups::Bytes;
use toml::Spanned;

use super::matrix::{Level, Levels};
use super::raw::{RawCpus, RawShape};
use super::validator::{list, Validator};
use super::HostFacts;
use crate::shape::{builtin_shapes, parse_millicpus, Placement, Shape, QUOTA_PERIOD};

/// The shortest CFS period (and quota) the kernel accepts.
const MIN_PERIOD: std::time::Duration = std::time::Duration::from_millis(1);
/// The longest CFS period the kernel accepts.
const MAX_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

impl Validator<'_> {
    /// The built-in shapes, then the spec's own (which may override a built-in name).
    pub(super) fn shapes(
        &mut self,
        raw: BTreeMap<String, Spanned<RawShape>>,
    ) -> BTreeMap<String, Shape> {
        let builtins = builtin_shapes(self.host_cpus());
        self.named(builtins, |s| s.name.clone(), raw, Self::shape).0
    }

    fn shape(&mut self, name: String, raw: Spanned<RawShape>) -> Option<Shape> {
        let raw = raw.into_inner();
        let before = self.errors.len();
        let written = match raw.cpus.get_ref() {
            RawCpus::Whole(n) => n.to_string(),
            RawCpus::Fraction(f) => f.to_string(),
            RawCpus::Text(t) => t.clone(),
        };
        let millicpus = match parse_millicpus(&written) {
            Ok(m) => m,
            Err(e) => {
                self.err(raw.cpus.span(), format!("shape.{name}.cpus: {e}"));
                1000
            }
        };
        let cpu_period = match raw.cpu_period {
            None => QUOTA_PERIOD,
            Some(p) => match humantime::parse_duration(p.get_ref()) {
                Ok(d) if (MIN_PERIOD..=MAX_PERIOD).contains(&d) => d,
                Ok(_) | Err(_) => {
                    self.err(
                        p.span(),
                        format!(
                            "shape.{name}.cpu_period `{}` is not a CFS period: expected a duration from 1ms to 1s, such as \"10ms\" or \"100ms\"",
                            p.get_ref()
                        ),
                    );
                    QUOTA_PERIOD
                }
            },
        };
        let whole = Shape {
            millicpus,
            cpu_period,
            ..Shape::whole(&name, millicpus.div_ceil(1000))
        };
        if whole.quota().quota < MIN_PERIOD {
            self.err(
                raw.cpus.span(),
                format!(
                    "shape.{name}: {} cpus of a {} period is a quota under 1ms, which the kernel refuses; ask for more cpus or a longer cpu_period",
                    whole.cpu_count(),
                    humantime::format_duration(cpu_period)
                ),
            );
        }
        let mut bytes = |v: Option<Spanned<String>>, what: &str| -> Option<u64> {
            let v = v?;
            match v.get_ref().parse::<Bytes>() {
                Ok(b) => Some(b.0),
                Err(e) => {
                    self.errors.push(self.source.error(
                        Some(v.span()),
                        format!("shape.{name}.{what}: {e}; expected e.g. \"512MiB\" or \"4GiB\""),
                    ));
                    None
                }
            }
        };
        let memory = bytes(raw.memory, "memory").map(Bytes);
        let io_read_bps = bytes(raw.io_read_bps, "io_read_bps");
        let io_write_bps = bytes(raw.io_write_bps, "io_write_bps");
        let pids = raw.pids.and_then(|p| match u64::try_from(*p.get_ref()) {
            Ok(v) if v >= 1 => Some(v),
            _ => {
                self.err(
                    p.span(),
                    format!("shape.{name}.pids must be a whole number ≥ 1"),
                );
                None
            }
        });
        (self.errors.len() == before).then_some(Shape {
            memory,
            pids,
            io_read_bps,
            io_write_bps,
            ..whole
        })
    }

    /// `matrix.shape`: each a built-in shape or a `[shape.NAME]` table; `full` unless given.
    pub(super) fn shape_levels(
        &mut self,
        raw: Levels,
        shapes: &BTreeMap<String, Shape>,
    ) -> Vec<Level> {
        let shape_names: Vec<String> = shapes.keys().cloned().collect();
        self.levels("shape", raw, &["full"], |l| {
            if shapes.contains_key(l) {
                Ok(())
            } else {
                Err(format!(
                    "unknown shape `{l}`: expected one of {} or a [shape.{l}] table",
                    list(&shape_names)
                ))
            }
        })
    }
}

/// Why shape `s` cannot be pinned on `host`, if it cannot: it asks for part of a
/// cpu, which no cpuset grants, or it has more cpus than the host.
pub(super) fn pinning_impossible(
    s: &str,
    shape: &Shape,
    placement: Placement,
    host: &HostFacts,
) -> Option<String> {
    let host_cpus = host.cpus.len() as u32;
    if placement.pins() && shape.is_fractional() {
        return Some(format!(
            "{placement} shape `{s}` asks for {} cpus, but a cpuset holds whole cpus: use placement `quota` for a fraction, or give the shape {} cpus to pin it",
            shape.cpu_count(),
            shape.cpus()
        ));
    }
    (placement.pins() && shape.cpus() > host_cpus).then(|| {
        format!(
            "{placement} shape `{s}` needs {} cpus but this host offers {host_cpus} ({})",
            shape.cpus(),
            host.cpus
        )
    })
}

/// Why shape `s` does not fit a host cpu pool of `pool` cpus, if it does not: it
/// asks for more cpus than the pool has.
pub(super) fn pool_too_small(s: &str, shape: &Shape, pool: u32) -> Option<String> {
    (shape.cpu_count() > f64::from(pool)).then(|| {
        format!(
            "shape `{s}` asks for {} cpus but host_cpus {pool} confines the whole cell to {pool}",
            shape.cpu_count()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, parse};

    #[test]
    fn impossible_pinning_is_an_error_or_skipped() {
        let text = "[experiment]\nname = \"x\"\n[matrix]\nshape = [\"large\", \"xlarge\"]\nplacement = [\"quota\", \"pinned\"]\nworkload = [\"sysbench-cpu\"]\n";
        let errs = errors(text);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with(
                "exp.toml:4:19: pinned shape `xlarge` needs 4 cpus but this host offers 2"
            ),
            "{}",
            errs[0]
        );

        // With a baseline, so that the quota's is the one warning.
        let skip = text.replace(
            "name = \"x\"",
            "name = \"x\"\nimpossible = \"skip\"\nbaseline = { placement = \"quota\" }",
        );
        let spec = parse(&skip).unwrap();
        assert_eq!(spec.cells.len(), 3);
        assert_eq!(spec.dropped.len(), 1);
        assert_eq!(
            spec.dropped[0].key,
            "shape=xlarge placement=pinned workload=sysbench-cpu"
        );
        assert_eq!(
            spec.warnings.len(),
            1,
            "quota of 4 cpus on 2 is worth a warning"
        );
    }

    #[test]
    fn a_shape_table_sets_cpus_memory_and_pids() {
        let spec = parse("[experiment]\nname = \"x\"\n[shape.tiny]\ncpus = 1\nmemory = \"512MiB\"\npids = 64\n[matrix]\nshape = [\"tiny\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        let shape = &spec.cells[0].shape;
        assert_eq!((shape.name.as_str(), shape.cpus()), ("tiny", 1));
        assert_eq!(shape.memory, Some(isolab_cgroups::Bytes(512 << 20)));
        assert_eq!(shape.pids, Some(64));
    }

    #[test]
    fn bad_shape_tables_and_unknown_shapes_point_at_the_value() {
        let errs = errors("[experiment]\nname = \"x\"\n[shape.bad]\ncpus = 0\nmemory = \"lots\"\n[matrix]\nshape = [\"bad\", \"huge\"]\nworkload = [\"sysbench-cpu\"]\n");
        let known =
            "`16xlarge`, `2xlarge`, `4xlarge`, `8xlarge`, `full`, `large`, `medium`, `xlarge`";
        assert_eq!(
            errs,
            [
                "exp.toml:4:8: shape.bad.cpus: `0` asks for no cpu: a shape needs at least 1m (a thousandth of a cpu)".to_owned(),
                "exp.toml:5:10: shape.bad.memory: invalid byte count \"lots\": expected a byte count such as \"1073741824\", \"512MiB\", \"1G\" or \"1.5 GiB\"; expected e.g. \"512MiB\" or \"4GiB\"".to_owned(),
                format!("exp.toml:7:10: unknown shape `bad`: expected one of {known} or a [shape.bad] table"),
                format!("exp.toml:7:17: unknown shape `huge`: expected one of {known} or a [shape.huge] table"),
            ]
        );
    }

    #[test]
    fn fractional_cpus_and_a_period_make_an_exact_quota() {
        let spec = parse("[experiment]\nname = \"x\"\n[shape.half]\ncpus = 0.5\ncpu_period = \"10ms\"\n[shape.k8s]\ncpus = \"1500m\"\n[matrix]\nshape = [\"half\", \"k8s\"]\nplacement = [\"quota\"]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        let half = &spec.cells[0].shape;
        assert_eq!((half.cpus(), half.millicpus), (1, 500));
        let q = half.quota();
        assert_eq!((q.quota.as_micros(), q.period.as_micros()), (5_000, 10_000));
        let k8s = &spec.cells[1].shape;
        assert_eq!((k8s.cpus(), k8s.millicpus), (2, 1500));
        assert_eq!(k8s.quota().quota.as_micros(), 150_000);
        // `{cpus}` and the default `{threads}` round up.
        assert_eq!(spec.cells[1].thread_count(), 2);
    }

    #[test]
    fn a_pinned_fraction_and_bad_periods_point_at_the_value() {
        let errs = errors("[experiment]\nname = \"x\"\n[shape.slow]\ncpus = 1\ncpu_period = \"2s\"\n[shape.tiny]\ncpus = \"5m\"\ncpu_period = \"100ms\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(errs.len(), 2, "{errs:?}");
        assert!(
            errs[0].starts_with("exp.toml:5:14: shape.slow.cpu_period `2s` is not a CFS period"),
            "{errs:?}"
        );
        assert!(
            errs[1].starts_with(
                "exp.toml:7:8: shape.tiny: 0.005 cpus of a 100ms period is a quota under 1ms"
            ),
            "{errs:?}"
        );
        let errs = errors("[experiment]\nname = \"x\"\n[shape.half]\ncpus = 0.5\n[matrix]\nshape = [\"half\"]\nplacement = [\"pinned-spread\"]\nworkload = [\"sysbench-cpu\"]\n");
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("exp.toml:6:10: pinned-spread shape `half` asks for 0.5 cpus, but a cpuset holds whole cpus: use placement `quota`"),
            "{errs:?}"
        );
    }

    #[test]
    fn a_host_cpu_pool_confines_the_cell_and_must_hold_the_shape() {
        let text = "[experiment]\nname = \"x\"\n[matrix]\nshape = [\"medium\", \"large\"]\nplacement = [\"quota\"]\nworkload = [\"sysbench-cpu\"]\nhost_cpus = [1, 2]\n";
        let errs = errors(text);
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert!(
            errs[0].starts_with("exp.toml:7:14: shape `large` asks for 2 cpus but host_cpus 1 confines the whole cell to 1"),
            "{errs:?}"
        );
        let spec =
            parse(&text.replace("name = \"x\"", "name = \"x\"\nimpossible = \"skip\"")).unwrap();
        let pools: Vec<Option<u32>> = spec.cells.iter().map(|c| c.host_cpus).collect();
        assert_eq!(pools, [Some(1), Some(2), Some(2)]);
        assert_eq!(spec.cells[0].level("host_cpus"), Some("1"));
        let errs = errors(&text.replace("[1, 2]", "[3, \"most\"]"));
        assert!(
            errs[0].contains("host_cpus `3` is not a cpu pool of this host"),
            "{errs:?}"
        );
        assert!(errs[1].contains("host_cpus `most`"), "{errs:?}");
    }
}
