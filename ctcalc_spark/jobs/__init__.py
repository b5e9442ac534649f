"""The jobs as library functions (evaluate, rolling, stream, compare): Spark in, output tables out.

The spark-submit entry points in the top-level ``jobs/`` folder and the ``ctcalc`` CLI call these.
"""
