"""Users' rows in and out of the block store: .npy, .csv, Parquet.

``import`` reads a .npy, .csv or Parquet file, or a Parquet dataset
directory (as Spark and Hive write them), wherever the filesystem layer
reaches it (:mod:`jobs.fs`: local paths, ``hdfs://``, other fsspec URLs),
and assigns row ids in file order (row i of the file gets id i; a dataset's
files in the order of their paths).  ``export`` writes any matrix or sample
back as rows, with a ``row_id`` column (CSV, Parquet) or a
``<name>.row_ids.npy`` file next to a ``.npy`` export.  Values travel as
float64 bit patterns, so NaN and +-inf survive both ways; a CSV export writes
each value as the shortest text that reads back as the same float64
(``91.22``, not ``91.219999999999999``).
"""
import collections
import contextlib
import io
import itertools
import os
import re
import tempfile
from urllib.parse import unquote, urlsplit

import numpy as np

from samplegen.udfs.errors import InputError, OutputError, ParameterError

from . import fs as fsmod
from .store import MANIFEST, META

CHUNK_ROWS = 65536
#: rows per row group of a Parquet export
PARQUET_GROUP_ROWS = 1 << 20
#: at most this many bytes of a .npy file's values are converted at a time
NPY_CHUNK_BYTES = 64 << 20
FORMATS = (".npy", ".csv", ".parquet")
#: the name endings of a Parquet dataset's part files (others are recognized by
#: their first bytes)
PARQUET_SUFFIXES = (".parquet", ".parq")
PARQUET_MAGIC = b"PAR1"
#: the partition directory value of a null (Hive, Spark)
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def file_format(path, reading=True):
    """The format of file *path* by its name ending (one of FORMATS); else
    ParameterError, naming what is allowed (for *reading*, also a directory
    of Parquet files; an export writes one file)."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        allowed = (f"use one of {', '.join(FORMATS)}, or a directory of Parquet files" if reading
                   else f"export writes one file, named with one of {', '.join(FORMATS)}")
        raise ParameterError(f"unsupported file type {ext or '(none)'!r} for {path}: {allowed}")
    return ext


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
#: an opened source: column names (None for a .npy file or a CSV file
#: without a header), the number of columns imported, an iterator of float64
#: row chunks, and the ``(name, type)`` of each non-numeric column left out
#: because nobody asked for it
Rows = collections.namedtuple("Rows", "names n_cols chunks left_out")


def open_source(uri, columns=None, exclude=None, label=None):
    """Open the rows to import: a .npy, .csv or Parquet file, or a directory
    of Parquet files (whatever its name), on any filesystem of :mod:`jobs.fs`.

    Columns (CSV with a header, Parquet): *columns* names those to import, in
    that order; *exclude* those to leave out (the other numeric ones are
    imported); without either, every numeric column.  A *label* column must
    be numeric and is imported as a regular column (appended to *columns* if
    they do not name it).  Numeric means integers, floats, decimals and
    booleans; other columns are reported in ``Rows.left_out``.

    Everything is read where it lives, in one pass: CSV and .npy files are
    streamed through the filesystem layer, Parquet is read row group by row
    group through fsspec (every file's footer first, so that a bad column or
    file is refused before anything is written).  The one exception is a
    Fortran-ordered .npy file on a remote filesystem, whose rows are not
    contiguous: it is copied to a local temporary file first.

    ParameterError for an unsupported file type or a bad column choice;
    InputError for a missing, empty, ragged or non-numeric file, an array
    that is not 2-D, or a directory without Parquet files.
    """
    pick = Selection(columns, exclude, label)
    fs = fsmod.get_fs(uri)
    if fs.isdir(uri):
        return _open_parquet(uri, pick, dataset=True)
    fmt = file_format(uri)
    if not fs.exists(uri):
        raise InputError(f"input file not found: {uri}")
    if fs.size(uri) == 0:
        raise InputError(f"input file is empty: {uri}")
    if fmt == ".parquet":
        return _open_parquet(uri, pick, dataset=False)
    if fmt == ".npy":
        if pick.option:
            raise ParameterError(f"{pick.option} applies to CSV and Parquet files only")
        return _open_npy(uri, fs)
    return _open_csv(uri, fs, pick)


def _listing(names, limit=20):
    shown = ", ".join(map(str, names[:limit]))
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def _name_list(option, names):
    if names is None:
        return None
    names = list(names)
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ParameterError(f"{option}: column names must be non-empty, got {names!r}")
        if name in names[:i]:
            raise ParameterError(f"{option} names column {name!r} twice")
    return names


class Selection:
    """The columns asked for (``--columns``, ``--exclude``, ``--label``);
    :meth:`pick` applies them to the columns a source has."""

    def __init__(self, columns=None, exclude=None, label=None):
        if columns is not None and exclude is not None:
            raise ParameterError("--columns and --exclude cannot be used together: name the "
                                 "columns to import, or the ones to leave out")
        self.columns = _name_list("--columns", columns)
        self.exclude = _name_list("--exclude", exclude)
        if label is not None and (not isinstance(label, str) or not label):
            raise ParameterError(f"--label must name a column, got {label!r}")
        self.label = label
        if label is not None and label in (self.exclude or ()):
            raise ParameterError(f"--label {label!r} is also left out by --exclude")

    @property
    def option(self):
        """The first option given that names columns (None without any)."""
        for option, value in (("--columns", self.columns), ("--exclude", self.exclude),
                              ("--label", self.label)):
            if value is not None:
                return option
        return None

    def pick(self, where, available):
        """``(indices of the columns to import, [(name, type)] left out)``
        from *available*, the ``(name, type)`` of each column of *where* in
        order, type None for a numeric column."""
        positions, kinds = {}, {}
        for i, (name, kind) in enumerate(available):
            positions.setdefault(name, i)
            kinds.setdefault(name, kind)

        def numeric(option, name):
            if name not in kinds:
                raise ParameterError(f"{option}: no column {name!r} in {where} "
                                     f"(columns: {_listing([n for n, _ in available])})")
            if kinds[name] is not None:
                raise ParameterError(f"{option}: column {name!r} of {where} is {kinds[name]}, "
                                     "not numeric (only numbers and booleans can be imported)")

        if self.label is not None:
            numeric("--label", self.label)
        if self.columns is not None:
            for name in self.columns:
                numeric("--columns", name)
            chosen = list(self.columns)
            if self.label is not None and self.label not in chosen:
                chosen.append(self.label)
            return [positions[name] for name in chosen], []
        for name in self.exclude or ():
            if name not in kinds:
                raise ParameterError(f"--exclude: no column {name!r} in {where} "
                                     f"(columns: {_listing([n for n, _ in available])})")
        skip = set(self.exclude or ())
        chosen = [i for i, (name, kind) in enumerate(available)
                  if kind is None and name not in skip]
        left_out = [(name, kind) for name, kind in available
                    if kind is not None and name not in skip]
        if not chosen:
            if skip:
                raise ParameterError(f"--exclude leaves no numeric column of {where} to import")
            raise InputError(f"{where}: no numeric column to import (it has "
                             f"{_listing([f'{n} ({k})' for n, k in left_out])})")
        return chosen, left_out


def _skip(f, n):
    """Move the new stream *f* *n* bytes on (a seek where it can)."""
    if f.seekable():
        f.seek(n)
        return
    while n > 0:
        data = f.read(min(n, 1 << 20))
        if not data:
            break
        n -= len(data)


def _read_exactly(f, n):
    pieces, left = [], n
    while left > 0:
        data = f.read(left)
        if not data:
            break
        pieces.append(data)
        left -= len(data)
    return b"".join(pieces)


NPY_MAGIC = b"\x93NUMPY"


class _Counted:
    """A stream that counts the bytes read from it (where a header ends)."""

    def __init__(self, f):
        self.f, self.n = f, 0

    def read(self, size=-1):
        data = self.f.read(size)
        self.n += len(data)
        return data


def _open_npy(uri, fs):
    """A 2-D numeric array.  Local files are memory-mapped; elsewhere the
    rows stream from the layer's reader, except for a Fortran-ordered
    array, which is read from a local copy (see :func:`open_source`).  The
    file must not change while it is read (:class:`_Source`)."""
    source = _Source(*fsmod.fsspec_of(uri), uri, ".npy")
    with fs.open_read(uri) as f:
        counted = _Counted(f)
        if counted.read(len(NPY_MAGIC)) != NPY_MAGIC:
            raise InputError(f"{uri} is not a .npy file (no NumPy header)")
        version = tuple(counted.read(2))
        if version not in ((1, 0), (2, 0), (3, 0)):
            raise InputError(f"cannot read {uri} as .npy: unknown format version {version}")
        try:
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(counted)
        except Exception as exc:  # numpy raises several types for bad headers
            raise source.failure(exc, "its header") from None
        offset = counted.n
    if len(shape) != 2:
        raise InputError(f"{uri}: array is not 2-D (shape {shape})")
    if dtype.kind not in "biuf":
        raise InputError(f"{uri}: array is not numeric (dtype {dtype})")
    if shape[0] == 0 or shape[1] == 0:
        raise InputError(f"{uri}: array is empty (shape {shape})")
    rows, cols = shape
    row_bytes = cols * dtype.itemsize
    step = max(1, min(CHUNK_ROWS, NPY_CHUNK_BYTES // row_bytes))
    if offset + rows * row_bytes > fs.size(uri):
        raise InputError(f"{uri}: truncated .npy file (its header promises {rows} x {cols} "
                         f"values of {dtype})")

    def mapped(path):
        try:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
        except Exception as exc:  # numpy raises several types for bad files
            raise source.failure(exc, "its header") from None
        if array.shape != shape or array.dtype != dtype:
            raise source.failure(ValueError(), "its header")
        for a in range(0, rows, step):
            yield np.asarray(array[a:a + step], dtype=np.float64)

    def streamed():
        with fs.open_read(uri) as f:
            _skip(f, offset)
            for a in range(0, rows, step):
                n = min(step, rows - a)
                data = _read_exactly(f, n * row_bytes)
                if len(data) < n * row_bytes:
                    raise InputError(f"{uri}: truncated .npy file (row {a + len(data) // row_bytes}"
                                     f" of {rows} is cut short)")
                yield np.frombuffer(data, dtype).reshape(n, cols).astype(np.float64)

    def copied():
        with fsmod.local_copy(uri) as path:
            yield from mapped(path)

    if fsmod.is_local(uri):
        chunks = mapped(fsmod.local_path(uri))
    else:
        chunks = copied() if fortran else streamed()
    return Rows(None, cols, _checked(source, chunks), [])


def _checked(source, chunks):
    """The row chunks *chunks* of *source*, the file checked unchanged
    after the last one and when a read fails (the OSError of a filesystem
    becomes one InputError naming the file)."""
    try:
        yield from chunks
    except OSError as exc:
        raise source.failure(exc, "it") from None
    except InputError:
        source.check()
        raise
    source.check()


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


class _Lines:
    """Lines of a stream with the offset after each (no seek or tell needed)."""

    def __init__(self, f):
        self.f, self.buffer, self.offset = f, b"", 0

    def readline(self):
        pieces, found = [self.buffer], b"\n" in self.buffer
        while not found:
            data = self.f.read(1 << 16)
            if not data:
                break
            pieces.append(data)
            found = b"\n" in data
        buffer = b"".join(pieces)
        cut = buffer.find(b"\n") + 1 or len(buffer)
        line, self.buffer = buffer[:cut], buffer[cut:]
        self.offset += len(line)
        return line


#: the first line of a CSV file, as :func:`csv_head` reads it: the column
#: names (None without a header line), the delimiter, the number of fields,
#: and where the data rows start (a byte offset, and the line's number)
CsvHead = collections.namedtuple("CsvHead", "header delimiter n_fields offset first_line")


def csv_head(uri, fs):
    """The :class:`CsvHead` of CSV file *uri* (on *fs*, a :mod:`jobs.fs`
    filesystem): blank lines and a UTF-8 byte order mark before the first
    line are skipped; fields are separated by tabs if the first line has
    tabs and no comma, else by commas; the first line is a header iff it
    has a non-empty field and none of its fields is a number, and a header
    must be UTF-8 names without control characters, each once (InputError
    naming the file otherwise, and for a file with no line)."""
    with fs.open_read(uri) as f:
        lines = _Lines(f)
        first = lines.readline()
        if first.startswith(BOM):
            first = first[len(BOM):]
        first_offset, first_no = lines.offset - len(first), 1
        while first and not first.strip(b" \t\r\n"):
            first_offset, first_no = lines.offset, first_no + 1
            first = lines.readline()
        body_start = lines.offset
    if not first:
        raise InputError(f"input file is empty: {uri}")
    text = first.decode("utf-8", "replace").rstrip("\r\n")
    delimiter = "\t" if "\t" in text and "," not in text else ","
    fields = [_csv_field(x) for x in text.split(delimiter)]
    has_header = any(fields) and not any(_is_number(x) for x in fields if x)
    header = fields if has_header else None
    if header is not None:
        _check_header(uri, first, first_no, header)
    for name in header or ():
        if header.count(name) > 1:
            at = _positions([j for j, n in enumerate(header) if n == name])
            raise InputError(f"{uri}: its header names column {name!r} more than once (columns "
                             f"{at}); every column needs a name of its own")
    n_fields = len(fields)
    if has_header:
        return CsvHead(header, delimiter, n_fields, body_start, first_no + 1)
    return CsvHead(None, delimiter, n_fields, first_offset, first_no)


def _open_csv(uri, fs, pick):
    """CSV of numbers: an optional header line, ``,`` or tab separated; fields
    are empty (NaN) or numbers, ``nan`` and ``inf`` included (see _NUMBER).
    The first line is a header iff it has a non-empty field and none of its
    fields is a number; it must not name a column twice.  Rows with a
    different number of fields are an error, and so is a file that changes
    while it is read (:class:`_Source`)."""
    source = _Source(*fsmod.fsspec_of(uri), uri, "CSV")
    head = csv_head(uri, fs)
    header, delimiter, n_fields = head.header, head.delimiter, head.n_fields
    usecols, names = None, header
    if pick.option:
        if header is None:
            raise ParameterError(f"{pick.option} needs a CSV file with a header line")
        usecols, _ = pick.pick(uri, [(name, None) for name in header])
        names = [header[i] for i in usecols]
        if usecols == list(range(n_fields)):
            usecols = None
    offset, first_line = head.offset, head.first_line

    def chunks():
        import pandas as pd
        line_no, produced, carry = first_line, False, b""
        with fs.open_read(uri) as f:
            _skip(f, offset)
            while True:
                data = f.read(CSV_CHUNK_BYTES)
                buf = carry + data
                if not data:
                    chunk, carry = buf, b""
                else:
                    cut = buf.rfind(b"\n") + 1
                    chunk, carry = buf[:cut], buf[cut:]
                if chunk.strip():
                    array = _parse_csv_chunk(pd, uri, chunk, delimiter, n_fields, line_no,
                                             usecols)
                    produced = produced or array.shape[0] > 0
                    yield array
                line_no += chunk.count(b"\n")
                if not data:
                    break
        if not produced:
            raise InputError(f"{uri}: no data rows")
    return Rows(names, len(usecols) if usecols is not None else n_fields,
                _checked(source, chunks()), [])


def _check_header(uri, line, line_no, names):
    """InputError unless the header *line* (bytes; line *line_no* of CSV
    file *uri*, its column *names* read from it) is UTF-8 text whose names
    hold no control characters: a header is names, not binary bytes."""
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{uri}: its header (line {line_no}) is not UTF-8 text (byte "
                         f"{line[exc.start]:#04x} at offset {exc.start} of the line); save the "
                         "file as UTF-8") from None
    for j, name in enumerate(names):
        if any(ord(c) < 32 or ord(c) == 127 for c in name):
            raise InputError(f"{uri}: its header (line {line_no}) names column {j + 1} "
                             f"{_shown(name)}, with a control character; a header holds names")


#: characters of a field or name that a message shows (the rest is counted)
SHOWN_CHARS = 40


def _shown(text):
    """*text* as a message shows it: its repr, cut after SHOWN_CHARS
    characters (a field can be megabytes long)."""
    if len(text) <= SHOWN_CHARS:
        return repr(text)
    return f"{text[:SHOWN_CHARS]!r}... ({len(text)} characters)"


def _parse_csv_chunk(pd, path, chunk, delimiter, n_fields, first_line, usecols=None):
    """Rows of whole lines *chunk* (its first line is line *first_line* of
    the file); blank lines (blanks only) are skipped.  *usecols*: the
    fields to read, in this order (None: all); the others are counted,
    never parsed, so they may hold text."""
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
        raise _ragged(path, first_line + i, int(fields[i]), n_fields)
    if _fast_path_safe(chunk, raw, delimiter, space if has_blanks else None):
        try:
            frame = pd.read_csv(io.BytesIO(chunk), header=None, sep=delimiter, dtype=np.float64,
                                keep_default_na=False, na_values=_NA_VALUES,
                                skipinitialspace=True, skip_blank_lines=True, engine="c")
        except (ValueError, pd.errors.ParserError):
            pass
        else:
            if frame.shape == (int((~blank).sum()), n_fields):
                values = frame.to_numpy(dtype=np.float64)
                return values if usecols is None else values[:, usecols]
    return _parse_csv_slow(path, chunk, delimiter, n_fields, first_line, usecols)


def _ragged(path, line, found, expected):
    """The InputError for line *line* of CSV file *path* with *found* fields
    instead of *expected*."""
    return InputError(f"{path}: ragged CSV: line {line} has {found} "
                      f"field{'s' if found != 1 else ''}, expected {expected}")


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


def _parse_csv_slow(path, chunk, delimiter, n_fields, first_line, usecols=None):
    """The CSV rule field by field: the rows of *chunk* (the fields at
    *usecols*, None: all), or an InputError at the first such field that is
    neither empty nor a number."""
    wanted = None if usecols is None else set(usecols)
    rows = []
    for i, line in enumerate(chunk.decode("utf-8", "replace").split("\n")):
        if delimiter not in line and not line.strip(_SPACE):
            continue  # blank line
        raws = line.split(delimiter)
        if len(raws) != n_fields:  # _parse_csv_chunk checked this; kept for direct use
            raise _ragged(path, first_line + i, len(raws), n_fields)
        row = {}
        for j, raw in enumerate(raws):
            if wanted is not None and j not in wanted:
                continue
            field = _csv_field(raw)
            if field and not _is_number(field):
                raise InputError(f"{path}: non-numeric value {_shown(raw.strip(_SPACE))} at line "
                                 f"{first_line + i}, column {j + 1} (import reads numbers: "
                                 "choose columns with --columns or --exclude; the sampling "
                                 "commands take the file itself, every column kept)")
            row[j] = float(field) if field else np.nan
        rows.append([row[j] for j in (range(n_fields) if usecols is None else usecols)])
    width = n_fields if usecols is None else len(usecols)
    array = np.array(rows, dtype=np.float64).reshape(len(rows), width)
    array[np.isnan(array)] = np.nan  # one NaN, as pandas gives (float("-nan") has a sign)
    return array


def _stamp(fs, path):
    """What identifies the contents of file *path* of the fsspec filesystem
    *fs* (size, modification time, inode or object version, as far as the
    filesystem tells): a file replaced or rewritten while it is read has
    another stamp."""
    try:
        info = fs.info(path)
    except OSError:
        return None
    return tuple((key, str(info[key])) for key in _STAMP_KEYS if info.get(key) is not None)


_STAMP_KEYS = ("size", "length", "mtime", "modificationTime", "ino", "LastModified",
               "last_modified", "ETag", "etag", "generation", "version_id")


class _Source:
    """One file being read (*path* of the fsspec filesystem *fs*, *name* as
    messages name it, *kind* its format in a word), and the reader boundary
    around it: the stamp
    it had before the first read, checked after the last one
    (:meth:`check`) and when a read fails (:meth:`failure`), so that a file
    replaced or rewritten meanwhile is one error naming it, never rows of
    two different files."""

    def __init__(self, fs, path, name, kind):
        self.fs, self.path, self.name, self.kind = fs, path, name, kind
        self.stamp = _stamp(fs, path)

    def changed(self):
        return _stamp(self.fs, self.path) != self.stamp

    def check(self):
        """InputError if the file changed since it was opened."""
        if self.changed():
            raise self._changed()

    def _changed(self):
        return InputError(f"{self.name} changed while it was read (it was replaced or "
                          "rewritten): import it again once it is complete")

    def failure(self, exc, what):
        """The InputError for *exc*, raised by a reader of this file while
        reading *what* (a part of it, in words)."""
        if self.changed():
            return self._changed()
        if isinstance(exc, FileNotFoundError):
            return InputError(f"cannot read {self.name}: it no longer exists")
        if isinstance(exc, PermissionError):
            return InputError(f"cannot read {self.name}: permission denied")
        if isinstance(exc, OSError) and exc.strerror:
            return InputError(f"cannot read {self.name}: {exc.strerror}")
        reason = exc if isinstance(exc, DamagedPage) else "it does not decode"
        return InputError(f"cannot read {self.name} as {self.kind}: {what} is damaged "
                          f"({reason})")


@contextlib.contextmanager
def _quiet():
    """fastparquet's decoder prints its complaints about damaged bytes on
    standard output; they are no output of samplegen's (the damage is one
    InputError)."""
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def _open_parquet(uri, pick, dataset):
    """A Parquet file, or a *dataset* directory of them: Spark's and Hive's
    output (``part-*`` files, ``_SUCCESS``), with Hive-style partition
    directories ``key=value/`` whose keys become columns after the files'
    own (numeric if every value is a number; a null partition is NaN).  The
    columns are those of the first file; every file's footer is read before
    any row, and each file must have the columns chosen, as numbers.  Rows
    then come row group by row group, through fsspec.  Whatever the Parquet
    reader raises on a damaged file, or on one changed while it is read, is
    one InputError naming the file (:class:`_Source`)."""
    import fastparquet
    fs, root = fsmod.fsspec_of(uri)
    files = _dataset_files(uri, fs, root) if dataset else [(root, "", ())]

    def where(rel):
        return fsmod.join(uri, rel) if rel else uri

    sources, footers = [], []
    for path, rel, _ in files:
        source = _Source(fs, path, where(rel), "Parquet")
        try:
            with _quiet():
                pf = fastparquet.ParquetFile(path, fs=fs, verify=True)
            _check_pages_on_read(pf, fs)
        except Exception as exc:  # fastparquet and the filesystems raise many types
            raise _footer_failure(source, exc) from None
        footers.append(pf)
        sources.append(source)
    first = footers[0]
    available = [(name, _column_type(first, name, dtype)) for name, dtype in first.dtypes.items()]
    partitions = {}   # key -> its value per file (a float)
    for key, (numeric, values) in partition_columns(uri, files).items():
        if key in first.dtypes:
            raise InputError(f"{uri}: partition key {key!r} is also a column of "
                             f"{where(files[0][1])}")
        if numeric:
            partitions[key] = values
            available.append((key, None))
        else:
            available.append((key, "string"))
    chosen, left_out = pick.pick(uri, available)
    names = [available[i][0] for i in chosen]
    data_cols = [name for name in names if name not in partitions]
    rows, halves = 0, []
    for (_, rel, _), pf in zip(files, footers):
        dtypes = pf.dtypes
        for name in data_cols:
            if name not in dtypes:
                raise InputError(f"{where(rel)}: no column {name!r} (the dataset's first file "
                                 f"{files[0][1]} has it)")
            kind = _column_type(pf, name, dtypes[name])
            if kind is not None:
                raise InputError(f"{where(rel)}: column {name!r} is {kind}, not numeric")
        halves.append([j for j, name in enumerate(data_cols) if _is_half(pf, name)])
        rows += pf.count()
    if rows == 0:
        raise InputError(f"{uri}: no rows")
    data_at = [j for j, name in enumerate(names) if name not in partitions]

    def row_groups(source, pf, half):
        """``(rows, values of data_cols)`` of each row group of *pf*, the
        columns at *half* decoded from half floats; the file is checked
        unchanged after its last row group."""
        if not data_cols:
            for group in pf.row_groups:
                yield group.num_rows, None
            source.check()
            return
        groups = pf.iter_row_groups(columns=data_cols)
        for g in itertools.count():
            try:
                with _quiet():
                    frame = next(groups, None)
                    if frame is None:
                        break
                    values = _frame_values(frame, data_cols, half)
            except Exception as exc:  # fastparquet, pandas and the filesystems: many types
                raise source.failure(exc, f"row group {g}") from None
            yield len(frame), values
        source.check()

    def chunks():
        for k, (source, pf) in enumerate(zip(sources, footers)):
            constants = [(j, partitions[name][k]) for j, name in enumerate(names)
                         if name in partitions]
            for n, values in row_groups(source, pf, halves[k]):
                if not constants:
                    yield values
                    continue
                out = np.empty((n, len(names)))
                if data_at:
                    out[:, data_at] = values
                for j, value in constants:
                    out[:, j] = value
                yield out
    return Rows(names, len(names), chunks(), left_out)


def partition_columns(uri, files):
    """``{key: (numeric, values)}`` of the partition keys of the dataset
    *files* (as :func:`_dataset_files` lists them), in order: each key's
    value per file, floats (a null partition NaN) when every value is a
    number, else the texts.  InputError for a key repeated in a path, or
    files whose partition keys differ."""
    keys = [key for key, _ in files[0][2]]
    if len(set(keys)) < len(keys):
        raise InputError(f"{uri}: partition key repeated in {files[0][1]}")
    for _, rel, parts in files:
        if [k for k, _ in parts] != keys:
            raise InputError(f"{uri}: its partition directories disagree: {files[0][1]} and "
                             f"{rel} have different keys")
    columns = {}
    for j, key in enumerate(keys):
        texts = [parts[j][1] for _, _, parts in files]
        numbers = [t for t in texts if t != NULL_PARTITION]
        if numbers and all(_is_number(t) for t in numbers):
            columns[key] = (True, [np.nan if t == NULL_PARTITION else float(t) for t in texts])
        else:
            columns[key] = (False, texts)
    return columns


def _frame_values(frame, columns, half):
    """The float64 values of *columns* of the pandas DataFrame *frame* (a
    row group as fastparquet reads it); the columns at positions *half*
    hold half floats as fastparquet gives them: two bytes each, little
    endian, trailing zero bytes cut off (None: null)."""
    if not half:
        return frame[columns].to_numpy(dtype=np.float64, na_value=np.nan)
    values = np.empty((len(frame), len(columns)))
    rest = [j for j in range(len(columns)) if j not in half]
    if rest:
        values[:, rest] = frame[[columns[j] for j in rest]].to_numpy(dtype=np.float64,
                                                                     na_value=np.nan)
    for j in half:
        column = frame[columns[j]]
        present = column.notna().to_numpy()
        data = column.to_numpy()[present]
        if any(len(v) > 2 for v in data):
            raise DamagedPage("a half float is longer than two bytes")
        values[:, j] = np.nan
        values[present, j] = np.array(data, dtype="S2").view("<f2")   # zero bytes back
    return values


def _footer_failure(source, exc):
    """The InputError for *exc*, raised by fastparquet reading the footer of
    *source*: a reason in words, found in the file's own bytes (a missing
    magic number, a footer cut short, a repeated column name ...)."""
    reason = _footer_problem(source.fs, source.path)
    if reason is not None and not source.changed():
        return InputError(f"cannot read {source.name} as Parquet: {reason}")
    return source.failure(exc, "its footer")


def _check_pages_on_read(pf, fs):
    """Make the fastparquet file *pf* (of the fsspec filesystem *fs*) check
    each column chunk as it reads it, before decoding it: fastparquet's
    decoder reads damaged bytes without bounds checks (a damaged page
    header can crash the process), so every page header is first decoded
    here, bounds checked (:func:`_check_chunk`), and a page's CRC, where
    the writer stored one, is verified."""
    chunks = {}
    for group in pf.row_groups:
        for column in group.columns or ():
            meta = column.meta_data
            if meta is None:
                continue
            # where fastparquet starts reading the chunk, and how much it reads
            start = min(meta.dictionary_page_offset or meta.data_page_offset,
                        meta.data_page_offset)
            chunks[start] = (meta.total_compressed_size, meta.num_values)

    def open_with(path, mode="rb", **kwargs):
        return _CheckedFile(fs.open(path, mode, **kwargs), chunks)
    pf.open = open_with


class _CheckedFile:
    """A file that fastparquet reads column chunks from: a read of a whole
    chunk (its start -> ``(bytes, values)`` in *chunks*) is checked by
    :func:`_check_chunk` before fastparquet sees it."""

    def __init__(self, f, chunks):
        self.f, self.chunks = f, chunks

    def read(self, size=-1):
        start = self.f.tell()
        data = self.f.read(size)
        expected = self.chunks.get(start)
        if expected is not None and size == expected[0]:
            _check_chunk(data, *expected)
        return data

    def seek(self, *args):
        return self.f.seek(*args)

    def tell(self):
        return self.f.tell()

    def close(self):
        self.f.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getattr__(self, name):
        return getattr(self.f, name)


class DamagedPage(ValueError):
    """A column chunk whose pages do not decode (:func:`_check_chunk`)."""


#: Parquet's page types (PageHeader field 1)
DATA_PAGE, DICTIONARY_PAGE, DATA_PAGE_V2 = 0, 2, 3


def _check_chunk(data, size, num_values):
    """DamagedPage unless the column chunk *data* (*size* bytes, holding
    *num_values* values by its metadata) is a sequence of pages whose
    headers decode within it, whose sizes are not negative and fit the
    chunk, whose data pages hold *num_values* values in all, and whose
    CRCs, where present, match their bytes."""
    import zlib
    if len(data) != size:
        raise DamagedPage("the column chunk is cut short")
    pos, values = 0, 0
    while values < num_values:
        if pos >= size:
            raise DamagedPage("the pages end before the column chunk's values")
        header, pos = _thrift_struct(data, pos, 0)
        compressed, uncompressed = header.get(3), header.get(2)
        kind = header.get(1)
        if not isinstance(compressed, int) or not isinstance(uncompressed, int) \
                or not 0 <= compressed <= size - pos or uncompressed < 0:
            raise DamagedPage("a page header gives impossible sizes")
        crc = header.get(4)
        if isinstance(crc, int) and zlib.crc32(data[pos:pos + compressed]) != crc & 0xFFFFFFFF:
            raise DamagedPage("a page's CRC does not match its bytes")
        if kind in (DATA_PAGE, DATA_PAGE_V2):
            body = header.get(5 if kind == DATA_PAGE else 8)
            count = body.get(1) if isinstance(body, dict) else None
            if not isinstance(count, int) or count < 0:
                raise DamagedPage("a data page header gives no count of values")
            if kind == DATA_PAGE_V2:
                levels = [body.get(5, 0), body.get(6, 0)]
                if not all(isinstance(n, int) and n >= 0 for n in levels) \
                        or sum(levels) > compressed:
                    raise DamagedPage("a data page's levels do not fit it")
            values += count
        elif kind == DICTIONARY_PAGE:
            if not isinstance(header.get(7), dict):
                raise DamagedPage("a dictionary page has no dictionary header")
        elif kind != 1:  # an index page is skipped, any other type is damage
            raise DamagedPage(f"a page has the unknown type {kind!r}")
        pos += compressed


#: how deep a Thrift struct of a page header may nest
THRIFT_DEPTH = 8


def _thrift_struct(data, pos, depth):
    """``({field id: value}, position after it)`` of the Thrift struct in
    compact protocol at *pos* of *data*: integers, booleans and nested
    structs as values (strings, lists, maps and doubles are skipped), every
    read bounds checked (DamagedPage)."""
    if depth > THRIFT_DEPTH:
        raise DamagedPage("a page header nests too deep")
    fields, last = {}, 0
    while True:
        byte, pos = _byte(data, pos)
        if byte == 0:
            return fields, pos
        kind, delta = byte & 0x0F, byte >> 4
        if delta:
            field = last + delta
        else:
            raw, pos = _varint(data, pos)
            field = (raw >> 1) ^ -(raw & 1)
        last = field
        fields[field], pos = _thrift_value(data, pos, kind, depth)


def _thrift_value(data, pos, kind, depth):
    """``(value, position after it)`` of a compact-protocol value of type
    *kind* at *pos* of *data* (None for the kinds that are skipped)."""
    if kind in (1, 2):                      # booleans in a field header
        return kind == 1, pos
    if kind == 3:                           # byte
        return _byte(data, pos)
    if kind in (4, 5, 6):                   # i16, i32, i64: zigzag varints
        raw, pos = _varint(data, pos)
        return (raw >> 1) ^ -(raw & 1), pos
    if kind == 7:                           # double
        return None, _skip_bytes(data, pos, 8)
    if kind == 8:                           # binary
        length, pos = _varint(data, pos)
        return None, _skip_bytes(data, pos, length)
    if kind in (9, 10):                     # list, set
        byte, pos = _byte(data, pos)
        count, element = byte >> 4, byte & 0x0F
        if count == 15:
            count, pos = _varint(data, pos)
        for _ in range(count):
            if element in (1, 2):           # a boolean element is one byte
                _, pos = _byte(data, pos)
            else:
                _, pos = _thrift_value(data, pos, element, depth + 1)
        return None, pos
    if kind == 11:                          # map
        count, pos = _varint(data, pos)
        if count:
            byte, pos = _byte(data, pos)
            for _ in range(count):
                for part in (byte >> 4, byte & 0x0F):
                    if part in (1, 2):
                        _, pos = _byte(data, pos)
                    else:
                        _, pos = _thrift_value(data, pos, part, depth + 1)
        return None, pos
    if kind == 12:                          # struct
        return _thrift_struct(data, pos, depth + 1)
    raise DamagedPage(f"a page header holds the unknown Thrift type {kind}")


def _byte(data, pos):
    if pos >= len(data):
        raise DamagedPage("a page header runs past the column chunk")
    return data[pos], pos + 1


def _skip_bytes(data, pos, n):
    if n < 0 or pos + n > len(data):
        raise DamagedPage("a page header runs past the column chunk")
    return pos + n


def _varint(data, pos):
    value, shift = 0, 0
    while True:
        byte, pos = _byte(data, pos)
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise DamagedPage("a page header holds an overlong number")


def _footer_problem(fs, path):
    """What is wrong with the ends or the footer of Parquet file *path* of
    the fsspec filesystem *fs*, in words (None: nothing this finds)."""
    import struct

    from fastparquet.cencoding import from_buffer
    try:
        size = fs.size(path)
        if size < 12:
            return f"it has {size} byte{'s' if size != 1 else ''}, too few for a Parquet file"
        head = fs.cat_file(path, start=0, end=4)
        tail = fs.cat_file(path, start=size - 8, end=size)
        if head != PARQUET_MAGIC:
            return "it does not begin with PAR1 (it is not a Parquet file)"
        if tail[4:] != PARQUET_MAGIC:
            return "it does not end with PAR1 (the file is truncated or damaged)"
        length = struct.unpack("<I", tail[:4])[0]
        if length + 12 > size:
            return (f"its footer length ({length} bytes) exceeds the file (it is truncated or "
                    "damaged)")
        footer = fs.cat_file(path, start=size - 8 - length, end=size - 8)
    except OSError:
        return None
    try:
        with _quiet():
            schema = from_buffer(footer, "FileMetaData").schema
        elements = [(e.name.decode("utf-8", "replace") if isinstance(e.name, bytes) else e.name,
                     e.num_children or 0) for e in schema]
    except Exception:  # the thrift decoder raises many types on damaged bytes
        return "its footer is damaged (it does not decode)"
    return _repeated_name(elements)


def _positions(indices):
    """Positions *indices* (from 0) in words, counting from 1: ``1 and 3``."""
    words = [str(k + 1) for k in indices]
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def _repeated_name(elements):
    """The first repeated name among the children of one node of a Parquet
    schema, in words; *elements*: ``(name, number of children)`` of each
    schema element, depth first (the root first).  None if there is none."""
    found = []

    def walk(i, parent):
        """The element after the subtree whose root is element *i*."""
        n_children = elements[i][1]
        names, i = [], i + 1
        for _ in range(n_children):
            if i >= len(elements):
                raise IndexError
            names.append(elements[i][0])
            i = walk(i, elements[i][0])
        for name in names:
            if names.count(name) > 1 and not found:
                at = _positions([k for k, n in enumerate(names) if n == name])
                place = (f"columns {at}" if parent is None
                         else f"fields {at} of column {parent!r}")
                found.append(f"the name {name!r} is repeated ({place}); every column needs "
                             "a name of its own")
        return i

    try:
        walk(0, None)
    except (IndexError, RecursionError):
        return "its schema is damaged (its elements do not form a tree)"
    return found[0] if found else None


def _dataset_files(uri, fs, root):
    """``(path, path relative to root, ((key, value), ...))`` of each Parquet
    file below *root* (a directory of the fsspec filesystem *fs*), in the
    order of their relative paths.  Names starting with ``_`` or ``.`` are
    not data (``_SUCCESS``, ``_committed_*``, ``.crc`` files, ``_temporary/``),
    as for Hadoop's and Spark's readers; a subdirectory must be a partition
    ``key=value`` (key and value URL-escaped, as Spark writes them)."""
    root = root.rstrip("/") or root
    found, stack = [], [(root, ())]
    while stack:
        directory, parts = stack.pop()
        try:
            entries = fs.ls(directory, detail=True)
        except OSError as exc:
            raise InputError(f"cannot list {uri}: {exc.strerror or exc}") from None
        for entry in entries:
            path = entry["name"].rstrip("/")
            name = path.rsplit("/", 1)[-1]
            if directory == root and name in (META, MANIFEST):
                kind = "matrix" if name == META else "run"
                raise InputError(f"{uri} is a samplegen {kind} directory, not rows to import")
            if name.startswith(("_", ".")) or name.endswith(".crc"):
                continue
            rel = path[len(root):].lstrip("/")
            if entry.get("type") == "directory":
                key, eq, value = name.partition("=")
                if not eq or not key:
                    raise InputError(f"{uri}: {rel} is a directory but not a partition "
                                     "(key=value); a Parquet dataset holds Parquet files and "
                                     "partition directories")
                stack.append((path, parts + ((unquote(key), unquote(value)),)))
            else:
                found.append((path, rel, parts))
    found.sort(key=lambda f: f[1])
    parquet, other = [], None
    for f in found:
        if f[1].lower().endswith(PARQUET_SUFFIXES) or _head(fs, f[0]) == PARQUET_MAGIC:
            parquet.append(f)
        elif other is None:
            other = f[1]
    if not parquet:
        raise InputError(f"{uri}: no Parquet files in this directory"
                         + (f" (it holds {_listing([f[1] for f in found], 5)})" if found else ""))
    if other is not None:
        raise InputError(f"{uri}: {other} is not a Parquet file (a dataset directory holds "
                         "Parquet files only; names starting with _ or . are ignored)")
    return parquet


def _head(fs, path):
    """The first four bytes of file *path* (one small read, also on HDFS)."""
    try:
        if hasattr(fs, "read_range"):
            return fs.read_range(path, 0, len(PARQUET_MAGIC))
        return fs.cat_file(path, start=0, end=len(PARQUET_MAGIC))
    except OSError:
        return b""


_LOGICAL_TYPES = (("STRING", "string"), ("ENUM", "string"), ("JSON", "json"), ("BSON", "bson"),
                  ("UUID", "uuid"), ("LIST", "list"), ("MAP", "map"), ("DATE", "date"),
                  ("TIME", "time"), ("TIMESTAMP", "timestamp"), ("DECIMAL", "decimal"))
_CONVERTED_TYPES = {"UTF8": "string", "ENUM": "string", "JSON": "json", "BSON": "bson",
                    "LIST": "list", "MAP": "map", "MAP_KEY_VALUE": "map", "DATE": "date",
                    "TIME_MILLIS": "time", "TIME_MICROS": "time", "TIMESTAMP_MILLIS": "timestamp",
                    "TIMESTAMP_MICROS": "timestamp", "INTERVAL": "interval", "DECIMAL": "decimal"}


def _type_name(pf, name, dtype):
    """The type of column *name* of the Parquet file *pf* in a word: string,
    list, map, struct, timestamp, date, binary ... (else its pandas dtype)."""
    from fastparquet import parquet_thrift
    try:
        element = pf.schema.schema_element(name)
    except (KeyError, TypeError):
        return str(dtype)
    logical = element.logicalType
    for attr, text in _LOGICAL_TYPES:
        if logical is not None and getattr(logical, attr, None) is not None:
            return text
    converted = parquet_thrift.ConvertedType._VALUES_TO_NAMES.get(element.converted_type)
    if converted in _CONVERTED_TYPES:
        return _CONVERTED_TYPES[converted]
    if element.num_children:
        return "struct"
    if element.type == parquet_thrift.Type.INT96:
        return "timestamp"
    if element.type in (parquet_thrift.Type.BYTE_ARRAY, parquet_thrift.Type.FIXED_LEN_BYTE_ARRAY):
        return "binary"
    return str(dtype)


def _element(pf, name):
    """The schema element of column *name* of Parquet file *pf* (None for
    a name it does not know as one element)."""
    try:
        return pf.schema.schema_element(name)
    except (KeyError, TypeError):
        return None


#: the field of Parquet's LogicalType union that marks a half float (2-byte
#: FIXED_LEN_BYTE_ARRAY, IEEE 754 binary16, little endian), which fastparquet's
#: thrift definitions predate
FLOAT16_FIELD = 15


def _is_half(pf, name):
    """Whether column *name* of Parquet file *pf* holds half floats."""
    from fastparquet import parquet_thrift
    element = _element(pf, name)
    if element is None or element.type != parquet_thrift.Type.FIXED_LEN_BYTE_ARRAY:
        return False
    logical = element.logicalType
    return (element.type_length == 2 and logical is not None
            and FLOAT16_FIELD in (getattr(logical, "contents", None) or {}))


def _column_type(pf, name, dtype):
    """None if column *name* of Parquet file *pf* (pandas dtype *dtype*, as
    fastparquet reads it) holds numbers -- integers of any width, floats
    (half floats too), decimals, booleans, and numbers stored as
    categories -- else its type in a word (:func:`_type_name`)."""
    if _is_half(pf, name):
        return None
    if str(dtype) == "category":   # pandas' categories: numeric if the stored values are
        from fastparquet import parquet_thrift
        element = _element(pf, name)
        types = parquet_thrift.Type
        if (element is not None and element.type in (types.BOOLEAN, types.INT32, types.INT64,
                                                      types.FLOAT, types.DOUBLE)
                and _type_name(pf, name, dtype) in ("category", "decimal")):
            return None
    elif _numeric_dtype(dtype):
        return None
    return _type_name(pf, name, dtype)


def _numeric_dtype(dtype):
    """Whether a column of pandas dtype *dtype* holds numbers or booleans."""
    kind = getattr(dtype, "kind", None)
    if kind is None:
        try:
            kind = np.dtype(str(dtype).lower().replace("boolean", "bool")).kind
        except TypeError:
            return False
    return kind in "biuf"


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
def export(matrix, path, row_ids=True, overwrite=False):
    """Write a :class:`jobs.store.Matrix` (or composed view) as rows; returns
    the files written (with ``.npy``, the row ids beside it)."""
    if not fsmod.is_local(path):
        return _export_remote(matrix, path, row_ids, overwrite)
    fmt = file_format(path, reading=False)
    _refuse_store_target(matrix, path)
    targets = _targets(path, row_ids, overwrite)
    ids_path = targets[1] if len(targets) > 1 else None
    fsmod.missing_dirs(path)  # a parent that is a file, a link: refused before any work
    matrix.index()  # fail on a corrupt or incomplete matrix before writing anything
    names = matrix.meta.get("columns") or [f"c{j}" for j in range(matrix.cols)]
    made, done = fsmod.make_parents(path), False
    try:
        with fsmod.temporary_files(targets) as tmp:   # dead exports' temporaries go first
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
        if not done:
            fsmod.remove_dirs(made)
    return targets


def _targets(path, row_ids, overwrite):
    """The files an export to *path* (local or a URI) writes: *path*, and for
    ``.npy`` with *row_ids* the ids beside it; OutputError for one that exists
    unless *overwrite*."""
    targets = [path]
    if file_format(path, reading=False) == ".npy" and row_ids:
        targets.append(os.path.splitext(path)[0] + ".row_ids.npy")
    for target in targets:
        fs = fsmod.get_fs(target)
        if fs.isdir(target):
            raise OutputError(f"cannot write {target}: it is a directory (export writes one "
                              "file; name a file)")
        if fs.exists(target) and not overwrite:
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
    """The rows as Parquet, by Arrow: blocks gathered into row groups of
    :data:`PARQUET_GROUP_ROWS` rows (one appended row group per block made
    the footer, read again at every append, grow with each: quadratic)."""
    import pyarrow as pa
    from pyarrow import parquet as pq
    schema = pa.schema(([pa.field("row_id", pa.int64())] if row_ids else [])
                       + [pa.field(name, pa.float64()) for name in names])
    pending = []

    def table():
        ids = np.concatenate([p[0] for p in pending]).astype(np.int64)
        dense = np.concatenate([p[1] for p in pending])
        columns = ([pa.array(ids)] if row_ids else []) + \
            [pa.array(dense[:, j]) for j in range(dense.shape[1])]
        pending.clear()
        return pa.Table.from_arrays(columns, schema=schema)

    with pq.ParquetWriter(path, schema, write_page_checksum=True) as writer:
        for ids, dense in matrix.iter_rows():
            pending.append((ids, dense))
            if sum(len(p[0]) for p in pending) >= PARQUET_GROUP_ROWS:
                writer.write_table(table())
        if pending:
            writer.write_table(table())
