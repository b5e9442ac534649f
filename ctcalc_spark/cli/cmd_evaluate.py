"""``ctcalc evaluate`` / ``jobs/evaluate.py``: one day's metrics and summaries."""
from __future__ import annotations

import argparse

from ctcalc_spark.cli.common import add_config_arguments, config_from_args, session_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--allow-missing-days", action="store_true",
                        help="with a range: skip days without evaluation rows instead of failing")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.jobs.evaluate import evaluate

    cfg = config_from_args(args)
    spark = session_for(args, cfg, "ctcalc-evaluate")
    result = evaluate(spark, cfg, args.ds, allow_missing_days=args.allow_missing_days)
    m = result.metrics
    not_ok = m[m["status"] != "ok"]
    days = result.days
    span = days[0] if len(days) == 1 else f"{days[0]}..{days[-1]} ({len(days)} days)"
    print(f"ds={span}: {len(m)} metrics rows ({len(not_ok)} without a calibrated value) -> {result.paths['metrics']}")
    if "summaries" in result.paths:
        print(f"summaries -> {result.paths['summaries']}")
    for _, r in not_ok.iterrows():
        print(f"  ds={r['ds']} model={r['model']} run={r['run']} slice={r['slice_name']}={r['slice_value']}: "
              f"status={r['status']}")
    for r in result.uncounted.itertuples(index=False):
        where = "no date" if r.ds is None else f"ds={r.ds}"
        print(f"  {r.n_rows} rows in no metrics row ({where}): {r.reason}")
    for r in result.duplicates.itertuples(index=False):
        print(f"  ds={r.ds} model={r.model} run={r.run}: {r.n_duplicate_rows} rows repeat an example id "
              f"({r.n_repeated_ids} ids, {r.n_conflicting_ids} with different labels)")
    if result.skipped_files:
        print(f"  {len(result.skipped_files)} unreadable input files skipped: " + ", ".join(result.skipped_files))
    return 0
