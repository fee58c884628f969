#!/usr/bin/env python3
"""Reference fits of the scalability models for isolab-stats, computed with SciPy.

Usage (from anywhere; needs `pip install scipy numpy`):

    python3 crates/isolab-stats/reference/scalability.py

writes `scalability.json` next to this script. The file is committed; `tests/reference.rs`
compares `ScalingData::fit` to it. Inputs are fixed (a seeded NumPy generator, rounded),
so rerunning with the same SciPy/NumPy gives the same file.

What comes from where:
- Models, in throughput form over concurrency N >= 1:
  Amdahl (1967)        X(N) = lam*N / (1 + sigma*(N-1)),                 lam > 0, 0 <= sigma <= 1
  USL (Gunther, 2007)  X(N) = lam*N / (1 + sigma*(N-1) + kappa*N*(N-1)), lam > 0, 0 <= sigma <= 1,
                                                                          kappa >= 0
- Fit: scipy.optimize.curve_fit(f, N, X, p0, bounds=..., method='trf', x_scale='jac',
  ftol=xtol=gtol=1e-15) on every observation (several runs per N, not level means),
  unweighted, i.e. minimising RSS = sum (X(N_i) - x_i)^2 under the bounds. Each case is
  started from several p0 (Gunther's linearisation and a grid); the lowest RSS is kept,
  and all starts that reach it must agree, so the recorded optimum is not an accident of
  one start.
- `rss` is recomputed with numpy from the recorded parameters; `aic` is
  n*ln(RSS/n) + 2k with k = 2 (Amdahl) or 3 (USL); `peak` = sqrt((1 - sigma)/kappa) when
  kappa is not on its bound.
- A parameter that SciPy leaves within 1e-9 of its lower bound 0 (trf keeps iterates
  strictly inside the box, so it approaches a bound without reaching it) is recorded with
  `at_bound`; the Rust test then compares it with an absolute tolerance.
"""

import json
import math
import platform
import sys
from pathlib import Path

import numpy as np
import scipy
from scipy.optimize import curve_fit

RNG = np.random.default_rng(20240605)
AT_BOUND = 1e-9


def amdahl(n, lam, sigma):
    return lam * n / (1.0 + sigma * (n - 1.0))


def usl(n, lam, sigma, kappa):
    return lam * n / (1.0 + sigma * (n - 1.0) + kappa * n * (n - 1.0))


MODELS = {
    "amdahl": (amdahl, ([0.0, 0.0], [np.inf, 1.0])),
    "usl": (usl, ([0.0, 0.0, 0.0], [np.inf, 1.0, np.inf])),
}


def synthetic(ns, runs, lam, sigma, kappa, noise):
    """`runs` observations per level, multiplicative normal noise, rounded to 4 digits."""
    n = np.repeat(np.asarray(ns, dtype=float), runs)
    x = usl(n, lam, sigma, kappa) * (1.0 + RNG.normal(0.0, noise, n.size))
    return [float(v) for v in n], [round(float(v), 4) for v in x]


def starts(model, n, x):
    n, x = np.asarray(n), np.asarray(x)
    ones = x[n == 1.0]
    lam0 = float(ones.mean()) if ones.size else float(max(x / n))
    levels = sorted(set(n))
    u = np.array([lv - 1.0 for lv in levels])
    z = np.array([lam0 * lv / x[n == lv].mean() - 1.0 for lv in levels])
    if model == "amdahl":
        sigma = float(np.dot(u, z) / np.dot(u, u))
        out = [[lam0, min(max(sigma, 0.0), 1.0)]]
        out += [[lam0, s] for s in (0.01, 0.1, 0.5, 0.9)]
    else:
        a, b = np.linalg.lstsq(np.column_stack([u, u * u]), z, rcond=None)[0]
        out = [[lam0, min(max(a - b, 0.0), 1.0), max(b, 1e-8)]]
        out += [[lam0, s, k] for s in (0.01, 0.1, 0.5) for k in (1e-5, 1e-3, 1e-2)]
    # trf needs a strictly feasible start.
    return [[max(p[0], 1e-6)] + [min(max(v, 1e-10), 1.0 - 1e-10) if i == 0 else max(v, 1e-10)
                                  for i, v in enumerate(p[1:])] for p in out]


def fit(model, n, x):
    f, bounds = MODELS[model]
    n, x = np.asarray(n), np.asarray(x)
    results = []
    for p0 in starts(model, n, x):
        p, _ = curve_fit(
            f, n, x, p0=p0, bounds=bounds, method="trf", x_scale="jac",
            ftol=1e-15, xtol=1e-15, gtol=1e-15, max_nfev=200000,
        )
        results.append((float(np.sum((f(n, *p) - x) ** 2)), [float(v) for v in p]))
    rss, best = min(results, key=lambda r: r[0])
    for r, p in results:
        if r <= rss * (1 + 1e-10):
            for got, want in zip(p, best):
                if want > AT_BOUND:
                    assert math.isclose(got, want, rel_tol=1e-6), (model, p, best)
    params = best + [0.0] if model == "amdahl" else best
    lam, sigma, kappa = params
    k = 2 if model == "amdahl" else 3
    m = len(x)
    return {
        "lambda": lam,
        "sigma": sigma,
        "kappa": kappa,
        "at_bound": {"sigma": sigma <= AT_BOUND, "kappa": kappa <= AT_BOUND},
        "rss": rss,
        "aic": m * math.log(rss / m) + 2 * k,
        "peak": math.sqrt((1 - sigma) / kappa) if kappa > AT_BOUND else None,
    }


def case(name, ns, runs, lam, sigma, kappa, noise):
    n, x = synthetic(ns, runs, lam, sigma, kappa, noise)
    return {
        "name": name,
        "truth": {"lambda": lam, "sigma": sigma, "kappa": kappa, "noise": noise},
        "n": n,
        "x": x,
        "amdahl": fit("amdahl", n, x),
        "usl": fit("usl", n, x),
    }


def main():
    cases = [
        # Retrograde past N* = sqrt(0.95/0.002) ~ 21.8.
        case("usl_retrograde", [1, 2, 4, 8, 12, 16, 24, 32, 48, 64], 5, 100.0, 0.05, 0.002, 0.03),
        # Seed 001's "more instances" up to 128 on a small host: contention dominated.
        case("instances_to_128", [1, 2, 4, 8, 16, 32, 64, 128], 3, 1.0, 0.45, 0.0004, 0.04),
        # Amdahl-shaped threads scaling.
        case("amdahl_threads", list(range(1, 17)), 3, 50.0, 0.1, 0.0, 0.02),
        # Linear: sigma and kappa end on (or next to) their lower bound.
        case("linear", list(range(1, 17)), 3, 10.0, 0.0, 0.0, 0.01),
        # No N = 1 level: lambda is extrapolated.
        case("no_single_unit", [2, 3, 4, 6, 8, 12, 16], 4, 5.0, 0.02, 0.003, 0.03),
        # One run per level, 1..64.
        case("one_run_per_level", list(range(1, 65)), 1, 100.0, 0.05, 0.001, 0.02),
    ]
    out = {
        "generator": {
            "script": "crates/isolab-stats/reference/scalability.py",
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
        "cases": cases,
    }
    path = Path(__file__).with_name("scalability.json")
    path.write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
