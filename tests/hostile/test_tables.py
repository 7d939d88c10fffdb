"""Hostile tests of the sampling commands on a user's table (``jobs/tables.py``):
bad, damaged and odd tables, bad options, damaged outputs, kills.

Every bad input is one line on stderr, exit status 2, nothing on stdout
and nothing written; a damaged sample file is found by ``info``.
"""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from ..conftest import run_cli

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")


def _refused(capsys, tmp_path, *argv, needles=(), command=("holdout",),
             options=("--ratio", "0.5", "--seed", "1")):
    dest = tmp_path / "out"
    code, out, err = run_cli(capsys, *command, *map(str, argv), str(dest), *options)
    assert code == 2, err
    assert out == "" and err.count("\n") == 1 and err.startswith("samplegen: error: "), err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in err, (needle, err)
    assert not dest.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp")]
    return err


def _csv(tmp_path, text, name="t.csv"):
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


@pytest.mark.parametrize("text, needles", [
    ("a,b\n1,2\n3\n", ["t.csv"]),                                  # ragged
    ("a,b\n", ["no data rows"]),                                   # header only
    ("", ["empty"]),
    ("a,a\n1,2\n", ["'a' more than once"]),                        # repeated name
    (b"a,b\n1,\xff\xfe\n2,x\n3,y\n", ["column 'b'", "UTF-8"]),      # not UTF-8 in a text column
    ('a,b\n1,x\n1,"unterminated\n2,3\n', ["column 'b'", "quote"]),  # an open quote
])
def test_bad_csv_tables_are_one_line(tmp_path, capsys, text, needles):
    _refused(capsys, tmp_path, _csv(tmp_path, text), needles=needles)


def test_missing_and_unsupported_inputs(tmp_path, capsys):
    _refused(capsys, tmp_path, tmp_path / "nope.csv", needles=["not found"])
    _refused(capsys, tmp_path, _csv(tmp_path, "x", "t.xlsx"), needles=["matrix"])
    (tmp_path / "empty").mkdir()
    _refused(capsys, tmp_path, tmp_path / "empty", needles=["no Parquet files", "_matrix.json"])


def test_damaged_and_truncated_parquet_is_one_line_naming_the_file(tmp_path, capsys):
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"x": np.arange(5000.0), "s": [f"v{i}" for i in range(5000)]}), src,
                   write_page_checksum=True)
    data = bytearray(src.read_bytes())
    flipped = tmp_path / "flip.parquet"
    middle = len(data) // 3
    data[middle:middle + 64] = bytes(b ^ 0x5A for b in data[middle:middle + 64])
    flipped.write_bytes(bytes(data))
    _refused(capsys, tmp_path, flipped, needles=["flip.parquet"])
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(src.read_bytes()[:-100])
    _refused(capsys, tmp_path, cut, needles=["cut.parquet"])


def test_a_dataset_whose_files_disagree_is_refused(tmp_path, capsys):
    root = tmp_path / "ds"
    root.mkdir()
    pq.write_table(pa.table({"x": [1.0, 2.0]}), root / "a.parquet")
    pq.write_table(pa.table({"x": ["one", "two"]}), root / "b.parquet")
    _refused(capsys, tmp_path, root, needles=["b.parquet", "differ"])


@pytest.mark.parametrize("option, needles", [
    (("--stratify", "nope"), ["no column 'nope'", "columns: a, b, lab"]),
    (("--stratify", "lab"), ["label 'lab'", "row 1"]),               # a missing label
    (("--groups", "b"), ["group column 'b'", "row 2"]),              # NaN group
    (("--format", "npy"), ["--format npy"]),
    (("--runner", "hadoop"), ["--runner hadoop", "import"]),
])
def test_bad_options_on_a_table(tmp_path, capsys, option, needles):
    src = _csv(tmp_path, "a,b,lab\n1,2,x\n3,4,\n5,,y\n7,8,x\n")
    _refused(capsys, tmp_path, src, *option, needles=needles)


def test_weights_from_a_text_column_are_refused(tmp_path, capsys):
    src = _csv(tmp_path, "a,w\n1,x\n2,y\n")
    _refused(capsys, tmp_path, src, command=("weighted",),
             options=("--weights", "w", "--size", "1", "--seed", "1"), needles=["weights"])


def test_format_on_a_matrix_and_a_dest_inside_the_dataset_are_refused(tmp_path, capsys):
    code, _, err = run_cli(capsys, "make-matrix", str(tmp_path / "m"), "--rows", "10", "--cols",
                           "2", "--block-size", "4")
    assert code == 0, err
    _refused(capsys, tmp_path, tmp_path / "m", "--format", "csv", needles=["--format"])
    root = tmp_path / "ds"
    root.mkdir()
    pq.write_table(pa.table({"x": [1.0, 2.0, 3.0]}), root / "a.parquet")
    code, _, err = run_cli(capsys, "holdout", str(root), str(root / "out"), "--ratio", "0.5",
                           "--seed", "1")
    assert code == 2 and "overlaps" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in root.iterdir()) == ["a.parquet"]


def test_a_damaged_sample_file_is_found_by_info(tmp_path, capsys):
    src = _csv(tmp_path, "a,b\n" + "".join(f"{i},s{i}\n" for i in range(50)))
    code, _, err = run_cli(capsys, "holdout", str(src), str(tmp_path / "o"), "--ratio", "0.5",
                           "--seed", "1")
    assert code == 0, err
    target = tmp_path / "o" / "test-0.csv"
    data = bytearray(target.read_bytes())
    data[10] ^= 1
    target.write_bytes(bytes(data))
    code, out, err = run_cli(capsys, "info", str(tmp_path / "o"))
    assert code == 2 and out == "" and "test-0.csv" in err and err.count("\n") == 1, err
    target.unlink()
    code, out, err = run_cli(capsys, "info", str(tmp_path / "o"))
    assert code == 2 and "missing" in err, err


@pytest.mark.slow
def test_a_killed_table_run_leaves_nothing_and_a_rerun_is_the_same(tmp_path):
    """SIGKILL at seeded moments of a table run: DEST never exists half
    written; the next run removes the dead run's staging and writes the
    same bytes as an uninterrupted run."""
    rng = np.random.default_rng(0)
    n = 200_000
    pd.DataFrame({"x": rng.normal(size=n), "s": rng.choice(["a", "b"], n)}).to_csv(
        tmp_path / "t.csv", index=False)
    cmd = [sys.executable, "-m", "samplegen", "bootstrap", str(tmp_path / "t.csv"), None,
           "--samples", "3", "--seed", "4", "--format", "parquet", "-q"]
    whole = tmp_path / "whole"
    subprocess.run(cmd[:5] + [str(whole)] + cmd[6:], check=True, timeout=300)
    for k, delay in enumerate(np.random.default_rng(1).uniform(0.3, 1.5, 3)):
        dest = tmp_path / f"k{k}"
        proc = subprocess.Popen(cmd[:5] + [str(dest)] + cmd[6:])
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        assert not dest.exists() or (dest / "_SUCCESS").exists()
        subprocess.run(cmd[:5] + [str(dest)] + cmd[6:] + ["--overwrite"], check=True, timeout=300)
        leftovers = [p for p in os.listdir(tmp_path) if p.startswith(f".k{k}.tmp")]
        assert not leftovers, leftovers
        for name in ("sample-0", "sample-1", "sample-2"):
            assert (dest / f"{name}.parquet").read_bytes() == \
                (whole / f"{name}.parquet").read_bytes()


def test_a_streamed_csv_whose_later_rows_change_type_is_one_line(tmp_path, capsys, monkeypatch):
    """Streamed past its memory budget, a CSV's columns take the types of its
    first block: a later value of another type is one error naming the file,
    nothing written."""
    from samplegen.jobs import tables
    monkeypatch.setattr(tables, "CSV_BLOCK_BYTES", 1024)
    rows = "".join(f"{i},{i}\n" for i in range(70_000))     # 0.9 MB: past 1 MiB in memory
    big = _csv(tmp_path, "a,b\n" + rows + "x,1\n", "big.csv")
    _refused(capsys, tmp_path, big, "--memory-mib", "1", needles=["big.csv", "int64"])
