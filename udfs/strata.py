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
import numpy as np

from .errors import ParameterError

#: rows between two entries of the running class counts
TABLE_ROWS = 1 << 16
#: the most classes a label may have (codes are 16-bit)
MAX_CLASSES = 1 << 16


class Strata:
    """The classes of rows ``0..n_rows-1``.

    *classes*: the label values, one per class code (sorted); *counts*: rows
    per class; *table*: ``table[j]`` the rows of each class among rows
    ``[0, j * TABLE_ROWS)`` (``n_rows // TABLE_ROWS + 1`` entries); *read*:
    ``read(start, stop)`` gives the class codes of rows ``[start, stop)``.
    """

    def __init__(self, classes, counts, table, read):
        self.classes = list(classes)
        self.counts = np.asarray(counts, np.int64)
        self.table = np.asarray(table, np.int64).reshape(-1, len(self.classes))
        self.n_rows = int(self.counts.sum())
        self._read = read
        if not 0 < len(self.classes) <= MAX_CLASSES:
            raise ParameterError(f"a label must have 1 to {MAX_CLASSES} classes, got "
                                 f"{len(self.classes)}")
        if self.table.shape[0] != self.n_rows // TABLE_ROWS + 1:
            raise ParameterError("the running class counts do not match the rows")

    @classmethod
    def of(cls, values):
        """The strata of in-memory labels *values* (one per row, any
        sortable values: numbers, strings)."""
        values = np.asarray(values)
        if values.ndim != 1 or values.size == 0:
            raise ParameterError(f"labels must be one value per row, got shape {values.shape}")
        if values.dtype.kind == "f" and np.isnan(values).any():
            raise ParameterError("labels must not be NaN: give every row a class")
        try:
            classes, codes = np.unique(values, return_inverse=True)
        except TypeError:
            raise ParameterError("labels must be comparable values of one kind (numbers or "
                                 "strings)") from None
        if classes.size > MAX_CLASSES:
            raise ParameterError(f"a label must have at most {MAX_CLASSES} classes, got "
                                 f"{classes.size}")
        codes = codes.reshape(-1).astype(np.uint16)
        return cls(classes.tolist(), *running_counts(codes, classes.size),
                   lambda a, b: codes[a:b])

    def codes(self, start, stop):
        """The class code (int64) of every row of ``[start, stop)``."""
        return np.asarray(self._read(int(start), int(stop)), np.int64)

    def before(self, start):
        """Rows of each class among rows ``[0, start)``."""
        j = start // TABLE_ROWS
        lo = j * TABLE_ROWS
        head = self.table[j]
        if start == lo:
            return head.copy()
        return head + np.bincount(self.codes(lo, start), minlength=len(self.classes))

    def ranges(self, start, stop):
        """The rows of ``[start, stop)`` class by class: ``(c, offsets, rank)``
        for each class c present, *offsets* its rows (from *start*, in
        order) and *rank* the rank of the first of them in its class."""
        codes = self.codes(start, stop)
        before = self.before(start)
        order = np.argsort(codes.astype(np.uint16), kind="stable")   # a radix sort
        bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(self.classes)))])
        for c in np.flatnonzero(np.diff(bounds)):
            yield int(c), order[bounds[c]:bounds[c + 1]], int(before[c])

    def check_at_least(self, rows, what):
        """ParameterError naming the smallest class when it has fewer than
        *rows* rows (*what*: what needs them)."""
        c = int(np.argmin(self.counts))
        if self.counts[c] < rows:
            raise ParameterError(f"class {self.classes[c]!r} has {int(self.counts[c])} "
                                 f"row{'s' if self.counts[c] != 1 else ''}; {what} needs at "
                                 f"least {rows} per class")


def running_counts(codes, n_classes):
    """``(counts, table)`` of :class:`Strata` for class *codes* of all rows."""
    codes = np.asarray(codes)
    n = codes.size
    marks = np.arange(0, n + 1, TABLE_ROWS)
    table = np.zeros((marks.size, n_classes), np.int64)
    for j in range(1, marks.size):
        table[j] = table[j - 1] + np.bincount(codes[marks[j - 1]:marks[j]], minlength=n_classes)
    counts = table[-1] + np.bincount(codes[marks[-1]:], minlength=n_classes)
    return counts, table


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
