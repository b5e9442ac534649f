"""Running the CLI (or any command) in a fresh process, as a user runs it, with this checkout importable."""
from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run_cli(args: Sequence[str], *, cwd: Path | str = REPO, command: Sequence[str] | None = None,
            env: Mapping[str, str] | None = None, drop: Iterable[str] = (), expect: int | None = 0,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``python -m ctcalc_spark.cli ARGS`` (or ``command`` ARGS) in its own process: this checkout first on
    PYTHONPATH, ``env`` added to the environment and the variables in ``drop`` removed. With ``expect`` (default
    0) the exit code must be that; the assertion shows the ends of stdout and stderr."""
    full = {k: v for k, v in os.environ.items() if k not in set(drop)}
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    full.update(env or {})
    proc = subprocess.run([*(command or [sys.executable, "-m", "ctcalc_spark.cli"]), *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=timeout)
    assert expect is None or proc.returncode == expect, (
        f"{list(args)[:1]}: exit {proc.returncode}, expected {expect}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return proc
