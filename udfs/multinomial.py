"""Distributed multinomial: how often each row occurs in a bootstrap sample.

A bootstrap sample of size ``total`` over ``m`` rows is a draw from the
multinomial M_m(total; 1/m, ..., 1/m).  Its components are correlated, so they
cannot be drawn row by row independently; Algorithm 7 of the sample-generation
paper instead splits the count recursively: a node covering rows
``[start, start + size)`` with count ``t`` sends ``Binomial(t, left/size)`` of
its occurrences to its left half (``left = size // 2`` rows) and the rest to
the right.  Conditioning a multinomial on the total of a subset of its cells
leaves multinomials on both sides, so the leaves are an exact draw.

Each node's binomial is a pure function of (seed, sample, node): any machine
holding any range of rows walks down from the root and reaches the same counts,
whatever the blocking or the task layout.  Two levels of keying keep the cost
per block at O(rows + log m):

* nodes above the *chunk level* (the first depth at which no node has more
  than ``CHUNK_ROWS`` rows) each draw their binomial (numpy's legacy,
  frozen algorithm) from draws keyed by (BOOTSTRAP_NODE, sample, part << 6
  | depth, node index); these few draws are memoized;
* below that level the tree is not split further: a chunk node with count T
  draws its conditional multinomial directly, as T independent uniform picks
  among its rows (the paper's "temporary multinomial" for the rows of a
  block; :meth:`udfs.rng.Draws.integers`), followed by one raw 64-bit word per
  occurrence as its relative position, all from draws keyed by
  (BOOTSTRAP_CHUNK, sample, part, chunk index).

*part* (0 unless stratified) separates the trees of one sample: a
stratified bootstrap draws each class's share from its own tree over the
class's rows.  A block
  that covers part of a chunk computes the whole chunk (at most
  ``CHUNK_ROWS`` rows) and keeps its share; chunks are memoized so a task
  walking consecutive blocks draws each chunk once.

Both stages are exact, so the counts are exactly multinomial; the result is
the same for any split of the rows into blocks and tasks.

The tree's shape and walk are :mod:`udfs.splittree`'s.
"""
from collections import OrderedDict

import numpy as np

from .rng import Purpose, stream
from .splittree import CHUNK_ROWS, SortedIds, chunk_depth, overlapping, walk

__all__ = ["CHUNK_ROWS", "MultinomialTree", "chunk_depth"]


class _Chunk:
    """Occurrences inside one chunk node: their rows and order keys."""

    __slots__ = ("rows", "relpos")

    def __init__(self, rows, relpos):
        self.rows = rows        # absolute row ids, non-decreasing
        self.relpos = relpos    # uint64, one per occurrence


class MultinomialTree:
    """Occurrence counts of one bootstrap sample, for any range of rows.

    A subclass may draw in other proportions (:mod:`udfs.weighted`): it
    overrides :meth:`_share` (a node's left share of occurrences) and
    :meth:`_picks` (the rows a chunk's occurrences fall on), and names its
    own streams."""

    node_purpose = Purpose.BOOTSTRAP_NODE
    chunk_purpose = Purpose.BOOTSTRAP_CHUNK

    def __init__(self, rng, n_rows, total, sample, part=0, cache_chunks=8):
        self.rng = rng
        self.n_rows = int(n_rows)
        self.total = int(total)
        self.sample = int(sample)
        self.part = int(part)
        self.depth = chunk_depth(self.n_rows)
        self._node_counts = {}              # (depth, index) -> count
        self._chunks = OrderedDict()        # chunk index -> _Chunk
        self._cache_chunks = cache_chunks

    # -- nodes above the chunk level ------------------------------------
    def _left_count(self, depth, index, size, count):
        key = (depth, index)
        left = self._node_counts.get(key)
        if left is None:
            share = self._share(depth, index, size)
            if count == 0 or share <= 0.0:
                left = 0
            elif share >= 1.0:
                left = count
            else:
                draws = self.rng.keyed(stream(self.node_purpose, self.sample,
                                              self.part << 6 | depth), index)
                left = int(draws.binomial(count, share))
            self._node_counts[key] = left
        return left

    def _share(self, depth, index, size):
        """The probability that an occurrence of node (depth, index) of
        *size* rows falls in its left half: the half's share of the rows."""
        return (size // 2) / size

    def _split(self, depth, index, size, count):
        left = self._left_count(depth, index, size, count)
        return left, count - left

    def _walk(self, wanted):
        """The chunk nodes (index, row start, size, count) of the non-empty
        nodes for which ``wanted(lo, size, count)``."""
        return walk(self.n_rows, self.total, self._split,
                    lambda lo, size, count: count and wanted(lo, size, count))

    # -- inside a chunk ---------------------------------------------------
    def _expand(self, index, lo, size, count):
        chunk = self._chunks.get(index)
        if chunk is not None:
            self._chunks.move_to_end(index)
            return chunk
        draws = self.rng.keyed(stream(self.chunk_purpose, self.sample, self.part), index)
        picks = self._picks(draws, lo, size, count)
        rows = np.repeat(np.arange(lo, lo + size, dtype=np.int64),
                         np.bincount(picks, minlength=size))
        relpos = draws.raw(count)
        chunk = _Chunk(rows, relpos)
        self._chunks[index] = chunk
        if len(self._chunks) > self._cache_chunks:
            self._chunks.popitem(last=False)
        return chunk

    def _picks(self, draws, lo, size, count):
        """The offsets in chunk ``[lo, lo + size)`` its *count* occurrences
        fall on: uniform picks."""
        return draws.integers(0, size, count)

    def occurrences(self, start, stop):
        """Rows (absolute ids, non-decreasing) and relative positions of the
        occurrences of rows in ``[start, stop)``."""
        rows, relpos = [], []
        for index, lo, size, count in self._walk(overlapping(start, stop)):
            if count == 0:
                continue
            chunk = self._expand(index, lo, size, count)
            i, j = np.searchsorted(chunk.rows, [start, stop])
            rows.append(chunk.rows[i:j])
            relpos.append(chunk.relpos[i:j])
        if not rows:
            return np.empty(0, np.int64), np.empty(0, np.uint64)
        return np.concatenate(rows), np.concatenate(relpos)

    def occurrences_at(self, positions):
        """Occurrences of the rows *positions* (any order, in ``[0, n_rows)``):
        the index into *positions* of each occurrence and its relative
        position, exactly as :meth:`occurrences` gives them for those rows.
        Only the chunks holding one of the rows are drawn: the walk down the
        tree enters a node only when a position falls in it, so scattered
        rows cost O(touched chunks), never the span between them.  A row id
        listed twice gets its occurrences once (at its first place)."""
        ids = SortedIds(positions, self.n_rows)
        nodes = self._walk(ids.wanted)
        where, relpos = [], []
        for index, lo, size, count in nodes:
            if not count:
                continue
            chunk = self._expand(index, lo, size, count)
            a, b = ids.span(lo, size)
            wanted = ids.ids[a:b]
            # occurrences of chunk rows listed in the batch (first listing)
            first = np.searchsorted(wanted, chunk.rows)
            hit = first < wanted.size
            hit[hit] = wanted[first[hit]] == chunk.rows[hit]
            where.append(ids.order[a + first[hit]])
            relpos.append(chunk.relpos[hit])
        if not where:
            return np.empty(0, np.int64), np.empty(0, np.uint64)
        return np.concatenate(where), np.concatenate(relpos)

    def counts(self, start, stop):
        """Occurrence count of every row in ``[start, stop)``."""
        rows, _ = self.occurrences(start, stop)
        return np.bincount(rows - start, minlength=stop - start)
