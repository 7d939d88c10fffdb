"""Row sources for the *id shuffle* of the Spark engine.

In the id shuffle, local-sampling emits each chunk's row ids and relative
positions only, block-preparation moves and sorts those (16 bytes per
occurrence instead of a copy of the row), and streaming-re-block fetches the
rows of every re-blocked block by row id from a :class:`RowSource`: the
input's rows as base64 text at a fixed stride (row ``i`` of column block
``v`` at ``i * row_chars(cols of v)``), read from the input's part files.
The bytes fetched are the bytes the row shuffle carries, so the samples are
the same; what changes is that the data crosses the shuffle as keys, and the
reduce side reads the input once more (once per worker process, or once per
executor).

Memory: when the input's rows take at most half of the task budget
(``spark.python.worker.memory``), a worker process holds them in memory for
the run; otherwise they go to files in the executor's scratch directory
(built once per executor, one pass over the input) and rows are read from
them one by one, so a task never holds more than its budget and a half.
"""
import fcntl
import glob
import os
import tempfile

import numpy as np

from udfs.errors import InputError

from . import fs as fsmod
from .blocks import DENSE, EncodedBlock, row_chars, split_line

PREFIX = "samplegen-rows-"


def local_dir():
    """The executor's scratch directory (Spark's, else the system's)."""
    return os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or tempfile.gettempdir()


def no_text(block):
    """*block* (dense, encoded) without its values: rows known by id only."""
    return block.replace(text=np.empty((block.rows, 0), np.uint8))


class RowSource:
    """What a task needs to build or open the row caches of one run
    (picklable: it travels in the task closure)."""

    def __init__(self, parts, rows, cols, block_size, token):
        self.parts = list(parts)
        self.rows, self.cols, self.block_size = int(rows), int(cols), int(block_size)
        self.token = token

    def n_vblocks(self):
        return -(-self.cols // self.block_size)

    def width(self, v):
        return row_chars(min(self.block_size, self.cols - v * self.block_size))

    def path(self, v):
        return os.path.join(local_dir(), f"{PREFIX}{self.token}-v{v}")

    def fetch(self, v, blocks, budget):
        """``(h, block)`` of id-only *blocks* with their rows' text filled in.

        When the input's rows take at most half of *budget* bytes, this
        worker process holds them in memory (every column block, read from
        the part files in one pass per process and run); otherwise rows are
        read one by one (in file order) from this executor's cache file."""
        table = self._table(v, budget)
        if table is not None:
            for h, block in blocks:
                yield h, block.replace(text=table[block.row_ids])
            return
        self._ensure_files()
        width = self.width(v)
        fd = os.open(self.path(v), os.O_RDONLY)
        try:
            for h, block in blocks:
                ids = np.asarray(block.row_ids, np.int64)
                text = np.empty((ids.size, width), np.uint8)
                order = np.argsort(ids, kind="stable")
                for i, row in zip(order.tolist(), ids[order].tolist()):
                    if os.preadv(fd, [text[i]], row * width) != width:
                        raise InputError(f"row cache {self.path(v)} is truncated")
                yield h, block.replace(text=text)
        finally:
            os.close(fd)

    def _table(self, v, budget):
        widths = [self.width(w) for w in range(self.n_vblocks())]
        if self.rows * sum(widths) > budget // 2:   # a worker may come to hold every column block
            return None
        if (self.token, v) not in _TABLES:
            _TABLES.clear()   # a previous run's rows
            tables = [np.empty((self.rows, width), np.uint8) for width in widths]
            for w, start, text in self._blocks():   # one pass over the input
                tables[w][start:start + text.shape[0]] = text
            _TABLES.update(((self.token, w), table) for w, table in enumerate(tables))
        return _TABLES[(self.token, v)]

    def _blocks(self):
        """``(v, first row, text)`` of every input block."""
        for part in self.parts:
            with fsmod.get_fs(part).open_read(part) as src:
                for line in src:
                    h, v, payload = split_line(line)
                    block = EncodedBlock.parse(payload, verify=False)  # the map checked the CRC
                    start = h * self.block_size
                    if block.kind != DENSE or v >= self.n_vblocks() or \
                            start + block.rows > self.rows or block.text.shape[1] != self.width(v):
                        raise InputError(f"corrupt block ({h}, {v}) in {part}: not a dense "
                                         "block of this matrix")
                    yield v, start, block.text

    def _ensure_files(self):
        """Build this executor's cache files (every ``v``) unless another task has."""
        done = os.path.join(local_dir(), f"{PREFIX}{self.token}.done")
        if os.path.exists(done):
            return
        with open(os.path.join(local_dir(), f"{PREFIX}{self.token}.lock"), "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.exists(done):
                return
            tmp = [self.path(v) + ".tmp" for v in range(self.n_vblocks())]
            files = [open(t, "wb") for t in tmp]
            try:
                for f, v in zip(files, range(len(files))):
                    f.truncate(self.rows * self.width(v))
                for v, start, text in self._blocks():  # one pass over the input
                    os.pwrite(files[v].fileno(), np.ascontiguousarray(text), start * self.width(v))
            finally:
                for f in files:
                    f.close()
            for v, t in enumerate(tmp):
                os.replace(t, self.path(v))
            with open(done, "wb"):
                pass


#: this worker process's in-memory input: (run token, v) -> rows' text
_TABLES = {}


def drop(token):
    """Remove this executor's caches of run *token* (best effort)."""
    for key in [k for k in _TABLES if k[0] == token]:
        del _TABLES[key]
    for path in glob.glob(os.path.join(local_dir(), f"{PREFIX}{token}*")):
        try:
            os.remove(path)
        except OSError:
            pass
