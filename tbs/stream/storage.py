"""Where a STATE lives: a local directory (default) or any fsspec URL.

The commit protocol (see :mod:`tbs.stream.state`) needs only three things of a
filesystem: writing a file under a temporary name and renaming it to a name
that does not exist yet (atomic on POSIX and HDFS), listing a directory tree,
and deleting files.  It never renames over an existing file, which HDFS
refuses and object stores cannot do atomically.

* Local paths (and ``file://`` URLs) use the os module and
  :func:`samplegen.jobs.fs.write_atomic`: every file is written to
  ``.<name>.tmp-<random>``, flushed with ``fsync`` and renamed; directories
  are ``fsync``-ed once per commit so that a power loss cannot lose a rename.
  The lock is an ``flock`` on ``STATE/_lock`` (see :class:`Lock`).
* Other URLs go through the project's filesystem layer
  (:func:`samplegen.jobs.fs.get_fs`: ``hdfs://`` by WebHDFS, anything else
  through fsspec): the same temporary-name-then-rename writes (one atomic
  rename on HDFS), an exclusive-create lock file.  There a file costs round
  trips, not bytes (on HDFS three requests, the DataNode's taking 5-35 ms
  whatever the size), so :meth:`Store.write_bytes` returns at once and up to
  :data:`WRITERS` files are written at the same time; a read of a file waits
  for its write, and :meth:`Store.sync` -- called before every commit, and
  at the end of every task -- for all of them, raising the first error.  A
  commit therefore still follows every file it references.  Small files
  (commits, structure files) are read whole: one ``OPEN``, where reading
  pieces of them costs a request each.

**Checksums.**  Every file is checksummed when it is written (:func:`checksum`:
its size and CRC-32, returned by the writing methods) and verified whenever it
is read back (:meth:`Store.read_verified`, :meth:`Store.verify`,
:meth:`Store.map_tail`): the checksum of a data file is recorded by what
references it (the commit, a structure file), and a JSON file carries its own
(:meth:`Store.write_json`).  Damage -- flipped bytes, a truncated or deleted
file -- is a :class:`DamagedStateError` naming the file.
"""
import io
import json
import mmap
import os
import socket
import threading
import time
import uuid
import zlib
from concurrent.futures import ThreadPoolExecutor

from samplegen.jobs import fs as fsmod
from samplegen.udfs.errors import InputError

from ..errors import TBSError

LOCK = "_lock"
#: the commit log's directory (:mod:`.state`), where a remote lock being taken
#: over is also moved aside (see :meth:`Lock._take_over`)
COMMITS = "commits"
#: remote files written at the same time by one :class:`Store`
WRITERS = 8


#: the key of a JSON file's own checksum (:meth:`Store.write_json`)
CHECKSUM = "checksum"
#: how to repair a damaged STATE (the end of every damage message)
REPAIR = ("restore the file from a backup, or rebuild the STATE with 'samplegen tbs run' "
          "from the batches into a new STATE")


class DamagedStateError(TBSError, InputError):
    """A file of a STATE is missing, truncated or damaged: its bytes are not
    those whose checksum was recorded when it was written."""


def checksum(data):
    """The checksum of the bytes *data* (any buffer): ``"<size>:<CRC-32 in hex>"``."""
    view = memoryview(data).cast("B")
    return f"{view.nbytes}:{zlib.crc32(view):08x}"


def _describe_sum(value):
    size, _, crc = str(value).partition(":")
    return f"{size} bytes with CRC-32 {crc}"


def damaged(where, problem):
    """The error for STATE file *where* (a URL) with *problem*."""
    return DamagedStateError(f"damaged STATE: {where} {problem}; {REPAIR}")


def json_text(value):
    """The canonical JSON text of *value* (sorted keys, no spaces), as
    :func:`json.loads` then :func:`json.dumps` give it again (so that a
    reader recomputes the same text from what it parsed)."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"))
    return json.dumps(json.loads(text), sort_keys=True, separators=(",", ":"))


def is_local(url):
    return "://" not in url or url.startswith("file://")


def _strip_file(url):
    return url[len("file://"):] if url.startswith("file://") else url


class _Sink(io.BytesIO):
    """A BytesIO that survives ``close()`` (fastparquet closes what it writes to)."""

    def close(self):
        pass


_POPULATE = getattr(mmap, "MAP_POPULATE", 0)


def parquet_bytes(df, **options):
    """The bytes of ``df`` as one Parquet file (fastparquet)."""
    import fastparquet
    sink = _Sink()
    fastparquet.write("mem.parquet", df, open_with=lambda path, mode: sink, write_index=False,
                      **options)
    return sink.getvalue()


class Store:
    """Files under one root directory, addressed by '/'-separated relative names."""

    def __init__(self, url, fsync=None):
        self.url = url.rstrip("/") or url
        self.local = is_local(url)
        if fsync is None:
            fsync = os.environ.get("SAMPLEGEN_TBS_FSYNC", "1") != "0"
        self.fsync = fsync
        if self.local:
            self.root = os.path.abspath(_strip_file(url))
            self.fs = None
            self.remote = fsmod.LOCAL
        else:
            self.remote = fsmod.get_fs(url)
            self.fs = self.remote.fs
            self.root = self.fs._strip_protocol(url).rstrip("/")
        self._dirty_dirs = set()
        self._made = set()
        self._pending = {}                # rel -> Future of a remote write in flight
        self._fetched = {}                # rel -> Future of a remote read ahead (prefetch)
        self._guard = threading.Lock()
        self._slots = threading.BoundedSemaphore(WRITERS)
        self._pool = None
        self._failure = None              # the first failed remote write, for sync()
        self._verified = set()            # (rel, checksum) of files read back and verified

    # -- naming ----------------------------------------------------------
    def path(self, rel=""):
        """Path (local) or filesystem path (fsspec) of a relative name."""
        if not rel:
            return self.root
        return (os.path.join(self.root, *rel.split("/")) if self.local else f"{self.root}/{rel}")

    def uri(self, rel=""):
        """A URL other processes can open (tasks, Spark, pandas)."""
        if self.local:
            return self.path(rel)
        return self.fs.unstrip_protocol(self.path(rel))

    # -- queries (they see every write made before them) ----------------------
    def exists(self, rel=""):
        self._drain()
        return os.path.exists(self.path(rel)) if self.local else self.fs.exists(self.path(rel))

    def isdir(self, rel=""):
        self._drain()
        return os.path.isdir(self.path(rel)) if self.local else self.fs.isdir(self.path(rel))

    def kind(self, rel=""):
        """"directory", "file" or None (nothing there): one request on a remote store."""
        self._drain()
        if self.local:
            path = self.path(rel)
            return "directory" if os.path.isdir(path) else "file" if os.path.exists(path) else None
        try:
            return self.fs.info(self.path(rel))["type"]
        except FileNotFoundError:
            return None

    def listdir(self, rel=""):
        """Names in a directory (empty if it does not exist)."""
        self._drain()
        if self.local:
            try:
                return sorted(os.listdir(self.path(rel)))
            except FileNotFoundError:
                return []
        try:
            found = self.fs.ls(self.path(rel), detail=False)
        except FileNotFoundError:
            return []
        return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in found)

    def walk(self):
        """Every file under the root as (relative name, size in bytes), sorted."""
        self._drain()
        out = []
        if self.local:
            for dirpath, dirnames, filenames in os.walk(self.root):
                dirnames.sort()
                rel_dir = os.path.relpath(dirpath, self.root)
                for name in filenames:
                    rel = name if rel_dir == "." else f"{rel_dir.replace(os.sep, '/')}/{name}"
                    try:
                        out.append((rel, os.path.getsize(os.path.join(dirpath, name))))
                    except FileNotFoundError:
                        pass
        elif self.fs.exists(self.root):
            for full, info in self.fs.find(self.root, detail=True).items():
                out.append((full[len(self.root) + 1:], int(info.get("size") or 0)))
        return sorted(out)

    def names(self):
        """Every file under the root (relative names), without their sizes."""
        if not self.local:
            return [rel for rel, _ in self.walk()]
        self._drain()
        out = []
        for dirpath, _, filenames in os.walk(self.root):
            rel_dir = os.path.relpath(dirpath, self.root)
            prefix = "" if rel_dir == "." else rel_dir.replace(os.sep, "/") + "/"
            out += [prefix + name for name in filenames]
        return out

    # -- reading (a file being written is read once it is complete) -------------
    def read_bytes(self, rel):
        """A whole file (remote: one ``OPEN``)."""
        self._settle(rel)
        if self.local:
            with open(self.path(rel), "rb") as f:
                return f.read()
        with self._guard:
            ahead = self._fetched.pop(rel, None)
        if ahead is not None:
            return ahead.result()
        return self.fs.cat_file(self.path(rel))

    def prefetch(self, rels):
        """Start reading the whole files ``rels`` in the background (remote
        stores; nothing on a local disk): the next :meth:`read_bytes` of each
        returns its bytes, so that reads another task or step needs later
        wait for one round trip together instead of one each."""
        if self.local:
            return
        for rel in rels:
            with self._guard:
                if rel in self._fetched or rel in self._pending:
                    continue
                self._fetched[rel] = self._executor().submit(self.fs.cat_file, self.path(rel))

    def read_range(self, rel, start, length):
        """``length`` bytes of a file from offset ``start``."""
        self._settle(rel)
        return self.remote.read_range(self.path(rel), start, length)

    def map_tail(self, rel, count, head, expected, dtype="<i8"):
        """The last ``count`` values of a file and its first ``head`` bytes (one
        open; the values memory-mapped for local files); the values' bytes
        must have checksum ``expected`` (:class:`DamagedStateError` naming the
        file otherwise, also when it is missing or too short)."""
        import numpy as np
        width = np.dtype(dtype).itemsize * count
        self._settle(rel)
        try:
            if self.local:
                with open(self.path(rel), "rb") as f:
                    size = os.fstat(f.fileno()).st_size
                    if size < head + width:
                        raise damaged(self.uri(rel), f"is truncated ({size} bytes, too short for "
                                                     f"the {count} keys it holds)")
                    first = os.pread(f.fileno(), head, 0)
                    if count == 0:
                        values = np.zeros(0, dtype=dtype)
                    else:
                        # a plain array over a read-only map of the tail, its pages
                        # read in at once (the callers gather rows all over it)
                        start = ((size - width) // mmap.ALLOCATIONGRANULARITY
                                 * mmap.ALLOCATIONGRANULARITY)
                        mapped = mmap.mmap(f.fileno(), size - start, prot=mmap.PROT_READ,
                                           flags=mmap.MAP_SHARED | _POPULATE, offset=start)
                        values = np.frombuffer(mapped, dtype=dtype, count=count,
                                               offset=size - width - start)
            else:
                data = self.read_bytes(rel)  # whole: one request, where tail and head are three
                if len(data) < head + width:
                    raise damaged(self.uri(rel), f"is truncated ({len(data)} bytes, too short "
                                                 f"for the {count} keys it holds)")
                values = np.frombuffer(data, dtype=dtype, count=count, offset=len(data) - width)
                first = data[:head]
        except FileNotFoundError:
            raise damaged(self.uri(rel), "is missing") from None
        self.check(rel, values, expected, what=" in its keys")
        return values, first

    def read_json(self, rel):
        """A JSON file written by :meth:`write_json`, its own checksum verified
        (and removed).  A file that is not there raises FileNotFoundError; a
        damaged one (not JSON, truncated, another checksum, none at all),
        :class:`DamagedStateError` naming it."""
        data = self.read_bytes(rel)
        try:
            value = json.loads(data)
        except ValueError:
            raise damaged(self.uri(rel), f"is not valid JSON ({len(data)} bytes: truncated or "
                                         "overwritten)") from None
        if not isinstance(value, dict) or not isinstance(value.get(CHECKSUM), str):
            raise damaged(self.uri(rel), "has no checksum")
        recorded = value.pop(CHECKSUM)
        found = checksum(json_text(value).encode())
        if found != recorded:
            raise damaged(self.uri(rel), f"does not match its checksum (its content has "
                                         f"{_describe_sum(found)}, the file records "
                                         f"{_describe_sum(recorded)})")
        return value

    def read_verified(self, rel, expected):
        """The bytes of file ``rel``, which must be those of checksum
        ``expected`` (recorded when it was written): else
        :class:`DamagedStateError` naming it (also when it is missing)."""
        try:
            data = self.read_bytes(rel)
        except FileNotFoundError:
            raise damaged(self.uri(rel), "is missing") from None
        self.check(rel, data, expected)
        with self._guard:
            self._verified.add((rel, expected))
        return data

    def check(self, rel, data, expected, what=""):
        """Raise :class:`DamagedStateError` unless the bytes *data* (of file
        ``rel``; *what*: which part of it) have checksum ``expected``."""
        if not isinstance(expected, str):
            raise damaged(self.uri(rel), "has no checksum recorded where it is referenced")
        found = checksum(data)
        if found != expected:
            short = int(found.partition(":")[0]) < int(expected.partition(":")[0])
            problem = "is truncated" if short else "does not match its checksum"
            raise damaged(self.uri(rel), f"{problem}{what} (it has {_describe_sum(found)}, "
                                         f"{_describe_sum(expected)} were written)")

    def verify(self, rel, expected):
        """Check that file ``rel`` still has checksum ``expected`` (read whole,
        once per Store: files are never modified after they are written)."""
        with self._guard:
            if (rel, expected) in self._verified:
                return
        self.read_verified(rel, expected)

    def open_parquet(self, rel, expected):
        """A fastparquet ParquetFile of file ``rel``, verified against
        checksum ``expected`` first (remote: from the bytes read to verify it)."""
        import fastparquet
        if self.local:
            self.verify(rel, expected)
            return fastparquet.ParquetFile(self.path(rel))
        data = self.read_verified(rel, expected)
        return fastparquet.ParquetFile(self.path(rel), open_with=lambda *_: io.BytesIO(data))

    # -- writing -----------------------------------------------------------------
    def makedirs(self, rel=""):
        """Create a directory and its parents; a new directory's parent is
        fsync-ed at the next :meth:`sync` (so that its entry survives a power loss)."""
        if rel in self._made:
            return
        self._drain()
        if self.local:
            parts = rel.split("/") if rel else []
            for i in range(len(parts) + 1):
                path = self.path("/".join(parts[:i]))
                if not os.path.isdir(path):
                    os.makedirs(path, exist_ok=True)
                    self._dirty_dirs.add(os.path.dirname(path))
        else:
            self.fs.makedirs(self.path(rel), exist_ok=True)
        self._made.add(rel)

    def write_bytes(self, rel, data):
        """Write ``data`` to ``rel`` atomically: temporary name, (fsync), rename;
        missing directories are created.  Remote: in the background (see the
        module's docstring); :meth:`sync` waits for it.  Returns the bytes'
        :func:`checksum`, for the record that will reference the file."""
        head = rel.rpartition("/")[0]
        written = checksum(data)
        if self.local:
            self.makedirs(head)
            fsmod.write_atomic(self.path(rel), data, fsync=self.fsync)
            self._dirty_dirs.add(self.path(head))
            return written
        self._settle(rel)                 # (one write per name at a time)
        self._slots.acquire()             # at most WRITERS files in flight (and in memory)
        try:
            with self._guard:
                future = self._executor().submit(self.remote.put_bytes, self.uri(rel), data)
                self._pending[rel] = future
        except BaseException:
            self._slots.release()
            raise
        future.add_done_callback(lambda _: self._slots.release())
        return written

    def write_json(self, rel, value):
        """Write the dict ``value`` as JSON carrying its own checksum: the key
        :data:`CHECKSUM` holds the :func:`checksum` of the canonical text of
        the other keys (:func:`json_text`), which :meth:`read_json` verifies.
        The file stays plain JSON for any other reader."""
        text = json_text(value)
        value = json.loads(text)
        value[CHECKSUM] = checksum(text.encode())
        return self.write_bytes(rel, json.dumps(value, sort_keys=True,
                                                separators=(",", ":")).encode() + b"\n")

    def write_parquet(self, rel, df, **options):
        """Write ``df`` as one Parquet file; returns its :func:`checksum`."""
        return self.write_bytes(rel, parquet_bytes(df, **options))

    def _executor(self):
        """The threads of remote reads and writes (the caller holds the guard)."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(WRITERS, thread_name_prefix="tbs-io")
        return self._pool

    def _settle(self, rel):
        """Wait for the write of ``rel`` if one is in flight (its error, if any, raised)."""
        with self._guard:
            future = self._pending.get(rel)
        if future is not None:
            try:
                future.result()
            finally:
                with self._guard:
                    if self._pending.get(rel) is future:
                        del self._pending[rel]

    def _drain(self):
        """Wait for every write in flight; the first failure is kept for :meth:`sync`."""
        while True:
            with self._guard:
                if not self._pending:
                    return
                rel, future = next(iter(self._pending.items()))
            try:
                self._settle(rel)
            except Exception as exc:
                with self._guard:
                    self._failure = self._failure or exc

    def sync(self):
        """Wait for the files being written (raising the first failure), then
        fsync the directories that received renames since the last call."""
        self._drain()
        with self._guard:
            failure, self._failure = self._failure, None
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)
        if failure is not None:
            raise failure
        if self.local and self.fsync:
            for path in sorted(self._dirty_dirs, key=len, reverse=True):
                try:
                    fd = os.open(path, os.O_RDONLY)
                except FileNotFoundError:
                    continue
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        self._dirty_dirs.clear()

    def remove(self, rel):
        self._drain()
        with self._guard:
            self._fetched.pop(rel, None)
        try:
            if self.local:
                os.remove(self.path(rel))
            else:
                self.fs.rm(self.path(rel))
        except FileNotFoundError:
            pass

    def remove_tree(self, rel):
        """Delete directory ``rel`` and everything in it (remote: one request)."""
        self._drain()
        if self.local:
            import shutil
            shutil.rmtree(self.path(rel), ignore_errors=True)
        else:
            self.remote.rmtree(self.uri(rel))
        self._made.clear()

    def remove_parents_if_empty(self, rels, kept=()):
        """Delete the directories of the files *rels* (and their parents below
        the root) that are now empty: what :meth:`remove_empty_dirs` would
        remove after deleting *rels*, without walking the whole tree.  The
        directories of the files *kept* (still there) are not tried."""
        self._made.clear()

        def parents(rel):
            head = rel.rpartition("/")[0]
            while head:
                yield head
                head = head.rpartition("/")[0]

        full = {d for rel in kept for d in parents(rel)}       # certainly not empty
        dirs = {d for rel in rels for d in parents(rel)} - full
        # deepest first, each once: a directory after all its subdirectories
        for head in sorted(dirs, key=lambda d: d.count("/"), reverse=True):
            if head not in full and not self._rmdir(self.path(head)):
                full.update(parents(head))

    def remove_temporaries(self, dirs):
        """Delete the writers' temporary files in the directories *dirs*
        (left by killed task attempts on a cluster)."""
        for rel in sorted(set(dirs)):
            for name in self.listdir(rel):
                if fsmod.is_temporary(name):
                    self.remove(f"{rel}/{name}" if rel else name)

    def remove_empty_dirs(self):
        """Delete empty directories below the root (after garbage collection)."""
        self._drain()
        self._made.clear()
        if self.local:
            dirs = [d for d, _, _ in os.walk(self.root, topdown=False) if d != self.root]
        else:                                   # deepest first, like a bottom-up walk
            found = self.fs.find(self.root, withdirs=True, detail=True) \
                if self.fs.exists(self.root) else {}
            dirs = sorted((p for p, info in found.items()
                           if info["type"] == "directory" and p.rstrip("/") != self.root),
                          key=lambda p: p.count("/"), reverse=True)
        for directory in dirs:
            self._rmdir(directory)

    def _rmdir(self, path):
        """Remove directory *path* if it is empty; whether it was removed."""
        try:
            if self.local:
                os.rmdir(path)
            else:
                self.fs.rm(path)                # not recursive: refused unless empty
            return True
        except OSError:                         # not empty (or already gone)
            return False


# ----------------------------------------------------------------------------- lock

def _lock_info():
    return {"pid": os.getpid(), "host": socket.gethostname(),
            "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _describe(info):
    if not isinstance(info, dict):
        return "another run"
    return f"pid {info.get('pid')} on {info.get('host')} since {info.get('since')}"


class Lock:
    """At most one run per STATE.

    Local STATE: ``STATE/_lock`` is opened (created if absent) and locked
    with ``flock(LOCK_EX | LOCK_NB)``; it holds the owner's pid, host and
    start time for the error message of a refused run.  The kernel drops an
    flock when its process dies, however it dies (SIGKILL included), so a
    lock file left behind by a crashed run is *stale by construction*: the
    next run locks it at once, notes whose it was and takes over -- no
    guessing from pids or ages, no window for two runs to both "break" a
    stale lock.  After locking, the run checks that ``_lock`` still names the
    file it locked (a finishing run unlinks it) and retries otherwise.  On
    NFS, Linux implements flock with fcntl locks, which the server also
    releases when the client process dies.

    Other filesystems (HDFS, fsspec): ``_lock`` is created exclusively; it
    holds the same owner information.  A lock whose owner ran on this host
    and is gone (its pid no longer exists: a killed run) is stale and taken
    over; one from another host must be removed by hand after checking that
    no run is active there (the error message says so).
    """

    def __init__(self, store):
        self.store = store
        self.fd = None
        self.previous = None

    def acquire(self):
        store = self.store
        if store.local:
            import fcntl
            path = store.path(LOCK)
            while True:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    info = _read_info(fd)
                    os.close(fd)
                    raise TBSError(f"STATE {store.url} is in use by {_describe(info)}; "
                                   "a second run on the same STATE is refused") from None
                try:
                    same = os.stat(path).st_ino == os.fstat(fd).st_ino
                except FileNotFoundError:
                    same = False
                if not same:            # unlinked by a finishing run meanwhile: retry
                    os.close(fd)
                    continue
                self.previous = _read_info(fd)
                data = json.dumps(_lock_info()).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
                self.fd = fd
                return self
        for attempt in range(2):
            try:
                store.remote.create_exclusive(store.uri(LOCK), json.dumps(_lock_info()).encode())
                break
            except FileExistsError:
                info = _read_remote_info(store, LOCK)
            if attempt or not _owner_is_gone(info) or not self._take_over(info):
                raise TBSError(f"STATE {store.url} is in use by {_describe(info)}; a second run "
                               f"on the same STATE is refused (if that run has died, remove "
                               f"{store.uri(LOCK)})") from None
        self.fd = True
        return self

    def _take_over(self, info):
        """Move the lock of a run that is gone aside (one atomic rename: of two
        runs taking over at once, one wins) and remember whose it was."""
        # Aside into commits/, which every run lists: if this run dies before it
        # removes the file, the next one finds it there and collects it.
        store, aside = self.store, f"{COMMITS}/{LOCK}.stale-{uuid.uuid4().hex[:12]}"
        store.makedirs(COMMITS)
        try:
            store.remote.rename(store.uri(LOCK), store.uri(aside))
        except (FileNotFoundError, FileExistsError):
            return True                       # another run moved it: compete for a new one
        if _read_remote_info(store, aside) != info:        # a live lock, just made: put it back
            store.remote.rename(store.uri(aside), store.uri(LOCK))
            return False
        store.remove(aside)
        self.previous = info
        return True

    def release(self):
        if self.fd is None:
            return
        store = self.store
        if store.local:
            import fcntl
            try:
                os.unlink(store.path(LOCK))
            except FileNotFoundError:
                pass
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
        else:
            store.remove(LOCK)
        self.fd = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def _read_remote_info(store, rel):
    try:
        return json.loads(store.read_bytes(rel))
    except Exception:
        return None


def _owner_is_gone(info):
    """Whether the run that wrote lock *info* ran on this host and has ended."""
    if not isinstance(info, dict) or info.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(info["pid"]), 0)
    except ProcessLookupError:
        return True
    except (OSError, KeyError, TypeError, ValueError):
        return False
    return False


def _read_info(fd):
    try:
        data = os.pread(fd, 4096, 0)
        return json.loads(data) if data else None
    except (OSError, ValueError):
        return None
