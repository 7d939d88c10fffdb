"""Spark DataFrames sampled row by row, each row keyed by a column
(:mod:`samplegen.spark`).

Every decision about a row is a pure function of ``(seed, key)``: the
sampling-UDF is evaluated at the row's *position*, which is its key
(:meth:`udfs.base.SamplingUDF.occurrences_at`).  So the samples do not
depend on the partitioning, on the order of the rows, on caching or on how
often Spark recomputes the input -- unlike ``DataFrame.randomSplit``, whose
splits overlap or lose rows when a non-deterministic upstream is recomputed
between them.  When the key holds the row ids of a block matrix, a row is in
exactly the samples the block jobs put it in, for the same seed.

Positions:

* integer keys (byte, short, int, long) are the positions as they are; they
  must not be negative;
* any other type (strings, decimals, dates, structs, arrays) is hashed: the
  first 60 bits of the MD5 of its text, the rule of :mod:`jobs.keys`, the
  same in Hive and in Python (a string key gets the same decisions in every
  engine);
* a NULL key is an error (the task fails with ``key column ... holds NULL``).

Keys should be unique: rows with equal keys get equal decisions (a
bootstrap of keyed rows refuses them when its cut falls between two of
them; see :func:`bootstrap`).

Only the key column crosses to Python: an Arrow UDF (Spark >= 4.1) decides
a batch of rows at once (numpy, no Python object per row) and returns each
row's sample ids as a list, which Spark explodes in the JVM; the rows and
their columns, of any type, stay in the JVM.  Before Spark 4.1 the rows
cross in Arrow batches (``mapInArrow``) and are taken once per occurrence
(``pyarrow.RecordBatch.take``): the same samples, slower.  The result
is a lazy DataFrame Spark plans as usual; nothing is collected to the driver.
:func:`tag` returns that one tagged DataFrame (a ``sample`` column of sample
names): writing it, e.g. ``partitionBy("sample")``, produces every sample in
one pass over the input.  :func:`holdout`, :func:`kfold`, :func:`bootstrap`
and :func:`sample` return one DataFrame per sample, filters of that tagged
DataFrame; with ``persist=True`` it is persisted (memory and disk), so that
acting on every sample reads the input once.
"""
import warnings

import numpy as np

from samplegen.jobs import keys
from samplegen.jobs.strata import weights_by_row_id
from samplegen.udfs import arrivals
from samplegen.udfs.builtin import Bootstrap, HoldOut, KFold
from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import ParameterError, check_bool, check_int
from samplegen.udfs.rng import check_seed

#: positions of keyed rows lie in [0, KEY_SPACE): holdout and kfold see it
#: as their number of rows (user UDFs and the bootstrap see the row count)
KEY_SPACE = 1 << 63
#: internal columns (dropped from every result)
KEY_COLUMN = "__samplegen_key"
SAMPLE_COLUMN = "__samplegen_sample"


# ---------------------------------------------------------------------------
# the tasks: the rows' positions in, their sample ids out
# ---------------------------------------------------------------------------
def _occurrences(state, udf, params, n_rows, seed, key_name, sides, column):
    """Sample ids and row offsets of the occurrences of the rows whose key
    positions are the Arrow array *column* (the UDF and generator built once
    per worker, in *state*; *sides*: the rows' classes and groups, or None)."""
    from samplegen.udfs.rng import PositionRNG

    if "udf" not in state:
        state["udf"] = load_udf(udf, n_rows, dict(params), *(sides or (None, None)))
        state["rng"] = PositionRNG(seed)
    if column.null_count:
        raise ParameterError(f"key column {key_name!r} holds NULL")
    positions = column.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if positions.size and positions.min() < 0:
        raise keys.negative_key(key_name, int(positions.min()))
    return state["udf"].occurrences_at(positions, state["rng"])


def _sample_lists(udf, params, n_rows, seed, key_name, sides):
    """The Arrow UDF (Spark >= 4.1) of the rows' sample ids: a list per row
    (repeated for a row drawn more than once), built from the occurrences'
    offsets without a Python object per row.  Only the key column crosses to
    Python; the rows stay in the JVM, which explodes the lists."""
    import pyarrow as pa

    state = {}

    def decide(keys):
        occ = _occurrences(state, udf, params, n_rows, seed, key_name, sides, keys)
        order = np.argsort(occ.offset, kind="stable")
        bounds = np.zeros(len(keys) + 1, np.int32)
        np.cumsum(np.bincount(occ.offset, minlength=len(keys)), out=bounds[1:])
        return pa.ListArray.from_arrays(pa.array(bounds, pa.int32()),
                                        pa.array(occ.sample[order].astype(np.int32)))

    decide.__annotations__ = {"keys": pa.Array, "return": pa.Array}  # Spark reads the kind here
    return decide


def _row_batches(udf, params, n_rows, seed, key_name, sides):
    """The ``mapInArrow`` function of Spark < 4.1: every batch's rows taken
    once per occurrence (``RecordBatch.take``), with their sample id."""
    state = {}

    def run(batches):
        import pyarrow as pa

        for batch in batches:
            last = batch.num_columns - 1
            occ = _occurrences(state, udf, params, n_rows, seed, key_name, sides,
                               batch.column(last))
            take = pa.array(occ.offset, type=pa.int64())
            columns = [batch.column(i).take(take) for i in range(last)]
            columns.append(pa.array(occ.sample.astype(np.int32), type=pa.int32()))
            yield pa.RecordBatch.from_arrays(
                columns, names=[batch.schema.field(i).name for i in range(last)]
                + [SAMPLE_COLUMN])

    return run


# ---------------------------------------------------------------------------
# the driver side: checks, the tagged DataFrame, one DataFrame per sample
# ---------------------------------------------------------------------------
def _quoted(name):
    """Column *name* quoted for Spark SQL and ``F.col`` (backticks, a
    backtick inside doubled): a name with dots, spaces or backticks is one
    column, never a field path or an expression."""
    return "`" + name.replace("`", "``") + "`"


def _column(name):
    from pyspark.sql import functions as F

    return F.col(_quoted(name))


def _check_frame(df):
    """Refuse anything but a DataFrame whose column names are distinct (a
    repeated name is ambiguous to every column reference)."""
    if not all(hasattr(df, a) for a in ("schema", "sparkSession", "columns")):
        raise ParameterError(f"expected a pyspark DataFrame, got {type(df).__name__}")
    seen = set()
    for name in df.columns:
        if name in seen:
            raise ParameterError(f"the DataFrame has two columns named {name!r}; rename one "
                                 "(e.g. with toDF or an alias in the join)")
        seen.add(name)


def _has_map(data_type):
    """Whether Spark type *data_type* is or holds a map (in a struct or an
    array, at any depth)."""
    kind = type(data_type).__name__
    if kind == "MapType":
        return True
    if kind == "ArrayType":
        return _has_map(data_type.elementType)
    if kind == "StructType":
        return any(_has_map(f.dataType) for f in data_type.fields)
    return False


def _key_position(df, key):
    """The Spark column of the rows' positions (see the module docstring)."""
    from pyspark.sql import functions as F

    _check_frame(df)
    if not isinstance(key, str) or not key:
        raise ParameterError(f"key must name a column of the DataFrame, got {key!r}")
    fields = {f.name: f for f in df.schema.fields}
    if key not in fields:
        raise ParameterError(f"key column {key!r} is not in the DataFrame (columns: "
                             f"{', '.join(fields) or 'none'})")
    for name in (KEY_COLUMN, SAMPLE_COLUMN):
        if name in fields:
            raise ParameterError(f"the DataFrame has a column named {name!r}, which "
                                 "samplegen uses itself; rename it")
    data_type = fields[key].dataType
    if _has_map(data_type):
        raise ParameterError(f"key column {key!r} is or holds a map "
                             f"({data_type.simpleString()}), which has no stable text; "
                             "choose another key")
    if type(data_type).__name__ == "NullType":
        raise ParameterError(f"key column {key!r} is NULL in every row (type void); "
                             "choose another key")
    return F.expr(keys.sql_position(_quoted(key), data_type.simpleString()))


def tagged_frame(df, udf, seed, key, params=None, n_rows=KEY_SPACE - 1, sides=None):
    """One DataFrame of every occurrence: *df*'s columns and the sample id
    (int) in :data:`SAMPLE_COLUMN`.  Returns ``(frame, udf_object)``; the
    UDF is built (and its parameters checked) here, before any Spark job.
    *sides*: ``(strata, grouping)`` of rows keyed by their row ids, for a
    UDF whose *params* stratify or group them (sent with the tasks)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, IntegerType, StructField, StructType

    seed = check_seed(seed)
    if sides is None:
        params = keys.keyed_params(udf, params, "a DataFrame")
    udf_obj = load_udf(udf, n_rows, params, *(sides or (None, None)))
    position = _key_position(df, key)
    ship(df, udf)
    task = (udf, params, int(n_rows), seed, key, sides)
    with warnings.catch_warnings():  # pyspark's notice about pandas versions
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
        if hasattr(F, "arrow_udf"):  # Spark >= 4.1: only the keys go through Python
            decide = F.arrow_udf(_sample_lists(*task), ArrayType(IntegerType(), False))
            return df.withColumn(SAMPLE_COLUMN, F.explode(decide(position))), udf_obj
        schema = StructType(list(df.schema.fields)
                            + [StructField(SAMPLE_COLUMN, IntegerType(), False)])
        frame = df.withColumn(KEY_COLUMN, position).mapInArrow(_row_batches(*task), schema)
    return frame, udf_obj


def ship(df, udf=None):
    """The project's packages on the executors and a check that the workers'
    Python imports the modules the tasks need (both once per SparkContext:
    :func:`.context.check_workers` raises ``WorkerPythonError`` here, not in
    the user's action on a lazy result), and the module of a user UDF *udf*
    (``module:function``) that is a single file outside them."""
    from types import SimpleNamespace

    from .context import check_workers, ship_packages

    sc = df.sparkSession.sparkContext
    ship_packages(sc, SimpleNamespace(udf=udf) if udf else None)
    check_workers(sc)


def _per_sample(frame, count, persist):
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if persist:
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    column = F.col(SAMPLE_COLUMN)
    return [frame.filter(column == i).drop(SAMPLE_COLUMN) for i in range(count)], frame


def tag(df, udf, seed, key, column="sample", **params):
    """*df* with one row per occurrence and the sample's name in *column*:
    every sample of *udf* (``holdout``, ``kfold``, ``bootstrap`` or
    ``module:function``, with its *params*) in one DataFrame, computed in
    one pass over *df*; e.g. ``tag(df, "holdout", 7, "id", ratio=0.8,
    repeats=10).write.partitionBy("sample").parquet(out)``.  A k-fold
    ``tag`` names each row's fold (``test-<i>``)."""
    from pyspark.sql import functions as F

    _check_frame(df)
    if not isinstance(column, str) or not column or column in df.columns:
        raise ParameterError(f"column must be a new column name, got {column!r}")
    frame, names = _frame_and_names(df, udf, seed, key, params)
    lookup = F.array(*[F.lit(n) for n in names])
    return frame.withColumn(column, F.element_at(lookup, F.col(SAMPLE_COLUMN) + 1)) \
        .drop(SAMPLE_COLUMN)


def _frame_and_names(df, udf, seed, key, params):
    """The tagged frame of any UDF and its sample names; user UDFs see the
    row count (one count job), holdout and kfold the key space, or with
    exact sizes the row count (one aggregate over the key column): the block
    jobs' labelling when the keys are the row ids, else cutoffs on the
    coins' words found by two more aggregations (:mod:`udfs.ranks`)."""
    params = dict(params)
    label = params.pop("stratify", None)
    group = params.pop("groups", None)
    params = keys.keyed_params(udf, params, "a DataFrame")
    if group is not None:
        return _grouped_frame(df, udf, seed, key, params, group, label)
    if label is not None:
        return _stratified_frame(df, udf, seed, key, params, label)
    if udf == "bootstrap":
        return _bootstrap_frame(df, seed, key, params)
    if keys.is_exact(udf, params):
        rows, row_ids = _key_stats(df, key)
        if row_ids or udf == "timeseries":
            n_rows = keys.exact_rows(key, "the DataFrame", rows, row_ids, keys.row_id_use(udf))
        else:
            n_rows = rows
            params = dict(params, cutoffs=_rank_cutoffs(df, key, seed, udf, rows, params))
    elif udf in ("holdout", "kfold"):
        n_rows = KEY_SPACE - 1
    else:
        n_rows = df.count()
        if n_rows == 0:
            raise ParameterError("the DataFrame has no rows")
    frame, udf_obj = tagged_frame(df, udf, seed, key, params, n_rows)
    return frame, _names(udf_obj)


def _stratified_frame(df, udf, seed, key, params, label):
    """The tagged frame of a hold-out, k-fold or bootstrap stratified by
    column *label*.  Keys that are the row ids: the block jobs' samples
    (every row's class collected by row id, sent with the tasks).  Other
    keys: one aggregate counts each class's rows, the sizes are
    shared out over the classes as the block jobs share them
    (:func:`udfs.strata.holdout_allocation`, :func:`udfs.strata.round_robin`,
    :func:`udfs.strata.proportional`), and each class's rows are cut at its
    own ranks of the coins' words (:mod:`udfs.ranks`, two aggregations per
    class) or bootstrapped for its own share of the size, then the classes'
    frames are one."""
    import functools

    from pyspark.sql import functions as F

    from samplegen.udfs.strata import holdout_allocation, proportional, round_robin

    if udf not in ("holdout", "kfold", "bootstrap"):
        raise ParameterError(f"stratified DataFrame samples are hold-out, k-fold or bootstrap, "
                             f"not {udf}")
    if label not in df.columns:
        raise ParameterError(f"stratify column {label!r} is not in the DataFrame (columns: "
                             f"{', '.join(df.columns)})")
    column = _column(label)
    rows, row_ids = _key_stats(df, key)
    if row_ids:   # the block jobs' stratified samples: every row's class, by row id
        strata = _column_by_row_id(df, key, label, True)
        frame, udf_obj = tagged_frame(df, udf, seed, key, dict(params, stratify=label), rows,
                                      (strata, None))
        return frame, _names(udf_obj)
    counted = df.groupBy(column.alias("c")).count().collect()
    if any(row["c"] is None for row in counted):
        raise ParameterError(f"stratify column {label!r} holds NULL: every row needs a class")
    try:
        counted.sort(key=lambda row: row["c"])
    except TypeError:
        raise ParameterError(f"stratify column {label!r} must hold comparable values") from None
    values = [row["c"] for row in counted]
    if any(isinstance(v, float) and v != v for v in values):
        raise ParameterError(f"stratify column {label!r} holds NaN: every row needs a class")
    counts = np.array([row["count"] for row in counted], np.int64)
    if udf == "bootstrap":
        whole = Bootstrap(int(counts.sum()), **params)
        if whole.oob:
            raise ParameterError("out-of-bag sets of a stratified DataFrame bootstrap are not "
                                 "offered (they need row-id keys)")
        frames = []
        for value, size in zip(values, proportional(whole.size, counts)):
            if size:
                frame, names = _bootstrap_frame(df.filter(column == F.lit(value)), seed, key,
                                                dict(params, size=int(size)))
                frames.append(frame)
        return functools.reduce(lambda a, b: a.unionByName(b), frames), names
    params = dict(params, **({"exact": True} if udf == "holdout" else {"balanced": True}))
    rows = int(counts.sum())
    whole = load_udf(udf, rows, params)
    if udf == "holdout":
        per_class = holdout_allocation(whole.counts, counts)
        wanted = [[[int(t), int(t + s)] for t, s, _ in per_class]] * whole.repeats
    else:
        if counts.min() < whole.k:
            raise ParameterError(f"class {values[int(np.argmin(counts))]!r} has "
                                 f"{int(counts.min())} row{'s' if counts.min() != 1 else ''}; "
                                 f"a stratified {whole.k}-fold split "
                                 f"needs at least {whole.k} per class")
        sizes = round_robin(counts, whole.k)
        wanted = [[np.cumsum(row)[:-1].tolist() for row in sizes]] * whole.repeats
    frames = []
    for c, value in enumerate(values):
        part = df.filter(column == F.lit(value))
        n_c = int(counts[c])
        ranks = [[r for r in per[c] if r < n_c] for per in wanted]
        cutoffs = _rank_cutoffs(part, key, seed, udf, rows, params, ranks) \
            if any(ranks) else [[] for _ in ranks]
        frame, udf_obj = tagged_frame(part, udf, seed, key, dict(params, cutoffs=cutoffs), rows)
        frames.append(frame)
    return functools.reduce(lambda a, b: a.unionByName(b), frames), _names(udf_obj)


def _grouped_frame(df, udf, seed, key, params, group, label):
    """The tagged frame of a hold-out or k-fold of whole groups (column
    *group*) of rows keyed by their row ids: the block jobs' ``--groups``."""
    if udf not in ("holdout", "kfold"):
        raise ParameterError(f"grouped DataFrame samples are hold-out or k-fold, not {udf}")
    if label is not None:
        raise ParameterError("a split is either stratified or grouped: give stratify= or "
                             "groups=, not both")
    if group not in df.columns:
        raise ParameterError(f"groups column {group!r} is not in the DataFrame (columns: "
                             f"{', '.join(df.columns)})")
    rows, row_ids = _key_stats(df, key)
    if not row_ids:
        raise ParameterError(f"groups= needs key column {key!r} to hold the row ids "
                             f"0..{rows - 1} (each once); for other keys, key the rows by the "
                             "group column instead")
    grouping = _column_by_row_id(df, key, group, False)
    frame, udf_obj = tagged_frame(df, udf, seed, key, dict(params, groups=group), rows,
                                  (None, grouping))
    return frame, _names(udf_obj)


def _column_by_row_id(df, key, column, ranked):
    """The :class:`~udfs.strata.Strata` of *column* of *df*'s rows (classes,
    or groups when not *ranked*), whose *key* holds the row ids (one job
    collects the two columns, as Arrow)."""

    from samplegen.jobs.strata import strata_by_row_id

    table = df.select(_column(key).cast("long").alias("p"),
                      _column(column).alias("c")).toArrow()
    values = table.column("c")
    return strata_by_row_id(table.column("p").to_numpy(zero_copy_only=False),
                            values.to_numpy(zero_copy_only=False), column, ranked,
                            values.is_null().to_numpy(zero_copy_only=False))


def _names(udf_obj):
    names = udf_obj.sample_names()
    if names is None:
        raise ParameterError(f"sampling-UDF {udf_obj.name!r} does not declare its sample "
                             "names (sample_names()); DataFrames need them")
    return list(names)


def holdout(df, ratio, seed, key, repeats=1, fraction=1.0, persist=False, exact=True,
            stratify=None, groups=None):
    """``repeats`` hold-out pairs ``[(train, test), ...]`` of *df* (see
    :class:`udfs.builtin.HoldOut`).  With *exact* (the default), exactly
    ``round(ratio * rows)`` training rows: the block jobs' labelling when
    the key column holds the row ids ``0..N-1``, else cutoffs on the coins'
    words (:mod:`udfs.ranks`); one aggregate over the key column first, and
    two more for other keys.  With *exact* False, the paper's coins: row
    with key k is in train-w with probability ``fraction * ratio``, in
    test-w with ``fraction * (1 - ratio)``, decided by ``(seed, k)`` alone
    (no aggregation).  *stratify*: a column whose classes both sides hold
    in proportion (exact sizes; one more aggregate, and two per class; row
    ids as keys: the block jobs' samples, one job collecting the classes).
    *groups*: a column whose groups stay whole, on one side (keys: the row
    ids; the block jobs' ``--groups``; for other keys, key by the group)."""
    persist = check_bool("persist", persist)
    frame, names = _frame_and_names(df, HoldOut.name, seed, key,
                                    {"ratio": ratio, "repeats": repeats, "fraction": fraction,
                                     "exact": exact, "stratify": stratify, "groups": groups})
    parts, _ = _per_sample(frame, len(names), persist)
    return [(parts[2 * w], parts[2 * w + 1]) for w in range(len(names) // 2)]


def kfold(df, k, seed, key, persist=False, balanced=True, stratify=None, groups=None):
    """``k`` pairs ``[(train, test), ...]``: test-i is fold i, train-i every
    other row (see :class:`udfs.builtin.KFold`); each row is in exactly one
    test set.  With *balanced* (the default), fold sizes within one of each
    other, by the same aggregations as *exact* of :func:`holdout`; with
    *balanced* False, a fold per row decided by ``(seed, key)`` alone.
    *stratify*: a column whose classes every fold holds in proportion;
    *groups*: a column whose groups stay whole, each in one fold (balanced:
    each group in turn to the fold with the fewest rows); both as of
    :func:`holdout`."""
    persist = check_bool("persist", persist)
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    k = check_int("k", k, lo=2)
    frame, _ = _frame_and_names(df, KFold.name, seed, key, {"k": k, "balanced": balanced,
                                                            "stratify": stratify,
                                                            "groups": groups})
    if persist:
        frame = frame.persist(StorageLevel.MEMORY_AND_DISK)
    fold = F.col(SAMPLE_COLUMN)
    return [(frame.filter(fold != i).drop(SAMPLE_COLUMN),
             frame.filter(fold == i).drop(SAMPLE_COLUMN)) for i in range(k)]


def _key_stats(df, key):
    """One aggregate over the key column: the row count, and whether the
    keys are the row ids ``0..N-1`` (integers; count, minimum, maximum and
    the sums of the values and of their squares those of ``0..N-1``)."""
    from pyspark.sql import functions as F

    position = _key_position(df, key)
    fields = {f.name: f for f in df.schema.fields}
    integral = keys.is_integral(fields[key].dataType.simpleString())
    aggs = [F.count(F.lit(1)).alias("n"), F.count(position).alias("keys")]
    if integral:
        column = _column(key).cast("decimal(38,0)")
        aggs += [F.min(column).alias("lo"), F.max(column).alias("hi"),
                 F.sum(column).alias("s1"), F.sum(column * column).alias("s2")]
    return keys.row_count(key, "the DataFrame", df.agg(*aggs).first())


def _rank_cutoffs(df, key, seed, udf, rows, params, wanted=None):
    """The cutoff words of exact sizes over keyed rows (:mod:`udfs.ranks`):
    two aggregations over the key column; *wanted*: the ranks per stream,
    when not the UDF's own (a stratified split's class)."""
    from pyspark.sql.types import BinaryType, IntegerType, LongType

    from samplegen.udfs import ranks

    streams, own = load_udf(udf, rows, params).rank_targets()
    wanted = own if wanted is None else wanted
    collected = _over_keys(df, key)
    seed = check_seed(seed)

    def histogram_of():
        total = np.zeros((len(streams), 1 << ranks.BITS), np.int64)
        for row in collected(_rank_histograms(seed, streams),
                             [("stream", IntegerType()), ("hist", BinaryType())]):
            total[row["stream"]] += np.frombuffer(row["hist"], np.int64)
        return total

    def words_of(bins):
        inside = collected(_rank_words(seed, streams, bins),
                           [("stream", IntegerType()), ("word", LongType())])
        return ([row["stream"] for row in inside],
                np.array([row["word"] for row in inside], np.int64).view(np.uint64))

    return ranks.search_cutoffs(histogram_of, words_of, wanted)


def _over_keys(df, key):
    """``collected(task, schema)``: the rows a ``mapInArrow`` *task* makes
    from *df*'s key positions (one column), *schema* its ``(name, type)``
    fields: the aggregations the driver searches cutoffs with."""
    from pyspark.sql.types import StructField, StructType

    positions = df.select(_key_position(df, key).alias(KEY_COLUMN))
    ship(df)

    def collected(task, schema):
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
            return positions.mapInArrow(task, StructType([StructField(*f) for f in schema])) \
                .collect()
    return collected


def _rank_histograms(seed, streams):
    """Task of the first aggregation of :func:`_rank_cutoffs`."""
    def run(batches):
        import pyarrow as pa

        from samplegen.udfs.ranks import BITS, histograms
        from samplegen.udfs.rng import PositionRNG

        rng = PositionRNG(seed)
        total = np.zeros((len(streams), 1 << BITS), np.int64)
        for batch in batches:
            total += histograms(rng, _positions(batch.column(0)), streams)
        yield pa.RecordBatch.from_arrays(
            [pa.array(range(len(streams)), pa.int32()),
             pa.array([t.tobytes() for t in total], pa.binary())], names=["stream", "hist"])
    return run


def _rank_words(seed, streams, bins):
    """Task of the second aggregation of :func:`_rank_cutoffs`: the words in
    the bins that hold a cutoff."""
    def run(batches):
        import pyarrow as pa

        from samplegen.udfs.ranks import words_in
        from samplegen.udfs.rng import PositionRNG

        rng = PositionRNG(seed)
        for batch in batches:
            index, words = words_in(rng, _positions(batch.column(0)), streams, bins)
            yield pa.RecordBatch.from_arrays(
                [pa.array(index.astype(np.int32)), pa.array(words.view(np.int64))],
                names=["stream", "word"])
    return run


def _histograms(seed, rows, samples, size, windows, bits):
    """Task of the first aggregation: per sample and window, the histogram
    of the arrivals' time words over the task's rows (one row each)."""
    def run(batches):
        import pyarrow as pa

        from samplegen.udfs.arrivals import histograms
        from samplegen.udfs.rng import PositionRNG

        rng = PositionRNG(seed)
        total = np.zeros((samples, windows, 1 << bits), np.int64)
        for batch in batches:
            total += histograms(rng, _positions(batch.column(0)), rows, size, samples, windows,
                                bits)
        ids = [(i, w) for i in range(samples) for w in range(windows)]
        yield pa.RecordBatch.from_arrays(
            [pa.array([i for i, _ in ids], pa.int32()), pa.array([w for _, w in ids], pa.int32()),
             pa.array([total[i, w].tobytes() for i, w in ids], pa.binary())],
            names=["sample", "window", "hist"])
    return run


def _boundary_arrivals(seed, rows, size, bits, targets):
    """Task of the second aggregation: the arrivals in each sample's
    boundary bin, ``targets[i] = (window, bin)``: (sample, word, position)."""
    def run(batches):
        import pyarrow as pa

        from samplegen.udfs.arrivals import boundary_arrivals
        from samplegen.udfs.rng import PositionRNG

        rng = PositionRNG(seed)
        for batch in batches:
            sample, words, positions = boundary_arrivals(rng, _positions(batch.column(0)),
                                                         rows, size, bits, targets)
            yield pa.RecordBatch.from_arrays(
                [pa.array(sample.astype(np.int32)), pa.array(words.view(np.int64)),
                 pa.array(positions)], names=["sample", "word", "position"])
    return run


def _positions(keys):
    positions = keys.to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    if keys.null_count or (positions.size and positions.min() < 0):
        raise ParameterError("key positions must be non-NULL and >= 0")
    return positions


def _cutoffs(df, key, seed, rows, samples, size):
    """Every sample's cutoff ``[window, word, position]``
    (:mod:`udfs.arrivals`): two aggregations over the key column."""
    from pyspark.sql.types import BinaryType, IntegerType, LongType

    from samplegen.udfs.arrivals import bin_bits, search_cutoffs

    collected = _over_keys(df, key)
    bits = bin_bits(size)

    def histograms_of(windows):
        hists = np.zeros((samples, windows, 1 << bits), np.int64)
        for row in collected(_histograms(seed, rows, samples, size, windows, bits),
                             [("sample", IntegerType()), ("window", IntegerType()),
                              ("hist", BinaryType())]):
            hists[row["sample"], row["window"]] += np.frombuffer(row["hist"], np.int64)
        return hists

    def arrivals_in(targets, windows):
        inside = collected(_boundary_arrivals(seed, rows, size, bits, targets),
                           [("sample", IntegerType()), ("word", LongType()),
                            ("position", LongType())])
        return ([row["sample"] for row in inside],
                np.array([row["word"] for row in inside], np.int64).view(np.uint64),
                [row["position"] for row in inside])

    return search_cutoffs(histograms_of, arrivals_in, samples, size)


def _bootstrap_frame(df, seed, key, params):
    """The tagged frame of a bootstrap: the block jobs' multinomial tree
    when the keys are the row ids 0..N-1, else the first arrivals of
    Poisson processes keyed by the rows' positions (:mod:`udfs.arrivals`)."""
    seed = check_seed(seed)
    rows, row_ids = _key_stats(df, key)
    udf_obj = Bootstrap(rows, **params)  # the parameters, checked before any other job
    if row_ids:
        frame, udf_obj = tagged_frame(df, Bootstrap.name, seed, key, params, n_rows=rows)
        return frame, _names(udf_obj)
    if udf_obj.oob:
        keys.exact_rows(key, "the DataFrame", rows, row_ids, "out-of-bag sets")  # refused
    cutoffs = _cutoffs(df, key, seed, rows, udf_obj.samples, udf_obj.size)
    frame, udf_obj = tagged_frame(df, arrivals.UDF, seed, key,
                                  {"samples": udf_obj.samples, "size": udf_obj.size,
                                   "cutoffs": cutoffs}, n_rows=rows)
    return frame, _names(udf_obj)


def bootstrap(df, samples, seed, key, size=None, persist=False, oob=False, stratify=None):
    """``samples`` bootstrap samples of exactly *size* rows each (default:
    the DataFrame's row count), drawn with replacement: a row drawn c times
    appears c times.  When the key column holds the row ids ``0..N-1`` the
    draws are the block jobs' distributed multinomial (the same samples for
    the same seed); for any other keys, the first *size* arrivals of
    Poisson processes keyed by the rows (:mod:`udfs.arrivals`), found by
    two aggregations over the key column.  Either way one aggregate over
    the key column comes first (the row count).  With *oob* (row-id keys),
    ``[(bag, out-of-bag rows), ...]``: each bag with the rows it never drew.
    *stratify*: a column whose classes every bag holds in proportion (each
    class's share of *size*, within one row, drawn from its own rows)."""
    persist = check_bool("persist", persist)
    frame, names = _frame_and_names(df, Bootstrap.name, seed, key,
                                    {"samples": samples, "size": size, "oob": oob,
                                     "stratify": stratify})
    parts, _ = _per_sample(frame, len(names), persist)
    if oob:
        half = len(parts) // 2
        return list(zip(parts[:half], parts[half:]))
    return parts


def sample(df, udf, seed, key, persist=False, **params):
    """Any sampling-UDF (``module:function`` or a built-in name) with its
    *params*: ``{sample name: DataFrame}``.  A user UDF sees the DataFrame's
    row count as its number of rows (one count job) and decides row *key*
    as the block jobs decide row id *key*."""
    persist = check_bool("persist", persist)
    frame, names = _frame_and_names(df, udf, seed, key, params)
    parts, _ = _per_sample(frame, len(names), persist)
    return dict(zip(names, parts))


# ---------------------------------------------------------------------------
# weighted samples: exactly K rows as successive weighted draws
# ---------------------------------------------------------------------------
#: the internal columns of a weighted sample: each row's key and position
WEIGHT_KEY_COLUMN = "__samplegen_weight_key"


def _weight_keys(seed, sample, weights_name):
    """The Arrow UDF of the rows' keys ``E / w`` in *sample* (the block jobs'
    keys at the same positions, :func:`udfs.weighted.exponential_keys`, as
    int64 that order like them whatever the weights, :data:`ANY_EXPONENT`):
    only the position and the weight cross to Python; a NULL, NaN, infinite
    or negative weight fails the task, naming the row's position."""
    import pyarrow as pa

    from samplegen.jobs.engines.task_errors import reported
    from samplegen.udfs.rng import PositionRNG, Purpose, stream
    from samplegen.udfs.weighted import ANY_EXPONENT, exponential_keys, key_order

    state = {}

    def keyed(positions, weights):
        with reported():                # a bad weight: its error, by the task protocol
            return _keys_of(positions, weights)

    def _keys_of(positions, weights):
        rng = state.get("rng") or state.setdefault("rng", PositionRNG(seed))
        pos = _positions(positions)
        w = _checked_weights(weights_name, weights, pos)
        words = rng.at(stream(Purpose.WEIGHTED_KEY, sample), pos)[:, 0] if pos.size else \
            np.empty(0, np.uint64)
        return pa.array(key_order(exponential_keys(words, w, ANY_EXPONENT)), pa.int64())

    keyed.__annotations__ = {"positions": pa.Array, "weights": pa.Array, "return": pa.Array}
    return keyed


def _poisson_coins(seed, sample, rate, exponent):
    """The Arrow UDF of whether each row is in Poisson sample *sample* of
    inclusion probabilities ``min(1, rate w 2**exponent)``: the block jobs' coins
    (stream WEIGHTED_POISSON, lane 0) at the rows' positions."""
    import pyarrow as pa

    from samplegen.udfs.rng import PositionRNG, Purpose, stream
    from samplegen.udfs.weighted import poisson_included

    state = {}

    def coins(positions, weights):
        rng = state.get("rng") or state.setdefault("rng", PositionRNG(seed))
        pos = _positions(positions)
        w = weights.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        words = rng.at(stream(Purpose.WEIGHTED_POISSON, sample), pos)[:, 0] if pos.size else \
            np.empty(0, np.uint64)
        return pa.array(poisson_included(words, rate, w, exponent), pa.bool_())

    coins.__annotations__ = {"positions": pa.Array, "weights": pa.Array, "return": pa.Array}
    return coins


def _weights_by_position(df, key, weights):
    """``(positions, weights)`` of every row, collected as Arrow (16 bytes a
    row reach the driver); a NULL, NaN, infinite or negative weight is
    refused naming its row's key position."""

    table = df.select(_key_position(df, key).alias("p"),
                      _column(weights).cast("double").alias("w")).toArrow()
    positions = _positions(table.column("p").combine_chunks())
    return positions, _checked_weights(weights, table.column("w"), positions)


#: Spark's numeric types: the weight columns
NUMERIC_TYPES = frozenset({"ByteType", "ShortType", "IntegerType", "LongType", "FloatType",
                           "DoubleType", "DecimalType"})


def _positive_weights(df, key, name, weight):
    """The number of rows of positive weight (column *weight*, named *name*),
    counted by one aggregate that also counts the bad weights: a NULL, NaN,
    infinite or negative one is refused here, naming the first such row's
    key position (one more job), not in the tasks of the lazy samples."""
    from pyspark.sql import functions as F

    bad = weight.isNull() | F.isnan(weight) | (weight < 0) | (weight == float("inf"))
    counts = df.agg(F.count(F.when(~bad & (weight > 0), 1)).alias("positive"),
                    F.count(F.when(bad, 1)).alias("bad")).first()
    if counts["bad"]:
        table = df.where(bad).select(_key_position(df, key).alias("p"),
                                     weight.alias("w")).limit(1).toArrow()
        _checked_weights(name, table.column("w"), _positions(table.column("p").combine_chunks()))
    return int(counts["positive"])


def _checked_weights(name, weights, positions):
    """The Arrow weights *weights* of the rows at key *positions* as floats;
    a NULL (arriving as NaN), NaN, infinite or negative one is refused
    naming its row's key position."""
    from samplegen.udfs.errors import InputError
    from samplegen.udfs.sumtree import first_bad_weight

    w = weights.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
    bad = first_bad_weight(w)
    if bad is not None:
        i, kind = bad
        what = "NULL or NaN" if kind == "NaN" else repr(float(w[i]))
        raise InputError(f"weight column {name!r} is {what} at key position "
                         f"{int(positions[i])}: a weight must be finite and not negative")
    return w


def weighted(df, weights, seed, key, size=None, *, expected=None, replace=False, samples=1):
    """*samples* weighted samples of the rows, in proportion to the column
    *weights* (finite, not negative; a zero is never drawn), as a list of
    DataFrames: exactly *size* rows in the law and the order of successive
    weighted draws (rows in draw order); with *replace*, *size* draws with
    replacement (a weighted bootstrap: a row drawn c times appears c times;
    the key column must hold the row ids 0..N-1); or *expected* rows
    expected, each row in with probability ``min(1, c w)`` (Poisson
    sampling).  With the key column holding the row ids 0..N-1, the rows are
    the block jobs' (``samplegen weighted``).

    Without replacement each row's key ``E / w`` (E an exponential variate
    keyed by the row's position, as the block jobs draw it) comes from an
    Arrow UDF that sees only the position and the weight; the sample is the
    *size* rows of smallest key, ``orderBy(key).limit(size)``, which Spark
    runs as a top-K (each task keeps its *size* smallest, one task merges
    them): one pass over the rows, after one aggregate over the weight
    column (the rows of positive weight; a NULL, NaN, infinite or negative
    weight is refused there, naming its row, as in the other two modes).
    Poisson sampling and the bootstrap collect every row's position and
    weight first (16 bytes a row reach the driver: the rate c, the weighted
    tree's sums), then decide
    the rows in one pass."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import BooleanType, LongType

    from samplegen.udfs.weighted import RowWeights, Weighted, scaled_inclusion_rate

    seed = check_seed(seed)
    samples = check_int("samples", samples, lo=1, hi=1 << 10)
    if not hasattr(F, "arrow_udf"):
        import pyspark
        raise ParameterError(f"weighted samples of a DataFrame need Spark 4.1 or later (Arrow "
                             f"UDFs); this is Spark {pyspark.__version__}")
    _check_frame(df)
    if not isinstance(weights, str) or weights not in df.columns:
        raise ParameterError(f"weights must name a column of the DataFrame, got {weights!r} "
                             f"(columns: {', '.join(df.columns)})")
    weight_type = df.schema[weights].dataType
    if type(weight_type).__name__ not in NUMERIC_TYPES:
        raise ParameterError(f"weight column {weights!r} is {weight_type.simpleString()}; "
                             "weights must be a numeric column (cast it first)")
    if WEIGHT_KEY_COLUMN in df.columns or KEY_COLUMN in df.columns:
        raise ParameterError("the DataFrame has a column named like samplegen's own; rename it")
    params = {"weights": weights, "size": size, "expected": expected, "replace": replace,
              "samples": samples}
    Weighted(1 << 62, weighting=RowWeights.uniform(1 << 62), **params)   # the parameters
    position = _key_position(df, key)
    ship(df, "weighted")
    weight = _column(weights).cast("double")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"pyspark\.")
        if replace:
            rows, row_ids = _key_stats(df, key)
            if not row_ids:
                raise ParameterError(f"a weighted bootstrap of a DataFrame needs key column "
                                     f"{key!r} to hold the row ids 0..{rows - 1} (each once)")
            side = weights_by_row_id(*_weights_by_position(df, key, weights), weights)
            frame, udf_obj = tagged_frame(df, Weighted.name, seed, key, params, rows,
                                          (None, None, side))
            return _per_sample(frame, samples, False)[0]
        if expected is not None:
            _, w = _weights_by_position(df, key, weights)
            rate, exponent = scaled_inclusion_rate(w, expected)
            return [df.where(F.arrow_udf(_poisson_coins(seed, i, rate, exponent),
                                         BooleanType())(position, weight))
                    for i in range(samples)]
        positive = _positive_weights(df, key, weights, weight)
        if positive < size:
            raise ParameterError(f"size = {size} distinct rows, but only {positive} rows "
                                 f"have a positive weight in {weights!r}")
        out = []
        for i in range(samples):
            key_of = F.arrow_udf(_weight_keys(seed, i, weights), LongType())(position, weight)
            out.append(df.withColumn(WEIGHT_KEY_COLUMN, key_of).withColumn(KEY_COLUMN, position)
                       .orderBy(WEIGHT_KEY_COLUMN, KEY_COLUMN).limit(size)
                       .drop(WEIGHT_KEY_COLUMN, KEY_COLUMN))
        return out
