"""Orchestration shared by the command line and the Python API.

``generate`` runs a sampling-UDF over a matrix on an engine and commits the
run directory whole or not at all::

    DEST/_manifest.json     method, params, seed, engine, input fingerprint,
                            every sample matrix with its shape and blocks
    DEST/<sample>/          one matrix directory per sample matrix
    DEST/_SUCCESS

Engines are looked up by runner name (:func:`jobs.engines.engine`); each is
a function ``run(plan, input_uris, runner, options) -> [summary, ...]`` that
executes the phases of :mod:`jobs.phases` and returns the reducers'
summaries (one per written column of blocks).
"""
import contextlib
import os
import re
import time

import numpy as np

from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import (
    InputError,
    ParameterError,
    SamplegenError,
    check_fraction,
    check_int,
    count_words,
)
from samplegen.udfs.rng import PositionRNG, Purpose, check_seed, stream
from samplegen.udfs.strata import SIDES

from . import engines
from . import fs as fsmod
from .blocks import KINDS, Block, row_chars
from .formats import open_source
from .limits import check_disk, check_memory, format_bytes, out_of_space
from .phases import partners
from .plan import DEFAULT_BIN_BUDGET, make_plan
from .progress import Progress
from .store import (
    MANIFEST,
    MAX_BLOCK_SIZE,
    META,
    RUN_FORMAT,
    TABLE_RUN,
    Matrix,
    MatrixWriter,
    StagedOutput,
    block_list,
    fingerprint,
    make_meta,
    manifest_json,
    n_blocks,
    read_manifest,
    to_json,
    write_group,
    write_meta,
)
from .strata import RECORDED as STRATA_RECORDED
from .strata import RUN as STRATA_RUN
from .strata import remove_side, side_for, strata_of_values, write_side, write_strata


def _version():
    try:
        from importlib.metadata import version
        return version("samplegen")
    except Exception:
        return "unknown"


# ---------------------------------------------------------------------------
# sampling runs
# ---------------------------------------------------------------------------
def open_input(src):
    """Open and sanity-check a source matrix before any job starts."""
    matrix = Matrix.open(src)
    parts = matrix.part_uris()
    if not parts:
        raise InputError(f"matrix {src} has no part files (empty or truncated)")
    if fsmod.is_local(src):
        expected_blocks = len(block_list(matrix.rows, matrix.cols, matrix.block_size))
        if expected_blocks and all(matrix.fs.size(p) == 0 for p in parts):
            raise InputError(f"matrix {src} has only empty part files (truncated)")
    matrix.index()  # every block once, in its place, as the fingerprint records
    return matrix


def generate(src, dest, udf_spec, params, seed, runner="embedded", overwrite=False,
             options=None, bin_budget=DEFAULT_BIN_BUDGET, log=None, materialize=False,
             sides=None):
    """Generate the samples of a sampling-UDF; returns the run manifest.
    With *materialize*, composed training sets are written as standalone
    matrices (:func:`materialize_composed`) before the run is committed.
    *sides*: the rows' classes and groups when the caller has them already
    (:func:`row_sides`), else they are read here."""
    log = log or (lambda message, progress=False: None)
    options = dict(options or {})
    check_seed(seed)
    engine = engines.engine(runner)
    if fsmod.is_local(src):  # tasks run in other working directories
        src = os.path.abspath(fsmod.local_path(src))
    matrix = open_input(src)
    if matrix.meta.get("composed_of"):
        raise InputError(f"{src} is a composed view; export it and import the result to "
                         "sample from it")
    started = time.time()
    # the machine's limits first: the samples' sizes do not depend on the
    # classes or groups, which a pre-pass may have to read
    shape = {k: v for k, v in params.items() if ":" in udf_spec or k not in SIDES.values()}
    shaped = load_udf(udf_spec, matrix.rows, shape)
    to_json(shaped.params())  # a NaN parameter is refused before any work, not in the manifest
    estimate = check_run_limits(shaped, matrix.meta, dest, runner)
    sides = sides or row_sides(matrix, udf_spec, params, log)
    udf = load_udf(udf_spec, matrix.rows, params, *(sides[field][0] for field in SIDES))
    prepared = udf.prepare(PositionRNG(seed))
    if prepared:    # what only the whole column gives (a weighted sample's cutoff keys)
        params = dict(params, **prepared)
        udf = load_udf(udf_spec, matrix.rows, params, *(sides[field][0] for field in SIDES))
    staged = StagedOutput(dest, overwrite, inputs=[src])
    with _space_named(staged, estimate), staged as staging:
        plan = make_plan(udf, seed, matrix.meta, staging, bin_budget)
        written = []
        for field, param in SIDES.items():
            side, base = sides[field]
            if side is not None and base is None:
                base = write_side(fsmod.join(staging, STRATA_RUN[field]), side, params[param])
                written.append(base)
            setattr(plan, field, base)
        log(f"{udf.name}: {matrix.rows} x {matrix.cols} {matrix.kind} matrix, "
            f"{count_words(len(matrix.blocks()), 'block', 'blocks')} -> {dest} (runner {runner})",
            progress=True)
        inputs = matrix.part_uris()
        make_progress = getattr(log, "progress", None)
        with (make_progress(len(matrix.blocks()), "input blocks", udf.name) if make_progress
              else Progress(0, mode="off")) as progress:
            summaries = engine(plan, inputs, runner, dict(options, scratch=staged.scratch,
                                                          on_progress=progress))
            progress.update(progress.total)
        for base in written:
            remove_side(base)
        engine_info = {"runner": runner, **{k: v for k, v in options.items()
                                            if isinstance(v, (str, int, float, list))}}
        manifest = write_run(plan, matrix.meta, src, summaries, staging, engine_info, started)
        if materialize:
            manifest = materialize_composed(staging, manifest, log)
    samples = manifest["samples"]
    total = sum(s["bytes"] for s in samples)
    log(f"wrote {count_words(len(samples), 'sample matrix', 'sample matrices')} "
        f"({format_bytes(total)}) in "
        f"{manifest['elapsed_seconds']:.1f} s")
    return manifest


@contextlib.contextmanager
def _space_named(staged, estimate=None):
    """A full disk (or quota) while *staged* (a :class:`jobs.store.StagedOutput`)
    is written becomes one OutputError naming the output and the *estimate*
    of the bytes it needs (:func:`jobs.limits.out_of_space`); the staged
    output is gone by then, so nothing partial is left."""
    try:
        yield
    except OSError as exc:
        error = out_of_space(exc, _output_name(exc.filename, staged), estimate)
        if error is None:
            raise
        raise error from None


def _output_name(path, staged):
    """The name under the destination of *path*, a file of *staged*'s
    staging directory (its writer's temporary name: the file's own); the
    destination itself for a path elsewhere or none."""
    path = str(path) if path is not None else ""
    if not path.startswith(staged.staging + "/"):
        return staged.dest
    pieces = path[len(staged.staging) + 1:].split("/")
    pieces[-1] = re.sub(r"^\.(.+)\.tmp-[0-9a-f]{12}$", r"\1", pieces[-1])
    return "/".join([staged.dest] + pieces)


def row_sides(matrix, udf_spec, params, log=None):
    """``{plan field: (side, base)}``: the classes (``stratify``), the
    groups (``groups``) and the weights (``weights``) a built-in UDF's
    *params* ask for, of *matrix*'s rows (:func:`jobs.strata.side_for`);
    ``(None, None)`` for those not asked for."""
    log = log or (lambda message, progress=False: None)
    return {field: _side(matrix, udf_spec, params, field, param, log)
            for field, param in SIDES.items()}


#: what a pre-pass reads, by the plan's field (for the log)
_SIDE_WORDS = {"strata": "classes", "grouping": "groups", "weighting": "weights"}


def _side(matrix, udf_spec, params, field, param, log):
    """``(side, base)`` of a built-in UDF's *param* (``stratify``: the
    classes of a label column; ``groups``: a group column; ``weights``: a
    weight column), from :func:`jobs.strata.side_for`, or ``(None, None)``
    without it."""
    column = params.get(param)
    if column is None or ":" in udf_spec:
        return None, None
    if not isinstance(column, str):
        raise ParameterError(f"{param} must name a column, got {column!r}")
    blocks = -(-matrix.rows // matrix.block_size)
    log(f"{_SIDE_WORDS[field]} of column {column!r}", progress=True)
    make_progress = getattr(log, "progress", None)
    with (make_progress(blocks, "column blocks", param) if make_progress
          else Progress(0, mode="off")) as progress:
        return side_for(matrix, field, column, progress)


def write_run(plan, input_meta, src, summaries, root, engine_info, started=None):
    """Write a run's metadata into *root* from the reducers' summaries: every
    sample's ``_matrix.json`` (:func:`commit_samples`), then the manifest;
    returns the manifest.  The driver calls it on its staging directory; the
    last stage of a HiveQL script calls it on the output directory (so a run
    from beeline alone leaves the same metadata).  *src* is the input
    matrix directory, *input_meta* its ``_matrix.json``; *started*, the
    run's start time, gives ``elapsed_seconds`` (``None``: not known)."""
    samples = commit_samples(plan, input_meta, summaries, root)
    udf = plan.sampler()
    manifest = {
        "format": RUN_FORMAT,
        "samplegen": _version(),
        "method": udf.name,
        "params": udf.params(),
        "seed": plan.seed,
        "rng": PositionRNG(plan.seed).describe(),
        "engine": engine_info,
        "input": {"path": os.path.abspath(src) if fsmod.is_local(src) else src,
                  "fingerprint": input_meta.get("fingerprint"), "rows": input_meta["rows"],
                  "cols": input_meta["cols"], "block_size": input_meta["block_size"],
                  "kind": input_meta["kind"]},
        "samples": samples,
        "elapsed_seconds": None if started is None else round(time.time() - started, 3),
    }
    fsmod.get_fs(root).write_bytes(fsmod.join(root, MANIFEST), manifest_json(manifest))
    return manifest


def materialize_composed(root, manifest, log=None):
    """Rewrite every composed training set of the run in *root* as a
    standalone matrix: the view's blocks, in its order, into a directory of
    their own that then replaces the view (the same blocks, hence the same
    fingerprint); the manifest follows.  The driver calls it on its staging
    directory, so the run is committed with them or not at all."""
    log = log or (lambda message, progress=False: None)
    fs = fsmod.get_fs(root)
    for entry in manifest["samples"]:
        if not entry.get("composed_of"):
            continue
        name = entry["name"]
        view = open_sample(root, name)
        B, rows, cols = view.block_size, view.rows, view.cols
        tmp = f".{name}.full"
        summaries = [write_group(root, tmp, v, ((h, view.read_block(h, v))
                                                for h in range(n_blocks(rows, B))))
                     for v in range(n_blocks(cols, B))]
        entries = sorted((h, s["v"], r, c, crc) for s in summaries for h, r, c, crc, _ in
                         s["blocks"])
        nnz = sum(b[4] for s in summaries for b in s["blocks"])
        meta = make_meta(rows, cols, B, view.kind, nnz, fingerprint(entries),
                         view.meta.get("columns"), row_ids="stored")
        write_meta(fs, fsmod.join(root, tmp), meta)
        fs.rmtree(fsmod.join(root, name))
        fs.rename(fsmod.join(root, tmp), fsmod.join(root, name))
        entry.clear()
        entry.update(_sample_entry(name, meta, sum(s["bytes"] for s in summaries)))
        log(f"materialized {name}: {rows} rows", progress=True)
    fs.write_bytes(fsmod.join(root, MANIFEST), manifest_json(manifest))
    return manifest


def composed_bytes(path, entry, indexes=None):
    """Bytes of a composed training set of the run in *path*: the blocks it
    takes from the other folds (their block lines, from the folds' indexes,
    cached in *indexes*) and its extra matrix."""
    indexes = {} if indexes is None else indexes
    total = entry.get("bytes", 0)
    for part in entry["composed_of"]:
        if part["path"] == ".":
            continue
        fold = part["path"].rsplit("/", 1)[-1]
        if fold not in indexes:
            indexes[fold] = Matrix.open(fsmod.join(path, fold)).index()
        total += sum(length for (h, _), (_, _, length) in indexes[fold].items()
                     if h < part["blocks"])
    return total


def _row_bytes(meta):
    """Bytes of one stored row of a matrix (its values' text and its row id)."""
    cols, B = meta["cols"], meta["block_size"]
    if meta["kind"] == "dense":
        values = sum(row_chars(min(B, cols - v * B)) for v in range(n_blocks(cols, B)))
    else:
        values = 16 * meta.get("nnz", meta["rows"] * cols) / max(meta["rows"], 1) \
            + 11 * n_blocks(cols, B)
    return values + 11 * n_blocks(cols, B)


#: mrjob's own runners on this machine: copies of the output their shuffle
#: keeps beside it in the run's scratch space (local: the map output, GNU
#: sort's temporary files and the sorted input of the reducers; inline: the
#: map output and its sorted copy, sorted in memory)
_SHUFFLE_COPIES = {"local": 3, "inline": 2}


def check_run_limits(udf, meta, dest, runner=None):
    """Refuse a run whose samples cannot fit the destination's free space
    (with mrjob's local and inline runners, their shuffle's files too), whose
    map tasks would hold more than the machine's memory for one input block
    (e.g. a bootstrap --size many times the input's rows), or whose shuffle
    the inline runner would sort in more memory than the machine has.  (When
    GNU sort fails for want of space, mrjob's local runner sorts in memory,
    which can exhaust the machine instead of failing the run.)  Returns the
    estimate of the bytes the run writes."""
    names = udf.sample_names()
    if not names or not meta["rows"]:
        return None
    expected = sum(udf.expected_rows(i) for i in range(len(names)))
    row_bytes = _row_bytes(meta)
    per_block = expected * min(meta["block_size"], meta["rows"]) / meta["rows"]
    check_memory(per_block * (48 + row_bytes), "sampling one input block",
                 "ask for fewer or smaller samples, or store the input with a smaller "
                 "block size")
    what = f"the {count_words(len(names), 'sample matrix', 'sample matrices')}"
    copies = _SHUFFLE_COPIES.get(runner, 0)
    check_disk(dest, expected * row_bytes * (1 + copies),
               what + (f" with the {runner} runner's shuffle files" if copies else ""))
    if runner == "inline":
        check_memory(expected * row_bytes, "the inline runner's shuffle (mrjob sorts it in "
                     "memory)", "use the embedded runner (the default) or local")
    return expected * row_bytes * (1 + copies)


def commit_samples(plan, input_meta, summaries, staging):
    """Write every sample's ``_matrix.json`` from the reducers' summaries;
    return the manifest's sample entries."""
    fs = fsmod.get_fs(staging)
    by_sample = {}
    for summary in summaries:
        by_sample.setdefault(summary["sample"], []).append(summary)
    names = list(plan.names) if plan.names is not None else sorted(
        by_sample, key=lambda n: int(n.rsplit("-", 1)[-1]) if n.rsplit("-", 1)[-1].isdigit() else n)
    B, cols = plan.block_size, plan.cols
    columns = input_meta.get("columns")
    entries_of, rows_of, nbytes_of = {}, {}, {}
    samples = []
    for name in names + [n for n in plan.composed if n not in names]:
        entries, nnz, nbytes = [], 0, 0
        for summary in by_sample.get(name, []):
            nbytes += summary["bytes"]
            for h, r, c, crc, block_nnz in summary["blocks"]:
                entries.append((h, summary["v"], r, c, crc))
                nnz += block_nnz
        entries_of[name] = sorted(entries)
        rows_of[name] = sum(e[2] for e in entries if e[1] == 0)
        nbytes_of[name] = nbytes
        if name in plan.composed:
            continue
        meta = make_meta(rows_of[name], cols, B, plan.kind, nnz, fingerprint(entries),
                         columns, row_ids="stored")
        fs.makedirs(fsmod.join(staging, name))
        write_meta(fs, fsmod.join(staging, name), meta)
        samples.append(_sample_entry(name, meta, nbytes))
    for round_, name in enumerate(plan.composed):
        parts = composed_of(names, rows_of, B, round_, rows_of[name], plan.fold_group)
        entries, h0 = [], 0
        for part in parts[:-1]:
            full = part["blocks"]
            entries += [(h0 + h, v, r, c, crc) for h, v, r, c, crc
                        in entries_of[part["path"][3:]] if h < full]
            h0 += full
        entries += [(h0 + h, v, r, c, crc) for h, v, r, c, crc in entries_of[name]]
        rows = h0 * B + rows_of[name]
        meta = make_meta(rows, cols, B, plan.kind, 0, fingerprint(entries), columns,
                         row_ids="stored", composed_of=parts)
        meta.pop("nnz")
        fs.makedirs(fsmod.join(staging, name))
        write_meta(fs, fsmod.join(staging, name), meta)
        samples.append(_sample_entry(name, meta, nbytes_of[name]))
    return samples


def composed_of(names, rows_of, block_size, round_, extra_rows=None, group=0):
    """The ``composed_of`` list of training set *round_* in fold mode: the
    full blocks of the other folds (*names*: the folds; *rows_of*: rows per
    fold), then the extra matrix (``"."``) of *extra_rows* rows -- by default
    the other folds' partial bottom blocks, which is what it holds."""
    parts = []
    for fold_name in (names[fold] for fold in partners(len(names), round_, group)):
        full = rows_of[fold_name] // block_size
        parts.append({"path": "../" + fold_name, "blocks": full, "rows": full * block_size})
    if extra_rows is None:
        extra_rows = sum(rows_of[p["path"][3:]] - p["rows"] for p in parts)
    parts.append({"path": ".", "blocks": n_blocks(extra_rows, block_size), "rows": extra_rows})
    return parts


def _sample_entry(name, meta, nbytes):
    entry = {"name": name, "rows": meta["rows"], "cols": meta["cols"],
             "block_size": meta["block_size"], "kind": meta["kind"],
             "fingerprint": meta["fingerprint"], "bytes": nbytes,
             "blocks": block_list(meta["rows"], meta["cols"], meta["block_size"])}
    if meta.get("composed_of"):
        entry["composed_of"] = meta["composed_of"]
    return entry


# ---------------------------------------------------------------------------
# matrices in and out
# ---------------------------------------------------------------------------
def check_block_size(block_size):
    return check_int("block size", block_size, lo=1, hi=MAX_BLOCK_SIZE)


#: the values a default block holds, at most (8 bytes each: 1 MiB)
DEFAULT_BLOCK_VALUES = 1 << 17
#: the default block size is one of these (rows per block, and columns)
_ROUND_SIZES = [m * 10 ** e for e in range(2, 6) for m in (1, 2, 5)]


def default_block_size(cols):
    """The block size ``import`` chooses for *cols* columns: the largest of
    100, 200, 500, 1000, ... 50,000 whose blocks (that many rows, and as many
    of the columns) hold at most :data:`DEFAULT_BLOCK_VALUES` values: blocks
    of about a megabyte, large enough that a block's fixed costs (its line
    header, one task's step) are small beside its rows, small enough that
    samples of a few thousand rows still spread over several blocks."""
    fits = [b for b in _ROUND_SIZES if b * min(max(cols, 1), b) <= DEFAULT_BLOCK_VALUES]
    return fits[-1] if fits else _ROUND_SIZES[0]


def import_file(src, dest, block_size, kind="dense", columns=None, overwrite=False, log=None,
                exclude=None, label=None):
    """Import rows as a block matrix: a .npy, .csv or Parquet file, or a
    directory of Parquet files (a Spark or Hive dataset, partitioned or not),
    read where it lives -- a local path, ``hdfs://`` or any URL of the
    filesystem layer (see :func:`jobs.formats.open_source`); *block_size*
    None: :func:`default_block_size` of its columns.

    *columns* (names, in order) or *exclude* (names to leave out) choose the
    columns of a CSV file with a header or of Parquet; without either, every
    numeric column is imported and the others are left out with one log line
    naming them.  *label*: a numeric column, imported as a regular one and
    recorded by name in ``_matrix.json`` (``"label"``)."""
    log = log or (lambda message, progress=False: None)
    if block_size is not None:
        block_size = check_block_size(block_size)
    if kind not in KINDS:
        raise ParameterError(f"kind must be dense or sparse, got {kind!r}")
    rows = open_source(src, columns, exclude, label)
    if block_size is None:
        block_size = default_block_size(rows.n_cols)
    if rows.left_out:
        log("left out non-numeric columns: "
            + ", ".join(f"{name} ({kind})" for name, kind in rows.left_out))
    check_memory(2 * 8 * block_size * rows.n_cols, f"a row of blocks of {rows.n_cols} columns",
                 "use a smaller --block-size")
    staged = StagedOutput(dest, overwrite, inputs=[src])
    with _space_named(staged), staged as staging:
        writer = MatrixWriter(staging, rows.n_cols, block_size, kind, columns=rows.names,
                              label=label)
        labels = []
        at = rows.names.index(label) if label is not None and rows.names else None
        try:
            for chunk in rows.chunks:
                writer.add_rows(chunk)
                if at is not None:
                    labels.append(np.array(chunk[:, at], dtype=float))
        except BaseException:
            writer.abort()
            raise
        meta = writer.close()
        if labels:
            _record_label(staging, label, np.concatenate(labels))
    log(f"imported {meta['rows']} x {meta['cols']} ({kind}, block size {block_size}) "
        f"into {dest}")
    return meta


def _record_label(root, label, values):
    """Record the classes of an imported label column in matrix *root*
    (:mod:`jobs.strata`), when they are classes (a continuous label, or
    one with a missing value, is only a column: a run stratified by it is
    refused, naming why)."""
    try:
        strata = strata_of_values(values, label)
    except SamplegenError:
        return
    write_strata(fsmod.join(root, STRATA_RECORDED), strata, label)


def make_matrix(dest, rows, cols, block_size, density=None, seed=0, overwrite=False, log=None):
    """Synthetic matrix: standard normal values; with *density*, a sparse
    matrix whose cells are non-zero with that probability.

    Row block h draws from stream (MATRIX) at position h, with the frozen
    distributions of :class:`samplegen.udfs.rng.Draws` (ratio-of-uniforms
    normals, numpy's legacy binomial for a sparse block's count of non-zero
    cells, a uniform subset for their places): the same seed gives the same
    bytes on every machine and numpy version."""
    log = log or (lambda message, progress=False: None)
    rows = check_int("rows", rows, lo=1)
    cols = check_int("cols", cols, lo=1)
    block_size = check_block_size(block_size)
    if density is not None:
        density = check_fraction("density", density)
    rng = PositionRNG(seed)
    kind = "dense" if density is None else "sparse"
    cells = rows * cols if density is None else rows * cols * density
    estimate = cells * (32 / 3 if density is None else 16)
    check_disk(dest, estimate, f"a {rows} x {cols} matrix")
    check_memory(8 * block_size * min(block_size, cols) * (1 if density is None else 3),
                 "one block", "use a smaller --block-size")
    staged = StagedOutput(dest, overwrite)
    with _space_named(staged, estimate), staged as staging:
        writer = MatrixWriter(staging, cols, block_size, kind)
        for h in range(n_blocks(rows, block_size)):
            draws = rng.draws(stream(Purpose.MATRIX), h)
            r = min(block_size, rows - h * block_size)
            for v in range(n_blocks(cols, block_size)):
                c = min(block_size, cols - v * block_size)
                if kind == "dense":
                    block = Block.dense(draws.standard_normal((r, c)))
                else:
                    nnz = int(draws.binomial(r * c, density))
                    cells = draws.subset(r * c, nnz)  # increasing
                    indptr = np.zeros(r + 1, np.int64)
                    np.cumsum(np.bincount(cells // c, minlength=r), out=indptr[1:])
                    block = Block.sparse(r, c, indptr, cells % c, draws.standard_normal(nnz))
                writer.add_block(h, v, block)
        meta = writer.close(rows=rows)
    log(f"made a {rows} x {cols} {kind} matrix (block size {block_size}) in {dest}")
    return meta


def info(path):
    """Describe a run directory or a matrix directory (JSON-able)."""
    fs = fsmod.get_fs(path)
    manifest_uri = fsmod.join(path, MANIFEST)
    if fs.exists(manifest_uri):
        manifest = read_manifest(manifest_uri)
        if not isinstance(manifest.get("samples"), list) or not all(
                isinstance(s, dict) and isinstance(s.get("name"), str)
                for s in manifest["samples"]):
            raise InputError(f"corrupt run manifest {manifest_uri}: no list of samples")
        if manifest.get("kind") == TABLE_RUN:
            return dict(manifest, kind="run", run_kind=TABLE_RUN, path=path)
        indexes = {}
        for entry in manifest["samples"]:
            if entry.get("composed_of"):
                entry["total_bytes"] = composed_bytes(path, entry, indexes)
        return dict(manifest, kind="run", path=path)
    matrix = Matrix.open(path)
    meta = matrix.meta
    entry = {"kind": "matrix", "path": path, "rows": meta["rows"], "cols": meta["cols"],
             "block_size": meta["block_size"], "matrix_kind": meta["kind"],
             "fingerprint": meta.get("fingerprint"), "columns": meta.get("columns"),
             "label": meta.get("label"), "blocks": matrix.blocks()}
    if meta.get("composed_of"):
        entry["composed_of"] = meta["composed_of"]
    entry["samples"] = [dict(name=os.path.basename(path.rstrip("/")), rows=meta["rows"],
                             cols=meta["cols"], block_size=meta["block_size"],
                             blocks=matrix.blocks())]
    return entry


def open_sample(path, name=None):
    """The matrix for *name* in a run directory, or the matrix at *path*."""
    fs = fsmod.get_fs(path)
    if name is None:
        if fs.exists(fsmod.join(path, MANIFEST)) and not fs.exists(fsmod.join(path, META)):
            names = [s["name"] for s in info(path)["samples"]]
            raise ParameterError(f"{path} is a run directory: name a sample "
                                 f"({', '.join(names[:6])}{', ...' if len(names) > 6 else ''})")
        return Matrix.open(path)
    run = info(path)
    if run["kind"] != "run":
        raise ParameterError(f"{path} is a plain matrix; export it without a sample name")
    names = [s["name"] for s in run["samples"]]
    if name not in names:
        raise ParameterError(f"unknown sample {name!r} in {path}: choose one of "
                             f"{', '.join(names[:8])}{', ...' if len(names) > 8 else ''}")
    if run.get("run_kind") == TABLE_RUN:
        entry = run["samples"][names.index(name)]
        where = fsmod.join(path, entry["files"][0]["path"].split("/")[0])
        raise ParameterError(f"{path} holds tables, not matrices: sample {name} is {where}, "
                             "for pandas, Arrow or Spark to read as it is")
    return Matrix.open(fsmod.join(path, name))
