"""Users' row files in and out of the block store: .npy, .csv, Parquet.

``import`` assigns row ids in file order (row i of the file gets id i);
``export`` writes any matrix or sample back as rows, with a ``row_id`` column
(CSV, Parquet) or a ``<name>.row_ids.npy`` file next to a ``.npy`` export.
Values travel as float64 bit patterns, so NaN and +-inf survive both ways.
"""
import os
import uuid

import numpy as np

from udfs.errors import InputError, OutputError, ParameterError

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


def _open_npy(path, columns):
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


def _is_number(field):
    try:
        float(field)
        return True
    except ValueError:
        return False


CSV_CHUNK_BYTES = 16 << 20


def _open_csv(path, columns):
    """CSV of numbers: an optional header line (detected: a non-numeric first
    line), ``,`` or tab separated; empty fields, ``nan``, ``inf`` and ``-inf``
    are accepted.  Rows with a different number of fields are an error."""
    with open(path, "rb") as f:
        first = f.readline()
        while first and not first.strip():
            first = f.readline()
        body_start = f.tell()
    if not first.strip():
        raise InputError(f"input file is empty: {path}")
    text = first.decode("utf-8", "replace").rstrip("\r\n")
    delimiter = "\t" if "\t" in text and "," not in text else ","
    fields = [x.strip().strip('"') for x in text.split(delimiter)]
    has_header = not all(_is_number(x) or x == "" for x in fields)
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
    offset = body_start if has_header else body_start - len(first)
    first_line = 2 if has_header else 1

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
    raw = np.frombuffer(chunk, np.uint8)
    ends = np.flatnonzero(raw == ord("\n"))
    if not chunk.endswith(b"\n"):
        ends = np.append(ends, raw.size)
    seps = np.concatenate([[0], np.cumsum(raw == ord(delimiter))])
    starts = np.concatenate([[0], ends[:-1] + 1])
    per_line = seps[ends] - seps[starts]
    blank = (ends - starts) <= np.where(raw[np.maximum(ends - 1, 0)] == ord("\r"), 1, 0)
    bad = np.flatnonzero((per_line != n_fields - 1) & ~blank)
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{path}: ragged CSV: line {first_line + i} has {per_line[i] + 1} "
                         f"fields, expected {n_fields}")
    import io
    try:
        frame = pd.read_csv(io.BytesIO(chunk), header=None, sep=delimiter, dtype=np.float64,
                            skip_blank_lines=True, engine="c")
    except (ValueError, pd.errors.ParserError):
        lines = chunk.decode("utf-8", "replace").splitlines()
        for i, line in enumerate(lines):
            for j, field in enumerate(line.split(delimiter)):
                field = field.strip()
                if field and not _is_number(field):
                    raise InputError(f"{path}: non-numeric value {field!r} at line "
                                     f"{first_line + i}, column {j + 1}") from None
        raise InputError(f"{path}: cannot parse the CSV near line {first_line}") from None
    return frame.to_numpy(dtype=np.float64)


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
    kind = getattr(dtype, "kind", None) or np.dtype(str(dtype).lower().replace("boolean", "bool")).kind
    return kind in "biuf"


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def export(matrix, path, row_ids=True, overwrite=False):
    """Write a :class:`jobs.store.Matrix` (or composed view) as rows."""
    fmt = file_format(path)
    targets = [path]
    ids_path = os.path.splitext(path)[0] + ".row_ids.npy"
    if fmt == ".npy" and row_ids:
        targets.append(ids_path)
    for target in targets:
        if os.path.exists(target) and not overwrite:
            raise OutputError(f"{target} exists (use --overwrite to replace it)")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise OutputError(f"cannot write {path}: directory {directory} does not exist")
    matrix.index()  # fail on a corrupt or incomplete matrix before writing anything
    names = matrix.meta.get("columns") or [f"c{j}" for j in range(matrix.cols)]
    tmp = {t: os.path.join(directory, f".{os.path.basename(t)}.tmp-{uuid.uuid4().hex[:8]}")
           for t in targets}
    try:
        if fmt == ".npy":
            _write_npy(matrix, tmp[path], tmp.get(ids_path))
        elif fmt == ".csv":
            _write_csv(matrix, tmp[path], names, row_ids)
        else:
            _write_parquet(matrix, tmp[path], names, row_ids)
        for target in targets:
            os.replace(tmp[target], target)
    finally:
        for t in tmp.values():
            if os.path.exists(t):
                os.remove(t)
    return targets


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


def _write_csv(matrix, path, names, row_ids):
    with open(path, "w") as f:
        f.write(",".join((["row_id"] if row_ids else []) + names) + "\n")
        for ids, dense in matrix.iter_rows():
            body = dense if not row_ids else np.column_stack([ids.astype(np.float64), dense])
            fmt = (["%d"] if row_ids else []) + ["%.17g"] * dense.shape[1]
            np.savetxt(f, body, delimiter=",", fmt=fmt)


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
