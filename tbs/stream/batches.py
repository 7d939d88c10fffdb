"""Micro-batches: finding them, checking their metadata, reading one partition.

A batch directory (any fsspec URL; local paths by default) holds entries
``batch-<k>`` with an integer ``k``, written by any producer:

* a Parquet file ``batch-<k>`` or ``batch-<k>.parquet`` -- complete as soon
  as it appears (producers write it under another name and rename it);
* a directory ``batch-<k>/`` of Parquet files (Spark, Hive, dask, ...) --
  complete once it holds ``_SUCCESS`` (Spark, Hadoop) or ``_metadata``
  (fastparquet, dask) and no ``_temporary``; until then it is treated as
  still being written and the run stops before it.  Data files are the
  entries not starting with ``_`` or ``.``, in name order.

Any other entry whose name starts with ``batch-`` (``batch-abc.parquet``,
``batch-3.csv``, ``batch-3.parquet.tmp``) is refused, naming it: a batch
whose name does not parse is never skipped silently.  Other entries are
ignored; a producer writes under a name starting with ``.`` or ``_``.

An item is a row, with all its columns.  Batch ``k`` arrives at time ``k``
unless the producer records another time: the Parquet key-value metadata
entry ``samplegen.time`` (in the footer of the file, or of every data file of
a directory that has it; they must agree), or, for a directory, a text file
``_samplegen_time`` in it.  Times must increase strictly.

Everything the driver needs -- row counts per row group, schema, time -- comes
from the Parquet footers; the data pages are read only by the partition tasks.
Partition ``p`` of a batch is a contiguous range of its rows in (file name,
row group, row) order, computed from the footers alone
(:func:`partition_bounds`): whole row groups when there are at least ``P``.
"""
import math
import re
from dataclasses import dataclass, field

import numpy as np

from samplegen.jobs import fs as fsmod
from samplegen.udfs.errors import InputError

from ..errors import TBSError

BATCH_RE = re.compile(r"^batch-(\d+)(\.parquet)?$")
#: every entry whose name starts with this must be a batch (:data:`BATCH_RE`)
BATCH_PREFIX = "batch-"
TIME_KEY = "samplegen.time"
TIME_FILE = "_samplegen_time"
RESERVED = ("_sg_batch", "_sg_row", "_sg_in_sample")
MAX_ROWS = 1 << 32          # item keys pack (batch, row) into 64 bits
MAX_BATCH = (1 << 31) - 1


@dataclass
class Batch:
    """What the driver knows about batch k (from its listing and footers)."""
    k: int
    name: str
    files: list = field(default_factory=list)       # URLs of the data files, in order
    row_groups: list = field(default_factory=list)  # per file: rows per row group
    size: int = 0
    time: float = 0.0
    schema: list = field(default_factory=list)

    def to_json(self):
        return {"k": self.k, "name": self.name, "files": self.files, "row_groups": self.row_groups,
                "size": self.size, "time": self.time}


def open_fs(url):
    """(fsspec filesystem, root path) of a batch directory URL."""
    try:
        fs, root = fsmod.fsspec_of(url)
    except (ImportError, ValueError, InputError) as exc:
        raise TBSError(f"cannot open batch directory {url}: {exc}") from None
    return fs, root.rstrip("/") or root


def _data_files(fs, path):
    names = []
    for entry in fs.ls(path, detail=True):
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        if name.startswith(("_", ".")) or entry.get("type") == "directory":
            continue
        names.append(name)
    return [f"{path}/{n}" for n in sorted(names)]


def list_batches(url):
    """The batches present: ``(fs, root, {k: (name, is_dir)})``."""
    fs, root = open_fs(url)
    if not fs.isdir(root):
        raise TBSError(f"batch directory {url} does not exist")
    found = {}
    for entry in fs.ls(root, detail=True):
        name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
        m = BATCH_RE.match(name)
        if not m:
            if name.startswith(BATCH_PREFIX):
                raise TBSError(f"{name} in {url} is named like a batch but is not one: batches are "
                               f"batch-<k> or batch-<k>.parquet with an integer k >= 0; rename or "
                               f"remove it (a producer writes a batch under a name starting with "
                               f"'.' or '_' and renames it)")
            continue
        k = int(m.group(1))
        is_dir = entry.get("type") == "directory"
        if is_dir and m.group(2):
            raise TBSError(f"{name} in {url} is a directory named like a file; name it batch-{k}")
        if k in found:
            raise TBSError(f"batch {k} appears twice in {url}: {found[k][0]} and {name}")
        if k > MAX_BATCH:
            raise TBSError(f"batch number must be at most {MAX_BATCH}, got {name}")
        found[k] = (name, is_dir)
    return fs, root, found


def is_complete(fs, root, name, is_dir):
    """Whether a directory batch has been committed by its producer."""
    if not is_dir:
        return True
    names = {e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(f"{root}/{name}", detail=False)}
    return "_temporary" not in names and ("_SUCCESS" in names or "_metadata" in names)


def schema_of(pf):
    """The columns of a Parquet file as comparable JSON: one entry per schema
    element below the root (name, physical type, converted type, logical
    type, repetition with OPTIONAL and REQUIRED treated alike, children)."""
    out = []
    for el in pf.fmd.schema[1:]:
        logical = None if el.logicalType is None else " ".join(repr(el.logicalType).split())
        repeated = el.repetition_type == 2
        out.append([el.name, el.type, el.converted_type, logical, repeated, el.num_children])
    return out


def object_encodings(schema):
    """fastparquet's ``object_encoding`` per top-level byte-array column, so that
    files written from a batch keep the batch's column types."""
    enc = {}
    for name, typ, converted, logical, _repeated, children in schema:
        if typ == 6 and not children:          # BYTE_ARRAY
            if converted == 0 or (logical or "").find("STRING: {}") >= 0:
                enc[name] = "utf8"
            elif converted == 19:
                enc[name] = "json"
            else:
                enc[name] = "bytes"
    return enc


def file_url(fs, path):
    """A URL for ``path`` that any process can open: a plain path for local
    files, ``protocol://path`` otherwise."""
    url = fs.unstrip_protocol(path)
    return url[len("file://"):] if url.startswith("file://") else url


def _footer(fs, path, label):
    import fastparquet
    try:
        if fs.size(path) == 0:
            raise ValueError("empty file")
        return fastparquet.ParquetFile(path, open_with=fs.open)
    except FileNotFoundError:
        raise TBSError(f"{label}: data file {path} is missing") from None
    except Exception as exc:
        raise TBSError(f"{label}: {path} is not a readable Parquet file ({type(exc).__name__}: "
                       f"{str(exc).splitlines()[0] if str(exc) else 'corrupt footer'})") from None


def _parse_time(text, label, where):
    try:
        t = float(text.decode() if isinstance(text, bytes) else text)
    except (ValueError, UnicodeDecodeError):
        raise TBSError(f"{label}: {where} must be a number, got {text!r}") from None
    if not math.isfinite(t):
        raise TBSError(f"{label}: {where} must be finite, got {text!r}")
    return t


def describe(fs, root, k, name, is_dir):
    """Read the footers of batch k: files, row groups, schema, arrival time."""
    label = f"batch {name}"
    path = f"{root}/{name}"
    files = _data_files(fs, path) if is_dir else [path]
    if not files:
        raise TBSError(f"{label}: no Parquet data files in the directory (missing batch data)")
    batch = Batch(k=k, name=name)
    times = {}
    for f in files:
        pf = _footer(fs, f, label)
        schema = schema_of(pf)
        rows = sum(int(rg.num_rows) for rg in pf.row_groups)
        if not batch.schema or (not batch.size and rows):
            batch.schema = schema
        elif rows and schema != batch.schema:
            raise TBSError(f"{label}: data file {f.rsplit('/', 1)[-1]} has another schema than "
                           f"{files[0].rsplit('/', 1)[-1]}")
        batch.row_groups.append([int(rg.num_rows) for rg in pf.row_groups])
        batch.size += rows
        kv = pf.key_value_metadata or {}
        if TIME_KEY in kv:
            times[f] = _parse_time(kv[TIME_KEY], label, f"key-value metadata {TIME_KEY!r}")
        batch.files.append(file_url(fs, f))
    for col in batch.schema:
        if col[0] in RESERVED:
            raise TBSError(f"{label}: column name {col[0]!r} is reserved for samplegen")
    if is_dir and fs.exists(f"{path}/{TIME_FILE}"):
        times[TIME_FILE] = _parse_time(fs.cat_file(f"{path}/{TIME_FILE}").strip(), label, TIME_FILE)
    values = sorted(set(times.values()))
    if len(values) > 1:
        raise TBSError(f"{label}: its files record different arrival times {values}")
    batch.time = values[0] if values else float(k)
    if batch.size >= MAX_ROWS:
        raise TBSError(f"{label}: {batch.size} rows; at most {MAX_ROWS - 1} rows per batch "
                       "are supported")
    return batch


def pending(url, after, last_time, schema, limit=None):
    """The batches to process after batch ``after`` (None: a new STATE).

    Returns ``(batches, note)``: complete batches in order, and a note when
    the run stops before a batch that is still being written.  Raises
    TBSError for a gap in k, a schema other than ``schema`` (or than the
    first non-empty batch's), a time that does not increase, or unreadable
    metadata.  (A batch or file without rows is not compared: writers cannot
    always tell the type of an empty text column.)
    """
    fs, root, found = list_batches(url)
    ks = sorted(k for k in found if after is None or k > after)
    if after is not None and ks and ks[0] != after + 1:
        raise TBSError(f"batch-{after + 1} is missing in {url}: the next batch present is "
                       f"{found[ks[0]][0]} (a gap in k)")
    out, note = [], None
    prev_time = last_time
    for i, k in enumerate(ks):
        if i and k != ks[i - 1] + 1:
            raise TBSError(f"batch-{ks[i - 1] + 1} is missing in {url}: found {found[k][0]} after "
                           f"{found[ks[i - 1]][0]} (a gap in k)")
        name, is_dir = found[k]
        if not is_complete(fs, root, name, is_dir):
            note = (f"{name} has no _SUCCESS or _metadata yet (or still has _temporary): "
                    f"treated as being written; stopping before it")
            # the later batches must still be well-formed: check them, but do not process them
            for k2 in ks[i + 1:]:
                if is_complete(fs, root, *found[k2]):
                    describe(fs, root, k2, *found[k2])
            break
        if limit is not None and len(out) >= limit:
            break
        b = describe(fs, root, k, name, is_dir)
        if not b.size:
            # no rows: its column types (e.g. of empty text columns) do not matter
            pass
        elif schema is None:
            schema = b.schema
        elif b.schema != schema:
            raise TBSError(f"batch {name}: its schema differs from the first batch's "
                           f"(columns {[c[0] for c in b.schema]} vs {[c[0] for c in schema]}, "
                           "or their types)")
        if prev_time is not None and not b.time > prev_time:
            raise TBSError(f"batch {name}: arrival time {b.time!r} does not come after "
                           f"{prev_time!r} (times must increase from batch to batch)")
        prev_time = b.time
        out.append(b)
    return out, note


def partition_bounds(row_groups, partitions):
    """[lo, hi) of each partition of a batch, from its row groups (rows per row
    group, per file).

    With at least one row group per partition, every boundary is the start of
    a row group (the one nearest to ``p * size / P``), so each task reads
    whole row groups of its own; with fewer row groups, the rows are split
    evenly ([p size // P, (p + 1) size // P)) and tasks share row groups."""
    sizes = [int(g) for groups in row_groups for g in groups]
    total = sum(sizes)
    if len(sizes) < partitions or not total:
        cuts = [p * total // partitions for p in range(partitions + 1)]
    else:
        starts = np.concatenate([[0], np.cumsum(sizes)])
        cuts = [0]
        for p in range(1, partitions):
            target = p * total / partitions
            i = int(np.searchsorted(starts, target))
            closer = i < starts.size and (i == 0 or starts[i] - target < target - starts[i - 1])
            nearest = starts[i] if closer else starts[i - 1]
            cuts.append(max(cuts[-1], int(nearest)))
        cuts.append(total)
    return [(cuts[p], cuts[p + 1]) for p in range(partitions)]


def _open(url):
    import fastparquet
    if "://" in url and not url.startswith("file://"):
        fs, path = open_fs(url)
        return fastparquet.ParquetFile(path, open_with=fs.open)
    return fastparquet.ParquetFile(url[len("file://"):] if url.startswith("file://") else url)


def read_rows(files, row_groups, lo, hi, label="batch"):
    """Rows [lo, hi) of the concatenation of ``files`` as one DataFrame
    (reads only the row groups that overlap the range)."""
    import pandas as pd
    if lo >= hi:
        try:
            return _open(files[0])[0:0].to_pandas(index=False)
        except Exception as exc:
            raise TBSError(f"{label}: cannot read {files[0]} "
                           f"({type(exc).__name__}: {exc})") from None
    frames = []
    offset = 0
    for url, groups in zip(files, row_groups):
        file_rows = sum(groups)
        if offset + file_rows <= lo or offset >= hi or not file_rows:
            offset += file_rows
            continue
        try:
            pf = _open(url)
            starts = [offset]
            for g in groups:
                starts.append(starts[-1] + g)
            first = next(i for i in range(len(groups)) if starts[i + 1] > lo)
            last = max(i for i in range(len(groups)) if starts[i] < hi)
            df = pf[first:last + 1].to_pandas(index=False)
        except TBSError:
            raise
        except Exception as exc:
            raise TBSError(f"{label}: cannot read {url} ({type(exc).__name__}: {exc})") from None
        a = max(lo, starts[first]) - starts[first]
        b = min(hi, starts[last + 1]) - starts[first]
        if len(df) != starts[last + 1] - starts[first]:
            raise TBSError(f"{label}: {url} has {len(df)} rows in row groups {first}-{last}, "
                           f"its footer says {starts[last + 1] - starts[first]}")
        frames.append(df.iloc[a:b] if (a, b) != (0, len(df)) else df)
        offset += file_rows
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    return pd.concat(frames, ignore_index=True)
