"""Every code block of docs/*.md runs as written (README.md's python blocks
are tests/test_layout.py's; docs/CLI.md is the command line's reference).

The convention, by a fenced block's info string (its language, then words;
docs/ARCHITECTURE.md, "Testing"):

* ``python`` runs in a fresh interpreter, ``sh``/``bash`` under ``bash -e``
  (``console``: its ``$ `` lines), with the venv's ``bin`` first on PATH;
* the blocks of one file that run run in order in one empty temporary
  directory (a per-file session): a block may use the files an earlier block
  of its file wrote, never its Python names;
* a marker word (``hadoop``, ``spark``, ``hive``) puts the block in that
  tier of the suite (tests/run.py); a file's blocks with one set of markers
  are one session, and every session is marked ``slow`` (it starts
  interpreters: ``make test`` runs it, ``make check`` does not);
* ``template`` is shown, not run (placeholders, the reader's cluster, a long
  run: the make target that runs it is named beside it): python must compile,
  shell must parse, and the make targets, ``samplegen`` subcommands and
  options, and bench scripts and options it names must exist;
* any other language, or none, is not code (a diagram, a listing, output,
  HiveQL shown for reading); a block without a language whose first line is
  a command is refused (label it).
"""
import contextlib
import io
import os
import re
import shlex
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")
RUN = ("python", "sh", "bash", "console")
MARKERS = ("hadoop", "spark", "hive")
BIN = os.path.dirname(sys.executable)
COMMAND = re.compile(r"^((samplegen|make|python3?|spark-submit|hdfs|beeline|export|eval)(\s|$)"
                     r"|\.venv/bin/\S+\s|[A-Z_]+=\S*[ ;])")
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")


class Block:
    def __init__(self, doc, line, info, code):
        self.doc, self.line, self.code = doc, line, code
        words = info.split()
        self.lang = words[0] if words else ""
        self.words = set(words[1:])
        self.markers = tuple(m for m in MARKERS if m in self.words)
        self.template = "template" in self.words
        self.runs = self.lang in RUN and not self.template

    def __repr__(self):
        return f"{self.doc}:{self.line}"

    def script(self):
        """The code to run (``console``: its ``$ `` lines)."""
        if self.lang != "console":
            return self.code
        return "\n".join(line[2:] for line in self.code.splitlines() if line.startswith("$ "))


def blocks(doc):
    """The fenced code blocks of docs/*doc*, in order."""
    with open(os.path.join(DOCS, doc), encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, i = [], 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.groups()
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence)
                                      and not lines[j].strip().strip(fence[0])):
            j += 1
        body = [ln[len(indent):] if ln.startswith(indent) else ln for ln in lines[i + 1:j]]
        out.append(Block(doc, i + 1, info.strip(), "\n".join(body) + "\n"))
        i = j + 1
    return out


def docs():
    return sorted(name for name in os.listdir(DOCS) if name.endswith(".md"))


def _sessions():
    """One parameter per file and set of markers: the blocks that run there."""
    params = []
    for doc in docs():
        groups = {}
        for block in blocks(doc):
            if block.runs:
                groups.setdefault(block.markers, []).append(block)
        for markers, group in groups.items():
            params.append(pytest.param(group, id="-".join((doc,) + markers),
                                       marks=[getattr(pytest.mark, m)
                                              for m in sorted(set(markers) | {"slow"})]))
    return params


def _env():
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""),
               MPLBACKEND="Agg", PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTHONPATH", None)
    return env


@pytest.mark.parametrize("session", _sessions())
def test_doc_blocks_run_as_written(session, tmp_path):
    """A file's blocks, in order, in one empty directory."""
    work = tmp_path / "session"
    work.mkdir()
    for block in session:
        if block.lang == "python":
            script = tmp_path / f"block-{block.line}.py"
            script.write_text(block.script())
            argv = [sys.executable, str(script)]
        else:
            argv = ["bash", "-e", "-o", "pipefail", "-c", block.script()]
        proc = subprocess.run(argv, cwd=work, env=_env(), capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, (
            f"docs/{block!r} ({block.lang}) failed with exit status {proc.returncode}:\n"
            f"{block.code}\n--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n"
            f"{proc.stderr[-3000:]}")


def test_the_harness_finds_the_blocks():
    found = {doc: blocks(doc) for doc in docs()}
    assert sum(b.runs for bs in found.values() for b in bs) >= 8
    assert any(b.template for bs in found.values() for b in bs)


@pytest.mark.parametrize("doc", docs())
def test_every_command_block_is_labelled(doc):
    """A block without a language is a listing; one that starts with a
    command needs its label (``sh``, ``sh template``, ...)."""
    unlabeled = [b for b in blocks(doc) if not b.lang and COMMAND.match(b.code.lstrip())]
    assert not unlabeled, f"label these blocks of docs/{doc}: {unlabeled}"


# -- templates -------------------------------------------------------------------------------
def _make_targets():
    with open(os.path.join(ROOT, "Makefile")) as f:
        return set(re.findall(r"^([A-Za-z0-9_.-]+):", f.read(), re.M))


def _help(words):
    """``samplegen WORDS --help`` (in this process): its text."""
    from samplegen import cli
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        cli.main([*words, "--help"])
    return out.getvalue()


def _subcommands(text):
    """The subcommands a help text lists under COMMAND."""
    if "COMMAND" not in text:
        return set()
    section = text.split("COMMAND", 2)[-1]
    return set(re.findall(r"^    ([a-z][a-z0-9-]*)(?:\s|$)", section, re.M))


def _commands(code):
    """The shell commands of *code*: continuation lines joined, comments and
    the words before the command (``VAR=value``) dropped, as word lists."""
    code = re.sub(r"\\\n", " ", code)
    out = []
    for line in code.splitlines():
        line = line.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        for part in re.split(r"\s*(?:&&|\|\||;|\|)\s*", line):
            try:
                words = shlex.split(part)
            except ValueError:
                words = part.split()
            while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
                words = words[1:]
            if words:
                out.append(words)
    return out


def _options(words):
    return {w.strip("[]").split("=", 1)[0] for w in words
            if w.strip("[").startswith("--") and len(w.strip("[]")) > 2}


def check_command(words, targets):
    """Why the command *words* of a template would not run as named (None: it would)."""
    name = os.path.basename(words[0])
    if name == "make":
        wanted = [w.strip("[]") for w in words[1:] if not w.startswith("-") and "=" not in w]
        missing = [w for w in wanted if w not in targets]
        return f"make targets {missing} are not in the Makefile" if missing else None
    if name == "samplegen":
        path, text = [], _help([])
        for w in words[1:]:
            if w not in _subcommands(text):
                break
            path.append(w)
            text = _help(path)
        if not path:
            return f"{words[1:2]} is not a samplegen command"
        unknown = sorted(o for o in _options(words) if o not in text)
        return f"samplegen {' '.join(path)} has no options {unknown}" if unknown else None
    if re.match(r"^(\.venv/bin/)?python3?$", words[0]) and len(words) > 1 \
            and words[1].startswith("bench/"):
        script = os.path.join(ROOT, words[1])
        if not os.path.exists(script):
            return f"{words[1]} does not exist"
        with open(script) as f:
            source = f.read()
        unknown = sorted(o for o in _options(words[2:]) if f'"{o}"' not in source)
        return f"{words[1]} has no options {unknown}" if unknown else None
    return None


def _templates():
    return [pytest.param(b, id=repr(b)) for doc in docs() for b in blocks(doc) if b.template]


@pytest.mark.parametrize("block", _templates())
def test_templates_parse_and_name_what_exists(block):
    if block.lang == "python":
        compile(block.code, repr(block), "exec")
    elif block.lang in ("sh", "bash", "console"):
        proc = subprocess.run(["bash", "-n"], input=block.script(), capture_output=True,
                              text=True)
        assert proc.returncode == 0, f"docs/{block!r}: {proc.stderr}"
        targets = _make_targets()
        problems = [why for words in _commands(block.script())
                    if (why := check_command(words, targets))]
        assert not problems, f"docs/{block!r}: {problems}"


def test_the_template_checks_catch_what_is_missing():
    targets = {"bench-mr"}
    assert check_command(["make", "bench-mr", "QUICK=1"], targets) is None
    assert "bench-xyz" in check_command(["make", "bench-xyz"], targets)
    assert check_command(shlex.split("samplegen holdout SRC DEST --ratio 0.8 [--seed 7]"),
                         targets) is None
    assert "--no-such" in check_command(["samplegen", "kfold", "A", "B", "--no-such"], targets)
    assert check_command(["samplegen", "tbs", "run", "B", "S", "--size", "9"], targets) is None
    assert "--update-doc" in check_command(
        [".venv/bin/python", "bench/bench_mr.py", "--update-doc", "x"], targets)
    assert _commands("A=1 make x \\\n  Y=2   # c\nsamplegen a && hdfs b\n") == [
        ["make", "x", "Y=2"], ["samplegen", "a"], ["hdfs", "b"]]


def test_the_shipped_zip_runs_the_command_line_on_its_own(tmp_path):
    """docs/SPARK.md's spark-submit recipe: the driver imports samplegen from
    dist/samplegen.zip (first on its path; on a node in cluster deploy mode,
    the only copy), so the zip holds the command line and ``__main__``.  Here
    without site (no editable install's finder): only the zip and numpy's
    directory on the path."""
    import numpy

    from samplegen.jobs.package import build_zip
    zip_path = build_zip(str(tmp_path / "dist" / "samplegen.zip"))
    deps = os.path.dirname(os.path.dirname(numpy.__file__))
    code = ("import runpy, sys\n"
            f"sys.path[:0] = [{zip_path!r}]; sys.path.append({deps!r})\n"
            "import samplegen\n"
            f"assert samplegen.__file__.startswith({zip_path!r}), samplegen.__file__\n"
            "sys.argv = ['samplegen', 'make-matrix', 'm', '--rows', '20', '--cols', '3',\n"
            "            '--block-size', '8', '--seed', '1', '-q']\n"
            "runpy.run_module('samplegen', run_name='__main__')\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, env={k: v for k, v in _env().items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "m" / "_matrix.json").exists()
