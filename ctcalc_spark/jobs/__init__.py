"""The jobs as library functions (evaluate, rolling, stream, compare): Spark in, storage layer out.

The spark-submit entry points in the top-level ``jobs/`` folder and the ``ctcalc`` CLI call these.
"""
