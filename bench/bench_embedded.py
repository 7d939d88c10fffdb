"""Embedded engine benchmark: ``--runner embedded`` next to the I/O floor
(read the input once, write the output's bytes once, bypassing the page
cache as the part-file writer does), numpy's gathers on the array in memory,
scikit-learn's splitters and mrjob's ``local`` runner, in one run.

    .venv/bin/python bench/bench_embedded.py --sizes 200000,1000000 --local-sizes 200000 \\
        --repeats 3 --workdir work/bench-embedded

Cases: 10 hold-out pairs (ratio 0.8), 10-fold cross-validation in fold mode
and naive, 20 bootstrap samples.  In every repeat each contender runs each
case once, in turn (interleaved, so drift hits all alike); the tables give
medians.  numpy and scikit-learn gather the rows of every sample from the
array in memory and write nothing (their k-fold is the naive one: every
training set materialized).

``--only pools`` measures the other side of the engine's threads: the same
job on a process pool (``embedded_processes.py``), interleaved with the
threads, on the first size, plus a scalar (per-row Python) UDF.

Results print as Markdown and are saved as JSON (``--json``, default
``WORKDIR/results.json``).
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_mr import du, io_floor  # noqa: E402
from bench_spark import (  # noqa: E402
    COUNTS,
    matrix_for,
    numpy_bootstrap,
    numpy_holdout,
    numpy_kfold,
    sklearn_bootstrap,
    sklearn_holdout,
    sklearn_kfold,
)

from samplegen.jobs import driver, engines  # noqa: E402
from samplegen.jobs.store import Matrix  # noqa: E402

SEED = 7
CASES = [("holdout", "10 hold-out pairs", "holdout", {"ratio": 0.8, "repeats": 10, "exact": False}),
         ("kfold", "k = 10, fold mode", "kfold", {"k": 10, "balanced": False}),
         ("kfold-naive", "k = 10, naive", "kfold", {"k": 10, "naive": True, "balanced": False}),
         ("bootstrap", "20 bootstrap samples", "bootstrap", {"samples": 20})]
PEERS = {"holdout": ("holdout", numpy_holdout, sklearn_holdout),
         "kfold": ("kfold", numpy_kfold, sklearn_kfold),
         "kfold-naive": ("kfold", numpy_kfold, sklearn_kfold),
         "bootstrap": ("bootstrap", numpy_bootstrap, sklearn_bootstrap)}


def timed(fn):
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def generate(src, dest, udf, params, runner, **options):
    """One run; returns (seconds, output bytes, engine statistics)."""
    shutil.rmtree(dest, ignore_errors=True)
    stats = []
    seconds, _ = timed(lambda: driver.generate(
        src, dest, udf, params, SEED, runner=runner,
        options=dict(options, mrjob_conf="", on_task_stats=stats.append)))
    nbytes = du(dest)
    shutil.rmtree(dest, ignore_errors=True)
    return seconds, nbytes, (stats or [None])[0]


class Times:
    """Seconds of interleaved repeats by (case, contender); medians."""

    def __init__(self):
        self.runs, self.extra = {}, {}

    def add(self, case, who, seconds, **extra):
        self.runs.setdefault((case, who), []).append(seconds)
        self.extra.setdefault((case, who), {}).update(extra)

    def median(self, case, who):
        runs = [r for r in self.runs.get((case, who), []) if r is not None]
        return statistics.median(runs) if runs else None

    def rows(self):
        return [dict(self.extra[key], case=key[0], contender=key[1], runs=runs,
                     seconds=self.median(*key)) for key, runs in self.runs.items()]


def exp_peers(args, rows, with_local):
    src = matrix_for(args.workdir, rows, args.cols, args.block_size)
    X = Matrix.open(src).to_numpy()[1]
    out = os.path.join(args.workdir, "out")
    t = Times()
    for _ in range(args.repeats):
        for case, _, udf, params in CASES:
            seconds, nbytes, stats = generate(src, out, udf, params, "embedded")
            t.add(case, "embedded", seconds, output_bytes=nbytes, stats=stats)
            t.add(case, "io-floor", io_floor(src, nbytes, args.workdir))
            if with_local:
                try:
                    t.add(case, "local", generate(src, out, udf, params, "local")[0])
                except Exception as exc:  # e.g. no room for its intermediate files
                    t.add(case, "local", None, failed=f"{type(exc).__name__}: {exc}")
                    shutil.rmtree(out, ignore_errors=True)
            kind, np_fn, sk_fn = PEERS[case]
            t.add(case, "numpy", timed(lambda fn=np_fn, kind=kind: fn(X, COUNTS[kind]))[0])
            t.add(case, "sklearn", timed(lambda fn=sk_fn, kind=kind: fn(X, COUNTS[kind]))[0])
    return {"rows": rows, "cols": args.cols, "block_size": args.block_size,
            "input_bytes": du(src), "local": with_local, "cases": t.rows()}


def exp_pools(args):
    """Threads (the engine) against a process pool, same job, interleaved."""
    import embedded_processes  # noqa: F401  (bench/ is on sys.path)
    engines.ENGINES["embedded-processes"] = "embedded_processes:run"
    rows = args.sizes[0]
    src = matrix_for(args.workdir, rows, args.cols, args.block_size)
    out = os.path.join(args.workdir, "out")
    cases = CASES + [("scalar", "a scalar UDF, 2 hold-out pairs",
                      "samplegen.udfs.examples:paper_holdout_series",
                      {"ratio": 0.8, "repeats": 2})]
    t = Times()
    for rep in range(args.repeats):
        for case, _, udf, params in cases:
            order = ["embedded", "embedded-processes"]
            for runner in order if rep % 2 == 0 else order[::-1]:
                t.add(case, runner, generate(src, out, udf, params, runner)[0])
    return {"rows": rows, "cols": args.cols, "cases": t.rows(),
            "labels": {case: label for case, label, _, _ in cases}}


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------
def _s(x):
    return "" if x is None else f"{x:.2f}" if x < 10 else f"{x:.1f}"


def report_peers(res):
    by = {(r["case"], r["contender"]): r for r in res["cases"]}
    lines = [f"**{res['rows']:,} x {res['cols']}** ({res['input_bytes'] / 1e6:.0f} MB of block "
             f"files, block size {res['block_size']})", "",
             "| task | embedded s | runs | I/O floor s | embedded / floor | numpy s | "
             "scikit-learn s | mrjob local s | local / embedded | output / input |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for case, label, _, _ in CASES:
        ours, local = by[(case, "embedded")], by.get((case, "local"))
        floor = by[(case, "io-floor")]["seconds"]
        cells = [label, _s(ours["seconds"]), ", ".join(_s(x) for x in ours["runs"]), _s(floor),
                 f"{ours['seconds'] / floor:.2f}x", _s(by[(case, "numpy")]["seconds"]),
                 _s(by[(case, "sklearn")]["seconds"]),
                 (_s(local["seconds"]) if local["seconds"] else "failed") if local else "not run",
                 f"{local['seconds'] / ours['seconds']:.1f}x" if local and local["seconds"] else "",
                 f"{ours['output_bytes'] / res['input_bytes']:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    fold, naive = by[("kfold", "embedded")]["seconds"], by[("kfold-naive", "embedded")]["seconds"]
    lines += ["", f"Fold mode against naive at k = 10: {naive / fold:.1f}x faster "
                  f"({_s(fold)} s against {_s(naive)} s)."]
    return "\n".join(lines)


def report_pools(res):
    by = {(r["case"], r["contender"]): r for r in res["cases"]}
    lines = [f"**Threads or processes**, {res['rows']:,} x {res['cols']}", "",
             "| task | threads s | runs | processes s | runs | processes / threads |",
             "|---|---:|---|---:|---|---:|"]
    for case, label in res["labels"].items():
        a, b = by[(case, "embedded")], by[(case, "embedded-processes")]
        lines.append(f"| {label} | {_s(a['seconds'])} | {', '.join(_s(x) for x in a['runs'])} | "
                     f"{_s(b['seconds'])} | {', '.join(_s(x) for x in b['runs'])} | "
                     f"{b['seconds'] / a['seconds']:.2f} |")
    return "\n".join(lines)


def machine():
    info = {"cpus": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "platform": platform.platform(),
            "load_average_at_start": os.getloadavg()}
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE,
                                capture_output=True, text=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=HERE, capture_output=True, text=True)
        info["commit"] = commit.stdout.strip() + (" (with local changes)" if dirty.stdout
                                                  else "")
    except OSError:
        pass
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="200000,1000000", help="input rows, comma-separated")
    ap.add_argument("--local-sizes", default="200000",
                    help="the sizes at which mrjob's local runner runs too ('' for none)")
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--block-size", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", default="peers", help="peers, pools or peers,pools")
    ap.add_argument("--workdir", default="work/bench-embedded")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    local_sizes = {int(s) for s in args.local_sizes.split(",") if s}
    os.makedirs(args.workdir, exist_ok=True)
    path = args.json or os.path.join(args.workdir, "results.json")
    results = {"machine": machine(), "command": " ".join([sys.executable] + sys.argv),
               "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}

    def save():
        results["load_average_at_end"] = os.getloadavg()
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
    t0 = time.time()
    if "peers" in args.only:
        results["peers"] = []
        for rows in args.sizes:
            results["peers"].append(exp_peers(args, rows, rows in local_sizes))
            print(report_peers(results["peers"][-1]) + "\n", flush=True)
            save()
    if "pools" in args.only:
        results["pools"] = exp_pools(args)
        print(report_pools(results["pools"]) + "\n", flush=True)
    results["elapsed_seconds"] = round(time.time() - t0, 1)
    save()
    print(f"load average {results['machine']['load_average_at_start']} at start, "
          f"{results['load_average_at_end']} at the end; {results['elapsed_seconds']} s; "
          f"results: {path}")


if __name__ == "__main__":
    main()
