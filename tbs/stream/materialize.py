"""Reading a STATE: the current sample S_k (``samplegen tbs sample``) and its
numbers (``samplegen tbs status``)."""
import io
import os

import numpy as np

from samplegen.jobs import fs as fsmod
from samplegen.udfs.errors import OutputError, count_words

from ..errors import TBSError
from .decide import sample_weight, total_weight
from .state import crash_point, load_latest
from .storage import Store
from .task import KEY_COLUMNS, Partition, empty_frame

FORMATS = (".parquet", ".npy", ".csv")


def open_state(state_url):
    store = Store(state_url)
    kind = store.kind()
    if kind is None:
        raise TBSError(f"STATE {state_url} does not exist")
    if kind != "directory":
        raise TBSError(f"STATE {state_url} is a file, not a STATE directory")
    commit = load_latest(store)
    if commit is None:
        raise TBSError(f"{state_url} is not a samplegen tbs STATE (no commits/)")
    return store, commit


def current_sample(state_url, keys=True):
    """S_k as a pandas DataFrame: every item column, plus the keys
    ``_sg_batch`` (arrival batch) and ``_sg_row`` (row in that batch) unless
    ``keys`` is False; partitions in order, rows in storage order."""
    import pandas as pd
    store, commit = open_state(state_url)
    frames = []
    for p, entry in enumerate(commit["partitions"]):
        if entry["struct"] is None:
            continue
        part = Partition.load(store, p, entry["struct"], commit["writer"],
                              expected=entry["struct_sum"])
        rows = np.flatnonzero(part.R)
        if rows.size:
            frames.append(part.read(rows, f"partition {p}"))
    if frames:
        df = pd.concat(frames, ignore_index=True)
    elif commit["partitions"][0]["struct"] is not None:       # columns, no rows
        first = commit["partitions"][0]
        part = Partition.load(store, 0, first["struct"], commit["writer"],
                              expected=first["struct_sum"])
        df = empty_frame(store, part.sources, "partition 0")
    else:
        df = pd.DataFrame({KEY_COLUMNS[0]: np.zeros(0, np.int64),
                           KEY_COLUMNS[1]: np.zeros(0, np.int64)})
    if len(df) != commit["driver"]["size"]:
        raise TBSError(f"corrupt STATE: {len(df)} items read, "
                       f"the state says {commit['driver']['size']}")
    if not keys:
        df = df.drop(columns=list(KEY_COLUMNS))
    return df


def _npy_bytes(df):
    """A structured array: numbers keep their dtype, text becomes fixed-width unicode."""
    fields = []
    columns = []
    for name in df.columns:
        col = df[name]
        if col.dtype.kind in "biufcmM":
            arr = col.to_numpy()
        elif all(isinstance(v, bytes) for v in col):
            arr = np.array(col.tolist(), dtype=bytes) if len(col) else np.zeros(0, "S1")
        else:
            text = ["" if v is None else str(v) for v in col]
            arr = np.array(text, dtype=str) if text else np.zeros(0, "U1")
        fields.append((str(name), arr.dtype))
        columns.append(arr)
    out = np.empty(len(df), dtype=fields)
    for (name, _), arr in zip(fields, columns):
        out[name] = arr
    buf = io.BytesIO()
    np.save(buf, out, allow_pickle=False)
    return buf.getvalue()


def write_sample(state_url, path, keys=True, overwrite=False):
    """Write S_k to ``path`` (.parquet, .npy or .csv); returns its size.

    ``path`` must not exist unless ``overwrite`` (OutputError, before the
    STATE is read).  The file is written whole or not at all: under a
    temporary name beside it, locked while it is written, then renamed (without
    ``overwrite``, linked: a file that appeared meanwhile is not replaced).
    Temporaries that killed writers left beside it are removed first (their
    lock went with their process:
    :func:`samplegen.jobs.fs.remove_stale_temporaries`).  Missing parent
    directories are created (and removed again if the write fails)."""
    ext = os.path.splitext(path)[1].lower()
    if ext not in FORMATS:
        raise TBSError(f"--to must end in .parquet, .npy or .csv, got {path!r}")
    fsmod.missing_dirs(path)  # a parent that is a file: refused before reading
    local = fsmod.is_local(path)
    target = fsmod.local_path(path) if local else path
    if local and os.path.isdir(target):
        raise OutputError(f"--to {path} is a directory; give a file name")
    if fsmod.get_fs(path).exists(path) and not overwrite:
        raise OutputError(f"--to {path} exists (use --overwrite to replace it)")
    df = current_sample(state_url, keys)
    if ext == ".parquet":
        from .storage import parquet_bytes
        data = parquet_bytes(df)
    elif ext == ".npy":
        data = _npy_bytes(df)
    else:
        data = df.to_csv(index=False).encode()
    if not local:
        fsmod.write_atomic(path, data)
        return len(df)
    created = fsmod.make_parents(target)
    try:
        _write_local(os.path.abspath(target), data, overwrite)
    except BaseException:
        fsmod.remove_dirs(created)
        raise
    return len(df)


def _write_local(path, data, overwrite):
    """Write *data* to local *path* by a locked temporary file beside it
    (:func:`samplegen.jobs.fs.temporary_files`, which first removes what
    dead writers left there)."""
    with fsmod.temporary_files([path]) as temporaries:
        tmp = temporaries[path]
        with open(tmp, "wb") as f:
            f.write(data)
        crash_point("sample-written")
        if overwrite:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)          # never over a file that appeared meanwhile
        except FileExistsError:
            raise OutputError(f"--to {path} exists (use --overwrite to replace it)") from None


def status(state_url):
    """Batches processed, W_k, C_k, rho, |S_k| and the footprint of a STATE."""
    store, commit = open_state(state_url)
    params = commit["params"]
    d = commit["driver"]
    files = store.walk()
    info = {
        "state": store.uri(),
        "algorithm": params["algorithm"], "decay": params["decay"],
        "params": params,
        "batches": len(commit["ledger"]),
        "first_batch": commit["first_batch"], "last_batch": commit["last_batch"],
        "time": commit["time"],
        "total_weight": total_weight(params, d, commit["ledger"]),
        "sample_weight": sample_weight(params, d),
        "rho": d.get("rho") if params["algorithm"] == "rtbs" else None,
        "sample_size": d["size"],
        "items_stored": sum(p["stored"] for p in commit["partitions"]),
        "latent_samples": (len(d["groups"]) if "groups" in d else len(d["recent"]) + 1),
        "partitions": params["partitions"],
        "per_partition": [{"full": p["full"], "sampled": p["realized"], "stored": p["stored"]}
                          for p in commit["partitions"]],
        "snapshot": commit["snapshot"],
        "deltas_kept": [d_[0] for d_ in commit["deltas"]],
        "files": len(files),
        "bytes": sum(size for _, size in files),
        "commit": commit["seq"],
    }
    if params["algorithm"] == "ttbs":
        info["q"] = None
        from .decide import sampler_of
        info["q"] = sampler_of(params).q
    return info


def format_status(info):
    def num(x):
        return "-" if x is None else (f"{x:.6g}" if isinstance(x, float) else str(x))
    p = info["params"]
    decay = (f"exp(lambda={p['lambda']:g})" if p["decay"] == "exp"
             else f"poly(s={p['power']:g}, d={p['shift']:g})")
    lines = [
        f"STATE      {info['state']}",
        f"algorithm  {info['algorithm']}, decay {decay}, N = {p['size']}, seed {p['seed']}, "
        f"{info['partitions']} partitions",
        f"batches    {info['batches']}"
        + (f" (batch-{info['first_batch']} .. batch-{info['last_batch']}, "
           f"last time {num(info['time'])})" if info["batches"] else ""),
        f"W_k        {num(info['total_weight'])}",
        f"C_k        {num(info['sample_weight'])}",
        f"rho        {num(info['rho'])}" if info["algorithm"] == "rtbs"
        else f"q          {num(info['q'])}",
        f"|S_k|      {info['sample_size']}",
        f"footprint  {info['items_stored']} items stored in "
        f"{count_words(info['latent_samples'], 'latent sample', 'latent samples')}; "
        f"{info['files']} files, {info['bytes'] / 1e6:.1f} MB",
        f"snapshot   {num(info['snapshot'])}; deltas kept for batches "
        + (f"{info['deltas_kept'][0]}..{info['deltas_kept'][-1]}" if info["deltas_kept"] else "-"),
    ]
    return "\n".join(lines)
