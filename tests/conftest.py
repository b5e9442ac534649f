"""Shared fixtures: one session-scoped local SparkSession (local[2], UI off, few shuffle partitions)."""
from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def spark():
    from ctcalc_spark.config import SparkConfig
    from ctcalc_spark.spark.session import build_session

    session = build_session(SparkConfig(master="local[2]", shuffle_partitions=4, driver_memory="2g"), app_name="ctcalc-tests")
    yield session
    session.stop()


@pytest.fixture()
def demo_config(tmp_path):
    """A binary config pointing at tmp_path/eval (input) and tmp_path/out (outputs)."""
    from ctcalc_spark.config import config_from_dict

    def make(**overrides):
        data = {
            "task": "binary",
            "input": {"path": str(tmp_path / "eval")},
            "output": {"path": str(tmp_path / "out")},
            "split": {"bias_fraction": 0.1, "salt": "t"},
        }
        for key, value in overrides.items():
            node = data
            *parents, leaf = key.split("__")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = value
        return config_from_dict(data)

    return make


@pytest.fixture(scope="session")
def three_years_of_drift():
    """2 models x 5 runs x 3 years of daily binary summaries with two bias jumps (tests/_drift_data.py).

    Returns (days, ReportInput, weekly config): 155 weekly windows per run, 1,550 model-run windows.
    """
    import pandas as pd

    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.reports.drift import ReportInput
    from tests._drift_data import JUMPS, binary_drift_summaries, day_range

    days = day_range("2023-01-02", 1092)
    rows = binary_drift_summaries(days, jumps=JUMPS, n=200)
    cfg = config_from_dict({"task": "binary", "input": {"path": "unused"}, "output": {"path": "unused"},
                            "histogram": {"bin_width": 0.1}, "rolling": {"window": "week"}})
    return days, ReportInput(rows, pd.DataFrame(), days[0], days[-1], "synthetic"), cfg


@pytest.fixture(scope="session")
def three_year_report(three_years_of_drift):
    """The drift report of :func:`three_years_of_drift` over every week but the first, default flag rule."""
    from ctcalc_spark.reports.drift import build_report

    days, inp, cfg = three_years_of_drift
    return cfg, build_report(inp, cfg, days[7], days[-1])
