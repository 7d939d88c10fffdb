"""Hostile use of the time-biased samplers' public constructors and methods
(samplegen.tbs: R-TBS, T-TBS, B-TBS, the batched reservoir, the sliding
window, B-Chao): sizes and rates that are zero, negative, NaN, infinite or
of the wrong type, decays that increase, times that go backwards or are not
finite numbers, batches of the wrong type.  Each must be refused with one
TBSError (a ValueError) naming the parameter, and a refused update must
leave the sampler as it was.  (Single-parameter checks already in
tests/test_tbs_*.py are not repeated here.)"""
import numpy as np
import pytest

from samplegen.tbs import (
    BTBS,
    RTBS,
    TTBS,
    BatchedReservoir,
    BChao,
    Exponential,
    Polynomial,
    SlidingWindow,
    TBSError,
)

NAN, INF = float("nan"), float("inf")

KINDS = {
    "rtbs-exp": lambda: RTBS(10, Exponential(0.1), seed=1),
    "rtbs-general": lambda: RTBS(10, Polynomial(2, shift=1), seed=1),
    "ttbs": lambda: TTBS(10, Exponential(0.1), 100, seed=1),
    "btbs": lambda: BTBS(Exponential(0.1), seed=1),
    "reservoir": lambda: BatchedReservoir(10, seed=1),
    "window": lambda: SlidingWindow(10),
    "bchao": lambda: BChao(10, Exponential(1.5), seed=1),
}

SIZED = {
    "rtbs": lambda n: RTBS(n, Exponential(0.1), seed=1),
    "ttbs": lambda n: TTBS(n, Exponential(0.1), 100, seed=1),
    "reservoir": lambda n: BatchedReservoir(n, seed=1),
    "window": lambda n: SlidingWindow(n),
    "bchao": lambda n: BChao(n, Exponential(1.5), seed=1),
}


def _refused(call, starts):
    with pytest.raises(TBSError) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and message.startswith(starts), message
    assert isinstance(info.value, ValueError)
    return message


# -- sizes and rates -------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(SIZED))
@pytest.mark.parametrize("n", [0, -1, NAN, INF, 2.5, True, "3", None, np.float64(4.0)],
                         ids=repr)
def test_every_sampler_refuses_a_size_that_is_not_a_positive_integer(kind, n):
    _refused(lambda: SIZED[kind](n), f"n must be an integer >= 1, got {n!r}")


@pytest.mark.parametrize("kind", ["rtbs", "ttbs", "reservoir", "window", "bchao"])
@pytest.mark.parametrize("n", [0, -2, NAN, 2.5, "1"], ids=repr)
def test_resize_refuses_a_size_that_is_not_a_positive_integer(kind, n):
    s = SIZED[kind](10)
    s.update(np.arange(30), time=1.0)
    before = s.sample()
    _refused(lambda: s.resize(n), f"n must be an integer >= 1, got {n!r}")
    assert s.n == 10 and np.array_equal(s.sample(), before)


@pytest.mark.parametrize("value", [-1, NAN, INF, "100", None], ids=repr)
def test_ttbs_refuses_a_mean_batch_size_that_is_not_positive_and_finite(value):
    _refused(lambda: TTBS(10, Exponential(0.1), value, seed=1),
             f"mean_batch_size must be a finite number > 0, got {value!r}")


@pytest.mark.parametrize("value", [0, -1, NAN, INF], ids=repr)
def test_ttbs_refuses_a_batch_spacing_that_is_not_positive_and_finite(value):
    _refused(lambda: TTBS(10, Exponential(0.1), 100, seed=1, delta=value),
             f"delta must be a finite number > 0, got {value!r}")


@pytest.mark.parametrize("name, value, starts", [
    ("consolidation_rate", -1, "consolidation_rate must be a finite number > 0"),
    ("consolidation_rate", NAN, "consolidation_rate must be a finite number > 0"),
    ("consolidation_rate", INF, "consolidation_rate must be a finite number > 0"),
    ("delta2", 0, "delta2 must be a finite number > 0"),
    ("delta2", INF, "delta2 must be a finite number > 0"),
    ("delta1", NAN, "delta1 must be a finite number > 0 and < 1"),
    ("max_weight", NAN, "max_weight must be a finite number >= 10"),
    ("max_weight", INF, "max_weight must be a finite number >= 10"),
    ("max_weight", -5, "max_weight must be a finite number >= 10"),
])
def test_general_rtbs_refuses_rates_and_bounds_out_of_range(name, value, starts):
    _refused(lambda: RTBS(10, Polynomial(2), seed=1, **{name: value}),
             f"{starts}, got {value!r}")


@pytest.mark.parametrize("lam", [INF, -0.5, "fast", None], ids=repr)
def test_a_decay_rate_that_is_not_a_finite_non_negative_number_is_refused(lam):
    _refused(lambda: Exponential(lam), f"lam must be a finite number >= 0, got {lam!r}")


# -- decays ----------------------------------------------------------------------------------
def _cosine(a):
    return 0.5 + 0.5 * np.cos(np.asarray(a, dtype=np.float64))   # falls to 0 at pi, then rises


def _step_up(a):
    a = np.asarray(a, dtype=np.float64)
    return np.where(a < 5, 1.0, np.where(a < 10, 0.2, 0.6))


@pytest.mark.parametrize("decay", [_cosine, _step_up], ids=["cosine", "step-up"])
@pytest.mark.parametrize("make", [lambda d: RTBS(10, d, seed=1),
                                  lambda d: TTBS(10, d, 1000, seed=1),
                                  lambda d: BTBS(d, seed=1)], ids=["rtbs", "ttbs", "btbs"])
def test_a_decay_that_increases_somewhere_is_refused_by_every_sampler(decay, make):
    message = _refused(lambda: make(decay), f"decay '{decay.__name__}' must be non-increasing")
    assert " > f(" in message


def _exp_decay(a):
    return np.exp(-0.5 * np.asarray(a, dtype=np.float64))   # exponential, but not Exponential


@pytest.mark.parametrize("decay", [Polynomial(2), _exp_decay], ids=["polynomial", "callable"])
def test_bchao_refuses_any_decay_but_exponential(decay):
    _refused(lambda: BChao(10, decay, seed=1), "decay must be Exponential for B-Chao")


@pytest.mark.parametrize("decay", [0.5, None, "nope"], ids=repr)
def test_a_decay_that_is_not_a_function_is_refused(decay):
    message = _refused(lambda: RTBS(10, decay, seed=1), "")
    assert "decay" in message


# -- times -----------------------------------------------------------------------------------
def _snapshot(s):
    arrays, meta = s.to_state()
    return {k: v.copy() for k, v in arrays.items()}, meta


def _same(a, b):
    assert a[1] == b[1]
    assert sorted(a[0]) == sorted(b[0])
    for name in a[0]:
        assert np.array_equal(a[0][name], b[0][name]), name


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("time, starts", [
    (4.0, "time must increase from batch to batch, got 4.0 after 5.0"),
    (5.0, "time must increase from batch to batch, got 5.0 after 5.0"),
    (-INF, "time must be a finite number, got -inf"),
    (NAN, "time must be a finite number, got nan"),
    ("6", "time must be a finite number, got '6'"),
    (True, "time must be a finite number, got True"),
    (np.datetime64("2026-01-01"), "time must be a finite number"),
], ids=["backwards", "equal", "-inf", "nan", "string", "bool", "datetime"])
def test_every_sampler_refuses_a_time_that_does_not_move_forward(kind, time, starts):
    s = KINDS[kind]()
    s.update(np.arange(20), time=5.0)
    before = _snapshot(s)
    _refused(lambda: s.update(np.arange(20, 30), time=time), starts)
    _same(_snapshot(s), before)
    assert s.batches == 1 and s.time == 5.0
    s.update(np.arange(20, 30), time=6.0)                 # and it goes on
    assert s.batches == 2


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_first_time_must_be_a_finite_number_too(kind):
    s = KINDS[kind]()
    _refused(lambda: s.update(np.arange(3), time=NAN), "time must be a finite number, got nan")
    assert s.batches == 0 and s.time is None


# -- batches ---------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("batch, starts", [
    (np.zeros((3, 2)), "items must be a 1-D numpy array, got an array of shape (3, 2)"),
    (np.array([1, "a", None], dtype=object), "items must be a 1-D numpy array of ids or records"),
    (7, "items must be a 1-D numpy array"),
    (None, "items must be a 1-D numpy array"),
    ({"a": 1}, "items must be a 1-D numpy array"),
    ("abc", "items must be a 1-D numpy array"),
], ids=["2-d", "object", "scalar", "none", "dict", "string"])
def test_every_sampler_refuses_a_batch_that_is_not_a_1d_array(kind, batch, starts):
    s = KINDS[kind]()
    s.update(np.arange(20), time=1.0)
    before = _snapshot(s)
    _refused(lambda: s.update(batch, time=2.0), starts)
    _same(_snapshot(s), before)


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_sampler_refuses_items_of_another_dtype_than_the_first_batch(kind):
    s = KINDS[kind]()
    s.update(np.arange(20), time=1.0)
    before = _snapshot(s)
    _refused(lambda: s.update(np.array(["x", "y"]), time=2.0),
             "items must have dtype int64 like the earlier batches, got <U1")
    _refused(lambda: s.update(np.array([1.5, 2.5]), time=2.0),
             "items must have dtype int64 like the earlier batches, got float64")
    _same(_snapshot(s), before)
    s.update(np.array([], dtype=np.float64), time=2.0)    # no items: no dtype to check
    s.update(np.arange(20, 25, dtype=np.int32), time=3.0)  # a safe cast
    assert s.batches == 3


@pytest.mark.parametrize("kind", ["rtbs-exp", "rtbs-general", "ttbs", "btbs", "window"])
@pytest.mark.parametrize("items", [5, "abc", np.zeros((2, 2), dtype=np.int64)], ids=repr)
def test_remove_refuses_what_is_not_a_1d_array_of_items(kind, items):
    s = KINDS[kind]()
    s.update(np.arange(20), time=1.0)
    before = _snapshot(s)
    _refused(lambda: s.remove(items), "items must be a 1-D numpy array")
    _same(_snapshot(s), before)


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("other", [5, None, np.arange(3)], ids=["int", "none", "array"])
def test_merge_refuses_what_is_not_a_sampler_of_its_kind(kind, other):
    s = KINDS[kind]()
    s.update(np.arange(20), time=1.0)
    before = _snapshot(s)
    _refused(lambda: s.merge(other), "merge needs two samplers of one kind")
    _same(_snapshot(s), before)


# -- memory follows the items, not the size -----------------------------------------------------
@pytest.mark.parametrize("kind", ["window", "bchao", "reservoir", "rtbs"])
def test_a_huge_size_costs_nothing_until_items_arrive(kind):
    """A size far beyond memory is a valid bound, not an allocation: the
    sampler keeps every item of a small stream (fewer items than n), and
    allocates only for what it holds."""
    sampler = SIZED[kind](10 ** 15)
    for t in range(3):
        sampler.update(np.arange(100 * t, 100 * t + 100, dtype=np.int64), time=float(t))
    held = np.sort(sampler.held()) if hasattr(sampler, "held") else np.sort(sampler.sample())
    if kind in ("window", "reservoir", "bchao"):
        np.testing.assert_array_equal(held, np.arange(300))


def test_a_window_that_grows_keeps_the_last_n_in_order():
    """The window's ring grows with the items (the doubling must keep the
    oldest-first order across the wrap), and the result is always the last
    n items seen, whatever the batch sizes."""
    rng = np.random.default_rng(5)
    window, seen = SlidingWindow(37), []
    for t in range(60):
        b = int(rng.integers(0, 12))
        batch = np.arange(len(seen), len(seen) + b, dtype=np.int64)
        seen.extend(batch.tolist())
        window.update(batch, time=float(t))
        np.testing.assert_array_equal(window.sample(), seen[-37:])


# -- inclusion probabilities -------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rtbs-exp", "rtbs-general", "ttbs", "btbs", "reservoir",
                                  "window"])
@pytest.mark.parametrize("ages", [[1.0, NAN], [-0.5], [INF], ["x"]], ids=repr)
def test_inclusion_probabilities_refuse_ages_that_are_not_finite_and_non_negative(kind, ages):
    sampler = KINDS[kind]()
    sampler.update(np.arange(20, dtype=np.int64), time=1.0)
    _refused(lambda: sampler.inclusion_probabilities(ages), "ages must be")


def test_inclusion_probabilities_refuse_a_joining_age_later_than_the_age():
    sampler = KINDS["rtbs-general"]()
    sampler.update(np.arange(20, dtype=np.int64), time=1.0)
    _refused(lambda: sampler.inclusion_probabilities([2.0, 3.0], joined=[NAN, 4.0]), "joined[1]")
    _refused(lambda: sampler.inclusion_probabilities([2.0, 3.0], joined=[NAN]), "joined must")
    p = sampler.inclusion_probabilities([2.0, 3.0], joined=[NAN, 1.0])
    assert np.all((p >= 0) & (p <= 1))
