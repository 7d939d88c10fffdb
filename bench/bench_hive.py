"""Hive benchmark (section V-D, figure 13 at laptop scale): bootstrap samples
by our single sampling query against the join-based baseline (assignments
table + join + reblock), on the same HiveServer2, the same block table, in
the same run.

    .venv/bin/python bench/bench_hive.py            # full: 100k x 100, N = 20..50
    .venv/bin/python bench/bench_hive.py --quick    # 20k x 100, N = 20, 50, 1 repeat
    .venv/bin/python bench/bench_hive.py --server spark   # on the Spark Thrift Server

``--server apache`` (the default; ``$HIVE_SERVER``) is Apache Hive's own
HiveServer2 on Tez on the single-node Hadoop (``make hadoop-up``); there the
matrix, the zip (``files=``) and every output directory are on HDFS
(``--data hdfs``, the default there), as a cluster's users keep them.
``--server spark`` is the Spark Thrift Server with local files.

For every N it times, in interleaved order and ``--repeats`` times:

* ``ours``: bootstrap.hql (sampling UDTF, chunks of rows, DISTRIBUTE BY /
  SORT BY, reblock);
* ``ours, rows``: the same query with one row per occurrence (the paper's
  UDTF form);
* ``assignments``: baseline_assignments.hql (create and fill the table);
* ``join``: baseline_bootstrap.hql (explode, join, DISTRIBUTE BY / SORT BY,
  the same reblock script with one row per occurrence);

checks that every query wrote N samples of exactly ``size`` rows (from the
summary rows) and that all three wrote byte-identical sample blocks (the
blocks' CRCs in the summaries, and the files: bytes locally, HDFS file
checksums on HDFS), and prints medians as Markdown (saved as JSON with
``--json``).  Without ``--hive-url`` it starts its own local server (in
``WORKDIR/server-<server>``; one already running from there is used and left
running) and stops it after; then it also records the CPU time per script
(user + system, from /proc) of the server JVM and of the processes that ran
the query: the TRANSFORM processes the Spark server started, or on Apache
Hive every process under YARN's NodeManager (the Tez application master,
the task containers and their TRANSFORM processes; HDFS's daemons are not
counted).  On a machine shared with other work, wall-clock times vary by
tens of percent from run to run, CPU time much less.
"""
import argparse
import contextlib
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from samplegen.hive import apache_server, engine, server, sql  # noqa: E402
from samplegen.hive.client import Client  # noqa: E402
from samplegen.jobs import cluster, daemons, driver  # noqa: E402
from samplegen.jobs import fs as fsmod  # noqa: E402
from samplegen.jobs.plan import make_plan  # noqa: E402
from samplegen.jobs.store import Matrix  # noqa: E402
from samplegen.udfs.custom import load_udf  # noqa: E402


def parts_digest(path):
    """Digest of every part file under a run directory (names and bytes;
    on HDFS names, lengths and HDFS's file checksums)."""
    if not fsmod.is_local(path):
        remote, root = fsmod.fsspec_of(path)
        digest = hashlib.sha256()
        for name in sorted(remote.find(root)):
            if name.rsplit("/", 1)[-1].startswith("part-"):
                digest.update(os.path.relpath(name, root).encode())
                digest.update(json.dumps(remote.ukey(name), sort_keys=True).encode())
        return digest.hexdigest()
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


def _stat(pid):
    """``(parent pid, own ticks, reaped children's ticks)`` of a process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[1]), int(fields[11]) + int(fields[12]),
            int(fields[13]) + int(fields[14]))


def cpu_seconds(pid):
    """User + system CPU seconds of *pid* and of its children that it reaped."""
    _, own, reaped = _stat(pid)
    return (own + reaped) / os.sysconf("SC_CLK_TCK")


def _processes():
    """``{(pid, start time): (parent pid, own ticks)}`` of every process."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            found[(int(name), fields[19])] = (int(fields[1]), int(fields[11]) + int(fields[12]))
    return found


class TreeCPU:
    """CPU seconds of every process under *root* (not *root* itself; with
    *only*, under those of its children whose command line holds *only*)
    while it runs, sampled from /proc every *interval* seconds by a thread: each
    process (pid and start time) counts its own user + system ticks from
    when it was first seen (or from its start, if it started while
    sampling) to when it was last seen.  The reaped-children counters are
    of no use here: YARN kills a released container's launcher and JVM
    together, and a JVM whose launcher died first is re-parented to init,
    its time lost to the NodeManager's tree.  Misses at most *interval* of
    each process's last moments."""

    def __init__(self, root, only=None, interval=0.2):
        self.root, self.only, self.interval = root, only, interval
        self.tops = {}   # (pid, start time) of root's children -> counted?

    def _top(self, key):
        if key not in self.tops:
            try:
                with open(f"/proc/{key[0]}/cmdline", "rb") as f:
                    self.tops[key] = self.only is None or self.only.encode() in f.read()
            except OSError:
                return False
        return self.tops[key]

    def _in_tree(self, procs):
        children = {}
        for key, (parent, _) in procs.items():
            children.setdefault(parent, []).append(key)
        found = set()
        todo = [key[0] for key in children.get(self.root, ()) if self._top(key)]
        found.update(key for key in children.get(self.root, ()) if self._top(key))
        while todo:
            for key in children.get(todo.pop(), ()):
                found.add(key)
                todo.append(key[0])
        return found

    def __enter__(self):
        import threading
        procs = _processes()
        self.first = {k: procs[k][1] for k in self._in_tree(procs)}
        self.last = dict(self.first)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        return self

    def _sample(self):
        procs = _processes()
        for key in self._in_tree(procs) | (self.last.keys() & procs.keys()):
            self.last[key] = procs[key][1]
            self.first.setdefault(key, 0)

    def _run(self):
        while not self.stop.wait(self.interval):
            self._sample()

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()
        self._sample()
        self.seconds = sum(self.last[k] - self.first[k] for k in self.last) \
            / os.sysconf("SC_CLK_TCK")


def tez_application(server_dir):
    """The YARN application of the Apache server's Tez session (the last one
    its log names), or None."""
    import re
    try:
        with open(apache_server.paths(server_dir)["log"], errors="replace") as f:
            found = re.findall(r"application_\d+_\d+", f.read())
    except OSError:
        return None
    return found[-1] if found else None


def nodemanager_pid(hadoop_workdir):
    """The pid of the single-node Hadoop's NodeManager (None if it does not run)."""
    return cluster.running(hadoop_workdir).get("nodemanager")


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
    def __init__(self, client, conf, zip_name, table, matrix, outdir, server_pid=None,
                 tree=None, only=None):
        self.client, self.conf, self.zip = client, conf, zip_name
        self.table, self.matrix, self.outdir = table, matrix, outdir
        self.server_pid = server_pid  # its CPU, and its reaped children's
        self.tree = tree              # and that of every process under this one
        self.only = only              # (if its command line, or its parent's, holds this)
        self.counter = 0
        self.cpu = []  # CPU seconds of the scripts timed last

    def _out(self):
        self.counter += 1
        path = fsmod.join(self.outdir, f"run-{self.counter:04d}")
        remove(path)
        fsmod.get_fs(path).makedirs(path)
        return path

    def _plan(self, n, size, out):
        udf = load_udf("bootstrap", self.matrix.rows, {"samples": n, "size": size})
        return make_plan(udf, 7, self.matrix.meta, out)

    def _timed_script(self, text):
        """Run a rendered script (every statement, as a user would); returns
        (seconds, rows of the last statement); appends the CPU seconds of
        the server and of the processes that ran the query to ``self.cpu``."""
        cpu = cpu_seconds(self.server_pid) if self.server_pid else None
        tree = TreeCPU(self.tree, self.only) if self.tree else contextlib.nullcontext()
        with tree:
            t = time.perf_counter()
            rows = self.client.run_script(text)
            seconds = time.perf_counter() - t
        if cpu is not None:
            self.cpu.append(cpu_seconds(self.server_pid) - cpu
                            + (tree.seconds if self.tree else 0))
        return seconds, rows

    def ours(self, n, size, records):
        out = self._out()
        conf = dict(self.conf, records=records)
        text = engine.render_query(self._plan(n, size, out), self.table, out, conf, self.zip,
                                   self.matrix.uri, finish=False)   # the driver's query
        seconds, rows = self._timed_script(text)
        return seconds, out, engine.summaries_of(rows)

    def baseline(self, n, size):
        out = self._out()
        assign, join = render_baseline(self._plan(n, size, out), self.table,
                                       "bench_assignments", out, self.conf, self.zip)
        assign_s, _ = self._timed_script(assign)
        join_s, rows = self._timed_script(join)
        return assign_s, join_s, out, engine.summaries_of(rows)


def remove(path):
    fs = fsmod.get_fs(path)
    if fs.exists(path):
        fs.rmtree(path)


def check_sizes(summaries, n, size, meta, what):
    """Every one of the *n* samples has every column of blocks, each of
    exactly *size* rows and the matrix's columns; returns the blocks as a
    comparable value (their CRCs included)."""
    col_blocks = -(-meta["cols"] // meta["block_size"])
    found = {}
    for s in summaries:
        found[(s["sample"], s["v"])] = [tuple(b) for b in s["blocks"]]
    want = {(f"sample-{i}", v) for i in range(n) for v in range(col_blocks)}
    if set(found) != want:
        raise SystemExit(f"{what}: wrote {len(found)} columns of blocks, expected {len(want)} "
                         f"({n} samples x {col_blocks})")
    for (name, v), blocks in found.items():
        rows = sum(b[1] for b in blocks)
        cols = {b[2] for b in blocks}
        width = min(meta["block_size"], meta["cols"] - v * meta["block_size"])
        if rows != size or cols != {width}:
            raise SystemExit(f"{what}: {name} column {v} has {rows} rows x {cols} columns, "
                             f"expected {size} x {width}")
    return sorted(found.items())


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
    p.add_argument("--server", choices=server.SERVERS,
                   default=os.environ.get("HIVE_SERVER") or "apache",
                   help="the HiveServer2 to start: Apache Hive on Tez (default) or the Spark "
                        "Thrift Server")
    p.add_argument("--data", choices=("hdfs", "local"), default=None,
                   help="where the matrix, the zip and the outputs are (default: hdfs on "
                        "Apache Hive, local on Spark)")
    p.add_argument("--hdfs-root", default="/tmp/samplegen-bench-hive",
                   help="HDFS directory of the data (and of the Apache server's warehouse)")
    p.add_argument("--hadoop-workdir", default=os.path.join("work", "hadoop"))
    p.add_argument("--hive-url", default=None, help="use this server instead of starting one")
    p.add_argument("--workdir", default=os.path.join("work", "bench-hive"))
    p.add_argument("--driver-memory", default="2g", help="of a Spark server this script starts")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.rows, args.samples, args.repeats = 20_000, "20,50", 1
    data = args.data or ("hdfs" if args.server == "apache" else "local")
    counts = [int(x) for x in args.samples.split(",")]
    size = args.size or max(1, args.rows // 50)
    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    if data == "hdfs" or args.server == "apache":   # this process is a client of the cluster
        os.environ.update(cluster.env(args.hadoop_workdir))
    base = f"hdfs://{args.hdfs_root}/data" if data == "hdfs" else workdir

    src = fsmod.join(base, f"matrix-{args.rows}x{args.cols}-b{args.block_size}")
    if not fsmod.get_fs(src).exists(fsmod.join(src, "_matrix.json")):
        driver.make_matrix(src, args.rows, args.cols, args.block_size, seed=1, overwrite=True)
    matrix = Matrix.open(src)

    log = lambda m: print(m, file=sys.stderr)  # noqa: E731
    started_server = server_pid = nodemanager = None
    url = args.hive_url
    if url is None:
        server_dir = os.path.join(workdir, f"server-{args.server}")
        if args.server == "apache":
            state = apache_server.read_state(server_dir)
            port = state[1] if state else daemons.free_port()
            server_pid, _ = apache_server.up(server_dir, port, log=log,
                                             hadoop_workdir=args.hadoop_workdir,
                                             hdfs_root=f"{args.hdfs_root}/hive")
            nodemanager = nodemanager_pid(args.hadoop_workdir)
        else:
            state = server.read_state(server_dir)
            port = state[1] if state else daemons.free_port()
            server_pid, _ = server.up(server_dir, port, log=log,
                                      driver_memory=args.driver_memory)
        started_server = None if state else server_dir
        url = f"hive://127.0.0.1:{port}/default"
    files = fsmod.join(base, "files")
    if data == "local":
        os.makedirs(files, exist_ok=True)
    conf = engine.settings({"hive_url": url, "hive_files": files})
    zip_name = engine.ship_zip(files, "bootstrap")
    results = {"machine": machine(), "server": args.server, "data": data, "rows": args.rows,
               "cols": args.cols, "block_size": args.block_size, "size": size,
               "repeats": args.repeats,
               "command": " ".join([os.path.relpath(sys.executable), "bench/bench_hive.py"]
                                   + (argv if argv is not None else sys.argv[1:])),
               "by_samples": []}
    started = time.time()
    try:
        with Client(url) as client:
            results["server_version"] = client.execute("SELECT version()")[0][0] \
                if args.server == "apache" else None
            table = "bench_blocks"
            client.execute(f"DROP TABLE IF EXISTS {table}", fetch=False)
            client.run_script(engine.block_table_ddl(table, src, matrix.meta))
            bench = Bench(client, conf, zip_name, table, matrix, fsmod.join(base, "out"),
                          server_pid)
            for o in (bench.ours(2, 100, "chunks")[1], bench.baseline(2, 100)[2]):
                remove(o)   # warm-up: metastore, Tez session and containers, page cache
            if nodemanager:   # the session's containers, not other users' of the cluster
                bench.only = results["tez_application"] = tez_application(server_dir)
                bench.tree = nodemanager if bench.only else None
            for n in counts:
                times = {"ours": [], "ours, rows": [], "assignments": [], "join": []}
                cpu = {k: [] for k in times}
                for rep in range(args.repeats):
                    bench.cpu = []
                    s, out_a, sum_a = bench.ours(n, size, "chunks")
                    times["ours"].append(s)
                    assign_s, join_s, out_b, sum_b = bench.baseline(n, size)
                    times["assignments"].append(assign_s)
                    times["join"].append(join_s)
                    s, out_c, sum_c = bench.ours(n, size, "rows")
                    times["ours, rows"].append(s)
                    for key, value in zip(("ours", "assignments", "join", "ours, rows"),
                                          bench.cpu):
                        cpu[key].append(value)
                    blocks = [check_sizes(summ, n, size, matrix.meta, what)
                              for summ, what in ((sum_a, "ours"), (sum_b, "join"),
                                                 (sum_c, "ours, rows"))]
                    if blocks[0] != blocks[1] or blocks[0] != blocks[2]:
                        raise SystemExit(f"N={n}: the three queries wrote different blocks")
                    if rep == 0:
                        digests = {parts_digest(o) for o in (out_a, out_b, out_c)}
                        if len(digests) != 1:
                            raise SystemExit(f"N={n}: the three queries wrote different files")
                    for o in (out_a, out_b, out_c):
                        remove(o)
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
            (apache_server if args.server == "apache" else server).down(started_server,
                                                                       log=log)
    results["seconds_in_all"] = round(time.time() - started)
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
    cpu_title = ("CPU seconds of the server and of YARN's containers (Tez application "
                 "master, tasks, TRANSFORM processes)" if results.get("server") == "apache"
                 else "Server CPU seconds (JVM and TRANSFORM processes)")
    lines[0] += f" Server: {results.get('server', 'spark')}, data: {results.get('data', 'local')}."
    for key, title in (("median", "Wall-clock seconds"), ("cpu_median", cpu_title)):
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
