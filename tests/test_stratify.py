"""Stratified samples (--stratify): every class in proportion, exact sizes,
uniform within each class, the same bytes in any layout and on every runner."""
import itertools
import json
import os
import re

import numpy as np
import pytest

from samplegen.jobs import api, driver
from samplegen.udfs.builtin import Bootstrap, HoldOut, KFold
from samplegen.udfs.errors import InputError, ParameterError
from samplegen.udfs.rng import PositionRNG
from samplegen.udfs.strata import TABLE_ROWS, Strata, proportional, round_robin
from tests.conftest import NO_CONF, run_cli, sample_digests
from tests.stats import ALPHA, binomial_p, chisq_gof


def _classes(n, shares, seed=0):
    return np.random.default_rng(seed).choice(len(shares), size=n, p=shares)


# ---------------------------------------------------------------------------
# the strata and the shares
# ---------------------------------------------------------------------------
def test_strata_count_and_rank_any_range_as_a_full_scan_does():
    codes = _classes(3 * TABLE_ROWS + 123, [0.5, 0.3, 0.15, 0.05], seed=1)
    strata = Strata.of(codes)
    assert strata.counts.tolist() == np.bincount(codes).tolist()
    rng = np.random.default_rng(2)
    for start, stop in [(0, 10), (TABLE_ROWS - 5, TABLE_ROWS + 5), (TABLE_ROWS, 2 * TABLE_ROWS),
                        *(sorted(rng.integers(0, codes.size, 2)) for _ in range(20))]:
        assert strata.before(start).tolist() == np.bincount(codes[:start], minlength=4).tolist()
        seen = np.zeros(stop - start, bool)
        for c, offsets, rank in strata.ranges(start, stop):
            assert np.all(codes[start + offsets] == c) and np.all(np.diff(offsets) > 0)
            assert rank == int((codes[:start] == c).sum())
            seen[offsets] = True
        assert seen.all()


def test_strata_of_strings_and_refusals():
    strata = Strata.of(np.array(["b", "a", "b", "c"]))
    assert strata.classes == ["a", "b", "c"] and strata.counts.tolist() == [1, 2, 1]
    with pytest.raises(ParameterError, match="NaN"):
        Strata.of(np.array([1.0, np.nan]))
    with pytest.raises(ParameterError, match="one value per row"):
        Strata.of(np.zeros((3, 2)))


@pytest.mark.parametrize("total, counts", [(10, [5, 3, 2]), (7, [1, 1, 1, 1, 1, 1, 1, 1, 1]),
                                           (1000, [333, 333, 334]), (3, [10, 1]),
                                           (12_345, [9_999, 17, 1_000_000, 3])])
def test_proportional_shares_add_up_and_each_is_within_one_of_its_quota(total, counts):
    share = proportional(total, counts)
    quota = total * np.array(counts) / sum(counts)
    assert share.sum() == total and np.all(np.abs(share - quota) < 1)


@pytest.mark.parametrize("counts, k", [([10, 7, 3], 3), ([5, 5], 5), ([1000, 1, 57], 10)])
def test_round_robin_is_dealing_the_rows_sorted_by_class(counts, k):
    dealt = np.arange(sum(counts)) % k
    labels = np.repeat(np.arange(len(counts)), counts)
    expected = [[int(((labels == c) & (dealt == f)).sum()) for f in range(k)]
                for c in range(len(counts))]
    assert round_robin(counts, k).tolist() == expected


# ---------------------------------------------------------------------------
# the UDFs
# ---------------------------------------------------------------------------
N, SHARES = 10_007, [0.62, 0.25, 0.1, 0.03]
CODES = _classes(N, SHARES, seed=3)
STRATA = Strata.of(CODES)

UDFS = {
    "holdout": lambda: HoldOut(N, 0.8, repeats=2, stratify="y", strata=STRATA),
    "holdout-fraction": lambda: HoldOut(N, 0.7, fraction=0.5, stratify="y", strata=STRATA),
    "kfold": lambda: KFold(N, 7, stratify="y", strata=STRATA),
    "kfold-naive": lambda: KFold(N, 3, naive=True, stratify="y", strata=STRATA),
    "bootstrap": lambda: Bootstrap(N, 2, size=5_000, oob=True, stratify="y", strata=STRATA),
}


def _per_class(occ):
    """rows per (sample, class)."""
    return {int(s): np.bincount(CODES[occ.offset[occ.sample == s]], minlength=4)
            for s in np.unique(occ.sample)}


def test_hold_out_sides_hold_each_class_in_proportion_with_exact_sizes():
    udf = UDFS["holdout"]()
    per = _per_class(udf(0, N, PositionRNG(5)))
    train, test = round(0.8 * N), N - round(0.8 * N)
    for w in range(2):
        assert per[2 * w].sum() == train and per[2 * w + 1].sum() == test
        assert np.all(np.abs(per[2 * w] - train * STRATA.counts / N) < 1)
        assert np.all(np.abs(per[2 * w + 1] - test * STRATA.counts / N) < 1)
    assert not np.array_equal(udf(0, N, PositionRNG(5)).sample, udf(0, N, PositionRNG(6)).sample)
    part = _per_class(UDFS["holdout-fraction"]()(0, N, PositionRNG(5)))
    kept = round(0.5 * N)
    assert part[0].sum() == round(0.7 * kept) and part[1].sum() == kept - round(0.7 * kept)
    assert np.all(np.abs(part[0] - round(0.7 * kept) * STRATA.counts / N) < 1)
    assert np.all(np.abs(part[1] - (kept - round(0.7 * kept)) * STRATA.counts / N) < 2)


def test_folds_hold_each_class_within_one_row_and_sizes_within_one():
    occ = KFold(N, 7, stratify="y", strata=STRATA)(0, N, PositionRNG(5))
    assert np.array_equal(np.sort(occ.offset), np.arange(N))       # every row once
    per = _per_class(occ)
    sizes = [per[f].sum() for f in range(7)]
    assert max(sizes) - min(sizes) <= 1
    for f in range(7):
        assert np.all(np.abs(per[f] - STRATA.counts / 7) < 1)


def test_bags_hold_each_class_in_proportion_and_out_of_bag_is_the_rest():
    udf = UDFS["bootstrap"]()
    occ = udf(0, N, PositionRNG(5))
    per = _per_class(occ)
    for i in range(2):
        assert per[i].sum() == 5_000
        assert np.all(np.abs(per[i] - 5_000 * STRATA.counts / N) < 1)
        drawn = set(occ.offset[occ.sample == i].tolist())
        oob = occ.offset[occ.sample == 2 + i]
        assert set(oob.tolist()) == set(range(N)) - drawn and oob.size == len(set(oob.tolist()))


@pytest.mark.parametrize("name", sorted(UDFS))
def test_any_blocking_gives_the_same_occurrences(name):
    whole = UDFS[name]()(0, N, PositionRNG(9))
    cuts = [0, 1, 999, 1000, 4097, 7777, N]
    pieces = [UDFS[name]()(a, b, PositionRNG(9)) for a, b in zip(cuts[:-1], cuts[1:])]

    def rows(occ, shift=0):
        table = np.stack([occ.offset + shift, occ.sample, occ.relpos.view(np.int64)])
        return table[:, np.lexsort(table[::-1])]
    joined = np.concatenate([rows(p, a) for p, a in zip(pieces, cuts)], axis=1)
    assert np.array_equal(joined[:, np.lexsort(joined[::-1])], rows(whole))


def test_each_row_is_in_training_with_its_class_share():
    """Two classes of 9 and 4 rows, ratio 0.6: 8 training rows, 5.5 + 2.5
    by quota, so 6 + 2 (ties go to the lower class).  Each row's training
    frequency over 1,500 seeds against 6/9 or 2/4, Bonferroni over the rows."""
    labels = np.array([0] * 9 + [1] * 4)
    strata, seeds = Strata.of(labels), 1_500
    hits = np.zeros(labels.size)
    for seed in range(seeds):
        occ = HoldOut(labels.size, 0.6, stratify="y", strata=strata)(0, labels.size,
                                                                     PositionRNG(seed))
        hits[occ.offset[occ.sample == 0]] += 1
    for row, h in enumerate(hits):
        p = 6 / 9 if labels[row] == 0 else 2 / 4
        assert binomial_p(int(h), seeds, p) > ALPHA / labels.size, (row, h)


@pytest.mark.slow
def test_every_stratified_split_is_equally_likely():
    """Classes of 4 and 3 rows, ratio 4/7: 2 + 2 training rows, so 6 x 3 =
    18 possible training sets, over 3,600 seeds (chi-square)."""
    labels = np.array([0, 1, 0, 1, 0, 1, 0])
    strata, seeds = Strata.of(labels), 3_600
    zeros, ones = np.flatnonzero(labels == 0), np.flatnonzero(labels == 1)
    index = {frozenset(a) | frozenset(b): i for i, (a, b) in enumerate(
        itertools.product(itertools.combinations(zeros, 2), itertools.combinations(ones, 2)))}
    seen = np.zeros(len(index))
    for seed in range(seeds):
        occ = HoldOut(7, 4 / 7, stratify="y", strata=strata)(0, 7, PositionRNG(seed))
        seen[index[frozenset(occ.offset[occ.sample == 0].tolist())]] += 1
    assert chisq_gof(seen, np.full(len(index), seeds / len(index))) > ALPHA


def test_impossible_or_unusable_labels_are_refused():
    with pytest.raises(ParameterError, match="class 3 has 318 rows.*at least 400 per class"):
        KFold(N, 400, stratify="y", strata=STRATA)
    with pytest.raises(ParameterError, match="needs the class of every row"):
        HoldOut(N, 0.5, stratify="y")
    with pytest.raises(ParameterError, match="has 5 rows, the data 10007"):
        Bootstrap(N, 1, stratify="y", strata=Strata.of(np.arange(5)))
    with pytest.raises(ParameterError, match="must lie in"):
        HoldOut(N, 0.5, stratify="y", strata=STRATA).occurrences_at(np.array([0, N]),
                                                                      PositionRNG(1))
    with pytest.raises(ParameterError, match="given twice"):
        HoldOut(N, 0.5, stratify="y", strata=STRATA).occurrences_at(np.array([3, 3]),
                                                                      PositionRNG(1))


@pytest.mark.parametrize("make", [
    lambda: HoldOut(N, 0.7, repeats=2, stratify="y", strata=STRATA),
    lambda: KFold(N, 4, stratify="y", strata=STRATA),
    lambda: Bootstrap(N, 3, stratify="y", strata=STRATA),
    lambda: KFold(N, 4, groups="g", grouping=Strata.of(np.arange(N) // 13, ranked=False)),
    lambda: HoldOut(N, 0.6, groups="g", grouping=Strata.of(np.arange(N) // 13, ranked=False)),
], ids=["holdout", "kfold", "bootstrap", "grouped kfold", "grouped holdout"])
def test_rows_known_by_their_ids_in_any_order_get_the_ranges_decisions(make):
    """Rows given by id in any order and any subset (a keyed task's rows: a
    Hive row table, a DataFrame keyed by row id) get exactly the occurrences
    a run over the whole range gives them, far apart or close together."""
    udf = make()
    rng = PositionRNG(7)
    whole = udf(0, N, rng)
    want = {}
    for row, s, rel in zip(whole.offset.tolist(), whole.sample.tolist(), whole.relpos.tolist()):
        want.setdefault(row, []).append((s, rel))
    pick = np.random.default_rng(3)
    for ids in (pick.permutation(N), pick.choice(N, 50, replace=False),
                np.array([N - 1, 0, 5000]), np.empty(0, np.int64)):
        occ = udf.occurrences_at(ids, rng)
        got = {}
        for o, s, rel in zip(occ.offset.tolist(), occ.sample.tolist(), occ.relpos.tolist()):
            got.setdefault(int(ids[o]), []).append((s, rel))
        assert {r: sorted(v) for r, v in got.items()} == \
            {int(r): sorted(want[r]) for r in ids.tolist() if r in want}


# ---------------------------------------------------------------------------
# the API and scikit-learn's splitters
# ---------------------------------------------------------------------------
def test_the_api_stratifies_by_y_or_by_labels_of_its_own():
    y = np.where(CODES == 0, "cat", np.where(CODES == 1, "dog", "fox"))
    X = np.arange(N)
    by_y = api.kfold(X, 5, seed=2, stratify=True, y=y)
    by_labels = api.kfold(X, 5, seed=2, stratify=list(y))
    for name in by_y.names:
        assert np.array_equal(by_y.indices(name), by_labels.indices(name))
    counts = {c: int((y == c).sum()) for c in ("cat", "dog", "fox")}
    for f in range(5):
        fold = by_y.y(f"test-{f}")
        assert all(abs((fold == c).sum() - n / 5) < 1 for c, n in counts.items())
    with pytest.raises(ParameterError, match="pass y"):
        api.holdout(X, 0.5, seed=1, stratify=True)
    with pytest.raises(ParameterError, match="stratify has 3 rows but X has"):
        api.bootstrap(X, 2, seed=1, stratify=[0, 1, 0])


def test_stratified_splitters_work_inside_scikit_learn():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, check_cv, cross_val_score

    from samplegen.model_selection import StratifiedKFold, StratifiedShuffleSplit, train_test_split
    rng = np.random.default_rng(4)
    y = _classes(600, [0.7, 0.2, 0.1], seed=5)
    X = rng.normal(size=(600, 3)) + y[:, None]
    cv = StratifiedKFold(5, random_state=3)
    assert check_cv(cv, y, classifier=True) is cv
    splits = list(cv.split(X, y))
    assert len(splits) == cv.get_n_splits() == 5
    assert np.array_equal(np.sort(np.concatenate([te for _, te in splits])), np.arange(600))
    for train, test in splits:
        assert np.all(np.abs(np.bincount(y[test]) - np.bincount(y) / 5) < 1)
        assert np.intersect1d(train, test).size == 0 and train.size + test.size == 600
    assert cross_val_score(LogisticRegression(), X, y, cv=cv).mean() > 0.6
    search = GridSearchCV(LogisticRegression(), {"C": [0.1, 1.0]},
                          cv=StratifiedShuffleSplit(3, test_size=0.25, seed=1)).fit(X, y)
    assert search.best_params_["C"] in (0.1, 1.0)
    for train, test in StratifiedShuffleSplit(2, test_size=0.25, seed=1).split(X, y):
        assert test.size == 150 and train.size == 450
        assert np.all(np.abs(np.bincount(y[test]) - 150 * np.bincount(y) / 600) < 1)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, stratify=y, seed=7)
    assert len(y_test) == 120 and np.all(np.abs(np.bincount(y_test) - np.bincount(y) / 5) < 1)
    with pytest.raises(ParameterError, match="pass y"):
        list(StratifiedKFold(3).split(X, None))


# ---------------------------------------------------------------------------
# the jobs: label files, every runner, the command line
# ---------------------------------------------------------------------------
ROWS, COLS, BLOCK = 1_203, 70, 64     # the label in the second column block


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A dense matrix whose column 66 holds classes, imported from .npy
    (no names: stratify by number), and the same rows from CSV with names
    and --label (classes recorded at import)."""
    base = tmp_path_factory.mktemp("labelled")
    rng = np.random.default_rng(8)
    X = rng.normal(size=(ROWS, COLS))
    X[:, 66] = _classes(ROWS, [0.5, 0.3, 0.2], seed=9) * 10.0
    np.save(base / "x.npy", X)
    names = [f"c{j}" for j in range(COLS)]
    names[66] = "y"
    np.savetxt(base / "x.csv", X, delimiter=",", header=",".join(names), comments="")
    driver.import_file(str(base / "x.npy"), str(base / "plain"), BLOCK)
    driver.import_file(str(base / "x.csv"), str(base / "named"), BLOCK, label="y")
    return {"X": X, "plain": str(base / "plain"), "named": str(base / "named")}


CASES = [("holdout", {"ratio": 0.75, "repeats": 2, "stratify": "66"}),
         ("kfold", {"k": 4, "stratify": "66"}),
         ("bootstrap", {"samples": 2, "oob": True, "stratify": "66"})]


def _run(src, dest, udf, params, runner="embedded", **options):
    driver.generate(src, dest, udf, params, 5, runner=runner, options=dict(NO_CONF, **options))
    return dest


@pytest.mark.parametrize("udf,params", CASES, ids=[c[0] for c in CASES])
def test_jobs_write_what_the_api_computes(tmp_path, labelled, udf, params):
    dest = _run(labelled["plain"], str(tmp_path / "run"), udf, params)
    y = labelled["X"][:, 66]
    expected = getattr(api, udf)(ROWS, *(params.get(p) for p in (
        {"holdout": ["ratio"], "kfold": ["k"], "bootstrap": ["samples"]}[udf])), seed=5,
        **{k: v for k, v in params.items() if k not in ("ratio", "k", "samples", "stratify")},
        stratify=y, **({"block_size": BLOCK} if udf == "kfold" else {}))
    for name in expected.names:
        ids, values = driver.open_sample(dest, name).to_numpy()
        assert np.array_equal(ids, expected.indices(name)), name
        assert np.array_equal(values, labelled["X"][ids])
    assert not [f for f in os.listdir(dest) if f.startswith("_strata")]
    manifest = json.load(open(os.path.join(dest, "_manifest.json")))
    assert manifest["params"]["stratify"] == "66"


def test_classes_recorded_at_import_give_the_same_samples(tmp_path, labelled):
    assert os.path.exists(os.path.join(labelled["named"], "_label.json"))
    by_number = _run(labelled["plain"], str(tmp_path / "a"), "kfold", {"k": 4, "stratify": "66"})
    by_name = _run(labelled["named"], str(tmp_path / "b"), "kfold", {"k": 4, "stratify": "y"})
    for name in sample_digests(by_number):   # the same rows (the column names differ)
        a, b = (driver.open_sample(run, name).to_numpy() for run in (by_number, by_name))
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@pytest.mark.mrjob
@pytest.mark.parametrize("case", range(len(CASES)), ids=[c[0] for c in CASES])
def test_same_bytes_on_the_embedded_and_mapreduce_runners(tmp_path, labelled, case):
    """The local runner with two tasks of each kind for the first case (each
    class's rows split over two map tasks and two reducers), one for the
    others (each task a process of its own, about as long as the run's own
    work; the task count is tests/test_mrjob.py's every-runner test's
    subject)."""
    udf, params = CASES[case]
    runs = [sample_digests(_run(labelled["plain"], str(tmp_path / f"{runner}{cores}"), udf,
                                params, runner, num_cores=cores))
            for runner, cores in (("embedded", 1), ("embedded", 2), ("inline", 1),
                                  ("local", 2 if case == 0 else 1))]
    assert runs[0] and all(run == runs[0] for run in runs[1:])


@pytest.mark.spark
def test_same_bytes_on_spark(spark, tmp_path, labelled):
    for udf, params in CASES:
        ref = sample_digests(_run(labelled["named"], str(tmp_path / f"e-{udf}"), udf, params))
        got = sample_digests(_run(labelled["named"], str(tmp_path / f"s-{udf}"), udf,
                                  dict(params, stratify="y"), "spark"))
        assert got == ref, udf


def test_the_command_line_stratifies_and_refuses_what_it_cannot(tmp_path, capsys, labelled):
    code, _, err = run_cli(capsys, "kfold", labelled["named"], tmp_path / "kf", "--k", 3,
                           "--stratify", "y", "--seed", 1, "-q")
    assert code == 0, err
    for argv, message in [
            (["--stratify", "nope"], "no column 'nope'; its columns are c0"),
            (["--stratify", "3"], "label '3' has 1203 distinct values"),
            (["--stratify", "y", "--k", "600"],
             "class 20.0 has 2.. rows; a stratified 600-fold split needs at least 600 per class")]:
        dest = tmp_path / "bad"
        args = ["kfold", labelled["named"], dest, "--k", 3, "--seed", 1, *argv]
        code, out, err = run_cli(capsys, *args)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert re.search(message, err), err
        assert not dest.exists()
    with pytest.raises(InputError, match="is inf at row 1: every row needs a class"):
        from samplegen.jobs.strata import strata_of_values
        strata_of_values(np.array([1.0, np.inf, np.nan]), "y")
    with pytest.raises(InputError, match="is nan at row 2"):
        from samplegen.jobs.strata import strata_of_values
        strata_of_values(np.array([1.0, 2.0, np.nan]), "y")


def test_classes_given_by_row_id_in_any_order():
    """A keyed table's classes come with their rows' ids in any order: the
    Strata is the one of the values in row order; a NULL names its row."""
    from samplegen.jobs.strata import strata_by_row_id
    labels = np.array(["b", "a", "c", "a", "b", "a"])
    order = np.array([4, 0, 5, 2, 1, 3])
    got = strata_by_row_id(order, labels[order], "y")
    want = Strata.of(labels)
    assert got.classes == want.classes and got.counts.tolist() == want.counts.tolist()
    assert got.codes(0, 6).tolist() == want.codes(0, 6).tolist()
    with pytest.raises(InputError, match="label 'y' is NULL at row 0"):
        strata_by_row_id([3, 2, 0], np.array(["a", None, None], dtype=object), "y")
    with pytest.raises(InputError, match="group column 'g' is NULL at row 1"):
        strata_by_row_id([0, 1], [5, 7], "g", ranked=False, nulls=np.array([False, True]))
