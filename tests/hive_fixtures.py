"""Real HiveServer2s, each once per test session: Apache Hive's own (on the
single-node Hadoop) and the Spark Thrift Server from pyspark.

``hive_server`` starts one on a free port of 127.0.0.1 with its metastore,
warehouse and scratch space in a temporary directory (Apache Hive: the
warehouse under a directory of its own on HDFS, removed afterwards), and
stops it when the tests of the next server begin or the session ends; every
test that uses it runs on both.  A module whose tests are about one server
alone narrows it with ``pytest.mark.parametrize("hive_server", ["apache"],
indirect=True)``: the same session's server, not one of its own (pytest keys
the fixture's instances by the parameter's value).  ``beeline`` runs a script
through the hive-beeline jar of the pyspark distribution.
"""
import os
import subprocess
import urllib.request

import pytest

from samplegen.hive import apache_server, server
from samplegen.jobs import daemons

from .cluster_jobs import QUICK_JVM


@pytest.fixture(scope="session", params=["apache", "spark"])
def hive_server(request, tmp_path_factory):
    """Each Hive test runs on Apache Hive's HiveServer2 (on the single-node
    Hadoop: its tables on HDFS, its queries on YARN) and on the Spark Thrift
    Server."""
    workdir = str(tmp_path_factory.mktemp("hive-server"))
    files = str(tmp_path_factory.mktemp("hive-files"))
    port = daemons.free_port()
    hadoop = root = None
    if request.param == "apache":
        hadoop = request.getfixturevalue("hadoop")
        root = f"/tmp/samplegen-test-hive-{os.getpid()}-engine"
        apache_server.up(workdir, port, log=lambda message: None,
                         hadoop_workdir=hadoop["workdir"], hdfs_root=root)
    else:
        server.up(workdir, port, log=lambda message: None)
    saved = {k: os.environ.get(k) for k in ("SAMPLEGEN_HIVE_FILES", "SAMPLEGEN_HIVE_URL")}
    os.environ["SAMPLEGEN_HIVE_FILES"] = files   # never ~/.cache in tests
    os.environ.pop("SAMPLEGEN_HIVE_URL", None)
    try:
        yield {"url": f"hive://127.0.0.1:{port}/default", "port": port, "files": files,
               "workdir": workdir, "kind": request.param,
               # Apache Hive: the cluster, and the server's own directory on HDFS
               "hadoop_workdir": hadoop and hadoop["workdir"],
               "hdfs_port": hadoop and hadoop["hdfs_port"], "root": root,
               "beeline": os.path.join(workdir, "bin", "beeline") if hadoop else None}
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if request.param == "apache":
            apache_server.down(workdir, log=lambda message: None)
            req = urllib.request.Request(f"{hadoop['webhdfs']}{root}?op=DELETE&recursive=true"
                                         f"&user.name={os.environ.get('USER', 'root')}",
                                         method="DELETE")
            urllib.request.urlopen(req, timeout=30).close()
        else:
            server.down(workdir, log=lambda message: None)


def read_tables(execute, columns, tables, per_query=None):
    """The rows of *columns* (a select list) of each of *tables*, as sorted
    lists of tuples, read by UNION ALL queries of *per_query* tables each
    (all in one by default): one job on the server per query, not one per
    table.  *execute* runs a query and returns its rows."""
    per_query = per_query or len(tables) or 1
    out = [[] for _ in tables]
    for first in range(0, len(tables), per_query):
        query = "\nUNION ALL\n".join(f"SELECT {i} AS i, {columns} FROM {table}"
                                      for i, table in enumerate(tables[first:first + per_query],
                                                                first))
        for row in execute(query):
            out[row[0]].append(tuple(row[1:]))
    return [sorted(rows) for rows in out]


def beeline(port, script_path, hivevars=None, timeout=300):
    """Run a script with beeline (its JVM with the cluster's quick-start
    options, ``cluster_jobs.QUICK_JVM``); returns (exit status, stdout,
    stderr)."""
    jars = os.path.join(server.spark_home(), "jars", "*")
    cmd = ["java", *QUICK_JVM.split(), "-cp", jars, "org.apache.hive.beeline.BeeLine",
           "-u", f"jdbc:hive2://127.0.0.1:{port}/default", "-n", "samplegen",
           "--silent=true", "--outputformat=tsv2", "--showHeader=false"]
    for key, value in (hivevars or {}).items():
        cmd += ["--hivevar", f"{key}={value}"]
    cmd += ["-f", str(script_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr
