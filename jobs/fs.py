"""The few filesystem operations samplegen needs, on local paths and HDFS.

Local paths (and ``file://`` URIs) use the os module.  Other URIs
(``hdfs://...``, ``viewfs://``, ``s3a://`` ...) go through the ``hdfs dfs``
command line, so they work wherever a Hadoop client is installed (on the
cluster's nodes and gateways) without a Python HDFS library.

Writes are atomic: a writer streams into a temporary name in the destination
directory and renames it into place on success, so a failed or retried task
never leaves a half-written part file under its final name.  This module is
the one home of that protocol: block files, exports, the tbs command line's
outputs and the files of a tbs STATE (:func:`write_atomic`) all use it.
Missing parent directories of an output are created (:func:`make_parents`);
an existing ancestor that is a file is refused by name.
"""
import errno
import os
import re
import shutil
import subprocess
import uuid

from samplegen.udfs.errors import InputError, OutputError


def is_local(uri):
    return "://" not in uri or uri.startswith("file://")


def local_path(uri):
    return uri[len("file://"):] if uri.startswith("file://") else uri


def get_fs(uri):
    return LOCAL if is_local(uri) else HADOOP


def join(base, *parts):
    return "/".join([base.rstrip("/")] + [p.strip("/") for p in parts])


def literal_glob(uri):
    """*uri* as a glob pattern that matches only itself, for tools that expand
    the paths they are given (mrjob, Hadoop): ``[``, ``*``, ``?`` ... in a
    name are escaped, never expanded."""
    if is_local(uri):
        import glob
        return glob.escape(uri)  # Python's glob: mrjob's local filesystem
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", uri)  # Hadoop's GlobPattern


def direct_io_enabled():
    """Whether large local writes bypass the page cache (``SAMPLEGEN_DIRECT_IO``,
    default on where the platform has ``O_DIRECT``; ``0`` turns it off)."""
    return hasattr(os, "O_DIRECT") and os.environ.get("SAMPLEGEN_DIRECT_IO", "1") != "0"


def missing_dirs(path):
    """The directories that creating local *path* needs, outermost first
    (none if its parent exists); OutputError if an existing ancestor is a
    file rather than a directory."""
    missing = []
    parent = os.path.dirname(os.path.abspath(local_path(path)))
    while not os.path.isdir(parent):
        if os.path.lexists(parent):
            raise OutputError(f"cannot create {path}: {parent} is a file, not a directory")
        missing.append(parent)
        parent = os.path.dirname(parent)
    return missing[::-1]


def make_parents(path):
    """Create the missing parent directories of local *path* (as ``mkdir -p``);
    returns the ones created, outermost first (see :func:`remove_dirs`)."""
    missing = missing_dirs(path)
    if missing:
        os.makedirs(missing[-1], exist_ok=True)
    return missing


def remove_dirs(created):
    """Remove what :func:`make_parents` created, innermost first, as far as
    the directories are empty (a failed output leaves no new directories)."""
    for directory in reversed(created):
        try:
            os.rmdir(directory)
        except OSError:  # not empty: another output lives there now
            break


def write_atomic(uri, data, fsync=False):
    """Write the bytes *data* to *uri* whole or not at all: a temporary name
    beside it, then a rename (over the file there, if any).  Missing parent
    directories of a local *uri* are created.  *fsync*: the bytes reach the
    disk before the rename (the rename itself is durable once the caller
    fsyncs the directory)."""
    if is_local(uri):
        make_parents(uri)
    get_fs(uri).write_bytes(uri, data, fsync=fsync)


def _staging_name(path):
    """A temporary name beside *path* to write, then rename.  *path*'s
    directory is created, but not its parent: a task that outlives its run
    (a killed driver's orphans) must not recreate the run's removed staging
    directory; it fails instead."""
    directory, name = os.path.split(path)
    if directory and not os.path.isdir(directory):
        try:
            os.mkdir(directory)
        except FileExistsError:
            pass
    return os.path.join(directory, f".{name}.tmp-{uuid.uuid4().hex[:12]}")


class _AtomicLocalWriter:
    def __init__(self, path, fsync=False):
        self.path = path
        self.tmp = _staging_name(path)
        self.file = open(self.tmp, "wb")
        self.bytes = 0
        self.fsync = fsync

    def write(self, data):
        self.file.write(data)
        self.bytes += len(data)

    def close(self):
        if self.fsync:
            self.file.flush()
            os.fsync(self.file.fileno())
        self.file.close()
        os.replace(self.tmp, self.path)

    def abort(self):
        self.file.close()
        if os.path.exists(self.tmp):
            os.remove(self.tmp)


class _DirectLocalWriter:
    """An atomic local writer that bypasses the page cache (``O_DIRECT``).

    Sample part files are large, written once and read later (often by
    another machine or process): through the page cache every written byte
    first takes a fresh page of memory -- on virtual machines that hand
    freed memory back to the host, the most expensive part of writing
    (measured: 2 GB in 4.8 s buffered against 0.9 s direct).  Data is copied
    into two page-aligned 2 MiB buffers in turn; a full buffer is written by a
    background thread (a direct write waits for the device, and meanwhile the
    caller fills the other buffer).  The tail that is not a whole number of
    4 KiB sectors is written buffered.  Where the filesystem refuses
    ``O_DIRECT`` (tmpfs, some network filesystems) the writer falls back to
    ordinary writes; the bytes are the same either way.
    """

    CHUNK = 2 << 20
    ALIGN = 4096

    def __init__(self, path):
        import mmap
        self.path = path
        self.tmp = _staging_name(path)
        self.bytes = 0
        self.direct = True
        try:
            self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        except OSError:
            self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self.direct = False
        self.buffers = [mmap.mmap(-1, self.CHUNK)]       # page-aligned; the second one when needed
        self.views = [memoryview(self.buffers[0])]
        self.current = 0
        self.fill = 0
        self.pool = None      # the writing thread, from the first full buffer
        self.pending = None   # its write in flight

    def write(self, data):
        data = memoryview(data).cast("B")
        self.bytes += len(data)
        while len(data):
            view = self.views[self.current]
            n = min(len(data), self.CHUNK - self.fill)
            view[self.fill:self.fill + n] = data[:n]
            self.fill += n
            data = data[n:]
            if self.fill == self.CHUNK:
                self._hand_over()

    def _hand_over(self):
        """Write the full current buffer in the background; continue in the other."""
        import mmap
        from concurrent.futures import ThreadPoolExecutor
        if self.pool is None:
            self.pool = ThreadPoolExecutor(1, thread_name_prefix="samplegen-write")
            self.buffers.append(mmap.mmap(-1, self.CHUNK))
            self.views.append(memoryview(self.buffers[1]))
        self._wait()
        self.pending = self.pool.submit(self._write_all, self.views[self.current])
        self.current = 1 - self.current
        self.fill = 0

    def _wait(self):
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending.result()                              # re-raises the thread's error

    def _buffered(self):
        if self.direct:
            import fcntl
            flags = fcntl.fcntl(self.fd, fcntl.F_GETFL)
            fcntl.fcntl(self.fd, fcntl.F_SETFL, flags & ~os.O_DIRECT)
            self.direct = False

    def _write_all(self, piece):
        """Write *piece* (whole sectors unless it is the file's tail)."""
        done = 0
        while done < len(piece):
            rest = piece[done:]
            if self.direct and (len(rest) % self.ALIGN or done % self.ALIGN):
                self._buffered()
            try:
                done += os.write(self.fd, rest)
            except OSError as exc:
                if not self.direct or exc.errno != errno.EINVAL:
                    raise
                self._buffered()  # the filesystem refuses direct writes here

    def _release(self):
        if self.pool is not None:
            self.pool.shutdown(wait=True)
            self.pool = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        for view in self.views:
            view.release()
        for buffer in self.buffers:
            buffer.close()
        self.views = self.buffers = []

    def close(self):
        try:
            self._wait()
            view = self.views[self.current]
            aligned = self.fill // self.ALIGN * self.ALIGN
            if aligned:
                self._write_all(view[:aligned])
            if self.fill > aligned:
                self._write_all(view[aligned:self.fill])
        except BaseException:
            self.abort()
            raise
        self._release()
        os.replace(self.tmp, self.path)

    def abort(self):
        if self.fd is not None:
            try:
                self._wait()
            except Exception:
                pass
            self._release()
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

    def open_atomic(self, uri, direct=False, fsync=False):
        """A writer to *uri* that appears there complete or not at all;
        *direct*: a large file, written bypassing the page cache where allowed
        (see :func:`direct_io_enabled`); *fsync*: flushed to disk before it
        is renamed into place."""
        if direct and direct_io_enabled() and not fsync:
            return _DirectLocalWriter(local_path(uri))
        return _AtomicLocalWriter(local_path(uri), fsync=fsync)

    def write_bytes(self, uri, data, fsync=False):
        writer = self.open_atomic(uri, fsync=fsync)
        try:
            writer.write(data)
            writer.close()
        except BaseException:
            writer.abort()
            raise

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

    def open_atomic(self, uri, direct=False, fsync=False):
        return _AtomicHadoopWriter(self, uri)  # fsync: -put returns once HDFS has the file

    def write_bytes(self, uri, data, fsync=False):
        writer = self.open_atomic(uri)
        try:
            writer.write(data)
        except BaseException:
            writer.abort()
            raise
        writer.close()

    def rename(self, src, dst):
        self._run("-mv", src, dst)

    def rmtree(self, uri):
        self._run("-rm", "-r", "-f", "-skipTrash", uri, check=False)

    def touch(self, uri):
        self._run("-touchz", uri)


LOCAL = LocalFS()
HADOOP = HadoopFS()
