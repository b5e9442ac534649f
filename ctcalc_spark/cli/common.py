"""Arguments and helpers shared by the subcommands."""
from __future__ import annotations

import argparse
from typing import Any

import yaml

from ctcalc_spark.config import JobConfig, load_config
from ctcalc_spark.errors import ConfigError


def add_config_arguments(parser: argparse.ArgumentParser, *, ds: bool = True) -> None:
    """--config, --ds and repeatable --set key=value overrides."""
    parser.add_argument("--config", required=True, help="YAML job config (see conf/)")
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
    return load_config(args.config, overrides)


def session_for(args: argparse.Namespace, cfg: JobConfig, app_name: str):  # type: ignore[no-untyped-def]
    """The SparkSession: spark-submit's when launched by it, else a local one from the config."""
    from ctcalc_spark.spark.session import build_session

    return build_session(cfg.spark, app_name=app_name, submitted=getattr(args, "_submitted", False))
