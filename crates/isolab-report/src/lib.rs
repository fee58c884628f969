//! isolab reports: what a stored experiment says, for people and for scripts.
//!
//! - [`summary`]: loads an experiment ([`ExperimentData`]) and summarises each cell's
//!   metrics ([`MetricRow`]): n, mean, 95% CI, CV, overhead ratio against the
//!   baseline cell, limits read back, throttling and migrations.
//! - [`table`]: the terminal summary table.
//! - [`export`]: CSV and JSON, one row per metric observation.
//! - [`html`]: a self-contained HTML report (inline CSS and SVG, no network).

pub mod export;
pub mod html;
pub mod summary;
pub mod table;

pub use summary::{summarize, ExperimentData, MetricRow, SummaryOptions};
