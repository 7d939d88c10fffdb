"""Weighted samples of a matrix's rows (``samplegen weighted``, the built-in
UDF ``weighted``): exactly K rows as successive weighted draws, a weighted
bootstrap of exactly K draws, Poisson sampling of K rows expected; the same
bytes on every runner and blocking; bad weights refused.

Statistical tests: fixed seeds, level ALPHA (tests/stats.py) divided by the
comparisons a test makes; expected values from the weights alone."""
import json
import os

import numpy as np
import pytest

from samplegen.jobs import driver
from samplegen.jobs.store import Matrix
from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import InputError, ParameterError
from samplegen.udfs.rng import PositionRNG
from samplegen.udfs.weighted import RowWeights, chunk_bounds, chunk_totals, inclusion_rate

from .conftest import NO_CONF, run_cli, sample_digests
from .stats import ALPHA, binomial_p, chisq_gof, successive_law


def udf_for(weights, seed, **params):
    """The weighted UDF over *weights* as the driver prepares it for *seed*."""
    side = RowWeights.of(np.asarray(weights, float), "w")
    params = dict(params, weights="w")
    udf = load_udf("weighted", side.n_rows, params, weighting=side)
    prepared = udf.prepare(PositionRNG(seed))
    return load_udf("weighted", side.n_rows, dict(params, **prepared), weighting=side)


def drawn(udf, seed, start=0, stop=None, splits=()):
    """Each sample's rows in sample order (by relative position, then row):
    the UDF over ``[start, stop)``, evaluated in pieces cut at *splits*."""
    stop = udf.n_rows if stop is None else stop
    rng = PositionRNG(seed)
    cuts = [start, *splits, stop]
    occ = [udf(a, b, rng) for a, b in zip(cuts[:-1], cuts[1:])]
    rows = np.concatenate([o.offset + a for o, a in zip(occ, cuts[:-1])])
    sample = np.concatenate([o.sample for o in occ])
    relpos = np.concatenate([o.relpos for o in occ])
    order = np.lexsort((rows, relpos, sample))
    return [rows[order][sample[order] == i] for i in range(udf.samples)]


# ---------------------------------------------------------------------------
# the laws
# ---------------------------------------------------------------------------
@pytest.mark.slow
def test_exactly_k_without_replacement_are_successive_weighted_draws_in_draw_order():
    """Every ordered triple against its probability under successive draws
    (enumerated), and each row's inclusion by a binomial test: Bonferroni
    over all; 8,000 samples from 4 seeds."""
    w = [4.0, 1.0, 0.0, 2.5, 0.5, 3.0]
    law = successive_law(w, 3)
    counts = dict.fromkeys(law, 0)
    included = np.zeros(len(w), np.int64)
    for seed in range(4):
        udf = udf_for(w, seed, size=3, samples=2000)
        for rows in drawn(udf, seed):
            assert rows.size == 3                       # exactly K, never the zero weight
            counts[tuple(rows.tolist())] += 1
            included[rows] += 1
    calls = 8000
    comparisons = 1 + len(w)
    assert chisq_gof([counts[o] for o in law], [calls * law[o] for o in law]) > \
        ALPHA / comparisons
    for i in range(len(w)):
        pi = sum(p for order, p in law.items() if i in order)
        assert (included[i] == 0) if pi == 0 else \
            binomial_p(int(included[i]), calls, pi) > ALPHA / comparisons


def test_a_weighted_bootstrap_draws_exactly_k_in_proportion_to_the_weights():
    """3,000 rows (a tree of several levels above its chunks): every sample
    exactly K draws; the draws of 30 samples per row against K w / sum w,
    pooled into 30 bins of 100 rows (chi-square), and the zero weights
    never drawn."""
    rng = np.random.default_rng(4)
    w = rng.gamma(0.7, size=3000)
    w[::11] = 0.0
    udf = udf_for(w, 9, size=2500, replace=True, samples=30)
    counts = np.zeros(w.size)
    for rows in drawn(udf, 9):
        assert rows.size == 2500
        counts += np.bincount(rows, minlength=w.size)
    assert counts[w == 0].sum() == 0
    expected = counts.sum() * w / w.sum()
    assert chisq_gof(counts.reshape(30, 100).sum(1), expected.reshape(30, 100).sum(1)) > ALPHA


def test_poisson_sampling_includes_each_row_with_min_1_c_w():
    w = np.array([50.0, 10.0, 1.0, 1.0, 2.0, 0.0, 0.5, 3.0, 1.5, 1.0])
    c = inclusion_rate(w, 4)
    p = np.minimum(1.0, c * w)
    assert abs(p.sum() - 4) < 1e-12 and p[0] == 1.0 and p[5] == 0.0
    udf = udf_for(w, 3, expected=4, samples=4000)
    hits = np.zeros(w.size)
    for rows in drawn(udf, 3):
        hits[rows] += 1
    assert hits[0] == 4000 and hits[5] == 0
    for i in np.flatnonzero((p > 0) & (p < 1)):
        assert binomial_p(int(hits[i]), 4000, p[i]) > ALPHA / 8


@pytest.mark.parametrize("mode", [dict(size=40), dict(size=300, replace=True),
                                  dict(expected=50)], ids=["size", "replace", "expected"])
def test_any_split_of_the_rows_draws_the_same_samples(mode):
    """The UDF over all rows at once, or in pieces cut anywhere: the same
    rows in the same order (what makes every blocking and task layout give
    the same bytes)."""
    w = np.random.default_rng(8).exponential(size=5000)
    udf = udf_for(w, 5, samples=3, **mode)
    whole = drawn(udf, 5)
    for cuts in ([1], [1023, 1024, 1025], list(range(0, 5000, 333))[1:], [4999]):
        again = udf_for(w, 5, samples=3, **mode)     # a task's fresh UDF
        assert all(np.array_equal(a, b) for a, b in zip(whole, drawn(again, 5, splits=cuts)))


def test_chunk_totals_are_the_sequential_sums_of_the_tree_chunks():
    for n in (1, 5, 1024, 1025, 3000, 70_001):
        w = np.random.default_rng(n).random(n)
        lo, size = chunk_bounds(n)
        assert size.sum() == n and (size <= 1024).all() and lo[0] == 0
        totals = chunk_totals(w)
        for i in range(0, lo.size, max(1, lo.size // 7)):
            assert totals[i] == (np.cumsum(w[lo[i]:lo[i] + size[i]])[-1] if size[i] else 0.0)


# ---------------------------------------------------------------------------
# the jobs
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def weighted_matrices(tmp_path_factory):
    """The same 2,000 x 6 rows (column "w" of weights, some zero) imported at
    block sizes 64 and 500."""
    base = tmp_path_factory.mktemp("weighted")
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 6))
    X[:, 2] = rng.gamma(0.5, size=2000)
    X[::13, 2] = 0.0
    names = ["a", "b", "w", "c", "d", "e"]
    np.savetxt(base / "x.csv", X, delimiter=",", header=",".join(names), comments="")
    out = {"X": X}
    for bs in (64, 500):
        driver.import_file(str(base / "x.csv"), str(base / f"m{bs}"), bs)
        out[bs] = str(base / f"m{bs}")
    return out


MODES = [("size", {"size": 150, "samples": 2}), ("replace", {"size": 900, "replace": True}),
         ("expected", {"expected": 200, "samples": 2})]


@pytest.mark.slow
@pytest.mark.parametrize("name,params", MODES, ids=[m[0] for m in MODES])
def test_every_runner_and_blocking_writes_the_same_bytes(tmp_path, weighted_matrices, name,
                                                         params):
    params = dict(params, weights="w")
    runs = {}
    for runner, bs in [("inline", 64), ("embedded", 64), ("embedded", 500), ("local", 500)]:
        if runner == "local" and name != "replace":
            continue        # one mrjob local run (subprocesses and sort: slow)
        dest = str(tmp_path / f"{runner}{bs}")
        driver.generate(weighted_matrices[bs], dest, "weighted", params, 7, runner=runner,
                        options=NO_CONF)
        runs[(runner, bs)] = dest
    ids = {key: {s: Matrix.open(os.path.join(d, s)).to_numpy()[0]
                 for s in ("sample-0",)} for key, d in runs.items()}
    first = next(iter(ids.values()))
    assert all(np.array_equal(v["sample-0"], first["sample-0"]) for v in ids.values())
    digests = {key: sample_digests(d) for key, d in runs.items() if key[1] == 64}
    assert len(set(map(json.dumps, digests.values()))) == 1
    X = weighted_matrices["X"]
    for sample in sorted(n for n in os.listdir(runs[("inline", 64)]) if n.startswith("s")):
        rows, values = Matrix.open(os.path.join(runs[("inline", 64)], sample)).to_numpy()
        assert np.array_equal(values, X[rows])       # the rows' own values
        assert (X[rows, 2] > 0).all()                 # never a zero weight
        if "size" in params:
            assert rows.size == params["size"]
        if name == "size":
            assert np.unique(rows).size == rows.size
    manifest = json.load(open(os.path.join(runs[("inline", 64)], "_manifest.json")))
    assert manifest["method"] == "weighted" and manifest["params"]["weights"] == "w"
    assert not [n for n in os.listdir(runs[("inline", 64)]) if n.startswith("_weights")]


def test_the_command_line_runs_it_and_refuses_bad_weights_in_one_line(tmp_path, capsys,
                                                                      weighted_matrices):
    src = weighted_matrices[64]
    code, _, err = run_cli(capsys, "-q", "weighted", src, tmp_path / "ok", "--weights", "w",
                           "--size", 10, "--seed", 1)
    assert code == 0, err
    assert Matrix.open(str(tmp_path / "ok" / "sample-0")).rows == 10
    cases = [(["--weights", "a", "--size", 10], "weight column 'a' is negative"),
             (["--weights", "w", "--size", 1900], "only 1846 rows have a positive weight"),
             (["--weights", "w", "--expected", 1900], "only 1846 weights are positive"),
             (["--weights", "nope", "--size", 3], "no column 'nope'"),
             (["--weights", "w"], "exactly one of --size"),
             (["--weights", "w", "--expected", 5, "--replace"], "--replace needs --size")]
    for i, (args, message) in enumerate(cases):
        code, out, err = run_cli(capsys, "-q", "weighted", src, tmp_path / f"bad{i}", *args,
                                 "--seed", 1)
        assert code == 2 and message in err and err.count("\n") == 1, (args, err)
        assert not os.path.exists(tmp_path / f"bad{i}")
    code, _, err = run_cli(capsys, "-q", "weighted", src, tmp_path / "x", "--weights", "w",
                           "--size", 5, "--expected", 5, "--seed", 1)
    assert code == 2 and "not allowed with" in err


def test_weights_from_a_file_beside_the_matrix_are_the_columns_samples(tmp_path,
                                                                      weighted_matrices):
    """--weights FILE.npy (one weight per row, row-id order): the same
    samples as the column holding the same weights; a file of the wrong
    length or missing is refused before anything is written."""
    X = weighted_matrices["X"]
    np.save(tmp_path / "w.npy", X[:, 2])
    src = weighted_matrices[64]
    for i, params in enumerate(m for _, m in MODES):
        by_column = str(tmp_path / f"col{i}")
        by_file = str(tmp_path / f"file{i}")
        driver.generate(src, by_column, "weighted", dict(params, weights="w"), 3,
                        options=NO_CONF)
        driver.generate(src, by_file, "weighted",
                        dict(params, weights=str(tmp_path / "w.npy")), 3, options=NO_CONF)
        assert sample_digests(by_file) == sample_digests(by_column)
    np.save(tmp_path / "short.npy", X[1:, 2])
    for name, message in (("short.npy", "holds 1999 values; the matrix has 2000 rows"),
                          ("none.npy", "weights file not found")):
        with pytest.raises(InputError, match=message):
            driver.generate(src, str(tmp_path / "bad"), "weighted",
                            {"weights": str(tmp_path / name), "size": 5}, 3, options=NO_CONF)
        assert not os.path.exists(tmp_path / "bad")


def test_weights_with_a_nan_are_refused_naming_the_row():
    with pytest.raises(InputError, match=r"weight column 'w' is NaN \(nan\) at row 3"):
        RowWeights.of([1.0, 2.0, 0.0, np.nan, -1.0], "w")
    with pytest.raises(InputError, match="is infinite"):
        RowWeights.of([1.0, np.inf], "w")
    with pytest.raises(ParameterError, match="no row has a positive weight"):
        load_udf("weighted", 3, {"weights": "w", "size": 1},
                 weighting=RowWeights.of([0.0, 0.0, 0.0], "w"))


@pytest.mark.spark
def test_the_spark_runner_writes_the_inline_bytes(spark, tmp_path, weighted_matrices):
    """The weights travel to the executors as the run's weight files."""
    from samplegen.jobs.engines.spark import job
    src = weighted_matrices[64]
    for name, params in MODES:
        params = dict(params, weights="w")
        inline = str(tmp_path / f"inline-{name}")
        driver.generate(src, inline, "weighted", params, 7, runner="inline", options=NO_CONF)
        dest = str(tmp_path / f"spark-{name}")
        driver.generate(src, dest, "weighted", params, 7, runner="spark",
                        options={"spark_conf": [f"{job.INPUT_PARTITIONS}=5"]})
        assert sample_digests(dest) == sample_digests(inline), name


def test_the_python_api_gives_the_jobs_rows(tmp_path, weighted_matrices):
    """samplegen.weighted_sample on the array in memory: the rows (in order)
    that the job writes with the same seed and weights; a pandas column by
    name; bad weights refused."""
    import pandas as pd

    import samplegen
    X = weighted_matrices["X"]
    for name, params in MODES:
        dest = str(tmp_path / name)
        driver.generate(weighted_matrices[500], dest, "weighted", dict(params, weights="w"), 7,
                        runner="embedded", options=NO_CONF)
        s = samplegen.weighted_sample(X, X[:, 2], seed=7, **params)
        for sample in s.names:
            rows = Matrix.open(os.path.join(dest, sample)).to_numpy()[0]
            assert np.array_equal(s.indices(sample), rows), (name, sample)
            assert np.array_equal(s[sample], X[rows])
    df = pd.DataFrame(X, columns=["a", "b", "w", "c", "d", "e"])
    by_name = samplegen.weighted_sample(df, "w", seed=3, size=20)
    by_array = samplegen.weighted_sample(X, X[:, 2], seed=3, size=20)
    assert np.array_equal(by_name.indices("sample-0"), by_array.indices("sample-0"))
    with pytest.raises(InputError, match="is negative"):
        samplegen.weighted_sample(X, X[:, 0], seed=1, size=5)
    with pytest.raises(ParameterError, match="weights has 1999 rows but X has 2000"):
        samplegen.weighted_sample(X, X[1:, 2], seed=1, size=5)


@pytest.mark.spark
def test_a_dataframe_keyed_by_row_id_gets_the_jobs_rows_in_draw_order(spark, tmp_path,
                                                                      weighted_matrices):
    """samplegen.spark.weighted on the rows as a DataFrame keyed by their row
    ids, in 7 partitions and shuffled: the block job's rows, in its order
    (exactly K without replacement), and its rows with replacement and
    Poisson; a negative weight fails in one line naming the row."""
    from pyspark.sql import SparkSession

    from samplegen import spark as sg
    session = SparkSession.builder.getOrCreate()
    X = weighted_matrices["X"]
    rows = [(int(i), float(X[i, 0]), float(X[i, 2])) for i in range(X.shape[0])]
    df = session.createDataFrame(rows, ["id", "a", "w"]).repartition(7)
    dest = str(tmp_path / "job")
    driver.generate(weighted_matrices[64], dest, "weighted",
                    {"weights": "w", "size": 150, "samples": 2}, 7, runner="inline",
                    options=NO_CONF)
    parts = sg.weighted(df, "w", 7, "id", size=150, samples=2)
    for i, part in enumerate(parts):
        got = [r["id"] for r in part.collect()]
        expected = Matrix.open(os.path.join(dest, f"sample-{i}")).to_numpy()[0]
        assert got == expected.tolist()
    for name, params in MODES[1:]:       # with replacement, Poisson: the same rows (any order)
        dest = str(tmp_path / f"job-{name}")
        driver.generate(weighted_matrices[64], dest, "weighted", dict(params, weights="w"), 7,
                        runner="inline", options=NO_CONF)
        parts = sg.weighted(df, "w", 7, "id", **params)
        for i, part in enumerate(parts):
            got = sorted(r["id"] for r in part.collect())
            expected = Matrix.open(os.path.join(dest, f"sample-{i}")).to_numpy()[0]
            assert got == sorted(expected.tolist()), (name, i)
    with pytest.raises(Exception, match="weight column 'a' is -[0-9.]+ at key position"):
        sg.weighted(df, "a", 7, "id", size=5)[0].collect()   # the job that reads it fails
    with pytest.raises(InputError, match="weight column 'a' is -[0-9.]+ at key position"):
        sg.weighted(df, "a", 7, "id", expected=5)
    with pytest.raises(ParameterError, match="hold the row ids"):
        sg.weighted(df.withColumn("id", df["id"] + 1), "w", 7, "id", size=5, replace=True)
    with pytest.raises(ParameterError, match="exactly one of --size"):
        sg.weighted(df, "w", 7, "id")
    with pytest.raises(ParameterError, match="only 1846 rows have a positive weight"):
        sg.weighted(df, "w", 7, "id", size=1900)
