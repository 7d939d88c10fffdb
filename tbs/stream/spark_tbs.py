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
On a cluster the project's packages are shipped as a zip (``addPyFile``).
"""
import json
import os
import re
import sys
import tempfile

from ..errors import TBSError
from .task import run_partition

_ERROR = re.compile(r"TBSError: (.+)")


def _task(plan_json, p):
    return p, run_partition(json.loads(plan_json), p)


def run_spark(plan, options):
    try:
        from pyspark import SparkConf, SparkContext
    except ImportError as exc:
        raise TBSError(f"runner 'spark' needs pyspark ({exc})") from None
    sc = SparkContext._active_spark_context
    owned = sc is None
    if owned:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        conf = SparkConf().setMaster(options.get("spark_master") or "local[*]").setAppName("samplegen-tbs")
        conf.set("spark.speculation", "false").set("spark.ui.showConsoleProgress", "false")
        for item in options.get("spark_conf", ()):
            key, sep, value = item.partition("=")
            if not sep:
                raise TBSError(f"--spark-conf must be KEY=VALUE, got {item!r}")
            conf.set(key.strip(), value.strip())
        sc = SparkContext(conf=conf)
        sc.setLogLevel("ERROR")
    P = len(plan["structs"])
    try:
        with tempfile.TemporaryDirectory(prefix="samplegen-tbs-") as tmp:
            if not sc.master.startswith("local"):
                from jobs.package import build_zip
                sc.addPyFile(build_zip(os.path.join(tmp, "samplegen.zip")))
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
    finally:
        if owned:
            sc.stop()
    out = [None] * P
    for p, summaries in result:
        out[p] = summaries
    return out
