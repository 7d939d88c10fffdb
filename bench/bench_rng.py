"""Keyed random words per second, and what they cost where they are the hot path.

Three measurements in one process, each against numpy's own generators
measured in the same run (repeats alternate their order; medians):

* **words**: ``PositionRNG.block`` over a range of P positions (consecutive
  counters) and ``PositionRNG.at`` at P random uint64 positions (scattered
  counters), 4 words per position, on each implementation of Philox at
  arbitrary counters (the compiled kernel ``udfs/_philox.c`` and the numpy
  path that shipped zips use), next to numpy's ``PCG64`` ``random(4P)`` and
  ``Philox`` ``random_raw(4P)``;
* **R-TBS**: the exponential-decay update at batches of B items (n = 2B)
  against one PCG64 uniform per arriving item timed around each update, the
  median of ``--tbs-measure`` per-update ratios after warm-up, on each
  implementation (batches alternate between them);
* **splitters**: ``samplegen.model_selection`` against scikit-learn's
  splitters of the same name at each ``--rows`` (``bench/bench_exact.py``'s
  ``exp_splitters``: every pair drawn, interleaved repeats), on the
  implementation chosen at import.

    .venv/bin/python bench/bench_rng.py                    # prints Markdown
    .venv/bin/python bench/bench_rng.py --update-doc docs/BENCHMARKS.md
"""
import argparse
import functools
import os
import statistics
import sys
import time
from types import SimpleNamespace

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

import bench_tbs  # noqa: E402

import samplegen.udfs.rng as rng_module  # noqa: E402
from samplegen.udfs.rng import PositionRNG, Purpose, stream  # noqa: E402

HEADING = "## Keyed randomness (`udfs/rng.py`): words per second and where they count"
KERNEL = rng_module._KERNEL
PATHS = (["compiled"] if KERNEL is not None else []) + ["numpy"]


def use(path):
    """Switch PositionRNG to the implementation *path* ("compiled" or "numpy")."""
    rng_module._KERNEL = KERNEL if path == "compiled" else None


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def exp_words(positions, repeats):
    rng = PositionRNG(2026)
    sid = stream(Purpose.HOLDOUT, 3, 1)
    scattered = np.random.default_rng(38).integers(0, 2**64 - 1, positions, dtype=np.uint64)
    pcg = np.random.Generator(np.random.PCG64(38))
    philox = np.random.Philox(38)
    cases = [("numpy PCG64 random()", None, lambda: pcg.random(4 * positions)),
             ("numpy Philox random_raw()", None, lambda: philox.random_raw(4 * positions))]
    for path in PATHS:
        cases += [(f"PositionRNG.block, consecutive ({path})", path,
                   lambda: rng.block(sid, 10**9, 10**9 + positions)),
                  (f"PositionRNG.at, scattered ({path})", path,
                   lambda: rng.at(sid, scattered))]
    times = {label: [] for label, _, _ in cases}
    for rep in range(repeats):
        for label, path, fn in cases if rep % 2 == 0 else cases[::-1]:
            if path is not None:
                use(path)
            times[label].append(_timed(fn))
    use(PATHS[0])
    return [{"case": label, "seconds": statistics.median(t),
             "mwords_per_s": 4 * positions / statistics.median(t) / 1e6,
             "mpositions_per_s": positions / statistics.median(t) / 1e6}
            for label, t in times.items()]


def exp_tbs(batch, warmup, measure):
    """R-TBS (exponential decay, n = 2B) on each implementation, batches
    alternating between them; each timed update between two PCG64 coins of
    B uniforms, its ratio to their mean; medians."""
    from samplegen.tbs import RTBS, Exponential
    samplers = {path: RTBS(2 * batch, Exponential(0.07), seed=1) for path in PATHS}
    pcg = np.random.Generator(np.random.PCG64(12345))
    times = {path: {"update": [], "coin": [], "ratio": []} for path in PATHS}
    for k in range(warmup + measure):
        for path in PATHS if k % 2 == 0 else PATHS[::-1]:
            use(path)
            items = np.arange(k * batch, (k + 1) * batch, dtype=np.int64)
            before = _timed(lambda: pcg.random(batch))
            update = _timed(functools.partial(samplers[path].update, items))
            coin = 0.5 * (before + _timed(lambda: pcg.random(batch)))
            if k >= warmup:
                for name, value in (("update", update), ("coin", coin),
                                    ("ratio", update / coin)):
                    times[path][name].append(value)
    use(PATHS[0])
    return [{"path": path, "batch": batch, "n": 2 * batch,
             "update_ms": 1e3 * statistics.median(t["update"]),
             "coin_ms": 1e3 * statistics.median(t["coin"]),
             "ratio": statistics.median(t["ratio"]),
             "ratios": [round(r, 2) for r in t["ratio"]]} for path, t in times.items()]


def exp_splitters(rows, repeats):
    import bench_exact
    out = []
    for n in rows:
        res = bench_exact.exp_splitters(SimpleNamespace(rows=n, repeats=repeats))
        out.append(res)
    return out


def markdown(res, command, machine):
    words = {r["case"]: r for r in res["words"]}
    raw = words["numpy Philox random_raw()"]["mwords_per_s"]
    pcg = words["numpy PCG64 random()"]["mwords_per_s"]
    lines = [HEADING, "", f"Command: `{command}`", "", f"Machine: {machine}.", "",
             f"**Words per second** ({res['positions']:,} positions = "
             f"{4 * res['positions']:,} words per call; median of {res['repeats']} "
             "alternating repeats).  *compiled* is the C kernel `udfs/_philox.c`, "
             "*numpy* the numpy-array path that a shipped zip (Hadoop, Spark executors, Hive "
             "TRANSFORM) uses; the same words either way.", "",
             "| case | ms | M words/s | M positions/s | / numpy Philox random_raw | "
             "/ numpy PCG64 random |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in res["words"]:
        lines.append(f"| {r['case']} | {1e3 * r['seconds']:.1f} | {r['mwords_per_s']:.0f} | "
                     f"{r['mpositions_per_s']:.1f} | {r['mwords_per_s'] / raw:.2f} | "
                     f"{r['mwords_per_s'] / pcg:.2f} |")
    lines += ["", "Target: scattered positions at >= 1/3 of numpy's Philox `random_raw` "
              "(in words per second)."]
    for path in PATHS:
        r = words[f"PositionRNG.at, scattered ({path})"]
        share = r["mwords_per_s"] / raw
        lines.append(f"- {path}: {share:.2f} -- {'met' if share >= 1 / 3 else 'not met'}")
    t = res["tbs"]
    lines += ["", f"**R-TBS, exponential decay** (B = {t[0]['batch']:,} items per batch, "
              f"n = {t[0]['n']:,}; {res['tbs_measure']} timed batches per implementation after "
              f"{res['tbs_warmup']} warm-up batches, the implementations alternating batch by "
              "batch).  *PCG64 coin* = numpy's `Generator(PCG64).random(B)`, one uniform per "
              "arriving item, timed right before and right after each update; the ratio is the "
              "median of the per-update ratios (update / mean of its two coins).", "",
              "| implementation | update ms | PCG64 coin ms | update / PCG64 coin | "
              "per-update ratios |", "|---|---:|---:|---:|---|"]
    for r in t:
        lines.append(f"| {r['path']} | {r['update_ms']:.1f} | {r['coin_ms']:.1f} | "
                     f"{r['ratio']:.2f} | {', '.join(map(str, r['ratios']))} |")
    lines += ["", "Target: at most 1.5x the PCG64 coin."]
    for r in t:
        lines.append(f"- {r['path']}: {r['ratio']:.2f}x -- "
                     f"{'met' if r['ratio'] <= 1.5 else 'not met'}")
    for s in res["splitters"]:
        by = {(r["splitter"], r["who"]): r["seconds"] for r in s["runs"]}
        lines += ["", f"**Splitters at {s['rows']:,} rows** ({PATHS[0]} kernel; every pair "
                  f"drawn; median of {res['repeats_splitters']} interleaved repeats; target "
                  "<= 1.0x scikit-learn)", "",
                  "| splitter | samplegen s | scikit-learn s | samplegen / scikit-learn | "
                  "target |", "|---|---:|---:|---:|---|"]
        for label in dict.fromkeys(r["splitter"] for r in s["runs"]):
            a, b = by[(label, "samplegen")], by[(label, "scikit-learn")]
            lines.append(f"| {label} | {a:.3f} | {b:.3f} | {a / b:.2f}x | "
                         f"{'met' if a <= b else 'not met'} |")
    lines += ["", "Where the jobs run: mrjob tasks, Spark executors and Hive TRANSFORM scripts "
              "import samplegen from the shipped zip (`jobs/package.py`), which cannot hold a "
              "compiled module, so they compute the same words on the *numpy* rows above -- "
              "unless the node's Python has samplegen installed (a wheel built for the nodes, "
              "or a venv archive, with the kernel built by `setup.py`): `udfs/rng.py` then "
              "loads that installation's kernel, checks it against numpy's Philox on edge "
              "counters, and uses it (`SAMPLEGEN_PHILOX=numpy` turns it off).  Where the rest "
              "goes: the splitters spend most of their time outside the random words -- the "
              "exact-size label trees of `udfs/exact.py` (a multivariate hypergeometric split "
              "per node by numpy's frozen legacy algorithm, one call per label, and one sort of "
              "each chunk's words), one sort of packed (sample, relative position, index) keys "
              "in `jobs/phases.py` and the gathers around it; ShuffleSplit makes ten such "
              "labellings and orders ten million occurrences where scikit-learn permutes.  The "
              "R-TBS update spends about half its time moving items (a gather from the batch "
              "and a scatter into the reservoir's buffer, memory-bound) and most of the rest "
              "in the words and logarithms of the skips that choose them, which the frozen "
              "streams fix."]
    return "\n".join(lines) + "\n"


def _commit():
    import subprocess
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, text=True,
                              capture_output=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--positions", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=7, help="repeats of the words cases")
    p.add_argument("--tbs-batch", type=int, default=1_000_000)
    p.add_argument("--tbs-warmup", type=int, default=20)
    p.add_argument("--tbs-measure", type=int, default=15)
    p.add_argument("--rows", default="100000,1000000", help="splitter rows, comma-separated")
    p.add_argument("--splitter-repeats", type=int, default=5)
    p.add_argument("--only", choices=("words", "tbs", "splitters"), action="append")
    p.add_argument("--update-doc", help="replace this section of a Markdown file")
    args = p.parse_args(argv)
    only = set(args.only or ("words", "tbs", "splitters"))
    machine = bench_tbs.machine() + f", Philox kernels: {', '.join(PATHS)}, commit {_commit()}"
    res = {"positions": args.positions, "repeats": args.repeats, "tbs_measure": args.tbs_measure,
           "tbs_warmup": args.tbs_warmup, "repeats_splitters": args.splitter_repeats,
           "words": [], "tbs": [], "splitters": []}
    if "words" in only:
        res["words"] = exp_words(args.positions, args.repeats)
        for r in res["words"]:
            print(f"{r['case']:45s} {r['mwords_per_s']:7.0f} M words/s", flush=True)
    if "tbs" in only:
        res["tbs"] = exp_tbs(args.tbs_batch, args.tbs_warmup, args.tbs_measure)
        for r in res["tbs"]:
            print(f"R-TBS ({r['path']}): {r['update_ms']:.1f} ms, PCG64 coin "
                  f"{r['coin_ms']:.1f} ms, {r['ratio']:.2f}x {r['ratios']}", flush=True)
    if "splitters" in only:
        res["splitters"] = exp_splitters([int(float(x)) for x in args.rows.split(",")],
                                         args.splitter_repeats)
    if only != {"words", "tbs", "splitters"}:
        return 0
    command = "python bench/bench_rng.py " + " ".join(argv if argv is not None else sys.argv[1:])
    section = markdown(res, command.strip(), machine)
    print(section)
    if args.update_doc:
        bench_tbs.update_doc(args.update_doc, section, HEADING)
    return 0


if __name__ == "__main__":
    sys.exit(main())
