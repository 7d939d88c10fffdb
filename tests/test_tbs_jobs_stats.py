"""Inclusion frequencies of the distributed jobs match the in-memory samplers'
theory.

For each algorithm, R independent runs (seeds 0..R-1) of the whole job
(in-process runner, 3 partitions, a snapshot after batch 3; two runs at a
time) over the same batches with irregular arrival times; in each run, the
number of sampled items of every cell (batch, partition, first or second half
of the partition's rows) is counted in S_k after the last batch.  Its mean
over the runs must be |cell| * pi(batch), where pi is what the in-memory
sampler's theory gives for the same sizes and times:

* R-TBS, exponential decay: rho_k f(t_k - t_j) (Theorem 4.3), saturated
  (C_k = n) and not (C_k = W_k fractional: the partial item is in S_k with
  probability frac(C_k), so also E|S_k| = C_k);
* R-TBS, polynomial decay with the output cap at n active (n' = 2n, as the
  in-memory sampler's default; the jobs' default n' = n has no cap):
  sample_rho_k f(t_k - t_j) (Proposition 4.7; nothing is consolidated
  here);
* T-TBS, polynomial decay: q f(t_k - t_j).

Bonferroni-corrected two-sided z-tests (standard errors from the runs), at
family-wise level ALPHA = 1e-3 per algorithm.  Every run must also respect
the size bounds (R-TBS: |S_k| <= n, exponential: floor or ceil of C_k).
"""
import math
import os
import shutil

import numpy as np
import pytest

from samplegen.tbs import RTBS, TTBS, Exponential, Polynomial
from samplegen.tbs.stream import current_sample, run, status
from samplegen.tbs.stream.batches import describe, list_batches, partition_bounds
from tests.tbs_jobs_util import write_batches
from tests.tbs_stats import ALPHA, assert_means

pytestmark = pytest.mark.slow

SIZES = [45, 30, 0, 54, 36]
TIMES = [1.0, 1.5, 3.0, 4.0, 5.5]
P = 3
RUNS = 80
CASES = {
    "rtbs-exp": (dict(algorithm="rtbs", decay="exp", size=50, **{"lambda": 0.4}),
                 lambda: RTBS(50, Exponential(0.4), seed=0)),
    "rtbs-exp-unsaturated": (dict(algorithm="rtbs", decay="exp", size=400, **{"lambda": 0.4}),
                             lambda: RTBS(400, Exponential(0.4), seed=0)),
    "rtbs-poly": (dict(algorithm="rtbs", decay="poly", size=30, power=2.0, shift=1.0, delta1=0.01,
                       delta2=0.5, max_weight=60.0),
                  lambda: RTBS(30, Polynomial(2.0, shift=1.0), seed=0, delta1=0.01, delta2=0.5,
                               max_weight=60.0)),
    "ttbs-poly": (dict(algorithm="ttbs", decay="poly", size=40, power=2.0, shift=1.0,
                       mean_batch_size=60.0),
                  lambda: TTBS(40, Polynomial(2.0, shift=1.0), 60.0, seed=0)),
}


def _replicate(args):
    """One run of the job with seed r; the count of sampled items per cell,
    where a cell is (batch, partition, first or second half of the
    partition's rows) -- the halves catch a bias in *which* rows a partition
    takes, not only in how many."""
    name, batches, state, r, cells = args
    os.environ["SAMPLEGEN_TBS_FSYNC"] = "0"
    params = CASES[name][0]
    run(batches, state, dict(params, seed=r, partitions=P, compact_every=3))
    sample = current_sample(state)
    info = status(state)
    counts = np.zeros(len(cells))
    for j, row in zip(sample["_sg_batch"].tolist(), sample["_sg_row"].tolist()):
        i = next(i for i, (jj, lo, hi) in enumerate(cells) if jj == j and lo <= row < hi)
        counts[i] += 1
    shutil.rmtree(state)
    return counts, len(sample), info["sample_weight"]


def cells_of(batches):
    """(batch, lo, hi) per half of every partition of every non-empty batch,
    with the partitions the job uses (from the batches' footers)."""
    fs, root, found = list_batches(batches)
    cells = []
    for k in sorted(found):
        b = describe(fs, root, k, *found[k])
        for lo, hi in partition_bounds(b.row_groups, P):
            mid = (lo + hi) // 2
            cells += [(k, lo, mid), (k, mid, hi)]
    return [c for c in cells if c[2] > c[1]]


@pytest.mark.parametrize("name", list(CASES))
def test_inclusion_frequencies_match_the_theory(tmp_path, name):
    from concurrent.futures import ProcessPoolExecutor
    params, make = CASES[name]
    batches = str(tmp_path / "b")
    write_batches(batches, SIZES, times=TIMES, dirs=(4,))
    ref = make()
    for b, t in zip(SIZES, TIMES):
        ref.update(np.arange(b), time=t)
    ages = TIMES[-1] - np.array(TIMES)
    if name.startswith("rtbs-exp"):
        pi = ref.rho * ref.decay(ages)
    elif name == "rtbs-poly":
        assert ref.latent_weight > ref.n and ref.consolidated_batches == 0   # the cap is active
        pi = ref.sample_rho * ref.decay(ages)
    else:
        pi = ref.q * ref.decay(ages)
    cells = cells_of(batches)
    assert sum(hi - lo for _, lo, hi in cells) == sum(SIZES)
    expected = np.array([(hi - lo) * pi[j - 1] for j, lo, hi in cells])
    jobs = [(name, batches, str(tmp_path / f"s{r}"), r, cells) for r in range(RUNS)]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(_replicate, jobs))
    counts = np.array([r[0] for r in results])
    sizes = np.array([r[1] for r in results], dtype=np.float64)
    for _, size, weight in results:
        if params["algorithm"] == "rtbs":
            assert size <= params["size"]
            if params["decay"] == "exp":
                assert size in (math.floor(weight), math.ceil(weight))
    if name == "rtbs-exp-unsaturated":
        # C_k = W_k is fractional: the partial item is in S_k with probability frac(C_k),
        # so E|S_k| = C_k
        assert ref.sample_weight % 1 > 0.05 and ref.sample_weight < params["size"]
        assert_means(np.column_stack([counts, sizes]), np.append(expected, ref.sample_weight),
                     alpha=ALPHA,
                     what=f"{name}: sampled items of (batch, partition, half), then |S_k|")
    elif name == "rtbs-poly":
        assert np.all(sizes == params["size"])          # capped at n
        assert_means(counts, expected, alpha=ALPHA,
                     what=f"{name}: sampled items of (batch, partition, half)")
    else:
        assert_means(counts, expected, alpha=ALPHA,
                     what=f"{name}: sampled items of (batch, partition, half)")
