"""The filesystem layer: where ``hdfs://`` URIs are served from, and the
local half of its contract.  The same operations against a real HDFS are in
tests/test_hadoop.py."""
import os

import pytest

from samplegen.jobs import fs
from samplegen.udfs.errors import InputError


def _site(directory, name, props):
    body = "".join(f"<property><name>{k}</name><value>{v}</value></property>"
                   for k, v in props.items())
    (directory / name).write_text(f"<?xml version=\"1.0\"?><configuration>{body}"
                                  "</configuration>")


@pytest.fixture
def conf_dir(tmp_path, monkeypatch):
    _site(tmp_path, "core-site.xml", {"fs.defaultFS": "hdfs://nn.example:8020"})
    _site(tmp_path, "hdfs-site.xml", {"dfs.namenode.http-address": "nn.example:50070"})
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    monkeypatch.delenv("SAMPLEGEN_WEBHDFS", raising=False)
    return tmp_path


def test_default_hdfs_is_the_configured_namenode(conf_dir):
    assert fs.webhdfs_address("hdfs:///data/m") == ("nn.example", 50070)
    assert fs.webhdfs_address("hdfs://nn.example:8020/data/m") == ("nn.example", 50070)


def test_another_namenode_gets_the_default_http_port(conf_dir):
    assert fs.webhdfs_address("hdfs://other:8020/x") == ("other", fs.WEBHDFS_PORT)
    assert fs.webhdfs_address("webhdfs://gw:14000/x") == ("gw", 14000)


def test_the_endpoint_can_be_named(conf_dir, monkeypatch):
    monkeypatch.setenv("SAMPLEGEN_WEBHDFS", "httpfs.example:14000")
    assert fs.webhdfs_address("hdfs:///x") == ("httpfs.example", 14000)


def test_default_hdfs_without_configuration_says_what_to_set(tmp_path, monkeypatch):
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))     # no site files
    monkeypatch.delenv("SAMPLEGEN_WEBHDFS", raising=False)
    with pytest.raises(InputError, match="HADOOP_CONF_DIR"):
        fs.webhdfs_address("hdfs:///x")


def test_local_read_range_and_atomic_writes(tmp_path):
    path = str(tmp_path / "f.bin")
    fs.write_atomic(path, b"0123456789")
    assert fs.LOCAL.read_range(path, 3, 4) == b"3456"
    assert fs.LOCAL.read_range(path, 8, 10) == b"89"
    writer = fs.LOCAL.open_atomic(path)
    writer.write(b"half")
    writer.abort()
    assert open(path, "rb").read() == b"0123456789"
    assert os.listdir(tmp_path) == ["f.bin"]


def test_fsspec_of_local_paths(tmp_path):
    filesystem, path = fs.fsspec_of(str(tmp_path / "a"))
    assert path == str(tmp_path / "a")
    filesystem.makedirs(path)
    assert filesystem.isdir(path)


def test_temporaries_of_lost_attempts_are_removed(tmp_path):
    """A killed or lost task attempt leaves its writer's hidden temporary
    file; the commit removes those and nothing else."""
    (tmp_path / "s").mkdir()
    keep = ["part-v00000", ".owner", "_matrix.json", ".hidden.tmp-notours"]
    for name in keep:
        (tmp_path / "s" / name).write_bytes(b"x")
    lost = fs.temporary_name("part-v00001")
    (tmp_path / "s" / lost).write_bytes(b"half")
    fs.LOCAL.remove_temporaries(str(tmp_path))
    assert sorted(os.listdir(tmp_path / "s")) == sorted(keep)


def test_an_unreachable_namenode_is_one_line_not_a_missing_file(conf_dir, monkeypatch):
    """Nothing answers: that is said, not taken for "not found"."""
    from samplegen.jobs import daemons
    monkeypatch.setenv("SAMPLEGEN_WEBHDFS", f"127.0.0.1:{daemons.free_port()}")
    monkeypatch.setattr(fs, "_REMOTE", {})
    with pytest.raises(InputError, match="cannot reach HDFS: no WebHDFS answers at http://127"):
        fs.get_fs("hdfs:///data/m").exists("hdfs:///data/m")


def test_hadoop_version_from_the_installations_jars(tmp_path):
    """The hadoop runner learns the version from the jars beside the
    launcher (Apache's tarball layout, or make hadoop-up's), without a JVM."""
    from samplegen.jobs.engines.hadoop_runner import installed_version
    home = tmp_path / "hadoop-3.3.6"
    (home / "bin").mkdir(parents=True)
    launcher = home / "bin" / "hadoop"
    launcher.write_text("#!/bin/sh\n")
    launcher.chmod(0o755)
    assert installed_version(str(launcher)) is None            # no jar: ask the process
    common = home / "share" / "hadoop" / "common"
    common.mkdir(parents=True)
    for name in ("hadoop-common-3.3.6.jar", "hadoop-common-3.3.6-tests.jar"):
        (common / name).write_bytes(b"")
    assert installed_version(str(launcher)) == "3.3.6"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "hadoop").symlink_to(launcher)        # a link on PATH
    assert installed_version(str(tmp_path / "bin" / "hadoop")) == "3.3.6"
    (common / "hadoop-common-3.4.0.jar").write_bytes(b"")      # two versions: ask the process
    assert installed_version(str(launcher)) is None


def test_a_full_disk_fails_a_direct_write_with_its_own_error(tmp_path, monkeypatch):
    """ENOSPC in the writing thread: that error, no temporary left behind (the
    views its traceback held once made closing the buffers fail instead)."""
    import errno
    real, calls = os.write, []

    def full(fd, data):
        calls.append(len(data))
        if len(calls) > 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", full)
    target = tmp_path / "part-00000"
    writer = fs.LOCAL.open_atomic(str(target), direct=True)
    with pytest.raises(OSError) as caught:
        try:
            for _ in range(5):
                writer.write(b"x" * (3 << 20))
            writer.close()
        except BaseException:
            writer.abort()
            raise
    assert caught.value.errno == errno.ENOSPC
    assert os.listdir(tmp_path) == []
