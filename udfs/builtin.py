"""The built-in sampling-UDFs: hold-out, k-fold and bootstrap."""
import math

import numpy as np

from .base import Occurrences, SamplingUDF, concat_occurrences, occurrences_of_ids
from .errors import ParameterError, check_bool, check_fraction, check_int
from .exact import Labelling, LabelTree, balanced_sizes, holdout_counts
from .multinomial import MultinomialTree
from .ranks import format_lists
from .rng import Purpose, stream, to_unit, word_order
from .strata import greedy_folds, holdout_allocation, proportional, round_robin


def check_side(udf, param, name, strata):
    """The column name *name* of a built-in UDF's *param* (``stratify``: the
    label; ``groups``: the group column; None: not asked for), checked
    against the *strata* (:class:`udfs.strata.Strata`) it was given with:
    the classes or groups of the UDF's rows."""
    if name is None:
        return None
    what = "class" if param == "stratify" else "group"
    if not isinstance(name, str) or not name:
        raise ParameterError(f"{param} must name a column, got {name!r}")
    if strata is None:
        raise ParameterError(f"{param}={name!r} needs the {what} of every row: give the "
                             f"{'labels (y)' if what == 'class' else 'groups'} or a column")
    if strata.n_rows != udf.n_rows:
        raise ParameterError(f"{param} {name!r} has {strata.n_rows} "
                             f"row{'s' if strata.n_rows != 1 else ''}, the data {udf.n_rows}")
    if param == "groups" and getattr(udf, "stratify", None):
        raise ParameterError("a split is either stratified or grouped: give --stratify or "
                             "--groups, not both")
    return name


def _rows_of(udf, rng, start, stop):
    """The group codes of the rows ``[start, stop)`` of a grouped UDF."""
    if rng.keyed_rows(start, stop) is not None:
        raise ParameterError("grouped samples need rows in row-id ranges; rows known by a key "
                             "column cannot be grouped")
    return udf.grouping.codes(start, stop)


def _group_words(rng, repeat, n_groups):
    """One random word per group (lane 0 of stream (GROUP, repeat) at its code)."""
    return rng.at(stream(Purpose.GROUP, repeat), np.arange(n_groups, dtype=np.int64))[:, 0]


#: the part of the exact labellings of groups (udfs.exact): apart from any class's
GROUP_PART = (1 << 42) - 1


def check_cutoffs(udf, cutoffs):
    """The cutoff words of a keyed exact labelling (:mod:`udfs.ranks`), one
    ascending list per repeat with at most as many as the UDF's
    :meth:`rank_targets` ask for (a cutoff past every row is left out: a
    stratified split's class that goes wholly to one side); None: the rows
    are row ids (the labelling tree)."""
    if cutoffs is None:
        return None
    _, ranks = udf.rank_targets()
    try:
        if isinstance(cutoffs, str):        # the command-line word (udfs.ranks.format_lists)
            cutoffs = [[int(c) for c in per.split(":")] for per in cutoffs.split("/")]
        cutoffs = [[int(c) for c in per] for per in cutoffs]
    except (TypeError, ValueError):
        raise ParameterError(f"cutoffs must be lists of integers, got {cutoffs!r}") from None
    if len(cutoffs) != len(ranks) or any(len(c) > len(r) for c, r in zip(cutoffs, ranks)) or \
            any(not 0 <= c < 1 << 64 for per in cutoffs for c in per) or \
            any(per != sorted(per) for per in cutoffs):
        raise ParameterError(f"cutoffs must be {len(ranks)} ascending lists of at most "
                             f"{len(ranks[0])} words in [0, 2**64), got {cutoffs!r}")
    return cutoffs


def _memo(table, key, make):
    """``table[key]``, made by ``make()`` the first time."""
    value = table.get(key)
    if value is None:
        value = table[key] = make()
    return value


#: rows per piece when lane 1 is drawn alone (1 MiB of lane blocks)
_LANE_PIECE = 1 << 15


def _lane1(rng, stream_id, start, stop, out=None):
    """Lane 1 of the blocks of rows ``[start, stop)`` (the relative
    positions), into *out* if given: by cache-sized pieces, without the
    range's whole lane blocks (32 bytes a row)."""
    if out is None:
        out = np.empty(stop - start, np.uint64)
    for a in range(start, stop, _LANE_PIECE):
        b = min(stop, a + _LANE_PIECE)
        out[a - start:b - start] = rng.block(stream_id, a, b)[:, 1]
    return out


class HoldOut(SamplingUDF):
    """Hold-out pairs: ``repeats`` independent (train, test) splits.
    Sample ids: ``train-w`` = 2w, ``test-w`` = 2w + 1.

    Exact sizes (the default): ``round(fraction * m)`` rows kept,
    ``round(ratio * kept)`` of them in ``train-w``, the rest in ``test-w``,
    every such split equally likely (:mod:`udfs.exact`, labelling w); lane 1
    of stream (HOLDOUT, w) orders.  A split that leaves a side empty is
    refused.

    With ``exact=False``, the paper's coins: for repeat w a row is in
    ``train-w`` with probability ``fraction * ratio`` and in ``test-w`` with
    probability ``fraction * (1 - ratio)``; otherwise (``fraction < 1``) in
    neither.  Randomness: stream (HOLDOUT, w), lane 0 decides, lane 1 orders.

    With ``stratify`` (the label's name; *strata* its classes) the sizes are
    exact and shared out over the classes in proportion: each class's
    training rows within one of ``train * n_c / m``
    (:func:`udfs.strata.proportional`), its test rows the same share of
    the rest; each class is labelled by its own tree (part c).
    """

    name = "holdout"

    def __init__(self, n_rows, ratio, repeats=1, fraction=1.0, exact=True, stratify=None,
                 strata=None, groups=None, grouping=None, cutoffs=None):
        super().__init__(n_rows)
        self.ratio = check_fraction("ratio", ratio)
        self.repeats = check_int("repeats", repeats, lo=1, hi=1 << 20)
        self.fraction = check_fraction("fraction", fraction)
        self.stratify = check_side(self, "stratify", stratify, strata)
        self.strata = strata if self.stratify else None
        self.groups = check_side(self, "groups", groups, grouping)
        self.grouping = grouping if self.groups else None
        self.exact = check_bool("exact", exact) or self.stratify is not None
        if self.stratify and not exact:
            raise _per_row_stratified("exact")
        units = self.grouping.counts.size if self.groups else self.n_rows
        self.counts = (holdout_counts(units, self.ratio, self.fraction,
                                      "group" if self.groups else "row")
                       if self.exact else None)
        self.cutoffs = check_cutoffs(self, cutoffs) if self.exact else None
        if cutoffs is not None and (not self.exact or self.stratify or self.groups):
            raise ParameterError("cutoffs are the exact sizes of keyed rows: only with exact "
                                 "sizes, neither stratified nor grouped")
        self.class_counts = None
        if self.stratify:
            self.class_counts = holdout_allocation(self.counts, strata.counts)
        self._labellings = {}

    def sample_names(self):
        return [name for w in range(self.repeats) for name in (f"train-{w}", f"test-{w}")]

    def expected_rows(self, sample_id):
        if self.exact and self.groups:      # counts of groups: their share of the rows
            return self.n_rows * self.counts[sample_id % 2] / sum(self.counts)
        if self.exact:
            return float(self.counts[sample_id % 2])
        share = self.ratio if sample_id % 2 == 0 else 1.0 - self.ratio
        return self.n_rows * self.fraction * share

    def params(self):
        return {"ratio": self.ratio, "repeats": self.repeats, "fraction": self.fraction,
                "exact": self.exact, **_stratify_param(self), **_cutoffs_param(self)}

    def rank_targets(self):
        """``(streams, ranks)`` of exact sizes for keyed rows
        (:mod:`udfs.ranks`): repeat w cuts the words of stream (HOLDOUT, w)
        at the training rows' count and, with ``fraction < 1``, at the kept
        rows' count."""
        train, test = self.counts[0], self.counts[1]
        ranks = [train] + ([train + test] if len(self.counts) > 2 else [])
        return [stream(Purpose.HOLDOUT, w) for w in range(self.repeats)], [ranks] * self.repeats

    def occurrences(self, start, stop, rng):
        if self.groups:         # each row takes its group's side
            codes = _rows_of(self, rng, start, stop)
            return self._sided(start, stop, rng, lambda w, _: self.group_sides(rng, w)[codes],
                               lanes_needed=False)
        if self.cutoffs:        # keyed rows: train below the first cutoff word, test below the next
            return self._sided(start, stop, rng, lambda w, lanes: np.searchsorted(
                np.array(self.cutoffs[w], np.uint64), lanes[:, 0], side="right"))
        if self.exact:
            return self._sided(start, stop, rng,
                               lambda w, _: self._labelling(rng, w).labels_for(rng, start, stop),
                               lanes_needed=False)
        n, reps = stop - start, self.repeats
        train_below = unit_threshold(self.fraction * self.ratio)
        keep_below = unit_threshold(self.fraction)
        offset = np.tile(np.arange(n, dtype=np.int64), reps)
        sample = np.empty(n * reps, np.int64)
        relpos = np.empty(n * reps, np.uint64)
        for w in range(reps):
            lanes = rng.block(stream(Purpose.HOLDOUT, w), start, stop)
            top = lanes[:, 0] >> np.uint64(11)
            out = slice(w * n, (w + 1) * n)
            np.add(2 * w, top >= train_below, out=sample[out], casting="unsafe")
            relpos[out] = lanes[:, 1]
            if self.fraction < 1.0:
                sample[out][top >= keep_below] = -1
        if self.fraction < 1.0:
            keep = sample >= 0
            return Occurrences(offset[keep], sample[keep], relpos[keep])
        return Occurrences(offset, sample, relpos)

    def _sided(self, start, stop, rng, side_of, lanes_needed=True):
        """The occurrences of rows ``[start, stop)`` when ``side_of(w, lanes)``
        gives every row's side in repeat w (0 train, 1 test, 2 neither;
        *lanes*: the range's blocks of stream (HOLDOUT, w), whose lane 1
        orders the rows; None unless *lanes_needed*: lane 1 is then drawn
        by cache-sized pieces, without the range's whole blocks)."""
        n = stop - start
        offset = np.empty(n * self.repeats, np.int64)
        sample = np.empty(n * self.repeats, np.int64)
        relpos = np.empty(n * self.repeats, np.uint64)
        filled = 0          # the repeats' occurrences written in place, not concatenated
        for w in range(self.repeats):
            sid = stream(Purpose.HOLDOUT, w)
            lanes = rng.block(sid, start, stop) if lanes_needed else None
            label = side_of(w, lanes)
            if n and int(label.max()) < 2:      # every row on a side
                part = slice(filled, filled + n)
                offset[part] = np.arange(n, dtype=np.int64)
                np.add(label, 2 * w, out=sample[part])
                if lanes is not None:
                    relpos[part] = lanes[:, 1]
                else:
                    _lane1(rng, sid, start, stop, out=relpos[part])
                filled += n
                continue
            if lanes is None:
                lanes = rng.block(sid, start, stop)
            keep = np.flatnonzero(label < 2)
            part = slice(filled, filled + keep.size)
            offset[part] = keep
            np.add(label[keep], 2 * w, out=sample[part])
            relpos[part] = lanes[keep, 1]
            filled += keep.size
        if 2 * filled < offset.size:            # mostly neither side: no idle memory
            return Occurrences(offset[:filled].copy(), sample[:filled].copy(),
                               relpos[:filled].copy())
        return Occurrences(offset[:filled], sample[:filled], relpos[:filled])

    def _labelling(self, rng, w):
        """Repeat w's exact labelling (of the classes' rows when stratified)."""
        counts = self.counts if self.class_counts is None else self.class_counts
        return _memo(self._labellings, (rng.seed, w), lambda: Labelling(
            rng, self.n_rows, counts, w, self.strata))

    def group_sides(self, rng, w):
        """Side of every group in repeat w: 0 train, 1 test, 2 neither."""
        def make():
            n_groups = self.grouping.counts.size
            if self.exact:
                return LabelTree(rng, n_groups, self.counts, w, part=GROUP_PART).labels(
                    0, n_groups)
            top = _group_words(rng, w, n_groups) >> np.uint64(11)
            side = (top >= unit_threshold(self.fraction * self.ratio)).astype(np.int64)
            side[top >= unit_threshold(self.fraction)] = 2
            return side
        return _memo(self._labellings, (rng.seed, "groups", w), make)



def _cutoffs_param(udf):
    """The ``cutoffs`` entry of a UDF's parameters, as one word (it travels
    on TRANSFORM command lines too); none without cutoffs."""
    return {"cutoffs": format_lists(udf.cutoffs)} if udf.cutoffs else {}


def _per_row_stratified(param):
    """The refusal of the paper's coins per row (``--per-row``, *param* False)
    for a stratified split, whose sizes are exact by construction."""
    return ParameterError(f"a stratified split has exact sizes: --per-row ({param}=False) does "
                          "not apply to it; drop --per-row, or --stratify")


def _stratify_param(udf):
    """The ``stratify`` and ``groups`` entries of a UDF's parameters (none
    when unstratified and ungrouped)."""
    return {name: getattr(udf, name) for name in ("stratify", "groups")
            if getattr(udf, name, None)}


def unit_threshold(p):
    """Integer t with ``to_unit(word) < p  <=>  (word >> 11) < t``."""
    return np.uint64(min(math.ceil(p * 2.0 ** 53), 1 << 53))


class KFold(SamplingUDF):
    """k-fold cross-validation, ``repeats`` times (repeated k-fold).

    Balanced folds (the default): the fold sizes differ by at most one (the
    first ``m % k`` folds one row larger, as scikit-learn's), every such
    partition equally likely (:mod:`udfs.exact`, labelling r for repeat r).
    With ``balanced=False``, the paper's folds: every row goes to fold
    ``floor(u * k)`` for a uniform u from stream (FOLD, r), lane 0.  Either
    way lane 1 of that stream is the row's relative position.

    Rounds are numbered ``j = r * k + f`` (fold f of repeat r), in the order
    scikit-learn's RepeatedKFold yields them.  In fold mode (the default)
    the UDF emits each row once per repeat, into ``test-j`` (sample id j),
    and the engine composes each ``train-j`` from the other folds of its
    repeat (dynamic sample matrix composition; :meth:`fold_group` is k).
    With ``naive=True`` it emits the row into ``test-j`` (id 2j + 1) and into
    every other round's ``train-j'`` of the repeat (id 2j'): the same rows
    per round as fold mode, materialized k times.

    With ``stratify`` (the label's name; *strata* its classes) the folds are
    balanced and every class within one row of ``n_c / k`` in each fold
    (:func:`udfs.strata.round_robin`); a class with fewer than k rows is
    refused.  With ``groups`` (*grouping* the rows' groups) every group's
    rows share a fold (:meth:`group_folds`).
    """

    name = "kfold"

    def __init__(self, n_rows, k, naive=False, balanced=True, stratify=None, strata=None,
                 groups=None, grouping=None, repeats=1, cutoffs=None):
        super().__init__(n_rows)
        self.k = check_int("k", k, lo=2)
        if self.k > self.n_rows:
            raise ParameterError(f"k must be <= the number of rows ({self.n_rows}), got {self.k}")
        self.repeats = check_int("repeats", repeats, lo=1, hi=1 << 16)
        self.naive = check_bool("naive", naive)
        self.stratify = check_side(self, "stratify", stratify, strata)
        self.strata = strata if self.stratify else None
        self.groups = check_side(self, "groups", groups, grouping)
        self.grouping = grouping if self.groups else None
        self.balanced = check_bool("balanced", balanced) or self.stratify is not None
        if self.stratify and not balanced:
            raise _per_row_stratified("balanced")
        self.composes_folds = not self.naive
        if self.groups:
            if grouping.counts.size < self.k:
                raise ParameterError(f"{self.k} folds of whole groups need at least {self.k} "
                                     f"groups, got {grouping.counts.size}")
        elif self.stratify:
            strata.check_at_least(self.k, f"a stratified {self.k}-fold split")
            self.counts = round_robin(strata.counts, self.k)
        elif self.balanced:
            self.counts = balanced_sizes(self.n_rows, self.k)
        self.cutoffs = None
        if cutoffs is not None:
            if not self.balanced or self.stratify or self.groups:
                raise ParameterError("cutoffs are the balanced folds of keyed rows: only with "
                                     "balanced folds, neither stratified nor grouped")
            self.cutoffs = check_cutoffs(self, cutoffs)
        self._labellings = {}

    def sample_names(self):
        rounds = range(self.k * self.repeats)
        if self.naive:
            return [name for j in rounds for name in (f"train-{j}", f"test-{j}")]
        return [f"test-{j}" for j in rounds]

    def composed_names(self):
        """Training sets composed from the folds (fold mode only)."""
        return [f"train-{j}" for j in range(self.k * self.repeats)] if self.composes_folds else []

    def fold_group(self):
        """Folds per repeat: a composed training set takes the other folds
        of its own repeat only."""
        return self.k

    def expected_rows(self, sample_id):
        if self.naive and sample_id % 2 == 0:
            return self.n_rows * (self.k - 1) / self.k
        return self.n_rows / self.k

    def params(self):
        return {"k": self.k, "naive": self.naive, "balanced": self.balanced,
                **({"repeats": self.repeats} if self.repeats > 1 else {}),
                **_stratify_param(self), **_cutoffs_param(self)}

    def rank_targets(self):
        """``(streams, ranks)`` of balanced folds for keyed rows
        (:mod:`udfs.ranks`): repeat r cuts the words of stream (FOLD, r) at
        the folds' cumulative sizes."""
        ranks = np.cumsum(balanced_sizes(self.n_rows, self.k))[:-1].tolist()
        return [stream(Purpose.FOLD, r) for r in range(self.repeats)], [ranks] * self.repeats

    def group_folds(self, rng, r=0):
        """Fold of every group in repeat r: balanced, the groups in a random
        order each to the lightest fold (:func:`udfs.strata.greedy_folds`);
        else a uniform fold per group."""
        def make():
            counts = self.grouping.counts
            words = _group_words(rng, r, counts.size)
            if self.balanced:
                return greedy_folds(counts, self.k, word_order(words))
            return np.minimum((to_unit(words) * self.k).astype(np.int64), self.k - 1)
        return _memo(self._labellings, (rng.seed, "groups", r), make)

    def folds(self, start, stop, rng, r):
        """Fold (0..k-1) and relative position of rows ``[start, stop)`` in
        repeat r."""
        lanes = None
        if self.cutoffs:
            lanes = rng.block(stream(Purpose.FOLD, r), start, stop)
            fold = np.searchsorted(np.array(self.cutoffs[r], np.uint64), lanes[:, 0],
                                   side="right")
        elif self.groups:
            codes = _rows_of(self, rng, start, stop)     # refuses keyed rows first
            fold = self.group_folds(rng, r)[codes]
        elif self.balanced:
            labelling = _memo(self._labellings, (rng.seed, r), lambda: Labelling(
                rng, self.n_rows, self.counts, r, self.strata))
            fold = labelling.labels_for(rng, start, stop)
        else:
            lanes = rng.block(stream(Purpose.FOLD, r), start, stop)
            fold = np.minimum((to_unit(lanes[:, 0]) * self.k).astype(np.int64), self.k - 1)
        if lanes is None:
            return fold, _lane1(rng, stream(Purpose.FOLD, r), start, stop)
        return fold, lanes[:, 1].copy()

    def occurrences(self, start, stop, rng):
        n, k = stop - start, self.k
        parts = []
        for r in range(self.repeats):
            fold, relpos = self.folds(start, stop, rng, r)
            first = r * k
            if not self.naive:
                parts.append(Occurrences(np.arange(n, dtype=np.int64), first + fold, relpos))
                continue
            offset = np.repeat(np.arange(n, dtype=np.int64), k)
            round_ = np.tile(np.arange(k, dtype=np.int64), n)
            sample = np.where(round_ == np.repeat(fold, k), 2 * (first + round_) + 1,
                              2 * (first + round_))
            parts.append(Occurrences(offset, sample, np.repeat(relpos, k)))
        return parts[0] if len(parts) == 1 else concat_occurrences(parts)


class Bootstrap(SamplingUDF):
    """Bootstrap samples: ``samples`` draws of exactly ``size`` rows each,
    with replacement, via the distributed multinomial (Algorithm 7).

    Sample ids: ``sample-i`` = i.  Every occurrence of a row gets its own
    relative position, so repeated rows are spread through the sample.
    With ``oob=True`` each bag's out-of-bag rows (drawn 0 times) follow as
    ``oob-i`` = samples + i, each once, ordered by lane 0 of stream
    (BOOTSTRAP_OOB, i).

    With ``stratify`` (the label's name; *strata* its classes) each bag
    holds every class in proportion: class c's share of ``size`` (within
    one of ``size * n_c / m``, :func:`udfs.strata.proportional`) drawn with
    replacement from the class's rows by their own tree (part c).
    """

    name = "bootstrap"

    def __init__(self, n_rows, samples, size=None, oob=False, stratify=None, strata=None):
        super().__init__(n_rows)
        self.samples = check_int("samples", samples, lo=1, hi=1 << 20)
        self.size = self.n_rows if size is None else check_int("size", size, lo=1, hi=1 << 62)
        self.oob = check_bool("oob", oob)
        self.stratify = check_side(self, "stratify", stratify, strata)
        self.strata = strata if self.stratify else None
        self.class_sizes = proportional(self.size, strata.counts) if self.stratify else None
        self._trees = {}

    def sample_names(self):
        bags = [f"sample-{i}" for i in range(self.samples)]
        return bags + ([f"oob-{i}" for i in range(self.samples)] if self.oob else [])

    def expected_rows(self, sample_id):
        if sample_id < self.samples:
            return float(self.size)
        return self.n_rows * (1.0 - 1.0 / self.n_rows) ** self.size

    def params(self):
        return {"samples": self.samples, "size": self.size, "oob": self.oob,
                **_stratify_param(self)}

    def tree(self, rng, i, c=None):
        """Bag i's tree over all rows, or (stratified) class c's."""
        if c is None:
            return _memo(self._trees, (rng.seed, i), lambda: MultinomialTree(
                rng, self.n_rows, self.size, i))
        return _memo(self._trees, (rng.seed, i, c), lambda: MultinomialTree(
            rng, int(self.strata.counts[c]), int(self.class_sizes[c]), i, part=c))

    def _drawn(self, rng, i, start, stop):
        """Offsets (from *start*) and relative positions of bag i's
        occurrences of rows ``[start, stop)``."""
        if self.strata is None:
            rows, relpos = self.tree(rng, i).occurrences(start, stop)
            return rows - start, relpos
        where, order = [], []
        for c, offsets, rank in self.strata.ranges(start, stop):
            ranks, relpos = self.tree(rng, i, c).occurrences(rank, rank + offsets.size)
            where.append(offsets[ranks - rank])
            order.append(relpos)
        if not where:
            return np.empty(0, np.int64), np.empty(0, np.uint64)
        return np.concatenate(where), np.concatenate(order)

    def _out_of_bag(self, i, where, lanes):
        """Occurrences of bag i's out-of-bag rows: offsets *where*, ordered
        by lane 0 of their *lanes* of stream (BOOTSTRAP_OOB, i)."""
        return Occurrences(where, np.full(where.size, self.samples + i, np.int64), lanes[:, 0])

    def occurrences_at(self, positions, rng):
        """Occurrences of rows *positions* (ids in ``[0, n_rows)``, any
        order): the same draws of the same trees as :meth:`occurrences`."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.n_rows):
            raise ParameterError(f"bootstrap row ids must lie in [0, {self.n_rows})")
        if self.ranged():
            return occurrences_of_ids(self, positions, rng)
        parts = []
        for i in range(self.samples):
            where, relpos = self.tree(rng, i).occurrences_at(positions)
            parts.append(Occurrences(where, np.full(where.size, i, np.int64), relpos))
            if self.oob:
                out = _missing(positions.size, where)
                parts.append(self._out_of_bag(i, out, rng.at(stream(Purpose.BOOTSTRAP_OOB, i),
                                                             positions[out])))
        return concat_occurrences(parts)

    def occurrences(self, start, stop, rng):
        parts = []
        for i in range(self.samples):
            where, relpos = self._drawn(rng, i, start, stop)
            parts.append(Occurrences(where, np.full(where.size, i, np.int64), relpos))
            if self.oob:
                out = _missing(stop - start, where)
                lanes = rng.block(stream(Purpose.BOOTSTRAP_OOB, i), start, stop)
                parts.append(self._out_of_bag(i, out, lanes[out]))
        return concat_occurrences(parts)


def _missing(n, drawn):
    """The offsets in ``[0, n)`` not among *drawn*."""
    missing = np.ones(n, bool)
    missing[drawn] = False
    return np.flatnonzero(missing)


class TimeSeries(SamplingUDF):
    """Expanding-window folds over the row order (row ids as time), as
    scikit-learn's ``TimeSeriesSplit``: k test slices of ``test_size`` rows
    (default ``m // (k + 1)``) ending at the last row; round i trains on
    the rows before its test slice, less a ``gap`` of rows between them, at
    most the last ``max_train_size`` rows (0: all).  Sample ids:
    ``train-i`` = 2i, ``test-i`` = 2i + 1; rows keep their order (the
    relative position is the row id).  Deterministic: no randomness.
    """

    name = "timeseries"

    def __init__(self, n_rows, k, gap=0, test_size=0, max_train_size=0):
        super().__init__(n_rows)
        self.k = check_int("k", k, lo=2)
        self.gap = check_int("gap", gap, lo=0)
        self.max_train_size = check_int("max_train_size", max_train_size, lo=0)
        if self.k + 1 > self.n_rows:
            raise ParameterError(f"k + 1 = {self.k + 1} time-series folds need as many rows, "
                                 f"got {self.n_rows}")
        self.test_size = check_int("test_size", test_size, lo=0) or self.n_rows // (self.k + 1)
        if self.n_rows - self.gap - self.test_size * self.k <= 0:
            raise ParameterError(f"{self.k} test slices of {self.test_size} "
                                 f"row{'s' if self.test_size != 1 else ''} after a gap of "
                                 f"{self.gap} need more than the {self.n_rows} rows")
        #: round i: training rows [train_lo[i], train_hi[i]), test rows from test_lo[i]
        self.test_lo = np.arange(self.n_rows - self.k * self.test_size, self.n_rows,
                                 self.test_size, dtype=np.int64)[:self.k]
        self.train_hi = self.test_lo - self.gap
        self.train_lo = (np.maximum(self.train_hi - self.max_train_size, 0)
                         if self.max_train_size else np.zeros(self.k, np.int64))

    def sample_names(self):
        return [name for i in range(self.k) for name in (f"train-{i}", f"test-{i}")]

    def rounds(self):
        """``[((train start, stop), (test start, stop)), ...]``: each round's
        row ranges (its samples are these rows, in row order)."""
        return [((int(self.train_lo[i]), int(self.train_hi[i])),
                 (int(self.test_lo[i]), int(self.test_lo[i] + self.test_size)))
                for i in range(self.k)]

    def expected_rows(self, sample_id):
        i = sample_id // 2
        return float(self.test_size if sample_id % 2 else self.train_hi[i] - self.train_lo[i])

    def params(self):
        return {"k": self.k, "gap": self.gap, "test_size": self.test_size,
                "max_train_size": self.max_train_size}

    def occurrences(self, start, stop, rng):
        # through a keyed view the rows are the keys it stands for (row ids as time)
        rows = rng.keyed_rows(start, stop)
        if rows is None:
            rows = np.arange(start, stop, dtype=np.int64)
        parts = []
        for i, (train, test) in enumerate(self.rounds()):
            for sid, (lo, hi) in ((2 * i, train), (2 * i + 1, test)):
                inside = np.flatnonzero((rows >= lo) & (rows < hi))
                parts.append(Occurrences(inside, np.full(inside.size, sid, np.int64),
                                         rows[inside].astype(np.uint64)))
        return concat_occurrences(parts)
