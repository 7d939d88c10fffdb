"""Decay functions, gamma(f) = 1/F_inf and argument checking."""
import math

import numpy as np
import pytest

from samplegen.tbs import CustomDecay, Exponential, Polynomial, TBSError, gamma
from samplegen.tbs.decay import decay_from_json, hurwitz_zeta


def test_values_and_normalisation():
    e = Exponential(0.07)
    p = Polynomial(2, shift=10)
    ages = np.array([0.0, 0.5, 1.0, 7.0, 100.0])
    np.testing.assert_allclose(e(ages), np.exp(-0.07 * ages), rtol=1e-15)
    np.testing.assert_allclose(p(ages), 11.0 ** 2 / (11.0 + ages) ** 2, rtol=1e-14)
    assert float(e(0.0)) == 1.0 and float(p(0.0)) == 1.0
    assert float(Polynomial(1.5)(3.0)) == pytest.approx(4.0 ** -1.5, rel=1e-14)


@pytest.mark.parametrize("s, q, ref", [
    (2.0, 1.0, math.pi ** 2 / 6),
    (4.0, 1.0, math.pi ** 4 / 90),
    (2.0, 0.5, math.pi ** 2 / 2),          # zeta(s, 1/2) = (2^s - 1) zeta(s)
    (3.0, 1.0, 1.2020569031595942),        # Apery's constant
])
def test_hurwitz_zeta_known_values(s, q, ref):
    assert hurwitz_zeta(s, q) == pytest.approx(ref, rel=1e-14)


def test_hurwitz_zeta_against_direct_sum():
    # Direct sum of 2e6 terms plus the integral tail (error < 1e-18 for s = 2.5).
    s, q = 2.5, 3.3
    j = np.arange(2_000_000, dtype=np.float64)
    direct = np.sum((q + j) ** -s) + (q + 2e6 - 0.5) ** (1 - s) / (s - 1)
    assert hurwitz_zeta(s, q) == pytest.approx(direct, rel=1e-12)


def test_gamma_closed_forms_and_paper_values():
    assert gamma(Exponential(0.1)) == pytest.approx(1 - math.exp(-0.1), rel=1e-15)
    assert gamma(Exponential(0.1), delta=2.0) == pytest.approx(1 - math.exp(-0.2), rel=1e-15)
    # Section 3.1, Remark 1: f_i = 1/(1+i)^2 gives gamma ~ 0.61, shifted by d = 3 ~ 0.22.
    assert gamma(Polynomial(2)) == pytest.approx(6 / math.pi ** 2, rel=1e-14)
    assert gamma(Polynomial(2, shift=3)) == pytest.approx(0.22, abs=0.005)
    # The shifted version equals f_d / sum_{i >= d} f(i) for the unshifted f.
    i = np.arange(3, 4_000_000, dtype=np.float64)
    tail = np.sum(1 / (1 + i) ** 2) + 1 / (4_000_000 + 0.5)
    assert gamma(Polynomial(2, shift=3)) == pytest.approx((1 / 16) / tail, rel=1e-9)
    # Divergent series -> gamma = 0.
    assert gamma(Polynomial(1.0)) == 0.0
    assert gamma(Exponential(0.0)) == 0.0


def test_gamma_of_custom_callables_to_stated_precision():
    # Stated precision for custom decays: relative 1e-12 (tested with margin 1e-11).
    cases = [
        (lambda a: 1.0 / (1.0 + a) ** 2, 6 / math.pi ** 2),
        (lambda a: np.exp(-0.1 * a), 1 - math.exp(-0.1)),
        (lambda a: (11.0 / (11.0 + a)) ** 2.2, Polynomial(2.2, shift=10).gamma()),
        (lambda a: (1.0 + a) ** -1.5, 1 / hurwitz_zeta(1.5, 1.0)),
    ]
    for f, ref in cases:
        assert gamma(f) == pytest.approx(ref, rel=1e-11)


def test_tail_sum_consistency():
    for d in (Exponential(0.3), Polynomial(2, shift=10),
              CustomDecay(lambda a: (11 / (11 + a)) ** 2)):
        # tail(a) = f(a) + tail(a + delta)
        for a in (0.0, 2.5, 40.0):
            assert d.tail_sum(a, 0.5) == pytest.approx(float(d(a)) + d.tail_sum(a + 0.5, 0.5),
                                                       rel=1e-10)


def test_age_below_and_hazard():
    p = Polynomial(2, shift=10)
    a = p.age_below(0.01)
    assert a == pytest.approx(99.0, rel=1e-12)          # (11/(11+a))^2 = 0.01
    assert p.hazard_sup(a) == pytest.approx(2 / 110, rel=1e-12)
    e = Exponential(0.2)
    assert float(e(e.age_below(0.3))) == pytest.approx(0.3, rel=1e-12)
    c = CustomDecay(lambda x: (11 / (11 + x)) ** 2)
    assert c.age_below(0.01) == pytest.approx(99.0, rel=1e-9)
    assert c.hazard_sup(99.0) == pytest.approx(2 / 110, rel=1e-4)


def test_custom_decay_checks():
    with pytest.raises(TBSError, match=r"f\(0\) = 1, got f\(0\) = 0.5"):
        CustomDecay(lambda a: 0.5 * np.exp(-a))
    with pytest.raises(TBSError, match="non-increasing"):
        CustomDecay(lambda a: np.where(a > 10, 1.0, np.exp(-a)))
    with pytest.raises(TBSError, match=r"values in \[0, 1\]"):
        CustomDecay(lambda a: 1.0 - a)
    with pytest.raises(TBSError, match="callable"):
        CustomDecay(3)
    # Scalar-only callables are vectorized automatically.
    d = CustomDecay(lambda a: math.exp(-0.5 * a))
    np.testing.assert_allclose(d(np.array([0.0, 2.0])), [1.0, math.exp(-1.0)])


@pytest.mark.parametrize("make, message", [
    (lambda: Exponential(-1), "lam must be a finite number >= 0, got -1"),
    (lambda: Exponential(float("nan")), "lam must be a finite number >= 0, got nan"),
    (lambda: Polynomial(0), "s must be a finite number > 0, got 0"),
    (lambda: Polynomial(2, shift=-1), "shift must be a finite number >= 0, got -1"),
    (lambda: Exponential("0.1"), "lam must be a finite number >= 0, got '0.1'"),
])
def test_parameter_errors(make, message):
    with pytest.raises(TBSError) as info:
        make()
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)


def test_json_round_trip():
    for d in (Exponential(0.07), Polynomial(2.2, shift=10)):
        back = decay_from_json(d.to_json())
        assert type(back) is type(d) and back.to_json() == d.to_json()
    assert CustomDecay(lambda a: np.exp(-a)).to_json() is None
    with pytest.raises(TBSError, match="decay kind"):
        decay_from_json({"kind": "gaussian"})


@pytest.mark.parametrize("half_life", [0.5, 1.0, 7.0, 1e4])
def test_half_life(half_life):
    d = Exponential.from_half_life(half_life)
    assert float(d(half_life)) == pytest.approx(0.5, rel=1e-12)
    assert float(d(3 * half_life)) == pytest.approx(0.125, rel=1e-12)
    assert d.half_life == pytest.approx(half_life, rel=1e-12)
    assert Exponential(0.0).half_life == math.inf


@pytest.mark.parametrize("window, spacing", [(10.0, 1.0), (1000.0, 1.0), (5.0, 0.25), (2.0, 1.0)])
def test_equivalent_window(window, spacing):
    # Same total weight as a window holding window / spacing batches:
    # sum_{j>=0} f(j spacing) = window / spacing.
    d = Exponential.from_window(window, spacing)
    j = np.arange(0, 200_000, dtype=np.float64)
    assert float(np.sum(d(j * spacing))) == pytest.approx(window / spacing, rel=1e-9)
    assert 1.0 / d.gamma(spacing) == pytest.approx(window / spacing, rel=1e-12)


def test_half_life_and_window_errors():
    for bad in (0, -1.0, float("nan"), "x"):
        with pytest.raises(TBSError, match="half_life"):
            Exponential.from_half_life(bad)
    with pytest.raises(TBSError, match="window"):
        Exponential.from_window(1.0, 1.0)
    with pytest.raises(TBSError, match="spacing"):
        Exponential.from_window(10.0, 0.0)
