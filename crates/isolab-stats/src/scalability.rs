//! Scalability models — Amdahl's law and the Universal Scalability Law — fitted to
//! throughput measured at several concurrency levels, with a seeded bootstrap.
//!
//! Concurrency N ≥ 1 is the number of threads in one instance or the number of
//! concurrent instances; X(N) is the aggregate throughput (higher is better) measured at
//! that level, one observation per run.
//!
//! - **Amdahl's law** (G. M. Amdahl, "Validity of the single processor approach to
//!   achieving large scale computing capabilities", AFIPS Spring Joint Computer
//!   Conference, 1967), in throughput form:
//!
//!   X(N) = λ·N / (1 + σ·(N − 1)),  λ > 0, 0 ≤ σ ≤ 1,
//!
//!   with λ the throughput of one unit and σ the serial fraction. X grows monotonically
//!   towards the ceiling λ/σ.
//! - **Universal Scalability Law** (N. J. Gunther, *Guerrilla Capacity Planning*,
//!   Springer, 2007, ch. 4–6):
//!
//!   X(N) = λ·N / (1 + σ·(N − 1) + κ·N·(N − 1)),  λ > 0, 0 ≤ σ ≤ 1, κ ≥ 0,
//!
//!   with σ the contention and κ the coherency coefficient. When κ > 0 the throughput
//!   peaks at N* = √((1 − σ)/κ) and is retrograde beyond it. σ is bounded by 1 as in
//!   Gunther (σ is a fraction; σ > 1 would make every added unit lose throughput even
//!   without coherency, and N* would be undefined); κ = 0 gives Amdahl's law back.
//!
//! Speedup is S(N) = X(N)/X(1) = N/D(N) and efficiency E(N) = S(N)/N = 1/D(N), D(N)
//! being the denominator above; both are independent of λ.
//!
//! **Fitting** ([`ScalingData::fit`]) minimises the residual sum of squares
//! RSS = Σᵢ (X(Nᵢ) − xᵢ)² over *all* observations (every run at every level, not the
//! level means) subject to the bounds, like `scipy.optimize.curve_fit(..., bounds=...)`.
//! The minimiser is a Levenberg–Marquardt iteration (Marquardt, *J. SIAM* 11(2), 1963)
//! on the normal equations with Marquardt's diagonal scaling and an active set: a
//! parameter sitting on a bound whose gradient points out of the feasible box is frozen
//! for that step, the others take the damped Gauss–Newton step, which is then projected
//! onto the bounds. It starts from Gunther's linearisation (with λ from the N = 1 runs,
//! N·λ/X(N) − 1 = σ·(N − 1) + κ·N·(N − 1) is linear in σ and κ; GCaP §5.6) and from a
//! small grid of (σ, κ), λ being set to its least-squares value for each start, and
//! keeps the solution with the lowest RSS. Throughputs are divided by their maximum
//! while fitting, so the result does not depend on the unit. The fits are checked
//! against SciPy's `curve_fit` on the vectors in `reference/scalability.json`.
//!
//! **Goodness of fit**: R² = 1 − RSS/TSS, RMSE = √(RSS/n), and Akaike's information
//! criterion AIC = n·ln(RSS/n) + 2k with k = 2 (Amdahl) or 3 (USL) (Akaike, *IEEE
//! Trans. Automatic Control* 19(6), 1974; the constant and the noise variance, common
//! to both models, are left out). [`ScalingData::compare`] fits both and prefers the
//! lower AIC; a tie goes to the simpler Amdahl model.
//!
//! **Confidence** ([`ScalingData::bootstrap`]): a percentile bootstrap (Efron &
//! Tibshirani, *An Introduction to the Bootstrap*, 1993, §9.5 and §13.3) that resamples
//! observations *within* each concurrency level — the design (which N, how many runs
//! each) is kept, only the run-to-run noise is resampled — refits every replicate, and
//! reports percentile intervals of λ, σ, κ and N*, and a pointwise band of the fitted
//! curve ([`BootstrapFit::band`]). A level measured once contributes the same value to
//! every replicate, so measure at least two runs per level for honest intervals.

use rand::distributions::{Distribution, Uniform};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::order::percentile_sorted;
use crate::Interval;

/// Largest concurrency accepted (threads or instances): beyond it N²·κ loses precision.
pub const MAX_CONCURRENCY: f64 = 1e6;

/// Fewest distinct concurrency levels a fit accepts (three parameters for the USL).
pub const MIN_LEVELS: usize = 3;

/// Why observations cannot be fitted, or a bootstrap cannot be run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScalabilityError {
    /// Fewer than [`MIN_LEVELS`] distinct concurrency levels.
    #[error(
        "a scalability fit needs observations at 3 or more distinct concurrency levels N, \
         got {distinct}: measure more levels of `threads` or `instances` (e.g. 1, 2, 4, 8)"
    )]
    TooFewLevels {
        /// Number of distinct N in the input.
        distinct: usize,
    },
    /// A concurrency or throughput is NaN or infinite.
    #[error(
        "observation {index}: {what} is {value}, not a finite number: \
         leave failed or missing runs out of the fit"
    )]
    NotFinite {
        /// Position of the observation.
        index: usize,
        /// `concurrency N` or `throughput`.
        what: &'static str,
        /// The offending value.
        value: f64,
    },
    /// A concurrency below 1 or above [`MAX_CONCURRENCY`].
    #[error(
        "observation {index}: concurrency N = {value} is outside [1, 1e6]: \
         give N as the number of threads or instances (1, 2, 4, …)"
    )]
    ConcurrencyOutOfRange {
        /// Position of the observation.
        index: usize,
        /// The offending concurrency.
        value: f64,
    },
    /// A throughput of zero or below.
    #[error(
        "observation {index}: throughput {value} at N = {n} is not positive: give a \
         throughput (work per unit of time, higher is better, > 0); convert a runtime t \
         to throughput as work/t"
    )]
    NonPositiveThroughput {
        /// Position of the observation.
        index: usize,
        /// Its concurrency.
        n: f64,
        /// The offending throughput.
        value: f64,
    },
    /// A confidence level outside (0, 1).
    #[error("confidence level {0} is not in (0, 1): give e.g. 0.95 for a 95% interval")]
    BadLevel(f64),
    /// A bootstrap with no resamples.
    #[error("a bootstrap needs at least one resample, got 0: give e.g. 2000")]
    NoResamples,
}

/// Which scalability model to fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ScalingModel {
    /// Amdahl's law, X(N) = λN / (1 + σ(N − 1)).
    Amdahl,
    /// The Universal Scalability Law, X(N) = λN / (1 + σ(N − 1) + κN(N − 1)).
    Usl,
}

impl ScalingModel {
    /// The word used in reports and exports: `amdahl` or `usl`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScalingModel::Amdahl => "amdahl",
            ScalingModel::Usl => "usl",
        }
    }

    /// Number of fitted parameters k: 2 for Amdahl (λ, σ), 3 for the USL (λ, σ, κ).
    pub fn parameters(self) -> usize {
        match self {
            ScalingModel::Amdahl => 2,
            ScalingModel::Usl => 3,
        }
    }

    /// Lower and upper bounds of (λ, σ, κ). λ > 0 is enforced as λ ≥ the smallest
    /// positive normal number; Amdahl pins κ to 0.
    fn bounds(self) -> ([f64; 3], [f64; 3]) {
        let kappa_max = match self {
            ScalingModel::Amdahl => 0.0,
            ScalingModel::Usl => f64::INFINITY,
        };
        (
            [f64::MIN_POSITIVE, 0.0, 0.0],
            [f64::INFINITY, 1.0, kappa_max],
        )
    }
}

impl std::fmt::Display for ScalingModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The denominator D(N) = 1 + σ(N − 1) + κN(N − 1) of both models.
fn denominator(p: &[f64; 3], n: f64) -> f64 {
    1.0 + p[1] * (n - 1.0) + p[2] * n * (n - 1.0)
}

/// X(N) = λN / D(N).
fn model_throughput(p: &[f64; 3], n: f64) -> f64 {
    p[0] * n / denominator(p, n)
}

/// N* = max(1, √((1 − σ)/κ)) when κ > 0: the concurrency of peak throughput over N ≥ 1.
fn peak_of(p: &[f64; 3]) -> Option<f64> {
    (p[2] > 0.0).then(|| ((1.0 - p[1]) / p[2]).sqrt().max(1.0))
}

/// Throughput observed at one concurrency level.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Level {
    /// Concurrency N.
    pub n: f64,
    /// Number of observations (runs) at this level.
    pub runs: usize,
    /// Mean throughput of those runs.
    pub mean: f64,
}

/// Observed speedup and efficiency at one level, from the level means.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Speedup {
    /// Concurrency N.
    pub n: f64,
    /// mean X(N) / mean X(1).
    pub speedup: f64,
    /// speedup / N (1 = linear scaling).
    pub efficiency: f64,
}

/// Validated scalability observations: (concurrency N, throughput X) pairs, several
/// runs per level allowed, at least [`MIN_LEVELS`] distinct levels, every N in
/// [1, [`MAX_CONCURRENCY`]], every X finite and positive.
#[derive(Debug, Clone, PartialEq)]
pub struct ScalingData {
    n: Vec<f64>,
    x: Vec<f64>,
    /// Indices of the observations of each distinct N, by increasing N.
    groups: Vec<Vec<usize>>,
}

impl ScalingData {
    /// Validates (N, throughput) pairs; see [`ScalabilityError`] for what is refused.
    pub fn new(points: impl IntoIterator<Item = (f64, f64)>) -> Result<Self, ScalabilityError> {
        let (n, x): (Vec<f64>, Vec<f64>) = points.into_iter().unzip();
        for (index, (&ni, &xi)) in n.iter().zip(&x).enumerate() {
            if !ni.is_finite() {
                return Err(ScalabilityError::NotFinite {
                    index,
                    what: "concurrency N",
                    value: ni,
                });
            }
            if !xi.is_finite() {
                return Err(ScalabilityError::NotFinite {
                    index,
                    what: "throughput",
                    value: xi,
                });
            }
            if !(1.0..=MAX_CONCURRENCY).contains(&ni) {
                return Err(ScalabilityError::ConcurrencyOutOfRange { index, value: ni });
            }
            if xi <= 0.0 {
                return Err(ScalabilityError::NonPositiveThroughput {
                    index,
                    n: ni,
                    value: xi,
                });
            }
        }
        let mut order: Vec<usize> = (0..n.len()).collect();
        order.sort_by(|&a, &b| n[a].total_cmp(&n[b]).then(a.cmp(&b)));
        let mut groups: Vec<Vec<usize>> = Vec::new();
        for i in order {
            match groups.last_mut() {
                Some(g) if n[g[0]] == n[i] => g.push(i),
                _ => groups.push(vec![i]),
            }
        }
        if groups.len() < MIN_LEVELS {
            return Err(ScalabilityError::TooFewLevels {
                distinct: groups.len(),
            });
        }
        Ok(ScalingData { n, x, groups })
    }

    /// Number of observations (always ≥ 3).
    pub fn len(&self) -> usize {
        self.n.len()
    }

    /// Always false: the data hold at least three observations.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The (N, throughput) pairs, in the order given.
    pub fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        self.n.iter().copied().zip(self.x.iter().copied())
    }

    /// The distinct levels by increasing N, with their run counts and mean throughputs.
    pub fn levels(&self) -> Vec<Level> {
        self.groups
            .iter()
            .map(|g| Level {
                n: self.n[g[0]],
                runs: g.len(),
                mean: g.iter().map(|&i| self.x[i]).sum::<f64>() / g.len() as f64,
            })
            .collect()
    }

    /// Observed speedup S(N) = x̄(N)/x̄(1) and efficiency S(N)/N of every level, from the
    /// level means; `None` when N = 1 was not measured.
    pub fn speedup(&self) -> Option<Vec<Speedup>> {
        let levels = self.levels();
        let base = levels.iter().find(|l| l.n == 1.0)?.mean;
        Some(
            levels
                .iter()
                .map(|l| Speedup {
                    n: l.n,
                    speedup: l.mean / base,
                    efficiency: l.mean / base / l.n,
                })
                .collect(),
        )
    }

    /// Least-squares fit of `model` to all observations (see the module documentation).
    pub fn fit(&self, model: ScalingModel) -> Fit {
        let problem = Problem::new(self, model);
        let mut starts = problem.starts(self);
        if model == ScalingModel::Usl {
            // The USL nests Amdahl (κ = 0): starting from Amdahl's optimum guarantees the
            // USL fit is never worse.
            starts.push(problem.scaled(&self.fit(ScalingModel::Amdahl)));
        }
        let mut best: Option<Solution> = None;
        for start in starts {
            let s = problem.minimise(start);
            if best.as_ref().is_none_or(|b| s.rss < b.rss) {
                best = Some(s);
            }
        }
        // `starts` always yields at least the linearised start.
        let best = best.unwrap_or_else(|| problem.minimise([1.0, 0.0, 0.0]));
        problem.to_fit(self, &best)
    }

    /// Fits both models and prefers the one with the lower AIC.
    pub fn compare(&self) -> ModelComparison {
        let amdahl = self.fit(ScalingModel::Amdahl);
        let usl = self.fit(ScalingModel::Usl);
        let preferred = if usl.aic < amdahl.aic {
            ScalingModel::Usl
        } else {
            ScalingModel::Amdahl
        };
        ModelComparison {
            amdahl,
            usl,
            preferred,
        }
    }

    /// Fits `model`, then refits it on `resamples` bootstrap replicates that resample the
    /// observations with replacement within each concurrency level, for percentile
    /// intervals at `level` (e.g. 0.95) of the parameters and of the curve.
    ///
    /// Reproducible: the generator is `Xoshiro256PlusPlus::seed_from_u64(seed)`; each
    /// replicate visits the levels by increasing N and draws `runs` indices of each
    /// with `Uniform::new(0, runs)`. Replicates start from the full-data fit.
    ///
    /// Each interval is [P(α/2), P(1 − α/2)] of the replicates (α = 1 − `level`,
    /// percentiles as [`crate::percentile`]), widened if needed to contain the full-data
    /// estimate: when a parameter sits on a bound (σ = 0, κ = 0) every replicate lies
    /// on one side of it, and an interval that excluded the estimate would be wrong.
    /// The peak interval is present when the fit has a peak; replicates without
    /// coherency (κ = 0) have no peak and count as N* = +∞, so its upper end may be
    /// infinite.
    pub fn bootstrap(
        &self,
        model: ScalingModel,
        level: f64,
        resamples: usize,
        seed: u64,
    ) -> Result<BootstrapFit, ScalabilityError> {
        if !(level > 0.0 && level < 1.0) {
            return Err(ScalabilityError::BadLevel(level));
        }
        if resamples == 0 {
            return Err(ScalabilityError::NoResamples);
        }
        let fit = self.fit(model);
        let problem = Problem::new(self, model);
        let start = problem.scaled(&fit);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut replicates = Vec::with_capacity(resamples);
        let mut rn = Vec::with_capacity(self.len());
        let mut rx = Vec::with_capacity(self.len());
        for _ in 0..resamples {
            rn.clear();
            rx.clear();
            for g in &self.groups {
                let index = Uniform::new(0, g.len());
                for _ in 0..g.len() {
                    let i = g[index.sample(&mut rng)];
                    rn.push(self.n[i]);
                    rx.push(self.x[i] / problem.scale);
                }
            }
            let replicate = Problem {
                n: std::mem::take(&mut rn),
                y: std::mem::take(&mut rx),
                model,
                scale: problem.scale,
            };
            let s = replicate.minimise(start);
            replicates.push([s.p[0] * problem.scale, s.p[1], s.p[2]]);
            rn = replicate.n;
            rx = replicate.y;
        }
        let half_alpha = (1.0 - level) / 2.0;
        let interval = |values: Vec<f64>, estimate: f64| {
            let mut v = values;
            v.sort_by(f64::total_cmp);
            Interval {
                low: percentile_with_infinity(&v, 100.0 * half_alpha).min(estimate),
                high: percentile_with_infinity(&v, 100.0 * (1.0 - half_alpha)).max(estimate),
                level,
            }
        };
        let column = |j: usize| replicates.iter().map(|r| r[j]).collect::<Vec<f64>>();
        let peak = fit.peak.map(|estimate| {
            let peaks = replicates
                .iter()
                .map(|r| peak_of(r).unwrap_or(f64::INFINITY))
                .collect();
            interval(peaks, estimate)
        });
        Ok(BootstrapFit {
            lambda: interval(column(0), fit.lambda),
            sigma: interval(column(1), fit.sigma),
            kappa: interval(column(2), fit.kappa),
            peak,
            fit,
            resamples,
            single_run_levels: self.groups.iter().filter(|g| g.len() == 1).count(),
            replicates,
        })
    }
}

/// Percentile of sorted values that may end in +∞ (linear interpolation towards +∞ is
/// +∞, not NaN).
fn percentile_with_infinity(sorted: &[f64], q: f64) -> f64 {
    let virtual_index = q / 100.0 * (sorted.len() - 1) as f64;
    let below = virtual_index.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    if virtual_index == below as f64 {
        sorted[below]
    } else if sorted[above].is_infinite() {
        f64::INFINITY
    } else {
        percentile_sorted(sorted, q)
    }
}

/// A fitted scalability model.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct Fit {
    /// The model fitted.
    pub model: ScalingModel,
    /// λ: throughput of one unit (X(1)), in the unit of the observations.
    pub lambda: f64,
    /// σ: serial fraction (Amdahl) or contention coefficient (USL), in [0, 1].
    pub sigma: f64,
    /// κ: coherency coefficient, ≥ 0; always 0 for Amdahl.
    pub kappa: f64,
    /// Coefficient of determination 1 − RSS/TSS over all observations. When all
    /// throughputs are equal (TSS = 0) it is 1 if the fit reproduces them to 12 digits,
    /// else 0.
    pub r_squared: f64,
    /// Root mean squared residual √(RSS/n), in the unit of the observations.
    pub rmse: f64,
    /// Residual sum of squares Σ(X(Nᵢ) − xᵢ)².
    pub rss: f64,
    /// Akaike's criterion n·ln(RSS/n) + 2k (−∞ for an exact fit).
    pub aic: f64,
    /// Number of observations fitted.
    pub n_obs: usize,
    /// Concurrency of peak throughput, max(1, √((1 − σ)/κ)), when κ > 0; `None` when the
    /// fitted throughput never stops growing (Amdahl, or κ = 0).
    pub peak: Option<f64>,
    /// Whether the minimiser stopped because it could no longer lower the RSS (false:
    /// it hit its iteration limit, and the parameters are the best it reached).
    pub converged: bool,
}

impl Fit {
    fn params(&self) -> [f64; 3] {
        [self.lambda, self.sigma, self.kappa]
    }

    /// Fitted throughput X(N) = λN / (1 + σ(N − 1) + κN(N − 1)).
    pub fn throughput(&self, n: f64) -> f64 {
        model_throughput(&self.params(), n)
    }

    /// Fitted speedup S(N) = X(N)/X(1) = N / (1 + σ(N − 1) + κN(N − 1)).
    pub fn speedup(&self, n: f64) -> f64 {
        n / denominator(&self.params(), n)
    }

    /// Fitted efficiency E(N) = S(N)/N = 1 / (1 + σ(N − 1) + κN(N − 1)).
    pub fn efficiency(&self, n: f64) -> f64 {
        1.0 / denominator(&self.params(), n)
    }
}

/// Both models fitted to the same data, and the one with the lower AIC.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct ModelComparison {
    /// The Amdahl fit.
    pub amdahl: Fit,
    /// The USL fit.
    pub usl: Fit,
    /// The model with the lower AIC (Amdahl on a tie). A hint, not a test: an AIC
    /// difference below 2 is weak evidence either way (Burnham & Anderson, *Model
    /// Selection and Multimodel Inference*, 2002, §2.6).
    pub preferred: ScalingModel,
}

impl ModelComparison {
    /// The fit of the preferred model.
    pub fn best(&self) -> &Fit {
        match self.preferred {
            ScalingModel::Amdahl => &self.amdahl,
            ScalingModel::Usl => &self.usl,
        }
    }

    /// AIC(Amdahl) − AIC(USL): positive when the USL is preferred.
    pub fn aic_difference(&self) -> f64 {
        self.amdahl.aic - self.usl.aic
    }
}

/// One point of a confidence band of the fitted curve.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BandPoint {
    /// Concurrency N.
    pub n: f64,
    /// Lower end of the pointwise interval of X(N).
    pub low: f64,
    /// Fitted X(N).
    pub fit: f64,
    /// Upper end of the pointwise interval of X(N).
    pub high: f64,
}

/// A fit with percentile-bootstrap intervals (see [`ScalingData::bootstrap`]).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct BootstrapFit {
    /// The fit to all observations (the point estimate).
    pub fit: Fit,
    /// Interval of λ.
    pub lambda: Interval,
    /// Interval of σ.
    pub sigma: Interval,
    /// Interval of κ (Amdahl: [0, 0]).
    pub kappa: Interval,
    /// Interval of the peak concurrency N*, when the fit has a peak.
    pub peak: Option<Interval>,
    /// Number of bootstrap replicates.
    pub resamples: usize,
    /// Number of levels measured by a single run: they contribute the same value to
    /// every replicate, so when all levels are single runs the intervals collapse onto
    /// the estimate. Report them; measure at least two runs per level.
    pub single_run_levels: usize,
    /// (λ, σ, κ) of every replicate.
    #[serde(skip)]
    replicates: Vec<[f64; 3]>,
}

impl BootstrapFit {
    /// Pointwise percentile band of the fitted throughput on `grid`: for each N, the
    /// α/2 and 1 − α/2 percentiles of the replicates' X(N), widened if needed to contain
    /// the fitted X(N) (see [`ScalingData::bootstrap`]). Grid values that are not finite
    /// or lie outside [1, [`MAX_CONCURRENCY`]] are left out (the models are defined for
    /// N ≥ 1).
    pub fn band(&self, grid: &[f64]) -> Vec<BandPoint> {
        let half_alpha = (1.0 - self.lambda.level) / 2.0;
        let mut values = Vec::with_capacity(self.replicates.len());
        grid.iter()
            .copied()
            .filter(|n| (1.0..=MAX_CONCURRENCY).contains(n))
            .map(|n| {
                values.clear();
                values.extend(self.replicates.iter().map(|r| model_throughput(r, n)));
                values.sort_by(f64::total_cmp);
                let fit = self.fit.throughput(n);
                BandPoint {
                    n,
                    low: percentile_sorted(&values, 100.0 * half_alpha).min(fit),
                    fit,
                    high: percentile_sorted(&values, 100.0 * (1.0 - half_alpha)).max(fit),
                }
            })
            .collect()
    }

    /// The (λ, σ, κ) of every bootstrap replicate, in the order drawn.
    pub fn replicates(&self) -> &[[f64; 3]] {
        &self.replicates
    }
}

// ------------------------------------------------------------------ the minimiser

/// Iteration limit of one Levenberg–Marquardt run.
const MAX_ITERATIONS: usize = 500;
/// Damping beyond which no step lowers the RSS: the minimum is reached to rounding.
const MAX_DAMPING: f64 = 1e14;
/// Relative RSS decrease treated as rounding noise.
const RSS_TOLERANCE: f64 = 4.0 * f64::EPSILON;

/// Least-squares problem in scaled units: y = x / scale, so λ is in units of `scale`.
struct Problem {
    n: Vec<f64>,
    y: Vec<f64>,
    model: ScalingModel,
    scale: f64,
}

/// The end of one minimisation, in scaled units.
struct Solution {
    p: [f64; 3],
    rss: f64,
    converged: bool,
}

impl Problem {
    fn new(data: &ScalingData, model: ScalingModel) -> Self {
        let scale = data.x.iter().copied().fold(f64::MIN_POSITIVE, f64::max);
        Problem {
            n: data.n.clone(),
            y: data.x.iter().map(|x| x / scale).collect(),
            model,
            scale,
        }
    }

    /// A fit's parameters in this problem's units.
    fn scaled(&self, fit: &Fit) -> [f64; 3] {
        [fit.lambda / self.scale, fit.sigma, fit.kappa]
    }

    fn rss(&self, p: &[f64; 3]) -> f64 {
        self.n
            .iter()
            .zip(&self.y)
            .map(|(&n, &y)| (model_throughput(p, n) - y).powi(2))
            .sum()
    }

    /// λ minimising the RSS for fixed σ, κ: X = λ·f(N) is linear in λ, so
    /// λ = Σ y f / Σ f².
    fn best_lambda(&self, sigma: f64, kappa: f64) -> f64 {
        let (mut yf, mut ff) = (0.0, 0.0);
        for (&n, &y) in self.n.iter().zip(&self.y) {
            let f = model_throughput(&[1.0, sigma, kappa], n);
            yf += y * f;
            ff += f * f;
        }
        let lambda = yf / ff;
        if lambda.is_finite() && lambda > 0.0 {
            lambda
        } else {
            1.0
        }
    }

    /// Starting points: Gunther's linearisation, then a grid of (σ, κ), each with its
    /// least-squares λ.
    fn starts(&self, data: &ScalingData) -> Vec<[f64; 3]> {
        let (lo, hi) = self.model.bounds();
        let levels = data.levels();
        // λ₀: the mean at N = 1, else the best per-unit throughput (a lower bound of λ
        // when σ, κ ≥ 0).
        let lambda0 = levels
            .iter()
            .find(|l| l.n == 1.0)
            .map(|l| l.mean)
            .unwrap_or_else(|| levels.iter().map(|l| l.mean / l.n).fold(0.0, f64::max))
            / self.scale;
        // z = λ₀N/x̄ − 1 = (σ + κ)·u + κ·u², u = N − 1.
        let (mut s11, mut s12, mut s22, mut s1z, mut s2z) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for l in &levels {
            let u = l.n - 1.0;
            let z = lambda0 * l.n / (l.mean / self.scale) - 1.0;
            s11 += u * u;
            s12 += u * u * u;
            s22 += u * u * u * u;
            s1z += u * z;
            s2z += u * u * z;
        }
        let (sigma, kappa) = match self.model {
            ScalingModel::Amdahl => (s1z / s11, 0.0),
            ScalingModel::Usl => {
                let det = s11 * s22 - s12 * s12;
                let a = (s1z * s22 - s2z * s12) / det;
                let b = (s11 * s2z - s12 * s1z) / det;
                (a - b, b)
            }
        };
        let clip = |v: f64, i: usize| {
            if v.is_finite() {
                v.clamp(lo[i], hi[i])
            } else {
                lo[i]
            }
        };
        let mut pairs = vec![(clip(sigma, 1), clip(kappa, 2))];
        let kappas: &[f64] = match self.model {
            ScalingModel::Amdahl => &[0.0],
            ScalingModel::Usl => &[0.0, 1e-4, 1e-2],
        };
        for &s in &[0.0, 0.1, 0.5, 0.9] {
            for &k in kappas {
                pairs.push((s, k));
            }
        }
        pairs
            .into_iter()
            .map(|(s, k)| [self.best_lambda(s, k), s, k])
            .collect()
    }

    /// Projected Levenberg–Marquardt from `start` (see the module documentation).
    fn minimise(&self, start: [f64; 3]) -> Solution {
        let (lo, hi) = self.model.bounds();
        let mut p = start;
        for i in 0..3 {
            p[i] = p[i].clamp(lo[i], hi[i]);
        }
        let mut rss = self.rss(&p);
        if !rss.is_finite() {
            p = [self.best_lambda(0.0, 0.0), 0.0, 0.0];
            rss = self.rss(&p);
        }
        let mut damping = 1e-3;
        for _ in 0..MAX_ITERATIONS {
            let (a, g) = self.normal_equations(&p);
            let free: [bool; 3] = std::array::from_fn(|i| {
                lo[i] < hi[i]
                    && a[i][i] > 0.0
                    && a[i][i].is_finite()
                    && !(p[i] <= lo[i] && g[i] > 0.0)
                    && !(p[i] >= hi[i] && g[i] < 0.0)
            });
            loop {
                let Some(step) = damped_step(&a, &g, &free, damping) else {
                    damping *= 10.0;
                    if damping > MAX_DAMPING {
                        return Solution {
                            p,
                            rss,
                            converged: true,
                        };
                    }
                    continue;
                };
                let candidate: [f64; 3] =
                    std::array::from_fn(|i| (p[i] + step[i]).clamp(lo[i], hi[i]));
                let new_rss = self.rss(&candidate);
                if new_rss.is_finite() && new_rss < rss {
                    let decrease = rss - new_rss;
                    p = candidate;
                    rss = new_rss;
                    damping = (damping / 10.0).max(1e-15);
                    if decrease <= RSS_TOLERANCE * rss {
                        return Solution {
                            p,
                            rss,
                            converged: true,
                        };
                    }
                    break;
                }
                damping *= 10.0;
                if damping > MAX_DAMPING {
                    return Solution {
                        p,
                        rss,
                        converged: true,
                    };
                }
            }
        }
        Solution {
            p,
            rss,
            converged: false,
        }
    }

    /// JᵀJ and the gradient Jᵀr of ½RSS, with r = X(N) − y and the analytic Jacobian
    /// ∂X/∂λ = N/D, ∂X/∂σ = −λN(N − 1)/D², ∂X/∂κ = −λN²(N − 1)/D².
    fn normal_equations(&self, p: &[f64; 3]) -> ([[f64; 3]; 3], [f64; 3]) {
        let mut a = [[0.0; 3]; 3];
        let mut g = [0.0; 3];
        for (&n, &y) in self.n.iter().zip(&self.y) {
            let d = denominator(p, n);
            let f = n / d;
            let r = p[0] * f - y;
            let common = -p[0] * n * (n - 1.0) / (d * d);
            let j = [f, common, common * n];
            for row in 0..3 {
                g[row] += j[row] * r;
                for col in 0..3 {
                    a[row][col] += j[row] * j[col];
                }
            }
        }
        (a, g)
    }

    fn to_fit(&self, data: &ScalingData, s: &Solution) -> Fit {
        let p = [s.p[0] * self.scale, s.p[1], s.p[2]];
        let n_obs = data.len();
        let rss: f64 = data
            .points()
            .map(|(n, x)| (model_throughput(&p, n) - x).powi(2))
            .sum();
        let mean = data.x.iter().sum::<f64>() / n_obs as f64;
        let tss: f64 = data.x.iter().map(|x| (x - mean).powi(2)).sum();
        let nf = n_obs as f64;
        let r_squared = if tss > 0.0 {
            1.0 - rss / tss
        } else if rss <= nf * (mean * 1e-12).powi(2) {
            1.0
        } else {
            0.0
        };
        Fit {
            model: self.model,
            lambda: p[0],
            sigma: p[1],
            kappa: p[2],
            r_squared,
            rmse: (rss / nf).sqrt(),
            rss,
            aic: nf * (rss / nf).ln() + 2.0 * self.model.parameters() as f64,
            n_obs,
            peak: peak_of(&p),
            converged: s.converged,
        }
    }
}

/// The Marquardt step δ for the free parameters, solving
/// (Â + μI)·z = −ĝ with Â = S·JᵀJ·S, ĝ = S·Jᵀr, S = diag(1/√(JᵀJ)ᵢᵢ) and δ = S·z
/// (Jacobi scaling makes μ act as Marquardt's μ·diag(JᵀJ)); fixed parameters get 0.
/// `None` when no parameter is free or the system is singular.
fn damped_step(
    a: &[[f64; 3]; 3],
    g: &[f64; 3],
    free: &[bool; 3],
    damping: f64,
) -> Option<[f64; 3]> {
    let mut idx = [0usize; 3];
    let mut k = 0;
    for (i, &is_free) in free.iter().enumerate() {
        if is_free {
            idx[k] = i;
            k += 1;
        }
    }
    if k == 0 {
        return None;
    }
    let s: [f64; 3] = std::array::from_fn(|i| 1.0 / a[i][i].sqrt());
    let mut m = [[0.0; 4]; 3];
    for r in 0..k {
        for c in 0..k {
            m[r][c] = a[idx[r]][idx[c]] * s[idx[r]] * s[idx[c]];
        }
        m[r][r] += damping;
        m[r][3] = -g[idx[r]] * s[idx[r]];
    }
    // Gaussian elimination with partial pivoting on the k × (k + 1) augmented matrix.
    for col in 0..k {
        let pivot = (col..k).max_by(|&x, &y| m[x][col].abs().total_cmp(&m[y][col].abs()))?;
        m.swap(col, pivot);
        let d = m[col][col];
        if !d.is_finite() || d.abs() <= 1e-300 {
            return None;
        }
        let pivot_row = m[col];
        for row in m.iter_mut().take(k).skip(col + 1) {
            let factor = row[col] / d;
            for (x, p) in row[col..].iter_mut().zip(&pivot_row[col..]) {
                *x -= factor * p;
            }
        }
    }
    let mut z = [0.0; 3];
    for r in (0..k).rev() {
        let tail: f64 = (r + 1..k).map(|c| m[r][c] * z[c]).sum();
        z[r] = (m[r][3] - tail) / m[r][r];
    }
    let mut step = [0.0; 3];
    for r in 0..k {
        step[idx[r]] = z[r] * s[idx[r]];
    }
    step.iter().all(|v| v.is_finite()).then_some(step)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn usl(lambda: f64, sigma: f64, kappa: f64, n: f64) -> f64 {
        lambda * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))
    }

    /// Deterministic multiplicative noise in [−amplitude, amplitude] (a fixed
    /// Xoshiro stream), so the tests do not depend on proptest's generator.
    fn noisy(points: &[(f64, f64)], amplitude: f64, seed: u64) -> Vec<(f64, f64)> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let u = Uniform::new_inclusive(-amplitude, amplitude);
        points
            .iter()
            .map(|&(n, x)| (n, x * (1.0 + u.sample(&mut rng))))
            .collect()
    }

    fn curve(lambda: f64, sigma: f64, kappa: f64, ns: &[f64], runs: usize) -> Vec<(f64, f64)> {
        ns.iter()
            .flat_map(|&n| std::iter::repeat_n((n, usl(lambda, sigma, kappa, n)), runs))
            .collect()
    }

    #[track_caller]
    fn assert_rel(what: &str, got: f64, want: f64, rel: f64) {
        assert!(
            (got - want).abs() <= rel * want.abs(),
            "{what}: got {got:e}, want {want:e}"
        );
    }

    #[test]
    fn recovers_noiseless_usl_exactly() {
        let ns: Vec<f64> = (1..=64).map(f64::from).collect();
        let data = ScalingData::new(curve(100.0, 0.05, 0.001, &ns, 1)).unwrap();
        let f = data.fit(ScalingModel::Usl);
        assert!(f.converged);
        assert_rel("lambda", f.lambda, 100.0, 1e-6);
        assert_rel("sigma", f.sigma, 0.05, 1e-6);
        assert_rel("kappa", f.kappa, 0.001, 1e-6);
        assert_rel("peak", f.peak.unwrap(), (0.95f64 / 0.001).sqrt(), 1e-6);
        assert!(f.r_squared > 1.0 - 1e-12, "{f:?}");
    }

    #[test]
    fn recovers_noiseless_amdahl_exactly_with_either_model() {
        let ns = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0];
        let data = ScalingData::new(curve(7.5, 0.2, 0.0, &ns, 2)).unwrap();
        for model in [ScalingModel::Amdahl, ScalingModel::Usl] {
            let f = data.fit(model);
            assert_rel("lambda", f.lambda, 7.5, 1e-6);
            assert_rel("sigma", f.sigma, 0.2, 1e-6);
            assert!(f.kappa < 1e-9, "{f:?}");
        }
        assert_eq!(data.fit(ScalingModel::Amdahl).peak, None);
    }

    #[test]
    fn result_does_not_depend_on_the_unit() {
        let ns = [1.0, 2.0, 3.0, 4.0, 6.0, 8.0];
        let base = noisy(&curve(1.0, 0.1, 0.01, &ns, 3), 0.03, 5);
        let big: Vec<_> = base.iter().map(|&(n, x)| (n, x * 1e9)).collect();
        let (a, b) = (
            ScalingData::new(base).unwrap().fit(ScalingModel::Usl),
            ScalingData::new(big).unwrap().fit(ScalingModel::Usl),
        );
        assert_rel("lambda", b.lambda, a.lambda * 1e9, 1e-8);
        assert_rel("sigma", b.sigma, a.sigma, 1e-6);
        assert_rel("kappa", b.kappa, a.kappa, 1e-6);
    }

    #[test]
    fn retrograde_data_give_coherency_and_the_peak() {
        // True peak √((1 − 0.03)/0.004) ≈ 15.6.
        let ns = [1.0, 2.0, 4.0, 8.0, 12.0, 16.0, 24.0, 32.0, 48.0, 64.0];
        let data = ScalingData::new(noisy(&curve(40.0, 0.03, 0.004, &ns, 4), 0.05, 11)).unwrap();
        let c = data.compare();
        assert_eq!(c.preferred, ScalingModel::Usl, "{c:?}");
        assert!(c.usl.kappa > 0.0);
        let peak = c.usl.peak.unwrap();
        assert!((peak - 15.57).abs() < 2.0, "peak {peak}");
        let b = data.bootstrap(ScalingModel::Usl, 0.95, 300, 1).unwrap();
        let pk = b.peak.unwrap();
        assert!(pk.low < 15.57 && 15.57 < pk.high, "{pk:?}");
        assert!(b.kappa.low > 0.0, "{:?}", b.kappa);
    }

    #[test]
    fn linear_data_give_no_contention_nor_coherency() {
        let ns: Vec<f64> = (1..=16).map(f64::from).collect();
        let data = ScalingData::new(noisy(&curve(10.0, 0.0, 0.0, &ns, 3), 0.01, 3)).unwrap();
        let f = data.fit(ScalingModel::Usl);
        assert!(f.sigma < 2e-3 && f.kappa < 1e-4, "{f:?}");
        assert!(f.peak.is_none_or(|p| p > 50.0), "{f:?}");
        let a = data.fit(ScalingModel::Amdahl);
        assert!(a.sigma < 2e-3, "{a:?}");
        assert!(a.speedup(16.0) > 15.5);
    }

    #[test]
    fn fit_without_n_equal_one() {
        let ns = [2.0, 4.0, 8.0, 16.0, 32.0];
        let data = ScalingData::new(curve(3.0, 0.1, 0.002, &ns, 2)).unwrap();
        let f = data.fit(ScalingModel::Usl);
        assert_rel("lambda", f.lambda, 3.0, 1e-6);
        assert_rel("kappa", f.kappa, 0.002, 1e-6);
        assert!(data.speedup().is_none());
    }

    #[test]
    fn speedup_and_efficiency() {
        let data = ScalingData::new([(1.0, 10.0), (1.0, 12.0), (2.0, 20.0), (4.0, 33.0)]).unwrap();
        let s = data.speedup().unwrap();
        assert_eq!(s[0].speedup, 1.0);
        assert_eq!(s[1].speedup, 20.0 / 11.0);
        assert_eq!(s[2].efficiency, 33.0 / 11.0 / 4.0);
        assert_eq!(data.levels()[0].runs, 2);
        let f = data.fit(ScalingModel::Amdahl);
        assert!((f.speedup(1.0) - 1.0).abs() < 1e-15);
        assert!((f.efficiency(4.0) - f.speedup(4.0) / 4.0).abs() < 1e-15);
        assert!((f.throughput(4.0) - f.lambda * f.speedup(4.0)).abs() < 1e-12);
    }

    #[test]
    fn refuses_bad_input_with_guidance() {
        let e = ScalingData::new([(1.0, 1.0), (2.0, 2.0), (2.0, 2.1)]).unwrap_err();
        assert_eq!(e, ScalabilityError::TooFewLevels { distinct: 2 });
        assert!(e.to_string().contains("3 or more distinct"));
        assert_eq!(
            ScalingData::new([]).unwrap_err(),
            ScalabilityError::TooFewLevels { distinct: 0 }
        );
        let e = ScalingData::new([(1.0, 1.0), (2.0, 0.0), (3.0, 2.0)]).unwrap_err();
        assert!(matches!(
            e,
            ScalabilityError::NonPositiveThroughput { index: 1, .. }
        ));
        assert!(e.to_string().contains("convert a runtime"));
        let e = ScalingData::new([(1.0, 1.0), (2.0, f64::NAN), (3.0, 2.0)]).unwrap_err();
        assert!(matches!(
            e,
            ScalabilityError::NotFinite {
                index: 1,
                what: "throughput",
                ..
            }
        ));
        let e = ScalingData::new([(f64::INFINITY, 1.0)]).unwrap_err();
        assert!(matches!(
            e,
            ScalabilityError::NotFinite {
                what: "concurrency N",
                ..
            }
        ));
        let e = ScalingData::new([(0.0, 1.0), (2.0, 1.0), (3.0, 2.0)]).unwrap_err();
        assert_eq!(
            e,
            ScalabilityError::ConcurrencyOutOfRange {
                index: 0,
                value: 0.0
            }
        );
        let data = ScalingData::new([(1.0, 1.0), (2.0, 1.9), (3.0, 2.7)]).unwrap();
        for level in [0.0, 1.0, f64::NAN] {
            let e = data.bootstrap(ScalingModel::Usl, level, 10, 1).unwrap_err();
            assert!(e.to_string().contains("0.95"), "{e}");
        }
        assert_eq!(
            data.bootstrap(ScalingModel::Usl, 0.95, 0, 1).unwrap_err(),
            ScalabilityError::NoResamples
        );
    }

    #[test]
    fn bootstrap_is_reproducible_and_covers_the_truth() {
        let ns = [1.0, 2.0, 4.0, 6.0, 8.0, 12.0, 16.0];
        let data = ScalingData::new(noisy(&curve(50.0, 0.08, 0.0, &ns, 5), 0.02, 9)).unwrap();
        let a = data.bootstrap(ScalingModel::Amdahl, 0.95, 400, 42).unwrap();
        assert_eq!(
            a,
            data.bootstrap(ScalingModel::Amdahl, 0.95, 400, 42).unwrap()
        );
        assert_ne!(
            a,
            data.bootstrap(ScalingModel::Amdahl, 0.95, 400, 43).unwrap()
        );
        assert_eq!(a.replicates().len(), 400);
        assert_eq!(a.single_run_levels, 0);
        assert!(
            a.lambda.low < 50.0 && 50.0 < a.lambda.high,
            "{:?}",
            a.lambda
        );
        assert!(a.sigma.low < 0.08 && 0.08 < a.sigma.high, "{:?}", a.sigma);
        assert_eq!((a.kappa.low, a.kappa.high), (0.0, 0.0));
        assert_eq!(a.peak, None);
        let band = a.band(&[0.5, 1.0, 3.0, 16.0, 100.0, f64::NAN]);
        assert_eq!(
            band.iter().map(|b| b.n).collect::<Vec<_>>(),
            [1.0, 3.0, 16.0, 100.0]
        );
        for b in &band {
            assert!(b.low < b.fit && b.fit < b.high, "{b:?}");
            let truth = usl(50.0, 0.08, 0.0, b.n);
            if b.n <= 16.0 {
                assert!(b.low < truth && truth < b.high, "{b:?} vs {truth}");
            }
        }
        // The band widens away from the data.
        assert!(band[3].high - band[3].low > band[2].high - band[2].low);
    }

    #[test]
    fn percentile_towards_infinity_is_infinite() {
        let v = [1.0, 2.0, f64::INFINITY];
        assert_eq!(percentile_with_infinity(&v, 50.0), 2.0);
        assert_eq!(percentile_with_infinity(&v, 75.0), f64::INFINITY);
        assert_eq!(percentile_with_infinity(&v, 25.0), 1.5);
    }

    fn arbitrary_points() -> impl Strategy<Value = Vec<(f64, f64)>> {
        prop::collection::btree_set(1u32..=256, 3..10).prop_flat_map(|levels| {
            let levels: Vec<f64> = levels.into_iter().map(f64::from).collect();
            let k = levels.len();
            (
                Just(levels),
                prop::collection::vec(prop::collection::vec(1e-3f64..1e6, 1..4), k),
            )
                .prop_map(|(levels, xs)| {
                    levels
                        .iter()
                        .zip(xs)
                        .flat_map(|(&n, runs)| runs.into_iter().map(move |x| (n, x)))
                        .collect()
                })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn fits_respect_bounds_and_never_panic(points in arbitrary_points()) {
            let data = ScalingData::new(points).unwrap();
            let c = data.compare();
            for f in [c.amdahl, c.usl] {
                prop_assert!(f.lambda > 0.0 && f.lambda.is_finite(), "{f:?}");
                prop_assert!((0.0..=1.0).contains(&f.sigma), "{f:?}");
                prop_assert!(f.kappa >= 0.0 && f.kappa.is_finite(), "{f:?}");
                prop_assert!(f.rss.is_finite() && f.rss >= 0.0 && f.r_squared <= 1.0, "{f:?}");
                prop_assert!(f.peak.is_none_or(|p| p >= 1.0), "{f:?}");
            }
            prop_assert_eq!(c.amdahl.kappa, 0.0);
            // The USL nests Amdahl: its optimum cannot be (materially) worse.
            prop_assert!(c.usl.rss <= c.amdahl.rss * (1.0 + 1e-9), "{:?}", c);
        }

        #[test]
        fn band_contains_the_fit(points in arbitrary_points(), seed in any::<u64>()) {
            let data = ScalingData::new(points).unwrap();
            let b = data.bootstrap(ScalingModel::Usl, 0.95, 20, seed).unwrap();
            for p in b.band(&[1.0, 2.5, 10.0, 300.0]) {
                prop_assert!(p.low <= p.fit && p.fit <= p.high, "{p:?}");
                prop_assert!(p.low.is_finite() && p.high.is_finite(), "{p:?}");
            }
            for (i, est) in [(b.lambda, b.fit.lambda), (b.sigma, b.fit.sigma), (b.kappa, b.fit.kappa)] {
                prop_assert!(i.low <= est && est <= i.high, "{i:?} vs {est}");
            }
        }

        #[test]
        fn bad_input_is_refused_not_panicked_on(
            points in prop::collection::vec(
                (prop_oneof![Just(f64::NAN), Just(0.5), -10.0f64..300.0, Just(2e6)],
                 prop_oneof![Just(f64::INFINITY), Just(0.0), -1e3f64..1e3]),
                0..12,
            ),
        ) {
            if let Ok(data) = ScalingData::new(points) {
                let f = data.fit(ScalingModel::Usl);
                prop_assert!(f.lambda.is_finite());
            }
        }
    }
}
