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


# ----------------------------------------------------------------------------- the job in memory

class MirrorPartition:
    """Partition p of the reservoir in memory, changed exactly as a task of the
    micro-batch job changes it (tbs/stream/task.py, Partition.apply): the same
    generator ``batch_generator(key, k, STREAM_APPLY, sub=p)``, the same draws in
    the same order (``select_for_downsample`` with ``partition_plan`` for each
    move, then ``_choose_rows`` for the new rows), the same row order (items in
    arrival order; a snapshot keeps that order, so it changes nothing here)
    and the same realization of S_k (all full items plus the partial items
    named, or the ``count`` items of smallest ``priorities``).  No files: only
    the item keys ``(batch << 32) | row`` and the F bitmap are kept."""

    def __init__(self, p):
        self.p = p
        self.keys = np.zeros(0, dtype=np.int64)
        self.F = np.zeros(0, dtype=bool)
        self.partials = {}

    def apply(self, key, step, bounds, salt):
        """Batch ``step["k"]`` of a Driver plan; returns the keys of S_k here."""
        from samplegen.tbs.latent import partition_plan, select_for_downsample
        from samplegen.tbs.randomness import STREAM_APPLY, batch_generator
        from samplegen.tbs.stream.decide import CONS
        from samplegen.tbs.stream.task import _choose_rows, priorities
        k, op, mapping = step["k"], step["ops"][self.p], step["mapping"]
        rng = batch_generator(key, k, STREAM_APPLY, sub=self.p)
        batch = self.keys >> 32
        if mapping["mode"] == "single":
            group = np.zeros(batch.size, dtype=np.int64)
        else:
            upto = mapping.get("cons_upto")
            group = batch if upto is None else np.where(batch <= upto, CONS, batch)
        for gid, n_exp, moved, pid in op["moves"]:
            rows = np.flatnonzero(self.F & (group == gid))
            assert rows.size == n_exp, (k, self.p, gid, rows.size, n_exp)
            mode, pos, ppos = select_for_downsample(rng, n_exp,
                                                    partition_plan(n_exp, moved, int(pid >= 0)))
            if mode == "remove":
                self.F[rows[pos]] = False
            else:
                self.F[rows] = False
                self.F[rows[pos]] = True
            if pid >= 0:
                self.partials[pid] = int(rows[ppos])
        lo, hi = bounds
        take, tp = op["take"], int(op["take_pid"] >= 0)
        base = self.keys.size
        if take + tp:
            chosen, ppos = _choose_rows(rng, hi - lo, take, tp)
            self.keys = np.concatenate([self.keys, (np.int64(k) << 32) | (chosen + lo)])
            self.F = np.concatenate([self.F, np.ones(chosen.size, dtype=bool)])
            if tp:
                prow = base + int(np.searchsorted(chosen, ppos))
                self.F[prow] = False
                self.partials[op["take_pid"]] = prow
        for pid, action in op["partials"]:
            row = self.partials.pop(pid)
            if action == "full":
                self.F[row] = True
        assert int(np.count_nonzero(self.F)) == step["expect"][self.p]
        out = op["out"]
        extra = np.array([self.partials[i] for i in out["extra"]], dtype=np.int64)
        union = np.array([self.partials[i] for i in out["union"]], dtype=np.int64)
        if out["mode"] == "all":
            R = self.F.copy()
            R[union] = True
        else:
            cand = np.concatenate([np.flatnonzero(self.F), union])
            R = np.zeros(self.F.size, dtype=bool)
            c = out["count"]
            if c >= cand.size:
                R[cand] = True
            elif c > 0:
                pri = priorities(self.keys[cand], salt)
                R[cand[np.argpartition(pri, c - 1)[:c]]] = True
        R[extra] = True
        return self.keys[R]


def mirror_run(given, schedule, partitions):
    """S_k of ``samplegen tbs run`` with the parameters ``given`` (as for
    :func:`samplegen.tbs.stream.run`) over ``schedule`` -- a list of
    ``(k, time, bounds)`` with the batch's partition bounds -- computed in
    memory: the job's own parameter handling (``new_params``), its driver
    (``Driver.step``, planning every batch as the job does) and
    :class:`MirrorPartition` for the tasks.  Returns the sorted keys of S_k
    after the last batch and the driver state."""
    from samplegen.tbs.stream.decide import Driver, initial_state, output_salt
    from samplegen.tbs.stream.job import new_params
    params = new_params(dict(given, partitions=partitions), [])
    driver = Driver(params, initial_state(params, partitions), partitions, None)
    salt = output_salt(driver.key)
    parts = [MirrorPartition(p) for p in range(partitions)]
    sample = []
    for k, t, bounds in schedule:
        step = driver.step(k, [hi - lo for lo, hi in bounds], t)
        sample = [part.apply(driver.key, step, bounds[part.p], salt) for part in parts]
    keys = np.sort(np.concatenate(sample))
    assert keys.size == driver.state["size"]
    return keys, driver.state
