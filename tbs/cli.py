"""Time-biased sampling on the command line: ``samplegen tbs COMMAND ...``.

Commands
  simulate    sample-size behaviour of T-TBS and R-TBS (section 6.2)
  knn         kNN accuracy and robustness on a two-mode stream (section 6.4, Table 1)
  regression  ridge regression on a two-mode stream (section 6.5)
  online      R-TBS against online gradient descent and a proximal learner (figure 17)
  runtime     R-TBS update time against the decay rate (figure 12)
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
import os

import numpy as np

from samplegen.jobs import fs as fsmod
from samplegen.jobs import limits
from samplegen.udfs.errors import OutputError, count_words

from . import experiments as ex
from .errors import TBSError


def _float_list(text):
    try:
        return [float(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") \
            from None


def _int_list(text):
    try:
        return [int(x) for x in text.split(",")]
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
    out.append(cur)
    for p in out:
        ex.mode_pattern(p, 1)
    _check_distinct("patterns", out)
    return out


def _check_distinct(what, items):
    """TBSError naming the first item of ``items`` listed twice."""
    seen = set()
    for item in items:
        if item in seen:
            raise TBSError(f"{what} must differ: {item!r} is listed twice; list each once")
        seen.add(item)


#: what an output option's file ends with (for the example in an error message)
_SUFFIX = {"--csv": ".csv", "--plot": ".png", "--table": ".md"}


def _check_outputs(args, options):
    """Refuse, before any work, an output that cannot be written: a parent
    that is a file, a directory (or a name ending in '/') where the file
    would go, a symbolic link, one file named by two of ``options``, or a
    plot without matplotlib.  An existing file is replaced."""
    seen = {}
    for option in options:
        path = getattr(args, option[2:])
        if path is None:
            continue
        local = fsmod.local_path(path)
        if local.endswith(("/", os.sep)) or os.path.isdir(local):
            raise OutputError(f"{option} {path} is a directory; give the name of a file "
                              f"(e.g. {os.path.join(local, 'out' + _SUFFIX[option])})")
        fsmod.missing_dirs(path)
        same = seen.get(os.path.realpath(local))
        if same:
            raise OutputError(f"{same} and {option} both name {path}; give each its own file")
        seen[os.path.realpath(local)] = option
        if option == "--plot" and importlib.util.find_spec("matplotlib") is None:
            raise TBSError("--plot needs matplotlib (pip install 'samplegen[plots]')")


def _made_by(args):
    """The ``--made-by`` text (what to write in the outputs), or None."""
    text = getattr(args, "made_by", None)
    return text.strip() if text and text.strip() else None


def _write_csv(args, header, rows):
    """``--csv``: CSV with ``header``, and ``--made-by`` (if given) as a first
    line ``# made by: ...`` (read it with ``comment="#"`` in pandas, or skip
    lines starting with '#')."""
    made_by = _made_by(args)
    buf = io.StringIO()
    if made_by:
        buf.write(f"# made by: {made_by}\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    fsmod.write_atomic(args.csv, buf.getvalue().encode())


def _write_table(args, text):
    """``--table``: a Markdown table's text, with a last line naming the
    ``--made-by`` command (if given)."""
    made_by = _made_by(args)
    fsmod.write_atomic(args.table, (text + (f"\nMade by: `{made_by}`.\n" if made_by else ""))
                       .encode())


def _save_figure(fig, args):
    """``--plot``: PNG of ``fig``, ``--made-by`` (if given) as a small footer
    and as the PNG's ``Comment`` text chunk."""
    made_by = _made_by(args)
    metadata = None
    if made_by:
        fig.text(0.995, 0.002, f"made by: {made_by}", ha="right", va="bottom", fontsize=6,
                 color="gray")
        metadata = {"Comment": f"made by: {made_by}"}
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata=metadata)
    fsmod.write_atomic(args.plot, buf.getvalue())


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# ----------------------------------------------------------------------------- simulate

def _check_memory(nbytes, command, fix):
    """Refuse, before any work, an experiment whose arrays would not fit."""
    limits.check_memory(nbytes, f"samplegen tbs {command}", fix)


def _cell(value, count=False):
    """A CSV cell: empty for NaN (not applicable), else the exact float (``count``: an integer)."""
    value = float(value)
    if math.isnan(value):
        return ""
    return str(int(value)) if count else repr(value)


def _cmd_simulate(args):
    _check_outputs(args, ("--csv", "--plot"))
    algorithms = [a.strip() for a in args.algorithms.split(",")]
    for a in algorithms:
        if a not in ("ttbs", "rtbs"):
            raise TBSError(f"--algorithms must list 'ttbs' and/or 'rtbs', got {a!r}")
    _check_distinct("--algorithms", algorithms)
    fix = "ask for fewer --batches or smaller batches (--batch-size, --phi, --high)"
    _check_memory(ex.simulate_memory(args.batches, len(algorithms), args.n,
                                     rows=args.csv is not None), "simulate", fix)
    decay = ex.make_decay(args.decay, lam=args.lam, power=args.power, shift=args.shift)
    sizes = ex.batch_sizes(args.regime, args.batches, args.batch_size, phi=args.phi,
                           change_at=args.change_at, high=args.high, period=args.period,
                           seed=args.seed)
    _check_memory(ex.simulate_memory(args.batches, len(algorithms), args.n, sizes,
                                     rows=args.csv is not None), "simulate", fix)
    options = {k: v for k, v in (("max_weight", args.max_weight),
                                 ("consolidation_rate", args.consolidation_rate),
                                 ("delta1", args.delta1), ("delta2", args.delta2))
               if v is not None}
    mean_batch_size = args.batch_size if args.mean_batch_size is None else args.mean_batch_size
    traces = ex.simulate(algorithms, decay, args.n, sizes, seed=args.seed,
                         mean_batch_size=mean_batch_size, rtbs_options=options)
    if args.csv:
        rows = []
        for name, tr in traces.items():
            for k in range(sizes.size):
                rows.append([k + 1, name, int(sizes[k]), int(tr["sample_size"][k])]
                            + [_cell(tr[key][k], key.endswith("latent_samples"))
                               for key in ex.TRACE_KEYS[1:]])
        _write_csv(args, ["batch", "algorithm", "batch_size", *ex.TRACE_KEYS], rows)
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
        _save_figure(fig, args)
        plt.close(fig)
    half = sizes.size // 2
    for name, tr in traces.items():
        tail = tr["sample_size"][half:]
        print(f"{name}: sample size over batches {half + 1}-{sizes.size}: mean {tail.mean():.1f}, "
              f"min {tail.min():.0f}, max {tail.max():.0f} (n = {args.n})")
    return 0


# ----------------------------------------------------------------------------- runtime

def _cmd_runtime(args):
    _check_outputs(args, ("--table", "--csv"))
    lams = args.lambdas
    if not lams or any(not (v > 0 and math.isfinite(v)) for v in lams):
        raise TBSError(f"--lambdas must list finite numbers > 0, got {lams}")
    _check_distinct("--lambdas", lams)
    for name, value, low in (("--n", args.n, 1), ("--batch-size", args.batch_size, 1),
                             ("--batches", args.batches, 1), ("--warmup", args.warmup, 0)):
        if value < low:
            raise TBSError(f"{name} must be an integer >= {low}, got {value}")
    _check_memory(48 * (args.n + args.batch_size) + 16 * args.batches * len(lams), "runtime",
                  "ask for a smaller --n or --batch-size")
    res = ex.decay_runtime(lams, n=args.n, batch_size=args.batch_size, batches=args.batches,
                           warmup=args.warmup, seed=args.seed)
    lines = ["| lambda | items put into the sample per batch (mean) | update time per batch, "
             "ms: median | 10th-90th percentile | ns per arriving item (median) |",
             "|---:|---:|---:|---:|---:|"]
    for lam, (inserted, secs) in res.items():
        med, lo, hi = (1e3 * float(np.percentile(secs, q)) for q in (50, 10, 90))
        lines.append(f"| {lam:g} | {inserted.mean():.0f} | {med:.2f} | {lo:.2f}-{hi:.2f} | "
                     f"{1e6 * med / args.batch_size:.2f} |")
        print(f"lambda {lam:g}: {inserted.mean():.0f} items put into the sample per batch, "
              f"update {med:.2f} ms (median of {args.batches} batches)")
    if args.table:
        text = "\n".join(lines) + (
            f"\n\nR-TBS, exponential decay, n = {args.n}, batches of {args.batch_size} items, "
            f"{args.warmup} untimed batches, then {args.batches} timed; one process, one "
            f"machine.\n")
        _write_table(args, text)
    if args.csv:
        rows = [[f"{lam:g}", args.warmup + j + 1, int(inserted[j]), f"{secs[j]:.6f}"]
                for lam, (inserted, secs) in res.items() for j in range(inserted.size)]
        _write_csv(args, ["lambda", "batch", "inserted", "seconds"], rows)
    return 0


# ----------------------------------------------------------------------------- knn / regression

#: default ridge penalties: 0.01 to 1e6, three per decade
DEFAULT_PENALTIES = ",".join(f"{v:g}" for v in ex.log_grid(0.01, 1e6))


def _check_counts(args):
    for name, value in (("--runs", args.runs), ("--test-batches", args.test_batches),
                        ("--batch", args.batch), ("--n", args.n)):
        if value < 1:
            raise TBSError(f"{name} must be an integer >= 1, got {value}")
    if args.warmup < 0 or args.tune_runs < 0:
        raise TBSError(f"--warmup and --tune-runs must be >= 0, got {args.warmup} and "
                       f"{args.tune_runs}")
    if args.test_batches < 20:
        raise TBSError(f"--test-batches must be >= 20 (the expected shortfall starts at t = 20), "
                       f"got {args.test_batches}")


def _warn(text):
    import sys
    sys.stderr.write(f"samplegen: warning: {text}\n")


def _edge_notes(hname, hyper, tuned, natural_low):
    """Lines about tuned values on an edge of the grid (also warned on stderr).
    The lowest value is no grid artefact when it is the natural bound."""
    notes = []
    if len(hyper) == 1:                       # a fixed value, nothing was tuned
        return notes
    for name, side in ex.grid_edges(hyper, tuned).items():
        if side == "lowest" and natural_low is not None and hyper[0] <= natural_low:
            continue
        value = hyper[tuned[name]]
        text = (f"tuned {hname} of {name} is the {side} grid value {value:g}: "
                f"the optimum may lie outside the grid")
        _warn(text)
        notes.append(text)
    return notes


def _fmt(value, paper, digits=1):
    return f"{value:.{digits}f}" + ("" if paper is None else f" ({paper:g})")


def _stream_command(args, kind):
    _check_outputs(args, ("--table", "--csv", "--plot"))
    _check_counts(args)
    patterns = args.patterns
    spec = args.schemes
    if spec is None:
        spec = ex.TABLE1_SCHEMES if kind == "knn" else f"exp:{args.lam},sw,unif"
    schemes = ex.make_schemes(spec, args.n)
    hyper = args.k if kind == "knn" else args.penalties
    memory = dict(runs=max(args.runs, args.tune_runs), test_batches=args.test_batches,
                  warmup=args.warmup, n=args.n, schemes=len(schemes), grid=len(hyper))
    if kind == "knn":
        memory["classes"] = args.classes
    fix = "ask for fewer --runs, --test-batches, --warmup or smaller batches (--batch, --n)"
    _check_memory(ex.stream_memory(kind if kind == "knn" else "ridge", **memory), kind, fix)
    if kind == "knn":
        if any(k < 1 for k in hyper):
            raise TBSError(f"--k must list integers >= 1, got {hyper}")
        mixture = {"classes": args.classes, "box": args.box, "spread": args.spread,
                   "ratio": args.ratio}
        ex.gaussian_mixture_stream(np.random.default_rng(0), 1, 1, np.zeros(1, bool), **mixture)
        sizes = ex.stream_sizes(args.batch_sizes, args.warmup, args.test_batches, args.batch,
                                growth=args.growth, seed=args.seed)
        _check_memory(ex.stream_memory("knn", items=sizes.sum(dtype=np.float64),
                                       largest=sizes.max(), **memory), kind, fix + " or --growth")

        def make_data(rng, total, batch, flags):
            return ex.gaussian_mixture_stream(rng, total, batch, flags, **mixture)

        def factory(points, labels):
            return ex.knn_scores(points, labels, hyper)
        loss, hname, natural_low = "Miss%", "k", 1
    else:
        if not hyper or any(not (a >= 0 and math.isfinite(a)) for a in hyper):
            raise TBSError(f"--penalties must list finite numbers >= 0, got {hyper}")
        if sorted(hyper) != hyper:
            raise TBSError(f"--penalties must be increasing, got {hyper}")
        sizes = args.batch
        items = args.batch * (args.warmup + args.test_batches)
        _check_memory(ex.stream_memory("ridge", items=items, largest=args.batch, **memory),
                      kind, fix)

        def make_data(rng, total, batch, flags):
            return ex.linear_stream(rng, total, batch, flags)

        def factory(x, y):
            return ex.ridge_scores(x, y, hyper, intercept=args.intercept)
        loss, hname, natural_low = "MSE", "penalty", 0.0
    results, curves, first, ses, notes = {}, {}, {}, {}, []
    for pattern in patterns:
        flags = ex.mode_pattern(pattern, args.test_batches)
        common = dict(runs=None, warmup=args.warmup, test_batches=args.test_batches,
                      batch=sizes, abnormal=flags)
        if args.tune_runs:
            common.update(runs=args.tune_runs, seed=args.seed + 1_000_003)
            tuned = ex.tune(ex.stream_experiment(schemes, make_data, factory, hyper, **common))
        common.update(runs=args.runs, seed=args.seed)
        scores = ex.stream_experiment(schemes, make_data, factory, hyper, **common)
        if not args.tune_runs:
            tuned = ex.tune(scores)
        results[pattern] = ex.summarize(scores, hyper, tuned)
        ses[pattern] = ex.standard_errors(scores, tuned)
        curves[pattern] = {name: np.nanmean(scores[name][:, :, tuned[name]], axis=0)
                           for name in schemes}
        first[pattern] = {name: scores[name][0, :, tuned[name]] for name in schemes}
        notes += [f"{pattern}: {n}" for n in _edge_notes(hname, hyper, tuned, natural_low)]
        print(f"{pattern}: " + "; ".join(f"{name} {loss} {m:.1f} ES {e:.1f} ({hname}={h:g})"
                                         for name, (h, m, e) in results[pattern].items()))
    if args.table:
        text = _stream_table(args, kind, schemes, patterns, results, ses, loss, hname, notes)
        _write_table(args, text)
    if args.csv:
        rows = []
        for p in patterns:
            for name in schemes:
                for t, (value, one) in enumerate(zip(curves[p][name], first[p][name]), start=1):
                    rows.append([p, name, t, f"{value:.4f}", results[p][name][0], f"{one:.4f}"])
        short = loss.lower().rstrip('%')
        _write_csv(args, ["pattern", "scheme", "t", f"mean_{short}", hname,
                              f"run1_{short}"], rows)
    if args.plot:
        _stream_plot(args, kind, schemes, patterns, curves, loss, sizes)
    return 0


def _paper_value(kind, args, pattern, name):
    """The paper's (loss, ES) for this cell, or None where the setup differs."""
    if kind == "knn":
        if args.batch_sizes != "constant" or args.n != 1000:
            return None
        return ex.PAPER_TABLE1.get(name, {}).get(pattern)
    return ex.PAPER_REGRESSION.get((args.n, pattern), {}).get(name)


def _stream_table(args, kind, schemes, patterns, results, ses, loss, hname, notes):
    title = {p: "Single event" if p == "single" else p for p in patterns}
    head = "| Alg. | " + " | ".join(f"{title[p]} {loss} | {title[p]} ES"
                                    for p in patterns) + " |"
    lines = [head, "|---|" + "---:|---:|" * len(patterns)]
    any_paper = False
    for name in schemes:
        cells = []
        for p in patterns:
            paper = _paper_value(kind, args, p, name)
            any_paper |= paper is not None
            cells += [_fmt(results[p][name][1], paper and paper[0]),
                      _fmt(results[p][name][2], paper and paper[1])]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    out = ["\n".join(lines), ""]
    if any_paper:
        out.append("In parentheses: the paper's value for the same cell.")
    tuned_notes = []
    for p in patterns:
        chosen = [results[p][name][0] for name in schemes]
        common = max(set(chosen), key=chosen.count)
        others = [f"{name} {h:g}" for name, h in zip(schemes, chosen) if h != common]
        tuned_notes.append(f"{title[p]}: {common:g}"
                           + (f" (except {', '.join(others)})" if others else ""))
    out.append(f"Tuned {hname}: " + "; ".join(tuned_notes) + ".")
    se_loss = max(v[0] for p in patterns for v in ses[p].values())
    se_es = max(v[1] for p in patterns for v in ses[p].values())
    out.append(f"Standard error of a mean over the {args.runs} runs: at most {se_loss:.2f} "
               f"({loss}) and {se_es:.2f} (ES).")
    ref = next((n for n in schemes if n == "R-TBS exp: lambda = 0.07"), None) or next(
        (n for n in schemes if n.startswith("R-TBS")), None)
    if ref:
        paper_ratio = ex.PAPER_FIG15.get(args.batch_sizes, {}) if kind == "knn" else {}
        for p in patterns:
            parts = []
            for name in ("SW", "Unif"):
                if name in schemes:
                    r_loss = results[p][name][1] / results[p][ref][1]
                    r_es = results[p][name][2] / results[p][ref][2]
                    pr = paper_ratio.get(name) if (p == "P(10,10)" and
                                                   ref.endswith("0.07")) else None
                    parts.append(f"{name} {r_loss:.2f}x" + (f" (paper {pr[0]:g}x)" if pr else "")
                                 + f" {loss}, {r_es:.2f}x" + (f" (paper {pr[1]:g}x)" if pr else "")
                                 + " ES")
            if parts:
                out.append(f"{title[p]}, relative to {ref}: " + "; ".join(parts) + ".")
    for dk, symbol in (("exp", "lambda"), ("poly", "s")):
        found = [(p, ex.best_decay(results[p], dk)) for p in patterns]
        found = [(p, b) for p, b in found if b]
        if found:
            cells = [f"{title[p]} {b[0]:g} / {b[1]:g}" for p, b in found]
            smaller = sum(b[1] < b[0] for _, b in found)
            out.append(f"R-TBS {dk}, best {symbol} for {loss} / for ES: " + "; ".join(cells)
                       + f" (ES optimum smaller in {smaller} of {len(found)}).")
    out += [f"Grid edge: {n}." for n in notes]
    return "\n".join(out) + "\n"


def _stream_plot(args, kind, schemes, patterns, curves, loss, sizes):
    plt = _pyplot()
    fig, axes = plt.subplots(len(patterns), 1, figsize=(9, 2.6 * len(patterns)), squeeze=False)
    rtbs = [n for n in schemes if n.startswith("R-TBS")]
    preferred = [n for n in rtbs if n.endswith("= 0.07") or n.endswith("= 2.0")
                 or (kind == "regression")]
    shown = (preferred or rtbs[:1]) + [n for n in schemes if not n.startswith("R-TBS")]
    for ax, p in zip(axes[:, 0], patterns):
        t = np.arange(1, args.test_batches + 1)
        for name in shown:
            ax.plot(t, curves[p][name], lw=1, label=name)
        if kind == "knn":
            for level in (15, 40):
                ax.axhline(level, color="gray", lw=0.6, ls=":")
            ax.text(1, 41, "paper: about 15% normal, 40% at a switch", fontsize=7,
                    color="gray")
        ax.set_title(f"{p}: mean over {args.runs} runs"
                     + ("" if kind != "knn" or args.batch_sizes == "constant"
                        else f", {args.batch_sizes} batch sizes"), fontsize=9)
        ax.set_ylabel(loss)
    axes[-1, 0].set_xlabel("test batch t")
    axes[0, 0].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    _save_figure(fig, args)
    plt.close(fig)


# ----------------------------------------------------------------------------- online learners

def _cmd_online(args):
    _check_outputs(args, ("--table", "--csv", "--plot"))
    _check_counts(args)
    if any(e < 0 for e in args.extra) or not args.extra:
        raise TBSError(f"--extra must list integers >= 0, got {args.extra}")
    _check_distinct("--extra", args.extra)
    if not math.isfinite(args.scale):
        raise TBSError(f"--scale must be a finite number, got {args.scale}")
    for name, grid in (("--lambdas", args.lambdas), ("--rates", args.rates),
                       ("--mus", args.mus)):
        if not grid or any(not (v > 0 and math.isfinite(v)) for v in grid):
            raise TBSError(f"{name} must list finite numbers > 0, got {grid}")
    if args.fixed_lambda is not None and not (args.fixed_lambda > 0
                                              and math.isfinite(args.fixed_lambda)):
        raise TBSError(f"--fixed-lambda must be a finite number > 0, got {args.fixed_lambda}")
    if not args.penalties or any(not (v >= 0 and math.isfinite(v)) for v in args.penalties):
        raise TBSError(f"--penalties must list finite numbers >= 0, got {args.penalties}")
    _check_distinct("--penalties", args.penalties)
    grid = max(len(args.lambdas) * len(args.penalties), len(args.rates), len(args.mus))
    memory = dict(runs=max(args.runs, args.tune_runs), test_batches=args.test_batches,
                  warmup=args.warmup, n=args.n, schemes=2, grid=grid, d=2 + max(args.extra))
    items = args.batch * (args.warmup + args.test_batches)
    _check_memory(ex.stream_memory("ridge", items=items, largest=args.batch, **memory), "online",
                  "ask for fewer --runs, --test-batches, --warmup, --extra or smaller batches "
                  "(--batch, --n)")
    flags = ex.mode_pattern(args.pattern, args.test_batches)
    methods = ("R-TBS", "Prox", "OGD") + (("R-TBS fixed",) if args.fixed_lambda else ())
    rtbs = "lambda" if len(args.penalties) == 1 else "lambda/penalty"
    hnames = {"R-TBS": rtbs, "Prox": "mu", "OGD": "rate", "R-TBS fixed": rtbs}
    rows, curves, first, summary_of = [], {}, {}, {}
    for extra in args.extra:
        res = ex.online_experiment(lambdas=args.lambdas, rates=args.rates, mus=args.mus,
                                   runs=args.runs, tune_runs=args.tune_runs,
                                   warmup=args.warmup, test_batches=args.test_batches,
                                   batch=args.batch, abnormal=flags, n=args.n,
                                   scale=args.scale, extra=extra, seed=args.seed,
                                   fixed_lambda=args.fixed_lambda, penalties=args.penalties)
        for m, side in res["edges"].items():
            _warn(f"stable parameters {extra}: tuned {hnames[m]} of {m} is the {side} grid "
                  f"value {_tuned_text(res['tuned'][m])}: the optimum may lie outside the "
                  f"grid")
        summary = {}
        for m in methods:
            c = res["curves"][m]
            es = np.mean([ex.expected_shortfall(run[19:]) for run in c])
            summary[m] = (float(np.mean(c)), float(es), res["tuned"][m])
        rows.append((extra, summary, res["edges"]))
        summary_of[extra] = summary
        curves[extra] = {m: res["curves"][m].mean(axis=0) for m in methods}
        first[extra] = {m: res["curves"][m][0] for m in methods}
        print(f"stable parameters {extra}: " + "; ".join(
            f"{m} MSE {v[0]:.2f} ES {v[1]:.2f} ({hnames[m]}={_tuned_text(v[2])})"
            for m, v in summary.items()))
    paper = {}
    if args.pattern == "P(10,10)" and len(args.extra) == 1:
        key = {(1.0, 0): "a", (0.3333, 198): "b"}.get((round(args.scale, 4), args.extra[0]))
        paper = ex.PAPER_FIG17.get(key, {})
    if args.table:
        head = "| stable parameters | " + " | ".join(
            f"{m} MSE | {m} ES | {m} {hnames[m]}" for m in methods) + " |"
        lines = [head, "|---:|" + "---:|---:|---:|" * len(methods)]
        for extra, summary, edges in rows:
            cells = []
            for m in methods:
                mse, es, h = summary[m]
                cells += [_fmt(mse, paper.get(m), 2), f"{es:.2f}",
                          _tuned_text(h) + (" (edge)" if m in edges else "")]
            lines.append(f"| {extra} | " + " | ".join(cells) + " |")
        text = "\n".join(lines) + "\n"
        if paper:
            text += "\nIn parentheses: the paper's MSE.\n"
        _write_table(args, text)
    if args.csv:
        out = []
        for extra in args.extra:
            for m in methods:
                value = summary_of[extra][m][2]
                for t, (v, one) in enumerate(zip(curves[extra][m], first[extra][m]), start=1):
                    out.append([extra, m, t, f"{v:.4f}", _tuned_text(value), f"{one:.4f}"])
        _write_csv(args, ["stable_parameters", "method", "t", "mean_mse", "value",
                              "run1_mse"], out)
    if args.plot:
        _online_plot(args, rows, curves, methods)
    return 0


def _tuned_text(value):
    """A tuned value in a table or CSV: a number, or R-TBS's 'rate/penalty'."""
    if isinstance(value, tuple):
        return "/".join(f"{v:g}" for v in value)
    return f"{value:g}"


def _online_plot(args, rows, curves, methods):
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9, 3.2))
    if len(args.extra) == 1:
        c = curves[args.extra[0]]
        t = np.arange(1, args.test_batches + 1)
        others = max(float(np.max(c[m])) for m in methods if m != "OGD")
        others = max(others, float(np.max(c["OGD"])) if np.mean(c["OGD"]) <= 2 * np.mean(
            c["Prox"]) else 0.0)
        for m in methods:
            off = m == "OGD" and np.mean(c[m]) > 2 * np.mean(c["Prox"])
            ax.plot(t, np.minimum(c[m], 1.15 * others) if off else c[m], lw=1,
                    label=m + (" (clipped)" if off else ""))
        ax.set_xlabel("test batch t")
        ax.set_ylabel("MSE")
        ax.set_title(f"{args.pattern}, coefficients x {args.scale:g}, {args.extra[0]} stable "
                     f"parameters: mean over {args.runs} runs", fontsize=9)
    else:
        x = [extra for extra, _, _ in rows]
        for m in methods:
            ax.plot(x, [summary[m][0] for _, summary, _ in rows], marker="o", lw=1, label=m)
        ax.set_xlabel("stable parameters")
        ax.set_ylabel("mean MSE")
        ax.set_yscale("log")
        ax.set_title(f"{args.pattern}, coefficients x {args.scale:g}: mean over {args.runs} runs",
                     fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    _save_figure(fig, args)
    plt.close(fig)


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
    _add_made_by(p)

    q = sub.add_parser("runtime", help="R-TBS update time against the decay rate (figure 12)")
    q.add_argument("--lambdas", type=_float_list, default="0.01,0.03,0.07,0.1,0.3,1",
                   help="exponential decay rates (default %(default)s)")
    q.add_argument("--n", type=int, default=1_000_000, help="sample size (default %(default)s)")
    q.add_argument("--batch-size", type=int, default=1_000_000,
                   help="items per batch (default %(default)s)")
    q.add_argument("--batches", type=int, default=30, help="timed batches (default %(default)s)")
    q.add_argument("--warmup", type=int, default=10,
                   help="untimed batches first (default %(default)s)")
    q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    q.add_argument("--table", help="write the Markdown table here")
    q.add_argument("--csv", help="write one row per timed batch here")
    _add_made_by(q)

    for name, helptext in (("knn", "kNN on a Gaussian-mixture stream (section 6.4, Table 1)"),
                           ("regression", "ridge regression on a two-mode stream (section 6.5)")):
        q = sub.add_parser(name, help=helptext)
        default_patterns = ("single,P(10,10),P(20,10),P(30,10)" if name == "knn"
                            else "P(10,10),P(16,16)")
        q.add_argument("--patterns", type=_patterns_arg, default=default_patterns,
                       help="comma-separated mode patterns: single, P(d,e) "
                            "(default %(default)s)")
        _add_run_options(q, tuned="the hyper-parameter")
        q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
        q.add_argument("--table", help="write the Markdown table here")
        q.add_argument("--csv", help="write mean loss per test batch here")
        q.add_argument("--plot", help="write a PNG of the loss over time here")
        _add_made_by(q)
        if name == "knn":
            q.add_argument("--k", type=_int_list, default="1,3,5,7,9,11,15",
                           help="comma-separated neighbour counts to tune over "
                                "(default %(default)s)")
            q.add_argument("--schemes", help="comma-separated exp:LAMBDA, poly:S[:D], sw, unif "
                                             f"(default {ex.TABLE1_SCHEMES})")
            mix = ex.KNN_MIXTURE
            q.add_argument("--classes", type=int, default=mix["classes"],
                           help="number of classes (default %(default)s)")
            q.add_argument("--box", type=float, default=mix["box"],
                           help="centroids uniform in [0, BOX]^2 (default %(default)s)")
            q.add_argument("--spread", type=float, default=mix["spread"],
                           help="standard deviation of a class around its centroid "
                                "(default %(default)s, as the paper states)")
            q.add_argument("--ratio", type=float, default=mix["ratio"],
                           help="frequency ratio of frequent to rare classes "
                                "(default %(default)s, as the paper states)")
            q.add_argument("--batch-sizes", choices=["constant", "uniform", "growing"],
                           default="constant",
                           help="constant --batch, uniform on [0, 2 --batch], or --batch "
                                "growing by --growth per batch after warm-up (figure 15)")
            q.add_argument("--growth", type=float, default=0.02,
                           help="growth rate per batch for --batch-sizes growing "
                                "(default %(default)s)")
        else:
            q.add_argument("--lambda", dest="lam", type=float, default=0.1,
                           help="decay rate of R-TBS exp (default 0.1)")
            q.add_argument("--schemes", help="comma-separated exp:LAMBDA, poly:S[:D], sw, unif "
                                             "(default exp:LAMBDA,sw,unif)")
            q.add_argument("--penalties", type=_float_list, default=DEFAULT_PENALTIES,
                           help="increasing comma-separated ridge penalties to tune over "
                                "(default: 0.01 to 1e6, three per decade)")
            q.add_argument("--intercept", action=argparse.BooleanOptionalAction, default=True,
                           help="fit an unpenalized intercept (default: yes)")
    q = sub.add_parser("online", help="R-TBS against online learners (section 6.5, figure 17)")
    q.add_argument("--pattern", type=_one_pattern_arg, default="P(10,10)",
                   help="one mode pattern (default %(default)s)")
    q.add_argument("--scale", type=float, default=1.0,
                   help="factor on both modes' coefficients (default 1)")
    q.add_argument("--extra", type=_int_list, default="0",
                   help="stable parameters added to the model; a list sweeps (default 0)")
    _add_run_options(q, tuned="each method", sample="R-TBS sample size")
    q.add_argument("--lambdas", type=_float_list,
                   default="0.01,0.02,0.03,0.05,0.07,0.1,0.15,0.2,0.3,0.5,0.7,1,1.5,2,3,5,10",
                   help="R-TBS decay rates to tune over (default %(default)s)")
    q.add_argument("--rates", type=_float_list,
                   default=",".join(f"{v:g}" for v in ex.log_grid(1e-5, 10)),
                   help="OGD learning rates to tune over (default 1e-5 to 10)")
    q.add_argument("--mus", type=_float_list,
                   default=",".join(f"{v:g}" for v in ex.log_grid(1e-4, 1e3)),
                   help="proximal weights to tune over (default 1e-4 to 1e3)")
    q.add_argument("--fixed-lambda", type=float,
                   help="also run R-TBS with this decay rate, untuned ('R-TBS fixed')")
    q.add_argument("--penalties", type=_float_list, default="0",
                   help="ridge penalties of R-TBS's regression, tuned with the rate "
                        "(default 0: least squares)")
    q.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    q.add_argument("--table", help="write the Markdown table here")
    q.add_argument("--csv", help="write mean MSE per test batch here")
    q.add_argument("--plot", help="write a PNG here (a sweep plots mean MSE per --extra)")
    _add_made_by(q)
    _add_stream_commands(sub)


def _add_made_by(parser):
    parser.add_argument("--made-by", metavar="TEXT",
                        help="the command to name in every output (e.g. 'make tbs-sizes'): a "
                             "first line '# made by: TEXT' in the CSV, a last line in the "
                             "table, a footer and a PNG text chunk in the plot")


def _add_run_options(parser, tuned, sample="sample size"):
    """The options of an experiment's runs (knn, regression, online): ``tuned``
    names what the tuning runs pick, ``sample`` what ``--n`` sizes."""
    parser.add_argument("--runs", type=int, default=30,
                        help="runs per pattern (default %(default)s)")
    parser.add_argument("--tune-runs", type=int, default=5,
                        help=f"separate runs used to tune {tuned} (0: tune on the runs)")
    parser.add_argument("--test-batches", type=int, default=100,
                        help="test batches per run, at least 20 (default %(default)s)")
    parser.add_argument("--warmup", type=int, default=100,
                        help="normal batches before the test batches (default %(default)s)")
    parser.add_argument("--batch", type=int, default=100,
                        help="items per batch (default %(default)s)")
    parser.add_argument("--n", type=int, default=1000, help=f"{sample} (default %(default)s)")


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
    p.add_argument("--overwrite", action="store_true", help="replace an existing FILE")

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
    size = write_sample(args.state, args.to, keys=not args.no_keys, overwrite=args.overwrite)
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


def _one_pattern_arg(text):
    patterns = _patterns_arg(text)
    if len(patterns) != 1:
        raise argparse.ArgumentTypeError(f"expected one pattern, got {text!r}")
    return patterns[0]


def dispatch(args, log):
    """Run the tbs command *args* (parsed by :mod:`samplegen.cli`); ``log``
    writes a line on stderr.  Returns the exit status."""
    if args.command == "simulate":
        return _cmd_simulate(args)
    if args.command in ("knn", "regression"):
        return _stream_command(args, args.command)
    if args.command == "online":
        return _cmd_online(args)
    if args.command == "runtime":
        return _cmd_runtime(args)
    return {"run": _cmd_run, "sample": _cmd_sample, "status": _cmd_status}[args.command](args, log)


if __name__ == "__main__":  # the old `python -m samplegen.tbs.cli`
    import sys
    sys.stderr.write("samplegen: error: run 'samplegen tbs ...' "
                     "(or 'python -m samplegen tbs ...')\n")
    sys.exit(2)
