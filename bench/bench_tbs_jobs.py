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

The batches, the STATEs and the floor's deltas live under ``--base``: a local
directory (default: a temporary one) or any URL of the project's filesystem
layer (``hdfs:///samplegen-bench/tbs-jobs``: HDFS through WebHDFS, the client
environment of the cluster set), each run in a fresh subdirectory removed at
the end.  On a remote filesystem the WebHDFS (HTTP) requests of each job and
each floor are counted too.

    .venv/bin/python bench/bench_tbs_jobs.py [--quick] [--base URL]
        [--update-doc docs/BENCHMARKS.md]
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_tbs import machine, update_doc  # noqa: E402

from samplegen.jobs import fs as fsmod  # noqa: E402
from samplegen.tbs.stream import run  # noqa: E402
from samplegen.tbs.stream.batches import _open as open_batch  # noqa: E402
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


class Requests:
    """HTTP requests to a remote filesystem (WebHDFS: NameNode and DataNode),
    counted by operation; nothing for a local one."""

    def __init__(self, url):
        self.counts = Counter()
        if fsmod.is_local(url):
            return
        session = getattr(fsmod.get_fs(url).fs, "session", None)
        if session is None:
            return
        lock, send = threading.Lock(), session.request

        def request(method, url, *args, **kwargs):
            op = (kwargs.get("params") or {}).get("op")
            if op is None:                   # a DataNode's, the operation in its URL
                found = re.search(r"[?&]op=(\w+)", url)
                op = "DN " + (found.group(1) if found else method.upper())
            with lock:
                self.counts[op] += 1
            return send(method, url, *args, **kwargs)

        session.request = request

    def snapshot(self):
        return Counter(self.counts)

    def since(self, before):
        return dict(self.counts - before)


def delta_sizes(state, k):
    out = []
    for side in ("in", "out"):
        folder = f"deltas/{k:010d}/{side}"
        out.append([state.open_parquet(f"{folder}/part-{p:05d}.parquet").info["rows"]
                    for p in range(P)])
    return out


def floor(store, url, k, ins, outs, writer, workers=1):
    """Read each partition's slice of the batch at ``url``, write a delta of the
    job's size (the partitions on as many threads as the job's in-process
    runner uses), through the job's reader and writer for that filesystem."""
    import pandas as pd
    groups = [[rg.num_rows for rg in open_batch(url).row_groups]]

    def one(p, bounds):
        lo, hi = bounds
        df = read_rows([url], groups, lo, hi)
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

    def __init__(self, work, size, decay, algorithm, lam, requests):
        self.size, self.decay, self.algorithm = size, decay, algorithm
        self.n = 2 * size
        self.params = {"algorithm": algorithm, "decay": decay, "size": self.n, "seed": 1,
                       "partitions": P, "compact_every": COMPACT, "keep_deltas": 2}
        if decay == "exp":
            self.params["lambda"] = lam
        if algorithm == "ttbs":
            self.params["mean_batch_size"] = float(size)
        self.state = fsmod.join(work, f"{algorithm}-{decay}-state")
        self.state_store = Store(self.state)
        self.floor_store = Store(fsmod.join(work, f"{algorithm}-{decay}-floor"))
        self.fs = fsmod.get_fs(work)
        self.requests = requests
        self.writer = {"object_encoding": {}, "row_group_offsets": ROW_GROUP, "stats": False}
        self.rows = []

    def step(self, batches, url, k, timed):
        """Batch k: the job, and (when timed) the floor before or after it (alternating)."""
        order = (("job", "floor") if k % 2 else ("floor", "job")) if timed else ("job",)
        t = {}
        for what in order:
            if what == "job":
                before = self.requests.snapshot()
                started, cpu = time.perf_counter(), time.process_time()
                commit = run(batches, self.state, self.params if k == 1 else {},
                             options={"batches_per_job": 1})
                t["job"] = time.perf_counter() - started
                t["job_cpu"] = time.process_time() - cpu
                t["job_requests"] = self.requests.since(before)
                ins, outs = delta_sizes(self.state_store, k)
            else:
                # the floor needs the job's delta sizes: before it, the previous batch's
                if "job" not in t:
                    ins, outs = (delta_sizes(self.state_store, k - 1) if k > 1
                                 else ([self.size // P] * P, [0] * P))
                before = self.requests.snapshot()
                started, cpu = time.perf_counter(), time.process_time()
                floor(self.floor_store, url, k, ins, outs, self.writer,
                      inline_workers({}, P, self.size / P))   # as many threads as the job
                t["floor"] = time.perf_counter() - started
                t["floor_cpu"] = time.process_time() - cpu
                t["floor_requests"] = self.requests.since(before)
                self.fs.rmtree(self.floor_store.uri(str(k)))
        self.rows.append({"k": k, "job": t["job"], "floor": t.get("floor"), "job_cpu": t["job_cpu"],
                          "floor_cpu": t.get("floor_cpu"), "in": sum(ins), "out": sum(outs),
                          "compaction": commit["snapshot"] == k,
                          "sample": commit["driver"]["size"],
                          "job_requests": t["job_requests"],
                          "floor_requests": t.get("floor_requests")})

    def result(self, warmup):
        rows = self.rows
        timed = [r for r in rows[warmup:] if not r["compaction"]]
        compactions = [r for r in rows if r["compaction"]]
        self.fs.rmtree(self.state)
        self.fs.rmtree(self.floor_store.uri())
        requests = {}
        for what in ("job", "floor"):
            ops = sorted({op for r in timed for op in r[f"{what}_requests"]})
            requests[what] = {op: float(np.median([r[f"{what}_requests"].get(op, 0)
                                                   for r in timed])) for op in ops}
            requests[what + "_total"] = float(np.median([sum(r[f"{what}_requests"].values())
                                                         for r in timed]))
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
                "requests": requests,
                "batches": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()}
                            for r in rows]}


def run_pair(work, base_file, size, decay, warmup, measure, lam, requests):
    """D-T-TBS and D-R-TBS over the same batches in lockstep: for each arriving
    batch both jobs (and their floors) run one after the other, the first one
    alternating, so that both see the machine in the same state; R-TBS / T-TBS
    is then the median of per-batch ratios, like job / floor."""
    fs = fsmod.get_fs(work)
    batches = fsmod.join(work, f"{decay}-batches")
    fs.makedirs(batches)
    cases = {a: Case(work, size, decay, a, lam, requests) for a in ("ttbs", "rtbs")}
    for k in range(1, warmup + measure + 1):
        url = fsmod.join(batches, f"batch-{k}.parquet")
        if fsmod.is_local(url):
            os.link(base_file, fsmod.local_path(url))
        else:
            fs.upload(base_file, url)
        for a in (("ttbs", "rtbs") if k % 2 else ("rtbs", "ttbs")):
            cases[a].step(batches, url, k, k > warmup)
        if k > 1:
            fs.rmtree(fsmod.join(batches, f"batch-{k - 1}.parquet"))   # keep the disk use bounded
    fs.rmtree(batches)
    both = [(t, r) for t, r in zip(cases["ttbs"].rows[warmup:], cases["rtbs"].rows[warmup:])
            if not (t["compaction"] or r["compaction"])]
    results = [cases[a].result(warmup) for a in ("ttbs", "rtbs")]
    results[1]["rt"] = float(np.median([r["job"] / t["job"] for t, r in both]))
    results[1]["rt_cpu"] = float(np.median([r["job_cpu"] / t["job_cpu"] for t, r in both]))
    return results


def heading(base):
    """The section's heading: one section per kind of filesystem."""
    if base is None or fsmod.is_local(base):
        return HEADING
    scheme = base.split("://", 1)[0]
    return f"{HEADING} on {'HDFS' if scheme in ('hdfs', 'webhdfs') else scheme}"


def markdown(results, command, machine_text, warmup, measure, fsync=True, base=None):
    remote = base is not None and not fsmod.is_local(base)
    where = (f"BATCHES, STATEs and the floor's deltas under `{base}`, through the project's "
             "filesystem layer (WebHDFS for `hdfs://`; the job and the floor write through the "
             "same `Store`: up to 8 files at a time in the background, each complete once the "
             "DataNode has its bytes, all waited for before a commit and before the floor ends; "
             "no fsync)" if remote else f"fsync {'on' if fsync else 'off'}")
    lines = [heading(base), "", f"Command: `{command}`", "", f"Machine: {machine_text}.", "",
             f"One `samplegen tbs run` per arriving batch (in-process runner, {P} partitions -- on "
             f"{inline_workers({}, P)} threads from {P * THREAD_ROWS:,} rows per batch, the "
             f"default --, {where}), n = 2B, lambda = 0.07 (exp) or "
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
             "| R-TBS / T-TBS | batch with compaction, ms |"
             + (" requests job / floor |" if remote else ""),
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
             + ("---:|" if remote else "")]
    verdicts = []
    for r in results:
        rt = r.get("rt") if r["algorithm"] == "rtbs" else None
        comp = "-" if r["compaction_ms"] is None else f"{r['compaction_ms']:.0f}"
        lines.append(f"| {r['decay']} | {r['B']:,} | "
                     f"{'D-R-TBS' if r['algorithm'] == 'rtbs' else 'D-T-TBS'} | "
                     f"{r['n']:,} | {r['in_per_batch']:,.0f} | {r['out_per_batch']:,.0f} | "
                     f"{r['job_ms']:.0f} | {r['floor_ms']:.0f} | {r['ratio']:.2f} | "
                     f"{r['job_cpu_ms']:.0f} | {r['floor_cpu_ms']:.0f} | "
                     f"{r['ratio_cpu']:.2f} | {'-' if rt is None else f'{rt:.2f}'} | {comp} |"
                     + (f" {r['requests']['job_total']:.0f} / {r['requests']['floor_total']:.0f} |"
                        if remote else ""))
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
    if remote:
        lines += ["", "*Requests*: HTTP requests to the filesystem per batch (median; WebHDFS: "
                  "NameNode operations, and each data transfer once more to the DataNode, `DN`), "
                  "by operation:", ""]
        for r in results:
            for what in ("job", "floor"):
                ops = ", ".join(f"{op} {n:g}" for op, n in sorted(r["requests"][what].items()))
                lines.append(f"- {r['decay']}, B = {r['B']:,}, "
                             f"{'D-R-TBS' if r['algorithm'] == 'rtbs' else 'D-T-TBS'} {what}: "
                             f"{ops}")
        lines += ["", "Reproduce with the command above, the cluster's client environment set."]
    else:
        lines += ["", "Where the time goes, what fsync costs, and the compaction: "
                  "docs/TBS_JOBS.md, section 5.  Reproduce with `make bench-tbs-jobs` "
                  "(`QUICK=1`: 10^5 and 10^6 rows per batch only)."]
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="B = 1e5 and 1e6 only, fewer batches")
    p.add_argument("--batch-sizes", help="comma-separated (default 1e5,1e6,1e7)")
    p.add_argument("--decays", default="exp,poly")
    p.add_argument("--lam", type=float, default=0.07)
    p.add_argument("--warmup", type=int, help="batches before measuring (default 30)")
    p.add_argument("--measure", type=int)
    p.add_argument("--base", "--workdir", dest="base",
                   help="directory or URL (hdfs:///...) under which the batches, states and the "
                        "floor's deltas go, in a fresh subdirectory (default: a local temporary "
                        "directory)")
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
    remote = args.base is not None and not fsmod.is_local(args.base)
    # the synthetic batch is made on the local disk; a local run's files stay beside it
    scratch = tempfile.mkdtemp(prefix="bench-tbs-jobs-",
                               dir=None if remote else args.base and fsmod.local_path(args.base))
    work = (fsmod.join(args.base, f"bench-tbs-jobs-{uuid.uuid4().hex[:12]}") if remote
            else scratch)
    fs = fsmod.get_fs(work)
    requests = Requests(work)
    results = []
    try:
        fs.makedirs(work)
        for size in sizes:
            base = os.path.join(scratch, f"base-{size}.parquet")
            make_batch(base, size, seed=size)
            for decay in args.decays.split(","):
                for r in run_pair(work, base, size, decay, warmup, measure, args.lam, requests):
                    results.append(r)
                    print(f"{decay:4s} B={size:>10,} {r['algorithm']}: job {r['job_ms']:8.1f} ms  "
                          f"floor {r['floor_ms']:8.1f} ms  job/floor {r['ratio']:.2f}  "
                          f"in {r['in_per_batch']:,.0f} out {r['out_per_batch']:,.0f}"
                          + (f"  requests {r['requests']['job_total']:.0f} / "
                             f"{r['requests']['floor_total']:.0f}" if remote else ""), flush=True)
            os.remove(base)
    finally:
        if remote:
            fs.rmtree(work)
        shutil.rmtree(scratch, ignore_errors=True)
    command = "python bench/bench_tbs_jobs.py" + ("".join(f" {a}" for a in (argv if argv is not None
                                                                            else sys.argv[1:])))
    fsync = os.environ.get("SAMPLEGEN_TBS_FSYNC", "1") != "0"
    section = markdown(results, command.strip(), machine_text, warmup, measure, fsync,
                       args.base)
    print(section)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"machine": machine_text, "results": results}, fh, indent=1)
    if args.update_doc:
        update_doc(args.update_doc, section, heading(args.base) + "\n")   # that section only


if __name__ == "__main__":
    main()
