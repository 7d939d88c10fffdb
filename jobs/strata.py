"""The classes of a matrix's rows, as files the tasks read range by range.

A stratified run needs every row's class in every task, whatever column
block the task holds (:mod:`samplegen.udfs.strata`).  The driver gets them
once -- recorded at import for the matrix's label column, or by a pre-pass
over the label column's blocks -- and writes them as three files next to the
run's output:

* ``<base>.json``: ``{"format": "samplegen-strata/2", "label": name,
  "codes": "<u2", "classes": [values], "counts": [rows per class],
  "table_rows": 1024, "files": {suffix: record}, "checksum": "sha256:..."}``;
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
same way, as ``<base>.json`` (``{"format": "samplegen-weights/2", "label":
name, "n_rows": n, "positive": rows of positive weight, "exponent": the
power of two that scales every sum, "files": ..., "checksum": ...}``),
``<base>.weights`` (one little-endian float64 per row, as given) and
``<base>.chunks`` (the row-id tree's chunk totals of the scaled weights,
float64, read whole by a weighted bootstrap).  :func:`side_for`,
:func:`write_side`, :func:`open_side` and :func:`remove_side` take either
kind.

**Checksums.**  ``<base>.json`` records every other file it describes
(``"files"``: ``{".codes": {"bytes": size, "piece": p, "crc32": base64 of
one little-endian uint32 per piece}, ...}``: a CRC-32 of each piece of ``p``
bytes, 16 KiB or a larger power of two for files of more than 65,536
pieces) and carries ``"checksum"``, the SHA-256 of its other fields'
canonical JSON (sorted keys, no spaces).  Every read verifies what it reads:
the JSON whole, a data file piece by piece (:class:`VerifiedFile`: a task
reading a range of rows reads and checks the pieces holding it, not the
whole file, and keeps the last pieces it checked for the next range).  A
changed, truncated, lengthened or missing file is one InputError naming it.
Classes recorded at import by a samplegen without checksums
(``samplegen-strata/1``) are not read: a run reads the label column
instead, as for a matrix without recorded classes.
"""
import base64
import binascii
import os
import tokenize
import zlib

import numpy as np

from samplegen.udfs.errors import InputError, ParameterError
from samplegen.udfs.strata import TABLE_ROWS, Strata, code_dtype
from samplegen.udfs.weighted import RowWeights, chunk_bounds

from . import fs as fsmod
from .blocks import column_of_line
from .store import CHECKSUM, META, digest, read_json, sealed_json

FORMAT = "samplegen-strata/2"
WEIGHTS_FORMAT = "samplegen-weights/2"
#: the formats written before side files carried checksums
UNCHECKED_FORMATS = ("samplegen-strata/1", "samplegen-weights/1")
#: bytes per checksummed piece of a side file (at least), and the most pieces
#: a file has before its pieces grow (by powers of two): a task reading a
#: range reads whole pieces, and the JSON holds 4 bytes per piece
PIECE_BYTES = 1 << 14
MAX_PIECES = 1 << 16
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
    dtype = code_dtype(strata.counts.size).newbyteorder("<")
    files = {".codes": strata.codes(0, strata.n_rows).astype(dtype).tobytes()}
    ranked = strata.ranked
    if ranked:
        files[".table"] = strata.table().astype("<i8").tobytes()
    _write_files(base, files, {
        "format": FORMAT, "label": label, "codes": dtype.str,
        "classes": strata.classes if ranked else None, "counts": strata.counts.tolist(),
        "table_rows": TABLE_ROWS if ranked else None})
    return base


def open_strata(base, doc=None):
    """The :class:`Strata` that :func:`write_strata` wrote at *base*, reading
    (and verifying) the codes of a range when asked (*doc*: its ``.json``
    as :func:`read_side_json` gives it, when read already)."""
    doc = doc or read_side_json(base)
    json_uri = base + ".json"
    if doc.get("format") != FORMAT:
        raise InputError(f"{json_uri} is not a {FORMAT} file")
    counts = doc.get("counts")
    if doc.get("codes") not in ("<u2", "<u4") or not isinstance(counts, list) or not all(
            type(c) is int and c >= 0 for c in counts):
        raise InputError(f"corrupt side file {json_uri}: its codes type or class counts are "
                         f"not samplegen's; {_remedy(base)}")
    dtype = np.dtype(doc["codes"])
    n_rows, n_classes = sum(counts), len(counts)
    codes = _file(base, doc, ".codes", n_rows * dtype.itemsize)

    def read(start, stop):
        if stop <= start:
            return np.empty(0, dtype)
        return np.frombuffer(codes.read(start * dtype.itemsize, (stop - start) * dtype.itemsize),
                             dtype)

    ranked = doc.get("classes") is not None
    if ranked and doc.get("table_rows") != TABLE_ROWS:
        raise InputError(f"{json_uri} is not the class file this version of samplegen writes "
                         f"(running counts every {TABLE_ROWS} rows); import the matrix again")
    entry = None
    if ranked:
        table = _file(base, doc, ".table", (n_rows // TABLE_ROWS + 1) * n_classes * 8)

        def entry(j):
            return np.frombuffer(table.read(j * n_classes * 8, n_classes * 8), "<i8")

    return Strata(doc["classes"], counts, entry, read, label=doc.get("label"))


def recorded(matrix, column):
    """The base of the classes recorded at import for *column* of
    *matrix*, or None (none recorded, or recorded by a samplegen without
    checksums: :data:`UNCHECKED_FORMATS`)."""
    return _recorded(matrix, column)[0]


def _recorded(matrix, column):
    """``(base, doc)`` of :func:`recorded` (*doc*: its verified ``.json``),
    or ``(None, None)``.  Classes of another column or another number of
    rows than the matrix's label (its ``_matrix.json`` changed, or the files
    copied from another matrix) are an InputError naming both files."""
    label = matrix.meta.get("label")
    if label is None or label_column(matrix.meta, label) != column:
        return None, None
    base = fsmod.join(matrix.uri, RECORDED)
    if not matrix.fs.exists(base + ".json"):
        return None, None
    doc = read_side_json(base, unchecked=None)
    if doc is None:
        return None, None
    counts = doc.get("counts")
    rows = sum(counts) if isinstance(counts, list) and all(type(c) is int for c in counts) \
        else None
    if doc.get("label") != label or rows != matrix.rows:
        raise InputError(f"{base}.json holds the classes of column {doc.get('label')!r} over "
                         f"{rows} rows, but {fsmod.join(matrix.uri, META)} names label "
                         f"{label!r} over {matrix.rows} rows; {_remedy(base)}")
    return base, doc


def strata_for(matrix, label, progress=None, ranked=True):
    """``(strata, base)``: the classes of *matrix*'s rows by *label* (a
    column name or number), recorded at import (*base* their files), or
    read by a pre-pass over the column (*base* None: not written yet).
    *ranked* False: the column's groups, always by a pre-pass."""
    column = label_column(matrix.meta, label)
    base, doc = _recorded(matrix, column) if ranked else (None, None)
    if base is not None:
        return open_strata(base, doc), base
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
    doc = read_side_json(base)
    if doc.get("format") == WEIGHTS_FORMAT:
        return open_weights(base, doc)
    return open_strata(base, doc)


def write_weights(base, weights, label):
    """Write *weights* (:class:`RowWeights` of column *label*) as
    ``<base>.json``, ``<base>.weights`` and ``<base>.chunks``; returns *base*."""
    _write_files(base, {
        ".weights": weights.weights(0, weights.n_rows).astype("<f8").tobytes(),
        ".chunks": np.asarray(weights.chunk_totals(), "<f8").tobytes()}, {
        "format": WEIGHTS_FORMAT, "label": label, "n_rows": weights.n_rows,
        "positive": weights.positive, "exponent": weights.exponent})
    return base


def open_weights(base, doc=None):
    """The :class:`RowWeights` that :func:`write_weights` wrote at *base*:
    a range's weights read (and verified) when asked, the chunk totals when
    first needed (*doc*: its ``.json`` as :func:`read_side_json` gives it)."""
    doc = doc or read_side_json(base)
    json_uri = base + ".json"
    if doc.get("format") != WEIGHTS_FORMAT:
        raise InputError(f"{json_uri} is not a {WEIGHTS_FORMAT} file")
    n_rows, exponent = doc.get("n_rows"), doc.get("exponent", 0)
    if type(n_rows) is not int or n_rows < 1 or type(exponent) is not int:
        raise InputError(f"corrupt side file {json_uri}: its n_rows or exponent is not "
                         f"samplegen's; {_remedy(base)}")
    values = _file(base, doc, ".weights", n_rows * 8)
    chunks = _file(base, doc, ".chunks", chunk_bounds(n_rows)[0].size * 8)

    def read(start, stop):
        if stop <= start:
            return np.empty(0)
        return np.frombuffer(values.read(start * 8, (stop - start) * 8), "<f8")

    return RowWeights(n_rows, read, lambda: np.frombuffer(chunks.read_all(), "<f8"),
                      doc.get("label"), doc.get("positive"), exponent)


# -- checksums ----------------------------------------------------------------------
def piece_bytes(size):
    """The bytes per checksummed piece of a side file of *size* bytes:
    :data:`PIECE_BYTES`, doubled until the file has at most
    :data:`MAX_PIECES` pieces."""
    piece = PIECE_BYTES
    while size > piece * MAX_PIECES:
        piece *= 2
    return piece


def file_record(data):
    """What ``<base>.json`` records of a side file's bytes *data*: ``{"bytes":
    size, "piece": p, "crc32": base64 of the little-endian CRC-32 of every
    piece of p bytes}``."""
    piece, view = piece_bytes(len(data)), memoryview(data)
    crcs = np.array([zlib.crc32(view[i:i + piece]) for i in range(0, len(data), piece)], "<u4")
    return {"bytes": len(data), "piece": piece,
            "crc32": base64.b64encode(crcs.tobytes()).decode("ascii")}


def _write_files(base, files, doc):
    """Write the side files *files* (``{suffix: bytes}``) at *base*, then
    ``<base>.json``: *doc* with their records (``"files"``) and its own
    checksum (``"checksum"``).  The JSON comes last, so a side whose JSON
    exists has all its files."""
    fs = fsmod.get_fs(base)
    records = {}
    for suffix, data in files.items():
        fs.write_bytes(base + suffix, data)
        records[suffix] = file_record(data)
    doc = dict(doc, files=records)
    fs.write_bytes(base + ".json", sealed_json(doc))


def _remedy(base):
    """How to mend a damaged side at *base*, for messages."""
    if base.rstrip("/").rsplit("/", 1)[-1] == RECORDED:
        return (f"remove the matrix's {RECORDED}.* files (its label column is then read "
                "instead) or import the matrix again")
    return "the run's side files were changed while it ran; run the command again"


def read_side_json(base, unchecked=False):
    """The verified ``<base>.json`` of a side (without its checksum field):
    strict JSON, an object whose checksum matches its content, else
    InputError naming the file.  A side of :data:`UNCHECKED_FORMATS`
    (written before checksums) is refused too, unless *unchecked* is None:
    then the answer is None."""
    uri = base + ".json"
    try:
        doc = read_json(uri, "side file")
    except InputError as exc:
        raise InputError(f"{exc}; {_remedy(base)}") from None
    if not isinstance(doc, dict):
        raise InputError(f"corrupt side file {uri}: not a JSON object; {_remedy(base)}")
    recorded_sum = doc.pop(CHECKSUM, None)
    if recorded_sum is None and doc.get("format") in UNCHECKED_FORMATS:
        if unchecked is None:
            return None
        raise InputError(f"{uri} was written by a samplegen without checksums "
                         f"({doc['format']}); {_remedy(base)}")
    try:
        ok = recorded_sum is not None and recorded_sum == digest(doc)
    except ValueError:      # not strict JSON: read_json refused it already
        ok = False
    if not ok:
        raise InputError(f"damaged side file {uri}: its content does not match its checksum "
                         f"({'none recorded' if recorded_sum is None else 'edited or damaged'}); "
                         f"{_remedy(base)}")
    return doc


def _file(base, doc, suffix, size):
    """The :class:`VerifiedFile` of ``<base><suffix>`` from the record in
    *doc* (its ``.json``), which must be of *size* bytes (what the rest of
    *doc* implies)."""
    files = doc.get("files")
    record = files.get(suffix) if isinstance(files, dict) else None
    try:
        verified = VerifiedFile(base + suffix, record, base + ".json", _remedy(base))
    except (KeyError, TypeError, ValueError, binascii.Error):
        verified = None
    if verified is None or verified.size != size:
        raise InputError(f"corrupt side file {base}.json: no valid record of {base}{suffix} "
                         f"({size} bytes); {_remedy(base)}")
    return verified


class VerifiedFile:
    """A side file read by ranges of bytes, each piece read checked against
    its CRC-32 in *record* (:func:`file_record`, from the JSON *json_uri*);
    *remedy*: how messages say to mend damage.  The pieces last read are
    kept (one assignment: safe to share between threads), so the ranges of
    consecutive blocks in one piece read and check it once."""

    def __init__(self, uri, record, json_uri, remedy):
        self.uri, self.json_uri, self.remedy = uri, json_uri, remedy
        self.size, self.piece = record["bytes"], record["piece"]
        if type(self.size) is not int or type(self.piece) is not int or self.size < 0 or \
                self.piece < 1:
            raise ValueError("not a file record")
        self.crcs = np.frombuffer(base64.b64decode(record["crc32"], validate=True), "<u4")
        if self.crcs.size != -(-self.size // self.piece):
            raise ValueError("not a file record")
        self.fs = fsmod.get_fs(uri)
        self._last = (0, b"")

    def _damaged(self, what):
        return InputError(f"damaged side file {self.uri}: {what}; {self.remedy}")

    def read(self, start, length):
        """The *length* bytes from offset *start*, verified."""
        stop = start + length
        lo, held = self._last
        if lo <= start and stop <= lo + len(held):
            return held[start - lo:stop - lo]
        if length <= 0:
            return b""
        if start < 0 or stop > self.size:
            raise self._damaged(f"bytes {start}-{stop - 1} were asked of the {self.size} "
                                f"{self.json_uri} records")
        first, last = start // self.piece, -(-stop // self.piece)
        lo, hi = first * self.piece, min(self.size, last * self.piece)
        try:        # one byte more at the end: a file longer than written is damaged too
            data = self.fs.read_range(self.uri, lo, hi - lo + (hi == self.size))
        except FileNotFoundError:
            raise InputError(f"side file {self.uri} is missing ({self.json_uri} records "
                             f"{self.size} bytes of it); {self.remedy}") from None
        if len(data) < hi - lo:
            raise self._damaged(f"it is truncated (it ends at byte {lo + len(data)}, "
                                f"{self.json_uri} records {self.size} bytes)")
        if len(data) > hi - lo:
            raise self._damaged(f"it is longer than the {self.size} bytes {self.json_uri} "
                                "records")
        view = memoryview(data)
        for p in range(first, last):
            a = (p - first) * self.piece
            crc = zlib.crc32(view[a:a + self.piece])
            if crc != self.crcs[p]:
                raise self._damaged(f"bytes {lo + a}-{lo + a + len(view[a:a + self.piece]) - 1} "
                                    f"have CRC-32 {crc:08x}, {self.json_uri} records "
                                    f"{int(self.crcs[p]):08x} (changed or damaged)")
        self._last = (lo, view)
        return view[start - lo:stop - lo]

    def read_all(self):
        """The whole file, verified."""
        return self.read(0, self.size)
