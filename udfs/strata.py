"""The class of every row, for splits that keep each class in proportion.

A stratified split draws one exact labelling per class (:mod:`udfs.exact`):
class c's ``n_c`` rows, numbered ``0..n_c-1`` in row-id order (a row's
*rank* in its class), get exactly ``counts[c][l]`` rows of label ``l``.  So
a UDF deciding rows ``[start, stop)`` needs each row's class and how many
rows of each class come before ``start``; :class:`Strata` answers both for
any range, alone, from the row classes and a table of running class counts
every ``TABLE_ROWS`` rows.  The classes may live in memory (the Python
API's labels) or be read range by range (the cluster jobs' label file,
:mod:`samplegen.jobs.strata`).

How the rows of a class are shared out (pure arithmetic, the same on every
machine): :func:`proportional` for sizes in proportion to the classes, and
:func:`round_robin` for folds (scikit-learn's StratifiedKFold allocation).
"""
import heapq

import numpy as np

from .errors import ParameterError

#: what a built-in UDF is given of every row beside the row itself -- the
#: classes, the groups, the weights (udfs.weighted.RowWeights): its keyword
#: (also the plan's field) -> the UDF parameter naming their column.
#: Classes are ranked (a row's rank in its class is known), groups are not.
SIDES = {"strata": "stratify", "grouping": "groups", "weighting": "weights"}

#: rows between two entries of the running class counts
TABLE_ROWS = 1024
#: the most classes a label may have (16-bit codes and a running count of
#: each), and the most groups (32-bit codes, no running counts)
MAX_CLASSES = 1 << 16
MAX_GROUPS = (1 << 32) - 1


def code_dtype(n_classes):
    """The unsigned integer type of the codes of *n_classes* classes."""
    return np.dtype(np.uint16 if n_classes <= MAX_CLASSES else np.uint32)


class Strata:
    """The classes of rows ``0..n_rows-1``: a label's classes (ranked: a
    row's rank in its class is known), or groups (unranked: only which
    group, and how many rows each has).

    *classes*: the values, one per class code (sorted; None when only the
    codes are kept); *counts*: rows per class; *table*: the running counts,
    ``table[j]`` the rows of each class among rows ``[0, j * TABLE_ROWS)``
    (``n_rows // TABLE_ROWS + 1`` entries) -- an array, or a function of j
    giving that entry -- or None for unranked groups; *read*: ``read(start,
    stop)`` gives the class codes of rows ``[start, stop)``; *label*: the
    column's name, when they are a matrix column's.
    """

    def __init__(self, classes, counts, table, read, label=None):
        self.label = label
        self.counts = np.asarray(counts, np.int64)
        self.classes = list(classes) if classes is not None else None
        self.n_rows = int(self.counts.sum())
        self._read = read
        self._last = (None, None)
        self.ranked = table is not None
        limit = MAX_CLASSES if self.ranked else MAX_GROUPS
        if not 0 < self.counts.size <= limit:
            raise ParameterError(f"a {'label' if self.ranked else 'grouping'} must have "
                                 f"1 to {limit} {'classes' if self.ranked else 'groups'}, "
                                 f"got {self.counts.size}")
        self._entry, self._table = table, None
        if self.ranked and not callable(table):
            table = np.asarray(table, np.int64).reshape(-1, self.counts.size)
            if table.shape[0] != self.n_rows // TABLE_ROWS + 1:
                raise ParameterError("the running class counts do not match the rows")
            self._entry, self._table = table.__getitem__, table

    @classmethod
    def of(cls, values, ranked=True):
        """The strata of in-memory labels *values* (one per row, any
        sortable values: numbers, strings); *ranked*: with running counts
        (a label's classes), or not (groups)."""
        values = np.asarray(values)
        what, one = ("labels", "class") if ranked else ("groups", "group")
        if values.ndim != 1 or values.size == 0:
            raise ParameterError(f"{what} must be one value per row, got shape {values.shape}")
        if values.dtype.kind == "f" and np.isnan(values).any():
            raise ParameterError(f"{what} must not be NaN: give every row a {one}")
        if values.dtype == object and np.equal(values, None).any():
            raise ParameterError(f"{what} must not be None: give every row a {one}")
        try:
            classes, codes = _classes(values)
        except TypeError:
            raise ParameterError(f"{what} must be comparable values of one kind (numbers or "
                                 "strings)") from None
        if ranked and classes.size > MAX_CLASSES:
            raise ParameterError(f"a label must have at most {MAX_CLASSES} classes, got "
                                 f"{classes.size}")
        codes = codes.reshape(-1).astype(code_dtype(classes.size))
        if ranked:
            counts, table = running_counts(codes, classes.size)
        else:
            counts, table = np.bincount(codes, minlength=classes.size), None
        return cls(classes.tolist(), counts, table, lambda a, b: codes[a:b])

    def name_of(self, code):
        """How a message names class *code*."""
        return repr(self.classes[code]) if self.classes is not None else f"#{code}"

    def codes(self, start, stop):
        """The class code (int64) of every row of ``[start, stop)``."""
        return np.asarray(self._read(int(start), int(stop)), np.int64)

    def before(self, start):
        """Rows of each class among rows ``[0, start)`` (ranked only)."""
        if not self.ranked:
            raise ParameterError("groups have no ranks: only a label's classes do")
        j = start // TABLE_ROWS
        lo = j * TABLE_ROWS
        head = np.array(self._entry(j), np.int64)
        if start == lo:
            return head
        return head + np.bincount(self.codes(lo, start), minlength=self.counts.size)

    def table(self):
        """The whole running counts (``n_rows // TABLE_ROWS + 1`` entries)."""
        if self._table is not None:
            return self._table
        return np.array([self._entry(j) for j in range(self.n_rows // TABLE_ROWS + 1)],
                        np.int64).reshape(-1, self.counts.size)

    def ranges(self, start, stop):
        """The rows of ``[start, stop)`` class by class, a list of ``(c,
        offsets, rank)`` for each class c present: *offsets* its rows (from
        *start*, in order) and *rank* the rank of the first of them in its
        class.  The last range's answer is kept: a UDF drawing several
        samples asks for the same range once per sample."""
        last = self._last
        if last[0] == (start, stop):
            return last[1]
        codes = self.codes(start, stop)
        before = self.before(start)
        order = np.argsort(codes.astype(np.uint16), kind="stable")   # a radix sort
        bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=self.counts.size))])
        found = [(int(c), order[bounds[c]:bounds[c + 1]], int(before[c]))
                 for c in np.flatnonzero(np.diff(bounds))]
        self._last = ((start, stop), found)     # one assignment: safe to share
        return found

    def check_at_least(self, rows, what):
        """ParameterError naming the smallest class when it has fewer than
        *rows* rows (*what*: what needs them)."""
        c = int(np.argmin(self.counts))
        if self.counts[c] < rows:
            raise ParameterError(f"class {self.name_of(c)} has {int(self.counts[c])} "
                                 f"row{'s' if self.counts[c] != 1 else ''}; {what} needs at "
                                 f"least {rows} per class")


def _classes(values):
    """``(sorted distinct values, code of each value)``, as ``np.unique``
    with ``return_inverse``; a label's few classes are usually all among its
    first rows, which then spares the sort of every value."""
    head = np.unique(values[:1 << 16])
    if values.size > 1 << 16 and head.size <= 1 << 12:
        codes = np.searchsorted(head, values)
        if np.array_equal(head[np.minimum(codes, head.size - 1)], values):
            return head, codes
    return np.unique(values, return_inverse=True)


def running_counts(codes, n_classes):
    """``(counts, table)`` of :class:`Strata` for class *codes* of all rows."""
    codes = np.asarray(codes, np.int64)
    n = codes.size
    chunk = np.arange(n, dtype=np.int64) // TABLE_ROWS
    per_chunk = np.bincount(chunk * n_classes + codes,
                            minlength=(n // TABLE_ROWS + 1) * n_classes).reshape(-1, n_classes)
    table = np.zeros_like(per_chunk)
    np.cumsum(per_chunk[:-1], axis=0, out=table[1:])
    return per_chunk.sum(axis=0), table


def proportional(total, counts):
    """*total* rows shared out over classes of *counts* rows in proportion:
    each class gets its quota ``total * n_c / m`` rounded down or up, the
    largest remainders up (ties: the lower class), so the shares add up to
    *total* exactly and each is within one row of its quota."""
    counts = np.asarray(counts, np.int64)
    m = int(counts.sum())
    exact = counts * int(total)
    share = exact // m
    remainder = exact - share * m
    extra = int(total) - int(share.sum())
    share[np.argsort(-remainder, kind="stable")[:extra]] += 1
    return share


def holdout_allocation(sizes, counts):
    """Rows of each class (*counts*) per side of an exact hold-out of
    *sizes* ``[train, test(, neither)]``: ``(classes, 3)`` train, test and
    neither.  Each class's training rows are within one of ``train * n_c /
    m`` (:func:`proportional`), its test rows the same share of the rest."""
    counts = np.asarray(counts, np.int64)
    train = proportional(sizes[0], counts)
    test = proportional(sizes[1], counts - train)
    return np.stack([train, test, counts - train - test], axis=1)


def round_robin(counts, k):
    """Rows of each class per fold (``(classes, k)``), scikit-learn's
    StratifiedKFold allocation: the rows sorted by class are dealt to the
    folds in turn, so every class is within one row of ``n_c / k`` in each
    fold and the folds' sizes within one of each other (the first ``m % k``
    one larger)."""
    counts = np.asarray(counts, np.int64)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    folds = np.arange(k)
    # rows j of [start, start + n) with j % k == f
    first = (folds[None, :] - starts[:, None]) % k
    return np.maximum(0, (counts[:, None] - first + k - 1) // k)


def greedy_folds(counts, k, order):
    """Fold (0..k-1) of each group of *counts* rows, taking the groups in
    *order* and giving each to the fold with the fewest rows so far (the
    lowest on a tie), as scikit-learn's GroupKFold does with groups by
    size: no two folds differ by more than the largest group."""
    sizes = [(0, f) for f in range(k)]
    folds = np.empty(len(counts), np.int64)
    counts = np.asarray(counts, np.int64).tolist()
    for g in np.asarray(order).tolist():
        size, f = heapq.heappop(sizes)
        folds[g] = f
        heapq.heappush(sizes, (size + counts[g], f))
    return folds
