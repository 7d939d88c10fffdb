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
from tests.tbs_stats import ALPHA, assert_means, chi2_gof, feed

# ----------------------------------------------------------------------------- batched reservoir

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

def test_bchao_violates_time_bias_during_fill_up():
    # n = 100, lambda = 0.5, three batches of 30 items: B-Chao keeps every item
    # with probability 1, so Pr[x in S] / Pr[y in S] = 1 for x in B_1, y in B_3,
    # whereas (1) demands f(2) / f(0) = e^{-1}.  R-TBS on the same stream has
    # Pr[x in S_3] = f(age) exactly (checked by z-tests over 2000 replicates).
    decay = Exponential(0.5)
    for seed in range(20):
        s = BChao(100, decay, seed=seed)
        for _ in feed(s, [30, 30, 30]):
            pass
        assert sorted(s.sample().tolist()) == list(range(90))
    reps = 2000
    hits = np.zeros((reps, 3))
    for r in range(reps):
        s = RTBS(100, decay, seed=r)
        for _ in feed(s, [30, 30, 30]):
            pass
        sample = s.sample()
        hits[r] = np.bincount(sample // 30, minlength=3) / 30     # fraction of each batch kept
    assert_means(hits, [math.exp(-1.0), math.exp(-0.5), 1.0], what="R-TBS batch")


@pytest.mark.slow
def test_bchao_inclusion_proportional_to_weight_without_overweight_items():
    # The first batch fills the reservoir (equal weights), later batches never
    # create overweight items: Chao's scheme gives Pr[x in S_k] = n w_x / W_k.
    decay = Exponential(0.1)
    sizes = [5, 4, 4, 4, 4]
    reps = 4000
    hits = np.zeros((reps, sum(sizes)))
    for r in range(reps):
        s = BChao(5, decay, seed=r)
        for _ in feed(s, sizes):
            assert s.overweight_count == 0
        assert s.sample().size == 5
        hits[r, s.sample()] = 1
    arrival = np.repeat(np.arange(1.0, 6.0), sizes)
    w = np.exp(-0.1 * (5.0 - arrival))
    assert s.total_weight == pytest.approx(w.sum(), rel=1e-12)
    assert_means(hits, 5 * w / w.sum(), what="item")


@pytest.mark.slow
def test_bchao_overweight_items():
    # Fast decay and a trickle of items: arriving items are overweight and are
    # kept with probability 1; the other items follow Chao's normalised
    # probabilities (n - |V|) w_x / W.  Relative inclusion then no longer
    # follows the weights: (1) is violated.
    decay = Exponential(1.5)
    sizes = [4, 1, 1, 2, 1, 1]
    reps = 4000
    hits = np.zeros((reps, sum(sizes)))
    over_sets = set()
    for r in range(reps):
        s = BChao(4, decay, seed=r)
        for _ in feed(s, sizes):
            assert s.sample().size == 4
        over_sets.add(tuple(sorted(int(v[0]) for v in s._V_items)))
        hits[r, s.sample()] = 1
    assert len(over_sets) == 1                      # V depends on the weights only
    over = np.array(next(iter(over_sets)), dtype=np.int64)
    assert over.size >= 1
    arrival = np.repeat(np.arange(1.0, 7.0), sizes)
    w = np.exp(-1.5 * (6.0 - arrival))
    expected = (4 - over.size) * w / s._W
    expected[over] = 1.0
    assert np.all(hits[:, over] == 1.0)
    normal = np.setdiff1d(np.arange(sum(sizes)), over)
    assert_means(hits[:, normal], expected[normal], what="non-overweight item")
    # (1) would require Pr[newest] / Pr[oldest] = w_newest / w_oldest (~1800 here).
    newest, oldest = sum(sizes) - 1, 0
    assert expected[newest] / expected[oldest] < 0.1 * (w[newest] / w[oldest])


@pytest.mark.slow
def test_bchao_items_leaving_the_overweight_set():
    # n = 2, lambda = 0.7: single items arriving after the reservoir filled are
    # overweight; in the last batch an item is not, so the overweight items move
    # to A and are ejected with probability (1 - (n - |V|) w_z / W) / pi_x when
    # it is accepted.  Chao's probabilities must hold afterwards (6000
    # replicates; dropping the "/ pi_x" changes some of them by ~12 sd).
    decay = Exponential(0.7)
    sizes = [2, 1, 1, 1, 2]
    reps = 6000
    hits = np.zeros((reps, sum(sizes)))
    finals = set()
    for r in range(reps):
        s = BChao(2, decay, seed=r)
        saw_overweight = False
        for _ in feed(s, sizes):
            saw_overweight |= s.overweight_count > 0
        assert saw_overweight
        finals.add(tuple(int(v[0]) for v in s._V_items))
        hits[r, s.sample()] = 1
    assert len(finals) == 1
    over = np.array(next(iter(finals)), dtype=np.int64)
    arrival = np.repeat(np.arange(1.0, 6.0), sizes)
    w = np.exp(-0.7 * (5.0 - arrival))
    expected = (2 - over.size) * w / s._W
    expected[over] = 1.0
    assert_means(hits, expected, what="item")


def test_bchao_requires_exponential_decay():
    with pytest.raises(TBSError, match="decay must be Exponential for B-Chao"):
        BChao(10, Polynomial(2))
