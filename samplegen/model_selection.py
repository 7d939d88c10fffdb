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

``KFold``, ``StratifiedKFold`` and ``GroupKFold`` take scikit-learn's
``shuffle`` keyword, True by default here (their folds are drawn);
``shuffle=False`` gives scikit-learn's unshuffled folds, index for index
(no seed: KFold's consecutive rows, each class's rows dealt to the folds in
order, the groups by size to the lightest fold).  A splitter told about
groups it does not use warns when ``split`` is called, as scikit-learn's
do.

The stratified splitters number y's classes in the order they first
appear (as scikit-learn's StratifiedKFold does), so renaming the classes
changes no fold: their folds are the jobs' with ``--stratify`` by a column
holding those numbers (the codes).  ``StratifiedShuffleSplit`` and
``train_test_split(stratify=)`` draw, for each repeat w, a seed ``s_w`` and a
uniform order of the classes from stream ``(USER, SPLITTERS)`` at position
w of the seed; repeat w is ``holdout --stratify --seed s_w`` by the column of
the codes in that order.  The order decides which class gets the extra row
when several classes' shares tie (the jobs give it to the lowest code), so a
row's chance of being in training does not depend on its class.

Seeds.  ``seed`` is the seed (0 <= seed < 2**64); ``random_state`` is
accepted for it, as scikit-learn's: an integer (the same as ``seed``), a
``numpy.random.RandomState`` (or ``numpy.random`` itself), from which every
``split`` call draws one 64-bit seed (so each call gives new folds, as
scikit-learn's splitters consuming it do, and a seeded RandomState
reproduces the sequence of calls), or None.  Without either, the splitter
draws a seed once, when it is made, from the operating system: every
``split`` call of that splitter then gives the same folds (scikit-learn's
searches need that, e.g. ``HalvingGridSearchCV``), its ``seed`` and
``repr`` show the seed drawn so the run can be repeated, and another
splitter made without a seed gives other folds.  ``train_test_split``
without a seed draws one per call.

    from sklearn.model_selection import cross_val_score
    from samplegen.model_selection import KFold, train_test_split

    cross_val_score(model, X, y, cv=KFold(10, seed=7))
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, seed=7)
"""
import itertools
import math
import numbers
import warnings

import numpy as np

from samplegen.jobs import api
from samplegen.jobs.phases import sample_indices
from samplegen.udfs.builtin import KFold as _KFoldUDF
from samplegen.udfs.builtin import TimeSeries
from samplegen.udfs.errors import ParameterError, check_bool
from samplegen.udfs.rng import PositionRNG, Purpose, check_seed, fresh_seed, stream
from samplegen.udfs.strata import Strata

__all__ = ["Bootstrap", "GroupKFold", "GroupShuffleSplit", "KFold", "LeaveOneGroupOut",
           "LeavePGroupsOut", "PredefinedSplit", "RepeatedKFold", "RepeatedStratifiedKFold",
           "ShuffleSplit", "StratifiedKFold", "StratifiedShuffleSplit", "TimeSeriesSplit",
           "train_test_split"]


#: the splitters' own draws (a stratified hold-out's repeat seeds and class
#: orders), position = repeat: a stream of the user range no UDF of a run
#: shares with them ("split" in ASCII)
SPLITTERS = stream(Purpose.USER, 0x73706C6974)


def _seeding(seed, random_state):
    """``(seed, state)`` of a splitter's *seed* and *random_state*: an int
    seed and None, None and a ``numpy.random.RandomState`` to draw from, or
    ``(None, None)`` when neither is given."""
    if random_state is np.random:
        random_state = np.random.mtrand._rand        # scikit-learn's reading of np.random
    if isinstance(random_state, np.random.RandomState):
        if seed is not None:
            raise ParameterError(f"seed={seed} and random_state={random_state!r} disagree; "
                                 "give one")
        return None, random_state
    if random_state is not None and (not isinstance(random_state, numbers.Integral)
                                     or isinstance(random_state, bool)):
        raise ParameterError(f"random_state must be None, an integer seed or a "
                             f"numpy.random.RandomState, as scikit-learn's; got "
                             f"{type(random_state).__name__}")
    if seed is not None and random_state is not None and int(seed) != int(random_state):
        raise ParameterError(f"seed={seed} and random_state={random_state} disagree; give one")
    chosen = seed if seed is not None else random_state
    return (None if chosen is None else check_seed(chosen)), None


def _drawn(state):
    """One 64-bit seed drawn from a RandomState (its stream advances)."""
    return int(state.randint(0, 1 << 64, dtype=np.uint64))


def _call_seed(seed, random_state):
    """The seed of one call (train_test_split): the given one, one drawn
    from a RandomState, or a fresh one."""
    seed, state = _seeding(seed, random_state)
    if state is not None:
        return _drawn(state)
    return fresh_seed() if seed is None else seed


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
    if isinstance(X, range):
        return len(X)
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

    def __init__(self, n_splits, seed, random_state, random=True):
        if not isinstance(n_splits, numbers.Integral) or isinstance(n_splits, bool):
            raise ParameterError(f"n_splits must be an integer, got {n_splits!r}")
        self.n_splits = int(n_splits)
        self.seed, self._state = _seeding(seed, random_state)
        if random and self.seed is None and self._state is None:
            self.seed = fresh_seed()        # drawn once: every split() the same folds
        self.random_state = self.seed if self._state is None else self._state
        #: whether the splits are drawn (False: the same on every call, which
        #: scikit-learn's searches read, e.g. HalvingGridSearchCV)
        self.shuffle = random

    def get_n_splits(self, X=None, y=None, groups=None):
        """The number of (train, test) pairs ``split`` yields."""
        return self.n_splits

    def _split_seed(self):
        """The seed of one ``split`` call: the splitter's, or one drawn from
        its RandomState."""
        return self.seed if self._state is None else _drawn(self._state)

    def _seed_params(self):
        return {"seed": self.seed} if self._state is None else {"random_state": self._state}

    def _ignored(self, groups):
        """Warn, when ``split`` is called (not when its pairs are first
        asked for, as scikit-learn warns), that *groups* is ignored."""
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
    folds are drawn by (:meth:`_by`).

    *shuffle* is scikit-learn's keyword: the folds are drawn (True, the
    default here); ``shuffle=False`` gives scikit-learn's unshuffled folds
    (the subclass's ``_in_order``: no seed, refused with one, as
    scikit-learn refuses it)."""

    def __init__(self, n_splits=5, *, shuffle=True, seed=None, random_state=None):
        shuffle = check_bool("shuffle", shuffle)
        if not shuffle and (seed is not None or random_state is not None):
            raise ParameterError(f"shuffle=False takes the folds in the rows' order, so "
                                 f"seed={seed!r} and random_state={random_state!r} would change "
                                 "nothing: leave them None, or set shuffle=True")
        super().__init__(n_splits, seed, random_state, random=shuffle)
        if self.n_splits < 2:
            raise ParameterError(f"n_splits must be >= 2, got {self.n_splits}")

    def _params(self):
        seeding = self._seed_params() if self.shuffle else {"shuffle": False}
        return {"n_splits": self.n_splits, **seeding}

    def _by(self, X, y, groups):
        """The keywords of ``api.kfold`` besides the count and the seed."""
        return {}

    def _folds(self, X, y, groups):
        keywords = self._by(X, y, groups)
        if "strata" in keywords:        # the classes' codes (see _stratified_folds)
            names, rows = sample_indices(_KFoldUDF(_n_samples(X), self.n_splits, **keywords),
                                         self._split_seed())
        else:
            rows = api.kfold(_n_samples(X), self.n_splits, self._split_seed(), **keywords)
            rows = {name: rows.indices(name) for name in rows.names}
        for j in range(self.get_n_splits()):
            yield rows[f"train-{j}"], rows[f"test-{j}"]


class KFold(_Folds):
    """k folds of sizes within one of each other (the first ``m % k`` one row
    larger); each pair is (every other row, fold i).  ``balanced=False``
    gives the paper's folds instead: an independent fold per row.
    ``shuffle=False``: scikit-learn's unshuffled folds, consecutive rows in
    order (no seed)."""

    def __init__(self, n_splits=5, *, shuffle=True, seed=None, random_state=None,
                 balanced=True):
        super().__init__(n_splits, shuffle=shuffle, seed=seed, random_state=random_state)
        self.balanced = check_bool("balanced", balanced)
        if not self.shuffle and not self.balanced:
            raise ParameterError("balanced=False draws a fold for each row; shuffle=False "
                                 "takes the folds in the rows' order: give one of them")

    def _params(self):
        return {**super()._params(), "balanced": self.balanced}

    def _by(self, X, y, groups):
        return {"balanced": self.balanced}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        return self._folds(X, y, groups) if self.shuffle else self._in_order(X)

    def _in_order(self, X):
        n = _n_samples(X)
        if n < self.n_splits:
            raise ParameterError(f"n_splits={self.n_splits} must be <= the number of rows "
                                 f"({n})")
        k = self.n_splits
        sizes = n // k + (np.arange(k) < n % k)
        yield from _fold_pairs(np.repeat(np.arange(k), sizes), k)


class RepeatedKFold(_Folds):
    """``n_repeats`` independent :class:`KFold` splits, ``n_splits *
    n_repeats`` pairs in scikit-learn's order (``kfold --repeats``)."""

    def __init__(self, *, n_splits=5, n_repeats=10, seed=None, random_state=None):
        super().__init__(n_splits, seed=seed, random_state=random_state)
        self.n_repeats = _whole("n_repeats", n_repeats, 1)

    def _params(self):
        return {"n_splits": self.n_splits, "n_repeats": self.n_repeats,
                **self._seed_params()}

    def get_n_splits(self, X=None, y=None, groups=None):
        return self.n_splits * self.n_repeats

    def _by(self, X, y, groups):
        return {"repeats": self.n_repeats}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        return self._folds(X, y, groups)


class RepeatedStratifiedKFold(RepeatedKFold):
    """``n_repeats`` independent :class:`StratifiedKFold` splits."""

    def _by(self, X, y, groups):
        return {"repeats": self.n_repeats,
                **_stratified_folds(X, y, self.n_splits, "RepeatedStratifiedKFold")}

    def split(self, X, y, groups=None):
        self._ignored(groups)
        return self._folds(X, y, groups)


def _labels_of(X, y, splitter, arg="y"):
    """The labels *y* (or groups: *arg*) a splitter needs, as many as X's rows."""
    if y is None:
        what = "the classes of y" if arg == "y" else "the groups"
        raise ParameterError(f"{splitter} splits by {what}: pass {arg} to split()")
    n, m = _n_samples(X), _n_samples(y)
    if m != n:
        raise ParameterError(f"{arg} has {m} rows but X has {n}")
    return np.arange(y.start, y.stop, y.step) if isinstance(y, range) else y


def _class_codes(X, y, splitter, multilabel=False, arg="y"):
    """``(codes, names)``: the class of every row of *y* numbered in the
    order the classes first appear (``names[c]``: class c's value), so the
    codes, and the folds drawn from them, do not change when the classes
    are renamed.  *multilabel*: a 2-D y's rows are classes (each row's
    combination of labels, as scikit-learn's stratified hold-out reads a
    multilabel y); else y is one value per row (or a column)."""
    y = _labels_of(X, y, splitter, arg)
    values = np.asarray(getattr(y, "values", y))
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim == 2 and multilabel:
        if values.dtype.kind == "f" and np.isnan(values).any():
            raise ParameterError(f"{arg} must not be NaN: give every row a class")
        if values.dtype == object:          # rows as text, as scikit-learn joins them
            values = np.array([" ".join(map(str, row)) for row in values.tolist()])
    if values.ndim not in (1, 2) or (values.ndim == 2 and not multilabel) or not values.size:
        rows = " (or a row of labels)" if multilabel else ""
        raise ParameterError(f"{arg} must be one value per row{rows}, got shape {values.shape}")
    if values.dtype.kind == "f" and np.isnan(values).any():
        raise ParameterError(f"{arg} must not be NaN: give every row a class")
    if values.dtype == object and np.equal(values, None).any():
        raise ParameterError(f"{arg} must not be None: give every row a class")
    try:
        classes, first, codes = _first_seen(values)
    except TypeError:
        raise ParameterError(f"{arg} must be comparable values of one kind (numbers or "
                             f"strings)") from None
    order = np.argsort(first)
    rank = np.empty(order.size, np.int64)
    rank[order] = np.arange(order.size)
    return rank[codes], [_name(v) for v in classes[order]]


def _first_seen(values):
    """``(distinct values, the first row of each, each row's value)`` as
    ``np.unique`` gives them; for a few classes all among the first 65,536
    rows, without sorting every row."""
    axis = {"axis": 0} if values.ndim == 2 else {}
    head = values[:1 << 16]
    classes, first, codes = np.unique(head, return_index=True, return_inverse=True, **axis)
    if values.shape[0] == head.shape[0]:
        return classes, first, codes.reshape(-1)
    if values.ndim == 1 and classes.size <= 1 << 12:
        codes = np.searchsorted(classes, values)
        if np.array_equal(classes[np.minimum(codes, classes.size - 1)], values):
            return classes, first, codes
    classes, first, codes = np.unique(values, return_index=True, return_inverse=True, **axis)
    return classes, first, codes.reshape(-1)


def _name(value):
    return tuple(value.tolist()) if isinstance(value, np.ndarray) else value.item() \
        if isinstance(value, np.generic) else value


class _AnyClassSize(Strata):
    """Classes as codes, a class with fewer rows than folds split as
    scikit-learn splits it (some folds without it; the splitter has
    warned): the jobs' rows for such a class, which ``kfold --stratify``
    refuses."""

    def check_at_least(self, rows, what):
        return None


def _checked_codes(X, y, k, splitter, stacklevel):
    """The classes of *y* numbered by first appearance, after scikit-learn's
    checks for k stratified folds: every class smaller than k refused, a
    class smaller than k warned about (*stacklevel*: the warning's caller)."""
    codes, names = _class_codes(X, y, splitter)
    counts = np.bincount(codes)
    if k <= codes.size and counts.max() < k:
        raise ParameterError(f"n_splits={k} is more than the rows of every class of y (the "
                             f"largest has {int(counts.max())}); use fewer splits")
    if counts.min() < k:
        warnings.warn(f"The least populated class in y has only {int(counts.min())} members, "
                      f"which is less than n_splits={k}.", UserWarning, stacklevel=stacklevel + 1)
    return codes


def _stratified_folds(X, y, k, splitter):
    """The k-fold UDF's keywords stratifying by the classes of *y*
    (numbered by first appearance), checked as :func:`_checked_codes`."""
    return {"stratify": "y", "strata": _AnyClassSize.of(_checked_codes(X, y, k, splitter, 4))}


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
    than the largest group.  Fewer groups than folds is refused.
    ``shuffle=False``: scikit-learn's unshuffled GroupKFold (no seed), the
    same rule over the groups by size, largest first (of groups of one
    size, the last in sorted order first)."""

    def _by(self, X, y, groups):
        return {"by_groups": _labels_of(X, groups, "GroupKFold", "groups")}

    def split(self, X, y=None, groups=None):
        return self._folds(X, y, groups) if self.shuffle else self._in_order(X, groups)

    def _in_order(self, X, groups):
        k = self.n_splits
        codes = _group_codes(X, groups, "GroupKFold")
        sizes = np.bincount(codes)
        if sizes.size < k:
            raise ParameterError(f"{k} folds of whole groups need at least {k} groups, got "
                                 f"{sizes.size}")
        fold_of, load = np.empty(sizes.size, np.int64), np.zeros(k, np.int64)
        for group in np.lexsort((-np.arange(sizes.size), -sizes)).tolist():
            fold_of[group] = lightest = int(np.argmin(load))
            load[lightest] += sizes[group]
        yield from _fold_pairs(fold_of[codes], k)


class StratifiedKFold(_Folds):
    """k folds that hold every class of y in proportion: each class within
    one row of ``n_c / k`` in every fold, the folds' sizes within one of
    each other (scikit-learn's allocation, the classes numbered in the order
    they first appear); a class with fewer than k rows is split as
    scikit-learn splits it, with its warning, and refused when every class
    is that small.  ``shuffle=False``: scikit-learn's unshuffled folds (no
    seed): fold i gets the same number of each class's rows as the drawn
    folds, each class's rows dealt to the folds in row order."""

    def _by(self, X, y, groups):
        return _stratified_folds(X, y, self.n_splits, "StratifiedKFold")

    def split(self, X, y, groups=None):
        self._ignored(groups)
        return self._folds(X, y, groups) if self.shuffle else self._in_order(X, y)

    def _in_order(self, X, y):
        k, n = self.n_splits, _n_samples(X)
        if k > n:
            raise ParameterError(f"n_splits={k} must be <= the number of rows ({n})")
        codes = _checked_codes(X, y, k, "StratifiedKFold", 3)
        counts = np.bincount(codes)
        # class c's rows in fold i: how many of the classes' codes, listed in
        # order of the codes, fall at the places i, i + k, i + 2k, ...
        listed = np.repeat(np.arange(counts.size), counts)
        per_fold = np.array([np.bincount(listed[i::k], minlength=counts.size)
                             for i in range(k)])
        # each class's rows, in row order, dealt to folds 0, 1, ... in those numbers
        fold = np.empty(codes.size, np.int64)
        fold[np.argsort(codes, kind="stable")] = np.repeat(np.tile(np.arange(k), counts.size),
                                                           per_fold.T.reshape(-1))
        yield from _fold_pairs(fold, k)


def _fold_pairs(fold, k):
    """(every other row, fold i) for i < k, rows in order, given each row's
    fold."""
    rows = np.arange(fold.size)
    for i in range(k):
        test = fold == i
        yield rows[~test], rows[test]


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
    shares = [v for v in (test_size, train_size) if isinstance(v, numbers.Real)
              and not isinstance(v, numbers.Integral)]
    if len(shares) == 2 and 0 < test_size < 1 and 0 < train_size < 1 \
            and test_size + train_size > 1:
        raise ParameterError(f"test_size={test_size} and train_size={train_size} add up to "
                             f"{test_size + train_size:g}: shares of the rows must add up to at "
                             f"most 1; reduce one of them")
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
                "train_size": self.train_size, **self._seed_params()}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        return self._pairs(X)

    def _pairs(self, X):
        n = _n_samples(X)
        n_train, n_test = _sizes(n, self.test_size, self.train_size, 0.1)
        yield from _holdout(n, n_train, n_test, self.n_splits, self._split_seed())


def _stratified_holdout(n, n_train, n_test, repeats, seed, codes, names, arg="y"):
    """Stratified hold-out pairs by class *codes* (classes with *names*),
    refused as scikit-learn refuses them: a class of one row, fewer
    training or test rows than classes.  Repeat w draws its seed ``s_w``
    and an order of the classes (a uniform permutation, Fisher-Yates on
    :meth:`Draws.below`) from :data:`SPLITTERS` at position w, and is the
    exact hold-out of seed ``s_w`` stratified by the codes in that order: a
    tie between classes' shares goes to a random class, not the first."""
    counts = np.bincount(codes)
    small = int(np.argmin(counts))
    if counts[small] < 2:
        raise ParameterError(f"class {names[small]!r} of {arg} has 1 row: a stratified split "
                             "needs at least 2 rows of every class, one for each side; merge "
                             "or drop that class")
    for side, rows in (("train_size", n_train), ("test_size", n_test)):
        if rows < counts.size:
            raise ParameterError(f"{side} gives {rows} rows, fewer than the {counts.size} "
                                 f"classes of {arg}: every class needs a row on each side; "
                                 f"make it at least {counts.size} rows")
    rng = PositionRNG(seed)
    for w in range(repeats):
        draws = rng.draws(SPLITTERS, w)
        seed_w = draws.raw()
        yield _holdout(n, n_train, n_test, 1, seed_w, _permutation(draws, counts.size)[codes])[0]


def _permutation(draws, size):
    """A uniform permutation of ``range(size)`` (Fisher-Yates: position
    ``size - 1 - i`` swapped with ``draws.below``'s i-th value)."""
    order = np.arange(size, dtype=np.int64)
    if size > 1:
        for i, j in enumerate(draws.below(np.arange(size, 1, -1)).tolist()):
            last = size - 1 - i
            order[last], order[j] = order[j], order[last]
    return order


class StratifiedShuffleSplit(ShuffleSplit):
    """:class:`ShuffleSplit` whose sides hold every class of y in
    proportion: each class's training rows within one of ``n_train * n_c /
    m``, its test rows the same share of the rest (ties between classes
    broken at random, per repeat: see the module's text).  A 2-D y
    (multilabel) stratifies by each row's combination of labels.  A class
    of one row, or fewer training or test rows than classes, is refused,
    as scikit-learn refuses them."""

    def split(self, X, y, groups=None):
        self._ignored(groups)
        return self._stratified_pairs(X, y)

    def _stratified_pairs(self, X, y):
        codes, names = _class_codes(X, y, "StratifiedShuffleSplit", multilabel=True)
        n = codes.size
        n_train, n_test = _sizes(n, self.test_size, self.train_size, 0.1)
        yield from _stratified_holdout(n, n_train, n_test, self.n_splits, self._split_seed(),
                                       codes, names)


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
        super().__init__(n_splits, None, None, random=False)
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
        return self._rounds(X)

    def _rounds(self, X):
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
        return {"n_splits": self.n_splits, "size": self.size, **self._seed_params()}

    def split(self, X, y=None, groups=None):
        self._ignored(groups)
        return self._bags(X)

    def _bags(self, X):
        samples = api.bootstrap(_n_samples(X), self.n_splits, self._split_seed(), self.size,
                                oob=True)
        for i in range(self.n_splits):
            yield samples.indices(f"sample-{i}"), samples.indices(f"oob-{i}")


def _group_codes(X, groups, splitter):
    """Each row's group numbered in the groups' sorted order (scikit-learn's
    order): one finite value per row, None refused."""
    groups = _labels_of(X, groups, splitter, "groups")
    values = np.asarray(getattr(groups, "values", groups))
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ParameterError(f"groups must be one value per row, got shape {values.shape}")
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        bad = values[~np.isfinite(values)][0]
        raise ParameterError(f"groups must be finite numbers, got {bad}: give every row a "
                             "group")
    if values.dtype == object and np.equal(values, None).any():
        raise ParameterError("groups must not be None: give every row a group")
    _, codes = np.unique(values, return_inverse=True)
    return codes.reshape(-1)


class LeavePGroupsOut(_GroupSplitter):
    """Each combination of *n_groups* groups in turn as the test set (the
    rest training), combinations in lexicographic order of the sorted
    groups, rows in order: scikit-learn's indices exactly.  No randomness."""

    def __init__(self, n_groups):
        super().__init__(1, None, None, random=False)
        self.n_groups = _whole("n_groups", n_groups, 1)

    def _params(self):
        return {"n_groups": self.n_groups}

    def _codes(self, X, groups):
        codes = _group_codes(X, groups, type(self).__name__)
        if codes.max(initial=-1) + 1 <= self.n_groups:
            raise ParameterError(f"{type(self).__name__} needs more than {self.n_groups} "
                                 f"group{'s' if self.n_groups != 1 else ''}, got "
                                 f"{codes.max(initial=-1) + 1}")
        return codes

    def get_n_splits(self, X=None, y=None, groups=None):
        if groups is None:
            raise ParameterError(f"{type(self).__name__} splits by the groups: pass groups")
        return math.comb(int(self._codes(np.empty(_n_samples(groups)), groups).max()) + 1,
                         self.n_groups)

    def split(self, X, y=None, groups=None):
        codes = self._codes(X, groups)
        rows = np.arange(codes.size)
        for chosen in itertools.combinations(range(int(codes.max()) + 1), self.n_groups):
            test = np.isin(codes, chosen)
            yield rows[~test], rows[test]


class LeaveOneGroupOut(LeavePGroupsOut):
    """Each group in turn as the test set (groups in sorted order)."""

    def __init__(self):
        super().__init__(1)

    def _params(self):
        return {}


class PredefinedSplit(_Splitter):
    """scikit-learn's ``PredefinedSplit``: *test_fold* gives each row's test
    fold (-1: always in training); one split per fold, folds in sorted
    order.  No randomness."""

    def __init__(self, test_fold):
        super().__init__(1, None, None, random=False)
        self.test_fold = np.asarray(test_fold, dtype=int).reshape(-1)
        self.unique_folds = np.unique(self.test_fold)
        self.unique_folds = self.unique_folds[self.unique_folds != -1]
        self.n_splits = int(self.unique_folds.size)

    def _params(self):
        return {"test_fold": self.test_fold}

    def split(self, X=None, y=None, groups=None):
        self._ignored(groups)
        return self._pairs()

    def _pairs(self):
        rows = np.arange(self.test_fold.size)
        for fold in self.unique_folds:
            test = self.test_fold == fold
            yield rows[~test], rows[test]


def _indexable(data):
    """*data* as :func:`_take` takes its rows: a sparse matrix in CSR (the
    format scikit-learn returns whatever it is given)."""
    return data.tocsr() if api._is_sparse(data) else data


def _take(data, rows):
    if hasattr(data, "iloc"):       # pandas, and frames like it (scikit-learn's MockDataFrame)
        return data.iloc[rows]
    if isinstance(data, (list, range)):
        return [data[i] for i in rows.tolist()]
    if isinstance(data, tuple):
        return tuple(data[i] for i in rows.tolist())
    return data[rows]


def train_test_split(*arrays, test_size=None, train_size=None, seed=None, random_state=None,
                     shuffle=True, stratify=None):
    """scikit-learn's ``train_test_split``: ``[a_train, a_test, b_train,
    b_test, ...]`` for the *arrays* (numpy, pandas -- index kept -- or a
    frame with ``.iloc``, lists or ranges -- lists back --, sparse matrices --
    CSR back, as scikit-learn --, all with the same rows), exact sizes (test
    25 % when neither size is given), rows in the order ``holdout --exact``
    writes them; ``shuffle=False`` takes the first rows for training, in
    order.  *stratify*: labels (one per row, or a row of labels each:
    multilabel) whose classes both sides hold in proportion, the first pair
    of :class:`StratifiedShuffleSplit` with the same seed.  *random_state*:
    an integer (the seed), a RandomState (one seed drawn from it per call)
    or None (a fresh seed per call)."""
    if not arrays:
        raise ParameterError("train_test_split needs at least one array")
    shuffle = check_bool("shuffle", shuffle)
    arrays = [_indexable(data) for data in arrays]
    n = _n_samples(arrays[0])
    for i, data in enumerate(arrays[1:], 1):
        if _n_samples(data) != n:
            raise ParameterError(f"array {i} has {_n_samples(data)} rows, array 0 has {n}")
    n_train, n_test = _sizes(n, test_size, train_size, 0.25)
    if shuffle:
        seed = _call_seed(seed, random_state)
        if stratify is not None:
            codes, names = _class_codes(arrays[0], stratify, "stratify=", multilabel=True,
                                        arg="stratify")
            train, test = next(_stratified_holdout(n, n_train, n_test, 1, seed, codes, names,
                                                   "stratify"))
        else:
            train, test = _holdout(n, n_train, n_test, 1, seed)[0]
    elif stratify is not None:
        raise ParameterError("stratify needs shuffle=True (an ordered split keeps no "
                             "proportions)")
    else:
        train, test = np.arange(n_train), np.arange(n_train, n_train + n_test)
    return [part for data in arrays for part in (_take(data, train), _take(data, test))]
