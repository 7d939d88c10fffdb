"""samplegen.spark on a real local Spark: DataFrames in, DataFrames out,
every decision keyed by a column.  The samples do not depend on the
partitioning, the row order or recomputation of a non-deterministic
upstream; sizes are exact where promised; columns of any type pass through;
row-id keys give the block jobs' membership (the in-memory API is the block
jobs' contract, tests/test_api.py; one holdout is checked against a run).
"""
import collections

import numpy as np
import pytest

from samplegen import spark as sg
from samplegen.jobs import api, driver, keys
from samplegen.udfs.builtin import HoldOut
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.rng import PositionRNG

from .conftest import NO_CONF, make

pytestmark = pytest.mark.spark
SEED = 7
N = 3000


@pytest.fixture(scope="module")
def frame(session):
    """Row ids 0..N-1 with a string, an array and a struct column."""
    from pyspark.sql import functions as F

    return (session.range(N)
            .withColumn("name", F.concat(F.lit("row-"), F.col("id").cast("string")))
            .withColumn("tags", F.array(F.col("id") % 3, F.col("id") % 5))
            .withColumn("point", F.struct((F.col("id") * 0.5).alias("x"),
                                          F.lit("p").alias("label"))))


def ids(df):
    """The key column's values, as a sorted list (repeats kept)."""
    return sorted(row[0] for row in df.select("id").collect())


def variants(session, frame):
    """The same rows under other partitionings and orders, and recomputed
    from a non-deterministic upstream (a random order, then round-robin
    partitions: each evaluation deals the rows out differently)."""
    from pyspark.sql import functions as F

    return {"one partition": frame.repartition(1),
            "seven partitions": frame.repartition(7),
            "shuffled": frame.orderBy(F.rand()),
            "recomputed": frame.orderBy(F.rand()).repartition(5)}


def test_holdout_is_the_block_jobs_under_any_partitioning(session, frame):
    ref = api.holdout(N, 0.7, SEED, repeats=2)
    want = [(sorted(ref.indices(f"train-{w}").tolist()), sorted(ref.indices(f"test-{w}").tolist()))
            for w in range(2)]
    for label, df in {"as built": frame, **variants(session, frame)}.items():
        pairs = sg.holdout(df, 0.7, SEED, key="id", repeats=2)
        got = [(ids(train), ids(test)) for train, test in pairs]
        assert got == want, label
    for train, test in want:  # a partition of the rows
        assert not set(train) & set(test) and len(train) + len(test) == N


def test_kfold_each_row_in_exactly_one_test_fold(session, frame):
    ref = api.kfold(N, 4, SEED)
    for label, df in variants(session, frame).items():
        folds = sg.kfold(df, 4, SEED, key="id")
        tests = [ids(test) for _, test in folds]
        assert tests == [sorted(ref.indices(f"test-{i}").tolist()) for i in range(4)], label
        assert sorted(sum(tests, [])) == list(range(N))
    train, test = folds[1]
    assert sorted(ids(train) + ids(test)) == list(range(N))


def test_exact_sizes_are_the_block_jobs_under_any_partitioning(session, frame):
    """holdout(exact=True) and kfold(balanced=True) over row-id keys: the
    API's samples (the block jobs'), exact sizes, whatever the layout; over
    other keys (integers, strings) exact sizes too, by cutoffs on the
    coins' words."""
    from pyspark.sql import functions as F

    ref = api.holdout(N, 0.7, SEED, repeats=2, exact=True)
    folds_ref = api.kfold(N, 7, SEED, balanced=True)
    for label, df in variants(session, frame).items():
        pairs = sg.holdout(df, 0.7, SEED, key="id", repeats=2, exact=True)
        for w, (train, test) in enumerate(pairs):
            assert ids(train) == sorted(ref.indices(f"train-{w}").tolist()), label
            assert ids(test) == sorted(ref.indices(f"test-{w}").tolist()), label
            assert (train.count(), test.count()) == (2100, 900), label
        tests = [ids(test) for _, test in sg.kfold(df, 7, SEED, key="id", balanced=True)]
        assert tests == [sorted(folds_ref.indices(f"test-{i}").tolist()) for i in range(7)]
        assert sorted(len(t) for t in tests) == [428] * 3 + [429] * 4, label
    # other keys: cutoffs on the coins' words, the same rows as in memory
    from samplegen.udfs.ranks import find_cutoffs
    shifted = frame.withColumn("id", F.col("id") * 7 + 1)
    positions = np.arange(N) * 7 + 1
    rng = PositionRNG(SEED)
    streams, ranks = HoldOut(N, 0.7, repeats=2).rank_targets()
    want = HoldOut(N, 0.7, repeats=2, cutoffs=find_cutoffs(rng, positions, streams, ranks)) \
        .occurrences_at(positions, rng)
    for label, df in {"as built": shifted, "3 parts": shifted.repartition(3)}.items():
        pairs = sg.holdout(df, 0.7, SEED, key="id", repeats=2, exact=True)
        for w, (train, test) in enumerate(pairs):
            assert ids(train) == sorted(positions[want.offset[want.sample == 2 * w]].tolist())
            assert (train.count(), test.count()) == (2100, 900), label
    tests = [ids(test) for _, test in sg.kfold(shifted.repartition(4), 7, SEED, key="id",
                                               balanced=True)]
    assert sorted(len(t) for t in tests) == [428] * 3 + [429] * 4
    assert sorted(sum(tests, [])) == sorted(positions.tolist())
    by_name = sg.kfold(frame.repartition(2), 5, SEED, key="name", balanced=True)
    assert sorted(test.count() for _, test in by_name) == [600] * 5


def test_bootstrap_out_of_bag_by_row_ids_and_refused_for_other_keys(session, frame):
    from pyspark.sql import functions as F

    ref = api.bootstrap(N, 2, SEED, oob=True)
    pairs = sg.bootstrap(frame.repartition(4), 2, SEED, key="id", oob=True)
    for i, (bag, oob) in enumerate(pairs):
        assert ids(bag) == sorted(ref.indices(f"sample-{i}").tolist())
        assert ids(oob) == sorted(ref.indices(f"oob-{i}").tolist())
        assert not set(ids(bag)) & set(ids(oob))
    with pytest.raises(ParameterError, match="out-of-bag sets need"):
        sg.bootstrap(frame.withColumn("id", F.col("id") * 2), 2, SEED, key="id", oob=True)


def test_bootstrap_exact_size_and_the_block_jobs_draws(session, frame):
    ref = api.bootstrap(N, 3, SEED, size=2500)
    for label, df in variants(session, frame).items():
        samples = sg.bootstrap(df, 3, SEED, key="id", size=2500)
        for i, part in enumerate(samples):
            got = ids(part)
            assert len(got) == 2500, label
            assert got == sorted(ref.indices(f"sample-{i}").tolist()), label
    default = sg.bootstrap(frame, 1, SEED, key="id")[0]
    assert default.count() == N
    assert max(collections.Counter(ids(default)).values()) > 1  # drawn with replacement


@pytest.mark.parametrize("kind", ["strings", "sparse integers"])
def test_bootstrap_of_other_keys_is_exact_and_keyed(session, frame, kind):
    """Keys that are not the row ids 0..N-1: the first arrivals of keyed
    Poisson processes (udfs/arrivals.py), exactly *size* rows, the same
    under any partitioning, and the arrivals of the rows' positions as the
    in-memory computation finds them."""
    from pyspark.sql import functions as F

    from samplegen.udfs.arrivals import KeyedBootstrap, find_cutoffs

    if kind == "strings":
        df, key = frame, "name"
    else:
        df, key = frame.withColumn("id", F.col("id") * 1_000_003 + 17), "id"
    rows = df.select("name", "id").collect()
    names = [r["name"] for r in rows]
    positions = np.array([keys.hashed_position(r["name"]) if kind == "strings" else r["id"]
                          for r in rows], np.int64)
    cutoffs = find_cutoffs(PositionRNG(SEED), positions, N, 2, 2500)
    occ = KeyedBootstrap(N, 2, 2500, cutoffs).occurrences_at(positions, PositionRNG(SEED))
    want = [sorted(names[i] for i in occ.offset[occ.sample == s]) for s in range(2)]
    for label, variant in variants(session, df).items():
        samples = sg.bootstrap(variant, 2, SEED, key=key, size=2500)
        got = [sorted(r[0] for r in part.select("name").collect()) for part in samples]
        assert [len(g) for g in got] == [2500, 2500], label
        assert got == want, label


def test_bootstrap_with_repeated_keys_is_exact_or_refused(session, frame):
    """Rows with equal keys share their arrivals: the size stays exact,
    unless the cut falls between two of them, which is refused by name
    (keys must be unique; seeds chosen to show both outcomes)."""
    from pyspark.sql import functions as F

    df = frame.withColumn("id", F.col("id") % 2000)
    outcomes = set()
    for seed in range(6):
        try:
            samples = sg.bootstrap(df, 1, seed, key="id", size=1000)
        except ParameterError as exc:
            assert "duplicates" in str(exc)
            outcomes.add("refused")
            continue
        assert samples[0].count() == 1000
        outcomes.add("exact")
    assert outcomes == {"refused", "exact"}


def test_membership_equals_a_block_job(session, tmp_path):
    """The key holds the row ids of a block matrix: the same rows as the
    inline job's run directory, sample by sample."""
    src = make(tmp_path, rows=900, cols=4, block_size=100, seed=2)
    run = str(tmp_path / "run")
    driver.generate(src, run, "holdout", {"ratio": 0.6, "repeats": 2}, SEED, runner="inline",
                    options=NO_CONF)
    samples = api.read_run(run)
    df = session.range(900).repartition(3)
    for w, (train, test) in enumerate(sg.holdout(df, 0.6, SEED, key="id", repeats=2)):
        assert ids(train) == sorted(samples.indices(f"train-{w}").tolist())
        assert ids(test) == sorted(samples.indices(f"test-{w}").tolist())


def test_other_columns_pass_through_untouched(session, frame):
    (train, test), = sg.holdout(frame.repartition(4), 0.5, SEED, key="id")
    assert train.schema == frame.schema
    original = {row["id"]: row for row in frame.collect()}
    for row in train.collect() + test.collect():
        assert row == original[row["id"]]
    boot = sg.bootstrap(frame, 1, SEED, key="id", size=500)[0]
    for row in boot.collect():
        assert row == original[row["id"]]


def test_string_keys_are_hashed_as_jobs_keys_says(session, frame):
    """A string key's position is the first 60 bits of its MD5 (jobs.keys,
    computed here in Python); decisions follow it under any partitioning."""
    from pyspark.sql import functions as F

    names = [row["name"] for row in frame.select("name").collect()]
    positions = np.array([keys.hashed_position(n) for n in names], dtype=np.int64)
    occ = HoldOut(1 << 62, 0.7, exact=False).occurrences_at(positions, PositionRNG(SEED))
    want = sorted(names[i] for i in occ.offset[occ.sample == 0])
    for df in (frame, frame.repartition(7), frame.orderBy(F.rand())):
        (train, _), = sg.holdout(df, 0.7, SEED, key="name", exact=False)
        assert sorted(row[0] for row in train.select("name").collect()) == want


def test_tag_gives_every_sample_in_one_frame(session, frame):
    tagged = sg.tag(frame.repartition(3), "holdout", SEED, "id", ratio=0.8, repeats=3)
    counts = dict(tagged.groupBy("sample").count().collect())
    assert sorted(counts) == sorted(f"{s}-{w}" for w in range(3) for s in ("train", "test"))
    for w in range(3):
        assert counts[f"train-{w}"] + counts[f"test-{w}"] == N
    ref = api.holdout(N, 0.8, SEED, repeats=3)
    rows = tagged.filter("sample = 'test-2'").select("id").collect()
    assert sorted(r[0] for r in rows) == sorted(ref.indices("test-2").tolist())


def test_user_udf_and_its_sample_names(session, frame):
    parts = sg.sample(frame.repartition(5), "samplegen.udfs.examples:bernoulli", SEED, "id",
                      p=0.2)
    ref = api.sample(N, "samplegen.udfs.examples:bernoulli", SEED, p=0.2)
    assert list(parts) == ref.names
    for name, df in parts.items():
        assert ids(df) == sorted(ref.indices(name).tolist())


def test_holdout_share_is_binomial(session, session_range):
    """The train share of 20,000 rows is Binomial(20000, 0.75): within 5
    standard deviations (two-sided, p < 6e-7)."""
    n, p = 20000, 0.75
    (train, _), = sg.holdout(session_range(n).repartition(4), p, 11, key="id", exact=False)
    assert abs(train.count() - n * p) < 5 * (n * p * (1 - p)) ** 0.5


@pytest.fixture(scope="module")
def session_range(session):
    return session.range


def test_a_scalar_udf_sees_the_key_as_its_row_id(session, frame):
    spec = "samplegen.udfs.examples:paper_holdout_series"
    parts = sg.sample(frame.repartition(3), spec, SEED, "id", ratio=0.5, repeats=2)
    ref = api.sample(N, spec, SEED, ratio=0.5, repeats=2)
    for name, df in parts.items():
        assert ids(df) == sorted(ref.indices(name).tolist())


def test_the_row_batch_path_of_older_sparks_gives_the_same_samples(session, frame, monkeypatch):
    """Spark < 4.1 has no Arrow UDFs: the rows then cross to Python in
    Arrow batches (mapInArrow) and come back once per occurrence; the
    samples are the same."""
    from pyspark.sql import functions as F

    want = [ids(part) for part in sg.bootstrap(frame, 2, SEED, key="id", size=900)]
    (train, test), = sg.holdout(frame.repartition(3), 0.6, SEED, key="name")
    want_ho = (sorted(r[0] for r in train.select("name").collect()), ids(test))
    monkeypatch.delattr(F, "arrow_udf")
    assert [ids(part) for part in sg.bootstrap(frame, 2, SEED, key="id", size=900)] == want
    (train, test), = sg.holdout(frame.repartition(3), 0.6, SEED, key="name")
    assert (sorted(r[0] for r in train.select("name").collect()), ids(test)) == want_ho
    assert train.schema == frame.schema


def test_stratified_holdout_and_kfold_of_a_dataframe(session, frame):
    """stratify=: the block jobs' allocation over the classes (counted by one
    aggregate), each class cut at its own ranks of the coins' words: exact
    totals, every class within one row of its share, any keys."""
    from pyspark.sql import functions as F

    from samplegen.udfs.strata import holdout_allocation, round_robin

    df = frame.withColumn("cls", (F.col("id") % 7 == 0).cast("int")
                          + (F.col("id") % 3 == 0).cast("int")).repartition(3)
    counts = dict(df.groupBy("cls").count().collect())
    classes = sorted(counts)
    alloc = holdout_allocation([2100, 900], [counts[c] for c in classes])
    pairs = sg.holdout(df, 0.7, SEED, key="name", repeats=2, stratify="cls")
    seen = []
    for train, test in pairs:
        got = [dict(part.groupBy("cls").count().collect()) for part in (train, test)]
        assert [[got[s].get(c, 0) for c in classes] for s in (0, 1)] == alloc[:, :2].T.tolist()
        names = [r["name"] for r in train.select("name").collect()]
        assert len(set(names)) == len(names) == 2100
        seen.append(set(names))
    assert seen[0] != seen[1]
    folds = sg.kfold(df, 5, SEED, key="name", stratify="cls")
    sizes = round_robin([counts[c] for c in classes], 5)     # the block jobs' allocation
    tests = []
    for f, (_, test) in enumerate(folds):
        got = dict(test.groupBy("cls").count().collect())
        assert [got.get(c, 0) for c in classes] == sizes[:, f].tolist()
        tests += [r["name"] for r in test.select("name").collect()]
    assert sorted(tests) == sorted(r["name"] for r in frame.select("name").collect())
    with pytest.raises(ParameterError, match="not in the DataFrame"):
        sg.holdout(df, 0.7, SEED, key="name", stratify="nope")
    # bootstrap: every bag holds each class's share of the size, drawn from its rows
    from samplegen.udfs.strata import proportional
    shares = proportional(1000, [counts[c] for c in classes]).tolist()
    for bag in sg.bootstrap(df, 2, SEED, key="name", size=1000, stratify="cls"):
        got = dict(bag.groupBy("cls").count().collect())
        assert [got.get(c, 0) for c in classes] == shares


def test_stratified_samples_keyed_by_row_id_are_the_block_jobs(session, frame):
    """stratify= on rows keyed by their row ids: every row's class is
    collected once, sent with the tasks, and the samples are the block
    jobs' (the in-memory API's) under any partitioning."""
    from pyspark.sql import functions as F

    df = frame.withColumn("cls", F.concat(F.lit("c"), ((F.col("id") % 7 == 0).cast("int")
                                                       + (F.col("id") % 3 == 0).cast("int"))
                                          .cast("string")))
    cls = np.array([f"c{int(i % 7 == 0) + int(i % 3 == 0)}" for i in range(N)])
    ref = api.holdout(N, 0.7, SEED, repeats=2, stratify=cls)
    for name, part in variants(session, df).items():
        pairs = sg.holdout(part, 0.7, SEED, key="id", repeats=2, stratify="cls")
        got = [ids(side) for pair in pairs for side in pair]
        assert got == [sorted(ref.indices(n).tolist()) for n in ref.names], name
    ref = api.kfold(N, 5, SEED, stratify=cls)
    folds = sg.kfold(df.repartition(4), 5, SEED, key="id", stratify="cls")
    assert [ids(test) for _, test in folds] == \
        [sorted(ref.indices(f"test-{f}").tolist()) for f in range(5)]
    ref = api.bootstrap(N, 2, SEED, size=1000, stratify=cls)
    bags = sg.bootstrap(df.repartition(3), 2, SEED, key="id", size=1000, stratify="cls")
    assert [ids(bag) for bag in bags] == [sorted(ref.indices(n).tolist()) for n in ref.names]


def test_grouped_samples_keyed_by_row_id_are_the_block_jobs(session, frame):
    """groups= on rows keyed by their row ids: the block jobs' --groups
    (whole groups; balanced folds by rows), under any partitioning; other
    keys are refused in one line, pointing to keying by the group."""
    from pyspark.sql import functions as F

    df = frame.withColumn("patient", (F.col("id") * 7919 % 401).cast("int"))
    patient = (np.arange(N) * 7919 % 401).astype(np.int64)
    ref = api.holdout(N, 0.7, SEED, by_groups=patient)
    for name, part in variants(session, df).items():
        (train, test), = sg.holdout(part, 0.7, SEED, key="id", groups="patient")
        assert [ids(train), ids(test)] == [sorted(ref.indices(n).tolist())
                                          for n in ("train-0", "test-0")], name
    ref = api.kfold(N, 4, SEED, by_groups=patient)
    folds = sg.kfold(df.repartition(3), 4, SEED, key="id", groups="patient")
    got = [ids(test) for _, test in folds]
    assert got == [sorted(ref.indices(f"test-{f}").tolist()) for f in range(4)]
    for f in range(4):
        rest = np.setdiff1d(np.arange(N), got[f])
        assert not set(patient[got[f]]) & set(patient[rest])      # whole groups
    with pytest.raises(ParameterError, match="key the rows by the group column"):
        sg.kfold(df, 4, SEED, key="name", groups="patient")
    with pytest.raises(ParameterError, match="either stratified or grouped"):
        sg.kfold(df, 4, SEED, key="id", groups="patient", stratify="patient")


@pytest.mark.slow
def test_a_session_leaves_no_temporary_files_behind(tmp_path):
    """A fresh process samples a DataFrame and ends: the packages shipped to
    its executors went to the temporary directory, and are gone with it."""
    import os
    import subprocess
    import sys
    temp = tmp_path / "tmp"
    temp.mkdir()
    script = ("from pyspark.sql import SparkSession\n"
              "from samplegen import spark as sg\n"
              "s = SparkSession.builder.master('local[1]').getOrCreate()\n"
              "[(train, test)] = sg.holdout(s.range(100), 0.5, 1, key='id')\n"
              "assert train.count() + test.count() == 100\n"
              "import os, sys\n"
              "print(sorted(n for n in os.listdir(sys.argv[1]) if n.startswith('samplegen')))\n")
    proc = subprocess.run([sys.executable, "-c", script, str(temp)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, TMPDIR=str(temp),
                                                           PYSPARK_PYTHON=sys.executable))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().startswith("['samplegen-spark-")   # shipped while it ran
    assert [n for n in os.listdir(temp) if n.startswith("samplegen")] == []
