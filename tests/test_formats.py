"""import / export of .npy, .csv and Parquet rows."""
import os

import numpy as np
import pandas as pd
import pytest

from samplegen.jobs import driver
from samplegen.jobs.formats import export
from samplegen.jobs.store import Matrix
from samplegen.udfs.errors import InputError, OutputError, ParameterError

from .conftest import make, run_cli, tree_digest

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
    from samplegen.jobs import formats
    monkeypatch.setattr(formats, "CSV_CHUNK_BYTES", 1000)
    data = np.random.default_rng(0).standard_normal((700, 4))
    np.savetxt(tmp_path / "x.csv", data, delimiter=",", fmt="%.17g")
    # %.17g is exact
    assert same_bits(imported(tmp_path, tmp_path / "x.csv", block_size=64).to_numpy()[1], data)
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


@pytest.mark.parametrize("content,match", [
    ("a,b\n1,2\n3,NULL\n", "'NULL' at line 3, column 2"),
    ("1,None\n", "'None' at line 1, column 2"),
    ("1,2\n#N/A,4\n", "'#N/A' at line 2, column 1"),
    ("1,2\nNA,4\n", "'NA' at line 2, column 1"),
    ("1,2\n3,<NA>\n", "'<NA>' at line 2, column 2"),
    ("1,2\n3,n/a\n", "'n/a' at line 2, column 2"),
    ("1,2\n3,null\n", "'null' at line 2, column 2"),
    ("1,2\n3,-NaN(1)\n", "'-NaN\\(1\\)' at line 2, column 2"),
    ("1,2\n3,1_000\n", "'1_000' at line 2, column 2"),
    ("\n\na,b\n1,2\n\n3,N/A\n", "'N/A' at line 6, column 2"),  # lines counted in the file
])
def test_csv_na_words_are_refused_not_nan(tmp_path, content, match):
    (tmp_path / "x.csv").write_text(content)
    with pytest.raises(InputError, match=match):
        imported(tmp_path, tmp_path / "x.csv")
    assert not os.path.exists(tmp_path / "imp")


def test_csv_nan_and_inf_in_any_case_parse_as_numbers_everywhere(tmp_path, monkeypatch):
    (tmp_path / "x.csv").write_text("1,2\n3,4\n5,6\nnAn,7\n+NAN,-Infinity\n-nan,+inF\n 8 ,\n")
    ids, data = imported(tmp_path, tmp_path / "x.csv").to_numpy()
    expect = [[1, 2], [3, 4], [5, 6], [np.nan, 7], [np.nan, -np.inf], [np.nan, np.inf],
              [8, np.nan]]
    assert same_values(data, expect)
    # a bad field after them is located on its own line (not "near line 1")
    (tmp_path / "y.csv").write_text("1,2\n3,4\n5,6\nnAn,7\n8,9\n8,x9\n")
    with pytest.raises(InputError, match="'x9' at line 6, column 2"):
        imported(tmp_path, tmp_path / "y.csv", overwrite=True)
    # ... also when it lies in a later chunk than the first line of the file
    from samplegen.jobs import formats
    monkeypatch.setattr(formats, "CSV_CHUNK_BYTES", 64)
    (tmp_path / "z.csv").write_text("a,b\n" + "nAn,1.5\n" * 40 + "2,NULL\n")
    with pytest.raises(InputError, match="'NULL' at line 42, column 2"):
        imported(tmp_path, tmp_path / "z.csv", overwrite=True)


@pytest.mark.parametrize("content,match", [
    ("0x10,2\n3,4\n", "'0x10' at line 1, column 1"),
    ("True,2\n3,4\n", "'True' at line 1, column 1"),
    ("1,false\n3,4\n", "'false' at line 1, column 2"),
    ("a,1\n3,4\n", "'a' at line 1, column 1"),
    ("\n0x10,2\n3,4\n", "'0x10' at line 2, column 1"),
])
def test_csv_bad_first_row_is_an_error_not_a_header(tmp_path, content, match):
    (tmp_path / "x.csv").write_text(content)
    with pytest.raises(InputError, match=match):
        imported(tmp_path, tmp_path / "x.csv")
    # a line of words only is still a header, whatever the words
    (tmp_path / "h.csv").write_text("NULL,\"b\"\n1,2\n")
    matrix = imported(tmp_path, tmp_path / "h.csv")
    assert matrix.meta["columns"] == ["NULL", "b"] and same_values(matrix.to_numpy()[1], [[1, 2]])


def test_export_into_a_matrix_or_run_directory_is_refused(tmp_path, capsys):
    src = make(tmp_path, "m", rows=50, cols=3, block_size=16)
    code, _, err = run_cli(capsys, "holdout", src, tmp_path / "run", "--ratio", 0.5, "--seed", 1,
                           "--runner", "inline", "--mrjob-conf", "")
    assert code == 0, err
    os.mkdir(tmp_path / "m" / "sub")
    matrix = Matrix.open(src)
    for target, kind in [("m/x.csv", "matrix"), ("m/part-x.csv", "matrix"),
                         ("m/sub/x.npy", "matrix"), ("run/x.parquet", "run"),
                         ("run/train-0/part-x.csv", "matrix")]:
        with pytest.raises(OutputError, match=f"inside the samplegen {kind} directory"):
            export(matrix, str(tmp_path / target))
    before = tree_digest(tmp_path)
    for argv in [("m", "--to", "m/x.csv"), ("run", "train-0", "--to", "run/train-0/part-x.csv"),
                 ("run", "test-0", "--to", "run/x.npy"), ("m", "--to", "m/sub/x.npy")]:
        code, out, err = run_cli(capsys, "export", tmp_path / argv[0], *argv[1:-1],
                                 tmp_path / argv[-1])
        assert code == 2 and "inside the samplegen" in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1
    assert tree_digest(tmp_path) == before  # nothing written
    assert Matrix.open(src).to_numpy()[1].shape == (50, 3)
    export(matrix, str(tmp_path / "elsewhere.csv"))  # next to them is fine


def test_npy_without_numpy_header_is_refused_by_name(tmp_path):
    (tmp_path / "x.npy").write_text("1,2\n3,4\n")
    src = str(tmp_path / "x.npy")
    with pytest.raises(InputError) as info:
        imported(tmp_path, src)
    assert str(info.value) == f"{src} is not a .npy file (no NumPy header)"


# values whose %.17g text is longer than needed, and the edges of float64
SHORTEST = [91.22, 0.1, 0.1 + 0.2, 1 / 3, 3.0, -0.0, 0.0, 1e16, 1e22, 123456789.125, 2.0 ** 53,
            -1.5e-7, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, np.nan, np.inf,
            -np.inf, -91.22]


def test_csv_export_writes_the_shortest_text_that_round_trips(tmp_path):
    data = np.array([SHORTEST, SHORTEST[::-1]] * 3)
    np.save(tmp_path / "x.npy", data)
    matrix = imported(tmp_path, tmp_path / "x.npy", block_size=2)
    for row_ids in (True, False):
        out = tmp_path / f"back-{row_ids}.csv"
        export(matrix, str(out), row_ids=row_ids)
        lines = out.read_text().splitlines()
        cells = [line.split(",") for line in lines[1:]]
        if row_ids:
            assert [c[0] for c in cells] == [str(i) for i in range(len(data))]
            cells = [c[1:] for c in cells]
        for text, value in zip(cells[0], SHORTEST):
            back = float(text)  # exactly the same float64, sign of zero included
            assert np.isnan(back) if np.isnan(value) else \
                np.float64(back).view(np.uint64) == np.float64(value).view(np.uint64), text
            expected = repr(value)[:-2] if repr(value).endswith(".0") else repr(value)
            assert text == expected  # the shortest: Python's repr, without an integral '.0'
        assert cells[0][:5] == ["91.22", "0.1", "0.30000000000000004", "0.3333333333333333", "3"]
        assert same_bits(np.array([[float(t) for t in c] for c in cells]), data)
        dest = str(tmp_path / f"again-{row_ids}")  # and samplegen reads it back bit for bit
        driver.import_file(str(out), dest, 4)
        assert same_bits(Matrix.open(dest).to_numpy()[1],
                         np.column_stack([np.arange(6.0), data]) if row_ids else data)


def test_csv_export_of_wide_rows_in_pieces(tmp_path, monkeypatch):
    from samplegen.jobs import formats
    monkeypatch.setattr(formats, "CSV_PIECE_VALUES", 7)  # fewer values than one row holds
    data = np.random.default_rng(3).standard_normal((9, 11)).round(3)
    np.save(tmp_path / "x.npy", data)
    out = tmp_path / "back.csv"
    export(imported(tmp_path, tmp_path / "x.npy", block_size=4), str(out))
    lines = out.read_text().splitlines()
    assert len(lines) == 10 and all(line.count(",") == 11 for line in lines)
    assert same_bits(np.array([[float(t) for t in line.split(",")[1:]] for line in lines[1:]]),
                     data)


def test_export_creates_missing_directories_and_refuses_a_file_parent(tmp_path, capsys):
    src = make(tmp_path, "m", rows=20, cols=2, block_size=8)
    code, _, err = run_cli(capsys, "export", src, "--to", tmp_path / "new" / "dir" / "x.csv")
    assert code == 0, err
    assert len((tmp_path / "new" / "dir" / "x.csv").read_text().splitlines()) == 21
    (tmp_path / "afile").write_text("x")
    target = tmp_path / "afile" / "sub" / "x.csv"
    code, _, err = run_cli(capsys, "export", src, "--to", target)
    assert code == 2 and err == (f"samplegen: error: cannot create {target}: "
                                 f"{tmp_path / 'afile'} is a file, not a directory\n")
