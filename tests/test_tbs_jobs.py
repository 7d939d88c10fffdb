"""Micro-batch D-R-TBS / D-T-TBS jobs (``samplegen tbs run/sample/status``),
in-process runner: the numbers of the in-memory samplers, the deltas, the
commit protocol on reruns, materialization, the lock, and every bad input."""
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from samplegen.tbs import RTBS, TTBS, Exponential, Polynomial
from samplegen.tbs.stream import current_sample, run, status
from tests.conftest import tbs_main as main
from tests.conftest import tree_digest
from tests.tbs_jobs_util import (
    KEYS,
    apply_delta,
    batch_frame,
    delta,
    key_set,
    sort_by_key,
    write_batch,
    write_batches,
)

SIZES = [40, 0, 95, 33, 120, 7, 64, 80, 51, 0, 90, 70]
TIMES = [1.0, 2.0, 2.5, 4.0, 6.0, 6.2, 7.0, 9.0, 10.0, 11.5, 12.0, 14.0]

ALGORITHMS = {
    "rtbs-exp": dict(algorithm="rtbs", decay="exp", size=150, **{"lambda": 0.15}),
    "rtbs-poly": dict(algorithm="rtbs", decay="poly", size=100, power=2.0, shift=1.0, delta1=0.2,
                      delta2=3.0),
    "rtbs-poly-cap": dict(algorithm="rtbs", decay="poly", size=100, power=2.0, shift=1.0,
                          delta1=0.2, delta2=3.0, max_weight=200.0),
    "ttbs-exp": dict(algorithm="ttbs", decay="exp", size=150, mean_batch_size=60.0,
                     **{"lambda": 0.15}),
    "ttbs-poly": dict(algorithm="ttbs", decay="poly", size=100, mean_batch_size=60.0),
}


@pytest.fixture(autouse=True)
def _no_fsync(monkeypatch, request):
    """fsync costs 3-20 ms per file on this shared disk and matters only for
    power loss; the tests that need it say so (``fsync`` in their name)."""
    if "fsync" not in request.node.name:
        monkeypatch.setenv("SAMPLEGEN_TBS_FSYNC", "0")


def in_memory(name):
    p = ALGORITHMS[name]
    decay = (Exponential(p["lambda"]) if p["decay"] == "exp"
             else Polynomial(p.get("power", 2.0), shift=p.get("shift", 10.0)))
    if p["algorithm"] == "ttbs":
        return TTBS(p["size"], decay, p["mean_batch_size"], seed=0)
    if p["decay"] == "exp":
        return RTBS(p["size"], decay, seed=0)
    return RTBS(p["size"], decay, seed=0, delta1=p["delta1"], delta2=p["delta2"],
                max_weight=p.get("max_weight", p["size"]))


def params(name, **extra):
    out = dict(ALGORITHMS[name], seed=7, partitions=3, compact_every=4, keep_deltas=20)
    out.update(extra)
    return out


@pytest.mark.parametrize("name,text", [(name, True) for name in ALGORITHMS]
                         + [("rtbs-poly", False), ("rtbs-poly-cap", False)])
@pytest.mark.slow
def test_batch_by_batch_matches_the_in_memory_sampler(tmp_path, monkeypatch, name, text):
    """Batches arrive one at a time (a run after each): after every batch, W_k,
    rho_k and C_k equal the in-memory sampler's on the same batch sizes and
    times (they do not depend on the random choices); |S_k| respects n (R-TBS:
    floor or ceil of C_k for exponential decay); the sampled rows carry their
    batch's data unchanged; and the delta turns S_{k-1} into S_k.  Rows that
    re-enter the sample, and the compactions, read the sources by offset when
    every column is numeric (``text`` False), by decoding otherwise."""
    import samplegen.tbs.stream.task as task_module
    by_offset = []
    read_points = task_module.read_points
    monkeypatch.setattr(task_module, "read_points",
                        lambda *a: by_offset.append(a[2].size) or read_points(*a))
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    ref = in_memory(name)
    frames = {}
    previous = None
    for i, (size, t) in enumerate(zip(SIZES, TIMES)):
        k = i + 1
        frame = None if text else batch_frame(k, size).drop(columns=["tag"])
        frames[k] = write_batch(batches, k, size, time=t, as_dir=k % 4 == 0, files=2, row_group=7,
                                frame=frame)
        run(batches, state, params(name))
        ref.update(np.arange(size), time=t)
        info = status(state)
        assert info["batches"] == k and info["last_batch"] == k and info["time"] == t
        assert info["total_weight"] == pytest.approx(ref.total_weight, rel=1e-12, abs=1e-12)
        sample = current_sample(state)
        assert len(sample) == info["sample_size"]
        assert sample.duplicated(KEYS).sum() == 0
        if ALGORITHMS[name]["algorithm"] == "rtbs":
            assert info["rho"] == pytest.approx(ref.rho, rel=1e-12)
            assert info["sample_weight"] == pytest.approx(ref.sample_weight, rel=1e-12)
            assert len(sample) <= ALGORITHMS[name]["size"]
            if ALGORITHMS[name]["decay"] == "exp":
                c = info["sample_weight"]
                assert len(sample) in (np.floor(c), np.ceil(c))
                assert info["items_stored"] <= ALGORITHMS[name]["size"] + 1
        else:
            assert info["sample_weight"] == len(sample) == info["items_stored"]
        for j in set(sample["_sg_batch"]):
            rows = sample[sample["_sg_batch"] == j]
            original = frames[j].iloc[rows["_sg_row"].to_numpy()].reset_index(drop=True)
            pd.testing.assert_frame_equal(original, rows.drop(columns=KEYS).reset_index(drop=True),
                                          check_dtype=False)
        ins, outs = delta(state, k)
        assert (list(ins.columns) == ["id", "x"] + ["tag"] * text + ["w"] + KEYS
                and list(outs.columns) == KEYS)
        replayed = apply_delta(previous, ins, outs)
        assert key_set(replayed) == key_set(sample) and len(replayed) == len(sample)
        previous = replayed
    assert bool(by_offset) != text


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_rerun_is_a_no_op_and_later_batches_equal_one_run_with_fsync(tmp_path, name):
    """A rerun on a finished STATE changes nothing; running on batches 1-5 and
    then again after 6-12 arrived gives the STATE (every byte) of one run over
    1-12, whatever the number of batches per job.  (Durable writes: fsync on.)"""
    b_all, b_part = str(tmp_path / "all"), str(tmp_path / "part")
    write_batches(b_all, SIZES, times=TIMES, dirs=(3, 8))
    write_batches(b_part, SIZES[:5], times=TIMES[:5], dirs=(3,))
    one, two = str(tmp_path / "one"), str(tmp_path / "two")
    run(b_all, one, params(name), options={"batches_per_job": 16})
    digest = tree_digest(one)
    assert main(["run", b_all, one, "-q"]) == 0
    assert tree_digest(one) == digest
    run(b_part, two, params(name), options={"batches_per_job": 2})
    write_batches(b_part, SIZES[5:], start=6, times=TIMES[5:], dirs=(8,))
    run(b_part, two, {}, options={"batches_per_job": 3})
    assert tree_digest(two) == digest
    assert not os.path.exists(os.path.join(one, "_lock"))


def test_state_layout_snapshots_and_delta_retention(tmp_path):
    """Snapshots every compact_every batches; a snapshot's rows marked
    _sg_in_sample are S_s, and S_s plus the later deltas give S_k; deltas are
    kept for keep_deltas batches (and at least since the snapshot); nothing
    else is left behind."""
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, SIZES, times=TIMES)
    run(batches, state, params("rtbs-exp", compact_every=5, keep_deltas=3))
    info = status(state)
    assert info["snapshot"] == 10 and info["deltas_kept"] == [10, 11, 12]
    top = sorted(os.listdir(state))
    assert top == ["commits", "deltas", "snapshots"]
    assert sorted(os.listdir(os.path.join(state, "commits"))) == ["0000000011.json",
                                                                   "0000000012.json"]
    assert sorted(os.listdir(os.path.join(state, "snapshots"))) == ["0000000010"]
    # the previous commit (kept too) still references delta 9
    assert sorted(os.listdir(os.path.join(state, "deltas"))) == [f"{k:010d}"
                                                                  for k in (9, 10, 11, 12)]
    assert [d for d, subdirs, files in os.walk(state) if not subdirs and not files] == []
    from tests.tbs_jobs_util import read_dir
    snap = read_dir(os.path.join(state, "snapshots", "0000000010"))
    current = snap[snap["_sg_in_sample"]].drop(columns=["_sg_in_sample"])
    for k in (11, 12):
        current = apply_delta(current, *delta(state, k))
    assert key_set(current) == key_set(current_sample(state))


def test_sample_formats_and_status(tmp_path, capsys):
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, SIZES[:6])
    assert main(["run", batches, state, "--algorithm", "rtbs", "--decay", "exp", "--lambda", "0.2",
                 "--size", "60", "--seed", "3", "--partitions", "2"]) == 0
    expected = sort_by_key(current_sample(state))
    for ext in ("parquet", "csv", "npy"):
        out = tmp_path / f"s.{ext}"
        assert main(["sample", state, "--to", str(out)]) == 0
        if ext == "parquet":
            got = pd.read_parquet(out, engine="fastparquet")
        elif ext == "csv":
            got = pd.read_csv(out)
        else:
            got = pd.DataFrame(np.load(out, allow_pickle=False))
        got = sort_by_key(got)
        assert list(got.columns) == ["id", "x", "tag", "w"] + KEYS
        assert np.array_equal(got["id"], expected["id"]) and np.allclose(got["x"], expected["x"])
        assert [str(v) for v in got["tag"]] == list(expected["tag"])
    assert main(["sample", state, "--to", str(tmp_path / "nokeys.parquet"), "--no-keys"]) == 0
    nokeys = pd.read_parquet(tmp_path / "nokeys.parquet", engine="fastparquet")
    assert list(nokeys.columns) == ["id", "x", "tag", "w"]
    capsys.readouterr()
    assert main(["status", state, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["batches"] == 6 and info["sample_size"] == len(expected) and info["partitions"] == 2
    assert (info["per_partition"][0]["sampled"] + info["per_partition"][1]["sampled"]
            == len(expected))
    assert main(["status", state]) == 0
    text = capsys.readouterr().out
    for field in ("W_k", "C_k", "rho", "|S_k|", "footprint", "batch-1 .. batch-6"):
        assert field in text


def test_arrival_times_and_batches_still_being_written(tmp_path, capsys):
    """Default time k; the producer's samplegen.time (footer) or _samplegen_time
    (directory); a directory without _SUCCESS / _metadata, or with _temporary,
    is waited for: the run stops before it."""
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batch(batches, 1, 30)
    write_batch(batches, 2, 30, time=7.5)
    write_batch(batches, 3, 30, as_dir=True, files=2)
    with open(os.path.join(batches, "batch-3", "_samplegen_time"), "w") as f:
        f.write("9.25\n")
    write_batch(batches, 4, 30, as_dir=True)
    os.remove(os.path.join(batches, "batch-4", "_SUCCESS"))
    write_batch(batches, 5, 30)
    assert main(["run", batches, state, "--algorithm", "rtbs", "--decay", "exp", "--lambda", "0.1",
                 "--size", "40", "--seed", "1"]) == 0
    assert "batch-4 has no _SUCCESS" in capsys.readouterr().err
    commits = os.path.join(state, "commits")
    commit = json.load(open(os.path.join(commits, sorted(os.listdir(commits))[-1])))
    assert [e[:2] for e in commit["ledger"]] == [[1, 1.0], [2, 7.5], [3, 9.25]]
    os.makedirs(os.path.join(batches, "batch-4", "_temporary"))
    open(os.path.join(batches, "batch-4", "_SUCCESS"), "w").close()
    assert main(["run", batches, state, "-q"]) == 0 and status(state)["batches"] == 3
    os.rmdir(os.path.join(batches, "batch-4", "_temporary"))
    assert main(["run", batches, state, "-q"]) == 2          # batch-4 now complete: time 4 < 9.25
    assert "does not come after 9.25" in capsys.readouterr().err


def test_fsspec_urls(tmp_path):
    """BATCHES and STATE may be any fsspec URL (here the in-memory filesystem)."""
    import fsspec
    fs = fsspec.filesystem("memory")
    local = str(tmp_path / "b")
    write_batches(local, SIZES[:5], dirs=(2,))
    for root, _, files in os.walk(local):
        for name in files:
            full = os.path.join(root, name)
            fs.pipe("/jobs-b/" + os.path.relpath(full, local), open(full, "rb").read())
    try:
        run("memory:///jobs-b", "memory:///jobs-s", params("rtbs-poly"))
        run(local, str(tmp_path / "s"), params("rtbs-poly"))
        a = sort_by_key(current_sample("memory:///jobs-s"))
        b = sort_by_key(current_sample(str(tmp_path / "s")))
        assert a.equals(b) and len(a) == status("memory:///jobs-s")["sample_size"]
    finally:
        fs.rm("/jobs-b", recursive=True)
        fs.rm("/jobs-s", recursive=True)


# ----------------------------------------------------------------------------- the lock

HOLD = """
import sys, time
from samplegen.tbs.stream.storage import Lock, Store
Lock(Store(sys.argv[1])).acquire()
print("locked", flush=True)
time.sleep(60)
"""


def test_a_second_run_is_refused_and_a_dead_runs_lock_is_taken_over(tmp_path, capsys):
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, SIZES[:3])
    run(batches, state, params("rtbs-exp"))
    write_batches(batches, SIZES[3:5], start=4)
    digest = tree_digest(state)
    holder = subprocess.Popen([sys.executable, "-c", HOLD, state], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        capsys.readouterr()
        assert main(["run", batches, state]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"is in use by pid {holder.pid}" in err and "refused" in err
        lock_file = os.path.join(state, "_lock")
        holder.send_signal(signal.SIGKILL)
        holder.wait()
        assert json.load(open(lock_file))["pid"] == holder.pid      # left behind by the dead run
        os.remove(lock_file)
        assert tree_digest(state) == digest
        with open(lock_file, "w") as f:
            json.dump({"pid": holder.pid, "host": "h", "since": "t"}, f)
        assert main(["run", batches, state]) == 0
        assert f"took over the lock of a run that ended without releasing it (pid {holder.pid}" in \
            capsys.readouterr().err
        assert status(state)["batches"] == 5 and not os.path.exists(lock_file)
    finally:
        if holder.poll() is None:
            holder.kill()


# ----------------------------------------------------------------------------- bad input

def _bad_schema(folder):
    write_batches(folder, [20, 20])
    df = batch_frame(3, 20)
    df["x"] = df["x"].astype(np.float32)
    write_batch(folder, 3, 20, frame=df)


def _extra_column(folder):
    write_batches(folder, [20, 20])
    df = batch_frame(3, 20)
    df["extra"] = 1
    write_batch(folder, 3, 20, frame=df)


def _missing_files(folder):
    write_batches(folder, [20, 20])
    os.makedirs(os.path.join(folder, "batch-3"))
    open(os.path.join(folder, "batch-3", "_SUCCESS"), "w").close()


def _corrupt(folder):
    write_batches(folder, [20, 20, 20])
    path = os.path.join(folder, "batch-3.parquet")
    data = open(path, "rb").read()
    open(path, "wb").write(data[: len(data) // 2])


def _garbage(folder):
    write_batches(folder, [20, 20])
    open(os.path.join(folder, "batch-3.parquet"), "wb").write(b"not parquet" * 50)


def _gap(folder):
    write_batches(folder, [20, 20])
    write_batch(folder, 4, 20)


def _backwards(folder):
    write_batches(folder, [20, 20, 20], times=[1.0, 5.0, 3.0])


def _reserved(folder):
    write_batches(folder, [20, 20])
    df = batch_frame(3, 20)
    df["_sg_row"] = 0
    write_batch(folder, 3, 20, frame=df)


BAD_BATCHES = {
    "schema (type)": (_bad_schema,
                      "batch batch-3.parquet: its schema differs from the first batch's"),
    "schema (column)": (_extra_column, "its schema differs from the first batch's"),
    "missing data files": (_missing_files, "batch batch-3: no Parquet data files"),
    "truncated file": (_corrupt, "batch-3.parquet is not a readable Parquet file"),
    "garbage file": (_garbage, "batch-3.parquet is not a readable Parquet file"),
    "gap in k": (_gap, "batch-3 is missing"),
    "time backwards": (_backwards, "arrival time 3.0 does not come after 5.0"),
    "reserved column": (_reserved, "column name '_sg_row' is reserved"),
}

CREATE = ["--algorithm", "rtbs", "--decay", "exp", "--lambda", "0.1", "--size", "30", "--seed", "2"]


@pytest.mark.parametrize("case", list(BAD_BATCHES))
def test_bad_batches_one_line_exit_2_state_untouched(tmp_path, capsys, case):
    """For a new STATE nothing is created; for an existing one (which holds the
    two valid batches before the bad one) not a byte changes."""
    import shutil
    make, message = BAD_BATCHES[case]
    batches = str(tmp_path / "b")
    make(batches)
    fresh = str(tmp_path / "fresh")
    assert main(["run", batches, fresh] + CREATE) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert not os.path.exists(fresh)
    first, state = str(tmp_path / "first"), str(tmp_path / "s")
    os.makedirs(first)
    for k in (1, 2):
        shutil.copy2(os.path.join(batches, f"batch-{k}.parquet"), first)
    assert main(["run", first, state] + CREATE) == 0
    digest = tree_digest(state)
    capsys.readouterr()
    assert main(["run", batches, state]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert tree_digest(state) == digest


BAD_PARAMS = [
    (["--size", "0"], "--size must be an integer >= 1 (the sample size N), got 0"),
    (["--lambda", "-0.1"], "--lambda must be >= 0: exp(-lambda * age) must be non-increasing"),
    (["--decay", "poly", "--power", "-1"], "--power must be > 0"),
    (["--decay", "poly", "--shift", "-2"], "--shift must be >= 0"),
    (["--algorithm", "ttbs", "--lambda", "1", "--mean-batch-size", "5"],
     "mean_batch_size must be >= n * gamma(decay) = 18.96"),
    (["--algorithm", "ttbs", "--lambda", "1", "--size", "40"],
     "mean_batch_size must be >= n * gamma(decay) = 25.28"),
    (["--algorithm", "ttbs", "--decay", "poly", "--power", "0.8"],
     "decay must have a finite total weight"),
    (["--partitions", "0"], "--partitions must be an integer >= 1"),
    (["--decay", "poly", "--lambda", "0.0001"], "consolidation_rate must be >="),
    (["--power", "2"], "--power applies to --decay poly only"),
    (["--algorithm", "ttbs", "--decay", "poly", "--lambda", "0.1"], "--lambda applies to R-TBS"),
    (["--decay", "exp", "--lambda", "nan"], "--lambda must be >= 0"),
]


@pytest.mark.parametrize("extra, message", BAD_PARAMS)
def test_parameters_the_algorithm_cannot_honour(tmp_path, capsys, extra, message):
    """Bad parameters for a new STATE: one line, exit 2, nothing created.
    (Options given twice: the last one counts, so ``extra`` overrides.)"""
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20, 20])
    argv = ["run", batches, state, "--algorithm", "rtbs", "--size", "30", "--seed", "2"]
    if "poly" not in extra:
        argv += ["--decay", "exp", "--lambda", "0.1"]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err
    assert not os.path.exists(state)


@pytest.mark.parametrize("cores", ["0", "-2"])
def test_bad_num_cores_one_line_nothing_created(tmp_path, capsys, cores):
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20, 20])
    assert main(["run", batches, state, "--num-cores", cores] + CREATE) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--num-cores must be an integer >= 1, got {cores}" in err, err
    assert not os.path.exists(state)


def test_parameters_of_an_existing_state_cannot_change(tmp_path, capsys):
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20, 20])
    assert main(["run", batches, state] + CREATE) == 0
    digest = tree_digest(state)
    capsys.readouterr()
    assert main(["run", batches, state, "--size", "31"]) == 2
    assert "STATE was created with --size 30; got 31" in capsys.readouterr().err
    assert main(["run", batches, state, "--size", "30", "--seed", "2", "-q"]) == 0
    assert tree_digest(state) == digest


def test_not_a_state(tmp_path, capsys):
    batches = str(tmp_path / "b")
    write_batches(batches, [20])
    other = tmp_path / "other"
    other.mkdir()
    (other / "file.txt").write_text("x")
    assert main(["run", batches, str(other)] + CREATE) == 2
    assert "is a non-empty directory without a samplegen tbs state" in capsys.readouterr().err
    assert os.listdir(other) == ["file.txt"]
    assert main(["status", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["sample", str(other), "--to", str(tmp_path / "x.csv")]) == 2
    assert "is not a samplegen tbs STATE" in capsys.readouterr().err


def test_partition_bounds_follow_row_groups():
    from samplegen.tbs.stream.batches import partition_bounds
    # enough row groups: every boundary is a row-group start, nearest to p * size / P
    assert partition_bounds([[10, 10, 10], [10, 10, 10]], 3) == [(0, 20), (20, 40), (40, 60)]
    assert partition_bounds([[25, 5, 30, 10, 30]], 4) == [(0, 25), (25, 60), (60, 70), (70, 100)]
    assert partition_bounds([[90, 1, 1, 1, 1]], 2) == [(0, 90), (90, 94)]
    # fewer row groups than partitions: even row ranges
    assert partition_bounds([[10], [7]], 3) == [(0, 5), (5, 11), (11, 17)]
    assert partition_bounds([[]], 2) == [(0, 0), (0, 0)]
    for groups in ([[3] * 7], [[1, 50, 2, 9, 40]], [[0, 0, 5, 0]]):
        b = partition_bounds(groups, 4)
        assert (b[0][0] == 0 and b[-1][1] == sum(groups[0])
                and all(b[i][1] == b[i + 1][0] for i in range(3)))


def _point_frames():
    rng = np.random.default_rng(3)
    n = 1000
    plain = pd.DataFrame({"id": np.arange(n, dtype=np.int64), "x": rng.standard_normal(n),
                          "y": rng.random(n).astype(np.float32),
                          "label": rng.integers(0, 9, n).astype(np.int32),
                          "_sg_batch": np.full(n, 3, dtype=np.int64),
                          "_sg_row": np.arange(n, dtype=np.int64)})
    # (fastparquet: a null)
    with_nan = plain.assign(x=np.where(rng.random(n) < 0.1, np.nan, plain["x"]))
    snapshot = plain.assign(_sg_in_sample=rng.random(n) < 0.5)
    strings = plain.assign(tag=np.array(["a", "bb", "ccc"], dtype=object)[rng.integers(0, 3, n)])
    nulls = plain.assign(tag=pd.array(np.where(rng.random(n) < 0.2, None, "t"), dtype=object))
    stamps = plain.assign(when=pd.Timestamp("2026-01-01") + pd.to_timedelta(np.arange(n), unit="s"))
    small = plain.assign(label=plain["label"].astype(np.int16), flag=rng.random(n) < 0.5)
    return {"plain": (plain, True), "required": (plain, True), "with_nan": (with_nan, False),
            "snapshot": (snapshot, True), "strings": (strings, False), "nulls": (nulls, False),
            "stamps": (stamps, False), "small": (small, False)}


@pytest.mark.parametrize("name", list(_point_frames()))
def test_rows_read_by_offset_equal_the_decoded_rows(tmp_path, name):
    """A few rows of a source file, read by offset where the layout allows it
    (fixed-width PLAIN values without nulls; the layout found on the first
    read is kept with the source) and by decoding the row group otherwise,
    equal the rows of the decoded file, dtypes included; the snapshot's
    _sg_in_sample column is left out."""
    import fastparquet

    from samplegen.tbs.stream.points import layout
    from samplegen.tbs.stream.storage import Store
    from samplegen.tbs.stream.task import IN_SAMPLE, POINT_ROWS, _source_parts, stack
    df, by_offset = _point_frames()[name]
    store = Store(str(tmp_path))
    written = store.write_parquet("src.parquet", df,
                                  object_encoding={"tag": "utf8"} if "tag" in df else {},
                                  row_group_offsets=300, stats=False,
                                  has_nulls=name != "required")
    pf = fastparquet.ParquetFile(store.path("src.parquet"))
    assert [rg.num_rows for rg in pf.row_groups] == [250, 250, 250, 250]
    columns = [c for c in pf.columns if c != IN_SAMPLE]
    fd = os.open(store.path("src.parquet"), os.O_RDONLY)
    try:
        found = layout(fd, skip=(IN_SAMPLE,))
    finally:
        os.close(fd)
    assert (found is not None) == by_offset
    if found is not None:                 # every row group, every column but _sg_in_sample
        assert [c for c, _ in found["columns"]] == columns and found["rows"] == [250] * 4
        assert all(at is not None and len(at) == len(columns) for at in found["at"])
    expected = pf.to_pandas(index=False).drop(columns=[IN_SAMPLE], errors="ignore")
    rng = np.random.default_rng(11)
    source = {"path": "src.parquet", "sum": written}
    for rows in (np.array([0]), np.array([999]), np.sort(rng.choice(1000, 9, replace=False)),
                 np.arange(240, 260), np.sort(rng.choice(1000, 3 * POINT_ROWS, replace=False))):
        for src in (source, {"path": "src.parquet", "sum": written, "points": None}):  # decode
            got = stack(_source_parts(store, src, rows, "test"))
            pd.testing.assert_frame_equal(got, expected.iloc[rows].reset_index(drop=True))
        assert source["points"] == found      # found on the first read, kept


@pytest.mark.slow
def test_driver_consolidates_as_rtbs_under_irregular_times():
    # The job's driver merges the same batches into the consolidated sample
    # as RTBS after every batch of a schedule with one very short gap and
    # bursts; a driver state without the consolidated-weight groups (written
    # before they were recorded) resumes with a covering bound that keeps
    # Theorem 4.6(ii): sum over consolidated batches of |B_i| f(age) < delta2.
    from samplegen.tbs.stream.decide import Driver, initial_state
    from samplegen.tbs.stream.job import new_params
    given = dict(algorithm="rtbs", decay="poly", size=100, power=2.0, shift=1.0, delta1=0.2,
                 delta2=3.0, seed=7)
    p = new_params(dict(given, partitions=2), [])
    gaps = np.where(np.arange(300) % 30 < 20, 1e-3, 1.0)
    gaps[5] = 0.01
    times = np.cumsum(gaps)
    sizes = np.random.default_rng(3).integers(1, 80, times.size)
    f = Polynomial(2.0, shift=1.0)
    driver = Driver(p, initial_state(p, 2), 2, None)
    s = RTBS(100, f, seed=0, delta1=0.2, delta2=3.0, max_weight=100)
    for k in range(150):
        driver.step(k + 1, [int(sizes[k]) // 2, int(sizes[k]) - int(sizes[k]) // 2], times[k])
        s.update(np.arange(int(sizes[k]), dtype=np.int64), time=float(times[k]))
        assert driver.state["cons_batches"] == s.consolidated_batches
        assert len(driver.state["recent"]) + 1 == s.latent_count
    assert s.consolidated_batches >= 30
    state = json.loads(json.dumps(driver.state))
    del state["cons_mass"]
    resumed = Driver(p, state, 2, float(times[149]))
    for k in range(150, 300):
        resumed.step(k + 1, [int(sizes[k]), 0], times[k])
        driver.step(k + 1, [int(sizes[k]), 0], times[k])
        m = resumed.state["cons_batches"]
        assert float(np.sum(sizes[:m] * np.asarray(f(times[k] - times[:m])))) < 3.0
    # The covering bound delays consolidation by less than one cycle of the schedule.
    assert resumed.state["cons_batches"] >= driver.state["cons_batches"] - 30
