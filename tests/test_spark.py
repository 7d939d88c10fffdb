"""The native PySpark engine (``--runner spark``) on a local Spark: the same
samples as the inline runner, byte for byte, whatever the partitioning; the
reduce tasks' memory bound; bad input as one line; and MRSample on mrjob's
own Spark runner."""
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from samplegen.jobs import driver, engines
from samplegen.jobs.engines import mapreduce, rowcache, spool
from samplegen.jobs.engines.spark import context, job, shuffle
from samplegen.jobs.store import Matrix
from samplegen.udfs.errors import InputError, ParameterError

from .conftest import NO_CONF, make, run_cli, sample_digests, tree_digest
from .test_mrjob import (  # noqa: F401  (fixtures)
    RunnerSuite,
    check_task_errors,
    corrupt_copy,
    failing_udfs,
    fold_reference,
    inputs,
)

pytestmark = pytest.mark.spark

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.usefixtures("spark")
class TestSpark(RunnerSuite):
    """The runner suite of the MapReduce engine, on ``--runner spark``."""

    RUNNER = "spark"


def _generate(src, dest, udf, params, runner, conf=(), **kw):
    driver.generate(src, dest, udf, params, 11, runner=runner,
                    options=dict(NO_CONF, spark_conf=list(conf)), **kw)
    return dest


#: (inputPartitions, reducePartitions, shuffle bin budget, shuffle, worker memory) of
#: the Spark runs: the id shuffle with the input's rows in memory (one bin per
#: sample), then read from the cache file (a 1 MiB budget; bins of 64 rows' ids),
#: and the row shuffle (bins of a few rows)
LAYOUTS = [(1, 1, 16 << 20, "ids", "512m"), (3, 2, 4096, "rows", "512m"),
           (7, None, 1024, "ids", "1m")]


@pytest.mark.parametrize("udf,params,src", [
    ("holdout", {"ratio": 0.6, "repeats": 3, "fraction": 0.9, "exact": False}, "wide"),
    ("kfold", {"k": 5, "balanced": False}, "sparse"),
    ("kfold", {"k": 3, "naive": True}, "dense"),
    ("holdout", {"ratio": 0.7, "repeats": 2, "exact": True}, "sparse"),
    ("kfold", {"k": 4, "balanced": True}, "wide"),
    ("bootstrap", {"samples": 4, "size": 900}, "wide"),
    ("bootstrap", {"samples": 2, "oob": True}, "sparse"),
    ("samplegen.udfs.examples:bernoulli", {"p": 0.3}, "dense"),
    ("samplegen.udfs.examples:paper_holdout_series", {"ratio": 0.5, "repeats": 2}, "sparse")])
def test_same_bytes_as_inline_whatever_the_partitions(spark, tmp_path, inputs, udf, params, src):
    inline = _generate(inputs[src], str(tmp_path / "inline"), udf, params, "inline")
    expected = sample_digests(inline)
    samples = driver.info(inline)["samples"]
    assert expected and all(s["rows"] > 0 for s in samples)
    for i, (maps, reduces, budget, mode, memory) in enumerate(LAYOUTS):
        conf = [f"{job.INPUT_PARTITIONS}={maps}", f"{job.SHUFFLE}={mode}",
                f"{job.WORKER_MEMORY}={memory}"]
        if reduces:
            conf.append(f"{job.REDUCE_PARTITIONS}={reduces}")
        stats = []
        dest = str(tmp_path / f"spark{i}")
        driver.generate(inputs[src], dest, udf, params, 11, runner="spark", bin_budget=budget,
                        options={"spark_conf": conf, "on_task_stats": stats.append})
        assert sample_digests(dest) == expected, LAYOUTS[i]
        assert driver.info(dest)["samples"] == samples
        assert stats[0]["map_tasks"] >= maps
        if reduces:
            composed = 2 if udf == "kfold" and not params.get("naive") else 1
            assert stats[0]["reduce_tasks"] == reduces * composed


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 20,000 x 100 matrix (blocks of 100) and the digests of its
    4-sample bootstrap on the inline runner: ``(path, digests)``, made once
    for both shuffle modes."""
    base = tmp_path_factory.mktemp("big")
    src = make(base, "big", rows=20000, cols=100, block_size=100, seed=4)
    inline = _generate(src, str(base / "inline"), "bootstrap", {"samples": 4}, "inline")
    return src, sample_digests(inline)


@pytest.mark.parametrize("mode", ["rows", "ids"])
def test_task_memory_is_bounded_when_a_task_gets_more_than_its_share(spark, tmp_path, big, mode):
    """One reduce task receives every group (about 87 MB of rows) with a
    1 MiB budget.  Row shuffle: it spills almost all of the rows and holds one
    shuffle bin at a time.  Id shuffle: it spills keys only (16 bytes per
    occurrence plus frame headers) and, the input being larger than half
    its budget, reads the rows it fetches one by one from the part files.  Map tasks hold at
    most 256 KiB of chunks before handing them to the JVM.  Both grow by far less than what
    they move."""
    src, inline = big
    stats = []
    dest = str(tmp_path / "spark")
    driver.generate(src, dest, "bootstrap", {"samples": 4}, 11, runner="spark",
                    bin_budget=256 << 10,
                    options={"spark_conf": [f"{job.REDUCE_PARTITIONS}=1",
                                            f"{job.INPUT_PARTITIONS}=4",
                                            f"{job.WORKER_MEMORY}=1m",
                                            f"{job.SHUFFLE}={mode}"],
                             "on_task_stats": stats.append})
    assert sample_digests(dest) == inline
    rows_bytes = 4 * 20000 * (1068 + 16)        # what the one reduce task re-blocks
    (run,) = stats
    assert run["reduce_tasks"] == 1 and run["map_tasks"] >= 4
    if mode == "rows":
        assert rows_bytes - (1 << 20) <= run["sort_spilled_bytes"] <= rows_bytes * 1.05
    else:
        assert 4 * 20000 * 16 - (1 << 20) <= run["sort_spilled_bytes"] <= rows_bytes / 16
    assert run["reduce_peak_rss_growth"] < rows_bytes / 8
    assert run["map_peak_rss_growth"] < rows_bytes / run["map_tasks"] / 3


def test_spool_orders_records_and_spills_past_its_budget():
    from samplegen.jobs.blocks import Block
    rng = np.random.default_rng(0)
    keys = [(s, 0, b, h) for s in range(3) for b in range(4) for h in range(5)]
    chunks = {k: Block.dense(rng.standard_normal((3, 7)), row_ids=np.arange(3),
                             relpos=np.arange(3, dtype=np.uint64)).encoded() for k in keys}
    arrival = [keys[i] for i in rng.permutation(len(keys))]
    for budget, spilled in [(1 << 30, False), (1, True)]:
        with spool.SortSpool(budget) as ordered:
            for key in arrival:
                ordered.add(key, chunks[key])
            out = list(ordered.sorted())
        assert [k for k, _ in out] == keys
        assert all(c.encode() == chunks[k].encode() for k, c in out)
        assert (ordered.spilled_bytes > 0) == spilled


def test_shuffle_frames_round_trip_dense_sparse_and_empty_chunks():
    from samplegen.jobs.blocks import SPARSE, Block
    rng = np.random.default_rng(1)
    dense = Block.dense(rng.standard_normal((5, 7)), row_ids=np.arange(5),
                        relpos=np.arange(5, dtype=np.uint64)).encoded()
    values = rng.standard_normal((6, 9))
    values[values < 0.5] = 0.0
    sparse = Block.from_dense(values, SPARSE, row_ids=np.arange(6)).encoded()
    sparse = sparse.replace(relpos=np.arange(6, dtype=np.uint64))
    records = [((1, 2, 3, 4), dense), ((5, 0, 0, 7), sparse),
               ((0, 0, 0, 0), sparse.take([], row_ids=np.empty(0, np.int64),
                                          relpos=np.empty(0, np.uint64))),
               ((9, 9, 9, 9), dense.take([4, 1, 1], row_ids=np.array([4, 1, 1])))]
    frames = shuffle.ChunkFrames()
    back = frames.loads(frames.dumps(records))
    assert [k for k, _ in back] == [k for k, _ in records]
    for (_, a), (_, b) in zip(records, back):
        assert (a.rows, a.cols, a.kind) == (b.rows, b.cols, b.kind)
        assert a.encode() == b.encode() and (a.relpos is None) == (b.relpos is None)


def _row_source(path, token="t"):
    m = Matrix.open(path)
    return rowcache.RowSource(m.part_uris(), m.rows, m.cols, m.block_size, token)


def _input_text(path):
    """Each column block's rows as base64 text, in row order (the expected fetch)."""
    from samplegen.jobs.blocks import parse_encoded
    m, tables = Matrix.open(path), {}
    for part in m.part_uris():
        for line in open(part, "rb"):
            h, v, block = parse_encoded(line)
            tables.setdefault(v, {})[h] = block.text
    return {v: np.concatenate([t[h] for h in sorted(t)]) for v, t in tables.items()}


def _fetch_all(source, budget, ids):
    from samplegen.jobs.blocks import DENSE, EncodedBlock
    out = {}
    for v in range(source.n_vblocks()):
        pieces = [EncodedBlock(DENSE, len(chunk), 1, np.empty((len(chunk), 0), np.uint8),
                               row_ids=chunk) for chunk in np.array_split(ids, 5)]
        fetched = list(source.fetch(v, enumerate(pieces), budget))
        assert [h for h, _ in fetched] == list(range(5))
        out[v] = np.concatenate([b.text for _, b in fetched])
    return out


def _split_parts(src, dest, n):
    """A copy of matrix *src* whose block lines are dealt round robin into *n* part files."""
    shutil.copytree(src, dest)
    (part,) = Matrix.open(dest).part_uris()
    lines = open(part, "rb").readlines()
    os.remove(part)
    for i in range(n):
        open(os.path.join(dest, f"part-{i:05d}"), "wb").writelines(lines[i::n])
    return dest


@pytest.mark.parametrize("budget", [1 << 30, 1 << 10])
def test_row_source_fetches_the_inputs_rows_mapped_or_read(tmp_path, inputs, budget):
    """Rows come back byte for byte, repeats and any order, from several part
    files and column blocks of different widths: memory-mapped when the parts
    fit half the budget, else read one by one."""
    path = _split_parts(inputs["wide"], str(tmp_path / "wide"), 2)
    source = _row_source(path)
    assert len(source.parts) == 2 and source.n_vblocks() == 3
    ids = np.random.default_rng(5).integers(0, source.rows, 2000)
    try:
        fetched = _fetch_all(source, budget, ids)
    finally:
        rowcache.drop("t")
    expected = _input_text(path)
    for v in range(3):
        assert np.array_equal(fetched[v], expected[v][ids]), v


@pytest.mark.hadoop
def test_row_source_copies_parts_that_are_not_local_files(hadoop, tmp_path, inputs,
                                                          monkeypatch):
    """Part files on HDFS (the single-node cluster) are copied once per
    executor and removed by drop()."""
    from samplegen.jobs import fs
    for key, value in hadoop["env"].items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(fs, "_REMOTE", {})
    monkeypatch.setenv("SPARK_LOCAL_DIRS", str(tmp_path / "scratch"))
    os.mkdir(tmp_path / "scratch")
    remote = f"hdfs:///samplegen-tests/rowsource-{os.getpid()}"
    fs.get_fs(remote).rmtree(remote)
    fs.get_fs(remote).upload(inputs["dense"], remote)
    source = _row_source(remote, token="remote")
    assert all(p.startswith("hdfs://") for p in source.parts)
    ids = np.random.default_rng(6).integers(0, source.rows, 500)
    try:
        fetched = _fetch_all(source, 1 << 30, ids)
        copies = os.listdir(tmp_path / "scratch")
        assert len([c for c in copies if "-p" in c]) == len(source.parts)
    finally:
        rowcache.drop("remote")
        fs.get_fs(remote).rmtree(remote)
    assert os.listdir(tmp_path / "scratch") == []
    assert np.array_equal(fetched[0], _input_text(inputs["dense"])[0][ids])


def test_row_source_refuses_truncated_or_repeated_blocks(tmp_path, inputs):
    """Damaged part files are one InputError naming the problem."""
    for damage, message in [("truncate", "truncated"), ("repeat", "appears twice"),
                            ("last newline", None)]:
        dest = str(tmp_path / damage)
        shutil.copytree(inputs["dense"], dest)
        part = Matrix.open(dest).part_uris()[0]
        data = open(part, "rb").read()
        first = data[:data.index(b"\n") + 1]
        open(part, "wb").write({"truncate": data[:-100], "repeat": data + first,
                                "last newline": data[:-1]}[damage])
        try:
            if message is None:     # tolerated: a last line without its newline
                ids = np.arange(Matrix.open(dest).rows)
                text = _fetch_all(_row_source(dest, damage), 1 << 30, ids)[0]
                assert np.array_equal(text, _input_text(inputs["dense"])[0])
            else:
                with pytest.raises(InputError, match=message):
                    list(_row_source(dest, damage).fetch(0, [], 1 << 30))
        finally:
            rowcache.drop(damage)


def test_bad_spark_settings_are_parameter_errors(spark, tmp_path, inputs, capsys):
    for conf in (["spark.samplegen.reducePartitions=0"], ["spark.python.worker.memory=lots"],
                 ["spark.samplegen.shuffle=keys"], ["no-equals-sign"]):
        with pytest.raises(ParameterError):
            _generate(inputs["dense"], str(tmp_path / "out"), "holdout", {"ratio": 0.5}, "spark",
                      conf)
        assert not os.path.exists(tmp_path / "out")
    code, _, err = run_cli(capsys, "holdout", inputs["dense"], tmp_path / "out", "--ratio", 0.5,
                           "--seed", 1, "--runner", "spark", "--spark-conf", "x")
    assert code == 2 and err.count("\n") == 1 and "KEY=VALUE" in err


def test_user_udf_module_is_shipped_to_the_executors(spark, tmp_path, inputs, monkeypatch):
    module = tmp_path / "mods" / "sg_test_every_third.py"
    module.parent.mkdir()
    module.write_text(
        "import numpy as np\n"
        "def every_third(start, stop, rng, params):\n"
        "    ids = np.arange(start, stop)\n"
        "    keep = np.flatnonzero(ids % 3 == 0)\n"
        "    relpos = (ids[keep] * 7919 % 1000).astype(np.uint64)\n"
        "    return keep, np.zeros(keep.size, np.int64), relpos\n")
    monkeypatch.syspath_prepend(str(module.parent))
    inline = _generate(inputs["dense"], str(tmp_path / "inline"), "sg_test_every_third:every_third",
                       {}, "inline")
    dest = _generate(inputs["dense"], str(tmp_path / "spark"), "sg_test_every_third:every_third",
                     {}, "spark")
    assert sample_digests(dest) == sample_digests(inline)
    ids, _ = Matrix.open(os.path.join(dest, "sample-0")).to_numpy()
    assert np.array_equal(np.sort(ids), np.arange(0, 700, 3))


def test_spark_defaults_file_and_failure_messages(tmp_path):
    conf = tmp_path / "spark-defaults.conf"
    conf.write_text("# comment\n! also a comment\nspark.master   spark://host:7077\n"
                    "spark.python.worker.memory=1g\nspark.local.dir: /scratch\n\n")
    assert context.read_conf_file(str(conf)) == {
        "spark.master": "spark://host:7077", "spark.python.worker.memory": "1g",
        "spark.local.dir": "/scratch"}
    java = ("An error occurred while calling o93.collectAndServe.\n"
            ": org.apache.spark.SparkException: Job aborted due to stage failure: boom\n"
            "org.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
            '  File "/x/udf.py", line 2, in broken\n    return len(None)\n'
            "TypeError: object of type 'NoneType' has no len()\n\n"
            "\tat org.apache.spark.api.python.BasePythonRunner.handle(PythonRunner.scala:1)\n")
    assert context.failure_cause(java, "X") == "TypeError: object of type 'NoneType' has no len()"
    assert context.failure_cause(java.split("org.apache.spark.api")[0], "X") == \
        "org.apache.spark.SparkException: Job aborted due to stage failure: boom"
    assert job.memory_bytes("512m") == 512 << 20
    assert job.memory_bytes("2g") == 2 << 30 and job.memory_bytes("64") == 64 << 20


def test_corrupt_block_fails_in_a_task_as_one_error(spark, tmp_path, inputs):
    src = corrupt_copy(inputs["dense"], str(tmp_path / "copy"))
    before = tree_digest(src)
    with pytest.raises(InputError, match=r"^corrupt .*in block \(\d+, \d+\)"):
        _generate(src, str(tmp_path / "out"), "kfold", {"k": 3}, "spark")
    assert sorted(os.listdir(tmp_path)) == ["copy"] and tree_digest(src) == before


def test_a_task_error_comes_back_as_its_class_and_message(spark, tmp_path, inputs, failing_udfs):
    """As on the MapReduce runners: the task's samplegen error is raised again,
    same class and message (Spark: the marker line in the task's exception);
    a bug is one RuntimeError."""
    check_task_errors(lambda udf: _generate(inputs["dense"], str(tmp_path / "out"), udf, {},
                                            "spark"),
                      failing_udfs, RuntimeError, "^the Spark job failed: TypeError: ")
    assert sorted(os.listdir(tmp_path)) == ["mods"]


@pytest.mark.slow
def test_command_line_one_line_errors_in_a_fresh_process(tmp_path, inputs):
    """A fresh process, as a user runs it: Spark's own console output stays
    out of the way; a corrupt block (failing inside a task) and a bad master
    (failing in spark-submit) each come back as one line, exit status 2."""
    src = corrupt_copy(inputs["dense"], str(tmp_path / "copy"))
    proc = subprocess.run([sys.executable, "-m", "samplegen", "holdout", src, str(tmp_path / "out"),
                           "--ratio", "0.5", "--seed", "1", "--runner", "spark",
                           "--spark-master", "local[1]"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    # Off a terminal a slow start may log a progress line first; the error is one line.
    assert _without_progress(proc.stderr) == proc.stderr.splitlines()[-1:] and proc.stdout == ""
    assert proc.stderr.splitlines()[-1].startswith("samplegen: error: corrupt")
    assert "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["copy"]
    proc = subprocess.run([sys.executable, "-m", "samplegen", "bootstrap", inputs["dense"],
                           str(tmp_path / "out"), "--samples", "2", "--seed", "1", "--runner",
                           "spark", "--spark-master", "nowhere://x"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert _without_progress(proc.stderr) == proc.stderr.splitlines()[-1:], proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        "samplegen: error: invalid Spark master 'nowhere://x': Master")
    assert sorted(os.listdir(tmp_path)) == ["copy"]


def _without_progress(stderr):
    """The lines of *stderr* that are not progress log lines
    (``samplegen: holdout:  40% 4/11 input blocks, ...``)."""
    return [line for line in stderr.splitlines()
            if not re.match(r"samplegen: [a-z-]+: +\d+% ", line)]


@pytest.mark.slow
def test_mrjob_job_runs_unchanged_on_mrjobs_spark_runner(tmp_path, inputs, monkeypatch):
    """MRSample through mrjob's own Spark runner (``-r spark``, spark-submit
    in a separate process) writes the same bytes as the inline runner."""
    inline = _generate(inputs["wide"], str(tmp_path / "inline"), "kfold", {"k": 4}, "inline")

    def mrjob_spark(plan, paths, runner, options):
        # the harness and its tasks run on this interpreter (mrjob's default
        # for a cluster is whatever `python3` is first on the PATH)
        options = dict(options, mrjob_args=["--spark-master", "local[2]",
                                            "--python-bin", sys.executable,
                                            "--spark-tmp-dir", str(tmp_path / "spark-tmp")])
        return mapreduce.run_mrjob(plan, paths, "spark", options)
    monkeypatch.setattr(engines, "engine", lambda runner: mrjob_spark)
    dest = _generate(inputs["wide"], str(tmp_path / "mrjob-spark"), "kfold", {"k": 4}, "spark")
    assert sample_digests(dest) == sample_digests(inline)


@pytest.mark.slow
def test_spark_submit_runs_the_command_line_with_its_own_master(tmp_path, inputs):
    """``spark-submit --py-files samplegen.zip samplegen/__main__.py ...``: the engine
    takes spark-submit's context (master, settings) and writes the same bytes."""
    import pyspark

    from samplegen.jobs.package import build_zip
    inline = _generate(inputs["sparse"], str(tmp_path / "inline"), "kfold", {"k": 3}, "inline")
    home = os.path.dirname(pyspark.__file__)
    env = dict(os.environ, SPARK_HOME=home, PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    proc = subprocess.run(
        [os.path.join(home, "bin", "spark-submit"), "--master", "local[1]",
         "--py-files", build_zip(str(tmp_path / "dist" / "samplegen.zip")),
         os.path.join(ROOT, "samplegen", "__main__.py"), "kfold", inputs["sparse"],
         str(tmp_path / "submitted"), "--k", "3", "--seed", "11", "--runner", "spark"],
        cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sample_digests(str(tmp_path / "submitted")) == sample_digests(inline)
