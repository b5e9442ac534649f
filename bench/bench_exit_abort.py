"""Check: how often a process that read an output table aborts as Python exits, for each way of reading it.

    .venv/bin/python bench/bench_exit_abort.py [--runs 100]

Writes one small Delta table with ctcalc's writer, then starts ``--runs`` new processes for each way, each reading
the table once and exiting, and counts the ones that end by a signal (SIGABRT: 'terminate called without an active
exception'):

(a) deltalake's Arrow dataset as it comes (``DeltaTable.to_pyarrow_dataset()``: a file system written in Python,
    called from Arrow's threads);
(b) the same dataset on Arrow's own local file system (``filesystem=SubTreeFileSystem(path, LocalFileSystem())``);
(c) what ctcalc reads with: ``OutputStore.read`` (delta-rs's ``QueryBuilder``).

The ways alternate run by run, so load on the machine falls on each alike. Figures: docs/storage.md.
"""
from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

READERS = {
    "a: to_pyarrow_dataset()": """
from deltalake import DeltaTable
DeltaTable(PATH).to_pyarrow_dataset().to_table(columns=["ds", "model", "value"]).to_pandas()
""",
    "b: Arrow's local file system": """
from deltalake import DeltaTable
from pyarrow.fs import LocalFileSystem, SubTreeFileSystem
fs = SubTreeFileSystem(PATH, LocalFileSystem())
DeltaTable(PATH).to_pyarrow_dataset(filesystem=fs).to_table(columns=["ds", "model", "value"]).to_pandas()
""",
    "c: OutputStore.read (QueryBuilder)": """
from ctcalc_spark.config import OutputConfig
from ctcalc_spark.tables import OutputStore
OutputStore(OutputConfig(path=ROOT)).read("metrics", columns=["ds", "model", "value"])
""",
}


def write_table(root: str) -> None:
    import pandas as pd

    from ctcalc_spark.config import OutputConfig
    from ctcalc_spark.core.state import arrow_schema
    from ctcalc_spark.tables import OutputStore

    rows = pd.DataFrame([{"ds": f"2026-11-{d:02d}", "model": m, "run": str(r), "value": float(d * r)}
                         for d in range(1, 31) for m in ("baseline", "dcn") for r in range(5)])
    types = arrow_schema({"ds": "string", "model": "string", "run": "string", "value": "double"})
    OutputStore(OutputConfig(path=root)).transaction("evaluate").write("metrics", rows, types)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=100)
    args = ap.parse_args()
    import deltalake
    import pyarrow

    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
          f"deltalake {deltalake.__version__}, pyarrow {pyarrow.__version__}; load {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as tmp:
        write_table(tmp)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        aborted = dict.fromkeys(READERS, 0)
        for _ in range(args.runs):
            for name, code in READERS.items():
                script = f"ROOT = {tmp!r}\nPATH = {os.path.join(tmp, 'metrics')!r}\n{code}"
                done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
                if done.returncode < 0 or "terminate called" in done.stderr:
                    aborted[name] += 1
                elif done.returncode != 0:
                    raise SystemExit(f"{name} failed:\n{done.stderr[-2000:]}")
    for name, n in aborted.items():
        print(f"{name:36s} aborted at exit in {n} of {args.runs} processes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
