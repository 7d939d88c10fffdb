"""The ``samplegen`` command line.

Every error caused by the user's input is one line on stderr and exit status
2, with nothing written; other failures exit 1.  Progress goes to stderr
(``--quiet`` silences it); results (``info``) go to stdout.
"""
import argparse
import contextlib
import errno
import json
import logging
import os
import re
import signal
import sys

from samplegen.udfs.custom import parse_param
from samplegen.udfs.errors import ParameterError, SamplegenError

from . import driver
from .formats import export as export_file

PROG = "samplegen"
DEFAULT_RUNNER = os.environ.get("SAMPLEGEN_RUNNER", "local")


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are a single line (exit status 2)."""

    def error(self, message):
        sys.stderr.write(f"{PROG}: error: {message} (see '{self.prog} --help')\n")
        sys.exit(2)


def _seed(text):
    from samplegen.udfs.rng import check_seed
    try:
        return check_seed(int(text))
    except (ValueError, ParameterError):
        raise argparse.ArgumentTypeError(f"seed must be an integer in [0, 2**64), got {text!r}")


def _add_run_options(p):
    p.add_argument("src", metavar="SRC", help="input matrix directory")
    p.add_argument("dest", metavar="DEST", help="output run directory (must be empty or absent)")
    p.add_argument("--seed", type=_seed, required=True, help="random seed (0 <= S < 2**64)")
    p.add_argument("--runner", default=DEFAULT_RUNNER,
                   help="inline | local | hadoop | spark | hive (default: %(default)s)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty DEST")
    p.add_argument("--mrjob-conf", metavar="PATH", default=None,
                   help="mrjob config file (default: mrjob's own lookup, e.g. ~/.mrjob.conf)")
    p.add_argument("--jobconf", metavar="KEY=VALUE", action="append", default=[],
                   help="Hadoop jobconf for the MapReduce runners (repeatable)")
    p.add_argument("--num-cores", type=int, default=None,
                   help="parallel tasks for the inline/local runners (default: all cores)")
    p.add_argument("--spark-master", default=None, help="Spark master (runner spark)")
    p.add_argument("--spark-conf", metavar="KEY=VALUE", action="append", default=[],
                   help="Spark setting (runner spark; repeatable)")
    p.add_argument("--hive-url", default=None, help="hive://HOST:PORT/DB (runner hive)")
    p.add_argument("--bin-mib", type=float, default=driver.DEFAULT_BIN_BUDGET / 2 ** 20,
                   help="reducer memory per shuffle bin, MiB (default: %(default)s)")


def build_parser():
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress messages")
    common.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="engine logs, and tracebacks on failure")
    parser = _Parser(prog=PROG, parents=[common], description="Single-pass sample "
                     "generation from block-partitioned matrices, and time-biased sampling.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_parser = sub.add_parser

    def add_parser(name, **kwargs):
        kwargs.setdefault("parents", [common])
        return _add_parser(name, **kwargs)
    sub.add_parser = add_parser

    p = sub.add_parser("import", help="import a .npy, .csv or Parquet file as a block matrix")
    p.add_argument("src", metavar="SRC", help="file of rows: .npy, .csv or .parquet")
    p.add_argument("dest", metavar="DEST", help="matrix directory to create")
    p.add_argument("--block-size", type=int, required=True, help="rows and columns per block")
    p.add_argument("--sparse", action="store_true", help="store CSR blocks (zeros implicit)")
    p.add_argument("--columns", default=None,
                   help="comma-separated columns to import (CSV with header, Parquet)")
    p.add_argument("--overwrite", action="store_true", help="replace a non-empty DEST")

    p = sub.add_parser("make-matrix", help="write a synthetic dense or sparse matrix")
    p.add_argument("dest", metavar="DEST")
    p.add_argument("--rows", type=int, required=True)
    p.add_argument("--cols", type=int, required=True)
    p.add_argument("--block-size", type=int, required=True)
    p.add_argument("--density", type=float, default=None,
                   help="fraction of non-zero cells: makes a sparse matrix")
    p.add_argument("--seed", type=_seed, default=0)
    p.add_argument("--overwrite", action="store_true")

    p = sub.add_parser("holdout", help="hold-out pairs: train-<w> / test-<w>")
    _add_run_options(p)
    p.add_argument("--ratio", type=float, required=True, help="training share, in (0, 1]")
    p.add_argument("--repeats", type=int, default=1, help="number of pairs W (default 1)")
    p.add_argument("--fraction", type=float, default=1.0,
                   help="use only this share of the rows, in (0, 1] (default 1)")

    p = sub.add_parser("kfold", help="k-fold cross-validation: train-<i> / test-<i>")
    _add_run_options(p)
    p.add_argument("--k", type=int, required=True, help="number of folds (2 <= k <= rows)")
    p.add_argument("--naive", action="store_true",
                   help="materialize all k training sets instead of composing them")

    p = sub.add_parser("bootstrap", help="bootstrap samples: sample-<i>, with replacement")
    _add_run_options(p)
    p.add_argument("--samples", type=int, required=True, help="number of samples N")
    p.add_argument("--size", type=int, default=None, help="rows per sample (default: all)")

    p = sub.add_parser("sample", help="run your own sampling-UDF")
    _add_run_options(p)
    p.add_argument("--udf", required=True, help="MODULE:FUNCTION (or holdout/kfold/bootstrap)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="UDF parameter (repeatable)")

    p = sub.add_parser("info", help="describe a matrix or a run directory")
    p.add_argument("path", metavar="DIR")
    p.add_argument("--json", action="store_true", help="machine-readable output")

    p = sub.add_parser("export", help="write a matrix or a sample as rows")
    p.add_argument("path", metavar="DIR", help="matrix directory, or run directory with NAME")
    p.add_argument("name", metavar="NAME", nargs="?", default=None,
                   help="sample name in a run directory (e.g. train-0)")
    p.add_argument("--to", required=True, metavar="FILE", help="FILE.npy, FILE.csv or FILE.parquet")
    p.add_argument("--no-row-ids", action="store_true", help="omit the row ids")
    p.add_argument("--overwrite", action="store_true")

    sub.add_parser("tbs", help="time-biased sampling (see 'samplegen tbs --help')",
                   add_help=False, parents=[])
    sub.add_parser("hive", help="HiveQL: block tables, table-to-table sampling, scripts "
                   "(see 'samplegen hive --help')", add_help=False, parents=[])
    return parser


def _options(args):
    options = {"num_cores": args.num_cores, "jobconf": args.jobconf}
    if args.mrjob_conf is not None:
        options["mrjob_conf"] = args.mrjob_conf
    if args.spark_master:
        options["spark_master"] = args.spark_master
    if args.spark_conf:
        options["spark_conf"] = args.spark_conf
    if args.hive_url:
        options["hive_url"] = args.hive_url
    return {k: v for k, v in options.items() if v not in (None, [])}


def _run(args, udf, params, log):
    if not args.bin_mib > 0:
        raise ParameterError(f"--bin-mib must be > 0, got {args.bin_mib}")
    if args.num_cores is not None and args.num_cores < 1:
        raise ParameterError(f"--num-cores must be >= 1, got {args.num_cores}")
    return driver.generate(args.src, args.dest, udf, params, args.seed, runner=args.runner,
                           overwrite=args.overwrite, options=_options(args),
                           bin_budget=int(args.bin_mib * 2 ** 20), log=log)


def _print_info(desc):
    if desc["kind"] == "run":
        inp = desc["input"]
        print(f"run {desc['path']}: {desc['method']} {json.dumps(desc['params'])} "
              f"seed {desc['seed']} runner {desc['engine']['runner']}")
        print(f"input {inp['path']}: {inp['rows']} x {inp['cols']} {inp['kind']}, "
              f"block size {inp['block_size']}")
        print(f"{'sample':<16}{'rows':>12}{'cols':>8}{'blocks':>8}{'MB':>10}")
        for s in desc["samples"]:
            mark = "  (composed)" if s.get("composed_of") else ""
            print(f"{s['name']:<16}{s['rows']:>12}{s['cols']:>8}{len(s['blocks']):>8}"
                  f"{s.get('bytes', 0) / 1e6:>10.2f}{mark}")
    else:
        print(f"matrix {desc['path']}: {desc['rows']} x {desc['cols']} {desc['matrix_kind']}, "
              f"block size {desc['block_size']}, {len(desc['blocks'])} blocks")
        if desc.get("composed_of"):
            print("composed of: " + ", ".join(f"{c['path']} ({c['blocks']} blocks)"
                                               for c in desc["composed_of"]))
        print(f"fingerprint {desc['fingerprint']}")


class _ProgressHandler(logging.Handler):
    """Engine log lines worth showing on a terminal: steps and percentages."""

    KEEP = re.compile(r"Running step \d+ of \d+|map +\d+% +reduce +\d+%")

    def emit(self, record):
        message = record.getMessage()
        if self.KEEP.search(message):
            sys.stderr.write(f"{PROG}: {message.strip()}\n")


def _show_engine_progress():
    logger = logging.getLogger("mrjob")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    logger.addHandler(_ProgressHandler())


def dispatch(args, log):
    cmd = args.command
    if cmd == "import":
        columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
        driver.import_file(args.src, args.dest, args.block_size,
                           "sparse" if args.sparse else "dense", columns, args.overwrite, log)
    elif cmd == "make-matrix":
        driver.make_matrix(args.dest, args.rows, args.cols, args.block_size, args.density,
                           args.seed, args.overwrite, log)
    elif cmd == "holdout":
        _run(args, "holdout", {"ratio": args.ratio, "repeats": args.repeats,
                               "fraction": args.fraction}, log)
    elif cmd == "kfold":
        _run(args, "kfold", {"k": args.k, "naive": args.naive}, log)
    elif cmd == "bootstrap":
        _run(args, "bootstrap", {"samples": args.samples, "size": args.size}, log)
    elif cmd == "sample":
        _run(args, args.udf, dict(parse_param(p) for p in args.param), log)
    elif cmd == "info":
        desc = driver.info(args.path)
        if args.json:
            json.dump(desc, sys.stdout, indent=1)
            sys.stdout.write("\n")
        else:
            _print_info(desc)
    elif cmd == "export":
        matrix = driver.open_sample(args.path, args.name)
        written = export_file(matrix, args.to, row_ids=not args.no_row_ids,
                              overwrite=args.overwrite)
        log(f"exported {matrix.rows} x {matrix.cols} to {', '.join(written)}")
    return 0


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # --udf mymodule:f, as with `python -m`
    if argv and argv[0] == "tbs":
        from samplegen.tbs.cli import main as tbs_main
        return stoppable(lambda: tbs_main(argv[1:]))
    if argv and argv[0] == "hive":
        from samplegen.hive.cli import main as hive_main
        return hive_main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    args.quiet = getattr(args, "quiet", False)
    args.verbose = getattr(args, "verbose", False)
    if not args.command:
        parser.print_help(sys.stderr)
        return 2
    return run_command(dispatch, args)


def run_command(dispatch_fn, args):
    """Run ``dispatch_fn(args, log)`` under the command line's contract:
    progress and results on stderr, every error one line (exit status 2 for
    bad input, 1 for other failures), tracebacks only with ``--verbose``.
    Shared by ``samplegen hive`` (hive/cli.py)."""
    interactive = args.verbose or sys.stderr.isatty()
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
    else:
        for name in ("mrjob", "py4j", "pyspark", "pyhive"):
            logging.getLogger(name).setLevel(logging.CRITICAL + 1)
        if interactive and not args.quiet:
            _show_engine_progress()

    def log(message, progress=False):
        """Results always (unless --quiet); progress only on a terminal or with -v,
        so that a failing command in a script prints exactly one line."""
        if not args.quiet and (interactive or not progress):
            sys.stderr.write(f"{PROG}: {message}\n")

    def checked():
        try:
            return dispatch_fn(args, log)
        except SamplegenError as exc:
            if args.verbose:
                raise
            sys.stderr.write(f"{PROG}: error: {exc}\n")
            return exc.exit_status
        except OSError as exc:
            if args.verbose:
                raise
            message = os_error_message(exc)
            sys.stderr.write(f"{PROG}: error: {message or f'{type(exc).__name__}: {exc}'}\n")
            return 2 if message else 1
        except Exception as exc:  # engine failures: one line unless --verbose
            if args.verbose:
                raise
            sys.stderr.write(f"{PROG}: error: {type(exc).__name__}: {exc}\n")
            return 1
    return stoppable(checked)


def stoppable(call):
    """``call()``, stopped by Ctrl-C (exit status 130) or SIGTERM (143) the
    same way: every ``with`` block unwinds, then one line says so."""
    try:
        with _terminate_as_interrupt():
            return call()
    except Terminated:
        sys.stderr.write(f"{PROG}: terminated\n")
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``with`` block --
    staged outputs, engine runners, locks -- cleans up as on Ctrl-C."""


@contextlib.contextmanager
def _terminate_as_interrupt():
    owner = os.getpid()

    def handler(signum, frame):
        if os.getpid() != owner:  # a forked worker (mrjob's pool): end quietly
            os._exit(128 + signal.SIGTERM)
        raise Terminated()
    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: OSErrors that are the user's to fix, with the sentence that says so
_OS_ERRORS = {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
              errno.EROFS: "read-only file system", errno.ENOSPC: "no space left on device",
              errno.EDQUOT: "disk quota exceeded", errno.ENAMETOOLONG: "file name too long",
              errno.ENOTDIR: "not a directory", errno.EISDIR: "is a directory"}


def os_error_message(exc):
    """One sentence for an OSError the user can fix (permissions, space,
    names), or None for other failures."""
    reason = _OS_ERRORS.get(exc.errno)
    if reason is None:
        return None
    path = exc.filename if exc.filename is not None else ""
    return f"{reason}: {path}" if path else reason


if __name__ == "__main__":
    sys.exit(main())
