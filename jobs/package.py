"""Zip the project's packages for cluster nodes (mrjob py_files, Spark
--py-files, Hive ADD FILE).  ``python -m jobs.package dist/samplegen.zip``
is what ``make dist`` runs.  The nodes still need numpy (and mrjob for the
MapReduce jobs): see README, "Running on a Hadoop cluster"."""
import os
import sys
import zipfile

PACKAGES = ("udfs", "jobs", "hive", "tbs")


def build_zip(path, packages=PACKAGES, root=None):
    """Write a zip of the packages' .py files (importable via zipimport).
    *packages* are directories (packages) or module names under *root*
    (default: the project)."""
    root = root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in packages:
            base = os.path.join(root, package)
            if os.path.isfile(base + ".py"):
                with open(base + ".py", "rb") as f:
                    info = zipfile.ZipInfo(package + ".py", date_time=(2020, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, f.read())
                continue
            if not os.path.isdir(base):
                continue
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
                for name in sorted(filenames):
                    if name.endswith((".py", ".hql")):
                        full = os.path.join(dirpath, name)
                        info = zipfile.ZipInfo(os.path.relpath(full, root),
                                               date_time=(2020, 1, 1, 0, 0, 0))
                        info.compress_type = zipfile.ZIP_DEFLATED
                        with open(full, "rb") as f:
                            zf.writestr(info, f.read())
    os.replace(tmp, path)
    return path


if __name__ == "__main__":
    print(build_zip(sys.argv[1] if len(sys.argv) > 1 else "dist/samplegen.zip"))
