"""Small statistical helpers for the tbs tests (no scipy dependency), and the
``feed`` helper that runs a batch schedule.

Each statistical test in the tbs suite uses a fixed seed and a stated
family-wise significance level; with Bonferroni correction a family of m
comparisons at level ALPHA rejects a single comparison when p < ALPHA / m.
"""
from __future__ import annotations

import math

import numpy as np

ALPHA = 1e-3   # family-wise significance level used throughout the tbs tests


def normal_sf(z: float) -> float:
    """P(Z > z) for a standard normal Z."""
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def two_sided_p(z: float) -> float:
    return 2.0 * normal_sf(abs(z))


def _gammainc_upper_reg(a: float, x: float) -> float:
    """Regularized upper incomplete gamma Q(a, x) (series / continued fraction)."""
    if x <= 0.0:
        return 1.0
    lg = math.lgamma(a)
    if x < a + 1.0:
        term = total = 1.0 / a
        ap = a
        for _ in range(100000):
            ap += 1.0
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-x + a * math.log(x) - lg))
    b = x + 1.0 - a
    c = 1.0 / 1e-300
    d = 1.0 / b
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - lg) * h


def chi2_sf(stat: float, dof: int) -> float:
    """P(X > stat) for X ~ chi-square(dof)."""
    return _gammainc_upper_reg(dof / 2.0, stat / 2.0)


def chi2_gof(observed, expected) -> tuple[float, float]:
    """Pearson goodness-of-fit statistic and p-value (dof = cells - 1)."""
    observed = np.asarray(observed, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    stat = float(np.sum((observed - expected) ** 2 / expected))
    return stat, chi2_sf(stat, observed.size - 1)


def mean_z(values, expected: float) -> float:
    """z statistic of the mean of i.i.d. replicate values against ``expected``
    (standard error from the sample variance)."""
    values = np.asarray(values, dtype=np.float64)
    sd = values.std(ddof=1)
    if sd == 0.0:
        return 0.0 if abs(values.mean() - expected) < 1e-12 else math.inf
    return float((values.mean() - expected) / (sd / math.sqrt(values.size)))


def assert_means(replicates, expected, alpha=ALPHA, what="value"):
    """Bonferroni-corrected z-tests that each column of ``replicates`` (rows are
    i.i.d. replicates) has mean ``expected[j]``."""
    replicates = np.asarray(replicates, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    m = expected.size
    worst = None
    for j in range(m):
        z = mean_z(replicates[:, j], expected[j])
        p = two_sided_p(z)
        if worst is None or p < worst[0]:
            worst = (p, j, z)
    p, j, z = worst
    assert p >= alpha / m, (f"{what} {j}: mean {replicates[:, j].mean():.6g} vs expected "
                            f"{expected[j]:.6g} (z = {z:.2f}, p = {p:.2e} < {alpha}/{m})")


def feed(sampler, sizes, times=None):
    """Run a schedule of batch sizes (consecutive int64 ids) at the given times
    (default 1, 2, ...), yielding the number of items seen after each batch."""
    times = np.arange(1, len(sizes) + 1, dtype=np.float64) if times is None else times
    nxt = 0
    for b, t in zip(sizes, times):
        sampler.update(np.arange(nxt, nxt + b, dtype=np.int64), time=float(t))
        nxt += int(b)
        yield nxt
