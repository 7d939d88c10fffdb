"""A time-biased sample of a stream of rows: pandas DataFrames, Arrow tables
or numpy arrays as batches, kept by any sampler of this package.

:class:`StreamSample` numbers the rows it is given (row ids in arrival order,
so a row's batch and arrival time are known) and runs the sampler on those
ids; it keeps the rows the sampler still stores and nothing else.  What it
adds to a bare sampler:

* batches of any table type, returned in the same type by :meth:`sample`;
* ``sample(with_probabilities=True)``: each row's inclusion probability (the
  sampler's guarantee, :meth:`Sampler.inclusion_probabilities`) and age;
* ``remove(keys)``: erasure by the values of a key column;
* ``merge`` of two stream samples (where the sampler supports it);
* ``save`` / ``load`` of the sampler's state and the rows (Parquet for
  tables, so object and string columns survive).

pandas is needed for DataFrames and pyarrow for Arrow tables; neither is
imported before a batch of that type is seen.
"""
import json
import os
import shutil
import uuid

import numpy as np

from .base import Sampler, dtype_from_json, dtype_to_json
from .errors import TBSError, TBSParameterError

__all__ = ["StreamSample", "StratifiedStreamSample", "PROBABILITY", "AGE"]

PROBABILITY = "inclusion_probability"   # columns added by sample(with_probabilities=True)
AGE = "age"
_FORMAT = "samplegen-stream-sample/1"


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

    def column(self, name):
        table = self._compact()
        if self.kind == "pandas":
            return table[name].to_numpy()
        if self.kind == "arrow":
            return table.column(name).to_numpy(zero_copy_only=False)
        return table if name is None else table[name]


def _concat(kind, tables):
    if kind == "pandas":
        import pandas as pd
        return pd.concat(tables, ignore_index=True)
    if kind == "arrow":
        import pyarrow as pa
        return pa.concat_tables(tables)
    return np.concatenate(tables)


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
        self._rows = None
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

    # ------------------------------------------------------------------ update
    def update(self, batch, time=None):
        """Add a batch (the same type and columns as the first) arriving at
        ``time`` (default: the previous time + 1)."""
        kind = _kind_of(batch)
        if kind == "arrow" and type(batch).__name__ == "RecordBatch":
            import pyarrow as pa
            batch = pa.Table.from_batches([batch])
        schema = self._check_batch(kind, batch)
        size = len(batch)
        ids = np.arange(self._next, self._next + size, dtype=np.int64)
        self.sampler.update(ids, time=time)           # validates time; nothing changed before
        if self._rows is None:
            self._rows = _Rows(kind, schema)
        self._rows.append(ids, batch.reset_index(drop=True) if kind == "pandas" else batch)
        if size:
            self._batch_id = np.append(self._batch_id, self._next)
            self._batch_time = np.append(self._batch_time, self.sampler.time)
            self._batch_join = np.append(self._batch_join, np.nan)
        self._next += size
        self._note_consolidation()
        self._prune()

    def _check_batch(self, kind, batch):
        if kind == "numpy":
            if batch.ndim != 1 or batch.dtype == object:
                raise TBSParameterError("a numpy batch must be a 1-D array of ids or records, "
                                        f"got shape {batch.shape}, dtype {batch.dtype}")
            schema = batch.dtype
            if self.key is not None and (schema.names is None or self.key not in schema.names):
                raise TBSParameterError(f"key {self.key!r} is not a field of the records "
                                        f"(dtype {schema})")
        elif kind == "pandas":
            schema = {str(c): str(t) for c, t in batch.dtypes.items()}
            if len(schema) != batch.shape[1]:
                raise TBSParameterError("a DataFrame batch must have distinct string column "
                                        "names")
            if self.key is not None and self.key not in schema:
                raise TBSParameterError(f"key column {self.key!r} is not in the batch "
                                        f"(columns: {', '.join(schema)})")
        else:
            schema = batch.schema
            if self.key is not None and self.key not in schema.names:
                raise TBSParameterError(f"key column {self.key!r} is not in the batch "
                                        f"(columns: {', '.join(schema.names)})")
        if self._rows is not None:
            rows = self._rows
            if kind != rows.kind:
                raise TBSParameterError(f"batches must all be of one type: got {kind} after "
                                        f"{rows.kind}")
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
        if self._rows is None:
            raise TBSError("no batch yet: the sample's columns are not known")
        ids = np.sort(self.sampler.sample())
        table = self._rows.take(np.searchsorted(self._rows.ids, ids))
        if not with_probabilities:
            return table
        batch = np.searchsorted(self._batch_id, ids, side="right") - 1
        ages = self.sampler.time - self._batch_time[batch]
        joined = self._batch_join[batch]
        probs = self.sampler.inclusion_probabilities(ages, joined - self._batch_time[batch])
        kind = self._rows.kind
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
        without a key: the item itself) is one of ``keys``; returns how many
        rows were erased.  The remaining rows keep their inclusion
        probabilities (see :meth:`Sampler.remove`).  Rows not stored any more
        need no erasure: nothing of them is kept."""
        if self._rows is None or not len(self._rows):
            return 0
        rows = self._rows
        if rows.kind != "numpy" and self.key is None:
            raise TBSParameterError("remove() needs the key column: StreamSample(sampler, "
                                    "key='...')")
        values = rows.column(self.key)
        try:
            hit = np.isin(values, np.asarray(keys, dtype=values.dtype if values.dtype != object
                                             else None))
        except (TypeError, ValueError) as exc:
            raise TBSParameterError(f"keys must be values of the key column: {exc}") from None
        if not hit.any():
            return 0
        self.sampler.remove(rows.ids[hit])
        rows.keep(~hit)
        return int(np.count_nonzero(hit))

    # ------------------------------------------------------------------ merge
    def merge(self, other):
        """Fold ``other`` (a StreamSample of another stream with the same row
        type) into this one (see :meth:`Sampler.merge`); ``other`` is not
        changed.  Its rows get new row ids after this one's."""
        if not isinstance(other, StreamSample):
            raise TBSParameterError(f"merge needs a StreamSample, got {type(other).__name__}")
        if other is self:
            raise TBSError("merge needs another stream's sample: merged with itself, every "
                           "row would count twice")
        if other._rows is None:
            return self
        if self._rows is None:
            raise TBSError("merge into a stream sample that has seen no batch: merge the "
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
        self._prune(force=True)
        return self

    # ------------------------------------------------------------------ persistence
    def save(self, path):
        """Write the sampler's state and the stored rows to directory ``path``
        (replaced as a whole: a crash leaves the old or the new copy)."""
        path = os.fspath(path)
        tmp = f"{path}.tmp-{uuid.uuid4().hex[:8]}"
        os.makedirs(tmp)
        try:
            self._prune(force=True)
            arrays, meta = self.sampler.to_state()
            np.savez(os.path.join(tmp, "sampler.npz"), **arrays)
            rows = self._rows
            info = {"format": _FORMAT, "sampler": meta, "key": self.key, "next": self._next,
                    "kind": None if rows is None else rows.kind}
            if rows is not None:
                np.savez(os.path.join(tmp, "rows.npz"), ids=rows.ids, batch_id=self._batch_id,
                         batch_time=self._batch_time, batch_join=self._batch_join)
                table = rows._compact()
                _write_rows(rows.kind, table, rows.schema, os.path.join(tmp, "rows"), info)
            with open(os.path.join(tmp, "stream-sample.json"), "w") as fh:
                json.dump(info, fh)
            old = None
            if os.path.exists(path):
                old = f"{path}.old-{uuid.uuid4().hex[:8]}"
                os.rename(path, old)
            os.rename(tmp, path)
            if old:
                shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, path, sampler_class, decay=None):
        """Read a stream sample written by :meth:`save`; ``sampler_class`` is
        the sampler's class (e.g. ``RTBS``); ``decay`` as for
        :meth:`Sampler.from_state`."""
        path = os.fspath(path)
        try:
            with open(os.path.join(path, "stream-sample.json")) as fh:
                info = json.load(fh)
        except (OSError, ValueError) as exc:
            raise TBSError(f"{path} is not a saved stream sample: {exc}") from None
        if info.get("format") != _FORMAT:
            raise TBSError(f"{path} is not a saved stream sample (format "
                           f"{info.get('format')!r})")
        with np.load(os.path.join(path, "sampler.npz"), allow_pickle=False) as z:
            arrays = {name: z[name] for name in z.files}
        sampler = sampler_class.from_state(arrays, info["sampler"], decay=decay)
        obj = cls.__new__(cls)
        obj.sampler, obj.key, obj._next = sampler, info["key"], int(info["next"])
        obj._rows = None
        obj._batch_id = np.empty(0, dtype=np.int64)
        obj._batch_time = np.empty(0, dtype=np.float64)
        obj._batch_join = np.empty(0, dtype=np.float64)
        if info["kind"] is not None:
            with np.load(os.path.join(path, "rows.npz"), allow_pickle=False) as z:
                ids, obj._batch_id = z["ids"], z["batch_id"]
                obj._batch_time, obj._batch_join = z["batch_time"], z["batch_join"]
            table, schema = _read_rows(info["kind"], os.path.join(path, "rows"), info)
            rows = _Rows(info["kind"], schema)
            rows.ids, rows.table = ids, table
            obj._rows = rows
        return obj


def _describe(kind, schema):
    if kind == "arrow":
        return "{" + ", ".join(f"{f.name}: {f.type}" for f in schema) + "}"
    return str(schema)


def _same_schema(a, b):
    return a.schema.equals(b.schema) if a.kind == "arrow" else a.schema == b.schema


def _arrow_array(values):
    import pyarrow as pa
    return pa.array(values)


def _write_rows(kind, table, schema, base, info):
    if kind == "numpy":
        np.save(base + ".npy", table, allow_pickle=False)
        info["dtype"] = dtype_to_json(schema)
        return
    if kind == "arrow":
        import pyarrow.parquet as pq
        pq.write_table(table, base + ".parquet")
        return
    info["columns"] = schema
    try:
        table.to_parquet(base + ".parquet", index=False)
    except Exception as exc:
        raise TBSError(f"the rows cannot be stored as Parquet ({type(exc).__name__}: {exc}); "
                       "give columns Parquet can hold") from None


def _read_rows(kind, base, info):
    if kind == "numpy":
        table = np.load(base + ".npy", allow_pickle=False)
        return table, dtype_from_json(info["dtype"])
    if kind == "arrow":
        import pyarrow.parquet as pq
        table = pq.read_table(base + ".parquet")
        return table, table.schema
    import pandas as pd
    table = pd.read_parquet(base + ".parquet")
    schema = info["columns"]
    table = table.astype({c: t for c, t in schema.items() if str(table[c].dtype) != t})
    return table, schema


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
        The class column (record field for numpy records).
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
            if sum(shares.values()) > self.budget:
                raise TBSParameterError(f"shares add up to {sum(shares.values())}, more than the "
                                        f"budget {self.budget}")
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
        sampler sees the batch time (with no rows if the class has none)."""
        kind = _kind_of(batch)
        labels = _column(kind, batch, self.by)
        t = (1.0 if self._time is None else self._time + 1.0) if time is None else time
        found = list(dict.fromkeys(labels.tolist()))
        new = [c for c in found if c not in self.strata]
        if self.shares is not None:
            unknown = [c for c in new if c not in self.shares]
            if unknown:
                raise TBSParameterError(f"class {unknown[0]!r} has no share (shares: "
                                        f"{', '.join(map(repr, self.shares))})")
        count = len(self.strata) + len(new)
        if count > self.budget:
            raise TBSError(f"{count} classes cannot share a budget of {self.budget}")
        if new and self.shares is None:
            for i, sample in enumerate(self.strata.values()):
                sample.sampler.resize(self.share(count, i))
        for c in new:
            index = len(self.strata)
            n = self.shares[c] if self.shares is not None else self.share(count, index)
            self.strata[c] = StreamSample(self.make(n, self._class_seed(index)), key=self.key)
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
        return _concat(next(iter(self.strata.values()))._rows.kind, parts)

    def remove(self, keys):
        """Erase rows by key in every class (see :meth:`StreamSample.remove`)."""
        return sum(s.remove(keys) for s in self.strata.values())


def _column(kind, batch, name):
    if kind == "pandas":
        if name not in batch.columns:
            raise TBSParameterError(f"class column {name!r} is not in the batch")
        return batch[name].to_numpy()
    if kind == "arrow":
        if name not in batch.schema.names:
            raise TBSParameterError(f"class column {name!r} is not in the batch")
        return batch.column(name).to_numpy(zero_copy_only=False)
    if batch.dtype.names is None or name not in batch.dtype.names:
        raise TBSParameterError(f"class field {name!r} is not in the records")
    return batch[name]


def _subset(kind, batch, mask):
    if kind == "pandas":
        return batch[mask]
    if kind == "arrow":
        import pyarrow as pa
        return batch.filter(pa.array(mask))
    return batch[mask]
