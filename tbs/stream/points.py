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
one ``pread``.  Anything else (compression, dictionaries, nulls, strings,
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


def _values_offset(fd: int, md, rows: int, max_def: int):
    """File offset of the first value of a column chunk laid out as described
    in the module docstring, else None."""
    from fastparquet import encoding
    from fastparquet.cencoding import ThriftObject
    if (md.codec != _UNCOMPRESSED or md.dictionary_page_offset is not None or md.type not in _FIXED
            or md.num_values != rows or max_def > 1):
        return None
    buf = os.pread(fd, _HEAD, md.data_page_offset)
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
    return md.data_page_offset + at


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
        at = _values_offset(fd, md, int(rg.num_rows), pf.schema.max_definition_level([name]))
        if at is None:
            return None
        plan.append((name, _FIXED[md.type], at))
    return plan


def read_points(fd: int, plan, rows: np.ndarray) -> dict:
    """{column: values at the given rows of the row group} per :func:`point_plan`."""
    out = {}
    for name, dtype, at in plan:
        width = dtype.itemsize
        values = b"".join(os.pread(fd, width, at + int(r) * width) for r in rows)
        out[name] = np.frombuffer(values, dtype=dtype).astype(dtype.newbyteorder("="), copy=True)
    return out
