//! Seed 002 §IV: a platform's overhead split into its **platform-type overhead** (PTO,
//! "constant, irrespective of the instance type": the virtualisation layer's) and its
//! **platform-size overhead** (PSO, "diminished by increasing the number of cores
//! assigned").
//!
//! The overhead ratio `r(s)` against bare metal at instance size `s` (cpus) is fitted as
//! `r(s) = a + b/s` by least squares over the sizes measured, each size's ratio the one
//! of the two means (oriented so that above 1 is worse, [`overhead_ratio`]). Then
//! `PTO = a − 1` (the overhead an infinitely large instance keeps) and
//! `PSO(s) = b/s` (the part that vanishes with size). With two sizes the fit goes through
//! both ratios; with more it is their least-squares compromise.
//!
//! Intervals come from a seeded percentile bootstrap: each replicate redraws every
//! cell's runs with replacement (both sides of each size, independently, as
//! [`crate::bootstrap_ratio_ci`]), recomputes the ratios and refits. Which part
//! dominates at a size is decided by the replicates: PSO when `b/s > a − 1` in at least
//! `1 − α/2` of them, PTO when in at most `α/2`, undecided otherwise.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::bootstrap::{resampled_mean, Drawn};
use crate::order::percentile_selected;
use crate::{overhead_ratio, Direction, Interval};

/// One instance size: the baseline's and the platform's counted observations.
#[derive(Debug, Clone, Copy)]
pub struct SizePoint<'a> {
    /// The instance's size (its cpus, or its CHR).
    pub size: f64,
    /// The bare-metal baseline's observations at this size.
    pub baseline: &'a [f64],
    /// The platform's observations at this size.
    pub platform: &'a [f64],
}

/// Which part of the overhead dominates at a size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Dominant {
    /// The platform-type overhead (constant over sizes).
    Type,
    /// The platform-size overhead (vanishing with size).
    Size,
}

/// The fit of [`fit_size_overhead`] (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SizeOverheadFit {
    /// The sizes, ascending.
    pub sizes: Vec<f64>,
    /// The overhead ratio measured at each size.
    pub ratios: Vec<f64>,
    /// `a`: the ratio the fit gives an infinitely large instance.
    pub constant: f64,
    /// `b`: the ratio's part that is `b/s` at size `s`.
    pub inverse: f64,
    /// PTO = `a − 1`, with its interval.
    pub pto: f64,
    /// The interval of PTO.
    pub pto_ci: Interval,
    /// The interval of `b`.
    pub inverse_ci: Interval,
    /// The dominating part at each size (`None`: the replicates cannot tell).
    pub dominant: Vec<Option<Dominant>>,
    /// Bootstrap replicates.
    pub resamples: usize,
}

impl SizeOverheadFit {
    /// PSO at size `s`: `b/s`.
    pub fn pso(&self, s: f64) -> f64 {
        self.inverse / s
    }

    /// The size at which PSO has fallen to PTO (`b/(a − 1)`), when both are positive.
    pub fn crossover(&self) -> Option<f64> {
        (self.pto > 0.0 && self.inverse > 0.0).then(|| self.inverse / self.pto)
    }
}

/// Least squares of `r = a + b/s`: `None` with fewer than two distinct sizes.
fn fit(sizes: &[f64], ratios: &[f64]) -> Option<(f64, f64)> {
    let n = sizes.len() as f64;
    let x: Vec<f64> = sizes.iter().map(|s| 1.0 / s).collect();
    let mx = x.iter().sum::<f64>() / n;
    let my = ratios.iter().sum::<f64>() / n;
    let sxx: f64 = x.iter().map(|v| (v - mx) * (v - mx)).sum();
    if sxx.is_nan() || sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = x.iter().zip(ratios).map(|(v, r)| (v - mx) * (r - my)).sum();
    let b = sxy / sxx;
    Some((my - b * mx, b))
}

/// Fits PTO and PSO (see the [module docs](self)) at `level` (e.g. 0.95) with
/// `resamples` bootstrap replicates from `seed`. `None` with fewer than two distinct
/// positive sizes, a size with an empty side, or a ratio that is not defined (a zero
/// mean); replicates whose ratio is undefined are left out.
pub fn fit_size_overhead(
    points: &[SizePoint<'_>],
    direction: Direction,
    level: f64,
    resamples: usize,
    seed: u64,
) -> Option<SizeOverheadFit> {
    let mut points: Vec<SizePoint<'_>> = points.to_vec();
    points.sort_by(|a, b| a.size.total_cmp(&b.size));
    if points.iter().any(|p| {
        !(p.size.is_finite() && p.size > 0.0) || p.baseline.is_empty() || p.platform.is_empty()
    }) || !(level > 0.0 && level < 1.0)
        || resamples == 0
    {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let sizes: Vec<f64> = points.iter().map(|p| p.size).collect();
    let ratios: Vec<f64> = points
        .iter()
        .map(|p| overhead_ratio(mean(p.baseline), mean(p.platform), direction))
        .collect::<Option<_>>()?;
    let (a, b) = fit(&sizes, &ratios)?;

    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut pto = Vec::with_capacity(resamples);
    let mut inv = Vec::with_capacity(resamples);
    let mut size_wins = vec![0usize; sizes.len()];
    let mut drawn = vec![0.0; sizes.len()];
    let mut room = Drawn::default();
    for _ in 0..resamples {
        let mut ok = true;
        for (d, p) in drawn.iter_mut().zip(&points) {
            let base = resampled_mean(p.baseline, &mut rng, &mut room);
            let plat = resampled_mean(p.platform, &mut rng, &mut room);
            match overhead_ratio(base, plat, direction) {
                Some(r) => *d = r,
                None => ok = false,
            }
        }
        let Some((ra, rb)) = ok.then(|| fit(&sizes, &drawn)).flatten() else {
            continue;
        };
        pto.push(ra - 1.0);
        inv.push(rb);
        for (w, s) in size_wins.iter_mut().zip(&sizes) {
            if rb / s > ra - 1.0 {
                *w += 1;
            }
        }
    }
    let kept = pto.len();
    if kept == 0 {
        return None;
    }
    let half_alpha = (1.0 - level) / 2.0;
    let interval = |v: &mut Vec<f64>| Interval {
        low: percentile_selected(v, 100.0 * half_alpha),
        high: percentile_selected(v, 100.0 * (1.0 - half_alpha)),
        level,
    };
    let dominant = size_wins
        .iter()
        .map(|&w| {
            let share = w as f64 / kept as f64;
            if share >= 1.0 - half_alpha {
                Some(Dominant::Size)
            } else if share <= half_alpha {
                Some(Dominant::Type)
            } else {
                None
            }
        })
        .collect();
    Some(SizeOverheadFit {
        sizes,
        ratios,
        constant: a,
        inverse: b,
        pto: a - 1.0,
        pto_ci: interval(&mut pto),
        inverse_ci: interval(&mut inv),
        dominant,
        resamples: kept,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs around `mean` with a deterministic ±`spread` relative wobble.
    fn runs(mean: f64, spread: f64, n: usize, phase: usize) -> Vec<f64> {
        (0..n)
            .map(|i| {
                let t = ((i * 7 + phase * 3) % n) as f64 / (n - 1) as f64 - 0.5;
                mean * (1.0 + 2.0 * spread * t)
            })
            .collect()
    }

    /// A known constant (PTO 10%) and a known 1/size part (b = 0.4): execution times on
    /// bare metal of 100 s at every size and `100·(1.1 + 0.4/s)` on the platform, with
    /// ±1% noise over 10 runs a cell. The fit recovers both within its intervals.
    #[test]
    fn recovers_a_known_constant_and_inverse_part() {
        let sizes = [1.0, 2.0, 4.0, 8.0];
        let base: Vec<Vec<f64>> = (0..4).map(|i| runs(100.0, 0.01, 10, i)).collect();
        let plat: Vec<Vec<f64>> = sizes
            .iter()
            .enumerate()
            .map(|(i, s)| runs(100.0 * (1.1 + 0.4 / s), 0.01, 10, i + 5))
            .collect();
        let points: Vec<SizePoint> = sizes
            .iter()
            .enumerate()
            .map(|(i, &size)| SizePoint {
                size,
                baseline: &base[i],
                platform: &plat[i],
            })
            .collect();
        let f = fit_size_overhead(&points, Direction::Lower, 0.95, 2000, 7).unwrap();
        assert!((f.pto - 0.1).abs() < 0.01, "{f:?}");
        assert!((f.inverse - 0.4).abs() < 0.02, "{f:?}");
        assert!(f.pto_ci.low <= 0.1 && 0.1 <= f.pto_ci.high, "{f:?}");
        assert!(f.inverse_ci.low <= 0.4 && 0.4 <= f.inverse_ci.high, "{f:?}");
        assert!(
            f.pto_ci.low > 0.0 && f.inverse_ci.low > 0.0,
            "both parts are real"
        );
        // PSO 0.4 > PTO 0.1 at 1 and 2 cpus, 0.1 = 0.1 at 4 (undecided), 0.05 < 0.1 at 8.
        assert_eq!(
            f.dominant,
            [
                Some(Dominant::Size),
                Some(Dominant::Size),
                None,
                Some(Dominant::Type)
            ]
        );
        assert!((f.crossover().unwrap() - 4.0).abs() < 0.5, "{f:?}");
        assert!((f.pso(2.0) - 0.2).abs() < 0.01);
    }

    /// A higher-is-better metric: throughput 1000 on bare metal and
    /// `1000/(1.05 + 0.2/s)` on the platform is the same model in its orientation.
    #[test]
    fn throughput_is_oriented_like_time() {
        let base = runs(1000.0, 0.005, 8, 0);
        let p1 = runs(1000.0 / 1.25, 0.005, 8, 1);
        let p2 = runs(1000.0 / 1.15, 0.005, 8, 2);
        let points = [
            SizePoint {
                size: 1.0,
                baseline: &base,
                platform: &p1,
            },
            SizePoint {
                size: 2.0,
                baseline: &base,
                platform: &p2,
            },
        ];
        let f = fit_size_overhead(&points, Direction::Higher, 0.95, 1000, 1).unwrap();
        assert!((f.pto - 0.05).abs() < 1e-6, "{f:?}");
        assert!((f.inverse - 0.2).abs() < 1e-6, "{f:?}");
    }

    #[test]
    fn one_size_or_an_empty_side_fits_nothing() {
        let v = [1.0, 2.0];
        let one = SizePoint {
            size: 1.0,
            baseline: &v,
            platform: &v,
        };
        assert!(fit_size_overhead(&[one, one], Direction::Lower, 0.95, 100, 1).is_none());
        let empty = SizePoint {
            size: 2.0,
            baseline: &[],
            platform: &v,
        };
        assert!(fit_size_overhead(&[one, empty], Direction::Lower, 0.95, 100, 1).is_none());
        let zero = SizePoint {
            size: 0.0,
            baseline: &v,
            platform: &v,
        };
        assert!(fit_size_overhead(&[one, zero], Direction::Lower, 0.95, 100, 1).is_none());
    }
}
