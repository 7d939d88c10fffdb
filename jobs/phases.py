"""The three phases of single-pass sample generation, engine-agnostic.

1. **local-sampling** (map): for one input block, ask the sampling-UDF which
   rows occur in which samples, and emit the selected row partitions.
2. **block-preparation** (shuffle): group by ``(sample, v_index)``, order by
   ``(relative position, row id)``.
3. **streaming-re-block** (reduce): fill one buffer block at a time in that
   order; emit full blocks, then the last partial one.

In k-fold's fold mode a composition step follows: every fold's partial bottom
block goes to the training set of every other round, whose *extra matrix* it
becomes (:func:`partners`, :func:`write_sample`, :func:`write_extra`; the
Python API computes the same order with :func:`composed_ids`).

Engines (mrjob, PySpark, Hive TRANSFORM scripts) only move records between
these functions.

Rows travel as *chunks*, not one record per row: a chunk holds the rows of one
input block that go to one ``(sample, v_index)`` and whose relative positions
fall into one *bin* (a fixed range of the 64-bit relative-position space),
already sorted by ``(relative position, row id)``.  The shuffle sorts records
by ``(sample, v_index, bin, h_index)``; the reducer merges the chunks of one
bin (a bounded amount of data) and streams them into the buffer block.  Which
row lands where depends only on the ``(relative position, row id)`` order,
never on the bins, the chunking, the number of tasks or the engine, so every
engine produces byte-identical sample matrices.

Bins are sized so one bin of one sample's column of blocks holds about
``bin_budget`` bytes (default 16 MiB): that bounds a reducer's memory, and
only changes how many records the shuffle moves.
"""
from collections import Counter

import numpy as np

from samplegen.udfs.errors import EngineError
from samplegen.udfs.rng import PositionRNG, word_order

from .blocks import DENSE, EncodedBlock
from .store import block_list, write_group


# ---------------------------------------------------------------------------
# Phase 1: local-sampling
# ---------------------------------------------------------------------------
def local_sampling(plan, h, v, block, sampler=None):
    """Yield ``(sample, v, bin, h, chunk)`` for one input block ``(h, v)``.

    *block* is a :class:`~jobs.blocks.EncodedBlock` (or a decoded Block);
    each chunk is a block of the same class with ``row_ids`` and ``relpos``,
    sorted by ``(relpos, row id)``.  *sampler* answers for the UDF (default
    ``plan.sampler()``): anything called like it that gives the same
    occurrences, e.g. Hive's map script's ``RangeCache``.
    """
    start = h * plan.block_size
    sampler = plan.sampler() if sampler is None else sampler
    occ = sampler(start, start + block.rows, plan.rng())
    if occ.offset.size == 0:
        return
    row_id = occ.offset + start
    bits = plan.bits_of(occ.sample)
    shift = (64 - bits).astype(np.uint64)
    bins = np.where(bits > 0, occ.relpos >> np.minimum(shift, 63), 0).astype(np.int64)
    order = _sample_order(occ)
    sample, bins = occ.sample[order], bins[order]
    edges = np.flatnonzero((np.diff(sample) != 0) | (np.diff(bins) != 0)) + 1
    bounds = np.concatenate([[0], edges, [order.size]])
    for a, b in zip(bounds[:-1], bounds[1:]):
        idx = order[a:b]
        chunk = block.take(occ.offset[idx], row_ids=row_id[idx], relpos=occ.relpos[idx])
        yield int(sample[a]), v, int(bins[a]), h, chunk


def _sample_order(occ):
    """The order of *occ* by ``(sample, relpos, row id)``, which is also the
    order by bin (a bin is a prefix of ``relpos``).  Built-in UDFs give each
    sample's occurrences by row: then a stable sort by sample (radix, on
    small ids) and a sort of each sample's ``relpos`` make the order
    (smaller sorts of one key, :func:`udfs.rng.word_order`); anything else
    takes a sort on all three keys."""
    sample, offset, relpos = occ.sample, occ.offset, occ.relpos
    step = np.diff(sample)
    first = None
    if (step < 0).any():
        first = np.argsort(sample.astype(np.uint16) if sample.max() <= 0xFFFF else sample,
                           kind="stable")
        sample, offset, relpos = sample[first], offset[first], relpos[first]
        step = np.diff(sample)
    if not ((step != 0) | (np.diff(offset) >= 0)).all():
        return np.lexsort((occ.offset, occ.relpos, occ.sample))
    bounds = np.concatenate([[0], np.flatnonzero(step) + 1, [sample.size]]).tolist()
    order = np.concatenate([a + word_order(relpos[a:b], offset[a:b])
                            for a, b in zip(bounds[:-1], bounds[1:])])
    return order if first is None else first[order]


def new_map_report():
    """What one map task did, for :func:`check_coverage`: the input blocks it
    sampled and the rows it sent to each ``(sample, v)``."""
    return {"blocks": [], "rows": {}}


def counted(report, h, v, records):
    """Pass :func:`local_sampling`'s records of block ``(h, v)`` through,
    counting them into *report*."""
    rows = report["rows"]
    for record in records:
        key = "%d.%d" % (record[0], record[1])
        rows[key] = rows.get(key, 0) + record[4].rows
        yield record
    report["blocks"].append([h, v])


def check_coverage(plan, reports, summaries):
    """Raise EngineError unless the tasks did all the work: every input block
    sampled exactly once (by the map reports), every ``(sample, v)`` written
    once with exactly the rows the map tasks sent it, and every composed
    training set's extra matrix holding exactly the other folds' partial
    bottom blocks.  A task that ends early with exit status 0 (a UDF calling
    ``sys.exit``) is caught here, not by the engine."""
    hint = "a task ended early without reporting an error (does the UDF exit or kill its process?)"
    done = Counter((h, v) for report in reports for h, v in report["blocks"])
    for h, v, _, _ in block_list(plan.rows, plan.cols, plan.block_size):
        if done[(h, v)] != 1:
            what = "was not sampled" if not done[(h, v)] else f"was sampled {done[(h, v)]} times"
            raise EngineError(f"input block ({h}, {v}) {what}: {hint}; nothing was written")
    sent = Counter()
    for report in reports:
        for key, n in report["rows"].items():
            sample, v = map(int, key.split("."))
            sent[(plan.sample_name(sample), v)] += n
    written = Counter()
    for summary in summaries:
        key = (summary["sample"], summary["v"])
        if key in written:
            raise EngineError(f"column of blocks {key[1]} of sample {key[0]} was written twice "
                              "(a task ran twice); nothing was committed")
        written[key] = sum(block[1] for block in summary["blocks"])
    B = plan.block_size
    for round_, name in enumerate(plan.composed):
        for v in range(plan.n_vblocks()):
            sent[(name, v)] = sum(written[(plan.names[f], v)] % B
                                  for f in partners(len(plan.names), round_, plan.fold_group))
    for key in set(sent) | set(written):
        if sent[key] != written[key]:
            raise EngineError(f"sample {key[0]} (column of blocks {key[1]}) has {written[key]} "
                              f"rows written where the map tasks sent {sent[key]}: {hint}; "
                              "nothing was committed")


# ---------------------------------------------------------------------------
# Phase 2: block-preparation keys (the shuffle itself is the engine's)
# ---------------------------------------------------------------------------
def group_key(sample, v):
    """Partition / grouping key: fixed-width hex, so byte order = numeric order."""
    return b"%08x.%08x" % (sample, v)


def sort_key(bin_, h):
    """Secondary sort key inside a group."""
    return b"%06x.%016x" % (bin_, h)


def parse_group_key(key):
    sample, v = key.split(b".")
    return int(sample, 16), int(v, 16)


def parse_sort_key(key):
    bin_, h = key.split(b".")
    return int(bin_, 16), int(h, 16)


def merge_order(chunks):
    """``(concatenated chunks, permutation into (relpos, row id) order)``;
    the permutation is None when there is nothing to reorder."""
    merged = type(chunks[0]).concat(chunks)
    if len(chunks) == 1:
        return merged, None
    return merged, relpos_order(merged.relpos, merged.row_ids)


def relpos_order(relpos, row_ids):
    """The permutation into ``(relative position, row id)`` order: one sort
    of the random relative positions, row ids only on a tie
    (:func:`udfs.rng.word_order`); past :data:`PACKED_ROWS` rows, one sort
    of packed keys (:func:`_packed_order`), the same permutation."""
    if relpos.size >= PACKED_ROWS:
        packed = _packed_order(relpos, row_ids)
        if packed is not None:
            return packed[0]
    return word_order(relpos, row_ids)


#: rows from which :func:`relpos_order` sorts packed keys (a sort of
#: values is about 3x faster than an argsort; below this the calls dominate)
PACKED_ROWS = 1 << 12
#: fewest bits of the relative position a packed key keeps (fewer: ties
#: common enough that the two-key sort is cheaper)
_PACKED_MIN_BITS = 24
_PACK_CHUNK = 1 << 16


def _packed_order(relpos, row_ids, sample=None, n_samples=1):
    """``(order, bounds)``: the permutation into ``(sample, relative
    position, row id)`` order and where each sample starts in it, by one
    sort of uint64 keys ``sample | top bits of relpos | index`` (the index
    in the low bits makes the keys distinct, so a sort of values is the
    argsort).  Keys whose sample and kept bits tie are put in ``(relpos,
    row id)`` order afterwards (rare: about m^2 / 2^(bits + 1) pairs), so
    the permutation is exactly the lexicographic one, equal pairs in index
    order.  None when the keys would keep too few bits of relpos, or a
    sample id lies outside ``[0, n_samples)``."""
    m = relpos.size
    index_bits = max(1, (m - 1).bit_length())
    sample_bits = (n_samples - 1).bit_length() if sample is not None else 0
    kept = 64 - index_bits - sample_bits
    if kept < _PACKED_MIN_BITS or relpos.dtype != np.uint64:
        return None
    if sample is not None and (sample.dtype.kind not in "iu" or m and (
            int(sample.min()) < 0 or int(sample.max()) >= n_samples)):
        return None
    key = np.empty(m, dtype=np.uint64)
    shift, index_shift = np.uint64(64 - kept), np.uint64(index_bits)
    sample_shift = np.uint64(64 - sample_bits) if sample_bits else None
    for lo in range(0, m, _PACK_CHUNK):     # cache-sized passes: no array of m temporaries
        hi = min(m, lo + _PACK_CHUNK)
        part = key[lo:hi]
        np.right_shift(relpos[lo:hi], shift, out=part)
        part <<= index_shift
        if sample_bits:
            part |= sample[lo:hi].astype(np.uint64) << sample_shift
        part |= np.arange(lo, hi, dtype=np.uint64)
    key.sort()
    if sample_bits:
        starts = np.arange(n_samples, dtype=np.uint64) << sample_shift
        bounds = np.append(np.searchsorted(key, starts), m)
    else:
        bounds = np.array([0, m])
    tied = np.zeros(max(m - 1, 0), dtype=bool)
    for lo in range(0, m - 1, _PACK_CHUNK):
        hi = min(m - 1, lo + _PACK_CHUNK)
        high = key[lo:hi + 1] >> index_shift
        np.equal(high[1:], high[:-1], out=tied[lo:hi])
    key &= np.uint64((1 << index_bits) - 1)
    order = key.view(np.int64)
    if tied.any():
        pairs = np.flatnonzero(tied)
        member = np.zeros(m, dtype=bool)
        member[pairs] = True
        member[pairs + 1] = True
        at = np.flatnonzero(member)
        new_run = np.ones(at.size, dtype=bool)
        new_run[1:] = ~tied[at[:-1]]
        run = np.cumsum(new_run)
        idx = order[at]
        order[at] = idx[np.lexsort((row_ids[idx], relpos[idx], run))]
    return order, bounds


# ---------------------------------------------------------------------------
# Phase 3: streaming-re-block
# ---------------------------------------------------------------------------
class ReBlocker:
    """Fills one buffer block at a time from rows arriving in final order.

    ``add(block, order)`` feeds the rows of *block* in the order of the
    permutation *order* (None: as they are); a full buffer is gathered from
    its sources in one copy.
    """

    def __init__(self, block_size, first_h=0):
        self.block_size = block_size
        self.h = first_h
        self._pieces = []    # (block, index array or slice)
        self._count = 0

    def add(self, block, order=None):
        """Feed rows; yield ``(h, block)`` for every buffer that fills up."""
        a = 0
        while a < block.rows:
            take = min(self.block_size - self._count, block.rows - a)
            self._pieces.append((block, slice(a, a + take) if order is None
                                 else order[a:a + take]))
            self._count += take
            a += take
            if self._count == self.block_size:
                yield self._emit()

    def finish(self):
        """Yield the last, partial block if any."""
        if self._count:
            yield self._emit()

    def _emit(self):
        parts = []
        for block, rows in self._pieces:
            if isinstance(rows, slice):
                parts.append(block.row_slice(rows.start, rows.stop))
            else:
                parts.append(block.take(rows, row_ids=block.row_ids[rows],
                                        relpos=block.relpos[rows]))
        out = (self.h, type(parts[0]).concat(parts))
        self.h += 1
        self._pieces, self._count = [], 0
        return out


def reblock(block_size, binned_chunks):
    """Streaming re-block of one group.

    *binned_chunks* yields ``(bin, chunk)`` in bin order; the chunks of a bin
    are merged in memory (one bin at a time) and streamed into the buffer.
    Yields ``(h, block)``; blocks keep ``row_ids`` and ``relpos``.
    """
    buffer = ReBlocker(block_size)
    current, pending = None, []
    for bin_, chunk in binned_chunks:
        if bin_ != current and pending:
            yield from buffer.add(*merge_order(pending))
            pending = []
        current = bin_
        pending.append(chunk)
    if pending:
        yield from buffer.add(*merge_order(pending))
    yield from buffer.finish()


def write_sample(plan, sample, v, blocks):
    """The end of streaming-re-block for group ``(sample, v)``: write its
    ``(h, block)`` (:func:`jobs.store.write_group`).  Returns the group's
    summary and, in fold mode, its partial bottom block (a list of at most
    one block), which goes on to the composition of every other round's
    training set (:func:`partners`)."""
    tail = []
    if plan.composed:
        blocks = keep_tail(blocks, plan.block_size, tail)
    return write_group(plan.output, plan.sample_name(sample), v, blocks), tail


def keep_tail(blocks, block_size, tail):
    """Pass ``(h, block)`` through, appending the partial bottom block (if
    any) to the list *tail*: in fold mode that block, with its relative
    positions, goes on to the composition of the other rounds' training sets."""
    for h, block in blocks:
        if block.rows < block_size:
            tail.append(block)
        yield h, block


# ---------------------------------------------------------------------------
# Dynamic sample matrix composition (k-fold, fold mode)
# ---------------------------------------------------------------------------
# Training set ``plan.composed[r]`` is the full blocks of every other fold
# ``plan.names[f]`` (read in place: a composed view), in fold order, then its
# own *extra matrix*: those folds' partial bottom blocks (step 1 keeps them,
# :func:`write_sample`), merged in ``(relative position, row id)`` order and
# re-blocked.  Engines route each partial block to the rounds of
# :func:`partners` and hand a round's blocks to :func:`write_extra`.
def partners(n, i, group=0):
    """Every index but *i* of *i*'s set of folds -- ``range(n)`` cut into
    sets of *group* consecutive indices (0: one set; repeated k-fold: k) --
    in order: fold f goes into training set r exactly when f != r and both
    are in one set, so ``partners(len(plan.composed), fold,
    plan.fold_group)`` are the rounds that take the fold's partial bottom
    block and ``partners(len(plan.names), round_, plan.fold_group)`` the
    folds the round's training set is composed of."""
    if not group:
        return [j for j in range(n) if j != i]
    first = i - i % group
    return [j for j in range(first, min(n, first + group)) if j != i]


def compose_extra(block_size, tails):
    """One column of a training set's extra matrix: the partial bottom
    blocks routed to it (*tails*, in any order) merged in ``(relative
    position, row id)`` order and re-blocked; yields ``(h, block)``."""
    if not tails:
        return
    buffer = ReBlocker(block_size)
    yield from buffer.add(*merge_order(tails))
    yield from buffer.finish()


def write_extra(plan, round_, v, tails):
    """Write column of blocks *v* of training set *round_*'s extra matrix
    from the partial bottom blocks routed to it; returns its summary."""
    return write_group(plan.output, plan.composed[round_], v,
                       compose_extra(plan.block_size, tails))


def composed_ids(block_size, folds, rounds, group=0):
    """Row ids of each of *rounds* composed training sets in the order its
    composed view reads them, from *folds*: ``(row ids, relative
    positions)`` of every fold in sample order; *group*: folds per set
    (:func:`partners`).  What the engines write, computed in memory by the
    same rules (the Python API)."""
    heads, tails = [], []
    for ids, pos in folds:
        full = ids.size - ids.size % block_size
        heads.append(ids[:full])
        tails.append(id_block(ids[full:], pos[full:]))
    out = []
    for round_ in range(rounds):
        others = partners(len(folds), round_, group)
        extra = compose_extra(block_size, [tails[f] for f in others])
        out.append(np.concatenate([np.empty(0, np.int64)] + [heads[f] for f in others] +
                                  [block.row_ids for _, block in extra]))
    return out


def id_block(row_ids, relpos):
    """A block of rows known by id only (no values): what the phases need
    to order, re-block and compose rows without moving them."""
    return EncodedBlock(DENSE, len(row_ids), 0, np.empty((len(row_ids), 0), np.uint8),
                        row_ids=row_ids, relpos=relpos)


#: rows per call of a UDF when its samples are computed in memory
RANGE_ROWS = 1 << 20


def sample_indices(udf, seed, block_size=1000, compose=True):
    """``(names, {name: row ids in sample order})`` of a SamplingUDF
    instance, computed in memory by the engines' rules (the Python API and
    table runs); *compose*: also the composed training sets (k-fold in fold
    mode, in the order their composed view reads them with *block_size*),
    else only the samples the UDF makes."""
    rng = PositionRNG(seed)
    n = udf.n_rows
    ids, sample, relpos = [], [], []
    for a in range(0, n, RANGE_ROWS):
        try:
            occ = udf(a, min(n, a + RANGE_ROWS), rng)
        except SystemExit as exc:   # a UDF's exit is its failure, not the caller's exit
            raise EngineError(f"the sampling-UDF {udf.name} called sys.exit({exc.code!r}); "
                              "no samples were made") from None
        ids.append(occ.offset + a if a else occ.offset)
        sample.append(occ.sample)
        relpos.append(occ.relpos)
    if len(ids) == 1:              # one range: its arrays as they are, not copies
        ids, sample, relpos = ids[0], sample[0], relpos[0]
    else:
        ids, sample, relpos = (np.concatenate(x) for x in (ids, sample, relpos))
    names = udf.sample_names()
    if names is None:
        names = [f"sample-{i}" for i in range(int(sample.max()) + 1 if sample.size else 0)]
    order, bounds = _by_sample(sample, relpos, ids, len(names))
    ids = ids[order]
    out = {name: ids[bounds[i]:bounds[i + 1]] for i, name in enumerate(names)}
    composed = udf.composed_names() if compose else []
    if composed:     # the relative positions of the rows past each fold's full blocks,
        ordered = np.zeros(relpos.size, np.uint64)      # all composed_ids reads of them
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            tail = slice(b - (b - a) % block_size, b)
            ordered[tail] = relpos[order[tail]]
        folds = [(ids[bounds[i]:bounds[i + 1]], ordered[bounds[i]:bounds[i + 1]])
                 for i in range(len(names))]
        out.update(zip(composed, composed_ids(block_size, folds, len(composed),
                                              udf.fold_group())))
    return list(names) + list(composed), out


def _by_sample(sample, relpos, ids, n_samples):
    """The permutation into ``(sample, relative position, row id)`` order,
    and where each sample starts in it: one sort of packed keys
    (:func:`_packed_order`), or else rows grouped by sample (a stable radix
    sort of the small sample ids), then each sample in the engines' order
    (:func:`relpos_order`)."""
    if n_samples >= 1 and sample.size >= PACKED_ROWS:
        packed = _packed_order(relpos, ids, sample, n_samples)
        if packed is not None:
            return packed
    key = sample.astype(np.uint16) if n_samples <= 1 << 16 else sample
    order = np.argsort(key, kind="stable")
    bounds = np.searchsorted(sample[order], np.arange(n_samples + 1))
    for a, b in zip(bounds[:-1], bounds[1:]):
        if b - a > 1:
            part = order[a:b]
            order[a:b] = part[relpos_order(relpos[part], ids[part])]
    return order, bounds
