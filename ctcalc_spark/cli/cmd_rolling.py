"""``ctcalc rolling`` / ``jobs/rolling.py``: previous-window calibrated metrics from stored summaries."""
from __future__ import annotations

import argparse

from ctcalc_spark.cli.common import add_config_arguments, config_from_args, session_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--scan", action="store_true",
                        help="first run the evaluate scan of --ds with the previous window's bias known, so the "
                             "exact calibrated sum is accumulated in the same scan (day/week/month windows)")
    parser.add_argument("--affected", action="store_true",
                        help="also recompute every later rolling partition that depends on --ds (late data)")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.jobs.evaluate import evaluate, table_path
    from ctcalc_spark.jobs.rolling import affected_days, list_days, previous_window_bias, run_rolling
    from ctcalc_spark.core.windows import WindowSpec

    cfg = config_from_args(args)
    spark = session_for(args, cfg, "ctcalc-rolling")
    if args.scan:
        known = previous_window_bias(cfg, args.ds, spark)
        res = evaluate(spark, cfg, args.ds, known_bias=known)
        print(f"evaluate ds={args.ds} with {len(known)} known biases: {len(res.exact)} exact calibrated sums "
              f"-> {res.paths.get('calibrated_exact', '-')}")
    days = [args.ds]
    if args.affected:
        spec = WindowSpec.from_config(cfg.rolling)
        days = affected_days(args.ds, spec, list_days(table_path(cfg, "summaries"), spark))
    for ds in days:
        result = run_rolling(spark, cfg, ds)
        t = result.table
        statuses = t["status"].value_counts().to_dict()
        print(f"ds={ds}: window {result.window.label} (previous {result.previous.label}), {len(t)} rows, "
              f"statuses {statuses}, from {len(result.days_read)} daily summaries in {result.seconds:.2f} s "
              f"-> {result.path}")
    return 0
