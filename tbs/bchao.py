"""B-Chao (Appendix C, Algorithms 9 and 10): Chao's weighted reservoir scheme,
specialised to exponential decay and batch arrivals.  A baseline.

The sample always holds n items once n items have arrived.  The first n items
are accepted with probability 1 -- whatever their ages -- which violates the
time-bias property (1) during fill-up.  Afterwards an arriving item x (weight
1) is accepted with probability pi_x = n / W (1 if x is overweight),
where W is the total weight of all non-overweight items seen and V the set of
overweight items (kept with probability 1).  Items that stop being overweight
(set A) are ejected with the conditional probability of Algorithm 9, line 19;
otherwise a uniformly chosen victim leaves.

Items are processed one at a time, as the algorithm prescribes, except for
runs in which no item can be overweight (V empty and W + 1 >= n): there every
arriving item is accepted with probability n / W and replaces a uniformly
chosen slot, which is simulated for the whole run at once (the last accepted
item written to a slot wins).
"""
import numpy as np

from .base import Sampler, get_array
from .decay import Exponential, as_decay
from .errors import TBSError, check_int
from .randomness import STREAM_APPLY, STREAM_DECIDE

__all__ = ["BChao"]


class BChao(Sampler):
    """Batched Chao sampler with exponential decay (B-Chao)."""

    def __init__(self, n, decay, seed=None):
        super().__init__(seed)
        self.n = check_int("n", n, 1)
        decay = as_decay(decay)
        if not isinstance(decay, Exponential):
            raise TBSError(f"decay must be Exponential for B-Chao (Appendix C), got {decay!r}")
        self.decay = decay
        self._S = None           # non-overweight sample items (array, first _size used)
        self._size = 0
        self._W = 0.0            # aggregate weight of non-overweight items seen
        self._V_items = []       # overweight items (1-element arrays), oldest first
        self._V_w = []           # their weights

    @property
    def sample_weight(self):
        return float(self._size + len(self._V_items))

    @property
    def total_weight(self):
        """Total decayed weight of all items seen (non-overweight + overweight)."""
        return self._W + sum(self._V_w)

    @property
    def overweight_count(self):
        return len(self._V_items)

    _no_remove_reason = ("B-Chao's overweight items and weight W would have to be recomputed "
                         "without the erased item; use R-TBS or T-TBS for streams with erasures")

    def held(self):
        return self.sample()

    @property
    def footprint(self):
        return self._size + len(self._V_items)

    def _shift_items(self, offset):
        if self._S is not None:
            self._S[: self._size] += offset
        # Overweight items may be views of a caller's batch: replaced, not changed.
        self._V_items = [v + offset for v in self._V_items]

    def sample(self):
        if self._S is None:
            return self._empty()
        return np.concatenate([self._S[: self._size]] + self._V_items)

    def _update(self, items, t, dt):
        n = self.n
        if dt is not None:
            factor = self.decay.factor(dt)
            self._W *= factor
            self._V_w = [w * factor for w in self._V_w]
        b = int(items.size)
        if b == 0:
            return
        if self._S is None:
            self._S = np.empty(min(n, b), dtype=items.dtype)
        dec = self._generator(STREAM_DECIDE)
        rng = self._generator(STREAM_APPLY)
        j = 0
        if self._size + len(self._V_items) < n:      # fill-up: accept with probability 1
            take = min(n - self._size - len(self._V_items), b)
            self._room(self._size + take)
            self._S[self._size:self._size + take] = items[:take]
            self._size += take
            self._W += take
            j = take
        while j < b:
            if not self._V_items and self._W + 1.0 >= n:
                self._bulk(items[j:], dec, rng)
                break
            self._one(items[j:j + 1], dec, rng)
            j += 1

    def _room(self, needed):
        """Make ``_S`` hold at least *needed* items (at most n): memory
        follows the items seen, not the sample's size."""
        if self._S.size < needed:
            grown = np.empty(min(self.n, max(needed, 2 * self._S.size)), dtype=self._S.dtype)
            grown[: self._size] = self._S[: self._size]
            self._S = grown

    def _bulk(self, items, dec, rng):
        """Items none of which can be overweight: accept the r-th with
        probability n / (W + r + 1) and overwrite a uniform slot."""
        n = self.n
        self._room(n)
        m = int(items.size)
        w_after = self._W + np.arange(1, m + 1, dtype=np.float64)
        accept = np.flatnonzero(dec.random(m) < n / w_after)
        self._W += m
        if accept.size == 0:
            return
        slots = rng.integers(0, n, size=accept.size)
        # Last writer wins: the first occurrence of each slot in the reversed order.
        rev_slots = slots[::-1]
        uniq, first = np.unique(rev_slots, return_index=True)
        self._S[uniq] = items[accept[::-1][first]]

    def _one(self, x, dec, rng):
        """Algorithm 9 (lines 15-24) and Algorithm 10 for one arriving item x."""
        n = self.n
        V_items, V_w = self._V_items, self._V_w
        # NORMALIZE (Algorithm 10).
        total = self._W + 1.0 + sum(V_w)
        if n / total <= 1.0:             # x is not overweight, hence no item is
            A = list(zip(V_items, V_w))
            V_items, V_w = [], []
            pi_x = n / total
            self._W = total
            x_over = False
        else:
            pi_x = 1.0
            w = total - 1.0
            D_items, D_w = [x], [1.0]
            A = []
            # V is kept oldest first, so its newest item has the largest weight.
            rest = list(zip(V_items, V_w))
            while rest:
                z, wz = rest.pop()       # GETMAX
                if (n - len(D_items)) * wz / w > 1.0:
                    D_items.append(z)
                    D_w.append(wz)
                    w -= wz
                else:
                    A.append((z, wz))
                    break
            A.extend(rest)
            order = np.argsort(D_w, kind="stable")          # keep V oldest (lightest) first
            V_items = [D_items[i] for i in order]
            V_w = [D_w[i] for i in order]
            self._W = w
            x_over = True
        self._V_items, self._V_w = V_items, V_w
        u = dec.random()
        if u <= pi_x:
            # Choose the victim: a newly non-overweight item with probability
            # (1 - (n - |V|) w_z / W) / pi_x each, otherwise a uniform item of S.
            big_u = dec.random()
            alpha = 0.0
            victim = -1
            for i, (_z, wz) in enumerate(A):
                alpha += (1.0 - (n - len(V_items)) * wz / self._W) / pi_x
                if big_u <= alpha:
                    victim = i
                    break
            if victim >= 0:
                A.pop(victim)
                if not x_over:
                    self._push(x)
            else:
                slot = int(rng.integers(self._size))
                if x_over:
                    self._S[slot] = self._S[self._size - 1]
                    self._size -= 1
                else:
                    self._S[slot] = x[0]
        for z, _ in A:
            self._push(z)

    def _push(self, item):
        self._room(self._size + 1)
        self._S[self._size] = item[0]
        self._size += 1

    # ------------------------------------------------------------------ state
    def _params(self):
        return {"n": self.n, "decay": self.decay.to_json()}

    @classmethod
    def _from_params(cls, params, decay):
        return cls(params["n"], Exponential(params["decay"]["lam"]), seed=0)

    def _save(self, arrays, meta):
        empty = self._empty()
        arrays["items"] = empty if self._S is None else self._S[: self._size].copy()
        arrays["overweight_items"] = np.concatenate([empty] + self._V_items)
        arrays["overweight_weights"] = np.array(self._V_w, dtype=np.float64)
        meta["W"] = self._W
        meta["started"] = self._S is not None

    def _load(self, arrays, meta):
        items = get_array(arrays, "items")
        over = get_array(arrays, "overweight_items")
        weights = get_array(arrays, "overweight_weights", np.float64)
        if over.size != weights.size:
            raise TBSError("state arrays overweight_items and overweight_weights differ in length")
        if meta["started"]:
            self._S = items.copy()
            self._size = int(items.size)
        self._V_items = [over[i:i + 1].copy() for i in range(over.size)]
        self._V_w = [float(w) for w in weights]
        self._W = float(meta["W"])
