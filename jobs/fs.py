"""The one filesystem layer: every file samplegen reads or writes, on local
disks, HDFS and the stores fsspec reaches.

* Local paths (and ``file://`` URIs) use the os module (:class:`LocalFS`);
  large outputs bypass the page cache (``O_DIRECT``, :class:`_DirectLocalWriter`).
* ``hdfs://`` (and ``webhdfs://``) URIs go through WebHDFS, the NameNode's
  HTTP interface, as an fsspec filesystem: no Hadoop client, no JVM start
  per operation (about 2 ms per metadata operation against ~1 s for an
  ``hdfs dfs`` process).  The endpoint comes from ``$HADOOP_CONF_DIR``
  (:func:`webhdfs_address`), as a cluster gateway has it.
* Any other URI (``s3://``, ``gs://``, ``memory://`` ...) goes to the
  filesystem fsspec registers for it (its package installed).

Writes are atomic: a writer streams into a temporary name in the destination
directory and renames it into place on success, so a failed or retried task
never leaves a half-written file under its final name.  On HDFS the rename is
one NameNode operation (``RENAME`` with ``renameoptions``: replace the target,
or refuse an existing one); object stores have no atomic rename, so there a
"rename" is a copy and a delete, and a reader may see a target being written
(see docs/HADOOP.md).  This module is the one home of that protocol: block
files, exports, the tbs command line's outputs and the files of a tbs STATE
(:func:`write_atomic`) all use it.  Missing parent directories of a local
output are created (:func:`make_parents`); an existing ancestor that is a file
is refused by name.
"""
import contextlib
import errno
import getpass
import io
import os
import re
import shutil
import tempfile
import threading
import time
import uuid

from samplegen.udfs.errors import InputError, OutputError


def is_local(uri):
    return "://" not in uri or uri.startswith("file://")


def local_path(uri):
    return uri[len("file://"):] if uri.startswith("file://") else uri


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
    file rather than a directory, or if *path* itself is a symbolic link
    (:func:`check_not_link`).  Every command calls it on its output before
    any work."""
    check_not_link(path)
    missing = []
    parent = os.path.dirname(os.path.abspath(local_path(path)))
    while not os.path.isdir(parent):
        if os.path.lexists(parent):
            raise OutputError(f"cannot create {path}: {parent} is a file, not a directory")
        missing.append(parent)
        parent = os.path.dirname(parent)
    return missing[::-1]


def check_not_link(path):
    """OutputError if local *path* is a symbolic link (dangling or not).
    samplegen replaces an output by renaming a new one into its place, which
    would replace the link rather than write where it points; it refuses
    instead, naming the target to give."""
    path = local_path(path).rstrip("/") or "/"
    if not os.path.islink(path):
        return
    target = os.path.realpath(path)
    raise OutputError(f"{path} is a symbolic link to {target}; samplegen does not write "
                      f"through links: give the target ({target}) instead, or remove the link")


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


def scratch_dir(path):
    """*path*, a local scratch directory, made if it is missing (``None``
    stays ``None``: the system's temporary directory).  A run's scratch
    space is made only when an engine needs it: removing a directory waits
    for the filesystem's journal on some filesystems (ext4: over a second
    after gigabytes written bypassing the page cache), which a run that
    needed none should not pay."""
    if path is not None:
        os.makedirs(path, exist_ok=True)
    return path


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
    return os.path.join(directory, temporary_name(name))


#: what a writer's temporary file is called (:func:`temporary_name`)
_TEMPORARY = re.compile(r"^\..+\.tmp-[0-9a-f]{12}$")
#: ... and what a run's staging directory may be called on its way out
#: (:class:`jobs.store.StagedOutput`: discarded, or the old output it replaced)
_LEFTOVER = re.compile(r"^\..+\.tmp-[0-9a-f]{12}(\.discarded|\.old)?$")

#: the file in a staging directory whose lock its live run holds
OWNER = ".owner"
#: a staging directory without an owner file (the old output an --overwrite
#: moved aside, left by a kill) is stale once it is this old (seconds)
ORPHAN_SECONDS = 600


def temporary_name(name):
    """The hidden name a writer gives file *name* until it is complete."""
    return f".{name}.tmp-{uuid.uuid4().hex[:12]}"


def is_temporary(name):
    """Whether the file name *name* (no directory) is a writer's temporary name."""
    return bool(_TEMPORARY.match(name))


def _locked_temporary(path, flags=os.O_WRONLY):
    """``(temporary path, fd)``: a new temporary file beside local *path*,
    opened with *flags* and locked (``flock``) for as long as the fd is
    open, so that :func:`remove_stale_temporaries` never takes it for a
    dead writer's.  A file the remover unlinked between its creation and
    the lock is given up for a new one."""
    import fcntl
    directory, name = os.path.split(path)
    while True:
        tmp = os.path.join(directory, temporary_name(name))
        fd = os.open(tmp, flags | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink:
                return tmp, fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


@contextlib.contextmanager
def temporary_files(paths):
    """``{path: temporary path}`` for writers that write by name (numpy,
    pyarrow): an empty locked file beside each local path of *paths*, held
    while the block runs and removed after it unless it was renamed into
    place.  The stale temporaries of the paths' directories (dead writers'
    files, killed runs' staging directories) are removed first
    (:func:`remove_stale_temporaries`)."""
    for directory in {os.path.dirname(os.path.abspath(local_path(p))) for p in paths}:
        remove_stale_temporaries(directory)
    held = {}
    try:
        for path in paths:
            tmp, fd = _locked_temporary(os.path.abspath(local_path(path)))
            held[path] = (tmp, fd)
        yield {path: tmp for path, (tmp, _) in held.items()}
    finally:
        for tmp, fd in held.values():
            try:
                if os.path.lexists(tmp):
                    os.remove(tmp)
            finally:
                os.close(fd)


def remove_stale_temporaries(directory):
    """Remove what dead writers left in local *directory*: temporary files
    (:func:`temporary_name`) whose lock is free, staging directories of runs
    (``.<name>.tmp-<id>``) whose ``.owner`` lock is free, and staging
    directories without an owner file older than :data:`ORPHAN_SECONDS`.  A
    live writer holds its lock, so nothing of it is touched; a killed one's
    lock went with its process.  Every command that writes an output
    calls this on the output's directory before it writes."""
    import fcntl
    directory = local_path(directory)
    try:
        entries = os.listdir(directory)
    except OSError:
        return
    for entry in entries:
        if not _LEFTOVER.match(entry):
            continue
        path = os.path.join(directory, entry)
        if os.path.islink(path):
            continue
        directory_entry = os.path.isdir(path)
        try:
            lock = open(os.path.join(path, OWNER) if directory_entry else path, "rb")
        except FileNotFoundError:
            if directory_entry:
                try:
                    stale = time.time() - os.lstat(path).st_mtime > ORPHAN_SECONDS
                except FileNotFoundError:
                    continue
                if stale:
                    shutil.rmtree(path, ignore_errors=True)
            continue
        except OSError:
            continue
        with lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live writer holds it
            if directory_entry:
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass


class _AtomicLocalWriter:
    """An atomic local writer: a locked temporary file beside the target
    (:func:`_locked_temporary`), renamed into place on close.  An OSError
    names the target."""

    def __init__(self, path, fsync=False):
        self.path = path
        _staging_name(path)   # the directory, if it is missing
        self.tmp, fd = _locked_temporary(path)
        self.file = os.fdopen(fd, "wb")
        self.bytes = 0
        self.fsync = fsync

    def write(self, data):
        try:
            self.file.write(data)
        except OSError as exc:
            raise _naming(exc, self.path) from None
        self.bytes += len(data)

    def close(self):
        try:
            if self.fsync:
                self.file.flush()
                os.fsync(self.file.fileno())
            self.file.close()
        except OSError as exc:
            raise _naming(exc, self.path) from None
        os.replace(self.tmp, self.path)

    def abort(self):
        try:
            self.file.close()
        except OSError:     # the bytes it could not flush (a full disk)
            pass
        if os.path.exists(self.tmp):
            os.remove(self.tmp)


def _naming(exc, path):
    """*exc*, an OSError of a write, as the same error naming *path* (a
    write to a file descriptor names no file)."""
    if exc.filename is not None:
        return exc
    return type(exc)(exc.errno, exc.strerror or str(exc), path)


class _WriteResources:
    """The process's writing threads and spare 2 MiB buffers, shared by its
    :class:`_DirectLocalWriter` objects: each writer has at most one write
    in flight, so a few threads serve every writer of a run, and a buffer a
    finished writer gives back is the next one's (at most :attr:`SPARE`
    are kept: 16 MiB).  A forked child starts with none of its parent's."""

    SPARE = 8

    def __init__(self):
        self._lock = threading.Lock()
        self._pool = None
        self._spare = []

    def threads(self):
        """The writing threads (a ThreadPoolExecutor, started on first use)."""
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor
                self._pool = ThreadPoolExecutor(max(2, (os.cpu_count() or 1) + 1),
                                                thread_name_prefix="samplegen-write")
            return self._pool

    def buffer(self, size):
        """A page-aligned writable buffer of *size* bytes."""
        with self._lock:
            for i, buffer in enumerate(self._spare):
                if len(buffer) == size:
                    return self._spare.pop(i)
        import mmap
        return mmap.mmap(-1, size)

    def give_back(self, buffer):
        with self._lock:
            if len(self._spare) < self.SPARE:
                self._spare.append(buffer)
                return
        buffer.close()

    def forget(self):
        """In a forked child: the parent's threads are not there."""
        self._lock = threading.Lock()
        self._pool = None
        self._spare = []


_WRITING = _WriteResources()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_WRITING.forget)


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

    The buffers and the writing threads are the process's, shared by its
    writers (:class:`_WriteResources`): a run writes many part files, and a
    fresh thread and fresh buffer pages for each one cost more than their
    smaller files take to write (measured: 20 files of 14 MB in 0.33 s with
    their own, 0.28 s shared).
    """

    CHUNK = 2 << 20
    ALIGN = 4096

    def __init__(self, path):
        self.path = path
        self.tmp = _staging_name(path)
        self.bytes = 0
        self.direct = True
        try:
            self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_DIRECT, 0o644)
        except OSError:
            self.fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            self.direct = False
        self.buffers = [_WRITING.buffer(self.CHUNK)]      # page-aligned; the second one when needed
        self.views = [memoryview(self.buffers[0])]
        self.current = 0
        self.fill = 0
        self.pool = None      # the writing threads, from the first full buffer
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
        if self.pool is None:
            self.pool = _WRITING.threads()
            self.buffers.append(_WRITING.buffer(self.CHUNK))
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
                    # the traceback keeps this frame: no view of a buffer in it, or
                    # the buffer cannot be closed (and that error would hide this one)
                    piece = rest = None
                    raise _naming(exc, self.path) from None
                self._buffered()  # the filesystem refuses direct writes here

    def _release(self):
        """Close the file and give the buffers back (the caller waited for
        the write in flight)."""
        self.pool = None
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        try:
            for view in self.views:
                view.release()
        except BufferError:  # a view still held (a failure's traceback): freed with it
            pass
        else:
            for buffer in self.buffers:
                _WRITING.give_back(buffer)
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

    def read_range(self, uri, start, length):
        """*length* bytes of file *uri* from offset *start* (fewer at its end)."""
        with open(local_path(uri), "rb") as f:
            return os.pread(f.fileno(), length, start)

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

    def remove_temporaries(self, uri):
        """Delete the writers' temporary files below directory *uri* (left by
        task attempts that were killed, or lost to a faster twin)."""
        for directory, _, names in os.walk(local_path(uri)):
            for name in names:
                if _TEMPORARY.match(name):
                    try:
                        os.remove(os.path.join(directory, name))
                    except FileNotFoundError:
                        pass


# ---------------------------------------------------------------------------
# other filesystems: fsspec; HDFS through WebHDFS
# ---------------------------------------------------------------------------
#: NameNode HTTP port when the configuration does not say (Hadoop 3's default)
WEBHDFS_PORT = 9870


def _xml_properties(path):
    """``name -> value`` of a Hadoop ``*-site.xml`` file ({} if it is absent)."""
    import xml.etree.ElementTree as ET
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {}
    return {p.findtext("name", "").strip(): p.findtext("value", "").strip()
            for p in root.iter("property")}


def hadoop_conf():
    """The Hadoop client settings samplegen reads: ``core-site.xml`` and
    ``hdfs-site.xml`` of ``$HADOOP_CONF_DIR`` (or ``$HADOOP_HOME/etc/hadoop``),
    merged; {} without either."""
    conf_dir = os.environ.get("HADOOP_CONF_DIR")
    if not conf_dir and os.environ.get("HADOOP_HOME"):
        conf_dir = os.path.join(os.environ["HADOOP_HOME"], "etc", "hadoop")
    if not conf_dir:
        return {}
    conf = {}
    for name in ("core-site.xml", "hdfs-site.xml"):
        conf.update(_xml_properties(os.path.join(conf_dir, name)))
    return conf


def _authority(uri):
    """``(scheme, host, port)`` of a URI; host '' and port None where absent."""
    from urllib.parse import urlsplit
    parts = urlsplit(uri)
    try:
        port = parts.port
    except ValueError:
        raise InputError(f"bad port in {uri}") from None
    return parts.scheme, parts.hostname or "", port


def webhdfs_address(uri, conf=None):
    """``(host, port)`` of the WebHDFS endpoint that serves the HDFS URI *uri*.

    ``$SAMPLEGEN_WEBHDFS`` (``HOST:PORT``) names it for every ``hdfs://`` URI.
    Otherwise ``hdfs:///path`` means the cluster of ``fs.defaultFS``, and the
    NameNode's HTTP address is ``dfs.namenode.http-address`` when it belongs
    to the same host, else port 9870 of the URI's host; ``webhdfs://HOST:PORT``
    names the endpoint itself."""
    override = os.environ.get("SAMPLEGEN_WEBHDFS")
    scheme, host, port = _authority(uri)
    if override and scheme == "hdfs":
        host, _, port = override.rpartition(":")
        return host, int(port)
    if scheme == "webhdfs":
        return host or "127.0.0.1", port or WEBHDFS_PORT
    conf = hadoop_conf() if conf is None else conf
    if not host:
        default = conf.get("fs.defaultFS", "")
        if not default.startswith("hdfs://"):
            raise InputError(f"{uri} names the default HDFS, but no fs.defaultFS is configured: "
                             "set HADOOP_CONF_DIR to the cluster's configuration, or write "
                             "hdfs://NAMENODE:PORT/path")
        _, host, port = _authority(default)
    http = conf.get("dfs.namenode.http-address", "")
    if http:
        http_host, _, http_port = http.rpartition(":")
        if http_host in (host, "0.0.0.0"):
            return host, int(http_port)
    return host, WEBHDFS_PORT


def _webhdfs_class():
    """fsspec's WebHDFS filesystem, with the operations atomic commits need:
    rename that refuses or replaces an existing target, exclusive create,
    append, and streaming reads."""
    try:
        from fsspec.implementations.webhdfs import WebHDFS
    except ImportError as exc:
        raise InputError(f"hdfs:// paths need fsspec and requests ({exc}); "
                         "pip install fsspec requests") from None

    class AtomicWebHDFS(WebHDFS):
        def _call(self, op, method="get", path=None, data=None, redirect=True, **params):
            """One WebHDFS request; a RemoteException becomes the matching
            OSError, an unreachable NameNode an InputError."""
            import requests
            path = self._strip_protocol(path) if path is not None else ""
            params = dict(params, op=op.upper(), **self.pars)
            try:
                out = self.session.request(method.upper(), self.url + _quote_path(path),
                                           params=params, data=data, allow_redirects=redirect)
            except requests.ConnectionError as exc:
                why = "connection refused" if "refused" in str(exc) else type(exc).__name__
                raise InputError(f"cannot reach HDFS: no WebHDFS answers at "
                                 f"{self.url.split('/webhdfs/')[0]} ({why})") from None
            if out.status_code >= 400:
                _raise_remote(out, path)
            return out

        def _to_datanode(self, method, op, path, data=None, stream=False, **params):
            """The two steps of a data operation: the NameNode's redirect,
            then the request to the DataNode it names."""
            location = self._call(op, method, path, redirect=False, **params).headers["Location"]
            out = self.session.request(method.upper(), location, data=data, stream=stream,
                                       headers={"content-type": "application/octet-stream"})
            if out.status_code >= 400:
                _raise_remote(out, path)
            return out

        def exists(self, path, **kwargs):
            """Whether *path* exists; an unreachable or failing NameNode is an
            error, not a "no" (fsspec's own answers False to any exception)."""
            try:
                self.info(path)
                return True
            except FileNotFoundError:
                return False

        def isdir(self, path):
            try:
                return self.info(path)["type"] == "directory"
            except FileNotFoundError:
                return False

        def unstrip_protocol(self, name):
            """A URL any process can open: the cluster's ``hdfs://`` (or the
            ``webhdfs://``) URL of a path."""
            return name if "://" in name else self.prefix + name

        def rename2(self, src, dst, overwrite=False):
            self._call("RENAME", "put", src, destination=self._strip_protocol(dst),
                       renameoptions="OVERWRITE" if overwrite else "NONE")

        def create(self, path, data, overwrite=True):
            self._to_datanode("put", "CREATE", path, data,
                              overwrite="true" if overwrite else "false")

        def append(self, path, data):
            self._to_datanode("post", "APPEND", path, data)

        def cat_file(self, path, start=None, end=None, **kwargs):
            """A whole file in one ``OPEN`` (the NameNode's redirect and the
            DataNode's answer: fsspec's own asks for the file's status first)."""
            if start is not None or end is not None:
                return super().cat_file(path, start=start, end=end, **kwargs)
            return self._to_datanode("get", "OPEN", path).content

        def read_range(self, path, start, length):
            if length <= 0:
                return b""
            return self._to_datanode("get", "OPEN", path, offset=start, length=length).content

        def open_stream(self, path):
            response = self._to_datanode("get", "OPEN", path, stream=True)
            response.raw.decode_content = True
            response.raw.auto_close = False    # "closed" when closed, not at end of data
            return _ResponseReader(response)

    return AtomicWebHDFS


def _quote_path(path):
    from urllib.parse import quote
    return quote(path, safe="/")


def _raise_remote(response, path):
    try:
        remote = response.json()["RemoteException"]
        kind, message = remote.get("exception", ""), remote.get("message", "")
        message = message.split("\n", 1)[0].strip()   # not the server's stack trace
    except (ValueError, KeyError, TypeError):
        kind, message = "", response.text.strip()[:200]
    if kind == "FileNotFoundException" or response.status_code == 404:
        raise FileNotFoundError(errno.ENOENT, message, path)
    if kind in ("FileAlreadyExistsException", "AlreadyBeingCreatedException"):
        raise FileExistsError(errno.EEXIST, message, path)
    if kind in ("AccessControlException", "SecurityException"):
        raise PermissionError(errno.EACCES, message, path)
    raise OSError(errno.EIO, f"HDFS: {kind or response.status_code}: {message}", path)


class _ResponseReader(io.BufferedReader):
    """A streamed HTTP response body as a buffered binary file."""

    def __init__(self, response):
        super().__init__(response.raw, 1 << 20)
        self._response = response

    def close(self):
        try:
            super().close()
        finally:
            self._response.close()


_REMOTE = {}


def remote_fs(uri):
    """The fsspec filesystem for a non-local *uri* (one per cluster or store):
    ``hdfs://`` and ``webhdfs://`` through WebHDFS, anything else as fsspec
    resolves it (``s3://``, ``gs://``, ``memory://`` ...)."""
    scheme, host, port = _authority(uri)
    if scheme in ("hdfs", "webhdfs"):
        address = webhdfs_address(uri)
        if scheme == "webhdfs":
            prefix = "webhdfs://%s:%d" % address
        elif host:
            prefix = f"hdfs://{host}" + (f":{port}" if port else "")
        else:
            prefix = hadoop_conf().get("fs.defaultFS", "hdfs://").rstrip("/")
        key = ("webhdfs", prefix) + address
        if key not in _REMOTE:
            # a secure cluster: SPNEGO with the ticket of kinit (requests-kerberos);
            # otherwise simple authentication as $HADOOP_USER_NAME or the login name
            kerberos = hadoop_conf().get("hadoop.security.authentication") == "kerberos"
            user = None if kerberos else (os.environ.get("HADOOP_USER_NAME")
                                          or getpass.getuser())
            _REMOTE[key] = _webhdfs_class()(address[0], port=address[1], user=user,
                                            kerberos=kerberos, use_listings_cache=False,
                                            skip_instance_cache=True)
            _REMOTE[key].prefix = prefix
        return _REMOTE[key]
    key = (scheme, host, port)
    if key not in _REMOTE:
        try:
            import fsspec
            _REMOTE[key] = fsspec.core.url_to_fs(uri)[0]
        except (ImportError, ValueError) as exc:
            raise InputError(f"cannot open {uri}: {exc}") from None
    return _REMOTE[key]


def fsspec_of(url):
    """``(fsspec filesystem, path in it)`` of any URL or local path, for code
    that works with fsspec's interface (Parquet readers, directory walks)."""
    if is_local(url):
        import fsspec
        return fsspec.filesystem("file"), os.path.abspath(local_path(url))
    fs = remote_fs(url)
    return fs, fs._strip_protocol(url)


class _AtomicRemoteWriter:
    """Bytes to a temporary name beside the target, renamed into place on
    close (HDFS: one atomic rename that replaces the target; other fsspec
    stores: copy and delete, not atomic).  Data goes out in ``CHUNK`` pieces
    (HDFS: create, then appends)."""

    CHUNK = 64 << 20

    def __init__(self, remote, uri, prepare=True):
        self.remote, self.uri = remote, uri
        directory, name = uri.rsplit("/", 1)
        self.tmp = f"{directory}/{temporary_name(name)}"
        if prepare:
            remote.prepare_dir(directory)
        self.buffer = bytearray()
        self.started = False
        self.bytes = 0
        self.file = None

    def write(self, data):
        self.buffer += data
        self.bytes += len(data)
        if len(self.buffer) >= self.CHUNK:
            self._send()

    def _send(self):
        data, self.buffer = bytes(self.buffer), bytearray()
        fs = self.remote.fs
        if self.remote.hdfs:
            if self.started:
                fs.append(self.tmp, data)
            else:
                fs.create(self.tmp, data, overwrite=False)
        else:
            if self.file is None:
                self.file = fs.open(self.tmp, "wb")
            self.file.write(data)
        self.started = True

    def close(self):
        try:
            if self.buffer or not self.started:
                self._send()
            if self.file is not None:
                self.file.close()
            self.remote.replace(self.tmp, self.uri)
        except BaseException:
            self.abort()
            raise

    def abort(self):
        if self.file is not None:
            try:
                self.file.close()
            except Exception:
                pass
        self.remote.rmtree(self.tmp)


class RemoteFS:
    """Any filesystem fsspec reaches, by URI (``hdfs://`` through WebHDFS:
    no Hadoop client, no JVM, one HTTP request per metadata operation)."""

    def __init__(self, uri):
        self.fs = remote_fs(uri)
        self.hdfs = hasattr(self.fs, "rename2")

    def _error(self, exc, what, uri):
        if isinstance(exc, InputError):
            return exc
        if isinstance(exc, PermissionError):
            return OutputError(f"cannot {what} {uri}: permission denied")
        return InputError(f"cannot {what} {uri}: {exc.strerror or exc}")

    def exists(self, uri):
        try:
            return self.fs.exists(uri)
        except OSError as exc:
            raise self._error(exc, "reach", uri) from None

    def isdir(self, uri):
        try:
            return self.fs.isdir(uri)
        except OSError as exc:
            raise self._error(exc, "reach", uri) from None

    def listdir(self, uri):
        try:
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(uri, detail=False))
        except FileNotFoundError:
            raise InputError(f"not found: {uri}") from None
        except OSError as exc:
            raise self._error(exc, "list", uri) from None

    def size(self, uri):
        return int(self.fs.size(uri))

    def makedirs(self, uri):
        self.fs.makedirs(uri, exist_ok=True)

    def prepare_dir(self, directory):
        """Create *directory*, but only inside an existing parent: a task that
        outlives its run must not recreate the run's removed staging (HDFS
        creates missing parents of a new file by itself)."""
        if self.fs.isdir(directory):
            return
        parent = directory.rstrip("/").rsplit("/", 1)[0]
        if not self.fs.isdir(parent):
            raise OutputError(f"cannot write into {directory}: {parent} does not exist")
        self.fs.makedirs(directory, exist_ok=True)

    def read_bytes(self, uri):
        try:
            return self.fs.cat_file(uri)
        except FileNotFoundError:
            raise InputError(f"not found: {uri}") from None

    def read_range(self, uri, start, length):
        if self.hdfs:
            return self.fs.read_range(uri, start, length)
        return self.fs.cat_file(uri, start=start, end=start + length)

    def open_read(self, uri):
        if self.hdfs:
            return self.fs.open_stream(uri)
        return self.fs.open(uri, "rb")

    def open_atomic(self, uri, direct=False, fsync=False):
        """A writer to *uri* that appears there complete or not at all
        (*direct*, *fsync*: local options; HDFS has the bytes once a write
        returns)."""
        return _AtomicRemoteWriter(self, uri)

    def write_bytes(self, uri, data, fsync=False):
        writer = self.open_atomic(uri)
        writer.write(data)
        writer.close()

    def put_bytes(self, uri, data):
        """:meth:`write_bytes` into a directory that may not exist yet, creating
        it and its missing parents (as ``mkdir -p``).  On HDFS that costs no
        request of its own: ``CREATE`` makes the temporary file's missing
        parents (``RENAME`` would not, but the temporary name is beside the
        target), so a file is three requests -- ``CREATE`` at the NameNode and
        at the DataNode, ``RENAME`` -- against :meth:`write_bytes`' check of the
        directory first.  For writers that own the tree they write into (no
        :meth:`prepare_dir` guard against recreating a removed directory)."""
        if not self.hdfs:
            self.makedirs(uri.rsplit("/", 1)[0])
        writer = _AtomicRemoteWriter(self, uri, prepare=False)
        try:
            writer.write(data)
        except BaseException:
            writer.abort()
            raise
        writer.close()

    def replace(self, src, dst):
        """Move file *src* to *dst*, replacing a file there (HDFS: atomically)."""
        if self.hdfs:
            self.fs.rename2(src, dst, overwrite=True)
        else:
            self.fs.mv(src, dst)

    def rename(self, src, dst):
        """Move *src* to *dst*; FileExistsError if *dst* exists (HDFS: atomic)."""
        if self.hdfs:
            self.fs.rename2(src, dst)
        elif self.fs.exists(dst):
            raise FileExistsError(errno.EEXIST, "target exists", dst)
        else:
            self.fs.mv(src, dst, recursive=True)

    def create_exclusive(self, uri, data):
        """Write *data* to *uri* unless a file is there (FileExistsError)."""
        if self.hdfs:
            self.fs.create(uri, data, overwrite=False)
        else:
            with self.fs.open(uri, "xb") as f:
                f.write(data)

    def rmtree(self, uri):
        try:
            self.fs.rm(uri, recursive=True)
        except FileNotFoundError:
            pass

    def download(self, uri, path):
        """Copy file or directory tree *uri* to the local *path*."""
        if self.isdir(uri):
            os.mkdir(path)
            for name in self.listdir(uri):
                self.download(join(uri, name), os.path.join(path, name))
            return
        with self.open_read(uri) as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)

    def upload(self, path, uri):
        """Copy the local file or directory tree *path* to *uri*; each file
        appears whole or not at all."""
        if os.path.isdir(path):
            self.makedirs(uri)
            for name in sorted(os.listdir(path)):
                self.upload(os.path.join(path, name), join(uri, name))
            return
        writer = self.open_atomic(uri)
        try:
            with open(path, "rb") as src:
                for chunk in iter(lambda: src.read(_AtomicRemoteWriter.CHUNK), b""):
                    writer.write(chunk)
        except BaseException:
            writer.abort()
            raise
        writer.close()

    def touch(self, uri):
        self.write_bytes(uri, b"")

    def remove_temporaries(self, uri):
        """Delete the writers' temporary files below directory *uri* (left by
        task attempts that were killed, or lost to a faster twin)."""
        for path in self.fs.find(uri):
            if _TEMPORARY.match(path.rsplit("/", 1)[-1]):
                self.rmtree(path)


LOCAL = LocalFS()


@contextlib.contextmanager
def local_copy(uri):
    """A local path holding file or directory *uri* while the block runs: the
    path itself if it is local, else a copy in a temporary directory (removed
    after), under the same name."""
    if is_local(uri):
        yield local_path(uri)
        return
    remote = get_fs(uri)
    if not remote.exists(uri):
        raise InputError(f"input file not found: {uri}")
    tmp = tempfile.mkdtemp(prefix="samplegen-in-")
    try:
        path = os.path.join(tmp, uri.rstrip("/").rsplit("/", 1)[-1])
        remote.download(uri, path)
        yield path
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def get_fs(uri):
    """The filesystem of *uri*: :data:`LOCAL`, or a :class:`RemoteFS`."""
    if is_local(uri):
        return LOCAL
    scheme, host, port = _authority(uri)
    key = ("fs", scheme, host, port)
    if key not in _REMOTE:
        _REMOTE[key] = RemoteFS(uri)
    return _REMOTE[key]
