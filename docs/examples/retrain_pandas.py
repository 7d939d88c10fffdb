"""Retraining on a stream with pandas: keep a time-biased sample of the
daily data, refit a model on it every day, honour an erasure request, and
save the sample between runs.

    python docs/examples/retrain_pandas.py [WORKDIR]
"""
import sys
import tempfile

import numpy as np
import pandas as pd

from samplegen.tbs import RTBS, Exponential, StreamSample


def day_of_data(day, rng):
    """One day of labelled rows; the relation between x and y drifts slowly."""
    n = int(rng.integers(200, 400))
    x = rng.normal(size=(n, 2))
    slope = np.array([1.0, -1.0]) + 0.05 * day * np.array([-1.0, 1.0])
    return pd.DataFrame({
        "user": [f"user-{day}-{i}" for i in range(n)],
        "country": rng.choice(["DE", "FR", "NL"], n),           # an object column
        "x1": x[:, 0], "x2": x[:, 1],
        "y": x @ slope + rng.normal(scale=0.3, size=n),
    })


def fit(sample):
    """Least squares on the sample, each row weighted by 1 / its inclusion
    probability (a Horvitz-Thompson weighting: the fit then estimates the
    time-decayed population's relation, not the sample's)."""
    w = 1.0 / sample["inclusion_probability"].to_numpy()
    x = sample[["x1", "x2"]].to_numpy() * np.sqrt(w)[:, None]
    y = sample["y"].to_numpy() * np.sqrt(w)
    return np.linalg.lstsq(x, y, rcond=None)[0]


def main(workdir):
    rng = np.random.default_rng(0)
    # At most 2,000 rows; a row three days old counts half as much as today's.
    stream = StreamSample(RTBS(2000, Exponential.from_half_life(3.0), seed=42), key="user")
    for day in range(30):
        stream.update(day_of_data(day, rng), time=float(day))
        if day == 15:
            # A user asks to be forgotten: every stored row of theirs goes.
            stream.remove(["user-3-7", "user-14-2"])
        sample = stream.sample(with_probabilities=True)
        coef = fit(sample)
        if day % 10 == 9:
            print(f"day {day}: {len(sample)} rows, mean age {sample['age'].mean():.2f} days, "
                  f"coefficients {np.round(coef, 2)}")
    stream.save(f"{workdir}/sample")                     # e.g. at the end of a job
    again = StreamSample.load(f"{workdir}/sample", RTBS)  # in the next run
    assert again.sample().equals(stream.sample())
    print(f"restored {len(again.sample())} rows; columns {list(again.sample().columns)}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp())
