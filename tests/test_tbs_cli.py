"""Command line: ``python -m samplegen.tbs.cli`` / ``samplegen tbs``."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from samplegen.tbs.cli import main
from samplegen.tbs.errors import TBSError
from samplegen.tbs.experiments import batch_sizes, expected_shortfall, mode_pattern
from samplegen.tbs.stream import job
from tests.conftest import tree_digest
from tests.tbs_jobs_util import write_batches


def test_simulate_writes_csv_and_png(tmp_path, capsys):
    out_csv, out_png = tmp_path / "s.csv", tmp_path / "s.png"
    rc = main(["simulate", "--regime", "growing", "--lam", "0.05", "--batches", "300", "--change-at", "100",
               "--csv", str(out_csv), "--plot", str(out_png)])
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


@pytest.mark.parametrize("argv, message", [
    (["simulate", "--n", "0"], "samplegen tbs: error: n must be an integer >= 1, got 0"),
    (["simulate", "--regime", "sideways"], "samplegen tbs simulate: error: argument --regime: invalid choice"),
    (["simulate", "--algorithms", "ttbs,xyz"], "--algorithms must list 'ttbs' and/or 'rtbs', got 'xyz'"),
    (["simulate", "--mean-batch-size", "10"], "mean_batch_size must be >= n * gamma(decay)"),
    (["simulate", "--decay", "poly", "--consolidation-rate", "0.001"], "consolidation_rate must be >="),
    (["simulate", "--csv", "/no/such/dir/x.csv"], "--csv: directory '/no/such/dir' does not exist"),
    (["knn", "--patterns", "P(10)"], "pattern must be 'single' or 'P(d,e)'"),
    (["knn", "--k", "0,3"], "--k must list integers >= 1"),
    (["knn", "--test-batches", "10"], "--test-batches must be >= 20"),
    (["regression", "--penalties", "a,b"], "expected comma-separated numbers"),
    ([], "the following arguments are required: command"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, argv, message):
    target = tmp_path / "out.csv"
    extra = [] if not argv or "--csv" in argv else ["--csv", str(target)]
    rc = main(argv + extra if argv and argv[0] in ("simulate", "knn", "regression") else argv)
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1 and message in err and "Traceback" not in err
    assert not target.exists() and os.listdir(tmp_path) == []


def test_module_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "samplegen.tbs.cli", "simulate", "--n", "-5"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.strip() == "samplegen tbs: error: n must be an integer >= 1, got -5"


def test_knn_and_regression_small_runs(tmp_path, capsys):
    table = tmp_path / "t.md"
    rc = main(["knn", "--runs", "1", "--tune-runs", "0", "--patterns", "P(10,10)", "--test-batches", "30",
               "--warmup", "20", "--k", "3", "--table", str(table), "--plot", str(tmp_path / "k.png")])
    assert rc == 0
    text = table.read_text()
    assert text.startswith("| Alg. | P(10,10) Miss% | P(10,10) ES |")
    assert "| SW |" in text and "| Unif |" in text and text.count("| R-TBS") == 6
    rc = main(["regression", "--runs", "1", "--tune-runs", "0", "--patterns", "P(10,10)", "--test-batches", "25",
               "--warmup", "10", "--csv", str(tmp_path / "r.csv")])
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
    scores = ex.stream_experiment(schemes, lambda rng, total, batch, f: ex.gaussian_mixture_stream(rng, total, batch, f),
                                  lambda pts, lab: ex.knn_scores(pts, lab, ks), ks, runs=3, warmup=100,
                                  test_batches=60, batch=100, abnormal=flags, seed=2024)
    res = ex.summarize(scores, ks, ex.tune(scores))
    best_miss = min(m for _, m, _ in res.values())
    for name in ("R-TBS exp: lambda = 0.07", "R-TBS poly: s = 2.0"):
        assert res[name][1] <= best_miss + 1.0
        assert res[name][2] < 0.85 * res["SW"][2]


# ----------------------------------------------------------------------------- run: bounds checked up front

CREATE = ["--algorithm", "rtbs", "--decay", "exp", "--lambda", "0.1", "--size", "30", "--seed", "2"]


def _refused(capsys, argv, message):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("samplegen tbs: error: ") and message in err, err
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
                          (["--batches-per-job", "0"], "--batches-per-job must be an integer >= 1")]:
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
