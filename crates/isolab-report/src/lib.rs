//! isolab reports: what a stored experiment says, for people and for scripts.
//!
//! The shape, bottom up (each module uses only those above it in this list):
//!
//! - [`data`]: the input, [`ExperimentData`]: everything stored about one experiment,
//!   read from the store in one call ([`ExperimentData::load`]).
//! - [`escape`]: HTML escaping, for every module that writes HTML.
//! - [`mechanism`]: what each recorded counter points to when it moves (the CFS quota,
//!   placement, the memory limit, the disk, …), one small table; [`attribution`]: for a
//!   decided effect, the counters that moved with it, tested as the metric was and
//!   ranked.
//! - [`compare`]: A/B comparisons with honest verdicts, the geometric mean of their
//!   overhead ratios and the seed-000 regression histogram.
//! - [`summary`]: each cell's metrics ([`MetricRow`]): n, mean, 95% CI, CV, overhead
//!   ratio against the baseline cell, limits read back, throttling and migrations (read
//!   from each run's [`isolab_store::TelemetrySet`] by [`isolab_store::Telemetry`] key).
//! - [`table`]: every report table as one [`table::Table`], rendered as aligned text
//!   for a terminal or as a GitHub-flavoured Markdown pipe table ([`table::Style`]).
//! - [`findings`], [`quality`], [`isolation`] (seed 001's [`IsolationTable`]),
//!   [`scalability`](mod@scalability) ([`ScalingCurve`]: Amdahl and USL fits), [`load`] (seed 003's load
//!   over time), [`fleet`] (many hosts pooled with the host as a block): what each part
//!   of a report computes; [`plots`] draws the SVG charts.
//! - [`analysis`]: [`analyse`] computes all of it once into an [`Analysis`]; the
//!   comparisons' points and attributions, and the HTML sections, are spread over the
//!   cpus (`parallel`), their results kept in order.
//! - [`advice`]: the seeds' best practices checked on an experiment's data (`isolab
//!   advise`), every rule in one file with its source and the data it needs.
//! - [`sections`]: the report's parts, one file each, every one a [`Section`] (title,
//!   whether it applies, text or Markdown, HTML, JSON), and [`SECTIONS`], the one
//!   ordered list that `isolab show`, the end of `isolab run`, the HTML report and the
//!   fleet report all read through [`Report`]; [`Reach`] says which output shows which.
//!   Adding a section is one file in `sections/` and one line in [`SECTIONS`].
//! - [`html`]: the self-contained HTML page around the sections (inline CSS and SVG,
//!   no network), for one experiment or a fleet.
//! - [`export`]: CSV and JSON, one row per metric observation, and Go's benchmark
//!   format for `benchstat`.
//! - [`schema`]: [`SCHEMA_VERSION`], the `schema_version` of every JSON output.

pub mod advice;
pub mod analysis;
pub mod attribution;
pub mod compare;
pub mod data;
pub mod degradation;
pub mod escape;
pub mod export;
pub mod findings;
pub mod fingerprint;
pub mod fleet;
pub mod gate;
pub mod html;
pub mod isolation;
pub mod load;
pub mod mechanism;
mod parallel;
pub mod platforms;
pub mod plots;
pub mod quality;
pub mod scalability;
pub mod schema;
pub mod sections;
pub mod sizes;
pub mod summary;
pub mod table;
pub mod trend;

pub use analysis::{analyse, factor_names, Analysis};
pub use data::ExperimentData;
pub use degradation::DegradationEntry;
pub use isolation::{isolation_table, ColumnKey, IsolationRow, IsolationTable};
pub use platforms::{platform_table, PlatformTable};
pub use scalability::{scalability, ScalingCurve, ScalingPoint, Throughput};
pub use schema::{versioned, SCHEMA_VERSION};
pub use sections::{Reach, Report, Section, SECTIONS};
pub use summary::{summarize, MetricRow, SummaryOptions};
