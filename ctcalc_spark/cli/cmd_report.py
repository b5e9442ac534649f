"""``ctcalc report``: the drift report (HTML with embedded plots, CSV, JSON) over --start..--end."""
from __future__ import annotations

import argparse

from ctcalc_spark.cli.common import add_config_arguments, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, ds=False)
    parser.add_argument("--start", required=True, help="first day YYYY-MM-DD")
    parser.add_argument("--end", required=True, help="last day YYYY-MM-DD")
    parser.add_argument("--out", default=None, help="folder for the files (default <output.path>/reports)")
    parser.add_argument("--window", choices=["day", "week", "month", "rolling"], default=None,
                        help="override rolling.window from the config")
    parser.add_argument("--days", type=int, default=None, help="override rolling.days (rolling windows)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="flag windows whose bias moved more than this (default rolling.bias_threshold)")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.core.windows import WindowSpec
    from ctcalc_spark.jobs.evaluate import validate_ds
    from ctcalc_spark.reports.drift import write_report
    from ctcalc_spark.spark.files import is_local

    cfg = config_from_args(args)
    validate_ds(args.start)
    validate_ds(args.end)
    spec = WindowSpec(args.window or cfg.rolling.window, args.days or cfg.rolling.days)
    spark = None
    if cfg.output.catalog or not is_local(cfg.output.path):  # catalog or remote tables: read them with Spark
        from ctcalc_spark.cli.common import session_for

        spark = session_for(args, cfg, "ctcalc-report")
    rep = write_report(cfg, args.start, args.end, out_dir=args.out, spec=spec, threshold=args.threshold, spark=spark)
    whole = rep.table[rep.table["slice_name"] == "__all__"]
    print(f"report {args.start}..{args.end} ({spec.kind}{'' if spec.kind != 'rolling' else f' {spec.days} days'}): "
          f"{whole['window'].nunique()} windows x {whole['model'].nunique()} models, "
          f"{len(rep.flags)} bias moves above {rep.threshold:g}")
    for kind, path in rep.paths.items():
        print(f"  {kind}: {path}")
    return 0
