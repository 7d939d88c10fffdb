"""import / export of .npy, .csv and Parquet rows."""
import os

import numpy as np
import pandas as pd
import pytest

from jobs import driver
from jobs.formats import export
from jobs.store import Matrix
from udfs.errors import InputError, OutputError, ParameterError

DATA = np.array([[1.0, np.nan, -np.inf], [np.inf, -0.0, 2.5], [3.0, 4.0, 5e-300]] * 7)


def imported(tmp_path, src, **kw):
    dest = str(tmp_path / "imp")
    driver.import_file(str(src), dest, kw.pop("block_size", 4), **kw)
    return Matrix.open(dest)


def same_values(a, b):
    """Equal as numbers (NaN equals NaN; CSV text may drop the sign of -0.0)."""
    return np.asarray(a).shape == np.asarray(b).shape and np.array_equal(a, b, equal_nan=True)


def same_bits(a, b):
    return a.shape == b.shape and np.array_equal(np.asarray(a, float).view(np.uint64),
                                                 np.asarray(b, float).view(np.uint64))


def test_npy_round_trip_with_row_ids(tmp_path):
    np.save(tmp_path / "x.npy", DATA)
    matrix = imported(tmp_path, tmp_path / "x.npy")
    out = str(tmp_path / "back.npy")
    export(matrix, out)
    assert same_bits(np.load(out), DATA)
    # sparse blocks keep NaN and infinities; zeros are implicit (so -0.0 -> 0.0)
    sparse = imported(tmp_path, tmp_path / "x.npy", kind="sparse", overwrite=True)
    assert sparse.kind == "sparse"
    assert np.array_equal(sparse.to_numpy()[1], DATA, equal_nan=True)
    assert np.array_equal(np.load(str(tmp_path / "back.row_ids.npy")), np.arange(len(DATA)))


def test_csv_with_header_round_trip(tmp_path):
    frame = pd.DataFrame(DATA, columns=["a", "b", "c"])
    frame.to_csv(tmp_path / "x.csv", index=False)
    matrix = imported(tmp_path, tmp_path / "x.csv")
    assert matrix.meta["columns"] == ["a", "b", "c"]
    export(matrix, str(tmp_path / "back.csv"))
    back = pd.read_csv(tmp_path / "back.csv")
    assert list(back.columns) == ["row_id", "a", "b", "c"]
    assert same_values(back[["a", "b", "c"]].to_numpy(), DATA)


def test_csv_without_header_and_column_selection(tmp_path):
    np.savetxt(tmp_path / "x.csv", DATA, delimiter=",", fmt="%.17g")
    assert same_values(imported(tmp_path, tmp_path / "x.csv").to_numpy()[1], DATA)
    pd.DataFrame(DATA, columns=["a", "b", "c"]).to_csv(tmp_path / "h.csv", index=False)
    sel = imported(tmp_path, tmp_path / "h.csv", columns=["c", "a"], overwrite=True)
    assert same_values(sel.to_numpy()[1], DATA[:, [2, 0]])


def test_parquet_round_trip(tmp_path):
    import fastparquet
    frame = pd.DataFrame(DATA, columns=["a", "b", "c"])
    frame["i"] = np.arange(len(DATA), dtype=np.int32)
    fastparquet.write(str(tmp_path / "x.parquet"), frame, row_group_offsets=5)
    matrix = imported(tmp_path, tmp_path / "x.parquet")
    export(matrix, str(tmp_path / "back.parquet"))
    back = pd.read_parquet(tmp_path / "back.parquet", engine="fastparquet")
    assert list(back.columns) == ["row_id", "a", "b", "c", "i"]
    assert same_bits(back[["a", "b", "c"]].to_numpy(), DATA)
    assert back["row_id"].tolist() == list(range(len(DATA)))


def test_parquet_non_numeric_column_needs_columns(tmp_path):
    import fastparquet
    frame = pd.DataFrame({"x": [1.0, 2.0], "name": ["a", "b"]})
    fastparquet.write(str(tmp_path / "x.parquet"), frame)
    with pytest.raises(InputError, match="'name' is not numeric"):
        imported(tmp_path, tmp_path / "x.parquet")
    assert imported(tmp_path, tmp_path / "x.parquet", columns=["x"]).cols == 1


@pytest.mark.parametrize("content,match", [
    ("a,b\n1,2\n3\n", "line 3 has 1 fields"), ("1,2\n3,4,5\n", "line 2 has 3 fields"),
    ("1,2\n3,x\n", "'x' at line 2, column 2"),
    ("", "empty"), ("a,b\n", "no data rows"), ("\n\n", "empty")])
def test_bad_csv(tmp_path, content, match):
    (tmp_path / "x.csv").write_text(content)
    with pytest.raises(InputError, match=match):
        imported(tmp_path, tmp_path / "x.csv")
    assert not os.path.exists(tmp_path / "imp")


@pytest.mark.parametrize("array,match", [(np.arange(3.0), "not 2-D"), (np.zeros((0, 3)), "empty"),
                                         (np.array([["a"]]), "not numeric")])
def test_bad_npy(tmp_path, array, match):
    np.save(tmp_path / "x.npy", array)
    with pytest.raises(InputError, match=match):
        imported(tmp_path, tmp_path / "x.npy")


def test_csv_empty_fields_are_nan_and_blank_lines_are_skipped(tmp_path):
    (tmp_path / "x.csv").write_text("a,b\r\n1,\r\n\r\n,-inf\r\n")
    ids, data = imported(tmp_path, tmp_path / "x.csv").to_numpy()
    assert np.array_equal(data, [[1, np.nan], [np.nan, -np.inf]], equal_nan=True)


def test_csv_spanning_several_chunks(tmp_path, monkeypatch):
    from jobs import formats
    monkeypatch.setattr(formats, "CSV_CHUNK_BYTES", 1000)
    data = np.random.default_rng(0).standard_normal((700, 4))
    np.savetxt(tmp_path / "x.csv", data, delimiter=",", fmt="%.17g")
    assert same_bits(imported(tmp_path, tmp_path / "x.csv", block_size=64).to_numpy()[1], data)  # %.17g is exact
    bad = (tmp_path / "x.csv").read_text().splitlines()
    bad[650] = "1,2,3"
    (tmp_path / "y.csv").write_text("\n".join(bad) + "\n")
    with pytest.raises(InputError, match="line 651 has 3 fields"):
        imported(tmp_path, tmp_path / "y.csv", overwrite=True)


def test_unknown_extension_and_missing_file(tmp_path):
    with pytest.raises(ParameterError, match="unsupported"):
        imported(tmp_path, tmp_path / "x.txt")
    with pytest.raises(InputError, match="not found"):
        imported(tmp_path, tmp_path / "x.npy")


def test_export_refuses_to_overwrite(tmp_path):
    np.save(tmp_path / "x.npy", DATA)
    matrix = imported(tmp_path, tmp_path / "x.npy")
    export(matrix, str(tmp_path / "out.csv"))
    with pytest.raises(OutputError, match="exists"):
        export(matrix, str(tmp_path / "out.csv"))
    export(matrix, str(tmp_path / "out.csv"), overwrite=True, row_ids=False)
    assert pd.read_csv(tmp_path / "out.csv").shape == DATA.shape
