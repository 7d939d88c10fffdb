"""Hostile tests of the Spark Structured Streaming sink for time-biased
samples (``samplegen.tbs.stream.sink`` for ``foreachBatch``, and
``read_sample``), STATE and staging on the local file system: bad
parameters, parameters that differ from an existing STATE, bad
micro-batches, batch ids that are negative, huge, not integers or older
than the STATE's, a staged micro-batch changed or cut before it is applied,
a damaged STATE read back, and two sinks feeding one STATE at once.

Every bad input is one line (a :class:`TBSError`), nothing is written and
the STATE is left as it was; damage is one error naming the file; never a
sample of other rows."""
import os
import shutil

import pandas as pd
import pytest

from samplegen.tbs.errors import TBSError
from samplegen.tbs.stream import current_sample, read_sample, run, sink, spark_sink, status
from samplegen.tbs.stream.batches import MAX_BATCH
from samplegen.tbs.stream.storage import DamagedStateError
from samplegen.udfs.errors import InputError

from ..conftest import tree_digest
from ..tbs_jobs_util import batch_frame, write_batch

PARAMS = dict(rate=0.1, size=40, seed=1, partitions=2)
GIVEN = {"algorithm": "rtbs", "decay": "exp", "lambda": 0.1, "size": 40, "seed": 1,
         "partitions": 2}
ROWS = 30


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch):
    monkeypatch.setenv("SAMPLEGEN_TBS_FSYNC", "0")


@pytest.fixture(scope="module")
def frames(spark):
    """Micro-batches 1-3 (``ROWS`` rows each) as Spark DataFrames: shared by
    every test that feeds a sink."""
    from pyspark.sql import SparkSession
    session = SparkSession(spark)
    return {k: session.createDataFrame(batch_frame(k, ROWS)) for k in (1, 2, 3)}


@pytest.fixture(scope="module")
def applied(frames, tmp_path_factory):
    """The STATEs a sink with ``PARAMS`` makes of micro-batch 1 and of
    micro-batches 1 and 2 (batch ids 0, 1): ``{1: state, 2: state}``, built
    once for the module; the tests that start from them feed copies
    (:func:`_copy`)."""
    base = tmp_path_factory.mktemp("applied")
    state = str(base / "state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAMPLEGEN_TBS_FSYNC", "0")
        keep = sink(state, **PARAMS)
        keep(frames[1], 0)
        after_one = _copy(state, base / "one")
        keep(frames[2], 1)
    return {1: after_one, 2: state}


def _copy(state, dest):
    """A copy of STATE *state* and of its staging directory at *dest*: the
    STATE path of the copy."""
    dest = str(dest)
    shutil.copytree(state, dest)
    if os.path.exists(state + ".incoming"):
        shutil.copytree(state + ".incoming", dest + ".incoming")
    return dest


def _reference(tmp_path, ks):
    """The STATE ``run`` makes of batches ``ks`` (what the sink must equal)."""
    batches = str(tmp_path / "ref-batches")
    for k in ks:
        write_batch(batches, k, ROWS)
    ref = str(tmp_path / "ref")
    run(batches, ref, GIVEN, options={"fsync": False})
    return ref


def _one_line(exc):
    message = str(exc)
    assert message and "\n" not in message, message
    return message


# ----------------------------------------------------------------------------- parameters

BAD = [
    (dict(size=0), "size must be an integer >= 1"),
    (dict(rate=-1.0), "rate must be >= 0"),
    (dict(algorithm="xtbs"), "algorithm must be rtbs or ttbs"),
    (dict(algorithm="ttbs"), "mean_batch_size is required"),
    (dict(decay="poly", power=0.0), "power must be > 0"),
    (dict(partitions=0), "partitions must be an integer >= 1"),
    (dict(runner="yarn"), "runner must be one of"),
    (dict(seed=-3), "seed"),
    (dict(window=3), "unknown parameter 'window'"),
    (dict(key=3), "key must be a column name"),
    (dict(time=5), "time must be None"),
]


@pytest.mark.parametrize("bad,words", BAD, ids=[w.split()[0] for _, w in BAD])
def test_bad_parameters_are_one_line_errors_before_anything_is_written(tmp_path, bad, words):
    state = str(tmp_path / "state")
    args = dict(dict(rate=0.1, size=50, seed=1), **bad)
    with pytest.raises(TBSError) as info:
        sink(state, **args)
    message = _one_line(info.value)
    assert words in message and "--" not in message, message
    assert not os.path.exists(state) and not os.path.exists(state + ".incoming")


def test_parameters_that_differ_from_an_existing_state_are_refused(tmp_path):
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batch(batches, 1, 30)
    run(batches, state, {"algorithm": "rtbs", "decay": "exp", "lambda": 0.1, "size": 20,
                         "seed": 1})
    before = tree_digest(state)
    with pytest.raises(TBSError, match=r"created with size 20; got 30") as info:
        sink(state, rate=0.1, size=30, seed=1)
    _one_line(info.value)
    with pytest.raises(TBSError, match="staging must be a directory other than the STATE"):
        sink(state, rate=0.1, size=20, seed=1, staging=state + "/")
    assert tree_digest(state) == before


# ----------------------------------------------------------------------------- micro-batches

@pytest.mark.spark
def test_bad_micro_batches_are_one_line_errors_before_anything_is_written(tmp_path, frames):
    """A reserved column, a missing key column, a time that does not increase:
    refused before the batch is staged."""
    state = str(tmp_path / "state")
    keep = sink(state, rate=0.1, size=40, seed=1, time=lambda df, batch_id: 10.0 - batch_id)
    keep(frames[1], 0)
    before = tree_digest(state)
    reserved = frames[2].withColumnRenamed("x", "_sg_row")
    for df, words in [(reserved, "is reserved"), (frames[2], "does not come after 10.0")]:
        with pytest.raises(TBSError, match=words) as info:
            keep(df, 1)
        _one_line(info.value)
    keyed = sink(state, rate=0.1, size=40, seed=1, key="nope")
    with pytest.raises(TBSError, match="key column 'nope' is not a column"):
        keyed(frames[2], 1)
    assert tree_digest(state) == before
    assert os.listdir(state + ".incoming") == []


@pytest.mark.spark
def test_batch_ids_negative_huge_not_integers_or_older_are_refused(tmp_path, frames, applied):
    """Spark's batch ids are integers from 0 on, each once after the last
    (a replay of the last one is skipped, docs/TBS_JOBS.md): anything else --
    -1, 2**31 - 1 and beyond, 1.0, "1", True, None, an id older than the
    STATE's last one after several newer ones -- is one line, and the STATE
    keeps every byte."""
    state = _copy(applied[2], tmp_path / "state")      # batch ids 0 and 1 applied
    keep = sink(state, **PARAMS)
    keep(frames[3], 2)
    before = tree_digest(state)
    for batch_id in (-1, MAX_BATCH, 2 ** 63, 1.0, "1", True, None):
        with pytest.raises(TBSError, match="batch_id must be an integer >= 0 and below") as info:
            keep(frames[1], batch_id)
        assert repr(batch_id) in _one_line(info.value)
    for batch_id in (0, 1):
        with pytest.raises(TBSError, match=f"micro-batch {batch_id} is older than the last one"):
            keep(frames[1], batch_id)
    keep(frames[1], 2)                         # the last one again: a replay, skipped
    assert tree_digest(state) == before
    assert status(state)["last_batch"] == 3 and os.listdir(state + ".incoming") == []


# ----------------------------------------------------------------------------- damage

def _damage_when_staged(monkeypatch, staging, damage):
    """Call ``damage(path)`` on the file staged in ``staging`` when the sink
    has staged it (at its ``sink-staged`` fault-injection point), once."""
    done = []
    original = spark_sink.crash_point

    def point(name):
        if name == "sink-staged" and not done:
            done.append(name)
            [staged] = [n for n in os.listdir(staging) if n.startswith("batch-")]
            damage(os.path.join(staging, staged))
        original(name)

    monkeypatch.setattr(spark_sink, "crash_point", point)


def _flip(path):
    data = bytearray(open(path, "rb").read())
    data[len(data) // 3] ^= 0x55                 # inside a data page: other values, same size
    open(path, "wb").write(bytes(data))


def _truncate(path):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:len(data) // 2])


@pytest.mark.spark
@pytest.mark.parametrize("damage", [_flip, _truncate], ids=["flipped", "truncated"])
def test_a_staged_batch_damaged_before_it_is_applied_is_refused(tmp_path, monkeypatch, frames,
                                                                applied, damage):
    """The staged file is written by the sink and read back by the job: a
    byte changed or the file cut between the two is one error naming the
    staged file, nothing is applied (a changed value would otherwise enter
    the sample), and the micro-batch staged again applies it as ``run``
    would."""
    state = _copy(applied[1], tmp_path / "state")      # batch id 0 applied
    keep = sink(state, **PARAMS)
    before = tree_digest(state)
    _damage_when_staged(monkeypatch, state + ".incoming", damage)
    with pytest.raises(InputError) as info:
        keep(frames[2], 1)
    message = _one_line(info.value)
    assert isinstance(info.value, TBSError)
    assert os.path.join(state + ".incoming", "batch-2.parquet") in message
    assert ("truncated" if damage is _truncate else "does not match") in message
    assert tree_digest(state) == before and status(state)["last_batch"] == 1
    keep(frames[2], 1)                         # the replay after a restart
    keep(frames[3], 2)
    ref = _reference(tmp_path, (1, 2, 3))
    pd.testing.assert_frame_equal(current_sample(state), current_sample(ref))


@pytest.mark.spark
@pytest.mark.parametrize("rel", ["deltas/0000000002/in/part-00001.parquet",
                                 "commits/0000000002.json"])
def test_read_sample_of_a_damaged_state_is_one_error_naming_the_file(tmp_path, spark, applied,
                                                                      rel):
    """Flipped bytes in a file of the STATE (a delta the sample reads, the
    newest commit): ``read_sample`` raises one DamagedStateError naming it,
    no DataFrame of other rows."""
    from pyspark.sql import SparkSession
    state = _copy(applied[2], tmp_path / "state")      # batch ids 0 and 1 applied
    path = os.path.join(state, *rel.split("/"))
    _flip(path)
    with pytest.raises(DamagedStateError) as info:
        read_sample(SparkSession(spark), state)
    assert path in _one_line(info.value)


# ----------------------------------------------------------------------------- races

@pytest.mark.spark
def test_two_sinks_feeding_one_state_at_once_are_refused(tmp_path, monkeypatch, frames,
                                                         applied):
    """While a sink applies micro-batch 1, a second sink on the same STATE
    gets the same batch id with other rows.  Through the same staging: it
    is refused at once (the staging lock) instead of replacing the staged
    batch.  Through a staging of its own: it applies its batch, and the
    first sink, whose batch is then not the one the STATE holds, fails
    instead of reporting success.  Never a micro-batch lost silently."""
    state = _copy(applied[1], tmp_path / "state")      # batch id 0 applied
    first = sink(state, **PARAMS)
    other_rows = frames[3].limit(ROWS - 7)
    refused = []
    original = spark_sink.crash_point

    def same_staging(name):
        if name == "sink-staged" and not refused:
            refused.append(name)               # (the second sink, not refused, passes here too)
            with pytest.raises(TBSError, match="another sink is applying a micro-batch") as info:
                sink(state, **PARAMS)(other_rows, 1)
            refused.append(_one_line(info.value))
        original(name)

    monkeypatch.setattr(spark_sink, "crash_point", same_staging)
    first(frames[2], 1)
    assert f"pid {os.getpid()}" in refused[1]
    pd.testing.assert_frame_equal(current_sample(state),
                                  current_sample(_reference(tmp_path, (1, 2))))
    own = sink(state, staging=str(tmp_path / "own"), **PARAMS)
    applied = []

    def own_staging(name):
        if name == "sink-staged" and not applied:
            applied.append(name)               # (the second sink passes here too)
            own(other_rows, 2)
            applied.append(status(state)["last_batch"])
        original(name)

    monkeypatch.setattr(spark_sink, "crash_point", own_staging)
    with pytest.raises(TBSError, match="micro-batch 2 was not applied") as info:
        first(frames[3], 2)
    assert f"{ROWS - 7} rows; this one: time 3.0, {ROWS} rows" in _one_line(info.value)
    assert applied == ["sink-staged", 3] and [e[:3] for e in _ledger(state)] == [
        [1, 1.0, ROWS], [2, 2.0, ROWS], [3, 3.0, ROWS - 7]]


def _ledger(state):
    import json
    commits = os.path.join(state, "commits")
    newest = max(n for n in os.listdir(commits) if n.endswith(".json"))
    with open(os.path.join(commits, newest)) as f:
        return json.load(f)["ledger"]
