"""Batched reservoir sampling (B-RS, Algorithm 2): a uniform sample of at most
n of all items seen so far, updated a batch at a time.

When batch B_k arrives and the W_{k-1} earlier items do not all fit, the number
M of new items in the sample is hypergeometric (n draws from |B_k| new and
W_{k-1} old items); M uniformly chosen new items are accepted, filling free
slots first and otherwise overwriting uniformly chosen victims.  (The paper's
pseudocode for Algorithm 2 is lost in the source text; this follows its prose
description and the proof in Appendix B.)
"""

import numpy as np

from .base import Sampler, get_array
from .errors import check_int
from .latent import LatentSample
from .randomness import STREAM_APPLY, STREAM_DECIDE, choose, hypergeometric

__all__ = ["BatchedReservoir"]


class BatchedReservoir(Sampler):
    """Uniform reservoir of at most ``n`` items (B-RS); ``time`` is accepted for a
    uniform API but does not influence the sample."""

    def __init__(self, n, seed=None):
        super().__init__(seed)
        self.n = check_int("n", n, 1)
        self._seen = 0
        self._res = None

    @property
    def sample_weight(self):
        return float(0 if self._res is None else self._res.size)

    @property
    def total_weight(self):
        """W_k: the number of items seen so far."""
        return float(self._seen)

    def _update(self, items, t, dt):
        b = int(items.size)
        if b == 0:
            return
        if self._res is None:
            self._res = LatentSample(items.dtype)
        res = self._res
        seen = self._seen
        self._seen = seen + b
        if seen + b <= self.n:
            res.append(items)
            return
        accepted = hypergeometric(self._generator(STREAM_DECIDE), b, seen, self.n)
        rng = self._generator(STREAM_APPLY)
        new = items[choose(rng, b, accepted)]
        free = self.n - res.size
        overwrite = accepted - min(free, accepted)
        res.replace(choose(rng, res.size, overwrite), new)

    def sample(self):
        """The current uniform sample (a new array)."""
        return self._empty() if self._res is None else self._res.full().copy()

    def _latents(self):
        return [] if self._res is None else [self._res]

    _no_remove_reason = ("a batched reservoir refills from the new batches only, so after an "
                         "erasure its sample would no longer be uniform over the items seen; "
                         "use R-TBS or T-TBS for streams with erasures")

    def _inclusion_probabilities(self, ages, joined):
        """min(1, n / W_k) for every item seen."""
        return np.full(np.shape(ages), min(1.0, self.n / self._seen) if self._seen else 1.0)

    def _params(self):
        return {"n": self.n}

    @classmethod
    def _from_params(cls, params, decay):
        return cls(params["n"], seed=0)

    def _save(self, arrays, meta):
        arrays["items"] = self.sample()
        meta["seen"] = self._seen

    def _load(self, arrays, meta):
        items = get_array(arrays, "items")
        self._seen = int(meta["seen"])
        started = items.size or self._dtype is not None
        self._res = LatentSample.of_items(items) if started else None
