"""T-TBS (Algorithm 3, Theorem 3.1) and B-TBS (Algorithm 1).

Statistical checks use R independent replicates (seeds 0..R-1) and
Bonferroni-corrected z-tests at family level ALPHA = 1e-3.
"""
import math

import numpy as np
import pytest

from samplegen.tbs import BTBS, TTBS, Exponential, Polynomial, TBSError
from tests.tbs_stats import ALPHA, assert_means, feed, two_sided_p
from tests.tbs_theory import (
    ages,
    exp_decay,
    exp_f_inf,
    poly2_f_inf,
    poly_decay,
    replicates_for_power,
    total_weight,
    ttbs_q,
)


def test_acceptance_probability_and_errors():
    # Algorithm 3 accepts each arriving item with probability q = n / (b F_inf);
    # for f(a) = (11 / (11 + a))^2, F_inf = 121 (pi^2/6 - sum_{j<=10} 1/j^2) = 11.54
    # (tests/tbs_theory.poly2_f_inf), so q = 0.0866.  The first batch's sample
    # is all accepted items: |S_1| ~ Binomial(|B_1|, q).  One sampler per seed,
    # |B_1| = 1000, 400 replicates: z-test of the mean |S_1| / |B_1| against q
    # (standard error 0.0004, 0.5% of q), and the sample is a subset of B_1.
    f = Polynomial(2, shift=10)
    q = ttbs_q(100, 100, poly2_f_inf(10))
    reps, b = 400, 1000
    accepted = np.zeros((reps, 1))
    for r in range(reps):
        s = TTBS(100, f, 100, seed=r)
        s.update(np.arange(b), time=1.0)
        sample = s.sample()
        assert np.unique(sample).size == sample.size and np.all((sample >= 0) & (sample < b))
        accepted[r, 0] = sample.size / b
    assert_means(accepted, [q], what="accepted fraction")
    with pytest.raises(TBSError) as info:
        TTBS(1000, Exponential(0.05), 40, seed=1)
    assert str(info.value) == ("mean_batch_size must be >= n * gamma(decay) = 48.7706 "
                               "(T-TBS needs b >= n gamma), got 40")
    with pytest.raises(TBSError, match="finite total weight"):
        TTBS(10, Polynomial(1.0), 100)
    with pytest.raises(TBSError, match="mean_batch_size must be a finite number > 0, got 0"):
        TTBS(10, Exponential(0.1), 0)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["exp", "poly"])
def test_expected_sample_size_theorem_3_1_i(kind):
    # i.i.d. batch sizes, uniform on {0..2b}: E[C_k] = n F_{k-1} / F_inf for every k,
    # with F_{k-1} = sum_{i<k} f(i) and F_inf in closed form (tests/tbs_theory.py).
    if kind == "exp":
        decay, f_theory, f_inf = Exponential(0.1), exp_decay(0.1), exp_f_inf(0.1)
    else:
        decay, f_theory, f_inf = Polynomial(2, shift=10), poly_decay(2, 10), poly2_f_inf(10)
    n, b, reps = 100, 60, 800
    ks = [1, 5, 15, 40]
    f = f_theory(np.arange(0, 200, dtype=np.float64))
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
    # E[C_k] -> n: by k = 40 the observed mean size is within 5% (exp) or 30%
    # (poly, slower convergence) of n.
    assert sizes_seen[:, -1].mean() > (0.95 if kind == "exp" else 0.7) * n


@pytest.mark.slow
def test_sample_size_variance_theorem_3_1_ii():
    # Constant batch size b: Var[C_k] -> b q F_inf - b q^2 F2_inf.  k = 60 with
    # lambda = 0.3 is past convergence (f_60 = 1.5e-8).  The sample variance of R
    # replicates has relative sd ~ sqrt(2 / (R - 1)) (C_k is close to normal);
    # two-sided z-test at level ALPHA.  Power: R = 1500 detects a relative
    # error of 15% in Var[C_k] (about 10.5 of the target's 70.2) with
    # probability 80%: R - 1 = 2 (z_{ALPHA/2} + z_{0.8})^2 / 0.151^2
    # = 2 (3.29 + 0.84)^2 / 0.0228 (the replicates are kept as they were).
    decay = Exponential(0.3)
    n, b, reps, k = 100, 50, 1500, 60
    q = ttbs_q(n, b, exp_f_inf(0.3))
    f = exp_decay(0.3)(np.arange(0, 2000, dtype=np.float64))
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
    # T-TBS: q = n / (b F_inf) with F_inf = 4 (pi^2/6 - 1) for f(a) = (2 / (2 + a))^2.
    # Irregular times, per-item indicators, Bonferroni over items.
    sizes = [6, 0, 9, 4, 7, 3]
    times = [0.0, 0.7, 1.0, 2.5, 2.6, 4.0]
    if kind.endswith("exp"):
        decay, f = Exponential(0.4), exp_decay(0.4)
    else:
        decay, f = Polynomial(2, shift=1), poly_decay(2, 1)
    if kind.startswith("ttbs"):
        q = ttbs_q(8, 10, poly2_f_inf(1))
        make = lambda r: TTBS(8, decay, 10, seed=r)          # noqa: E731
    else:
        q = 1.0
        make = lambda r: BTBS(decay, seed=r)                 # noqa: E731
    reps = 2500
    hits = np.zeros((reps, sum(sizes)))
    for r in range(reps):
        s = make(r)
        for _ in feed(s, sizes, times):
            pass
        hits[r, s.sample()] = 1.0
    expected = q * np.repeat(f(ages(times)), sizes)
    assert_means(hits, expected, what="item")


@pytest.mark.slow
def test_ttbs_exponential_inclusion_probabilities():
    # T-TBS with exponential decay keeps one group and, when a batch evicts no
    # more items than it keeps, writes the accepted new items into the evicted
    # slots (tbs/ttbs.py): its own code path.  Theory (equation (4)):
    # Pr[x in S_k] = q e^{-lambda (t_k - t_j)} for x in batch j, with
    # q = n (1 - e^{-lambda}) / b.  Here n = 200, b = 400, lambda = 0.3: q = 0.1296.
    # The schedule has irregular gaps (0.2 to 2.5: retention 0.94 to 0.47, so
    # evictions below and above the kept count), an empty batch (evictions
    # without new items) and batches of 300 to 800 items.
    # Cells: first and second half of each non-empty batch's items (12 cells);
    # the count of a cell's items in S_k has mean |cell| q f(age).  2000
    # replicates, Bonferroni-corrected two-sided z-tests at family level ALPHA
    # (|z| > 3.94 rejects).  Tolerance: a cell's count is Binomial(m, pi)
    # (items are independent in T-TBS), so its relative standard error is
    # sqrt((1 - pi) / (m pi R)); the smallest cell (first batch, pi = 0.0214,
    # m = 300) has 0.87%, so a 5% relative bias in any cell is detected with
    # power > 0.99 ((3.94 + 0.84) * 0.87% = 4.2% at power 0.8).
    lam, n, b = 0.3, 200, 400
    sizes = [600, 0, 450, 800, 300, 500, 700]
    times = [0.0, 0.5, 1.0, 3.5, 4.0, 4.2, 6.0]
    q = ttbs_q(n, b, exp_f_inf(lam))
    pi = q * exp_decay(lam)(ages(times))
    starts = np.concatenate([[0], np.cumsum(sizes)])
    cells = []                                   # (first item, end, batch index)
    for j in np.flatnonzero(sizes):
        mid = (starts[j] + starts[j + 1]) // 2
        cells += [(starts[j], mid, j), (mid, starts[j + 1], j)]
    edges = np.array([c[0] for c in cells] + [starts[-1]])
    expected = np.array([(hi - lo) * pi[j] for lo, hi, j in cells])
    worst = max((1 - pi[j]) / ((hi - lo) * pi[j]) for lo, hi, j in cells)
    reps = 2000
    assert replicates_for_power(worst, ALPHA, len(cells)) <= reps     # the design (see above)
    counts = np.zeros((reps, len(cells)))
    for r in range(reps):
        s = TTBS(n, Exponential(lam), b, seed=r)
        for _ in feed(s, sizes, times):
            assert s.group_count <= 1
        sample = s.sample()
        assert np.unique(sample).size == sample.size
        counts[r] = np.histogram(sample, bins=edges)[0]
    assert_means(counts, expected, what="cell (batch, half)")


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
    # E|S_k| = W_k = sum_j |B_j| e^{-0.2 (5 - j)} for B-TBS; 400 replicates, z-test.
    decay = Exponential(0.2)
    sizes = [20, 5, 0, 30, 10]
    w = total_weight(sizes, [1, 2, 3, 4, 5], exp_decay(0.2))
    reps = 400
    got = np.zeros((reps, 1))
    for r in range(reps):
        s = BTBS(decay, seed=r)
        for _ in feed(s, sizes, [1, 2, 3, 4, 5]):
            pass
        got[r, 0] = s.sample_weight
    assert s.total_weight == pytest.approx(w, rel=1e-12)
    assert_means(got, [w], what="E|S_k|")
