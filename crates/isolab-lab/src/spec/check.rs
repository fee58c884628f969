//! The spec checker: [`Validator`] holds the spec's source (for error positions), the
//! host's facts and the errors found so far, and [`Validator::validate`] walks the
//! sections in order. Each section's checks are methods in a module of their own:
//! `experiment`, `image`, `shapes`, `stack` (workloads), `storage`, `platforms`, `matrix`
//! (with `neighbours`, `reservations` and the storage levels), then `cells` expands the
//! matrix.

use std::collections::BTreeMap;
use std::ops::Range;

use isolab_workloads::WorkloadDef;

use super::raw::RawSpec;
use super::{image, ExperimentSpec, HostFacts, Source, SpecError, SpecErrors};
use crate::platform::PlatformDef;
use crate::shape::Shape;

/// Checks a [`RawSpec`] section by section, collecting every error with its position.
pub(super) struct Validator<'a> {
    pub(super) source: &'a Source,
    pub(super) host: &'a HostFacts,
    pub(super) errors: Vec<SpecError>,
    /// `[workload.NAME]` tables that had errors: already reported, so the matrix's
    /// reference to them is not reported again as unknown.
    pub(super) broken_workloads: Vec<String>,
}

/// What the matrix's levels may name: the built-ins and the spec's own tables.
pub(super) struct Tables {
    pub(super) platforms: BTreeMap<String, PlatformDef>,
    pub(super) shapes: BTreeMap<String, Shape>,
    pub(super) workloads: BTreeMap<String, WorkloadDef>,
    /// What stripes a `shared` level's devices (`[storage] striping`).
    pub(super) striping: super::storage::Striping,
}

impl<'a> Validator<'a> {
    pub(super) fn new(source: &'a Source, host: &'a HostFacts) -> Self {
        Validator {
            source,
            host,
            errors: Vec::new(),
            broken_workloads: Vec::new(),
        }
    }
}

impl Validator<'_> {
    /// Records an error at `span` of the source.
    pub(super) fn err(&mut self, span: Range<usize>, message: impl Into<String>) {
        self.errors.push(self.source.error(Some(span), message));
    }

    /// The built-ins by name, then each of the spec's `raw` tables as `check` makes it
    /// (a table replaces the built-in of its name); and the names of tables with errors.
    pub(super) fn named<T, R>(
        &mut self,
        builtins: Vec<T>,
        name: impl Fn(&T) -> String,
        raw: BTreeMap<String, R>,
        check: impl Fn(&mut Self, String, R) -> Option<T>,
    ) -> (BTreeMap<String, T>, Vec<String>) {
        let mut all: BTreeMap<String, T> = builtins.into_iter().map(|b| (name(&b), b)).collect();
        let mut broken = Vec::new();
        for (table, r) in raw {
            match check(self, table.clone(), r) {
                Some(t) => {
                    all.insert(name(&t), t);
                }
                None => broken.push(table),
            }
        }
        (all, broken)
    }

    /// The cpus of the host, counted.
    pub(super) fn host_cpus(&self) -> u32 {
        self.host.cpus.len() as u32
    }

    /// The spec, or every error found in it (in the order found; the caller sorts them).
    pub(super) fn validate(mut self, raw: RawSpec) -> Result<ExperimentSpec, SpecErrors> {
        let (settings, baseline) = self.experiment(raw.experiment.into_inner());
        let image_packages = self.image_packages(settings.image_given, raw.image);
        let shapes = self.shapes(raw.shape);
        let workloads = self.workloads(raw.workload);
        let storage = self.storage(raw.storage);
        let Some(matrix) = raw.matrix else {
            self.errors.push(self.source.error(
                None,
                "missing [matrix]: a spec needs at least `workload = [...]` under [matrix]",
            ));
            return Err(SpecErrors(self.errors));
        };
        let tables = Tables {
            platforms: self.platforms(raw.platform),
            shapes,
            workloads,
            striping: storage.striping,
        };
        let matrix_span = matrix.span();
        let mut matrix = matrix.into_inner();
        let exclude = std::mem::take(&mut matrix.exclude);
        let axes = self.axes(matrix, matrix_span.clone(), &tables);
        let factors = super::matrix::varied(&axes);
        let excludes = self.excludes(&exclude, &factors);
        let baseline = self.baseline(baseline, &factors);
        if !self.errors.is_empty() {
            return Err(SpecErrors(self.errors));
        }

        let expanded = self.expand(&axes, &factors, &excludes, &tables, settings.impossible);
        if !self.errors.is_empty() {
            return Err(SpecErrors(self.errors));
        }
        if expanded.cells.is_empty() {
            self.err(
                matrix_span,
                "every cell of the matrix is excluded or impossible: nothing to run",
            );
            return Err(SpecErrors(self.errors));
        }
        let mut warnings = expanded.warnings;
        warnings.extend(super::matrix::no_baseline_warning(
            &settings.name,
            &baseline,
            &factors,
            &expanded.cells,
        ));
        let recipe = image_packages.map(|extra| image::recipe(&expanded.cells, &extra));
        let image = recipe.as_ref().map_or(settings.image, image::recipe_dir);
        let image_ref = settings.image_ref;
        if let Some(why) = image_ref
            .as_ref()
            .and_then(|_| image::own_image_refused(&expanded.cells))
        {
            self.errors.push(self.source.error(None, why));
            return Err(SpecErrors(self.errors));
        }
        Ok(ExperimentSpec {
            source: self.source.clone(),
            name: settings.name,
            description: settings.description,
            baseline,
            repetitions: settings.repetitions,
            order: settings.order,
            seed: settings.seed,
            duration: settings.duration,
            timeout: settings.timeout,
            probe: settings.probe,
            image,
            image_ref,
            recipe,
            storage,
            factors,
            cells: expanded.cells,
            dropped: expanded.dropped,
            warnings,
        })
    }
}

/// `` `a`, `b` ``: items for a message.
pub(super) fn list(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("`{i}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::super::tests::{errors, parse};

    #[test]
    fn a_spec_with_a_workload_is_enough() {
        let spec =
            parse("[experiment]\nname = \"x\"\n[matrix]\nworkload = [\"sysbench-cpu\"]\n").unwrap();
        assert_eq!(spec.cells.len(), 1);
        assert!(spec.factors.iter().all(|(f, _)| f == "workload"));
    }

    #[test]
    fn a_missing_matrix_is_reported_first_without_a_position() {
        let errs = errors("[experiment]\nname = \"x\"\n[shape.s]\ncpus = 0\n");
        assert_eq!(
            errs,
            [
                "exp.toml: missing [matrix]: a spec needs at least `workload = [...]` under [matrix]",
                "exp.toml:4:8: shape.s.cpus: `0` asks for no cpu: a shape needs at least 1m (a thousandth of a cpu)",
            ]
        );
    }
}
