"""The files of docs/tbs still come out of the code (``make tbs-figures``).

Every table, CSV and plot there names the make target that wrote it, and that
target's recipe in the Makefile writes it.  The commands are taken from the
Makefile itself and rerun in a cheap form:

* sample sizes (figures 3, 6, 7): every batch depends only on the batches
  before it (batch sizes and sampler draws are keyed by the batch), so a run
  of the first N batches must give exactly the first N rows of the committed
  trace;
* the stream experiments (kNN, regression, online learners; 30 runs each):
  the CSV carries the first run's per-batch loss at the tuned value
  (``run1_*``), which one run of the same command with that value reproduces;
  every mean in a table is the mean of its CSV's per-batch means.

A change of a random stream, a sampler's rule, a generator or a Makefile
option therefore fails here until ``make tbs-figures`` is run again.
"""
import csv
import math
import os
import re
import shlex
import struct

import pytest

from tests.conftest import tbs_main as main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "tbs")
SECTION = ("# --- time-biased sampling (tbs/) ---", "# --- hive ---")


@pytest.fixture(autouse=True)
def _one_blas_thread():
    """The reruns are small: BLAS threads waiting for each other on a busy
    machine cost far more than they give (a 200-parameter rerun took 40x as
    long with two threads)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:                            # pragma: no cover - comes with scikit-learn
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield


# ----------------------------------------------------------------------------- the Makefile

def _makefile():
    """(variables, {target: [prerequisites]}, {target: [recipe lines]}) of the tbs section."""
    with open(os.path.join(ROOT, "Makefile")) as fh:
        text = fh.read()
    head = text[:text.index(SECTION[0])]
    section = text[text.index(SECTION[0]):text.index(SECTION[1])]
    variables, deps, recipes, target = {}, {}, {}, None
    for line in head.splitlines() + section.splitlines():
        if line.startswith("\t"):
            if target is not None:
                recipes[target].append(line[1:])
            continue
        m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)\s*[:?]?=\s*(.*)$", line)
        if m:
            variables[m[1]] = m[2]
            continue
        m = re.match(r"^([a-z0-9-]+):(?!=)(.*)$", line)
        if m and line in section:
            target = m[1]
            deps[target], recipes[target] = m[2].split(), []
        elif not line.startswith("#"):
            target = None
    return variables, deps, recipes


def _expand(text, variables, target):
    text = text.replace("$@", target)
    for _ in range(10):
        new = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                     lambda m: variables.get(m[1], ""), text)
        if new == text:
            return text
        text = new
    raise AssertionError(f"Makefile variables do not expand: {text}")


def _commands():
    """[(target, argv after 'samplegen tbs')] of every command tbs-figures runs."""
    variables, deps, recipes = _makefile()
    out = []
    for target in deps["tbs-figures"]:
        for line in recipes[target]:
            words = shlex.split(_expand(line, variables, target))
            if "tbs" in words and words[0].endswith("samplegen"):
                out.append((target, words[words.index("tbs") + 1:]))
    return out


COMMANDS = _commands()


def _option(argv, name):
    return argv[argv.index(name) + 1] if name in argv else None


def _with(argv, **options):
    """``argv`` with options replaced (value None: removed), the outputs dropped."""
    out, skip = [], False
    drop = {"--csv", "--table", "--plot", "--title", "--made-by"} | {
        "--" + k.replace("_", "-") for k in options}
    for word in argv:
        if skip:
            skip = False
        elif word in drop:
            skip = True
        elif word != "--show-weight":
            out.append(word)
    for key, value in options.items():
        if value is not None:
            out += ["--" + key.replace("_", "-"), str(value)]
    return out


def _outputs(argv):
    return [_option(argv, o) for o in ("--csv", "--table", "--plot") if _option(argv, o)]


def _read_csv(path):
    """(first line if it is a '#' comment, else None; rows as dicts) of a CSV."""
    with open(path) as fh:
        lines = fh.readlines()
    first = lines[0] if lines and lines[0].startswith("#") else None
    return first, list(csv.DictReader(lines[1:] if first else lines))


def _png_comment(path):
    """The PNG's tEXt 'Comment' chunk, or None."""
    with open(path, "rb") as fh:
        data = fh.read()
    pos = 8
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + size]
        if kind == b"tEXt" and body.startswith(b"Comment\0"):
            return body[len(b"Comment\0"):].decode("latin-1")
        pos += 12 + size
    return None


# ----------------------------------------------------------------------------- provenance

def test_every_file_names_the_target_that_writes_it():
    written = {}
    for target, argv in COMMANDS:
        for path in _outputs(argv):
            assert path not in written, f"{path} is written twice"
            written[os.path.relpath(path, "docs/tbs")] = target
    present = sorted(os.listdir(OUT))
    assert sorted(written) == present, "docs/tbs and what tbs-figures writes differ"
    for name, target in written.items():
        path = os.path.join(OUT, name)
        made = f"made by: make {target}"
        if name.endswith(".csv"):
            assert _read_csv(path)[0] == f"# {made}\n", name
        elif name.endswith(".md"):
            with open(path) as fh:
                assert fh.read().rstrip().endswith(f"Made by: `make {target}`."), name
        else:
            assert _png_comment(path) == made, name


# ----------------------------------------------------------------------------- sample sizes

#: batches rerun per figure: past the change at k = 200 where the regime changes
#: then; fewer for the slower general-decay (quadratic) samplers
PREFIX = {"fig6": 260, "fig7a": 215, "fig7b": 40, "fig7c": 40, "fig7d": 215, "fig3": 120,
          "consolidation_poly": 160, "consolidation_example": 110}

SIZES = [(t, a) for t, a in COMMANDS if a[0] == "simulate"]


@pytest.mark.parametrize("target, argv", SIZES,
                         ids=[os.path.basename(_option(a, "--csv")) for _, a in SIZES])
def test_sample_size_traces_start_as_the_code_runs_them(target, argv, tmp_path, capsys):
    name = os.path.basename(_option(argv, "--csv"))
    batches = next(v for k, v in PREFIX.items() if name.startswith(k))
    out = tmp_path / "prefix.csv"
    assert main(_with(argv, batches=batches, csv=out)) == 0
    capsys.readouterr()
    with open(out) as fh:
        fresh = list(csv.DictReader(fh))
    _, committed = _read_csv(os.path.join(OUT, name))
    assert int(_option(argv, "--batches")) * len({r["algorithm"] for r in committed}) == len(
        committed)
    kept = [r for r in committed if int(r["batch"]) <= batches]
    assert fresh == kept, f"{name} no longer comes out of `make {target}`"


# ----------------------------------------------------------------------------- stream experiments

STREAMS = [(t, a) for t, a in COMMANDS if a[0] in ("knn", "regression", "online")
           and _option(a, "--csv")]


def _first_pattern(argv):
    if argv[0] == "online":
        return _option(argv, "--pattern") or "P(10,10)"
    patterns = _option(argv, "--patterns")
    if patterns is None:
        return "P(10,10)"
    return "P(10,10)" if "P(10,10)" in patterns else patterns.split(",")[0]


@pytest.mark.parametrize("target, argv", STREAMS,
                         ids=[os.path.basename(_option(a, "--csv")) for _, a in STREAMS])
def test_first_run_of_each_stream_experiment_is_reproduced(target, argv, tmp_path, capsys):
    name = os.path.basename(_option(argv, "--csv"))
    _, committed = _read_csv(os.path.join(OUT, name))
    out = tmp_path / "run1.csv"
    if argv[0] == "online":
        extra = committed[0]["stable_parameters"]
        rows = [r for r in committed if r["stable_parameters"] == extra]
        value = {r["method"]: r["value"] for r in rows}
        lam, _, penalty = value["R-TBS"].partition("/")     # ridge: "rate/penalty"
        rerun = _with(argv, runs=1, tune_runs=0, extra=extra, lambdas=lam, rates=value["OGD"],
                      mus=value["Prox"], csv=out, penalties=penalty or None)
        assert main(rerun) == 0
        capsys.readouterr()
        fresh = {(r["method"], r["t"]): r["run1_mse"] for r in _read_csv(out)[1]}
        # R-TBS fixed was tuned to its own penalty: compared when it is R-TBS's
        same = {m for m in value if m != "R-TBS fixed"
                or value[m].partition("/")[2] == penalty}
        for r in (r for r in rows if r["method"] in same):
            assert fresh[(r["method"], r["t"])] == r["run1_mse"], (
                f"{name}: {r['method']} at t = {r['t']} no longer comes out of `make {target}`")
        return
    pattern = _first_pattern(argv)
    hname, loss = ("k", "run1_miss") if argv[0] == "knn" else ("penalty", "run1_mse")
    rows = [r for r in committed if r["pattern"] == pattern]
    assert rows, f"{name}: no rows for {pattern}"
    # one rerun, at the value most schemes were tuned to (the others' streams
    # are checked in the files where theirs is the common value)
    chosen = [r[hname] for r in rows]
    values = [max(set(chosen), key=chosen.count)]
    option = "k" if argv[0] == "knn" else "penalties"
    for value in values:
        assert main(_with(argv, runs=1, tune_runs=0, patterns=pattern,
                          **{option: value, "csv": out})) == 0
        capsys.readouterr()
        fresh = {(r["scheme"], r["t"]): r[loss] for r in _read_csv(out)[1]}
        for r in rows:
            if r[hname] == value:
                assert fresh[(r["scheme"], r["t"])] == r[loss], (
                    f"{name}: {r['scheme']} at t = {r['t']} no longer comes out of "
                    f"`make {target}`")


RUNTIME = [(t, a) for t, a in COMMANDS if a[0] == "runtime"]


@pytest.mark.parametrize("target, argv", RUNTIME,
                         ids=[os.path.basename(_option(a, "--csv")) for _, a in RUNTIME])
def test_runtime_counts_are_reproduced(target, argv, tmp_path, capsys):
    # the times depend on the machine; what each update put into the sample
    # depends only on the seed: the first timed batches of the first rate
    name = os.path.basename(_option(argv, "--csv"))
    _, committed = _read_csv(os.path.join(OUT, name))
    lam = committed[0]["lambda"]
    out = tmp_path / "runtime.csv"
    assert main(_with(argv, lambdas=lam, batches=2, csv=out)) == 0
    capsys.readouterr()
    fresh = [(r["batch"], r["inserted"]) for r in _read_csv(out)[1]]
    assert fresh == [(r["batch"], r["inserted"]) for r in committed if r["lambda"] == lam][:2], (
        f"{name} no longer comes out of `make {target}`")


def _md_rows(path):
    """Header cells and body rows (lists of cells) of the first table of a Markdown file."""
    with open(path) as fh:
        lines = [line for line in fh.read().splitlines() if line.startswith("|")]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    return cells[0], cells[2:]


def _number(cell):
    return float(cell.split()[0])


TABLES = [(t, a) for t, a in STREAMS if _option(a, "--table")]


@pytest.mark.parametrize("target, argv", TABLES,
                         ids=[os.path.basename(_option(a, "--table")) for _, a in TABLES])
def test_table_means_are_the_means_of_their_csv(target, argv):
    _, committed = _read_csv(os.path.join(OUT, os.path.basename(_option(argv, "--csv"))))
    head, body = _md_rows(os.path.join(OUT, os.path.basename(_option(argv, "--table"))))
    if argv[0] == "online":
        for row in body:
            for method in ("R-TBS", "Prox", "OGD", "R-TBS fixed"):
                if f"{method} MSE" not in head:
                    continue
                values = [float(r["mean_mse"]) for r in committed
                          if r["stable_parameters"] == row[0] and r["method"] == method]
                mean = math.fsum(values) / len(values)
                assert abs(_number(row[head.index(f"{method} MSE")]) - mean) <= 0.0051, (
                    row[0], method)
                column = next(f"{method} {h}" for h in _hnames(method)
                              if f"{method} {h}" in head)
                tuned = row[head.index(column)].split()[0]
                assert {r["value"] for r in committed if r["stable_parameters"] == row[0]
                        and r["method"] == method} == {tuned}
        return
    column = "mean_miss" if argv[0] == "knn" else "mean_mse"
    checked = 0
    for row in body:
        for j, title in enumerate(head):
            if not title.endswith(("Miss%", "MSE")):
                continue
            pattern = "single" if title.startswith("Single event") else title.split()[0]
            values = [float(r[column]) for r in committed
                      if r["pattern"] == pattern and r["scheme"] == row[0]
                      and r[column] != "nan"]
            mean = math.fsum(values) / len(values)
            assert abs(_number(row[j]) - mean) <= 0.051, (row[0], pattern)
            checked += 1
    assert checked >= 3


def _hnames(method):
    return {"Prox": ["mu"], "OGD": ["rate"]}.get(method, ["lambda", "lambda/penalty"])
