"""The embedded engine (``--runner embedded``, the default): the same samples
as the inline runner, byte for byte, whatever the threads, block size or
budget; memory bounded by the budget (spilling past it); a task's error as
one error with nothing written; the command line's default runner."""
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from samplegen.jobs import driver
from samplegen.jobs.blocks import Block
from samplegen.jobs.engines import embedded
from samplegen.jobs.engines.spool import SortSpool
from samplegen.udfs.errors import EngineError, InputError

from .conftest import NO_CONF, make, sample_digests, tree_digest
from .test_mrjob import (  # noqa: F401  (fixtures)
    RunnerSuite,
    check_task_errors,
    corrupt_copy,
    failing_udfs,
    fold_reference,
    inputs,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class TestEmbedded(RunnerSuite):
    """The runner suite of the MapReduce engine, on ``--runner embedded``."""

    RUNNER = "embedded"


def _generate(src, dest, udf, params, runner="embedded", seed=11, **options):
    driver.generate(src, dest, udf, params, seed, runner=runner, options=dict(NO_CONF, **options))
    return dest


CASES = [
    ("holdout", {"ratio": 0.6, "repeats": 3, "fraction": 0.9, "exact": False}),  # coins
    ("kfold", {"k": 5, "balanced": False}),                          # fold mode, coins
    ("kfold", {"k": 3, "naive": True}),
    ("holdout", {"ratio": 0.6, "repeats": 2, "fraction": 0.9, "exact": True}),  # exact sizes
    ("kfold", {"k": 4, "balanced": True}),
    ("timeseries", {"k": 3, "gap": 2, "max_train_size": 100}),
    ("bootstrap", {"samples": 3, "size": 700}),
    ("bootstrap", {"samples": 2, "size": 300, "oob": True}),
    ("samplegen.udfs.examples:bernoulli", {"p": 0.3}),              # a vectorized user UDF
    ("samplegen.udfs.examples:paper_holdout_series", {"ratio": 0.5, "repeats": 2}),  # scalar
]


@pytest.fixture(scope="module")
def blocked(tmp_path_factory):
    """Inputs of several block sizes: dense (rows not a multiple of the block
    size, several column blocks at 8) and sparse."""
    base = tmp_path_factory.mktemp("blocked")
    return {("dense", 8): make(base, "d8", rows=301, cols=19, block_size=8, seed=5),
            ("dense", 64): make(base, "d64", rows=450, cols=150, block_size=64, seed=2),
            ("dense", 1000): make(base, "d1000", rows=333, cols=7, block_size=1000, seed=6),
            ("sparse", 16): make(base, "s16", rows=250, cols=40, block_size=16, density=0.2,
                                 seed=7),
            ("sparse", 64): make(base, "s64", rows=600, cols=150, block_size=64, density=0.1,
                                 seed=3)}


def _threads(case, block):
    """The thread count of the embedded run of CASES[case] on the ``block``-th
    input of ``blocked``: 1, 2 and 3 in turn, shifted by one per case, so every
    case runs with each of 1, 2 and 3 threads and every input (block size,
    density) with each of them too, one embedded run per case and input."""
    return 1 + (case + block) % 3


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{i}-{u.rsplit(':', 1)[-1]}" for i, (u, _) in enumerate(CASES)])
def test_same_bytes_as_inline_for_every_block_size_and_thread_count(tmp_path, blocked, case):
    """Every case on every input (block sizes 8, 16, 64 and 1,000, dense and
    sparse, rows not a multiple of the block size, several column blocks) on
    the embedded runner gives the inline runner's bytes; the thread counts
    1, 2 and 3 are spread over the inputs (``_threads``: each pair of case
    and input, case and thread count, input and thread count is run), not
    crossed with them (10 runs per case, not 20)."""
    udf, params = CASES[case]
    for block, ((kind, block_size), src) in enumerate(blocked.items()):
        inline = _generate(src, str(tmp_path / f"inline-{kind}{block_size}"), udf, params,
                           runner="inline")
        expected = sample_digests(inline)
        assert expected
        threads = _threads(case, block)
        dest = _generate(src, str(tmp_path / f"e-{kind}{block_size}-{threads}"), udf, params,
                         num_cores=threads)
        assert sample_digests(dest) == expected, (kind, block_size, threads)
        assert driver.info(dest)["samples"] == driver.info(inline)["samples"]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["dense", "sparse"])
def test_a_tiny_budget_spills_and_bounds_memory_with_the_same_bytes(tmp_path, kind,
                                                                     monkeypatch):
    """A budget of 256 KiB, an input 26-33 times that, 4 bootstrap samples
    (29-36 MB written), 3 threads, shuffle bins of 256 KiB.  Dense inputs
    move keys (16 bytes a row) and -- on a machine made to look as if the
    input did not fit half of its memory -- read each row from the part
    files (not mapped); sparse inputs move rows.
    Either way records spill, the bytes are those of a run that holds
    everything, and the memory Python and numpy hold at once (tracemalloc's
    peak, measured 4.8-5.3 MiB) stays under 8 MiB: the budget; per thread
    one bin (its records as objects take about three times their bytes),
    its merged copy and a block; the map tasks in flight; about 3 MiB for
    the threads' UDF state and what is imported on first use."""
    density, cols = (None, 20) if kind == "dense" else (0.25, 40)
    src = make(tmp_path, kind, rows=40000, cols=cols, block_size=500, density=density, seed=8)
    input_bytes = sum(os.path.getsize(os.path.join(src, p)) for p in os.listdir(src))
    budget, params = 256 << 10, {"samples": 4}
    assert input_bytes > 16 * budget
    stats = []
    held = _generate(src, str(tmp_path / "held"), "bootstrap", params,
                     on_task_stats=stats.append)
    dest = str(tmp_path / "spilled")
    monkeypatch.setattr(embedded, "available_memory", lambda: 1 << 20)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        driver.generate(src, dest, "bootstrap", params, 11, runner="embedded",
                        bin_budget=256 << 10,
                        options={"num_cores": 3, "memory_bytes": budget,
                                 "on_task_stats": stats.append})
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert sample_digests(dest) == sample_digests(held)
    output_bytes = sum(s["bytes"] for s in driver.info(dest)["samples"])
    assert stats[0]["spilled_bytes"] == 0
    assert stats[1]["threads"] == 3 and stats[1]["budget"] == budget
    assert stats[1]["spilled_bytes"] > 4 * budget
    assert output_bytes > 25e6 and peak < 8 << 20, (output_bytes, peak)


def test_spool_groups_are_independent_and_ordered():
    """Groups handed out by the spool can be read in any order (here the
    last first), held and spilled records alike, each in key order."""
    rng = np.random.default_rng(0)
    keys = [(s, v, b, h) for s in range(3) for v in range(2) for b in range(3) for h in range(4)]
    chunks = {k: Block.dense(rng.standard_normal((2, 5)), row_ids=np.arange(2),
                             relpos=np.arange(2, dtype=np.uint64)).encoded() for k in keys}
    for budget in (1 << 30, 4096):
        with SortSpool(budget) as spool:
            for i in rng.permutation(len(keys)):
                spool.add(keys[i], chunks[keys[i]])
            groups = list(spool.groups())
            assert [g for g, _ in groups] == [(s, v) for s in range(3) for v in range(2)]
            out = [list(records) for _, records in reversed(groups)][::-1]
        assert [k for records in out for k, _ in records] == keys
        assert all(c.encode() == chunks[k].encode() for records in out for k, c in records)
        assert (spool.spilled_bytes > 0) == (budget == 4096)


def test_a_task_error_is_one_error_and_nothing_is_written(tmp_path, inputs, failing_udfs):
    """A UDF's samplegen error comes back as itself; a bug (a TypeError) as
    one RuntimeError naming it; the staging directory goes, the input stays."""
    check_task_errors(lambda udf: _generate(inputs["dense"], str(tmp_path / "out"), udf, {},
                                            num_cores=2),
                      failing_udfs, RuntimeError, "^the embedded job failed: TypeError: ")
    assert sorted(os.listdir(tmp_path)) == ["mods"]


def test_a_corrupt_block_is_one_input_error_and_nothing_is_written(tmp_path, inputs):
    src = corrupt_copy(inputs["dense"], str(tmp_path / "copy"))
    before = tree_digest(src)
    with pytest.raises(InputError, match=r"^corrupt .*in block \(\d+, \d+\)"):
        _generate(src, str(tmp_path / "out"), "kfold", {"k": 3})
    assert sorted(os.listdir(tmp_path)) == ["copy"] and tree_digest(src) == before


def test_a_udf_calling_sys_exit_fails_the_run(tmp_path, inputs, user_module):
    name = user_module("sg_test_exits", (
        "import sys\n"
        "import numpy as np\n"
        "def exits(start, stop, rng, params):\n"
        "    if start >= 320:\n"
        "        sys.exit(0)\n"
        "    ids = np.arange(stop - start)\n"
        "    return ids, np.zeros(ids.size, np.int64), ids.astype(np.uint64)\n"))
    with pytest.raises(EngineError, match=r"sys.exit\(0\)"):
        _generate(inputs["dense"], str(tmp_path / "out"), f"{name}:exits", {})
    assert not (tmp_path / "out").exists()


def test_an_interrupt_stops_every_task_and_leaves_nothing(tmp_path, inputs, user_module):
    """Ctrl-C raised inside a task (as it would be in the waiting main
    thread) ends the run as KeyboardInterrupt, the other tasks stop, no
    thread outlives the run and nothing is left."""
    import threading
    name = user_module("sg_test_interrupts", (
        "import numpy as np\n"
        "def interrupts(start, stop, rng, params):\n"
        "    if start >= 320:\n"
        "        raise KeyboardInterrupt\n"
        "    ids = np.arange(stop - start)\n"
        "    return ids, np.zeros(ids.size, np.int64), ids.astype(np.uint64)\n"))
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        _generate(inputs["wide"], str(tmp_path / "out"), f"{name}:interrupts", {}, num_cores=3)
    assert threading.active_count() == before
    assert sorted(os.listdir(tmp_path)) == [f"{name}.py"]


def test_stdout_is_where_it_was_after_a_run(tmp_path, user_module):
    """UDF calls in several threads at once (each sends stdout to stderr
    while it runs, and these overlap: the UDF sleeps, a small budget makes
    many small map tasks) leave sys.stdout as it was."""
    name = user_module("sg_test_sleeps", (
        "import time\n"
        "import numpy as np\n"
        "def sleeps(start, stop, rng, params):\n"
        "    time.sleep(0.002)\n"
        "    ids = np.arange(stop - start)\n"
        "    return ids, np.zeros(ids.size, np.int64), ids.astype(np.uint64)\n"))
    src = make(tmp_path, rows=3000, cols=2, block_size=30)
    before = sys.stdout
    _generate(src, str(tmp_path / "out"), f"{name}:sleeps", {}, num_cores=3,
              memory_bytes=64 << 10)
    assert sys.stdout is before


def test_default_budget_and_threads(monkeypatch):
    monkeypatch.setattr(embedded, "available_memory", lambda: 8 << 30)
    assert embedded.default_budget() == 2 << 30
    monkeypatch.setattr(embedded, "available_memory", lambda: 1 << 20)
    assert embedded.default_budget() == embedded.MIN_BUDGET
    assert embedded.default_threads() >= 1


@pytest.mark.slow
def test_the_command_line_runs_embedded_by_default(tmp_path):
    """Without --runner (and without $SAMPLEGEN_RUNNER) a run is embedded;
    --memory-mib and --num-cores reach it."""
    src = make(tmp_path, rows=200, block_size=32)
    env = {k: v for k, v in os.environ.items() if k != "SAMPLEGEN_RUNNER"}
    env["PYTHONPATH"] = ROOT
    for args in ([], ["--num-cores", "2", "--memory-mib", "1"]):
        dest = tmp_path / f"out{len(args)}"
        proc = subprocess.run([sys.executable, "-m", "samplegen", "-q", "holdout", src, str(dest),
                               "--ratio", "0.5", "--seed", "3", *args],
                              capture_output=True, text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        engine = driver.info(str(dest))["engine"]
        assert engine["runner"] == "embedded"
        if args:
            assert engine["num_cores"] == 2 and engine["memory_bytes"] == 1 << 20
    proc = subprocess.run([sys.executable, "-m", "samplegen", "holdout", src,
                           str(tmp_path / "bad"), "--ratio", "0.5", "--seed", "3",
                           "--memory-mib", "0"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 2 and "--memory-mib must be >= 1" in proc.stderr
    assert not (tmp_path / "bad").exists()
