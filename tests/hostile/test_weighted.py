"""Hostile use of weighted sampling: the ``samplegen weighted`` command (in
process, through run_cli), ``samplegen.weighted_sample``, and the in-memory
primitives of ``samplegen.weighted`` (SumTree, PrioritizedBuffer,
check_weights).

What they are fed: weights whose sum overflows the largest float, subnormal
weights, mixes of huge and tiny weights, all-zero, negative, NaN and
infinite weights, weights of the wrong length or type (strings, objects,
complex numbers), damaged ``--weights FILE.npy`` files, and more distinct
rows than there are positive weights.  Any finite non-negative weight is
accepted and drawn in proportion; anything else is refused in one line
(exit status 2, nothing written; ParameterError or InputError in Python);
no numpy RuntimeWarning reaches the user (this module turns them into
errors).

The statistical checks use a fixed seed and the level ``stats.ALPHA``
(0.001) Bonferroni-divided over the comparisons of a test, so a correct
implementation fails with probability below ALPHA and a seed gives the same
verdict on every run; each says what it would detect.
"""
import os

import numpy as np
import pytest

from samplegen import weighted_sample
from samplegen.jobs.store import Matrix
from samplegen.udfs.errors import InputError, ParameterError, SamplegenError
from samplegen.weighted import PrioritizedBuffer, SumTree, check_weights

from ..conftest import make, run_cli
from ..stats import ALPHA, binomial_p, chisq_gof

pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

#: the smallest positive double (subnormal)
TINY = 5e-324
#: weights each finite whose sum over 1,000 rows exceeds the largest float
HUGE = 1e306


def uniform_p(counts, draws):
    """The chi-square p-value of *counts* (one per cell) against equal
    cells, *draws* in all."""
    counts = np.asarray(counts)
    return chisq_gof(counts, np.full(counts.size, draws / counts.size))


# ---------------------------------------------------------------------------
# SumTree
# ---------------------------------------------------------------------------
def test_sum_tree_draws_equal_huge_weights_uniformly_although_their_sum_overflows():
    """1,000 weights of 1e306 (their sum, 1e309, is beyond the largest
    float): 20,000 draws with replacement must be uniform over the 1,000
    indices -- a chi-square test (999 degrees of freedom, 20 expected per
    cell) at level ALPHA; drawing one index, or a few, gives a statistic in
    the hundreds of thousands.  The probabilities stay exact (1/1000 each)
    and the total is reported as inf, not as a wrong finite number."""
    tree = SumTree(np.full(1000, HUGE), seed=11)
    draws = tree.sample(20_000)
    assert uniform_p(np.bincount(draws, minlength=1000), 20_000) > ALPHA
    assert np.allclose(tree.probabilities(), 1e-3, rtol=1e-12, atol=0)
    assert tree.total == float("inf")
    assert np.array_equal(tree.weights(), np.full(1000, HUGE))
    distinct = tree.sample(1000, replace=False)
    assert np.array_equal(np.sort(distinct), np.arange(1000))


def test_sum_tree_draws_subnormal_weights_in_proportion():
    """Weights 1, 2, 3, 4 times the smallest subnormal (their sum is ten
    units of the last place): 40,000 draws must follow 0.1, 0.2, 0.3, 0.4 --
    chi-square, 3 degrees of freedom, level ALPHA.  Points ``u * total``
    rounded to whole units of the last place give 0.05 / 0.2 / 0.3 / 0.45,
    a statistic of about 2,000."""
    w = np.array([1, 2, 3, 4]) * TINY
    tree = SumTree(w, seed=5)
    counts = np.bincount(tree.sample(40_000), minlength=4)
    assert chisq_gof(counts, 40_000 * np.array([0.1, 0.2, 0.3, 0.4])) > ALPHA
    assert np.array_equal(tree.weights(), w)
    assert tree.total == 10 * TINY


def test_sum_tree_reaches_tiny_weights_after_the_huge_ones_without_replacement():
    """200 weights of 1e306 (their sum overflows) and ten of the smallest
    subnormal: 205 distinct draws are the 200 heavy indices first (each tiny
    one is drawn before a heavy one with probability below 1e-600), then
    five distinct tiny ones.  The tiny weights must still count as positive
    and be drawable."""
    w = np.r_[np.full(200, HUGE), np.full(10, TINY)]
    tree = SumTree(w, seed=3)
    got = tree.sample(205, replace=False)
    assert set(got[:200].tolist()) == set(range(200))
    assert len(set(got[200:].tolist())) == 5 and (got[200:] >= 200).all()
    assert np.array_equal(tree.weights(), w)                  # restored afterwards
    with pytest.raises(ParameterError, match="only 210 weights are positive"):
        tree.sample(211, replace=False)


def test_sum_tree_rescales_when_an_update_makes_the_sum_overflow_and_back():
    """Ten weights of 1; two updated to 1e308 (the sum overflows): 10,000
    draws land only on those two, half each (binomial test at ALPHA / 2);
    set back to 0, the other eight are drawn uniformly (chi-square at
    ALPHA / 2) and never the two."""
    tree = SumTree(np.ones(10), seed=9)
    tree.update([0, 1], 1e308)
    draws = tree.sample(10_000)
    assert set(np.unique(draws).tolist()) == {0, 1}
    assert binomial_p(int(np.count_nonzero(draws == 0)), 10_000, 0.5) > ALPHA / 2
    tree.update([0, 1], [0.0, 0.0])
    draws = tree.sample(8_000)
    assert not np.isin(draws, [0, 1]).any()
    assert uniform_p(np.bincount(draws, minlength=10)[2:], 8_000) > ALPHA / 2
    assert tree.total == 8.0


def test_sum_tree_keeps_tiny_weights_after_huge_ones_are_removed():
    """Subnormal weights beside huge ones, then the huge ones set to zero:
    the tiny ones (1 and 3 units of the last place) are drawn in proportion
    1 : 3 (binomial test at ALPHA over 8,000 draws), not lost to the scale
    the huge ones needed."""
    tree = SumTree(np.r_[np.full(4, HUGE), TINY, 3 * TINY], seed=2)
    tree.update(np.arange(4), np.zeros(4))
    draws = tree.sample(8_000)
    assert set(np.unique(draws).tolist()) <= {4, 5}
    assert binomial_p(int(np.count_nonzero(draws == 5)), 8_000, 0.75) > ALPHA


BAD_WEIGHTS = [
    ([1.0, float("nan")], "weight 1 is NaN"),
    ([1.0, float("inf")], "weight 1 is infinite"),
    ([1.0, -1e-300], "weight 1 is negative"),
    (["1.5", "2"], "weights must be numbers"),
    (np.array([1.0, 2.0], dtype=object), "weights must be numbers"),
    (np.array([1 + 1j]), "weights must be numbers"),
    ([[1.0, 2.0]], "weights must be a 1-D array"),
    ([[1.0], [2.0, 3.0]], "weights must be numbers"),
    ([], "at least one weight"),
]


@pytest.mark.parametrize("weights,message", BAD_WEIGHTS,
                         ids=["nan", "inf", "negative", "strings", "objects", "complex", "2d",
                              "ragged", "empty"])
def test_sum_tree_refuses_each_bad_weight_in_one_sentence(weights, message):
    with pytest.raises(ParameterError, match=message) as info:
        SumTree(weights)
    assert "\n" not in str(info.value)


def test_a_refused_update_changes_nothing():
    tree = SumTree([1.0, 2.0, 3.0], seed=1)
    for bad in (["x", "y"], [1.0, float("nan")], "z"):
        with pytest.raises(ParameterError):
            tree.update([0, 1], bad)
    assert np.array_equal(tree.weights(), [1.0, 2.0, 3.0]) and tree.total == 6.0


def test_check_weights_accepts_every_finite_non_negative_float():
    w = [0.0, TINY, 2.2250738585072014e-308, 1.0, 1.7976931348623157e308]
    assert np.array_equal(check_weights(w), w)


def test_prioritized_buffer_names_priorities_in_its_messages():
    """Bad priorities are refused as priorities ("priorities must be ...",
    never "prioritys"), strings included, and leave the buffer as it was."""
    buf = PrioritizedBuffer(4, seed=1)
    slots = buf.add(np.arange(4.0))
    before = buf.tree.weights()
    for bad, message in ((["a", "b", "c", "d"], "priorities must be numbers"),
                         ([1.0, float("nan"), 1.0, 1.0],
                          r"priority 1 is NaN \(nan\): priorities must be finite")):
        with pytest.raises(ParameterError, match=message) as info:
            buf.update(slots, bad)
        assert "prioritys" not in str(info.value)
    assert np.array_equal(buf.tree.weights(), before)


def test_prioritized_buffer_importance_weights_stay_finite_when_the_sum_overflows():
    """Equal priorities of 1e306 on 1,000 items (their sum overflows): every
    importance weight is exactly 1, never NaN."""
    buf = PrioritizedBuffer(1000, alpha=1.0, beta=0.5, eps=0.0, seed=4)
    slots = buf.add(np.zeros((1000, 1)))
    buf.update(slots, np.full(1000, HUGE))
    _, _, weights = buf.sample(64)
    assert np.array_equal(weights, np.ones(64))


# ---------------------------------------------------------------------------
# samplegen.weighted_sample
# ---------------------------------------------------------------------------
X = np.arange(2000.0).reshape(1000, 2)


def drawn(w, seed=3, **params):
    """The row ids of sample-0 of weighted_sample over X's first rows."""
    return weighted_sample(X[:len(w)], np.asarray(w), seed=seed, **params).indices("sample-0")


def test_api_draws_huge_weights_in_every_mode():
    """1,000 rows of weight 1e306 (the sum overflows): with replacement,
    20,000 draws uniform over the rows (chi-square at ALPHA / 2); Poisson
    sampling of 100 expected includes each row with probability 0.1
    (binomial count of the rows at ALPHA / 2; an empty sample fails it);
    exactly 100 distinct rows without replacement."""
    w = np.full(1000, HUGE)
    rows = drawn(w, size=20_000, replace=True)
    assert uniform_p(np.bincount(rows, minlength=1000), 20_000) > ALPHA / 2
    rows = drawn(w, expected=100)
    assert binomial_p(rows.size, 1000, 0.1) > ALPHA / 2
    rows = drawn(w, size=100)
    assert np.unique(rows).size == 100


def test_api_draws_subnormal_weights_in_every_mode():
    """Rows 0-499 of weight 1 and rows 500-999 of weight 3 units of the
    smallest subnormal.  With replacement, 20,000 draws land on the heavy
    half with probability 3/4 (binomial at ALPHA / 3).  Poisson sampling of
    200 expected: c = 0.1 per unit, so inclusion probabilities 0.1 and 0.3;
    the heavy half's count is binomial(500, 0.3) (at ALPHA / 3).  Exactly 100
    distinct rows as successive draws: each draw is from the heavy half
    with probability at least 1200 / 1700 (at least 400 heavy rows are
    left), so the heavy count dominates binomial(100, 1200 / 1700), whose
    tail below 53 is 7e-5 < ALPHA / 3 (uniform draws would give about 50)."""
    w = np.r_[np.full(500, TINY), np.full(500, 3 * TINY)]
    rows = drawn(w, size=20_000, replace=True)
    assert binomial_p(int(np.count_nonzero(rows >= 500)), 20_000, 0.75) > ALPHA / 3
    rows = drawn(w, expected=200)
    assert binomial_p(int(np.count_nonzero(rows >= 500)), 500, 0.3) > ALPHA / 3
    assert binomial_p(int(np.count_nonzero(rows < 500)), 500, 0.1) > ALPHA / 3
    rows = drawn(w, size=100)
    assert np.unique(rows).size == 100 and np.count_nonzero(rows >= 500) >= 53


@pytest.mark.parametrize("heavy", [1e300, HUGE])
def test_api_mixes_of_huge_and_tiny_weights_draw_the_tiny_ones_last(heavy):
    """Ten rows of a huge weight, ten of a tiny one (1e-300, or the smallest
    subnormal beside 1e306: a ratio beyond the range of a double's keys).
    15 distinct rows: the ten heavy ones first, then five tiny ones.
    Poisson sampling of 15 expected: the heavy rows certain, each tiny one
    with probability 1/2 (over 20 samples, binomial(200, 1/2) at ALPHA)."""
    tiny = 1e-300 if heavy == 1e300 else TINY
    w = np.r_[np.full(10, heavy), np.full(10, tiny)]
    rows = drawn(w, size=15)
    assert set(rows[:10].tolist()) == set(range(10))
    assert np.unique(rows[10:]).size == 5 and (rows[10:] >= 10).all()
    run = weighted_sample(X[:20], w, seed=8, expected=15, samples=20)
    tiny_in = 0
    for i in range(20):
        rows = run.indices(f"sample-{i}")
        assert set(range(10)) <= set(rows.tolist())
        tiny_in += int(np.count_nonzero(rows >= 10))
    assert binomial_p(tiny_in, 200, 0.5) > ALPHA


@pytest.mark.parametrize("weights,error,message", [
    (np.zeros(5), ParameterError, "no row has a positive weight"),
    ([1.0, 2.0, -3.0, 1.0, 1.0], InputError, "is negative .* at row 2"),
    ([1.0, np.nan, 1.0, 1.0, 1.0], InputError, "is NaN .* at row 1"),
    ([1.0, 1.0, 1.0, np.inf, 1.0], InputError, "is infinite .* at row 3"),
    (np.array(["1", "2", "3", "4", "5"]), ParameterError, "must be numbers"),
    (np.array([1, 2, 3, 4, 5], dtype=object), ParameterError, "must be numbers"),
    (np.ones(5, dtype=complex), ParameterError, "must be numbers"),
    (np.ones(4), SamplegenError, "weights"),
], ids=["zeros", "negative", "nan", "inf", "strings", "objects", "complex", "short"])
def test_api_refuses_bad_weights_with_a_clear_error(weights, error, message):
    with pytest.raises(error, match=message):
        weighted_sample(X[:5], weights, seed=1, size=2)


def test_api_refuses_more_distinct_rows_than_positive_weights():
    w = np.array([TINY, 0.0, HUGE, 0.0, 1.0])
    with pytest.raises(ParameterError, match="only 3 rows have a positive weight"):
        weighted_sample(X[:5], w, seed=1, size=4)
    with pytest.raises(ParameterError, match="only 3 weights are positive"):
        weighted_sample(X[:5], w, seed=1, expected=4)
    assert sorted(drawn(w, size=3).tolist()) == [0, 2, 4]


# ---------------------------------------------------------------------------
# samplegen weighted (the command line)
# ---------------------------------------------------------------------------
@pytest.fixture(scope="module")
def matrix(tmp_path_factory):
    """A 1,000-row matrix (block size 128)."""
    return make(tmp_path_factory.mktemp("wmatrix"), rows=1000, cols=3, block_size=128)


def cli_rows(capsys, tmp_path, matrix, weights, *args, name="out"):
    """Run ``samplegen weighted`` with *weights* (an array saved as .npy);
    ``(exit status, stderr, row ids of sample-0 or None)``."""
    path = tmp_path / f"{name}-w.npy"
    np.save(path, weights)
    dest = tmp_path / name
    code, _, err = run_cli(capsys, "-q", "weighted", matrix, dest, "--weights", path, *args,
                           "--seed", 5)
    rows = Matrix.open(str(dest / "sample-0")).to_numpy()[0] if code == 0 else None
    return code, err, rows


def test_command_samples_rows_whose_weights_sum_past_the_largest_float(capsys, tmp_path,
                                                                       matrix):
    """1,000 rows of weight 1e306: ``--size 20000 --replace`` spreads its
    draws uniformly (chi-square at ALPHA / 2; drawing only the last row
    fails it), ``--expected 100`` writes about 100 rows (binomial(1000, 0.1)
    at ALPHA / 2; an empty sample fails it), ``--size 100`` 100 distinct
    rows; all with exit status 0 and nothing on stderr."""
    w = np.full(1000, HUGE)
    code, err, rows = cli_rows(capsys, tmp_path, matrix, w, "--size", 20_000, "--replace",
                               name="replace")
    assert code == 0 and err == "", err
    assert rows.size == 20_000
    assert uniform_p(np.bincount(rows, minlength=1000), 20_000) > ALPHA / 2
    code, err, rows = cli_rows(capsys, tmp_path, matrix, w, "--expected", 100, name="expected")
    assert code == 0 and err == "", err
    assert binomial_p(rows.size, 1000, 0.1) > ALPHA / 2
    code, err, rows = cli_rows(capsys, tmp_path, matrix, w, "--size", 100, name="size")
    assert code == 0 and err == "", err
    assert np.unique(rows).size == 100


def test_command_accepts_subnormal_weights_without_warnings(capsys, tmp_path, matrix):
    """Every row of the smallest subnormal weight but rows 500-999 three
    times that: ``--size 100`` and ``--expected 200`` succeed (exit 0,
    empty stderr: no refusal, no RuntimeWarning).  Poisson: the heavy half's
    count is binomial(500, 0.3) (at ALPHA / 2); exact size: at least 53 of
    the 100 rows from the heavy half (see the API test: a tail of 7e-5, below
    ALPHA / 2)."""
    w = np.r_[np.full(500, TINY), np.full(500, 3 * TINY)]
    code, err, rows = cli_rows(capsys, tmp_path, matrix, w, "--size", 100, name="size")
    assert code == 0 and err == "", err
    assert np.unique(rows).size == 100 and np.count_nonzero(rows >= 500) >= 53
    code, err, rows = cli_rows(capsys, tmp_path, matrix, w, "--expected", 200, name="expected")
    assert code == 0 and err == "", err
    assert binomial_p(int(np.count_nonzero(rows >= 500)), 500, 0.3) > ALPHA / 2


def one_line_refusal(capsys, tmp_path, matrix, weights_file, *args, name="bad"):
    """Run ``samplegen weighted`` with *weights_file*; assert exit status 2,
    one line on stderr and nothing written; return that line."""
    dest = tmp_path / name
    code, out, err = run_cli(capsys, "-q", "weighted", matrix, dest, "--weights", weights_file,
                             *args, "--seed", 1)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, (code, err)
    assert out == "" and not os.path.exists(dest)
    return err


@pytest.mark.parametrize("weights,args,message", [
    (np.zeros(1000), ("--size", 5), "no row has a positive weight"),
    (np.r_[np.ones(999), -1.0], ("--size", 5), "is negative (-1.0) at row 999"),
    (np.r_[np.nan, np.ones(999)], ("--size", 5), "is NaN (nan) at row 0"),
    (np.r_[np.ones(500), np.inf, np.ones(499)], ("--expected", 5), "is infinite (inf) at row 500"),
    (np.ones(999), ("--size", 5), "holds 999 values; the matrix has 1000 rows"),
    (np.ones((1000, 1)), ("--size", 5), "the matrix has 1000 rows"),
    (np.array([], dtype=float), ("--size", 5), "holds 0 values"),
    (np.full(1000, "1.0"), ("--size", 5), "must be numbers"),
    (np.ones(1000, dtype=complex), ("--size", 5), "must be numbers"),
    (np.r_[np.zeros(997), TINY, 1.0, HUGE], ("--size", 4),
     "size = 4 distinct rows, but only 3 rows have a positive weight"),
    (np.r_[np.zeros(997), TINY, 1.0, HUGE], ("--expected", 4), "only 3 weights are positive"),
], ids=["zeros", "negative", "nan", "inf", "short", "2d", "empty", "strings", "complex",
        "size-past-positive", "expected-past-positive"])
def test_command_refuses_bad_weights_in_one_line(capsys, tmp_path, matrix, weights, args,
                                                 message):
    np.save(tmp_path / "w.npy", weights)
    err = one_line_refusal(capsys, tmp_path, matrix, tmp_path / "w.npy", *args)
    assert message in err, err


def test_command_refuses_a_pickled_object_weights_file(capsys, tmp_path, matrix):
    """An object array (which only a pickle can hold) is never unpickled."""
    np.save(tmp_path / "w.npy", np.array([1.0] * 1000, dtype=object), allow_pickle=True)
    err = one_line_refusal(capsys, tmp_path, matrix, tmp_path / "w.npy", "--size", 5)
    assert "w.npy" in err


@pytest.mark.parametrize("damage", ["truncated", "no-magic", "bad-header", "empty-file",
                                    "huge-shape"])
def test_command_refuses_a_damaged_weights_file_naming_it(capsys, tmp_path, matrix, damage):
    """A .npy file cut short, without the magic bytes, with a header that
    does not parse, empty, or whose header claims 10**13 values (which must
    not be allocated): one line naming the file, status 2."""
    path = tmp_path / "w.npy"
    np.save(path, np.ones(1000))
    data = path.read_bytes()
    damaged = {"truncated": data[:len(data) // 2],
               "no-magic": b"NOTNUMPY" + data[8:],
               "bad-header": data[:10] + b"{'descr': '<f8', 'shape': (garbage" + data[45:],
               "empty-file": b"",
               "huge-shape": data.replace(b"(1000,), }" + b" " * 10,
                                         b"(10000000000000,), }")}[damage]
    path.write_bytes(damaged)
    err = one_line_refusal(capsys, tmp_path, matrix, path, "--size", 5)
    assert "w.npy" in err, err
