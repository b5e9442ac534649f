"""``ctcalc evaluate`` / ``jobs/evaluate.py``: one day's metrics and summaries."""
from __future__ import annotations

import argparse

from ctcalc_spark.cli.common import add_config_arguments, config_from_args, session_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.jobs.evaluate import evaluate

    cfg = config_from_args(args)
    spark = session_for(args, cfg, "ctcalc-evaluate")
    result = evaluate(spark, cfg, args.ds)
    m = result.metrics
    not_ok = m[m["status"] != "ok"]
    print(f"ds={result.ds}: {len(m)} metrics rows ({len(not_ok)} without a calibrated value) -> {result.paths['metrics']}")
    if "summaries" in result.paths:
        print(f"summaries -> {result.paths['summaries']}")
    for _, r in not_ok.iterrows():
        print(f"  model={r['model']} run={r['run']} slice={r['slice_name']}={r['slice_value']}: status={r['status']}")
    return 0
