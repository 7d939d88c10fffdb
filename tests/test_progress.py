"""Progress (jobs/progress.py): a bar on a terminal, a line now and then in
a log, nothing when quiet or when the work is quick; and what the command
line chooses on a pseudo-terminal, in a log and with -q."""
import io
import sys

import pytest

from samplegen.jobs.progress import Progress


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def run(mode, steps, every=10.0, after=2.0, total=100):
    clock, out = Clock(), io.StringIO()
    with Progress(total, "blocks", "job", mode=mode, stream=out, every=every, after=after,
                  clock=clock) as p:
        for t, done in steps:
            clock.now = t
            p.update(done)
    return out.getvalue()


def test_quick_work_shows_nothing():
    for mode in ("bar", "log", "off"):
        assert run(mode, [(0.5, 50), (1.5, 100)]) == ""


def test_bar_redraws_in_place_with_rate_and_time_left():
    text = run("bar", [(3.0, 30), (3.1, 31), (6.0, 60), (10.0, 100)])
    frames = text.split("\r")[1:]
    assert len(frames) == 3            # 3.1 s is within 0.2 s of the frame at 3 s
    assert frames[0].startswith("job: [#######.................]  30% 30/100 blocks")
    assert "10.0 blocks/s" in frames[0] and "7 s left" in frames[0]
    assert "100% 100/100 blocks" in frames[-1] and "in 10 s" in frames[-1]
    assert text.endswith("\n") and text.count("\n") == 1


def test_log_writes_a_whole_line_every_ten_seconds():
    steps = [(t, min(100, 3 * t)) for t in range(1, 40)]
    lines = run("log", steps).splitlines()
    assert [line.split(":")[1].split("%")[0].strip() for line in lines] == \
        ["30", "60", "90", "100"]
    assert "\r" not in "".join(lines) and "[" not in lines[0]


def test_off_and_bad_modes():
    assert run("off", [(30.0, 50), (60.0, 100)]) == ""
    with pytest.raises(ValueError, match="mode"):
        Progress(10, mode="loud")


def test_a_broken_stream_turns_it_off():
    class Broken(io.StringIO):
        def write(self, text):
            raise OSError("gone")

    clock = Clock()
    p = Progress(10, mode="bar", stream=Broken(), clock=clock)
    clock.now = 5.0
    p.update(5)
    p.close()
    assert p.mode == "off"


def test_hadoop_map_percentages_feed_the_progress():
    """The MapReduce engine follows mrjob's `map N% reduce M%` lines of the
    first step (the input blocks read)."""
    import logging

    from samplegen.jobs.engines.mapreduce import _MapShare

    p = Progress(200, mode="off")
    share = _MapShare(p)

    def say(text):
        share.emit(logging.LogRecord("mrjob.hadoop", logging.INFO, "", 0, text, None, None))

    say("Running step 1 of 2...")
    say("  map 0% reduce 0%")
    say("  map 45% reduce 0%")
    assert p.done == 90
    say("  map 100% reduce 30%")
    say("Running step 2 of 2...")
    say("  map 10% reduce 0%")      # the composition step: not input blocks
    assert p.done == 200


@pytest.mark.spark
def test_spark_runs_feed_the_progress_and_leave_the_job_group(spark, tmp_path):
    """The Spark engine follows its input stage's finished tasks (the last
    update is every input block; updates never go back) and gives the
    context's job group back."""
    from samplegen.jobs import driver

    from .conftest import make

    src = make(tmp_path, rows=4000, cols=8, block_size=100)
    seen = []

    class Recording(Progress):
        def update(self, done):
            seen.append(done)
            super().update(done)

    def log(message, progress=False):
        pass

    log.progress = lambda total, unit="blocks", label="": Recording(total, unit, label,
                                                                   mode="off")
    spark.setJobGroup("mine", "the user's own")
    driver.generate(src, str(tmp_path / "run"), "holdout", {"ratio": 0.5}, 3, runner="spark",
                    options={"spark_conf": ["spark.samplegen.inputPartitions=8"]}, log=log)
    assert seen and seen[-1] == 40 and seen == sorted(seen)
    assert spark.getLocalProperty("spark.jobGroup.id") == "mine"
    spark.setLocalProperty("spark.jobGroup.id", None)

    # a slower job, followed closely: the shares in between are reported
    import time

    from samplegen.jobs.engines.spark.job import _following

    seen.clear()
    with _following(spark, Recording(8, mode="off"), every=0.05):
        spark.parallelize(range(8), 8).map(lambda x: time.sleep(0.3) or x).collect()
    assert any(0 < done < 8 for done in seen), seen


SLOW_UDF = '''
import time
import numpy as np
from samplegen.udfs import Occurrences

def slow(start, stop, rng, params):
    time.sleep(0.6)
    n = stop - start
    return Occurrences(np.arange(n), np.zeros(n, np.int64), rng.lane((0x100, 0, 0), start, stop))

slow.sample_names = lambda params, n_rows: ["all"]
'''


def _command(tmp_path, *extra):
    src = tmp_path / "m"
    from samplegen.jobs import driver
    driver.make_matrix(str(src), 400, 3, 100, seed=1)
    (tmp_path / "slowudf.py").write_text(SLOW_UDF)
    return [sys.executable, "-m", "samplegen", "sample", str(src), str(tmp_path / "run"),
            "--udf", "slowudf:slow", "--seed", "1", "--runner", "inline", "--mrjob-conf", "",
            *extra]


@pytest.mark.slow
def test_the_command_line_shows_progress_on_a_terminal_in_a_log_and_not_when_quiet(tmp_path):
    """A run of about 2.5 s: on a pseudo-terminal a bar redrawn in place, in a
    pipe whole lines, with -q nothing (the run's result line included)."""
    import os
    import pty
    import subprocess

    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    cmd = _command(tmp_path)
    logged = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tmp_path)
    assert logged.returncode == 0, logged.stderr
    assert "\r" not in logged.stderr
    assert "samplegen: slowudf:slow: 100% 4/4 input blocks" in logged.stderr

    subprocess.run(["rm", "-rf", str(tmp_path / "run")], check=True)
    main, child = pty.openpty()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=child, env=env, cwd=tmp_path)
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:  # the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    assert proc.wait() == 0
    os.close(main)
    text = b"".join(chunks).decode()
    assert "\r" in text and "[########################] 100% 4/4 input blocks" in text

    subprocess.run(["rm", "-rf", str(tmp_path / "run")], check=True)
    quiet = subprocess.run(cmd + ["-q"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert quiet.returncode == 0 and quiet.stderr == ""
