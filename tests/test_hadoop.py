"""A real single-node Hadoop (``make hadoop-up``: Apache's NameNode, DataNode,
ResourceManager and NodeManager on 127.0.0.1): its launchers, WebHDFS, a
streaming job, and samplegen's ``--runner hadoop`` on HDFS paths giving the
same bytes as the inline runner."""
import json
import os
import subprocess
import sys
import urllib.request

import pytest

from samplegen.jobs import cluster, fs

from .cluster_jobs import UBER_JOBCONF, write_mrjob_conf
from .conftest import hdfs_directory, in_process, sample_digests

pytestmark = pytest.mark.hadoop


def run(hadoop, *cmd, input=None, timeout=300):
    """Run *cmd* with the cluster's environment; its stdout (bytes), or a
    failed assertion with its stderr."""
    proc = subprocess.run([str(c) for c in cmd], env=hadoop["env"], input=input,
                          capture_output=True, timeout=timeout)
    assert proc.returncode == 0, (cmd, proc.stderr.decode(errors="replace")[-3000:])
    return proc.stdout


@pytest.fixture(scope="module")
def hdfs_dir(cluster_env):
    """A fresh HDFS directory for this module's files (its absolute path),
    removed afterwards; made and removed through WebHDFS (a ``hdfs dfs``
    process is a JVM start: the launchers are test_launchers_run_the_pinned_hadoop's
    and test_put_and_cat_round_trip's subject)."""
    for uri in hdfs_directory("hadoop"):
        yield uri[len("hdfs://"):]


def test_launchers_run_the_pinned_hadoop(hadoop):
    assert run(hadoop, "hadoop", "version").decode().startswith("Hadoop 3.4.1\n")
    nodes = run(hadoop, "yarn", "node", "-list").decode()
    assert "Total Nodes:1" in nodes and "RUNNING" in nodes
    assert b"JobId" in run(hadoop, "mapred", "job", "-list")
    assert b"Total number of applications" in run(hadoop, "yarn", "application", "-list",
                                                  "-appStates", "ALL")
    report = run(hadoop, "hdfs", "dfsadmin", "-report").decode()
    assert "Live datanodes (1)" in report


def test_put_and_cat_round_trip(hadoop, hdfs_dir, tmp_path):
    data = bytes(range(256)) * 1000 + b"\nlast line without newline"
    local = tmp_path / "blob.bin"
    local.write_bytes(data)
    run(hadoop, "hdfs", "dfs", "-put", local, f"{hdfs_dir}/blob.bin")
    assert run(hadoop, "hdfs", "dfs", "-cat", f"hdfs:///{hdfs_dir.lstrip('/')}/blob.bin") == data
    assert run(hadoop, "hadoop", "fs", "-cat", f"{hdfs_dir}/blob.bin") == data


def test_webhdfs_answers_on_loopback(hadoop, hdfs_dir):
    run(hadoop, "hdfs", "dfs", "-put", "-", f"{hdfs_dir}/web.txt", input=b"hello\n")
    url = f"{hadoop['webhdfs']}{hdfs_dir}?op=LISTSTATUS&user.name=samplegen"
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url, timeout=30) as resp:
        listing = json.loads(resp.read())
    names = {s["pathSuffix"]: s for s in listing["FileStatuses"]["FileStatus"]}
    assert names["web.txt"]["length"] == 6 and names["web.txt"]["type"] == "FILE"
    with urllib.request.urlopen(f"{hadoop['webhdfs']}{hdfs_dir}/web.txt?op=OPEN"
                                "&user.name=samplegen", timeout=30) as resp:
        assert resp.read() == b"hello\n"   # redirected to the DataNode, on 127.0.0.1 too


def _listening(pids):
    """``{(address, port)}`` of the TCP sockets *pids* listen on (from /proc)."""
    inodes = set()
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        for fd in os.listdir(fd_dir):
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:   # state LISTEN
                address, port = fields[1].split(":")
                found.add((address, int(port, 16)))
    return found


def _is_loopback(hex_address):
    raw = bytes.fromhex(hex_address)
    if len(raw) == 4:
        return raw[::-1][0] == 127                       # little-endian IPv4
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))   # IPv6, per 32-bit word
    return words == bytes(15) + b"\x01" or (words[:12] == bytes(10) + b"\xff\xff"
                                              and words[12] == 127)


def test_every_daemon_listens_on_loopback_only(hadoop):
    pids = cluster.running(hadoop["workdir"]).values()
    sockets = _listening(pids)
    assert len(sockets) >= 12, sockets
    assert not [s for s in sockets if not _is_loopback(s[0])], sockets
    assert ("0100007F", cluster.ports(hadoop["workdir"])["shuffle"]) in sockets   # 127.0.0.1


def test_the_test_cluster_takes_free_ports_and_a_directory_of_its_own(hadoop):
    """The tests' cluster stays off Hadoop's default ports and the user's
    work/hadoop, so a clean clone's tests run beside a cluster that holds
    them: every daemon listens on the ports recorded for its work directory,
    none of them a default one."""
    if os.environ.get("HDFS_PORT"):
        pytest.skip("HDFS_PORT is set: the tests' cluster takes the default ports")
    at = cluster.ports(hadoop["workdir"])
    assert os.path.basename(hadoop["workdir"]) != "hadoop"
    assert not set(at.values()) & set(cluster.PORTS.values())
    assert hadoop["hdfs_port"] != cluster.DEFAULT_HDFS_PORT
    listening = {port for _, port in _listening(cluster.running(hadoop["workdir"]).values())}
    expected = {hadoop["hdfs_port"]} | {at[name] for name in at if name != "jobhistory"}
    assert expected <= listening, expected - listening


def test_free_ports_are_distinct_and_reach_every_setting(tmp_path):
    """The configuration of a cluster on chosen ports names those ports and
    no default one (no JVM)."""
    hdfs_port, at = cluster._free_ports()
    assert len({hdfs_port, *at.values()}) == len(at) + 1
    config = cluster.site_config(str(tmp_path), hdfs_port, ports=at)
    text = json.dumps(config)
    for name, port in cluster.PORTS.items():
        if name != "jobhistory" and port != at[name]:
            assert f":{port}\"" not in text and f": {port}," not in text, name
    assert config["core-site.xml"]["fs.defaultFS"].endswith(f":{hdfs_port}")
    assert config["mapred-site.xml"]["mapreduce.shuffle.port"] == at["shuffle"]


def test_ports_taken_while_the_cluster_starts_are_chosen_again():
    """A port chosen because nothing listened on it can be bound by another
    process (its own free port) before the daemon binds it: the start is
    tried again on other ports, a set number of times, and only for that
    (no JVM)."""
    taken = ("the resourcemanager exited during startup: Caused by: "
             "java.net.BindException: Address already in use")
    tried, logged = [], []

    def start(ports):
        tried.append(ports)
        if len(tried) < 3:
            raise cluster.PortTakenError(taken)
        return "up"

    chosen = iter([(2, {}), (3, {})])
    assert cluster.retry_taken_ports(start, (1, {}), lambda: next(chosen),
                                     logged.append) == "up"
    assert [p for p, _ in tried] == [1, 2, 3] and len(logged) == 2
    tried.clear()
    with pytest.raises(cluster.ClusterError, match="Address already in use"):
        cluster.retry_taken_ports(start, (1, {}), lambda: (9, {}), logged.append, attempts=2)
    assert len(tried) == 2                                  # gives up after its attempts

    def broken(ports):
        tried.append(ports)
        raise cluster.ClusterError("the namenode exited during startup: disk full")

    tried.clear()
    with pytest.raises(cluster.ClusterError, match="disk full"):
        cluster.retry_taken_ports(broken, (1, {}), lambda: (9, {}), logged.append)
    assert len(tried) == 1                                  # other failures are not retried


def test_streaming_job(hadoop, hdfs_dir, tmp_path):
    """Hadoop's streaming jar on YARN, in uber mode (``cluster_jobs.UBER_JOBCONF``:
    the tasks in the application master's container; tasks in containers
    of their own are test_samplegen_hadoop_runner_gives_the_inline_bytes's)."""
    lines = b"".join(b"line %d of the input\n" % i for i in range(1000))
    fs.get_fs(f"hdfs://{hdfs_dir}").write_bytes(f"hdfs://{hdfs_dir}/lines.txt", lines)
    uber = [w for k, v in UBER_JOBCONF.items() for w in ("-D", f"{k}={v}")]
    run(hadoop, "hadoop", "jar", hadoop["streaming_jar"], *uber,
        "-input", f"{hdfs_dir}/lines.txt", "-output", f"{hdfs_dir}/wc",
        "-mapper", "cat", "-reducer", "wc -l")
    assert run(hadoop, "hdfs", "dfs", "-cat", f"{hdfs_dir}/wc/part-00000").split() == [b"1000"]


def test_samplegen_hadoop_runner_gives_the_inline_bytes(hadoop, hdfs_dir, tmp_path):
    """The real thing: hold-out on HDFS paths through mrjob's hadoop runner
    (the streaming jar, YARN containers, two reducers writing block files
    to HDFS) -- the same bytes as the inline runner on the local copy."""
    samplegen = [sys.executable, "-m", "samplegen"]
    local = tmp_path / "m"
    in_process("make-matrix", local, "--rows", 2000, "--cols", 10, "--block-size", 100,
               "--seed", 3)
    remote = fs.get_fs(f"hdfs://{hdfs_dir}")
    remote.upload(str(local), f"hdfs://{hdfs_dir}/m")
    conf = write_mrjob_conf(tmp_path / "mrjob.conf", hadoop["streaming_jar"])
    params = ["--ratio", 0.8, "--repeats", 2, "--seed", 7]
    run(hadoop, *samplegen, "-q", "holdout", f"hdfs://{hdfs_dir}/m", f"hdfs://{hdfs_dir}/ho",
        *params, "--runner", "hadoop", "--mrjob-conf", conf, timeout=900)
    in_process("holdout", local, tmp_path / "inline", *params, "--runner", "inline")
    remote.download(f"hdfs://{hdfs_dir}/ho", str(tmp_path / "from-hdfs"))
    on_hadoop = sample_digests(tmp_path / "from-hdfs")
    assert sorted(on_hadoop) == ["test-0", "test-1", "train-0", "train-1"]
    assert on_hadoop == sample_digests(tmp_path / "inline")
    with open(tmp_path / "from-hdfs" / "_manifest.json") as f:
        manifest = json.load(f)
    assert manifest["engine"]["runner"] == "hadoop"
    assert os.path.exists(tmp_path / "from-hdfs" / "_SUCCESS")


def test_weighted_samples_on_hdfs_give_the_inline_bytes(hadoop, hdfs_dir, tmp_path):
    """A weighted bootstrap through the hadoop runner: the driver writes the
    weights next to the run on HDFS, and the YARN task reads its rows'
    weights and the tree's chunk totals from there (uber mode: the point is
    the side file on HDFS, not the task layout)."""
    import numpy as np
    samplegen = [sys.executable, "-m", "samplegen"]
    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 5))
    X[:, 1] = rng.gamma(0.5, size=1500) * (np.arange(1500) % 7 != 0)
    np.save(tmp_path / "x.npy", X)
    local = tmp_path / "m"
    in_process("import", tmp_path / "x.npy", local, "--block-size", 200)
    remote = fs.get_fs(f"hdfs://{hdfs_dir}")
    remote.upload(str(local), f"hdfs://{hdfs_dir}/wm")
    conf = write_mrjob_conf(tmp_path / "mrjob.conf", hadoop["streaming_jar"], uber=True)
    params = ["--weights", "1", "--size", 1200, "--replace", "--samples", 2, "--seed", 7]
    run(hadoop, *samplegen, "-q", "weighted", f"hdfs://{hdfs_dir}/wm", f"hdfs://{hdfs_dir}/wo",
        *params, "--runner", "hadoop", "--mrjob-conf", conf, timeout=900)
    in_process("weighted", local, tmp_path / "inline", *params, "--runner", "inline")
    remote.download(f"hdfs://{hdfs_dir}/wo", str(tmp_path / "from-hdfs"))
    on_hadoop = sample_digests(tmp_path / "from-hdfs")
    assert sorted(on_hadoop) == ["sample-0", "sample-1"]
    assert on_hadoop == sample_digests(tmp_path / "inline")
    assert not [n for n in os.listdir(tmp_path / "from-hdfs") if n.startswith("_weights")]
