"""Airflow's constraints file with this project's pins taking precedence; the result goes to stdout.

    python docker/airflow_constraints.py URL_OR_PATH requirements.txt requirements-airflow.txt > constraints.txt
    pip install --constraint constraints.txt "apache-airflow[postgres]==3.3.2" -r requirements-airflow.txt

Airflow's file pins every package of every provider; ours pin what the jobs are tested with. Where both pin a
package (pyspark, numpy, pandas, ...), ours wins: pyspark must equal the Spark cluster's, pyspark-client must
equal pyspark. Each override is listed on stderr, so a build log shows where the two sets differ.
Standard library only: it runs before anything else is installed.
"""
from __future__ import annotations

import re
import sys
import urllib.request
from pathlib import Path
from typing import Iterable

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;#]+)")


def _normalize(name: str) -> str:
    """PEP 503 name: PyYAML, pyyaml and py_yaml are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned(lines: Iterable[str]) -> dict[str, tuple[str, str]]:
    """{normalized name: (name, version)} of the ``name==version`` lines; comments and other lines are skipped."""
    out = {}
    for line in lines:
        m = _NAME.match(line.split("#", 1)[0])
        if m:
            out[_normalize(m.group(1))] = (m.group(1), m.group(2))
    return out


def merge(airflow_lines: list[str], ours: dict[str, tuple[str, str]]) -> tuple[list[str], list[str]]:
    """(merged constraint lines, one note per package whose Airflow pin ours replaced)."""
    theirs = pinned(airflow_lines)
    notes = [f"{name}: Airflow pins {theirs[key][1]}, using {version}"
             for key, (name, version) in sorted(ours.items()) if key in theirs and theirs[key][1] != version]
    kept = [line for line in airflow_lines if not (m := _NAME.match(line)) or _normalize(m.group(1)) not in ours]
    tail = ["# Pins from this project's requirements*.txt (they replace Airflow's for these packages):"]
    return kept + tail + [f"{name}=={version}" for _, (name, version) in sorted(ours.items())], notes


def _read(source: str) -> list[str]:
    if re.match(r"^https?://", source):
        with urllib.request.urlopen(source, timeout=60) as r:
            return r.read().decode().splitlines()
    return Path(source).read_text().splitlines()


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: airflow_constraints.py AIRFLOW_CONSTRAINTS(URL or path) OUR_REQUIREMENTS.txt [...]",
              file=sys.stderr)
        return 2
    ours: dict[str, tuple[str, str]] = {}
    for path in argv[1:]:
        ours.update(pinned(Path(path).read_text().splitlines()))
    lines, notes = merge(_read(argv[0]), ours)
    for note in notes:
        print(f"airflow_constraints: {note}", file=sys.stderr)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
