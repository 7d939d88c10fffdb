"""Keep a time-biased sample of a Spark Structured Streaming query.

    python docs/examples/tbs_stream_sink.py SOURCE STATE CHECKPOINT [--size 500] [--rate 0.1]
        [--seed 7] [--partitions 2]

SOURCE is a directory of Parquet files, the stream's input (when it does not
exist, six small files are written into it first); STATE is where the sample
lives (a local path or an hdfs:// URL); CHECKPOINT is the query's checkpoint.
The query takes one file per micro-batch (``maxFilesPerTrigger``), processes
every file present (``availableNow``) and stops; run it again after new files
arrive -- or after it was killed: it resumes from its checkpoint, and every
micro-batch counts once in the sample.
"""
import argparse
import os
import sys

import fastparquet
import numpy as np
import pandas as pd
from pyspark.sql import SparkSession

from samplegen.tbs.stream import read_sample, sink, status


def spark_url(path):
    """Local paths as file:// URLs (Spark may default to HDFS)."""
    return path if "://" in path else "file://" + os.path.abspath(path)


def make_source(folder, batches=6, rows=300):
    os.makedirs(folder)
    rng = np.random.default_rng(0)
    for k in range(1, batches + 1):
        frame = pd.DataFrame({"id": np.arange(k * 10_000, k * 10_000 + rows, dtype=np.int64),
                              "x": rng.standard_normal(rows) + k / 3})
        path = os.path.join(folder, f"part-{k:03d}.parquet")
        fastparquet.write(path, frame, write_index=False)
        os.utime(path, (k, k))             # the file source takes the oldest files first


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source")
    p.add_argument("state")
    p.add_argument("checkpoint")
    p.add_argument("--size", type=int, default=500)
    p.add_argument("--rate", type=float, default=0.1)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--partitions", type=int, default=2)
    args = p.parse_args(argv)
    if not os.path.exists(args.source):
        make_source(args.source)

    spark = (SparkSession.builder.master("local[2]").appName("tbs-sink")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", 2)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    schema = spark.read.parquet(spark_url(args.source)).schema
    stream = (spark.readStream.schema(schema).option("maxFilesPerTrigger", 1)
              .parquet(spark_url(args.source)))

    keep = sink(args.state, algorithm="rtbs", decay="exp", rate=args.rate, size=args.size,
                seed=args.seed, partitions=args.partitions, key="id",
                log=lambda line: print(line, file=sys.stderr, flush=True))
    query = (stream.writeStream.foreachBatch(keep)
             .option("checkpointLocation", spark_url(args.checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()

    info = status(args.state)
    print(f"batches {info['batches']}, |S| = {info['sample_size']}, W = {info['total_weight']:.1f}")
    sample = read_sample(spark, args.state)             # a Spark DataFrame
    sample.groupBy("_sg_batch").count().orderBy("_sg_batch").show()
    spark.stop()


if __name__ == "__main__":
    main()
