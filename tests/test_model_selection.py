"""samplegen.model_selection: scikit-learn's splitter contract (check_cv,
cross_val_score, GridSearchCV, cross_validate), scikit-learn's sizes, and
exactly the samples the jobs write for the same seed."""
import os
import warnings

import numpy as np
import pytest

from samplegen.jobs import api, driver
from samplegen.model_selection import KFold, ShuffleSplit, TimeSeriesSplit, train_test_split
from samplegen.udfs.errors import ParameterError

from .conftest import NO_CONF, make

sklearn = pytest.importorskip("sklearn")  # an extra, installed by `make setup`
from sklearn import model_selection as skms  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((569, 4))
    y = (X[:, 0] + 0.5 * rng.standard_normal(569) > 0).astype(int)
    return X, y


def test_kfold_is_a_cv_splitter_for_scikit_learn(data):
    X, y = data
    cv = KFold(5, seed=3)
    assert skms.check_cv(cv) is cv and cv.get_n_splits() == 5
    scores = skms.cross_val_score(LogisticRegression(), X, y, cv=cv)
    assert scores.shape == (5,) and scores.min() > 0.7
    grid = skms.GridSearchCV(LogisticRegression(), {"C": [0.1, 1.0]}, cv=KFold(4, seed=3))
    assert grid.fit(X, y).best_params_["C"] in (0.1, 1.0)
    result = skms.cross_validate(LogisticRegression(), X, y, cv=ShuffleSplit(3, seed=1),
                                 return_indices=True)
    assert len(result["test_score"]) == 3
    assert [len(t) for t in result["indices"]["test"]] == [57] * 3


def test_kfold_folds_partition_the_rows_with_balanced_sizes(data):
    X, _ = data
    tests = []
    for train, test in KFold(10, seed=3).split(X):
        assert len(set(train.tolist()) | set(test.tolist())) == 569
        assert not set(train.tolist()) & set(test.tolist())
        tests.append(test)
    assert sorted(len(t) for t in tests) == [56] + [57] * 9
    assert sorted(np.concatenate(tests).tolist()) == list(range(569))


def test_the_splits_are_the_jobs_samples(tmp_path):
    """KFold(4, seed) and ShuffleSplit on a 300-row matrix: the rows of the
    run the kfold --balanced / holdout --exact job writes, in its order."""
    src = make(tmp_path, rows=300, cols=3, block_size=1000, seed=4)
    driver.generate(src, str(tmp_path / "kf"), "kfold", {"k": 4, "balanced": True}, 9,
                    runner="embedded", options=NO_CONF)
    run = api.read_run(str(tmp_path / "kf"))
    for i, (train, test) in enumerate(KFold(4, seed=9).split(np.zeros((300, 1)))):
        assert np.array_equal(test, run.indices(f"test-{i}"))
        assert np.array_equal(train, run.indices(f"train-{i}"))
    driver.generate(src, str(tmp_path / "ho"), "holdout",
                    {"ratio": 0.75, "repeats": 3, "fraction": 0.8, "exact": True}, 9,
                    runner="embedded", options=NO_CONF)
    run = api.read_run(str(tmp_path / "ho"))
    pairs = list(ShuffleSplit(3, train_size=180, test_size=60, seed=9).split(np.zeros(300)))
    for w, (train, test) in enumerate(pairs):
        assert np.array_equal(train, run.indices(f"train-{w}"))
        assert np.array_equal(test, run.indices(f"test-{w}"))


@pytest.mark.parametrize("test_size, train_size", [(None, None), (0.2, None), (None, 0.65),
                                                   (37, None), (0.3, 0.5), (None, 100),
                                                   (0.33, 0.67)])
def test_sizes_are_scikit_learns(data, test_size, train_size):
    X, y = data
    ours = next(ShuffleSplit(1, test_size=test_size, train_size=train_size,
                             seed=1).split(X))
    theirs = next(skms.ShuffleSplit(1, test_size=test_size, train_size=train_size,
                                    random_state=1).split(X))
    assert (len(ours[0]), len(ours[1])) == (len(theirs[0]), len(theirs[1]))
    parts = train_test_split(X, y, test_size=test_size, train_size=train_size, seed=1)
    want = skms.train_test_split(X, y, test_size=test_size, train_size=train_size,
                                 random_state=1)
    assert [p.shape for p in parts] == [w.shape for w in want]


def test_train_test_split_keeps_types_and_rows_together():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"a": np.arange(50), "b": [f"r{i}" for i in range(50)]},
                      index=[f"i{i}" for i in range(50)])
    y = list(range(50))
    df_train, df_test, y_train, y_test = train_test_split(df, y, test_size=0.2, seed=5)
    assert isinstance(df_train, pd.DataFrame) and isinstance(y_train, list)
    assert len(df_test) == 10 and len(y_train) == 40
    assert df_train["a"].tolist() == y_train                     # rows stay together
    assert list(df_train.index) == [f"i{a}" for a in y_train]    # the index kept
    again = train_test_split(df, y, test_size=0.2, random_state=5)
    assert again[3] == y_test                                    # random_state: the seed
    ordered = train_test_split(np.arange(10), shuffle=False, test_size=3)
    assert ordered[0].tolist() == list(range(7)) and ordered[1].tolist() == [7, 8, 9]


def test_without_a_seed_a_splitter_draws_one_and_keeps_its_folds(data):
    """A seed drawn when the splitter is made: every split() the same folds
    (scikit-learn's searches need it), the seed shown, another splitter
    other folds."""
    X, y = data
    cv = KFold(3)
    first = [test.tolist() for _, test in cv.split(X)]
    assert first == [test.tolist() for _, test in cv.split(X)]
    assert first != [test.tolist() for _, test in KFold(3).split(X)]
    assert isinstance(cv.seed, int) and cv.random_state == cv.seed
    assert f"seed={cv.seed}" in repr(cv)
    assert first == [test.tolist() for _, test in KFold(3, seed=cv.seed).split(X)]
    from sklearn.experimental import enable_halving_search_cv  # noqa: F401
    search = skms.HalvingGridSearchCV(LogisticRegression(), {"C": [0.1, 1.0, 10.0]},
                                      cv=KFold(3), random_state=0)
    assert search.fit(X, y).best_params_["C"] in (0.1, 1.0, 10.0)


def test_random_state_as_a_random_state(data):
    """Each split() draws one 64-bit seed from a RandomState (new folds per
    call, as scikit-learn's splitters consuming it); the same RandomState
    seed repeats the sequence of calls."""
    from sklearn.model_selection._split import _yields_constant_splits
    X, y = data
    state = np.random.RandomState(0)
    cv = KFold(3, random_state=state)
    assert cv.random_state is state and cv.seed is None and "random_state=" in repr(cv)
    assert not _yields_constant_splits(cv)
    calls = [[test.tolist() for _, test in cv.split(X)] for _ in range(2)]
    assert calls[0] != calls[1]
    replay = np.random.RandomState(0)
    for call in calls:
        seed = int(replay.randint(0, 2 ** 64, dtype=np.uint64))
        assert call == [test.tolist() for _, test in KFold(3, seed=seed).split(X)]
    parts = train_test_split(X, y, random_state=np.random.RandomState(4))
    seed = int(np.random.RandomState(4).randint(0, 2 ** 64, dtype=np.uint64))
    assert np.array_equal(parts[3], train_test_split(X, y, seed=seed)[3])
    assert skms.cross_val_score(LogisticRegression(), X, y,
                                cv=KFold(4, random_state=np.random.RandomState(1))).shape == (4,)
    with pytest.raises(ParameterError, match="random_state must be None, an integer seed or"):
        KFold(3, random_state=np.random.default_rng(0))
    with pytest.raises(ParameterError, match="disagree"):
        KFold(3, seed=1, random_state=np.random.RandomState(0))


def test_bad_input_is_one_clear_error(data):
    X, y = data
    with pytest.raises(ParameterError, match="n_splits must be >= 2"):
        KFold(1)
    with pytest.raises(ParameterError, match="k must be <= the number of rows"):
        list(KFold(5, seed=1).split(np.zeros(3)))
    with pytest.raises(ParameterError, match="disagree"):
        KFold(3, seed=1, random_state=2)
    with pytest.raises(ParameterError, match="training set empty"):
        train_test_split(np.arange(3), train_size=0.1)
    with pytest.raises(ParameterError, match="ask for"):
        list(ShuffleSplit(1, train_size=400, test_size=300, seed=1).split(X))
    with pytest.raises(ParameterError, match="array 1 has 10 rows"):
        train_test_split(X, y[:10], seed=1)


@pytest.mark.parametrize("params", [{}, {"gap": 3}, {"test_size": 40}, {"max_train_size": 100},
                                    {"n_splits": 3, "gap": 2, "test_size": 50,
                                     "max_train_size": 120}])
def test_time_series_split_is_scikit_learns(data, params):
    X, _ = data
    ours = list(TimeSeriesSplit(**params).split(X))
    theirs = list(skms.TimeSeriesSplit(**params).split(X))
    assert len(ours) == len(theirs)
    for (a, b), (c, d) in zip(ours, theirs):
        assert a.tolist() == c.tolist() and b.tolist() == d.tolist()
    assert skms.cross_val_score(LogisticRegression(), X, data[1],
                                cv=TimeSeriesSplit(**params)).shape == (len(theirs),)


def test_kfold_time_series_on_the_command_line(tmp_path, capsys):
    """The job writes scikit-learn's folds (rows in time order) and refuses
    options that do not apply."""
    from .conftest import run_cli
    src = make(tmp_path, rows=230, cols=3, block_size=50, seed=2)
    code, _, err = run_cli(capsys, "kfold", src, tmp_path / "ts", "--k", 4, "--time-series",
                           "--gap", 5, "--seed", 1, "-q")
    assert code == 0, err
    run = api.read_run(str(tmp_path / "ts"))
    for i, (train, test) in enumerate(skms.TimeSeriesSplit(4, gap=5).split(np.zeros(230))):
        assert run.indices(f"train-{i}").tolist() == train.tolist()
        assert run.indices(f"test-{i}").tolist() == test.tolist()
    for extra in (["--balanced"], ["--naive"]):
        code, out, err = run_cli(capsys, "kfold", src, tmp_path / "no", "--k", 4,
                                 "--time-series", "--seed", 1, *extra)
        assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    code, _, err = run_cli(capsys, "kfold", src, tmp_path / "no", "--k", 4, "--gap", 2,
                           "--seed", 1)
    assert code == 2 and "need --time-series" in err
    code, _, err = run_cli(capsys, "kfold", src, tmp_path / "no", "--k", 4, "--time-series",
                           "--test-size", 60, "--seed", 1)
    assert code == 2 and "need more than the 230 rows" in err
    assert not os.path.exists(tmp_path / "no")


def test_bootstrap_trains_on_bags_and_tests_out_of_bag(data, tmp_path):
    from samplegen.model_selection import Bootstrap
    X, y = data
    cv = Bootstrap(4, seed=2)
    assert skms.cross_val_score(LogisticRegression(), X, y, cv=cv).shape == (4,)
    src = make(tmp_path, rows=569, cols=2, block_size=100, seed=1)
    driver.generate(src, str(tmp_path / "bo"), "bootstrap", {"samples": 4, "oob": True}, 2,
                    runner="embedded", options=NO_CONF)
    run = api.read_run(str(tmp_path / "bo"))
    for i, (train, test) in enumerate(cv.split(X)):
        assert len(train) == 569 and len(set(train.tolist())) < 569     # with replacement
        assert not set(train.tolist()) & set(test.tolist())
        assert set(train.tolist()) | set(test.tolist()) == set(range(569))
        assert np.array_equal(train, run.indices(f"sample-{i}"))
        assert np.array_equal(test, run.indices(f"oob-{i}"))


# ---------------------------------------------------------------------------
# scikit-learn's common splitter contract (its test_split.py, where it applies)
# ---------------------------------------------------------------------------
def _splitters(seed):
    import samplegen.model_selection as ms
    return [ms.KFold(3, seed=seed), ms.StratifiedKFold(3, seed=seed),
            ms.GroupKFold(3, seed=seed), ms.RepeatedKFold(n_splits=3, n_repeats=2, seed=seed),
            ms.RepeatedStratifiedKFold(n_splits=3, n_repeats=2, seed=seed),
            ms.ShuffleSplit(4, test_size=0.3, seed=seed),
            ms.StratifiedShuffleSplit(4, test_size=0.3, seed=seed),
            ms.GroupShuffleSplit(4, test_size=0.3, seed=seed), ms.Bootstrap(3, seed=seed)]


def _inputs(n=60):
    rng = np.random.default_rng(1)
    return rng.integers(0, 3, (n, 2)), rng.integers(0, 3, n), rng.integers(0, 10, n)


@pytest.mark.parametrize("cv", _splitters(7) + [TimeSeriesSplit(3)], ids=repr)
def test_common_splitter_contract(cv):
    from sklearn.model_selection._split import _yields_constant_splits
    X, y, groups = _inputs()
    pairs = list(cv.split(X, y, groups) if cv.uses_groups else cv.split(X, y))
    assert len(pairs) == cv.get_n_splits(X, y, groups)
    for train, test in pairs:
        assert train.dtype.kind == "i" and test.dtype.kind == "i"
        assert train.size and test.size and train.max() < 60 and test.max() < 60
        if type(cv).__name__ != "Bootstrap":      # a bag repeats rows; its test is the rest
            assert np.intersect1d(train, test).size == 0
    again = list(cv.split(X, y, groups) if cv.uses_groups else cv.split(X, y))
    assert all(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
               for a, b in zip(pairs, again))
    assert _yields_constant_splits(cv)              # a fixed seed: the same splits
    assert repr(cv).startswith(type(cv).__name__ + "(")
    # a column vector y, as scikit-learn's splitters take it
    assert len(list(cv.split(X, y.reshape(-1, 1), groups if cv.uses_groups else None))) \
        == len(pairs)


@pytest.mark.parametrize("cv", _splitters(None), ids=lambda cv: type(cv).__name__)
def test_without_a_seed_splits_are_constant(cv):
    """Seedless splitters yield the same folds on every call: scikit-learn
    sees an integer random_state."""
    from sklearn.model_selection._split import _yields_constant_splits
    X, y, groups = _inputs()
    args = (X, y, groups) if cv.uses_groups else (X, y)
    assert _yields_constant_splits(cv)
    for a, b in zip(cv.split(*args), cv.split(*args)):
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@pytest.mark.parametrize("cv", _splitters(7), ids=repr)
def test_metadata_routing_and_ignored_groups(cv):
    X, y, groups = _inputs()
    request = cv.get_metadata_routing()
    if cv.uses_groups:
        assert request.split.requests == {"groups": True} and hasattr(cv, "set_split_request")
        with sklearn.config_context(enable_metadata_routing=True):
            scores = skms.cross_validate(LogisticRegression(), X, y, cv=cv,
                                         params={"groups": groups})
        assert len(scores["test_score"]) == cv.get_n_splits()
    else:
        assert not request.split.requests and not hasattr(cv, "set_split_request")
        with pytest.warns(UserWarning, match=f"groups parameter is ignored by "
                                             f"{type(cv).__name__}"):
            cv.split(X, y, groups)          # when split is called, as scikit-learn warns


@pytest.mark.parametrize("name", ["StratifiedKFold", "StratifiedShuffleSplit",
                                  "RepeatedStratifiedKFold"])
def test_stratified_splitters_need_y(name):
    import samplegen.model_selection as ms
    cv = getattr(ms, name)(seed=1) if name.startswith("Repeated") else getattr(ms, name)(seed=1)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'y'"):
        cv.split(np.zeros((10, 2)))


# ---------------------------------------------------------------------------
# scikit-learn's contract where samplegen broke it: small classes, multilabel
# y, ties between classes, sizes, input types
# ---------------------------------------------------------------------------
def test_stratified_kfold_warns_about_a_class_smaller_than_the_folds_and_splits():
    y = np.array([0] * 17 + [1] * 2 + [2])
    from samplegen.model_selection import StratifiedKFold
    cv = StratifiedKFold(3, seed=4)
    with pytest.warns(UserWarning, match="least populated class in y has only 1 members, "
                                         "which is less than n_splits=3"):
        pairs = list(cv.split(np.zeros(20), y))
    tests = [test for _, test in pairs]
    assert sorted(np.concatenate(tests).tolist()) == list(range(20))
    assert sorted(len(t) for t in tests) == [6, 7, 7]
    for test in tests:        # every class within one row of n_c / k in each fold
        assert np.all(np.abs(np.bincount(y[test], minlength=3) - np.bincount(y) / 3) < 1)
    with pytest.raises(ParameterError, match="n_splits=3 is more than the rows of every class"):
        list(cv.split(np.zeros(4), [0, 0, 1, 1]))


def test_stratified_hold_outs_refuse_what_scikit_learn_refuses():
    from samplegen.model_selection import StratifiedShuffleSplit
    X = np.zeros(20)
    lone = np.array([0] * 19 + [1])
    with pytest.raises(ParameterError, match="class 1 of y has 1 row"):
        list(StratifiedShuffleSplit(2, seed=1).split(X, lone))
    with pytest.raises(ParameterError, match="class 1 of stratify has 1 row"):
        train_test_split(X, stratify=lone, seed=1)
    four = np.arange(20) % 4
    with pytest.raises(ParameterError, match="test_size gives 2 rows, fewer than the 4 classes"):
        list(StratifiedShuffleSplit(2, test_size=2, seed=1).split(X, four))
    with pytest.raises(ParameterError, match="train_size gives 3 rows, fewer than the 4 classes"):
        train_test_split(X, train_size=3, stratify=four, seed=1)


def test_multilabel_y_stratifies_by_each_rows_combination():
    from samplegen.model_selection import StratifiedShuffleSplit
    rng = np.random.default_rng(3)
    Y = rng.integers(0, 2, (200, 3))
    combos = np.array(["-".join(map(str, row)) for row in Y])   # the same classes, 1-D
    ours = list(StratifiedShuffleSplit(3, test_size=0.25, seed=2).split(np.zeros(200), Y))
    same = list(StratifiedShuffleSplit(3, test_size=0.25, seed=2).split(np.zeros(200), combos))
    for (train, test), (train2, test2) in zip(ours, same):
        assert np.array_equal(train, train2) and np.array_equal(test, test2)
        _, codes = np.unique(Y, axis=0, return_inverse=True)
        counts = np.bincount(codes.ravel())
        assert np.all(np.abs(np.bincount(codes.ravel()[test], minlength=counts.size)
                             - 50 * counts / 200) < 2)
    parts = train_test_split(np.arange(200), Y, test_size=0.25, stratify=Y, seed=2)
    assert np.array_equal(parts[1], ours[0][1]) and np.array_equal(parts[3], Y[ours[0][1]])


def test_ties_between_classes_go_to_a_random_class_per_repeat():
    """22 rows, two classes of 11, 17 training rows: each class's share is
    8.5.  Before, class 0 took the extra row in every split (a row of class
    0 in training with chance 9/11 = 0.818, of class 1 8/11 = 0.727, where
    both should be 17/22 = 0.773).  Now a repeat gives it to class 0 with
    probability 1/2: over N = 1000 repeats the count X is Binomial(N, 1/2)
    (mean 500, sd 15.8); we accept |X - 500| <= 80 (5 sd: a false alarm with
    probability < 1e-6), which catches the old rule (X = 1000) always and a
    bias of 0.6 with power 0.9.  train_test_split over 1000 seeds alike."""
    from samplegen.model_selection import StratifiedShuffleSplit
    X, y = np.zeros(22), np.array([0, 1] * 11)
    cv = StratifiedShuffleSplit(1000, test_size=0.2, seed=0)
    extra = [int(np.sum(y[train] == 0)) for train, _ in cv.split(X, y)]
    assert set(extra) == {8, 9} and abs(extra.count(9) - 500) <= 80
    extra = [int(np.sum(train_test_split(y, test_size=0.2, stratify=y, seed=s)[0] == 0))
             for s in range(1000)]
    assert abs(extra.count(9) - 500) <= 80
    again = [int(np.sum(y[train] == 0)) for train, _ in
             StratifiedShuffleSplit(1000, test_size=0.2, seed=0).split(X, y)]
    assert again == [int(np.sum(y[train] == 0)) for train, _ in cv.split(X, y)]  # reproducible


def test_renaming_the_classes_changes_no_fold(data):
    """The classes are numbered by first appearance, so any renaming (here
    0, 1 -> 'b', 'a', which reverses their sorted order) gives the same folds
    with the same seed, as scikit-learn's test asserts."""
    import samplegen.model_selection as ms
    X, y = data
    y3 = y + (np.arange(569) % 7 == 0)           # three classes, 0 and 1 and 2
    renamed = np.array(["z", "b", "a"])[y3]
    for cv in (ms.StratifiedKFold(5, seed=3), ms.StratifiedShuffleSplit(4, test_size=0.3, seed=3),
               ms.RepeatedStratifiedKFold(n_splits=3, n_repeats=2, seed=3)):
        for a, b in zip(cv.split(X, y3), cv.split(X, renamed)):
            assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    assert np.array_equal(train_test_split(X, stratify=y3, seed=5)[1],
                          train_test_split(X, stratify=renamed, seed=5)[1])


def test_stratified_splits_are_the_jobs_samples_of_the_codes():
    """StratifiedKFold is kfold --stratify by the classes' first-appearance
    codes; StratifiedShuffleSplit's repeat w is holdout --stratify with the
    seed and class order drawn from the splitters' stream at w."""
    import samplegen.model_selection as ms
    from samplegen.udfs.rng import PositionRNG
    y = np.array(["b", "a", "c"] * 40 + ["a"] * 30)
    codes = np.array([0, 1, 2] * 40 + [1] * 30)
    run = api.kfold(150, 4, 9, stratify=codes)
    for i, (train, test) in enumerate(ms.StratifiedKFold(4, seed=9).split(np.zeros(150), y)):
        assert np.array_equal(test, run.indices(f"test-{i}"))
        assert np.array_equal(train, run.indices(f"train-{i}"))
    pairs = ms.StratifiedShuffleSplit(3, test_size=0.2, seed=9).split(np.zeros(150), y)
    for w, (train, test) in enumerate(pairs):
        draws = PositionRNG(9).draws(ms.SPLITTERS, w)
        seed = draws.raw()
        order = ms._permutation(draws, 3)
        run = api.holdout(150, 120 / 150, seed, stratify=order[codes])
        assert np.array_equal(train, run.indices("train-0"))
        assert np.array_equal(test, run.indices("test-0"))


def test_shares_adding_up_past_one_are_refused_even_when_the_counts_fit():
    # 10 rows: test 0.45 -> 5 rows (up), train 0.56 -> 5 rows (down): 10 fit, but 1.01 > 1
    with pytest.raises(ParameterError, match="add up to 1.01"):
        next(ShuffleSplit(1, test_size=0.45, train_size=0.56, seed=1).split(np.zeros(10)))
    with pytest.raises(ParameterError, match="add up to 1.01"):
        train_test_split(np.zeros(10), test_size=0.45, train_size=0.56, seed=1)
    assert len(train_test_split(np.zeros(10), test_size=0.45, train_size=0.55, seed=1)[1]) == 5


def test_ranges_sparse_formats_and_frames_with_iloc():
    import samplegen.model_selection as ms
    sparse = pytest.importorskip("scipy.sparse")
    from sklearn.utils._mocking import MockDataFrame
    X = np.arange(40).reshape(20, 2)
    train, test = train_test_split(range(20), seed=3)
    dense = train_test_split(X, seed=3)
    assert isinstance(train, list) and train == (dense[0][:, 0] // 2).tolist()
    assert isinstance(test, list) and test == (dense[1][:, 0] // 2).tolist()
    assert len(list(ms.GroupKFold(4, seed=1).split(X, groups=range(20)))) == 4
    assert len(list(ms.GroupShuffleSplit(2, seed=1).split(X, groups=range(20)))) == 2
    assert len(list(ms.StratifiedKFold(2, seed=1).split(X, [v % 2 for v in range(20)]))) == 2
    assert len(list(ms.KFold(2, seed=1).split(range(20)))) == 2
    for fmt in ("coo", "csr", "csc", "dia", "bsr", "lil", "dok"):
        for kind in (sparse.csr_matrix, sparse.csr_array):
            m = kind(X).asformat(fmt)
            a, b = train_test_split(m, seed=3)
            assert a.format == "csr" and b.format == "csr", fmt
            assert np.array_equal(a.toarray(), dense[0]) and np.array_equal(b.toarray(), dense[1])
    a, b = train_test_split(MockDataFrame(X), seed=3)
    assert isinstance(a, MockDataFrame) and np.array_equal(a.array, dense[0])
    assert np.array_equal(b.array, dense[1])


def test_leave_groups_out_and_predefined_splits_are_scikit_learns():
    import samplegen.model_selection as ms
    X, groups = np.zeros(30), np.array(list("cabd") * 7 + ["e", "e"])
    for ours, theirs in [(ms.LeaveOneGroupOut(), skms.LeaveOneGroupOut()),
                         (ms.LeavePGroupsOut(2), skms.LeavePGroupsOut(2))]:
        assert ours.get_n_splits(X, None, groups) == theirs.get_n_splits(X, None, groups)
        pairs = list(theirs.split(X, None, groups))
        assert [(a.tolist(), b.tolist()) for a, b in ours.split(X, None, groups)] == \
            [(a.tolist(), b.tolist()) for a, b in pairs]
    with pytest.raises(ParameterError, match="needs more than 2 groups, got 2"):
        list(ms.LeavePGroupsOut(2).split(X[:4], groups=[0, 1, 0, 1]))
    fold = np.array([-1, 0, 1, 1, 0, 2, -1, 2])
    ours, theirs = ms.PredefinedSplit(fold), skms.PredefinedSplit(fold)
    assert ours.get_n_splits() == theirs.get_n_splits() == 3
    assert [(a.tolist(), b.tolist()) for a, b in ours.split()] == \
        [(a.tolist(), b.tolist()) for a, b in theirs.split()]


def test_fold_splitters_take_scikit_learns_shuffle_keyword(data):
    """shuffle=True is what the fold splitters do anyway (drawn folds, the
    same as without it); shuffle=False is scikit-learn's unshuffled folds,
    index for index."""
    import samplegen.model_selection as ms
    X, y = data
    for name in ("KFold", "StratifiedKFold", "GroupKFold"):
        args = (X, y, np.arange(len(y)) % 7) if name == "GroupKFold" else (X, y)
        drawn = [t.tolist() for _, t in getattr(ms, name)(3, seed=4).split(*args)]
        assert drawn == [t.tolist() for _, t in getattr(ms, name)(
            3, shuffle=True, random_state=4).split(*args)]
    for n, k in ((10, 3), (569, 10), (7, 7), (12, 4)):
        ours = ms.KFold(k, shuffle=False)
        assert ours.seed is None and not ours.shuffle and repr(ours) == \
            f"KFold(n_splits={k}, shuffle=False, balanced=True)"
        assert [(a.tolist(), b.tolist()) for a, b in ours.split(np.zeros(n))] == \
            [(a.tolist(), b.tolist()) for a, b in skms.KFold(k).split(np.zeros(n))]
    with pytest.raises(ParameterError, match=r"n_splits=4 must be <= the number of rows \(3\)"):
        list(ms.KFold(4, shuffle=False).split(np.zeros(3)))
    rng = np.random.default_rng(3)
    labels = [np.array(list("bacabbaccca")), rng.integers(0, 4, 101),
              rng.choice([5, 2, 9], 57, p=[.7, .2, .1]), np.array([1, 1, 1, 0, 0, 0, 0])]
    for y_ in labels:       # classes in any order of appearance, small ones (warned about)
        for k in (2, 3, 5):
            if np.unique(y_, return_counts=True)[1].max() < k:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = ms.StratifiedKFold(k, shuffle=False).split(np.zeros(len(y_)), y_)
                theirs = skms.StratifiedKFold(k).split(np.zeros(len(y_)), y_)
                assert [(a.tolist(), b.tolist()) for a, b in ours] == \
                    [(a.tolist(), b.tolist()) for a, b in theirs]
    with pytest.warns(UserWarning, match="least populated class in y has only 2 members"):
        list(ms.StratifiedKFold(3, shuffle=False).split(np.zeros(5), [3, 3, -1, -1, 3]))
    groups = [np.array([0, 1, 2, 3] * 4), rng.integers(0, 30, 1000), list("baacdde"),
              np.array([2.5, 1.0, 1.0, 3.0, 2.5, 4.0])]
    for g in groups:        # groups of one size (ties) included
        for k in (2, 3):
            ours = ms.GroupKFold(k, shuffle=False).split(np.zeros(len(g)), None, g)
            theirs = skms.GroupKFold(k).split(np.zeros(len(g)), None, g)
            assert [(a.tolist(), b.tolist()) for a, b in ours] == \
                [(a.tolist(), b.tolist()) for a, b in theirs]


def test_deterministic_splitters_say_their_splits_are_constant():
    """scikit-learn's searches ask whether a splitter gives the same splits
    on every call: the splitters without randomness do."""
    from sklearn.model_selection._split import _yields_constant_splits

    import samplegen.model_selection as ms
    for cv in (ms.LeaveOneGroupOut(), ms.LeavePGroupsOut(2), ms.PredefinedSplit([0, 1, 1]),
               ms.TimeSeriesSplit(3), ms.KFold(3, shuffle=False),
               ms.StratifiedKFold(3, shuffle=False), ms.GroupKFold(3, shuffle=False)):
        assert _yields_constant_splits(cv), cv
