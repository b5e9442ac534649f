"""``ctcalc experiment``: data -> torch training (m seeds per pipeline) -> scoring -> Spark evaluate -> compare."""
from __future__ import annotations

import argparse
import time
from typing import Any

from ctcalc_spark.cli.common import set_overrides


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", help="experiment config (default: experiment_default.yaml from "
                        "`ctcalc where conf`)")
    parser.add_argument("--seeds", type=int, help="runs per pipeline (overrides the config)")
    parser.add_argument("--tables", metavar="CONFIG",
                        help="use your own tables: train_table, eval_table, columns and encoding of a "
                             "'ctcalc train' config (e.g. conf/train_example.yaml) instead of generated data")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set data.n_train=20000 (repeatable)")


def experiment_config(args: argparse.Namespace) -> Any:
    """The ExperimentConfig of the arguments: --config, then --tables, --seeds and --set."""
    import dataclasses

    from ctcalc_spark.paper.experiment import load_experiment_config
    from ctcalc_spark.where import example_config

    overrides: dict[str, Any] = {}
    if args.tables:
        from ctcalc_spark.upstream.config import load_upstream_config

        tables = load_upstream_config(args.tables)
        overrides.update({"data.train_table": dataclasses.asdict(tables.train_table),
                          "data.eval_table": dataclasses.asdict(tables.eval_table),
                          "data.columns": tables.columns.to_dict(),
                          "data.encoding": dataclasses.asdict(tables.encoding),
                          "data.ds": tables.scores.ds})
    if args.seeds is not None:
        overrides["seeds"] = args.seeds
    overrides.update(set_overrides(args.set))
    return load_experiment_config(args.config or example_config("experiment_default.yaml"), overrides)


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.cli.common import Progress
    from ctcalc_spark.paper.experiment import paper_table, run_experiment, spread_table
    from ctcalc_spark.reports.comparison import orientation_note

    cfg = experiment_config(args)
    t0 = time.perf_counter()
    res = run_experiment(cfg, log=Progress("ctcalc experiment"))
    print(f"\nMetric accuracy (Acc = share of seed pairs where A's loss < B's; ties 1/2; "
          f"{int(100 * cfg.level)}% bootstrap intervals):")
    print(paper_table(res.comparisons))
    for c in res.comparisons:
        if note := orientation_note(c, swapped=f"pairs: [[{c.name_b}, {c.name_a}]] in the experiment config"):
            print(note)
    print("\nAcross seeds:")
    print(spread_table(res.comparisons))
    print()
    for c in res.comparisons:
        print(f"* {c.name_a} vs {c.name_b}: {c.verdict}\n")
    print(f"report -> {res.paths['html']}\njson   -> {res.paths['json']}")
    print(f"wall time {time.perf_counter() - t0:.1f} s  ("
          + ", ".join(f"{k} {v:.1f} s" for k, v in res.timings.items() if k != "total") + ")")
    return 0
