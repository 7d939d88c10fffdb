"""Where a test run's time went, per file: ``python -m tests.profile
JUNIT.xml... [--top N]`` on the reports of ``pytest --junitxml=JUNIT.xml``
(``make test`` writes one per stream: ``work/test-reports/*.xml``).  Prints each test
file's time (set-up, call and tear-down of its tests, fixtures included),
its number of tests, its slowest test, and its share of the summed time;
with reports of ``python -m tests.run --cpu`` (``tests/cpuclock.py``), the
machine's CPU seconds beside them."""
import argparse
import collections
import sys
import xml.etree.ElementTree as ET


def cases(path):
    """``[(seconds, test file, test name)]`` of a junit XML report (OSError,
    ET.ParseError for one that cannot be read)."""
    return [case[:3] for case in _testcases(path)]


def cpu_seconds(path):
    """``{(test file, test name): machine CPU seconds}`` of a junit report
    written with ``tests/cpuclock.py`` (empty for one written without)."""
    return {(name, test): cpu for _, name, test, cpu in _testcases(path) if cpu is not None}


def _testcases(path):
    """``[(seconds, test file, test name, machine CPU seconds or None)]``:
    each test case of a junit XML report, read once."""
    out = []
    for case in ET.parse(path).iter("testcase"):
        cpu = next((float(p.get("value")) for p in case.iter("property")
                    if p.get("name") == "cpu_seconds"), None)
        out.append((float(case.get("time") or 0.0), file_of(case.get("classname", "")),
                    case.get("name", ""), cpu))
    return out


def per_file(paths):
    """``{file: [seconds, tests, (slowest seconds, slowest name), CPU seconds
    or None]}`` of junit XML reports."""
    files = collections.defaultdict(lambda: [0.0, 0, (0.0, ""), None])
    for seconds, name, test, cpu in (case for path in paths for case in _testcases(path)):
        entry = files[name]
        entry[0] += seconds
        entry[1] += 1
        entry[2] = max(entry[2], (seconds, test))
        if cpu is not None:
            entry[3] = (entry[3] or 0.0) + cpu
    return dict(files)


def file_of(classname):
    """The test file of a junit ``classname`` (``tests.test_x`` or, for a
    test class, ``tests.test_x.TestY``)."""
    parts = classname.split(".")
    while parts and parts[-1][:1].isupper():
        parts.pop()
    return "/".join(parts) + ".py"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m tests.profile", description=__doc__)
    parser.add_argument("reports", nargs="+", help="junit XML reports of pytest")
    parser.add_argument("--top", type=int, default=30, help="files to show (default 30)")
    args = parser.parse_args(argv)
    try:
        files = per_file(args.reports)
    except (OSError, ET.ParseError) as exc:
        print(f"tests.profile: error: cannot read a report: {exc}", file=sys.stderr)
        return 2
    total = sum(entry[0] for entry in files.values()) or 1.0
    with_cpu = any(entry[3] is not None for entry in files.values())

    def cpu(value):
        return "" if not with_cpu else "       -" if value is None else f"{value:8.1f}"

    print(f"{'seconds':>8} {'share':>6} {'tests':>6}{'   cpu-s' if with_cpu else ''}  "
          f"file (slowest test)")
    for name, (seconds, count, slowest, used) in sorted(files.items(),
                                                       key=lambda kv: -kv[1][0])[:args.top]:
        print(f"{seconds:8.1f} {seconds / total:6.1%} {count:6d}{cpu(used)}  {name} "
              f"({slowest[1]}: {slowest[0]:.1f} s)")
    used = sum(e[3] or 0.0 for e in files.values()) if with_cpu else None
    print(f"{total:8.1f} {1:6.1%} {sum(e[1] for e in files.values()):6d}{cpu(used)}  all files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
