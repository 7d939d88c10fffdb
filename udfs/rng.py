"""Keyed random numbers and frozen distributions: the RNG contract of samplegen.

Every random number samplegen draws -- for a sample, a time-biased sample or
a synthetic matrix -- is a pure function of ``(seed, stream, position)``.
Machines that hold different column blocks of the same row, or that were
handed a different share of the blocks or of a batch, therefore reach the
same decision for that row without talking to each other; and the same seed
gives the same bytes whatever the engine, the partitioning or the numpy
version.

Bits and distributions are kept apart, as in ``numpy.random``.

**Bits.**  Philox4x64-10 (numpy's implementation of the counter-based
generator of Salmon et al.), whose output for a 256-bit counter under a
128-bit key is a pure function of the two: skipping to any position costs
O(1), and a contiguous range of positions is produced by one vectorized call
(:meth:`PositionRNG.block`); so is an array of arbitrary positions, in any order
(:meth:`PositionRNG.at`, the same function evaluated on whole arrays;
:class:`KeyedRNG` shows it to sampling-UDFs as a range).  Both run on a small
compiled kernel (``udfs/_philox.c``) where it is built, else on numpy arrays
(a shipped zip); the words are the same (:data:`PHILOX_KERNEL` says which).

* The **key** is derived from the user's seed by hashing it with
  ``numpy.random.SeedSequence`` (so nearby seeds give unrelated keys).
* A **stream** names a purpose: ``StreamId(purpose, index, sub)``, for instance
  (HOLDOUT, repeat w, 0), (BOOTSTRAP_NODE, sample i, tree depth d) or
  (TBS_APPLY, batch k, partition p).
* A **position** is a row id, or a node of the bootstrap tree.

Counter layout (word 0 is least significant)::

    lane block of `position`:        (position, purpose << 48 | sub, index, 0)
    draws keyed at `position`:       (j, purpose << 48 | sub, index, position + 1)
                                      for the words j = 0, 1, 2, ... (4 per counter)

Distinct ``(purpose, index, sub, position)`` therefore never share a counter,
by construction: lane blocks have word 3 = 0 and keyed draws word 3 >= 1, and
keyed draws only advance word 0, which 2**64 counters would not exhaust.
Each lane block is four 64-bit words ("lanes"); a purpose may use several
lanes of one block (hold-out uses lane 0 for the decision and lane 1 for the
row's relative position).  Raw words are pinned by known-answer tests
(Random123's vectors, tests/test_rng.py).

**Distributions.**  numpy pins its bit generators but may change the output
of ``Generator`` methods between versions (NEP 19); only its legacy
``RandomState`` distributions are frozen.  So nothing here uses a
``numpy.random.Generator``: :class:`Draws`, a cursor on one keyed stream,
draws

* uniform doubles as ``(word >> 11) * 2**-53`` (the top 53 bits);
* integers below ``n <= 2**32`` by Lemire's multiply-shift with rejection on
  the 32-bit halves of the words (low half first), and below larger ``n``
  from the top bits of whole words, rejected when ``>= n``;
* uniform k-subsets (:meth:`Draws.subset`) from such integers;
* standard normals by Kinderman and Monahan's ratio of uniforms, so each
  value is ``v / u`` in IEEE arithmetic (a ``log`` only decides acceptance);
* binomial and hypergeometric variates with numpy's legacy ``RandomState``
  algorithms over the same bit generator (:attr:`Draws.legacy`), frozen by
  numpy's policy.

What is still left to the platform: a few algorithms call ``exp``/``log``
(libm, or numpy's vectorized ``log``), whose last bit can differ between
CPUs or libraries.  Such a difference changes an outcome only when a random
number falls within a rounding error of a threshold (about once in 1e15
draws); the values written (uniforms, integers, normals, relative positions)
never depend on them.

:data:`SAMPLER_VERSION` names this whole contract and is written into every
run manifest (:meth:`PositionRNG.describe`).
"""
import enum
import importlib.machinery
import importlib.util
import math
import os
import secrets
import sys
from typing import NamedTuple

import numpy as np

from .errors import ParameterError

#: The version of the sampler streams: recorded in every run's manifest and
#: asserted by the golden tests (tests/test_golden.py).  Bump it -- and
#: regenerate the golden digests in the same commit -- whenever the same seed
#: and parameters could give different bytes: a change of the key derivation,
#: the counter layout, a Purpose value, the words a draw consumes or their
#: order, a distribution's algorithm or constants (CHUNK_ROWS, the subset and
#: skip methods, the Lemire threshold rule, ...), a sampler's sequence of
#: draws, or the bytes make_matrix writes.  Do not bump it for speed-ups that
#: keep every golden digest, nor for new streams that old runs never used.
SAMPLER_VERSION = "samplegen-streams/2"

LANES = 4
_MASK64 = (1 << 64) - 1
_MASK256 = (1 << 256) - 1
_TWO_M53 = 2.0 ** -53
_TWO_M52 = 2.0 ** -52
_U64_11 = np.uint64(11)
_U64_32 = np.uint64(32)


class Purpose(enum.IntEnum):
    """What a stream is used for.  Values are part of the on-disk contract."""

    HOLDOUT = 1          # lanes; index = repeat w: lane 0 decision, lane 1 order
    FOLD = 2             # lanes; lane 0 fold, lane 1 order
    BOOTSTRAP_NODE = 3   # draws; index = sample, sub = depth, position = node
    BOOTSTRAP_CHUNK = 4  # draws; index = sample, position = chunk node
    SCALAR = 5           # lanes; the sequential stream seen by scalar UDFs
    SCALAR_DRAW = 6      # draws keyed at a position of the scalar stream
    MATRIX = 7           # draws; position = row block of a synthetic matrix (make_matrix)
    TBS_DECIDE = 8       # draws; index = batch k, sub = 0 (driver) or 1 + partition (T-TBS counts)
    TBS_APPLY = 9        # draws; index = batch k, sub = partition: which items
    TBS_OUTPUT = 10      # draws; index = batch k: producing S_k
    TBS_PARTIAL = 11     # draws; index = partial item id, sub = which of its uniforms
    TBS_SALT = 12        # lanes; the salt of the stream jobs' item priorities
    BOOTSTRAP_ARRIVALS = 13  # lanes; index = sample, sub = window << 16 | block (udfs/arrivals)
    EXACT_NODE = 14      # draws; index = labelling, sub = part << 6 | depth, position = node
    EXACT_CHUNK = 15     # draws; index = labelling, sub = part, position = chunk node
    BOOTSTRAP_OOB = 16   # lanes; index = sample: lane 0 orders the out-of-bag rows
    GROUP = 17           # lanes; index = repeat, position = group code: lane 0 its coin or order
    WEIGHTED = 18        # draws; index = 0 uniform sampler, 1 sum tree; position = call number
    WEIGHTED_KEY = 19    # lanes; index = sample: lane 0 the row's exponential key (udfs/weighted)
    WEIGHTED_NODE = 20   # draws; index = sample, sub = depth, position = node (weighted tree)
    WEIGHTED_CHUNK = 21  # draws; index = sample, position = chunk node (weighted tree)
    WEIGHTED_POISSON = 22  # lanes; index = sample: lane 0 inclusion, lane 1 order
    USER = 0x100         # free for user UDFs (choose your own index / sub)


class StreamId(NamedTuple):
    """A stream: purpose, plus an index (repeat, sample, ...) and a sub-index."""

    purpose: int
    index: int = 0
    sub: int = 0


def stream(purpose, index=0, sub=0):
    """Build a validated :class:`StreamId`."""
    purpose = int(purpose)
    if not 0 <= purpose < 1 << 16:
        raise ParameterError(f"stream purpose must be in [0, 2**16), got {purpose}")
    if not 0 <= int(index) <= _MASK64:
        raise ParameterError(f"stream index must be in [0, 2**64), got {index}")
    if not 0 <= int(sub) < 1 << 48:
        raise ParameterError(f"stream sub-index must be in [0, 2**48), got {sub}")
    return StreamId(purpose, int(index), int(sub))


def check_seed(seed):
    """Return *seed* as an int in [0, 2**64), or raise ParameterError.

    The one check of a seed, for every entry point (jobs, API, tbs)."""
    if isinstance(seed, (bool, float)) or seed is None:
        raise ParameterError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise ParameterError(f"seed must be an integer in [0, 2**64), got {seed!r}") from None
    if not 0 <= value <= _MASK64:
        raise ParameterError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    return value


def fresh_seed():
    """A seed from the operating system's entropy (for ``seed=None``)."""
    return secrets.randbits(64)


def seed_key(seed):
    """The 128-bit Philox key (two uint64 words) for a user seed."""
    return np.random.SeedSequence(check_seed(seed)).generate_state(2, dtype=np.uint64)


def _counter_int(words):
    """A 256-bit counter from its four uint64 words (word 0 lowest)."""
    return sum(int(w) << (64 * i) for i, w in enumerate(words))


def _words(counter):
    return np.array([(counter >> (64 * i)) & _MASK64 for i in range(4)], dtype=np.uint64)


def _counter(stream_id, word0, word3):
    purpose, index, sub = stream_id
    return word0 | ((purpose << 48 | sub) << 64) | (index << 128) | (word3 << 192)


def to_unit(words):
    """Map uint64 words to doubles in [0, 1) using their top 53 bits."""
    return (words >> _U64_11).astype(np.float64) * _TWO_M53


def splitmix64(x):
    """SplitMix64's output function (Steele, Lea and Flood), vectorized: the
    word the generator returns from state ``x``, i.e. its finalizer applied to
    ``x + 0x9E3779B97F4A7C15``.  A bijection of uint64; a pure hash (keyed by
    the caller, e.g. by xor with a salt drawn from a keyed stream)."""
    z = np.array(x, dtype=np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


def _check_size(size):
    """(count, shape) for a numpy-style ``size`` (None: one scalar)."""
    if size is None:
        return 1, None
    if isinstance(size, (int, np.integer)):
        shape = (int(size),)
    else:
        shape = tuple(int(s) for s in size)
    if any(s < 0 for s in shape):
        raise ParameterError(f"size must be non-negative, got {size!r}")
    return math.prod(shape), shape


def _shaped(values, shape):
    if shape is None:
        return values[0].item()
    return values.reshape(shape)


#: numpy's legacy hypergeometric (HRUA) loses precision near populations of 2**37
_LEGACY_HYPERGEOMETRIC_LIMIT = 10 ** 9 - 1
_SMALL = 32          # draws of at most this many values are made in pure Python
_KERNEL_RAW = 4096   # raw words from which Draws.raw calls the compiled kernel
_KM_BOUND = 0.8578   # >= sqrt(2/e) = 0.857763..., the half-width of the ratio-of-uniforms box


class Draws:
    """Frozen draws from one keyed stream (a cursor on its raw words).

    Obtained from :meth:`PositionRNG.draws` (or :meth:`PositionRNG.keyed`).
    Each method consumes the stream's words in a fixed, documented way, so a
    sequence of calls is a pure function of (seed, stream, position) and of
    the calls' arguments.  Not a ``numpy.random.Generator``: the method
    names follow numpy's, but every algorithm is fixed here.
    """

    __slots__ = ("bit_generator", "_legacy")

    def __init__(self, bit_generator):
        self.bit_generator = bit_generator
        self._legacy = None

    @property
    def legacy(self):
        """numpy's legacy ``RandomState`` over this stream's bit generator:
        its distributions are frozen by numpy's policy (NEP 19).  It shares
        the cursor: its draws advance this stream."""
        if self._legacy is None:
            self._legacy = np.random.RandomState(self.bit_generator)
        return self._legacy

    # -- own algorithms on the raw words -------------------------------------
    def raw(self, size=None):
        """The next raw 64-bit words (uint64 array; an int if ``size`` is None).
        From :data:`_KERNEL_RAW` words on, with the compiled kernel, the same
        words by one C call over their counters, the cursor moved as numpy's
        Philox moves it (about twice as fast)."""
        if size is None:
            return int(self.bit_generator.random_raw())
        size = int(size)
        if _KERNEL is not None and size >= _KERNEL_RAW:
            words = self._kernel_raw(size)
            if words is not None:
                return words
        return self.bit_generator.random_raw(size)

    def _kernel_raw(self, size):
        """:meth:`raw` of *size* words on the compiled kernel, or None when
        the counters would carry out of word 0 (numpy's own loop then)."""
        bg = self.bit_generator
        state = bg.state
        if state.get("bit_generator") != "Philox":
            return None
        pos = int(state["buffer_pos"])
        head = min(LANES - pos, size)             # words left of the current block
        blocks = -(-(size - head) // LANES)
        counter = _counter_int(state["state"]["counter"])
        first = (counter + 1) & _MASK256
        if (first & _MASK64) + blocks > _MASK64 + 1:
            return None
        out = np.empty(head + blocks * LANES, dtype=np.uint64)
        out[:head] = state["buffer"][pos:pos + head]
        if blocks:
            key = state["state"]["key"]
            _KERNEL.lanes_range(int(key[0]), int(key[1]), (first >> 64) & _MASK64,
                                (first >> 128) & _MASK64, first >> 192, first & _MASK64,
                                out[head:].reshape(-1, LANES))
            state["state"]["counter"] = _words((counter + blocks) & _MASK256)
            state["buffer"] = out[-LANES:].copy()
            state["buffer_pos"] = LANES - (head + blocks * LANES - size)
        else:
            state["buffer_pos"] = pos + head
        bg.state = state
        return out[:size]

    def random(self, size=None):
        """Doubles in [0, 1): ``(word >> 11) * 2**-53``, one word each."""
        if size is None:
            return (int(self.bit_generator.random_raw()) >> 11) * _TWO_M53
        n, shape = _check_size(size)
        words = self.raw(n)
        np.right_shift(words, _U64_11, out=words)
        out = words.view(np.float64)     # converted in place: one array, not two
        np.multiply(words, _TWO_M53, out=out)
        return out.reshape(shape)

    def integers(self, low, high=None, size=None):
        """Uniform integers in ``[low, high)`` (``[0, low)`` if ``high`` is
        None), int64 (a Python int if ``size`` is None).

        For a range ``n <= 2**32``: Lemire's method on 32-bit halves -- a half
        ``x`` (the low half of each word first) gives ``(x * n) >> 32``
        unless ``(x * n) mod 2**32 < 2**32 mod n``, when it is rejected; the
        first ``size`` accepted halves are used and the rest of the last word
        is dropped.  For a larger range: the top ``bit_length(n - 1)`` bits of
        each word, rejected when ``>= n``.  Exactly uniform in both cases.
        """
        if high is None:
            low, high = 0, low
        low, high = int(low), int(high)
        n = high - low
        if n < 1 or low < -(1 << 63) or high > 1 << 63:
            raise ParameterError("integers needs -2**63 <= low < high <= 2**63, "
                                 f"got [{low}, {high})")
        if size is None:
            return low + self._below_list(n, 1)[0]
        count, shape = _check_size(size)
        if count <= _SMALL:      # the same draws in pure Python: less overhead
            values = np.array(self._below_list(n, count), dtype=np.int64)
        else:
            values = self._below32(n, count) if n <= 1 << 32 else self._below64(n, count)
        if low:
            values += np.int64(low)
        return values.reshape(shape)

    def _below_list(self, n, count):
        """:meth:`integers` in ``[0, n)`` as a list, in pure Python (the
        vectorized paths below draw exactly the same)."""
        bg = self.bit_generator
        out = []
        if n <= 1 << 32:
            threshold = (1 << 32) % n
            while len(out) < count:
                for word in bg.random_raw((count - len(out) + 1) // 2).tolist():
                    for x in (word & 0xFFFFFFFF, word >> 32):
                        m = x * n
                        if (m & 0xFFFFFFFF) >= threshold:
                            out.append(m >> 32)
                del out[count:]
            return out
        shift = 64 - (n - 1).bit_length()
        while len(out) < count:
            words = bg.random_raw(count - len(out)).tolist()
            out += [x for x in (w >> shift for w in words) if x < n]
        del out[count:]
        return out

    def _below32(self, n, count):
        threshold = (1 << 32) % n
        out = None
        got = 0
        while got < count:
            need = count - got
            halves = _halves(self.raw((need + 1) // 2))
            prod = np.multiply(halves, np.uint64(n), dtype=np.uint64)
            if threshold and _low32(prod).min() < threshold:
                prod = prod[_low32(prod) >= threshold]
            prod >>= _U64_32
            if out is None and prod.size >= need:
                return prod[:need].view(np.int64)
            if out is None:
                out = np.empty(count, dtype=np.int64)
            take = min(need, prod.size)
            out[got:got + take] = prod[:take]
            got += take
        return np.empty(0, dtype=np.int64) if out is None else out

    def _below64(self, n, count):
        shift = np.uint64(64 - (n - 1).bit_length())
        bg = self.bit_generator
        out = np.empty(count, dtype=np.int64)
        got = 0
        while got < count:
            need = count - got
            cand = bg.random_raw(need) >> shift
            cand = cand[cand < np.uint64(n)]
            take = min(need, cand.size)
            out[got:got + take] = cand[:take]
            got += take
        return out

    def below(self, bounds):
        """Uniform integers in ``[0, bounds[i])``, one per bound (int64 array;
        each bound in ``[1, 2**32]``).

        Lemire's method on 32-bit halves, as :meth:`integers`, with each
        value's own bound: the first round takes one half per value (the low
        half of each word first); the values whose half was rejected take
        the next halves, in order, round after round.  Exactly uniform."""
        bounds = np.asarray(bounds, dtype=np.int64)
        if bounds.ndim != 1:
            raise ParameterError("bounds must be a 1-D array")
        if bounds.size and (bounds.min() < 1 or bounds.max() > 1 << 32):
            raise ParameterError("every bound must be in [1, 2**32]")
        m = bounds.astype(np.uint64)
        threshold = (np.uint64(1 << 32) - m) % m     # 2**32 mod m
        out = np.empty(bounds.size, dtype=np.int64)
        todo = None                                  # all values, in the first round
        while todo is None or todo.size:
            count = bounds.size if todo is None else todo.size
            halves = _halves(self.raw((count + 1) // 2))[:count]
            mine = m if todo is None else m[todo]
            prod = np.multiply(halves, mine, dtype=np.uint64)
            rejected = _low32(prod) < (threshold if todo is None else threshold[todo])
            prod >>= _U64_32
            if todo is None:
                out[:] = prod
                todo = np.flatnonzero(rejected)
            else:
                out[todo] = prod
                todo = todo[rejected]
        return out

    def subset(self, population, k):
        """A uniform k-subset of ``range(population)``: k distinct int64
        values, every k-subset equally likely, in increasing order.

        Method: for ``2k > population`` the complement of a uniform
        ``(population - k)``-subset; otherwise :meth:`integers` draws, in
        rounds until at least k of them are distinct (the draws of each round:
        the missing ``s`` plus ``s (have + k) // (2 (population - k))``
        plus its integer square root), and a surplus removed by dropping a
        uniform subset of the distinct values (by this method, recursively).
        The set of distinct values of i.i.d. uniform draws is, given its
        size, a uniform subset (the draws' law is invariant under any
        permutation of the population, and the stopping rule depends only on
        counts), so the result is exact.  O(k log k) (a bitmap replaces the
        sort when the population is small); the draws of each round are
        counted in integers, so they are the same everywhere.
        """
        population, k = int(population), int(k)
        if not 0 <= k <= population:
            raise ParameterError(f"k must be an integer in [0, {population}], got {k}")
        if k == 0:
            return np.empty(0, dtype=np.int64)
        if 2 * k > population:
            mask = np.ones(population, dtype=bool)
            mask[self.subset(population, population - k)] = False
            return np.flatnonzero(mask)
        if k <= _SMALL:
            return self._small_subset(population, k)
        values = _distinct(self.integers(0, population, _draws_for(population, 0, k)), population)
        while values.size < k:
            more = self.integers(0, population, _draws_for(population, values.size, k))
            values = _distinct(np.concatenate([values, more]), population)
        if values.size > k:
            keep = np.ones(values.size, dtype=bool)
            keep[self.subset(values.size, values.size - k)] = False
            values = values[keep]
        return values

    def _small_subset(self, population, k):
        """:meth:`subset` for ``k <= _SMALL`` and ``2k <= population`` in pure
        Python: the same draws and the same result."""
        values = sorted(set(self._below_list(population, _draws_for(population, 0, k))))
        while len(values) < k:
            more = self._below_list(population, _draws_for(population, len(values), k))
            values = sorted(set(values).union(more))
        if len(values) > k:
            drop = set(self.subset(len(values), len(values) - k).tolist())
            values = [v for i, v in enumerate(values) if i not in drop]
        return np.array(values, dtype=np.int64)

    def standard_normal(self, size=None):
        """Standard normal doubles: Kinderman and Monahan's ratio of uniforms.

        Attempts are made in rounds of ``m = need + need // 2 + 16``: a round
        takes ``2m`` words, attempt i the words i and ``m + i`` (``w0``, ``w1``):
        ``u = ((w0 >> 11) + 1) * 2**-53`` in (0, 1], ``v = ((w1 >> 11) *
        2**-52 - 1) * 0.8578``, and ``x = v / u`` is accepted when ``x * x <=
        -4 log(u)``; the first accepted ones are used.  The values are IEEE
        quotients, identical on every platform.
        """
        count, shape = _check_size(size)
        out = np.empty(count, dtype=np.float64)
        got = 0
        while got < count:
            need = count - got
            m = need + need // 2 + 16
            words = self.raw(2 * m)
            np.right_shift(words, _U64_11, out=words)
            np.add(words[:m], np.uint64(1), out=words[:m])
            u = np.multiply(words[:m], _TWO_M53)
            x = np.multiply(words[m:], _TWO_M52)
            x -= 1.0
            x *= _KM_BOUND
            x /= u
            np.log(u, out=u)
            u *= -4.0
            x = x[x * x <= u]
            take = min(need, x.size)
            out[got:got + take] = x[:take]
            got += take
        return _shaped(out, shape)

    # -- numpy's legacy (frozen) algorithms ------------------------------------
    def binomial(self, n, p, size=None):
        """Binomial(n, p) variates: numpy's legacy ``RandomState.binomial``
        (inversion below a mean of 30, else BTPE), frozen."""
        return self.legacy.binomial(n, p, size)

    def hypergeometric(self, ngood, nbad, nsample):
        """The number of good items in a uniform sample of *nsample* of
        ``ngood + nbad`` items: numpy's legacy ``RandomState.hypergeometric``
        (HYP / HRUA, frozen) below populations of 1e9 per side, where it
        loses precision (numpy gh-11443), else an exact inversion sampler."""
        ngood, nbad, nsample = int(ngood), int(nbad), int(nsample)
        if min(ngood, nbad, nsample) < 0 or nsample > ngood + nbad:
            raise ParameterError(f"hypergeometric parameters must satisfy 0 <= nsample <= "
                                 f"ngood + nbad, got ngood={ngood}, nbad={nbad}, "
                                 f"nsample={nsample}")
        if nsample == 0 or ngood == 0:
            return 0
        if nbad == 0:
            return nsample
        if max(ngood, nbad) <= _LEGACY_HYPERGEOMETRIC_LIMIT:
            return int(self.legacy.hypergeometric(ngood, nbad, nsample))
        return self._hypergeometric_by_inversion(ngood, nbad, nsample)

    def _hypergeometric_by_inversion(self, ngood, nbad, nsample):
        """Exact (to double precision) hypergeometric variate for any
        population: the probability mass over a window of +-(60 sd + 64)
        around the mode, built from the ratios p(x+1)/p(x), inverted with one
        uniform (the mass outside is below 1e-300: the law is log-concave)."""
        total = ngood + nbad
        lo = max(0, nsample - nbad)
        hi = min(nsample, ngood)
        mode = int(math.floor((nsample + 1) * (ngood + 1) / (total + 2)))
        mode = min(max(mode, lo), hi)
        var = nsample * (ngood / total) * (nbad / total) * (total - nsample) / max(total - 1, 1)
        half = int(60.0 * math.sqrt(var) + 64)
        a = max(lo, mode - half)
        b = min(hi, mode + half)
        x = np.arange(a, b, dtype=np.float64)         # ratios p(x+1)/p(x) for x in [a, b)
        log_ratio = (np.log(ngood - x) + np.log(nsample - x)
                     - np.log(x + 1.0) - np.log(nbad - nsample + x + 1.0))
        logp = np.concatenate([[0.0], np.cumsum(log_ratio)])
        logp -= logp.max()
        cdf = np.cumsum(np.exp(logp))
        u = self.random() * cdf[-1]
        return int(a + min(np.searchsorted(cdf, u, side="right"), b - a))

    def split_count(self, sizes, k):
        """How many of k items drawn uniformly without replacement from
        groups of the given *sizes* fall in each group (multivariate
        hypergeometric, by one :meth:`hypergeometric` draw per group in
        order): an int64 array like *sizes*."""
        sizes = np.asarray(sizes, dtype=np.int64)
        values = sizes.tolist() if sizes.ndim == 1 else None   # checked in Python: tiny arrays
        if values is None or (values and min(values) < 0):
            raise ParameterError(f"sizes must be a 1-D array of non-negative counts, "
                                 f"got {sizes!r}")
        remaining = sum(values)
        k = int(k)
        if k < 0 or k > remaining:
            raise ParameterError(f"k must be an integer in [0, {remaining}], got {k}")
        out = [0] * len(values)
        legacy = None
        for i, size in enumerate(values):
            remaining -= size
            if k == 0:
                break
            # hypergeometric(size, remaining, k), its cases inline (valid by
            # construction here): the same draws, without a call per group
            if size == 0:
                continue
            if remaining == 0:
                got = k
            elif max(size, remaining) <= _LEGACY_HYPERGEOMETRIC_LIMIT:
                legacy = legacy or self.legacy
                got = int(legacy.hypergeometric(size, remaining, k))
            else:
                got = self._hypergeometric_by_inversion(size, remaining, k)
            out[i] = got
            k -= got
        return np.array(out, dtype=np.int64)


def _halves(words):
    """The 32-bit halves of uint64 words as uint32, the low half of each word first."""
    if np.little_endian:
        return words.view(np.uint32)
    out = np.empty(2 * words.size, dtype=np.uint32)
    out[0::2] = words & np.uint64(0xFFFFFFFF)
    out[1::2] = words >> _U64_32
    return out


def _low32(prod):
    """The low 32 bits of uint64 values (a strided view where possible)."""
    if np.little_endian:
        return prod.view(np.uint32)[0::2]
    return prod & np.uint64(0xFFFFFFFF)


def _distinct(values, population):
    """The distinct values of ``values`` (in ``range(population)``), sorted:
    by a bitmap when it is small next to them, else by sorting in place."""
    if population <= 4 * values.size:
        mask = np.zeros(population, dtype=bool)
        mask[values] = True
        return np.flatnonzero(mask)
    values.sort()
    if values.size < 2:
        return values
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values if keep.all() else values[keep]


def _draws_for(population, have, k):
    """How many uniform draws to add to ``have`` distinct values to reach
    ``k``, in integers: the missing ``s``, plus about the expected repeats,
    ``s (have + k) / (2 (population - k))``, plus their square root."""
    s = k - have
    repeats = s * (have + k) // (2 * (population - k))
    return s + repeats + math.isqrt(repeats)


# -- Philox4x64-10 at arbitrary counters, on whole arrays -------------------------
# numpy's Philox makes consecutive counters only; PositionRNG.at evaluates the
# same function at any counters, one numpy operation per step for a whole pass
# of positions (no Python call per position).

_PHILOX_M0 = 0xD2E7470EE14C6C93   # the multipliers of Philox4x64
_PHILOX_M1 = 0xCA5A826395121157
_PHILOX_W0 = 0x9E3779B97F4A7C15   # the Weyl constants of its key schedule
_PHILOX_W1 = 0xBB67AE8584CAA73B
_PHILOX_ROUNDS = 10
_LOW32 = np.uint64(0xFFFFFFFF)
_AT_PASS = 1 << 14       # positions per pass: a pass's 8 work arrays stay in the L2 cache
_AT_RUN = 256            # consecutive positions from which PositionRNG.at calls block()


class _Factor:
    """A Philox multiplier: the Python int, and the uint64 word and 32-bit
    halves that the array products use."""

    __slots__ = ("value", "word", "low", "high")

    def __init__(self, value):
        self.value = value
        self.word = np.uint64(value)
        self.low = np.uint64(value & 0xFFFFFFFF)
        self.high = np.uint64(value >> 32)


_M0 = _Factor(_PHILOX_M0)
_M1 = _Factor(_PHILOX_M1)


class _Work:
    """The uint64 arrays of one pass: five for the counter words, three
    scratch arrays for the products."""

    def __init__(self, n):
        self.free = [np.empty(n, dtype=np.uint64) for _ in range(5)]
        self.scratch = [np.empty(n, dtype=np.uint64) for _ in range(3)]


def _mulhi(x, factor, out, scratch):
    """``out = (x * factor) >> 64`` for uint64 x: the 128-bit product from
    the products of 32-bit halves, none of which exceeds 64 bits."""
    a, t, u = scratch
    np.bitwise_and(x, _LOW32, out=a)                 # a = x_lo
    np.right_shift(x, _U64_32, out=out)              # out = x_hi
    np.multiply(a, factor.low, out=t)                # t = x_lo m_lo
    t >>= _U64_32
    np.multiply(out, factor.low, out=u)              # u = x_hi m_lo + (x_lo m_lo >> 32)
    u += t
    a *= factor.high                                 # a = x_lo m_hi + low half of u
    np.bitwise_and(u, _LOW32, out=t)
    a += t
    out *= factor.high                               # out = x_hi m_hi + the high halves
    u >>= _U64_32
    out += u
    a >>= _U64_32
    out += a
    return out


def _philox_product(x, c, k, factor, work):
    """One half of a Philox round: ``(hi(x m) ^ c ^ k, lo(x m))``.

    x and c are each a Python int (the same word at every position of the
    pass) or a uint64 array of the pass; arrays are consumed (reused for the
    results), so a word costs array operations only once it varies."""
    if not isinstance(x, np.ndarray):
        product = x * factor.value
        hi, lo = product >> 64, product & _MASK64
        if isinstance(c, np.ndarray):
            c ^= np.uint64(hi ^ k)
            return c, lo
        return hi ^ c ^ k, lo
    hi = _mulhi(x, factor, work.free.pop(), work.scratch)
    if isinstance(c, np.ndarray):
        hi ^= c
        work.free.append(c)
        hi ^= np.uint64(k)
    else:
        hi ^= np.uint64(c ^ k)
    x *= factor.word
    return hi, x


def _philox_lanes(key, counter, positions, out):
    """``out[i]`` = Philox4x64-10 under *key* (two ints) of the counter
    ``counter | positions[i]`` (word 0 of *counter* is 0): the words numpy's
    Philox gives for that counter, for a uint64 array of positions, in passes
    of :data:`_AT_PASS`."""
    words = [(counter >> (64 * i)) & _MASK64 for i in range(LANES)]
    keys = [((key[0] + r * _PHILOX_W0) & _MASK64, (key[1] + r * _PHILOX_W1) & _MASK64)
            for r in range(_PHILOX_ROUNDS)]
    work = None
    for begin in range(0, positions.size, _AT_PASS):
        chunk = positions[begin:begin + _AT_PASS]
        if work is None or work.scratch[0].size != chunk.size:
            work = _Work(chunk.size)
        c0 = work.free.pop()
        c0[...] = chunk
        c = (c0, words[1], words[2], words[3])
        for k0, k1 in keys:
            n0, n1 = _philox_product(c[2], c[1], k0, _M1, work)
            n2, n3 = _philox_product(c[0], c[3], k1, _M0, work)
            c = (n0, n1, n2, n3)
        rows = out[begin:begin + chunk.size]
        for lane in range(LANES):
            rows[:, lane] = c[lane]
            if isinstance(c[lane], np.ndarray):
                work.free.append(c[lane])


def _stream_words(stream_id):
    """Words 1, 2, 3 of the lane-block counters of *stream_id* (word 0 is the
    position)."""
    purpose, index, sub = stream_id
    return purpose << 48 | sub, index, 0


# -- the compiled kernel ---------------------------------------------------------
# udfs/_philox.c computes the function above (and PositionRNG.block's runs) in
# C: several times faster than the arrays, and faster than numpy's Philox
# stream.  It is optional: setup.py builds it where a C compiler is found, and
# a shipped zip (jobs/package.py: --py-files, mrjob py_files, Hive ADD FILE)
# cannot import it, so every path has the numpy twin above.  Chosen once, at
# import: the kernel of this package, else that of a samplegen installed in
# this Python outside a zip (a node's environment, when the job ships the
# zip); it is used only if it gives numpy's Philox words on a check of edge
# counters.  SAMPLEGEN_PHILOX=numpy forces the numpy path.

def _installed_kernel():
    """The compiled kernel of a samplegen installed on ``sys.path`` as a
    directory (not a zip), or None."""
    for entry in sys.path:
        base = os.path.join(entry or os.curdir, "samplegen", "udfs")
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(base, "_philox" + suffix)
            if os.path.isfile(path):
                try:
                    # the name ends in _philox: the extension's init function is found by it
                    spec = importlib.util.spec_from_file_location(__package__ + "._philox", path)
                    module = importlib.util.module_from_spec(spec)
                    spec.loader.exec_module(module)
                except (ImportError, OSError):
                    continue
                return module
    return None


def _kernel_agrees(kernel):
    """Whether *kernel* gives numpy's Philox4x64-10 words on counters whose
    every word is at an edge (0, 2**64 - 1, carries across all four words)
    under an edge key, and on one ordinary counter."""
    top = _MASK64
    checks = [((top, top), (top - 1, top, top, top)), ((0, 0), (0, 0, 0, 0)),
              ((0x0123456789ABCDEF, top), (top, top, top, 7)),
              ((12345, 678910), (2 ** 63 + 5, 1 << 48 | 3, 2 ** 40 + 1, 0))]
    if not all(callable(getattr(kernel, name, None))
               for name in ("lanes", "lanes_range", "open_unit", "skip_sum")):
        return False
    try:
        for key, words in checks:
            counter = sum(w << (64 * i) for i, w in enumerate(words))
            expect = np.random.Philox(key=np.array(key, dtype=np.uint64),
                                      counter=_words((counter - 1) & _MASK256)).random_raw(8)
            one = np.empty((1, LANES), dtype=np.uint64)
            kernel.lanes(*key, *words[1:], np.array(words[:1], dtype=np.uint64), one)
            two = np.empty((2, LANES), dtype=np.uint64)
            kernel.lanes_range(*key, *words[1:], words[0], two)
            if not (np.array_equal(one.ravel(), expect[:4])
                    and np.array_equal(two.ravel(), expect)):
                return False
        unit = np.empty(3)
        kernel.open_unit(np.array([0, 2**53 - 2 << 11, top], dtype=np.uint64), unit)
        sums = np.empty(3, dtype=np.int64)
        last = kernel.skip_sum(np.array([-1.5, 0.0, -0.2499999999999999]), -4.0, 10, sums)
        if unit.tolist() != [2.0 ** -53, 1.0 - 2.0 ** -53, 1.0] or sums.tolist() != [17, 18, 19] \
                or last != 19:
            return False
    except Exception:       # noqa: BLE001 -- any failure of a foreign kernel: use numpy
        return False
    return True


def _load_kernel():
    """The compiled kernel to use, or None for the numpy path."""
    if os.environ.get("SAMPLEGEN_PHILOX", "").lower() == "numpy":
        return None
    try:   # the compiled sibling, a leaf: by name, not as ``from . import`` (the package)
        kernel = importlib.import_module(__name__.rpartition(".")[0] + "._philox")
    except ImportError:
        kernel = _installed_kernel()
    if kernel is None or not _kernel_agrees(kernel):
        return None
    return kernel


_KERNEL = _load_kernel()
#: which implementation computes PositionRNG.block and .at: "compiled" or "numpy"
PHILOX_KERNEL = "numpy" if _KERNEL is None else "compiled"


def compiled_kernel():
    """The compiled kernel in use (udfs/_philox.c), or None on the numpy path:
    for callers with a loop of their own there (``open_unit``, ``skip_sum``:
    tbs/randomness.py's skips), which keep a numpy twin."""
    return _KERNEL


def _check_positions(positions):
    """*positions* as a 1-D uint64 array of values in [0, 2**64 - 1) (the
    positions ``block`` accepts), or ParameterError."""
    array = np.asarray(positions)
    if array.ndim != 1 or (array.size and array.dtype.kind not in "iu"):
        raise ParameterError("positions must be a 1-D array of integers, got "
                             f"shape {array.shape} and dtype {array.dtype}")
    if not array.size:
        return np.empty(0, dtype=np.uint64)
    if array.dtype.kind == "i":
        low = int(array.min())
        if low < 0:
            raise ParameterError(f"positions must be in [0, 2**64 - 1), got {low}")
    high = int(array.max())
    if high >= _MASK64:
        raise ParameterError(f"positions must be in [0, 2**64 - 1), got {high}")
    if array.dtype == np.int64:          # checked non-negative: the same values as uint64
        return array.view(np.uint64)
    return array.astype(np.uint64, copy=False)


def _blocks(lanes):
    """A C-contiguous (n, 4) uint64 array as n opaque 32-byte items (for
    moving whole lane blocks with one boolean index)."""
    return lanes.view(np.dtype((np.void, 8 * LANES))).reshape(-1)


def _runs(positions, length):
    """``(begin, end)`` index ranges of at least *length* consecutive
    positions (``positions[i + 1] == positions[i] + 1``) in a uint64 array."""
    if positions.size < length:
        return []
    step = np.subtract(positions[1:], positions[:-1]) == np.uint64(1)
    if np.count_nonzero(step) < length - 1:
        return []
    breaks = np.flatnonzero(~step) + 1
    begins = np.concatenate(([0], breaks))
    ends = np.concatenate((breaks, [positions.size]))
    long = ends - begins >= length
    return list(zip(begins[long].tolist(), ends[long].tolist()))


def word_order(words, ties=None):
    """The permutation that sorts random 64-bit *words*, equal words in the
    order of *ties* (another key, one per word) or else in place order.
    Random words almost never tie, and distinct keys have one sorted order,
    so one unstable sort (several times faster than a stable or two-key
    one) is the answer; only a tie takes the stable path."""
    order = np.argsort(words)
    ordered = words[order]
    if np.any(ordered[1:] == ordered[:-1]):
        return np.lexsort((ties, words)) if ties is not None else np.argsort(words, kind="stable")
    return order


class _LaneViews:
    """``lane`` and ``uniform`` on top of a class's ``block``."""

    def keyed_rows(self, start, stop):
        """The row ids that positions ``[start, stop)`` of this view stand
        for (int64), or None when they stand for themselves."""
        return None

    def lane(self, stream_id, start, stop, lane=0):
        """One lane of the blocks for ``[start, stop)``: uint64 array (n,)."""
        return np.ascontiguousarray(self.block(stream_id, start, stop)[:, lane])

    def uniform(self, stream_id, start, stop, lane=0):
        """Doubles in [0, 1), one per position in ``[start, stop)``."""
        return to_unit(self.block(stream_id, start, stop)[:, lane])


class PositionRNG(_LaneViews):
    """Random numbers addressed by (stream, position) under one seed.

    Cheap to create.  :meth:`block`, :meth:`at`, :meth:`lane`, :meth:`uniform`
    and :meth:`keyed` reuse state of this object (not thread-safe);
    :meth:`draws` does not.
    """

    def __init__(self, seed):
        self.seed = check_seed(seed)
        self.key = seed_key(self.seed)
        self._kernel_key = (int(self.key[0]), int(self.key[1]))
        self._bg = np.random.Philox(key=self.key)
        self._state = self._bg.state
        self._shared = None

    def _start_at(self, counter):
        # numpy's Philox increments its counter before producing a block, so
        # the block for `counter` comes first after setting `counter - 1`.
        state = self._state
        state["state"]["counter"] = _words((counter - 1) & _MASK256)
        state["buffer_pos"] = LANES
        state["has_uint32"] = 0
        self._bg.state = state

    def block(self, stream_id, start, stop):
        """Lane blocks for positions ``[start, stop)``: uint64 array (n, 4)."""
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= _MASK64:
            raise ParameterError(f"positions must satisfy 0 <= start <= stop < 2**64, "
                                 f"got [{start}, {stop})")
        if stop == start:
            return np.empty((0, LANES), dtype=np.uint64)
        if _KERNEL is not None:
            out = np.empty((stop - start, LANES), dtype=np.uint64)
            _KERNEL.lanes_range(*self._kernel_key, *_stream_words(stream_id), start, out)
            return out
        self._start_at(_counter(stream_id, start, 0))
        return self._bg.random_raw((stop - start) * LANES).reshape(-1, LANES)

    def at(self, stream_id, positions):
        """Lane blocks at arbitrary positions: uint64 array (n, 4) whose row i
        is ``block(stream_id, p, p + 1)[0]`` for ``p = positions[i]``, bit
        for bit.

        *positions*: a 1-D integer array (uint64, or int64 >= 0), in any
        order, repeats allowed, each below 2**64 - 1 (as for :meth:`block`).

        With the compiled kernel (udfs/_philox.c, :data:`PHILOX_KERNEL` is
        "compiled") one C loop evaluates Philox at every position: about 250 M
        words/s here, faster than numpy's own Philox stream (about 190 M
        words/s), with no run detection; ``block`` uses the same loop.
        Without it (a shipped zip, no C compiler) the numpy path below is used,
        with the same words.

        The numpy path evaluates Philox4x64-10 on whole arrays: the 64 x 64 -> 128-bit
        products from their 32-bit halves, in place, in passes of 2**14
        positions whose eight work arrays stay in the cache; the counter
        words that are the same at every position (stream, word 3) stay
        Python ints until a round mixes them with the position, which saves
        most of the first two rounds.  A run of at least 256 consecutive
        increasing positions is taken from :meth:`block` instead (one call
        per run), the rest from the arrays; the result is the same either
        way.  *Why the runs:* dense keys (a sorted range, a partition's row
        ids) are common, and there :meth:`block` is about 4x faster; measured, a
        ``block`` call costs about 3 us plus 11 ns per position and the
        arrays about 40 ns per position, so runs pay from about 128
        positions (256 leaves a margin), and finding them costs random
        positions about 3%.

        Measured on this project's 2-core AMD EPYC build machine (numpy 2.4,
        10**6 positions, median of 5): random uint64 positions 23 M/s
        (43 ms), against 89 M/s (11 ms) for ``block`` over a range of 10**6,
        3.8x slower; a sorted range through ``at`` 84 M/s (23 M/s without
        the runs path).
        """
        positions = _check_positions(positions)
        n = positions.size
        if _KERNEL is not None:
            out = np.empty((n, LANES), dtype=np.uint64)
            _KERNEL.lanes(*self._kernel_key, *_stream_words(stream_id),
                          np.ascontiguousarray(positions), out)
            return out
        runs = _runs(positions, _AT_RUN)
        if runs == [(0, n)]:                 # one range: block() is the answer
            first = int(positions[0])
            return self.block(stream_id, first, first + n)
        out = np.empty((n, LANES), dtype=np.uint64)
        counter = _counter(stream_id, 0, 0)
        key = [int(k) for k in self.key]
        if not runs:
            _philox_lanes(key, counter, positions, out)
            return out
        rest = np.ones(n, dtype=bool)
        for begin, end in runs:
            first = int(positions[begin])
            out[begin:end] = self.block(stream_id, first, first + end - begin)
            rest[begin:end] = False
        lanes = np.empty((int(np.count_nonzero(rest)), LANES), dtype=np.uint64)
        _philox_lanes(key, counter, positions[rest], lanes)
        _blocks(out)[rest] = _blocks(lanes)   # whole 32-byte rows: 10x faster than 2-D
        return out

    @staticmethod
    def _keyed_counter(stream_id, position):
        position = int(position)
        if not 0 <= position < _MASK64:
            raise ParameterError(f"draw position must be in [0, 2**64 - 1), got {position}")
        # the counter (0, purpose << 48 | sub, index, position + 1) less one (numpy's
        # Philox adds one before its first block), the borrow written out
        purpose, index, sub = stream_id
        word1 = purpose << 48 | sub
        if word1:
            words = [_MASK64, word1 - 1, index, position + 1]
        elif index:
            words = [_MASK64, _MASK64, index - 1, position + 1]
        else:
            words = [_MASK64, _MASK64, _MASK64, position]
        return np.array(words, dtype=np.uint64)

    def draws(self, stream_id, position=0):
        """:class:`Draws` keyed at one position of a stream: a new cursor at
        its first word.  Its words never touch the lane blocks of any stream,
        nor another position's draws."""
        counter = self._keyed_counter(stream_id, position)
        return Draws(np.random.Philox(key=self.key, counter=counter))

    def keyed(self, stream_id, position):
        """Like :meth:`draws`, but one shared :class:`Draws` re-keyed in place
        (about 4x cheaper): valid until the next ``keyed`` call on this
        PositionRNG.  For draws used at once, as the bootstrap tree's."""
        counter = self._keyed_counter(stream_id, position)
        if self._shared is None:
            self._shared = Draws(np.random.Philox(key=self.key))
            self._shared_state = self._shared.bit_generator.state
        state = self._shared_state
        state["state"]["counter"] = counter
        state["buffer_pos"] = LANES
        state["has_uint32"] = 0
        self._shared.bit_generator.state = state
        return self._shared

    def keyed_raw(self, stream_id, position, size):
        """The first *size* raw words of ``draws(stream_id, position)``
        (uint64 array), without a cursor: with the compiled kernel one C
        call over the counters ``(j, purpose << 48 | sub, index, position +
        1)``, j = 0, 1, ... (for the many small draws of the exact-size
        label trees' chunks)."""
        size = int(size)
        if _KERNEL is None or size <= 0:
            return self.keyed(stream_id, position).raw(size)
        position = int(position)
        if not 0 <= position < _MASK64:
            raise ParameterError(f"draw position must be in [0, 2**64 - 1), got {position}")
        word1, index, _ = _stream_words(stream_id)
        out = np.empty((-(-size // LANES), LANES), dtype=np.uint64)
        _KERNEL.lanes_range(*self._kernel_key, word1, index, position + 1, 0, out)
        return out.reshape(-1)[:size]

    def keyed_raw_into(self, stream_id, position, out):
        """``out[:] = keyed_raw(stream_id, position, out.size)`` in one C
        call, if the compiled kernel is in use and *out* (a C-contiguous
        uint64 array) holds whole lane blocks: returns whether it did."""
        if _KERNEL is None or out.size % LANES or not 0 <= position < _MASK64:
            return False
        word1, index, _ = _stream_words(stream_id)
        _KERNEL.lanes_range(*self._kernel_key, word1, index, position + 1, 0,
                            out.reshape(-1, LANES))
        return True

    def describe(self):
        """A JSON-able description for run manifests."""
        return {
            "generator": "Philox4x64-10",
            "streams": SAMPLER_VERSION,
            "seed": self.seed,
            "key": ["%016x" % int(k) for k in self.key],
        }


class KeyedRNG(_LaneViews):
    """A :class:`PositionRNG` seen through a table of positions: position i
    of this view stands for ``positions[i]`` of the wrapped generator.

    ``block(stream, a, b)`` is ``rng.at(stream, positions[a:b])``, and
    ``lane`` and ``uniform`` follow from it; ``draws``, ``keyed``, ``seed``,
    ``key`` and ``describe`` are the wrapped generator's, unchanged (they are
    not per row).  So a sampling-UDF called over ``[0, len(positions))``
    with this view decides row i exactly as over a range of row ids it
    decides row ``positions[i]``, when it draws its per-row randomness from
    lane blocks keyed by row (hold-out, k-fold, vectorized user UDFs).  Draws
    keyed by something else -- the bootstrap's tree nodes, the element
    sequence of :class:`SkipAheadRNG` -- see the view's own positions 0, 1,
    ..., not the table.

    *positions*: a 1-D integer array (uint64, or int64 >= 0), any order,
    repeats allowed, each below 2**64 - 1; checked once here, and not copied
    (a uint64 or int64 array is used as it is).
    """

    def __init__(self, rng, positions):
        self.rng = rng
        self.positions = _check_positions(positions)

    @property
    def seed(self):
        return self.rng.seed

    @property
    def key(self):
        return self.rng.key

    def keyed_rows(self, start, stop):
        return self.positions[start:stop].astype(np.int64, copy=False)

    def block(self, stream_id, start, stop):
        """Lane blocks for the positions ``positions[start:stop]``: uint64
        array (n, 4)."""
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= self.positions.size:
            raise ParameterError(f"keyed rows must satisfy 0 <= start <= stop <= "
                                 f"{self.positions.size}, got [{start}, {stop})")
        return self.rng.at(stream_id, self.positions[start:stop])

    def draws(self, stream_id, position=0):
        """The wrapped generator's :meth:`PositionRNG.draws`."""
        return self.rng.draws(stream_id, position)

    def keyed(self, stream_id, position):
        """The wrapped generator's :meth:`PositionRNG.keyed`."""
        return self.rng.keyed(stream_id, position)

    def keyed_raw(self, stream_id, position, size):
        """The wrapped generator's :meth:`PositionRNG.keyed_raw`."""
        return self.rng.keyed_raw(stream_id, position, size)

    def keyed_raw_into(self, stream_id, position, out):
        """The wrapped generator's :meth:`PositionRNG.keyed_raw_into`."""
        return self.rng.keyed_raw_into(stream_id, position, out)

    def describe(self):
        """The wrapped generator's :meth:`PositionRNG.describe`."""
        return self.rng.describe()


class SkipAheadRNG:
    """The paper's view of the generator, for scalar (per-row) sampling-UDFs.

    A single sequence ``p_0, p_1, ...`` of uniforms in [0, 1) with O(1)
    ``skip(j)``: element j is lane ``j % 4`` of the SCALAR lane block at
    position ``j // 4``.  ``binomial`` draws from :class:`Draws` keyed at the
    current position, as Algorithm 7 of the sample-generation paper does
    after "skip ahead to position mid".
    """

    def __init__(self, rng, index=0):
        self._rng = rng
        self._stream = stream(Purpose.SCALAR, index)
        self._draw_stream = stream(Purpose.SCALAR_DRAW, index)
        self._pos = 0
        self._cached = None  # (block position, lanes)

    def skip(self, position):
        """Move to element *position* of the sequence."""
        self._pos = int(position)

    def random(self):
        """The uniform at the current position, then advance by one."""
        block_pos, lane = divmod(self._pos, LANES)
        if self._cached is None or self._cached[0] != block_pos:
            self._cached = (block_pos, self._rng.block(self._stream, block_pos, block_pos + 1)[0])
        self._pos += 1
        return float(to_unit(self._cached[1][lane:lane + 1])[0])

    def binomial(self, n, p):
        """Binomial(n, p) keyed at the current position (does not advance);
        numpy's legacy binomial algorithm (frozen)."""
        return int(self._rng.keyed(self._draw_stream, self._pos).binomial(n, p))
