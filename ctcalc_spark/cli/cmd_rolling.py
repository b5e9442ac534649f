"""``ctcalc rolling`` / ``jobs/rolling.py``: previous-window calibrated metrics from stored summaries."""
from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ctcalc_spark.cli.common import (
    Progress,
    add_config_arguments,
    check_relative_paths,
    config_from_args,
    session_for,
)
from ctcalc_spark.errors import ConfigError

if TYPE_CHECKING:
    import pandas as pd


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--scan", action="store_true",
                        help="first run the evaluate scan of --ds (each day of a range, in order) with the previous "
                             "window's bias known, so the exact calibrated sum is accumulated in the same scan "
                             "(day/week/month windows)")
    parser.add_argument("--affected", action="store_true",
                        help="also recompute every later rolling partition that depends on --ds (late data)")
    parser.add_argument("--allow-missing-days", action="store_true",
                        help="with a range: skip days that have no summaries instead of failing")
    parser.add_argument("--replace-runs", action="store_true",
                        help="with --scan: let the scan remove the model runs an earlier run wrote for its days and "
                             "it has not got (as evaluate --replace-runs)")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.core.windows import WindowSpec
    from ctcalc_spark.jobs.evaluate import day_span, evaluate, parse_days
    from ctcalc_spark.jobs.rolling import affected_days, check_rolling_task, previous_window_bias, run_rolling
    from ctcalc_spark.tables import OutputStore

    cfg = config_from_args(args)
    check_rolling_task(cfg)  # before Spark starts, and before --scan evaluates days it could not roll
    days = parse_days(args.ds)
    if args.scan:
        from ctcalc_spark.config import require_input

        require_input(cfg)  # --scan reads the evaluation rows; before Spark starts
    if args.affected and len(days) != 1:  # before Spark starts; it took the first day and dropped the rest
        raise ConfigError(f"--affected takes the one day whose rows changed (--ds DAY) and recomputes every later "
                          f"rolling partition that depends on it; got {len(days)} days. Give the earliest day that "
                          "changed: the later ones are among those it recomputes.")
    check_relative_paths(cfg, args.config, ["input" if args.scan else "output"])
    # Spark only to scan the evaluation rows or to reach catalog tables: path outputs are Delta tables read here
    spark = session_for(args, cfg, "ctcalc-rolling") if args.scan or cfg.output.catalog else None
    store = OutputStore(cfg, spark)
    if args.scan:
        # Day by day, in order: a day's bias is known only once its previous window is written, and each day's
        # evaluate writes the summaries a later day's previous window reads (one session, one scan per day: a
        # backfill of a range is one CLI call and one Spark start).
        days = sorted(days)
        for day in days:
            known = previous_window_bias(cfg, day, store=store)
            res = evaluate(spark, cfg, day, known_bias=known, progress=Progress("ctcalc rolling"),
                           replace_runs=args.replace_runs, store=store)
            print(f"evaluate ds={day} with {len(known)} known biases: {len(res.exact)} exact calibrated sums "
                  f"-> {res.paths.get('calibrated_exact', '-')}")
    if args.affected:
        spec = WindowSpec.from_config(cfg.rolling)
        days = affected_days(days[0], spec, store.days("summaries"))
    result = run_rolling(spark, cfg, days, allow_missing_days=args.allow_missing_days, store=store)
    t = result.table
    print(f"{day_span(result.days)}: {result.spec} windows, last {result.window.label} "
          f"(previous {result.previous.label}), "
          f"{len(t)} rows, statuses {t['status'].value_counts().to_dict()}, from {len(result.days_read)} daily "
          f"summaries in {result.seconds:.2f} s -> {result.path} (window_spec={result.spec})")
    for line in window_notes(t, cfg.task):
        print(line)
    return 0


def window_notes(table: pd.DataFrame, task: str) -> list[str]:
    """Rolling rows without a calibrated value and why; a hint when the previous windows are small for c*."""
    import pandas as pd

    from ctcalc_spark.core.finalize import ALL
    from ctcalc_spark.core.findings import render
    from ctcalc_spark.core.sanity import no_calibrated_value, previous_window_hint

    whole = table[(table["slice_name"] == ALL) & (table["n_rows"] > 0)]
    if whole.empty:
        return []
    out = []
    sliced = int((table["slice_name"] != ALL).sum())
    what = "rolling rows (model x run x window)" if not sliced else \
        f"whole-data rolling rows (model x run x window; the {sliced} slice rows not counted)"
    if found := no_calibrated_value(whole["status"], what, has_value=whole["calibrated"].notna()):
        out.append(render(found))
    prev = whole[whole["prev_n_rows"] > 0]
    if not prev.empty:
        p = float(pd.to_numeric(prev["mean_label"], errors="coerce").median())
        hint = previous_window_hint(median_prev_rows=float(prev["prev_n_rows"].median()),
                                    information=p * (1 - p) if 0 < p < 1 else None, task=task,
                                    rows_per_day=float((whole["n_rows"] / whole["n_days"].clip(lower=1)).median()))
        if hint:
            out.append(hint)
    return out
