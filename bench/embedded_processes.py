"""The embedded engine on a process pool instead of threads: the other side
of the threads-or-processes measurement (``bench_embedded.py --only pools``).

The same job (:class:`samplegen.jobs.engines.embedded._Job`: its map task,
its spool, its re-blocking task, its composition) with the map and
re-blocking tasks run by a ``ProcessPoolExecutor`` (fork): a map task's
records come back as one frame of raw arrays (``ChunkFrames``, no pickled
objects), a group's records go to its re-blocking task the same way, and
each worker maps the input's part files itself.  Composition (small) stays
on threads.  Not part of samplegen: only the benchmark registers it, as the
runner ``embedded-processes``.
"""
import collections
import multiprocessing
from concurrent.futures import ProcessPoolExecutor

from samplegen.jobs.engines import embedded
from samplegen.jobs.engines.rowcache import RowIndex, RowSource
from samplegen.jobs.engines.spool import ChunkFrames, SortSpool
from samplegen.jobs.phases import check_coverage

FRAMES = ChunkFrames()
_WORKER = {}   # this worker's job: its plan and its own row index


class _Unstoppable:
    """What a task checks between blocks (nothing to stop in a worker)."""

    def check(self):
        pass


def _worker_job(state):
    plan, plan_json, paths, budget, scratch = state
    job = _WORKER.get(plan_json)
    if job is None:
        _WORKER.clear()
        job = _WORKER[plan_json] = embedded._Job(plan, paths, 1, budget, scratch)
        if job.ids:
            job.index = RowIndex(RowSource(paths, plan.rows, plan.cols, plan.block_size, ""),
                                 paths)
    return job


def _map_task(state, p, run):
    records, report = _worker_job(state)._map_task(_Unstoppable(), p, run)
    return FRAMES.dumps(records), report


def _verify_task(state, p, run):
    """The CRCs of a run of a dense input's blocks (the threads' engine checks
    them in a thread of its own beside the phases)."""
    _worker_job(state)._verify(_Unstoppable(), [(p, run)])


def _reduce_task(state, sample, v, frame):
    job = _worker_job(state)
    sample, v, summary, tail = job._reduce_task(_Unstoppable(), sample, v, FRAMES.loads(frame))
    return sample, v, summary, [FRAMES.dumps([((0, 0, 0, 0), block)]) for block in tail]


class ProcessJob(embedded._Job):
    def run(self):
        runs = list(self._runs())
        state = (self.plan, self.plan_json, self.paths, self.budget, self.scratch)
        fork = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(self.threads, mp_context=fork) as pool, \
                SortSpool(self.budget, self.scratch) as spool, \
                embedded._Tasks(self.threads) as tasks:
            reports = []
            maps = [pool.submit(_map_task, state, p, run) for p, run in runs]
            checks = [pool.submit(_verify_task, state, p, run) for p, run in runs] \
                if self.ids else []
            for future in maps:
                frame, report = future.result()
                for key, chunk in FRAMES.loads(frame):
                    spool.add(key, chunk)
                reports.append(report)
            rows = collections.Counter()
            for report in reports:
                rows.update(report["rows"])
            groups = sorted(spool.groups(), key=lambda g: -rows["%d.%d" % g[0]])
            futures = [pool.submit(_reduce_task, state, sample, v, FRAMES.dumps(list(records)))
                       for (sample, v), records in groups]
            summaries, tails = [], {}
            for future in futures:
                sample, v, summary, tail = future.result()
                summaries.append(summary)
                for frame in tail:
                    tails.setdefault(v, {})[sample] = FRAMES.loads(frame)[0][1]
            extras = self._compose(tasks, tails)
            for future in checks:
                future.result()
        check_coverage(self.plan, reports, summaries + extras)
        return summaries + extras


def run(plan, inputs, runner, options):
    """An engine (``run(plan, inputs, runner, options)``) for local inputs."""
    paths = [embedded.fsmod.local_path(uri) for uri in inputs]
    threads = options.get("num_cores") or embedded.default_threads()
    budget = options.get("memory_bytes") or embedded.default_budget()
    return ProcessJob(plan, paths, threads, budget, options.get("scratch")).run()
