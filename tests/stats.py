"""Small, exact statistics helpers for the statistical tests (no scipy).

Every statistical test in this suite uses a fixed seed and a stated
significance level ALPHA, Bonferroni-divided when one test makes several
comparisons, so a correct implementation fails with probability < ALPHA and a
given seed gives the same verdict on every run.
"""
import math

import numpy as np

ALPHA = 1e-3


def _gamma_q(a, x):
    """Regularized upper incomplete gamma Q(a, x) (Numerical Recipes 6.2)."""
    if x <= 0:
        return 1.0
    if x < a + 1:  # series for P, then Q = 1 - P
        term = total = 1.0 / a
        ap = a
        for _ in range(10000):
            ap += 1
            term *= x / ap
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-x + a * math.log(x) - math.lgamma(a)))
    b = x + 1 - a  # continued fraction (Lentz)
    c = 1 / 1e-300
    d = 1 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = 1e-300 if abs(d) < 1e-300 else d
        c = b + an / c
        c = 1e-300 if abs(c) < 1e-300 else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def chisq_sf(stat, df):
    """P[Chi2(df) >= stat]."""
    return _gamma_q(df / 2.0, stat / 2.0)


def chisq_gof(observed, expected, ddof=0):
    """Pearson goodness of fit; returns the p-value.  Cells with expected
    count below 5 are pooled into their neighbour first."""
    observed = np.asarray(observed, dtype=float)
    expected = np.asarray(expected, dtype=float)
    obs, exp = [], []
    acc_o = acc_e = 0.0
    for o, e in zip(observed, expected):
        acc_o += o
        acc_e += e
        if acc_e >= 5:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    if acc_e > 0:
        if exp:
            obs[-1] += acc_o
            exp[-1] += acc_e
        else:
            obs.append(acc_o)
            exp.append(acc_e)
    obs, exp = np.array(obs), np.array(exp)
    stat = float(((obs - exp) ** 2 / exp).sum())
    return chisq_sf(stat, max(len(obs) - 1 - ddof, 1))


def normal_two_sided(z):
    """P[|N(0,1)| >= |z|]."""
    return math.erfc(abs(z) / math.sqrt(2))


def binomial_p(successes, trials, p):
    """Two-sided normal-approximation p-value of a binomial count."""
    sd = math.sqrt(trials * p * (1 - p))
    return normal_two_sided((successes - trials * p) / sd) if sd > 0 else float(
        successes == trials * p)


def spearman(x, y):
    """Spearman rank correlation."""
    rx = np.argsort(np.argsort(x)).astype(float)
    ry = np.argsort(np.argsort(y)).astype(float)
    return float(np.corrcoef(rx, ry)[0, 1])


def successive_law(weights, k):
    """``{ordered k-tuple of indices: probability}`` of k successive weighted
    draws without replacement from *weights* (each next index in proportion
    to its weight among those not drawn yet), by enumeration."""
    import itertools

    w = np.asarray(weights, dtype=float)
    law = {}
    for order in itertools.permutations(np.flatnonzero(w > 0).tolist(), k):
        p, left = 1.0, w.sum()
        for i in order:
            p *= w[i] / left
            left -= w[i]
        law[order] = p
    return law
