"""Keys as positions: where a row known by a key (a column of a DataFrame or
of a Hive table) draws its randomness.

The sampling-UDFs decide a row from the lane blocks at its *position*
(:meth:`udfs.base.SamplingUDF.occurrences_at`).  A keyed row's position is:

* an integer key (8, 16, 32 or 64 bits) as it is; it must not be negative,
  and the row ids of a block matrix as keys give the block jobs' decisions;
* any other key hashed: the first 15 hex digits (60 bits) of the MD5 of its
  text (``CAST(key AS STRING)``, UTF-8) read as an integer.

Both rules are the same SQL expression in Spark and in Hive
(:func:`sql_position`), and :func:`hashed_position` is the same rule in
Python, so a string key gets the same position, hence the same decisions,
in every engine.  (Other types hash their engine's text form, which Spark
and Hive may write differently, e.g. for arrays or timestamps.)
"""
import hashlib

from samplegen.udfs.errors import ParameterError

#: hex digits of the MD5 digest that make a hashed key's position
HEX_DIGITS = 15
#: SQL types whose values are positions as they are (Spark and Hive names)
INTEGRAL = frozenset({"tinyint", "smallint", "int", "integer", "bigint", "byte", "short",
                      "long"})


def hashed_position(text):
    """The position of a non-integer key whose text is *text*."""
    return int(hashlib.md5(text.encode("utf-8")).hexdigest()[:HEX_DIGITS], 16)


def is_integral(sql_type):
    """True for a SQL type name (``int``, ``bigint``, ...) used as it is."""
    return sql_type.strip().lower() in INTEGRAL


def sql_position(column, sql_type):
    """The SQL expression (Spark SQL and HiveQL alike) of the position of
    the rows' key *column* (an already quoted column reference) of type
    *sql_type*: NULL for a NULL key."""
    if is_integral(sql_type):
        return f"CAST({column} AS BIGINT)"
    return (f"CAST(conv(substr(md5(CAST({column} AS STRING)), 1, {HEX_DIGITS}), 16, 10) "
            "AS BIGINT)")


def negative_key(key, value):
    """The error of a negative integer key."""
    return ParameterError(f"key column {key!r} holds a negative integer ({value}); keys must be "
                          ">= 0 (or cast them to strings, which are hashed)")


def row_count(key, where, counts):
    """``(rows, row_ids)`` from one aggregate over the key column of *where*
    (``the DataFrame``, ``table t``): *counts* is ``(count(*),
    count(position))`` and, for an integer key, its minimum, maximum, sum and
    sum of squares.  *row_ids* is True when the keys are the row ids
    ``0..N-1`` (all four those of ``0..N-1``).  No rows, a NULL key or a
    negative one is a ParameterError."""
    n, non_null, *moments = counts  # the moments are NULL over no rows
    n, non_null = int(n), int(non_null)
    if n == 0:
        raise ParameterError(f"{where} has no rows")
    if non_null != n:
        raise ParameterError(f"key column {key!r} of {where} holds NULL")
    if not moments:
        return n, False
    lo, hi, total, squares = (int(v) for v in moments)
    if lo < 0:
        raise negative_key(key, lo)
    return n, (lo, hi, total, squares) == (0, n - 1, n * (n - 1) // 2,
                                           (n - 1) * n * (2 * n - 1) // 6)


def is_exact(udf, params):
    """Whether *udf* with *params* decides rows by their row ids: exact sizes
    (hold-out ``exact``, k-fold ``balanced``: a labelling over the row ids,
    not per-key coins) or time-series folds (row ids as time)."""
    return udf == "timeseries" or (udf in ("holdout", "kfold") and
                                   bool(params.get("exact") or params.get("balanced")))


def row_id_use(udf):
    """What needs the row ids as keys, for :func:`exact_rows`' message."""
    return "time-series folds" if udf == "timeseries" else "exact sizes"


def keyed_params(udf, params, where):
    """The parameters of built-in *udf* for rows known by a key column
    (*where*), with the defaults filled in (exact sizes, balanced folds);
    ParameterError when they ask to stratify or group (a class's rows are
    ranked by row id, and a group's rows counted, which keyed rows spread
    over partitions do not give)."""
    params = dict(params or {})
    for param, done in (("stratify", "stratified"), ("groups", "grouped")):
        if params.get(param) is not None:
            raise ParameterError(f"{done} samples need a matrix (samplegen import) or the "
                                 f"Python API; the keyed rows of {where} cannot be {done}")
    chosen = {"holdout": "exact", "kfold": "balanced"}.get(udf)
    if chosen and params.get(chosen) is None:
        params[chosen] = True
    return params


def exact_rows(key, where, rows, row_ids, what="exact sizes"):
    """*rows*, the rows an exact-size labelling (or *what* else is decided
    over the row ids) spans, when the keys of *where* are the row ids
    ``0..rows-1``; else a ParameterError."""
    if not row_ids:
        raise ParameterError(f"{what} need key column {key!r} of {where} to hold the row "
                             f"ids 0..{rows - 1} (each once)")
    return rows
