"""``samplegen hive ...`` and ``--runner hive`` check every value they are
given -- ``--output``, the URL's ``files=`` and ``python=`` -- before they
connect to HiveServer2 and before they write anything (``--print`` too: the
zip is shipped only once everything passed).  No server needed: the URL
points where nothing listens, so a check that came after the connection
attempt would report the connection instead."""
import os
import urllib.parse
import uuid

import pytest

from samplegen.hive import engine, tables
from samplegen.udfs.errors import OutputError, ParameterError

from .conftest import make, run_cli
from .conftest import one_line_error as _one_line_error

DEAD = "hive://127.0.0.1:1/default"


@pytest.fixture(autouse=True)
def _no_hive_env(monkeypatch, tmp_path):
    monkeypatch.delenv("SAMPLEGEN_HIVE_URL", raising=False)
    monkeypatch.delenv("SAMPLEGEN_HIVE_PASSWORD", raising=False)
    # never ~/.cache/samplegen/hive in tests: a directory that does not exist
    # (yet); anything that created it would show in _paths(tmp_path)
    monkeypatch.setenv("SAMPLEGEN_HIVE_FILES", str(tmp_path / "shipped"))


def _url(**query):
    return DEAD + ("?" + urllib.parse.urlencode(query) if query else "")


def _paths(root):
    """Every file *and directory* under root (an empty directory counts)."""
    out = set()
    for folder, dirs, files in os.walk(root):
        out.update(os.path.relpath(os.path.join(folder, n), root) for n in dirs + files)
    return out


def _not_the_connection(line):
    """The error came before any connection attempt (and pyhive, which the
    attempt imports, need not be installed)."""
    assert "cannot connect" not in line and "pyhive" not in line, line


def _hive_holdout(capsys, output, url, *extra):
    return run_cli(capsys, "hive", "holdout", "blocks", "res", "--output", output, "--ratio", 0.5,
                   "--seed", 1, "--hive-url", url, *extra)


HOSTILE_FILES = [
    ("quote and DROP TABLE", "z'; DROP TABLE canary; --", "cannot be used in HiveQL"),
    ("double quote", 'z"x', "cannot be used in HiveQL"),
    ("space", "z x", "cannot be used in HiveQL"),
    ("newline", "z\nDROP TABLE canary", "cannot be used in HiveQL"),
    ("control character", "z\x07x", "cannot be used in HiveQL"),
    ("dollar", "${env:HOME}", "cannot be used in HiveQL"),
    ("no parent", "missing/hive", "parent directory"),
]


@pytest.mark.parametrize("print_only", [True, False], ids=["print", "run"])
@pytest.mark.parametrize("label,name,message", HOSTILE_FILES, ids=[c[0] for c in HOSTILE_FILES])
def test_hostile_files_dir_is_refused_before_connecting_and_creates_nothing(
        tmp_path, capsys, label, name, message, print_only):
    files = str(tmp_path / "files") + "/" + name
    (tmp_path / "files").mkdir()
    before = _paths(tmp_path)
    code, out, err = _hive_holdout(capsys, tmp_path / "out", _url(files=files),
                                   *(["--print"] if print_only else []))
    line = _one_line_error(code, err)
    assert "files= in --hive-url" in line and message in line, line
    _not_the_connection(line)
    assert out == ""
    assert not os.path.lexists(files)
    assert _paths(tmp_path) == before  # no files dir, no zip, no run directory


def test_files_dir_that_is_a_file_is_refused(tmp_path, capsys):
    (tmp_path / "plain").write_text("x")
    before = _paths(tmp_path)
    code, _, err = _hive_holdout(capsys, tmp_path / "out", _url(files=str(tmp_path / "plain")),
                                 "--print")
    line = _one_line_error(code, err)
    assert "files= in --hive-url" in line and "is not a directory" in line, line
    assert _paths(tmp_path) == before and (tmp_path / "plain").read_text() == "x"


def test_files_dir_from_the_environment_is_checked_too(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SAMPLEGEN_HIVE_FILES", str(tmp_path / "a'b"))
    code, _, err = _hive_holdout(capsys, tmp_path / "out", DEAD, "--print")
    line = _one_line_error(code, err)
    assert "$SAMPLEGEN_HIVE_FILES" in line and "cannot be used in HiveQL" in line, line
    assert _paths(tmp_path) == set()


BAD_PYTHON = [
    ("space and option", "python3 -c import os"),
    ("quote", "python3'"),
    ("semicolon", "python3;rm"),
    ("leading dash", "-c"),
    ("assignment", "X=1"),
    ("newline", "python3\nrm"),
    ("dollar", "$PYTHON"),
]


@pytest.mark.parametrize("print_only", [True, False], ids=["print", "run"])
@pytest.mark.parametrize("label,python", BAD_PYTHON, ids=[c[0] for c in BAD_PYTHON])
def test_bad_python_interpreter_is_refused_before_connecting(tmp_path, capsys, label, python,
                                                             print_only):
    code, out, err = _hive_holdout(capsys, tmp_path / "out", _url(python=python),
                                   *(["--print"] if print_only else []))
    line = _one_line_error(code, err)
    assert "python= in --hive-url" in line and "must be a program name or path" in line, line
    _not_the_connection(line)
    assert out == "" and _paths(tmp_path) == set()


def _bad_outputs(tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("x")
    (tmp_path / "afile").write_text("x")
    return [
        (str(tmp_path / "o'; DROP TABLE canary; --"), "cannot be used in HiveQL"),
        (str(tmp_path / "o p"), "cannot be used in HiveQL"),
        (str(tmp_path / "o\rp"), "cannot be used in HiveQL"),
        (str(tmp_path / "missing" / "o"), "parent directory"),
        (str(tmp_path / "afile"), "is not a directory"),
        (str(tmp_path / "full"), "is not empty (use --overwrite"),
        ("/", "not a root"),
    ]


@pytest.mark.parametrize("print_only", [True, False], ids=["print", "run"])
def test_bad_output_is_refused_before_connecting_and_writes_nothing(tmp_path, capsys,
                                                                   print_only):
    for output, message in _bad_outputs(tmp_path):
        before = _paths(tmp_path)
        code, out, err = _hive_holdout(capsys, output, DEAD, *(["--print"] if print_only else []))
        line = _one_line_error(code, err)
        assert "--output" in line and message in line, (output, line)
        _not_the_connection(line)
        assert out == "" and _paths(tmp_path) == before, output


def test_output_is_checked_before_the_connection(tmp_path, capsys):
    """The order: with a bad --output *and* a server that is not there, the
    error is the --output; with a good --output, the same command reaches
    the connection (which fails) -- and still writes nothing."""
    code, _, err = _hive_holdout(capsys, tmp_path / "missing" / "out", DEAD)
    line = _one_line_error(code, err)
    assert "--output" in line and "parent directory" in line, line
    _not_the_connection(line)

    code, _, err = _hive_holdout(capsys, tmp_path / "out", DEAD)
    line = _one_line_error(code, err)
    assert "cannot connect to HiveServer2 at 127.0.0.1:1" in line or "pyhive" in line, line
    assert _paths(tmp_path) == set()  # a dead server: no run directory, no zip


def test_overwrite_lets_a_non_empty_output_through_to_the_connection(tmp_path, capsys):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "old").write_text("x")
    code, _, err = _hive_holdout(capsys, tmp_path / "out", DEAD, "--overwrite")
    line = _one_line_error(code, err)
    assert "--output" not in line and ("cannot connect" in line or "pyhive" in line), line
    assert _paths(tmp_path) == {"out", os.path.join("out", "old")}


def test_runner_hive_checks_python_and_files_before_connecting(tmp_path, capsys):
    """``samplegen holdout ... --runner hive`` reads the same settings: a
    hostile files= or python= is refused before the connection, and the run
    leaves nothing behind (no staging directory, no files directory)."""
    src = make(tmp_path, "in", rows=100, cols=4, block_size=32)
    for url, what in [(_url(files=str(tmp_path / "z'; DROP TABLE canary; --")), "files="),
                      (_url(python="python3 -c x"), "python=")]:
        before = _paths(tmp_path)
        code, _, err = run_cli(capsys, "holdout", src, tmp_path / "out", "--ratio", 0.5,
                               "--seed", 1, "--runner", "hive", "--hive-url", url)
        line = _one_line_error(code, err)
        assert f"{what} in --hive-url" in line, line
        _not_the_connection(line)
        assert _paths(tmp_path) == before


def test_settings_check_without_creating(tmp_path):
    """The checks themselves: values, messages, and nothing on disk."""
    ok = engine.settings({"hive_url": _url(files=str(tmp_path / "new"), python="/usr/bin/python3")})
    assert ok["files"] == str(tmp_path / "new") and ok["python"] == "/usr/bin/python3"
    assert not (tmp_path / "new").exists()
    with pytest.raises(ParameterError, match="records must be chunks or rows"):
        engine.settings({"hive_url": DEAD, "hive_records": "lines"})
    with pytest.raises(ParameterError, match="hive_python"):
        engine.settings({"hive_url": DEAD, "hive_python": "python3 -i"})
    with pytest.raises(ParameterError, match="hive_files"):
        engine.settings({"hive_url": DEAD, "hive_files": str(tmp_path / "no" / "such")})
    assert engine.check_files("hdfs://nn:8020/apps/samplegen") == "hdfs://nn:8020/apps/samplegen"
    with pytest.raises(ParameterError):
        engine.check_files("hdfs://nn:8020/apps/x'y")
    assert tables.check_output(str(tmp_path / "run")) == str(tmp_path / "run")
    with pytest.raises(OutputError, match="parent directory"):
        tables.check_output(str(tmp_path / "a" / "b"))
    assert _paths(tmp_path) == set()


@pytest.mark.hive
def test_print_ships_the_zip_only_after_the_whole_query_is_checked(tmp_path, capsys,
                                                                  hive_server):
    """Past the connection, --print still writes nothing until the query
    is checked: a bad UDF parameter (on a real server, over a real block table) is
    refused with the zip unbuilt; a good one prints the query and ships the
    zip it names."""
    src = make(tmp_path, "in", rows=100, cols=4, block_size=32)
    table = "blocks_" + uuid.uuid4().hex[:8]
    assert run_cli(capsys, "hive", "table", table, src, "--hive-url", hive_server["url"])[0] == 0
    files = tmp_path / "files"
    url = hive_server["url"] + "?" + urllib.parse.urlencode({"files": str(files)})
    base = ["hive", "sample", table, "res_" + uuid.uuid4().hex[:8], "--output", tmp_path / "out",
            "--seed", 1,
            "--hive-url", url, "--udf", "samplegen.udfs.examples:bernoulli", "--print"]
    before = _paths(tmp_path)
    code, out, err = run_cli(capsys, *base, "--param", "p=0.5", "--param", "note=a b")
    line = _one_line_error(code, err)
    assert "cannot be passed to a TRANSFORM script" in line, line
    assert out == "" and not files.exists() and _paths(tmp_path) == before

    code, out, err = run_cli(capsys, *base, "--param", "p=0.5")
    assert code == 0, err
    shipped = os.listdir(files)
    assert len(shipped) == 1 and shipped[0].startswith("samplegen-")
    assert f"ADD FILE {files}/{shipped[0]}" in out and engine.PENDING_ZIP not in out
    assert not (tmp_path / "out").exists()


def test_dot_dot_is_resolved_locally_and_refused_in_hadoop_uris(tmp_path):
    """A local ``a/../b`` is the directory it resolves to; in a Hadoop URI,
    which the server resolves, ``..`` is refused."""
    from samplegen.hive.engine import check_files
    from samplegen.hive.tables import check_output
    (tmp_path / "a").mkdir()
    assert check_output(str(tmp_path / "a" / ".." / "out")) == str(tmp_path / "out")
    assert check_files(str(tmp_path / "a" / ".." / "files")) == str(tmp_path / "files")
    with pytest.raises(OutputError, match="without '..'"):
        check_output("hdfs:///runs/../etc/out")
    with pytest.raises(ParameterError, match="without '..'"):
        check_files("hdfs:///user/../tmp/files")
