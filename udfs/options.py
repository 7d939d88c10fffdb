"""The built-in sampling methods' command-line options, one home for every
command set that runs them (``samplegen holdout ...``, ``samplegen hive
holdout ...``): the options on a parser, and the UDF parameters they make."""

def _stratify(what):
    return ("--stratify", dict(default=None, metavar="LABEL",
                               help=f"{what}, within one row (LABEL: a column name or number; "
                                    "implies exact sizes)"))


#: per built-in method: (flags, add_argument keywords), in the order of --help
OPTIONS = {
    "holdout": [
        ("--ratio", dict(type=float, required=True, help="training share, in (0, 1]")),
        ("--repeats", dict(type=int, default=1, help="number of pairs W (default 1)")),
        ("--fraction", dict(type=float, default=1.0,
                            help="use only this share of the rows, in (0, 1] (default 1)")),
        ("--exact", dict(action="store_true",
                         help="exact sizes: round(ratio x rows) training rows, the rest test, "
                              "every such split equally likely (default: an independent coin "
                              "per row)")),
        _stratify("each side holds every class of column LABEL in proportion"),
    ],
    "kfold": [
        ("--k", dict(type=int, required=True, help="number of folds (2 <= k <= rows)")),
        ("--naive", dict(action="store_true",
                         help="materialize all k training sets instead of composing them")),
        ("--balanced", dict(action="store_true",
                            help="fold sizes that differ by at most one, every such partition "
                                 "equally likely (default: an independent fold per row)")),
        _stratify("every fold holds every class of column LABEL in proportion"),
    ],
    "bootstrap": [
        ("--samples", dict(type=int, required=True, help="number of samples N")),
        ("--size", dict(type=int, default=None, help="rows per sample (default: all)")),
        ("--oob", dict(action="store_true",
                       help="also write each bag's out-of-bag rows (drawn 0 times) as oob-<i>")),
        _stratify("every bag holds every class of column LABEL in proportion"),
    ],
}


def add_method_options(parser, method, skip=()):
    """The options of built-in *method* on *parser*, but the flags *skip*."""
    for flag, keywords in OPTIONS[method]:
        if flag not in skip:
            parser.add_argument(flag, **keywords)


def method_params(method, args):
    """The UDF parameters of built-in *method* from parsed *args* (the
    options :func:`add_method_options` put on their parser)."""
    names = (flag[2:].replace("-", "_") for flag, _ in OPTIONS[method])
    return {name: getattr(args, name) for name in names if hasattr(args, name)}
