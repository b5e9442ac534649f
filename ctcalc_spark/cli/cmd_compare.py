"""``ctcalc compare`` / ``jobs/compare.py``: pipeline A vs B from the evaluate job's metrics; table + HTML + JSON."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ctcalc_spark.cli.common import (
    add_config_arguments,
    day_argument,
    days_argument,
    check_relative_paths,
    config_from_args,
    period_arguments,
    session_for,
)

if TYPE_CHECKING:
    import pandas as pd

    from ctcalc_spark.core.accuracy import Comparison
    from ctcalc_spark.core.findings import Finding

    from ctcalc_spark.config import JobConfig
    from ctcalc_spark.tables import OutputStore


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser, ds=False)
    parser.add_argument("--a", required=True, metavar="MODEL", help="pipeline A: a model name in the metrics table")
    parser.add_argument("--b", required=True, metavar="MODEL", help="pipeline B: a model name in the metrics table")
    parser.add_argument("--ds", type=days_argument, help="one logical date YYYY-MM-DD, or a range START..END (as --ds-from/--ds-to)")
    parser.add_argument("--ds-from", type=day_argument, help="first day of a range (inclusive); days are merged via the summaries")
    parser.add_argument("--ds-to", type=day_argument, help="last day of a range (inclusive)")
    parser.add_argument("--rolling", action="store_true",
                        help="compare under rolling calibration (bias fitted on all of the previous window, applied "
                             "to the next) per window and over --ds-from..--ds-to, from the stored daily summaries")
    parser.add_argument("--window", choices=("day", "week", "month", "rolling"), default=None,
                        help="with --rolling: the window (default rolling.window from the config)")
    parser.add_argument("--days", type=int, default=None,
                        help="with --rolling --window rolling: its length in days (default rolling.days)")
    parser.add_argument("--out", help="report folder (default <output.path>/compare/<A>_vs_<B>)")
    parser.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples (default 2000)")
    parser.add_argument("--level", type=float, default=0.95, help="interval level (default 0.95)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")
    parser.add_argument("--single-run", nargs=2, metavar=("RUN_A", "RUN_B"),
                        help="also check one run of A against one run of B for noise")
    parser.add_argument("--baseline", metavar="MODEL", help="model whose other runs give the seed noise (default A)")


def _extreme(cfg: JobConfig, counts: pd.DataFrame, metric: pd.Series | None = None) -> list[Finding]:
    """The warnings for runs with extreme logits or clipped probabilities (binary)."""
    from ctcalc_spark.core.sanity import effective_limit, extreme_scores

    if cfg.task != "binary" or counts.empty or "n_extreme" not in counts:
        return []
    return extreme_scores(counts, ["model", "run"], metric=metric,
                          limit=effective_limit(cfg.sanity.max_abs_logit, cfg.histogram.bin_width))


def _bias_hint(cfg: JobConfig, per_run: pd.DataFrame, n_days: int) -> str | None:
    """The small-val-bias hint when the runs' val-bias parts are small for c* (information from the base rate)."""
    import pandas as pd

    from ctcalc_spark.core.findings import render
    from ctcalc_spark.core.sanity import small_bias

    if cfg.task != "binary" or not {"n_bias", "n_rows", "base_rate"} <= set(per_run.columns):
        return None
    p = float(pd.to_numeric(per_run["base_rate"], errors="coerce").median())
    if not 0 < p < 1:
        return None
    hint = small_bias(median_bias_rows=float(per_run["n_bias"].median()),
                      median_rows=float(per_run["n_rows"].median()), information=p * (1 - p),
                      bias_fraction=cfg.split.bias_fraction, task=cfg.task, from_base_rate=True,
                      rows_per_day=float(per_run["n_rows"].median()) / max(n_days, 1))
    return render(hint) if hint else None


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.errors import ConfigError

    period_arguments(args, "ds_from", "ds_to", first_flag="--ds-from", last_flag="--ds-to")
    if args.rolling:
        return _run_rolling(args)
    if args.window or args.days:
        raise ConfigError("--window and --days choose the windows of a rolling comparison; add --rolling.")
    if args.baseline and not args.single_run:  # --baseline means nothing without --single-run
        raise ConfigError("--baseline chooses whose runs give the seed noise of --single-run RUN_A RUN_B; add "
                          "--single-run, or leave --baseline out.")
    from ctcalc_spark.core.accuracy import describe_noise_check
    from ctcalc_spark.core.findings import render
    from ctcalc_spark.core.sanity import unequal_rows_line
    from ctcalc_spark.jobs.compare import compare_pipelines, resolve_days, run_metrics, summary_payload
    from ctcalc_spark.reports.comparison import report_title, write_report

    cfg = config_from_args(args)
    check_relative_paths(cfg, args.config, ["output"])
    out = _report_folder(args, cfg)
    store = _store(args, cfg)
    days = resolve_days(store, args.ds, args.ds_from, args.ds_to)
    per_run = run_metrics(cfg, [args.a, args.b], days, store=store)
    res = compare_pipelines(per_run, cfg.task, args.a, args.b, n_boot=args.bootstrap, level=args.level,
                            seed=args.seed, single_run=tuple(args.single_run) if args.single_run else None,
                            baseline=args.baseline)
    c = res.comparison
    title = report_title(args.a, args.b, days, dated=cfg.columns.ds is not None)
    print(f"{title}\n")
    print_comparison(c, f"--a {c.name_b} --b {c.name_a}")
    for name, ex in res.excluded.items():
        if ex:
            print(f"left out {len(ex)} run(s) of {name} without a calibrated value: {', '.join(ex)}")
    hint = _bias_hint(cfg, per_run, len(days))
    if hint:
        print(hint)
    van = per_run.columns[2]
    warnings = [render(f) for f in _extreme(cfg, per_run, per_run[van])]
    span = days[0] if len(days) == 1 else f"{days[0]}..{days[-1]}, {len(days)} days"
    if line := unequal_rows_line(per_run, [args.a, args.b], span, cfg.columns.split):
        warnings.append(line)
    for w in warnings:
        print(w, file=sys.stderr)
    if res.noise_checks:
        print(f"\nSingle run {args.single_run[0]} of {args.a} vs run {args.single_run[1]} of {args.b}:")
        for ch in res.noise_checks:
            print("  " + describe_noise_check(ch, args.a, args.b))
    checks = [(args.a, args.b, res.noise_checks)] if res.noise_checks else []
    paths = write_report(out, [c], title=title, noise_checks=checks,
                         extra=summary_payload(res, days), warnings=warnings)
    print(f"\nreport -> {paths['html']}\njson   -> {paths['json']}")
    return 0


def print_comparison(c: Comparison, swapped: str) -> None:
    """The verdict's headline first, then the accuracy and spread tables, then the rest of the verdict."""
    from ctcalc_spark.reports.comparison import (
        accuracy_table_rows,
        format_text_table,
        orientation_note,
        spread_table_rows,
    )

    print(f"Verdict: {c.headline}\n")
    print(format_text_table(accuracy_table_rows([c])))
    if note := orientation_note(c, swapped=swapped):
        print(note)
    print()
    print(format_text_table(spread_table_rows([c])))
    print("\n" + c.verdict[len(c.headline):].strip())


def _report_folder(args: argparse.Namespace, cfg: JobConfig, folder: str | None = None) -> Path:
    """Where the report goes (``--out``: the user's own path, taken as given), checked writable before the work."""
    from ctcalc_spark.pathsafe import check_report_folder
    from ctcalc_spark.reports.comparison import report_dir

    out = Path(args.out) if args.out else report_dir(cfg.output.path, args.a, args.b)
    out = out / folder if folder and not args.out else out
    check_report_folder(out)
    return out


def _store(args: argparse.Namespace, cfg: JobConfig) -> OutputStore:
    """The command's one output store: catalog outputs read through a Spark session; path outputs are Delta
    tables read here, with no session."""
    from ctcalc_spark.tables import OutputStore

    return OutputStore(cfg, session_for(args, cfg, "ctcalc-compare") if cfg.output.catalog else None)


def _run_rolling(args: argparse.Namespace) -> int:
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.core.rolling_compare import period_description, to_payload, window_summary
    from ctcalc_spark.core.findings import render
    from ctcalc_spark.core.sanity import no_calibrated_value, unequal_rows_line
    from ctcalc_spark.core.windows import WindowSpec
    from ctcalc_spark.jobs.compare import rolling_comparison
    from ctcalc_spark.reports.comparison import write_report
    from ctcalc_spark.reports.rolling_comparison import section_html, write_windows_csv

    if args.ds or not (args.ds_from and args.ds_to):
        raise ConfigError("--rolling compares windows over a period: give --ds START..END, or --ds-from DATE and "
                          "--ds-to DATE (inclusive), not one day.")
    if args.single_run:
        raise ConfigError("--single-run checks one day's runs; run it without --rolling.")
    cfg = config_from_args(args)
    check_relative_paths(cfg, args.config, ["output"])
    spec = WindowSpec(args.window or cfg.rolling.window, args.days or cfg.rolling.days)
    out = _report_folder(args, cfg, "rolling_" + (f"{spec.days}d" if spec.kind == "rolling" else spec.kind))
    res = rolling_comparison(cfg, args.a, args.b, args.ds_from, args.ds_to, spec=spec, store=_store(args, cfg),
                             n_boot=args.bootstrap, level=args.level, seed=args.seed)
    rc, c = res.comparison, res.comparison.period
    kind = f"rolling {spec.days}-day" if spec.kind == "rolling" else spec.kind
    title = (f"{args.a} vs {args.b}, {rc.start}..{rc.end}: {kind} windows, bias from the previous window")
    first, last = rc.windows[0], rc.windows[-1]
    print(f"{title}\n")
    print(f"{len(rc.windows)} windows ({first.window_start}..{last.window_end}, days up to {rc.end}), "
          f"{len(rc.period_windows)} in the period sums; read {len(res.days_read)} days of summaries.")
    if found := no_calibrated_value(rc.runs["status"], "run-windows", has_value=rc.runs["calibrated"].notna()):
        print(render(found))
    print("\nWhole period:\n")
    print_comparison(c, f"--a {c.name_b} --b {c.name_a}")
    print("\nPer window:")
    for sentence in window_summary(rc):
        print("  " + sentence)
    print("\n" + period_description(rc))
    for name, ex in rc.excluded.items():
        if ex:
            print(f"left out {len(ex)} run(s) of {name} without any rolling-calibrated value: {', '.join(ex)}")
    warnings = [render(f) for f in _extreme(cfg, res.extreme)]
    if line := unequal_rows_line(rc.period_runs, [args.a, args.b], f"the {len(rc.period_windows)} period windows"):
        warnings.append(line)
    for w in warnings:
        print(w, file=sys.stderr)
    write_windows_csv(rc, out)
    paths = write_report(out, [c], title=title, warnings=warnings, sections=[section_html(rc)],
                         extra={"rolling": to_payload(rc), "days_read": res.days_read})
    print(f"\nreport -> {paths['html']}\njson   -> {paths['json']}\nwindows -> {out / 'windows.csv'}")
    return 0
