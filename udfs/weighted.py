"""Weighted samples of a matrix's rows: each row drawn in proportion to its
weight (a loss, a priority, an importance), at cluster scale.

Three modes of the built-in UDF ``weighted`` (:class:`Weighted`), all keyed
by row id, so any blocking and any task layout give the same samples:

* **exactly K rows without replacement** (``size``), in the law and the
  order of K successive weighted draws.  Each row gets the key ``E / w``
  (E an exponential variate from the row's lane of stream (WEIGHTED_KEY,
  sample)); the K smallest keys, ascending, are successive weighted draws
  (Efraimidis and Spirakis' exponential race).  The K-th smallest key is a
  global fact: the driver finds it once (:meth:`Weighted.prepare`, a top-K
  over the weights' keys), and every task keeps its rows with a key up to
  it, the key (its IEEE bits, which order like the numbers) as the relative
  position, so the sample comes out in draw order;
* **exactly K rows with replacement** (``size``, ``replace``): a weighted
  multinomial split down the row-id tree of :mod:`udfs.multinomial` -- a
  node's occurrences go left with probability (the left half's weight) /
  (the node's), and a chunk's are picks in proportion to its rows'
  weights.  The weights of the tree's chunk nodes are summed once when the
  weights are read (:meth:`RowWeights.chunk_totals`), the sums above them
  pairwise up the tree (:meth:`RowWeights.node_sums`): the same numbers on
  every machine;
* **K rows expected** (``expected``): Poisson sampling with inclusion
  probabilities ``min(1, c w)``, c such that they add up to K (the driver
  computes it, :func:`scaled_inclusion_rate`); a random order.

Weights are any finite floats that are not negative (subnormal ones too, and
columns whose sum exceeds the largest float); a zero weight is never drawn.
Every sum is taken over the weights scaled by a power of two
(:func:`udfs.sumtree.weight_exponent`: exact, and 1 for weights in the
ordinary range), and a key ``E / w`` is a 64-bit code with a wider exponent
than a double's (:func:`exponential_keys`), so no sum overflows and no key
saturates, whatever the weights.
"""
import numpy as np

from .base import (
    Occurrences,
    SamplingUDF,
    concat_occurrences,
    empty_occurrences,
    occurrences_of_ids,
)
from .errors import InputError, ParameterError, check_bool, check_int
from .multinomial import MultinomialTree
from .rng import Purpose, stream, to_unit
from .splittree import chunk_depth
from .sumtree import SMALL_EXPONENT, first_bad_weight, scaled, weight_exponent

#: rows whose keys the driver's top-K computes at once
KEY_BATCH = 1 << 20
#: the key code of a row of weight zero: after every other key (never drawn)
NEVER = np.uint64(0xFFFFFFFFFFFFFFFF)
#: the first code of a key beyond the largest double (biased exponent 2047)
_BEYOND_DOUBLE = 0x7FF0000000000000
_FRACTION = np.uint64((1 << 52) - 1)
#: a key exponent under which the key of every finite positive weight has a
#: code (for ordering keys without knowing the largest weight: Spark's sort)
ANY_EXPONENT = -64


def chunk_bounds(n_rows):
    """``(lo, size)`` of the row-id tree's chunk nodes (:mod:`udfs.splittree`),
    in node-index order (``2**depth`` of them, some empty)."""
    lo, size = np.zeros(1, np.int64), np.array([n_rows], np.int64)
    for _ in range(chunk_depth(n_rows)):
        half = size // 2
        lo = np.stack([lo, lo + half], axis=1).ravel()
        size = np.stack([half, size - half], axis=1).ravel()
    return lo, size


def chunk_totals(w):
    """The weight of each chunk node of the row-id tree over weights *w*:
    a sequential sum of its rows' weights in row order (what ``np.cumsum``
    of the chunk ends with, on every machine: no reassociation), chunks in
    batches padded with zeros to the largest chunk's rows."""
    lo, size = chunk_bounds(w.size)
    width = int(size.max())
    totals = np.zeros(lo.size)
    batch = max(1, (1 << 22) // width)
    offsets = np.arange(width)
    for a in range(0, lo.size, batch):
        b = min(lo.size, a + batch)
        index = lo[a:b, None] + offsets
        inside = offsets < size[a:b, None]
        table = np.where(inside, w[np.minimum(index, w.size - 1)], 0.0)
        totals[a:b] = np.cumsum(table, axis=1)[:, -1]
    return totals


def exponential_keys(words, w, exponent=0):
    """The keys ``E / (w 2**exponent)`` of rows whose lane-0 words of stream
    (WEIGHTED_KEY, sample) are *words* and whose weights are *w*: E = -log(1
    - u), u the word's uniform (0 or in [2**-53, 37), as u < 1), as uint64
    codes that order like the keys: a double's bits (biased exponent, 52
    bits of fraction) with room for biased exponents up to 4095, so a key
    beyond the largest double (a tiny weight) keeps its precision; NEVER for
    a zero weight.

    Each key is ``q 2**-(e + exponent)`` with ``w = m 2**e`` (m in [0.5,
    1)) and ``q = E / m`` (a normal double): exact for every finite weight,
    and where ``E / w`` is a normal double (every weight in the ordinary
    range, *exponent* 0), its code is the bits of ``E / w``.  *exponent*:
    the weights' :attr:`RowWeights.exponent`, which keeps every key at least
    the smallest normal double (the ranking is the same for any exponent);
    :data:`ANY_EXPONENT` for any weights."""
    exp = -np.log1p(-to_unit(words))
    w = np.asarray(w, np.float64)
    m, e = np.frexp(w)
    q = np.zeros(exp.size)
    np.divide(exp, m, out=q, where=m > 0)
    _, qe = np.frexp(q)
    biased = qe.astype(np.int64) - e.astype(np.int64) + (1022 - int(exponent))
    codes = (biased.astype(np.uint64) << np.uint64(52)) | (q.view(np.uint64) & _FRACTION)
    codes[q == 0] = 0                    # E = 0: the smallest key
    codes[w == 0] = NEVER
    return codes


def key_order(codes):
    """Key codes (:func:`exponential_keys`) as int64 in the same order
    (for engines without unsigned 64-bit integers)."""
    return (np.asarray(codes, np.uint64) ^ np.uint64(1 << 63)).view(np.int64)


def poisson_included(words, rate, w, exponent=0):
    """Whether each row is in a Poisson sample of inclusion probabilities
    ``min(1, rate w 2**exponent)``, its lane-0 word of stream
    (WEIGHTED_POISSON, sample) being *words* (*rate*, *exponent*: what
    :func:`scaled_inclusion_rate` gives)."""
    with np.errstate(over="ignore"):
        p = np.minimum(1.0, rate * scaled(w, exponent))
    return to_unit(words) < p


def _key_word(code):
    """A key code as a word: the key's shortest round-trip decimal, or its
    code in hexadecimal (``0x...``) for a key beyond the largest double."""
    code = int(code)
    if code < _BEYOND_DOUBLE:
        return repr(float(np.array(code, np.uint64).view(np.float64)))
    return f"0x{code:016x}"


def _key_code(word):
    """The code of a word of :func:`_key_word` (ValueError if none)."""
    if word.startswith("0x"):
        code = int(word, 16)
    else:
        key = float(word) + 0.0                      # -0.0: 0.0
        if not 0 <= key < float("inf"):
            raise ValueError(word)
        code = int(np.array(key).view(np.uint64))
    if not 0 <= code < int(NEVER):
        raise ValueError(word)
    return code


def format_cutoffs(cutoffs):
    """``(key code, row)`` per sample as one word, ``key:row/key:row...``
    (:func:`_key_word`): a parameter that survives JSON and a TRANSFORM
    script's command line alike."""
    return "/".join(f"{_key_word(k)}:{int(r)}" for k, r in cutoffs)


def parse_cutoffs(text, samples):
    """The ``(key code, row)`` pairs of :func:`format_cutoffs`'s word."""
    try:
        pairs = [(_key_code(k), int(r)) for k, r in
                 (item.split(":") for item in str(text).split("/"))]
    except ValueError:
        raise ParameterError(f"cutoffs must be KEY:ROW/KEY:ROW... with non-negative keys, "
                             f"got {text!r}") from None
    if len(pairs) != samples:
        raise ParameterError(f"cutoffs must give {samples} keys, got {text!r}")
    return pairs


class RowWeights:
    """The weights of rows ``0..n_rows-1``, for any range.

    *read*: ``read(start, stop)`` gives the weights of rows ``[start,
    stop)`` (float64); *chunk_totals*: the totals of the row-id tree's chunk
    nodes (:func:`chunk_bounds`), an array or a function giving it; *label*:
    the weights' column, when they are a matrix column's; *positive*: how
    many weights are positive; *exponent*: the power of two by which every
    sum is scaled (:func:`udfs.sumtree.weight_exponent` of the largest
    weight and the rows; the chunk totals are of the scaled weights).
    :meth:`of` makes one of an array.
    """

    def __init__(self, n_rows, read, chunk_totals, label=None, positive=None, exponent=0):
        self.n_rows = int(n_rows)
        self.label = label
        self.positive = positive
        self.exponent = int(exponent)
        self._read = read
        self._chunk_totals = chunk_totals
        self._sums = None

    @classmethod
    def of(cls, values, label=None):
        """The weights *values* (one per row), refused with the first row
        that is NaN, infinite or negative."""
        w = np.asarray(values)
        what = f"weight column {label!r}" if label is not None else "weights"
        if w.ndim != 1 or w.size == 0:
            raise ParameterError(f"{what} must be one number per row")
        if w.dtype.kind not in "fiub":
            raise ParameterError(f"{what} must be numbers, got {w.dtype}")
        w = w.astype(np.float64)
        bad = first_bad_weight(w)
        if bad is not None:
            row, kind = bad
            raise InputError(f"{what} is {kind} ({float(w[row])!r}) at row {row}: a weight "
                             "must be finite and not negative (zero: never drawn)")
        exponent = weight_exponent(w.max(), w.size)
        return cls(w.size, lambda a, b: w[a:b], chunk_totals(scaled(w, exponent)), label,
                   int(np.count_nonzero(w)), exponent)

    @classmethod
    def uniform(cls, n_rows):
        """Weight 1 for each of *n_rows* rows."""
        return cls(n_rows, lambda a, b: np.ones(b - a),
                   lambda: chunk_bounds(n_rows)[1].astype(np.float64), None, n_rows)

    def weights(self, start, stop):
        """The weights of rows ``[start, stop)``, as given."""
        return np.asarray(self._read(int(start), int(stop)), np.float64)

    def scaled_weights(self, start, stop):
        """The weights of rows ``[start, stop)`` times ``2**exponent``."""
        return scaled(self.weights(start, stop), self.exponent)

    def chunk_totals(self):
        totals = self._chunk_totals
        if callable(totals):
            totals = self._chunk_totals = totals()
        return totals

    def node_sums(self):
        """``sums[d][i]``: the weight of node i at depth d of the row-id tree,
        from the chunk totals up, pairwise."""
        if self._sums is None:
            level = np.asarray(self.chunk_totals(), np.float64)
            sums = [level]
            while level.size > 1:
                level = level[0::2] + level[1::2]
                sums.append(level)
            self._sums = sums[::-1]
        return self._sums

    @property
    def total(self):
        """The sum of the scaled weights (times ``2**-exponent``: the sum)."""
        return float(self.node_sums()[0][0])


def inclusion_rate(weights, expected):
    """The c for which the inclusion probabilities ``min(1, c w)`` add up to
    *expected* (:func:`scaled_inclusion_rate`'s ``c 2**s``: inf or 0 where
    that is beyond the doubles, for weights far outside the ordinary
    range)."""
    rate, exponent = scaled_inclusion_rate(weights, expected)
    with np.errstate(over="ignore", under="ignore"):
        return float(np.ldexp(rate, exponent))


def scaled_inclusion_rate(weights, expected):
    """``(c, s)`` for which the inclusion probabilities ``min(1, c w 2**s)``
    add up to *expected* (at most the number of positive weights): with the
    j largest weights certain, ``c = (expected - j) / (the other weights'
    sum)``, for the least j at which the largest of the others stays below
    1 / c.  The sums are of the weights scaled by ``2**s``
    (:func:`udfs.sumtree.weight_exponent`; s = 0 for weights in the
    ordinary range).  A weight that is tiny under the scale of the largest
    (where the test of j would lose precision) is tested again under the
    scale of the largest weight not certain yet: exact for any weights."""
    w = np.sort(weights[weights > 0])[::-1]
    if expected > w.size:
        raise ParameterError(f"expected = {expected} rows, but only {w.size} weights are "
                             "positive")
    certain = 0                              # the weights known to be certain
    while True:
        exponent = weight_exponent(w[certain], w.size - certain)
        part = scaled(w[certain:], exponent)
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            rest = np.cumsum(part[::-1])[::-1]   # rest[j]: the sum of all but the j largest
            j = np.arange(certain, expected)
            rates = (expected - j) / rest[:j.size]
            fits = part[:j.size] * rates < 1.0
        tiny = np.flatnonzero(part[:j.size] < 2.0 ** -SMALL_EXPONENT)
        exact = int(tiny[0]) if tiny.size else j.size    # the tests made at full precision
        if fits[:exact].any():
            return float(rates[int(np.argmax(fits[:exact]))]), exponent
        if exact == j.size:                  # exactly the positive weights, all certain
            return float(1.0 / part[j.size - 1]), exponent
        certain += exact


class WeightedTree(MultinomialTree):
    """A multinomial over rows in proportion to their weights, split down
    the row-id tree: :class:`udfs.multinomial.MultinomialTree` with a
    node's left share the left half's weight over the node's, and a chunk's
    picks in proportion to its rows' weights."""

    node_purpose = Purpose.WEIGHTED_NODE
    chunk_purpose = Purpose.WEIGHTED_CHUNK

    def __init__(self, rng, weights, total, sample):
        super().__init__(rng, weights.n_rows, total, sample)
        self.weights = weights
        self.sums = weights.node_sums()

    def _share(self, depth, index, size):
        node = self.sums[depth][index]
        return self.sums[depth + 1][2 * index] / node if node > 0 else 0.0

    def _picks(self, draws, lo, size, count):
        running = np.cumsum(self.weights.scaled_weights(lo, lo + size))
        points = draws.random(count) * running[-1]
        # the first row whose running weight passes the point: a row of
        # weight zero adds nothing, so no point lands on it
        return np.minimum(np.searchsorted(running, points, side="right"), size - 1)


class Weighted(SamplingUDF):
    """``samples`` weighted samples of the rows (``sample-i`` = i), the
    weights a column of the matrix (*weights*: its name; *weighting*: the
    :class:`RowWeights`; neither: every row weighs 1).  Exactly one of
    *size* (exactly that many rows:
    successive weighted draws, or with *replace* a weighted bootstrap) and
    *expected* (Poisson sampling, that many rows expected).

    *cutoffs* (size without replacement) and *rate* with *rate_exponent*
    (expected) are what the driver computes once before the tasks start
    (:meth:`prepare`)."""

    name = "weighted"

    def __init__(self, n_rows, weights=None, size=None, expected=None, replace=False,
                 samples=1, weighting=None, cutoffs=None, rate=None, rate_exponent=0):
        super().__init__(n_rows)
        if weights is None and weighting is None:      # every row alike
            weighting = RowWeights.uniform(self.n_rows)
        elif not isinstance(weights, str) or not weights:
            raise ParameterError(f"weights must name a column, got {weights!r}")
        elif weighting is None:
            raise ParameterError(f"weights={weights!r} needs every row's weight: give a "
                                 "column or the weights")
        if weighting.n_rows != self.n_rows:
            raise ParameterError(f"weights {weights!r} have {weighting.n_rows} rows, the data "
                                 f"{self.n_rows}")
        if (size is None) == (expected is None):
            raise ParameterError("give exactly one of --size (exactly that many rows) and "
                                 "--expected (that many rows expected)")
        self.weights = weights
        self.weighting = weighting
        self.samples = check_int("samples", samples, lo=1, hi=1 << 20)
        self.replace = check_bool("replace", replace)
        self.size = None if size is None else check_int("size", size, lo=1, hi=1 << 62)
        self.expected = None if expected is None else check_int("expected", expected, lo=1,
                                                                 hi=self.n_rows)
        if self.replace and self.size is None:
            raise ParameterError("--replace needs --size (an exact number of draws)")
        positive = weighting.positive
        if positive is not None and positive == 0:
            raise ParameterError(f"no row has a positive weight in {weights!r}: nothing can "
                                 "be drawn")
        if positive is not None and not self.replace and (self.size or 0) > positive:
            raise ParameterError(f"size = {self.size} distinct rows, but only {positive} rows "
                                 f"have a positive weight in {weights!r}")
        self.cutoffs = None if cutoffs is None else parse_cutoffs(cutoffs, self.samples)
        self.rate = None if rate is None else float(rate)
        if self.rate is not None and not 0 < self.rate < float("inf"):
            raise ParameterError(f"rate must be a positive finite number, got {rate!r}")
        self.rate_exponent = check_int("rate_exponent", rate_exponent, lo=-4096, hi=4096)
        self._trees = {}

    def sample_names(self):
        return [f"sample-{i}" for i in range(self.samples)]

    def expected_rows(self, sample_id):
        return float(self.size if self.size is not None else self.expected)

    def params(self):
        out = {"samples": self.samples}
        if self.weights is not None:
            out["weights"] = self.weights
        if self.size is not None:
            out.update(size=self.size, replace=self.replace)
        else:
            out["expected"] = self.expected
        if self.cutoffs is not None:
            out["cutoffs"] = format_cutoffs(self.cutoffs)
        if self.rate is not None:
            out["rate"] = self.rate
        if self.rate_exponent:
            out["rate_exponent"] = self.rate_exponent
        return out

    def ranged(self):
        return False

    # -- what the driver computes once ------------------------------------
    def prepare(self, rng):
        """The parameters only the whole column gives, for *rng*'s seed:
        ``cutoffs`` (the K-th smallest key of each sample, a top-K over
        every row's key, KEY_BATCH rows at a time) or ``rate`` (with
        ``rate_exponent`` unless 0)."""
        if self.replace:
            return {}
        if self.expected is not None:
            w = self.weighting.weights(0, self.n_rows)
            rate, exponent = scaled_inclusion_rate(w, self.expected)
            return {"rate": rate, **({"rate_exponent": exponent} if exponent else {})}
        cutoffs = []
        for i in range(self.samples):
            best_keys, best_rows = np.empty(0, np.uint64), np.empty(0, np.int64)
            for a in range(0, self.n_rows, KEY_BATCH):
                b = min(self.n_rows, a + KEY_BATCH)
                keys = self._keys(rng, i, a, b)
                rows = np.arange(a, b, dtype=np.int64)
                keys, rows = np.concatenate([best_keys, keys]), np.concatenate([best_rows, rows])
                if keys.size > self.size:
                    keep = np.argpartition(keys, self.size - 1)[:self.size]
                    keys, rows = keys[keep], rows[keep]
                best_keys, best_rows = keys, rows
            finite = best_keys != NEVER
            if np.count_nonzero(finite) < self.size:
                raise ParameterError(f"size = {self.size} distinct rows, but only "
                                     f"{np.count_nonzero(finite)} rows have a positive weight")
            last = np.lexsort((best_rows, best_keys))[-1]
            cutoffs.append((int(best_keys[last]), int(best_rows[last])))
        return {"cutoffs": format_cutoffs(cutoffs)}

    def _keys(self, rng, i, start, stop):
        """The key codes of rows ``[start, stop)`` in sample i."""
        return exponential_keys(rng.lane(stream(Purpose.WEIGHTED_KEY, i), start, stop),
                                self.weighting.weights(start, stop), self.weighting.exponent)

    # -- the tasks --------------------------------------------------------
    def occurrences(self, start, stop, rng):
        parts = [self._sample(rng, i, start, stop) for i in range(self.samples)]
        parts = [p for p in parts if p.offset.size]
        if not parts:
            return empty_occurrences()
        return Occurrences(*(np.concatenate(cols) for cols in zip(*parts)))

    def occurrences_at(self, positions, rng):
        """Occurrences of the rows with ids *positions* (any order): the
        trees' draws at those rows (with replacement), else the rows' own
        keys or coins, from ranges covering them (their weights are read by
        range)."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.n_rows):
            raise ParameterError(f"weighted row ids must lie in [0, {self.n_rows})")
        if not self.replace:
            return occurrences_of_ids(self, positions, rng)
        parts = []
        for i in range(self.samples):
            where, relpos = self._tree(rng, i).occurrences_at(positions)
            parts.append(Occurrences(where, np.full(where.size, i, np.int64), relpos))
        return concat_occurrences(parts)

    def _tree(self, rng, i):
        tree = self._trees.get((rng.seed, i))
        if tree is None:
            tree = self._trees[(rng.seed, i)] = WeightedTree(rng, self.weighting, self.size, i)
        return tree

    def _sample(self, rng, i, start, stop):
        if self.replace:
            rows, relpos = self._tree(rng, i).occurrences(start, stop)
            offset = rows - start
        elif self.expected is not None:
            if self.rate is None:
                raise ParameterError("the inclusion rate is missing: run through the driver")
            lanes = rng.block(stream(Purpose.WEIGHTED_POISSON, i), start, stop)
            offset = np.flatnonzero(poisson_included(lanes[:, 0], self.rate,
                                                     self.weighting.weights(start, stop),
                                                     self.rate_exponent))
            relpos = lanes[offset, 1]
        else:
            if self.cutoffs is None:
                raise ParameterError("the sample's cutoff keys are missing: run through the "
                                     "driver")
            key, row = self.cutoffs[i]
            key = np.uint64(key)
            keys = self._keys(rng, i, start, stop)
            rows = np.arange(start, stop, dtype=np.int64)
            offset = np.flatnonzero((keys < key) | ((keys == key) & (rows <= row)))
            relpos = keys[offset]           # the codes order as the keys
        return Occurrences(offset.astype(np.int64), np.full(offset.size, i, np.int64), relpos)
