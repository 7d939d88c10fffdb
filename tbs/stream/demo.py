"""A synthetic stream of micro-batches for ``make tbs-demo``.

    python -m samplegen.tbs.stream.demo DIR [--batches 24] [--size 20000] [--seed 0] [--start 1]

Writes ``DIR/batch-<k>`` for k = start .. start + batches - 1, the way
producers do: odd batches as one Parquet file (written under a temporary
name, then renamed), even ones as a Spark-style directory of two part files
plus ``_SUCCESS``.  Rows: ``id`` (int64, unique), ``x1``, ``x2`` (float64),
``label`` (int32) and ``source`` (text); the label's mean drifts over the
stream, so a time-biased sample follows it.  Batch sizes vary by +-50%
around ``--size``; arrival times are recorded as ``samplegen.time``
(k + 0.5 floor(k / 5): a longer gap before every fifth batch).
"""
import argparse
import os
import sys

import numpy as np


def write(folder, batches=24, size=20000, seed=0, start=1):
    import fastparquet
    import pandas as pd
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(seed)
    next_id = (start - 1) * 10 * size
    for k in range(start, start + batches):
        # arrival time: one per batch, a longer gap before every fifth
        t = k + 0.5 * (k // 5)
        b = int(rng.integers(size // 2, size * 3 // 2 + 1))
        drift = k / 10.0
        df = pd.DataFrame({
            "id": np.arange(next_id, next_id + b, dtype=np.int64),
            "x1": rng.standard_normal(b) + drift,
            "x2": rng.standard_normal(b),
            "label": (rng.random(b) < 1 / (1 + np.exp(-(drift - 1.0)))).astype(np.int32),
            "source": np.where(rng.random(b) < 0.5, "sensor-a", "sensor-b"),
        })
        next_id += b
        meta = {"samplegen.time": repr(t)}
        if k % 2:
            tmp = os.path.join(folder, f".batch-{k}.parquet.tmp")
            fastparquet.write(tmp, df, write_index=False, custom_metadata=meta)
            os.replace(tmp, os.path.join(folder, f"batch-{k}.parquet"))
        else:
            d = os.path.join(folder, f"batch-{k}")
            os.makedirs(d, exist_ok=True)
            half = b // 2
            for i, part in enumerate((df.iloc[:half], df.iloc[half:])):
                fastparquet.write(os.path.join(d, f"part-{i:05d}.parquet"), part, write_index=False,
                                  custom_metadata=meta)
            open(os.path.join(d, "_SUCCESS"), "w").close()
    return folder


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--batches", type=int, default=24)
    p.add_argument("--size", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--start", type=int, default=1)
    args = p.parse_args(argv)
    write(args.folder, args.batches, args.size, args.seed, args.start)
    print(f"wrote batches {args.start}..{args.start + args.batches - 1} to {args.folder}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
