"""State serialization: plain numpy arrays + JSON, no pickle, exact round trips.

Continuing after a round trip (arrays through np.savez / np.load with
allow_pickle=False, meta through json.dumps / json.loads) must give exactly the
samples and weights of continuing without it; re-running a batch from a saved
state repeats it exactly.
"""
import io
import json
import sys

import numpy as np
import pytest

from samplegen.tbs import (
    BTBS,
    RTBS,
    TTBS,
    BatchedReservoir,
    BChao,
    CustomDecay,
    Exponential,
    Polynomial,
    SlidingWindow,
    TBSError,
)

RECORD = np.dtype([("id", np.int64), ("x", np.float32), ("tag", "S2")])

MAKERS = {
    "rtbs-exp": lambda: RTBS(40, Exponential(0.2), seed=3),
    "rtbs-poly": lambda: RTBS(40, Polynomial(2, shift=1), seed=3, delta1=0.3, delta2=40.0),
    "ttbs-exp": lambda: TTBS(40, Exponential(0.2), 30, seed=3),
    "ttbs-poly": lambda: TTBS(40, Polynomial(2, shift=10), 30, seed=3),
    "btbs": lambda: BTBS(Exponential(0.5), seed=3),
    "reservoir": lambda: BatchedReservoir(40, seed=3),
    "window": lambda: SlidingWindow(40),
    "bchao": lambda: BChao(10, Exponential(1.5), seed=3),
}


def _batches(kind, count, seed=0):
    rng = np.random.default_rng(seed)
    nxt, t = 0, 0.0
    for _ in range(count):
        b = int(rng.choice([0, 1, 3, 20, 45]))
        t += float(rng.choice([0.3, 1.0, 2.0]))
        ids = np.arange(nxt, nxt + b, dtype=np.int64)
        nxt += b
        if kind == "records":
            rec = np.zeros(b, dtype=RECORD)
            rec["id"], rec["x"], rec["tag"] = ids, ids * 0.25, b"ab"
            yield rec, t
        else:
            yield ids, t


def _round_trip(sampler, decay=None):
    arrays, meta = sampler.to_state()
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    buf.seek(0)
    with np.load(buf, allow_pickle=False) as npz:
        loaded = {name: npz[name] for name in npz.files}
    meta = json.loads(json.dumps(meta))
    return type(sampler).from_state(loaded, meta, decay=decay)


def _observe(s):
    return s.sample(), s.sample_weight, s.total_weight


@pytest.mark.parametrize("kind", ["ids", "records"])
@pytest.mark.parametrize("name", list(MAKERS))
def test_round_trip_continues_identically(name, kind):
    batches = list(_batches(kind, 60, seed=len(name)))
    for cut in (0, 1, 23, 45):
        straight, resumed = MAKERS[name](), MAKERS[name]()
        for items, t in batches[:cut]:
            straight.update(items, time=t)
            resumed.update(items, time=t)
        resumed = _round_trip(resumed)
        for items, t in batches[cut:]:
            straight.update(items, time=t)
            resumed.update(items, time=t)
            a, b = _observe(straight), _observe(resumed)
            assert np.array_equal(a[0], b[0]) and a[0].dtype == b[0].dtype
            assert a[1:] == b[1:]
        assert resumed.batches == straight.batches and resumed.time == straight.time


def test_consolidated_state_round_trip():
    s = RTBS(40, Polynomial(2, shift=1), seed=3, delta1=0.3, delta2=40.0)
    for items, t in _batches("ids", 50):
        s.update(items, time=t)
    assert s.consolidated_batches > 0
    r = _round_trip(s)
    assert r.consolidated_batches == s.consolidated_batches and r.latent_count == s.latent_count
    assert np.array_equal(r.sample(), s.sample())


def test_rerunning_a_batch_repeats_it():
    s = RTBS(30, Polynomial(2, shift=10), seed=11)
    for items, t in _batches("ids", 20):
        s.update(items, time=t)
    arrays, meta = s.to_state()
    batch = np.arange(10_000, 10_060, dtype=np.int64)
    first = RTBS.from_state(arrays, meta)
    first.update(batch, time=100.0)
    second = RTBS.from_state(arrays, meta)
    second.update(batch, time=100.0)
    assert np.array_equal(first.sample(), second.sample())
    assert first.to_state()[1] == second.to_state()[1]


def test_custom_decay_must_be_passed_back():
    decay = CustomDecay(lambda a: (3.0 / (3.0 + a)) ** 2.5)
    s = RTBS(20, decay, seed=1)
    for items, t in _batches("ids", 10):
        s.update(items, time=t)
    arrays, meta = s.to_state()
    assert meta["params"]["decay"] is None
    with pytest.raises(TBSError, match="decay must be passed to from_state"):
        RTBS.from_state(arrays, meta)
    r = _round_trip(s, decay=decay)
    assert np.array_equal(r.sample(), s.sample())


def test_wrong_or_corrupt_state_is_rejected():
    s = RTBS(20, Exponential(0.1), seed=1)
    s.update(np.arange(30))
    arrays, meta = s.to_state()
    with pytest.raises(TBSError,
                       match="state must come from TTBS.to_state\\(\\), got class 'RTBS'"):
        TTBS.from_state(arrays, meta)
    with pytest.raises(TBSError, match="state arrays must contain 'full'"):
        RTBS.from_state({}, meta)
    bad = dict(meta, weight=5.5)
    with pytest.raises(TBSError, match="corrupt latent sample"):
        RTBS.from_state(arrays, bad)
    with pytest.raises(TBSError, match="state version must be 1"):
        RTBS.from_state(arrays, dict(meta, version=99))


DECAY_MODULE = '''
def slow(a):
    return (3.0 / (3.0 + a)) ** 2.5
'''


def test_importable_custom_decay_is_stored_by_reference(user_module):
    # A module-level function is stored as "module:name" and found again by
    # from_state without decay=; the restored sampler continues identically.
    name = user_module("user_decays_ok", DECAY_MODULE)
    mod = __import__(name)
    for given in (mod.slow, f"{name}:slow"):
        s = RTBS(20, given, seed=1)
        for items, t in _batches("ids", 10):
            s.update(items, time=t)
        arrays, meta = s.to_state()
        assert meta["params"]["decay"] == {"kind": "custom", "ref": f"{name}:slow"}
        meta = json.loads(json.dumps(meta))
        r = RTBS.from_state(arrays, meta)
        assert r.decay.func is mod.slow
        for sampler in (r, s):
            sampler.update(np.arange(10_000, 10_050, dtype=np.int64), time=50.0)
        assert np.array_equal(r.sample(), s.sample())


def test_custom_decay_reference_that_cannot_be_imported_is_one_clear_error(user_module):
    name = user_module("user_decays_gone", DECAY_MODULE)
    s = RTBS(20, f"{name}:slow", seed=1)
    s.update(np.arange(30), time=1.0)
    arrays, meta = s.to_state()
    sys.modules.pop(name)
    meta["params"]["decay"]["ref"] = "no_such_module_xyz:slow"
    with pytest.raises(TBSError, match=r"decay 'no_such_module_xyz:slow' cannot be imported "
                                       r"\(ModuleNotFoundError: .*pass decay= explicitly"):
        RTBS.from_state(arrays, meta)
    meta["params"]["decay"]["ref"] = f"{name}:missing"
    with pytest.raises(TBSError, match=f"decay '{name}:missing' cannot be imported "
                                       r"\(AttributeError"):
        RTBS.from_state(arrays, meta)
    for bad in ("slow", "a:b:c", ":slow"):
        with pytest.raises(TBSError, match="a decay reference must be 'module:name'"):
            RTBS(20, bad, seed=1)
