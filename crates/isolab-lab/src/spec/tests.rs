//! Tests of whole specs (the quick start, syntax errors and misspelt keys), and the
//! helpers the sections' own tests share.

use super::*;
use crate::platform::PlatformKind;
use std::path::Path;

pub(super) fn host(cpus: &str) -> HostFacts {
    HostFacts {
        cpus: cpus.parse().unwrap(),
        storage: Some(crate::spec::StorageSupport {
            device_mapper: true,
            btrfs: true,
        }),
    }
}

pub(super) fn parse(text: &str) -> Result<ExperimentSpec, SpecErrors> {
    ExperimentSpec::parse(Source::new("exp.toml", text), &host("0-1"))
}

pub(super) fn errors(text: &str) -> Vec<String> {
    parse(text)
        .unwrap_err()
        .0
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn quick_start_expands_to_eight_cells() {
    let spec = ExperimentSpec::parse(
        Source::new("built-in quick-start", QUICK_START),
        &host("0-1"),
    )
    .unwrap();
    assert_eq!(spec.name, "quick-start");
    assert_eq!(spec.cells.len(), 8);
    assert_eq!(
        spec.baseline,
        vec![
            ("placement".to_string(), "pinned".to_string()),
            ("platform".to_string(), "host".to_string())
        ]
    );
    assert_eq!(
        spec.cells[0].key(),
        "platform=host shape=medium placement=pinned workload=cpu-throughput"
    );
    assert_eq!(spec.cells[2].placement, Placement::Quota);
    assert_eq!(
        spec.cells[4].platform,
        PlatformDef::new(PlatformKind::ISOLAB)
    );
    assert_eq!(spec.cells[1].workload.primary, "latency_max");
    // No `[experiment] image`: the bench recipe's image in the cache.
    assert_eq!(spec.recipe, Some(isolab_image::Recipe::bench()));
    assert_eq!(
        spec.image,
        isolab_image::Recipe::bench().dir_in(Path::new(isolab_image::DEFAULT_CACHE_ROOT))
    );
    assert_eq!(
        spec.repetitions,
        Repetitions {
            warmup: 1,
            min: 6,
            max: 12,
            target_cv: 0.05
        }
    );
    assert_eq!(spec.run_bounds(), (48, 96));
    assert!(spec.dropped.is_empty());
}

#[test]
fn misspelt_key_names_line_column_and_expected_keys() {
    let errs = errors("[experiment]\nname = \"x\"\nrepetitons = { min = 3 }\n\n[matrix]\nworkload = [\"sysbench-cpu\"]\n");
    assert_eq!(errs.len(), 1);
    assert!(
        errs[0].starts_with("exp.toml:3:1: unknown field `repetitons`, expected one of"),
        "{}",
        errs[0]
    );
    assert!(errs[0].contains("`repetitions`"), "{}", errs[0]);
}

#[test]
fn syntax_errors_have_locations() {
    let errs = errors("[experiment\nname = 1\n");
    assert!(errs[0].starts_with("exp.toml:1:"), "{errs:?}");
}
