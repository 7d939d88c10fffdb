"""Python API: the jobs' samples, computed in memory.

For the same seed and parameters these functions return exactly the rows, in
exactly the order, that the jobs write (a sample's order is its rows sorted by
``(relative position, row id)``; a fold-mode training set is the full blocks
of the other folds followed by its extra matrix, so it also depends on the
block size)::

    import numpy as np
    from samplegen.jobs import api
    X = np.load("features.npy")
    s = api.holdout(X, ratio=0.8, repeats=3, seed=7)
    s.names                      # ['train-0', 'test-0', ...]
    s.indices("train-0")         # input row positions, in sample order
    s["train-0"]                 # X[s.indices("train-0")]
    api.read_run("out/")         # the same interface over a run directory

``X`` is anything with rows along its first axis, and a sample comes back as
the same type: a numpy array of any dtype and ``ndim >= 1``, a pandas
DataFrame or Series (rows taken by position with ``.iloc``, so the index labels
are kept, repeated where a bootstrap repeats a row), a SciPy sparse matrix, a
list or a tuple; another array-like (``__array__``) is converted with
``np.asarray``.  ``X`` may also be an integer (a row count) when only indices
are wanted.  Labels and groups travel apart from ``X``, with one row per row of
``X``, and come back in the same order::

    s = api.kfold(df, 5, seed=7, y=labels, groups=patients)
    for train, test in s.pairs():            # ('train-0', 'test-0'), ...
        model.fit(*s.xy(train)).score(*s.xy(test))
    s.y("test-0"), s.groups("test-0")        # also s.take(name, weights)

Bad input (a type without rows, no rows, lengths that differ) raises
:class:`ParameterError` (a ``ValueError``), and so does a numeric parameter
that is not a finite number (a string, a bool, NaN, an infinity) or, where an
integer is asked for, not a whole number: every function checks them the
same way (:func:`_check_numbers`) before any work.

A sampling-UDF (``sample(X, "mymodule:f", ...)``) runs in the caller's
process, as any function it calls: its exceptions propagate as they are, a
``sys.exit()`` in it is an :class:`EngineError` (nothing is returned), what
it prints goes to stderr; an ``os._exit()`` ends the caller's process, which
no function can prevent -- run untrusted UDFs with ``samplegen sample``,
whose runs are a child process of the command.
"""
import math
import numbers

import numpy as np

from samplegen.udfs.builtin import Bootstrap, HoldOut, KFold
from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.rng import PositionRNG
from samplegen.udfs.strata import Strata
from samplegen.udfs.weighted import RowWeights, Weighted

from . import tables
from .driver import info, open_sample
from .phases import sample_indices

_KINDS = "a numpy array, a pandas DataFrame or Series, a SciPy sparse matrix, a list"


def _check_numbers(function, integers=(), reals=(), optional=()):
    """Refuse, with one ParameterError naming *function*'s parameter, its
    value and the value's type, a numeric parameter that is not a number:
    *integers* and *reals* are ``(name, value)`` pairs that must be whole
    numbers and finite numbers (Python's or numpy's; a bool, a string, NaN
    or an infinity is refused); the names in *optional* may also be None.
    The ranges are the UDFs' to check."""
    for kind, pairs in (("an integer", integers), ("a number", reals)):
        for name, value in pairs:
            if value is None and name in optional:
                continue
            number = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
            if number and kind == "an integer" and not isinstance(value, numbers.Integral):
                number = math.isfinite(value) and float(value).is_integer()
            if not number:
                raise ParameterError(f"{function}(): {name} must be {kind}, got {value!r} "
                                     f"({type(value).__name__}); pass it as a number, e.g. "
                                     f"{name}={_example(name, kind)}")
            if not math.isfinite(value):
                raise ParameterError(f"{function}(): {name} must be a finite number, got "
                                     f"{value!r}")


def _example(name, kind):
    return {"ratio": "0.8", "fraction": "1.0", "k": "5", "seed": "7"}.get(
        name, "10" if kind == "an integer" else "0.5")


def _rows(arg, data, count_ok=False):
    """``(number of rows, data)`` of the API argument named *arg*: data as it
    will be indexed (an array-like converted to numpy), or None for a row count."""
    if count_ok and isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        if data < 1:
            raise ParameterError(f"{arg} as a row count must be >= 1, got {data}")
        return int(data), None
    if hasattr(type(data), "iloc"):                      # pandas (and look-alikes)
        n = len(data)
    elif _is_sparse(data):
        n = data.shape[0]
    elif isinstance(data, (list, tuple)):
        n = len(data)
    elif isinstance(data, np.ndarray) or (hasattr(data, "__array__")
                                          and not isinstance(data, (str, bytes, bool))):
        data = np.asarray(data) if not isinstance(data, np.ndarray) else data
        if data.ndim == 0:
            raise ParameterError(f"{arg} must have rows along its first axis, got a 0-d array "
                                 f"({data!r}); pass an array of one or more dimensions")
        n = data.shape[0]
    else:
        count = ", or a row count" if count_ok else ""
        raise ParameterError(f"{arg} must be {_KINDS}{count}, got {type(data).__name__}; "
                             f"convert it to one of these first")
    if n == 0:
        raise ParameterError(f"{arg} has no rows; pass at least one row")
    return n, data


def _is_sparse(data):
    return hasattr(data, "tocsr") and hasattr(data, "format") and hasattr(data, "shape")


def _aligned(n, arg, data):
    """*data* (argument *arg*) checked to have *n* rows, like X; None stays None."""
    if data is None:
        return None
    rows, data = _rows(arg, data)
    if rows != n:
        raise ParameterError(f"{arg} has {rows} rows but X has {n}; pass one {arg} "
                             f"value per row of X")
    return data


def _take(data, idx):
    """The rows *idx* (positions) of *data*, as the same type."""
    if hasattr(type(data), "iloc"):
        return data.iloc[idx]
    if _is_sparse(data):
        return data.tocsr()[idx].asformat(data.format)
    if isinstance(data, list):
        return [data[i] for i in idx.tolist()]
    if isinstance(data, tuple):
        return tuple(data[i] for i in idx.tolist())
    return data[idx]


class Samples:
    """Sample matrices as row positions into the input, with the input's
    rows (``s[name]``), labels (``s.y(name)``) and groups (``s.groups(name)``)."""

    def __init__(self, names, indices, data=None, y=None, groups=None, n_rows=None):
        self.names = list(names)
        self._indices = indices
        self._data = data
        self._y = y
        self._groups = groups
        #: rows of the input (X, y and groups have as many)
        self.n_rows = n_rows

    def indices(self, name):
        """Input row positions of sample *name*, in sample order."""
        try:
            return self._indices[name]
        except KeyError:
            raise KeyError(f"no sample {name!r}; samples: {', '.join(self.names)}") from None

    def array(self, name):
        """The sample's rows of X, as X's type (a new object)."""
        if self._data is None:
            raise ParameterError("these samples were computed from a row count; pass an array "
                                 "to get materialized rows")
        return _take(self._data, self.indices(name))

    __getitem__ = array

    def y(self, name):
        """The sample's labels, in the order of its rows (as y's type)."""
        return self._given("y", self._y, name)

    def groups(self, name):
        """The sample's groups, in the order of its rows (as groups' type)."""
        return self._given("groups", self._groups, name)

    def xy(self, name):
        """``(X rows, y rows)`` of the sample, for ``model.fit(*s.xy(name))``;
        the second is None when no y was given."""
        return self.array(name), None if self._y is None else self.y(name)

    def take(self, name, data):
        """The sample's rows of any other array with one row per input row
        (sample weights, ids, ...), with the same rules as X."""
        return _take(_aligned(self.n_rows, "data", data), self.indices(name))

    def pairs(self):
        """``[(train name, test name), ...]``: each ``train-<i>`` with its
        ``test-<i>`` (hold-out and k-fold samples).  As row positions,
        ``[(s.indices(a), s.indices(b)) for a, b in s.pairs()]`` is a ``cv=``
        for scikit-learn."""
        names = set(self.names)
        pairs = [(name, "test-" + name[6:]) for name in self.names
                 if name.startswith("train-") and "test-" + name[6:] in names]
        if not pairs:
            raise ParameterError(f"no train-<i>/test-<i> pairs among {', '.join(self.names[:6])}"
                                 f"{', ...' if len(self.names) > 6 else ''}; pairs() is for "
                                 f"hold-out and k-fold samples")
        return pairs

    def _given(self, arg, data, name):
        if data is None:
            raise ParameterError(f"no {arg} was given; pass {arg}= with one value per input "
                                 f"row to get a sample's {arg}")
        return _take(data, self.indices(name))

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        sizes = ", ".join(f"{n}: {len(self._indices[n])}" for n in self.names[:6])
        more = ", ..." if len(self.names) > 6 else ""
        return f"<Samples {sizes}{more}>"


class RunSamples(Samples):
    """Samples read back from a run directory written by a job: ``s[name]``
    is the stored matrix; y and groups, if given, are indexed by the stored
    input row ids."""

    def __init__(self, path, y=None, groups=None):
        self.path = path
        self.manifest = info(path)
        if self.manifest["kind"] != "run":
            raise ValueError(f"{path} is a matrix, not a run directory")
        n = self.manifest["input"]["rows"]
        super().__init__([s["name"] for s in self.manifest["samples"]], {},
                         y=_aligned(n, "y", y), groups=_aligned(n, "groups", groups), n_rows=n)
        self._loaded = {}

    def _load(self, name):
        if name not in self._loaded:
            if name not in self.names:
                raise KeyError(f"no sample {name!r}; samples: {', '.join(self.names)}")
            if self.manifest.get("run_kind") == tables.TABLE_RUN:
                self._loaded[name] = (None, tables.read_sample(self.path, self.manifest, name))
            else:
                self._loaded[name] = open_sample(self.path, name).to_numpy()
        return self._loaded[name]

    def indices(self, name):
        ids = self._load(name)[0]
        if ids is None:
            raise ParameterError(f"{self.path} holds tables, which keep the rows, not their ids; "
                                 f"read a sample's rows with s[{name!r}]")
        return ids

    def array(self, name):
        """The sample's rows: a matrix run's as a numpy array, a table run's
        as a pandas DataFrame (a ``.npy`` table's as an array), its files
        checked against their checksums first."""
        return self._load(name)[1]

    __getitem__ = array

    def __repr__(self):
        return f"<RunSamples {self.path}: {', '.join(self.names[:6])}>"


def read_run(path, y=None, groups=None):
    """Open a run directory written by ``samplegen`` (holdout, kfold, ...);
    *y* and *groups* have one value per row of the job's input, in its row
    order."""
    return RunSamples(path, y, groups)


def _strata(n, stratify, y):
    """``(label name, Strata)`` of the API's *stratify* argument: True
    (the labels *y*), labels of their own (one per row), or None."""
    return _side(n, "stratify", stratify, "y", y, True)


def _grouping(n, by_groups, groups):
    """``(name, Strata)`` of the API's *by_groups* argument: True (the
    *groups*), groups of their own (one per row), or None."""
    return _side(n, "by_groups", by_groups, "groups", groups, False)


def _side(n, arg, value, carried_arg, carried, ranked):
    if value is None or value is False:
        return None, None
    if value is True:
        if carried is None:
            raise ParameterError(f"{arg}=True uses {carried_arg}: pass {carried_arg}, or the "
                                 f"values as {arg}=")
        return carried_arg, Strata.of(_labels(carried), ranked)
    return arg, Strata.of(_labels(_aligned(n, arg, value)), ranked)


def _labels(data):
    """Labels or groups as a 1-D numpy array (pandas: its values)."""
    values = np.asarray(getattr(data, "values", data))
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ParameterError(f"labels or groups to split by must be one value per row, got "
                             f"shape {values.shape}")
    return values


def _inputs(X, y, groups):
    """``(n, X, y, groups)``: the arguments checked, with one row each per row of X."""
    n, data = _rows("X", X, count_ok=True)
    return n, data, _aligned(n, "y", y), _aligned(n, "groups", groups)


def _samples(udf, inputs, seed, block_size=1000):
    n, data, y, groups = inputs
    names, indices = sample_indices(udf, seed, block_size)
    return Samples(names, indices, data, y, groups, n)


def holdout(X, ratio, seed, repeats=1, fraction=1.0, *, exact=True, stratify=None,
            by_groups=None, y=None, groups=None):
    """Hold-out pairs ``train-<w>`` / ``test-<w>`` (see :class:`udfs.HoldOut`;
    *exact*: exact sizes (the default), False: the paper's coin per row;
    *stratify*: True to keep the classes of *y* in proportion on both sides,
    or labels of its own, one per row; *by_groups*: True to keep each group
    of *groups* on one side, or groups of its own)."""
    _check_numbers("holdout", integers=[("seed", seed), ("repeats", repeats)],
                   reals=[("ratio", ratio), ("fraction", fraction)])
    inputs = _inputs(X, y, groups)
    strata = _strata(inputs[0], stratify, inputs[2])
    grouping = _grouping(inputs[0], by_groups, inputs[3])
    return _samples(HoldOut(inputs[0], ratio, repeats, fraction, exact, *strata, *grouping),
                    inputs, seed)


def kfold(X, k, seed, naive=False, block_size=1000, *, balanced=True, stratify=None,
          by_groups=None, repeats=1, y=None, groups=None):
    """k folds ``test-<i>`` and training sets ``train-<i>`` (*balanced*: fold
    sizes within one of each other, the default; *stratify*, *by_groups*:
    as :func:`holdout`'s, each fold holds each class in proportion, or whole
    groups; *repeats*: R sets of k folds, rounds ``r * k + i``).  In fold mode the
    training sets' row order follows dynamic composition with *block_size*
    (use the block size of the matrix the job reads to match it exactly)."""
    _check_numbers("kfold", integers=[("k", k), ("seed", seed), ("block_size", block_size),
                                      ("repeats", repeats)])
    inputs = _inputs(X, y, groups)
    strata = _strata(inputs[0], stratify, inputs[2])
    grouping = _grouping(inputs[0], by_groups, inputs[3])
    return _samples(KFold(inputs[0], k, naive, balanced, *strata, *grouping, repeats=repeats),
                    inputs, seed, block_size)


def bootstrap(X, samples, seed, size=None, *, oob=False, stratify=None, y=None, groups=None):
    """Bootstrap samples ``sample-<i>`` of exactly *size* rows (default: all)
    and, with *oob*, each one's out-of-bag rows ``oob-<i>`` (*stratify*: as
    :func:`holdout`'s, each bag holds each class in proportion)."""
    _check_numbers("bootstrap", integers=[("samples", samples), ("seed", seed), ("size", size)],
                   optional=("size",))
    inputs = _inputs(X, y, groups)
    return _samples(Bootstrap(inputs[0], samples, size, oob, *_strata(inputs[0], stratify,
                                                                      inputs[2])), inputs, seed)


def weighted_sample(X, weights, seed, size=None, *, expected=None, replace=False, samples=1,
                    y=None, groups=None):
    """Weighted samples ``sample-<i>`` of the rows of X, in proportion to
    *weights* (one per row, finite, not negative; or the name of a column of
    a pandas X): exactly *size* rows as successive weighted draws, in draw
    order (*replace*: *size* draws with replacement), or *expected* rows
    expected by Poisson sampling (see :class:`udfs.weighted.Weighted`).
    The same rows as ``samplegen weighted`` with the same seed and weights."""
    _check_numbers("weighted_sample", integers=[("seed", seed), ("size", size),
                                                ("expected", expected), ("samples", samples)],
                   optional=("size", "expected"))
    inputs = _inputs(X, y, groups)
    n, data = inputs[0], inputs[1]
    if isinstance(weights, str) and weights in getattr(data, "columns", ()):
        values, label = data[weights], weights
    else:
        values, label = _aligned(n, "weights", weights), "weights"
    side = RowWeights.of(_labels(values), label)
    params = {"weights": label, "size": size, "expected": expected, "replace": replace,
              "samples": samples}
    udf = Weighted(n, weighting=side, **params)
    udf = Weighted(n, weighting=side, **params, **udf.prepare(PositionRNG(seed)))
    return _samples(udf, inputs, seed)


def sample(X, udf, seed, block_size=1000, *, y=None, groups=None, **params):
    """Any sampling-UDF by name or ``module:function`` with its parameters
    (*params*; ``y`` and ``groups`` are this function's own; a parameter
    that is a float must be finite, as a run's manifest requires)."""
    _check_numbers("sample", integers=[("seed", seed), ("block_size", block_size)],
                   reals=[(name, value) for name, value in params.items()
                          if isinstance(value, float)])
    inputs = _inputs(X, y, groups)
    return _samples(load_udf(udf, inputs[0], params), inputs, seed, block_size)
