"""The matrix and sampling commands of ``samplegen``: import, make-matrix,
holdout, kfold, bootstrap, sample, info, export.

This module adds the commands to the command line (:func:`add_commands`) and
runs them (:func:`dispatch`); :mod:`samplegen.cli` owns the rest: parsing,
``-q`` / ``-v``, one-line errors and exit statuses, signals.  Progress goes to
stderr through ``log``; results (``info``) go to stdout.
"""
import json
import math
import os
import sys

from samplegen.udfs.custom import parse_param, parse_seed
from samplegen.udfs.errors import InputError, ParameterError, SamplegenError, count_words
from samplegen.udfs.options import (
    add_method_options,
    add_time_series_options,
    kfold_method,
    method_params,
)

from . import driver, tables
from . import fs as fsmod
from .formats import export as export_file

DEFAULT_RUNNER = os.environ.get("SAMPLEGEN_RUNNER", "embedded")


def _add_run_options(p):
    p.add_argument("src", metavar="SRC",
                   help="the rows to sample: a table (FILE.csv with any column types, "
                        "FILE.parquet or a Parquet dataset directory, FILE.npy; a local path, "
                        "hdfs://... or another fsspec URL) or a matrix directory (import)")
    p.add_argument("dest", metavar="DEST", help="output run directory (must be empty or absent; "
                   "missing parent directories are created): a table in gives one table per "
                   "sample (every column kept), a matrix one matrix per sample")
    p.add_argument("--format", default=None, choices=sorted(tables.OUTPUT_FORMATS),
                   help="a table's samples as parquet, csv or npy files (default: the input "
                        "table's format; npy only for a .npy input)")
    p.add_argument("--seed", type=parse_seed, required=True, help="random seed (0 <= S < 2**64)")
    p.add_argument("--runner", default=DEFAULT_RUNNER,
                   help="embedded | inline | local | hadoop | spark | hive (default: %(default)s, "
                        "or $SAMPLEGEN_RUNNER; inline and local run mrjob on this machine, to "
                        "check a job's Hadoop behaviour or debug a UDF)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty DEST")
    p.add_argument("--mrjob-conf", metavar="PATH", default=None,
                   help="mrjob config file (default: mrjob's own lookup, e.g. ~/.mrjob.conf)")
    p.add_argument("--jobconf", metavar="KEY=VALUE", action="append", default=[],
                   help="Hadoop jobconf for the MapReduce runners (repeatable)")
    p.add_argument("--num-cores", type=int, default=None,
                   help="parallel tasks for the embedded, inline and local runners (default: "
                        "all cores)")
    p.add_argument("--memory-mib", type=float, default=None,
                   help="embedded runner: memory for the shuffle's records, MiB; past it they "
                        "spill to disk (default: a quarter of the available memory); for a "
                        "table, the memory its rows may take, past which they are streamed to "
                        "local disk first (default: half the available memory)")
    p.add_argument("--spark-master", default=None, help="Spark master (runner spark)")
    p.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                   help="Spark setting (runner spark; repeatable)")
    p.add_argument("--hive-url", default=None, help="hive://HOST:PORT/DB (runner hive)")
    p.add_argument("--bin-mib", type=float, default=driver.DEFAULT_BIN_BUDGET / 2 ** 20,
                   help="reducer memory per shuffle bin, MiB (default: %(default)s)")


def add_commands(sub):
    """Add the matrix and sampling commands to the subparsers object *sub*."""
    p = sub.add_parser("import", help="import rows (a .npy, .csv or Parquet file, or a directory "
                       "of Parquet files) as a block matrix")
    p.add_argument("src", metavar="SRC",
                   help="rows: FILE.npy, FILE.csv, FILE.parquet, or a Parquet dataset directory "
                        "(as Spark or Hive write it; partition directories key=value give "
                        "columns); a local path, hdfs://... or another fsspec URL")
    p.add_argument("dest", metavar="DEST", help="matrix directory to create")
    p.add_argument("--block-size", type=int, default=None,
                   help="rows and columns per block (default: from the column count, blocks of "
                        "about 1 MB: 10 columns -> 10000 rows per block, 100 -> 1000, 1000 -> "
                        "200); a sample's rows are moved and checksummed by blocks, and k-fold "
                        "training sets are composed of whole blocks")
    p.add_argument("--sparse", action="store_true", help="store CSR blocks (zeros implicit)")
    p.add_argument("--columns", default=None, metavar="A,B,...",
                   help="comma-separated columns to import, in this order (CSV with a header, "
                        "Parquet); default: every numeric column (numbers and booleans)")
    p.add_argument("--exclude", default=None, metavar="C,D,...",
                   help="comma-separated columns to leave out; every other numeric column is "
                        "imported (not with --columns)")
    p.add_argument("--label", default=None, metavar="NAME",
                   help="the label column, recorded by name in the matrix's _matrix.json for "
                        "stratification; it must be numeric and is imported as a regular column "
                        "(added to --columns if they do not name it)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty DEST")

    p = sub.add_parser("make-matrix", help="write a synthetic dense or sparse matrix")
    p.add_argument("dest", metavar="DEST", help="matrix directory to create")
    p.add_argument("--rows", type=int, required=True, help="number of rows")
    p.add_argument("--cols", type=int, required=True, help="number of columns")
    p.add_argument("--block-size", type=int, default=None,
                   help="rows and columns per block (default: as import chooses it, from the "
                        "column count; the values depend on it)")
    p.add_argument("--density", type=float, default=None,
                   help="fraction of non-zero cells: makes a sparse matrix")
    p.add_argument("--seed", type=parse_seed, default=0,
                   help="random seed of the values (default 0)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty DEST")

    p = sub.add_parser("holdout", help="hold-out pairs: train-<w> / test-<w>")
    _add_run_options(p)
    add_method_options(p, "holdout")

    p = sub.add_parser("kfold", help="k-fold cross-validation: train-<i> / test-<i>")
    _add_run_options(p)
    add_method_options(p, "kfold")
    add_time_series_options(p)
    p.add_argument("--materialize", action="store_true",
                   help="compose the training sets, then write each as a standalone matrix "
                        "(what --naive writes, without its k-fold shuffle)")

    p = sub.add_parser("bootstrap", help="bootstrap samples: sample-<i>, with replacement")
    _add_run_options(p)
    add_method_options(p, "bootstrap")
    p = sub.add_parser("weighted", help="weighted samples: sample-<i>, rows drawn in proportion "
                                        "to a weight column")
    _add_run_options(p)
    add_method_options(p, "weighted")

    p = sub.add_parser("sample", help="run your own sampling-UDF")
    _add_run_options(p)
    p.add_argument("--udf", required=True, help="MODULE:FUNCTION (or holdout/kfold/bootstrap)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="UDF parameter (repeatable)")

    p = sub.add_parser("info", help="describe a matrix or a run directory")
    p.add_argument("path", metavar="DIR", help="matrix directory or run directory")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("export", help="write a matrix or a sample as rows")
    p.add_argument("path", metavar="DIR", help="matrix directory, or run directory with NAME")
    p.add_argument("name", metavar="NAME", nargs="?", default=None,
                   help="sample name in a run directory (e.g. train-0)")
    p.add_argument("--to", required=True, metavar="FILE",
                   help="FILE.npy, FILE.csv or FILE.parquet (missing directories are created)")
    p.add_argument("--no-row-ids", action="store_true", help="omit the row ids")
    p.add_argument("--overwrite", action="store_true", help="replace an existing FILE")


def _names(text):
    """The names of a comma-separated list (None for none)."""
    return [name.strip() for name in text.split(",")] if text else None


def _options(args):
    options = {"num_cores": args.num_cores, "jobconf": args.jobconf,
               "memory_bytes": None if args.memory_mib is None else int(args.memory_mib * 2 ** 20)}
    if args.mrjob_conf is not None:
        options["mrjob_conf"] = args.mrjob_conf
    if args.spark_master:
        options["spark_master"] = args.spark_master
    if args.spark_conf:
        options["spark_conf"] = args.spark_conf
    if args.hive_url:
        options["hive_url"] = args.hive_url
    return {k: v for k, v in options.items() if v not in (None, [])}


#: the largest --memory-mib and --bin-mib taken (1 TiB): a budget is a bound on
#: memory, and more than any machine has is a mistake (an exponent too many)
MAX_MIB = 1 << 20


def _check_mib(option, value, lo, lo_text=None):
    """*value* of the MiB *option*, a finite number from *lo* to :data:`MAX_MIB`,
    or ParameterError naming it."""
    if not math.isfinite(value):
        raise ParameterError(f"{option} must be a finite number of MiB, got {value}; give a "
                             f"number such as {option} 64")
    if not value >= lo:
        raise ParameterError(f"{option} must be {lo_text or f'>= {lo:g}'}, got {value:g}")
    if value > MAX_MIB:
        raise ParameterError(f"{option} must be <= {MAX_MIB} (1 TiB), got {value:g}")
    return value


def _run(args, udf, params, log, materialize=False):
    _check_mib("--bin-mib", args.bin_mib, 1 / 1024, "> 0 and at least 1/1024 (1 KiB)")
    if args.num_cores is not None and args.num_cores < 1:
        raise ParameterError(f"--num-cores must be >= 1, got {args.num_cores}")
    if args.memory_mib is not None:
        _check_mib("--memory-mib", args.memory_mib, 1)
    if tables.is_table(args.src):
        return tables.generate(args.src, args.dest, udf, params, args.seed, fmt=args.format,
                               overwrite=args.overwrite, log=log, materialize=materialize,
                               runner=args.runner,
                               memory_bytes=None if args.memory_mib is None
                               else int(args.memory_mib * 2 ** 20))
    if args.format is not None:
        raise ParameterError(f"--format applies to a table's samples; {args.src} is a matrix "
                             "(export its samples with samplegen export)")
    return driver.generate(args.src, args.dest, udf, params, args.seed, runner=args.runner,
                           overwrite=args.overwrite, options=_options(args),
                           bin_budget=int(args.bin_mib * 2 ** 20), log=log,
                           materialize=materialize)


def _print_info(desc):
    if desc.get("run_kind") == tables.TABLE_RUN:
        _print_table_run(desc)
    elif desc["kind"] == "run":
        inp = desc["input"]
        print(f"run {desc['path']}: {desc['method']} {json.dumps(desc['params'])} "
              f"seed {desc['seed']} runner {desc['engine']['runner']}")
        print(f"input {inp['path']}: {inp['rows']} x {inp['cols']} {inp['kind']}, "
              f"block size {inp['block_size']}")
        print(f"{'sample':<16}{'rows':>12}{'cols':>8}{'blocks':>8}{'MB':>10}")
        for s in desc["samples"]:
            mark = ""
            if s.get("composed_of"):
                mark = f"  (composed: {s.get('bytes', 0) / 1e6:.2f} MB its own, the rest " \
                       "the other folds')"
            print(f"{s['name']:<16}{s['rows']:>12}{s['cols']:>8}{len(s['blocks']):>8}"
                  f"{s.get('total_bytes', s.get('bytes', 0)) / 1e6:>10.2f}{mark}")
    else:
        blocks = count_words(len(desc["blocks"]), "block", "blocks")
        print(f"matrix {desc['path']}: {desc['rows']} x {desc['cols']} {desc['matrix_kind']}, "
              f"block size {desc['block_size']}, {blocks}")
        if desc.get("composed_of"):
            print("composed of: " + ", ".join(
                f"{c['path']} ({count_words(c['blocks'], 'block', 'blocks')})"
                for c in desc["composed_of"]))
        if desc.get("columns"):
            print("columns: " + ", ".join(map(str, desc["columns"])))
        if desc.get("label"):
            print(f"label column {desc['label']!r} (column "
                  f"{desc['columns'].index(desc['label'])})")
        print(f"fingerprint {desc['fingerprint']}")


def _print_table_run(desc):
    inp = desc["input"]
    print(f"run {desc['path']}: {desc['method']} {json.dumps(desc['params'])} "
          f"seed {desc['seed']} runner {desc['engine']['runner']}")
    print(f"input {inp['path']}: {inp['format']} table, {count_words(inp['rows'], 'row', 'rows')}"
          f" x {count_words(inp['cols'], 'column', 'columns')}")
    print("columns: " + ", ".join(f"{c['name']} ({c['type']})" for c in inp["columns"]))
    print(f"{'sample':<16}{'rows':>12}{'MB':>10}  file")
    for s in desc["samples"]:
        where = s["files"][0]["path"].split("/")[0]
        mark = f"  (the folds {', '.join(s['composed_of'])}, linked)" \
            if s.get("composed_of") else ""
        print(f"{s['name']:<16}{s['rows']:>12}{s['bytes'] / 1e6:>10.2f}  {where}{mark}")


def user_code(args):
    """For :mod:`samplegen.cli`: None when the command *args* runs only
    samplegen's own code, else the clean-up of its output for when the
    process running it ends before the run finished.  A run with ``--udf
    MODULE:FUNCTION`` (a module of the user's: its import, its sample names,
    its calls) runs in a child process, so that nothing the UDF does -- an
    ``os._exit(0)`` included -- can end the command with a success it did
    not have; the clean-up removes what the dead run left (its staging
    directory, once its lock is free, and the parent directories it made)."""
    if getattr(args, "command", None) != "sample" or ":" not in args.udf:
        return None
    if getattr(args, "runner", None) not in (None, "embedded", "inline"):
        return None    # its tasks run in processes of their own, whose early end fails the run
    dest = str(args.dest)
    if not fsmod.is_local(dest):
        return lambda: None    # remote staging is removed by the run itself only
    dest = os.path.abspath(fsmod.local_path(dest)).rstrip("/") or "/"
    try:
        made = fsmod.missing_dirs(dest)
    except SamplegenError:    # refused again, and reported, by the run itself
        made = []

    def clean_up():
        fsmod.remove_stale_temporaries(os.path.dirname(dest))
        fsmod.remove_dirs(made)
    return clean_up


def dispatch(args, log):
    """Run the command *args* (parsed by :mod:`samplegen.cli`); ``log(message,
    progress=False)`` writes a line on stderr.  Returns the exit status."""
    cmd = args.command
    if cmd == "import":
        driver.import_file(args.src, args.dest, args.block_size,
                           "sparse" if args.sparse else "dense", _names(args.columns),
                           args.overwrite, log, exclude=_names(args.exclude), label=args.label)
    elif cmd == "make-matrix":
        block_size = args.block_size
        if block_size is None:
            block_size = driver.default_block_size(args.cols)
        driver.make_matrix(args.dest, args.rows, args.cols, block_size, args.density,
                           args.seed, args.overwrite, log)
    elif cmd == "holdout":
        _run(args, "holdout", method_params("holdout", args), log)
    elif cmd == "kfold":
        udf, params = kfold_method(args)
        _run(args, udf, params, log, materialize=args.materialize)
    elif cmd == "bootstrap":
        _run(args, "bootstrap", method_params("bootstrap", args), log)
    elif cmd == "weighted":
        _run(args, "weighted", method_params("weighted", args), log)
    elif cmd == "sample":
        _run(args, args.udf, dict(parse_param(p) for p in args.param), log)
    elif cmd == "info":
        desc = driver.info(args.path)
        if desc.get("run_kind") == tables.TABLE_RUN:
            tables.verify_run(args.path, desc)
        if args.json:
            try:   # whole, or not at all: never NaN or Infinity, which JSON has not
                text = json.dumps(desc, indent=1, allow_nan=False)
            except ValueError:
                raise InputError(f"{args.path}: its metadata holds NaN or an infinity, "
                                 "which JSON cannot; it is damaged") from None
            sys.stdout.write(text + "\n")
        else:
            _print_info(desc)
    elif cmd == "export":
        matrix = driver.open_sample(args.path, args.name)
        written = export_file(matrix, args.to, row_ids=not args.no_row_ids,
                              overwrite=args.overwrite)
        log(f"exported {matrix.rows} x {matrix.cols} to {', '.join(written)}")
    return 0


if __name__ == "__main__":  # the old `python -m samplegen.jobs.cli`
    sys.stderr.write("samplegen: error: run 'samplegen ...' (or 'python -m samplegen ...')\n")
    sys.exit(2)
