"""The demo's generator and its printed table (no Spark)."""
from __future__ import annotations

import pandas as pd

from ctcalc_spark.demo import format_runs_table, generate_demo_eval, runs_table


def test_runs_table_prints_na_not_nan_for_undefined_spread():
    per_run = pd.DataFrame({"model": ["a", "b", "b"], "log_loss": [0.4, 0.5, 0.51],
                            "calibrated_log_loss": [0.39, 0.49, 0.495]})
    text = format_runs_table(runs_table(per_run))
    assert "nan" not in text.lower()
    line_a = next(line for line in text.splitlines() if line.startswith("a "))
    assert line_a.count("n/a") == 3
    assert "50.0%" in text  # b: std 0.00707 -> 0.00354


def test_demo_table_is_deterministic_and_has_the_promised_shape():
    a = generate_demo_eval(n_examples_per_day=500, n_runs=5, n_days=7)
    b = generate_demo_eval(n_examples_per_day=500, n_runs=5, n_days=7)
    pd.testing.assert_frame_equal(a, b)
    assert a["model"].nunique() >= 3 and a["run"].nunique() >= 5 and a["ds"].nunique() >= 7
    rate = a[a["model"] == "baseline"].groupby("ds")["label"].mean()
    assert rate.iloc[-1] > rate.iloc[0]  # the base rate drifts upward over the week
