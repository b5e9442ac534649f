"""``ctcalc compare`` / ``jobs/compare.py``: pipeline A vs B from the evaluate job's metrics; table + HTML + JSON."""
from __future__ import annotations

import argparse
from pathlib import Path

from ctcalc_spark.cli.common import add_config_arguments, config_from_args, session_for


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, ds=False)
    parser.add_argument("--a", required=True, metavar="MODEL", help="pipeline A: a model name in the metrics table")
    parser.add_argument("--b", required=True, metavar="MODEL", help="pipeline B: a model name in the metrics table")
    parser.add_argument("--ds", help="one logical date YYYY-MM-DD")
    parser.add_argument("--ds-from", help="first day of a range (inclusive); days are merged via the summaries")
    parser.add_argument("--ds-to", help="last day of a range (inclusive)")
    parser.add_argument("--out", help="report folder (default <output.path>/compare/<A>_vs_<B>)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--single-run", nargs=2, metavar=("RUN_A", "RUN_B"),
                        help="also check one run of A against one run of B for noise")
    parser.add_argument("--baseline", metavar="MODEL", help="model whose other runs give the seed noise (default A)")
    parser.add_argument("--engine", choices=("auto", "local", "spark"), default="auto",
                        help="read the tables with pyarrow (local paths) or Spark; auto: Spark only for remote "
                             "paths or under spark-submit")


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.core.accuracy import describe_noise_check
    from ctcalc_spark.jobs.compare import compare_pipelines, resolve_days, run_metrics, summary_payload
    from ctcalc_spark.reports.comparison import (
        accuracy_table_rows,
        format_text_table,
        report_dir,
        report_title,
        spread_table_rows,
        write_report,
    )

    cfg = config_from_args(args)
    remote = "://" in cfg.output.path and not cfg.output.path.startswith("file://")
    use_spark = args.engine == "spark" or (args.engine == "auto" and (remote or getattr(args, "_submitted", False)))
    spark = session_for(args, cfg, "ctcalc-compare") if use_spark else None
    days = resolve_days(cfg, args.ds, args.ds_from, args.ds_to, spark)
    per_run = run_metrics(cfg, [args.a, args.b], days, spark=spark)
    res = compare_pipelines(per_run, cfg.task, args.a, args.b, n_boot=args.bootstrap, level=args.level,
                            seed=args.seed, single_run=tuple(args.single_run) if args.single_run else None,
                            baseline=args.baseline)
    c = res.comparison
    title = report_title(args.a, args.b, days)
    print(f"{title}\n")
    print(format_text_table(accuracy_table_rows([c])))
    print()
    print(format_text_table(spread_table_rows([c])))
    print("\n" + c.verdict)
    for name, ex in res.excluded.items():
        if ex:
            print(f"left out {len(ex)} run(s) of {name} without a calibrated value: {', '.join(ex)}")
    if res.noise_checks:
        print(f"\nSingle run {args.single_run[0]} of {args.a} vs run {args.single_run[1]} of {args.b}:")
        for ch in res.noise_checks:
            print("  " + describe_noise_check(ch, args.a, args.b))
    out = Path(args.out) if args.out else report_dir(cfg.output.path, args.a, args.b)  # --out: the user's own path
    checks = [(args.a, args.b, res.noise_checks)] if res.noise_checks else []
    paths = write_report(out, [c], title=title, noise_checks=checks,
                         extra=summary_payload(res, days))
    print(f"\nreport -> {paths['html']}\njson   -> {paths['json']}")
    return 0
