"""Distributed time-biased sampling over micro-batches: D-R-TBS and
D-T-TBS jobs with durable, crash-safe state.  See docs/TBS_JOBS.md.

Unlike the rest of ``tbs``, this subpackage needs pandas and fastparquet (and
mrjob or pyspark for those runners); ``import tbs`` does not import it.

* :func:`run` -- process the new batches of a directory into a STATE;
* :func:`current_sample`, :func:`write_sample` -- the sample S_k;
* :func:`status` -- W_k, C_k, rho, |S_k|, footprint;
* :func:`sink` -- a Spark Structured Streaming ``foreachBatch`` function that
  keeps a STATE up to date, each micro-batch exactly once;
  :func:`read_sample` -- S_k as a Spark DataFrame;
* :class:`DamagedStateError` -- a STATE file does not hold what was written
  (flipped bytes, truncated, missing): the message names it.
"""
from .job import run
from .materialize import current_sample, status, write_sample
from .spark_sink import read_sample, sink
from .storage import DamagedStateError

__all__ = ["run", "current_sample", "status", "write_sample", "sink", "read_sample",
           "DamagedStateError"]
