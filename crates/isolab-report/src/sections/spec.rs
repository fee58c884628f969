//! The experiment's spec as it was run.

use super::{Report, Section};
use crate::escape::esc;
use isolab_store::ExperimentRecord;

/// The spec at the end of the HTML report.
pub struct Spec;

impl Section for Spec {
    fn title(&self) -> &'static str {
        "Spec"
    }

    fn html(&self, r: &Report) -> String {
        html(&r.data.record)
    }
}

/// The spec of `record`: its path and text (also once in a fleet's report).
pub(crate) fn html(record: &ExperimentRecord) -> String {
    format!(
        "<h2>Spec</h2>\n<p class=note>{}</p><pre>{}</pre>\n",
        esc(record.spec_path.as_deref().unwrap_or("")),
        esc(&record.spec_toml)
    )
}
