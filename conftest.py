"""Root conftest: make Spark's executors run this interpreter.

Spark starts executor Python workers with ``PYSPARK_PYTHON`` (default ``python3`` on
PATH, which outside an activated virtualenv lacks ``distributed``).
"""

import os
import sys

os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
