"""A local HiveServer2 for development and tests: Apache Hive's own on the
single-node Hadoop (:mod:`samplegen.hive.apache_server`, the default), or the
Spark Thrift Server that ships in the pyspark distribution (``--server
spark``, the light one: no Hadoop, no Maven).

    python -m samplegen.hive.server up     [--server apache|spark] [--port 10000] [--workdir DIR]
    python -m samplegen.hive.server down   [--server apache|spark] [--workdir DIR]
    python -m samplegen.hive.server status [--server apache|spark] [--workdir DIR]
    python -m samplegen.hive.server env    (the export lines that put Apache beeline on PATH)

``--server`` defaults to ``$HIVE_SERVER``, else ``apache``; the work
directory to ``work/hive`` (Apache Hive) or ``work/hive-spark`` (Spark).

For the Spark Thrift Server, ``up`` starts ``spark-submit --class
org.apache.spark.sql.hive.thriftserver.HiveThriftServer2`` bound to 127.0.0.1
with a Derby metastore, the warehouse, Spark's scratch space and the log in
the work directory, and waits until the port answers.  It is idempotent: a
server already running from that work directory is left alone.  ``down``
stops the process recorded in ``<workdir>/server.pid`` (and only that one).

TRANSFORM scripts run with the server's ``PATH``; ``up`` puts this Python's
``bin`` directory first, so ``python3`` in a script is the interpreter that
has numpy (the same one that runs samplegen).
"""
import argparse
import os
import subprocess
import sys
import time

from samplegen.jobs import cluster
from samplegen.jobs.daemons import alive, check_java, port_answers, stop, stop_recorded, tail

from . import apache_server
from .apache_server import ServerError

CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
DEFAULT_PORT = 10000
STARTUP_SECONDS = 240
SERVERS = ("apache", "spark")
WORKDIRS = {"apache": apache_server.DEFAULT_WORKDIR, "spark": os.path.join("work", "hive-spark")}


def spark_home():
    try:
        import pyspark
    except ImportError:
        raise ServerError("pyspark is not installed: run 'make setup'") from None
    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _paths(workdir):
    workdir = os.path.abspath(workdir)
    return {"dir": workdir, "pid": os.path.join(workdir, "server.pid"),
            "port": os.path.join(workdir, "server.port"),
            "log": os.path.join(workdir, "server.log")}


def _ours(pid, workdir):
    """Is *pid* the Thrift server started from *workdir*?"""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read()
    except OSError:
        return alive(pid)
    return CLASS.encode() in cmd and workdir.encode() in cmd


def read_state(workdir):
    """``(pid, port)`` of a live server started from *workdir*, or None."""
    p = _paths(workdir)
    try:
        pid = int(open(p["pid"]).read().strip())
        port = int(open(p["port"]).read().strip())
    except (OSError, ValueError):
        return None
    if alive(pid) and _ours(pid, p["dir"]):
        return pid, port
    return None


def command(workdir, port, master="local[2]", driver_memory="1g", extra_conf=()):
    p = _paths(workdir)
    d = p["dir"]
    conf = {
        "spark.sql.warehouse.dir": os.path.join(d, "warehouse"),
        "spark.driver.extraJavaOptions": f"-Dderby.system.home={d}",
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={os.path.join(d, 'metastore_db')};create=true",
        "spark.local.dir": os.path.join(d, "tmp"),
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "4",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
    }
    conf.update(dict(extra_conf))
    cmd = [os.path.join(spark_home(), "bin", "spark-submit"), "--class", CLASS,
           "--master", master, "--name", "samplegen-hive", "--driver-memory", driver_memory]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd += ["--hiveconf", f"hive.server2.thrift.port={port}",
            "--hiveconf", "hive.server2.thrift.bind.host=127.0.0.1",
            "spark-internal"]
    return cmd


def up(workdir, port=DEFAULT_PORT, timeout=STARTUP_SECONDS, log=print, **kwargs):
    """Start the server (unless one from *workdir* runs); returns ``(pid, port)``."""
    p = _paths(workdir)
    state = read_state(workdir)
    if state is not None:
        if port_answers(state[1]):
            log(f"HiveServer2 already running on 127.0.0.1:{state[1]} (pid {state[0]})")
            return state
        return _wait(state[0], state[1], p, timeout, log)
    check_java("the local HiveServer2 (Spark Thrift Server)", ServerError)
    if port_answers(port):
        raise ServerError(f"port {port} on 127.0.0.1 is already in use by another process; "
                          "choose another with HIVE_PORT")
    for sub in ("warehouse", "tmp"):
        os.makedirs(os.path.join(p["dir"], sub), exist_ok=True)
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env.pop("SPARK_CONF_DIR", None)
    with open(p["log"], "ab") as logf:
        proc = subprocess.Popen(command(p["dir"], port, **kwargs), cwd=p["dir"], env=env,
                                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                start_new_session=True)
    with open(p["pid"], "w") as f:
        f.write(f"{proc.pid}\n")
    with open(p["port"], "w") as f:
        f.write(f"{port}\n")
    log(f"starting HiveServer2 (Spark Thrift Server) on 127.0.0.1:{port}, pid {proc.pid}, "
        f"log {p['log']}")
    return _wait(proc.pid, port, p, timeout, log, proc)


def _wait(pid, port, p, timeout, log, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if port_answers(port):
            log(f"HiveServer2 is up on 127.0.0.1:{port}")
            return pid, port
        if proc is not None and proc.poll() is not None or not alive(pid):
            raise ServerError("HiveServer2 exited during startup; last log lines:\n"
                              + tail(p["log"]))
        time.sleep(1.0)
    stop(pid)
    raise ServerError(f"HiveServer2 did not answer on port {port} within {timeout} s "
                      f"(see {p['log']})")


def down(workdir, log=print):
    """Stop the server started from *workdir*, if it runs."""
    p = _paths(workdir)
    stop_recorded(read_state(workdir), (p["pid"], p["port"]), "HiveServer2", p["dir"], log)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m samplegen.hive.server",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "down", "status", "env"))
    parser.add_argument("--server", choices=SERVERS,
                        default=os.environ.get("HIVE_SERVER") or "apache")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--port", type=int, default=int(os.environ.get("HIVE_PORT",
                                                                        DEFAULT_PORT)))
    parser.add_argument("--timeout", type=float, default=None,
                        help="seconds to wait for the start (default 300 for Apache Hive, 240 "
                        "for Spark)")
    parser.add_argument("--driver-memory", default="1g", help="Spark's driver (--server spark)")
    parser.add_argument("--hadoop-workdir", default=os.environ.get("HADOOP_WORK",
                                                                   cluster.DEFAULT_WORKDIR))
    parser.add_argument("--hdfs-root", default=apache_server.DEFAULT_HDFS_ROOT,
                        help="HDFS directory of the warehouse and scratch space (Apache Hive)")
    args = parser.parse_args(argv)
    if args.server not in SERVERS:
        parser.error(f"HIVE_SERVER must be one of {', '.join(SERVERS)}, got {args.server!r}")
    workdir = args.workdir or WORKDIRS[args.server]
    apache = args.server == "apache"

    def log(message):
        sys.stderr.write(f"hive-server: {message}\n")
    try:
        if args.action == "up" and apache:
            apache_server.up(workdir, args.port, args.timeout or apache_server.STARTUP_SECONDS,
                             log, hadoop_workdir=args.hadoop_workdir, hdfs_root=args.hdfs_root)
        elif args.action == "up":
            up(workdir, args.port, args.timeout or STARTUP_SECONDS, log,
               driver_memory=args.driver_memory)
        elif args.action == "down":
            (apache_server.down if apache else down)(workdir, log)
        elif args.action == "env":
            print("\n".join(apache_server.env_lines(workdir, args.port)))
        else:
            state = (apache_server.read_state if apache else read_state)(workdir)
            if state is None:
                log("not running")
                return 1
            log(f"{'Apache HiveServer2' if apache else 'Spark Thrift Server'} running on "
                f"127.0.0.1:{state[1]} (pid {state[0]})")
    except ServerError as exc:
        sys.stderr.write(f"hive-server: error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
