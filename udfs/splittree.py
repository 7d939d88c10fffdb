"""Counts split down a binary tree over row ids: the shape both exact
distributed draws share.

A node covers rows ``[lo, lo + size)`` and holds a count (a number, or a
vector of counts per label); it hands its left half (``size // 2`` rows) a
share drawn by a function of the node alone and its right half the rest.
Both the bootstrap's multinomial (:mod:`udfs.multinomial`: a binomial share
of occurrences) and exact-size labellings (:mod:`udfs.exact`: a
multivariate hypergeometric share of every label's rows) walk it.  The tree
is split down to the *chunk level*, the first depth at which no node has
more than ``CHUNK_ROWS`` rows; a chunk then decides its rows in one go.
Since every draw is keyed by its node, any machine holding any range of
rows walks from the root to the same chunks with the same counts, whatever
the blocking or the task layout, at O(log m) draws per range.

``CHUNK_ROWS`` is part of the sampling contract (udfs.rng.SAMPLER_VERSION):
changing it changes samples.
"""
import numpy as np

CHUNK_ROWS = 1024


def chunk_depth(n_rows):
    """First depth at which every node of the tree has <= CHUNK_ROWS rows."""
    depth = 0
    while -(-n_rows // (1 << depth)) > CHUNK_ROWS:  # ceil(n_rows / 2**depth)
        depth += 1
    return depth


def walk(n_rows, total, split, wanted):
    """The chunk nodes ``(index, row start, size, count)`` reached from the
    root ``(0, 0, n_rows, total)`` by going down only into non-empty nodes
    for which ``wanted(lo, size, count)``; ``split(depth, index, size,
    count)`` gives a node's ``(left count, right count)``."""
    nodes = [(0, 0, n_rows, total)]
    for depth in range(chunk_depth(n_rows)):
        children = []
        for index, lo, size, count in nodes:
            half = size // 2
            left, right = split(depth, index, size, count)
            for child in ((2 * index, lo, half, left),
                          (2 * index + 1, lo + half, size - half, right)):
                if child[2] and wanted(*child[1:]):
                    children.append(child)
        nodes = children
    return nodes


def overlapping(start, stop):
    """``wanted`` of :func:`walk` for the nodes meeting rows ``[start, stop)``."""
    return lambda lo, size, count: lo < stop and lo + size > start


class SortedIds:
    """Row ids in any order, sorted once, for walks that enter only the
    nodes holding one of them (scattered rows cost O(touched chunks), never
    the span between them)."""

    def __init__(self, positions, n_rows):
        positions = np.asarray(positions, dtype=np.int64)
        self.order = np.argsort(positions, kind="stable")
        self.ids = positions[self.order]
        if self.ids.size and (self.ids[0] < 0 or self.ids[-1] >= n_rows):
            raise ValueError(f"row ids must lie in [0, {n_rows})")

    def span(self, lo, size):
        """``(a, b)``: the sorted ids ``ids[a:b]`` lie in ``[lo, lo + size)``."""
        a, b = np.searchsorted(self.ids, [lo, lo + size])
        return int(a), int(b)

    def wanted(self, lo, size, count):
        a, b = self.span(lo, size)
        return b > a
