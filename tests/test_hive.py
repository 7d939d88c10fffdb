"""The Hive engine against a real HiveServer2 (the Spark Thrift Server from
pyspark), through pyhive and through beeline: byte identity with the inline
runner for every method, table-to-table use, bad input, unsafe identifiers,
connection failures.  One server per session (tests/hive_fixtures.py)."""
import io
import json
import os
import shutil
import uuid

import numpy as np
import pytest

from samplegen.hive import apache_server, engine, server, sql, transform
from samplegen.hive import client as hive_client
from samplegen.jobs import daemons, driver
from samplegen.jobs.plan import DEFAULT_BIN_BUDGET, format_bin_bits, format_params, make_plan
from samplegen.jobs.store import Matrix
from samplegen.udfs.custom import load_udf
from samplegen.udfs.errors import InputError, ParameterError

from .conftest import NO_CONF, run_cli, runner_inputs, sample_digests, tree_digest
from .conftest import one_line_error as _one_line_error
from .hive_fixtures import beeline, read_tables

pytestmark = pytest.mark.hive
SEED = 7


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    base = tmp_path_factory.mktemp("hive-inputs")
    return runner_inputs(base)


_REFERENCES = {}


def reference(tmp_path_factory, src, udf, params):
    """The inline runner's run directory for (src, udf, params), cached."""
    key = (src, udf, json.dumps(params, sort_keys=True))
    if key not in _REFERENCES:
        dest = str(tmp_path_factory.mktemp("inline") / "run")
        driver.generate(src, dest, udf, params, SEED, runner="inline", options=NO_CONF)
        _REFERENCES[key] = dest
    return _REFERENCES[key]


def server_tables(url):
    with hive_client.Client(url) as c:
        # Spark: (database, tableName, isTemporary); Apache Hive: (tab_name)
        return {str(row[1] if len(row) > 1 else row[0]) for row in c.execute("SHOW TABLES")}


CASES = [
    ("holdout single", "dense", "holdout", {"ratio": 0.75}, {}),
    ("holdout series, coins", "wide", "holdout",
     {"ratio": 0.6, "repeats": 3, "fraction": 0.9, "exact": False}, {}),
    ("kfold fold mode", "wide", "kfold", {"k": 5}, {}),
    ("kfold naive, coins", "dense", "kfold", {"k": 4, "naive": True, "balanced": False}, {}),
    ("exact sizes", "wide", "holdout", {"ratio": 0.6, "repeats": 2, "exact": True}, {}),
    ("repeated folds", "dense", "kfold", {"k": 3, "repeats": 2}, {}),
    ("bootstrap out-of-bag", "sparse", "bootstrap", {"samples": 2, "oob": True}, {}),
    ("bootstrap sparse", "sparse", "bootstrap", {"samples": 3, "size": 1000}, {}),
    ("user UDF", "dense", "samplegen.udfs.examples:bernoulli", {"p": 0.3}, {}),
    ("scalar UDF", "dense", "samplegen.udfs.examples:paper_holdout_series",
     {"ratio": 0.5, "repeats": 2}, {}),
    ("kfold fold mode, rows form", "sparse", "kfold", {"k": 3}, {"records": "rows"}),
    ("bootstrap, rows form, many bins", "wide", "bootstrap", {"samples": 2},
     {"records": "rows", "budget": 4096}),
    ("holdout, many bins", "wide", "holdout", {"ratio": 0.5, "repeats": 2}, {"budget": 4096}),
]


@pytest.mark.parametrize("label,src,udf,params,extra", CASES, ids=[c[0] for c in CASES])
def test_same_bytes_as_inline(tmp_path, tmp_path_factory, inputs, hive_server, label, src, udf,
                              params, extra):
    ref = reference(tmp_path_factory, inputs[src], udf, params)
    budget = extra.get("budget", DEFAULT_BIN_BUDGET)
    if "budget" in extra:  # the case really shuffles several bins per group
        meta = Matrix.open(inputs[src]).meta
        plan = make_plan(load_udf(udf, meta["rows"], params), SEED, meta, "", budget)
        assert max(plan.bin_bits) > 0
    url = hive_server["url"] + ("?records=rows" if extra.get("records") == "rows" else "")
    dest = str(tmp_path / "hive")
    manifest = driver.generate(inputs[src], dest, udf, params, SEED, runner="hive",
                               options={"hive_url": url}, bin_budget=budget)
    assert manifest["engine"]["runner"] == "hive"
    digests = sample_digests(dest)
    assert digests == sample_digests(ref) and len(digests) >= 1
    assert driver.info(dest)["samples"] == driver.info(ref)["samples"]
    assert not [t for t in server_tables(hive_server["url"]) if t.startswith("samplegen_in_")]


@pytest.fixture(scope="module")
def labelled(tmp_path_factory):
    """A matrix whose column y holds classes (recorded at import), column w
    weights and column g groups, all in the second column block."""
    base = tmp_path_factory.mktemp("hive-labelled")
    rng = np.random.default_rng(12)
    X = rng.normal(size=(640, 70))
    X[:, 66] = rng.integers(0, 3, 640)
    X[:, 67] = rng.gamma(0.5, size=640) * (np.arange(640) % 9 != 0)   # weights, some zero
    X[:, 68] = rng.integers(0, 40, 640)
    names = [f"c{j}" for j in range(70)]
    names[66], names[67], names[68] = "y", "w", "g"
    np.savetxt(base / "x.csv", X, delimiter=",", header=",".join(names), comments="")
    driver.import_file(str(base / "x.csv"), str(base / "m"), 64, label="y")
    return str(base / "m")


def test_stratified_and_grouped_samples(tmp_path, tmp_path_factory, labelled, hive_server,
                                        capsys):
    """--stratify (classes recorded at import) and --groups (a pre-pass):
    the scripts read each row's class or group from the files the driver
    wrote next to the run, and write the inline runner's bytes.  (The
    stratified k-fold runs once, from the command line over a block table:
    the same query as ``--runner hive`` over its temporary table.)"""
    url = hive_server["url"]
    for i, (udf, params) in enumerate([("holdout", {"ratio": 0.7, "groups": "g"}),
                                       ("bootstrap", {"samples": 2, "oob": True,
                                                      "stratify": "y"})]):
        ref = reference(tmp_path_factory, labelled, udf, params)
        dest = str(tmp_path / f"hive{i}")
        driver.generate(labelled, dest, udf, params, SEED, runner="hive",
                        options={"hive_url": url})
        assert sample_digests(dest) == sample_digests(ref), (udf, params)
        assert not [n for n in os.listdir(dest) if n.startswith(("_strata", "_groups"))]
    table = "lab_" + uuid.uuid4().hex[:8]
    code, _, err = run_cli(capsys, "hive", "table", table, labelled, "--hive-url", url)
    assert code == 0, err
    code, _, err = run_cli(capsys, "hive", "kfold", table, "res_s", "--output",
                           tmp_path / "cli", "--k", 3, "--stratify", "y", "--seed", SEED,
                           "--hive-url", url)
    assert code == 0, err
    ref = reference(tmp_path_factory, labelled, "kfold", {"k": 3, "stratify": "y"})
    assert sample_digests(str(tmp_path / "cli")) == sample_digests(ref)
    assert not [n for n in os.listdir(tmp_path / "cli") if n.startswith(("_strata", "_groups"))]
    code, out, err = run_cli(capsys, "hive", "kfold", table, "res_p", "--output",
                             tmp_path / "printed", "--k", 3, "--groups", "g", "--seed", SEED,
                             "--hive-url", url, "--print")
    assert code == 2 and out == "" and "without --print" in err, err


def test_weighted_samples(tmp_path, tmp_path_factory, labelled, hive_server):
    """Every mode of weighted sampling: the scripts read each row's weight
    from the files the driver wrote next to the run, and the cutoffs travel
    as a parameter: the inline runner's bytes."""
    for i, params in enumerate([{"size": 50, "samples": 2}, {"size": 300, "replace": True},
                                {"expected": 80}]):
        params = dict(params, weights="w")
        ref = reference(tmp_path_factory, labelled, "weighted", params)
        dest = str(tmp_path / f"hive{i}")
        driver.generate(labelled, dest, "weighted", params, SEED, runner="hive",
                        options={"hive_url": hive_server["url"]})
        assert sample_digests(dest) == sample_digests(ref), params
        assert not [n for n in os.listdir(dest) if n.startswith("_weights")]


def _user_module(tmp_path, monkeypatch, prefix, source):
    """Write a uniquely named module into tmp_path/mods, importable here
    (and nowhere else); returns its name."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    return name


def test_user_module_ships_in_the_zip(tmp_path, inputs, hive_server, monkeypatch):
    """A UDF from the user's own module (not installed anywhere) runs on the
    server: the module travels inside samplegen-<hash>.zip."""
    name = _user_module(tmp_path, monkeypatch, "mysampler",
        "import numpy as np\n"
        "from samplegen.udfs import Purpose, stream\n"
        "def every_third(start, stop, rng, params):\n"
        "    ids = np.arange(start, stop)\n"
        "    keep = ids % 3 == int(params['r'])\n"
        "    lanes = rng.block(stream(Purpose.USER, 1), start, stop)\n"
        "    return np.flatnonzero(keep), np.zeros(keep.sum(), np.int64), lanes[keep, 0]\n"
        "every_third.sample_names = ['third']\n")
    spec = f"{name}:every_third"
    ref, dest = str(tmp_path / "ref"), str(tmp_path / "hive")
    driver.generate(inputs["dense"], ref, spec, {"r": 1}, SEED, runner="inline", options=NO_CONF)
    driver.generate(inputs["dense"], dest, spec, {"r": 1}, SEED, runner="hive",
                    options={"hive_url": hive_server["url"]})
    assert sample_digests(dest) == sample_digests(ref)
    ids, _ = Matrix.open(os.path.join(dest, "third")).to_numpy()
    assert np.array_equal(np.sort(ids), np.arange(1, 700, 3))


def test_command_line_runner_hive(tmp_path, tmp_path_factory, inputs, hive_server, capsys):
    dest = tmp_path / "cli"
    code, _, err = run_cli(capsys, "bootstrap", inputs["dense"], dest, "--samples", 2,
                           "--size", 300, "--seed", SEED, "--runner", "hive",
                           "--hive-url", hive_server["url"])
    assert code == 0, err
    ref = reference(tmp_path_factory, inputs["dense"], "bootstrap", {"samples": 2, "size": 300})
    assert sample_digests(str(dest)) == sample_digests(ref)


# ---------------------------------------------------------------------------
# bad input, failures: one line, exit status 2, nothing written
# ---------------------------------------------------------------------------
def _corrupt_copy(tmp_path, src):
    dest = str(tmp_path / "corrupt")
    shutil.copytree(src, dest)
    part = os.path.join(dest, "part-00000")
    data = bytearray(open(part, "rb").read())
    data[3000] = ord("A") if data[3000] != ord("A") else ord("B")
    open(part, "wb").write(bytes(data))
    return dest


@pytest.mark.parametrize("method", [["holdout", "--ratio", 0.5], ["kfold", "--k", 3]])
def test_corrupt_block_is_one_line_and_writes_nothing(tmp_path, inputs, hive_server, capsys,
                                                      method):
    src = _corrupt_copy(tmp_path, inputs["dense"])
    before = tree_digest(str(tmp_path))
    code, _, err = run_cli(capsys, method[0], src, tmp_path / "out", *method[1:], "--seed", 1,
                           "--runner", "hive", "--hive-url", hive_server["url"])
    line = _one_line_error(code, err)
    assert "corrupt block: checksum mismatch" in line
    assert tree_digest(str(tmp_path)) == before
    assert not [t for t in server_tables(hive_server["url"]) if t.startswith("samplegen_in_")]


def test_udf_errors_on_the_server(tmp_path, inputs, hive_server, monkeypatch, capsys):
    """A UDF that breaks the protocol is the user's error (exit 2); a UDF
    that crashes is reported in one line with its exception (exit 1)."""
    name = _user_module(tmp_path, monkeypatch, "badudfs",
        "import numpy as np\n"
        "def wrong_sample(start, stop, rng, params):\n"
        "    n = stop - start\n"
        "    return np.arange(n), np.full(n, 5), np.zeros(n, np.uint64)\n"
        "wrong_sample.sample_names = ['only']\n"
        "def crash(start, stop, rng, params):\n"
        "    raise ValueError('boom at %d' % start)\n")
    out = tmp_path / "out"
    base = ["--seed", 1, "--runner", "hive", "--hive-url", hive_server["url"]]
    code, _, err = run_cli(capsys, "sample", inputs["dense"], out, "--udf",
                           f"{name}:wrong_sample", *base)
    assert "sample id outside [0, 1)" in _one_line_error(code, err)
    code, _, err = run_cli(capsys, "sample", inputs["dense"], out, "--udf", f"{name}:crash",
                           *base)
    assert "ValueError: boom at" in _one_line_error(code, err, status=1)
    assert not out.exists() and sorted(os.listdir(tmp_path)) == ["mods"]


def test_connection_failures_are_one_line(tmp_path, tmp_path_factory, inputs, hive_server,
                                         capsys, monkeypatch):
    dead = daemons.free_port()
    files = tmp_path_factory.mktemp("untouched-files")
    monkeypatch.setenv("SAMPLEGEN_HIVE_FILES", str(files))
    before = tree_digest(str(tmp_path))
    for url, expected in [
            (f"hive://127.0.0.1:{dead}/default",
             f"cannot connect to HiveServer2 at 127.0.0.1:{dead}"),
            (hive_server["url"].replace("/default", "/no_such_db"), "no_such_db"),
            ("hive://127.0.0.1:10000/x;drop", "invalid database name"),
            ("http://127.0.0.1:10000/default", "must look like hive://"),
            ("hive://u:secret@127.0.0.1:10000/default", "SAMPLEGEN_HIVE_PASSWORD")]:
        code, _, err = run_cli(capsys, "holdout", inputs["dense"], tmp_path / "out", "--ratio",
                               0.5, "--seed", 1, "--runner", "hive", "--hive-url", url)
        assert expected in _one_line_error(code, err)
    code, _, err = run_cli(capsys, "holdout", inputs["dense"], tmp_path / "out", "--ratio", 0.5,
                           "--seed", 1, "--runner", "hive")
    assert "needs --hive-url" in _one_line_error(code, err)
    assert tree_digest(str(tmp_path)) == before
    assert os.listdir(files) == []  # nothing shipped to a server that is not there


# ---------------------------------------------------------------------------
# unsafe identifiers and values never reach SQL
# ---------------------------------------------------------------------------
EVIL = ["canary; DROP TABLE canary", "canary`", "x' OR '1'='1", "db.x.y", "1abc", "",
        "a b", "canary--", "${hivevar:table}"]


@pytest.mark.parametrize("evil", EVIL)
def test_malicious_table_names_are_refused_before_any_sql(tmp_path, inputs, hive_server,
                                                          capsys, evil):
    # with a URL where no server listens, a connection attempt would fail
    # with "cannot connect": the identifier check must come first
    dead = f"hive://127.0.0.1:{daemons.free_port()}/default"
    for argv in (["hive", "table", evil, inputs["dense"]],
                 ["hive", "holdout", "canary", evil, "--output", tmp_path / "o", "--ratio",
                  0.5, "--seed", 1],
                 ["hive", "bootstrap", evil, "res", "--output", tmp_path / "o", "--samples", 2,
                  "--seed", 1]):
        code, _, err = run_cli(capsys, *argv, "--hive-url", dead)
        line = _one_line_error(code, err)
        assert "invalid" in line and "table name" in line and "cannot connect" not in line
    # and against the live server: nothing happened to the canary
    with hive_client.Client(hive_server["url"]) as c:
        c.execute("CREATE TABLE IF NOT EXISTS canary (x INT) STORED AS TEXTFILE", fetch=False)
    code, _, err = run_cli(capsys, "hive", "table", evil, inputs["dense"], "--hive-url",
                           hive_server["url"])
    assert code == 2 and "invalid" in err
    assert "canary" in server_tables(hive_server["url"])
    assert not (tmp_path / "o").exists()


def test_render_refuses_unsafe_values():
    text = "SELECT * FROM ${hivevar:t} WHERE x = ${hivevar:n} -- ${hivevar:p}"
    kinds = {"t": "identifier", "n": "number", "p": "path"}
    ok = sql.render(text, {"t": "db1.blocks", "n": 0.25, "p": "hdfs://nn:8020/a/b"}, kinds)
    assert ok == "SELECT * FROM db1.blocks WHERE x = 0.25 -- hdfs://nn:8020/a/b"
    for bad in [{"t": "blocks; DROP TABLE x", "n": 1, "p": "/a"},
                {"t": "b", "n": float("nan"), "p": "/a"},
                {"t": "b", "n": True, "p": "/a"},
                {"t": "b", "n": "1 OR 1=1", "p": "/a"},
                {"t": "b", "n": 1, "p": "/a/b'; DROP TABLE x; --"},
                {"t": "b", "n": 1, "p": "/a/../etc"},
                {"t": "b", "n": 1, "p": "/a b"},
                {"t": "b", "n": 1, "p": "/a/${env:HOME}"},
                {"t": "b", "n": 1, "p": "relative/dir"},
                {"t": "b", "n": 1, "p": "--records=rows"},
                {"t": "b", "n": 1, "p": "~/x"}]:
        with pytest.raises(ParameterError):
            sql.render(text, bad, kinds)
    for kind, bad in [("word", "-c"), ("word", "~root"), ("program", "X=1"),
                      ("program", "python3;rm"), ("params", "a=1 b=2")]:
        with pytest.raises(ParameterError):
            sql.render("${hivevar:v}", {"v": bad}, {"v": kind})
    with pytest.raises(ParameterError, match="needs variable"):
        sql.render(text, {"t": "b", "n": 1}, kinds)
    with pytest.raises(ParameterError, match="does not use"):
        sql.render(text, {"t": "b", "n": 1, "p": "/a", "q": 2}, kinds)
    # a user parameter that would not come back as itself is refused
    with pytest.raises(ParameterError, match="does not survive"):
        format_params({"names": "a,b"})
    with pytest.raises(ParameterError, match="does not survive"):
        format_params({"size": None})
    with pytest.raises(ParameterError, match="cannot be passed to a TRANSFORM script"):
        sql.render("--params=${hivevar:params}", {"params": format_params(
            {"name": "a b"})}, {"params": "params"})
    with pytest.raises(ParameterError, match="does not survive"):
        format_params({"n": "12"})  # a string that would come back as an int


def test_statement_splitting():
    text = ("-- head; comment\nSET a=1;\nSELECT 'x;y', \"q;\" -- tail; c\nFROM t;\n"
            "ADD FILE /p/z.zip;\n-- only a comment;\n")
    assert sql.statements(text) == ["SET a=1", "SELECT 'x;y', \"q;\" \nFROM t",
                                    "ADD FILE /p/z.zip"]


# ---------------------------------------------------------------------------
# table-to-table use
# ---------------------------------------------------------------------------
def _training_views(client, result, k):
    """The composed training views ``<result>_train_0 .. _<k-1>``, read two
    to a query (four composed views in one query pass Tez's limit of 120
    counters on Apache Hive): ``{i: view i's (h_index, v_index, block) rows
    in block order}``."""
    views = read_tables(client.execute, "h_index, v_index, block",
                        [f"{result}_train_{i}" for i in range(k)], per_query=2)
    return dict(enumerate(views))


def test_block_table_to_result_table(tmp_path, tmp_path_factory, inputs, hive_server, capsys):
    url = hive_server["url"]
    table = "blocks_" + uuid.uuid4().hex[:8]
    code, _, err = run_cli(capsys, "hive", "table", table, inputs["wide"], "--hive-url", url)
    assert code == 0, err
    code, _, err = run_cli(capsys, "hive", "table", table, inputs["wide"], "--hive-url", url)
    assert "exists" in _one_line_error(code, err)
    with hive_client.Client(url) as c:
        props = dict(c.execute(f"SHOW TBLPROPERTIES {table}"))
    assert (props["samplegen.rows"], props["samplegen.block_size"]) == ("450", "64")

    # --print renders the HiveQL and runs nothing
    out, printed = tmp_path / "folds", tmp_path / "printed"
    code, text, err = run_cli(capsys, "hive", "kfold", table, "res_p", "--output", printed,
                              "--k", 4, "--seed", SEED, "--hive-url", url, "--print")
    assert code == 0, err
    assert f"FROM {table}" in text and "USING 'python3 samplegen-" in text
    assert "compose --output " + str(printed) in text and "${hivevar:" not in text
    assert "CREATE VIEW res_p_train_3 AS" in text
    assert not printed.exists() and "res_p" not in server_tables(url)

    code, _, err = run_cli(capsys, "hive", "kfold", table, "res", "--output", out, "--k", 4,
                           "--seed", SEED, "--hive-url", url)
    assert code == 0, err
    ref = reference(tmp_path_factory, inputs["wide"], "kfold", {"k": 4})
    assert sample_digests(str(out)) == sample_digests(ref)
    from samplegen.jobs.blocks import parse_line
    with hive_client.Client(url) as c:
        counts = dict(c.execute("SELECT sample, count(*) FROM res GROUP BY sample"))
        assert sorted(counts) == sorted([f"test-{i}" for i in range(4)]
                                        + [f"train-{i}" for i in range(4)])
        views = _training_views(c, "res", 4)
        for i, rows in views.items():  # each view is the composed training set, block by block
            composed = Matrix.open(str(out / f"train-{i}"))
            assert len(rows) == len(composed.blocks())
            for h, v, block in rows:
                _, _, got = parse_line(f"{h}\t{v}\t{block}")
                assert np.array_equal(got.to_dense(), composed.read_block(h, v).to_dense())
                assert np.array_equal(got.row_ids, composed.read_block(h, v).row_ids)

    # time-series folds: the generic script with the timeseries UDF
    code, _, err = run_cli(capsys, "hive", "kfold", table, "res_ts", "--output",
                           tmp_path / "ts", "--k", 3, "--time-series", "--gap", 2, "--seed",
                           SEED, "--hive-url", url)
    assert code == 0, err
    ref = reference(tmp_path_factory, inputs["wide"], "timeseries",
                    {"k": 3, "gap": 2, "test_size": 0, "max_train_size": 0})
    assert sample_digests(str(tmp_path / "ts")) == sample_digests(ref)

    # the printed script, run by beeline alone: the same run directory (metadata
    # included) as the Python run, and the same result table and views
    (tmp_path / "printed.sql").write_text(text)
    code, _, err = beeline(hive_server["port"], tmp_path / "printed.sql")
    assert code == 0, err[-2000:]
    _readable_like(capsys, tmp_path, str(printed), str(out))
    with hive_client.Client(url) as c:
        assert dict(c.execute("SELECT sample, count(*) FROM res_p GROUP BY sample")) == counts
        assert _training_views(c, "res_p", 4) == views

    # a finished run directory registered as a result table: the same
    # partitions and views as the run's own
    code, ddl, err = run_cli(capsys, "hive", "register", "res_r", "--output", printed,
                             "--hive-url", url, "--print")
    assert code == 0, err
    assert "CREATE VIEW res_r_train_3 AS" in ddl and "DROP" not in ddl
    assert "res_r" not in server_tables(url)
    code, _, err = run_cli(capsys, "hive", "register", "res_r", "--output", printed,
                           "--hive-url", url)
    assert code == 0, err
    with hive_client.Client(url) as c:
        assert dict(c.execute("SELECT sample, count(*) FROM res_r GROUP BY sample")) == counts
        assert _training_views(c, "res_r", 4) == views
    code, _, err = run_cli(capsys, "hive", "register", "res_r", "--output", printed,
                           "--hive-url", url)
    assert "exists" in _one_line_error(code, err)
    code, _, err = run_cli(capsys, "hive", "register", "res_m", "--output", inputs["wide"],
                           "--hive-url", url)
    assert "not a run directory" in _one_line_error(code, err)
    assert "res_m" not in server_tables(url)

    # --print --overwrite drops the table it replaces, and its views, first
    code, text, err = run_cli(capsys, "hive", "holdout", table, "res_r", "--output",
                              tmp_path / "again", "--ratio", 0.5, "--seed", 1, "--hive-url", url,
                              "--print", "--overwrite")
    assert code == 0, err
    ddl = text[text.index("-- then the result table"):]
    assert ddl.index("DROP VIEW IF EXISTS res_r_train_0") < ddl.index("DROP TABLE IF EXISTS "
                                                                      "res_r")
    assert ddl.index("DROP TABLE IF EXISTS res_r") < ddl.index("CREATE EXTERNAL TABLE res_r")
    code, _, err = run_cli(capsys, "hive", "holdout", table, "res_r", "--output",
                           tmp_path / "again", "--ratio", 0.5, "--seed", 1, "--hive-url", url,
                           "--print")
    assert "exists" in _one_line_error(code, err)

    # an existing result table is refused, and nothing is written
    before = tree_digest(str(tmp_path))
    code, _, err = run_cli(capsys, "hive", "holdout", table, "res", "--output",
                           tmp_path / "other", "--ratio", 0.5, "--seed", 1, "--hive-url", url)
    assert "exists" in _one_line_error(code, err)
    assert tree_digest(str(tmp_path)) == before
    code, _, err = run_cli(capsys, "hive", "holdout", table, "res", "--output", out,
                           "--ratio", 0.5, "--seed", 1, "--hive-url", url, "--overwrite")
    assert code == 0, err
    with hive_client.Client(url) as c:
        assert sorted(dict(c.execute("SELECT sample, count(*) FROM res GROUP BY sample"))) \
            == ["test-0", "train-0"]
        assert not [t for t in server_tables(url) if t.startswith("res_train")]


def test_script_command_prints_the_hql(capsys):
    code, out, _ = run_cli(capsys, "hive", "script", "bootstrap")
    assert code == 0 and "${hivevar:samples}" in out and "ADD FILE" in out
    code, _, err = run_cli(capsys, "hive", "script", "../etc/passwd")
    assert code == 2 and "unknown script" in err


# ---------------------------------------------------------------------------
# beeline: the same scripts, the same bytes
# ---------------------------------------------------------------------------
def _metadata(run_dir):
    """A run's metadata, without what legitimately differs between runs of
    the same seed: the engine entry, the elapsed time and the directory."""
    manifest = driver.info(run_dir)
    for key in ("engine", "elapsed_seconds", "path"):
        manifest.pop(key)
    return manifest


def _readable_like(capsys, tmp_path, dest, ref):
    """``samplegen info`` and ``export`` read the beeline-only run *dest*:
    the same samples, bytes and metadata as the run directory *ref*."""
    assert sample_digests(dest) == sample_digests(ref)   # blocks and _matrix.json
    assert _metadata(dest) == _metadata(ref)
    assert driver.info(dest)["engine"] == transform.QUERY_ENGINE
    assert os.path.exists(os.path.join(dest, "_SUCCESS"))
    code, out, err = run_cli(capsys, "info", dest, "--json")
    assert code == 0, err
    names = [s["name"] for s in json.loads(out)["samples"]]
    for name in (names[0], names[-1]):
        got, want = tmp_path / f"got-{name}.npy", tmp_path / f"want-{name}.npy"
        code, _, err = run_cli(capsys, "export", dest, name, "--to", got)
        assert code == 0, err
        assert run_cli(capsys, "export", ref, name, "--to", want)[0] == 0
        assert np.array_equal(np.load(got), np.load(want))


def _rendered_script(url, src, dest, udf, params):
    """The rendered script of a run of *src* into *dest* itself, as a
    beeline user runs it: the block table, the query, the table dropped."""
    matrix = Matrix.open(src)
    plan = make_plan(load_udf(udf, matrix.rows, params), SEED, matrix.meta, dest)
    conf = engine.settings({"hive_url": url})
    zip_name = engine.ship_zip(conf["files"], plan.udf)
    table = engine.temp_table_name()
    return (engine.block_table_ddl(table, src, matrix.meta) + "\n"
            + engine.render_query(plan, table, dest, conf, zip_name, src)
            + f"\nDROP TABLE {table};\n")


BEELINE_CASES = [("wide", "holdout", {"ratio": 0.6, "repeats": 3, "fraction": 0.9}),
                 ("wide", "kfold", {"k": 5}),
                 ("sparse", "bootstrap", {"samples": 3, "size": 1000})]


@pytest.fixture(scope="module")
def beeline_runs(tmp_path_factory, inputs, hive_server):
    """The rendered scripts of BEELINE_CASES, one after the other in one
    beeline process (one JVM start and one session, not three: the three
    scripts SET the same session settings, so none runs on settings only
    another gave); ``{udf: the run directory it left}``."""
    base = tmp_path_factory.mktemp("beeline")
    dests = {udf: str(base / udf) for _, udf, _ in BEELINE_CASES}
    path = base / "runs.hql"
    path.write_text("\n".join(_rendered_script(hive_server["url"], inputs[src], dests[udf], udf,
                                               params) for src, udf, params in BEELINE_CASES))
    code, _, err = beeline(hive_server["port"], path, timeout=900)
    assert code == 0, err[-2000:]
    return dests


@pytest.mark.slow
@pytest.mark.parametrize("src,udf,params", BEELINE_CASES)
def test_rendered_scripts_run_through_beeline(tmp_path, tmp_path_factory, inputs, beeline_runs,
                                              src, udf, params, capsys):
    """beeline alone leaves a run directory: the samples, their _matrix.json
    and the manifest of a samplegen run (info and export read it)."""
    _readable_like(capsys, tmp_path, beeline_runs[udf],
                   reference(tmp_path_factory, inputs[src], udf, params))


@pytest.mark.slow
def test_raw_script_with_hivevars_through_beeline(tmp_path, tmp_path_factory, inputs,
                                                  hive_server, capsys):
    """hive/kfold_naive.hql as shipped, the variables given with --hivevar
    (substituted by the server), as a beeline user runs it: a complete run
    directory."""
    src = inputs["dense"]
    matrix = Matrix.open(src)
    table = "blocks_" + uuid.uuid4().hex[:8]
    with hive_client.Client(hive_server["url"]) as c:
        c.run_script(engine.block_table_ddl(table, src, matrix.meta))
    conf = engine.settings({"hive_url": hive_server["url"]})
    zip_name = engine.ship_zip(conf["files"], "kfold")
    dest = str(tmp_path / "raw")
    params = {"k": 4, "naive": True, "balanced": False}
    hivevars = {"table": table, "output": dest, "input": src, "files": conf["files"],
                "zip": zip_name, "python": "python3", "rows": 700, "cols": 20,
                "block_size": 64, "kind": "dense", "seed": SEED, "k": 4, "balanced": "false",
                "repeats": 1, "strata": "none", "grouping": "none", "bin_bits": 0,
                "records": "chunks"}
    code, out, err = beeline(hive_server["port"],
                             os.path.join(sql.SCRIPT_DIR, "kfold_naive.hql"), hivevars)
    assert code == 0, err[-2000:]
    _readable_like(capsys, tmp_path, dest, reference(tmp_path_factory, src, "kfold", params))
    # one follow-up command makes it a result table, as `samplegen hive kfold` leaves
    result = "raw_" + uuid.uuid4().hex[:8]
    code, _, err = run_cli(capsys, "hive", "register", result, "--output", dest,
                           "--hive-url", hive_server["url"])
    assert code == 0, err
    with hive_client.Client(hive_server["url"]) as c:
        got = dict(c.execute(f"SELECT sample, count(*) FROM {result} GROUP BY sample"))
    assert got == {s["name"]: len(Matrix.open(os.path.join(dest, s["name"])).blocks())
                   for s in driver.info(dest)["samples"]}

    # a shape that is not the input's: an error row, and no metadata
    other = str(tmp_path / "wrong")
    code, out, err = beeline(hive_server["port"],
                             os.path.join(sql.SCRIPT_DIR, "kfold_naive.hql"),
                             dict(hivevars, output=other, input=inputs["wide"]))
    assert code == 0, err[-2000:]
    assert "samplegen-error: InputError: input " in out
    assert not os.path.exists(os.path.join(other, "_manifest.json"))


# ---------------------------------------------------------------------------
# the TRANSFORM scripts' own checks, and the local server's
# ---------------------------------------------------------------------------
def plan_argv(plan, records="chunks"):
    """The command-line words that make ``plan.from_options`` rebuild *plan*."""
    return ["--udf", plan.udf, f"--params={format_params(plan.params)}",
            "--seed", str(plan.seed), "--rows", str(plan.rows), "--cols", str(plan.cols),
            "--block-size", str(plan.block_size), "--kind", plan.kind,
            "--bin-bits", format_bin_bits(plan), "--records", records]


def _script(argv, data):
    out = io.BytesIO()
    assert transform.main(argv, io.BytesIO(data), out) == 0
    return out.getvalue()


def test_reducer_refuses_unsorted_input(tmp_path, inputs):
    matrix = Matrix.open(inputs["dense"])
    plan = make_plan(load_udf("holdout", matrix.rows, {"ratio": 0.5}), SEED, matrix.meta,
                     str(tmp_path / "o"))
    argv = plan_argv(plan, "rows")
    (tmp_path / "o").mkdir()  # the run directory, which the driver creates
    data = b"".join(open(p, "rb").read() for p in matrix.part_uris())
    rows = _script(["sample"] + argv, data).splitlines(keepends=True)
    assert len(rows) == 700
    rows.sort(key=lambda r: (int(r.split(b"\t")[0]), int(r.split(b"\t")[1])))  # no SORT BY
    out = _script(["reblock", "--output", str(tmp_path / "o")] + argv, b"".join(rows))
    assert out.startswith(b"-2\t-1\t-1\tsamplegen-error: InputError: reblock input is not sorted")
    rows.sort(key=lambda r: r.split(b"\t")[2])  # sorted, but groups interleaved
    out = _script(["reblock", "--output", str(tmp_path / "o")] + argv, b"".join(rows))
    assert b"\tsamplegen-error: InputError: reblock input is not grouped" in out


def test_map_side_error_row_flows_to_the_client(tmp_path, inputs):
    matrix = Matrix.open(inputs["dense"])
    plan = make_plan(load_udf("holdout", matrix.rows, {"ratio": 0.5}), SEED, matrix.meta, "")
    argv = plan_argv(plan)
    out = _script(["sample"] + argv, b"0\t0\tnot-a-block\n0\t1\tmore input\n")
    assert out.startswith(b"-1\t-1\t\t-1\tsamplegen-error: InputError: corrupt")
    assert out.count(b"\n") == 1
    reduced = _script(["reblock", "--output", str(tmp_path)] + argv, out)
    route, sample, v, message = reduced.decode().rstrip("\n").split("\t")
    assert (route, sample, v) == ("-2", "-1", "-1") and os.listdir(tmp_path) == []
    with pytest.raises(InputError, match="^corrupt"):
        engine.summaries_of([(-1, 0, 0, "{}"), (int(route), int(sample), int(v), message)])


def test_server_up_is_idempotent_and_explains_a_missing_java(hive_server, monkeypatch,
                                                             tmp_path):
    kind = hive_server["kind"]
    module = apache_server if kind == "apache" else server
    state = module.read_state(hive_server["workdir"])
    assert state is not None and state[1] == hive_server["port"]
    assert module.up(hive_server["workdir"], hive_server["port"], log=lambda m: None) == state
    hadoop = ["--hadoop-workdir", hive_server["hadoop_workdir"]] if kind == "apache" else []
    assert server.main(["up", "--server", kind, "--workdir", str(tmp_path / "other"),
                        "--port", str(hive_server["port"]), *hadoop]) == 2  # port taken
    assert not os.path.exists(tmp_path / "other" / "server.pid")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(module.ServerError, match="Java is missing.*make java"):
        module.up(str(tmp_path / "fresh"), daemons.free_port(), log=lambda m: None)


@pytest.mark.parametrize("udf,params", [("bootstrap", {"samples": 4, "size": 900}),
                                        ("holdout", {"ratio": 0.3, "repeats": 2, "fraction": 0.7}),
                                        ("kfold", {"k": 3, "naive": True}),
                                        ("samplegen.udfs.examples:paper_holdout_series",
                                         {"ratio": 0.5})])
def test_range_cache_changes_nothing(inputs, monkeypatch, udf, params):
    """The sampling script asks the UDF for many rows at once; its output is
    the same as with one UDF call per block, whatever the block order."""
    import random
    matrix = Matrix.open(inputs["wide"])
    lines = b"".join(open(p, "rb").read() for p in matrix.part_uris()).splitlines(True)
    shuffled = random.Random(1).sample(lines, len(lines))
    argv = plan_argv(make_plan(load_udf(udf, matrix.rows, params), SEED,
                                         matrix.meta, ""))
    outputs = set()
    for span in (1, 100, 1 << 16):  # 1: one call per block, as without the cache
        monkeypatch.setattr(transform, "RANGE_ROWS", span)
        for data in (lines, shuffled):
            outputs.add(b"\n".join(sorted(_script(["sample"] + argv, b"".join(data))
                                          .splitlines())))
    assert len(outputs) == 1 and len(next(iter(outputs))) > 1000
