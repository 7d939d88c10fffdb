"""The sampling-UDF protocol, vectorized over a contiguous range of rows.

The paper's sampling-UDF maps ``row_id, rng, params`` to zero or more
``(sample_id, relative_pos)`` occurrences.  Ours is the same contract for a
whole range ``[start, stop)`` of row ids at once: it returns three parallel
arrays (row offset from ``start``, sample id, relative position).  The engine
sorts each sample's occurrences by ``(relative position, row id)``, so the
relative position decides where a row lands in the sample.

A UDF must be a pure function of its parameters, the RNG's seed and the row
ids: the same row asked twice, in any range, on any machine, gets the same
occurrences.  The built-in UDFs draw everything from
:class:`udfs.rng.PositionRNG` lane blocks keyed by row id, which guarantees it.
"""
import abc
import contextlib
import re
import sys
from typing import NamedTuple

import numpy as np

from .errors import ParameterError, SamplegenError, check_int
from .rng import KeyedRNG


class UDFError(SamplegenError):
    """A sampling-UDF returned something that breaks the protocol."""


#: A sample name becomes a directory of the run, a Hive partition value and a
#: file name on every filesystem: letters, digits, ``_``, ``.`` and ``-``,
#: starting with a letter or digit (so never ``.``, ``..``, a hidden name or
#: the run's own ``_manifest.json`` / ``_SUCCESS``), at most 128 characters.
SAMPLE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")


def check_sample_names(names, udf_name="udf"):
    """*names* as a list of str, or UDFError when one is unsafe or repeated.
    None (names known only from the output: ``sample-<id>``) passes."""
    if names is None:
        return None
    names = list(names)
    seen = set()
    for name in names:
        if not isinstance(name, str) or not SAMPLE_NAME.fullmatch(name):
            raise UDFError(f"sampling-UDF {udf_name!r} declares sample name {name!r}: a name "
                           "must be 1-128 letters, digits, '_', '.' or '-', starting with a "
                           "letter or digit")
        if name in seen:
            raise UDFError(f"sampling-UDF {udf_name!r} declares sample name {name!r} twice: "
                           "sample names must be unique")
        seen.add(name)
    return names


class Occurrences(NamedTuple):
    """Occurrences of rows of ``[start, stop)`` in the sample matrices."""

    offset: np.ndarray   # int64, row id minus start
    sample: np.ndarray   # int64, sample matrix id
    relpos: np.ndarray   # uint64, sort key inside the sample


def empty_occurrences():
    return Occurrences(np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.uint64))


def concat_occurrences(parts):
    parts = [p for p in parts if p.offset.size]
    if not parts:
        return empty_occurrences()
    return Occurrences(*(np.concatenate(cols) for cols in zip(*parts)))


#: rows between two wanted row ids that :func:`occurrences_of_ids` still
#: evaluates as one range (more ranges cost more calls, longer ones more rows)
ID_RANGE_GAP = 4096


def occurrences_of_ids(udf, ids, rng):
    """Occurrences of the rows with ids *ids* (distinct, any order; offsets
    index *ids*), drawn by evaluating *udf* over row-id ranges that cover
    them: for a UDF whose decisions need their rows in ranges (a class's
    rank, a group's code), where ``occurrences_at`` cannot serve."""
    ids = np.asarray(ids, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    ordered = ids[order]
    n = ordered.size
    if n and (ordered[0] < 0 or ordered[-1] >= udf.n_rows):
        raise ParameterError(f"row ids must lie in [0, {udf.n_rows})")
    if np.any(ordered[1:] == ordered[:-1]):
        raise ParameterError("a row id is given twice")
    if not n:
        return empty_occurrences()
    breaks = np.flatnonzero(np.diff(ordered) > ID_RANGE_GAP) + 1
    parts = []
    for lo, hi in zip(np.concatenate(([0], breaks)).tolist(),
                      np.concatenate((breaks, [n])).tolist()):
        start = int(ordered[lo])
        occ = udf(start, int(ordered[hi - 1]) + 1, rng)
        rows = occ.offset + start
        at = lo + np.searchsorted(ordered[lo:hi], rows)
        present = ordered[np.minimum(at, n - 1)] == rows
        parts.append(Occurrences(order[at[present]], occ.sample[present], occ.relpos[present]))
    return concat_occurrences(parts)


class SamplingUDF(abc.ABC):
    """Base class: bookkeeping here, the sampling decision in subclasses.

    Subclasses validate their parameters in ``__init__`` (after calling
    ``super().__init__(n_rows)``) and implement :meth:`occurrences`; the
    engine calls the instance, which checks what the subclass returned.
    """

    #: short name used in manifests and on the command line
    name = "udf"
    #: True when the samples are k folds to be composed into training sets
    composes_folds = False
    #: (spec, params) that rebuild this UDF with ``load_udf``; set by it
    spec = None

    def __init__(self, n_rows):
        self.n_rows = check_int("number of rows", n_rows, lo=1)

    # -- to override -------------------------------------------------------
    def sample_names(self):
        """Names of the sample matrices, indexed by sample id; ``None`` when
        they are only known from the output (named ``sample-<id>``)."""
        return None

    def composed_names(self):
        """Names of training sets composed from the samples (k-fold in fold
        mode); they follow :meth:`sample_names` and are checked with them."""
        return []

    def fold_group(self):
        """How many consecutive samples form one set of folds for
        :meth:`composed_names` (training set j is composed of the other
        samples of j's set); 0: all of them."""
        return 0

    def expected_rows(self, sample_id):
        """Expected number of rows of a sample (sizes shuffle bins only)."""
        return float(self.n_rows)

    def params(self):
        """The parameters, JSON-able, as recorded in the run manifest."""
        return {}

    def prepare(self, rng):
        """Parameters that only the whole input gives, computed once by the
        driver before any task starts (for *rng*'s seed) and added to the
        UDF's own; the UDF is then built again with them (a weighted
        sample's cutoff keys: :class:`udfs.weighted.Weighted`).  None by
        default."""
        return {}

    @abc.abstractmethod
    def occurrences(self, start, stop, rng):
        """Occurrences of the rows ``[start, stop)``, drawn from *rng*
        (a :class:`udfs.rng.PositionRNG`)."""

    # -- engine entry point -------------------------------------------------
    def __call__(self, start, stop, rng):
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= self.n_rows:
            raise ParameterError(f"row range [{start}, {stop}) is outside the matrix "
                                 f"of {self.n_rows} rows")
        # stdout carries the engines' records: what the UDF prints goes to stderr
        with contextlib.redirect_stdout(sys.__stderr__ or sys.stderr):
            occ = self.occurrences(start, stop, rng)
        return self._checked(occ, stop - start)

    def ranged(self):
        """Whether the decisions need the rows in row-id ranges (a class's
        ranks, a group's code: the stratified and grouped built-ins); then
        :meth:`occurrences_at` evaluates ranges covering the row ids."""
        return getattr(self, "strata", None) is not None or \
            getattr(self, "grouping", None) is not None

    def occurrences_at(self, positions, rng):
        """Occurrences of the rows with ids *positions* (an integer array in
        any order; rows keyed by a column instead of a place in a matrix):
        ``offset`` indexes *positions*.  Row ``positions[i]`` gets exactly
        the occurrences a range holding it gets.  The default evaluates
        :meth:`occurrences` over ``[0, len(positions))`` with a
        :class:`udfs.rng.KeyedRNG`, so a UDF that draws its per-row
        randomness from ``rng.block`` / ``lane`` / ``uniform`` needs nothing
        more; a UDF whose draws are not per row (the bootstrap's tree)
        overrides this."""
        positions = np.asarray(positions)
        if self.ranged():
            return occurrences_of_ids(self, positions, rng)
        n = positions.shape[0]
        if n > self.n_rows:
            raise ParameterError(f"{n} keyed rows given to a UDF over {self.n_rows} rows")
        with contextlib.redirect_stdout(sys.__stderr__ or sys.stderr):
            occ = self.occurrences(0, n, KeyedRNG(rng, positions))
        return self._checked(occ, n)

    def _checked(self, occ, n):
        try:
            offset, sample, relpos = occ
        except (TypeError, ValueError):
            raise UDFError(f"sampling-UDF {self.name!r} must return three arrays "
                           f"(offset, sample, relpos), got {type(occ).__name__}") from None
        offset = np.asarray(offset)
        sample = np.asarray(sample)
        relpos = np.asarray(relpos)
        if not (offset.shape == sample.shape == relpos.shape) or offset.ndim != 1:
            raise UDFError(f"sampling-UDF {self.name!r} returned arrays of shapes "
                           f"{offset.shape}, {sample.shape}, {relpos.shape}; "
                           "they must be 1-D and of equal length")
        for label, arr in (("offset", offset), ("sample", sample), ("relpos", relpos)):
            if arr.size and arr.dtype.kind not in "iu":
                raise UDFError(f"sampling-UDF {self.name!r}: {label} must be integers, "
                               f"got dtype {arr.dtype}")
        if offset.size:
            if offset.min() < 0 or offset.max() >= n:
                raise UDFError(f"sampling-UDF {self.name!r} returned a row offset outside "
                               f"[0, {n})")
            names = self.sample_names()
            limit = len(names) if names is not None else 1 << 31
            if sample.min() < 0 or sample.max() >= limit:
                raise UDFError(f"sampling-UDF {self.name!r} returned a sample id outside "
                               f"[0, {limit})")
            if relpos.dtype.kind == "i" and relpos.min() < 0:
                raise UDFError(f"sampling-UDF {self.name!r} returned a negative relative position")
        return Occurrences(offset.astype(np.int64, copy=False),
                           sample.astype(np.int64, copy=False),
                           relpos.astype(np.uint64, copy=False))

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}(n_rows={self.n_rows}, {args})"
