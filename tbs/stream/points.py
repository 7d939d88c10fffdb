"""A few rows of a Parquet file without decoding whole row groups.

Rows re-entering the sample are copied from the source files, a handful per
batch, each from a different row group; decoding a row group of 65,536 rows
to take one costs about a millisecond and a half.  The files the jobs write
(fastparquet, no compression, PLAIN encoding, one data page per column chunk)
keep fixed-width values at a computable offset: after the page header and,
for an OPTIONAL column, its definition levels -- which, for a chunk without
nulls, are a single run-length-encoded run of ones.  :func:`point_plan`
checks exactly that for every column of a row group and returns where each
column's values start; :func:`read_points` then reads each wanted value with
one ``pread``.  :func:`layout` finds the same offsets in the bytes of a file
the job has just written, for all its row groups at once, so that they are
kept with the source and a later batch reads its rows without opening the
file, parsing its footer or its page headers (about 1 ms per source and
row group touched).  Anything else (compression, dictionaries, nulls, strings,
booleans, logical types, several pages) returns None and the caller decodes
the row group as before.
"""
from __future__ import annotations

import os

import numpy as np

#: Parquet physical type -> numpy dtype of the values (little-endian on disk)
_FIXED = {1: np.dtype("<i4"), 2: np.dtype("<i8"), 4: np.dtype("<f4"), 5: np.dtype("<f8")}
_UNCOMPRESSED, _PLAIN, _RLE, _DATA_PAGE = 0, 0, 3, 0
_HEAD = 512                       # bytes read to parse a page header and a definition-level run


def _varint(buf: bytes, at: int):
    value = shift = 0
    while at < len(buf):
        byte = buf[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
    return None, at


def _values_start(buf, md, rows: int, max_def: int):
    """Offset in ``buf`` -- the bytes of a column chunk from its data page on
    (at least the page header and the definition levels) -- of the chunk's
    first value, if the chunk is laid out as described in the module
    docstring; else None."""
    from fastparquet import encoding
    from fastparquet.cencoding import ThriftObject
    if (md.codec != _UNCOMPRESSED or md.dictionary_page_offset is not None or md.type not in _FIXED
            or md.num_values != rows or max_def > 1):
        return None
    stream = encoding.NumpyIO(buf)
    try:
        header = ThriftObject.from_buffer(stream, "PageHeader")
    except Exception:
        return None
    page = header.data_page_header
    if header.type != _DATA_PAGE or page is None or page.num_values != rows or page.encoding != _PLAIN:
        return None
    at = stream.tell()
    start = at
    if max_def:
        if page.definition_level_encoding != _RLE or at + 4 > len(buf):
            return None
        length = int.from_bytes(buf[at:at + 4], "little")
        run, end = _varint(buf, at + 4)
        # one RLE run (even header) of `rows` values, each the level 1 in one byte
        if run is None or run & 1 or run >> 1 != rows or end + 1 != at + 4 + length or buf[end] != 1:
            return None
        at = end + 1
    if header.compressed_page_size < at - start + rows * _FIXED[md.type].itemsize:   # (fastparquet pads)
        return None
    return at


def point_plan(pf, group: int, columns, fd: int):
    """[(column, dtype, offset of its first value)] for row group ``group`` of
    ``pf`` if every one of ``columns`` can be read by offset, else None."""
    rg = pf.row_groups[group]
    chunks = {".".join(c.meta_data.path_in_schema): c.meta_data for c in rg.columns}
    plan = []
    for name in columns:
        md = chunks.get(name)
        if md is None or np.dtype(pf.dtypes[name]) != _FIXED.get(md.type):
            return None
        buf = os.pread(fd, _HEAD, md.data_page_offset)
        at = _values_start(buf, md, int(rg.num_rows), pf.schema.max_definition_level([name]))
        if at is None:
            return None
        plan.append((name, _FIXED[md.type], md.data_page_offset + at))
    return plan


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def layout(data: bytes, dtypes, skip=()) -> dict | None:
    """Where the values of every column but ``skip`` start, per row group, in
    the Parquet file ``data`` (just written, from a frame with ``dtypes``):
    ``{"rows": [rows per row group], "columns": [[name, dtype], ...],
    "at": [[offset per column] or None per row group]}``, kept with the
    source so that its rows can later be read by offset without opening the
    file (:func:`read_rows_at`).  None if no row group qualifies (or the file
    is not a flat table of plain numpy columns)."""
    from fastparquet import encoding
    from fastparquet.cencoding import ThriftObject
    view = memoryview(data)
    try:
        size = int.from_bytes(data[-8:-4], "little")
        meta = ThriftObject.from_buffer(encoding.NumpyIO(view[-8 - size:-8]), "FileMetaData")
    except Exception:
        return None
    elements = {_text(e.name): e for e in meta.schema[1:]}
    if len(elements) != len(meta.schema) - 1 or any(e.num_children for e in meta.schema[1:]):
        return None
    names = [name for name in dtypes.index if name not in skip]
    for name in names:
        e = elements.get(name)
        dtype = dtypes[name]
        if (e is None or not isinstance(dtype, np.dtype) or e.type not in _FIXED or _FIXED[e.type] != dtype
                or e.converted_type is not None or e.logicalType is not None or e.repetition_type not in (0, 1)):
            return None
    rows, at = [], []
    for rg in meta.row_groups:
        chunks = {".".join(_text(x) for x in c.meta_data.path_in_schema): c.meta_data for c in rg.columns}
        offsets = []
        for name in names:
            md = chunks.get(name)
            start = None if md is None else _values_start(
                view[md.data_page_offset:md.data_page_offset + _HEAD], md, int(rg.num_rows),
                elements[name].repetition_type)
            if start is None:
                offsets = None
                break
            offsets.append(int(md.data_page_offset + start))
        rows.append(int(rg.num_rows))
        at.append(offsets)
    if not any(a is not None for a in at):
        return None
    return {"rows": rows, "columns": [[name, dtypes[name].str] for name in names], "at": at}


def layout_plan(found: dict, group: int):
    """The :func:`point_plan` of row group ``group`` from a :func:`layout`
    (None if that row group cannot be read by offset)."""
    at = found["at"][group]
    if at is None:
        return None
    return [(name, np.dtype(dtype), offset) for (name, dtype), offset in zip(found["columns"], at)]


def read_points(fd: int, plan, rows: np.ndarray) -> dict:
    """{column: values at the given rows of the row group} per :func:`point_plan`."""
    out = {}
    for name, dtype, at in plan:
        width = dtype.itemsize
        values = b"".join(os.pread(fd, width, at + int(r) * width) for r in rows)
        out[name] = np.frombuffer(values, dtype=dtype).astype(dtype.newbyteorder("="), copy=True)
    return out
