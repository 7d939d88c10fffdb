"""One real HiveServer2 (the Spark Thrift Server from pyspark) per test session.

``hive_server`` starts it on a free port of 127.0.0.1 with its metastore,
warehouse and scratch space in a temporary directory, and stops it when the
session ends.  ``beeline`` runs a script through the hive-beeline jar of the
same pyspark distribution.
"""
import os
import subprocess

import pytest

from samplegen.hive import server
from samplegen.jobs import daemons


@pytest.fixture(scope="session")
def hive_server(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("hive-server"))
    files = str(tmp_path_factory.mktemp("hive-files"))
    port = daemons.free_port()
    server.up(workdir, port, log=lambda message: None)
    saved = {k: os.environ.get(k) for k in ("SAMPLEGEN_HIVE_FILES", "SAMPLEGEN_HIVE_URL")}
    os.environ["SAMPLEGEN_HIVE_FILES"] = files   # never ~/.cache in tests
    os.environ.pop("SAMPLEGEN_HIVE_URL", None)
    try:
        yield {"url": f"hive://127.0.0.1:{port}/default", "port": port, "files": files,
               "workdir": workdir}
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        server.down(workdir, log=lambda message: None)


def beeline(port, script_path, hivevars=None, timeout=300):
    """Run a script with beeline; returns (exit status, stdout, stderr)."""
    jars = os.path.join(server.spark_home(), "jars", "*")
    cmd = ["java", "-cp", jars, "org.apache.hive.beeline.BeeLine",
           "-u", f"jdbc:hive2://127.0.0.1:{port}/default", "-n", "samplegen",
           "--silent=true", "--outputformat=tsv2", "--showHeader=false"]
    for key, value in (hivevars or {}).items():
        cmd += ["--hivevar", f"{key}={value}"]
    cmd += ["-f", str(script_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr
