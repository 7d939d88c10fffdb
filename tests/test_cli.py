"""The samplegen command line: commands, outputs, and bad input."""
import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from samplegen.jobs import driver

from .conftest import make, run_cli, tree_digest

R = ["--runner", "inline", "--mrjob-conf", ""]


def test_import_sample_info_export_round_trip(tmp_path, capsys):
    data = np.random.default_rng(0).standard_normal((300, 5))
    data[3, 1], data[4, 2], data[5, 0] = np.nan, np.inf, -np.inf
    np.save(tmp_path / "x.npy", data)
    code, _, err = run_cli(capsys, "import", tmp_path / "x.npy", tmp_path / "m", "--block-size", 32)
    assert code == 0 and "imported 300 x 5" in err
    code, _, _ = run_cli(capsys, "holdout", tmp_path / "m", tmp_path / "run", "--ratio", 0.8,
                         "--repeats", 2, "--seed", 3, *R)
    assert code == 0
    code, out, _ = run_cli(capsys, "info", tmp_path / "run", "--json")
    desc = json.loads(out)
    assert [s["name"] for s in desc["samples"]] == ["train-0", "test-0", "train-1", "test-1"]
    for s in desc["samples"]:
        assert {"rows", "cols", "block_size", "blocks"} <= set(s)
        assert all(len(b) == 4 for b in s["blocks"]) and s["cols"] == 5
    code, out, _ = run_cli(capsys, "info", tmp_path / "run")
    assert code == 0 and "train-1" in out
    code, _, _ = run_cli(capsys, "export", tmp_path / "run", "test-1", "--to", tmp_path / "t.csv")
    frame = pd.read_csv(tmp_path / "t.csv")
    assert frame.shape[1] == 6 and frame.columns[0] == "row_id"
    ids = frame["row_id"].to_numpy()
    assert np.array_equal(frame.iloc[:, 1:].to_numpy(), data[ids], equal_nan=True)
    code, _, _ = run_cli(capsys, "export", tmp_path / "m", "--to", tmp_path / "all.npy")
    assert np.array_equal(np.load(tmp_path / "all.npy"), data, equal_nan=True)


def test_kfold_composed_set_exports(tmp_path, capsys):
    src = make(tmp_path, rows=333, cols=4, block_size=50)
    assert run_cli(capsys, "kfold", src, tmp_path / "run", "--k", 3, "--seed", 1, *R)[0] == 0
    code, out, _ = run_cli(capsys, "info", tmp_path / "run", "--json")
    train = [s for s in json.loads(out)["samples"] if s["name"] == "train-0"][0]
    assert train["composed_of"] and train["blocks"][0][:2] == [0, 0]
    assert [b[0] for b in train["blocks"]] == list(range(len(train["blocks"])))
    run_cli(capsys, "export", tmp_path / "run", "train-0", "--to", tmp_path / "tr.npy")
    run_cli(capsys, "export", tmp_path / "run", "test-0", "--to", tmp_path / "te.npy")
    ids = np.concatenate([np.load(tmp_path / "tr.row_ids.npy"),
                          np.load(tmp_path / "te.row_ids.npy")])
    assert np.array_equal(np.sort(ids), np.arange(333))
    code, out, _ = run_cli(capsys, "info", tmp_path / "run" / "train-0")
    assert "composed of" in out


def test_kfold_materialize_and_the_composed_sets_totals(tmp_path, capsys):
    """--materialize writes each training set as a standalone matrix with
    the composed view's rows, order and fingerprint; info counts a composed
    set's bytes whole (its folds' blocks and its extra part)."""
    src = make(tmp_path, rows=333, cols=4, block_size=50)
    assert run_cli(capsys, "kfold", src, tmp_path / "comp", "--k", 3, "--seed", 1, *R)[0] == 0
    assert run_cli(capsys, "kfold", src, tmp_path / "full", "--k", 3, "--seed", 1,
                   "--materialize", *R)[0] == 0
    composed, full = driver.info(str(tmp_path / "comp")), driver.info(str(tmp_path / "full"))
    for a, b in zip(composed["samples"], full["samples"]):
        assert (a["name"], a["rows"], a["fingerprint"]) == (b["name"], b["rows"], b["fingerprint"])
        if a["name"].startswith("train"):
            assert a["composed_of"] and "composed_of" not in b
            # the same blocks: the materialized set's bytes are the view's total
            assert a["total_bytes"] == b["bytes"] > a["bytes"]
            ra = driver.open_sample(str(tmp_path / "comp"), a["name"]).to_numpy()
            rb = driver.open_sample(str(tmp_path / "full"), b["name"]).to_numpy()
            assert all(np.array_equal(x, y) for x, y in zip(ra, rb))
            assert not driver.open_sample(str(tmp_path / "full"), b["name"]).meta.get("composed_of")
    assert not [n for n in os.listdir(tmp_path / "full") if n.startswith(".")]
    code, out, _ = run_cli(capsys, "info", tmp_path / "comp")
    line = next(x for x in out.splitlines() if x.startswith("train-0"))
    total = composed["samples"][[s["name"] for s in composed["samples"]].index("train-0")]
    assert f"{total['total_bytes'] / 1e6:.2f}" in line and "composed" in line


@pytest.mark.mrjob
def test_relative_paths_on_the_local_runner(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    make(tmp_path, "m", rows=200, block_size=32)
    code, _, err = run_cli(capsys, "kfold", "m", "out", "--k", 3, "--seed", 1, "--runner", "local",
                           "--mrjob-conf", "")
    assert code == 0, err
    assert run_cli(capsys, "export", "out", "train-1", "--to", "t.npy")[0] == 0
    assert run_cli(capsys, "export", "out", "test-1", "--to", "f.npy")[0] == 0
    ids = np.concatenate([np.load("t.row_ids.npy"), np.load("f.row_ids.npy")])
    assert np.array_equal(np.sort(ids), np.arange(200))


def test_sample_with_user_udf_and_params(tmp_path, capsys):
    src = make(tmp_path, rows=200)
    code, _, _ = run_cli(capsys, "sample", src, tmp_path / "run", "--udf",
                         "samplegen.udfs.examples:paper_holdout_series", "--param", "ratio=0.5",
                         "--param", "repeats=2", "--seed", 5, *R)
    assert code == 0
    assert sorted(os.listdir(tmp_path / "run"))[:2] == ["_SUCCESS", "_manifest.json"]


def test_destination_rules(tmp_path, capsys):
    src = make(tmp_path, rows=100)
    dest = tmp_path / "out"
    dest.mkdir()  # an existing empty directory is fine
    assert run_cli(capsys, "bootstrap", src, dest, "--samples", 2, "--seed", 1, *R)[0] == 0
    code, _, err = run_cli(capsys, "bootstrap", src, dest, "--samples", 3, "--seed", 1, *R)
    assert code == 2 and "not empty" in err and len(os.listdir(dest)) == 4
    assert run_cli(capsys, "bootstrap", src, dest, "--samples", 3, "--seed", 1, "--overwrite",
                   *R)[0] == 0
    assert sorted(os.listdir(dest))[-1] == "sample-2"


def _corrupt(tmp_path):
    src = make(tmp_path, "c", rows=300, block_size=32)
    part = os.path.join(src, "part-00000")
    data = bytearray(open(part, "rb").read())
    data[1000] = ord("A") if data[1000] != ord("A") else ord("B")
    open(part, "wb").write(bytes(data))
    return src


def _truncated(tmp_path):
    src = make(tmp_path, "t", rows=300, block_size=32)
    part = os.path.join(src, "part-00000")
    os.truncate(part, os.path.getsize(part) // 2)
    return src


def _non_empty_dir(path):
    path.mkdir()
    (path / "f").write_text("x")
    return path


def _file(tmp_path, name, content):
    path = tmp_path / name
    if isinstance(content, np.ndarray):
        np.save(path, content)
    else:
        path.write_text(content)
    return path


BAD = [
    ("ratio > 1", lambda t: ["holdout", make(t), t / "o", "--ratio", 1.5, "--seed", 1], "ratio"),
    ("ratio 0", lambda t: ["holdout", make(t), t / "o", "--ratio", 0, "--seed", 1], "ratio"),
    ("fraction", lambda t: ["holdout", make(t), t / "o", "--ratio", .5, "--fraction", 2,
                            "--seed", 1],
     "fraction"),
    ("k < 2", lambda t: ["kfold", make(t), t / "o", "--k", 1, "--seed", 1], "k must be"),
    ("k > rows", lambda t: ["kfold", make(t, rows=20), t / "o", "--k", 21, "--seed", 1],
     "k must be"),
    ("samples < 1", lambda t: ["bootstrap", make(t), t / "o", "--samples", 0, "--seed", 1],
     "samples"),
    ("size < 1", lambda t: ["bootstrap", make(t), t / "o", "--samples", 1, "--size", 0,
                            "--seed", 1], "size"),
    ("missing source", lambda t: ["holdout", t / "nope", t / "o", "--ratio", .5, "--seed", 1],
     "not found"),
    ("empty source", lambda t: ["holdout", (t / "e").mkdir() or t / "e", t / "o", "--ratio", .5,
                                "--seed", 1], "_matrix.json"),
    ("corrupt block", lambda t: ["holdout", _corrupt(t), t / "o", "--ratio", .5, "--seed", 1],
     "corrupt"),
    ("truncated block", lambda t: ["holdout", _truncated(t), t / "o", "--ratio", .5, "--seed", 1],
     "corrupt"),
    ("bad seed", lambda t: ["holdout", make(t), t / "o", "--ratio", .5, "--seed", "x"], "seed"),
    ("negative seed", lambda t: ["holdout", make(t), t / "o", "--ratio", .5, "--seed=-3"], "seed"),
    ("unknown runner", lambda t: ["holdout", make(t), t / "o", "--ratio", .5, "--seed", 1,
                                  "--runner", "nope"], "unknown runner"),
    ("unknown UDF", lambda t: ["sample", make(t), t / "o", "--udf", "nope", "--seed", 1],
     "unknown UDF"),
    ("unknown UDF module", lambda t: ["sample", make(t), t / "o", "--udf", "no.such:f",
                                      "--seed", 1], "unknown UDF"),
    ("non-empty destination", lambda t: ["holdout", make(t), _non_empty_dir(t / "o"),
                                         "--ratio", .5, "--seed", 1], "not empty"),
    ("ragged CSV", lambda t: ["import", _file(t, "r.csv", "1,2\n3\n"), t / "o", "--block-size", 4],
     "ragged"),
    ("non-numeric CSV", lambda t: ["import", _file(t, "n.csv", "1,2\n3,b\n"), t / "o",
                                   "--block-size", 4], "non-numeric"),
    ("empty file", lambda t: ["import", _file(t, "z.csv", ""), t / "o", "--block-size", 4],
     "empty"),
    ("not 2-D", lambda t: ["import", _file(t, "v.npy", np.arange(4.0)), t / "o",
                           "--block-size", 4], "not 2-D"),
    ("block size < 1", lambda t: ["import", _file(t, "a.npy", np.ones((3, 3))), t / "o",
                                  "--block-size", 0], "block size"),
    ("make-matrix block size", lambda t: ["make-matrix", t / "o", "--rows", 5, "--cols", 5,
                                          "--block-size", 0], "block size"),
    ("unknown sample name", lambda t: ["export", _run(t), "nosuch", "--to", t / "o.csv"],
     "unknown sample"),
    ("run without sample name", lambda t: ["export", _run(t), "--to", t / "o.csv"],
     "name a sample"),
    ("unsupported export type", lambda t: ["export", make(t), "--to", t / "o.txt"],
     "unsupported"),
    ("missing mrjob configuration", lambda t: ["kfold", make(t), t / "o", "--k", 3, "--seed", 1,
                                               "--runner", "local", "--mrjob-conf",
                                               t / "no.conf"], "mrjob configuration not found"),
]


def _run(tmp_path):
    from samplegen.jobs import driver
    src = make(tmp_path, "src", rows=50)
    driver.generate(src, str(tmp_path / "run"), "holdout", {"ratio": 0.5}, 1, runner="inline",
                    options={"mrjob_conf": ""})
    return tmp_path / "run"


@pytest.mark.parametrize("label,argv,match", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, monkeypatch, label,
                                                         argv, match):
    monkeypatch.chdir(tmp_path)  # a relative path written by mistake lands under tmp_path
    args = argv(tmp_path)
    if args[0] in ("holdout", "kfold", "bootstrap", "sample") and "--runner" not in args:
        args += R
    before = tree_digest(tmp_path)
    code, out, err = run_cli(capsys, *args)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("samplegen: error:"), err
    assert match in lines[0]
    assert "Traceback" not in err
    assert tree_digest(tmp_path) == before  # nothing written (even by mistake, to cwd)


@pytest.mark.mrjob
def test_user_udf_module_in_the_working_directory(tmp_path):
    """What a user does: a module next to the data, the real console script,
    the local runner (tasks run in other directories and must import it)."""
    (tmp_path / "myudfs.py").write_text(
        "import numpy as np\n"
        "def evens(start, stop, rng, params):\n"
        "    offset = np.flatnonzero(np.arange(start, stop) % 2 == 0)\n"
        "    return offset, np.zeros(offset.size, np.int64), offset.astype(np.uint64) + start\n"
        "evens.sample_names = ['evens']\n")
    make(tmp_path, "m", rows=120, block_size=16)
    exe = os.path.join(os.path.dirname(sys.executable), "samplegen")
    env = dict(os.environ, PYTHONPATH="")
    proc = subprocess.run([exe, "sample", "m", "out", "--udf", "myudfs:evens", "--seed", "1",
                           "--runner", "local", "--mrjob-conf", ""], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    from samplegen.jobs.store import Matrix
    ids, _ = Matrix.open(str(tmp_path / "out" / "evens")).to_numpy()
    assert np.array_equal(ids, np.arange(0, 120, 2))


@pytest.mark.slow
def test_console_script_runs(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "samplegen")
    proc = subprocess.run([exe, "make-matrix", str(tmp_path / "m"), "--rows", "10", "--cols", "2",
                           "--block-size", "4"], capture_output=True, text=True)
    assert proc.returncode == 0 and "made a 10 x 2" in proc.stderr
    proc = subprocess.run([exe, "holdout", str(tmp_path / "m"), str(tmp_path / "o"), "--seed", "1"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "--ratio" in proc.stderr


# ---------------------------------------------------------------------------
# one command line: samplegen.cli on top of three command sets
# ---------------------------------------------------------------------------
def _parsers(parser, path=()):
    """Every parser under *parser* (itself included), with its command path."""
    import argparse
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, path + (name,))


def test_every_option_of_every_command_has_help():
    from samplegen import cli
    missing, count = [], 0
    for path, parser in _parsers(cli.build_parser()):
        for action in parser._actions:
            if action.dest == "help":
                continue
            count += 1
            if not (action.help or "").strip():
                missing.append(" ".join(path) + " " + "/".join(action.option_strings or
                                                                [action.dest]))
    assert count > 150 and not missing, missing


def test_every_command_set_is_reachable_and_prints_its_help(capsys):
    from samplegen import cli
    paths = [path for path, _ in _parsers(cli.build_parser())]
    assert {("holdout",), ("export",), ("tbs", "run"), ("tbs", "simulate"), ("hive", "kfold"),
            ("hive", "script")} <= set(paths)
    for path in paths:
        code, out, err = run_cli(capsys, *path, "--help")
        assert code == 0 and out.startswith(f"usage: samplegen {' '.join(path)}".rstrip()), path
        assert err == ""


def test_counts_are_singular_or_plural(tmp_path, capsys):
    src = make(tmp_path, rows=5, cols=2, block_size=8)
    code, out, _ = run_cli(capsys, "info", src)
    assert code == 0 and ", 1 block\n" in out
    code, out, _ = run_cli(capsys, "info", make(tmp_path, "m2", rows=20, cols=2, block_size=8))
    assert code == 0 and ", 3 blocks\n" in out


def test_version(capsys):
    import samplegen
    code, out, err = run_cli(capsys, "--version")
    assert code == 0 and out == f"samplegen {samplegen.__version__}\n" and err == ""


@pytest.mark.slow
def test_console_script_help_and_python_dash_m(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "samplegen")
    for argv in ([exe, "--help"], [sys.executable, "-m", "samplegen", "--help"]):
        proc = subprocess.run(argv, capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        assert proc.stdout.startswith("usage: samplegen") and "tbs" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "samplegen"], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.startswith("usage:")


@pytest.mark.parametrize("argv, message", [
    (["holdout", "m", "o", "--seed", "1"], "the following arguments are required: --ratio "
                                           "(see 'samplegen holdout --help')"),
    (["tbs", "run"], "the following arguments are required: BATCHES, STATE "
                     "(see 'samplegen tbs run --help')"),
    (["hive", "kfold", "t", "r"], "the following arguments are required: --seed, --k "
                                  "(see 'samplegen hive kfold --help')"),
    (["hive", "kfold", "t", "r", "--seed", "1", "--k", "3"],
     "--output DIR is required for a block table (or --key COLUMN for a row table)"),
    (["tbs", "simulate", "--lam"], "expected one argument (see 'samplegen tbs simulate --help')"),
    (["nosuch"], "argument COMMAND: invalid choice: 'nosuch'"),
    (["info", "m", "--bogus"], "unrecognized arguments: --bogus (see 'samplegen --help')"),
])
def test_usage_errors_are_one_line_exit_2_in_every_command_set(capsys, argv, message):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("samplegen: error: ") and message in err, err


@pytest.mark.parametrize("argv", [[], ["tbs"], ["hive"], ["-v", "tbs"]])
def test_a_missing_command_prints_the_help_of_its_set(capsys, argv):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.startswith(f"usage: samplegen {' '.join(a for a in argv if a != '-v')}".rstrip())


@pytest.mark.parametrize("where", ["before", "after"])
def test_quiet_and_verbose_go_before_or_after_the_command(tmp_path, capsys, where):
    argv = ["tbs", "status", str(tmp_path / "nope")]
    flag = ["-v"]
    with pytest.raises(Exception, match="does not exist"):  # -v: the exception itself
        run_cli(capsys, *(flag + argv if where == "before" else argv + flag))
    code, _, err = run_cli(capsys, *(["-q"] + argv if where == "before" else argv + ["-q"]))
    assert code == 2 and err.count("\n") == 1  # -q silences progress, never the error


def test_command_sets_do_not_import_each_other_or_the_top_layer():
    """jobs/cli.py, tbs/cli.py and hive/cli.py only define their commands:
    samplegen/cli.py imports them, never the other way round (no cycle)."""
    import ast
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for folder in ("jobs", "tbs", "hive"):
        tree = ast.parse(open(os.path.join(root, folder, "cli.py")).read())
        names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
        names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
        names += [f"{n.module}.{a.name}" for n in ast.walk(tree)
                  if isinstance(n, ast.ImportFrom) and n.module for a in n.names]
        bad = [n for n in names if n in ("samplegen.cli", "samplegen") or
               any(n.startswith(f"samplegen.{other}.cli") for other in ("jobs", "tbs", "hive"))
               or n in ("cli", "..cli")]
        assert not bad, (folder, bad)


def _closed_reader(argv, **kwargs):
    """Run *argv* with a stdout pipe whose reader is gone before it writes."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    return proc.wait(timeout=120), err


@pytest.mark.slow
def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path):
    """``samplegen info M | head -1``: no BrokenPipeError, no traceback, no
    message at exit; status 141 as SIGPIPE gives other tools."""
    src = make(tmp_path, rows=100)
    exe = os.path.join(os.path.dirname(sys.executable), "samplegen")
    for argv in ([exe, "info", src, "--json"], [exe, "hive", "script", "bootstrap"]):
        code, err = _closed_reader(argv)
        assert code == 141 and err == "", (argv, err)
    for argv in ([exe, "--help"], [exe, "tbs", "--help"]):  # argparse ignores the error itself
        code, err = _closed_reader(argv)
        assert code in (0, 141) and err == "", (argv, err)
    proc = subprocess.run(f"'{exe}' info '{src}' --json | head -c 10", shell=True,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout == "{\n \"kind\":" and proc.stderr == ""


def _wait_for_handler(proc, signum, timeout=60):
    """Until *proc* catches *signum* (samplegen.cli installed its handler)."""
    import time
    deadline = time.time() + timeout
    while time.time() < deadline:
        with open(f"/proc/{proc.pid}/status") as f:
            caught = [line for line in f if line.startswith("SigCgt:")]
        if caught and int(caught[0].split()[1], 16) >> (signum - 1) & 1:
            return
        time.sleep(0.05)
    raise AssertionError("the handler was never installed")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs /proc")
@pytest.mark.parametrize("signum, status, word", [(2, 130, "interrupted"),
                                                   (15, 143, "terminated")])
def test_ctrl_c_and_sigterm_stop_every_command_set_with_one_line(tmp_path, signum, status, word):
    """Ctrl-C and SIGTERM: 130 and 143, one line, for tbs too (it had neither)."""
    import signal as signals
    exe = os.path.join(os.path.dirname(sys.executable), "samplegen")
    # as in a terminal's foreground job: a test run started in the background
    # (`make test &`) would hand down SIGINT ignored, and Python keeps it so
    proc = subprocess.Popen([exe, "tbs", "knn", "--runs", "30", "--csv", str(tmp_path / "k.csv")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signals.signal(signals.SIGINT, signals.SIG_DFL))
    _wait_for_handler(proc, signals.SIGTERM)
    _wait_for_handler(proc, signum)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == status and err == f"samplegen: {word}\n" and out == ""
    assert os.listdir(tmp_path) == []


@pytest.mark.slow
def test_a_swallowed_ctrl_c_is_raised_again_but_never_inside_the_cleanup():
    """C code that clears pending errors (numpy's index conversion) can drop the
    KeyboardInterrupt a signal raised: it is raised again until it is on its way
    up, and the cleanup it triggers runs to its end."""
    import signal as signals
    import time

    from samplegen.cli import stoppable
    done = []

    def swallowed():
        try:
            os.kill(os.getpid(), signals.SIGINT)
            time.sleep(0.1)
        except KeyboardInterrupt:  # what the C code did
            pass
        deadline = time.time() + 10
        try:
            while time.time() < deadline:
                time.sleep(0.01)
        finally:  # a cleanup longer than the interval between raises
            time.sleep(2.5)
            done.append("cleanup")
        done.append("not stopped")
        return 0

    # as in a terminal: a suite started in the background inherits SIGINT ignored
    previous = signals.signal(signals.SIGINT, signals.default_int_handler)
    try:
        began = time.time()
        code = stoppable(swallowed)
        handler = signals.getsignal(signals.SIGINT)
    finally:
        signals.signal(signals.SIGINT, previous)
    assert code == 130
    assert done == ["cleanup"] and time.time() - began < 6
    assert signals.getitimer(signals.ITIMER_REAL) == (0.0, 0.0)
    assert handler is signals.default_int_handler


# ---------------------------------------------------------------------------
# outputs, UDF parameters
# ---------------------------------------------------------------------------
def test_missing_parent_directories_of_dest_are_created(tmp_path, capsys, monkeypatch):
    """docs/CLI.md, "Make targets": ``make holdout INPUT=work/demo/matrix
    OUTPUT=work/runs/ho`` after ``make demo``, where work/runs does not exist yet."""
    monkeypatch.chdir(tmp_path)
    make(tmp_path, "m", rows=100)
    code, _, err = run_cli(capsys, "holdout", "m", "work/runs/ho", "--ratio", 0.8, "--seed", 7,
                           *R)
    assert code == 0, err
    assert sorted(os.listdir("work/runs/ho"))[:2] == ["_SUCCESS", "_manifest.json"]
    assert os.listdir("work/runs") == ["ho"]


def test_a_failed_run_removes_the_parents_it_created(tmp_path):
    from samplegen.jobs.store import StagedOutput
    dest = tmp_path / "a" / "b" / "out"
    with pytest.raises(RuntimeError):
        with StagedOutput(str(dest)) as staging:
            assert os.path.isdir(staging)
            raise RuntimeError("the run fails")
    assert os.listdir(tmp_path) == []
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "keep").write_text("x")
    with pytest.raises(RuntimeError):
        with StagedOutput(str(dest)):
            raise RuntimeError("the run fails")
    assert sorted(os.listdir(tmp_path / "a")) == ["keep"]  # only what the run created goes


UDF_PARAMS = '''
import numpy as np
from samplegen.udfs import SamplingUDF

def needs_p(start, stop, rng, params):
    keep = np.arange(stop - start)[: int(params["p"] * (stop - start))]
    return keep, np.zeros(keep.size, np.int64), keep.astype(np.uint64)

def catches(start, stop, rng, params):
    try:
        p = params["p"]
    except KeyError:  # a UDF's own default still works
        p = 1.0
    return needs_p(start, stop, rng, {"p": p})

class NeedsQ(SamplingUDF):
    def __init__(self, n_rows, q, r=2):
        super().__init__(n_rows)

    def occurrences(self, start, stop, rng):
        return needs_p(start, stop, rng, {"p": 1.0})
'''


@pytest.fixture
def params_module(user_module):
    return user_module("params_udfs", UDF_PARAMS)


@pytest.mark.parametrize("runner", ["inline", pytest.param("local", marks=pytest.mark.mrjob)])
def test_a_udf_missing_a_parameter_says_which(tmp_path, capsys, monkeypatch, params_module,
                                              runner):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get(
        "PYTHONPATH", "")]))
    src = make(tmp_path, rows=100)
    code, _, err = run_cli(capsys, "sample", src, tmp_path / "out", "--udf",
                           f"{params_module}:needs_p", "--seed", 1, "--runner", runner,
                           "--mrjob-conf", "")
    assert code == 2 and err == (f"samplegen: error: UDF {params_module}:needs_p needs "
                                 "parameter 'p' (--param p=VALUE)\n"), err
    assert not (tmp_path / "out").exists()
    code, _, err = run_cli(capsys, "sample", src, tmp_path / "out", "--udf",
                           f"{params_module}:catches", "--seed", 1, "--runner", runner,
                           "--mrjob-conf", "")
    assert code == 0, err


def test_a_udf_class_missing_a_parameter_says_which(tmp_path, params_module):
    from samplegen.udfs import load_udf
    from samplegen.udfs.errors import MissingParameterError, ParameterError
    with pytest.raises(ParameterError) as info:
        load_udf(f"{params_module}:NeedsQ", 10, {"r": 3})
    assert str(info.value) == f"UDF {params_module}:NeedsQ needs parameter 'q' (--param q=VALUE)"
    assert isinstance(info.value, MissingParameterError) and isinstance(info.value, KeyError)
    with pytest.raises(ParameterError, match="bad parameters .* unexpected keyword"):
        load_udf(f"{params_module}:NeedsQ", 10, {"q": 1, "zz": 3})
    assert load_udf(f"{params_module}:needs_p", 10, {"p": 0.5}).params() == {"p": 0.5}
