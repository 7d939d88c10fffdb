"""Tables in, tables out: the sampling commands on a user's CSV, Parquet or
.npy table write one table per sample, every column kept with its type,
and the rows are the ones the Python API and the matrix path choose for
the same seed (the decisions are keyed by row id, whatever carries the
rows)."""
import json

import numpy as np
import pytest

import samplegen
from samplegen.jobs.store import MANIFEST, read_manifest

from .conftest import run_cli

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _customers(n=600, seed=3):
    """A newcomer's table: text (one with commas and quotes), integers,
    floats with missing values, booleans and a 0/1 label."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "customer": [f"c{i}" for i in range(n)],
        "city": rng.choice(["Paris", "Lyon", "Nice, FR", 'Le "Havre"'], n),
        "age": rng.integers(18, 90, n),
        "income": rng.normal(5e4, 1e4, n),
        "score": np.where(rng.random(n) < 0.1, np.nan, rng.random(n)),
        "vip": rng.random(n) < 0.2,
        "churn": (rng.random(n) < 0.3).astype(np.int64),
    })


def _sample(capsys, *argv):
    code, out, err = run_cli(capsys, *map(str, argv))
    assert code == 0, err
    return out, err


def _read(path, fmt):
    return pd.read_parquet(path) if fmt == "parquet" else pd.read_csv(path)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_a_csv_with_every_kind_of_column_becomes_train_and_test_tables(tmp_path, capsys, fmt):
    """One command, CSV in, train/test out: every column with its dtype,
    the missing floats still missing, and the rows of ``samplegen.holdout``
    with the same seed and labels, in its order."""
    df = _customers()
    src = tmp_path / "customers.csv"
    df.to_csv(src, index=False)
    dest = tmp_path / "out"
    _sample(capsys, "holdout", src, dest, "--ratio", 0.8, "--seed", 7, "--stratify", "churn",
            "--format", fmt)
    s = samplegen.holdout(df, 0.8, seed=7, stratify=df["churn"])
    for name in ("train-0", "test-0"):
        got = _read(dest / f"{name}.{fmt}", fmt)
        want = df.iloc[s.indices(name)].reset_index(drop=True)
        assert list(got.columns) == list(df.columns)
        assert dict(got.dtypes) == dict(want.dtypes)       # str, int64, float64, bool
        pd.testing.assert_frame_equal(got, want)
    assert got["score"].isna().any()          # NaN survived as missing
    manifest = read_manifest(str(dest / MANIFEST))
    assert [c["name"] for c in manifest["input"]["columns"]] == list(df.columns)
    assert {s["name"]: s["rows"] for s in manifest["samples"]} == {"train-0": 480, "test-0": 120}


def test_kfold_folds_are_the_apis_and_each_training_set_is_the_other_folds(tmp_path, capsys):
    """Folds as the API's; a composed training set is the union of the
    other folds, linked (the same files, no copy), readable as one dataset."""
    df = _customers(301)
    src = tmp_path / "c.parquet"
    df.to_parquet(src, index=False)
    dest = tmp_path / "out"
    _sample(capsys, "kfold", src, dest, "--k", 3, "--seed", 11)
    s = samplegen.kfold(df, 3, seed=11)
    for i in range(3):
        fold = pd.read_parquet(dest / f"test-{i}.parquet")
        pd.testing.assert_frame_equal(fold, df.iloc[s.indices(f"test-{i}")].reset_index(drop=True))
        train = pd.read_parquet(dest / f"train-{i}")
        assert sorted(train["customer"]) == sorted(df["customer"].iloc[s.indices(f"train-{i}")])
        files = sorted((dest / f"train-{i}").iterdir())
        others = [j for j in range(3) if j != i]
        assert [f.stat().st_ino for f in files] == \
            [(dest / f"test-{j}.parquet").stat().st_ino for j in others]


def test_kfold_materialize_writes_the_apis_composed_order(tmp_path, capsys):
    df = _customers(250)
    src = tmp_path / "c.csv"
    df.to_csv(src, index=False)
    dest = tmp_path / "out"
    _sample(capsys, "kfold", src, dest, "--k", 4, "--seed", 2, "--materialize", "--format",
            "parquet")
    s = samplegen.kfold(df, 4, seed=2, block_size=1000)
    for name in s.names:
        pd.testing.assert_frame_equal(pd.read_parquet(dest / f"{name}.parquet"),
                                      df.iloc[s.indices(name)].reset_index(drop=True))


def test_bootstrap_and_weighted_rows_are_the_apis(tmp_path, capsys):
    df = _customers(400)
    src = tmp_path / "c.csv"
    df.to_csv(src, index=False)
    _sample(capsys, "bootstrap", src, tmp_path / "b", "--samples", 2, "--seed", 5, "--oob")
    s = samplegen.bootstrap(df, 2, seed=5, oob=True)
    for name in s.names:
        pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "b" / f"{name}.csv"),
                                      df.iloc[s.indices(name)].reset_index(drop=True))
    _sample(capsys, "weighted", src, tmp_path / "w", "--weights", "income", "--size", 50,
            "--seed", 5)
    w = samplegen.weighted_sample(df, "income", seed=5, size=50)
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "w" / "sample-0.csv"),
                                  df.iloc[w.indices("sample-0")].reset_index(drop=True))


def test_grouped_holdout_by_a_text_column_keeps_each_group_on_one_side(tmp_path, capsys):
    df = _customers(500)
    src = tmp_path / "c.parquet"
    df.to_parquet(src, index=False)
    _sample(capsys, "holdout", src, tmp_path / "g", "--ratio", 0.5, "--seed", 1, "--groups",
            "city")
    train = set(pd.read_parquet(tmp_path / "g" / "train-0.parquet")["city"])
    test = set(pd.read_parquet(tmp_path / "g" / "test-0.parquet")["city"])
    assert not train & test and train | test == set(df["city"])


def test_a_table_run_and_the_matrix_path_choose_the_same_rows(tmp_path, capsys):
    """A partitioned Parquet dataset sampled as a table equals the same
    dataset imported and sampled as a matrix: rows are numbered alike
    (files in path order) and the decisions are keyed by row id."""
    rng = np.random.default_rng(4)
    root = tmp_path / "ds"
    for part, n in (("a", 40), ("b", 75)):
        (root / f"day={part}").mkdir(parents=True)
        pq.write_table(pa.table({"x": rng.normal(size=n), "y": rng.integers(0, 3, n)}),
                       root / f"day={part}" / "part-0.parquet")
    _sample(capsys, "bootstrap", root, tmp_path / "t", "--samples", 2, "--seed", 9)
    _sample(capsys, "import", root, tmp_path / "m", "--block-size", 16, "--columns", "x,y")
    _sample(capsys, "bootstrap", tmp_path / "m", tmp_path / "r", "--samples", 2, "--seed", 9)
    for name in ("sample-0", "sample-1"):
        _sample(capsys, "export", tmp_path / "r", name, "--to", tmp_path / f"{name}.parquet")
        via_matrix = pd.read_parquet(tmp_path / f"{name}.parquet")
        table = pd.read_parquet(tmp_path / "t" / f"{name}.parquet")
        assert list(table.columns) == ["x", "y", "day"]
        assert table["y"].dtype == np.int64 and set(table["day"]) == {"a", "b"}
        np.testing.assert_array_equal(table[["x", "y"]].to_numpy(),
                                      via_matrix[["x", "y"]].to_numpy())


def test_a_npy_table_gives_npy_samples(tmp_path, capsys):
    X = np.random.default_rng(1).normal(size=(90, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", X)
    _sample(capsys, "holdout", tmp_path / "x.npy", tmp_path / "o", "--ratio", 0.7, "--seed", 3)
    s = samplegen.holdout(X, 0.7, seed=3)
    got = np.load(tmp_path / "o" / "train-0.npy")
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, X[s.indices("train-0")])
    _sample(capsys, "holdout", tmp_path / "x.npy", tmp_path / "p", "--ratio", 0.7, "--seed", 3,
            "--format", "parquet")
    got = pd.read_parquet(tmp_path / "p" / "train-0.parquet")
    assert list(got.columns) == ["c0", "c1", "c2"] and (got.dtypes == np.float32).all()
    np.testing.assert_array_equal(got.to_numpy(), X[s.indices("train-0")])


def test_info_describes_a_table_run_and_checks_its_files(tmp_path, capsys):
    df = _customers(100)
    df.to_csv(tmp_path / "c.csv", index=False)
    _sample(capsys, "kfold", tmp_path / "c.csv", tmp_path / "o", "--k", 2, "--seed", 1)
    out, _ = _sample(capsys, "info", tmp_path / "o")
    assert "csv table, 100 rows x 7 columns" in out
    assert "customer (string)" in out and "train-0" in out
    out, _ = _sample(capsys, "info", "--json", tmp_path / "o")
    desc = json.loads(out)
    assert desc["input"]["rows"] == 100 and desc["output_format"] == "csv"


def test_import_reads_only_the_chosen_columns_of_a_csv_with_text(tmp_path, capsys):
    """``import --columns`` / ``--exclude`` select before parsing, so text
    columns left out never stop it; without ``--block-size`` the block size
    is chosen from the column count (4 columns: 20,000 rows per block, the
    largest 1-2-5 size whose 4-column blocks hold at most 2**17 values)."""
    df = _customers(300).assign(city=lambda d: d["city"].str.replace(r'[",]', "", regex=True))
    df.to_csv(tmp_path / "c.csv", index=False)
    _sample(capsys, "import", tmp_path / "c.csv", tmp_path / "m", "--columns",
            "age,income,score,churn")
    _sample(capsys, "import", tmp_path / "c.csv", tmp_path / "m2", "--exclude",
            "customer,city,vip")
    for m in ("m", "m2"):
        meta = json.loads((tmp_path / m / "_matrix.json").read_text())
        assert meta["columns"] == ["age", "income", "score", "churn"]
        assert meta["block_size"] == 20000 and meta["rows"] == 300
        _sample(capsys, "export", tmp_path / m, "--to", tmp_path / f"{m}.npy", "--no-row-ids")
        np.testing.assert_array_equal(np.load(tmp_path / f"{m}.npy"),
                                      df[["age", "income", "score", "churn"]].to_numpy(float))
    code, _, err = run_cli(capsys, "import", str(tmp_path / "c.csv"), str(tmp_path / "m3"))
    assert code == 2 and "--columns or --exclude" in err, err


@pytest.mark.parametrize("kind", ["csv", "parquet-dataset", "npy"])
def test_a_table_larger_than_its_memory_gives_the_same_bytes_streamed(tmp_path, kind,
                                                                        monkeypatch):
    """A table past its memory budget is streamed to disk and gathered batch
    by batch: every sample file has the bytes of the in-memory run (many
    small batches here, so rows are gathered across them), and nothing of
    the spill is left in the output."""
    from samplegen.jobs import tables
    monkeypatch.setattr(tables, "CSV_BLOCK_BYTES", 2048)
    monkeypatch.setattr(tables, "SPILL_BATCH_ROWS", 37)
    monkeypatch.setattr(tables, "OUTPUT_CHUNK_ROWS", 150)
    df = _customers(700)
    if kind == "csv":
        src = tmp_path / "c.csv"
        df.to_csv(src, index=False)
    elif kind == "npy":
        src = tmp_path / "c.npy"
        np.save(src, df[["age", "income", "score"]].to_numpy())
    else:
        src = tmp_path / "ds"
        for town, (_, part) in enumerate(df.groupby("city")):
            (src / f"town={town}").mkdir(parents=True)
            part.drop(columns="city").to_parquet(src / f"town={town}" / "p.parquet", index=False)
    runs = {}
    for budget in (None, 0):
        dest = tmp_path / f"out-{budget}"
        tables.generate(str(src), str(dest), "bootstrap", {"samples": 2, "oob": True}, seed=3,
                        memory_bytes=budget)
        runs[budget] = {p.name: p.read_bytes() for p in sorted(dest.iterdir())
                        if p.name != MANIFEST}
    assert runs[0] == runs[None] and len(runs[0]) == 5     # 4 samples and _SUCCESS
    manifest = read_manifest(str(tmp_path / "out-0" / MANIFEST))
    assert sum(s["rows"] for s in manifest["samples"] if s["name"].startswith("sample")) == 1400


def test_read_run_gives_a_table_runs_samples_as_data_frames(tmp_path, capsys):
    df = _customers(200)
    df.to_parquet(tmp_path / "c.parquet", index=False)
    _sample(capsys, "kfold", tmp_path / "c.parquet", tmp_path / "o", "--k", 2, "--seed", 4)
    run = samplegen.read_run(str(tmp_path / "o"))
    s = samplegen.kfold(df, 2, seed=4)
    pd.testing.assert_frame_equal(run["test-1"], df.iloc[s.indices("test-1")]
                                  .reset_index(drop=True))
    assert sorted(run["train-1"]["customer"]) == sorted(df["customer"].iloc[s.indices("train-1")])
    with pytest.raises(samplegen.ParameterError, match="not their ids"):
        run.indices("test-0")
