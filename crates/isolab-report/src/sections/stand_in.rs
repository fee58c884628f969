//! Which inputs and programs of the experiment stand in for the seed's own.

use std::fmt::Write as _;

use super::{Report, Section};
use crate::escape::esc;

/// The stand-in note near the top of the HTML report.
pub struct StandIn;

impl Section for StandIn {
    fn title(&self) -> &'static str {
        "Stand-in inputs and programs"
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        stand_in_note(&mut out, &r.data.environment);
        out
    }
}

/// Says, near the top, which inputs of the experiment stand in for the seed's own (an
/// asset's `asset.NAME.stand_in` in the environment), so that no reader takes a
/// generated video or an MPI program written for isolab for the paper's.
fn stand_in_note(out: &mut String, environment: &[(String, String)]) {
    let stand_ins: Vec<String> = environment
        .iter()
        .filter_map(|(k, v)| {
            let name = k.strip_prefix("asset.")?.strip_suffix(".stand_in")?;
            Some(format!("<b>{}</b>: {}", esc(name), esc(v)))
        })
        .collect();
    if !stand_ins.is_empty() {
        let _ = writeln!(
            out,
            "<p class=note>Stand-in inputs and programs (not the seed's own): {}.</p>",
            stand_ins.join("; ")
        );
    }
}
