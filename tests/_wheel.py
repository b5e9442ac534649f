"""Build the wheel from a clean copy of the build inputs (tests/test_packaging.py, the Airflow test's install)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# What the wheel is built from: docker/Dockerfile's wheel stage copies the same (tests/test_packaging.py checks).
BUILD_INPUTS = ("pyproject.toml", "LICENSE", "docs/pypi.md", "conf", "docker/locks", "ctcalc_spark")


def isolated(environ) -> dict[str, str]:  # type: ignore[no-untyped-def]
    """``environ`` without what would make a fresh interpreter see this checkout or another venv."""
    return {k: v for k, v in environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


def build_wheel(work: Path) -> Path:
    """The wheel pip builds (isolated build env) from a copy of the build inputs under ``work``: no stale build/."""
    src, dist = work / "src", work / "dist"
    for name in BUILD_INPUTS:
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(ROOT / name, src / name)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--wheel-dir", str(dist), str(src)],
                          env=isolated(os.environ), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    print(f"\nwheel built in {time.perf_counter() - t0:.1f} s")
    (whl,) = dist.glob("ctcalc_spark-*.whl")
    return whl
