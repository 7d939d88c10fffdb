"""Sliding window: the most recent n items (by arrival; within a batch, the
last items of the array)."""
import numpy as np

from .base import Sampler, get_array
from .errors import check_int

__all__ = ["SlidingWindow"]


class SlidingWindow(Sampler):
    """The last ``n`` items seen (deterministic; ``time`` is only validated)."""

    _randomized = False

    def __init__(self, n):
        super().__init__(None)
        self.n = check_int("n", n, 1)
        self._ring = None      # circular buffer, grown up to capacity n as items arrive
        self._start = 0        # index of the oldest item
        self._size = 0
        self._seen = 0

    @property
    def sample_weight(self):
        return float(self._size)

    @property
    def total_weight(self):
        """The number of items seen so far."""
        return float(self._seen)

    def _update(self, items, t, dt):
        b = int(items.size)
        self._seen += b
        if b == 0:
            return
        n = self.n
        if b >= n:
            self._ring = items[b - n:].copy()
            self._start, self._size = 0, n
            return
        self._grow(min(n, self._size + b), items.dtype)
        cap = self._ring.size
        end = (self._start + self._size) % cap
        first = min(b, cap - end)
        self._ring[end:end + first] = items[:first]
        self._ring[:b - first] = items[first:]
        overflow = max(0, self._size + b - cap)
        self._start = (self._start + overflow) % cap
        self._size = min(cap, self._size + b)

    def _grow(self, needed, dtype):
        """Make the ring hold at least *needed* items (at most n): memory
        follows the items seen, not the window's size, so a huge n costs
        nothing until that many items arrive."""
        if self._ring is not None and self._ring.size >= needed:
            return
        have = 0 if self._ring is None else self._ring.size
        ring = np.empty(min(self.n, max(needed, 2 * have)),
                        dtype=dtype if self._ring is None else self._ring.dtype)
        ring[: self._size] = self.sample()
        self._ring, self._start = ring, 0

    def sample(self):
        """The window, oldest item first (a new array)."""
        if self._ring is None:
            return self._empty()
        return self._ring[self._positions()]

    def _positions(self):
        """Ring positions of the window, oldest item first."""
        return (self._start + np.arange(self._size)) % max(1, self._ring.size)

    def held(self):
        return self.sample()

    @property
    def footprint(self):
        return self._size

    def _shift_items(self, offset):
        if self._size:
            self._ring[self._positions()] += offset

    def _remove(self, items):
        from .latent import isin_items
        window = self.sample()
        hit = isin_items(window, items)
        erased = int(np.count_nonzero(hit))
        if erased:
            kept = window[~hit]
            self._ring[: kept.size] = kept
            self._start, self._size = 0, int(kept.size)
        return erased

    def _inclusion_probabilities(self, ages, joined):
        """1 for every item in the window."""
        return np.ones(np.shape(ages))

    def _params(self):
        return {"n": self.n}

    @classmethod
    def _from_params(cls, params, decay):
        return cls(params["n"])

    def _save(self, arrays, meta):
        arrays["items"] = self.sample()
        meta["seen"] = self._seen

    def _load(self, arrays, meta):
        items = get_array(arrays, "items")
        self._seen = int(meta["seen"])
        if items.size or self._dtype is not None:
            self._ring = items.copy()
            self._start, self._size = 0, int(items.size)
