"""The Python API gives the jobs' samples from an in-memory array."""
import numpy as np
import pytest

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
    disk = api.read_run(run)
    assert mem.names == disk.names
    for name in mem.names:
        assert np.array_equal(mem.indices(name), disk.indices(name)), name
        assert np.array_equal(mem[name], disk[name]), name
        assert np.array_equal(mem[name], X[mem.indices(name)])


def test_api_with_a_row_count_and_errors():
    s = api.kfold(100, 5, seed=1)
    assert len(s) == 10 and "test-0" in list(s)
    with pytest.raises(ValueError, match="row count"):
        s.array("test-0")
    with pytest.raises(KeyError, match="no sample"):
        s.indices("nope")
    with pytest.raises(ValueError, match="2-D"):
        api.holdout(np.arange(5), ratio=0.5, seed=1)
