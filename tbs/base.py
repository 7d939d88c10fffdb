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
from .errors import TBSError, TBSParameterError, check_int, check_items, check_real
from .latent import isin_items
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


# The state arrays that hold items (every sampler names them from this list).
ITEM_ARRAYS = ("full", "partial", "recent_full", "recent_partial", "cons_full", "cons_partial",
               "items", "overweight_items")


class Sampler(ABC):
    """Base class.  Subclasses implement ``_update(items, t, dt)``, ``sample()``,
    ``sample_weight``, ``total_weight`` and the ``_params``/``_save``/``_load`` hooks."""

    _randomized = True

    def __init__(self, seed=None):
        self._key = derive_key(seed) if self._randomized else None
        self._batches = 0
        self._time = None
        self._dtype = None
        self._ops = 0              # merges and resizes so far (each has its own draws)

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
        t = batch_time(self._time, time)
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

    # -- what is stored, erasure, probabilities --------------------------------
    def held(self):
        """Every item the sampler stores: the sample's and those that may
        still enter it (partial items, latent samples beyond the output cap).
        A new array, in no particular order."""
        parts = [self._empty()]
        for ls in self._latents():
            parts.append(ls.full())
            if ls.partial is not None:
                parts.append(ls.partial)
        return np.concatenate(parts)

    @property
    def footprint(self):
        """Number of items stored: ``len(held())`` without building it
        (samplers that override :meth:`held` override this too)."""
        return sum(ls.footprint() for ls in self._latents())

    def shift_items(self, offset):
        """Rename every stored item ``x`` (integer ids) to ``x + offset``, in
        place: the items of the state arrays named in ``ITEM_ARRAYS``, so that
        ``to_state()`` afterwards equals ``to_state()`` before with ``offset``
        added to those arrays.  Nothing else changes (weights, times, draws)."""
        if self._dtype is not None and self._dtype.kind not in "iu":
            raise TBSError(f"shift_items needs integer items, got dtype {self._dtype}")
        self._shift_items(offset)

    def _shift_items(self, offset):
        """Samplers that store items otherwise than in :meth:`_latents` override this."""
        for ls in self._latents():
            ls.buf[: ls.size] += offset
            if ls.partial is not None:
                ls.partial = ls.partial + offset

    def remove(self, items):
        """Erase every stored copy of ``items`` (a data-protection erasure);
        returns how many stored items were erased.

        No other item changes: each remaining item keeps the inclusion
        probability the sampler's guarantee gives it, now and at every later
        batch, and the size bound still holds.  The erased items' weight is
        not taken out of ``total_weight`` (so ``rho`` never rises because of
        an erasure); the expected sample size is lower by the erased items'
        inclusion probabilities."""
        arr = check_items(items)
        if self._dtype is None or not arr.size:
            return 0
        if arr.dtype != self._dtype:
            if not np.can_cast(arr.dtype, self._dtype, "same_kind"):
                raise TBSError(f"items to remove must have dtype {self._dtype} like the "
                               f"sampled items, got {arr.dtype}")
            arr = arr.astype(self._dtype)
        return self._remove(arr)

    def _latents(self):
        """The latent samples holding the stored items (samplers that store
        them otherwise override :meth:`held`)."""
        return []

    def _remove(self, items):
        raise TBSError(f"{type(self).__name__} does not support remove(): "
                       f"{self._no_remove_reason}")

    _no_remove_reason = "its guarantee does not survive erasing an item"

    def merge(self, other):
        """Fold ``other``'s sample into this one, in place, as if this sampler
        had seen both streams (whose items must be distinct); ``other`` is
        not changed.  The result is at the later of the two times, and every
        item has the inclusion probability the guarantee gives it in the
        combined stream.  Supported where the theory allows it with the
        stored state: R-TBS with exponential decay (same n and lambda) and
        T-TBS / B-TBS (same decay and q); anything else raises TBSError
        saying why."""
        if type(other) is not type(self):
            raise TBSError(f"merge needs two samplers of one kind, got {type(self).__name__} "
                           f"and {type(other).__name__}")
        if other._batches == 0:
            return self
        if self._batches == 0:
            raise TBSError("merge into a sampler that has seen no batch: merge the other way")
        if self._dtype != other._dtype:
            raise TBSError(f"merge needs items of one dtype, got {self._dtype} and "
                           f"{other._dtype}")
        mine = self.held()
        shared = mine[isin_items(mine, other.held())]
        if shared.size:
            raise TBSError(f"the two samplers hold {shared.size} common items (e.g. "
                           f"{shared[0]!r}): merge needs disjoint streams")
        self._merge(other, max(self._time, other._time))
        self._ops += 1
        return self

    def _merge(self, other, t):
        raise TBSError(f"{type(self).__name__} does not support merge(): "
                       f"{self._no_merge_reason}")

    _no_merge_reason = "its state does not determine a sample of the combined stream"

    def _op_generator(self, stream):
        """Draws of the next merge or resize at the current batch (apart from
        every update's)."""
        return self._generator(stream, sub=1 + self._ops)

    def resize(self, n):
        """Lower the sample size ``n`` now (e.g. to share a budget with a new
        stratum): the sample is downsampled so that every item's inclusion
        probability is that of a sampler of size ``n``, from here on.  Raising
        ``n`` is refused: items already discarded cannot come back."""
        if getattr(self, "n", None) is None:
            raise TBSError(f"{type(self).__name__} has no sample size to resize")
        n = check_int("n", n, 1)
        if n > self.n:
            raise TBSError(f"resize can only lower n (now {self.n}), got {n}")
        if n < self.n:
            self._resize(n)
            self._ops += 1

    def _resize(self, n):
        raise TBSError(f"{type(self).__name__} does not support resize()")

    def inclusion_probabilities(self, ages, joined=None):
        """Pr[x in S_k] for items of the given ages at the last batch, as
        the sampler's guarantee states it (an array like ``ages``).

        ``joined`` (R-TBS, general decay) holds, for each item, the age at
        which its batch joined the consolidated sample (NaN for recent
        batches); see :class:`~samplegen.tbs.StreamSample`, which tracks it.
        Ages are finite and non-negative, and a joining age lies between 0
        and its item's age: anything else is a TBSParameterError."""
        ages = _checked_ages("ages", ages)
        if joined is not None:
            joined = _checked_ages("joined", joined, missing=True)
            if joined.shape != ages.shape:
                raise TBSParameterError(f"joined must have the shape of ages {ages.shape}, "
                                        f"got {joined.shape}")
            late = np.flatnonzero(joined > ages)
            if late.size:
                i = int(late[0])
                raise TBSParameterError(f"joined[{i}] = {float(joined.flat[i])!r} is later than "
                                        f"its item's age {float(ages.flat[i])!r}")
        return self._inclusion_probabilities(ages, joined)

    def _inclusion_probabilities(self, ages, joined):
        """Implemented by the samplers that give one (checked arguments)."""
        raise TBSError(f"{type(self).__name__} gives no per-item inclusion probability")

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
        if self._ops:
            meta["ops"] = self._ops
        arrays = {}
        self._save(arrays, meta)
        return arrays, meta

    @classmethod
    def from_state(cls, arrays, meta, decay=None):
        """Rebuild a sampler from ``to_state()`` output.

        ``decay`` must be given again when the sampler used a custom callable
        that cannot be imported by ``module:name`` (a lambda, a closure, a
        function of ``__main__``); importable ones are stored by reference.
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
        obj._ops = int(meta.get("ops", 0))
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
                       "callable that cannot be imported by name (a lambda, a closure or a "
                       "function of __main__), so the state does not name it")
    return decay_from_json(params["decay"])


def get_array(arrays, name, dtype=None):
    if name not in arrays:
        raise TBSError(f"state arrays must contain {name!r}")
    arr = np.asarray(arrays[name])
    return arr if dtype is None else arr.astype(dtype, copy=False)


def batch_time(previous, time):
    """The arrival time of a batch given as *time* after one at *previous*
    (None: no batch yet): *time* itself, a finite number later than
    *previous*, or, when None, one unit after *previous* (1.0 first);
    anything else is a TBSParameterError."""
    if time is None:
        return 1.0 if previous is None else previous + 1.0
    t = check_real("time", time)
    if previous is not None and not t > previous:
        raise TBSParameterError(f"time must increase from batch to batch, got {time!r} "
                                f"after {previous!r}")
    return t


def _checked_ages(name, values, missing=False):
    """*values* as a float64 array of finite non-negative ages (NaN allowed
    where *missing*: a recent batch in ``joined``), else TBSParameterError."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise TBSParameterError(f"{name} must be numbers (ages), got {values!r:.60}") from None
    bad = ~(np.isfinite(arr) & (arr >= 0))
    if missing:
        bad &= ~np.isnan(arr)
    if np.any(bad):
        i = int(np.flatnonzero(bad.ravel())[0])
        raise TBSParameterError(f"{name} must be finite and >= 0, got {arr.ravel()[i]!r} "
                                f"at position {i}")
    return arr
