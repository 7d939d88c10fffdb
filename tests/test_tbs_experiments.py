"""Pieces of the section-6 experiments: the kNN stream, ridge paths, the online
learners, grid-edge detection, variable batch sizes (small, fast runs)."""
import numpy as np
import pytest

from samplegen.tbs import experiments as ex
from samplegen.tbs.errors import TBSError
from tests.conftest import tbs_main as main

# ------------------------------------------------------------------ kNN stream

def test_default_mixture_is_the_one_the_paper_states():
    # section 6.4: 100 classes in [0, 80]^2, standard deviation 1, frequent
    # classes five times as frequent
    assert ex.KNN_MIXTURE == {"classes": 100, "box": 80.0, "spread": 1.0, "ratio": 5.0}
    flags = np.array([False, True])
    default = ex.gaussian_mixture_stream(np.random.default_rng(3), 2, 500, flags)
    stated = ex.gaussian_mixture_stream(np.random.default_rng(3), 2, 500, flags,
                                        classes=100, box=80.0, spread=1.0, ratio=5.0)
    assert all(np.array_equal(a, b) for a, b in zip(default, stated))


def test_calibrated_mixture_errs_more_than_the_stated_one():
    # the labelled variant fitted to figure 13(a)'s levels (about 15% normal,
    # about 40% right after a switch) overlaps more and is more skewed
    normal, switch = ex.mode_switch_error(np.random.default_rng(5), repeats=4, queries=1000)
    cal_normal, cal_switch = ex.mode_switch_error(np.random.default_rng(5), repeats=4,
                                                  queries=1000, **ex.CALIBRATED_MIXTURE)
    assert switch > normal + 5.0 and cal_switch > cal_normal + 5.0    # a switch hurts
    assert normal < cal_normal and switch < 30.0 < cal_switch
    assert 11.0 <= cal_normal <= 19.0 and 33.0 <= cal_switch <= 48.0


def test_mixture_frequencies_follow_the_mode_and_batch_sizes():
    flags = np.array([False, True, False])
    sizes = np.array([20000, 20000, 0])
    pts, lab = ex.gaussian_mixture_stream(np.random.default_rng(1), 3, sizes, flags,
                                          ratio=4.0, spread=0.5)
    assert pts.shape == (40000, 2) and lab.shape == (40000,)
    frequent = 4.0 * 50 / (4.0 * 50 + 50)                    # share of classes 0-49
    assert abs(np.mean(lab[:20000] < 50) - frequent) < 0.015
    assert abs(np.mean(lab[20000:] >= 50) - frequent) < 0.015
    assert lab.min() >= 0 and lab.max() <= 99
    with pytest.raises(TBSError, match="spread"):
        ex.gaussian_mixture_stream(np.random.default_rng(1), 1, 5, flags[:1], spread=-1)


def test_stream_sizes_and_empty_batches():
    grow = ex.stream_sizes("growing", 10, 5, 100, growth=0.02)
    assert grow[:10].tolist() == [100] * 10
    assert grow[10:].tolist() == [int(round(100 * 1.02 ** k)) for k in range(1, 6)]
    uni = ex.stream_sizes("uniform", 50, 50, 100, seed=3)
    assert uni.min() >= 0 and uni.max() <= 200 and uni.size == 100
    sizes = np.array([50, 50, 0, 60] + [50] * 20)
    flags = ex.mode_pattern("P(10,10)", 22)
    schemes = ex.make_schemes("exp:0.1,sw", 100)
    scores = ex.stream_experiment(schemes, ex.gaussian_mixture_stream,
                                  lambda p, lab: ex.knn_scores(p, lab, [1, 3]), [1, 3],
                                  runs=2, warmup=2, test_batches=22, batch=sizes,
                                  abnormal=flags, seed=1)
    assert np.isnan(scores["SW"][:, 0]).all() and np.isfinite(scores["SW"][:, 1:]).all()
    res = ex.summarize(scores, [1, 3], ex.tune(scores))
    assert all(np.isfinite(m) and np.isfinite(e) for _, m, e in res.values())
    with pytest.raises(TBSError, match="schemes"):
        ex.make_schemes("exp:0.1,window")


# ------------------------------------------------------------------ regression

@pytest.mark.parametrize("intercept", [False, True])
def test_ridge_path_equals_direct_solves(intercept):
    rng = np.random.default_rng(2)
    x = rng.uniform(size=(300, 5))
    y = x @ np.arange(1.0, 6.0) + 2.0 * intercept + rng.standard_normal(300)
    penalties = [0.0, 0.5, 30.0]
    got = ex.ridge_scores(x, y, penalties, intercept=intercept)(np.arange(200),
                                                                np.arange(200, 300))
    xs, ys = x[:200], y[:200]
    mx, my = (xs.mean(axis=0), ys.mean()) if intercept else (np.zeros(5), 0.0)
    for a, value in zip(penalties, got):
        coef = np.linalg.solve((xs - mx).T @ (xs - mx) + a * np.eye(5), (xs - mx).T @ (ys - my))
        pred = x[200:] @ coef + my - mx @ coef
        assert value == pytest.approx(np.mean((pred - y[200:]) ** 2), rel=1e-9)


def test_grid_edges():
    grid = [0.1, 1.0, 10.0]
    assert ex.grid_edges(grid, {"a": 0, "b": 1, "c": 2}) == {"a": "lowest", "c": "highest"}
    assert ex.grid_edges(grid, {"b": 1}) == {}
    assert ex.log_grid(0.01, 100) == [0.01, 0.0215, 0.0464, 0.1, 0.215, 0.464, 1.0, 2.15,
                                      4.64, 10.0, 21.5, 46.4, 100.0]


def test_regression_reports_a_tuned_penalty_on_the_grid_edge(tmp_path, capsys):
    table = tmp_path / "r.md"
    rc = main(["regression", "--runs", "1", "--tune-runs", "0", "--patterns", "P(10,10)",
               "--test-batches", "20", "--warmup", "10", "--penalties", "1e-3,1e-2",
               "--no-intercept", "--table", str(table)])
    assert rc == 0
    err = capsys.readouterr().err
    assert "warning: tuned penalty of" in err and "highest grid value 0.01" in err
    assert "Grid edge: P(10,10): tuned penalty of" in table.read_text()


# ------------------------------------------------------------------ online learners

def test_online_learners_reach_the_least_squares_error_on_a_stationary_stream():
    # stationary stream, noise variance 1: both learners converge, so the
    # prediction error approaches the noise variance (least squares limit)
    rng = np.random.default_rng(4)
    sizes = np.full(160, 100)
    x, y = ex.linear_stream(rng, 160, sizes, np.zeros(160, bool), extra=3)
    ogd = ex.online_scores(x, y, sizes, 100, "ogd", [1e-3, 0.3, 1e3])
    prox = ex.online_scores(x, y, sizes, 100, "prox", [0.3, 1.0])
    assert ogd.shape == (60, 3) and prox.shape == (60, 2)
    assert abs(ogd[:, 1].mean() - 1.0) < 0.1
    assert np.all(np.abs(prox.mean(axis=0) - 1.0) < 0.1)
    assert ogd[:, 0].mean() > 2.0                  # far too small a step: not there yet
    assert np.isinf(ogd[:, 2]).any()               # far too large a step: diverges
    assert ex.tune({"ogd": ogd[None]}) == {"ogd": 1}
    with pytest.raises(TBSError, match="grid"):
        ex.online_scores(x, y, sizes, 100, "prox", [0.0])


def test_online_command_marks_edges_and_writes_outputs(tmp_path, capsys):
    table, out_csv = tmp_path / "o.md", tmp_path / "o.csv"
    rc = main(["online", "--runs", "1", "--tune-runs", "0", "--test-batches", "20",
               "--warmup", "10", "--lambdas", "0.05,0.1", "--rates", "0.01,0.1",
               "--mus", "1,10", "--fixed-lambda", "0.1", "--table", str(table),
               "--csv", str(out_csv)])
    assert rc == 0
    text = table.read_text()
    assert text.startswith("| stable parameters | R-TBS MSE |") and "(edge)" in text
    assert "the paper's MSE" in text
    assert len(out_csv.read_text().splitlines()) == 1 + 4 * 20
    assert "grid value" in capsys.readouterr().err


def test_polynomial_schemes_take_a_shift():
    schemes = ex.make_schemes("poly:2.0:6,poly:2.0,poly:1.8:14", 100)
    assert list(schemes) == ["R-TBS poly: s = 2.0, d = 6", "R-TBS poly: s = 2.0",
                             "R-TBS poly: s = 1.8, d = 14"]
    for factory, (s, d) in zip(schemes.values(), [(2.0, 6), (2.0, 10), (1.8, 14)]):
        decay = factory(1).decay
        assert float(decay(np.array([3.0]))[0]) == pytest.approx((1 + d) ** s / (4 + d) ** s)
    with pytest.raises(TBSError, match="same scheme"):
        ex.make_schemes("poly:2.0:10,poly:2.0")
    for bad in ("poly:2:x", "poly:2:-1", "poly:2:inf"):
        with pytest.raises(TBSError, match="poly:S:D"):
            ex.make_schemes(bad)


def test_best_decay_compares_the_papers_shift_only():
    results = {"R-TBS poly: s = 1.8": (3, 12.0, 20.0), "R-TBS poly: s = 2.0": (3, 11.0, 21.0),
               "R-TBS poly: s = 2.0, d = 6": (3, 10.0, 19.0), "SW": (3, 13.0, 30.0)}
    assert ex.best_decay(results, "poly") == (2.0, 1.8)
    del results["R-TBS poly: s = 1.8"]
    assert ex.best_decay(results, "poly") is None


def test_knn_command_writes_a_table_with_shifted_schemes(tmp_path, capsys):
    table = tmp_path / "k.md"
    assert main(["knn", "--runs", "1", "--tune-runs", "0", "--test-batches", "20", "--warmup",
                 "5", "--patterns", "single", "--k", "3", "--schemes",
                 "poly:2.0:6,poly:2.0,poly:1.8,sw", "--table", str(table)]) == 0
    capsys.readouterr()
    text = table.read_text()
    assert "| R-TBS poly: s = 2.0, d = 6 |" in text and "best s for Miss% / for ES" in text


def test_online_rtbs_tunes_a_ridge_penalty_with_the_rate():
    flags = ex.mode_pattern("P(10,10)", 20)
    common = dict(rates=[0.1], mus=[1.0], runs=1, tune_runs=1, warmup=10, test_batches=20,
                  batch=50, abnormal=flags, n=200, fixed_lambda=0.1)
    plain = ex.online_experiment(lambdas=[0.1, 0.5], **common)
    assert plain["tuned"]["R-TBS"] in (0.1, 0.5) and plain["tuned"]["R-TBS fixed"] == 0.1
    ridge = ex.online_experiment(lambdas=[0.1, 0.5], penalties=[0.0, 1e9], **common)
    # a penalty of 1e9 predicts 0 (mean squared error about E[y^2] > 1): never the best
    assert ridge["tuned"]["R-TBS"] == (plain["tuned"]["R-TBS"], 0.0)
    assert ridge["tuned"]["R-TBS fixed"] == (0.1, 0.0)
    # penalty 0 is least squares: the same curves
    assert np.array_equal(ridge["curves"]["R-TBS"], plain["curves"]["R-TBS"])
    with pytest.raises(TBSError, match="penalties"):
        ex.online_experiment(lambdas=[0.1], penalties=[-1.0], **common)
