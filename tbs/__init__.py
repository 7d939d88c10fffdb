"""Time-biased sampling: T-TBS, R-TBS and baselines.

Implements the schemes of Hentschel, Haas and Tian, "Temporally-Biased
Sampling Schemes for Online Model Management": every sampler takes batches of
items (1-D numpy arrays of ids or records) with ``update(items, time=...)``
and returns the current sample with ``sample()``; :class:`StreamSample` keeps
a sample of pandas DataFrames, Arrow tables or numpy records with any of
them.  See docs/TBS.md.
"""
from .bchao import BChao
from .decay import CustomDecay, Decay, Exponential, Polynomial, as_decay, gamma
from .errors import TBSError, TBSInputError, TBSOutputError, TBSParameterError
from .reservoir import BatchedReservoir
from .rows import StratifiedStreamSample, StreamSample
from .rtbs import RTBS
from .ttbs import BTBS, TTBS
from .window import SlidingWindow

__all__ = ["BChao", "BTBS", "BatchedReservoir", "CustomDecay", "Decay", "Exponential",
           "Polynomial", "RTBS", "SlidingWindow", "StratifiedStreamSample", "StreamSample",
           "TBSError", "TBSInputError", "TBSOutputError", "TBSParameterError", "TTBS", "as_decay",
           "gamma"]
