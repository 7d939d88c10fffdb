"""What exact sizes, balanced folds and stratification cost over the
paper's per-row coins, end to end, and samplegen.model_selection against
scikit-learn's splitters, in one run each.

    .venv/bin/python bench/bench_exact.py --rows 1000000 --cols 100 --repeats 3 \\
        --runners embedded,spark --workdir work/bench-exact

Jobs (``--only jobs``): one matrix of ROWS x COLS whose last column holds
one of three classes (60 / 30 / 10 %), imported twice from the same Parquet
file: without a label (a stratified run reads the label column's blocks
first: the pre-pass) and with ``--label y`` (the classes recorded at
import).  Cases: a hold-out pair (ratio 0.8), 5 folds in fold mode, 5
bootstrap samples; each with the paper's coins, with exact sizes / balanced
folds, and stratified (pre-pass and recorded).  In every repeat each variant
of a case runs once, in turn; the tables give medians and the ratio to the
coins.

Splitters (``--only splitters``): ``split`` over arrays of ROWS rows,
drawing every (train, test) pair, against scikit-learn's splitter of the
same name, median of ``--repeats`` interleaved runs.

Results print as Markdown and are saved as JSON (``WORKDIR/exact.json``).
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_embedded import machine  # noqa: E402
from bench_mr import du  # noqa: E402

from samplegen.jobs import driver  # noqa: E402

SEED = 7
CLASS_SHARES = (0.6, 0.3, 0.1)

#: case -> (label, UDF, [(variant, matrix, params)])
CASES = {
    "holdout": ("a hold-out pair, ratio 0.8", "holdout", [
        ("coins", "plain", {"ratio": 0.8, "exact": False}),
        ("exact", "plain", {"ratio": 0.8}),
        ("stratified, pre-pass", "plain", {"ratio": 0.8, "stratify": "y"}),
        ("stratified, recorded", "labelled", {"ratio": 0.8, "stratify": "y"})]),
    "kfold": ("5 folds, fold mode", "kfold", [
        ("coins", "plain", {"k": 5, "balanced": False}),
        ("balanced", "plain", {"k": 5}),
        ("stratified, pre-pass", "plain", {"k": 5, "stratify": "y"}),
        ("stratified, recorded", "labelled", {"k": 5, "stratify": "y"})]),
    "bootstrap": ("5 bootstrap samples", "bootstrap", [
        ("coins", "plain", {"samples": 5}),
        ("stratified, pre-pass", "plain", {"samples": 5, "stratify": "y"}),
        ("stratified, recorded", "labelled", {"samples": 5, "stratify": "y"})]),
}


def inputs(workdir, rows, cols, block_size):
    """The two matrices (``plain``, ``labelled``), made once per shape."""
    import pandas as pd
    base = os.path.join(workdir, f"input-{rows}x{cols}-{block_size}")
    done = os.path.join(base, "done")
    paths = {"plain": os.path.join(base, "plain"), "labelled": os.path.join(base, "labelled")}
    if os.path.exists(done):
        return paths
    shutil.rmtree(base, ignore_errors=True)
    os.makedirs(base)
    rng = np.random.default_rng(SEED)
    frame = pd.DataFrame({f"x{j}": rng.standard_normal(rows) for j in range(cols - 1)})
    frame["y"] = rng.choice(len(CLASS_SHARES), size=rows, p=CLASS_SHARES).astype(float)
    parquet = os.path.join(base, "rows.parquet")
    frame.to_parquet(parquet, engine="fastparquet")
    del frame
    driver.import_file(parquet, paths["plain"], block_size)
    driver.import_file(parquet, paths["labelled"], block_size, label="y")
    os.remove(parquet)
    open(done, "w").close()
    return paths


def timed_run(src, dest, udf, params, runner):
    shutil.rmtree(dest, ignore_errors=True)
    t = time.perf_counter()
    driver.generate(src, dest, udf, params, SEED, runner=runner, options={"mrjob_conf": ""})
    seconds = time.perf_counter() - t
    nbytes = du(dest)
    shutil.rmtree(dest, ignore_errors=True)
    return seconds, nbytes


def exp_jobs(args):
    paths = inputs(args.workdir, args.rows, args.cols, args.block_size)
    out = os.path.join(args.workdir, "out")
    runs = {}
    if "spark" in args.runners:
        from samplegen.jobs.engines.spark.context import start_context
        start_context("local[2]", {"spark.ui.enabled": "false"}, quiet=True)
    for runner in args.runners:     # warm up (Spark's first job starts its workers)
        timed_run(paths["plain"], out, "holdout", {"ratio": 0.8, "exact": False}, runner)
    for _ in range(args.repeats):
        for runner in args.runners:
            for case, (_, udf, variants) in CASES.items():
                for variant, matrix, params in variants:
                    seconds, nbytes = timed_run(paths[matrix], out, udf, params, runner)
                    runs.setdefault((runner, case, variant), []).append(seconds)
                    print(f"{runner} {case} {variant}: {seconds:.1f} s", file=sys.stderr)
    return {"rows": args.rows, "cols": args.cols, "block_size": args.block_size,
            "input_bytes": du(paths["plain"]),
            "runs": [{"runner": r, "case": c, "variant": v, "runs": s,
                      "seconds": statistics.median(s)} for (r, c, v), s in runs.items()]}


def report_jobs(res):
    by = {(r["runner"], r["case"], r["variant"]): r for r in res["runs"]}
    runners = sorted({r["runner"] for r in res["runs"]}, key=["embedded", "spark"].index)
    lines = [f"**{res['rows']:,} x {res['cols']}** ({res['input_bytes'] / 1e6:.0f} MB of block "
             f"files, block size {res['block_size']}); medians, and the ratio to the coins", "",
             "| task | variant | " + " | ".join(f"{r} s | {r} / coins" for r in runners) + " |",
             "|---|---|" + "---:|---:|" * len(runners)]
    for case, (label, _, variants) in CASES.items():
        for variant, _, _ in variants:
            cells = [label, variant]
            for runner in runners:
                s = by[(runner, case, variant)]["seconds"]
                base = by[(runner, case, "coins")]["seconds"]
                cells += [f"{s:.1f}", f"{s / base:.2f}x"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# splitters
# ---------------------------------------------------------------------------
def splitter_pairs():
    import sklearn.model_selection as skms

    import samplegen.model_selection as ours
    return [
        ("KFold(10)", lambda m: m.KFold(10, shuffle=True, random_state=SEED)
         if m is skms else m.KFold(10, seed=SEED)),
        ("StratifiedKFold(10)", lambda m: m.StratifiedKFold(10, shuffle=True,
                                                            random_state=SEED)
         if m is skms else m.StratifiedKFold(10, seed=SEED)),
        ("GroupKFold(10)", lambda m: m.GroupKFold(10) if m is skms else m.GroupKFold(10,
                                                                                 seed=SEED)),
        ("ShuffleSplit(10, test 0.2)", lambda m: m.ShuffleSplit(10, test_size=0.2,
                                                                random_state=SEED)),
        ("StratifiedShuffleSplit(10, test 0.2)",
         lambda m: m.StratifiedShuffleSplit(10, test_size=0.2, random_state=SEED)),
        ("TimeSeriesSplit(5)", lambda m: m.TimeSeriesSplit(5)),
    ], (ours, skms)


def exp_splitters(args):
    rng = np.random.default_rng(SEED)
    X = np.empty((args.rows, 1))
    y = rng.choice(len(CLASS_SHARES), size=args.rows, p=CLASS_SHARES)
    groups = rng.integers(0, args.rows // 20, size=args.rows)
    cases, (ours, skms) = splitter_pairs()
    runs = {}
    for rep in range(args.repeats):
        for label, make in cases:
            order = [("samplegen", ours), ("scikit-learn", skms)]
            for who, module in order if rep % 2 == 0 else order[::-1]:
                splitter = make(module)
                t = time.perf_counter()
                for _pair in splitter.split(X, y, groups):
                    pass
                runs.setdefault((label, who), []).append(time.perf_counter() - t)
    return {"rows": args.rows, "runs": [{"splitter": s, "who": w, "runs": r,
                                         "seconds": statistics.median(r)}
                                        for (s, w), r in runs.items()]}


def report_splitters(res):
    by = {(r["splitter"], r["who"]): r["seconds"] for r in res["runs"]}
    lines = [f"**Splitters on {res['rows']:,} rows** (every pair drawn; medians)", "",
             "| splitter | samplegen s | scikit-learn s | samplegen / scikit-learn |",
             "|---|---:|---:|---:|"]
    for label in dict.fromkeys(r["splitter"] for r in res["runs"]):
        a, b = by[(label, "samplegen")], by[(label, "scikit-learn")]
        lines.append(f"| {label} | {a:.3f} | {b:.3f} | {a / b:.2f}x |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--cols", type=int, default=100)
    p.add_argument("--block-size", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--runners", default="embedded", help="embedded,spark")
    p.add_argument("--only", choices=("jobs", "splitters"), default=None)
    p.add_argument("--workdir", default="work/bench-exact")
    args = p.parse_args(argv)
    args.runners = args.runners.split(",")
    os.makedirs(args.workdir, exist_ok=True)
    results = {"machine": machine()}
    if args.only in (None, "splitters"):
        results["splitters"] = exp_splitters(args)
        print(report_splitters(results["splitters"]) + "\n")
    if args.only in (None, "jobs"):
        results["jobs"] = exp_jobs(args)
        print(report_jobs(results["jobs"]) + "\n")
    path = os.path.join(args.workdir, "exact.json")
    if os.path.exists(path):      # keep what another --only wrote
        with open(path) as f:
            results = {**json.load(f), **results}
    with open(path, "w") as f:
        json.dump(results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
