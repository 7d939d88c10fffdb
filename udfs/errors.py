"""Exception types shared by every layer of samplegen.

The command line turns any :class:`SamplegenError` into one line on stderr and
its ``exit_status`` (2 for bad input); the Python API lets them propagate.
Messages name the parameter or file, echo the offending value, and say what
is allowed.
"""


class SamplegenError(Exception):
    """Base class of samplegen's errors: one line, no traceback needed.
    ``exit_status`` is what the command line exits with (2: bad input)."""

    exit_status = 2


class ParameterError(SamplegenError, ValueError):
    """A parameter is out of range or of the wrong type."""


class MissingParameterError(ParameterError, KeyError):
    """A sampling-UDF read a parameter nobody gave it (``params["p"]``
    without ``--param p=...``).  Also a KeyError, so a UDF that catches
    KeyError to fall back on a default keeps working."""

    def __str__(self):  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class InputError(SamplegenError):
    """Input data is missing, unreadable, corrupt, or not a matrix."""


class OutputError(SamplegenError):
    """The destination cannot be written (exists, not empty, ...)."""


class EngineError(SamplegenError):
    """An engine's tasks did not all do their work although none reported a
    failure (a task ended early with status 0, a report is missing): nothing
    was committed.  The command line exits with status 1."""

    exit_status = 1


def check_bool(name, value):
    """Return *value* as a bool (True, False, or numpy's), or raise
    ParameterError naming *name*: never the truth of a string or a number."""
    kind = type(value)
    if kind is bool or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")):
        return bool(value)
    raise ParameterError(f"{name} must be true or false, got {value!r}")


def check_int(name, value, lo=None, hi=None):
    """Return *value* as an int, or raise ParameterError naming *name*."""
    if isinstance(value, bool):
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be an integer, got {value!r}") from None
    if isinstance(value, float) and value != as_int:
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    text = value.strip() if isinstance(value, str) else None
    if text is not None and text != str(as_int) and not text.lstrip("+").isdigit():
        raise ParameterError(f"{name} must be an integer, got {value!r}")
    if lo is not None and as_int < lo:
        raise ParameterError(f"{name} must be >= {lo}, got {as_int}")
    if hi is not None and as_int > hi:
        raise ParameterError(f"{name} must be <= {hi}, got {as_int}")
    return as_int


def check_fraction(name, value):
    """Return *value* as a float in (0, 1], or raise ParameterError."""
    try:
        as_float = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number in (0, 1], got {value!r}") from None
    if not 0.0 < as_float <= 1.0:  # also rejects NaN
        raise ParameterError(f"{name} must be in (0, 1], got {value!r}")
    return as_float


def count_words(n, one, many):
    """``"1 block"``, ``"3 blocks"``: a count for a message, in words."""
    return f"{n} {one if n == 1 else many}"
