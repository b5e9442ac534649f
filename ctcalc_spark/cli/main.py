"""The ``ctcalc`` console script. Subcommands mirror the spark-submit entry points in jobs/."""
from __future__ import annotations

import argparse
import importlib
import logging
import sys
from typing import Sequence

from ctcalc_spark.errors import CtcalcError

COMMANDS = {
    "evaluate": ("ctcalc_spark.cli.cmd_evaluate", "Scan one day of the evaluation table; write metrics and summaries."),
    "rolling": ("ctcalc_spark.cli.cmd_rolling", "Previous-window (rolling) calibrated metrics from stored daily summaries."),
    "report": ("ctcalc_spark.cli.cmd_report", "Drift report (HTML with embedded plots, CSV, JSON) over --start..--end."),
    "stream": ("ctcalc_spark.cli.cmd_stream", "Structured Streaming: calibrated metrics per event-time window as each window closes."),
    "demo": ("ctcalc_spark.cli.cmd_demo", "Generate the demo table and run the evaluate job end to end on it."),
    "compare": ("ctcalc_spark.cli.cmd_compare", "Compare two pipelines across runs: Acc of vanilla vs calibrated metric, HTML report."),
    "train": ("ctcalc_spark.cli.cmd_train", "Train torch models on your own table, one file per pipeline and seed."),
    "score": ("ctcalc_spark.cli.cmd_score", "Score a table with trained models into the evaluation table."),
    "experiment": ("ctcalc_spark.cli.cmd_experiment", "Generate data, train seeds with torch, score, evaluate, compare pipeline pairs."),
    "reproduce-synthetic": ("ctcalc_spark.cli.cmd_reproduce", "The paper's synthetic linear/logistic experiments, ours next to the published figures."),
}


def build_parser(submitted: bool = False) -> argparse.ArgumentParser:
    """Parser with one sub-parser per command (modules imported only to register their arguments)."""
    parser = argparse.ArgumentParser(prog="ctcalc", description="Calibrated metrics (Calibration-then-Calculation) on Spark.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        importlib.import_module(module).add_arguments(p)
        p.set_defaults(_module=module, _submitted=submitted)
    return parser


def main(argv: Sequence[str] | None = None, *, submitted: bool = False) -> int:
    """Run a subcommand; user errors (config, input) print one clear line and exit 2."""
    args = build_parser(submitted).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return int(importlib.import_module(args._module).run(args) or 0)
    except CtcalcError as e:
        print(f"ctcalc {args.command}: error: {e}", file=sys.stderr)
        return 2


def console() -> None:
    """Entry point of the console script."""
    sys.exit(main())
