//! The host's captured environment: kernel, cpu, tool and engine versions, …

use std::fmt::Write as _;

use super::{Report, Section};
use crate::escape::esc;

/// The environment table of the HTML report.
pub struct Environment;

impl Section for Environment {
    fn title(&self) -> &'static str {
        "Environment"
    }

    fn html(&self, r: &Report) -> String {
        format!(
            "<h2>{}</h2>\n<table>{}</table>\n",
            self.title(),
            rows(&r.data.environment)
        )
    }
}

/// One table row per captured key (also each host's in a fleet's report).
pub(crate) fn rows(environment: &[(String, String)]) -> String {
    let mut out = String::new();
    for (k, v) in environment {
        let _ = write!(out, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    out
}
