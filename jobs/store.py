"""The block store: matrices as directories of block files.

A matrix is a directory holding ``_matrix.json`` and ``part-*`` files of block
lines (see :mod:`jobs.blocks`).  Blocks are ``block_size`` x ``block_size``
(narrower in the last column of blocks, shorter in the last row of blocks);
every block but the last of each column of blocks is full.

``_matrix.json``::

    {"format": "samplegen-matrix/2", "rows": R, "cols": C, "block_size": B,
     "kind": "dense" | "sparse", "nnz": N, "fingerprint": "sha256:...",
     "columns": [names] | null, "row_ids": "positions" | "stored",
     "composed_of": null | [{"path": "../test-0", "blocks": n}, ...],
     "label": name,      (optional: the label column, one of "columns")
     "checksum": "sha256:..."}

``row_ids: positions`` means row ``h * B + i`` has id ``h * B + i`` (imported
matrices); ``stored`` means every block carries the ids of its rows (samples:
the id of the input row each sample row came from).

A *composed* matrix (a k-fold training set in fold mode) is a view: the first
``blocks`` row-blocks of each listed matrix, in order, renumbered
consecutively; ``"path": "."`` names the directory's own part files (the extra
matrix re-blocked from the folds' partial bottom blocks).

**Sealed JSON.**  ``_matrix.json`` and the run manifest ``_manifest.json``
(like the side files of :mod:`jobs.strata`) carry ``"checksum"``, the
SHA-256 of the canonical JSON of their other fields (:func:`digest`), and
a format version inside that content (``samplegen-matrix/2``,
``samplegen-run/2``).  Every read verifies the checksum (:func:`unseal`).
A file without one is read only if it is what a samplegen before
checksums wrote -- the previous format version (``samplegen-matrix/1``,
``samplegen-run/1``), which never had the field -- else it is damage (a
hand edit that dropped the checksum).  An edit that also sets the old
version back cannot be told from an old file; it is then checked as old
files are (strict JSON, every field in range, the blocks against the
fingerprint).
"""
import errno
import hashlib
import json
import os
import shutil
import time
import uuid

import numpy as np

from samplegen.udfs.errors import InputError, OutputError, ParameterError

from . import fs as fsmod
from .blocks import (
    DENSE,
    HEADER_CHARS,
    KIND_NAMES,
    KINDS,
    Block,
    line_key,
    parse_line,
    payload_layout,
)

#: the format of ``_matrix.json`` (sealed: with a checksum); the format
#: written before, without one
FORMAT = "samplegen-matrix/2"
UNCHECKED_FORMAT = "samplegen-matrix/1"
#: the format of a run's ``_manifest.json`` (sealed), and the one before
RUN_FORMAT = "samplegen-run/2"
UNCHECKED_RUN_FORMAT = "samplegen-run/1"
META = "_matrix.json"
MANIFEST = "_manifest.json"
#: the ``"kind"`` of the manifest of a run whose samples are tables (jobs.tables)
TABLE_RUN = "tables"
SUCCESS = "_SUCCESS"


def n_blocks(extent, block_size):
    return -(-extent // block_size)


def block_list(rows, cols, block_size):
    """``[h, v, rows, cols]`` of every block of a matrix, in (h, v) order."""
    out = []
    for h in range(n_blocks(rows, block_size)):
        r = min(block_size, rows - h * block_size)
        for v in range(n_blocks(cols, block_size)):
            out.append([h, v, r, min(block_size, cols - v * block_size)])
    return out


def fingerprint(entries):
    """Digest of a matrix's content from ``(h, v, rows, cols, crc32)`` entries."""
    digest = hashlib.sha256()
    for entry in sorted(tuple(e) for e in entries):
        digest.update(b"%d,%d,%d,%d,%d;" % entry)
    return "sha256:" + digest.hexdigest()


def write_block_line(writer, h, v, block):
    """Append the line of *block* (Block or EncodedBlock) to *writer*;
    returns ``(bytes written, CRC-32 of the payload body)``."""
    encoded = block.encoded() if hasattr(block, "encoded") else block
    pieces, crc = encoded.parts(crc=True)
    head = b"%d\t%d\t" % (h, v)
    writer.write(head)
    for piece in pieces:
        writer.write(piece)
    writer.write(b"\n")
    return len(head) + sum(len(p) for p in pieces) + 1, crc


def make_meta(rows, cols, block_size, kind, nnz, fp, columns=None, row_ids="positions",
              composed_of=None, label=None):
    meta = {"format": FORMAT, "rows": int(rows), "cols": int(cols),
            "block_size": int(block_size), "kind": kind, "nnz": int(nnz), "fingerprint": fp,
            "columns": columns, "row_ids": row_ids, "composed_of": composed_of}
    if label is not None:
        meta["label"] = label
    return meta


def to_json(document):
    """The bytes of a metadata file: strict JSON (a NaN or infinity, which
    JSON cannot hold, is a ParameterError naming the field's value)."""
    try:
        return json.dumps(document, indent=1, allow_nan=False).encode() + b"\n"
    except ValueError:
        raise ParameterError("a parameter is NaN or infinite, which a run's JSON metadata "
                             "cannot record; use a finite number") from None


#: the field of a sealed JSON file that holds its checksum (:func:`sealed_json`)
CHECKSUM = "checksum"


def digest(document, strict=True):
    """``sha256:<hex>`` of the canonical JSON of *document* (keys sorted, no
    spaces): the same for the document however it was indented.  The one
    digest of samplegen's JSON files (matrices, manifests, side files,
    plans).  *strict*: NaN and infinities are a ValueError (what JSON files
    hold); ``False`` digests them as Python writes them (plans)."""
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"),
                           allow_nan=not strict)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def sealed_json(document):
    """The bytes of a JSON file that carries its own checksum: *document*
    (a dict; any :data:`CHECKSUM` field of it dropped) with the field
    :data:`CHECKSUM`, the :func:`digest` of its other fields, which
    :func:`unseal` verifies.  NaN and infinities are refused, as by
    :func:`to_json`."""
    document = {k: v for k, v in document.items() if k != CHECKSUM}
    try:
        checksum = digest(document)
    except ValueError:
        to_json(document)   # the ParameterError naming the problem
        raise
    return to_json(dict(document, **{CHECKSUM: checksum}))


def unseal(document, uri, what, unchecked_format, remedy):
    """*document*, the JSON object read from *uri* (*what*: its name in
    messages), without its :data:`CHECKSUM` field, verified: a recorded
    checksum must match the other fields; a document without one is
    accepted only when its ``"format"`` is *unchecked_format*, the version
    written before checksums (every later version records one, so a
    missing checksum on any other is a hand edit).  Else InputError naming
    the file and saying *remedy*."""
    recorded = document.pop(CHECKSUM, None)
    if recorded is None:
        if document.get("format") == unchecked_format:
            return document
        raise InputError(f"damaged {what} {uri}: it records no checksum, which only "
                         f"{unchecked_format} files (written before checksums) may lack; its "
                         f"format is {document.get('format')!r} (edited by hand); {remedy}")
    if recorded != digest(document):
        raise InputError(f"damaged {what} {uri}: its content does not match its checksum "
                         f"(edited by hand, or damaged); {remedy}")
    return document


def manifest_json(manifest):
    """The bytes of a run's ``_manifest.json``: *manifest* sealed
    (:func:`sealed_json`; :func:`read_manifest` verifies it)."""
    return sealed_json(manifest)


def read_manifest(uri):
    """The run manifest at *uri*, verified: strict JSON, an object, and its
    checksum matching its content (:func:`unseal`: a manifest without a
    checksum is read only if it is of :data:`UNCHECKED_RUN_FORMAT`, written
    before manifests carried one); else InputError naming the file (a
    hand-edited manifest is a damaged one).  The checksum field is not part
    of the returned dict."""
    document = read_json(uri, "run manifest")
    if not isinstance(document, dict):
        raise InputError(f"corrupt run manifest {uri}: not a JSON object")
    return unseal(document, uri, "run manifest", UNCHECKED_RUN_FORMAT,
                  "run the sampling command again to rewrite the run")


def write_meta(fs, uri, meta):
    """Write the matrix metadata *meta* (:func:`make_meta`) into the matrix
    directory *uri*, sealed (:func:`sealed_json`)."""
    fs.write_bytes(fsmod.join(uri, META), sealed_json(meta))


def read_meta(uri):
    """The ``_matrix.json`` of the matrix directory *uri*, verified: strict
    JSON, every field in range (:func:`_check_meta`) and its checksum
    matching its content (:func:`unseal`: one without a checksum is read
    only if it is of :data:`UNCHECKED_FORMAT`, written before matrices
    carried one); else InputError naming the file.  The checksum field is
    not part of the returned dict."""
    meta_uri = fsmod.join(uri, META)
    meta = _check_meta(read_json(meta_uri, "matrix metadata"), uri)
    return unseal(meta, meta_uri, "matrix metadata", UNCHECKED_FORMAT,
                  "import the matrix again, or rerun the command that wrote it")


# ---------------------------------------------------------------------------
# writing
# ---------------------------------------------------------------------------
class MatrixWriter:
    """Write a plain matrix from rows arriving in order (import, make-matrix).

    Rows are buffered into row-blocks of ``block_size`` rows; each row-block
    is cut into column blocks and appended to the current part file.
    """

    def __init__(self, uri, cols, block_size, kind="dense", columns=None,
                 part_bytes=128 << 20, label=None):
        self.fs = fsmod.get_fs(uri)
        self.uri, self.cols, self.block_size = uri, int(cols), int(block_size)
        self.kind = kind
        self.columns = columns
        self.label = label
        self.part_bytes = part_bytes
        self.rows = 0
        self.nnz = 0
        self.entries = []
        self._buffer, self._buffered = [], 0
        self._h = 0
        self._part = None
        self._part_no = 0
        self.fs.makedirs(uri)

    def add_rows(self, data):
        data = np.asarray(data, dtype=np.float64)
        if data.ndim != 2 or data.shape[1] != self.cols:
            raise InputError(f"expected rows with {self.cols} columns, got shape {data.shape}")
        a = 0
        while a < data.shape[0]:
            take = min(self.block_size - self._buffered, data.shape[0] - a)
            self._buffer.append(data[a:a + take])
            self._buffered += take
            a += take
            if self._buffered == self.block_size:
                self._flush()

    def _flush(self):
        rows = np.concatenate(self._buffer) if len(self._buffer) > 1 else self._buffer[0]
        self._buffer, self._buffered = [], 0
        B = self.block_size
        for v in range(n_blocks(self.cols, B)):
            block = Block.from_dense(rows[:, v * B:(v + 1) * B], KINDS[self.kind])
            self.add_block(self._h, v, block)
        self._h += 1
        self.rows += rows.shape[0]

    def add_block(self, h, v, block):
        """Append one block (used directly by generators of sparse data)."""
        if self._part is None or self._part.bytes >= self.part_bytes:
            self._close_part()
            self._part = self.fs.open_atomic(fsmod.join(self.uri, "part-%05d" % self._part_no),
                                             direct=True)
            self._part_no += 1
        _, crc = write_block_line(self._part, h, v, block)
        self.entries.append((h, v, block.rows, block.cols, crc))
        self.nnz += block.nnz if block.kind != DENSE else int(np.count_nonzero(block.data))

    def _close_part(self):
        if self._part is not None:
            self._part.close()
            self._part = None

    def close(self, rows=None):
        """Flush, write ``_matrix.json``; returns the metadata."""
        if self._buffered:
            self._flush()
        self._close_part()
        if rows is not None:
            self.rows = rows
        meta = make_meta(self.rows, self.cols, self.block_size, self.kind, self.nnz,
                         fingerprint(self.entries), self.columns, label=self.label)
        write_meta(self.fs, self.uri, meta)
        return meta

    def abort(self):
        if self._part is not None:
            self._part.abort()
            self._part = None


def write_group(root, sample_name, v, blocks):
    """Write one sample's column of blocks ``v`` to ``root/<sample>/part-v<v>``.

    *blocks* yields ``(h, block)`` (relative positions are dropped, row ids
    kept).  Returns the summary the driver needs: block entries and bytes.
    """
    fs = fsmod.get_fs(root)
    writer = None
    entries, nbytes = [], 0
    try:
        for h, block in blocks:
            if writer is None:
                writer = fs.open_atomic(fsmod.join(root, sample_name, "part-v%05d" % v),
                                        direct=True)
            written, crc = write_block_line(writer, h, v, block.replace(relpos=None))
            nbytes += written
            entries.append([h, block.rows, block.cols, crc,
                            block.nnz if block.kind != DENSE else block.rows * block.cols])
    except BaseException:
        if writer is not None:
            writer.abort()
        raise
    if writer is not None:
        writer.close()
    return {"sample": sample_name, "v": v, "blocks": entries, "bytes": nbytes}


# ---------------------------------------------------------------------------
# reading
# ---------------------------------------------------------------------------
def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def read_json(uri, what):
    """The JSON document at *uri* (*what*: its name in messages), parsed
    strictly: NaN and infinities, which samplegen never writes, are
    damage, as is anything that is not JSON (InputError naming the file)."""
    fs = fsmod.get_fs(uri)
    if not fs.exists(uri):
        raise InputError(f"{what} not found: {uri}")
    try:
        return json.loads(fs.read_bytes(uri), parse_constant=_no_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"corrupt {what} {uri}: {exc}") from None


#: the largest block size a matrix may have: a block's rows and columns are
#: 32-bit fields of its header, and a block is held in memory whole
MAX_BLOCK_SIZE = 1 << 20


def _check_meta(meta, uri):
    """*meta* if it describes a matrix samplegen can read, else InputError
    naming the field: every command reads these values before any block."""
    required = ("rows", "cols", "block_size", "kind")
    if not isinstance(meta, dict) or any(k not in meta for k in required):
        raise InputError(f"corrupt matrix metadata in {uri}: missing one of {', '.join(required)}")

    def bad(field, what):
        return InputError(f"corrupt matrix metadata in {uri}: {field} must be {what}, "
                          f"got {meta.get(field)!r}")

    for field, lo, hi in (("rows", 0, 1 << 62), ("cols", 1, 1 << 31),
                          ("block_size", 1, MAX_BLOCK_SIZE)):
        value = meta[field]
        if type(value) is not int or not lo <= value <= hi:
            raise bad(field, f"an integer in [{lo}, {hi}]")
    if meta["kind"] not in KINDS:
        raise InputError(f"corrupt matrix metadata in {uri}: unknown kind {meta['kind']!r}")
    if meta.get("fingerprint") is not None and not isinstance(meta["fingerprint"], str):
        raise bad("fingerprint", "a string")
    if meta.get("row_ids", "positions") not in ("positions", "stored"):
        raise bad("row_ids", "'positions' or 'stored'")
    label = meta.get("label")
    if label is not None and not (isinstance(label, str) and isinstance(meta.get("columns"), list)
                                  and label in meta["columns"]):
        raise bad("label", "null or the name of one of its columns")
    composed = meta.get("composed_of")
    if composed is not None:
        if not isinstance(composed, list) or not composed or not all(
                isinstance(c, dict) and isinstance(c.get("path"), str)
                and type(c.get("blocks")) is int and c["blocks"] >= 0
                and type(c.get("rows", 0)) is int and c.get("rows", 0) >= 0
                for c in composed):
            raise bad("composed_of", "a list of {path, blocks, rows}")
    return meta


#: bytes read at the start of a block line to index it: "h<TAB>v<TAB>" and the header
_LINE_HEAD = 2 * 20 + 2 + HEADER_CHARS


def scan_part(path):
    """``(h, v, offset, length, payload offset, layout)`` of every block line
    of the local part file *path*, in file order, hopping from line to line
    by the lengths in the block headers: about a hundred bytes read per
    block, not its values (see :func:`jobs.blocks.payload_layout`).  A line
    that is not a block line, or a block cut short, is an InputError."""
    with open(path, "rb") as f:
        fd = f.fileno()
        end, pos = os.fstat(fd).st_size, 0
        while pos < end:
            head = os.pread(fd, _LINE_HEAD, pos)
            try:
                h, v, tab2 = line_key(head)
                layout = payload_layout(head[tab2 + 1:tab2 + 1 + HEADER_CHARS])
            except (ValueError, InputError):
                raise InputError(f"corrupt block file {path}: bad line at byte {pos}") from None
            payload = pos + tab2 + 1
            stop = payload + layout.length
            newline = os.pread(fd, 2, stop)
            if newline[:1] == b"\n":
                following = stop + 1
            elif newline == b"\r\n":
                following = stop + 2
            elif stop == end:               # a last line without its newline
                following = end
            else:
                raise InputError(f"corrupt or truncated block ({h}, {v}) in {path} at byte {pos}")
            yield h, v, pos, following - pos, payload, layout
            pos = following


class Matrix:
    """A matrix directory, opened for reading."""

    def __init__(self, uri, meta):
        self.uri = uri.rstrip("/")
        self.fs = fsmod.get_fs(uri)
        self.meta = meta
        self._index = None

    @classmethod
    def open(cls, uri):
        fs = fsmod.get_fs(uri)
        if not fs.exists(uri):
            raise InputError(f"matrix not found: {uri}")
        if not fs.isdir(uri):
            raise InputError(f"not a matrix directory: {uri} (import files with "
                             "'samplegen import')")
        meta_uri = fsmod.join(uri, META)
        if not fs.exists(meta_uri):
            raise InputError(f"not a samplegen matrix: {uri} has no {META} (import files "
                             "with 'samplegen import')")
        meta = read_meta(uri)
        if meta.get("composed_of"):
            return ComposedMatrix(uri, meta)
        return cls(uri, meta)

    rows = property(lambda self: self.meta["rows"])
    cols = property(lambda self: self.meta["cols"])
    block_size = property(lambda self: self.meta["block_size"])
    kind = property(lambda self: self.meta["kind"])

    def blocks(self):
        return block_list(self.rows, self.cols, self.block_size)

    def part_uris(self):
        if not self.fs.exists(self.uri):
            return []
        return [fsmod.join(self.uri, name) for name in self.fs.listdir(self.uri)
                if name.startswith("part-")]

    def index(self):
        """``(h, v) -> (part uri, offset, length)``, verified against the
        metadata before anything reads a value: every block of the shape
        exactly once, each with the kind and extent its place requires, and
        -- from the CRCs in the block headers -- the content the metadata's
        fingerprint records (so a lost, repeated, relabelled or replaced
        block line is an InputError).  Every engine and ``export`` call this
        before sampling or writing; it reads the block headers only."""
        if self._index is not None:
            return self._index
        index, entries = {}, []
        B, kind = self.block_size, KINDS[self.kind]
        for part in self.part_uris():
            lines = scan_part(fsmod.local_path(part)) if fsmod.is_local(part) else \
                self._stream_lines(part)
            for h, v, offset, length, _, layout in lines:
                if (h, v) in index:
                    raise InputError(f"corrupt matrix {self.uri}: block ({h}, {v}) "
                                     "appears twice")
                if not (0 <= h < n_blocks(self.rows, B) and 0 <= v < n_blocks(self.cols, B)):
                    raise InputError(f"corrupt matrix {self.uri}: unexpected block ({h}, {v}) "
                                     f"in {part}")
                shape = (min(B, self.rows - h * B), min(B, self.cols - v * B))
                if (layout.rows, layout.cols) != shape or layout.kind != kind:
                    raise InputError(f"corrupt matrix {self.uri}: block ({h}, {v}) in {part} is "
                                     f"a {layout.rows}x{layout.cols} {KIND_NAMES[layout.kind]} "
                                     f"block, expected {shape[0]}x{shape[1]} {self.kind}")
                index[(h, v)] = (part, offset, length)
                entries.append((h, v, layout.rows, layout.cols,
                                -1 if layout.crc is None else layout.crc))
        expected = {(h, v) for h, v, _, _ in self.blocks()}
        missing = sorted(expected - set(index))
        if missing:
            raise InputError(f"matrix {self.uri} is incomplete: block {missing[0]} is missing "
                             f"({len(missing)} of {len(expected)} blocks)")
        recorded = self.meta.get("fingerprint")
        if recorded is not None and fingerprint(entries) != recorded:
            raise InputError(f"corrupt matrix {self.uri}: its blocks do not match the "
                             f"fingerprint in {META} (a block was relabelled, replaced or "
                             "rewritten)")
        self._entries = entries
        self._index = index
        return index

    def _stream_lines(self, part):
        """What :func:`scan_part` yields, for a part file read as a stream
        (filesystems without random access)."""
        with self.fs.open_read(part) as f:
            offset = 0
            for line in f:
                try:
                    h, v, tab2 = line_key(line)
                    layout = payload_layout(line[tab2 + 1:tab2 + 1 + HEADER_CHARS])
                except (ValueError, InputError):
                    raise InputError(f"corrupt block file {part}: bad line at byte "
                                     f"{offset}") from None
                if len(line.rstrip(b"\r\n")) != tab2 + 1 + layout.length:
                    raise InputError(f"corrupt or truncated block ({h}, {v}) in {part} at "
                                     f"byte {offset}")
                yield h, v, offset, len(line), offset + tab2 + 1, layout
                offset += len(line)

    def read_block(self, h, v):
        part, offset, length = self.index()[(h, v)]
        line = self.fs.read_range(part, offset, length)
        try:
            h2, v2, block = parse_line(line)
        except InputError as exc:
            raise InputError(f"{exc} of {part}") from None
        B = self.block_size
        expected = (min(B, self.rows - h * B), min(B, self.cols - v * B))
        if (block.rows, block.cols) != expected or (h2, v2) != (h, v):
            raise InputError(f"corrupt block ({h}, {v}) in {part}: shape "
                             f"{block.rows}x{block.cols}, expected {expected[0]}x{expected[1]}")
        return block

    def iter_row_blocks(self):
        """Yield ``(h, [block for each v])`` in row order."""
        nv = n_blocks(self.cols, self.block_size)
        for h in range(n_blocks(self.rows, self.block_size)):
            yield h, [self.read_block(h, v) for v in range(nv)]

    def row_ids(self, h, block):
        if block.row_ids is not None:
            return np.asarray(block.row_ids)
        start = h * self.block_size
        return np.arange(start, start + block.rows, dtype=np.int64)

    def iter_rows(self):
        """Yield ``(row_ids, dense rows)`` one row-block at a time."""
        for h, blocks in self.iter_row_blocks():
            dense = np.hstack([b.to_dense() for b in blocks]) if len(blocks) > 1 \
                else blocks[0].to_dense()
            yield self.row_ids(h, blocks[0]), dense

    def to_numpy(self):
        """The whole matrix as ``(row_ids, dense array)``."""
        ids, parts = [], []
        for row_ids, dense in self.iter_rows():
            ids.append(row_ids)
            parts.append(dense)
        if not parts:
            return np.empty(0, np.int64), np.empty((0, self.cols))
        return np.concatenate(ids), np.concatenate(parts)


class ComposedMatrix(Matrix):
    """A view over leading row-blocks of other matrices (fold-mode training sets)."""

    def __init__(self, uri, meta):
        super().__init__(uri, meta)
        self.components = []
        for part in meta["composed_of"]:
            path = part["path"]
            if path == ".":
                own = dict(meta, composed_of=None, fingerprint=None)  # checked by the view's
                own["rows"] = part["rows"]
                matrix = Matrix(self.uri, own)
            else:
                matrix = Matrix.open(_resolve(self.uri, path))
            self.components.append((matrix, int(part["blocks"])))

    def index(self):
        """Verify every component (see :meth:`Matrix.index`) and the view's
        own fingerprint over the blocks it takes from them."""
        if self._index is None:
            entries, h0 = [], 0
            for matrix, count in self.components:
                matrix.index()
                entries += [(h0 + h, v, r, c, crc) for h, v, r, c, crc in matrix._entries
                            if h < count]
                h0 += count
            recorded = self.meta.get("fingerprint")
            if recorded is not None and fingerprint(entries) != recorded:
                raise InputError(f"corrupt composed matrix {self.uri}: the blocks it takes do "
                                 f"not match the fingerprint in {META}")
            self._index = {}
        return None

    def iter_row_blocks(self):
        h = 0
        for matrix, count in self.components:
            for source_h, blocks in matrix.iter_row_blocks():
                if source_h >= count:
                    break
                yield h, blocks
                h += 1

    def read_block(self, h, v):
        for matrix, count in self.components:
            if h < count:
                return matrix.read_block(h, v)
            h -= count
        raise InputError(f"block ({h}, {v}) is outside composed matrix {self.uri}")

    def row_ids(self, h, block):
        return np.asarray(block.row_ids)


def _resolve(base, rel):
    if fsmod.is_local(base):
        return os.path.normpath(os.path.join(fsmod.local_path(base), rel))
    head = base.rstrip("/")
    for piece in rel.split("/"):
        if piece == "..":
            head = head.rsplit("/", 1)[0]
        elif piece not in (".", ""):
            head = head + "/" + piece
    return head


# ---------------------------------------------------------------------------
# destinations: whole or nothing
# ---------------------------------------------------------------------------
def _same_or_nested(a, b):
    a, b = os.path.realpath(a), os.path.realpath(b)
    return a == b or a.startswith(b + os.sep) or b.startswith(a + os.sep)


#: the staged outputs of this process entered and not yet committed or
#: discarded (see :func:`discard_unfinished`)
_unfinished = set()


def unfinished():
    """The staged outputs of this process that were entered and are not yet
    committed or discarded (a snapshot, for :func:`discard_unfinished`)."""
    return frozenset(_unfinished)


def discard_unfinished(before=frozenset()):
    """Discard every staged output entered since the snapshot *before* (see
    :func:`unfinished`) that was neither committed nor discarded.

    A stop (Ctrl-C, SIGTERM) raised by a signal handler can land as
    ``StagedOutput.__exit__`` is entered, before its first line: Python runs
    the handler at a function's start.  No ``with`` block can clean up after
    that; the code that catches the stop -- the command line does, for every
    command -- calls this."""
    for staged in list(_unfinished - set(before)):
        try:
            staged._discard()
        finally:
            staged._close()


class StagedOutput:
    """Write a directory aside, then rename it into place.

    ``with StagedOutput(dest, overwrite) as staging: ...`` writes into
    *staging* (``.<name>.tmp-<id>`` beside *dest*); on success ``_SUCCESS``
    is added and the directory renamed to *dest*; on any error the staging
    directory is removed and *dest* is left as it was.

    * Without *overwrite* the final rename replaces nothing: a destination
      that another run filled meanwhile makes this run fail (OutputError),
      whoever started first.  With *overwrite* the old destination is moved
      aside, replaced and removed.
    * On local disks a live run holds a lock on ``<staging>/.owner``; any
      staging directory (or writer's temporary file) beside *dest* whose
      lock is free (its run was killed) is removed when the next run into
      *dest*'s directory starts (:func:`jobs.fs.remove_stale_temporaries`).
    * A local *dest* that is a symbolic link is refused (OutputError naming
      its target), with or without *overwrite*.
    * :attr:`scratch` is a local directory for the engines' temporary files
      (inside the staging directory when it is local), removed with it; it
      is made by the first engine that needs it (:func:`jobs.fs.scratch_dir`).
    * A stop that lands as the ``with`` block ends, before ``__exit__`` has
      begun, leaves the staging directory to :func:`discard_unfinished`.
    * Missing parent directories of *dest* are created on entry (and
      removed again, as far as they are empty, if the run fails); a parent
      that is a file is refused when the object is made.
    """

    OWNER = fsmod.OWNER

    def __init__(self, dest, overwrite=False, inputs=()):
        if fsmod.is_local(dest):  # tasks run in other working directories
            dest = os.path.abspath(fsmod.local_path(dest))
        self.dest = dest.rstrip("/") or dest
        self.fs = fsmod.get_fs(dest)
        self.overwrite = overwrite
        self.local = fsmod.is_local(dest)
        if self.local:
            fsmod.check_not_link(dest)   # before anything else: the link, not its target
            for src in inputs:
                if fsmod.is_local(src) and _same_or_nested(fsmod.local_path(dest),
                                                           fsmod.local_path(src)):
                    raise OutputError(f"destination {dest} overlaps the input {src}")
        if self.fs.exists(self.dest):
            if not self.fs.isdir(self.dest):
                raise OutputError(f"destination {dest} exists and is not a directory")
            if self.fs.listdir(self.dest) and not overwrite:
                raise OutputError(f"destination {dest} is not empty (use --overwrite to "
                                  "replace it)")
        parent = self.dest.rsplit("/", 1)[0] if "/" in self.dest else "."
        if self.local:
            fsmod.missing_dirs(self.dest)  # OutputError for a parent that is a file
        self._made = []
        self.name = self.dest.rsplit("/", 1)[-1]
        self.parent = parent
        self.staging = (parent + "/" if "/" in self.dest else "") + \
            f".{self.name}.tmp-{uuid.uuid4().hex[:12]}"
        self.scratch = None
        self._owner = None

    def __enter__(self):
        if self.local:
            self._made = fsmod.make_parents(self.dest)
            self._remove_stale()
        self.fs.makedirs(self.staging)
        _unfinished.add(self)
        if self.local:
            import fcntl
            self._owner = open(os.path.join(self.staging, self.OWNER), "wb")
            fcntl.flock(self._owner, fcntl.LOCK_EX)
            self.scratch = os.path.join(self.staging, ".scratch")
        else:
            import tempfile
            self.scratch = os.path.join(tempfile.gettempdir(),
                                        f"samplegen-{uuid.uuid4().hex[:12]}")
        return self.staging

    def _remove_stale(self):
        """Remove what killed runs and writers left beside the destination."""
        fsmod.remove_stale_temporaries(self.parent)

    def _release(self):
        if self.scratch is not None and os.path.lexists(self.scratch):
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None

    def __exit__(self, exc_type, exc, tb):
        try:
            if exc_type is not None:
                self._discard()
                return False
            try:  # a stop may land here too
                self._release()
                self.fs.remove_temporaries(self.staging)
                self.fs.touch(fsmod.join(self.staging, SUCCESS))
                self._commit()
            except BaseException:
                self._discard()
                raise
            if self._owner is not None:
                try:
                    os.remove(os.path.join(self.dest, self.OWNER))
                except FileNotFoundError:
                    pass
            return False
        finally:
            self._close()

    def _close(self):
        _unfinished.discard(self)
        if self._owner is not None:
            self._owner.close()
            self._owner = None

    #: seconds a failed run keeps trying to remove its staging directory
    #: (files still being created in it, a stop in the middle)
    DISCARD_SECONDS = 10

    def _discard(self):
        """Remove the staging directory (and the parents this run made).

        Locally it is first renamed aside, so that tasks still running (an
        engine's task processes can outlive the driver) cannot open new files
        in it.  A removal that fails (a file still being created there) or is
        cut short by a stop (Ctrl-C, SIGTERM, raised again while unanswered)
        is tried again for up to :attr:`DISCARD_SECONDS`; the stop is raised
        once the directory is gone."""
        stop, error, deadline = None, None, time.monotonic() + self.DISCARD_SECONDS
        while True:
            try:
                if error is not None:
                    time.sleep(0.05)
                    error = None
                self._release()
                self._remove_staging()
                break
            except OSError as exc:
                error = exc
            except BaseException as exc:
                stop = stop or exc
            if time.monotonic() > deadline:
                break
        if error is not None:
            raise error
        if stop is not None:
            raise stop

    def _remove_staging(self):
        if not self.local:
            self.fs.rmtree(self.staging)
        else:
            path = fsmod.local_path(self.staging)
            gone = path + ".discarded"   # still a staging name: a kill now leaves it stale
            if os.path.lexists(path):
                os.rename(path, gone)
            self.fs.rmtree(gone)         # (nothing, if it is gone already)
        fsmod.remove_dirs(self._made)

    def _commit(self):
        if self.overwrite and self.fs.exists(self.dest):
            old = self.staging + ".old"
            self.fs.rename(self.dest, old)
            try:
                self.fs.rename(self.staging, self.dest)
            except BaseException:
                self.fs.rename(old, self.dest)
                raise
            self.fs.rmtree(old)
            return
        # No replacing: an empty directory may be taken over, a filled one not.
        if self.local:
            try:
                os.rename(self.staging, self.dest)   # fails on a non-empty directory
            except OSError as exc:
                if exc.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                    raise OutputError(f"destination {self.dest} was filled by another run "
                                      "while this one ran: nothing was replaced (use "
                                      "--overwrite to replace it)") from None
                raise
            return
        if self.fs.exists(self.dest):
            if self.fs.listdir(self.dest):
                raise OutputError(f"destination {self.dest} was filled by another run while "
                                  "this one ran: nothing was replaced (use --overwrite to "
                                  "replace it)")
            self.fs.rmtree(self.dest)
        try:
            self.fs.rename(self.staging, self.dest)   # refuses an existing target
        except FileExistsError:
            raise OutputError(f"destination {self.dest} was filled by another run while this "
                              "one ran: nothing was replaced (use --overwrite to replace "
                              "it)") from None
