"""Block codec and row operations."""
import numpy as np
import pytest

from samplegen.jobs.blocks import DENSE, SPARSE, Block, column_of_line, parse_line
from samplegen.udfs.errors import InputError

SPECIAL = np.array([[np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-310, 1.5]])


def format_line(h, v, block):
    """One block-store line: ``h<TAB>v<TAB>payload<NEWLINE>`` as bytes."""
    return b"%d\t%d\t%s\n" % (h, v, block.encode())


def dense_block(rows=5, cols=4, seed=0, **kw):
    data = np.random.default_rng(seed).standard_normal((rows, cols))
    data[data < -0.5] = 0.0
    return Block.dense(data, **kw)


@pytest.mark.parametrize("kind", [DENSE, SPARSE])
def test_round_trip_keeps_values_bit_for_bit(kind):
    data = np.vstack([SPECIAL, np.arange(7.0)])
    block = Block.from_dense(data, kind, row_ids=np.array([5, 9]))
    block.relpos = np.array([2**64 - 1, 3], np.uint64)
    back = Block.decode(block.encode())
    assert back.kind == kind and (back.rows, back.cols) == (2, 7)
    assert np.array_equal(back.to_dense().view(np.uint64), block.to_dense().view(np.uint64))
    assert back.row_ids.tolist() == [5, 9] and back.relpos.tolist() == [2**64 - 1, 3]


def test_encoding_is_text_safe_and_lines_parse():
    block = dense_block()
    line = format_line(3, 1, block)
    assert line.endswith(b"\n") and line.count(b"\t") == 2 and b"\n" not in line[:-1]
    h, v, back = parse_line(line)
    assert (h, v) == (3, 1) and np.array_equal(back.data, block.data)
    assert parse_line(line.decode())[0] == 3


@pytest.mark.parametrize("damage", ["flip", "truncate", "garbage", "fields"])
def test_corruption_is_detected(damage):
    line = bytearray(format_line(0, 0, dense_block(50, 9)))
    if damage == "flip":
        line[len(line) // 2] = ord("A") if line[len(line) // 2] != ord("A") else ord("B")
    elif damage == "truncate":
        line = line[:len(line) // 2 // 4 * 4] + b"\n"
    elif damage == "garbage":
        line = line[:10] + b"!!!!" + line[14:]
    else:
        line = line.replace(b"\t", b" ", 1)
    with pytest.raises(InputError, match="corrupt"):
        parse_line(bytes(line))


@pytest.mark.parametrize("kind", [DENSE, SPARSE])
def test_take_slice_concat_agree_with_dense(kind):
    base = dense_block(30, 6, seed=3)
    block = Block.from_dense(base.data, kind)
    idx = np.array([4, 4, 0, 29, 17])
    taken = block.take(idx, row_ids=idx)
    assert np.array_equal(taken.to_dense(), base.data[idx])
    sl = block.row_slice(3, 11)
    assert np.array_equal(sl.to_dense(), base.data[3:11])
    parts = [block.row_slice(0, 10), block.row_slice(10, 10), block.row_slice(10, 30)]
    assert np.array_equal(Block.concat(parts).to_dense(), base.data)


def test_sparse_keeps_only_nonzeros_and_nan():
    data = np.array([[0.0, 1.0, np.nan], [0.0, 0.0, 0.0]])
    block = Block.from_dense(data, SPARSE)
    assert block.nnz == 2 and np.array_equal(np.isnan(block.to_dense()), np.isnan(data))


@pytest.mark.parametrize("indptr", [[0, 2, 1], [1, 1, 2], [0, 3, 2]])
def test_inconsistent_sparse_payload_is_rejected(indptr):
    block = Block.sparse(2, 3, np.array([0, 1, 2]), np.array([0, 1]), np.array([1.0, 2.0]))
    bad = block.encoded().replace(indptr=np.array(indptr))
    with pytest.raises(InputError):
        Block.decode(bad.encode())


def test_encoded_rows_are_fixed_runs_of_text():
    """Gathering encoded rows (as text) equals gathering decoded rows."""
    from samplegen.jobs.blocks import EncodedBlock, row_chars
    for kind in (DENSE, SPARSE):
        block = Block.from_dense(dense_block(40, 7, seed=5).data, kind)
        enc = EncodedBlock.parse(block.encode())
        if kind == DENSE:
            assert enc.text.shape == (40, row_chars(7))
        idx = np.array([39, 0, 0, 17, 3])
        got = enc.take(idx, row_ids=idx).decode()
        assert np.array_equal(got.to_dense(), block.to_dense()[idx])
        merged = EncodedBlock.concat([enc.row_slice(0, 10), enc.row_slice(10, 40)]).decode()
        assert np.array_equal(merged.to_dense(), block.to_dense())


@pytest.mark.parametrize("cols", [1, 2, 3, 7, 100])
@pytest.mark.parametrize("kind", [DENSE, SPARSE])
def test_one_column_of_a_line_is_that_column_of_the_decoded_block(kind, cols):
    rng = np.random.default_rng(cols)
    data = rng.normal(size=(37, cols))
    data[rng.random(data.shape) < 0.5] = 0.0
    data[3, 0] = np.nan
    for row_ids in (None, rng.permutation(1000)[:37]):
        block = Block.from_dense(data, kind, row_ids=row_ids)
        line = "4\t2\t".encode() + block.encode()
        for j in range(cols):
            h, v, values = column_of_line(line, j)
            assert (h, v) == (4, 2)
            np.testing.assert_array_equal(values, data[:, j])
    with pytest.raises(InputError):
        column_of_line("4\t2\t".encode() + Block.from_dense(data, DENSE).encode()[:-40], 0)
