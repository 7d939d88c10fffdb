"""samplegen: single-pass sample generation and time-biased sampling on
Hadoop (mrjob), Spark and Hive."""
import re

from setuptools import Extension, find_packages, setup

#: the source folders, installed as subpackages of samplegen
PACKAGES = find_packages(include=["udfs", "udfs.*", "jobs", "jobs.*", "hive", "hive.*",
                                  "tbs", "tbs.*"])
with open("samplegen/__init__.py") as f:
    VERSION = re.search(r'^__version__ = "([^"]+)"', f.read(), re.M).group(1)

CORE = [
    "numpy>=1.26",
    "mrjob>=0.7.4",
    "fastparquet>=2024.2.0",
    # tables in and out of the sampling commands: Arrow's CSV and Parquet readers and take
    "pyarrow>=15",
    # the filesystem layer: hdfs:// through WebHDFS (requests), other stores through fsspec
    "fsspec>=2023.1.0",
    "requests>=2.28",
]
EXTRAS = {
    # pyarrow: Spark's Arrow batches, which samplegen.spark's DataFrame sampling works on
    "spark": ["pyspark>=3.5", "pyarrow>=11"],
    "hive": ["pyhive[hive_pure_sasl]>=0.7.0"],
    "plots": ["matplotlib>=3.7"],
    # samplegen.model_selection's splitters go where scikit-learn takes cv= (and the
    # benchmarks' peers: scikit-learn's own splitters)
    "sklearn": ["scikit-learn>=1.3"],
    # the checks of `make test`: import layers (.importlinter) and style (ruff.toml);
    # `make check` spreads the fast tier over every core (pytest-xdist)
    "test": ["pytest>=7.4", "pytest-xdist>=3.5", "import-linter>=2.0", "ruff>=0.6"],
}
#: Philox4x64-10 at arbitrary counters in C (udfs/_philox.c): optional -- where it
#: does not build (no C compiler), the install goes on and udfs/rng.py computes
#: the same words with numpy
EXTENSIONS = [Extension("samplegen.udfs._philox", ["udfs/_philox.c"], optional=True)]
EXTRAS["all"] = sorted({dep for deps in EXTRAS.values() for dep in deps})

setup(
    name="samplegen",
    version=VERSION,
    description=" ".join(__doc__.split()),
    python_requires=">=3.9",
    # One top-level name, samplegen; the source folders are its subpackages.
    packages=["samplegen"] + [f"samplegen.{name}" for name in PACKAGES],
    package_dir={"samplegen": "samplegen",
                 **{f"samplegen.{name}": name.replace(".", "/") for name in PACKAGES}},
    package_data={"samplegen.hive": ["*.hql"]},
    ext_modules=EXTENSIONS,
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["samplegen = samplegen.cli:main"]},
)
