"""Crash safety: real ``samplegen tbs run`` processes killed with SIGKILL, then
rerun, end with exactly the STATE (every byte) of an uninterrupted run.

Two ways of killing: at random moments (a fixed-seed schedule of delays
spread over a whole run), and at the protocol's critical points (after the
tasks wrote their files but before the commit, between the commits of one
job, right after a commit, in the middle of garbage collection), where the
process kills itself through the SAMPLEGEN_TBS_CRASH hook.  After every kill
the STATE must be readable and consistent (its sample has the size its
newest commit records)."""
import math
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from samplegen.tbs.stream import current_sample, status
from tests.conftest import tree_digest
from tests.tbs_jobs_util import write_batches

pytestmark = pytest.mark.slow

SIZES = [300, 120, 0, 420, 250, 380, 90, 310, 270, 200, 330, 150, 260, 410, 180, 240, 350, 60,
         290, 220]
PARAMS = ["--partitions", "3", "--compact-every", "3", "--keep-deltas", "4", "--seed", "5"]
ALGORITHMS = {
    "rtbs-poly": ["--algorithm", "rtbs", "--decay", "poly", "--power", "2", "--shift", "1",
                  "--size", "300", "--max-weight", "600", "--delta1", "0.2", "--delta2", "5"],
    "rtbs-exp": ["--algorithm", "rtbs", "--decay", "exp", "--lambda", "0.2", "--size", "400"],
}


def _cli(batches, state, name, per_job=2):
    return [sys.executable, "-m", "samplegen", "tbs", "run", batches, state, "-q",
            "--batches-per-job", str(per_job)] + PARAMS + ALGORITHMS[name]


def _env(**extra):
    env = dict(os.environ, SAMPLEGEN_TBS_FSYNC="0")
    env.pop("SAMPLEGEN_TBS_CRASH", None)
    env.update(extra)
    return env


def _consistent(state):
    """A killed run leaves a STATE that reads back whole (or none at all)."""
    if (not os.path.isdir(os.path.join(state, "commits"))
            or not os.listdir(os.path.join(state, "commits"))):
        return 0
    info = status(state)
    assert len(current_sample(state)) == info["sample_size"]
    return info["batches"]


@pytest.fixture(scope="module")
def batches(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("batches"))
    write_batches(folder, SIZES, dirs=(4, 7))
    return folder


def _reference(batches, tmp_path, name):
    state = str(tmp_path / f"ref-{name}")
    started = time.perf_counter()
    proc = subprocess.run(_cli(batches, state, name), env=_env(), capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return tree_digest(state), time.perf_counter() - started


@pytest.fixture(scope="module")
def references(batches, tmp_path_factory):
    """``references(name)``: the digest of an uninterrupted run of *name*
    over the batches and its duration (:func:`_reference`), each run once
    for the module (three tests compare with rtbs-poly's)."""
    done = {}

    def reference(name):
        if name not in done:
            done[name] = _reference(batches, tmp_path_factory.mktemp("ref"), name)
        return done[name]
    return reference


#: kills at random moments: enough to find, with probability POWER, a defect
#: that a kill reveals only inside a window of WINDOW of a run's working time
#: (the commit protocol's own critical points are killed at on purpose below)
WINDOW, POWER = 0.25, 0.95
KILLS = math.ceil(math.log(1 - POWER) / math.log(1 - WINDOW))     # 11


def test_sigkill_at_random_moments(tmp_path, batches, references):
    """Runs of one batch per job (a commit and a garbage collection after every
    batch; every other run with its partitions on threads), killed after
    delays drawn uniformly between the end of the imports and the duration of
    a whole run; each cycle starts from an empty STATE and kills until a run
    completes.

    Power: a defect revealed only by a kill inside a window covering a
    fraction WINDOW = 1/4 of a run's working time (say a quarter of each
    one-batch job; revealed: a rerun that does not give the uninterrupted
    run's bytes, or a STATE that does not read back) is missed by one
    uniformly timed kill with probability 3/4, by n independent kills with
    (3/4)^n; n = KILLS = 11 kills find it with
    probability 1 - 0.75^11 = 0.958 >= POWER = 0.95.  No false alarms: the
    checks are exact (bytes, sizes), so a failure is always a defect.  At
    least 4 distinct batch counts strictly inside the run after a kill
    show that the kills hit runs in the middle of their work."""
    digest, duration = references("rtbs-poly")
    rng = np.random.default_rng(2024)
    kills, progress = 0, []
    for cycle in range(40):  # until enough kills hit runs mid-work (timing varies with load)
        state = str(tmp_path / f"s{cycle}")
        for attempt in range(10):
            # killed while tasks run on threads, too
            threads = ["--num-cores", "3" if attempt % 2 else "1"]
            proc = subprocess.Popen(_cli(batches, state, "rtbs-poly", per_job=1) + threads,
                                    env=_env(), stderr=subprocess.PIPE)
            time.sleep(float(rng.uniform(0.5, duration)))
            if proc.poll() is not None:
                assert proc.returncode == 0, proc.stderr.read()
                break
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            progress.append(_consistent(state))
        final = subprocess.run(_cli(batches, state, "rtbs-poly"), env=_env(), capture_output=True,
                               text=True)
        assert final.returncode == 0, final.stderr
        assert tree_digest(state) == digest
        if kills >= KILLS and len({p for p in progress if 0 < p < len(SIZES)}) >= 4:
            break
    # the kills must have hit runs in the middle of their work, not only before or after it
    assert kills >= KILLS and len({p for p in progress if 0 < p < len(SIZES)}) >= 4, \
        (kills, progress)


CRASH_POINTS = ["after-tasks:1", "before-commit:2", "after-commit:1", "in-gc:2", "before-commit:1",
                "after-commit:3", "in-gc:1", "after-tasks:2"]


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_sigkill_at_every_critical_point(tmp_path, batches, references, name):
    _kill_at_every_critical_point(tmp_path, batches, references(name)[0], name)


def test_sigkill_then_lock_removed_by_hand(tmp_path, batches, references):
    """After each kill the lock file is deleted (as a user does on a shared
    filesystem for a run that died on another host): the next run cannot
    know from the lock that a run died, and must still find and delete what
    it left."""
    _kill_at_every_critical_point(tmp_path, batches, references("rtbs-poly")[0], "rtbs-poly",
                                  remove_lock=True)


def _kill_at_every_critical_point(tmp_path, batches, digest, name, remove_lock=False):
    state = str(tmp_path / "s")
    seen = []
    for point in CRASH_POINTS:
        proc = subprocess.run(_cli(batches, state, name), env=_env(SAMPLEGEN_TBS_CRASH=point),
                              capture_output=True, text=True)
        assert proc.returncode in (-signal.SIGKILL, 0), proc.stderr
        if proc.returncode == -signal.SIGKILL:
            seen.append(point)
            if remove_lock:
                os.remove(os.path.join(state, "_lock"))
        _consistent(state)
    final = subprocess.run(_cli(batches, state, name), env=_env(), capture_output=True, text=True)
    assert final.returncode == 0, final.stderr
    assert tree_digest(state) == digest
    assert len(seen) >= 6, seen
