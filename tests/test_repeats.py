"""Repeated k-fold (--repeats): R independent sets of k folds, each
training set composed of the other folds of its own repeat, the same bytes
on every runner."""
import numpy as np
import pytest

from samplegen.jobs import api, driver
from samplegen.udfs.builtin import KFold
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.rng import PositionRNG
from samplegen.udfs.strata import Strata
from tests.conftest import NO_CONF, make, sample_digests

N = 2_003


@pytest.mark.parametrize("params", [{}, {"balanced": False}, {"naive": True}])
def test_each_repeat_is_a_k_fold_split_and_the_first_is_plain_k_fold(params):
    s = api.kfold(N, 4, seed=3, repeats=3, **params)
    plain = api.kfold(N, 4, seed=3, **params)
    assert len(s.names) == 2 * 12
    for r in range(3):
        tests = [s.indices(f"test-{r * 4 + i}") for i in range(4)]
        assert np.array_equal(np.sort(np.concatenate(tests)), np.arange(N))
        for i in range(4):
            j = r * 4 + i
            train = s.indices(f"train-{j}")
            assert np.array_equal(np.sort(train), np.setdiff1d(np.arange(N), tests[i]))
            if r == 0:
                assert np.array_equal(train, plain.indices(f"train-{i}"))
                assert np.array_equal(tests[i], plain.indices(f"test-{i}"))
        if params.get("balanced", True):
            sizes = [t.size for t in tests]
            assert max(sizes) - min(sizes) <= 1
    # repeats are independent splits: two rows share a fold in repeat 1 about 1/4 of the time
    fold = [np.empty(N, np.int64) for _ in range(2)]
    for r in range(2):
        for i in range(4):
            fold[r][s.indices(f"test-{r * 4 + i}")] = i
    same = np.mean(fold[1][fold[0] == 0] == 0)
    assert abs(same - 0.25) < 0.06


def test_repeats_combine_with_stratification_and_groups():
    y = np.arange(N) % 3
    s = api.kfold(N, 5, seed=4, repeats=2, stratify=y)
    for j in range(10):
        counts = np.bincount(y[s.indices(f"test-{j}")], minlength=3)
        assert np.all(np.abs(counts - np.bincount(y) / 5) < 1)
    groups = np.arange(N) // 10
    g = api.kfold(N, 4, seed=4, repeats=2, by_groups=groups)
    for j in range(8):
        test = set(groups[g.indices(f"test-{j}")].tolist())
        assert test.isdisjoint(groups[g.indices(f"train-{j}")].tolist())
    with pytest.raises(ParameterError, match="repeats"):
        KFold(N, 3, repeats=0)
    occ = KFold(N, 3, repeats=2, stratify="y", strata=Strata.of(y))(0, N, PositionRNG(1))
    assert np.bincount(occ.sample).size == 6


def test_scikit_learn_repeated_splitters():
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import check_cv, cross_val_score

    from samplegen.model_selection import RepeatedKFold, RepeatedStratifiedKFold
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 3))
    y = (X[:, 0] > 0).astype(int)
    cv = RepeatedStratifiedKFold(n_splits=4, n_repeats=3, random_state=2)
    assert check_cv(cv, y, classifier=True) is cv and cv.get_n_splits() == 12
    assert cross_val_score(LogisticRegression(), X, y, cv=cv).shape == (12,)
    splits = list(RepeatedKFold(n_splits=4, n_repeats=2, seed=2).split(X))
    assert len(splits) == 8 and not np.array_equal(splits[0][1], splits[4][1])


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    base = tmp_path_factory.mktemp("repeats")
    return {"dense": make(base, "d", rows=450, cols=70, block_size=64, seed=2),
            "sparse": make(base, "s", rows=300, cols=20, block_size=32, density=0.2, seed=3)}


CASES = [{"k": 3, "repeats": 2}, {"k": 3, "repeats": 2, "naive": True},
         {"k": 4, "repeats": 2, "balanced": False}]


def _run(src, dest, params, runner="embedded", **options):
    driver.generate(src, dest, "kfold", params, 6, runner=runner,
                    options=dict(NO_CONF, **options))
    return dest


@pytest.mark.parametrize("params", CASES)
def test_jobs_write_what_the_api_computes(tmp_path, matrices, params):
    dest = _run(matrices["dense"], str(tmp_path / "run"), params)
    args = dict(params)
    expected = api.kfold(450, args.pop("k"), seed=6, block_size=64, **args)
    assert sorted(s["name"] for s in driver.info(dest)["samples"]) == sorted(expected.names)
    for name in expected.names:
        ids, _ = driver.open_sample(dest, name).to_numpy()
        assert np.array_equal(ids, expected.indices(name)), name


def _local_cores(case, kind):
    """The local runner's tasks of each kind in the byte test: two for the
    first case's dense run (rows of one repeat split over two map tasks and
    two reducers), one for the others (each task a process of its own, about
    as long as the run's own work; the task count is tests/test_mrjob.py's
    every-runner test's subject)."""
    return 2 if (case, kind) == (0, "dense") else 1


@pytest.mark.mrjob
@pytest.mark.parametrize("case", [0, 1], ids=["params0", "params1"])
def test_same_bytes_on_the_embedded_and_mapreduce_runners(tmp_path, matrices, case):
    params = CASES[case]
    for kind, src in matrices.items():
        runs = [sample_digests(_run(src, str(tmp_path / f"{kind}-{runner}{cores}"), params,
                                    runner, num_cores=cores))
                for runner, cores in (("embedded", 2), ("inline", 1),
                                      ("local", _local_cores(case, kind)))]
        assert runs[0] and runs[0] == runs[1] == runs[2], kind


@pytest.mark.spark
def test_same_bytes_on_spark(spark, tmp_path, matrices):
    for i, params in enumerate(CASES[:2]):
        ref = sample_digests(_run(matrices["sparse"], str(tmp_path / f"e{i}"), params))
        assert sample_digests(_run(matrices["sparse"], str(tmp_path / f"s{i}"), params,
                                   "spark")) == ref, params
