//! Terminal tables.

use crate::summary::MetricRow;

/// A plain text table with aligned columns.
#[derive(Debug, Clone, Default)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Columns aligned to the right (numbers).
    right: Vec<bool>,
}

impl Table {
    /// A table with these column titles; `right` marks numeric columns.
    pub fn new(header: Vec<String>, right: Vec<bool>) -> Self {
        Table {
            header,
            rows: Vec::new(),
            right,
        }
    }

    /// Adds a row (missing cells are blank).
    pub fn push(&mut self, row: Vec<String>) {
        self.rows.push(row);
    }

    /// Renders the table; with `color`, the header is bold.
    pub fn render(&self, color: bool) -> String {
        let cols = self.header.len();
        let mut width = vec![0; cols];
        for row in std::iter::once(&self.header).chain(&self.rows) {
            for (i, c) in row.iter().enumerate().take(cols) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let line = |row: &Vec<String>| -> String {
            let mut out = String::new();
            for (i, w) in width.iter().enumerate() {
                let c = row.get(i).map(String::as_str).unwrap_or("");
                let pad = w - c.chars().count();
                if i > 0 {
                    out.push_str("  ");
                }
                if self.right.get(i).copied().unwrap_or(false) {
                    out.push_str(&" ".repeat(pad));
                    out.push_str(c);
                } else {
                    out.push_str(c);
                    if i + 1 < cols {
                        out.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.trim_end().to_owned()
        };
        let mut out = String::new();
        let head = line(&self.header);
        if color {
            out.push_str(&format!("\x1b[1m{head}\x1b[0m\n"));
        } else {
            out.push_str(&head);
            out.push('\n');
        }
        for row in &self.rows {
            out.push_str(&line(row));
            out.push('\n');
        }
        out
    }
}

/// A number with four significant digits, without exponent for everyday magnitudes.
pub fn num(v: f64) -> String {
    if !v.is_finite() {
        return v.to_string();
    }
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if !(1e-3..1e7).contains(&a) {
        format!("{v:.3e}")
    } else {
        let digits = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        format!("{v:.digits$}")
    }
}

/// The summary table of an experiment: one row per cell and metric.
pub fn summary_table(rows: &[MetricRow], factors: &[String], color: bool) -> String {
    let mut header: Vec<String> = factors.to_vec();
    let mut right = vec![false; factors.len()];
    for (h, r) in [
        ("metric", false),
        ("n", true),
        ("mean", true),
        ("±95% CI", true),
        ("CV", true),
        ("vs baseline", true),
        ("throttled", true),
        ("migr.", true),
        ("limits (read back)", false),
        ("stop", false),
    ] {
        header.push(h.into());
        right.push(r);
    }
    let mut t = Table::new(header, right);
    for r in rows {
        let mut row: Vec<String> = factors
            .iter()
            .map(|f| {
                r.levels
                    .iter()
                    .find(|(ff, _)| ff == f)
                    .map(|(_, l)| l.clone())
                    .unwrap_or_default()
            })
            .collect();
        row.push(if r.unit.is_empty() {
            r.metric.clone()
        } else {
            format!("{} ({})", r.metric, r.unit)
        });
        row.push(r.n.to_string());
        row.push(r.mean().map(num).unwrap_or_else(|| "-".into()));
        row.push(
            r.summary
                .map(|s| num((s.mean_ci95.high - s.mean_ci95.low) / 2.0))
                .unwrap_or_else(|| "-".into()),
        );
        row.push(
            r.summary
                .map(|s| format!("{:.1}%", s.cv * 100.0))
                .unwrap_or_else(|| "-".into()),
        );
        row.push(vs_baseline(r));
        row.push(
            r.throttled_periods
                .map(|t| format!("{t:.0}"))
                .unwrap_or_else(|| "-".into()),
        );
        row.push(
            r.migrations
                .map(|m| format!("{m:.0}"))
                .unwrap_or_else(|| "-".into()),
        );
        row.push(r.limits.clone().unwrap_or_else(|| "-".into()));
        row.push(short_stop(r));
        t.push(row);
    }
    t.render(color)
}

/// The overhead ratio when it differs significantly from the baseline, `~` with the
/// p-value when it does not (benchstat's convention), `?` when it cannot be tested.
pub fn vs_baseline(r: &MetricRow) -> String {
    match (r.is_baseline, r.overhead, r.p_value) {
        (true, _, _) => "baseline".into(),
        (false, Some(o), Some(p)) if p < crate::summary::SIGNIFICANCE => {
            format!("{o:.3}× (p={p:.3})")
        }
        (false, Some(_), Some(p)) => format!("~ (p={p:.2})"),
        (false, Some(o), None) => format!("{o:.3}× ?"),
        (false, None, _) => "-".into(),
    }
}

fn short_stop(r: &MetricRow) -> String {
    match r.stop_reason.as_deref() {
        None => "running".into(),
        Some(s) if s.starts_with("stable") => "stable".into(),
        Some(s) if s.starts_with("max") => "max runs".into(),
        Some(s) if s.starts_with("failed") => format!("FAILED ({} runs)", r.failed),
        Some(s) => s.split(':').next().unwrap_or(s).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(num(1234.5678), "1235");
        assert_eq!(num(12.345678), "12.35");
        assert_eq!(num(0.012345), "0.01235");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(123456789.0), "1.235e8");
    }

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(vec!["a".into(), "bb".into()], vec![false, true]);
        t.push(vec!["long".into(), "1".into()]);
        assert_eq!(t.render(false), "a     bb\nlong   1\n");
    }
}
