"""``python -m ctcalc_spark ...``: the ``ctcalc`` command, where the console script is not on PATH."""
from __future__ import annotations

import sys

from ctcalc_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
