"""samplegen.spark on a real local Spark: DataFrames in, DataFrames out,
every decision keyed by a column.  The samples do not depend on the
partitioning, the row order or recomputation of a non-deterministic
upstream; sizes are exact where promised; columns of any type pass through;
row-id keys give the block jobs' membership (the in-memory API is the block
jobs' contract, tests/test_api.py; one holdout is checked against a run).

Each test collects the samples of one call in one Spark job (:func:`collect`:
the samples' keys, tagged by sample, in one union), and the hold-outs over
every partitioning, which two tests check, are computed once per module
(:func:`holdouts`).
"""
import collections

import numpy as np
import pytest

from samplegen import spark as sg
from samplegen.jobs import api, driver, keys
from samplegen.udfs.builtin import HoldOut
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.rng import PositionRNG

from .conftest import NO_CONF, collect, make

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


def flat(pairs):
    """``[(a, b), ...]`` as ``[a, b, ...]``."""
    return [side for pair in pairs for side in pair]


def variants(session, frame):
    """The same rows under other partitionings and orders: every row in one
    partition, and the rows in a random order dealt by a random draw over
    eight partitions, about two thirds into one, the rest over five others,
    at least two empty, recomputed from a non-deterministic upstream (each
    evaluation deals the rows out differently).  The two cover the cases of
    a sweep over partitionings (one partition and many, any row order,
    recomputation) and add skewed and empty partitions, in two layouts: each
    is a Spark run of every function under test."""
    from pyspark.sql import functions as F

    deal = F.when(F.rand() < 2 / 3, 0).otherwise(F.floor(F.rand() * 5) + 1)
    mixed = (frame.orderBy(F.rand()).withColumn("__deal", deal).repartition(8, "__deal")
             .drop("__deal"))
    return {"one partition": frame.repartition(1), "mixed": mixed}


@pytest.fixture(scope="module")
def holdouts(session, frame):
    """``sg.holdout(df, 0.7, SEED, key="id", repeats=2)`` (exact sizes, the
    default) of the frame as built and of each of its variants: ``{label:
    [train-0, test-0, train-1, test-1]}``, each a sorted list of keys (one
    aggregate and one collecting job per frame)."""
    return {label: collect(flat(sg.holdout(df, 0.7, SEED, key="id", repeats=2)))
            for label, df in {"as built": frame, **variants(session, frame)}.items()}


def test_holdout_is_the_block_jobs_under_any_partitioning(holdouts):
    ref = api.holdout(N, 0.7, SEED, repeats=2)
    want = [(sorted(ref.indices(f"train-{w}").tolist()), sorted(ref.indices(f"test-{w}").tolist()))
            for w in range(2)]
    for label, (train0, test0, train1, test1) in holdouts.items():
        got = [(train0, test0), (train1, test1)]
        assert got == want, label
    for train, test in want:  # a partition of the rows
        assert not set(train) & set(test) and len(train) + len(test) == N


def test_kfold_each_row_in_exactly_one_test_fold(session, frame):
    ref = api.kfold(N, 4, SEED)
    for label, df in variants(session, frame).items():
        folds = sg.kfold(df, 4, SEED, key="id")
        *tests, train = collect([test for _, test in folds] + [folds[1][0]])
        assert tests == [sorted(ref.indices(f"test-{i}").tolist()) for i in range(4)], label
        assert sorted(sum(tests, [])) == list(range(N))
        assert sorted(train + tests[1]) == list(range(N)), label
    # the layouts are what variants() says: one partition; eight, skewed, two or more empty
    layouts = {label: df.rdd.glom().map(len).collect()
               for label, df in variants(session, frame).items()}
    assert layouts["one partition"] == [N]
    mixed = layouts["mixed"]
    assert len(mixed) == 8 and mixed.count(0) >= 2 and max(mixed) > N / 2 and sum(mixed) == N


def test_exact_sizes_are_the_block_jobs_under_any_partitioning(session, frame, holdouts):
    """holdout(exact=True) and kfold(balanced=True) over row-id keys: the
    API's samples (the block jobs'), exact sizes, whatever the layout; over
    other keys (integers, strings) exact sizes too, by cutoffs on the
    coins' words.  (The hold-outs of row ids are the module's
    :func:`holdouts`, ``exact=True`` being the default.)"""
    from pyspark.sql import functions as F

    ref = api.holdout(N, 0.7, SEED, repeats=2, exact=True)
    folds_ref = api.kfold(N, 7, SEED, balanced=True)
    for label, df in variants(session, frame).items():
        sides = holdouts[label]
        for w in range(2):
            train, test = sides[2 * w], sides[2 * w + 1]
            assert train == sorted(ref.indices(f"train-{w}").tolist()), label
            assert test == sorted(ref.indices(f"test-{w}").tolist()), label
            assert (len(train), len(test)) == (2100, 900), label
        tests = collect(test for _, test in sg.kfold(df, 7, SEED, key="id", balanced=True))
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
        sides = collect(flat(sg.holdout(df, 0.7, SEED, key="id", repeats=2, exact=True)))
        for w in range(2):
            train, test = sides[2 * w], sides[2 * w + 1]
            assert train == sorted(positions[want.offset[want.sample == 2 * w]].tolist())
            assert (len(train), len(test)) == (2100, 900), label
    tests = collect(test for _, test in sg.kfold(shifted.repartition(4), 7, SEED, key="id",
                                                 balanced=True))
    assert sorted(len(t) for t in tests) == [428] * 3 + [429] * 4
    assert sorted(sum(tests, [])) == sorted(positions.tolist())
    by_name = sg.kfold(frame.repartition(2), 5, SEED, key="name", balanced=True)
    assert sorted(len(t) for t in collect((test for _, test in by_name), "name")) == [600] * 5


def test_bootstrap_out_of_bag_by_row_ids_and_refused_for_other_keys(session, frame):
    from pyspark.sql import functions as F

    ref = api.bootstrap(N, 2, SEED, oob=True)
    sides = collect(flat(sg.bootstrap(frame.repartition(4), 2, SEED, key="id", oob=True)))
    for i in range(2):
        bag, oob = sides[2 * i], sides[2 * i + 1]
        assert bag == sorted(ref.indices(f"sample-{i}").tolist())
        assert oob == sorted(ref.indices(f"oob-{i}").tolist())
        assert not set(bag) & set(oob)
    with pytest.raises(ParameterError, match="out-of-bag sets need"):
        sg.bootstrap(frame.withColumn("id", F.col("id") * 2), 2, SEED, key="id", oob=True)


def test_bootstrap_exact_size_and_the_block_jobs_draws(session, frame):
    ref = api.bootstrap(N, 3, SEED, size=2500)
    for label, df in variants(session, frame).items():
        samples = collect(sg.bootstrap(df, 3, SEED, key="id", size=2500))
        for i, got in enumerate(samples):
            assert len(got) == 2500, label
            assert got == sorted(ref.indices(f"sample-{i}").tolist()), label
    [default] = collect(sg.bootstrap(frame, 1, SEED, key="id"))
    assert len(default) == N
    assert max(collections.Counter(default).values()) > 1  # drawn with replacement


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
        got = collect(sg.bootstrap(variant, 2, SEED, key=key, size=2500), "name")
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
    sides = collect(flat(sg.holdout(df, 0.6, SEED, key="id", repeats=2)))
    for w in range(2):
        assert sides[2 * w] == sorted(samples.indices(f"train-{w}").tolist())
        assert sides[2 * w + 1] == sorted(samples.indices(f"test-{w}").tolist())


def test_other_columns_pass_through_untouched(session, frame):
    (train, test), = sg.holdout(frame.repartition(4), 0.5, SEED, key="id")
    assert train.schema == frame.schema
    original = {row["id"]: row for row in frame.collect()}
    for row in train.unionAll(test).collect():      # one job: both sides, every column
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
    rows = tagged.select("sample", "id").collect()          # one job: every sample
    counts = collections.Counter(r[0] for r in rows)
    assert sorted(counts) == sorted(f"{s}-{w}" for w in range(3) for s in ("train", "test"))
    for w in range(3):
        assert counts[f"train-{w}"] + counts[f"test-{w}"] == N
    ref = api.holdout(N, 0.8, SEED, repeats=3)
    assert sorted(r[1] for r in rows if r[0] == "test-2") == sorted(ref.indices("test-2").tolist())


def test_user_udf_and_its_sample_names(session, frame):
    parts = sg.sample(frame.repartition(5), "samplegen.udfs.examples:bernoulli", SEED, "id",
                      p=0.2)
    ref = api.sample(N, "samplegen.udfs.examples:bernoulli", SEED, p=0.2)
    assert list(parts) == ref.names
    for name, got in zip(parts, collect(parts.values())):
        assert got == sorted(ref.indices(name).tolist())


def test_holdout_share_is_binomial(session, session_range):
    """The train share of 20,000 rows is Binomial(20000, 0.75): within 5
    standard deviations (two-sided, false alarms p < 6e-7).  Power: sd =
    sqrt(20000 * 0.75 * 0.25) = 61.2 rows; a share off by 2.1 points (420
    rows, 6.9 sd) is outside 5 sd with probability > 0.95 (1.9 sd beyond
    the bound), so a coin of 0.729 or 0.771 fails the test."""
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
    assert list(parts) == ref.names
    for name, got in zip(parts, collect(parts.values())):
        assert got == sorted(ref.indices(name).tolist())


def test_the_row_batch_path_of_older_sparks_gives_the_same_samples(session, frame, monkeypatch):
    """Spark < 4.1 has no Arrow UDFs: the rows then cross to Python in
    Arrow batches (mapInArrow) and come back once per occurrence; the
    samples are the same."""
    from pyspark.sql import functions as F

    def samples():
        bags = sg.bootstrap(frame, 2, SEED, key="id", size=900)
        (train, test), = sg.holdout(frame.repartition(3), 0.6, SEED, key="name")
        return collect(bags + [train, test], "name"), train

    want, _ = samples()
    monkeypatch.delattr(F, "arrow_udf")
    got, train = samples()
    assert got == want
    assert train.schema == frame.schema


def test_stratified_holdout_and_kfold_of_a_dataframe(session, frame):
    """stratify=: the block jobs' allocation over the classes (counted by one
    aggregate), each class cut at its own ranks of the coins' words: exact
    totals, every class within one row of its share, any keys."""
    from pyspark.sql import functions as F

    from samplegen.udfs.strata import holdout_allocation, round_robin

    df = frame.withColumn("cls", (F.col("id") % 7 == 0).cast("int")
                          + (F.col("id") % 3 == 0).cast("int"))   # two partitions (local[2])
    assert df.rdd.getNumPartitions() > 1
    row_ids = np.arange(N)      # the frame's rows, as built: their classes and names
    counts = collections.Counter(int(c) for c in (row_ids % 7 == 0).astype(int)
                                  + (row_ids % 3 == 0))
    all_names = sorted(f"row-{i}" for i in row_ids)
    classes = sorted(counts)
    alloc = holdout_allocation([2100, 900], [counts[c] for c in classes])
    pairs = sg.holdout(df, 0.7, SEED, key="name", repeats=2, stratify="cls")
    sides = collect(flat(pairs), ("cls", "name"))
    seen = []
    for w in range(2):
        got = [collections.Counter(c for c, _ in sides[2 * w + s]) for s in (0, 1)]
        assert [[got[s].get(c, 0) for c in classes] for s in (0, 1)] == alloc[:, :2].T.tolist()
        names = [n for _, n in sides[2 * w]]
        assert len(set(names)) == len(names) == 2100
        seen.append(set(names))
    assert seen[0] != seen[1]
    folds = sg.kfold(df, 5, SEED, key="name", stratify="cls")
    sizes = round_robin([counts[c] for c in classes], 5)     # the block jobs' allocation
    tests = []
    for f, fold in enumerate(collect((test for _, test in folds), ("cls", "name"))):
        got = collections.Counter(c for c, _ in fold)
        assert [got.get(c, 0) for c in classes] == sizes[:, f].tolist()
        tests += [n for _, n in fold]
    assert sorted(tests) == all_names
    with pytest.raises(ParameterError, match="not in the DataFrame"):
        sg.holdout(df, 0.7, SEED, key="name", stratify="nope")
    # bootstrap: every bag holds each class's share of the size, drawn from its rows
    from samplegen.udfs.strata import proportional
    shares = proportional(1000, [counts[c] for c in classes]).tolist()
    for bag in collect(sg.bootstrap(df, 2, SEED, key="name", size=1000, stratify="cls"), "cls"):
        got = collections.Counter(bag)
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
        got = collect(flat(pairs))
        assert got == [sorted(ref.indices(n).tolist()) for n in ref.names], name
    ref = api.kfold(N, 5, SEED, stratify=cls)
    folds = sg.kfold(df.repartition(4), 5, SEED, key="id", stratify="cls")
    assert collect(test for _, test in folds) == \
        [sorted(ref.indices(f"test-{f}").tolist()) for f in range(5)]
    ref = api.bootstrap(N, 2, SEED, size=1000, stratify=cls)
    bags = sg.bootstrap(df.repartition(3), 2, SEED, key="id", size=1000, stratify="cls")
    assert collect(bags) == [sorted(ref.indices(n).tolist()) for n in ref.names]


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
        assert collect([train, test]) == [sorted(ref.indices(n).tolist())
                                          for n in ("train-0", "test-0")], name
    ref = api.kfold(N, 4, SEED, by_groups=patient)
    folds = sg.kfold(df.repartition(3), 4, SEED, key="id", groups="patient")
    got = collect(test for _, test in folds)
    assert got == [sorted(ref.indices(f"test-{f}").tolist()) for f in range(4)]
    for f in range(4):
        rest = np.setdiff1d(np.arange(N), got[f])
        assert not set(patient[got[f]]) & set(patient[rest])      # whole groups
    with pytest.raises(ParameterError, match="key the rows by the group column"):
        sg.kfold(df, 4, SEED, key="name", groups="patient")
    with pytest.raises(ParameterError, match="either stratified or grouped"):
        sg.kfold(df, 4, SEED, key="id", groups="patient", stratify="patient")
