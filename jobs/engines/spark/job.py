"""The native PySpark engine (``--runner spark``): the three phases on RDDs.

* **local-sampling**: ``textFile`` reads the block lines as bytes;
  ``mapPartitions`` parses each block (values stay base64 text) and emits the
  chunks of :func:`jobs.phases.local_sampling`, keyed ``(sample, v, bin, h)``.
* **block-preparation**: records are partitioned on the group ``(sample, v)``
  (:func:`.shuffle.shuffle`); each reduce task orders its records by the
  whole key in a :class:`~jobs.engines.spool.SortSpool`.
* **streaming-re-block**: the reduce task walks its groups in order through
  :func:`jobs.phases.reblock` into :func:`jobs.phases.write_sample` and
  returns the summaries.
* **composition** (k-fold, fold mode): every fold's partial bottom block goes
  to each other round (:func:`jobs.phases.partners`), where the blocks
  become the round's extra matrix (:func:`jobs.phases.write_extra`).

A record is a chunk (an :class:`~jobs.blocks.EncodedBlock`: the rows of one
input block bound for one ``(sample, v)`` in one bin), never a Python object
per row.  With the *id shuffle* (``spark.samplegen.shuffle=ids``, the default
for dense matrices) a chunk carries only its rows' ids and relative
positions, and the reduce task fetches the rows of each re-blocked block from
the input (:mod:`jobs.engines.rowcache`).  Which row lands where depends only on
``(relative position, row id)``, so the output is byte-identical to the other
runners' whatever the number of partitions.

Memory per task (Python worker; the JVM side is Spark's own and spills):

* map: one input block line, the chunks sampled from it, and at most
  min(64 MiB, ``spark.python.worker.memory`` / 4) of chunks waiting to be
  pickled to the JVM (:func:`.shuffle.shuffle`);
* reduce: at most ``spark.python.worker.memory`` (default 512m) of records
  held for ordering, the rest in one local spill file with an index entry
  (48 bytes) per chunk; then, while re-blocking, one shuffle bin
  (``--bin-mib``, 16 MiB by default) and its merged copy, one buffer block
  and the block being written; with the id shuffle, also the input's part
  files, memory-mapped, if they take at most half of
  ``spark.python.worker.memory`` (page cache, shared by the workers).

Settings: ``--spark-master`` (default ``local[*]``), Spark's own
``spark-defaults.conf`` (in ``$SPARK_CONF_DIR``; ``conf/`` has one), and
``--spark-conf KEY=VALUE``, which wins (:mod:`.context`).  Per-run settings, honoured even when
an existing SparkContext is reused: ``spark.samplegen.inputPartitions``,
``spark.samplegen.reducePartitions``, ``spark.samplegen.shuffle`` and
``spark.python.worker.memory``.
"""
import contextlib
import copy
import functools
import itertools
import logging
import math
import os
import re
import threading

from samplegen.jobs import fs as fsmod
from samplegen.jobs.blocks import parse_encoded, row_chars
from samplegen.jobs.engines.rowcache import RowSource, drop, local_dir, no_text
from samplegen.jobs.engines.spool import SortSpool
from samplegen.jobs.engines.task_errors import reported
from samplegen.jobs.phases import (
    local_sampling,
    partners,
    reblock,
    write_extra,
    write_sample,
)
from samplegen.jobs.plan import KEY_ROW_BYTES, Plan, set_bins
from samplegen.udfs.errors import ParameterError

from .context import (
    failure_cause,
    parse_settings,
    ship_packages,
    spark_context,
    task_failure,
)
from .shuffle import MAP_BUFFER, shuffle
from .stats import MemoryProbe, TaskStats

log = logging.getLogger(__name__)

#: per-run settings (``--spark-conf``, else the context's)
INPUT_PARTITIONS = "spark.samplegen.inputPartitions"
REDUCE_PARTITIONS = "spark.samplegen.reducePartitions"
SHUFFLE = "spark.samplegen.shuffle"
SHUFFLE_MODES = ("ids", "rows")
WORKER_MEMORY = "spark.python.worker.memory"
REDUCE_BYTES = 128 << 20   # expected output per reduce partition (default count)

SUMMARY, TAIL = "S", "T"


def run_spark(plan, inputs, runner, options):
    """Run the phases on Spark (engine entry point, see
    :func:`jobs.driver.generate`); returns the summaries of every written
    ``(sample, v)`` column of blocks (and of the composed extras)."""
    settings = parse_settings(options.get("spark_conf", ()))
    master = options.get("spark_master")
    with spark_context(master, settings) as sc:
        ship_packages(sc, plan)
        stats = TaskStats(sc)
        try:
            with _following(sc, options.get("on_progress")):
                summaries = _run(sc, plan, inputs, settings, stats)
        except Exception as exc:
            failure = task_failure(exc)
            if failure is exc:
                raise
            raise failure from exc
        callback = options.get("on_task_stats")
        if callback is not None:
            callback(stats.value())
        log.info("spark tasks: %s", stats.value())
        return summaries


@contextlib.contextmanager
def _following(sc, progress, every=0.5):
    """Feed *progress* (a :class:`jobs.progress.Progress` of input blocks)
    from Spark's status tracker while the body runs: the share of finished
    tasks of the run's first stage, the one that reads the input.  The run's
    jobs carry a job group of their own (the previous one is restored)."""
    if progress is None:
        yield
        return
    group = "samplegen-" + os.urandom(6).hex()
    previous = sc.getLocalProperty("spark.jobGroup.id")
    sc.setJobGroup(group, "samplegen run")
    stop = threading.Event()

    def follow():
        tracker = sc.statusTracker()
        while not stop.wait(every):
            try:
                jobs = sorted(tracker.getJobIdsForGroup(group))
                info = tracker.getJobInfo(jobs[0]) if jobs else None
                stage = tracker.getStageInfo(min(info.stageIds)) if info and info.stageIds \
                    else None
            except Exception:  # the context is ending: progress is optional
                return
            if stage is not None and stage.numTasks:
                progress.update(progress.total * stage.numCompletedTasks // stage.numTasks)

    thread = threading.Thread(target=follow, name="samplegen-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sc.setLocalProperty("spark.jobGroup.id", previous)


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
    budget = memory_bytes(setting(sc, settings, WORKER_MEMORY, "512m"))
    buffer = min(MAP_BUFFER, budget // 4)
    lines = read_lines(sc, inputs, count_setting(sc, settings, INPUT_PARTITIONS))
    reducers = count_setting(sc, settings, REDUCE_PARTITIONS) or \
        default_reducers(plan, sc.defaultParallelism)
    records = lines.mapPartitions(functools.partial(_sample_partition, plan_json, stats,
                                                    source is not None))
    reblocked = functools.partial(_reblock, budget, source)
    step1 = (shuffle(records, reducers, functools.partial(group_index, nv), buffer)
             .mapPartitions(functools.partial(_reduce_partition, reblocked, plan_json, budget,
                                              stats)))
    failed = False
    try:
        if not plan.composed:
            return [value for _, value in step1.collect()]
        # Fold mode: the tails of step 1 feed the composition step; keep step
        # 1's output so its groups are re-blocked (and written) once.
        step1 = step1.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            rounds = len(plan.composed)
            tails = step1.filter(_is_tail).flatMap(functools.partial(_route_tail, rounds,
                                                                     plan.fold_group))
            step2 = (shuffle(tails, min(reducers, rounds * nv),
                             functools.partial(group_index, nv), buffer)
                     .mapPartitions(functools.partial(_reduce_partition, _compose, plan_json,
                                                      budget, stats)))
            out = step1.filter(_is_summary).union(step2).collect()
        finally:
            step1.unpersist()
        return [value for _, value in out]
    except BaseException:
        failed = True
        raise
    finally:
        if source is not None:
            _drop_row_caches(sc, source.token, quiet=failed)


def row_source(sc, settings, plan, inputs):
    """The :class:`~jobs.engines.rowcache.RowSource` of an id shuffle, or None for a
    row shuffle (``spark.samplegen.shuffle``: ``ids``, the default for dense
    matrices, or ``rows``; sparse matrices always shuffle rows)."""
    mode = setting(sc, settings, SHUFFLE, "ids")
    if mode not in SHUFFLE_MODES:
        raise ParameterError(f"{SHUFFLE} must be one of {', '.join(SHUFFLE_MODES)}, got {mode!r}")
    if mode == "rows" or plan.kind != "dense":
        return None
    return RowSource(inputs, plan.rows, plan.cols, plan.block_size, os.urandom(8).hex())


def _drop_row_caches(sc, token, quiet=False):
    """Forget the run's row indexes and remove the executors' copies of
    remote part files (best effort: Spark removes its local directories when
    the application ends).  *quiet*: the run failed, and its error says why;
    a failure here (the same cause, as a rule) is only logged at debug level."""
    slots = max(2, 2 * sc.defaultParallelism)
    try:
        sc.parallelize(range(slots), slots).foreach(lambda _: drop(token))
    except Exception as exc:  # the samples are written; a leftover cache is not an error
        # one line: the cause, not the JVM's stack trace (the run's own error follows)
        log.log(logging.DEBUG if quiet else logging.WARNING,
                "could not remove the row caches of run %s: %s", token,
                failure_cause(str(exc), type(exc).__name__))


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


def read_lines(sc, inputs, partitions=None):
    """The block lines of the input part files, as bytes."""
    uris = ["file://" + os.path.abspath(fsmod.local_path(u)) if fsmod.is_local(u) else u
            for u in inputs]
    if not any("," in u for u in uris):
        return sc.textFile(",".join(uris), minPartitions=partitions, use_unicode=False)
    each = -(-partitions // len(uris)) if partitions else None
    return sc.union([sc.textFile(u, minPartitions=each, use_unicode=False) for u in uris])


def group_index(nv, key):
    """Partition of a record: its ``(sample, v)`` group, numbered."""
    return key[0] * nv + key[1]


def _is_tail(record):
    return record[0] == TAIL


def _is_summary(record):
    return record[0] == SUMMARY


# ---------------------------------------------------------------------------
# the tasks (errors reported by the task_errors protocol)
# ---------------------------------------------------------------------------
def _sample_partition(plan_json, stats, ids_only, lines):
    """Map: local-sampling of every block line of the partition (with
    *ids_only*, the chunks carry row ids and positions, not the rows)."""
    probe = MemoryProbe()
    plan = Plan.from_json(plan_json)
    with reported():
        for line in lines:
            h, v, block = parse_encoded(line)
            if ids_only:
                block = no_text(block)
            for sample, v2, bin_, h2, chunk in local_sampling(plan, h, v, block):
                yield (sample, v2, bin_, h2), chunk
    stats.add_map(probe.growth())


def _reduce_partition(write, plan_json, budget, stats, records):
    """Reduce: order the partition's records by ``(sample, v, bin, h)``
    (a :class:`~jobs.engines.spool.SortSpool` of *budget* bytes) and hand each ``(sample,
    v)`` group to ``write(plan, sample, v, records)``, which yields the
    task's output (:func:`_reblock` or :func:`_compose`)."""
    probe = MemoryProbe()
    plan = Plan.from_json(plan_json)
    with reported(), SortSpool(budget, local_dir()) as spool:
        for key, chunk in records:
            spool.add(key, chunk)
        for (sample, v), group in itertools.groupby(spool.sorted(), key=_group_of):
            yield from write(plan, sample, v, group)
    stats.add_reduce(probe.growth(), spool.spilled_bytes)


def _group_of(record):
    return record[0][:2]


def _reblock(budget, source, plan, sample, v, records):
    """Step 1: re-block and write group ``(sample, v)``; in fold mode, pass its
    partial bottom block on.  With a *source* (id shuffle), each re-blocked
    block's rows are fetched from it."""
    blocks = reblock(plan.block_size, ((key[2], chunk) for key, chunk in records))
    if source is not None:
        blocks = source.fetch(v, blocks, budget)
    summary, tail = write_sample(plan, sample, v, blocks)
    yield SUMMARY, summary
    for block in tail:
        yield TAIL, (sample, v), block


def _route_tail(rounds, group, record):
    """Composition: a fold's partial bottom block goes to every other round
    of its set of folds."""
    _, (fold, v), block = record
    return [((round_, v, 0, fold), block) for round_ in partners(rounds, fold, group)]


def _compose(plan, round_, v, records):
    """Composition: the partial bottom blocks routed to ``(round, v)`` become
    that column of the round's extra matrix."""
    yield SUMMARY, write_extra(plan, round_, v, [chunk for _, chunk in records])


# ---------------------------------------------------------------------------
# per-run settings
# ---------------------------------------------------------------------------
def setting(sc, settings, key, default):
    """A per-run setting: ``--spark-conf``, else the context's, else *default*."""
    if key in settings:
        return settings[key]
    value = sc.getConf().get(key)
    return default if value is None else value


def count_setting(sc, settings, key):
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


def memory_bytes(text):
    """A Spark memory size (``512m``, ``2g``; plain numbers are MiB) in bytes."""
    match = re.fullmatch(r"\s*(\d+)\s*([kmgt]?)b?\s*", str(text).lower())
    if not match:
        raise ParameterError(f"{WORKER_MEMORY} must be a size like 512m or 2g, got {text!r}")
    return int(match.group(1)) << {"k": 10, "": 20, "m": 20, "g": 30, "t": 40}[match.group(2)]
