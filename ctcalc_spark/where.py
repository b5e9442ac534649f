"""Where the installed package keeps the files other tools are pointed at (stdlib only, so it starts fast).

    spark-submit "$(python -m ctcalc_spark.where submit)" evaluate --config my.yaml --ds 2026-11-21
    cp "$(python -m ctcalc_spark.where conf)"/demo.yaml my.yaml       # the example configs
    pip install --require-hashes --no-deps -r "$(python -m ctcalc_spark.where locks)"/jobs.txt   # the tested set

In a wheel the example configs are package data (``ctcalc_spark/conf``, built from the top-level ``conf/``);
in a checkout they are that top-level ``conf/`` itself. The hash-locked sets the images install and the constraints
of the tested versions are package data the same way (``ctcalc_spark/locks``, built from ``docker/locks/``).
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

PACKAGE_DIR = Path(__file__).resolve().parent


def submit_script() -> Path:
    """The file spark-submit runs: ``spark-submit <it> COMMAND [options]`` (COMMAND as in ``ctcalc COMMAND``)."""
    return PACKAGE_DIR / "submit.py"


def conf_dir() -> Path:
    """The folder of example configs (demo.yaml, stream_demo.yaml, experiment_default.yaml)."""
    for candidate in (PACKAGE_DIR / "conf", PACKAGE_DIR.parent / "conf"):
        if (candidate / "demo.yaml").is_file():
            return candidate
    raise FileNotFoundError(f"No example configs next to {PACKAGE_DIR}: expected {PACKAGE_DIR / 'conf'} (installed "
                            f"wheel) or {PACKAGE_DIR.parent / 'conf'} (checkout); reinstall ctcalc-spark.")


def example_config(name: str) -> Path:
    """One example config by file name, e.g. ``example_config("demo.yaml")``."""
    return conf_dir() / name


def locks_dir() -> Path:
    """The folder of hash-locked sets (jobs.txt, scoring.txt, torch.txt, airflow.txt) and constraints.txt."""
    for candidate in (PACKAGE_DIR / "locks", PACKAGE_DIR.parent / "docker" / "locks"):
        if (candidate / "jobs.txt").is_file():
            return candidate
    raise FileNotFoundError(f"No locked sets next to {PACKAGE_DIR}: expected {PACKAGE_DIR / 'locks'} (installed "
                            f"wheel) or {PACKAGE_DIR.parent / 'docker' / 'locks'} (checkout); reinstall ctcalc-spark.")


PLACES: dict[str, Callable[[], Path]] = {"submit": submit_script, "conf": conf_dir, "locks": locks_dir}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m ctcalc_spark.where {submit,conf,locks}``: print the path."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in PLACES:
        print(f"usage: python -m ctcalc_spark.where {{{','.join(PLACES)}}}  (got {' '.join(args) or 'nothing'})",
              file=sys.stderr)
        return 2
    print(PLACES[args[0]]())
    return 0


if __name__ == "__main__":
    sys.exit(main())
