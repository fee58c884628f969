//! Host utilisation during the first counted run of each cell.

use std::fmt::Write as _;
use std::time::Duration;

use super::{level, Report, Section};
use crate::data::ExperimentData;
use crate::plots::{self, Size, TimeSample, TimeSeriesChart};

/// The time series charts of the HTML report.
pub struct TimeSeries;

impl Section for TimeSeries {
    fn title(&self) -> &'static str {
        "Host utilisation during a run"
    }

    fn applies(&self, r: &Report) -> bool {
        !with_points(r.data).is_empty()
    }

    fn html(&self, r: &Report) -> String {
        let mut out = String::new();
        time_series_section(&mut out, r.data);
        out
    }
}

/// The stored series of runs that have points: `(cell index, run id, series)`.
fn with_points(data: &ExperimentData) -> Vec<&(u32, i64, Vec<isolab_store::Series>)> {
    data.series
        .iter()
        .filter(|(_, _, s)| s.iter().any(|x| !x.points.is_empty()))
        .collect()
}

fn time_series_section(out: &mut String, data: &ExperimentData) {
    out.push_str("<h2>Host utilisation during a run</h2>\n<p class=note>Per-core utilisation sampled at 10 Hz during the first counted run of each cell.</p>\n<div class=charts>\n");
    for (cell_index, run, series) in with_points(data) {
        let label = data
            .cells
            .iter()
            .find(|c| c.index == *cell_index)
            .map_or(String::new(), |c| short_label(data, &c.levels));
        let chart = TimeSeriesChart {
            title: format!("run {run}: {label}"),
            y_label: "cpu utilisation (%)".into(),
            y_range: Some((0.0, 100.0)),
            series: series
                .iter()
                .map(|s| plots::TimeSeries {
                    name: s.name.trim_end_matches("_util").to_owned(),
                    samples: s
                        .points
                        .iter()
                        .filter(|(t, v)| t.is_finite() && *t >= 0.0 && v.is_finite())
                        .map(|&(t, value)| TimeSample {
                            t: Duration::from_secs_f64(t),
                            value,
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            size: Size {
                width: 520,
                height: 260,
            },
            ..Default::default()
        };
        let _ = writeln!(out, "<figure>{}</figure>", plots::time_series(&chart));
    }
    out.push_str("</div>\n");
}

/// The levels of the factors that vary between cells, joined with " · ".
fn short_label(data: &ExperimentData, levels: &[(String, String)]) -> String {
    levels
        .iter()
        .filter(|(f, l)| data.cells.iter().any(|c| level(&c.levels, f) != l))
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join(" · ")
}
