"""Block-preparation's records in key order, with bounded memory
(:class:`SortSpool`), and the frame format in which records travel and
spill (:class:`ChunkFrames`).

A record is ``((sample, v, bin, h), chunk)``: a chunk of
:func:`jobs.phases.local_sampling` under its key.  The Spark engine's reduce
tasks and the embedded engine order their records here.
"""
import array
import os
import struct
import tempfile

import numpy as np

from samplegen.jobs import fs as fsmod
from samplegen.jobs.blocks import ENTRY_CHARS, SPARSE, EncodedBlock, row_chars


class ChunkFrames:
    """Records ``(key, chunk)`` as one buffer of fixed-width headers and raw
    arrays, read back as views into the buffer (pickle would copy every
    array once more).  Key ``(sample, v, bin, h)``; the chunk's row ids,
    relative positions, sparse row pointers and base64 text, each padded to
    8 bytes."""

    HEAD = struct.Struct("<9q")   # sample, v, bin, h, kind, rows, cols, units, flags
    IDS, POS, NO_TEXT = 1, 2, 4   # NO_TEXT: rows known by id only (the id shuffle)

    def dumps(self, records):
        pieces = [struct.pack("<q", len(records))]
        for key, chunk in records:
            flags = (self.IDS if chunk.row_ids is not None else 0) | \
                (self.POS if chunk.relpos is not None else 0) | \
                (self.NO_TEXT if chunk.kind != SPARSE and chunk.text.shape[1] == 0 else 0)
            pieces.append(self.HEAD.pack(*key, chunk.kind, chunk.rows, chunk.cols,
                                         chunk.text.shape[0], flags))
            arrays = [(chunk.row_ids if flags & self.IDS else None, "<i8"),
                      (chunk.relpos if flags & self.POS else None, "<u8"),
                      (chunk.indptr, "<i8"), (chunk.text, np.uint8)]
            for array_, dtype in arrays:
                if array_ is not None:
                    raw = np.ascontiguousarray(array_, dtype=dtype).reshape(-1).view(np.uint8)
                    pieces.append(memoryview(raw))
                    if raw.size % 8:
                        pieces.append(bytes(8 - raw.size % 8))
        return b"".join(pieces)

    def loads(self, frame):
        view = memoryview(frame)
        (count,), offset = struct.unpack_from("<q", view), 8
        records = []
        for _ in range(count):
            sample, v, bin_, h, kind, rows, cols, units, flags = self.HEAD.unpack_from(view, offset)
            offset += self.HEAD.size
            fields = {}
            for name, present, dtype, n in (("row_ids", flags & self.IDS, "<i8", rows),
                                            ("relpos", flags & self.POS, "<u8", rows),
                                            ("indptr", kind == SPARSE, "<i8", rows + 1)):
                if present:
                    fields[name] = np.frombuffer(view, dtype, n, offset)
                    offset += 8 * n
            width = 0 if flags & self.NO_TEXT else row_chars(cols) if kind != SPARSE \
                else ENTRY_CHARS
            text = np.frombuffer(view, np.uint8, units * width, offset).reshape(units, width)
            offset += -(-units * width // 8) * 8
            records.append(((sample, v, bin_, h), EncodedBlock(kind, rows, cols, text, **fields)))
        return records


#: memory of one held record beyond its arrays: the key tuple, the block and
#: its numpy array objects (measured: about 700 bytes)
RECORD_OVERHEAD = 768


def chunk_bytes(chunk):
    """The memory a held record takes (what map buffers and spools count
    against their budgets)."""
    extra = 0 if chunk.indptr is None else chunk.indptr.nbytes
    return chunk.text.nbytes + 16 * chunk.rows + extra + RECORD_OVERHEAD


class SortSpool:
    """Records ordered by key with bounded memory.

    Records stay in memory while they take at most *budget* bytes
    (:func:`chunk_bytes`); past that the held records are appended to one
    spill file (in *directory*, default the system's temporary directory)
    and only the key, offset and length are kept, as six integers (48 bytes)
    per record in an array, not as Python objects.  :meth:`groups` and
    :meth:`sorted` give every record in key order, reading spilled ones back
    one at a time, so what the consumer holds (re-blocking: one bin) bounds
    the rest.  Keys are ``(sample, v, bin, h)``; equal keys keep arrival
    order.
    """

    FIELDS = 6   # sample, v, bin, h, offset, length
    FRAMES = ChunkFrames()   # the spill file holds one frame per record

    def __init__(self, budget, directory=None):
        self.budget = budget
        self.directory = directory
        self.held, self.held_bytes = [], 0
        self.index = array.array("q")   # FIELDS per spilled record, in arrival order
        self.file = None
        self.spilled_bytes = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def add(self, key, chunk):
        self.held.append((key, chunk))
        self.held_bytes += chunk_bytes(chunk)
        if self.held_bytes > self.budget:
            self._spill()

    def _spill(self):
        if self.file is None:
            self.file = tempfile.TemporaryFile(prefix="samplegen-spool-",
                                               dir=fsmod.scratch_dir(self.directory))
        for key, chunk in self.held:
            frame = self.FRAMES.dumps([(key, chunk)])
            self.file.write(frame)
            length = len(frame)
            self.index.extend((*key, self.spilled_bytes, length))
            self.spilled_bytes += length
        self.held, self.held_bytes = [], 0

    def groups(self):
        """``((sample, v), records)`` for every group, in key order, once
        every record was added.  Each *records* yields the group's
        ``(key, chunk)`` in key order; they are independent of each other, so
        groups may be consumed in any order and from several threads at
        once.  A held record is let go of once it was handed on."""
        spilled = np.frombuffer(self.index, np.int64).reshape(-1, self.FIELDS)
        held, self.held, self.held_bytes = self.held, [], 0
        keys = np.concatenate([spilled[:, :4],
                               np.array([key for key, _ in held], np.int64).reshape(-1, 4)])
        # arrival order (spilled records came first) breaks ties: stable
        order = np.lexsort((np.arange(len(keys)), keys[:, 3], keys[:, 2], keys[:, 1], keys[:, 0]))
        if not len(order):
            return
        if self.file is not None:
            self.file.flush()
        group = keys[order, :2]
        bounds = np.concatenate([[0], np.flatnonzero((group[1:] != group[:-1]).any(axis=1)) + 1,
                                 [len(order)]]).tolist()
        for a, b in zip(bounds[:-1], bounds[1:]):
            yield tuple(group[a].tolist()), self._records(order[a:b], spilled, held)

    def _records(self, order, spilled, held):
        n_spilled = len(spilled)
        for i in order.tolist():
            if i < n_spilled:
                offset, length = spilled[i, 4:].tolist()
                ((key, chunk),) = self.FRAMES.loads(os.pread(self.file.fileno(), length, offset))
                yield key, chunk
            else:
                key, chunk = held[i - n_spilled]
                held[i - n_spilled] = None  # hold nothing already handed on
                yield key, chunk

    def sorted(self):
        """Every record ``(key, chunk)`` in key order (see :meth:`groups`)."""
        for _, records in self.groups():
            yield from records

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None
