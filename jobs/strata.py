"""The classes of a matrix's rows, as files the tasks read range by range.

A stratified run needs every row's class in every task, whatever column
block the task holds (:mod:`samplegen.udfs.strata`).  The driver gets them
once -- recorded at import for the matrix's label column, or by a pre-pass
over the label column's blocks -- and writes them as three files next to the
run's output:

* ``<base>.json``: ``{"format": "samplegen-strata/1", "label": name,
  "codes": "<u2", "classes": [values], "counts": [rows per class],
  "table_rows": 1024}``;
* ``<base>.codes``: one little-endian class code per row (uint16, or uint32
  for more than 65,536 groups: ``"codes"`` names the type), in row order, of
  which a task reads only its rows' bytes;
* ``<base>.table``: the running counts, little-endian int64: entry j (one
  count per class) the rows of each class before row ``j * table_rows``, of
  which a task reads one entry per range.

Groups (``--groups``) use the same files without the values and running
counts (``"classes"`` and ``"table_rows"`` null, no ``.table``): a task needs
only each row's group and the rows per group.

``samplegen import --label NAME`` records them in the matrix directory
(``_label.json``, ``_label.codes``, ``_label.table``), so a run stratified
by the recorded label reads no block before it starts.

A weighted run's weights (:class:`udfs.weighted.RowWeights`) travel the
same way, as ``<base>.json`` (``{"format": "samplegen-weights/1", "label":
name, "n_rows": n, "positive": rows of positive weight, "exponent": the
power of two that scales every sum}``), ``<base>.weights`` (one little-endian
float64 per row, as given) and ``<base>.chunks`` (the row-id tree's chunk
totals of the scaled weights, float64, read whole by a weighted bootstrap).
:func:`side_for`, :func:`write_side`, :func:`open_side` and
:func:`remove_side` take either kind.
"""
import os
import tokenize

import numpy as np

from samplegen.udfs.errors import InputError, ParameterError
from samplegen.udfs.strata import TABLE_ROWS, Strata, code_dtype
from samplegen.udfs.weighted import RowWeights

from . import fs as fsmod
from .blocks import column_of_line
from .store import read_json, to_json

FORMAT = "samplegen-strata/1"
WEIGHTS_FORMAT = "samplegen-weights/1"
#: base name of the label's classes recorded in a matrix directory
RECORDED = "_label"
#: base names of a run's classes and groups (by the plan's field), in its
#: staging directory while it runs
RUN = {"strata": "_strata", "grouping": "_groups", "weighting": "_weights"}


def label_column(meta, label):
    """The column index of *label* in a matrix with metadata *meta*: a
    column name, or a column number ``0..cols-1``."""
    columns = meta.get("columns") or []
    if label in columns:
        return columns.index(label)
    try:
        index = int(label)
    except ValueError:
        named = f"; its columns are {', '.join(columns[:8])}{', ...' if len(columns) > 8 else ''}" \
            if columns else " (it has no column names: give a column number)"
        raise ParameterError(f"the matrix has no column {label!r}{named}") from None
    if not 0 <= index < meta["cols"]:
        raise ParameterError(f"column {index} is outside the matrix's {meta['cols']} "
                             f"column{'s' if meta['cols'] != 1 else ''}")
    return index


def strata_of_values(values, label, ranked=True):
    """:class:`Strata` of a label column's *values* (one per row), refusing
    what cannot be classes; *ranked* False: groups (any number of them)."""
    values = np.asarray(values)
    what = "label" if ranked else "group column"
    if values.dtype.kind == "f" and not np.isfinite(values).all():
        row = int(np.flatnonzero(~np.isfinite(values))[0])
        raise InputError(f"{what} {label!r} is {values[row]} at row {row}: every row needs a "
                         f"{'class' if ranked else 'group'} (a finite value)")
    strata = Strata.of(values, ranked)
    if ranked and len(strata.classes) > max(1, values.size // 2):
        raise ParameterError(f"label {label!r} has {len(strata.classes)} distinct values in "
                             f"{values.size} rows: stratification needs class labels, not a "
                             "continuous column")
    return strata


def strata_by_row_id(ids, values, column, ranked=True, nulls=None):
    """:class:`Strata` of a column's *values* given beside their rows' *ids*
    (the row ids ``0..n-1``, each once, in any order: a table or DataFrame
    keyed by row id).  A NULL (None in an object array, or True in *nulls*)
    is refused with the first row that holds one."""
    ids, values = np.asarray(ids, np.int64), np.asarray(values)
    if nulls is None and values.dtype == object:
        nulls = np.equal(values, None)
    if nulls is not None and np.any(nulls):
        what, one = ("label", "class") if ranked else ("group column", "group")
        raise InputError(f"{what} {column!r} is NULL at row {int(ids[nulls].min())}: every "
                         f"row needs a {one}")
    out = np.empty(values.size, values.dtype)
    out[ids] = values
    return strata_of_values(out, column, ranked)


def weights_by_row_id(ids, values, column):
    """The :class:`~udfs.weighted.RowWeights` of a column's *values* given
    beside their rows' *ids* (the row ids ``0..n-1``, each once, any
    order; a Hive table's rows, a DataFrame's); a NULL (None in an object
    array) is refused with its row, as is any weight :meth:`RowWeights.of`
    refuses."""
    ids, values = np.asarray(ids, np.int64), np.asarray(values)
    if values.dtype == object:
        nulls = np.equal(values, None)
        if nulls.any():
            raise InputError(f"weight column {column!r} is NULL at row "
                             f"{int(ids[nulls].min())}: every row needs a weight")
    out = np.empty(values.size)
    out[ids] = values.astype(np.float64)
    return RowWeights.of(out, column)


def read_label(matrix, column, progress=None):
    """The values of *column* of *matrix*, read block by block (the
    pre-pass: only the blocks of the column's column block)."""
    B = matrix.block_size
    v, j = divmod(column, B)
    out = np.empty(matrix.rows)
    index, mapped = matrix.index(), {}
    for h in range(-(-matrix.rows // B)):
        part, offset, length = index[(h, v)]
        if fsmod.is_local(part):     # memory-mapped: only the label's pages are read
            if part not in mapped:
                mapped[part] = np.memmap(fsmod.local_path(part), np.uint8, "r")
            line = mapped[part][offset:offset + length]
        else:
            line = matrix.fs.read_range(part, offset, length)
        h2, v2, values = column_of_line(line, j)
        rows = min(B, matrix.rows - h * B)
        if (h2, v2) != (h, v) or values.size != rows:
            raise InputError(f"corrupt block ({h}, {v}) in {part}")
        out[h * B:h * B + rows] = values
        if progress is not None:
            progress.update(1)
    return out


def write_strata(base, strata, label):
    """Write *strata* (of the column *label*) as the files ``<base>.json``,
    ``<base>.codes`` and (ranked) ``<base>.table``; returns *base*."""
    fs = fsmod.get_fs(base)
    dtype = code_dtype(strata.counts.size).newbyteorder("<")
    codes = strata.codes(0, strata.n_rows).astype(dtype)
    fs.write_bytes(base + ".codes", codes.tobytes())
    ranked = strata.ranked
    if ranked:
        fs.write_bytes(base + ".table", strata.table().astype("<i8").tobytes())
    fs.write_bytes(base + ".json", to_json({
        "format": FORMAT, "label": label, "codes": dtype.str,
        "classes": strata.classes if ranked else None, "counts": strata.counts.tolist(),
        "table_rows": TABLE_ROWS if ranked else None}))
    return base


def open_strata(base, doc=None):
    """The :class:`Strata` that :func:`write_strata` wrote at *base*, reading
    the codes of a range when asked (*doc*: its ``.json``, when read already)."""
    doc = doc or read_json(base + ".json", "label classes")
    if doc.get("format") != FORMAT:
        raise InputError(f"{base}.json is not a {FORMAT} file")
    fs = fsmod.get_fs(base)
    codes_uri = base + ".codes"
    dtype = np.dtype(doc.get("codes", "<u2"))

    def read(start, stop):
        if stop <= start:
            return np.empty(0, dtype)
        data = fs.read_range(codes_uri, start * dtype.itemsize, (stop - start) * dtype.itemsize)
        if len(data) != (stop - start) * dtype.itemsize:
            raise InputError(f"{codes_uri} is truncated")
        return np.frombuffer(data, dtype)

    n_classes = len(doc["counts"])

    def entry(j):
        data = fs.read_range(base + ".table", j * n_classes * 8, n_classes * 8)
        if len(data) != n_classes * 8:
            raise InputError(f"{base}.table is truncated")
        return np.frombuffer(data, "<i8")

    ranked = doc.get("classes") is not None
    if ranked and doc.get("table_rows") != TABLE_ROWS:
        raise InputError(f"{base}.json is not the class file this version of samplegen writes "
                         f"(running counts every {TABLE_ROWS} rows); import the matrix again")
    return Strata(doc["classes"], doc["counts"], entry if doc.get("table_rows") else None,
                  read, label=doc.get("label"))


def recorded(matrix, column):
    """The base of the classes recorded at import for *column* of
    *matrix*, or None."""
    label = matrix.meta.get("label")
    if label is None or label_column(matrix.meta, label) != column:
        return None
    base = fsmod.join(matrix.uri, RECORDED)
    return base if matrix.fs.exists(base + ".json") else None


def strata_for(matrix, label, progress=None, ranked=True):
    """``(strata, base)``: the classes of *matrix*'s rows by *label* (a
    column name or number), recorded at import (*base* their files), or
    read by a pre-pass over the column (*base* None: not written yet).
    *ranked* False: the column's groups, always by a pre-pass."""
    column = label_column(matrix.meta, label)
    base = recorded(matrix, column) if ranked else None
    if base is not None:
        return open_strata(base), base
    return strata_of_values(read_label(matrix, column, progress), label, ranked), None


def remove_side(base):
    """Remove the files :func:`write_side` wrote at *base*."""
    fs = fsmod.get_fs(base)
    for suffix in (".json", ".codes", ".table", ".weights", ".chunks"):
        if fs.exists(base + suffix):
            fs.rmtree(base + suffix)


# -- every kind of side -------------------------------------------------------------
def side_for(matrix, field, column, progress=None):
    """``(side, base)`` of the plan's *field* (``strata``, ``grouping``,
    ``weighting``) by *column* of *matrix*: :func:`strata_for`, or the
    weights read by a pre-pass over the column (*base* None)."""
    if field == "weighting":
        if column.endswith(".npy") and column not in (matrix.meta.get("columns") or []):
            return weights_file(column, matrix.rows), None
        return RowWeights.of(read_label(matrix, label_column(matrix.meta, column), progress),
                             column), None
    return strata_for(matrix, column, progress, ranked=field == "strata")


def weights_file(uri, rows):
    """The :class:`RowWeights` of a ``.npy`` file (a path or URL) holding one
    weight per row of a matrix of *rows* rows, in row-id order."""
    try:
        with fsmod.local_copy(uri) as path:
            values = _load_weights(path, rows, uri)
    except FileNotFoundError:
        raise InputError(f"weights file not found: {uri}") from None
    except (OSError, ValueError, EOFError, SyntaxError, tokenize.TokenError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{uri} is not a .npy file of numbers: {reason}") from None
    return RowWeights.of(values, uri)


def _load_weights(path, rows, uri):
    """The array of the local ``.npy`` file *path* (of *uri*): its header
    checked first (one value per row of *rows*, numbers, the data as long
    as the header says), so a damaged or foreign file is refused before
    anything is allocated for it."""
    fmt = np.lib.format
    with open(path, "rb") as f:
        version = fmt.read_magic(f)
        read_header = fmt.read_array_header_1_0 if version == (1, 0) else \
            fmt.read_array_header_2_0
        shape, _, dtype = read_header(f)
        if dtype.hasobject or dtype.kind not in "fiub":
            raise InputError(f"{uri} holds values of dtype {dtype}: weights must be numbers "
                             "(integers or floats)")
        if len(shape) != 1 or shape[0] != rows:
            held = (f"{shape[0]} value{'s' if shape[0] != 1 else ''}" if len(shape) == 1
                    else f"values of shape {shape}")
            raise InputError(f"{uri} holds {held}; the matrix has {rows} "
                             f"row{'s' if rows != 1 else ''} (one weight per row)")
        data = os.fstat(f.fileno()).st_size - f.tell()
        if data != rows * dtype.itemsize:
            raise InputError(f"{uri} is damaged: its header promises {rows} values of "
                             f"{dtype.itemsize} bytes, the file holds {data} bytes of data")
        f.seek(0)
        return np.load(f, allow_pickle=False)


def write_side(base, side, label):
    """Write *side* (classes, groups or weights of column *label*) at *base*."""
    if isinstance(side, RowWeights):
        return write_weights(base, side, label)
    return write_strata(base, side, label)


def open_side(base):
    """The side :func:`write_side` wrote at *base*, read range by range."""
    doc = read_json(base + ".json", "rows' side file")
    if doc.get("format") == WEIGHTS_FORMAT:
        return open_weights(base, doc)
    return open_strata(base, doc)


def write_weights(base, weights, label):
    """Write *weights* (:class:`RowWeights` of column *label*) as
    ``<base>.json``, ``<base>.weights`` and ``<base>.chunks``; returns *base*."""
    fs = fsmod.get_fs(base)
    fs.write_bytes(base + ".weights",
                   weights.weights(0, weights.n_rows).astype("<f8").tobytes())
    fs.write_bytes(base + ".chunks", np.asarray(weights.chunk_totals(), "<f8").tobytes())
    fs.write_bytes(base + ".json", to_json({
        "format": WEIGHTS_FORMAT, "label": label, "n_rows": weights.n_rows,
        "positive": weights.positive, "exponent": weights.exponent}))
    return base


def open_weights(base, doc=None):
    """The :class:`RowWeights` that :func:`write_weights` wrote at *base*:
    a range's weights read when asked, the chunk totals when first needed."""
    doc = doc or read_json(base + ".json", "weights")
    if doc.get("format") != WEIGHTS_FORMAT:
        raise InputError(f"{base}.json is not a {WEIGHTS_FORMAT} file")
    fs = fsmod.get_fs(base)
    n_rows = int(doc["n_rows"])

    def read(start, stop):
        if stop <= start:
            return np.empty(0)
        data = fs.read_range(base + ".weights", start * 8, (stop - start) * 8)
        if len(data) != (stop - start) * 8:
            raise InputError(f"{base}.weights is truncated")
        return np.frombuffer(data, "<f8")

    def chunks():
        return np.frombuffer(fs.read_bytes(base + ".chunks"), "<f8")

    return RowWeights(n_rows, read, chunks, doc.get("label"), doc.get("positive"),
                      int(doc.get("exponent", 0)))
