"""MapReduce benchmark: local-sampling throughput per UDF, and end-to-end
runs on an mrjob runner next to the engine's own data movement (an identity
job moving the same volume of records) and the I/O floor (read the input once,
write the output bytes once), all in one run.

    .venv/bin/python bench/bench_mr.py --rows 200000 --cols 100 --runner local

Results print as Markdown and are saved as JSON (``--json``); a line of
progress goes to stderr before every step, with the time so far.  Everything
the run writes in ``--workdir`` (the input, the runs' outputs, the runners'
temporary files) is removed when it ends, however it ends (``--keep-input``
keeps the input for the next run).  The end-to-end part takes most of the
time, in proportion to rows x repeats: on 2 quiet cores about 3 minutes at
200,000 rows and one repeat (``make bench-mr``), about 7 with 3 repeats
(docs/BENCHMARKS.md's table, ``make bench-mr BENCH_REPEATS=3``); on a loaded
machine several times that (the progress lines show where it is).
"""
import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from identity_job import report_vs_identity  # noqa: E402  (bench/ is on sys.path)

from samplegen.jobs import driver  # noqa: E402
from samplegen.jobs import fs as fsmod  # noqa: E402
from samplegen.jobs.phases import local_sampling  # noqa: E402
from samplegen.jobs.plan import make_plan  # noqa: E402
from samplegen.jobs.store import Matrix  # noqa: E402
from samplegen.udfs import Bootstrap, HoldOut, KFold, PositionRNG  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))

#: rows of the input the in-process phases are timed on (their rates per row
#: hardly depend on the input's length; the bootstrap's map output of the whole
#: input, 20 times the input, would be held in memory)
PHASE_ROWS = 20000

_START = time.perf_counter()


def progress(message):
    """One line of progress on stderr, at once (a pipe buffers otherwise)."""
    print(f"[{time.perf_counter() - _START:6.0f} s] {message}", file=sys.stderr, flush=True)


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total


def timed(fn, repeats):
    times = []
    result = None
    for _ in range(repeats):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


# ---------------------------------------------------------------------------
def udf_throughput(rows, block_size, repeats):
    """Rows per second of the sampling decision alone, block by block (one core)."""
    rng = PositionRNG(1)
    cases = [("hold-out, 10 pairs", HoldOut(rows, 0.8, repeats=10), 10),
             ("hold-out, 1 pair", HoldOut(rows, 0.8), 1),
             ("k-fold (fold mode), k=10", KFold(rows, 10), 1),
             ("k-fold (naive), k=10", KFold(rows, 10, naive=True), 1),
             ("bootstrap, 20 samples", Bootstrap(rows, 20), 20),
             ("bootstrap, 1 sample", Bootstrap(rows, 1), 1)]
    out = []
    for label, udf, per_row in cases:
        progress(f"decisions: {label}")

        def run(udf=udf):
            for a in range(0, rows, block_size):
                udf(a, min(rows, a + block_size), rng)
        run()  # warm up (caches, page faults)
        seconds, _ = timed(run, repeats)
        out.append({"udf": label, "rows_per_s": rows / seconds,
                    "row_decisions_per_s": rows * per_row / seconds})
    return out


def phase_throughput(matrix_path, repeats, max_rows=PHASE_ROWS):
    """Rows per second, on one core, of the whole map function (parse the
    block line, decide, gather the chunks, encode them) and of the whole
    reduce function (parse chunks, merge bins, re-block, encode with CRC),
    in process, without the engine around them, over the block lines of the
    first *max_rows* rows (at least one row block)."""
    import itertools

    from samplegen.jobs.blocks import EncodedBlock, parse_encoded
    from samplegen.jobs.phases import group_key, parse_sort_key, reblock, sort_key
    matrix = Matrix.open(matrix_path)
    lines = []
    for part in matrix.part_uris():
        with open(part, "rb") as f:
            lines.extend(f.read().splitlines())
    lines = [line for line in lines
             if int(line.split(b"\t", 1)[0]) * matrix.block_size < max_rows] or lines
    rows = min(matrix.rows, len({line.split(b"\t", 1)[0] for line in lines}) * matrix.block_size)
    out = []
    for label, udf in [("hold-out, 10 pairs", HoldOut(matrix.rows, 0.8, repeats=10)),
                       ("k-fold (fold mode), k=10", KFold(matrix.rows, 10)),
                       ("bootstrap, 20 samples", Bootstrap(matrix.rows, 20))]:
        progress(f"phases in process: {label} ({rows} rows)")
        plan = make_plan(udf, 1, matrix.meta, "unused")

        def run_map(sink, plan=plan):
            for line in lines:
                h, v, block = parse_encoded(line)
                for s, v2, bin_, h2, chunk in local_sampling(plan, h, v, block):
                    sink(b"".join([group_key(s, v2), b"\t", sort_key(bin_, h2),
                                   b"\t", *chunk.parts(crc=False)[0]]))
        with open(os.devnull, "wb") as devnull:  # a mapper streams its output
            map_s, _ = timed(lambda: run_map(devnull.write), repeats)
        records = []
        run_map(records.append)
        records.sort()

        def run_reduce(records=records, plan=plan):
            for _, group in itertools.groupby(records, key=lambda r: r[:17]):
                chunks = ((parse_sort_key(r[18:41])[0], EncodedBlock.parse(r[42:], verify=False))
                          for r in group)
                for _h, block in reblock(plan.block_size, chunks):
                    block.parts(crc=True)
        reduce_s, _ = timed(run_reduce, repeats)
        out.append({"udf": label, "rows": rows, "map_rows_per_s": rows / map_s,
                    "reduce_rows_per_s": rows / reduce_s})
    return out


# ---------------------------------------------------------------------------
def run_sampling(src, dest, udf, params, runner):
    shutil.rmtree(dest, ignore_errors=True)
    t = time.perf_counter()
    driver.generate(src, dest, udf, params, 7, runner=runner, options={"mrjob_conf": ""})
    return time.perf_counter() - t, du(dest)


def run_identity(src, dest, copies, runner):
    dest = os.path.abspath(dest)  # the reduce tasks run in their own working directories
    shutil.rmtree(dest, ignore_errors=True)
    os.makedirs(dest)
    parts = Matrix.open(src).part_uris()
    t = time.perf_counter()
    subprocess.run([sys.executable, os.path.join(HERE, "identity_job.py"), "-r", runner,
                    "--no-conf", "--copies", str(copies), "--out", dest, "--no-output", *parts],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t, du(dest)


def io_floor(src, out_bytes, workdir):
    """Read every input file once; write out_bytes to a file with the writer of
    our part files (bypassing the page cache where it does)."""
    parts = Matrix.open(src).part_uris()
    path = os.path.join(workdir, "floor.bin")
    t = time.perf_counter()
    chunk = None
    for p in parts:
        with open(p, "rb") as f:
            while True:
                data = f.read(8 << 20)
                if not data:
                    break
                chunk = chunk or data
    writer = fsmod.LOCAL.open_atomic(path, direct=True)   # the writer of our part files
    left = out_bytes
    while left > 0:
        piece = chunk[:min(left, len(chunk))]
        writer.write(piece)
        left -= len(piece)
    writer.close()
    seconds = time.perf_counter() - t
    os.remove(path)
    return seconds


def end_to_end(src, workdir, runner, repeats, input_bytes):
    cases = [("hold-out, 10 pairs", "holdout", {"ratio": 0.8, "repeats": 10, "exact": False}, 10),
             ("k-fold, k=10, fold mode", "kfold", {"k": 10, "balanced": False}, 1),
             ("k-fold, k=10, naive", "kfold", {"k": 10, "naive": True, "balanced": False}, 10),
             ("bootstrap, 20 samples", "bootstrap", {"samples": 20}, 20)]
    rows = []
    for label, udf, params, copies in cases:
        ours, identity, floor = [], [], []
        out_bytes = id_bytes = 0
        for i in range(repeats):  # interleaved so drift hits all three alike
            progress(f"end to end: {label}, repeat {i + 1} of {repeats} "
                     "(samplegen, the identity job, the I/O floor)")
            t, out_bytes = run_sampling(src, os.path.join(workdir, "run"), udf, params, runner)
            ours.append(t)
            t, id_bytes = run_identity(src, os.path.join(workdir, "identity"), copies, runner)
            identity.append(t)
            floor.append(io_floor(src, out_bytes, workdir))
        shutil.rmtree(os.path.join(workdir, "run"), ignore_errors=True)
        shutil.rmtree(os.path.join(workdir, "identity"), ignore_errors=True)
        rows.append({"case": label, "seconds": statistics.median(ours),
                     "identity_seconds": statistics.median(identity),
                     "io_floor_seconds": statistics.median(floor),
                     "output_bytes": out_bytes, "identity_bytes": id_bytes,
                     "output_over_input": out_bytes / input_bytes})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200000)
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--block-size", type=int, default=1000)
    ap.add_argument("--runner", default="local")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--workdir", default=None,
                    help="scratch directory (default: a new temporary one); what the run "
                         "writes there is removed at its end")
    ap.add_argument("--keep-input", action="store_true",
                    help="keep the input matrix in --workdir for the next run")
    ap.add_argument("--json", default=None, help="write results here")
    ap.add_argument("--skip-end-to-end", action="store_true")
    args = ap.parse_args()
    made = args.workdir is None
    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="samplegen-bench-"))
    os.makedirs(workdir, exist_ok=True)
    # the runners' temporary files (mrjob's, the identity job's) in the scratch directory too
    tmp = os.path.join(workdir, "tmp")
    os.makedirs(tmp, exist_ok=True)
    os.environ["TMPDIR"] = tempfile.tempdir = tmp
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    src = os.path.join(workdir, "input")
    try:
        run(args, workdir, src)
    finally:
        progress(f"removing the scratch files in {workdir}")
        for name in ["run", "identity", "floor.bin", "tmp"] + ([] if args.keep_input else
                                                              ["input"]):
            path = os.path.join(workdir, name)
            if os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)
            elif os.path.lexists(path):
                os.remove(path)
        if made and not os.listdir(workdir):
            os.rmdir(workdir)


def run(args, workdir, src):
    if not os.path.exists(os.path.join(src, "_matrix.json")):
        progress(f"making the input: {args.rows} x {args.cols} dense, block size "
                 f"{args.block_size}")
        driver.make_matrix(src, args.rows, args.cols, args.block_size, seed=1)
    input_bytes = du(src)
    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "numpy": np.__version__, "platform": platform.platform()},
               "input": {"rows": args.rows, "cols": args.cols, "block_size": args.block_size,
                         "bytes": input_bytes},
               "runner": args.runner,
               "command": " ".join(["bench/bench_mr.py"] + sys.argv[1:])}
    results["udf_throughput"] = udf_throughput(args.rows, args.block_size, args.repeats)
    results["phase_throughput"] = phase_throughput(src, args.repeats)
    if not args.skip_end_to_end:
        results["end_to_end"] = end_to_end(src, workdir, args.runner, args.repeats, input_bytes)
    progress("done")
    print(f"input {args.rows} x {args.cols} dense, block size {args.block_size}, "
          f"{input_bytes / 1e6:.0f} MB on disk; runner {args.runner}\n")
    print("| UDF (decision only, one core) | rows/s | row decisions/s |\n|---|---:|---:|")
    for r in results["udf_throughput"]:
        print(f"| {r['udf']} | {r['rows_per_s'] / 1e6:.1f} M | "
              f"{r['row_decisions_per_s'] / 1e6:.1f} M |")
    print("\n| phases in process, one core | map: input rows/s | reduce: input rows/s |"
          "\n|---|---:|---:|")
    for r in results["phase_throughput"]:
        print(f"| {r['udf']} | {r['map_rows_per_s'] / 1e6:.2f} M | "
              f"{r['reduce_rows_per_s'] / 1e6:.2f} M |")
    if "end_to_end" in results:
        results["fold_vs_naive_speedup"] = report_vs_identity(results["end_to_end"])
    results["seconds"] = time.perf_counter() - _START
    print(f"\n{results['seconds'] / 60:.1f} minutes in all", flush=True)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
