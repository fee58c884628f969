//! Tables: every report table (summary, comparison, isolation, scalability) is one
//! [`Table`], rendered in a [`Style`]: aligned text for a terminal, optionally with
//! ANSI colour, or a GitHub-flavoured Markdown pipe table to paste into an issue, a
//! pull request or a wiki.

use crate::summary::MetricRow;

/// How a table renders. A `bool` converts to [`Style::Text`] with that colour setting,
/// so `render(color)` keeps working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Columns aligned with spaces; with `color`, ANSI bold headers and coloured
    /// verdicts.
    Text {
        /// Whether to use ANSI colour.
        color: bool,
    },
    /// A GitHub-flavoured Markdown pipe table (numeric columns right-aligned, `|`
    /// escaped), with a blank line before and after it; text around tables is
    /// Markdown too.
    Markdown,
}

impl Style {
    /// Whether ANSI colour is used.
    pub fn color(self) -> bool {
        matches!(self, Style::Text { color: true })
    }

    /// Whether this is Markdown.
    pub fn is_markdown(self) -> bool {
        self == Style::Markdown
    }
}

impl From<bool> for Style {
    fn from(color: bool) -> Self {
        Style::Text { color }
    }
}

/// A table with aligned columns, rendered as text or Markdown ([`Style`]).
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

    /// Renders the table in `style` (a `bool` is text with or without colour; with
    /// colour the header is bold).
    pub fn render(&self, style: impl Into<Style>) -> String {
        match style.into() {
            Style::Text { color } => self.render_text(color),
            Style::Markdown => self.render_markdown(),
        }
    }

    /// A GitHub-flavoured Markdown pipe table, preceded and followed by a blank line:
    /// numeric columns right-aligned (`---:`), `|` escaped as `\|`, line breaks as
    /// `<br>`, and ANSI escapes removed.
    pub fn render_markdown(&self) -> String {
        let cols = self.header.len();
        let line = |row: &Vec<String>| -> String {
            let cells: Vec<String> = (0..cols)
                .map(|i| markdown_cell(row.get(i).map(String::as_str).unwrap_or("")))
                .collect();
            format!("| {} |\n", cells.join(" | "))
        };
        let mut out = String::from("\n");
        out.push_str(&line(&self.header));
        let rule: Vec<&str> = (0..cols)
            .map(|i| {
                if self.right.get(i).copied().unwrap_or(false) {
                    "---:"
                } else {
                    "---"
                }
            })
            .collect();
        out.push_str(&format!("| {} |\n", rule.join(" | ")));
        for row in &self.rows {
            out.push_str(&line(row));
        }
        out.push('\n');
        out
    }

    /// An HTML `<table class=sortable>` (cells escaped; numeric columns right-aligned),
    /// for the self-contained report.
    pub fn render_html(&self) -> String {
        let cols = self.header.len();
        let mut out = String::from("<table class=sortable><thead><tr>");
        for h in &self.header {
            out.push_str(&format!("<th>{}</th>", crate::escape::esc(h)));
        }
        out.push_str("</tr></thead><tbody>\n");
        for row in &self.rows {
            out.push_str("<tr>");
            for i in 0..cols {
                let cell = crate::escape::esc(row.get(i).map(String::as_str).unwrap_or(""));
                if self.right.get(i).copied().unwrap_or(false) {
                    out.push_str(&format!("<td class=n>{cell}</td>"));
                } else {
                    out.push_str(&format!("<td>{cell}</td>"));
                }
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</tbody></table>\n");
        out
    }

    /// Aligned text; with `color`, the header is bold.
    fn render_text(&self, color: bool) -> String {
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

/// A cell of a Markdown table: ANSI escapes dropped, `|` escaped (also inside code
/// spans, as GitHub reads it), line breaks as `<br>`, no surrounding whitespace.
fn markdown_cell(text: &str) -> String {
    let mut out = String::new();
    let mut chars = text.trim().chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            // An ANSI escape: ESC [ … final byte in @..~.
            '\x1b' => {
                if chars.peek() == Some(&'[') {
                    for e in chars.by_ref() {
                        if ('@'..='~').contains(&e) && e != '[' {
                            break;
                        }
                    }
                }
            }
            '|' => out.push_str("\\|"),
            '\n' => out.push_str("<br>"),
            '\r' => {}
            c => out.push(c),
        }
    }
    out
}

/// A paragraph of text in `style`: as it is for a terminal; in Markdown each line
/// ends with a hard break (a backslash) so that lines stay lines.
pub fn text_lines(text: &str, style: Style) -> String {
    if !style.is_markdown() {
        return text.to_owned();
    }
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l.trim_end());
        out.push_str(if i + 1 < lines.len() { "\\\n" } else { "\n" });
    }
    out
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

/// A table whose first columns are the factors (left-aligned), then `columns`
/// (title, right-aligned).
fn factor_table(factors: &[String], columns: &[(&str, bool)]) -> Table {
    let mut header: Vec<String> = factors.to_vec();
    let mut right = vec![false; factors.len()];
    for (h, r) in columns {
        header.push((*h).into());
        right.push(*r);
    }
    Table::new(header, right)
}

/// The level of each factor in `levels`, blank where it has none.
fn factor_cells(factors: &[String], levels: &[(String, String)]) -> Vec<String> {
    factors
        .iter()
        .map(|f| {
            levels
                .iter()
                .find(|(ff, _)| ff == f)
                .map(|(_, l)| l.clone())
                .unwrap_or_default()
        })
        .collect()
}

/// The summary table of an experiment: one row per cell and metric.
///
/// When a row was judged worse or better, a `why` column names the mechanism its
/// attribution points to and the counter that moved most ([`Attribution::short`]).
///
/// [`Attribution::short`]: crate::attribution::Attribution::short
pub fn summary_table(rows: &[MetricRow], factors: &[String], style: impl Into<Style>) -> String {
    let explained = rows.iter().any(|r| r.attribution.is_some());
    let mut columns = vec![
        ("metric", false),
        ("n", true),
        ("mean", true),
        ("±95% CI", true),
        ("CV", true),
        ("vs baseline", true),
        ("throttled", true),
        ("migr.", true),
    ];
    if explained {
        columns.push(("why", false));
    }
    columns.extend([("limits (read back)", false), ("stop", false)]);
    let mut t = factor_table(factors, &columns);
    for r in rows {
        let mut row = factor_cells(factors, &r.levels);
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
        if explained {
            row.push(
                r.attribution
                    .as_ref()
                    .map_or_else(|| "-".into(), attribution_short),
            );
        }
        row.push(r.limits.clone().unwrap_or_else(|| "-".into()));
        row.push(short_stop(r));
        t.push(row);
    }
    t.render(style)
}

/// The overhead ratio with its interval and the verdict (`worse`, `better`, `≈`, or
/// `?` with the runs per cell that would decide it, or `? (noisy)` when no affordable
/// number would: [`crate::summary::mark_too_noisy`]); without a verdict, the ratio with
/// Welch's p-value; `DNR worse` for a cell that did not report.
pub fn vs_baseline(r: &MetricRow) -> String {
    if r.is_dnr() && !r.is_baseline {
        return "DNR worse".into();
    }
    if let (false, Some(v), Some(o)) = (r.is_baseline, r.verdict, r.overhead) {
        let ci = r.ratio_ci.map_or(String::new(), |ci| {
            format!(" [{:.3}, {:.3}]", ci.low, ci.high)
        });
        return match (v, r.runs_to_decide) {
            _ if r.too_noisy => format!("{o:.3}×{ci} ? (noisy)"),
            (isolab_stats::Verdict::Inconclusive, Some(n)) => format!("{o:.3}×{ci} ? (n≈{n})"),
            _ => format!("{o:.3}×{ci} {v}"),
        };
    }
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

fn median_ci_text(m: f64, ci: Option<isolab_stats::Interval>) -> String {
    match ci {
        Some(ci) => format!("{} ±{}", num(m), num(((ci.high - ci.low) / 2.0).abs())),
        None => format!("{} ±?", num(m)),
    }
}

/// A signed percentage with one decimal, never "-0.0".
pub(crate) fn signed_pct(v: f64) -> String {
    let v = if (v * 10.0).round() == 0.0 { 0.0 } else { v };
    format!("{v:+.1}")
}

/// A benchstat-like table of a comparison with a geometric-mean row, then the seed-000
/// regression histogram.
pub fn comparison_table(c: &crate::compare::Comparison, style: impl Into<Style>) -> String {
    use isolab_stats::Verdict;
    let style = style.into();
    let color = style.color();
    let mut factors: Vec<String> = Vec::new();
    for p in &c.points {
        for (f, _) in &p.levels {
            if !factors.contains(f) {
                factors.push(f.clone());
            }
        }
    }
    let mut t = factor_table(&factors, &COMPARISON_COLUMNS);
    for p in &c.points {
        let mut row = factor_cells(&factors, &p.levels);
        row.push(format!("{} ({})", p.metric, p.unit));
        row.push(median_ci_text(p.median_a, p.median_a_ci));
        row.push(median_ci_text(p.median_b, p.median_b_ci));
        row.push(match (p.change, p.change_ci) {
            (Some(ch), Some(ci)) => format!(
                "{}% [{}, {}]",
                signed_pct(ch * 100.0),
                signed_pct(ci.low * 100.0),
                signed_pct(ci.high * 100.0)
            ),
            (Some(ch), None) => format!("{}%", signed_pct(ch * 100.0)),
            _ => "-".into(),
        });
        row.push(match (p.method, p.unpaired_change_ci) {
            (Some(isolab_stats::Method::Paired), Some(ci)) => format!(
                "[{}, {}]",
                signed_pct(ci.low * 100.0),
                signed_pct(ci.high * 100.0)
            ),
            _ => "-".into(),
        });
        row.push(match (p.ratio, p.ratio_ci) {
            (Some(r), Some(ci)) => format!("{r:.3} [{:.3}, {:.3}]", ci.low, ci.high),
            (Some(r), None) => format!("{r:.3}"),
            _ => "-".into(),
        });
        row.push(match p.method {
            Some(isolab_stats::Method::Paired) => format!("paired n={}", p.pairs),
            Some(isolab_stats::Method::Unpaired) => "U".into(),
            None => "-".into(),
        });
        row.push(p.p.map_or("-".into(), |v| format!("{v:.3}")));
        row.push(p.q.map_or("-".into(), |v| format!("{v:.3}")));
        let v = match (p.verdict, p.runs_to_decide) {
            (Verdict::Worse, _) if color => "\x1b[31mworse\x1b[0m".to_owned(),
            (Verdict::Better, _) if color => "\x1b[32mbetter\x1b[0m".to_owned(),
            (Verdict::Inconclusive, Some(n)) => format!("? (n≈{n})"),
            (other, _) => other.to_string(),
        };
        row.push(v);
        t.push(row);
    }
    if let Some(g) = &c.geomean {
        t.push(geomean_row(factors.len(), g));
    }
    let mut legend = format!(
        "A: {}    B: {}\nchange = Hodges-Lehmann shift of B against A's median (positive = worse), paired by round when both ran in at least {} rounds (test: paired = Wilcoxon signed-rank, unpaired CI beside it; U = Mann-Whitney); q = Benjamini-Hochberg over {} points; worse/better when q < {} and the change is beyond ±{:.0}%; ≈ when its {:.0}% CI lies within ±{:.0}%; ? otherwise, with the runs per side that would decide (n≈); ±? = too few runs for a 95% CI of the median (n ≥ 6 needed)\n",
        c.a,
        c.b,
        isolab_stats::MIN_PAIRS,
        c.points.len(),
        c.rule.alpha,
        c.rule.noise * 100.0,
        c.rule.equivalence_level() * 100.0,
        c.rule.noise * 100.0
    );
    if c.geomean.is_some() {
        legend.push_str(GEOMEAN_LEGEND);
        legend.push('\n');
    }
    let mut out = text_lines(&legend, style);
    out.push_str(&t.render(style));
    let mut tail = format!(
        "worse {}, better {}, ≈ {}, ? {}\n",
        c.worse, c.better, c.equivalent, c.inconclusive
    );
    if !c.unmatched.is_empty() {
        tail.push_str(&format!(
            "on one side only (not compared): {}\n",
            c.unmatched.join("; ")
        ));
    }
    out.push_str(&text_lines(&tail, style));
    out.push_str(&text_lines(&attribution_lines(c), style));
    if let Some(h) = &c.histogram {
        out.push('\n');
        let regressions: Vec<f64> = c.points.iter().filter_map(|p| p.regression_pct).collect();
        let mut text = histogram_text(h, &regressions);
        // Seed 000 draws one per neighbour condition as well.
        for by in c.histograms_by(crate::data::NEIGHBOUR) {
            text.push_str(&format!("\nneighbour={}: ", by.level));
            text.push_str(&histogram_text(&by.histogram, &by.regressions));
        }
        if style.is_markdown() {
            // Bars need a monospace block.
            out.push_str(&format!("```text\n{text}```\n"));
        } else {
            out.push_str(&text);
        }
    }
    if let Some(line) = c.steady.line() {
        out.push_str(&text_lines(&format!("{line}\n"), style));
    }
    out.push_str(&moved_most_table(c, &factors, style));
    out
}

/// Moved counters an attribution line names.
pub const LINE_COUNTERS: usize = 3;

/// A moved counter: `nr_throttled 0 → 512 (cpu quota)` or `cpu_migrations 40 → 95
/// (2.38×, placement)`.
pub fn moved_phrase(m: &crate::attribution::Moved) -> String {
    let unit = if m.unit.is_empty() {
        String::new()
    } else {
        format!(" {}", m.unit)
    };
    let ratio = match m.ratio {
        Some(r) if r >= 1.0 => format!("{r:.2}×, "),
        Some(r) if r > 0.0 => format!("1/{:.2}, ", 1.0 / r),
        _ => String::new(),
    };
    format!(
        "{} {} → {}{unit} ({ratio}{})",
        m.counter,
        num(m.mean_a),
        num(m.mean_b),
        m.mechanism.name()
    )
}

/// An attribution as one clause: `why: nr_throttled 0 → 512 (cpu quota); … — the CFS
/// quota: …`, or `no recorded counter explains it (12 tested)`; then the counters that
/// are not comparable, when some are.
pub fn attribution_line(a: &crate::attribution::Attribution) -> String {
    let mut out = match a.moved.first() {
        None if !a.unadjusted.is_empty() => format!(
            "no counter moved significantly after the false-discovery control over {} counters (too few runs to tell); before it (p < α): {} — {}?",
            a.tested,
            a.unadjusted
                .iter()
                .take(LINE_COUNTERS)
                .map(|m| format!("{} [p {}]", moved_phrase(m), num(m.p)))
                .collect::<Vec<_>>()
                .join("; "),
            a.unadjusted[0].mechanism.name()
        ),
        None if !a.against.is_empty() => format!(
            "no recorded counter moved the way the effect went ({} tested)",
            a.tested
        ),
        None => format!("no recorded counter explains it ({} tested)", a.tested),
        Some(top) => format!(
            "why: {} — {}{}",
            a.moved
                .iter()
                .take(LINE_COUNTERS)
                .map(moved_phrase)
                .collect::<Vec<_>>()
                .join("; "),
            top.mechanism.words(),
            if a.varied.contains(&top.mechanism) {
                " (a limit the two sides set differently)"
            } else {
                ""
            }
        ),
    };
    if !a.against.is_empty() {
        out.push_str(&format!(
            "; moved the other way, so not a cause: {}",
            a.against
                .iter()
                .take(LINE_COUNTERS)
                .map(moved_phrase)
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    if let (true, Some((la, lb))) = (a.moved.is_empty(), &a.limits) {
        out.push_str(&format!("; the limits read back differ: {la} against {lb}"));
    }
    if !a.not_comparable.is_empty() {
        let shown = &a.not_comparable[..a.not_comparable.len().min(LINE_NOT_COMPARABLE)];
        let more = a.not_comparable.len() - shown.len();
        out.push_str(&format!(
            "; not comparable (recorded on one side only): {}{}",
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        ));
    }
    out
}

/// Counters recorded on one side only that an attribution line names (a VM against
/// the host has a dozen: QEMU's, the guest's boot); the rest are counted. `compare
/// --json` lists them all.
const LINE_NOT_COMPARABLE: usize = 4;

/// An attribution in a table cell: `cpu quota (nr_throttled)` or `nothing moved`.
pub fn attribution_short(a: &crate::attribution::Attribution) -> String {
    match (a.moved.first(), a.unadjusted.first()) {
        (Some(top), _) => format!("{} ({})", top.mechanism.name(), top.counter),
        (None, Some(top)) => format!("{}? ({}, unadjusted)", top.mechanism.name(), top.counter),
        (None, None) => "nothing moved".into(),
    }
}

/// One line per cell pair with a decided point: what moved with it
/// ([`attribution_line`]).
fn attribution_lines(c: &crate::compare::Comparison) -> String {
    c.attributions
        .iter()
        .map(|a| {
            let at = if a.levels.is_empty() {
                String::new()
            } else {
                format!(
                    " at {}",
                    a.levels
                        .iter()
                        .map(|(f, l)| format!("{f}={l}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            };
            format!("B against A{at}: {}\n", attribution_line(a))
        })
        .collect()
}

/// Points a comparison of many shows again, those that moved most.
pub const MOVED_MOST: usize = 10;

/// Over more than [`MOVED_MOST`] points, the [`MOVED_MOST`] whose regression is
/// furthest from 0: where to look first among hundreds.
fn moved_most_table(c: &crate::compare::Comparison, factors: &[String], style: Style) -> String {
    if c.points.len() <= MOVED_MOST {
        return String::new();
    }
    let mut header: Vec<String> = factors.to_vec();
    header.extend(["metric", "regression", "verdict"].map(String::from));
    let mut right = vec![false; factors.len()];
    right.extend([false, true, false]);
    let mut t = Table::new(header, right);
    for p in crate::compare::moved_most(&c.points, MOVED_MOST) {
        let mut row = factor_cells(factors, &p.levels);
        row.push(p.metric.clone());
        row.push(
            p.regression_pct
                .map_or("-".into(), |r| format!("{}%", signed_pct(r))),
        );
        row.push(p.verdict.to_string());
        t.push(row);
    }
    let mut out = text_lines(
        &format!(
            "\nthe {MOVED_MOST} points that moved most (of {}):\n",
            c.points.len()
        ),
        style,
    );
    out.push_str(&t.render(style));
    out
}

/// What the comparison's geomean row means.
const GEOMEAN_LEGEND: &str = "geomean = geometric mean of the points' overhead ratios (B against A, > 1 = worse), as benchstat's geomean row";

/// The comparison table's last row: the geometric mean of the ratios in the ratio
/// column, and how many points it covers in the metric column.
/// The comparison table's columns after the factors; the geomean row fills `ratio`.
const COMPARISON_COLUMNS: [(&str, bool); 10] = [
    ("metric", false),
    ("A median", true),
    ("B median", true),
    ("change [95% CI]", true),
    ("unpaired CI", true),
    ("ratio [95% CI]", true),
    ("test", false),
    ("p", true),
    ("q (BH)", true),
    ("verdict", false),
];

fn geomean_row(factors: usize, g: &crate::compare::GeoMean) -> Vec<String> {
    let mut row = vec![String::new(); factors + COMPARISON_COLUMNS.len()];
    let points = format!("{} point{}", g.points, if g.points == 1 { "" } else { "s" });
    if factors == 0 {
        row[0] = format!("geomean of {points}");
    } else {
        row[0] = "geomean".into();
        row[factors] = points;
    }
    let ratio = COMPARISON_COLUMNS
        .iter()
        .position(|(c, _)| c.starts_with("ratio"))
        .unwrap_or(0);
    row[factors + ratio] = format!("{:.3}", g.ratio);
    row
}

/// The seed-000 regression histogram as text bars; over fewer than
/// [`crate::plots::DOTS_BELOW`] points, the points' regressions themselves, in order
/// (as the report's dot plot), instead of bins that would be mostly empty.
pub fn histogram_text(h: &isolab_stats::Histogram, regressions: &[f64]) -> String {
    let pct = |q: f64| {
        h.percentiles
            .iter()
            .find(|(p, _)| *p == q)
            .map_or("-".to_owned(), |(_, v)| format!("{}%", signed_pct(*v)))
    };
    let mut out = format!(
        "regression histogram (seed 000; positive = B worse): {} points, mean {}%, p5 {}, p25 {}, p50 {}, p75 {}, p95 {}\n",
        h.n,
        signed_pct(h.mean),
        pct(5.0),
        pct(25.0),
        pct(50.0),
        pct(75.0),
        pct(95.0)
    );
    let mut points: Vec<f64> = regressions
        .iter()
        .copied()
        .filter(|v| v.is_finite())
        .collect();
    if points.len() < crate::plots::DOTS_BELOW {
        points.sort_by(f64::total_cmp);
        out.push_str(&format!(
            "  each point (under {} points they are listed, not binned): {}\n",
            crate::plots::DOTS_BELOW,
            points
                .iter()
                .map(|v| format!("{}%", signed_pct(*v)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return out;
    }
    let max = h.bins.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let bins = &h.bins;
    let mut i = 0;
    while i < bins.len() {
        let b = &bins[i];
        // A run of empty bins (between outliers far from the rest) is one line.
        let empty = bins[i..].iter().take_while(|b| b.count == 0).count();
        if empty >= EMPTY_BINS_FOLDED {
            out.push_str(&format!(
                "  [{:+6.1}%, {:+6.1}%)  ({empty} empty bins)\n",
                b.low,
                bins[i + empty - 1].high
            ));
            i += empty;
            continue;
        }
        let bar = "█".repeat((b.count * 40).div_ceil(max));
        out.push_str(&format!(
            "  [{:+6.1}%, {:+6.1}%)  {:<40} {}\n",
            b.low, b.high, bar, b.count
        ));
        i += 1;
    }
    out
}

/// Empty bins in a row from which the text histogram folds them into one line.
const EMPTY_BINS_FOLDED: usize = 3;

fn short_stop(r: &MetricRow) -> String {
    match r.stop_reason.as_deref() {
        None => "running".into(),
        Some(s) if s.starts_with("stable") => "stable".into(),
        Some(s) if s.starts_with("max") => "max runs".into(),
        Some(s) if s.starts_with("failed") => format!("FAILED ({} runs)", r.failed),
        Some(s) if s.starts_with("did not report") => "DNR".into(),
        Some(s) => s.split(':').next().unwrap_or(s).to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_empty_bins_is_one_line_and_a_short_one_is_not() {
        // 24 points near 0, one at +11% (one empty bin before it) and one far out.
        let mut values: Vec<f64> = (0..24).map(|i| f64::from(i % 4)).collect();
        values.extend([11.0, 250.0]);
        let h = isolab_stats::regression_histogram(&values, 5.0).unwrap();
        let text = histogram_text(&h, &values);
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(lines[0].starts_with("  [  +0.0%,   +5.0%)  ") && lines[0].ends_with(" 24"));
        assert!(lines[1].ends_with(" 0"), "{text}");
        assert!(lines[2].ends_with(" 1"), "{text}");
        assert_eq!(lines[3], "  [ +15.0%, +250.0%)  (47 empty bins)");
        assert!(lines[4].starts_with("  [+250.0%, +255.0%)") && lines[4].ends_with(" 1"));
    }

    #[test]
    fn numbers_keep_four_significant_digits() {
        assert_eq!(num(1234.5678), "1235");
        assert_eq!(num(12.345678), "12.35");
        assert_eq!(num(0.012345), "0.01235");
        assert_eq!(num(0.0), "0");
        assert_eq!(num(123456789.0), "1.235e8");
    }

    #[test]
    fn markdown_is_a_pipe_table_with_escaped_cells() {
        let mut t = Table::new(vec!["a|b".into(), "n".into()], vec![false, true]);
        t.push(vec!["x | y".into(), "\x1b[31m1\x1b[0m".into()]);
        t.push(vec!["two\nlines".into()]);
        assert_eq!(
            t.render(Style::Markdown),
            "\n| a\\|b | n |\n| --- | ---: |\n| x \\| y | 1 |\n| two<br>lines |  |\n\n"
        );
        assert_eq!(t.render(false), t.render(Style::Text { color: false }));
    }

    #[test]
    fn markdown_text_keeps_its_lines() {
        assert_eq!(text_lines("a\nb\n", Style::Markdown), "a\\\nb\n");
        assert_eq!(text_lines("a\nb\n", false.into()), "a\nb\n");
    }

    #[test]
    fn aligns_columns() {
        let mut t = Table::new(vec!["a".into(), "bb".into()], vec![false, true]);
        t.push(vec!["long".into(), "1".into()]);
        assert_eq!(t.render(false), "a     bb\nlong   1\n");
    }
}
