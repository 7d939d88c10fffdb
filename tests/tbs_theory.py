"""The paper's formulas for the expected values of the tbs statistical tests,
computed from the batch sizes, the arrival times and the decay parameters
alone -- never from a sampler's state -- and independently of the library's
own numerics (closed forms rather than ``gamma`` or ``tail_sum``).

Notation: batch j has |B_j| items and arrives at t_j; after batch k an item
of batch j has age t_k - t_j and weight f(t_k - t_j); W_k = sum_j |B_j| f(age).
"""
import math

import numpy as np


def exp_decay(lam):
    """f(a) = exp(-lam a)."""
    return lambda age: np.exp(-lam * np.asarray(age, dtype=np.float64))


def poly_decay(power, shift):
    """f(a) = (1 + d)^s / (1 + d + a)^s."""
    return lambda age: ((1.0 + shift) / (1.0 + shift + np.asarray(age, dtype=np.float64))) ** power


def exp_f_inf(lam, delta=1.0):
    """F_inf = sum_{i>=0} exp(-lam i delta) = 1 / (1 - exp(-lam delta))."""
    return 1.0 / (1.0 - math.exp(-lam * delta))


def poly2_f_inf(shift):
    """F_inf = sum_{i>=0} (1+d)^2 / (1+d+i)^2 for power 2, integer shift d and
    delta = 1: (1+d)^2 times the trigamma value psi_1(1+d) = pi^2/6 -
    sum_{j=1}^{d} 1/j^2."""
    d = int(shift)
    assert d == shift >= 0
    return (1.0 + d) ** 2 * (math.pi ** 2 / 6.0 - sum(1.0 / j ** 2 for j in range(1, d + 1)))


def total_weight(sizes, times, f, k=None):
    """W_k = sum_{j<=k} |B_j| f(t_k - t_j) (k: 1-based batch index; default the last)."""
    k = len(sizes) if k is None else k
    sizes = np.asarray(sizes[:k], dtype=np.float64)
    times = np.asarray(times[:k], dtype=np.float64)
    return float(np.dot(sizes, f(times[-1] - times)))


def ages(times):
    """t_k - t_j for every batch j, after the last batch k."""
    times = np.asarray(times, dtype=np.float64)
    return times[-1] - times


def ttbs_q(n, mean_batch_size, f_inf):
    """T-TBS acceptance probability q = n gamma(f) / b = n / (b F_inf) (Algorithm 3)."""
    return n / (mean_batch_size * f_inf)


def rtbs_exp_rho(n, sizes, times, lam):
    """R-TBS with exponential decay (Theorem 4.3): rho_k = min(1, n / W_k);
    Pr[x in S_k] = rho_k f(age) and C_k = rho_k W_k = min(n, W_k)."""
    w = total_weight(sizes, times, exp_decay(lam))
    return min(1.0, n / w), min(n, w)


def rtbs_general_rho(n, n_prime, sizes, times, f):
    """R-TBS, general decay, nothing consolidated (Algorithm 8, equation (13)):
    rho_1 = min(1, n'/W_1), rho_k = min(1, n'/W_k, rho*_k) with
    rho*_k = min over earlier non-empty batches i of rho_{k-1} f(a_{i,k-1}) / f(a_{i,k});
    the output is downsampled to weight n, so Pr[x in S_k] = r_k f(age) with
    r_k = rho_k min(1, n / (rho_k W_k)).  Returns (rho_k, r_k, C_k = rho_k W_k)."""
    rho = None
    for k in range(1, len(sizes) + 1):
        w = total_weight(sizes, times, f, k)
        cap = min(1.0, n_prime / w) if w > 0 else 1.0
        if rho is not None:
            t_prev, t_now = times[k - 2], times[k - 1]
            for i in range(k - 1):
                if sizes[i]:
                    cap = min(cap, rho * float(f(t_prev - times[i])) / float(f(t_now - times[i])))
        rho = cap
    c = rho * total_weight(sizes, times, f)
    return rho, rho * min(1.0, n / c), c


def chao_probabilities(n, weights):
    """Chao's inclusion probabilities (Appendix C): pi_x = min(1, c w_x) with c
    such that sum_x pi_x = n.  The overweight items (pi_x = 1) are found by
    repeatedly taking the heaviest item while (n - |V|) w_x / W > 1, W being the
    weight of the items not yet taken; the others get (n - |V|) w_x / W."""
    w = np.asarray(weights, dtype=np.float64)
    order = np.argsort(-w, kind="stable")
    over = []
    rest = float(w.sum())
    for i in order:
        if (n - len(over)) * w[i] / rest > 1.0:
            over.append(int(i))
            rest -= w[i]
        else:
            break
    pi = (n - len(over)) * w / rest
    pi[over] = 1.0
    return pi, np.array(sorted(over), dtype=np.int64)


def z_star(alpha, m):
    """The two-sided Bonferroni critical value: P[|N(0,1)| > z] = alpha / m."""
    from statistics import NormalDist
    return NormalDist().inv_cdf(1.0 - alpha / (2.0 * m))


def replicates_for_power(cv2, alpha, m, bias=0.05, power=0.8):
    """Replicates R for which a Bonferroni-corrected two-sided z-test (m cells,
    family level alpha) on a cell mean with squared coefficient of variation
    ``cv2`` (variance / mean^2 of one replicate) detects a relative bias
    ``bias`` with probability ``power``: R = (z_{alpha/2m} + z_power)^2 cv2 / bias^2."""
    from statistics import NormalDist
    return (z_star(alpha, m) + NormalDist().inv_cdf(power)) ** 2 * cv2 / bias ** 2
