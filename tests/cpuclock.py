"""The machine's CPU seconds per test, beside its wall time: a pytest plugin
(``python -m tests.run --cpu``, or ``pytest -p tests.cpuclock``) that adds a
``cpu_seconds`` property to each test in the junit report, which
``python -m tests.profile`` then shows per file.

The seconds are the whole machine's (``/proc/stat``), not the test process's:
a test's work in the JVMs it drives (HDFS, YARN containers, HiveServer2,
Spark) and in the processes it starts counts, and so does anything else
running meanwhile.  Read them for one stream alone (``--only``) on an
otherwise quiet machine.  Work under ``nice`` is left out, so a niced job
beside the suite does not count."""
import os

import pytest

_TICK = os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds():
    """The CPU seconds the machine has spent since boot, niced work and idle
    time left out (user, system, interrupts)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:8]]
    user, _nice, system, _idle, _iowait, irq, softirq = fields
    return (user + system + irq + softirq) / _TICK


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_START] = machine_cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    if call.when == "teardown" and _START in item.stash:
        item.user_properties.append(
            ("cpu_seconds", f"{machine_cpu_seconds() - item.stash[_START]:.2f}"))
    yield


_START = pytest.StashKey[float]()
