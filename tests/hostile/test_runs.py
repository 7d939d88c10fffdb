"""Hostile use of the command line's runs (import, make-matrix, the sampling
commands, info, export) on the default embedded runner and mrjob's: damaged
stores and manifests, unsafe sample names, glob characters in paths, outputs
that are symbolic links, concurrent, killed and stopped runs and exports,
UDFs that exit (``sys.exit``, ``os._exit``) or print, a full disk, absurd
sizes and options, bad metadata.  Each test is named after what it protects;
every one of them failed before the behaviour it checks was built."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from samplegen.jobs import driver, phases, store
from samplegen.jobs import plan as plan_codec
from samplegen.jobs.store import META, Matrix, StagedOutput
from samplegen.udfs import load_udf
from samplegen.udfs.errors import (
    EngineError,
    InputError,
    OutputError,
    ParameterError,
    SamplegenError,
)

from ..conftest import is_one_line_error as _one_line_error
from ..conftest import make, run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
INLINE = ["--runner", "inline", "--mrjob-conf", ""]
LOCAL = ["--runner", "local", "--mrjob-conf", ""]

UDF_MODULE = '''
import os, sys
import numpy as np

def _all(start, stop):
    off = np.arange(stop - start)
    return off, np.zeros(off.size, np.int64), off.astype(np.uint64)

def named(names):
    def f(start, stop, rng, params):
        return _all(start, stop)
    f.sample_names = names
    return f

up = named(["../victim"])
twice = named(["a", "a"])
dot = named(["."])
empty = named([""])
newline = named(["a\\nb"])
absolute = named(["/tmp/x"])
hidden = named([".x"])

def exits(start, stop, rng, params):
    if start >= 200:
        if params["how"] == "os":
            os._exit(0)
        sys.exit(0)
    return _all(start, stop)

def prints(start, stop, rng, params):
    print("rows", start, stop)
    return _all(start, stop)

def os_exit(start, stop, rng, params):
    if start >= 200:
        os._exit(params.get("status", 0))
    return _all(start, stop)

def waits(start, stop, rng, params):
    open(params["marker"], "a").close()   # the run is under way
    import time
    time.sleep(0.2)
    return _all(start, stop)
'''


@pytest.fixture
def udf_module(user_module):
    """A user module on sys.path (and on the tasks' PYTHONPATH)."""
    return user_module("hostile_udfs", UDF_MODULE)


def _cli(*argv, env=None, cwd=None):
    """samplegen in a fresh process: (exit status, stderr)."""
    proc = subprocess.run([sys.executable, "-m", "samplegen", *map(str, argv)],
                          capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": ROOT, **(env or {})})
    return proc.returncode, proc.stderr


# ---------------------------------------------------------------------------
# damaged stores
# ---------------------------------------------------------------------------
def _damaged(tmp_path, how):
    src = make(tmp_path, f"m-{how}", rows=2000, cols=8, block_size=100)
    part = os.path.join(src, "part-00000")
    lines = open(part, "rb").read().splitlines(keepends=True)
    if how == "last-line-cut":
        lines = lines[:-1]
    elif how == "line-repeated":
        lines = lines + [lines[3]]
    elif how == "part-copied":
        shutil.copy(part, os.path.join(src, "part-00001"))
    elif how == "h-swapped":  # two blocks exchange their labels: every block still there once
        a, b = lines[3].split(b"\t", 1), lines[4].split(b"\t", 1)
        lines[3], lines[4] = b[0] + b"\t" + a[1], a[0] + b"\t" + b[1]
    elif how == "h-out-of-range":
        lines[5] = b"99\t" + lines[5].split(b"\t", 1)[1]
    elif how == "block-replaced":  # a valid block of another matrix in its place
        other = make(tmp_path, "other", rows=2000, cols=8, block_size=100, seed=9)
        lines[2] = open(os.path.join(other, "part-00000"), "rb").read().splitlines(True)[2]
    open(part, "wb").write(b"".join(lines))
    return src


DAMAGE = ["last-line-cut", "line-repeated", "part-copied", "h-swapped", "h-out-of-range",
          "block-replaced"]


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_store_is_never_sampled(tmp_path, capsys, how):
    src = _damaged(tmp_path, how)
    for command in (["holdout", "--ratio", 0.8], ["kfold", "--k", 3],
                    ["bootstrap", "--samples", 2]):
        dest = tmp_path / f"out-{command[0]}"
        code, _, err = run_cli(capsys, command[0], src, dest, *command[1:], "--seed", 1, *INLINE)
        assert code == 2 and _one_line_error(err) and src in err, (how, err)
        assert not dest.exists()
    with pytest.raises(InputError):
        Matrix.open(src).index()


@pytest.mark.mrjob
def test_damaged_store_is_never_sampled_by_the_local_runner(tmp_path):
    src = _damaged(tmp_path, "h-swapped")
    code, err = _cli("holdout", src, tmp_path / "out", "--ratio", 0.8, "--seed", 1, *LOCAL)
    assert code == 2 and "fingerprint" in err and _one_line_error(err)
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# sample names
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("udf", ["up", "twice", "dot", "empty", "newline", "absolute", "hidden"])
def test_udf_sample_names_cannot_escape_or_collide(tmp_path, capsys, udf_module, udf):
    src = make(tmp_path, rows=300)
    runs = tmp_path / "runs"
    runs.mkdir()
    code, _, err = run_cli(capsys, "sample", src, runs / "out", "--udf", f"{udf_module}:{udf}",
                           "--seed", 1, *INLINE)
    assert code == 2 and _one_line_error(err) and "sample name" in err
    assert os.listdir(runs) == [] and not (tmp_path / "victim").exists()


def test_sample_names_are_checked_where_a_udf_declares_them(udf_module):
    import hostile_udfs
    with pytest.raises(SamplegenError, match="sample name"):
        load_udf(f"{udf_module}:up", 10)
    assert load_udf("kfold", 10, {"k": 3}).composed_names() == ["train-0", "train-1", "train-2"]
    assert hostile_udfs  # imported from the test's own directory


# ---------------------------------------------------------------------------
# glob characters in paths
# ---------------------------------------------------------------------------
@pytest.mark.mrjob
@pytest.mark.parametrize("runner", [INLINE, LOCAL])
def test_input_paths_are_read_literally_never_as_globs(tmp_path, capsys, runner):
    literal = make(tmp_path, "m[x]", rows=300, seed=1)
    make(tmp_path, "mx", rows=200, seed=2)          # what 'm[x]' matches as a glob
    star = make(tmp_path, "n*", rows=300, seed=3)
    make(tmp_path, "nb", rows=250, seed=4)          # what 'n*' matches besides itself
    odd = make(tmp_path, "a*b?[c]", rows=300, seed=5)
    for src in (literal, star, odd):
        dest = tmp_path / ("out-" + str(abs(hash(src))))
        code, _, err = run_cli(capsys, "holdout", src, dest, "--ratio", 0.5, "--seed", 1,
                               *runner)
        assert code == 0, err
        manifest = json.load(open(dest / "_manifest.json"))
        assert manifest["input"]["fingerprint"] == Matrix.open(src).meta["fingerprint"]
        rows = sum(s["rows"] for s in manifest["samples"])
        assert rows == 300  # the literal matrix's rows, no other matrix's


# ---------------------------------------------------------------------------
# concurrent runs into one destination
# ---------------------------------------------------------------------------
def test_concurrent_runs_never_replace_each_other(tmp_path):
    dest = str(tmp_path / "out")
    first, second = StagedOutput(dest), StagedOutput(dest)   # both found DEST absent
    a, b = first.__enter__(), second.__enter__()
    open(os.path.join(a, "who"), "w").write("first")
    open(os.path.join(b, "who"), "w").write("second")
    first.__exit__(None, None, None)                          # the first to finish wins
    with pytest.raises(OutputError, match="filled by another run"):
        second.__exit__(None, None, None)
    assert open(os.path.join(dest, "who")).read() == "first"
    assert sorted(os.listdir(tmp_path)) == ["out"]           # the loser's staging is gone


def test_an_empty_destination_directory_may_still_be_taken(tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    with StagedOutput(str(dest)) as staging:
        open(os.path.join(staging, "x"), "w").write("1")
    assert sorted(os.listdir(dest)) == ["_SUCCESS", "x"]


# ---------------------------------------------------------------------------
# tasks that end early with exit status 0
# ---------------------------------------------------------------------------
@pytest.mark.mrjob
@pytest.mark.parametrize("runner,how", [("inline", "sys"), ("local", "sys"), ("local", "os")])
def test_a_task_that_exits_zero_is_a_failure(tmp_path, udf_module, runner, how):
    src = make(tmp_path, rows=1017, block_size=64)
    code, err = _cli("sample", src, tmp_path / "out", "--udf", f"{udf_module}:exits",
                     "--param", f"how={how}", "--seed", 1, "--runner", runner, "--mrjob-conf", "",
                     env={"PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)])}, cwd=tmp_path)
    assert code == 1 and _one_line_error(err), err
    assert "ended early" in err or "sys.exit" in err
    assert not (tmp_path / "out").exists()


def _plan(udf="holdout", params=None, rows=250, block_size=100):
    meta = {"rows": rows, "cols": 3, "block_size": block_size, "kind": "dense"}
    return plan_codec.make_plan(load_udf(udf, rows, params or {"ratio": 0.6}), 1, meta, "/nowhere")


def test_coverage_needs_every_block_once_and_every_row_written():
    plan = _plan()
    reports = [{"blocks": [[0, 0], [1, 0]], "rows": {"0.0": 120, "1.0": 80}},
               {"blocks": [[2, 0]], "rows": {"0.0": 30, "1.0": 20}}]
    summaries = [{"sample": "train-0", "v": 0, "blocks": [[0, 100, 3, 0, 0], [1, 50, 3, 0, 0]]},
                 {"sample": "test-0", "v": 0, "blocks": [[0, 100, 3, 0, 0]]}]
    phases.check_coverage(plan, reports, summaries)
    with pytest.raises(EngineError, match=r"block \(2, 0\) was not sampled"):
        phases.check_coverage(plan, reports[:1], summaries)
    with pytest.raises(EngineError, match="sampled 2 times"):
        phases.check_coverage(plan, reports + reports[1:], summaries)
    with pytest.raises(EngineError, match="written twice"):
        phases.check_coverage(plan, reports, summaries + summaries[:1])
    with pytest.raises(EngineError, match="test-0 .* 0 rows written where the map tasks sent 100"):
        phases.check_coverage(plan, reports, summaries[:1])


def test_coverage_of_composed_training_sets():
    plan = _plan("kfold", {"k": 3}, rows=250)
    folds = {"test-0": 90, "test-1": 85, "test-2": 75}
    reports = [{"blocks": [[0, 0], [1, 0], [2, 0]],
                "rows": {f"{i}.0": folds[f"test-{i}"] for i in range(3)}}]
    summaries = [{"sample": n, "v": 0, "blocks": [[0, r, 3, 0, 0]]} for n, r in folds.items()]
    extras = {"train-0": 85 + 75, "train-1": 90 + 75, "train-2": 90 + 85}  # partial tails
    summaries += [{"sample": n, "v": 0, "blocks": [[0, 100, 3, 0, 0], [1, r - 100, 3, 0, 0]]}
                  for n, r in extras.items()]
    phases.check_coverage(plan, reports, summaries)
    summaries[-1]["blocks"].pop()
    with pytest.raises(EngineError, match="train-2"):
        phases.check_coverage(plan, reports, summaries)


# ---------------------------------------------------------------------------
# kills and leftovers
# ---------------------------------------------------------------------------
def _staging_dirs(path):
    return [n for n in os.listdir(path) if ".tmp-" in n]


def _group_ends(pgid, within=15):
    """Whether every live process of group *pgid* is gone within *within* s."""
    deadline = time.time() + within
    while time.time() < deadline:
        live = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                live.append(pid)
        if not live:
            return True
        time.sleep(0.1)
    return False


def _end_group(pgid):
    """Kill what is left of a run's process group and wait until it is gone."""
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError(f"processes of group {pgid} still run after 60 s")


@pytest.mark.mrjob
@pytest.mark.slow
def test_killed_runs_leave_nothing_a_rerun_keeps(tmp_path):
    src = make(tmp_path, rows=300_000, cols=20, block_size=1000)
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"TMPDIR": str(temp)}
    argv = [sys.executable, "-m", "samplegen", "kfold", src, str(tmp_path / "out"),
            "--k", "5", "--seed", "1", *LOCAL]
    for sig in (signal.SIGKILL, signal.SIGTERM):
        before = set(_staging_dirs(tmp_path))  # what the SIGKILLed run left
        log = tmp_path / f"stderr-{int(sig)}"
        with open(log, "w") as err_file:       # a file: tasks may outlive the driver
            proc = subprocess.Popen(argv, env={**os.environ, **env}, stderr=err_file,
                                    start_new_session=True)
        deadline = time.time() + 60            # this run's staging: it is under way
        while not set(_staging_dirs(tmp_path)) - before and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)
        if sig == signal.SIGKILL:
            os.killpg(proc.pid, signal.SIGKILL)   # the run and every task it started
        else:
            proc.send_signal(sig)                 # the driver only: it must clean up
        proc.wait(timeout=120)
        err = log.read_text()
        if sig == signal.SIGTERM:
            assert proc.returncode == 128 + signal.SIGTERM and "terminated" in err, err
            assert _staging_dirs(tmp_path) == []
            assert _group_ends(proc.pid), "task processes outlived the terminated run"
        else:
            assert _staging_dirs(tmp_path)  # what a SIGKILL leaves ...
        _end_group(proc.pid)                # (task processes of the driver end too)
        assert not (tmp_path / "out").exists()
    small = make(tmp_path, "small", rows=300)
    code, err = _cli("holdout", small, tmp_path / "out", "--ratio", 0.5, "--seed", 1, *LOCAL,
                     env=env)
    assert code == 0, err
    assert _staging_dirs(tmp_path) == []    # ... the next run into DEST removes
    time.sleep(0.5)
    assert os.listdir(temp) == []            # no mrjob directories, no lock files


def test_a_live_runs_staging_is_left_alone(tmp_path):
    dest = str(tmp_path / "out")
    live = StagedOutput(dest)
    staging = live.__enter__()
    with pytest.raises(RuntimeError):
        with StagedOutput(dest):               # starting, it removes killed runs' staging ...
            assert os.path.isdir(staging)      # ... but not a live run's
            raise RuntimeError("abandon the second run")
    live.__exit__(None, None, None)
    assert os.path.isdir(dest) and _staging_dirs(tmp_path) == []


@pytest.mark.slow
def test_a_failed_runs_staging_goes_while_its_tasks_still_write(tmp_path):
    """Task processes can outlive their driver and go on writing part files
    into the staging directory while the failed run removes it."""
    import threading
    stop = threading.Event()

    def task(directory, written):
        for n in range(20_000):                 # bounded, whatever the removal does
            if stop.is_set():
                return
            try:
                with open(os.path.join(directory, f"part-{n:05d}"), "wb") as f:
                    f.write(b"x")
                written.append(n)
            except OSError:                     # its directory is gone: the task fails
                pass

    for _ in range(20):
        written, writers = [], []
        try:
            with pytest.raises(RuntimeError, match="task failed"):
                with StagedOutput(str(tmp_path / "out")) as staging:
                    parts = os.path.join(staging, "train")
                    os.mkdir(parts)
                    writers = [threading.Thread(target=task, args=(parts, written), daemon=True)
                               for _ in range(2)]
                    for w in writers:
                        w.start()
                    while len(written) < 200 and any(w.is_alive() for w in writers):
                        time.sleep(0.001)
                    raise RuntimeError("task failed")  # the tasks go on during the removal
        finally:
            stop.set()
            for w in writers:
                w.join()
            stop.clear()
        assert _staging_dirs(tmp_path) == [] and not (tmp_path / "out").exists()


@pytest.mark.slow
@pytest.mark.parametrize("run", ["failed", "finishing"])
def test_a_stop_in_the_end_of_a_run_leaves_no_staging(tmp_path, run):
    """A stop (Ctrl-C, SIGTERM) that lands while a run ends -- a failed run
    removing its staging directory, a finished one committing it -- leaves
    the output whole or absent, never a staging directory, once the code
    that catches the stop has discarded what it cut off (as the command
    line does: a stop can land as ``__exit__`` is entered, before its first
    line, on a loaded machine)."""
    class Stop(Exception):
        pass

    stops, armed = [], [False]

    def handler(signum, frame):
        if armed[0]:            # one stop per run, and only while the run is watched
            armed[0] = False
            stops.append(signum)
            raise Stop()

    previous = signal.signal(signal.SIGALRM, handler)
    dest = tmp_path / "out"
    try:
        for delay in (0.0002, 0.0005, 0.001, 0.002, 0.004, 0.008):
            before = store.unfinished()
            armed[0] = True
            try:
                try:
                    with StagedOutput(str(dest)) as staging:
                        for d in range(20):
                            os.mkdir(os.path.join(staging, f"d{d}"))
                            for n in range(200):
                                open(os.path.join(staging, f"d{d}", f"p{n}"), "wb").close()
                        signal.setitimer(signal.ITIMER_REAL, delay)
                        if run == "failed":
                            raise RuntimeError("the run failed")
                finally:
                    armed[0] = False
                    store.discard_unfinished(before)
            except (Stop, RuntimeError):
                pass
            armed[0] = False
            signal.setitimer(signal.ITIMER_REAL, 0)
            # a stop that landed in the clean-up above cut it short: the code that
            # catches a stop discards what it cut off (the command line's stoppable)
            store.discard_unfinished(before)
            assert _staging_dirs(tmp_path) == []
            if run == "failed":
                assert not dest.exists()
            elif dest.exists():
                assert (dest / "_SUCCESS").exists() and len(os.listdir(dest / "d19")) == 200
                shutil.rmtree(dest)
        assert stops            # (some landed in the ending)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_stop_before_the_first_line_of_the_end_of_a_run_leaves_no_staging(tmp_path):
    """A signal handled as ``StagedOutput.__exit__`` is entered raises there,
    before any of its lines: the command's stop handling discards the
    staging directory it cut off, and exits 130."""
    from samplegen.cli import stoppable

    def run():
        staged = StagedOutput(str(tmp_path / "out"))
        staging = staged.__enter__()
        open(os.path.join(staging, "part-00000"), "wb").close()
        raise KeyboardInterrupt()     # where __exit__ would have begun

    assert stoppable(run) == 130
    assert _staging_dirs(tmp_path) == [] and not (tmp_path / "out").exists()
    assert store.unfinished() == frozenset()


# ---------------------------------------------------------------------------
# limits and metadata
# ---------------------------------------------------------------------------
def test_what_cannot_fit_is_refused_before_any_work(tmp_path, capsys):
    code, _, err = run_cli(capsys, "make-matrix", tmp_path / "huge", "--rows", 20000, "--cols",
                           100_000_000, "--block-size", 100)
    assert code == 2 and "free on the file system" in err and _one_line_error(err)
    src = make(tmp_path, rows=2000, cols=8, block_size=100)
    code, _, err = run_cli(capsys, "bootstrap", src, tmp_path / "bs", "--samples", 2, "--size",
                           10 ** 11, "--seed", 1, *INLINE)
    assert code == 2 and "GiB" in err and _one_line_error(err)
    assert sorted(os.listdir(tmp_path)) == ["m"]


def test_a_task_that_would_exhaust_memory_is_refused(tmp_path, monkeypatch):
    from samplegen.jobs import limits
    monkeypatch.setattr(limits, "available_memory", lambda: 64 << 20)
    src = make(tmp_path, rows=2000, cols=8, block_size=100)
    with pytest.raises(ParameterError, match="memory"):
        driver.generate(src, str(tmp_path / "bs"), "bootstrap", {"samples": 2, "size": 10 ** 8},
                        1, runner="inline", options={"mrjob_conf": ""})
    assert not (tmp_path / "bs").exists()


def test_mrjob_runners_are_refused_what_their_shuffle_cannot_hold(tmp_path, monkeypatch):
    """local: its shuffle keeps three copies of the output in scratch space (a
    GNU sort that runs out of it makes mrjob sort in memory instead); inline:
    mrjob sorts the shuffle in memory.  The embedded runner needs neither."""
    from collections import namedtuple

    from samplegen.jobs import limits
    src = make(tmp_path, rows=2000, cols=8, block_size=100)
    params = {"samples": 4}
    output = 4 * 2000 * driver._row_bytes(Matrix.open(src).meta)
    usage, real = namedtuple("usage", "total used free"), limits.shutil.disk_usage
    monkeypatch.setattr(limits.shutil, "disk_usage",
                        lambda path: usage(1 << 40, 0, int(2.5 * output)))
    with pytest.raises(OutputError, match="local runner's shuffle files"):
        driver.generate(src, str(tmp_path / "lo"), "bootstrap", params, 1, runner="local",
                        options={"mrjob_conf": ""})
    driver.generate(src, str(tmp_path / "em"), "bootstrap", params, 1, runner="embedded")
    monkeypatch.setattr(limits.shutil, "disk_usage", real)
    monkeypatch.setattr(limits, "available_memory", lambda: int(1.5 * output))
    with pytest.raises(ParameterError, match="inline runner's shuffle"):
        driver.generate(src, str(tmp_path / "in"), "bootstrap", params, 1, runner="inline",
                        options={"mrjob_conf": ""})
    assert sorted(os.listdir(tmp_path)) == ["em", "m"]


@pytest.mark.parametrize("field,value", [("block_size", 0), ("block_size", -3),
                                         ("block_size", "100"), ("block_size", True),
                                         ("rows", 2.5), ("cols", 0), ("kind", "dense2"),
                                         ("composed_of", [{"path": 3}])])
def test_matrix_metadata_is_validated_by_every_command(tmp_path, capsys, field, value):
    src = make(tmp_path, rows=200)
    meta = json.load(open(os.path.join(src, META)))
    meta[field] = value
    json.dump(meta, open(os.path.join(src, META), "w"))
    for argv in (["info", src], ["export", src, "--to", tmp_path / "x.csv"],
                 ["holdout", src, tmp_path / "ho", "--ratio", 0.5, "--seed", 1, *INLINE]):
        code, _, err = run_cli(capsys, *argv)
        assert code == 2 and _one_line_error(err) and "metadata" in err, (argv, err)
    assert sorted(os.listdir(tmp_path)) == ["m"]


def test_a_non_finite_parameter_never_reaches_a_manifest(tmp_path, capsys):
    src = make(tmp_path, rows=200)
    code, _, err = run_cli(capsys, "sample", src, tmp_path / "out", "--udf",
                           "samplegen.udfs.examples:bernoulli", "--param", "p=nan", "--seed", 1,
                           *INLINE)
    assert code == 2 and "finite" in err
    with pytest.raises(ParameterError, match="NaN"):
        driver.generate(src, str(tmp_path / "out"), "samplegen.udfs.examples:bernoulli",
                        {"p": float("inf")}, 1, runner="inline", options={"mrjob_conf": ""})
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------
# messages
# ---------------------------------------------------------------------------
@pytest.mark.mrjob
@pytest.mark.parametrize("runner", ["inline", "local"])
def test_a_udf_may_print(tmp_path, udf_module, runner):
    src = make(tmp_path, rows=300)
    code, err = _cli("sample", src, tmp_path / "out", "--udf", f"{udf_module}:prints", "--seed",
                     1, "--runner", runner, "--mrjob-conf", "",
                     env={"PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)])}, cwd=tmp_path)
    assert code == 0, err
    manifest = json.load(open(tmp_path / "out" / "_manifest.json"))
    assert manifest["samples"][0]["rows"] == 300


@pytest.mark.parametrize("below", [(), ("sub", "deeper")])
def test_a_file_in_the_destination_path_is_named_as_a_file(tmp_path, capsys, below):
    src = make(tmp_path, rows=100)
    (tmp_path / "afile").write_text("x")
    dest = tmp_path.joinpath("afile", *below, "x")
    code, _, err = run_cli(capsys, "holdout", src, dest, "--ratio", 0.5, "--seed", 1, *INLINE)
    assert code == 2 and err == (f"samplegen: error: cannot create {dest}: "
                                 f"{tmp_path / 'afile'} is a file, not a directory\n")
    assert sorted(os.listdir(tmp_path)) == ["afile", "m"]


def test_missing_parents_of_the_destination_are_created(tmp_path, capsys):
    src = make(tmp_path, rows=100)
    dest = tmp_path / "runs" / "new" / "ho"
    code, _, err = run_cli(capsys, "holdout", src, dest, "--ratio", 0.5, "--seed", 1, *INLINE)
    assert code == 0, err
    assert sorted(os.listdir(dest)) == ["_SUCCESS", "_manifest.json", "test-0", "train-0"]


def test_permission_errors_are_one_sentence_and_status_2(tmp_path, capsys, monkeypatch):
    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", "/data/out")
    monkeypatch.setattr(driver, "generate", refuse)
    src = make(tmp_path, rows=100)
    code, _, err = run_cli(capsys, "holdout", src, tmp_path / "o", "--ratio", 0.5, "--seed", 1)
    assert code == 2 and err == "samplegen: error: permission denied: /data/out\n"


def test_a_task_outliving_its_run_never_recreates_the_staging(tmp_path):
    """A task of a killed run (an orphan still writing) must not bring back
    the staging directory a later run removed: a part file's writer creates
    the sample's directory, never the run's."""
    from samplegen.jobs import fs as fsmod
    staging = tmp_path / ".out.tmp-0123456789ab"
    with pytest.raises(FileNotFoundError):
        fsmod.get_fs(str(staging)).open_atomic(str(staging / "train-0" / "part-v00000"))
    assert not staging.exists()
    staging.mkdir()
    writer = fsmod.get_fs(str(staging)).open_atomic(str(staging / "train-0" / "part-v00000"))
    writer.write(b"x\n")
    writer.close()
    assert (staging / "train-0" / "part-v00000").read_bytes() == b"x\n"


# ---------------------------------------------------------------------------
# user code cannot turn a failed run into a success
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("status", [0, 3])
def test_a_udf_calling_os_exit_fails_the_default_runners_run(tmp_path, capsys, udf_module,
                                                             status):
    """The embedded runner runs the tasks in the command's process: a UDF's
    os._exit(0) there used to end the command with status 0 and nothing
    written.  The run is a child process; its end before the run finished
    is a failure (status 1), and what it left is removed."""
    src = make(tmp_path, rows=1017, block_size=64)
    dest = tmp_path / "new" / "deeper" / "out"
    code, out, err = run_cli(capsys, "sample", src, dest, "--udf", f"{udf_module}:os_exit",
                             "--param", f"status={status}", "--seed", 1)
    assert code == 1 and _one_line_error(err), err
    assert f"ended with status {status} before the run finished" in err and "os._exit" in err
    assert out == ""
    assert sorted(os.listdir(tmp_path)) == ["hostile_udfs.py", "m"]   # no staging, no parents


def test_a_user_udf_runs_messages_and_errors_reach_the_command(tmp_path, capsys, udf_module):
    """What the child process of a user UDF's run says is the command's."""
    src = make(tmp_path, rows=300)
    code, _, err = run_cli(capsys, "sample", src, tmp_path / "out", "--udf",
                           f"{udf_module}:prints", "--seed", 1)
    assert code == 0 and "wrote 1 sample matrix" in err, err
    code, _, err = run_cli(capsys, "sample", src, tmp_path / "out2", "--udf",
                           f"{udf_module}:exits", "--param", "how=sys", "--seed", 1)
    assert code == 1 and _one_line_error(err) and "sys.exit" in err
    code, _, err = run_cli(capsys, "sample", src, tmp_path / "out", "--udf",
                           f"{udf_module}:prints", "--seed", 1)
    assert code == 2 and _one_line_error(err) and "not empty" in err


def _user_run(tmp_path, udf_module, marker):
    src = make(tmp_path, rows=2000, block_size=64)
    argv = [sys.executable, "-m", "samplegen", "sample", src, str(tmp_path / "out"), "--udf",
            f"{udf_module}:waits", "--param", f"marker={marker}", "--seed", "1",
            "--num-cores", "1"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, str(tmp_path)])}
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.time() + 30
    while not os.path.exists(marker) and time.time() < deadline:
        time.sleep(0.02)
    assert _staging_dirs(tmp_path), "the run did not start"
    return proc


def test_a_stopped_user_udf_run_cleans_up_and_says_so(tmp_path, udf_module):
    """SIGTERM to the command reaches its run's process, which removes its
    staging directory and reports 143; nothing of it stays running."""
    proc = _user_run(tmp_path, udf_module, tmp_path / "started")
    proc.send_signal(signal.SIGTERM)
    err = proc.communicate(timeout=60)[1]
    assert proc.returncode == 128 + signal.SIGTERM and err == "samplegen: terminated\n", err
    assert _staging_dirs(tmp_path) == [] and not (tmp_path / "out").exists()
    assert _group_ends(proc.pid)


@pytest.mark.slow
def test_a_user_udf_run_ends_with_its_killed_command(tmp_path, udf_module):
    """A SIGKILL of the command alone (not its process group) stops its
    run's process too, which cleans up: no orphan goes on to commit."""
    proc = _user_run(tmp_path, udf_module, tmp_path / "started")
    proc.kill()
    proc.communicate(timeout=60)
    try:
        assert _group_ends(proc.pid), "the run's process outlived its command"
        assert _staging_dirs(tmp_path) == [] and not (tmp_path / "out").exists()
    finally:
        _end_group(proc.pid)


# ---------------------------------------------------------------------------
# outputs that are symbolic links
# ---------------------------------------------------------------------------
def _link_to_dir(tmp_path, name, filled):
    target = tmp_path / f"{name}-target"
    target.mkdir()
    if filled:
        (target / "keep").write_text("mine")
    link = tmp_path / name
    link.symlink_to(target)
    return link, target


@pytest.mark.parametrize("filled", [False, True])
@pytest.mark.parametrize("overwrite", [[], ["--overwrite"]])
def test_an_output_that_is_a_symbolic_link_is_refused_before_any_work(tmp_path, capsys, filled,
                                                                       overwrite):
    """A link as DEST was sampled whole, then refused as "filled by another
    run"; with --overwrite the link was replaced by a directory.  Every
    command that writes a DEST or FILE refuses it up front, naming the link,
    its target and what to give instead."""
    src = make(tmp_path, rows=200)
    np.save(tmp_path / "rows.npy", np.ones((10, 3)))
    link, target = _link_to_dir(tmp_path, "out", filled)
    before = sorted(os.listdir(target))
    commands = [["holdout", src, link, "--ratio", 0.5, "--seed", 1],
                ["sample", src, link, "--udf", "holdout", "--param", "ratio=0.5", "--seed", 1],
                ["import", tmp_path / "rows.npy", link, "--block-size", 4],
                ["make-matrix", link, "--rows", 10, "--cols", 2, "--block-size", 4]]
    for argv in commands:
        code, _, err = run_cli(capsys, *argv, *overwrite)
        assert code == 2 and _one_line_error(err), (argv, err)
        assert f"{link} is a symbolic link to {target}" in err and "give the target" in err
        assert link.is_symlink() and sorted(os.listdir(target)) == before
    file_target = tmp_path / "real.csv"
    file_target.write_text("mine\n")
    (tmp_path / "x.csv").symlink_to(file_target)
    code, _, err = run_cli(capsys, "export", src, "--to", tmp_path / "x.csv", *overwrite)
    assert code == 2 and _one_line_error(err)
    assert ("symbolic link" in err) if overwrite else ("exists" in err)
    assert (tmp_path / "x.csv").is_symlink() and file_target.read_text() == "mine\n"
    assert not [n for n in os.listdir(tmp_path) if ".tmp-" in n]


def test_a_destination_below_a_linked_directory_is_written(tmp_path, capsys):
    """Only the output itself may not be a link: a directory on the way to it may."""
    src = make(tmp_path, rows=200)
    (tmp_path / "real").mkdir()
    (tmp_path / "via").symlink_to(tmp_path / "real")
    code, _, err = run_cli(capsys, "holdout", src, tmp_path / "via" / "out", "--ratio", 0.5,
                           "--seed", 1)
    assert code == 0, err
    assert (tmp_path / "real" / "out" / "_SUCCESS").exists()


# ---------------------------------------------------------------------------
# what killed exports leave
# ---------------------------------------------------------------------------
_DEAD_WRITER = """
import os, sys
from samplegen.jobs import fs
files = fs.temporary_files([sys.argv[1]]).__enter__()
open(files[sys.argv[1]], "w").write("half a file")
os.kill(os.getpid(), 9)
"""


def test_a_killed_exports_temporary_is_removed_by_the_next_export(tmp_path, capsys):
    """A SIGKILLed export leaves `.FILE.tmp-*` beside FILE; the next export
    there removes it (its writer is dead: its lock is free), never the
    temporary of a writer that still runs."""
    from samplegen.jobs import fs as fsmod
    src = make(tmp_path, rows=200)
    out = tmp_path / "exports"
    out.mkdir()
    target = str(out / "x.csv")
    proc = subprocess.run([sys.executable, "-c", _DEAD_WRITER, target],
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == -signal.SIGKILL
    dead = [n for n in os.listdir(out) if n.startswith(".x.csv.tmp-")]
    assert len(dead) == 1
    with fsmod.temporary_files([str(out / "y.csv")]) as live:   # a writer still at work
        code, _, err = run_cli(capsys, "export", src, "--to", target)
        assert code == 0, err
        assert os.path.exists(live[str(out / "y.csv")])
        assert sorted(os.listdir(out)) == sorted([os.path.basename(live[str(out / "y.csv")]),
                                                  "x.csv"])
    assert os.listdir(out) == ["x.csv"]


def test_a_temporary_taken_by_a_cleaner_before_its_lock_is_replaced(tmp_path, monkeypatch):
    """A writer's temporary is created, then locked: a cleaner that removed
    it in between makes the writer take a new one, never write a lost file."""
    import fcntl

    from samplegen.jobs import fs as fsmod
    real = fcntl.flock
    calls = []

    def flock(fd, op):
        if not calls:                       # the cleaner gets there first
            calls.append(fd)
            path = os.readlink(f"/proc/self/fd/{fd}")
            os.remove(path)
        return real(fd, op)
    monkeypatch.setattr(fcntl, "flock", flock)
    with fsmod.temporary_files([str(tmp_path / "x.csv")]) as tmp:
        assert os.path.exists(tmp[str(tmp_path / "x.csv")]) and calls
    assert os.listdir(tmp_path) == []


# ---------------------------------------------------------------------------
# a full disk, absurd options, sizes in messages
# ---------------------------------------------------------------------------
class _FullDisk:
    """The os module as :mod:`jobs.fs` sees it, on a disk that is full after
    *room* bytes written."""

    def __init__(self, room):
        self.room = room

    def write(self, fd, data):
        n = len(memoryview(data).cast("B"))
        if n > self.room:
            raise OSError(28, "No space left on device")
        self.room -= n
        return os.write(fd, data)

    def __getattr__(self, name):
        return getattr(os, name)


@pytest.mark.parametrize("command", [["holdout", "--ratio", 0.5], ["bootstrap", "--samples", 3]])
def test_a_full_disk_is_one_line_naming_the_output_and_leaves_nothing(tmp_path, capsys,
                                                                      monkeypatch, command):
    """ENOSPC in a task's writer was a raw RuntimeError with status 1."""
    from samplegen.jobs import fs as fsmod
    src = make(tmp_path, rows=3000, cols=20, block_size=100)
    monkeypatch.setattr(fsmod, "os", _FullDisk(room=100_000))
    dest = tmp_path / "runs" / "out"
    code, out, err = run_cli(capsys, command[0], src, dest, *command[1:], "--seed", 1)
    assert code == 2 and _one_line_error(err), err
    assert f"no space left on device while writing {dest}" in err
    assert " MB needed" in err and "GiB" not in err
    assert sorted(os.listdir(tmp_path)) == ["m"]        # no run, no staging, no parents


@pytest.mark.parametrize("option", ["--bin-mib", "--memory-mib"])
@pytest.mark.parametrize("value", ["inf", "-inf", "nan", "-1", "0", "1e300"])
def test_memory_options_must_be_finite_and_in_range(tmp_path, capsys, option, value):
    """--bin-mib inf was an OverflowError with status 1."""
    src = make(tmp_path, rows=200)
    code, _, err = run_cli(capsys, "holdout", src, tmp_path / "out", "--ratio", 0.5, "--seed", 1,
                           option, value)
    assert code == 2 and _one_line_error(err) and option in err, err
    assert sorted(os.listdir(tmp_path)) == ["m"]


def test_sizes_below_a_gib_are_given_in_megabytes(tmp_path, capsys, monkeypatch):
    """The estimate of a run's bytes read "about 0.0 GiB, more than the 0.0
    GiB free" for small outputs on a nearly full disk."""
    from collections import namedtuple

    from samplegen.jobs import limits
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(limits.shutil, "disk_usage", lambda path: usage(1 << 40, 0, 250_000))
    src = make(tmp_path, rows=2000, cols=8, block_size=100)
    code, _, err = run_cli(capsys, "bootstrap", src, tmp_path / "out", "--samples", 2, "--seed", 1)
    assert code == 2 and _one_line_error(err)
    assert "more than the 0.2 MB free" in err and "GiB" not in err, err
    assert limits.format_bytes(0) == "0.0 MB"
    assert limits.format_bytes(2 ** 30 - 1) == "1073.7 MB"
    assert limits.format_bytes(3 * 2 ** 30) == "3.0 GiB"


@pytest.mark.parametrize("command", [["holdout", "--ratio", 0.5], ["kfold", "--k", 3]])
def test_per_row_coins_with_stratify_are_refused(tmp_path, capsys, command):
    """--per-row with --stratify was silently ignored (exact sizes made)."""
    rows = np.column_stack([np.arange(300) % 3, np.ones(300)])
    np.save(tmp_path / "rows.npy", rows)
    src = tmp_path / "m"
    assert run_cli(capsys, "import", tmp_path / "rows.npy", src, "--block-size", 64)[0] == 0
    code, _, err = run_cli(capsys, command[0], src, tmp_path / "out", *command[1:], "--seed", 1,
                           "--stratify", "0", "--per-row")
    assert code == 2 and _one_line_error(err), err
    assert "--per-row" in err and "stratified" in err
    assert sorted(os.listdir(tmp_path)) == ["m", "rows.npy"]


# ---------------------------------------------------------------------------
# the manifest is verified when it is read back
# ---------------------------------------------------------------------------
def _run_dir(tmp_path, capsys):
    src = make(tmp_path, rows=200)
    dest = tmp_path / "run"
    assert run_cli(capsys, "holdout", src, dest, "--ratio", 0.5, "--seed", 1)[0] == 0
    return dest


@pytest.mark.parametrize("edit", ["nan", "rows", "infinity"])
def test_a_hand_edited_manifest_is_damage_and_info_json_stays_json(tmp_path, capsys, edit):
    """`info --json` echoed a hand-edited NaN (no JSON reader accepts it)."""
    dest = _run_dir(tmp_path, capsys)
    path = dest / "_manifest.json"
    text = path.read_text()
    if edit == "nan":
        text = text.replace('"elapsed_seconds": ', '"elapsed_seconds": NaN, "was": ')
    elif edit == "infinity":
        text = text.replace('"seed": 1', '"seed": Infinity')
    else:
        text = text.replace('"rows": 100', '"rows": 101', 1)
    path.write_text(text)
    for argv in (["info", dest, "--json"], ["info", dest], ["export", dest, "train-0", "--to",
                                                           tmp_path / "t.csv"]):
        code, out, err = run_cli(capsys, *argv)
        assert code == 2 and _one_line_error(err) and str(path) in err, (argv, err)
        assert out == ""
    assert not (tmp_path / "t.csv").exists()


def test_a_manifest_without_a_checksum_is_still_read_if_valid(tmp_path, capsys):
    """Runs written before manifests carried a checksum stay readable."""
    dest = _run_dir(tmp_path, capsys)
    path = dest / "_manifest.json"
    manifest = json.loads(path.read_text())
    assert manifest.pop("checksum").startswith("sha256:")
    manifest["format"] = "samplegen-run/1"      # as written before checksums
    path.write_text(json.dumps(manifest, indent=1))
    code, out, err = run_cli(capsys, "info", dest, "--json")
    assert code == 0, err
    assert [s["name"] for s in json.loads(out)["samples"]] == ["train-0", "test-0"]
    path.write_text(json.dumps(dict(manifest, elapsed_seconds=float("nan")), indent=1))
    code, out, err = run_cli(capsys, "info", dest, "--json")
    assert code == 2 and out == "" and "corrupt run manifest" in err
