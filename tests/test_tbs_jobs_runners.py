"""The micro-batch jobs on every runner give the same STATE, byte for byte:
in-process, mrjob's local runner (real subprocess tasks), Spark (local
master); and what the hadoop runner would submit."""
import os

import pytest

from samplegen.tbs.stream import current_sample, run
from tests.conftest import tree_digest
from tests.tbs_jobs_util import KEYS, read_dir, sort_by_key, write_batch, write_batches

SIZES = [60, 0, 150, 45, 200, 90, 75, 130, 20]
TIMES = [1.0, 2.0, 3.5, 4.0, 5.0, 7.0, 8.0, 9.0, 10.5]
CASES = {
    "rtbs-exp": dict(algorithm="rtbs", decay="exp", size=120, **{"lambda": 0.2}),
    # n' = 2n: the output cap (and rows coming back into S)
    "rtbs-poly": dict(algorithm="rtbs", decay="poly", size=80, power=2.0, shift=1.0, delta1=0.2,
                      delta2=3.0, max_weight=160.0),
    "ttbs-exp": dict(algorithm="ttbs", decay="exp", size=120, mean_batch_size=80.0,
                     **{"lambda": 0.2}),
    "ttbs-poly": dict(algorithm="ttbs", decay="poly", size=80, mean_batch_size=80.0),
}
NO_CONF = {"mrjob_conf": ""}


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setenv("SAMPLEGEN_TBS_FSYNC", "0")  # the plan tells every task (test_tbs_jobs.py)


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("batches"))
    write_batches(folder, SIZES, times=TIMES, dirs=(3, 6))
    return folder


@pytest.fixture(scope="module")
def inline_digests(batches, tmp_path_factory):
    os.environ["SAMPLEGEN_TBS_FSYNC"] = "0"
    out = {}
    for name, params in CASES.items():
        state = str(tmp_path_factory.mktemp("inline") / name)
        run(batches, state, dict(params, seed=11, partitions=3, compact_every=4),
            options={"batches_per_job": 4})
        out[name] = (tree_digest(state), sort_by_key(current_sample(state)))
    return out


def _run(batches, state, name, runner, options):
    run(batches, state, dict(CASES[name], seed=11, partitions=3, compact_every=4), runner=runner,
        options=options)
    return tree_digest(state)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_inline_runner_on_threads_writes_the_same_state(tmp_path, batches, inline_digests, name):
    """The reference runs one partition after the other (its batches are too
    small for threads by default); three threads, one per partition, write the
    same bytes."""
    digest = _run(batches, str(tmp_path / "s"), name, "inline",
                  {"batches_per_job": 4, "num_cores": 3})
    assert digest == inline_digests[name][0]


def test_inline_runner_on_threads_a_failing_task_is_one_error_and_no_commit(tmp_path):
    """A batch whose footer reads but whose second row group does not: only
    the task that reads it fails; the run raises that task's error after the
    other tasks ended, commits nothing and leaves no file behind."""
    import fastparquet

    from samplegen.tbs.errors import TBSError
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [400, 400])
    write_batch(batches, 3, 400, row_group=100)
    path = os.path.join(batches, "batch-3.parquet")
    chunk = fastparquet.ParquetFile(path).row_groups[1].columns[0].meta_data
    with open(path, "r+b") as f:                     # the page header of row group 1, column 0
        f.seek(chunk.data_page_offset)
        f.write(b"\xff" * 16)
    params = dict(CASES["rtbs-exp"], seed=3, partitions=4)
    first = str(tmp_path / "two")
    os.makedirs(first)
    for k in (1, 2):
        os.link(os.path.join(batches, f"batch-{k}.parquet"),
                os.path.join(first, f"batch-{k}.parquet"))
    run(first, state, params, options={"num_cores": 4})
    digest = tree_digest(state)
    with pytest.raises(TBSError, match=r"^batch batch-3.parquet \(partition 1\): "
                                       r"cannot read .*batch-3.parquet"):
        run(batches, state, {}, options={"num_cores": 4})
    assert tree_digest(state) == digest


@pytest.mark.mrjob
@pytest.mark.parametrize("name", ["rtbs-exp", "rtbs-poly", "ttbs-poly"])
def test_mrjob_local_runner_writes_the_same_state(tmp_path, batches, inline_digests, name):
    digest = _run(batches, str(tmp_path / "s"), name, "local",
                  dict(NO_CONF, batches_per_job=16, num_cores=2))
    assert digest == inline_digests[name][0]


def _damaged_batches(batches, dest):
    """A copy of *batches* whose batch 5 has a fine footer but damaged data
    pages: only the map task that reads it finds out."""
    import shutil
    shutil.copytree(batches, dest)
    path = os.path.join(dest, "batch-5.parquet")
    data = bytearray(open(path, "rb").read())
    data[4:400] = b"\x07" * 396                     # column chunk data of the first row group
    open(path, "wb").write(bytes(data))
    return dest


def _task_error_is_one_line(tmp_path, batches, capsys, runner_args):
    from tests.conftest import tbs_main as main
    bad = _damaged_batches(batches, str(tmp_path / "bad"))
    state = str(tmp_path / "s")
    rc = main(["run", bad, state, "--algorithm", "rtbs", "--decay", "exp", "--lambda", "0.2",
               "--size", "50", "--seed", "1", "--batches-per-job", "3", "-q", *runner_args])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "batch batch-5.parquet (partition" in err, err
    assert "cannot read" in err
    # batches 1-3 (the first job) are committed; 4-6 (the failed job) left nothing behind
    committed = sorted(os.listdir(os.path.join(state, "deltas")))
    assert committed == ["0000000001", "0000000002", "0000000003"]


@pytest.mark.mrjob
def test_mrjob_task_error_is_one_line(tmp_path, batches, capsys):
    """A batch whose footer is fine but whose data pages are damaged is found by
    a map task; the driver reports the task's error (its TBSError, by the
    engines' task_errors protocol) and commits nothing of that job."""
    _task_error_is_one_line(tmp_path, batches, capsys,
                            ["--runner", "local", "--mrjob-conf", ""])


@pytest.mark.spark
def test_spark_task_error_is_one_line(tmp_path, batches, capsys, spark):
    """The same damaged batch found by a Spark task."""
    _task_error_is_one_line(tmp_path, batches, capsys, ["--runner", "spark"])


@pytest.mark.spark
def test_spark_runner_writes_the_same_state_and_spark_reads_the_deltas(tmp_path, batches,
                                                                         inline_digests, spark):
    for name in CASES:
        state = str(tmp_path / name)
        digest = _run(batches, state, name, "spark", {"batches_per_job": 16})
        assert digest == inline_digests[name][0], name
    from pyspark.sql import SparkSession
    session = SparkSession(spark)
    state = str(tmp_path / "rtbs-poly")
    for k in (len(SIZES) - 1, len(SIZES)):
        for side in ("in", "out"):
            path = os.path.join(state, "deltas", f"{k:010d}", side)
            frame = session.read.parquet(path)
            expected = read_dir(path)
            collected = frame.select(*KEYS).collect()        # one job: the count and the keys
            assert len(collected) == len(expected)
            assert set(frame.columns) == set(expected.columns)
            rows = sorted((r["_sg_batch"], r["_sg_row"]) for r in collected)
            assert rows == sorted(zip(expected["_sg_batch"], expected["_sg_row"]))
