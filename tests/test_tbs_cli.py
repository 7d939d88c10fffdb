"""Command line: ``python -m tbs.cli`` / ``samplegen tbs``."""
import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from tbs.cli import main
from tbs.experiments import batch_sizes, expected_shortfall, mode_pattern


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
    proc = subprocess.run([sys.executable, "-m", "tbs.cli", "simulate", "--n", "-5"],
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
    from tbs import experiments as ex
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
