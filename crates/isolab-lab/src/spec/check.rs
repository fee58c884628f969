//! The spec checker's walk: [`Validator`] (in `validator.rs`, below every section)
//! holds the spec's source (for error positions), the host's facts and the errors found
//! so far, and [`Validator::validate`] here walks the sections in order. Each section's checks are methods in a module of their own:
//! `experiment`, `image`, `shapes`, `stack` (workloads), `storage`, `platforms`, `matrix`
//! (with `neighbours`, `reservations` and the storage levels), then `cells` expands the
//! matrix.

use super::raw::RawSpec;
use super::validator::{Tables, Validator};
use super::{image, ExperimentSpec, SpecErrors};

impl Validator<'_> {
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
            platforms: self.platforms(raw.platform, &shapes),
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
        let mut cells = expanded.cells;
        let guest_recipes = match image::guest_images(&mut cells, recipe.as_ref()) {
            Ok(r) => r,
            Err(why) => {
                self.errors.push(self.source.error(None, why));
                return Err(SpecErrors(self.errors));
            }
        };
        let image_ref = settings.image_ref;
        if let Some(why) = image_ref
            .as_ref()
            .and_then(|_| image::own_image_refused(&cells))
            .or_else(|| image::entrypoint_refused(&cells, image_ref.is_some()))
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
            noise: settings.noise,
            order: settings.order,
            seed: settings.seed,
            duration: settings.duration,
            timeout: settings.timeout,
            probe: settings.probe,
            image,
            image_ref,
            image_config: None,
            recipe,
            guest_recipes,
            storage,
            factors,
            cells,
            dropped: expanded.dropped,
            warnings,
        })
    }
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
