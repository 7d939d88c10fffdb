"""Hostile tests of the files samplegen writes for itself and reads back,
beyond the blocks: a matrix's ``_matrix.json`` (edited, its checksum
removed, or written by a samplegen before it carried one), a run's
``_manifest.json`` stripped of its checksum after an edit, the MapReduce
plan file (the sampling jobs' and the micro-batch jobs') damaged between the
driver and the tasks, the folds' partial bottom blocks damaged between the
two MapReduce steps, and the cached zip of the Hive commands damaged in its
directory.  Each test is named after what it protects; damage is one line
naming the file (status 2 on the command line, InputError in Python), with
nothing written."""
import hashlib
import json
import os
import re
import shutil

import numpy as np
import pytest

import samplegen
from samplegen.hive import package as hive_package
from samplegen.jobs import driver
from samplegen.jobs import plan as plan_codec
from samplegen.jobs.engines import mapreduce
from samplegen.jobs.store import META, Matrix
from samplegen.udfs.errors import InputError

from ..conftest import NO_CONF, run_cli, sample_digests
from ..conftest import is_one_line_error as _one_line_error

ROWS, BLOCK = 300, 64
INLINE = ["--runner", "inline", "--mrjob-conf", ""]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A matrix imported from a CSV with columns ``a`` (values), ``y`` (3
    classes, the recorded label) and ``b`` (values); and its rows."""
    base = tmp_path_factory.mktemp("store")
    rng = np.random.default_rng(5)
    X = np.column_stack([rng.normal(size=ROWS), np.arange(ROWS) % 3, rng.normal(size=ROWS)])
    csv = str(base / "x.csv")
    np.savetxt(csv, X, delimiter=",", header="a,y,b", comments="")
    path = str(base / "m")
    driver.import_file(csv, path, BLOCK, label="y")
    return {"path": path, "X": X}


@pytest.fixture
def matrix(tmp_path, source):
    """A copy of the source matrix, for a test to damage."""
    path = str(tmp_path / "m")
    shutil.copytree(source["path"], path)
    return path


def _edit_meta(path, **changes):
    meta_path = os.path.join(path, META)
    meta = json.load(open(meta_path))
    meta.update(changes)
    open(meta_path, "w").write(json.dumps(meta, indent=1))
    return meta_path


def _commands(tmp_path, matrix):
    """The commands that read a matrix: info, a stratified run, export."""
    return [["info", matrix], ["info", matrix, "--json"],
            ["holdout", matrix, tmp_path / "ho", "--ratio", 0.5, "--seed", 1, "--stratify", "y"],
            ["holdout", matrix, tmp_path / "hm", "--ratio", 0.5, "--seed", 1, "--stratify", "y",
             *INLINE],
            ["export", matrix, "--to", tmp_path / "x.csv"]]


def _refused_everywhere(capsys, tmp_path, matrix, named):
    for argv in _commands(tmp_path, matrix):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and _one_line_error(err) and named in err, (argv, err)
        assert "Traceback" not in err and (out == "" or argv[0] != "info"), (argv, out)
    assert sorted(os.listdir(tmp_path)) == ["m"]


# ---------------------------------------------------------------------------
# _matrix.json
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("edit", [
    {"columns": ["y", "a", "b"]},           # reordered: --stratify y would read column a
    {"columns": ["a", "b", "y"]},
    {"label": "b"},                         # another of its columns
    {"label": None},
    {"rows": ROWS - 1},
    {"nnz": 7},
    {"row_ids": "stored"},
])
def test_an_edited_matrix_metadata_is_refused_by_info_runs_and_export(tmp_path, capsys, matrix,
                                                                       edit):
    meta_path = _edit_meta(matrix, **edit)
    _refused_everywhere(capsys, tmp_path, matrix, meta_path)
    with pytest.raises(InputError, match="damaged matrix metadata"):
        driver.generate(matrix, str(tmp_path / "api"), "holdout", {"ratio": 0.5}, 1)
    assert sorted(os.listdir(tmp_path)) == ["m"]


def test_matrix_metadata_whose_checksum_was_removed_is_refused(tmp_path, capsys, matrix):
    """A hand edit that also deletes the checksum: every matrix of this
    format records one, so its absence is damage."""
    meta_path = os.path.join(matrix, META)
    meta = json.load(open(meta_path))
    del meta["checksum"]
    open(meta_path, "w").write(json.dumps(dict(meta, columns=["y", "a", "b"]), indent=1))
    _refused_everywhere(capsys, tmp_path, matrix, meta_path)
    meta = json.load(open(meta_path))
    open(meta_path, "w").write(json.dumps(dict(meta, columns=["a", "y", "b"]), indent=1))
    _refused_everywhere(capsys, tmp_path, matrix, meta_path)   # no edit, but no checksum


def test_a_matrix_written_before_checksums_is_still_read(tmp_path, capsys, source, matrix):
    """A ``_matrix.json`` as a samplegen before checksums wrote it (format
    samplegen-matrix/1, no checksum field) is read as before: the same
    columns, label, rows and samples as the matrix it was."""
    meta_path = os.path.join(matrix, META)
    meta = json.load(open(meta_path))
    assert meta.pop("checksum").startswith("sha256:")
    open(meta_path, "w").write(json.dumps(dict(meta, format="samplegen-matrix/1"), indent=1))
    code, out, err = run_cli(capsys, "info", matrix, "--json")
    assert code == 0, err
    desc = json.loads(out)
    assert desc["columns"] == ["a", "y", "b"] and desc["label"] == "y" and desc["rows"] == ROWS
    for path, name in ((source["path"], "new"), (matrix, "old")):
        code, _, err = run_cli(capsys, "holdout", path, tmp_path / name, "--ratio", 0.5,
                               "--seed", 1, "--stratify", "y")
        assert code == 0, err
    assert sample_digests(tmp_path / "old") == sample_digests(tmp_path / "new")
    assert run_cli(capsys, "export", matrix, "--to", tmp_path / "x.npy", "--no-row-ids")[0] == 0
    assert np.array_equal(np.load(tmp_path / "x.npy"), source["X"])
    assert "checksum" not in Matrix.open(matrix).meta


@pytest.mark.parametrize("name", ["train-0", "test-0"])
def test_an_edited_sample_matrix_metadata_is_refused(tmp_path, capsys, source, name):
    """A composed training set's ``_matrix.json`` (its ``composed_of``) and a
    test fold's (its ids' provenance) are checked like an input's."""
    run = tmp_path / "run"
    assert run_cli(capsys, "kfold", source["path"], run, "--k", 3, "--seed", 1)[0] == 0
    meta = json.load(open(run / name / META))
    if name.startswith("train"):
        meta["composed_of"][0]["rows"] += 1
    else:
        meta["row_ids"] = "positions"
    open(run / name / META, "w").write(json.dumps(meta, indent=1))
    code, out, err = run_cli(capsys, "export", run, name, "--to", tmp_path / "x.csv")
    assert code == 2 and _one_line_error(err) and str(run / name / META) in err, err
    assert not os.path.exists(tmp_path / "x.csv")
    with pytest.raises(InputError, match="damaged matrix metadata"):
        samplegen.read_run(str(run)).indices(name)


# ---------------------------------------------------------------------------
# _manifest.json
# ---------------------------------------------------------------------------
def test_a_manifest_edited_and_stripped_of_its_checksum_is_refused(tmp_path, capsys, source):
    """A manifest of this format always records its checksum: an edit (the
    seed) followed by deleting the checksum is damage, not an old run."""
    run = tmp_path / "run"
    assert run_cli(capsys, "holdout", source["path"], run, "--ratio", 0.5, "--seed", 1)[0] == 0
    path = run / "_manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest.pop("checksum").startswith("sha256:")
    path.write_text(json.dumps(dict(manifest, seed=2), indent=1))
    for argv in (["info", run], ["info", run, "--json"],
                 ["export", run, "train-0", "--to", tmp_path / "t.csv"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and out == "" and _one_line_error(err) and str(path) in err, (argv, err)
    assert not os.path.exists(tmp_path / "t.csv")
    with pytest.raises(InputError, match="damaged run manifest"):
        samplegen.read_run(str(run))


# ---------------------------------------------------------------------------
# the MapReduce plan file
# ---------------------------------------------------------------------------
def _damage_plan(path):
    """Change the seed recorded in the plan file *path* (still valid JSON)."""
    text = open(path).read()
    damaged = re.sub(r'"seed":(\d+)', lambda m: '"seed":%d' % (int(m.group(1)) + 1), text)
    assert damaged != text
    open(path, "w").write(damaged)


@pytest.mark.parametrize("runner", ["inline", "local"])
def test_a_damaged_plan_file_fails_the_task_with_one_line(tmp_path, capsys, monkeypatch,
                                                          source, runner):
    """The plan file is damaged after the driver read it (building the job's
    steps), before the tasks read it: the run fails with one line naming the
    file, and writes nothing.  (The local runner's tasks are processes of
    their own.)"""
    steps = mapreduce.MRSample.steps

    def steps_then_damage(job):
        out = steps(job)
        if not getattr(job, "_damaged", False):
            job._damaged = True
            _damage_plan(job.options.plan)
        return out

    read_here = []

    def read_file(path):
        read_here.append(path)
        return plan_codec.read_file(path)

    monkeypatch.setattr(mapreduce.MRSample, "steps", steps_then_damage)
    monkeypatch.setattr(mapreduce, "read_file", read_file, raising=False)
    dest = tmp_path / "out"
    code, out, err = run_cli(capsys, "holdout", source["path"], dest, "--ratio", 0.5, "--seed", 1,
                             "--runner", runner, "--mrjob-conf", "")
    assert code == 2 and _one_line_error(err), err
    assert "damaged plan file" in err and "plan.json" in err, err
    assert not os.path.exists(dest)
    if runner == "local":       # only the driver's read was in this process
        assert len(read_here) == 1


def test_a_damaged_plan_file_fails_the_micro_batch_task(tmp_path, monkeypatch):
    """``tbs run --runner local``: the plan file is damaged after the driver
    wrote it, before the tasks (processes of their own) read it; the run
    fails with the error naming the file, and the STATE keeps no batch."""
    from samplegen.tbs.stream import mr_tbs
    from samplegen.tbs.stream import run as tbs_run
    from samplegen.tbs.stream import status as tbs_status

    from ..tbs_jobs_util import write_batches

    monkeypatch.setenv("SAMPLEGEN_TBS_FSYNC", "0")
    batches, state = str(tmp_path / "batches"), str(tmp_path / "state")
    write_batches(batches, [40, 30], times=[1.0, 2.0])
    run_job = mr_tbs.run_job

    def damaged_then_run(job, *args, **kwargs):
        text = open(job.options.plan).read()
        damaged = re.sub(r'"salt":"(\d)', lambda m: '"salt":"%d' % ((int(m.group(1)) + 1) % 10),
                         text, count=1)
        assert damaged != text
        open(job.options.plan, "w").write(damaged)
        return run_job(job, *args, **kwargs)

    monkeypatch.setattr(mr_tbs, "run_job", damaged_then_run)
    params = {"algorithm": "rtbs", "decay": "exp", "size": 20, "lambda": 0.2, "seed": 3,
              "partitions": 2}
    with pytest.raises(InputError, match=r"damaged plan file \S*plan\.json"):
        tbs_run(batches, state, params, runner="local", options=NO_CONF)
    assert tbs_status(state)["batches"] == 0


# ---------------------------------------------------------------------------
# the folds' partial bottom blocks between the MapReduce steps
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("second_step", [False, True])
def test_a_damaged_fold_tail_between_the_steps_is_refused(tmp_path, capsys, monkeypatch, source,
                                                          second_step):
    """A fold's partial bottom block travels from the first step's reducers
    to the driver (or the second step's mappers) through the first step's
    output: one changed character of its values is refused, never composed
    into a training set."""
    reblock = mapreduce.MRSample._reblock

    def damaged_tails(job, sample, v, binned):
        for key, value in reblock(job, sample, v, binned):
            if key == mapreduce.TAIL:
                value = bytearray(value)
                i = len(value) - 5     # in the values' text (base64 of float64s)
                value[i] = ord("A") if value[i] != ord("A") else ord("B")
                value = bytes(value)
            yield key, value

    monkeypatch.setattr(mapreduce.MRSample, "_reblock", damaged_tails)
    if second_step:
        monkeypatch.setattr(mapreduce, "DRIVER_COMPOSE_BYTES", 0)
    dest = tmp_path / "out"
    code, _, err = run_cli(capsys, "kfold", source["path"], dest, "--k", 3, "--seed", 1, *INLINE)
    assert code == 2 and _one_line_error(err), err
    assert "damaged partial bottom block of fold" in err and "checksum" in err, err
    assert not os.path.exists(dest)


def test_verified_fold_tails_compose_the_same_training_sets(tmp_path, monkeypatch, source):
    """Tails with their checksums change nothing: the driver's composition
    and the second step's write the embedded engine's training sets."""
    runs = {name: str(tmp_path / name) for name in ("embedded", "driver", "step")}
    driver.generate(source["path"], runs["embedded"], "kfold", {"k": 3}, 1)
    driver.generate(source["path"], runs["driver"], "kfold", {"k": 3}, 1, runner="inline",
                    options=NO_CONF)
    monkeypatch.setattr(mapreduce, "DRIVER_COMPOSE_BYTES", 0)
    driver.generate(source["path"], runs["step"], "kfold", {"k": 3}, 1, runner="inline",
                    options=NO_CONF)
    digests = [sample_digests(path) for path in runs.values()]
    assert digests[0] == digests[1] == digests[2] and len(digests[0]) == 6


# ---------------------------------------------------------------------------
# the Hive commands' zip
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_a_damaged_cached_hive_zip_is_rebuilt(tmp_path, damage):
    """``samplegen-<hash>.zip`` already in the files directory is reused only
    if its bytes still have the hash of its name; otherwise it is written
    again (the servers would run the damaged code)."""
    files = str(tmp_path / "files")
    path = hive_package.build_hive_zip(files)
    good = open(path, "rb").read()
    name = os.path.basename(path)
    assert name == "samplegen-%s.zip" % hashlib.sha256(good).hexdigest()[:16]
    data = bytearray(good)
    if damage == "flip":
        data[len(data) // 2] ^= 0x01
    elif damage == "truncate":
        data = data[:len(data) // 2]
    else:
        data = b""
    open(path, "wb").write(bytes(data))
    assert hive_package.build_hive_zip(files) == path
    assert open(path, "rb").read() == good
    assert sorted(os.listdir(files)) == [name]


def test_an_intact_cached_hive_zip_is_reused(tmp_path):
    files = str(tmp_path / "files")
    path = hive_package.build_hive_zip(files)
    before = os.stat(path)
    assert hive_package.build_hive_zip(files) == path
    after = os.stat(path)
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
