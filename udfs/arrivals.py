"""Bootstrap samples of rows known only by a key: the first arrivals of
Poisson processes.

A bootstrap sample of size ``s`` over ``N`` rows is ``s`` independent
uniform picks among the rows.  The distributed multinomial
(:mod:`udfs.multinomial`) walks a tree over the row ids ``0..N-1``; rows
keyed by arbitrary values (hashes, sparse ids) have no such ranks.  Instead
every row runs its own Poisson process of rate 1 in a common "time", keyed
by the row's position: merged, the processes are one Poisson process of
rate ``N`` whose arrivals each belong to a uniformly random row,
independently of their times and of each other.  The first ``s`` arrivals
of the merged process are therefore ``s`` independent uniform picks: exactly
a bootstrap sample of size ``s``, whatever ``N`` and the keys are.

Drawing (all from :class:`udfs.rng.PositionRNG` lane blocks at the row's
position, :meth:`~udfs.rng.PositionRNG.at`):

* time is cut into windows; in window ``w`` a row has a Poisson(``h``)
  number of arrivals, by inversion of lane 0 of its block in stream
  ``(BOOTSTRAP_ARRIVALS, sample, w << 16)`` through the Poisson CDF (a table
  of Python floats: the same on every numpy version);
* the arrivals' times inside the window are independent uniform 64-bit
  words: lanes 1-3 of that block, then the lanes of the blocks of streams
  ``(BOOTSTRAP_ARRIVALS, sample, w << 16 | j)``, j = 1, 2, ...;
* an arrival's time is ``(window, word, position)``, compared in that order
  (equal only for rows with equal keys).

``h = (s + 8 sqrt(s) + 16) / N`` makes the first window hold ``s``
arrivals but with probability below 1e-15; the engine looks at more windows
when it does not.  The engine finds the ``s``-th smallest time in two
aggregations over the keys (:func:`histogram` of the words' top bits, then
the exact times in the one bin that holds the ``s``-th: :func:`boundary`,
:func:`cutoff`) and keeps every arrival up to it (:class:`KeyedBootstrap`).
"""
import math

import numpy as np

from .base import Occurrences, SamplingUDF, concat_occurrences
from .errors import ParameterError, check_int
from .rng import Purpose, stream, to_unit

#: the UDF spec of :class:`KeyedBootstrap`
UDF = "samplegen.udfs.arrivals:KeyedBootstrap"
#: blocks per window: sub-index = window << WINDOW_SHIFT | block
WINDOW_SHIFT = 16


def rate(rows, size):
    """Expected arrivals per row in one window."""
    return (size + 8.0 * math.sqrt(size) + 16.0) / rows


def poisson_cdf(h):
    """``F(0), F(1), ...`` of Poisson(h), up to where the tail is below
    2**-60, in Python floats."""
    term = math.exp(-h)
    total, cdf, k = term, [term], 0
    while k < h or 1.0 - total > 2.0 ** -60:
        k += 1
        term *= h / k
        if term == 0.0 and k > h:
            break
        total += term
        cdf.append(total)
    return np.array(cdf)


def bin_bits(size):
    """Top bits of the words in :func:`histogram`: about sqrt(size) bins,
    so that the boundary bin holds about sqrt(size) arrivals."""
    return int(min(16, max(6, math.ceil(math.log2(max(size, 2)) / 2))))


class Arrivals:
    """The arrivals of one bootstrap sample, for any rows."""

    def __init__(self, rows, size, sample):
        self.rows = check_int("rows", rows, lo=1)
        self.size = check_int("size", size, lo=1)
        self.sample = int(sample)
        self.cdf = poisson_cdf(rate(self.rows, self.size))

    def window(self, rng, positions, w):
        """Arrivals of rows *positions* in window *w*: ``(index, word)``,
        index into *positions* (non-decreasing) and the 64-bit time word."""
        positions = np.asarray(positions)
        lanes = rng.at(stream(Purpose.BOOTSTRAP_ARRIVALS, self.sample, w << WINDOW_SHIFT),
                       positions)
        counts = np.searchsorted(self.cdf, to_unit(lanes[:, 0]), side="right")
        index = np.repeat(np.arange(positions.shape[0], dtype=np.int64), counts)
        starts = np.cumsum(counts) - counts
        k = np.arange(index.size, dtype=np.int64) - np.repeat(starts, counts)
        words = np.empty(index.size, np.uint64)
        first = k < 3
        words[first] = lanes[index[first], 1 + k[first]]
        j = 1
        while True:
            lo = 3 + 4 * (j - 1)
            need = np.flatnonzero(counts > lo)
            if not need.size:
                break
            block = rng.at(stream(Purpose.BOOTSTRAP_ARRIVALS, self.sample,
                                  w << WINDOW_SHIFT | j), positions[need])
            slot = np.full(positions.shape[0], -1, np.int64)
            slot[need] = np.arange(need.size)
            these = (k >= lo) & (k < lo + 4)
            words[these] = block[slot[index[these]], k[these] - lo]
            j += 1
        return index, words


def histogram(words, bits):
    """Arrivals per bin of the words' top *bits* bits."""
    return np.bincount((words >> np.uint64(64 - bits)).astype(np.int64), minlength=1 << bits)


def boundary(histograms, size):
    """Where the *size*-th arrival lies: ``(window, bin, rank in the bin)``
    from the per-window histograms (summed over all rows); None when the
    windows hold fewer arrivals."""
    before = 0
    for w, hist in enumerate(histograms):
        cum = np.cumsum(hist)
        if before + int(cum[-1]) >= size:
            b = int(np.searchsorted(cum, size - before))
            below = before + (int(cum[b - 1]) if b else 0)
            return w, b, size - below
        before += int(cum[-1])
    return None


def cutoff(words, positions, rank):
    """The time ``(word, position)`` of the *rank*-th (1-based) arrival among
    those of the boundary bin (their words and positions)."""
    words = np.asarray(words, np.uint64)
    positions = np.asarray(positions, np.int64)
    order = np.lexsort((positions, words))
    w, p = words[order], positions[order]
    r = rank - 1
    if r + 1 < w.size and w[r] == w[r + 1] and p[r] == p[r + 1]:
        raise ParameterError("the key column holds duplicates: a bootstrap of keyed rows "
                             "needs unique keys")
    return int(w[r]), int(p[r])


def histograms(rng, positions, rows, size, samples, windows, bits):
    """Histograms of the arrivals of rows *positions*: an int64 array
    ``(samples, windows, 2**bits)``; the engines sum them over their tasks."""
    positions = np.asarray(positions, dtype=np.int64)
    total = np.zeros((samples, windows, 1 << bits), np.int64)
    for i in range(samples):
        arrivals = Arrivals(rows, size, i)
        for w in range(windows):
            total[i, w] = histogram(arrivals.window(rng, positions, w)[1], bits)
    return total


def boundary_arrivals(rng, positions, rows, size, bits, targets):
    """The arrivals of rows *positions* in each sample's boundary bin
    (``targets[i] = (window, bin)``): arrays ``(sample, word, position)``."""
    positions = np.asarray(positions, dtype=np.int64)
    out = ([], [], [])
    for i, (w, b) in enumerate(targets):
        index, words = Arrivals(rows, size, i).window(rng, positions, w)
        inside = (words >> np.uint64(64 - bits)) == np.uint64(b)
        out[0].append(np.full(int(inside.sum()), i, np.int64))
        out[1].append(words[inside])
        out[2].append(positions[index[inside]])
    return tuple(np.concatenate(parts) for parts in out)


def search_cutoffs(histograms_of, arrivals_in, samples, size):
    """Every sample's cutoff ``[window, word, position]``: the search every
    engine runs, over two aggregations it provides.

    ``histograms_of(windows)`` is :func:`histograms` summed over all rows;
    ``arrivals_in(targets, windows)`` is :func:`boundary_arrivals` of all
    rows, concatenated.  The windows double until every sample's *size*-th
    arrival lies in them (one round almost always)."""
    windows = 1
    while True:
        hists = histograms_of(windows)
        found = [boundary(hists[i], size) for i in range(samples)]
        if all(f is not None for f in found):
            break
        windows *= 2
    sample, words, positions = arrivals_in([(w, b) for w, b, _ in found], windows)
    sample = np.asarray(sample)
    words = np.asarray(words, np.uint64)
    positions = np.asarray(positions, np.int64)
    return [[w, *cutoff(words[sample == i], positions[sample == i], rank)]
            for i, (w, _, rank) in enumerate(found)]


def format_cutoffs(cutoffs):
    """``window:word:position/...``: cutoffs as one command-line word."""
    return "/".join(":".join(str(int(x)) for x in c) for c in cutoffs)


def parse_cutoffs(value):
    if isinstance(value, str):
        try:
            return [[int(x) for x in c.split(":")] for c in value.split("/") if c]
        except ValueError:
            raise ParameterError(f"cutoffs must be window:word:position/..., got "
                                 f"{value!r}") from None
    return value


def find_cutoffs(rng, positions, n_rows, samples, size):
    """Every sample's cutoff ``[window, word, position]`` from the rows
    *positions* held in memory (the engines aggregate the same functions
    over their tasks)."""
    positions = np.asarray(positions, dtype=np.int64)
    bits = bin_bits(size)
    return search_cutoffs(
        lambda windows: histograms(rng, positions, n_rows, size, samples, windows, bits),
        lambda targets, windows: boundary_arrivals(rng, positions, n_rows, size, bits, targets),
        samples, size)


class KeyedBootstrap(SamplingUDF):
    """``samples`` bootstrap samples of exactly ``size`` rows of ``n_rows``
    keyed rows: the arrivals up to each sample's cutoff (``cutoffs[i] =
    [window, word, position]``, found by the engine).  Sample ids:
    ``sample-i`` = i."""

    name = "keyed-bootstrap"

    def __init__(self, n_rows, samples, size, cutoffs):
        super().__init__(n_rows)
        self.samples = check_int("samples", samples, lo=1, hi=1 << 20)
        self.size = check_int("size", size, lo=1, hi=1 << 62)
        cutoffs = parse_cutoffs(cutoffs)
        if len(cutoffs) != self.samples or any(len(c) != 3 for c in cutoffs):
            raise ParameterError(f"{len(cutoffs)} cutoffs for {self.samples} samples")
        self.cutoffs = [tuple(int(x) for x in c) for c in cutoffs]
        self.arrivals = [Arrivals(n_rows, self.size, i) for i in range(self.samples)]

    def sample_names(self):
        return [f"sample-{i}" for i in range(self.samples)]

    def expected_rows(self, sample_id):
        return float(self.size)

    def params(self):
        return {"samples": self.samples, "size": self.size,
                "cutoffs": format_cutoffs(self.cutoffs)}

    def occurrences_at(self, positions, rng):
        positions = np.asarray(positions, dtype=np.int64)
        parts = []
        for i, arrivals in enumerate(self.arrivals):
            last_window, word, position = self.cutoffs[i]
            for w in range(last_window + 1):
                index, words = arrivals.window(rng, positions, w)
                if w == last_window:
                    pos = positions[index]
                    keep = (words < np.uint64(word)) | ((words == np.uint64(word))
                                                       & (pos <= position))
                    index, words = index[keep], words[keep]
                parts.append(Occurrences(index, np.full(index.size, i, np.int64), words))
        return self._checked(concat_occurrences(parts), positions.shape[0])

    def occurrences(self, start, stop, rng):
        return self.occurrences_at(np.arange(start, stop, dtype=np.int64), rng)
