"""Exception type and argument checks shared by the tbs package.

Every message names the offending parameter, echoes the value it received and
says what would have been accepted, e.g.
``n must be an integer >= 1, got 0``.
"""
from __future__ import annotations

import math
import numbers

import numpy as np


class TBSError(ValueError):
    """An argument or a saved state that a tbs sampler cannot accept."""


def check_int(name: str, value, minimum: int | None = None) -> int:
    """Return ``value`` as a Python int, or raise TBSError."""
    ok = isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, bool)
    if ok and (minimum is None or value >= minimum):
        return int(value)
    bound = "" if minimum is None else f" >= {minimum}"
    raise TBSError(f"{name} must be an integer{bound}, got {value!r}")


def check_real(name: str, value, *, low: float | None = None, high: float | None = None,
               low_open: bool = False, high_open: bool = False) -> float:
    """Return ``value`` as a finite float inside the given interval, or raise TBSError."""
    what = "a finite number"
    parts = []
    if low is not None:
        parts.append(f"{'>' if low_open else '>='} {low:g}")
    if high is not None:
        parts.append(f"{'<' if high_open else '<='} {high:g}")
    if parts:
        what += " " + " and ".join(parts)
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TBSError(f"{name} must be {what}, got {value!r}")
    x = float(value)
    if not math.isfinite(x):
        raise TBSError(f"{name} must be {what}, got {value!r}")
    if low is not None and (x < low or (low_open and x == low)):
        raise TBSError(f"{name} must be {what}, got {value!r}")
    if high is not None and (x > high or (high_open and x == high)):
        raise TBSError(f"{name} must be {what}, got {value!r}")
    return x


def check_items(items) -> np.ndarray:
    """Return the batch as a 1-D numpy array, or raise TBSError."""
    if isinstance(items, np.ndarray):
        arr = items
    else:
        try:
            arr = np.asarray(items)
        except Exception as exc:  # pragma: no cover - numpy raises many types
            raise TBSError(f"items must be a 1-D numpy array, got {type(items).__name__}") from exc
    if arr.ndim != 1:
        raise TBSError(f"items must be a 1-D numpy array, got an array of shape {arr.shape}")
    if arr.dtype == object:
        raise TBSError("items must be a 1-D numpy array of ids or records, got dtype object")
    return arr
