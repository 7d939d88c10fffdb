"""Reservoir-based time-biased sampling (R-TBS).

* exponential decay -- Algorithm 7: one latent sample; after batch k,
  Pr[x in S_k] = rho_k f(age of x) with rho_k = min(1, n / W_k), the sample
  weight is C_k = min(W_k, n) and |S_k| is floor(C_k) or ceil(C_k) <= n.
* general decay -- Algorithm 8: one latent sample per recent batch plus one
  *consolidated* latent sample (decaying at the exponential rate
  ``consolidation_rate``) for batches older than the cutoff; rho_k is capped
  by rho* so inclusion probabilities never increase, the total weight of the
  latent samples is at most ``max_weight`` (n') and the output is downsampled
  to weight n.

Decisions are computed from numbers only (:func:`exp_step` for Algorithm 7;
the general update computes the per-latent-sample factors and plans in a
vectorized pass) and then applied to the item arrays; see ``docs/TBS.md``.
"""
import math
from dataclasses import dataclass

import numpy as np

from .base import Sampler, decay_params, get_array, restore_decay
from .decay import as_decay
from .errors import TBSError, check_int, check_real
from .latent import (
    PARTIAL_FULL,
    PARTIAL_KEEP,
    DownsamplePlan,
    LatentSample,
    UnionPlan,
    apply_downsample,
    apply_union,
    includes_partial,
    plan_downsample,
    plan_downsample_many,
    plan_union,
    plan_union_many,
    select_for_downsample,
    snap,
)
from .randomness import STREAM_APPLY, STREAM_DECIDE, STREAM_OUTPUT, Scratch, open_uniform

__all__ = ["RTBS", "ExpStep", "exp_step", "GeneralStep", "general_step", "ConsolidatedMass",
           "consolidation_weight"]


@dataclass(frozen=True)
class ExpStep:
    """All decisions of one Algorithm-7 step (pure numbers)."""
    theta: float            # e^{-lam (t_k - t_{k-1})}
    total_weight: float     # W_k
    rho: float              # rho_k = min(1, n / W_k)
    reservoir: DownsamplePlan   # for (A, pi, C) with factor (rho_k / rho_{k-1}) theta
    batch: DownsamplePlan       # for (B_k, {}, |B_k|) with factor rho_k
    union: UnionPlan            # UNION(batch latent, reservoir latent)


def exp_step(n, lam, total_weight, rho, n_full, has_partial,
             weight, batch_size, dt, u_reservoir, u_batch,
             u_union):
    """Decide one step of Algorithm 7 from the current numbers.

    ``dt`` is t_k - t_{k-1} (None for the first batch); the three uniforms
    lie in (0, 1].  The returned plans say how many items to keep, which
    partial items survive, etc.; applying them needs uniform choices only.
    """
    theta = 1.0 if dt is None else math.exp(-lam * dt)
    w = theta * total_weight + batch_size
    new_rho = min(1.0, n / w) if w > 0.0 else 1.0
    if weight > 0.0:
        factor = min(1.0, (new_rho / rho) * theta)
        res = plan_downsample(n_full, has_partial, weight, factor, u_reservoir)
    else:
        res = DownsamplePlan(0.0, 0, 0, 0)
    bat = plan_downsample(batch_size, False, float(batch_size), new_rho, u_batch)
    res_full = res.keep_full + (1 if res.old_partial == PARTIAL_FULL else 0)
    res_has = bool(res.to_partial) or res.old_partial == PARTIAL_KEEP
    uni = plan_union(bat.keep_full, bool(bat.to_partial), bat.weight,
                     res_full, res_has, res.weight, u_union)
    if uni.weight > n:          # rounding only: C_k = min(W_k, n) <= n exactly
        uni = UnionPlan(float(n), uni.partial, uni.to_full)
    return ExpStep(theta, w, new_rho, res, bat, uni)


@dataclass(frozen=True)
class GeneralStep:
    """The numbers of one Algorithm-8 step, before any random decision."""
    total_weight: float     # W_k (consolidated batches decay at the consolidation rate)
    rho: float              # rho_k = min(1, n' / W_k, rho*)
    thetas: np.ndarray      # downsampling factor of each recent latent sample
                            # (empty for the first batch)
    cons_factor: float      # exp(-lambda (t_k - t_{k-1})) of the consolidated sample
                            # (1 for the first batch)
    cons_theta: float       # its downsampling factor (rho_k / rho_{k-1}) cons_factor
                            # (1 for the first batch)


def general_step(decay, max_weight, consolidation_rate, rho, times, sizes,
                 cons_weight, cons_batches, batch_size, t,
                 dt):
    """Decide the numbers of one step of Algorithm 8 from the recent batches'
    arrival times and sizes, the consolidated batches' total weight and count,
    and the new batch's size, time and gap ``dt`` (None for the first batch);
    ``rho`` is rho_{k-1}.  Used by :class:`RTBS` and by the distributed driver
    (tbs/stream), which therefore compute the same W_k, rho_k and factors."""
    count = len(times)
    if count:
        f_now = np.asarray(decay(t - times), dtype=np.float64)
        f_prev = np.asarray(decay((t - dt) - times), dtype=np.float64) if dt is not None else f_now
        w_recent = float(np.dot(sizes, f_now))
    else:
        w_recent = 0.0
    cons_factor = 1.0 if dt is None else math.exp(-consolidation_rate * dt)
    w = w_recent + cons_weight * cons_factor + batch_size
    rho_star = math.inf
    if dt is not None:
        if count:
            ok = f_now > 0.0
            if np.any(ok):
                rho_star = rho * float(np.min(f_prev[ok] / f_now[ok]))
        if cons_batches > 0:
            rho_star = min(rho_star, rho / cons_factor)
    new_rho = min(1.0, max_weight / w if w > 0.0 else math.inf, rho_star)
    thetas = np.zeros(0)
    if dt is not None and count:
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(f_prev > 0.0, (new_rho * f_now) / (rho * f_prev), 0.0)
            thetas = _factor_at_most_one(ratio)
    cons_theta = 1.0 if dt is None else (new_rho / rho) * cons_factor
    return GeneralStep(w, new_rho, thetas, cons_factor, cons_theta)


class ConsolidatedMass:
    """An upper bound U_k on the decayed weight of the consolidated batches,
    sum_i |B_i| f(t_k - t_i), for any sequence of batch times.

    The consolidated batches are kept as at most ``capacity`` groups (oldest
    first), each with its total size and the arrival time of its *newest*
    batch; since f is nonincreasing, evaluating a group at its newest batch's
    age bounds each member's decayed weight from above.  When a new batch
    makes one group too many, the two neighbouring groups whose merge raises
    U_k least are merged, so U_k stays close to the true weight while memory
    stays constant.  Algorithm 8 merges a batch into the consolidated sample
    only while U_k plus that batch's decayed weight stays below delta2, which
    keeps Theorem 4.6(ii) exact under irregular times (see docs/TBS.md)."""

    capacity = 64

    def __init__(self, times=(), sizes=()):
        self.times = np.array(times, dtype=np.float64)
        self.sizes = np.array(sizes, dtype=np.float64)
        if self.times.shape != self.sizes.shape or self.times.ndim != 1:
            raise TBSError("consolidated mass: times and sizes must be 1-d arrays of one length")

    @classmethod
    def covering(cls, batches, bstar, time):
        """A bound for consolidated batches known only by count: ``batches``
        batches of at most ``bstar`` items, none newer than ``time`` (states
        saved before the groups were recorded)."""
        if batches <= 0 or time is None:
            return cls()
        return cls([float(time)], [float(batches) * float(bstar)])

    def bound(self, decay, t):
        """U_k at time ``t``."""
        if not self.sizes.size:
            return 0.0
        return float(np.dot(self.sizes, np.asarray(decay(t - self.times), dtype=np.float64)))

    def add(self, decay, t, time, size):
        """Record a batch of ``size`` items that arrived at ``time`` (newer
        than every recorded batch); returns U_k at time ``t``."""
        self.times = np.append(self.times, float(time))
        self.sizes = np.append(self.sizes, float(size))
        if self.sizes.size > self.capacity:
            f = np.asarray(decay(t - self.times), dtype=np.float64)
            j = int(np.argmin(self.sizes[:-1] * (f[1:] - f[:-1])))
            self.sizes[j + 1] += self.sizes[j]
            self.times = np.delete(self.times, j)
            self.sizes = np.delete(self.sizes, j)
        return self.bound(decay, t)


def consolidation_weight(decay, delta1, delta2, mass, age, size):
    """Algorithm 8, line 23, for the oldest recent batch (``size`` items of age
    ``age``) given the bound ``mass`` of :class:`ConsolidatedMass`: its decayed
    weight factor f(age) when it may join the consolidated sample -- f(age) <
    delta1 and mass + size f(age) < delta2 -- else None."""
    fa = float(decay(age))
    if fa < delta1 and mass + size * fa < delta2:
        return fa
    return None


def _take_from_batch(items, plan, rng, scratch=None):
    """Apply a downsample plan to a fresh batch: (full items, partial item or None).

    With ``scratch`` the returned full items may be a view of a reusable buffer."""
    b = items.size
    if plan.keep_full == b:
        return items, None
    if plan.keep_full + plan.to_partial == 0:
        return items[:0], None
    mode, pos, ppos = select_for_downsample(rng, b, plan, scratch, "batch")
    partial = items[ppos:ppos + 1].copy() if ppos >= 0 else None
    if mode == "keep":
        if scratch is None:
            return items[pos], partial
        return np.take(items, pos, out=scratch.get("batch.items", pos.size, items.dtype)), partial
    mask = np.ones(b, dtype=bool)
    mask[pos] = False
    return items[mask], partial


class RTBS(Sampler):
    """Reservoir-based time-biased sampler (R-TBS).

    Parameters
    ----------
    n : int
        Maximum sample size.
    decay : Decay or callable
        Decay function f(age).  Exponential decay selects Algorithm 7, any
        other decay Algorithm 8 (override with ``algorithm``).
    seed : int or None
        Seed of all randomness (per-batch Philox streams).
    max_weight : float, optional
        n' >= n, the maximum total weight of the latent samples (Algorithm 8;
        default 2 n).
    consolidation_rate : float, optional
        Exponential rate lambda of the consolidated latent sample (Algorithm 8;
        default 0.1, raised to the smallest rate that satisfies condition (12)
        for the given decay and ``delta1`` if 0.1 is too small).
    delta1, delta2 : float, optional
        Consolidation accuracy (Algorithm 8; defaults 0.01 and 0.001 n): a batch
        joins the consolidated sample only once f(age) < delta1, and the total
        weight of consolidated batches stays below delta2.
    algorithm : {"auto", "exponential", "general"}
    """

    def __init__(self, n, decay, seed=None, *, max_weight=None, consolidation_rate=None,
                 delta1=None, delta2=None, algorithm="auto"):
        super().__init__(seed)
        self.n = check_int("n", n, 1)
        self.decay = as_decay(decay)
        if algorithm not in ("auto", "exponential", "general"):
            raise TBSError("algorithm must be 'auto', 'exponential' or 'general', "
                           f"got {algorithm!r}")
        if algorithm == "auto":
            algorithm = "exponential" if self.decay.is_exponential else "general"
        if algorithm == "exponential" and not self.decay.is_exponential:
            raise TBSError("algorithm='exponential' needs an Exponential decay, "
                           f"got {self.decay!r}")
        self.algorithm = algorithm
        self._scratch = Scratch()
        if algorithm == "exponential":
            options = (("max_weight", max_weight), ("consolidation_rate", consolidation_rate),
                       ("delta1", delta1), ("delta2", delta2))
            given = [name for name, v in options if v is not None]
            if given:
                raise TBSError(f"{given[0]} applies only to the general algorithm (Algorithm 8); "
                               "pass algorithm='general' to use it with exponential decay")
            self._W = 0.0
            self._rho = 1.0
            self._latent = None
            return
        self.max_weight = (2.0 * self.n if max_weight is None else
                           check_real("max_weight", max_weight, low=float(self.n)))
        self.delta1 = 0.01 if delta1 is None else check_real("delta1", delta1, low=0.0, high=1.0,
                                                                low_open=True, high_open=True)
        self.delta2 = (0.001 * self.n if delta2 is None else
                       check_real("delta2", delta2, low=0.0, low_open=True))
        cutoff = self.decay.age_below(self.delta1)
        needed = self.decay.hazard_sup(cutoff) if math.isfinite(cutoff) else 0.0
        if consolidation_rate is None:
            self.consolidation_rate = max(0.1, needed) if math.isfinite(needed) else 0.1
            self._consolidate = math.isfinite(cutoff) and math.isfinite(needed)
        else:
            rate = check_real("consolidation_rate", consolidation_rate, low=0.0, low_open=True)
            if rate < needed * (1.0 - 1e-9):
                raise TBSError(f"consolidation_rate must be >= {needed:.6g} so that the "
                               "consolidated "
                               f"sample decays at least as fast as f beyond age {cutoff:.6g} "
                               f"(condition (12)), got {consolidation_rate!r}")
            self.consolidation_rate = rate
            self._consolidate = math.isfinite(cutoff)
        self._W = 0.0
        self._rho = 1.0
        self._recent = []          # [(time, batch size, LatentSample)], oldest first
        self._cons = None          # consolidated LatentSample
        self._cons_W = 0.0         # its (modified) total weight
        self._cons_batches = 0     # number of batches consolidated so far (m - 1)
        self._bstar = 0            # largest batch size so far
        self._mass = ConsolidatedMass()   # bound on the consolidated batches' decayed weight
        self._cons_time = None     # arrival time of the newest consolidated batch

    # ------------------------------------------------------------------ properties
    @property
    def rho(self):
        """rho_k: Pr[x in S_k] = rho_k f(age) (general decay: for ages below the cutoff)."""
        return self._rho

    @property
    def sample_rho(self):
        """The factor r_k with Pr[x in S_k] = r_k f(age of x): rho_k, times
        n / (rho_k W_k) when the general algorithm caps the output at n."""
        if self.algorithm == "exponential":
            return self._rho
        w = self.latent_weight
        return self._rho * (min(1.0, self.n / w) if w > 0.0 else 1.0)

    @property
    def total_weight(self):
        """W_k (general decay: consolidated batches decay at ``consolidation_rate``)."""
        return self._W

    @property
    def latent_weight(self):
        """Total weight of the latent sample(s) before the cap at n (= rho_k W_k)."""
        if self.algorithm == "exponential":
            return 0.0 if self._latent is None else self._latent.weight
        total = sum(r[2].weight for r in self._recent)
        if self._cons is not None:
            total += self._cons.weight
        return snap(total)

    @property
    def sample_weight(self):
        """C_k, the expected size of S_k (general decay: after the cap at n)."""
        return min(self.latent_weight, float(self.n))

    @property
    def latent_count(self):
        """Number of latent samples held (general decay: recent ones + the consolidated one)."""
        if self.algorithm == "exponential":
            return 1
        return len(self._recent) + 1

    @property
    def consolidated_batches(self):
        """How many of the earliest batches have been merged into the consolidated sample."""
        return 0 if self.algorithm == "exponential" else self._cons_batches

    # ------------------------------------------------------------------ update
    def _update(self, items, t, dt):
        if self.algorithm == "exponential":
            self._update_exp(items, dt)
        else:
            self._update_general(items, t, dt)

    def _update_exp(self, items, dt):
        if self._latent is None:
            self._latent = LatentSample(items.dtype if items.size else np.int64)
        elif items.size and self._latent.size == 0 and self._latent.partial is None \
                and self._latent.dtype != items.dtype:
            self._latent = LatentSample(items.dtype)
        latent = self._latent
        u = 1.0 - self._generator(STREAM_DECIDE).random(3)
        step = exp_step(self.n, self.decay.lam, self._W, self._rho, latent.size, latent.has_partial,
                        latent.weight, items.size, dt, u[0], u[1], u[2])
        rng = self._generator(STREAM_APPLY)
        new_full, new_partial = _take_from_batch(items, step.batch, rng, self._scratch)
        if latent.weight > 0.0:
            apply_downsample(latent, step.reservoir, rng, incoming=new_full, scratch=self._scratch)
        else:
            latent.append(new_full)
            latent.partial = None
        p_batch, p_res = new_partial, latent.partial
        for which in step.union.to_full:
            latent.append(p_batch if which == 1 else p_res)
        latent.partial = {1: p_batch, 2: p_res}.get(step.union.partial)
        latent.weight = step.union.weight
        self._W = step.total_weight
        self._rho = step.rho
        _check_latent(latent)

    def _update_general(self, items, t, dt):
        b = int(items.size)
        self._bstar = max(self._bstar, b)
        if self._cons is None and b:
            self._cons = LatentSample(items.dtype)
        recent = self._recent
        count = len(recent)
        step = general_step(self.decay, self.max_weight, self.consolidation_rate, self._rho,
                            np.fromiter((r[0] for r in recent), np.float64, count),
                            np.fromiter((r[1] for r in recent), np.float64, count),
                            self._cons_W, self._cons_batches, b, t, dt)
        w, rho, cons_factor = step.total_weight, step.rho, step.cons_factor
        dec = self._generator(STREAM_DECIDE)
        u = 1.0 - dec.random(count + 2)
        rng = self._generator(STREAM_APPLY)
        if dt is not None and count:
            lat = [r[2] for r in recent]
            thetas = step.thetas
            if count <= 16:
                for i, ls in enumerate(lat):
                    apply_downsample(ls, plan_downsample(ls.size, ls.partial is not None, ls.weight,
                                                         float(thetas[i]), float(u[i])), rng)
            else:
                n_full = np.fromiter((ls.size for ls in lat), np.int64, count)
                has_p = np.fromiter((ls.partial is not None for ls in lat), bool, count)
                weights = np.fromiter((ls.weight for ls in lat), np.float64, count)
                new_w, keep, to_p, old = plan_downsample_many(n_full, has_p, weights, thetas,
                                                              u[:count])
                unchanged = (keep == n_full) & (to_p == 0) & ((old == PARTIAL_KEEP) | ~has_p)
                for i in range(count):
                    ls = lat[i]
                    if unchanged[i]:
                        ls.weight = float(new_w[i])
                    else:
                        plan = DownsamplePlan(float(new_w[i]), int(keep[i]), int(to_p[i]),
                                              int(old[i]))
                        apply_downsample(ls, plan, rng)
            self._recent = recent = [r for r in recent if r[2].weight > 0.0]
        if dt is not None and self._cons is not None and self._cons.weight > 0.0:
            factor = float(_factor_at_most_one(np.array([step.cons_theta]))[0])
            apply_downsample(self._cons, plan_downsample(self._cons.size, self._cons.has_partial,
                                                         self._cons.weight, factor, u[count]), rng)
        self._cons_W *= cons_factor
        if b:
            plan = plan_downsample(b, False, float(b), rho, u[count + 1])
            full, partial = _take_from_batch(items, plan, rng)
            ls = LatentSample.of_items(full, copy=full is items)
            ls.partial = partial
            ls.weight = plan.weight
            if ls.weight > 0.0:
                recent.append((t, b, ls))
        self._W = w
        self._rho = rho
        self._consolidate_old(t, dec)

    def _consolidate_old(self, t, dec):
        """Merge the oldest recent latent samples into the consolidated one while
        f(age) < delta1 and the decayed weight of the consolidated batches stays
        below delta2 (Algorithm 8, lines 23-26; see docs/TBS.md for the bound)."""
        if not self._consolidate:
            return
        recent = self._recent
        merged = 0
        mass = self._mass.bound(self.decay, t) if len(recent) > 1 else 0.0
        while merged < len(recent) - 1:
            bt, bsize, ls = recent[merged]
            fa = consolidation_weight(self.decay, self.delta1, self.delta2, mass, t - bt, bsize)
            if fa is None:
                break
            cons = self._cons
            plan = plan_union(cons.size, cons.has_partial, cons.weight, ls.size, ls.has_partial,
                              ls.weight, open_uniform(dec))
            apply_union(cons, ls, plan)
            self._cons_W += bsize * fa
            self._cons_batches += 1
            mass = self._mass.add(self.decay, t, bt, bsize)
            self._cons_time = bt
            merged += 1
        if merged:
            del recent[:merged]
            _check_latent(self._cons)

    # ------------------------------------------------------------------ erasure, probabilities
    @property
    def consolidated_time(self):
        """Arrival time of the newest batch in the consolidated sample (general
        decay; None before any batch is consolidated).  Batches are
        consolidated in arrival order, so a batch is consolidated iff it
        arrived at or before this time."""
        return None if self.algorithm == "exponential" else self._cons_time

    _no_merge_reason = ("with a general decay each sampler's rho is capped by its own history "
                        "(rho*) and its batches joined its consolidated sample at their own "
                        "ages; merging them is not supported -- use exponential decay")

    def _merge(self, other, t):
        """Algorithm 7's state for both streams at time t: each latent sample is
        downsampled to the common rho = min(1, n / W) (W the sum of both decayed
        weights), then the two are united (Theorems 4.1 and 4.2)."""
        if self.algorithm != "exponential" or other.algorithm != "exponential":
            raise TBSError(f"RTBS does not support merge(): {self._no_merge_reason}")
        if other.n != self.n or other.decay.lam != self.decay.lam:
            raise TBSError(f"merge needs the same n and lambda, got (n={self.n}, "
                           f"lambda={self.decay.lam}) and (n={other.n}, lambda={other.decay.lam}): "
                           "a sample cannot be upsampled to a larger rho")
        lam = self.decay.lam
        theta_a = math.exp(-lam * (t - self._time))
        theta_b = math.exp(-lam * (t - other._time))
        w = theta_a * self._W + theta_b * other._W
        rho = min(1.0, self.n / w) if w > 0.0 else 1.0
        u = 1.0 - self._op_generator(STREAM_DECIDE).random(3)
        rng = self._op_generator(STREAM_APPLY)
        mine, theirs = self._latent, _copy_latent(other._latent)
        for ls, factor, uu in ((mine, rho * theta_a / self._rho, u[0]),
                               (theirs, rho * theta_b / other._rho, u[1])):
            f = float(_factor_at_most_one(np.array([factor]))[0])
            apply_downsample(ls, plan_downsample(ls.size, ls.has_partial, ls.weight, f, uu), rng)
        plan = plan_union(mine.size, mine.has_partial, mine.weight, theirs.size,
                          theirs.has_partial, theirs.weight, u[2])
        apply_union(mine, theirs, plan)
        mine.weight = min(plan.weight, float(self.n))
        _check_latent(mine)
        self._W, self._rho, self._time = w, rho, t

    def _resize(self, n):
        """Exponential decay: rho becomes min(rho, n / W) and the latent sample
        is downsampled by the ratio.  General decay: the output cap becomes n
        (rho and the latent samples do not depend on n once n' is fixed)."""
        if self.algorithm == "exponential" and self._latent is not None:
            rho = min(self._rho, n / self._W) if self._W > 0.0 else self._rho
            ls = self._latent
            u = open_uniform(self._op_generator(STREAM_DECIDE))
            apply_downsample(ls, plan_downsample(ls.size, ls.has_partial, ls.weight,
                                                 rho / self._rho, u),
                             self._op_generator(STREAM_APPLY))
            _check_latent(ls)
            self._rho = rho
        self.n = n

    def _latents(self):
        if self.algorithm == "exponential":
            return [] if self._latent is None else [self._latent]
        return [r[2] for r in self._recent] + ([] if self._cons is None else [self._cons])

    def _remove(self, items):
        erased = 0
        for ls in self._latents():
            erased += ls.discard(items)
            _check_latent(ls)
        return erased

    def _inclusion_probabilities(self, ages, joined):
        """``sample_rho f(age)``; general decay: for an item whose batch joined
        the consolidated sample at age ``a_join`` (``joined``, NaN otherwise),
        ``sample_rho f(a_join) exp(-lambda (age - a_join))``."""
        ages = np.asarray(ages, dtype=np.float64)
        p = self.sample_rho * np.asarray(self.decay(ages), dtype=np.float64)
        if self.algorithm == "general" and joined is not None:
            joined = np.asarray(joined, dtype=np.float64)
            cons = ~np.isnan(joined)
            if np.any(cons):
                a = joined[cons]
                p[cons] = (self.sample_rho * np.asarray(self.decay(a), dtype=np.float64)
                           * np.exp(-self.consolidation_rate * (ages[cons] - a)))
        return p

    # ------------------------------------------------------------------ output
    def sample(self):
        """The realized sample S_k (a new array; the same on every call for a given k)."""
        if self._batches == 0:
            return self._empty()
        rng = self._generator(STREAM_OUTPUT)
        if self.algorithm == "exponential":
            ls = self._latent
            if ls is None:
                return self._empty()
            return ls.realize(includes_partial(ls.weight, ls.size, open_uniform(rng)))
        parts = [r[2] for r in reversed(self._recent)]
        if self._cons is not None:
            parts.append(self._cons)
        parts = [p for p in parts if p.weight > 0.0]
        if not parts:
            return self._empty()
        u = 1.0 - rng.random(len(parts) + 2)
        # UNION of all latent samples (Algorithm 8, line 27), decided on numbers.
        weight, owner, promoted = plan_union_many([p.size for p in parts],
                                                  [p.partial is not None for p in parts],
                                                  [p.weight for p in parts], u)
        full = np.concatenate([p.full() for p in parts] + [parts[j].partial for j in promoted])
        partial = parts[owner].partial if owner >= 0 else None
        if weight > self.n:
            # Line 28: downsample the union to weight n.
            plan = plan_downsample(full.size, partial is not None, weight, self.n / weight, u[-2])
            ls = LatentSample.of_items(full, copy=False)
            ls.partial, ls.weight = partial, weight
            apply_downsample(ls, plan, rng)
            full, partial, weight = ls.full(), ls.partial, ls.weight
        if partial is not None and includes_partial(weight, full.size, u[-1]):
            return np.concatenate([full, partial])
        return full.copy() if full.base is not None else full

    # ------------------------------------------------------------------ state
    def _params(self):
        p = {"n": self.n, "algorithm": self.algorithm}
        p.update(decay_params(self.decay))
        if self.algorithm == "general":
            p.update(max_weight=self.max_weight, consolidation_rate=self.consolidation_rate,
                     delta1=self.delta1, delta2=self.delta2)
        return p

    @classmethod
    def _from_params(cls, params, decay):
        d = restore_decay(params, decay)
        if params["algorithm"] == "exponential":
            return cls(params["n"], d, seed=0, algorithm="exponential")
        return cls(params["n"], d, seed=0, algorithm="general", max_weight=params["max_weight"],
                   consolidation_rate=params["consolidation_rate"], delta1=params["delta1"],
                   delta2=params["delta2"])

    def _save(self, arrays, meta):
        meta["W"] = self._W
        meta["rho"] = self._rho
        empty = self._empty()
        if self.algorithm == "exponential":
            ls = self._latent
            arrays["full"] = empty if ls is None else ls.full().copy()
            arrays["partial"] = empty if ls is None or ls.partial is None else ls.partial.copy()
            meta["weight"] = 0.0 if ls is None else ls.weight
            meta["has_latent"] = ls is not None
            return
        lat = [r[2] for r in self._recent]
        arrays["recent_time"] = np.array([r[0] for r in self._recent], dtype=np.float64)
        arrays["recent_size"] = np.array([r[1] for r in self._recent], dtype=np.int64)
        arrays["recent_weight"] = np.array([ls.weight for ls in lat], dtype=np.float64)
        arrays["recent_nfull"] = np.array([ls.size for ls in lat], dtype=np.int64)
        arrays["recent_has_partial"] = np.array([ls.partial is not None for ls in lat], dtype=bool)
        arrays["recent_full"] = np.concatenate([empty] + [ls.full() for ls in lat])
        arrays["recent_partial"] = np.concatenate(
            [empty] + [ls.partial for ls in lat if ls.partial is not None])
        cons = self._cons
        arrays["cons_full"] = empty if cons is None else cons.full().copy()
        no_partial = cons is None or cons.partial is None
        arrays["cons_partial"] = empty if no_partial else cons.partial.copy()
        meta.update(cons_weight=0.0 if cons is None else cons.weight, has_cons=cons is not None,
                    cons_W=self._cons_W, cons_batches=self._cons_batches, bstar=self._bstar,
                    consolidate=self._consolidate, cons_time=self._cons_time)
        arrays["cons_mass_time"] = self._mass.times.copy()
        arrays["cons_mass_size"] = self._mass.sizes.copy()

    def _load(self, arrays, meta):
        self._W = float(meta["W"])
        self._rho = float(meta["rho"])
        if self.algorithm == "exponential":
            if meta["has_latent"]:
                self._latent = _restore_latent(get_array(arrays, "full"),
                                               get_array(arrays, "partial"), meta["weight"])
            return
        times = get_array(arrays, "recent_time", np.float64)
        sizes = get_array(arrays, "recent_size", np.int64)
        weights = get_array(arrays, "recent_weight", np.float64)
        nfull = get_array(arrays, "recent_nfull", np.int64)
        has_p = get_array(arrays, "recent_has_partial", bool)
        full = get_array(arrays, "recent_full")
        partial = get_array(arrays, "recent_partial")
        if not (times.size == sizes.size == weights.size == nfull.size == has_p.size) \
                or full.size != int(nfull.sum()) or partial.size != int(has_p.sum()):
            raise TBSError("state arrays recent_* are inconsistent")
        offsets = np.concatenate([[0], np.cumsum(nfull)])
        pidx = np.concatenate([[0], np.cumsum(has_p)])
        self._recent = [(float(times[i]), int(sizes[i]),
                         _restore_latent(full[offsets[i]:offsets[i + 1]],
                                         partial[pidx[i]:pidx[i + 1]], weights[i]))
                        for i in range(times.size)]
        if meta["has_cons"]:
            self._cons = _restore_latent(get_array(arrays, "cons_full"),
                                         get_array(arrays, "cons_partial"), meta["cons_weight"])
        self._cons_W = float(meta["cons_W"])
        self._cons_batches = int(meta["cons_batches"])
        self._bstar = int(meta["bstar"])
        self._consolidate = bool(meta["consolidate"])
        self._cons_time = None if meta.get("cons_time") is None else float(meta["cons_time"])
        if "cons_mass_time" in arrays:
            self._mass = ConsolidatedMass(get_array(arrays, "cons_mass_time", np.float64),
                                          get_array(arrays, "cons_mass_size", np.float64))
        else:       # saved before the groups were recorded: every batch is older than the oldest
            newest = self._recent[0][0] if self._recent else self._time    # recent one
            self._mass = ConsolidatedMass.covering(self._cons_batches, self._bstar, newest)


def _factor_at_most_one(factors):
    """Downsampling factors are <= 1 by the choice of rho (rho*); allow rounding only."""
    if factors.size and float(np.max(factors)) > 1.0 + 1e-9:
        raise TBSError(f"internal error: downsampling factor {float(np.max(factors))!r} > 1")
    return np.minimum(factors, 1.0)


def _copy_latent(ls):
    out = LatentSample.of_items(ls.full())
    out.partial = None if ls.partial is None else ls.partial.copy()
    out.weight = ls.weight
    return out


def _restore_latent(full, partial, weight):
    ls = LatentSample.of_items(full)
    ls.partial = partial.copy() if partial.size else None
    ls.weight = float(weight)
    _check_latent(ls)
    return ls


def _check_latent(ls):
    """Internal invariant: floor(C) full items, a partial item iff C is fractional."""
    if ls.size != math.floor(ls.weight) or (ls.partial is not None) != (ls.weight > ls.size):
        raise TBSError(f"corrupt latent sample: {ls.size} full items, partial="
                       f"{ls.partial is not None}, weight={ls.weight!r}")
