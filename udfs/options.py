"""The built-in sampling methods' command-line options, one home for every
command set that runs them (``samplegen holdout ...``, ``samplegen hive
holdout ...``): the options on a parser, and the UDF parameters they make.

Exact sizes (hold-out) and balanced folds (k-fold) are the default, as
scikit-learn users expect; ``--per-row`` gives the paper's independent coin
per row.
"""

from .errors import ParameterError


def _stratify(what):
    return ("--stratify", dict(default=None, metavar="LABEL",
                               help=f"{what}, within one row (LABEL: a column name or number; "
                                    "implies exact sizes)"))


def _groups(what):
    return ("--groups", dict(default=None, metavar="GROUP",
                             help=f"all rows of a group (the same value in column GROUP, a name "
                                  f"or number) {what}"))


def _exact_or_coins(dest, flag, exact_help, coins_help):
    """``flag`` and ``--per-row``: one choice, *dest* None when neither is
    given (the caller's default: :func:`method_params`)."""
    return [(flag, dict(dest=dest, action="store_const", const=True, default=None,
                        help=exact_help + " (the default)")),
            ("--per-row", dict(dest=dest, action="store_const", const=False,
                               help=coins_help + ", as in the paper"))]


#: per built-in method: (flags, add_argument keywords), in the order of
#: --help; a list of them is one choice (a mutually exclusive group)
OPTIONS = {
    "holdout": [
        ("--ratio", dict(type=float, required=True, help="training share, in (0, 1]")),
        ("--repeats", dict(type=int, default=1, help="number of pairs W (default 1)")),
        ("--fraction", dict(type=float, default=1.0,
                            help="use only this share of the rows, in (0, 1] (default 1)")),
        _exact_or_coins("exact", "--exact",
                        "exact sizes: round(ratio x rows) training rows, the rest test, every "
                        "such split equally likely",
                        "an independent coin per row: sizes binomial"),
        _stratify("each side holds every class of column LABEL in proportion"),
        _groups("on the same side; exact sizes count groups"),
    ],
    "kfold": [
        ("--k", dict(type=int, required=True, help="number of folds (2 <= k <= rows)")),
        ("--repeats", dict(type=int, default=1,
                           help="repeated k-fold: R independent sets of k folds, rounds "
                                "numbered r * k + i (default 1)")),
        ("--naive", dict(action="store_true",
                         help="materialize all k training sets instead of composing them")),
        _exact_or_coins("balanced", "--balanced",
                        "fold sizes that differ by at most one, every such partition equally "
                        "likely",
                        "an independent fold per row: sizes multinomial"),
        _stratify("every fold holds every class of column LABEL in proportion"),
        _groups("in the same fold; balanced: each group in turn to the smallest fold"),
    ],
    "bootstrap": [
        ("--samples", dict(type=int, required=True, help="number of samples N")),
        ("--size", dict(type=int, default=None, help="rows per sample (default: all)")),
        ("--oob", dict(action="store_true",
                       help="also write each bag's out-of-bag rows (drawn 0 times) as oob-<i>")),
        _stratify("every bag holds every class of column LABEL in proportion"),
    ],
    "weighted": [
        ("--weights", dict(required=True, metavar="COLUMN",
                           help="the column of each row's weight (a name or number), or a "
                                ".npy file of one weight per row in row-id order (a path or "
                                "URL ending in .npy): finite, not negative; a row of weight 0 "
                                "is never drawn")),
        [("--size", dict(type=int, default=None,
                         help="exactly this many rows per sample: successive weighted draws "
                              "(each next row in proportion to its weight among those not "
                              "drawn yet), in draw order")),
         ("--expected", dict(type=int, default=None,
                             help="this many rows expected per sample: each row included "
                                  "with probability min(1, c x weight) (Poisson sampling)"))],
        ("--replace", dict(action="store_true",
                           help="with --size: draws with replacement (a weighted bootstrap)")),
        ("--samples", dict(type=int, default=1, help="number of samples N (default 1)")),
    ],
}

#: ``kfold --time-series``: expanding-window folds (the ``timeseries`` UDF)
TIME_SERIES = [
    ("--time-series", dict(action="store_true",
                           help="expanding-window folds over the row order (rows as time, as "
                                "scikit-learn's TimeSeriesSplit): round i tests on the i-th of "
                                "k slices at the end and trains on the rows before it")),
    ("--gap", dict(type=int, default=0,
                   help="--time-series: rows left out between training and test (default 0)")),
    ("--test-size", dict(type=int, default=0,
                         help="--time-series: rows per test slice (default: rows // (k + 1))")),
    ("--max-train-size", dict(type=int, default=0,
                              help="--time-series: train on at most this many latest rows "
                                   "(default: all)")),
]

#: the choices of exact sizes or the coins, exact by default
_CHOSEN = ("exact", "balanced")


def add_method_options(parser, method, skip=()):
    """The options of built-in *method* on *parser*, but the flags *skip*."""
    for entry in OPTIONS[method]:
        if isinstance(entry, list):
            group = parser.add_mutually_exclusive_group()
            for flag, keywords in entry:
                group.add_argument(flag, **keywords)
        elif entry[0] not in skip:
            parser.add_argument(entry[0], **entry[1])


def add_time_series_options(parser):
    """``kfold``'s ``--time-series`` and its options on *parser*."""
    for flag, keywords in TIME_SERIES:
        parser.add_argument(flag, **keywords)


def kfold_method(args):
    """``(UDF name, parameters)`` of a parsed ``kfold`` command: the
    ``timeseries`` UDF with ``--time-series`` (refusing the options that do
    not apply to it), else ``kfold`` (:func:`method_params`)."""
    if not args.time_series:
        if args.gap or args.test_size or args.max_train_size:
            raise ParameterError("--gap, --test-size and --max-train-size need --time-series")
        return "kfold", method_params("kfold", args)
    for name in ("naive", "balanced", "materialize", "stratify", "groups"):
        if getattr(args, name, None) not in (None, False):
            raise ParameterError(f"--{name} does not apply to --time-series folds (each "
                                 "training set is written as it is)")
    if args.balanced is False:
        raise ParameterError("--per-row does not apply to --time-series folds (they are "
                             "slices of the row order)")
    if args.repeats != 1:
        raise ParameterError("--repeats does not apply to --time-series folds (they have no "
                             "randomness to repeat)")
    return "timeseries", {"k": args.k, "gap": args.gap, "test_size": args.test_size,
                          "max_train_size": args.max_train_size}


def method_params(method, args):
    """The UDF parameters of built-in *method* from parsed *args* (the
    options :func:`add_method_options` put on their parser); exact sizes
    and balanced folds unless ``--per-row``."""
    params = {}
    for entry in OPTIONS[method]:
        for flag, keywords in (entry if isinstance(entry, list) else [entry]):
            name = keywords.get("dest", flag[2:].replace("-", "_"))
            if hasattr(args, name) and name not in params:
                value = getattr(args, name)
                params[name] = True if value is None and name in _CHOSEN else value
    return params
