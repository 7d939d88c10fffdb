"""Hostile tests of the micro-batch TBS jobs' durable STATE: ``samplegen tbs
run``, ``tbs sample`` and ``tbs status`` (and their Python API) on a STATE
whose files were damaged (flipped bytes in each kind of file, truncation, a
file the newest commit references deleted), a STATE of another format, two
runs at once, runs and samples killed with SIGKILL, an existing ``--to``
file, and batch directories holding files that are not batches.

Every damage must be one line naming the file, exit status 2 (API:
:class:`storage.DamagedStateError`, an InputError), nothing written; never a sample
of garbage."""
import json
import os
import shutil
import signal
import subprocess
import sys
import zlib

import pytest

from samplegen.tbs.errors import TBSError
from samplegen.tbs.stream import current_sample, run, status, storage
from samplegen.tbs.stream.storage import Lock, Store
from samplegen.udfs.errors import InputError

from ..conftest import run_cli, tree_digest
from ..tbs_jobs_util import write_batch, write_batches

SIZES = [200, 150, 300, 120, 250]
GIVEN = {"algorithm": "rtbs", "decay": "exp", "lambda": 0.1, "size": 100, "seed": 1,
         "partitions": 2, "compact_every": 3, "keep_deltas": 4}
SNAPSHOT = "snapshots/0000000003/part-00000.parquet"
NEWEST_STRUCT = "deltas/0000000005/part-00000.bin"
OLDER_STRUCT = "deltas/0000000003/part-00000.bin"      # holds the snapshot's keys
DELTA_IN = "deltas/0000000005/in/part-00001.parquet"
DELTA_OUT = "deltas/0000000005/out/part-00001.parquet"
COMMIT = "commits/0000000005.json"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """(batches 1-5, batch 6 beside them, a STATE after batches 1-5, its sample as CSV)."""
    root = tmp_path_factory.mktemp("tbs-state")
    batches, more = str(root / "b"), str(root / "b6")
    write_batches(batches, SIZES)
    write_batches(more, SIZES + [180])
    state = str(root / "state")
    run(batches, state, GIVEN, options={"fsync": False})
    return batches, more, state, current_sample(state)


@pytest.fixture
def state(built, tmp_path):
    copy = str(tmp_path / "state")
    shutil.copytree(built[2], copy)
    return copy


@pytest.fixture(autouse=True)
def no_fsync(monkeypatch):
    monkeypatch.setenv("SAMPLEGEN_TBS_FSYNC", "0")


def _flip(path, count=400, at=None):
    """XOR ``count`` bytes of file ``path`` from offset ``at`` (default: a third in)."""
    data = bytearray(open(path, "rb").read())
    at = len(data) // 3 if at is None else at
    for i in range(max(0, at), min(len(data), at + count)):
        data[i] ^= 0x5A
    open(path, "wb").write(bytes(data))


def _truncate(path, keep):
    data = open(path, "rb").read()
    open(path, "wb").write(data[:keep])


def _one_error(err, *names):
    """One line on stderr, no traceback, naming every one of *names*."""
    assert err.count("\n") == 1 and err.startswith("samplegen: error: "), err
    assert "Traceback" not in err
    for name in names:
        assert name in err, (name, err)


def _sample_refused(capsys, tmp_path, state, *names):
    """``tbs sample`` exits 2 with one line naming *names*, writing nothing."""
    out = tmp_path / "new" / "s.csv"
    code, _, err = run_cli(capsys, "tbs", "sample", state, "--to", out)
    assert code == 2, err
    _one_error(err, *names)
    assert not (tmp_path / "new").exists()


# ----------------------------------------------------------------------------- damaged files

@pytest.mark.parametrize("rel", [SNAPSHOT, DELTA_IN, NEWEST_STRUCT])
def test_flipped_bytes_in_a_file_the_sample_reads_is_one_error_naming_it(tmp_path, capsys,
                                                                         state, rel):
    """400 flipped bytes in a snapshot part, a delta's ``in`` file or the
    newest structure file: never a sample of garbage (it was: exit 0, 41 rows
    of garbage values from a snapshot)."""
    _flip(os.path.join(state, rel))
    _sample_refused(capsys, tmp_path, state, os.path.join(state, rel), "damaged STATE",
                    "does not match its checksum")
    with pytest.raises(storage.DamagedStateError) as info:
        current_sample(state)
    assert isinstance(info.value, InputError) and isinstance(info.value, TBSError)


def test_one_flipped_bit_in_a_snapshot_is_found(tmp_path, capsys, state):
    path = os.path.join(state, SNAPSHOT)
    data = bytearray(open(path, "rb").read())
    data[len(data) // 2] ^= 1
    open(path, "wb").write(bytes(data))
    _sample_refused(capsys, tmp_path, state, path)


def test_flipped_keys_in_an_older_structure_file_stop_the_next_run(built, capsys, state):
    """The keys of the snapshot's rows live at the end of the structure file
    of the batch that wrote it; the next run needs them for the rows leaving
    the sample (it used to write garbage keys into the delta).  The run
    stops, naming the file, and commits nothing."""
    path = os.path.join(state, OLDER_STRUCT)
    _flip(path, count=64, at=os.path.getsize(path) - 64)
    digest = tree_digest(state)
    code, _, err = run_cli(capsys, "tbs", "run", built[1], state)
    assert code == 2, err
    _one_error(err, path, "damaged STATE")
    assert tree_digest(state) == digest
    assert status(state)["batches"] == len(SIZES)


@pytest.mark.parametrize("keep", [40, 200])
def test_a_truncated_structure_file_is_one_error_naming_it(built, tmp_path, capsys, state,
                                                           keep):
    """Cut inside its JSON header (40 bytes) or after it: not a raw
    JSONDecodeError with exit status 1, but one line naming the file, exit 2,
    for ``tbs sample`` and ``tbs run`` alike."""
    path = os.path.join(state, NEWEST_STRUCT)
    _truncate(path, keep)
    _sample_refused(capsys, tmp_path, state, path, "is truncated")
    digest = tree_digest(state)
    code, _, err = run_cli(capsys, "tbs", "run", built[1], state)
    assert code == 2, err
    _one_error(err, path, "is truncated")
    assert tree_digest(state) == digest


def test_a_truncated_delta_is_one_error_naming_it(tmp_path, capsys, state):
    path = os.path.join(state, DELTA_IN)
    _truncate(path, os.path.getsize(path) // 2)
    _sample_refused(capsys, tmp_path, state, path, "is truncated")


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_commit_is_one_error_naming_it(built, tmp_path, capsys, state, damage):
    path = os.path.join(state, COMMIT)
    if damage == "truncated":
        _truncate(path, os.path.getsize(path) - 20)
    else:
        _flip(path, count=30)
    _sample_refused(capsys, tmp_path, state, path, "damaged STATE")
    for argv in (["status", state], ["run", built[1], state]):
        code, out, err = run_cli(capsys, "tbs", *argv)
        assert code == 2 and out == "", err
        _one_error(err, path)


def test_a_commit_changed_into_other_valid_json_is_refused(capsys, state):
    """A commit edited into different but valid JSON (a batch's arrival time in
    the ledger) would change W_k and every decision after it without a trace:
    its own checksum refuses it."""
    path = os.path.join(state, COMMIT)
    commit = json.load(open(path))
    commit["ledger"][0][1] = 0.5
    with open(path, "w") as f:
        json.dump(commit, f, sort_keys=True, separators=(",", ":"))
    code, out, err = run_cli(capsys, "tbs", "status", state)
    assert code == 2 and out == ""
    _one_error(err, path, "does not match its checksum")


def test_the_commit_records_the_checksum_of_every_delta_file(state):
    """The commit names each delta file with its size and CRC-32, so that a
    consumer of the deltas (which samplegen does not read back: ``out``) can
    verify them; and a damaged one no longer matches."""
    commit = json.load(open(os.path.join(state, COMMIT)))
    for entry in commit["deltas"]:
        k, ins, outs, sums = entry
        assert sorted(sums) == sorted(ins + outs)
        for rel in ins + outs:
            data = open(os.path.join(state, rel), "rb").read()
            assert sums[rel] == f"{len(data)}:{zlib.crc32(data):08x}"
    _flip(os.path.join(state, DELTA_OUT), count=50)
    data = open(os.path.join(state, DELTA_OUT), "rb").read()
    sums = commit["deltas"][-1][3]
    assert sums[DELTA_OUT] != f"{len(data)}:{zlib.crc32(data):08x}"


def test_a_deleted_file_the_newest_commit_references_is_one_error(built, tmp_path, capsys,
                                                                   state):
    os.remove(os.path.join(state, SNAPSHOT))
    _sample_refused(capsys, tmp_path, state, os.path.join(state, SNAPSHOT), "is missing")
    os.remove(os.path.join(state, NEWEST_STRUCT))
    code, _, err = run_cli(capsys, "tbs", "run", built[1], state)
    assert code == 2
    _one_error(err, os.path.join(state, NEWEST_STRUCT), "is missing")


def test_garbage_in_the_lock_file_does_not_stop_a_run(built, capsys, state):
    """The lock file holds only who runs (for a refusal's message): garbage in
    it left by a dead run is taken over."""
    with open(os.path.join(state, "_lock"), "wb") as f:
        f.write(b"\x00garbage{")
    code, _, err = run_cli(capsys, "tbs", "run", built[1], state, "-q")
    assert code == 0, err
    assert status(state)["batches"] == len(SIZES) + 1


# ----------------------------------------------------------------------------- kinds and versions

def _canonical_checksum(value):
    text = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    return f"{len(text)}:{zlib.crc32(text):08x}"


def test_a_state_of_the_format_without_checksums_is_refused(built, tmp_path, capsys, state):
    """A STATE of the checksum-less format ``samplegen-tbs/1`` cannot be told
    from a damaged one: refused by every command, asking to rebuild it, and
    left untouched."""
    path = os.path.join(state, COMMIT)
    commit = json.load(open(path))
    del commit["checksum"]
    commit["format"] = "samplegen-tbs/1"
    with open(path, "w") as f:
        json.dump(commit, f)
    digest = tree_digest(state)
    for argv in (["status", state], ["sample", state, "--to", tmp_path / "s.csv"],
                 ["run", built[1], state]):
        code, _, err = run_cli(capsys, "tbs", *argv)
        assert code == 2, err
        _one_error(err, "earlier samplegen (format samplegen-tbs/1)", "rebuild it")
    assert tree_digest(state) == digest and not (tmp_path / "s.csv").exists()


def test_a_state_of_an_unknown_format_is_refused(capsys, state):
    path = os.path.join(state, COMMIT)
    commit = json.load(open(path))
    del commit["checksum"]
    commit["format"] = "samplegen-tbs/99"
    commit["checksum"] = _canonical_checksum(commit)
    with open(path, "w") as f:
        json.dump(commit, f)
    code, _, err = run_cli(capsys, "tbs", "status", state)
    assert code == 2
    _one_error(err, "'samplegen-tbs/99'", "expected 'samplegen-tbs/2'")


def test_a_file_or_another_directory_as_state(built, tmp_path, capsys):
    afile = tmp_path / "afile"
    afile.write_text("x")
    for argv in (["status", afile], ["sample", afile, "--to", tmp_path / "s.csv"]):
        code, _, err = run_cli(capsys, "tbs", *argv)
        assert code == 2
        _one_error(err, f"STATE {afile} is a file")
    code, _, err = run_cli(capsys, "tbs", "run", built[0], afile)
    assert code == 2
    _one_error(err, "exists and is not a directory")
    other = tmp_path / "other"
    (other / "commits").mkdir(parents=True)
    (other / "commits" / "0000000000.json").write_text("[1, 2]\n")
    code, _, err = run_cli(capsys, "tbs", "status", other)
    assert code == 2
    _one_error(err, str(other / "commits" / "0000000000.json"), "has no checksum")


# ----------------------------------------------------------------------------- the lock

def test_a_second_run_at_the_same_time_is_refused_and_readers_are_not(built, tmp_path, capsys,
                                                                       state):
    """While a run holds STATE's lock, a second run is refused (one line,
    nothing changed); ``tbs sample`` and ``tbs status`` read committed files
    only and need no lock."""
    digest = tree_digest(state)
    lock = Lock(Store(state)).acquire()
    try:
        code, _, err = run_cli(capsys, "tbs", "run", built[1], state)
        assert code == 2
        _one_error(err, f"is in use by pid {os.getpid()}", "refused")
        code, _, err = run_cli(capsys, "tbs", "sample", state, "--to", tmp_path / "s.csv")
        assert code == 0, err
    finally:
        lock.release()
    os.remove(tmp_path / "s.csv")
    assert tree_digest(state) == digest


# ----------------------------------------------------------------------------- --to FILE

def test_sample_to_an_existing_file_needs_overwrite(built, tmp_path, capsys, state):
    out = tmp_path / "s.csv"
    out.write_bytes(b"precious\n")
    code, _, err = run_cli(capsys, "tbs", "sample", state, "--to", out)
    assert code == 2
    _one_error(err, f"--to {out} exists (use --overwrite to replace it)")
    assert out.read_bytes() == b"precious\n"
    code, _, err = run_cli(capsys, "tbs", "sample", state, "--to", out, "--overwrite")
    assert code == 0, err
    import pandas as pd
    got = pd.read_csv(out)
    assert len(got) == len(built[3]) == status(state)["sample_size"]
    assert sorted(os.listdir(tmp_path)) == ["s.csv", "state"]


def test_sample_to_a_directory_is_refused(tmp_path, capsys, state):
    (tmp_path / "d.csv").mkdir()
    code, _, err = run_cli(capsys, "tbs", "sample", state, "--to", tmp_path / "d.csv",
                           "--overwrite")
    assert code == 2
    _one_error(err, "is a directory")


def _samplegen(*argv, **env):
    return subprocess.run([sys.executable, "-m", "samplegen", *map(str, argv)],
                          env=dict(os.environ, SAMPLEGEN_TBS_FSYNC="0", **env),
                          capture_output=True, text=True)


def _temporaries(folder, name):
    return [e for e in os.listdir(folder) if e.startswith(f".{name}.tmp-")]


def test_a_killed_sample_leaves_no_file_and_the_next_removes_its_temporary(tmp_path, capsys,
                                                                           state):
    """SIGKILL after the sample's bytes were written, before the rename: no
    FILE (whole or absent), and the temporary the dead writer left is removed
    by the next ``tbs sample`` into the same place."""
    out = tmp_path / "out" / "s.parquet"
    proc = _samplegen("tbs", "sample", state, "--to", out, SAMPLEGEN_TBS_CRASH="sample-written")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert not out.exists()
    assert len(_temporaries(out.parent, "s.parquet")) == 1
    code, _, err = run_cli(capsys, "tbs", "sample", state, "--to", out)
    assert code == 0, err
    assert os.listdir(out.parent) == ["s.parquet"]


def test_a_live_writers_temporary_is_left_alone(tmp_path, capsys, state):
    """A temporary whose writer still holds its lock is not a dead writer's:
    kept; once the lock is gone, the next sample removes it."""
    import fcntl
    out = tmp_path / "s.npy"
    live = tmp_path / ".s.npy.tmp-0123456789ab"
    fd = os.open(live, os.O_WRONLY | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        assert run_cli(capsys, "tbs", "sample", state, "--to", out)[0] == 0
        assert live.exists()
    finally:
        os.close(fd)
    assert run_cli(capsys, "tbs", "sample", state, "--to", out, "--overwrite")[0] == 0
    assert not live.exists() and out.exists()


# ----------------------------------------------------------------------------- kills of runs

@pytest.mark.slow
def test_sigkill_of_a_run_then_a_rerun_equals_an_uninterrupted_run(tmp_path, capsys):
    """Killed after its tasks wrote their files, right after a commit and in
    the middle of the deletions: after each kill the STATE reads back with
    every checksum verified, and the rerun ends with the STATE, byte for
    byte, of a run never interrupted (the crash tests' helpers)."""
    from ..test_tbs_jobs_crash import _cli, _consistent, _env, _reference
    batches = str(tmp_path / "b")
    write_batches(batches, [300, 120, 0, 420, 250, 380, 90])
    digest, _ = _reference(batches, tmp_path, "rtbs-exp")
    state = str(tmp_path / "s")
    killed = []
    for point in ("after-tasks:1", "after-commit:2", "in-gc:1"):
        proc = subprocess.run(_cli(batches, state, "rtbs-exp"),
                              env=_env(SAMPLEGEN_TBS_CRASH=point), capture_output=True, text=True)
        assert proc.returncode in (-signal.SIGKILL, 0), proc.stderr
        killed += [point] if proc.returncode else []
        _consistent(state)
    assert len(killed) == 3, killed
    final = subprocess.run(_cli(batches, state, "rtbs-exp"), env=_env(), capture_output=True,
                           text=True)
    assert final.returncode == 0, final.stderr
    assert tree_digest(state) == digest


# ----------------------------------------------------------------------------- bad batch files

def _zero_bytes(folder):
    open(os.path.join(folder, "batch-6.parquet"), "wb").close()


def _not_parquet(folder):
    open(os.path.join(folder, "batch-6.parquet"), "wb").write(b"id,x\n1,2\n" * 40)


def _wrong_schema(folder):
    import pandas as pd
    write_batch(folder, 6, 10, frame=pd.DataFrame({"id": range(10), "other": [1.5] * 10}))


def _named_like_a_batch(name):
    def make(folder):
        shutil.copy(os.path.join(folder, "batch-5.parquet"), os.path.join(folder, name))
    return make


BAD_BATCHES = {
    "zero bytes": (_zero_bytes, "batch-6.parquet is not a readable Parquet file"),
    "not parquet": (_not_parquet, "batch-6.parquet is not a readable Parquet file"),
    "wrong schema": (_wrong_schema, "batch batch-6.parquet: its schema differs"),
    "batch-abc.parquet": (_named_like_a_batch("batch-abc.parquet"),
                          "batch-abc.parquet in {} is named like a batch but is not one"),
    "batch-6.csv": (_named_like_a_batch("batch-6.csv"), "batch-6.csv in {} is named like a batch"),
    "batch--6": (_named_like_a_batch("batch--6"), "batch--6 in {} is named like a batch"),
    "batch-6.parquet.tmp": (_named_like_a_batch("batch-6.parquet.tmp"),
                            "batch-6.parquet.tmp in {} is named like a batch"),
}


@pytest.mark.parametrize("case", list(BAD_BATCHES))
def test_a_bad_batch_file_is_one_line_naming_it_and_the_state_is_untouched(built, tmp_path,
                                                                           capsys, state, case):
    """Bad files among the batches, one valid batch before them: refused
    before anything is written (a file named like a batch whose name does
    not parse used to be skipped silently)."""
    make, message = BAD_BATCHES[case]
    batches = str(tmp_path / "b")
    shutil.copytree(built[0], batches)
    make(batches)
    digest = tree_digest(state)
    code, _, err = run_cli(capsys, "tbs", "run", batches, state)
    assert code == 2, err
    _one_error(err, message.format(batches))
    assert tree_digest(state) == digest


def test_hidden_and_underscore_entries_are_not_batches(built, tmp_path, capsys, state):
    """A producer's temporaries (names starting with '.' or '_') are not
    batches and not refused."""
    batches = str(tmp_path / "b")
    shutil.copytree(built[1], batches)
    for name in (".batch-7.parquet.tmp-0123456789ab", "_batch-7.parquet", "README"):
        open(os.path.join(batches, name), "wb").write(b"partial")
    code, _, err = run_cli(capsys, "tbs", "run", batches, state, "-q")
    assert code == 0, err
    assert status(state)["batches"] == len(SIZES) + 1
