"""Position-addressable random numbers: the RNG contract of samplegen.

Every random number samplegen draws is a pure function of ``(seed, stream,
position)``.  Machines that hold different column blocks of the same row, or
that were handed a different share of the blocks, therefore reach the same
decision for that row without talking to each other.

The bits come from Philox4x64-10 (numpy's implementation of the counter-based
generator of Salmon et al.), whose output for a 256-bit counter under a 128-bit
key is a pure function of the two: skipping to any position costs O(1), and a
contiguous range of positions is produced by one vectorized call.

* The **key** is derived from the user's seed by hashing it with
  ``numpy.random.SeedSequence`` (so nearby seeds give unrelated keys).
* A **stream** names a purpose: ``StreamId(purpose, index, sub)``, for instance
  (HOLDOUT, repeat w, 0) or (BOOTSTRAP_NODE, sample i, tree depth d).
* A **position** is a row id, or a node of the bootstrap tree.

Counter layout (word 0 is least significant)::

    lane block of `position`:        (position, purpose << 48 | sub, index, 0)
    generator keyed at `position`:   (j, purpose << 48 | sub, index, position + 1)
                                      for its draws j = 0, 1, 2, ...

Distinct ``(purpose, index, sub, position)`` therefore never share a counter,
by construction: lane blocks have word 3 = 0 and generators word 3 >= 1, and a
generator's draws only advance word 0, which 2**64 draws would not exhaust.

Each lane block is four 64-bit words ("lanes"); a purpose may use several lanes
of one block (hold-out uses lane 0 for the decision and lane 1 for the row's
relative position).  Raw words are pinned by known-answer tests; distributions
drawn from :meth:`PositionRNG.generator` depend on numpy's algorithms and are
only guaranteed stable for one numpy version.
"""
import enum
from typing import NamedTuple

import numpy as np

from .errors import ParameterError

LANES = 4
_MASK64 = (1 << 64) - 1
_MASK256 = (1 << 256) - 1
_TWO_M53 = 2.0 ** -53


class Purpose(enum.IntEnum):
    """What a stream is used for.  Values are part of the on-disk contract."""

    HOLDOUT = 1          # lanes; index = repeat w: lane 0 decision, lane 1 order
    FOLD = 2             # lanes; lane 0 fold, lane 1 order
    BOOTSTRAP_NODE = 3   # generators; index = sample, sub = depth, position = node
    BOOTSTRAP_CHUNK = 4  # generators; index = sample, position = chunk node
    SCALAR = 5           # lanes; the sequential stream seen by scalar UDFs
    SCALAR_DRAW = 6      # generators keyed at a position of the scalar stream
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
    """Return *seed* as an int in [0, 2**64), or raise ParameterError."""
    if isinstance(seed, (bool, float)) or seed is None:
        raise ParameterError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    try:
        value = int(seed)
    except (TypeError, ValueError):
        raise ParameterError(f"seed must be an integer in [0, 2**64), got {seed!r}") from None
    if not 0 <= value <= _MASK64:
        raise ParameterError(f"seed must be an integer in [0, 2**64), got {seed!r}")
    return value


def seed_key(seed):
    """The 128-bit Philox key (two uint64 words) for a user seed."""
    return np.random.SeedSequence(check_seed(seed)).generate_state(2, dtype=np.uint64)


def _words(counter):
    return np.array([(counter >> (64 * i)) & _MASK64 for i in range(4)], dtype=np.uint64)


def _counter(stream_id, word0, word3):
    purpose, index, sub = stream_id
    return word0 | ((purpose << 48 | sub) << 64) | (index << 128) | (word3 << 192)


def to_unit(words):
    """Map uint64 words to doubles in [0, 1) using their top 53 bits."""
    return (words >> np.uint64(11)).astype(np.float64) * _TWO_M53


class PositionRNG:
    """Random numbers addressed by (stream, position) under one seed.

    Cheap to create; not thread-safe (it reuses one bit generator).
    """

    def __init__(self, seed):
        self.seed = check_seed(seed)
        self.key = seed_key(self.seed)
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
        self._start_at(_counter(stream_id, start, 0))
        return self._bg.random_raw((stop - start) * LANES).reshape(-1, LANES)

    def lane(self, stream_id, start, stop, lane=0):
        """One lane of the blocks for ``[start, stop)``: uint64 array (n,)."""
        return np.ascontiguousarray(self.block(stream_id, start, stop)[:, lane])

    def uniform(self, stream_id, start, stop, lane=0):
        """Doubles in [0, 1), one per position in ``[start, stop)``."""
        return to_unit(self.block(stream_id, start, stop)[:, lane])

    def generator(self, stream_id, position):
        """A ``numpy.random.Generator`` keyed at one position of a stream.

        Its draws never touch the lane blocks of any stream, nor another
        position's generator.
        """
        position = int(position)
        if not 0 <= position < _MASK64:
            raise ParameterError(f"generator position must be in [0, 2**64 - 1), got {position}")
        counter = (_counter(stream_id, 0, position + 1) - 1) & _MASK256
        return np.random.Generator(np.random.Philox(key=self.key, counter=_words(counter)))

    def keyed(self, stream_id, position):
        """Like :meth:`generator`, but one shared ``Generator`` re-keyed in
        place (about 4x cheaper): valid until the next ``keyed`` call on this
        PositionRNG.  For draws used at once, as the bootstrap tree's."""
        position = int(position)
        if not 0 <= position < _MASK64:
            raise ParameterError(f"generator position must be in [0, 2**64 - 1), got {position}")
        if self._shared is None:
            self._shared_bg = np.random.Philox(key=self.key)
            self._shared = np.random.Generator(self._shared_bg)
            self._shared_state = self._shared_bg.state
        state = self._shared_state
        state["state"]["counter"] = _words((_counter(stream_id, 0, position + 1) - 1) & _MASK256)
        state["buffer_pos"] = LANES
        state["has_uint32"] = 0
        self._shared_bg.state = state
        return self._shared

    def describe(self):
        """A JSON-able description for run manifests."""
        return {
            "generator": "Philox4x64-10 (numpy %s)" % np.__version__,
            "seed": self.seed,
            "key": ["%016x" % int(k) for k in self.key],
        }


class SkipAheadRNG:
    """The paper's view of the generator, for scalar (per-row) sampling-UDFs.

    A single sequence ``p_0, p_1, ...`` of uniforms in [0, 1) with O(1)
    ``skip(j)``: element j is lane ``j % 4`` of the SCALAR lane block at
    position ``j // 4``.  ``binomial`` draws from a generator keyed at the
    current position, as Algorithm 7 of the sample-generation paper does after
    "skip ahead to position mid".
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
        """Binomial(n, p) keyed at the current position (does not advance)."""
        return int(self._rng.generator(self._draw_stream, self._pos).binomial(n, p))
