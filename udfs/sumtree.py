"""Sampling primitives in memory: uniform draws without replacement in O(k),
and draws from an unnormalised categorical distribution whose weights change.

* :class:`UniformSampler`: k distinct indices of ``range(n)`` by a partial
  Fisher-Yates shuffle of an index array kept between calls (any
  permutation of the indices is a valid start, so the array is never
  reset): O(k) per call, independent of n.
* :class:`SumTree`: the weights as the leaves of a binary tree whose every
  node holds the sum of its two children (the root: the total).  A draw
  descends from the root with a uniform point of ``[0, total)``; an update
  rewrites a leaf and its ancestors; both O(log n).  Without replacement,
  the draws follow successive weighted draws: each next index with
  probability proportional to its weight among those not drawn yet.
* :class:`PrioritizedBuffer`: prioritised experience replay (Schaul et
  al., 2016) on a sum tree: priorities ``(|p| + eps) ** alpha``, importance
  weights ``(N P(i)) ** -beta``.

Every operation works on a whole batch with numpy: a fixed number of array
operations per tree level, none per draw or per index.  Randomness comes
from the project's keyed streams (stream ``WEIGHTED``, keyed by the number of
the call): the same seed and the same sequence of calls give the same
indices, on every platform and numpy version.
"""
import math

import numpy as np

from .errors import ParameterError, check_int
from .rng import PositionRNG, Purpose, check_seed, fresh_seed, stream

#: the stream index of each sampler (stream WEIGHTED)
_UNIFORM, _TREE = 0, 1
#: the levels of a sum tree's top that a draw searches at once (their lowest
#: 2**12 nodes' running sums), and an update recomputes whole
TOP_LEVELS = 12
#: indices up to this many are held as int32
_INT32_ITEMS = 1 << 31


def _seeded(seed):
    seed = fresh_seed() if seed is None else check_seed(seed)
    return seed, PositionRNG(seed)


def floats(values, plural):
    """*values* (an array or a sequence of numbers) as a float64 array, or
    ParameterError naming them (*plural*: what they are, e.g. "weights"):
    numbers only (integers, floats, booleans; not strings, objects or
    complex numbers)."""
    try:
        a = np.asarray(values)
    except (TypeError, ValueError):
        raise ParameterError(f"{plural} must be numbers") from None
    if a.dtype.kind not in "fiub":
        raise ParameterError(f"{plural} must be numbers (integers or floats), got "
                             f"dtype {a.dtype}")
    return a.astype(np.float64, copy=False)


def check_weights(weights, name="weight", plural=None):
    """*weights* as a float64 array, or ParameterError naming the first bad
    one: every weight finite and not negative (zero allowed: never drawn;
    any positive float, the subnormal ones too).  *name*: what one weight
    is called in messages, *plural*: what several are (default *name* + s)."""
    plural = plural or name + "s"
    w = floats(weights, plural)
    if w.ndim != 1:
        raise ParameterError(f"{plural} must be a 1-D array, got shape {w.shape}")
    bad = first_bad_weight(w)
    if bad is not None:
        i, what = bad
        raise ParameterError(f"{name} {i} is {what} ({float(w[i])!r}): {plural} must be finite "
                             "and not negative")
    return w


def first_bad_weight(w):
    """``(index, "NaN" | "infinite" | "negative")`` of the first weight of
    the float array *w* that is not finite and not negative, or None."""
    bad = ~(np.isfinite(w) & (w >= 0))
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return i, "NaN" if np.isnan(w[i]) else "infinite" if np.isinf(w[i]) else "negative"


# ---------------------------------------------------------------------------
# scaling: sums of any finite weights, exactly
# ---------------------------------------------------------------------------
#: scaled weights, *count* of them, add up to at most 2**SUM_EXPONENT: no sum,
#: running sum or point ``u * total`` overflows
SUM_EXPONENT = 960
#: a largest weight of at least 2**-SMALL_EXPONENT is in the ordinary range
#: (with the bound above: scale 1); below it, sums and points would lose
#: precision near the subnormal floats
SMALL_EXPONENT = 900


def weight_exponent(largest, count):
    """The exponent s by which weights whose largest is *largest* (a
    non-negative float), *count* of them, are scaled (``w * 2**s``, exact
    in floating point): 0 when they are in the ordinary range
    (``2**-SMALL_EXPONENT <= largest`` and ``count * largest <=
    2**SUM_EXPONENT``), else the s that makes ``count * largest`` as large
    as that bound allows, so that no sum overflows and the smallest weights
    stay as far from the subnormal floats as the largest lets them.

    Ratios of weights, and so every probability and every ranking of keys
    ``E / w``, are the same for any s."""
    largest, count = float(largest), max(1, int(count))
    if not largest > 0:
        return 0
    _, e = math.frexp(largest)                        # largest < 2**e
    bits = count.bit_length()                         # count < 2**bits
    if e - 1 >= -SMALL_EXPONENT and e + bits <= SUM_EXPONENT:
        return 0
    return SUM_EXPONENT - e - bits


def scaled(w, exponent):
    """``w * 2**exponent`` (float64), exactly where the result is a normal
    float; no warning where it overflows (inf) or underflows."""
    if not exponent:
        return np.asarray(w, np.float64)
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(np.asarray(w, np.float64), int(exponent))


# ---------------------------------------------------------------------------
# uniform, without replacement
# ---------------------------------------------------------------------------
def partial_shuffle(index, swaps):
    """Apply the swaps of a partial Fisher-Yates shuffle to *index* in place
    and return the drawn values: step ``i`` swaps ``index[i]`` with
    ``index[swaps[i]]`` (``i <= swaps[i] < index.size``) and draws the value
    that lands at ``i``.

    The steps depend on each other only where a step's target was already a
    target (or is the position a later step starts from), so the result is
    resolved for all steps at once: the value a step draws is the value its
    target held at that time, which is either the initial one or the value
    the last earlier step with the same target moved there, which is the
    value *that* step's position held at its time, and so on.  The chains
    are followed by pointer jumping (rounds: the logarithm of the longest
    chain, almost always one or two).  The same values and the same final
    array as the steps one by one; O(k log k) for k steps, independent of
    the array's size."""
    k = swaps.size
    if k == 0:
        return index[:0].astype(np.int64)
    step = np.arange(k, dtype=np.int64)
    swaps = swaps.astype(np.int64, copy=False)
    by_target = np.argsort(swaps, kind="stable")     # by (target, step)
    targets = swaps[by_target]
    same = targets[1:] == targets[:-1]
    # the last earlier step with the same target as step i (-1: none)
    earlier_same = np.full(k, -1, dtype=np.int64)
    earlier_same[by_target[1:][same]] = by_target[:-1][same]
    # the last earlier step whose target is position i (step i's own position)
    key = targets.astype(np.uint64) * np.uint64(k) + by_target.astype(np.uint64)
    at = np.searchsorted(key, step.astype(np.uint64) * np.uint64(k) + step.astype(np.uint64)) - 1
    hit = at >= 0
    hit[hit] = targets[at[hit]] == step[hit]
    earlier_here = np.where(hit, by_target[np.maximum(at, 0)], -1)
    # moved[i]: the value at position i when step i runs (it is moved to swaps[i])
    root = np.where(earlier_here < 0, step, earlier_here)
    while True:
        further = root[root]
        if np.array_equal(further, root):
            break
        root = further
    moved = index[root]
    drawn = np.where(earlier_same < 0, index[swaps], moved[np.maximum(earlier_same, 0)])
    last = np.ones(k, dtype=bool)
    last[:-1] = ~same
    index[targets[last]] = moved[by_target[last]]
    index[:k] = drawn
    return drawn.astype(np.int64)


class UniformSampler:
    """k distinct indices of ``range(n)``, uniformly, in O(k) per call.

    >>> s = UniformSampler(10_000_000, seed=7)
    >>> batch = s.sample(256)         # 256 distinct indices, in draw order

    Every ordered k-subset is equally likely; the index array (n int32 or
    int64) is allocated once and reused by every call.  *seed*: an integer
    (None: a fresh one, :attr:`seed`)."""

    def __init__(self, n, seed=None):
        self.n = check_int("n", n, 1, 1 << 32)
        self.seed, self._rng = _seeded(seed)
        self._index = np.arange(n, dtype=np.int32 if n <= _INT32_ITEMS else np.int64)
        self._calls = 0

    def sample(self, k):
        """k distinct indices (int64), in the order drawn."""
        k = check_int("k", k, 0, self.n)
        draws = self._rng.keyed(stream(Purpose.WEIGHTED, _UNIFORM), self._calls)
        self._calls += 1
        step = np.arange(k, dtype=np.int64)
        swaps = step + draws.below(self.n - step)      # step i: uniform in [i, n)
        return partial_shuffle(self._index, swaps)


# ---------------------------------------------------------------------------
# weighted: the sum tree
# ---------------------------------------------------------------------------
class SumTree:
    """Draws from the unnormalised categorical distribution of *weights*,
    with weights that change: O(log n) per draw and per update.

    >>> tree = SumTree(losses, seed=7)
    >>> idx = tree.sample(256)                    # with replacement
    >>> idx = tree.sample(256, replace=False)     # distinct, successive draws
    >>> tree.update(idx, new_losses)              # rewrite those weights
    >>> tree.total, tree.weights(idx)

    Weights are any finite floats that are not negative (the subnormal ones
    too, and sums beyond the largest float); a zero weight is never drawn.
    The tree is an array of ``2 m`` doubles (m: n rounded up to a power of
    two), node ``j``'s children at ``2j`` and ``2j + 1``, the root at 1.
    Sums are recomputed from the children at every update, so they do not
    drift.  The tree holds the weights scaled by a power of two
    (:func:`weight_exponent`, exact; 1 for weights in the ordinary range), so
    that no sum overflows and tiny weights keep their precision; the
    weights as given are kept beside it while the scale is not 1, and an
    update that takes the total out of range rescales the tree."""

    def __init__(self, weights, seed=None):
        w = check_weights(weights)
        if w.size == 0:
            raise ParameterError("a sum tree needs at least one weight")
        self.n = w.size
        self.depth = max(0, (self.n - 1).bit_length())
        self._leaf0 = 1 << self.depth
        self._tree = np.zeros(2 * self._leaf0, dtype=np.float64)
        self._pairs = self._tree.reshape(-1, 2)        # row j: node j's children
        self._exponent, self._given = 0, None          # the scale; the weights if not 1
        self._positive = int(np.count_nonzero(w))
        self._rescale(w)
        self._top = min(self.depth, TOP_LEVELS)
        self._starts = None       # where each top node's interval starts (None: to compute)
        self.seed, self._rng = _seeded(seed)
        self._calls = 0

    def __len__(self):
        return self.n

    @property
    def total(self):
        """The sum of the weights (inf when it exceeds the largest float;
        :meth:`probabilities` are exact whatever the sum)."""
        with np.errstate(over="ignore"):
            return float(np.ldexp(self._tree[1], -self._exponent))

    def weights(self, indices=None):
        """The weights at *indices* (all of them by default), a copy."""
        given = self._given
        if given is None:
            given = self._tree[self._leaf0:self._leaf0 + self.n]
        return given.copy() if indices is None else given[self._check_indices(indices)]

    def probabilities(self, indices=None):
        """The probability of drawing each index of *indices* (all by
        default): its weight over the sum, computed on the scaled tree (so
        exact also where the sum exceeds the largest float)."""
        leaves = self._tree[self._leaf0:self._leaf0 + self.n]
        if indices is not None:
            leaves = leaves[self._check_indices(indices)]
        total = self._tree[1]
        return leaves / total if total > 0 else np.zeros(leaves.size)

    def _rescale(self, w=None):
        """Choose the scale for the weights *w* (default: the current
        ones), write the scaled leaves and recompute every sum."""
        if w is None:
            w = self.weights()
        self._exponent = weight_exponent(w.max(), self.n)
        self._given = w.copy() if self._exponent else None
        self._tree[self._leaf0:self._leaf0 + self.n] = scaled(w, self._exponent)
        self._sum_levels(self.depth)
        self._starts = None

    def _out_of_range(self):
        """Whether the scaled total left the range the scale was chosen for
        (an update made it overflow, or made every weight tiny)."""
        total = self._tree[1]
        return not total <= 2.0 ** (SUM_EXPONENT + 8) or (
            self._positive > 0 and total < 2.0 ** -SMALL_EXPONENT)

    def _check_indices(self, indices):
        idx = np.asarray(indices)
        if idx.ndim != 1 or not (idx.size == 0 or np.issubdtype(idx.dtype, np.integer)):
            raise ParameterError("indices must be a 1-D array of integers")
        idx = idx.astype(np.int64, copy=False)
        if idx.size and (idx.min() < 0 or idx.max() >= self.n):
            bad = idx[(idx < 0) | (idx >= self.n)][0]
            raise ParameterError(f"index {bad} is out of range [0, {self.n})")
        return idx

    def update(self, indices, weights):
        """Set the weights at *indices* (an index given twice: its last
        weight); O(log n) per index, all at once."""
        idx = self._check_indices(indices)
        w = check_weights(np.broadcast_to(floats(weights, "weights"), idx.shape)
                          if np.ndim(weights) == 0 else weights)
        if w.size != idx.size:
            raise ParameterError(f"{idx.size} indices but {w.size} weights")
        if idx.size == 0:
            return
        if idx.size > 1:                              # the last weight of each index
            rev = idx[::-1]
            uniq, first = np.unique(rev, return_index=True)
            idx, w = uniq, w[::-1][first]
        self._set(idx, w)

    def _sum_levels(self, below):
        """Recompute every node above level *below* from its children."""
        tree = self._tree
        for d in range(below - 1, -1, -1):
            a, b = 1 << d, 2 << d
            np.add(tree[2 * a:2 * b:2], tree[2 * a + 1:2 * b:2], out=tree[a:b])

    def _set(self, idx, w):
        """Set the weights of distinct leaves *idx* to *w* (as given) and
        rewrite their ancestors (:meth:`_write`); rescale the whole tree if
        the total left the scale's range."""
        node = idx + self._leaf0
        old = self._tree[node] if self._given is None else self._given[idx]
        self._positive += int(np.count_nonzero(w > 0)) - int(np.count_nonzero(old > 0))
        if self._given is not None:
            self._given[idx] = w
        with np.errstate(over="ignore", invalid="ignore"):
            self._write(node, scaled(w, self._exponent))
        if self._out_of_range():
            self._rescale()

    def _write(self, node, w):
        """Write the scaled weights *w* at leaves *node* and their ancestors:
        node by node up to the top levels (four array operations a level),
        which are then recomputed whole (2**TOP_LEVELS nodes, one operation
        a level)."""
        self._tree[node] = w
        tree = self._tree
        children = np.empty((node.size, 2))
        left, right = children[:, 0], children[:, 1]
        sums = np.empty(node.size)
        for _ in range(self.depth - self._top):
            np.right_shift(node, 1, out=node)
            np.take(self._pairs, node, axis=0, out=children)
            np.add(left, right, out=sums)
            tree[node] = sums
        self._sum_levels(self._top)
        self._starts = None

    def sample(self, k, replace=True):
        """k indices drawn with probability proportional to their weights
        (int64, in the order drawn).  *replace* False: k distinct indices,
        in the law of successive weighted draws (each next one in proportion
        to its weight among those not drawn yet); the weights are the same
        afterwards."""
        k = check_int("k", k, 0)
        if k and self._positive == 0:
            raise ParameterError("no weight is positive: nothing can be drawn")
        if not replace and k > self._positive:
            raise ParameterError(f"k = {k} distinct draws, but only {self._positive} "
                                 "weights are positive")
        draws = self._rng.keyed(stream(Purpose.WEIGHTED, _TREE), self._calls)
        self._calls += 1
        if replace:
            return self._descend(draws.random(k))
        return self._distinct(draws, k)

    def _descend(self, u, first_only=False):
        """The leaves at the points ``u * total`` (u in [0, 1)), in the order
        of *u*; *first_only*: each leaf only where it first appears.

        The points go down in increasing order (their nodes at each level
        then lie in increasing order in memory, which the cache rewards):
        the top TOP_LEVELS levels in one search among the intervals of the
        nodes below them (their weights' running sums), then one level at a
        time, five array operations a level for all points.  A point the
        rounding of the sums pushed past the last weight of a subtree ends
        on a zero weight; those few descend again with a guard
        (:meth:`_guarded`)."""
        order = np.argsort(u)
        v = u[order]
        v *= self._tree[1]
        top = self._top
        if top:
            starts = self._top_starts()
            node = np.searchsorted(starts, v, side="right")
            np.subtract(node, 1, out=node)
            np.minimum(node, (1 << top) - 1, out=node)      # a point at the very end
            v -= starts[node]
            node += 1 << top
        else:
            node = np.ones(v.size, dtype=np.int64)
        tree = self._tree
        left = np.empty(v.size)
        right = np.empty(v.size, dtype=bool)
        for _ in range(self.depth - top):
            np.left_shift(node, 1, out=node)
            tree.take(node, out=left)
            np.greater_equal(v, left, out=right)
            np.subtract(v, left, out=v, where=right)
            np.add(node, right, out=node)
        zero = tree[node] == 0
        if zero.any():
            node[zero] = self._guarded(u[order[zero]])
        node -= self._leaf0
        if first_only and (node[1:] >= node[:-1]).all():
            # leaves in the points' order: a leaf's points are one run, and
            # its first appearance is the run's earliest point
            runs = np.flatnonzero(node[1:] != node[:-1]) + 1
            runs = np.concatenate([[0], runs]) if node.size else runs
            first = np.minimum.reduceat(order, runs) if node.size else order
            first.sort()
            leaves = np.empty(u.size, dtype=np.int64)
            leaves[order] = node
            return leaves[first]
        leaves = np.empty_like(node)
        leaves[order] = node
        if first_only:
            _, first = np.unique(leaves, return_index=True)
            return leaves[np.sort(first)]
        return leaves

    def _top_starts(self):
        """The running sums of the weights of the top levels' lowest nodes,
        from 0 (each node's interval starts at its entry): computed once
        after each update."""
        if self._starts is None:
            a = 1 << self._top
            starts = np.empty(a)
            starts[0] = 0.0
            np.cumsum(self._tree[a:2 * a - 1], out=starts[1:])
            self._starts = starts
        return self._starts

    def _guarded(self, u):
        """:meth:`_descend` from the root, never into a subtree of weight
        zero: the rounding at an edge goes to the nearest weighted side."""
        v = u * self._tree[1]
        node = np.ones(v.size, dtype=np.int64)
        for _ in range(self.depth):
            children = self._pairs[node]
            left, right = children[:, 0], children[:, 1]
            go = ((v >= left) & (right > 0)) | (left <= 0)
            v = np.where(go, v - left, v)
            node = 2 * node + go
        return node

    def _distinct(self, draws, k):
        """:meth:`sample` without replacement.  The distinct values of i.i.d.
        draws, in the order they first appear, are successive weighted
        draws; rounds of draws go on until k have appeared, and after a
        round the indices drawn so far get weight zero (restored at the end),
        so a few heavy weights cannot make the rounds long."""
        parts, have = [], 0
        removed = []                    # (indices, their weights) set to zero
        try:
            while have < k:
                need = k - have
                new = self._descend(draws.random(need + need // 16 + 4), first_only=True)[:need]
                parts.append(new)
                have += new.size
                if have < k:
                    removed.append((new, self.weights(new)))
                    self._set(new, np.zeros(new.size))
        finally:
            if removed:
                self._set(np.concatenate([i for i, _ in removed]),
                          np.concatenate([w for _, w in removed]))
        return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


# ---------------------------------------------------------------------------
# prioritised experience replay
# ---------------------------------------------------------------------------
class PrioritizedBuffer:
    """A replay buffer of *capacity* items drawn in proportion to their
    priorities (Schaul et al., "Prioritized Experience Replay", 2016).

    >>> buf = PrioritizedBuffer(100_000, alpha=0.6, beta=0.4, seed=7)
    >>> slots = buf.add(transitions)              # rows of an array
    >>> slots, batch, weights = buf.sample(256)
    >>> buf.update(slots, td_errors)              # new priorities

    An item's weight in the tree is ``(|priority| + eps) ** alpha``; a new
    item gets the largest priority seen so far (1 at first), so it is drawn
    soon.  ``sample`` returns the slots, their items and the importance
    weights ``(N P(i)) ** -beta`` divided by the batch's largest (N: the
    items held); *beta* may be given per call (annealed towards 1).  Past
    *capacity*, the oldest items are overwritten."""

    def __init__(self, capacity, alpha=0.6, beta=0.4, eps=1e-6, seed=None):
        self.capacity = check_int("capacity", capacity, 1)
        self.alpha = _nonnegative("alpha", alpha)
        self.beta = _nonnegative("beta", beta)
        self.eps = _nonnegative("eps", eps)
        self.tree = SumTree(np.zeros(self.capacity), seed=seed)
        self.seed = self.tree.seed
        self._items = None
        self._next = 0             # the slot the next item goes to
        self._held = 0
        self._max_priority = 1.0

    def __len__(self):
        return self._held

    def add(self, items):
        """Store the rows of *items* (an array, the first axis counts them);
        returns their slots."""
        items = np.asarray(items)
        if items.ndim == 0:
            raise ParameterError("items must be an array whose first axis counts them")
        if self._items is None:
            self._items = np.zeros((self.capacity,) + items.shape[1:], dtype=items.dtype)
        elif items.shape[1:] != self._items.shape[1:]:
            raise ParameterError(f"items of shape {items.shape[1:]} do not match the "
                                 f"buffer's {self._items.shape[1:]}")
        m = items.shape[0]
        slots = (self._next + np.arange(m, dtype=np.int64)) % self.capacity
        if m > self.capacity:      # only the last `capacity` of them stay
            slots, items = slots[-self.capacity:], items[-self.capacity:]
        self._items[slots] = items
        self.tree.update(slots, np.full(slots.size, self._weight(self._max_priority)))
        self._next = (self._next + m) % self.capacity
        self._held = min(self.capacity, self._held + m)
        return slots

    def _weight(self, priority):
        return (np.abs(priority) + self.eps) ** self.alpha

    def sample(self, k, beta=None, replace=True):
        """``(slots, items, importance weights)`` of k items drawn in
        proportion to their priorities (*replace* False: distinct items)."""
        if self._held == 0:
            raise ParameterError("the buffer is empty")
        beta = self.beta if beta is None else _nonnegative("beta", beta)
        slots = self.tree.sample(k, replace=replace)
        p = self.tree.probabilities(slots)
        with np.errstate(over="ignore", divide="ignore"):
            weights = (self._held * p) ** -beta
        if weights.size:
            weights /= weights.max()
        return slots, self._items[slots], weights

    def update(self, slots, priorities):
        """New priorities for the items in *slots* (e.g. their TD errors)."""
        slots = self.tree._check_indices(slots)
        if slots.size and slots.max() >= self._held:
            raise ParameterError(f"slot {int(slots.max())} holds no item yet")
        priorities = check_weights(np.abs(floats(priorities, "priorities")), "priority",
                                   "priorities")
        if priorities.size != slots.size:
            raise ParameterError(f"{slots.size} slots but {priorities.size} priorities")
        self.tree.update(slots, self._weight(priorities))
        if priorities.size:
            self._max_priority = max(self._max_priority, float(np.abs(priorities).max()))


def _nonnegative(name, value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number, got {value!r}") from None
    if not np.isfinite(value) or value < 0:
        raise ParameterError(f"{name} must be finite and not negative, got {value!r}")
    return value
