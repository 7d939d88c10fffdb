"""StreamSample and StratifiedStreamSample: tables as items, inclusion
probabilities, erasure, merging, saving, and per-class budgets.

Probabilities are checked against the paper's formulas computed here from the
batch sizes and times (R-TBS, exponential decay: rho_k f(age) with rho_k =
min(1, n / W_k) and W_k = sum_i |B_i| f(t_k - t_i), Theorem 4.3; T-TBS: q
f(age) with q = n gamma / b and gamma = 1 - e^{-lambda} for unit spacing,
Theorem 3.1), and against the frequencies of R seeded replicates: per batch,
the mean inclusion indicator of its rows, Bonferroni-corrected two-sided
z-tests at family level 1e-3 (tests/tbs_stats.py).
"""
import math

import numpy as np
import pandas as pd
import pytest

from samplegen.tbs import (
    RTBS,
    TTBS,
    BatchedReservoir,
    Exponential,
    Polynomial,
    StratifiedStreamSample,
    StreamSample,
    TBSError,
)
from tests.tbs_stats import assert_means

LAM = 0.3
SIZES = [40, 0, 25, 60, 10, 35, 50, 20, 45, 30]
TIMES = [1.0, 2.0, 2.5, 4.0, 5.5, 6.0, 7.0, 9.0, 9.5, 11.0]


def _records(first, size, k):
    dt = np.dtype([("id", np.int64), ("k", np.int32), ("x", np.float64)])
    out = np.zeros(size, dtype=dt)
    out["id"] = np.arange(first, first + size)
    out["k"] = k
    out["x"] = out["id"] * 0.5
    return out


def _feed(ss, sizes=SIZES, times=TIMES, start=0, first=0):
    for k, (b, t) in enumerate(zip(sizes, times), start=start):
        ss.update(_records(first, b, k), time=t)
        first += b
    return first


def _rho_exp(n, sizes, times, t):
    w = float(np.sum(np.asarray(sizes) * np.exp(-LAM * (t - np.asarray(times)))))
    return min(1.0, n / w), w


def _frame(k, size):
    ids = np.arange(size) + 100 * k
    return pd.DataFrame({
        "user": [f"user-{i}" for i in ids],                               # object of str
        "label": pd.array([None if i % 7 == 0 else f"l{i % 3}" for i in ids], dtype="string"),
        "meta": [{"a": int(i), "b": [int(i), 1]} if i % 2 else None for i in ids],
        "cat": pd.Categorical(["x", "y", "z"] * (size // 3) + ["x"] * (size % 3)),
        "when": pd.date_range("2026-01-01", periods=size, freq="h", tz="UTC"),
        "count": pd.array([None if i % 5 == 0 else int(i) for i in ids], dtype="Int64"),
        "x": ids * 0.25,
    })


# -- tables as items ----------------------------------------------------------------------
@pytest.mark.parametrize("make", [lambda: RTBS(30, Exponential(LAM), seed=4),
                                  lambda: RTBS(30, Polynomial(2, shift=1), seed=4, delta1=0.3,
                                               delta2=5.0),
                                  lambda: TTBS(30, Exponential(LAM), 40, seed=4)],
                         ids=["rtbs-exp", "rtbs-poly", "ttbs"])
def test_dataframes_of_any_dtypes_are_sampled_saved_and_restored(make, tmp_path):
    ss = StreamSample(make(), key="user")
    for k in range(12):
        ss.update(_frame(k, 40), time=k + 1.0)
    got = ss.sample(with_probabilities=True)
    assert list(got.columns) == list(_frame(0, 3).columns) + ["inclusion_probability", "age"]
    assert got.dtypes.iloc[:7].to_dict() == _frame(0, 3).dtypes.to_dict()
    ids = got["user"].str.slice(5).astype(int).to_numpy()
    expected = pd.concat([_frame(k, 40) for k in range(12)], ignore_index=True)
    expected = expected.set_index("user").loc[got["user"]].reset_index()
    pd.testing.assert_frame_equal(got.iloc[:, :7], expected[got.columns[:7]])
    assert np.array_equal(got["age"], 12.0 - (ids // 100 + 1))
    ss.save(tmp_path / "s")
    back = StreamSample.load(tmp_path / "s", RTBS if isinstance(ss.sampler, RTBS) else TTBS)
    pd.testing.assert_frame_equal(back.sample(with_probabilities=True), got)
    for k in range(12, 16):
        ss.update(_frame(k, 40), time=k + 1.0)
        back.update(_frame(k, 40), time=k + 1.0)
    pd.testing.assert_frame_equal(back.sample(with_probabilities=True),
                                  ss.sample(with_probabilities=True))


def test_arrow_tables_are_sampled_saved_and_restored(tmp_path):
    pa = pytest.importorskip("pyarrow")
    ss = StreamSample(RTBS(25, Exponential(LAM), seed=2), key="id")
    for k in range(8):
        ids = np.arange(30) + 30 * k
        ss.update(pa.table({"id": ids, "name": [f"n{i}" for i in ids],
                            "tags": [[int(i), int(i) + 1] for i in ids],
                            "rec": [{"u": float(i), "v": str(i)} for i in ids]}), time=k + 1.0)
    got = ss.sample(with_probabilities=True)
    assert isinstance(got, pa.Table)
    assert got.schema.names == ["id", "name", "tags", "rec", "inclusion_probability", "age"]
    ids = got.column("id").to_numpy()
    assert got.column("name").to_pylist() == [f"n{i}" for i in ids]
    assert got.column("tags").to_pylist() == [[int(i), int(i) + 1] for i in ids]
    ss.save(tmp_path / "a")
    back = StreamSample.load(tmp_path / "a", RTBS)
    assert back.sample(with_probabilities=True).equals(got)


def test_numpy_records_round_trip_and_continue(tmp_path):
    ss = StreamSample(RTBS(20, Exponential(LAM), seed=9), key="id")
    first = _feed(ss)
    ss.save(tmp_path / "r")
    back = StreamSample.load(tmp_path / "r", RTBS)
    items, p, a = back.sample(with_probabilities=True)
    items0, p0, a0 = ss.sample(with_probabilities=True)
    assert np.array_equal(items, items0) and np.array_equal(p, p0) and np.array_equal(a, a0)
    for s in (ss, back):
        _feed(s, [30, 30], [12.0, 13.0], start=10, first=first)
    assert np.array_equal(ss.sample(), back.sample())
    ss.save(tmp_path / "r")            # saving over an earlier copy replaces it
    assert np.array_equal(StreamSample.load(tmp_path / "r", RTBS).sample(), ss.sample())


def test_rows_not_stored_by_the_sampler_are_dropped():
    ss = StreamSample(RTBS(10, Exponential(1.0), seed=1))
    for k in range(300):
        ss.update(np.arange(100 * k, 100 * k + 100), time=k + 1.0)
        assert ss.rows_held <= 2 * ss.sampler.held().size + 1024 + 100
    assert ss.rows_seen == 30000


# -- inclusion probabilities --------------------------------------------------------------
def _replicates(make, reps, after=None):
    """Per-row inclusion indicators over ``reps`` seeds, and the probabilities
    and ages returned by the last replicate."""
    total = sum(SIZES)
    hits = np.zeros((reps, total))
    for r in range(reps):
        ss = StreamSample(make(r), key="id")
        _feed(ss)
        if after is not None:
            after(ss)
        items, p, a = ss.sample(with_probabilities=True)
        hits[r, items["id"]] = 1.0
        probs = np.full(total, np.nan)
        probs[items["id"]] = p
    return hits, probs, a, items


def _batch_of_rows():
    return np.repeat(np.arange(len(SIZES)), SIZES)


def _cells(hits, expected):
    """Per non-empty batch: the mean indicator of its rows over replicates."""
    batch = _batch_of_rows()
    means, want = [], []
    for k in range(len(SIZES)):
        rows = batch == k
        if rows.any():
            means.append(hits[:, rows].mean(axis=1))
            want.append(float(np.mean(expected[rows])))
    return np.array(means).T, np.array(want)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["rtbs-exp", "ttbs-exp"])
def test_returned_probabilities_are_the_theorys(case):
    reps = 1500
    n = 30
    if case == "rtbs-exp":
        rho, _ = _rho_exp(n, SIZES, TIMES, TIMES[-1])
        make = lambda r: RTBS(n, Exponential(LAM), seed=r)      # noqa: E731
        q = rho
    else:
        b = 40.0
        q = n * (1.0 - math.exp(-LAM)) / b
        make = lambda r: TTBS(n, Exponential(LAM), b, seed=r)   # noqa: E731
    ages_all = TIMES[-1] - np.repeat(TIMES, SIZES)
    theory = q * np.exp(-LAM * ages_all)
    hits, probs, ages, items = _replicates(make, reps)
    returned = ~np.isnan(probs)
    np.testing.assert_allclose(probs[returned], theory[returned], rtol=1e-12)
    np.testing.assert_allclose(ages, ages_all[items["id"]], rtol=0, atol=0)
    means, want = _cells(hits, theory)
    assert_means(means, want)


@pytest.mark.slow
def test_general_decay_probabilities_match_the_frequencies():
    # R-TBS with polynomial decay and consolidation (delta1 = 0.3): the
    # returned probability of each row, sample_rho f(age) or, consolidated,
    # sample_rho f(a_join) exp(-lambda (age - a_join)), against how often the
    # row is in the sample.  The probabilities do not depend on the draws.
    make = lambda r: RTBS(30, Polynomial(2, shift=1), seed=r, delta1=0.3,   # noqa: E731
                          delta2=40.0, max_weight=40)
    reps = 1500
    probe = StreamSample(make(0), key="id")
    _feed(probe)
    assert probe.sampler.consolidated_batches > 0
    total = sum(SIZES)
    batch = _batch_of_rows()
    per_batch = np.full(len(SIZES), np.nan)       # the rows of a batch share one probability
    hits = np.zeros((reps, total))
    for r in range(reps):
        ss = StreamSample(make(r), key="id")
        _feed(ss)
        items, p, _ = ss.sample(with_probabilities=True)
        hits[r, items["id"]] = 1.0
        k = batch[items["id"]]
        seen = ~np.isnan(per_batch[k])
        np.testing.assert_allclose(per_batch[k][seen], p[seen], rtol=1e-12)
        per_batch[k] = p
    empty = np.array(SIZES) == 0
    assert not np.isnan(per_batch[~empty]).any()
    means, want = _cells(hits, per_batch[batch])
    assert_means(means, want)


# -- erasure ------------------------------------------------------------------------------
@pytest.mark.slow
def test_removed_rows_are_gone_and_the_others_keep_their_probabilities():
    # Erase the rows of every third id of the first six batches after batch 6;
    # four more batches follow.  The erased rows never come back; every other
    # row's inclusion probability is still rho_k f(age) with W_k counting the
    # erased rows (the sampler's rho never rises because of an erasure).
    n, reps = 30, 1500
    erase = np.arange(0, sum(SIZES[:6]), 3)
    hits = np.zeros((reps, sum(SIZES)))
    for r in range(reps):
        ss = StreamSample(RTBS(n, Exponential(LAM), seed=r), key="id")
        first = _feed(ss, SIZES[:6], TIMES[:6])
        ss.remove(erase)
        assert not np.isin(erase, ss.sampler.held()).any()
        _feed(ss, SIZES[6:], TIMES[6:], start=6, first=first)
        items = ss.sample()
        assert not np.isin(erase, items["id"]).any()
        hits[r, items["id"]] = 1.0
    rho, _ = _rho_exp(n, SIZES, TIMES, TIMES[-1])
    theory = rho * np.exp(-LAM * (TIMES[-1] - np.repeat(TIMES, SIZES)))
    keep = np.ones(sum(SIZES), dtype=bool)
    keep[erase] = False
    batch = _batch_of_rows()
    means = np.array([hits[:, keep & (batch == k)].mean(axis=1)
                      for k in range(len(SIZES)) if (keep & (batch == k)).any()]).T
    want = np.array([theory[keep & (batch == k)].mean()
                     for k in range(len(SIZES)) if (keep & (batch == k)).any()])
    assert_means(means, want)


def test_remove_by_key_column_and_errors(tmp_path):
    ss = StreamSample(RTBS(50, Exponential(LAM), seed=1), key="user")
    for k in range(5):
        ss.update(_frame(k, 30), time=k + 1.0)
    users = ss.sample()["user"].tolist()
    assert ss.remove(users[:4] + ["nobody"]) == 4
    assert not set(users[:4]) & set(ss.sample()["user"])
    ss.save(tmp_path / "e")
    assert not set(users[:4]) & set(StreamSample.load(tmp_path / "e", RTBS).sample()["user"])
    keyless = StreamSample(RTBS(5, Exponential(LAM), seed=1))
    keyless.update(_frame(0, 3))
    with pytest.raises(TBSError, match="remove\\(\\) needs the key column"):
        keyless.remove(["user-0"])
    res = StreamSample(BatchedReservoir(5, seed=1))
    res.update(np.arange(10))
    with pytest.raises(TBSError, match="does not support remove\\(\\): a batched reservoir"):
        res.remove([1])


# -- merge --------------------------------------------------------------------------------
TIMES_B = [0.5, 3.0, 3.5, 8.0, 10.5]
SIZES_B = [30, 20, 0, 45, 25]


@pytest.mark.slow
@pytest.mark.parametrize("case", ["rtbs-exp", "ttbs-exp"])
def test_merged_sample_has_the_combined_streams_probabilities(case):
    # Stream A (SIZES at TIMES, last at 11.0) and stream B (at TIMES_B, last at
    # 10.5), merged, then two more batches: every row's probability is the
    # combined stream's -- R-TBS: rho f(age) with W over both streams; T-TBS:
    # q f(age).
    n, reps, b = 30, 1000, 40.0
    make = (lambda r: RTBS(n, Exponential(LAM), seed=r)) if case == "rtbs-exp" \
        else (lambda r: TTBS(n, Exponential(LAM), b, seed=r))
    more_sizes, more_times = [15, 25], [12.0, 14.0]
    na, nb = sum(SIZES), sum(SIZES_B)
    total = na + nb + sum(more_sizes)
    hits = np.zeros((reps, total))
    for r in range(reps):
        a = StreamSample(make(r), key="id")
        _feed(a)
        other = StreamSample(make(10_000 + r), key="id")
        _feed(other, SIZES_B, TIMES_B, first=na)
        a.merge(other)
        assert a.time == 11.0
        _feed(a, more_sizes, more_times, first=na + nb)
        items = a.sample()
        hits[r, items["id"]] = 1.0
    sizes = SIZES + SIZES_B + more_sizes
    times = TIMES + TIMES_B + more_times
    row_times = np.repeat(times, sizes)
    if case == "rtbs-exp":
        q, w = _rho_exp(n, sizes, times, 14.0)
        assert a.sampler.total_weight == pytest.approx(w, rel=1e-12)
    else:
        q = n * (1.0 - math.exp(-LAM)) / b
    theory = q * np.exp(-LAM * (14.0 - row_times))
    cells = [np.flatnonzero(row_times == t) for t in sorted(set(times)) if (row_times == t).any()]
    means = np.array([hits[:, c].mean(axis=1) for c in cells]).T
    want = np.array([theory[c].mean() for c in cells])
    assert_means(means, want)


def test_merge_refusals():
    def fed(s, first=0):
        s.update(np.arange(first, first + 20), time=1.0)
        return s
    with pytest.raises(TBSError, match="general decay .* not supported"):
        fed(RTBS(10, Polynomial(2), seed=1)).merge(fed(RTBS(10, Polynomial(2), seed=2), 100))
    with pytest.raises(TBSError, match="the same n and lambda"):
        fed(RTBS(10, Exponential(0.1), seed=1)).merge(fed(RTBS(10, Exponential(0.2), seed=2), 50))
    with pytest.raises(TBSError, match="the same n and lambda"):
        fed(RTBS(10, Exponential(0.1), seed=1)).merge(fed(RTBS(12, Exponential(0.1), seed=2), 50))
    with pytest.raises(TBSError, match="common items .*disjoint streams"):
        fed(RTBS(10, Exponential(0.1), seed=1)).merge(fed(RTBS(10, Exponential(0.1), seed=2)))
    with pytest.raises(TBSError, match="the same decay and q"):
        fed(TTBS(10, Exponential(0.1), 30, seed=1)).merge(fed(TTBS(10, Exponential(0.1), 40,
                                                                    seed=2), 50))
    with pytest.raises(TBSError, match="two samplers of one kind"):
        fed(RTBS(10, Exponential(0.1), seed=1)).merge(fed(TTBS(10, Exponential(0.1), 30,
                                                               seed=2), 50))
    with pytest.raises(TBSError, match="does not support merge"):
        fed(BatchedReservoir(10, seed=1)).merge(fed(BatchedReservoir(10, seed=2), 50))
    a = StreamSample(RTBS(10, Exponential(0.1), seed=1))
    a.update(np.arange(5))
    b = StreamSample(RTBS(10, Exponential(0.1), seed=1))
    b.update(_frame(0, 5))
    with pytest.raises(TBSError, match="rows of one type"):
        a.merge(b)
    with pytest.raises(TBSError, match="merge needs another stream's sample"):
        b.merge(b)


# -- strata -------------------------------------------------------------------------------
def _labelled(k, size, labels, records=False):
    rng = np.random.default_rng(k)
    ids, cls = np.arange(size) + 1000 * k, rng.choice(labels, size)
    if records:
        out = np.zeros(size, dtype=[("id", np.int64), ("cls", "U1")])
        out["id"], out["cls"] = ids, cls
        return out
    return pd.DataFrame({"id": ids, "cls": cls})


@pytest.mark.slow
def test_stratified_shares_follow_the_budget_and_each_class_is_time_biased():
    # Budget 90: class a alone gets 90; with b, 45 each; with c, 30 each.  Each
    # class's sample never exceeds its share, and at the end each class's rows
    # have probability min(1, n_c / W_c) f(age) (its own R-TBS, Theorem 4.3;
    # the downsampling at a resize keeps that form).
    reps, budget = 600, 90
    schedule = [(k, ["a"] if k < 4 else ["a", "b"] if k < 8 else ["a", "b", "c"])
                for k in range(14)]
    share_at = {1: 90, 2: 45, 3: 30}
    frames = [_labelled(k, 60, labels, records=True) for k, labels in schedule]
    rows = pd.DataFrame(np.concatenate(frames))
    hits = np.zeros((reps, len(rows)))
    for r in range(reps):
        s = StratifiedStreamSample(lambda n, seed: RTBS(n, Exponential(LAM), seed=seed), budget,
                                   by="cls", seed=r)
        for k, frame in enumerate(frames):
            s.update(frame, time=k + 1.0)
            share = share_at[len(s.strata)]
            sizes = s.sizes()
            assert all(v <= share for v in sizes.values()) and sum(sizes.values()) <= budget
            assert [x.sampler.n for x in s.strata.values()] == [share] * len(s.strata)
        got, _, _ = s.sample(with_probabilities=True)
        hits[r, np.searchsorted(rows["id"].to_numpy(), got["id"])] = 1.0
    age = 14.0 - (rows["id"].to_numpy() // 1000 + 1)
    f = np.exp(-LAM * age)
    means, want = [], []
    for c in "abc":
        in_c = (rows["cls"] == c).to_numpy()
        w = float(np.sum(f[in_c]))
        p = min(1.0, 30 / w) * f
        for k in range(14):
            cell = in_c & (rows["id"].to_numpy() // 1000 == k)
            if cell.any():
                means.append(hits[:, cell].mean(axis=1))
                want.append(float(p[cell].mean()))
    assert_means(np.array(means).T, np.array(want))


def test_stratified_fixed_shares_and_errors():
    make = lambda n, seed: RTBS(n, Exponential(LAM), seed=seed)     # noqa: E731
    s = StratifiedStreamSample(make, 50, by="cls", seed=1, shares={"a": 10, "b": 40})
    for k in range(6):
        s.update(_labelled(k, 80, ["a", "b"]), time=k + 1.0)
    assert s.sizes() == {"a": 10, "b": 40}
    with pytest.raises(TBSError, match="class 'c' has no share"):
        s.update(_labelled(9, 10, ["c"]), time=10.0)
    with pytest.raises(TBSError, match="shares add up to 60, more than the budget 50"):
        StratifiedStreamSample(make, 50, by="cls", seed=1, shares={"a": 20, "b": 40})
    tiny = StratifiedStreamSample(make, 2, by="cls", seed=1)
    with pytest.raises(TBSError, match="3 classes cannot share a budget of 2"):
        tiny.update(_labelled(0, 30, ["a", "b", "c"]), time=1.0)
    with pytest.raises(TBSError, match="class column 'nope' is not in the batch"):
        StratifiedStreamSample(make, 5, by="nope", seed=1).update(_labelled(0, 3, ["a"]))


def test_resize_only_lowers_n():
    s = RTBS(10, Exponential(LAM), seed=1)
    s.update(np.arange(100), time=1.0)
    with pytest.raises(TBSError, match="resize can only lower n \\(now 10\\), got 11"):
        s.resize(11)
    s.resize(4)
    assert s.sample().size <= 4 and s.n == 4


# -- bad input ----------------------------------------------------------------------------
def test_bad_batches_are_one_line_errors_and_change_nothing():
    ss = StreamSample(RTBS(10, Exponential(LAM), seed=1), key="user")
    ss.update(_frame(0, 10), time=1.0)
    before = ss.sample()
    cases = [
        (lambda: ss.update([1, 2, 3], time=2.0), "a batch must be a pandas DataFrame"),
        (lambda: ss.update(_frame(1, 5).drop(columns="x"), time=2.0), "differ from the first"),
        (lambda: ss.update(_frame(1, 5).rename(columns={"user": "u"}), time=2.0),
         "key column 'user' is not in the batch"),
        (lambda: ss.update(_frame(1, 5), time=1.0), "time must increase"),
        (lambda: ss.update(np.arange(3), time=2.0), "key 'user' is not a field"),
    ]
    for call, message in cases:
        with pytest.raises(TBSError, match=message) as info:
            call()
        assert "\n" not in str(info.value)
    pd.testing.assert_frame_equal(ss.sample(), before)
    assert ss.rows_seen == 10
    with pytest.raises(TBSError, match="must be fresh"):
        used = RTBS(5, Exponential(LAM), seed=1)
        used.update(np.arange(3))
        StreamSample(used)
    clash = StreamSample(RTBS(10, Exponential(LAM), seed=1))
    clash.update(pd.DataFrame({"age": [1, 2]}), time=1.0)
    with pytest.raises(TBSError, match="already have a column 'age'"):
        clash.sample(with_probabilities=True)


@pytest.mark.slow
def test_the_retraining_example_runs(tmp_path):
    import os
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, os.path.join(root, "docs", "examples",
                                                        "retrain_pandas.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "day 29:" in proc.stdout and "restored" in proc.stdout
    assert (tmp_path / "sample" / "stream-sample.json").exists()


def test_merge_refuses_shared_records_and_resize_needs_a_size():
    from samplegen.tbs import BTBS
    dt = np.dtype([("id", np.int64), ("x", np.float64)])
    items = np.zeros(20, dtype=dt)
    items["id"] = np.arange(20)
    a, b = RTBS(10, Exponential(0.1), seed=1), RTBS(10, Exponential(0.1), seed=2)
    a.update(items, time=1.0)
    b.update(items[5:], time=2.0)
    with pytest.raises(TBSError, match="common items .*disjoint streams"):
        a.merge(b)
    with pytest.raises(TBSError, match="BTBS has no sample size to resize"):
        BTBS(Exponential(0.1), seed=1).resize(3)


# -- stored-item counts and renamed items ---------------------------------------------------
def _every_kind():
    from samplegen.tbs import BTBS, BChao, SlidingWindow
    return {
        "rtbs-exp": lambda s: RTBS(30, Exponential(LAM), seed=s),
        "rtbs-poly": lambda s: RTBS(30, Polynomial(2, shift=1), seed=s, delta1=0.3, delta2=40.0,
                                    max_weight=40),
        "ttbs-exp": lambda s: TTBS(30, Exponential(LAM), 40, seed=s),
        "ttbs-poly": lambda s: TTBS(10, Polynomial(2, shift=1), 40, seed=s),
        "btbs-exp": lambda s: BTBS(Exponential(LAM), seed=s),
        "btbs-poly": lambda s: BTBS(Polynomial(2, shift=1), seed=s),
        "reservoir": lambda s: BatchedReservoir(30, seed=s),
        "window": lambda s: SlidingWindow(30),
        "bchao": lambda s: BChao(30, Exponential(1.5), seed=s),
    }


# Bursts, empty batches, long and short gaps.
IRREGULAR_SIZES = [5, 0, 70, 3, 0, 1, 120, 40, 2, 0, 60, 8, 33, 1, 90, 0, 15, 25, 4, 50]
IRREGULAR_TIMES = [0.5, 0.7, 1.0, 4.5, 4.6, 9.0, 9.01, 12.0, 12.5, 13.0, 20.0, 20.2, 21.0,
                   30.0, 30.5, 31.0, 33.0, 40.0, 40.1, 41.0]


def _irregular(update):
    """Feed the irregular schedule to *update* (``update(items, time=t)``),
    yielding ``(k, items)`` after each batch."""
    first = 0
    for k, (b, t) in enumerate(zip(IRREGULAR_SIZES, IRREGULAR_TIMES)):
        items = np.arange(first, first + b)
        update(items, time=t)
        first += b
        yield k, items


@pytest.mark.parametrize("kind", list(_every_kind()))
def test_footprint_is_the_number_of_items_held_after_every_batch(kind):
    # StreamSample prunes its rows by the sampler's footprint; it must be
    # len(held()) exactly, for every kind, after each batch and each erasure
    # (B-Chao's overweight items included).
    ss = StreamSample(_every_kind()[kind](5))
    overweight = False
    for k, _ in _irregular(ss.update):
        assert ss.sampler.footprint == ss.sampler.held().size, (kind, k)
        overweight |= getattr(ss.sampler, "overweight_count", 0) > 0
        if k % 6 == 5 and ss.sampler.held().size:
            try:
                ss.remove(np.sort(ss.sampler.held())[::3])
            except TBSError:               # kinds without erasure
                continue
            assert ss.sampler.footprint == ss.sampler.held().size, (kind, k, "remove")
    if kind == "rtbs-poly":
        assert ss.sampler.consolidated_batches > 0
    if kind == "bchao":
        assert overweight


def _states_equal(a, b):
    (arrays_a, meta_a), (arrays_b, meta_b) = a, b
    assert meta_a == meta_b
    assert sorted(arrays_a) == sorted(arrays_b)
    for name in arrays_a:
        assert arrays_a[name].dtype == arrays_b[name].dtype, name
        assert np.array_equal(arrays_a[name], arrays_b[name]), name


@pytest.mark.parametrize("kind", list(_every_kind()))
def test_shift_items_renames_exactly_the_item_arrays_of_the_state(kind):
    # After every batch: shifted, the state is the old one with the offset
    # added to the item arrays; shifted back, it is the old one.
    from samplegen.tbs.base import ITEM_ARRAYS
    s = _every_kind()[kind](3)
    batches = []
    for _, items in _irregular(s.update):
        batches.append(items)
        arrays, meta = s.to_state()
        s.shift_items(1000)
        shifted = {name: arr + 1000 if name in ITEM_ARRAYS else arr
                   for name, arr in arrays.items()}
        _states_equal(s.to_state(), (shifted, meta))
        s.shift_items(-1000)
        _states_equal(s.to_state(), (arrays, meta))
    # The caller's batches are not touched (B-Chao keeps views of them).
    assert np.array_equal(np.concatenate(batches), np.arange(sum(IRREGULAR_SIZES)))


def test_shift_items_needs_integer_items():
    s = RTBS(5, Exponential(LAM), seed=1)
    s.update(np.linspace(0.0, 1.0, 10))
    with pytest.raises(TBSError, match="shift_items needs integer items, got dtype float64"):
        s.shift_items(3)


@pytest.mark.parametrize("case", ["rtbs-exp", "ttbs-exp"])
def test_merge_folds_in_the_other_sampler_with_its_ids_shifted(case):
    # What StreamSample.merge does to the samplers: the other's items renamed
    # to row ids after this stream's, then Sampler.merge; the other unchanged.
    from samplegen.tbs.base import ITEM_ARRAYS
    make = _every_kind()[case]
    a = StreamSample(make(1), key="id")
    first = _feed(a)
    b = StreamSample(make(2), key="id")
    _feed(b, SIZES_B, TIMES_B, first=first)
    arrays, meta = b.sampler.to_state()
    moved = type(b.sampler).from_state(
        {name: arr + a.rows_seen if name in ITEM_ARRAYS else arr for name, arr in arrays.items()},
        meta)
    expected = type(a.sampler).from_state(*a.sampler.to_state()).merge(moved)
    a.merge(b)
    _states_equal(a.sampler.to_state(), expected.to_state())
    _states_equal(b.sampler.to_state(), (arrays, meta))
