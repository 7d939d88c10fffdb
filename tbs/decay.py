"""Decay functions f(age) for time-biased sampling, and gamma(f) = 1 / F_inf.

A decay function maps an item's age (current time minus arrival time) to its
relative weight.  The samplers require f(0) = 1, values in [0, 1] and f
non-increasing.  Three kinds are provided:

* :class:`Exponential` -- f(a) = exp(-lam * a);
* :class:`Polynomial`  -- f(a) = (1 + d)^s / (1 + d + a)^s (``shift=d``);
* :class:`CustomDecay` -- wraps any user callable (checked on a grid of ages),
  stored in sampler states as ``"module:name"`` when it can be imported back.

Besides evaluation, a decay knows the quantities the algorithms need:
``tail_sum(a, delta)`` = sum_{j>=0} f(a + j*delta) (F_inf is ``tail_sum(0, delta)``),
``age_below(level)`` (the first age at which f drops below ``level``) and
``hazard_sup(a)`` (the largest logarithmic decay rate -d/da log f beyond age a,
which bounds the exponential rate a consolidated R-TBS sample must decay at).

Precision of :func:`gamma`: closed form for Exponential; for Polynomial the
Hurwitz zeta function is evaluated by Euler--Maclaurin summation with a relative
error below 1e-14; for CustomDecay the series is summed in blocks of doubling
length, the remainder is extrapolated geometrically from the last two blocks,
the extrapolated values are accelerated with Aitken's delta-squared process and
the sum is accepted once two successive accelerated values agree to a relative
1e-12 (within 2**26 terms, otherwise a TBSError is raised).
"""
import math
from abc import ABC, abstractmethod

import numpy as np

from .errors import TBSError, check_real

__all__ = ["Decay", "Exponential", "Polynomial", "CustomDecay", "as_decay", "gamma",
           "decay_from_json", "hurwitz_zeta", "resolve_reference"]

# B_{2k} / (2k)! for k = 1..8 (Bernoulli numbers), used by Euler--Maclaurin.
_BERNOULLI_OVER_FACT = [
    (1 / 6) / math.factorial(2),
    (-1 / 30) / math.factorial(4),
    (1 / 42) / math.factorial(6),
    (-1 / 30) / math.factorial(8),
    (5 / 66) / math.factorial(10),
    (-691 / 2730) / math.factorial(12),
    (7 / 6) / math.factorial(14),
    (-3617 / 510) / math.factorial(16),
]


def _scaled_hurwitz(s, q):
    """Return q^s * zeta(s, q) = sum_{j>=0} (1 + j/q)^(-s) for s > 1, q > 0."""
    # Sum the first m terms directly, then the Euler--Maclaurin remainder at a = q + m.
    m = max(0, int(math.ceil(max(20.0, s + 20.0) - q)))
    head = 0.0
    if m:
        j = np.arange(m, dtype=np.float64)
        head = float(np.sum(np.exp(-s * np.log1p(j / q))))
    a = q + m
    corr = a / (s - 1.0) + 0.5
    rising = s  # s (s+1) ... (s+2k-2)
    power = 1.0 / a
    for k, coef in enumerate(_BERNOULLI_OVER_FACT, start=1):
        corr += coef * rising * power
        rising *= (s + 2 * k - 1) * (s + 2 * k)
        power /= a * a
    return head + math.exp(-s * math.log(a / q)) * corr


def hurwitz_zeta(s, q):
    """Hurwitz zeta function zeta(s, q) = sum_{j>=0} (q + j)^(-s), for s > 1 and q > 0."""
    s = check_real("s", s, low=1.0, low_open=True)
    q = check_real("q", q, low=0.0, low_open=True)
    return _scaled_hurwitz(s, q) * q ** (-s)


class Decay(ABC):
    """Base class: a non-increasing function of age with f(0) = 1."""

    #: True when f(a + b) = f(a) f(b) (exponential decay); samplers use the
    #: single-latent-sample algorithms in that case.
    is_exponential = False

    @abstractmethod
    def __call__(self, age):
        """Implemented by every concrete class."""

    @abstractmethod
    def tail_sum(self, age, delta=1.0):
        """sum_{j >= 0} f(age + j * delta); ``inf`` if the series diverges."""

    @abstractmethod
    def age_below(self, level):
        """inf{a >= 0 : f(a) < level} (``inf`` if f never drops below ``level``)."""

    @abstractmethod
    def hazard_sup(self, age):
        """sup over a >= age of -d/da log f(a) (``inf`` if f can reach 0)."""

    def to_json(self):
        """JSON description (dict), or None when the decay cannot be serialized."""
        return None

    def gamma(self, delta=1.0):
        """1 / F_inf with F_inf = sum_{i>=0} f(i * delta); 0 when F_inf diverges."""
        total = self.tail_sum(0.0, delta)
        return 0.0 if math.isinf(total) else 1.0 / total


class Exponential(Decay):
    """f(a) = exp(-lam * a) with decay rate ``lam >= 0``."""

    is_exponential = True

    def __init__(self, lam):
        self.lam = check_real("lam", lam, low=0.0)

    @classmethod
    def from_half_life(cls, half_life):
        """The decay under which an item's weight halves every ``half_life``
        time units: lam = ln 2 / half_life."""
        h = check_real("half_life", half_life, low=0.0, low_open=True)
        return cls(math.log(2.0) / h)

    @classmethod
    def from_window(cls, window, spacing=1.0):
        """The decay whose total weight equals a sliding window's of ``window``
        time units when batches arrive every ``spacing``: sum_{j>=0} f(j spacing)
        = window / spacing, so a stream of equal batches gives the sample as
        much weight as the window holds items (lam = -ln(1 - spacing / window)
        / spacing; a window of one batch is no decay at all but keeping the
        newest batch, so ``window`` must exceed ``spacing``)."""
        d = check_real("spacing", spacing, low=0.0, low_open=True)
        w = check_real("window", window, low=d, low_open=True)
        return cls(-math.log1p(-d / w) / d)

    @property
    def half_life(self):
        """ln 2 / lam (``inf`` for lam = 0)."""
        return math.inf if self.lam == 0.0 else math.log(2.0) / self.lam

    def __call__(self, age):
        return np.exp(-self.lam * np.asarray(age, dtype=np.float64))

    def factor(self, dt):
        """f(a + dt) / f(a), the same for every age a."""
        return math.exp(-self.lam * dt)

    def tail_sum(self, age, delta=1.0):
        delta = check_real("delta", delta, low=0.0, low_open=True)
        if self.lam == 0.0:
            return math.inf
        return math.exp(-self.lam * age) / -math.expm1(-self.lam * delta)

    def age_below(self, level):
        if level > 1.0:
            return 0.0
        if self.lam == 0.0 or level <= 0.0:
            return math.inf
        return -math.log(level) / self.lam

    def hazard_sup(self, age):
        return self.lam

    def to_json(self):
        return {"kind": "exponential", "lam": self.lam}

    def __repr__(self):
        return f"Exponential({self.lam!r})"


class Polynomial(Decay):
    """f(a) = (1 + d)^s / (1 + d + a)^s with power ``s > 0`` and ``shift=d >= 0``."""

    def __init__(self, s, shift=0.0):
        self.s = check_real("s", s, low=0.0, low_open=True)
        self.shift = check_real("shift", shift, low=0.0)

    def __call__(self, age):
        a = np.asarray(age, dtype=np.float64)
        base = 1.0 + self.shift
        return np.exp(-self.s * np.log1p(a / base))

    def tail_sum(self, age, delta=1.0):
        delta = check_real("delta", delta, low=0.0, low_open=True)
        if self.s <= 1.0:
            return math.inf
        q = (1.0 + self.shift + age) / delta
        return float(self(age)) * _scaled_hurwitz(self.s, q)

    def age_below(self, level):
        if level > 1.0:
            return 0.0
        if level <= 0.0:
            return math.inf
        return (1.0 + self.shift) * (level ** (-1.0 / self.s) - 1.0)

    def hazard_sup(self, age):
        return self.s / (1.0 + self.shift + age)

    def to_json(self):
        return {"kind": "polynomial", "power": self.s, "shift": self.shift}

    def __repr__(self):
        return f"Polynomial({self.s!r}, shift={self.shift!r})"


# Ages at which a user callable is checked (0, then a geometric grid to 1e6).
_CHECK_GRID = np.concatenate([[0.0], np.geomspace(1e-3, 1e6, 400)])


def _reference_of(func):
    """``module:qualname`` when ``func`` can be imported back by that name, else None."""
    module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
    if not module or not qualname or "<" in qualname or module == "__main__":
        return None
    try:
        found = resolve_reference(f"{module}:{qualname}")
    except TBSError:
        return None
    return f"{module}:{qualname}" if found is func else None


def resolve_reference(ref):
    """The object named by ``module:qualname`` (e.g. ``mypkg.decays:step``)."""
    import importlib
    if not isinstance(ref, str) or ref.count(":") != 1 or not all(ref.split(":")):
        raise TBSError(f"a decay reference must be 'module:name', got {ref!r}")
    module, qualname = ref.split(":")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception as exc:      # ImportError, AttributeError, errors raised on import
        raise TBSError(f"decay {ref!r} cannot be imported ({type(exc).__name__}: {exc}); "
                       "make it importable where the state is read, or pass decay= "
                       "explicitly") from None
    return obj


class CustomDecay(Decay):
    """Wraps a user callable; checked for f(0) = 1, 0 <= f <= 1 and monotonicity.

    ``func`` may also be a reference ``"module:name"``.  A function that can be
    imported back by its module and name (not a lambda, a closure or a
    function of ``__main__``) is stored in sampler states by that reference,
    so ``from_state`` finds it again without ``decay=``."""

    def __init__(self, func, name=None):
        if isinstance(func, str):
            ref, func = func, resolve_reference(func)
        else:
            ref = _reference_of(func) if callable(func) else None
        if not callable(func):
            raise TBSError(f"decay must be a Decay or a callable f(age), got {func!r}")
        self.func = func
        self.reference = ref
        self.name = name or getattr(func, "__name__", "custom")
        try:
            values = self(_CHECK_GRID)
        except Exception as exc:
            raise TBSError(f"decay {self.name!r} cannot be evaluated: {exc}") from exc
        if not np.all(np.isfinite(values)):
            raise TBSError(f"decay {self.name!r} must return finite values, got "
                           f"{float(values[~np.isfinite(values)][0])!r}")
        if abs(values[0] - 1.0) > 1e-12:
            raise TBSError(f"decay {self.name!r} must satisfy f(0) = 1, "
                           f"got f(0) = {float(values[0])!r}")
        if np.any(values < 0.0) or np.any(values > 1.0 + 1e-12):
            raise TBSError(f"decay {self.name!r} must take values in [0, 1]")
        rises = np.flatnonzero(np.diff(values) > 1e-12 * np.maximum(values[1:], 1e-300))
        if rises.size:
            a = _CHECK_GRID[rises[0] + 1]
            raise TBSError(f"decay {self.name!r} must be non-increasing, but f({a:g}) = "
                           f"{float(values[rises[0] + 1])!r} > f({_CHECK_GRID[rises[0]]:g})")

    def __call__(self, age):
        a = np.asarray(age, dtype=np.float64)
        try:
            out = np.asarray(self.func(a), dtype=np.float64)
            if out.shape != a.shape:
                raise ValueError("shape")
        except Exception:
            out = np.asarray(np.vectorize(lambda x: float(self.func(float(x))))(a),
                             dtype=np.float64)
        return out if out.ndim else float(out)

    def tail_sum(self, age, delta=1.0):
        delta = check_real("delta", delta, low=0.0, low_open=True)
        total = float(self(age))
        start, width, prev = 1, 1, None
        estimates, accelerated = [], []
        while start < (1 << 26):
            j = np.arange(start, start + width, dtype=np.float64)
            block = float(np.sum(self(age + j * delta)))
            total += block
            if block <= 1e-16 * total:
                return total
            if prev is not None and prev > 0.0 and block / prev < 0.999:
                # Extrapolate the remaining blocks geometrically, accelerate the
                # extrapolated values with Aitken's delta-squared, and accept once
                # two successive accelerated values agree to 1e-12 (relative).
                r = block / prev
                estimates.append(total + block * r / (1.0 - r))
                if len(estimates) >= 3:
                    e1, e2, e3 = estimates[-3:]
                    denom = (e3 - e2) - (e2 - e1)
                    acc = e3 if denom == 0.0 else e3 - (e3 - e2) ** 2 / denom
                    if accelerated and abs(acc - accelerated[-1]) <= 1e-12 * abs(acc):
                        return acc
                    accelerated.append(acc)
            prev = block
            start += width
            width *= 2
        raise TBSError(f"decay {self.name!r}: sum of f(age + j*{delta:g}) does not converge "
                       "to 1e-12 within 2**26 terms; F_inf must be finite")

    def age_below(self, level):
        if level > 1.0:
            return 0.0
        hi = 1.0
        while float(self(hi)) >= level:
            hi *= 2.0
            if hi > 1e15:
                return math.inf
        lo = 0.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if float(self(mid)) < level:
                hi = mid
            else:
                lo = mid
            if hi - lo <= 1e-12 * hi:
                break
        return hi

    def hazard_sup(self, age):
        # Largest -d log f / da on a geometric grid beyond `age` (finite differences).
        x = age + np.concatenate([[0.0], np.geomspace(1e-3, 1e6, 2000)])
        h = 1e-6 * (1.0 + x)
        f0 = self(x)
        f1 = self(x + h)
        if np.any(f1 <= 0.0):
            return math.inf
        return float(np.max(-(np.log(f1) - np.log(f0)) / h))

    def to_json(self):
        return None if self.reference is None else {"kind": "custom", "ref": self.reference}

    def __repr__(self):
        return f"CustomDecay({self.reference or self.name})"


def as_decay(decay):
    """Return ``decay`` as a :class:`Decay` (wrapping plain callables and
    ``"module:name"`` references)."""
    if isinstance(decay, Decay):
        return decay
    return CustomDecay(decay)


def gamma(f, delta=1.0):
    """gamma(f) = 1 / sum_{i>=0} f(i * delta); 0 if the sum diverges.

    See the module docstring for the precision of each decay kind.
    """
    return as_decay(f).gamma(delta)


def decay_from_json(spec):
    """Inverse of ``Decay.to_json``."""
    if not isinstance(spec, dict) or "kind" not in spec:
        raise TBSError(f"decay spec must be a dict with a 'kind', got {spec!r}")
    if spec["kind"] == "exponential":
        return Exponential(spec["lam"])
    if spec["kind"] == "polynomial":
        return Polynomial(spec["power"], shift=spec["shift"])
    if spec["kind"] == "custom":
        return CustomDecay(spec.get("ref"))
    raise TBSError("decay kind must be 'exponential', 'polynomial' or 'custom', "
                   f"got {spec['kind']!r}")
