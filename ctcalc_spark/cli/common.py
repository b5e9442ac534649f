"""Arguments and helpers shared by the subcommands."""
from __future__ import annotations

import argparse
import logging
import os
import time
from pathlib import Path
from typing import Any, Sequence

from ctcalc_spark.config import JobConfig, apply_overrides, config_from_dict, load_config, parse_yaml
from ctcalc_spark.errors import ConfigError, UsageError

progress_log = logging.getLogger("ctcalc_spark.progress")


def day_argument(text: str) -> str:
    """argparse ``type`` of a flag that takes one day: ``text`` when it is YYYY-MM-DD, else a usage error (exit 2)."""
    from ctcalc_spark.config import validate_ds

    try:
        return validate_ds(text, "the day")
    except ConfigError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def days_argument(text: str) -> str:
    """argparse ``type`` of ``--ds``: a day, a range START..END or a comma list of those, checked here so that a
    malformed one is a usage error (exit 2) before anything starts; returns ``text`` unchanged."""
    items = [item.strip() for item in text.split(",")]
    if not all(items):
        raise argparse.ArgumentTypeError(f"expected days YYYY-MM-DD or ranges START..END separated by commas, got "
                                         f"{text!r} (an empty item)")
    for item in items:
        if ".." not in item:
            day_argument(item)
            continue
        lo, hi = (day_argument(end.strip()) for end in item.split("..", 1))
        if lo > hi:
            raise argparse.ArgumentTypeError(f"the range {item!r} ends before it starts")
    return text


def add_config_arguments(parser: argparse.ArgumentParser, *, ds: bool = True) -> None:
    """--config, --ds and repeatable --set key=value overrides."""
    parser.add_argument("--config",
                        help="YAML job config (examples: the folder `ctcalc where conf` prints); without it the "
                             "defaults and the --set keys, e.g. --set input.path=scores --set output.path=eval")
    if ds:
        parser.add_argument("--ds", required=True, type=days_argument,
                            help="logical date YYYY-MM-DD, a range START..END, or a comma list of both "
                                 "(every day in one job)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set output.path=/tmp/out (repeatable)")


def period_arguments(args: argparse.Namespace, first: str, last: str, *, first_flag: str,
                     last_flag: str) -> bool:
    """``--ds START..END`` (evaluate's and rolling's way of naming a period) for a command whose period flags
    are ``first_flag``/``last_flag``: sets ``args.<first>``/``args.<last>`` and clears ``args.ds``; True when
    ``--ds`` named a range. A comma list (evaluate's several ranges) is refused: these commands take one period.
    """
    ds = getattr(args, "ds", None)
    if ds is None or (".." not in ds and "," not in ds):
        return False
    if "," in ds:
        raise UsageError(f"--ds {ds!r}: this command takes one day or one range START..END, not a list; give "
                         f"{first_flag} and {last_flag} (inclusive) for a period.")
    if getattr(args, first) or getattr(args, last):
        raise UsageError(f"--ds {ds!r} names the period already: give it, or {first_flag} and {last_flag}, not both.")
    lo, hi = (part.strip() for part in ds.split("..", 1))  # checked by days_argument
    setattr(args, first, lo)
    setattr(args, last, hi)
    args.ds = None
    return True


def set_overrides(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as dotted overrides (values parsed as YAML scalars). A value YAML cannot read that
    is no list, mapping or quoted text is the text as typed: a glob such as ``*.csv`` (an alias to YAML),
    ``@team`` (a reserved character) or a quote character alone (``escape='"'``)."""
    overrides: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}.")
        key, value = item.split("=", 1)
        try:
            overrides[key.strip()] = parse_yaml(value, f"--set {item}: the value")
        except ConfigError:
            if value.strip() in ('"', "'"):  # a quote character alone, for the CSV options quote and escape
                overrides[key.strip()] = value.strip()
                continue
            if value.lstrip()[:1] in ("[", "{", '"', "'") or "\n" in value:
                raise
            overrides[key.strip()] = value
    return overrides


def check_relative_paths(cfg: JobConfig, config: str | None, reads: Sequence[str]) -> None:
    """ConfigError for a relative path a command reads (``reads``: 'input', 'output') that is not in the working
    folder but is beside the ``config`` file (in its folder or one of the two above it): a command run from
    another folder than the project's. Relative paths start at the working folder, as in any command; the error
    says where the path is. Called after a command's own argument checks, before Spark starts."""
    if config is None:
        return
    paths = ([("input.path", cfg.input.path), *((f"input.model_paths.{k}", v)
                                                for k, v in cfg.input.model_paths.items())] if "input" in reads else [])
    paths += [("output.path", cfg.output.path)] if "output" in reads else []
    folder = Path(config).resolve().parent
    for key, path in paths:
        if not path or "://" in path or os.path.isabs(path) or any(c in path for c in "*?[{") or Path(path).exists():
            continue
        for base in (folder, *folder.parents[:2]):
            if (base / path).exists():
                raise ConfigError(
                    f"'{key}' {path!r} is not in the working folder {Path.cwd()}, where relative paths start; it is "
                    f"in {base} ({base / path}). Run the command from {base}, or write the paths in {config} "
                    "absolute.")


def config_from_args(args: argparse.Namespace) -> JobConfig:
    """Load --config with the --set overrides applied (values parsed as YAML scalars)."""
    overrides = set_overrides(args.set)
    if args.config is None:  # every key from --set, the rest the defaults (docs/evaluate.md)
        if not overrides:
            raise ConfigError("Give the job config: --config FILE (examples to copy: `ctcalc where conf`), or its keys "
                              "with --set, e.g. --set input.path=scores --set output.path=eval (the other keys keep "
                              "their defaults).")
        return config_from_dict(apply_overrides({}, overrides))
    if not Path(args.config).exists():  # a folder: read_yaml says so
        from ctcalc_spark.where import conf_dir

        raise ConfigError(f"Config file {args.config!r} does not exist (relative paths start at {Path.cwd()}). "
                          f"Example configs to copy from: {conf_dir()} (printed by `ctcalc where conf`).")
    return load_config(args.config, overrides)


# Flags of `ctcalc train` / `ctcalc score` that set keys of ctcalc_spark.upstream.config.UpstreamConfig.
_TABLE_FLAGS = (("format", "format"), ("delimiter", "csv_delimiter"), ("encoding", "csv_encoding"))
_COLUMN_FLAGS = ("categorical", "numeric", "label", "positive_label", "example_id", "ds_column", "passthrough",
                 "null_values")


def add_table_arguments(parser: argparse.ArgumentParser, *, table: str) -> None:
    """--config, the table path/format flags for ``table`` ('train' or 'eval') and --set."""
    parser.add_argument("--config", help="YAML config (see conf/train_example.yaml); flags override its keys")
    parser.add_argument(f"--{table}", dest="table_path", metavar="PATH",
                        help=f"the {table} table: a Parquet/CSV/JSON file or folder ({table}_table.path)")
    parser.add_argument("--format", choices=["parquet", "csv", "json"], help=f"{table}_table.format")
    parser.add_argument("--no-header", action="store_true", help="CSV without a header line (columns _c0, _c1, ...)")
    parser.add_argument("--delimiter", help="CSV delimiter (default ',')")
    parser.add_argument("--encoding", help="CSV text encoding (default utf-8; cp1252 for a CSV from Excel on Windows)")
    parser.add_argument("--passthrough", nargs="+", metavar="COL",
                        help="columns copied into the evaluation table, e.g. slice columns (columns.passthrough)")
    parser.add_argument("--models-dir", help="model files <dir>/<pipeline>/run<seed>.pt (models_dir)")
    parser.add_argument("--pipeline", nargs="+", metavar="NAME", help="only these pipelines")
    parser.add_argument("--device", help="torch device (default: cuda when available, else cpu)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set encoding.min_count=5 (repeatable)")


def add_days_argument(parser: argparse.ArgumentParser, *, table: str) -> None:
    """--ds: the days of ``table``'s rows to use (``<table>_table.days``)."""
    parser.add_argument("--ds", metavar="DAYS", type=days_argument,
                        help=f"only the rows of these days (by the day column): YYYY-MM-DD, a range START..END or a "
                             f"comma list of both, as evaluate takes them ({table}_table.days)")


def add_column_arguments(parser: argparse.ArgumentParser) -> None:
    """The column declarations (columns.*) as flags."""
    parser.add_argument("--categorical", nargs="+", metavar="COL", help="categorical feature columns")
    parser.add_argument("--numeric", nargs="+", metavar="COL", help="numeric feature columns")
    parser.add_argument("--label", help="label column (0/1, true/false, or see --positive-label)")
    parser.add_argument("--positive-label", help="the label value counted as 1 (every other value is 0)")
    parser.add_argument("--example-id", help="row id column (default: a hash of the whole row)")
    parser.add_argument("--ds-column", help="day column: date, timestamp or 'YYYY-MM-DD...' string")
    parser.add_argument("--null-values", nargs="+", metavar="TEXT", help="strings read as null, e.g. '?'")


def upstream_overrides(args: argparse.Namespace, *, table: str) -> dict[str, Any]:
    """Dotted config overrides from the flags of ``ctcalc train`` / ``ctcalc score`` (then --set)."""
    out: dict[str, Any] = {}
    prefix = f"{table}_table."
    if args.table_path:
        out[prefix + "path"] = args.table_path
    if getattr(args, "ds", None) is not None:
        out[prefix + "days"] = args.ds
    for flag, key in _TABLE_FLAGS:
        if getattr(args, flag, None) is not None:
            out[prefix + key] = getattr(args, flag)
    if args.no_header:
        out[prefix + "csv_header"] = False
    for flag in _COLUMN_FLAGS:
        value = getattr(args, flag, None)
        if value is not None:
            out["columns." + ("ds" if flag == "ds_column" else flag)] = value
    if args.models_dir:
        out["models_dir"] = args.models_dir
    if args.device:
        out["device"] = args.device
    out.update(set_overrides(args.set))
    return out


def as_of_value(text: str | None, cfg: JobConfig):  # type: ignore[no-untyped-def]
    """``--as-of``: None, a version of the metrics table (int) or a time (aware datetime; UTC if none given)."""
    import datetime as dt

    if text is None:
        return None
    if cfg.output.catalog:
        raise ConfigError("--as-of reads earlier versions of the Delta tables under output.path; the outputs here are "
                          "catalog tables (use your catalog's time travel, e.g. VERSION AS OF in Spark SQL).")
    if text.strip().isdigit():
        return int(text)
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigError(f"--as-of {text!r}: give a version of the metrics table (an integer, see `ctcalc tables "
                          "history`) or a time such as 2026-11-28T09:00:00Z.") from None
    return when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)


def session_for(args: argparse.Namespace, cfg: JobConfig, app_name: str,  # type: ignore[no-untyped-def]
                stop_spark_on_signal: bool = True):
    """The SparkSession: spark-submit's when launched by it, else a local one from the config.

    Ctrl-C and SIGTERM then interrupt the session's Spark work and end the command with one line
    (``stop_spark_on_signal=False``: only recorded, for a command that stops its work itself; spark/interrupt.py).
    """
    from ctcalc_spark.spark import interrupt
    from ctcalc_spark.spark.session import build_session

    from ctcalc_spark.spark.session import connector_settings

    inp, out = getattr(cfg, "input", None), getattr(cfg, "output", None)  # a job's config (score's has neither)
    paths = [inp.path, *inp.model_paths.values()] if inp is not None else []
    paths += [getattr(out, "path", None)]
    connectors = connector_settings(paths, getattr(inp, "format", None), cfg.spark.conf)
    spark = build_session(cfg.spark, app_name=app_name, submitted=getattr(args, "_submitted", False),
                          log_level=getattr(args, "_spark_log_level", None), connectors=connectors)
    interrupt.install(spark, stop_spark=stop_spark_on_signal)
    return spark


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
