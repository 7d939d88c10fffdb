"""Table in, train/test tables out: one samplegen command against the ways
to get there without it, side by side in one run.

For each size, a CSV of N rows x 10 columns (9 floats, one 0/1 label) is
split 80/20 into train and test Parquet files by

* ``samplegen``: ``samplegen holdout data.csv out --ratio 0.8 --format parquet``;
* ``samplegen-streamed``: the same with ``--memory-mib 64``, the table streamed
  to local disk first (what a table larger than memory gets);
* ``chain``: ``samplegen import`` -> ``holdout`` on the matrix -> two ``export``;
* ``pandas+samplegen``: ``pd.read_csv`` + ``samplegen.holdout`` + ``to_parquet``;
* ``pandas+sklearn``: ``pd.read_csv`` + ``train_test_split`` + ``to_parquet``.

Each is a fresh process (interpreter start and imports included, as a user
pays them), run in turn within each repeat; the medians of the repeats are
printed, with each one's ratio to ``pandas+sklearn`` and the peak resident
memory of its largest process.

    python bench/bench_tables.py --sizes 1000000 --repeats 3 [--json FILE]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BIN = os.path.dirname(sys.executable)
#: the processes' environment: compiled modules cached, as an installed package has them
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
#: the memory budget of the streamed case (the table is larger: it is streamed to disk)
STREAMED_MIB = 64

PANDAS_SAMPLEGEN = """
import sys, pandas as pd, samplegen
df = pd.read_csv(sys.argv[1])
s = samplegen.holdout(df, 0.8, seed=1)
s["train-0"].to_parquet(sys.argv[2] + "/train.parquet")
s["test-0"].to_parquet(sys.argv[2] + "/test.parquet")
"""
PANDAS_SKLEARN = """
import sys, pandas as pd
from sklearn.model_selection import train_test_split
df = pd.read_csv(sys.argv[1])
train, test = train_test_split(df, train_size=0.8, random_state=1)
train.to_parquet(sys.argv[2] + "/train.parquet")
test.to_parquet(sys.argv[2] + "/test.parquet")
"""


def make_csv(path, rows):
    import numpy as np
    import pandas as pd
    rng = np.random.default_rng(0)
    columns = {f"x{j}": rng.normal(size=rows) for j in range(9)}
    columns["label"] = rng.integers(0, 2, rows)
    pd.DataFrame(columns).to_csv(path, index=False)


def _samplegen(*args):
    return [os.path.join(BIN, "samplegen"), *map(str, args), "-q"]


def cases(csv, out):
    """``{name: [command, ...]}``, each command run in *out* (emptied first)."""
    return {
        "samplegen": [_samplegen("holdout", csv, f"{out}/run", "--ratio", 0.8, "--seed", 1,
                                 "--format", "parquet")],
        "samplegen-streamed": [_samplegen("holdout", csv, f"{out}/run", "--ratio", 0.8,
                                          "--seed", 1, "--format", "parquet",
                                          "--memory-mib", STREAMED_MIB)],
        "chain": [_samplegen("import", csv, f"{out}/m", "--block-size", 1000),
                  _samplegen("holdout", f"{out}/m", f"{out}/run", "--ratio", 0.8, "--seed", 1),
                  _samplegen("export", f"{out}/run", "train-0", "--to", f"{out}/train.parquet"),
                  _samplegen("export", f"{out}/run", "test-0", "--to", f"{out}/test.parquet")],
        "pandas+samplegen": [[sys.executable, "-c", PANDAS_SAMPLEGEN, str(csv), out]],
        "pandas+sklearn": [[sys.executable, "-c", PANDAS_SKLEARN, str(csv), out]],
    }


def timed(commands, out):
    """``(seconds, peak resident MB of the largest process)`` of *commands*
    run one after another."""
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    start, peak = time.perf_counter(), 0
    for command in commands:
        proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, env=ENV)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            raise SystemExit(f"{command[:3]} failed with status {proc.returncode}")
        peak = max(peak, usage.ru_maxrss // 1024)
    return time.perf_counter() - start, peak


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000000", help="comma-separated row counts")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--only", default=None, help="comma-separated cases to run")
    p.add_argument("--json", default=None, help="write the results here too")
    p.add_argument("--workdir", default=None, help="scratch directory (default: a temporary one)")
    args = p.parse_args(argv)
    work = args.workdir or tempfile.mkdtemp(prefix="bench-tables-")
    os.makedirs(work, exist_ok=True)
    results = []
    try:
        for rows in map(int, args.sizes.split(",")):
            csv = os.path.join(work, f"data-{rows}.csv")
            print(f"writing {rows} x 10 CSV ...", flush=True)
            make_csv(csv, rows)
            out = os.path.join(work, "out")
            chosen = cases(csv, out)
            if args.only:
                chosen = {k: v for k, v in chosen.items() if k in args.only.split(",")}
            times = {name: [] for name in chosen}
            peaks = {name: 0 for name in chosen}
            for r in range(args.repeats):
                for name, commands in chosen.items():
                    seconds, peak = timed(commands, out)
                    times[name].append(seconds)
                    peaks[name] = max(peaks[name], peak)
                    print(f"  {rows} rows, repeat {r + 1}/{args.repeats}: {name} "
                          f"{seconds:.2f} s, {peak} MB", flush=True)
            base = statistics.median(times.get("pandas+sklearn", [float("nan")]))
            print(f"\n{rows} rows x 10 columns, CSV -> train/test Parquet, medians of "
                  f"{args.repeats} (peak: the largest process's resident memory):")
            for name, values in times.items():
                median = statistics.median(values)
                print(f"  {name:<18} {median:7.2f} s   {median / base:5.2f}x pandas+sklearn"
                      f"   peak {peaks[name]:6d} MB")
                results.append({"rows": rows, "case": name, "seconds": values,
                                "median": median, "vs_pandas_sklearn": median / base,
                                "peak_mb": peaks[name]})
            os.remove(csv)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\n| rows | case | median s | x pandas+sklearn | peak MB |\n|---:|---|---:|---:|---:|")
    for r in results:
        print(f"| {r['rows']:,} | {r['case']} | {r['median']:.2f} | {r['vs_pandas_sklearn']:.2f} | "
              f"{r['peak_mb']:,} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
