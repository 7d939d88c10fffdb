"""Helpers for the micro-batch job tests: synthetic batches, reading deltas."""
import glob
import os

import numpy as np

KEYS = ["_sg_batch", "_sg_row"]


def batch_frame(k, size, seed=0):
    """The rows of batch k: id (unique over batches), x, tag (text), w (float32)."""
    import pandas as pd
    rng = np.random.default_rng([seed, k])
    ids = np.int64(k) * 1_000_000 + np.arange(size, dtype=np.int64)
    return pd.DataFrame({"id": ids, "x": rng.standard_normal(size),
                         "tag": [f"b{k}r{i % 5}" for i in range(size)],
                         "w": rng.random(size).astype(np.float32)})


def write_batch(folder, k, size, seed=0, time=None, as_dir=False, files=1, row_group=None,
                frame=None):
    """Write batch k as a file ``batch-<k>.parquet`` or a directory ``batch-<k>/``
    of ``files`` part files plus ``_SUCCESS``; ``time`` goes into the key-value
    metadata ``samplegen.time``."""
    import fastparquet
    df = batch_frame(k, size, seed) if frame is None else frame
    meta = None if time is None else {"samplegen.time": repr(float(time))}
    opts = dict(write_index=False, custom_metadata=meta)
    if row_group:
        opts["row_group_offsets"] = row_group
    os.makedirs(folder, exist_ok=True)
    if not as_dir:
        fastparquet.write(os.path.join(folder, f"batch-{k}.parquet"), df, **opts)
        return df
    d = os.path.join(folder, f"batch-{k}")
    os.makedirs(d, exist_ok=True)
    bounds = np.linspace(0, len(df), files + 1).astype(int)
    for i in range(files):
        fastparquet.write(os.path.join(d, f"part-{i:05d}.parquet"),
                          df.iloc[bounds[i]:bounds[i + 1]], **opts)
    open(os.path.join(d, "_SUCCESS"), "w").close()
    return df


def write_batches(folder, sizes, start=1, seed=0, times=None, dirs=()):
    frames = {}
    for i, size in enumerate(sizes):
        k = start + i
        frames[k] = write_batch(folder, k, size, seed=seed,
                                time=None if times is None else times[i],
                                as_dir=k in dirs, files=2 if k in dirs else 1,
                                row_group=max(1, size // 3) if size else None)
    return frames


def read_dir(path):
    import fastparquet
    files = sorted(glob.glob(os.path.join(path, "*.parquet")))
    return fastparquet.ParquetFile(files).to_pandas() if files else None


def delta(state, k):
    """(in, out) DataFrames of batch k's delta, read with fastparquet as pandas does."""
    base = os.path.join(state, "deltas", f"{k:010d}")
    return read_dir(os.path.join(base, "in")), read_dir(os.path.join(base, "out"))


def key_set(df):
    return set(zip(df["_sg_batch"].tolist(), df["_sg_row"].tolist()))


def apply_delta(current, ins, outs):
    """S_k = (S_{k-1} union in_k) minus out_k, by key."""
    import pandas as pd
    both = ins if current is None else pd.concat([current, ins], ignore_index=True)
    gone = key_set(outs)
    keep = [key not in gone for key in zip(both["_sg_batch"].tolist(), both["_sg_row"].tolist())]
    return both[keep].reset_index(drop=True)


def sort_by_key(df):
    return df.sort_values(KEYS).reset_index(drop=True)
