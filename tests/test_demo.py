"""The demo's generator and its printed table (no Spark); `scripts/demo.sh` on a fresh copy of the checkout (slow)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from ctcalc_spark.demo import format_runs_table, generate_demo_eval, runs_table

ROOT = Path(__file__).resolve().parents[1]


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


@pytest.mark.slow
def test_demo_script_installs_the_runtime_layer_alone_and_runs(tmp_path):
    """The first README command on a fresh copy of the checkout: `scripts/demo.sh` creates .venv with the runtime
    layer only (no torch, no Airflow, no test tools: PyPI's torch is a multi-GB CUDA build), runs the demo, and a
    second bootstrap of that layer installs nothing."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True,
                           check=True).stdout.decode().split("\0")
    clone = tmp_path / "clone"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            (clone / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, clone / name)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME",
                                                            "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env["PATH"] = os.pathsep.join(d for d in env["PATH"].split(os.pathsep) if not d.startswith(str(ROOT)))
    env["PYTHON"] = sys._base_executable  # the interpreter this venv was made from, not this venv's
    t0 = time.perf_counter()
    demo = subprocess.run(["bash", "scripts/demo.sh", "--examples-per-day", "2000", "--days", "2", "--runs", "2"],
                          cwd=clone, env=env, capture_output=True, text=True, timeout=1500)
    print(f"\nscripts/demo.sh on a fresh copy (install included): {time.perf_counter() - t0:.0f} s")
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-4000:]
    assert "Whole period 2026-11-15..2026-11-16" in demo.stdout
    (site,) = (clone / ".venv" / "lib").glob("python*/site-packages")
    dists = {p.name.split("-")[0].lower() for p in site.glob("*.dist-info")}
    assert {"pyspark", "deltalake", "ctcalc_spark"} <= dists, sorted(dists)
    heavy = {d for d in dists if d.startswith(("torch", "nvidia", "apache_airflow", "pytest", "scipy", "hypothesis"))}
    assert heavy == set(), sorted(heavy)
    assert (clone / ".venv" / ".ctcalc-stamp-runtime").is_file() and not (clone / ".venv" / ".ctcalc-stamp").exists()
    again = subprocess.run(["bash", "scripts/bootstrap.sh", "runtime"], cwd=clone, env=env, capture_output=True,
                           text=True, timeout=300)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")  # the layer's stamp matches: nothing done
