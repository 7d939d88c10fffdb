"""Errors across engine boundaries: one protocol for every engine.

A task runs in another process (an mrjob task, a Spark Python worker, a Hive
TRANSFORM script, a micro-batch task), so an exception raised there reaches
the driver only as text.  Every task reports its error as one *marker line*::

    samplegen-error: <Class>: <message>

``Class`` is the most specific of the exception classes that cross engine
boundaries (:data:`CLASSES`, plus the caller's *extra* classes, e.g. the
micro-batch jobs' ``TBSError``) that the error is an instance of; any other
exception (a bug, say a ``TypeError`` in a user's UDF) is written as
``Error: <its type>: <message>``.  The message is one line (whitespace runs
become one space).  Where the line travels depends on the engine:

* mrjob tasks write it to their stderr (:func:`reported` with a stream;
  ``engines.mapreduce.run_task``), where the driver reads the failed
  tasks' stderr files;
* Spark tasks raise :class:`TaskFailed` whose message is the line
  (:func:`reported` without a stream); the driver gets it inside the text of
  the Py4J exception;
* Hive's TRANSFORM scripts put it into an *error row* (and on stderr).

The driver finds the last marker line in that text and raises the error it
names (:func:`error_in`): the same class and message as in the task, or the
engine's own exception for a task that failed otherwise.
"""
import contextlib
import re

from samplegen.udfs.base import UDFError
from samplegen.udfs.errors import (
    EngineError,
    InputError,
    OutputError,
    ParameterError,
    SamplegenError,
)

MARKER = "samplegen-error: "
#: the exception classes that cross engine boundaries by name (a subclass
#: travels as the nearest of them; SamplegenError catches the rest)
CLASSES = (ParameterError, InputError, OutputError, EngineError, UDFError, SamplegenError)
_LINE = re.compile(re.escape(MARKER) + r"([A-Za-z_][A-Za-z0-9_]*): ?(.*)")


class TaskFailed(Exception):
    """A task's error on its way to the driver as exception text: its
    message is the marker line (Spark)."""


def error_text(exc, extra=()):
    """``Class: message`` of *exc*, on one line (see the module's docstring)."""
    classes = tuple(extra) + CLASSES
    kind = next((cls.__name__ for cls in type(exc).__mro__ if cls in classes),
                f"Error: {type(exc).__name__}")
    return " ".join(f"{kind}: {exc}".split())


def error_line(exc, extra=()):
    """The marker line reporting *exc*."""
    return MARKER + error_text(exc, extra)


def error_in(text, fallback, extra=()):
    """The error that the last marker line in *text* (str or bytes; the
    marker may follow other text on its line, as in a traceback's
    ``module.TaskFailed: samplegen-error: ...``) reports: an instance of its
    class and with its message when the class is one of :data:`CLASSES` or
    *extra*, else ``fallback(description)`` (the engine's own exception for
    a failed task; *description* is ``Type: message``).  None when *text*
    has no marker line."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    found = None
    for line in text.splitlines():
        match = _LINE.search(line)
        if match:
            found = match
    if found is None:
        return None
    kind, message = found.group(1), found.group(2).strip()
    cls = next((c for c in tuple(extra) + CLASSES if c.__name__ == kind), None)
    if cls is not None:
        return cls(message)
    return fallback(message if kind == "Error" else f"{kind}: {message}")


@contextlib.contextmanager
def reported(stream=None, extra=()):
    """Run a task's body, reporting an exception that escapes it: written as
    the marker line to *stream* (a task's stderr) and raised again, or,
    without a stream, raised as :class:`TaskFailed` carrying the line."""
    try:
        yield
    except Exception as exc:
        line = error_line(exc, extra)
        if stream is None:
            raise TaskFailed(line) from exc
        stream.write(line + "\n")
        stream.flush()
        raise
