"""``ctcalc experiment``: data -> torch training (m seeds per pipeline) -> scoring -> Spark evaluate -> compare."""
from __future__ import annotations

import argparse
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="experiment config (default: experiment_default.yaml from "
                        "`ctcalc where conf`)")
    parser.add_argument("--seeds", type=int, help="runs per pipeline (overrides the config)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set data.n_train=20000 (repeatable)")


def run(args: argparse.Namespace) -> int:
    import yaml

    from ctcalc_spark.cli.common import Progress
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.paper.experiment import load_experiment_config, paper_table, run_experiment, spread_table
    from ctcalc_spark.where import example_config

    overrides = {}
    for item in args.set:
        if "=" not in item:
            raise ConfigError(f"--set expects KEY=VALUE, got {item!r}.")
        key, value = item.split("=", 1)
        overrides[key.strip()] = yaml.safe_load(value)
    if args.seeds is not None:
        overrides["seeds"] = args.seeds
    cfg = load_experiment_config(args.config or example_config("experiment_default.yaml"), overrides)
    t0 = time.perf_counter()
    res = run_experiment(cfg, log=Progress("ctcalc experiment"))
    print(f"\nMetric accuracy (Acc = share of seed pairs where A's loss < B's; ties 1/2; "
          f"{int(100 * cfg.level)}% bootstrap intervals):")
    print(paper_table(res.comparisons))
    print("\nAcross seeds:")
    print(spread_table(res.comparisons))
    print()
    for c in res.comparisons:
        print(f"* {c.name_a} vs {c.name_b}: {c.verdict}\n")
    print(f"report -> {res.paths['html']}\njson   -> {res.paths['json']}")
    print(f"wall time {time.perf_counter() - t0:.1f} s  ("
          + ", ".join(f"{k} {v:.1f} s" for k, v in res.timings.items() if k != "total") + ")")
    return 0
