"""The Python API gives the jobs' samples from an in-memory array."""
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

from samplegen import ParameterError
from samplegen.jobs import api, driver

from .conftest import NO_CONF, make


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    base = tmp_path_factory.mktemp("api")
    path = make(base, "m", rows=777, cols=9, block_size=50, seed=4)
    ids, data = driver.Matrix.open(path).to_numpy() if hasattr(driver, "Matrix") else (None, None)
    from samplegen.jobs.store import Matrix
    return path, Matrix.open(path).to_numpy()[1]


@pytest.mark.parametrize("udf,params,call", [
    ("holdout", {"ratio": 0.7, "repeats": 2, "fraction": 0.8},
     lambda X: api.holdout(X, ratio=0.7, repeats=2, fraction=0.8, seed=21)),
    ("kfold", {"k": 4}, lambda X: api.kfold(X, 4, seed=21, block_size=50)),
    ("kfold", {"k": 4, "naive": True}, lambda X: api.kfold(X, 4, seed=21, naive=True)),
    ("bootstrap", {"samples": 2, "size": 500}, lambda X: api.bootstrap(X, 2, seed=21, size=500)),
])
def test_api_equals_job_output(tmp_path, source, udf, params, call):
    path, X = source
    run = str(tmp_path / "run")
    driver.generate(path, run, udf, params, 21, runner="inline", options=NO_CONF)
    mem = call(X)
    labels = np.array([f"label-{i % 5}" for i in range(len(X))])
    disk = api.read_run(run, y=labels)
    assert mem.names == disk.names
    for name in mem.names:
        assert np.array_equal(mem.indices(name), disk.indices(name)), name
        assert np.array_equal(mem[name], disk[name]), name
        assert np.array_equal(mem[name], X[mem.indices(name)])
        assert np.array_equal(disk.y(name), labels[disk.indices(name)]), name


def test_api_with_a_row_count_and_errors():
    s = api.kfold(100, 5, seed=1)
    assert len(s) == 10 and "test-0" in list(s)
    with pytest.raises(ValueError, match="row count"):
        s.array("test-0")
    with pytest.raises(KeyError, match="no sample"):
        s.indices("nope")
    with pytest.raises(ValueError, match="0-d"):
        api.holdout(np.float64(5), ratio=0.5, seed=1)


# -- any rows in, the same type out; labels and groups alongside ---------------

N = 60
USER_UDF = """
import numpy as np
from samplegen.udfs import Purpose, stream

def twice_or_once(start, stop, rng, params):
    # even rows twice into "train-0", odd rows once into "test-0"
    ids = np.arange(start, stop)
    lanes = rng.block(stream(Purpose.USER, 0), start, stop)
    even = np.flatnonzero(ids % 2 == 0)
    odd = np.flatnonzero(ids % 2 == 1)
    offset = np.concatenate([even, even, odd])
    sample = np.concatenate([np.zeros(2 * even.size, np.int64), np.ones(odd.size, np.int64)])
    relpos = np.concatenate([lanes[even, 0], lanes[even, 1], lanes[odd, 2]])
    return offset, sample, relpos

twice_or_once.sample_names = ["train-0", "test-0"]
"""


@pytest.fixture
def user_udf(tmp_path, monkeypatch):
    name = "api_user_udf"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER_UDF))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return f"{name}:twice_or_once"


METHODS = {
    "holdout": lambda X, **kw: api.holdout(X, ratio=0.7, repeats=2, fraction=0.9, seed=5, **kw),
    "kfold": lambda X, **kw: api.kfold(X, 4, seed=5, block_size=7, **kw),
    "kfold-naive": lambda X, **kw: api.kfold(X, 4, seed=5, naive=True, **kw),
    "bootstrap": lambda X, **kw: api.bootstrap(X, 3, seed=5, size=80, **kw),
    "bernoulli": lambda X, **kw: api.sample(X, "samplegen.udfs.examples:bernoulli", seed=5,
                                            p=0.4, **kw),
    "user": "user",
}


@pytest.fixture(params=sorted(METHODS))
def method(request):
    """A function X, **kw -> Samples, for every method (a user UDF included)."""
    call = METHODS[request.param]
    if call == "user":
        spec = request.getfixturevalue("user_udf")
        return lambda X, **kw: api.sample(X, spec, seed=5, **kw)
    return call


def frame(index=None):
    rng = np.random.default_rng(3)
    return pd.DataFrame({"x": rng.normal(size=N), "word": [f"w{i}" for i in range(N)],
                         "k": np.arange(N) % 7}, index=index)


INDEXES = {
    "default": None,
    "strings": [f"row-{i}" for i in range(N)],
    "shifted": np.arange(N) * 10 + 1000,
    "duplicates": np.arange(N) // 3,
}


@pytest.mark.parametrize("index", sorted(INDEXES))
def test_a_dataframe_gives_dataframes_with_its_index(method, index):
    df = frame(INDEXES[index])
    s = method(df)
    plain = method(N)
    assert s.names == plain.names
    for name in s.names:
        idx = s.indices(name)
        assert np.array_equal(idx, plain.indices(name)), name
        part = s[name]
        assert isinstance(part, pd.DataFrame)
        assert list(part.columns) == list(df.columns)
        assert part.index.equals(df.index[idx]), name
        pd.testing.assert_frame_equal(part, df.take(idx))


def test_bootstrap_repeats_index_labels():
    df = frame(INDEXES["strings"])
    s = api.bootstrap(df, 2, seed=11)
    for name in s.names:
        idx = s.indices(name)
        assert len(s[name]) == N
        labels = s[name].index
        assert not labels.is_unique            # 60 draws from 60 rows repeat some
        counts = pd.Series(idx).value_counts()
        for pos, count in counts.items():
            assert (labels == df.index[pos]).sum() == count


@pytest.mark.parametrize("index", sorted(INDEXES))
def test_a_series_gives_series(method, index):
    ser = pd.Series(np.arange(N) * 2.5, index=INDEXES[index], name="v")
    s = method(ser)
    for name in s.names:
        part = s[name]
        assert isinstance(part, pd.Series) and part.name == "v"
        pd.testing.assert_series_equal(part, ser.take(s.indices(name)))


@pytest.mark.parametrize("X", [
    np.arange(N),
    np.array([f"text {i}" for i in range(N)]),
    np.array([{"row": i} for i in range(N)], dtype=object),
    np.array([(i, i / 2, f"n{i}") for i in range(N)],
             dtype=[("id", "i8"), ("half", "f8"), ("name", "U8")]),
    np.arange(N * 6).reshape(N, 2, 3),
    np.arange(N, dtype=np.uint8) % 2 == 0,
], ids=["1-D", "strings", "objects", "structured", "3-D", "bool"])
def test_numpy_arrays_of_any_dtype_and_shape(method, X):
    s = method(X)
    plain = method(N)
    for name in s.names:
        idx = s.indices(name)
        assert np.array_equal(idx, plain.indices(name))
        part = s[name]
        assert isinstance(part, np.ndarray)
        assert part.dtype == X.dtype and part.shape == (len(idx),) + X.shape[1:]
        assert (part == X[idx]).all()


def test_lists_and_tuples_stay_lists_and_tuples(method):
    rows = [{"id": i} for i in range(N)]
    s = method(rows)
    t = method(tuple(rows))
    for name in s.names:
        idx = s.indices(name)
        assert type(s[name]) is list and s[name] == [rows[i] for i in idx]
        assert type(t[name]) is tuple and t[name] == tuple(rows[i] for i in idx)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_sparse_matrices_keep_their_format(fmt):
    X = sp.random(N, 5, density=0.3, format=fmt, random_state=2)
    s = api.kfold(X, 3, seed=5)
    dense = X.toarray()
    for name in s.names:
        part = s[name]
        assert sp.issparse(part) and part.format == fmt
        assert np.array_equal(part.toarray(), dense[s.indices(name)])


def test_other_array_likes_become_numpy():
    class Rows:
        def __array__(self, dtype=None, copy=None):
            return np.arange(N * 2).reshape(N, 2)

    s = api.holdout(Rows(), ratio=0.5, seed=5)
    for name in s.names:
        assert np.array_equal(s[name], np.arange(N * 2).reshape(N, 2)[s.indices(name)])


@pytest.mark.parametrize("kind", ["numpy", "pandas", "list"])
def test_y_and_groups_follow_the_rows_of_x(method, kind):
    df = frame(INDEXES["duplicates"])
    y = np.array([f"class-{i % 3}" for i in range(N)])
    groups = np.arange(N) // 4
    if kind == "pandas":
        y = pd.Series(y, index=df.index, name="label")
        groups = pd.Series(groups, index=df.index)
    elif kind == "list":
        y, groups = list(y), list(groups)
    s = method(df, y=y, groups=groups)
    plain = method(df)
    for name in s.names:
        idx = s.indices(name)
        assert np.array_equal(idx, plain.indices(name))
        X_part, y_part = s.xy(name)
        assert len(y_part) == len(X_part) == len(s.groups(name)) == len(idx)
        if kind == "pandas":
            pd.testing.assert_series_equal(y_part, y.take(idx))
            assert y_part.index.equals(X_part.index)
            pd.testing.assert_series_equal(s.groups(name), groups.take(idx))
        else:
            assert type(y_part) is type(y) and type(s.groups(name)) is type(groups)
            assert np.array_equal(np.asarray(y_part), np.asarray(y)[idx])
            assert np.array_equal(np.asarray(s.groups(name)), np.asarray(groups)[idx])
        assert np.array_equal(np.asarray(y_part), np.asarray(y)[idx])
        weights = np.arange(N) * 0.5
        assert np.array_equal(s.take(name, weights), weights[idx])


def test_y_with_a_row_count():
    y = np.arange(N) % 2
    s = api.bootstrap(N, 2, seed=5, y=y)
    for name in s.names:
        assert np.array_equal(s.y(name), y[s.indices(name)])
    with pytest.raises(ParameterError, match="row count"):
        s.xy("sample-0")


@pytest.mark.parametrize("call,count", [
    (lambda X, **kw: api.holdout(X, ratio=0.7, repeats=3, seed=5, **kw), 3),
    (lambda X, **kw: api.kfold(X, 4, seed=5, block_size=7, **kw), 4),
    (lambda X, **kw: api.kfold(X, 4, seed=5, naive=True, **kw), 4),
], ids=["holdout", "kfold", "kfold-naive"])
def test_pairs(call, count):
    df = frame()
    s = call(df, y=df["k"])
    pairs = s.pairs()
    assert [train for train, _ in pairs] == [f"train-{i}" for i in range(count)]
    assert [test for _, test in pairs] == [f"test-{i}" for i in range(count)]
    tested = []
    for train, test in pairs:
        a, b = set(s.indices(train)), set(s.indices(test))
        assert not a & b and a | b == set(range(N))
        tested.append(s.indices(test))
        (X_train, y_train), (X_test, y_test) = s.xy(train), s.xy(test)
        assert X_train.index.equals(y_train.index) and X_test.index.equals(y_test.index)
    if count == 4:                              # k-fold: every row is tested once
        assert np.array_equal(np.sort(np.concatenate(tested)), np.arange(N))
    assert s.xy("test-0")[1] is not None and call(df).xy("test-0")[1] is None


def test_pairs_need_train_and_test_samples():
    with pytest.raises(ParameterError, match="pairs"):
        api.bootstrap(N, 2, seed=5).pairs()


@pytest.mark.parametrize("X", [
    {"a": [1, 2]}, (i for i in range(5)), "abcdef", {1, 2, 3}, None, True, 2.5, object(),
], ids=["dict", "generator", "str", "set", "None", "bool", "float", "object"])
def test_unsupported_types(method, X):
    with pytest.raises(ParameterError, match="^X must be "):
        method(X)


@pytest.mark.parametrize("X", [
    0, -3, np.empty((0, 4)), np.array([]), [], pd.DataFrame({"a": []}), np.float64(1.0),
], ids=["count 0", "count -3", "0x4", "empty 1-D", "empty list", "empty frame", "0-d"])
def test_no_rows(method, X):
    with pytest.raises(ParameterError, match="^X "):
        method(X)


@pytest.mark.parametrize("arg", ["y", "groups"])
@pytest.mark.parametrize("X", [np.zeros((N, 2)), N, frame()], ids=["numpy", "count", "pandas"])
def test_lengths_must_match(method, arg, X):
    for wrong in (np.arange(N - 1), list(range(N + 1)), pd.Series(np.arange(N - 1))):
        with pytest.raises(ParameterError, match=f"^{arg} has {len(wrong)} rows but X has {N}"):
            method(X, **{arg: wrong})
    with pytest.raises(ParameterError, match=f"^{arg} must be "):
        method(X, **{arg: {"a": 1}})
    with pytest.raises(ParameterError, match=f"^{arg} must be "):
        method(X, **{arg: 7})                  # a row count is only for X
    s = method(X)
    with pytest.raises(ParameterError, match=f"no {arg} was given"):
        getattr(s, arg)(s.names[0])
    with pytest.raises(ParameterError, match=f"data has {N - 1} rows"):
        s.take(s.names[0], np.arange(N - 1))


def test_read_run_checks_the_labels(tmp_path, source):
    path, X = source
    run = str(tmp_path / "run")
    driver.generate(path, run, "bootstrap", {"samples": 1}, 3, runner="inline", options=NO_CONF)
    with pytest.raises(ParameterError, match=f"^y has 5 rows but X has {len(X)}"):
        api.read_run(run, y=np.arange(5))
    labels = pd.Series(np.arange(len(X)) % 4, index=np.arange(len(X)) + 100)
    s = api.read_run(run, groups=labels)
    part = s.groups("sample-0")
    pd.testing.assert_series_equal(part, labels.take(s.indices("sample-0")))


def test_numpy_users_do_not_import_pandas():
    code = ("import sys, numpy as np, samplegen\n"
            "s = samplegen.kfold(np.zeros((50, 2)), 5, seed=1, y=list(range(50)))\n"
            "[s.xy(name) for pair in s.pairs() for name in pair]\n"
            "print('pandas' in sys.modules, 'scipy' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
