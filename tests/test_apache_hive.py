"""Apache Hive's own HiveServer2 (``make hive-up``) on the single-node Hadoop:
a table on HDFS, a TRANSFORM script shipped with ADD FILE, Apache beeline
with ``--hivevar``, and the behaviours the HiveQL scripts depend on.

The session's Apache HiveServer2 (tests/hive_fixtures.py, ``hive_server``
narrowed to its Apache Hive parameter): one server start per test session,
shared with the Hive engine's tests; its warehouse under a directory of its
own on HDFS, removed after the session; the Tez runtime on HDFS is shared."""
import json
import os
import socket
import subprocess
import sys

import pytest

from samplegen.hive import apache_server, server

pytestmark = [pytest.mark.hive, pytest.mark.hadoop, pytest.mark.slow,
              pytest.mark.parametrize("hive_server", ["apache"], indirect=True)]

PROBE = r'''
import json, os, sys
import numpy
rows = [line.rstrip("\n").split("\t") for line in sys.stdin]
for k, v in rows:
    sys.stdout.write("\t".join([str(int(k) * 2), v, numpy.__name__, os.getcwd()]) + "\n")
'''


@pytest.fixture
def apache_hive(hive_server):
    """The session's Apache HiveServer2: its port, work directory, directory
    on HDFS, the cluster's HDFS port and its Apache beeline."""
    return {key: hive_server[key] for key in ("port", "workdir", "root", "hdfs_port", "beeline")}


def _cursor(port):
    from pyhive import hive
    return hive.connect(host="127.0.0.1", port=port, username="samplegen").cursor()


def _rows(cursor, statement):
    cursor.execute(statement)
    return cursor.fetchall()


def test_transform_with_add_file_on_an_hdfs_table(apache_hive, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    c = _cursor(apache_hive["port"])
    assert _rows(c, "SELECT version()")[0][0].startswith("4.0.1")
    c.execute("DROP TABLE IF EXISTS probe")
    c.execute("CREATE TABLE probe (k INT, v STRING) STORED AS TEXTFILE")
    location = [r for r in _rows(c, "DESCRIBE FORMATTED probe") if r[0].startswith("Location")]
    assert location[0][1].strip().startswith(
        f"hdfs://127.0.0.1:{apache_hive['hdfs_port']}{apache_hive['root']}/")
    c.execute("INSERT INTO probe VALUES (1, 'a'), (2, NULL), (3, '')")
    c.execute(f"ADD FILE {script}")
    rows = _rows(c, "SELECT TRANSFORM (k, v) USING 'python3 probe.py' "
                 "AS (k2 INT, v STRING, np STRING, cwd STRING) FROM probe")
    assert sorted(r[:3] for r in rows) == [(2, "a", "numpy"), (4, None, "numpy"), (6, "", "numpy")]
    # the script ran in a YARN container's working directory, where ADD FILE put it
    assert all("/appcache/application_" in r[3] for r in rows)


def test_null_reaches_a_script_as_backslash_n(apache_hive, tmp_path):
    script = tmp_path / "echo_repr.py"
    script.write_text("import sys\nfor line in sys.stdin:\n"
                      "    sys.stdout.write(repr(line.rstrip('\\n')) + '\\n')\n")
    c = _cursor(apache_hive["port"])
    c.execute("CREATE TABLE IF NOT EXISTS nulls (k INT, v STRING) STORED AS TEXTFILE")
    c.execute("INSERT OVERWRITE TABLE nulls VALUES (1, NULL)")
    c.execute(f"ADD FILE {script}")
    assert _rows(c, "SELECT TRANSFORM (k, v) USING 'python3 echo_repr.py' AS (line STRING) "
                 "FROM nulls") == [(repr("1\t\\N"),)]


def test_sort_by_in_a_subquery_is_dropped_unless_told_otherwise(apache_hive, tmp_path):
    """Hive 4 removes SORT BY (and the shuffle with it) from a subquery
    (``hive.remove.orderby.in.subquery``, default true): the shape of
    samplegen's HiveQL scripts.  With the setting off the script's input is
    grouped and sorted."""
    script = tmp_path / "collect.py"
    script.write_text("import json, sys\n"
                      "print(json.dumps([l.rstrip('\\n') for l in sys.stdin]))\n")
    c = _cursor(apache_hive["port"])
    c.execute("CREATE TABLE IF NOT EXISTS unsorted (k INT) STORED AS TEXTFILE")
    c.execute("INSERT OVERWRITE TABLE unsorted VALUES (3), (1), (2)")
    c.execute(f"ADD FILE {script}")
    query = ("SELECT TRANSFORM (k) USING 'python3 collect.py' AS (seen STRING) "
             "FROM (SELECT k FROM unsorted DISTRIBUTE BY k SORT BY k) s")
    seen = [json.loads(r[0]) for r in _rows(c, query)]
    assert seen == [["3", "1", "2"]]          # no shuffle: the table's order
    c.execute("SET hive.remove.orderby.in.subquery=false")
    seen = [json.loads(r[0]) for r in _rows(c, query)]
    assert sorted(sum(seen, [])) == ["1", "2", "3"]
    assert all(s == sorted(s) for s in seen)


def test_apache_beeline_runs_a_script_with_hivevars(apache_hive, tmp_path):
    c = _cursor(apache_hive["port"])
    c.execute("CREATE TABLE IF NOT EXISTS greet (k INT) STORED AS TEXTFILE")
    c.execute("INSERT OVERWRITE TABLE greet VALUES (1), (2)")
    script = tmp_path / "q.sql"
    script.write_text("SELECT k, '${hivevar:word}' FROM ${hivevar:table} ORDER BY k;\n")
    proc = subprocess.run([apache_hive["beeline"], "-u",
                           f"jdbc:hive2://127.0.0.1:{apache_hive['port']}/default",
                           "-n", "samplegen", "--silent=true", "--outputformat=tsv2",
                           "--showHeader=false", "--hivevar", "word=hello",
                           "--hivevar", "table=greet", "-f", str(script)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["1", "hello", "2", "hello"]


def test_sampling_from_hdfs_to_hdfs_on_apache_hive(apache_hive, hadoop, tmp_path, monkeypatch):
    """The Hive engine with its input, its zip and its output on HDFS: the
    block table over an hdfs:// matrix, the reducers in YARN containers
    writing hdfs:// blocks; the same bytes as the inline runner."""
    import uuid

    from samplegen.jobs import fs

    from .conftest import sample_digests
    env = hadoop["env"]
    for key, value in env.items():      # this process reaches HDFS as the cluster's clients do
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(fs, "_REMOTE", {})
    base = f"hdfs://{apache_hive['root']}/engine-{uuid.uuid4().hex[:8]}"
    url = f"hive://127.0.0.1:{apache_hive['port']}/default?files={base}/files"
    local = tmp_path / "m"

    def samplegen(*args):
        proc = subprocess.run([sys.executable, "-m", "samplegen", "-q", *map(str, args)],
                              capture_output=True, text=True, env=env, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
    for where in (local, f"{base}/m"):
        samplegen("make-matrix", where, "--rows", 2500, "--cols", 30, "--block-size", 100,
                  "--seed", 4)
    samplegen("kfold", f"{base}/m", f"{base}/kf", "--k", 3, "--seed", 9, "--runner", "hive",
              "--hive-url", url)
    samplegen("kfold", local, tmp_path / "inline", "--k", 3, "--seed", 9, "--runner", "inline",
              "--mrjob-conf", "")
    fs.get_fs(base).download(f"{base}/kf", str(tmp_path / "hive"))
    assert sample_digests(tmp_path / "hive") == sample_digests(tmp_path / "inline")


def test_up_again_leaves_the_running_server_alone(apache_hive):
    state = apache_server.read_state(apache_hive["workdir"])
    assert state is not None and state[1] == apache_hive["port"]
    again = apache_server.up(apache_hive["workdir"], apache_hive["port"],
                             log=lambda message: None)
    assert again == state


def test_the_server_listens_on_loopback_only(apache_hive):
    pid = apache_server.read_state(apache_hive["workdir"])[0]
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        target = os.readlink(f"/proc/{pid}/fd/{fd}") if os.path.islink(
            f"/proc/{pid}/fd/{fd}") else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    listening = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and fields[9] in inodes:   # LISTEN
                    listening.append(fields[1])
    assert listening
    loopback = ("0100007F:", "0000000000000000FFFF00000100007F:")
    assert all(a.startswith(loopback) for a in listening), listening


def test_a_port_in_use_is_refused_in_one_line(apache_hive, hadoop, tmp_path, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        code = server.main(["up", "--server", "apache", "--workdir", str(tmp_path / "w"),
                            "--hadoop-workdir", hadoop["workdir"],
                            "--port", str(s.getsockname()[1])])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith("hive-server: error: port ") and "in use" in err[-1]
