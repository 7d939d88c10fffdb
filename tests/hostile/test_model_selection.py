"""Hostile use of ``samplegen.model_selection``, the scikit-learn splitters
and ``train_test_split`` (no JVM, no scikit-learn needed).

What they are fed: bad ``n_splits`` and ``n_repeats`` (zero, floats,
strings, bools, more folds than rows), ``test_size`` / ``train_size`` out of
range or NaN or strings, X, y and groups of different lengths, NaN and None
labels and groups, a class with one member, empty X, things without rows,
strings and floats where counts go, flags given as strings, and
``random_state`` as a numpy Generator, a float or a string.  Each is one
``ParameterError`` (a ValueError, as scikit-learn raises) naming the
parameter and echoing the value.  Where samplegen claims scikit-learn's
behaviour the expectations are scikit-learn's documented ones (sizes,
refusals, a stratified k-fold's warning about a class smaller than the
folds, a stratified hold-out's refusal of a one-member class and of fewer
rows on a side than classes, ``random_state`` an integer, a RandomState or
None); where it deliberately differs, samplegen's documented behaviour: no
``numpy.random.Generator`` (scikit-learn refuses it too).
"""
import warnings

import numpy as np
import pytest

from samplegen import model_selection as ms
from samplegen.udfs.errors import ParameterError

X = np.zeros((20, 2))
Y = np.array([0, 1] * 10)


def _refused(call, *words):
    with pytest.raises(ParameterError) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, ValueError)
    for word in words:
        assert word in message, (word, message)


def test_bad_n_splits_and_n_repeats_are_refused():
    for value in (0, 1, -3):
        _refused(lambda v=value: ms.KFold(v), "n_splits must be >= 2", str(value))
    for value in (2.0, "3", True, None):
        _refused(lambda v=value: ms.KFold(v), "n_splits must be an integer", repr(value))
        _refused(lambda v=value: ms.ShuffleSplit(v), "n_splits must be an integer")
    _refused(lambda: ms.ShuffleSplit(0), "n_splits must be >= 1")
    _refused(lambda: ms.Bootstrap(0), "n_splits must be >= 1")
    _refused(lambda: ms.TimeSeriesSplit(1), "n_splits must be >= 2")
    for value in (0, 2.0, "2", True):
        _refused(lambda v=value: ms.RepeatedKFold(n_repeats=v), "n_repeats", repr(value))
    # more folds than rows: scikit-learn refuses it at split()
    _refused(lambda: list(ms.KFold(21, seed=1).split(X)), "21", "20")
    _refused(lambda: list(ms.TimeSeriesSplit(20).split(X)), "20")
    assert sum(1 for _ in ms.KFold(np.int64(4), seed=1).split(X)) == 4   # numpy integers


@pytest.mark.parametrize("name, value", [
    ("test_size", 0.0), ("test_size", 1.0), ("test_size", -0.1), ("test_size", float("nan")),
    ("test_size", 20), ("test_size", 0), ("test_size", "0.2"), ("test_size", True),
    ("train_size", 1.5), ("train_size", 25), ("train_size", "5")])
def test_sizes_out_of_range_are_refused(name, value):
    """scikit-learn: a share in (0, 1) or a row count in [1, n - 1]."""
    _refused(lambda: list(ms.ShuffleSplit(2, seed=1, **{name: value}).split(X)), name)
    _refused(lambda: ms.train_test_split(X, seed=1, **{name: value}), name)


def test_sizes_that_leave_a_side_empty_or_overlap_are_refused():
    _refused(lambda: ms.train_test_split(X, train_size=0.01, seed=1), "training set empty")
    _refused(lambda: ms.train_test_split(X, train_size=15, test_size=10, seed=1),
             "15 + 10 rows of 20")
    # the smallest shares scikit-learn accepts: one row, rounded up for test, down for train
    [(train, test)] = ms.ShuffleSplit(1, test_size=0.01, seed=1).split(X)
    assert (len(train), len(test)) == (19, 1)
    [(train, test)] = ms.ShuffleSplit(1, train_size=0.99, seed=1).split(X)
    assert (len(train), len(test)) == (19, 1)


def test_lengths_that_disagree_are_refused():
    _refused(lambda: ms.train_test_split(X, Y[:5], seed=1), "array 1 has 5 rows", "20")
    _refused(lambda: ms.train_test_split(X, stratify=Y[:5], seed=1), "5 rows", "20")
    _refused(lambda: list(ms.StratifiedKFold(2, seed=1).split(X, Y[:5])), "5 rows", "20")
    _refused(lambda: list(ms.StratifiedShuffleSplit(2, seed=1).split(X, Y[:19])), "19 rows")
    _refused(lambda: list(ms.GroupKFold(2, seed=1).split(X, groups=np.arange(5))),
             "groups has 5 rows")
    _refused(lambda: list(ms.GroupShuffleSplit(2, seed=1).split(X)), "pass groups")


def test_nan_and_none_labels_and_groups_are_refused():
    nan = np.array([0.0, np.nan] * 10)
    none = np.array(["a", None] * 10, dtype=object)
    _refused(lambda: list(ms.StratifiedKFold(2, seed=1).split(X, nan)), "NaN")
    _refused(lambda: list(ms.StratifiedKFold(2, seed=1).split(X, none)), "None")
    _refused(lambda: list(ms.StratifiedShuffleSplit(2, seed=1).split(X, nan)), "NaN")
    _refused(lambda: ms.train_test_split(X, stratify=nan, seed=1), "NaN")
    _refused(lambda: list(ms.GroupKFold(2, seed=1).split(X, groups=nan)), "NaN")
    _refused(lambda: list(ms.StratifiedKFold(2, seed=1).split(X, np.c_[Y, Y])),
             "one value per row")


def test_small_classes_follow_scikit_learns_rules():
    one = np.array([0] * 19 + [1])
    # a class smaller than k: scikit-learn's warning, and the folds
    with pytest.warns(UserWarning, match="only 1 members, which is less than n_splits=3"):
        folds = [test for _, test in ms.StratifiedKFold(3, seed=1).split(X, one)]
    assert sorted(np.concatenate(folds).tolist()) == list(range(20))
    # every class smaller than k: refused
    _refused(lambda: list(ms.StratifiedKFold(3, seed=1).split(X[:4], [0, 0, 1, 1])),
             "n_splits=3", "largest has 2")
    # a hold-out needs a row of every class on each side
    _refused(lambda: list(ms.StratifiedShuffleSplit(1, seed=1).split(X, one)),
             "class 1 of y has 1 row")
    _refused(lambda: ms.train_test_split(X, stratify=["a"] * 19 + ["b"], seed=1),
             "class 'b' of stratify has 1 row")
    _refused(lambda: list(ms.StratifiedShuffleSplit(1, test_size=1, seed=1).split(X, Y)),
             "test_size gives 1 rows, fewer than the 2 classes")
    _refused(lambda: list(ms.GroupKFold(3, seed=1).split(X, groups=Y)), "at least 3 groups")


def test_empty_x_and_things_without_rows_are_refused():
    empty = np.zeros((0, 2))
    for cv in (ms.KFold(2, seed=1), ms.ShuffleSplit(2, seed=1), ms.Bootstrap(2, seed=1),
               ms.TimeSeriesSplit(2), ms.StratifiedKFold(2, seed=1)):
        args = (empty, np.zeros(0)) if isinstance(cv, ms.StratifiedKFold) else (empty,)
        _refused(lambda cv=cv, args=args: list(cv.split(*args)))
    _refused(lambda: ms.train_test_split(empty, seed=1), "0 rows")
    _refused(lambda: ms.train_test_split(seed=1), "at least one array")
    for thing in (5, None, np.float64(3), (i for i in range(10))):
        _refused(lambda t=thing: list(ms.KFold(2, seed=1).split(t)), "X must have rows")


def test_strings_and_floats_where_counts_go_are_refused():
    for params, name in [({"gap": "1"}, "gap"), ({"gap": 1.0}, "gap"), ({"gap": -1}, "gap"),
                         ({"test_size": 0}, "test_size"), ({"test_size": 2.5}, "test_size"),
                         ({"test_size": "3"}, "test_size"),
                         ({"max_train_size": "5"}, "max_train_size"),
                         ({"max_train_size": -1}, "max_train_size")]:
        _refused(lambda p=params: list(ms.TimeSeriesSplit(2, **p).split(X)), name,
                 repr(next(iter(params.values()))).strip("-"))
    for size in ("10", 0.5, 0, -1, True):
        _refused(lambda s=size: list(ms.Bootstrap(2, size=s, seed=1).split(X)), "size")
    # what scikit-learn takes: max_train_size=0 is no limit; the defaults
    assert [len(train) for train, _ in ms.TimeSeriesSplit(2, max_train_size=0).split(X)] == \
        [8, 14]


def test_flags_given_as_strings_are_refused():
    """``"no"`` is a true string: a flag takes True or False, never a truth."""
    _refused(lambda: ms.KFold(2, balanced="no"), "balanced", "'no'")
    _refused(lambda: ms.train_test_split(X, shuffle="no", seed=1), "shuffle", "'no'")
    _refused(lambda: ms.train_test_split(X, shuffle=0, seed=1), "shuffle")


def test_shuffle_is_a_flag_and_false_takes_no_seed():
    """shuffle=False is scikit-learn's unshuffled folds, which a seed cannot
    change (refused with one, as scikit-learn refuses it)."""
    for name in ("KFold", "StratifiedKFold", "GroupKFold"):
        cls = getattr(ms, name)
        _refused(lambda c=cls: c(3, shuffle=None), "shuffle", "None")
        _refused(lambda c=cls: c(3, shuffle="no"), "shuffle", "'no'")
        _refused(lambda c=cls: c(3, shuffle=False, random_state=0), "shuffle=False",
                 "random_state=0", "set shuffle=True")
        _refused(lambda c=cls: c(3, shuffle=False, seed=5), "seed=5")
    _refused(lambda: ms.KFold(3, shuffle=False, balanced=False), "balanced=False",
             "shuffle=False")
    # what the drawn folds refuse, the ordered ones refuse too
    _refused(lambda: list(ms.StratifiedKFold(3, shuffle=False).split(X[:2], Y[:2])),
             "n_splits=3")
    _refused(lambda: list(ms.StratifiedKFold(11, shuffle=False).split(X, Y)), "n_splits=11",
             "every class")
    _refused(lambda: list(ms.GroupKFold(3, shuffle=False).split(X, groups=Y)),
             "at least 3 groups, got 2")
    _refused(lambda: list(ms.GroupKFold(2, shuffle=False).split(X)), "pass groups")
    _refused(lambda: list(ms.GroupKFold(2, shuffle=False).split(
        X, groups=np.where(Y, np.nan, 1.0))), "groups", "finite")


def test_groups_that_are_not_groups_are_refused_when_groups_are_left_out():
    for groups in ([0.0, np.nan, 0.0, 1.0], [0.0, np.inf, 0.0, 1.0],
                   np.array(["a", None, "b", "a"], dtype=object)):
        for cv in (ms.LeaveOneGroupOut(), ms.LeavePGroupsOut(2)):
            word = "None" if isinstance(groups, np.ndarray) else "finite"
            _refused(lambda c=cv, g=groups: c.get_n_splits(groups=g), "groups", word)
            _refused(lambda c=cv, g=groups: list(c.split(np.zeros(4), groups=g)), "groups",
                     word)


def test_random_state_is_scikit_learns():
    for state in (np.random.default_rng(0), 7.0, "7", True):
        _refused(lambda s=state: ms.KFold(3, random_state=s),
                 "random_state must be None, an integer seed or a numpy.random.RandomState",
                 type(state).__name__)
        _refused(lambda s=state: ms.train_test_split(X, random_state=s), "random_state")
    state = np.random.RandomState(0)
    assert ms.KFold(3, random_state=state).random_state is state
    assert len(ms.train_test_split(X, random_state=state)[1]) == 5
    assert ms.KFold(3, random_state=np.random).random_state is np.random.mtrand._rand
    for seed in (-1, 2 ** 64, True, 2.5):
        _refused(lambda s=seed: ms.KFold(3, seed=s), "seed must be an integer", str(seed))
    _refused(lambda: ms.KFold(3, seed=1, random_state=2), "disagree")
    assert ms.KFold(3, random_state=np.int64(5)).seed == 5


def test_multilabel_and_odd_labels():
    _refused(lambda: list(ms.StratifiedShuffleSplit(1, seed=1).split(
        X, np.c_[Y, np.where(Y, np.nan, 1.0)])), "NaN")
    _refused(lambda: list(ms.StratifiedShuffleSplit(1, seed=1).split(X, np.zeros((20, 2, 2)))),
             "one value per row", "(20, 2, 2)")
    _refused(lambda: ms.train_test_split(X, stratify=np.array([1, "a"] * 10, dtype=object),
                                         seed=1), "comparable")
    # object rows of labels: joined as text, as scikit-learn does
    rows = np.array([["a", 1], ["b", 2]] * 10, dtype=object)
    train, test = ms.train_test_split(np.arange(20), stratify=rows, test_size=0.5, seed=1)
    assert sorted(np.asarray(train) % 2) == [0] * 5 + [1] * 5
    # a column vector, a list, a pandas-like .values all read as one value per row
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(ms.StratifiedKFold(2, seed=1).split(X, Y.tolist()))) == 2
