"""Zip the project's packages for cluster nodes (mrjob py_files, Spark
--py-files, Hive ADD FILE).  ``python -m samplegen.jobs.package
dist/samplegen.zip`` is what ``make dist`` runs.  The nodes still need numpy (and mrjob for the
MapReduce jobs): see README, "Running on a Hadoop cluster"."""
import importlib.util
import os
import sys
import zipfile

#: the subpackages of samplegen shipped to nodes
PACKAGES = ("udfs", "jobs", "hive", "tbs")
_DATE = (2020, 1, 1, 0, 0, 0)


def _add(zf, arcname, full):
    info = zipfile.ZipInfo(arcname, date_time=_DATE)
    info.compress_type = zipfile.ZIP_DEFLATED
    with open(full, "rb") as f:
        zf.writestr(info, f.read())


def _tree(zf, base, arcbase):
    """Add the .py and .hql files below directory *base* as *arcbase*/..."""
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in sorted(filenames):
            if name.endswith((".py", ".hql")):
                full = os.path.join(dirpath, name)
                _add(zf, "/".join(filter(None, [arcbase, os.path.relpath(full, base)
                                                .replace(os.sep, "/")])), full)


def _own_files():
    """``[(directory, arcname)]`` of samplegen as installed here (an editable
    checkout or a wheel): its own modules (``None``: ``__init__``, the command
    line and ``__main__``, which ``spark-submit`` runs, ...) and every
    subpackage."""
    spec = importlib.util.find_spec("samplegen")
    places = [(os.path.dirname(spec.origin), None)]
    for name in PACKAGES:
        sub = importlib.util.find_spec(f"samplegen.{name}")
        places.append((list(sub.submodule_search_locations)[0], f"samplegen/{name}"))
    return places


def _own_archive():
    """The zip samplegen is imported from, or None when it is a directory."""
    import zipimport
    loader = importlib.util.find_spec("samplegen").loader
    return loader.archive if isinstance(loader, zipimport.zipimporter) else None


def build_zip(path, packages=None, root=None):
    """Write a zip importable via zipimport: by default samplegen itself
    (its own modules and its subpackages, wherever they are installed: what
    a task needs, and the command line for a driver that ``spark-submit``
    starts from the zip); else the modules or packages *packages* found
    under *root* (a user's sampling-UDF), at the top of the zip."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        archive = _own_archive() if packages is None else None
        if archive is not None:  # running from a shipped zip (spark-submit --py-files)
            with zipfile.ZipFile(archive) as src:
                for info in src.infolist():
                    if info.filename.startswith("samplegen/"):
                        zf.writestr(info, src.read(info))
        elif packages is None:
            for directory, arcbase in _own_files():
                if arcbase is None:   # a driver started from the zip runs the command line
                    for name in sorted(os.listdir(directory)):
                        if name.endswith(".py"):
                            _add(zf, f"samplegen/{name}", os.path.join(directory, name))
                else:
                    _tree(zf, directory, arcbase)
        else:
            for package in packages:
                base = os.path.join(root, package)
                if os.path.isfile(base + ".py"):
                    _add(zf, package + ".py", base + ".py")
                elif os.path.isdir(base):
                    _tree(zf, base, package)
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    print(build_zip(sys.argv[1] if len(sys.argv) > 1 else "dist/samplegen.zip"))
