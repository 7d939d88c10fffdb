"""Grouped samples (--groups): every row of a group on the same side or in
the same fold, exact counts of groups, balanced folds, the same bytes in any
layout and on every runner."""
import itertools
import os
import re

import numpy as np
import pytest

from samplegen.jobs import api, driver
from samplegen.udfs.builtin import HoldOut, KFold
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.rng import PositionRNG
from samplegen.udfs.strata import Strata, greedy_folds
from tests.conftest import NO_CONF, run_cli, sample_digests
from tests.stats import ALPHA, binomial_p, chisq_gof

N = 9_001
GROUP_OF = np.random.default_rng(1).integers(0, 400, size=N) * 3 + 7   # 400 group values
GROUPING = Strata.of(GROUP_OF, ranked=False)


def _groups_of(occ, sample):
    return set(GROUP_OF[occ.offset[occ.sample == sample]].tolist())


def test_greedy_folds_is_the_lightest_fold_first_rule():
    rng = np.random.default_rng(2)
    counts = rng.integers(1, 50, size=300)
    order = rng.permutation(300)
    folds = greedy_folds(counts, 7, order)
    sizes, expected = np.zeros(7, np.int64), np.empty(300, np.int64)
    for g in order:                     # the rule written out
        f = int(np.argmin(sizes))
        expected[g], sizes[f] = f, sizes[f] + counts[g]
    assert np.array_equal(folds, expected)
    totals = np.bincount(folds, weights=counts, minlength=7)
    assert totals.max() - totals.min() <= counts.max()


@pytest.mark.parametrize("balanced", [True, False])
def test_folds_never_split_a_group(balanced):
    occ = KFold(N, 6, balanced=balanced, groups="g", grouping=GROUPING)(0, N, PositionRNG(3))
    assert np.array_equal(np.sort(occ.offset), np.arange(N))
    seen = [_groups_of(occ, f) for f in range(6)]
    assert all(a.isdisjoint(b) for a, b in itertools.combinations(seen, 2))
    assert set().union(*seen) == set(GROUP_OF.tolist())
    sizes = np.bincount(occ.sample, minlength=6)
    if balanced:
        assert sizes.max() - sizes.min() <= GROUPING.counts.max()


@pytest.mark.parametrize("exact", [True, False])
def test_hold_out_keeps_groups_on_one_side(exact):
    udf = HoldOut(N, 0.75, repeats=2, fraction=0.9, exact=exact, groups="g", grouping=GROUPING)
    occ = udf(0, N, PositionRNG(4))
    for w in range(2):
        train, test = _groups_of(occ, 2 * w), _groups_of(occ, 2 * w + 1)
        assert train.isdisjoint(test)
        if exact:       # 360 of the 400 groups kept, 270 of them to train
            assert (len(train), len(test)) == (270, 90)
    rows = occ.offset[occ.sample == 0]
    assert all(np.count_nonzero(GROUP_OF == g) == np.count_nonzero(GROUP_OF[rows] == g)
               for g in _groups_of(occ, 0))


def test_any_blocking_gives_the_same_occurrences():
    def rows(occ, shift=0):
        table = np.stack([occ.offset + shift, occ.sample, occ.relpos.view(np.int64)])
        return table[:, np.lexsort(table[::-1])]
    for make in (lambda: KFold(N, 4, groups="g", grouping=GROUPING),
                 lambda: HoldOut(N, 0.6, groups="g", grouping=GROUPING)):
        whole = rows(make()(0, N, PositionRNG(5)))
        cuts = [0, 13, 1000, 4444, N]
        joined = np.concatenate([rows(make()(a, b, PositionRNG(5)), a)
                                 for a, b in zip(cuts[:-1], cuts[1:])], axis=1)
        assert np.array_equal(joined[:, np.lexsort(joined[::-1])], whole)


def test_every_set_of_training_groups_is_equally_likely():
    """5 groups of 1-3 rows, ratio 0.6: 3 training groups, C(5, 3) = 10
    sets, over 2,000 seeds (chi-square)."""
    groups = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4])
    grouping, seeds = Strata.of(groups, ranked=False), 2_000
    index = {frozenset(c): i for i, c in enumerate(itertools.combinations(range(5), 3))}
    seen = np.zeros(len(index))
    for seed in range(seeds):
        occ = HoldOut(9, 0.6, groups="g", grouping=grouping)(0, 9, PositionRNG(seed))
        seen[index[frozenset(groups[occ.offset[occ.sample == 0]].tolist())]] += 1
    assert chisq_gof(seen, np.full(len(index), seeds / len(index))) > ALPHA


def test_each_group_trains_with_probability_ratio_under_coins():
    groups = np.repeat(np.arange(12), 3)
    grouping, seeds = Strata.of(groups, ranked=False), 800
    hits = np.zeros(12)
    for seed in range(seeds):
        occ = HoldOut(36, 0.3, exact=False, groups="g", grouping=grouping)(0, 36,
                                                                            PositionRNG(seed))
        hits[sorted(set(groups[occ.offset[occ.sample == 0]].tolist()))] += 1
    assert min(binomial_p(int(h), seeds, 0.3) for h in hits) > ALPHA / 12


def test_impossible_requests_are_refused():
    few = Strata.of(np.array([1, 1, 2, 2, 3]), ranked=False)
    with pytest.raises(ParameterError, match="4 folds of whole groups need at least 4 groups, "
                                             "got 3"):
        KFold(5, 4, groups="g", grouping=few)
    with pytest.raises(ParameterError, match="either stratified or grouped"):
        KFold(5, 2, stratify="y", strata=Strata.of(np.array([0, 1, 0, 1, 0])), groups="g",
              grouping=few)
    with pytest.raises(ParameterError, match="leaves the test set empty"):
        HoldOut(5, 0.9, groups="g", grouping=few)


def test_scikit_learn_group_splitters():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import GridSearchCV, check_cv, cross_val_score

    from samplegen.model_selection import GroupKFold, GroupShuffleSplit
    rng = np.random.default_rng(6)
    X = rng.normal(size=(800, 3))
    y = (X[:, 0] > 0).astype(int)
    groups = rng.integers(0, 60, size=800)
    cv = GroupKFold(4, seed=2)
    assert check_cv(cv, y, classifier=True) is cv
    for train, test in cv.split(X, y, groups):
        assert set(groups[train]).isdisjoint(groups[test]) and train.size + test.size == 800
    assert cross_val_score(LogisticRegression(), X, y, groups=groups, cv=cv).mean() > 0.8
    search = GridSearchCV(LogisticRegression(), {"C": [0.1, 1.0]},
                          cv=GroupShuffleSplit(3, test_size=0.25, seed=1))
    search.fit(X, y, groups=groups)
    for train, test in GroupShuffleSplit(3, test_size=0.25, seed=1).split(X, y, groups):
        assert len(set(groups[test])) == 15 and len(set(groups[train])) == 45
        assert set(groups[train]).isdisjoint(groups[test])
    with pytest.raises(ParameterError, match="pass groups to split"):
        list(GroupKFold(3).split(X, y))


def test_the_api_groups_by_its_groups_or_groups_of_its_own():
    a = api.kfold(N, 5, seed=3, by_groups=True, groups=GROUP_OF)
    b = api.kfold(N, 5, seed=3, by_groups=list(GROUP_OF))
    for name in a.names:
        assert np.array_equal(a.indices(name), b.indices(name))
    assert a.groups("test-0").size == a.indices("test-0").size
    with pytest.raises(ParameterError, match="pass groups"):
        api.holdout(N, 0.5, seed=1, by_groups=True)


# ---------------------------------------------------------------------------
# the jobs
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def grouped(tmp_path_factory):
    """A matrix whose column 5 holds 120 group values (several row blocks)."""
    base = tmp_path_factory.mktemp("grouped")
    X = np.random.default_rng(7).normal(size=(1_100, 9))
    X[:, 5] = np.random.default_rng(8).integers(0, 120, size=1_100) * 0.5
    np.save(base / "x.npy", X)
    driver.import_file(str(base / "x.npy"), str(base / "m"), 100)
    return X, str(base / "m")


CASES = [("kfold", {"k": 4, "groups": "5"}), ("kfold", {"k": 3, "naive": True, "groups": "5"}),
         ("holdout", {"ratio": 0.7, "repeats": 2, "groups": "5"}),
         ("holdout", {"ratio": 0.7, "exact": False, "groups": "5"})]


def _run(src, dest, udf, params, runner="embedded", **options):
    driver.generate(src, dest, udf, params, 9, runner=runner, options=dict(NO_CONF, **options))
    return dest


@pytest.mark.parametrize("udf,params", CASES)
def test_jobs_write_what_the_api_computes(tmp_path, grouped, udf, params):
    X, src = grouped
    dest = _run(src, str(tmp_path / "run"), udf, params)
    args = {k: v for k, v in params.items() if k != "groups"}
    first = args.pop("k" if udf == "kfold" else "ratio")
    if udf == "kfold":
        args["block_size"] = 100
    expected = getattr(api, udf)(X, first, seed=9, by_groups=X[:, 5], **args)
    for name in expected.names:
        ids, values = driver.open_sample(dest, name).to_numpy()
        assert np.array_equal(ids, expected.indices(name)) and np.array_equal(values, X[ids])
    assert not [f for f in os.listdir(dest) if f.startswith("_groups")]


@pytest.mark.mrjob
@pytest.mark.parametrize("case", [0, 1, 2], ids=["kfold-params0", "kfold-params1",
                                                  "holdout-params2"])
def test_same_bytes_on_the_embedded_and_mapreduce_runners(tmp_path, grouped, case):
    """The local runner with two tasks of each kind for the first case (the
    groups' rows split over two map tasks and two reducers), one for the
    others (each task a process of its own, about as long as the run's own
    work; the task count is tests/test_mrjob.py's every-runner test's
    subject)."""
    udf, params = CASES[case]
    runs = [sample_digests(_run(grouped[1], str(tmp_path / f"{runner}{cores}"), udf, params,
                                runner, num_cores=cores))
            for runner, cores in (("embedded", 2), ("inline", 1), ("local", 2 if case == 0 else 1))]
    assert runs[0] and runs[0] == runs[1] == runs[2]


@pytest.mark.spark
def test_same_bytes_on_spark(spark, tmp_path, grouped):
    for i, (udf, params) in enumerate(CASES[:3]):
        ref = sample_digests(_run(grouped[1], str(tmp_path / f"e{i}"), udf, params))
        assert sample_digests(_run(grouped[1], str(tmp_path / f"s{i}"), udf, params,
                                   "spark")) == ref, (udf, params)


def test_the_command_line_groups_and_refuses_what_it_cannot(tmp_path, capsys, grouped):
    code, _, err = run_cli(capsys, "kfold", grouped[1], tmp_path / "kf", "--k", 3, "--groups",
                           5, "--seed", 1, "-q")
    assert code == 0, err
    for argv, message in [
            (["--groups", "12"], "column 12 is outside the matrix's 9 columns"),
            (["--groups", "0", "--k", "5000"], "k must be <= the number of rows"),
            (["--groups", "5", "--stratify", "5"], "either stratified or grouped")]:
        dest = tmp_path / "bad"
        code, out, err = run_cli(capsys, "kfold", grouped[1], dest, "--k", 3, "--seed", 1,
                                 *argv)
        assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
        assert re.search(message, err), err
        assert not dest.exists()
