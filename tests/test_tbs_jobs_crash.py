"""Crash safety: real ``samplegen tbs run`` processes killed with SIGKILL, then
rerun, end with exactly the STATE (every byte) of an uninterrupted run.

Two ways of killing: at random moments (a fixed-seed schedule of delays
spread over a whole run), and at the protocol's critical points (after the
tasks wrote their files but before the commit, between the commits of one
job, right after a commit, in the middle of garbage collection), where the
process kills itself through the SAMPLEGEN_TBS_CRASH hook.  After every kill
the STATE must be readable and consistent (its sample has the size its
newest commit records)."""
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


def test_sigkill_at_random_moments(tmp_path, batches):
    """Runs of one batch per job (a commit and a garbage collection after every
    batch; every other run with its partitions on threads), killed after
    delays drawn uniformly between the end of the imports and the duration of
    a whole run; each cycle starts from an empty STATE and kills until a run
    completes."""
    digest, duration = _reference(batches, tmp_path, "rtbs-poly")
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
        if kills >= 12 and len({p for p in progress if 0 < p < len(SIZES)}) >= 4:
            break
    # the kills must have hit runs in the middle of their work, not only before or after it
    assert kills >= 12 and len({p for p in progress if 0 < p < len(SIZES)}) >= 4, (kills, progress)


CRASH_POINTS = ["after-tasks:1", "before-commit:2", "after-commit:1", "in-gc:2", "before-commit:1",
                "after-commit:3", "in-gc:1", "after-tasks:2"]


@pytest.mark.parametrize("name", list(ALGORITHMS))
def test_sigkill_at_every_critical_point(tmp_path, batches, name):
    _kill_at_every_critical_point(tmp_path, batches, name)


def test_sigkill_then_lock_removed_by_hand(tmp_path, batches):
    """After each kill the lock file is deleted (as a user does on a shared
    filesystem for a run that died on another host): the next run cannot
    know from the lock that a run died, and must still find and delete what
    it left."""
    _kill_at_every_critical_point(tmp_path, batches, "rtbs-poly", remove_lock=True)


def _kill_at_every_critical_point(tmp_path, batches, name, remove_lock=False):
    digest, _ = _reference(batches, tmp_path, name)
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
