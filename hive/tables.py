"""Table-to-table use: block tables in, result tables out.

* :func:`create_block_table` registers a block-store matrix directory as an
  EXTERNAL block table (``create_block_table.hql``), with the matrix's shape
  in its ``samplegen.*`` properties.
* :func:`sample_table` samples an existing block table with the same query
  as ``--runner hive`` (the table is read by the query itself), into a run
  directory ``output`` that becomes the EXTERNAL result table ``result``:
  ``(h_index INT, v_index INT, block STRING) PARTITIONED BY (sample
  STRING)``, one partition per sample matrix (its block-store directory).
  In fold mode, partition ``train-<i>`` holds the extra matrix of the
  composed training set and the view ``<result>_train_<i>`` is the whole
  training set (the other folds' full blocks, then the extra matrix, with
  ``h_index`` renumbered as the composed matrix reads them).

Identifiers are validated before any statement runs; a result table that
exists is refused unless ``overwrite``; the run directory is written whole or
not at all (:func:`jobs.driver.generate`).
"""
import os

import numpy as np

from samplegen.jobs import driver
from samplegen.jobs import fs as fsmod
from samplegen.jobs.plan import make_plan
from samplegen.jobs.store import Matrix
from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import InputError, OutputError, ParameterError

from . import sql
from .client import Client
from .engine import (
    block_table_ddl,
    check_query,
    render_query,
    server_path,
    settings,
    ship_zip,
    table_location,
)

RESULT_DDL = """CREATE EXTERNAL TABLE {result} (
  h_index INT,
  v_index INT,
  block   STRING
)
PARTITIONED BY (sample STRING)
ROW FORMAT DELIMITED FIELDS TERMINATED BY '\\t' LINES TERMINATED BY '\\n'
STORED AS TEXTFILE
LOCATION {location}"""


def client_path(location):
    """A location reported by the server (``file:/x``, ``file:///x``,
    ``hdfs://nn/x``) as a URI samplegen opens (``/x``, ``hdfs://nn/x``)."""
    if location.startswith("file:"):
        rest = location[len("file:"):]
        if rest.startswith("//"):
            rest = rest[2:]
            rest = rest[rest.index("/"):] if "/" in rest else "/"
        return rest
    return location


def create_block_table(url, name, src, replace=False, log=None):
    """Register the matrix directory *src* as block table *name*."""
    log = log or (lambda message: None)
    sql.identifier(name)
    meta = Matrix.open(src).meta
    if meta.get("composed_of"):
        raise OutputError(f"{src} is a composed view; export it and import the result first")
    ddl = block_table_ddl(name, src, meta)
    with Client(url) as client:
        if client.table_exists(name):
            if not replace:
                raise OutputError(f"table {name} exists (use --replace to re-create it)")
            client.execute(f"DROP TABLE {name}", fetch=False)
        client.run_script(ddl)
    log(f"created block table {name} over {server_path(src)} ({meta['rows']} x "
        f"{meta['cols']} {meta['kind']}, block size {meta['block_size']})")
    return ddl


def view_name(result, sample):
    return sql.identifier(f"{result}_{sample.replace('-', '_')}", "view name")


def result_ddl(result, output, samples):
    """Statements creating the result table over run directory *output*;
    *samples* are manifest entries (or ``{"name": ...}`` dicts).  The views
    of composed training sets are listed in the table's ``samplegen.views``
    property, so that replacing the table drops exactly them."""
    views = [view_name(result, e["name"]) for e in samples if e.get("composed_of")]
    statements = [RESULT_DDL.format(result=result, location=sql.quoted(
        sql.path(table_location(output), "output")))
        + f"\nTBLPROPERTIES ('samplegen.views' = {sql.quoted(','.join(views))})"]
    for entry in samples:
        name = sql.word(entry["name"], "sample name")
        location = sql.quoted(sql.path(table_location(fsmod.join(output, name)), "output"))
        statements.append(f"ALTER TABLE {result} ADD PARTITION (sample = {sql.quoted(name)}) "
                          f"LOCATION {location}")
    for entry in samples:
        if entry.get("composed_of"):
            statements.append(composed_view(result, entry))
    return statements


def composed_view(result, entry):
    """``CREATE VIEW`` of a composed training set over the result table."""
    parts, offset = [], 0
    for part in entry["composed_of"]:
        blocks = int(part["blocks"])
        if part["path"] == ".":
            source, limit = entry["name"], None
        else:
            source, limit = part["path"].rsplit("/", 1)[-1], blocks
        where = f"sample = {sql.quoted(sql.word(source, 'sample name'))}"
        if limit is not None:
            where += f" AND h_index < {sql.integer(limit)}"
        parts.append(f"SELECT h_index + {sql.integer(offset)} AS h_index, v_index, block "
                     f"FROM {result} WHERE {where}")
        offset += blocks
    return f"CREATE VIEW {view_name(result, entry['name'])} AS\n" + "\nUNION ALL\n".join(parts)


def drop_statements(client, result):
    """Statements dropping result table *result* and the views recorded with
    it (none when it does not exist)."""
    if not client.table_exists(result):
        return []
    props = {str(k): str(v) for k, v in client.execute(f"SHOW TBLPROPERTIES {result}")}
    views = filter(None, props.get("samplegen.views", "").split(","))
    return ([f"DROP VIEW IF EXISTS {sql.identifier(view, 'view name')}" for view in views]
            + [f"DROP TABLE IF EXISTS {result}"])


def _refuse_existing(client, result, overwrite):
    if client.table_exists(result) and not overwrite:
        raise OutputError(f"table {result} exists (use --overwrite to replace it)")


#: rows of row ids per call of the sampling-UDF in :func:`sample_rows`
COUNT_ROWS = 1 << 20


def sample_rows(plan):
    """Rows of every sample matrix of *plan*, counted on the client: the
    sampling-UDF over every row id (no data is read; the RNG contract makes
    the counts those of the run).  ``samplegen hive kfold --print`` needs
    the folds' sizes for the views of the composed training sets: about
    0.02 s per million rows (k-fold, one core)."""
    udf, rng, n = plan.sampler(), plan.rng(), len(plan.names)
    counts = np.zeros(n, np.int64)
    for start in range(0, plan.rows, COUNT_ROWS):
        occ = udf(start, min(plan.rows, start + COUNT_ROWS), rng)
        counts += np.bincount(occ.sample, minlength=n)[:n]
    return dict(zip(plan.names, counts.tolist()))


def check_output(output, overwrite=False):
    """``--output``, checked before any connection and any write.

    The run directory's path is the result table's quoted ``LOCATION`` and
    an argument of the TRANSFORM scripts (``--output <dir>``), so it must be
    what :func:`hive.sql.path` accepts once made absolute (no quotes, spaces,
    ``;``, ``$``, control characters) and end in a name; a Hadoop URI may not
    hold ``..`` (a local path is resolved here).  A local one must be a new or
    empty directory (any with *overwrite*) whose parent directory exists.
    Returns the path as the server gets it."""
    if not isinstance(output, str) or not output:
        raise OutputError(f"--output must name a directory, got {output!r}")
    if not fsmod.is_local(output) and ".." in output.split("/"):
        raise OutputError(f"--output {output!r} must be a plain path, without '..'")
    where = sql.path(server_path(output), "--output")
    name = where.rstrip("/").rsplit("/", 1)[-1]
    if not name:
        raise OutputError(f"--output {output!r} must name a directory to create, not a root")
    if not fsmod.is_local(output):
        return where  # a Hadoop URI: the run itself checks it (jobs.store.StagedOutput)
    if os.path.lexists(where):
        if not os.path.isdir(where):
            raise OutputError(f"--output {where} exists and is not a directory")
        if os.listdir(where) and not overwrite:
            raise OutputError(f"--output {where} is not empty (use --overwrite to replace it)")
    parent = os.path.dirname(where.rstrip("/"))
    if not os.path.isdir(parent):
        raise OutputError(f"--output {where}: parent directory {parent} does not exist")
    return where


#: a stand-in row count for checking a UDF's parameters before the table's is known
STAND_IN_ROWS = (1 << 63) - 1


def check_params(udf, params):
    """The sampling-UDF *udf*'s own *params*, checked before any connection:
    the UDF built for a stand-in row count (the checks that need the
    table's rows, say k against the row count, come again once it is
    known), with a stand-in of uniform weights and without the columns
    of classes and groups (checked against the table later).  So a bad
    ``--ratio`` is refused at once, not after a query over the table."""
    from samplegen.udfs.strata import SIDES
    from samplegen.udfs.weighted import RowWeights

    own = {p: v for p, v in (params or {}).items()
           if p not in (SIDES["strata"], SIDES["grouping"])}
    weighting = RowWeights.uniform(STAND_IN_ROWS) if own.get(SIDES["weighting"]) else None
    load_udf(udf, STAND_IN_ROWS, own, None, None, weighting)


def sample_table(url, table, result, output, udf, params, seed, overwrite=False,
                 print_only=False, options=None, log=None):
    """Sample block table *table* into result table *result* (files in
    *output*); with *print_only*, return the HiveQL instead of running it.

    Everything the command line gives is checked before the connection and
    before anything is written: the table names, the UDF's parameters
    (:func:`check_params`), ``--output``, the URL and its ``files=`` /
    ``python=`` (:func:`hive.engine.settings`)."""
    log = log or (lambda message, progress=False: None)
    sql.identifier(table)
    sql.identifier(result, "result table name")
    check_params(udf, params)
    check_output(output, overwrite)
    options = dict(options or {}, hive_url=url, hive_table=table)
    conf = settings(options)
    with Client(conf["url"]) as client:
        location = client_path(client.table_location(table))
        matrix = Matrix.open(location)
        if print_only and (params.get("stratify") or params.get("groups")):
            raise ParameterError("a stratified or grouped run reads the rows' classes first "
                                 "and writes them next to the run; run it without --print")
        sides = driver.row_sides(matrix, udf, params, log)
        udf_obj = load_udf(udf, matrix.rows, params, sides["strata"][0], sides["grouping"][0])
        composed = list(getattr(udf_obj, "composed_names", lambda: [])())
        names = list(udf_obj.sample_names() or []) + composed
        for name in names:
            sql.word(name, "sample name")
        for name in composed:
            view_name(result, name)
        _refuse_existing(client, result, overwrite)
        if print_only:
            plan = make_plan(udf_obj, seed, matrix.meta, output)
            check_query(plan, table, output, conf, location)
            entries = [{"name": n} for n in names]
            if composed:  # the views' block counts, known before the run
                rows_of = sample_rows(plan)
                entries = [{"name": n} for n in plan.names] + [
                    {"name": n, "composed_of": driver.composed_of(
                        plan.names, rows_of, plan.block_size, round_, group=plan.fold_group)}
                    for round_, n in enumerate(composed)]
            ddl = (drop_statements(client, result) if overwrite else []) + result_ddl(
                result, output, entries)
            # all checked: now the zip the printed query adds (nothing before)
            query = render_query(plan, table, output, conf, ship_zip(conf["files"], plan.udf),
                                 location)
            return (query + "\n-- then the result table over the run directory"
                    + (" and one view per composed training set" if composed else "")
                    + ":\n" + ";\n".join(ddl) + ";\n")
        manifest = driver.generate(location, output, udf, params, seed, runner="hive",
                                   overwrite=overwrite, options=options, log=log, sides=sides)
        for statement in drop_statements(client, result) + result_ddl(result, output,
                                                                      manifest["samples"]):
            client.execute(statement, fetch=False)
    log(f"result table {result}: {len(manifest['samples'])} partitions over "
        f"{server_path(output)}")
    return manifest


def register_result(url, result, output, overwrite=False, print_only=False, log=None):
    """Result table *result* (and the views of composed training sets) over
    the finished run directory *output*: a run written by beeline alone, from
    a shipped script and its ``--hivevar`` values, becomes what ``samplegen
    hive`` leaves.  The samples, their partitions and the views come from the
    run's manifest; with *print_only*, return the statements instead."""
    log = log or (lambda message, progress=False: None)
    sql.identifier(result, "result table name")
    where = check_output(output, overwrite=True)
    manifest = driver.info(output)
    if manifest.get("kind") != "run":
        raise InputError(f"{output} is a matrix, not a run directory")
    for entry in manifest["samples"]:
        sql.word(entry["name"], "sample name")
        if entry.get("composed_of"):
            view_name(result, entry["name"])
    conf = settings({"hive_url": url})
    with Client(conf["url"]) as client:
        _refuse_existing(client, result, overwrite)
        statements = drop_statements(client, result) + result_ddl(result, output,
                                                                  manifest["samples"])
        if print_only:
            return ";\n".join(statements) + ";\n"
        for statement in statements:
            client.execute(statement, fetch=False)
    log(f"result table {result}: {len(manifest['samples'])} partitions over {where}")
    return manifest


def script_text(name):
    """The raw text of ``hive/<name>.hql`` (``${hivevar:...}`` placeholders)."""
    names = sorted(f[:-4] for f in os.listdir(sql.SCRIPT_DIR) if f.endswith(".hql"))
    if name not in names:
        raise ParameterError(f"unknown script {name!r}: choose one of {', '.join(names)}")
    return sql.load_script(name)
