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


def test_parquet_non_numeric_columns_are_left_out_unless_named(tmp_path):
    import fastparquet
    frame = pd.DataFrame({"x": [1.0, 2.0], "name": ["a", "b"]})
    fastparquet.write(str(tmp_path / "x.parquet"), frame)
    lines = []
    matrix = imported(tmp_path, tmp_path / "x.parquet",
                      log=lambda message, progress=False: lines.append(message))
    assert matrix.meta["columns"] == ["x"]
    assert lines[0] == "left out non-numeric columns: name (string)"
    with pytest.raises(ParameterError, match="--columns: column 'name' of .* is string, not "):
        imported(tmp_path, tmp_path / "x.parquet", columns=["x", "name"], overwrite=True)
    assert imported(tmp_path, tmp_path / "x.parquet", columns=["x"], overwrite=True).cols == 1


@pytest.mark.parametrize("content,match", [
    ("a,b\n1,2\n3\n", "line 3 has 1 field,"), ("1,2\n3,4,5\n", "line 2 has 3 fields"),
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


@pytest.mark.slow
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


# ---------------------------------------------------------------------------
# Parquet datasets, remote sources, column choice
# ---------------------------------------------------------------------------
def write_parquet(path, frame):
    import fastparquet
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fastparquet.write(str(path), frame, write_index=False)


def part_frame(seed, n):
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"value": rng.normal(size=n), "count": rng.integers(0, 9, n),
                         "flag": rng.random(n) < 0.5, "name": [f"n{i}" for i in range(n)],
                         "when": pd.Timestamp("2024-01-01") + pd.to_timedelta(np.arange(n), "h")})


def partitioned_dataset(root):
    """A Hive-style dataset as Spark and Hive leave it: partition directories
    (a null partition, a URL-escaped value), side files, a part file without
    suffix; returns the expected rows in file order (value, count, flag, day)."""
    parts = [("day=1/region=eu/part-00000-c000.snappy.parquet", 1, 7),
             ("day=1/region=us/000000_0", 1, 5),                       # Hive's name, no suffix
             ("day=10/region=eu/part-00000-c000.snappy.parquet", 10, 9),
             ("day=__HIVE_DEFAULT_PARTITION__/region=us%2Fwest/part-00000.parquet", np.nan, 4)]
    expected = []
    for seed, (rel, day, n) in enumerate(parts):
        frame = part_frame(seed, n)
        write_parquet(root / rel, frame)
        (root / os.path.dirname(rel) / f".{os.path.basename(rel)}.crc").write_bytes(b"crc")
        values = frame[["value", "count", "flag"]].to_numpy(np.float64)
        expected.append(np.column_stack([values, np.full(n, day)]))
    (root / "_SUCCESS").write_text("")
    (root / "_committed_4711").write_text("{}")
    (root / "_temporary" / "0").mkdir(parents=True)
    (root / "_temporary" / "0" / "part-00009.parquet").write_text("half written")
    return np.concatenate(expected)


def test_partitioned_dataset_partition_keys_become_columns(tmp_path):
    expected = partitioned_dataset(tmp_path / "sales")
    lines = []
    matrix = imported(tmp_path, tmp_path / "sales", log=lambda m, progress=False: lines.append(m),
                      label="day")
    assert lines[0] == ("left out non-numeric columns: name (string), when (timestamp), "
                        "region (string)")
    assert len(lines) == 2 and lines[1].startswith("imported 25 x 4")
    assert matrix.meta["columns"] == ["value", "count", "flag", "day"]
    assert matrix.meta["label"] == "day"
    assert same_bits(matrix.to_numpy()[1], expected)          # files in path order, rows in order
    chosen = imported(tmp_path, tmp_path / "sales", columns=["day", "value"], overwrite=True)
    assert same_bits(chosen.to_numpy()[1], expected[:, [3, 0]])
    with pytest.raises(ParameterError, match="--columns: column 'region' of .* is string"):
        imported(tmp_path, tmp_path / "sales", columns=["value", "region"], overwrite=True)


def test_dataset_files_must_agree(tmp_path):
    write_parquet(tmp_path / "a" / "part-0.parquet", part_frame(0, 3))
    write_parquet(tmp_path / "a" / "part-1.parquet", part_frame(1, 3).drop(columns=["count"]))
    with pytest.raises(InputError, match="part-1.parquet: no column 'count'"):
        imported(tmp_path, tmp_path / "a")
    assert imported(tmp_path, tmp_path / "a", exclude=["count"]).cols == 2   # value, flag
    write_parquet(tmp_path / "b" / "k=1" / "part-0.parquet", part_frame(0, 3))
    write_parquet(tmp_path / "b" / "part-1.parquet", part_frame(1, 3))
    with pytest.raises(InputError, match="partition directories disagree"):
        imported(tmp_path, tmp_path / "b", overwrite=True)


def test_exclude_and_label(tmp_path):
    frame = pd.DataFrame(DATA, columns=["a", "b", "c"])
    frame.to_csv(tmp_path / "x.csv", index=False)
    write_parquet(tmp_path / "x.parquet", frame.assign(s="text"))
    for src in ("x.csv", "x.parquet"):
        matrix = imported(tmp_path, tmp_path / src, exclude=["b"], label="c", overwrite=True)
        assert matrix.meta["columns"] == ["a", "c"] and matrix.meta["label"] == "c"
        assert same_values(matrix.to_numpy()[1], DATA[:, [0, 2]])
        # the label is imported as a regular column, also when --columns leaves it out
        matrix = imported(tmp_path, tmp_path / src, columns=["b"], label="a", overwrite=True)
        assert matrix.meta["columns"] == ["b", "a"] and matrix.meta["label"] == "a"
        assert same_values(matrix.to_numpy()[1], DATA[:, [1, 0]])
    assert "label" not in imported(tmp_path, tmp_path / "x.csv", overwrite=True).meta


def test_info_names_the_label(tmp_path, capsys):
    pd.DataFrame(DATA, columns=["a", "b", "c"]).to_csv(tmp_path / "x.csv", index=False)
    code, _, err = run_cli(capsys, "import", tmp_path / "x.csv", tmp_path / "m",
                           "--block-size", 2, "--label", "b")
    assert code == 0, err
    code, out, _ = run_cli(capsys, "info", tmp_path / "m")
    assert code == 0 and "label column 'b' (column 1)" in out
    assert driver.info(str(tmp_path / "m"))["label"] == "b"


def test_a_recorded_label_is_checked_when_the_matrix_is_opened(tmp_path):
    import json
    pd.DataFrame(DATA, columns=["a", "b", "c"]).to_csv(tmp_path / "x.csv", index=False)
    imported(tmp_path, tmp_path / "x.csv", label="b")
    meta_path = tmp_path / "imp" / "_matrix.json"
    meta = json.loads(meta_path.read_text())
    meta["label"] = "nope"
    meta_path.write_text(json.dumps(meta))
    with pytest.raises(InputError, match="label must be null or the name of one of its columns"):
        Matrix.open(str(tmp_path / "imp"))


def _spark_like(tmp_path):
    write_parquet(tmp_path / "ds" / "part-00000.snappy.parquet", part_frame(0, 5))
    (tmp_path / "ds" / "_SUCCESS").write_text("")
    return tmp_path / "ds"


def _with_stray_file(tmp_path):
    _spark_like(tmp_path)
    (tmp_path / "ds" / "notes.txt").write_text("not rows")
    return tmp_path / "ds"


def _with_plain_subdirectory(tmp_path):
    _spark_like(tmp_path)
    write_parquet(tmp_path / "ds" / "old" / "part-0.parquet", part_frame(1, 2))
    return tmp_path / "ds"


def _only_strings(tmp_path):
    write_parquet(tmp_path / "s.parquet", pd.DataFrame({"s": ["a"], "t": ["b"]}))
    return tmp_path / "s.parquet"


def _dir_of_csv(tmp_path):
    (tmp_path / "csvs").mkdir()
    (tmp_path / "csvs" / "a.csv").write_text("1,2\n")
    return tmp_path / "csvs"


def _npy(tmp_path):
    np.save(tmp_path / "x.npy", DATA)
    return tmp_path / "x.npy"


IMPORT_ERRORS = [
    ("string column asked for", _spark_like, ["--columns", "value,name"],
     "--columns: column 'name' of {src} is string, not numeric"),
    ("string label", _spark_like, ["--label", "when"],
     "--label: column 'when' of {src} is timestamp, not numeric"),
    ("columns and exclude", _spark_like, ["--columns", "value", "--exclude", "count"],
     "--columns and --exclude cannot be used together"),
    ("label excluded", _spark_like, ["--exclude", "count", "--label", "count"],
     "--label 'count' is also left out by --exclude"),
    ("unknown excluded column", _spark_like, ["--exclude", "nope"],
     "--exclude: no column 'nope' in {src} (columns: value, count, flag, name, when)"),
    ("nothing left", _spark_like, ["--exclude", "value,count,flag"],
     "--exclude leaves no numeric column of {src} to import"),
    ("column named twice", _spark_like, ["--columns", "value,value"],
     "--columns names column 'value' twice"),
    ("no numeric column", _only_strings, [],
     "{src}: no numeric column to import (it has s (string), t (string))"),
    ("directory without Parquet files", _dir_of_csv, [],
     "{src}: no Parquet files in this directory (it holds a.csv)"),
    ("empty directory", lambda t: (t / "e").mkdir() or t / "e", [],
     "{src}: no Parquet files in this directory"),
    ("stray file in a dataset", _with_stray_file, [], "{src}: notes.txt is not a Parquet file"),
    ("subdirectory that is no partition", _with_plain_subdirectory, [],
     "{src}: old is a directory but not a partition (key=value)"),
    ("a samplegen matrix", lambda t: make(t, "m"), [],
     "{src} is a samplegen matrix directory, not rows to import"),
    ("column choice on .npy", _npy, ["--label", "a"], "--label applies to CSV and Parquet"),
]


@pytest.mark.parametrize("label,source,options,message", IMPORT_ERRORS,
                         ids=[e[0] for e in IMPORT_ERRORS])
def test_import_errors_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, label, source,
                                                              options, message):
    src = source(tmp_path)
    before = tree_digest(tmp_path)
    code, out, err = run_cli(capsys, "import", src, tmp_path / "out", "--block-size", 4, *options)
    assert code == 2, err
    assert err.startswith(f"samplegen: error: {message.format(src=src)}"), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert tree_digest(tmp_path) == before and not os.path.exists(tmp_path / "out")


@pytest.fixture
def memory_root():
    """A fresh directory of fsspec's in-memory filesystem (a non-local
    filesystem of the layer, as hdfs:// is)."""
    import uuid

    from samplegen.jobs import fs
    root = f"memory://samplegen-{uuid.uuid4().hex[:12]}"
    yield root
    fs.get_fs(root).rmtree(root)


def test_remote_sources_give_the_same_matrix_as_local_ones(tmp_path, memory_root, monkeypatch):
    """Files and datasets are read through the filesystem layer where they
    live (here fsspec's memory filesystem): the same bytes as a local import."""
    from samplegen.jobs import formats, fs
    monkeypatch.setattr(formats, "NPY_CHUNK_BYTES", 1000)       # several chunks per file
    monkeypatch.setattr(formats, "CSV_CHUNK_BYTES", 300)
    data = np.random.default_rng(2).standard_normal((120, 5))
    local = tmp_path / "src"
    local.mkdir()
    np.save(local / "c.npy", data)
    np.save(local / "f.npy", np.asfortranarray(data.astype(">f4")))
    pd.DataFrame(data, columns=list("abcde")).to_csv(local / "x.csv", index=False)
    write_parquet(local / "x.parquet", part_frame(3, 50))
    partitioned_dataset(local / "sales")
    fs.get_fs(memory_root).upload(str(local), memory_root)
    for name, options in [("c.npy", {}), ("f.npy", {}), ("x.csv", {"columns": ["e", "b"]}),
                          ("x.parquet", {"exclude": ["flag"]}), ("sales", {"label": "day"})]:
        here = tmp_path / f"local-{name}"
        there = tmp_path / f"remote-{name}"
        driver.import_file(str(local / name), str(here), 16, **options)
        driver.import_file(f"{memory_root}/{name}", str(there), 16, **options)
        assert tree_digest(here) == tree_digest(there), name
        assert Matrix.open(str(there)).rows in (120, 50, 25)


@pytest.mark.spark
def test_a_spark_dataset_directory_without_suffix(spark, tmp_path, capsys):
    """What Spark writes (``part-*`` files, ``_SUCCESS``, ``.crc`` files),
    imported from a directory whose name has no suffix; partitioned by a
    column, the partition key becomes a column again."""
    from pyspark.sql import SparkSession
    session = SparkSession.builder.getOrCreate()                # on the suite's context
    rng = np.random.default_rng(5)
    rows = [(i, float(v), i % 3 == 0, f"n{i}", [f"t{i}", "x"], i % 4)
            for i, v in enumerate(rng.normal(size=300))]
    frame = session.createDataFrame(
        rows, "id long, value double, flag boolean, name string, tags array<string>, day int")
    frame.repartition(3).write.parquet(str(tmp_path / "events"))
    frame.write.partitionBy("day").parquet(str(tmp_path / "by_day"))
    names = sorted(os.listdir(tmp_path / "events"))
    assert "_SUCCESS" in names and any(n.endswith(".crc") for n in names)
    parts = [n for n in names if n.startswith("part-")]
    assert len(parts) == 3

    code, _, err = run_cli(capsys, "import", tmp_path / "events", tmp_path / "m",
                           "--block-size", 64)
    assert code == 0, err
    assert err.splitlines()[0] == ("samplegen: left out non-numeric columns: name (string), "
                                   "tags (list)")
    matrix = Matrix.open(str(tmp_path / "m"))
    assert matrix.meta["columns"] == ["id", "value", "flag", "day"]
    in_file_order = pd.concat([pd.read_parquet(tmp_path / "events" / n, engine="fastparquet")
                               for n in parts])
    expected = in_file_order[["id", "value", "flag", "day"]].to_numpy(np.float64)
    assert same_bits(matrix.to_numpy()[1], expected)
    assert sorted(map(tuple, expected)) == sorted((float(r[0]), r[1], float(r[2]), float(r[5]))
                                                  for r in rows)

    code, _, err = run_cli(capsys, "import", tmp_path / "by_day", tmp_path / "p",
                           "--block-size", 64, "--exclude", "id", "--label", "day")
    assert code == 0, err
    matrix = Matrix.open(str(tmp_path / "p"))
    assert matrix.meta["columns"] == ["value", "flag", "day"] and matrix.meta["label"] == "day"
    values = matrix.to_numpy()[1]
    assert np.all(np.diff(values[:, 2]) >= 0)                   # day=0/ ... day=3/, in order
    assert sorted(map(tuple, values)) == sorted((r[1], float(r[2]), float(r[5])) for r in rows)
