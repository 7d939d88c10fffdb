"""Matrix blocks and their text-safe encoding.

A block holds a rectangle of a matrix: dense (row-major float64) or sparse
(CSR: int64 row pointers, int32 column indices, float64 values).  It may also
carry one int64 *row id* per row (which input row it came from) and one uint64
*relative position* per row (its sort key inside a sample, used between the
map and reduce phases).

On disk and between engine phases a block is one field of a text line::

    h_index <TAB> v_index <TAB> base64(header + arrays) <NEWLINE>

so the same files serve Hadoop Streaming (TextInputFormat), Spark
(``textFile``) and Hive (ROW FORMAT DELIMITED).  The 32-byte header is
``<4sBBHIIQI4x``: magic ``SGB1``, kind (0 dense, 1 sparse), flags (1 row ids,
2 relative positions), reserved, rows, cols, nnz, CRC-32 of the array bytes.
Arrays follow in this order: row ids, relative positions, then the dense
values or the CSR ``indptr``, ``indices``, ``values``; all little-endian.
NaN and infinities are stored bit for bit.
"""
import binascii
import struct
import zlib

import numpy as np

from udfs.errors import InputError

MAGIC = b"SGB1"
HEADER = struct.Struct("<4sBBHIIQI4x")
DENSE, SPARSE = 0, 1
KINDS = {"dense": DENSE, "sparse": SPARSE}
KIND_NAMES = {DENSE: "dense", SPARSE: "sparse"}
_ROW_IDS, _RELPOS = 1, 2

_F64, _I64, _U64, _I32 = (np.dtype(t).newbyteorder("<") for t in ("f8", "i8", "u8", "i4"))


class Block:
    """A dense or CSR block, optionally with per-row ids and relative positions."""

    __slots__ = ("kind", "rows", "cols", "data", "indptr", "indices", "values",
                 "row_ids", "relpos")

    def __init__(self, kind, rows, cols, data=None, indptr=None, indices=None,
                 values=None, row_ids=None, relpos=None):
        self.kind = kind
        self.rows = int(rows)
        self.cols = int(cols)
        self.data = data
        self.indptr = indptr
        self.indices = indices
        self.values = values
        self.row_ids = row_ids
        self.relpos = relpos

    # -- construction -------------------------------------------------------
    @classmethod
    def dense(cls, data, row_ids=None, relpos=None):
        data = np.ascontiguousarray(data, dtype=np.float64)
        if data.ndim != 2:
            raise ValueError(f"a dense block must be 2-D, got shape {data.shape}")
        return cls(DENSE, data.shape[0], data.shape[1], data=data,
                   row_ids=row_ids, relpos=relpos)

    @classmethod
    def sparse(cls, rows, cols, indptr, indices, values, row_ids=None, relpos=None):
        return cls(SPARSE, rows, cols, indptr=np.asarray(indptr, np.int64),
                   indices=np.asarray(indices, np.int32),
                   values=np.asarray(values, np.float64), row_ids=row_ids, relpos=relpos)

    @classmethod
    def from_dense(cls, data, kind, row_ids=None):
        """Build a block of *kind* from a dense 2-D array (sparse drops zeros;
        NaN is kept as a stored value)."""
        if kind == DENSE:
            return cls.dense(data, row_ids=row_ids)
        data = np.asarray(data, dtype=np.float64)
        nz_rows, nz_cols = np.nonzero(data)
        indptr = np.zeros(data.shape[0] + 1, np.int64)
        np.cumsum(np.bincount(nz_rows, minlength=data.shape[0]), out=indptr[1:])
        return cls.sparse(data.shape[0], data.shape[1], indptr, nz_cols,
                          data[nz_rows, nz_cols], row_ids=row_ids)

    @classmethod
    def empty(cls, kind, cols):
        if kind == DENSE:
            return cls.dense(np.empty((0, cols)))
        return cls.sparse(0, cols, np.zeros(1, np.int64), np.empty(0, np.int32),
                          np.empty(0, np.float64))

    def replace(self, **changes):
        """A shallow copy with some fields replaced."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return Block(**fields)

    # -- row operations --------------------------------------------------------
    @property
    def nnz(self):
        return int(self.indptr[-1]) if self.kind == SPARSE else self.rows * self.cols

    def take(self, idx, row_ids=None, relpos=None):
        """A new block of the rows *idx* (in that order), with the given
        per-row ids and relative positions."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.kind == DENSE:
            return Block.dense(self.data[idx], row_ids=row_ids, relpos=relpos)
        starts = self.indptr[idx]
        lengths = self.indptr[idx + 1] - starts
        indptr = np.zeros(idx.size + 1, np.int64)
        np.cumsum(lengths, out=indptr[1:])
        gather = np.repeat(starts - indptr[:-1], lengths) + np.arange(indptr[-1])
        return Block.sparse(idx.size, self.cols, indptr, self.indices[gather],
                            self.values[gather], row_ids=row_ids, relpos=relpos)

    def row_slice(self, a, b):
        """Rows ``[a, b)`` (views where possible), ids and positions included."""
        ids = None if self.row_ids is None else self.row_ids[a:b]
        pos = None if self.relpos is None else self.relpos[a:b]
        if self.kind == DENSE:
            return Block.dense(self.data[a:b], row_ids=ids, relpos=pos)
        lo, hi = self.indptr[a], self.indptr[b]
        return Block.sparse(b - a, self.cols, self.indptr[a:b + 1] - lo,
                            self.indices[lo:hi], self.values[lo:hi], row_ids=ids, relpos=pos)

    @staticmethod
    def concat(blocks):
        """Stack blocks vertically (all of one kind and width)."""
        blocks = list(blocks)
        first = blocks[0]
        if len(blocks) == 1:
            return first
        ids = _concat_optional([b.row_ids for b in blocks])
        pos = _concat_optional([b.relpos for b in blocks])
        if first.kind == DENSE:
            return Block.dense(np.concatenate([b.data for b in blocks]), row_ids=ids, relpos=pos)
        offsets = np.cumsum([0] + [b.nnz for b in blocks[:-1]])
        indptr = np.concatenate([np.zeros(1, np.int64)]
                                + [b.indptr[1:] + off for b, off in zip(blocks, offsets)])
        return Block.sparse(sum(b.rows for b in blocks), first.cols, indptr,
                            np.concatenate([b.indices for b in blocks]),
                            np.concatenate([b.values for b in blocks]), row_ids=ids, relpos=pos)

    def to_dense(self):
        if self.kind == DENSE:
            return self.data
        out = np.zeros((self.rows, self.cols))
        rows = np.repeat(np.arange(self.rows), np.diff(self.indptr))
        out[rows, self.indices] = self.values
        return out

    # -- encoding ----------------------------------------------------------------
    def encode(self):
        """The block as base64 bytes (no newline)."""
        arrays = []
        flags = 0
        if self.row_ids is not None:
            flags |= _ROW_IDS
            arrays.append(np.asarray(self.row_ids, _I64))
        if self.relpos is not None:
            flags |= _RELPOS
            arrays.append(np.asarray(self.relpos, _U64))
        if self.kind == DENSE:
            arrays.append(np.asarray(self.data, _F64))
            nnz = 0
        else:
            arrays += [np.asarray(self.indptr, _I64), np.asarray(self.indices, _I32),
                       np.asarray(self.values, _F64)]
            nnz = self.nnz
        body = b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)
        header = HEADER.pack(MAGIC, self.kind, flags, 0, self.rows, self.cols, nnz,
                             zlib.crc32(body))
        return binascii.b2a_base64(header + body, newline=False)

    @classmethod
    def decode(cls, text):
        """Inverse of :meth:`encode`; raises InputError on any corruption."""
        try:
            raw = binascii.a2b_base64(text, strict_mode=True)
        except (binascii.Error, ValueError) as exc:
            raise InputError(f"corrupt or truncated block: not valid base64 ({exc})") from None
        if len(raw) < HEADER.size:
            raise InputError("corrupt block: truncated header")
        magic, kind, flags, _, rows, cols, nnz, crc = HEADER.unpack_from(raw)
        if magic != MAGIC or kind not in KIND_NAMES:
            raise InputError("corrupt block: bad magic or kind")
        body = memoryview(raw)[HEADER.size:]
        sizes = []
        if flags & _ROW_IDS:
            sizes.append(("row_ids", _I64, rows))
        if flags & _RELPOS:
            sizes.append(("relpos", _U64, rows))
        if kind == DENSE:
            sizes.append(("data", _F64, rows * cols))
        else:
            sizes += [("indptr", _I64, rows + 1), ("indices", _I32, nnz), ("values", _F64, nnz)]
        expected = sum(dt.itemsize * n for _, dt, n in sizes)
        if len(body) != expected:
            raise InputError(f"corrupt block: {len(body)} payload bytes, expected {expected} "
                             "(truncated?)")
        if zlib.crc32(body) != crc:
            raise InputError("corrupt block: checksum mismatch")
        fields, offset = {}, 0
        for name, dt, n in sizes:
            fields[name] = np.frombuffer(body, dtype=dt, count=n, offset=offset)
            offset += dt.itemsize * n
        if kind == DENSE:
            fields["data"] = fields["data"].reshape(rows, cols)
        else:
            ptr = fields["indptr"]
            if ptr[0] != 0 or ptr[-1] != nnz or np.any(np.diff(ptr) < 0):
                raise InputError("corrupt block: inconsistent sparse row pointers")
            if nnz and (fields["indices"].min() < 0 or fields["indices"].max() >= cols):
                raise InputError("corrupt block: sparse column index out of range")
        return cls(kind, rows, cols, **fields)


def _concat_optional(arrays):
    if any(a is None for a in arrays):
        return None
    return np.concatenate(arrays)


def format_line(h, v, block):
    """One block-store line: ``h<TAB>v<TAB>payload<NEWLINE>`` as bytes."""
    return b"%d\t%d\t%s\n" % (h, v, block.encode())


def parse_line(line):
    """Inverse of :func:`format_line` (accepts bytes or str, with or without
    the newline); raises InputError naming the problem."""
    if isinstance(line, str):
        line = line.encode("ascii", "replace")
    parts = line.rstrip(b"\r\n").split(b"\t")
    if len(parts) != 3:
        raise InputError(f"corrupt block line: expected 3 tab-separated fields, got {len(parts)}")
    try:
        h, v = int(parts[0]), int(parts[1])
    except ValueError:
        raise InputError("corrupt block line: block indices are not integers") from None
    if h < 0 or v < 0:
        raise InputError("corrupt block line: negative block index")
    try:
        return h, v, Block.decode(parts[2])
    except InputError as exc:
        raise InputError(f"{exc} in block ({h}, {v})") from None
