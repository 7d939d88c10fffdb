"""``python -m samplegen ...``: the same as the ``samplegen`` command.

It is also the script to hand to ``spark-submit``, which takes a file rather
than a module, so that the cluster manager starts the driver::

    spark-submit --master yarn --py-files dist/samplegen.zip samplegen/__main__.py \\
        holdout hdfs:///data/m hdfs:///data/runs/ho --ratio 0.8 --seed 7 --runner spark

The engine then uses spark-submit's master and settings (``--spark-master``
and ``--spark-conf`` still win); see docs/SPARK.md.
"""
import sys

from samplegen.cli import main

if __name__ == "__main__":
    sys.exit(main())
