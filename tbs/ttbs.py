"""Bernoulli-type time-biased samplers: T-TBS (Algorithm 3) and B-TBS (Algorithm 1).

Both keep the sample as groups H_i of items that arrived at time t_i.  At each
batch, an item of age a survives with probability f(a) / f(a_prev); instead of
a coin per item, the number of survivors of each group is drawn from a
binomial distribution and that many items are chosen uniformly (Appendix B
shows the two are equivalent).  New items enter with probability q
(T-TBS: q = n gamma(f) / b; B-TBS: q = 1).  Hence Pr[x in S_k] = q f(age).

With exponential decay every item has the same retention probability, so a
single group suffices and no arrival times are stored.
"""
import numpy as np

from .base import Sampler, decay_params, get_array, restore_decay
from .decay import as_decay
from .errors import TBSError, check_int, check_real
from .latent import LatentSample
from .randomness import STREAM_APPLY, STREAM_DECIDE, Scratch, choose

__all__ = ["TTBS", "BTBS"]


class _BernoulliTBS(Sampler):
    def __init__(self, decay, q, seed):
        super().__init__(seed)
        self.decay = as_decay(decay)
        self.q = q
        self._groups = []          # [(arrival time, LatentSample)] -- oldest first
        self._W = 0.0              # exponential decay: total weight, kept recursively
        self._hist_t = []          # general decay: arrival times of non-empty batches
        self._hist_b = []          # ... and their sizes, for total_weight
        self._scratch = Scratch()  # reusable work arrays (not part of the state)

    @property
    def sample_weight(self):
        """C_k = |S_k| (the sample size)."""
        return float(sum(g[1].size for g in self._groups))

    @property
    def total_weight(self):
        """W_k = sum over batches of |B_i| f(t_k - t_i)."""
        if self.decay.is_exponential or not self._hist_t:
            return self._W
        t = np.asarray(self._hist_t, dtype=np.float64)
        return float(np.dot(np.asarray(self._hist_b, dtype=np.float64), self.decay(self._time - t)))

    @property
    def group_count(self):
        return len(self._groups)

    def sample(self):
        """S_k: all items currently in the sample (a new array)."""
        if not self._groups:
            return self._empty()
        return np.concatenate([g[1].full() for g in self._groups])

    def _update(self, items, t, dt):
        dec = self._generator(STREAM_DECIDE)
        rng = self._generator(STREAM_APPLY)
        b = int(items.size)
        groups = self._groups
        # Retention counts (decisions), one binomial per group.
        if dt is not None and groups:
            if self.decay.is_exponential:
                p = np.full(len(groups), self.decay.factor(dt))
            else:
                times = np.array([g[0] for g in groups], dtype=np.float64)
                f_now = np.asarray(self.decay(t - times), dtype=np.float64)
                f_prev = np.asarray(self.decay((t - dt) - times), dtype=np.float64)
                with np.errstate(divide="ignore", invalid="ignore"):
                    p = np.where(f_prev > 0.0, f_now / f_prev, 0.0)
                p = np.minimum(p, 1.0)
            sizes = np.array([g[1].size for g in groups], dtype=np.int64)
            kept = dec.binomial(sizes, p)
        else:
            sizes = kept = None
        take = int(dec.binomial(b, self.q)) if b else 0
        # Application: which items.
        if take < b:
            pos = choose(rng, b, take, self._scratch, "batch")
            new_items = np.take(items, pos, out=self._scratch.get("batch.items", take, items.dtype))
        else:
            new_items = items
        if kept is not None:
            for (_t, ls), size, keep in zip(groups, sizes, kept):
                evict = int(size - keep)
                if evict == 0:
                    continue
                if evict <= keep:
                    incoming = new_items if (self.decay.is_exponential and take) else None
                    pos = choose(rng, int(size), evict, self._scratch, "group")
                    if incoming is not None:
                        ls.replace(pos, incoming)
                        take = 0
                    else:
                        ls.remove(pos)
                else:
                    kept_items = ls.buf[choose(rng, int(size), int(keep))]
                    ls.buf, ls.size = kept_items, int(kept_items.size)
            self._groups = groups = [g for g in groups if g[1].size > 0]
        if take:
            if self.decay.is_exponential and groups:
                groups[0][1].append(new_items)
            else:
                groups.append((t, LatentSample.of_items(new_items)))
        if self.decay.is_exponential:
            self._W = (self.decay.factor(dt) * self._W if dt is not None else 0.0) + b
        elif b:
            self._hist_t.append(t)
            self._hist_b.append(b)
        for _, ls in groups:
            ls.weight = float(ls.size)

    # ------------------------------------------------------------------ erasure, probabilities
    def _latents(self):
        return [g[1] for g in self._groups]

    def _remove(self, items):
        erased = sum(g[1].discard(items) for g in self._groups)
        self._groups = [g for g in self._groups if g[1].size > 0]
        return erased

    def _merge(self, other, t):
        """Both samples are independent Bernoulli samples with Pr = q f(age):
        each item of the sampler that is behind survives the time shift with
        probability f(age at t) / f(age now) (a binomial count per group, as
        in an update), then the groups are united."""
        if other.q != self.q or other.decay.to_json() != self.decay.to_json() \
                or other.decay.to_json() is None and other.decay is not self.decay:
            raise TBSError(f"merge needs the same decay and q, got ({self.decay!r}, q={self.q}) "
                           f"and ({other.decay!r}, q={other.q})")
        dec = self._op_generator(STREAM_DECIDE)
        rng = self._op_generator(STREAM_APPLY)
        groups = []
        for sampler in (self, other):
            for gt, ls in sampler._groups:
                ls = LatentSample.of_items(ls.full())
                if sampler._time < t:
                    a = sampler._time - gt
                    f_prev, f_now = float(self.decay(a)), float(self.decay(a + t - sampler._time))
                    keep = int(dec.binomial(ls.size, f_now / f_prev if f_prev > 0.0 else 0.0))
                    ls = LatentSample.of_items(ls.full()[choose(rng, ls.size, keep)])
                if ls.size:
                    groups.append((gt, ls))
        if self.decay.is_exponential:
            items = [ls.full() for _, ls in groups]
            one = LatentSample.of_items(np.concatenate(items)) if items else None
            self._groups = [] if one is None else [(min(g[0] for g in groups), one)]
            self._W = (self._W * self.decay.factor(t - self._time)
                       + other._W * self.decay.factor(t - other._time))
        else:
            groups.sort(key=lambda g: g[0])
            self._groups = groups
            hist = sorted(zip(self._hist_t + other._hist_t, self._hist_b + other._hist_b))
            self._hist_t = [h[0] for h in hist]
            self._hist_b = [h[1] for h in hist]
        self._time = t

    def _inclusion_probabilities(self, ages, joined):
        """``q f(age)`` (B-TBS: q = 1)."""
        return self.q * np.asarray(self.decay(np.asarray(ages, dtype=np.float64)),
                                   dtype=np.float64)

    # ------------------------------------------------------------------ state
    def _save(self, arrays, meta):
        empty = self._empty()
        arrays["group_time"] = np.array([g[0] for g in self._groups], dtype=np.float64)
        arrays["group_size"] = np.array([g[1].size for g in self._groups], dtype=np.int64)
        arrays["items"] = np.concatenate([empty] + [g[1].full() for g in self._groups])
        arrays["history_time"] = np.array(self._hist_t, dtype=np.float64)
        arrays["history_size"] = np.array(self._hist_b, dtype=np.int64)
        meta["W"] = self._W

    def _load(self, arrays, meta):
        times = get_array(arrays, "group_time", np.float64)
        sizes = get_array(arrays, "group_size", np.int64)
        items = get_array(arrays, "items")
        if times.size != sizes.size or items.size != int(sizes.sum()):
            raise TBSError("state arrays group_time, group_size and items are inconsistent")
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        self._groups = [(float(times[i]), LatentSample.of_items(items[offsets[i]:offsets[i + 1]]))
                        for i in range(times.size)]
        self._hist_t = [float(x) for x in get_array(arrays, "history_time", np.float64)]
        self._hist_b = [int(x) for x in get_array(arrays, "history_size", np.int64)]
        self._W = float(meta["W"])


class TTBS(_BernoulliTBS):
    """Targeted-size time-biased sampler (T-TBS, Algorithm 3).

    Pr[x in S_k] = q f(age) with q = n gamma(f) / mean_batch_size, so the
    expected sample size tends to ``n`` (Theorem 3.1) when batch sizes are
    i.i.d. with the given mean and batches arrive every ``delta`` time units.
    """

    def __init__(self, n, decay, mean_batch_size, seed=None, *, delta=1.0):
        decay = as_decay(decay)
        self.n = check_int("n", n, 1)
        self.mean_batch_size = check_real("mean_batch_size", mean_batch_size, low=0.0,
                                          low_open=True)
        self.delta = check_real("delta", delta, low=0.0, low_open=True)
        g = decay.gamma(self.delta)
        if g <= 0.0:
            raise TBSError("decay must have a finite total weight F_inf = sum_i f(i*delta) "
                           f"for T-TBS, got {decay!r}")
        self.gamma = g
        q = self.n * g / self.mean_batch_size
        if q > 1.0 + 1e-12:
            raise TBSError(f"mean_batch_size must be >= n * gamma(decay) = {self.n * g:.6g} "
                           f"(T-TBS needs b >= n gamma), got {mean_batch_size!r}")
        super().__init__(decay, min(q, 1.0), seed)

    def _resize(self, n):
        """q becomes n gamma / b: each stored item stays with probability
        q_new / q_old (a binomial count per group, as in an update)."""
        q = min(n * self.gamma / self.mean_batch_size, 1.0)
        dec, rng = self._op_generator(STREAM_DECIDE), self._op_generator(STREAM_APPLY)
        groups = []
        for gt, ls in self._groups:
            keep = int(dec.binomial(ls.size, q / self.q))
            if keep:
                groups.append((gt, LatentSample.of_items(ls.full()[choose(rng, ls.size, keep)])))
        self._groups, self.q, self.n = groups, q, n

    def _params(self):
        p = {"n": self.n, "mean_batch_size": self.mean_batch_size, "delta": self.delta}
        p.update(decay_params(self.decay))
        return p

    @classmethod
    def _from_params(cls, params, decay):
        return cls(params["n"], restore_decay(params, decay), params["mean_batch_size"], seed=0,
                   delta=params["delta"])


class BTBS(_BernoulliTBS):
    """Bernoulli time-biased sampler (B-TBS, Algorithm 1): every arriving item
    is accepted and an item of age a is present with probability f(a).
    (Algorithm 1 is stated for exponential decay; other decays are handled by
    per-arrival-time groups exactly as in T-TBS with q = 1.)"""

    def __init__(self, decay, seed=None):
        super().__init__(decay, 1.0, seed)

    def _params(self):
        return decay_params(self.decay)

    @classmethod
    def _from_params(cls, params, decay):
        return cls(restore_decay(params, decay), seed=0)
