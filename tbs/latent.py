"""Latent (fractional) samples: decisions and their application to item arrays.

A latent sample L = (A, pi, C) holds floor(C) *full* items A, at most one
*partial* item pi (present exactly when C is not an integer) and a real sample
weight C.  A realized sample contains every full item and the partial item with
probability frac(C), so its expected size is C (GetSample, Algorithm 4).

The module is split in two layers so that a distributed driver can decide and
workers can apply:

* **decisions** -- :func:`plan_downsample` (Algorithm 5), :func:`plan_union`
  (Algorithm 6) and :func:`includes_partial` (Algorithm 4) take only numbers
  (number of full items, whether a partial item exists, the weight, the factor
  theta and one uniform u in (0, 1]) and return *how many* items stay full,
  whether one full item becomes the new partial item and what happens to the
  old partial item.  :func:`plan_downsample_many` is the vectorized form used
  for many latent samples at once.
* **application** -- :class:`LatentSample` stores the items of one latent
  sample in a growable numpy buffer; :func:`apply_downsample` and
  :func:`apply_union` carry out a plan, choosing *which* full items with
  :func:`tbs.randomness.choose` in time proportional to the number of items
  removed (or kept, whichever is smaller) -- never a coin per item.

Floating point: weights within a relative 1e-12 of an integer are snapped to
that integer (:func:`snap`), so the invariant "a partial item exists iff the
weight is fractional" survives rounding; the effect on any inclusion
probability is below 1e-12 * max(1, C).
"""
import math
from dataclasses import dataclass

import numpy as np

from .randomness import choose, split_count

__all__ = ["TOL", "snap", "PARTIAL_NONE", "PARTIAL_KEEP", "PARTIAL_FULL", "DownsamplePlan",
           "UnionPlan", "plan_downsample", "plan_downsample_many", "plan_union", "plan_union_many",
           "includes_partial", "LatentSample", "apply_downsample", "apply_union", "get_sample",
           "select_for_downsample", "split_plan", "partition_plan"]

TOL = 1e-12

#: What happens to the existing partial item (also PARTIAL_NONE if there is none).
PARTIAL_NONE = 0   # dropped (or there was none)
PARTIAL_KEEP = 1   # stays the partial item
PARTIAL_FULL = 2   # becomes a full item


def snap(c):
    """``c`` rounded to the nearest integer if within TOL * max(1, |c|) of it."""
    r = round(c)
    return float(r) if abs(c - r) <= TOL * max(1.0, abs(c)) else float(c)


def _snap_array(c):
    r = np.rint(c)
    return np.where(np.abs(c - r) <= TOL * np.maximum(1.0, np.abs(c)), r, c)


# ----------------------------------------------------------------------------- decisions

@dataclass(frozen=True)
class DownsamplePlan:
    """Outcome of Algorithm 5 as counts.

    Of the ``n_full`` current full items, ``keep_full`` stay full,
    ``to_partial`` (0 or 1) becomes the new partial item and the rest are
    evicted -- a uniformly random split.  ``old_partial`` is a PARTIAL_* code.
    """
    weight: float
    keep_full: int
    to_partial: int
    old_partial: int

    def evicted(self, n_full):
        return n_full - self.keep_full - self.to_partial


def plan_downsample_many(n_full, has_partial, weight, theta, u):
    """Vectorized Algorithm 5.

    Arguments are arrays (or scalars) of: number of full items, partial-item
    flag, weight C, factor theta (values >= 1 mean "unchanged", <= 0 "empty")
    and a uniform u in (0, 1].  Returns arrays
    ``(new_weight, keep_full, to_partial, old_partial)``.
    """
    nf = np.asarray(n_full, dtype=np.int64)
    hp = np.asarray(has_partial, dtype=bool)
    c = np.asarray(weight, dtype=np.float64)
    th = np.asarray(theta, dtype=np.float64)
    u = np.asarray(u, dtype=np.float64)
    nf, hp, c, th, u = np.broadcast_arrays(nf, hp, c, th, u)
    frac_c = np.where(hp, c - nf, 0.0)

    ident = th >= 1.0
    new_c = np.where(ident, c, _snap_array(np.maximum(th, 0.0) * c))
    new_c = np.where(new_c < 0.0, 0.0, new_c)
    fl = np.floor(new_c).astype(np.int64)
    integral = new_c == fl
    zero = ~ident & (new_c == 0.0)
    live = ~ident & ~zero

    keep = np.zeros(nf.shape, dtype=np.int64)
    to_p = np.zeros(nf.shape, dtype=np.int64)
    old = np.full(nf.shape, PARTIAL_NONE, dtype=np.int8)

    # theta >= 1: nothing changes.
    keep = np.where(ident, nf, keep)
    old = np.where(ident & hp, PARTIAL_KEEP, old)

    # Case 1 (lines 4-7): no full item survives.  With probability frac(C)/C the
    # partial item stays partial; otherwise a random full item becomes partial
    # (Swap1) and the old partial item is discarded with A'.
    case1 = live & (fl == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        stay = u <= np.where(c > 0.0, frac_c / np.where(c > 0.0, c, 1.0), 0.0)
    to_p = np.where(case1 & ~stay, 1, to_p)
    old = np.where(case1 & stay, PARTIAL_KEEP, old)

    # Case 2 (lines 8-10): no full item is deleted.  Swap with probability
    # 1 - (1 - theta frac(C)) / (1 - frac(C')); an integral C' then drops the
    # (new) partial item (lines 18-19).
    case2 = live & (fl > 0) & (fl == nf)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (1.0 - th * frac_c) / (1.0 - (new_c - fl))
    swap2 = case2 & (u > r)
    keep = np.where(case2, np.where(swap2, nf - 1, nf), keep)
    to_p = np.where(swap2 & ~integral, 1, to_p)
    old = np.where(swap2, PARTIAL_FULL, old)
    old = np.where(case2 & ~swap2 & ~integral, PARTIAL_KEEP, old)

    # Case 3 (lines 11-17): items are deleted.  With probability theta frac(C)
    # the partial item becomes full and floor(C') - 1 random full items stay
    # full; otherwise it is discarded and floor(C') random full items stay.
    # One further random full item becomes partial unless C' is integral.
    case3 = live & (fl > 0) & (fl < nf)
    promote = case3 & hp & (u <= th * frac_c)
    keep = np.where(case3, np.where(promote, fl - 1, fl), keep)
    to_p = np.where(case3 & ~integral, 1, to_p)
    old = np.where(promote, PARTIAL_FULL, old)
    return new_c, keep, to_p, old


def plan_downsample(n_full, has_partial, weight, theta,
                    u):
    """Algorithm 5 for one latent sample.

    Same case analysis as :func:`plan_downsample_many` in scalar Python (about
    30x faster for a single latent sample); the two are checked against each
    other in the tests.
    """
    if theta >= 1.0:
        return DownsamplePlan(weight, n_full, 0, PARTIAL_KEEP if has_partial else PARTIAL_NONE)
    new_c = snap(max(theta, 0.0) * weight)
    if new_c <= 0.0:
        return DownsamplePlan(0.0, 0, 0, PARTIAL_NONE)
    frac_c = weight - n_full if has_partial else 0.0
    fl = math.floor(new_c)
    integral = new_c == fl
    if fl == 0:                                     # case 1: no full item survives
        if u <= frac_c / weight:
            return DownsamplePlan(new_c, 0, 0, PARTIAL_KEEP)
        return DownsamplePlan(new_c, 0, 1, PARTIAL_NONE)
    if fl == n_full:                                # case 2: nothing deleted
        if u > (1.0 - theta * frac_c) / (1.0 - (new_c - fl)):
            return DownsamplePlan(new_c, n_full - 1, 0 if integral else 1, PARTIAL_FULL)
        return DownsamplePlan(new_c, n_full, 0, PARTIAL_NONE if integral else PARTIAL_KEEP)
    to_p = 0 if integral else 1                     # case 3: items deleted
    if has_partial and u <= theta * frac_c:
        return DownsamplePlan(new_c, fl - 1, to_p, PARTIAL_FULL)
    return DownsamplePlan(new_c, fl, to_p, PARTIAL_NONE)


@dataclass(frozen=True)
class UnionPlan:
    """Outcome of Algorithm 6: the weight, whose partial item (0 none, 1 first,
    2 second) remains partial, and whose partial items become full."""
    weight: float
    partial: int
    to_full: tuple


def plan_union(n1, has1, c1, n2, has2, c2,
               u):
    """Algorithm 6 for two disjoint latent samples, as a plan."""
    f1 = c1 - n1 if has1 else 0.0
    f2 = c2 - n2 if has2 else 0.0
    base = n1 + n2
    if not has1 and not has2:
        return UnionPlan(float(base), 0, ())
    if not has2:
        return UnionPlan(base + f1, 1, ())
    if not has1:
        return UnionPlan(base + f2, 2, ())
    total = c1 + c2
    s = f1 + f2
    if abs(total - round(total)) <= TOL * max(1.0, total) and abs(s - 1.0) < 0.5:
        # frac(C1) + frac(C2) = 1: one partial item becomes full, the other goes.
        return UnionPlan(float(base + 1), 0, (1,) if u <= f1 else (2,))
    if s < 1.0:
        return UnionPlan(base + s, 1 if u <= f1 / s else 2, ())
    # frac(C1) + frac(C2) > 1: one partial item becomes full, the other stays partial.
    if u <= (1.0 - f1) / ((1.0 - f1) + (1.0 - f2)):
        return UnionPlan(base + s, 1, (2,))
    return UnionPlan(base + s, 2, (1,))


def plan_union_many(n_full, has_partial, weights, u):
    """Iterated Algorithm 6: UNION(... UNION(UNION(L_0, L_1), L_2) ..., L_{m-1}).

    Takes per-latent-sample lists (full counts, partial flags, weights) and one
    uniform per latent sample; returns ``(weight, partial_owner, promoted)``:
    the union's weight, the index of the latent sample whose partial item is
    the union's partial item (-1: none) and the indices whose partial items
    become full.  Same arithmetic and decisions as folding :func:`plan_union`
    (checked in the tests), without creating a plan object per step.
    """
    n_run, c_run, owner = 0, 0.0, -1
    promoted = []
    for i in range(len(weights)):
        n2 = int(n_full[i])
        c2 = float(weights[i])
        if not has_partial[i]:
            c_run = (n_run + n2) + (c_run - n_run)
            n_run += n2
            continue
        f2 = c2 - n2
        base = n_run + n2
        if owner < 0:
            n_run, c_run, owner = base, base + f2, i
            continue
        f1 = c_run - n_run
        total = c_run + c2
        s = f1 + f2
        if abs(total - round(total)) <= TOL * max(1.0, total) and abs(s - 1.0) < 0.5:
            promoted.append(owner if u[i] <= f1 else i)
            n_run, c_run, owner = base + 1, float(base + 1), -1
        elif s < 1.0:
            if not u[i] <= f1 / s:
                owner = i
            n_run, c_run = base, base + s
        else:
            if u[i] <= (1.0 - f1) / ((1.0 - f1) + (1.0 - f2)):
                promoted.append(i)
            else:
                promoted.append(owner)
                owner = i
            n_run, c_run = base + 1, base + s
    return c_run, owner, promoted


def includes_partial(weight, n_full, u):
    """Algorithm 4: whether the realized sample includes the partial item."""
    return u <= weight - n_full


# ----------------------------------------------------------------------------- application

def isin_items(values, items):
    """Which of ``values`` equal one of ``items`` (records compare field by
    field, as bytes)."""
    if values.dtype.names is None and values.dtype.kind != "V":
        return np.isin(values, items)
    raw = np.dtype((np.void, values.dtype.itemsize))
    v = np.ascontiguousarray(values).view(raw)
    w = np.ascontiguousarray(np.asarray(items, dtype=values.dtype)).view(raw)
    return np.isin(v, w)


class LatentSample:
    """Items of one latent sample: full items in a growable buffer plus an
    optional partial item (a length-1 array)."""

    __slots__ = ("buf", "size", "partial", "weight")

    def __init__(self, dtype=np.int64):
        self.buf = np.empty(0, dtype=dtype)
        self.size = 0
        self.partial = None
        self.weight = 0.0

    @classmethod
    def of_items(cls, items, copy=True):
        """The latent sample (items, no partial, |items|)."""
        ls = cls(items.dtype)
        ls.buf = items.copy() if copy else items
        ls.size = int(items.size)
        ls.weight = float(items.size)
        return ls

    @property
    def dtype(self):
        return self.buf.dtype

    @property
    def has_partial(self):
        return self.partial is not None

    def full(self):
        """View of the full items."""
        return self.buf[: self.size]

    def footprint(self):
        return self.size + (1 if self.partial is not None else 0)

    def append(self, items):
        m = int(items.size)
        if m == 0:
            return
        need = self.size + m
        if need > self.buf.size:
            grown = np.empty(max(need, 2 * self.buf.size, 16), dtype=self.buf.dtype)
            grown[: self.size] = self.buf[: self.size]
            self.buf = grown
        self.buf[self.size:need] = items
        self.size = need

    def remove(self, positions):
        """Delete the full items at the given distinct positions (O(len(positions)))."""
        e = int(positions.size)
        if e == 0:
            return
        new_size = self.size - e
        in_tail = positions[positions >= new_size] - new_size
        tail_hit = np.zeros(e, dtype=bool)
        tail_hit[in_tail] = True
        holes = positions[positions < new_size]
        movers = new_size + np.flatnonzero(~tail_hit)
        self.buf[holes] = self.buf[movers]
        self.size = new_size
        if self.size < self.buf.size // 4 and self.buf.size > 64:
            self.buf = self.buf[: max(2 * self.size, 16)].copy()

    def replace(self, positions, items):
        """Delete the full items at ``positions`` and add ``items`` (new items
        first fill the freed slots, so the work is O(len(positions) + len(items)))."""
        m = min(int(positions.size), int(items.size))
        if m:
            self.buf[positions[:m]] = items[:m]
        if positions.size > m:
            self.remove(positions[m:])
        elif items.size > m:
            self.append(items[m:])

    def discard(self, items):
        """Erase every stored copy of ``items`` (see :func:`isin_items`); the
        weight drops by one per full item and to its integral part when the
        partial item goes, so every other item keeps its inclusion
        probability.  Returns how many items were erased."""
        hit = np.flatnonzero(isin_items(self.full(), items))
        self.remove(hit)
        erased = int(hit.size)
        self.weight = snap(self.weight - erased)
        if self.partial is not None and bool(isin_items(self.partial, items)[0]):
            self.partial = None
            self.weight = float(self.size)
            erased += 1
        return erased

    def realize(self, include_partial):
        """A copy of the realized sample (full items, plus the partial item if asked)."""
        if include_partial and self.partial is not None:
            return np.concatenate([self.buf[: self.size], self.partial])
        return self.buf[: self.size].copy()


def select_for_downsample(rng, n_full, plan,
                          scratch=None, tag="sel"):
    """Which full items a plan keeps: returns ``(mode, positions, partial_pos)``.

    ``mode`` is ``"remove"`` (``positions`` are to be deleted) or ``"keep"``
    (``positions`` are the survivors), whichever list is shorter;
    ``partial_pos`` is the position of the item that becomes partial, or -1.
    """
    evict = plan.evicted(n_full)
    moved = evict + plan.to_partial
    if moved <= plan.keep_full:
        pos = choose(rng, n_full, moved, scratch, tag)
        mode = "remove"
    else:
        pos = choose(rng, n_full, plan.keep_full + plan.to_partial, scratch, tag)
        mode = "keep"
    partial_pos = -1
    if plan.to_partial:
        j = int(rng.integers(pos.size))
        partial_pos = int(pos[j])
        if mode == "keep":              # drop it from the survivors (order is irrelevant)
            pos[j] = pos[-1]
            pos = pos[:-1]
    return mode, pos, partial_pos


def split_plan(rng, sizes, moved, to_partial=0):
    """A plan's choice of items, split over partitions (distributed decisions).

    ``moved`` of the full items, held in partitions of the given ``sizes``,
    leave the full set (the evicted ones plus, when ``to_partial`` is 1, the
    one that becomes the new partial item).  Returns ``(counts, partial)``:
    how many of them fall in each partition (multivariate hypergeometric, as
    if ``moved`` items were chosen uniformly from all of them) and the
    partition holding the new partial item (a uniform one of the moved items,
    i.e. partition ``p`` with probability ``counts[p] / moved``; -1 if none).
    Each partition then applies :func:`partition_plan` with
    :func:`select_for_downsample` on its own items.
    """
    counts = split_count(rng, sizes, moved)
    partial = -1
    if to_partial:
        j = int(rng.integers(int(moved)))
        partial = int(np.searchsorted(np.cumsum(counts), j, side="right"))
    return counts, partial


def partition_plan(n_full, moved, to_partial):
    """The plan one partition applies after :func:`split_plan`: of its
    ``n_full`` full items, ``moved`` leave the full set and, if
    ``to_partial``, one of those becomes the partial item.  (Only the counts
    matter to :func:`select_for_downsample`; the weight is the driver's.)"""
    return DownsamplePlan(math.nan, int(n_full) - int(moved), int(to_partial), PARTIAL_NONE)


def apply_downsample(ls, plan, rng,
                     incoming=None, scratch=None):
    """Carry out ``plan`` on ``ls`` in place.

    ``incoming`` (optional) are items to add as full items afterwards; they
    reuse the slots freed by evictions (see :meth:`LatentSample.replace`).
    """
    n_full = ls.size
    old = ls.partial
    new_partial = None
    if plan.keep_full == n_full and plan.to_partial == 0:
        if incoming is not None:
            ls.append(incoming)
    else:
        mode, pos, ppos = select_for_downsample(rng, n_full, plan, scratch, "latent")
        if ppos >= 0:
            new_partial = ls.buf[ppos:ppos + 1].copy()
        if mode == "remove":
            if incoming is not None:
                ls.replace(pos, incoming)
            else:
                ls.remove(pos)
        else:
            kept = ls.buf[pos]
            ls.buf, ls.size = kept, int(kept.size)
            if incoming is not None:
                ls.append(incoming)
    if plan.old_partial == PARTIAL_FULL:
        ls.append(old)
    kept = old if plan.old_partial == PARTIAL_KEEP else None
    ls.partial = new_partial if plan.to_partial else kept
    ls.weight = plan.weight


def get_sample(ls, u):
    """Algorithm 4 (GetSample): the full items, plus the partial item if
    ``u <= frac(C)``; ``u`` is a uniform on (0, 1]."""
    return ls.realize(includes_partial(ls.weight, ls.size, u))


def apply_union(dst, src, plan):
    """Merge ``src`` into ``dst`` (in place) according to ``plan``; returns ``dst``."""
    p1, p2 = dst.partial, src.partial
    dst.append(src.full())
    for which in plan.to_full:
        dst.append(p1 if which == 1 else p2)
    dst.partial = p1 if plan.partial == 1 else (p2 if plan.partial == 2 else None)
    dst.weight = plan.weight
    return dst
