"""Hostile use of StreamSample and StratifiedStreamSample (samplegen.tbs.rows),
the in-memory time-biased samples for retraining: bad batches (wrong schema,
missing key or class column, missing labels, duplicate keys, times that do not
increase), erasure requests of the wrong type, merges with copies of oneself,
damaged, truncated and missing files of a saved sample, saves over files and
foreign directories, and concurrent and killed saves to one path.  Each test
is named after what it protects."""
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pandas as pd
import pytest

from samplegen.tbs import (
    RTBS,
    TTBS,
    Exponential,
    SlidingWindow,
    StratifiedStreamSample,
    StreamSample,
    TBSError,
)
from samplegen.tbs.errors import TBSInputError, TBSOutputError
from samplegen.udfs.errors import InputError, OutputError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _rtbs(n=100, seed=1):
    return RTBS(n, Exponential(0.2), seed=seed)


def _window(n=1000):
    """A sampler whose sample is every row while fewer than n came."""
    return SlidingWindow(n)


def _frame(first, size):
    ids = np.arange(first, first + size)
    return pd.DataFrame({"id": ids, "name": [f"r{i}" for i in ids], "x": ids * 0.5})


def _fed(batches=4, size=30, n=None, seed=1, key="id"):
    """A stream sample of ``batches`` batches of ``size`` rows: R-TBS of size
    ``n``, or (no ``n``) a window that holds every row."""
    ss = StreamSample(_window() if n is None else _rtbs(n, seed), key=key)
    for k in range(batches):
        ss.update(_frame(k * size, size), time=k + 1.0)
    return ss


def _ids(ss):
    return sorted(ss.sample()["id"].tolist())


def _one_line(exc):
    assert "\n" not in str(exc)
    return str(exc)


# -- erasure: keys matched by value ----------------------------------------------------------
def test_erasure_never_casts_a_key_to_the_key_columns_type():
    # An integer key column holds 0..29.  2.9 and '1' equal no key (they were
    # cast to 2 and 1 before); 2.0 equals 2; NaN, None and NaT equal nothing.
    ss = _fed(batches=1)
    assert ss.remove([2.9]) == 0
    assert ss.remove(["1"]) == 0
    assert ss.remove([float("nan"), None, pd.NaT, pd.NA]) == 0
    assert ss.remove([b"3", True]) == 0
    assert _ids(ss) == list(range(30))
    assert ss.remove([2.0, np.int8(5), np.float32(7.0)]) == 3
    assert _ids(ss) == [i for i in range(30) if i not in (2, 5, 7)]


def test_erasure_in_a_string_column_matches_only_strings():
    ss = StreamSample(_window(), key="name")
    ss.update(pd.DataFrame({"name": ["1", "2", "x"], "v": [1, 2, 3]}), time=1.0)
    assert ss.remove([1, 2.0]) == 0
    assert ss.remove(["2"]) == 1
    assert sorted(ss.sample()["name"]) == ["1", "x"]


def test_erasure_of_large_integer_keys_is_exact():
    # 2**53 + 1 is not a float; a key column with missing values must not be
    # compared as floats (2**53 would then erase 2**53 + 1).
    big = 2 ** 53
    frame = pd.DataFrame({"id": pd.array([big + 1, None, 7], dtype="Int64"), "v": [1, 2, 3]})
    ss = StreamSample(_rtbs(), key="id")
    ss.update(frame, time=1.0)
    assert ss.remove([big, float(big)]) == 0
    assert ss.remove([big + 1]) == 1
    pa = pytest.importorskip("pyarrow")
    arrow = StreamSample(_rtbs(), key="id")
    arrow.update(pa.table({"id": pa.array([big + 1, None, 7], type=pa.int64()),
                           "v": [1, 2, 3]}), time=1.0)
    assert arrow.remove([big]) == 0
    assert arrow.remove([big + 1, 7]) == 2


def test_erasure_requests_that_are_not_lists_are_refused():
    ss = _fed(batches=1)
    for bad in ("r1", 5, b"x"):
        with pytest.raises(TBSError, match="keys must be a list of key values") as info:
            ss.remove(bad)
        _one_line(info.value)
    with pytest.raises(TBSError, match="unhashable"):
        ss.remove([[1, 2]])
    assert _ids(ss) == list(range(30))


def test_duplicate_keys_within_and_across_batches_are_all_erased():
    # A key identifies whose rows they are, not one row: erasing it erases
    # every stored row with that key, in any batch.
    ss = StreamSample(_window(), key="user")
    ss.update(pd.DataFrame({"user": ["a", "b", "a"], "v": [1, 2, 3]}), time=1.0)
    ss.update(pd.DataFrame({"user": ["a", "c"], "v": [4, 5]}), time=2.0)
    assert ss.remove(["a"]) == 3
    assert sorted(ss.sample()["v"]) == [2, 5]


# -- bad batches ----------------------------------------------------------------------------
def test_an_empty_first_batch_fixes_no_column_types():
    # An empty DataFrame's columns are float64 or object whatever the data
    # will be; the first batch with rows fixes the types.
    for empty in (pd.DataFrame({"id": [], "name": [], "x": []}), pd.DataFrame()):
        ss = StreamSample(_window(), key="id")
        ss.update(empty, time=1.0)
        assert len(ss.sample()) == 0
        ss.update(_frame(0, 5), time=2.0)
        ss.update(_frame(5, 5), time=3.0)
        got = ss.sample()
        assert got["id"].tolist() == list(range(10))
        assert got.dtypes.to_dict() == _frame(0, 1).dtypes.to_dict()
    pa = pytest.importorskip("pyarrow")
    arrow = StreamSample(_window(), key="id")
    arrow.update(pa.table({"id": pa.array([], type=pa.float64())}), time=1.0)
    arrow.update(pa.table({"id": [1, 2]}), time=2.0)
    assert arrow.sample().column("id").to_pylist() == [1, 2]
    records = StreamSample(_window())
    records.update(np.array([]), time=1.0)          # float64, no items
    records.update(np.arange(4), time=2.0)
    assert records.sample().tolist() == [0, 1, 2, 3]


def test_an_empty_batch_with_other_column_names_is_refused():
    ss = _fed(batches=1)
    with pytest.raises(TBSError, match="differ from the first batch's"):
        ss.update(pd.DataFrame({"id": [], "other": []}), time=2.0)
    ss.update(_frame(100, 0), time=2.0)               # the same names, no rows: fine
    assert ss.rows_seen == 30


@pytest.mark.parametrize("case", ["other columns", "other types", "missing key", "time back",
                                  "same time", "nan time", "inf time", "other table type",
                                  "2-d array", "list"])
def test_bad_batches_are_refused_and_change_nothing(case):
    ss = _fed(batches=2)
    before, seen, t = ss.sample(), ss.rows_seen, ss.time
    bad = {
        "other columns": lambda: ss.update(_frame(60, 5).drop(columns="x"), time=9.0),
        "other types": lambda: ss.update(_frame(60, 5).astype({"x": "float32"}), time=9.0),
        "missing key": lambda: ss.update(_frame(60, 5).drop(columns="id"), time=9.0),
        "time back": lambda: ss.update(_frame(60, 5), time=1.5),
        "same time": lambda: ss.update(_frame(60, 5), time=2.0),
        "nan time": lambda: ss.update(_frame(60, 5), time=float("nan")),
        "inf time": lambda: ss.update(_frame(60, 5), time=float("inf")),
        "other table type": lambda: ss.update(np.arange(3), time=9.0),
        "2-d array": lambda: ss.update(np.zeros((2, 2)), time=9.0),
        "list": lambda: ss.update([1, 2], time=9.0),
    }[case]
    with pytest.raises(TBSError) as info:
        bad()
    _one_line(info.value)
    assert ss.rows_seen == seen and ss.time == t
    pd.testing.assert_frame_equal(ss.sample(), before)
    ss.update(_frame(60, 5), time=9.0)                # and it goes on
    assert ss.rows_seen == seen + 5


# -- strata: missing labels ------------------------------------------------------------------
def _stratified(budget=10):
    return StratifiedStreamSample(lambda n, seed: _rtbs(n, seed), budget, by="label", seed=3)


@pytest.mark.parametrize("labels", [
    [1.0, float("nan"), 2.0, float("nan")],
    ["a", None, "b", None],
    pd.array(["a", pd.NA, "b", pd.NA], dtype="string"),
    pd.Categorical(["a", None, "b", None]),
    [pd.Timestamp("2026-01-01"), pd.NaT, pd.Timestamp("2026-01-02"), pd.NaT],
], ids=["nan", "none", "na", "categorical", "nat"])
def test_stratified_refuses_missing_labels_and_changes_nothing(labels):
    # Every NaN label was a class of its own (NaN != NaN): phantom classes
    # took the budget and their rows vanished.
    s = _stratified()
    s.update(pd.DataFrame({"label": pd.Series(labels)[[0, 2]].tolist() * 2,
                           "id": [0, 1, 2, 3]}).astype({"label": pd.Series(labels).dtype}),
             time=1.0)
    strata, sizes = list(s.strata), s.sizes()
    with pytest.raises(TBSError, match="class column 'label' has no label in 2 of the batch's "
                                       "4 rows") as info:
        s.update(pd.DataFrame({"label": labels, "id": [4, 5, 6, 7]}), time=2.0)
    _one_line(info.value)
    assert list(s.strata) == strata and s.sizes() == sizes and len(strata) == 2
    assert [x.sampler.n for x in s.strata.values()] == [5, 5]
    assert all(x.time == 1.0 for x in s.strata.values())


def test_stratified_refuses_missing_labels_of_arrow_tables_and_records():
    pa = pytest.importorskip("pyarrow")
    s = _stratified()
    with pytest.raises(TBSError, match="no label in 2 of"):
        s.update(pa.table({"label": pa.array([1.0, None, float("nan"), 2.0]),
                           "id": [0, 1, 2, 3]}), time=1.0)
    assert not s.strata
    records = np.zeros(3, dtype=[("label", np.float64), ("id", np.int64)])
    records["label"] = [1.0, np.nan, 2.0]
    with pytest.raises(TBSError, match="no label in 1 of"):
        s.update(records, time=1.0)
    assert not s.strata


def test_a_stratified_batch_refused_for_its_time_or_columns_resizes_no_class():
    # A new class and a bad time (or a missing key column): the other
    # classes were resized to their new share before the batch was refused.
    s = StratifiedStreamSample(lambda n, seed: _rtbs(n, seed), 10, by="label", seed=3, key="id")
    s.update(pd.DataFrame({"label": ["a"] * 20, "id": range(20)}), time=5.0)
    for bad, message in [
        (lambda: s.update(pd.DataFrame({"label": ["b"] * 3, "id": range(3)}), time=4.0),
         "time must increase"),
        (lambda: s.update(pd.DataFrame({"label": ["b"] * 3, "no": range(3)}), time=6.0),
         "key column 'id' is not in the batch"),
        (lambda: s.update(pd.DataFrame({"label": ["b"] * 3, "id": [0.5] * 3}), time=6.0),
         "differ from the first"),
    ]:
        with pytest.raises(TBSError, match=message):
            bad()
        assert list(s.strata) == ["a"] and s.strata["a"].sampler.n == 10
        assert s.sizes() == {"a": 10}


# -- merge: identities -----------------------------------------------------------------------
def test_merge_refuses_a_saved_loaded_and_updated_copy_of_itself(tmp_path):
    a = _fed(batches=3, n=40)
    a.save(tmp_path / "a")
    copy_a = StreamSample.load(tmp_path / "a", RTBS)
    assert copy_a.identity == a.identity
    copy_a.update(_frame(1000, 10), time=10.0)
    held = a.rows_held
    for other in (copy_a, a, copy.deepcopy(a)):
        with pytest.raises(TBSError, match="share an identity") as info:
            a.merge(other)
        _one_line(info.value)
    assert a.rows_held == held and a.rows_seen == 90


def test_merge_refuses_copies_of_a_part_and_takes_independent_samples(tmp_path):
    a = _fed(batches=2, n=40, seed=1)
    b = _fed(batches=2, n=40, seed=2)       # the same stream, built independently
    assert a.identity != b.identity
    b.save(tmp_path / "b")
    mine = a.identity
    a.merge(b)                              # allowed: another sample's identity
    assert a.identity == mine | b.identity and len(a.identity) == 2
    with pytest.raises(TBSError, match="share an identity"):
        a.merge(StreamSample.load(tmp_path / "b", RTBS))
    a.save(tmp_path / "ab")
    with pytest.raises(TBSError, match="share an identity"):
        b.merge(StreamSample.load(tmp_path / "ab", RTBS))
    c = _fed(batches=1, n=40, seed=3)
    with pytest.raises(TBSError, match="share an identity"):
        c.merge(a).merge(b)


# -- saves: paths ----------------------------------------------------------------------------
def test_save_refuses_to_replace_a_file_and_leaves_nothing_behind(tmp_path):
    target = tmp_path / "model.bin"
    target.write_bytes(b"precious")
    ss = _fed(batches=1)
    with pytest.raises(TBSError, match="model.bin: it is a file") as info:
        ss.save(target)
    _one_line(info.value)
    assert isinstance(info.value, OutputError)
    assert target.read_bytes() == b"precious"
    assert sorted(os.listdir(tmp_path)) == ["model.bin"]


def test_save_refuses_to_replace_a_directory_that_is_not_a_saved_sample(tmp_path):
    other = tmp_path / "data"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    with pytest.raises(TBSOutputError, match="holds no saved stream sample"):
        _fed(batches=1).save(other)
    assert (other / "keep.txt").read_text() == "mine"
    assert sorted(os.listdir(tmp_path)) == ["data"]
    (tmp_path / "empty").mkdir()
    _fed(batches=1).save(tmp_path / "empty")        # an empty directory is taken
    assert _ids(StreamSample.load(tmp_path / "empty", SlidingWindow)) == list(range(30))


def test_save_to_a_path_with_a_trailing_slash(tmp_path):
    ss = _fed(batches=2)
    ss.save(f"{tmp_path}/sample/")
    ss.save(f"{tmp_path}/sample/")                  # over itself too
    assert sorted(os.listdir(tmp_path)) == ["sample"]
    assert _ids(StreamSample.load(f"{tmp_path}/sample/", SlidingWindow)) == list(range(60))


def test_save_to_a_relative_path_with_a_trailing_slash(tmp_path, monkeypatch):
    """docs/TBS.md's ``stream.save("sample/")``: the temporary directory goes
    beside ``sample``, never inside it."""
    monkeypatch.chdir(tmp_path)
    ss = _fed(batches=2)
    for path in ("sample/", "sample//", "./sample/"):
        ss.save(path)
        assert sorted(os.listdir(tmp_path)) == ["sample"]
        assert not [name for name in os.listdir(tmp_path / "sample") if name.startswith(".")]
    assert _ids(StreamSample.load("sample/", SlidingWindow)) == list(range(60))


def test_save_over_an_earlier_save_leaves_no_leftovers(tmp_path):
    ss = _fed(batches=1)
    for k in range(3):
        ss.update(_frame(100 + k * 10, 10), time=10.0 + k)
        ss.save(tmp_path / "s")
        assert sorted(os.listdir(tmp_path)) == ["s"]
    assert _ids(StreamSample.load(tmp_path / "s", SlidingWindow)) == _ids(ss)


# -- saves: damage ---------------------------------------------------------------------------
def _saved(tmp_path, kind="pandas"):
    ss = StreamSample(_rtbs(40), key="id" if kind == "pandas" else None)
    for k in range(5):
        rows = _frame(30 * k, 30) if kind == "pandas" else np.arange(30 * k, 30 * k + 30)
        ss.update(rows, time=k + 1.0)
    ss.save(tmp_path / "s")
    return tmp_path / "s", ss


def _flip(path):
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _drop_one_id(path):
    with np.load(path) as z:
        arrays = {name: z[name] for name in z.files}
    arrays["ids"] = arrays["ids"][1:]
    np.savez(path, **arrays)


@pytest.mark.parametrize("kind", ["pandas", "numpy"])
@pytest.mark.parametrize("damage", ["flip", "truncate", "remove", "empty"])
@pytest.mark.parametrize("file", ["stream-sample.json", "sampler.npz", "rows.npz", "rows"])
def test_a_damaged_save_is_one_error_naming_the_file(tmp_path, kind, damage, file):
    path, _ = _saved(tmp_path, kind)
    if file == "rows":
        file = "rows.parquet" if kind == "pandas" else "rows.npy"
    victim = path / file
    {"flip": _flip, "truncate": _truncate, "remove": os.remove,
     "empty": lambda p: p.write_bytes(b"")}[damage](victim)
    with pytest.raises(TBSInputError) as info:
        StreamSample.load(path, RTBS)
    assert str(victim) in _one_line(info.value)
    assert isinstance(info.value, InputError)


def test_a_save_with_one_row_id_removed_does_not_load_as_another_sample(tmp_path):
    path, _ = _saved(tmp_path)
    _drop_one_id(path / "rows.npz")
    with pytest.raises(TBSInputError, match="rows.npz is damaged"):
        StreamSample.load(path, RTBS)


def test_a_save_with_a_rewritten_manifest_is_refused(tmp_path):
    path, _ = _saved(tmp_path)
    info = json.loads((path / "stream-sample.json").read_text())
    info["next"] += 1                                   # valid JSON, wrong content
    (path / "stream-sample.json").write_text(json.dumps(info))
    with pytest.raises(TBSInputError, match="stream-sample.json is damaged"):
        StreamSample.load(path, RTBS)


def _as_first_format(path):
    """Rewrite a save as the first format wrote it: no checksums, no identity."""
    info = json.loads((path / "stream-sample.json").read_text())
    for name in ("files", "identity", "sha256", "typed"):
        info.pop(name)
    info["format"] = "samplegen-stream-sample/1"
    (path / "stream-sample.json").write_text(json.dumps(info))


def test_a_save_of_the_first_format_loads_and_is_checked_for_consistency(tmp_path):
    path, ss = _saved(tmp_path)
    _as_first_format(path)
    back = StreamSample.load(path, RTBS)
    pd.testing.assert_frame_equal(back.sample(with_probabilities=True),
                                  ss.sample(with_probabilities=True))
    assert back.identity == StreamSample.load(path, RTBS).identity != ss.identity
    with pytest.raises(TBSError, match="share an identity"):
        back.merge(StreamSample.load(path, RTBS))
    _drop_one_id(path / "rows.npz")
    with pytest.raises(TBSInputError, match="rows.npz is damaged: its rows are not the "
                                            "sampler's"):
        StreamSample.load(path, RTBS)


def test_loading_what_is_not_a_saved_sample_names_it(tmp_path):
    with pytest.raises(TBSInputError, match="does not exist"):
        StreamSample.load(tmp_path / "nothing", RTBS)
    (tmp_path / "f").write_text("x")
    with pytest.raises(TBSInputError, match="is a file"):
        StreamSample.load(tmp_path / "f", RTBS)
    (tmp_path / "d").mkdir()
    with pytest.raises(TBSInputError, match="stream-sample.json is missing"):
        StreamSample.load(tmp_path / "d", RTBS)
    path, _ = _saved(tmp_path)
    with pytest.raises(TBSError, match="holds the sample of a RTBS sampler, not of TTBS"):
        StreamSample.load(path, TTBS)


# -- saves: concurrency and kills ------------------------------------------------------------
def test_concurrent_saves_to_one_path_leave_one_whole_sample(tmp_path):
    samples = [_fed(batches=2, seed=s) for s in (1, 2)]
    samples[1].update(_frame(500, 7), time=9.0)
    path, errors = tmp_path / "s", []

    def saver(ss):
        try:
            for _ in range(15):
                ss.save(path)
        except BaseException as exc:             # reported below
            errors.append(exc)
    threads = [threading.Thread(target=saver, args=(ss,)) for ss in samples]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors
    assert sorted(os.listdir(tmp_path)) == ["s"]
    back = StreamSample.load(path, SlidingWindow)
    assert back.identity in (samples[0].identity, samples[1].identity)
    assert _ids(back) in (_ids(samples[0]), _ids(samples[1]))


_SAVER = """
import sys
import numpy as np
from samplegen.tbs import RTBS, Exponential, StreamSample
ss = StreamSample(RTBS(2000, Exponential(0.1), seed=1))
k = 0
while True:
    k += 1
    ss.update(np.arange(k * 1000, k * 1000 + 1000), time=float(k))
    ss.save(sys.argv[1])
    if k == 2:
        print("saving", flush=True)
"""


def test_a_save_killed_at_any_moment_leaves_a_whole_sample(tmp_path):
    path = tmp_path / "s"
    proc = subprocess.Popen([sys.executable, "-c", _SAVER, str(path)], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline() == "saving\n"
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    back = StreamSample.load(path, RTBS)            # the old or the new copy, whole
    assert back.rows_held == back.sampler.footprint > 0
    shutil.rmtree(path)




def test_stored_samples_are_read_back_on_one_thread(tmp_path, monkeypatch):
    """A threaded Arrow read in a process that has pandas can abort that
    process at its exit ("terminate called without an active exception",
    status -6, after the work is done: the documented StreamSample example
    did in 7 of 30 runs with pyarrow 26).  The stored-sample readers that run
    in users' processes therefore read on one thread: every Parquet read of
    ``StreamSample.load`` (pandas and Arrow rows) and ``read_run`` asks for
    that.  (The abort is a race at exit that fresh processes under the test
    runner did not show even with the bug in place, so the guard is checked
    where it is applied.)"""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from samplegen import cli, read_run
    calls = []
    real = pq.read_table

    def spy(*args, **kwargs):
        calls.append(kwargs.get("use_threads", True))
        return real(*args, **kwargs)

    frames = pd.DataFrame({"user": [f"u{i}" for i in range(300)], "x": np.arange(300.0)})
    for kind, batch in (("pandas", frames), ("arrow", pa.Table.from_pandas(frames))):
        stream = StreamSample(_rtbs(), key="user")
        stream.update(batch, time=1)
        stream.save(str(tmp_path / kind))
    frames.to_parquet(tmp_path / "t.parquet", index=False)
    assert cli.main(["-q", "holdout", str(tmp_path / "t.parquet"), str(tmp_path / "run"),
                     "--ratio", "0.8", "--seed", "1"]) in (0, None)
    monkeypatch.setattr(pq, "read_table", spy)
    assert len(StreamSample.load(str(tmp_path / "pandas"), RTBS).sample()) == 100
    assert len(StreamSample.load(str(tmp_path / "arrow"), RTBS).sample()) == 100
    assert len(read_run(str(tmp_path / "run"))["test-0"]) == 60
    assert calls == [False, False, False], calls
