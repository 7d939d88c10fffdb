"""The Hive engine: ``--runner hive``.

``run_hive(plan, inputs, runner, options)`` runs the phases as one HiveQL
query on a HiveServer2 (Apache Hive, or the Spark Thrift Server) through
pyhive:

1. ship ``samplegen-<hash>.zip`` to a directory the server can read
   (:mod:`hive.package`);
2. create a temporary EXTERNAL block table over the input matrix directory
   (``create_block_table.hql``);
3. run the method's script (``holdout.hql``, ``kfold.hql``,
   ``kfold_naive.hql``, ``bootstrap.hql``, ``sample.hql``) rendered with
   validated values: the map-side TRANSFORM samples, ``DISTRIBUTE BY`` /
   ``SORT BY`` group and order, the reduce-side TRANSFORM re-blocks and
   writes ``<plan.output>/<sample>/part-v<v>`` with
   :func:`jobs.store.write_group` (fold mode: a second TRANSFORM composes);
4. the script's last stage (``transform.py finish``, one task) writes the
   ``_matrix.json`` files and the manifest into ``plan.output`` with
   :func:`jobs.driver.write_run`, as a run from beeline alone needs; the
   query's rows are the summaries (one per written column of blocks), from
   which the driver writes the same metadata again into its staging
   directory (its manifest, with the engine's options, replaces the
   query's) and commits it;
5. drop the temporary table (always).

``plan.output`` (the driver's staging directory) and the input directory must
be paths the server's tasks can read and write.  See docs/HIVE.md.
"""
import json
import os
import re
import uuid

from samplegen.jobs import fs as fsmod
from samplegen.jobs.engines.task_errors import error_in
from samplegen.jobs.plan import format_bin_bits, format_params
from samplegen.udfs.errors import InputError, ParameterError

from . import sql
from .client import Client, HiveError, parse_url
from .package import build_hive_zip, has_named_content

KINDS = {
    "table": "identifier", "location": "path", "output": "path", "input": "path",
    "files": "path",
    "zip": "word", "python": "program", "udf": "word", "params": "params", "bin_bits": "word",
    "records": "word", "kind": "word", "rows": "int", "cols": "int", "block_size": "int",
    "seed": "int", "repeats": "int", "k": "int", "samples": "int", "size": "int",
    "ratio": "number", "fraction": "number", "assignments": "identifier",
    "exact": "word", "balanced": "word", "oob": "word", "strata": "word", "grouping": "word",
    "weighting": "word",
}
DEFAULT_FILES = os.path.join("~", ".cache", "samplegen", "hive")


def script_for(plan):
    """``(script name, method variables)`` for a plan."""
    p = plan.params
    # the rows' classes, groups and weights: the files the driver wrote next to the run
    sides = {field: server_path(getattr(plan, field)) if getattr(plan, field) else "none"
             for field in ("strata", "grouping", "weighting")}
    classes = {field: sides[field] for field in ("strata", "grouping")}
    if plan.udf == "holdout":
        return "holdout", {"ratio": float(p["ratio"]), "repeats": int(p["repeats"]),
                           "fraction": float(p["fraction"]), "exact": _flag(p, "exact"),
                           **classes}
    if plan.udf == "kfold":
        return ("kfold_naive" if p.get("naive") else "kfold"), {
            "k": int(p["k"]), "balanced": _flag(p, "balanced"),
            "repeats": int(p.get("repeats", 1)), **classes}
    if plan.udf == "bootstrap":
        return "bootstrap", {"samples": int(p["samples"]), "size": int(p["size"]),
                             "oob": _flag(p, "oob"), "strata": sides["strata"]}
    if plan.udf == "weighted":    # the column's name travels in the weight files
        return "sample", {"udf": plan.udf, "weighting": sides["weighting"], "params":
                          format_params({k: v for k, v in p.items() if k != "weights"})}
    if plan.composed:
        raise ParameterError(f"UDF {plan.udf!r} composes training sets; on Hive only the "
                             "built-in kfold does (kfold.hql)")
    return "sample", {"udf": plan.udf, "params": format_params(plan.params),
                      "weighting": "none"}


def _flag(params, name):
    """A boolean parameter as a script variable: ``true`` or ``false``."""
    return "true" if params.get(name) else "false"


def settings(options):
    """Engine settings from options, the URL's query, the environment.

    Every value is checked here, before any connection and before anything
    is written: ``files`` is where :func:`ship_zip` writes the zip (and what
    ``ADD FILE`` names), ``python`` starts every TRANSFORM script.  This is
    the one place that reads them, so a command that gets its settings from
    here cannot write or connect with an unchecked value."""
    url = options.get("hive_url") or os.environ.get("SAMPLEGEN_HIVE_URL")
    config = parse_url(url)
    for value, what in ((options.get("hive_files"), "hive_files"),
                        (config.get("files"), "files= in --hive-url"),
                        (os.environ.get("SAMPLEGEN_HIVE_FILES"), "$SAMPLEGEN_HIVE_FILES")):
        if value:
            files = check_files(value, what)
            break
    else:  # samplegen's own cache directory: created with its parents
        files = check_files(os.path.expanduser(DEFAULT_FILES), "the default files directory",
                            default=True)
    python, what = next(((v, w) for v, w in ((options.get("hive_python"), "hive_python"),
                                             (config.get("python"), "python= in --hive-url"))
                         if v), ("python3", "python"))
    records = options.get("hive_records") or config.get("records") or "chunks"
    if records not in ("chunks", "rows"):
        raise ParameterError(f"records must be chunks or rows, got {records!r}")
    return {"url": url, "files": files, "python": check_python(python, what),
            "records": records}


def check_python(value, what="python= in --hive-url"):
    """The interpreter of the TRANSFORM scripts: the first word of their
    command line (``USING '<python> samplegen-<hash>.zip ...'``), so one
    program name or path -- no quotes, spaces, ``=``, ``;``, ``$``, control
    characters, no leading ``-``."""
    return sql.program(value, what)


def check_files(value, what="files= in --hive-url", default=False):
    """The directory the zip is written to, as the scripts name it.

    A local value (``~``, ``..`` and relative paths are resolved here, on
    the client) must be what :func:`hive.sql.path` accepts (quotes, spaces, ``;``, ``$``, control
    characters); an existing directory, or a new one in an existing
    directory (only samplegen's own default is created with its parents).
    A Hadoop URI is checked as text only (and may not hold ``..``).
    Nothing is created here."""
    if not isinstance(value, str) or not value:
        raise ParameterError(f"{what} must be a directory, got {value!r}")
    if not fsmod.is_local(value):
        if ".." in value.split("/"):
            raise ParameterError(f"{what} {value!r} must be a plain path, without '..'")
        return sql.path(value, what)
    files = sql.path(os.path.abspath(os.path.expanduser(fsmod.local_path(value))), what)
    if os.path.lexists(files):
        if not os.path.isdir(files):
            raise ParameterError(f"{what} {files} exists and is not a directory")
    elif not default:
        parent = os.path.dirname(files)
        if not os.path.isdir(parent):
            raise ParameterError(f"{what} {files}: parent directory {parent} does not exist "
                                 "(create it, or name an existing directory)")
    return files


def ship_zip(files, udf_spec):
    """Put ``samplegen-<hash>.zip`` into *files* (local or a Hadoop URI),
    unless the file of that name there holds that content (a damaged one
    is written again); returns its file name."""
    if fsmod.is_local(files):
        return os.path.basename(build_hive_zip(files, udf_spec))
    import tempfile
    with tempfile.TemporaryDirectory(prefix="samplegen-hive-") as tmp:
        local = build_hive_zip(tmp, udf_spec)
        name = os.path.basename(local)
        remote = fsmod.join(files, name)
        fs = fsmod.get_fs(remote)
        with open(local, "rb") as f:
            data = f.read()
        if not (fs.exists(remote) and has_named_content(name, fs.read_bytes(remote))):
            fs.write_bytes(remote, data)    # missing, or damaged: replaced whole
    return name


def server_path(uri):
    """A path as the scripts get it (absolute for local paths)."""
    if fsmod.is_local(uri):
        return os.path.abspath(fsmod.local_path(uri))
    return uri


def table_location(uri):
    """A table's LOCATION: a local path as a ``file://`` URI (Apache Hive
    resolves a bare path on the default filesystem, HDFS on a cluster)."""
    if fsmod.is_local(uri):
        return "file://" + os.path.abspath(fsmod.local_path(uri))
    return uri


def block_table_ddl(table, location, meta):
    values = {"table": table, "location": table_location(location), "rows": meta["rows"],
              "cols": meta["cols"], "block_size": meta["block_size"], "kind": meta["kind"]}
    return sql.render(sql.load_script("create_block_table"), values, KINDS)


#: the scripts' last stage, between ``-- [finish`` and ``-- finish]`` lines:
#: one task that writes the run's metadata, for runs from beeline alone
_FINISH = re.compile(r"^-- \[finish\n.*?^-- finish\]\n", re.MULTILINE | re.DOTALL)


def render_query(plan, table, output, engine_settings, zip_name, input_dir, finish=True):
    """The method's script with every variable filled in (validated);
    *input_dir* is the block table's matrix directory.  Without *finish*,
    the query ends with the re-blocking stage: the samplegen driver writes
    the metadata itself, so its query skips the last stage (one task, on
    Tez one more vertex: about a second)."""
    name, method_vars = script_for(plan)
    values = {"table": table, "output": server_path(output), "input": server_path(input_dir),
              "files": engine_settings["files"],
              "zip": zip_name, "python": engine_settings["python"], "rows": plan.rows,
              "cols": plan.cols, "block_size": plan.block_size, "kind": plan.kind,
              "seed": plan.seed, "bin_bits": format_bin_bits(plan),
              "records": engine_settings["records"], **method_vars}
    text = sql.load_script(name)
    if not finish:
        text = _FINISH.sub("", text)
        sql.path(values.pop("input"), "input")
    return sql.render(text, values, KINDS)


#: the zip's name while a query is only being checked: the real name is the
#: hash of the zip's content, known once the zip is built (and shipped)
PENDING_ZIP = "samplegen-0000000000000000.zip"


def check_query(plan, table, output, engine_settings, input_dir):
    """Render the method's script with every value but the zip's name, to
    refuse a bad value before the zip is built or shipped."""
    render_query(plan, table, output, engine_settings, PENDING_ZIP, input_dir)


class ScriptError(RuntimeError):
    """A TRANSFORM script failed for a reason other than bad input (a bug)."""


def raise_error_row(message):
    """Raise the error a TRANSFORM script reported in an error row (its
    payload is a :mod:`~jobs.engines.task_errors` marker line)."""
    raise error_in(message, _script_failed) or _script_failed(message)


def _script_failed(cause):
    return ScriptError(f"a TRANSFORM script failed: {cause}")


def summaries_of(rows):
    for row in rows:
        if len(row) == 4 and row[0] == -2:
            raise_error_row(row[3])
    out, seen = [], set()
    for row in rows:
        if len(row) != 4 or row[0] != -1:
            raise HiveError(f"unexpected row in the sampling query's result: {row!r:.200}")
        summary = json.loads(row[3])
        key = (summary["sample"], summary["v"])
        if key in seen:  # two tasks wrote the same column of blocks
            raise HiveError(f"column of blocks {key[1]} of {key[0]} was reported twice "
                            "(speculative or duplicated reduce tasks?)")
        seen.add(key)
        out.append(summary)
    return out


def matrix_dir(inputs):
    parents = {uri.rstrip("/").rsplit("/", 1)[0] for uri in inputs}
    if len(parents) != 1:
        raise InputError("runner 'hive' reads one matrix directory; got part files from "
                         f"{len(parents)} directories")
    return parents.pop()


def temp_table_name():
    return "samplegen_in_" + uuid.uuid4().hex[:16]


def run_hive(plan, inputs, runner, options):
    """Engine entry point (see :func:`jobs.driver.generate`)."""
    conf = settings(options)
    table = options.get("hive_table")
    temp = temp_table_name() if table is None else None
    ddl = None
    input_dir = matrix_dir(inputs)
    if temp is not None:
        meta = {"rows": plan.rows, "cols": plan.cols, "block_size": plan.block_size,
                "kind": plan.kind}
        ddl = block_table_ddl(temp, input_dir, meta)
    check_query(plan, table or temp, plan.output, conf, input_dir)
    # every value is checked; connect before shipping: a dead server writes nothing
    with Client(conf["url"]) as client:
        zip_name = ship_zip(conf["files"], plan.udf)
        try:
            if ddl is not None:
                client.run_script(ddl)
            query = render_query(plan, table or temp, plan.output, conf, zip_name, input_dir,
                                 finish=False)
            rows = client.run_script(query)
        finally:
            if temp is not None:
                try:
                    client.execute(f"DROP TABLE IF EXISTS {temp}", fetch=False)
                except Exception:
                    pass
    return summaries_of(rows)
