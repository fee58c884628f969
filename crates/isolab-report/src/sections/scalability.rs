//! Throughput over `threads`, `instances` or `copies` with Amdahl and USL fits
//! ([`crate::scalability`]).

use std::fmt::Write as _;

use super::{Reach, Report, Section};
use crate::escape::esc;
use crate::plots;
use crate::table::{num, Style};

/// The scalability tables, fits and charts.
pub struct Scalability;

impl Section for Scalability {
    fn title(&self) -> &'static str {
        "Scalability"
    }

    fn reach(&self) -> Reach {
        Reach::Run
    }

    fn applies(&self, r: &Report) -> bool {
        !r.analysis.scalability.is_empty()
    }

    fn text(&self, r: &Report, style: Style) -> String {
        format!(
            "\n{}",
            crate::scalability::render(&r.analysis.scalability, style)
        )
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        scalability_section(&mut out, &r.analysis.scalability);
        out
    }

    fn json(&self, r: &Report) -> Vec<(&'static str, serde_json::Value)> {
        vec![("scalability", serde_json::json!(r.analysis.scalability))]
    }
}

/// Throughput over `threads` and `instances`: per factor, the table of levels, one line
/// per curve with both fits, and one chart per curve.
fn scalability_section(out: &mut String, curves: &[crate::scalability::ScalingCurve]) {
    out.push_str("<h2>Scalability</h2>\n");
    for factor in crate::scalability::FACTORS {
        let of: Vec<&crate::scalability::ScalingCurve> = curves.iter().filter(|c| c.factor == factor).collect();
        if of.is_empty() {
            continue;
        }
        let per_instance = of
            .iter()
            .any(|c| c.points.iter().any(|p| p.per_instance.is_some()));
        let _ = write!(
            out,
            "<h3>Over {f}</h3>\n<p class=note>{}. Click a column to sort.</p>\n<table class=sortable><thead><tr><th>group</th><th>throughput</th><th>{f}</th><th>n</th><th>mean</th><th>±95% CI</th><th>speedup</th><th>efficiency</th>{}</tr></thead><tbody>\n",
            esc(&crate::scalability::title(factor)),
            if per_instance { "<th>per instance</th>" } else { "" },
            f = esc(factor),
        );
        for c in &of {
            for p in &c.points {
                let dash = || "-".to_owned();
                let _ = writeln!(
                    out,
                    "<tr><td>{}</td><td>{}</td><td class=n>{}</td><td class=n>{}</td><td class=n data-v=\"{}\">{}</td><td class=n>{}</td><td class=n>{}</td><td class=n>{}</td>{}</tr>",
                    esc(&c.group_label),
                    esc(&c.label()),
                    p.n,
                    p.runs,
                    p.mean,
                    num(p.mean),
                    p.ci.map_or_else(dash, |ci| num((ci.high - ci.low) / 2.0)),
                    p.speedup.map_or_else(dash, |s| format!("{s:.2}×")),
                    p.efficiency.map_or_else(dash, |e| format!("{:.0}%", e * 100.0)),
                    if per_instance {
                        format!("<td class=n>{}</td>", p.per_instance.map_or_else(dash, num))
                    } else {
                        String::new()
                    },
                );
            }
        }
        out.push_str("</tbody></table>\n<ul class=fits>");
        for c in &of {
            let _ = write!(
                out,
                "<li><b>{} · {}</b>: {}</li>",
                esc(&c.group_label),
                esc(&c.metric),
                esc(&c.fit_line())
            );
        }
        out.push_str("</ul>\n<p class=note>Charts: points are the mean throughput of the runs with its 95% CI; the solid line is the preferred model (lower AIC) over its shaded bootstrap band, the dashed line the other model, the dotted line linear scaling from X(1).</p>\n<div class=charts>\n");
        for c in &of {
            let _ = writeln!(
                out,
                "<figure>{}</figure>",
                plots::scaling(&crate::scalability::chart(c))
            );
        }
        out.push_str("</div>\n");
    }
}
