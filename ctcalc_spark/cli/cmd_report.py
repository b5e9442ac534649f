"""``ctcalc report``: the drift report (HTML with embedded plots, CSV, JSON) over a period (--ds START..END, or
--start and --end)."""
from __future__ import annotations

import argparse
import sys

from ctcalc_spark.cli.common import (
    add_config_arguments,
    as_of_value,
    day_argument,
    days_argument,
    check_relative_paths,
    config_from_args,
    period_arguments,
    session_for,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctcalc_spark.reports.drift import DEFAULT_SPREAD_K, DEFAULT_TOP

    add_config_arguments(parser, ds=False)
    parser.add_argument("--start", type=day_argument, help="first day YYYY-MM-DD")
    parser.add_argument("--end", type=day_argument, help="last day YYYY-MM-DD")
    parser.add_argument("--ds", type=days_argument, metavar="START..END",
                        help="the period as evaluate and rolling name it, instead of --start and --end")
    parser.add_argument("--out", default=None, help="folder for the files (default <output.path>/reports)")
    parser.add_argument("--window", choices=["day", "week", "month", "rolling"], default=None,
                        help="override rolling.window from the config")
    parser.add_argument("--days", type=int, default=None, help="override rolling.days (rolling windows)")
    rule = parser.add_mutually_exclusive_group()
    rule.add_argument("--spread-k", type=float, default=None, metavar="K",
                      help=f"flag a model's window when the across-run mean bias moved more than K times the "
                           f"model's seed spread of c* (default {DEFAULT_SPREAD_K:g}; models with one run use "
                           "rolling.bias_threshold)")
    rule.add_argument("--threshold", type=float, default=None, metavar="X",
                      help="flag when the across-run mean bias moved more than X, for every model "
                           "(a fixed limit instead of --spread-k)")
    parser.add_argument("--as-of", metavar="VERSION|TIME",
                        help="draw the report from the tables as they were: a version of the metrics table (an "
                             "integer, see `ctcalc tables history`) or a time (ISO 8601, UTC if no zone is given)")
    parser.add_argument("--top", type=int, default=DEFAULT_TOP,
                        help=f"flagged moves listed on the page, largest first (default {DEFAULT_TOP}); "
                             "all of them go to the CSV and JSON")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.core.windows import WindowSpec
    from ctcalc_spark.errors import UsageError
    from ctcalc_spark.pathsafe import check_report_folder, report_root
    from ctcalc_spark.reports.drift import noise_line, write_report

    if not period_arguments(args, "start", "end", first_flag="--start", last_flag="--end"):
        if args.ds is not None:  # one day: a period of one day
            if args.start or args.end:
                raise UsageError("Give --ds, or --start and --end, not both.")
            args.start = args.end = args.ds
        elif not (args.start and args.end):
            raise UsageError("Give the period: --start DAY --end DAY (inclusive), or --ds START..END.")
    cfg = config_from_args(args)
    check_relative_paths(cfg, args.config, ["output"])
    spec = WindowSpec(args.window or cfg.rolling.window, args.days or cfg.rolling.days)
    out = args.out or report_root(cfg.output.path) / "reports"
    check_report_folder(out)  # before the work: the tables may be read-only, the report folder must not be
    as_of = as_of_value(args.as_of, cfg)
    spark = session_for(args, cfg, "ctcalc-report") if cfg.output.catalog else None  # path outputs: Delta, here
    rep = write_report(cfg, args.start, args.end, out_dir=out, spec=spec, threshold=args.threshold,
                       spread_k=args.spread_k, top=args.top, spark=spark, as_of=as_of)
    whole = rep.whole
    print(f"report {args.start}..{args.end} ({spec.kind}{'' if spec.kind != 'rolling' else f' {spec.days} days'}): "
          f"{whole['window'].nunique()} windows x {whole['model'].nunique()} models, "
          f"{len(rep.flags)} of {len(rep.moves)} model-windows flagged by the rule {rep.rule.describe()}")
    for kind, path in rep.paths.items():
        print(f"  {kind}: {path}")
    noisy = noise_line(rep.moves, rep.spec)
    if noisy:
        print(f"note: {noisy}")
    for line in rep.warnings:
        print(line, file=sys.stderr)
    return 0
