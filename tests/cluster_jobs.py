"""The mrjob configurations the tests' jobs on the single-node Hadoop run
with (tests/test_hdfs.py, tests/test_hadoop.py), and the options of the
Spark and beeline JVMs the tests start."""
import os

from samplegen.jobs.cluster import JVM_FLAGS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: YARN's uber mode: the job's map and reduce tasks run one after the other
#: inside its ApplicationMaster's container, so a job starts one container
#: (one JVM) instead of three: about half of a small job's time.  It is still
#: the real YARN and HDFS: the streaming jar, the tasks' Python processes in a
#: YARN container, the input read from and the block files written to HDFS.
#: Uber mode takes at most one reduce task, and the AM's container must be
#: granted the largest task's memory (its tasks' Python processes live in
#: it): 1024 MB, no more, as the ResourceManager grants AMs half the
#: cluster's memory and Apache Hive's Tez sessions hold AMs too.
#: For the runs whose point is what a method, a side file, a user's UDF or a
#: command does on the cluster (compared byte for byte with the inline
#: runner); never for the runs whose point is separate task attempts, kills,
#: retries or speculation, which keep the cluster's own configuration (tasks
#: in containers of their own, two reducers), nor for the runs kept on two
#: reducers to check that a sample's blocks partitioned over reducers give the
#: inline bytes (test_hadoop.py's hold-out, test_hdfs.py's fold-mode k-fold).
UBER_JOBCONF = {
    "mapreduce.job.ubertask.enable": "true",
    "mapreduce.job.reduces": 1,
    "yarn.app.mapreduce.am.resource.mb": 1024,
    "mapreduce.reduce.memory.mb": 1024,
}


def write_mrjob_conf(path, streaming_jar, uber=False):
    """Write at *path* an mrjob configuration for the tests' cluster
    (``conf/mrjob-local-hadoop.conf`` with *streaming_jar*), with
    :data:`UBER_JOBCONF` if *uber* (mrjob merges the jobconf of an included
    file with the including one's); returns *path*."""
    jobconf = "".join(f"      {k}: {v}\n" for k, v in UBER_JOBCONF.items()) if uber else ""
    path.write_text(f"include: {ROOT}/conf/mrjob-local-hadoop.conf\n"
                    f"runners:\n  hadoop:\n    hadoop_streaming_jar: {streaming_jar}\n"
                    + (f"    jobconf:\n{jobconf}" if uber else ""))
    return path


#: The options of every Spark JVM the tests start (``SPARK_SUBMIT_OPTS``, set
#: for the session by conftest: the session's SparkContext, the Spark Thrift
#: Server, the drivers of the processes the tests start; ``extraJavaOptions``
#: for a Spark application's containers on YARN) and of beeline: the
#: cluster's own (``cluster.JVM_FLAGS``: the client compiler only, one
#: collector thread), with which its daemons and containers already run.  The
#: tests' JVMs run small jobs, in which the server compiler's work does not
#: pay for itself: a fresh Spark driver's start and one small job take about
#: 45 % less CPU time with the client compiler alone, the DataFrame tests on
#: the session's context (tests/test_spark_frames.py) 55 % less.  Nothing a
#: test checks depends on the JIT.
QUICK_JVM = JVM_FLAGS


def quick_yarn_spark_conf():
    """``--spark-conf`` items giving a Spark application's containers on YARN
    (its application master and executors) :data:`QUICK_JVM` (its driver,
    started by spark-submit here, takes it from ``SPARK_SUBMIT_OPTS``)."""
    return [f"spark.{role}.extraJavaOptions={QUICK_JVM}" for role in ("yarn.am", "executor")]
