"""One local SparkContext per test session, for the tests marked ``spark``.

Import the fixture into a test module (``from .spark_fixtures import spark``);
the engine reuses the running context instead of starting its own.
"""
import pytest


@pytest.fixture(scope="session")
def spark():
    from jobs import spark_engine
    sc = spark_engine.start_context("local[2]", {"spark.ui.enabled": "false"}, quiet=True)
    yield sc
    sc.stop()
