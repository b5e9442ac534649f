"""The layers stay layers: the pure math never loads Spark, and what a DAG imports at parse time stays light."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _loaded(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print(' '.join(sorted(sys.modules)))"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    return {m.split(".")[0] for m in out}


def test_core_never_imports_pyspark():
    core = sorted(p.stem for p in (REPO / "ctcalc_spark" / "core").glob("*.py") if p.stem != "__init__")
    loaded = _loaded("; ".join(f"import ctcalc_spark.core.{m}" for m in core))
    assert "numpy" in loaded and "pyspark" not in loaded and "py4j" not in loaded


def test_dag_helpers_import_without_numpy_or_spark():
    loaded = _loaded("import ctcalc_spark.orchestration.tasks")
    assert not loaded & {"numpy", "pandas", "pyspark", "pyarrow"}
