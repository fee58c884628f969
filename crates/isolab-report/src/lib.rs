//! isolab reports: what a stored experiment says, for people and for scripts.
//!
//! - [`summary`]: loads an experiment ([`ExperimentData`]) and summarises each cell's
//!   metrics ([`MetricRow`]): n, mean, 95% CI, CV, overhead ratio against the
//!   baseline cell, limits read back, throttling and migrations (read from each run's
//!   [`isolab_store::TelemetrySet`] by [`isolab_store::Telemetry`] key).
//! - [`table`]: every report table as one [`table::Table`], rendered as aligned text
//!   for a terminal or as a GitHub-flavoured Markdown pipe table ([`table::Style`]).
//! - [`export`]: CSV and JSON, one row per metric observation, and Go's benchmark
//!   format for `benchstat`.
//! - [`compare`]: A/B comparisons with honest verdicts, the geometric mean of their
//!   overhead ratios and the seed-000 regression histogram.
//! - [`isolation`]: seed 001's isolation table ([`IsolationTable`]): degradation with a
//!   neighbour against the same cell without one, rows 90%U, FU, 90%URR, FURR.
//! - [`scalability`]: throughput over `threads` or `instances` ([`ScalingCurve`]) with
//!   Amdahl and USL fits, bootstrap intervals and charts.
//! - [`load`]: load over time of service workloads (seed 003's Fig 4.10 and Table 2.2):
//!   per workload and named request, response time and requests per second per cell over
//!   the seconds of the load, with the spread over repetitions, and each cell's totals.
//! - [`fleet`]: an experiment run by many hosts, each configuration compared with its
//!   baseline within each host and pooled with the host as a block.
//! - [`quality`]: the data-quality section of every report.
//! - [`html`]: a self-contained HTML report (inline CSS and SVG, no network).

pub mod analysis;
pub mod compare;
pub mod data;
pub mod escape;
pub mod export;
pub mod findings;
pub mod fleet;
pub mod html;
pub mod isolation;
pub mod load;
pub mod plots;
pub mod quality;
pub mod scalability;
pub mod summary;
pub mod table;

pub use analysis::{analyse, factor_names, Analysis};
pub use data::ExperimentData;
pub use isolation::{isolation_table, ColumnKey, IsolationEntry, IsolationRow, IsolationTable};
pub use scalability::{scalability, ScalingCurve, ScalingPoint, Throughput};
pub use summary::{summarize, MetricRow, SummaryOptions};
