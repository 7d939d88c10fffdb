"""The native PySpark engine (``--runner spark``; docs/SPARK.md).

* :mod:`.job`: ``run_spark``, the RDD job: map, reduce and composition tasks
  around the phases, per-run settings;
* :mod:`.shuffle`: block-preparation's partitioning with map buffers bounded
  in bytes, the records travelling as ``SparkFrames``;
* :mod:`.stats`: task statistics (accumulators: peak RSS growth, spilled bytes);
* :mod:`.context`: the SparkContext (``spark_context``, ``start_context``),
  shipping the project's packages, a failed job as one error.

Shared with the embedded engine, a layer down: a reduce task's external sort
and the records' frame format (``jobs.engines.spool``), the id shuffle's row
fetch from the input (``jobs.engines.rowcache``).
"""
