"""The native PySpark engine (``--runner spark``): the three phases on RDDs.

* **local-sampling**: ``textFile`` reads the block lines as bytes;
  ``mapPartitions`` parses each block (values stay base64 text) and emits the
  chunks of :func:`jobs.phases.local_sampling`, keyed ``(sample, v, bin, h)``.
* **block-preparation**: records are partitioned on the group ``(sample, v)``
  (:func:`shuffle`); each reduce task orders its records by the whole key in
  a :class:`SortSpool`.
* **streaming-re-block**: the reduce task walks its groups in order through
  :func:`jobs.phases.reblock` into :func:`jobs.store.write_group` and returns
  the summaries.
* **composition** (k-fold, fold mode): every fold's partial bottom block goes
  to each other round, where the blocks are merged and re-blocked into the
  round's extra matrix, as in ``MRSample.compose_reducer``.

A record is a chunk (an :class:`~jobs.blocks.EncodedBlock`: the rows of one
input block bound for one ``(sample, v)`` in one bin), never a Python object
per row.  With the *id shuffle* (``spark.samplegen.shuffle=ids``, the default
for dense matrices) a chunk carries only its rows' ids and relative
positions, and the reduce task fetches the rows of each re-blocked block from
the input (:mod:`jobs.rowcache`).  Which row lands where depends only on
``(relative position, row id)``, so the output is byte-identical to the other
runners' whatever the number of partitions.

Memory per task (Python worker; the JVM side is Spark's own and spills):

* map: one input block line, the chunks sampled from it, and at most
  min(64 MiB, ``spark.python.worker.memory`` / 4) of chunks waiting to be
  pickled to the JVM (:func:`shuffle`);
* reduce: at most ``spark.python.worker.memory`` (default 512m) of records
  held for ordering, the rest in one local spill file with an index entry
  (48 bytes) per chunk; then, while re-blocking, one shuffle bin
  (``--bin-mib``, 16 MiB by default) and its merged copy, one buffer block
  and the block being written; with the id shuffle, also the input's part
  files, memory-mapped, if they take at most half of
  ``spark.python.worker.memory`` (page cache, shared by the workers).

Settings: ``--spark-master`` (default ``local[*]``), Spark's own
``spark-defaults.conf`` (in ``$SPARK_CONF_DIR``; ``conf/`` has one), and
``--spark-conf KEY=VALUE``, which wins.  Per-run settings, honoured even when
an existing SparkContext is reused: ``spark.samplegen.inputPartitions``,
``spark.samplegen.reducePartitions``, ``spark.samplegen.shuffle`` and
``spark.python.worker.memory``.
"""
import array
import contextlib
import copy
import functools
import hashlib
import itertools
import logging
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import warnings

import numpy as np

from samplegen.udfs.errors import InputError, ParameterError, SamplegenError

from . import fs as fsmod
from .blocks import ENTRY_CHARS, SPARSE, EncodedBlock, parse_encoded, row_chars
from .phases import KEY_ROW_BYTES, Plan, keep_tail, local_sampling, reblock, set_bins
from .rowcache import no_text
from .store import write_group

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
INPUT_PARTITIONS = "spark.samplegen.inputPartitions"
REDUCE_PARTITIONS = "spark.samplegen.reducePartitions"
SHUFFLE = "spark.samplegen.shuffle"
SHUFFLE_MODES = ("ids", "rows")
WORKER_MEMORY = "spark.python.worker.memory"
MAP_BUFFER = 64 << 20      # map side: rows held before pickling them to the JVM
BUCKET_BYTES = 4 << 20     # ... and per reduce partition
REDUCE_BYTES = 128 << 20   # expected output per reduce partition (default count)
#: set on contexts the engine starts: reduce tasks write block files as a side
#: effect, so no speculative copies; the rest can be overridden.
FORCED = {"spark.speculation": "false"}
DEFAULTS = {
    "spark.app.name": "samplegen",
    "spark.ui.showConsoleProgress": "false",
    # Python workers: keep freed memory for reuse instead of returning it to
    # the system (glibc), so the chunks and blocks allocated and freed all the
    # time do not page-fault fresh memory each time (about 10 % of CPU).
    "spark.executorEnv.MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "spark.executorEnv.MALLOC_TRIM_THRESHOLD_": str(1 << 30),
}

SUMMARY, TAIL = "S", "T"


def run_spark(plan, inputs, runner, options):
    """Run the phases on Spark; returns the summaries of every written
    ``(sample, v)`` column of blocks (and of the composed extras)."""
    settings = parse_settings(options.get("spark_conf", ()))
    master = options.get("spark_master")
    with spark_context(master, settings) as sc:
        ship_packages(sc, plan)
        stats = TaskStats(sc)
        try:
            summaries = _run(sc, plan, inputs, settings, stats)
        except Exception as exc:
            failure = _task_failure(exc)
            if failure is exc:
                raise
            raise failure from exc
        callback = options.get("on_task_stats")
        if callback is not None:
            callback(stats.value())
        log.info("spark tasks: %s", stats.value())
        return summaries


# ---------------------------------------------------------------------------
# the job
# ---------------------------------------------------------------------------
def _run(sc, plan, inputs, settings, stats):
    from pyspark import StorageLevel

    source = row_source(sc, settings, plan, inputs)
    if source is not None:
        # bins bound the records a reduce task merges at once: ids, not rows
        plan = copy.copy(plan)
        set_bins(plan, KEY_ROW_BYTES)
    plan_json = plan.to_json()
    nv = plan.n_vblocks()
    budget = _memory_bytes(setting(sc, settings, WORKER_MEMORY, "512m"))
    buffer = min(MAP_BUFFER, budget // 4)
    lines = read_lines(sc, inputs, _count_setting(sc, settings, INPUT_PARTITIONS))
    reducers = _count_setting(sc, settings, REDUCE_PARTITIONS) or \
        default_reducers(plan, sc.defaultParallelism)
    records = lines.mapPartitions(functools.partial(_sample_partition, plan_json, stats,
                                                    source is not None))
    step1 = (shuffle(records, reducers, functools.partial(_group_index, nv), buffer)
             .mapPartitions(functools.partial(_reduce_partition, plan_json, False, budget, stats,
                                              source)))
    try:
        if not plan.composed:
            return [value for _, value in step1.collect()]
        # Fold mode: the tails of step 1 feed the composition step; keep step
        # 1's output so its groups are re-blocked (and written) once.
        step1 = step1.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            rounds = len(plan.composed)
            tails = step1.filter(_is_tail).flatMap(functools.partial(_route_tail, rounds))
            step2 = (shuffle(tails, min(reducers, rounds * nv),
                             functools.partial(_group_index, nv), buffer)
                     .mapPartitions(functools.partial(_reduce_partition, plan_json, True,
                                                      budget, stats, None)))
            out = step1.filter(_is_summary).union(step2).collect()
        finally:
            step1.unpersist()
        return [value for _, value in out]
    finally:
        if source is not None:
            _drop_row_caches(sc, source.token)


def row_source(sc, settings, plan, inputs):
    """The :class:`~jobs.rowcache.RowSource` of an id shuffle, or None for a
    row shuffle (``spark.samplegen.shuffle``: ``ids``, the default for dense
    matrices, or ``rows``; sparse matrices always shuffle rows)."""
    from .rowcache import RowSource

    mode = setting(sc, settings, SHUFFLE, "ids")
    if mode not in SHUFFLE_MODES:
        raise ParameterError(f"{SHUFFLE} must be one of {', '.join(SHUFFLE_MODES)}, got {mode!r}")
    if mode == "rows" or plan.kind != "dense":
        return None
    return RowSource(inputs, plan.rows, plan.cols, plan.block_size, os.urandom(8).hex())


def _drop_row_caches(sc, token):
    """Forget the run's row indexes and remove the executors' copies of
    remote part files (best effort: Spark removes its local directories when
    the application ends)."""
    from .rowcache import drop

    slots = max(2, 2 * sc.defaultParallelism)
    try:
        sc.parallelize(range(slots), slots).foreach(lambda _: drop(token))
    except Exception as exc:  # the samples are written; a leftover cache is not an error
        log.warning("could not remove the row caches of run %s: %s", token, exc)


def default_reducers(plan, parallelism):
    """One reduce partition per ``(sample, v)`` group, but no more than one
    per REDUCE_BYTES of expected output (and at least two per core): small
    runs do not pay for many tiny tasks."""
    if plan.names is None:
        return 2 * parallelism
    groups = len(plan.names) * plan.n_vblocks()
    sampler = plan.sampler()
    rows = sum(sampler.expected_rows(i) for i in range(len(plan.names)))
    expected = rows * (row_chars(plan.cols) + 16 * plan.n_vblocks())
    return max(1, min(groups, max(2 * parallelism, math.ceil(expected / REDUCE_BYTES))))


def shuffle(records, partitions, partition_of, buffer_bytes):
    """``partitionBy`` with map-side buffers bounded in bytes, and records
    travelling as :class:`ChunkFrames`.

    PySpark's own ``partitionBy`` flushes its buckets after a number of
    records (up to 10 per partition, at most 1000), which lets megabyte-sized
    chunks pile up to hundreds of MB; this one sends a bucket once it holds
    BUCKET_BYTES and every bucket once *buffer_bytes* are held, handing the
    JVM ``(partition, frame)`` pairs as ``partitionBy`` does (same PySpark
    plumbing: ``PairwiseRDD``, ``PythonPartitioner``).
    """
    from pyspark import RDD
    from pyspark.serializers import BatchedSerializer, pack_long

    serializer = ChunkFrames()
    bucket_bytes = min(BUCKET_BYTES, buffer_bytes)

    def add_shuffle_key(_, records):
        buckets, sizes, held = {}, {}, 0
        for key, chunk in records:
            p = partition_of(key) % partitions
            buckets.setdefault(p, []).append((key, chunk))
            size = _chunk_bytes(chunk)
            sizes[p] = sizes.get(p, 0) + size
            held += size
            if held >= buffer_bytes:
                flush = list(buckets)
            elif sizes[p] >= bucket_bytes:
                flush = [p]
            else:
                continue
            for q in flush:
                yield pack_long(q)
                yield serializer.dumps(buckets.pop(q))
                held -= sizes.pop(q)
        for q, items in buckets.items():
            yield pack_long(q)
            yield serializer.dumps(items)

    keyed = records.mapPartitionsWithIndex(add_shuffle_key, preservesPartitioning=True)
    keyed._bypass_serializer = True
    jvm = records.ctx._jvm
    pairs = jvm.PairwiseRDD(keyed._jrdd.rdd()).asJavaPairRDD()
    partitioner = jvm.PythonPartitioner(partitions, id(partition_of))
    jrdd = jvm.PythonRDD.valueOfPair(pairs.partitionBy(partitioner))
    return RDD(jrdd, records.ctx, BatchedSerializer(serializer))


def read_lines(sc, inputs, partitions=None):
    """The block lines of the input part files, as bytes."""
    uris = ["file://" + os.path.abspath(fsmod.local_path(u)) if fsmod.is_local(u) else u
            for u in inputs]
    if not any("," in u for u in uris):
        return sc.textFile(",".join(uris), minPartitions=partitions, use_unicode=False)
    each = -(-partitions // len(uris)) if partitions else None
    return sc.union([sc.textFile(u, minPartitions=each, use_unicode=False) for u in uris])


class ChunkFrames:
    """The shuffle's frame format: a bucket of ``(key, chunk)`` records as
    one buffer of fixed-width headers and raw arrays, read back as views into
    the received frame (pickle would copy every array once more on the
    reduce side).  Key ``(sample, v, bin, h)``; the chunk's row ids, relative
    positions, sparse row pointers and base64 text, each padded to 8 bytes.
    It speaks PySpark's framed-serializer protocol (length-prefixed frames)."""

    HEAD = struct.Struct("<9q")   # sample, v, bin, h, kind, rows, cols, units, flags
    IDS, POS, NO_TEXT = 1, 2, 4   # NO_TEXT: rows known by id only (the id shuffle)

    def dumps(self, records):
        pieces = [struct.pack("<q", len(records))]
        for key, chunk in records:
            flags = (self.IDS if chunk.row_ids is not None else 0) | \
                (self.POS if chunk.relpos is not None else 0) | \
                (self.NO_TEXT if chunk.kind != SPARSE and chunk.text.shape[1] == 0 else 0)
            pieces.append(self.HEAD.pack(*key, chunk.kind, chunk.rows, chunk.cols,
                                         chunk.text.shape[0], flags))
            arrays = [(chunk.row_ids if flags & self.IDS else None, "<i8"),
                      (chunk.relpos if flags & self.POS else None, "<u8"),
                      (chunk.indptr, "<i8"), (chunk.text, np.uint8)]
            for array, dtype in arrays:
                if array is not None:
                    raw = np.ascontiguousarray(array, dtype=dtype).reshape(-1).view(np.uint8)
                    pieces.append(memoryview(raw))
                    if raw.size % 8:
                        pieces.append(bytes(8 - raw.size % 8))
        return b"".join(pieces)

    def loads(self, frame):
        view = memoryview(frame)
        (count,), offset = struct.unpack_from("<q", view), 8
        records = []
        for _ in range(count):
            sample, v, bin_, h, kind, rows, cols, units, flags = self.HEAD.unpack_from(view, offset)
            offset += self.HEAD.size
            fields = {}
            for name, present, dtype, n in (("row_ids", flags & self.IDS, "<i8", rows),
                                            ("relpos", flags & self.POS, "<u8", rows),
                                            ("indptr", kind == SPARSE, "<i8", rows + 1)):
                if present:
                    fields[name] = np.frombuffer(view, dtype, n, offset)
                    offset += 8 * n
            width = 0 if flags & self.NO_TEXT else row_chars(cols) if kind != SPARSE \
                else ENTRY_CHARS
            text = np.frombuffer(view, np.uint8, units * width, offset).reshape(units, width)
            offset += -(-units * width // 8) * 8
            records.append(((sample, v, bin_, h), EncodedBlock(kind, rows, cols, text, **fields)))
        return records

    # the rest of PySpark's FramedSerializer protocol (length-prefixed frames)
    def dump_stream(self, iterator, stream):
        from pyspark.serializers import write_int
        for obj in iterator:
            data = self.dumps(obj)
            write_int(len(data), stream)
            stream.write(data)

    def load_stream(self, stream):
        from pyspark.serializers import SpecialLengths, read_int
        while True:
            try:
                length = read_int(stream)
            except EOFError:
                return
            if length == SpecialLengths.END_OF_DATA_SECTION:
                return
            yield self.loads(stream.read(length))


def _group_index(nv, key):
    """Partition of a record: its ``(sample, v)`` group, numbered."""
    return key[0] * nv + key[1]


def _is_tail(record):
    return record[0] == TAIL


def _is_summary(record):
    return record[0] == SUMMARY


def _sample_partition(plan_json, stats, ids_only, lines):
    """Map: local-sampling of every block line of the partition (with
    *ids_only*, the chunks carry row ids and positions, not the rows)."""
    probe = _MemoryProbe()
    plan = Plan.from_json(plan_json)
    for line in lines:
        h, v, block = parse_encoded(line)
        if ids_only:
            block = no_text(block)
        for sample, v2, bin_, h2, chunk in local_sampling(plan, h, v, block):
            yield (sample, v2, bin_, h2), chunk
    stats.add_map(probe.growth())


def _route_tail(rounds, record):
    """Composition: a fold's partial bottom block goes to every other round."""
    _, (fold, v), block = record
    return [((round_, v, 0, fold), block) for round_ in range(rounds) if round_ != fold]


def _reduce_partition(plan_json, compose, budget, stats, source, records):
    """Reduce: order the partition's records by ``(sample, v, bin, h)``
    (a :class:`SortSpool` of *budget* bytes), then re-block and write each
    ``(sample, v)`` group.  With *compose*, the groups are ``(round, v)`` and
    hold fold tails that become the round's extra matrix.  With a *source*
    (id shuffle), each re-blocked block's rows are fetched from it."""
    probe = _MemoryProbe()
    plan = Plan.from_json(plan_json)
    with SortSpool(budget) as spool:
        for key, chunk in records:
            spool.add(key, chunk)
        for (sample, v), group in itertools.groupby(spool.sorted(), key=_group_of):
            blocks = reblock(plan.block_size, ((key[2], chunk) for key, chunk in group))
            if source is not None:
                blocks = source.fetch(v, blocks, budget)
            if compose:
                name, tail = plan.composed[sample], None
            else:
                name, tail = plan.sample_name(sample), [] if plan.composed else None
                if tail is not None:
                    blocks = keep_tail(blocks, plan.block_size, tail)
            yield SUMMARY, write_group(plan.output, name, v, blocks)
            for block in tail or ():
                yield TAIL, (sample, v), block
    stats.add_reduce(probe.growth(), spool.spilled_bytes)


def _group_of(record):
    return record[0][:2]


class SortSpool:
    """A reduce task's records, ordered by key with bounded memory.

    Records stay in memory while their rows take at most *budget* bytes;
    past that the buffer is appended to one local spill file (in
    ``$SPARK_LOCAL_DIRS``) and only the key, offset and length are kept, as
    six integers (48 bytes) per record in an array, not as Python objects.
    :meth:`sorted` yields every record in key order, reading spilled ones back
    one at a time, so what the consumer holds (re-blocking: one bin) bounds
    the rest.  Keys are ``(sample, v, bin, h)``; equal keys keep arrival order.
    """

    FIELDS = 6   # sample, v, bin, h, offset, length
    FRAMES = ChunkFrames()   # the spill file holds one frame per record

    def __init__(self, budget):
        self.budget = budget
        self.held, self.held_bytes = [], 0
        self.index = array.array("q")   # FIELDS per spilled record, in arrival order
        self.file = None
        self.spilled_bytes = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def add(self, key, chunk):
        self.held.append((key, chunk))
        self.held_bytes += _chunk_bytes(chunk)
        if self.held_bytes > self.budget:
            self._spill()

    def _spill(self):
        if self.file is None:
            local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None
            self.file = tempfile.TemporaryFile(prefix="samplegen-spool-", dir=local)
        for key, chunk in self.held:
            frame = self.FRAMES.dumps([(key, chunk)])
            self.file.write(frame)
            length = len(frame)
            self.index.extend((*key, self.spilled_bytes, length))
            self.spilled_bytes += length
        self.held, self.held_bytes = [], 0

    def sorted(self):
        spilled = np.frombuffer(self.index, np.int64).reshape(-1, self.FIELDS)
        held, self.held = self.held, []
        keys = np.concatenate([spilled[:, :4],
                               np.array([key for key, _ in held], np.int64).reshape(-1, 4)])
        # arrival order (spilled records came first) breaks ties: stable
        order = np.lexsort((np.arange(len(keys)), keys[:, 3], keys[:, 2], keys[:, 1], keys[:, 0]))
        if self.file is not None:
            self.file.flush()
        n_spilled = len(spilled)
        for i in order.tolist():
            if i < n_spilled:
                sample, v, bin_, h, offset, length = spilled[i].tolist()
                ((key, chunk),) = self.FRAMES.loads(os.pread(self.file.fileno(), length,
                                                             offset))
                yield key, chunk
            else:
                key, chunk = held[i - n_spilled]
                held[i - n_spilled] = None  # hold nothing already handed on
                yield key, chunk

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None


#: memory of one held record beyond its arrays: the key tuple, the block and
#: its numpy array objects (measured: about 700 bytes)
RECORD_OVERHEAD = 768


def _chunk_bytes(chunk):
    extra = 0 if chunk.indptr is None else chunk.indptr.nbytes
    return chunk.text.nbytes + 16 * chunk.rows + extra + RECORD_OVERHEAD


# ---------------------------------------------------------------------------
# task statistics (memory bound evidence; accumulators, best effort)
# ---------------------------------------------------------------------------
class _MemoryProbe:
    """Peak RSS growth of this worker process since the probe was made
    (Linux: resets the high-water mark through /proc/self/clear_refs)."""

    def __init__(self):
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.start = _status_kib("VmRSS")
        except OSError:
            self.start = None

    def growth(self):
        if self.start is None:
            return 0
        return (_status_kib("VmHWM") - self.start) * 1024


def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


class TaskStats:
    """Largest RSS growth of a map and of a reduce task, bytes the reduce
    tasks' sorts spilled to disk, and the number of tasks of each kind."""

    def __init__(self, sc):
        from pyspark.accumulators import AccumulatorParam

        class Max(AccumulatorParam):
            def zero(self, value):
                return 0

            def addInPlace(self, a, b):
                return max(a, b)

        self.map_peak = sc.accumulator(0, Max())
        self.reduce_peak = sc.accumulator(0, Max())
        self.spilled = sc.accumulator(0)
        self.map_tasks = sc.accumulator(0)
        self.reduce_tasks = sc.accumulator(0)

    def add_map(self, growth):
        self.map_peak.add(growth)
        self.map_tasks.add(1)

    def add_reduce(self, growth, spilled):
        self.reduce_peak.add(growth)
        self.spilled.add(spilled)
        self.reduce_tasks.add(1)

    def value(self):
        return {"map_tasks": self.map_tasks.value, "reduce_tasks": self.reduce_tasks.value,
                "map_peak_rss_growth": self.map_peak.value,
                "reduce_peak_rss_growth": self.reduce_peak.value,
                "sort_spilled_bytes": self.spilled.value}


# ---------------------------------------------------------------------------
# settings and the SparkContext
# ---------------------------------------------------------------------------
def parse_settings(items):
    """``--spark-conf KEY=VALUE`` items as a dict."""
    settings = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"--spark-conf must be KEY=VALUE, got {item!r}")
        settings[key.strip()] = value.strip()
    return settings


def setting(sc, settings, key, default):
    """A per-run setting: ``--spark-conf``, else the context's, else *default*."""
    if key in settings:
        return settings[key]
    value = sc.getConf().get(key)
    return default if value is None else value


def _count_setting(sc, settings, key):
    """A positive integer setting, or None when unset."""
    value = setting(sc, settings, key, None)
    if value is None:
        return None
    try:
        count = int(value)
    except ValueError:
        count = 0
    if count < 1:
        raise ParameterError(f"{key} must be a positive integer, got {value!r}")
    return count


def _memory_bytes(text):
    """A Spark memory size (``512m``, ``2g``; plain numbers are MiB) in bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", str(text).lower())
    if not match:
        raise ParameterError(f"{WORKER_MEMORY} must be a size like 512m or 2g, got {text!r}")
    return int(match.group(1)) << {"k": 10, "": 20, "m": 20, "g": 30, "t": 40}[match.group(2)]


def spark_conf_file():
    """Spark's own ``spark-defaults.conf``: ``$SPARK_CONF_DIR``, else
    ``$SPARK_HOME/conf``."""
    directory = os.environ.get("SPARK_CONF_DIR")
    if not directory and os.environ.get("SPARK_HOME"):
        directory = os.path.join(os.environ["SPARK_HOME"], "conf")
    return os.path.join(directory, "spark-defaults.conf") if directory else None


def read_conf_file(path):
    """Settings of a spark-defaults.conf (``key value``, ``key=value``)."""
    settings = {}
    if not path or not os.path.exists(path):
        return settings
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "!")):
                parts = re.split(r"\s*[=:]\s*|\s+", line, maxsplit=1)
                settings[parts[0]] = parts[1] if len(parts) > 1 else ""
    return settings


def _quiet():
    """Spark's own console output (JVM logs, progress) only with -v."""
    return not log.isEnabledFor(logging.INFO)


def _import_pyspark():
    try:
        import pyspark
    except ImportError as exc:
        raise ParameterError(f"runner 'spark' needs pyspark (pip install "
                             f"'samplegen[spark]'): {exc}") from None
    return pyspark


@contextlib.contextmanager
def spark_context(master=None, settings=None):
    """The active SparkContext if there is one (left running), else a new one
    started with *master* and *settings* (stopped on exit)."""
    pyspark = _import_pyspark()
    active = pyspark.SparkContext._active_spark_context
    if active is not None:
        if master and master != active.master:
            log.warning("reusing the running SparkContext (master %s), not %s",
                        active.master, master)
        yield active
        return
    sc = start_context(master, settings)
    try:
        yield sc
    finally:
        zip_dir = getattr(sc, "_samplegen_zip_dir", None)
        sc.stop()
        if zip_dir:
            shutil.rmtree(zip_dir, ignore_errors=True)


def start_context(master=None, settings=None, quiet=None):
    """Start a SparkContext for samplegen.

    Precedence: *settings* (``--spark-conf``) over Spark's spark-defaults.conf
    (or, under ``spark-submit``, everything it was given) over the engine
    defaults; *master* (``--spark-master``) over all, else ``local[*]``.  In
    local mode the workers run this interpreter unless
    ``spark.pyspark.python`` or ``$PYSPARK_PYTHON`` says otherwise.  With
    *quiet* (default: unless logging is at INFO, i.e. ``-v``), Spark's JVM
    output is discarded.
    """
    pyspark = _import_pyspark()
    from pyspark.java_gateway import launch_gateway

    settings = dict(settings or {})
    quiet = _quiet() if quiet is None else quiet
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM
    with warnings.catch_warnings():  # pyspark's notices about pandas versions
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
        if submitted:
            conf = pyspark.SparkConf()  # what spark-submit was given, files included
            given = dict(conf.getAll())
        else:
            conf = pyspark.SparkConf(loadDefaults=False)
            given = read_conf_file(spark_conf_file())  # spark-submit will read it
        for key, value in DEFAULTS.items():
            if key not in given:
                conf.set(key, value)
        if not quiet and "spark.ui.showConsoleProgress" not in given:
            conf.set("spark.ui.showConsoleProgress", "true")
        for key, value in settings.items():
            conf.set(key, value)
        master = master or settings.get("spark.master") or given.get("spark.master") \
            or DEFAULT_MASTER
        conf.setMaster(master)
        for key, value in FORCED.items():
            conf.set(key, value)
        python = settings.get("spark.pyspark.python") or given.get("spark.pyspark.python") \
            or os.environ.get("PYSPARK_PYTHON")
        if not python and master.startswith("local"):
            python = sys.executable
        saved, jvm_log = os.environ.get("PYSPARK_PYTHON"), None
        try:
            if python:
                os.environ["PYSPARK_PYTHON"] = python
            if submitted:
                sc = pyspark.SparkContext(conf=conf)
            else:
                jvm_log = tempfile.TemporaryFile() if quiet else None  # read on failure
                popen = {"stdout": jvm_log, "stderr": jvm_log} if quiet else None
                gateway = launch_gateway(conf, popen_kwargs=popen)
                sc = pyspark.SparkContext(conf=conf, gateway=gateway)
        except Exception as exc:
            first = _startup_error(jvm_log if not submitted else None) or \
                (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if "master" in first.lower():
                raise ParameterError(f"invalid Spark master {master!r}: {first}") from None
            raise RuntimeError(f"cannot start Spark (master {master}): {first}; run with -v "
                               "for Spark's own log") from None
        finally:
            if saved is None:
                os.environ.pop("PYSPARK_PYTHON", None)
            else:
                os.environ["PYSPARK_PYTHON"] = saved
    if quiet:
        sc.setLogLevel("ERROR")
    return sc


def _startup_error(jvm_log):
    """The JVM's own reason for failing to start (spark-submit's error line)."""
    if jvm_log is None:
        return None
    jvm_log.seek(0)
    text = jvm_log.read().decode(errors="replace")
    for line in text.splitlines():
        if "Exception" in line or line.startswith("Error"):
            return line.split("Exception: ", 1)[-1].strip()
    return None


def ship_packages(sc, plan=None):
    """Ship the project's packages to the executors (``addPyFile``), once per
    context, and the module of a user UDF when it is a single file outside
    them (``--udf mymodule:func`` with mymodule.py in the working directory)."""
    from .package import build_zip

    if getattr(sc, "_samplegen_zip_dir", None) is None:
        directory = tempfile.mkdtemp(prefix="samplegen-spark-")
        path = build_zip(os.path.join(directory, "samplegen.zip"))
        with open(path, "rb") as f:  # a name of its own: spark-submit may ship a samplegen.zip
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
        named = os.path.join(directory, f"samplegen-{digest}.zip")
        os.replace(path, named)
        sc.addPyFile(named)
        sc._samplegen_zip_dir = directory
        sc._samplegen_modules = set()
    module = plan.udf.partition(":")[0] if plan is not None and ":" in plan.udf else None
    if module and "." not in module and module not in sc._samplegen_modules:
        path = getattr(sys.modules.get(module), "__file__", None)
        if path and path.endswith(".py") and "site-packages" not in path:
            sc.addPyFile(path)
            sc._samplegen_modules.add(module)


def _task_failure(exc):
    """A failed Spark job as one line: the samplegen error raised in a task
    (corrupt block, bad UDF output, ...) when there is one."""
    from .mr_sample import task_error

    if isinstance(exc, SamplegenError):
        return exc
    text = str(exc)
    message = task_error(text.encode(errors="replace"))
    if message:
        return InputError(message)
    if type(exc).__name__ not in ("Py4JJavaError", "PythonException") and \
            not type(exc).__module__.startswith(("py4j", "pyspark")):
        return exc
    return RuntimeError(f"the Spark job failed: {_cause(text, type(exc).__name__)[:500]}")


def _cause(text, default):
    """The exception line of the Python traceback in a Spark error, else the
    first line naming an exception."""
    start = text.find("Traceback (most recent call last)")
    if start >= 0:
        found = None
        for line in text[start:].splitlines()[1:]:
            if line.startswith("\tat ") or line.startswith("at "):
                break  # the Java stack after the Python traceback
            if line.strip() and not line[0].isspace():
                found = line.strip()
        if found:
            return found
    lines = [line.strip(": ") for line in text.splitlines() if line.strip()]
    return next((line for line in lines if "Exception:" in line or "Error:" in line),
                lines[0] if lines else default)
