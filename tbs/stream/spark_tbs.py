"""The micro-batch job on Spark (``--runner spark``).

An RDD of the partition numbers, one Spark partition each, is mapped through
:func:`tbs.stream.task.run_partition`: task ``p`` applies every batch of the
plan (a broadcast variable) to reservoir partition ``p`` -- the co-partitioned
reservoir of the paper, with the partition's state in STATE instead of a
cached RDD, so a lost task is simply rerun (it writes the same files).  The
task reads its slice of each batch itself (Parquet, by row range), so the
batch never passes through the driver.

Settings: ``--spark-master`` (default ``local[*]``) and ``--spark-conf
KEY=VALUE``; an active SparkContext (e.g. in a notebook) is used as it is.
The context is started and configured as for the sample-generation engine
(:func:`jobs.engines.spark.context.spark_context`), which also ships the
project's packages to the executors; a task's error comes back by the
engines' protocol (:mod:`jobs.engines.task_errors`).
"""
from samplegen.jobs import plan as plan_codec
from samplegen.jobs.engines.task_errors import TaskFailed, error_line

from ..errors import TBSError
from .storage import DamagedStateError
from .task import run_partition

#: errors a task reports by name, besides samplegen's own
TASK_ERRORS = (DamagedStateError, TBSError)


def _task(plan_json, p):
    """``(p, summaries, None)``, or ``(p, None, marker line)`` when the
    partition failed: an error is returned, not raised, so that the job ends
    only when every task has (no straggler writes while the run cleans up)."""
    try:
        return p, run_partition(plan_codec.loads(plan_json), p), None
    except Exception as exc:
        return p, None, error_line(exc, TASK_ERRORS)


def run_spark(plan, options):
    """Run the plan's partitions as Spark tasks; their summaries by partition."""
    try:
        from samplegen.jobs.engines.spark import context
    except ImportError as exc:
        raise TBSError(f"runner 'spark' needs pyspark ({exc})") from None
    return _run(context, plan, options)   # errors keep their class (and exit status)


def _run(context, plan, options):
    settings = context.parse_settings(options.get("spark_conf", ()))
    P = len(plan["structs"])
    # The engine's context handling: an active context is used as it is;
    # otherwise one is started (spark-defaults.conf, --spark-conf, quiet JVM)
    # and stopped at the end.  The project's packages go to the executors.
    with context.spark_context(options.get("spark_master"), settings) as sc:
        context.ship_packages(sc)
        data = sc.broadcast(plan_codec.dumps(plan))
        try:
            result = sc.parallelize(range(P), P).map(lambda p: _task(data.value, p)).collect()
        except Exception as exc:        # Py4JJavaError carries the task's report as text
            failure = context.task_failure(exc, extra=TASK_ERRORS)
            if failure is exc:
                raise
            raise failure from None
        finally:
            data.unpersist()
    failed = [line for _, _, line in result if line is not None]
    if failed:
        raise context.task_failure(TaskFailed(failed[0]), extra=TASK_ERRORS)
    out = [None] * P
    for p, summaries, _ in result:
        out[p] = summaries
    return out
