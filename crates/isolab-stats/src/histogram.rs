//! The regression histogram of seed 000: regression % of every measurement point, binned.

use crate::order::{percentile_sorted, sorted};

/// Largest number of bins [`regression_histogram`] builds; wider spreads give `None`.
pub const MAX_BINS: usize = 100_000;

/// The percentiles a [`Histogram`] reports.
pub const HISTOGRAM_PERCENTILES: [f64; 5] = [5.0, 25.0, 50.0, 75.0, 95.0];

/// One bin, [low, high).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Bin {
    /// Inclusive lower edge, a multiple of the bin width.
    pub low: f64,
    /// Exclusive upper edge, `low` + bin width.
    pub high: f64,
    /// Number of values in the bin.
    pub count: usize,
}

/// Histogram of regression percentages over all measurement points of a comparison.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Histogram {
    /// Width of every bin, in the unit of the values (percentage points).
    pub bin_width: f64,
    /// Contiguous bins from the one holding the smallest value to the one holding the
    /// largest, empty bins included.
    pub bins: Vec<Bin>,
    /// Number of (finite) values.
    pub n: usize,
    /// Arithmetic mean of the values.
    pub mean: f64,
    /// (q, value) for q = 5, 25, 50, 75, 95, by [`crate::percentile`].
    pub percentiles: Vec<(f64, f64)>,
    /// Number of values below 0 (B better than A).
    pub below_zero: usize,
    /// Number of values above 0 (B worse than A). Values equal to 0 are in neither count.
    pub above_zero: usize,
}

/// Builds the regression histogram of seed 000: "create bins of regression values,
/// display the bins as histogram, together with mean and percentiles".
///
/// Bins have the fixed width `bin_width` and are aligned at 0 — bin i is
/// [i·w, (i + 1)·w), so with w = 5 the bins are …, [−5, 0), [0, 5), [5, 10), … — and
/// cover the smallest to the largest value. Percentiles use linear interpolation
/// (`numpy.percentile`'s default, see [`crate::percentile`]).
///
/// Non-finite values are ignored. `None` when no finite value remains, when
/// `bin_width` is not a finite positive number, or when the values would need more than
/// [`MAX_BINS`] bins (or bin indices beyond ±9·10¹⁵).
pub fn regression_histogram(values: &[f64], bin_width: f64) -> Option<Histogram> {
    if !(bin_width.is_finite() && bin_width > 0.0) {
        return None;
    }
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    if finite.is_empty() {
        return None;
    }
    let x = sorted(&finite);
    let (first, last) = (
        bin_index(x[0], bin_width)?,
        bin_index(x[x.len() - 1], bin_width)?,
    );
    let span = usize::try_from(last - first).ok()?.checked_add(1)?;
    if span > MAX_BINS {
        return None;
    }
    let mut bins: Vec<Bin> = (first..=last)
        .map(|i| Bin {
            low: i as f64 * bin_width,
            high: (i + 1) as f64 * bin_width,
            count: 0,
        })
        .collect();
    for &v in &x {
        // Every value's index lies in first..=last since x is sorted.
        let i = bin_index(v, bin_width)?;
        if let Some(bin) = usize::try_from(i - first)
            .ok()
            .and_then(|k| bins.get_mut(k))
        {
            bin.count += 1;
        }
    }
    let n = x.len();
    Some(Histogram {
        bin_width,
        bins,
        n,
        mean: x.iter().sum::<f64>() / n as f64,
        percentiles: HISTOGRAM_PERCENTILES
            .iter()
            .map(|&q| (q, percentile_sorted(&x, q)))
            .collect(),
        below_zero: x.iter().filter(|&&v| v < 0.0).count(),
        above_zero: x.iter().filter(|&&v| v > 0.0).count(),
    })
}

/// Index i of the bin [i·w, (i + 1)·w) holding `v`, consistent with the edges as computed
/// in floating point; `None` when it does not fit an `i64`.
fn bin_index(v: f64, w: f64) -> Option<i64> {
    let f = (v / w).floor();
    if !(f.is_finite() && f.abs() < 9.0e15) {
        return None;
    }
    let mut i = f as i64;
    if v < i as f64 * w {
        i -= 1;
    } else if v >= (i + 1) as f64 * w {
        i += 1;
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bins_are_aligned_at_zero() {
        let h = regression_histogram(&[-3.0, 0.0, 4.9, 5.0, 12.0, f64::NAN], 5.0).unwrap();
        let edges: Vec<(f64, f64, usize)> =
            h.bins.iter().map(|b| (b.low, b.high, b.count)).collect();
        assert_eq!(
            edges,
            vec![
                (-5.0, 0.0, 1),
                (0.0, 5.0, 2),
                (5.0, 10.0, 1),
                (10.0, 15.0, 1)
            ]
        );
        assert_eq!(h.n, 5);
        assert!((h.mean - 18.9 / 5.0).abs() < 1e-12);
        assert_eq!((h.below_zero, h.above_zero), (1, 3));
        assert_eq!(h.percentiles[2], (50.0, 4.9));
    }

    #[test]
    fn refuses_empty_and_bad_widths() {
        assert_eq!(regression_histogram(&[], 5.0), None);
        assert_eq!(regression_histogram(&[f64::NAN, f64::INFINITY], 5.0), None);
        assert_eq!(regression_histogram(&[1.0], 0.0), None);
        assert_eq!(regression_histogram(&[1.0], -1.0), None);
        assert_eq!(regression_histogram(&[1.0], f64::NAN), None);
        assert_eq!(regression_histogram(&[0.0, 1e12], 1.0), None);
    }

    #[test]
    fn awkward_widths_keep_values_inside_their_bin() {
        let values = [0.3, 0.7, -0.3, 1.1];
        let h = regression_histogram(&values, 0.1).unwrap();
        for v in values {
            let holding: Vec<&Bin> = h.bins.iter().filter(|b| b.low <= v && v < b.high).collect();
            assert_eq!(holding.len(), 1, "{v} in {holding:?}");
            assert!(holding[0].count >= 1);
        }
    }

    proptest! {
        #[test]
        fn counts_sum_to_n(values in prop::collection::vec(-500.0f64..500.0, 1..200), w in 0.5f64..20.0) {
            let h = regression_histogram(&values, w).unwrap();
            prop_assert_eq!(h.bins.iter().map(|b| b.count).sum::<usize>(), h.n);
            prop_assert_eq!(h.n, values.len());
            prop_assert!(h.bins.first().is_some_and(|b| b.count > 0));
            prop_assert!(h.bins.last().is_some_and(|b| b.count > 0));
            for pair in h.percentiles.windows(2) {
                prop_assert!(pair[0].1 <= pair[1].1);
            }
        }
    }
}
