"""Exact sizes for rows known only by a key: cutoffs on the coins' words.

The per-row coins of hold-out and k-fold draw one uniform 64-bit word per
row (lane 0 of the repeat's stream, keyed by the row's position).  Exact
sizes over the row ids ``0..m-1`` come from a labelling tree
(:mod:`udfs.exact`); rows keyed by anything else (hashes, sparse ids) have
no ranks to walk it by.  Instead, ranking the rows by their words is a
uniformly random order of them (the words are independent and, for distinct
keys, distinct), so cutting that order at fixed ranks -- the ``train``
smallest words to training, the next ones to test; the folds' cumulative
sizes for k-fold -- is an exact labelling with every one equally likely.
A cutoff at rank ``r`` is the ``r``-th smallest word (0-based): exactly
``r`` rows have a smaller one.  Equal keys share a word, so repeated keys
move the sizes by their repeats.

The engines find the cutoffs in two aggregations over the keys
(:func:`search_cutoffs`): a histogram of the words' top ``BITS`` bits, then
the words of the bins that hold a cutoff.
"""
import numpy as np

from .rng import stream

#: top bits of the words in the first aggregation's histogram
BITS = 16


def words(rng, positions, streams):
    """The words (lane 0) of rows *positions* in each of *streams*: a list
    of uint64 arrays."""
    positions = np.asarray(positions, dtype=np.int64)
    return [rng.at(s, positions)[:, 0] for s in streams]


def histograms(rng, positions, streams):
    """Rows per bin of their words' top bits, per stream: int64
    ``(len(streams), 2**BITS)``; the engines sum it over their tasks."""
    out = np.zeros((len(streams), 1 << BITS), np.int64)
    for i, w in enumerate(words(rng, positions, streams)):
        out[i] = np.bincount((w >> np.uint64(64 - BITS)).astype(np.int64), minlength=1 << BITS)
    return out


def words_in(rng, positions, streams, bins):
    """The words of rows *positions* that fall in ``bins[i]`` (bin numbers)
    for stream i: arrays ``(stream index, word)``."""
    index, found = [], []
    for i, w in enumerate(words(rng, positions, streams)):
        inside = np.isin((w >> np.uint64(64 - BITS)).astype(np.int64), list(bins[i]))
        index.append(np.full(int(inside.sum()), i, np.int64))
        found.append(w[inside])
    return np.concatenate(index), np.concatenate(found)


def search_cutoffs(histogram_of, words_of, ranks):
    """The cutoff words, a list per stream: ``ranks[i]`` (ranks in
    ``(0, m)``) for stream i, from the two aggregations the engine provides:
    ``histogram_of()`` (:func:`histograms` summed over all rows) and
    ``words_of(bins)`` (:func:`words_in` of all rows, concatenated)."""
    hists = histogram_of()
    spots = []
    for i, wanted in enumerate(ranks):
        cum = np.cumsum(hists[i])
        spots.append([])
        for r in wanted:
            b = int(np.searchsorted(cum, r, side="right"))
            spots[i].append((b, r - (int(cum[b - 1]) if b else 0)))
    index, found = words_of([sorted({b for b, _ in s}) for s in spots])
    index, found = np.asarray(index), np.asarray(found, np.uint64)
    cutoffs = []
    for i, s in enumerate(spots):
        mine = np.sort(found[index == i])
        top = (mine >> np.uint64(64 - BITS)).astype(np.int64)
        cutoffs.append([int(mine[np.searchsorted(top, b) + rank]) for b, rank in s])
    return cutoffs


def find_cutoffs(rng, positions, streams, ranks):
    """:func:`search_cutoffs` over the rows *positions* held in memory."""
    return search_cutoffs(lambda: histograms(rng, positions, streams),
                          lambda bins: words_in(rng, positions, streams, bins), ranks)


def format_streams(streams):
    """``purpose:index:sub/...``: streams as one command-line word."""
    return "/".join(":".join(str(int(x)) for x in s) for s in streams)


def parse_streams(text):
    return [stream(*(int(x) for x in s.split(":"))) for s in text.split("/") if s]


def format_lists(lists):
    """``a:b/c:d/...``: lists of integers (bins, cutoff words) as one
    command-line word (one list per stream)."""
    return "/".join(":".join(str(int(x)) for x in per) for per in lists)


def parse_lists(text):
    return [[int(x) for x in per.split(":") if x] for per in text.split("/")]
