"""Ordinary Hive tables sampled row by row, keyed by a column (``rows.hql``).

A *row table* holds one row per row and any columns (strings, arrays,
structs, partitions).  :func:`sample_row_table` samples it with one query:
a TRANSFORM script (``transform.py rows``) decides every row from its key's
position (:mod:`jobs.keys`: the same decisions as ``samplegen.spark`` and,
for row-id keys, the block jobs) and passes the row's text through once per
occurrence with the sample's name; the result is a table with the source's
columns, ``PARTITIONED BY (sample STRING)``, and one view per sample
(``<result>_<sample>``; for k-fold also ``<result>_train_<i>``, every row
not in fold i).

Everything is checked before any statement that writes: the names, the key
column and its values (one aggregate over the key: no NULL, no negative
integer; the row count for user UDFs and the bootstrap, whose keys must be
the row ids ``0..N-1`` on Hive), the UDF's parameters.

Stratified and grouped samples (``stratify``, ``groups``) need row-id keys:
one query reads the column, and its class files (:mod:`jobs.strata`) go
beside the shipped zip for the query's tasks, removed when it ends.
"""
import uuid

from samplegen.jobs import fs as fsmod
from samplegen.jobs import keys
from samplegen.jobs.phases import partners
from samplegen.jobs.plan import format_params
from samplegen.jobs.strata import remove_side, strata_by_row_id, weights_by_row_id, write_side
from samplegen.udfs import arrivals
from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import ParameterError
from samplegen.udfs.rng import PositionRNG, check_seed
from samplegen.udfs.strata import SIDES

from . import sql
from .client import Client
from .engine import PENDING_ZIP, server_path, settings, ship_zip
from .tables import check_params, drop_statements, view_name

#: the number of rows holdout and kfold see: any non-negative 64-bit position
KEY_SPACE_ROWS = (1 << 63) - 1
KINDS = {"table": "identifier", "result": "identifier", "columns": "columns",
         "typed_columns": "typed_columns", "position": "position", "files": "path",
         "zip": "word", "python": "program", "udf": "word", "params": "params", "seed": "int",
         "n_rows": "int", "strata": "word", "grouping": "word", "weighting": "word"}
ARRIVALS_KINDS = {"python": "program", "zip": "word", "stage": "word", "seed": "int",
                  "n_rows": "int", "size": "int", "samples": "int", "bits": "int",
                  "windows": "int", "targets": "params", "output": "typed_columns",
                  "position": "position", "table": "identifier", "files": "path",
                  "streams": "params", "bins": "params"}
#: columns of the result besides the source's
RESERVED = ("sample", "samplegen_position")


def table_columns(client, table):
    """``[(name, type), ...]`` of *table* (partition columns included)."""
    columns = []
    for row in client.execute(f"DESCRIBE {table}"):
        name = str(row[0] or "").strip()
        if not name or name.startswith("#"):
            break
        if not sql.IDENTIFIER.fullmatch(name):
            raise ParameterError(f"column {name!r} of {table} cannot be used in HiveQL: "
                                 "rename it (letters, digits, _)")
        columns.append((name, str(row[1]).strip()))
    return columns


def _key_stats(client, table, key, integral):
    """Row count, and whether the keys are the row ids 0..N-1; refuses NULL
    and negative keys."""
    pos = keys.sql_position(f"`{key}`", "bigint" if integral else "string")
    big = f"CAST({pos} AS DECIMAL(38,0))"
    query = f"SELECT count(*), count({pos})"
    if integral:
        query += f", min({pos}), max({pos}), sum({big}), sum({big} * {big})"
    return keys.row_count(key, f"table {table}", client.execute(query + f" FROM {table}")[0])


def _side_of(client, table, key, column, field, log):
    """The classes (*field* ``strata``), groups (``grouping``) or weights
    (``weighting``) of *column* of the rows of *table*, whose *key* holds
    the row ids: one query reads the column."""
    import numpy as np

    words = {"strata": "classes", "grouping": "groups", "weighting": "weights"}
    log(f"{words[field]} of column {column!r}", progress=True)
    rows = client.execute(f"SELECT CAST(`{key}` AS BIGINT), `{column}` FROM {table}")
    ids, values = [r[0] for r in rows], np.array([r[1] for r in rows])
    if field == "weighting":
        return weights_by_row_id(ids, values, column)
    return strata_by_row_id(ids, values, column, field == "strata")


def _rank_cutoffs(client, conf, table, key, key_type, seed, udf_obj):
    """The cutoff words of exact sizes over keyed rows (:mod:`udfs.ranks`),
    from two TRANSFORM aggregations over the key column, as the UDF's
    ``cutoffs`` word."""
    import base64

    import numpy as np

    from samplegen.udfs import ranks

    streams, wanted = udf_obj.rank_targets()
    values = {"python": conf["python"], "zip": ship_zip(conf["files"], udf_obj.name),
              "files": conf["files"], "seed": check_seed(seed),
              "streams": ranks.format_streams(streams), "bins": "",
              "position": keys.sql_position(f"`{key}`", key_type), "table": table}

    def histogram_of():
        script = sql.render(sql.load_script("ranks"), dict(
            values, stage="histogram", output="`stream` int,`hist` string"), ARRIVALS_KINDS)
        total = np.zeros((len(streams), 1 << ranks.BITS), np.int64)
        for i, text in client.run_script(script):
            total[int(i)] += np.frombuffer(base64.b64decode(text), np.int64)
        return total

    def words_of(bins):
        script = sql.render(sql.load_script("ranks"), dict(
            values, stage="words", bins=ranks.format_lists(bins),
            output="`stream` int,`word` string"), ARRIVALS_KINDS)
        rows_in = client.run_script(script)
        return ([int(r[0]) for r in rows_in], np.array([int(r[1]) for r in rows_in], np.uint64))

    return ranks.format_lists(ranks.search_cutoffs(histogram_of, words_of, wanted))


def _cutoffs(client, conf, table, key, key_type, seed, rows, samples, size):
    """Every sample's cutoff (:mod:`udfs.arrivals`), from two TRANSFORM
    aggregations over the key column."""
    import base64

    import numpy as np

    values = {"python": conf["python"], "zip": ship_zip(conf["files"], arrivals.UDF),
              "files": conf["files"], "seed": check_seed(seed),
              "n_rows": rows, "size": size, "samples": samples,
              "bits": arrivals.bin_bits(size), "position": keys.sql_position(f"`{key}`", key_type),
              "table": table, "targets": ""}
    bits = values["bits"]

    def histograms_of(windows):
        script = sql.render(sql.load_script("arrivals"), dict(
            values, stage="histogram", windows=windows,
            output="`sample` int,`window` int,`hist` string"), ARRIVALS_KINDS)
        hists = np.zeros((samples, windows, 1 << bits), np.int64)
        for sample, window, text in client.run_script(script):
            hists[int(sample), int(window)] += np.frombuffer(base64.b64decode(text), np.int64)
        return hists

    def arrivals_in(targets, windows):
        script = sql.render(sql.load_script("arrivals"), dict(
            values, stage="boundary", windows=windows,
            targets="/".join(f"{w}:{b}" for w, b in targets),
            output="`sample` int,`word` string,`position` bigint"), ARRIVALS_KINDS)
        rows_in = client.run_script(script)
        return ([int(r[0]) for r in rows_in], np.array([int(r[1]) for r in rows_in], np.uint64),
                [int(r[2]) for r in rows_in])

    return arrivals.search_cutoffs(histograms_of, arrivals_in, samples, size)


def _views(result, udf_obj, columns):
    names = list(udf_obj.sample_names())
    listed = ", ".join(f"`{c}`" for c, _ in columns)
    views = [(view_name(result, n), f"sample = {sql.quoted(sql.word(n, 'sample name'))}")
             for n in names]
    if udf_obj.composes_folds:  # fold mode: train-i is the other folds of i's repeat
        for i in range(len(names)):
            others = partners(len(names), i, udf_obj.fold_group())
            where = (f"sample <> {sql.quoted(names[i])}" if len(others) == len(names) - 1 else
                     f"sample IN ({', '.join(sql.quoted(names[j]) for j in others)})")
            views.append((view_name(result, f"train-{i}"), where))
    return [(name, f"CREATE VIEW {name} AS SELECT {listed} FROM {result} WHERE {where}")
            for name, where in views]


def sample_row_table(url, table, result, udf, params, seed, key, overwrite=False,
                     print_only=False, log=None):
    """Sample row table *table* by its column *key* into result table
    *result* and its views; with *print_only*, return the HiveQL."""
    log = log or (lambda message, progress=False: None)
    sql.identifier(table)
    sql.identifier(result, "result table name")
    sql.identifier(key, "key column", qualified=False)
    check_params(udf, params)   # before the connection and the aggregation over the key
    for param in SIDES.values():
        if (params or {}).get(param) is not None:
            sql.identifier(params[param], f"{param} column", qualified=False)
    conf = settings({"hive_url": url})
    with Client(conf["url"]) as client:
        columns = table_columns(client, table)
        types = dict(columns)
        if key not in types:
            raise ParameterError(f"key column {key!r} is not a column of {table} (columns: "
                                 f"{', '.join(types)})")
        clash = [c for c in RESERVED if c in types]
        if clash:
            raise ParameterError(f"{table} has a column named {clash[0]!r}, which the result "
                                 "table uses itself; rename it")
        if "map<" in types[key].lower().replace(" ", ""):
            raise ParameterError(f"key column {key!r} is or holds a map ({types[key]}), which "
                                 "has no stable text; choose another key")
        asked = {field: (params or {}).get(param) for field, param in SIDES.items()}
        if udf == "weighted" and asked["weighting"] is None:
            raise ParameterError("weighted samples of a row table need --weights: the column "
                                 "of each row's weight")
        params = keys.keyed_params(udf, {p: v for p, v in (params or {}).items()
                                         if p not in SIDES.values()}, f"table {table}")
        integral = keys.is_integral(types[key])
        n, row_ids = _key_stats(client, table, key, integral)
        if any(asked.values()):
            if print_only:
                raise ParameterError("a stratified, grouped or weighted run reads the rows' "
                                     "classes, groups or weights first and ships them with "
                                     "the query; run it without --print")
            for field, column in asked.items():
                if column is not None and column not in types:
                    raise ParameterError(f"{SIDES[field]} column {column!r} is not a column "
                                         f"of {table} (columns: {', '.join(types)})")
            keys.exact_rows(key, f"table {table}", n, row_ids,
                            "stratified, grouped or weighted samples")
            params.update({SIDES[f]: c for f, c in asked.items() if c is not None})
        by_cutoffs = keys.is_exact(udf, params) and not row_ids and udf != "timeseries"
        if by_cutoffs:      # exact sizes of other keys: two aggregations first
            if print_only:
                raise ParameterError(f"--print: exact sizes keyed by {key!r} (not the row ids "
                                     "0..N-1) need two aggregations over the table before "
                                     "its query can be written; run it instead")
            n_rows = n
        elif keys.is_exact(udf, params):
            n_rows = keys.exact_rows(key, f"table {table}", n, row_ids, keys.row_id_use(udf))
        else:
            n_rows = KEY_SPACE_ROWS if udf in ("holdout", "kfold") else n
        if any(asked.values()):
            n_rows = n
            sides = {field: _side_of(client, table, key, column, field, log)
                     if column is not None else None for field, column in asked.items()}
        else:
            sides = dict.fromkeys(SIDES)
        udf_obj = load_udf(udf, n_rows, params, *(sides[field] for field in SIDES))
        prepared = udf_obj.prepare(PositionRNG(seed))
        if prepared:    # a weighted sample's cutoff keys or rate, from every row's weight
            params.update(prepared)
            udf_obj = load_udf(udf, n_rows, params, *(sides[field] for field in SIDES))
        if by_cutoffs:
            udf_obj = load_udf(udf, n_rows, dict(params, cutoffs=_rank_cutoffs(
                client, conf, table, key, types[key], seed, udf_obj)))
        if udf == "bootstrap" and not row_ids and udf_obj.oob:
            keys.exact_rows(key, f"table {table}", n, row_ids, "out-of-bag sets")  # refused
        if udf == "bootstrap" and not row_ids:  # keyed arrivals: two aggregations first
            if print_only:
                raise ParameterError(f"--print: a bootstrap keyed by {key!r} (not the row ids "
                                     "0..N-1) needs two aggregations over the table before "
                                     "its query can be written; run it instead")
            udf_obj = load_udf(arrivals.UDF, n, {
                "samples": udf_obj.samples, "size": udf_obj.size,
                "cutoffs": arrivals.format_cutoffs(_cutoffs(
                    client, conf, table, key, types[key], seed, n, udf_obj.samples,
                    udf_obj.size))})
        if udf_obj.sample_names() is None:
            raise ParameterError(f"sampling-UDF {udf!r} does not declare its sample names; a "
                                 "row table needs them")
        views = _views(result, udf_obj, columns)
        if client.table_exists(result) and not overwrite:
            raise ParameterError(f"table {result} exists (use --overwrite to replace it)")
        values = {"table": table, "result": result,
                  "columns": ",".join(f"`{c}`" for c, _ in columns),
                  "typed_columns": ",".join(f"`{c}` {t}" for c, t in columns),
                  "position": keys.sql_position(f"`{key}`", types[key]),
                  "files": conf["files"], "zip": PENDING_ZIP,
                  "python": conf["python"], "udf": udf_obj.spec[0],
                  "params": format_params(udf_obj.spec[1]), "seed": check_seed(seed),
                  "n_rows": n_rows, **dict.fromkeys(SIDES, "none")}
        sql.render(sql.load_script("rows"), values, KINDS)  # every value checked
        values["zip"] = ship_zip(conf["files"], udf_obj.spec[0])
        shipped = {field: write_side(fsmod.join(conf["files"], f"{result}-{uuid.uuid4().hex}"
                                                f"-{field}"), side, asked[field])
                   for field, side in sides.items() if side is not None}
        values.update({field: server_path(base) for field, base in shipped.items()})
        script = sql.render(sql.load_script("rows"), values, KINDS)
        after = [statement for _, statement in views] + [
            f"ALTER TABLE {result} SET TBLPROPERTIES ('samplegen.views' = "
            f"{sql.quoted(','.join(name for name, _ in views))})"]
        drops = drop_statements(client, result) if overwrite else []
        if print_only:
            return "".join(s + ";\n" for s in drops) + script + "\n" + \
                "".join(s + ";\n" for s in after)
        try:
            for statement in drops:
                client.execute(statement, fetch=False)
            client.run_script(script)
            for statement in after:
                client.execute(statement, fetch=False)
        finally:
            for base in shipped.values():
                remove_side(base)
    log(f"result table {result}: {len(udf_obj.sample_names())} samples of {table} "
        f"({n} rows) keyed by {key}; views {', '.join(name for name, _ in views[:4])}"
        + (", ..." if len(views) > 4 else ""))
    return {"samples": list(udf_obj.sample_names()), "views": [name for name, _ in views],
            "rows": n}

