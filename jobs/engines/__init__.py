"""The engines that run the three phases of :mod:`jobs.phases`.

An engine is a function ``run(plan, input_uris, runner, options) ->
[summary, ...]`` that only moves records between the phases' functions;
:func:`engine` finds it by runner name for :func:`jobs.driver.generate`:

* :mod:`.embedded`: the three phases in this process, on threads
  (``embedded``, the default on one machine);
* :mod:`.mapreduce`: mrjob (``inline``, ``local``, ``hadoop``), and the mrjob
  plumbing the micro-batch jobs share; ``inline`` and ``local`` are for
  checking what a job does on Hadoop, and for debugging a UDF;
* :mod:`.spark`: native PySpark (``spark``);
* ``hive.engine``: one HiveQL query (``hive``), a layer up: the Hive package
  builds on ``jobs``, so it is named here, not imported;
* :mod:`.spool`, :mod:`.rowcache`: what the embedded and Spark engines share:
  block-preparation's sort with spill, and the rows of dense inputs fetched
  by row id;
* :mod:`.task_errors`: how a task's error reaches the driver, for every engine.
"""
import importlib

from samplegen.udfs.errors import ParameterError

#: runner -> its engine, as ``module:function``, imported when the runner is
#: asked for (so a missing optional dependency is a one-line error)
ENGINES = {
    "embedded": "samplegen.jobs.engines.embedded:run_embedded",
    "inline": "samplegen.jobs.engines.mapreduce:run_mrjob",
    "local": "samplegen.jobs.engines.mapreduce:run_mrjob",
    "hadoop": "samplegen.jobs.engines.mapreduce:run_mrjob",
    "spark": "samplegen.jobs.engines.spark.job:run_spark",
    "hive": "samplegen.hive.engine:run_hive",
}
RUNNERS = tuple(ENGINES)


def engine(runner):
    """The engine function of *runner*, or ParameterError."""
    if not isinstance(runner, str) or runner not in ENGINES:
        raise ParameterError(f"unknown runner {runner!r}: use one of {', '.join(RUNNERS)}")
    module, _, name = ENGINES[runner].partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except ImportError as exc:
        raise ParameterError(f"runner {runner!r} is not available: {exc}") from None
