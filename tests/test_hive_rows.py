"""Ordinary Hive tables sampled by a key column (hive/rowtables.py,
hive/rows.hql), on Apache Hive and on the Spark Thrift Server: membership
from the key alone (row ids: the block jobs'; strings: jobs.keys' MD5
positions, as samplegen.spark), every column back as it was (strings,
arrays, NULLs), one view per sample, exact bootstrap sizes, and bad input
refused before anything is written."""
import uuid

import numpy as np
import pytest

from samplegen.hive import client as hive_client
from samplegen.hive import transform
from samplegen.jobs import api, keys
from samplegen.udfs.builtin import HoldOut, KFold
from samplegen.udfs.custom import load_udf
from samplegen.udfs.rng import PositionRNG

from .conftest import run_cli
from .hive_fixtures import read_tables

pytestmark = pytest.mark.hive
SEED = 7
N = 400


@pytest.fixture(scope="module")
def row_table(hive_server):
    """A row table of N rows: id 0..N-1, a string, an array, a double and a
    string holding a tab and a backslash, NULL in every tenth row."""
    name = "rows_" + uuid.uuid4().hex[:8]
    with hive_client.Client(hive_server["url"]) as c:
        c.execute(f"CREATE TABLE {name} (id BIGINT, name STRING, tags ARRAY<INT>, "
                  "score DOUBLE, note STRING)", fetch=False)
        c.execute(f"INSERT INTO {name} SELECT pos, concat('row-', CAST(pos AS STRING)), "
                  "array(CAST(pos % 3 AS INT), CAST(pos % 5 AS INT)), pos * 0.5, "
                  "IF(pos % 10 = 0, NULL, concat('n', CAST(pos AS STRING), chr(9), '\\\\')) "
                  f"FROM (SELECT posexplode(split(space({N - 1}), ' ')) AS (pos, x)) t",
                  fetch=False)
    return {"name": name, "url": hive_server["url"]}


@pytest.fixture(scope="module")
def side_table(row_table):
    """The row table's ids and names with a class (id % 3), a group (one of
    every 7 consecutive ids) and a weight ((id % 5) / 2) per row: one table
    for the stratified, grouped and weighted runs."""
    name = "side_" + uuid.uuid4().hex[:8]
    with hive_client.Client(row_table["url"]) as c:
        c.execute(f"CREATE TABLE {name} AS SELECT id, name, CAST(id % 3 AS INT) AS label, "
                  "concat('g', CAST(floor(id / 7) AS STRING)) AS grp, "
                  f"CAST(id % 5 AS DOUBLE) * 0.5 AS w FROM {row_table['name']}", fetch=False)
    return {"name": name, "url": row_table["url"]}


def _rows(url, query):
    with hive_client.Client(url) as c:
        return c.execute(query)


def _by_sample(url, result):
    out = {}
    for row in _rows(url, f"SELECT sample, id, name, tags, score, note FROM {result}"):
        out.setdefault(row[0], []).append(tuple(row[1:]))
    return out


def _views(url, result, column, samples):
    """``{sample: sorted values of *column*}`` of the views ``<result>_<sample>``,
    all read by one query."""
    with hive_client.Client(url) as c:
        views = read_tables(c.execute, f"`{column}`",
                            [f"{result}_{sample.replace('-', '_')}" for sample in samples])
    return {sample: [row[0] for row in rows] for sample, rows in zip(samples, views)}


def _ids_by_sample(url, result):
    out = {}
    for sample, row_id in _rows(url, f"SELECT sample, id FROM {result}"):
        out.setdefault(sample, []).append(row_id)
    return {sample: sorted(ids) for sample, ids in out.items()}


def test_holdout_by_row_id_is_the_block_jobs_and_keeps_every_column(row_table, capsys):
    url, table = row_table["url"], row_table["name"]
    result = "ho_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "holdout", table, result, "--key", "id", "--ratio",
                           0.7, "--repeats", 2, "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    source = {row[0]: tuple(row) for row in _rows(
        url, f"SELECT id, name, tags, score, note FROM {table}")}
    ref = api.holdout(N, 0.7, SEED, repeats=2)
    got = _by_sample(url, result)
    assert sorted(got) == sorted(ref.names)
    for name in ref.names:
        assert sorted(r[0] for r in got[name]) == sorted(ref.indices(name).tolist()), name
        bad = [(source[r[0]], r) for r in got[name] if source[r[0]] != r]
        assert not bad, bad[:3]   # every column as it was
    assert any(r[4] is None for r in got["train-0"])        # NULLs stay NULL
    view = _rows(url, f"SELECT id FROM {result}_test_1")
    assert sorted(r[0] for r in view) == sorted(ref.indices("test-1").tolist())


def test_time_series_and_repeated_folds_by_row_id(row_table, capsys):
    """kfold --time-series (row ids as time) and --repeats (each training
    view the other folds of its own repeat) on a row table keyed by row id;
    time-series folds by any other key are refused."""
    url, table = row_table["url"], row_table["name"]
    result = "ts_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "kfold", table, result, "--key", "id", "--k", 3,
                           "--time-series", "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    ref = api.sample(N, "timeseries", SEED, k=3)
    got = _by_sample(url, result)
    for name in ref.names:
        assert sorted(r[0] for r in got[name]) == ref.indices(name).tolist(), name
    result = "rk_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "kfold", table, result, "--key", "id", "--k", 3,
                           "--repeats", 2, "--balanced", "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    ref = api.kfold(N, 3, SEED, repeats=2)
    train = _views(url, result, "id", [f"train-{j}" for j in range(6)])
    for j in range(6):
        assert train[f"train-{j}"] == sorted(ref.indices(f"train-{j}").tolist())
    code, out, err = run_cli(capsys, "hive", "kfold", table, "no_" + uuid.uuid4().hex[:6],
                             "--key", "name", "--k", 3, "--time-series", "--seed", SEED,
                             "--hive-url", url)
    assert code == 2 and "time-series folds need key column 'name'" in err, err


def test_exact_sizes_by_row_id_and_by_any_other_key(row_table, capsys):
    """--exact / --balanced: the block jobs' exact-size samples when the key
    holds the row ids; by a string key, cutoffs on the coins' words
    (udfs.ranks, two aggregations first): the same rows as in memory."""
    url, table = row_table["url"], row_table["name"]
    result = "ex_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "kfold", table, result, "--key", "id", "--k", 3,
                           "--balanced", "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    ref = api.kfold(N, 3, SEED, balanced=True)
    got = _by_sample(url, result)
    for i in range(3):
        assert sorted(r[0] for r in got[f"test-{i}"]) == sorted(ref.indices(f"test-{i}").tolist())
    assert sorted(len(got[f"test-{i}"]) for i in range(3)) == [133, 133, 134]
    from samplegen.udfs.ranks import find_cutoffs
    names = [f"row-{i}" for i in range(N)]
    positions = np.array([keys.hashed_position(n) for n in names], np.int64)
    udf = HoldOut(N, 0.7, repeats=2)
    rng = PositionRNG(SEED)
    occ = HoldOut(N, 0.7, repeats=2, cutoffs=find_cutoffs(rng, positions, *udf.rank_targets())) \
        .occurrences_at(positions, rng)
    result = "ex_" + uuid.uuid4().hex[:6]
    code, out, err = run_cli(capsys, "hive", "holdout", table, result, "--key", "name",
                             "--ratio", 0.7, "--repeats", 2, "--exact", "--seed", SEED,
                             "--hive-url", url)
    assert code == 0, err
    got = _by_sample(url, result)
    for s in range(4):
        want = sorted(names[i] for i in occ.offset[occ.sample == s])
        assert sorted(r[1] for r in got[udf.sample_names()[s]]) == want
    assert [len(got[n]) for n in udf.sample_names()] == [280, 120, 280, 120]


def test_stratified_and_grouped_by_row_id_are_the_block_jobs(side_table, capsys):
    """--stratify LABEL and --groups GROUP on a row table keyed by the row
    ids: one query reads the column, and the samples are the block jobs'
    (each class within one row of its share; every group on one side or
    in one fold); any other key is refused in one line, before any write."""
    url, labelled = side_table["url"], side_table["name"]
    label = np.arange(N) % 3
    grp = np.array([f"g{i // 7}" for i in range(N)])
    result = "st_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "holdout", labelled, result, "--key", "id",
                           "--ratio", 0.7, "--stratify", "label", "--seed", SEED,
                           "--hive-url", url)
    assert code == 0, err
    ref = api.holdout(N, 0.7, SEED, stratify=label)
    got = _ids_by_sample(url, result)
    assert got == {n: sorted(ref.indices(n).tolist()) for n in ref.names}
    for c in range(3):   # (280 of 400 rows: each class within one row of 0.7 of its rows)
        assert abs(np.sum(label[got["train-0"]] == c) - 0.7 * np.sum(label == c)) <= 1
    result = "gr_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "kfold", labelled, result, "--key", "id", "--k", 3,
                           "--groups", "grp", "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    ref = api.kfold(N, 3, SEED, by_groups=grp)
    got = _ids_by_sample(url, result)
    for f in range(3):
        ids = got[f"test-{f}"]
        assert ids == sorted(ref.indices(f"test-{f}").tolist())
        assert not set(grp[ids]) & set(grp[np.setdiff1d(np.arange(N), ids)])  # whole groups
    before = _rows(url, "SHOW TABLES")
    for argv, message in (
            (["--key", "name", "--stratify", "label"], "need key column 'name'"),
            (["--key", "id", "--groups", "nope"], "groups column 'nope' is not a column"),
            (["--key", "id", "--stratify", "label", "--print"], "without --print")):
        code, _, err = run_cli(capsys, "hive", "holdout", labelled, "x_" + uuid.uuid4().hex[:6],
                               "--ratio", 0.5, "--seed", SEED, "--hive-url", url, *argv)
        assert code == 2 and message in err and err.count("\n") == 1, err
    assert _rows(url, "SHOW TABLES") == before


def test_weighted_by_row_id_are_the_block_jobs(side_table, capsys):
    """--weights W on a row table keyed by the row ids: one query reads the
    weights, the driver finds the cut, and every mode's samples are the
    block jobs' (the Python API's, the same rows); a row-table run without
    row-id keys is refused in one line."""
    url, weighted = side_table["url"], side_table["name"]
    w = (np.arange(N) % 5) * 0.5
    for argv, params in ((["--size", 40, "--samples", 2], {"size": 40, "samples": 2}),
                         (["--size", 300, "--replace"], {"size": 300, "replace": True}),
                         (["--expected", 60], {"expected": 60})):
        result = "ws_" + uuid.uuid4().hex[:6]
        code, _, err = run_cli(capsys, "hive", "weighted", weighted, result, "--key", "id",
                               "--weights", "w", "--seed", SEED, "--hive-url", url, *argv)
        assert code == 0, err
        ref = api.weighted_sample(N, w, SEED, **params)
        got = _ids_by_sample(url, result)
        assert got == {n: sorted(ref.indices(n).tolist()) for n in ref.names}, params
    code, _, err = run_cli(capsys, "hive", "weighted", weighted, "x_" + uuid.uuid4().hex[:6],
                           "--key", "name", "--weights", "w", "--size", 5, "--seed", SEED,
                           "--hive-url", url)
    assert code == 2 and "need key column 'name'" in err and err.count("\n") == 1, err


def test_kfold_by_a_string_key_and_the_training_views(row_table, capsys):
    url, table = row_table["url"], row_table["name"]
    result = "kf_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "kfold", table, result, "--key", "name", "--k", 3,
                           "--per-row", "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    names = [f"row-{i}" for i in range(N)]
    positions = np.array([keys.hashed_position(n) for n in names], np.int64)
    occ = KFold(1 << 62, 3, balanced=False).occurrences_at(positions, PositionRNG(SEED))
    got = _by_sample(url, result)
    train = _views(url, result, "name", [f"train-{f}" for f in range(3)])
    for f in range(3):
        want = sorted(names[i] for i in occ.offset[occ.sample == f])
        assert sorted(r[1] for r in got[f"test-{f}"]) == want
        assert train[f"train-{f}"] == sorted(set(names) - set(want))


def test_bootstrap_by_row_id_has_exact_sizes(row_table, capsys):
    url, table = row_table["url"], row_table["name"]
    result = "bs_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "bootstrap", table, result, "--key", "id",
                           "--samples", 2, "--size", 300, "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    ref = api.bootstrap(N, 2, SEED, size=300)
    got = _by_sample(url, result)
    for name in ref.names:
        assert sorted(r[0] for r in got[name]) == sorted(ref.indices(name).tolist())


def test_bootstrap_by_a_string_key_is_exact_and_keyed(row_table, capsys):
    """Keys that are not the row ids: the first arrivals of keyed Poisson
    processes, their cut found by two TRANSFORM aggregations; the samples
    the in-memory computation finds for the MD5 positions."""
    from samplegen.udfs.arrivals import KeyedBootstrap, find_cutoffs

    url, table = row_table["url"], row_table["name"]
    result = "bk_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "bootstrap", table, result, "--key", "name",
                           "--samples", 2, "--size", 350, "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    names = [f"row-{i}" for i in range(N)]
    positions = np.array([keys.hashed_position(n) for n in names], np.int64)
    cutoffs = find_cutoffs(PositionRNG(SEED), positions, N, 2, 350)
    occ = KeyedBootstrap(N, 2, 350, cutoffs).occurrences_at(positions, PositionRNG(SEED))
    got = _by_sample(url, result)
    for i in range(2):
        want = sorted(names[j] for j in occ.offset[occ.sample == i])
        assert len(want) == 350 and sorted(r[1] for r in got[f"sample-{i}"]) == want


def test_print_and_bad_input(row_table, capsys):
    url, table = row_table["url"], row_table["name"]
    result = "pr_" + uuid.uuid4().hex[:6]
    code, text, err = run_cli(capsys, "hive", "holdout", table, result, "--key", "id",
                              "--ratio", 0.5, "--seed", SEED, "--hive-url", url, "--print")
    assert code == 0, err
    assert f"CREATE TABLE {result}" in text and f"CREATE VIEW {result}_train_0" in text
    assert "${hivevar:" not in text
    with hive_client.Client(url) as c:
        assert not c.table_exists(result)
    cases = [
        (["holdout", table, result, "--key", "nope", "--ratio", 0.5], "not a column"),
        (["holdout", table, result, "--key", "id", "--output", "/tmp/x", "--ratio", 0.5],
         "not both"),
        (["bootstrap", table, result, "--key", "name", "--samples", 2, "--print"],
         "two aggregations"),
        (["holdout", table, result, "--key", "id", "--ratio", 1.5], "ratio"),
        (["holdout", table, "bad;name", "--key", "id", "--ratio", 0.5], "result table name"),
    ]
    for argv, words in cases:
        code, _, err = run_cli(capsys, "hive", *argv, "--seed", SEED, "--hive-url", url)
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
    with hive_client.Client(url) as c:
        assert not c.table_exists(result)


def test_rows_script_passes_lines_through_once_per_occurrence():
    """The TRANSFORM script alone: each line's text after the key, once per
    occurrence, with the sample's name; bad keys stop it."""
    import io

    udf = load_udf("bootstrap", 50, {"samples": 2, "size": 80})
    lines = b"".join(b"%d\tr%d\t[1,2]\t\\N\n" % (i, i) for i in range(50))
    out = io.BytesIO()
    transform.run_rows(udf, PositionRNG(3), io.BytesIO(lines), out, buffer=97)
    got = sorted(out.getvalue().splitlines())
    occ = udf.occurrences_at(np.arange(50), PositionRNG(3))
    want = sorted(b"r%d\t[1,2]\t\\N\tsample-%d" % (o, s) for o, s in zip(occ.offset, occ.sample))
    assert got == want and len(got) == 160
    for bad in (b"\\N\tx\n", b"-3\tx\n", b"12a\tx\n", b"7\n"):
        stdout = io.BytesIO()
        code = transform.main(["rows", "--udf", "holdout", "--params", "ratio=0.5",
                               "--seed", "1", "--n-rows", "100"], io.BytesIO(bad), stdout)
        assert code == 2 and stdout.getvalue() == b""
