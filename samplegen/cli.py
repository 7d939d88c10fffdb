"""The ``samplegen`` command line: one parser, one contract, three command sets.

    samplegen COMMAND ...         matrices and sampling runs   (samplegen.jobs.cli)
    samplegen tbs COMMAND ...     time-biased sampling         (samplegen.tbs.cli)
    samplegen hive COMMAND ...    HiveQL                       (samplegen.hive.cli)

A command set only adds its subcommands to a subparsers object
(``add_commands(sub)``) and runs them (``dispatch(args, log)``); it imports
neither this module nor the other sets.  Everything else is here, the same for
every command:

* a usage error is one line on stderr and exit status 2;
* a :class:`~samplegen.udfs.errors.SamplegenError` is one line and its
  ``exit_status`` (2: bad input); an OSError the user can fix (permissions,
  space, names) one sentence and 2; any other failure one line and 1;
* ``-v`` shows the engines' logs and the traceback of a failure, ``-q``
  silences progress; a run's progress (:mod:`jobs.progress`) is a bar on a
  terminal and a line every 10 s otherwise, other progress messages are
  shown on a terminal only;
* Ctrl-C exits with status 130 and SIGTERM with 143, after every ``with``
  block (staged outputs, engine runners, locks) has cleaned up;
* a command that runs the user's code (``sample --udf MODULE:FUNCTION``:
  the command set's ``user_code(args)`` says so) runs in a forked child
  (:func:`in_child`): an ``os._exit`` in a UDF ends the child, and a child
  that ends without reporting its status is a failure (status 1);
* a reader that goes away (``samplegen tbs status STATE | head -1``) ends
  the command quietly with status 141, as SIGPIPE ends other tools.
"""
import argparse
import contextlib
import errno
import io
import logging
import os
import re
import select
import signal
import struct
import sys
import threading
import time
import traceback

from samplegen import __version__
from samplegen.udfs.errors import SamplegenError

PROG = "samplegen"

#: (group of commands, or None for the top-level ones; what it does; its module,
#: imported when the parser needs its commands: a group's only for a command line
#: that names the group, or every one when *argv* is None)
COMMAND_SETS = (
    (None, None, "samplegen.jobs.cli"),
    ("tbs", "time-biased sampling: experiments, and micro-batch jobs with durable state",
     "samplegen.tbs.cli"),
    ("hive", "HiveQL: block tables, table-to-table sampling, scripts for beeline",
     "samplegen.hive.cli"),
)


class _UsageError(Exception):
    """A command line argparse refuses (the message, without the program)."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is raised (and reported by :func:`main`
    as one line, exit status 2) instead of printing the usage and exiting."""

    def error(self, message):
        raise _UsageError(f"{message} (see '{self.prog} --help')")


def _add_common(parser):
    """-q and -v, on every parser: they may come before or after a command."""
    parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS,
                        help="no progress messages")
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                        help="the engines' logs, and a traceback on failure")


def _add_set(sub, module):
    """The commands of *module* under *sub*, each with -q/-v and its dispatch."""
    before = set(map(id, sub.choices.values()))
    module.add_commands(sub)
    for parser in {id(p): p for p in sub.choices.values()}.values():
        if id(parser) not in before:
            _add_common(parser)
            parser.set_defaults(dispatch=module.dispatch,
                                user_code=getattr(module, "user_code", None))


def build_parser(argv=None):
    """The whole parser; with *argv* (a command line), a group's commands
    are added only if *argv* names the group (``samplegen holdout ...``
    never imports the Hive and time-biased command sets)."""
    import importlib
    first = next((a for a in argv if not a.startswith("-")), None) if argv is not None else None
    parser = Parser(prog=PROG, description="Single-pass sample generation from "
                    "block-partitioned matrices, and time-biased sampling of streams.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}",
                        help="print the version and exit")
    _add_common(parser)
    parser.set_defaults(dispatch=None, usage_parser=parser)
    sub = _add_subparsers(parser)
    for name, help_, module in COMMAND_SETS:
        if name is None:
            _add_set(sub, importlib.import_module(module))
            continue
        group = sub.add_parser(name, help=f"{help_} (see '{PROG} {name} --help')",
                               description=f"{help_[0].upper()}{help_[1:]}.")
        _add_common(group)
        group.set_defaults(usage_parser=group)
        if argv is None or first == name:
            _add_set(_add_subparsers(group), importlib.import_module(module))
    return parser


def _add_subparsers(parser):
    return parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser,
                                 help=f"one of these ('{parser.prog} COMMAND --help' for its "
                                      "options):")


def main(argv=None):
    """``samplegen ...``: the exit status of the command *argv* (default:
    the process's arguments)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # --udf mymodule:f, as with `python -m`
    argv = [str(a) for a in argv]
    parser = build_parser(argv)
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # --help, --version
            return _flushed(exc.code or 0)
    except _UsageError as exc:
        sys.stderr.write(f"{PROG}: error: {exc}\n")
        return 2
    except BrokenPipeError:
        return _reader_gone_status()
    if args.dispatch is None:  # a command set without a command
        args.usage_parser.print_help(sys.stderr)
        return 2
    return run_command(args.dispatch, args)


def run_command(dispatch, args):
    """``dispatch(args, log)`` under the contract of the module docstring;
    returns the exit status."""
    verbose, quiet = getattr(args, "verbose", False), getattr(args, "quiet", False)
    interactive = verbose or sys.stderr.isatty()
    _configure_logging(verbose, show_progress=interactive and not quiet)

    def log(message, progress=False):
        """Results always (unless -q); progress only on a terminal or with -v,
        so that a failing command in a script prints exactly one line."""
        if not quiet and (interactive or not progress):
            sys.stderr.write(f"{PROG}: {message}\n")

    def progress(total, unit="blocks", label=""):
        """A :class:`jobs.progress.Progress` for long work: a bar on a
        terminal, a line every 10 s otherwise, nothing with -q."""
        from samplegen.jobs.progress import Progress
        mode = "off" if quiet else ("bar" if sys.stderr.isatty() else "log")
        return Progress(total, unit, f"{PROG}: {label}" if label else PROG, mode=mode)

    log.progress = progress

    def checked():
        try:
            return _flushed(dispatch(args, log))
        except BrokenPipeError as exc:
            if _stdout_reader_gone():
                return _reader_gone_status()
            return _failure(exc, verbose)
        except Exception as exc:
            if _signalled["term"]:  # the stop's exception was swallowed and broke something
                raise Terminated() from None
            if _signalled["int"]:
                raise KeyboardInterrupt() from None
            return _failure(exc, verbose)
    user_code = getattr(args, "user_code", None)
    clean_up = user_code(args) if user_code is not None else None
    if clean_up is not None:
        return stoppable(lambda: in_child(checked, clean_up))
    return stoppable(checked)


# ----------------------------------------------------------------------------- user code

def in_child(call, clean_up):
    """The exit status of ``call()`` (a command under :func:`run_command`'s
    contract) run in a forked child process: a command that runs the user's
    code (a sampling-UDF's module), which must not be able to end the
    command with a success it did not have -- ``os._exit(0)`` ends only the
    child.  The child sends what it writes on stdout and stderr, then its
    exit status, through a pipe; the parent writes the first two where its
    own go and returns the status.  A child that ends without sending its
    status (whatever its exit status) is a failure: *clean_up* removes
    what it left, one line says so, status 1.  A stop (Ctrl-C, SIGTERM) of
    the parent is passed on to the child, which cleans up and reports
    130 or 143 itself (after :data:`CHILD_STOP_SECONDS` without an answer
    it is killed and cleaned up after)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    read_fd, write_fd = os.pipe()
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:                                   # the child: never returns
        os.close(read_fd)
        _child(call, _Pipe(write_fd), parent)
    os.close(write_fd)
    return _parent(pid, read_fd, clean_up)


#: seconds a child has, after a stop was passed on, before it is killed
CHILD_STOP_SECONDS = 30


class _Pipe:
    """The child's end: frames of ``kind (1 byte), length (4 bytes), bytes``
    (kind ``1`` stdout, ``2`` stderr, ``S`` the exit status)."""

    def __init__(self, fd):
        self.fd = fd
        self.lock = threading.Lock()

    def send(self, kind, data):
        frame = kind + struct.pack(">I", len(data)) + data
        with self.lock:
            view = memoryview(frame)
            while view:
                view = view[os.write(self.fd, view):]


class _Forwarded(io.TextIOBase):
    """A text stream of the child that sends what it is given to the
    parent (:class:`_Pipe`); a terminal's questions go to *original*."""

    def __init__(self, pipe, kind, original):
        self.pipe, self.kind, self.original = pipe, kind, original

    def writable(self):
        return True

    def write(self, text):
        if text:
            self.pipe.send(self.kind, text.encode("utf-8", "replace"))
        return len(text)

    def isatty(self):
        return bool(getattr(self.original, "isatty", lambda: False)())

    def fileno(self):
        return self.original.fileno()

    @property
    def encoding(self):
        return "utf-8"


def _child(call, pipe, parent):
    """Run *call* in the forked child and report its status to *parent*;
    ends the process (nothing of the parent's -- atexit handlers, a test
    runner -- runs here)."""
    status = 1
    try:
        _end_with(parent)
        sys.stdout = _Forwarded(pipe, b"1", sys.stdout)
        sys.stderr = _Forwarded(pipe, b"2", sys.stderr)
        try:
            status = stoppable(call)
        except BaseException:          # -v: the failure's traceback, as the parent would
            traceback.print_exc()
            status = 1
        pipe.send(b"S", b"%d" % status)
    except BaseException:
        status = 1
    finally:
        os._exit(status)


def _end_with(parent):
    """Have the kernel stop this child (SIGTERM: it cleans up) when its
    parent dies (Linux); end it now if the parent is gone already."""
    with contextlib.suppress(Exception):
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os._exit(128 + signal.SIGTERM)


def _parent(pid, fd, clean_up):
    """Forward the child *pid*'s output from *fd* and return its status
    (see :func:`in_child`)."""
    status, stop, stopped_at, buffer = None, None, None, b""
    outputs = {b"1": sys.stdout, b"2": sys.stderr}
    while True:
        try:
            if stopped_at is not None and time.monotonic() - stopped_at > CHILD_STOP_SECONDS:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            data = os.read(fd, 1 << 16)
            if not data:
                break
            buffer += data
            while len(buffer) >= 5:
                size = struct.unpack(">I", buffer[1:5])[0]
                if len(buffer) < 5 + size:
                    break
                kind, payload, buffer = buffer[:1], buffer[5:5 + size], buffer[5 + size:]
                if kind == b"S":
                    status = int(payload)
                else:
                    outputs[kind].write(payload.decode("utf-8", "replace"))
                    outputs[kind].flush()
        except KeyboardInterrupt as exc:   # Terminated too; raised again every second
            if stop is None:
                stop, stopped_at = exc, time.monotonic()
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM if isinstance(exc, Terminated)
                            else signal.SIGINT)
    os.close(fd)
    ended = _reap(pid)
    if status is not None:
        return status
    with contextlib.suppress(Exception):
        clean_up()
    if stop is not None:
        raise stop
    sys.stderr.write(f"{PROG}: error: the run's process {ended} before the run finished "
                     "(does the UDF call os._exit?); nothing was written\n")
    return 1


def _reap(pid):
    """Wait for child *pid* to end; how it ended, in words."""
    while True:
        try:
            _, wait_status = os.waitpid(pid, 0)
            break
        except KeyboardInterrupt:      # it is ending: its pipe is closed
            continue
        except ChildProcessError:
            return "ended"
    if os.WIFSIGNALED(wait_status):
        signum = os.WTERMSIG(wait_status)
        try:
            name = signal.Signals(signum).name
        except ValueError:
            name = f"signal {signum}"
        return f"was killed by {name}"
    return f"ended with status {os.waitstatus_to_exitcode(wait_status)}"


def _failure(exc, verbose):
    """One line on stderr for *exc*, and the exit status (re-raised with -v)."""
    if verbose:
        raise exc
    if isinstance(exc, SamplegenError):
        message, status = str(exc), exc.exit_status
    elif isinstance(exc, OSError) and os_error_message(exc):
        message, status = os_error_message(exc), 2
    else:  # engine failures
        message, status = f"{type(exc).__name__}: {exc}", 1
    sys.stderr.write(f"{PROG}: error: {' '.join(message.splitlines())}\n")
    return status


def _flushed(status):
    """*status*, once what the command printed has reached stdout (a reader
    that went away shows here, not at interpreter exit)."""
    sys.stdout.flush()
    return status


# ----------------------------------------------------------------------------- stdout closed

def _stdout_reader_gone():
    """Whether stdout is a pipe whose reader has closed it (poll says POLLERR)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # replaced (tests) or closed
        return False
    if not hasattr(select, "poll"):
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _reader_gone_status():
    """Stop writing to stdout, quietly: its pending output goes to /dev/null
    (nothing is printed at exit), and the status is SIGPIPE's, 128 + 13."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (AttributeError, ValueError, OSError):
        pass
    return 128 + signal.SIGPIPE


# ----------------------------------------------------------------------------- Ctrl-C, SIGTERM

def stoppable(call):
    """``call()``, stopped by Ctrl-C (exit status 130) or SIGTERM (143) the
    same way: every ``with`` block unwinds, then one line says so.  A
    staged output whose ``__exit__`` the stop cut off before its first line
    is discarded here (:func:`jobs.store.discard_unfinished`)."""
    from samplegen.jobs import store
    before = store.unfinished()
    try:
        with _stop_signals():
            try:
                return call()
            finally:
                store.discard_unfinished(before)
    except Terminated:
        sys.stderr.write(f"{PROG}: terminated\n")
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        sys.stderr.write(f"{PROG}: interrupted\n")
        return 130


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that every ``with`` block --
    staged outputs, engine runners, locks -- cleans up as on Ctrl-C."""


#: which stop signal arrived: Python drops an exception raised by a signal
#: handler while a finalizer runs, so the failure that may follow is reported
#: as the termination it is
_signalled = {"term": False, "int": False}

#: seconds between raising a stop again: C code that clears any pending error
#: (numpy's index conversion, for one) can swallow the first
_INSIST_EVERY = 1.0


def _unwinding():
    """Whether a stop is already on its way up (the ``finally`` and
    ``__exit__`` code running is its cleanup, not to be interrupted)."""
    exc = sys.exc_info()[1]
    while exc is not None:
        if isinstance(exc, KeyboardInterrupt):
            return True
        exc = exc.__context__
    return False


@contextlib.contextmanager
def _stop_signals():
    """SIGINT and SIGTERM raise KeyboardInterrupt / :class:`Terminated` in the
    main thread, and raise it again every second until it is on its way up
    (an exception raised by a signal handler can be swallowed); a SIGINT that
    the parent shell ignores stays ignored."""
    owner = os.getpid()
    _signalled.update(term=False, int=False)

    def stop(signum, frame):
        if os.getpid() != owner:  # a forked worker (mrjob's pool): end quietly
            if signum == signal.SIGTERM:
                os._exit(128 + signal.SIGTERM)
            raise KeyboardInterrupt()
        _signalled["term" if signum == signal.SIGTERM else "int"] = True
        signal.setitimer(signal.ITIMER_REAL, _INSIST_EVERY, _INSIST_EVERY)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    def insist(signum, frame):
        if os.getpid() == owner and not _unwinding():
            raise Terminated() if _signalled["term"] else KeyboardInterrupt()

    wanted = [signal.SIGTERM, signal.SIGALRM]
    try:
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            wanted.append(signal.SIGINT)
        previous = {signum: signal.getsignal(signum) for signum in wanted}
        for signum in wanted:
            signal.signal(signum, insist if signum == signal.SIGALRM else stop)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


# ----------------------------------------------------------------------------- messages and logs

#: OSErrors that are the user's to fix, with the sentence that says so
_OS_ERRORS = {errno.EACCES: "permission denied", errno.EPERM: "operation not permitted",
              errno.EROFS: "read-only file system", errno.ENOSPC: "no space left on device",
              errno.EDQUOT: "disk quota exceeded", errno.ENAMETOOLONG: "file name too long",
              errno.ENOTDIR: "not a directory", errno.EISDIR: "is a directory"}


def os_error_message(exc):
    """One sentence for an OSError the user can fix (permissions, space,
    names), or None for other failures."""
    reason = _OS_ERRORS.get(exc.errno)
    if reason is None:
        return None
    path = exc.filename if exc.filename is not None else ""
    return f"{reason}: {path}" if path else reason


#: the engines' loggers: silent unless -v (mrjob's "No configs specified ..." included)
ENGINE_LOGGERS = ("mrjob", "py4j", "pyspark", "pyhive")


class _ProgressHandler(logging.Handler):
    """Engine log lines worth showing on a terminal: the steps (the map
    percentages feed the run's progress bar, :mod:`jobs.progress`)."""

    KEEP = re.compile(r"Running step \d+ of \d+")

    def emit(self, record):
        message = record.getMessage()
        if self.KEEP.search(message):
            sys.stderr.write(f"{PROG}: {message.strip()}\n")


def _configure_logging(verbose, show_progress):
    if verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
        for name in ENGINE_LOGGERS:
            logging.getLogger(name).setLevel(logging.NOTSET)
        mrjob = logging.getLogger("mrjob")
        mrjob.propagate = True
        for handler in [h for h in mrjob.handlers if isinstance(h, _ProgressHandler)]:
            mrjob.removeHandler(handler)
        return
    for name in ENGINE_LOGGERS:
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)
    if show_progress:
        logger = logging.getLogger("mrjob")
        logger.setLevel(logging.INFO)
        logger.propagate = False
        if not any(isinstance(h, _ProgressHandler) for h in logger.handlers):
            logger.addHandler(_ProgressHandler())
