"""Block-preparation on Spark: records partitioned on their ``(sample, v)``
group with map-side buffers bounded in bytes (:func:`shuffle`), travelling in
the frame format of :mod:`jobs.engines.spool` (:class:`SparkFrames`).

:func:`shuffle` re-implements ``RDD.partitionBy`` on PySpark's own plumbing
(``PairwiseRDD``, ``PythonPartitioner``, an RDD's JVM handle): the only
module of the engine that touches PySpark internals.
"""
from samplegen.jobs.engines.spool import ChunkFrames, chunk_bytes

MAP_BUFFER = 64 << 20      # map side: rows held before pickling them to the JVM
BUCKET_BYTES = 4 << 20     # ... and per reduce partition


def shuffle(records, partitions, partition_of, buffer_bytes):
    """``partitionBy`` with map-side buffers bounded in bytes, and records
    travelling as :class:`SparkFrames`.

    PySpark's own ``partitionBy`` flushes its buckets after a number of
    records (up to 10 per partition, at most 1000), which lets megabyte-sized
    chunks pile up to hundreds of MB; this one sends a bucket once it holds
    BUCKET_BYTES and every bucket once *buffer_bytes* are held, handing the
    JVM ``(partition, frame)`` pairs as ``partitionBy`` does (same PySpark
    plumbing: ``PairwiseRDD``, ``PythonPartitioner``).
    """
    from pyspark import RDD
    from pyspark.serializers import BatchedSerializer, pack_long

    serializer = SparkFrames()
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


class SparkFrames(ChunkFrames):
    """The shuffle's frame format (:class:`~jobs.engines.spool.ChunkFrames`)
    speaking PySpark's framed-serializer protocol (length-prefixed frames)."""

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

