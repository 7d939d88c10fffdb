"""Exception types and argument checks shared by the tbs package.

:class:`TBSError` is one of samplegen's errors (:class:`SamplegenError`: one
line, exit status 2 on the command line); the argument checks below raise its
subclass :class:`TBSParameterError`, which is also a :class:`ParameterError`.
Every message names the offending parameter, echoes the value it received and
says what would have been accepted, e.g.
``n must be an integer >= 1, got 0``.
"""
import math
import numbers

import numpy as np

from samplegen.udfs.errors import InputError, OutputError, ParameterError, SamplegenError


class TBSError(SamplegenError, ValueError):
    """An argument or a saved state that a tbs sampler cannot accept."""


class TBSParameterError(TBSError, ParameterError):
    """An argument out of range or of the wrong type (the checks below)."""


def check_int(name, value, minimum=None):
    """Return ``value`` as a Python int, or raise TBSParameterError."""
    ok = isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool)
    if ok and (minimum is None or value >= minimum):
        return int(value)
    bound = "" if minimum is None else f" >= {minimum}"
    raise TBSParameterError(f"{name} must be an integer{bound}, got {value!r}")


def check_real(name, value, *, low=None, high=None,
               low_open=False, high_open=False):
    """Return ``value`` as a finite float inside the given interval, or raise
    TBSParameterError."""
    what = "a finite number"
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    if parts:
        what += " " + " and ".join(parts)
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TBSParameterError(f"{name} must be {what}, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise TBSParameterError(f"{name} must be {what}, got {value!r}")
    if low is not None and (x < low or (low_open and x == low)):
        raise TBSParameterError(f"{name} must be {what}, got {value!r}")
    if high is not None and (x > high or (high_open and x == high)):
        raise TBSParameterError(f"{name} must be {what}, got {value!r}")
    return x


def check_items(items):
    """Return the batch as a 1-D numpy array, or raise TBSParameterError."""
    if isinstance(items, np.ndarray):
        arr = items
    else:
        try:
            arr = np.asarray(items)
        except Exception as exc:  # pragma: no cover - numpy raises many types
            raise TBSParameterError(f"items must be a 1-D numpy array, "
                                    f"got {type(items).__name__}") from exc
    if arr.ndim != 1:
        raise TBSParameterError(f"items must be a 1-D numpy array, "
                                f"got an array of shape {arr.shape}")
    if arr.dtype == object:
        raise TBSParameterError("items must be a 1-D numpy array of ids or records, "
                                "got dtype object")
    return arr


class TBSInputError(TBSError, InputError):
    """A file that a tbs object wrote and reads back (a saved stream sample)
    is missing, unreadable or damaged; the message names the file."""


class TBSOutputError(TBSError, OutputError):
    """A tbs object cannot write where it was asked to (the path is a file,
    a directory of something else, or not writable); the message names it."""
