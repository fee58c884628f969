//! `[shape.NAME]` tables over the built-in shapes, the matrix's `shape` levels, and the
//! cell a shape makes impossible: pinned to more cpus than the host offers.

use std::collections::BTreeMap;

use isolab_cgroups::Bytes;
use toml::Spanned;

use super::check::{list, Validator};
use super::matrix::{Level, Levels};
use super::raw::RawShape;
use super::HostFacts;
use crate::shape::{builtin_shapes, Placement, Shape};

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
        let cpus = match u32::try_from(*raw.cpus.get_ref()) {
            Ok(c) if c >= 1 => c,
            _ => {
                self.err(
                    raw.cpus.span(),
                    format!("shape.{name}.cpus must be a whole number ≥ 1"),
                );
                1
            }
        };
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
            name,
            cpus,
            memory,
            pids,
            io_read_bps,
            io_write_bps,
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

/// Why shape `s` cannot be pinned on `host`, if it cannot: it has more cpus than the host.
pub(super) fn pinning_impossible(
    s: &str,
    shape: &Shape,
    placement: Placement,
    host: &HostFacts,
) -> Option<String> {
    let host_cpus = host.cpus.len() as u32;
    (placement == Placement::Pinned && shape.cpus > host_cpus).then(|| {
        format!(
            "pinned shape `{s}` needs {} cpus but this host offers {host_cpus} ({})",
            shape.cpus, host.cpus
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
        assert_eq!((shape.name.as_str(), shape.cpus), ("tiny", 1));
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
                "exp.toml:4:8: shape.bad.cpus must be a whole number ≥ 1".to_owned(),
                "exp.toml:5:10: shape.bad.memory: invalid byte count \"lots\": expected a byte count such as \"1073741824\", \"512MiB\", \"1G\" or \"1.5 GiB\"; expected e.g. \"512MiB\" or \"4GiB\"".to_owned(),
                format!("exp.toml:7:10: unknown shape `bad`: expected one of {known} or a [shape.bad] table"),
                format!("exp.toml:7:17: unknown shape `huge`: expected one of {known} or a [shape.huge] table"),
            ]
        );
    }
}
