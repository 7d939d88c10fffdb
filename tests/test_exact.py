"""Exact-size labellings (udfs.exact): exact counts, any layout, uniform."""
import itertools
import math
import os

import numpy as np
import pytest

from samplegen.udfs import splittree
from samplegen.udfs.builtin import HoldOut, KFold
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.exact import LabelTree, balanced_sizes, holdout_counts
from samplegen.udfs.rng import PositionRNG
from tests.stats import ALPHA, binomial_p, chisq_gof


@pytest.mark.parametrize("n, counts", [(1, [1]), (7, [3, 4]), (1024, [1, 1023]),
                                       (1025, [600, 425]), (5000, [1000, 0, 4000]),
                                       (100_003, [10_001] * 3 + [10_000] * 7)])
def test_every_label_has_exactly_its_count(n, counts):
    labels = LabelTree(PositionRNG(3), n, counts).labels(0, n)
    assert labels.shape == (n,)
    assert np.bincount(labels, minlength=len(counts)).tolist() == counts


def test_any_ranges_and_any_order_give_the_same_labels():
    n, counts = 9_000, [4_000, 3_000, 2_000]
    whole = LabelTree(PositionRNG(11), n, counts).labels(0, n)
    rng = np.random.default_rng(0)
    for _ in range(5):  # a fresh tree per layout: nothing carried over
        cuts = np.sort(rng.choice(np.arange(1, n), size=12, replace=False))
        tree = LabelTree(PositionRNG(11), n, counts)
        pieces = [tree.labels(a, b) for a, b in zip([0, *cuts], [*cuts, n])]
        assert np.array_equal(np.concatenate(pieces), whole)
    positions = rng.permutation(n)[:2_500]
    positions = np.concatenate([positions, positions[:10]])  # repeats too
    at = LabelTree(PositionRNG(11), n, counts).labels_at(positions)
    assert np.array_equal(at, whole[positions])


def test_labellings_differ_by_seed_labelling_and_part():
    n, counts = 3_000, [1_500, 1_500]
    base = LabelTree(PositionRNG(1), n, counts).labels(0, n)
    for other in (LabelTree(PositionRNG(2), n, counts), LabelTree(PositionRNG(1), n, counts, 1),
                  LabelTree(PositionRNG(1), n, counts, 0, 1)):
        # two independent uniform labellings agree on about half the rows
        agree = int((other.labels(0, n) == base).sum())
        assert abs(agree - n / 2) < 5 * math.sqrt(n / 4)


@pytest.mark.slow
@pytest.mark.parametrize("chunk_rows", [1, 2, 1024])
def test_every_labelling_is_equally_likely(monkeypatch, chunk_rows):
    """All 90 labellings of 6 rows with counts (2, 2, 2), over 9,000 seeds:
    the chunk-level permutation alone (1,024), and the tree's hypergeometric
    splits down to single rows (1) or pairs (2)."""
    monkeypatch.setattr(splittree, "CHUNK_ROWS", chunk_rows)
    n, counts, seeds = 6, [2, 2, 2], 9_000
    index = {}
    for labels in set(itertools.permutations([0, 0, 1, 1, 2, 2])):
        index[labels] = len(index)
    assert len(index) == math.factorial(6) // 8
    seen = np.zeros(len(index))
    for seed in range(seeds):
        seen[index[tuple(LabelTree(PositionRNG(seed), n, counts).labels(0, n).tolist())]] += 1
    assert chisq_gof(seen, np.full(len(index), seeds / len(index))) > ALPHA / 3


def test_each_row_is_labelled_with_probability_count_over_rows():
    """Rows across three chunks and the tree above them: each row's label-1
    frequency over 400 seeds against 0.2, Bonferroni over the rows."""
    n, counts, seeds = 3_000, [2_400, 600], 400
    hits = np.zeros(n)
    for seed in range(seeds):
        hits += LabelTree(PositionRNG(seed), n, counts).labels(0, n) == 1
    worst = min(binomial_p(int(h), seeds, 0.2) for h in hits)
    assert worst > ALPHA / n
    # and no drift along the rows: each chunk's share is 0.2 too
    for lo in range(0, n, 1024):
        share = hits[lo:lo + 1024].sum()
        rows = min(1024, n - lo)
        assert binomial_p(int(share), rows * seeds, 0.2) > ALPHA / 3


def test_bad_counts_and_ranges_are_refused():
    with pytest.raises(ParameterError, match="add up"):
        LabelTree(PositionRNG(1), 10, [3, 3])
    with pytest.raises(ParameterError, match="counts"):
        LabelTree(PositionRNG(1), 10, [12, -2])
    with pytest.raises(ParameterError, match="outside"):
        LabelTree(PositionRNG(1), 10, [5, 5]).labels(5, 11)


def test_balanced_sizes_and_holdout_counts():
    assert balanced_sizes(569, 10).tolist() == [57] * 9 + [56]
    assert balanced_sizes(20, 10).tolist() == [2] * 10
    assert holdout_counts(50_000, 0.8) == [40_000, 10_000]
    assert holdout_counts(10, 0.85) == [9, 1]            # 8.5 rounds up
    assert holdout_counts(1_000, 0.8, fraction=0.1) == [80, 20, 900]
    with pytest.raises(ParameterError, match="test set empty"):
        holdout_counts(4, 0.9)
    with pytest.raises(ParameterError, match="training set empty"):
        holdout_counts(10, 0.01)


# ---------------------------------------------------------------------------
# hold-out --exact and k-fold --balanced: the UDFs, the API, the command line
# ---------------------------------------------------------------------------
def _occurrences(udf, rng, cuts):
    edges = [0, *cuts, udf.n_rows]
    parts = [udf(a, b, rng) for a, b in zip(edges[:-1], edges[1:]) if b > a]
    rows = np.concatenate([p.offset + a for p, a in zip(parts, edges)])
    sample = np.concatenate([p.sample for p in parts])
    order = np.lexsort((rows, sample))  # a canonical order: by sample, then row
    return rows[order], sample[order], np.concatenate([p.relpos for p in parts])[order]


@pytest.mark.parametrize("make_udf, sizes", [
    (lambda n: HoldOut(n, 0.8, repeats=3, exact=True), [4_000, 1_000] * 3),
    (lambda n: HoldOut(n, 0.3, fraction=0.5, exact=True), [750, 1_750]),
    (lambda n: KFold(n, 7, balanced=True), [715] * 2 + [714] * 5),
    (lambda n: KFold(n, 3, naive=True, balanced=True), [3_333, 1_667, 3_333, 1_667,
                                                         3_334, 1_666]),
])
def test_exact_udfs_have_exact_sizes_in_any_blocking_and_by_key(make_udf, sizes):
    n = 5_000
    whole = _occurrences(make_udf(n), PositionRNG(9), [])
    assert np.bincount(whole[1], minlength=len(sizes)).tolist() == sizes
    blocked = _occurrences(make_udf(n), PositionRNG(9), [1, 999, 1_024, 2_500, 4_999])
    for a, b in zip(whole, blocked):
        assert np.array_equal(a, b)
    # rows known by key (the DataFrame and row-table paths): the same decisions
    ids = np.random.default_rng(1).permutation(n)
    occ = make_udf(n).occurrences_at(ids, PositionRNG(9))
    by_key = sorted(zip(ids[occ.offset].tolist(), occ.sample.tolist(), occ.relpos.tolist()))
    assert by_key == sorted(zip(*(a.tolist() for a in whole)))


def test_exact_udfs_refuse_keys_that_are_not_row_ids():
    udf = HoldOut(100, 0.5, exact=True)
    with pytest.raises(ParameterError, match="row ids"):
        udf.occurrences_at(np.array([3, 100]), PositionRNG(1))


def test_every_row_trains_with_probability_ratio():
    """Hold-out --exact at 0.75 on 40 rows: each row's training share over
    2,000 seeds against 0.75 (Bonferroni over the rows)."""
    n, seeds = 40, 2_000
    hits = np.zeros(n)
    for seed in range(seeds):
        occ = HoldOut(n, 0.75, exact=True)(0, n, PositionRNG(seed))
        hits[occ.offset[occ.sample == 0]] += 1
    assert min(binomial_p(int(h), seeds, 0.75) for h in hits) > ALPHA / n


def test_the_api_returns_exact_sizes(tmp_path):
    import samplegen
    X = np.arange(569 * 3, dtype=float).reshape(569, 3)
    pairs = samplegen.holdout(X, 0.8, seed=3, repeats=4, exact=True)
    for w in range(4):
        assert len(pairs[f"train-{w}"]) == 455 and len(pairs[f"test-{w}"]) == 114
    folds = samplegen.kfold(X, 10, seed=3, balanced=True)
    sizes = sorted(len(folds[f"test-{i}"]) for i in range(10))
    assert sizes == [56] + [57] * 9
    assert all(len(folds[f"train-{i}"]) == 569 - len(folds[f"test-{i}"]) for i in range(10))


def test_the_command_line_writes_exact_sizes_and_refuses_impossible_ones(tmp_path, capsys):
    from samplegen.jobs import driver
    from tests.conftest import make, run_cli
    src = make(tmp_path, rows=569, cols=4, block_size=50)
    code, _, err = run_cli(capsys, "holdout", src, tmp_path / "ho", "--ratio", 0.8, "--seed", 1,
                           "--repeats", 3, "--exact", "-q")
    assert code == 0, err
    rows = {s["name"]: s["rows"] for s in driver.info(str(tmp_path / "ho"))["samples"]}
    assert rows == {f"{side}-{w}": count for w in range(3)
                    for side, count in (("train", 455), ("test", 114))}
    code, _, err = run_cli(capsys, "kfold", src, tmp_path / "kf", "--k", 10, "--seed", 1,
                           "--balanced", "-q")
    assert code == 0, err
    rows = [s["rows"] for s in driver.info(str(tmp_path / "kf"))["samples"]
            if s["name"].startswith("test-")]
    assert sorted(rows) == [56] + [57] * 9
    tiny = make(tmp_path, "tiny", rows=4, cols=2, block_size=2)
    code, out, err = run_cli(capsys, "holdout", tiny, tmp_path / "no", "--ratio", 0.9, "--seed",
                             1, "--exact")
    assert code == 2 and out == "" and len(err.splitlines()) == 1 and "test set empty" in err
    assert not os.path.exists(tmp_path / "no")


# ---------------------------------------------------------------------------
# bootstrap --oob: each bag's out-of-bag rows
# ---------------------------------------------------------------------------
def test_out_of_bag_rows_are_the_rows_each_bag_never_drew():
    from samplegen.udfs.builtin import Bootstrap
    n = 3_000
    make_udf = lambda: Bootstrap(n, 3, size=2_000, oob=True)  # noqa: E731
    rows, sample, relpos = _occurrences(make_udf(), PositionRNG(4), [])
    for i in range(3):
        bag, oob = rows[sample == i], rows[sample == 3 + i]
        assert bag.size == 2_000 and np.unique(oob).size == oob.size
        assert not set(bag.tolist()) & set(oob.tolist())
        assert set(bag.tolist()) | set(oob.tolist()) == set(range(n))
    blocked = _occurrences(make_udf(), PositionRNG(4), [7, 1_024, 1_500, 2_999])
    assert all(np.array_equal(a, b) for a, b in zip((rows, sample, relpos), blocked))
    ids = np.random.default_rng(3).permutation(n)
    occ = make_udf().occurrences_at(ids, PositionRNG(4))
    by_key = sorted(zip(ids[occ.offset].tolist(), occ.sample.tolist(), occ.relpos.tolist()))
    assert by_key == sorted(zip(rows.tolist(), sample.tolist(), relpos.tolist()))


def test_out_of_bag_size_is_binomial_occupancy():
    """The mean out-of-bag size of 200 bags of 1,000 draws from 1,000 rows
    against n q1, q1 = (1 - 1/n)^s, with the occupancy variance
    n q1 (1 - q1) + n (n - 1) (q2 - q1^2), q2 = (1 - 2/n)^s."""
    from samplegen.udfs.builtin import Bootstrap
    n = s = 1_000
    bags = 200
    occ = Bootstrap(n, bags, oob=True)(0, n, PositionRNG(21))
    sizes = np.bincount(occ.sample, minlength=2 * bags)[bags:]
    q1, q2 = (1 - 1 / n) ** s, (1 - 2 / n) ** s
    var = n * q1 * (1 - q1) + n * (n - 1) * (q2 - q1 * q1)
    z = (sizes.mean() - n * q1) / math.sqrt(var / bags)
    assert 2 * (1 - 0.5 * (1 + math.erf(abs(z) / math.sqrt(2)))) > ALPHA, z


# ---------------------------------------------------------------------------
# keyed rows: cutoffs on the coins' words (udfs.ranks)
# ---------------------------------------------------------------------------
def _keyed(udf, positions, seed):
    from samplegen.udfs.ranks import find_cutoffs
    rng = PositionRNG(seed)
    streams, ranks = udf.rank_targets()
    cutoffs = find_cutoffs(rng, positions, streams, ranks)
    return cutoffs, type(udf)(**{**_args(udf), "cutoffs": cutoffs}).occurrences_at(positions, rng)


def _args(udf):
    params = dict(udf.params())
    params["n_rows"] = udf.n_rows
    return params


def test_cutoffs_are_the_words_at_the_ranks_and_give_exact_sizes():
    from samplegen.udfs.rng import Purpose, stream
    positions = np.random.default_rng(5).choice(1 << 58, size=54_321, replace=False)
    udf = HoldOut(positions.size, 0.75, repeats=2, fraction=0.8)
    cutoffs, occ = _keyed(udf, positions, 4)
    for w in range(2):      # the brute force: sort every word
        words = np.sort(PositionRNG(4).at(stream(Purpose.HOLDOUT, w), positions)[:, 0])
        assert cutoffs[w] == [int(words[r]) for r in udf.rank_targets()[1][w]]
        assert np.bincount(occ.sample[occ.sample // 2 == w] % 2).tolist() == udf.counts[:2]
    folds = KFold(positions.size, 6, repeats=2)
    _, occ = _keyed(folds, positions, 4)
    sizes = np.bincount(occ.sample)
    assert sizes.size == 12 and sizes.max() - sizes.min() <= 1 and sizes.sum() == 2 * 54_321


@pytest.mark.slow
def test_every_keyed_split_is_equally_likely():
    """7 rows with scattered keys, 3 training rows: C(7, 3) = 35 training
    sets over 3,500 seeds (chi-square)."""
    positions = np.array([3, 10**12, 77, 2**40 + 5, 999, 123456789, 42])
    index = {frozenset(c): i for i, c in enumerate(itertools.combinations(range(7), 3))}
    seen = np.zeros(len(index))
    for seed in range(3_500):
        _, occ = _keyed(HoldOut(7, 3 / 7), positions, seed)
        seen[index[frozenset(occ.offset[occ.sample == 0].tolist())]] += 1
    assert chisq_gof(seen, np.full(len(index), 3_500 / len(index))) > ALPHA


def test_cutoffs_are_checked():
    with pytest.raises(ParameterError, match="at most 1 words"):
        HoldOut(100, 0.5, cutoffs=[[1, 2]])
    with pytest.raises(ParameterError, match="only with exact sizes"):
        HoldOut(100, 0.5, exact=False, cutoffs=[[1]])
    with pytest.raises(ParameterError, match="only with balanced folds"):
        KFold(100, 3, balanced=False, cutoffs=[[1, 2]])


def test_chunks_drawn_together_are_the_chunks_drawn_one_by_one(monkeypatch):
    """LabelTree.labels orders the chunks of a long range together
    (chunk_labels, PositionRNG.keyed_raw): the labels of each chunk alone."""
    from samplegen.udfs import exact
    from samplegen.udfs.rng import stream, word_order
    rng = PositionRNG(11)
    for n, counts in [(50_000, [30_000, 15_000, 5_000]), (9_999, [1, 9_998]),
                      (1 << 16, [40_000, 25_536])]:     # chunks of 1,024: one kernel call
        bulk = LabelTree(rng, n, counts, 3, part=2).labels(0, n)
        monkeypatch.setattr(exact, "BULK_CHUNKS", 1 << 30)
        one_by_one = LabelTree(rng, n, counts, 3, part=2)
        assert np.array_equal(bulk, one_by_one.labels(0, n))
        assert np.array_equal(bulk[123:7_777], one_by_one.labels(123, 7_777))
        monkeypatch.undo()
    words = np.random.default_rng(2).integers(0, 1 << 63, (6, 1000), dtype=np.int64).astype(
        np.uint64)
    words[1, 5] = words[1, 9]                  # a full tie
    words[2] &= np.uint64(0xFFFF0000000000FF)  # ties of the packed bits
    counts = np.array([[500, 300, 200]] * 6)
    labels = exact.chunk_labels(words, counts)
    for row in range(6):
        want = np.empty(1000, np.int64)
        want[word_order(words[row])] = np.repeat(np.arange(3), counts[row])
        assert np.array_equal(labels[row], want)
    sid = stream(3, 4, 5)
    for size in (1, 4, 1023):
        assert np.array_equal(rng.keyed_raw(sid, 7, size), rng.keyed(sid, 7).raw(size))
