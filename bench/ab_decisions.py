"""A/B of the sampling decisions' speed between two source trees (for example
a git worktree of an older commit and today's): ``udf_throughput`` of each
tree's own ``bench/bench_mr.py`` (the "Decisions" table of the MapReduce
benchmark), run alternately, each run in its own process, which tree goes
first alternating from round to round.

    git worktree add /tmp/ab-before <commit>
    .venv/bin/python bench/ab_decisions.py --before /tmp/ab-before --after . --rounds 5

Each tree is imported as ``samplegen`` through a directory of symbolic links
(``samplegen/`` with ``udfs``, ``jobs``, ``hive``, ``tbs`` beside its own
files, the shape an install gives), so neither run sees the other tree or an
editable install.  Prints per UDF the medians over the rounds and after / before.
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

CHILD = r"""
import importlib.util, json, os, sys
shim, tree, rows, block_size, repeats = sys.argv[1:6]
sys.path.insert(0, shim)
import samplegen.udfs
where = os.path.realpath(samplegen.udfs.__file__)
assert where.startswith(os.path.realpath(tree) + os.sep), where
spec = importlib.util.spec_from_file_location("bench_mr",
                                              os.path.join(tree, "bench", "bench_mr.py"))
bench_mr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_mr)
out = bench_mr.udf_throughput(int(rows), int(block_size), int(repeats))
print(json.dumps({"udfs": where, "cases": out}))
"""


def shim(tree, directory):
    """directory/samplegen: the tree's samplegen/ files and its subpackages."""
    pkg = os.path.join(directory, "samplegen")
    os.makedirs(pkg)
    for name in os.listdir(os.path.join(tree, "samplegen")):
        if name != "__pycache__":
            os.symlink(os.path.join(tree, "samplegen", name), os.path.join(pkg, name))
    for sub in ("udfs", "jobs", "hive", "tbs"):
        if os.path.isdir(os.path.join(tree, sub)):
            os.symlink(os.path.join(tree, sub), os.path.join(pkg, sub))
    return directory


def commit(tree):
    try:
        return subprocess.run(["git", "-C", tree, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", required=True, help="source tree A")
    ap.add_argument("--after", required=True, help="source tree B")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=200000)
    ap.add_argument("--block-size", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3, help="udf_throughput's own repeats")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    trees = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    results = {"load_average_at_start": os.getloadavg(), "python": platform.python_version(),
               "started": time.strftime("%Y-%m-%d %H:%M:%S"),
               "commits": {k: commit(v) for k, v in trees.items()},
               "rows": args.rows, "block_size": args.block_size, "repeats": args.repeats,
               "runs": {"before": [], "after": []}}
    with tempfile.TemporaryDirectory() as tmp:
        shims = {k: shim(v, os.path.join(tmp, k)) for k, v in trees.items()}
        for r in range(args.rounds):
            order = ("before", "after") if r % 2 == 0 else ("after", "before")
            for side in order:
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, shims[side], trees[side], str(args.rows),
                     str(args.block_size), str(args.repeats)],
                    capture_output=True, text=True, cwd=tmp)
                if out.returncode:
                    sys.exit(f"{side}: {out.stderr}")
                run = json.loads(out.stdout.splitlines()[-1])
                results["runs"][side].append(run["cases"])
                print(f"round {r + 1} {side} ({run['udfs']}): "
                      + ", ".join(f"{c['udf']} {c['rows_per_s'] / 1e6:.1f} M"
                                  for c in run["cases"]), flush=True)
    results["load_average_at_end"] = os.getloadavg()
    labels = [c["udf"] for c in results["runs"]["before"][0]]
    table = []
    print(f"\nmedians of {args.rounds} rounds; before = {results['commits']['before']}, "
          f"after = {results['commits']['after']}\n")
    print("| UDF | before rows/s | after rows/s | after row decisions/s "
          "| after / before |")
    print("|---|---:|---:|---:|---:|")
    for i, label in enumerate(labels):
        med = {side: statistics.median(run[i]["rows_per_s"] for run in results["runs"][side])
               for side in trees}
        dec = statistics.median(run[i]["row_decisions_per_s"] for run in results["runs"]["after"])
        table.append({"udf": label, "before_rows_per_s": med["before"],
                      "after_rows_per_s": med["after"], "after_row_decisions_per_s": dec,
                      "after_over_before": med["after"] / med["before"]})
        print(f"| {label} | {med['before'] / 1e6:.1f} M | {med['after'] / 1e6:.1f} M | "
              f"{dec / 1e6:.1f} M | {med['after'] / med['before']:.2f} |")
    results["medians"] = table
    print(f"\nload average at start {results['load_average_at_start'][0]:.2f}, "
          f"at end {results['load_average_at_end'][0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
