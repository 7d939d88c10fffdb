"""Spark DataFrames in, Spark DataFrames out: reproducible samples keyed by
a column.

    from samplegen import spark as sg

    pairs = sg.holdout(df, ratio=0.8, seed=7, key="id", repeats=10)  # [(train, test), ...]
    folds = sg.kfold(df, 10, seed=7, key="id")                       # [(train, test), ...]
    boots = sg.bootstrap(df, 20, seed=7, key="row_id")               # [DataFrame, ...]
    [drawn] = sg.weighted(df, "loss", seed=7, key="id", size=10_000)  # in draw order
    parts = sg.sample(df, "mymodule:subsample", seed=7, key="id", p=0.1)  # {name: DataFrame}
    sg.tag(df, "holdout", 7, "id", ratio=0.8, repeats=10) \\
        .write.partitionBy("sample").parquet("out")                  # every sample, one pass

Every decision about a row depends on the seed and the row's key only, so
the samples are the same under any partitioning, row order, caching or
recomputation; the results are lazy DataFrames.  How keys become positions,
and what each function promises: :mod:`samplegen.jobs.engines.spark.frames`
(docs/SPARK.md).

The Spark workers' Python must import numpy and pyarrow: before its first
job on a SparkContext, samplegen checks that once, and raises
:class:`WorkerPythonError` (one line: the interpreter, the missing module,
the fix) when they cannot, e.g. for a script run as ``venv/bin/python
script.py`` whose workers start the system ``python3``: start Spark with
``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) set to ``sys.executable``.
"""
from samplegen.jobs.engines.spark.context import WorkerPythonError
from samplegen.jobs.engines.spark.frames import (
    bootstrap,
    holdout,
    kfold,
    sample,
    tag,
    weighted,
)

__all__ = ["holdout", "kfold", "bootstrap", "weighted", "sample", "tag", "WorkerPythonError"]
