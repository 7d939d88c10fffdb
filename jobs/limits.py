"""What the machine can hold, checked before any work starts.

A command that cannot finish -- an output larger than the free space of its
file system, a task that would hold more than the machine's memory -- is
refused up front with the estimate, the limit and how to change the request,
instead of failing after hours or gigabytes of partial output.  Estimates are
for the bytes samplegen writes (base64 text of float64 values: 4/3 of 8 bytes
per value); the checks leave a margin rather than cut it fine.
"""
import errno
import os
import shutil

from samplegen.udfs.errors import OutputError, ParameterError

from . import fs as fsmod

#: the share of the machine's available memory one task may plan to hold
MEMORY_SHARE = 0.5


def available_memory():
    """Bytes of memory available to new allocations (MemAvailable on Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: do not refuse


def format_bytes(n):
    """A size for a message: ``"512.0 MB"`` below 1 GiB (decimal megabytes,
    as the runs' own summaries print), ``"3.2 GiB"`` from there on."""
    if n < 2 ** 30:
        return f"{n / 1e6:.1f} MB"
    return f"{n / 2 ** 30:.1f} GiB"


#: the errors of a file system that has no room left (space, or quota)
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def out_of_space(exc, where, nbytes=None):
    """The OutputError for *exc* if it is a full file system (or quota)
    while writing *where*, naming the estimate *nbytes* of what the output
    needs when there is one; None for any other error."""
    if not isinstance(exc, OSError) or exc.errno not in _NO_SPACE:
        return None
    what = "no space left on device" if exc.errno == errno.ENOSPC else "disk quota exceeded"
    need = f"; about {format_bytes(nbytes)} needed" if nbytes else ""
    return OutputError(f"{what} while writing {where}{need}: nothing was written; free space "
                       "there, choose another destination, or ask for less")


def check_disk(dest, nbytes, what):
    """OutputError when about *nbytes* will not fit the free space of the file
    system that will hold the local destination *dest* (other file systems
    are not checked: their free space is the cluster's)."""
    if not fsmod.is_local(dest):
        return
    path = os.path.dirname(os.path.abspath(fsmod.local_path(dest)))
    while path and not os.path.isdir(path):
        path = os.path.dirname(path)
    try:
        free = shutil.disk_usage(path or ".").free
    except OSError:
        return
    if nbytes > free:
        raise OutputError(f"{what} would take about {format_bytes(nbytes)}, more than the "
                          f"{format_bytes(free)} free on the file system of {dest}; free space "
                          "there, choose another destination, or ask for less")


def check_memory(nbytes, what, fix):
    """ParameterError when one task would hold about *nbytes* of memory, more
    than :data:`MEMORY_SHARE` of what the machine has available."""
    limit = int(available_memory() * MEMORY_SHARE)
    if nbytes > limit:
        raise ParameterError(f"{what} would hold about {format_bytes(nbytes)} of memory, more than "
                             f"the {format_bytes(limit)} one task may use here; {fix}")
