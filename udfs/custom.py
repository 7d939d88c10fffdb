"""User sampling-UDFs: loading by ``module:function`` and the scalar adapter.

Three shapes of user code are accepted:

* a :class:`~udfs.base.SamplingUDF` subclass, instantiated as
  ``cls(n_rows, **params)``;
* a vectorized function ``f(start, stop, rng, params)`` returning
  ``(offset, sample, relpos)`` arrays for the rows ``[start, stop)``
  (``rng`` is a :class:`~udfs.rng.PositionRNG`; draw from
  ``stream(Purpose.USER, k)`` streams);
* a scalar function in the paper's form, ``f(row_id, rng, params)``
  returning an iterable of ``(sample_id, relative_pos)``, marked with the
  :func:`scalar_udf` decorator.  ``rng`` is a :class:`~udfs.rng.SkipAheadRNG`
  (``skip``, ``random``, ``binomial``), positioned at element ``row_id`` of
  its sequence; ``relative_pos`` is a float in [0, 1)
  or a non-negative integer below 2**64.  Scalar UDFs run one Python call per
  row: convenient for prototyping, slow on big inputs.

A function may carry a ``sample_names`` attribute (a list, or a callable
``(params, n_rows) -> list``) to name its samples; otherwise sample ``i`` is
called ``sample-<i>``.
"""
import argparse
import contextlib
import importlib
import inspect
import sys

import numpy as np

from .base import Occurrences, SamplingUDF, UDFError, check_sample_names
from .builtin import Bootstrap, HoldOut, KFold, TimeSeries
from .errors import MissingParameterError, ParameterError
from .rng import SkipAheadRNG, check_seed
from .strata import SIDES
from .weighted import Weighted

BUILTIN = {"holdout": HoldOut, "kfold": KFold, "bootstrap": Bootstrap,
           "timeseries": TimeSeries, "weighted": Weighted}

_SCALAR_MARK = "__samplegen_scalar__"


def scalar_udf(func):
    """Mark *func* as a scalar sampling-UDF ``f(row_id, rng, params)``."""
    setattr(func, _SCALAR_MARK, True)
    return func


def _names_for(func, params, n_rows):
    names = getattr(func, "sample_names", None)
    if callable(names):
        names = names(params, n_rows)
    if isinstance(names, str):
        raise UDFError(f"sample_names of {func.__name__!r} must be a list of names, "
                       f"got the string {names!r}")
    return None if names is None else list(names)


def _needs(spec, key):
    return MissingParameterError(f"UDF {spec} needs parameter {key!r} (--param {key}=VALUE)")


class UDFParams(dict):
    """The parameters a user function receives: ``params["p"]`` for a
    parameter nobody gave is a :class:`MissingParameterError` naming it and
    the UDF (a KeyError too); ``params.get("p", default)`` is unchanged."""

    def __init__(self, params, spec):
        super().__init__(params)
        self.spec = spec

    def __missing__(self, key):
        raise _needs(self.spec, key)


class FunctionUDF(SamplingUDF):
    """A vectorized user function ``f(start, stop, rng, params)``."""

    def __init__(self, n_rows, func, params, spec):
        super().__init__(n_rows)
        self.func = func
        self.user_params = UDFParams(params, spec)
        self.name = spec
        self._names = _names_for(func, self.user_params, self.n_rows)

    def sample_names(self):
        return self._names

    def params(self):
        return dict(self.user_params)

    def occurrences(self, start, stop, rng):
        return self.func(start, stop, rng, self.user_params)


def _relpos_word(value):
    if isinstance(value, (float, np.floating)):
        if not 0.0 <= value < 1.0:
            raise UDFError(f"scalar UDF returned relative position {value!r}; "
                           "floats must be in [0, 1)")
        return min(int(value * 2.0 ** 64), (1 << 64) - 1)
    value = int(value)
    if not 0 <= value < 1 << 64:
        raise UDFError(f"scalar UDF returned relative position {value}; "
                       "integers must be in [0, 2**64)")
    return value


class ScalarUDF(FunctionUDF):
    """Adapter for the paper's per-row signature ``f(row_id, rng, params)``."""

    def occurrences(self, start, stop, rng):
        return self._rows(range(start, stop), rng)

    def occurrences_at(self, positions, rng):
        """Keyed rows: the function sees each row's key as its row id."""
        positions = np.asarray(positions)
        with contextlib.redirect_stdout(sys.__stderr__ or sys.stderr):
            occ = self._rows(positions.tolist(), rng)
        return self._checked(occ, positions.shape[0])

    def _rows(self, rows, rng):
        """Occurrences of *rows* (row ids); offsets index *rows*."""
        seq = SkipAheadRNG(rng)
        offset, sample, relpos = [], [], []
        for index, row in enumerate(rows):
            seq.skip(row)  # the UDF may skip elsewhere, as the paper's UDFs do
            for occ in self.func(row, seq, self.user_params) or ():
                try:
                    sample_id, rel = occ
                except (TypeError, ValueError):
                    raise UDFError(f"scalar UDF {self.name!r} must yield (sample_id, "
                                   f"relative_pos) pairs, got {occ!r}") from None
                offset.append(index)
                sample.append(int(sample_id))
                relpos.append(_relpos_word(rel))
        return Occurrences(np.array(offset, np.int64), np.array(sample, np.int64),
                           np.array(relpos, np.uint64))


def parse_param(text):
    """Turn a ``KEY=VALUE`` string into (key, value) with int/float/bool/str value."""
    if "=" not in text:
        raise ParameterError(f"--param must look like KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    key = key.strip()
    if not key.isidentifier():
        raise ParameterError(f"--param key must be an identifier, got {key!r}")
    for convert in (int, float):
        try:
            number = convert(value)
        except ValueError:
            continue
        if number != number or number in (float("inf"), float("-inf")):
            raise ParameterError(f"--param {key}: {value!r} is not a finite number")
        return key, number
    if value.lower() in ("true", "false"):
        return key, value.lower() == "true"
    return key, value


def parse_seed(text):
    """A ``--seed`` on the command line (an argparse type): an integer in
    [0, 2**64)."""
    try:
        return check_seed(int(text))
    except ValueError:  # ParameterError included
        raise argparse.ArgumentTypeError(f"seed must be an integer in [0, 2**64), "
                                         f"got {text!r}") from None


def load_udf(spec, n_rows, params=None, strata=None, grouping=None, weighting=None):
    """Instantiate the sampling-UDF named by *spec* for a matrix of *n_rows*.

    *spec* is a built-in name (``holdout``, ``kfold``, ``bootstrap``,
    ``weighted``) or ``module:attribute``.  *strata* and *grouping*
    (:class:`udfs.strata.Strata`): the classes and the groups of the rows,
    for a built-in UDF with a ``stratify`` or a ``groups`` parameter;
    *weighting* (:class:`udfs.weighted.RowWeights`): their weights, for one
    with ``weights``.
    """
    params = dict(params or {})
    given = {"strata": strata, "grouping": grouping, "weighting": weighting}
    for keyword, param in SIDES.items():
        if params.get(param) is not None and spec in BUILTIN:
            params[keyword] = given[keyword]
    udf = _load(spec, n_rows, params)
    for keyword in SIDES:
        params.pop(keyword, None)
    check_sample_names((udf.sample_names() or []) + list(udf.composed_names()), spec)
    # How tasks on other machines rebuild it (built-ins: with every default filled in).
    udf.spec = (spec, udf.params() if spec in BUILTIN else params)
    return udf


def _load(spec, n_rows, params):
    if spec in BUILTIN:
        return _construct(BUILTIN[spec], n_rows, params, spec)
    if ":" not in spec:
        raise ParameterError(f"unknown UDF {spec!r}: use one of {', '.join(sorted(BUILTIN))} "
                             "or MODULE:FUNCTION")
    module_name, attr = spec.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ParameterError(f"unknown UDF {spec!r}: cannot import module "
                             f"{module_name!r} ({exc})") from None
    target = getattr(module, attr, None)
    if target is None:
        raise ParameterError(f"unknown UDF {spec!r}: module {module_name!r} has no "
                             f"attribute {attr!r}")
    if inspect.isclass(target) and issubclass(target, SamplingUDF):
        return _construct(target, n_rows, params, spec)
    if not callable(target):
        raise ParameterError(f"UDF {spec!r} is neither a SamplingUDF class nor a function")
    if getattr(target, _SCALAR_MARK, False):
        return ScalarUDF(n_rows, target, params, spec)
    return FunctionUDF(n_rows, target, params, spec)


def udf_source(udf):
    """``(root, top_name)`` locating a user UDF's code, so engines can make
    it importable on their tasks (``root`` on PYTHONPATH, or ``root/top_name``
    shipped); None for built-in UDFs and code without a file."""
    import os
    import sys
    spec = (udf.spec or (udf.name, None))[0]
    if spec in BUILTIN or ":" not in spec:
        return None
    top = spec.split(":", 1)[0].split(".")[0]
    if top == "samplegen":  # shipped with samplegen itself
        return None
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None)
    if not path:
        return None
    path = os.path.abspath(path)
    if os.path.basename(path) == "__init__.py":
        return os.path.dirname(os.path.dirname(path)), top
    return os.path.dirname(path), top


def _missing_arguments(cls, n_rows, params):
    """Required keyword parameters of ``cls(n_rows, ...)`` that *params* lacks."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # no signature to inspect
        return []
    try:
        signature.bind(n_rows, **params)
    except TypeError:
        required = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
        return [name for name, p in list(signature.parameters.items())[1:]
                if p.kind in required and p.default is p.empty and name not in params]
    return []


def _construct(cls, n_rows, params, spec):
    missing = _missing_arguments(cls, n_rows, params)
    if missing:
        raise _needs(spec, missing[0])
    try:
        return cls(n_rows, **params)
    except TypeError as exc:
        raise ParameterError(f"bad parameters for UDF {spec!r}: {exc}") from None
