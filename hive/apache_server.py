"""Apache Hive's own HiveServer2 on the single-node Hadoop, for development
and tests (``python -m samplegen.hive.server up``; the Spark Thrift Server is
the light alternative, ``--server spark``).

``up`` resolves the jars of ``conf/hive/pom.xml`` (Hive 4.0.1) and
``conf/hive/tez/pom.xml`` (Tez 0.10.4) with Maven (once per change of a pom,
as :mod:`samplegen.jobs.cluster` does for Hadoop), uploads the Tez runtime
to HDFS once, initialises an embedded Derby metastore with Hive's schema
tool on the first start, writes the configuration and an Apache ``beeline``
launcher (``<workdir>/bin/beeline``), starts
``org.apache.hive.service.server.HiveServer2`` bound to 127.0.0.1 and waits
until its port answers.  Queries run on the local YARN with Tez (one
application master shared by all sessions, started with the server), the
warehouse and scratch directories are on the local HDFS.  It is idempotent:
a server already running from the work directory is left alone.  ``down``
stops the process recorded in ``<workdir>/server.pid`` and nothing else.

*Why Tez rather than MapReduce:* both run here (``SET
hive.execution.engine=mr`` still works in a session), but on two cores a
MapReduce query pays a YARN application's start every time: a small
TRANSFORM query took 7-20 s on MapReduce and about 1 s on the shared Tez
session once it is up (its application master and one task container stay
warm), the first query after the start 10-14 s.

The layout of ``<workdir>``: ``conf/`` (``hive-site.xml``,
``tez-site.xml``, log settings; rewritten at each start), ``lib/`` and
``lib-tez/`` links to the jars, ``bin/beeline``, ``metastore/`` the Derby
database, ``scripts/`` Hive's schema scripts, ``logs/``
(``hiveserver2.log``, ``schematool.log``, ``derby.log``), ``tmp/`` (the
server's local scratch space, added resources, operation logs),
``server.pid``, ``server.port``.
"""
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.parse
import urllib.request

from samplegen.jobs import cluster, daemons
from samplegen.jobs.daemons import alive, check_java, port_answers, stop
from samplegen.udfs.errors import SamplegenError

CONF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "conf", "hive")
POM = os.path.join(CONF, "pom.xml")
TEZ_POM = os.path.join(CONF, "tez", "pom.xml")
CLASS = "org.apache.hive.service.server.HiveServer2"
SCHEMATOOL = "org.apache.hadoop.hive.metastore.tools.schematool.MetastoreSchemaTool"
BEELINE = "org.apache.hive.beeline.BeeLine"
DEFAULT_WORKDIR = os.path.join("work", "hive")
DEFAULT_PORT = 10000
#: the warehouse and scratch directories are under it on HDFS
DEFAULT_HDFS_ROOT = "/user/hive"
#: the Tez runtime on HDFS, one directory per set of jars, shared by every server
TEZ_LIB_ROOT = "/user/hive/lib"
STARTUP_SECONDS = 300

#: the server: parses and plans queries and runs the embedded metastore; the
#: work itself runs in YARN containers (resident size after start ~470 MB)
SERVER_HEAP = "-Xms128m -Xmx1g"
#: the server's, the Tez application master's and the task containers' JVM
#: options: the cluster's quick-start ones (one collector thread, the client
#: compiler only), which suit a single node's short queries
SERVER_FLAGS = cluster.JVM_FLAGS
QUICK = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"
#: Tez on YARN: the application master and each task container (MiB)
TEZ_AM_MB, TEZ_AM_HEAP = 512, "-Xmx384m"
TEZ_TASK_MB, TEZ_TASK_HEAP = 768, "-Xmx512m"


class ServerError(SamplegenError):
    """A local HiveServer2 that cannot start, in one line."""


# ---------------------------------------------------------------------------
# layout
# ---------------------------------------------------------------------------
def paths(workdir):
    """The files and directories of the server in *workdir* (a dict)."""
    d = os.path.abspath(workdir)
    join = os.path.join
    return {"dir": d, "conf": join(d, "conf"), "bin": join(d, "bin"), "lib": join(d, "lib"),
            "tezlib": join(d, "lib-tez"), "tez_cache": join(d, "tez"),
            "metastore": join(d, "metastore"), "home": join(d, "scripts"),
            "logs": join(d, "logs"), "log": join(d, "logs", "hiveserver2.log"),
            "tmp": join(d, "tmp"), "pid": join(d, "server.pid"), "port": join(d, "server.port"),
            "state": join(d, "server.json")}


def _write(path, text, mode=None):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)


def resolve(workdir, log=print):
    """``(server jars, Tez jars, schema scripts' tarball)``, resolved by Maven
    the first time (about 300 MB into ~/.m2) and whenever a pom changes."""
    p = paths(workdir)
    found = daemons.maven_classpath(POM, p["dir"], "the Apache Hive jars", ServerError, log,
                                    size="300 MB")
    tez = daemons.maven_classpath(TEZ_POM, p["tez_cache"], "the Tez jars", ServerError, log,
                                  size="30 MB")
    scripts = [f for f in found if f.endswith("-bin.tar.gz")]
    if not scripts:
        raise ServerError(f"the jars of {POM} have no metastore distribution (bin.tar.gz) "
                          "with the schema scripts")
    return [j for j in found if j.endswith(".jar")], tez, scripts[0]


def unpack_scripts(p, tarball):
    """``<home>/scripts/metastore/upgrade/derby``: Hive's schema scripts, from
    the standalone metastore's distribution (once per distribution)."""
    marker = os.path.join(p["home"], ".from")
    try:
        with open(marker) as f:
            if f.read() == tarball:
                return
    except OSError:
        pass
    shutil.rmtree(p["home"], ignore_errors=True)
    os.makedirs(p["home"])
    with tarfile.open(tarball) as tar:
        members = []
        for m in tar.getmembers():
            parts = m.name.split("/", 1)
            if len(parts) == 2 and parts[1].startswith("scripts/metastore/upgrade/derby/") \
                    and m.isfile():
                m.name = parts[1]
                members.append(m)
        tar.extractall(p["home"], members=members, filter="data")
    _write(marker, tarball)


# ---------------------------------------------------------------------------
# the local Hadoop
# ---------------------------------------------------------------------------
def hadoop(hadoop_workdir):
    """The paths of the running single-node Hadoop in *hadoop_workdir*;
    ServerError saying how to start it otherwise."""
    hp = cluster.paths(hadoop_workdir)
    alive_daemons = cluster.running(hadoop_workdir)
    state = cluster.health(hadoop_workdir)
    if len(alive_daemons) < len(cluster.DAEMONS) or state["safemode"] is not False \
            or not state["datanodes"] or not state["nodemanagers"]:
        raise ServerError(f"Apache HiveServer2 runs on the local Hadoop, which is not running "
                          f"(from {hp['dir']}): run 'make hadoop-up' first")
    return hp


def _webhdfs(hp, path, op, method="GET"):
    """*op* on *path* of the HDFS of the Hadoop whose paths are *hp*."""
    url = (f"http://127.0.0.1:{cluster.ports(hp['dir'])['namenode_http']}/webhdfs/v1"
           f"{urllib.parse.quote(path)}?op={op}&user.name={os.environ.get('USER', 'root')}")
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read().decode() or "null")
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise ServerError(f"WebHDFS {op} {path}: HTTP {exc.code}") from None
    except (OSError, ValueError) as exc:
        raise ServerError(f"WebHDFS {op} {path}: {exc}") from None


def tez_lib(hp, jars, log=print):
    """The HDFS directory of the Tez runtime (``tez.lib.uris``): *jars*
    uploaded once into a directory named by their digest.  Servers starting
    at the same time on one HDFS each upload into a directory of their own
    and the first whole copy is moved into place; the others are dropped."""
    import hashlib
    import uuid
    digest = hashlib.sha256("\n".join(sorted(os.path.basename(j) for j in jars))
                            .encode()).hexdigest()[:12]
    target = f"{TEZ_LIB_ROOT}/tez-{digest}"
    complete = f"{target}/_COMPLETE"
    if _webhdfs(hp, complete, "GETFILESTATUS") is not None:
        return target
    log(f"uploading the Tez runtime ({len(jars)} jars) to hdfs://{target}")
    hdfs = os.path.join(hp["bin"], "hdfs")
    env = {**os.environ, **cluster.env(hp["dir"]), "HADOOP_ROOT_LOGGER": "WARN,console"}
    tmp = f"{target}.tmp-{uuid.uuid4().hex[:12]}"

    def dfs(*cmd):
        return subprocess.run([hdfs, "dfs", *cmd], env=env, capture_output=True, text=True)

    def failed(cmd, proc):
        dfs("-rm", "-r", "-f", "-skipTrash", tmp)
        return ServerError(f"uploading the Tez runtime failed (hdfs dfs {cmd[0]}): "
                           + (proc.stderr.strip().splitlines() or ["?"])[-1])

    # A directory only ever becomes the target whole, its _COMPLETE written
    # first: a target without one was not made by an upload, and goes.
    if _webhdfs(hp, target, "GETFILESTATUS") is not None \
            and _webhdfs(hp, complete, "GETFILESTATUS") is None:   # in this order: no race
        dfs("-rm", "-r", "-f", "-skipTrash", target)
    for cmd in (["-mkdir", "-p", tmp], ["-put", "-f", *jars, tmp], ["-touchz", f"{tmp}/_COMPLETE"]):
        proc = dfs(*cmd)
        if proc.returncode != 0:
            raise failed(cmd, proc)
    # If another server's copy became the target meanwhile, ``-mv`` puts ours
    # inside it, and ours goes.
    proc = dfs("-mv", tmp, target)
    dfs("-rm", "-r", "-f", "-skipTrash", tmp, f"{target}/{os.path.basename(tmp)}")
    if _webhdfs(hp, complete, "GETFILESTATUS") is None:
        raise failed(["-mv"], proc)
    return target


# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------
def task_path():
    """PATH of the TRANSFORM scripts in the containers: this Python's bin
    directory first (``python3`` there has numpy), then the system's."""
    return os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin",
                            "/bin"])


def site_config(p, hp, port, hdfs_root, tez_uri):
    """``{file name: {key: value}}``: ``hive-site.xml`` and ``tez-site.xml``."""
    opens = cluster.ADD_OPENS
    root = hdfs_root.rstrip("/")
    hive = {
        # the embedded metastore: Derby in the work directory
        "javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={p['metastore']};create=false",
        "javax.jdo.option.ConnectionDriverName": "org.apache.derby.jdbc.EmbeddedDriver",
        "hive.metastore.uris": "",
        "hive.metastore.schema.verification": "true",
        "hive.metastore.warehouse.dir": f"{root}/warehouse",
        "hive.metastore.warehouse.external.dir": f"{root}/external",
        "hive.metastore.event.db.notification.api.auth": "false",
        # the server: loopback only, no web UI, the connecting user's name but
        # the server's own identity for files and jobs, no authorization
        "hive.server2.thrift.bind.host": "127.0.0.1",
        "hive.server2.thrift.port": port,
        "hive.server2.transport.mode": "binary",
        "hive.server2.webui.port": 0,
        "hive.server2.enable.doAs": "false",
        "hive.security.authorization.enabled": "false",
        "hive.server2.logging.operation.log.location": os.path.join(p["tmp"], "operation_logs"),
        # scratch space: on HDFS for jobs, in the work directory for the server
        "hive.exec.scratchdir": f"{root}/scratch",
        "hive.exec.local.scratchdir": os.path.join(p["tmp"], "scratch"),
        "hive.downloaded.resources.dir":
            os.path.join(p["tmp"], "resources", "${hive.session.id}_resources"),
        "hive.querylog.location": os.path.join(p["tmp"], "querylog"),
        "hive.user.install.directory": f"{root}/jars",
        "hive.query.results.cache.directory": f"{root}/results-cache",
        # execution: Tez on YARN, one shared session started with the server
        "hive.execution.engine": "tez",
        "hive.server2.tez.default.queues": "default",
        "hive.server2.tez.sessions.per.default.queue": 1,
        "hive.server2.tez.initialize.default.sessions": "true",
        "hive.tez.container.size": TEZ_TASK_MB,
        "hive.tez.java.opts": f"{TEZ_TASK_HEAP} {QUICK}",
        "hive.exec.mode.local.auto": "false",
        "hive.exec.submit.local.task.via.child": "false",
        "hive.exec.reducers.max": 4,
        "hive.stats.column.autogather": "false",
        # MapReduce, for sessions that SET hive.execution.engine=mr
        "mapreduce.map.env": f"HADOOP_MAPRED_HOME={hp['dir']},PATH={task_path()}",
        "mapreduce.reduce.env": f"HADOOP_MAPRED_HOME={hp['dir']},PATH={task_path()}",
    }
    tez = {
        "tez.lib.uris": tez_uri,
        "tez.use.cluster.hadoop-libs": "true",
        "tez.am.resource.memory.mb": TEZ_AM_MB,
        "tez.am.launch.cmd-opts": f"{TEZ_AM_HEAP} {QUICK} {opens}",
        "tez.task.resource.memory.mb": TEZ_TASK_MB,
        "tez.task.launch.cmd-opts": f"{QUICK} {opens}",
        "tez.task.launch.env": f"PATH={task_path()}",
        "tez.runtime.io.sort.mb": 64,
        "tez.staging-dir": f"{root}/tez-staging",
        # one task container stays warm between queries (a JVM start saved);
        # any other goes back to YARN after 5-10 s idle, for other jobs
        "tez.am.session.min.held-containers": 1,
        # an application master the server lost (a killed server) ends by itself
        "tez.session.am.dag.submit.timeout.secs": 3600,
        "tez.am.speculation.enabled": "false",
    }
    return {"hive-site.xml": hive, "tez-site.xml": tez}


LOG4J2 = """\
# written by python -m samplegen.hive.server up
status = WARN
name = {name}
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{2}}: %m%n
rootLogger.level = {level}
rootLogger.appenderRef.console.ref = console
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = WARN
logger.jetty.name = org.eclipse.jetty
logger.jetty.level = WARN
"""


def _classpath(p, hp, server=True):
    """Hive's jars before Hadoop's, as Hive's own launcher orders them."""
    parts = [p["conf"]] if server else []
    return ":".join(parts + [hp["conf"], f"{p['lib']}/*", f"{p['tezlib']}/*",
                             f"{hp['lib']}/*"])


def beeline_launcher(p, hp, java_home):
    """The text of ``bin/beeline``: Apache Hive's BeeLine with its jars."""
    return f"""#!/usr/bin/env bash
# Apache Hive's beeline for the HiveServer2 in {p['dir']}
# (written by python -m samplegen.hive.server up): beeline -u jdbc:hive2://127.0.0.1:PORT
export JAVA_HOME="${{JAVA_HOME:-{java_home}}}"
exec "$JAVA_HOME/bin/java" -Xmx256m {cluster.JVM_FLAGS} {cluster.ADD_OPENS} $BEELINE_OPTS \\
  -Dlog4j.configurationFile={p['conf']}/beeline-log4j2.properties \\
  -cp "{_classpath(p, hp, server=False)}" {BEELINE} "$@"
"""


def write_config(p, hp, port, hdfs_root, tez_uri, java):
    for key in ("conf", "bin", "logs", "tmp"):
        os.makedirs(p[key], exist_ok=True)
    for name, props in site_config(p, hp, port, hdfs_root, tez_uri).items():
        _write(os.path.join(p["conf"], name), cluster._xml(props).replace(
            "samplegen.jobs.cluster", "samplegen.hive.server"))
    _write(os.path.join(p["conf"], "hive-log4j2.properties"),
           LOG4J2.format(name="hiveserver2", level="INFO"))
    _write(os.path.join(p["conf"], "beeline-log4j2.properties"),
           LOG4J2.format(name="beeline", level="WARN"))
    _write(os.path.join(p["bin"], "beeline"),
           beeline_launcher(p, hp, os.path.dirname(os.path.dirname(java))), mode=0o755)


# ---------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------
def _java_command(p, hp, java, main, heap=SERVER_HEAP, flags=SERVER_FLAGS):
    return [java, *heap.split(), *flags.split(), *cluster.ADD_OPENS.split(),
            f"-Dderby.system.home={p['dir']}",
            f"-Dderby.stream.error.file={os.path.join(p['logs'], 'derby.log')}",
            f"-Dhive.home.dir={p['dir']}", "-cp", _classpath(p, hp), main]


def _env(p, hp, java):
    env = cluster.daemon_env(hp, java)
    env["PATH"] = task_path() + os.pathsep + env["PATH"]
    env["METASTORE_HOME"] = p["home"]
    env["HIVE_CONF_DIR"] = p["conf"]
    return env


def init_metastore(p, hp, java, log=print):
    """The metastore's schema, by Hive's schema tool, on the first start."""
    if os.path.isdir(p["metastore"]):
        return False
    log("initialising the metastore (Derby) with Hive's schema tool")
    start = time.time()
    url = f"jdbc:derby:;databaseName={p['metastore']};create=true"
    logfile = os.path.join(p["logs"], "schematool.log")
    with open(logfile, "ab") as out:
        proc = subprocess.run(_java_command(p, hp, java, SCHEMATOOL, heap="-Xmx512m",
                                            flags=cluster.JVM_FLAGS)
                              + ["-dbType", "derby", "-initSchema", "-url", url],
                              env=_env(p, hp, java), cwd=p["dir"], stdout=out, stderr=out,
                              stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        shutil.rmtree(p["metastore"], ignore_errors=True)
        raise ServerError("initialising the metastore failed: " + cluster.last_error(logfile))
    log(f"metastore initialised in {time.time() - start:.0f} s")
    return True


def _ours(pid, workdir):
    """Is *pid* the HiveServer2 started from *workdir*?"""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        return alive(pid)
    return CLASS.encode() in cmd and f"-Dhive.home.dir={workdir}".encode() in cmd


def read_state(workdir):
    """``(pid, port)`` of a live server started from *workdir*, or None."""
    p = paths(workdir)
    try:
        with open(p["pid"]) as f:
            pid = int(f.read().strip())
        with open(p["port"]) as f:
            port = int(f.read().strip())
    except (OSError, ValueError):
        return None
    if alive(pid) and _ours(pid, p["dir"]):
        return pid, port
    return None


def up(workdir=DEFAULT_WORKDIR, port=DEFAULT_PORT, timeout=STARTUP_SECONDS, log=print,
       hadoop_workdir=cluster.DEFAULT_WORKDIR, hdfs_root=DEFAULT_HDFS_ROOT):
    """Start the server from *workdir* (unless it runs) on the single-node
    Hadoop of *hadoop_workdir*, its warehouse and scratch space under
    *hdfs_root* on HDFS; returns ``(pid, port)``.  Two ``up`` of one work
    directory at a time take turns."""
    p = paths(workdir)
    with daemons.one_at_a_time(p["dir"]):
        return _up(p, port, timeout, log, hadoop_workdir, hdfs_root)


def _up(p, port, timeout, log, hadoop_workdir, hdfs_root):
    start = time.time()
    state = read_state(p["dir"])
    if state is not None:
        if port_answers(state[1]):
            log(f"Apache HiveServer2 already running on 127.0.0.1:{state[1]} "
                f"(pid {state[0]})")
            return state
        return _wait(state[0], state[1], p, timeout, log)
    java = check_java("the local Apache HiveServer2", ServerError)
    hp = hadoop(hadoop_workdir)
    if port_answers(port):
        raise ServerError(f"port {port} on 127.0.0.1 is already in use by another process; "
                          "choose another with HIVE_PORT")
    jars, tez, scripts = resolve(p["dir"], log)
    daemons.link_jars(p["lib"], jars)
    daemons.link_jars(p["tezlib"], tez)
    unpack_scripts(p, scripts)
    tez_uri = tez_lib(hp, tez, log)
    write_config(p, hp, port, hdfs_root, tez_uri, java)
    _write(p["state"], json.dumps({"port": port, "hdfs_root": hdfs_root,
                                   "hadoop": hp["dir"]}) + "\n")
    init_metastore(p, hp, java, log)
    env = _env(p, hp, java)
    preload = os.path.join(hp["dir"], "native", "libloopback-bind.so")
    if os.path.exists(preload):   # no listening socket beyond 127.0.0.1
        env["LD_PRELOAD"] = preload
    with open(p["log"], "ab") as logf:
        proc = subprocess.Popen(_java_command(p, hp, java, CLASS), cwd=p["dir"], env=env,
                                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                start_new_session=True)
    _write(p["pid"], f"{proc.pid}\n")
    _write(p["port"], f"{port}\n")
    log(f"starting Apache HiveServer2 on 127.0.0.1:{port}, pid {proc.pid}, log {p['log']}")
    result = _wait(proc.pid, port, p, timeout, log, proc)
    log(f"Apache HiveServer2 is up in {time.time() - start:.0f} s: "
        f"jdbc:hive2://127.0.0.1:{port}/default (beeline: {p['bin']}/beeline)")
    return result


def _wait(pid, port, p, timeout, log, proc=None):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if port_answers(port):
            return pid, port
        if proc is not None and proc.poll() is not None or not alive(pid):
            raise ServerError("Apache HiveServer2 exited during startup: "
                              + cluster.last_error(p["log"]))
        time.sleep(0.5)
    stop(pid)
    raise ServerError(f"Apache HiveServer2 did not answer on port {port} within {timeout:.0f} s: "
                      + cluster.last_error(p["log"]))


def down(workdir=DEFAULT_WORKDIR, log=print):
    """Stop the server started from *workdir*, if it runs (its shared Tez
    session ends with it)."""
    p = paths(workdir)
    daemons.stop_recorded(read_state(workdir), (p["pid"], p["port"]), "Apache HiveServer2",
                          p["dir"], log)


def env_lines(workdir=DEFAULT_WORKDIR, port=DEFAULT_PORT):
    """The ``export`` lines that put ``beeline`` on a shell's PATH."""
    p = paths(workdir)
    return [f"export HIVE_PORT={port}",
            f"export PATH={cluster._quote(p['bin'])}:\"$PATH\"",
            f"# beeline -u jdbc:hive2://127.0.0.1:{port}/default"]
