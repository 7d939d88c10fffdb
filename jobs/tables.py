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

The table is read whole into Arrow memory (Arrow's multithreaded CSV and
Parquet readers), the samples' row ids are computed in memory
(:func:`jobs.phases.sample_indices`), and each sample is Arrow's ``take``
of them, written under the run's staging directory and committed with it
(:class:`jobs.store.StagedOutput`): whole or not at all.
"""
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
from .formats import _dataset_files, _skip, _Source, csv_head, file_format
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
#: Arrow's in-memory size of a CSV file's data, at most this many times its size
CSV_EXPANSION = 2.0


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
        self.rows = int(data.shape[0]) if kind == "npy" else data.num_rows

    @property
    def columns(self):
        """``[{"name": ..., "type": ...}]`` of every column, in order."""
        if self.kind == "npy":
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
        if self.kind == "npy":
            return name, self.data[:, names.index(name)]
        column = self.data.column(name)
        values = column.to_numpy(zero_copy_only=False)
        if column.null_count:
            row = int(np.flatnonzero(column.is_null().to_numpy(zero_copy_only=False))[0])
            what = {"--stratify": "label", "--groups": "group column"}.get(option, "column")
            raise InputError(f"{what} {name!r} of {self.uri} is empty (null) at row {row}: "
                             "every row needs a value")
        return name, values

    def take(self, ids):
        """The rows *ids* (row ids, in this order), as a table of the same kind."""
        if self.kind == "npy":
            return self.data[ids]
        if not self._combined:   # a take across many chunks costs ten times one across one
            self.data, self._combined = self.data.combine_chunks(), True
        return self.data.take(ids)


def read_table(uri):
    """The :class:`Table` at *uri*: a CSV, Parquet or ``.npy`` file, or a
    Parquet dataset directory, on any filesystem of :mod:`jobs.fs`.  A
    missing, empty, damaged or ragged file, or one changed while it is
    read, is one InputError naming it."""
    fs = fsmod.get_fs(uri)
    if fs.isdir(uri):
        return Table(uri, _read_dataset(uri), "parquet")
    kind = file_format(uri)[1:]
    if not fs.exists(uri):
        raise InputError(f"input file not found: {uri}")
    if fs.size(uri) == 0:
        raise InputError(f"input file is empty: {uri}")
    _check_memory(uri, fs.size(uri) * (CSV_EXPANSION if kind == "csv" else 1))
    if kind == "npy":
        return Table(uri, _read_npy(uri), kind)
    if kind == "csv":
        return Table(uri, _read_csv(uri, fs), kind)
    return Table(uri, _read_parquet_files(uri, [(fsmod.fsspec_of(uri)[1], "", ())]), kind)


def _check_memory(uri, nbytes):
    limit = int(available_memory() * MEMORY_SHARE)
    if nbytes > limit:
        raise InputError(f"{uri} would take about {format_bytes(nbytes)} of memory, more than "
                         f"the {format_bytes(limit)} a table may use here; import it "
                         "(samplegen import) and sample the matrix, whose runs stream")


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


def _read_csv(uri, fs):
    """A CSV file by Arrow's reader: the header and delimiter as ``import``
    finds them (:func:`jobs.formats.csv_head`; without a header the
    columns are ``c0``, ``c1``, ...), each column's type inferred from its
    values (integers, floats, booleans, timestamps, text); an empty field
    is a null, but in a text column, where it is the empty text."""
    import pyarrow as pa
    from pyarrow import csv
    head = csv_head(uri, fs)
    source = _Source(*fsmod.fsspec_of(uri), uri, "CSV")
    names = head.header or [f"c{j}" for j in range(head.n_fields)]
    read = csv.ReadOptions(column_names=names, use_threads=True, block_size=16 << 20)
    parse = csv.ParseOptions(delimiter=head.delimiter)
    convert = csv.ConvertOptions(strings_can_be_null=True)   # as pandas reads them
    try:
        if fsmod.is_local(uri):   # Arrow's own reads, no Python file between
            with pa.memory_map(fsmod.local_path(uri)) as f:
                f.seek(head.offset)
                table = csv.read_csv(f, read_options=read, parse_options=parse,
                                     convert_options=convert)
        else:
            with fs.open_read(uri) as f:
                _skip(f, head.offset)
                table = csv.read_csv(f, read_options=read, parse_options=parse,
                                     convert_options=convert)
    except (pa.ArrowException, OSError, ValueError) as exc:
        if "Empty CSV file" in str(exc) and not source.changed():
            raise InputError(f"{uri}: no data rows") from None
        raise _arrow_failure(source, exc) from None
    source.check()
    if table.num_rows == 0:
        raise InputError(f"{uri}: no data rows")
    _check_text(uri, table)
    return table


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


def _read_npy(uri):
    try:
        with fsmod.local_copy(uri) as path:
            array = np.load(path, allow_pickle=False)
            array = np.ascontiguousarray(array)
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
    return array


def _read_dataset(uri):
    fs, root = fsmod.fsspec_of(uri)
    files = _dataset_files(uri, fs, root)
    size = sum(fs.size(path) for path, _, _ in files)
    _check_memory(uri, size * 4)   # compressed columns
    return _read_parquet_files(uri, files)


def _read_parquet_files(uri, files):
    """One Arrow table of the Parquet *files* (``(path, relative path,
    partition keys)``, as :func:`jobs.formats._dataset_files` lists them),
    in order; partition keys become columns after the files' own (numbers
    if every value is one, else text); every file must have the first one's
    columns and types."""
    import pyarrow as pa
    from pyarrow import parquet as pq
    fs, _ = fsmod.fsspec_of(uri)
    tables, schema = [], None
    for path, rel, parts in files:
        name = fsmod.join(uri, rel) if rel else uri
        source = _Source(fs, path, name, "Parquet")
        try:
            with fs.open(path, "rb") as f:
                table = pq.read_table(f, use_threads=True, page_checksum_verification=True)
        except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
            raise _arrow_failure(source, exc) from None
        source.check()
        _refuse_repeated(name, table.column_names)
        for key, value in parts:
            if key in table.column_names:
                raise InputError(f"{uri}: partition key {key!r} is also a column of {name}")
            table = table.append_column(key, pa.array([value] * table.num_rows, pa.string()))
        if schema is None:
            schema = table.schema
        elif not table.schema.equals(schema):
            raise InputError(f"{name}: its columns {_schema_text(table.schema)} differ from the "
                             f"dataset's first file's ({_schema_text(schema)})")
        tables.append(table)
    table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    table = _numeric_partitions(table, [key for key, _ in files[0][2]])
    if table.num_rows == 0:
        raise InputError(f"{uri}: no rows")
    return table


def _schema_text(schema):
    return ", ".join(f"{f.name} {f.type}" for f in schema)


def _refuse_repeated(name, columns):
    for j, column in enumerate(columns):
        if column in columns[:j]:
            at = [i + 1 for i, c in enumerate(columns) if c == column]
            raise InputError(f"{name}: it names column {column!r} more than once (columns "
                             f"{', '.join(map(str, at))}); every column needs a name of its own")


def _numeric_partitions(table, keys):
    """Partition columns whose values are all numbers as float64 (a null
    partition is NaN), as ``import`` reads them."""
    import pyarrow as pa
    from pyarrow import compute as pc

    from .formats import NULL_PARTITION, _is_number
    for key in keys:
        values = table.column(key).unique().to_pylist()
        numbers = [v for v in values if v != NULL_PARTITION]
        if numbers and all(_is_number(v) for v in numbers):
            column = pc.if_else(pc.equal(table.column(key), NULL_PARTITION), "nan",
                                table.column(key))
            table = table.set_column(table.column_names.index(key), key,
                                     pc.cast(column, pa.float64()))
    return table


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
             materialize=False, runner="embedded"):
    """Sample the table *src* into the run directory *dest* (see the module
    docstring); returns the run's manifest."""
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
    log(f"reading {src}", progress=True)
    table = read_table(src)
    fmt = check_format(fmt, table.kind)
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
    composed = [] if materialize else list(udf.composed_names())
    with _space_named(staged), staged as staging:
        entries = [_write_sample(staging, name, table.take(indices[name]), fmt, staged.local)
                   for name in names]
        by_name = {e["name"]: e for e in entries}
        for round_, name in enumerate(composed):
            folds = [names[f] for f in partners(len(names), round_, udf.fold_group())]
            entries.append(_compose(staging, name, [by_name[f] for f in folds], staged.local,
                                    table, indices, fmt))
        manifest = {
            "format": RUN_FORMAT, "kind": TABLE_RUN, "method": udf.name,
            "udf": udf.spec[0], "params": udf.spec[1], "seed": seed,
            "engine": {"runner": "embedded"},
            "input": {"path": src, "format": table.kind, "rows": table.rows,
                      "cols": len(table.columns), "columns": table.columns},
            "output_format": fmt, "samples": entries,
            "elapsed_seconds": round(time.time() - started, 3),
        }
        staged.fs.write_bytes(fsmod.join(staging, MANIFEST), manifest_json(manifest))
    total = sum(e["bytes"] for e in entries if not e.get("composed_of"))
    log(f"wrote {count_words(len(entries), 'sample', 'samples')} ({format_bytes(total)}) in "
        f"{time.time() - started:.1f} s")
    return manifest


def _write_sample(staging, name, rows, fmt, local):
    """Write the sample *name* (*rows*, a table) into *staging*; its
    manifest entry."""
    rel = name + OUTPUT_FORMATS[fmt]
    path = fsmod.join(staging, rel)
    if local:
        _write_local(path, rows, fmt)
        size, sha = _file_digest(path)
    else:
        import io
        buffer = io.BytesIO()
        _write_to(buffer, rows, fmt)
        data = buffer.getvalue()
        fsmod.get_fs(path).write_bytes(path, data)
        size, sha = len(data), "sha256:" + hashlib.sha256(data).hexdigest()
    return {"name": name, "rows": int(rows.shape[0]) if fmt == "npy" else rows.num_rows,
            "files": [{"path": rel, "bytes": size, "sha256": sha}], "bytes": size}


def _write_local(path, rows, fmt):
    if fmt == "npy":
        np.save(path, rows)
        return
    with open(path, "wb") as f:
        _write_to(f, rows, fmt)


def _write_to(f, rows, fmt):
    if fmt == "npy":
        np.save(f, rows)
    elif fmt == "parquet":
        from pyarrow import parquet as pq
        pq.write_table(rows, f, write_page_checksum=True)
    else:
        from pyarrow import csv
        csv.write_csv(rows, f, write_options=csv.WriteOptions(quoting_style="needed"))



def _file_digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            chunk = f.read(4 << 20)
            if not chunk:
                break
            h.update(chunk)
    return os.path.getsize(path), "sha256:" + h.hexdigest()


def _compose(staging, name, folds, local, table, indices, fmt):
    """The composed training set *name*: the files of its *folds*
    (manifest entries), hard-linked into the directory *name* (a local
    run), else written again as one file."""
    rows = sum(f["rows"] for f in folds)
    composed_of = [f["name"] for f in folds]
    if not local:
        ids = np.concatenate([indices[f] for f in composed_of])
        entry = _write_sample(staging, name, table.take(ids), fmt, local)
        return dict(entry, composed_of=composed_of)
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
            data = fs.cat(uri) if not fsmod.is_local(uri) else None
            if data is None:
                size, sha = _file_digest(fsmod.local_path(uri))
            else:
                size, sha = len(data), "sha256:" + hashlib.sha256(data).hexdigest()
            if size != f["bytes"] or sha != f["sha256"]:
                raise InputError(f"damaged sample file {uri}: its "
                                 f"{'size' if size != f['bytes'] else 'content'} does not match "
                                 "the run's manifest; run the command again")
