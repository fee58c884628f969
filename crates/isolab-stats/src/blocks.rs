//! Comparisons over many hosts, with the host as a block.
//!
//! When a fleet runs an experiment, every host runs every cell in its own shuffled rounds
//! (a randomised complete block design, the host being the block). Hosts differ in speed,
//! often by more than the configurations being compared, so observations of different
//! hosts must never be compared directly: [`blocked_ratio`] compares a treatment with the
//! baseline **within** each host, on the log scale, and pools the per-host log ratios.
//! Pooling the raw observations instead ([`unblocked_ratio`]) is unbiased only when every
//! host contributed the same share of each side; otherwise it measures the hosts.
//!
//! Per host h with both sides: d_h = mean(ln treatment) − mean(ln baseline), its variance
//! v_h = s²_t/n_t + s²_b/n_b (sample variances of the logs). The pooled log ratio gives
//! every host the same weight, as a block design does: d = Σ d_h / H, with
//! Var(d) = Σ v_h / H², and Welch–Satterthwaite degrees of freedom
//! df = Var(d)² / Σ_h Σ_side (s²/(n·H²))² / (n − 1) (the linear combination of
//! independent means, Satterthwaite 1946). The interval and p-value are Student-t ones
//! on the log scale, reported as ratios.
//!
//! Whether the effect differs between hosts (a configuration × host interaction) is
//! Cochran's Q test (Cochran 1954, "The combination of estimates from different
//! experiments"): Q = Σ w_h (d_h − d̄_w)², w_h = 1/v_h, d̄_w = Σ w_h d_h / Σ w_h, compared
//! with χ² on H − 1 degrees of freedom; I² = max(0, (Q − (H − 1))/Q) is the share of the
//! spread between hosts beyond chance (Higgins & Thompson 2002).

use std::collections::BTreeMap;

use statrs::distribution::{ChiSquared, ContinuousCDF, StudentsT};

use crate::Interval;

/// The level at which [`Heterogeneity::differs`] flags an effect that differs between
/// hosts.
pub const HETEROGENEITY_ALPHA: f64 = 0.05;

/// Why a blocked comparison could not be made.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BlockError {
    /// An observation is not a positive finite number (the comparison is of logs).
    #[error("observation {value} of host `{block}` is not a positive number; ratios need positive values")]
    NotPositive {
        /// The host.
        block: String,
        /// The value.
        value: f64,
    },
    /// No host has at least two observations of each side.
    #[error(
        "no host has at least two observations of both the baseline and the treatment \
         (hosts with the baseline: {baseline}, with the treatment: {treatment}); run every \
         cell on every host"
    )]
    NoCommonBlock {
        /// How many hosts have baseline observations.
        baseline: usize,
        /// How many hosts have treatment observations.
        treatment: usize,
    },
}

/// The treatment-to-baseline comparison on one host.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BlockEffect {
    /// The host.
    pub block: String,
    /// mean(ln treatment) − mean(ln baseline).
    pub log_ratio: f64,
    /// Its variance, s²_t/n_t + s²_b/n_b.
    pub variance: f64,
    /// Observations of the baseline on this host.
    pub n_baseline: usize,
    /// Observations of the treatment on this host.
    pub n_treatment: usize,
}

impl BlockEffect {
    /// The ratio treatment / baseline on this host (of geometric means).
    pub fn ratio(&self) -> f64 {
        self.log_ratio.exp()
    }
}

/// Cochran's Q test of whether the effect is the same on every host.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Heterogeneity {
    /// Q = Σ w_h (d_h − d̄_w)².
    pub q: f64,
    /// H − 1.
    pub df: f64,
    /// P(χ²_df ≥ Q).
    pub p: f64,
    /// max(0, (Q − df)/Q), from 0 (hosts agree) to 1.
    pub i_squared: f64,
}

impl Heterogeneity {
    /// Whether the effect differs between hosts at [`HETEROGENEITY_ALPHA`].
    pub fn differs(&self) -> bool {
        self.p < HETEROGENEITY_ALPHA
    }
}

/// A treatment compared with the baseline within each host, pooled over hosts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BlockedComparison {
    /// Each host with both sides, by name.
    pub blocks: Vec<BlockEffect>,
    /// Hosts left out because they lack one side (or have fewer than two observations of
    /// it), by name.
    pub unmatched: Vec<String>,
    /// exp(d): the pooled ratio treatment / baseline.
    pub ratio: f64,
    /// Its confidence interval (Student-t on the log scale, Welch–Satterthwaite df).
    pub ci: Interval,
    /// Two-sided p-value of "no effect" (d = 0).
    pub p: f64,
    /// Degrees of freedom of the interval.
    pub df: f64,
    /// Whether the effect differs between hosts; `None` with one host.
    pub heterogeneity: Option<Heterogeneity>,
}

/// Mean and sample variance of the logs of `values`, or `None` with fewer than two.
fn log_moments(values: &[f64]) -> Option<(f64, f64, usize)> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let logs: Vec<f64> = values.iter().map(|v| v.ln()).collect();
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / (n as f64 - 1.0);
    Some((mean, var, n))
}

/// Groups `(host, value)` observations by host, checking every value is positive.
fn by_block(observations: &[(String, f64)]) -> Result<BTreeMap<&str, Vec<f64>>, BlockError> {
    let mut blocks: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (block, value) in observations {
        if !(value.is_finite() && *value > 0.0) {
            return Err(BlockError::NotPositive {
                block: block.clone(),
                value: *value,
            });
        }
        blocks.entry(block.as_str()).or_default().push(*value);
    }
    Ok(blocks)
}

/// Compares `treatment` with `baseline`, each a list of `(host, value)` observations,
/// within each host, and pools over hosts (see the module documentation). `confidence`
/// is the interval's level, e.g. 0.95.
pub fn blocked_ratio(
    baseline: &[(String, f64)],
    treatment: &[(String, f64)],
    confidence: f64,
) -> Result<BlockedComparison, BlockError> {
    let base = by_block(baseline)?;
    let treat = by_block(treatment)?;
    let mut blocks = Vec::new();
    // Per host and side: s²/n and n, for the degrees of freedom.
    let mut parts: Vec<(f64, f64)> = Vec::new();
    let mut unmatched = Vec::new();
    let names: std::collections::BTreeSet<&str> =
        base.keys().chain(treat.keys()).copied().collect();
    for name in names {
        let moments = (
            base.get(name).and_then(|v| log_moments(v)),
            treat.get(name).and_then(|v| log_moments(v)),
        );
        let (Some((mb, vb, nb)), Some((mt, vt, nt))) = moments else {
            unmatched.push(name.to_owned());
            continue;
        };
        let (eb, et) = (vb / nb as f64, vt / nt as f64);
        parts.push((eb, nb as f64));
        parts.push((et, nt as f64));
        blocks.push(BlockEffect {
            block: name.to_owned(),
            log_ratio: mt - mb,
            variance: eb + et,
            n_baseline: nb,
            n_treatment: nt,
        });
    }
    if blocks.is_empty() {
        return Err(BlockError::NoCommonBlock {
            baseline: base.len(),
            treatment: treat.len(),
        });
    }
    let h = blocks.len() as f64;
    let d = blocks.iter().map(|b| b.log_ratio).sum::<f64>() / h;
    let var = blocks.iter().map(|b| b.variance).sum::<f64>() / (h * h);
    let df_denominator: f64 = parts
        .iter()
        .map(|(e, n)| (e / (h * h)).powi(2) / (n - 1.0))
        .sum();
    let df = if df_denominator > 0.0 {
        var.powi(2) / df_denominator
    } else {
        parts.iter().map(|(_, n)| n - 1.0).sum()
    };
    let alpha = 1.0 - confidence;
    let (half, p) = if var > 0.0 {
        let t = StudentsT::new(0.0, 1.0, df).ok();
        let quantile = t
            .as_ref()
            .map_or(f64::NAN, |t| t.inverse_cdf(1.0 - alpha / 2.0));
        let stat = d / var.sqrt();
        let p = t.as_ref().map_or(f64::NAN, |t| {
            (2.0 * (1.0 - t.cdf(stat.abs()))).clamp(0.0, 1.0)
        });
        (quantile * var.sqrt(), p)
    } else {
        (0.0, if d == 0.0 { 1.0 } else { 0.0 })
    };
    let heterogeneity = (blocks.len() >= 2).then(|| cochran_q(&blocks));
    Ok(BlockedComparison {
        ratio: d.exp(),
        ci: Interval {
            low: (d - half).exp(),
            high: (d + half).exp(),
            level: confidence,
        },
        p,
        df,
        heterogeneity,
        blocks,
        unmatched,
    })
}

/// Cochran's Q over the hosts' log ratios (two or more hosts).
fn cochran_q(blocks: &[BlockEffect]) -> Heterogeneity {
    let df = blocks.len() as f64 - 1.0;
    // A host without noise would weigh infinitely: floor its variance at the smallest
    // positive one (or 1e-12 when none is), so that Q stays finite.
    let floor = blocks
        .iter()
        .map(|b| b.variance)
        .filter(|v| *v > 0.0)
        .fold(f64::INFINITY, f64::min);
    let floor = if floor.is_finite() { floor } else { 1e-12 };
    let weights: Vec<f64> = blocks.iter().map(|b| 1.0 / b.variance.max(floor)).collect();
    let total: f64 = weights.iter().sum();
    let mean = blocks
        .iter()
        .zip(&weights)
        .map(|(b, w)| w * b.log_ratio)
        .sum::<f64>()
        / total;
    let q: f64 = blocks
        .iter()
        .zip(&weights)
        .map(|(b, w)| w * (b.log_ratio - mean).powi(2))
        .sum();
    let p = ChiSquared::new(df).map_or(f64::NAN, |chi| (1.0 - chi.cdf(q)).clamp(0.0, 1.0));
    Heterogeneity {
        q,
        df,
        p,
        i_squared: if q > 0.0 {
            ((q - df) / q).max(0.0)
        } else {
            0.0
        },
    }
}

/// The ratio of the plain means, treatment / baseline, over all hosts' observations
/// together: what ignoring the hosts gives. Biased whenever the hosts' shares of the two
/// sides differ; shown beside [`blocked_ratio`] to make that visible.
pub fn unblocked_ratio(baseline: &[(String, f64)], treatment: &[(String, f64)]) -> f64 {
    let mean = |o: &[(String, f64)]| o.iter().map(|(_, v)| v).sum::<f64>() / o.len() as f64;
    mean(treatment) / mean(baseline)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Multiplicative noise of about ±2%, fixed so that the test is exact.
    const NOISE: [f64; 10] = [
        1.012, 0.991, 1.004, 0.983, 1.019, 0.997, 1.008, 0.986, 1.001, 0.995,
    ];

    /// `n` observations of `level` × `speed` on `host`, noise from `offset`.
    fn runs(host: &str, n: usize, level: f64, speed: f64, offset: usize) -> Vec<(String, f64)> {
        (0..n)
            .map(|i| {
                (
                    host.to_owned(),
                    level * speed * NOISE[(i + offset) % NOISE.len()],
                )
            })
            .collect()
    }

    #[test]
    fn the_host_as_a_block_recovers_the_effect_the_pooled_means_miss() {
        // Execution times: host `fast` takes half as long as `slow`. The treatment is 10%
        // slower than the baseline on both. The split is confounded: most baseline runs
        // ran on the fast host, most treatment runs on the slow one.
        let mut baseline = runs("fast", 8, 1.0, 0.5, 0);
        baseline.extend(runs("slow", 2, 1.0, 1.0, 3));
        let mut treatment = runs("fast", 2, 1.1, 0.5, 5);
        treatment.extend(runs("slow", 8, 1.1, 1.0, 1));

        let blocked = blocked_ratio(&baseline, &treatment, 0.95).unwrap();
        assert_eq!(blocked.blocks.len(), 2);
        assert!(blocked.unmatched.is_empty());
        assert!((blocked.ratio - 1.1).abs() < 0.03, "{blocked:?}");
        assert!(blocked.ci.low < 1.1 && 1.1 < blocked.ci.high, "{blocked:?}");
        // Only two runs on one side of each host: few degrees of freedom (about 1.5),
        // so a wide t quantile, and still significant.
        assert!(blocked.p < 0.05, "{blocked:?}");
        let h = blocked.heterogeneity.unwrap();
        assert!(!h.differs(), "{h:?}");

        // Ignoring the hosts, the treatment looks 65% slower: the hosts' speeds, not the
        // configuration, and far outside the blocked interval.
        let naive = unblocked_ratio(&baseline, &treatment);
        assert!(naive > 1.5, "{naive}");
        assert!(naive > blocked.ci.high);
    }

    #[test]
    fn an_effect_that_differs_between_hosts_is_flagged() {
        let mut baseline = runs("a", 6, 1.0, 1.0, 0);
        baseline.extend(runs("b", 6, 1.0, 2.0, 2));
        let mut treatment = runs("a", 6, 1.2, 1.0, 4);
        treatment.extend(runs("b", 6, 0.85, 2.0, 6));
        let c = blocked_ratio(&baseline, &treatment, 0.95).unwrap();
        let h = c.heterogeneity.unwrap();
        assert!(h.differs(), "{h:?}");
        assert!(h.i_squared > 0.9, "{h:?}");
        let by_host: Vec<(String, f64)> = c
            .blocks
            .iter()
            .map(|b| (b.block.clone(), (b.ratio() * 100.0).round() / 100.0))
            .collect();
        assert_eq!(by_host, [("a".to_owned(), 1.2), ("b".to_owned(), 0.85)]);
    }

    #[test]
    fn a_balanced_design_agrees_with_the_pooled_means_up_to_the_mean_kind() {
        let mut baseline = runs("a", 5, 1.0, 1.0, 0);
        baseline.extend(runs("b", 5, 1.0, 1.0, 5));
        let mut treatment = runs("a", 5, 1.05, 1.0, 1);
        treatment.extend(runs("b", 5, 1.05, 1.0, 6));
        let c = blocked_ratio(&baseline, &treatment, 0.95).unwrap();
        assert!((c.ratio - unblocked_ratio(&baseline, &treatment)).abs() < 0.01);
    }

    #[test]
    fn hosts_missing_a_side_are_named_and_bad_values_refused() {
        let baseline = [runs("a", 3, 1.0, 1.0, 0), runs("b", 3, 1.0, 1.0, 0)].concat();
        let treatment = [runs("a", 3, 1.1, 1.0, 0), runs("c", 3, 1.1, 1.0, 0)].concat();
        let c = blocked_ratio(&baseline, &treatment, 0.95).unwrap();
        assert_eq!(c.unmatched, ["b", "c"]);
        assert!(c.heterogeneity.is_none());

        let err = blocked_ratio(&runs("a", 3, 1.0, 1.0, 0), &runs("b", 3, 1.0, 1.0, 0), 0.95)
            .unwrap_err();
        assert!(matches!(
            err,
            BlockError::NoCommonBlock {
                baseline: 1,
                treatment: 1
            }
        ));
        let bad = vec![("a".to_owned(), 0.0), ("a".to_owned(), 1.0)];
        assert!(matches!(
            blocked_ratio(&bad, &bad, 0.95).unwrap_err(),
            BlockError::NotPositive { .. }
        ));
    }

    #[test]
    fn one_host_is_a_welch_interval_on_the_logs() {
        let baseline = runs("a", 10, 1.0, 1.0, 0);
        let treatment = runs("a", 10, 1.03, 1.0, 3);
        let c = blocked_ratio(&baseline, &treatment, 0.95).unwrap();
        assert!(c.ci.low < c.ratio && c.ratio < c.ci.high);
        // Welch's df for two samples of 10 lies between 9 and 18.
        assert!((9.0..=18.0).contains(&c.df), "{}", c.df);
    }
}
