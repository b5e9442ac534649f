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


def _imports(path: Path, root: Path = REPO) -> list[tuple[str, bool]]:
    """(the ctcalc_spark name imported, whether at module level rather than inside a function) per import in
    ``path`` under ``root``: ``from ctcalc_spark.spark import names`` gives ctcalc_spark.spark.names; relative
    imports resolved."""
    package = path.relative_to(root).with_suffix("").parts[:-1]
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, top: bool) -> None:
        for n in ast.iter_child_nodes(node):
            if isinstance(n, ast.Import):
                found.extend((a.name, top) for a in n.names)
            elif isinstance(n, ast.ImportFrom):
                base = ".".join([*package[:len(package) - n.level + 1], n.module or ""]) if n.level else n.module
                found.extend((f"{base.rstrip('.')}.{a.name}", top) for a in n.names)
            visit(n, top and not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(ast.parse(path.read_text(), str(path)), True)
    return [(name, top) for name, top in found if name.split(".")[0] == "ctcalc_spark"]


def _under(name: str, packages: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def _layer_breaks(paths: list[Path], allowed: tuple[str, ...] | None = None, top_level: tuple[str, ...] = (),
                  root: Path = REPO) -> list[str]:
    """'file:name' per ctcalc_spark import in ``paths`` of a name outside ``allowed`` (None: any), and per
    module-level import of a name under ``top_level`` (a function may import it for itself)."""
    return [f"{path.relative_to(root)}:{name}" for path in paths for name, top in _imports(path, root)
            if (allowed is not None and not _under(name, allowed)) or (top and _under(name, top_level))]


def test_core_imports_nothing_above_it():
    core = sorted((REPO / "ctcalc_spark" / "core").glob("*.py"))
    assert _layer_breaks(core, allowed=("ctcalc_spark.core", "ctcalc_spark.errors")) == []


def test_tables_and_upstream_load_no_spark_layer_for_file_helpers():
    """Path and file helpers live outside ctcalc_spark.spark (storage, filekind): importing the output tables or
    upstream loads no Spark layer; a function that runs Spark imports what it needs itself."""
    pkg = REPO / "ctcalc_spark"
    helpers = [pkg / "storage.py", pkg / "filekind.py"]
    assert _layer_breaks(helpers, allowed=("ctcalc_spark.errors", "ctcalc_spark.pathsafe", "ctcalc_spark.storage")) \
        == []
    users = [pkg / "tables.py", *sorted((pkg / "upstream").glob("*.py"))]
    assert _layer_breaks(users, top_level=("ctcalc_spark.spark",)) == []


def test_layer_check_finds_each_form(tmp_path):
    bad = tmp_path / "ctcalc_spark" / "core" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("from ctcalc_spark.config import yaml_list\nfrom . import summary\nfrom ..spark import names\n"
                   "import ctcalc_spark.tables\n\ndef f():\n    from ctcalc_spark.spark.inputs import read_input\n")
    assert _imports(bad, tmp_path) == [
        ("ctcalc_spark.config.yaml_list", True), ("ctcalc_spark.core.summary", True),
        ("ctcalc_spark.spark.names", True), ("ctcalc_spark.tables", True),
        ("ctcalc_spark.spark.inputs.read_input", False)]
    assert _layer_breaks([bad], allowed=("ctcalc_spark.core",), root=tmp_path) == [
        f"ctcalc_spark/core/bad.py:ctcalc_spark.{n}" for n in ("config.yaml_list", "spark.names", "tables",
                                                               "spark.inputs.read_input")]
    assert _layer_breaks([bad], top_level=("ctcalc_spark.spark",), root=tmp_path) == [
        "ctcalc_spark/core/bad.py:ctcalc_spark.spark.names"]


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
