"""Weighted samples of a matrix's rows at scale: ``samplegen weighted`` on the
embedded engine next to the I/O floor, and ``samplegen.spark.weighted`` on a
DataFrame next to the sort-based exponential-variate query.

Input: ROWS x COLS doubles (default 10**6 x 100), column ``w`` of
gamma(0.5) weights (every 13th row 0), the rest normal; as a block matrix
(block size 1000, ``samplegen import`` of an ``.npy``) and as a Parquet
DataFrame with a row-id column ``id``.

* **embedded** (``--runner embedded``, its defaults): exactly K rows without
  replacement, K draws with replacement (K = the row count: a weighted
  bootstrap as large as the input), and K rows expected (Poisson), each
  against the I/O floor of its output's bytes (``bench_mr.io_floor``: read
  every part file once, write the bytes with the part-file writer);
* **Spark** (local[2]): exactly K rows without replacement, written as
  Parquet: ``samplegen.spark.weighted(df, "w", seed, "id", size=K)`` against
  ``df.where(w > 0).orderBy(-log(rand(seed)) / w).limit(K)`` (the same
  law: the K smallest exponential keys; the sort-based form; a zero weight
  would divide by zero under ANSI SQL), both written with ``.write.parquet``.

Repeats interleave the contenders; medians.

    .venv/bin/python bench/bench_weighted_jobs.py [--rows 1000000] [--k 10000] [--repeats 3]
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "bench"))

from bench_mr import du, io_floor  # noqa: E402

from samplegen.jobs import driver  # noqa: E402


def inputs(workdir, rows, cols):
    """``(matrix dir, parquet dir)`` of the benchmark's rows, made once."""
    matrix, parquet = (os.path.join(workdir, f"{name}-{rows}x{cols}")
                       for name in ("matrix", "parquet"))
    if os.path.exists(os.path.join(matrix, "_SUCCESS")) and os.path.exists(parquet):
        return matrix, parquet
    rng = np.random.default_rng(1)
    X = rng.normal(size=(rows, cols))
    X[:, 0] = rng.gamma(0.5, size=rows) * (np.arange(rows) % 13 != 0)
    npy = os.path.join(workdir, "x.npy")
    np.save(npy, X)
    shutil.rmtree(matrix, ignore_errors=True)
    driver.import_file(npy, matrix, 1000)
    os.remove(npy)
    import pyarrow as pa
    import pyarrow.parquet as pq
    table = pa.table({"id": np.arange(rows, dtype=np.int64), "w": X[:, 0],
                      **{f"c{j}": X[:, j] for j in range(1, cols)}})
    shutil.rmtree(parquet, ignore_errors=True)
    os.makedirs(parquet)
    pq.write_table(table, os.path.join(parquet, "part-0.parquet"), row_group_size=1 << 17)
    return matrix, parquet


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def embedded(matrix, out, params):
    shutil.rmtree(out, ignore_errors=True)
    seconds = timed(lambda: driver.generate(matrix, out, "weighted", dict(params, weights="0"),
                                            7, options={"mrjob_conf": ""}))
    nbytes = du(out)
    shutil.rmtree(out, ignore_errors=True)
    return seconds, nbytes


def spark_runs(parquet, workdir, k, repeats):
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from samplegen import spark as sg
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)   # the workers: this Python
    session = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \
        .config("spark.driver.memory", "6g").getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    df = session.read.parquet(parquet)
    out = os.path.join(workdir, "spark-out")

    def ours():
        sg.weighted(df, "w", 7, "id", size=k)[0].write.mode("overwrite").parquet(out)

    def by_sort():
        df.where(F.col("w") > 0).orderBy(-F.log(F.rand(7)) / F.col("w")).limit(k) \
            .write.mode("overwrite").parquet(out)

    times = {"samplegen.spark.weighted": [], "orderBy(-log(rand()) / w).limit(K)": []}
    ours()                                     # warm: the packages shipped, the JIT
    for rep in range(repeats):
        order = list(times.items())
        for name, runs in (order if rep % 2 == 0 else order[::-1]):
            runs.append(timed(ours if name.startswith("samplegen") else by_sort))
    rows = session.read.parquet(out).count()
    session.stop()
    shutil.rmtree(out, ignore_errors=True)
    return times, rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10**6)
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--k", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", default=os.path.join(HERE, "work", "bench-weighted"))
    ap.add_argument("--only", default="embedded,spark")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    load = os.getloadavg()
    matrix, parquet = inputs(args.workdir, args.rows, args.cols)
    result = {"rows": args.rows, "cols": args.cols, "k": args.k, "load_at_start": load,
              "python": platform.python_version(), "numpy": np.__version__}
    if "embedded" in args.only:
        cases = [(f"exactly {args.k:,} rows, without replacement", {"size": args.k}),
                 (f"{args.rows:,} draws with replacement", {"size": args.rows, "replace": True}),
                 (f"{args.k * 10:,} rows expected (Poisson)", {"expected": args.k * 10})]
        times = {label: ([], []) for label, _ in cases}
        sizes = {}
        for _ in range(args.repeats):
            for label, params in cases:
                seconds, nbytes = embedded(matrix, os.path.join(args.workdir, "out"), params)
                times[label][0].append(seconds)
                times[label][1].append(io_floor(matrix, nbytes, args.workdir))
                sizes[label] = nbytes
        print(f"**embedded, {args.rows:,} x {args.cols}** ({du(matrix) / 1e6:.0f} MB of block "
              "files)\n")
        print("| case | embedded s | runs | I/O floor s | embedded / floor | output MB |")
        print("|---|---:|---|---:|---:|---:|")
        result["embedded"] = {}
        for label, (ours, floor) in times.items():
            m, f = statistics.median(ours), statistics.median(floor)
            print(f"| {label} | {m:.2f} | {', '.join(f'{x:.2f}' for x in ours)} | {f:.2f} | "
                  f"{m / f:.2f}x | {sizes[label] / 1e6:.0f} |")
            result["embedded"][label] = {"runs": ours, "floor": floor, "bytes": sizes[label]}
    if "spark" in args.only:
        times, rows = spark_runs(parquet, args.workdir, args.k, args.repeats)
        ours = statistics.median(times["samplegen.spark.weighted"])
        print(f"\n**Spark local[2], {args.rows:,} x {args.cols} Parquet, exactly {args.k:,} "
              f"rows** ({rows:,} written)\n")
        print("| contender | median s | runs | over samplegen's |")
        print("|---|---:|---|---:|")
        for name, runs in times.items():
            m = statistics.median(runs)
            print(f"| {name} | {m:.2f} | {', '.join(f'{x:.2f}' for x in runs)} | "
                  f"{m / ours:.2f}x |")
        result["spark"] = times
    print(f"\nload average {load} at start, {os.getloadavg()} at the end")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
