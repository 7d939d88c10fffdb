"""mrjob's hadoop runner with its HDFS operations on samplegen's filesystem
layer.

mrjob's own HDFS filesystem starts one ``hadoop fs`` process (a JVM, about a
second) per operation, and a job run makes several of them: ``hadoop
version``, one upload per file the job ships, the output's ``cat``, the
removal of its temporary directory -- 7 to 9 seconds of every run on a
cluster, whatever the data.  :class:`HadoopRunner` serves the same operations
through :mod:`jobs.fs` (WebHDFS for ``hdfs://``: milliseconds each) and reads
the Hadoop version from the installation's jars; only ``hadoop jar``, the
submission itself, still starts a JVM.  Paths with glob characters, and any
scheme the layer does not serve, stay with mrjob's ``hadoop fs``.

Jobs get it for ``-r hadoop`` through :class:`jobs.engines.mapreduce.ClusterJob`.
"""
import glob
import os
import re

from mrjob.cat import decompress
from mrjob.fs.base import Filesystem
from mrjob.fs.composite import CompositeFilesystem
from mrjob.fs.hadoop import HadoopFilesystem
from mrjob.fs.local import LocalFilesystem
from mrjob.hadoop import HadoopJobRunner

from samplegen.jobs import fs as fsmod

_SCHEMES = ("hdfs://", "webhdfs://")
_GLOB = re.compile(r"[*?\[\]{}\\]")
_COMMON_JAR = re.compile(r"hadoop-common-(\d[^/]*?)\.jar$")


class LayerFilesystem(Filesystem):
    """mrjob's filesystem interface over :mod:`jobs.fs`, for ``hdfs://`` and
    ``webhdfs://`` paths without glob characters."""

    def can_handle_path(self, path):
        return path.startswith(_SCHEMES) and not _GLOB.search(path)

    def ls(self, path_glob):
        """Every file at or below *path_glob*, named as mrjob named the
        directory (it cuts its own prefix off the names it gets back)."""
        remote = fsmod.get_fs(path_glob)
        if not remote.exists(path_glob):
            return
        if not remote.isdir(path_glob):
            yield path_glob
            return
        top = remote.fs._strip_protocol(path_glob).rstrip("/")
        for found in sorted(remote.fs.find(path_glob)):
            yield path_glob.rstrip("/") + found[len(top):]

    def _cat_file(self, path):
        with fsmod.get_fs(path).open_read(path) as f:
            yield from decompress(f, path)

    def du(self, path_glob):
        return sum(fsmod.get_fs(path).size(path) for path in self.ls(path_glob))

    def exists(self, path_glob):
        return fsmod.get_fs(path_glob).exists(path_glob)

    def mkdir(self, path):
        fsmod.get_fs(path).makedirs(path)

    def put(self, src, path):
        fsmod.get_fs(path).upload(src, path)

    def rm(self, path_glob):
        fsmod.get_fs(path_glob).rmtree(path_glob)

    def touchz(self, path):
        remote = fsmod.get_fs(path)
        if remote.exists(path) and remote.size(path):
            raise OSError(f"non-empty file {path!r} already exists")
        remote.write_bytes(path, b"")


class _HadoopFilesystem(HadoopFilesystem):
    """mrjob's ``hadoop fs`` filesystem, which learns the Hadoop version from
    the installation's ``hadoop-common`` jar instead of a ``hadoop version``
    process (and asks the process only where no such jar is found)."""

    def get_hadoop_version(self):
        if not getattr(self, "_installed_version", None):
            self._installed_version = (installed_version(self.get_hadoop_bin()[0])
                                       or super().get_hadoop_version())
        return self._installed_version


def installed_version(hadoop_bin):
    """The version of the Hadoop installation whose launcher is *hadoop_bin*
    (``<home>/bin/hadoop``, its ``hadoop-common`` jar in
    ``<home>/share/hadoop/common/`` as Apache's tarball has it, or in
    ``<home>/lib/`` as ``make hadoop-up`` has it), or None."""
    launcher = hadoop_bin if os.sep in hadoop_bin else _which(hadoop_bin)
    if not launcher:
        return None
    home = os.path.dirname(os.path.dirname(os.path.realpath(launcher)))
    jars = [jar for where in (("share", "hadoop", "common"), ("lib",))
            for jar in glob.glob(os.path.join(home, *where, "hadoop-common-*.jar"))]
    versions = {m.group(1) for jar in jars
                for m in [_COMMON_JAR.search(jar)] if m and "-tests" not in jar}
    return versions.pop() if len(versions) == 1 else None


def _which(name):
    for directory in os.environ.get("PATH", "").split(os.pathsep):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            return path
    return None


class HadoopRunner(HadoopJobRunner):
    """mrjob's hadoop runner, its filesystem operations on :mod:`jobs.fs`
    first (see the module's documentation)."""

    @property
    def fs(self):
        if self._fs is None:
            self._fs = CompositeFilesystem()
            self._fs.add_fs("layer", LayerFilesystem())
            self._fs.add_fs("hadoop", _HadoopFilesystem(self._opts["hadoop_bin"] or None))
            self._fs.add_fs("local", LocalFilesystem())
        return self._fs

