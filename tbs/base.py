"""Common machinery of the samplers: batch/time bookkeeping, per-batch
generators, item dtype handling and the state format.

State format: ``to_state()`` returns ``(arrays, meta)`` where ``arrays`` maps
names to numpy arrays (items keep their dtype, so structured records survive
``np.savez`` / ``np.load(allow_pickle=False)``) and ``meta`` is a dict of JSON
values (floats round-trip exactly through ``json``).  ``from_state(arrays,
meta)`` rebuilds a sampler that continues exactly as the original would have:
all randomness is derived from (seed, batch number, stream) by
:mod:`samplegen.udfs.rng` (see :mod:`.randomness`), so no generator state is
stored; ``meta["entropy"]`` is the seed (a fresh one for ``seed=None``).
"""
from abc import ABC, abstractmethod

import numpy as np

from .decay import as_decay, decay_from_json
from .errors import TBSError, check_items, check_real
from .randomness import batch_generator, derive_key

STATE_VERSION = 1


def dtype_to_json(dtype):
    if dtype is None:
        return None
    return np.lib.format.dtype_to_descr(np.dtype(dtype))


def _descr_from_json(descr):
    if isinstance(descr, str):
        return descr
    fields = []
    for field in descr:
        name = field[0] if isinstance(field[0], str) else tuple(field[0])
        typ = _descr_from_json(field[1])
        fields.append((name, typ, tuple(field[2])) if len(field) == 3 else (name, typ))
    return fields


def dtype_from_json(descr):
    if descr is None:
        return None
    return np.lib.format.descr_to_dtype(_descr_from_json(descr))


class Sampler(ABC):
    """Base class.  Subclasses implement ``_update(items, t, dt)``, ``sample()``,
    ``sample_weight``, ``total_weight`` and the ``_params``/``_save``/``_load`` hooks."""

    _randomized = True

    def __init__(self, seed=None):
        self._key = derive_key(seed) if self._randomized else None
        self._batches = 0
        self._time = None
        self._dtype = None

    # -- batch bookkeeping -------------------------------------------------
    @property
    def batches(self):
        """Number of batches processed so far (k)."""
        return self._batches

    @property
    def time(self):
        """Arrival time t_k of the last batch (None before the first batch)."""
        return self._time

    def _generator(self, stream, sub=0):
        """The draws of the current batch for (stream, sub) (tbs.randomness.batch_generator)."""
        return batch_generator(self._key, self._batches, stream, sub)

    def _prepare(self, items, time):
        """Validate a batch; returns (items, t, dt) without changing the state."""
        arr = check_items(items)
        if time is None:
            t = 1.0 if self._time is None else self._time + 1.0
        else:
            t = check_real("time", time)
        if self._time is not None and not t > self._time:
            raise TBSError(f"time must increase from batch to batch, "
                           f"got {time!r} after {self._time!r}")
        if arr.size:
            if self._dtype is None:
                pass
            elif arr.dtype != self._dtype:
                if np.can_cast(arr.dtype, self._dtype, "safe"):
                    arr = arr.astype(self._dtype)
                else:
                    raise TBSError(f"items must have dtype {self._dtype} like the earlier batches, "
                                   f"got {arr.dtype}")
        dt = None if self._time is None else t - self._time
        return arr, t, dt

    def update(self, items, time=None):
        """Process batch B_k (a 1-D array of items) arriving at ``time``.

        ``time`` defaults to the previous time + 1 (1.0 for the first batch)
        and must increase strictly from batch to batch.
        """
        arr, t, dt = self._prepare(items, time)
        if arr.size and self._dtype is None:
            self._dtype = arr.dtype
        self._batches += 1
        self._time = t
        self._update(arr, t, dt)

    def _empty(self):
        return np.empty(0, dtype=self._dtype if self._dtype is not None else np.int64)

    @abstractmethod
    def _update(self, items, t, dt):
        """Implemented by every concrete class."""

    @abstractmethod
    def sample(self):
        """Implemented by every concrete class."""

    # -- state -----------------------------------------------------------------
    def to_state(self):
        """Return ``(arrays, meta)``: numpy arrays and a JSON-able dict."""
        meta = {
            "class": type(self).__name__,
            "version": STATE_VERSION,
            "entropy": self._key,
            "batches": self._batches,
            "time": self._time,
            "dtype": dtype_to_json(self._dtype),
            "params": self._params(),
        }
        arrays = {}
        self._save(arrays, meta)
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, decay=None):
        """Rebuild a sampler from ``to_state()`` output.

        ``decay`` must be given again when the sampler used a custom callable
        (which cannot be stored as JSON).
        """
        if not isinstance(meta, dict) or meta.get("class") != cls.__name__:
            got = meta.get("class") if isinstance(meta, dict) else meta
            raise TBSError(f"state must come from {cls.__name__}.to_state(), got class {got!r}")
        if meta.get("version") != STATE_VERSION:
            raise TBSError(f"state version must be {STATE_VERSION}, got {meta.get('version')!r}")
        obj = cls._from_params(meta["params"], decay)
        if cls._randomized:
            try:
                obj._key = derive_key(meta["entropy"])
            except TBSError:
                raise TBSError(f"state entropy (the seed) must be an integer in [0, 2**64), "
                               f"got {meta['entropy']!r}") from None
        obj._batches = int(meta["batches"])
        obj._time = None if meta["time"] is None else float(meta["time"])
        obj._dtype = dtype_from_json(meta["dtype"])
        obj._load(arrays, meta)
        return obj

    @abstractmethod
    def _params(self):
        """Implemented by every concrete class."""

    @classmethod
    @abstractmethod
    def _from_params(cls, params, decay):
        """Implemented by every concrete class."""

    @abstractmethod
    def _save(self, arrays, meta):
        """Implemented by every concrete class."""

    @abstractmethod
    def _load(self, arrays, meta):
        """Implemented by every concrete class."""


def decay_params(decay):
    spec = decay.to_json()
    return {"decay": spec}


def restore_decay(params, decay):
    """The decay for from_state: the stored spec, or the one passed by the caller."""
    if decay is not None:
        return as_decay(decay)
    if params.get("decay") is None:
        raise TBSError("decay must be passed to from_state(): the sampler used a custom "
                       "callable, which is not stored in the state")
    return decay_from_json(params["decay"])


def get_array(arrays, name, dtype=None):
    if name not in arrays:
        raise TBSError(f"state arrays must contain {name!r}")
    arr = np.asarray(arrays[name])
    return arr if dtype is None else arr.astype(dtype, copy=False)
