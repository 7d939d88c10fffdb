"""The STATE directory: its layout, the commits, garbage collection.

Layout::

    STATE/commits/<seq>.json            the commit log; the highest seq is the state
    STATE/parts/<p>/<k>.bin             partition p after batch k: bitmaps, partials, sources, keys
    STATE/deltas/<k>/in/part-<p>.parquet   rows that entered partition p's reservoir with batch k
    STATE/deltas/<k>/out/part-<p>.parquet  keys (_sg_batch, _sg_row) that left S_k, or
                                           entered without
    STATE/snapshots/<k>/part-<p>.parquet   partition p's items after batch k, with _sg_in_sample
    STATE/_lock                         held by the running job (see storage.Lock)

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
"""
import os
import re
import signal

from ..errors import TBSError
from .storage import LOCK

FORMAT = "samplegen-tbs/1"
COMMITS = "commits"
_COMMIT_RE = re.compile(r"^(\d{10})\.json$")
KEEP_COMMITS = 2


def commit_name(seq):
    return f"{COMMITS}/{seq:010d}.json"


def commit_seqs(store):
    return sorted(int(m.group(1)) for m in map(_COMMIT_RE.match, store.listdir(COMMITS)) if m)


def load_latest(store):
    """The newest commit, or None for a STATE without any."""
    seqs = commit_seqs(store)
    if not seqs:
        return None
    name = commit_name(seqs[-1])
    try:
        commit = store.read_json(name)
    except (ValueError, OSError) as exc:
        raise TBSError(f"corrupt STATE {store.url}: cannot read {name} ({exc})") from None
    if (not isinstance(commit, dict) or commit.get("format") != FORMAT
            or commit.get("seq") != seqs[-1]):
        raise TBSError(f"{store.url} is not a samplegen tbs STATE (unexpected {name})")
    return commit


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


def forget(store, seq):
    """After commit ``seq``: delete the files only commit ``seq - KEEP_COMMITS``
    needed (the same result as :func:`collect_garbage` on a STATE without
    leftovers, without listing it)."""
    old = seq - KEEP_COMMITS
    if old < 0:
        return 0
    try:
        gone = referenced(store.read_json(commit_name(old)))
    except FileNotFoundError:
        return 0
    for s in range(old + 1, seq + 1):
        gone -= referenced(store.read_json(commit_name(s)))
    for i, rel in enumerate(sorted(gone)):
        store.remove(rel)
        if i == 0:
            crash_point("in-gc")
    store.remove_parents_if_empty(gone)
    return len(gone)


def collect_garbage(store):
    """Delete every file not referenced by the newest KEEP_COMMITS commits
    (leftovers of crashed runs, superseded structures, old snapshots and
    deltas beyond the retention).  Returns the number of files deleted."""
    seqs = commit_seqs(store)
    keep = set()
    for seq in seqs[-KEEP_COMMITS:]:
        keep |= referenced(store.read_json(commit_name(seq)))
    removed = 0
    for rel in store.names():
        if rel == LOCK or rel in keep:
            continue
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
