"""The few filesystem operations samplegen needs, on local paths and HDFS.

Local paths (and ``file://`` URIs) use the os module.  Other URIs
(``hdfs://...``, ``viewfs://``, ``s3a://`` ...) go through the ``hdfs dfs``
command line, so they work wherever a Hadoop client is installed (on the
cluster's nodes and gateways) without a Python HDFS library.

Writes of block files are atomic: a writer streams into a temporary name in
the destination directory and renames it into place on success, so a failed
or retried task never leaves a half-written part file under its final name.
"""
import os
import shutil
import subprocess
import uuid

from udfs.errors import InputError, OutputError


def is_local(uri):
    return "://" not in uri or uri.startswith("file://")


def local_path(uri):
    return uri[len("file://"):] if uri.startswith("file://") else uri


def get_fs(uri):
    return LOCAL if is_local(uri) else HADOOP


def join(base, *parts):
    return "/".join([base.rstrip("/")] + [p.strip("/") for p in parts])


class _AtomicLocalWriter:
    def __init__(self, path):
        self.path = path
        directory, name = os.path.split(path)
        os.makedirs(directory or ".", exist_ok=True)
        self.tmp = os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex[:12]}")
        self.file = open(self.tmp, "wb")
        self.bytes = 0

    def write(self, data):
        self.file.write(data)
        self.bytes += len(data)

    def close(self):
        self.file.close()
        os.replace(self.tmp, self.path)

    def abort(self):
        self.file.close()
        if os.path.exists(self.tmp):
            os.remove(self.tmp)


class LocalFS:
    """Local filesystem."""

    def exists(self, uri):
        return os.path.exists(local_path(uri))

    def isdir(self, uri):
        return os.path.isdir(local_path(uri))

    def listdir(self, uri):
        return sorted(os.listdir(local_path(uri)))

    def size(self, uri):
        return os.path.getsize(local_path(uri))

    def makedirs(self, uri):
        os.makedirs(local_path(uri), exist_ok=True)

    def read_bytes(self, uri):
        with open(local_path(uri), "rb") as f:
            return f.read()

    def open_read(self, uri):
        return open(local_path(uri), "rb")

    def open_atomic(self, uri):
        return _AtomicLocalWriter(local_path(uri))

    def write_bytes(self, uri, data):
        writer = self.open_atomic(uri)
        try:
            writer.write(data)
        except BaseException:
            writer.abort()
            raise
        writer.close()

    def rename(self, src, dst):
        os.rename(local_path(src), local_path(dst))

    def rmtree(self, uri):
        path = local_path(uri)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.remove(path)

    def touch(self, uri):
        open(local_path(uri), "ab").close()


class _AtomicHadoopWriter:
    def __init__(self, fs, uri):
        self.fs, self.uri = fs, uri
        directory, name = uri.rsplit("/", 1)
        self.tmp = f"{directory}/.{name}.tmp-{uuid.uuid4().hex[:12]}"
        fs.makedirs(directory)
        self.proc = subprocess.Popen(fs.command("-put", "-f", "-", self.tmp),
                                     stdin=subprocess.PIPE, stderr=subprocess.PIPE)
        self.bytes = 0

    def write(self, data):
        self.proc.stdin.write(data)
        self.bytes += len(data)

    def close(self):
        self.proc.stdin.close()
        err = self.proc.stderr.read()
        if self.proc.wait() != 0:
            raise OutputError(f"cannot write {self.uri}: {err.decode(errors='replace').strip()}")
        self.fs.rmtree(self.uri)
        self.fs.rename(self.tmp, self.uri)

    def abort(self):
        try:
            self.proc.stdin.close()
        finally:
            self.proc.wait()
            self.fs.rmtree(self.tmp)


class HadoopFS:
    """Any Hadoop-compatible filesystem, through the ``hdfs dfs`` client
    (override the command with $SAMPLEGEN_HDFS_CMD, e.g. ``hadoop fs``)."""

    def command(self, *args):
        base = os.environ.get("SAMPLEGEN_HDFS_CMD", "hdfs dfs").split()
        return base + list(args)

    def _run(self, *args, check=True):
        try:
            proc = subprocess.run(self.command(*args), capture_output=True)
        except FileNotFoundError:
            raise InputError("cannot reach the Hadoop filesystem: the 'hdfs' command is not "
                             "installed (set SAMPLEGEN_HDFS_CMD)") from None
        if check and proc.returncode != 0:
            raise InputError(f"hdfs dfs {' '.join(args)} failed: "
                             f"{proc.stderr.decode(errors='replace').strip()}")
        return proc

    def exists(self, uri):
        return self._run("-test", "-e", uri, check=False).returncode == 0

    def isdir(self, uri):
        return self._run("-test", "-d", uri, check=False).returncode == 0

    def listdir(self, uri):
        out = self._run("-ls", "-C", uri).stdout.decode().split()
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in out)

    def size(self, uri):
        return int(self._run("-stat", "%b", uri).stdout.decode().strip())

    def makedirs(self, uri):
        self._run("-mkdir", "-p", uri)

    def read_bytes(self, uri):
        return self._run("-cat", uri).stdout

    def open_read(self, uri):
        proc = subprocess.Popen(self.command("-cat", uri), stdout=subprocess.PIPE)
        return proc.stdout

    def open_atomic(self, uri):
        return _AtomicHadoopWriter(self, uri)

    def write_bytes(self, uri, data):
        writer = self.open_atomic(uri)
        writer.write(data)
        writer.close()

    def rename(self, src, dst):
        self._run("-mv", src, dst)

    def rmtree(self, uri):
        self._run("-rm", "-r", "-f", "-skipTrash", uri, check=False)

    def touch(self, uri):
        self._run("-touchz", uri)


LOCAL = LocalFS()
HADOOP = HadoopFS()
