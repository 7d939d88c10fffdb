"""The three phases as pure functions, run by a tiny in-test 'engine'."""
import json
import os
import random

import numpy as np
import pytest

from samplegen.jobs.blocks import DENSE, SPARSE, Block
from samplegen.jobs.phases import (KEY_ROW_BYTES, ReBlocker, bin_bits, group_key, local_sampling, make_plan,
                         parse_group_key, parse_sort_key, reblock, set_bins, sort_key)
from samplegen.udfs import Bootstrap, HoldOut, KFold


def input_blocks(rows, cols, B, kind=DENSE, seed=0):
    data = np.random.default_rng(seed).standard_normal((rows, cols))
    if kind == SPARSE:
        data[np.abs(data) < 1.0] = 0.0
    blocks = []
    for h in range(-(-rows // B)):
        for v in range(-(-cols // B)):
            blocks.append((h, v, Block.from_dense(data[h * B:(h + 1) * B, v * B:(v + 1) * B], kind)))
    return data, blocks


def simulate(plan, blocks, shuffle_seed=0):
    """Map every block (in a random task order), sort records the way the
    shuffle does, reduce every group; returns {(sample, v): [(h, block)]}."""
    order = list(blocks)
    random.Random(shuffle_seed).shuffle(order)
    records = []
    for h, v, block in order:
        for s, v2, bin_, h2, chunk in local_sampling(plan, h, v, block):
            records.append((group_key(s, v2), sort_key(bin_, h2), chunk))
    records.sort(key=lambda r: (r[0], r[1]))
    out = {}
    for key in sorted({r[0] for r in records}):
        chunks = [(parse_sort_key(k)[0], c) for g, k, c in records if g == key]
        out[parse_group_key(key)] = list(reblock(plan.block_size, chunks))
    return out


def meta(rows, cols, B, kind="dense"):
    return {"rows": rows, "cols": cols, "block_size": B, "kind": kind}


def as_bytes(groups):
    return {key: [(h, b.rows, b.to_dense().tobytes(), b.row_ids.tobytes()) for h, b in blocks]
            for key, blocks in groups.items()}


@pytest.mark.parametrize("udf", [lambda n: HoldOut(n, 0.6, repeats=2),
                                 lambda n: KFold(n, 5, naive=True),
                                 lambda n: Bootstrap(n, 2)])
@pytest.mark.parametrize("kind", [DENSE, SPARSE])
def test_output_is_independent_of_bins_and_task_order(udf, kind):
    rows, cols, B = 903, 70, 32
    data, blocks = input_blocks(rows, cols, B, kind)
    kind_name = "dense" if kind == DENSE else "sparse"
    one_bin = make_plan(udf(rows), 5, meta(rows, cols, B, kind_name), "unused")
    many_bins = make_plan(udf(rows), 5, meta(rows, cols, B, kind_name), "unused", budget=2000)
    assert max(many_bins.bin_bits) >= 3 and max(one_bin.bin_bits) == 0
    a = simulate(one_bin, blocks, shuffle_seed=1)
    b = simulate(many_bins, blocks, shuffle_seed=2)
    assert as_bytes(a) == as_bytes(b)
    # every sample's blocks: full except the last, rows equal to the input rows
    for (sample, v), out in a.items():
        assert all(blk.rows == B for _, blk in out[:-1]) and 0 < out[-1][1].rows <= B
        assert [h for h, _ in out] == list(range(len(out)))
        ids = np.concatenate([blk.row_ids for _, blk in out])
        dense = np.vstack([blk.to_dense() for _, blk in out])
        assert np.array_equal(dense, data[ids, v * B:(v + 1) * B])


def test_rows_follow_relative_position_then_row_id():
    plan = make_plan(HoldOut(500, 1.0), 3, meta(500, 3, 50), "unused")
    _, blocks = input_blocks(500, 3, 50)
    out = simulate(plan, blocks)[(0, 0)]
    ids = np.concatenate([b.row_ids for _, b in out])
    pos = np.concatenate([b.relpos for _, b in out])
    assert np.array_equal(np.lexsort((ids, pos)), np.arange(ids.size))


def test_reblocker_fills_one_buffer_at_a_time():
    buffer = ReBlocker(4)
    block = Block.dense(np.arange(30.0).reshape(10, 3), row_ids=np.arange(10))
    emitted = list(buffer.add(block.row_slice(0, 3))) + list(buffer.add(block.row_slice(3, 10)))
    emitted += list(buffer.finish())
    assert [(h, b.rows) for h, b in emitted] == [(0, 4), (1, 4), (2, 2)]
    assert np.array_equal(np.vstack([b.data for _, b in emitted]), block.data)


def test_keys_sort_bytewise_in_numeric_order():
    pairs = [(0, 0), (1, 0), (0, 15), (16, 2), (255, 1), (2**31, 7)]
    keys = [group_key(*p) for p in pairs]
    assert sorted(keys) == [group_key(*p) for p in sorted(pairs)]
    assert all(parse_group_key(k) == p for k, p in zip(keys, pairs))
    sorts = [(3, 10), (3, 9), (0, 2**40), (2**20, 0)]
    assert sorted(sort_key(*s) for s in sorts) == [sort_key(*s) for s in sorted(sorts)]
    assert b"\t" not in group_key(1, 2) + sort_key(3, 4)


def test_bin_bits_bound_the_bin_size():
    assert bin_bits(1000, 800, budget=16 << 20) == 0
    bits = bin_bits(10**7, 800, budget=16 << 20)
    assert 10**7 * 800 / 2**bits <= 16 << 20 < 10**7 * 800 / 2**(bits - 1)


def test_bins_follow_the_bytes_a_shuffle_record_carries_per_row():
    """The id shuffle's records carry 16 bytes per row, not the row: fewer bins."""
    plan = make_plan(Bootstrap(10**6, 20), 1, meta(10**6, 100, 1000), "/out", budget=16 << 20)
    assert plan.bin_bits == [6] * 20                    # 10^6 rows of 816 bytes in 16 MiB bins
    again = type(plan).from_json(plan.to_json())
    set_bins(again, KEY_ROW_BYTES)
    assert again.bin_bits == [0] * 20 and again.bin_budget == 16 << 20
    assert bin_bits(10**6, KEY_ROW_BYTES, budget=1 << 20) == 4


def test_plan_round_trips_through_json():
    plan = make_plan(KFold(100, 4), 9, meta(100, 5, 10), "/out")
    again = type(plan).from_json(plan.to_json())
    assert json.loads(again.to_json()) == json.loads(plan.to_json())
    assert again.composed == [f"train-{i}" for i in range(4)] and again.names[0] == "test-0"


def test_plans_of_loaded_builtins_carry_every_parameter():
    """Engines that render their own scripts (Hive) read the plan's params."""
    from samplegen.udfs import load_udf
    plan = make_plan(load_udf("holdout", 10, {"ratio": 0.5}), 1, meta(10, 2, 5), "/out")
    assert plan.udf == "holdout"
    assert plan.params == {"ratio": 0.5, "repeats": 1, "fraction": 1.0}
    plan = make_plan(load_udf("samplegen.udfs.examples:bernoulli", 10, {"p": 0.2}), 1,
                     meta(10, 2, 5), "/o")
    assert plan.udf == "samplegen.udfs.examples:bernoulli" and plan.params == {"p": 0.2}


def test_hadoop_streaming_command_partitions_and_sorts_like_the_sim_runners(tmp_path,
                                                                            monkeypatch):
    """What `samplegen ... --runner hadoop` would submit (built offline by
    mrjob from the driver's arguments, not run: there is no cluster here)."""
    import zipfile
    from samplegen.jobs.driver import mrjob_args
    from samplegen.jobs.mr_sample import MRSample
    from samplegen.udfs import load_udf
    jar = tmp_path / "streaming.jar"
    jar.write_bytes(b"")
    (tmp_path / "myudfs.py").write_text(
        "from samplegen.udfs.examples import bernoulli as keep\n")  # a user's module
    monkeypatch.syspath_prepend(str(tmp_path))
    plan = make_plan(load_udf("myudfs:keep", 10, {"p": 0.5}), 1, meta(10, 2, 5), "hdfs:///out")
    options = {"mrjob_conf": "", "mrjob_args": ["--hadoop-bin", "/bin/true",
                                                "--hadoop-streaming-jar", str(jar)]}
    argv = mrjob_args(plan, ["hdfs:///data/m[1]/part-00000"], "hadoop", options, str(tmp_path))
    shipped = [argv[i + 1] for i, a in enumerate(argv) if a == "--py-files"]
    assert [os.path.basename(p) for p in shipped] == ["samplegen.zip", "udf.zip"]
    assert {"samplegen/__init__.py", "samplegen/udfs/rng.py", "samplegen/jobs/phases.py"} \
        <= set(zipfile.ZipFile(shipped[0]).namelist())
    assert zipfile.ZipFile(shipped[1]).namelist() == ["myudfs.py"]
    job = MRSample(args=argv)
    with job.make_runner() as runner:
        runner._create_setup_wrapper_scripts()  # what runner.run() does before uploading
        runner._add_job_files_for_upload()
        args = runner._args_for_step(0)
    defines = {args[i + 1] for i, a in enumerate(args) if a == "-D"}
    assert args[args.index("-partitioner") + 1] == \
        "org.apache.hadoop.mapred.lib.KeyFieldBasedPartitioner"
    assert {"mapreduce.partition.keypartitioner.options=-k1,1",
            "stream.num.map.output.key.fields=2",
            "mapreduce.job.output.key.comparator.class="
            "org.apache.hadoop.mapred.lib.KeyFieldBasedComparator",
            "mapreduce.partition.keycomparator.options=-k1,2",
            "mapreduce.reduce.speculative=false"} <= defines
    assert args[args.index("-input") + 1] == r"hdfs:///data/m\[1\]/part-00000"  # never a glob
    assert "plan.json#plan.json" in args[args.index("-files") + 1]
    assert "samplegen.zip" in " ".join(args) and "udf.zip" in " ".join(args)
    assert "--plan plan.json" in args[args.index("-reducer") + 1]
