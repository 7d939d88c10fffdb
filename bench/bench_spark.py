"""Spark benchmark: the paper's experiments (section V) at laptop scale, with
today's peers, in one run on the same data.

    .venv/bin/python bench/bench_spark.py                # everything (make bench)
    .venv/bin/python bench/bench_spark.py --quick        # smoke run, small inputs

Experiments (``--only``, comma-separated):

* ``peers``   per input size (``--sizes``): 20 hold-out samples (10 pairs), 20
  bootstrap samples, 10-fold cross-validation (fold mode and naive) with
  ``--runner spark``, next to ``DataFrame.randomSplit`` (hold-out pairs, k
  folds + unions), ``DataFrame.sample(withReplacement=True)`` (bootstrap),
  written as Parquet and into Spark's no-op sink; scikit-learn's splitters and
  plain numpy gathers on the in-memory array; and the I/O floor (read the
  input once, write our output's bytes once);
* ``fig8``    scalability in input size, hold-out and bootstrap, samples
  summing to the input size (as in the paper);
* ``fig10``   scalability in the number of samples (each 5 % of the rows);
* ``fig11``   k-fold with dynamic composition vs naive, k = 5, 10, 20: time
  and output / input size;
* ``fig12``   vs matrix-based sample generation: a 0/1 selection matrix times
  the data as ``pyspark.mllib.linalg.distributed.BlockMatrix`` (each size in
  its own process and SparkContext, with a time limit).

All Spark work except fig12 shares one SparkContext (``--master``), so JVM
start-up is paid once for everyone.  Every timing is the median of
``--repeats`` runs, interleaved so drift hits all contenders alike.  Results
print as Markdown, and are saved as JSON (``--json``, default ``WORKDIR/results.json``) and Markdown
next to it;
``--plots DIR`` writes PNG figures.
"""
import argparse
import functools
import gc
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

from samplegen.jobs import driver  # noqa: E402
from samplegen.jobs.engines import rowcache, spool  # noqa: E402
from samplegen.jobs.engines.spark import context, job, shuffle  # noqa: E402
from samplegen.jobs.store import Matrix  # noqa: E402

SEED = 7
#: per task: hold-out pairs (20 samples), folds, bootstrap samples
COUNTS = {"holdout": 10, "kfold": 10, "bootstrap": 20}
EXPERIMENTS = ("peers", "fig8", "fig10", "fig11", "fig12", "alternating")


# ---------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------
def matrix_for(workdir, rows, cols, block_size):
    """The synthetic input (made once, reused by later runs)."""
    path = os.path.join(workdir, f"input-{rows}x{cols}")
    meta = os.path.join(path, "_matrix.json")
    if os.path.exists(meta):
        with open(meta) as f:
            m = json.load(f)
        if (m["rows"], m["cols"], m["block_size"]) == (rows, cols, block_size):
            return path
    driver.make_matrix(path, rows, cols, block_size, seed=1, overwrite=True)
    return path


def parquet_for(src):
    """The same matrix as a Parquet file of rows (what DataFrame users have)."""
    from samplegen.jobs.formats import export
    path = src + ".parquet"
    if not os.path.exists(path):
        export(Matrix.open(src), path, row_ids=False)
    return path


class Timer:
    """Medians of interleaved repeats: ``add(name, seconds, **extra)``."""

    def __init__(self):
        self.times, self.extra = {}, {}

    def add(self, name, seconds, **extra):
        self.times.setdefault(name, []).append(seconds)
        self.extra.setdefault(name, {}).update(extra)

    def median(self, name):
        return statistics.median(self.times[name]) if name in self.times else None

    def rows(self):
        return {name: dict(self.extra[name], seconds=statistics.median(t), runs=t)
                for name, t in self.times.items()}


def timed(fn):
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


# ---------------------------------------------------------------------------
# contenders
# ---------------------------------------------------------------------------
def ours(sc, src, dest, udf, params):
    """samplegen --runner spark on the shared context; returns (s, output bytes, stats)."""
    shutil.rmtree(dest, ignore_errors=True)
    stats = []
    seconds, _ = timed(lambda: driver.generate(src, dest, udf, params, SEED, runner="spark",
                                               options={"on_task_stats": stats.append}))
    nbytes = du(dest)
    shutil.rmtree(dest, ignore_errors=True)
    _collect_garbage(sc)
    return seconds, nbytes, stats[0]


def _collect_garbage(sc):
    """Let Spark's cleaner delete the shuffle files of finished jobs."""
    gc.collect()
    sc._jvm.System.gc()


def identity(sc, src, out, copies):
    """Spark's own data movement for the same volume: every input block
    line, parsed like ours, shuffled ``copies`` times through the engine's
    shuffle and spool, and written as block files; no sampling decision, no
    re-blocking.  Returns seconds."""
    from itertools import groupby

    from samplegen.jobs.blocks import parse_encoded
    from samplegen.jobs.store import write_group

    nv = -(-Matrix.open(src).cols // Matrix.open(src).block_size)
    budget = 512 << 20

    def emit(lines):
        for line in lines:
            h, v, block = parse_encoded(line)
            for c in range(copies):
                yield (c, v, 0, h), block

    def write(records):
        with spool.SortSpool(budget, rowcache.local_dir()) as ordered:
            for key, block in records:
                ordered.add(key, block)
            for (c, v), group in groupby(ordered.sorted(), key=lambda r: r[0][:2]):
                yield write_group(out, f"copy-{c}", v, ((key[3], b) for key, b in group))

    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    partitions = min(copies * nv, max(2 * sc.defaultParallelism,
                                      -(-du(src) * copies // job.REDUCE_BYTES)))
    lines = job.read_lines(sc, Matrix.open(src).part_uris())
    seconds, _ = timed(lambda: shuffle.shuffle(
        lines.mapPartitions(emit), partitions, functools.partial(job.group_index, nv),
        shuffle.MAP_BUFFER).mapPartitions(write).collect())
    shutil.rmtree(out, ignore_errors=True)
    _collect_garbage(sc)
    return seconds


def write_df(df, sink, path):
    if sink == "parquet":
        df.write.mode("overwrite").parquet(path)
    else:
        df.write.format("noop").mode("overwrite").save()


def load_df(spark, parquet):
    df = spark.read.parquet(parquet).cache()
    df.count()
    return df


def df_holdout(spark, parquet, sink, out, pairs):
    """What a Spark user writes for hold-out pairs: randomSplit per pair."""
    df = load_df(spark, parquet)
    for w in range(pairs):
        train, test = df.randomSplit([0.8, 0.2], seed=SEED + w)
        write_df(train, sink, os.path.join(out, f"train-{w}"))
        write_df(test, sink, os.path.join(out, f"test-{w}"))
    df.unpersist()


def df_kfold(spark, parquet, sink, out, k):
    """k folds with randomSplit, each training set the union of the others."""
    df = load_df(spark, parquet)
    folds = df.randomSplit([1.0] * k, seed=SEED)
    for i in range(k):
        train = functools.reduce(lambda a, b: a.union(b),
                                 [f for j, f in enumerate(folds) if j != i])
        write_df(folds[i], sink, os.path.join(out, f"test-{i}"))
        write_df(train, sink, os.path.join(out, f"train-{i}"))
    df.unpersist()


def df_bootstrap(spark, parquet, sink, out, samples, sizes=None):
    """Bootstrap as Spark users do: Poisson sampling, size not exact."""
    df = load_df(spark, parquet)
    for i in range(samples):
        sample = df.sample(withReplacement=True, fraction=1.0, seed=SEED + i)
        write_df(sample, sink, os.path.join(out, f"sample-{i}"))
        if sizes is not None:
            sizes.append(sample.count())
    df.unpersist()


def run_peer(fn, spark, parquet, sink, out, count):
    """Seconds of one DataFrame peer run into *sink* (and the bytes it wrote
    for Parquet); *out* is cleared before and after."""
    shutil.rmtree(out, ignore_errors=True)
    seconds, _ = timed(lambda: fn(spark, parquet, sink, out, count))
    written = du(out) if sink == "parquet" else None
    shutil.rmtree(out, ignore_errors=True)
    return seconds, written


def numpy_holdout(X, pairs):
    rng = np.random.default_rng(SEED)
    cut = int(0.8 * len(X))
    for _ in range(pairs):
        perm = rng.permutation(len(X))
        X[perm[:cut]], X[perm[cut:]]  # noqa: B018  (the gathers are the work)


def numpy_bootstrap(X, samples):
    rng = np.random.default_rng(SEED)
    for _ in range(samples):
        X[rng.integers(0, len(X), len(X))]  # noqa: B018


def numpy_kfold(X, k):
    rng = np.random.default_rng(SEED)
    folds = np.array_split(rng.permutation(len(X)), k)
    for i in range(k):
        X[folds[i]], X[np.concatenate([f for j, f in enumerate(folds) if j != i])]  # noqa: B018


def sklearn_holdout(X, pairs):
    from sklearn.model_selection import ShuffleSplit
    for train, test in ShuffleSplit(n_splits=pairs, train_size=0.8, random_state=SEED).split(X):
        X[train], X[test]  # noqa: B018


def sklearn_kfold(X, k):
    from sklearn.model_selection import KFold
    for train, test in KFold(n_splits=k, shuffle=True, random_state=SEED).split(X):
        X[train], X[test]  # noqa: B018


def sklearn_bootstrap(X, samples):
    from sklearn.utils import resample
    for i in range(samples):
        resample(X, replace=True, n_samples=len(X), random_state=SEED + i)


# ---------------------------------------------------------------------------
# experiments
# ---------------------------------------------------------------------------
def warm_up(sc, spark, args):
    """One untimed run of each kind first: JIT, Python workers, caches."""
    src = matrix_for(args.workdir, 2000, args.cols, args.block_size)
    out = os.path.join(args.workdir, "out")
    ours(sc, src, out, "holdout", {"ratio": 0.8, "repeats": 2, "exact": False})
    df_holdout(spark, parquet_for(src), "noop", out, 1)


def exp_peers(sc, spark, args, rows):
    """Our runs next to what Spark and single-machine users have, one size."""
    src = matrix_for(args.workdir, rows, args.cols, args.block_size)
    parquet = parquet_for(src)
    X = Matrix.open(src).to_numpy()[1]
    out = os.path.join(args.workdir, "out")
    input_bytes = du(src)
    t = Timer()
    poisson_sizes = []
    cases = [
        ("holdout", "holdout", {"ratio": 0.8, "repeats": 10, "exact": False}),
        ("bootstrap", "bootstrap", {"samples": 20}),
        ("kfold", "kfold", {"k": 10, "balanced": False}),
        ("kfold-naive", "kfold", {"k": 10, "naive": True, "balanced": False}),
    ]
    for rep in range(args.repeats):
        for label, udf, params in cases:
            seconds, nbytes, stats = ours(sc, src, out, udf, params)
            t.add(f"{label}/samplegen", seconds, output_bytes=nbytes, stats=stats)
            t.add(f"{label}/io-floor", io_floor(src, nbytes, args.workdir))
            if label in ("holdout", "bootstrap"):
                t.add(f"{label}/spark-identity", identity(sc, src, out, COUNTS[label]))
        for label, fn in (("holdout", numpy_holdout), ("kfold", numpy_kfold),
                          ("bootstrap", numpy_bootstrap)):
            t.add(f"{label}/numpy", timed(lambda fn=fn, label=label: fn(X, COUNTS[label]))[0])
        for label, fn in (("holdout", sklearn_holdout), ("kfold", sklearn_kfold),
                          ("bootstrap", sklearn_bootstrap)):
            t.add(f"{label}/sklearn", timed(lambda fn=fn, label=label: fn(X, COUNTS[label]))[0])
        if rep >= args.peer_repeats:
            continue  # the DataFrame peers take most of the time at 1M rows
        for sink in args.sinks:
            for label, fn in (("holdout", df_holdout), ("kfold", df_kfold),
                              ("bootstrap", df_bootstrap)):
                seconds, written = run_peer(fn, spark, parquet, sink, out, COUNTS[label])
                extra = {} if written is None else {"output_bytes": written}
                t.add(f"{label}/spark-df-{sink}", seconds, **extra)
                _collect_garbage(sc)
    # sizes, untimed
    df_bootstrap(spark, parquet, "noop", out, COUNTS["bootstrap"], sizes=poisson_sizes)
    deviation = np.abs(np.array(poisson_sizes) - rows) / rows
    return {"rows": rows, "cols": args.cols, "input_bytes": input_bytes, "cases": t.rows(),
            "poisson_sizes": poisson_sizes,
            "poisson_size_error": {"mean": float(deviation.mean()), "max": float(deviation.max())}}


def exp_fig8(sc, args):
    """Input size: 10 hold-out pairs and 20 bootstrap samples summing to the input."""
    t = Timer()
    out = os.path.join(args.workdir, "out")
    for _rep in range(args.repeats):
        for rows in args.fig8_sizes:
            src = matrix_for(args.workdir, rows, args.cols, args.block_size)
            for label, udf, params in (
                    ("holdout", "holdout",
                     {"ratio": 0.5, "repeats": 10, "fraction": 0.1, "exact": False}),
                    ("bootstrap", "bootstrap", {"samples": 20, "size": rows // 20})):
                seconds, nbytes, stats = ours(sc, src, out, udf, params)
                t.add(f"{label}/{rows}", seconds, rows=rows, output_bytes=nbytes,
                      input_bytes=du(src), stats=stats)
    return t.rows()


def exp_fig10(sc, args):
    """Number of samples, each 5 % of the rows."""
    rows = args.fig10_rows
    src = matrix_for(args.workdir, rows, args.cols, args.block_size)
    out = os.path.join(args.workdir, "out")
    t = Timer()
    for _rep in range(args.repeats):
        for n in args.fig10_samples:
            for label, udf, params in (
                    ("holdout", "holdout", {"ratio": 0.5, "repeats": n // 2, "fraction": 0.1,
                                                "exact": False}),
                    ("bootstrap", "bootstrap", {"samples": n, "size": rows // 20})):
                seconds, nbytes, _ = ours(sc, src, out, udf, params)
                t.add(f"{label}/{n}", seconds, samples=n, output_bytes=nbytes)
    return {"rows": rows, "cases": t.rows()}


def exp_fig11(sc, args):
    """k-fold: dynamic composition vs naive, time and output / input."""
    rows = args.fig11_rows
    src = matrix_for(args.workdir, rows, args.cols, args.block_size)
    out = os.path.join(args.workdir, "out")
    input_bytes = du(src)
    t = Timer()
    for _rep in range(args.repeats):
        for k in args.fig11_k:
            for label, naive in (("fold", False), ("naive", True)):
                seconds, nbytes, _ = ours(sc, src, out, "kfold",
                                          {"k": k, "naive": naive, "balanced": False})
                t.add(f"{label}/{k}", seconds, k=k, output_bytes=nbytes,
                      output_over_input=nbytes / input_bytes)
    return {"rows": rows, "input_bytes": input_bytes, "cases": t.rows()}


def exp_alternating(sc, args):
    """samplegen and the DataFrame peers (into each of --alt-sinks) back to
    back in every repeat (one size, the first of --sizes), so all see the
    same state of the machine, in an order that rotates every repeat:
    hold-out pairs vs randomSplit, bootstrap vs Poisson sample; and the numpy
    in-memory floor of each task in the same run."""
    from pyspark.sql import SparkSession
    spark = SparkSession(sc)
    rows = args.sizes[0]
    src = matrix_for(args.workdir, rows, args.cols, args.block_size)
    parquet = parquet_for(src)
    X = Matrix.open(src).to_numpy()[1]
    out = os.path.join(args.workdir, "out")
    t = Timer()

    def peer(fn, sink, count):
        return run_peer(fn, spark, parquet, sink, out, count)[0]
    for rep in range(args.repeats):
        for label, udf, params, fn, floor in (
                ("holdout", "holdout", {"ratio": 0.8, "repeats": 10, "exact": False}, df_holdout,
                 numpy_holdout),
                ("bootstrap", "bootstrap", {"samples": 20}, df_bootstrap, numpy_bootstrap)):
            contenders = [(f"{label}/samplegen",
                           lambda udf=udf, params=params: ours(sc, src, out, udf, params)[0])]
            contenders += [(f"{label}/spark-df-{sink}",
                            functools.partial(peer, fn, sink, COUNTS[label]))
                           for sink in args.alt_sinks]
            turn = rep % len(contenders)                       # who goes first rotates
            for name, run in contenders[turn:] + contenders[:turn]:
                t.add(name, run())
                _collect_garbage(sc)
            t.add(f"{label}/numpy",
                  timed(lambda floor=floor, label=label: floor(X, COUNTS[label]))[0])
    return {"rows": rows, "sinks": args.alt_sinks, "cases": t.rows()}


def exp_fig12(sc, args):
    """BlockMatrix selection multiply (own process per size, time limit) vs ours."""
    out = os.path.join(args.workdir, "out")
    t = Timer()
    for _rep in range(args.repeats):
        for rows in args.fig12_sizes:
            src = matrix_for(args.workdir, rows, args.cols, args.block_size)
            seconds, nbytes, _ = ours(sc, src, out, "holdout", {"ratio": 0.8, "repeats": 10})
            t.add(f"samplegen/{rows}", seconds, rows=rows, output_bytes=nbytes)
            if t.extra.get(f"blockmatrix/{rows}", {}).get("failed"):
                continue  # failed once (memory, time limit): do not repeat
            status = blockmatrix_subprocess(src, args)
            if status["ok"]:
                t.add(f"blockmatrix/{rows}", status["seconds"], rows=rows)
            else:
                t.add(f"blockmatrix/{rows}", float("nan"), rows=rows, failed=status["error"])
    return t.rows()


def blockmatrix_subprocess(src, args):
    cmd = [sys.executable, os.path.abspath(__file__), "--blockmatrix-worker", src,
           "--master", args.master, "--driver-memory", args.driver_memory]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.time_limit)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"time limit ({args.time_limit} s)"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    output = (proc.stdout + "\n" + proc.stderr).splitlines()
    if any("OutOfMemory" in line or "Java heap space" in line for line in output):
        return {"ok": False, "error": f"out of memory ({args.driver_memory} driver)"}
    causes = [line.strip() for line in output if "Exception:" in line or "Error:" in line]
    return {"ok": False, "error": (causes or [line for line in output if line.strip()] or
                                   [f"exit status {proc.returncode}"])[-1][-300:]}


def blockmatrix_worker(src, master, driver_memory):
    """20 hold-out samples (10 pairs) as S @ M: S a 0/1 selection matrix with
    one 1 per row, M the input; A = S M is materialized in memory, as in the
    paper's matrix-based baseline.  Prints one JSON line."""
    from pyspark.mllib.linalg import Matrices
    from pyspark.mllib.linalg.distributed import BlockMatrix
    from pyspark.sql import SparkSession

    from samplegen.jobs.blocks import parse_line

    sc = context.start_context(master, {"spark.driver.memory": driver_memory}, quiet=True)
    SparkSession(sc)  # BlockMatrix converts through DataFrames
    matrix = Matrix.open(src)
    m, n, B = matrix.rows, matrix.cols, matrix.block_size
    t0 = time.perf_counter()

    def to_block(line):
        h, v, block = parse_line(line)
        dense = block.to_dense()
        return (h, v), Matrices.dense(dense.shape[0], dense.shape[1], dense.T.ravel())
    M = BlockMatrix(job.read_lines(sc, matrix.part_uris()).map(to_block), B, B, m, n)
    rng = np.random.default_rng(SEED)
    cut = int(0.8 * m)
    source = np.concatenate([rng.permutation(m) for _ in range(10)])   # row i of A <- source[i]
    p = source.size
    target = np.arange(p)
    key = (target // B) * (-(-m // B)) + source // B
    order = np.argsort(key, kind="stable")
    key, target, source = key[order], target[order], source[order]
    edges = np.flatnonzero(np.diff(key)) + 1
    blocks = []
    for a, b in zip(np.concatenate([[0], edges]), np.concatenate([edges, [key.size]])):
        bi, bj = int(target[a] // B), int(source[a] // B)
        rows_ = min(B, p - bi * B)
        cols_ = min(B, m - bj * B)
        r, c = target[a:b] - bi * B, source[a:b] - bj * B
        ordc = np.lexsort((r, c))
        colptr = np.searchsorted(c[ordc], np.arange(cols_ + 1))
        blocks.append(((bi, bj), Matrices.sparse(rows_, cols_, colptr.tolist(),
                                                 r[ordc].tolist(), [1.0] * (b - a))))
    S = BlockMatrix(sc.parallelize(blocks, max(2, len(blocks) // 2000)), B, B, p, m)
    A = S.multiply(M)
    A.blocks.persist()
    count = A.blocks.count()
    seconds = time.perf_counter() - t0
    print(json.dumps({"ok": True, "seconds": seconds, "blocks": count, "rows": p, "cut": cut}))
    sc.stop()


# ---------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------
def fmt_s(x):
    if x is None:
        return "—"
    return "failed" if x != x else f"{x:.1f}"


def report_peers(res):
    c = res["cases"]
    rows = res["rows"]
    lines = [f"\n### {rows:,} × {res['cols']} dense ({res['input_bytes'] / 1e6:.0f} MB on disk)\n",
             "| task | contender | seconds | vs numpy floor | samplegen speed-up |",
             "|---|---|---:|---:|---:|"]
    labels = {"holdout": "20 hold-out samples (10 pairs)", "bootstrap": "20 bootstrap samples",
              "kfold": "10-fold (20 sets)", "kfold-naive": "10-fold (20 sets)"}
    names = [("samplegen", "samplegen --runner spark"),
             ("spark-df-parquet", "DataFrame → Parquet"),
             ("spark-df-noop", "DataFrame → no-op sink"),
             ("sklearn", "scikit-learn, in memory"), ("numpy", "numpy gathers, in memory"),
             ("spark-identity", "Spark identity job, same volume (engine's own data movement)"),
             ("io-floor", "I/O floor (read input, write our bytes)")]
    for task in ("holdout", "bootstrap", "kfold"):
        floor = c.get(f"{task}/numpy", {}).get("seconds")
        mine = c.get(f"{task}/samplegen", {}).get("seconds")
        entries = list(names)
        if task == "kfold":
            entries.insert(1, ("naive", "samplegen --runner spark, naive"))
        for key, name in entries:
            case = c.get(f"{task}-naive/samplegen" if key == "naive" else f"{task}/{key}")
            if case is None:
                continue
            s = case["seconds"]
            mult = f"{s / floor:.0f}×" if floor else "—"
            speed = f"{s / mine:.2f}×" if mine and key not in ("samplegen",) else ""
            if key == "samplegen":
                name += {"holdout": "", "bootstrap": " (exact sizes)", "kfold": ", fold mode"}[task]
            if task == "bootstrap" and key == "spark-df-parquet":
                name = "DataFrame.sample(True, 1.0) → Parquet"
            if task == "bootstrap" and key == "spark-df-noop":
                name = "DataFrame.sample(True, 1.0) → no-op sink"
            if task == "holdout" and key.startswith("spark-df"):
                name = name.replace("DataFrame", "randomSplit")
            if task == "kfold" and key.startswith("spark-df"):
                name = name.replace("DataFrame", "randomSplit + unions")
            lines.append(f"| {labels[task]} | {name} | {fmt_s(s)} | {mult} | {speed} |")
    e = res["poisson_size_error"]
    lines.append(f"\nPoisson `sample` sizes vs exact {rows:,}: mean error {100 * e['mean']:.2f} %, "
                 f"max {100 * e['max']:.2f} %.")
    mem = [(k, v["stats"]) for k, v in c.items() if k.endswith("/samplegen")]
    lines.append("\n| samplegen run | output MB | reduce tasks | spilled MB | max map RSS growth MB"
                 " | max reduce RSS growth MB |\n|---|---:|---:|---:|---:|---:|")
    for k, st in mem:
        lines.append(f"| {k.split('/')[0]} | {c[k]['output_bytes'] / 1e6:.0f} | "
                     f"{st['reduce_tasks']} | {st['sort_spilled_bytes'] / 1e6:.0f} | "
                     f"{st['map_peak_rss_growth'] / 2**20:.0f} | "
                     f"{st['reduce_peak_rss_growth'] / 2**20:.0f} |")
    return lines


def report(results):
    lines = []
    for res in results.get("peers", []):
        lines += report_peers(res)
    if "fig8" in results:
        lines += ["\n### Input size (figure 8): samples summing to the input size\n",
                  "| rows | hold-out, 10 pairs (s) | bootstrap, 20 samples (s) |",
                  "|---:|---:|---:|"]
        sizes = sorted({v["rows"] for v in results["fig8"].values()})
        for r in sizes:
            lines.append(f"| {r:,} | "
                         f"{fmt_s(results['fig8'].get(f'holdout/{r}', {}).get('seconds'))}"
                         f" | {fmt_s(results['fig8'].get(f'bootstrap/{r}', {}).get('seconds'))} |")
    if "fig10" in results:
        f10 = results["fig10"]
        lines += [f"\n### Number of samples (figure 10), {f10['rows']:,} rows, each sample 5 %\n",
                  "| samples | hold-out (s) | bootstrap (s) |", "|---:|---:|---:|"]
        for n in sorted({v["samples"] for v in f10["cases"].values()}):
            lines.append(f"| {n} | {fmt_s(f10['cases'].get(f'holdout/{n}', {}).get('seconds'))} | "
                         f"{fmt_s(f10['cases'].get(f'bootstrap/{n}', {}).get('seconds'))} |")
    if "fig11" in results:
        f11 = results["fig11"]
        lines += [f"\n### k-fold, dynamic composition vs naive (figure 11), {f11['rows']:,} rows\n",
                  "| k | fold mode (s) | naive (s) | naive / fold | output/input fold | "
                  "output/input naive |", "|---:|---:|---:|---:|---:|---:|"]
        for k in sorted({v["k"] for v in f11["cases"].values()}):
            a, b = f11["cases"][f"fold/{k}"], f11["cases"][f"naive/{k}"]
            lines.append(f"| {k} | {a['seconds']:.1f} | {b['seconds']:.1f} | "
                         f"{b['seconds'] / a['seconds']:.2f}× | {a['output_over_input']:.2f} | "
                         f"{b['output_over_input']:.2f} |")
    if "fig12" in results:
        f12 = results["fig12"]
        lines += ["\n### vs BlockMatrix selection multiply (figure 12), 20 hold-out samples\n",
                  "| rows | samplegen (s) | BlockMatrix S·M (s) | speed-up |",
                  "|---:|---:|---:|---:|"]
        for r in sorted({v["rows"] for v in f12.values()}):
            ours_s = f12[f"samplegen/{r}"]["seconds"]
            bm = f12.get(f"blockmatrix/{r}", {})
            if bm.get("failed"):
                lines.append(f"| {r:,} | {ours_s:.1f} | failed: {bm['failed']} | — |")
            else:
                lines.append(f"| {r:,} | {ours_s:.1f} | {bm['seconds']:.1f} | "
                             f"{bm['seconds'] / ours_s:.1f}× |")
    if "alternating" in results:
        alt = results["alternating"]
        sinks = alt.get("sinks", ["noop"])
        lines += [f"\n### Back to back with the DataFrame peers, {alt['rows']:,} rows\n",
                  "| task | contender | seconds | runs | vs numpy floor | samplegen speed-up |",
                  "|---|---|---:|---|---:|---:|"]
        runs = lambda c: ", ".join(f"{x:.1f}" for x in c["runs"])  # noqa: E731
        for task, peer in (("holdout", "randomSplit"), ("bootstrap", "sample(True, 1.0)")):
            a = alt["cases"][f"{task}/samplegen"]
            floor = alt["cases"].get(f"{task}/numpy", {}).get("seconds")
            mult = lambda c, floor=floor: f"{c['seconds'] / floor:.0f}×" if floor else "—"  # noqa: E731
            lines.append(f"| {task} | samplegen --runner spark | {a['seconds']:.1f} | {runs(a)} | "
                         f"{mult(a)} | |")
            for sink in sinks:
                b = alt["cases"][f"{task}/spark-df-{sink}"]
                lines.append(f"| {task} | {peer} → "
                             f"{'no-op sink' if sink == 'noop' else 'Parquet'} | "
                             f"{b['seconds']:.1f} | {runs(b)} | {mult(b)} | "
                             f"{b['seconds'] / a['seconds']:.2f}× |")
            if floor:
                c = alt["cases"][f"{task}/numpy"]
                lines.append(f"| {task} | numpy gathers, in memory | {floor:.2f} | "
                             f"{runs(c)} | 1× | "
                             f"{floor / a['seconds']:.2f}× |")
    return "\n".join(lines) + "\n"


def plots(results, directory):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(directory, exist_ok=True)
    written = []

    def save(fig, name):
        path = os.path.join(directory, name)
        fig.tight_layout()
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    if "fig8" in results:
        fig, ax = plt.subplots(figsize=(5, 3.4))
        for label in ("holdout", "bootstrap"):
            pts = sorted((v["rows"], v["seconds"]) for k, v in results["fig8"].items()
                         if k.startswith(label + "/"))
            ax.plot(*zip(*pts), marker="o", label=label)
        ax.set(xlabel="input rows (100 columns)", ylabel="seconds",
               title="Input size (fig. 8): 20 samples = input size")
        ax.legend()
        save(fig, "spark-fig8-input-size.png")
    if "fig10" in results:
        fig, ax = plt.subplots(figsize=(5, 3.4))
        for label in ("holdout", "bootstrap"):
            pts = sorted((v["samples"], v["seconds"]) for k, v in results["fig10"]["cases"].items()
                         if k.startswith(label + "/"))
            ax.plot(*zip(*pts), marker="o", label=label)
        ax.set(xlabel="number of samples (5 % each)", ylabel="seconds",
               title=f"Number of samples (fig. 10), {results['fig10']['rows']:,} rows")
        ax.legend()
        save(fig, "spark-fig10-samples.png")
    if "fig11" in results:
        fig, (a1, a2) = plt.subplots(1, 2, figsize=(8, 3.4))
        for label in ("fold", "naive"):
            pts = sorted((v["k"], v["seconds"], v["output_over_input"])
                         for k, v in results["fig11"]["cases"].items() if k.startswith(label + "/"))
            ks, secs, ratio = zip(*pts)
            a1.plot(ks, secs, marker="o", label=label)
            a2.plot(ks, ratio, marker="o", label=label)
        a1.set(xlabel="k", ylabel="seconds", title="k-fold time (fig. 11)")
        a2.set(xlabel="k", ylabel="output / input", title="k-fold output size")
        a1.legend()
        save(fig, "spark-fig11-kfold.png")
    if "fig12" in results:
        fig, ax = plt.subplots(figsize=(5, 3.4))
        for label in ("samplegen", "blockmatrix"):
            pts = sorted((v["rows"], v["seconds"]) for k, v in results["fig12"].items()
                         if k.startswith(label + "/") and v["seconds"] == v["seconds"])
            if pts:
                ax.plot(*zip(*pts), marker="o", label=label)
        ax.set(xlabel="input rows (100 columns)", ylabel="seconds", yscale="log",
               title="vs BlockMatrix multiply (fig. 12)")
        ax.legend()
        save(fig, "spark-fig12-blockmatrix.png")
    return written


# ---------------------------------------------------------------------------
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ints = lambda text: [int(x) for x in text.split(",") if x]  # noqa: E731
    ap.add_argument("--quick", action="store_true", help="smoke run: small inputs, one repeat")
    ap.add_argument("--only", default=",".join(EXPERIMENTS), help="experiments to run")
    ap.add_argument("--sizes", type=ints, default=[200000, 1000000], help="rows, peers experiment")
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--block-size", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--peer-repeats", type=int, default=None,
                    help="repeats of the DataFrame peers (default: --repeats); they take "
                         "most of the time at 1M rows")
    ap.add_argument("--sinks", type=lambda t: [x for x in t.split(",") if x],
                    default=["parquet", "noop"],
                    help="DataFrame peers' sinks (parquet, noop); Parquet writes take most "
                         "of the time at 1M rows")
    ap.add_argument("--alt-sinks", type=lambda t: [x for x in t.split(",") if x], default=["noop"],
                    help="the alternating experiment's DataFrame peers' sinks (noop, parquet)")
    ap.add_argument("--fig8-sizes", type=ints, default=[100000, 200000, 500000, 1000000])
    ap.add_argument("--fig10-rows", type=int, default=200000)
    ap.add_argument("--fig10-samples", type=ints, default=[10, 20, 30, 40, 50])
    ap.add_argument("--fig11-rows", type=int, default=200000)
    ap.add_argument("--fig11-k", type=ints, default=[5, 10, 20])
    ap.add_argument("--fig12-sizes", type=ints, default=[10000, 25000, 50000, 100000])
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--driver-memory", default="8g", help="BlockMatrix processes")
    ap.add_argument("--time-limit", type=int, default=900, help="seconds per BlockMatrix run")
    ap.add_argument("--workdir", default="work/bench-spark")
    ap.add_argument("--json", default=None, help="default: WORKDIR/results.json")
    ap.add_argument("--plots", default=None, help="directory for PNG figures")
    ap.add_argument("--blockmatrix-worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats = [20000], 1
        args.fig8_sizes, args.fig10_rows, args.fig10_samples = [10000, 20000], 20000, [10, 20]
        args.fig11_rows, args.fig11_k, args.fig12_sizes = 20000, [5, 10], [5000, 10000]
        args.time_limit = min(args.time_limit, 300)
    if args.peer_repeats is None:
        args.peer_repeats = args.repeats
    if set(args.sinks) - {"parquet", "noop"}:
        ap.error("--sinks: choose from parquet, noop")
    args.only = [x for x in args.only.split(",") if x]
    unknown = set(args.only) - set(EXPERIMENTS)
    if unknown:
        ap.error(f"unknown experiment(s) {', '.join(sorted(unknown))}: choose from "
                 f"{', '.join(EXPERIMENTS)}")
    args.workdir = os.path.abspath(args.workdir)
    return args


def machine():
    import pyspark
    info = {"cpus": os.cpu_count(), "python": platform.python_version(), "numpy": np.__version__,
            "pyspark": pyspark.__version__, "platform": platform.platform()}
    try:
        with open("/proc/meminfo") as f:
            info["memory_gb"] = round(int(f.readline().split()[1]) / 2**20, 1)
        with open("/proc/cpuinfo") as f:
            info["cpu"] = next((line.split(":", 1)[1].strip() for line in f
                                if line.startswith("model name")), "")
        info["load_average_at_start"] = os.getloadavg()
        info["disk_free_gb"] = round(shutil.disk_usage(os.getcwd()).free / 1e9)
    except OSError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    info["java"] = (java.stderr.splitlines() or [""])[0]
    return info


def main(argv=None):
    args = parse_args(argv)
    if args.blockmatrix_worker:
        return blockmatrix_worker(args.blockmatrix_worker, args.master, args.driver_memory)
    os.makedirs(args.workdir, exist_ok=True)
    results = {"machine": machine(), "command": " ".join([sys.executable] + sys.argv),
               "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    settings = context.parse_settings(args.spark_conf)
    sc = context.start_context(args.master, settings, quiet=True)
    from pyspark.sql import SparkSession
    spark = SparkSession(sc)
    results["spark_conf"] = dict(sc.getConf().getAll())
    warm_up(sc, spark, args)
    t0 = time.time()
    path = args.json or os.path.join(args.workdir, "results.json")

    def save():  # after every experiment: a stopped run keeps what it measured
        results["elapsed_seconds"] = round(time.time() - t0, 1)
        results["load_average_at_end"] = os.getloadavg()
        with open(path, "w") as f:
            json.dump(results, f, indent=1)
    try:
        if "peers" in args.only:
            results["peers"] = []
            for rows in args.sizes:
                results["peers"].append(exp_peers(sc, spark, args, rows))
                print(report({"peers": results["peers"][-1:]}), flush=True)
                save()
        for name, fn in (("fig8", exp_fig8), ("fig10", exp_fig10), ("fig11", exp_fig11),
                         ("fig12", exp_fig12), ("alternating", exp_alternating)):
            if name in args.only:
                results[name] = fn(sc, args)
                print(report({name: results[name]}), flush=True)
                save()
    finally:
        save()
        sc.stop()
    text = report(results)
    markdown = os.path.splitext(path)[0] + ".md"
    with open(markdown, "w") as f:
        f.write(text)
    if args.plots:
        for figure in plots(results, args.plots):
            print("wrote", figure)
    print(f"results: {path}, {markdown}")


if __name__ == "__main__":
    main()
