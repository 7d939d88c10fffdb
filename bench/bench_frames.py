"""DataFrame benchmark: samplegen.spark against what Spark users write, on
one DataFrame, in one run.

    .venv/bin/python bench/bench_frames.py              # 1,000,000 x 100 (make bench-frames)
    .venv/bin/python bench/bench_frames.py --quick      # smoke run, 20,000 rows

Input: a Parquet file of ``--rows`` x ``--cols`` doubles and a ``row_id``
column (0..rows-1), read by every contender.  Tasks, each written as Parquet
(one directory per sample) and into Spark's no-op sink:

* 20 hold-out samples (10 pairs, ratio 0.8): ``samplegen.spark.tag`` (every
  sample in one pass, ``partitionBy("sample")``) against ``randomSplit`` per
  pair on the cached DataFrame;
* 10 folds: ``tag`` writing the folds once (a training set is the other
  folds' directories: dynamic composition), and ``kfold`` writing all 20
  sets (``persist=True``), against ``randomSplit`` into 10 folds + unions;
* 20 bootstrap samples of exactly ``rows`` rows: ``tag`` (distributed
  multinomial, keyed by ``row_id``) against Poisson ``sample(withReplacement
  =True, fraction=1.0)`` (sizes not exact: their deviation is reported).

The peers cache the DataFrame first (what their users do; in their time).
Every timing is the median of ``--repeats`` interleaved runs; the ratios
are medians of per-repeat ratios (peer / ours).  Results print as Markdown
and are saved as JSON (``--json``, default ``WORKDIR/results.json``).
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_spark import (  # noqa: E402
    _collect_garbage,
    df_bootstrap,
    df_holdout,
    df_kfold,
    matrix_for,
    run_peer,
    write_df,
)

from samplegen import spark as sg  # noqa: E402
from samplegen.jobs.engines.spark import context  # noqa: E402
from samplegen.jobs.formats import export  # noqa: E402
from samplegen.jobs.store import Matrix  # noqa: E402

SEED = 7
COUNTS = {"holdout": 10, "kfold": 10, "bootstrap": 20}


def parquet_with_ids(workdir, rows, cols):
    src = matrix_for(workdir, rows, cols, 1000)
    path = src + ".ids.parquet"
    if not os.path.exists(path):
        export(Matrix.open(src), path, row_ids=True)
    return path


def write_tagged(frame, sink, out):
    if sink == "parquet":
        frame.write.mode("overwrite").partitionBy("sample").parquet(out)
    else:
        write_df(frame, "noop", out)


def ours_holdout(spark, parquet, sink, out, pairs):
    df = spark.read.parquet(parquet)
    write_tagged(sg.tag(df, "holdout", SEED, "row_id", ratio=0.8, repeats=pairs, exact=False),
                 sink, out)


def ours_folds(spark, parquet, sink, out, k):
    df = spark.read.parquet(parquet)
    write_tagged(sg.tag(df, "kfold", SEED, "row_id", k=k, balanced=False), sink, out)


def ours_kfold_sets(spark, parquet, sink, out, k):
    df = spark.read.parquet(parquet)
    pairs = sg.kfold(df, k, SEED, "row_id", persist=True, balanced=False)
    for i, (train, test) in enumerate(pairs):
        write_df(test, sink, os.path.join(out, f"test-{i}"))
        write_df(train, sink, os.path.join(out, f"train-{i}"))
    train.unpersist()


def ours_bootstrap(spark, parquet, sink, out, samples):
    df = spark.read.parquet(parquet)
    write_tagged(sg.tag(df, "bootstrap", SEED, "row_id", samples=samples), sink, out)


CASES = [  # (task, contender, function)
    ("holdout", "samplegen.spark (tag, one pass)", ours_holdout),
    ("holdout", "randomSplit per pair", df_holdout),
    ("kfold", "samplegen.spark (folds once, tag)", ours_folds),
    ("kfold", "samplegen.spark (kfold, 20 sets)", ours_kfold_sets),
    ("kfold", "randomSplit + unions", df_kfold),
    ("bootstrap", "samplegen.spark (tag, exact size)", ours_bootstrap),
    ("bootstrap", "Poisson sample", df_bootstrap),
]


def run(args):
    sc = context.start_context(args.master, {"spark.ui.enabled": "false",
                                             "spark.driver.memory": args.driver_memory},
                               quiet=True)
    from pyspark.sql import SparkSession
    spark = SparkSession(sc)
    if not args.dictionary:  # the same writer for every contender either way
        spark.conf.set("parquet.enable.dictionary", "false")
    parquet = parquet_with_ids(args.workdir, args.rows, args.cols)
    out = os.path.join(args.workdir, "out")
    times = {}
    # warm-up: JVM, Python workers, the packages shipped
    ours_holdout(spark, parquet, "noop", out, 1)
    df_holdout(spark, parquet, "noop", out, 1)
    for _ in range(args.repeats):
        for sink in args.sinks:
            for task, name, fn in CASES:
                seconds, written = run_peer(fn, spark, parquet, sink, out, COUNTS[task])
                times.setdefault((task, sink, name), []).append((seconds, written))
                _collect_garbage(sc)
    sizes = check_sizes(spark, parquet, args.rows)
    sc.stop()
    return times, sizes


def check_sizes(spark, parquet, rows):
    """Untimed: our bootstrap samples' sizes (exact) and Poisson's."""
    from pyspark.sql import functions as F
    df = spark.read.parquet(parquet)
    tagged = sg.tag(df, "bootstrap", SEED, "row_id", samples=COUNTS["bootstrap"])
    ours = [row["count"] for row in tagged.groupBy("sample").count().collect()]
    cached = df.cache()
    poisson = [cached.sample(withReplacement=True, fraction=1.0, seed=SEED + i).count()
               for i in range(COUNTS["bootstrap"])]
    cached.unpersist()
    folds = sg.tag(df, "kfold", SEED, "row_id", k=COUNTS["kfold"], balanced=False) \
        .agg(F.count("*")).first()[0]
    return {"ours": ours, "poisson": poisson, "fold rows": folds, "rows": rows}


def report(times, sizes, args):
    lines = [f"{args.rows:,} x {args.cols} doubles + row_id, master {args.master}, Parquet "
             f"dictionary encoding {'on' if args.dictionary else 'off'}, medians of "
             f"{args.repeats} interleaved repeats (seconds); ratio = peer / ours, median of "
             "per-repeat ratios", "",
             "| task | sink | contender | seconds | output MB | ratio to ours |",
             "|---|---|---|---:|---:|---:|"]
    results = []
    for task in COUNTS:
        for sink in args.sinks:
            rows = [(name, runs) for (t, s, name), runs in times.items() if (t, s) == (task, sink)]
            ours_runs = rows[0][1]
            for name, runs in rows:
                secs = statistics.median(r[0] for r in runs)
                ratio = statistics.median(r[0] / o[0] for r, o in zip(runs, ours_runs))
                mb = runs[0][1] / 1e6 if runs[0][1] is not None else None
                results.append({"task": task, "sink": sink, "contender": name, "seconds": secs,
                                "runs": [r[0] for r in runs], "ratio_to_ours": ratio,
                                "output_bytes": runs[0][1]})
                lines.append(f"| {task} | {sink} | {name} | {secs:.1f} | "
                             f"{'-' if mb is None else f'{mb:,.0f}'} | {ratio:.2f} |")
    dev = [abs(s - sizes["rows"]) / sizes["rows"] for s in sizes["poisson"]]
    lines += ["", f"bootstrap sizes: ours {min(sizes['ours']):,}..{max(sizes['ours']):,} "
              f"(exactly {sizes['rows']:,} asked); Poisson {min(sizes['poisson']):,}.."
              f"{max(sizes['poisson']):,} (mean |error| {statistics.mean(dev):.2%}, max "
              f"{max(dev):.2%}); folds: {sizes['fold rows']:,} rows in all"]
    return "\n".join(lines), results


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smoke run: 20,000 rows, one repeat")
    ap.add_argument("--rows", type=int, default=1000000)
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sinks", type=lambda t: [x for x in t.split(",") if x],
                    default=["noop", "parquet"])
    ap.add_argument("--no-dictionary", dest="dictionary", action="store_false",
                    help="Parquet writer without dictionary encoding, for every contender "
                         "(it triples the write of random doubles)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--workdir", default="work/bench-frames")
    ap.add_argument("--json", default=None, help="default: WORKDIR/results.json")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.repeats = 20000, 1
    return args


def main(argv=None):
    args = parse_args(argv)
    os.makedirs(args.workdir, exist_ok=True)
    start = time.time()
    times, sizes = run(args)
    text, results = report(times, sizes, args)
    print(text)
    path = args.json or os.path.join(args.workdir, "results.json")
    with open(path, "w") as f:
        json.dump({"args": vars(args), "machine": platform.platform(),
                   "python": platform.python_version(), "load_average": os.getloadavg(),
                   "seconds": time.time() - start, "results": results, "sizes": sizes}, f,
                  indent=1)
    with open(os.path.splitext(path)[0] + ".md", "w") as f:
        f.write(text + "\n")
    shutil.rmtree(os.path.join(args.workdir, "out"), ignore_errors=True)


if __name__ == "__main__":
    main()
