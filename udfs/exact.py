"""Exact-size labellings of rows, decided row by row in any layout.

Per-row coins (the paper's hold-out and k-fold) give sample sizes that are
themselves random.  An exact labelling gives label ``l`` to exactly
``counts[l]`` of the rows ``0..m-1``, every such labelling equally likely:
a uniform ``round(ratio * m)``-subset as the training set, or folds whose
sizes differ by at most one.

The labels are split down the tree of :mod:`udfs.splittree`: a node of
``size`` rows holding ``counts`` (per label, summing to ``size``) gives its
left half (``size // 2`` rows) a multivariate hypergeometric share -- the
labels of ``size // 2`` rows drawn without replacement from the node's
(:meth:`udfs.rng.Draws.split_count`) -- and its right half the rest; a
chunk node permutes its multiset of labels uniformly (the order of one raw
64-bit word per row).  Conditioned on how many rows of each label fall in
the left half, a uniform labelling is uniform on both halves, so the leaves
are an exact draw: the without-replacement twin of the bootstrap's
multinomial tree (:mod:`udfs.multinomial`).

Randomness: node ``i`` at depth ``d`` draws from stream (EXACT_NODE,
labelling, part << 6 | d) keyed at ``i``; chunk ``i`` from (EXACT_CHUNK,
labelling, part) keyed at ``i``.  *labelling* separates independent
labellings of the same rows (hold-out repeats), *part* the separate trees
of one labelling (the classes of a stratified split).
"""
import math
from collections import OrderedDict

import numpy as np

from .errors import ParameterError
from .rng import Purpose, stream, word_order
from .splittree import SortedIds, overlapping, walk


class LabelTree:
    """Labels of rows ``[0, n_rows)``: exactly ``counts[l]`` rows labelled
    ``l``, uniformly over all such labellings, for any range or any set of
    rows, computed alone."""

    def __init__(self, rng, n_rows, counts, labelling=0, part=0, cache_chunks=8):
        self.rng = rng
        self.n_rows = int(n_rows)
        self.counts = np.asarray(counts, dtype=np.int64)
        if self.counts.ndim != 1 or self.counts.size == 0 or np.any(self.counts < 0):
            raise ParameterError(f"label counts must be a non-empty list of counts >= 0, "
                                 f"got {counts!r}")
        if int(self.counts.sum()) != self.n_rows:
            raise ParameterError(f"label counts must add up to the {self.n_rows} rows, got "
                                 f"{int(self.counts.sum())}")
        self.labelling, self.part = int(labelling), int(part)
        if not 0 <= self.part < 1 << 42:
            raise ParameterError(f"part must be in [0, 2**42), got {part}")
        self._splits = {}                   # (depth, index) -> left counts
        self._node_streams = {}             # depth -> the stream of its nodes' splits
        self._chunks = OrderedDict()        # chunk index -> labels of its rows
        self._cache_chunks = cache_chunks

    def _split(self, depth, index, size, counts):
        left = self._splits.get((depth, index))
        if left is None:
            sid = self._node_streams.get(depth)
            if sid is None:
                sid = self._node_streams[depth] = stream(Purpose.EXACT_NODE, self.labelling,
                                                         self.part << 6 | depth)
            left = self._splits[(depth, index)] = self.rng.keyed(sid, index).split_count(
                counts, size // 2)
        return left, counts - left

    def _chunk(self, index, size, counts):
        labels = self._chunks.get(index)
        if labels is not None:
            self._chunks.move_to_end(index)
            return labels
        draws = self.rng.keyed(stream(Purpose.EXACT_CHUNK, self.labelling, self.part), index)
        labels = np.empty(size, np.int64)
        labels[word_order(draws.raw(size))] = np.repeat(
            np.arange(counts.size, dtype=np.int64), counts)
        self._chunks[index] = labels
        if len(self._chunks) > self._cache_chunks:
            self._chunks.popitem(last=False)
        return labels

    def labels(self, start, stop):
        """The labels of rows ``[start, stop)`` (int64, one per row)."""
        start, stop = int(start), int(stop)
        if not 0 <= start <= stop <= self.n_rows:
            raise ParameterError(f"row range [{start}, {stop}) is outside the {self.n_rows} "
                                 "rows")
        nodes = walk(self.n_rows, self.counts, self._split, overlapping(start, stop))
        if len(nodes) >= BULK_CHUNKS:
            return self._bulk(nodes)[start - nodes[0][1]:stop - nodes[0][1]]
        parts = []
        for index, lo, size, counts in nodes:
            labels = self._chunk(index, size, counts)
            parts.append(labels[max(start, lo) - lo:min(stop, lo + size) - lo])
        return np.concatenate(parts) if parts else np.empty(0, np.int64)

    def _bulk(self, nodes):
        """The labels of the consecutive chunk *nodes* (from :func:`walk`),
        all rows from the first's to the last's: the same as
        :meth:`_chunk` of each, the chunks of one size ordered and labelled
        together (:func:`chunk_labels`) instead of a few calls each."""
        first = nodes[0][1]
        out = np.empty(nodes[-1][1] + nodes[-1][2] - first, np.int64)
        sid = stream(Purpose.EXACT_CHUNK, self.labelling, self.part)
        by_size = {}
        for node in nodes:
            by_size.setdefault(node[2], []).append(node)
        for size, group in by_size.items():
            words = np.empty((len(group), size), np.uint64)
            fill = getattr(self.rng, "keyed_raw_into", None)
            for row, (index, _, _, _) in enumerate(group):
                if fill is None or not fill(sid, index, words[row]):
                    words[row] = self.rng.keyed_raw(sid, index, size)
            counts = np.array([node[3] for node in group], np.int64)
            starts = np.array([node[1] for node in group], np.int64) - first
            for a in range(0, len(group), _BULK_ROWS):   # a cache-sized pass at a time
                b = min(len(group), a + _BULK_ROWS)
                labels = chunk_labels(words[a:b], counts[a:b])
                if np.all(np.diff(starts[a:b]) == size):     # one run of rows
                    out[starts[a]:starts[a] + labels.size] = labels.reshape(-1)
                else:
                    for row, lo in enumerate(starts[a:b].tolist()):
                        out[lo:lo + size] = labels[row]
        return out

    def labels_at(self, positions):
        """The labels of the rows *positions* (ids in ``[0, n_rows)``, any
        order, repeats allowed), aligned with them; only the chunks holding
        one of them are drawn."""
        ids = SortedIds(positions, self.n_rows)
        out = np.empty(ids.ids.size, np.int64)
        for index, lo, size, counts in walk(self.n_rows, self.counts, self._split, ids.wanted):
            a, b = ids.span(lo, size)
            out[ids.order[a:b]] = self._chunk(index, size, counts)[ids.ids[a:b] - lo]
        return out


#: chunks from which :meth:`LabelTree.labels` draws them together
BULK_CHUNKS = 4
_BULK_ROWS = 32


def chunk_labels(words, counts):
    """The labels of g chunks of one size: row r is the chunk whose raw
    words are ``words[r]`` and label counts ``counts[r]``, labelled as
    :meth:`LabelTree._chunk` does (``labels[word_order(words)] =
    repeat(labels, counts)``).  One sort of packed keys (the words' top bits
    above the place) orders every row at once; a row whose kept bits tie
    (about size^2 / 2^55 of them) is ordered by :func:`word_order` itself."""
    g, size = words.shape
    bits = np.uint64(max(1, (size - 1).bit_length()))
    key = words >> bits
    key <<= bits
    key |= np.arange(size, dtype=np.uint64)
    key.sort(axis=1)
    high = key >> bits
    key &= np.uint64((1 << int(bits)) - 1)
    order = key.view(np.int64)
    for row in np.flatnonzero(np.any(high[:, 1:] == high[:, :-1], axis=1)).tolist():
        order[row] = word_order(words[row])
    ranked = np.repeat(np.tile(np.arange(counts.shape[1], dtype=np.int64), g),
                       counts.reshape(-1)).reshape(g, size)
    order += np.arange(0, g * size, size, dtype=np.int64)[:, None]   # flat places
    labels = np.empty((g, size), np.int64)
    labels.reshape(-1)[order.reshape(-1)] = ranked.reshape(-1)
    return labels


class Labelling:
    """Exact labels of rows ``0..n_rows-1``: one :class:`LabelTree` over
    all rows (*counts*: rows per label), or with *strata* one per class
    over the class's rows by rank (*counts*: ``(classes, labels)``, part c
    for class c), so each class is labelled exactly as its row of counts
    says.  *labelling* separates independent labellings of the same rows."""

    def __init__(self, rng, n_rows, counts, labelling=0, strata=None):
        self.n_rows = int(n_rows)
        self.strata = strata
        if strata is None:
            self.tree = LabelTree(rng, n_rows, counts, labelling)
            return
        self.counts = np.asarray(counts, np.int64)
        self._make = lambda c: LabelTree(rng, int(strata.counts[c]), self.counts[c], labelling,
                                         part=c)
        self._trees = {}

    def _class_tree(self, c):
        tree = self._trees.get(c)
        if tree is None:
            tree = self._trees[c] = self._make(c)
        return tree

    def labels(self, start, stop):
        """The labels of rows ``[start, stop)``."""
        if self.strata is None:
            return self.tree.labels(start, stop)
        out = np.empty(stop - start, np.int64)
        for c, offsets, rank in self.strata.ranges(start, stop):
            out[offsets] = self._class_tree(c).labels(rank, rank + offsets.size)
        return out

    def labels_for(self, rng, start, stop):
        """The labels of the rows a UDF's range ``[start, stop)`` stands for
        under *rng*: those row ids, or the row ids a keyed view lists there
        (an exact labelling is over ``0..n_rows-1``, so keys must be row ids)."""
        rows = rng.keyed_rows(start, stop)
        if rows is None:
            return self.labels(start, stop)
        if self.strata is not None:
            raise ParameterError("stratified samples need rows in row-id ranges; rows known by "
                                 "a key column cannot be stratified")
        if rows.size and (int(rows.min()) < 0 or int(rows.max()) >= self.n_rows):
            raise ParameterError(f"exact sizes need the row ids 0..{self.n_rows - 1} as keys; "
                                 f"got key position {int(rows.max())}")
        return self.tree.labels_at(rows)


def balanced_sizes(rows, k):
    """Sizes of k folds of *rows* that differ by at most one, the larger
    ones first (as scikit-learn's KFold)."""
    return np.array([rows // k + (1 if i < rows % k else 0) for i in range(k)], np.int64)


def holdout_counts(rows, ratio, fraction=1.0, unit="row"):
    """``[train, test]`` row counts of an exact hold-out (and ``neither``
    with ``fraction < 1``): ``round(fraction * rows)`` rows kept, of which
    ``round(ratio * kept)`` train, halves rounded up.  An empty side is a
    ParameterError; *unit*: what is counted, as its message names it (a
    grouped hold-out counts groups)."""
    kept = math.floor(fraction * rows + 0.5)
    train = math.floor(ratio * kept + 0.5)
    test = kept - train
    if train == 0 or test == 0:
        side = "training" if train == 0 else "test"
        raise ParameterError(f"an exact hold-out of {rows} {unit}{'s' if rows != 1 else ''} at "
                             f"ratio {ratio}"
                             f"{f' and fraction {fraction}' if fraction < 1 else ''} leaves the "
                             f"{side} set empty (a coin per {unit} allows it: --per-row, "
                             "exact=False)")
    return [train, test] + ([rows - kept] if kept < rows else [])
