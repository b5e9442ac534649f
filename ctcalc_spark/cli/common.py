"""Arguments and helpers shared by the subcommands."""
from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path
from typing import Any

import yaml

from ctcalc_spark.config import JobConfig, load_config
from ctcalc_spark.errors import ConfigError

progress_log = logging.getLogger("ctcalc_spark.progress")


def add_config_arguments(parser: argparse.ArgumentParser, *, ds: bool = True) -> None:
    """--config, --ds and repeatable --set key=value overrides."""
    parser.add_argument("--config", required=True,
                        help="YAML job config (examples: the folder `ctcalc where conf` prints)")
    if ds:
        parser.add_argument("--ds", required=True,
                            help="logical date YYYY-MM-DD, or a range START..END (one job for every day of it)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set output.path=/tmp/out (repeatable)")


def config_from_args(args: argparse.Namespace) -> JobConfig:
    """Load --config with the --set overrides applied (values parsed as YAML scalars)."""
    overrides: dict[str, Any] = {}
    for item in args.set:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}.")
        key, value = item.split("=", 1)
        overrides[key.strip()] = yaml.safe_load(value)
    if not Path(args.config).is_file():
        from ctcalc_spark.where import conf_dir

        raise ConfigError(f"Config file {args.config!r} does not exist (relative paths start at {Path.cwd()}). "
                          f"Example configs to copy from: {conf_dir()} (printed by `ctcalc where conf`).")
    return load_config(args.config, overrides)


def session_for(args: argparse.Namespace, cfg: JobConfig, app_name: str):  # type: ignore[no-untyped-def]
    """The SparkSession: spark-submit's when launched by it, else a local one from the config."""
    from ctcalc_spark.spark.session import build_session

    return build_session(cfg.spark, app_name=app_name, submitted=getattr(args, "_submitted", False),
                         log_level=getattr(args, "_spark_log_level", None))


class Progress:
    """Progress lines on stderr (INFO; hidden by -q), each with the seconds since the start; stdout stays for results.

    ``step = Progress("ctcalc demo"); step("evaluate ds=2026-11-15")`` logs
    ``ctcalc demo: evaluate ds=2026-11-15  [3.2 s]``.
    """

    def __init__(self, label: str) -> None:
        self.label = label
        self.t0 = time.perf_counter()

    def __call__(self, message: str) -> None:
        progress_log.info("%s: %s  [%.1f s]", self.label, message, time.perf_counter() - self.t0)
