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
    s.indices("train-0")         # input row ids, in sample order
    s["train-0"]                 # X[s.indices("train-0")]
    api.read_run("out/")         # the same interface over a run directory

``X`` may also be an integer (a row count) when only indices are wanted.
"""
import numpy as np

from samplegen.udfs.builtin import Bootstrap, HoldOut, KFold
from samplegen.udfs.custom import load_udf
from samplegen.udfs.rng import PositionRNG

from .driver import info, open_sample
from .phases import composed_ids

_RANGE_ROWS = 1 << 20


class Samples:
    """Sample matrices as row indices into an input array."""

    def __init__(self, names, indices, data=None):
        self.names = list(names)
        self._indices = indices
        self._data = data

    def indices(self, name):
        """Input row ids of sample *name*, in sample order."""
        try:
            return self._indices[name]
        except KeyError:
            raise KeyError(f"no sample {name!r}; samples: {', '.join(self.names)}") from None

    def array(self, name):
        """The sample's rows (a new array)."""
        if self._data is None:
            raise ValueError("these samples were computed from a row count; pass an array "
                             "to get materialized rows")
        return self._data[self.indices(name)]

    __getitem__ = array

    def __iter__(self):
        return iter(self.names)

    def __len__(self):
        return len(self.names)

    def __repr__(self):
        sizes = ", ".join(f"{n}: {len(self._indices[n])}" for n in self.names[:6])
        more = ", ..." if len(self.names) > 6 else ""
        return f"<Samples {sizes}{more}>"


class RunSamples(Samples):
    """Samples read back from a run directory written by a job."""

    def __init__(self, path):
        self.path = path
        self.manifest = info(path)
        if self.manifest["kind"] != "run":
            raise ValueError(f"{path} is a matrix, not a run directory")
        super().__init__([s["name"] for s in self.manifest["samples"]], {})
        self._loaded = {}

    def _load(self, name):
        if name not in self._loaded:
            if name not in self.names:
                raise KeyError(f"no sample {name!r}; samples: {', '.join(self.names)}")
            self._loaded[name] = open_sample(self.path, name).to_numpy()
        return self._loaded[name]

    def indices(self, name):
        return self._load(name)[0]

    def array(self, name):
        return self._load(name)[1]

    __getitem__ = array

    def __repr__(self):
        return f"<RunSamples {self.path}: {', '.join(self.names[:6])}>"


def read_run(path):
    """Open a run directory written by ``samplegen`` (holdout, kfold, ...)."""
    return RunSamples(path)


def _rows_and_data(X):
    if isinstance(X, (int, np.integer)):
        return int(X), None
    data = np.asarray(X)
    if data.ndim != 2:
        raise ValueError(f"X must be a 2-D array or a row count, got shape {data.shape}")
    return data.shape[0], data


def sample_indices(udf, seed, block_size=1000):
    """``{name: row ids in sample order}`` for a SamplingUDF instance."""
    rng = PositionRNG(seed)
    n = udf.n_rows
    ids, sample, relpos = [], [], []
    for a in range(0, n, _RANGE_ROWS):
        occ = udf(a, min(n, a + _RANGE_ROWS), rng)
        ids.append(occ.offset + a)
        sample.append(occ.sample)
        relpos.append(occ.relpos)
    ids, sample, relpos = (np.concatenate(x) for x in (ids, sample, relpos))
    order = np.lexsort((ids, relpos, sample))
    ids, sample, relpos = ids[order], sample[order], relpos[order]
    names = udf.sample_names()
    present = np.unique(sample)
    if names is None:
        names = [f"sample-{i}" for i in range(int(present.max()) + 1 if present.size else 0)]
    bounds = np.searchsorted(sample, np.arange(len(names) + 1))
    out = {name: ids[bounds[i]:bounds[i + 1]] for i, name in enumerate(names)}
    composed = udf.composed_names()
    folds = [(ids[bounds[i]:bounds[i + 1]], relpos[bounds[i]:bounds[i + 1]])
             for i in range(len(names))]
    out.update(zip(composed, composed_ids(block_size, folds, len(composed))))
    return list(names) + list(composed), out


def _samples(udf, data, seed, block_size=1000):
    names, indices = sample_indices(udf, seed, block_size)
    return Samples(names, indices, data)


def holdout(X, ratio, seed, repeats=1, fraction=1.0):
    """Hold-out pairs ``train-<w>`` / ``test-<w>`` (see :class:`udfs.HoldOut`)."""
    n, data = _rows_and_data(X)
    return _samples(HoldOut(n, ratio, repeats, fraction), data, seed)


def kfold(X, k, seed, naive=False, block_size=1000):
    """k folds ``test-<i>`` and training sets ``train-<i>``.  In fold mode the
    training sets' row order follows dynamic composition with *block_size*
    (use the block size of the matrix the job reads to match it exactly)."""
    n, data = _rows_and_data(X)
    return _samples(KFold(n, k, naive), data, seed, block_size)


def bootstrap(X, samples, seed, size=None):
    """Bootstrap samples ``sample-<i>`` of exactly *size* rows (default: all)."""
    n, data = _rows_and_data(X)
    return _samples(Bootstrap(n, samples, size), data, seed)


def sample(X, udf, seed, block_size=1000, **params):
    """Any sampling-UDF by name or ``module:function`` with its parameters."""
    n, data = _rows_and_data(X)
    return _samples(load_udf(udf, n, params), data, seed, block_size)
