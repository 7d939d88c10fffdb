"""Hostile use of samplegen's public Python functions (holdout, kfold,
bootstrap, weighted_sample, sample, read_run, and driver.generate, the way a
script writes a run): wrong types, strings and bools for numbers, NaN and
infinities, negative and zero sizes, empty arrays, mismatched lengths, pandas
frames with odd dtypes, UDFs that raise, exit or print, destinations that
exist, are files or are symbolic links, and damaged manifests.  Each test is
named after what it protects."""
import json
import os

import numpy as np
import pandas as pd
import pytest

import samplegen
from samplegen.jobs import driver
from samplegen.udfs.errors import EngineError, InputError, OutputError, ParameterError

from ..conftest import make

X = np.arange(60.0).reshape(20, 3)

UDFS = '''
import sys
import numpy as np

def _all(start, stop):
    off = np.arange(stop - start)
    return off, np.zeros(off.size, np.int64), off.astype(np.uint64)

def raises(start, stop, rng, params):
    raise ValueError("the UDF's own bug")

def exits(start, stop, rng, params):
    sys.exit(0)

def prints(start, stop, rng, params):
    print("hello from the UDF")
    return _all(start, stop)
'''


@pytest.fixture
def udfs(user_module):
    return user_module("api_hostile_udfs", UDFS)


#: (function, arguments without the bad one, the bad parameter's name)
CALLS = {
    "holdout": (samplegen.holdout, dict(ratio=0.8, seed=7)),
    "kfold": (samplegen.kfold, dict(k=3, seed=7)),
    "bootstrap": (samplegen.bootstrap, dict(samples=2, seed=7)),
    "weighted_sample": (samplegen.weighted_sample, dict(weights=np.ones(20), seed=7, size=3)),
    "sample": (samplegen.sample, dict(udf="holdout", seed=7, ratio=0.5)),
}

NOT_NUMBERS = [("holdout", "ratio", "0.8"), ("holdout", "ratio", True),
               ("holdout", "fraction", "1"), ("holdout", "repeats", "2"),
               ("holdout", "seed", "7"), ("holdout", "seed", 7.5), ("holdout", "repeats", 2.5),
               ("kfold", "k", "3"), ("kfold", "k", True), ("kfold", "k", 3.5),
               ("kfold", "block_size", "10"), ("kfold", "repeats", [2]),
               ("bootstrap", "samples", "2"), ("bootstrap", "size", "10"),
               ("bootstrap", "size", np.bool_(True)), ("weighted_sample", "size", "3"),
               ("weighted_sample", "samples", None), ("sample", "seed", "7"),
               ("sample", "block_size", "100")]


@pytest.mark.parametrize("function,param,value", NOT_NUMBERS)
def test_numeric_parameters_must_be_numbers(function, param, value):
    """holdout(X, ratio='0.8') used to run (the string read as a number)."""
    call, args = CALLS[function]
    with pytest.raises(ParameterError) as info:
        call(X, **dict(args, **{param: value}))
    message = str(info.value)
    assert param in message and type(value).__name__ in message and repr(value) in message


@pytest.mark.parametrize("function,param,value", [
    ("holdout", "ratio", float("nan")), ("holdout", "ratio", float("inf")),
    ("holdout", "fraction", -float("inf")), ("kfold", "k", float("inf")),
    ("bootstrap", "size", float("nan")), ("sample", "ratio", float("nan")),
    ("weighted_sample", "expected", float("inf"))])
def test_nan_and_infinities_are_refused_by_name(function, param, value):
    call, args = CALLS[function]
    args = {k: v for k, v in args.items() if not (function == "weighted_sample"
                                                  and param == "expected" and k == "size")}
    with pytest.raises(ParameterError, match=param):
        call(X, **dict(args, **{param: value}))


@pytest.mark.parametrize("function,param,value", [
    ("holdout", "ratio", -0.2), ("holdout", "ratio", 0), ("holdout", "ratio", 1.5),
    ("holdout", "repeats", 0), ("kfold", "k", 1), ("kfold", "k", 21), ("kfold", "k", -3),
    ("bootstrap", "samples", 0), ("bootstrap", "size", -1), ("holdout", "seed", -1),
    ("holdout", "seed", 2 ** 64), ("weighted_sample", "size", 0)])
def test_out_of_range_numbers_are_refused_by_name(function, param, value):
    call, args = CALLS[function]
    with pytest.raises(ParameterError, match=param):
        call(X, **dict(args, **{param: value}))


def test_numpy_numbers_and_whole_floats_are_numbers():
    a = samplegen.holdout(X, ratio=np.float32(0.5), seed=np.uint64(7), repeats=np.int8(1))
    b = samplegen.holdout(X, ratio=0.5, seed=7)
    assert all(np.array_equal(a.indices(n), b.indices(n)) for n in b.names)
    assert len(samplegen.kfold(X, 4.0, seed=7)) == 8


@pytest.mark.parametrize("data", [np.empty((0, 3)), [], pd.DataFrame({"a": []}), 0, -5,
                                  "abc", None, 3.5, {"a": 1}, np.float64(2.0)])
def test_inputs_without_rows_are_refused(data):
    with pytest.raises(ParameterError, match="X"):
        samplegen.holdout(data, ratio=0.5, seed=1)


@pytest.mark.parametrize("what", ["y", "groups"])
def test_mismatched_lengths_are_refused(what):
    with pytest.raises(ParameterError, match=f"{what} has 19 rows but X has 20"):
        samplegen.kfold(X, 3, seed=1, **{what: np.zeros(19)})


def test_pandas_frames_with_odd_dtypes_come_back_as_frames():
    """Rows are taken by position whatever the columns hold."""
    df = pd.DataFrame({"when": pd.date_range("2020-01-01", periods=20),
                       "what": pd.Categorical(list("ab") * 10),
                       "obj": [object()] * 20, "n": pd.array(range(20), dtype="Int64")},
                      index=[f"r{i}" for i in range(20)])
    s = samplegen.holdout(df, ratio=0.5, seed=3)
    train = s["train-0"]
    assert isinstance(train, pd.DataFrame) and list(train.dtypes) == list(df.dtypes)
    assert list(train.index) == [f"r{i}" for i in s.indices("train-0")]
    assert sorted(s.indices("train-0").tolist() + s.indices("test-0").tolist()) == list(range(20))


def test_a_udf_that_raises_raises_its_own_error(udfs):
    with pytest.raises(ValueError, match="the UDF's own bug"):
        samplegen.sample(X, f"{udfs}:raises", seed=1)


def test_a_udf_that_exits_is_a_failure_not_the_callers_exit(udfs):
    """sys.exit() in a UDF used to end the caller's script with status 0."""
    with pytest.raises(EngineError, match="sys.exit"):
        samplegen.sample(X, f"{udfs}:exits", seed=1)


def test_what_a_udf_prints_goes_to_stderr(udfs, capfd):
    s = samplegen.sample(X, f"{udfs}:prints", seed=1)
    out, err = capfd.readouterr()
    assert out == "" and "hello from the UDF" in err and len(s.indices("sample-0")) == 20


# ---------------------------------------------------------------------------
# destinations of the runs a script writes (driver.generate)
# ---------------------------------------------------------------------------
def test_a_destination_that_exists_is_a_file_or_a_link_is_refused(tmp_path):
    src = make(tmp_path, rows=100)
    params = {"ratio": 0.5}
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("mine")
    with pytest.raises(OutputError, match="not empty"):
        driver.generate(src, str(full), "holdout", params, 1)
    afile = tmp_path / "afile"
    afile.write_text("mine")
    with pytest.raises(OutputError, match="not a directory"):
        driver.generate(src, str(afile), "holdout", params, 1, overwrite=True)
    (tmp_path / "link").symlink_to(full)
    for overwrite in (False, True):
        with pytest.raises(OutputError, match=f"symbolic link to {full}"):
            driver.generate(src, str(tmp_path / "link"), "holdout", params, 1,
                            overwrite=overwrite)
    assert os.listdir(full) == ["x"] and afile.read_text() == "mine"
    assert (tmp_path / "link").is_symlink()


def test_read_run_refuses_a_damaged_manifest(tmp_path):
    src = make(tmp_path, rows=100)
    dest = tmp_path / "run"
    driver.generate(src, str(dest), "holdout", {"ratio": 0.5}, 1)
    assert samplegen.read_run(str(dest)).names == ["train-0", "test-0"]
    manifest = json.loads((dest / "_manifest.json").read_text())
    manifest["seed"] = 2
    (dest / "_manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(InputError, match="damaged run manifest"):
        samplegen.read_run(str(dest))
