"""The whole suite in parallel streams: ``python -m tests.run [PYTEST_ARGS...]``
(``make test``).

The tests fall in three streams by their markers, and the streams run at the
same time, each a pytest process of its own:

* ``cluster`` -- the tests on the single-node Hadoop (marked ``hadoop``:
  HDFS, YARN, Apache Hive on Tez).  Its jobs run one after another, each
  starting JVMs (YARN containers): about one core for the whole run, and
  the run's critical path.
* ``spark`` -- local Spark and the Spark Thrift Server (``spark`` or
  ``hive``, not ``hadoop``).
* ``rest`` -- everything else: the engines that need no JVM, the command
  line, the statistics.

Each server starts in one stream only (a HiveServer2 is a session fixture,
and two processes would start two), so the streams never share one but the
tests' Hadoop, which its sessions share by design (``tests/conftest.py``,
``hadoop``).  Each stream writes ``<reports>/<stream>.log`` and a junit report
``<reports>/<stream>.xml``; every 30 s one line shows how many tests each stream has run.
At the end come each stream's summary, the failures in full, the 15 slowest
tests of the run and its wall time; the exit status is the first failing
stream's (0 when all pass).  ``python -m tests.profile <reports>/*.xml``
shows where the time went, per file (with ``--cpu``, the machine's CPU
seconds too: ``tests/cpuclock.py``).
"""
import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import time

from tests import profile

#: (name, marker expression): every test is in exactly one stream
STREAMS = (
    ("cluster", "hadoop and not beside_spark"),
    ("spark", "((spark or hive) and not hadoop) or beside_spark"),
    ("rest", "not (hadoop or spark or hive or beside_spark)"),
)

#: the checkout the streams run in
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: seconds between progress lines
EVERY = 30

_OUTCOMES = re.compile(rb"^([.FEsxX]+)(?: *\[ *\d+%\])?$", re.M)


def _progress(log):
    """How many tests a stream has run so far: the outcome letters pytest -q
    has written to *log* (None before the first)."""
    try:
        with open(log, "rb") as f:
            found = _OUTCOMES.findall(f.read())
    except OSError:
        return None
    return sum(len(letters) for letters in found) if found else None


def _summary(log):
    """The last line of a stream's pytest output (its ``N passed in ...``)."""
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            lines = [line.rstrip() for line in f if line.strip()]
    except OSError:
        return "(no output)"
    return lines[-1].strip("= ") if lines else "(no output)"


def _failures(log):
    """The failures and errors sections of a stream's output (empty if none)."""
    with open(log, encoding="utf-8", errors="replace") as f:
        text = f.read()
    starts = [i for i in (text.find("= FAILURES ="), text.find("= ERRORS =")) if i >= 0]
    if not starts:
        return ""
    start = text.rfind("\n", 0, min(starts)) + 1
    return text[start:]


def slowest(reports, count=15):
    """The *count* slowest tests of junit *reports* (one a stream that died
    may not have written is passed over): ``[(seconds, name)]``."""
    found = []
    for report in reports:
        with contextlib.suppress(OSError, profile.ET.ParseError):
            found += [(seconds, f"{name}::{test}")
                      for seconds, name, test in profile.cases(report)]
    return sorted(found, reverse=True)[:count]


#: the package's source directories (setup.py's package_dir)
SOURCES = ("udfs", "jobs", "hive", "tbs", "samplegen")


def compile_sources():
    """Write the package's bytecode caches before the streams start.  The
    suite starts many fresh interpreters (the command line, mrjob's tasks,
    Spark's Python workers, documented examples), and each compiles every
    samplegen module it imports from source when no cache is there -- as with
    PYTHONDONTWRITEBYTECODE set, where no interpreter writes one.  A cache
    that an edit made stale is only passed over."""
    import compileall
    for name in SOURCES:
        compileall.compile_dir(os.path.join(ROOT, name), quiet=2)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.run", description=__doc__,
                                     allow_abbrev=False,   # the rest is for pytest
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reports", default="work/test-reports",
                        help="directory of the streams' logs and junit reports "
                             "(default work/test-reports)")
    parser.add_argument("--only", action="append", choices=[name for name, _ in STREAMS],
                        help="run only this stream (repeatable)")
    parser.add_argument("--cpu", action="store_true",
                        help="record the machine's CPU seconds per test in the junit "
                             "reports (tests/cpuclock.py; python -m tests.profile shows "
                             "them): meaningful for one stream alone on a quiet machine")
    args, pytest_args = parser.parse_known_args(argv)
    args.reports = os.path.abspath(args.reports)
    os.makedirs(args.reports, exist_ok=True)
    start = time.monotonic()
    compile_sources()
    running = {}
    for name, markers in STREAMS:
        if args.only and name not in args.only:
            continue
        log, report = (os.path.join(args.reports, f"{name}.{ext}") for ext in ("log", "xml"))
        for path in (log, report):
            if os.path.exists(path):
                os.remove(path)
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", markers,
                 f"--junitxml={report}", *(["-p", "tests.cpuclock"] if args.cpu else []),
                 *pytest_args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=ROOT)
        running[name] = (proc, log, report)
    print(f"tests.run: {len(running)} streams ({', '.join(running)}); logs in {args.reports}/",
          flush=True)
    ended, last = {}, time.monotonic()
    try:
        while len(ended) < len(running):
            time.sleep(0.5)
            for name, (proc, log, _) in running.items():
                if name not in ended and proc.poll() is not None:
                    ended[name] = (proc.returncode, time.monotonic() - start)
                    print(f"tests.run: {name} ended after {ended[name][1]:.0f} s: "
                          f"{_summary(log)}", flush=True)
            if time.monotonic() - last >= EVERY and len(ended) < len(running):
                last = time.monotonic()
                states = []
                for name, (_, log, _) in running.items():
                    if name in ended:
                        continue
                    done = _progress(log)
                    states.append(f"{name} {'starting' if done is None else f'{done} done'}")
                print(f"tests.run: {last - start:.0f} s: {', '.join(states)}", flush=True)
    except KeyboardInterrupt:     # pytest answers SIGINT by running its fixtures' teardowns
        for proc, _, _ in running.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        for proc, _, _ in running.values():
            proc.wait()
        print("tests.run: interrupted", file=sys.stderr)
        return 130
    status = 0
    for name, (_, log, _) in running.items():
        code = ended[name][0]
        if code not in (0, 5):   # 5: no test selected (a PYTEST_ARGS -k that misses a stream)
            failures = _failures(log)
            print(f"\n{'=' * 30} stream {name}: status {code} {'=' * 30}")
            print(failures or open(log, encoding="utf-8", errors="replace").read()[-8000:])
            status = status or code
    print(f"\n{'=' * 25} slowest 15 tests of the run {'=' * 25}")
    for seconds, name in slowest([report for _, _, report in running.values()]):
        print(f"{seconds:8.2f}s {name}")
    print()
    for name, (_, log, _) in running.items():
        print(f"{name:>8}: {ended[name][1]:6.0f} s  {_summary(log)}")
    print(f"tests.run: {time.monotonic() - start:.0f} s wall, status {status}", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
