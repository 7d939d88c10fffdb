"""A single-node Hadoop (HDFS + YARN + MapReduce) from Apache's jars, for
development and tests: real daemons on 127.0.0.1, everything under one work
directory.

    python -m samplegen.jobs.cluster up     [--workdir work/hadoop] [--hdfs-port 9000]
    python -m samplegen.jobs.cluster down   [--workdir work/hadoop]
    python -m samplegen.jobs.cluster status [--workdir work/hadoop]
    python -m samplegen.jobs.cluster env    [--workdir work/hadoop]

``up`` checks for Java 17+ and Maven, resolves the jars of
``conf/hadoop/pom.xml`` into the user's Maven repository (once; the classpath
is cached in the work directory and resolved again only when the pom
changes), writes the configuration (``<workdir>/etc/hadoop/*-site.xml``) and
the client launchers (``<workdir>/bin/hadoop``, ``hdfs``, ``mapred``,
``yarn``), formats the NameNode on the first start only, starts NameNode,
DataNode, ResourceManager and NodeManager (with the ``mapreduce_shuffle``
auxiliary service) as background processes, and waits until HDFS has left
safe mode with one live DataNode and YARN has one running NodeManager.  It is
idempotent: daemons already running from that work directory are left alone.
``down`` stops the processes ``up`` recorded (pid files in ``<workdir>/pids``)
and nothing else.  ``env`` prints the ``export`` lines a shell needs
(``eval "$(python -m samplegen.jobs.cluster env)"``): ``HADOOP_HOME`` (the
work directory, laid out as a Hadoop installation, so mrjob finds both the
``hadoop`` launcher and the streaming jar), ``HADOOP_CONF_DIR``, ``JAVA_HOME``
and ``PATH``.

*Why four daemon JVMs rather than Hadoop's CLI MiniCluster:* both start about
as fast (measured on two cores: the daemons in about 5 s, 9 s on the
first start with the NameNode's format; ``MiniHadoopClusterManager -format``
in 6.6 s), but the MiniCluster needs the test jars of HDFS, YARN and
MapReduce and their test-scoped dependencies (JUnit, Mockito) on top of the
daemons' jars, is a test harness (its YARN servers take the default ports
on all interfaces unless each is pinned, and it adds a JobHistoryServer), and
keeps nothing unless it skips ``-format``.  The daemons are what a real
cluster runs, keep HDFS across restarts, and each has its own log and pid, so
a failure names the daemon and its last error.

The layout of ``<workdir>``: ``bin/`` launchers, ``etc/hadoop/`` configuration,
``lib/`` links to the resolved jars (the daemons', clients' and containers'
classpath is ``etc/hadoop:lib/*``), ``share/hadoop/tools/lib/`` the streaming
jar (where mrjob looks for it), ``share/hadoop/hdfs/webapps/`` what the
NameNode's and DataNode's web servers need, ``native/`` the loopback ``bind``
(below), ``data/`` HDFS metadata and blocks and the NodeManager's local
directories, ``logs/`` one log per daemon and the containers' logs
(``logs/userlogs``), ``pids/``, ``tmp/``.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

from samplegen.udfs.errors import SamplegenError

from . import daemons
from .daemons import alive, check_java, port_answers, stop

DEFAULT_WORKDIR = os.path.join("work", "hadoop")
DEFAULT_HDFS_PORT = 9000
STARTUP_SECONDS = 240
POM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "conf", "hadoop", "pom.xml")

#: every other listening address of the cluster (all on 127.0.0.1): the
#: defaults, Hadoop's own; ``up --free-ports`` takes free ones instead, and
#: :func:`ports` reads those a work directory's cluster runs with
PORTS = {
    "namenode_http": 9870,       # NameNode web UI, JMX and WebHDFS
    "datanode": 9866,            # DataNode data transfer
    "datanode_http": 9864,
    "datanode_ipc": 9867,
    "rm_scheduler": 8030,
    "rm_tracker": 8031,
    "rm": 8032,                  # ResourceManager (job submission)
    "rm_admin": 8033,
    "rm_http": 8088,             # ResourceManager web UI and REST API
    "nm": 8041,
    "nm_localizer": 8040,
    "nm_http": 8042,
    "shuffle": 13562,            # the mapreduce_shuffle auxiliary service
    "jobhistory": 10020,         # not started: where clients would look for it
}

#: daemon name -> Java main class, in start order
DAEMONS = {
    "namenode": "org.apache.hadoop.hdfs.server.namenode.NameNode",
    "datanode": "org.apache.hadoop.hdfs.server.datanode.DataNode",
    "resourcemanager": "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager",
    "nodemanager": "org.apache.hadoop.yarn.server.nodemanager.NodeManager",
}

#: the launchers' subcommands -> Java main class (as Hadoop's own scripts)
COMMANDS = {
    "hadoop": {"fs": "org.apache.hadoop.fs.FsShell",
               "jar": "org.apache.hadoop.util.RunJar",
               "version": "org.apache.hadoop.util.VersionInfo",
               "checknative": "org.apache.hadoop.util.NativeLibraryChecker",
               "conftest": "org.apache.hadoop.util.ConfTest"},
    "hdfs": {"dfs": "org.apache.hadoop.fs.FsShell",
             "dfsadmin": "org.apache.hadoop.hdfs.tools.DFSAdmin",
             "fsck": "org.apache.hadoop.hdfs.tools.DFSck",
             "getconf": "org.apache.hadoop.hdfs.tools.GetConf",
             "version": "org.apache.hadoop.util.VersionInfo",
             "namenode": DAEMONS["namenode"],
             "datanode": DAEMONS["datanode"]},
    "mapred": {"job": "org.apache.hadoop.mapred.JobClient",
               "queue": "org.apache.hadoop.mapred.JobQueueClient",
               "version": "org.apache.hadoop.util.VersionInfo"},
    "yarn": {"application": "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
             "applicationattempt": "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
             "container": "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
             "node": "org.apache.hadoop.yarn.client.cli.NodeCLI",
             "logs": "org.apache.hadoop.yarn.client.cli.LogsCLI",
             "queue": "org.apache.hadoop.yarn.client.cli.QueueCLI",
             "rmadmin": "org.apache.hadoop.yarn.client.cli.RMAdminCLI",
             "jar": "org.apache.hadoop.util.RunJar",
             "version": "org.apache.hadoop.util.VersionInfo",
             "resourcemanager": DAEMONS["resourcemanager"],
             "nodemanager": DAEMONS["nodemanager"]},
}

#: subcommands whose class reads the subcommand itself as its first argument
#: (as Hadoop's ``yarn`` script passes it)
KEEP_SUBCOMMAND = {"application", "applicationattempt", "container"}

#: Hadoop 3.4 reaches into the JDK by reflection (Guice's class generation in
#: the YARN web apps, the RPC layer's buffers); these keep that open on Java 17
ADD_OPENS = " ".join(f"--add-opens=java.base/{p}=ALL-UNNAMED" for p in (
    "java.lang", "java.lang.reflect", "java.lang.invoke", "java.io", "java.net", "java.nio",
    "java.util", "java.util.concurrent", "java.util.concurrent.atomic", "java.util.regex",
    "sun.nio.ch", "sun.nio.cs", "sun.security.action", "sun.util.calendar"))
#: small and quick to start: one collector thread, the client compiler only
JVM_FLAGS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.net.preferIPv4Stack=true"
DAEMON_HEAP = "-Xms64m -Xmx512m"
CLIENT_HEAP = "-Xmx256m"

#: YARN memory: what the NodeManager offers and what a container asks for (MiB)
NM_MEMORY_MB = 6144
NM_VCORES = 4
AM_MB, AM_HEAP = 512, "-Xmx384m"
MAP_MB, REDUCE_MB, TASK_HEAP = 768, 1024, "-Xmx256m"


class ClusterError(SamplegenError):
    pass


class PortTakenError(ClusterError):
    """A port of the cluster's is held by another process (found before a
    daemon started, or the daemon's own bind failed)."""


#: Hadoop binds a few servers to the wildcard address with no setting to
#: change it: the ``mapreduce_shuffle`` service of the NodeManager and, in each
#: MapReduce application master, its client RPC, task umbilical and web app.
#: The daemons and containers preload this ``bind`` (``LD_PRELOAD``), which
#: turns a wildcard bind into a loopback one, so nothing listens beyond
#: 127.0.0.1.  Built with the system's C compiler at ``up``.
LOOPBACK_BIND_C = r"""
/* bind() to the wildcard address binds the loopback address instead
   (written by python -m samplegen.jobs.cluster up). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

typedef int (*bind_fn)(int, const struct sockaddr *, socklen_t);

int bind(int fd, const struct sockaddr *addr, socklen_t len) {
    static bind_fn real_bind;
    if (!real_bind)
        real_bind = (bind_fn)dlsym(RTLD_NEXT, "bind");
    if (addr && addr->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        struct sockaddr_in a;
        memcpy(&a, addr, sizeof a);
        if (a.sin_addr.s_addr == htonl(INADDR_ANY)) {
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
        }
    } else if (addr && addr->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        struct sockaddr_in6 a;
        memcpy(&a, addr, sizeof a);
        if (IN6_IS_ADDR_UNSPECIFIED(&a.sin6_addr)) {  /* :: -> ::ffff:127.0.0.1 */
            static const unsigned char mapped[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                                     0xff, 0xff, 127, 0, 0, 1};
            memcpy(&a.sin6_addr, mapped, 16);
            return real_bind(fd, (const struct sockaddr *)&a, sizeof a);
        }
    }
    return real_bind(fd, addr, len);
}
"""


def build_loopback_bind(workdir, log=print):
    """``<workdir>/native/libloopback-bind.so`` (built once), or None with a
    warning when there is no C compiler."""
    native = os.path.join(paths(workdir)["dir"], "native")
    lib = os.path.join(native, "libloopback-bind.so")
    source = os.path.join(native, "loopback-bind.c")
    try:
        with open(source) as f:
            if f.read() == LOOPBACK_BIND_C and os.path.exists(lib):
                return lib
    except OSError:
        pass
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        log("warning: no C compiler (cc): the shuffle service and the MapReduce application "
            "masters will listen on all interfaces, not only 127.0.0.1 (install gcc)")
        return None
    os.makedirs(native, exist_ok=True)
    _write(source, LOOPBACK_BIND_C)
    proc = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", lib + ".tmp", source, "-ldl"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise ClusterError(f"building {lib} failed: {proc.stderr.strip()[-300:]}")
    os.replace(lib + ".tmp", lib)
    return lib


# ---------------------------------------------------------------------------
# prerequisites
# ---------------------------------------------------------------------------
def check_maven():
    """The ``mvn`` command; ClusterError when Maven is missing."""
    return daemons.check_maven("the local Hadoop", ClusterError)


# ---------------------------------------------------------------------------
# layout
# ---------------------------------------------------------------------------
def paths(workdir):
    """The files and directories of the cluster in *workdir* (a dict)."""
    d = os.path.abspath(workdir)
    p = {"dir": d, "bin": os.path.join(d, "bin"), "conf": os.path.join(d, "etc", "hadoop"),
         "lib": os.path.join(d, "lib"), "tools": os.path.join(d, "share", "hadoop", "tools",
                                                              "lib"),
         "data": os.path.join(d, "data"), "logs": os.path.join(d, "logs"),
         "pids": os.path.join(d, "pids"), "tmp": os.path.join(d, "tmp"),
         "classpath": os.path.join(d, "classpath.txt"),
         "classpath_key": os.path.join(d, "classpath.pom-sha256"),
         "state": os.path.join(d, "cluster.json")}
    p["name"] = os.path.join(p["data"], "name")
    p["webapps"] = os.path.join(d, "share", "hadoop", "hdfs")
    return p


def resolve_jars(workdir, pom=POM, log=print):
    """The jars of *pom* (a list of paths in ~/.m2), resolved with Maven the
    first time and whenever the pom changes; cached in *workdir*."""
    return daemons.maven_classpath(pom, paths(workdir)["dir"], "the Hadoop jars", ClusterError,
                                   log, size="110 MB")


def link_jars(workdir, jars):
    """``<workdir>/lib``: one link per jar (the classpath ``lib/*``), and the
    streaming jar -- a job jar, not on the classpath -- in
    ``share/hadoop/tools/lib`` as in a Hadoop installation; returns its path
    there.  *jars*: the resolved jars' paths."""
    p = paths(workdir)
    streaming = [j for j in jars if re.match(r"hadoop-streaming-[\d.]+\.jar$",
                                             os.path.basename(j))]
    if not streaming:
        raise ClusterError("the resolved jars have no hadoop-streaming jar (see the pom)")
    target = os.path.join(p["tools"], os.path.basename(streaming[0]))
    if streaming_jar(workdir) != target:
        shutil.rmtree(p["tools"], ignore_errors=True)
        os.makedirs(p["tools"])
        os.symlink(streaming[0], target)
    daemons.link_jars(p["lib"], [j for j in jars if j not in streaming])
    return target


WEB_XML = """<?xml version="1.0" encoding="UTF-8"?>
<web-app xmlns="http://java.sun.com/xml/ns/javaee" version="3.0"/>
"""


def write_webapps(workdir):
    """``share/hadoop/hdfs/webapps/{hdfs,datanode,secondary}``: the NameNode's and
    DataNode's web servers (JMX, WebHDFS) need these directories on the
    classpath.  Hadoop's binary release ships its HTML UI there; the jars in
    Maven Central do not carry it, so these hold only a page of links."""
    root = paths(workdir)["webapps"]
    links = ("<li><a href=\"/jmx\">/jmx</a></li><li><a href=\"/conf\">/conf</a></li>"
             "<li><a href=\"/logs/\">/logs</a></li>")
    for app in ("hdfs", "datanode", "secondary", "journal"):
        os.makedirs(os.path.join(root, "webapps", app, "WEB-INF"), exist_ok=True)
        _write(os.path.join(root, "webapps", app, "WEB-INF", "web.xml"), WEB_XML)
        _write(os.path.join(root, "webapps", app, "index.html"),
               f"<!DOCTYPE html><title>{app}</title><h1>Hadoop {app}</h1><ul>{links}"
               + ("<li>WebHDFS: /webhdfs/v1/PATH?op=LISTSTATUS</li>" if app == "hdfs" else "")
               + "</ul>\n")


def streaming_jar(workdir):
    """The streaming jar of the cluster in *workdir* (for mrjob's
    ``hadoop_streaming_jar``), or None before the first ``up``."""
    tools = paths(workdir)["tools"]
    try:
        names = sorted(n for n in os.listdir(tools) if n.startswith("hadoop-streaming"))
    except OSError:
        return None
    return os.path.join(tools, names[-1]) if names else None


# ---------------------------------------------------------------------------
# configuration
# ---------------------------------------------------------------------------
def _xml(props):
    def esc(text):
        return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    body = "".join(f"  <property><name>{esc(k)}</name><value>{esc(v)}</value></property>\n"
                   for k, v in props.items())
    return ('<?xml version="1.0"?>\n<!-- written by python -m samplegen.jobs.cluster up; '
            'rewritten on every start -->\n<configuration>\n' + body + "</configuration>\n")


def site_config(workdir, hdfs_port, preload=None, ports=None):
    """``{file name: {key: value}}`` of the single-node cluster in *workdir*;
    *preload*: the loopback ``bind`` library the containers preload, if any;
    *ports*: ``{name: port}`` as :data:`PORTS` (the default)."""
    p = paths(workdir)
    host = "127.0.0.1"
    ports = PORTS if ports is None else ports

    def at(name):
        return f"{host}:{ports[name]}"
    classpath = f"{p['conf']},{p['lib']}/*"
    task_opts = f"{JVM_FLAGS} {ADD_OPENS}"
    core = {
        "fs.defaultFS": f"hdfs://{host}:{hdfs_port}",
        "hadoop.tmp.dir": p["tmp"],
        "hadoop.security.authentication": "simple",
        "hadoop.http.staticuser.user": os.environ.get("USER", "root"),
        "hadoop.proxyuser.root.hosts": "*",
        "hadoop.proxyuser.root.groups": "*",
    }
    hdfs = {
        "dfs.replication": 1,
        "dfs.permissions.enabled": "false",
        "dfs.webhdfs.enabled": "true",
        "dfs.namenode.name.dir": p["name"],
        "dfs.datanode.data.dir": os.path.join(p["data"], "data"),
        "dfs.namenode.rpc-address": f"{host}:{hdfs_port}",
        "dfs.namenode.rpc-bind-host": host,
        "dfs.namenode.servicerpc-bind-host": host,
        "dfs.namenode.lifeline.rpc-bind-host": host,
        "dfs.namenode.http-address": at("namenode_http"),
        "dfs.namenode.http-bind-host": host,
        "dfs.namenode.https-address": f"{host}:9871",
        "dfs.namenode.https-bind-host": host,
        "dfs.namenode.secondary.http-address": f"{host}:9868",
        "dfs.datanode.address": at("datanode"),
        "dfs.datanode.http.address": at("datanode_http"),
        "dfs.datanode.https.address": f"{host}:9865",
        "dfs.datanode.ipc.address": at("datanode_ipc"),
        "dfs.datanode.hostname": host,
        "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        # out of safe mode as soon as the blocks are reported, not 30 s later
        "dfs.namenode.safemode.extension": 0,
        "dfs.heartbeat.interval": 1,
        # a small disk is still usable
        "dfs.namenode.resource.du.reserved": 64 << 20,
        "dfs.datanode.du.reserved": 0,
        "dfs.blocksize": 32 << 20,
        # a file is closed as soon as its last block is committed, without the
        # client (WebHDFS writes: the DataNode) backing off 400 ms and more
        # until the DataNode's report of the block reaches the NameNode
        "dfs.namenode.file.close.num-committed-allowed": 1,
        "dfs.client.block.write.locateFollowingBlock.initial.delay.ms": 20,
    }
    yarn = {
        "yarn.resourcemanager.hostname": host,
        "yarn.resourcemanager.bind-host": host,
        "yarn.resourcemanager.address": at("rm"),
        "yarn.resourcemanager.scheduler.address": at("rm_scheduler"),
        "yarn.resourcemanager.resource-tracker.address": at("rm_tracker"),
        "yarn.resourcemanager.admin.address": at("rm_admin"),
        "yarn.resourcemanager.webapp.address": at("rm_http"),
        "yarn.resourcemanager.webapp.https.address": f"{host}:8090",
        "yarn.nodemanager.hostname": host,
        "yarn.nodemanager.bind-host": host,
        "yarn.nodemanager.address": at("nm"),
        "yarn.nodemanager.localizer.address": at("nm_localizer"),
        "yarn.nodemanager.webapp.address": at("nm_http"),
        "yarn.nodemanager.aux-services": "mapreduce_shuffle",
        "yarn.nodemanager.aux-services.mapreduce_shuffle.class":
            "org.apache.hadoop.mapred.ShuffleHandler",
        "mapreduce.shuffle.port": ports["shuffle"],
        "yarn.nodemanager.local-dirs": os.path.join(p["data"], "nm-local"),
        "yarn.nodemanager.log-dirs": os.path.join(p["logs"], "userlogs"),
        "yarn.nodemanager.resource.memory-mb": NM_MEMORY_MB,
        "yarn.nodemanager.resource.cpu-vcores": NM_VCORES,
        "yarn.scheduler.minimum-allocation-mb": 128,
        "yarn.scheduler.maximum-allocation-mb": NM_MEMORY_MB,
        "yarn.scheduler.minimum-allocation-vcores": 1,
        "yarn.scheduler.maximum-allocation-vcores": NM_VCORES,
        # Java reserves far more virtual than physical memory: check only the latter
        "yarn.nodemanager.vmem-check-enabled": "false",
        "yarn.nodemanager.pmem-check-enabled": "true",
        # a nearly full disk must not turn the only node unhealthy
        "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage": 99.0,
        "yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb": 256,
        "yarn.nodemanager.env-whitelist": ("JAVA_HOME,HADOOP_COMMON_HOME,HADOOP_HDFS_HOME,"
                                           "HADOOP_CONF_DIR,CLASSPATH_PREPEND_DISTCACHE,"
                                           "HADOOP_YARN_HOME,HADOOP_HOME,HADOOP_MAPRED_HOME,"
                                           "PATH,LANG,TZ"),
        # every container: the launchers and this Python on PATH (a task's
        # shell starts without the NodeManager's PATH, so the whitelist below
        # cannot pass it on); the loopback bind (application masters' servers)
        "yarn.nodemanager.admin-env": f"MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,PATH={task_path(p)}"
                                      + (f",LD_PRELOAD={preload}" if preload else ""),
        # the containers' logs stay in logs/userlogs for 3 hours; their working
        # directories go at once (a delay would also hold up the NodeManager's stop)
        "yarn.nodemanager.delete.debug-delay-sec": 0,
        "yarn.log-aggregation-enable": "false",
        "yarn.application.classpath": classpath,
        "yarn.resourcemanager.nodemanagers.heartbeat-interval-ms": 500,
    }
    mapred = {
        "mapreduce.framework.name": "yarn",
        "mapreduce.application.classpath": classpath,
        "yarn.app.mapreduce.am.env": f"HADOOP_MAPRED_HOME={p['dir']}",
        "mapreduce.map.env": f"HADOOP_MAPRED_HOME={p['dir']}",
        "mapreduce.reduce.env": f"HADOOP_MAPRED_HOME={p['dir']}",
        "yarn.app.mapreduce.am.resource.mb": AM_MB,
        "yarn.app.mapreduce.am.command-opts": AM_HEAP,
        "yarn.app.mapreduce.am.admin-command-opts": task_opts,
        "mapreduce.map.memory.mb": MAP_MB,
        "mapreduce.reduce.memory.mb": REDUCE_MB,
        "mapreduce.map.java.opts": TASK_HEAP,
        "mapreduce.reduce.java.opts": TASK_HEAP,
        "mapreduce.admin.map.child.java.opts": task_opts,
        "mapreduce.admin.reduce.child.java.opts": task_opts,
        "mapreduce.task.io.sort.mb": 64,
        "mapreduce.shuffle.port": ports["shuffle"],
        "mapreduce.jobhistory.address": at("jobhistory"),
        "mapreduce.jobhistory.webapp.address": f"{host}:19888",
        "yarn.app.mapreduce.am.staging-dir": "/tmp/hadoop-yarn/staging",
        # a job's fixed cost, which is most of a small job's time: the
        # application master asks for containers every 100 ms (not 1 s), the
        # client polls the job every 200 ms (not 1 s and 5 s), and the
        # reducers start while the last maps run
        "yarn.app.mapreduce.am.scheduler.heartbeat.interval-ms": 100,
        "mapreduce.client.progressmonitor.pollinterval": 200,
        "mapreduce.client.completion.pollinterval": 200,
        "mapreduce.job.reduce.slowstart.completedmaps": 0.8,
    }
    capacity = {
        "yarn.scheduler.capacity.root.queues": "default",
        "yarn.scheduler.capacity.root.default.capacity": 100,
        "yarn.scheduler.capacity.root.default.maximum-capacity": 100,
        "yarn.scheduler.capacity.maximum-am-resource-percent": 0.5,
        # count vcores too: at most four containers at a time on two cores
        "yarn.scheduler.capacity.resource-calculator":
            "org.apache.hadoop.yarn.util.resource.DominantResourceCalculator",
    }
    return {"core-site.xml": core, "hdfs-site.xml": hdfs, "yarn-site.xml": yarn,
            "mapred-site.xml": mapred, "capacity-scheduler.xml": capacity}


LOG4J = """\
# written by python -m samplegen.jobs.cluster up
hadoop.root.logger=INFO,console
hadoop.log.dir=.
hadoop.log.file=hadoop.log
log4j.rootLogger=${hadoop.root.logger}
log4j.threshold=ALL
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.target=System.err
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{yy/MM/dd HH:mm:ss} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
log4j.logger.org.apache.hadoop.conf.Configuration.deprecation=WARN
log4j.logger.org.apache.hadoop.metrics2=WARN
log4j.logger.org.eclipse.jetty=WARN
"""


def write_config(workdir, hdfs_port, java, preload=None, ports=None):
    """Write the configuration and the launchers into *workdir*; *java*: the
    java binary; *preload*: see :func:`site_config`."""
    p = paths(workdir)
    for key in ("conf", "bin", "logs", "pids", "tmp", "data"):
        os.makedirs(p[key], exist_ok=True)
    for name, props in site_config(workdir, hdfs_port, preload, ports).items():
        _write(os.path.join(p["conf"], name), _xml(props))
    _write(os.path.join(p["conf"], "log4j.properties"), LOG4J)
    java_home = os.path.dirname(os.path.dirname(java))
    for tool, commands in COMMANDS.items():
        path = os.path.join(p["bin"], tool)
        _write(path, launcher(p, tool, commands, java_home))
        os.chmod(path, 0o755)


def _write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def launcher(p, tool, commands, java_home):
    """The text of the ``bin/<tool>`` script: ``<tool> COMMAND ARGS`` runs
    COMMAND's main class (or a class named in full) with the cluster's
    classpath and configuration."""
    cases = "\n".join(f"  {cmd}) class={cls}" + ("; keep=1" if cmd in KEEP_SUBCOMMAND else "")
                      + " ;;" for cmd, cls in commands.items())
    names = " ".join(commands)
    return f"""#!/usr/bin/env bash
# `{tool}` of the single-node Hadoop in {p['dir']}
# (written by python -m samplegen.jobs.cluster up).
export HADOOP_HOME={p['dir']}
export HADOOP_CONF_DIR="${{HADOOP_CONF_DIR:-{p['conf']}}}"
export JAVA_HOME="${{JAVA_HOME:-{java_home}}}"
cmd="$1"
keep=
case "$cmd" in
{cases}
  classpath) echo "$HADOOP_CONF_DIR:{p['lib']}/*"; exit 0 ;;
  ""|-h|--help|help) echo "usage: {tool} {names} classpath | CLASSNAME [ARGS]" >&2; exit 1 ;;
  *.*) class="$cmd" ;;
  *) echo "{tool}: unknown command '$cmd' (one of: {names} classpath)" >&2; exit 1 ;;
esac
[ -n "$keep" ] || shift
exec "$JAVA_HOME/bin/java" {CLIENT_HEAP} {JVM_FLAGS} {ADD_OPENS} $HADOOP_CLIENT_OPTS \\
  -Dhadoop.home.dir={p['dir']} -Dhadoop.log.dir={p['logs']} \\
  -Dhadoop.root.logger="${{HADOOP_ROOT_LOGGER:-INFO,console}}" \\
  -Dproc_{tool}_client -cp "$HADOOP_CONF_DIR:{p['lib']}/*" "$class" "$@"
"""


# ---------------------------------------------------------------------------
# processes
# ---------------------------------------------------------------------------
def _ours(pid, name, workdir):
    """Is *pid* daemon *name* started from *workdir*?"""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().split(b"\0")
    except OSError:
        return alive(pid)
    return (DAEMONS[name].encode() in cmd
            and f"-Dhadoop.home.dir={os.path.abspath(workdir)}".encode() in cmd)


def running(workdir):
    """``{daemon: pid}`` of the daemons running from *workdir*."""
    p = paths(workdir)
    found = {}
    for name in DAEMONS:
        try:
            with open(os.path.join(p["pids"], f"{name}.pid")) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            continue
        if alive(pid) and _ours(pid, name, workdir):
            found[name] = pid
    return found


def _daemon_ports(name, hdfs_port, ports):
    return {"namenode": {"NameNode RPC": hdfs_port, "NameNode HTTP": ports["namenode_http"]},
            "datanode": {"DataNode": ports["datanode"], "DataNode HTTP": ports["datanode_http"],
                         "DataNode IPC": ports["datanode_ipc"]},
            "resourcemanager": {"ResourceManager": ports["rm"],
                                "ResourceManager scheduler": ports["rm_scheduler"],
                                "ResourceManager tracker": ports["rm_tracker"],
                                "ResourceManager admin": ports["rm_admin"],
                                "ResourceManager HTTP": ports["rm_http"]},
            "nodemanager": {"NodeManager": ports["nm"], "NodeManager localizer":
                            ports["nm_localizer"], "NodeManager HTTP": ports["nm_http"],
                            "shuffle": ports["shuffle"]}}[name]


def daemon_command(p, name, java):
    return [java, *DAEMON_HEAP.split(), *JVM_FLAGS.split(), *ADD_OPENS.split(),
            f"-Dproc_{name}", f"-Dhadoop.home.dir={p['dir']}", f"-Dhadoop.log.dir={p['logs']}",
            f"-Dyarn.log.dir={p['logs']}", f"-Dhadoop.log.file={name}.log",
            "-Dhadoop.root.logger=INFO,console", "-cp",
            f"{p['conf']}:{p['webapps']}:{p['lib']}/*",
            DAEMONS[name]]


def task_path(p):
    """The PATH of the daemons and containers: the launchers first (tasks may
    run ``hdfs dfs``), then this Python's bin directory (``python3`` there has
    numpy), then the system's."""
    rest = [d for d in os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin").split(os.pathsep)
            if d and d not in (p["bin"], os.path.dirname(sys.executable))]
    return os.pathsep.join([p["bin"], os.path.dirname(sys.executable), *rest])


def daemon_env(p, java, preload=None):
    env = dict(os.environ)
    if preload:
        env["LD_PRELOAD"] = preload
    env.update({"HADOOP_HOME": p["dir"], "HADOOP_CONF_DIR": p["conf"],
                "HADOOP_MAPRED_HOME": p["dir"], "HADOOP_YARN_HOME": p["dir"],
                "HADOOP_COMMON_HOME": p["dir"], "HADOOP_HDFS_HOME": p["dir"],
                "JAVA_HOME": os.path.dirname(os.path.dirname(java))})
    env["PATH"] = task_path(p)
    env.pop("CLASSPATH", None)
    return env


def format_namenode(p, java, log):
    if os.path.exists(os.path.join(p["name"], "current", "VERSION")):
        return False
    log("formatting the NameNode (first start)")
    with open(os.path.join(p["logs"], "format.log"), "ab") as logf:
        proc = subprocess.run(daemon_command(p, "namenode", java)
                              + ["-format", "-nonInteractive", "-clusterid", "samplegen"],
                              env=daemon_env(p, java), stdout=logf, stderr=logf,
                              stdin=subprocess.DEVNULL, cwd=p["dir"])
    if proc.returncode != 0:
        raise ClusterError("formatting the NameNode failed: "
                           + last_error(os.path.join(p["logs"], "format.log")))
    return True


#: what a (re)started daemon logs once the cluster counts it: a restarted
#: DataNode or NodeManager is counted as live by the masters' old state until
#: it expires, so ``up`` waits for these lines in the new part of its log
JOINED = {"datanode": "Successfully sent block report",
          "nodemanager": "Registered with ResourceManager"}


def _joined(p, name, offset):
    try:
        with open(os.path.join(p["logs"], f"{name}.log"), "rb") as f:
            f.seek(offset)
            return JOINED[name].encode() in f.read()
    except OSError:
        return False


def start_daemon(p, name, java, preload=None):
    """Start daemon *name* in the background (log and pid file in the work
    directory); returns its Popen, with ``log_offset``: where its output
    starts in the log."""
    log_path = os.path.join(p["logs"], f"{name}.log")
    offset = os.path.getsize(log_path) if os.path.exists(log_path) else 0
    with open(log_path, "ab") as logf:
        proc = subprocess.Popen(daemon_command(p, name, java), cwd=p["dir"],
                                env=daemon_env(p, java, preload), stdin=subprocess.DEVNULL,
                                stdout=logf, stderr=logf, start_new_session=True)
    _write(os.path.join(p["pids"], f"{name}.pid"), f"{proc.pid}\n")
    proc.log_offset = offset
    return proc


def last_error(log_path):
    """The last ERROR/FATAL line (or exception) of a daemon's log, else its last line."""
    try:
        with open(log_path, "rb") as f:
            f.seek(max(0, os.path.getsize(log_path) - (256 << 10)))
            lines = f.read().decode(errors="replace").splitlines()
    except OSError:
        return f"(no log at {log_path})"
    for line in reversed(lines):
        if re.search(r"\b(ERROR|FATAL)\b|Exception:|Error:", line):
            return line.strip()
    return lines[-1].strip() if lines else f"(empty log {log_path})"


def _get_json(url, timeout=2.0):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read().decode())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def health(workdir=DEFAULT_WORKDIR):
    """What the web endpoints of the cluster in *workdir* say: ``{"safemode":
    bool, "datanodes": n, "nodemanagers": n}``; None for an endpoint that does
    not answer."""
    at = ports(workdir)
    nn = _get_json(f"http://127.0.0.1:{at['namenode_http']}/jmx?"
                   "qry=Hadoop:service=NameNode,name=FSNamesystemState")
    info = _get_json(f"http://127.0.0.1:{at['namenode_http']}/jmx?"
                     "qry=Hadoop:service=NameNode,name=NameNodeInfo")
    rm = _get_json(f"http://127.0.0.1:{at['rm_http']}/ws/v1/cluster/metrics")
    state = {"safemode": None, "datanodes": None, "nodemanagers": None}
    try:
        state["datanodes"] = nn["beans"][0]["NumLiveDataNodes"]
        state["safemode"] = bool(info["beans"][0]["Safemode"])
    except (TypeError, KeyError, IndexError):
        pass
    try:
        state["nodemanagers"] = rm["clusterMetrics"]["activeNodes"]
    except (TypeError, KeyError):
        pass
    return state


def _ready(state):
    return state["safemode"] is False and (state["datanodes"] or 0) >= 1 \
        and (state["nodemanagers"] or 0) >= 1


def up(workdir=DEFAULT_WORKDIR, hdfs_port=DEFAULT_HDFS_PORT, timeout=STARTUP_SECONDS,
       log=print, pom=POM, free_ports=False):
    """Start the cluster in *workdir* (the daemons not yet running from it)
    and wait until it is usable; returns :func:`env` of it.  *hdfs_port*:
    the NameNode's RPC port (``fs.defaultFS``); *free_ports*: every port,
    the NameNode's too, is one that nothing listens on (a cluster beside
    another one that holds Hadoop's default ports; a running cluster keeps
    the ports it has); *timeout*: seconds to wait; *log*: a callable for
    progress messages; *pom*: the jars' pom.  Two ``up`` of one work
    directory at a time take turns (a lock file)."""
    p = paths(workdir)
    with daemons.one_at_a_time(p["dir"]):
        return _up(p, workdir, hdfs_port, timeout, log, pom, free_ports)


def _free_ports():
    """``(hdfs port, {name: port})``: distinct ports nothing listens on now."""
    taken = set()
    while len(taken) < len(PORTS) + 1:
        taken.add(daemons.free_port())
    chosen = sorted(taken)
    return chosen[0], dict(zip(PORTS, chosen[1:]))


def _up(p, workdir, hdfs_port, timeout, log, pom, free_ports):
    start = time.time()
    java = check_java("the local Hadoop", ClusterError)
    jars = resolve_jars(workdir, pom, log)
    alive = running(workdir)
    if alive:
        if free_ports:
            hdfs_port = _recorded_port(workdir)
        elif _recorded_port(workdir) != hdfs_port:
            raise ClusterError(f"the cluster in {p['dir']} runs with HDFS port "
                               f"{_recorded_port(workdir)}; 'down' it first to change the port")
        at = ports(workdir)
    elif free_ports:
        hdfs_port, at = _free_ports()
    else:
        at = dict(PORTS)
    if not alive or streaming_jar(workdir) is None:
        link_jars(workdir, jars)   # running daemons keep the jars they started with
    write_webapps(workdir)
    preload = build_loopback_bind(workdir, log)

    def start_with(ports_now):
        return _start(p, workdir, ports_now[0], ports_now[1], alive, java, preload, timeout,
                      log, start)

    if free_ports and not alive:
        return retry_taken_ports(start_with, (hdfs_port, at), _free_ports, log)
    return start_with((hdfs_port, at))


#: how often ``up --free-ports`` chooses new ports when one it chose was taken
#: before its daemon bound it
PORT_ATTEMPTS = 3


def retry_taken_ports(start, first, choose, log, attempts=PORT_ATTEMPTS):
    """``start(ports)`` with the ports *first*, and while it fails because a
    port was taken in the meantime (another process's own free port: a
    port nothing listened on when it was chosen is free only until someone
    binds it), with new ones from ``choose()``, *attempts* times in all."""
    ports_now = first
    for attempt in range(1, attempts + 1):
        try:
            return start(ports_now)
        except PortTakenError as exc:
            if attempt == attempts:
                raise
            log(f"a port was taken while Hadoop started ({exc}); choosing other ports")
            ports_now = choose()


def _start(p, workdir, hdfs_port, at, alive, java, preload, timeout, log, start):
    """Write the configuration for the ports *hdfs_port*, *at*, start the
    daemons not in *alive* and wait until the cluster is usable."""
    write_config(workdir, hdfs_port, java, preload, at)   # the same values while it runs
    _write(p["state"], json.dumps({"hdfs_port": hdfs_port, "ports": at}) + "\n")
    if len(alive) == len(DAEMONS) and _ready(health(workdir)):
        log(f"Hadoop already running from {p['dir']} (pids "
            + ", ".join(f"{n} {pid}" for n, pid in alive.items()) + ")")
        return env(workdir)
    for name in DAEMONS:
        if name in alive:
            continue
        for what, port in _daemon_ports(name, hdfs_port, at).items():
            if port_answers(port):
                raise PortTakenError(f"port {port} ({what}) on 127.0.0.1 is in use by another "
                                   f"process; stop it (or 'down' the cluster that holds it)")
    format_namenode(p, java, log)
    procs = {}
    for name in DAEMONS:
        if name not in alive:
            procs[name] = start_daemon(p, name, java, preload)
    if procs:
        log("started " + ", ".join(f"{n} (pid {proc.pid})" for n, proc in procs.items())
            + f"; logs in {p['logs']}")
    try:
        _wait(p, procs, timeout)
    except BaseException:
        for name in reversed(list(procs)):   # leave nothing half-started behind
            stop(procs[name].pid)
            os.remove(os.path.join(p["pids"], f"{name}.pid"))
        raise
    log(f"Hadoop is up in {time.time() - start:.0f} s: hdfs://127.0.0.1:{hdfs_port}, "
        f"WebHDFS http://127.0.0.1:{at['namenode_http']}/webhdfs/v1, YARN "
        f"http://127.0.0.1:{at['rm_http']}")
    return env(workdir)


def _wait(p, procs, timeout):
    """Wait until the cluster is usable; ClusterError quoting the log of the
    daemon that exited, or that the wait is for, otherwise.  *procs*: the
    daemons started by this ``up`` ({name: Popen})."""
    deadline = time.time() + timeout
    while True:
        missing = _missing(p, procs, health(p["dir"]))
        if missing is None:
            return
        for name, proc in procs.items():
            if proc.poll() is not None:
                error = last_error(os.path.join(p["logs"], f"{name}.log"))
                taken = "BindException" in error or "Address already in use" in error
                raise (PortTakenError if taken else ClusterError)(
                    f"the {name} exited during startup: {error}")
        if time.time() > deadline:
            name, waiting = missing
            raise ClusterError(f"Hadoop was not ready within {timeout:.0f} s (waiting for "
                               f"{waiting}); {name} log: "
                               + last_error(os.path.join(p["logs"], f"{name}.log")))
        time.sleep(0.5)


def _missing(p, procs, state):
    """``(daemon, what)`` the cluster still waits for, or None when it is ready."""
    def joined(name):
        return name not in procs or _joined(p, name, procs[name].log_offset)
    if state["safemode"] is None:
        return "namenode", "the NameNode"
    if not state["datanodes"] or not joined("datanode"):
        return "datanode", "a live DataNode"
    if state["safemode"]:
        return "namenode", "HDFS to leave safe mode"
    if state["nodemanagers"] is None:
        return "resourcemanager", "the ResourceManager"
    if not state["nodemanagers"] or not joined("nodemanager"):
        return "nodemanager", "a running NodeManager"
    return None


def _recorded(workdir):
    try:
        with open(paths(workdir)["state"]) as f:
            state = json.load(f)
        return state if isinstance(state, dict) else {}
    except (OSError, ValueError):
        return {}


def _recorded_port(workdir):
    port = _recorded(workdir).get("hdfs_port")
    return port if isinstance(port, int) else DEFAULT_HDFS_PORT


def ports(workdir=DEFAULT_WORKDIR):
    """``{name: port}`` (the names of :data:`PORTS`) of the cluster in
    *workdir*: those it was last started with, else the defaults."""
    recorded = _recorded(workdir).get("ports")
    if isinstance(recorded, dict) and set(recorded) == set(PORTS) \
            and all(isinstance(v, int) for v in recorded.values()):
        return dict(recorded)
    return dict(PORTS)


def hdfs_port(workdir=DEFAULT_WORKDIR):
    """The NameNode RPC port of the cluster in *workdir* (the recorded one)."""
    return _recorded_port(workdir)


def down(workdir=DEFAULT_WORKDIR, log=print):
    """Stop the daemons recorded in *workdir* (NodeManager first), and only them."""
    p = paths(workdir)
    alive = running(workdir)
    if not alive:
        log("Hadoop is not running" + (f" (from {p['dir']})" if os.path.isdir(p["dir"])
                                       else ""))
    for name in reversed(list(DAEMONS)):
        if name in alive:
            stop(alive[name])
            log(f"stopped the {name} (pid {alive[name]})")
    for name in DAEMONS:
        pid_file = os.path.join(p["pids"], f"{name}.pid")
        if os.path.exists(pid_file):
            os.remove(pid_file)


def env(workdir=DEFAULT_WORKDIR):
    """The environment of a client of the cluster in *workdir* (a dict, PATH
    with the launchers first)."""
    p = paths(workdir)
    java = shutil.which("java")
    values = {"HADOOP_HOME": p["dir"], "HADOOP_CONF_DIR": p["conf"]}
    if java:
        values["JAVA_HOME"] = os.path.dirname(os.path.dirname(os.path.realpath(java)))
    values["PATH"] = p["bin"] + os.pathsep + os.environ.get("PATH", "")
    return values


def env_lines(workdir=DEFAULT_WORKDIR):
    """The ``export`` lines of :func:`env` (PATH as ``<bin>:$PATH``), and the
    streaming jar for mrjob's ``hadoop_streaming_jar`` as a comment."""
    values = env(workdir)
    lines = [f"export {k}={_quote(v)}" for k, v in values.items() if k != "PATH"]
    lines.append(f"export PATH={_quote(paths(workdir)['bin'])}:\"$PATH\"")
    jar = streaming_jar(workdir)
    lines.append(f"# mrjob (hadoop runner) finds it through HADOOP_HOME; hadoop_streaming_jar: "
                 f"{jar or '(run up first)'}")
    return lines


def _quote(text):
    return "'" + text.replace("'", "'\\''") + "'"


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m samplegen.jobs.cluster",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("action", choices=("up", "down", "status", "env"))
    parser.add_argument("--workdir", default=os.environ.get("HADOOP_WORK", DEFAULT_WORKDIR))
    parser.add_argument("--hdfs-port", type=int,
                        default=int(os.environ.get("HDFS_PORT", DEFAULT_HDFS_PORT)))
    parser.add_argument("--free-ports", action="store_true",
                        help="take ports nothing listens on (the HDFS port too) instead of "
                             "Hadoop's defaults: a cluster beside another one")
    parser.add_argument("--timeout", type=float, default=STARTUP_SECONDS)
    args = parser.parse_args(argv)

    def log(message):
        sys.stderr.write(f"hadoop: {message}\n")
    try:
        if args.action == "up":
            up(args.workdir, args.hdfs_port, args.timeout, log, free_ports=args.free_ports)
        elif args.action == "down":
            down(args.workdir, log)
        elif args.action == "env":
            print("\n".join(env_lines(args.workdir)))
        else:
            alive = running(args.workdir)
            for name in DAEMONS:
                log(f"{name}: " + (f"running (pid {alive[name]})" if name in alive
                                   else "not running"))
            if len(alive) < len(DAEMONS):
                return 1
            state = health(args.workdir)
            log(f"HDFS hdfs://127.0.0.1:{_recorded_port(args.workdir)}: safe mode "
                f"{'on' if state['safemode'] else 'off'}, {state['datanodes']} live "
                f"DataNode(s); YARN: {state['nodemanagers']} NodeManager(s)")
            return 0 if _ready(state) else 1
    except ClusterError as exc:
        sys.stderr.write(f"hadoop: error: {exc}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
