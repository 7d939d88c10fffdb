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
(:func:`jobs.spark_engine.spark_context`), which also ships the project's
packages to the executors.
"""
import json
import re

from ..errors import TBSError
from .task import run_partition

_ERROR = re.compile(r"TBSError: (.+)")


def _task(plan_json, p):
    return p, run_partition(json.loads(plan_json), p)


def run_spark(plan, options):
    """Run the plan's partitions as Spark tasks; their summaries by partition."""
    try:
        from samplegen.jobs import spark_engine
    except ImportError as exc:
        raise TBSError(f"runner 'spark' needs pyspark ({exc})") from None
    from samplegen.udfs.errors import ParameterError
    try:
        return _run(spark_engine, plan, options)
    except ParameterError as exc:   # no pyspark, a bad --spark-conf or master
        raise TBSError(str(exc)) from None


def _run(spark_engine, plan, options):
    settings = spark_engine.parse_settings(options.get("spark_conf", ()))
    P = len(plan["structs"])
    # The engine's context handling: an active context is used as it is;
    # otherwise one is started (spark-defaults.conf, --spark-conf, quiet JVM)
    # and stopped at the end.  The project's packages go to the executors.
    with spark_engine.spark_context(options.get("spark_master"), settings) as sc:
        spark_engine.ship_packages(sc)
        data = sc.broadcast(json.dumps(plan))
        try:
            result = sc.parallelize(range(P), P).map(lambda p: _task(data.value, p)).collect()
        except Exception as exc:        # Py4JJavaError carries the Python traceback as text
            found = _ERROR.findall(str(exc))
            if found:
                raise TBSError(found[-1].strip()) from None
            raise
        finally:
            data.unpersist()
    out = [None] * P
    for p, summaries in result:
        out[p] = summaries
    return out
