"""Baselines: batched reservoir (Algorithm 2), sliding window, B-Chao (Appendix C).

Statistical checks: fixed seeds, Bonferroni-corrected z-tests or chi-square
goodness of fit at family level ALPHA = 1e-3.
"""
import itertools
import math

import numpy as np
import pytest

from samplegen.tbs import (
    RTBS,
    BatchedReservoir,
    BChao,
    Exponential,
    Polynomial,
    SlidingWindow,
    TBSError,
)
from tests.tbs_stats import ALPHA, assert_means, chi2_gof, feed, mean_z
from tests.tbs_theory import ages, chao_probabilities, exp_decay, rtbs_exp_rho

# ----------------------------------------------------------------------------- batched reservoir

@pytest.mark.slow
def test_batched_reservoir_subsets_are_uniform():
    # n = 3 and batches of 2, 3, 1 items: the second batch is the corner case
    # W_{k-1} < n <= W_{k-1} + |B_k|.  All C(6, 3) = 20 final subsets must be
    # equally likely (chi-square, 19 dof, level ALPHA).
    index = {c: i for i, c in enumerate(itertools.combinations(range(6), 3))}
    counts = np.zeros(len(index))
    reps = 10000
    for r in range(reps):
        s = BatchedReservoir(3, seed=r)
        for _ in feed(s, [2, 3, 1]):
            pass
        counts[index[tuple(sorted(s.sample().tolist()))]] += 1
    stat, p = chi2_gof(counts, np.full(len(index), reps / len(index)))
    assert p > ALPHA, f"chi2 = {stat:.1f}, p = {p:.2e}"


def test_batched_reservoir_inclusion_and_size():
    sizes = [5, 12, 0, 7, 20]
    reps = 3000
    hits = np.zeros((reps, sum(sizes)))
    for r in range(reps):
        s = BatchedReservoir(10, seed=r)
        for _k, seen in enumerate(feed(s, sizes)):
            assert s.sample().size == min(seen, 10) == s.sample_weight
        hits[r, s.sample()] = 1
    assert s.total_weight == sum(sizes)
    assert_means(hits, np.full(sum(sizes), 10 / sum(sizes)), what="item")


@pytest.mark.slow
def test_batched_reservoir_beyond_numpy_hypergeometric_limit():
    # After 2e9 items numpy's hypergeometric refuses; the exact fallback is used.
    # Expected number of new items accepted: n |B| / (W + |B|) = 1e5 * 1e6 / 2.001e9.
    base = BatchedReservoir(100_000, seed=1)
    base.update(np.arange(200_000, dtype=np.int64))
    arrays, meta = base.to_state()
    meta["seen"] = 2_000_000_000
    accepted = np.zeros((60, 1))
    batch = np.arange(10**9, 10**9 + 1_000_000, dtype=np.int64)
    for r in range(60):
        s = BatchedReservoir.from_state(arrays, dict(meta, entropy=r))
        s.update(batch)
        out = s.sample()
        assert out.size == 100_000 and np.unique(out).size == 100_000
        accepted[r, 0] = np.count_nonzero(out >= 10**9)
    assert_means(accepted, [1e5 * 1e6 / 2.001e9], what="accepted new items")


# ----------------------------------------------------------------------------- sliding window

def test_sliding_window_keeps_the_last_n_items():
    rng = np.random.default_rng(3)
    s = SlidingWindow(25)
    stream = []
    for _ in range(300):
        b = int(rng.choice([0, 1, 7, 24, 25, 26, 60]))
        batch = np.arange(len(stream), len(stream) + b)
        stream.extend(batch.tolist())
        s.update(batch)
        assert s.sample().tolist() == stream[-25:]
        assert s.total_weight == len(stream) and s.sample_weight == min(25, len(stream))
    with pytest.raises(TBSError, match="n must be an integer >= 1, got -3"):
        SlidingWindow(-3)


# ----------------------------------------------------------------------------- B-Chao
#
# Every expected value below is computed from the batch sizes, times and decay
# rate alone (tests/tbs_theory.py and _bchao_without_overweight), never from the
# sampler's state.


def _weights(lam, sizes, times):
    """Each item's weight f(t_k - t_i) after the last batch."""
    return np.repeat(exp_decay(lam)(ages(times)), sizes)


def _bchao_without_overweight(n, lam, sizes, times):
    """Exact Pr[x in S_k] for B-Chao (Algorithm 9) on a schedule in which no
    item is ever overweight after the fill-up (checked here).  The first n
    items are accepted with probability 1.  Afterwards the j-th arriving item,
    with W_j the weight of all items seen including itself, is accepted with
    probability n / W_j and then evicts a uniformly chosen one of the n sample
    items (A is empty), so every item in the sample survives that arrival with
    probability 1 - 1 / W_j.  Hence Pr[x in S_k] = a_x prod_{j after x} (1 - 1/W_j)
    with a_x = 1 for fill-up items and n / W_x otherwise.  For items arriving
    after the fill-up the product telescopes to n w_x / W_k (Chao's
    probabilities); for the fill-up items it does not."""
    probs, w, prev = [], 0.0, None
    for b, t in zip(sizes, times):
        if prev is not None:
            w *= math.exp(-lam * (t - prev))
        prev = t
        for _ in range(b):
            w += 1.0
            if len(probs) < n:
                probs.append(1.0)
                continue
            assert n / w <= 1.0, "the schedule makes an item overweight"
            probs = [p * (1.0 - 1.0 / w) for p in probs]
            probs.append(n / w)
    return np.array(probs)


@pytest.mark.slow
def test_bchao_fill_up_violates_time_bias():
    # n = 5, lambda = 0.1: the fill-up takes two batches three time units
    # apart (2 + 3 items), three more batches follow.  B-Chao accepts the
    # first n items with probability 1 whatever their ages, so after the last
    # batch the items of batches 1 and 2 are equally likely to be in S_k
    # (exact probabilities from _bchao_without_overweight; z-tests per item
    # and per batch, Bonferroni over the 17 items and over the 5 batches, 4000
    # replicates), whereas (1) demands a
    # ratio f(6) / f(3) = e^{-0.3} = 0.74.  The replicate statistic
    # D = mean(batch-1 hits) - e^{-0.3} mean(batch-2 hits) has expectation
    # 0.26 * 0.234 = 0.061 under B-Chao and 0 under (1); its z is about 11,
    # and the test asks for more than 3.29 (one-sided level ALPHA/2).
    lam, n = 0.1, 5
    sizes, times = [2, 3, 4, 4, 4], [1.0, 4.0, 5.0, 6.0, 7.0]
    expected = _bchao_without_overweight(n, lam, sizes, times)
    reps = 4000
    hits = np.zeros((reps, sum(sizes)))
    for r in range(reps):
        s = BChao(n, Exponential(lam), seed=r)
        for _ in feed(s, sizes, times):
            pass
        hits[r, s.sample()] = 1
    assert_means(hits, expected, what="item")
    # the same per batch (items of a batch are equally likely): 4 times the
    # items of the last batch per cell, so a 5% bias in a batch is ~5 sd
    first = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    per_batch = np.add.reduceat(hits, first, axis=1) / sizes
    assert_means(per_batch, expected[first], what="batch")
    ratio = math.exp(-lam * (times[1] - times[0]))
    d = hits[:, :2].mean(axis=1) - ratio * hits[:, 2:5].mean(axis=1)
    z = mean_z(d, 0.0)
    assert z > 3.29, f"B-Chao fill-up items follow (1): D = {d.mean():.4f} (z = {z:.2f})"


def test_rtbs_respects_time_bias_where_bchao_does_not():
    # The same kind of stream for R-TBS (n = 100, lambda = 0.5, three batches
    # of 30): W_3 = 30 (e^{-1} + e^{-0.5} + 1) < n, so rho_3 = 1 and
    # Pr[x in S_3] = f(age) exactly (Theorem 4.3); z-tests on the fraction of
    # each batch kept over 2000 replicates.
    lam, n, sizes, times = 0.5, 100, [30, 30, 30], [1.0, 2.0, 3.0]
    rho, _ = rtbs_exp_rho(n, sizes, times, lam)
    assert rho == 1.0
    reps = 2000
    hits = np.zeros((reps, 3))
    for r in range(reps):
        s = RTBS(n, Exponential(lam), seed=r)
        for _ in feed(s, sizes, times):
            pass
        hits[r] = np.bincount(s.sample() // 30, minlength=3) / 30     # fraction of each batch
    assert_means(hits, rho * exp_decay(lam)(ages(times)), what="R-TBS batch")


@pytest.mark.slow
def test_bchao_inclusion_proportional_to_weight_without_overweight_items():
    # The first batch fills the reservoir (equal weights), later batches never
    # create overweight items: Chao's scheme gives Pr[x in S_k] = n w_x / W_k,
    # which is also what _bchao_without_overweight gives here.
    lam, n = 0.1, 5
    sizes, times = [5, 4, 4, 4, 4], [1.0, 2.0, 3.0, 4.0, 5.0]
    w = _weights(lam, sizes, times)
    expected, over = chao_probabilities(n, w)
    assert over.size == 0
    np.testing.assert_allclose(expected, n * w / w.sum(), rtol=1e-12)
    np.testing.assert_allclose(_bchao_without_overweight(n, lam, sizes, times), expected,
                               rtol=1e-12)
    reps = 4000
    hits = np.zeros((reps, sum(sizes)))
    for r in range(reps):
        s = BChao(n, Exponential(lam), seed=r)
        for _ in feed(s, sizes, times):
            assert s.overweight_count == 0
        assert s.sample().size == n
        hits[r, s.sample()] = 1
    assert s.total_weight == pytest.approx(w.sum(), rel=1e-12)
    assert_means(hits, expected, what="item")


@pytest.mark.slow
def test_bchao_overweight_items():
    # Fast decay and a trickle of items: the items of the last two batches are
    # overweight after batch 6 (Chao's normalisation of the weights,
    # tests/tbs_theory.chao_probabilities) and must be in every sample; the
    # others follow (n - |V|) w_x / W.  Relative inclusion then no longer
    # follows the weights: (1) is violated, which the observed frequencies show.
    lam, n = 1.5, 4
    sizes, times = [4, 1, 1, 2, 1, 1], [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    w = _weights(lam, sizes, times)
    expected, over = chao_probabilities(n, w)
    assert over.tolist() == [8, 9]
    reps = 4000
    hits = np.zeros((reps, sum(sizes)))
    for r in range(reps):
        s = BChao(n, Exponential(lam), seed=r)
        for _ in feed(s, sizes, times):
            assert s.sample().size == n
        assert s.overweight_count == over.size
        hits[r, s.sample()] = 1
    assert np.all(hits[:, over] == 1.0)
    normal = np.setdiff1d(np.arange(sum(sizes)), over)
    assert_means(hits[:, normal], expected[normal], what="non-overweight item")
    # (1) would require Pr[newest] / Pr[oldest] = w_newest / w_oldest (~1800 here);
    # Chao's probabilities give 1 / 0.0101 = 99, and the observed ratio must be
    # below a tenth of what (1) demands.
    newest, oldest = sum(sizes) - 1, 0
    observed = hits[:, newest].mean() / hits[:, oldest].mean()
    assert observed < 0.1 * (w[newest] / w[oldest]), observed


@pytest.mark.slow
def test_bchao_items_leaving_the_overweight_set():
    # n = 2, lambda = 0.7: single items arriving after the reservoir filled are
    # overweight (the arriving item is overweight after batches 2, 3 and 4 by
    # Chao's normalisation of the weights at those times); in the last batch an
    # item is not, so the overweight items move to A and are ejected with
    # probability (1 - (n - |V|) w_z / W) / pi_x when it is accepted.  Chao's
    # probabilities must hold afterwards (6000 replicates; dropping the
    # "/ pi_x" changes some of them by ~12 sd).
    lam, n = 0.7, 2
    sizes, times = [2, 1, 1, 1, 2], [1.0, 2.0, 3.0, 4.0, 5.0]
    over_after = [chao_probabilities(n, _weights(lam, sizes[:k], times[:k]))[1].size
                  for k in range(1, len(sizes) + 1)]
    assert over_after == [0, 1, 1, 1, 0]
    expected, over = chao_probabilities(n, _weights(lam, sizes, times))
    reps = 6000
    hits = np.zeros((reps, sum(sizes)))
    for r in range(reps):
        s = BChao(n, Exponential(lam), seed=r)
        for k, _ in enumerate(feed(s, sizes, times)):
            assert s.overweight_count == over_after[k]
        hits[r, s.sample()] = 1
    assert_means(hits, expected, what="item")


def test_bchao_requires_exponential_decay():
    with pytest.raises(TBSError, match="decay must be Exponential for B-Chao"):
        BChao(10, Polynomial(2))
