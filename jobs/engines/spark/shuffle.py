"""Block-preparation on Spark: records partitioned on their ``(sample, v)``
group with map-side buffers bounded in bytes (:func:`shuffle`), travelling in
a frame format of their own (:class:`ChunkFrames`).

:func:`shuffle` re-implements ``RDD.partitionBy`` on PySpark's own plumbing
(``PairwiseRDD``, ``PythonPartitioner``, an RDD's JVM handle): the only
module of the engine that touches PySpark internals.
"""
import struct

import numpy as np

from samplegen.jobs.blocks import ENTRY_CHARS, SPARSE, EncodedBlock, row_chars

MAP_BUFFER = 64 << 20      # map side: rows held before pickling them to the JVM
BUCKET_BYTES = 4 << 20     # ... and per reduce partition


def shuffle(records, partitions, partition_of, buffer_bytes):
    """``partitionBy`` with map-side buffers bounded in bytes, and records
    travelling as :class:`ChunkFrames`.

    PySpark's own ``partitionBy`` flushes its buckets after a number of
    records (up to 10 per partition, at most 1000), which lets megabyte-sized
    chunks pile up to hundreds of MB; this one sends a bucket once it holds
    BUCKET_BYTES and every bucket once *buffer_bytes* are held, handing the
    JVM ``(partition, frame)`` pairs as ``partitionBy`` does (same PySpark
    plumbing: ``PairwiseRDD``, ``PythonPartitioner``).
    """
    from pyspark import RDD
    from pyspark.serializers import BatchedSerializer, pack_long

    serializer = ChunkFrames()
    bucket_bytes = min(BUCKET_BYTES, buffer_bytes)

    def add_shuffle_key(_, records):
        buckets, sizes, held = {}, {}, 0
        for key, chunk in records:
            p = partition_of(key) % partitions
            buckets.setdefault(p, []).append((key, chunk))
            size = chunk_bytes(chunk)
            sizes[p] = sizes.get(p, 0) + size
            held += size
            if held >= buffer_bytes:
                flush = list(buckets)
            elif sizes[p] >= bucket_bytes:
                flush = [p]
            else:
                continue
            for q in flush:
                yield pack_long(q)
                yield serializer.dumps(buckets.pop(q))
                held -= sizes.pop(q)
        for q, items in buckets.items():
            yield pack_long(q)
            yield serializer.dumps(items)

    keyed = records.mapPartitionsWithIndex(add_shuffle_key, preservesPartitioning=True)
    keyed._bypass_serializer = True
    jvm = records.ctx._jvm
    pairs = jvm.PairwiseRDD(keyed._jrdd.rdd()).asJavaPairRDD()
    partitioner = jvm.PythonPartitioner(partitions, id(partition_of))
    jrdd = jvm.PythonRDD.valueOfPair(pairs.partitionBy(partitioner))
    return RDD(jrdd, records.ctx, BatchedSerializer(serializer))



class ChunkFrames:
    """The shuffle's frame format: a bucket of ``(key, chunk)`` records as
    one buffer of fixed-width headers and raw arrays, read back as views into
    the received frame (pickle would copy every array once more on the
    reduce side).  Key ``(sample, v, bin, h)``; the chunk's row ids, relative
    positions, sparse row pointers and base64 text, each padded to 8 bytes.
    It speaks PySpark's framed-serializer protocol (length-prefixed frames)."""

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
            for array, dtype in arrays:
                if array is not None:
                    raw = np.ascontiguousarray(array, dtype=dtype).reshape(-1).view(np.uint8)
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

    # the rest of PySpark's FramedSerializer protocol (length-prefixed frames)
    def dump_stream(self, iterator, stream):
        from pyspark.serializers import write_int
        for obj in iterator:
            data = self.dumps(obj)
            write_int(len(data), stream)
            stream.write(data)

    def load_stream(self, stream):
        from pyspark.serializers import SpecialLengths, read_int
        while True:
            try:
                length = read_int(stream)
            except EOFError:
                return
            if length == SpecialLengths.END_OF_DATA_SECTION:
                return
            yield self.loads(stream.read(length))


#: memory of one held record beyond its arrays: the key tuple, the block and
#: its numpy array objects (measured: about 700 bytes)
RECORD_OVERHEAD = 768


def chunk_bytes(chunk):
    """The memory a held record takes (what the map buffers and the reduce
    side's spool count against their budgets)."""
    extra = 0 if chunk.indptr is None else chunk.indptr.nbytes
    return chunk.text.nbytes + 16 * chunk.rows + extra + RECORD_OVERHEAD

