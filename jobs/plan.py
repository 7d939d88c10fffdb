"""The plan: everything a task needs to run the phases, and the one codec by
which plans travel from the driver to the tasks.

A sampling run's :class:`Plan` names the sampling-UDF and its parameters, the
seed, the matrix's shape and the shuffle bins.  It reaches the tasks in one
of two forms, both defined here and nowhere else:

* **JSON** (:func:`dumps` / :func:`loads`): the Spark engine ships it as a
  broadcast string; the MapReduce engine as a *plan file*
  (:func:`write_file` / :func:`read_file`: the JSON with its checksum,
  verified by every task that reads it, in whatever process); the
  micro-batch jobs of ``tbs/`` send their plans (plain dicts) the same way.
* **Command-line words** (:func:`add_options` / :func:`from_options`), for
  scripts whose only input is their command line: Hive's TRANSFORM scripts,
  whose HiveQL fills the words from ``--hivevar`` variables
  (:func:`format_params`, :func:`format_bin_bits` give those variables'
  text).  The words carry what the JSON carries except what a task derives
  again (sample names, fold composition, the UDF's seed).
"""
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np

from samplegen.udfs.custom import load_udf, parse_param
from samplegen.udfs.errors import InputError, ParameterError
from samplegen.udfs.rng import PositionRNG
from samplegen.udfs.strata import SIDES

from .store import digest
from .strata import open_side

DEFAULT_BIN_BUDGET = 16 << 20
MAX_BIN_BITS = 24

#: bytes per row of a shuffle record that carries rows by id only (the
#: Spark engine's id shuffle): its row id and relative position
KEY_ROW_BYTES = 16


@dataclass
class Plan:
    """Everything a task needs to run the phases."""

    udf: str                      # built-in name or module:function
    params: dict                  # UDF parameters
    seed: int
    rows: int
    cols: int
    block_size: int
    kind: str                     # "dense" or "sparse"
    output: str                   # directory (URI) receiving the sample matrices
    names: list = None            # sample names by id (None: sample-<id>)
    composed: list = field(default_factory=list)   # train-i names (fold mode)
    bin_bits: list = None         # per sample id; None: one value for all
    default_bin_bits: int = 0
    bin_budget: int = DEFAULT_BIN_BUDGET   # bytes of shuffle records per bin (--bin-mib)
    strata: str = None            # base URI of the rows' classes (jobs.strata; stratified runs)
    grouping: str = None          # base URI of the rows' groups (jobs.strata; grouped runs)
    weighting: str = None         # base URI of the rows' weights (jobs.strata; weighted runs)
    fold_group: int = 0           # folds per set for composition (phases.partners; 0: all)

    def to_json(self):
        return dumps(asdict(self))

    @classmethod
    def from_json(cls, text):
        return cls(**loads(text))

    # -- derived objects (built once per task) ------------------------------------
    def sampler(self):
        udf = getattr(self, "_udf_obj", None)
        if udf is None:
            sides = [open_side(base) if base else None
                     for base in (getattr(self, field) for field in SIDES)]
            udf = self._udf_obj = load_udf(self.udf, self.rows, self.params, *sides)
        return udf

    def rng(self):
        rng = getattr(self, "_rng_obj", None)
        if rng is None:
            rng = self._rng_obj = PositionRNG(self.seed)
        return rng

    def n_vblocks(self):
        return -(-self.cols // self.block_size)

    def block_cols(self, v):
        return min(self.block_size, self.cols - v * self.block_size)

    def sample_name(self, sample_id):
        if self.names is not None:
            return self.names[sample_id]
        return f"sample-{sample_id}"

    def bits_of(self, samples):
        """Bin bits for an array of sample ids."""
        if self.bin_bits is None:
            return np.full(samples.shape, self.default_bin_bits, np.int64)
        return np.asarray(self.bin_bits, np.int64)[samples]


def make_plan(udf, seed, meta, output, budget=DEFAULT_BIN_BUDGET):
    """The plan for running *udf* (a SamplingUDF) with *seed* over the matrix
    described by *meta* (its ``_matrix.json``), writing into *output*;
    *budget*: bytes of shuffle records per bin."""
    cols = min(meta["block_size"], meta["cols"])
    if meta["kind"] == "dense":
        row_bytes = 8 * cols + 16
    else:
        row_bytes = 12 * meta.get("nnz", meta["rows"] * cols) / max(meta["rows"], 1) + 24
    spec, params = udf.spec or (udf.name, udf.params())
    plan = Plan(udf=spec, params=params, seed=PositionRNG(seed).seed, rows=meta["rows"],
                cols=meta["cols"], block_size=meta["block_size"], kind=meta["kind"],
                output=output, names=udf.sample_names(),
                composed=list(udf.composed_names()), bin_budget=int(budget),
                fold_group=int(udf.fold_group()))
    plan._udf_obj = udf
    set_bins(plan, row_bytes)
    return plan


def bin_bits(expected_rows, row_bytes, budget=DEFAULT_BIN_BUDGET):
    """Number of relative-position bits that select a shuffle bin."""
    total = expected_rows * row_bytes
    if total <= budget:
        return 0
    return min(MAX_BIN_BITS, math.ceil(math.log2(total / budget)))


def set_bins(plan, row_bytes):
    """Choose the plan's shuffle bins so that one bin of a sample holds about
    ``plan.bin_budget`` bytes of shuffle records of *row_bytes* per row.  Bins only
    split the shuffle (by the top bits of the relative position); the
    samples are the same whatever their number."""
    if plan.names is None:
        plan.bin_bits, plan.default_bin_bits = None, bin_bits(plan.rows, row_bytes, plan.bin_budget)
    else:
        udf = plan.sampler()
        plan.bin_bits = [bin_bits(udf.expected_rows(i), row_bytes, plan.bin_budget)
                         for i in range(len(plan.names))]


# ---------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------
def dumps(plan):
    """The JSON text of a plan (a dict of JSON values), keys sorted."""
    return json.dumps(plan, sort_keys=True, separators=(",", ":"))


def loads(text):
    """The plan (dict) that :func:`dumps` wrote."""
    return json.loads(text)


def write_file(path, plan):
    """Write *plan* (a dict of JSON values) as the plan file *path* (local):
    ``{"checksum": "sha256:...", "plan": plan}``, the checksum the
    :func:`jobs.store.digest` of the plan (NaN and infinities allowed, as
    :func:`dumps` allows them), which :func:`read_file` verifies."""
    text = dumps({"checksum": digest(plan, strict=False), "plan": plan})
    with open(path, "w") as f:
        f.write(text)


def read_file(path):
    """The plan (dict) of the plan file *path* that :func:`write_file`
    wrote, verified: JSON of that shape whose checksum matches the plan,
    else InputError naming the file (a task given a damaged plan fails with
    that one line)."""
    def damaged(why):
        return InputError(f"damaged plan file {path}: {why}; the run's scratch files were "
                          "changed while it ran: run the command again")

    try:
        with open(path, "rb") as f:
            document = loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise InputError(f"plan file not found: {path}") from None
    except (ValueError, UnicodeDecodeError):
        raise damaged("not JSON") from None
    if not (isinstance(document, dict) and set(document) == {"checksum", "plan"}
            and isinstance(document["plan"], dict)):
        raise damaged('not {"checksum": ..., "plan": {...}}')
    plan = document["plan"]
    if document["checksum"] != digest(plan, strict=False):
        raise damaged("its content does not match its checksum")
    return plan


# ---------------------------------------------------------------------------
# command-line words
# ---------------------------------------------------------------------------
def add_options(parser):
    """Add the options that carry a :class:`Plan` to an argparse *parser*."""
    parser.add_argument("--udf", required=True)
    parser.add_argument("--params", default="", help="KEY=VALUE[,KEY=VALUE...]")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--cols", type=int, required=True)
    parser.add_argument("--block-size", type=int, required=True)
    parser.add_argument("--kind", choices=("dense", "sparse"), required=True)
    parser.add_argument("--bin-bits", default="0",
                        help="shuffle-bin bits: one value for every sample, or one per sample")
    for side, what in (("strata", "class"), ("grouping", "group"), ("weighting", "weight")):
        parser.add_argument(f"--{side}", default="none",
                            help=f"base path of the rows' {what} files (jobs.strata), or none")


def from_options(args, output=""):
    """The :class:`Plan` that the options of :func:`add_options` describe,
    writing into *output*."""
    params = parse_params(args.params)
    sides = {}
    for name, param in SIDES.items():
        base = getattr(args, name, "none")
        if base != "none":      # the column's name travels in its class files
            sides[name] = (base, open_side(base))
            params.setdefault(param, sides[name][1].label)
    udf = load_udf(args.udf, args.rows, params, *(sides.get(n, (None, None))[1] for n in SIDES))
    meta = {"rows": args.rows, "cols": args.cols, "block_size": args.block_size,
            "kind": args.kind}
    plan = make_plan(udf, args.seed, meta, output)
    for name, (base, _) in sides.items():
        setattr(plan, name, base)
    try:
        bits = [int(b) for b in args.bin_bits.split(",")]
    except ValueError:
        raise ParameterError(f"--bin-bits must be integers, got {args.bin_bits!r}") from None
    if any(not 0 <= b <= MAX_BIN_BITS for b in bits):
        raise ParameterError(f"--bin-bits must be in [0, {MAX_BIN_BITS}], got {args.bin_bits!r}")
    if len(bits) == 1:
        plan.bin_bits, plan.default_bin_bits = None, bits[0]
    elif plan.names is not None and len(bits) == len(plan.names):
        plan.bin_bits = bits
    else:
        raise ParameterError(f"--bin-bits needs one value or one per sample, got {len(bits)}")
    return plan


def parse_params(text):
    """``KEY=VALUE,...`` (the ``--params`` word) as a dict."""
    return dict(parse_param(item) for item in text.split(",") if item)


def format_params(params):
    """``KEY=VALUE,...`` that :func:`parse_params` turns back into *params*
    (same values and types), or ParameterError."""
    items = []
    for key in sorted(params):
        value = params[key]
        text = _format_param(value)
        back = parse_param(f"{key}={text}")
        if "," in text or back != (key, value) or type(back[1]) is not type(value):
            raise ParameterError(f"parameter {key}={value!r} does not survive the trip to a "
                                 "TRANSFORM script's command line")
        items.append(f"{key}={text}")
    return ",".join(items)


def format_bin_bits(plan):
    """The ``--bin-bits`` word of *plan*."""
    if plan.bin_bits is None:
        return str(plan.default_bin_bits)
    bits = [int(b) for b in plan.bin_bits]
    return str(bits[0]) if len(set(bits)) == 1 else ",".join(map(str, bits))


def _format_param(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)
