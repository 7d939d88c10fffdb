"""Hadoop benchmark: the sample-generation paper's Hadoop experiments at laptop
scale on the single-node cluster of ``make hadoop-up``, in one run.

* hold-out (10 pairs), k-fold (k = 10, fold mode and naive) and bootstrap
  (20 samples) through ``--runner hadoop``, input and output on HDFS, next to
  the **identity job** (``bench/identity_job.py`` on the same runner: the same
  volume of records read, shuffled and written through the same writer, no
  decisions, no re-blocking) and the **I/O floor** (``hdfs dfs -cat`` the
  input, ``hdfs dfs -put`` the output's bytes);
* figure 10: 2 to 50 samples of 5 % of the rows each (hold-out, bootstrap);
* figure 11: k = 5, 10, 20, fold mode against naive;
* one metadata operation on HDFS from Python (exists, listdir, rename through
  the filesystem layer) against one ``hdfs dfs`` call.

    make hadoop-up
    .venv/bin/python bench/bench_hadoop.py --rows 200000 --cols 100 \\
        --json work/bench-hadoop/results.json

Results print as Markdown and are saved as JSON (``--json``).
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from identity_job import report_vs_identity  # noqa: E402  (bench/ is on sys.path)

from samplegen.jobs import cluster, driver  # noqa: E402
from samplegen.jobs import fs as fsmod  # noqa: E402
from samplegen.jobs.package import build_zip  # noqa: E402
from samplegen.jobs.store import Matrix  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BASE = "hdfs:///samplegen-bench"


def du(uri):
    remote = fsmod.get_fs(uri)
    return sum(int(info.get("size") or 0) for info in remote.fs.find(uri, detail=True).values())


def samplegen(*args):
    subprocess.run([sys.executable, "-m", "samplegen", "-q", *map(str, args)], check=True)


def run_sampling(src, dest, command, params, conf):
    fsmod.get_fs(dest).rmtree(dest)
    t = time.perf_counter()
    samplegen(command, src, dest, *params, "--seed", 7, "--runner", "hadoop",
              "--mrjob-conf", conf)
    seconds = time.perf_counter() - t
    nbytes = du(dest)
    fsmod.get_fs(dest).rmtree(dest)
    return seconds, nbytes


def run_identity(src, dest, copies, conf, zip_path):
    remote = fsmod.get_fs(dest)
    remote.rmtree(dest)
    remote.makedirs(dest)
    parts = Matrix.open(src).part_uris()
    t = time.perf_counter()
    subprocess.run([sys.executable, os.path.join(HERE, "identity_job.py"), "-r", "hadoop",
                    "-c", conf, "--py-files", zip_path, "--copies", str(copies),
                    "--out", dest, "--no-output", *parts],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    seconds = time.perf_counter() - t
    remote.rmtree(dest)
    return seconds


def io_floor(src, out_bytes, dest):
    """``hdfs dfs -cat`` every input part, then ``hdfs dfs -put`` *out_bytes*
    (streamed from this process) to one file."""
    parts = Matrix.open(src).part_uris()
    t = time.perf_counter()
    subprocess.run(["hdfs", "dfs", "-cat", *parts], check=True, stdout=subprocess.DEVNULL)
    put = subprocess.Popen(["hdfs", "dfs", "-put", "-f", "-", dest], stdin=subprocess.PIPE)
    chunk = b"\0" * (8 << 20)
    left = out_bytes
    while left > 0:
        piece = chunk[:min(left, len(chunk))]
        put.stdin.write(piece)
        left -= len(piece)
    put.stdin.close()
    assert put.wait() == 0
    seconds = time.perf_counter() - t
    fsmod.get_fs(dest).rmtree(dest)
    return seconds


def metadata_ops(repeats=50):
    """Median milliseconds of exists / listdir / rename through the
    filesystem layer, and of one ``hdfs dfs -test -e`` process."""
    d = f"{BASE}/meta"
    remote = fsmod.get_fs(d)
    remote.makedirs(f"{d}/a")
    times = {"exists": [], "listdir": [], "rename": []}
    for _ in range(repeats):
        for op, call in (("exists", lambda: remote.exists(f"{d}/a")),
                         ("listdir", lambda: remote.listdir(d)),
                         ("rename", lambda: remote.rename(f"{d}/a", f"{d}/b"))):
            t = time.perf_counter()
            call()
            times[op].append(time.perf_counter() - t)
        remote.rename(f"{d}/b", f"{d}/a")
    cli = []
    for _ in range(3):
        t = time.perf_counter()
        subprocess.run(["hdfs", "dfs", "-test", "-e", d], check=True)
        cli.append(time.perf_counter() - t)
    remote.rmtree(d)
    out = {op: statistics.median(ts) * 1000 for op, ts in times.items()}
    out["hdfs dfs -test -e"] = statistics.median(cli) * 1000
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200000)
    ap.add_argument("--cols", type=int, default=100)
    ap.add_argument("--block-size", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=1,
                    help="repeats of the main and figure 11 cases (medians)")
    ap.add_argument("--workdir", default=os.path.join("work", "hadoop"),
                    help="the cluster's work directory (make hadoop-up)")
    ap.add_argument("--only", default="main,fig10,fig11",
                    help="experiments, comma-separated: main, fig10, fig11")
    ap.add_argument("--fig10-samples", default="2,10,20,30,40,50")
    ap.add_argument("--fig11-k", default="5,10,20")
    ap.add_argument("--json", default=None, help="write results here")
    args = ap.parse_args()
    os.environ.update(cluster.env(args.workdir))
    only = set(args.only.split(","))
    tmp = tempfile.mkdtemp(prefix="samplegen-bench-hadoop-")
    conf = os.path.join(tmp, "mrjob.conf")
    with open(conf, "w") as f:
        f.write(f"include: {ROOT}/conf/mrjob-local-hadoop.conf\nrunners:\n  hadoop:\n"
                f"    hadoop_streaming_jar: {cluster.streaming_jar(args.workdir)}\n")
    zip_path = build_zip(os.path.join(tmp, "samplegen.zip"))
    src = f"{BASE}/input-{args.rows}x{args.cols}"
    if not fsmod.get_fs(src).exists(fsmod.join(src, "_SUCCESS")):
        driver.make_matrix(src, args.rows, args.cols, args.block_size, seed=1, overwrite=True)
    input_bytes = du(src)
    out = f"{BASE}/out"
    load = os.getloadavg()[0]
    results = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                           "platform": platform.platform(), "load_at_start": load},
               "input": {"rows": args.rows, "cols": args.cols, "block_size": args.block_size,
                         "bytes": input_bytes},
               "command": " ".join(["bench/bench_hadoop.py"] + sys.argv[1:]),
               "metadata_ms": metadata_ops()}
    if "main" in only:
        rows = []
        for label, command, params, copies in [
                ("hold-out, 10 pairs", "holdout",
                 ["--ratio", 0.8, "--repeats", 10, "--per-row"], 10),
                ("k-fold, k=10, fold mode", "kfold", ["--k", 10, "--per-row"], 1),
                ("k-fold, k=10, naive", "kfold", ["--k", 10, "--naive", "--per-row"], 10),
                ("bootstrap, 20 samples", "bootstrap", ["--samples", 20], 20)]:
            ours, identity, floor = [], [], []
            for _ in range(args.repeats):     # interleaved: drift hits all three alike
                seconds, nbytes = run_sampling(src, out, command, params, conf)
                ours.append(seconds)
                identity.append(run_identity(src, out, copies, conf, zip_path))
                floor.append(io_floor(src, nbytes, f"{BASE}/floor.bin"))
            rows.append({"case": label, "seconds": statistics.median(ours),
                         "identity_seconds": statistics.median(identity),
                         "io_floor_seconds": statistics.median(floor), "output_bytes": nbytes,
                         "output_over_input": nbytes / input_bytes,
                         "runs": ours, "identity_runs": identity, "floor_runs": floor})
            print(rows[-1], flush=True)
        results["main"] = rows
    if "fig10" in only:
        cases = []
        for n in map(int, args.fig10_samples.split(",")):
            for label, command, params in (
                    ("holdout", "holdout", ["--ratio", 0.5, "--repeats", n // 2,
                                            "--fraction", 0.1, "--per-row"]),
                    ("bootstrap", "bootstrap", ["--samples", n, "--size", args.rows // 20])):
                seconds, nbytes = run_sampling(src, out, command, params, conf)
                cases.append({"method": label, "samples": n, "seconds": seconds,
                              "output_bytes": nbytes})
                print(cases[-1], flush=True)
        results["fig10"] = cases
    if "fig11" in only:
        cases = []
        for k in map(int, args.fig11_k.split(",")):
            runs = {"fold": [], "naive": []}
            for _ in range(args.repeats):     # interleaved: drift hits both alike
                for mode, extra in (("fold", []), ("naive", ["--naive"])):
                    seconds, nbytes = run_sampling(src, out, "kfold",
                                                   ["--k", k, "--per-row", *extra], conf)
                    runs[mode].append((seconds, nbytes))
            for mode, done in runs.items():
                nbytes = done[-1][1]
                cases.append({"k": k, "mode": mode,
                              "seconds": statistics.median(t for t, _ in done),
                              "runs": [t for t, _ in done], "output_bytes": nbytes,
                              "output_over_input": nbytes / input_bytes})
                print(cases[-1], flush=True)
        results["fig11"] = cases
    report(results)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def report(results):
    inp = results["input"]
    print(f"\ninput {inp['rows']} x {inp['cols']} dense, block size {inp['block_size']}, "
          f"{inp['bytes'] / 1e6:.0f} MB on HDFS; load {results['machine']['load_at_start']:.2f}"
          " at start\n")
    print("| metadata operation | ms |\n|---|---:|")
    for op, ms in results["metadata_ms"].items():
        print(f"| {op} | {ms:.1f} |")
    if "main" in results:
        results["fold_vs_naive_speedup"] = report_vs_identity(results["main"])
    if "fig10" in results:
        print("\n| samples | hold-out s | bootstrap s |\n|---:|---:|---:|")
        by = {(c["method"], c["samples"]): c["seconds"] for c in results["fig10"]}
        for n in sorted({c["samples"] for c in results["fig10"]}):
            print(f"| {n} | {by[('holdout', n)]:.1f} | {by[('bootstrap', n)]:.1f} |")
    if "fig11" in results:
        print("\n| k | fold mode s | naive s | naive / fold | output/input fold | "
              "output/input naive |\n|---:|---:|---:|---:|---:|---:|")
        by = {(c["mode"], c["k"]): c for c in results["fig11"]}
        for k in sorted({c["k"] for c in results["fig11"]}):
            f, n = by[("fold", k)], by[("naive", k)]
            print(f"| {k} | {f['seconds']:.1f} | {n['seconds']:.1f} | "
                  f"{n['seconds'] / f['seconds']:.2f}x | {f['output_over_input']:.2f} | "
                  f"{n['output_over_input']:.2f} |")


if __name__ == "__main__":
    main()
