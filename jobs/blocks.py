"""Matrix blocks and their text-safe, row-addressable encoding.

A block holds a rectangle of a matrix: dense (row-major float64) or sparse
(CSR).  It may also carry one int64 *row id* per row (which input row it came
from) and one uint64 *relative position* per row (its sort key inside a
sample, used between the map and reduce phases).

On disk and between engine phases a block is one field of a text line::

    h_index <TAB> v_index <TAB> payload <NEWLINE>

so the same files serve Hadoop Streaming (TextInputFormat), Spark
(``textFile``) and Hive (ROW FORMAT DELIMITED).  The payload is base64
(standard alphabet, no newlines) of::

    header     36 bytes  <4sBBHIIQI8x: magic "SGB2", kind (0 dense, 1 sparse),
                         flags (1 row ids, 2 relative positions, 4 CRC),
                         reserved, rows, cols, nnz, CRC-32
    row ids    int64[rows]                   (flag 1)
    relpos     uint64[rows]                  (flag 2)
    dense:     rows x pad3(8 * cols) bytes: each row's float64 values,
               zero-padded to a multiple of 3 bytes
    sparse:    indptr int64[rows + 1], then nnz entries of 12 bytes
               (int32 column index, float64 value)

Every section is zero-padded to a multiple of 3 bytes, all little-endian.
Because a dense row (or a sparse entry) is a multiple of 3 bytes, it is a
fixed run of base64 characters: rows can be gathered, merged and re-blocked
*as text*, without decoding their values (:class:`EncodedBlock`).  Only the
header and the small id / position / indptr sections are ever decoded in the
engines' hot path.  The CRC-32 covers the payload text after the header
(48 characters); blocks at rest carry it, shuffle records need not.

NaN and infinities travel bit for bit.
"""
import binascii
import collections
import struct
import zlib

import numpy as np

from samplegen.udfs.errors import InputError

MAGIC = b"SGB2"
HEADER = struct.Struct("<4sBBHIIQI8x")
HEADER_CHARS = HEADER.size // 3 * 4
DENSE, SPARSE = 0, 1
KINDS = {"dense": DENSE, "sparse": SPARSE}
KIND_NAMES = {DENSE: "dense", SPARSE: "sparse"}
_ROW_IDS, _RELPOS, _CRC = 1, 2, 4

_F64, _I64, _U64 = (np.dtype(t).newbyteorder("<") for t in ("f8", "i8", "u8"))
_ENTRY = np.dtype([("index", "<i4"), ("value", "<f8")])  # packed: 12 bytes
ENTRY_CHARS = 16


def pad3(n):
    return n + (-n) % 3


def text_len(nbytes):
    """Base64 characters for *nbytes* padded to a multiple of 3."""
    return pad3(nbytes) // 3 * 4


def row_chars(cols):
    """Base64 characters of one dense row of *cols* values."""
    return text_len(8 * cols)


def _b64(raw):
    raw = bytes(raw)
    extra = (-len(raw)) % 3
    return binascii.b2a_base64(raw + b"\0" * extra if extra else raw, newline=False)


def _unb64(text):
    try:
        return binascii.a2b_base64(text, strict_mode=True)
    except (binascii.Error, ValueError) as exc:
        raise InputError(f"corrupt or truncated block: not valid base64 ({exc})") from None


def _as_u8(text):
    return np.frombuffer(text, dtype=np.uint8) if not isinstance(text, np.ndarray) else text


def _sections(kind, flags, rows, cols, nnz):
    """``[(name, characters)]`` of the payload after the header, in order."""
    sizes = []
    if flags & _ROW_IDS:
        sizes.append(("row_ids", text_len(8 * rows)))
    if flags & _RELPOS:
        sizes.append(("relpos", text_len(8 * rows)))
    if kind == DENSE:
        sizes.append(("text", rows * row_chars(cols)))
    else:
        sizes += [("indptr", text_len(8 * (rows + 1))), ("text", ENTRY_CHARS * nnz)]
    return sizes


def _header(text):
    """``(kind, flags, rows, cols, nnz, crc)`` from the HEADER_CHARS characters
    that start a payload, checked."""
    try:
        magic, kind, flags, _, rows, cols, nnz, crc = HEADER.unpack(_unb64(text))
    except struct.error:
        raise InputError("corrupt or truncated block: header missing") from None
    if magic != MAGIC or kind not in KIND_NAMES:
        raise InputError(f"corrupt block or unsupported block format: header {magic!r}, "
                         f"expected {MAGIC!r}")
    return kind, flags, rows, cols, nnz, crc


PayloadLayout = collections.namedtuple("PayloadLayout", "kind rows cols text length crc")


def payload_layout(header):
    """The :data:`PayloadLayout` of a block from the first HEADER_CHARS
    characters of its payload: kind, shape, where its values' text starts, how
    long the payload is and its CRC-32 (None when it carries none), without
    reading the rest (a block file can then be indexed and checked against
    its metadata, and dense rows addressed in place, from the headers alone)."""
    kind, flags, rows, cols, nnz, crc = _header(header)
    sizes = _sections(kind, flags, rows, cols, nnz)
    text = HEADER_CHARS + sum(n for _, n in sizes[:-1])
    return PayloadLayout(kind, rows, cols, text, text + sizes[-1][1],
                         crc if flags & _CRC else None)


class EncodedBlock:
    """A block whose values stay base64 text: rows are gathered, merged and
    re-blocked without decoding them.  ``row_ids``, ``relpos`` and (sparse)
    ``indptr`` are decoded arrays; ``text`` is a uint8 array of shape
    ``(rows, row_chars(cols))`` (dense) or ``(nnz, 16)`` (sparse entries)."""

    __slots__ = ("kind", "rows", "cols", "text", "indptr", "row_ids", "relpos")

    def __init__(self, kind, rows, cols, text, indptr=None, row_ids=None, relpos=None):
        self.kind, self.rows, self.cols = kind, int(rows), int(cols)
        self.text, self.indptr = text, indptr
        self.row_ids, self.relpos = row_ids, relpos

    @property
    def nnz(self):
        return int(self.indptr[-1]) if self.kind == SPARSE else self.rows * self.cols

    def replace(self, **changes):
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return EncodedBlock(**fields)

    # -- parsing -------------------------------------------------------------------
    @classmethod
    def parse(cls, payload, verify=True):
        """Parse a payload; with *verify*, check the CRC when present."""
        payload = memoryview(payload).cast("B")
        if len(payload) < HEADER_CHARS:
            raise InputError("corrupt or truncated block: header missing")
        kind, flags, rows, cols, nnz, crc = _header(payload[:HEADER_CHARS])
        body = payload[HEADER_CHARS:]
        sizes = _sections(kind, flags, rows, cols, nnz)
        expected = sum(n for _, n in sizes)
        if len(body) != expected:
            raise InputError(f"corrupt or truncated block: {len(body)} payload characters, "
                             f"expected {expected}")
        if verify and flags & _CRC and zlib.crc32(body) != crc:
            raise InputError("corrupt block: checksum mismatch")
        fields, offset = {}, 0
        for name, n in sizes:
            piece = body[offset:offset + n]
            offset += n
            if name == "text":
                u8 = _as_u8(piece)
                fields["text"] = u8.reshape(rows, row_chars(cols)) if kind == DENSE \
                    else u8.reshape(nnz, ENTRY_CHARS)
            else:
                count = rows if name != "indptr" else rows + 1
                dtype = _U64 if name == "relpos" else _I64
                fields[name] = np.frombuffer(_unb64(piece), dtype=dtype, count=count)
        if kind == SPARSE:
            ptr = fields["indptr"]
            if ptr[0] != 0 or ptr[-1] != nnz or np.any(np.diff(ptr) < 0):
                raise InputError("corrupt block: inconsistent sparse row pointers")
        return cls(kind, rows, cols, **fields)

    # -- row operations (on text) ----------------------------------------------------
    def take(self, idx, row_ids=None, relpos=None):
        idx = np.asarray(idx, dtype=np.int64)
        if self.kind == DENSE:
            return EncodedBlock(DENSE, idx.size, self.cols, self.text[idx],
                                row_ids=row_ids, relpos=relpos)
        indptr, gather = csr_gather(self.indptr, idx)
        return EncodedBlock(SPARSE, idx.size, self.cols, self.text[gather], indptr=indptr,
                            row_ids=row_ids, relpos=relpos)

    def row_slice(self, a, b):
        ids = None if self.row_ids is None else self.row_ids[a:b]
        pos = None if self.relpos is None else self.relpos[a:b]
        if self.kind == DENSE:
            return EncodedBlock(DENSE, b - a, self.cols, self.text[a:b], row_ids=ids, relpos=pos)
        lo, hi = self.indptr[a], self.indptr[b]
        return EncodedBlock(SPARSE, b - a, self.cols, self.text[lo:hi],
                            indptr=self.indptr[a:b + 1] - lo, row_ids=ids, relpos=pos)

    @staticmethod
    def concat(blocks):
        blocks = list(blocks)
        if len(blocks) == 1:
            return blocks[0]
        first = blocks[0]
        ids = _concat_optional([b.row_ids for b in blocks])
        pos = _concat_optional([b.relpos for b in blocks])
        text = np.concatenate([b.text for b in blocks])
        if first.kind == DENSE:
            return EncodedBlock(DENSE, text.shape[0], first.cols, text, row_ids=ids, relpos=pos)
        indptr = csr_stack([b.indptr for b in blocks])
        return EncodedBlock(SPARSE, sum(b.rows for b in blocks), first.cols, text,
                            indptr=indptr, row_ids=ids, relpos=pos)

    # -- output ----------------------------------------------------------------------------
    def parts(self, crc=True):
        """``(pieces, crc)``: the payload as bytes-like pieces (header first),
        and the CRC-32 of the text after the header (0 without *crc*)."""
        flags, body = 0, []
        if self.row_ids is not None:
            flags |= _ROW_IDS
            body.append(_b64(np.asarray(self.row_ids, _I64).tobytes()))
        if self.relpos is not None:
            flags |= _RELPOS
            body.append(_b64(np.asarray(self.relpos, _U64).tobytes()))
        if self.kind == SPARSE:
            body.append(_b64(np.asarray(self.indptr, _I64).tobytes()))
        body.append(memoryview(np.ascontiguousarray(self.text).reshape(-1)))
        checksum = 0
        if crc:
            flags |= _CRC
            for piece in body:
                checksum = zlib.crc32(piece, checksum)
        header = _b64(HEADER.pack(MAGIC, self.kind, flags, 0, self.rows, self.cols,
                                  self.nnz if self.kind == SPARSE else 0, checksum))
        return [header] + body, checksum

    def encode(self, crc=True):
        """The payload (base64 bytes, no newline)."""
        return b"".join(self.parts(crc)[0])

    def decode(self):
        """The values: a :class:`Block`."""
        if self.kind == DENSE:
            width = 8 * self.cols
            raw = np.frombuffer(_unb64(np.ascontiguousarray(self.text).tobytes()), np.uint8)
            raw = raw.reshape(self.rows, pad3(width))[:, :width]
            data = np.ascontiguousarray(raw).view(_F64).reshape(self.rows, self.cols)
            return Block(DENSE, self.rows, self.cols, data=data.astype(np.float64, copy=False),
                         row_ids=self.row_ids, relpos=self.relpos)
        entries = np.frombuffer(_unb64(np.ascontiguousarray(self.text).tobytes()), _ENTRY)
        indices = entries["index"].astype(np.int32)
        if indices.size and (indices.min() < 0 or indices.max() >= self.cols):
            raise InputError("corrupt block: sparse column index out of range")
        return Block(SPARSE, self.rows, self.cols, indptr=np.asarray(self.indptr, np.int64),
                     indices=indices, values=entries["value"].astype(np.float64),
                     row_ids=self.row_ids, relpos=self.relpos)


class Block:
    """A decoded dense or CSR block, optionally with per-row ids and positions."""

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

    def replace(self, **changes):
        """A shallow copy with some fields replaced."""
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return Block(**fields)

    @property
    def nnz(self):
        return int(self.indptr[-1]) if self.kind == SPARSE else self.rows * self.cols

    # -- row operations --------------------------------------------------------
    def take(self, idx, row_ids=None, relpos=None):
        """A new block of the rows *idx* (in that order)."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.kind == DENSE:
            return Block.dense(self.data[idx], row_ids=row_ids, relpos=relpos)
        indptr, gather = csr_gather(self.indptr, idx)
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
        indptr = csr_stack([b.indptr for b in blocks])
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
    def encoded(self):
        """The block with its values as base64 text (:class:`EncodedBlock`)."""
        if self.kind == DENSE:
            width = 8 * self.cols
            raw = np.zeros((self.rows, pad3(width)), np.uint8)
            raw[:, :width] = np.asarray(self.data, _F64).view(np.uint8).reshape(self.rows, width)
            text = _as_u8(binascii.b2a_base64(raw.tobytes(), newline=False))
            text = text.reshape(self.rows, row_chars(self.cols))
            return EncodedBlock(DENSE, self.rows, self.cols, text, row_ids=self.row_ids,
                                relpos=self.relpos)
        entries = np.empty(self.nnz, _ENTRY)
        entries["index"] = self.indices
        entries["value"] = self.values
        text = _as_u8(binascii.b2a_base64(entries.tobytes(), newline=False))
        return EncodedBlock(SPARSE, self.rows, self.cols, text.reshape(-1, ENTRY_CHARS),
                            indptr=self.indptr, row_ids=self.row_ids, relpos=self.relpos)

    def encode(self, crc=True):
        """The block's payload (base64 bytes, no newline)."""
        return self.encoded().encode(crc)

    @classmethod
    def decode(cls, payload):
        """Inverse of :meth:`encode`; raises InputError on any corruption."""
        return EncodedBlock.parse(payload).decode()


def csr_gather(indptr, idx):
    """Row pointers of the CSR rows *idx* (in that order) and the positions of
    their entries in the source: ``(new_indptr, gather)``."""
    starts = indptr[idx]
    lengths = indptr[idx + 1] - starts
    new = np.zeros(idx.size + 1, np.int64)
    np.cumsum(lengths, out=new[1:])
    return new, np.repeat(starts - new[:-1], lengths) + np.arange(new[-1])


def csr_stack(indptrs):
    """Row pointers of CSR blocks stacked vertically."""
    offsets = np.cumsum([0] + [int(p[-1]) for p in indptrs[:-1]])
    return np.concatenate([np.zeros(1, np.int64)]
                          + [p[1:] + off for p, off in zip(indptrs, offsets)])


def _concat_optional(arrays):
    if any(a is None for a in arrays):
        return None
    return np.concatenate(arrays)


def line_key(head):
    """``(h, v, index of the second tab)`` from the start of a block line
    ("h<TAB>v<TAB>payload"; the rest of the line need not be there);
    ValueError if it does not start that way."""
    tab1 = head.find(b"\t")
    tab2 = head.find(b"\t", tab1 + 1)
    if tab1 < 0 or tab2 < 0:
        raise ValueError("not a block line")
    return int(head[:tab1]), int(head[tab1 + 1:tab2]), tab2


def split_line(line):
    """``(h, v, payload)`` of a block line (bytes or str, newline optional)."""
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
    return h, v, parts[2]


def parse_encoded(line, verify=True):
    """``(h, v, EncodedBlock)`` of a block line, values left as text."""
    h, v, payload = split_line(line)
    return h, v, parse_payload(h, v, payload, verify)


def parse_payload(h, v, payload, verify=True):
    """The EncodedBlock of block ``(h, v)``'s *payload*; an error names the block."""
    try:
        return EncodedBlock.parse(payload, verify)
    except InputError as exc:
        raise InputError(f"{exc} in block ({h}, {v})") from None


def column_of_line(line, j):
    """``(h, v, values)``: column *j* of a block line, as float64.  A dense
    block's rows are base64 text each on its own (a row's bytes padded to a
    multiple of 3), so only the 12 to 16 characters holding the column's 8
    bytes are decoded in each row (*line* may be any buffer: a memory-mapped
    part file is then read only where those characters are); a sparse block
    is decoded whole."""
    line = memoryview(line).cast("B")
    h, v, tab2 = line_key(bytes(line[:64]))
    payload = line[tab2 + 1:]
    layout = payload_layout(bytes(payload[:HEADER_CHARS]))
    if layout.kind != DENSE:
        return h, v, parse_line(bytes(line))[2].to_dense()[:, j]
    if not 0 <= j < layout.cols:
        raise ValueError(f"column {j} is outside the block's {layout.cols} columns")
    width = row_chars(layout.cols)
    first, last = 8 * j // 3 * 4, -(-(8 * j + 8) // 3) * 4
    text = np.frombuffer(payload[layout.text:layout.text + layout.rows * width], np.uint8)
    if text.size != layout.rows * width:
        raise InputError(f"corrupt or truncated block ({h}, {v})")
    chars = np.ascontiguousarray(text.reshape(layout.rows, width)[:, first:last])
    raw = np.frombuffer(_unb64(chars.tobytes()), np.uint8).reshape(layout.rows, -1)
    skip = 8 * j - first // 4 * 3
    return h, v, np.ascontiguousarray(raw[:, skip:skip + 8]).view(_F64).reshape(-1).astype(
        np.float64)


def parse_line(line):
    """``(h, v, Block)`` of a block line, values decoded."""
    h, v, block = parse_encoded(line)
    try:
        return h, v, block.decode()
    except InputError as exc:
        raise InputError(f"{exc} in block ({h}, {v})") from None
