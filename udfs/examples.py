"""Example user sampling-UDFs, usable as ``--udf udfs.examples:NAME``.

They double as templates: copy one into your own module and pass
``--udf mymodule:myfunc``.
"""
import numpy as np

from .custom import scalar_udf
from .rng import Purpose, stream


def bernoulli(start, stop, rng, params):
    """Vectorized: each row enters sample 0 with probability ``p``
    (``--param p=0.01``), at a random position."""
    p = float(params.get("p", 0.1))
    lanes = rng.block(stream(Purpose.USER, 0), start, stop)
    keep = (lanes[:, 0] >> np.uint64(11)) * 2.0 ** -53 < p
    offset = np.flatnonzero(keep)
    return offset, np.zeros(offset.size, np.int64), lanes[keep, 1]


bernoulli.sample_names = ["subsample"]


@scalar_udf
def paper_holdout_series(row_id, rng, params):
    """Scalar, as Algorithm 4 of the paper: ``repeats`` hold-out pairs; the
    same uniform decides the set and orders the row."""
    repeats = int(params.get("repeats", 1))
    ratio = float(params.get("ratio", 0.8))
    rng.skip(row_id * repeats)
    occurrences = []
    for w in range(repeats):
        r = rng.random()
        occurrences.append((2 * w if r <= ratio else 2 * w + 1, r))
    return occurrences


paper_holdout_series.sample_names = (
    lambda params, n_rows: [n for w in range(int(params.get("repeats", 1)))
                            for n in (f"train-{w}", f"test-{w}")])
