"""``ctcalc train``: train torch models on your own table (declared columns), one file per pipeline and seed."""
from __future__ import annotations

import argparse

from ctcalc_spark.cli.common import add_column_arguments, add_days_argument, add_table_arguments, upstream_overrides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_table_arguments(parser, table="train")
    add_days_argument(parser, table="train")
    add_column_arguments(parser)
    seeds = parser.add_mutually_exclusive_group()
    seeds.add_argument("--seeds", nargs="+", type=int, metavar="SEED", help="training seeds, e.g. --seeds 0 1 2")
    seeds.add_argument("--runs", type=int, help="train seeds 0..N-1")
    parser.add_argument("--arch", help="train one pipeline of this architecture (lr, fm, fnn, deepfm, dcn) instead "
                                       "of the config's pipelines")
    parser.add_argument("--name", help="the pipeline name for --arch (default: the architecture)")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.core.windows import day_runs
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.spark.progress import long_step
    from ctcalc_spark.upstream.config import load_upstream_config
    from ctcalc_spark.upstream.table import read_table
    from ctcalc_spark.upstream.train import model_file, train_table_models

    overrides = upstream_overrides(args, table="train")
    if args.seeds is not None:
        overrides["seeds"] = args.seeds
    if args.runs is not None:
        overrides["runs"] = args.runs
    if args.arch:
        overrides["pipelines"] = {args.name or args.arch: {"arch": args.arch}}
    cfg = load_upstream_config(args.config, overrides)
    specs = cfg.specs()
    if args.pipeline:
        unknown = sorted(set(args.pipeline) - set(specs))
        if unknown:
            raise ConfigError(f"--pipeline names {unknown}, not among the configured pipelines {sorted(specs)}.")
        specs = {n: s for n, s in specs.items() if n in args.pipeline}
    table = read_table(cfg.train_table)
    days = "" if cfg.train_table.days is None else f" (--ds {day_runs(list(cfg.train_table.days))} of them)"
    print(f"train table {cfg.train_table.path}: {table.num_rows:,} rows{days}; training {sorted(specs)} x seeds "
          f"{list(cfg.seed_list)}")
    with long_step("ctcalc train"):
        models = train_table_models(specs, table, cfg.columns, seeds=cfg.seed_list, encoding=cfg.encoding,
                                    models_dir=cfg.models_dir, device=cfg.device, num_threads=cfg.torch_threads,
                                    log=print, days=cfg.train_table.days)
    meta = next(iter(models.values())).meta
    print("vocabulary sizes (+ null, + unseen): " + ", ".join(f"{c} {n}" for c, n in meta["vocab_sizes"].items()))
    counted = {k: v for k, v in meta["counts"].items() if v and k != "rows_in"}
    if counted:
        print("training rows by policy: " + ", ".join(f"{k} {v:,}" for k, v in counted.items()))
    for name, seed in models:
        print(f"  {model_file(cfg.models_dir, name, seed)}")
    return 0
