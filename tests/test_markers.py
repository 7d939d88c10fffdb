"""The markers tell the truth: a test that starts the single-node Hadoop,
however its fixtures reach it, is marked ``hadoop`` (tests/conftest.py), so
``pytest -m "not hadoop"`` starts no cluster."""
import os
import subprocess
import sys
import textwrap

import pytest

from tests import conftest, run


class _Item:
    nodeid = "tests/test_x.py::test_y"

    def __init__(self, marked):
        self.marked = marked

    def get_closest_marker(self, name):
        return object() if self.marked and name == "hadoop" else None


def test_an_unmarked_test_that_asks_for_the_cluster_fails_before_it_starts():
    conftest._SETTING_UP.append(_Item(marked=False))
    try:
        with pytest.raises(pytest.fail.Exception, match="is not marked hadoop"):
            conftest._check_marked_hadoop()
    finally:
        conftest._SETTING_UP.pop()
    conftest._SETTING_UP.append(_Item(marked=True))
    try:
        conftest._check_marked_hadoop()
    finally:
        conftest._SETTING_UP.pop()


@pytest.mark.slow   # collects the whole suite in a pytest process of its own
def test_not_hadoop_selects_no_test_whose_fixtures_start_the_cluster(tmp_path):
    """Over the whole suite: what ``-m "not hadoop"`` (and so the spark and
    rest streams) selects asks for neither the ``hadoop`` fixture, directly or
    through another fixture, nor Apache Hive's server."""
    (tmp_path / "reach.py").write_text(textwrap.dedent("""\
        def pytest_collection_finish(session):
            for item in session.items:
                callspec = getattr(item, "callspec", None)
                if ("hadoop" in getattr(item, "fixturenames", ()) or
                        callspec is not None and callspec.params.get("hive_server") == "apache"):
                    print("REACHES", item.nodeid)
        """))
    proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                           "-p", "reach", "-m", "not hadoop", "tests"],
                          capture_output=True, text=True, cwd=run.ROOT,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "collected" in proc.stdout and "REACHES" not in proc.stdout, proc.stdout[-3000:]
