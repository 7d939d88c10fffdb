"""A time-biased sample of a Spark Structured Streaming query
(``df.writeStream.foreachBatch(sink(STATE, ...))``).  See docs/TBS_JOBS.md,
"Keeping a sample of a Spark Structured Streaming query".

Micro-batch ``batch_id`` of the query is batch ``k = batch_id + 1`` of the
STATE.  Each call stages the micro-batch as one Parquet file
``STAGING/batch-<k>.parquet`` (written under a temporary name and renamed:
whole or absent) and applies it with :func:`.job.run`, whose commit protocol
makes the batch count exactly once: a crash leaves the STATE before or after
the batch, and a rerun redoes an uncommitted batch with the same randomness.
What the sink adds is the link between Spark's batch ids and the STATE's
ledger:

* ``k`` equal to the STATE's last batch: Spark re-runs the last micro-batch
  whose end it had not recorded (a restart from the checkpoint), which the
  STATE already holds -- nothing is applied;
* ``k`` below it, or above it by more than one: the query runs from another
  checkpoint than the one that fed this STATE -- an error, nothing written;
* otherwise the batch is staged and applied.

The staged file is read back and compared with the size and CRC-32 of the
bytes written before it is applied: a staged batch changed or cut meanwhile
is an error naming it, and nothing is applied.  A call holds the lock of
STAGING (``STAGING/_lock``, :class:`.storage.Lock`) from reading the STATE
to deleting the staged file, so a second sink feeding the same STATE through
the same STAGING is refused instead of replacing the staged batch; and a
micro-batch counts as applied only if the STATE's ledger ends with it (its
time and row count), not with a batch another sink applied meanwhile.

After the commit the staged file is deleted, and each call first deletes
whatever an interrupted call left in STAGING, so it holds at most one batch.
"""
import math
import re

from ..errors import TBSError, TBSInputError
from .batches import MAX_BATCH, RESERVED, TIME_KEY
from .job import check_options, check_params, new_params, run
from .materialize import current_sample
from .state import crash_point, load_latest
from .storage import COMMITS, LOCK, Lock, Store, checksum
from .task import ROW_GROUP

#: keyword parameters of :func:`sink` passed on to the job as they are
#: (``rate`` is the job's ``lambda``)
JOB_PARAMS = ("power", "shift", "partitions", "compact_every", "keep_deltas", "mean_batch_size",
              "max_weight", "delta1", "delta2")
STAGING_SUFFIX = ".incoming"
_INTEGRAL = {"byte": "Int8", "short": "Int16", "integer": "Int32", "long": "Int64"}


def _python_names(message):
    """A job message with the command line's option names as the sink's keywords."""
    message = message.replace("--lambda", "rate")
    return re.sub(r"--([a-z][a-z0-9-]*)", lambda m: m.group(1).replace("-", "_"), message)


def _error(exc):
    return TBSError(_python_names(str(exc)))


def sink(state_url, *, algorithm="rtbs", decay="exp", size=None, seed=None, rate=None,
         key=None, time=None, runner="inline", staging=None, options=None, log=None, **params):
    """A ``foreachBatch`` function that applies each micro-batch of a streaming
    query to the D-R-TBS (or D-T-TBS) STATE at ``state_url``, exactly once.

    ``algorithm`` ("rtbs" or "ttbs"), ``decay`` ("exp" or "poly"), ``size``
    (N), ``seed`` and ``rate`` (exp: the decay rate lambda per time unit;
    poly with R-TBS: the consolidation rate) are the parameters of
    ``samplegen tbs run``, as are ``power``, ``shift``, ``partitions``,
    ``compact_every``, ``keep_deltas``, ``mean_batch_size`` (required with
    T-TBS), ``max_weight``, ``delta1``, ``delta2`` given by keyword; they
    are fixed when the STATE is created.
    ``key``: a column name (or a list of them) by which each micro-batch is
    ordered before it is staged, so that the sample does not depend on how
    Spark partitioned the micro-batch (make it unique).  ``time``: the
    arrival time of a micro-batch -- None for ``batch_id + 1``, a column
    name for the batch's largest value of that column (numbers, or
    timestamps as seconds), or a function ``(batch_df, batch_id) -> float``;
    it must be the same when Spark replays the batch.  ``runner``,
    ``options``: as for :func:`.job.run` (``options`` holds
    ``batches_per_job``, ``num_cores``, ``spark_master``, ...).
    ``staging``: where micro-batches are staged (default
    ``<state_url>.incoming``), a directory the job's tasks can read.
    ``log``: a function receiving progress lines.

    Every parameter is checked here, before anything is written, and
    against the STATE if it exists; errors are one-line :class:`TBSError`.
    """
    unknown = sorted(set(params) - set(JOB_PARAMS))
    if unknown:
        raise TBSError(f"unknown parameter {unknown[0]!r} of sink (allowed: algorithm, decay, "
                       f"size, seed, rate, {', '.join(JOB_PARAMS)}, key, time, runner, staging, "
                       "options, log)")
    given = dict(params, algorithm=algorithm, decay=decay, size=size, seed=seed)
    given["lambda"] = rate
    if not isinstance(state_url, str) or not state_url.strip("/"):
        raise TBSError(f"state_url must be a path or URL of a directory, got {state_url!r}")
    options = dict(options or {})
    keys = _check_key(key)
    _check_time(time)
    staging = state_url.rstrip("/") + STAGING_SUFFIX if staging is None else staging
    if not isinstance(staging, str) or staging.rstrip("/") == state_url.rstrip("/"):
        raise TBSError(f"staging must be a directory other than the STATE, got {staging!r}")
    try:
        check_options(runner, given, options)
        store = Store(state_url, fsync=options.get("fsync"))
        commit = _newest(store, state_url)
        if commit is None:
            if algorithm == "ttbs" and params.get("mean_batch_size") is None:
                raise TBSError("mean_batch_size is required with algorithm 'ttbs' (the expected "
                               "rows per micro-batch)")
            new_params(given, [])
        else:
            check_params(commit["params"], given)
    except TBSError as exc:
        raise _error(exc) from None
    return TBSSink(state_url, staging, given, keys, time, runner, options, log)


def _check_key(key):
    if key is None:
        return []
    keys = [key] if isinstance(key, str) else key
    if not isinstance(keys, (list, tuple)) or not keys or \
            not all(isinstance(k, str) and k for k in keys):
        raise TBSError(f"key must be a column name or a list of them, got {key!r}")
    return list(keys)


def _check_time(time):
    if time is None or callable(time) or (isinstance(time, str) and time):
        return
    raise TBSError(f"time must be None (batch_id + 1), a column name or a function "
                   f"(batch_df, batch_id) -> float, got {time!r}")


def _newest(store, state_url):
    """The STATE's newest commit, None when there is no STATE yet."""
    kind = store.kind()
    if kind is None:
        return None
    if kind != "directory":
        raise TBSError(f"STATE {state_url} exists and is not a directory")
    commit = load_latest(store)
    if commit is None and [n for n in store.listdir() if n not in (LOCK, COMMITS)]:
        raise TBSError(f"STATE {state_url} is a non-empty directory without a samplegen tbs "
                       "state")
    return commit


class TBSSink:
    """The callable :func:`sink` returns: ``(batch_df, batch_id)`` -> None."""

    def __init__(self, state_url, staging, given, keys, time, runner, options, log):
        self.state_url = state_url
        self.staging = staging
        self.given = given
        self.keys = keys
        self.time = time
        self.runner = runner
        self.options = options
        self.log = log or (lambda message: None)

    def __repr__(self):
        return f"TBSSink({self.state_url!r})"

    def __call__(self, batch_df, batch_id):
        if isinstance(batch_id, bool) or not isinstance(batch_id, int) or \
                not 0 <= batch_id < MAX_BATCH:
            raise TBSError(f"batch_id must be an integer >= 0 and below {MAX_BATCH}, "
                           f"got {batch_id!r}")
        store = Store(self.state_url, fsync=self.options.get("fsync"))
        staged = Store(self.staging, fsync=store.fsync)
        lock = self._lock(staged)
        try:
            self._apply(batch_df, batch_id, store, staged)
        finally:
            lock.release()

    def _lock(self, staged):
        """The lock of STAGING: one call at a time stages and applies."""
        if staged.kind() == "file":
            raise TBSError(f"staging {self.staging} is a file; staging must be a directory "
                           "(give another staging=)")
        staged.makedirs()
        try:
            lock = Lock(staged).acquire()
        except TBSError:
            raise TBSError(f"another sink is applying a micro-batch to STATE {self.state_url} "
                           f"through staging {self.staging} ({_owner(staged)}); two queries "
                           "feeding one STATE are refused: give each query its own STATE (if "
                           f"that sink has died on another host, remove {staged.uri(LOCK)})") \
                from None
        if lock.previous:
            self.log(f"note: took over the staging lock of a sink that ended without releasing "
                     f"it (pid {lock.previous.get('pid')} on {lock.previous.get('host')})")
        return lock

    def _apply(self, batch_df, batch_id, store, staged):
        k = batch_id + 1
        commit = _newest(store, self.state_url)
        last = None if commit is None else commit["last_batch"]
        if last is not None and k <= last:
            if k < last:
                raise TBSError(
                    f"micro-batch {batch_id} is older than the last one STATE "
                    f"{self.state_url} holds ({last - 1}): the query runs from another "
                    "checkpoint than the one that fed this STATE")
            self.log(f"micro-batch {batch_id} is already in STATE {self.state_url}: skipped")
            self._clean(staged, keep=None)
            return
        if last is not None and k != last + 1:
            raise TBSError(
                f"micro-batch {batch_id} does not follow the last one STATE {self.state_url} "
                f"holds ({last - 1}): the query runs from another checkpoint than the one that "
                "fed this STATE")
        for name in batch_df.columns:
            if name in RESERVED:
                raise TBSError(f"micro-batch {batch_id}: column name {name!r} is reserved for "
                               "samplegen")
        for name in self.keys:
            if name not in batch_df.columns:
                raise TBSError(f"key column {name!r} is not a column of the micro-batch "
                               f"(columns: {', '.join(batch_df.columns)})")
        frame = _frame(batch_df, self.keys)
        if not len(frame) and commit is None:
            # nothing to sample and no time origin yet: the next micro-batch
            # becomes the STATE's first (a new STATE starts at any k)
            self.log(f"micro-batch {batch_id} is empty and STATE {self.state_url} has no "
                     "batches yet: skipped")
            return
        t = self._time(batch_df, batch_id, frame, commit)
        if commit is not None and commit["time"] is not None and not t > commit["time"]:
            raise TBSError(f"micro-batch {batch_id}: arrival time {t!r} does not come after "
                           f"{commit['time']!r}, the last batch's (times must increase)")
        name = f"batch-{k}.parquet"
        self._clean(staged, keep=name)
        written = staged.write_bytes(name, _parquet(frame, batch_df, t))
        staged.sync()
        crash_point("sink-staged")
        _verify(staged, name, written, batch_id)
        try:
            done = run(self.staging, self.state_url, self.given, runner=self.runner,
                       options=self.options, log=self.log)
        except TBSError as exc:
            raise _error(exc) from None
        if done["last_batch"] != k:
            raise TBSError(f"micro-batch {batch_id} was staged but not applied (STATE "
                           f"{self.state_url} holds batches up to {done['last_batch']})")
        entry = done["ledger"][-1]
        if (entry[1], entry[2]) != (t, len(frame)):
            raise TBSError(f"micro-batch {batch_id} was not applied: STATE {self.state_url} "
                           f"holds another batch {k} (time {entry[1]!r}, {entry[2]} rows; this "
                           f"one: time {t!r}, {len(frame)} rows), applied meanwhile by another "
                           "sink: two queries feeding one STATE are refused")
        crash_point("sink-applied")
        self._clean(staged, keep=None)

    def _clean(self, staged, keep):
        """Delete everything in STAGING but ``keep``: committed batches, and
        what an interrupted call left (a batch, a temporary file)."""
        for name in staged.listdir():
            if name in (keep, LOCK):
                continue
            if staged.isdir(name):
                staged.remove_tree(name)
            else:
                staged.remove(name)

    def _time(self, batch_df, batch_id, frame, commit):
        if self.time is None:
            t = float(batch_id + 1)
        elif callable(self.time):
            t = self.time(batch_df, batch_id)
            if isinstance(t, bool) or not isinstance(t, (int, float)):
                raise TBSError(f"time function: must return a number for micro-batch {batch_id}, "
                               f"got {t!r}")
            t = float(t)
        elif not len(frame):
            # no rows, no time: the batch comes at the moment of the last one
            # (just after it), so nothing decays and the sample stays as it is
            t = math.nextafter(commit["time"], math.inf)
        else:
            t = _column_time(frame, self.time, batch_id)
        if not math.isfinite(t):
            raise TBSError(f"micro-batch {batch_id}: arrival time must be finite, got {t!r}")
        return t


def _verify(staged, name, written, batch_id):
    """Check that the staged file ``name`` still has the checksum ``written``
    (its size and CRC-32 when it was written): the bytes the job applies are
    the micro-batch's, not a changed or cut copy."""
    where = staged.uri(name)
    try:
        found = checksum(staged.read_bytes(name))
    except FileNotFoundError:
        found = None
    if found == written:
        return
    if found is None:
        problem = "is missing"
    else:
        size, crc = found.split(":")
        short = int(size) < int(written.partition(":")[0])
        problem = (f"{'is truncated' if short else 'does not match what was written'} (it has "
                   f"{size} bytes with CRC-32 {crc}, {written.replace(':', ' bytes with CRC-32 ')}"
                   " were written)")
    raise TBSInputError(f"staged micro-batch {batch_id} {where} {problem}: it changed between "
                        "staging and applying; nothing was applied (a restart of the query "
                        "stages the micro-batch again)")


def _owner(staged):
    """Who holds the lock of STAGING, for the error message."""
    import json
    try:
        info = json.loads(staged.read_bytes(LOCK))
        return f"pid {info['pid']} on {info['host']} since {info['since']}"
    except Exception:
        return "owner unknown"


def _column_time(frame, name, batch_id):
    import pandas as pd
    if name not in frame.columns:
        raise TBSError(f"time column {name!r} is not a column of the micro-batch "
                       f"(columns: {', '.join(map(str, frame.columns))})")
    col = frame[name]
    if pd.api.types.is_datetime64_any_dtype(col.dtype):
        latest = col.max()
        if pd.isna(latest):
            raise TBSError(f"micro-batch {batch_id}: time column {name!r} holds only nulls")
        if latest.tzinfo is None:
            latest = latest.tz_localize("UTC")
        return latest.timestamp()
    if not pd.api.types.is_numeric_dtype(col.dtype) or pd.api.types.is_bool_dtype(col.dtype):
        raise TBSError(f"time column {name!r} must hold numbers or timestamps, "
                       f"its type is {col.dtype}")
    latest = col.max()
    if pd.isna(latest):
        raise TBSError(f"micro-batch {batch_id}: time column {name!r} holds only nulls")
    return float(latest)


def _frame(batch_df, keys):
    """The micro-batch as a pandas DataFrame with the types of its Spark
    schema: integer columns with nulls stay integers (pandas' nullable
    types) instead of becoming floats, so every batch has the same Parquet
    schema; ordered by ``keys`` when given."""
    frame = batch_df.toPandas()
    for field in batch_df.schema.fields:
        kind = field.dataType.typeName()
        col = frame[field.name]
        if kind in _INTEGRAL and col.dtype.kind == "f":
            frame[field.name] = col.astype(_INTEGRAL[kind])
        elif kind == "boolean" and col.dtype == object:
            frame[field.name] = col.astype("boolean")
    if keys:
        frame = frame.sort_values(keys, kind="mergesort")
    return frame.reset_index(drop=True)


def _parquet(frame, batch_df, t):
    """The staged file: one Parquet file of the batch, its time in the
    key-value metadata (what ``samplegen tbs run`` reads)."""
    from .storage import parquet_bytes
    text = {f.name: ("bytes" if f.dataType.typeName() == "binary" else "utf8")
            for f in batch_df.schema.fields if f.dataType.typeName() in ("string", "binary")}
    return parquet_bytes(frame, object_encoding=text or "infer", row_group_offsets=ROW_GROUP,
                         stats=False, custom_metadata={TIME_KEY: repr(t)})


def read_sample(spark, state_url, keys=True):
    """The current sample of a STATE as a Spark DataFrame (``spark``: a
    SparkSession): :func:`.materialize.current_sample` handed to Spark, so
    the sample (N rows) passes through the driver."""
    import pyarrow as pa
    df = current_sample(state_url, keys=keys)
    # through Arrow: the column types survive, also for a sample without rows
    return spark.createDataFrame(pa.Table.from_pandas(df, preserve_index=False))


__all__ = ["sink", "read_sample", "TBSSink"]
