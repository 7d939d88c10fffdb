"""scikit-learn's splitters, drawing samplegen's samples.

Each splitter has scikit-learn's interface -- ``split(X, y=None,
groups=None)`` yields ``(train indices, test indices)``, ``get_n_splits()``
-- so it goes wherever scikit-learn takes ``cv=`` (``cross_val_score``,
``GridSearchCV``, ``cross_validate``).  The indices are exactly the rows the
cluster jobs write for the same seed and parameters, in the order they write
them: ``KFold(10, seed=7)`` on m rows is ``samplegen kfold --k 10 --seed 7``
on a matrix of m rows (balanced folds), ``ShuffleSplit`` is ``holdout`` (exact sizes),
``TimeSeriesSplit`` is ``kfold --time-series``, ``Bootstrap`` is ``bootstrap
--oob``; ``StratifiedKFold`` and ``StratifiedShuffleSplit`` are ``kfold`` and
``holdout`` with ``--stratify`` by the label column holding y, and
``GroupKFold`` and ``GroupShuffleSplit`` with ``--groups`` by the column
holding the groups.

``seed`` is the seed (0 <= seed < 2**64); ``random_state`` is accepted as its
alias, an integer.  Without either, every ``split`` call draws a fresh seed,
as scikit-learn does with ``random_state=None``.

    from sklearn.model_selection import cross_val_score
    from samplegen.model_selection import KFold, train_test_split

    cross_val_score(model, X, y, cv=KFold(10, seed=7))
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, seed=7)
"""
import math
import numbers
import warnings

import numpy as np

from samplegen.jobs import api
from samplegen.udfs.builtin import TimeSeries
from samplegen.udfs.errors import ParameterError, check_bool
from samplegen.udfs.rng import check_seed, fresh_seed

__all__ = ["Bootstrap", "GroupKFold", "GroupShuffleSplit", "KFold", "RepeatedKFold",
           "RepeatedStratifiedKFold", "ShuffleSplit", "StratifiedKFold",
           "StratifiedShuffleSplit", "TimeSeriesSplit", "train_test_split"]


def _seed(seed, random_state):
    """The seed given as *seed* or *random_state* (an int), or None."""
    if random_state is not None and not isinstance(random_state, numbers.Integral):
        raise ParameterError(f"random_state must be an integer seed (samplegen's samples are "
                             f"keyed by it), got {type(random_state).__name__}")
    if seed is not None and random_state is not None and int(seed) != int(random_state):
        raise ParameterError(f"seed={seed} and random_state={random_state} disagree; give one")
    chosen = seed if seed is not None else random_state
    return None if chosen is None else check_seed(chosen)


def _whole(name, value, lo, optional=False):
    """*value* as an int >= *lo* (None when *optional* and None): an
    integer, as scikit-learn's splitters take their counts -- never a
    string, a float or a bool."""
    if value is None and optional:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    if value < lo:
        raise ParameterError(f"{name} must be >= {lo}, got {value}")
    return int(value)


def _n_samples(X):
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape):
        return int(shape[0])
    try:
        return len(X)
    except TypeError:
        raise ParameterError(f"X must have rows (an array, a DataFrame or a list), got "
                             f"{type(X).__name__}") from None


class _Splitter:
    """What every splitter shares: the seed, ``get_n_splits``, ``repr``, and
    scikit-learn's metadata routing: a splitter that splits by groups
    (``uses_groups``) asks for them, the others ignore them with a warning,
    as scikit-learn's own splitters do."""

    #: whether ``split`` uses its *groups*
    uses_groups = False

    def __init__(self, n_splits, seed, random_state):
        if not isinstance(n_splits, numbers.Integral) or isinstance(n_splits, bool):
            raise ParameterError(f"n_splits must be an integer, got {n_splits!r}")
        self.n_splits = int(n_splits)
        self.seed = _seed(seed, random_state)
        self.random_state = self.seed

    def get_n_splits(self, X=None, y=None, groups=None):
        """The number of (train, test) pairs ``split`` yields."""
        return self.n_splits

    def _split_seed(self):
        return fresh_seed() if self.seed is None else self.seed

    def _ignored(self, groups):
        if groups is not None and not self.uses_groups:
            warnings.warn(f"The groups parameter is ignored by {type(self).__name__}",
                          UserWarning, stacklevel=3)

    def get_metadata_routing(self):
        """scikit-learn's metadata request of ``split``: *groups* for the
        group splitters, nothing for the others (needs scikit-learn)."""
        from sklearn.utils.metadata_routing import MetadataRequest
        request = MetadataRequest(owner=self)
        if self.uses_groups:
            request.split.add_request(param="groups", alias=getattr(self, "_groups_alias",
                                                                     True))
        return request

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({params})"


class _Folds(_Splitter):
    """k folds drawn by ``api.kfold`` (``kfold`` of the jobs); each pair is
    (every other row of the repeat, fold i).  Subclasses say what else the
    folds are drawn by (:meth:`_by`)."""

    def __init__(self, n_splits=5, *, seed=None, random_state=None):
        super().__init__(n_splits, seed, random_state)
        if self.n_splits < 2:
            raise ParameterError(f"n_splits must be >= 2, got {self.n_splits}")

    def _params(self):
        return {"n_splits": self.n_splits, "seed": self.seed}

    def _by(self, X, y, groups):
        """The keywords of ``api.kfold`` besides the count and the seed."""
        return {}

    def _folds(self, X, y, groups):
        keywords = self._by(X, y, groups)
        samples = api.kfold(_n_samples(X), self.n_splits, self._split_seed(), **keywords)
        for j in range(self.get_n_splits()):
            yield samples.indices(f"train-{j}"), samples.indices(f"test-{j}")


class KFold(_Folds):
    """k folds of sizes within one of each other (the first ``m % k`` one row
    larger); each pair is (every other row, fold i).  ``balanced=False``
    gives the paper's folds instead: an independent fold per row."""

    def __init__(self, n_splits=5, *, seed=None, random_state=None, balanced=True):
        super().__init__(n_splits, seed=seed, random_state=random_state)
        self.balanced = check_bool("balanced", balanced)

    def _params(self):
        return {**super()._params(), "balanced": self.balanced}

    def _by(self, X, y, groups):
        return {"balanced": self.balanced}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        yield from self._folds(X, y, groups)


class RepeatedKFold(_Folds):
    """``n_repeats`` independent :class:`KFold` splits, ``n_splits *
    n_repeats`` pairs in scikit-learn's order (``kfold --repeats``)."""

    def __init__(self, *, n_splits=5, n_repeats=10, seed=None, random_state=None):
        super().__init__(n_splits, seed=seed, random_state=random_state)
        self.n_repeats = _whole("n_repeats", n_repeats, 1)

    def _params(self):
        return {"n_splits": self.n_splits, "n_repeats": self.n_repeats, "seed": self.seed}

    def get_n_splits(self, X=None, y=None, groups=None):
        return self.n_splits * self.n_repeats

    def _by(self, X, y, groups):
        return {"repeats": self.n_repeats}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        yield from self._folds(X, y, groups)


class RepeatedStratifiedKFold(RepeatedKFold):
    """``n_repeats`` independent :class:`StratifiedKFold` splits."""

    def _by(self, X, y, groups):
        return {"repeats": self.n_repeats,
                "stratify": _labels_of(X, y, "RepeatedStratifiedKFold")}

    def split(self, X, y, groups=None):
        self._ignored(groups)
        yield from self._folds(X, y, groups)


def _labels_of(X, y, splitter, arg="y"):
    """The labels *y* (or groups: *arg*) a splitter needs, as many as X's rows."""
    if y is None:
        what = "the classes of y" if arg == "y" else "the groups"
        raise ParameterError(f"{splitter} splits by {what}: pass {arg} to split()")
    n, m = _n_samples(X), _n_samples(y)
    if m != n:
        raise ParameterError(f"{arg} has {m} rows but X has {n}")
    return y


class _GroupSplitter(_Splitter):
    """A splitter by groups: asks scikit-learn's metadata routing for them."""

    uses_groups = True

    def set_split_request(self, *, groups=True):
        """scikit-learn's request of ``split``'s *groups* (True, False, None
        or an alias), for its metadata routing."""
        self._groups_alias = groups
        return self


class GroupKFold(_GroupSplitter, _Folds):
    """k folds of whole groups: every row of a group in the same fold, the
    groups taken in a random order and each given to the fold with the
    fewest rows so far (scikit-learn's GroupKFold takes them by size, so
    its folds do not change with the seed); no two folds differ by more
    than the largest group.  Fewer groups than folds is refused."""

    def _by(self, X, y, groups):
        return {"by_groups": _labels_of(X, groups, "GroupKFold", "groups")}

    def split(self, X, y=None, groups=None):
        yield from self._folds(X, y, groups)


class StratifiedKFold(_Folds):
    """k folds that hold every class of y in proportion: each class within
    one row of ``n_c / k`` in every fold, the folds' sizes within one of
    each other (scikit-learn's allocation); a class with fewer than k rows
    is refused."""

    def _by(self, X, y, groups):
        return {"stratify": _labels_of(X, y, "StratifiedKFold")}

    def split(self, X, y, groups=None):
        self._ignored(groups)
        yield from self._folds(X, y, groups)


def _sizes(n, test_size, train_size, default_test):
    """``(n_train, n_test)`` as scikit-learn reads *test_size* and
    *train_size* (a share in (0, 1) or a row count); either may be None."""
    def count(name, value, rounding):
        if value is None:
            return None
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            if not 0 < value < n:
                raise ParameterError(f"{name}={value} must be a row count in [1, {n - 1}] "
                                     f"(the data has {n} rows)")
            return int(value)
        if isinstance(value, numbers.Real) and 0 < value < 1:
            return int(rounding(value * n))
        raise ParameterError(f"{name} must be a share in (0, 1) or a row count, got {value!r}")

    if test_size is None and train_size is None:
        test_size = default_test
    n_test = count("test_size", test_size, math.ceil)
    n_train = count("train_size", train_size, math.floor)
    n_test = n - n_train if n_test is None else n_test
    n_train = n - n_test if n_train is None else n_train
    if n_train + n_test > n:
        raise ParameterError(f"train_size and test_size ask for {n_train} + {n_test} rows of "
                             f"{n}")
    if n_train == 0 or n_test == 0:
        side = "training" if n_train == 0 else "test"
        raise ParameterError(f"with {n} rows, test_size={test_size} and train_size="
                             f"{train_size} leave the {side} set empty")
    return n_train, n_test


def _holdout(n, n_train, n_test, repeats, seed, stratify=None):
    """Exact hold-out pairs of exactly *n_train* and *n_test* rows (with
    *stratify*, labels: each class in proportion on both sides)."""
    kept = n_train + n_test
    samples = api.holdout(n, n_train / kept, seed, repeats=repeats, fraction=kept / n, exact=True,
                          stratify=stratify)
    return [(samples.indices(f"train-{w}"), samples.indices(f"test-{w}"))
            for w in range(repeats)]


class ShuffleSplit(_Splitter):
    """``n_splits`` independent random (train, test) pairs of exact sizes:
    *test_size* and *train_size* as scikit-learn's (a share or a row count;
    test 10 % when neither is given)."""

    def __init__(self, n_splits=10, *, test_size=None, train_size=None, seed=None,
                 random_state=None):
        super().__init__(n_splits, seed, random_state)
        if self.n_splits < 1:
            raise ParameterError(f"n_splits must be >= 1, got {self.n_splits}")
        self.test_size, self.train_size = test_size, train_size

    def _params(self):
        return {"n_splits": self.n_splits, "test_size": self.test_size,
                "train_size": self.train_size, "seed": self.seed}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        n = _n_samples(X)
        n_train, n_test = _sizes(n, self.test_size, self.train_size, 0.1)
        yield from _holdout(n, n_train, n_test, self.n_splits, self._split_seed())


class StratifiedShuffleSplit(ShuffleSplit):
    """:class:`ShuffleSplit` whose sides hold every class of y in
    proportion: each class's training rows within one of ``n_train * n_c /
    m``, its test rows the same share of the rest."""

    def split(self, X, y, groups=None):
        self._ignored(groups)
        y = _labels_of(X, y, "StratifiedShuffleSplit")
        n = _n_samples(X)
        n_train, n_test = _sizes(n, self.test_size, self.train_size, 0.1)
        yield from _holdout(n, n_train, n_test, self.n_splits, self._split_seed(), y)


class GroupShuffleSplit(_GroupSplitter, ShuffleSplit):
    """:class:`ShuffleSplit` of whole groups: *test_size* and *train_size*
    count groups (a share or a number of them, test 20 % when neither is
    given, as scikit-learn's GroupShuffleSplit); every split of that many
    groups equally likely."""

    def __init__(self, n_splits=5, *, test_size=None, train_size=None, seed=None,
                 random_state=None):
        super().__init__(n_splits, test_size=test_size, train_size=train_size, seed=seed,
                         random_state=random_state)

    def split(self, X, y=None, groups=None):
        groups = _labels_of(X, groups, "GroupShuffleSplit", "groups")
        n = _n_samples(X)
        n_groups = np.unique(np.asarray(getattr(groups, "values", groups))).size
        n_train, n_test = _sizes(n_groups, self.test_size, self.train_size, 0.2)
        kept = n_train + n_test
        samples = api.holdout(n, n_train / kept, self._split_seed(), repeats=self.n_splits,
                              fraction=kept / n_groups, by_groups=groups)
        for w in range(self.n_splits):
            yield samples.indices(f"train-{w}"), samples.indices(f"test-{w}")


class TimeSeriesSplit(_Splitter):
    """scikit-learn's ``TimeSeriesSplit``, the same indices: ``n_splits``
    test slices of *test_size* rows (default ``m // (n_splits + 1)``) at the
    end of the row order, each trained on the rows before it, less *gap*,
    at most *max_train_size* of them.  No randomness, so no seed."""

    #: deterministic: the same splits on every call (scikit-learn's test)
    shuffle = False

    def __init__(self, n_splits=5, *, max_train_size=None, test_size=None, gap=0):
        super().__init__(n_splits, None, None)
        if self.n_splits < 2:
            raise ParameterError(f"n_splits must be >= 2, got {self.n_splits}")
        self.max_train_size = _whole("max_train_size", max_train_size, 0, optional=True)
        self.test_size = _whole("test_size", test_size, 1, optional=True)
        self.gap = _whole("gap", gap, 0)

    def _params(self):
        return {"n_splits": self.n_splits, "max_train_size": self.max_train_size,
                "test_size": self.test_size, "gap": self.gap}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        udf = TimeSeries(_n_samples(X), self.n_splits, gap=self.gap,
                         test_size=self.test_size or 0, max_train_size=self.max_train_size or 0)
        # the rows keep their order (the UDF's relative position is the row id),
        # so each sample is its range of row ids: no draw, no sort
        for train, test in udf.rounds():
            yield np.arange(*train), np.arange(*test)


class Bootstrap(_Splitter):
    """``n_splits`` bootstrap bags of *size* rows (default: all) drawn with
    replacement -- a row drawn c times is listed c times in the training
    indices -- each tested on its out-of-bag rows, the ones it never drew."""

    def __init__(self, n_splits=10, *, size=None, seed=None, random_state=None):
        super().__init__(n_splits, seed, random_state)
        if self.n_splits < 1:
            raise ParameterError(f"n_splits must be >= 1, got {self.n_splits}")
        self.size = size

    def _params(self):
        return {"n_splits": self.n_splits, "size": self.size, "seed": self.seed}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        samples = api.bootstrap(_n_samples(X), self.n_splits, self._split_seed(), self.size,
                                oob=True)
        for i in range(self.n_splits):
            yield samples.indices(f"sample-{i}"), samples.indices(f"oob-{i}")


def _take(data, rows):
    if hasattr(type(data), "iloc"):
        return data.iloc[rows]
    if isinstance(data, list):
        return [data[i] for i in rows.tolist()]
    if isinstance(data, tuple):
        return tuple(data[i] for i in rows.tolist())
    return data[rows]


def train_test_split(*arrays, test_size=None, train_size=None, seed=None, random_state=None,
                     shuffle=True, stratify=None):
    """scikit-learn's ``train_test_split``: ``[a_train, a_test, b_train,
    b_test, ...]`` for the *arrays* (numpy, pandas -- index kept -- lists or
    sparse matrices, all with the same rows), exact sizes (test 25 % when
    neither size is given), rows in the order ``holdout --exact`` writes
    them; ``shuffle=False`` takes the first rows for training, in order.
    *stratify*: labels (one per row) whose classes both sides hold in
    proportion (``holdout --stratify``)."""
    if not arrays:
        raise ParameterError("train_test_split needs at least one array")
    shuffle = check_bool("shuffle", shuffle)
    n = _n_samples(arrays[0])
    for i, data in enumerate(arrays[1:], 1):
        if _n_samples(data) != n:
            raise ParameterError(f"array {i} has {_n_samples(data)} rows, array 0 has {n}")
    n_train, n_test = _sizes(n, test_size, train_size, 0.25)
    if shuffle:
        seed = _seed(seed, random_state)
        if stratify is not None:
            stratify = _labels_of(arrays[0], stratify, "stratify=")
        train, test = _holdout(n, n_train, n_test, 1, fresh_seed() if seed is None else seed,
                               stratify)[0]
    elif stratify is not None:
        raise ParameterError("stratify needs shuffle=True (an ordered split keeps no "
                             "proportions)")
    else:
        train, test = np.arange(n_train), np.arange(n_train, n_train + n_test)
    return [part for data in arrays for part in (_take(data, train), _take(data, test))]
