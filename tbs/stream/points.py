"""A few rows of a Parquet file without decoding whole row groups.

Rows re-entering the sample are copied from the source files, a handful per
batch, each from a different row group; decoding a row group of 65,536 rows
to take one costs about a millisecond and a half, and merely opening the file
with fastparquet (parsing its footer) about half of one.  The files the jobs
write (fastparquet, no compression, PLAIN encoding, one data page per column
chunk) keep fixed-width values at a computable offset: after the page header
and, for an OPTIONAL column, its definition levels -- which, for a chunk
without nulls, are a single run-length-encoded run of ones.  :func:`layout`
checks exactly that for every column chunk of a file, reading only its footer
and page headers, and returns where each column's values start in each row
group; the task keeps it with the source (in the structure file), so it is
found once per source, not once per read.  :func:`read_points` then reads
each wanted value with one ``pread``.  Anything else (compression,
dictionaries, nulls, strings, booleans, logical types, several pages, no
pandas metadata) leaves a row group without offsets and the caller decodes it.
"""
import json
import os

import numpy as np

#: Parquet physical type -> numpy dtype of the values (little-endian on disk)
_FIXED = {1: np.dtype("<i4"), 2: np.dtype("<i8"), 4: np.dtype("<f4"), 5: np.dtype("<f8")}
_UNCOMPRESSED, _PLAIN, _RLE, _DATA_PAGE = 0, 0, 3, 0
_HEAD = 512                       # bytes read to parse a page header and a definition-level run


def _varint(buf, at):
    value = shift = 0
    while at < len(buf):
        byte = buf[at]
        value |= (byte & 0x7F) << shift
        at += 1
        if not byte & 0x80:
            return value, at
        shift += 7
    return None, at


def _values_start(buf, md, rows, max_def):
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
    if (header.type != _DATA_PAGE or page is None or page.num_values != rows
            or page.encoding != _PLAIN):
        return None
    at = stream.tell()
    start = at
    if max_def:
        if page.definition_level_encoding != _RLE or at + 4 > len(buf):
            return None
        length = int.from_bytes(buf[at:at + 4], "little")
        run, end = _varint(buf, at + 4)
        # one RLE run (even header) of `rows` values, each the level 1 in one byte
        if (run is None or run & 1 or run >> 1 != rows or end + 1 != at + 4 + length
                or buf[end] != 1):
            return None
        at = end + 1
    # (fastparquet pads)
    if header.compressed_page_size < at - start + rows * _FIXED[md.type].itemsize:
        return None
    return at


def _text(value):
    return value.decode() if isinstance(value, (bytes, bytearray)) else str(value)


def layout(fd, skip=()):
    """Where the values of every column but ``skip`` start, per row group, in
    the Parquet file open as ``fd``: ``{"rows": [rows per row group],
    "columns": [[name, dtype], ...], "at": [[offset per column] or None per
    row group]}`` -- JSON, kept with the source.  None if no row group can be
    read by offset (or the file is not a flat table of numpy columns whose
    pandas metadata names the dtypes a reader would give)."""
    from fastparquet import encoding
    from fastparquet.cencoding import ThriftObject
    try:
        size = os.fstat(fd).st_size
        tail = os.pread(fd, 8, size - 8)
        if len(tail) != 8 or tail[4:] != b"PAR1":
            return None
        length = int.from_bytes(tail[:4], "little")
        meta = ThriftObject.from_buffer(encoding.NumpyIO(os.pread(fd, length, size - 8 - length)),
                                        "FileMetaData")
        extra = {_text(kv.key): kv.value for kv in (meta.key_value_metadata or [])}
        numpy_types = {c["name"]: c.get("numpy_type")
                       for c in json.loads(extra["pandas"])["columns"]}
    except Exception:
        return None
    schema = meta.schema[1:]
    if any(e.num_children for e in schema):
        return None
    names, max_def, dtypes = [], {}, {}
    for e in schema:
        name = _text(e.name)
        if name in skip:
            continue
        dtype = _FIXED.get(e.type)
        if (dtype is None or numpy_types.get(name) != dtype.name or e.converted_type is not None
                or e.logicalType is not None or e.repetition_type not in (0, 1)):
            return None
        names.append(name)
        max_def[name], dtypes[name] = e.repetition_type, dtype      # (flat: OPTIONAL = level 1)
    rows, at = [], []
    for rg in meta.row_groups:
        chunks = {".".join(_text(x) for x in c.meta_data.path_in_schema): c.meta_data
                  for c in rg.columns}
        offsets = []
        for name in names:
            md = chunks.get(name)
            start = (None if md is None
                     else _values_start(os.pread(fd, _HEAD, md.data_page_offset), md,
                                        int(rg.num_rows), max_def[name]))
            if start is None:
                offsets = None
                break
            offsets.append(int(md.data_page_offset + start))
        rows.append(int(rg.num_rows))
        at.append(offsets)
    if not any(a is not None for a in at):
        return None
    return {"rows": rows, "columns": [[name, dtypes[name].str] for name in names], "at": at}


def layout_plan(found, group):
    """``[(column, dtype, offset of its first value)]`` of row group ``group``
    from a :func:`layout`, for :func:`read_points` (None if that row group
    cannot be read by offset)."""
    at = found["at"][group]
    if at is None:
        return None
    return [(name, np.dtype(dtype), offset) for (name, dtype), offset in zip(found["columns"], at)]


def read_points(fd, plan, rows):
    """{column: values at the given rows of the row group} per :func:`layout_plan`."""
    out = {}
    for name, dtype, at in plan:
        width = dtype.itemsize
        values = b"".join(os.pread(fd, width, at + int(r) * width) for r in rows)
        out[name] = np.frombuffer(values, dtype=dtype).astype(dtype.newbyteorder("="), copy=True)
    return out
