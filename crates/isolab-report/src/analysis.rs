//! [`Analysis`]: everything a report shows about one experiment, computed once from
//! its [`ExperimentData`] by [`analyse`] and read by every section.

use crate::data::ExperimentData;
use crate::isolation::{isolation_table, IsolationTable};
use crate::platforms::{platform_table, reference_platform, PlatformTable};
use crate::scalability::{scalability, ScalingCurve};
use crate::summary::{self, summarize, MetricRow, SummaryOptions};
use crate::{compare, load, quality};

/// Everything a report shows about one experiment.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Analysis {
    /// Factor names as the cells list them.
    pub factors: Vec<String>,
    /// One row per cell and metric, with overhead verdicts against the baseline.
    pub rows: Vec<MetricRow>,
    /// The comparisons against the baseline behind those verdicts.
    pub comparisons: Vec<compare::Comparison>,
    /// Seed 001's isolation table, when the factor `neighbour` is varied (primary
    /// metrics only).
    pub isolation: Option<IsolationTable>,
    /// Seed 001's Table 4.1, when the factor `platform` is varied with a reference
    /// platform (the baseline's, else `host`): the summary's metrics.
    pub platforms: Option<PlatformTable>,
    /// Seed 002's platform-type and platform-size overhead, when `shape` is varied
    /// against a baseline (the summary's metrics).
    pub sizes: Vec<crate::sizes::SizeOverhead>,
    /// Throughput over `threads`, `instances` or `copies` with Amdahl and USL fits, when one
    /// factor is varied (primary metrics only).
    pub scalability: Vec<ScalingCurve>,
    /// Load over time per workload and named request, when counted runs recorded load
    /// intervals (service workloads).
    pub load: Vec<load::LoadGroup>,
    /// Data quality.
    pub quality: quality::Quality,
    /// The spec's points over the store's experiments; empty unless the caller, which
    /// reads the store, fills it ([`crate::trend::trend`]).
    pub trend: crate::trend::Trend,
    /// The baseline and primary metrics used.
    #[serde(skip)]
    pub options: SummaryOptions,
}

/// Summarises `data`, compares every configuration with the baseline, and assesses
/// the data quality.
pub fn analyse(
    data: &ExperimentData,
    options: SummaryOptions,
    compare: &compare::CompareOptions,
) -> Analysis {
    // The summary and the quality checks beside the comparisons: they need neither,
    // and take a cpu the comparisons leave idle while they collect their cells.
    let ((mut rows, quality), comparisons) = std::thread::scope(|scope| {
        let beside = scope.spawn(|| {
            (
                summarize(data, &options),
                quality::quality(data, &options.primary),
            )
        });
        let comparisons = summary::baseline_comparisons(data, &options, compare);
        let beside = beside
            .join()
            .unwrap_or_else(|e| std::panic::resume_unwind(e));
        (beside, comparisons)
    });
    summary::attach_verdicts(&mut rows, &comparisons);
    summary::mark_too_noisy(&mut rows, &comparisons, options.max_repetitions);
    summary::mark_did_not_report(&mut rows);
    let isolation = isolation_table(&rows, |r| options.is_primary(r));
    let platforms = platform_table(&rows, &reference_platform(&options.baseline));
    let sizes = crate::sizes::size_overheads(data, &rows, &options.baseline);
    let scalability = scalability(data, &rows, &options);
    Analysis {
        factors: factor_names(data),
        rows,
        comparisons,
        isolation,
        platforms,
        sizes,
        scalability,
        load: load::load(data),
        quality,
        trend: crate::trend::Trend::default(),
        options,
    }
}

/// Factor names as the cells list them, in first-seen order.
pub fn factor_names(data: &ExperimentData) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for c in &data.cells {
        for (f, _) in &c.levels {
            if !out.contains(f) {
                out.push(f.clone());
            }
        }
    }
    out
}
