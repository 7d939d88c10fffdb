"""samplegen: single-pass sample generation and time-biased sampling on
Hadoop (mrjob), Spark and Hive."""
from setuptools import find_packages, setup

CORE = [
    "numpy>=1.26",
    "mrjob>=0.7.4",
    "fastparquet>=2024.2.0",
]
EXTRAS = {
    "spark": ["pyspark>=3.5"],
    "hive": ["pyhive[hive_pure_sasl]>=0.7.0"],
    "plots": ["matplotlib>=3.7"],
    # peers of the Spark benchmark (bench/bench_spark.py): scikit-learn's splitters
    "bench": ["scikit-learn>=1.3"],
    "test": ["pytest>=7.4"],
}
EXTRAS["all"] = sorted({dep for deps in EXTRAS.values() for dep in deps})

setup(
    name="samplegen",
    version="0.1.0",
    description=__doc__,
    python_requires=">=3.9",
    packages=find_packages(include=["udfs", "udfs.*", "jobs", "jobs.*",
                                    "hive", "hive.*", "tbs", "tbs.*"]),
    package_data={"hive": ["*.hql"]},
    install_requires=CORE,
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["samplegen = jobs.cli:main"]},
)
