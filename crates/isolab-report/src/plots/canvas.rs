//! The frame every chart shares: title, legend, axes drawn by plotters, and the marks of
//! each chart written as SVG on top ("the overlay"), plus the "no data" chart.
//!
//! plotters draws the background, the axes, ticks, tick labels, axis titles and grid; the
//! marks (bars, whiskers, lines, bands, labels) are written here directly, so that they can
//! carry `class` names, tooltips (`<title>`) and dash patterns, which the plotters SVG
//! backend does not offer.

use std::fmt::Write as _;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::drawing::DrawingAreaErrorKind;
use plotters::prelude::{ChartBuilder, IntoDrawingArea, RGBColor, SVGBackend, WHITE};

use super::axis::{text_width, Axis};
use super::{BarFill, Marker, Size};

/// The font of all text. SVG `<text>` needs no font file: the viewer picks its sans-serif.
pub(crate) const FONT: &str = "sans-serif";

/// plotters takes whole font sizes and writes `size / 1.24` into the SVG; [`finish`] rounds
/// what it wrote, so 15 gives 12 px tick labels and 16 gives 13 px axis titles.
const TICK_FONT: u32 = 15;
const DESC_FONT: u32 = 16;

/// The colour of text, axes and neutral marks.
pub(crate) const INK: &str = "#222222";

/// Why a chart could not be drawn (only plotters' own errors; bad data never gets here).
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlotError {
    /// plotters failed to draw on its SVG string backend.
    #[error("plotters could not draw the chart axes: {0}")]
    Draw(String),
}

impl From<DrawingAreaErrorKind<std::io::Error>> for PlotError {
    fn from(e: DrawingAreaErrorKind<std::io::Error>) -> Self {
        PlotError::Draw(e.to_string())
    }
}

/// Escapes text for SVG content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// `text` shortened with "…" to at most `max` pixels at `px` (bold or not), whole if it
/// fits; the full text stays in the chart's tooltips and accessible name.
pub(crate) fn ellipsize(text: &str, px: f64, bold: bool, max: i32) -> String {
    if text_width(text, px, bold) as i32 <= max {
        return text.to_owned();
    }
    let mut chars: Vec<char> = text.chars().collect();
    while chars.pop().is_some() {
        let kept: String = chars.iter().collect();
        let mut short = kept
            .trim_end_matches([' ', ',', ';', ':', '(', '·'])
            .to_owned();
        short.push('…');
        if text_width(&short, px, bold) as i32 <= max {
            return short;
        }
    }
    String::new()
}

/// `text` shortened in the middle with "…" to at most `max` pixels, keeping as much of
/// its start and its end as fit (labels that differ at the end, `90%U (network-tx)` and
/// `90%U (network-rx)`, stay apart: `90%U…k-tx)`, `90%U…k-rx)` at about 11 characters).
pub(crate) fn ellipsize_middle(text: &str, px: f64, bold: bool, max: i32) -> String {
    if text_width(text, px, bold) as i32 <= max {
        return text.to_owned();
    }
    let chars: Vec<char> = text.chars().collect();
    for kept in (1..chars.len()).rev() {
        let head = kept.div_ceil(2);
        let tail = kept - head;
        let start: String = chars[..head].iter().collect();
        let end: String = chars[chars.len() - tail..].iter().collect();
        let short = format!("{}…{}", start.trim_end(), end.trim_start());
        if text_width(&short, px, bold) as i32 <= max {
            return short;
        }
    }
    String::new()
}

/// `text` broken at spaces into at most `max_lines` lines of at most `max` pixels each,
/// the last one shortened with "…" when the rest does not fit.
pub(crate) fn wrap(text: &str, px: f64, bold: bool, max: i32, max_lines: usize) -> Vec<String> {
    let fits = |s: &str| text_width(s, px, bold) as i32 <= max;
    let mut lines = Vec::new();
    let mut rest = text.trim();
    while lines.len() + 1 < max_lines && !fits(rest) {
        let Some(cut) = rest
            .char_indices()
            .filter(|(_, c)| *c == ' ')
            .map(|(i, _)| i)
            .take_while(|i| fits(&rest[..*i]))
            .last()
        else {
            break;
        };
        lines.push(rest[..cut].to_owned());
        rest = rest[cut..].trim_start();
    }
    lines.push(ellipsize(rest, px, bold, max));
    lines
}

/// What a legend entry shows before its text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Swatch {
    /// A filled square (bars, bins).
    Fill(&'static str),
    /// A line, solid or dashed (`dash` is an SVG dash array, empty for solid).
    Line {
        colour: &'static str,
        dash: &'static str,
        width: f64,
    },
    /// A line with a point symbol on it (line charts).
    LinePoint {
        colour: &'static str,
        shape: PointShape,
    },
    /// A bar's fill (grouped bars beyond the palette's eight colours).
    Bar(BarFill),
    /// A verdict marker.
    Verdict(Marker),
    /// No symbol (e.g. "+3 more").
    None,
}

/// One legend entry.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct LegendEntry {
    pub swatch: Swatch,
    pub label: String,
}

/// Point symbols of line charts: shape as well as colour tells series apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PointShape {
    Circle,
    Square,
    Triangle,
    Diamond,
}

impl PointShape {
    pub(crate) fn nth(i: usize) -> PointShape {
        [
            PointShape::Circle,
            PointShape::Square,
            PointShape::Triangle,
            PointShape::Diamond,
        ][i % 4]
    }
}

/// SVG marks written over the plotters output.
#[derive(Debug, Default)]
pub(crate) struct Overlay {
    svg: String,
}

/// A tooltip child element, or nothing.
fn tip(tooltip: Option<&str>) -> String {
    tooltip
        .map(|t| format!("<title>{}</title>", esc(t)))
        .unwrap_or_default()
}

impl Overlay {
    /// An axis-aligned rectangle between two corners, in any order.
    #[allow(clippy::too_many_arguments)]
    pub fn rect(
        &mut self,
        class: &str,
        a: (i32, i32),
        b: (i32, i32),
        fill: &str,
        stroke: Option<&str>,
        opacity: Option<f64>,
        tooltip: Option<&str>,
    ) {
        let (x, y) = (a.0.min(b.0), a.1.min(b.1));
        let (w, h) = ((a.0 - b.0).abs(), (a.1 - b.1).abs());
        let _ = write!(
            self.svg,
            "<rect class=\"{class}\" x=\"{x}\" y=\"{y}\" width=\"{w}\" height=\"{h}\" fill=\"{fill}\""
        );
        if let Some(s) = stroke {
            let _ = write!(self.svg, " stroke=\"{s}\" stroke-width=\"1\"");
        }
        if let Some(o) = opacity {
            let _ = write!(self.svg, " fill-opacity=\"{o}\"");
        }
        let t = tip(tooltip);
        if t.is_empty() {
            self.svg.push_str("/>\n");
        } else {
            let _ = writeln!(self.svg, ">{t}</rect>");
        }
    }

    /// A straight line.
    pub fn line(
        &mut self,
        class: &str,
        a: (i32, i32),
        b: (i32, i32),
        colour: &str,
        width: f64,
        dash: &str,
    ) {
        let _ = write!(
            self.svg,
            "<line class=\"{class}\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{colour}\" stroke-width=\"{width}\"",
            a.0, a.1, b.0, b.1
        );
        if !dash.is_empty() {
            let _ = write!(self.svg, " stroke-dasharray=\"{dash}\"");
        }
        self.svg.push_str("/>\n");
    }

    /// A polyline through the points (nothing for fewer than two).
    pub fn polyline(
        &mut self,
        class: &str,
        points: &[(i32, i32)],
        colour: &str,
        width: f64,
        dash: &str,
        tooltip: Option<&str>,
    ) {
        if points.len() < 2 {
            return;
        }
        let _ = write!(self.svg, "<polyline class=\"{class}\" points=\"");
        push_points(&mut self.svg, points);
        let _ = write!(
            self.svg,
            "\" fill=\"none\" stroke=\"{colour}\" stroke-width=\"{width}\" stroke-linejoin=\"round\" stroke-linecap=\"round\""
        );
        if !dash.is_empty() {
            let _ = write!(self.svg, " stroke-dasharray=\"{dash}\"");
        }
        let t = tip(tooltip);
        if t.is_empty() {
            self.svg.push_str("/>\n");
        } else {
            let _ = writeln!(self.svg, ">{t}</polyline>");
        }
    }

    /// A filled polygon (nothing for fewer than three points).
    pub fn polygon(&mut self, class: &str, points: &[(i32, i32)], fill: &str, opacity: f64) {
        if points.len() < 3 {
            return;
        }
        let _ = write!(self.svg, "<polygon class=\"{class}\" points=\"");
        push_points(&mut self.svg, points);
        let _ = writeln!(
            self.svg,
            "\" fill=\"{fill}\" fill-opacity=\"{opacity}\" stroke=\"none\"/>"
        );
    }

    /// Text at a point. `anchor` is `start`, `middle` or `end`; `y` is the baseline. A white
    /// halo keeps it readable over grid lines and marks.
    #[allow(clippy::too_many_arguments)]
    pub fn text(
        &mut self,
        class: &str,
        at: (i32, i32),
        text: &str,
        anchor: &str,
        px: u32,
        colour: &str,
        bold: bool,
    ) {
        let weight = if bold { ";font-weight:bold" } else { "" };
        let _ = writeln!(
            self.svg,
            "<text class=\"{class}\" x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\" fill=\"{colour}\" stroke=\"#ffffff\" stroke-width=\"3\" stroke-linejoin=\"round\" style=\"font-family:{FONT};font-size:{px}px;paint-order:stroke{weight}\">{}</text>",
            at.0,
            at.1,
            esc(text)
        );
    }

    /// A point symbol of a line chart, centred on `at`.
    pub fn point(&mut self, class: &str, at: (i32, i32), shape: PointShape, colour: &str) {
        let (x, y) = at;
        let style = format!("fill=\"{colour}\" stroke=\"#ffffff\" stroke-width=\"1\"");
        let _ = match shape {
            PointShape::Circle => writeln!(
                self.svg,
                "<circle class=\"{class}\" cx=\"{x}\" cy=\"{y}\" r=\"3.5\" {style}/>"
            ),
            PointShape::Square => writeln!(
                self.svg,
                "<rect class=\"{class}\" x=\"{}\" y=\"{}\" width=\"7\" height=\"7\" {style}/>",
                x - 3,
                y - 3
            ),
            PointShape::Triangle => writeln!(
                self.svg,
                "<polygon class=\"{class}\" points=\"{},{} {},{} {},{}\" {style}/>",
                x,
                y - 5,
                x - 4,
                y + 3,
                x + 4,
                y + 3
            ),
            PointShape::Diamond => writeln!(
                self.svg,
                "<polygon class=\"{class}\" points=\"{},{} {},{} {},{} {},{}\" {style}/>",
                x,
                y - 5,
                x + 4,
                y,
                x,
                y + 5,
                x - 4,
                y
            ),
        };
    }

    /// A verdict marker centred on `at`, with a tooltip; `class` is `plot-marker` on the
    /// plot and `plot-swatch` in the legend.
    pub fn verdict(&mut self, class: &str, at: (i32, i32), marker: Marker) {
        let (x, y) = at;
        let desc = esc(marker.description());
        let _ = match marker {
            Marker::Worse => writeln!(
                self.svg,
                "<polygon class=\"{class} plot-worse\" points=\"{},{} {},{} {},{}\" fill=\"{INK}\"><title>{desc}</title></polygon>",
                x,
                y - 5,
                x - 5,
                y + 4,
                x + 5,
                y + 4
            ),
            Marker::Better => writeln!(
                self.svg,
                "<polygon class=\"{class} plot-better\" points=\"{},{} {},{} {},{}\" fill=\"{INK}\"><title>{desc}</title></polygon>",
                x - 5,
                y - 4,
                x + 5,
                y - 4,
                x,
                y + 5
            ),
            Marker::Equivalent | Marker::Inconclusive => {
                let (name, symbol) = if marker == Marker::Equivalent {
                    ("equivalent", "≈")
                } else {
                    ("inconclusive", "?")
                };
                writeln!(
                    self.svg,
                    "<text class=\"{class} plot-{name}\" x=\"{x}\" y=\"{}\" text-anchor=\"middle\" fill=\"{INK}\" style=\"font-family:{FONT};font-size:16px;font-weight:bold\">{symbol}<title>{desc}</title></text>",
                    y + 5
                )
            }
        };
    }

    /// Opens a group (e.g. one series), closed by [`Overlay::end_group`].
    pub fn group(&mut self, class: &str, tooltip: Option<&str>) {
        let _ = writeln!(self.svg, "<g class=\"{class}\">{}", tip(tooltip));
    }

    /// Closes a group opened by [`Overlay::group`].
    pub fn end_group(&mut self) {
        self.svg.push_str("</g>\n");
    }
}

fn push_points(out: &mut String, points: &[(i32, i32)]) {
    for (i, (x, y)) in points.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        let _ = write!(out, "{x},{y}");
    }
}

/// A linear coordinate for plotters whose grid lines and labels sit exactly at the ticks
/// of an [`Axis`] (plotters' own f64 ranges pick their ticks themselves).
struct Ticked {
    min: f64,
    max: f64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(axis: &Axis) -> Ticked {
        Ticked {
            min: axis.min,
            max: axis.max,
            ticks: axis.ticks.clone(),
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.max - self.min;
        if span.is_nan() || span <= 0.0 || !value.is_finite() {
            return (limit.0 + limit.1) / 2;
        }
        let frac = (value - self.min) / span;
        let px = f64::from(limit.0) + f64::from(limit.1 - limit.0) * frac;
        px.round().clamp(-1e6, 1e6) as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.min..self.max
    }
}

/// The plot area of a chart, in pixels, and the mapping of data to it.
pub(crate) struct Plot<'a> {
    /// Maps a data point (x, y) to pixels.
    pub map: &'a dyn Fn(f64, f64) -> (i32, i32),
    /// Maps a point (x, y on the secondary axis, right) to pixels, when the chart has one.
    pub map_secondary: Option<&'a dyn Fn(f64, f64) -> (i32, i32)>,
    /// Left edge of the plot area.
    pub left: i32,
    /// Right edge of the plot area.
    pub right: i32,
    /// Top edge of the plot area.
    pub top: i32,
    /// Bottom edge of the plot area.
    pub bottom: i32,
}

/// What a chart needs from the frame.
pub(crate) struct Frame<'a> {
    pub size: Size,
    pub title: &'a str,
    pub legend: Vec<LegendEntry>,
    /// Extra room between the legend and the plot area (labels of vertical lines).
    pub top_extra: u32,
}

/// The height of a one-line title; each further line adds [`TITLE_LINE_H`].
const TITLE_H: i32 = 34;
const TITLE_LINE_H: i32 = 20;
const TITLE_LINES: usize = 2;

/// Writes the title centred, its first baseline at `y`, in at most [`TITLE_LINES`] lines
/// that fit the width (the last shortened with "…"); returns the height of the lines
/// after the first.
fn draw_title(o: &mut Overlay, title: &str, width: i32, y: i32) -> i32 {
    let lines = wrap(title, 16.0, true, width - 2 * MARGIN, TITLE_LINES);
    for (i, line) in lines.iter().enumerate() {
        let baseline = y + i as i32 * TITLE_LINE_H;
        o.text(
            "plot-title",
            (width / 2, baseline),
            line,
            "middle",
            16,
            INK,
            true,
        );
    }
    (lines.len() as i32 - 1).max(0) * TITLE_LINE_H
}
const LEGEND_ROW_H: i32 = 20;
const MARGIN: i32 = 12;
/// The plot's share of a chart's height that a legend leaves it, at least: a legend
/// takes at most a quarter of the height, or all but this many pixels when more.
pub(crate) const MIN_PLOT_H: u32 = 300;

/// The height a legend may take in a chart `height` pixels high: a quarter of it, or
/// all but [`MIN_PLOT_H`] when that is more.
pub(crate) fn legend_room(height: u32) -> u32 {
    (height / 4).max(height.saturating_sub(MIN_PLOT_H))
}

/// The height of `entries` as a legend of a chart `width` wide, every entry shown.
pub(crate) fn legend_height(entries: &[LegendEntry], width: u32) -> u32 {
    legend_rows(entries, width as i32 - 2 * MARGIN).len() as u32 * LEGEND_ROW_H as u32
}

/// Lays legend entries out in rows no wider than `width`; returns (x offset, entry) rows.
fn legend_rows(entries: &[LegendEntry], width: i32) -> Vec<Vec<(i32, &LegendEntry)>> {
    let mut rows: Vec<Vec<(i32, &LegendEntry)>> = Vec::new();
    let mut row: Vec<(i32, &LegendEntry)> = Vec::new();
    let mut x = 0;
    for e in entries {
        let w = entry_width(e);
        if !row.is_empty() && x + w > width {
            rows.push(std::mem::take(&mut row));
            x = 0;
        }
        row.push((x, e));
        x += w + 18;
    }
    if !row.is_empty() {
        rows.push(row);
    }
    rows
}

fn entry_width(e: &LegendEntry) -> i32 {
    let swatch = if e.swatch == Swatch::None { 0 } else { 30 };
    swatch + text_width(&e.label, 12.0, false) as i32
}

/// Draws the legend from `top` down in at most `max_rows` rows (the rest is summed up as
/// "+N more"), each label shortened to fit the width; returns its height.
fn draw_legend(
    o: &mut Overlay,
    entries: &[LegendEntry],
    width: i32,
    top: i32,
    max_rows: usize,
) -> i32 {
    let entries: Vec<LegendEntry> = entries
        .iter()
        .map(|e| LegendEntry {
            swatch: e.swatch.clone(),
            label: ellipsize(&e.label, 12.0, false, width - 2 * MARGIN - 30),
        })
        .collect();
    let entries = &entries[..];
    let mut rows = legend_rows(entries, width - 2 * MARGIN);
    let more;
    if rows.len() > max_rows.max(1) {
        rows.truncate(max_rows.max(1));
        let shown: usize = rows.iter().map(Vec::len).sum();
        more = LegendEntry {
            swatch: Swatch::None,
            label: format!("+{} more", entries.len() + 1 - shown),
        };
        if let Some(last) = rows.last_mut() {
            let x = last.pop().map(|(x, _)| x).unwrap_or(0);
            last.push((x, &more));
        }
    }
    o.group("plot-legend", None);
    for (r, row) in rows.iter().enumerate() {
        let row_w = row
            .last()
            .map(|(x, e)| x + entry_width(e))
            .unwrap_or_default();
        let x0 = (width - row_w) / 2;
        let cy = top + r as i32 * LEGEND_ROW_H + LEGEND_ROW_H / 2;
        for (dx, e) in row {
            let x = x0 + dx;
            match &e.swatch {
                Swatch::Fill(c) => o.rect(
                    "plot-swatch",
                    (x + 4, cy - 6),
                    (x + 20, cy + 6),
                    c,
                    None,
                    None,
                    None,
                ),
                Swatch::Line {
                    colour,
                    dash,
                    width,
                } => o.line("plot-swatch", (x, cy), (x + 24, cy), colour, *width, dash),
                Swatch::LinePoint { colour, shape } => {
                    o.line("plot-swatch", (x, cy), (x + 24, cy), colour, 2.0, "");
                    o.point("plot-swatch", (x + 12, cy), *shape, colour);
                }
                Swatch::Bar(fill) => {
                    fill.draw(o, "plot-swatch", (x + 4, cy - 6), (x + 20, cy + 6), None)
                }
                Swatch::Verdict(m) => o.verdict("plot-swatch", (x + 12, cy), *m),
                Swatch::None => {}
            }
            let tx = if e.swatch == Swatch::None { x } else { x + 30 };
            o.text(
                "plot-legend-label",
                (tx, cy + 4),
                &e.label,
                "start",
                12,
                INK,
                false,
            );
        }
    }
    o.end_group();
    rows.len() as i32 * LEGEND_ROW_H
}

/// Draws a chart: the frame (title, legend), the axes with plotters, then `marks` over it.
/// Returns the finished `<svg>` element; if plotters fails, a chart saying so.
pub(crate) fn render(
    frame: &Frame<'_>,
    x: &Axis,
    y: &Axis,
    marks: impl FnOnce(&Plot<'_>, &mut Overlay),
) -> String {
    render_dual(frame, x, y, None, marks)
}

/// [`render`] with an optional secondary y axis on the right (`y2`), for marks in another
/// unit; [`Plot::map_secondary`] maps onto it.
pub(crate) fn render_dual(
    frame: &Frame<'_>,
    x: &Axis,
    y: &Axis,
    y2: Option<&Axis>,
    marks: impl FnOnce(&Plot<'_>, &mut Overlay),
) -> String {
    let size = frame.size.clamped();
    match try_render(frame, size, x, y, y2, marks) {
        Ok(svg) => svg,
        Err(e) => message(size, frame.title, &e.to_string()),
    }
}

fn try_render(
    frame: &Frame<'_>,
    size: Size,
    x: &Axis,
    y: &Axis,
    y2: Option<&Axis>,
    marks: impl FnOnce(&Plot<'_>, &mut Overlay),
) -> Result<String, PlotError> {
    let width = size.width as i32;
    let mut overlay = Overlay::default();
    let title_h = TITLE_H + draw_title(&mut overlay, frame.title, width, 22);
    let legend_h = if frame.legend.is_empty() {
        0
    } else {
        let max_rows = (legend_room(size.height) as i32 / LEGEND_ROW_H).max(1) as usize;
        draw_legend(&mut overlay, &frame.legend, width, title_h, max_rows)
    };
    let top = title_h + legend_h + frame.top_extra as i32 + 6;
    // Tick labels + gap + the rotated axis title.
    let y_area = (y.label_width() + 36).max(50);
    let y2_area = y2.map_or(0, |y2| (y2.label_width() + 36).max(50));
    // Room for half the last x label right of the plot.
    let last_x_label = x.labels.iter().rev().find(|l| !l.is_empty());
    let right = last_x_label.map_or(0, |l| text_width(l, 12.0, false) as i32 / 2 + 4);

    let mut buf = String::new();
    {
        let root = SVGBackend::with_string(&mut buf, (size.width, size.height)).into_drawing_area();
        root.fill(&WHITE)?;
        let tick_font = (FONT, TICK_FONT);
        let desc_font = (FONT, DESC_FONT);
        let grid = RGBColor(0xdd, 0xdd, 0xdd);
        let ink = RGBColor(0x22, 0x22, 0x22);
        let mut chart = ChartBuilder::on(&root)
            .margin(MARGIN as u32)
            .margin_top(top.max(0) as u32)
            .margin_right((MARGIN + 8).max(right) as u32)
            .x_label_area_size(46)
            .y_label_area_size(y_area)
            .right_y_label_area_size(y2_area)
            .build_cartesian_2d(Ticked::new(x), Ticked::new(y))?
            // Without a secondary axis this one has no label area and draws nothing.
            .set_secondary_coord(Ticked::new(x), Ticked::new(y2.unwrap_or(y)));
        // Tick labels that would touch are thinned out; axis titles longer than the plot
        // are shortened.
        let (xr, yr) = chart.plotting_area().get_pixel_range();
        let x_px = |v: f64| Ticked::new(x).map(&v, (xr.start, xr.end));
        let y_px = y_px_of(y, &yr);
        let x = x.thinned(x_px, |l| text_width(l, 12.0, false) as i32, 8);
        let y = y.thinned(y_px, |_| 12, 4);
        let x_desc = ellipsize(&x.desc, 13.0, false, xr.end - xr.start);
        let y_desc = ellipsize(&y.desc, 13.0, false, yr.end - yr.start);
        let x_fmt = |v: &f64| x.label_at(*v);
        let y_fmt = |v: &f64| y.label_at(*v);
        let mut mesh = chart.configure_mesh();
        mesh.x_label_formatter(&x_fmt)
            .y_label_formatter(&y_fmt)
            .label_style(tick_font)
            .axis_desc_style(desc_font)
            .bold_line_style(grid)
            .axis_style(ink)
            .set_all_tick_mark_size(4);
        if !x_desc.is_empty() {
            mesh.x_desc(x_desc.as_str());
        }
        if !y_desc.is_empty() {
            mesh.y_desc(y_desc.as_str());
        }
        if !x.grid {
            mesh.disable_x_mesh();
        }
        if !y.grid {
            mesh.disable_y_mesh();
        }
        mesh.draw()?;
        let y2 = y2.map(|y2| y2.thinned(y_px_of(y2, &yr), |_| 12, 4));
        let y2_desc = y2.as_ref().map_or(String::new(), |y2| {
            ellipsize(&y2.desc, 13.0, false, yr.end - yr.start)
        });
        let y2_fmt = |v: &f64| y2.as_ref().map_or(String::new(), |y2| y2.label_at(*v));
        if y2.is_some() {
            let mut secondary = chart.configure_secondary_axes();
            secondary
                .y_label_formatter(&y2_fmt)
                .label_style(tick_font)
                .axis_desc_style(desc_font)
                .axis_style(ink)
                .set_all_tick_mark_size(4);
            if !y2_desc.is_empty() {
                secondary.y_desc(y2_desc.as_str());
            }
            secondary.draw()?;
        }

        let map = |a: f64, b: f64| chart.backend_coord(&(a, b));
        let map2 = |a: f64, b: f64| chart.borrow_secondary().backend_coord(&(a, b));
        let plot = Plot {
            map: &map,
            map_secondary: y2
                .is_some()
                .then_some(&map2 as &dyn Fn(f64, f64) -> (i32, i32)),
            left: xr.start,
            right: xr.end,
            top: yr.start,
            bottom: yr.end,
        };
        marks(&plot, &mut overlay);
        root.present()?;
    }
    Ok(finish(buf, frame.title, &overlay.svg))
}

/// Maps a value of the y axis `axis` to pixels of the plot's vertical range `yr`.
fn y_px_of<'a>(axis: &'a Axis, yr: &std::ops::Range<i32>) -> impl Fn(f64) -> i32 + 'a {
    let (top, bottom) = (yr.start, yr.end);
    move |v: f64| Ticked::new(axis).map(&v, (bottom, top))
}

/// Rounds every `font-size="…"` plotters wrote to whole pixels (it writes e.g.
/// `12.096774193548388`).
fn round_font_sizes(svg: &str) -> String {
    const KEY: &str = "font-size=\"";
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(i) = rest.find(KEY) {
        let (head, tail) = rest.split_at(i + KEY.len());
        out.push_str(head);
        let end = tail.find('"').unwrap_or(tail.len());
        match tail[..end].parse::<f64>() {
            Ok(px) if px.is_finite() => {
                let _ = write!(out, "{}", px.round());
            }
            _ => out.push_str(&tail[..end]),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// Adds `role="img"`, the `<title>` and the overlay to the SVG plotters wrote.
fn finish(svg: String, title: &str, overlay: &str) -> String {
    let mut svg = round_font_sizes(&svg);
    if let Some(rest) = svg.strip_prefix("<svg ") {
        svg = format!("<svg role=\"img\" {rest}");
    }
    if let Some(end) = svg.find(">\n") {
        svg.insert_str(end + 2, &format!("<title>{}</title>\n", esc(title)));
    }
    match svg.rfind("</svg>") {
        Some(close) => svg.insert_str(close, overlay),
        None => svg.push_str(overlay),
    }
    svg
}

/// A small chart with the title and one line of explanation, e.g. "no data".
pub(crate) fn message(size: Size, title: &str, text: &str) -> String {
    let w = size.clamped().width;
    let h = 120;
    let mut o = Overlay::default();
    draw_title(&mut o, title, w as i32, 28);
    o.text(
        "plot-message",
        (w as i32 / 2, 78),
        &ellipsize(text, 14.0, false, w as i32 - 2 * MARGIN),
        "middle",
        14,
        "#666666",
        false,
    );
    let label = if title.is_empty() {
        text.to_owned()
    } else {
        format!("{title}: {text}")
    };
    format!(
        "<svg role=\"img\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" xmlns=\"http://www.w3.org/2000/svg\">\n<title>{}</title>\n<rect class=\"plot-frame\" x=\"0.5\" y=\"0.5\" width=\"{}\" height=\"{}\" fill=\"#ffffff\" stroke=\"#cccccc\"/>\n{}</svg>\n",
        esc(&label),
        w - 1,
        h - 1,
        o.svg
    )
}

/// The "no data" chart.
pub(crate) fn no_data(size: Size, title: &str) -> String {
    message(size, title, "no data")
}

/// Whether the SVG has a `<text>` element whose content is `t` (written by plotters, which
/// puts the content on its own line, or by the overlay).
#[cfg(test)]
pub(crate) fn has_text(svg: &str, t: &str) -> bool {
    let t = esc(t);
    svg.contains(&format!(">\n{t}\n</text>")) || svg.contains(&format!(">{t}</text>"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup() {
        assert_eq!(esc("a<b & \"c\"'"), "a&lt;b &amp; &quot;c&quot;&#39;");
    }

    #[test]
    fn no_data_is_a_complete_svg() {
        let svg = no_data(Size::default(), "x <y>");
        assert!(svg
            .starts_with("<svg role=\"img\" width=\"800\" height=\"120\" viewBox=\"0 0 800 120\""));
        assert!(svg.contains("<title>x &lt;y&gt;: no data</title>"));
        assert!(svg.contains(">no data</text>"));
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn long_text_is_shortened_or_wrapped_to_fit() {
        assert_eq!(ellipsize("short", 12.0, false, 100), "short");
        let short = ellipsize(
            "overhead ratio (× baseline, above 1 = worse)",
            12.0,
            false,
            180,
        );
        assert_eq!(short, "overhead ratio (× baseline…");
        assert!(text_width(&short, 12.0, false) <= 180);
        assert_eq!(ellipsize("abc", 12.0, false, 2), "");

        let title =
            "platform=host placement=quota against placement=shared platform=host: 3 points";
        let lines = wrap(title, 16.0, true, 400, 2);
        assert_eq!(
            lines,
            [
                "platform=host placement=quota against",
                "placement=shared platform=host: 3 points"
            ]
        );
        let lines = wrap(&title.repeat(3), 16.0, true, 400, 2);
        assert_eq!(lines.len(), 2);
        assert!(lines[1].ends_with('…'));
        assert!(lines.iter().all(|l| text_width(l, 16.0, true) <= 400));
        assert_eq!(wrap("fits", 16.0, true, 400, 2), ["fits"]);
    }

    #[test]
    fn legend_wraps_into_rows() {
        let entries: Vec<LegendEntry> = (0..20)
            .map(|i| LegendEntry {
                swatch: Swatch::Fill("#000000"),
                label: format!("series number {i}"),
            })
            .collect();
        let rows = legend_rows(&entries, 700);
        assert!(rows.len() > 1);
        for row in rows {
            let (x, e) = row.last().copied().unwrap();
            assert!(x + entry_width(e) <= 700);
        }
    }

    #[test]
    fn font_sizes_are_rounded() {
        assert_eq!(
            round_font_sizes(
                "<text font-size=\"12.096774193548388\" x=\"1\">a</text><text font-size=\"x\">"
            ),
            "<text font-size=\"12\" x=\"1\">a</text><text font-size=\"x\">"
        );
    }

    #[test]
    fn finish_adds_role_title_and_overlay() {
        let svg = finish(
            "<svg width=\"1\" height=\"1\">\n<rect/>\n</svg>\n".to_owned(),
            "T",
            "<line/>\n",
        );
        assert_eq!(
            svg,
            "<svg role=\"img\" width=\"1\" height=\"1\">\n<title>T</title>\n<rect/>\n<line/>\n</svg>\n"
        );
    }
}
