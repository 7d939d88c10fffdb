"""Real mrjob runs on the inline and local runners."""
import os

import numpy as np
import pytest

from samplegen.jobs import api, driver
from samplegen.jobs.store import Matrix
from samplegen.udfs import SamplingUDF

from .conftest import NO_CONF, runner_inputs, sample_digests
from .stats import ALPHA, binomial_p

pytestmark = pytest.mark.mrjob


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    base = tmp_path_factory.mktemp("inputs")
    return runner_inputs(base)


@pytest.fixture(scope="module")
def fold_reference(inputs, tmp_path_factory):
    """The inline runner's fold-mode 4-fold of the dense input (seed 7)."""
    dest = str(tmp_path_factory.mktemp("fold") / "fold")
    driver.generate(inputs["dense"], dest, "kfold", {"k": 4}, 7, runner="inline",
                    options=NO_CONF)
    return dest


def read(run, name):
    return Matrix.open(os.path.join(run, name)).to_numpy()


class RunnerSuite:
    RUNNER = None
    OPTIONS = {}

    def run(self, tmp_path, src, udf, params, seed=7, name="run", **kw):
        dest = str(tmp_path / name)
        driver.generate(src, dest, udf, params, seed, runner=self.RUNNER,
                        options=dict(NO_CONF, **self.OPTIONS), **kw)
        return dest

    def test_holdout_pairs(self, tmp_path, inputs):
        run = self.run(tmp_path, inputs["dense"], "holdout", {"ratio": 0.75, "repeats": 2})
        _, source = Matrix.open(inputs["dense"]).to_numpy()
        expected = api.holdout(source, ratio=0.75, repeats=2, seed=7)
        for w in range(2):
            train_ids, train = read(run, f"train-{w}")
            test_ids, test = read(run, f"test-{w}")
            assert np.intersect1d(train_ids, test_ids).size == 0
            assert np.array_equal(np.sort(np.concatenate([train_ids, test_ids])), np.arange(700))
            assert np.array_equal(train, source[train_ids])
            assert np.array_equal(train_ids, expected.indices(f"train-{w}"))
            assert binomial_p(train_ids.size, 700, 0.75) > ALPHA / 2
        assert sorted(os.listdir(run)) == ["_SUCCESS", "_manifest.json", "test-0", "test-1",
                                           "train-0", "train-1"]

    def test_kfold_composed_training_sets(self, tmp_path, inputs):
        k, B = 6, 64
        run = self.run(tmp_path, inputs["wide"], "kfold", {"k": k})
        desc = driver.info(run)
        by_name = {s["name"]: s for s in desc["samples"]}
        _, source = Matrix.open(inputs["wide"]).to_numpy()
        folds = [read(run, f"test-{i}")[0] for i in range(k)]
        assert np.array_equal(np.sort(np.concatenate(folds)), np.arange(450))
        for i in range(k):
            ids, rows = read(run, f"train-{i}")
            assert np.array_equal(np.sort(ids), np.setdiff1d(np.arange(450), folds[i]))
            assert np.array_equal(rows, source[ids])
            # every block full except the last of each column of blocks
            blocks = by_name[f"train-{i}"]["blocks"]
            last_h = max(b[0] for b in blocks)
            assert all(b[2] == B for b in blocks if b[0] < last_h)
            assert {b[1] for b in blocks} == {0, 1, 2} and blocks[-1][3] == 150 - 2 * B
            assert by_name[f"train-{i}"]["composed_of"][-1]["path"] == "."
        # the composed view reads the folds' full blocks, then the extra matrix
        expected = api.kfold(450, k, seed=7, block_size=B)
        for i in range(k):
            assert np.array_equal(read(run, f"train-{i}")[0], expected.indices(f"train-{i}"))
        # fold mode writes about one copy of the data (plus k small extras)
        sizes = sum(s["bytes"] for s in desc["samples"])
        fold_bytes = sum(by_name[f"test-{i}"]["bytes"] for i in range(k))
        assert fold_bytes < sizes < fold_bytes * 1.5 + 2e6

    def test_naive_kfold_has_the_same_rows(self, tmp_path, inputs, fold_reference):
        """This runner's naive k-fold holds the rows of the fold-mode k-fold
        (the inline runner's: that every runner's fold mode has the inline
        bytes is test_same_bytes_on_every_runner_and_task_count's)."""
        fold = fold_reference
        naive = self.run(tmp_path, inputs["dense"], "kfold", {"k": 4, "naive": True},
                         name="naive")
        for i in range(4):
            for name in (f"train-{i}", f"test-{i}"):
                assert np.array_equal(np.sort(read(fold, name)[0]), np.sort(read(naive, name)[0]))
        assert not driver.info(naive)["samples"][0].get("composed_of")

    def test_bootstrap_and_sparse(self, tmp_path, inputs):
        run = self.run(tmp_path, inputs["sparse"], "bootstrap", {"samples": 3, "size": 1000})
        _, source = Matrix.open(inputs["sparse"]).to_numpy()
        for i in range(3):
            ids, rows = read(run, f"sample-{i}")
            assert ids.size == 1000 and np.array_equal(rows, source[ids])
            assert Matrix.open(os.path.join(run, f"sample-{i}")).kind == "sparse"
        assert np.array_equal(read(run, "sample-1")[0], api.bootstrap(600, 3, seed=7,
                                                                      size=1000).indices("sample-1"))

    def test_user_udf_class(self, tmp_path, inputs):
        run = self.run(tmp_path, inputs["dense"], f"{__name__}:EveryThird", {"offset": 1})
        ids, _ = read(run, "thirds")
        assert np.array_equal(ids, np.arange(700)[1::3][::-1])

    def test_user_udf(self, tmp_path, inputs):
        run = self.run(tmp_path, inputs["dense"], "samplegen.udfs.examples:bernoulli", {"p": 0.3})
        ids, _ = read(run, "subsample")
        assert np.array_equal(ids, api.sample(700, "samplegen.udfs.examples:bernoulli", seed=7,
                                              p=0.3).indices("subsample"))


class EveryThird(SamplingUDF):
    """A user UDF class: every third row, in reverse row order."""

    def __init__(self, n_rows, offset=0):
        super().__init__(n_rows)
        self.offset = int(offset)

    def sample_names(self):
        return ["thirds"]

    def occurrences(self, start, stop, rng):
        rows = np.arange(start, stop)
        keep = rows % 3 == self.offset
        offset = np.flatnonzero(keep)
        return offset, np.zeros(offset.size, np.int64), (2**40 - rows[keep]).astype(np.uint64)


class TestInline(RunnerSuite):
    RUNNER = "inline"


class TestLocal(RunnerSuite):
    """The local runner with one map and one reduce task (without
    ``num_cores``, mrjob starts one of each per core of the machine): each
    task is a Python process to start.  That the bytes do not depend on the
    task count is test_same_bytes_on_every_runner_and_task_count's subject
    (one task and three of each)."""
    RUNNER = "local"
    OPTIONS = {"num_cores": 1}


@pytest.mark.slow
@pytest.mark.parametrize("udf,params,src", [
    ("holdout", {"ratio": 0.6, "repeats": 3, "fraction": 0.9, "exact": False}, "wide"),
    ("kfold", {"k": 5, "balanced": False}, "sparse"),
    ("kfold", {"k": 4, "balanced": True}, "wide"),
    ("holdout", {"ratio": 0.7, "exact": True, "fraction": 0.8}, "dense"),
    ("bootstrap", {"samples": 4}, "dense")])
def test_same_bytes_on_every_runner_and_task_count(tmp_path, inputs, udf, params, src):
    runs = []
    for i, (runner, cores, budget) in enumerate([("inline", 1, 16 << 20), ("local", 1, 16 << 20),
                                                  ("local", 3, 4096)]):
        dest = str(tmp_path / f"r{i}")
        driver.generate(inputs[src], dest, udf, params, 11, runner=runner,
                        options=dict(NO_CONF, num_cores=cores), bin_budget=budget)
        runs.append(sample_digests(dest))
    assert runs[0] == runs[1] == runs[2] and len(runs[0]) > 1


@pytest.fixture(scope="module")
def composed_in_the_driver(inputs, tmp_path_factory):
    """The inline runner's fold-mode 3-folds (seed 5) of the wide and the
    sparse input, their small partial bottom blocks composed by the driver
    after one step: {input: sample digests}."""
    from samplegen.jobs.engines import mapreduce
    run_job, steps, digests = mapreduce.run_job, [], {}

    def counting(job, *args, **kw):
        steps.append(len(job.steps()))
        return run_job(job, *args, **kw)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mapreduce, "run_job", counting)
        for src in ("wide", "sparse"):
            dest = str(tmp_path_factory.mktemp("composed") / src)
            driver.generate(inputs[src], dest, "kfold", {"k": 3}, 5, runner="inline",
                            options=NO_CONF)
            digests[src] = sample_digests(dest)
    assert steps == [1, 1]
    return digests


@pytest.mark.parametrize("runner", ["inline", "local"])
def test_fold_mode_composes_in_the_driver_or_in_a_second_step_alike(
        tmp_path, inputs, monkeypatch, composed_in_the_driver, runner):
    """Small partial bottom blocks are composed by the driver after one step;
    beyond DRIVER_COMPOSE_BYTES a second MapReduce step composes them: the
    same bytes either way (dense and sparse).  The driver's composition is
    the inline runner's, run once for both runners (the local runner's
    one-step runs are test_same_bytes_on_every_runner_and_task_count's)."""
    from samplegen.jobs.engines import mapreduce
    run_job, steps = mapreduce.run_job, []

    def counting(job, *args, **kw):
        steps.append(len(job.steps()))
        return run_job(job, *args, **kw)
    monkeypatch.setattr(mapreduce, "run_job", counting)
    monkeypatch.setattr(mapreduce, "DRIVER_COMPOSE_BYTES", 0)
    for src in ("wide", "sparse"):
        dest = str(tmp_path / src)
        driver.generate(inputs[src], dest, "kfold", {"k": 3}, 5, runner=runner, options=NO_CONF)
        digests = sample_digests(dest)
        assert digests == composed_in_the_driver[src] and len(digests) == 6, src
    assert steps == [2, 2]


def corrupt_copy(src, dest):
    """A copy of matrix *src* with one bit of a block flipped (its CRC no longer matches)."""
    import shutil
    shutil.copytree(src, dest)
    part = os.path.join(dest, "part-00000")
    data = bytearray(open(part, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(part, "wb").write(bytes(data))
    return dest


def test_failed_run_leaves_nothing_and_input_untouched(tmp_path, inputs):
    from .conftest import tree_digest
    src = corrupt_copy(inputs["dense"], str(tmp_path / "copy"))
    before = tree_digest(src)
    from samplegen.udfs.errors import InputError
    for runner in ("inline", "local"):
        with pytest.raises(InputError, match="corrupt"):
            driver.generate(src, str(tmp_path / "out"), "holdout", {"ratio": 0.5}, 1,
                            runner=runner, options=NO_CONF)
        assert sorted(os.listdir(tmp_path)) == ["copy"]
    assert tree_digest(src) == before


FAILING_UDF = (
    "import numpy as np\n"
    "from samplegen.udfs.errors import ParameterError\n"
    "def refuses(start, stop, rng, params):\n"
    "    if stop > 300:\n"
    "        raise ParameterError('refuses rows past 300')\n"
    "    ids = np.arange(stop - start)\n"
    "    return ids, np.zeros(ids.size, np.int64), ids.astype(np.uint64)\n"
    "def breaks(start, stop, rng, params):\n"
    "    return len(None)\n")


@pytest.fixture
def failing_udfs(tmp_path, monkeypatch):
    """A user module whose UDFs fail inside the tasks: ``refuses`` with a
    samplegen ParameterError, ``breaks`` with a bug (TypeError)."""
    import sys
    module = tmp_path / "mods" / "sg_test_failing.py"
    module.parent.mkdir()
    module.write_text(FAILING_UDF)
    monkeypatch.syspath_prepend(str(module.parent))
    yield "sg_test_failing"
    sys.modules.pop("sg_test_failing", None)


def check_task_errors(generate, module, bug, cause):
    """``generate(udf)`` runs *module*'s failing UDFs (:func:`failing_udfs`) on
    an engine: a samplegen error raised in a task comes back as itself, same
    class and message (the task_errors protocol); a bug as *bug* whose
    message matches *cause*."""
    from samplegen.udfs.errors import ParameterError
    with pytest.raises(ParameterError, match="^refuses rows past 300$"):
        generate(f"{module}:refuses")
    with pytest.raises(bug, match=cause + "object of type 'NoneType' has no len"):
        generate(f"{module}:breaks")


@pytest.mark.parametrize("runner", ["inline", "local"])
def test_a_task_error_comes_back_as_its_class_and_message(tmp_path, inputs, failing_udfs, runner):
    """Local runner: the task writes the marker line on its stderr; inline:
    tasks run in this process, so errors are themselves anyway."""
    cause = "^the MapReduce job failed: TypeError: " if runner == "local" else "^"
    check_task_errors(lambda udf: driver.generate(inputs["dense"], str(tmp_path / "out"), udf,
                                                  {}, 1, runner=runner, options=NO_CONF),
                      failing_udfs, TypeError if runner == "inline" else RuntimeError, cause)
    assert sorted(os.listdir(tmp_path)) == ["mods"]
