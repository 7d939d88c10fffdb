"""Hostile use of ``samplegen.spark`` (DataFrames in, DataFrames out) on a
real local Spark: the session-wide ``spark`` fixture, one small fixture
DataFrame.

What it is fed: keys that are NULL, negative, repeated, of a type without a
stable text (maps, maps inside structs or arrays, an all-NULL column) or
named with dots and backticks; missing columns and repeated column names;
NULL, NaN, infinite, negative and non-numeric weights; an empty DataFrame
and one of zero partitions; one partition holding every row; bad
parameters and things that are not DataFrames; and Spark workers whose
Python lacks the modules the tasks import (an un-activated virtual
environment whose workers start the system ``python3``).  Every bad input
is one samplegen error naming the problem (``ParameterError``,
``InputError``, ``WorkerPythonError``), raised by the call itself and not in
the user's later action on a lazy result, except for the key values the
coins read without any aggregation (a NULL or negative key under
``exact=False``), which fail that action with the task's reason.
"""
import os
import subprocess
import sys

import pytest

from samplegen import spark as sg
from samplegen.jobs.engines.spark import context
from samplegen.udfs.errors import InputError, ParameterError, SamplegenError

from ..conftest import collect, make

pytestmark = pytest.mark.spark
SEED = 7
N = 400
USER_UDF = "samplegen.udfs.examples:paper_holdout_series"


@pytest.fixture(scope="module")
def frame(session):
    """Row ids 0..N-1, a string column and a weight column (all 1.0)."""
    from pyspark.sql import functions as F

    return (session.range(N)
            .withColumn("name", F.concat(F.lit("row-"), F.col("id").cast("string")))
            .withColumn("w", F.lit(1.0)))


def ids(df, column="id"):
    """The values of *column*, as a sorted list (repeats kept)."""
    return sorted(row[0] for row in df.select(column).collect())


def test_bad_parameters_are_one_parameter_error(session, frame):
    from pyspark.sql import functions as F

    cases = [
        (lambda: sg.holdout(frame, 1.5, SEED, key="id"), "ratio"),
        (lambda: sg.holdout(frame, float("nan"), SEED, key="id"), "ratio"),
        (lambda: sg.holdout(frame, 0.5, SEED, key="id", repeats=0), "repeats"),
        (lambda: sg.holdout(frame, 0.5, SEED, key="id", exact="no"), "exact"),
        (lambda: sg.holdout(frame, 0.5, SEED, key="id", persist="yes"), "persist"),
        (lambda: sg.kfold(frame, 3, SEED, key="id", persist=1), "persist"),
        (lambda: sg.bootstrap(frame, 2, SEED, key="id", persist="no"), "persist"),
        (lambda: sg.sample(frame, "holdout", SEED, "id", persist=None, ratio=0.5), "persist"),
        (lambda: sg.kfold(frame, 1, SEED, key="id"), "k"),
        (lambda: sg.kfold(frame, N + 1, SEED, key="id"), "k must be <="),
        (lambda: sg.holdout(frame, 0.7, -1, key="id"), "seed"),
        (lambda: sg.holdout(frame, 0.7, 1.5, key="id"), "seed"),
        (lambda: sg.holdout(frame, 0.7, SEED, key=None), "key must name a column"),
        (lambda: sg.bootstrap(frame, 0, SEED, key="id"), "samples"),
        (lambda: sg.bootstrap(frame, 2, SEED, key="id", size=0), "size"),
        (lambda: sg.weighted(frame, "w", SEED, "id", size=-1), "size"),
        (lambda: sg.weighted(frame, "w", SEED, "id", size=N + 1), "positive weight"),
        (lambda: sg.weighted(frame, "w", SEED, "id", size=1, expected=2), "exactly one"),
        (lambda: sg.tag(frame, "holdout", SEED, "id", column="name", ratio=0.5), "column"),
        (lambda: sg.sample(frame, "nosuch_module:udf", SEED, "id"), "nosuch_module"),
        (lambda: sg.sample(frame, "holdout", SEED, "id", ratio=0.5, bogus=1), "bogus"),
        (lambda: sg.holdout(frame.withColumn("__samplegen_key", F.lit(1)), 0.5, SEED,
                            key="id"), "rename it"),
    ]
    for make_call, words in cases:
        with pytest.raises(ParameterError, match=words):
            make_call()


def test_something_not_a_dataframe_is_one_parameter_error(session):
    for call in (lambda: sg.holdout([1, 2, 3], 0.5, SEED, key="id"),
                 lambda: sg.tag({"id": [1]}, "holdout", SEED, "id", ratio=0.5),
                 lambda: sg.weighted(None, "w", SEED, "id", size=1)):
        with pytest.raises(ParameterError, match="expected a pyspark DataFrame"):
            call()


def test_missing_columns_are_named_with_the_columns_there(session, frame):
    calls = {"key column 'nope'": lambda: sg.holdout(frame, 0.7, SEED, key="nope"),
             "stratify column 'nope'": lambda: sg.kfold(frame, 3, SEED, "id", stratify="nope"),
             "groups column 'nope'": lambda: sg.kfold(frame, 3, SEED, "id", groups="nope"),
             "weights must name a column": lambda: sg.weighted(frame, "nope", SEED, "id",
                                                               size=3)}
    for words, call in calls.items():
        with pytest.raises(ParameterError, match=words) as caught:
            call()
        assert "id, name, w" in str(caught.value)   # what the DataFrame does have


def test_repeated_column_names_are_refused(session, frame):
    from pyspark.sql import functions as F

    twice = frame.select("id", "name", F.col("name").alias("id"))
    with pytest.raises(ParameterError, match="two columns named 'id'"):
        sg.holdout(twice, 0.5, SEED, key="id")


def test_a_key_without_stable_text_is_refused(session, frame):
    """A map's text depends on its entries' order, also inside a struct or
    an array; an all-NULL column (type void) has no key at all."""
    from pyspark.sql import functions as F

    a_map = F.create_map(F.lit("a"), F.col("id"))
    for column, words in [(a_map, "map"), (F.struct(a_map.alias("m")), "map"),
                          (F.array(a_map), "map"), (F.lit(None), "NULL in every row")]:
        for exact in (True, False):
            with pytest.raises(ParameterError, match=words):
                sg.holdout(frame.withColumn("k", column), 0.5, SEED, key="k", exact=exact)


def test_column_names_with_dots_and_backticks_are_one_column(session, frame):
    """A key named ``a.b`` or ``a`b`` is that column, not a field path or a
    broken expression: its rows get the decisions of the same keys under a
    plain name (decisions depend on the key values only)."""
    [(train, _)] = sg.holdout(frame, 0.5, SEED, "id", exact=False)
    want = ids(train)
    for odd in ("a.b", "a`b"):
        renamed = frame.withColumnRenamed("id", odd).withColumnRenamed("w", odd + "w")
        [(train, _)] = sg.holdout(renamed, 0.5, SEED, odd, exact=False)
        assert ids(train, f"`{odd.replace('`', '``')}`") == want, odd
    [drawn] = sg.weighted(renamed, "a`bw", SEED, "a`b", size=10)
    assert drawn.count() == 10


def test_null_and_negative_keys_fail_with_their_reason(session, frame):
    from pyspark.sql import functions as F

    negative = frame.withColumn("id", F.col("id") - 10)
    nulls = frame.withColumn("id", F.when(F.col("id") == 7, None).otherwise(F.col("id")))
    # the coins need no aggregation: the job that reads the key fails
    (train, _), = sg.holdout(negative, 0.5, SEED, key="id", exact=False)
    with pytest.raises(Exception, match="negative integer"):
        train.count()
    (train, _), = sg.holdout(nulls, 0.5, SEED, key="id", exact=False)
    with pytest.raises(Exception, match="holds NULL"):
        train.count()
    # exact sizes and the bootstrap aggregate over the key first: refused by the call
    for bad, words in ((negative, "negative integer"), (nulls, "NULL")):
        for call in (lambda bad=bad: sg.holdout(bad, 0.5, SEED, key="id"),
                     lambda bad=bad: sg.kfold(bad, 3, SEED, key="id"),
                     lambda bad=bad: sg.bootstrap(bad, 2, SEED, key="id")):
            with pytest.raises(ParameterError, match=words):
                call()


def test_repeated_keys_share_their_decisions(session, frame):
    """Rows with equal keys get equal decisions (docs/SPARK.md): each key's
    rows are on one side of a hold-out and in one fold, and every row is in
    exactly one fold."""
    from pyspark.sql import functions as F

    repeated = frame.withColumn("k", F.col("id") % 40)
    [(train, test)] = sg.holdout(repeated, 0.5, SEED, key="k", exact=False)
    train_rows, test_rows = collect([train, test], "k")
    train_keys, test_keys = set(train_rows), set(test_rows)
    assert not train_keys & test_keys and train_keys | test_keys == set(range(40))
    assert len(train_rows) + len(test_rows) == N
    folds = collect(test for _, test in sg.kfold(repeated, 4, SEED, key="k"))
    assert sorted(sum(folds, [])) == list(range(N))
    for fold in folds:
        keys = {i % 40 for i in fold}
        assert sorted(fold) == sorted(i for i in range(N) if i % 40 in keys)


def test_bad_weights_are_refused_by_the_call_naming_the_row(session, frame):
    from pyspark.sql import functions as F

    for value, words in [(float("nan"), "NULL or NaN"), (None, "NULL or NaN"),
                         (-1.0, "-1.0"), (float("inf"), "inf")]:
        bad = frame.withColumn("w", F.when(F.col("id") == 3, F.lit(value)).otherwise(1.0))
        for call in (lambda bad=bad: sg.weighted(bad, "w", SEED, "id", size=5),
                     lambda bad=bad: sg.weighted(bad, "w", SEED, "id", expected=5),
                     lambda bad=bad: sg.weighted(bad, "w", SEED, "id", size=5, replace=True)):
            with pytest.raises(InputError, match=f"{words}.* at key position 3"):
                call()
    text = frame.withColumn("w", F.lit("heavy"))
    with pytest.raises(ParameterError, match="'w' is string; weights must be a numeric"):
        sg.weighted(text, "w", SEED, "id", size=5)
    zero = frame.withColumn("w", F.lit(0.0))
    with pytest.raises(ParameterError, match="only 0 rows have a positive weight"):
        sg.weighted(zero, "w", SEED, "id", size=5)


def test_empty_and_zero_partition_frames(session, frame):
    """No rows: what needs the row count (exact sizes, the bootstrap, a
    user UDF, weighted draws) is refused; the coins, which need none, give
    empty samples."""
    from pyspark.sql.types import DoubleType, LongType, StructField, StructType

    schema = StructType([StructField("id", LongType()), StructField("w", DoubleType())])
    zero = session.createDataFrame(session.sparkContext.emptyRDD(), schema)
    assert zero.rdd.getNumPartitions() == 0
    for empty in (frame.filter("id < 0").select("id", "w"), zero):
        for call in (lambda empty=empty: sg.holdout(empty, 0.5, SEED, "id"),
                     lambda empty=empty: sg.kfold(empty, 3, SEED, "id"),
                     lambda empty=empty: sg.bootstrap(empty, 2, SEED, "id"),
                     lambda empty=empty: sg.tag(empty, "holdout", SEED, "id", ratio=0.5),
                     lambda empty=empty: sg.sample(empty, USER_UDF, SEED, "id", ratio=0.5)):
            with pytest.raises(ParameterError, match="the DataFrame has no rows"):
                call()
        with pytest.raises(ParameterError, match="only 0 rows have a positive weight"):
            sg.weighted(empty, "w", SEED, "id", size=1)
        [(train, test)] = sg.holdout(empty, 0.5, SEED, "id", exact=False)
        assert (train.count(), test.count()) == (0, 0)


def test_one_partition_holding_every_row_gives_the_same_samples(session):
    """Rows in one partition of several Arrow batches (more rows than
    ``spark.sql.execution.arrow.maxRecordsPerBatch``, 10,000) get the
    decisions they get spread over partitions."""
    big = session.range(25_000)
    one = big.coalesce(1)
    assert one.rdd.getNumPartitions() == 1
    [(train_one, _)] = sg.holdout(one, 0.3, SEED, "id", exact=False)
    [(train_many, _)] = sg.holdout(big.repartition(4), 0.3, SEED, "id", exact=False)
    got_one, got_many = collect([train_one, train_many])
    assert got_one == got_many
    [(train_exact, test_exact)] = sg.holdout(one, 0.3, SEED, "id")
    assert [len(side) for side in collect([train_exact, test_exact])] == [7500, 17500]


# ---------------------------------------------------------------------------
# the workers' Python
# ---------------------------------------------------------------------------
def test_workers_python_lacking_a_module_is_one_error_before_any_job(spark):
    with pytest.raises(context.WorkerPythonError) as caught:
        context.check_workers(spark, ("numpy", "samplegen_no_such_module"))
    message = str(caught.value)
    assert "\n" not in message and isinstance(caught.value, SamplegenError)
    assert "lacks module 'samplegen_no_such_module'" in message
    assert "PYSPARK_PYTHON" in message and sys.executable in message


def test_workers_python_is_checked_once_per_context(spark, monkeypatch):
    """The check is one task per SparkContext: later calls run no job."""
    context.check_workers(spark)

    def no_job(*args, **kwargs):
        raise AssertionError("a second check ran a job")

    monkeypatch.setattr(spark, "parallelize", no_job)
    context.check_workers(spark)
    context.check_workers(spark, ("pyarrow",))


def test_a_task_meeting_a_missing_module_is_one_error():
    """A job whose worker could not import numpy (an executor other than
    the one checked, the engine's own jobs) fails with the same error."""
    class PythonException(Exception):
        pass

    text = ("An exception was thrown from the Python worker:\nTraceback (most recent call "
            "last):\n  File \"worker.py\", line 1, in read_command\n"
            "ModuleNotFoundError: No module named 'numpy'\n")
    failure = context.task_failure(PythonException(text))
    assert isinstance(failure, context.WorkerPythonError)
    assert "lacks module 'numpy'" in str(failure) and "PYSPARK_PYTHON" in str(failure)
    user = context.task_failure(PythonException(text.replace("'numpy'", "'mylib'")))
    assert not isinstance(user, context.WorkerPythonError)   # a user UDF's own import


#: an interpreter without numpy or pyarrow, as a system python3 usually is
SYSTEM_PYTHON = "/usr/bin/python3"


def _lacks_the_modules(python):
    if not os.path.exists(python):
        return False
    probe = subprocess.run([python, "-c", "import numpy, pyarrow"], capture_output=True)
    return probe.returncode != 0


@pytest.mark.slow
def test_an_unactivated_venv_whose_workers_start_system_python_is_one_error(tmp_path):
    """A script run as ``venv/bin/python script.py`` on its own local
    SparkSession, the workers started with the system python3: every
    function raises WorkerPythonError naming the interpreter, the module
    and the fix, in the call (not a Spark stack trace in a later action).

    The same fresh process first samples a DataFrame on a session whose
    workers have the modules, and stops it (one Python and one JVM start
    for both sessions: the JVM outlives a stopped SparkContext): the
    packages shipped to the executors of both sessions went to the
    temporary directory while the process ran, and are gone with it.  (Where
    the system python3 is missing or has the modules, only the first session
    runs, its checks made, and the test is then skipped.)"""
    script = (
        "import os, sys\n"
        "from pyspark.sql import SparkSession\n"
        "from samplegen import spark as sg\n"
        "def session():\n"
        "    s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false')"
        ".config('spark.ui.showConsoleProgress', 'false').getOrCreate()\n"
        "    s.sparkContext.setLogLevel('OFF')\n"
        "    return s\n"
        "s = session()\n"
        "[(train, test)] = sg.holdout(s.range(100), 0.5, 1, key='id')\n"
        "assert train.count() + test.count() == 100\n"
        "print(sorted(n for n in os.listdir(os.environ['TMPDIR']) if n.startswith('samplegen')))\n"
        "s.stop()\n"
        "if not sys.argv[1:]:\n"
        "    sys.exit(0)\n"
        "os.environ['PYSPARK_PYTHON'] = sys.argv[1]   # read by the next SparkContext\n"
        "s = session()\n"
        "assert s.sparkContext.pythonExec == sys.argv[1]\n"
        "df = s.range(100).selectExpr('id', '1.0 as w')\n"
        "calls = [lambda: sg.holdout(df, 0.5, 1, key='id', exact=False),\n"
        "         lambda: sg.kfold(df, 3, 1, key='id'),\n"
        "         lambda: sg.weighted(df, 'w', 1, 'id', size=5)]\n"
        "for call in calls:\n"
        "    try:\n"
        "        call()\n"
        "        print('NO ERROR')\n"
        "    except sg.WorkerPythonError as exc:\n"
        "        print('ERROR', exc)\n")
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, TMPDIR=str(temp))
    env.pop("PYSPARK_DRIVER_PYTHON", None)
    lacks = _lacks_the_modules(SYSTEM_PYTHON)
    proc = subprocess.run([sys.executable, "-c", script, *([SYSTEM_PYTHON] if lacks else [])],
                          capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    shipped, *lines = proc.stdout.splitlines()
    assert shipped.startswith("['samplegen-spark-")                 # shipped while it ran
    assert [n for n in os.listdir(temp) if n.startswith("samplegen")] == []   # gone with it
    if not lacks:
        pytest.skip(f"{SYSTEM_PYTHON} missing or has numpy and pyarrow")
    assert len(lines) == 3, proc.stdout
    for line in lines:
        assert line.startswith(f"ERROR the Spark workers' Python {SYSTEM_PYTHON} lacks")
        assert "No module named" in line and "PYSPARK_PYTHON" in line
        assert line.endswith(f"e.g. this one: {sys.executable}")


@pytest.mark.slow
@pytest.mark.skipif(not _lacks_the_modules(SYSTEM_PYTHON),
                    reason=f"{SYSTEM_PYTHON} missing or has numpy and pyarrow")
def test_the_spark_runner_with_workers_lacking_numpy_is_one_line(tmp_path):
    """``--runner spark`` told to start its workers with the system python3:
    one line naming the module and the setting, exit status 2, nothing
    written (the run's clean-up job, failing for the same reason, adds no
    stack trace)."""
    import re

    src = make(tmp_path, "m", rows=100, cols=3, block_size=16)
    proc = subprocess.run(
        [sys.executable, "-m", "samplegen", "holdout", src, str(tmp_path / "out"), "--ratio",
         "0.5", "--seed", "1", "--runner", "spark", "--spark-master", "local[1]",
         "--spark-conf", f"spark.pyspark.python={SYSTEM_PYTHON}"],
        cwd=str(tmp_path), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [line for line in proc.stderr.splitlines()      # off a terminal: progress lines
             if not re.match(r"samplegen: [a-z-]+: +\d+% ", line)]
    assert lines == [f"samplegen: error: the Spark workers' Python lacks module 'numpy' "
                     f"(ModuleNotFoundError: No module named 'numpy'); start Spark with "
                     f"PYSPARK_PYTHON (or spark.pyspark.python) set to a Python that has numpy "
                     f"and pyarrow, e.g. this one: {sys.executable}"], proc.stderr[-2000:]
    assert sorted(os.listdir(tmp_path)) == ["m"]
