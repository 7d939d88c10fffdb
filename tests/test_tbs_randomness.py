"""Per-batch generators, O(k) uniform subsets, hypergeometric variates."""
import itertools
import math

import numpy as np
import pytest

from samplegen.tbs.errors import TBSError
from samplegen.tbs.randomness import (
    STREAM_APPLY,
    STREAM_DECIDE,
    STREAM_OUTPUT,
    Scratch,
    _sorted_positions,
    batch_generator,
    choose,
    derive_key,
    hypergeometric,
    split_count,
)
from samplegen.udfs.rng import PositionRNG, Purpose, stream
from tests.tbs_stats import ALPHA, assert_means, chi2_gof, chi2_sf


def test_generators_are_reproducible_and_distinct():
    key = derive_key(7)
    a = batch_generator(key, 5, 1).random(4)
    b = batch_generator(key, 5, 1).random(4)
    assert np.array_equal(a, b)
    others = [batch_generator(key, 6, 1).random(4), batch_generator(key, 5, 2).random(4),
              batch_generator(key, 5, 1, sub=3).random(4),
              batch_generator(derive_key(8), 5, 1).random(4)]
    for o in others:
        assert not np.array_equal(a, o)


def test_batch_draws_come_from_the_keyed_streams():
    # One home for keyed randomness: batch k's draws for (stream, sub) are the
    # udfs.rng draws of stream (TBS_DECIDE + stream, k, sub) under the seed.
    for which, purpose in [(STREAM_DECIDE, Purpose.TBS_DECIDE), (STREAM_APPLY, Purpose.TBS_APPLY),
                           (STREAM_OUTPUT, Purpose.TBS_OUTPUT)]:
        expected = PositionRNG(42).draws(stream(purpose, 9, 3)).raw(8)
        assert np.array_equal(batch_generator(42, 9, which, sub=3).raw(8), expected)


def test_seeds_are_checked_once():
    assert derive_key(123) == 123 and derive_key(np.uint64(2**64 - 1)) == 2**64 - 1
    fresh = {derive_key(None) for _ in range(4)}
    assert len(fresh) == 4 and all(0 <= f < 2**64 for f in fresh)
    for bad in (-1, 2**64, 1.5, "7", True):
        with pytest.raises(TBSError, match=r"seed must be an integer in \[0, 2\*\*64\) or None"):
            derive_key(bad)


def test_stream_job_salt_and_partial_uniforms_are_keyed():
    from samplegen.tbs.stream.decide import PID_INCLUDE, Driver, initial_state, output_salt
    assert output_salt(5) == int(PositionRNG(5).lane(stream(Purpose.TBS_SALT), 0, 1)[0])
    params = {"algorithm": "rtbs", "decay": "exp", "size": 10, "lambda": 0.1, "seed": 5}
    driver = Driver(params, initial_state(params, 2), 2, None)
    u = driver.pid_uniform(3, PID_INCLUDE)
    assert u == 1.0 - PositionRNG(5).draws(stream(Purpose.TBS_PARTIAL, 3, PID_INCLUDE)).random()
    assert 0.0 < u <= 1.0


@pytest.mark.parametrize("population, k", [
    (1, 0), (1, 1), (10, 0), (10, 10), (10, 3), (10, 7),          # edge cases, complement
    (10000, 5000), (10001, 150), (10001, 3000), (10001, 6000),    # subset / complement
    (2_000_000, 30_000), (2_000_000, 500_000), (2_000_000, 1_999_999),  # subset / skips
])
def test_choose_returns_k_distinct_positions(population, k):
    rng = batch_generator(derive_key(1), 1, 1)
    for scratch in (None, Scratch()):
        pos = choose(rng, population, k, scratch, "t")
        assert pos.dtype == np.int64 and pos.size == k
        if k:
            assert pos.min() >= 0 and pos.max() < population
            assert np.bincount(pos, minlength=population).max() == 1


def test_choose_rejects_bad_k():
    rng = batch_generator(1, 1, 1)
    with pytest.raises(TBSError, match=r"k must be an integer in \[0, 5\], got 6"):
        choose(rng, 5, 6)


@pytest.mark.parametrize("shortfall_sd", [3.0, 0.0, -3.0])
def test_skip_sampler_gives_uniform_subsets(shortfall_sd):
    # All C(7, 3) = 35 subsets must be equally likely, whichever correction
    # (adding from the complement / removing a surplus) the sampler needs.
    # Chi-square goodness of fit, 34 dof, level ALPHA.
    rng = batch_generator(derive_key(11), 1, 1)
    subsets = {s: i for i, s in enumerate(itertools.combinations(range(7), 3))}
    counts = np.zeros(len(subsets))
    reps = 14000
    for _ in range(reps):
        pos = _sorted_positions(rng, 7, 3, shortfall_sd=shortfall_sd)
        counts[subsets[tuple(sorted(pos.tolist()))]] += 1
    stat, p = chi2_gof(counts, np.full(len(subsets), reps / len(subsets)))
    assert p > ALPHA, f"chi2 = {stat:.1f}, p = {p:.2e}"


@pytest.mark.parametrize("population, k", [(40, 7), (40, 29), (20011, 3000), (300_007, 90_000)])
def test_choose_inclusion_is_uniform(population, k):
    # Every position is included with probability k/N: per-position counts,
    # chi-square (binomial variance) with N - 1 dof (the counts sum to R k),
    # both tails (too uneven or too even), level ALPHA each.
    rng = batch_generator(derive_key(12), 1, 1)
    reps = 3000 if population < 1000 else 300
    counts = np.zeros(population)
    scratch = Scratch()
    for _ in range(reps):
        counts[choose(rng, population, k, scratch, "x")] += 1
    p_inc = k / population
    expected = reps * p_inc
    stat = float(np.sum((counts - expected) ** 2) / (expected * (1 - p_inc)))
    assert ALPHA < chi2_sf(stat, population - 1) < 1.0 - ALPHA


def _hypergeometric_pmf(ngood, nbad, nsample):
    total = math.comb(ngood + nbad, nsample)
    return np.array([math.comb(ngood, x) * math.comb(nbad, nsample - x) / total
                     for x in range(nsample + 1)])


@pytest.mark.parametrize("sampler", ["legacy", "inversion"])
def test_hypergeometric_matches_pmf(sampler):
    ngood, nbad, nsample = 30, 50, 25
    rng = batch_generator(derive_key(13), 1, 0)
    reps = 20000
    if sampler == "legacy":
        draws = [hypergeometric(rng, ngood, nbad, nsample) for _ in range(reps)]
    else:
        draws = [rng._hypergeometric_by_inversion(ngood, nbad, nsample) for _ in range(reps)]
    pmf = _hypergeometric_pmf(ngood, nbad, nsample)
    counts = np.bincount(draws, minlength=nsample + 1).astype(float)
    keep = pmf * reps >= 5                       # pool sparse tail cells
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(pmf[keep] * reps, pmf[~keep].sum() * reps)
    stat, p = chi2_gof(obs, exp)
    assert p > ALPHA, f"chi2 = {stat:.1f}, p = {p:.2e}"


def test_hypergeometric_beyond_numpy_limit():
    # numpy's legacy algorithm loses precision for huge populations; from 1e9 on
    # the inversion sampler takes over.
    rng = batch_generator(derive_key(14), 1, 0)
    ngood, nbad, nsample = 10_000_000, 3_000_000_000, 20_000_000
    draws = np.array([[hypergeometric(rng, ngood, nbad, nsample)] for _ in range(400)], dtype=float)
    total = ngood + nbad
    mean = nsample * ngood / total
    assert_means(draws, [mean], what="hypergeometric mean")
    var = nsample * ngood / total * nbad / total * (total - nsample) / (total - 1)
    # Sample variance of 400 draws: relative sd sqrt(2/399) ~ 7%; allow 5 sd.
    assert abs(draws.var(ddof=1) / var - 1) < 5 * math.sqrt(2 / 399)
    assert hypergeometric(rng, 5, 0, 3) == 3 and hypergeometric(rng, 0, 5, 3) == 0
    with pytest.raises(TBSError, match="0 <= nsample <= ngood \\+ nbad"):
        hypergeometric(rng, 1, 1, 3)


def test_split_count():
    rng = batch_generator(derive_key(15), 1, 0)
    sizes = np.array([5, 0, 12, 3, 30])
    draws = np.array([split_count(rng, sizes, 20) for _ in range(4000)])
    assert np.all(draws.sum(axis=1) == 20) and np.all(draws <= sizes) and np.all(draws >= 0)
    assert_means(draws, 20 * sizes / sizes.sum(), what="partition")
    with pytest.raises(TBSError, match=r"k must be an integer in \[0, 50\], got 51"):
        split_count(rng, sizes, 51)


# -- the skips on both implementations (udfs/_philox.c or numpy) ------------------

class _Words:
    """A stand-in for Draws: ``raw`` hands out the given words in order."""

    def __init__(self, words):
        self.words, self.at = np.asarray(words, dtype=np.uint64), 0

    def raw(self, n):
        out = self.words[self.at:self.at + n].copy()
        self.at += n
        return out


def _skips(monkeypatch, compiled, words, scale, start):
    import samplegen.tbs.randomness as randomness
    import samplegen.udfs.rng as rng_module
    kernel = rng_module._KERNEL if compiled else None
    monkeypatch.setattr(randomness, "compiled_kernel", lambda: kernel)
    return randomness._skip_positions(_Words(words), len(words), scale, start, None, "").copy()


@pytest.mark.parametrize("scale", [0.5, 1.0, 6.09, 12345.678, 2.0**40 / 37])
def test_skip_positions_are_the_same_on_both_implementations(monkeypatch, scale):
    import samplegen.udfs.rng as rng_module
    if rng_module._KERNEL is None:
        pytest.skip("the compiled Philox kernel is not built here")
    mask = 2**64 - 1
    edges = [0, 1, 2**11 - 1, 2**11, 2**53, mask >> 1, mask - 2**11, mask]
    words = np.concatenate([np.array(edges, dtype=np.uint64),
                            np.random.default_rng(38).integers(0, mask, 70000, dtype=np.uint64,
                                                               endpoint=True)])
    for start in (-1, 0, 2**40):
        fast = _skips(monkeypatch, True, words, scale, start)
        slow = _skips(monkeypatch, False, words, scale, start)
        assert np.array_equal(fast, slow), (scale, start)
        assert fast[0] == start + 1 + int(-np.log(2.0**-53) * scale)   # word 0: u = 2**-53


def test_choose_by_skips_is_the_same_on_both_implementations(monkeypatch):
    import samplegen.udfs.rng as rng_module
    if rng_module._KERNEL is None:
        pytest.skip("the compiled Philox kernel is not built here")
    got = []
    for kernel in (rng_module._KERNEL, None):
        monkeypatch.setattr(rng_module, "_KERNEL", kernel)
        got.append(choose(batch_generator(5, 3, STREAM_APPLY), 3 * 10**6, 400000).copy())
    assert np.array_equal(got[0], got[1])
