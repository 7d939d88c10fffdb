"""The three phases as pure functions, run by a tiny in-test 'engine'."""
import json
import os
import random
from dataclasses import asdict

import numpy as np
import pytest

from samplegen.jobs.blocks import DENSE, SPARSE, Block
from samplegen.jobs.phases import (
    ReBlocker,
    compose_extra,
    composed_ids,
    group_key,
    id_block,
    local_sampling,
    parse_group_key,
    parse_sort_key,
    partners,
    reblock,
    sort_key,
    write_sample,
)
from samplegen.jobs.plan import KEY_ROW_BYTES, bin_bits, make_plan, set_bins, write_file
from samplegen.udfs import Bootstrap, HoldOut, KFold


def input_blocks(rows, cols, B, kind=DENSE, seed=0):
    data = np.random.default_rng(seed).standard_normal((rows, cols))
    if kind == SPARSE:
        data[np.abs(data) < 1.0] = 0.0
    blocks = []
    for h in range(-(-rows // B)):
        for v in range(-(-cols // B)):
            part = data[h * B:(h + 1) * B, v * B:(v + 1) * B]
            blocks.append((h, v, Block.from_dense(part, kind)))
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
    for (_, v), out in a.items():
        assert all(blk.rows == B for _, blk in out[:-1]) and 0 < out[-1][1].rows <= B
        assert [h for h, _ in out] == list(range(len(out)))
        ids = np.concatenate([blk.row_ids for _, blk in out])
        dense = np.vstack([blk.to_dense() for _, blk in out])
        assert np.array_equal(dense, data[ids, v * B:(v + 1) * B])


def test_rows_follow_relative_position_then_row_id():
    plan = make_plan(HoldOut(500, 1.0, exact=False), 3, meta(500, 3, 50), "unused")
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
    # every default filled in: exact sizes (the default) travel as a parameter
    assert plan.params == {"ratio": 0.5, "repeats": 1, "fraction": 1.0, "exact": True}
    plan = make_plan(load_udf("samplegen.udfs.examples:bernoulli", 10, {"p": 0.2}), 1,
                     meta(10, 2, 5), "/o")
    assert plan.udf == "samplegen.udfs.examples:bernoulli" and plan.params == {"p": 0.2}


def test_hadoop_streaming_command_partitions_and_sorts_like_the_sim_runners(tmp_path,
                                                                            user_module):
    """What `samplegen ... --runner hadoop` would submit (built offline by
    mrjob from the driver's arguments, not run: there is no cluster here)."""
    import zipfile

    from samplegen.jobs.engines.mapreduce import MRSample, mrjob_args
    from samplegen.udfs import load_udf
    from samplegen.udfs.custom import udf_source
    jar = tmp_path / "streaming.jar"
    jar.write_bytes(b"")
    user_module("myudfs", "from samplegen.udfs.examples import bernoulli as keep\n")
    plan = make_plan(load_udf("myudfs:keep", 10, {"p": 0.5}), 1, meta(10, 2, 5), "hdfs:///out")
    options = {"mrjob_conf": "", "mrjob_args": ["--hadoop-bin", "/bin/true",
                                                "--hadoop-streaming-jar", str(jar)]}
    plan_path = tmp_path / "plan.json"
    write_file(plan_path, asdict(plan))
    argv = mrjob_args("hadoop", str(plan_path), ["hdfs:///data/m[1]/part-00000"], options,
                      str(tmp_path), udf=udf_source(plan.sampler()))
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
            "mapreduce.partition.keycomparator.options=-k1,2"} <= defines
    # attempts are safe to repeat (tests/test_hdfs.py): speculation is the cluster's choice
    assert not [d for d in defines if "speculative" in d]
    assert args[args.index("-input") + 1] == r"hdfs:///data/m\[1\]/part-00000"  # never a glob
    assert "plan.json#plan.json" in args[args.index("-files") + 1]
    assert "samplegen.zip" in " ".join(args) and "udf.zip" in " ".join(args)
    assert "--plan plan.json" in args[args.index("-reducer") + 1]


# ---------------------------------------------------------------------------
# dynamic sample matrix composition (k-fold, fold mode)
# ---------------------------------------------------------------------------
def test_partners_pair_every_fold_with_every_other_round():
    assert partners(4, 2) == [0, 1, 3] and partners(1, 0) == [] and partners(3, 5) == [0, 1, 2]
    k = 5
    pairs = {(f, r) for f in range(k) for r in partners(k, f)}
    assert pairs == {(f, r) for r in range(k) for f in partners(k, r)}
    assert all(f != r for f, r in pairs) and len(pairs) == k * (k - 1)
    # repeated k-fold: sets of k consecutive folds
    assert partners(6, 4, 3) == [3, 5] and partners(6, 0, 3) == [1, 2]
    pairs = {(f, r) for f in range(12) for r in partners(12, f, 4)}
    assert pairs == {(f, r) for r in range(12) for f in partners(12, r, 4)}
    assert all(f // 4 == r // 4 and f != r for f, r in pairs) and len(pairs) == 3 * 4 * 3


def _folds(k, rows, seed=0):
    """k folds' ``(row ids, relative positions)`` in sample order."""
    rng = np.random.default_rng(seed)
    fold = rng.integers(0, k, rows)
    pos = rng.integers(0, 50, rows).astype(np.uint64)       # ties: the row id decides
    out = []
    for f in range(k):
        ids = np.flatnonzero(fold == f)
        order = np.lexsort((ids, pos[ids]))
        out.append((ids[order], pos[ids][order]))
    return out


@pytest.mark.parametrize("B", [1, 7, 64, 1000])
def test_composed_training_sets_are_the_other_folds_full_blocks_then_the_extra_matrix(B):
    k = 4
    folds = _folds(k, 500)
    composed = composed_ids(B, folds, k)
    for r, ids in enumerate(composed):
        others = partners(k, r)
        assert np.array_equal(np.sort(ids), np.sort(np.concatenate([folds[f][0] for f in others])))
        heads = [folds[f][0][:folds[f][0].size // B * B] for f in others]
        head = np.concatenate(heads)
        assert np.array_equal(ids[:head.size], head)
        tails = np.concatenate([folds[f][0][folds[f][0].size // B * B:] for f in others])
        pos = np.concatenate([folds[f][1][folds[f][1].size // B * B:] for f in others])
        assert np.array_equal(ids[head.size:], tails[np.lexsort((tails, pos))])


def test_the_extra_matrix_does_not_depend_on_the_order_its_blocks_arrive_in():
    B = 16
    tails = [id_block(ids[-(ids.size % B or B):], pos[-(ids.size % B or B):])
             for ids, pos in _folds(5, 300, seed=3)]
    out = set()
    for order in ([0, 1, 2, 3, 4], [4, 2, 0, 3, 1], [3, 4, 1, 0, 2]):
        blocks = list(compose_extra(B, [tails[i] for i in order]))
        assert [h for h, _ in blocks] == list(range(len(blocks)))
        assert all(b.rows == B for _, b in blocks[:-1]) and 0 < blocks[-1][1].rows <= B
        out.add(b"".join(b.row_ids.tobytes() + b.relpos.tobytes() for _, b in blocks))
    assert len(out) == 1 and list(compose_extra(B, [])) == []


def test_step_one_keeps_exactly_the_partial_bottom_block(tmp_path):
    rows, cols, B = 300, 5, 32
    _, blocks = input_blocks(rows, cols, B)
    plan = make_plan(KFold(rows, 3), 2, meta(rows, cols, B), str(tmp_path))
    for (sample, v), out in simulate(plan, [(h, v, b.encoded()) for h, v, b in blocks]).items():
        summary, tail = write_sample(plan, sample, v, iter(out))
        n = sum(b.rows for _, b in out)
        assert summary["sample"] == plan.names[sample] and summary["v"] == v
        assert [b.rows for b in tail] == ([n % B] if n % B else [])


# ---------------------------------------------------------------------------
# errors across engine boundaries (jobs/engines/task_errors.py)
# ---------------------------------------------------------------------------
class _Reported(Exception):
    """Stands in for an extra class, like the micro-batch jobs' TBSError."""


def test_an_error_crosses_as_one_marker_line_and_comes_back_as_itself():
    from samplegen.jobs.engines import task_errors as te
    from samplegen.udfs.base import UDFError
    from samplegen.udfs.errors import (
        EngineError,
        InputError,
        MissingParameterError,
        OutputError,
        ParameterError,
        SamplegenError,
    )

    class OrderError(InputError):   # a subclass travels as the nearest class of the protocol
        pass

    for exc, cls in [(InputError("corrupt block (3, 0)"), InputError),
                     (ParameterError("k must be >= 2, got 1"), ParameterError),
                     (MissingParameterError("UDF u needs parameter 'p'"), ParameterError),
                     (OutputError("exists"), OutputError), (UDFError("bad arrays"), UDFError),
                     (EngineError("task ended early"), EngineError),
                     (OrderError("not sorted"), InputError),
                     (SamplegenError("other"), SamplegenError),
                     (_Reported("a tbs error"), _Reported)]:
        line = te.error_line(exc, extra=(_Reported,))
        assert line.startswith("samplegen-error: ") and "\n" not in line
        text = f"Traceback ...\n  x\nmodule.TaskFailed: {line}\n\tat org.apache.Foo\n"
        back = te.error_in(text.encode(), RuntimeError, extra=(_Reported,))
        assert type(back) is cls and str(back) == str(exc)


def test_other_task_errors_come_back_as_the_engines_own_failure():
    from samplegen.jobs.engines import task_errors as te
    line = te.error_line(TypeError("object of type 'NoneType'\thas\nno len()"))
    assert line == "samplegen-error: Error: TypeError: object of type 'NoneType' has no len()"
    back = te.error_in("noise\n" + line + "\n", lambda cause: RuntimeError(f"failed: {cause}"))
    assert type(back) is RuntimeError
    assert str(back) == "failed: TypeError: object of type 'NoneType' has no len()"
    assert te.error_in("InputError: no marker here", RuntimeError) is None
    two = te.error_line(ValueError("first")) + "\n" + te.error_line(KeyError("last"))
    assert "last" in str(te.error_in(two, RuntimeError))


def test_tasks_report_on_their_stream_or_in_the_exception():
    import io

    from samplegen.jobs.engines import task_errors as te
    from samplegen.udfs.errors import InputError
    stream = io.StringIO()
    with pytest.raises(InputError):
        with te.reported(stream):
            raise InputError("corrupt")
    assert stream.getvalue() == "samplegen-error: InputError: corrupt\n"
    with pytest.raises(te.TaskFailed) as info:
        with te.reported():
            raise InputError("corrupt")
    assert str(info.value) == "samplegen-error: InputError: corrupt"
    assert isinstance(info.value.__cause__, InputError)


def test_relpos_order_is_the_two_key_order_with_and_without_ties():
    from samplegen.jobs.phases import relpos_order
    rng = np.random.default_rng(5)
    relpos = rng.integers(0, 1 << 63, 50_000, dtype=np.int64).astype(np.uint64)
    rows = rng.permutation(50_000)
    assert np.array_equal(relpos_order(relpos, rows), np.lexsort((rows, relpos)))
    relpos[::7] = relpos[3]            # ties: broken by row id
    assert np.array_equal(relpos_order(relpos, rows), np.lexsort((rows, relpos)))


@pytest.mark.parametrize("layout", ["by sample", "by row", "interleaved", "rows unordered"])
def test_chunk_order_is_the_three_key_order_whatever_order_occurrences_come_in(layout):
    """local-sampling orders a block's occurrences by (sample, relpos, row id):
    the same permutation as a sort on the three keys, however a UDF lists
    them, ties in relpos included (a row drawn twice, or two rows alike)."""
    from samplegen.jobs.phases import _sample_order
    from samplegen.udfs.base import Occurrences
    rng = np.random.default_rng(11)
    n, samples = 6_000, 7
    sample = np.repeat(np.arange(samples), n // samples + 1)[:n]
    offset = np.sort(rng.integers(0, 1000, n))
    if layout == "by sample":
        offset = np.concatenate([np.sort(offset[sample == s]) for s in range(samples)])
    elif layout == "by row":
        sample = rng.permutation(sample)
    elif layout == "interleaved":
        sample = np.tile(np.arange(samples), n // samples + 1)[:n]
    else:
        offset = rng.permutation(offset)
    relpos = rng.integers(0, 1 << 63, n, dtype=np.int64).astype(np.uint64)
    relpos[::9] = relpos[4]                          # ties across rows and samples
    occ = Occurrences(offset.astype(np.int64), sample.astype(np.int64), relpos)
    expected = np.lexsort((occ.offset, occ.relpos, occ.sample))
    assert np.array_equal(_sample_order(occ), expected)
    one = Occurrences(occ.offset[:1], occ.sample[:1], occ.relpos[:1])
    assert np.array_equal(_sample_order(one), [0])


@pytest.mark.parametrize("kept_bits", [64, 30, 3])
def test_packed_keys_give_the_three_key_order_and_the_sample_bounds(kept_bits):
    """sample_indices' one sort of packed keys: (sample, relpos, row id)
    order exactly, equal pairs in place order, also when the kept top bits
    of relpos tie often (kept_bits: how many bits relpos really has)."""
    from samplegen.jobs.phases import _by_sample, _packed_order
    rng = np.random.default_rng(kept_bits)
    m, n_samples = 30_000, 21
    sample = rng.integers(0, n_samples, m)
    relpos = rng.integers(0, 1 << 63, m, dtype=np.int64).astype(np.uint64) >> np.uint64(
        64 - kept_bits)
    rows = rng.integers(0, m // 3, m)
    want = np.lexsort((np.arange(m), rows, relpos, sample))
    order, bounds = _packed_order(relpos, rows, sample, n_samples)
    assert np.array_equal(order, want)
    assert np.array_equal(bounds, np.searchsorted(sample[want], np.arange(n_samples + 1)))
    order, bounds = _by_sample(sample, relpos, rows, n_samples)
    assert np.array_equal(order, want)
    assert _packed_order(relpos, rows, sample + 1, n_samples) is None   # ids out of range
