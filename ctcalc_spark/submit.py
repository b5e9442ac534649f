"""spark-submit entry point shipped inside the package; the first argument names the job.

    spark-submit "$(python -m ctcalc_spark.where submit)" evaluate --config my.yaml --ds 2026-11-21
    spark-submit "$(python -m ctcalc_spark.where submit)" rolling --config my.yaml --ds 2026-11-21

It runs ``ctcalc COMMAND ...`` on the session spark-submit provides (its --master and --conf win), with the same
options and exit codes as the console script. A checkout also has jobs/<command>.py, which do the same.
"""
from __future__ import annotations

import os
import sys


def _drop_own_folder_from_path() -> None:
    """Run as a script, this file puts its own folder (the package) first on sys.path, where config.py,
    errors.py, spark/ ... would shadow top-level modules of those names. Take it off again."""
    here = os.path.dirname(os.path.realpath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or os.curdir) != here]


if __name__ == "__main__":
    _drop_own_folder_from_path()
    from ctcalc_spark.cli.main import main

    sys.exit(main(sys.argv[1:], submitted=True))
