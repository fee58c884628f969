//! Axis ranges, "nice" ticks and number formatting, shared by all charts.

/// One axis: its range, where its ticks are and how they are labelled.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Axis {
    /// Lowest value shown.
    pub min: f64,
    /// Highest value shown.
    pub max: f64,
    /// Tick positions, in axis units.
    pub ticks: Vec<f64>,
    /// One label per tick.
    pub labels: Vec<String>,
    /// The axis title, with its unit.
    pub desc: String,
    /// Whether grid lines are drawn at the ticks.
    pub grid: bool,
}

impl Axis {
    /// A numeric axis covering `lo..=hi` with about `target` ticks at nice numbers.
    pub fn numeric(lo: f64, hi: f64, target: usize, desc: &str) -> Axis {
        let t = nice_ticks(lo, hi, target);
        let labels = tick_labels(&t.ticks, t.step);
        Axis {
            min: t.min,
            max: t.max,
            ticks: t.ticks,
            labels,
            desc: desc.to_owned(),
            grid: true,
        }
    }

    /// Like [`Axis::numeric`], but the axis ends at `lo` and `hi` exactly (ticks inside
    /// only), so no space is wasted beyond the data (x axes).
    pub fn numeric_tight(lo: f64, hi: f64, target: usize, desc: &str) -> Axis {
        let mut a = Axis::numeric(lo, hi, target, desc);
        if lo.is_finite() && hi.is_finite() && lo < hi {
            let eps = (hi - lo) * 1e-9;
            let keep: Vec<bool> = a
                .ticks
                .iter()
                .map(|t| *t >= lo - eps && *t <= hi + eps)
                .collect();
            let mut k = keep.iter();
            a.ticks.retain(|_| k.next().copied().unwrap_or(false));
            let mut k = keep.iter();
            a.labels.retain(|_| k.next().copied().unwrap_or(false));
            a.min = lo;
            a.max = hi;
        }
        a
    }

    /// Like [`Axis::numeric`], but ticks are whole numbers (counts).
    pub fn counts(hi: f64, target: usize, desc: &str) -> Axis {
        let mut t = nice_ticks(0.0, hi.max(1.0), target);
        if t.step < 1.0 {
            t = ticks_with_step(0.0, hi.max(1.0), 1.0);
        }
        let labels = tick_labels(&t.ticks, t.step);
        Axis {
            min: t.min,
            max: t.max,
            ticks: t.ticks,
            labels,
            desc: desc.to_owned(),
            grid: true,
        }
    }

    /// The label of the tick nearest to `v` (used by the plotters label formatter).
    pub fn label_at(&self, v: f64) -> String {
        let tolerance = (self.max - self.min).abs() * 1e-9;
        self.ticks
            .iter()
            .zip(&self.labels)
            .find(|(t, _)| (**t - v).abs() <= tolerance)
            .map(|(_, l)| l.clone())
            .unwrap_or_default()
    }

    /// The widest tick label, in estimated pixels at 12 px.
    pub fn label_width(&self) -> u32 {
        self.labels
            .iter()
            .map(|l| text_width(l, 12.0, false))
            .max()
            .unwrap_or(0)
    }

    /// This axis with only every k-th tick labelled (the others blank, their ticks and
    /// grid lines kept), for the smallest k at which no two labels come closer than `gap`
    /// pixels: `at` maps a tick to its pixel position along the axis and `extent` gives a
    /// label's size along it.
    pub fn thinned(&self, at: impl Fn(f64) -> i32, extent: impl Fn(&str) -> i32, gap: i32) -> Axis {
        let spans: Vec<Option<(i32, i32)>> = self
            .ticks
            .iter()
            .zip(&self.labels)
            .map(|(t, l)| {
                (!l.is_empty()).then(|| {
                    let (p, e) = (at(*t), extent(l));
                    (p - e / 2, p + e - e / 2)
                })
            })
            .collect();
        let apart = |k: usize| {
            let kept: Vec<(i32, i32)> = spans.iter().step_by(k).flatten().copied().collect();
            kept.windows(2)
                .all(|w| w[0].1.min(w[1].1) + gap <= w[0].0.max(w[1].0))
        };
        let k = (1..=spans.len().max(1))
            .find(|k| apart(*k))
            .unwrap_or(spans.len().max(1));
        let mut out = self.clone();
        for (i, l) in out.labels.iter_mut().enumerate() {
            if i % k != 0 {
                l.clear();
            }
        }
        out
    }
}

/// Ticks chosen by [`nice_ticks`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Ticks {
    pub min: f64,
    pub max: f64,
    pub step: f64,
    pub ticks: Vec<f64>,
}

/// Ticks at multiples of 1, 2, 2.5 or 5 × 10^k covering `lo..=hi` with about `target`
/// intervals: the step is the nice number nearest to `(hi - lo) / target` (Heckbert, "Nice
/// numbers for graph labels", Graphics Gems 1990, with 2.5 added). A degenerate or non-finite range is widened so the result is always usable.
pub(crate) fn nice_ticks(lo: f64, hi: f64, target: usize) -> Ticks {
    let (mut lo, mut hi) = if lo.is_finite() && hi.is_finite() {
        // Keep hi - lo finite, so the step is.
        (lo.min(hi).max(-1e307), lo.max(hi).min(1e307))
    } else {
        (0.0, 1.0)
    };
    if hi - lo <= f64::EPSILON * lo.abs().max(hi.abs()).max(1e-300) {
        let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
        lo -= pad;
        hi += pad;
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let magnitude = 10f64.powf(raw.log10().floor());
    let fraction = raw / magnitude;
    // The nice step nearest to the raw one (Heckbert's rounding variant).
    let nice = if fraction < 1.5 {
        1.0
    } else if fraction < 2.25 {
        2.0
    } else if fraction < 3.5 {
        2.5
    } else if fraction < 7.5 {
        5.0
    } else {
        10.0
    };
    ticks_with_step(lo, hi, nice * magnitude)
}

fn ticks_with_step(lo: f64, hi: f64, step: f64) -> Ticks {
    // Tolerate float noise: 0.30000000000000004 / 0.1 is a tick, not the start of the next
    // interval.
    let first = (lo / step + 1e-9).floor();
    let last = (hi / step - 1e-9).ceil();
    let n = (last - first).clamp(1.0, 1000.0) as usize;
    let ticks: Vec<f64> = (0..=n).map(|i| (first + i as f64) * step).collect();
    Ticks {
        min: first * step,
        max: (first + n as f64) * step,
        step,
        ticks,
    }
}

/// The number of decimals needed to write multiples of `step` exactly (at most 6).
pub(crate) fn decimals_for(step: f64) -> usize {
    (0..=6)
        .find(|d| {
            let scaled = step * 10f64.powi(*d as i32);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.abs().max(1.0)
        })
        .unwrap_or(6)
}

/// Labels for ticks spaced by `step`: the same fixed decimals on every tick (just enough for
/// the step), with a k/M/G/T suffix once values reach ten thousand and in scientific
/// notation (`2.5e15`) from 10^15 on; never "-0".
pub(crate) fn tick_labels(ticks: &[f64], step: f64) -> Vec<String> {
    let largest = ticks.iter().fold(0f64, |m, t| m.max(t.abs()));
    if largest >= 1e15 {
        // Past T, a suffix would still leave a dozen digits: scientific notation.
        return ticks
            .iter()
            .map(|t| {
                if t.abs() < step / 2.0 {
                    "0".to_owned()
                } else {
                    // Six significant digits at most, so float noise is not written.
                    let t: f64 = format!("{t:.5e}").parse().unwrap_or(*t);
                    format!("{t:e}")
                }
            })
            .collect();
    }
    let (scale, suffix) = if largest >= 1e12 {
        (1e12, "T")
    } else if largest >= 1e9 {
        (1e9, "G")
    } else if largest >= 1e6 {
        (1e6, "M")
    } else if largest >= 1e4 {
        (1e3, "k")
    } else {
        (1.0, "")
    };
    let decimals = decimals_for(step / scale);
    ticks
        .iter()
        .map(|t| {
            let text = fixed(t / scale, decimals);
            if text == "0" {
                text
            } else {
                format!("{text}{suffix}")
            }
        })
        .collect()
}

/// `v` with `decimals` decimals, without a minus sign on zero.
pub(crate) fn fixed(v: f64, decimals: usize) -> String {
    let s = format!("{v:.decimals$}");
    if s.starts_with('-') && s[1..].chars().all(|c| c == '0' || c == '.') {
        s[1..].to_owned()
    } else {
        s
    }
}

/// A value for a label or tooltip: three significant digits for small numbers, whole
/// numbers from 100 on, trailing zeros trimmed ("1.2", "-3.14", "0.0123", "1520").
pub(crate) fn value(v: f64) -> String {
    if !v.is_finite() {
        return "n/a".to_owned();
    }
    let a = v.abs();
    let decimals = if a >= 100.0 || a == 0.0 {
        0
    } else if a >= 10.0 {
        1
    } else if a >= 1.0 {
        2
    } else {
        // Three significant digits, at most 6 decimals.
        ((-a.log10()).floor() as usize + 3).min(6)
    };
    let s = fixed(v, decimals);
    if s.contains('.') {
        let t = s.trim_end_matches('0').trim_end_matches('.');
        fixed_zero(t)
    } else {
        s
    }
}

fn fixed_zero(s: &str) -> String {
    if s == "-0" || s.is_empty() {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

/// An estimate of the width of `text` at `px` pixels in the sans-serif font of the page,
/// bold or not: the one text measure of every chart, used to lay text out and to check
/// that it fits.
///
/// No font is read: each character counts a typical advance width of its class, in em,
/// taken from DejaVu Sans (what Chromium on Debian picks for `sans-serif`; Liberation
/// Sans and Arial are a little narrower, so the estimate errs on the wide side): narrow
/// letters and punctuation (`i l . : ( )`) 0.3 to 0.36, digits and most lower case 0.64,
/// capitals 0.72, `m w M W %` 0.96. Bold text is 10% wider.
pub(crate) fn text_width(text: &str, px: f64, bold: bool) -> u32 {
    let em: f64 = text.chars().map(char_em).sum();
    let scale = if bold { 1.1 } else { 1.0 };
    (em * px * scale).ceil() as u32
}

/// The advance width of `c` in em (see [`text_width`]).
fn char_em(c: char) -> f64 {
    match c {
        'i' | 'j' | 'l' | 'I' | 'J' | '\'' | '|' => 0.3,
        ' ' | '.' | ',' | ':' | ';' | '!' | '/' | '(' | ')' | '[' | ']' | 'f' | 't' | '·' => 0.36,
        'r' | '-' | '"' | '–' => 0.42,
        'c' | 's' | 'z' | 'k' | 'v' | 'x' | 'y' | '*' | '?' => 0.57,
        'm' | 'w' | 'M' | 'W' | '%' | '@' | '…' | '—' => 0.96,
        'A'..='Z' => 0.72,
        '#' | '+' | '<' | '=' | '>' | '~' | '×' | '±' | '−' | '≈' | '&' | '÷' => 0.84,
        _ => 0.64,
    }
}

/// The smallest and largest of the finite values, or `None` if there is none.
pub(crate) fn finite_extent(values: impl IntoIterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_cover_the_range_with_round_steps() {
        let t = nice_ticks(0.0, 1.37, 5);
        assert_eq!(t.step, 0.25);
        assert_eq!(t.min, 0.0);
        assert_eq!(t.max, 1.5);
        assert_eq!(
            tick_labels(&t.ticks, t.step),
            ["0.00", "0.25", "0.50", "0.75", "1.00", "1.25", "1.50"]
        );
        let t = nice_ticks(-7.3, 12.1, 4);
        assert_eq!(t.step, 5.0);
        assert_eq!(
            tick_labels(&t.ticks, t.step),
            ["-10", "-5", "0", "5", "10", "15"]
        );
        let t = nice_ticks(-7.3, 12.1, 6);
        assert_eq!(t.step, 2.5);
        assert_eq!(tick_labels(&t.ticks, t.step)[..3], ["-7.5", "-5.0", "-2.5"]);
    }

    #[test]
    fn degenerate_and_non_finite_ranges_are_widened() {
        let t = nice_ticks(1.0, 1.0, 5);
        assert!(t.min < 1.0 && t.max > 1.0);
        let t = nice_ticks(0.0, 0.0, 5);
        assert!(t.min <= -1.0 && t.max >= 1.0);
        let t = nice_ticks(f64::NAN, f64::INFINITY, 5);
        assert_eq!((t.min, t.max), (0.0, 1.0));
        assert!(t.ticks.len() >= 2);
    }

    #[test]
    fn tick_labels_avoid_float_noise_and_minus_zero() {
        let ticks = [-0.2, -0.1, 0.1 - 0.1, 0.1, 0.2, 0.30000000000000004];
        assert_eq!(
            tick_labels(&ticks, 0.1),
            ["-0.2", "-0.1", "0.0", "0.1", "0.2", "0.3"]
        );
        assert_eq!(fixed(-0.0001, 2), "0.00");
    }

    #[test]
    fn large_ticks_get_a_suffix() {
        let t = nice_ticks(0.0, 48_000.0, 5);
        assert_eq!(
            tick_labels(&t.ticks, t.step),
            ["0", "10k", "20k", "30k", "40k", "50k"]
        );
        let t = nice_ticks(0.0, 2.5e6, 5);
        assert_eq!(tick_labels(&t.ticks, t.step)[1], "0.5M");
    }

    #[test]
    fn huge_ticks_are_written_short() {
        let t = nice_ticks(0.0, 4.8e12, 5);
        assert_eq!(tick_labels(&t.ticks, t.step)[1], "1T");
        let t = nice_ticks(-4e15, 9.5e15, 5);
        let labels = tick_labels(&t.ticks, t.step);
        assert!(labels.contains(&"0".to_owned()), "{labels:?}");
        assert!(labels.contains(&"5e15".to_owned()), "{labels:?}");
        let t = nice_ticks(0.0, 1e308, 5);
        assert!(tick_labels(&t.ticks, t.step).iter().all(|l| l.len() <= 8));
    }

    #[test]
    fn thinned_axes_keep_every_kth_label() {
        let a = Axis::numeric(0.0, 10.0, 10, "x");
        assert_eq!(a.labels.len(), 11);
        // 10 px apart, labels 7 px wide: all fit with a 3 px gap, every other one with 6.
        let at = |v: f64| (v * 10.0) as i32;
        let width = |_: &str| 7;
        assert_eq!(a.thinned(at, width, 3), a);
        let thin = a.thinned(at, width, 6);
        assert_eq!(thin.labels[..4], ["0", "", "2", ""]);
        assert_eq!(thin.ticks, a.ticks);
    }

    #[test]
    fn text_width_depends_on_the_letters_and_weight() {
        assert!(text_width("iiii", 12.0, false) < text_width("0000", 12.0, false));
        assert!(text_width("0000", 12.0, false) < text_width("MMMM", 12.0, false));
        assert!(text_width("0000", 12.0, false) < text_width("0000", 12.0, true));
        assert_eq!(text_width("", 12.0, true), 0);
        // Digits of DejaVu Sans are 0.64 em.
        assert_eq!(text_width("0123456789", 10.0, false), 64);
    }

    #[test]
    fn counts_have_whole_steps() {
        let a = Axis::counts(3.0, 8, "points");
        assert!(a.ticks.windows(2).all(|w| w[1] - w[0] >= 1.0));
        assert_eq!(a.labels[0], "0");
        assert!(a.labels.iter().all(|l| !l.contains('.')));
    }

    #[test]
    fn values_have_three_significant_digits() {
        assert_eq!(value(1.2), "1.2");
        assert_eq!(value(1.23456), "1.23");
        assert_eq!(value(-4.56789), "-4.57");
        assert_eq!(value(0.012345), "0.0123");
        assert_eq!(value(12.345), "12.3");
        assert_eq!(value(1520.4), "1520");
        assert_eq!(value(0.0), "0");
        assert_eq!(value(-0.0000001), "0");
        assert_eq!(value(f64::NAN), "n/a");
    }

    #[test]
    fn tight_axes_end_at_the_data() {
        let a = Axis::numeric_tight(-6.3, 10.3, 8, "x");
        assert_eq!((a.min, a.max), (-6.3, 10.3));
        assert_eq!(a.labels.first().map(String::as_str), Some("-6"));
        assert_eq!(a.labels.last().map(String::as_str), Some("10"));
        assert_eq!(a.ticks.len(), a.labels.len());
    }

    #[test]
    fn label_at_finds_the_tick() {
        let a = Axis::numeric(0.0, 1.0, 4, "x");
        assert_eq!(a.label_at(0.5), "0.50");
        assert_eq!(a.label_at(0.123), "");
    }
}
