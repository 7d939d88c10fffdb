"""Sampling primitives in memory: uniform sampling without replacement in
O(k), weighted (categorical) sampling from weights that change, with and
without replacement, and prioritised experience replay.

    import numpy as np
    from samplegen.weighted import PrioritizedBuffer, SumTree, UniformSampler

    tree = SumTree(losses, seed=7)            # finite weights, zero allowed
    batch = tree.sample(256)                  # in proportion to the weights
    distinct = tree.sample(256, replace=False)
    tree.update(batch, new_losses)            # O(log n) per index

    UniformSampler(10_000_000, seed=7).sample(256)   # 256 distinct indices

The algorithms live in :mod:`samplegen.udfs.sumtree`; randomness comes from
the project's keyed streams, so a seed and a sequence of calls give the same
indices everywhere.
"""
from samplegen.udfs.sumtree import PrioritizedBuffer, SumTree, UniformSampler, check_weights

__all__ = ["PrioritizedBuffer", "SumTree", "UniformSampler", "check_weights"]
