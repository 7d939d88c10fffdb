"""The built-in sampling-UDFs: hold-out, k-fold and bootstrap."""
import math

import numpy as np

from .base import Occurrences, SamplingUDF, concat_occurrences
from .errors import ParameterError, check_fraction, check_int
from .multinomial import MultinomialTree
from .rng import Purpose, stream, to_unit


class HoldOut(SamplingUDF):
    """Hold-out pairs: ``repeats`` independent (train, test) splits.

    For repeat w, a row is in ``train-w`` with probability
    ``fraction * ratio`` and in ``test-w`` with probability
    ``fraction * (1 - ratio)``; otherwise (``fraction < 1``) in neither.
    Sample ids: ``train-w`` = 2w, ``test-w`` = 2w + 1.
    Randomness: stream (HOLDOUT, w), lane 0 decides, lane 1 orders.
    """

    name = "holdout"

    def __init__(self, n_rows, ratio, repeats=1, fraction=1.0):
        super().__init__(n_rows)
        self.ratio = check_fraction("ratio", ratio)
        self.repeats = check_int("repeats", repeats, lo=1, hi=1 << 20)
        self.fraction = check_fraction("fraction", fraction)

    def sample_names(self):
        return [name for w in range(self.repeats) for name in (f"train-{w}", f"test-{w}")]

    def expected_rows(self, sample_id):
        share = self.ratio if sample_id % 2 == 0 else 1.0 - self.ratio
        return self.n_rows * self.fraction * share

    def params(self):
        return {"ratio": self.ratio, "repeats": self.repeats, "fraction": self.fraction}

    def occurrences(self, start, stop, rng):
        n, reps = stop - start, self.repeats
        train_below = unit_threshold(self.fraction * self.ratio)
        keep_below = unit_threshold(self.fraction)
        offset = np.tile(np.arange(n, dtype=np.int64), reps)
        sample = np.empty(n * reps, np.int64)
        relpos = np.empty(n * reps, np.uint64)
        for w in range(reps):
            lanes = rng.block(stream(Purpose.HOLDOUT, w), start, stop)
            top = lanes[:, 0] >> np.uint64(11)
            out = slice(w * n, (w + 1) * n)
            np.add(2 * w, top >= train_below, out=sample[out], casting="unsafe")
            relpos[out] = lanes[:, 1]
            if self.fraction < 1.0:
                sample[out][top >= keep_below] = -1
        if self.fraction < 1.0:
            keep = sample >= 0
            return Occurrences(offset[keep], sample[keep], relpos[keep])
        return Occurrences(offset, sample, relpos)


def unit_threshold(p):
    """Integer t with ``to_unit(word) < p  <=>  (word >> 11) < t``."""
    return np.uint64(min(math.ceil(p * 2.0 ** 53), 1 << 53))


def fold_of(rng, start, stop, k):
    """Fold (0..k-1) and relative position of rows ``[start, stop)``."""
    lanes = rng.block(stream(Purpose.FOLD), start, stop)
    fold = np.minimum((to_unit(lanes[:, 0]) * k).astype(np.int64), k - 1)
    return fold, lanes[:, 1].copy()


class KFold(SamplingUDF):
    """k-fold cross-validation.

    Every row goes to fold ``floor(u * k)`` for a uniform u from stream
    (FOLD, 0), lane 0; lane 1 is its relative position.  In fold mode (the
    default) the UDF emits each row once, into ``test-f`` (sample id f), and
    the engine composes each ``train-i`` from the other folds (dynamic sample
    matrix composition).  With ``naive=True`` it emits the row into ``test-f``
    (id 2f + 1) and into every ``train-j``, j != f (id 2j): the same rows per
    round as fold mode, materialized k times.
    """

    name = "kfold"

    def __init__(self, n_rows, k, naive=False):
        super().__init__(n_rows)
        self.k = check_int("k", k, lo=2)
        if self.k > self.n_rows:
            raise ParameterError(f"k must be <= the number of rows ({self.n_rows}), got {self.k}")
        self.naive = bool(naive)
        self.composes_folds = not self.naive

    def sample_names(self):
        if self.naive:
            return [name for i in range(self.k) for name in (f"train-{i}", f"test-{i}")]
        return [f"test-{i}" for i in range(self.k)]

    def composed_names(self):
        """Training sets composed from the folds (fold mode only)."""
        return [f"train-{i}" for i in range(self.k)] if self.composes_folds else []

    def expected_rows(self, sample_id):
        if self.naive and sample_id % 2 == 0:
            return self.n_rows * (self.k - 1) / self.k
        return self.n_rows / self.k

    def params(self):
        return {"k": self.k, "naive": self.naive}

    def occurrences(self, start, stop, rng):
        fold, relpos = fold_of(rng, start, stop, self.k)
        n = stop - start
        if not self.naive:
            return Occurrences(np.arange(n, dtype=np.int64), fold, relpos)
        k = self.k
        offset = np.repeat(np.arange(n, dtype=np.int64), k)
        round_ = np.tile(np.arange(k, dtype=np.int64), n)
        sample = np.where(round_ == np.repeat(fold, k), 2 * round_ + 1, 2 * round_)
        return Occurrences(offset, sample, np.repeat(relpos, k))


class Bootstrap(SamplingUDF):
    """Bootstrap samples: ``samples`` draws of exactly ``size`` rows each,
    with replacement, via the distributed multinomial (Algorithm 7).

    Sample ids: ``sample-i`` = i.  Every occurrence of a row gets its own
    relative position, so repeated rows are spread through the sample.
    """

    name = "bootstrap"

    def __init__(self, n_rows, samples, size=None):
        super().__init__(n_rows)
        self.samples = check_int("samples", samples, lo=1, hi=1 << 20)
        self.size = self.n_rows if size is None else check_int("size", size, lo=1, hi=1 << 62)
        self._trees = {}

    def sample_names(self):
        return [f"sample-{i}" for i in range(self.samples)]

    def expected_rows(self, sample_id):
        return float(self.size)

    def params(self):
        return {"samples": self.samples, "size": self.size}

    def tree(self, rng, i):
        key = (rng.seed, i)
        tree = self._trees.get(key)
        if tree is None:
            tree = self._trees[key] = MultinomialTree(rng, self.n_rows, self.size, i)
        return tree

    def occurrences_at(self, positions, rng):
        """Occurrences of rows *positions* (ids in ``[0, n_rows)``, any
        order): the same draws of the same trees as :meth:`occurrences`."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.n_rows):
            raise ParameterError(f"bootstrap row ids must lie in [0, {self.n_rows})")
        parts = []
        for i in range(self.samples):
            where, relpos = self.tree(rng, i).occurrences_at(positions)
            parts.append(Occurrences(where, np.full(where.size, i, np.int64), relpos))
        return concat_occurrences(parts)

    def occurrences(self, start, stop, rng):
        parts = []
        for i in range(self.samples):
            rows, relpos = self.tree(rng, i).occurrences(start, stop)
            parts.append(Occurrences(rows - start, np.full(rows.size, i, np.int64), relpos))
        return concat_occurrences(parts)
