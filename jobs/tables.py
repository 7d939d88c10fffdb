"""Tables in, tables out: the sampling commands on a user's own table.

A sampling command whose SRC is a table -- a CSV file (any column types), a
Parquet file or dataset directory, a ``.npy`` file -- rather than a matrix
directory samples the table's rows by row id (row *i* of the table is id
*i*; a dataset's files in the order of their paths, as ``import`` numbers
them), with the decisions of the block jobs and the Python API, and writes
every sample as a table in the user's format, each column kept with its
type and the rows in the jobs' order::

    DEST/_manifest.json      method, params, seed, the input table (path,
                             format, rows, columns and their types), every
                             sample's files with their size and SHA-256
    DEST/train-0.parquet     one file per sample (.parquet, .csv or .npy)
    DEST/train-0/            a composed k-fold training set: the other
                             folds' files, hard-linked (no copy), a dataset
    DEST/_SUCCESS

A table that fits its memory budget is read whole by Arrow's multithreaded
CSV and Parquet readers; a larger one is streamed once into a memory-mapped
Arrow file in the run's scratch space (:class:`SpilledTable`).  The
samples' row ids are computed in memory (:func:`jobs.phases.sample_indices`),
and each sample is Arrow's ``take`` of them, a million rows at a time (the
same bytes either way), hashed as it is written under the run's staging
directory and committed with it (:class:`jobs.store.StagedOutput`): whole
or not at all.
"""
import contextlib
import hashlib
import os
import time

import numpy as np

from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import InputError, ParameterError, count_words
from samplegen.udfs.rng import PositionRNG, check_seed
from samplegen.udfs.strata import SIDES, Strata
from samplegen.udfs.weighted import RowWeights

from . import fs as fsmod
from .driver import _space_named
from .formats import _dataset_files, _skip, _Source, csv_head, file_format, partition_columns
from .limits import available_memory, format_bytes
from .phases import partners, sample_indices
from .store import (
    MANIFEST,
    META,
    RUN_FORMAT,
    TABLE_RUN,
    StagedOutput,
    manifest_json,
    to_json,
)

#: the formats a table run writes (``--format``), by their file name ending
OUTPUT_FORMATS = {"parquet": ".parquet", "csv": ".csv", "npy": ".npy"}
#: an in-memory table may take this share of the available memory
MEMORY_SHARE = 0.5
#: a CSV file's table in memory, with the reading and the take: this many times its size
CSV_EXPANSION = 3.0
#: ... and of a Parquet file's (compressed, encoded), as estimated
PARQUET_EXPANSION = 4.0
#: rows taken and written at a time
OUTPUT_CHUNK_ROWS = 1 << 20
#: bytes of CSV parsed at a time (a streamed CSV's columns take the types of its first block)
CSV_BLOCK_BYTES = 16 << 20
#: rows of a Parquet file streamed at a time
SPILL_BATCH_ROWS = 1 << 16


def is_table(src):
    """Whether *src* names a table (a file of a table format, or a directory
    without a matrix's or a run's metadata: a Parquet dataset) rather than
    a matrix directory."""
    fs = fsmod.get_fs(src)
    if fs.isdir(src):
        return not (fs.exists(fsmod.join(src, META)) or fs.exists(fsmod.join(src, MANIFEST)))
    return os.path.splitext(src.rstrip("/"))[1].lower() in (".csv", ".parquet", ".npy")


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
class Table:
    """A user's table in memory: :attr:`data` (a ``pyarrow.Table``, or a
    2-D numpy array for a ``.npy`` file), :attr:`kind` (``csv``,
    ``parquet``, ``npy``) and :attr:`rows`."""

    def __init__(self, uri, data, kind):
        self.uri, self.data, self.kind = uri, data, kind
        self._combined = False
        self.numpy = isinstance(data, np.ndarray)   # a .npy file's array, else Arrow
        self.rows = int(data.shape[0]) if self.numpy else data.num_rows

    @property
    def columns(self):
        """``[{"name": ..., "type": ...}]`` of every column, in order."""
        if self.numpy:
            return [{"name": f"c{j}", "type": str(self.data.dtype)}
                    for j in range(self.data.shape[1])]
        return [{"name": f.name, "type": str(f.type)} for f in self.data.schema]

    def values(self, name, option):
        """The values of column *name* (one per row, numpy; text as an
        object array) for *option* (``--stratify``, ...), or
        ParameterError naming the columns there are."""
        names = [c["name"] for c in self.columns]
        if name not in names:
            try:   # a column number, as the matrix path takes
                j = int(name)
            except ValueError:
                j = None
            if j is None or not 0 <= j < len(names):
                shown = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
                raise ParameterError(f"{option}: no column {name!r} in {self.uri} (columns: "
                                     f"{shown})")
            name = names[j]
        if self.numpy:
            return name, self.data[:, names.index(name)]
        column = self.data.column(name)
        values = column.to_numpy(zero_copy_only=False)
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            what = {"--stratify": "label", "--groups": "group column"}.get(option, "column")
            raise InputError(f"{what} {name!r} of {self.uri} is empty (null) at row {row}: "
                             "every row needs a value")
        return name, values

    @property
    def schema(self):
        return self.data.schema

    def as_arrow(self):
        """A ``.npy`` table as an Arrow table of columns ``c0``, ``c1``, ..."""
        import pyarrow as pa
        columns = [pa.array(np.ascontiguousarray(self.data[:, j]))
                   for j in range(self.data.shape[1])]
        return Table(self.uri, pa.Table.from_arrays(
            columns, names=[f"c{j}" for j in range(len(columns))]), self.kind)

    def close(self):
        """Let go of the rows (a spilled table's file is removed)."""
        self.data = None

    @property
    def dtype(self):
        return self.data.dtype

    def ready(self):
        """Made ready for :meth:`take` (before threads share the table): an
        Arrow table's columns each one chunk, since a take across many chunks
        costs ten times one across one."""
        if not self.numpy and not self._combined:
            self.data, self._combined = self.data.combine_chunks(), True

    def take(self, ids):
        """The rows *ids* (row ids, in this order), as a table of the same kind."""
        if self.numpy:
            return self.data[ids]
        self.ready()
        return self.data.take(ids)


class SpilledTable(Table):
    """A table larger than the memory it may use: its rows streamed once into
    an Arrow IPC file at *path* (local scratch space) and memory-mapped, so
    the pages it holds are the kernel's to drop; :meth:`take` gathers each
    batch's rows with one take of its own."""

    def __init__(self, uri, kind, path):
        import pyarrow as pa
        self.path = path
        self._file = pa.memory_map(path)
        reader = pa.ipc.open_file(self._file)
        self.batches = [reader.get_batch(i) for i in range(reader.num_record_batches)]
        super().__init__(uri, pa.Table.from_batches(self.batches, reader.schema), kind)
        self._combined = True
        sizes = [b.num_rows for b in self.batches]
        self.starts = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def take(self, ids):
        import pyarrow as pa
        ids = np.asarray(ids, np.int64)
        which = np.searchsorted(self.starts, ids, side="right") - 1
        order = np.argsort(which, kind="stable")
        bounds = np.searchsorted(which[order], np.arange(len(self.batches) + 1))
        pieces = [self.batches[b].take(pa.array(ids[order[bounds[b]:bounds[b + 1]]]
                                                - self.starts[b]))
                  for b in range(len(self.batches)) if bounds[b + 1] > bounds[b]]
        gathered = pa.Table.from_batches(pieces, self.data.schema).combine_chunks()
        back = np.empty_like(order)
        back[order] = np.arange(order.size)
        return gathered.take(pa.array(back))

    def close(self):
        self.batches, self.data = [], None
        self._file.close()
        os.remove(self.path)


def read_table(uri, memory_bytes=None, spill_dir=None):
    """The :class:`Table` at *uri*: a CSV, Parquet or ``.npy`` file, or a
    Parquet dataset directory, on any filesystem of :mod:`jobs.fs`.  A
    table whose estimated size in memory passes *memory_bytes* (default:
    :data:`MEMORY_SHARE` of the available memory) is streamed into
    *spill_dir* instead (a :class:`SpilledTable`; a local ``.npy`` file is
    memory-mapped as it is).  A missing, empty, damaged or ragged file,
    or one changed while it is read, is one InputError naming it."""
    fs = fsmod.get_fs(uri)
    budget = memory_bytes if memory_bytes is not None else \
        int(available_memory() * MEMORY_SHARE)
    if fs.isdir(uri):
        fsspec, root = fsmod.fsspec_of(uri)
        files = _dataset_files(uri, fsspec, root)
        size = sum(fsspec.size(path) for path, _, _ in files) * PARQUET_EXPANSION
        return _parquet_table(uri, files, size > budget, spill_dir)
    kind = file_format(uri)[1:]
    if not fs.exists(uri):
        raise InputError(f"input file not found: {uri}")
    if fs.size(uri) == 0:
        raise InputError(f"input file is empty: {uri}")
    size = fs.size(uri)
    if kind == "npy":
        return Table(uri, _read_npy(uri, mapped=size > budget), kind)
    if kind == "csv":
        if size * CSV_EXPANSION > budget:
            return _spilled(uri, kind, spill_dir, lambda sink: _stream_csv(uri, fs, sink))
        return Table(uri, _read_csv(uri, fs), kind)
    files = [(fsmod.fsspec_of(uri)[1], "", ())]
    return _parquet_table(uri, files, size * PARQUET_EXPANSION > budget, spill_dir)


def _parquet_table(uri, files, spill, spill_dir):
    if spill:
        return _spilled(uri, "parquet", spill_dir,
                        lambda sink: _stream_parquet_files(uri, files, sink))
    return Table(uri, _read_parquet_files(uri, files), "parquet")


def _spilled(uri, kind, spill_dir, stream):
    """A :class:`SpilledTable` of what *stream(sink)* writes (one call per
    record batch of the table, ``sink(batch)``) into a file of *spill_dir*."""
    import pyarrow as pa
    if spill_dir is None:
        raise InputError(f"{uri} is larger than the memory a table may use here")
    os.makedirs(spill_dir, exist_ok=True)
    path = os.path.join(spill_dir, f"table-{os.getpid()}.arrow")
    state = {"writer": None}

    def sink(batch):
        if state["writer"] is None:
            state["writer"] = pa.ipc.new_file(path, batch.schema)
        state["writer"].write_batch(batch)
    try:
        stream(sink)
        if state["writer"] is None:
            raise InputError(f"{uri}: no rows")
        state["writer"].close()
        table = SpilledTable(uri, kind, path)
    except BaseException:
        if state["writer"] is not None:
            state["writer"].close()
        if os.path.exists(path):
            os.remove(path)
        raise
    if table.rows == 0:
        table.close()
        raise InputError(f"{uri}: no rows")
    return table


def _arrow_failure(source, exc):
    """One InputError for what Arrow raised reading *source*."""
    if source.changed():
        return source.failure(exc, "")
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, OSError) and getattr(exc, "strerror", None):
        return source.failure(exc, "")
    if len(text) > 300:
        text = text[:300] + "..."
    return InputError(f"cannot read {source.name} as {source.kind}: {text}")


def _csv_options(uri, fs):
    """``(head, read, parse, convert options)`` of CSV file *uri*."""
    from pyarrow import csv
    head = csv_head(uri, fs)
    names = head.header or [f"c{j}" for j in range(head.n_fields)]
    read = csv.ReadOptions(column_names=names, use_threads=True, block_size=CSV_BLOCK_BYTES)
    parse = csv.ParseOptions(delimiter=head.delimiter)
    convert = csv.ConvertOptions(strings_can_be_null=True)   # as pandas reads them
    return head, read, parse, convert


def _read_csv(uri, fs):
    """A CSV file by Arrow's reader: the header and delimiter as ``import``
    finds them (:func:`jobs.formats.csv_head`; without a header the
    columns are ``c0``, ``c1``, ...), each column's type inferred from its
    values (integers, floats, booleans, timestamps, text); an empty field
    is a null, as pandas reads it."""
    from pyarrow import csv
    head, read, parse, convert = _csv_options(uri, fs)
    source = _Source(*fsmod.fsspec_of(uri), uri, "CSV")
    with _csv_failures(source):
        with _opened(uri, fs, head.offset) as f:
            table = csv.read_csv(f, read_options=read, parse_options=parse,
                                 convert_options=convert)
    source.check()
    if table.num_rows == 0:
        raise InputError(f"{uri}: no data rows")
    _check_text(uri, table)
    return table


def _stream_csv(uri, fs, sink):
    """The record batches of CSV file *uri* to *sink*, as :func:`_read_csv`
    reads it, but a block at a time: the columns' types are those of the
    first block (:data:`CSV_BLOCK_BYTES`), and a later value of another type
    is an error naming its column."""
    from pyarrow import csv
    head, read, parse, convert = _csv_options(uri, fs)
    source = _Source(*fsmod.fsspec_of(uri), uri, "CSV")
    with _csv_failures(source):
        with _opened(uri, fs, head.offset) as f:
            for batch in csv.open_csv(f, read_options=read, parse_options=parse,
                                      convert_options=convert):
                _check_text(uri, batch)
                sink(batch)
    source.check()


@contextlib.contextmanager
def _opened(uri, fs, offset):
    """File *uri* open for Arrow's reader at *offset*: Arrow's own file
    when local (read, not mapped: the same speed, and a 10^7-row CSV's run
    peaked at 3.8 GB resident instead of 5.0), else a stream of the
    filesystem layer."""
    import pyarrow as pa
    if fsmod.is_local(uri):
        with pa.OSFile(fsmod.local_path(uri)) as f:
            f.seek(offset)
            yield f
    else:
        with fs.open_read(uri) as f:
            _skip(f, offset)
            yield f


@contextlib.contextmanager
def _csv_failures(source):
    """What Arrow raises reading CSV *source*, as one InputError."""
    import pyarrow as pa
    try:
        yield
    except (pa.ArrowException, OSError, ValueError) as exc:
        if "Empty CSV file" in str(exc) and not source.changed():
            raise InputError(f"{source.name}: no data rows") from None
        raise _arrow_failure(source, exc) from None


def _check_text(uri, table):
    """InputError for a column of bytes that are not UTF-8 text, and for a
    quote left open (the rest of the file read as one field: a line end
    inside a value, which this reader does not take)."""
    import pyarrow as pa
    from pyarrow import compute as pc
    for field in table.schema:
        column = table.column(field.name)
        if pa.types.is_binary(field.type) or pa.types.is_large_binary(field.type):
            raise InputError(f"{uri}: column {field.name!r} holds bytes that are not UTF-8 "
                             "text; save the file as UTF-8")
        if pa.types.is_string(field.type) or pa.types.is_large_string(field.type):
            broken = pc.match_substring(column, "\n")
            if pc.any(broken).as_py():
                row = int(np.flatnonzero(broken.to_numpy(zero_copy_only=False) == True)[0])  # noqa: E712
                raise InputError(f"{uri}: column {field.name!r} has a quote that is not closed "
                                 f"(at data row {row}): the rest of the file reads as one value")


def _read_npy(uri, mapped=False):
    """The 2-D array of numbers of ``.npy`` file *uri*; *mapped*: a local
    file memory-mapped rather than read (a remote one is copied first, and
    then read whole)."""
    try:
        if mapped and fsmod.is_local(uri):
            array = np.load(fsmod.local_path(uri), mmap_mode="r", allow_pickle=False)
        else:
            with fsmod.local_copy(uri) as path:
                array = np.ascontiguousarray(np.load(path, allow_pickle=False))
    except (OSError, ValueError, EOFError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{uri} is not a .npy file of numbers: {reason}") from None
    if array.ndim != 2:
        raise InputError(f"{uri} holds an array of shape {array.shape}; a table is 2-D "
                         "(rows x columns)")
    if array.dtype.kind not in "fiub":
        raise InputError(f"{uri} holds values of dtype {array.dtype}: a .npy table holds numbers")
    if array.shape[0] == 0:
        raise InputError(f"{uri}: no rows")
    if array.flags.f_contiguous and not array.flags.c_contiguous:
        array = np.ascontiguousarray(array)
    return array


def _read_parquet_files(uri, files):
    """One Arrow table of the Parquet *files* (``(path, relative path,
    partition keys)``, as :func:`jobs.formats._dataset_files` lists them),
    in order (see :func:`_parquet_pieces`)."""
    import pyarrow as pa
    table = pa.concat_tables(list(_parquet_pieces(uri, files, streamed=False)))
    if table.num_rows == 0:
        raise InputError(f"{uri}: no rows")
    return table


def _stream_parquet_files(uri, files, sink):
    """The record batches of the Parquet *files* to *sink*, a row group's
    worth at a time."""
    for batch in _parquet_pieces(uri, files, streamed=True):
        sink(batch)


def _parquet_pieces(uri, files, streamed):
    """The Parquet *files* in order, each whole as a table or (*streamed*)
    as record batches; partition keys become columns after the files' own
    (float64 if every value is a number, a null partition NaN, as
    ``import`` reads them; else text); every file must have the first
    one's columns and types.  Pages are checked against their checksums
    where the writer recorded them."""
    import pyarrow as pa
    from pyarrow import parquet as pq
    fs, _ = fsmod.fsspec_of(uri)
    numeric = {key for key, (is_number, _) in partition_columns(uri, files).items()
               if is_number}
    schema = None
    for path, rel, parts in files:
        name = fsmod.join(uri, rel) if rel else uri
        source = _Source(fs, path, name, "Parquet")
        try:
            with fs.open(path, "rb") as f:
                if streamed:
                    pieces = pq.ParquetFile(f, page_checksum_verification=True).iter_batches(
                        batch_size=SPILL_BATCH_ROWS, use_threads=True)
                else:
                    pieces = [pq.read_table(f, use_threads=True,
                                            page_checksum_verification=True)]
                for piece in pieces:
                    piece = _with_partitions(uri, name, piece, parts, numeric)
                    if schema is None:
                        schema = piece.schema
                    elif not piece.schema.equals(schema):
                        raise InputError(f"{name}: its columns {_schema_text(piece.schema)} "
                                         "differ from the dataset's first file's "
                                         f"({_schema_text(schema)})")
                    yield piece
        except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
            raise _arrow_failure(source, exc) from None
        source.check()


def _with_partitions(uri, name, piece, parts, numeric):
    """*piece* (a table or record batch of file *name*) with its partition
    columns appended."""
    import pyarrow as pa

    from .formats import NULL_PARTITION
    _refuse_repeated(name, piece.schema.names)
    columns, names = list(piece.columns), list(piece.schema.names)
    for key, value in parts:
        if key in names:
            raise InputError(f"{uri}: partition key {key!r} is also a column of {name}")
        if key in numeric:
            number = np.nan if value == NULL_PARTITION else float(value)
            columns.append(pa.array(np.full(piece.num_rows, number)))
        else:
            columns.append(pa.array([value] * piece.num_rows, pa.string()))
        names.append(key)
    if not parts:
        return piece
    kind = pa.Table if isinstance(piece, pa.Table) else pa.RecordBatch
    return kind.from_arrays(columns, names=names)


def _schema_text(schema):
    return ", ".join(f"{f.name} {f.type}" for f in schema)


def _refuse_repeated(name, columns):
    for j, column in enumerate(columns):
        if column in columns[:j]:
            at = [i + 1 for i, c in enumerate(columns) if c == column]
            raise InputError(f"{name}: it names column {column!r} more than once (columns "
                             f"{', '.join(map(str, at))}); every column needs a name of its own")


# ---------------------------------------------------------------------------
# the run
# ---------------------------------------------------------------------------
def _sides(table, udf_spec, params):
    """``{plan field: side}``: the classes, groups and weights of the
    table's rows that a built-in UDF's *params* name by column."""
    sides = {field: None for field in SIDES}
    if ":" in udf_spec:
        return sides
    for field, param in SIDES.items():
        column = params.get(param)
        if column is None:
            continue
        if not isinstance(column, str):
            raise ParameterError(f"{param} must name a column, got {column!r}")
        option = f"--{param}"
        if field == "weighting":
            if column.endswith(".npy"):
                from .strata import weights_file
                sides[field] = weights_file(column, table.rows)
                continue
            name, values = table.values(column, option)
            if values.dtype.kind not in "fiub":
                raise InputError(f"weights column {name!r} of {table.uri} holds "
                                 f"{values.dtype} values: weights are numbers")
            sides[field] = RowWeights.of(values, name)
            continue
        name, values = table.values(column, option)
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            row = int(np.flatnonzero(~np.isfinite(values))[0])
            what = "label" if field == "strata" else "group column"
            raise InputError(f"{what} {name!r} of {table.uri} is {values[row]} at row {row}: "
                             "every row needs a finite value")
        sides[field] = Strata.of(values, field == "strata")
    return sides


def check_format(fmt, table_kind):
    """The output format: *fmt* (``--format``), else the input's kind."""
    fmt = fmt or table_kind
    if fmt not in OUTPUT_FORMATS:
        raise ParameterError(f"--format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    if fmt == "npy" and table_kind != "npy":
        raise ParameterError("--format npy writes the rows of a .npy input; a CSV or Parquet "
                             "table is written as parquet or csv")
    return fmt


def generate(src, dest, udf_spec, params, seed, fmt=None, overwrite=False, log=None,
             materialize=False, runner="embedded", memory_bytes=None):
    """Sample the table *src* into the run directory *dest* (see the module
    docstring); returns the run's manifest.  *memory_bytes*: the memory the
    table may take (see :func:`read_table`)."""
    log = log or (lambda message, progress=False: None)
    check_seed(seed)
    if fsmod.is_local(src):
        src = os.path.abspath(fsmod.local_path(src))
    fs = fsmod.get_fs(src)
    if fs.isdir(src):
        try:
            _dataset_files(src, *fsmod.fsspec_of(src))
        except InputError as exc:
            if "no Parquet files" not in str(exc):
                raise
            raise InputError(f"{src} is neither a matrix (it has no {META}) nor a Parquet "
                             "dataset (it has no Parquet files)") from None
    elif not fs.exists(src):
        raise InputError(f"input file not found: {src}")
    if runner != "embedded":
        raise ParameterError(f"--runner {runner} samples block matrices: a table (CSV, Parquet, "
                             ".npy) is sampled by the embedded runner; to sample it on "
                             f"{runner}, import it first (samplegen import)")
    if fmt is not None:
        check_format(fmt, "parquet" if fmt != "npy" else "npy")
    staged = StagedOutput(dest, overwrite, inputs=[src])   # refused before any read
    started = time.time()
    with _space_named(staged), staged as staging:
        log(f"reading {src}", progress=True)
        table = read_table(src, memory_bytes, fsmod.scratch_dir(staged.scratch))
        try:
            manifest = _run(table, src, dest, staging, staged.local, udf_spec, params, seed,
                            fmt, materialize, log, started)
        finally:
            table.close()
    entries = manifest["samples"]
    total = sum(e["bytes"] for e in entries if not e.get("composed_of"))
    log(f"wrote {count_words(len(entries), 'sample', 'samples')} ({format_bytes(total)}) in "
        f"{time.time() - started:.1f} s")
    return manifest


def _run(table, src, dest, staging, local, udf_spec, params, seed, fmt, materialize, log,
         started):
    """Sample *table* (read from *src*) into *staging*; the run's manifest."""
    fmt = check_format(fmt, table.kind)
    if table.kind == "npy" and fmt != "npy":
        table = table.as_arrow()
    sides = _sides(table, udf_spec, params)
    udf = load_udf(udf_spec, table.rows, params, *(sides[field] for field in SIDES))
    to_json(udf.params())   # a NaN parameter is refused before any work
    prepared = udf.prepare(PositionRNG(seed))
    if prepared:
        params = dict(params, **prepared)
        udf = load_udf(udf_spec, table.rows, params, *(sides[field] for field in SIDES))
    log(f"{udf.name}: {count_words(table.rows, 'row', 'rows')} x "
        f"{count_words(len(table.columns), 'column', 'columns')} ({table.kind}) -> {dest} "
        f"({fmt})", progress=True)
    names, indices = sample_indices(udf, seed, compose=materialize)
    entries = [_write_sample(staging, name, table, indices[name], fmt) for name in names]
    by_name = {e["name"]: e for e in entries}
    composed = [] if materialize else list(udf.composed_names())
    for round_, name in enumerate(composed):
        folds = [names[f] for f in partners(len(names), round_, udf.fold_group())]
        entries.append(_compose(staging, name, [by_name[f] for f in folds], local, table,
                                indices, fmt))
    manifest = {
        "format": RUN_FORMAT, "kind": TABLE_RUN, "method": udf.name,
        "udf": udf.spec[0], "params": udf.spec[1], "seed": seed,
        "engine": {"runner": "embedded"},
        "input": {"path": src, "format": table.kind, "rows": table.rows,
                  "cols": len(table.columns), "columns": table.columns},
        "output_format": fmt, "samples": entries,
        "elapsed_seconds": round(time.time() - started, 3),
    }
    fsmod.get_fs(staging).write_bytes(fsmod.join(staging, MANIFEST), manifest_json(manifest))
    return manifest


def _write_sample(staging, name, table, ids, fmt):
    """Write the sample *name*, the rows *ids* of *table*, into *staging*
    (:data:`OUTPUT_CHUNK_ROWS` rows at a time, the same bytes whether the
    table is in memory or spilled); its manifest entry."""
    rel = name + OUTPUT_FORMATS[fmt]
    out = _HashedOutput(fsmod.get_fs(staging).open_atomic(fsmod.join(staging, rel)))
    try:
        writer = _writer(out, fmt, table, len(ids))
        for a in range(0, len(ids), OUTPUT_CHUNK_ROWS):
            writer.write(table.take(ids[a:a + OUTPUT_CHUNK_ROWS]))
        writer.close()
        out.close()
    except BaseException:
        out.abort()
        raise
    return {"name": name, "rows": len(ids),
            "files": [{"path": rel, "bytes": out.size, "sha256": out.digest()}],
            "bytes": out.size}


class _HashedOutput:
    """A file being written (a :mod:`jobs.fs` atomic writer) whose size and
    SHA-256 are taken from the bytes as they go by."""

    def __init__(self, writer):
        self.writer, self.sha, self.size, self.closed = writer, hashlib.sha256(), 0, False

    def write(self, data):
        data = memoryview(data).cast("B")
        self.sha.update(data)
        self.writer.write(data)
        self.size += len(data)
        return len(data)

    def tell(self):
        return self.size

    def flush(self):
        pass

    def writable(self):
        return True

    def close(self):
        if not self.closed:
            self.closed = True
            self.writer.close()

    def abort(self):
        if not self.closed:
            self.closed = True
            self.writer.abort()

    def digest(self):
        return "sha256:" + self.sha.hexdigest()


class _NpyWriter:
    """Rows of a 2-D array written after a header for *rows* rows."""

    def __init__(self, f, dtype, cols, rows):
        self.f = f
        np.lib.format.write_array_header_1_0(f, {
            "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)), "fortran_order": False,
            "shape": (rows, cols)})

    def write(self, rows):
        self.f.write(np.ascontiguousarray(rows).data)

    def close(self):
        pass


def _writer(f, fmt, table, rows):
    """A writer of *table*'s rows in *fmt* to the file object *f*:
    ``write(rows)`` per chunk, then ``close()``."""
    if table.numpy:
        return _NpyWriter(f, table.dtype, len(table.columns), rows)
    import pyarrow as pa
    if fmt == "parquet":
        from pyarrow import parquet as pq
        return pq.ParquetWriter(pa.PythonFile(f, mode="w"), table.schema,
                                write_page_checksum=True)
    from pyarrow import csv
    return csv.CSVWriter(pa.PythonFile(f, mode="w"), table.schema,
                         write_options=csv.WriteOptions(quoting_style="needed"))


def _compose(staging, name, folds, local, table, indices, fmt):
    """The composed training set *name*: the files of its *folds*
    (manifest entries), hard-linked into the directory *name* (a local
    run), else written again as one file."""
    rows = sum(f["rows"] for f in folds)
    composed_of = [f["name"] for f in folds]
    if not local:
        ids = np.concatenate([indices[f] for f in composed_of])
        return dict(_write_sample(staging, name, table, ids, fmt), composed_of=composed_of)
    directory = fsmod.join(staging, name)
    os.mkdir(directory)
    files = []
    for k, fold in enumerate(folds):
        (first,) = fold["files"]
        rel = f"{name}/part-{k:05d}-{fold['name']}{OUTPUT_FORMATS[fmt]}"
        os.link(fsmod.join(staging, first["path"]), fsmod.join(staging, rel))
        files.append(dict(first, path=rel))
    return {"name": name, "rows": rows, "files": files, "composed_of": composed_of,
            "bytes": sum(f["bytes"] for f in files)}


# ---------------------------------------------------------------------------
# reading a table run back
# ---------------------------------------------------------------------------
def verify_run(path, manifest):
    """InputError unless every file of the table run at *path* has the size
    and SHA-256 its *manifest* records."""
    fs = fsmod.get_fs(path)
    for entry in manifest.get("samples", []):
        for f in entry.get("files", []):
            uri = fsmod.join(path, f["path"])
            if not fs.exists(uri):
                raise InputError(f"{uri} is missing from the run {path}")
            sha, size = hashlib.sha256(), 0
            with fs.open_read(uri) as stream:
                while True:
                    chunk = stream.read(4 << 20)
                    if not chunk:
                        break
                    sha.update(chunk)
                    size += len(chunk)
            if size != f["bytes"] or "sha256:" + sha.hexdigest() != f["sha256"]:
                raise InputError(f"damaged sample file {uri}: its "
                                 f"{'size' if size != f['bytes'] else 'content'} does not match "
                                 "the run's manifest; run the command again")


def read_sample(path, manifest, name):
    """The rows of sample *name* of the table run at *path* (its *manifest*
    read by :func:`jobs.driver.info`), its files verified first: a pandas
    DataFrame of its Parquet or CSV files, in order, or the array of its
    ``.npy`` file.  Read on one thread: a threaded Arrow read in a process
    that also has pandas can abort that process at its exit (std::terminate
    in Arrow's thread pool) after the work is done."""
    (entry,) = [s for s in manifest["samples"] if s["name"] == name]
    verify_run(path, {"samples": [entry]})
    fs = fsmod.get_fs(path)
    frames = []
    for f in entry["files"]:
        with fs.open_read(fsmod.join(path, f["path"])) as stream:
            data = stream.read()
        if manifest["output_format"] == "npy":
            import io
            return np.load(io.BytesIO(data), allow_pickle=False)
        import pyarrow as pa
        if manifest["output_format"] == "parquet":
            from pyarrow import parquet as pq
            frames.append(pq.read_table(pa.BufferReader(data), use_threads=False))
        else:
            from pyarrow import csv
            frames.append(csv.read_csv(pa.BufferReader(data),
                                       read_options=csv.ReadOptions(use_threads=False),
                                       convert_options=csv.ConvertOptions(
                                           strings_can_be_null=True)))
    import pyarrow as pa
    return pa.concat_tables(frames).to_pandas()
