"""T-TBS (Algorithm 3, Theorem 3.1) and B-TBS (Algorithm 1).

Statistical checks use R independent replicates (seeds 0..R-1) and
Bonferroni-corrected z-tests at family level ALPHA = 1e-3.
"""
import math

import numpy as np
import pytest

from samplegen.tbs import BTBS, TTBS, Exponential, Polynomial, TBSError, gamma
from tests.tbs_stats import ALPHA, assert_means, feed, two_sided_p


def test_acceptance_probability_and_errors():
    f = Polynomial(2, shift=10)
    s = TTBS(100, f, 100, seed=1)
    assert s.q == pytest.approx(100 * gamma(f) / 100, rel=1e-15)
    with pytest.raises(TBSError) as info:
        TTBS(1000, Exponential(0.05), 40, seed=1)
    assert str(info.value) == ("mean_batch_size must be >= n * gamma(decay) = 48.7706 "
                               "(T-TBS needs b >= n gamma), got 40")
    with pytest.raises(TBSError, match="finite total weight"):
        TTBS(10, Polynomial(1.0), 100)
    with pytest.raises(TBSError, match="mean_batch_size must be a finite number > 0, got 0"):
        TTBS(10, Exponential(0.1), 0)


@pytest.mark.slow
@pytest.mark.parametrize("decay", [Exponential(0.1), Polynomial(2, shift=10)], ids=["exp", "poly"])
def test_expected_sample_size_theorem_3_1_i(decay):
    # i.i.d. batch sizes, uniform on {0..2b}: E[C_k] = n F_{k-1} / F_inf for every k.
    n, b, reps = 100, 60, 800
    ks = [1, 5, 15, 40]
    f = np.asarray(decay(np.arange(0, 200, dtype=np.float64)))
    f_inf = 1.0 / gamma(decay)
    expected = [n * f[:k].sum() / f_inf for k in ks]
    sizes_seen = np.zeros((reps, len(ks)))
    for r in range(reps):
        rng = np.random.default_rng(10_000 + r)
        sizes = rng.integers(0, 2 * b + 1, max(ks))
        s = TTBS(n, decay, b, seed=r)
        for k, _ in enumerate(feed(s, sizes, np.arange(1, max(ks) + 1)), start=1):
            if k in ks:
                sizes_seen[r, ks.index(k)] = s.sample_weight
                assert s.sample().size == s.sample_weight
    assert_means(sizes_seen, expected, what="E[C_k] at k index")
    assert expected[-1] > 0.95 * n if decay.is_exponential else expected[-1] > 0.7 * n


@pytest.mark.slow
def test_sample_size_variance_theorem_3_1_ii():
    # Constant batch size b: Var[C_k] -> b q F_inf - b q^2 F2_inf.  k = 60 with
    # lambda = 0.3 is past convergence (f_60 = 1.5e-8).  The sample variance of R
    # replicates has relative sd ~ sqrt(2 / (R - 1)) (C_k is close to normal);
    # two-sided z-test at level ALPHA.
    decay = Exponential(0.3)
    n, b, reps, k = 100, 50, 1500, 60
    q = n * gamma(decay) / b
    f = np.asarray(decay(np.arange(0, 2000, dtype=np.float64)))
    target = b * q * f.sum() - b * q * q * np.sum(f ** 2)
    sizes = np.full(k, b)
    final = np.empty(reps)
    for r in range(reps):
        s = TTBS(n, decay, b, seed=r)
        for _ in feed(s, sizes, np.arange(1, k + 1)):
            pass
        final[r] = s.sample_weight
    z = (final.var(ddof=1) / target - 1) / math.sqrt(2 / (reps - 1))
    assert two_sided_p(z) > ALPHA, f"variance {final.var(ddof=1):.2f} vs {target:.2f} (z = {z:.2f})"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["ttbs-poly", "btbs-exp", "btbs-poly"])
def test_inclusion_probability_is_q_times_f(kind):
    # Pr[x in S_k] = q f(age) (equation (4)); B-TBS: q = 1 (equation (2)).
    # Irregular times, per-item indicators, Bonferroni over items.
    sizes = [6, 0, 9, 4, 7, 3]
    times = [0.0, 0.7, 1.0, 2.5, 2.6, 4.0]
    decay = Exponential(0.4) if kind.endswith("exp") else Polynomial(2, shift=1)
    make = ((lambda r: TTBS(8, decay, 10, seed=r)) if kind.startswith("ttbs")
            else (lambda r: BTBS(decay, seed=r)))
    reps = 2500
    hits = np.zeros((reps, sum(sizes)))
    for r in range(reps):
        s = make(r)
        for _ in feed(s, sizes, times):
            pass
        hits[r, s.sample()] = 1.0
    batch_of = np.repeat(np.arange(len(sizes)), sizes)
    expected = s.q * np.asarray(decay(times[-1] - np.asarray(times)[batch_of]))
    assert_means(hits, expected, what="item")


@pytest.mark.parametrize("decay", [Exponential(0.3), Polynomial(2, shift=3)], ids=["exp", "poly"])
def test_properties_and_total_weight(decay):
    rng = np.random.default_rng(4)
    sizes = rng.integers(0, 40, 200)
    times = np.cumsum(rng.choice([0.1, 1.0, 3.0], 200))
    s = TTBS(30, decay, 20, seed=2)
    for k, seen in enumerate(feed(s, sizes, times)):
        sample = s.sample()
        assert sample.size == s.sample_weight
        assert np.unique(sample).size == sample.size and np.all(sample < seen)
        direct = float(np.sum(sizes[:k + 1] * np.asarray(decay(times[k] - times[:k + 1]))))
        assert s.total_weight == pytest.approx(direct, rel=1e-9)
        if decay.is_exponential:
            assert s.group_count <= 1


def test_btbs_expected_size_tracks_total_weight():
    # E|S_k| = W_k for B-TBS; 400 replicates, z-test.
    decay = Exponential(0.2)
    sizes = [20, 5, 0, 30, 10]
    reps = 400
    got = np.zeros((reps, 1))
    for r in range(reps):
        s = BTBS(decay, seed=r)
        for _ in feed(s, sizes, [1, 2, 3, 4, 5]):
            pass
        got[r, 0] = s.sample_weight
    assert_means(got, [s.total_weight], what="E|S_k|")
