#!/usr/bin/env python3
"""Reference vectors for isolab-stats' paired comparisons, computed with SciPy/NumPy.

Usage (needs `pip install scipy numpy`):

    python3 crates/isolab-stats/reference/paired.py

writes `paired.json` next to this script (committed; `tests/reference.rs` reads it).

What comes from where:
- signed_rank: scipy.stats.wilcoxon(d, zero_method='wilcox', correction=True,
  alternative='two-sided', method='exact' or 'approx'), statistic min(T+, T-).
- paired_hodges_lehmann: estimate = numpy.median of the Walsh averages (d_i + d_j)/2,
  i <= j; the critical rank k from the exact null distribution of T+ computed here by
  brute-force enumeration of sign vectors (n <= 16) or the subset-sum recurrence, and
  cross-checked against scipy's exact wilcoxon p-values; the interval is
  [W_(k), W_(M-k+1)] of the sorted Walsh averages.
"""

import itertools
import json
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
import scipy
from scipy import stats

RNG = np.random.default_rng(20261124)


def rounded(x, digits=3):
    return [round(float(v), digits) for v in x]


def t_counts(n):
    counts = [1]
    for i in range(1, n + 1):
        nxt = [0] * (len(counts) + i)
        for k, c in enumerate(counts):
            nxt[k] += c
            nxt[k + i] += c
        counts = nxt
    return counts


def t_counts_brute(n):
    counts = [0] * (n * (n + 1) // 2 + 1)
    for signs in itertools.product([0, 1], repeat=n):
        counts[sum((i + 1) for i, s in enumerate(signs) if s)] += 1
    return counts


def rank_exact(n, level):
    counts = t_counts(n)
    total = 2 ** n
    half = (1 - level) / 2
    below, k = 0, 0
    for j, c in enumerate(counts):
        below += c
        if below / total <= half:
            k = j + 1
        else:
            break
    return k if k >= 1 else None


def has_ties_or_zeros(d):
    a = [abs(v) for v in d if v != 0]
    return len(set(a)) != len(a) or any(v == 0 for v in d)


def signed_rank_case(name, d):
    exact_expected = not has_ties_or_zeros(d) and len([v for v in d if v != 0]) <= 50
    approx = stats.wilcoxon(d, zero_method='wilcox', correction=True,
                            alternative='two-sided', method='approx')
    case = {"name": name, "d": d, "exact_expected": exact_expected,
            "statistic": float(approx.statistic), "p_approx": float(approx.pvalue)}
    if exact_expected:
        ex = stats.wilcoxon(d, zero_method='wilcox', alternative='two-sided', method='exact')
        case["p_exact"] = float(ex.pvalue)
        # Cross-check the recurrence against SciPy's exact p.
        n = len(d)
        counts = t_counts(n)
        t = int(round(ex.statistic))
        p = min(1.0, 2 * sum(counts[: t + 1]) / 2 ** n)
        assert math.isclose(p, ex.pvalue, rel_tol=1e-12), (name, p, ex.pvalue)
    return case


def hl_case(name, d, level):
    n = len(d)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(n) for j in range(i, n))
    m = len(walsh)
    k = rank_exact(n, level) if n <= 50 else None
    if n > 50:
        sd = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        kk = round(m / 2 - stats.norm.ppf(1 - (1 - level) / 2) * sd)
        k = kk if kk >= 1 else None
    ci = [walsh[k - 1], walsh[m - k]] if k else None
    return {"name": name, "d": d, "level": level, "estimate": float(np.median(walsh)),
            "k": k, "ci": ci}


def main():
    for n in range(1, 13):
        assert t_counts(n) == t_counts_brute(n)
    sr, hl = [], []
    for n in [6, 7, 10, 15, 20, 30, 50, 60, 80]:
        for shift in [0.0, 0.5, 2.0]:
            d = rounded(RNG.normal(shift, 2.0, n), 4)
            sr.append(signed_rank_case(f"normal n={n} shift={shift}", d))
            for level in [0.9, 0.95]:
                hl.append(hl_case(f"normal n={n} shift={shift}", d, level))
    # Ties and zeros (normal approximation with tie correction).
    for n in [8, 20, 40]:
        d = [float(v) for v in RNG.integers(-3, 6, n)]
        sr.append(signed_rank_case(f"integers n={n}", d))
        hl.append(hl_case(f"integers n={n}", d, 0.95))
    # Skewed differences.
    d = rounded(RNG.lognormal(0.0, 1.0, 25) - 1.0, 4)
    sr.append(signed_rank_case("lognormal n=25", d))
    hl.append(hl_case("lognormal n=25", d, 0.9))
    out = {"scipy": scipy.__version__, "numpy": np.__version__,
           "signed_rank": sr, "paired_hodges_lehmann": hl}
    path = Path(__file__).with_name("paired.json")
    path.write_text(json.dumps(out, indent=1, allow_nan=False) + "\n")
    print(f"wrote {path}: {len(sr)} signed-rank and {len(hl)} Hodges-Lehmann cases")


if __name__ == "__main__":
    main()
