#!/usr/bin/env python3
"""Reference vectors for isolab-stats, computed with SciPy and NumPy.

Usage (from anywhere; needs `pip install scipy numpy`):

    python3 crates/isolab-stats/reference/generate.py

writes `vectors.json` next to this script. The file is committed; `tests/reference.rs`
compares the Rust implementation to it. Inputs are fixed (a seeded NumPy generator,
rounded), so rerunning with the same SciPy/NumPy gives the same file.

What comes from where:
- mann_whitney: scipy.stats.mannwhitneyu(a, b, alternative='two-sided',
  use_continuity=True, method='exact' and 'asymptotic'); `exact_expected` is isolab's
  rule (no ties and C(n1+n2, n1) <= 2**53).
- hodges_lehmann: estimate = numpy.median of all b_j - a_i; the critical rank k from the
  exact null distribution of U computed here independently (big-integer recurrence
  c(m, n, k) = c(m-1, n, k-n) + c(m, n-1, k), cross-checked by brute-force enumeration
  for small sizes and against scipy's exact Mann-Whitney p-values), and the
  large-sample rank from scipy.stats.norm.ppf.
- benjamini_hochberg: scipy.stats.false_discovery_control(p, method='bh').
- percentile: numpy.percentile(values, q) (method='linear').
- median_ci: k from scipy.stats.binom.cdf; cross-checked against
  scipy.stats.quantile_test(x, p=0.5).confidence_interval(level).
- power: scipy.stats.norm.ppf in n = ceil(2 (z_{1-a/2} + z_power)^2 (cv/effect)^2).
- welch: scipy.stats.ttest_ind(a, b, equal_var=False).
- sample: numpy mean/median/std(ddof=1) and scipy.stats.t.interval.
- bootstrap: scipy.stats.bootstrap(method='percentile') on the ratio of means, only as
  a loose sanity check (different random streams; the Rust test uses a tolerance).
"""

import itertools
import json
import math
import platform
import sys
from collections import Counter
from functools import lru_cache
from pathlib import Path

import numpy as np
import scipy
from scipy import stats

MAX_EXACT_ARRANGEMENTS = 2**53
RNG = np.random.default_rng(20240604)


def rounded(x, digits=3):
    return [round(float(v), digits) for v in x]


def normal(n, loc, scale, digits=3):
    return rounded(RNG.normal(loc, scale, n), digits)


def has_ties(a, b):
    pooled = list(a) + list(b)
    return len(set(pooled)) != len(pooled)


# ---------------------------------------------------------------- Mann-Whitney U


@lru_cache(maxsize=None)
def u_counts(m, n):
    """Counts of the null distribution of U for sizes m, n (tuple indexed by U)."""
    if m == 0 or n == 0:
        return (1,)
    with_m = u_counts(m - 1, n)  # largest value from the first sample: U grows by n
    with_n = u_counts(m, n - 1)
    out = [0] * (m * n + 1)
    for k, c in enumerate(with_m):
        out[k + n] += c
    for k, c in enumerate(with_n):
        out[k] += c
    return tuple(out)


def u_counts_brute(m, n):
    counts = Counter()
    for pos in itertools.combinations(range(1, m + n + 1), m):
        counts[sum(pos) - m * (m + 1) // 2] += 1
    return tuple(counts[k] for k in range(m * n + 1))


def exact_feasible(n1, n2):
    return math.comb(n1 + n2, n1) <= MAX_EXACT_ARRANGEMENTS


def mw_case(name, a, b):
    n1, n2 = len(a), len(b)
    asym = stats.mannwhitneyu(a, b, alternative="two-sided", use_continuity=True, method="asymptotic")
    ties = has_ties(a, b)
    case = {
        "name": name,
        "a": a,
        "b": b,
        "ties": ties,
        "u": float(asym.statistic),
        "p_asymptotic": float(asym.pvalue),
        "p_exact": None,
        "exact_expected": (not ties) and exact_feasible(n1, n2),
    }
    if not ties:
        ex = stats.mannwhitneyu(a, b, alternative="two-sided", method="exact")
        case["p_exact"] = float(ex.pvalue)
        # Cross-check scipy's exact p against the recurrence used for HL below.
        if exact_feasible(n1, n2):
            counts = u_counts(min(n1, n2), max(n1, n2))
            u = int(max(asym.statistic, n1 * n2 - asym.statistic))
            mine = min(1.0, 2 * sum(counts[u:]) / sum(counts))
            assert math.isclose(mine, case["p_exact"], rel_tol=1e-12), (name, mine, case["p_exact"])
    return case


# ---------------------------------------------------------------- Hodges-Lehmann


def hl_rank_exact(n1, n2, level):
    counts = u_counts(min(n1, n2), max(n1, n2))
    total = sum(counts)
    half_alpha = (1 - level) / 2
    k, below = 0, 0
    for j, c in enumerate(counts):
        below += c
        if below / total <= half_alpha:
            k = j + 1
        else:
            break
    return k if k >= 1 else None


def hl_rank_normal(n1, n2, level):
    z = stats.norm.ppf(1 - (1 - level) / 2)
    x = n1 * n2 / 2 - z * math.sqrt(n1 * n2 * (n1 + n2 + 1) / 12)
    k = math.floor(x + 0.5)  # round half away from zero (x > 0 where it matters), as Rust's f64::round
    return k if k >= 1 else None


def hl_case(name, a, b, level):
    n1, n2 = len(a), len(b)
    diffs = np.sort(np.subtract.outer(np.asarray(b), np.asarray(a)).ravel())
    k_exact = hl_rank_exact(n1, n2, level)
    k_normal = hl_rank_normal(n1, n2, level)
    method = "exact" if exact_feasible(n1, n2) else "normal"
    k = k_exact if method == "exact" else k_normal
    m = len(diffs)
    return {
        "name": name,
        "a": a,
        "b": b,
        "level": level,
        "estimate": float(np.median(diffs)),
        "method": method,
        "k": k,
        "k_exact": k_exact,
        "k_normal": k_normal,
        "ci": None if k is None else [float(diffs[k - 1]), float(diffs[m - k])],
        "ci_exact": None if k_exact is None else [float(diffs[k_exact - 1]), float(diffs[m - k_exact])],
    }


# ---------------------------------------------------------------- order statistics


def median_ci_case(name, x, level):
    n = len(x)
    half_alpha = (1 - level) / 2
    k = None
    for cand in range(1, n // 2 + 2):
        if stats.binom.cdf(cand - 1, n, 0.5) <= half_alpha:
            k = cand
        else:
            break
    xs = sorted(x)
    ci = None if k is None else [xs[k - 1], xs[n - k]]
    sq = stats.quantile_test(x, q=float(np.median(x)), p=0.5).confidence_interval(level)
    sq = [float(sq.low), float(sq.high)]
    if ci is None:
        assert any(math.isnan(v) for v in sq), (name, sq)
    else:
        assert sq == ci, (name, sq, ci)
    return {"name": name, "values": x, "level": level, "k": k, "ci": ci}


PERCENTILE_QS = [0, 1, 5, 10, 25, 33.3, 50, 66.7, 75, 90, 95, 99, 99.9, 100]


def percentile_case(name, values):
    return {
        "name": name,
        "values": values,
        "q": PERCENTILE_QS,
        "result": [float(v) for v in np.percentile(np.asarray(values), PERCENTILE_QS)],
    }


# ---------------------------------------------------------------- the rest


def bh_case(name, p):
    return {"name": name, "p": p, "q": [float(v) for v in stats.false_discovery_control(p, method="bh")]}


def power_case(cv, effect, alpha, power):
    z = stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)
    raw = 2 * z * z * (cv / effect) ** 2
    # Stay away from integer boundaries so that ceil() is not decided by rounding noise.
    assert abs(raw - round(raw)) > 1e-6 or raw < 2, (cv, effect, alpha, power, raw)
    return {"cv": cv, "effect": effect, "alpha": alpha, "power": power, "raw": raw, "n": max(2, math.ceil(raw))}


def welch_case(name, a, b):
    r = stats.ttest_ind(a, b, equal_var=False)
    return {"name": name, "a": a, "b": b, "t": float(r.statistic), "df": float(r.df), "p": float(r.pvalue)}


def sample_case(name, x):
    arr = np.asarray(x)
    mean, sd = float(np.mean(arr)), float(np.std(arr, ddof=1))
    cis = {}
    for level in (0.9, 0.95, 0.99):
        lo, hi = stats.t.interval(level, len(x) - 1, loc=mean, scale=sd / math.sqrt(len(x)))
        cis[str(level)] = [float(lo), float(hi)]
    return {
        "name": name,
        "values": x,
        "mean": mean,
        "median": float(np.median(arr)),
        "stdev": sd,
        "cv": sd / abs(mean),
        "mean_ci": cis,
    }


def bootstrap_case(name, a, b, level):
    def ratio(x, y, axis=-1):  # lower-is-better overhead ratio b/a
        return np.mean(y, axis=axis) / np.mean(x, axis=axis)

    r = stats.bootstrap(
        (np.asarray(a), np.asarray(b)),
        ratio,
        vectorized=True,
        paired=False,
        confidence_level=level,
        n_resamples=20000,
        method="percentile",
        rng=np.random.default_rng(7),
    )
    return {
        "name": name,
        "a": a,
        "b": b,
        "level": level,
        "true_ratio": float(np.mean(b) / np.mean(a)),
        "scipy_ci": [float(r.confidence_interval.low), float(r.confidence_interval.high)],
    }


def main():
    # Two-sample inputs shared by Mann-Whitney and Hodges-Lehmann.
    base20 = normal(20, 100.0, 3.0)
    pairs = [
        ("tiny_2x2", [1.5, 2.5], [3.5, 0.5]),
        ("separated_3x3", [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
        ("small_5x6", normal(5, 10.0, 1.0), normal(6, 11.0, 1.0)),
        ("separated_8x8", normal(8, 10.0, 0.1), normal(8, 20.0, 0.1)),
        ("unequal_3x12", normal(3, 50.0, 5.0), normal(12, 53.0, 5.0)),
        ("unequal_2x100", normal(2, 0.0, 1.0, 6), normal(100, 0.5, 1.0, 6)),
        ("shifted_20x20", base20, rounded([v + 2.0 for v in base20])),
        ("noise_20x20", normal(20, 100.0, 3.0), normal(20, 100.0, 3.0)),
        ("edge_exact_28x28", normal(28, 5.0, 1.0, 4), normal(28, 5.4, 1.0, 4)),
        ("edge_asymptotic_29x29", normal(29, 5.0, 1.0, 4), normal(29, 5.4, 1.0, 4)),
        ("large_50x40", normal(50, 200.0, 10.0), normal(40, 205.0, 10.0)),
        ("far_apart_60x60", normal(60, 10.0, 0.5, 6), normal(60, 20.0, 0.5, 6)),
        ("far_apart_ties_60x60", normal(60, 10.0, 0.5, 1), normal(60, 20.0, 0.5, 1)),
        ("ties_small_6x7", [3.0, 4.0, 4.0, 5.0, 6.0, 6.0], [4.0, 5.0, 6.0, 7.0, 7.0, 8.0, 5.0]),
        ("ties_large_40x45", rounded(RNG.integers(0, 12, 40)), rounded(RNG.integers(2, 14, 45))),
        ("identical_constant", [3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]),
        ("identical_spread", [1.0, 2.0, 3.0, 4.0, 5.0], [1.0, 2.0, 3.0, 4.0, 5.0]),
        ("ties_within_only_10x10", rounded(RNG.integers(0, 50, 10) * 2), rounded(RNG.integers(0, 50, 10) * 2 + 1)),
    ]

    # Independent checks of the exact U distribution used for the critical ranks.
    for m, n in [(1, 1), (2, 3), (3, 3), (4, 6), (7, 8), (9, 10)]:
        assert u_counts(m, n) == u_counts_brute(m, n), (m, n)

    mann_whitney = [mw_case(name, a, b) for name, a, b in pairs]
    hodges_lehmann = [hl_case(name, a, b, level) for name, a, b in pairs for level in (0.9, 0.95, 0.99)]

    bh = [
        bh_case("single", [0.03]),
        bh_case("scipy_doc_like", [0.01, 0.04, 0.03, 0.2]),
        bh_case("with_ties", [0.01, 0.01, 0.02, 0.02, 0.5, 0.5, 1.0]),
        bh_case("unsorted_many", rounded(RNG.uniform(0, 1, 40) ** 3, 6)),
        bh_case("all_tiny", [1e-12, 3e-10, 2e-9, 1e-8]),
        bh_case("edges", [0.0, 1.0, 0.5, 0.0]),
        bh_case("aa_null", rounded(RNG.uniform(0, 1, 25), 6)),
    ]

    percentile = [
        percentile_case("two", [1.0, 2.0]),
        percentile_case("odd_unsorted", [5.0, 1.0, 4.0, 2.0, 3.0]),
        percentile_case("ties", [1.0, 1.0, 2.0, 2.0, 2.0, 9.0]),
        percentile_case("single", [42.0]),
        percentile_case("regressions_700", normal(700, 0.5, 3.0)),
        percentile_case("negative_and_large", rounded(RNG.normal(-1e6, 3e5, 33), 1)),
    ]

    median_ci = []
    for name, x in [
        ("n5", normal(5, 10.0, 1.0)),
        ("n6", normal(6, 10.0, 1.0)),
        ("n7", normal(7, 10.0, 1.0)),
        ("n10", normal(10, 10.0, 1.0)),
        ("n20", normal(20, 10.0, 1.0)),
        ("n31_ties", rounded(RNG.integers(0, 8, 31))),
        ("n100", normal(100, 10.0, 1.0)),
        ("n1000", normal(1000, 10.0, 1.0)),
    ]:
        for level in (0.9, 0.95, 0.99):
            median_ci.append(median_ci_case(name, x, level))

    power = [
        power_case(cv, effect, alpha, pw)
        for cv, effect, alpha, pw in [
            (0.05, 0.03, 0.05, 0.9),
            (0.05, 0.03, 0.05, 0.8),
            (0.02, 0.03, 0.05, 0.9),
            (0.01, 0.05, 0.05, 0.9),
            (0.10, 0.02, 0.01, 0.95),
            (0.003, 0.01, 0.05, 0.9),
            (0.2, 0.05, 0.1, 0.5),
        ]
    ]

    welch = [
        welch_case("design_example", [10.0, 12.0, 11.0, 13.0, 14.0], [15.0, 14.0, 16.0, 18.0, 17.5]),
        welch_case("unequal_sizes", normal(7, 10.0, 1.0), normal(30, 10.5, 3.0)),
        welch_case("large", normal(200, 1000.0, 50.0), normal(150, 1010.0, 20.0)),
    ]

    samples = [
        sample_case("five", [10.0, 12.0, 11.0, 13.0, 14.0]),
        sample_case("two", [794.9, 800.0]),
        sample_case("thirty", normal(30, 250.0, 12.0)),
    ]

    bootstrap = [
        bootstrap_case("shifted_10pct", normal(30, 100.0, 2.0), normal(30, 110.0, 2.0), 0.95),
        bootstrap_case("noisy_5pct", normal(15, 50.0, 5.0), normal(12, 52.5, 5.0), 0.9),
    ]

    out = {
        "generator": {
            "script": "crates/isolab-stats/reference/generate.py",
            "python": platform.python_version(),
            "numpy": np.__version__,
            "scipy": scipy.__version__,
        },
        "mann_whitney": mann_whitney,
        "hodges_lehmann": hodges_lehmann,
        "benjamini_hochberg": bh,
        "percentile": percentile,
        "median_ci": median_ci,
        "power": power,
        "welch": welch,
        "sample": samples,
        "bootstrap": bootstrap,
    }
    path = Path(__file__).with_name("vectors.json")
    path.write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    print(f"wrote {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
