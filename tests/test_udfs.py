"""Sampling-UDFs: properties that hold for every draw, and seeded statistical
tests (level ALPHA from tests/stats.py, Bonferroni-divided where stated)."""
import math
from itertools import product

import numpy as np
import pytest

from samplegen.udfs import (
    Bootstrap,
    HoldOut,
    KFold,
    ParameterError,
    PositionRNG,
    UDFError,
    load_udf,
    parse_param,
)
from samplegen.udfs.multinomial import CHUNK_ROWS, MultinomialTree, chunk_depth

from .stats import ALPHA, binomial_p, chisq_gof, spearman


def all_occurrences(udf, rng, cuts):
    """Occurrences over [0, n) computed block by block at the given cuts."""
    edges = [0, *cuts, udf.n_rows]
    parts = [udf(a, b, rng) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    starts = [a for a, b in zip(edges[:-1], edges[1:]) if b > a]
    return (np.concatenate([p.offset + s for p, s in zip(parts, starts)]),
            np.concatenate([p.sample for p in parts]),
            np.concatenate([p.relpos for p in parts]))


def canonical(rows, sample, relpos):
    order = np.lexsort((relpos, rows, sample))
    return rows[order], sample[order], relpos[order]


@pytest.mark.parametrize("make", [
    lambda n: HoldOut(n, 0.7, repeats=3, fraction=0.8),
    lambda n: KFold(n, 7),
    lambda n: KFold(n, 4, naive=True),
    lambda n: Bootstrap(n, 3, size=n + 17),
    lambda n: Bootstrap(n, 2, size=5),
])
def test_occurrences_do_not_depend_on_blocking(make):
    n = 5000
    rng = PositionRNG(17)
    whole = canonical(*all_occurrences(make(n), rng, []))
    for seed in range(3):
        cuts = sorted(np.random.default_rng(seed).choice(np.arange(1, n), 25, replace=False))
        blocked = canonical(*all_occurrences(make(n), PositionRNG(17), cuts))
        for a, b in zip(whole, blocked):
            assert np.array_equal(a, b)


# -- hold-out -------------------------------------------------------------------
def test_holdout_sets_are_disjoint_cover_and_have_binomial_sizes():
    n, ratio, reps = 20000, 0.7, 5
    rows, sample, _ = all_occurrences(HoldOut(n, ratio, repeats=reps), PositionRNG(3), [])
    checks = []
    for w in range(reps):
        train = rows[sample == 2 * w]
        test = rows[sample == 2 * w + 1]
        assert np.intersect1d(train, test).size == 0
        assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(n))
        checks.append(binomial_p(train.size, n, ratio))
    assert min(checks) > ALPHA / reps  # Bonferroni over the repeats


def test_holdout_fraction_leaves_rows_out():
    n, ratio, fraction = 30000, 0.6, 0.25
    rows, sample, _ = all_occurrences(HoldOut(n, ratio, fraction=fraction), PositionRNG(4), [])
    train, test = rows[sample == 0], rows[sample == 1]
    assert np.intersect1d(train, test).size == 0
    assert len(set(rows)) == rows.size  # each row at most once
    pvals = [binomial_p(train.size, n, fraction * ratio),
             binomial_p(test.size, n, fraction * (1 - ratio))]
    assert min(pvals) > ALPHA / 2


def test_holdout_repeats_are_independent():
    n = 40000
    rows, sample, _ = all_occurrences(HoldOut(n, 0.5, repeats=2), PositionRNG(8), [])
    in0 = np.zeros(n, bool)
    in0[rows[sample == 0]] = True
    in1 = np.zeros(n, bool)
    in1[rows[sample == 2]] = True
    both = int((in0 & in1).sum())
    assert binomial_p(both, n, 0.25) > ALPHA


def test_holdout_order_is_random():
    """The sample order (by relative position) is unrelated to row ids, and
    relative positions are uniform over 64 bits."""
    n = 20000
    rows, sample, relpos = all_occurrences(HoldOut(n, 0.8), PositionRNG(5), [])
    train = sample == 0
    order = rows[train][np.argsort(relpos[train])]
    rho = spearman(np.arange(order.size), order)
    z = rho * math.sqrt(order.size - 1)
    from .stats import normal_two_sided
    top = (relpos >> np.uint64(60)).astype(int)  # 16 cells
    assert min(normal_two_sided(z), chisq_gof(np.bincount(top, minlength=16),
                                              np.full(16, n / 16))) > ALPHA / 2


def test_holdout_ratio_one_puts_every_row_in_train():
    rows, sample, _ = all_occurrences(HoldOut(100, 1.0, exact=False), PositionRNG(1), [])
    assert np.array_equal(np.sort(rows), np.arange(100)) and not sample.any()


# -- k-fold -----------------------------------------------------------------------
def test_folds_partition_rows_and_sizes_are_multinomial():
    n, k = 30000, 10
    rows, sample, _ = all_occurrences(KFold(n, k), PositionRNG(9), [123, 4567])
    assert np.array_equal(np.sort(rows), np.arange(n))
    assert chisq_gof(np.bincount(sample, minlength=k), np.full(k, n / k)) > ALPHA


def test_naive_kfold_holds_the_same_rows_as_fold_mode():
    n, k = 3000, 6
    rng = PositionRNG(12)
    f_rows, f_sample, f_pos = all_occurrences(KFold(n, k), rng, [1000])
    n_rows, n_sample, n_pos = all_occurrences(KFold(n, k, naive=True), rng, [1700])
    for i in range(k):
        test = np.sort(n_rows[n_sample == 2 * i + 1])
        assert np.array_equal(test, np.sort(f_rows[f_sample == i]))
        train = np.sort(n_rows[n_sample == 2 * i])
        assert np.array_equal(train, np.setdiff1d(np.arange(n), test))
    # a row keeps its relative position in every set it appears in
    by_row = dict(zip(f_rows.tolist(), f_pos.tolist()))
    assert all(by_row[r] == p for r, p in zip(n_rows.tolist(), n_pos.tolist()))


@pytest.mark.parametrize("k,n", [(1, 10), (0, 10), (11, 10)])
def test_bad_k_is_refused(k, n):
    with pytest.raises(ParameterError, match="k must be"):
        KFold(n, k)


def test_k_equal_rows_is_allowed():
    assert KFold(10, 10).k == 10


# -- bootstrap ----------------------------------------------------------------------
@pytest.mark.parametrize("n,size", [(1, 5), (7, 7), (2500, 2500), (3000, 10), (2049, 9000)])
def test_bootstrap_samples_have_exactly_size_rows(n, size):
    rows, sample, _ = all_occurrences(Bootstrap(n, 4, size=size), PositionRNG(2), [n // 3])
    assert np.array_equal(np.bincount(sample, minlength=4), np.full(4, size))
    assert rows.min() >= 0 and rows.max() < n


def test_bootstrap_multiplicities_are_those_of_sampling_with_replacement():
    """Each row's count in a sample of size s over m rows is Binomial(s, 1/m);
    pooled over rows and samples the histogram of counts must match it."""
    n, samples = 3000, 20
    rows, sample, _ = all_occurrences(Bootstrap(n, samples), PositionRNG(21), [999, 2000])
    hist = np.zeros(12)
    for i in range(samples):
        counts = np.bincount(rows[sample == i], minlength=n)
        hist += np.bincount(np.minimum(counts, 11), minlength=12)
    pmf = [math.comb(n, c) * (1 / n) ** c * (1 - 1 / n) ** (n - c) for c in range(11)]
    pmf.append(1 - sum(pmf))
    assert chisq_gof(hist, np.array(pmf) * n * samples) > ALPHA


def test_bootstrap_every_row_is_equally_likely():
    """Total occurrences per row across many samples: uniform over rows
    (rows straddling chunk boundaries included)."""
    n, samples = 2 * CHUNK_ROWS + 300, 40
    rows, _, _ = all_occurrences(Bootstrap(n, samples), PositionRNG(4), [CHUNK_ROWS + 5])
    counts = np.bincount(rows, minlength=n)  # multinomial(n * samples; uniform)
    assert chisq_gof(counts, np.full(n, samples)) > ALPHA


def test_bootstrap_matches_the_exact_multinomial_on_a_tiny_case():
    """m = 3 rows, s = 3 draws: the 10 count vectors must appear with the
    multinomial probabilities (across 3000 seeds)."""
    outcomes = [c for c in product(range(4), repeat=3) if sum(c) == 3]
    prob = {c: math.factorial(3) / np.prod([math.factorial(x) for x in c]) / 27
            for c in outcomes}
    seen = {c: 0 for c in outcomes}
    for seed in range(3000):
        tree = MultinomialTree(PositionRNG(seed), 3, 3, sample=0)
        seen[tuple(int(x) for x in tree.counts(0, 3))] += 1
    assert chisq_gof([seen[c] for c in outcomes], [prob[c] * 3000 for c in outcomes]) > ALPHA


def test_multinomial_tree_is_exact_above_the_chunk_level():
    """Counts of the first chunk-level node: Binomial(s, rows/m), across seeds."""
    n, s = 8 * CHUNK_ROWS + 77, 500
    depth = chunk_depth(n)
    first = n >> depth  # the leftmost node at chunk depth has floor(n / 2**d) rows
    totals = [int(MultinomialTree(PositionRNG(seed), n, s, 0).counts(0, first).sum())
              for seed in range(400)]
    p = first / n
    mean = np.mean(totals)
    z = (mean - s * p) / math.sqrt(s * p * (1 - p) / len(totals))
    from .stats import normal_two_sided
    assert normal_two_sided(z) > ALPHA


def test_bootstrap_chunk_is_drawn_as_documented():
    """Below CHUNK_ROWS rows the tree is one chunk: its T picks are
    Draws.integers from stream (BOOTSTRAP_CHUNK, sample) at node 0, then one
    raw word per occurrence as relative position (the sampling contract)."""
    from samplegen.udfs.rng import Purpose, stream
    n, total = 700, 900
    rows, relpos = MultinomialTree(PositionRNG(9), n, total, sample=2).occurrences(0, n)
    draws = PositionRNG(9).draws(stream(Purpose.BOOTSTRAP_CHUNK, 2), 0)
    picks = draws.integers(0, n, total)
    assert np.array_equal(rows, np.sort(picks)) and np.array_equal(relpos, draws.raw(total))


def test_bootstrap_samples_are_distinct_streams():
    rows, sample, _ = all_occurrences(Bootstrap(1000, 2), PositionRNG(6), [])
    a = np.bincount(rows[sample == 0], minlength=1000)
    b = np.bincount(rows[sample == 1], minlength=1000)
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("kwargs,match", [({"samples": 0}, "samples"),
                                          ({"samples": 2, "size": 0}, "size"),
                                          ({"samples": "x"}, "samples")])
def test_bad_bootstrap_parameters(kwargs, match):
    with pytest.raises(ParameterError, match=match):
        Bootstrap(10, **kwargs)


@pytest.mark.parametrize("kwargs", [{"ratio": 0}, {"ratio": 1.01}, {"ratio": float("nan")},
                                    {"ratio": 0.5, "fraction": 0}, {"ratio": 0.5, "repeats": 0}])
def test_bad_holdout_parameters(kwargs):
    with pytest.raises(ParameterError):
        HoldOut(10, **kwargs)


# -- user UDFs ------------------------------------------------------------------------
def test_scalar_paper_udf_through_the_adapter():
    udf = load_udf("samplegen.udfs.examples:paper_holdout_series", 2000,
                   {"repeats": 2, "ratio": 0.75})
    assert udf.sample_names() == ["train-0", "test-0", "train-1", "test-1"]
    rows, sample, relpos = all_occurrences(udf, PositionRNG(1), [500, 501])
    for w in range(2):
        train, test = rows[sample == 2 * w], rows[sample == 2 * w + 1]
        assert np.array_equal(np.sort(np.concatenate([train, test])), np.arange(2000))
    assert binomial_p(int((sample == 0).sum()), 2000, 0.75) > ALPHA
    # the paper's UDF orders rows by the same number that decided the set
    assert relpos[sample == 0].max() <= np.uint64(int(0.75 * 2 ** 64))


def test_vectorized_user_udf_and_params():
    udf = load_udf("samplegen.udfs.examples:bernoulli", 10000, dict([parse_param("p=0.2")]))
    rows, sample, _ = all_occurrences(udf, PositionRNG(1), [3333])
    assert udf.sample_names() == ["subsample"] and not sample.any()
    assert binomial_p(rows.size, 10000, 0.2) > ALPHA


def _bad_offsets(start, stop, rng, params):
    return np.array([stop - start]), np.array([0]), np.array([1], np.uint64)


def _bad_shape(start, stop, rng, params):
    return np.arange(2), np.zeros(3, int), np.zeros(2, np.uint64)


@pytest.mark.parametrize("func,match", [(_bad_offsets, "row offset"), (_bad_shape, "shapes")])
def test_broken_user_udfs_are_reported(func, match, monkeypatch):
    import sys
    monkeypatch.setattr(sys.modules[__name__], "udf_under_test", func, raising=False)
    udf = load_udf(f"{__name__}:udf_under_test", 10)
    with pytest.raises(UDFError, match=match):
        udf(0, 10, PositionRNG(1))


@pytest.mark.parametrize("spec,match", [("nope", "unknown UDF"),
                                        ("no_such_module:f", "cannot import"),
                                        ("samplegen.udfs.examples:missing", "no attribute")])
def test_unknown_udfs_are_refused(spec, match):
    with pytest.raises(ParameterError, match=match):
        load_udf(spec, 10)


def test_param_parsing():
    assert parse_param("a=3") == ("a", 3)
    assert parse_param("b=0.5") == ("b", 0.5)
    assert parse_param("c=true") == ("c", True)
    assert parse_param("d=x=y") == ("d", "x=y")
    with pytest.raises(ParameterError):
        parse_param("novalue")


def _by_row(occ, rows):
    """{row id: sorted [(sample, relpos), ...]} of occurrences whose offsets index *rows*."""
    out = {}
    for offset, s, r in zip(occ.offset.tolist(), occ.sample.tolist(), occ.relpos.tolist()):
        out.setdefault(int(rows[offset]), []).append((s, r))
    return {row: sorted(v) for row, v in out.items()}


@pytest.mark.parametrize("spec,params", [
    ("bootstrap", {"samples": 3, "size": 5000}),
    ("bootstrap", {"samples": 1}),
    ("samplegen.udfs.examples:paper_holdout_series", {"ratio": 0.5, "repeats": 2}),
    ("holdout", {"ratio": 0.7, "repeats": 2, "fraction": 0.8}),
])
def test_keyed_rows_get_the_occurrences_of_their_row_ids(spec, params):
    """occurrences_at over a shuffled subset of row ids (in chunks spread
    over the whole matrix) equals the range evaluation, row by row."""
    n = 6000
    udf = load_udf(spec, n, params)
    rows = np.random.default_rng(3).permutation(n)[:2500]
    keyed = udf.occurrences_at(rows, PositionRNG(11))
    full = udf(0, n, PositionRNG(11))
    want = _by_row(full, np.arange(n))
    got = _by_row(keyed, rows)
    assert got == {r: want[r] for r in rows.tolist() if r in want}
    if spec == "bootstrap":  # the tree covers the row ids [0, n) only
        with pytest.raises(ParameterError, match="row ids"):
            udf.occurrences_at(np.array([n]), PositionRNG(11))


@pytest.mark.slow
def test_keyed_bootstrap_is_exactly_multinomial():
    """The first `size` arrivals of keyed Poisson processes (udfs/arrivals.py):
    every draw has exactly `size` occurrences, and over 2,400 seeds the count
    vector of 6 sparse keys is Multinomial(8; 1/6 each): each row's count
    fits Binomial(8, 1/6) and the joint pattern of rows 0 and 1 fits the
    multinomial's (two tests, Bonferroni: each at ALPHA / 2).  Power: against
    row 0 or 1 drawn 10% more often than the others (1/6 * 1.1), the two tests
    together reject with probability 81% at 2,400 seeds (86% at 2,600, 73% at
    2,200: 1,000 simulated runs of these two tests on numpy's multinomial
    each); 3,000 seeds gave 94%."""
    from samplegen.udfs.arrivals import KeyedBootstrap, find_cutoffs

    positions = np.array([5, 1 << 40, 77, 123456789, 3, 1 << 62], np.int64)
    n, size, trials = 6, 8, 2400
    counts = np.zeros((trials, n), np.int64)
    for t in range(trials):
        rng = PositionRNG(1000 + t)
        udf = KeyedBootstrap(n, 1, size, find_cutoffs(rng, positions, n, 1, size))
        occ = udf.occurrences_at(positions, rng)
        assert occ.offset.size == size
        counts[t] = np.bincount(occ.offset, minlength=n)
    pmf = [math.comb(size, k) * (1 / n) ** k * (1 - 1 / n) ** (size - k) for k in range(size + 1)]
    pooled = np.bincount(counts.ravel(), minlength=size + 1)
    assert chisq_gof(pooled, np.array(pmf) * trials * n) > ALPHA / 2
    # joint (count of row 0, count of row 1), 0..2 each and "3 or more" pooled
    joint = np.zeros((4, 4))
    expected = np.zeros((4, 4))
    for a in range(size + 1):
        for b in range(size + 1 - a):
            p = (math.factorial(size) / (math.factorial(a) * math.factorial(b)
                                         * math.factorial(size - a - b))
                 * (1 / n) ** (a + b) * (1 - 2 / n) ** (size - a - b))
            expected[min(a, 3), min(b, 3)] += p * trials
    for a, b in counts[:, :2]:
        joint[min(a, 3), min(b, 3)] += 1
    assert chisq_gof(joint.ravel(), expected.ravel()) > ALPHA / 2


def test_keyed_bootstrap_windows_and_duplicates():
    """More windows when the first holds too few arrivals; the cut between
    two arrivals of one key is refused."""
    from samplegen.udfs.arrivals import boundary, cutoff

    assert boundary([np.array([2, 1]), np.array([0, 3, 4])], 5) == (1, 1, 2)
    assert boundary([np.array([2, 1])], 4) is None
    assert boundary([np.array([2, 1])], 3) == (0, 1, 1)
    words = np.array([9, 4, 4, 7], np.uint64)
    assert cutoff(words, [1, 2, 3, 3], 2) == (4, 3)
    with pytest.raises(ParameterError, match="duplicates"):
        cutoff(np.array([4, 4], np.uint64), [3, 3], 1)
