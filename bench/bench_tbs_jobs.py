"""Micro-batch TBS jobs: per-batch time of D-R-TBS and D-T-TBS next to the I/O floor.

For each batch size B and decay (exponential, polynomial) both jobs run over
the same stream of Parquet batches (B rows of id int64, f0 float64, f1
float64, label int32), one ``samplegen tbs run`` per arriving batch
(in-process runner, 4 partitions, durable writes), with n = 2B as in the
paper's setting (n = 2e7 for B = 1e7).  Right before or after each batch (the
order alternates; not during the warm-up) the *floor* does what no job can avoid: read every
partition's slice of the batch and write a delta of the same size as the
job's (the same number of rows in, the same number of keys out, through the
same atomic writer, on as many threads as the job's default).  The two
algorithms run in lockstep, batch by batch.
Times are medians over the measured batches, after 30
batches of warm-up (with lambda = 0.07, W_k is then within 12% of its limit,
so the reservoir inserts and evicts about as many items per batch as in the
steady state); the batch with a compaction (every 8 batches) is reported apart.

    .venv/bin/python bench/bench_tbs_jobs.py [--quick] [--update-doc docs/BENCHMARKS.md]
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_tbs import machine, update_doc  # noqa: E402

from samplegen.tbs.stream import run  # noqa: E402
from samplegen.tbs.stream.batches import partition_bounds, read_rows  # noqa: E402
from samplegen.tbs.stream.job import THREAD_ROWS, inline_workers  # noqa: E402
from samplegen.tbs.stream.storage import Store  # noqa: E402
from samplegen.tbs.stream.task import ROW_GROUP  # noqa: E402

HEADING = "## Micro-batch TBS jobs"
P = 4
COMPACT = 8
PRODUCER_ROW_GROUP = 1 << 18      # rows per row group of the synthetic batches (about 6 MB)


def make_batch(path, size, seed):
    import fastparquet
    import pandas as pd
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"id": np.arange(size, dtype=np.int64), "f0": rng.standard_normal(size),
                       "f1": rng.random(size), "label": rng.integers(0, 10, size).astype(np.int32)})
    fastparquet.write(path, df, write_index=False, row_group_offsets=PRODUCER_ROW_GROUP,
                      stats=False)


def delta_sizes(state, k):
    import fastparquet
    out = []
    for side in ("in", "out"):
        folder = os.path.join(state, "deltas", f"{k:010d}", side)
        out.append([fastparquet.ParquetFile(os.path.join(folder, f"part-{p:05d}.parquet"))
                    .info["rows"]
                    for p in range(P)])
    return out


def floor(store, path, size, k, ins, outs, writer, workers=1):
    """Read each partition's slice of the batch, write a delta of the job's size
    (the partitions on as many threads as the job's in-process runner uses)."""
    import fastparquet
    import pandas as pd
    groups = [[rg.num_rows for rg in fastparquet.ParquetFile(path).row_groups]]

    def one(p, bounds):
        lo, hi = bounds
        df = read_rows([path], groups, lo, hi)
        new = df.iloc[:ins[p]].copy()
        new["_sg_batch"] = np.int64(k)
        new["_sg_row"] = np.arange(lo, lo + len(new), dtype=np.int64)
        store.write_parquet(f"{k}/in-{p}.parquet", new, **writer)
        keys = pd.DataFrame({"_sg_batch": np.full(outs[p], k, dtype=np.int64),
                             "_sg_row": np.arange(outs[p], dtype=np.int64)})
        store.write_parquet(f"{k}/out-{p}.parquet", keys, row_group_offsets=ROW_GROUP, stats=False)

    bounds = partition_bounds(groups, P)
    if workers == 1:
        for p in range(P):
            one(p, bounds[p])
    else:
        with ThreadPoolExecutor(workers) as pool:
            list(pool.map(one, range(P), bounds))
    store.sync()


class Case:
    """One algorithm's STATE and floor over the shared stream of batches."""

    def __init__(self, work, size, decay, algorithm, lam):
        self.size, self.decay, self.algorithm = size, decay, algorithm
        self.n = 2 * size
        self.params = {"algorithm": algorithm, "decay": decay, "size": self.n, "seed": 1,
                       "partitions": P, "compact_every": COMPACT, "keep_deltas": 2}
        if decay == "exp":
            self.params["lambda"] = lam
        if algorithm == "ttbs":
            self.params["mean_batch_size"] = float(size)
        self.state = os.path.join(work, f"{algorithm}-{decay}-state")
        self.floor_store = Store(os.path.join(work, f"{algorithm}-{decay}-floor"))
        self.writer = {"object_encoding": {}, "row_group_offsets": ROW_GROUP, "stats": False}
        self.rows = []

    def step(self, batches, path, k, timed):
        """Batch k: the job, and (when timed) the floor before or after it (alternating)."""
        order = (("job", "floor") if k % 2 else ("floor", "job")) if timed else ("job",)
        t = {}
        for what in order:
            if what == "job":
                started, cpu = time.perf_counter(), time.process_time()
                commit = run(batches, self.state, self.params if k == 1 else {},
                             options={"batches_per_job": 1})
                t["job"] = time.perf_counter() - started
                t["job_cpu"] = time.process_time() - cpu
                ins, outs = delta_sizes(self.state, k)
            else:
                # the floor needs the job's delta sizes: before it, the previous batch's
                if "job" not in t:
                    ins, outs = (delta_sizes(self.state, k - 1) if k > 1
                                 else ([self.size // P] * P, [0] * P))
                started, cpu = time.perf_counter(), time.process_time()
                floor(self.floor_store, path, self.size, k, ins, outs, self.writer,
                      inline_workers({}, P, self.size / P))   # as many threads as the job
                t["floor"] = time.perf_counter() - started
                t["floor_cpu"] = time.process_time() - cpu
                shutil.rmtree(self.floor_store.path(str(k)))
        self.rows.append({"k": k, "job": t["job"], "floor": t.get("floor"), "job_cpu": t["job_cpu"],
                          "floor_cpu": t.get("floor_cpu"), "in": sum(ins), "out": sum(outs),
                          "compaction": commit["snapshot"] == k,
                          "sample": commit["driver"]["size"]})

    def result(self, warmup):
        rows = self.rows
        timed = [r for r in rows[warmup:] if not r["compaction"]]
        compactions = [r for r in rows if r["compaction"]]
        shutil.rmtree(self.state)
        shutil.rmtree(self.floor_store.root, ignore_errors=True)
        return {"algorithm": self.algorithm, "decay": self.decay, "B": self.size, "n": self.n,
                "job_ms": 1e3 * float(np.median([r["job"] for r in timed])),
                "floor_ms": 1e3 * float(np.median([r["floor"] for r in timed])),
                "ratio": float(np.median([r["job"] / r["floor"] for r in timed])),
                "job_cpu_ms": 1e3 * float(np.median([r["job_cpu"] for r in timed])),
                "floor_cpu_ms": 1e3 * float(np.median([r["floor_cpu"] for r in timed])),
                "ratio_cpu": float(np.median([r["job_cpu"] / r["floor_cpu"] for r in timed])),
                "in_per_batch": float(np.mean([r["in"] for r in timed])),
                "out_per_batch": float(np.mean([r["out"] for r in timed])),
                "sample": rows[-1]["sample"],
                "compaction_ms": 1e3 * compactions[-1]["job"] if compactions else None,
                "load": os.getloadavg()[0],
                "batches": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}
                            for r in rows]}


def run_pair(work, base_file, size, decay, warmup, measure, lam):
    """D-T-TBS and D-R-TBS over the same batches in lockstep: for each arriving
    batch both jobs (and their floors) run one after the other, the first one
    alternating, so that both see the machine in the same state; R-TBS / T-TBS
    is then the median of per-batch ratios, like job / floor."""
    batches = os.path.join(work, f"{decay}-batches")
    os.makedirs(batches)
    cases = {a: Case(work, size, decay, a, lam) for a in ("ttbs", "rtbs")}
    for k in range(1, warmup + measure + 1):
        path = os.path.join(batches, f"batch-{k}.parquet")
        os.link(base_file, path)
        for a in (("ttbs", "rtbs") if k % 2 else ("rtbs", "ttbs")):
            cases[a].step(batches, path, k, k > warmup)
        if k > 1:
            os.remove(os.path.join(batches, f"batch-{k - 1}.parquet"))   # keep the disk use bounded
    shutil.rmtree(batches)
    both = [(t, r) for t, r in zip(cases["ttbs"].rows[warmup:], cases["rtbs"].rows[warmup:])
            if not (t["compaction"] or r["compaction"])]
    results = [cases[a].result(warmup) for a in ("ttbs", "rtbs")]
    results[1]["rt"] = float(np.median([r["job"] / t["job"] for t, r in both]))
    results[1]["rt_cpu"] = float(np.median([r["job_cpu"] / t["job_cpu"] for t, r in both]))
    return results


def markdown(results, command, machine_text, warmup, measure, fsync=True):
    lines = [HEADING, "", f"Command: `{command}`", "", f"Machine: {machine_text}.", "",
             f"One `samplegen tbs run` per arriving batch (in-process runner, {P} partitions -- on "
             f"{inline_workers({}, P)} threads from {P * THREAD_ROWS:,} rows per batch, the "
             f"default --, fsync {'on' if fsync else 'off'}), n = 2B, lambda = 0.07 (exp) or "
             f"s = 2, d = 10 (poly); medians over the {measure} batches after {warmup} of warm-up, "
             f"except those with a compaction (every {COMPACT} batches), reported apart (the next "
             "batch deletes the files it superseded; it is in the medians).  *Floor* = reading "
             "every partition's slice of the batch and writing a delta of the job's size (same "
             "rows in, same keys out, same writer, as many threads), timed in the same process "
             "next to each batch.  D-T-TBS and D-R-TBS process the same batches in lockstep (which "
             "goes first alternates), so that both see the machine alike.  Ratios, R-TBS / T-TBS "
             "included, are medians of per-batch ratios; *CPU* is the process's CPU time (the "
             "machine is shared: wall times include waiting for the CPU and the disk).", "",
             "| decay | B (rows/batch) | algorithm | n | rows in/batch | keys out/batch | job ms "
             "| floor ms | job / floor | job CPU ms | floor CPU ms | job / floor (CPU) "
             "| R-TBS / T-TBS | batch with compaction, ms |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    verdicts = []
    for r in results:
        rt = r.get("rt") if r["algorithm"] == "rtbs" else None
        comp = "-" if r["compaction_ms"] is None else f"{r['compaction_ms']:.0f}"
        lines.append(f"| {r['decay']} | {r['B']:,} | "
                     f"{'D-R-TBS' if r['algorithm'] == 'rtbs' else 'D-T-TBS'} | "
                     f"{r['n']:,} | {r['in_per_batch']:,.0f} | {r['out_per_batch']:,.0f} | "
                     f"{r['job_ms']:.0f} | {r['floor_ms']:.0f} | {r['ratio']:.2f} | "
                     f"{r['job_cpu_ms']:.0f} | {r['floor_cpu_ms']:.0f} | "
                     f"{r['ratio_cpu']:.2f} | {'-' if rt is None else f'{rt:.2f}'} | {comp} |")
        if r["algorithm"] == "rtbs":
            rt_cpu = r.get("rt_cpu")
            verdicts.append(
                f"- {r['decay']}, B = {r['B']:,}: D-R-TBS at {r['ratio']:.2f}x the floor "
                f"(CPU {r['ratio_cpu']:.2f}x): "
                f"{'met' if r['ratio'] <= 1.5 else 'not met'}; "
                f"{'-' if rt is None else f'{rt:.2f}'}x D-T-TBS "
                f"(CPU {'-' if rt_cpu is None else f'{rt_cpu:.2f}'}x): "
                f"{'met' if rt is not None and rt <= 1.3 else 'not met'}")
    lines += ["", "Targets: D-R-TBS within 1.5x of the floor and within 1.3x of D-T-TBS.",
              ""] + verdicts
    lines += ["", "Where the time goes, what fsync costs, and the compaction: docs/TBS_JOBS.md, "
              "section 5.  Reproduce with `make bench-tbs-jobs` (`QUICK=1`: 10^5 and 10^6 rows "
              "per batch only)."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="B = 1e5 and 1e6 only, fewer batches")
    p.add_argument("--batch-sizes", help="comma-separated (default 1e5,1e6,1e7)")
    p.add_argument("--decays", default="exp,poly")
    p.add_argument("--lam", type=float, default=0.07)
    p.add_argument("--warmup", type=int, help="batches before measuring (default 30)")
    p.add_argument("--measure", type=int)
    p.add_argument("--workdir",
                   help="where the batches and states go (default: a temporary directory)")
    p.add_argument("--no-fsync", action="store_true",
                   help="run the jobs and the floor without fsync")
    p.add_argument("--json", help="also write the raw results here")
    p.add_argument("--update-doc", help="replace the micro-batch section of this Markdown file")
    args = p.parse_args(argv)
    if args.no_fsync:
        os.environ["SAMPLEGEN_TBS_FSYNC"] = "0"
    sizes = args.batch_sizes or ("1e5,1e6" if args.quick else "1e5,1e6,1e7")
    sizes = [int(float(x)) for x in sizes.split(",")]
    warmup = args.warmup if args.warmup is not None else 30
    measure = args.measure if args.measure is not None else (5 if args.quick else 15)
    machine_text = machine()
    work = tempfile.mkdtemp(prefix="bench-tbs-jobs-", dir=args.workdir)
    results = []
    try:
        for size in sizes:
            base = os.path.join(work, f"base-{size}.parquet")
            make_batch(base, size, seed=size)
            for decay in args.decays.split(","):
                for r in run_pair(work, base, size, decay, warmup, measure, args.lam):
                    results.append(r)
                    print(f"{decay:4s} B={size:>10,} {r['algorithm']}: job {r['job_ms']:8.1f} ms  "
                          f"floor {r['floor_ms']:8.1f} ms  job/floor {r['ratio']:.2f}  "
                          f"in {r['in_per_batch']:,.0f} out {r['out_per_batch']:,.0f}", flush=True)
            os.remove(base)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    command = "python bench/bench_tbs_jobs.py" + ("".join(f" {a}" for a in (argv if argv is not None
                                                                            else sys.argv[1:])))
    fsync = os.environ.get("SAMPLEGEN_TBS_FSYNC", "1") != "0"
    section = markdown(results, command.strip(), machine_text, warmup, measure, fsync)
    print(section)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_text, "results": results}, fh, indent=1)
    if args.update_doc:
        update_doc(args.update_doc, section, HEADING)


if __name__ == "__main__":
    main()
