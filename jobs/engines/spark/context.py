"""The SparkContext: its settings, starting it, shipping the project's
packages to the executors, checking the workers' Python, and a failed job as
one error.

Also used by the micro-batch jobs (``tbs/stream/spark_tbs.py``).
"""
import contextlib
import hashlib
import logging
import os
import re
import shutil
import sys
import tempfile
import warnings
import weakref

from samplegen.jobs.engines.task_errors import error_in
from samplegen.jobs.package import build_zip
from samplegen.udfs.errors import ParameterError, SamplegenError

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[*]"
#: the modules every samplegen task imports on the workers (besides the
#: project's own packages, which :func:`ship_packages` ships)
WORKER_MODULES = ("numpy", "pyarrow")
#: set on contexts the engine starts: reduce tasks write block files as a side
#: effect, so no speculative copies; the rest can be overridden.
FORCED = {"spark.speculation": "false"}
DEFAULTS = {
    "spark.app.name": "samplegen",
    "spark.ui.showConsoleProgress": "false",
    # Python workers: keep freed memory for reuse instead of returning it to
    # the system (glibc), so the chunks and blocks allocated and freed all the
    # time do not page-fault fresh memory each time (about 10 % of CPU).
    "spark.executorEnv.MALLOC_MMAP_THRESHOLD_": str(32 << 20),
    "spark.executorEnv.MALLOC_TRIM_THRESHOLD_": str(1 << 30),
}


def parse_settings(items):
    """``--spark-conf KEY=VALUE`` items as a dict."""
    settings = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ParameterError(f"--spark-conf must be KEY=VALUE, got {item!r}")
        settings[key.strip()] = value.strip()
    return settings


def spark_conf_file():
    """Spark's own ``spark-defaults.conf``: ``$SPARK_CONF_DIR``, else
    ``$SPARK_HOME/conf``."""
    directory = os.environ.get("SPARK_CONF_DIR")
    if not directory and os.environ.get("SPARK_HOME"):
        directory = os.path.join(os.environ["SPARK_HOME"], "conf")
    return os.path.join(directory, "spark-defaults.conf") if directory else None


def read_conf_file(path):
    """Settings of a spark-defaults.conf (``key value``, ``key=value``)."""
    settings = {}
    if not path or not os.path.exists(path):
        return settings
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith(("#", "!")):
                parts = re.split(r"\s*[=:]\s*|\s+", line, maxsplit=1)
                settings[parts[0]] = parts[1] if len(parts) > 1 else ""
    return settings


def _quiet():
    """Spark's own console output (JVM logs, progress) only with -v."""
    return not log.isEnabledFor(logging.INFO)


def _import_pyspark():
    try:
        import pyspark
    except ImportError as exc:
        raise ParameterError(f"runner 'spark' needs pyspark (pip install "
                             f"'samplegen[spark]'): {exc}") from None
    return pyspark


@contextlib.contextmanager
def spark_context(master=None, settings=None):
    """The active SparkContext if there is one (left running), else a new one
    started with *master* and *settings* (stopped on exit)."""
    pyspark = _import_pyspark()
    active = pyspark.SparkContext._active_spark_context   # PySpark has no public getter
    if active is not None:
        if master and master != active.master:
            log.warning("reusing the running SparkContext (master %s), not %s",
                        active.master, master)
        yield active
        return
    sc = start_context(master, settings)
    try:
        yield sc
    finally:
        shipped = _SHIPPED.pop(sc, None)
        sc.stop()
        if shipped is not None:
            shutil.rmtree(shipped.directory, ignore_errors=True)


def start_context(master=None, settings=None, quiet=None):
    """Start a SparkContext for samplegen.

    Precedence: *settings* (``--spark-conf``) over Spark's spark-defaults.conf
    (or, under ``spark-submit``, everything it was given) over the engine
    defaults; *master* (``--spark-master``) over all, else ``local[*]``.  In
    local mode the workers run this interpreter unless
    ``spark.pyspark.python`` or ``$PYSPARK_PYTHON`` says otherwise.  With
    *quiet* (default: unless logging is at INFO, i.e. ``-v``), Spark's JVM
    output is discarded.
    """
    pyspark = _import_pyspark()
    from pyspark.java_gateway import launch_gateway

    settings = dict(settings or {})
    quiet = _quiet() if quiet is None else quiet
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM
    with warnings.catch_warnings():  # pyspark's notices about pandas versions
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
        if submitted:
            conf = pyspark.SparkConf()  # what spark-submit was given, files included
            given = dict(conf.getAll())
        else:
            conf = pyspark.SparkConf(loadDefaults=False)
            given = read_conf_file(spark_conf_file())  # spark-submit will read it
        for key, value in DEFAULTS.items():
            if key not in given:
                conf.set(key, value)
        if not quiet and "spark.ui.showConsoleProgress" not in given:
            conf.set("spark.ui.showConsoleProgress", "true")
        for key, value in settings.items():
            conf.set(key, value)
        master = master or settings.get("spark.master") or given.get("spark.master") \
            or DEFAULT_MASTER
        conf.setMaster(master)
        for key, value in FORCED.items():
            conf.set(key, value)
        python = settings.get("spark.pyspark.python") or given.get("spark.pyspark.python") \
            or os.environ.get("PYSPARK_PYTHON")
        if not python and master.startswith("local"):
            python = sys.executable
        saved, jvm_log = os.environ.get("PYSPARK_PYTHON"), None
        try:
            if python:
                os.environ["PYSPARK_PYTHON"] = python
            if submitted:
                sc = pyspark.SparkContext(conf=conf)
            else:
                jvm_log = tempfile.TemporaryFile() if quiet else None  # read on failure
                popen = {"stdout": jvm_log, "stderr": jvm_log} if quiet else None
                gateway = launch_gateway(conf, popen_kwargs=popen)
                sc = pyspark.SparkContext(conf=conf, gateway=gateway)
        except Exception as exc:
            first = _startup_error(jvm_log if not submitted else None) or \
                (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            if "master" in first.lower():
                raise ParameterError(f"invalid Spark master {master!r}: {first}") from None
            raise RuntimeError(f"cannot start Spark (master {master}): {first}; run with -v "
                               "for Spark's own log") from None
        finally:
            if saved is None:
                os.environ.pop("PYSPARK_PYTHON", None)
            else:
                os.environ["PYSPARK_PYTHON"] = saved
    if quiet:
        sc.setLogLevel("ERROR")
    return sc


def _startup_error(jvm_log):
    """The JVM's own reason for failing to start (spark-submit's error line)."""
    if jvm_log is None:
        return None
    jvm_log.seek(0)
    text = jvm_log.read().decode(errors="replace")
    for line in text.splitlines():
        if "Exception" in line or line.startswith("Error"):
            return line.split("Exception: ", 1)[-1].strip()
    return None


class _Shipped:
    """What :func:`ship_packages` gave one context: the zip's directory and
    the user modules."""

    def __init__(self, directory):
        self.directory, self.modules = directory, set()


#: SparkContext -> _Shipped
_SHIPPED = weakref.WeakKeyDictionary()


def ship_packages(sc, plan=None):
    """Ship the project's packages to the executors (``addPyFile``), once per
    context, and the module of a user UDF when it is a single file outside
    them (``--udf mymodule:func`` with mymodule.py in the working directory)."""

    shipped = _SHIPPED.get(sc)
    if shipped is None:
        directory = tempfile.mkdtemp(prefix="samplegen-spark-")
        weakref.finalize(sc, shutil.rmtree, directory, True)  # (at exit, at the latest)
        path = build_zip(os.path.join(directory, "samplegen.zip"))
        with open(path, "rb") as f:  # a name of its own: spark-submit may ship a samplegen.zip
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
        named = os.path.join(directory, f"samplegen-{digest}.zip")
        os.replace(path, named)
        sc.addPyFile(named)
        shipped = _SHIPPED[sc] = _Shipped(directory)
    module = plan.udf.partition(":")[0] if plan is not None and ":" in plan.udf else None
    if module and "." not in module and module not in shipped.modules:
        path = getattr(sys.modules.get(module), "__file__", None)
        if path and path.endswith(".py") and "site-packages" not in path:
            sc.addPyFile(path)
            shipped.modules.add(module)


# ---------------------------------------------------------------------------
# the workers' Python
# ---------------------------------------------------------------------------
class WorkerPythonError(SamplegenError):
    """The Spark workers' Python cannot run samplegen's tasks: it lacks a
    module they import (an un-activated virtual environment whose workers
    start the system ``python3``), or does not start.  The fix is starting
    Spark with ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) naming an
    interpreter that has them."""


def _how_to_fix(modules):
    return (f"start Spark with PYSPARK_PYTHON (or spark.pyspark.python) set to a Python that "
            f"has {' and '.join(modules)}, e.g. this one: {sys.executable}")


def _probe(modules):
    """The task of :func:`check_workers`: the worker's interpreter and the
    modules of *modules* it cannot import.  A closure of builtins only, so
    that it reaches a worker that lacks every module (cloudpickle sends a
    nested function by value, importing nothing)."""
    def probe(_):
        import importlib
        import sys

        missing = []
        for name in modules:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                missing.append((name, str(exc)))
        yield sys.executable, missing
    return probe


#: SparkContext -> the modules its workers were found to import
_CHECKED = weakref.WeakKeyDictionary()


def check_workers(sc, modules=WORKER_MODULES):
    """Check once per context, by one task of one partition, that the
    workers' Python imports *modules*; raise :class:`WorkerPythonError`
    naming the interpreter, the missing module and the fix otherwise.
    *Why a job of its own*: the DataFrames of :mod:`.frames` are lazy, so a
    worker's ImportError would only surface in the user's own action, deep
    in a Spark stack trace.  One task checks one executor (every executor of
    a cluster normally has the same Python; a task that still meets a
    missing module fails with the same error, :func:`task_failure`)."""
    modules = tuple(modules)
    if set(modules) <= _CHECKED.get(sc, frozenset()):
        return
    try:
        [(python, missing)] = sc.parallelize([0], 1).mapPartitions(_probe(modules)).collect()
    except Exception as exc:   # the worker does not start (no such interpreter, ...)
        if type(exc).__name__ not in ("Py4JJavaError", "PythonException") and \
                not type(exc).__module__.startswith(("py4j", "pyspark")):
            raise
        cause = failure_cause(str(exc), type(exc).__name__).rsplit("Exception: ", 1)[-1]
        raise WorkerPythonError(f"the Spark workers' Python cannot run a task: {cause[:300]}; "
                                f"{_how_to_fix(modules)}") from None
    if missing:
        names = ", ".join(repr(name) for name, _ in missing)
        what = "module" if len(missing) == 1 else "modules"
        raise WorkerPythonError(f"the Spark workers' Python {python} lacks {what} {names} "
                                f"({missing[0][1]}); {_how_to_fix(modules)}")
    _CHECKED[sc] = _CHECKED.get(sc, frozenset()) | set(modules)


#: a worker's missing module in a task's traceback
_MISSING = re.compile(r"^(?:ModuleNotFoundError|ImportError): No module named '([^']+)'")


# ---------------------------------------------------------------------------
# a failed job as one error
# ---------------------------------------------------------------------------
def task_failure(exc, extra=()):
    """A failed Spark job as one error: what its task reported by the
    :mod:`~jobs.engines.task_errors` protocol (a corrupt block, bad UDF
    output, ...: the same class and message, of ``task_errors.CLASSES`` or
    *extra*); *exc* itself when it is a samplegen error or not Spark's;
    a :class:`WorkerPythonError` when a worker could not import one of
    :data:`WORKER_MODULES`; else a RuntimeError with the cause
    (:func:`failure_cause`)."""
    if isinstance(exc, SamplegenError):
        return exc
    text = str(exc)
    error = error_in(text, _failed, extra)
    if error is not None:
        return error
    if type(exc).__name__ not in ("Py4JJavaError", "PythonException") and \
            not type(exc).__module__.startswith(("py4j", "pyspark")):
        return exc
    cause = failure_cause(text, type(exc).__name__)
    missing = _MISSING.match(cause)
    if missing and missing.group(1).partition(".")[0] in WORKER_MODULES:
        return WorkerPythonError(f"the Spark workers' Python lacks module "
                                 f"{missing.group(1)!r} ({cause}); "
                                 f"{_how_to_fix(WORKER_MODULES)}")
    return _failed(cause)


def _failed(cause):
    return RuntimeError(f"the Spark job failed: {cause[:500]}")


def failure_cause(text, default):
    """The exception line of the Python traceback in a Spark error, else the
    first line naming an exception."""
    start = text.find("Traceback (most recent call last)")
    if start >= 0:
        found = None
        for line in text[start:].splitlines()[1:]:
            if line.startswith("\tat ") or line.startswith("at "):
                break  # the Java stack after the Python traceback
            if line.strip() and not line[0].isspace():
                found = line.strip()
        if found:
            return found
    lines = [line.strip(": ") for line in text.splitlines() if line.strip()]
    return next((line for line in lines if "Exception:" in line or "Error:" in line),
                lines[0] if lines else default)
