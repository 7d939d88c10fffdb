"""Experiments of the paper's section 6, reproduced with the tbs samplers.

* :func:`batch_sizes` / :func:`simulate` -- sample-size behaviour of T-TBS and
  R-TBS under growing, constant, uniformly fluctuating, shrinking and periodic
  batch sizes (section 6.2, figures 3, 6 and 7);
* :func:`stream_experiment` with :func:`knn_scores` -- kNN classification on a
  Gaussian-mixture stream with normal/abnormal modes (section 6.4, Table 1);
* :func:`stream_experiment` with :func:`ridge_scores` -- linear regression on
  a two-mode stream (section 6.5).

The functions return plain numpy arrays / dicts; :mod:`tbs.cli` writes the
CSV, Markdown and PNG files.
"""
import math

import numpy as np

from .decay import Exponential, Polynomial
from .errors import TBSError, check_int, check_real
from .reservoir import BatchedReservoir
from .rtbs import RTBS
from .ttbs import TTBS
from .window import SlidingWindow

REGIMES = ("constant", "growing", "shrinking", "uniform", "periodic")


# ----------------------------------------------------------------------------- sample sizes

def batch_sizes(regime, batches, batch_size=100, *, phi=None,
                change_at=200, high=None, period=2000,
                seed=0):
    """Batch sizes B_1..B_batches for one of the section-6.2 regimes.

    constant  -- B_k = batch_size
    growing   -- batch_size until ``change_at``, then B_{k+1} = phi B_k (phi default 1.002)
    shrinking -- the same with phi default 0.8
    uniform   -- i.i.d. uniform on {0, ..., 2 batch_size}
    periodic  -- per period: batch_size for the first 2/3, ``high`` for the last 1/3 (figure 3)
    """
    batches = check_int("batches", batches, 1)
    b = check_real("batch_size", batch_size, low=0.0)
    if regime not in REGIMES:
        raise TBSError(f"regime must be one of {', '.join(REGIMES)}, got {regime!r}")
    k = np.arange(1, batches + 1)
    if regime == "constant":
        sizes = np.full(batches, b)
    elif regime in ("growing", "shrinking"):
        if phi is None:
            phi = 1.002 if regime == "growing" else 0.8
        phi = check_real("phi", phi, low=0.0, low_open=True)
        change_at = check_int("change_at", change_at, 0)
        sizes = b * phi ** np.maximum(k - change_at, 0)
    elif regime == "uniform":
        sizes = np.random.default_rng(seed).integers(0, int(round(2 * b)) + 1, batches)
    else:
        period = check_int("period", period, 3)
        hi = check_real("high", 3 * b if high is None else high, low=0.0)
        phase = (k - 1) % period
        sizes = np.where(phase < (2 * period) // 3, b, hi)
    return np.rint(sizes).astype(np.int64)


def make_decay(kind, lam=0.1, power=2.0, shift=10.0):
    if kind == "exp":
        return Exponential(lam)
    if kind == "poly":
        return Polynomial(power, shift=shift)
    raise TBSError(f"decay must be 'exp' or 'poly', got {kind!r}")


def simulate(algorithms, decay, n, sizes, *, mean_batch_size, seed=0,
             rtbs_options=None, realize=True):
    """Run each algorithm on the batch-size sequence; per-batch traces.

    Returns {algorithm: {"sample_size", "sample_weight", "total_weight", "rho"}}
    (arrays of length len(sizes); ``rho`` is NaN for T-TBS).  T-TBS is tuned
    to ``mean_batch_size`` (in figure 6: the initial batch size).
    """
    b = float(mean_batch_size)
    samplers = {}
    for name in algorithms:                  # build all first: invalid parameters fail early
        if name == "ttbs":
            samplers[name] = TTBS(n, decay, b, seed=seed)
        elif name == "rtbs":
            samplers[name] = RTBS(n, decay, seed=seed, **(rtbs_options or {}))
        else:
            raise TBSError(f"algorithm must be 'ttbs' or 'rtbs', got {name!r}")
    out = {}
    for name, s in samplers.items():
        trace = {key: np.empty(sizes.size)
                 for key in ("sample_size", "sample_weight", "total_weight", "rho")}
        nxt = 0
        for k, size in enumerate(sizes):
            s.update(np.arange(nxt, nxt + size, dtype=np.int64), time=float(k + 1))
            nxt += int(size)
            weight = s.sample_weight
            trace["sample_weight"][k] = weight
            trace["sample_size"][k] = s.sample().size if realize else weight
            trace["total_weight"][k] = s.total_weight
            trace["rho"][k] = getattr(s, "rho", math.nan)
        out[name] = trace
    return out


# ----------------------------------------------------------------------------- streams with modes

def mode_pattern(pattern, length):
    """Abnormal-mode flags for test batches t = 1..length.

    ``single``   -- abnormal for 10 < t <= 20 only (a single event);
    ``P(d,e)``   -- periodic: d normal batches, then e abnormal ones, repeated.
    """
    t = np.arange(1, length + 1)
    if pattern == "single":
        return (t > 10) & (t <= 20)
    if pattern.startswith("P(") and pattern.endswith(")"):
        try:
            normal, abnormal = (int(x) for x in pattern[2:-1].split(","))
        except ValueError:
            normal = abnormal = 0
        if normal > 0 and abnormal > 0:
            return ((t - 1) % (normal + abnormal)) >= normal
    raise TBSError(f"pattern must be 'single' or 'P(d,e)' with positive integers, got {pattern!r}")


def expected_shortfall(losses, level=0.1):
    """Mean of the worst ``level`` fraction (at least one) of the losses."""
    losses = np.sort(np.asarray(losses, dtype=np.float64))[::-1]
    m = max(1, int(math.ceil(level * losses.size - 1e-9)))
    return float(losses[:m].mean())


def gaussian_mixture_stream(rng, batches, batch, abnormal, classes=100,
                            box=80.0, ratio=5.0):
    """Points and labels for a kNN stream (section 6.4).  ``abnormal`` flags each
    batch; in normal mode the first half of the classes is ``ratio`` times more
    frequent than the second half, in abnormal mode the reverse."""
    centroids = rng.uniform(0.0, box, size=(classes, 2))
    half = classes // 2
    w_normal = np.where(np.arange(classes) < half, ratio, 1.0)
    w_abnormal = w_normal[::-1].copy()
    p = np.where(abnormal[:, None], w_abnormal / w_abnormal.sum(), w_normal / w_normal.sum())
    labels = np.concatenate([rng.choice(classes, size=batch, p=p[i]) for i in range(batches)])
    points = centroids[labels] + rng.standard_normal((labels.size, 2))
    return points, labels


def knn_scores(points, labels, ks):
    """Misclassification % of a kNN classifier trained on the sample, for each k."""
    classes = int(labels.max()) + 1
    ks = np.asarray(ks)
    kmax = int(ks.max())

    def evaluate(sample_ids, batch_ids):
        if sample_ids.size == 0:
            return np.full(ks.size, 100.0)
        train, train_y = points[sample_ids], labels[sample_ids]
        query = points[batch_ids]
        d2 = (np.sum(query ** 2, axis=1)[:, None] - 2.0 * query @ train.T
              + np.sum(train ** 2, axis=1)[None, :])
        kk = min(kmax, sample_ids.size)
        near = np.argpartition(d2, kk - 1, axis=1)[:, :kk]
        order = np.argsort(np.take_along_axis(d2, near, axis=1), axis=1)
        near_y = train_y[np.take_along_axis(near, order, axis=1)]      # nearest first
        out = np.empty(ks.size)
        rows = np.arange(batch_ids.size)
        for j, k in enumerate(ks):
            k = min(int(k), kk)
            votes = np.zeros((batch_ids.size, classes))
            # one vote per neighbour; closer neighbours break ties
            np.add.at(votes, (np.repeat(rows, k), near_y[:, :k].ravel()),
                      np.tile(1.0 - 1e-6 * np.arange(k), batch_ids.size))
            out[j] = 100.0 * np.mean(np.argmax(votes, axis=1) != labels[batch_ids])
        return out

    return evaluate


def linear_stream(rng, batches, batch, abnormal, scale=1.0):
    """(x, y) for the regression stream of section 6.5: y = b . x + N(0, 1) with
    b = (4.2, -0.4) in normal and (-3.6, 3.8) in abnormal mode, x ~ U(0, 1)^2."""
    b = np.where(abnormal[:, None], [-3.6, 3.8], [4.2, -0.4]) * scale
    x = rng.uniform(0.0, 1.0, size=(batches * batch, 2))
    y = np.einsum("ij,ij->i", x, np.repeat(b, batch, axis=0)) + rng.standard_normal(batches * batch)
    return x, y


def ridge_scores(x, y, penalties):
    """Mean squared prediction error of ridge regression (no intercept), per penalty."""
    penalties = np.asarray(penalties, dtype=np.float64)

    def evaluate(sample_ids, batch_ids):
        xs, ys = x[sample_ids], y[sample_ids]
        xq, yq = x[batch_ids], y[batch_ids]
        gram = xs.T @ xs
        rhs = xs.T @ ys
        out = np.empty(penalties.size)
        for j, a in enumerate(penalties):
            coef = np.linalg.lstsq(gram + a * np.eye(gram.shape[0]), rhs, rcond=None)[0]
            out[j] = float(np.mean((xq @ coef - yq) ** 2))
        return out

    return evaluate


def default_schemes(n=1000):
    """The sampling schemes of Table 1 (section 6.4): name -> factory(seed)."""
    schemes = {}
    for lam in (0.05, 0.07, 0.10):
        schemes[f"R-TBS exp: lambda = {lam:.2f}"] = (
            lambda seed, lam=lam: RTBS(n, Exponential(lam), seed=seed))
    for s in (1.8, 2.0, 2.2):
        schemes[f"R-TBS poly: s = {s:.1f}"] = (
            lambda seed, s=s: RTBS(n, Polynomial(s, shift=10), seed=seed, max_weight=2 * n,
                                   consolidation_rate=0.1, delta1=0.01, delta2=1.0))
    schemes["SW"] = lambda seed: SlidingWindow(n)
    schemes["Unif"] = lambda seed: BatchedReservoir(n, seed=seed)
    return schemes


def stream_experiment(schemes, make_data, evaluate_factory, hyper, *, runs, warmup,
                      test_batches, batch, abnormal, seed):
    """Run every scheme on ``runs`` independently generated streams.

    For each run, ``make_data(rng, total_batches, batch, flags)`` builds the
    data (shared by all schemes), the samplers are warmed up on ``warmup``
    normal batches, and then for each test batch the model is trained on the
    current sample and scored on the batch (``evaluate_factory(*data)`` returns
    ``evaluate(sample_ids, batch_ids) -> scores per hyper-parameter``) before
    the batch updates the sample.  Returns {scheme: array (runs, test_batches,
    len(hyper))}.
    """
    flags = np.concatenate([np.zeros(warmup, dtype=bool), abnormal])
    total = warmup + test_batches
    out = {name: np.empty((runs, test_batches, len(hyper))) for name in schemes}
    for r in range(runs):
        rng = np.random.default_rng([seed, r])
        data = make_data(rng, total, batch, flags)
        evaluate = evaluate_factory(*data)
        for si, (name, factory) in enumerate(schemes.items()):
            s = factory(int(np.random.SeedSequence([seed, r, si]).generate_state(1)[0]))
            for k in range(total):
                ids = np.arange(k * batch, (k + 1) * batch, dtype=np.int64)
                if k >= warmup:
                    out[name][r, k - warmup] = evaluate(s.sample(), ids)
                s.update(ids, time=float(k + 1))
    return out


def summarize(scores, hyper, tuned, es_from=20, level=0.1):
    """Per scheme: (hyper-parameter, mean loss, mean expected shortfall over the
    test batches t >= ``es_from``) using the tuned hyper-parameter index."""
    result = {}
    for name, arr in scores.items():
        j = tuned[name]
        per_run = arr[:, :, j]
        es = [expected_shortfall(run[es_from - 1:], level) for run in per_run]
        result[name] = (hyper[j], float(per_run.mean()), float(np.mean(es)))
    return result


def tune(scores):
    """Index of the hyper-parameter with the smallest mean loss, per scheme."""
    return {name: int(np.argmin(arr.mean(axis=(0, 1)))) for name, arr in scores.items()}
