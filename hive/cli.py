"""HiveQL on the command line: ``samplegen hive COMMAND ...``: block tables,
table-to-table sampling, and the HiveQL scripts.

    samplegen hive table NAME SRC --hive-url URL [--replace]
    samplegen hive holdout TABLE RESULT --output DIR --ratio R [--repeats W]
                   [--fraction F] --seed S --hive-url URL [--overwrite] [--print]
    samplegen hive kfold TABLE RESULT --output DIR --k K [--naive] ...
    samplegen hive bootstrap TABLE RESULT --output DIR --samples N [--size S] ...
    samplegen hive sample TABLE RESULT --output DIR --udf MODULE:FUNC [--param K=V] ...
    samplegen hive holdout|kfold|bootstrap|sample TABLE RESULT --key COLUMN ...
                   (TABLE an ordinary table, one row per row: the result is a table of
                   its rows, partitioned by sample, and one view per sample)
    samplegen hive register RESULT --output DIR --hive-url URL [--overwrite] [--print]
    samplegen hive script NAME        print hive/NAME.hql (for beeline -f)

This module adds the commands (:func:`add_commands`) and runs them
(:func:`dispatch`); :mod:`samplegen.cli` owns the rest, the same as for every
samplegen command: an error is one line on stderr and exit status 2, and
nothing is written.  Every value given -- table names, ``--output``, the URL
and its ``files=`` / ``python=`` -- is checked before the connection to
HiveServer2 and before anything is written (:func:`hive.tables.sample_table`,
:func:`hive.engine.settings`); ``--print`` ships the zip its query names only
once the whole query has rendered.
"""
import os
import sys

from samplegen.udfs.custom import parse_param, parse_seed
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.options import (
    add_method_options,
    add_time_series_options,
    kfold_method,
    method_params,
)

from . import rowtables, tables


def _hive_url(p):
    p.add_argument("--hive-url", default=os.environ.get("SAMPLEGEN_HIVE_URL"),
                   help="hive://HOST:PORT/DB (default: $SAMPLEGEN_HIVE_URL)")


def _sampling(sub, name, help_):
    p = sub.add_parser(name, help=help_)
    p.add_argument("table", metavar="TABLE", help="block table to sample")
    p.add_argument("result", metavar="RESULT", help="result table to create")
    p.add_argument("--output", metavar="DIR",
                   help="a block table's run directory for the result table's files (a path "
                        "the server sees)")
    p.add_argument("--key", metavar="COLUMN",
                   help="TABLE is an ordinary table (one row per row, any columns) sampled by "
                        "this column: the result is a table of its rows and one view per "
                        "sample")
    p.add_argument("--seed", type=parse_seed, required=True, help="random seed (0 <= S < 2**64)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing result table and run directory")
    p.add_argument("--print", action="store_true", dest="print_only",
                   help="print the HiveQL instead of running it")
    _hive_url(p)
    return p


def add_commands(sub):
    """Add the Hive commands to the subparsers object *sub* (``samplegen hive``)."""
    p = sub.add_parser("table", help="register a matrix directory as an external block table")
    p.add_argument("name", metavar="NAME", help="table to create ([DB.]NAME)")
    p.add_argument("src", metavar="SRC", help="matrix directory (a path the server sees)")
    p.add_argument("--replace", action="store_true", help="re-create an existing table")
    _hive_url(p)

    p = _sampling(sub, "holdout", "hold-out pairs into a result table")
    add_method_options(p, "holdout")

    p = _sampling(sub, "kfold", "k folds (and composed training sets) into a result table")
    add_method_options(p, "kfold")
    add_time_series_options(p)

    p = _sampling(sub, "bootstrap", "bootstrap samples into a result table")
    add_method_options(p, "bootstrap")

    p = _sampling(sub, "weighted", "weighted samples (rows in proportion to a weight column) "
                  "into a result table")
    add_method_options(p, "weighted")

    p = _sampling(sub, "sample", "your own sampling-UDF into a result table")
    p.add_argument("--udf", required=True, help="MODULE:FUNCTION (or holdout/kfold/bootstrap)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                   help="UDF parameter (repeatable)")

    p = sub.add_parser("register", help="the result table over a finished run directory "
                       "(e.g. one written by beeline from a shipped script)")
    p.add_argument("result", metavar="RESULT", help="result table to create")
    p.add_argument("--output", required=True, metavar="DIR",
                   help="the run directory (a path the server sees)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing result table (and its views)")
    p.add_argument("--print", action="store_true", dest="print_only",
                   help="print the HiveQL instead of running it")
    _hive_url(p)

    p = sub.add_parser("script", help="print a HiveQL script of hive/ (for beeline -f)")
    p.add_argument("name", metavar="NAME", help="e.g. holdout, kfold, bootstrap, "
                   "create_block_table, baseline_bootstrap")


def _method(args):
    if args.command == "kfold":
        return kfold_method(args)
    if args.command in ("holdout", "bootstrap", "weighted"):
        return args.command, method_params(args.command, args)
    return args.udf, dict(parse_param(p) for p in args.param)


def dispatch(args, log):
    """Run the Hive command *args* (parsed by :mod:`samplegen.cli`); ``log``
    writes a line on stderr.  Returns the exit status."""
    if args.command == "script":
        sys.stdout.write(tables.script_text(args.name))
    elif args.command == "table":
        tables.create_block_table(args.hive_url, args.name, args.src, args.replace, log)
    elif args.command == "register":
        out = tables.register_result(args.hive_url, args.result, args.output,
                                     overwrite=args.overwrite, print_only=args.print_only,
                                     log=log)
        if args.print_only:
            sys.stdout.write(out)
    else:
        udf, params = _method(args)
        if (args.output is None) == (args.key is None):
            raise ParameterError("give --output DIR (a block table) or --key COLUMN (a row "
                                 "table), not both" if args.key else
                                 "--output DIR is required for a block table (or --key COLUMN "
                                 "for a row table)")
        if args.key is not None:
            out = rowtables.sample_row_table(args.hive_url, args.table, args.result, udf, params,
                                             args.seed, args.key, overwrite=args.overwrite,
                                             print_only=args.print_only, log=log)
            if args.print_only:
                sys.stdout.write(out)
            return 0
        out = tables.sample_table(args.hive_url, args.table, args.result, args.output, udf,
                                  params, args.seed, overwrite=args.overwrite,
                                  print_only=args.print_only, log=log)
        if args.print_only:
            sys.stdout.write(out)
    return 0
