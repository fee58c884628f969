//! Outlier detection by modified z-score (median and MAD), for flagging, never dropping.

use crate::Sample;

/// The conventional threshold on |modified z-score| (Iglewicz & Hoaglin 1993).
pub const DEFAULT_OUTLIER_THRESHOLD: f64 = 3.5;

/// Outliers of a sample: which observations are suspicious and the score of every one.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outliers {
    /// Positions (in the sample's order) of observations with |score| > threshold, ascending.
    pub indices: Vec<usize>,
    /// Modified z-score of every observation, in the sample's order.
    pub scores: Vec<f64>,
}

/// Modified z-scores Mᵢ = 0.6745·(xᵢ − x̃)/MAD, with x̃ the median and
/// MAD = median(|xᵢ − x̃|); observations with |Mᵢ| > `threshold` are outliers
/// (B. Iglewicz & D. C. Hoaglin, *How to Detect and Handle Outliers*, ASQC 1993,
/// recommend 3.5, see [`DEFAULT_OUTLIER_THRESHOLD`]). 0.6745 ≈ Φ⁻¹(0.75) makes
/// MAD/0.6745 a consistent estimate of σ for normal data. hyperfine's
/// `outlier_detection.rs` computes the same score (with a laxer threshold).
///
/// When MAD = 0 (more than half of the observations are equal to the median) the score
/// is 0 for values equal to the median and ±∞ for any other value, so those are all
/// flagged: with no spread in the bulk of the sample, any deviation is suspicious. The
/// caller reports them; nothing is removed from the sample.
pub fn outliers_mad(s: &Sample, threshold: f64) -> Outliers {
    let median = s.median();
    let deviations: Vec<f64> = s.values().iter().map(|x| (x - median).abs()).collect();
    // A sample has ≥ 2 values, so the deviations make a valid sample too; compute the
    // median directly to avoid re-validating.
    let mad = crate::sample::median_of(&deviations);
    let scores: Vec<f64> = s
        .values()
        .iter()
        .map(|&x| {
            let d = x - median;
            if mad > 0.0 {
                0.6745 * d / mad
            } else if d == 0.0 {
                0.0
            } else {
                d.signum() * f64::INFINITY
            }
        })
        .collect();
    let indices = scores
        .iter()
        .enumerate()
        .filter(|(_, z)| z.abs() > threshold)
        .map(|(i, _)| i)
        .collect();
    Outliers { indices, scores }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[f64]) -> Sample {
        Sample::new(v.to_vec()).unwrap()
    }

    #[test]
    fn flags_the_far_value() {
        // median 10.1, |deviations| = [0.1, 0.0, 0.1, 0.2, 9.9] → MAD = 0.1.
        let o = outliers_mad(&s(&[10.0, 10.1, 10.2, 9.9, 20.0]), 3.5);
        assert_eq!(o.indices, vec![4]);
        assert!((o.scores[4] - 0.6745 * 9.9 / 0.1).abs() < 1e-9, "{o:?}");
        assert!((o.scores[0] - 0.6745 * -0.1 / 0.1).abs() < 1e-9, "{o:?}");
    }

    #[test]
    fn zero_mad_flags_only_values_off_the_median() {
        let o = outliers_mad(&s(&[5.0, 5.0, 5.0, 6.0]), 3.5);
        assert_eq!(o.indices, vec![3]);
        assert_eq!(o.scores[..3], [0.0, 0.0, 0.0]);
        assert_eq!(o.scores[3], f64::INFINITY);
        let o = outliers_mad(&s(&[5.0, 5.0]), 3.5);
        assert!(o.indices.is_empty());
    }

    #[test]
    fn clean_sample_has_no_outliers() {
        let o = outliers_mad(&s(&[1.0, 2.0, 3.0, 4.0, 5.0]), DEFAULT_OUTLIER_THRESHOLD);
        assert!(o.indices.is_empty());
        assert_eq!(o.scores.len(), 5);
    }
}
