"""The built-in sampling methods' command-line options, one home for every
command set that runs them (``samplegen holdout ...``, ``samplegen hive
holdout ...``): the options on a parser, and the UDF parameters they make."""

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
    ],
    "kfold": [
        ("--k", dict(type=int, required=True, help="number of folds (2 <= k <= rows)")),
        ("--naive", dict(action="store_true",
                         help="materialize all k training sets instead of composing them")),
        ("--balanced", dict(action="store_true",
                            help="fold sizes that differ by at most one, every such partition "
                                 "equally likely (default: an independent fold per row)")),
    ],
    "bootstrap": [
        ("--samples", dict(type=int, required=True, help="number of samples N")),
        ("--size", dict(type=int, default=None, help="rows per sample (default: all)")),
        ("--oob", dict(action="store_true",
                       help="also write each bag's out-of-bag rows (drawn 0 times) as oob-<i>")),
    ],
}


def add_method_options(parser, method):
    """The options of built-in *method* on *parser*."""
    for flag, keywords in OPTIONS[method]:
        parser.add_argument(flag, **keywords)


def method_params(method, args):
    """The UDF parameters of built-in *method* from parsed *args*."""
    names = (flag[2:].replace("-", "_") for flag, _ in OPTIONS[method])
    return {name: getattr(args, name) for name in names}
