"""``ctcalc reproduce-synthetic``: the paper's synthetic experiments, our measured figures next to the published ones."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=100, help="models per pipeline per round (paper: 100)")
    parser.add_argument("--rounds", type=int, default=25,
                        help="rounds (paper: 100; default 25)")
    parser.add_argument("--task", choices=("both", "linear", "logistic"), default="both")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validation", choices=("per_round", "per_run"), default="per_round",
                        help="one validation set per round shared by all runs (default), or one per trained model")
    parser.add_argument("--no-intercept", action="store_true", help="fit the regressions without an intercept")
    parser.add_argument("--json", help="also write the results as JSON to this file")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.paper.synthetic import LINEAR, LOGISTIC, differences, format_comparison, run_experiment, with_overrides

    settings = {"linear": LINEAR, "logistic": LOGISTIC}
    tasks = ["linear", "logistic"] if args.task == "both" else [args.task]
    t0 = time.perf_counter()
    results = []
    for task in tasks:
        s = with_overrides(settings[task], validation=args.validation,
                           fit_intercept=False if args.no_intercept else None)

        def progress(done: int, total: int, task: str = task) -> None:
            if done == total or done % max(1, total // 10) == 0:
                print(f"  {task}: round {done}/{total}  [{time.perf_counter() - t0:.0f} s]", file=sys.stderr)

        res = run_experiment(s, runs=args.runs, rounds=args.rounds, seed=args.seed, progress=progress)
        results.append(res)
        print(format_comparison(res))
        diffs = differences(res)
        print("Differences from the paper beyond 3 combined standard errors: " + (" ".join(diffs) if diffs else "none."))
        print()
    print(f"total {time.perf_counter() - t0:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps([r.to_dict() for r in results], indent=2))
    return 0
