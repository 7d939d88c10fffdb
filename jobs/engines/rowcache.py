"""Row sources for the *id shuffle* of the Spark and embedded engines.

In the id shuffle, local-sampling emits each chunk's row ids and relative
positions only, block-preparation moves and sorts those (16 bytes per
occurrence instead of a copy of the row), and streaming-re-block fetches the
rows of every re-blocked block by row id from a :class:`RowIndex`: straight
out of the input's part files, where a dense block's rows are base64 text at
a fixed stride.  The bytes fetched are the bytes the row shuffle carries, so
the samples are the same; what changes is that the data crosses the shuffle
as keys, and the reduce side reads the rows it needs in place.

A :class:`RowIndex` indexes the part files by hopping from block header to
block header (about a hundred bytes read per block, not the rows), which
places row ``i`` of column block ``v`` at a byte offset of a part file.  A
Spark worker process builds one per run from a :class:`RowSource` (what
travels in the task closure); part files that are not local files (HDFS)
are first copied to the executor's scratch directory, once per executor.
The embedded engine builds one for its run and shares it between its
threads.

Memory: when the part files take at most half of the task budget
(``spark.python.worker.memory``; the embedded engine passes the larger of
its budget and the available memory), they are memory-mapped read-only and
rows are gathered from the mapping (the pages are the kernel's page cache,
shared by every worker of the machine, not a copy per process); otherwise
each row is read with one ``preadv`` (in file order), so a task never holds
more than its budget and a half.
"""
import fcntl
import glob
import mmap
import os
import shutil
import tempfile
import threading

import numpy as np

from samplegen.jobs import fs as fsmod
from samplegen.jobs.blocks import DENSE, EncodedBlock, row_chars
from samplegen.jobs.store import scan_part
from samplegen.udfs.errors import InputError

PREFIX = "samplegen-rows-"


def local_dir():
    """The executor's scratch directory (Spark's, else the system's)."""
    return os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or tempfile.gettempdir()


def no_text(block):
    """*block* (dense, encoded) without its values: rows known by id only."""
    return block.replace(text=np.empty((block.rows, 0), np.uint8))


def keys_only(layout):
    """The dense block of payload *layout* (:func:`jobs.blocks.payload_layout`)
    without reading it: its shape, rows known by id only."""
    return EncodedBlock(DENSE, layout.rows, layout.cols, np.empty((layout.rows, 0), np.uint8))


class RowSource:
    """What a task needs to find the input's rows (picklable: it travels in
    the task closure)."""

    def __init__(self, parts, rows, cols, block_size, token):
        self.parts = list(parts)
        self.rows, self.cols, self.block_size = int(rows), int(cols), int(block_size)
        self.token = token

    def n_vblocks(self):
        return -(-self.cols // self.block_size)

    def width(self, v):
        return row_chars(min(self.block_size, self.cols - v * self.block_size))

    def fetch(self, v, blocks, budget):
        """``(h, block)`` of id-only *blocks* with their rows' text filled in
        (:meth:`RowIndex.fetch`), from this worker's index of the run."""
        return self._index().fetch(v, blocks, budget)

    def _index(self):
        index = _INDEXES.get(self.token)
        if index is None:
            for token in list(_INDEXES):   # a previous run's
                drop(token)
            index = _INDEXES[self.token] = RowIndex(self, self._local_parts())
        return index

    def _local_parts(self):
        """Local paths of the part files: the files themselves, or this
        executor's copies of them (made once, by whichever task comes first)."""
        if all(fsmod.is_local(p) and os.path.isfile(fsmod.local_path(p)) for p in self.parts):
            return [fsmod.local_path(p) for p in self.parts]
        copies = [os.path.join(local_dir(), f"{PREFIX}{self.token}-p{i}")
                  for i in range(len(self.parts))]
        done = os.path.join(local_dir(), f"{PREFIX}{self.token}.done")
        if os.path.exists(done):
            return copies
        with open(os.path.join(local_dir(), f"{PREFIX}{self.token}.lock"), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not os.path.exists(done):
                for part, copy in zip(self.parts, copies):
                    with fsmod.get_fs(part).open_read(part) as src, \
                            open(copy + ".tmp", "wb") as dst:
                        shutil.copyfileobj(src, dst, 8 << 20)
                    os.replace(copy + ".tmp", copy)
                with open(done, "wb"):
                    pass
        return copies


class RowIndex:
    """Where every input row's text is: for column block ``v`` and block row
    ``h``, the part file and byte offset of the block's first row.  *source*
    (a :class:`RowSource`) gives the matrix's shape; *paths* are local part
    files.  Threads may share an index."""

    def __init__(self, source, paths):
        self.source, self.paths = source, paths
        self._lock = threading.Lock()   # the mappings and descriptors, opened on first use
        n_h = -(-source.rows // source.block_size)
        self.part = [np.full(n_h, -1, np.int32) for _ in range(source.n_vblocks())]
        self.start = [np.full(n_h, -1, np.int64) for _ in range(source.n_vblocks())]
        self.size = sum(os.path.getsize(p) for p in paths)
        self._windows, self._mappings, self._fds = {}, {}, {}
        for p, path in enumerate(paths):
            self._scan(p, path)

    def _scan(self, p, path):
        src = self.source
        for h, v, offset, _, payload, layout in scan_part(path):
            if layout.kind != DENSE \
                    or not (0 <= v < src.n_vblocks() and 0 <= h < self.start[v].size) \
                    or layout.rows != min(src.block_size, src.rows - h * src.block_size) \
                    or row_chars(layout.cols) != src.width(v):
                raise InputError(f"corrupt block ({h}, {v}) in {path} at byte {offset}: not a "
                                 "dense block of this matrix")
            if self.start[v][h] >= 0:
                raise InputError(f"corrupt input: block ({h}, {v}) appears twice ({path})")
            self.part[v][h], self.start[v][h] = p, payload + layout.text

    def fetch(self, v, blocks, budget):
        """``(h, block)`` of id-only *blocks* with their rows' text filled in,
        from memory-mapped part files when they take at most half of *budget*
        bytes, else read row by row."""
        width = self.source.width(v)
        mapped = self.maps(budget)
        for h, block in blocks:
            parts, offsets = self.locate(v, block.row_ids, width)
            text = self.gather(parts, offsets, width) if mapped else \
                self.read(parts, offsets, width)
            yield h, block.replace(text=text)

    def maps(self, budget):
        """Whether rows come from memory-mapped part files under *budget*."""
        return self.size <= budget // 2

    def locate(self, v, row_ids, width):
        """``(part, byte offset)`` of each row of *row_ids* in column block *v*."""
        ids = np.asarray(row_ids, np.int64)
        h = ids // self.source.block_size
        start = self.start[v][h]
        if start.size and start.min() < 0:
            raise InputError(f"row {int(ids[start < 0][0])} is not in the input's part files")
        return self.part[v][h], start + (ids - h * self.source.block_size) * width

    def gather(self, parts, offsets, width):
        """The rows at *offsets* from memory-mapped part files."""
        first = int(parts[0]) if parts.size else 0
        if parts.size == 0 or (parts == first).all():
            rows = self._window(first, width)[offsets]
        else:
            rows = np.empty(offsets.size, self._window(first, width).dtype)
            for p in np.flatnonzero(np.bincount(parts)).tolist():
                mine = np.flatnonzero(parts == p)
                rows[mine] = self._window(p, width)[offsets[mine]]
        return rows.view(np.uint8).reshape(offsets.size, width)

    def mapping(self, p):
        """Part file *p*, memory-mapped read-only, as an array of bytes (one
        mapping per file, shared by the threads)."""
        data = self._mappings.get(p)
        if data is None:
            with self._lock:
                data = self._mappings.get(p)
                if data is None:
                    with open(self.paths[p], "rb") as f:
                        data = np.frombuffer(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ),
                                             np.uint8)
                    self._mappings[p] = data
        return data

    def _window(self, p, width):
        """Part file *p* as a read-only array whose item ``o`` is the *width*
        bytes at offset ``o``: one item per row, so that gathering rows
        copies each as one piece."""
        window = self._windows.get((p, width))
        if window is None:
            data = self.mapping(p)
            window = np.ndarray((max(0, data.size - width + 1),), np.dtype((np.void, width)),
                                buffer=data, strides=(1,))
            self._windows[(p, width)] = window
        return window

    def read(self, parts, offsets, width):
        """The rows at *offsets*, one ``preadv`` each, in file order."""
        text = np.empty((offsets.size, width), np.uint8)
        order = np.lexsort((offsets, parts))
        with self._lock:
            for p in np.unique(parts).tolist():
                if p not in self._fds:
                    self._fds[p] = os.open(self.paths[p], os.O_RDONLY)
        fds = self._fds
        for i, p, offset in zip(order.tolist(), parts[order].tolist(), offsets[order].tolist()):
            if os.preadv(fds[p], [text[i]], offset) != width:
                raise InputError(f"part file {self.paths[p]} is truncated")
        return text

    def close(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._windows.clear()
        self._mappings.clear()


#: this worker process's index of the current run: token -> RowIndex
_INDEXES = {}


def drop(token):
    """Forget run *token*'s index and remove this executor's copies (best effort)."""
    index = _INDEXES.pop(token, None)
    if index is not None:
        index.close()
    for path in glob.glob(os.path.join(local_dir(), f"{PREFIX}{token}*")):
        try:
            os.remove(path)
        except OSError:
            pass
