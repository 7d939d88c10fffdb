"""The suite's own runner (tests/run.py): its streams split the tests
exactly, and it reads pytest's output and reports right."""
import itertools
import textwrap

import pytest

from tests import run


def test_every_test_is_in_exactly_one_stream():
    """For every combination of the markers the streams are chosen by, one
    stream's marker expression holds (pytest's -m grammar here is Python's
    and/or/not over marker names)."""
    names = ("hadoop", "spark", "hive", "mrjob", "slow", "beside_spark")
    for values in itertools.product((False, True), repeat=len(names)):
        marks = dict(zip(names, values))
        chosen = [name for name, expression in run.STREAMS
                  if eval(expression, {"__builtins__": {}}, marks)]
        assert len(chosen) == 1, (marks, chosen)
    # each Hive server in one stream only: Apache Hive's (on Hadoop), then the Spark Thrift
    # Server's; a Hadoop test that runs Spark beside the cluster, in Spark's stream
    off = dict(beside_spark=False)
    assert eval(run.STREAMS[0][1], {}, dict(off, hadoop=True, spark=True, hive=True))
    assert eval(run.STREAMS[1][1], {}, dict(off, hadoop=False, spark=False, hive=True))
    assert eval(run.STREAMS[1][1], {}, dict(hadoop=True, spark=True, hive=False,
                                            beside_spark=True))


def test_progress_summary_and_failures_are_read_from_a_stream_log(tmp_path):
    log = tmp_path / "s.log"
    assert run._progress(str(log)) is None            # not started yet
    log.write_text("....    [  9%]\n....F   [ 42%]\n..s")
    assert run._progress(str(log)) == 12
    assert run._failures(str(log)) == ""
    log.write_text(textwrap.dedent("""\
        ..F  [100%]
        =================================== FAILURES ===================================
        ___ test_x ___
        E   assert 1 == 2
        =========================== short test summary info ============================
        FAILED tests/test_a.py::test_x - assert 1 == 2
        ========================= 1 failed, 2 passed in 0.12s ==========================
        """))
    assert run._failures(str(log)).startswith("=====") and "assert 1 == 2" in run._failures(
        str(log))
    assert run._summary(str(log)) == "1 failed, 2 passed in 0.12s"


def test_the_slowest_tests_come_from_every_report(tmp_path):
    for name, cases in (("a", [("tests.test_a", "t1", 3.0), ("tests.test_a.TestK", "t2", 0.5)]),
                        ("b", [("tests.hostile.test_b", "t3", 7.25)])):
        body = "".join(f'<testcase classname="{c}" name="{n}" time="{t}"/>' for c, n, t in cases)
        (tmp_path / f"{name}.xml").write_text(
            f'<testsuites><testsuite name="pytest">{body}</testsuite></testsuites>')
    assert run.slowest([tmp_path / "a.xml", tmp_path / "b.xml", tmp_path / "missing.xml"],
                       count=2) == [(7.25, "tests/hostile/test_b.py::t3"),
                                    (3.0, "tests/test_a.py::t1")]


@pytest.mark.slow   # two pytest processes collecting
def test_the_streams_choose_apache_hive_tests_by_the_marker_conftest_gives_them():
    """``-m hadoop`` collects the Apache-Hive half of the Hive tests (marked
    by tests/conftest.py before pytest deselects), after the others, and
    ``-m "not hadoop"`` the Spark Thrift Server's half."""
    import subprocess
    import sys

    def collected(markers):
        proc = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p",
                               "no:cacheprovider", "-m", markers, "tests/hostile/test_hive.py",
                               "tests/test_hdfs.py"],
                              capture_output=True, text=True, cwd=run.ROOT)
        return [line for line in proc.stdout.splitlines() if "::" in line]

    cluster = collected(run.STREAMS[0][1])
    apache = [name for name in cluster if "[apache" in name]
    assert apache and cluster[-len(apache):] == apache
    assert any("test_hdfs.py" in name for name in cluster)
    spark = collected(run.STREAMS[1][1])
    beside = collected("beside_spark")
    assert spark and all("[apache" not in name for name in spark)
    assert [name for name in spark if "test_hdfs.py" in name] == beside   # moved on purpose


@pytest.mark.slow   # a pytest process
def test_cpu_seconds_reach_the_report_and_the_per_file_profile(tmp_path, capsys):
    """A test that keeps a core busy for 0.4 s gets at least that many of the
    machine's CPU seconds (the clock counts every process, so more is
    possible, never less), and the profile adds them up per file."""
    import subprocess
    import sys

    from tests import profile
    (tmp_path / "test_busy.py").write_text(
        "import time\n"
        "def test_busy():\n"
        "    end = time.process_time() + 0.4\n"
        "    while time.process_time() < end:\n"
        "        pass\n"
        "def test_idle():\n"
        "    pass\n")
    report = tmp_path / "r.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-p", "tests.cpuclock", f"--junitxml={report}", "--rootdir",
                           str(tmp_path), str(tmp_path / "test_busy.py")],
                          cwd=run.ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:]
    cpu = profile.cpu_seconds(report)
    assert cpu[("test_busy.py", "test_busy")] >= 0.35
    assert set(cpu) == {("test_busy.py", "test_busy"), ("test_busy.py", "test_idle")}
    (entry,) = profile.per_file([report]).values()
    assert entry[1] == 2 and entry[3] == pytest.approx(sum(cpu.values()))
    assert profile.main([str(report)]) == 0
    assert "cpu-s" in capsys.readouterr().out
