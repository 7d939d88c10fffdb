"""A reduce task's records in key order, with bounded memory (:class:`SortSpool`)."""
import array
import os
import tempfile

import numpy as np

from .shuffle import ChunkFrames, chunk_bytes


class SortSpool:
    """A reduce task's records, ordered by key with bounded memory.

    Records stay in memory while their rows take at most *budget* bytes;
    past that the buffer is appended to one local spill file (in
    ``$SPARK_LOCAL_DIRS``) and only the key, offset and length are kept, as
    six integers (48 bytes) per record in an array, not as Python objects.
    :meth:`sorted` yields every record in key order, reading spilled ones back
    one at a time, so what the consumer holds (re-blocking: one bin) bounds
    the rest.  Keys are ``(sample, v, bin, h)``; equal keys keep arrival order.
    """

    FIELDS = 6   # sample, v, bin, h, offset, length
    FRAMES = ChunkFrames()   # the spill file holds one frame per record

    def __init__(self, budget):
        self.budget = budget
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
            local = os.environ.get("SPARK_LOCAL_DIRS", "").split(",")[0] or None
            self.file = tempfile.TemporaryFile(prefix="samplegen-spool-", dir=local)
        for key, chunk in self.held:
            frame = self.FRAMES.dumps([(key, chunk)])
            self.file.write(frame)
            length = len(frame)
            self.index.extend((*key, self.spilled_bytes, length))
            self.spilled_bytes += length
        self.held, self.held_bytes = [], 0

    def sorted(self):
        spilled = np.frombuffer(self.index, np.int64).reshape(-1, self.FIELDS)
        held, self.held = self.held, []
        keys = np.concatenate([spilled[:, :4],
                               np.array([key for key, _ in held], np.int64).reshape(-1, 4)])
        # arrival order (spilled records came first) breaks ties: stable
        order = np.lexsort((np.arange(len(keys)), keys[:, 3], keys[:, 2], keys[:, 1], keys[:, 0]))
        if self.file is not None:
            self.file.flush()
        n_spilled = len(spilled)
        for i in order.tolist():
            if i < n_spilled:
                sample, v, bin_, h, offset, length = spilled[i].tolist()
                ((key, chunk),) = self.FRAMES.loads(os.pread(self.file.fileno(), length,
                                                             offset))
                yield key, chunk
            else:
                key, chunk = held[i - n_spilled]
                held[i - n_spilled] = None  # hold nothing already handed on
                yield key, chunk

    def close(self):
        if self.file is not None:
            self.file.close()
            self.file = None

