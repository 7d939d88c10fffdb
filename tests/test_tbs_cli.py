"""Command line: ``samplegen tbs`` (also ``python -m samplegen tbs``).  Bad
parameters of the experiment commands: tests/hostile/test_tbs_commands.py."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from samplegen.tbs.errors import TBSError
from samplegen.tbs.experiments import batch_sizes, expected_shortfall, mode_pattern
from samplegen.tbs.stream import job
from tests.conftest import tbs_main as main
from tests.conftest import tree_digest
from tests.tbs_jobs_util import write_batches


def test_simulate_writes_csv_and_png(tmp_path, capsys):
    out_csv, out_png = tmp_path / "s.csv", tmp_path / "s.png"
    rc = main(["simulate", "--regime", "growing", "--lambda", "0.05", "--batches", "300",
               "--change-at", "100", "--csv", str(out_csv), "--plot", str(out_png)])
    assert rc == 0
    assert "rtbs: sample size" in capsys.readouterr().out
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 600 and {r["algorithm"] for r in rows} == {"ttbs", "rtbs"}
    sizes = np.array([int(r["batch_size"]) for r in rows if r["algorithm"] == "rtbs"])
    assert np.array_equal(sizes, batch_sizes("growing", 300, 100, change_at=100))
    rtbs = [r for r in rows if r["algorithm"] == "rtbs"]
    assert all(int(r["sample_size"]) <= 1000 for r in rtbs)
    assert int(rtbs[-1]["sample_size"]) == 1000            # saturated: W_k > n
    assert out_png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_usage_errors_name_the_command_to_ask_for_help(capsys):
    assert main(["simulate", "--regime", "sideways"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(see 'samplegen tbs simulate --help')" in err


def test_no_command_prints_the_help_and_exits_2(capsys):
    assert main([]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("usage: samplegen tbs") and "simulate" in err


def test_module_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "samplegen", "tbs", "simulate", "--n", "-5"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr == "samplegen: error: n must be an integer >= 1, got -5\n"


def test_outputs_missing_directories_are_created_a_file_parent_is_refused(tmp_path, capsys):
    out = tmp_path / "new" / "dir" / "s.csv"
    assert main(["simulate", "--batches", "30", "--n", "50", "--csv", str(out)]) == 0
    assert len(list(csv.DictReader(out.open()))) == 60
    (tmp_path / "afile").write_text("x")
    capsys.readouterr()
    assert main(["simulate", "--batches", "30", "--csv", str(tmp_path / "afile" / "s.csv")]) == 2
    err = capsys.readouterr().err
    assert err == (f"samplegen: error: cannot create {tmp_path / 'afile' / 's.csv'}: "
                   f"{tmp_path / 'afile'} is a file, not a directory\n")
    assert (tmp_path / "afile").read_text() == "x"


def test_knn_and_regression_small_runs(tmp_path, capsys):
    table = tmp_path / "t.md"
    rc = main(["knn", "--runs", "1", "--tune-runs", "0", "--patterns", "P(10,10)",
               "--test-batches", "30", "--warmup", "20", "--k", "3", "--table", str(table),
               "--plot", str(tmp_path / "k.png")])
    assert rc == 0
    text = table.read_text()
    assert text.startswith("| Alg. | P(10,10) Miss% | P(10,10) ES |")
    assert "| SW |" in text and "| Unif |" in text and text.count("| R-TBS") == 6
    rc = main(["regression", "--runs", "1", "--tune-runs", "0", "--patterns", "P(10,10)",
               "--test-batches", "25", "--warmup", "10", "--csv", str(tmp_path / "r.csv")])
    assert rc == 0
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert len(rows) == 3 * 25 and all(float(r["mean_mse"]) > 0 for r in rows)


def test_patterns_and_expected_shortfall():
    single = mode_pattern("single", 30)
    assert np.flatnonzero(single).tolist() == list(range(10, 20))
    p = mode_pattern("P(20,10)", 60)
    assert not p[:20].any() and p[20:30].all() and not p[30:50].any() and p[50:].all()
    assert expected_shortfall(np.arange(1, 21), 0.1) == 19.5        # worst 2 of 20
    assert expected_shortfall([3.0], 0.1) == 3.0


@pytest.mark.slow
def test_knn_reproduces_the_papers_finding():
    # Section 6.4: on periodic patterns R-TBS is (near-)best in accuracy and
    # clearly more robust (10% expected shortfall) than the sliding window.
    from samplegen.tbs import experiments as ex
    schemes = {k: v for k, v in ex.default_schemes(1000).items()
               if k in ("R-TBS exp: lambda = 0.07", "R-TBS poly: s = 2.0", "SW", "Unif")}
    flags = mode_pattern("P(10,10)", 60)
    ks = [3, 5]
    scores = ex.stream_experiment(
        schemes, lambda rng, total, batch, f: ex.gaussian_mixture_stream(rng, total, batch, f),
        lambda pts, lab: ex.knn_scores(pts, lab, ks), ks, runs=3, warmup=100, test_batches=60,
        batch=100, abnormal=flags, seed=2024)
    res = ex.summarize(scores, ks, ex.tune(scores))
    best_miss = min(m for _, m, _ in res.values())
    for name in ("R-TBS exp: lambda = 0.07", "R-TBS poly: s = 2.0"):
        assert res[name][1] <= best_miss + 1.0
        assert res[name][2] < 0.85 * res["SW"][2]


# ------------------------------------------------------------------ run: bounds checked up front

CREATE = ["--algorithm", "rtbs", "--decay", "exp", "--lambda", "0.1", "--size", "30", "--seed", "2"]


def _refused(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("samplegen: error: ") and message in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("per_job", ["0", "-1"])
def test_run_batches_per_job_below_one_is_refused_before_state_exists(tmp_path, capsys, per_job):
    """--batches-per-job 0 used to run with the default (16): now refused,
    one line, exit 2, and STATE is not created."""
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20, 20])
    _refused(capsys, ["run", batches, state, "--batches-per-job", per_job] + CREATE,
             f"--batches-per-job must be an integer >= 1, got {per_job}")
    assert not os.path.exists(state)


@pytest.mark.parametrize("partitions, message", [
    ("100000", "--partitions must be an integer >= 1 and at most 1024 (a fixed limit), got 100000"),
    ("1025", "at most 1024 (a fixed limit), got 1025"),
    ("0", "--partitions must be an integer >= 1 and at most 1024 (a fixed limit), got 0"),
    ("-3", "got -3"),
])
def test_run_partitions_out_of_bounds_is_refused_before_state_exists(tmp_path, capsys, partitions,
                                                                      message):
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20, 20])
    _refused(capsys, ["run", batches, state, "--partitions", partitions] + CREATE, message)
    assert not os.path.exists(state)


def test_run_bounds_are_checked_before_an_existing_state_is_read(tmp_path, capsys):
    """On an existing STATE the bound is the error (not "STATE was created
    with --partitions 4"), and STATE is left as it was: not locked, not
    read, not changed."""
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20, 20])
    assert main(["run", batches, state, "-q"] + CREATE) == 0
    write_batches(batches, [20], start=3)
    names, digest = sorted(os.listdir(state)), tree_digest(state)
    capsys.readouterr()
    for argv, message in [(["--partitions", "100000"], "at most 1024"),
                          (["--batches-per-job", "0"],
                           "--batches-per-job must be an integer >= 1")]:
        _refused(capsys, ["run", batches, state] + argv, message)
        assert sorted(os.listdir(state)) == names and tree_digest(state) == digest


def test_run_bounds_have_one_home():
    """The API refuses what the command line refuses, before STATE is
    touched (run() calls check_options first), and the limit is the named
    constant."""
    assert job.MAX_PARTITIONS == 1024
    assert job.check_bounded("partitions", job.MAX_PARTITIONS) == job.MAX_PARTITIONS
    assert job.check_options("inline", {"partitions": None}, {"batches_per_job": None}) \
        == job.DEFAULT_BATCHES_PER_JOB
    for given, options, message in [
            ({}, {"batches_per_job": 0}, "--batches-per-job must be an integer >= 1, got 0"),
            ({}, {"batches_per_job": True}, "--batches-per-job must be an integer >= 1, got True"),
            ({"partitions": job.MAX_PARTITIONS + 1}, {}, "at most 1024"),
            ({"partitions": 2.0}, {}, "--partitions must be an integer"),
            ({"compact_every": 0}, {}, "--compact-every must be an integer >= 1"),
            ({}, {"num_cores": 0}, "--num-cores must be an integer >= 1")]:
        with pytest.raises(TBSError, match=message.replace("(", r"\(").replace(")", r"\)")):
            job.check_options("inline", given, options)
        with pytest.raises(TBSError, match="must be an integer"):
            job.run("/nonexistent/batches", "/nonexistent/state", dict(given), options=options)


# ----------------------------------------------------------------------------- one contract

def test_tbs_errors_are_samplegen_errors():
    """One hierarchy: TBSError is a SamplegenError (exit status 2 on the
    command line); a bad argument is also a ParameterError; ``except
    TBSError`` and ``except ValueError`` still catch both."""
    from samplegen.tbs import RTBS, Exponential
    from samplegen.tbs.errors import TBSParameterError
    from samplegen.udfs.errors import ParameterError, SamplegenError
    with pytest.raises(TBSError) as info:
        RTBS(0, Exponential(0.1))
    assert isinstance(info.value, TBSParameterError) and isinstance(info.value, ParameterError)
    assert isinstance(info.value, ValueError) and info.value.exit_status == 2
    assert issubclass(TBSError, SamplegenError) and not issubclass(TBSError, ParameterError)
    with pytest.raises(ParameterError, match="n must be an integer >= 1, got 0"):
        RTBS(0, Exponential(0.1))


def test_run_messages_count_in_words(tmp_path, capsys):
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20])
    assert main(["run", batches, state] + CREATE) == 0
    assert f"samplegen: {state}: 1 batch, |S_k| = " in capsys.readouterr().err
    write_batches(batches, [20, 20], start=2)
    assert main(["run", batches, state]) == 0
    assert f"samplegen: {state}: 3 batches, |S_k| = " in capsys.readouterr().err
    assert main(["sample", state, "--to", str(tmp_path / "new" / "s.csv")]) == 0
    assert "samplegen: wrote 30 items to " in capsys.readouterr().err
    assert len((tmp_path / "new" / "s.csv").read_text().splitlines()) == 31


@pytest.mark.mrjob
def test_mrjob_says_nothing_unless_verbose(tmp_path):
    """mrjob's "No configs specified for local runner" is not shown (it is
    one of the engine logs -v shows).  One partition: one task of each kind
    per run (the message is the runner's, whatever the tasks; the default
    four partitions took twice as long for nothing more)."""
    batches = str(tmp_path / "b")
    write_batches(batches, [30, 30])
    argv = [sys.executable, "-m", "samplegen", "tbs", "run", batches] + CREATE + [
        "--runner", "local", "--partitions", "1"]
    proc = subprocess.run(argv + [str(tmp_path / "s1")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "mrjob." not in proc.stderr and "No configs" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(f"samplegen: {tmp_path / 's1'}: 2 batches")
    proc = subprocess.run(argv + [str(tmp_path / "s2"), "-v"], capture_output=True, text=True)
    assert proc.returncode == 0 and "No configs specified for local runner" in proc.stderr


def test_status_into_a_closed_pipe_is_quiet(tmp_path):
    """``samplegen tbs status STATE | head -1``."""
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20, 20])
    assert main(["run", batches, state] + CREATE) == 0
    proc = subprocess.run(f"'{sys.executable}' -m samplegen tbs status '{state}' | head -1",
                          shell=True, capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("STATE ") and proc.stderr == ""
    proc = subprocess.Popen([sys.executable, "-m", "samplegen", "tbs", "status", state, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    assert proc.wait(timeout=120) == 141 and proc.stderr.read() == b""


def test_run_seed_out_of_range_is_refused_before_state_exists(tmp_path, capsys):
    """A seed samplegen's streams cannot key (>= 2**64) is refused like the
    other bounds: before STATE is created."""
    batches, state = str(tmp_path / "b"), str(tmp_path / "s")
    write_batches(batches, [20, 20])
    argv = ["run", batches, state] + [a if a != "2" else str(2 ** 64) for a in CREATE]
    _refused(capsys, argv, "--seed must be an integer in [0, 2**64)")
    assert not os.path.exists(state)
