"""Every HDFS path of samplegen on the real single-node Hadoop (``make
hadoop-up``): the filesystem layer (WebHDFS), every sampling method through
mrjob's hadoop runner, Spark, import / export / info, the micro-batch jobs
with STATE on HDFS, and runs whose tasks or job are killed.  Each result is
compared byte for byte with the inline runner on local copies."""
import functools
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import uuid

import numpy as np
import pytest

from samplegen.jobs import cluster, fs
from samplegen.udfs.errors import OutputError

from .cluster_jobs import quick_yarn_spark_conf, write_mrjob_conf
from .conftest import hdfs_directory, in_process, sample_digests

pytestmark = pytest.mark.hadoop

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAMPLEGEN = [sys.executable, "-m", "samplegen"]


def run(hadoop, *cmd, timeout=900, check=True):
    proc = subprocess.run([str(c) for c in cmd], env=hadoop["env"], capture_output=True,
                          timeout=timeout)
    if check:
        assert proc.returncode == 0, (cmd, proc.stderr.decode(errors="replace")[-3000:])
    return proc


def samplegen(hadoop, *args, **kw):
    return run(hadoop, *SAMPLEGEN, "-q", *args, **kw)


@pytest.fixture(scope="module")
def base(cluster_env):
    """A fresh HDFS directory (``hdfs:///...``) for this module, removed afterwards."""
    yield from hdfs_directory("hdfs")


@pytest.fixture(scope="module")
def mrjob_conf(hadoop, tmp_path_factory):
    return write_mrjob_conf(tmp_path_factory.mktemp("conf") / "mrjob.conf",
                            hadoop["streaming_jar"])


@pytest.fixture(scope="module")
def uber_conf(hadoop, tmp_path_factory):
    """:func:`mrjob_conf` in YARN's uber mode (``cluster_jobs.UBER_JOBCONF``:
    which runs take it, and why)."""
    return write_mrjob_conf(tmp_path_factory.mktemp("uber") / "mrjob.conf",
                            hadoop["streaming_jar"], uber=True)


@pytest.fixture(scope="module")
def inline(tmp_path_factory):
    """``inline(command, src, *params)``: the sample digests of
    ``samplegen COMMAND SRC DEST PARAMS --runner inline`` on a local input,
    run once per module for each distinct command line (several tests
    compare the cluster's runs with the same reference)."""
    done = {}

    def reference(command, src, *params):
        key = (command, str(src), *map(str, params))
        if key not in done:
            dest = tmp_path_factory.mktemp("inline") / "run"
            in_process(command, src, dest, *params, "--runner", "inline")
            done[key] = sample_digests(dest)
        return done[key]
    return reference


@pytest.fixture(scope="module")
def matrices(hadoop, base, tmp_path_factory):
    """A dense and a sparse matrix, locally and on HDFS (written there by
    samplegen itself)."""
    local = tmp_path_factory.mktemp("matrices")
    out = {}
    for name, extra in (("dense", []), ("sparse", ["--density", 0.3])):
        for where in (str(local / name), f"{base}/{name}"):
            in_process("make-matrix", where, "--rows", 1500, "--cols", 12,
                       "--block-size", 100, "--seed", 11, *extra)
        out[name] = (str(local / name), f"{base}/{name}")
    return out


def fetch(uri, dest):
    fs.get_fs(uri).download(uri, str(dest))
    return dest


# ---------------------------------------------------------------------------
# the filesystem layer
# ---------------------------------------------------------------------------
def test_metadata_operations_take_milliseconds(base):
    """exists, listdir and rename from Python: one HTTP request each, no JVM
    (target: at most 20 ms; an ``hdfs dfs`` process takes about a second)."""
    remote = fs.get_fs(base)
    d = f"{base}/meta"
    remote.makedirs(f"{d}/a")
    times = {"exists": [], "listdir": [], "rename": []}
    for _ in range(30):
        for op, call in (("exists", lambda: remote.exists(f"{d}/a")),
                         ("listdir", lambda: remote.listdir(d)),
                         ("rename", lambda: remote.rename(f"{d}/a", f"{d}/b"))):
            t = time.perf_counter()
            call()
            times[op].append(time.perf_counter() - t)
        remote.rename(f"{d}/b", f"{d}/a")
    medians = {op: statistics.median(ts) * 1000 for op, ts in times.items()}
    assert all(ms <= 20 for ms in medians.values()), medians


def test_atomic_writes_and_renames(base, monkeypatch):
    remote = fs.get_fs(base)
    d = f"{base}/atomic"
    remote.makedirs(d)
    monkeypatch.setattr(fs._AtomicRemoteWriter, "CHUNK", 1000)   # create, then appends
    data = bytes(range(256)) * 37
    writer = remote.open_atomic(f"{d}/f")
    for i in range(0, len(data), 999):
        writer.write(data[i:i + 999])
    assert remote.listdir(d)[0].startswith(".f.tmp-")            # not under its name yet
    writer.close()
    assert remote.read_bytes(f"{d}/f") == data
    assert remote.read_range(f"{d}/f", 1000, 10) == data[1000:1010]
    with remote.open_read(f"{d}/f") as f:
        assert f.read() == data
    remote.write_bytes(f"{d}/f", b"new")                           # replaces, whole
    assert remote.read_bytes(f"{d}/f") == b"new"
    broken = remote.open_atomic(f"{d}/g")
    broken.write(b"half")
    broken.abort()
    assert remote.listdir(d) == ["f"]
    with pytest.raises(FileExistsError):
        remote.create_exclusive(f"{d}/f", b"x")
    remote.makedirs(f"{d}/x/inner")
    remote.makedirs(f"{d}/y")
    with pytest.raises(FileExistsError):
        remote.rename(f"{d}/y", f"{d}/x")                          # never into it
    assert remote.listdir(f"{d}/x") == ["inner"]
    remote.rmtree(f"{d}/x")
    with pytest.raises(OutputError, match="does not exist"):   # a removed staging
        remote.open_atomic(f"{d}/x/sample/part-v00000")             # is not recreated
    assert not remote.exists(f"{d}/x")


def test_mrjob_sees_the_same_hdfs_through_the_layer(hadoop, base, tmp_path):
    """The hadoop runner's filesystem (WebHDFS, no JVM per operation) answers
    as mrjob's own ``hadoop fs`` filesystem does, on the same files."""
    import gzip

    from mrjob.fs.hadoop import HadoopFilesystem

    from samplegen.jobs.engines.hadoop_runner import LayerFilesystem, installed_version
    launcher = os.path.join(hadoop["workdir"], "bin", "hadoop")
    layer, hadoop_fs = LayerFilesystem(), HadoopFilesystem([launcher])
    d = f"{base}/mrjob-fs"
    (tmp_path / "a.txt").write_bytes(b"one\ntwo\n")
    (tmp_path / "b.gz").write_bytes(gzip.compress(b"three\n"))
    layer.mkdir(f"{d}/sub")
    layer.put(str(tmp_path / "a.txt"), f"{d}/a.txt")
    layer.put(str(tmp_path / "b.gz"), f"{d}/sub/b.gz")
    layer.touchz(f"{d}/_SUCCESS")
    with pytest.raises(OSError):
        layer.touchz(f"{d}/a.txt")                          # not over a non-empty file
    for path in (d, f"{d}/", f"{d}/a.txt"):
        assert list(layer.ls(path)) == sorted(hadoop_fs.ls(path)), path
        assert b"".join(layer.cat(path)) == b"".join(hadoop_fs.cat(path)), path
        assert layer.du(path) == hadoop_fs.du(path)
    assert b"three" in b"".join(layer.cat(f"{d}/sub/b.gz"))   # decompressed, like mrjob's
    assert list(layer.ls(f"{d}/none")) == [] and not layer.exists(f"{d}/none")
    assert layer.exists(f"{d}/sub") and hadoop_fs.exists(f"{d}/sub")
    assert not layer.can_handle_path(f"{d}/*.txt")          # globs stay with hadoop fs
    layer.rm(f"{d}/sub")
    assert not hadoop_fs.exists(f"{d}/sub")
    assert installed_version(launcher) == \
        hadoop_fs.get_hadoop_version()                        # from the jars, no JVM


def test_micro_batch_store_and_lock(base):
    from samplegen.tbs.errors import TBSError
    from samplegen.tbs.stream.storage import Lock, Store
    store = Store(f"{base}/store")
    store.write_json("a/b.json", {"k": [1, 2.5]})
    assert store.read_json("a/b.json") == {"k": [1, 2.5]}
    assert store.uri("a/b.json").startswith("hdfs://127.0.0.1:")
    with Lock(store):
        with pytest.raises(TBSError, match="in use"):
            Lock(Store(f"{base}/store")).acquire()
    with Lock(store):                                              # released: free again
        pass
    store.write_bytes("d/e/f.bin", b"x")        # emptied directories go (the STATE stays small)
    store.remove("d/e/f.bin")
    store.remove_parents_if_empty(["d/e/f.bin"])
    store.write_bytes("g/h.bin", b"y")
    store.remove("g/h.bin")
    store.remove_empty_dirs()
    assert sorted(fs.get_fs(base).listdir(f"{base}/store")) == ["a"]


# ---------------------------------------------------------------------------
# every sampling method on the hadoop runner, and on Spark
# ---------------------------------------------------------------------------
METHODS = [
    # the fold-mode k-fold keeps the cluster's two reducers (training sets composed
    # from the tails both write); the others run in uber mode (cluster_jobs.UBER_JOBCONF)
    ("kfold", ["--k", 3, "--seed", 5], "dense", False),
    ("kfold-naive", ["--k", 3, "--seed", 5, "--naive"], "dense", True),
    ("bootstrap", ["--samples", 3, "--size", 1000, "--seed", 5], "sparse", True),
]


@pytest.mark.parametrize("method,params,kind,uber", METHODS, ids=[m[0] for m in METHODS])
def test_hadoop_runner_matches_inline(hadoop, base, matrices, mrjob_conf, uber_conf, inline,
                                      tmp_path, method, params, kind, uber):
    local, remote = matrices[kind]
    command = method.split("-")[0]
    out = f"{base}/{method}"
    samplegen(hadoop, command, remote, out, *params, "--runner", "hadoop",
              "--mrjob-conf", uber_conf if uber else mrjob_conf)
    assert sample_digests(fetch(out, tmp_path / "hadoop")) == inline(command, local, *params)


def test_stratified_and_grouped_runs_on_hadoop_read_their_rows_codes_from_hdfs(
        hadoop, base, uber_conf, inline, tmp_path):
    """Classes recorded at import on HDFS (label y), and classes and groups
    of a pre-pass written next to the run on HDFS (columns g, y): the tasks
    read their rows' codes from HDFS; the same bytes as inline on a local
    copy.  (Uber mode: the point is the side files on HDFS, not the task
    layout.)"""
    rng = np.random.default_rng(4)
    rows = np.column_stack([rng.normal(size=(900, 3)), rng.integers(0, 3, 900),
                            rng.choice([0, 1], size=900, p=[0.8, 0.2])])
    csv = tmp_path / "labelled.csv"
    np.savetxt(csv, rows, delimiter=",", header="a,b,c,y,g", comments="")
    local, remote = str(tmp_path / "lab"), f"{base}/lab"
    in_process("import", csv, local, "--block-size", 100, "--label", "y")
    samplegen(hadoop, "import", csv, remote, "--block-size", 100, "--label", "y")
    assert fs.get_fs(remote).exists(f"{remote}/_label.codes")
    runs = (("kfold", ["--k", 4, "--stratify", "y"]),
            ("bootstrap", ["--samples", 2, "--oob", "--stratify", "g"]),
            ("holdout", ["--ratio", 0.5, "--groups", "y"]))
    # the three jobs at once: each waits mostly on its client's and its
    # application master's start, which overlap (one container each)
    procs = [subprocess.Popen([*SAMPLEGEN, "-q", command, remote, f"{base}/strat-{command}",
                               *map(str, params), "--seed", "3", "--runner", "hadoop",
                               "--mrjob-conf", str(uber_conf)], env=hadoop["env"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for command, params in runs]
    try:
        for proc in procs:
            _, err = proc.communicate(timeout=900)
            assert proc.returncode == 0, err.decode(errors="replace")[-3000:]
    finally:
        for proc in procs:
            proc.kill()                     # those still running after a failure
    for command, params in runs:
        fetched = fetch(f"{base}/strat-{command}", tmp_path / f"hadoop-{command}")
        assert sample_digests(fetched) == inline(command, local, *params, "--seed", 3)
        assert not [n for n in os.listdir(fetched) if n.startswith(("_strata", "_groups"))]


def test_user_udf_through_make_on_hadoop(hadoop, base, matrices, uber_conf, inline, tmp_path):
    """``make`` with RUNNER=hadoop and hdfs:// paths, and a user's UDF shipped
    to the containers.  (Uber mode: the point is what is shipped and the
    make target's command line, not the task layout.)"""
    (tmp_path / "udfmod").mkdir()
    (tmp_path / "udfmod" / "keep.py").write_text(
        "import numpy as np\n"
        "from samplegen.udfs import Purpose, stream\n"
        "def every_third(start, stop, rng, params):\n"
        "    lanes = rng.block(stream(Purpose.USER, 0), start, stop)\n"
        "    keep = (lanes[:, 0] % np.uint64(params['m'])) == 0\n"
        "    offset = np.flatnonzero(keep)\n"
        "    return offset, np.zeros(offset.size, np.int64), lanes[keep, 1]\n"
        "every_third.sample_names = ['kept']\n")
    env = dict(hadoop["env"], PYTHONPATH=str(tmp_path / "udfmod"))
    local, remote = matrices["dense"]
    # the user's module is importable only with PYTHONPATH: both runs in processes of
    # their own (the inline runner would also fork this process for the user's UDF)
    for where, runner in ((f"{base}/udf", "hadoop"), (str(tmp_path / "inline"), "inline")):
        cmd = [SAMPLEGEN[0], "-m", "samplegen", "-q", "sample", remote if runner == "hadoop"
               else local, where, "--udf", "keep:every_third", "--param", "m=3", "--seed", "9",
               "--runner", runner, "--mrjob-conf", str(uber_conf)]
        proc = subprocess.run(cmd, env=env, capture_output=True, timeout=900)
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    proc = subprocess.run(["make", "-s", "-C", ROOT, "holdout", f"INPUT={remote}",
                           f"OUTPUT={base}/make-ho", "RUNNER=hadoop", f"MRJOB_CONF={uber_conf}",
                           "SEED=7", "REPEATS=2"], env=env, capture_output=True, timeout=900)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert sample_digests(fetch(f"{base}/udf", tmp_path / "h-udf")) == \
        sample_digests(tmp_path / "inline")
    assert sample_digests(fetch(f"{base}/make-ho", tmp_path / "h-ho")) == \
        inline("holdout", local, "--ratio", 0.8, "--repeats", 2, "--seed", 7)


def test_spark_runner_on_hdfs(hadoop, base, matrices, inline, tmp_path):
    local, remote = matrices["dense"]
    params = ["--ratio", 0.7, "--repeats", 2, "--seed", 3]
    samplegen(hadoop, "holdout", remote, f"{base}/spark-ho", *params, "--runner", "spark")
    assert sample_digests(fetch(f"{base}/spark-ho", tmp_path / "spark")) == \
        inline("holdout", local, *params)


def test_spark_on_yarn(hadoop, base, matrices, inline, tmp_path):
    """``--spark-master yarn``: Spark's driver here, its application master and
    executor in YARN containers of the single-node cluster (every JVM with the
    cluster's own options, ``cluster_jobs.QUICK_JVM``)."""
    local, remote = matrices["dense"]
    params = ["--ratio", 0.6, "--repeats", 1, "--seed", 4]
    env = dict(hadoop["env"], PYSPARK_PYTHON=sys.executable)
    settings = ["spark.executor.instances=1", "spark.executor.cores=1",
                "spark.executor.memory=512m", "spark.yarn.am.memory=512m",
                "spark.driver.memory=1g", *quick_yarn_spark_conf()]
    cmd = [*SAMPLEGEN, "-q", "holdout", remote, f"{base}/yarn-ho", *map(str, params),
           "--runner", "spark", "--spark-master", "yarn"]
    for item in settings:
        cmd += ["--spark-conf", item]
    proc = subprocess.run(cmd, env=env, capture_output=True, timeout=600)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert sample_digests(fetch(f"{base}/yarn-ho", tmp_path / "yarn")) == \
        inline("holdout", local, *params)


# ---------------------------------------------------------------------------
# import, export, info
# ---------------------------------------------------------------------------
def test_import_export_info_on_hdfs(hadoop, base, matrices, tmp_path):
    local, remote = matrices["dense"]
    info = json.loads(samplegen(hadoop, "info", remote, "--json").stdout)
    assert (info["rows"], info["cols"]) == (1500, 12)
    samplegen(hadoop, "export", remote, "--to", f"{base}/rows.csv", "--no-row-ids")
    in_process("export", local, "--to", tmp_path / "rows.csv", "--no-row-ids")
    assert fs.get_fs(base).read_bytes(f"{base}/rows.csv") == (tmp_path / "rows.csv").read_bytes()
    samplegen(hadoop, "import", f"{base}/rows.csv", f"{base}/imported", "--block-size", 100)
    in_process("import", tmp_path / "rows.csv", tmp_path / "imported", "--block-size", 100)
    assert sample_digests(fetch(f"{base}/imported", tmp_path / "from-hdfs")) == \
        sample_digests(tmp_path / "imported")
    bad = samplegen(hadoop, "export", remote, "--to", f"{remote}/inside.csv", check=False)
    assert bad.returncode == 2 and b"inside the samplegen matrix" in bad.stderr


@pytest.mark.spark
@pytest.mark.beside_spark
def test_import_a_parquet_dataset_written_by_spark(hadoop, base, tmp_path):
    """A directory of part files, ``_SUCCESS`` and ``.crc`` files, as Spark
    writes it, its name without suffix (Spark runs in a process of its own, so
    that the cluster's configuration stays out of the test session's Spark):
    read from HDFS, the matrix a local import of the same directory gives."""
    import numpy as np

    from .conftest import tree_digest
    values = np.random.default_rng(4).normal(size=(300, 3))
    rows = [tuple(map(float, r)) for r in values]
    np.save(tmp_path / "rows.npy", values)
    uri = f"hdfs://127.0.0.1:{hadoop['hdfs_port']}{base.split('//', 1)[1]}/ds"
    run(hadoop, sys.executable, "-c",
        "import sys, numpy as np\n"
        "from pyspark.sql import SparkSession\n"
        "s = SparkSession.builder.master('local[1]').getOrCreate()\n"
        "rows = [tuple(map(float, r)) for r in np.load(sys.argv[1])]\n"
        "s.createDataFrame(rows, ['a', 'b', 'c']).coalesce(3).write.parquet(sys.argv[2])\n",
        tmp_path / "rows.npy", uri)
    samplegen(hadoop, "import", uri, f"{base}/ds-matrix", "--block-size", 64)
    samplegen(hadoop, "export", f"{base}/ds-matrix", "--to", tmp_path / "back.npy",
              "--no-row-ids")
    back = np.load(tmp_path / "back.npy")
    assert sorted(map(tuple, back)) == sorted(rows)                # every row, once
    in_process("import", fetch(uri, tmp_path / "ds"), tmp_path / "local-matrix",
               "--block-size", 64)
    assert tree_digest(fetch(f"{base}/ds-matrix", tmp_path / "from-hdfs")) == \
        tree_digest(tmp_path / "local-matrix")


def test_import_parquet_from_hdfs_where_it_lives(hadoop, base, tmp_path, monkeypatch, capsys):
    """A Parquet file (several row groups) and a partitioned dataset directory
    (side files, a null partition, a part file without suffix) imported from
    hdfs:// through WebHDFS, without a local copy: the same matrix bytes as
    the local import.  A directory without Parquet files is one line, status 2."""
    import fastparquet

    from samplegen.jobs import driver

    from .conftest import run_cli, tree_digest
    from .test_formats import part_frame, partitioned_dataset
    local = tmp_path / "src"
    local.mkdir()
    fastparquet.write(str(local / "rows.parquet"), part_frame(7, 300), row_group_offsets=64,
                      write_index=False)
    partitioned_dataset(local / "sales")
    (local / "empty").mkdir()
    (local / "empty" / "_SUCCESS").write_text("")
    remote = f"{base}/import-src"
    fs.get_fs(remote).upload(str(local), remote)

    def no_copy(uri):
        raise AssertionError(f"{uri} copied to a local file")
    monkeypatch.setattr(fs, "local_copy", no_copy)
    for name, options in (("rows.parquet", {"exclude": ["flag"]}), ("sales", {"label": "day"})):
        driver.import_file(f"{remote}/{name}", str(tmp_path / f"hdfs-{name}"), 16, **options)
        driver.import_file(str(local / name), str(tmp_path / f"local-{name}"), 16, **options)
        assert tree_digest(tmp_path / f"hdfs-{name}") == tree_digest(tmp_path / f"local-{name}")
    code, _, err = run_cli(capsys, "import", f"{remote}/empty", tmp_path / "out",
                           "--block-size", 16)
    assert code == 2 and err == (f"samplegen: error: {remote}/empty: no Parquet files in "
                                 "this directory\n")
    assert not os.path.exists(tmp_path / "out")


# ---------------------------------------------------------------------------
# micro-batch jobs with BATCHES and STATE on HDFS
# ---------------------------------------------------------------------------
TBS = ["--algorithm", "rtbs", "--decay", "exp", "--lambda", 0.1, "--size", 1500, "--seed", 7,
       "--partitions", 2]


@pytest.fixture(scope="module")
def batches(hadoop, base, tmp_path_factory):
    local = tmp_path_factory.mktemp("tbs") / "batches"
    run(hadoop, sys.executable, "-m", "samplegen.tbs.stream.demo", local, "--batches", 4,
        "--size", 1000, "--seed", 1)
    fs.get_fs(base).upload(str(local), f"{base}/batches")
    return str(local), f"{base}/batches"


def _tbs_sample(hadoop, state, dest):
    in_process("tbs", "sample", state, "--to", dest)
    return open(dest, "rb").read()


def test_tbs_run_on_hadoop_with_state_on_hdfs(hadoop, base, batches, uber_conf, tmp_path):
    """(Uber mode: the point is the STATE on HDFS, read and written by the
    partitions' tasks in a YARN container, not the task layout.)"""
    local, remote = batches
    samplegen(hadoop, "tbs", "run", remote, f"{base}/state", *TBS, "--runner", "hadoop",
              "--mrjob-conf", uber_conf)
    in_process("tbs", "run", local, tmp_path / "state", *TBS, "--runner", "inline")
    assert _tbs_sample(hadoop, f"{base}/state", tmp_path / "h.npy") == \
        _tbs_sample(hadoop, tmp_path / "state", tmp_path / "l.npy")


def test_tbs_killed_mid_batch_on_hdfs_reruns_to_the_same_state(hadoop, base, batches,
                                                               tmp_path):
    """SIGKILL at several moments of runs on HDFS; each rerun continues where
    the killed run stopped and ends with the STATE (every file, every byte) of
    an uninterrupted run: what the killed runs left is collected, also after
    a kill whose lock is then removed by hand (as for a run that died on
    another host).  Each kill is timed from the moment its run holds the
    STATE's lock (its work has begun), not from its process's start, which
    a loaded machine can make take longer than every delay; the last run is
    given the parameters, in case no killed run got as far as a commit."""
    from .conftest import tree_digest
    local, remote = batches
    in_process("tbs", "run", local, tmp_path / "clean", *TBS, "--runner", "inline",
               "--batches-per-job", 1)
    expected = _tbs_sample(hadoop, tmp_path / "clean", tmp_path / "clean.npy")
    clean = f"{base}/clean"
    samplegen(hadoop, "tbs", "run", remote, clean, *TBS, "--batches-per-job", 1)
    state = f"{base}/killed"
    remote_fs = fs.get_fs(base)
    for i, delay in enumerate((0.8, 1.2, 1.6, 2.0, 2.4)):
        proc = subprocess.Popen([*SAMPLEGEN, "-q", "tbs", "run", remote, state,
                                 *map(str, TBS), "--batches-per-job", "1"],
                                env=hadoop["env"], stderr=subprocess.DEVNULL)
        _wait_for(lambda proc=proc: proc.poll() is not None
                  or remote_fs.exists(f"{state}/_lock"), seconds=120, every=0.05)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if i % 2 and remote_fs.exists(f"{state}/_lock"):
            remote_fs.rmtree(f"{state}/_lock")
    samplegen(hadoop, "tbs", "run", remote, state, *TBS, "--runner", "inline")
    assert _tbs_sample(hadoop, state, tmp_path / "after.npy") == expected
    assert (tree_digest(fetch(state, tmp_path / "killed"))
            == tree_digest(fetch(clean, tmp_path / "clean-hdfs")))


# ---------------------------------------------------------------------------
# faults on the cluster: a killed task attempt, a killed job
# ---------------------------------------------------------------------------
def _job_ids(hadoop):
    out = run(hadoop, "mapred", "job", "-list").stdout.decode()
    return [w for w in out.split() if w.startswith("job_")]


def _wait_for(predicate, seconds=240, every=0.5):
    """The first true value of ``predicate()``, asked every *every* seconds
    for up to *seconds*."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError("timed out waiting on the cluster")


BOOTSTRAP = ["--samples", 4, "--seed", 3]


@pytest.fixture(scope="module")
def bootstrap_digests(matrices, inline):
    """The inline runner's bytes of the bootstrap runs that the fault tests
    start on the cluster (:func:`_start_bootstrap`)."""
    return inline("bootstrap", matrices["dense"][0], *BOOTSTRAP)


#: the YARN application name of each run :func:`_start_bootstrap` started ->
#: when it started (ms since the epoch, a second early)
_STARTED = {}


def _start_bootstrap(hadoop, remote, out, mrjob_conf, extra=()):
    """Start a bootstrap run on the cluster; returns the process and the name
    of its YARN application (unique)."""
    name = f"samplegen-test-{uuid.uuid4().hex[:12]}"
    _STARTED[name] = int(time.time() * 1000) - 1000
    return subprocess.Popen([*SAMPLEGEN, "-q", "bootstrap", remote, out, *map(str, BOOTSTRAP),
                             "--runner", "hadoop", "--mrjob-conf",
                             str(mrjob_conf), "--jobconf", f"mapreduce.job.name={name}", *extra],
                            env=hadoop["env"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE), name


def _rm_rest(hadoop):
    """The ResourceManager's REST API of the test cluster (its ports are free
    ones, recorded in its work directory)."""
    return f"http://127.0.0.1:{cluster.ports(hadoop['workdir'])['rm_http']}/ws/v1/cluster"


def _applications(hadoop, name, states="NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING"):
    """Ids of the YARN applications called *name* (the ResourceManager's REST
    API: milliseconds, where a ``yarn`` or ``mapred`` client JVM takes two
    seconds).  Only the applications started since its run started are
    listed: the ResourceManager keeps every finished application of the
    session, which it would write out, and this process parse, at each of
    the 20 polls a second."""
    import urllib.request
    url = f"{_rm_rest(hadoop)}/apps?states={states}&startedTimeBegin={_STARTED[name]}"
    with urllib.request.urlopen(url, timeout=30) as response:
        apps = (json.load(response).get("apps") or {}).get("app") or []
    return [app["id"] for app in apps if app["name"] == name]


def _kill_application(hadoop, app):
    import urllib.request
    request = urllib.request.Request(
        f"{_rm_rest(hadoop)}/apps/{app}/state",
        data=b'{"state": "KILLED"}', method="PUT", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30):
        pass


def _task_processes(kind, app=None):
    """The running task attempts of ``kind`` ("m" or "r") on this node (of
    application *app* only, if given), as {attempt id: the container's
    process group}, read from /proc: fast enough to catch a task a second
    long, where a ``mapred`` client JVM takes two."""
    number = "_".join(app.split("_")[1:]) if app else r"\d+_\d+"
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().decode(errors="replace").split("\0")
            if "org.apache.hadoop.mapred.YarnChild" not in words:
                continue
            attempt = next(w for w in words
                           if re.fullmatch(rf"attempt_{number}_{kind}_\d+_\d+", w))
            found[attempt] = os.getpgid(int(pid))
        except (OSError, StopIteration):
            continue
    return found


def _streaming_child(pgid):
    """Whether the container's streaming process (samplegen's mapper or
    reducer) has started."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.getpgid(int(pid)) != pgid:
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                words = f.read().split(b"\0")
            if b"--mapper" in words or b"--reducer" in words:
                return True
        except OSError:
            continue
    return False


def _freeze_a_writing_task(kind, app, seconds=300):
    """Stop (SIGSTOP) the first task of ``kind`` seen running its Python
    process, so that the job cannot finish before the test kills the attempt;
    returns the attempt id."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        for attempt, pgid in _task_processes(kind, app).items():
            if _streaming_child(pgid):
                os.killpg(pgid, signal.SIGSTOP)
                return attempt
        time.sleep(0.05)
    raise AssertionError(f"no {kind} task ran its Python process within {seconds} s")


def test_killed_attempts_and_speculation_leave_whole_output(hadoop, base, matrices, mrjob_conf,
                                                            bootstrap_digests, tmp_path):
    """Speculative execution on, and a reduce attempt killed while it writes
    (frozen first, so that the kill cannot come after the task finished):
    Hadoop retries it, and the run is byte for byte the inline one, with no
    temporary file left behind."""
    remote = matrices["dense"][1]
    out = f"{base}/boot-killed-attempt"
    proc, name = _start_bootstrap(hadoop, remote, out, mrjob_conf,
                                  ["--jobconf", "mapreduce.map.speculative=true",
                                   "--jobconf", "mapreduce.reduce.speculative=true"])
    try:
        app = _wait_for(lambda: next(iter(_applications(hadoop, name)), None))
        attempt = _freeze_a_writing_task("r", app)
        run(hadoop, "mapred", "job", "-kill-task", attempt)
        _, err = proc.communicate(timeout=900)
    finally:
        proc.kill()
    assert proc.returncode == 0, err.decode()[-3000:]
    got = fetch(out, tmp_path / "hadoop")
    assert sample_digests(got) == bootstrap_digests
    leftovers = [n for _, _, names in os.walk(got) for n in names if ".tmp-" in n]
    assert leftovers == []


def _check_outcome(hadoop, proc, out, expected, rerun, tmp_path):
    """A run that was hit by a fault: it succeeded with the expected bytes, or
    it failed leaving neither its output nor its staging behind and a rerun
    succeeds with them."""
    _, err = proc.communicate(timeout=900)
    remote_fs = fs.get_fs(out)
    parent, leaf = out.rsplit("/", 1)
    if proc.returncode != 0:
        assert proc.returncode == 1, err.decode()[-3000:]
        assert not remote_fs.exists(out)
        assert not [n for n in remote_fs.listdir(parent) if n.startswith(f".{leaf}.tmp-")]
        proc, _ = rerun()
        _, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, err.decode()[-3000:]
    got = fetch(out, tmp_path / f"got-{leaf}")
    assert sample_digests(got) == expected
    assert [n for _, _, names in os.walk(got) for n in names if ".tmp-" in n] == []


def test_killed_job_leaves_no_output_and_a_rerun_succeeds(hadoop, base, matrices, mrjob_conf,
                                                          uber_conf, bootstrap_digests, tmp_path):
    """(The rerun in uber mode: its point is that what the killed job left
    does not stand in its way, not its task layout.)"""
    remote = matrices["dense"][1]
    out = f"{base}/boot-killed-job"
    proc, name = _start_bootstrap(hadoop, remote, out, mrjob_conf)
    app = _wait_for(lambda: next(iter(_applications(hadoop, name)), None))
    _wait_for(lambda: _task_processes("m", app))          # killed while its tasks run
    _kill_application(hadoop, app)
    proc.communicate(timeout=600)
    assert proc.returncode == 1
    _check_outcome(hadoop, proc, out, bootstrap_digests,
                   lambda: _start_bootstrap(hadoop, remote, out, uber_conf), tmp_path)


#: the faults of :func:`test_faults_at_random_moments`, and the seconds their
#: moments range over: a job's from the ResourceManager's first listing of
#: its application, a task container's from the start of the first one (on an
#: idle machine, the application of this run lives about 10 s, its tasks 7 s)
FAULTS = ["job", "task", "job", "task"]
ALL_STATES = "NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING,FINISHED,FAILED,KILLED"
FAULT_SECONDS = {"job": 10.0, "task": 7.0}


def test_faults_at_random_moments(hadoop, base, matrices, mrjob_conf, uber_conf,
                                  bootstrap_digests, tmp_path):
    """The job, or one of its task containers (SIGKILL), killed at moments
    drawn at random (seeded) over a run's life, from its submission to its
    commit: every run ends with the inline run's bytes, or with nothing and a
    rerun (uber mode: not its subject) that has them.

    Power.  The defect looked for: a window of the run's life in which a
    fault of one kind leaves wrong bytes, a temporary file, or an output a
    rerun cannot replace.  A job fault's moment is uniform over the
    application's first FAULT_SECONDS["job"] s after its submission (the
    ResourceManager lists it), a task fault's over the FAULT_SECONDS["task"]
    s from the first task container's start (a kill before either hits
    nothing); on an idle machine these are the whole lives.  A window
    covering a fraction w of the range is missed by all k trials of a kind
    with probability (1 - w)^k; with k = 2 trials per kind a defect over half
    the range (the maps' half, or the reduces' and commit's) is caught with
    probability 1 - 0.5^2 = 0.75, one over 70 % of it with 0.91.  No false
    alarm: a correct run passes every trial whatever the moment.  (The former
    five moments, uniform over the command's first 14 s, spent about 5 s of
    them before the submission, where no fault hits: per trial 9/28 in a
    half-range window, so 0.54 for its two job faults and 0.69 for its three
    task faults; four trials now catch both kinds of defect more often.)"""
    import random
    remote = matrices["dense"][1]
    rng = random.Random(20261125)
    hits = []
    for i, fault in enumerate(FAULTS):
        out = f"{base}/fault-{i}"
        proc, name = _start_bootstrap(hadoop, remote, out, mrjob_conf)
        # 20 polls a second: the moment a fault is timed from must be seen when it happens
        app = _wait_for(lambda name=name: next(iter(_applications(hadoop, name, ALL_STATES)),
                                               None), every=0.05)
        if fault == "task":
            _wait_for(lambda app=app, proc=proc: _task_processes("m", app)
                      or proc.poll() is not None, every=0.05)
        time.sleep(rng.uniform(0, FAULT_SECONDS[fault]))
        running = _applications(hadoop, name)
        if fault == "job" and running:
            _kill_application(hadoop, running[0])
            hits.append(fault)
        tasks = _task_processes("m", app) | _task_processes("r", app)
        if fault == "task" and tasks:
            os.killpg(rng.choice(sorted(tasks.values())), signal.SIGKILL)
            hits.append(fault)
        _check_outcome(hadoop, proc, out, bootstrap_digests,
                       functools.partial(_start_bootstrap, hadoop, remote, out, uber_conf),
                       tmp_path)
        if fault == "task" and tasks:
            assert proc.returncode == 0      # Hadoop retried the task
    assert hits, "no fault hit a running job: the moments need a longer range"


def test_a_failing_task_on_the_cluster_names_its_error(hadoop, base, matrices, mrjob_conf,
                                                       tmp_path):
    """A UDF's exception in a YARN container reaches the user as one line (the
    container's stderr stays on its node; the task leaves its error line in
    the run's staging directory), and nothing is written."""
    (tmp_path / "bad.py").write_text(
        "def boom(start, stop, rng, params):\n"
        "    raise ValueError('no rows today (%d)' % start)\n"
        "boom.sample_names = ['x']\n")
    env = dict(hadoop["env"], PYTHONPATH=str(tmp_path))
    out = f"{base}/failing"
    proc = subprocess.run([*SAMPLEGEN, "sample", matrices["dense"][1], out, "--udf", "bad:boom",
                           "--seed", "1", "--runner", "hadoop", "--mrjob-conf", str(mrjob_conf),
                           "--jobconf", "mapreduce.map.maxattempts=1"],
                          env=env, capture_output=True, timeout=600)
    assert proc.returncode == 1
    last = proc.stderr.decode().strip().splitlines()[-1]      # whichever map task failed first
    assert re.fullmatch(r"samplegen: error: RuntimeError: the MapReduce job failed: "
                        r"ValueError: no rows today \(\d+\)", last), last
    assert not fs.get_fs(base).exists(out)
