"""The layers stay layers: the pure math never loads Spark, and what a DAG imports at parse time stays light."""
from __future__ import annotations

import ast
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


JVM_HANDLES = {"_jvm", "_jsc", "_jdf", "_jconf", "_jsparkSession", "_jwrite", "_jreader", "sparkContext"}
"""Attributes that exist only on classic sessions (they fail on Spark Connect with JVM_ATTRIBUTE_NOT_SUPPORTED)."""


def _jvm_uses(path: Path) -> list[str]:
    """'file:line name' per attribute access to a JVM handle, or the name as a string (getattr(x, "_jvm"))."""
    found = []
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        name = n.attr if isinstance(n, ast.Attribute) else n.value if isinstance(n, ast.Constant) else None
        if isinstance(name, str) and name in JVM_HANDLES:
            found.append(f"{path}:{n.lineno} {name}")
    return found


def test_no_jvm_handles_in_package_jobs_or_dags():
    files = [p for d in ("ctcalc_spark", "jobs", "dags") for p in sorted((REPO / d).rglob("*.py"))]
    assert len(files) > 40
    assert [u for p in files for u in _jvm_uses(p)] == []


def test_jvm_handle_check_finds_each_form(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("def f(spark):\n    spark.sparkContext.setLogLevel('WARN')\n    return getattr(spark, '_jsc')\n")
    assert sorted(u.split()[-1] for u in _jvm_uses(bad)) == ["_jsc", "sparkContext"]
