"""``ctcalc evaluate`` / ``jobs/evaluate.py``: one day's metrics and summaries."""
from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ctcalc_spark.cli.common import (
    Progress,
    add_config_arguments,
    check_relative_paths,
    config_from_args,
    session_for,
)
from ctcalc_spark.redact import printable

if TYPE_CHECKING:
    from ctcalc_spark.config import JobConfig
    from ctcalc_spark.jobs.evaluate import EvaluateResult

LISTED = 10
"""Groups without a calibrated value listed one per line; the rest are counted."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--allow-missing-days", action="store_true",
                        help="with a range: skip days without evaluation rows instead of failing")
    parser.add_argument("--replace-runs", action="store_true",
                        help="let this run remove the model runs an earlier run wrote for its days and it has not "
                             "got (a day's partitions are replaced whole; without it such a run stops before writing)")


def data_notes(result: EvaluateResult, cfg: JobConfig) -> list[str]:
    """Lines about the data behind the metrics: groups without a calibrated value and why, a hint when the
    val-bias parts are too small for a stable c*, and warnings about extreme logits or clipped probabilities."""
    from ctcalc_spark.core.finalize import ALL
    from ctcalc_spark.core.findings import render
    from ctcalc_spark.core.sanity import (
        backwards_auc,
        class_order,
        clipped_label_class,
        effective_limit,
        extreme_scores,
        many_slice_values_lines,
        median_information,
        no_calibrated_value,
        one_label,
        one_label_groups,
        probability_like_class_logits,
        probability_like_logits,
        small_bias,
    )

    m = result.metrics
    whole = m[(m["slice_name"] == ALL) & (m["slice_value"] == ALL)]
    found = [no_calibrated_value(whole["status"], "groups (day x model x run)")]
    two_labels = whole
    if cfg.task == "binary":
        found.append(one_label_groups(whole, str(cfg.columns.label), cfg.columns.class_names))
        two_labels = whole[~one_label(whole)]  # no number of rows fits a bias to one label: the hint is the others
    if cfg.task in ("binary", "regression") and not two_labels.empty:
        c = cfg.columns
        info = median_information(result.summaries, ["ds", c.model, c.run], cfg.histogram.bin_width) \
            if cfg.task == "binary" else None
        found.append(small_bias(median_bias_rows=float(two_labels["n_bias"].median()),
                                median_rows=float(two_labels["n_rows"].median()), information=info,
                                bias_fraction=cfg.split.bias_fraction, task=cfg.task,
                                rows_per_day=float(two_labels["n_rows"].median())))
    if cfg.task == "binary":
        found.append(backwards_auc(m, cfg.columns.logit or cfg.columns.prediction or "score", cfg.columns.class_names))
    if cfg.task == "binary" and cfg.columns.logit is not None and "bin" in result.summaries:
        found.append(probability_like_logits(result.summaries, column=cfg.columns.logit,
                                             bin_width=cfg.histogram.bin_width))
    per_class = cfg.columns.class_columns()
    if result.probability_like is not None:
        found.append(probability_like_class_logits(*result.probability_like, array_column=not per_class,
                                                   columns=per_class or [str(cfg.columns.logit)]))
    found += [class_order(model, confusion, names=cfg.columns.class_names or None,
                          scores=per_class or [str(cfg.columns.logit)])
              for model, confusion in result.class_confusion.items()]
    if result.label_class_clipped is not None:
        found.append(clipped_label_class(*result.label_class_clipped, clip_eps=cfg.clip_eps))
    if cfg.task == "binary" and not whole.empty:
        per_run = whole.groupby(["model", "run"], sort=True)[["n_rows", "n_extreme", "n_clipped"]].sum().reset_index()
        metric = None
        if len(result.days) == 1:
            metric = per_run.merge(whole[["model", "run", "log_loss"]], on=["model", "run"], how="left")["log_loss"]
        found += extreme_scores(per_run, ["model", "run"], metric=metric,
                                limit=effective_limit(cfg.sanity.max_abs_logit, cfg.histogram.bin_width))
    return [render(f) for f in found if f is not None] + many_slice_values_lines(m, cfg.sanity.max_slice_values)


def run(args: argparse.Namespace) -> int:
    from ctcalc_spark.core import findings
    from ctcalc_spark.jobs.evaluate import day_span, evaluate, parse_days

    from ctcalc_spark.config import require_input, undated_day

    cfg = config_from_args(args)
    require_input(cfg)  # these fail before Spark starts: no input, a malformed --ds, a range without a date column
    days = parse_days(args.ds)
    undated_day(cfg, days)
    check_relative_paths(cfg, args.config, ["input"])
    spark = session_for(args, cfg, "ctcalc-evaluate")
    result = evaluate(spark, cfg, days, allow_missing_days=args.allow_missing_days,
                      progress=Progress("ctcalc evaluate"), replace_runs=args.replace_runs)
    m = result.metrics
    not_ok = m[m["status"] != "ok"]
    print(f"{day_span(result.days)}: {len(m):,} metrics rows ({len(not_ok):,} without a calibrated value) -> "
          f"{result.paths['metrics']}")
    if "summaries" in result.paths:
        print(f"summaries -> {result.paths['summaries']}")
    for _, r in not_ok.head(LISTED).iterrows():
        print(f"  ds={r['ds']} model={printable(r['model'])} run={printable(r['run'])} "
              f"slice={printable(r['slice_name'])}={printable(r['slice_value'])}: "
              f"status={r['status']}")
    if len(not_ok) > LISTED:
        print(f"  ... and {len(not_ok) - LISTED:,} more (column 'status' of the metrics table)")
    for note in findings.uncounted_rows(result.uncounted) + findings.repeated_ids(result.duplicates):
        print(f"  {printable(findings.render(note))}")
    if result.skipped_files:
        print(f"  {len(result.skipped_files)} unreadable input files skipped: " + ", ".join(result.skipped_files))
    for line in data_notes(result, cfg):  # warnings on stderr with the other warnings, the rest with the results
        print(line, file=sys.stderr if line.startswith("WARNING") else sys.stdout)
    return 0
