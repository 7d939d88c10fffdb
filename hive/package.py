"""The zip that Hive TRANSFORM scripts run from: ``samplegen-<hash>.zip``.

It holds the project's packages (:func:`jobs.package.build_zip`), a root
``__main__.py`` so that ``python samplegen-<hash>.zip SUBCOMMAND ...`` runs
:mod:`hive.transform`, and optionally the module of a user's sampling-UDF.

The name carries a hash of the content.  HiveServer2 sessions and, above
all, the Spark Thrift Server keep every added file for the server's lifetime
under its base name; adding a *different* file under a name already added
makes every later task of that server fail.  A content-addressed name makes
re-adding the same code a no-op and new code a new file.  A zip already
there under its name is reused only if its content still has that hash
(:func:`has_named_content`); a damaged one is written again.

``__main__`` also puts any directory ``samplegen-deps*`` found in the task's
working directory on ``sys.path``: that is where ``ADD ARCHIVE
.../samplegen-deps-<tag>.tar.gz`` unpacks numpy for nodes whose Python lacks
it (see docs/HIVE.md).
"""
import hashlib
import importlib.util
import os
import shutil
import tempfile
import zipfile

from samplegen.jobs.package import build_zip
from samplegen.udfs.errors import ParameterError

MAIN = '''\
"""Entry point of the samplegen zip on Hive / Spark Thrift Server nodes."""
import os
import sys

for _name in sorted(os.listdir(".")):
    if _name.startswith("samplegen-deps") and os.path.isdir(_name):
        sys.path.insert(1, os.path.abspath(_name))

from samplegen.hive.transform import main  # noqa: E402

sys.exit(main())
'''
_DATE = (2020, 1, 1, 0, 0, 0)
_OWN = ("samplegen",)


def _add(zf, arcname, data):
    info = zipfile.ZipInfo(arcname, date_time=_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    zf.writestr(info, data)


def user_module_files(udf_spec):
    """``[(arcname, path)]`` of the module of a ``module:function`` UDF that
    the project zip does not contain (a single file or a package)."""
    if ":" not in udf_spec:
        return []
    module = udf_spec.split(":", 1)[0]
    top = module.split(".")[0]
    if top in _OWN:
        return []
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.origin or spec.origin in ("built-in", "frozen"):
        raise ParameterError(f"cannot ship UDF module {module!r} to Hive: it is not importable "
                             "here")
    if "site-packages" in spec.origin or "dist-packages" in spec.origin:
        return []  # installed: must be installed on the nodes as well (docs/HIVE.md)
    if spec.submodule_search_locations:
        root = list(spec.submodule_search_locations)[0]
        files = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(".py"):
                    full = os.path.join(dirpath, name)
                    files.append((os.path.join(top, os.path.relpath(full, root)), full))
        return files
    return [(top + ".py", spec.origin)]


def content_hash(data):
    """The hash in the name of a zip of bytes *data*: the first 16 hex
    digits of their SHA-256."""
    return hashlib.sha256(data).hexdigest()[:16]


def has_named_content(name, data):
    """Whether *data* are the bytes that the zip name *name*
    (``samplegen-<hash>.zip``) promises."""
    return name == f"samplegen-{content_hash(data)}.zip"


def build_hive_zip(directory, udf_spec=None):
    """Write ``samplegen-<hash>.zip`` into local *directory*, unless a file
    of that name with that content is there already (one whose content does
    not match its name is replaced); returns its path."""
    os.makedirs(directory, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="samplegen-zip-") as tmp:
        base = build_zip(os.path.join(tmp, "base.zip"))
        out = os.path.join(tmp, "out.zip")
        with zipfile.ZipFile(base) as src, zipfile.ZipFile(out, "w") as dst:
            for info in src.infolist():
                _add(dst, info.filename, src.read(info))
            _add(dst, "__main__.py", MAIN)
            for arcname, full in user_module_files(udf_spec or ""):
                with open(full, "rb") as f:
                    _add(dst, arcname, f.read())
        with open(out, "rb") as f:
            digest = content_hash(f.read())
        path = os.path.join(directory, f"samplegen-{digest}.zip")
        if not _intact(path):
            staged = path + ".tmp-" + digest
            shutil.copyfile(out, staged)
            os.replace(staged, path)
    return path


def _intact(path):
    """Whether the local file *path* exists and holds what its name promises."""
    try:
        with open(path, "rb") as f:
            return has_named_content(os.path.basename(path), f.read())
    except FileNotFoundError:
        return False
