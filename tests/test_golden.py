"""Golden digests: the reproducibility promise, pinned.

samplegen promises *same seed, same bytes*: the same seed and parameters give
the same samples on every engine, for every partitioning and with every numpy
version the package allows (docs/CLI.md, "Reproducibility").  The other tests
compare runs with each other (runners, task counts, blockings); this one pins
absolute outputs, so that a change of numpy, of a distribution algorithm, of
the stream layout or of a sampler's sequence of draws cannot go unnoticed.

**A change of any digest below is a break of that promise.**  It is allowed
only together with a new ``SAMPLER_VERSION`` in ``udfs/rng.py`` (see the bump
rules there), which every run manifest records; regenerate the literals in
the same commit (``_regenerate()`` at the bottom prints them).

What is digested (SHA-256, hex): for each sample, in the order the run (or
the API, or the sampler) lists them, its name as UTF-8, a NUL byte, then its
row ids as little-endian int64 and its values as little-endian float64, row
after row, in sample order -- one digest per run over all its samples.  That
is byte-exact for which rows, in which order, with which values; the
encoding of the part files is pinned by the format tests, not here.  TBS
samples are digested the same way: the in-memory samplers' ``sample()`` (the
int64 item ids, in the order returned, no values), as are the sampling
primitives' calls (``samplegen.weighted``) and the weighted samples of rows
(``weighted_sample``, the jobs' rows), and the micro-batch job's
current sample, sorted by key (as "row ids" the triples ``_sg_batch``,
``_sg_row``, ``id`` row after row; as values its column ``x``).

Inputs: ``make_matrix`` 2000 x 8 with block size 100 and seed 7 (so
``make_matrix`` is pinned too, as is a small sparse matrix), sampled with
seeds 7 and 8 by the inline runner; TBS streams of 20 batches whose items are
deterministic (no random inputs: only the samplers' draws are pinned).
"""
import hashlib
import os

import numpy as np
import pytest

from samplegen.jobs import api, driver
from samplegen.jobs.store import Matrix
from samplegen.tbs import RTBS, TTBS, BatchedReservoir, BChao, Exponential, Polynomial
from samplegen.udfs.rng import SAMPLER_VERSION

from .conftest import NO_CONF

SEEDS = (7, 8)
ROWS, COLS, BLOCK = 2000, 8, 100

RUNS = {
    # the paper's coins (the defaults are exact sizes and balanced folds)
    "holdout": ("holdout", {"ratio": 0.7, "repeats": 2, "exact": False}),
    "kfold": ("kfold", {"k": 5, "balanced": False}),
    "kfold-naive": ("kfold", {"k": 5, "naive": True, "balanced": False}),
    "bootstrap": ("bootstrap", {"samples": 3}),
    "udf": ("samplegen.udfs.examples:bernoulli", {"p": 0.3}),
    "holdout-exact": ("holdout", {"ratio": 0.7, "repeats": 2, "fraction": 0.9, "exact": True}),
    "kfold-balanced": ("kfold", {"k": 5, "balanced": True}),
    "bootstrap-oob": ("bootstrap", {"samples": 2, "size": 1500, "oob": True}),
}

MATRIX = {
    "dense": "9475301bff22b75e3b05fb3bfb3715957a3cd0d69cf8731581b3973320fd5d11",
    "sparse": "e4d2a7addecc2d7843de034cf87c647359becd47543192739bde2d925a5ba743",
}

GOLDEN_RUNS = {
    (7, "holdout"): "efc5b92fe94b3505cef1575e675e94750a7136adc5454736e699434641aa1179",
    (7, "kfold"): "1f5f6e8d6189269cf5bc5b13fbd583350774c32bae7b8373480535935d24f16c",
    (7, "kfold-naive"): "9ff9c459c798ed1222452e8da164e02509a57799c3e271236b7a1f200fc4f6b7",
    (7, "bootstrap"): "a878e1e158c22139bf8953d74274193327bf5516b881d86613dae72a7f2976c4",
    (7, "udf"): "c45c9b92f0be074683d718debc93c85135b955775204ea2c6daeac47baf8dfb6",
    (8, "holdout"): "836bb8872712d45cdcf9d4514c4dbaf431d6e5427702b3f526a88a6fdf5af20b",
    (8, "kfold"): "fbae2a4e007ca6fe2913ae0b5400469a01dd2e6ff890e48cb6ea5df444849a81",
    (8, "kfold-naive"): "001a3e154de55e28c75567a788090d3d40d966b6ac1f009c4dd2e20b37f2e786",
    (8, "bootstrap"): "0a8507bcfe9bfa61022a4679507f1bc13767cbf1d6981bd23b7e41f81edb7131",
    (8, "udf"): "baf78ddf1d6ee1f3c8b47f230fe31d630892ede8a2f2db6171d6b68178789260",
    (7, "holdout-exact"): "5b4f8313e39de1a80603fe42d176e74e244cbdbe1fa10e9790973ab11c049a9d",
    (7, "kfold-balanced"): "91e808a54f7a51ebb83a6a7e3124ec54c3d30f8bf028e31d09cb995ca515754f",
    (8, "holdout-exact"): "1a3eff219d6c07b45c3ba7189dbe85bfcb5d122e99059b60198fc35fe020cf80",
    (8, "kfold-balanced"): "bc6f1df96a5a41d72aa400420d1efa7fc8356fa5168ab5724bbcb7d61d4e2e48",
    (7, "bootstrap-oob"): "eddc0726c57c8dee613a8041c242bc9114cd802bd2645a10bac697c6fab32675",
    (8, "bootstrap-oob"): "34937fb3f08a9fb7b24707c6c5f9985d386dd8b7da8a3caeafc3114225ba4f25",
}

GOLDEN_API = {
    (7, "holdout"): "a9010335c75c618236b7f33f0519035827ebc275d4b2ac3a99d39db8643bbb9b",
    (7, "kfold"): "db250e525ae9fbda48afeef11e1ed26868d33187db89c046a1163f0bf5285668",
    (7, "kfold-naive"): "0afefda0f67edd476cae622461e3c08d1c302bef5e651177cdf6b8056f5751d1",
    (7, "bootstrap"): "6c8e0d7b5974027b36de06754d35e12f068ada393d989649bc7bb2a2f056774e",
    (7, "udf"): "d372ced82fc1c99704bd919ff2e05d9dbc6711376efea124bdc8fdf6e0f6f60c",
    (8, "holdout"): "cd2cc0899b40a237eca6acc36579660975743693af1e0f5bac5ce5e49ca48f52",
    (8, "kfold"): "60b5d7cbb3db9737d6e79cc3509e96cd99f6eabc0b4745d949cbbac021f804ba",
    (8, "kfold-naive"): "57871a01f3de9e36e5417ce64515952dc0efb3b8bb9ef9f2331fe54cf1790f73",
    (8, "bootstrap"): "41258ab025693e5e13942a5dde4089fc25bb809c6d9d03466a77e86bcf5d6978",
    (8, "udf"): "6181055aa6eb2ecf752eafdc3f1cc41091f00fc69a5edf2b758a7bbdef108f6c",
    (7, "holdout-exact"): "147e4ac3faefebd249011110d4856306d5e30ef27791bad41b824a5d5244cf78",
    (7, "kfold-balanced"): "153959657bab47558f185f6b39ebdd0afce5de7066a3b46ffcab6d5717015b9a",
    (8, "holdout-exact"): "4c04165070067457a1923e95e8152c43a069ccd2df4aa8fbd05c33a98fa403ae",
    (8, "kfold-balanced"): "7204f319306f52f592da40dba3dcb8ac9e4bd8467b0a5e411a323e3b2ce7e274",
    (7, "bootstrap-oob"): "ce17fb8139982c4c2bd4173cd8b089ac7bc936c6b93084759c8fe0013e772147",
    (8, "bootstrap-oob"): "c933fab1ad664a4fc61a1d607a5a2c26f2fb9e94742209cd9b705776658398a7",
}

GOLDEN_TBS = {
    (7, "rtbs-exp"): "827521ba86df1bedecd559c54827f326bb5f63a407143249421625dcdd2253a2",
    (7, "rtbs-poly"): "d5265165e36fc2535c748e29d709e059f45726ed13f8a9a00e2f30cb5f46d87c",
    (7, "ttbs-exp"): "a40f70344b8af8e7c5d93f5e90a6726feb66b2ff75caff53d7d531f6c9ff5399",
    (7, "reservoir"): "dc486343d7ed475a406d3b6d953b66bafbeb05e4a3dd204e68c2060070faffe0",
    (7, "bchao"): "8da9ed43fd89671802fa3d5fb44352326dc30bf054f78bf6bdaac7d9bc046006",
    (8, "rtbs-exp"): "e9ab0cd3ceb1e605299629f014cab72dbb9839ef55d1ed74f7a10e536301ee16",
    (8, "rtbs-poly"): "2f87040cf34eadcbb0fb657585937eec250c09859bc9eafc565d190968e6ff8c",
    (8, "ttbs-exp"): "c55af6d68bcd2a205e8376da11fa6f8283f66be318e27f0d3fe69f6fdd2e43c1",
    (8, "reservoir"): "d1a38477dc67934d3a1ad8f2cbbcaa0e9413d32120a885ceebc0202494289735",
    (8, "bchao"): "d0c76b00357095147b810caf8b9ffa2e057ef3f90cf2ad77484edf7b71e21cbd",
}

GOLDEN_TBS_JOB = {
    (7, "rtbs-exp"): "f93a73fac19cc216e60951297e07e839fe9155ff5f36b073415aae87487d021f",
    (7, "rtbs-poly"): "60d1cd4ea2da4ee173862bfbc72cc342813e581c585c11f518878f1454e8491d",
    (7, "ttbs-exp"): "ed94b0d8a91e0f551f59dd4ff692f783572083157d59bdff04586c5c731c28b6",
    (8, "rtbs-exp"): "48791034d8fe4d2b919fea8104a43cb14d9da9e38030d03ec1159fba6d6b8186",
    (8, "rtbs-poly"): "45a609c5b7b81398382dbe4b55975a53b9417613d9d10eecc57dbe5c729fda31",
    (8, "ttbs-exp"): "34a75f00b591bf895d3c0ae06a5d2c8e19403f745b6fe6a175c8d5a5e3ceec33",
}

GOLDEN_WEIGHTED = {
    (7, "size"): "c3fb36825fab6c95a3ac6e489900d4c2db37fa001b24ed81a722b3ac91f50cdb",
    (7, "replace"): "684abf184f93f139e205cf3c0ec2188ae37d5fd632f2151da54ddd501e05eb5c",
    (7, "expected"): "6626cb1fb82a4245fc6f3df3f445005205eeb78b4e3e4dc0ad4ca4d7fc68506a",
    (8, "size"): "c17b92c2ae6e9bf6a04895178a530e415327da235a9774d4070e22c3792f4c97",
    (8, "replace"): "bf7da4d7efac6a86c594bb86ec4e4068da9f1d54a63db1e4d089e68aa0d6c1bf",
    (8, "expected"): "001cb420156dda79aece302facce4ee60cceaac9be583979483e4b0faf60059d",
}

GOLDEN_PRIMITIVES = {
    (7, "calls"): "20d74ebe9a8c3555da762e08a20fe3d97bb269572ae339b4f0e38442d9351b80",
    (8, "calls"): "ecc445513379ee5e6f103cc909c8a83bb925588a3f141f09d15ae835e12559df",
}


def digest(samples):
    """SHA-256 over ``[(name, row ids, values or None), ...]`` as described above."""
    h = hashlib.sha256()
    for name, ids, values in samples:
        h.update(name.encode() + b"\0")
        h.update(np.ascontiguousarray(ids, dtype="<i8").tobytes())
        if values is not None:
            h.update(np.ascontiguousarray(values, dtype="<f8").tobytes())
    return h.hexdigest()


def matrix_digest(path):
    ids, values = Matrix.open(path).to_numpy()
    return digest([("matrix", ids, values)])


@pytest.fixture(scope="module")
def matrices(tmp_path_factory):
    base = tmp_path_factory.mktemp("golden")
    dense = str(base / "dense")
    sparse = str(base / "sparse")
    driver.make_matrix(dense, ROWS, COLS, BLOCK, seed=7)
    driver.make_matrix(sparse, 300, 40, 64, density=0.1, seed=7)
    return {"dense": dense, "sparse": sparse, "base": base}


def test_make_matrix_is_pinned(matrices):
    got = {kind: matrix_digest(matrices[kind]) for kind in MATRIX}
    assert got == MATRIX


def _run(matrices, seed, name):
    udf, params = RUNS[name]
    dest = str(matrices["base"] / f"run-{name}-{seed}")
    manifest = driver.generate(matrices["dense"], dest, udf, params, seed, runner="inline",
                               options=NO_CONF)
    assert manifest["rng"]["streams"] == SAMPLER_VERSION == "samplegen-streams/2"
    run = api.read_run(dest)
    return [(s, run.indices(s), run.array(s)) for s in run.names]


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_job_samples_are_pinned(matrices, seed):
    got = {(seed, name): digest(_run(matrices, seed, name)) for name in RUNS}
    assert got == {key: value for key, value in GOLDEN_RUNS.items() if key[0] == seed}


def _api(seed, name):
    if name == "holdout":
        s = api.holdout(ROWS, ratio=0.7, repeats=2, seed=seed, exact=False)
    elif name == "kfold":
        s = api.kfold(ROWS, 5, seed=seed, block_size=BLOCK, balanced=False)
    elif name == "kfold-naive":
        s = api.kfold(ROWS, 5, seed=seed, naive=True, balanced=False)
    elif name == "bootstrap":
        s = api.bootstrap(ROWS, 3, seed=seed)
    elif name == "holdout-exact":
        s = api.holdout(ROWS, ratio=0.7, repeats=2, fraction=0.9, seed=seed, exact=True)
    elif name == "kfold-balanced":
        s = api.kfold(ROWS, 5, seed=seed, block_size=BLOCK, balanced=True)
    elif name == "bootstrap-oob":
        s = api.bootstrap(ROWS, 2, seed=seed, size=1500, oob=True)
    else:
        s = api.sample(ROWS, RUNS["udf"][0], seed=seed, block_size=BLOCK, p=0.3)
    return [(n, s.indices(n), None) for n in s.names]


@pytest.mark.parametrize("seed", SEEDS)
def test_api_indices_are_pinned(seed):
    got = {(seed, name): digest(_api(seed, name)) for name in RUNS}
    assert got == {key: value for key, value in GOLDEN_API.items() if key[0] == seed}


# -- time-biased sampling ------------------------------------------------------------
TBS_SIZES = [120, 0, 95, 130, 80, 150, 60, 110, 100, 90,
             0, 140, 70, 105, 125, 85, 115, 95, 100, 110]
TBS_TIMES = [1.0, 2.0, 2.5, 4.0, 5.0, 6.0, 7.5, 8.0, 9.0, 10.0, 11.0, 12.5, 13.0, 14.0, 15.0, 16.0,
             17.5, 18.0, 19.0, 20.0]
TBS = {
    "rtbs-exp": dict(algorithm="rtbs", decay="exp", size=200, **{"lambda": 0.1}),
    "rtbs-poly": dict(algorithm="rtbs", decay="poly", size=200, power=2.0, shift=1.0, delta1=0.2,
                      delta2=3.0),
    "ttbs-exp": dict(algorithm="ttbs", decay="exp", size=200, mean_batch_size=100.0,
                     **{"lambda": 0.1}),
}


def _sampler(name, seed):
    if name == "reservoir":
        return BatchedReservoir(200, seed=seed)
    if name == "bchao":
        return BChao(200, Exponential(0.1), seed=seed)
    p = TBS[name]
    if name == "rtbs-exp":
        return RTBS(p["size"], Exponential(p["lambda"]), seed=seed)
    if name == "rtbs-poly":
        return RTBS(p["size"], Polynomial(p["power"], shift=p["shift"]), seed=seed,
                    delta1=p["delta1"], delta2=p["delta2"], max_weight=p["size"])
    return TTBS(p["size"], Exponential(p["lambda"]), p["mean_batch_size"], seed=seed)


def _in_memory(name, seed):
    s = _sampler(name, seed)
    first = 0
    for b, t in zip(TBS_SIZES, TBS_TIMES):
        s.update(np.arange(first, first + b, dtype=np.int64), time=t)
        first += b
    return [(name, s.sample(), None)]


IN_MEMORY = list(TBS) + ["reservoir", "bchao"]


@pytest.mark.parametrize("seed", SEEDS)
def test_tbs_samplers_are_pinned(seed):
    got = {(seed, name): digest(_in_memory(name, seed)) for name in IN_MEMORY}
    assert got == {key: value for key, value in GOLDEN_TBS.items() if key[0] == seed}


def _frame(k, size):
    import pandas as pd
    ids = np.int64(k) * 1000 + np.arange(size, dtype=np.int64)
    return pd.DataFrame({"id": ids, "x": ids * 0.25 - 3.0})


@pytest.fixture(scope="module")
def tbs_batches(tmp_path_factory):
    from tests.tbs_jobs_util import write_batch
    folder = str(tmp_path_factory.mktemp("golden-tbs") / "batches")
    for k, (b, t) in enumerate(zip(TBS_SIZES, TBS_TIMES), start=1):
        write_batch(folder, k, b, time=t, frame=_frame(k, b))
    return folder


def _job(tbs_batches, name, seed, tmp_path):
    from samplegen.tbs.stream import current_sample, run
    state = str(tmp_path / f"state-{name}-{seed}")
    run(tbs_batches, state, dict(TBS[name], seed=seed, partitions=2, compact_every=6,
                                 keep_deltas=30))
    df = current_sample(state).sort_values(["_sg_batch", "_sg_row"], kind="stable")
    keys = np.stack([df[c].to_numpy() for c in ("_sg_batch", "_sg_row", "id")], axis=1)
    return [(name, keys.ravel(), df["x"].to_numpy())]


@pytest.mark.parametrize("seed", SEEDS)
def test_tbs_jobs_are_pinned(tbs_batches, tmp_path, monkeypatch, seed):
    monkeypatch.setenv("SAMPLEGEN_TBS_FSYNC", "0")
    got = {(seed, name): digest(_job(tbs_batches, name, seed, tmp_path)) for name in TBS}
    assert got == {key: value for key, value in GOLDEN_TBS_JOB.items() if key[0] == seed}


# -- weighted samples of rows -------------------------------------------------------
WEIGHTED = {"size": {"size": 300, "samples": 2}, "replace": {"size": 1500, "replace": True},
            "expected": {"expected": 400, "samples": 2}}


def _weighted(seed, name):
    """The weighted UDF's samples (through the API: the jobs' rows) over
    ROWS rows weighing ``(i % 11) / 2`` (every 11th row zero)."""
    weights = (np.arange(ROWS) % 11) * 0.5
    s = api.weighted_sample(ROWS, weights, seed, **WEIGHTED[name])
    return [(n, s.indices(n), None) for n in s.names]


@pytest.mark.parametrize("seed", SEEDS)
def test_weighted_samples_are_pinned(seed):
    got = {(seed, name): digest(_weighted(seed, name)) for name in WEIGHTED}
    assert got == {key: value for key, value in GOLDEN_WEIGHTED.items() if key[0] == seed}


# -- sampling primitives ------------------------------------------------------------
def _primitives(seed):
    """A fixed sequence of calls of the in-memory primitives: each result in turn."""
    from samplegen.udfs.sumtree import PrioritizedBuffer, SumTree, UniformSampler
    out = []
    uniform = UniformSampler(1000, seed=seed)
    out += [(f"uniform-{k}", uniform.sample(k), None) for k in (10, 300, 1000, 1)]
    weights = (np.arange(5000) % 13) * 0.5 + (np.arange(5000) % 97 == 0) * 40.0
    tree = SumTree(weights, seed=seed)
    out += [("tree", tree.sample(500), None), ("tree-distinct", tree.sample(200, False), None)]
    tree.update(np.arange(0, 5000, 3), np.arange(0, 5000, 3) % 5)
    out += [("tree-updated", tree.sample(300), None),
            ("tree-updated-distinct", tree.sample(2000, False), None)]
    buf = PrioritizedBuffer(64, alpha=0.7, beta=0.5, seed=seed)
    buf.add(np.arange(100) * 1.5)
    buf.update(np.arange(0, 64, 2), np.arange(32) * 0.25)
    slots, items, _ = buf.sample(40)     # the weights come from pow(): libm's, not pinned
    out += [("replay", slots, items)]
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_sampling_primitives_are_pinned(seed):
    assert {(seed, "calls"): digest(_primitives(seed))} == \
        {key: value for key, value in GOLDEN_PRIMITIVES.items() if key[0] == seed}


def _regenerate(tmp):  # pragma: no cover - run by hand after a SAMPLER_VERSION bump
    """Print every digest:
    ``python -c "import tests.test_golden as g; g._regenerate('/tmp/g')"``."""
    from pathlib import Path
    tmp = Path(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    m = {"dense": str(tmp / "dense"), "sparse": str(tmp / "sparse"), "base": tmp}
    driver.make_matrix(m["dense"], ROWS, COLS, BLOCK, seed=7, overwrite=True)
    driver.make_matrix(m["sparse"], 300, 40, 64, density=0.1, seed=7, overwrite=True)
    print("MATRIX =", {kind: matrix_digest(m[kind]) for kind in MATRIX})
    import shutil
    for seed in SEEDS:
        for name in RUNS:
            shutil.rmtree(m["base"] / f"run-{name}-{seed}", ignore_errors=True)
    print("GOLDEN_RUNS =", {(seed, n): digest(_run(m, seed, n)) for seed in SEEDS for n in RUNS})
    print("GOLDEN_API =", {(seed, n): digest(_api(seed, n)) for seed in SEEDS for n in RUNS})
    print("GOLDEN_TBS =", {(seed, n): digest(_in_memory(n, seed))
                           for seed in SEEDS for n in IN_MEMORY})
    print("GOLDEN_WEIGHTED =", {(seed, n): digest(_weighted(seed, n))
                                for seed in SEEDS for n in WEIGHTED})
    print("GOLDEN_PRIMITIVES =", {(seed, "calls"): digest(_primitives(seed)) for seed in SEEDS})
    from tests.tbs_jobs_util import write_batch
    folder = str(tmp / "batches")
    shutil.rmtree(folder, ignore_errors=True)
    for k, (b, t) in enumerate(zip(TBS_SIZES, TBS_TIMES), start=1):
        write_batch(folder, k, b, time=t, frame=_frame(k, b))
    os.environ["SAMPLEGEN_TBS_FSYNC"] = "0"
    jobs = tmp / "jobs"
    shutil.rmtree(jobs, ignore_errors=True)
    jobs.mkdir()
    print("GOLDEN_TBS_JOB =", {(seed, n): digest(_job(folder, n, seed, jobs))
                               for seed in SEEDS for n in TBS})
