"""Hive TRANSFORM scripts: the sampling UDTF, the reblock and compose
reducers, and the two helpers of the join-based baseline.

Hive (and the Spark Thrift Server) run ``SELECT TRANSFORM (cols) USING 'cmd'
AS (cols)`` by streaming rows to the command's stdin as tab-separated text,
one row per line, and parsing its stdout the same way.  Every field here is
decimal, fixed-width hex or base64 text, so no tab or newline can appear
inside a field.

Subcommands (``python samplegen-<hash>.zip SUBCOMMAND ...`` on the nodes,
``python -m samplegen.hive.transform SUBCOMMAND ...`` here):

``sample`` (map side; the sampling UDTF)
    in:  ``h_index, v_index, block``                 (rows of a block table)
    out: ``sample, v_index, relative_pos, row_id, row_partition``
    With ``--records rows`` (the paper's form) one row per occurrence:
    ``relative_pos`` is the occurrence's 64-bit relative position as 16 hex
    digits, ``row_id`` the input row id, ``row_partition`` the row's values
    as base64 text (the row's fixed run of the block's text).  With
    ``--records chunks`` (default; the mrjob engine's design) one row per
    chunk: the rows of one input block going to one ``(sample, v_index)``
    with relative positions in one shuffle bin, already in
    ``(relative position, row id)`` order; ``relative_pos`` is the bin's
    lower bound (16 hex digits), ``row_id`` the first row id of the input
    block, ``row_partition`` the chunk as a block payload (with row ids and
    relative positions).

``reblock`` (reduce side, after ``DISTRIBUTE BY sample, v_index SORT BY
sample, v_index, relative_pos, row_id``)
    Streams each ``(sample, v_index)`` group into one buffer block and writes
    the column of blocks to ``<output>/<sample>/part-v<v>`` (the block store
    layout, via :func:`jobs.phases.write_sample`).
    out: ``route, sample, v_index, payload`` -- ``route = -1``: ``payload``
    is the JSON summary of the written column of blocks; fold mode also
    emits each fold's partial bottom block once for every other round
    ``route = r`` (:func:`jobs.phases.partners`; payload: the block with row
    ids and relative positions).

``compose`` (reduce side of the fold-mode composition step, after
``DISTRIBUTE BY route, v_index SORT BY route, v_index, sample``)
    Passes summaries through; the partial blocks routed to round r become the
    extra matrix of ``train-r`` (:func:`jobs.phases.write_extra`; the rest of
    the training set is a composed view of the folds' full blocks).

``finish`` (the last stage, one task: ``DISTRIBUTE BY`` a constant)
    Receives every summary row of the run and writes the run's metadata
    into ``<output>`` with :func:`jobs.driver.write_run` -- each sample's
    ``_matrix.json`` and ``_manifest.json`` exactly as the driver writes
    them, then ``_SUCCESS`` -- so that a run from beeline alone leaves a
    run directory ``samplegen info`` / ``export`` read.  ``--input`` is the
    input matrix directory (its ``_matrix.json`` gives the fingerprint and
    must match the plan's shape).  Passes every row through (the driver
    commits from the summaries as before); with an error row in its input
    it writes nothing; a task without input does nothing.

``rows`` (map side of a row table: one row per row, any columns)
    in:  ``position, <the table's columns>`` (the key's position,
    :mod:`jobs.keys`, then the row as Hive wrote it)
    out: ``<the table's columns>, sample`` -- each row once per occurrence,
    its text untouched, and the sample's name.  Whole buffers at a time
    (numpy over the bytes: no Python object per row).  A key that is not a
    non-negative integer stops the script (exit status 2).

``arrivals-histogram`` / ``arrivals-boundary`` (a bootstrap of a row table
whose keys are not the row ids; :mod:`udfs.arrivals`)
    in:  ``position`` (one per row).  ``arrivals-histogram`` out, once at the
    end of its input: ``sample, window, histogram`` (int64 counts, base64);
    ``arrivals-boundary`` out: ``sample, word, position`` of the arrivals in
    each sample's boundary bin (``--targets window:bin/...``).

``ranks-histogram`` / ``ranks-words`` (exact sizes of a row table whose keys
are not the row ids; :mod:`udfs.ranks`)
    in:  ``position`` (one per row).  ``ranks-histogram`` out, once at the
    end of its input: ``stream, histogram`` of the coins' words (int64
    counts, base64); ``ranks-words`` out: ``stream, word`` of the words in
    the bins that hold a cutoff (``--bins bin:bin/...``, per stream).

``explode`` / ``assign`` (the join-based baseline)
    ``explode``: ``h_index, v_index, block`` -> ``row_id, v_index,
    row_partition`` (every row of every block).  ``assign``: ``h_index`` of
    the blocks of column 0 -> ``sample, row_id, relative_pos`` (the
    assignments table: which row goes where, decided by the same UDF).

Order is checked, not assumed: a reducer whose input is not grouped and
sorted as documented stops with an error instead of writing wrong blocks.

**Errors travel as rows.**  When a script meets bad input (a corrupt block, a
bad parameter, a UDF breaking the protocol, ...) it writes one *error row*,
reads the rest of its input and exits with status 0: the map side emits
``sample = -1`` (sorted first), the reducers pass it on as ``route = -2``,
and the client raises the error it reports.  Its payload is the marker line
of :mod:`jobs.engines.task_errors` (``samplegen-error: Class: message``, the
protocol every engine's tasks report errors by), also written to stderr.  A
failing script would instead surface as an opaque task failure ("Broken
pipe" on Spark, "[Error 20001]" on Hive, after Hive's task retries).
"""
import argparse
import json
import re
import sys

import numpy as np

from samplegen.jobs import driver
from samplegen.jobs import fs as fsmod
from samplegen.jobs import plan as plan_codec
from samplegen.jobs.blocks import DENSE, ENTRY_CHARS, EncodedBlock, parse_encoded, row_chars
from samplegen.jobs.engines.task_errors import error_line
from samplegen.jobs.phases import (
    ReBlocker,
    local_sampling,
    partners,
    reblock,
    write_extra,
    write_sample,
)
from samplegen.jobs.store import SUCCESS, read_meta
from samplegen.jobs.strata import open_side
from samplegen.udfs.base import Occurrences
from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import InputError, ParameterError, SamplegenError
from samplegen.udfs.rng import PositionRNG
from samplegen.udfs.strata import SIDES

BATCH_ROWS = 4096
RANGE_ROWS = 1 << 16
_SUMMARY = -1
_ERROR_ROUTE = -2
_ERROR_SAMPLE = -1


class RangeCache:
    """Ask the sampling-UDF for many consecutive rows at once.

    A map task reads consecutive blocks (and every column block of a row
    block); calling the UDF once per block repeats work that does not depend
    on the block (the bootstrap UDF re-walks its multinomial tree every
    time: 60% of the map script's time at block size 1000).  The UDF
    contract makes a row's occurrences independent of the range it is asked
    in, so the occurrences of ``[start, stop)`` are cut out of one call over
    ``RANGE_ROWS`` rows from ``start`` on; :func:`jobs.phases.local_sampling`
    sorts them exactly as before, so the output does not change (tested).

    It serves the map scripts here (``sample``, ``assign``) and nothing
    else: the MapReduce and Spark map tasks ask the UDF once per block.
    Since the UDFs draw from re-keyed generators (``PositionRNG.keyed``) the
    cache no longer pays off in process: local-sampling of 200,000 x 20
    rows (block size 1000) takes the same time with and without it (0.34
    vs 0.33 s for 10 bootstrap samples, 2.1 vs 2.2 s for 50).
    """

    def __init__(self, udf, n_rows, span=None):
        self.udf, self.n_rows, self.span = udf, n_rows, span or RANGE_ROWS
        self.lo = self.hi = None
        self.occ = None

    def __call__(self, start, stop, rng):
        if self.lo is None or start < self.lo or stop > self.hi:
            self.lo, self.hi = start, min(self.n_rows, max(stop, start + self.span))
            occ = self.udf(self.lo, self.hi, rng)
            order = np.argsort(occ.offset, kind="stable")
            self.occ = Occurrences(occ.offset[order], occ.sample[order], occ.relpos[order])
        a, b = np.searchsorted(self.occ.offset, [start - self.lo, stop - self.lo])
        return Occurrences(self.occ.offset[a:b] - (start - self.lo), self.occ.sample[a:b],
                           self.occ.relpos[a:b])


# ---------------------------------------------------------------------------
# map side: the sampling UDTF
# ---------------------------------------------------------------------------
def run_sample(plan, records, lines, out):
    B = plan.block_size
    sampler = RangeCache(plan.sampler(), plan.rows)
    n_h = -(-plan.rows // B)
    for line in lines:
        h, v, block = parse_encoded(line)
        if h >= n_h or v >= plan.n_vblocks() or block.cols != plan.block_cols(v) or \
                block.rows != min(B, plan.rows - h * B):
            raise InputError(f"block ({h}, {v}) of shape {block.rows}x{block.cols} does not "
                             f"belong to a {plan.rows} x {plan.cols} matrix with block size {B}")
        for sample, _, bin_, _, chunk in local_sampling(plan, h, v, block, sampler):
            if records == "chunks":
                bits = int(plan.bits_of(np.array([sample]))[0])
                low = bin_ << (64 - bits) if bits else 0
                out.write(b"%d\t%d\t%016x\t%d\t" % (sample, v, low, h * B))
                for piece in chunk.parts(crc=False)[0]:
                    out.write(piece)
                out.write(b"\n")
            else:
                _write_rows(out, sample, v, chunk)


def _row_texts(chunk):
    if chunk.kind == DENSE:
        return [bytes(row) for row in chunk.text]
    flat = chunk.text.reshape(-1)
    ptr = chunk.indptr * ENTRY_CHARS
    return [bytes(flat[ptr[i]:ptr[i + 1]]) for i in range(chunk.rows)]


def _write_rows(out, sample, v, chunk):
    head = b"%d\t%d\t" % (sample, v)
    for rel, rid, text in zip(chunk.relpos.tolist(), chunk.row_ids.tolist(), _row_texts(chunk)):
        out.write(b"%s%016x\t%d\t%s\n" % (head, rel, rid, text))


# ---------------------------------------------------------------------------
# map side of a row table
# ---------------------------------------------------------------------------
ROWS_BUFFER = 1 << 22
_MAX_DIGITS = 19


def run_rows(udf, rng, stdin, out, buffer=ROWS_BUFFER):
    """``rows``: each input line's row once per occurrence, with the sample
    name (the first field, the key's position, decides)."""
    names = udf.sample_names()
    if names is None:
        raise ParameterError(f"sampling-UDF {udf.name!r} does not declare its sample names; "
                             "a row table needs them")
    suffixes = [np.frombuffer(b"\t" + n.encode("utf-8") + b"\n", np.uint8) for n in names]
    for data in _whole_lines(stdin, buffer):
        _rows_chunk(np.frombuffer(data, np.uint8), udf, rng, suffixes, out)


def _whole_lines(stdin, buffer):
    """*stdin* in pieces of about *buffer* bytes, each ending with a whole
    line (a last line without its newline gets one)."""
    carry = b""
    while True:
        data = stdin.read(buffer)
        if not data:
            break
        data = carry + data
        cut = data.rfind(b"\n") + 1
        carry = data[cut:]
        if cut:
            yield data[:cut]
    if carry:
        yield carry + b"\n"


def _rows_chunk(buf, udf, rng, suffixes, out):
    ends = np.flatnonzero(buf == 10)
    starts = np.concatenate(([0], ends[:-1] + 1))
    tabs = np.flatnonzero(buf == 9)
    first_tab = tabs[np.minimum(np.searchsorted(tabs, starts), max(tabs.size - 1, 0))] \
        if tabs.size else ends
    if not tabs.size or np.any(first_tab > ends):
        raise InputError("a row-table line has no column after the key")
    positions = _decimal_fields(buf, starts, first_tab)
    occ = udf.occurrences_at(positions, rng)
    # the row's text: from after the key's tab to its newline, which becomes
    # the suffix "\t<sample name>\n" (np.repeat writes it, then it is filled in)
    counts = np.bincount(occ.sample * positions.size + occ.offset,
                         minlength=len(suffixes) * positions.size).reshape(len(suffixes), -1)
    line_start, line_end = first_tab + 1, ends
    for s, suffix in enumerate(suffixes):
        c = counts[s]
        for r in range(int(c.max()) if c.size else 0):
            chosen = np.flatnonzero(c > r)
            inside = np.zeros(buf.size + 1, np.int64)
            inside[line_start[chosen]] += 1
            inside[line_end[chosen]] -= 1
            reps = np.cumsum(inside[:-1])
            reps[line_end[chosen]] = suffix.size
            written = np.repeat(buf, reps)
            tail = np.cumsum(reps)[line_end[chosen]] - suffix.size
            written[tail[:, None] + np.arange(suffix.size)] = suffix
            out.write(written.tobytes())


def _positions_of(stdin, buffer=ROWS_BUFFER):
    """The decimal positions on *stdin* (one per line), a buffer at a time."""
    for data in _whole_lines(stdin, buffer):
        buf = np.frombuffer(data, np.uint8)
        ends = np.flatnonzero(buf == 10)
        yield _decimal_fields(buf, np.concatenate(([0], ends[:-1] + 1)), ends)


def run_arrivals(args, stdin, out):
    """``arrivals-histogram`` / ``arrivals-boundary``."""
    import base64

    from samplegen.udfs import arrivals

    rng = PositionRNG(args.seed)
    if args.command == "arrivals-histogram":
        total = np.zeros((args.samples, args.windows, 1 << args.bits), np.int64)
        for positions in _positions_of(stdin):
            total += arrivals.histograms(rng, positions, args.n_rows, args.size, args.samples,
                                         args.windows, args.bits)
        for i in range(args.samples):
            for w in range(args.windows):
                out.write(b"%d\t%d\t%s\n" % (i, w, base64.b64encode(total[i, w].tobytes())))
        return
    targets = [tuple(int(x) for x in t.split(":")) for t in args.targets.split("/") if t]
    for positions in _positions_of(stdin):
        sample, words, where = arrivals.boundary_arrivals(rng, positions, args.n_rows,
                                                          args.size, args.bits, targets)
        for row in zip(sample.tolist(), words.tolist(), where.tolist()):
            out.write(b"%d\t%d\t%d\n" % row)


def run_ranks(args, stdin, out):
    """``ranks-histogram`` / ``ranks-words`` (:mod:`udfs.ranks`: exact sizes
    of a row table keyed by anything but the row ids)."""
    import base64

    from samplegen.udfs import ranks

    rng = PositionRNG(args.seed)
    streams = ranks.parse_streams(args.streams)
    if args.command == "ranks-histogram":
        total = np.zeros((len(streams), 1 << ranks.BITS), np.int64)
        for positions in _positions_of(stdin):
            total += ranks.histograms(rng, positions, streams)
        for i in range(len(streams)):
            out.write(b"%d\t%s\n" % (i, base64.b64encode(total[i].tobytes())))
        return
    bins = ranks.parse_lists(args.bins)
    for positions in _positions_of(stdin):
        index, words = ranks.words_in(rng, positions, streams, bins)
        for row in zip(index.tolist(), words.tolist()):
            out.write(b"%d\t%d\n" % row)


def _decimal_fields(buf, starts, stops):
    """The non-negative decimal integers ``buf[starts[i]:stops[i]]``."""
    length = stops - starts
    if length.size and (length.min() < 1 or length.max() > _MAX_DIGITS):
        bad = int(np.flatnonzero((length < 1) | (length > _MAX_DIGITS))[0])
        raise InputError(f"row-table key position {_field_text(buf, starts[bad], stops[bad])!r}"
                         " is not a non-negative 64-bit integer (a NULL key?)")
    value = np.zeros(length.size, np.uint64)
    for k in range(int(length.max()) if length.size else 0):
        live = length > k
        digit = buf[starts[live] + k].astype(np.int64) - 48
        if digit.size and (digit.min() < 0 or digit.max() > 9):
            row = np.flatnonzero(live)[int(np.flatnonzero((digit < 0) | (digit > 9))[0])]
            raise InputError(f"row-table key position "
                             f"{_field_text(buf, starts[row], stops[row])!r} is not a "
                             "non-negative integer (a NULL key?)")
        value[live] = value[live] * np.uint64(10) + digit.astype(np.uint64)
    if value.size and value.max() >= np.uint64(1 << 63):
        raise InputError("row-table key position out of range")
    return value.astype(np.int64)


def _field_text(buf, a, b):
    return bytes(buf[a:b]).decode("utf-8", "replace")


# ---------------------------------------------------------------------------
# reduce side: parse the sorted occurrences of each (sample, v) group
# ---------------------------------------------------------------------------
class OrderError(InputError):
    pass


def _fields(line, n):
    parts = line.rstrip(b"\r\n").split(b"\t")
    if len(parts) != n:
        raise InputError(f"TRANSFORM input row has {len(parts)} fields, expected {n}")
    return parts


def occurrence_groups(lines):
    """Yield ``(sample, v, records)`` per group; *records* yields
    ``(relative_pos, row_id, row_partition)`` and checks the sort order."""
    seen = set()
    it = iter(lines)
    pending = None
    for line in it:
        pending = _fields(line, 5)
        break
    while pending is not None:
        sample, v = int(pending[0]), int(pending[1])
        if sample == _ERROR_SAMPLE:
            yield sample, v, iter([(0, 0, pending[4])])
            pending = None
            for line in it:
                fields = _fields(line, 5)
                if int(fields[0]) != _ERROR_SAMPLE:
                    pending = fields
                    break
            continue
        if (sample, v) in seen:
            raise OrderError(f"reblock input is not grouped: group ({sample}, {v}) "
                             "appears twice (DISTRIBUTE BY sample, v_index is missing)")
        seen.add((sample, v))
        key = pending[0], pending[1]
        state = {"next": None}

        def records(first=pending, key=key, state=state):
            prev = None
            fields = first
            while True:
                current = (int(fields[2], 16), int(fields[3]))
                if prev is not None and current < prev:
                    raise OrderError("reblock input is not sorted by (relative_pos, row_id) "
                                     "inside a group (SORT BY is missing)")
                prev = current
                yield current[0], current[1], fields[4]
                for line in it:
                    fields = _fields(line, 5)
                    break
                else:
                    return
                if (fields[0], fields[1]) != key:
                    state["next"] = fields
                    return
        yield sample, v, records()
        pending = state["next"]


def _row_block(plan, v, rels, ids, texts):
    cols = plan.block_cols(v)
    relpos = np.array(rels, dtype=np.uint64)
    row_ids = np.array(ids, dtype=np.int64)
    joined = np.frombuffer(b"".join(texts), dtype=np.uint8)
    if plan.kind == "dense":
        width = row_chars(cols)
        if joined.size != width * len(texts):
            raise InputError("row partition of the wrong length in the reblock input")
        return EncodedBlock(DENSE, len(texts), cols, joined.reshape(len(texts), width),
                            row_ids=row_ids, relpos=relpos)
    lengths = np.array([len(t) for t in texts], np.int64)
    if np.any(lengths % ENTRY_CHARS):
        raise InputError("sparse row partition of the wrong length in the reblock input")
    indptr = np.zeros(len(texts) + 1, np.int64)
    np.cumsum(lengths // ENTRY_CHARS, out=indptr[1:])
    return EncodedBlock(1, len(texts), cols, joined.reshape(-1, ENTRY_CHARS), indptr=indptr,
                        row_ids=row_ids, relpos=relpos)


def group_blocks(plan, records_mode, v, records):
    """``(h, block)`` of one group, in final order."""
    if records_mode == "chunks":
        binned = ((rel, EncodedBlock.parse(payload, verify=False))
                  for rel, _, payload in records)
        yield from reblock(plan.block_size, binned)
        return
    buffer = ReBlocker(plan.block_size)
    rels, ids, texts = [], [], []
    for rel, rid, text in records:
        rels.append(rel)
        ids.append(rid)
        texts.append(text)
        if len(texts) == BATCH_ROWS:
            yield from buffer.add(_row_block(plan, v, rels, ids, texts))
            rels, ids, texts = [], [], []
    if texts:
        yield from buffer.add(_row_block(plan, v, rels, ids, texts))
    yield from buffer.finish()


def run_reblock(plan, records_mode, lines, out):
    n_rounds = len(plan.composed)
    for sample, v, records in occurrence_groups(lines):
        if sample == _ERROR_SAMPLE:
            for _, _, message in records:
                _emit(out, _ERROR_ROUTE, -1, -1, message)
            continue
        summary, tail = write_sample(plan, sample, v, group_blocks(plan, records_mode, v, records))
        _emit(out, _SUMMARY, sample, v, json.dumps(summary).encode())
        for block in tail:
            payload = block.encode(crc=False)
            for round_ in partners(n_rounds, sample, plan.fold_group):
                _emit(out, round_, sample, v, payload)


def _emit(out, route, sample, v, payload):
    out.write(b"%d\t%d\t%d\t" % (route, sample, v))
    out.write(payload)
    out.write(b"\n")


# ---------------------------------------------------------------------------
# fold-mode composition
# ---------------------------------------------------------------------------
def run_compose(plan, lines, out):
    group, tails, prev = None, [], None
    for line in lines:
        route_t, sample_t, v_t, payload = _fields(line, 4)
        route, sample, v = int(route_t), int(sample_t), int(v_t)
        if route in (_SUMMARY, _ERROR_ROUTE):
            out.write(line if line.endswith(b"\n") else line + b"\n")
            continue
        key = (route, v, sample)
        if prev is not None and key < prev:
            raise OrderError("compose input is not sorted by (route, v_index, sample)")
        prev = key
        if group is not None and (route, v) != group:
            _compose_group(plan, group, tails, out)
            tails = []
        group = (route, v)
        tails.append(EncodedBlock.parse(payload, verify=False))
    if group is not None:
        _compose_group(plan, group, tails, out)


def _compose_group(plan, group, tails, out):
    round_, v = group
    if not 0 <= round_ < len(plan.composed):
        raise InputError(f"compose input routes a block to round {round_}, but there are "
                         f"{len(plan.composed)} rounds")
    summary = write_extra(plan, round_, v, tails)
    _emit(out, _SUMMARY, round_, v, json.dumps(summary).encode())


# ---------------------------------------------------------------------------
# the last stage: the run's metadata
# ---------------------------------------------------------------------------
#: the manifest's ``engine`` entry of a run whose metadata the query wrote
QUERY_ENGINE = {"runner": "hive", "metadata": "query"}


def run_finish(plan, input_dir, lines, out):
    summaries, errors, n = [], False, 0
    for line in lines:
        route_t, _, _, payload = _fields(line, 4)
        route = int(route_t)
        if route == _ERROR_ROUTE:
            errors = True
        elif route == _SUMMARY:
            summaries.append(json.loads(payload))
        else:
            raise InputError(f"finish input has a row of route {route}: only summaries "
                             "(the last stage of a script) are expected")
        out.write(line if line.endswith(b"\n") else line + b"\n")
        n += 1
    if errors or not n:
        return
    meta = read_meta(input_dir)
    shape = {"rows": plan.rows, "cols": plan.cols, "block_size": plan.block_size,
             "kind": plan.kind}
    if {k: meta.get(k) for k in shape} != shape:
        raise InputError(f"input {input_dir} is a {meta.get('rows')} x {meta.get('cols')} "
                         f"{meta.get('kind')} matrix with block size {meta.get('block_size')}, "
                         f"but the query was given {plan.rows} x {plan.cols} {plan.kind} with "
                         f"block size {plan.block_size}")
    driver.write_run(plan, meta, input_dir, summaries, plan.output, dict(QUERY_ENGINE))
    fsmod.get_fs(plan.output).touch(fsmod.join(plan.output, SUCCESS))


# ---------------------------------------------------------------------------
# join-based baseline helpers
# ---------------------------------------------------------------------------
def run_explode(plan, lines, out):
    B = plan.block_size
    for line in lines:
        h, v, block = parse_encoded(line)
        head = b"\t%d\t" % v
        for i, text in enumerate(_row_texts(block)):
            out.write(b"%d%s%s\n" % (h * B + i, head, text))


def run_assign(plan, lines, out):
    B = plan.block_size
    udf, rng = RangeCache(plan.sampler(), plan.rows), plan.rng()
    for line in lines:
        h = int(_fields(line, 1)[0])
        start = h * B
        occ = udf(start, min(plan.rows, start + B), rng)
        for s, rid, rel in zip(occ.sample.tolist(), (occ.offset + start).tolist(),
                               occ.relpos.tolist()):
            out.write(b"%d\t%d\t%016x\n" % (s, rid, rel))


# ---------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise ParameterError(f"{self.prog}: {message}")


COMMANDS = ("sample", "reblock", "compose", "finish", "explode", "assign", "rows",
            "arrivals-histogram", "arrivals-boundary", "ranks-histogram", "ranks-words")
_OWN_OPTIONS = ("rows", "arrivals-histogram", "arrivals-boundary", "ranks-histogram",
                "ranks-words")


def build_parser():
    parser = _Parser(prog="samplegen-transform")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("rows")
    p.add_argument("--udf", required=True)
    p.add_argument("--params", default="", help="KEY=VALUE[,KEY=VALUE...]")
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--n-rows", type=int, required=True)
    for side in SIDES:   # --strata, --grouping, --weighting: jobs.strata files, or none
        p.add_argument(f"--{side}", default="none")
    for name in ("arrivals-histogram", "arrivals-boundary"):
        p = sub.add_parser(name)
        p.add_argument("--seed", type=int, required=True)
        p.add_argument("--n-rows", type=int, required=True)
        p.add_argument("--size", type=int, required=True)
        p.add_argument("--samples", type=int, required=True)
        p.add_argument("--bits", type=int, required=True)
        p.add_argument("--windows", type=int, default=1)
        p.add_argument("--targets", default="")
    for name in ("ranks-histogram", "ranks-words"):
        p = sub.add_parser(name)
        p.add_argument("--seed", type=int, required=True)
        p.add_argument("--streams", required=True, help="purpose:index:sub/...")
        p.add_argument("--bins", default="", help="bin:bin/... per stream (ranks-words)")
    for name in COMMANDS:
        if name in _OWN_OPTIONS:
            continue
        p = sub.add_parser(name)
        plan_codec.add_options(p)
        p.add_argument("--records", choices=("chunks", "rows"), default="chunks")
        if name in ("reblock", "compose", "finish"):
            p.add_argument("--output", required=True)
        if name == "finish":
            p.add_argument("--input", required=True)
    return parser


def error_row(command, exc):
    """The error row reporting *exc*: its payload is the marker line of the
    :mod:`~jobs.engines.task_errors` protocol (one line, no tab)."""
    message = error_line(exc).encode("utf-8", "replace")
    if command == "sample":
        return b"%d\t-1\t\t-1\t%s\n" % (_ERROR_SAMPLE, message)
    return b"%d\t-1\t-1\t%s\n" % (_ERROR_ROUTE, message)


_STAGING = re.compile(r"\..+\.tmp-[0-9a-f]{12}")


def prepare_output(output):
    """Create the run directory of a run from beeline (the reducers write
    into it; its parent must exist).  A staging directory of samplegen's
    driver (``.<name>.tmp-<id>``, :class:`jobs.store.StagedOutput`) is never
    re-created: a task that outlives its run must not bring it back."""
    name = output.rstrip("/").rsplit("/", 1)[-1]
    fs = fsmod.get_fs(output)
    if _STAGING.fullmatch(name) or fs.isdir(output):
        return
    if hasattr(fs, "prepare_dir"):  # a Hadoop filesystem: only inside an existing parent
        fs.prepare_dir(output)
    else:
        fs.makedirs(output)


def main(argv=None, stdin=None, stdout=None):
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else "reblock"
    try:
        args = build_parser().parse_args(argv)
        if args.command == "rows":
            sides = [None if getattr(args, side) == "none" else open_side(getattr(args, side))
                     for side in SIDES]
            udf = load_udf(args.udf, args.n_rows, plan_codec.parse_params(args.params), *sides)
            run_rows(udf, PositionRNG(args.seed), stdin, stdout)
            stdout.flush()
            return 0
        if args.command.startswith("arrivals-"):
            run_arrivals(args, stdin, stdout)
            stdout.flush()
            return 0
        if args.command.startswith("ranks-"):
            run_ranks(args, stdin, stdout)
            stdout.flush()
            return 0
        plan = plan_codec.from_options(args, getattr(args, "output", ""))
        if args.command in ("reblock", "compose"):
            prepare_output(args.output)
        if args.command == "sample":
            run_sample(plan, args.records, stdin, stdout)
        elif args.command == "reblock":
            run_reblock(plan, args.records, stdin, stdout)
        elif args.command == "compose":
            run_compose(plan, stdin, stdout)
        elif args.command == "finish":
            run_finish(plan, args.input, stdin, stdout)
        elif args.command == "explode":
            run_explode(plan, stdin, stdout)
        else:
            run_assign(plan, stdin, stdout)
    except Exception as exc:
        if not isinstance(exc, SamplegenError):
            import traceback
            traceback.print_exc()
        sys.stderr.write(error_line(exc) + "\n")
        if command in ("explode", "assign") + _OWN_OPTIONS:
            return 2  # no error rows in their schemas (the row table's are the user's)
        stdout.write(error_row(command, exc))
        for _ in stdin:  # let the engine finish writing our input
            pass
    stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
