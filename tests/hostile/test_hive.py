"""Hostile use of the Hive commands, ``samplegen hive table | holdout |
kfold | bootstrap | weighted | sample | register | script``, on block tables
(``--output``) and row tables (``--key``).

What they are fed: table, result, key, class, group and weight column
names and database names built for injection (``x; DROP TABLE y``,
backticks, quotes, three-part names), interpreters with shell syntax, script
names that are paths, bad parameters, damaged matrix metadata and run
manifests, tables that do not exist, keys of a type without a stable text
(maps, maps inside structs and arrays), and a block table whose matrix
directory lost part of a file after it was registered.  Each is one line
on stderr and exit status 2, with nothing written and nothing run on the
server.

The tests that need no server point at a URL where nothing listens, so a
check that came after the connection attempt would report the connection
instead; they run in the fast suite.  The tests marked ``hive`` run against
the real HiveServer2s of tests/hive_fixtures.py (Apache Hive on the
single-node Hadoop, and the Spark Thrift Server).
"""
import os
import uuid

import pytest

from samplegen.hive import client as hive_client
from samplegen.jobs import daemons, driver

from ..conftest import make, run_cli, tree_digest
from ..conftest import one_line_error as _one_line_error

SEED = 7
EVIL = ["x; DROP TABLE canary", "canary`x", "a'b", "db.t.x", "1abc", "x -- y", "x\nDROP"]


@pytest.fixture
def dead_url(monkeypatch, tmp_path):
    """A HiveServer2 URL where nothing listens; the shipped files in tmp_path."""
    monkeypatch.delenv("SAMPLEGEN_HIVE_URL", raising=False)
    monkeypatch.setenv("SAMPLEGEN_HIVE_FILES", str(tmp_path / "shipped"))
    return f"hive://127.0.0.1:{daemons.free_port()}/default"


def _refused_before_connecting(capsys, tmp_path, argv, *words):
    before = tree_digest(str(tmp_path))
    code, out, err = run_cli(capsys, *argv)
    line = _one_line_error(code, err)
    assert "cannot connect" not in line and "pyhive" not in line, line
    for word in words:
        assert word in line, (word, line)
    assert out == "" and tree_digest(str(tmp_path)) == before
    return line


# ---------------------------------------------------------------------------
# no server: refused before any connection
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("evil", EVIL)
def test_injection_in_names_is_refused_before_connecting(tmp_path, capsys, dead_url, evil):
    out = str(tmp_path / "o")
    holdout = ["--ratio", 0.5, "--seed", SEED]
    cases = [
        (["hive", "table", evil, str(tmp_path), "--hive-url", dead_url], "table name"),
        (["hive", "holdout", evil, "res", "--output", out, *holdout, "--hive-url", dead_url],
         "table name"),
        (["hive", "holdout", "t", evil, "--key", "id", *holdout, "--hive-url", dead_url],
         "result table name"),
        (["hive", "holdout", "t", "res", "--key", evil, *holdout, "--hive-url", dead_url],
         "key column"),
        (["hive", "holdout", "t", "res", "--key", "id", *holdout, "--stratify", evil,
          "--hive-url", dead_url], "stratify column"),
        (["hive", "kfold", "t", "res", "--key", "id", "--k", 3, "--groups", evil, "--seed",
          SEED, "--hive-url", dead_url], "groups column"),
        (["hive", "weighted", "t", "res", "--key", "id", "--weights", evil, "--size", 3,
          "--seed", SEED, "--hive-url", dead_url], "weights column"),
        (["hive", "register", evil, "--output", out, "--hive-url", dead_url], "table name"),
    ]
    for argv, words in cases:
        _refused_before_connecting(capsys, tmp_path, argv, "invalid", words)
    # a database name is one identifier; whitespace, which urlsplit would drop
    # silently (another database), is refused in the URL as a whole
    url = dead_url.rsplit("/", 1)[0] + "/" + evil
    words = "whitespace" if any(c.isspace() for c in evil) else \
        "name" if "." in evil else "invalid database name"
    _refused_before_connecting(capsys, tmp_path, ["hive", "holdout", "t", "res", "--key", "id",
                                                  *holdout, "--hive-url", url], words)


def test_an_interpreter_with_shell_syntax_is_refused_before_connecting(tmp_path, capsys,
                                                                       dead_url):
    for python in ("python3;rm -rf x", "python3 -c 1", "$(id)", "-python"):
        url = dead_url + "?python=" + python.replace(" ", "%20").replace(";", "%3B")
        _refused_before_connecting(capsys, tmp_path, [
            "hive", "holdout", "t", "res", "--key", "id", "--ratio", 0.5, "--seed", SEED,
            "--hive-url", url], "python=")


def test_a_script_name_is_not_a_path(tmp_path, capsys):
    for name in ("../../etc/passwd", "/etc/passwd", "holdout.hql", ""):
        _refused_before_connecting(capsys, tmp_path, ["hive", "script", name],
                                   "unknown script")


@pytest.mark.parametrize("table", ["--output", "--key"])
def test_bad_parameters_are_refused_before_connecting(tmp_path, capsys, dead_url, table):
    """A bad parameter is refused at once, on a row table before the
    aggregation over the key that a running server would do first."""
    where = [table, str(tmp_path / "o") if table == "--output" else "id"]
    cases = [(["holdout", "--ratio", 1.5], "ratio must be in (0, 1], got 1.5"),
             (["holdout", "--ratio", "nan"], "ratio"),
             (["holdout", "--ratio", 0.5, "--repeats", 0], "repeats"),
             (["kfold", "--k", 1], "k must be >= 2"),
             (["bootstrap", "--samples", 0], "samples must be >= 1"),
             (["weighted", "--weights", "w", "--size", 0], "size must be >= 1"),
             (["sample", "--udf", "holdout", "--param", "ratio=1;DROP"], "'1;DROP'"),
             (["sample", "--udf", "no_such_module:f"], "no_such_module"),
             (["sample", "--udf", "holdout"], "needs parameter 'ratio'")]
    for (command, *params), words in cases:
        _refused_before_connecting(capsys, tmp_path, [
            "hive", command, "t", "res", *where, *params, "--seed", SEED,
            "--hive-url", dead_url], words)


def test_damaged_matrix_metadata_and_run_manifest_are_refused(tmp_path, capsys, dead_url):
    base = tmp_path / "data"
    matrix = make(base, "m", rows=50, cols=3, block_size=16)
    run = str(base / "run")
    driver.generate(matrix, run, "holdout", {"ratio": 0.5}, SEED, runner="embedded")
    meta, manifest = os.path.join(matrix, "_matrix.json"), os.path.join(run, "_manifest.json")
    text = open(meta).read()
    open(meta, "w").write(text[:len(text) // 2])                    # cut short
    _refused_before_connecting(capsys, tmp_path, ["hive", "table", "t", matrix, "--hive-url",
                                                  dead_url], "corrupt matrix metadata",
                               "_matrix.json")
    open(meta, "w").write(text.replace('"rows": 50', '"rows": -5'))  # out of range
    _refused_before_connecting(capsys, tmp_path, ["hive", "table", "t", matrix, "--hive-url",
                                                  dead_url], "rows", matrix)
    text = open(manifest).read()
    open(manifest, "w").write(text.replace('"ratio": 0.5', '"ratio": 0.6'))   # edited
    _refused_before_connecting(capsys, tmp_path, ["hive", "register", "r", "--output", run,
                                                  "--hive-url", dead_url],
                               "damaged run manifest", "_manifest.json")


# ---------------------------------------------------------------------------
# against the real servers
# ---------------------------------------------------------------------------
def _tables(url):
    with hive_client.Client(url) as c:
        # Spark: (database, tableName, isTemporary); Apache Hive: (tab_name)
        return {str(row[1] if len(row) > 1 else row[0]) for row in c.execute("SHOW TABLES")}


@pytest.fixture(scope="module")
def odd_table(hive_server):
    """A row table with a map, a struct holding a map and an array of maps,
    and a canary table that no refused command may touch."""
    name = "odd_" + uuid.uuid4().hex[:8]
    with hive_client.Client(hive_server["url"]) as c:
        c.execute(f"CREATE TABLE {name} (id BIGINT, m MAP<STRING,BIGINT>, "
                  "s STRUCT<vals:MAP<STRING,BIGINT>>, a ARRAY<MAP<STRING,BIGINT>>, "
                  "w DOUBLE)", fetch=False)
        c.execute("CREATE TABLE IF NOT EXISTS canary (x INT)", fetch=False)
    return {"name": name, "url": hive_server["url"]}


@pytest.mark.hive
def test_a_missing_table_is_one_line(odd_table, tmp_path, capsys):
    url, missing = odd_table["url"], "no_such_" + uuid.uuid4().hex[:8]
    for where in (["--key", "id"], ["--output", str(tmp_path / "o")]):
        code, _, err = run_cli(capsys, "hive", "holdout", missing, "res_" + uuid.uuid4().hex[:6],
                               *where, "--ratio", 0.5, "--seed", SEED, "--hive-url", url)
        line = _one_line_error(code, err)
        assert missing in line, line
    assert not (tmp_path / "o").exists()


@pytest.mark.hive
def test_a_key_that_is_or_holds_a_map_is_refused(odd_table, capsys):
    url, table = odd_table["url"], odd_table["name"]
    result = "res_" + uuid.uuid4().hex[:6]
    for key in ("m", "s", "a"):
        code, _, err = run_cli(capsys, "hive", "holdout", table, result, "--key", key,
                               "--ratio", 0.5, "--seed", SEED, "--hive-url", url)
        line = _one_line_error(code, err)
        assert f"key column {key!r}" in line and "map" in line and "no stable text" in line, \
            line
    assert result not in _tables(url)


@pytest.mark.hive
@pytest.mark.parametrize("evil", ["x; DROP TABLE canary", "canary`; DROP TABLE canary; --"])
def test_injection_leaves_the_server_untouched(odd_table, capsys, evil):
    url, table = odd_table["url"], odd_table["name"]
    for argv in (["holdout", evil, "res", "--key", "id", "--ratio", 0.5],
                 ["holdout", table, evil, "--key", "id", "--ratio", 0.5],
                 ["holdout", table, "res", "--key", evil, "--ratio", 0.5],
                 ["weighted", table, "res", "--key", "id", "--weights", evil, "--size", 2]):
        code, _, err = run_cli(capsys, "hive", *argv, "--seed", SEED, "--hive-url", url)
        assert "invalid" in _one_line_error(code, err)
    assert "canary" in _tables(url)


@pytest.mark.hive
def test_a_damaged_matrix_directory_is_one_line_and_writes_nothing(hive_server, tmp_path,
                                                                  capsys):
    """A block table whose matrix lost the end of a part file after it was
    registered: the sampling run refuses it, naming the matrix, before the
    query, and writes nothing."""
    url = hive_server["url"]
    matrix = make(tmp_path / "data", "m", rows=200, cols=4, block_size=16)
    table = "blocks_" + uuid.uuid4().hex[:8]
    code, _, err = run_cli(capsys, "hive", "table", table, matrix, "--hive-url", url)
    assert code == 0, err
    part = os.path.join(matrix, "part-00000")
    data = open(part, "rb").read()
    open(part, "wb").write(data[: len(data) * 2 // 3])
    before = tree_digest(str(tmp_path))
    result = "res_" + uuid.uuid4().hex[:6]
    code, _, err = run_cli(capsys, "hive", "holdout", table, result, "--output",
                           tmp_path / "out", "--ratio", 0.5, "--seed", SEED, "--hive-url", url)
    line = _one_line_error(code, err)
    assert "part-00000" in line or matrix in line, line
    assert tree_digest(str(tmp_path)) == before
    assert result not in _tables(url)
