"""Entry point for ``spark-submit``: the samplegen command line inside a
Spark application, so the cluster manager starts the driver::

    spark-submit --master yarn --py-files dist/samplegen.zip jobs/submit.py \\
        holdout hdfs:///data/m hdfs:///data/runs/ho --ratio 0.8 --seed 7 --runner spark

The engine then uses spark-submit's master and settings (``--spark-master``
and ``--spark-conf`` still win); see docs/SPARK.md.
"""
import os
import sys

if __name__ == "__main__":
    # run as a script: import the packages, not this directory's modules
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    from samplegen.jobs.cli import main
    sys.exit(main())
