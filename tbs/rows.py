"""A time-biased sample of a stream of rows: pandas DataFrames, Arrow tables
or numpy arrays as batches, kept by any sampler of this package.

:class:`StreamSample` numbers the rows it is given (row ids in arrival order,
so a row's batch and arrival time are known) and runs the sampler on those
ids; it keeps the rows the sampler still stores and nothing else.  What it
adds to a bare sampler:

* batches of any table type, returned in the same type by :meth:`sample`;
* ``sample(with_probabilities=True)``: each row's inclusion probability (the
  sampler's guarantee, :meth:`Sampler.inclusion_probabilities`) and age;
* ``remove(keys)``: erasure by the values of a key column, matched by value
  (never cast to the column's type);
* ``merge`` of two stream samples (where the sampler supports it), refused
  between a sample and any copy of itself or of a part of it (each sample
  carries an identity);
* ``save`` / ``load`` of the sampler's state and the rows (Parquet for
  tables, so object and string columns survive), every file checksummed and
  verified on load.

pandas is needed for DataFrames and pyarrow for Arrow tables; neither is
imported before a batch of that type is seen.
"""
import ctypes
import errno
import hashlib
import io
import json
import math
import numbers
import os
import shutil
import uuid

import numpy as np

from .base import Sampler, batch_time, dtype_from_json, dtype_to_json
from .errors import TBSError, TBSInputError, TBSOutputError, TBSParameterError

__all__ = ["StreamSample", "StratifiedStreamSample", "PROBABILITY", "AGE"]

PROBABILITY = "inclusion_probability"   # columns added by sample(with_probabilities=True)
AGE = "age"
_FORMAT = "samplegen-stream-sample/2"   # files checksummed, an identity
_FORMAT_1 = "samplegen-stream-sample/1"  # no checksums, no identity: still read
MANIFEST = "stream-sample.json"
_SAMPLER_FILE = "sampler.npz"
_IDS_FILE = "rows.npz"
_ROWS_FILE = {"numpy": "rows.npy", "pandas": "rows.parquet", "arrow": "rows.parquet"}


def _kind_of(batch):
    if isinstance(batch, np.ndarray):
        return "numpy"
    module = type(batch).__module__
    if module.startswith("pandas") and type(batch).__name__ == "DataFrame":
        return "pandas"
    if module.startswith("pyarrow") and type(batch).__name__ in ("Table", "RecordBatch"):
        return "arrow"
    raise TBSParameterError("a batch must be a pandas DataFrame, an Arrow table or a 1-D numpy "
                            f"array, got {type(batch).__name__}")


def _names_of(kind, batch):
    """The column names of a batch (numpy: the record fields, () for plain
    arrays)."""
    if kind == "pandas":
        return [str(c) for c in batch.columns]
    if kind == "arrow":
        return list(batch.schema.names)
    return tuple(batch.dtype.names or ())


def _same_names(kind, a, b):
    # DataFrames are put together by column name, Arrow tables by position.
    return sorted(a) == sorted(b) if kind == "pandas" else list(a) == list(b)


class _Rows:
    """Rows of one table type with their row ids (ascending)."""

    def __init__(self, kind, schema):
        self.kind = kind
        self.schema = schema          # numpy dtype / pandas column->dtype / Arrow schema
        self.ids = np.empty(0, dtype=np.int64)
        self.parts = []               # tables appended since the last compaction
        self.table = None

    def __len__(self):
        return int(self.ids.size)

    def append(self, ids, rows):
        self.ids = np.concatenate([self.ids, ids])
        self.parts.append(rows)

    def _compact(self):
        if self.parts:
            tables = ([] if self.table is None else [self.table]) + self.parts
            self.table = _concat(self.kind, tables)
            self.parts = []
        return self.table

    def take(self, positions):
        table = self._compact()
        if self.kind == "pandas":
            return table.iloc[positions].reset_index(drop=True)
        if self.kind == "arrow":
            return table.take(positions)
        return table[positions]

    def keep(self, mask):
        if mask.all():
            return
        positions = np.flatnonzero(mask)
        self.table = self.take(positions)
        self.ids = self.ids[positions]

    def key_values(self, name):
        """The key column as a numpy array, and which of its values are
        present (None: all); exact values, never converted to floats."""
        table = self._compact()
        if self.kind == "pandas":
            column = table[name]
            numpy_dtype = getattr(column.dtype, "numpy_dtype", None)
            if getattr(numpy_dtype, "kind", None) in ("b", "i", "u", "f"):
                # nullable integers, floats, booleans: the values and the mask apart
                valid = ~column.isna().to_numpy()
                return column.to_numpy(dtype=numpy_dtype, na_value=numpy_dtype.type(0)), valid
            return column.to_numpy(), None
        if self.kind == "arrow":
            column = table.column(name)
            if column.null_count:
                return np.array(column.to_pylist(), dtype=object), None
            return column.to_numpy(zero_copy_only=False), None
        return (table if name is None else table[name]), None


def _concat(kind, tables):
    if kind == "pandas":
        import pandas as pd
        return pd.concat(tables, ignore_index=True)
    if kind == "arrow":
        import pyarrow as pa
        return pa.concat_tables(tables)
    return np.concatenate(tables)


def _empty_like(kind, batch):
    if kind == "pandas":
        return batch.iloc[0:0].reset_index(drop=True)
    if kind == "arrow":
        return batch.slice(0, 0)
    return batch[:0]


# -- matching keys by value ------------------------------------------------------------------
def _key_list(keys):
    """The erasure request as a list of values (TBSParameterError for a
    single value or a non-iterable)."""
    if isinstance(keys, (str, bytes)) or getattr(keys, "ndim", 1) == 0:
        raise TBSParameterError(f"keys must be a list of key values, got {keys!r}: pass "
                                f"[{keys!r}] to erase one key")
    if hasattr(keys, "to_pylist"):          # Arrow arrays
        return keys.to_pylist()
    try:
        return list(keys)
    except TypeError:
        raise TBSParameterError(f"keys must be a list of key values, got "
                                f"{type(keys).__name__}") from None


def _missing(value):
    """None, NaN, pandas' NA and NaT: a value that equals nothing."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(value, (float, np.floating)):
        return math.isnan(value)
    if isinstance(value, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(value))
    return False


def _tag(value):
    """A hashable form of a value under which equal values meet: numbers of
    equal value (2 and 2.0) match, a number never matches a string, bytes or
    a boolean.  None for a missing value."""
    if _missing(value):
        return None
    if isinstance(value, (bool, np.bool_)):
        return ("bool", bool(value))
    if isinstance(value, np.generic) and not isinstance(value, (np.datetime64,
                                                                np.timedelta64)):
        value = value.item()
    if isinstance(value, numbers.Number):
        return ("number", value)
    if isinstance(value, str):
        return ("str", str(value))
    if isinstance(value, bytes):
        return ("bytes", bytes(value))
    return ("other", value)


def _exact_in(wanted, dtype):
    """Those of ``wanted`` (numpy scalars or values) that ``dtype`` holds
    exactly, as an array of ``dtype``: a value that would change in the
    conversion is equal to no value of the column."""
    kept = []
    for value in wanted:
        try:
            with np.errstate(all="ignore"):
                converted = np.array(value).astype(dtype)
                back = converted.astype(np.asarray(value).dtype)
        except (TypeError, ValueError, OverflowError):
            continue
        if bool(back == np.asarray(value)):
            kept.append(converted)
    return np.array(kept, dtype=dtype)


def _matches(values, valid, keys):
    """Which of ``values`` (the key column) equal one of ``keys``, by value:
    never a conversion of a key to the column's type."""
    tags = []
    for k in keys:
        try:
            tag = _tag(k)
            hash(tag)
        except TypeError:
            raise TBSParameterError(f"keys must be values of the key column, got the "
                                    f"unhashable {k!r}") from None
        if tag is not None:
            tags.append(tag)
    hit = np.zeros(len(values), dtype=bool)
    if not tags:
        return hit
    kind = values.dtype.kind
    if kind in "biuf":
        numbers_ = [v for t, v in tags if t == "number" and isinstance(v, numbers.Real)]
        if kind == "b":
            wanted = np.array([v for t, v in tags if t == "bool"], dtype=bool)
        elif kind in "iu":
            # a number equal to an integer is that integer (2.0 is 2); 2.9 is none
            info = np.iinfo(values.dtype)
            wanted = np.array([int(v) for v in numbers_ if _integral(v)
                               and info.min <= v <= info.max], dtype=values.dtype)
        else:
            # compared as float64, into which every float column converts exactly
            wanted = np.array([float(v) for v in numbers_ if _float_exact(v)], dtype=np.float64)
        hit = np.isin(values, wanted)
    elif kind in "US":
        kind_tag = "str" if kind == "U" else "bytes"
        hit = np.isin(values, np.array([v for t, v in tags if t == kind_tag], dtype=values.dtype
                                       .kind))
    elif kind in "Mm":
        wanted = []
        for t, v in tags:
            if hasattr(v, "to_datetime64") or hasattr(v, "to_timedelta64"):
                if getattr(v, "tzinfo", None) is not None:
                    continue                 # an aware time is not a naive column's value
                v = v.to_datetime64() if hasattr(v, "to_datetime64") else v.to_timedelta64()
            elif t == "other" and not isinstance(v, (np.datetime64, np.timedelta64)):
                import datetime
                if isinstance(v, datetime.datetime) and v.tzinfo is None and kind == "M" \
                        or isinstance(v, datetime.timedelta) and kind == "m":
                    v = np.datetime64(v, "us") if kind == "M" else np.timedelta64(v, "us")
                else:
                    continue
            if isinstance(v, np.datetime64 if kind == "M" else np.timedelta64):
                wanted.append(v)
        hit = np.isin(values, _exact_in(wanted, values.dtype)) if wanted else hit
    else:                                   # objects, records: one value at a time
        wanted = set(tags)
        items = values.tolist() if kind == "V" else values
        hit = np.fromiter((_tag_or_none(v) in wanted for v in items), dtype=bool,
                          count=len(values))
    if valid is not None:
        hit &= valid
    return hit


def _integral(value):
    try:
        return value == math.floor(value)
    except (OverflowError, ValueError):     # inf, NaN
        return False


def _float_exact(value):
    try:
        return float(value) == value
    except OverflowError:
        return False


def _tag_or_none(value):
    try:
        tag = _tag(value)
        hash(tag)
        return tag
    except TypeError:                       # an unhashable value is no key
        return None


# -- files ----------------------------------------------------------------------------------
def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _manifest_digest(info):
    """The manifest's own checksum: of its canonical JSON without the checksum."""
    body = {k: v for k, v in info.items() if k != "sha256"}
    return _sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


def _npz_bytes(arrays):
    out = io.BytesIO()
    np.savez(out, **arrays)
    return out.getvalue()


def _npy_bytes(array):
    out = io.BytesIO()
    np.save(out, array, allow_pickle=False)
    return out.getvalue()


_renameat2 = None


def _exchange(a, b):
    """Swap the directories ``a`` and ``b`` in one step (Linux
    ``renameat2(RENAME_EXCHANGE)``): False where that is not available."""
    global _renameat2
    if _renameat2 is None:
        try:
            _renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
            _renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                   ctypes.c_uint]
        except (OSError, AttributeError):
            _renameat2 = False
    if _renameat2 is False:
        return False
    at_fdcwd, rename_exchange = -100, 2
    if _renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b)


def _replaceable(path):
    """Why ``save`` may not replace what is at ``path`` (None: it may: nothing,
    an empty directory or a saved stream sample)."""
    if not os.path.lexists(path):
        return None
    if os.path.islink(path):
        return "it is a symbolic link: save to the directory it points to"
    if not os.path.isdir(path):
        return "it is a file, not a directory: choose another path or remove the file"
    try:
        entries = os.listdir(path)
    except OSError as exc:
        return f"it cannot be listed ({exc.strerror})"
    if entries and MANIFEST not in entries:
        return (f"it is a directory that holds no saved stream sample (no {MANIFEST}) and is "
                "not empty: choose another path")
    return None


def _target(path):
    """``path`` for save/load as an absolute path without a trailing slash."""
    try:
        raw = os.fspath(path)
    except TypeError:
        raise TBSParameterError(f"path must be a directory path, got {path!r}") from None
    if isinstance(raw, bytes):
        raw = os.fsdecode(raw)
    if not raw:
        raise TBSParameterError("path must be a directory path, got ''")
    return os.path.abspath(raw)


class StreamSample:
    """A time-biased sample of a stream of rows.

    Parameters
    ----------
    sampler : Sampler
        A fresh sampler of this package (``RTBS``, ``TTBS``, ...); it sees the
        row ids, this object keeps the rows.
    key : str, optional
        The column (or record field) that identifies a row, for
        :meth:`remove`; for plain numpy arrays the items themselves.

    Each stream sample has an identity (a random id made here, kept by
    :meth:`save` and :meth:`load`; a merged sample has its parts'), by which
    :meth:`merge` refuses a sample that shares rows with this one.
    """

    def __init__(self, sampler, key=None):
        if not isinstance(sampler, Sampler):
            raise TBSParameterError(f"sampler must be one of samplegen.tbs's samplers, got "
                                    f"{type(sampler).__name__}")
        if sampler.batches:
            raise TBSParameterError("sampler must be fresh (it has seen "
                                    f"{sampler.batches} batches)")
        if key is not None and not isinstance(key, str):
            raise TBSParameterError(f"key must be a column name, got {key!r}")
        self.sampler = sampler
        self.key = key
        self._identity = frozenset([uuid.uuid4().hex])
        self._kind = None             # the batches' table type, fixed by the first batch
        self._template = None         # an empty batch, until a batch with rows fixes the types
        self._rows = None             # made by the first batch with rows
        self._next = 0
        self._batch_id = np.empty(0, dtype=np.int64)    # first row id of each batch kept
        self._batch_time = np.empty(0, dtype=np.float64)
        self._batch_join = np.empty(0, dtype=np.float64)  # when it was consolidated (NaN)

    # ------------------------------------------------------------------ properties
    @property
    def time(self):
        """Arrival time of the last batch (None before the first)."""
        return self.sampler.time

    @property
    def rows_seen(self):
        """Rows given so far."""
        return self._next

    @property
    def rows_held(self):
        """Rows stored: the sample's and those the sampler may still output."""
        return 0 if self._rows is None else len(self._rows)

    @property
    def identity(self):
        """The ids of the streams whose rows this sample holds (a frozenset of
        strings: one for a sample made by the constructor, the union of its
        parts' for a merged one)."""
        return self._identity

    # ------------------------------------------------------------------ update
    def update(self, batch, time=None):
        """Add a batch (the same type and columns as the first) arriving at
        ``time`` (default: the previous time + 1).  The column types are
        fixed by the first batch with rows: an empty batch fixes only its
        table type and, if it has any, its column names."""
        kind = _kind_of(batch)
        if kind == "arrow" and type(batch).__name__ == "RecordBatch":
            import pyarrow as pa
            batch = pa.Table.from_batches([batch])
        size = len(batch)
        schema = self._check_batch(kind, batch, size)
        ids = np.arange(self._next, self._next + size, dtype=np.int64)
        self.sampler.update(ids, time=time)           # validates time; nothing changed before
        self._kind = kind
        if size:
            if self._rows is None:
                self._rows = _Rows(kind, schema)
                self._template = None
            self._rows.append(ids, batch.reset_index(drop=True) if kind == "pandas" else batch)
            self._batch_id = np.append(self._batch_id, self._next)
            self._batch_time = np.append(self._batch_time, self.sampler.time)
            self._batch_join = np.append(self._batch_join, np.nan)
        elif self._rows is None and (self._template is None
                                     or not _names_of(kind, self._template)):
            self._template = _empty_like(kind, batch)
        self._next += size
        self._note_consolidation()
        self._prune()

    def _fixed_names(self):
        """The column names the stream has (None: not known yet)."""
        if self._rows is not None:
            schema = self._rows.schema
            if self._rows.kind == "pandas":
                return list(schema)
            if self._rows.kind == "arrow":
                return list(schema.names)
            return tuple(schema.names or ())
        if self._template is not None:
            names = _names_of(self._kind, self._template)
            return names if names else None
        return None

    def _check_batch(self, kind, batch, size):
        """The batch's schema (None for an empty batch), or TBSParameterError
        when it does not fit the stream; changes nothing."""
        if kind == "numpy" and (batch.ndim != 1 or batch.dtype == object):
            raise TBSParameterError("a numpy batch must be a 1-D array of ids or records, "
                                    f"got shape {batch.shape}, dtype {batch.dtype}")
        names = _names_of(kind, batch)
        if kind == "pandas" and len(set(names)) != len(names):
            raise TBSParameterError("a DataFrame batch must have distinct string column names")
        if (size or names) and self.key is not None and self.key not in names:
            if kind == "numpy":
                raise TBSParameterError(f"key {self.key!r} is not a field of the records "
                                        f"(dtype {batch.dtype})")
            raise TBSParameterError(f"key column {self.key!r} is not in the batch "
                                    f"(columns: {', '.join(names)})")
        if self._kind is not None and kind != self._kind:
            raise TBSParameterError(f"batches must all be of one type: got {kind} after "
                                    f"{self._kind}")
        if not size and not names:
            return None                   # no rows, no columns: nothing to check or fix
        fixed = self._fixed_names()
        if fixed is not None and not _same_names(kind, names, fixed):
            raise TBSParameterError(f"batch columns {_describe_names(names)} differ from the "
                                    f"first batch's {_describe_names(fixed)}")
        if not size:
            return None                   # an empty batch's types say nothing
        if kind == "numpy":
            schema = batch.dtype
        elif kind == "pandas":
            schema = {str(c): str(t) for c, t in batch.dtypes.items()}
        else:
            schema = batch.schema
        rows = self._rows
        if rows is not None:
            same = schema.equals(rows.schema) if kind == "arrow" else schema == rows.schema
            if not same:
                raise TBSParameterError(f"batch columns/types {_describe(kind, schema)} differ "
                                        f"from the first batch's {_describe(kind, rows.schema)}")
        return schema

    def _note_consolidation(self):
        until = getattr(self.sampler, "consolidated_time", None)
        if until is not None:
            newly = np.isnan(self._batch_join) & (self._batch_time <= until)
            self._batch_join[newly] = self.sampler.time

    def _prune(self, force=False):
        """Drop rows the sampler no longer stores (amortized: when the rows
        kept reach twice what it stores)."""
        rows = self._rows
        if rows is None or not len(rows):
            return
        if not force and len(rows) < 2 * self.sampler.footprint + 1024:
            return
        rows.keep(np.isin(rows.ids, self.sampler.held()))
        if len(rows):
            first = np.searchsorted(self._batch_id, rows.ids[0], side="right") - 1
        else:
            first = self._batch_id.size
        self._batch_id = self._batch_id[first:]
        self._batch_time = self._batch_time[first:]
        self._batch_join = self._batch_join[first:]

    # ------------------------------------------------------------------ output
    def sample(self, with_probabilities=False):
        """The current sample as a table of the batches' type (numpy: an array).

        With ``with_probabilities`` each row also gets its inclusion
        probability (the sampler's guarantee) and its age: two columns
        ``inclusion_probability`` and ``age`` for tables, a tuple
        ``(items, probabilities, ages)`` for numpy arrays."""
        if self._rows is None and self._template is None:
            raise TBSError("no batch yet: the sample's columns are not known")
        if self._rows is None:
            table = self._template
            probs = ages = np.empty(0, dtype=np.float64)
        else:
            ids = np.sort(self.sampler.sample())
            table = self._rows.take(np.searchsorted(self._rows.ids, ids))
            if not with_probabilities:
                return table
            batch = np.searchsorted(self._batch_id, ids, side="right") - 1
            ages = self.sampler.time - self._batch_time[batch]
            joined = self._batch_join[batch]
            probs = self.sampler.inclusion_probabilities(ages, joined - self._batch_time[batch])
        if not with_probabilities:
            return table
        kind = self._kind
        if kind == "numpy":
            return table, probs, ages
        names = list(table.columns) if kind == "pandas" else table.schema.names
        clash = [c for c in (PROBABILITY, AGE) if c in names]
        if clash:
            raise TBSError(f"the rows already have a column {clash[0]!r}: rename it to get "
                           "the probabilities")
        if kind == "pandas":
            table = table.assign(**{PROBABILITY: probs, AGE: ages})
        else:
            table = table.append_column(PROBABILITY, _arrow_array(probs))
            table = table.append_column(AGE, _arrow_array(ages))
        return table

    # ------------------------------------------------------------------ erasure
    def remove(self, keys):
        """Erase every stored row whose key (``key`` column; numpy arrays
        without a key: the item itself) equals one of ``keys`` (a list or
        array of values); returns how many rows the sampler stored were
        erased.  Keys are matched by value and never converted to the
        column's type: ``2.0`` erases the key ``2`` (equal numbers), ``2.9``
        and ``'2'`` erase nothing in an integer column, a missing value
        (None, NaN, NA, NaT) erases nothing.  A key that matches no stored row
        is not an error: rows the sampler has already dropped need no
        erasure (nothing of them is kept).  The remaining rows keep their
        inclusion probabilities (see :meth:`Sampler.remove`)."""
        wanted = _key_list(keys)
        if self._rows is None or not len(self._rows):
            return 0
        rows = self._rows
        if rows.kind != "numpy" and self.key is None:
            raise TBSParameterError("remove() needs the key column: StreamSample(sampler, "
                                    "key='...')")
        values, valid = rows.key_values(self.key)
        hit = _matches(values, valid, wanted)
        if not hit.any():
            return 0
        erased = self.sampler.remove(rows.ids[hit])
        rows.keep(~hit)
        return int(erased)

    # ------------------------------------------------------------------ merge
    def merge(self, other):
        """Fold ``other`` (a StreamSample of another stream with the same row
        type) into this one (see :meth:`Sampler.merge`); ``other`` is not
        changed.  Its rows get new row ids after this one's, and this
        sample's identity becomes the union of both.  A sample that shares an
        identity with this one -- itself, a copy of it (saved and loaded,
        updated or not), a part merged into it, a copy of such a part -- is
        refused: its rows would count twice."""
        if not isinstance(other, StreamSample):
            raise TBSParameterError(f"merge needs a StreamSample, got {type(other).__name__}")
        if other is self or self._identity & other._identity:
            raise TBSError("merge needs another stream's sample: this one is the same sample, "
                           "a copy of it or of a part of it (they share an identity), so "
                           "every row would count twice")
        if other._rows is None:
            self._identity = self._identity | other._identity
            return self
        if self._rows is None:
            raise TBSError("merge into a stream sample that has seen no rows: merge the "
                           "other way")
        if other._rows.kind != self._rows.kind or not _same_schema(self._rows, other._rows):
            raise TBSError("merge needs rows of one type and columns")
        shift = self._next
        donor = other.sampler
        donor.shift_items(shift)        # renamed in place for the merge, then back
        try:
            self.sampler.merge(donor)
        finally:
            donor.shift_items(-shift)
        o = other._rows
        o._compact()
        self._rows._compact()
        self._rows.append(o.ids + shift, o.table)
        self._rows._compact()
        order = np.argsort(self._rows.ids, kind="stable")
        self._rows.table = self._rows.take(order)
        self._rows.ids = self._rows.ids[order]
        times = np.concatenate([self._batch_time, other._batch_time])
        ids = np.concatenate([self._batch_id, other._batch_id + shift])
        join = np.concatenate([self._batch_join, other._batch_join])
        self._batch_id, self._batch_time, self._batch_join = ids, times, join
        self._next += other._next
        self._identity = self._identity | other._identity
        self._prune(force=True)
        return self

    # ------------------------------------------------------------------ persistence
    def save(self, path):
        """Write the sampler's state and the stored rows to directory ``path``.

        ``path`` may be missing (it is made, with its parents), an empty
        directory or an earlier saved stream sample, which is replaced as a
        whole: the old or the new copy is at ``path`` at every moment, even
        with saves to one path running at the same time.  Anything else (a
        file, another directory) is refused.  Every file written is listed
        in the manifest ``stream-sample.json`` with its size and SHA-256, and
        the manifest carries its own SHA-256; :meth:`load` verifies them."""
        path = _target(path)
        parent, name = os.path.split(path)
        if not name:
            raise TBSOutputError(f"cannot save to {path}: give a directory to create")
        why = _replaceable(path)
        if why:
            raise TBSOutputError(f"cannot save to {path}: {why}")
        self._prune(force=True)
        arrays, meta = self.sampler.to_state()
        files = {_SAMPLER_FILE: _npz_bytes(arrays)}
        info = {"format": _FORMAT, "identity": sorted(self._identity), "sampler": meta,
                "key": self.key, "next": self._next, "kind": self._kind,
                "typed": self._rows is not None}
        if self._kind is not None:
            rows = self._rows
            ids = np.empty(0, dtype=np.int64) if rows is None else rows.ids
            files[_IDS_FILE] = _npz_bytes({"ids": ids, "batch_id": self._batch_id,
                                           "batch_time": self._batch_time,
                                           "batch_join": self._batch_join})
            if rows is not None:
                table, schema = rows._compact(), rows.schema
            elif self._kind == "pandas":
                table = self._template
                schema = {str(c): str(t) for c, t in table.dtypes.items()}
            else:
                table = self._template
                schema = table.dtype if self._kind == "numpy" else table.schema
            files[_ROWS_FILE[self._kind]] = _rows_bytes(self._kind, table, schema, info)
        info["files"] = {f: {"bytes": len(data), "sha256": _sha256(data)}
                         for f, data in files.items()}
        info["sha256"] = _manifest_digest(info)
        files[MANIFEST] = json.dumps(info, sort_keys=True).encode()
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise TBSOutputError(f"cannot save to {path}: its directory {parent} cannot be "
                                 f"made ({exc.strerror})") from None
        tmp = os.path.join(parent, f".{name}.tmp-{uuid.uuid4().hex[:12]}")
        try:
            os.mkdir(tmp)
        except OSError as exc:
            raise TBSOutputError(f"cannot save to {path}: {exc.strerror}") from None
        try:
            for f, data in files.items():     # the manifest last
                with open(os.path.join(tmp, f), "wb") as fh:
                    fh.write(data)
            _install(tmp, path)
        except OSError as exc:
            raise TBSOutputError(f"cannot save to {path}: {exc.strerror or exc}") from None
        finally:
            if os.path.lexists(tmp):
                shutil.rmtree(tmp, ignore_errors=True)

    @classmethod
    def load(cls, path, sampler_class, decay=None):
        """Read a stream sample written by :meth:`save`; ``path`` is its
        directory, ``sampler_class`` the sampler's class (e.g. ``RTBS``),
        ``decay`` as for :meth:`Sampler.from_state`.  Every file is checked
        against the manifest's sizes and SHA-256 and the rows against the
        sampler's state (the ids it holds are the rows' ids); a missing,
        truncated or damaged file is a :class:`TBSInputError` naming it.  A
        sample saved before checksums were written is checked for that
        consistency only, and gets an identity derived from its files."""
        if not (isinstance(sampler_class, type) and issubclass(sampler_class, Sampler)):
            raise TBSParameterError(f"sampler_class must be one of samplegen.tbs's sampler "
                                    f"classes (e.g. RTBS), got {sampler_class!r}")
        path = _target(path)
        saved = _Saved(path)
        info = saved.info
        meta = info.get("sampler")
        stored = meta.get("class") if isinstance(meta, dict) else None
        if not isinstance(stored, str):
            raise saved.damaged(MANIFEST, f"its sampler state is {meta!r}")
        if stored != sampler_class.__name__:
            raise TBSParameterError(f"{path} holds the sample of a {stored} sampler, not of "
                                    f"{sampler_class.__name__}: load it with that class")
        arrays = saved.npz(_SAMPLER_FILE)
        try:
            sampler = sampler_class.from_state(arrays, info["sampler"], decay=decay)
        except TBSError as exc:
            raise type(exc)(f"{saved.name(_SAMPLER_FILE)}: {exc}") from None
        except Exception as exc:
            raise saved.damaged(_SAMPLER_FILE, f"{type(exc).__name__}: {exc}") from None
        obj = cls.__new__(cls)
        obj.sampler = sampler
        obj.key = saved.field("key", lambda v: v is None or isinstance(v, str))
        obj._next = saved.field("next", lambda v: isinstance(v, int) and v >= 0)
        obj._identity = saved.identity
        obj._kind = saved.field("kind", lambda v: v is None or v in _ROWS_FILE)
        obj._rows = obj._template = None
        obj._batch_id = np.empty(0, dtype=np.int64)
        obj._batch_time = np.empty(0, dtype=np.float64)
        obj._batch_join = np.empty(0, dtype=np.float64)
        held = np.sort(sampler.held())
        if obj._kind is None:
            if held.size:
                raise saved.damaged(MANIFEST, "it lists no rows but the sampler holds some")
            return obj
        z = saved.npz(_IDS_FILE)
        try:
            ids = np.asarray(z["ids"])
            obj._batch_id = np.asarray(z["batch_id"])
            obj._batch_time = np.asarray(z["batch_time"])
            obj._batch_join = np.asarray(z["batch_join"])
        except KeyError as exc:
            raise saved.damaged(_IDS_FILE, f"no array {exc}") from None
        saved.check_ids(ids, held, obj)
        table, schema = saved.rows(obj._kind)
        if len(table) != ids.size:
            raise saved.damaged(_ROWS_FILE[obj._kind], f"it holds {len(table)} rows where "
                                f"{_IDS_FILE} lists {ids.size}")
        if info.get("typed", True) or ids.size:
            rows = _Rows(obj._kind, schema)
            rows.ids, rows.table = ids.astype(np.int64), table
            obj._rows = rows
        else:
            obj._template = table
        return obj


def _install(tmp, path):
    """Put the directory ``tmp`` at ``path`` (nothing there, an empty
    directory or a saved stream sample) in one step; what was there is
    removed.  Raises OSError (TBSOutputError when ``path`` became something
    save may not replace)."""
    try:
        os.rename(tmp, path)              # nothing there, or an empty directory
        return
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
            raise
    if _exchange(tmp, path):
        why = _replaceable(tmp)           # what was at path, checked once it is out of the way
        if why:
            _exchange(tmp, path)
            raise TBSOutputError(f"cannot save to {path}: {why}")
        shutil.rmtree(tmp, ignore_errors=True)
        return
    why = _replaceable(path)              # no exchange on this file system: move it aside
    if why:
        raise TBSOutputError(f"cannot save to {path}: {why}")
    parent, name = os.path.split(path)
    old = os.path.join(parent, f".{name}.old-{uuid.uuid4().hex[:12]}")
    os.rename(path, old)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)


class _Saved:
    """The files of a saved stream sample, each read once and verified."""

    def __init__(self, path):
        self.path = path
        if not os.path.isdir(path):
            what = "does not exist" if not os.path.lexists(path) else "is a file"
            raise TBSInputError(f"{path} {what}: it is not a saved stream sample")
        self._cache = {}
        raw = self._read(MANIFEST, None)
        try:
            info = json.loads(raw.decode())
        except (UnicodeDecodeError, ValueError) as exc:
            raise self.damaged(MANIFEST, f"not valid JSON ({exc})") from None
        if not isinstance(info, dict):
            raise self.damaged(MANIFEST, "not a JSON object")
        fmt = info.get("format")
        if fmt == _FORMAT:
            if info.get("sha256") != _manifest_digest(info):
                raise self.damaged(MANIFEST, "its SHA-256 does not match its content")
            files = info.get("files")
            if not isinstance(files, dict) or not all(
                    isinstance(e, dict) and isinstance(e.get("bytes"), int)
                    and isinstance(e.get("sha256"), str) for e in files.values()):
                raise self.damaged(MANIFEST, "its list of files is malformed")
            self.files = files
            ident = info.get("identity")
            if not isinstance(ident, list) or not ident or \
                    not all(isinstance(i, str) and i for i in ident):
                raise self.damaged(MANIFEST, f"identity {ident!r} is not a list of ids")
            self.identity = frozenset(ident)
        elif fmt == _FORMAT_1:
            self.files = None             # nothing to check the files against
            digest = hashlib.sha256(raw)
            digest.update(self.bytes(_SAMPLER_FILE))
            self.identity = frozenset(["saved-" + digest.hexdigest()[:32]])
        else:
            raise self.damaged(MANIFEST, f"format {fmt!r} is not a saved stream sample's "
                                         f"({_FORMAT!r})")
        self.info = info

    def name(self, file):
        return os.path.join(self.path, file)

    def damaged(self, file, what):
        return TBSInputError(f"{self.name(file)} is damaged: {what}; the saved stream sample "
                             f"{self.path} cannot be used (save it again or restore a copy)")

    def _read(self, file, entry):
        name = self.name(file)
        try:
            with open(name, "rb") as fh:
                data = fh.read()
        except FileNotFoundError:
            raise TBSInputError(f"{name} is missing: the saved stream sample {self.path} is "
                                "incomplete (save it again or restore a copy)") from None
        except OSError as exc:
            raise TBSInputError(f"cannot read {name}: {exc.strerror}") from None
        if entry is not None:
            if len(data) != entry["bytes"]:
                raise self.damaged(file, f"{len(data)} bytes where {entry['bytes']} were "
                                         "written")
            if _sha256(data) != entry["sha256"]:
                raise self.damaged(file, "its SHA-256 does not match the manifest's")
        return data

    def bytes(self, file):
        if file not in self._cache:
            entry = None
            if self.files is not None:
                if file not in self.files:
                    raise self.damaged(MANIFEST, f"it does not list {file}")
                entry = self.files[file]
            self._cache[file] = self._read(file, entry)
        return self._cache[file]

    def npz(self, file):
        data = self.bytes(file)
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except Exception as exc:
            raise self.damaged(file, f"{type(exc).__name__}: {exc}") from None

    def field(self, name, ok):
        value = self.info.get(name)
        if name not in self.info or not ok(value) or isinstance(value, bool):
            raise self.damaged(MANIFEST, f"{name} is {value!r}")
        return value

    def check_ids(self, ids, held, obj):
        """The saved rows' ids are the sampler's, and each row has its batch."""
        bid, btime, bjoin = obj._batch_id, obj._batch_time, obj._batch_join
        shapes_ok = all(a.ndim == 1 for a in (ids, bid, btime, bjoin)) \
            and bid.size == btime.size == bjoin.size \
            and ids.dtype.kind in "iu" and bid.dtype.kind in "iu" \
            and btime.dtype.kind == "f" and bjoin.dtype.kind == "f"
        if not shapes_ok:
            raise self.damaged(_IDS_FILE, "its arrays have the wrong shapes or types")
        if ids.size and (np.any(np.diff(ids) <= 0) or ids[0] < 0 or ids[-1] >= obj._next):
            raise self.damaged(_IDS_FILE, "its row ids are not ascending ids of rows seen")
        if bid.size and (np.any(np.diff(bid) <= 0) or not np.all(np.isfinite(btime))):
            raise self.damaged(_IDS_FILE, "its batches are not in order")
        if ids.size and (not bid.size or ids[0] < bid[0]):
            raise self.damaged(_IDS_FILE, "a row has no batch")
        if held.dtype.kind not in "iu" and held.size:
            raise self.damaged(_SAMPLER_FILE, f"the sampler holds items of dtype {held.dtype}, "
                                              "not row ids")
        if held.size != ids.size or not np.array_equal(held, ids):
            missing = np.setdiff1d(held, ids).size
            extra = np.setdiff1d(ids, held).size
            raise self.damaged(_IDS_FILE, f"its rows are not the sampler's: {missing} row ids "
                                          f"the sampler holds are missing, {extra} are not held")

    def rows(self, kind):
        file = _ROWS_FILE[kind]
        data = self.bytes(file)
        try:
            if kind == "numpy":
                table = np.load(io.BytesIO(data), allow_pickle=False)
                schema = dtype_from_json(self.info["dtype"])
                if table.ndim != 1 or table.dtype != schema:
                    raise ValueError(f"rows of dtype {table.dtype}, shape {table.shape}, not "
                                     f"of dtype {schema}")
                return table, schema
            # One thread: a threaded Arrow read in a process that also has
            # pandas can abort that process at its exit (std::terminate in
            # Arrow's thread pool), after the work is done; a saved sample is
            # small, so the thread pool gains nothing here anyway.
            if kind == "arrow":
                import pyarrow.parquet as pq
                table = pq.read_table(io.BytesIO(data), use_threads=False)
                return table, table.schema
            import pandas as pd
            table = pd.read_parquet(io.BytesIO(data), use_threads=False)
            schema = self.info["columns"]
            if sorted(table.columns) != sorted(schema):
                raise ValueError(f"columns {list(table.columns)}, not {list(schema)}")
            table = table.astype({c: t for c, t in schema.items() if str(table[c].dtype) != t})
            return table, schema
        except Exception as exc:
            raise self.damaged(file, f"{type(exc).__name__}: {exc}") from None


def _describe(kind, schema):
    if kind == "arrow":
        return "{" + ", ".join(f"{f.name}: {f.type}" for f in schema) + "}"
    return str(schema)


def _describe_names(names):
    return "(" + ", ".join(map(str, names)) + ")" if names else "(none)"


def _same_schema(a, b):
    return a.schema.equals(b.schema) if a.kind == "arrow" else a.schema == b.schema


def _arrow_array(values):
    import pyarrow as pa
    return pa.array(values, type=pa.float64())


def _rows_bytes(kind, table, schema, info):
    """The rows as the bytes of their file (numpy: .npy; tables: Parquet);
    what reading them back needs goes into ``info``."""
    if kind == "numpy":
        info["dtype"] = dtype_to_json(schema)
        return _npy_bytes(table)
    out = io.BytesIO()
    if kind == "arrow":
        import pyarrow.parquet as pq
        pq.write_table(table, out)
        return out.getvalue()
    info["columns"] = schema
    try:
        table.to_parquet(out, index=False)
    except Exception as exc:
        raise TBSError(f"the rows cannot be stored as Parquet ({type(exc).__name__}: {exc}); "
                       "give columns Parquet can hold") from None
    return out.getvalue()


class StratifiedStreamSample:
    """One time-biased sample per class (stratum) of a stream of rows, under a
    shared size budget.

    Parameters
    ----------
    make : callable
        ``make(n, seed)`` returns a fresh sampler of size ``n`` for one class,
        e.g. ``lambda n, seed: RTBS(n, Exponential(0.1), seed=seed)``.
    budget : int
        Total sample size.  Each class gets an equal share: with ``c``
        classes, ``budget // c``, one more for the first ``budget % c``
        classes (in order of first appearance).  When a new class appears the
        others are resized down to their new share (``Sampler.resize``), so
        every class's sample is, from then on, that sampler's sample of size
        its share.  ``shares`` (class -> size, summing to at most ``budget``)
        fixes the shares instead; a class not in it is then an error.
    by : str
        The class column (record field for numpy records).  Every row must
        have a class: a batch with a missing label (None, NaN, NA, NaT) is
        refused whole.
    seed : int
        Each class's sampler gets its own seed, derived from ``seed`` and the
        class's order of appearance.
    key : str, optional
        As for :class:`StreamSample`.
    """

    def __init__(self, make, budget, by, seed, *, shares=None, key=None):
        from .errors import check_int
        if not callable(make):
            raise TBSParameterError(f"make must be a callable make(n, seed), got {make!r}")
        self.budget = check_int("budget", budget, 1)
        if not isinstance(by, str):
            raise TBSParameterError(f"by must be a column name, got {by!r}")
        if shares is not None:
            if not isinstance(shares, dict) or not shares:
                raise TBSParameterError("shares must be a dict class -> sample size")
            for c, n in shares.items():
                check_int(f"shares[{c!r}]", n, 1)
                if _tag_or_none(c) is None:
                    raise TBSParameterError(f"shares must name classes, got the class {c!r}: "
                                            "a missing value is no class")
            if sum(shares.values()) > self.budget:
                raise TBSParameterError(f"shares add up to {sum(shares.values())}, more than the "
                                        f"budget {self.budget}")
        if key is not None and not isinstance(key, str):
            raise TBSParameterError(f"key must be a column name, got {key!r}")
        self.make, self.by, self.seed, self.key = make, by, seed, key
        self.shares = None if shares is None else dict(shares)
        self.strata = {}                 # class -> StreamSample, in order of appearance
        self._time = None

    def share(self, count, index):
        """The equal share of the class at position ``index`` among ``count``."""
        return self.budget // count + (1 if index < self.budget % count else 0)

    def _class_seed(self, index):
        words = np.random.SeedSequence([int(self.seed), index]).generate_state(2, np.uint32)
        return int(words[0]) << 32 | int(words[1])

    def update(self, batch, time=None):
        """Add a batch: its rows go to their class's sampler; every class's
        sampler sees the batch time (with no rows if the class has none).  A
        batch that cannot be applied whole (a missing label, a time that
        does not increase, other columns) is refused and changes nothing."""
        kind = _kind_of(batch)
        if kind == "arrow" and type(batch).__name__ == "RecordBatch":
            import pyarrow as pa
            batch = pa.Table.from_batches([batch])
        labels, missing = _labels(kind, batch, self.by)
        if missing:
            raise TBSParameterError(f"class column {self.by!r} has no label in {missing} of the "
                                    f"batch's {len(batch)} rows (None, NaN, NA or NaT): give "
                                    "every row a class, or drop those rows, before update")
        t = batch_time(self._time, time)
        try:
            found = list(dict.fromkeys(labels.tolist()))
        except TypeError:
            raise TBSParameterError(f"class column {self.by!r} must hold hashable labels "
                                    "(strings, numbers, ...)") from None
        new = [c for c in found if c not in self.strata]
        if self.shares is not None:
            unknown = [c for c in new if c not in self.shares]
            if unknown:
                raise TBSParameterError(f"class {unknown[0]!r} has no share (shares: "
                                        f"{', '.join(map(repr, self.shares))})")
        count = len(self.strata) + len(new)
        if count > self.budget:
            raise TBSError(f"{count} classes cannot share a budget of {self.budget}")
        made = {}
        for c in new:
            index = len(self.strata) + len(made)
            n = self.shares[c] if self.shares is not None else self.share(count, index)
            made[c] = StreamSample(self.make(n, self._class_seed(index)), key=self.key)
        for sample in list(self.strata.values()) + list(made.values()):
            sample._check_batch(kind, batch, len(batch))      # changes nothing
        if new and self.shares is None:
            for i, sample in enumerate(self.strata.values()):
                sample.sampler.resize(self.share(count, i))
        self.strata.update(made)
        for c, sample in self.strata.items():
            sample.update(_subset(kind, batch, labels == c), time=t)
        self._time = float(t)

    def sizes(self):
        """Each class's sample size now (class -> int)."""
        return {c: int(s.sampler.sample().size) for c, s in self.strata.items()}

    def sample(self, with_probabilities=False):
        """All classes' samples, one table (classes in order of appearance)."""
        if not self.strata:
            raise TBSError("no batch yet: the sample's columns are not known")
        parts = [s.sample(with_probabilities) for s in self.strata.values()]
        if isinstance(parts[0], tuple):
            return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))
        return _concat(next(iter(self.strata.values()))._kind, parts)

    def remove(self, keys):
        """Erase rows by key in every class (see :meth:`StreamSample.remove`)."""
        return sum(s.remove(keys) for s in self.strata.values())


def _labels(kind, batch, name):
    """The class column of a batch as a numpy array, and how many of its
    rows have no label (None, NaN, pandas' NA, NaT)."""
    if kind == "pandas":
        if name not in batch.columns:
            raise TBSParameterError(f"class column {name!r} is not in the batch")
        column = batch[name]
        return column.to_numpy(), int(column.isna().sum())
    if kind == "arrow":
        if name not in batch.schema.names:
            raise TBSParameterError(f"class column {name!r} is not in the batch")
        import pyarrow.compute as pc
        column = batch.column(name)
        missing = pc.sum(pc.is_null(column, nan_is_null=True)).as_py() or 0
        return column.to_numpy(zero_copy_only=False), int(missing)
    if batch.dtype.names is None or name not in batch.dtype.names:
        raise TBSParameterError(f"class field {name!r} is not in the records")
    labels = batch[name]
    if labels.dtype.kind in "fc":
        missing = np.count_nonzero(np.isnan(labels))
    elif labels.dtype.kind in "Mm":
        missing = np.count_nonzero(np.isnat(labels))
    else:
        missing = 0
    return labels, int(missing)


def _subset(kind, batch, mask):
    if kind == "pandas":
        return batch[mask]
    if kind == "arrow":
        import pyarrow as pa
        return batch.filter(pa.array(mask))
    return batch[mask]
