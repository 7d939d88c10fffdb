"""Time-biased sampling on the command line: ``samplegen tbs COMMAND ...``.

Commands
  simulate    sample-size behaviour of T-TBS and R-TBS (section 6.2)
  knn         kNN accuracy and robustness on a two-mode stream (section 6.4, Table 1)
  regression  ridge regression on a two-mode stream (section 6.5)
  run         process new micro-batches into a STATE (D-R-TBS / D-T-TBS; docs/TBS_JOBS.md)
  sample      write the current sample S_k of a STATE
  status      batches processed, W_k, C_k, rho, sample size and footprint of a STATE

This module adds the commands (:func:`add_commands`) and runs them
(:func:`dispatch`); :mod:`samplegen.cli` owns parsing, ``-q`` / ``-v``, the
one-line errors and exit statuses.  Bad input is refused before anything is
written.  Output files are written atomically (:func:`samplegen.jobs.fs.write_atomic`:
temporary file + rename), their missing directories created.
"""
import argparse
import csv
import importlib.util
import io
import math

import numpy as np

from samplegen.jobs import fs as fsmod
from samplegen.udfs.errors import count_words

from . import experiments as ex
from .errors import TBSError


def _float_list(text):
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") \
            from None


def _int_list(text):
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") \
            from None


def _patterns(text):
    # "single,P(10,10),P(20,10)" -> ["single", "P(10,10)", "P(20,10)"]
    out, depth, cur = [], 0, ""
    for ch in text.replace(" ", ""):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        out.append(cur)
    for p in out:
        ex.mode_pattern(p, 1)
    return out


def _check_output(option, path):
    """Refuse, before any work, an output that cannot be written: a parent
    that is a file, or a plot without matplotlib."""
    if path is None:
        return
    fsmod.missing_dirs(path)
    if option == "--plot" and importlib.util.find_spec("matplotlib") is None:
        raise TBSError("--plot needs matplotlib (pip install 'samplegen[plots]')")


def _write_csv(path, header, rows):
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    fsmod.write_atomic(path, buf.getvalue().encode())


def _save_figure(fig, path):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    fsmod.write_atomic(path, buf.getvalue())


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# ----------------------------------------------------------------------------- simulate

def _cmd_simulate(args):
    _check_output("--csv", args.csv)
    _check_output("--plot", args.plot)
    algorithms = [a.strip() for a in args.algorithms.split(",") if a.strip()]
    for a in algorithms:
        if a not in ("ttbs", "rtbs"):
            raise TBSError(f"--algorithms must list 'ttbs' and/or 'rtbs', got {a!r}")
    decay = ex.make_decay(args.decay, lam=args.lam, power=args.power, shift=args.shift)
    sizes = ex.batch_sizes(args.regime, args.batches, args.batch_size, phi=args.phi,
                           change_at=args.change_at, high=args.high, period=args.period,
                           seed=args.seed)
    options = {k: v for k, v in (("max_weight", args.max_weight),
                                 ("consolidation_rate", args.consolidation_rate),
                                 ("delta1", args.delta1), ("delta2", args.delta2))
               if v is not None}
    traces = ex.simulate(algorithms, decay, args.n, sizes, seed=args.seed,
                         mean_batch_size=args.mean_batch_size or args.batch_size,
                         rtbs_options=options)
    if args.csv:
        rows = []
        for name, tr in traces.items():
            for k in range(sizes.size):
                rows.append([k + 1, name, int(sizes[k]), int(tr["sample_size"][k]),
                             repr(float(tr["sample_weight"][k])),
                             repr(float(tr["total_weight"][k])),
                             "" if math.isnan(tr["rho"][k]) else repr(float(tr["rho"][k]))])
        _write_csv(args.csv, ["batch", "algorithm", "batch_size", "sample_size", "sample_weight",
                              "total_weight", "rho"], rows)
    if args.plot:
        plt = _pyplot()
        fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True,
                                          gridspec_kw={"height_ratios": [3, 1]})
        k = np.arange(1, sizes.size + 1)
        labels = {"ttbs": "T-TBS", "rtbs": "R-TBS"}
        for name, tr in traces.items():
            top.plot(k, tr["sample_size"], lw=1, label=f"{labels[name]} sample size")
            if args.show_weight and name == "rtbs":
                top.plot(k, tr["total_weight"], lw=1, ls="--", label="R-TBS total weight $W_k$")
        top.axhline(args.n, color="gray", lw=0.8, ls=":", label=f"n = {args.n}")
        top.set_ylabel("items")
        top.legend(loc="best", fontsize=8)
        top.set_title(args.title or f"{args.regime} batch sizes, {decay!r}")
        top.set_ylim(bottom=0)
        bottom.plot(k, sizes, color="black", lw=0.8)
        bottom.set_ylabel("batch size")
        bottom.set_xlabel("batch k")
        _save_figure(fig, args.plot)
        plt.close(fig)
    half = sizes.size // 2
    for name, tr in traces.items():
        tail = tr["sample_size"][half:]
        print(f"{name}: sample size over batches {half + 1}-{sizes.size}: mean {tail.mean():.1f}, "
              f"min {tail.min():.0f}, max {tail.max():.0f} (n = {args.n})")
    return 0


# ----------------------------------------------------------------------------- knn / regression

def _stream_command(args, kind):
    _check_output("--table", args.table)
    _check_output("--csv", args.csv)
    _check_output("--plot", args.plot)
    patterns = args.patterns
    if kind == "knn":
        schemes = ex.default_schemes(args.n)
        hyper = args.k
        if any(k < 1 for k in hyper):
            raise TBSError(f"--k must list integers >= 1, got {hyper}")
        def make_data(rng, total, batch, flags):
            return ex.gaussian_mixture_stream(rng, total, batch, flags)

        def factory(points, labels):
            return ex.knn_scores(points, labels, hyper)
        loss, hname = "Miss%", "k"
    else:
        from .decay import Exponential
        from .reservoir import BatchedReservoir
        from .rtbs import RTBS
        from .window import SlidingWindow
        n, lam = args.n, args.lam
        schemes = {f"R-TBS exp: lambda = {lam:.2f}":
                   lambda seed: RTBS(n, Exponential(lam), seed=seed),
                   "SW": lambda seed: SlidingWindow(n),
                   "Unif": lambda seed: BatchedReservoir(n, seed=seed)}
        hyper = args.penalties
        if any(a < 0 for a in hyper):
            raise TBSError(f"--penalties must be >= 0, got {hyper}")
        def make_data(rng, total, batch, flags):
            return ex.linear_stream(rng, total, batch, flags)

        def factory(x, y):
            return ex.ridge_scores(x, y, hyper)
        loss, hname = "MSE", "penalty"
    for name, value in (("--runs", args.runs), ("--test-batches", args.test_batches),
                        ("--batch", args.batch)):
        if value < 1:
            raise TBSError(f"{name} must be an integer >= 1, got {value}")
    if args.warmup < 0 or args.tune_runs < 0:
        raise TBSError(f"--warmup and --tune-runs must be >= 0, got {args.warmup} and "
                       f"{args.tune_runs}")
    if args.test_batches < 20:
        raise TBSError(f"--test-batches must be >= 20 (the expected shortfall starts at t = 20), "
                       f"got {args.test_batches}")
    results, curves = {}, {}
    for pattern in patterns:
        flags = ex.mode_pattern(pattern, args.test_batches)
        common = dict(runs=None, warmup=args.warmup, test_batches=args.test_batches,
                      batch=args.batch, abnormal=flags)
        if args.tune_runs:
            common.update(runs=args.tune_runs, seed=args.seed + 1_000_003)
            tuned = ex.tune(ex.stream_experiment(schemes, make_data, factory, hyper, **common))
        common.update(runs=args.runs, seed=args.seed)
        scores = ex.stream_experiment(schemes, make_data, factory, hyper, **common)
        if not args.tune_runs:
            tuned = ex.tune(scores)
        results[pattern] = ex.summarize(scores, hyper, tuned)
        curves[pattern] = {name: scores[name][:, :, tuned[name]].mean(axis=0) for name in schemes}
        print(f"{pattern}: " + "; ".join(f"{name} {loss} {m:.1f} ES {e:.1f} ({hname}={h:g})"
                                         for name, (h, m, e) in results[pattern].items()))
    if args.table:
        title = {p: "Single event" if p == "single" else p for p in patterns}
        head = "| Alg. | " + " | ".join(f"{title[p]} {loss} | {title[p]} ES"
                                        for p in patterns) + " |"
        sep = "|---|" + "---:|---:|" * len(patterns)
        lines = [head, sep]
        for name in schemes:
            cells = " | ".join(f"{results[p][name][1]:.1f} | {results[p][name][2]:.1f}"
                               for p in patterns)
            lines.append(f"| {name} | {cells} |")
        notes = []
        for p in patterns:
            chosen = [results[p][name][0] for name in schemes]
            common = max(set(chosen), key=chosen.count)
            others = [f"{name} {h:g}" for name, h in zip(schemes, chosen) if h != common]
            notes.append(f"{title[p]}: {common:g}"
                         + (f" (except {', '.join(others)})" if others else ""))
        text = "\n".join(lines) + f"\n\nTuned {hname}: " + "; ".join(notes) + ".\n"
        fsmod.write_atomic(args.table, text.encode())
    if args.csv:
        rows = []
        for p in patterns:
            for name in schemes:
                for t, value in enumerate(curves[p][name], start=1):
                    rows.append([p, name, t, f"{value:.4f}", results[p][name][0]])
        _write_csv(args.csv, ["pattern", "scheme", "t", f"mean_{loss.lower().rstrip('%')}",
                              hname], rows)
    if args.plot:
        plt = _pyplot()
        fig, axes = plt.subplots(len(patterns), 1, figsize=(9, 2.6 * len(patterns)), squeeze=False)
        rtbs = [n for n in schemes if n.startswith("R-TBS")]
        preferred = [n for n in rtbs if n.endswith("= 0.07") or n.endswith("= 2.0")]
        shown = (preferred or rtbs[:1]) + [n for n in schemes if not n.startswith("R-TBS")]
        for ax, p in zip(axes[:, 0], patterns):
            t = np.arange(1, args.test_batches + 1)
            for name in shown:
                ax.plot(t, curves[p][name], lw=1, label=name)
            ax.set_title(f"{p}: mean over {args.runs} runs", fontsize=9)
            ax.set_ylabel(loss)
        axes[-1, 0].set_xlabel("test batch t")
        axes[0, 0].legend(fontsize=7, loc="upper right")
        fig.tight_layout()
        _save_figure(fig, args.plot)
        plt.close(fig)
    return 0


# ----------------------------------------------------------------------------- parser

def add_commands(sub):
    """Add the tbs commands to the subparsers object *sub* (``samplegen tbs``)."""
    p = sub.add_parser("simulate", help="sample-size behaviour of T-TBS and R-TBS (section 6.2)")
    p.add_argument("--algorithms", default="ttbs,rtbs", help="comma-separated: ttbs, rtbs")
    p.add_argument("--decay", choices=["exp", "poly"], default="exp",
                   help="exponential or polynomial decay (default exp)")
    p.add_argument("--lambda", dest="lam", type=float, default=0.1,
                   help="exponential decay rate (default 0.1)")
    p.add_argument("--power", type=float, default=2.0, help="polynomial decay power s (default 2)")
    p.add_argument("--shift", type=float, default=10.0,
                   help="polynomial decay shift d (default 10)")
    p.add_argument("--n", type=int, default=1000,
                   help="target / maximum sample size (default 1000)")
    p.add_argument("--regime", choices=list(ex.REGIMES), default="constant",
                   help="how batch sizes evolve (default constant)")
    p.add_argument("--batch-size", type=float, default=100.0,
                   help="(initial) batch size (default 100)")
    p.add_argument("--phi", type=float, help="growth factor (growing: 1.002, shrinking: 0.8)")
    p.add_argument("--change-at", type=int, default=200,
                   help="batch after which sizes change (default 200)")
    p.add_argument("--high", type=float, help="periodic regime: size in the last third of a period")
    p.add_argument("--period", type=int, default=2000,
                   help="periodic regime: period in batches (default 2000)")
    p.add_argument("--batches", type=int, default=1000,
                   help="number of batches (default 1000)")
    p.add_argument("--mean-batch-size", type=float, help="T-TBS b (default: --batch-size)")
    p.add_argument("--max-weight", type=float, help="R-TBS n' (general decay; default 2n)")
    p.add_argument("--consolidation-rate", type=float,
                   help="R-TBS lambda of the consolidated sample")
    p.add_argument("--delta1", type=float, help="R-TBS consolidation accuracy delta1")
    p.add_argument("--delta2", type=float, help="R-TBS consolidation accuracy delta2")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--csv", help="write per-batch traces to this CSV file")
    p.add_argument("--plot", help="write a PNG plot to this file")
    p.add_argument("--title", help="title of the plot")
    p.add_argument("--show-weight", action="store_true", help="also plot R-TBS total weight W_k")

    for name, helptext in (("knn", "kNN on a Gaussian-mixture stream (section 6.4, Table 1)"),
                           ("regression", "ridge regression on a two-mode stream (section 6.5)")):
        q = sub.add_parser(name, help=helptext)
        default_patterns = ("single,P(10,10),P(20,10),P(30,10)" if name == "knn"
                            else "P(10,10),P(16,16)")
        q.add_argument("--patterns", type=_patterns_arg, default=default_patterns,
                       help="comma-separated mode patterns: single, P(d,e) "
                            "(default %(default)s)")
        q.add_argument("--runs", type=int, default=30, help="runs per pattern (default 30)")
        q.add_argument("--tune-runs", type=int, default=5,
                       help="separate runs used to pick the hyper-parameter (0: pick on the runs)")
        q.add_argument("--test-batches", type=int, default=100,
                       help="test batches per run, at least 20 (default 100)")
        q.add_argument("--warmup", type=int, default=100,
                       help="batches before the test batches (default 100)")
        q.add_argument("--batch", type=int, default=100, help="items per batch (default 100)")
        q.add_argument("--n", type=int, default=1000, help="sample size (default 1000)")
        q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        q.add_argument("--table", help="write the Markdown table here")
        q.add_argument("--csv", help="write mean loss per test batch here")
        q.add_argument("--plot", help="write a PNG of the loss over time here")
        if name == "knn":
            q.add_argument("--k", type=_int_list, default="1,3,5,7,9,11,15",
                           help="comma-separated neighbour counts to tune over "
                                "(default %(default)s)")
        else:
            q.add_argument("--lambda", dest="lam", type=float, default=0.1,
                           help="decay rate of R-TBS exp (default 0.1)")
            q.add_argument("--penalties", type=_float_list, default="0,0.1,1,10,100,1000",
                           help="comma-separated ridge penalties to tune over "
                                "(default %(default)s)")
    _add_stream_commands(sub)


def _add_stream_commands(sub):
    p = sub.add_parser("run", help="process new micro-batches into a STATE (D-R-TBS / D-T-TBS)")
    p.add_argument("batches", metavar="BATCHES",
                   help="directory (or fsspec URL) of batch-<k> Parquet files or directories")
    p.add_argument("state", metavar="STATE", help="state directory (created on the first run)")
    p.add_argument("--algorithm", choices=["rtbs", "ttbs"],
                   help="R-TBS (bounded size) or T-TBS (target size); fixed at creation")
    p.add_argument("--decay", choices=["exp", "poly"],
                   help="exponential or polynomial decay; fixed at creation")
    p.add_argument("--lambda", dest="lam", type=float,
                   help="exp: decay rate; poly R-TBS: rate of the consolidated sample "
                        "(default 0.1 or more)")
    p.add_argument("--power", type=float, help="poly: power s (default 2)")
    p.add_argument("--shift", type=float, help="poly: shift d (default 10)")
    p.add_argument("--size", type=int, help="sample size N (R-TBS: maximum; T-TBS: target)")
    p.add_argument("--seed", type=int,
                   help="seed of all randomness (same seed, same sample on every runner)")
    p.add_argument("--partitions", type=int, help="partitions P, 1 to 1024, fixed when STATE is "
                   "created (default 4)")
    p.add_argument("--mean-batch-size", type=float,
                   help="T-TBS: mean batch size b (default: mean of the batches present at "
                        "creation)")
    p.add_argument("--max-weight", type=float,
                   help="poly R-TBS: n' (default N; see docs/TBS_JOBS.md on n' > N)")
    p.add_argument("--delta1", type=float, help="poly R-TBS: consolidation accuracy (default 0.01)")
    p.add_argument("--delta2", type=float,
                   help="poly R-TBS: consolidation accuracy (default 0.001 N)")
    p.add_argument("--compact-every", type=int,
                   help="write a snapshot every C batches (default 16)")
    p.add_argument("--keep-deltas", type=int,
                   help="keep the deltas of the last R batches (default 32)")
    p.add_argument("--runner", choices=["inline", "local", "spark", "hadoop"], default="inline",
                   help="inline: this process; local/hadoop: mrjob; spark: PySpark "
                        "(default inline)")
    p.add_argument("--batches-per-job", type=int, default=16,
                   help="batches applied per distributed job (default 16)")
    p.add_argument("--num-cores", type=int,
                   help="inline: partitions processed at once, on threads (default: one per core "
                        "for batches of at least 2^17 rows per partition); local: parallel tasks")
    p.add_argument("--mrjob-conf", metavar="PATH", help="mrjob config file (default: none for "
                   "local, mrjob's own lookup for hadoop)")
    p.add_argument("--jobconf", metavar="KEY=VALUE", action="append", default=[],
                   help="Hadoop setting for the hadoop runner (repeatable)")
    p.add_argument("--spark-master", help="Spark master (default local[*])")
    p.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                   help="Spark setting for the spark runner (repeatable)")
    p.add_argument("--no-fsync", action="store_true",
                   help="do not fsync files before committing (still crash-safe for process "
                        "crashes, not for power loss; also SAMPLEGEN_TBS_FSYNC=0)")

    p = sub.add_parser("sample", help="write the current sample S_k of a STATE")
    p.add_argument("state", metavar="STATE", help="state directory")
    p.add_argument("--to", required=True, metavar="FILE",
                   help="FILE.parquet, FILE.npy or FILE.csv (missing directories are created)")
    p.add_argument("--no-keys", action="store_true",
                   help="leave out the _sg_batch and _sg_row columns")

    p = sub.add_parser("status",
                       help="batches processed, W_k, C_k, rho, |S_k| and footprint of a STATE")
    p.add_argument("state", metavar="STATE", help="state directory")
    p.add_argument("--json", action="store_true", help="print JSON")


def _cmd_run(args, log):
    from .stream import run
    given = {"algorithm": args.algorithm, "decay": args.decay, "lambda": args.lam,
             "power": args.power, "shift": args.shift, "size": args.size, "seed": args.seed,
             "partitions": args.partitions, "mean_batch_size": args.mean_batch_size,
             "max_weight": args.max_weight, "delta1": args.delta1, "delta2": args.delta2,
             "compact_every": args.compact_every, "keep_deltas": args.keep_deltas}
    options = {"batches_per_job": args.batches_per_job, "num_cores": args.num_cores,
               "mrjob_conf": args.mrjob_conf, "jobconf": args.jobconf,
               "spark_master": args.spark_master, "spark_conf": args.spark_conf,
               "fsync": False if args.no_fsync else None}
    commit = run(args.batches, args.state, given, runner=args.runner, options=options, log=log)
    log(f"{args.state}: {count_words(len(commit['ledger']), 'batch', 'batches')}, "
        f"|S_k| = {commit['driver']['size']}")
    return 0


def _cmd_sample(args, log):
    from .stream import write_sample
    size = write_sample(args.state, args.to, keys=not args.no_keys)
    log(f"wrote {count_words(size, 'item', 'items')} to {args.to}")
    return 0


def _cmd_status(args, log):
    import json

    from .stream.materialize import format_status, status
    info = status(args.state)
    print(json.dumps(info, indent=1, sort_keys=True) if args.json else format_status(info))
    return 0


def _patterns_arg(text):
    try:
        return _patterns(text)
    except TBSError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def dispatch(args, log):
    """Run the tbs command *args* (parsed by :mod:`samplegen.cli`); ``log``
    writes a line on stderr.  Returns the exit status."""
    if args.command == "simulate":
        return _cmd_simulate(args)
    if args.command in ("knn", "regression"):
        return _stream_command(args, args.command)
    return {"run": _cmd_run, "sample": _cmd_sample, "status": _cmd_status}[args.command](args, log)


if __name__ == "__main__":  # the old `python -m samplegen.tbs.cli`
    import sys
    sys.stderr.write("samplegen: error: run 'samplegen tbs ...' "
                     "(or 'python -m samplegen tbs ...')\n")
    sys.exit(2)
