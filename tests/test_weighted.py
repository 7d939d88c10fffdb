"""Sampling primitives in memory: uniform without replacement, the sum tree
(weighted, with and without replacement, updates), prioritised replay.

Statistical tests use fixed seeds and ALPHA (tests/stats.py), divided by the
number of comparisons a test makes; expected frequencies come from the
weights alone (w / sum w, or the law of successive draws enumerated)."""
import itertools
import math

import numpy as np
import pytest

from samplegen.udfs.errors import ParameterError
from samplegen.udfs.sumtree import PrioritizedBuffer, SumTree, UniformSampler, partial_shuffle

from .stats import ALPHA, binomial_p, chisq_gof, successive_law


# ---------------------------------------------------------------------------
# uniform
# ---------------------------------------------------------------------------
def test_the_batched_shuffle_is_the_step_by_step_shuffle():
    """partial_shuffle resolves all steps at once: the same values drawn and
    the same array left as swapping one step after the other, including
    steps whose targets repeat and chains of them."""
    rng = np.random.default_rng(3)
    for _ in range(500):
        n = int(rng.integers(1, 50))
        k = int(rng.integers(0, n + 1))
        swaps = np.array([rng.integers(i, n) for i in range(k)], dtype=np.int64)
        if k > 2 and rng.random() < 0.5:       # force chains: many steps hit one target
            swaps[: k // 2] = np.maximum(np.arange(k // 2), n - 1)
        index = rng.permutation(n).astype(np.int64)
        expected, drawn = index.copy(), []
        for i, j in enumerate(swaps.tolist()):
            expected[i], expected[j] = expected[j], expected[i]
            drawn.append(expected[i])
        assert np.array_equal(partial_shuffle(index, swaps), drawn)
        assert np.array_equal(index, expected)


@pytest.mark.slow
def test_uniform_draws_are_distinct_and_every_ordered_subset_equally_likely():
    """n = 5, k = 3: 60 ordered subsets, each 1/60, over consecutive calls of
    one sampler (the array is not reset between calls)."""
    s = UniformSampler(5, seed=11)
    calls = 30_000
    counts = {order: 0 for order in itertools.permutations(range(5), 3)}
    for _ in range(calls):
        batch = s.sample(3)
        counts[tuple(batch.tolist())] += 1
    assert sum(counts.values()) == calls                 # every batch distinct values of range(5)
    assert chisq_gof(list(counts.values()), [calls / 60] * 60) > ALPHA


def test_uniform_sampler_takes_all_or_nothing_and_refuses_more():
    s = UniformSampler(1000, seed=1)
    assert np.array_equal(np.sort(s.sample(1000)), np.arange(1000))
    assert s.sample(0).size == 0
    with pytest.raises(ParameterError, match="k must be <= 1000"):
        s.sample(1001)
    with pytest.raises(ParameterError, match="n must be >= 1"):
        UniformSampler(0)


def test_uniform_sampler_is_reproducible_call_by_call():
    a, b = UniformSampler(10**6, seed=5), UniformSampler(10**6, seed=5)
    for k in (1, 256, 7, 10_000):
        x, y = a.sample(k), b.sample(k)
        assert np.array_equal(x, y) and np.unique(x).size == k
    assert not np.array_equal(UniformSampler(10**6, seed=6).sample(256),
                              UniformSampler(10**6, seed=5).sample(256))


# ---------------------------------------------------------------------------
# the sum tree
# ---------------------------------------------------------------------------
WEIGHTS = [1, 3, 8, 1, 3, 2, 1, 4, 0, 0.5]


def test_draws_with_replacement_follow_the_weights():
    """Frequencies against w / sum w, at 3 sizes of tree (depths 0, 4, 12):
    Bonferroni over the 3."""
    cases = [[2.5], WEIGHTS, np.random.default_rng(1).gamma(0.5, size=3000)]
    for i, w in enumerate(cases):
        tree = SumTree(w, seed=20 + i)
        w = np.asarray(w, dtype=float)
        draws = np.concatenate([tree.sample(5000) for _ in range(40)])
        counts = np.bincount(draws, minlength=w.size)
        assert counts[w == 0].sum() == 0
        if w.size > 1:
            assert chisq_gof(counts, draws.size * w / w.sum()) > ALPHA / 3


@pytest.mark.slow
def test_draws_without_replacement_follow_successive_weighted_draws():
    """Every ordered triple against its probability under successive draws,
    enumerated; and each index's inclusion probability (the law's first
    order) by a binomial test each: Bonferroni over all comparisons."""
    w = [5.0, 1.0, 3.0, 0.0, 0.5, 2.0]
    law = successive_law(w, 3)
    tree = SumTree(w, seed=4)
    calls = 40_000
    counts = dict.fromkeys(law, 0)
    included = np.zeros(len(w), dtype=np.int64)
    for _ in range(calls):
        batch = tree.sample(3, replace=False)
        counts[tuple(batch.tolist())] += 1
        included[batch] += 1
    assert sum(counts.values()) == calls                 # distinct, never the zero weight
    comparisons = 1 + len(w)
    assert chisq_gof([counts[o] for o in law], [calls * law[o] for o in law]) > \
        ALPHA / comparisons
    for i in range(len(w)):
        pi = sum(p for order, p in law.items() if i in order)
        if pi == 0:
            assert included[i] == 0
        else:
            assert binomial_p(int(included[i]), calls, pi) > ALPHA / comparisons
    assert np.array_equal(tree.weights(), w)             # the weights are back


def test_without_replacement_copes_with_a_few_heavy_weights():
    """Weights 2^-i: a round of draws finds mostly the heaviest; the rounds
    remove what they drew, so every index comes out, in a valid order,
    and the weights are restored exactly."""
    w = 0.5 ** np.arange(60)
    tree = SumTree(w, seed=9)
    for _ in range(20):
        batch = tree.sample(60, replace=False)
        assert np.array_equal(np.sort(batch), np.arange(60))
    assert np.array_equal(tree.weights(), w) and tree.total == SumTree(w).total
    first = [tree.sample(1, replace=False)[0] for _ in range(4000)]
    # P(first = 0) = 1 / (2 - 2^-59)
    assert binomial_p(sum(i == 0 for i in first), 4000, 1 / (2 - 0.5 ** 59)) > ALPHA


def test_updates_change_the_distribution_exactly():
    tree = SumTree(WEIGHTS, seed=13)
    new = [0, 0, 0, 7, 0, 0, 1, 0, 2, 0]
    tree.update(np.arange(10), new)
    assert tree.total == 10 and np.array_equal(tree.weights(), new)
    draws = tree.sample(60_000)
    assert set(np.unique(draws).tolist()) == {3, 6, 8}
    assert chisq_gof(np.bincount(draws, minlength=10)[[3, 6, 8]],
                     [60_000 * 0.7, 60_000 * 0.1, 60_000 * 0.2]) > ALPHA
    tree.update([3, 3, 6], [1.0, 0.0, 5.0])              # an index twice: its last weight
    assert np.array_equal(tree.weights([3, 6, 8]), [0.0, 5.0, 2.0])
    assert set(np.unique(tree.sample(1000)).tolist()) == {6, 8}
    with pytest.raises(ParameterError, match="only 2 weights are positive"):
        tree.sample(3, replace=False)


def test_sums_do_not_drift_over_many_updates():
    rng = np.random.default_rng(2)
    w = rng.random(5000)
    tree = SumTree(w, seed=1)
    for _ in range(300):
        idx = rng.integers(0, 5000, 64)
        vals = rng.random(64) * 10.0 ** rng.integers(-8, 8)
        tree.update(idx, vals)
        w[idx] = vals                         # no repeats' order issue: same last-wins rule
    exact = math.fsum(w.tolist())
    assert abs(tree.total - exact) <= 1e-12 * exact
    assert np.array_equal(tree.weights(), w)


def test_a_point_at_the_top_edge_never_lands_on_a_zero_weight():
    """The largest uniform below 1 with zero weights to the right: the descent
    ends on the last positive weight, whatever the rounding of the sums."""
    for w in ([0.1, 0.2, 0.3, 0.0, 0.0], [1e-300, 1.0, 1e-300, 0.0],
              [1.0] * 7 + [0.0], [3.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]):
        tree = SumTree(w)
        leaf = tree._descend(np.array([np.nextafter(1.0, 0.0), 0.0]))
        assert np.asarray(w)[leaf].min() > 0


def test_the_same_seed_and_calls_give_the_same_draws():
    def run(seed):
        tree = SumTree(np.arange(1000) % 7, seed=seed)
        out = [tree.sample(100), tree.sample(50, replace=False)]
        tree.update([1, 2, 3], [100, 0, 4])
        out += [tree.sample(100), tree.sample(20, replace=False)]
        return np.concatenate(out)
    assert np.array_equal(run(8), run(8))
    assert not np.array_equal(run(8), run(9))


@pytest.mark.parametrize("bad, what", [(np.nan, "NaN"), (np.inf, "infinite"),
                                       (-np.inf, "infinite"), (-1.0, "negative")])
def test_a_bad_weight_is_refused_naming_the_first_one(bad, what):
    w = np.ones(10)
    w[[4, 7]] = bad
    with pytest.raises(ParameterError, match=f"weight 4 is {what}"):
        SumTree(w)
    tree = SumTree(np.ones(10), seed=1)
    with pytest.raises(ParameterError, match=f"weight 1 is {what}"):
        tree.update([2, 5, 6], [1.0, bad, bad])
    assert np.array_equal(tree.weights(), np.ones(10))   # nothing changed


def test_other_bad_arguments_are_refused_in_one_line():
    tree = SumTree([1.0, 2.0], seed=1)
    for call, match in [(lambda: SumTree([]), "at least one weight"),
                        (lambda: SumTree([[1.0]]), "1-D"),
                        (lambda: SumTree(["a"]), "must be numbers"),
                        (lambda: tree.update([2], [1.0]), "index 2 is out of range"),
                        (lambda: tree.update([0, 1], [1.0]), "2 indices but 1 weights"),
                        (lambda: tree.sample(-1), "k must be >= 0"),
                        (lambda: tree.sample(3, replace=False), "only 2 weights"),
                        (lambda: SumTree([0.0, 0.0]).sample(1), "no weight is positive")]:
        with pytest.raises(ParameterError, match=match):
            call()


# ---------------------------------------------------------------------------
# prioritised replay
# ---------------------------------------------------------------------------
def test_replay_draws_by_priority_to_the_alpha_with_importance_weights():
    buf = PrioritizedBuffer(8, alpha=0.5, beta=1.0, eps=0.0, seed=3)
    slots = buf.add(np.arange(16).reshape(8, 2))
    assert np.array_equal(slots, np.arange(8)) and len(buf) == 8
    priorities = np.array([1, 4, 9, 16, 0, 1, 4, 9], dtype=float)
    buf.update(slots, priorities)
    drawn, items, weights = buf.sample(40_000)
    assert np.array_equal(items[:, 0], 2 * drawn)
    p = np.sqrt(priorities) / np.sqrt(priorities).sum()  # alpha = 1/2
    counts = np.bincount(drawn, minlength=8)
    assert counts[4] == 0
    assert chisq_gof(counts[p > 0], 40_000 * p[p > 0]) > ALPHA
    # beta = 1: weights 1 / (N P(i)), over the largest in the batch
    expected = (8 * p[drawn]) ** -1.0
    assert np.allclose(weights, expected / expected.max())


def test_replay_gives_new_items_the_largest_priority_and_overwrites_the_oldest():
    buf = PrioritizedBuffer(4, alpha=1.0, eps=0.0, seed=5)
    buf.add(np.array([10, 11, 12]))
    buf.update([0, 1, 2], [0.0, 0.0, 7.0])
    slots = buf.add(np.array([13, 14]))                  # slot 3, then the oldest: 0
    assert np.array_equal(slots, [3, 0]) and len(buf) == 4
    assert np.array_equal(buf.tree.weights(), [7.0, 0.0, 7.0, 7.0])
    drawn, items, _ = buf.sample(3, replace=False)
    assert sorted(drawn.tolist()) == [0, 2, 3]
    assert sorted(items.tolist()) == [12, 13, 14]
    with pytest.raises(ParameterError, match="do not match"):
        buf.add(np.zeros((2, 3)))
    with pytest.raises(ParameterError, match="priority 1 is NaN"):
        buf.update([0, 1], [1.0, np.nan])
    with pytest.raises(ParameterError, match="the buffer is empty"):
        PrioritizedBuffer(3).sample(1)
    with pytest.raises(ParameterError, match="slot 2 holds no item yet"):
        b = PrioritizedBuffer(3)
        b.add(np.zeros(2))
        b.update([2], [1.0])
