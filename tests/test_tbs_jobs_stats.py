"""Inclusion frequencies of the distributed jobs (D-R-TBS, D-T-TBS) match the
paper's theory.

Two tests per algorithm:

* ``test_inclusion_frequencies_match_the_theory`` drives the job's own
  planning and decision code in memory (tests/tbs_jobs_util.mirror_run: the
  job's parameter handling, ``decide.Driver`` and, per partition, the task's
  draws -- ``select_for_downsample``, ``_choose_rows``, ``priorities`` -- in
  the task's order, without Parquet files), hundreds of times per second,
  over large batches.  In each replicate (seed r) the number of sampled items
  of every cell (batch, partition, first or second half of the partition's
  rows) is counted in S_k after the last batch; its mean over the replicates
  must be |cell| pi(batch).
* ``test_the_job_runs_what_its_mirror_computes`` runs the real job (the
  in-process runner, Parquet batches, snapshot after batch 3, deltas) for
  several seeds and requires S_k to be exactly the mirror's S_k for the same
  seed and batch layout -- so the statistics of the first test are the job's.

pi comes from the paper's formulas, computed from the batch sizes and times
and the decay parameters alone (tests/tbs_theory.py):

* R-TBS, exponential decay: rho_k f(t_k - t_j), rho_k = min(1, n / W_k)
  (Theorem 4.3), saturated (C_k = n) and not (C_k = W_k fractional: the
  partial item is in S_k with probability frac(C_k), so also E|S_k| = C_k);
* R-TBS, polynomial decay with the output cap at n active (n' = 2n; the
  jobs' default n' = n has no cap): r_k f(t_k - t_j) with rho_k from
  equation (13) and r_k = rho_k min(1, n / (rho_k W_k)) (nothing is
  consolidated here);
* T-TBS: q f(t_k - t_j) with q = n / (b F_inf), polynomial and exponential
  decay (one group per batch, or one group in all).

Bonferroni-corrected two-sided z-tests (standard errors from the
replicates), at family-wise level ALPHA = 1e-3 per algorithm.  Power: a
cell's count has variance at most m pi (1 - pi) (binomial for T-TBS, whose
items are independent; R-TBS's fixed-size draws are negatively dependent),
so against a relative bias of 5% in one cell the z-test at the corrected
level alpha / c (c cells) has power 80% once the replicates number
R >= (z_{alpha/2c} + z_{0.8})^2 (1 - pi) / (m pi) / 0.05^2 for the worst cell
(tests/tbs_theory.replicates_for_power); with 24 cells that is
(4.10 + 0.84)^2 = 24.4 times (1 - pi) / (m pi) / 0.0025.  R falls as the
cells grow, while a replicate's cost grows more slowly than its batches
(the driver's planning is per batch, not per row), so each case takes its
batches FACTOR times larger than 100 times the end-to-end test's (cells of
300 to 1350 items times FACTOR) and R replicates, the power bound rounded up
and at least MIN_REPLICATES = 200 (the standard errors estimated from the
replicates then have a relative sd of 5%, and the statistic's tail at the
corrected alpha / 24 is close to the normal's): the worst cell is always batch 2's first
(lowest pi, fewest items), and

* R-TBS, exponential (FACTOR 1: m = 300, pi = 0.128): R = 223;
* R-TBS, exponential, unsaturated (FACTOR 1: m = 300, pi = 0.202): the
  bound is 129, R = 200;
* R-TBS, polynomial (FACTOR 2: m = 600, pi = 0.0544): R = 283;
* T-TBS, polynomial (FACTOR 4: m = 1200, pi = 0.0287): R = 276;
* T-TBS, exponential (FACTOR 3: m = 900, pi = 0.0444): R = 234

(before: FACTOR 1 everywhere, R = 300, 300, 600, 1200, 800: 3,200
replicates for the same power, now 1,216).  The test checks each R against
its bound.  Every replicate must also respect
the size bounds (R-TBS: |S_k| <= n, exponential: floor or ceil of C_k).
"""
import math
import os
import shutil

import numpy as np
import pytest

from samplegen.tbs.stream import current_sample, run
from samplegen.tbs.stream.batches import describe, list_batches, partition_bounds
from tests.tbs_jobs_util import mirror_run, write_batches
from tests.tbs_stats import ALPHA, assert_means
from tests.tbs_theory import (
    ages,
    exp_decay,
    exp_f_inf,
    poly2_f_inf,
    poly_decay,
    replicates_for_power,
    rtbs_exp_rho,
    rtbs_general_rho,
    ttbs_q,
)

pytestmark = pytest.mark.slow

SIZES = [45, 30, 0, 54, 36]
TIMES = [1.0, 1.5, 3.0, 4.0, 5.5]
P = 3
SCALE = 100          # the in-memory replicates' batches are SCALE times larger (n too)
#: rows per row group of each file of each batch, for the in-memory runs
#: (unequal partitions; batch 2 in two files; batch 5 with more row groups than P)
ROW_GROUPS = [[[1500] * 3], [[600, 1400], [1000]], [], [[1200, 2700, 1500]], [[900] * 4]]


def case_params(name, scale=1):
    """The job's parameters for case ``name`` with batches ``scale`` times SIZES."""
    s = scale
    return {
        "rtbs-exp": dict(algorithm="rtbs", decay="exp", size=50 * s, **{"lambda": 0.4}),
        "rtbs-exp-unsaturated": dict(algorithm="rtbs", decay="exp", size=400 * s,
                                     **{"lambda": 0.4}),
        "rtbs-poly": dict(algorithm="rtbs", decay="poly", size=30 * s, power=2.0, shift=1.0,
                          delta1=0.01, delta2=0.5, max_weight=60.0 * s),
        "ttbs-poly": dict(algorithm="ttbs", decay="poly", size=40 * s, power=2.0, shift=1.0,
                          mean_batch_size=60.0 * s),
        "ttbs-exp": dict(algorithm="ttbs", decay="exp", size=40 * s, mean_batch_size=60.0 * s,
                         **{"lambda": 0.4}),
    }[name]


#: how many times larger than SCALE times SIZES each case's in-memory batches are
FACTOR = {"rtbs-exp": 1, "rtbs-exp-unsaturated": 1, "rtbs-poly": 2, "ttbs-poly": 4, "ttbs-exp": 3}
#: the fewest replicates of a case (standard errors estimated within 10%)
MIN_REPLICATES = 200
#: replicates of the in-memory test per case: its power bound rounded up, at least
#: MIN_REPLICATES (checked)
REPLICATES = {"rtbs-exp": 223, "rtbs-exp-unsaturated": 200, "rtbs-poly": 283, "ttbs-poly": 276,
              "ttbs-exp": 234}


def theory(name, sizes, times):
    """(pi per batch, C_k) from the paper's formulas (see the module docstring)."""
    p = case_params(name, sizes[0] // SIZES[0])
    n = p["size"]
    if p["algorithm"] == "rtbs" and p["decay"] == "exp":
        rho, c = rtbs_exp_rho(n, sizes, times, p["lambda"])
        return rho * exp_decay(p["lambda"])(ages(times)), c
    if p["algorithm"] == "rtbs":
        f = poly_decay(p["power"], p["shift"])
        _, r, c = rtbs_general_rho(n, p["max_weight"], sizes, times, f)
        return r * f(ages(times)), c
    b = p["mean_batch_size"]
    if p["decay"] == "exp":
        q = ttbs_q(n, b, exp_f_inf(p["lambda"]))
        return q * exp_decay(p["lambda"])(ages(times)), None
    q = ttbs_q(n, b, poly2_f_inf(p["shift"]))
    return q * poly_decay(p["power"], p["shift"])(ages(times)), None


def cells_of(schedule):
    """(batch, lo, hi) per half of every partition of every non-empty batch."""
    cells = []
    for k, _t, bounds in schedule:
        for lo, hi in bounds:
            mid = (lo + hi) // 2
            cells += [(k, lo, mid), (k, mid, hi)]
    return [c for c in cells if c[2] > c[1]]


def cell_counts(keys, cells):
    """How many of the item keys ``(batch << 32) | row`` fall in each cell."""
    edges = np.array([(k << 32) | lo for k, lo, _ in cells] + [(cells[-1][0] << 32) | cells[-1][2]],
                     dtype=np.int64)
    counts = np.histogram(keys, bins=edges)[0]
    # cells are contiguous within a batch and batches follow each other: no key between them
    assert counts.sum() == keys.size
    return counts


CASES = ["rtbs-exp", "rtbs-exp-unsaturated", "rtbs-poly", "ttbs-poly", "ttbs-exp"]


@pytest.mark.parametrize("name", CASES)
def test_inclusion_frequencies_match_the_theory(name):
    f = FACTOR[name]
    sizes = [s * SCALE * f for s in SIZES]
    row_groups = [[[g * f for g in file] for file in batch] for batch in ROW_GROUPS]
    schedule = [(k, t, partition_bounds(row_groups[k - 1], P))
                for k, t in zip(range(1, len(sizes) + 1), TIMES)]
    assert [bounds[-1][1] for _, _, bounds in schedule] == sizes
    params = case_params(name, SCALE * f)
    n = params["size"]
    pi, c_k = theory(name, sizes, TIMES)
    cells = cells_of(schedule)
    m = np.array([hi - lo for _, lo, hi in cells], dtype=np.float64)
    p_cell = np.array([pi[k - 1] for k, _, _ in cells])
    expected = m * p_cell
    reps = REPLICATES[name]
    needed = replicates_for_power(np.max((1 - p_cell) / (m * p_cell)), ALPHA, len(cells))
    assert reps >= needed, f"{reps} replicates give less than 80% power (need {needed:.0f})"
    assert reps >= MIN_REPLICATES
    counts = np.zeros((reps, len(cells)))
    sizes_seen = np.zeros(reps)
    for r in range(reps):
        keys, state = mirror_run(dict(params, seed=r, compact_every=3), schedule, P)
        counts[r] = cell_counts(keys, cells)
        sizes_seen[r] = keys.size
        if params["algorithm"] == "rtbs":
            assert keys.size <= n
            if params["decay"] == "exp":
                assert keys.size in (math.floor(c_k), math.ceil(c_k))
            else:
                assert state["cons_batches"] == 0          # the theory assumes none consolidated
    what = f"{name}: sampled items of (batch, partition, half)"
    if name == "rtbs-exp-unsaturated":
        # C_k = W_k is fractional: the partial item is in S_k with probability frac(C_k),
        # so E|S_k| = C_k
        assert c_k < n and c_k % 1 > 0.05
        assert_means(np.column_stack([counts, sizes_seen]), np.append(expected, c_k),
                     what=what + ", then |S_k|")
    else:
        if name == "rtbs-poly":
            assert c_k > n                                   # the output cap is active ...
            assert np.all(sizes_seen == n)                   # ... and takes exactly n items
        assert_means(counts, expected, what=what)


# ----------------------------------------------------------------------------- end to end

SEEDS = 6


def _job(args):
    """S_k of one run of the real job (sorted item keys)."""
    name, batches, state, seed = args
    os.environ["SAMPLEGEN_TBS_FSYNC"] = "0"
    run(batches, state, dict(case_params(name), seed=seed, partitions=P, compact_every=3))
    sample = current_sample(state)
    shutil.rmtree(state)
    keys = (sample["_sg_batch"].to_numpy().astype(np.int64) << 32) | sample["_sg_row"].to_numpy()
    return np.sort(keys.astype(np.int64))


def test_the_job_runs_what_its_mirror_computes(tmp_path):
    # The real job over Parquet batches (batch 4 a directory of two files; row
    # groups of a third of a batch; an empty batch) with a snapshot after
    # batch 3, for SEEDS seeds per case; the partition bounds come from the
    # batches' footers as the job's driver reads them.
    from concurrent.futures import ProcessPoolExecutor
    batches = str(tmp_path / "b")
    write_batches(batches, SIZES, times=TIMES, dirs=(4,))
    fs, root, found = list_batches(batches)
    schedule = []
    for k in sorted(found):
        b = describe(fs, root, k, *found[k])
        schedule.append((k, b.time, partition_bounds(b.row_groups, P)))
    assert [t for _, t, _ in schedule] == TIMES
    assert [bounds[-1][1] for _, _, bounds in schedule] == SIZES
    jobs = [(name, batches, str(tmp_path / f"{name}-{seed}"), seed)
            for name in CASES for seed in range(SEEDS)]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(_job, jobs))
    for (name, _, _, seed), got in zip(jobs, results):
        want, _ = mirror_run(dict(case_params(name), seed=seed, compact_every=3), schedule, P)
        assert got.size > 0 and np.array_equal(got, want), (name, seed, got.size, want.size)
