"""Small statistical helpers for the tbs tests (no scipy dependency), and the
``feed`` helper that runs a batch schedule.

Each statistical test in the tbs suite uses a fixed seed and a stated
family-wise significance level; with Bonferroni correction a family of m
comparisons at level ALPHA rejects a single comparison when p < ALPHA / m.
"""
import math

import numpy as np

# the level and the distribution tails have one home: tests/stats.py
from tests.stats import ALPHA  # noqa: F401  (re-exported)
from tests.stats import chisq_sf as chi2_sf
from tests.stats import normal_two_sided as two_sided_p


def chi2_gof(observed, expected):
    """Pearson goodness-of-fit statistic and p-value (dof = cells - 1)."""
    observed = np.asarray(observed, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    stat = float(np.sum((observed - expected) ** 2 / expected))
    return stat, chi2_sf(stat, observed.size - 1)


def mean_z(values, expected):
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
