"""One partition of the co-partitioned reservoir: applying the driver's decisions.

Partition ``p`` of the reservoir lives with partition ``p`` of the batches: its
items are rows of *sources*, immutable Parquet files of this partition --

* the newest snapshot ``snapshots/<s>/part-<p>.parquet`` (every item the
  partition held after batch ``s``, ordered by arrival batch), and
* for each later batch ``k``, ``deltas/<k>/in/part-<p>.parquet``: the rows of
  the partition's slice of batch ``k`` that entered the reservoir (followed by
  copies of older rows that re-entered the sample, which are not items).

Every row of a source carries its key, the columns ``_sg_batch`` (arrival
batch) and ``_sg_row`` (row of that batch); in memory a key is the int64
``(batch << 32) | row``, and the keys of a source are also stored, as one
array, in the structure file of the batch that wrote it (read much faster
than Parquet when rows leave the sample).  Which rows are items is kept in
the partition's *structure* file ``deltas/<k>/part-<p>.bin``, rewritten for
every batch: the list of sources (each with the checksums of its file and
of its keys, and, once read, with where its values lie in its file --
:func:`.points.layout` -- so that rows re-entering the sample are read by
offset without parsing it again), two bitmaps over the
rows of all sources -- ``F`` (a full item of some latent sample) and ``R`` (in
the realized sample ``S_k``; not stored when ``S_k`` is every full item plus
some partial ones, the usual case, since it is then ``F`` and those rows) --
and the rows of its partial items (by pid).  Nothing per item is rewritten
except these two bits.

For batch ``k`` the task, with ``rng = batch_generator(key, k, STREAM_APPLY,
sub=p)``:

1. for each group with evictions here, chooses which of its full rows move out
   (``select_for_downsample`` with the partition's ``partition_plan``) and, if
   told, which of them becomes the named partial item;
2. reads its slice of the batch and chooses the rows to take (and the new
   partial item), writing them as the new source;
3. promotes or drops partial items as told;
4. computes ``R`` (all full items and the realized partial items, or, when
   Algorithm 8 caps the sample at n, the ``count`` full items of smallest
   priority);
5. writes the delta: ``in`` = the new source, ``out`` = keys of rows that left
   ``S`` or entered the reservoir without entering ``S``.  A consumer gets
   ``S_k = (S_{k-1} union in_k) minus out_k`` (by key);
6. every ``compact_every`` batches, writes a new snapshot of its items and
   starts over with that single source.

The task checks the driver's counts against its own before and after every
batch, so a disagreement stops the run instead of corrupting the STATE.
Every file it reads back is verified against the checksum recorded when it
was written (the structure file's in the commit, a source's and its keys'
in the structure file): damage stops the run with a
:class:`.storage.DamagedStateError` naming the file.
"""
import json
import os

import numpy as np

from samplegen.udfs.rng import splitmix64

from ..errors import TBSError
from ..latent import partition_plan, select_for_downsample
from ..randomness import STREAM_APPLY, batch_generator
from .batches import read_rows
from .decide import group_of
from .points import layout, layout_plan, read_points
from .storage import Store, checksum, damaged

ROW_GROUP = 1 << 16   # rows per row group of written files (bounds the cost of reading a few rows)
POINT_ROWS = 128      # more rows of one row group than this: decode it whole (measured, 6 columns
                      # of 65,536 rows: 128 rows by offset 0.8 ms, 512 rows 2.8 ms, decoding 1.3 ms)
KEY_COLUMNS = ("_sg_batch", "_sg_row")
IN_SAMPLE = "_sg_in_sample"
_MASK32 = np.int64(0xFFFFFFFF)


def delta_in(k, p):
    return f"deltas/{k:010d}/in/part-{p:05d}.parquet"


def delta_out(k, p):
    return f"deltas/{k:010d}/out/part-{p:05d}.parquet"


def snapshot_file(k, p):
    return f"snapshots/{k:010d}/part-{p:05d}.parquet"


def struct_file(k, p):
    """Partition p's structure file after batch k: in the batch's directory,
    like every other file of batch k but its snapshot (see
    :func:`.state.unfinished`)."""
    return f"deltas/{k:010d}/part-{p:05d}.bin"


def split_keys(keys):
    keys = np.asarray(keys, dtype=np.int64)
    return keys >> 32, keys & _MASK32


def priorities(keys, salt):
    """A fixed pseudo-random uint64 per item key (distinct keys, distinct values):
    SplitMix64 of the key xor the seed's salt (:func:`.decide.output_salt`)."""
    return splitmix64(np.asarray(keys, dtype=np.int64).view(np.uint64) ^ np.uint64(salt))


class Partition:
    """The reservoir partition in memory: sources, the F/R bitmaps, partials."""

    def __init__(self, store, p, writer_options):
        self.store = store
        self.p = p
        self.options = writer_options
        # [{"path", "sum", "keys", "keys_sum", "rows", "segs": [[batch, lo, hi]], "points"}]
        self.sources = []
        self.n = 0                        # rows of all sources (and, during a batch, the new rows)
        self._F = np.zeros(0, dtype=bool)  # growable buffers behind the F and R bitmaps
        self._R = np.zeros(0, dtype=bool)
        self.partials = {}                # pid -> row
        self.all_mode = True              # R = F plus extra_rows (S: full items, some partials)
        self.extra_rows = np.zeros(0, dtype=np.int64)   # rows in R that are not in F
        self.realized = 0                 # rows in R
        self._keys = {}                   # source index -> key array (lazily loaded)
        self._fresh = None                # keys of this batch's new source (kept in its structure)

    @property
    def F(self):
        """F[row]: the row is a full item of some latent sample (a view)."""
        return self._F[:self.n]

    @property
    def R(self):
        """R[row]: the row is in the realized sample S_k (a view)."""
        return self._R[:self.n]

    def _set(self, F, R):
        self._F, self._R, self.n = F, R, int(F.size)     # (load then sets n below the capacity)

    def _append(self, count, full):
        """Add ``count`` rows (F = ``full``, R = False) without copying the bitmaps
        every batch (capacity grows geometrically)."""
        need = self.n + count
        if need > self._F.size:
            cap = max(need, self._F.size + self._F.size // 4 + 4096)
            for name in ("_F", "_R"):
                grown = np.zeros(cap, dtype=bool)
                grown[:self.n] = getattr(self, name)[:self.n]
                setattr(self, name, grown)
        self._F[self.n:need] = full
        self._R[self.n:need] = False
        self.n = need

    # ------------------------------------------------------------------ persistence
    @classmethod
    def load(cls, store, p, rel, writer_options, headroom=0, expected=None):
        """The partition after the commit that references structure file ``rel``
        (None: empty) with checksum ``expected`` (recorded in that commit),
        with room for ``headroom`` more rows in its bitmaps."""
        part = cls(store, p, writer_options)
        if rel is None:
            return part
        # read whole and verified (remote: one request; by pieces, three or four)
        data = store.read_verified(rel, expected)
        head, base = read_struct_header(store, rel, data)
        n = head["rows"]
        f_at, f_len = head["F"]
        r_at, r_len = head["R"]
        bits = np.frombuffer(data, dtype=np.uint8, count=f_len + r_len, offset=base + f_at)
        F = _unpack(bits[:f_len], n + headroom)
        part.all_mode = bool(head["all_mode"])
        part.extra_rows = np.array(head["extra_rows"], dtype=np.int64)
        if r_len or not n:
            R = _unpack(bits[r_at - f_at:], n + headroom)
        elif part.all_mode:                 # S = the full items and the realized partial ones
            R = F.copy()
            R[part.extra_rows] = True
        else:
            raise TBSError(f"corrupt STATE: {rel} has no R bitmap")
        part._set(F, R)
        part.n = n
        part.partials = {int(a): int(b) for a, b in zip(head["pids"], head["prows"])}
        part.realized = int(head["realized"])
        part.sources = head["sources"]
        if sum(s["rows"] for s in part.sources) != n:
            raise TBSError(f"corrupt STATE: {rel} does not match its sources")
        # the other sources' keys, wanted as soon as rows leave S (remote: read them together)
        store.prefetch(sorted({s["keys"] for s in part.sources} - {rel}))
        keys_at, count = head["keys"]       # the keys this file holds, already read
        for i, source in enumerate(part.sources):
            if source["keys"] == rel and source["rows"] == count:
                part._keys[i] = np.frombuffer(data, dtype="<i8", count=count,
                                              offset=base + keys_at)
        if int(np.count_nonzero(R)) != part.realized:
            raise TBSError(f"corrupt STATE: {rel} marks {int(np.count_nonzero(R))} rows as "
                           f"sampled, its header {part.realized}")
        return part

    def save(self, rel):
        """Write the structure file ``rel``; returns its checksum (for the commit)."""
        pids = sorted(self.partials)
        fresh = np.zeros(0, dtype=np.int64) if self._fresh is None else self._fresh
        head = {"rows": int(self.F.size), "pids": pids, "prows": [self.partials[i] for i in pids],
                "sources": self.sources, "all_mode": self.all_mode,
                "extra_rows": self.extra_rows.tolist(), "realized": self.realized}
        r_bits = None if self.all_mode else np.packbits(self.R)   # (all mode: R = F + extra_rows)
        written = self.store.write_bytes(rel, struct_bytes(head, np.packbits(self.F), r_bits,
                                                           fresh))
        self._fresh = None
        return written

    # ------------------------------------------------------------------ rows
    def offsets(self):
        out = [0]
        for s in self.sources:
            out.append(out[-1] + s["rows"])
        return out

    def keys(self, rows):
        """Keys of the given global rows (in any order; the keys follow it).
        Each source's keys are mapped once per task.  The rows are grouped by
        source: sorted rows as they are; almost sorted ones (evictions drawn
        by skips) by a merge sort, which runs through sorted stretches; rows
        in random order by a counting sort on the source index (numpy's radix
        sort of 16-bit values) -- for 57,000 rows in 10 sources 0.8 ms instead
        of 3.3 for sorting them, for 370,000 almost sorted ones 5 ms against
        0.5."""
        rows = np.asarray(rows, dtype=np.int64)
        got = np.empty(rows.size, dtype=np.int64)
        if not rows.size:
            return got
        off = np.asarray(self.offsets(), dtype=np.int64)
        descents = _descents(rows)
        if descents == 0:
            order, srt, cuts = None, rows, np.searchsorted(rows, off)
        elif descents * _ALMOST < rows.size:
            order = np.argsort(rows, kind="stable")
            srt = rows[order]
            cuts = np.searchsorted(srt, off)
        else:
            src = np.searchsorted(off[1:-1], rows, side="right")
            src = src.astype(np.int16 if len(self.sources) < (1 << 15) else np.int64, copy=False)
            order = np.argsort(src, kind="stable")
            srt = rows[order]
            cuts = np.concatenate([[0], np.cumsum(np.bincount(src, minlength=len(self.sources)))])
        for i in range(len(self.sources)):
            a, b = int(cuts[i]), int(cuts[i + 1])
            if a == b:
                continue
            if i not in self._keys:
                self._keys[i] = self._source_keys(self.sources[i])
            got[a:b] = self._keys[i][srt[a:b] - off[i]]
        if order is None:
            return got
        out = np.empty(rows.size, dtype=np.int64)
        out[order] = got
        return out

    def _source_keys(self, source):
        """The keys of a source: the tail of the structure file that wrote it
        (no header to parse: this runs for every source a batch touches)."""
        keys, first = self.store.map_tail(source["keys"], source["rows"], len(_MAGIC),
                                          source.get("keys_sum"))
        if first != _MAGIC:
            raise damaged(self.store.uri(source["keys"]), "is not a partition structure file")
        return keys

    def group_ranges(self, mapping):
        """{group id: [(lo, hi), ...]} in global rows, from the source segments."""
        off = self.offsets()
        ranges = {}
        for i, s in enumerate(self.sources):
            for batch, lo, hi in s["segs"]:
                mine = ranges.setdefault(group_of(mapping, batch), [])
                if mine and mine[-1][1] == off[i] + lo:          # adjacent: one range
                    mine[-1] = (mine[-1][0], off[i] + hi)
                else:
                    mine.append((off[i] + lo, off[i] + hi))
        return ranges

    def group_rows(self, ranges, gid, only_group=False):
        """The full rows of group ``gid``.  ``only_group``: it is the only group
        (rows outside the source segments -- copies -- are never full), so
        one pass over F without slicing and concatenating."""
        if only_group:
            return np.flatnonzero(self.F)
        parts = []
        for lo, hi in ranges.get(gid, ()):
            rows = np.flatnonzero(self.F[lo:hi])
            rows += lo
            parts.append(rows)
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def read(self, rows, label):
        """The data (all columns and keys) of the given global rows, in that order."""
        rows = np.asarray(rows, dtype=np.int64)
        order = np.argsort(rows, kind="stable")
        parts = self.read_parts(rows[order], label)
        if not parts:
            return None
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size)
        return stack(parts, inverse)

    def read_parts(self, rows, label):
        """The data of the given global rows (sorted), in that order, as parts for :func:`stack`."""
        off = self.offsets()
        parts = []
        for i, s in enumerate(self.sources):
            lo, hi = np.searchsorted(rows, [off[i], off[i + 1]])
            if lo < hi:
                parts += _source_parts(self.store, s, rows[lo:hi] - off[i], label)
        return parts

    # ------------------------------------------------------------------ one batch
    def apply(self, key, plan, batch, bounds, op, expect, salt, compact):
        """Apply the driver's decisions for one batch (steps 1-6 above); returns its summary."""
        k = plan["k"]
        p = self.p
        label = f"batch {batch['name']} (partition {p})"
        rng = batch_generator(key, k, STREAM_APPLY, sub=p)
        touched = self._evict(rng, plan["mapping"], op["moves"])
        chosen, ppos, new_keys, columns = self._read_new(rng, k, batch, bounds, op, label)
        base = self._add_new(chosen, op["take_pid"], ppos)
        pid_rows = self._settle_partials(op["partials"])
        full_now = self._count_full(k, expect)
        left, enter = self._realize(op["out"], touched, pid_rows, base, new_keys, salt)
        in_df, in_keys, out_keys = self._delta_tables(base, columns, new_keys, left, enter, label)
        in_sum, out_sum = self._write_delta(k, in_df, out_keys)
        n_new = int(chosen.size)
        n_copies = self._add_source(k, in_df, in_keys, n_new, in_sum)
        summary = {"k": k, "p": p, "in": delta_in(k, p), "in_rows": len(in_df), "new": n_new,
                   "copies": n_copies, "out": delta_out(k, p), "out_rows": int(out_keys.size),
                   "sums": {delta_in(k, p): in_sum, delta_out(k, p): out_sum}, "snapshot": None}
        if compact:                                         # step 6
            summary["snapshot"] = self.compact(k, label)
        struct_sum = self.save(struct_file(k, p))
        summary.update(struct=struct_file(k, p), struct_sum=struct_sum, files=self.files(),
                       full=full_now, realized=self.realized,
                       stored=full_now + len(self.partials))
        return summary

    def _evict(self, rng, mapping, moves):
        """Step 1: clear the full items each group moves out here; returns the rows changed."""
        ranges = self.group_ranges(mapping)
        single = mapping["mode"] == "single"
        touched = []                       # old rows whose F may change in this batch
        for gid, n_exp, moved, pid in moves:
            rows = self.group_rows(ranges, gid, single)
            if rows.size != n_exp:
                raise TBSError(f"corrupt STATE: partition {self.p} holds {rows.size} full items "
                               f"of group {gid}, the driver expects {n_exp}")
            plan_p = partition_plan(n_exp, moved, int(pid >= 0))
            mode, pos, ppos = select_for_downsample(rng, n_exp, plan_p)
            if mode == "remove":
                gone = rows[pos]
                self.F[gone] = False
                touched.append(gone)                # groups are disjoint: no row twice
            else:
                self.F[rows] = False
                self.F[rows[pos]] = True
                touched.append(rows)
            if pid >= 0:
                self.partials[pid] = int(rows[ppos])
        return touched

    def _read_new(self, rng, k, batch, bounds, op, label):
        """Step 2: choose and read the slice's rows that enter: (rows, partial's, keys, columns)."""
        lo, hi = bounds
        take, tp = op["take"], int(op["take_pid"] >= 0)
        if take + tp:
            chosen, ppos = _choose_rows(rng, hi - lo, take, tp)
        else:
            chosen, ppos, hi = np.zeros(0, dtype=np.int64), None, lo
        df = read_rows(batch["files"], batch["row_groups"], lo, hi, label)
        new_keys = (np.int64(k) << 32) | (chosen + lo).astype(np.int64)
        columns = {name: df[name].to_numpy()[chosen] for name in df.columns}
        if not chosen.size:
            # an empty batch file may type text columns as float: keep the STATE's types
            for name in self.options.get("object_encoding") or ():
                if name in columns and columns[name].dtype != object:
                    columns[name] = columns[name].astype(object)
        columns[KEY_COLUMNS[0]], columns[KEY_COLUMNS[1]] = split_keys(new_keys)
        return chosen, ppos, new_keys, columns

    def _add_new(self, chosen, take_pid, ppos):
        """Append the new rows as full items (the one at ``ppos``: partial); returns the first."""
        base = self.n
        self._append(int(chosen.size), True)
        if take_pid >= 0:
            prow = base + int(np.searchsorted(chosen, ppos))
            self.F[prow] = False
            self.partials[take_pid] = prow
        return base

    def _settle_partials(self, actions):
        """Step 3: promote to full or drop the partial items named; returns their rows."""
        pid_rows = []                      # rows of partial items promoted or dropped
        for pid, action in actions:
            if pid not in self.partials:
                raise TBSError(f"corrupt STATE: partition {self.p} has no partial item {pid}")
            row = self.partials.pop(pid)
            pid_rows.append(row)
            if action == "full":
                self.F[row] = True
        return pid_rows

    def _count_full(self, k, expect):
        """The number of full items after batch ``k``, checked against the driver's ``expect``."""
        full_now = int(np.count_nonzero(self.F))
        if full_now != expect:
            raise TBSError(f"corrupt STATE: partition {self.p} holds {full_now} full items after "
                           f"batch {k}, the driver expects {expect}")
        return full_now

    def _realize(self, out, touched, pid_rows, base, new_keys, salt):
        """Step 4: set R to S_k; returns the old rows that left S and entered it."""
        extra = np.array([self.partials[i] for i in out["extra"]], dtype=np.int64)
        union = np.array([self.partials[i] for i in out["union"]], dtype=np.int64)
        special = np.concatenate([extra, union])
        if out["mode"] == "all" and self.all_mode:
            left, enter = self._realize_changes(touched, pid_rows, special, base)
        else:
            left, enter = self._realize_anew(out, extra, union, base, new_keys, salt)
        self.all_mode = out["mode"] == "all"
        self.extra_rows = special[~self.F[special]] if special.size else np.zeros(0, dtype=np.int64)
        return left, enter

    def _realize_changes(self, touched, pid_rows, special, base):
        """R in "all" mode from the rows that can change (no pass over the bitmaps)."""
        # In "all" mode S is the full items plus some partial items, so only rows
        # touched above, partial items and the new rows can change: O(changes).
        small = np.unique(np.concatenate([np.array(pid_rows, dtype=np.int64), special,
                                          self.extra_rows]))
        lefts, enters = [], []
        for cand in (np.concatenate(touched) if touched else small[:0], small[small < base]):
            # (a row of both lists changes in the first)
            now = self.F[cand] | np.isin(cand, special)
            was = self.R[cand]
            lefts.append(cand[was & ~now])
            enters.append(cand[now & ~was])
            self.R[cand] = now
        left, enter = np.concatenate(lefts), np.concatenate(enters)
        self.R[base:] = self.F[base:]
        self.R[special[special >= base]] = True
        self.realized += enter.size - left.size + int(np.count_nonzero(self.R[base:]))
        return left, enter

    def _realize_anew(self, out, extra, union, base, new_keys, salt):
        """R recomputed over all rows (out of "all" mode, or capped by priority at a count)."""
        if out["mode"] == "all":
            R = self.F.copy()
            R[union] = True
        else:
            cand = np.concatenate([np.flatnonzero(self.F), union])
            c = out["count"]
            R = np.zeros(self.F.size, dtype=bool)
            if c >= cand.size:
                R[cand] = True
            elif c > 0:
                pri = priorities(self._all_keys(cand, base, new_keys), salt)
                R[cand[np.argpartition(pri, c - 1)[:c]]] = True
        R[extra] = True
        old = self.R[:base]
        changed = np.flatnonzero(old != R[:base])
        left = changed[old[changed]]                        # was in S, is not
        enter = changed[R[changed]]                         # was not in S, is again
        self.R[:] = R
        self.realized = int(np.count_nonzero(R))
        return left, enter

    def _delta_tables(self, base, columns, new_keys, left, enter, label):
        """Step 5: the delta: ``in`` (new rows, copies re-entering S), its keys, ``out`` keys."""
        import pandas as pd
        unreal = np.flatnonzero(~self.R[base:])
        out_keys = np.concatenate([self.keys(left), new_keys[unreal]])
        if enter.size:
            enter = np.sort(enter)
            in_df = stack([columns] + self.read_parts(enter, label))
            in_keys = np.concatenate([new_keys, self.keys(enter)])
        else:
            in_df, in_keys = pd.DataFrame(columns, copy=False), new_keys
        return in_df, in_keys, out_keys

    def _write_delta(self, k, in_df, out_keys):
        """Write the delta of batch ``k``: ``in_df`` and the ``out`` keys;
        returns the two files' checksums."""
        import pandas as pd
        ob, orow = split_keys(out_keys)
        out_df = pd.DataFrame({KEY_COLUMNS[0]: ob, KEY_COLUMNS[1]: orow}, copy=False)
        store = self.store
        return (store.write_parquet(delta_in(k, self.p), in_df, **self.options),
                store.write_parquet(delta_out(k, self.p), out_df, row_group_offsets=ROW_GROUP,
                                    stats=False))

    def _add_source(self, k, in_df, in_keys, n_new, in_sum):
        """Make the delta's ``in`` file (checksum ``in_sum``) the newest source
        (copies not full); returns the copies."""
        n_copies = len(in_df) - n_new
        in_keys = np.ascontiguousarray(in_keys, dtype="<i8")
        self.sources.append({"path": delta_in(k, self.p), "sum": in_sum,
                             "keys": struct_file(k, self.p), "keys_sum": checksum(in_keys),
                             "rows": len(in_df), "segs": [[k, 0, n_new]] if n_new else []})
        self._keys[len(self.sources) - 1] = self._fresh = in_keys
        self._append(n_copies, False)
        return n_copies

    def _all_keys(self, rows, base, new_keys):
        out = np.empty(rows.size, dtype=np.int64)
        old = rows < base
        out[old] = self.keys(rows[old])
        out[~old] = new_keys[rows[~old] - base]
        return out

    def files(self):
        return sorted({s["path"] for s in self.sources} | {s["keys"] for s in self.sources})

    def compact(self, k, label):
        """Rewrite the partition's items as one snapshot source (ordered by
        arrival batch), dropping dead rows and copies."""
        live = self.F.copy()
        for row in self.partials.values():
            live[row] = True
        live |= self.R
        rows = np.flatnonzero(live)
        keys = self.keys(rows)
        order = np.argsort(keys >> 32, kind="stable")
        rows, keys = rows[order], keys[order]
        df = self.read(rows, label)
        if df is None:
            df = empty_frame(self.store, self.sources, label)
        df = df.drop(columns=[IN_SAMPLE], errors="ignore")
        df[IN_SAMPLE] = self.R[rows]
        path = snapshot_file(k, self.p)
        written = self.store.write_parquet(path, df, **self.options)
        batches = keys >> 32
        cuts = np.flatnonzero(np.diff(batches)) + 1
        starts = np.concatenate([[0], cuts]).astype(np.int64)
        ends = np.concatenate([cuts, [rows.size]]).astype(np.int64)
        segs = ([[int(batches[a]), int(a), int(b)] for a, b in zip(starts, ends)]
                if rows.size else [])
        position = np.full(self.F.size, -1, dtype=np.int64)
        position[rows] = np.arange(rows.size)
        self.partials = {pid: int(position[row]) for pid, row in self.partials.items()}
        self.extra_rows = position[self.extra_rows]
        self._set(self.F[rows], self.R[rows])
        keys = np.ascontiguousarray(keys, dtype="<i8")
        self.sources = [{"path": path, "sum": written, "keys": struct_file(k, self.p),
                         "keys_sum": checksum(keys), "rows": int(rows.size), "segs": segs}]
        self._keys = {0: keys}
        self._fresh = keys
        return path


def _choose_rows(rng, size, take, with_partial):
    """The rows of a ``size``-row slice that enter (ascending), and the partial one's position."""
    plan = partition_plan(size, size - take, with_partial)
    mode, pos, ppos = select_for_downsample(rng, size, plan)
    if mode == "keep":
        return _ascending(np.concatenate([pos, [ppos]]) if with_partial else pos, size), ppos
    mask = np.ones(size, dtype=bool)
    mask[pos] = False
    if with_partial:
        mask[ppos] = True
    return np.flatnonzero(mask), ppos


def _unpack(bits, size):
    """A packed bitmap as ``size`` bools, zero-padded.  (numpy's unpackbits
    pads with zeros, except that for an empty input it returns uninitialized
    memory -- numpy 2.4 -- hence the special case.)"""
    if not bits.size:
        return np.zeros(size, dtype=bool)
    return np.unpackbits(bits, count=size).view(bool)


_ALMOST = 64  # fewer descents than one per this many values: almost sorted (a merge sort is fast)


def _descents(values):
    """How many times ``values`` goes down from one element to the next."""
    return int(np.count_nonzero(values[1:] < values[:-1]))


def _ascending(pos, size):
    """Distinct positions in ``range(size)`` in ascending order: a merge sort
    when they come almost sorted (drawn by skips: it runs through the sorted
    stretches), else a pass over a mask (random order: sorting 37,000 of
    250,000 costs 2 ms, the mask 0.2)."""
    pos = np.asarray(pos, dtype=np.int64)
    if _descents(pos) * _ALMOST < pos.size:
        return np.sort(pos, kind="stable")
    mask = np.zeros(size, dtype=bool)
    mask[pos] = True
    return np.flatnonzero(mask)


_MAGIC = b"SGTBSP1\n"


def struct_bytes(head, f_bits, r_bits, keys):
    """A structure file: magic, the length of a JSON header, the header, then
    the F bitmap, the R bitmap (packed bits; absent -- None -- when S is every
    full item plus the realized partial ones, which the header lists) and the
    keys of the source written with this batch (little-endian int64), 8-byte
    aligned.  Raw arrays so that a later batch can read the bitmaps by offset,
    and one source's keys -- the file's last ``8 * rows`` bytes -- without
    parsing the header."""
    f_len = int(f_bits.size)
    r_len = 0 if r_bits is None else int(r_bits.size)
    keys_at = (f_len + r_len + 7) // 8 * 8
    head = dict(head, F=[0, f_len], R=[f_len, r_len], keys=[keys_at, int(keys.size)])
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-(len(_MAGIC) + 8 + len(text)) % 8)
    pad = b"\0" * (keys_at - f_len - r_len)
    return b"".join([_MAGIC, len(text).to_bytes(8, "little"), text, f_bits.tobytes(),
                     b"" if r_bits is None else r_bits.tobytes(), pad,
                     np.ascontiguousarray(keys, dtype="<i8").tobytes()])


def read_struct_header(store, rel, data):
    """(header, offset of the arrays) of a structure file from its bytes ``data``."""
    if data[:len(_MAGIC)] != _MAGIC:
        raise damaged(store.uri(rel), "is not a partition structure file")
    size = int.from_bytes(data[len(_MAGIC):len(_MAGIC) + 8], "little")
    start = len(_MAGIC) + 8
    try:
        head = json.loads(data[start:start + size])
    except ValueError:
        head = None
    if not isinstance(head, dict) or start + size > len(data):
        raise damaged(store.uri(rel), "has no readable header")
    return head, start + size


def _source_parts(store, source, local_rows, label):
    """Rows (local indices, sorted) of one source as parts for :func:`stack`,
    only from the row groups that hold them -- by offset where the layout
    allows (:mod:`.points`; the layout is found on the first read and kept in
    ``source["points"]``, which the structure file saves), else decoding the
    row group; without the snapshot's ``_sg_in_sample`` column."""
    path = source["path"]
    store.verify(path, source.get("sum"))       # (DamagedStateError: as it is)
    fd = pf = None
    try:
        found = None
        if store.local:
            fd = os.open(store.path(path), os.O_RDONLY)
            if "points" not in source:
                source["points"] = layout(fd, skip=(IN_SAMPLE,))
            found = source["points"]
        if found is None:
            pf = store.open_parquet(path, source.get("sum"))
            columns = [c for c in pf.columns if c != IN_SAMPLE]
            counts = [int(rg.num_rows) for rg in pf.row_groups]
        else:
            columns = [name for name, _ in found["columns"]]
            counts = found["rows"]
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        rg_of = np.searchsorted(starts, local_rows, side="right") - 1
        parts = []
        for g in np.unique(rg_of):
            g = int(g)
            sel = local_rows[rg_of == g] - starts[g]
            plan = layout_plan(found, g) if found is not None and sel.size <= POINT_ROWS else None
            if plan is not None:
                parts.append(read_points(fd, plan, sel))
            else:
                if pf is None:
                    pf = store.open_parquet(path, source.get("sum"))
                parts.append(pf[g:g + 1].to_pandas(columns=columns, index=False).take(sel))
    except Exception as exc:
        raise TBSError(f"{label}: cannot read {store.uri(path)} "
                       f"({type(exc).__name__}: {exc})") from None
    finally:
        if fd is not None:
            os.close(fd)
    return parts


def stack(parts, order=None):
    """The rows of ``parts`` (frames, or ``{column: array}`` as read by offset,
    with the same columns) one after the other, then taken in ``order`` if
    given: with numpy alone when every part holds the same numeric numpy
    dtypes (a pandas concat or take costs a few tenths of a millisecond,
    and a batch makes several), else with pandas (which also keeps object
    columns as they are: a frame built from them would infer strings)."""
    import pandas as pd
    dtypes = [{name: values.dtype for name, values in part.items()} if isinstance(part, dict)
              else dict(part.dtypes) for part in parts]
    if all(d == dtypes[0] for d in dtypes) and all(isinstance(t, np.dtype) and t.kind in "biufcmM"
                                                   for t in dtypes[0].values()):
        columns = {}
        for name in dtypes[0]:
            arrays = [part[name] if isinstance(part, dict) else part[name].to_numpy()
                      for part in parts]
            values = arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
            columns[name] = values if order is None else values[order]
        return pd.DataFrame(columns, copy=False)
    frames = [pd.DataFrame(part, copy=False) if isinstance(part, dict) else part for part in parts]
    df = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
    return (df if order is None else df.take(order)).reset_index(drop=True)


def empty_frame(store, sources, label):
    """No rows, with the columns of the partition's sources (item columns and keys)."""
    if not sources:
        raise TBSError(f"{label}: no source files")
    pf = store.open_parquet(sources[0]["path"], sources[0].get("sum"))
    return pf[0:0].to_pandas(index=False).drop(columns=[IN_SAMPLE], errors="ignore")


def run_partition(plan, p, store=None):
    """Process every batch of ``plan`` for partition ``p``; returns one summary per batch.

    This is the whole work of a task, whatever the runner (in-process, mrjob
    mapper, Spark task).  Its files are fsync-ed, then the directories that
    received them -- unless ``store`` is given (the in-process runner shares
    one among its partitions and syncs the directories once, after all)."""
    shared = store is not None
    if not shared:
        store = Store(plan["state"], fsync=plan.get("fsync"))
    headroom = sum(bp["ops"][p]["take"] + 1 for bp in plan["batches"]) + 4096
    part = Partition.load(store, p, plan["structs"][p], plan["writer"], headroom,
                          plan["struct_sums"][p])
    key = int(plan["key"])
    summaries = []
    for bp, batch in zip(plan["batches"], plan["batch_info"]):
        summaries.append(part.apply(key, bp, batch, batch["bounds"][p], bp["ops"][p],
                                    bp["expect"][p], int(plan["salt"]), bp["compact"]))
    if not shared:
        store.sync()
    return summaries
