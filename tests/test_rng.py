"""The RNG contract: every number is a pure function of (seed, stream, position),
and every distribution is drawn by a frozen algorithm."""
import itertools
import math
import os
import sys

import numpy as np
import pytest

from samplegen.udfs.builtin import HoldOut, KFold
from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.rng import (
    LANES,
    SAMPLER_VERSION,
    KeyedRNG,
    PositionRNG,
    Purpose,
    SkipAheadRNG,
    check_seed,
    seed_key,
    splitmix64,
    stream,
    to_unit,
)

from .stats import ALPHA, chisq_gof, chisq_sf

MASK = (1 << 64) - 1


def philox4x64_10(counter, key):
    """Reference Philox4x64-10 (Salmon et al., SC'11), written from the spec."""
    m0, m1 = 0xD2E7470EE14C6C93, 0xCA5A826395121157
    w0, w1 = 0x9E3779B97F4A7C15, 0xBB67AE8584CAA73B
    c, k = list(counter), list(key)
    for r in range(10):
        if r:
            k = [(k[0] + w0) & MASK, (k[1] + w1) & MASK]
        p0, p1 = m0 * c[0], m1 * c[2]
        c = [(p1 >> 64) ^ c[1] ^ k[0], p1 & MASK, (p0 >> 64) ^ c[3] ^ k[1], p0 & MASK]
    return c


# Known answers published with Random123 (kat_vectors, philox4x64 with 10 rounds).
RANDOM123_KAT = [
    ((0, 0, 0, 0), (0, 0),
     (0x16554d9eca36314c, 0xdb20fe9d672d0fdc, 0xd7e772cee186176b, 0x7e68b68aec7ba23b)),
    ((MASK, MASK, MASK, MASK), (MASK, MASK),
     (0x87b092c3013fe90b, 0x438c3c67be8d0224, 0x9cc7d7c69cd777b6, 0xa09caebf594f0ba0)),
    ((0x243f6a8885a308d3, 0x13198a2e03707344, 0xa4093822299f31d0, 0x082efa98ec4e6c89),
     (0x452821e638d01377, 0xbe5466cf34e90c6c),
     (0xa528f45403e61d95, 0x38c72dbd566e9788, 0xa5a1610e72fd18b5, 0x57bd43b5e52b7fe6)),
]


@pytest.mark.parametrize("counter,key,expected", RANDOM123_KAT)
def test_reference_philox_matches_random123(counter, key, expected):
    assert tuple(philox4x64_10(counter, key)) == expected


def _key(rng):
    return [int(k) for k in rng.key]


def test_lane_blocks_are_philox_at_the_documented_counter():
    rng = PositionRNG(2024)
    sid = stream(Purpose.HOLDOUT, 3, 5)
    got = rng.block(sid, 10, 14)
    for i, position in enumerate(range(10, 14)):
        counter = (position, (Purpose.HOLDOUT << 48) | 5, 3, 0)
        assert [int(w) for w in got[i]] == philox4x64_10(counter, _key(rng))


def test_position_zero_and_large_positions():
    rng = PositionRNG(1)
    sid = stream(Purpose.FOLD, 0)
    assert [int(w) for w in rng.block(sid, 0, 1)[0]] == \
        philox4x64_10((0, Purpose.FOLD << 48, 0, 0), _key(rng))
    big = (1 << 63) + 12345
    assert [int(w) for w in rng.block(sid, big, big + 1)[0]] == \
        philox4x64_10((big, Purpose.FOLD << 48, 0, 0), _key(rng))


def test_draws_use_counters_disjoint_from_lane_blocks():
    rng = PositionRNG(99)
    sid = stream(Purpose.BOOTSTRAP_NODE, 2, 7)
    words = rng.draws(sid, 41).raw(8)
    expected = philox4x64_10((0, (Purpose.BOOTSTRAP_NODE << 48) | 7, 2, 42), _key(rng)) + \
        philox4x64_10((1, (Purpose.BOOTSTRAP_NODE << 48) | 7, 2, 42), _key(rng))
    assert [int(w) for w in words] == expected


def _sequence(draws):
    """A mixed sequence of draws (every method, scalar and vector)."""
    return (draws.integers(0, 1000, 5).tolist(), draws.integers(7), draws.binomial(1000, 0.3),
            draws.random(), draws.subset(5000, 40).tolist(), draws.standard_normal(3).tolist(),
            draws.hypergeometric(30, 50, 20), draws.raw())


def test_keyed_draws_equal_fresh_ones():
    rng = PositionRNG(4)
    sid = stream(Purpose.BOOTSTRAP_CHUNK, 3)
    for position in (0, 9, 2**40):
        expected = _sequence(rng.draws(sid, position))
        assert _sequence(rng.keyed(sid, position)) == expected
    assert rng.keyed(sid, 1) is rng.keyed(sid, 2)


def test_seed_key_is_hashed_and_pinned():
    # Known answers (numpy's SeedSequence, pinned here so that a change of it
    # cannot go unnoticed): the key of every run depends on them.
    assert [hex(int(k)) for k in seed_key(0)] == ["0xdb2cd7e7b0f478be", "0xabf4641a2c71ba49"]
    assert [hex(int(k)) for k in seed_key(12345)] == ["0xb5ae6482a03d837c", "0xbbe2996ffa1f7a2f"]
    assert [hex(int(k)) for k in seed_key(2**64 - 1)] == ["0xaebca151928cad0d",
                                                          "0x119c30448638dc7a"]
    assert not np.array_equal(seed_key(1), seed_key(2))


def test_splitmix64_known_answers():
    # SplitMix64 (Steele, Lea, Flood 2014): the published outputs from states
    # 0 and 1234567 (state advancing by the golden gamma).
    gamma = 0x9E3779B97F4A7C15
    for seed, outputs in [(0, [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4, 0x06C45D188009454F]),
                          (1234567, [6457827717110365317, 3203168211198807973, 9817491932198370423,
                                     4593380528125082431, 16408922859458223821])]:
        states = np.array([(seed + i * gamma) & MASK for i in range(len(outputs))], np.uint64)
        assert [int(x) for x in splitmix64(states)] == outputs


def test_describe_names_the_stream_version_not_numpy():
    info = PositionRNG(3).describe()
    assert info["streams"] == SAMPLER_VERSION and info["generator"] == "Philox4x64-10"
    assert np.__version__ not in str(info)


# -- frozen distributions: the algorithms, checked against references written
# -- from their definitions, and known answers ------------------------------------
def _draws(seed=5, index=1, position=3):
    return PositionRNG(seed).draws(stream(Purpose.USER, index), position)


def _halves(words):
    for w in words:
        yield int(w) & 0xFFFFFFFF
        yield int(w) >> 32


def _lemire_reference(words, n, count):
    """Lemire's method on 32-bit halves (low half first), from the definition."""
    threshold = (1 << 32) % n
    out = []
    for x in _halves(words):
        if (x * n) & 0xFFFFFFFF >= threshold:
            out.append((x * n) >> 32)
    return out[:count]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 1000, 3 * 2**30 + 1, 2**32])
def test_integers_are_lemire_on_halves(n):
    words = _draws().raw(400)
    for count in (1, 5, 32, 33, 100):
        got = _draws().integers(0, n, count).tolist()
        assert got == _lemire_reference(words, n, count)
    assert _draws().integers(n) == _lemire_reference(words, n, 1)[0]
    shifted = [10 + v for v in _lemire_reference(words, n, 3)]
    assert _draws().integers(10, 10 + n, 3).tolist() == shifted


@pytest.mark.parametrize("n", [2**32 + 1, 2**40 + 3, 2**63])
def test_wide_integers_are_top_bits_with_rejection(n):
    words = [int(w) >> (64 - (n - 1).bit_length()) for w in _draws().raw(1000)]
    expected = [w for w in words if w < n]
    for count in (1, 7, 40, 100):
        assert _draws().integers(0, n, count).tolist() == expected[:count]


def test_python_and_vectorized_draws_agree():
    # Small draws run in pure Python (less overhead); they must draw exactly
    # what the vectorized code draws, and leave the stream at the same word.
    import samplegen.udfs.rng as rng_module
    for seed in range(40):
        for n, count in [(5, 3), (2**32 - 5, 32), (2**33 + 1, 17), (97, 1)]:
            a, b = _draws(seed), _draws(seed)
            vector = b._below32(n, count) if n <= 2**32 else b._below64(n, count)
            assert a._below_list(n, count) == vector.tolist() and a.raw() == b.raw()
        for population, k in [(6, 3), (1000, 20), (40, 32), (2**34, 30)]:
            a, b = _draws(seed), _draws(seed)
            small = a.subset(population, k)
            saved, rng_module._SMALL = rng_module._SMALL, 0
            try:
                assert np.array_equal(small, b.subset(population, k)) and a.raw() == b.raw()
            finally:
                rng_module._SMALL = saved


def test_random_is_the_top_53_bits():
    words = _draws().raw(10)
    assert _draws().random(10).tolist() == [(int(w) >> 11) * 2.0**-53 for w in words]
    assert _draws().random() == (int(words[0]) >> 11) * 2.0**-53


def test_standard_normal_is_kinderman_monahan():
    m = 40 + 40 // 2 + 16                          # one round of attempts for 40 values
    words = [int(w) for w in _draws().raw(2 * m)]
    expected = []
    for w0, w1 in zip(words[:m], words[m:]):
        u = ((w0 >> 11) + 1) * 2.0**-53
        v = ((w1 >> 11) * 2.0**-52 - 1.0) * 0.8578
        x = v / u
        if x * x <= -4.0 * math.log(u):
            expected.append(x)
    assert _draws().standard_normal(40).tolist() == expected[:40]


def test_binomial_and_hypergeometric_are_numpy_legacy():
    d = _draws()
    legacy = np.random.RandomState(np.random.Philox(key=PositionRNG(5).key,
                                                    counter=d.bit_generator.state["state"]["counter"]))
    assert d.binomial(1000, 0.3, 5).tolist() == legacy.binomial(1000, 0.3, 5).tolist()
    assert d.hypergeometric(40, 60, 30) == legacy.hypergeometric(40, 60, 30)
    assert d.binomial(10**9, 0.25) == legacy.binomial(10**9, 0.25)


def test_known_answers():
    # The frozen algorithms on one stream.  A change here changes samples:
    # see SAMPLER_VERSION (udfs/rng.py) and tests/test_golden.py.
    d = PositionRNG(7).draws(stream(Purpose.USER, 1), 5)
    assert d.raw(2).tolist() == [13665304568814855054, 2758822236919127166]
    assert d.random(2).tolist() == [0.5025169752454619, 0.6351958276647753]
    assert d.integers(10, size=6).tolist() == [7, 3, 2, 6, 9, 7]
    assert d.integers(3) == 0
    assert d.integers(2**40, size=2).tolist() == [514239323108, 292381387423]
    assert d.subset(1000, 5).tolist() == [60, 64, 183, 286, 450]
    assert d.subset(10**6, 40).tolist()[:5] == [6739, 25667, 32395, 39474, 65346]
    assert d.binomial(1000, 0.3) == 291
    assert d.hypergeometric(50, 60, 30) == 15
    assert d.standard_normal(3).tolist() == [0.24166519285864277, -1.7032533622052428,
                                             0.22535006253562775]


# -- the distributions are right ---------------------------------------------------------
def test_integers_are_uniform():
    d = _draws(11)
    for n, draws in [(7, 70000), (1000, 200000), (3 * 2**30 + 1, 70000)]:
        values = d.integers(0, n, draws)
        assert values.min() >= 0 and values.max() < n
        cells = min(n, 100)
        counts = np.bincount((values * cells // n).astype(np.int64), minlength=cells)
        expected = np.array([-(-(c + 1) * n // cells) + (-c * n // cells) for c in range(cells)])
        assert chisq_gof(counts, expected * draws / n) > ALPHA / 3


def test_below_is_lemire_per_bound_with_rejected_values_drawn_again_in_order():
    """Each value takes the next half (low half of each word first); the
    values whose half was rejected take the next halves, round after round,
    in the order of the values: the reference, one half at a time."""
    bounds = [3, 2**32, 1, 3 * 2**30 + 1, 7, 3 * 2**30 + 1, 2**31 + 5] * 20
    words = [int(w) for w in _draws().raw(400)]
    halves = [h for w in words for h in (w & 0xFFFFFFFF, w >> 32)]
    expected, todo, at = [None] * len(bounds), list(range(len(bounds))), 0
    while todo:
        round_at, rejected = at, []
        for i in todo:
            n, x = bounds[i], halves[at]
            at += 1
            if (x * n) & 0xFFFFFFFF >= (1 << 32) % n:
                expected[i] = (x * n) >> 32
            else:
                rejected.append(i)
        at = round_at + 2 * ((len(todo) + 1) // 2)      # a round takes whole words
        todo = rejected
    assert _draws().below(bounds).tolist() == expected


def test_below_is_uniform_for_each_bound():
    d = _draws(13)
    bounds = np.tile([2, 5, 1000, 3 * 2**30 + 1], 50_000)
    values = d.below(bounds)
    assert (values >= 0).all() and (values < bounds).all()
    for j, n in enumerate([2, 5, 1000, 3 * 2**30 + 1]):
        mine = values[j::4]
        cells = min(n, 50)
        counts = np.bincount((mine * cells // n).astype(np.int64), minlength=cells)
        expected = np.array([-(-(c + 1) * n // cells) + (-c * n // cells) for c in range(cells)])
        assert chisq_gof(counts, expected * mine.size / n) > ALPHA / 4
    with pytest.raises(ParameterError, match=r"\[1, 2\*\*32\]"):
        d.below([0, 3])


def test_subset_is_a_uniform_subset_on_every_path():
    # All C(7, 3) = 35 subsets equally likely, and all C(8, 6) = 28 (the
    # complement path): chi-square, level ALPHA each.
    d = _draws(12)
    for population, k, reps in [(7, 3, 14000), (8, 6, 11200)]:
        subsets = {s: i for i, s in enumerate(itertools.combinations(range(population), k))}
        counts = np.zeros(len(subsets))
        for _ in range(reps):
            got = d.subset(population, k)
            assert np.all(np.diff(got) > 0)
            counts[subsets[tuple(got.tolist())]] += 1
        assert chisq_gof(counts, np.full(len(subsets), reps / len(subsets))) > ALPHA
    # large k (several rounds and a trimmed surplus): sorted, distinct, in range,
    # every position about equally often
    counts = np.zeros(3000)
    for _ in range(200):
        got = d.subset(3000, 1400)
        assert got.size == 1400 and np.all(np.diff(got) > 0) and 0 <= got[0] and got[-1] < 3000
        counts[got] += 1
    p = 1400 / 3000
    stat = float(np.sum((counts - 200 * p) ** 2) / (200 * p * (1 - p)))
    assert ALPHA < chisq_sf(stat, 2999) < 1 - ALPHA


def test_standard_normal_is_normal():
    x = _draws(13).standard_normal(200000)
    edges = np.array([math.sqrt(2) * _erfinv(2 * q - 1) for q in np.arange(1, 40) / 40])
    counts = np.bincount(np.searchsorted(edges, x), minlength=40)
    assert chisq_gof(counts, np.full(40, x.size / 40)) > ALPHA
    assert _draws(13).standard_normal((3, 4)).shape == (3, 4)


def _erfinv(y):
    lo, hi = -10.0, 10.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if math.erf(mid) < y else (lo, mid)
    return 0.5 * (lo + hi)


def test_bad_draw_arguments_are_refused():
    d = _draws()
    with pytest.raises(ParameterError, match="integers"):
        d.integers(5, 5)
    with pytest.raises(ParameterError, match="integers"):
        d.integers(0, 2**63 + 1)
    with pytest.raises(ParameterError, match="k must be"):
        d.subset(5, 6)
    with pytest.raises(ParameterError, match="size"):
        d.integers(5, size=-1)
    assert d.subset(5, 0).size == 0 and d.subset(5, 5).tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("seed", [0, 7, 2**64 - 1])
def test_values_do_not_depend_on_how_a_range_is_split(seed):
    rng = PositionRNG(seed)
    sid = stream(Purpose.HOLDOUT, 1)
    whole = rng.block(sid, 1000, 6000)
    cuts = np.sort(_draws(seed).subset(4999, 20) + 1001)
    edges = [1000, *cuts.tolist(), 6000]
    pieces = [rng.block(sid, a, b) for a, b in zip(edges[:-1], edges[1:])]
    assert np.array_equal(np.concatenate(pieces), whole)
    # ... nor on another PositionRNG instance, nor on calls in between
    other = PositionRNG(seed)
    other.block(stream(Purpose.FOLD), 0, 77)
    assert np.array_equal(other.block(sid, 3000, 3100), whole[2000:2100])


def test_streams_are_distinct():
    rng = PositionRNG(5)
    blocks = [rng.block(stream(p, i, s), 0, 512) for p, i, s in
              [(Purpose.HOLDOUT, 0, 0), (Purpose.HOLDOUT, 1, 0), (Purpose.HOLDOUT, 0, 1),
               (Purpose.FOLD, 0, 0), (Purpose.USER, 0, 0)]]
    words = np.concatenate([b.ravel() for b in blocks])
    assert np.unique(words).size == words.size  # 64-bit collisions: ~1e-13


def test_seeds_are_distinct():
    a = PositionRNG(1).block(stream(Purpose.FOLD), 0, 256)
    b = PositionRNG(2).block(stream(Purpose.FOLD), 0, 256)
    assert not np.intersect1d(a.ravel(), b.ravel()).size


def test_uniform_is_in_unit_interval_and_uses_top_53_bits():
    rng = PositionRNG(3)
    sid = stream(Purpose.USER, 9)
    u = rng.uniform(sid, 0, 100000, lane=2)
    assert u.min() >= 0.0 and u.max() < 1.0
    raw = rng.lane(sid, 0, 100000, lane=2)
    assert np.array_equal(u, (raw >> np.uint64(11)) * 2.0 ** -53)
    assert to_unit(np.array([MASK], np.uint64))[0] < 1.0


def test_skip_ahead_sequence_is_lane_j_mod_4_of_block_j_div_4():
    rng = PositionRNG(11)
    seq = SkipAheadRNG(rng)
    lanes = rng.block(stream(Purpose.SCALAR), 0, 5)
    expected = to_unit(lanes.ravel())
    seq.skip(3)
    got = [seq.random() for _ in range(10)]
    assert got == list(expected[3:13])
    seq.skip(0)
    assert seq.random() == expected[0]
    # binomial: numpy's legacy algorithm keyed at the current position, which it does not move
    seq.skip(7)
    keyed = rng.draws(stream(Purpose.SCALAR_DRAW), 7)
    assert seq.binomial(50, 0.4) == keyed.binomial(50, 0.4) and seq.random() == expected[7]


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, "x", None, True])
def test_bad_seeds_are_refused(bad):
    with pytest.raises(ParameterError, match="seed"):
        check_seed(bad)


def test_bad_streams_and_positions_are_refused():
    with pytest.raises(ParameterError):
        stream(1 << 16)
    with pytest.raises(ParameterError):
        stream(Purpose.USER, sub=1 << 48)
    with pytest.raises(ParameterError):
        PositionRNG(1).block(stream(Purpose.USER), 5, 4)
    assert PositionRNG(1).block(stream(Purpose.USER), 4, 4).shape == (0, LANES)


# -- lane blocks at arbitrary positions ------------------------------------------

AT_STREAMS = [stream(Purpose.HOLDOUT, 0), stream(Purpose.HOLDOUT, 3, 5), stream(Purpose.FOLD),
              stream(Purpose.SCALAR, 7), stream(Purpose.USER, 2**64 - 1, 2**48 - 1)]


def _one_by_one(rng, sid, positions):
    """The specification of ``at``: ``block(p, p + 1)`` for each position."""
    blocks = {p: rng.block(sid, p, p + 1)[0] for p in set(positions.tolist())}
    return np.array([blocks[p] for p in positions.tolist()], dtype=np.uint64).reshape(-1, LANES)


def _range(start, n):
    return np.uint64(start) + np.arange(n, dtype=np.uint64)


@pytest.mark.parametrize("seed", [0, 7, 2**64 - 1])
def test_at_equals_block_over_ranges(seed):
    rng = PositionRNG(seed)
    picks = np.random.default_rng(seed % 1000)
    for sid in AT_STREAMS:
        for n in (1, 3, 200, 300, 5000):            # short and long runs
            for start in (0, int(picks.integers(0, 2**63)), 2**64 - 1 - n):
                got = rng.at(sid, _range(start, n))
                assert got.dtype == np.uint64 and got.shape == (n, LANES)
                assert np.array_equal(got, rng.block(sid, start, start + n)), (sid, start, n)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2**64 - 1])
def test_at_equals_block_at_scattered_positions(seed):
    rng = PositionRNG(seed)
    picks = np.random.default_rng(seed % 1000 + 1)
    for sid in AT_STREAMS[:3]:
        # more than one pass of the array kernel, the extremes, repeats, any order
        positions = np.concatenate([picks.integers(0, 2**64 - 1, 40000, dtype=np.uint64),
                                    _range(0, 3), _range(2**64 - 4, 3)])
        positions = np.concatenate([positions, positions[picks.integers(0, positions.size, 500)]])
        picks.shuffle(positions)
        assert np.array_equal(rng.at(sid, positions), _one_by_one(rng, sid, positions))


def test_at_mixes_runs_and_scattered_positions():
    rng = PositionRNG(42)
    picks = np.random.default_rng(42)
    sid = stream(Purpose.HOLDOUT, 1)
    pieces = [_range(10**6, 1000), picks.integers(0, 2**40, 700, dtype=np.uint64),
              _range(2**64 - 1 - 600, 600), _range(5, 256), _range(5, 256),
              picks.integers(0, 2**64 - 1, 3, dtype=np.uint64), _range(0, 2000)[::-1]]
    positions = np.concatenate(pieces)
    expected = _one_by_one(rng, sid, positions)
    assert np.array_equal(rng.at(sid, positions), expected)
    order = picks.permutation(positions.size)
    assert np.array_equal(rng.at(sid, positions[order]), expected[order])


def test_at_gives_the_same_with_or_without_its_path_for_runs(monkeypatch):
    import samplegen.udfs.rng as rng_module
    rng = PositionRNG(12)
    sid = stream(Purpose.HOLDOUT, 2)
    positions = np.concatenate([_range(2**50, 20000), _range(3, 300)])
    with_runs = rng.at(sid, positions)
    monkeypatch.setattr(rng_module, "_AT_RUN", 2**63)
    assert np.array_equal(rng.at(sid, positions), with_runs)
    assert np.array_equal(with_runs[:20000], rng.block(sid, 2**50, 2**50 + 20000))

# -- the two implementations of Philox at arbitrary counters ---------------------
# udfs/rng.py computes PositionRNG.block and .at with the compiled kernel
# (udfs/_philox.c) when it is built, else with numpy arrays; both are tested
# here whichever was chosen at import (the compiled one is skipped only where
# it was not built).

import samplegen.udfs.rng as rng_module  # noqa: E402

PATHS = ["compiled", "numpy"]
EDGE = [0, 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, MASK - 1, MASK]


@pytest.fixture(params=PATHS)
def philox_path(request, monkeypatch):
    """Run a test with PositionRNG on one implementation (the other switched off)."""
    if request.param == "compiled":
        if rng_module._KERNEL is None:
            pytest.skip("the compiled Philox kernel is not built here")
    else:
        monkeypatch.setattr(rng_module, "_KERNEL", None)
    return request.param


def _numpy_philox(key, counter, blocks=1):
    """numpy's own Philox4x64-10 (C) from a 256-bit counter: `blocks` x 4 words."""
    words = [((counter - 1) >> (64 * i)) & MASK for i in range(4)]  # numpy adds 1 first
    bg = np.random.Philox(key=np.array(key, dtype=np.uint64),
                          counter=np.array(words, dtype=np.uint64))
    return bg.random_raw(4 * blocks).reshape(blocks, 4)


def _path_lanes(path, key, words, positions):
    """Philox at counters (positions[i], *words) by the implementation *path*."""
    out = np.empty((positions.size, 4), dtype=np.uint64)
    if path == "compiled":
        rng_module._KERNEL.lanes(*key, *words, positions, out)
    else:
        counter = sum(w << (64 * (i + 1)) for i, w in enumerate(words))
        rng_module._philox_lanes(key, counter, positions, out)
    return out


def _edge_and_random_cases(count):
    """(key, counter words 1..3, positions): every word at its edges, then random."""
    picks = np.random.default_rng(38)
    cases = [((k0, k1), (w, w, w), np.array(EDGE[:-1], dtype=np.uint64))
             for k0, k1 in [(0, 0), (MASK, MASK), (MASK, 1)] for w in EDGE]
    cases += [((0, MASK), (MASK, 0, MASK), np.array([MASK - 1, 0], dtype=np.uint64))]
    for _ in range(count):
        key = tuple(int(x) for x in picks.integers(0, MASK, 2, dtype=np.uint64, endpoint=True))
        words = tuple(int(x) for x in picks.integers(0, MASK, 3, dtype=np.uint64,
                                                     endpoint=True))
        positions = picks.integers(0, MASK - 1, 37, dtype=np.uint64, endpoint=True)
        cases.append((key, words, positions))
    return cases


@pytest.mark.parametrize("path", PATHS)
def test_both_implementations_give_numpys_philox_words(path):
    if path == "compiled" and rng_module._KERNEL is None:
        pytest.skip("the compiled Philox kernel is not built here")
    for key, words, positions in _edge_and_random_cases(60):
        got = _path_lanes(path, key, words, positions)
        for i, p in enumerate(positions.tolist()):
            counter = p | sum(w << (64 * (j + 1)) for j, w in enumerate(words))
            assert np.array_equal(got[i], _numpy_philox(key, counter)[0]), (key, words, p)


def test_compiled_and_numpy_implementations_agree_on_random_counters():
    if rng_module._KERNEL is None:
        pytest.skip("the compiled Philox kernel is not built here")
    picks = np.random.default_rng(2038)
    for key, words, _ in _edge_and_random_cases(200):
        positions = picks.integers(0, MASK - 1, 3000, dtype=np.uint64, endpoint=True)
        positions[:len(EDGE) - 1] = EDGE[:-1]
        assert np.array_equal(_path_lanes("compiled", key, words, positions),
                              _path_lanes("numpy", key, words, positions)), (key, words)


@pytest.mark.parametrize("start,words", [(MASK - 2, (MASK, MASK, 5)), (MASK, (MASK, MASK, MASK)),
                                         (MASK - 1, (MASK, 3, 0)), (0, (0, 0, 0)),
                                         (2**32 - 2, (2**63, 1, MASK))])
def test_compiled_ranges_carry_like_a_256_bit_counter(start, words):
    if rng_module._KERNEL is None:
        pytest.skip("the compiled Philox kernel is not built here")
    key = (0x0123456789ABCDEF, MASK)
    out = np.empty((6, 4), dtype=np.uint64)
    rng_module._KERNEL.lanes_range(*key, *words, start, out)
    counter = start | sum(w << (64 * (j + 1)) for j, w in enumerate(words))
    assert np.array_equal(out, _numpy_philox(key, counter, 6))


def test_compiled_kernel_rejects_what_is_not_64_bit_words():
    if rng_module._KERNEL is None:
        pytest.skip("the compiled Philox kernel is not built here")
    kernel = rng_module._KERNEL
    out = np.empty((2, 4), dtype=np.uint64)
    with pytest.raises(TypeError):
        kernel.lanes(0, 0, 0, 0, 0, np.array([1, 2], dtype=np.float64), out)
    with pytest.raises(ValueError):
        kernel.lanes(0, 0, 0, 0, 0, np.array([1, 2, 3], dtype=np.uint64), out)
    with pytest.raises(OverflowError):
        kernel.lanes(-1, 0, 0, 0, 0, np.array([1, 2], dtype=np.uint64), out)
    with pytest.raises(ValueError):
        kernel.lanes_range(0, 0, 0, 0, 0, 0, np.empty(5, dtype=np.uint64))
    read_only = np.zeros((1, 4), dtype=np.uint64)
    read_only.setflags(write=False)
    with pytest.raises((BufferError, ValueError)):
        kernel.lanes_range(0, 0, 0, 0, 0, 0, read_only)
    with pytest.raises((BufferError, ValueError)):   # not contiguous
        kernel.lanes(0, 0, 0, 0, 0, np.arange(4, dtype=np.uint64)[::2], out)


@pytest.mark.parametrize("seed", [0, 2**64 - 1])
def test_block_and_at_are_the_same_on_both_implementations(seed, philox_path):
    rng = PositionRNG(seed)
    picks = np.random.default_rng(seed % 97 + 3)
    positions = np.concatenate([picks.integers(0, MASK - 1, 5000, dtype=np.uint64),
                                _range(2**40, 600), _range(MASK - 300, 300), _range(0, 3)])
    for sid in AT_STREAMS:
        specification = np.array([philox4x64_10((p, sid.purpose << 48 | sid.sub, sid.index, 0),
                                                 _key(rng))
                                  for p in positions[::97].tolist()], dtype=np.uint64)
        got = rng.at(sid, positions)
        assert np.array_equal(got[::97], specification)
        assert np.array_equal(got[5000:5600], rng.block(sid, 2**40, 2**40 + 600))
        assert np.array_equal(got[5600:5900], rng.block(sid, MASK - 300, MASK))
        assert np.array_equal(rng.block(sid, 0, 3), got[5900:])
        assert rng.block(sid, 7, 7).shape == (0, LANES)


def test_kernel_choice_at_import(monkeypatch):
    """SAMPLEGEN_PHILOX=numpy forces the numpy path; a kernel that does not
    give numpy's words, or fails, is not used."""
    monkeypatch.setenv("SAMPLEGEN_PHILOX", "numpy")
    assert rng_module._load_kernel() is None
    monkeypatch.delenv("SAMPLEGEN_PHILOX")

    class Wrong:
        @staticmethod
        def lanes(k0, k1, c1, c2, c3, positions, out):
            out[...] = 1

        lanes_range = lanes

    class Broken:
        pass

    assert not rng_module._kernel_agrees(Wrong())
    assert not rng_module._kernel_agrees(Broken())
    if rng_module._KERNEL is not None:
        kernel = rng_module._KERNEL

        class WrongSkips:      # right words, wrong skips: not used either
            lanes, lanes_range = staticmethod(kernel.lanes), staticmethod(kernel.lanes_range)
            open_unit = staticmethod(kernel.open_unit)

            @staticmethod
            def skip_sum(logs, factor, carry, out):
                out[...] = carry
                return carry

        assert not rng_module._kernel_agrees(WrongSkips())
        assert rng_module._kernel_agrees(rng_module._KERNEL)
        assert rng_module._load_kernel() is not None
        assert rng_module.PHILOX_KERNEL == "compiled"


def test_a_zip_import_finds_the_kernel_of_an_installed_samplegen(tmp_path, monkeypatch):
    """When samplegen comes from a shipped zip (no compiled module), the kernel
    of a samplegen installed in the node's Python is found on sys.path."""
    if rng_module._KERNEL is None:
        pytest.skip("the compiled Philox kernel is not built here")
    import shutil
    built = rng_module._KERNEL.__file__
    place = tmp_path / "samplegen" / "udfs"
    place.mkdir(parents=True)
    shutil.copy(built, place / os.path.basename(built))
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing.zip"), str(tmp_path)])
    kernel = rng_module._installed_kernel()
    assert kernel is not None and rng_module._kernel_agrees(kernel)
    monkeypatch.setattr(sys, "path", [str(tmp_path / "nothing.zip")])
    assert rng_module._installed_kernel() is None


def test_at_takes_any_integer_dtype_and_nothing_else():
    rng = PositionRNG(3)
    sid = stream(Purpose.FOLD)
    values = [0, 1, 5, 2**15 - 1, 17, 5]
    expected = _one_by_one(rng, sid, np.array(values, dtype=np.uint64))
    for dtype in (np.uint64, np.int64, np.uint32, np.int32, np.int16):
        assert np.array_equal(rng.at(sid, np.array(values, dtype=dtype)), expected), dtype
    assert np.array_equal(rng.at(sid, values), expected)            # a list of ints
    big = np.array([2**63, 2**64 - 2], dtype=np.uint64)
    assert np.array_equal(rng.at(sid, big), _one_by_one(rng, sid, big))
    for empty in (np.empty(0, np.uint64), np.empty(0, np.int64), []):
        got = rng.at(sid, empty)
        assert got.shape == (0, LANES) and got.dtype == np.uint64
    for bad in (np.array([3, -1]), np.array([2**64 - 1], dtype=np.uint64),
                np.array([1.0, 2.0]), np.array([True]), np.array([[1, 2]]), np.int64(4),
                np.array([2**64], dtype=object), [1, 2**64]):
        with pytest.raises(ParameterError, match="positions"):
            rng.at(sid, bad)


def test_keyed_rng_is_at_through_a_table_of_positions():
    rng = PositionRNG(8)
    picks = np.random.default_rng(8)
    positions = picks.integers(0, 2**63, 1000).astype(np.int64)
    view = KeyedRNG(rng, positions)
    sid = stream(Purpose.USER, 4)
    assert np.array_equal(view.block(sid, 0, 1000), rng.at(sid, positions))
    assert np.array_equal(view.block(sid, 250, 260), rng.at(sid, positions[250:260]))
    assert view.block(sid, 7, 7).shape == (0, LANES)
    assert np.array_equal(view.lane(sid, 3, 900, lane=2), rng.at(sid, positions[3:900])[:, 2])
    assert np.array_equal(view.uniform(sid, 3, 900, lane=1),
                          to_unit(rng.at(sid, positions[3:900])[:, 1]))
    # what is not per row is the wrapped generator's
    assert view.seed == rng.seed and np.array_equal(view.key, rng.key)
    assert view.describe() == rng.describe()
    draw = stream(Purpose.BOOTSTRAP_NODE, 1, 2)
    assert _sequence(view.draws(draw, 5)) == _sequence(rng.draws(draw, 5))
    assert _sequence(view.keyed(draw, 5)) == _sequence(rng.draws(draw, 5))
    for start, stop in ((0, 1001), (5, 4), (-1, 3)):
        with pytest.raises(ParameterError, match="keyed rows"):
            view.block(sid, start, stop)
    with pytest.raises(ParameterError, match="positions"):
        KeyedRNG(rng, np.array([1, -2]))


def _canonical(row, sample, relpos):
    """(row id, sample, relpos) triples in one canonical order."""
    order = np.lexsort((relpos, sample, row))
    return row[order], sample[order], relpos[order]


def _by_row(rows, occ):
    """Occurrences as canonical triples; *rows* maps their offsets to row ids."""
    offset, sample, relpos = (np.asarray(a) for a in occ)
    return _canonical(rows[offset], sample, relpos)


KEYED_UDFS = [
    lambda n: HoldOut(n, ratio=0.6, repeats=3, fraction=0.7),
    lambda n: HoldOut(n, ratio=0.6, repeats=3, fraction=0.7, exact=False),
    lambda n: KFold(n, k=5),
    lambda n: KFold(n, k=5, balanced=False, repeats=2),
    lambda n: KFold(n, k=5, naive=True),
    lambda n: load_udf("samplegen.udfs.examples:bernoulli", n, {"p": 0.3}),
]


@pytest.mark.parametrize("make", KEYED_UDFS, ids=["holdout", "holdout-coins", "kfold",
                                                  "kfold-coins-repeated", "kfold-naive",
                                                  "bernoulli"])
def test_udfs_decide_keyed_rows_as_the_range_decides_those_row_ids(make):
    n_rows, seed = 20000, 31
    udf, rng = make(n_rows), PositionRNG(seed)
    picks = np.random.default_rng(seed)
    ids = picks.choice(n_rows, 6000, replace=False)            # shuffled, sparse
    # the range evaluation, as the block jobs do it: a few row ranges
    edges = [0, 4999, 5000, 12345, n_rows]
    ranged = [_by_row(np.arange(a, b), udf(a, b, rng)) for a, b in zip(edges[:-1], edges[1:])]
    row, sample, relpos = (np.concatenate(cols) for cols in zip(*ranged))
    keep = np.isin(row, ids)
    expected = _canonical(row[keep], sample[keep], relpos[keep])
    for occ in (udf.occurrences(0, ids.size, KeyedRNG(rng, ids)),
                udf(0, ids.size, KeyedRNG(rng, ids.astype(np.uint64)))):
        got = _by_row(ids, occ)
        for a, b in zip(got, expected):
            assert np.array_equal(a, b)
    assert np.unique(expected[0]).size > 0.2 * ids.size      # the comparison is not vacuous


def test_keyed_counters_borrow_like_256_bit_subtraction():
    """The draws' first counter less one, written out word by word, at the edges
    of every field (purpose, index, sub, position)."""
    top = 2**64 - 1
    for purpose, index, sub, position in itertools.product(
            [0, 1, 2**16 - 1], [0, 1, top], [0, 1, 2**48 - 1], [0, 1, top - 1]):
        counter = 0 | (purpose << 48 | sub) << 64 | index << 128 | (position + 1) << 192
        expected = [((counter - 1) >> (64 * i)) & MASK for i in range(4)]
        got = PositionRNG._keyed_counter((purpose, index, sub), position)
        assert got.tolist() == expected, (purpose, index, sub, position)


def test_long_raw_draws_are_numpys_words_and_leave_its_cursor(philox_path):
    """Draws.raw of many words (the compiled kernel past _KERNEL_RAW): the
    words of numpy's Philox stream from any cursor (mid-block, next to a
    carry out of word 0), and the cursor where numpy's would be."""
    from samplegen.udfs.rng import Draws
    rng = np.random.default_rng(38)
    for first in [0, 7, MASK - 3000, MASK - 1, MASK]:
        counter = np.array([first, 5, MASK, 9], dtype=np.uint64)
        ours = Draws(np.random.Philox(key=np.array([3, 4], np.uint64), counter=counter))
        theirs = np.random.Philox(key=np.array([3, 4], np.uint64), counter=counter)
        for _ in range(3):
            head = int(rng.integers(0, 4))
            assert np.array_equal(ours.raw(head), theirs.random_raw(head))
            size = int(rng.integers(rng_module._KERNEL_RAW, 3 * rng_module._KERNEL_RAW))
            assert np.array_equal(ours.raw(size), theirs.random_raw(size))
            assert ours.raw() == int(theirs.random_raw())
            assert ours.random(5).tolist() == (
                (theirs.random_raw(5) >> np.uint64(11)) * 2.0 ** -53).tolist()
