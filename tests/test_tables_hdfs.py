"""Tables on the real HDFS: a partitioned Parquet dataset read where it lives
(hdfs:// through WebHDFS), sampled, and its samples written to HDFS; the
same files as the local run.  The cluster runners say in one line that they
sample block matrices."""
import os

import numpy as np
import pytest

from samplegen.jobs import fs

from .conftest import hdfs_directory, run_cli

pytestmark = pytest.mark.hadoop
pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def base(cluster_env):
    yield from hdfs_directory("tables")


def test_a_parquet_dataset_on_hdfs_is_sampled_into_tables_on_hdfs(hadoop, base, tmp_path,
                                                                   capsys):
    rng = np.random.default_rng(8)
    local = tmp_path / "sales"
    for day in ("2026-01-01", "2026-01-02"):
        part = pd.DataFrame({"store": rng.choice(["north", "south"], 150),
                             "units": rng.integers(0, 9, 150),
                             "price": np.where(rng.random(150) < .1, np.nan, rng.random(150))})
        (local / f"day={day}").mkdir(parents=True)
        part.to_parquet(local / f"day={day}" / "part-00000.parquet", index=False)
    (local / "_SUCCESS").write_text("")
    remote = f"{base}/sales"
    fs.get_fs(remote).upload(str(local), remote)
    for src, dest in ((remote, f"{base}/out"), (str(local), str(tmp_path / "out"))):
        code, _, err = run_cli(capsys, "kfold", src, dest, "--k", "3", "--seed", "5",
                               "--stratify", "store", "--format", "csv")
        assert code == 0, err
    layer = fs.get_fs(f"{base}/out")
    for name in ("test-0", "test-1", "test-2"):      # the folds: the local run's bytes
        assert layer.read_bytes(f"{base}/out/{name}.csv") == \
            (tmp_path / "out" / f"{name}.csv").read_bytes()
    # a composed training set on HDFS is one file (no links there): the other folds' rows
    train = pd.read_csv(layer.open_read(f"{base}/out/train-0.csv"))
    folds = pd.concat([pd.read_csv(tmp_path / "out" / f"test-{j}.csv") for j in (1, 2)])
    pd.testing.assert_frame_equal(train.reset_index(drop=True), folds.reset_index(drop=True))
    code, out, err = run_cli(capsys, "info", f"{base}/out")
    assert code == 0 and "parquet table, 300 rows x 4 columns" in out, err
    for runner in ("hadoop", "spark"):
        code, _, err = run_cli(capsys, "holdout", remote, f"{base}/no-{runner}", "--ratio", "0.5",
                               "--seed", "1", "--runner", runner)
        assert code == 2 and f"--runner {runner} samples block matrices" in err, err
        assert err.count("\n") == 1 and not layer.exists(f"{base}/no-{runner}")
    assert not os.path.exists(tmp_path / "no-hadoop")
