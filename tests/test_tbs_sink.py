"""The Spark Structured Streaming sink (``samplegen.tbs.stream.sink``): real
streaming queries over a file source, STATE on the single-node HDFS; the
sample equals ``samplegen tbs run``'s over the same batches, also after the
query's driver was killed mid-batch and restarted from its checkpoint;
a replayed micro-batch is a no-op.  Bad parameters, bad micro-batches and
batch ids, damaged staged batches and two sinks on one STATE:
tests/hostile/test_tbs_sink.py."""
import json
import math
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from samplegen.jobs import fs
from samplegen.tbs.errors import TBSError
from samplegen.tbs.stream import current_sample, read_sample, run, sink, status
from tests.conftest import hdfs_directory, tree_digest
from tests.tbs_jobs_util import batch_frame, write_batch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "docs", "examples", "tbs_stream_sink.py")


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setenv("SAMPLEGEN_TBS_FSYNC", "0")


@pytest.fixture(scope="module")
def hdfs_base(cluster_env):
    yield from hdfs_directory("sink")


def _session(spark):
    from pyspark.sql import SparkSession
    return SparkSession(spark)


def _url(path):
    return "file://" + os.path.abspath(str(path))


def _same_state(a, b):
    """The same sample (rows, keys, columns, order) and the same ledger and
    driver numbers."""
    pd.testing.assert_frame_equal(current_sample(a), current_sample(b))
    sa, sb = status(a), status(b)
    for name in ("batches", "first_batch", "last_batch", "time", "total_weight",
                 "sample_weight", "rho", "sample_size", "per_partition"):
        assert sa[name] == sb[name], name


def _timed_frame(k, size, t):
    """Batch k's rows with a column ``t`` whose largest value is ``t``."""
    frame = batch_frame(k, size)
    frame["t"] = t - np.linspace(1.0, 0.0, size) if size else np.zeros(0)
    return frame


@pytest.mark.spark
@pytest.mark.hadoop
@pytest.mark.beside_spark
def test_a_streaming_query_keeps_the_sample_run_gives_with_state_on_hdfs(tmp_path, hdfs_base,
                                                                        spark):
    """A query over a file source, one file per micro-batch (an empty one
    among them), times from a column, STATE on HDFS: after every micro-batch
    the STATE holds that batch, and in the end the sample -- rows, keys,
    order -- and W, C, rho equal those of ``run`` over the same batches."""
    session = _session(spark)
    sizes, times = [90, 140, 0, 60, 200, 120], [1.5, 3.0, None, 6.0, 7.5, 8.0]
    times[2] = math.nextafter(times[1], math.inf)  # an empty batch comes just after the last
    every, feed = tmp_path / "batches", tmp_path / "feed"
    feed.mkdir()
    for i, (size, t) in enumerate(zip(sizes, times)):
        write_batch(str(every), i + 1, size, time=t, frame=_timed_frame(i + 1, size, t))
    params = dict(algorithm="rtbs", decay="exp", size=150, seed=5, partitions=3)
    ref = str(tmp_path / "ref")
    run(str(every), ref, dict(params, **{"lambda": 0.3}))

    state = f"{hdfs_base}/streamed"
    keep = sink(state, rate=0.3, time="t", key="id", **params)
    schema = session.read.parquet(_url(every / "batch-1.parquet")).schema
    query = (session.readStream.schema(schema).option("maxFilesPerTrigger", 1)
             .parquet(_url(feed)).writeStream.foreachBatch(keep)
             .option("checkpointLocation", _url(tmp_path / "checkpoint")).start())
    try:
        for k in range(1, len(sizes) + 1):
            name = f"batch-{k}.parquet"
            shutil.copy(every / name, tmp_path / name)
            os.rename(tmp_path / name, feed / name)       # the file appears whole
            query.processAllAvailable()
            assert status(state)["last_batch"] == k
    finally:
        query.stop()
    _same_state(state, ref)
    assert status(state)["time"] == 8.0
    assert fs.get_fs(state).listdir(f"{state}.incoming") == []    # staged batches deleted
    spark_sample = read_sample(session, state).toPandas()
    pd.testing.assert_frame_equal(spark_sample, current_sample(state), check_dtype=False)


def _example(hadoop, source, state, checkpoint, crash=None):
    env = dict(hadoop["env"], SAMPLEGEN_TBS_FSYNC="0", PYTHONPATH=ROOT)
    env.pop("SAMPLEGEN_TBS_CRASH", None)
    if crash:
        env["SAMPLEGEN_TBS_CRASH"] = crash
    proc = subprocess.Popen([sys.executable, EXAMPLE, str(source), state, str(checkpoint),
                             "--size", "400", "--rate", "0.2", "--seed", "9"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        try:                    # the JVM of a killed driver (it is in the driver's session)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.hadoop
@pytest.mark.beside_spark
def test_a_query_killed_mid_batch_and_restarted_counts_every_batch_once(tmp_path, hdfs_base,
                                                                      hadoop):
    """The runnable example of docs/TBS_JOBS.md as the query, its driver a
    process of its own, STATE on HDFS.  SIGKILL (1) while the second
    micro-batch is applied (its tasks wrote their files, no commit yet), and
    (2) right after the STATE committed a micro-batch that Spark had not
    recorded as done; each restart resumes from the checkpoint; Spark
    replays the batch of (2), which the sink skips.  The end: every batch
    once, the sample of an uninterrupted ``run``."""
    source = tmp_path / "source"
    sizes = [150, 90, 200, 120, 60]
    for k, size in enumerate(sizes, 1):
        write_batch(str(source), k, size)
        os.utime(source / f"batch-{k}.parquet", (k, k))   # the file source takes the oldest first
    ref = str(tmp_path / "ref")
    run(str(source), ref, {"algorithm": "rtbs", "decay": "exp", "lambda": 0.2, "size": 400,
                           "seed": 9, "partitions": 2})
    state, checkpoint = f"{hdfs_base}/killed", tmp_path / "checkpoint"

    code, _, err = _example(hadoop, source, state, checkpoint, crash="after-tasks:2")
    assert code == -signal.SIGKILL, err[-2000:]
    assert status(state)["last_batch"] == 1                   # batch 2 half applied: not there
    code, _, err = _example(hadoop, source, state, checkpoint, crash="sink-applied:1")
    assert code == -signal.SIGKILL, err[-2000:]
    assert status(state)["last_batch"] == 2                   # committed; Spark does not know
    code, out, err = _example(hadoop, source, state, checkpoint)
    assert code == 0, err[-3000:]
    assert "micro-batch 1 is already in STATE" in err         # the replay, skipped
    assert f"batches {len(sizes)}," in out
    _same_state(state, ref)
    assert [entry[0] for entry in _ledger(state)] == [1, 2, 3, 4, 5]
    assert fs.get_fs(state).listdir(f"{state}.incoming") == []


def _ledger(state):
    store_fs = fs.get_fs(state)
    names = store_fs.listdir(f"{state}/commits")
    newest = max(n for n in names if n.endswith(".json"))
    return json.loads(store_fs.read_bytes(f"{state}/commits/{newest}"))["ledger"]


@pytest.mark.spark
def test_a_replayed_micro_batch_is_a_no_op(tmp_path, spark):
    """Spark re-runs the last micro-batch after a restart: the STATE holds it
    already, so nothing changes (not a byte), whatever the replay's rows.
    A batch id further back, or one that skips ahead, means another
    checkpoint: an error, nothing written."""
    session = _session(spark)
    state = str(tmp_path / "state")
    keep = sink(state, rate=0.1, size=80, seed=1, partitions=2)
    frames = [session.createDataFrame(batch_frame(k, 70)) for k in (1, 2)]
    keep(frames[0], 0)
    keep(frames[1], 1)
    before = tree_digest(state)
    keep(frames[1], 1)
    keep(frames[0], 1)                         # other rows under the same id: still skipped
    assert tree_digest(state) == before
    assert status(state)["batches"] == 2
    for batch_id, words in ((0, "older than the last one"), (3, "does not follow")):
        with pytest.raises(TBSError, match=words):
            keep(frames[0], batch_id)
    assert tree_digest(state) == before
    assert os.listdir(state + ".incoming") == []
    ref = str(tmp_path / "ref")
    for k in (1, 2):
        write_batch(str(tmp_path / "b"), k, 70)
    run(str(tmp_path / "b"), ref, {"algorithm": "rtbs", "decay": "exp", "lambda": 0.1,
                                   "size": 80, "seed": 1, "partitions": 2})
    _same_state(state, ref)

