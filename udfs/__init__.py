"""Sampling-UDFs and the position-addressable RNG they draw from.

Pure numpy; no engine imports.  See :mod:`udfs.rng` for the RNG contract and
:mod:`udfs.base` for the sampling-UDF protocol.
"""
from .base import Occurrences, SamplingUDF, UDFError
from .builtin import Bootstrap, HoldOut, KFold, TimeSeries
from .custom import load_udf, parse_param, scalar_udf
from .errors import InputError, OutputError, ParameterError, SamplegenError
from .rng import PositionRNG, Purpose, SkipAheadRNG, StreamId, stream

__all__ = [
    "Bootstrap", "HoldOut", "InputError", "KFold", "Occurrences", "OutputError",
    "ParameterError", "PositionRNG", "Purpose", "SamplegenError", "SamplingUDF",
    "SkipAheadRNG", "StreamId", "TimeSeries", "UDFError", "load_udf", "parse_param",
    "scalar_udf",
    "stream",
]
