"""``ctcalc score``: score a table with trained models into the evaluation table (compact ds partitions)."""
from __future__ import annotations

import argparse
import sys

from ctcalc_spark.cli.common import add_days_argument, add_table_arguments, upstream_overrides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_table_arguments(parser, table="eval")
    add_days_argument(parser, table="eval")
    parser.add_argument("--out", help="evaluation table folder (scores.path)")
    parser.add_argument("--engine", choices=["local", "spark"], help="local pyarrow + torch, or Spark mapInArrow")
    parser.add_argument("--files-per-partition", type=int, help="files per ds partition (default 1)")
    parser.add_argument("--mode", choices=["partitions", "overwrite", "error"],
                        help="replace the ds partitions written (default), the whole table, or refuse an existing one")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.spark.progress import long_step
    from ctcalc_spark.upstream.config import load_upstream_config
    from ctcalc_spark.upstream.score import find_models

    overrides = upstream_overrides(args, table="eval")
    for flag, key in (("out", "path"), ("engine", "engine"), ("files_per_partition", "files_per_partition"),
                      ("mode", "mode")):
        if getattr(args, flag) is not None:
            overrides[f"scores.{key}"] = getattr(args, flag)
    cfg = load_upstream_config(args.config, overrides)
    models = find_models(cfg.models_dir, args.pipeline)
    s = cfg.scores
    passthrough = cfg.columns.passthrough or None
    print(f"scoring {cfg.eval_table.path} with {len(models)} model(s) from {cfg.models_dir} ({s.engine})")
    if s.engine == "local":
        from ctcalc_spark.upstream.score import score_table

        with long_step("ctcalc score"):
            report = score_table(models, cfg.eval_table, s.path, passthrough=passthrough, ds_value=s.ds,
                                 files_per_partition=s.files_per_partition, mode=s.mode, batch_size=s.batch_size,
                                 device=cfg.device, num_threads=cfg.torch_threads,
                                 max_abs_logit=cfg.sanity.max_abs_logit)
    else:
        import time

        from ctcalc_spark.cli.common import session_for
        from ctcalc_spark.upstream.score import read_spark_table, score_spark, spark_table_report, write_spark_scores

        start = time.perf_counter()
        spark = session_for(args, cfg, "ctcalc-score")
        scored = score_spark(spark, read_spark_table(spark, cfg.eval_table), models, passthrough=passthrough,
                             ds_value=s.ds, days=cfg.eval_table.days, files_per_partition=s.files_per_partition,
                             batch_size=s.batch_size, num_threads=cfg.torch_threads, device=cfg.device)
        with long_step("ctcalc score", spark):
            write_spark_scores(scored, s.path, mode=s.mode)
            report = spark_table_report(spark, s.path, list(models), max_abs_logit=cfg.sanity.max_abs_logit)
        report.seconds = time.perf_counter() - start
    print(report.summary())
    for line in report.extreme_lines():
        print(line, file=sys.stderr)
    if step := report.next_step():
        print(step)
    return 0
