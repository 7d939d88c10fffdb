"""Weighted and uniform sampling in memory: samplegen's sum tree and uniform
sampler next to numpy and a straightforward sum tree.

Every contender draws a batch of k indices from n items (default 256 from
10**7) in turns, each call timed on its own; the table gives the median
per call over all repeats (and the quartiles).  Contenders:

* ``SumTree.sample(k)``, ``sample(k, replace=False)``, ``update(k)`` (new
  weights at k random indices);
* numpy's ``Generator.choice(n, k, p=w / w.sum())``, with and without
  replacement: the probabilities are normalised on every call, since the
  weights change between calls in the uses the tree is for (training
  losses, priorities); numpy has no update (it rebuilds from the weights);
* a straightforward sum tree: the same array layout, one Python loop per
  draw over the levels (the textbook code), for sample and update;
* ``UniformSampler.sample(k)`` against ``Generator.choice(n, k,
  replace=False)`` and ``Generator.permutation(n)[:k]``.

    .venv/bin/python bench/bench_weighted.py [--n 10000000] [--k 256] [--repeats 5]
"""
import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

from samplegen.udfs.sumtree import SumTree, UniformSampler  # noqa: E402


class LoopTree:
    """The textbook sum tree: children of j at 2j, 2j + 1; one Python loop
    per draw and per update over the tree's levels."""

    def __init__(self, weights, seed):
        n = len(weights)
        self.leaf0 = 1 << max(0, (n - 1).bit_length())
        self.tree = np.zeros(2 * self.leaf0)
        self.tree[self.leaf0:self.leaf0 + n] = weights
        for j in range(self.leaf0 - 1, 0, -1):
            self.tree[j] = self.tree[2 * j] + self.tree[2 * j + 1]
        self.tree = self.tree.tolist()       # Python floats: the fastest scalar access
        self.rng = np.random.default_rng(seed)

    def sample(self, k):
        tree, leaf0, out = self.tree, self.leaf0, []
        for u in self.rng.random(k).tolist():
            v, j = u * tree[1], 1
            while j < leaf0:
                j *= 2
                if v >= tree[j]:
                    v -= tree[j]
                    j += 1
            out.append(j - leaf0)
        return out

    def update(self, indices, weights):
        tree = self.tree
        for i, w in zip(indices, weights):
            j = i + self.leaf0
            tree[j] = w
            j //= 2
            while j:
                tree[j] = tree[2 * j] + tree[2 * j + 1]
                j //= 2


def timed_calls(fn, calls):
    """Seconds of each of *calls* calls of fn()."""
    out = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10**7)
    ap.add_argument("--k", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=5, help="rounds of every contender")
    ap.add_argument("--calls", type=int, default=200, help="calls per round (fast contenders)")
    ap.add_argument("--slow-calls", type=int, default=5,
                    help="calls per round of the O(n) contenders (numpy)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    n, k = args.n, args.k
    gen = np.random.default_rng(1)
    w = gen.gamma(0.5, size=n)                  # skewed weights, as losses are
    t = time.perf_counter()
    tree = SumTree(w, seed=7)
    build = time.perf_counter() - t
    t = time.perf_counter()
    loop = LoopTree(w, seed=7)
    loop_build = time.perf_counter() - t
    uniform = UniformSampler(n, seed=7)
    numpy_gen = np.random.default_rng(7)
    idx = gen.integers(0, n, k)
    new = gen.gamma(0.5, size=k)

    contenders = {
        "SumTree.sample (with replacement)": (lambda: tree.sample(k), args.calls),
        "SumTree.sample (without replacement)": (lambda: tree.sample(k, replace=False),
                                                 args.calls),
        "SumTree.update": (lambda: tree.update(idx, new), args.calls),
        "loop sum tree, sample (with replacement)": (lambda: loop.sample(k), args.calls),
        "loop sum tree, update": (lambda: loop.update(idx.tolist(), new.tolist()),
                                  args.calls),
        "numpy choice(p=w/w.sum()), with replacement":
            (lambda: numpy_gen.choice(n, k, p=w / w.sum()), args.slow_calls),
        "numpy choice(p=w/w.sum()), without replacement":
            (lambda: numpy_gen.choice(n, k, replace=False, p=w / w.sum()), args.slow_calls),
        "UniformSampler.sample": (lambda: uniform.sample(k), args.calls),
        "numpy choice(n, k, replace=False)":
            (lambda: numpy_gen.choice(n, k, replace=False), args.calls),
        "numpy permutation(n)[:k]": (lambda: numpy_gen.permutation(n)[:k], args.slow_calls),
    }
    times = {name: [] for name in contenders}
    started = time.time()
    load = os.getloadavg()
    for _ in range(args.repeats):
        for name, (fn, calls) in contenders.items():
            fn()                                           # warm
            times[name] += timed_calls(fn, calls)
    rows = []
    for name, runs in times.items():
        q = statistics.quantiles(runs, n=4)
        rows.append({"contender": name, "median_us": statistics.median(runs) * 1e6,
                     "q1_us": q[0] * 1e6, "q3_us": q[2] * 1e6, "calls": len(runs)})
    result = {"n": n, "k": k, "repeats": args.repeats, "build_s": build,
              "loop_build_s": loop_build, "rows": rows,
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "numpy": np.__version__, "load_average_at_start": load,
                          "load_average_at_end": os.getloadavg()},
              "seconds": time.time() - started}
    base = {r["contender"]: r["median_us"] for r in rows}
    ref = {"loop sum tree, sample (with replacement)": "SumTree.sample (with replacement)",
           "loop sum tree, update": "SumTree.update",
           "numpy choice(p=w/w.sum()), with replacement": "SumTree.sample (with replacement)",
           "numpy choice(p=w/w.sum()), without replacement":
               "SumTree.sample (without replacement)",
           "numpy choice(n, k, replace=False)": "UniformSampler.sample",
           "numpy permutation(n)[:k]": "UniformSampler.sample"}
    print(f"**{k} of {n:,} items** (SumTree built in {build:.2f} s, the loop tree in "
          f"{loop_build:.1f} s); median per call, quartiles, calls\n")
    print("| contender | median µs | quartiles µs | calls | samplegen's counterpart faster by |")
    print("|---|---:|---|---:|---:|")
    for r in rows:
        other = ref.get(r["contender"])
        ratio = f"{r['median_us'] / base[other]:.1f}x" if other else ""
        print(f"| {r['contender']} | {r['median_us']:,.1f} | {r['q1_us']:,.1f} - "
              f"{r['q3_us']:,.1f} | {r['calls']} | {ratio} |")
    print(f"\nload average {load} at start, {os.getloadavg()} at the end; "
          f"{result['seconds']:.0f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
