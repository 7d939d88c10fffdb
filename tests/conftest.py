import functools
import hashlib
import os
import sys

import pytest

from samplegen import cli
from samplegen.jobs import daemons, driver

from .cluster_jobs import QUICK_JVM

# One definition of the HiveServer2 fixture for every module: a fixture imported
# into several test modules is a separate fixture in each (one server per module,
# all alive at once, their Tez sessions starving YARN).
from .hive_fixtures import hive_server  # noqa: F401

# Never read the developer's own ~/.mrjob.conf in tests.
NO_CONF = {"mrjob_conf": ""}


class _ApacheHiveLast:
    """Apache Hive's tests last: its server holds a Tez session (an
    application master and a warm container) on the cluster's YARN until the
    test session ends, which MapReduce jobs after its start would queue
    behind.  After pytest has grouped the tests by their session fixtures and
    ``-m`` has chosen them; the sort is stable, the rest keep their order."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items):
        items.sort(key=_on_apache_hive)


def pytest_configure(config):
    config.pluginmanager.register(_ApacheHiveLast(), "samplegen-apache-hive-last")


def pytest_collection_modifyitems(config, items):
    for item in items:
        # the markers tell the truth: a test that starts the cluster (the ``hadoop``
        # fixture, directly or through Apache Hive's server) is marked ``hadoop``, so
        # ``-m "not hadoop"`` starts none
        if "hadoop" in getattr(item, "fixturenames", ()) or _on_apache_hive(item):
            item.add_marker(pytest.mark.hadoop)


#: the test whose set-up is running (the ``hadoop`` fixture checks its marker)
_SETTING_UP = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    _SETTING_UP.append(item)
    try:
        return (yield)
    finally:
        _SETTING_UP.pop()


def _check_marked_hadoop():
    """The markers tell the truth at run time too: a test whose fixtures
    reach the cluster by a path the collection cannot see (a fixture asking
    for ``hadoop`` by name) fails before the cluster starts unless it is
    marked ``hadoop``, so ``-m "not hadoop"`` never starts one."""
    item = _SETTING_UP[-1] if _SETTING_UP else None
    if item is not None and item.get_closest_marker("hadoop") is None:
        pytest.fail(f"{item.nodeid} starts the single-node Hadoop but is not marked hadoop: "
                    "mark it (pytest.mark.hadoop), or mark it in tests/conftest.py's "
                    "pytest_collection_modifyitems when a fixture starts it", pytrace=False)


def _on_apache_hive(item):
    """Whether *item* runs on Apache Hive's HiveServer2 (``hive_server[apache]``)."""
    callspec = getattr(item, "callspec", None)
    return callspec is not None and callspec.params.get("hive_server") == "apache"


@pytest.fixture(autouse=True, scope="session")
def _isolate_env():
    os.environ.pop("MRJOB_CONF", None)
    yield


@pytest.fixture(autouse=True, scope="session")
def _quick_spark_jvms():
    """Every Spark JVM the tests start through spark-submit (the session's
    context, the Spark Thrift Server, the drivers of the processes the tests
    start, which inherit the environment) takes the cluster's quick-start
    options, ``cluster_jobs.QUICK_JVM``: about half the CPU time."""
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        filter(None, (os.environ.get("SPARK_SUBMIT_OPTS"), QUICK_JVM)))
    yield


@pytest.fixture(scope="session")
def spark():
    """One local SparkContext for every test that needs Spark (tests marked
    ``spark``); the engines use the running context instead of starting their
    own, and leave it running."""
    from samplegen.jobs.engines.spark.context import start_context
    sc = start_context("local[2]", {"spark.ui.enabled": "false"}, quiet=True)
    yield sc
    sc.stop()


@pytest.fixture(scope="session")
def session(spark):
    """A SparkSession on the tests' SparkContext (for DataFrame tests)."""
    from pyspark.sql import SparkSession

    return SparkSession(spark)


@pytest.fixture(scope="session")
def hadoop():
    """A single-node Hadoop of ``make hadoop-up`` for tests marked ``hadoop``,
    in a directory of its own ($SAMPLEGEN_TEST_HADOOP_WORK, default
    work/test-hadoop: never the user's work/hadoop) and on ports that nothing
    else listens on (``--free-ports``; with $HDFS_PORT set, Hadoop's default
    ports and that HDFS port instead), so the tests run beside a cluster
    that holds the default ports: started unless it runs.  Test sessions share it (each holds a
    lease, ``<workdir>/sessions/<pid>``); the last one to end stops it if a
    test session started it (a cluster started by hand stays up).  A cluster
    that cannot start fails the test with its one-line reason; it is never
    skipped."""
    import fcntl
    import subprocess

    from samplegen.jobs import cluster
    _check_marked_hadoop()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    workdir = os.path.abspath(os.path.join(
        root, os.environ.get("SAMPLEGEN_TEST_HADOOP_WORK", "work/test-hadoop")))
    fixed_port = os.environ.get("HDFS_PORT")
    ports = [f"HDFS_PORT={fixed_port}"] if fixed_port else ["HADOOP_FREE_PORTS=1"]
    sessions = os.path.join(workdir, "sessions")
    os.makedirs(sessions, exist_ok=True)
    lease, marker = os.path.join(sessions, str(os.getpid())), os.path.join(sessions, "started")
    with open(os.path.join(sessions, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        open(lease, "w").close()
        if not cluster.running(workdir):
            open(marker, "w").close()
        proc = subprocess.run(["make", "-s", "hadoop-up", f"HADOOP_WORK={workdir}", *ports],
                              cwd=root, capture_output=True, text=True)
    try:
        if proc.returncode != 0:
            lines = (proc.stderr + proc.stdout).strip().splitlines() or ["(no output)"]
            reason = next((ln for ln in lines if ln.startswith("hadoop: error:")),
                          next((ln for ln in reversed(lines) if "error" in ln.lower()
                                and not ln.startswith("make")), lines[-1]))
            pytest.fail(f"the local Hadoop did not start: {reason}", pytrace=False)
        web = cluster.ports(workdir)["namenode_http"]
        yield {"workdir": workdir, "hdfs_port": cluster.hdfs_port(workdir),
               "env": {**os.environ, **cluster.env(workdir)},
               "streaming_jar": cluster.streaming_jar(workdir),
               "webhdfs": f"http://127.0.0.1:{web}/webhdfs/v1"}
    finally:
        with open(os.path.join(sessions, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            os.remove(lease)
            others = []
            for name in filter(str.isdigit, os.listdir(sessions)):
                if daemons.alive(int(name)):
                    others.append(name)
                else:   # a session that died without its teardown
                    os.remove(os.path.join(sessions, name))
            if not others and os.path.exists(marker):
                cluster.down(workdir, log=lambda message: None)
                os.remove(marker)


@pytest.fixture(scope="module")
def cluster_env(hadoop):
    """This process's environment as the cluster's clients have it (for the
    filesystem layer, which reads HADOOP_CONF_DIR)."""
    from samplegen.jobs import fs
    saved = dict(os.environ)
    os.environ.update(hadoop["env"])
    fs._REMOTE.clear()
    yield hadoop
    os.environ.clear()
    os.environ.update(saved)
    fs._REMOTE.clear()


def hdfs_directory(prefix):
    """A fresh HDFS directory ``hdfs:///samplegen-tests/<prefix>-<random>``
    for a module-scoped fixture to yield (needs ``cluster_env``), removed
    after the module's tests."""
    import uuid

    from samplegen.jobs import fs
    uri = f"hdfs:///samplegen-tests/{prefix}-{uuid.uuid4().hex[:12]}"
    fs.get_fs(uri).makedirs(uri)
    try:
        yield uri
    finally:
        fs.get_fs(uri).rmtree(uri)


def make(tmp_path, name="m", rows=500, cols=6, block_size=64, density=None, seed=1):
    path = str(tmp_path / name)
    driver.make_matrix(path, rows, cols, block_size, density=density, seed=seed)
    return path


def runner_inputs(base):
    """The engines' shared inputs: dense, wide (three column blocks) and sparse
    matrices with several row blocks and a partial last one."""
    return {"dense": make(base, "dense", rows=700, cols=20, block_size=64, seed=1),
            "wide": make(base, "wide", rows=450, cols=150, block_size=64, seed=2),
            "sparse": make(base, "sparse", rows=600, cols=150, block_size=64, density=0.1,
                           seed=3)}


def is_one_line_error(err):
    """Whether *err* (a command's stderr) is exactly one ``samplegen: error:`` line."""
    lines = err.strip().splitlines()
    return len(lines) == 1 and lines[0].startswith("samplegen: error: ")


def one_line_error(code, err, status=2):
    """The one error line of a command that refused: exit status *status*,
    *err* exactly one ``samplegen: error:`` line, no traceback."""
    assert code == status, err
    assert is_one_line_error(err) and "Traceback" not in err, err
    return err.strip()


def run_cli(capsys, *argv):
    """Run the samplegen CLI in-process: (exit status, stdout, stderr)."""
    try:
        code = cli.main([str(a) for a in argv])
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def in_process(*args):
    """``samplegen -q ARGS`` in this process, which must succeed (no
    interpreter to start: the inputs and references engine runs are
    compared with)."""
    code = cli.main(["-q", *map(str, args)])
    assert code == 0, args


def tbs_main(argv):
    """``samplegen tbs ARGV`` in-process: its exit status."""
    return cli.main(["tbs", *argv])


def collect(frames, column="id"):
    """The values of *column* (a name, or a tuple of names: tuples of their
    values) in each of *frames*, as sorted lists (repeats kept), in one
    Spark job: each frame's columns tagged by its place, the frames one
    union (each branch evaluates its own sample, as a separate action
    would)."""
    from pyspark.sql import functions as F

    frames = list(frames)
    names = [column] if isinstance(column, str) else list(column)
    tagged = [df.select(F.lit(i).alias("__part"), *[F.col(n) for n in names])
              for i, df in enumerate(frames)]
    out = [[] for _ in frames]
    for row in functools.reduce(lambda a, b: a.unionAll(b), tagged).collect():
        out[row[0]].append(row[1] if isinstance(column, str) else tuple(row[1:]))
    return [sorted(values) for values in out]


def tree_digest(path):
    """Digest of every file under *path* (names and bytes)."""
    digest = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            digest.update(os.path.relpath(full, path).encode())
            with open(full, "rb") as f:
                digest.update(f.read())
    return digest.hexdigest()


def sample_digests(run_dir):
    """Digest of each sample directory of a run (the manifest excluded)."""
    return {name: tree_digest(os.path.join(run_dir, name))
            for name in sorted(os.listdir(run_dir)) if os.path.isdir(os.path.join(run_dir, name))}


@pytest.fixture
def matrix(tmp_path):
    return make(tmp_path)


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    """``user_module(name, source)``: a user's module written into tmp_path and
    importable for this test (the engines give its directory to their tasks);
    returns *name*.  Nothing of it stays imported after the test."""
    names = []

    def install(name, source):
        (tmp_path / f"{name}.py").write_text(source)
        monkeypatch.syspath_prepend(str(tmp_path))
        sys.modules.pop(name, None)
        names.append(name)
        return name
    yield install
    for name in names:
        sys.modules.pop(name, None)
