"""The STATE directory: its layout, the commits, garbage collection.

Layout::

    STATE/commits/<seq>.json            the commit log; the highest seq is the state
    STATE/deltas/<k>/part-<p>.bin       partition p after batch k: bitmaps, partials, sources, keys
    STATE/deltas/<k>/in/part-<p>.parquet   rows that entered partition p's reservoir with batch k
    STATE/deltas/<k>/out/part-<p>.parquet  keys (_sg_batch, _sg_row) that left S_k, or
                                           entered without
    STATE/snapshots/<k>/part-<p>.parquet   partition p's items after batch k, with _sg_in_sample
    STATE/_lock                         held by the running job (see storage.Lock)

Every file of batch k is in ``deltas/<k>/`` or ``snapshots/<k>/``.

A commit (``commits/<seq>.json``, written under a temporary name and renamed:
the commit point) records the parameters, the driver's numbers (weights, rho,
per-group and per-partition counts, partial items), the ledger of processed
batches, and for every partition the structure file and the sources it
references.  Every other file is named by the batch that produced it and is
written before the commit that first references it; no committed file is ever
modified.  Hence:

* a crash before the rename leaves the previous commit intact and only
  unreferenced files behind; the next run deletes them (garbage collection
  keeps exactly the files referenced by the newest two commits) and redoes
  the batch -- with the same randomness (every draw is keyed by seed, batch,
  stream and partition), so it writes the same files;
* a crash after the rename loses nothing;
* a batch is never counted twice (the commit records it in the ledger
  together with its effect) nor skipped (a run starts at the batch after
  the newest commit's last one and refuses a gap).

Commits are never renamed over an existing file, which HDFS would refuse.

Every commit carries its own checksum and those of the structure files and
delta files it references (:mod:`.storage`, "Checksums"); :func:`read_commit`
verifies it and refuses a commit of another format, the checksum-less
``samplegen-tbs/1`` included.

**When to collect.**  A run that ends, even with an error, leaves only the
files of the newest two commits.  So the garbage collection's walk of the
whole STATE runs only when a run died: when this run took over a lock left
behind (``Lock.previous``), or when :func:`unfinished` finds what a dead run
leaves -- which also covers a remote lock removed by hand.  Its evidence
needs two listings besides the commit log's, whatever the STATE's age,
because every leftover lies where they look, and stays findable until the
collection that removes it ends:

* every file a batch writes is in ``deltas/<k>/`` or ``snapshots/<k>/``
  (temporary names included), and ``k`` is above the newest commit's last
  batch until the commit of ``k``;
* a commit's own temporary file, and a lock being taken over, are in
  ``commits/``, where only the newest two commits belong;
* the files a commit supersedes are deleted after it (:func:`forget`),
  the older commit that needs them last; until then ``commits/`` holds a
  third commit;
* :func:`collect_garbage` deletes commit files last and the directories
  after every file.

After each commit, :func:`forget` deletes what the commit two steps back
was the last to need: the previous commit names the files it superseded
(``superseded``), so neither walking nor reading anything is needed.
"""
import json
import os
import re
import signal

from samplegen.jobs.fs import is_temporary

from ..errors import TBSError
from .storage import CHECKSUM, COMMITS, LOCK, DamagedStateError, damaged

#: the commits' format: ``/2`` carries checksums (every commit its own, and
#: those of the files it references; see :mod:`.storage`), ``/1`` none
FORMAT = "samplegen-tbs/2"
LEGACY_FORMATS = ("samplegen-tbs/1",)
_COMMIT_RE = re.compile(r"^(\d{10})\.json$")
KEEP_COMMITS = 2


def commit_name(seq):
    return f"{COMMITS}/{seq:010d}.json"


def commit_seqs(store):
    return sorted(int(m.group(1)) for m in map(_COMMIT_RE.match, store.listdir(COMMITS)) if m)


def load_latest(store):
    """The newest commit, or None for a STATE without any."""
    return read_log(store)[0]


def read_log(store):
    """(the newest commit or None, the names in ``commits/``): one listing."""
    names = store.listdir(COMMITS)
    seqs = sorted(int(m.group(1)) for m in map(_COMMIT_RE.match, names) if m)
    if not seqs:
        return None, names
    name = commit_name(seqs[-1])
    try:
        commit = read_commit(store, seqs[-1])
    except OSError as exc:
        raise TBSError(f"cannot read {store.uri(name)} ({exc})") from None
    return commit, names


def read_commit(store, seq):
    """Commit ``seq``, verified (its own checksum) and of this format.  A
    STATE of the checksum-less format is refused: its files cannot be told
    from damaged ones (docs/TBS_JOBS.md, section 3, "Checksums")."""
    name = commit_name(seq)
    try:
        commit = store.read_json(name)
    except DamagedStateError:
        legacy = _legacy_format(store, name)
        if legacy is None:
            raise
        raise TBSError(f"STATE {store.url} was written by an earlier samplegen (format {legacy}) "
                       "whose files carry no checksums, so damage in them could not be found; "
                       "rebuild it: 'samplegen tbs run' from the batches into a new STATE "
                       "(or export its sample with the earlier version)") from None
    if not isinstance(commit, dict) or commit.get("format") != FORMAT:
        found = commit.get("format") if isinstance(commit, dict) else None
        raise TBSError(f"{store.url} is not a samplegen tbs STATE this version can read "
                       f"({store.uri(name)} has format {found!r}, expected {FORMAT!r})")
    if commit.get("seq") != seq:
        raise damaged(store.uri(name), f"holds commit {commit.get('seq')!r}, not {seq}")
    return commit


def _legacy_format(store, name):
    """The format of commit file ``name`` if it is a readable commit of a
    checksum-less format, else None."""
    try:
        old = json.loads(store.read_bytes(name))
    except (OSError, ValueError):
        return None
    if isinstance(old, dict) and CHECKSUM not in old and old.get("format") in LEGACY_FORMATS:
        return old["format"]
    return None


_BATCH_DIR = re.compile(r"^\d{10}$")


def is_leftover(name):
    """Whether a name in ``commits/`` is what a run that died leaves there: a
    commit's temporary file or a lock it was taking over."""
    return is_temporary(name) or name.startswith(f"{LOCK}.stale-")


def unfinished(store, commit, names):
    """Whether a run died after writing into STATE (see "When to collect"
    above): ``commits/`` (its listing *names*) holds anything but the newest
    two commits, or ``deltas/`` or ``snapshots/`` a directory of a batch after
    the newest commit's."""
    newest = commit["seq"]
    expected = {commit_name(seq).rpartition("/")[2] for seq in (newest - 1, newest) if seq >= 0}
    if set(names) - expected:
        return True
    last = commit["last_batch"]
    for top in ("deltas", "snapshots"):
        for name in store.listdir(top):
            if not _BATCH_DIR.match(name) or last is None or int(name) > last:
                return True
    return False


def referenced(commit):
    """Every file a commit needs (its own file included)."""
    refs = {commit_name(commit["seq"])}
    for part in commit["partitions"]:
        if part["struct"]:
            refs.add(part["struct"])
        refs.update(part["files"])
    for entry in commit["deltas"]:
        refs.update(entry[1])
        refs.update(entry[2])
    return refs


def write_commit(store, commit):
    crash_point("before-commit")
    store.sync()                                   # the files it references are durable first
    store.write_json(commit_name(commit["seq"]), commit)
    store.sync()
    crash_point("after-commit")


def superseded(previous, commit):
    """The files ``previous`` referenced and its successor ``commit`` does not
    (the previous commit's own file included): the commit records them, and
    :func:`forget` deletes them after the next one."""
    return sorted(referenced(previous) - referenced(commit))


def forget(store, seq, known=None):
    """After commit ``seq``: delete the files only commit ``seq - KEEP_COMMITS``
    needed (the same result as :func:`collect_garbage` on a STATE without
    leftovers, without listing it): what commit ``seq - 1`` superseded and
    commit ``seq`` does not reference again.  ``known``: commits by seq
    already in memory (others are read).  The older commit's file goes last,
    so that a crash in between leaves it behind as evidence
    (:func:`unfinished`)."""
    old = seq - KEEP_COMMITS
    if old < 0:
        return 0
    known = known or {}

    def get(s):
        return known[s] if s in known else read_commit(store, s)

    try:
        previous = get(seq - 1)
        if "superseded" in previous:
            gone = set(previous["superseded"])
        else:                         # (a commit without the list: compare with the old one)
            gone = referenced(get(old)) - referenced(previous)
    except FileNotFoundError:
        return 0
    live = referenced(get(seq)) | referenced(previous)      # what the newest two need
    gone -= live
    old_commit = commit_name(old)
    files = sorted(gone - {old_commit})
    # a directory of a batch (or its in/ or out/) of which nothing is needed
    # goes whole: one request (HDFS) instead of one per file and directory
    whole = _whole_dirs(files, live)
    singles = [rel for rel in files if not any(rel.startswith(d + "/") for d in whole)]
    for i, rel in enumerate(whole + singles):
        if i < len(whole):
            store.remove_tree(rel)
        else:
            store.remove(rel)
        if i == 0:
            crash_point("in-gc")
    store.remove_parents_if_empty(whole + singles, kept=live)
    if old_commit in gone:
        store.remove(old_commit)
    return len(gone)


def _whole_dirs(files, live):
    """The highest directories below ``deltas/<k>`` or ``snapshots/<k>`` (those
    included) that hold some of ``files`` and none of ``live``."""
    needed = set()
    for rel in live:
        head = rel.rpartition("/")[0]
        while head:
            needed.add(head)
            head = head.rpartition("/")[0]
    whole = set()
    for rel in files:
        parts = rel.split("/")
        if parts[0] not in ("deltas", "snapshots") or len(parts) < 3 \
                or not _BATCH_DIR.match(parts[1]):
            continue
        for depth in range(2, len(parts)):
            head = "/".join(parts[:depth])
            if head in whole:
                break
            if head not in needed:
                whole.add(head)
                break
    return sorted(whole)


def collect_garbage(store):
    """Delete every file not referenced by the newest KEEP_COMMITS commits
    (leftovers of crashed runs, superseded structures, old snapshots and
    deltas beyond the retention).  Returns the number of files deleted."""
    seqs = commit_seqs(store)
    keep = set()
    for seq in seqs[-KEEP_COMMITS:]:
        keep |= referenced(read_commit(store, seq))
    removed = 0
    names = [rel for rel in store.names() if rel != LOCK and rel not in keep]
    # commits/ last: while it holds more than the newest two, the next run
    # knows that this collection did not finish (see "When to collect")
    for rel in sorted(names, key=lambda rel: (rel.startswith(COMMITS + "/"), rel)):
        store.remove(rel)
        removed += 1
        if removed == 1:
            crash_point("in-gc")
    if removed:
        store.remove_empty_dirs()
    return removed


_CRASH_COUNTS = {}


def crash_point(name):
    """Fault injection for the crash tests: with SAMPLEGEN_TBS_CRASH=<name>[:<n>]
    the process kills itself (SIGKILL) the n-th time it passes ``name``."""
    spec = os.environ.get("SAMPLEGEN_TBS_CRASH")
    if not spec:
        return
    point, _, count = spec.partition(":")
    if point != name:
        return
    _CRASH_COUNTS[name] = _CRASH_COUNTS.get(name, 0) + 1
    if _CRASH_COUNTS[name] >= int(count or 1):
        os.kill(os.getpid(), signal.SIGKILL)
