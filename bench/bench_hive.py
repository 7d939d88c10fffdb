"""Hive benchmark (section V-D, figure 13 at laptop scale): bootstrap samples
by our single sampling query against the join-based baseline (assignments
table + join + reblock), on the same HiveServer2, the same block table, in
the same run.

    .venv/bin/python bench/bench_hive.py            # full: 100k x 100, N = 20..50
    .venv/bin/python bench/bench_hive.py --quick    # 20k x 100, N = 20, 50, 1 repeat

For every N it times, in interleaved order and ``--repeats`` times:

* ``ours``: bootstrap.hql (sampling UDTF, chunks of rows, DISTRIBUTE BY /
  SORT BY, reblock);
* ``ours, rows``: the same query with one row per occurrence (the paper's
  UDTF form);
* ``assignments``: baseline_assignments.hql (create and fill the table);
* ``join``: baseline_bootstrap.hql (explode, join, DISTRIBUTE BY / SORT BY,
  the same reblock script with one row per occurrence);

checks that all three queries wrote byte-identical sample blocks, and prints
medians as Markdown (saved as JSON with ``--json``).  Without ``--hive-url``
it starts its own local server (python -m samplegen.hive.server) and stops it after;
then it also records the server's CPU time per script (user + system of the
JVM and of the TRANSFORM processes it ran, from /proc): on a machine shared
with other work, wall-clock times vary by tens of percent from run to run,
CPU time much less.
"""
import argparse
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from samplegen.hive import engine, server, sql  # noqa: E402
from samplegen.hive.client import Client  # noqa: E402
from samplegen.jobs import (
    daemons,  # noqa: E402
    driver,  # noqa: E402
)
from samplegen.jobs.plan import make_plan  # noqa: E402
from samplegen.jobs.store import Matrix  # noqa: E402
from samplegen.udfs.custom import load_udf  # noqa: E402


def parts_digest(path):
    """Digest of every part file under a run directory (names and bytes)."""
    digest = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(path)):
        dirs.sort()
        for name in sorted(files):
            if name.startswith("part-"):
                full = os.path.join(root, name)
                digest.update(os.path.relpath(full, path).encode())
                with open(full, "rb") as f:
                    digest.update(f.read())
    return digest.hexdigest()


def machine():
    info = {"python": platform.python_version(), "platform": platform.platform(),
            "cores": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        info["cpu"] = models[0] if models else platform.processor()
        with open("/proc/meminfo") as f:
            info["memory_gb"] = round(int(f.readline().split()[1]) / 2 ** 20, 1)
        with open("/proc/loadavg") as f:
            info["loadavg_at_start"] = f.read().split()[:3]
    except OSError:
        pass
    try:
        import pyspark
        info["spark"] = pyspark.__version__
    except ImportError:
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    info["java"] = (java.stderr or java.stdout).splitlines()[0] if java.returncode == 0 else "?"
    return info


def cpu_seconds(pid):
    """User + system CPU seconds of *pid* and of its children that it reaped."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = sum(int(x) for x in fields[11:15])  # utime, stime, cutime, cstime
    return ticks / os.sysconf("SC_CLK_TCK")


def render_baseline(plan, table, assignments, output, engine_settings, zip_name):
    """``(assignments script, join query script)`` of the join-based baseline
    for a bootstrap plan (rendered with the engine's validated kinds)."""
    if plan.udf != "bootstrap":
        raise ValueError("the join-based baseline generates bootstrap samples only")
    values = {"table": table, "assignments": assignments, "files": engine_settings["files"],
              "zip": zip_name, "python": engine_settings["python"], "rows": plan.rows,
              "cols": plan.cols, "block_size": plan.block_size, "kind": plan.kind,
              "seed": plan.seed, "samples": int(plan.params["samples"]),
              "size": int(plan.params["size"])}
    assign = sql.render(sql.load_script("baseline_assignments"), values, engine.KINDS)
    values["output"] = engine.server_path(output)
    join = sql.render(sql.load_script("baseline_bootstrap"), values, engine.KINDS)
    return assign, join


class Bench:
    def __init__(self, client, conf, zip_name, table, matrix, workdir, server_pid=None):
        self.client, self.conf, self.zip = client, conf, zip_name
        self.table, self.matrix, self.workdir = table, matrix, workdir
        self.server_pid = server_pid
        self.counter = 0
        self.cpu = []  # CPU seconds of the scripts timed last

    def _out(self):
        self.counter += 1
        path = os.path.join(self.workdir, "out", f"run-{self.counter:04d}")
        shutil.rmtree(path, ignore_errors=True)
        os.makedirs(path)
        return path

    def _plan(self, n, size, out):
        udf = load_udf("bootstrap", self.matrix.rows, {"samples": n, "size": size})
        return make_plan(udf, 7, self.matrix.meta, out)

    def _timed_script(self, text):
        """Run a rendered script (every statement, as a user would); returns
        (seconds, rows of the last statement); appends the server's CPU
        seconds to ``self.cpu``."""
        cpu = cpu_seconds(self.server_pid) if self.server_pid else None
        t = time.perf_counter()
        rows = self.client.run_script(text)
        seconds = time.perf_counter() - t
        if cpu is not None:
            self.cpu.append(cpu_seconds(self.server_pid) - cpu)
        return seconds, rows

    def ours(self, n, size, records):
        out = self._out()
        conf = dict(self.conf, records=records)
        text = engine.render_query(self._plan(n, size, out), self.table, out, conf, self.zip)
        seconds, rows = self._timed_script(text)
        engine.summaries_of(rows)
        return seconds, out

    def baseline(self, n, size):
        out = self._out()
        assign, join = render_baseline(self._plan(n, size, out), self.table,
                                       "bench_assignments", out, self.conf, self.zip)
        assign_s, _ = self._timed_script(assign)
        join_s, rows = self._timed_script(join)
        engine.summaries_of(rows)
        return assign_s, join_s, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--cols", type=int, default=100)
    p.add_argument("--block-size", type=int, default=1000)
    p.add_argument("--samples", default="20,30,40,50", help="numbers of bootstrap samples")
    p.add_argument("--size", type=int, default=None,
                   help="rows per sample (default rows/50, the paper's ratio)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--quick", action="store_true",
                   help="20k x 100, N = 20 and 50, one repeat (a smoke test of the benchmark)")
    p.add_argument("--hive-url", default=None, help="use this server instead of starting one")
    p.add_argument("--workdir", default=os.path.join("work", "bench-hive"))
    p.add_argument("--driver-memory", default="2g", help="of the server this script starts")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.samples, args.repeats = 20_000, "20,50", 1
    counts = [int(x) for x in args.samples.split(",")]
    size = args.size or max(1, args.rows // 50)
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)

    src = os.path.join(workdir, f"matrix-{args.rows}x{args.cols}-b{args.block_size}")
    if not os.path.exists(os.path.join(src, "_matrix.json")):
        driver.make_matrix(src, args.rows, args.cols, args.block_size, seed=1, overwrite=True)
    matrix = Matrix.open(src)

    started_server = server_pid = None
    url = args.hive_url
    if url is None:
        server_dir = os.path.join(workdir, "server")
        state = server.read_state(server_dir)
        port = state[1] if state else daemons.free_port()
        server_pid, _ = server.up(server_dir, port, log=lambda m: print(m, file=sys.stderr),
                                  driver_memory=args.driver_memory)
        started_server = None if state else server_dir
        url = f"hive://127.0.0.1:{port}/default"
    files = os.path.join(workdir, "files")
    conf = engine.settings({"hive_url": url, "hive_files": files})
    zip_name = engine.ship_zip(files, "bootstrap")
    results = {"machine": machine(), "rows": args.rows, "cols": args.cols,
               "block_size": args.block_size, "size": size, "repeats": args.repeats,
               "command": " ".join([os.path.relpath(sys.executable), "bench/bench_hive.py"]
                                   + (argv if argv is not None else sys.argv[1:])),
               "by_samples": []}
    try:
        with Client(url) as client:
            table = "bench_blocks"
            client.execute(f"DROP TABLE IF EXISTS {table}", fetch=False)
            client.run_script(engine.block_table_ddl(table, src, matrix.meta))
            bench = Bench(client, conf, zip_name, table, matrix, workdir, server_pid)
            bench.ours(2, 100, "chunks")  # warm-up: metastore, JIT, page cache
            bench.baseline(2, 100)
            for n in counts:
                times = {"ours": [], "ours, rows": [], "assignments": [], "join": []}
                cpu = {k: [] for k in times}
                for rep in range(args.repeats):
                    bench.cpu = []
                    s, out_a = bench.ours(n, size, "chunks")
                    times["ours"].append(s)
                    assign_s, join_s, out_b = bench.baseline(n, size)
                    times["assignments"].append(assign_s)
                    times["join"].append(join_s)
                    s, out_c = bench.ours(n, size, "rows")
                    times["ours, rows"].append(s)
                    for key, value in zip(("ours", "assignments", "join", "ours, rows"),
                                          bench.cpu):
                        cpu[key].append(value)
                    if rep == 0:
                        digests = {parts_digest(o) for o in (out_a, out_b, out_c)}
                        if len(digests) != 1:
                            raise SystemExit(f"N={n}: the three queries wrote different blocks")
                    for o in (out_a, out_b, out_c):
                        shutil.rmtree(o)
                entry = {"samples": n, "identical_outputs": True,
                         "seconds": {k: v for k, v in times.items()},
                         "median": {k: statistics.median(v) for k, v in times.items()}}
                entry["median"]["assignments + join"] = statistics.median(
                    [a + j for a, j in zip(times["assignments"], times["join"])])
                if server_pid:
                    entry["cpu_seconds"] = cpu
                    entry["cpu_median"] = {k: statistics.median(v) for k, v in cpu.items()}
                    entry["cpu_median"]["assignments + join"] = statistics.median(
                        [a + j for a, j in zip(cpu["assignments"], cpu["join"])])
                results["by_samples"].append(entry)
                m = entry["median"]
                print(f"N={n}: ours {m['ours']:.2f} s, ours (rows) {m['ours, rows']:.2f} s, "
                      f"join {m['join']:.2f} s (+ assignments {m['assignments']:.2f} s)",
                      file=sys.stderr)
            client.execute("DROP TABLE IF EXISTS bench_assignments", fetch=False)
            client.execute(f"DROP TABLE IF EXISTS {table}", fetch=False)
    finally:
        if started_server:
            server.down(started_server, log=lambda m: print(m, file=sys.stderr))
    with open("/proc/loadavg") as f:
        results["machine"]["loadavg_at_end"] = f.read().split()[:3]
    print(report(results))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 0


def report(results):
    header = ["| samples | ours | ours, one row per occurrence | join | assignments | "
              "assignments + join | join / ours | (assignments + join) / ours |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines = [f"Bootstrap samples of {results['size']} rows from a dense {results['rows']} x "
             f"{results['cols']} matrix (block size {results['block_size']}); median of "
             f"{results['repeats']} runs."]
    for key, title in (("median", "Wall-clock seconds"),
                       ("cpu_median", "Server CPU seconds (JVM and TRANSFORM processes)")):
        if not all(key in e for e in results["by_samples"]):
            continue
        lines += ["", title + ":", ""] + header
        for e in results["by_samples"]:
            m = e[key]
            lines.append(f"| {e['samples']} | {m['ours']:.2f} | {m['ours, rows']:.2f} | "
                         f"{m['join']:.2f} | {m['assignments']:.2f} | "
                         f"{m['assignments + join']:.2f} | {m['join'] / m['ours']:.2f} | "
                         f"{m['assignments + join'] / m['ours']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
