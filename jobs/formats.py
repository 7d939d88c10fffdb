"""Users' row files in and out of the block store: .npy, .csv, Parquet.

``import`` assigns row ids in file order (row i of the file gets id i);
``export`` writes any matrix or sample back as rows, with a ``row_id`` column
(CSV, Parquet) or a ``<name>.row_ids.npy`` file next to a ``.npy`` export.
Values travel as float64 bit patterns, so NaN and +-inf survive both ways; a
CSV export writes each value as the shortest text that reads back as the same
float64 (``91.22``, not ``91.219999999999999``).
"""
import io
import itertools
import os
import re
import tempfile
from urllib.parse import urlsplit

import numpy as np

from samplegen.udfs.errors import InputError, OutputError, ParameterError

from . import fs as fsmod
from .store import MANIFEST, META

CHUNK_ROWS = 65536
FORMATS = (".npy", ".csv", ".parquet")


def file_format(path):
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise ParameterError(f"unsupported file type {ext or '(none)'!r} for {path}: "
                             f"use one of {', '.join(FORMATS)}")
    return ext


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
def open_source(path, columns=None):
    """Inspect a row file: returns ``(column names, n_cols, row chunk iterator)``.

    Raises InputError for a missing, empty, ragged or non-numeric file, or an
    array that is not 2-D.
    """
    fmt = file_format(path)
    if not os.path.exists(path):
        raise InputError(f"input file not found: {path}")
    if os.path.isdir(path) and fmt != ".parquet":
        raise InputError(f"input is a directory, expected a {fmt} file: {path}")
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise InputError(f"input file is empty: {path}")
    if columns is not None and fmt == ".npy":
        raise ParameterError("--columns applies to CSV and Parquet files only")
    return {".npy": _open_npy, ".csv": _open_csv, ".parquet": _open_parquet}[fmt](path, columns)


NPY_MAGIC = b"\x93NUMPY"


def _open_npy(path, columns):
    with open(path, "rb") as f:
        if f.read(len(NPY_MAGIC)) != NPY_MAGIC:
            raise InputError(f"{path} is not a .npy file (no NumPy header)")
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:  # numpy raises several types for bad files
        raise InputError(f"cannot read {path} as .npy: {exc}") from None
    if array.ndim != 2:
        raise InputError(f"{path}: array is not 2-D (shape {array.shape})")
    if array.dtype.kind not in "biuf":
        raise InputError(f"{path}: array is not numeric (dtype {array.dtype})")
    if array.shape[0] == 0 or array.shape[1] == 0:
        raise InputError(f"{path}: array is empty (shape {array.shape})")

    def chunks():
        for a in range(0, array.shape[0], CHUNK_ROWS):
            yield np.asarray(array[a:a + CHUNK_ROWS], dtype=np.float64)
    return None, array.shape[1], chunks()


# The CSV rule.  A field (surrounding spaces and tabs and one pair of double
# quotes removed) is data iff it is empty (NaN) or a number: decimal or
# scientific notation, ``nan``, ``inf`` or ``infinity``, with an optional sign,
# in any case -- what Python's float() accepts, without its underscores and
# non-ASCII digits.  Anything else is an error naming the field, its line in
# the file and its column.  The fast path (pandas) is only given chunks made
# of bytes that cannot spell anything outside this rule (pandas would also
# take ``True``, ``"1"2``, a lone CR as a line end ...); every other chunk,
# and any chunk pandas refuses, is parsed field by field by _parse_csv_slow
# with this same rule.
_NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                     r"|nan|inf|infinity)", re.IGNORECASE)
_SPACE = " \t\r"
# pandas' NA words off; NaN is "" or nan in any case and sign (pandas takes the
# infinities itself, case-insensitively)
_NA_VALUES = [""] + [sign + "".join(letters) for sign in ("", "+", "-")
                     for letters in itertools.product("nN", "aA", "nN")]
_CSV_BYTES = b"0123456789.+-eEnNaAiIfFtTyY \t\r\n"


def _csv_field(raw):
    """The text of a CSV field: surrounding blanks and one pair of quotes off."""
    field = raw.strip(_SPACE)
    if len(field) >= 2 and field[0] == field[-1] == '"':
        field = field[1:-1].strip(_SPACE)
    return field


def _is_number(field):
    """*field* (from :func:`_csv_field`) is a number by the CSV rule."""
    return _NUMBER.fullmatch(field) is not None


CSV_CHUNK_BYTES = 16 << 20
BOM = b"\xef\xbb\xbf"


def _open_csv(path, columns):
    """CSV of numbers: an optional header line, ``,`` or tab separated; fields
    are empty (NaN) or numbers, ``nan`` and ``inf`` included (see _NUMBER).
    The first line is a header iff it has a non-empty field and none of its
    fields is a number.  Rows with a different number of fields are an error."""
    with open(path, "rb") as f:
        first_offset = len(BOM) if f.read(len(BOM)) == BOM else 0
        f.seek(first_offset)
        first_no = 1
        first = f.readline()
        while first and not first.strip(b" \t\r\n"):
            first_offset, first_no = f.tell(), first_no + 1
            first = f.readline()
        body_start = f.tell()
    if not first:
        raise InputError(f"input file is empty: {path}")
    text = first.decode("utf-8", "replace").rstrip("\r\n")
    delimiter = "\t" if "\t" in text and "," not in text else ","
    fields = [_csv_field(x) for x in text.split(delimiter)]
    has_header = any(fields) and not any(_is_number(x) for x in fields if x)
    header = fields if has_header else None
    n_fields = len(fields)
    if columns is not None:
        if header is None:
            raise ParameterError("--columns needs a CSV file with a header line")
        missing = [c for c in columns if c not in header]
        if missing:
            raise ParameterError(f"--columns: no column {missing[0]!r} in {path} "
                                 f"(columns: {', '.join(header)})")
        usecols = [header.index(c) for c in columns]
    else:
        usecols = None
    names = list(columns) if columns is not None else header
    offset = body_start if has_header else first_offset
    first_line = first_no + 1 if has_header else first_no

    def chunks():
        import pandas as pd
        line_no, produced, carry = first_line, False, b""
        with open(path, "rb") as f:
            f.seek(offset)
            while True:
                data = f.read(CSV_CHUNK_BYTES)
                buf = carry + data
                if not data:
                    chunk, carry = buf, b""
                else:
                    cut = buf.rfind(b"\n") + 1
                    chunk, carry = buf[:cut], buf[cut:]
                if chunk.strip():
                    array = _parse_csv_chunk(pd, path, chunk, delimiter, n_fields, line_no)
                    produced = produced or array.shape[0] > 0
                    yield array if usecols is None else array[:, usecols]
                line_no += chunk.count(b"\n")
                if not data:
                    break
        if not produced:
            raise InputError(f"{path}: no data rows")
    return names, (len(columns) if columns is not None else n_fields), chunks()


def _parse_csv_chunk(pd, path, chunk, delimiter, n_fields, first_line):
    """Rows of whole lines *chunk* (its first line is line *first_line* of
    the file); blank lines (blanks only) are skipped."""
    raw = np.frombuffer(chunk, np.uint8)
    ends = np.flatnonzero(raw == ord("\n"))
    if not chunk.endswith(b"\n"):
        ends = np.append(ends, raw.size)
    starts = np.concatenate([[0], ends[:-1] + 1])

    def per_line(positions):
        return np.searchsorted(positions, ends) - np.searchsorted(positions, starts)
    fields = per_line(np.flatnonzero(raw == ord(delimiter))) + 1
    blank_chars = [c for c in _SPACE if c != delimiter]
    space = np.zeros(256, bool)
    space[[ord(c) for c in blank_chars]] = True
    has_blanks = any(c.encode() in chunk for c in blank_chars)
    if has_blanks:
        blank = per_line(np.flatnonzero(space[raw])) == ends - starts
    else:
        blank = ends == starts
    bad = np.flatnonzero((fields != n_fields) & ~blank)
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}: ragged CSV: line {first_line + i} has {fields[i]} "
                         f"fields, expected {n_fields}")
    if _fast_path_safe(chunk, raw, delimiter, space if has_blanks else None):
        try:
            frame = pd.read_csv(io.BytesIO(chunk), header=None, sep=delimiter, dtype=np.float64,
                                keep_default_na=False, na_values=_NA_VALUES,
                                skipinitialspace=True, skip_blank_lines=True, engine="c")
        except (ValueError, pd.errors.ParserError):
            pass
        else:
            if frame.shape == (int((~blank).sum()), n_fields):
                return frame.to_numpy(dtype=np.float64)
    return _parse_csv_slow(path, chunk, delimiter, n_fields, first_line)


def _fast_path_safe(chunk, raw, delimiter, space):
    """Whether pandas reads *chunk* by the CSV rule: only characters that can
    spell numbers, no quotes, no CR but before LF, and no blank inside a
    field (pandas reads ``1E 4`` as 1E4).  *space*: the blanks' byte table,
    None if the chunk has none."""
    if chunk.translate(None, _CSV_BYTES + delimiter.encode()):
        return False
    if chunk.count(b"\r") != chunk.count(b"\r\n") + chunk.endswith(b"\r"):
        return False
    if space is None:
        return True
    blanks = space[raw]
    starts = np.flatnonzero(blanks[1:] & ~blanks[:-1]) + 1  # runs of blanks
    ends = np.flatnonzero(blanks[:-1] & ~blanks[1:])
    if blanks[0]:
        ends = ends[1:]
    if blanks[-1]:
        starts = starts[:-1]
    before, after = raw[starts - 1], raw[ends + 1]
    edge = [ord(delimiter), ord("\n")]
    return not (~np.isin(before, edge) & ~np.isin(after, edge)).any()


def _parse_csv_slow(path, chunk, delimiter, n_fields, first_line):
    """The CSV rule field by field: the rows of *chunk*, or an InputError at
    the first field that is neither empty nor a number."""
    rows = []
    for i, line in enumerate(chunk.decode("utf-8", "replace").split("\n")):
        if delimiter not in line and not line.strip(_SPACE):
            continue  # blank line
        row = []
        for j, raw in enumerate(line.split(delimiter)):
            field = _csv_field(raw)
            if field and not _is_number(field):
                raise InputError(f"{path}: non-numeric value {raw.strip(_SPACE)!r} at line "
                                 f"{first_line + i}, column {j + 1}")
            row.append(float(field) if field else np.nan)
        if len(row) != n_fields:  # _parse_csv_chunk checked this; kept for direct use
            raise InputError(f"{path}: ragged CSV: line {first_line + i} has {len(row)} "
                             f"fields, expected {n_fields}")
        rows.append(row)
    array = np.array(rows, dtype=np.float64).reshape(len(rows), n_fields)
    array[np.isnan(array)] = np.nan  # one NaN, as pandas gives (float("-nan") has a sign)
    return array


def _open_parquet(path, columns):
    try:
        import fastparquet
        pf = fastparquet.ParquetFile(path)
    except Exception as exc:
        raise InputError(f"cannot read {path} as Parquet: {exc}") from None
    dtypes = pf.dtypes
    if columns is None:
        bad = [c for c, t in dtypes.items() if not _numeric_dtype(t)]
        if bad:
            raise InputError(f"{path}: column {bad[0]!r} is not numeric ({dtypes[bad[0]]}); "
                             "choose numeric columns with --columns")
        columns = list(dtypes)
    else:
        for c in columns:
            if c not in dtypes:
                raise ParameterError(f"--columns: no column {c!r} in {path} "
                                     f"(columns: {', '.join(dtypes)})")
            if not _numeric_dtype(dtypes[c]):
                raise InputError(f"{path}: column {c!r} is not numeric ({dtypes[c]})")
    if not columns:
        raise InputError(f"{path}: no columns")
    if pf.count() == 0:
        raise InputError(f"{path}: no rows")

    def chunks():
        for df in pf.iter_row_groups(columns=columns):
            yield df[columns].to_numpy(dtype=np.float64, na_value=np.nan)
    return [str(c) for c in columns], len(columns), chunks()


def _numeric_dtype(dtype):
    kind = (getattr(dtype, "kind", None)
            or np.dtype(str(dtype).lower().replace("boolean", "bool")).kind)
    return kind in "biuf"


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def export(matrix, path, row_ids=True, overwrite=False):
    """Write a :class:`jobs.store.Matrix` (or composed view) as rows; returns
    the files written (with ``.npy``, the row ids beside it)."""
    if not fsmod.is_local(path):
        return _export_remote(matrix, path, row_ids, overwrite)
    fmt = file_format(path)
    _refuse_store_target(matrix, path)
    targets = _targets(path, row_ids, overwrite)
    ids_path = targets[1] if len(targets) > 1 else None
    directory = os.path.dirname(os.path.abspath(path))
    fsmod.missing_dirs(path)  # a parent that is a file: refused before any work
    matrix.index()  # fail on a corrupt or incomplete matrix before writing anything
    names = matrix.meta.get("columns") or [f"c{j}" for j in range(matrix.cols)]
    tmp = {t: os.path.join(directory, fsmod.temporary_name(os.path.basename(t)))
           for t in targets}
    made, done = fsmod.make_parents(path), False
    try:
        if fmt == ".npy":
            _write_npy(matrix, tmp[path], tmp.get(ids_path))
        elif fmt == ".csv":
            _write_csv(matrix, tmp[path], names, row_ids)
        else:
            _write_parquet(matrix, tmp[path], names, row_ids)
        for target in targets:
            os.replace(tmp[target], target)
        done = True
    finally:
        for t in tmp.values():
            if os.path.exists(t):
                os.remove(t)
        if not done:
            fsmod.remove_dirs(made)
    return targets


def _targets(path, row_ids, overwrite):
    """The files an export to *path* (local or a URI) writes: *path*, and for
    ``.npy`` with *row_ids* the ids beside it; OutputError for one that exists
    unless *overwrite*."""
    targets = [path]
    if file_format(path) == ".npy" and row_ids:
        targets.append(os.path.splitext(path)[0] + ".row_ids.npy")
    for target in targets:
        if fsmod.get_fs(target).exists(target) and not overwrite:
            raise OutputError(f"{target} exists (use --overwrite to replace it)")
    return targets


def _export_remote(matrix, uri, row_ids, overwrite):
    """Export to a local temporary directory, then copy each file to *uri*'s
    directory (each appears whole or not at all)."""
    remote = fsmod.get_fs(uri)
    directory, name = uri.rstrip("/").rsplit("/", 1)
    targets = _targets(uri, row_ids, overwrite)
    where = urlsplit(directory)
    root, parts = f"{where.scheme}://{where.netloc}", [p for p in where.path.split("/") if p]
    for depth in range(len(parts), 0, -1):                  # the directory and its ancestors
        place = root + "/" + "/".join(parts[:depth])
        for marker, kind in ((META, "matrix"), (MANIFEST, "run")):
            if remote.exists(fsmod.join(place, marker)):
                raise OutputError(f"cannot write {uri}: it is inside the samplegen {kind} "
                                  f"directory {place}; write it elsewhere")
    with tempfile.TemporaryDirectory(prefix="samplegen-export-") as tmp:
        written = export(matrix, os.path.join(tmp, name), row_ids, overwrite=True)
        for path, target in zip(written, targets):
            remote.upload(path, target)
    return targets


def _refuse_store_target(matrix, path):
    """OutputError if *path* would land in the matrix being exported or in
    any samplegen matrix or run directory (one with ``_matrix.json`` or
    ``_manifest.json``, at any depth above *path*): a stray file there can
    make the matrix unreadable."""
    directory = os.path.dirname(os.path.abspath(path))
    places = {directory, os.path.realpath(directory)}
    uri = getattr(matrix, "uri", None)
    if uri and fsmod.is_local(uri):
        source = os.path.realpath(fsmod.local_path(uri))
        if any(p == source or p.startswith(source.rstrip(os.sep) + os.sep) for p in places):
            raise OutputError(f"cannot write {path}: it is inside the samplegen matrix "
                              f"directory {uri} being exported; write it elsewhere")
    for place in sorted(places):
        while True:
            for marker, kind in ((META, "matrix"), (MANIFEST, "run")):
                if os.path.exists(os.path.join(place, marker)):
                    raise OutputError(f"cannot write {path}: it is inside the samplegen {kind} "
                                      f"directory {place}; write it elsewhere")
            parent = os.path.dirname(place)
            if parent == place:
                break
            place = parent


def _write_npy(matrix, path, ids_path):
    shape = (matrix.rows, matrix.cols)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_2_0(
            f, {"descr": "<f8", "fortran_order": False, "shape": shape})
        ids = []
        for row_ids, dense in matrix.iter_rows():
            f.write(np.ascontiguousarray(dense, dtype="<f8").tobytes())
            ids.append(row_ids)
    if ids_path:
        with open(ids_path, "wb") as f:
            np.save(f, np.concatenate(ids) if ids else np.empty(0, np.int64))


#: values formatted at a time by _csv_text (bounds its memory on wide rows)
CSV_PIECE_VALUES = 1 << 16


def _write_csv(matrix, path, names, row_ids):
    with open(path, "w") as f:
        f.write(",".join((["row_id"] if row_ids else []) + names) + "\n")
        for ids, dense in matrix.iter_rows():
            step = max(1, CSV_PIECE_VALUES // max(1, dense.shape[1]))
            for a in range(0, dense.shape[0], step):
                f.write(_csv_text(ids[a:a + step] if row_ids else None, dense[a:a + step]))


def _csv_text(ids, dense):
    """CSV lines of the rows *dense* (after their *ids*, unless None): each
    value is Python's repr of the float, the shortest text that float() reads
    back as the same float64 ('nan', 'inf', '-inf' included), with an
    integral value's '.0' left out.  One %-format over the whole piece."""
    n, cols = dense.shape
    values = dense.ravel().tolist()
    if ids is None:
        line, args = ",".join(["%r"] * cols) + "\n", values
    else:
        line, args = "%d," + ",".join(["%r"] * cols) + "\n", [None] * (n * (cols + 1))
        args[::cols + 1] = ids.tolist()
        for j in range(cols):
            args[j + 1::cols + 1] = values[j::cols]
    # repr ends a value in '.0' only when it is integral ('3.0', '-0.0', never '1.0e5')
    return ((line * n) % tuple(args)).replace(".0,", ",").replace(".0\n", "\n")


def _write_parquet(matrix, path, names, row_ids):
    import fastparquet
    import pandas as pd
    first = True
    for ids, dense in matrix.iter_rows():
        frame = pd.DataFrame(dense, columns=names)
        if row_ids:
            frame.insert(0, "row_id", ids.astype(np.int64))
        fastparquet.write(path, frame, append=not first, write_index=False)
        first = False
    if first:  # no rows: write the schema only
        frame = pd.DataFrame({n: np.empty(0) for n in names})
        if row_ids:
            frame.insert(0, "row_id", np.empty(0, np.int64))
        fastparquet.write(path, frame, write_index=False)
