"""Stand-in for scikit-learn's installed ``model_selection/tests/test_split.py``,
run against samplegen's splitters: the conftest beside this file collects
that module in place of this one (see conftest.py, and differences.py for
the tests samplegen fails on purpose)."""
