"""Where a test run's time went, per file: ``python -m tests.profile
JUNIT.xml... [--top N]`` on the reports of ``pytest --junitxml=JUNIT.xml``
(``make test`` writes one per stream: ``work/test-reports/*.xml``).  Prints each test
file's time (set-up, call and tear-down of its tests, fixtures included),
its number of tests, its slowest test, and its share of the summed time."""
import argparse
import collections
import sys
import xml.etree.ElementTree as ET


def cases(path):
    """``[(seconds, test file, test name)]`` of a junit XML report (OSError,
    ET.ParseError for one that cannot be read)."""
    return [(float(case.get("time") or 0.0), file_of(case.get("classname", "")),
             case.get("name", "")) for case in ET.parse(path).iter("testcase")]


def per_file(paths):
    """``{file: [seconds, tests, (slowest seconds, slowest name)]}`` of junit
    XML reports."""
    files = collections.defaultdict(lambda: [0.0, 0, (0.0, "")])
    for seconds, name, test in (case for path in paths for case in cases(path)):
        entry = files[name]
        entry[0] += seconds
        entry[1] += 1
        entry[2] = max(entry[2], (seconds, test))
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
    print(f"{'seconds':>8} {'share':>6} {'tests':>6}  file (slowest test)")
    for name, (seconds, count, slowest) in sorted(files.items(), key=lambda kv: -kv[1][0])[
            :args.top]:
        print(f"{seconds:8.1f} {seconds / total:6.1%} {count:6d}  {name} "
              f"({slowest[1]}: {slowest[0]:.1f} s)")
    print(f"{total:8.1f} {1:6.1%} {sum(e[1] for e in files.values()):6d}  all files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
