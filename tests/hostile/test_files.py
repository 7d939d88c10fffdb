"""Hostile tests of users' files: ``samplegen import`` and ``export`` and the
readers behind them (``jobs/formats.py``: CSV, Parquet files and dataset
directories, ``.npy``), and the messages about groups and counts.

Every bad input is one line on stderr, exit status 2, nothing on stdout
and nothing written; a file changed while it is read, or damaged, is one
error naming it, never the reader's own exception text or a crash.
"""
import decimal
import os

import numpy as np
import pytest

import samplegen
from samplegen.jobs.formats import open_source
from samplegen.udfs.errors import InputError, ParameterError

from ..conftest import run_cli

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _refused(capsys, tmp_path, src, *args, needles=()):
    """Import *src*: status 2, one line naming each of *needles*, nothing
    written, nothing on stdout; returns the line."""
    dest = tmp_path / "out"
    code, out, err = run_cli(capsys, "import", src, dest, "--block-size", 4, *args)
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and err.startswith("samplegen: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)
    assert not dest.exists()
    return err


def _imported(capsys, tmp_path, src, *args):
    """Import *src* and export it back: ``(values, the import's stderr)``."""
    dest, back = tmp_path / "m", tmp_path / "back.npy"
    code, _, err = run_cli(capsys, "import", src, dest, "--block-size", 4, *args)
    assert code == 0, err
    code, _, out = run_cli(capsys, "export", dest, "--to", back, "--no-row-ids")
    assert code == 0, out
    return np.load(back), err


def _write(path, data):
    path.write_bytes(data)
    return path


# -- Parquet: numeric types -------------------------------------------------------------
def test_float16_parquet_column_is_imported_with_exact_values(tmp_path, capsys):
    halves = np.array([0.5, -2.25, 65504.0, 6.1035156e-05, 5.9604645e-08, np.inf, 1 / 3],
                      np.float16)
    column = pa.array(list(halves) + [None], pa.float16())
    src = tmp_path / "h.parquet"
    pq.write_table(pa.table({"h": column, "x": np.arange(8.0)}), src)
    values, err = _imported(capsys, tmp_path, src)
    assert "left out" not in err
    # a half float widens to float64 exactly: the same number
    expected = [float(v) for v in halves] + [np.nan]
    assert values.shape == (8, 2)
    assert np.array_equal(values[:, 0], expected, equal_nan=True)


@pytest.mark.parametrize("dictionary", [True, False])
def test_every_numeric_parquet_type_is_imported_as_its_numbers(tmp_path, capsys, dictionary):
    table = pa.table({
        "i8": pa.array([-128, 127, 0], pa.int8()), "u8": pa.array([0, 255, 1], pa.uint8()),
        "i16": pa.array([-32768, 32767, 0], pa.int16()),
        "u16": pa.array([0, 65535, 1], pa.uint16()),
        "i32": pa.array([-2 ** 31, 2 ** 31 - 1, 0], pa.int32()),
        "u32": pa.array([0, 2 ** 32 - 1, 1], pa.uint32()),
        "i64": pa.array([-2 ** 53, 2 ** 53, 0], pa.int64()),
        "u64": pa.array([0, 2 ** 53, 1], pa.uint64()),
        "f32": pa.array([1.5, -0.25, 3.0], pa.float32()),
        "f16": pa.array(np.array([1.5, -0.25, 3.0], np.float16), pa.float16()),
        "b": pa.array([True, False, None]),
        "d": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-2.50"), None],
                      pa.decimal128(9, 2)),
        "d30": pa.array([decimal.Decimal("1.25")] * 3, pa.decimal128(30, 2)),
        "cat": pa.array([1.5, 2.5, 1.5]).dictionary_encode(),
    })
    src = tmp_path / "t.parquet"
    pq.write_table(table, src, use_dictionary=dictionary)
    values, err = _imported(capsys, tmp_path, src)
    assert "left out" not in err
    expected = np.array([
        [-128, 0, -32768, 0, -2 ** 31, 0, -2 ** 53, 0, 1.5, 1.5, 1, 1.25, 1.25, 1.5],
        [127, 255, 32767, 65535, 2 ** 31 - 1, 2 ** 32 - 1, 2 ** 53, 2 ** 53, -0.25, -0.25, 0,
         -2.5, 1.25, 2.5],
        [0, 1, 0, 1, 0, 1, 0, 1, 3.0, 3.0, np.nan, np.nan, 1.25, 1.5]])
    assert np.array_equal(values, expected, equal_nan=True)


def test_pandas_categories_of_numbers_are_numeric_columns(tmp_path, capsys):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"c": pd.Categorical([2.5, 1.5, 2.5]), "s": ["a", "b", "c"],
                          "x": [1.0, 2.0, 3.0]})
    src = tmp_path / "c.parquet"
    frame.to_parquet(src, engine="pyarrow", index=False)
    values, err = _imported(capsys, tmp_path, src)
    assert "left out non-numeric columns: s (string)" in err and "c (" not in err
    assert np.array_equal(values, [[2.5, 1.0], [1.5, 2.0], [2.5, 3.0]])


def test_nested_parquet_columns_are_left_out_and_refused_by_name(tmp_path, capsys):
    src = tmp_path / "n.parquet"
    pq.write_table(pa.table({"tags": [[1, 2], [3]], "x": [1.0, 2.0]}), src)
    values, err = _imported(capsys, tmp_path, src)
    assert "left out non-numeric columns: tags (list)" in err
    assert np.array_equal(values, [[1.0], [2.0]])
    _refused(capsys, tmp_path, src, "--columns", "x,tags", needles=["'tags'", "list"])


# -- Parquet: bad files ----------------------------------------------------------------------
def _parquet(tmp_path, name="g.parquet", rows=1000, **options):
    src = tmp_path / name
    pq.write_table(pa.table({"a": np.arange(rows, dtype=float),
                             "b": np.arange(rows, dtype=float) * 2}), src, **options)
    return src


def test_parquet_schema_with_a_repeated_name_is_refused(tmp_path, capsys):
    src = tmp_path / "dup.parquet"
    pq.write_table(pa.Table.from_arrays([pa.array([1.0]), pa.array([2.0]), pa.array([3.0])],
                                        names=["a", "b", "a"]), src)
    _refused(capsys, tmp_path, src, needles=[str(src), "'a'", "columns 1 and 3"])


def test_truncated_parquet_file_is_one_error_naming_it(tmp_path, capsys):
    src = _parquet(tmp_path)
    data = src.read_bytes()
    for cut in (len(data) // 2, len(data) - 3, 4, 0):
        _write(src, data[:cut])
        _refused(capsys, tmp_path, src, needles=[str(src)])


def test_parquet_file_with_a_wrong_magic_number_is_refused(tmp_path, capsys):
    src = _parquet(tmp_path)
    _write(src, b"PAR0" + src.read_bytes()[4:])
    _refused(capsys, tmp_path, src, needles=[str(src), "PAR1"])


def test_parquet_file_with_a_damaged_footer_is_refused(tmp_path, capsys):
    src = _parquet(tmp_path)
    data = bytearray(src.read_bytes())
    length = int.from_bytes(data[-8:-4], "little")
    for i in range(len(data) - 8 - length + 2, len(data) - 8 - length + 40):
        data[i] ^= 0x5A
    _write(src, bytes(data))
    _refused(capsys, tmp_path, src, needles=[str(src), "footer"])


def test_damaged_parquet_page_is_one_error_not_a_crash(tmp_path, capsys):
    # fastparquet decodes page headers without bounds checks: these bytes
    # crashed the process (a segmentation fault) before the pages were checked
    src = _parquet(tmp_path, row_group_size=300)
    data = bytearray(src.read_bytes())
    for i in range(10, 200):
        data[i] ^= 0xFF
    _write(src, bytes(data))
    _refused(capsys, tmp_path, src, needles=[str(src), "row group 0 is damaged"])


def test_parquet_page_checksum_mismatch_is_refused(tmp_path, capsys):
    src = _parquet(tmp_path, write_page_checksum=True, use_dictionary=False,
                   compression="none")
    data = bytearray(src.read_bytes())
    data[len(data) // 3] ^= 0x01          # one bit of a value: only the CRC tells
    _write(src, bytes(data))
    _refused(capsys, tmp_path, src, needles=[str(src), "CRC"])


def test_parquet_with_zero_rows_is_refused(tmp_path, capsys):
    src = tmp_path / "z.parquet"
    pq.write_table(pa.table({"a": pa.array([], pa.float64())}), src)
    _refused(capsys, tmp_path, src, needles=[str(src), "no rows"])


def test_dataset_directory_with_one_damaged_part_is_refused_naming_the_part(tmp_path, capsys):
    root = tmp_path / "ds"
    (root / "day=1").mkdir(parents=True)
    (root / "day=2").mkdir()
    _parquet(root / "day=1", "part-0.parquet")
    part = _parquet(root / "day=2", "part-0.parquet")
    data = bytearray(part.read_bytes())
    for i in range(10, 200):
        data[i] ^= 0xFF
    _write(part, bytes(data))
    _refused(capsys, tmp_path, root, needles=["day=2/part-0.parquet", "damaged"])


def test_parquet_file_replaced_while_it_is_read_is_one_error(tmp_path, capsys):
    src = _parquet(tmp_path, rows=100_000, row_group_size=30_000)
    rows = open_source(str(src))
    chunks = iter(rows.chunks)
    assert next(chunks).shape == (30_000, 2)
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"x": [str(i) for i in range(50_000)],
                             "b": np.arange(50_000.0)}), other, row_group_size=10_000)
    os.replace(other, src)
    with pytest.raises(InputError, match="changed while it was read") as info:
        list(chunks)
    assert str(src) in str(info.value)
    assert capsys.readouterr().out == ""    # fastparquet's complaints are not our output


def test_parquet_file_rewritten_in_place_while_it_is_read_is_one_error(tmp_path):
    src = _parquet(tmp_path, rows=100_000, row_group_size=30_000)
    chunks = iter(open_source(str(src)).chunks)
    next(chunks)
    data = bytearray(src.read_bytes())
    with open(src, "r+b") as f:       # the same layout, other values: no decoder notices
        f.write(bytes(data))
    os.utime(src, ns=(0, 0))
    with pytest.raises(InputError, match="changed while it was read"):
        list(chunks)


# -- CSV ------------------------------------------------------------------------------------
@pytest.mark.parametrize("content, needles", [
    (b"a,b\n1,2\n3\n", ["ragged", "line 3 has 1 field,", "expected 2"]),
    (b"a,b\n1,2\n3,\x004\n", ["line 3", "column 2"]),
    (b"a\x00,b\n1,2\n", ["header", "control character"]),
    (b'a,b\n1,"2\n3"\n', ["line 3"]),
    (b"a,b\n1,\xe92\n", ["line 2", "column 2"]),
    (b"\xe9t\xe9,b\n1,2\n", ["header", "not UTF-8"]),
    (b"", ["empty"]),
    (b"\n \n\n", ["empty"]),
    (b"a,b\n", ["no data rows"]),
    (b"a,name\n1,bob\n", ["'bob'", "line 2", "column 2"]),
])
def test_bad_csv_is_one_line(tmp_path, capsys, content, needles):
    src = _write(tmp_path / "x.csv", content)
    _refused(capsys, tmp_path, src, needles=[str(src)] + needles)


def test_huge_field_is_shown_cut_short(tmp_path, capsys):
    src = _write(tmp_path / "x.csv", b"a,b\n1," + b"x" * 2_000_000 + b"\n")
    err = _refused(capsys, tmp_path, src, needles=["2000000 characters", "line 2"])
    assert len(err) < 400


def test_huge_numeric_field_is_its_number(tmp_path, capsys):
    digits = b"1" + b"0" * 300                       # 1e300, written out
    values, _ = _imported(capsys, tmp_path, _write(tmp_path / "x.csv",
                                                        b"a,b\n1," + digits + b"\n"))
    assert values.tolist() == [[1.0, 1e300]]


def test_csv_with_a_bom_and_crlf_line_ends_reads_its_header(tmp_path, capsys):
    src = _write(tmp_path / "x.csv", b"\xef\xbb\xbfa,b\r\n1,2\r\n3,4\r\n")
    values, err = _imported(capsys, tmp_path, src, "--columns", "b,a")
    assert values.tolist() == [[2.0, 1.0], [4.0, 3.0]]


@pytest.mark.parametrize("args", [[], ["--label", "y"]])
def test_csv_header_with_a_repeated_name_is_refused(tmp_path, capsys, args):
    src = _write(tmp_path / "x.csv", b"y,x,y\n1,2,3\n4,5,6\n")
    _refused(capsys, tmp_path, src, *args, needles=[str(src), "'y'", "columns 1 and 3"])


@pytest.mark.parametrize("option", ["--columns", "--exclude", "--label"])
def test_csv_options_naming_a_missing_column_are_refused(tmp_path, capsys, option):
    src = _write(tmp_path / "x.csv", b"a,b\n1,2\n")
    _refused(capsys, tmp_path, src, option, "zz", needles=[option, "'zz'", "a, b"])


def test_csv_replaced_between_header_and_rows_is_one_error(tmp_path):
    src = _write(tmp_path / "x.csv", b"y,x\n1,2\n3,4\n")
    rows = open_source(str(src), label="y")
    other = _write(tmp_path / "o.csv", b"x,y\n9,8\n7,6\n")
    os.replace(other, src)
    with pytest.raises(InputError, match="changed while it was read"):
        list(rows.chunks)


# -- .npy ----------------------------------------------------------------------------------
def test_bad_npy_files_are_one_line(tmp_path, capsys):
    np.save(tmp_path / "g.npy", np.arange(12.0).reshape(4, 3))
    raw = (tmp_path / "g.npy").read_bytes()
    _refused(capsys, tmp_path, _write(tmp_path / "t.npy", raw[:-10]), needles=["truncated"])
    _refused(capsys, tmp_path, _write(tmp_path / "m.npy", b"NUMPY" + raw[5:]),
             needles=["not a .npy file"])
    np.save(tmp_path / "o.npy", np.array([[1, "a"]], dtype=object), allow_pickle=True)
    _refused(capsys, tmp_path, tmp_path / "o.npy", needles=["not numeric", "object"])
    np.save(tmp_path / "3.npy", np.zeros((2, 2, 2)))
    _refused(capsys, tmp_path, tmp_path / "3.npy", needles=["not 2-D", "(2, 2, 2)"])
    header = raw[:10] + b"{'descr': nonsense}".ljust(117) + b"\n"
    err = _refused(capsys, tmp_path, _write(tmp_path / "h.npy", header + raw[128:]),
                   needles=["header is damaged"])
    assert "nonsense" not in err


def test_fortran_ordered_npy_keeps_its_rows(tmp_path, capsys):
    array = np.arange(12.0).reshape(4, 3)
    np.save(tmp_path / "f.npy", np.asfortranarray(array))
    values, _ = _imported(capsys, tmp_path, tmp_path / "f.npy")
    assert np.array_equal(values, array)


def test_npy_replaced_while_it_is_read_is_one_error(tmp_path):
    src = tmp_path / "x.npy"
    np.save(src, np.arange(12.0).reshape(4, 3))
    rows = open_source(str(src))
    np.save(tmp_path / "y.npy", np.arange(6.0).reshape(2, 3))
    os.replace(tmp_path / "y.npy", src)
    with pytest.raises(InputError, match="changed while it was read"):
        list(rows.chunks)


# -- export ------------------------------------------------------------------------------------
@pytest.fixture
def matrix(tmp_path, capsys):
    np.save(tmp_path / "g.npy", np.arange(12.0).reshape(4, 3))
    code, _, err = run_cli(capsys, "import", tmp_path / "g.npy", tmp_path / "m",
                           "--block-size", 4)
    assert code == 0, err
    return tmp_path / "m"


def _export_refused(capsys, matrix, target, *args, needles=()):
    before = sorted(os.listdir(os.path.dirname(target)))
    code, out, err = run_cli(capsys, "export", matrix, "--to", target, *args)
    assert code == 2 and out == "" and err.count("\n") == 1, err
    for needle in needles:
        assert needle in err, (needle, err)
    assert sorted(os.listdir(os.path.dirname(target))) == before
    assert ".tmp-" not in err


def test_export_to_an_existing_file_needs_overwrite(tmp_path, capsys, matrix):
    target = _write(tmp_path / "e.csv", b"keep")
    _export_refused(capsys, matrix, target, needles=["exists", "--overwrite"])
    assert target.read_bytes() == b"keep"


def test_export_to_a_directory_is_refused(tmp_path, capsys, matrix):
    (tmp_path / "d.csv").mkdir()
    _export_refused(capsys, matrix, tmp_path / "d.csv", "--overwrite",
                    needles=["is a directory"])
    (tmp_path / "plain").mkdir()
    _export_refused(capsys, matrix, tmp_path / "plain", needles=["export writes one file"])


def test_export_to_an_unknown_extension_is_refused(tmp_path, capsys, matrix):
    _export_refused(capsys, matrix, tmp_path / "out.txt", needles=["'.txt'", ".csv"])


# -- groups and counts in messages -------------------------------------------------------------
def test_grouped_holdout_counts_groups_in_its_message(tmp_path):
    X = np.arange(10.0).reshape(5, 2)
    with pytest.raises(ParameterError) as info:
        samplegen.holdout(X, 0.8, 1, by_groups=np.zeros(5))
    message = str(info.value)
    assert "of 1 group " in message and "rows" not in message and "1 row" not in message


@pytest.mark.parametrize("groups, needle", [
    (np.array([0, 1, np.nan, 1, 0]), "NaN"),
    (np.array([0, None, 1, 1, 0], dtype=object), "None"),
    (np.array([0, "a", 1, 1, 0], dtype=object), "comparable"),
])
def test_group_errors_speak_of_groups(groups, needle):
    X = np.arange(10.0).reshape(5, 2)
    with pytest.raises(ParameterError) as info:
        samplegen.holdout(X, 0.5, 1, by_groups=groups)
    message = str(info.value)
    assert needle in message and "group" in message
    assert "label" not in message and "class" not in message


def test_one_row_is_singular():
    X = np.arange(2.0).reshape(1, 2)
    with pytest.raises(ParameterError) as info:
        samplegen.holdout(X, 0.5, 1)
    assert "of 1 row " in str(info.value)
