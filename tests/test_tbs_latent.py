"""Latent samples: Downsample (Algorithm 5, Theorem 4.1), Union (Algorithm 6,
Theorem 4.2), GetSample (Algorithm 4).

Two kinds of checks:
* exact -- the decision functions are integrated over u on a fine midpoint grid
  (the plans are piecewise constant in u with at most two breakpoints, so the
  grid error is below 3 / GRID);
* statistical -- the decisions *and* their application to item arrays are run
  many times with fixed seeds; each item's inclusion probability in the
  realized sample is estimated by its conditional expectation given the
  latent sample (1 for a full item, frac(C') for the partial item) and
  compared with the theorem by Bonferroni-corrected z-tests at level ALPHA.
"""
import math

import numpy as np
import pytest

from samplegen.tbs.latent import (
    PARTIAL_FULL,
    PARTIAL_KEEP,
    PARTIAL_NONE,
    LatentSample,
    apply_downsample,
    apply_union,
    get_sample,
    plan_downsample,
    plan_downsample_many,
    plan_union,
    snap,
)
from samplegen.tbs.randomness import batch_generator, derive_key
from tests.tbs_stats import assert_means

GRID = 1 << 17
U = (np.arange(GRID) + 0.5) / GRID

# (C, theta) pairs covering every branch of Algorithm 5.
DOWNSAMPLE_CASES = {
    "only partial, C < 1": (0.6, 0.5),
    "C integral, floor(C') = 0": (3.0, 0.2),
    "floor(C') = 0 with partial": (3.6, 0.25),
    "no deletion": (4.7, 4.2 / 4.7),
    "no deletion, C' integral": (4.7, 4.0 / 4.7),
    "deletions with partial": (3.6, 0.5),
    "deletions, C integral": (3.0, 0.5),
    "deletions, C' integral": (5.5, 2.0 / 5.5),
    "deletions, C and C' integral": (6.0, 0.5),
    "figure 2(b)": (3.2, 1.9 / 3.2),
    "tiny theta": (10.25, 0.01),
}


def _split(c):
    n_full = math.floor(c)
    return n_full, c > n_full


@pytest.mark.parametrize("case", list(DOWNSAMPLE_CASES))
def test_downsample_decisions_scale_inclusion_exactly(case):
    c, theta = DOWNSAMPLE_CASES[case]
    n_full, has_p = _split(c)
    new_c, keep, to_p, old = plan_downsample_many(n_full, has_p, c, theta, U)
    assert np.all(new_c == snap(theta * c))
    frac_new = new_c - np.floor(new_c)
    if n_full:
        # A given full item is kept full w.p. keep/n_full, becomes partial w.p. to_p/n_full.
        p_full = np.mean((keep + to_p * frac_new) / n_full)
        assert p_full == pytest.approx(theta, abs=3 / GRID)
    if has_p:
        p_part = np.mean(np.where(old == PARTIAL_FULL, 1.0,
                                  np.where(old == PARTIAL_KEEP, frac_new, 0.0)))
        assert p_part == pytest.approx(theta * (c - n_full), abs=3 / GRID)


def test_downsample_plan_structure():
    rng = np.random.default_rng(3)
    m = 40000
    c = np.concatenate([rng.uniform(0, 30, m // 2), rng.integers(0, 30, m // 2).astype(float)])
    theta = np.concatenate([rng.uniform(-0.1, 1.3, m // 2), rng.uniform(0.3, 1.0, m // 2)])
    u = 1.0 - rng.random(m)
    n_full = np.floor(c).astype(np.int64)
    has_p = c > n_full
    new_c, keep, to_p, old = plan_downsample_many(n_full, has_p, c, theta, u)
    full_after = keep + (old == PARTIAL_FULL)
    assert np.all(full_after == np.floor(new_c))                      # floor(C') full items
    # partial iff fractional
    assert np.all((to_p + (old == PARTIAL_KEEP) == 1) == (new_c > np.floor(new_c)))
    assert np.all(keep >= 0) and np.all(keep + to_p <= n_full)        # only existing items move
    # no partial -> nothing to keep
    assert np.all(~has_p <= (old == PARTIAL_NONE))
    assert np.all(new_c <= c + 1e-12)
    # The scalar implementation takes exactly the same decisions.
    for i in range(0, m, 7):
        p = plan_downsample(int(n_full[i]), bool(has_p[i]), float(c[i]), float(theta[i]),
                            float(u[i]))
        assert (p.weight, p.keep_full, p.to_partial, p.old_partial) == \
            (new_c[i], keep[i], to_p[i], old[i])


def test_snapping_keeps_invariants():
    assert snap(4.999999999999999) == 5.0 and snap(5.0000000001) == 5.0000000001
    p = plan_downsample(7, False, 7.0, (5.0 - 1e-15) / 7.0, 0.5)
    assert p.weight == 5.0 and p.to_partial == 0 and p.keep_full == 5


def _latent(c, offset=0):
    n_full, has_p = _split(c)
    ls = LatentSample.of_items(np.arange(offset, offset + n_full, dtype=np.int64))
    if has_p:
        ls.partial = np.array([offset + n_full], dtype=np.int64)
    ls.weight = float(c)
    return ls


def _inclusion_values(ls, ids):
    """Pr[x in S | L] for each id: 1 for full items, frac(C) for the partial item.
    (Python sets: the latent samples here hold a handful of items, for which
    np.isin's set-up was most of the statistical tests' time.)"""
    full = set(ls.full().tolist())
    out = np.array([float(i in full) for i in ids.tolist()])
    if ls.partial is not None:
        out[ids == ls.partial[0]] = ls.weight - ls.size
    return out


def _check_latent(ls, allowed):
    """|L| = floor(C), a partial item iff C is fractional, no item twice, every
    item one of ``allowed``."""
    assert ls.size == math.floor(ls.weight)
    assert (ls.partial is not None) == (ls.weight > ls.size)
    members = ls.full().tolist() + (ls.partial.tolist() if ls.partial is not None else [])
    assert len(set(members)) == len(members)
    assert set(members) <= set(allowed.tolist())


@pytest.mark.slow
def test_downsample_application_theorem_4_1():
    key = derive_key(41)
    reps = 3000
    columns, expected = [], []
    for ci, (c, theta) in enumerate(DOWNSAMPLE_CASES.values()):
        n_full, has_p = _split(c)
        ids = np.arange(n_full + has_p)
        vals = np.empty((reps, ids.size))
        for r in range(reps):
            rng = batch_generator(key, r, 1, sub=ci)
            ls = _latent(c)
            plan = plan_downsample(ls.size, ls.has_partial, ls.weight, theta, 1.0 - rng.random())
            apply_downsample(ls, plan, rng)
            _check_latent(ls, ids)
            vals[r] = _inclusion_values(ls, ids)
        columns.append(vals)
        expected.append(np.where(ids < n_full, theta, theta * (c - n_full)))
    assert_means(np.hstack(columns), np.concatenate(expected), what="item (all cases)")


UNION_CASES = {
    "frac sum < 1": (2.3, 1.4),
    "frac sum = 1": (2.5, 1.5),
    "frac sum > 1": (2.7, 1.6),
    "one partial": (3.0, 1.2),
    "no partial": (2.0, 3.0),
    "partials only": (0.4, 0.3),
    "float sum = 1": (0.1 + 2.2, 1.7),
}


@pytest.mark.parametrize("case", list(UNION_CASES))
def test_union_decisions_preserve_inclusion_exactly(case):
    c1, c2 = UNION_CASES[case]
    (n1, h1), (n2, h2) = _split(c1), _split(c2)
    plans = [plan_union(n1, h1, c1, n2, h2, c2, u) for u in U[::64]]
    for plan in plans:
        assert plan.weight == pytest.approx(c1 + c2, abs=1e-12)
        assert (plan.partial != 0) == (plan.weight > math.floor(plan.weight))
        assert math.floor(plan.weight) == n1 + n2 + len(plan.to_full)
    for which, has, c, n in ((1, h1, c1, n1), (2, h2, c2, n2)):
        if has:
            p = np.mean([(which in pl.to_full)
                         + (pl.partial == which) * (pl.weight - math.floor(pl.weight))
                         for pl in plans])
            assert p == pytest.approx(c - n, abs=3 * 64 / GRID)


@pytest.mark.slow
def test_union_application_theorem_4_2():
    key = derive_key(42)
    reps = 3000
    columns, expected = [], []
    for ci, (c1, c2) in enumerate(UNION_CASES.values()):
        ids = np.concatenate([np.arange(math.ceil(c1)), 100 + np.arange(math.ceil(c2))])
        vals = np.empty((reps, ids.size))
        for r in range(reps):
            rng = batch_generator(key, r, 0, sub=ci)
            l1, l2 = _latent(c1), _latent(c2, offset=100)
            before = _inclusion_values(l1, ids) + _inclusion_values(l2, ids)
            plan = plan_union(l1.size, l1.has_partial, l1.weight, l2.size, l2.has_partial,
                              l2.weight, 1.0 - rng.random())
            out = apply_union(l1, l2, plan)
            _check_latent(out, ids)
            assert out.weight == pytest.approx(c1 + c2, abs=1e-12)
            vals[r] = _inclusion_values(out, ids)
        columns.append(vals)
        expected.append(before)
    assert_means(np.hstack(columns), np.concatenate(expected), what="item (all union cases)")


def test_iterated_union_and_getsample():
    # Union of five latent samples, then GetSample: Pr[x in S] is preserved for every
    # item and |S| is floor(C) or ceil(C).  reps = 4000, Bonferroni over 20 items.
    weights = [1.3, 0.45, 2.0, 3.8, 0.6]
    key = derive_key(43)
    reps = 4000
    ids = np.concatenate([np.arange(math.ceil(w)) + 10 * i for i, w in enumerate(weights)])
    expected = sum(_inclusion_values(_latent(w, 10 * i), ids) for i, w in enumerate(weights))
    hits = np.zeros((reps, ids.size))
    total = sum(weights)
    for r in range(reps):
        rng = batch_generator(key, r, 2)
        acc = _latent(weights[0])
        for i, w in enumerate(weights[1:], start=1):
            other = _latent(w, 10 * i)
            acc = apply_union(acc, other, plan_union(acc.size, acc.has_partial, acc.weight,
                                                     other.size, other.has_partial, other.weight,
                                                     1.0 - rng.random()))
        sample = get_sample(acc, 1.0 - rng.random())
        assert sample.size in (math.floor(total), math.ceil(total))
        hits[r] = np.isin(ids, sample)
    assert_means(hits, expected, what="item")


def test_buffer_operations_keep_the_multiset():
    rng = np.random.default_rng(5)
    ls = LatentSample.of_items(np.arange(50, dtype=np.int64))
    reference = set(range(50))
    nxt = 50
    for _ in range(200):
        size = ls.size
        k = int(rng.integers(0, size + 1))
        pos = rng.choice(size, size=k, replace=False)
        removed = set(ls.full()[pos].tolist())
        new = np.arange(nxt, nxt + int(rng.integers(0, 20)), dtype=np.int64)
        nxt += new.size
        if rng.random() < 0.5:
            ls.replace(pos, new)
        else:
            ls.remove(pos)
            ls.append(new)
        reference = (reference - removed) | set(new.tolist())
        assert sorted(ls.full().tolist()) == sorted(reference)


def test_union_many_equals_folded_union():
    from samplegen.tbs.latent import plan_union_many
    rng = np.random.default_rng(8)
    for trial in range(300):
        m = int(rng.integers(1, 12))
        weights = np.where(rng.random(m) < 0.3, rng.integers(0, 4, m).astype(float),
                           rng.uniform(0, 4, m))
        if trial % 5 == 0:                      # fractions summing to exactly one
            weights[:2] = [1.25, 2.75][: min(m, 2)]
        n_full = np.floor(weights).astype(int)
        has_p = weights > n_full
        u = 1.0 - rng.random(m)
        n1, h1, c1, owner, promoted = 0, False, 0.0, -1, []
        for i in range(m):
            plan = plan_union(n1, h1, c1, int(n_full[i]), bool(has_p[i]), float(weights[i]),
                              float(u[i]))
            promoted += [owner if w == 1 else i for w in plan.to_full]
            owner = owner if plan.partial == 1 else (i if plan.partial == 2 else -1)
            n1 = n1 + int(n_full[i]) + len(plan.to_full)
            h1, c1 = plan.partial != 0, plan.weight
        assert plan_union_many(n_full, has_p, weights, u) == (c1, owner, promoted)


@pytest.mark.slow
@pytest.mark.parametrize("to_partial", [0, 1])
def test_split_plan_equals_a_global_uniform_choice(to_partial):
    """Distributed decisions (split_plan on the driver, partition_plan +
    select_for_downsample in each partition) choose the moved items and the
    new partial item exactly as one uniform choice over all items would:
    chi-square over every (moved subset, partial item) outcome, 12000
    replicates, level ALPHA."""
    from itertools import combinations

    from samplegen.tbs.latent import partition_plan, select_for_downsample, split_plan
    from tests.tbs_stats import ALPHA, chi2_gof
    sizes = np.array([3, 0, 5, 2])
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    moved = 4
    key = derive_key(11)
    outcomes = {}
    for subset in combinations(range(int(sizes.sum())), moved):
        for j in (subset if to_partial else (-1,)):
            outcomes[(subset, j)] = len(outcomes)
    counts = np.zeros(len(outcomes))
    for rep in range(12000):
        counts_p, part = split_plan(batch_generator(key, rep, 0), sizes, moved, to_partial)
        assert counts_p.sum() == moved and (part >= 0) == bool(to_partial)
        chosen, partial = [], -1
        for p, size in enumerate(sizes):
            rng = batch_generator(key, rep, 1, sub=p)
            plan = partition_plan(int(size), int(counts_p[p]), int(p == part))
            mode, pos, ppos = select_for_downsample(rng, int(size), plan)
            out = set(pos.tolist()) if mode == "remove" else set(range(size)) - set(pos.tolist())
            chosen += [offsets[p] + i for i in out]
            if p == part:
                partial = offsets[p] + ppos
                assert mode == "keep" or ppos in out
        counts[outcomes[(tuple(sorted(chosen)), partial)]] += 1
    _, p_value = chi2_gof(counts, np.full(counts.size, counts.sum() / counts.size))
    assert p_value >= ALPHA
