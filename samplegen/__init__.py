"""samplegen: machine-learning samples from block-partitioned matrices, on one
machine, MapReduce, Spark and Hive, and time-biased samples of streams.

The public API::

    import numpy as np
    import samplegen

    X = np.load("features.npy")
    s = samplegen.holdout(X, ratio=0.8, repeats=3, seed=7)
    s.names                       # ['train-0', 'test-0', ...]
    s["train-0"]                  # X[s.indices("train-0")]
    samplegen.kfold(X, 10, seed=7)
    samplegen.bootstrap(X, 20, seed=7, size=50_000)
    samplegen.weighted_sample(X, losses, seed=7, size=1000)   # in proportion to the losses
    samplegen.sample(X, "mymodule:subsample", seed=7, p=0.1)
    samplegen.read_run("out/")    # a job's output, the same interface
    samplegen.tbs.RTBS(...)       # time-biased samplers (docs/TBS.md)

    # pandas in, pandas out (index kept); labels and groups alongside
    s = samplegen.kfold(df, 5, seed=7, y=labels, groups=patients)
    for train, test in s.pairs():         # ('train-0', 'test-0'), ...
        model.fit(*s.xy(train)).score(*s.xy(test))
    s.y("test-0"), s.groups("test-0"), s.indices("test-0")

Subpackages: :mod:`samplegen.udfs` (sampling-UDFs and keyed randomness),
:mod:`samplegen.jobs` (phases, block store, MapReduce and Spark engines),
:mod:`samplegen.hive` (HiveQL and its TRANSFORM scripts), :mod:`samplegen.tbs`
(time-biased sampling).  Names load on first use, so a task that imports one
subpackage on a cluster node pays for nothing else.
"""
import importlib

__version__ = "0.1.0"

#: public name -> the module that defines it
_API = {name: "samplegen.jobs.api"
        for name in ("holdout", "kfold", "bootstrap", "weighted_sample", "sample", "read_run",
                     "Samples")}
_API.update({name: "samplegen.udfs.errors"
             for name in ("SamplegenError", "ParameterError", "InputError", "OutputError",
                          "EngineError")})
_SUBPACKAGES = ("udfs", "jobs", "hive", "tbs")

__all__ = sorted(_API) + list(_SUBPACKAGES) + ["__version__"]


def __getattr__(name):
    if name in _API:
        value = getattr(importlib.import_module(_API[name]), name)
    elif name in _SUBPACKAGES:
        value = importlib.import_module(f"samplegen.{name}")
    else:
        raise AttributeError(f"module 'samplegen' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return __all__
