"""Hostile tests of the time-biased experiment commands of the command line:
``samplegen tbs simulate | knn | regression | online`` (tbs/cli.py on
tbs/experiments.py), run in process: sizes that are zero, negative, NaN or
beyond any machine's memory, batch sizes that overflow, unknown decay and
scheme names, malformed and repeated --patterns / --schemes / --extra /
--penalties / --k / --algorithms lists, non-finite coefficients, outputs
that are directories, one file named by two outputs, and plots under a
missing directory or a file.

Every bad input is one line ``samplegen: error: ...`` naming the problem,
exit status 2, no traceback, refused before any work and nothing written."""
import os

import pytest

from samplegen.tbs import experiments as ex

from ..conftest import run_cli

#: small runs, so that a command that wrongly accepts an input ends fast
SMALL = {"simulate": ["--batches", "20", "--n", "50"],
         "knn": ["--runs", "1", "--tune-runs", "0", "--test-batches", "20", "--warmup", "2",
                 "--batch", "10", "--n", "20", "--k", "1,3"],
         "regression": ["--runs", "1", "--tune-runs", "0", "--test-batches", "20",
                        "--warmup", "2", "--batch", "10", "--n", "20"],
         "online": ["--runs", "1", "--tune-runs", "0", "--test-batches", "20", "--warmup", "2",
                    "--batch", "10", "--n", "20", "--lambdas", "0.1", "--rates", "0.1",
                    "--mus", "1"]}


def _refused(capsys, tmp_path, argv, words):
    """``samplegen tbs`` with ``argv`` (after the small-run options, so that
    its options win) and, unless it has one, a --csv output in ``tmp_path``:
    one line naming the problem, exit 2, nothing written."""
    before = sorted(os.listdir(tmp_path))
    command, *rest = argv
    csv = [] if "--csv" in rest else ["--csv", tmp_path / "out.csv"]
    code, out, err = run_cli(capsys, "tbs", command, *SMALL[command], *rest, *csv)
    assert code == 2, (code, err)
    assert err.startswith("samplegen: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err and "Warning" not in err and out == "", err
    assert words in err, err
    assert sorted(os.listdir(tmp_path)) == before
    return err


BAD_VALUES = [
    (["simulate", "--n", "0"], "samplegen: error: n must be an integer >= 1, got 0"),
    (["simulate", "--n", "nan"], "argument --n: invalid int value: 'nan'"),
    (["simulate", "--batches", "-1"], "batches must be an integer >= 1, got -1"),
    (["simulate", "--batch-size", "nan"], "batch_size must be a finite number >= 0, got nan"),
    (["simulate", "--lambda", "-1"], "must be a finite number >= 0, got -1.0"),
    (["knn", "--runs", "0"], "--runs must be an integer >= 1, got 0"),
    (["knn", "--warmup", "-1"], "--warmup and --tune-runs must be >= 0, got -1"),
    (["knn", "--box", "nan"], "box must be a finite number > 0, got nan"),
    (["regression", "--n", "-3"], "--n must be an integer >= 1, got -3"),
    (["online", "--batch", "0"], "--batch must be an integer >= 1, got 0"),
    (["online", "--fixed-lambda", "nan"], "--fixed-lambda must be a finite number > 0, got nan"),
    (["simulate", "--regime", "sideways"], "argument --regime: invalid choice"),
    (["simulate", "--algorithms", "ttbs,xyz"],
     "--algorithms must list 'ttbs' and/or 'rtbs', got 'xyz'"),
    (["simulate", "--n", "1000", "--mean-batch-size", "10"],
     "mean_batch_size must be >= n * gamma(decay)"),
    (["simulate", "--decay", "poly", "--consolidation-rate", "0.001"],
     "consolidation_rate must be >="),
    (["knn", "--patterns", "P(10)"], "pattern must be 'single' or 'P(d,e)'"),
    (["knn", "--k", "0,3"], "--k must list integers >= 1"),
    (["knn", "--test-batches", "10"], "--test-batches must be >= 20"),
    (["regression", "--penalties", "a,b"], "expected comma-separated numbers"),
]


@pytest.mark.parametrize("argv,words", BAD_VALUES, ids=[" ".join(a) for a, _ in BAD_VALUES])
def test_zero_negative_nan_and_out_of_range_values_are_refused(capsys, tmp_path, argv, words):
    _refused(capsys, tmp_path, argv, words)


HUGE = [
    ["simulate", "--batches", "100000000000"],
    ["simulate", "--batch-size", "1e15", "--batches", "2"],
    ["knn", "--runs", "1000000000000"],
    ["knn", "--test-batches", "1000000000000"],
    ["knn", "--batch", "100000000000"],
    ["regression", "--warmup", "1000000000000"],
    ["online", "--runs", "1000000000000"],
    ["online", "--extra", "100000000"],
]


@pytest.mark.parametrize("argv", HUGE, ids=[" ".join(a) for a in HUGE])
def test_sizes_beyond_memory_are_refused_with_the_estimate_before_any_work(capsys, tmp_path,
                                                                           argv):
    """Sizes no machine holds: refused up front with the estimate and what to
    ask for (a MemoryError, status 1, after allocating what fitted, was the
    answer)."""
    err = _refused(capsys, tmp_path, argv, f"samplegen tbs {argv[0]} would hold about ")
    assert "of memory, more than the" in err and "ask for fewer" in err


OVERFLOW = [
    (["simulate", "--regime", "growing", "--phi", "1e300", "--batches", "300"], "lower phi"),
    (["simulate", "--regime", "periodic", "--period", "3", "--high", "1e300"], "lower high"),
    (["simulate", "--regime", "uniform", "--batch-size", "1e300"], "lower batch_size"),
    (["knn", "--batch-sizes", "growing", "--growth", "1e300"], "lower growth"),
    (["knn", "--batch", "100000000000000000000"], "lower batch"),
]


@pytest.mark.parametrize("argv,words", OVERFLOW, ids=[" ".join(a) for a, _ in OVERFLOW])
def test_batch_sizes_that_overflow_are_refused_naming_the_parameter(capsys, tmp_path, argv,
                                                                    words):
    """Batch sizes past 2**53 (infinity included) were cast to garbage
    integers: an OverflowError, or a negative batch size and a numpy warning."""
    err = _refused(capsys, tmp_path, argv, "batch sizes reach ")
    assert words in err and "(2**53)" in err


MALFORMED = [
    (["simulate", "--algorithms", ""], "--algorithms must list 'ttbs' and/or 'rtbs', got ''"),
    (["simulate", "--algorithms", "rtbs,"], "--algorithms must list 'ttbs' and/or 'rtbs'"),
    (["simulate", "--algorithms", "rtbs,rtbs"], "'rtbs' is listed twice"),
    (["simulate", "--decay", "linear"], "argument --decay: invalid choice: 'linear'"),
    (["knn", "--patterns", ""], "pattern must be 'single' or 'P(d,e)'"),
    (["knn", "--patterns", "P(10,10),,single"], "got ''"),
    (["knn", "--patterns", "P(10,10),P(10,10)"], "'P(10,10)' is listed twice"),
    (["knn", "--patterns", "P(10,10"], "got 'P(10,10'"),
    (["knn", "--schemes", ""], "schemes must be comma-separated exp:LAMBDA, poly:S, sw, unif"),
    (["knn", "--schemes", "sw,"], "schemes must be comma-separated"),
    (["knn", "--schemes", "linear:0.1"], "got 'linear:0.1'"),
    (["knn", "--schemes", "exp:nan"], "must be a finite number >= 0, got nan"),
    (["knn", "--schemes", "sw,sw"], "'sw' and 'sw' are the same scheme"),
    (["knn", "--k", ""], "argument --k: expected comma-separated integers, got ''"),
    (["knn", "--k", "3,,5"], "got '3,,5'"),
    (["regression", "--penalties", "1,,2"], "expected comma-separated numbers, got '1,,2'"),
    (["regression", "--penalties", "1,2,"], "got '1,2,'"),
    (["regression", "--schemes", "exp:0.1,exp:0.10"],
     "'exp:0.1' and 'exp:0.10' are the same scheme (R-TBS exp: lambda = 0.10)"),
    (["online", "--extra", "0,,8"], "expected comma-separated integers, got '0,,8'"),
    (["online", "--extra", "8,8"], "--extra must differ: 8 is listed twice"),
    (["online", "--rates", ""], "expected comma-separated numbers, got ''"),
]


@pytest.mark.parametrize("argv,words", MALFORMED, ids=[" ".join(a) for a, _ in MALFORMED])
def test_malformed_and_repeated_lists_are_refused(capsys, tmp_path, argv, words):
    """An empty list or item, a name listed twice: refused (an empty item was
    skipped, an empty list ran nothing or the default, a repeated scheme or
    pattern silently became one, an empty --k was a ValueError)."""
    _refused(capsys, tmp_path, argv, words)


def test_a_scheme_is_named_by_its_exact_value():
    """exp:0.101 was named 'lambda = 0.10' and, listed with exp:0.1, replaced
    it in the results under that name; the paper's names stay as they were."""
    names = list(ex.make_schemes("exp:0.101,exp:0.1,poly:2,poly:2.25,exp:0.07", 50))
    assert names == ["R-TBS exp: lambda = 0.101", "R-TBS exp: lambda = 0.10",
                     "R-TBS poly: s = 2.0", "R-TBS poly: s = 2.25",
                     "R-TBS exp: lambda = 0.07"]


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_scale_is_refused(capsys, tmp_path, value):
    """online --scale nan ran, and reported NaN errors as results."""
    _refused(capsys, tmp_path, ["online", f"--scale={value}"],
             f"--scale must be a finite number, got {float(value)}")


def test_mean_batch_size_zero_is_refused_not_replaced_by_the_default(capsys, tmp_path):
    """``--mean-batch-size 0`` was taken for 'not given' (the batch size)."""
    _refused(capsys, tmp_path, ["simulate", "--mean-batch-size", "0"],
             "mean_batch_size must be a finite number > 0, got 0.0")


@pytest.mark.parametrize("option", ["--csv", "--plot", "--table"])
def test_an_output_that_is_a_directory_is_refused_before_any_work(capsys, tmp_path, option):
    """Refused up front naming the option and the directory (it was refused
    only after the whole experiment, naming a temporary file)."""
    (tmp_path / "adir").mkdir()
    command = "simulate" if option != "--table" else "online"
    for path in (tmp_path / "adir", f"{tmp_path / 'new'}/"):
        _refused(capsys, tmp_path, [command, option, path],
                 f"{option} {path} is a directory; give the name of a file")
    assert os.listdir(tmp_path / "adir") == []


def test_one_file_for_two_outputs_is_refused(capsys, tmp_path):
    """--table and --csv naming one file: the table was replaced by the CSV."""
    target = tmp_path / "same.txt"
    _refused(capsys, tmp_path, ["knn", "--table", target, "--plot", tmp_path / "p.png",
                                "--csv", target], f"--table and --csv both name {target}")
    alias = tmp_path / "alias"
    alias.symlink_to(tmp_path, target_is_directory=True)
    _refused(capsys, tmp_path, ["regression", "--table", alias / "out.csv"],
             "--table and --csv both name")


def test_a_plot_under_a_file_is_refused_and_under_a_missing_directory_is_made(capsys,
                                                                           tmp_path):
    (tmp_path / "afile").write_text("x")
    _refused(capsys, tmp_path, ["simulate", "--plot", tmp_path / "afile" / "p.png"],
             f"cannot create {tmp_path / 'afile' / 'p.png'}: {tmp_path / 'afile'} is a file")
    plot = tmp_path / "new" / "dir" / "p.png"
    code, _, err = run_cli(capsys, "tbs", "simulate", *SMALL["simulate"], "--plot", plot)
    assert code == 0, err
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
