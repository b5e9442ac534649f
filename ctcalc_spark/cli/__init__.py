"""The ``ctcalc`` command line: argument parsing and printing only; the work is in the library."""
from __future__ import annotations

from ctcalc_spark.cli.main import build_parser, console, main

__all__ = ["build_parser", "console", "main"]
