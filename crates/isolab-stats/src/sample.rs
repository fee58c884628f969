//! Samples of observations and their summary statistics.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Why a set of observations is not a [`Sample`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SampleError {
    /// Fewer than two observations: no spread can be estimated.
    #[error("a sample needs at least 2 observations, got {0}")]
    TooSmall(usize),
    /// An observation is NaN or infinite.
    #[error("observation {index} is not a finite number ({value})")]
    NotFinite {
        /// Position of the offending observation.
        index: usize,
        /// Its value.
        value: f64,
    },
}

/// At least two finite observations of one measurement point.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    values: Vec<f64>,
}

/// A two-sided interval with its confidence level.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// Confidence level, e.g. 0.95.
    pub level: f64,
}

/// Summary statistics of a [`Sample`].
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Number of observations.
    pub n: usize,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Sample standard deviation (n − 1 in the denominator).
    pub stdev: f64,
    /// Coefficient of variation, stdev / |mean| (infinite when the mean is 0).
    pub cv: f64,
    /// Smallest observation.
    pub min: f64,
    /// Largest observation.
    pub max: f64,
    /// 95% Student-t confidence interval of the mean.
    pub mean_ci95: Interval,
}

impl Sample {
    /// Builds a sample, refusing fewer than 2 observations or any NaN/infinity.
    pub fn new(values: Vec<f64>) -> Result<Self, SampleError> {
        Sample::check(&values)?;
        Ok(Sample { values })
    }

    /// What [`Sample::new`] refuses, without taking the values.
    pub(crate) fn check(values: &[f64]) -> Result<(), SampleError> {
        if values.len() < 2 {
            return Err(SampleError::TooSmall(values.len()));
        }
        if let Some((index, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(SampleError::NotFinite { index, value });
        }
        Ok(())
    }

    /// The observations, in the order given.
    pub fn values(&self) -> &[f64] {
        &self.values
    }

    /// Number of observations (always ≥ 2).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Always false: a sample holds at least two observations.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Arithmetic mean, Σx / n.
    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.len() as f64
    }

    /// Median: the middle order statistic, or the mean of the two middle ones.
    pub fn median(&self) -> f64 {
        median_of(&self.values)
    }

    /// Sample standard deviation, sqrt(Σ(x − x̄)² / (n − 1)) (Bessel's correction).
    pub fn stdev(&self) -> f64 {
        let mean = self.mean();
        let ss: f64 = self.values.iter().map(|v| (v - mean).powi(2)).sum();
        (ss / (self.len() - 1) as f64).sqrt()
    }

    /// Coefficient of variation, s / |x̄|; infinite when the mean is zero.
    pub fn cv(&self) -> f64 {
        let mean = self.mean().abs();
        if mean == 0.0 {
            f64::INFINITY
        } else {
            self.stdev() / mean
        }
    }

    /// Confidence interval of the mean from Student's t distribution:
    /// x̄ ± t(1 − α/2; n − 1) · s / √n, with α = 1 − `level`
    /// (e.g. Montgomery & Runger, *Applied Statistics and Probability for Engineers*, §8.2).
    ///
    /// # Panics
    /// When `level` is not strictly between 0 and 1.
    pub fn mean_ci(&self, level: f64) -> Interval {
        assert!(
            level > 0.0 && level < 1.0,
            "confidence level must be in (0, 1), got {level}"
        );
        let n = self.len() as f64;
        let t = StudentsT::new(0.0, 1.0, n - 1.0)
            .expect("n - 1 >= 1 degrees of freedom is a valid Student t")
            .inverse_cdf(1.0 - (1.0 - level) / 2.0);
        let half = t * self.stdev() / n.sqrt();
        let mean = self.mean();
        Interval {
            low: mean - half,
            high: mean + half,
            level,
        }
    }

    /// All summary statistics at once.
    pub fn summary(&self) -> Summary {
        let min = self.values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = self
            .values
            .iter()
            .copied()
            .fold(f64::NEG_INFINITY, f64::max);
        Summary {
            n: self.len(),
            mean: self.mean(),
            median: self.median(),
            stdev: self.stdev(),
            cv: self.cv(),
            min,
            max,
            mean_ci95: self.mean_ci(0.95),
        }
    }
}

/// The median of `values` (non-empty): the middle value of the sorted values, or the
/// mean of the two middle ones. Sorts a copy, on the stack for up to 64 values (a
/// cell's repetitions), as many tests of an attribution take one each.
pub(crate) fn median_of(values: &[f64]) -> f64 {
    fn middle(sorted: &mut [f64]) -> f64 {
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        }
    }
    let mut on_stack = [0.0; 64];
    match on_stack.get_mut(..values.len()) {
        Some(copy) => {
            copy.copy_from_slice(values);
            middle(copy)
        }
        None => middle(&mut values.to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn refuses_small_and_non_finite_samples() {
        assert_eq!(Sample::new(vec![1.0]), Err(SampleError::TooSmall(1)));
        assert!(matches!(
            Sample::new(vec![1.0, f64::NAN]),
            Err(SampleError::NotFinite { index: 1, .. })
        ));
    }

    #[test]
    fn matches_reference_values() {
        // Reference: numpy.mean/median/std(ddof=1) and scipy.stats.t.interval(0.95, 4, ...)
        // for [10, 12, 11, 13, 14].
        let s = Sample::new(vec![10.0, 12.0, 11.0, 13.0, 14.0]).unwrap();
        assert!(close(s.mean(), 12.0));
        assert!(close(s.median(), 12.0));
        assert!(close(s.stdev(), 1.5811388300841898));
        assert!(close(s.cv(), 0.13176156917368248));
        let ci = s.mean_ci(0.95);
        assert!((ci.low - 10.036757627428842).abs() < 1e-6, "{ci:?}");
        assert!((ci.high - 13.963242372571158).abs() < 1e-6, "{ci:?}");
    }

    #[test]
    fn even_median_is_mean_of_middle_pair() {
        let s = Sample::new(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert!(close(s.median(), 2.5));
    }

    #[test]
    fn zero_mean_has_infinite_cv() {
        let s = Sample::new(vec![-1.0, 1.0]).unwrap();
        assert!(s.cv().is_infinite());
    }
}
