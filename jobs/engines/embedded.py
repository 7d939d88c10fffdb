"""The embedded engine (``--runner embedded``, the default): the three phases
in this process, on every core, in bounded memory.

* **local-sampling**: map tasks take runs of block lines of the input's part
  files (about 4 MiB each) and run :func:`jobs.phases.local_sampling` on
  every block.  A sparse block is read (one ``pread`` per run) and its CRC
  checked first; a dense block needs only its shape from its line's header,
  since its rows are known by id until they are written (below), and a
  thread of its own checks the dense blocks' CRCs beside the three phases:
  a corrupt block fails the run before it is committed;
* **block-preparation**: the records ``(sample, v, bin, h) -> chunk`` go
  into one :class:`~jobs.engines.spool.SortSpool`, which holds at most the
  memory budget and spills the rest to a file in the run's scratch
  directory; it hands every ``(sample, v)`` group on in ``(bin, h)`` order;
* **streaming-re-block**: one task per group runs
  :func:`jobs.phases.reblock` into :func:`jobs.phases.write_sample`, the
  largest groups first;
* **composition** (k-fold, fold mode): the folds' partial bottom blocks go to
  every other round (:func:`jobs.phases.partners`), one task per round and
  column of blocks writing the extra matrix (:func:`jobs.phases.write_extra`).

Dense matrices move keys, not rows, as the Spark engine's id shuffle does: a
chunk carries its rows' ids and relative positions (16 bytes a row), and the
re-blocking tasks gather each block's rows by row id from the input's part
files (:class:`~jobs.engines.rowcache.RowIndex`: one numpy gather from a
read-only mapping when the input takes at most half of the available memory
or of the budget -- its pages are the kernel's page cache, shared and
evicted as needed, not memory the engine holds --, else a ``preadv`` per
row).  Sparse chunks carry their rows.  Each row is copied
once into the block it lands in, which is then written (CRC, and the
part-file writer of :mod:`jobs.fs`); there is no Python object per row.
Which row lands where depends only on ``(relative position, row id)``, so
the samples are byte for byte those of every other runner.

*Threads, not processes.*  Most of a task's work is numpy, zlib and I/O
that run without the GIL (CRCs, sorts, gathers, writes), and threads share
one budget, one spool and one mapping of the input.  Measured on the 2-core
machine of docs/BENCHMARKS.md ("Embedded engine", three runs), the same job
on a process pool (fork, records framed to and from the workers:
``bench/embedded_processes.py``) took 1.02-1.22 of the threads' time in fold
mode (its records cross to the workers and back), 0.81-1.09 for hold-out and
naive k-fold (within the spread of the repeats) and 0.78-0.95 for the
bootstrap; only a scalar UDF, whose per-row Python holds the GIL, ran up to
twice as fast (0.50-0.85).  Threads are kept for what processes would cost: a
group's records would cross to its worker whole (streaming them needs a
protocol of its own, or the budget no longer bounds memory), fork is not
safe everywhere (spawn pays numpy's import per worker), and a task's error
would lose its traceback; a scalar UDF is the slow path on every runner
(vectorize it).
``--num-cores`` sets the number of threads (default: the cores this process
may use).  Every thread rebuilds the plan (its own UDF and random streams: a
UDF object need not be thread-safe).

Memory: the spool holds at most the budget (``--memory-mib``, default a
quarter of the available memory); beyond it, every running task holds one
shuffle bin and its merged copy (``--bin-mib``), a block and the writer's two
2 MiB buffers, and at most twice as many map tasks as threads are in flight;
the CRC thread reads one run at a time.

Errors: a task's samplegen error is raised as itself, same class and message,
and so is an OSError of the machine (a full disk, a permission:
:data:`ENVIRONMENT_ERRNOS`); anything else as one RuntimeError naming it (a
UDF's bug), a UDF that calls ``sys.exit`` as EngineError.  The first
failure stops the other tasks at their next block; the driver then
removes the staging directory, so nothing is committed.
"""
import collections
import contextlib
import copy
import errno
import os
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor

from samplegen.jobs import fs as fsmod
from samplegen.jobs.blocks import parse_payload
from samplegen.jobs.engines.rowcache import RowIndex, RowSource, keys_only
from samplegen.jobs.engines.spool import SortSpool
from samplegen.jobs.limits import available_memory
from samplegen.jobs.phases import (
    check_coverage,
    counted,
    local_sampling,
    new_map_report,
    partners,
    reblock,
    write_extra,
    write_sample,
)
from samplegen.jobs.plan import KEY_ROW_BYTES, Plan, set_bins
from samplegen.jobs.store import scan_part
from samplegen.udfs.errors import EngineError, InputError, SamplegenError

#: the default budget: this share of the machine's available memory
BUDGET_SHARE = 0.25
#: ... and at least this much
MIN_BUDGET = 64 << 20
#: bytes of block lines a map task reads at once (at least one line; at most
#: an eighth of the budget per thread)
TASK_BYTES = 4 << 20


def run_embedded(plan, inputs, runner, options):
    """Run the phases in this process (engine entry point, see
    :func:`jobs.driver.generate`); returns the summaries of every written
    column of blocks.  *options*: ``num_cores`` (threads), ``memory_bytes``
    (the budget), ``scratch`` (a local directory for copies of remote part
    files and the spill file), ``on_progress`` (a :class:`jobs.progress.Progress`
    counting the input's blocks), ``on_task_stats`` (called with a dict: the
    threads, the budget, the tasks of each phase, the bytes spilled)."""
    threads = options.get("num_cores") or default_threads()
    budget = options.get("memory_bytes") or default_budget()
    scratch = options.get("scratch")
    with contextlib.ExitStack() as stack:
        # A UDF call sends stdout to stderr while it runs (udfs.base); calls
        # overlapping in several threads would leave it there, unless it
        # already is there for the whole run.
        stack.enter_context(contextlib.redirect_stdout(sys.__stderr__ or sys.stderr))
        if all(fsmod.is_local(uri) for uri in inputs):
            paths = [fsmod.local_path(uri) for uri in inputs]
        else:   # a local copy of every part file
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="samplegen-embedded-",
                                                                  dir=fsmod.scratch_dir(scratch)))
            paths = [_local_copy(uri, tmp, i) for i, uri in enumerate(inputs)]
        job = _Job(plan, paths, threads, budget, scratch, options.get("on_progress"))
        try:
            summaries = job.run()
        except _Stopped:
            raise EngineError("a task stopped without an error; nothing was written") from None
        except SamplegenError:
            raise
        except SystemExit as exc:
            raise EngineError(f"a task called sys.exit({exc.code!r}) (does the UDF exit?); "
                              "nothing was written") from None
        except OSError as exc:
            if exc.errno in ENVIRONMENT_ERRNOS:   # the machine's to fix, not the job's
                raise
            raise _failed(exc) from exc
        except Exception as exc:
            raise _failed(exc) from exc
        finally:
            job.close()
    if options.get("on_task_stats") is not None:
        options["on_task_stats"](job.stats)
    return summaries


#: OSErrors that are the machine's, not the job's: a full disk or quota, a
#: read-only file system, a permission; they reach the driver as themselves
#: (the command line names them in one sentence, status 2)
ENVIRONMENT_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _failed(exc):
    """The RuntimeError naming a task's unexpected failure *exc* (a UDF's bug)."""
    return RuntimeError("the embedded job failed: " +
                        " ".join(f"{type(exc).__name__}: {exc}".split()))


def default_threads():
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_budget():
    """:data:`BUDGET_SHARE` of the available memory, at least :data:`MIN_BUDGET`."""
    return max(MIN_BUDGET, int(available_memory() * BUDGET_SHARE))


def _local_copy(uri, tmp, i):
    """A local path of part file *uri*: itself, or a copy in *tmp*."""
    if fsmod.is_local(uri):
        return fsmod.local_path(uri)
    path = os.path.join(tmp, "input-%05d" % i)
    fsmod.get_fs(uri).download(uri, path)
    return path


class _Stopped(Exception):
    """A task that did not run or ended early because another one failed."""


class _Tasks:
    """Threads running a phase's tasks.  The first task to fail records its
    exception and stops the others at their next :meth:`check`; :meth:`result`
    raises that first failure, whichever task the caller waits for."""

    def __init__(self, threads):
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="samplegen-task")
        self.stop = threading.Event()
        self.failure = None
        self._lock = threading.Lock()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.stop.set()
        self.pool.shutdown(wait=True, cancel_futures=True)   # no task outlives the run
        return False

    def submit(self, fn, *args):
        return self.pool.submit(self.call, fn, *args)

    def call(self, fn, *args):
        """Run one task (in whichever thread calls it)."""
        self.check()
        try:
            return fn(*args)
        except _Stopped:
            raise
        except BaseException as exc:
            with self._lock:
                if self.failure is None:
                    self.failure = exc
            self.stop.set()
            raise

    def check(self):
        if self.stop.is_set():
            raise _Stopped()

    def result(self, future):
        try:
            return future.result()
        except (Exception, SystemExit):    # Ctrl-C stays itself
            if self.failure is not None:
                raise self.failure from None
            raise


class _Job:
    """One run: the input's part files (local paths), the plan each thread
    rebuilds, the row index of a dense input, the tasks."""

    def __init__(self, plan, paths, threads, budget, scratch, progress=None):
        self.plan, self.paths, self.threads = plan, paths, threads
        self.budget, self.scratch = budget, scratch
        self.progress = _Progress(progress)
        self.stats = {"threads": threads, "budget": budget}
        self.ids = plan.kind == "dense"   # records carry keys; rows come from the input
        if self.ids:
            # bins bound what one re-blocking task merges at once: ids, not rows
            plan = copy.copy(plan)
            set_bins(plan, KEY_ROW_BYTES)
        self.plan_json = plan.to_json()
        self.index = None
        # the input is mapped when it takes at most half of this
        self.map_budget = max(budget, available_memory())
        self._local = threading.local()

    def close(self):
        if self.index is not None:
            self.index.close()
            self.index = None

    def _plan(self):
        """This thread's plan (its own UDF object and random streams)."""
        plan = getattr(self._local, "plan", None)
        if plan is None:
            plan = self._local.plan = Plan.from_json(self.plan_json)
        return plan

    def run(self):
        runs = list(self._runs())
        if self.ids:
            source = RowSource(self.paths, self.plan.rows, self.plan.cols,
                               self.plan.block_size, "")
            self.index = RowIndex(source, self.paths)
        with SortSpool(self.budget, self.scratch) as spool, \
                ThreadPoolExecutor(1, thread_name_prefix="samplegen-verify") as checker, \
                _Tasks(self.threads) as tasks:
            # Keys only: the decisions need no values, so the blocks' CRCs are
            # checked beside the phases, by a thread of their own, and a
            # corrupt block fails the run before anything is committed.
            verified = checker.submit(tasks.call, self._verify, tasks, runs) if self.ids \
                else None
            reports = self._map(tasks, runs, spool)
            summaries, tails = self._reduce(tasks, spool, reports)
            extras = self._compose(tasks, tails)
            if verified is not None:
                tasks.result(verified)
        check_coverage(self.plan, reports, summaries + extras)
        self.stats.update(map_tasks=len(runs), reduce_tasks=len(summaries),
                          compose_tasks=len(extras), spilled_bytes=spool.spilled_bytes)
        return summaries + extras

    # -- local-sampling -------------------------------------------------------------
    def _runs(self):
        """``(p, [(h, v, offset, payload, layout), ...])``: consecutive block
        lines of part file ``p``, about TASK_BYTES together."""
        most = max(1, min(TASK_BYTES, self.budget // (8 * self.threads)))
        for p, path in enumerate(self.paths):
            run, size = [], 0
            for h, v, offset, length, payload, layout in scan_part(path):
                if run and size + length > most:
                    yield p, run
                    run, size = [], 0
                run.append((h, v, offset, payload, layout))
                size += length
            if run:
                yield p, run

    def _map(self, tasks, runs, spool):
        """Sample every block; the records go into *spool*; returns the
        tasks' reports."""
        reports, window = [], collections.deque()

        def take(future):
            records, report = tasks.result(future)
            for key, chunk in records:
                spool.add(key, chunk)
            reports.append(report)
            self.progress.mapped(report)
        for p, run in runs:
            window.append(tasks.submit(self._map_task, tasks, p, run))
            if len(window) > 2 * self.threads:
                take(window.popleft())
        while window:
            take(window.popleft())
        return reports

    def _map_task(self, tasks, p, run):
        plan = self._plan()
        report, records = new_map_report(), []
        blocks = self._keys(tasks, run) if self.ids else self._blocks(tasks, p, run)
        for h, v, block in blocks:
            for sample, v2, bin_, h2, chunk in counted(report, h, v,
                                                       local_sampling(plan, h, v, block)):
                records.append(((sample, v2, bin_, h2), chunk))
        return records, report

    @staticmethod
    def _keys(tasks, run):
        """``(h, v, block)`` of *run*'s dense blocks known by id only: their
        shapes, from the line headers (what the decisions need)."""
        for h, v, _, _, layout in run:
            tasks.check()
            yield h, v, keys_only(layout)

    def _verify(self, tasks, runs):
        """Check the CRC of every block of *runs* (an InputError naming the
        first corrupt one)."""
        for p, run in runs:
            for _ in self._blocks(tasks, p, run):
                pass

    def _blocks(self, tasks, p, run):
        """``(h, v, EncodedBlock)`` of the block lines *run* of part file *p*, read at once
        (from the input's mapping when the rows are gathered from it), each
        block's CRC checked."""
        start = run[0][2]
        end = run[-1][3] + run[-1][4].length
        if self.index is not None and self.index.maps(self.map_budget):
            data = self.index.mapping(p)[start:end]
        else:
            with open(self.paths[p], "rb") as f:
                data = os.pread(f.fileno(), end - start, start)
        if len(data) != end - start:
            raise InputError(f"part file {self.paths[p]} is truncated")
        view = memoryview(data)
        for h, v, _, payload, layout in run:
            tasks.check()
            yield h, v, parse_payload(h, v, view[payload - start:payload - start + layout.length])

    # -- block-preparation and streaming-re-block -------------------------------------
    def _reduce(self, tasks, spool, reports):
        """Re-block and write every group, the largest first; returns the
        summaries and, in fold mode, the partial bottom blocks ``{v: {fold:
        block}}``."""
        rows = collections.Counter()
        for report in reports:
            rows.update(report["rows"])
        self.progress.expect(sum(rows.values()))
        groups = sorted(spool.groups(), key=lambda g: -rows["%d.%d" % g[0]])
        futures = [tasks.submit(self._reduce_task, tasks, sample, v, records)
                   for (sample, v), records in groups]
        summaries, tails = [], {}
        for future in futures:
            sample, v, summary, tail = tasks.result(future)
            summaries.append(summary)
            for block in tail:
                tails.setdefault(v, {})[sample] = block
        return summaries, tails

    def _reduce_task(self, tasks, sample, v, records):
        plan = self._plan()
        blocks = reblock(plan.block_size, ((key[2], chunk) for key, chunk in records))
        if self.index is not None:
            blocks = self.index.fetch(v, blocks, self.map_budget)
        summary, tail = write_sample(plan, sample, v, self._counted(tasks, blocks))
        return sample, v, summary, tail

    def _counted(self, tasks, blocks):
        """*blocks* passed on to be written, counted once they are; a task
        stops between blocks once another one failed."""
        for h, block in blocks:
            tasks.check()
            yield h, block
            self.progress.wrote(block.rows)

    # -- composition (fold mode) ------------------------------------------------------
    def _compose(self, tasks, tails):
        """Every round's extra matrix, one task per round and column of blocks;
        a round that receives no block writes nothing (as in every engine)."""
        plan, futures = self.plan, []
        for v, by_fold in sorted(tails.items()):
            for round_ in range(len(plan.composed)):
                blocks = [by_fold[f] for f in partners(len(plan.names), round_, plan.fold_group)
                          if f in by_fold]
                if blocks:
                    futures.append(tasks.submit(self._compose_task, round_, v, blocks))
        return [tasks.result(future) for future in futures]

    def _compose_task(self, round_, v, blocks):
        return write_extra(self._plan(), round_, v, blocks)


class _Progress:
    """A run's progress in the driver's unit, input blocks: sampling them
    counts for MAP_SHARE of the work (about what it takes), writing the
    rows they sent for the rest."""

    MAP_SHARE = 0.2

    def __init__(self, progress):
        self.progress = progress
        self.blocks = self.rows = self.written = 0
        self._lock = threading.Lock()

    def mapped(self, report):
        with self._lock:
            self.blocks += len(report["blocks"])
        self._show()

    def expect(self, rows):
        self.rows = rows

    def wrote(self, rows):
        with self._lock:
            self.written += rows
        self._show()

    def _show(self):
        if self.progress is None or not self.progress.total:
            return
        total = self.progress.total
        done = self.MAP_SHARE * min(1.0, self.blocks / total) + \
            (1 - self.MAP_SHARE) * min(1.0, self.written / max(self.rows, 1))
        self.progress.update(int(total * done))
