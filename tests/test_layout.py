"""The installed shape of samplegen: one top-level name, its subpackages,
and documentation examples that run as written."""
import ast
import os
import re
import subprocess
import sys
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCES = ("samplegen", "udfs", "jobs", "hive", "tbs", "tests", "bench")
OLD_NAMES = {"udfs", "jobs", "hive", "tbs"}


def _python_files():
    for top in SOURCES:
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            yield from (os.path.join(dirpath, f) for f in filenames if f.endswith(".py"))


def test_code_imports_samplegen_never_the_folders_by_their_own_names():
    """Every import of the project goes through ``samplegen.``: a bare
    ``import jobs`` would load a second copy of a module under another name
    (and is a name other distributions use)."""
    bad = []
    for path in _python_files():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else []
            bad += [f"{os.path.relpath(path, ROOT)}:{node.lineno} {n}" for n in names
                    if n and n.split(".")[0] in OLD_NAMES]
    assert not bad, bad


def test_import_samplegen_gives_the_public_api():
    import numpy as np

    import samplegen
    X = np.arange(40.0).reshape(20, 2)
    s = samplegen.holdout(X, ratio=0.5, seed=3)
    assert s.names == ["train-0", "test-0"]
    both = np.sort(np.concatenate([s.indices("train-0"), s.indices("test-0")]))
    assert np.array_equal(both, np.arange(20))        # every row once: ratio + (1 - ratio) = 1
    assert issubclass(samplegen.ParameterError, samplegen.SamplegenError)
    assert samplegen.tbs.RTBS is not None and samplegen.__version__
    with pytest.raises(AttributeError):
        _ = samplegen.no_such_name


def _readme_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, re.S)


def _readme_block_params():
    """One parameter per ``python`` block of the README; a block that starts
    Spark is marked ``spark`` (the markers say which service a test starts)."""
    return [pytest.param(code, id=f"block{i}",
                         marks=[pytest.mark.slow] + ([pytest.mark.spark]
                                                     if "pyspark" in code else []))
            for i, code in enumerate(_readme_blocks())]


def test_the_readme_has_its_python_examples():
    assert len(_readme_blocks()) >= 3


@pytest.mark.parametrize("code", _readme_block_params())
def test_readme_python_examples_run_as_written(tmp_path, code):
    """Each ``python`` block of the README runs in a fresh interpreter, in an
    empty directory (sklearn for the time-biased example is a test extra)."""
    script = tmp_path / "block.py"
    script.write_text(code)
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"README python block:\n{code}\n{proc.stderr[-2000:]}"


def _readme_fences():
    """``(info string, code)`` of every fenced block of the README."""
    with open(os.path.join(ROOT, "README.md")) as f:
        return re.findall(r"^```([^\n]*)\n(.*?)^```", f.read(), re.S | re.M)


def test_the_readme_stays_short():
    """The README is the front door; the reference is docs/CLI.md."""
    with open(os.path.join(ROOT, "README.md")) as f:
        assert len(f.read().splitlines()) < 200


@pytest.mark.slow
def test_readme_shell_examples_run_as_written(tmp_path):
    """The README's ``sh`` blocks, in order, in one empty directory (a later
    block uses the files an earlier one wrote), with this environment's
    ``samplegen`` and ``python`` first on PATH; ``sh template`` blocks
    (installs, make targets, a cluster) only parse."""
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep
               + os.environ.get("PATH", ""))
    env.pop("PYTHONPATH", None)
    ran = 0
    for info, code in _readme_fences():
        words = info.split()
        if not words or words[0] not in ("sh", "bash"):
            continue
        argv = ["bash", "-n"] if "template" in words else ["bash", "-e", "-o", "pipefail"]
        proc = subprocess.run(argv, input=code, cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=300)
        assert proc.returncode == 0, f"README {info} block:\n{code}\n{proc.stderr[-2000:]}"
        ran += "template" not in words
    assert ran >= 3


@pytest.mark.slow
def test_the_wheel_installs_one_top_level_name_and_ships_whole(tmp_path):
    """A wheel built from the checkout, installed into a fresh virtual
    environment (its dependencies borrowed from this one, not samplegen):
    ``import samplegen`` works outside the checkout, the folders are its
    subpackages only, the Hive scripts are inside, and the node zip built
    from the installed copy holds every subpackage."""
    import shutil
    source, wheels = tmp_path / "source", tmp_path / "wheels"   # building writes build/
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "work", "build", "dist", "__pycache__", "*.egg-info", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                    "-w", str(wheels), str(source)], check=True, capture_output=True, timeout=300)
    wheel, = wheels.iterdir()
    tops = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"samplegen"}
    env_dir = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], check=True,
                   timeout=120)
    python = str(env_dir / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps",
                    str(wheel)], check=True, capture_output=True, timeout=300)
    site = subprocess.run([python, "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    import numpy
    deps = os.path.dirname(os.path.dirname(numpy.__file__))
    with open(os.path.join(site, "zz_deps.pth"), "w") as f:
        f.write(deps + "\n")          # numpy, mrjob ...; this environment's .pth files stay out
    check = (
        "import os, zipfile, samplegen\n"
        "from samplegen.jobs.package import build_zip\n"
        "assert samplegen.__file__.startswith(%r), samplegen.__file__\n"
        "s = samplegen.bootstrap(100, 2, seed=1, size=50)\n"
        "assert [len(s.indices(n)) for n in s.names] == [50, 50]\n"
        "import samplegen.hive\n"
        "assert os.path.exists(os.path.join(os.path.dirname(samplegen.hive.__file__), "
        "'holdout.hql'))\n"
        "names = set(zipfile.ZipFile(build_zip('node.zip')).namelist())\n"
        "assert {'samplegen/__init__.py', 'samplegen/udfs/rng.py', 'samplegen/jobs/phases.py',\n"
        "        'samplegen/hive/holdout.hql', 'samplegen/tbs/stream/task.py'} <= names, names\n"
        "for name in ('jobs', 'udfs', 'hive', 'tbs'):\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ImportError:\n"
        "        continue\n"
        "    raise AssertionError(name + ' is importable at the top level')\n"
    ) % site
    proc = subprocess.run([python, "-c", check], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={k: v for k, v in os.environ.items()
                                            if k not in ("PYTHONPATH", "VIRTUAL_ENV")})
    assert proc.returncode == 0, proc.stderr[-3000:]


def _stage_installed_tree(dest):
    """samplegen as a wheel lays it out (samplegen/udfs, samplegen/jobs, ...),
    for tools that read packages from disk rather than through the editable
    install's import hook."""
    import shutil
    root = dest / "samplegen"
    root.mkdir()
    shutil.copy(os.path.join(ROOT, "samplegen", "__init__.py"), root)
    for top in os.listdir(os.path.join(ROOT, "samplegen")):
        if top.endswith(".py"):
            shutil.copy(os.path.join(ROOT, "samplegen", top), root)
    for name in OLD_NAMES:
        shutil.copytree(os.path.join(ROOT, name), root / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.hql"))
    return dest


def test_import_contracts_hold(tmp_path):
    """The layers of .importlinter (command line on top, then Hive and the
    time-biased samplers, then jobs, then udfs; samplers and UDFs free of
    engines) hold for every import, at module level or inside a function:
    a cycle between packages fails here."""
    staged = _stage_installed_tree(tmp_path)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "lint-imports"),
                           "--config", os.path.join(ROOT, ".importlinter"), "--no-cache"],
                          cwd=staged, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(staged)})
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


def test_code_passes_the_linter():
    """One style (ruff.toml: line length, imports, pyflakes, bugbear) over the
    product, the tests and the benchmarks."""
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ruff"), "check",
                           "--no-cache", "--output-format", "concise", ROOT],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]


@pytest.mark.slow
def test_signatures_carry_no_type_hints():
    """One policy on type hints: function signatures carry none (docstrings
    say what a parameter is); NamedTuple and dataclass fields, which need
    them, are the only annotations."""
    found = []
    for path in _python_files():
        with open(path) as f:
            tree = ast.parse(f.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = node.args
                args = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
                if node.returns is not None or any(x.annotation is not None for x in args):
                    found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno} {node.name}")
    assert not found, found
