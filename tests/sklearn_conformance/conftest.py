"""scikit-learn's own split tests against samplegen's splitters.

``test_sklearn_split.py`` in this directory is a stand-in: its pytest node
is scikit-learn's installed ``sklearn/model_selection/tests/test_split.py``,
loaded at collection time from the scikit-learn this interpreter imports
(nothing of it is copied here).  While that file runs its imports, every
name it takes from ``sklearn.model_selection`` that samplegen also provides
(``KFold``, ``StratifiedKFold``, ``ShuffleSplit``, ..., ``train_test_split``)
is samplegen's; everything else (``LeaveOneOut``, ``StratifiedGroupKFold``,
``check_cv``, ``cross_val_score``, scikit-learn's private helpers) stays
scikit-learn's.  Each of its test functions, with its own parametrizations,
is one pytest item under this stand-in's node id.

The items that fail because samplegen differs on purpose are listed, with
their reasons, in :mod:`.differences` and marked ``xfail(strict=True)``: a
listed test that starts passing fails, and so does any unlisted failure.
The list was made against the scikit-learn version ``differences.MADE_WITH``
names; with another version installed the tests still run, and what changed
shows as failures (an entry whose test is gone is then not an error).
"""
import ast
import builtins
import hashlib
import importlib.util
import itertools
import pathlib
import types
import warnings

import pytest

from . import differences

#: the stand-in whose node is scikit-learn's test module
STAND_IN = "test_sklearn_split.py"


def substituted_names():
    """The names of ``sklearn.model_selection`` that samplegen provides."""
    import sklearn.model_selection as skms

    from samplegen import model_selection as ms
    return sorted(name for name in ms.__all__ if hasattr(skms, name))


class _Substituted(types.ModuleType):
    """``sklearn.model_selection`` as the loaded module imports it: the
    substituted names are samplegen's, the rest scikit-learn's."""

    def __init__(self, original, replaced):
        super().__init__(original.__name__)
        self._original, self._replaced = original, replaced

    def __getattr__(self, name):
        if name in self._replaced:
            return self._replaced[name]
        return getattr(self._original, name)


def load_substituted(path, name, config=None):
    """The module at *path* (scikit-learn's test file) executed with
    samplegen's splitters in place of scikit-learn's: its ``from
    sklearn.model_selection import ...`` (at the top, or inside a test)
    gets samplegen's for :func:`substituted_names`.  Splitters the module
    makes while it loads without a seed get seed 0 (samplegen draws one
    from the operating system otherwise, and their ``repr`` is part of
    scikit-learn's parametrize ids, which must be the same on every
    collection).  Its asserts are rewritten as pytest rewrites a test
    module's, when *config* is given."""
    import sklearn.model_selection as skms

    from samplegen import model_selection as ms
    proxy = _Substituted(skms, {n: getattr(ms, n) for n in substituted_names()})

    def substituting_import(module, globals=None, locals=None, fromlist=(), level=0):
        found = builtins.__import__(module, globals, locals, fromlist, level)
        if module == "sklearn.model_selection" and fromlist and not level:
            return proxy
        return found

    source = path.read_bytes()
    tree = ast.parse(source, filename=str(path))
    if config is not None:
        from _pytest.assertion.rewrite import rewrite_asserts
        rewrite_asserts(tree, source, str(path), config)
    code = compile(tree, str(path), "exec", dont_inherit=True)
    module = types.ModuleType(name)
    module.__file__ = str(path)
    module.__dict__["__builtins__"] = {**vars(builtins), "__import__": substituting_import}
    drawn = ms.fresh_seed
    ms.fresh_seed = lambda: 0
    try:
        exec(code, module.__dict__)
    finally:
        ms.fresh_seed = drawn
    return module


def installed_test_split():
    """The path of the installed scikit-learn's split tests."""
    spec = importlib.util.find_spec("sklearn")
    return pathlib.Path(spec.origin).parent / "model_selection" / "tests" / "test_split.py"


class SubstitutedSplitTests(pytest.Module):
    """The stand-in's node: scikit-learn's test_split.py, substituted."""

    def _getobj(self):
        path = installed_test_split()
        if not path.exists():
            raise self.CollectError(f"the installed scikit-learn has no split tests at {path}")
        return load_substituted(path, "sklearn_conformance_test_split", self.config)

    def collect(self):
        import sklearn

        items = list(super().collect())
        listed = differences.LISTED
        seen = set()
        for item in items:
            key = item.name if item.name in listed else getattr(item, "originalname", None)
            if key in listed:
                seen.add(key)
                item.add_marker(pytest.mark.xfail(strict=True, reason=listed[key]))
        missing = sorted(set(listed) - seen)
        if missing and sklearn.__version__ == differences.MADE_WITH:
            raise self.CollectError("differences.py lists tests scikit-learn's test_split.py "
                                    f"does not have: {', '.join(missing)}")
        if missing:
            warnings.warn(f"scikit-learn {sklearn.__version__} is installed, the list of "
                          f"differences was made with {differences.MADE_WITH}: "
                          f"{len(missing)} listed tests are gone", UserWarning, stacklevel=2)
        return items


def _deselected(config):
    """Whether ``-m`` leaves out tests marked ``slow`` (``make check``): then
    scikit-learn's module is not loaded at all, on each of xdist's workers."""
    from _pytest.mark.expression import Expression
    expression = config.getoption("markexpr", "")
    if not expression:
        return False
    try:
        return not Expression.compile(expression).evaluate(lambda name, **kw: name == "slow")
    except Exception:        # an expression this reading does not follow: load, let -m choose
        return False


def pytest_pycollect_makemodule(module_path, parent):
    if module_path.name == STAND_IN:
        if _deselected(parent.config):
            return None      # the stand-in itself: no tests
        pytest.importorskip("sklearn")
        node = SubstitutedSplitTests.from_parent(parent, path=module_path)
        node.add_marker(pytest.mark.slow)
        return node
    return None


@pytest.fixture(autouse=True)
def _reproducible_seeds(request, monkeypatch):
    """A splitter (or ``train_test_split``) given no seed draws one from the
    operating system; here it draws from a sequence keyed by the test's id,
    so each such splitter still gets a seed of its own and every run of a
    test sees the same rows (its outcome, and so the list of differences,
    does not change from run to run)."""
    from samplegen import model_selection as ms
    count = itertools.count()

    def drawn():
        key = f"{request.node.nodeid}#{next(count)}".encode()
        return int.from_bytes(hashlib.sha256(key).digest()[:8], "little")
    monkeypatch.setattr(ms, "fresh_seed", drawn)


def pytest_generate_tests(metafunc):
    """scikit-learn's ``global_random_seed`` fixture at its default seed, 42
    (its own conftest, which defines it, is not loaded here)."""
    if "global_random_seed" in metafunc.fixturenames:
        metafunc.parametrize("global_random_seed", [42])
