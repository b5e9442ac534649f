"""``ctcalc stream`` / ``jobs/stream.py``: per-window calibrated metrics from a stream of scored, labelled rows."""
from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from ctcalc_spark.cli.common import add_config_arguments

    add_config_arguments(parser, ds=False)
    parser.add_argument("--trigger", default=None,
                        help="override stream.trigger: 'availableNow', 'once' or an interval like '10 seconds'")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="stop the query after this long (default: run until it ends or is killed)")
    parser.add_argument("--close-at-end", action="store_true",
                        help="after the query ends, finalise the windows still open (end of a backfill)")
    parser.add_argument("--generate-demo", type=int, default=0, metavar="DAYS",
                        help="first write DAYS days of generated demo files into stream.path (4 files a day)")


def run(args: argparse.Namespace) -> int:
    import pandas as pd

    from ctcalc_spark.cli.common import config_from_args, session_for
    from ctcalc_spark.core.finalize import ALL
    from ctcalc_spark.core.windows import METRIC_NAME
    from ctcalc_spark.jobs.stream import (
        batches_line, read_stream_metrics, read_stream_rolling, run_stream, write_stream_demo_files)
    from ctcalc_spark.jobs.stream_source import check_stream_folders, check_stream_task, with_kafka_package
    from ctcalc_spark.spark import interrupt

    from ctcalc_spark.errors import ConfigError

    cfg = config_from_args(args)
    check_stream_task(cfg)  # these before Spark starts, and before any schema error
    check_stream_folders(cfg)
    if cfg.stream.source == "file" and not cfg.stream.path:
        raise ConfigError("A file stream needs 'stream.path' (the folder where Parquet, JSON or CSV files land): set "
                          "it under 'stream:' in the config (conf/stream_demo.yaml shows the section).")
    if args.generate_demo:
        if not cfg.stream.path:
            raise ConfigError("--generate-demo needs a file source with 'stream.path'.")
        rows = write_stream_demo_files(cfg.stream.path, n_days=args.generate_demo, n_examples_per_day=4000,
                                       n_runs=3, files_per_day=4)
        print(f"generated {len(rows):,} rows ({rows['ds'].nunique()} days) -> {cfg.stream.path}")
    cfg = with_kafka_package(cfg)  # Spark's Kafka source, fetched by Spark (Ivy) the first time
    spark = session_for(args, cfg, "ctcalc-stream", stop_spark_on_signal=False)
    res = run_stream(spark, cfg, trigger=args.trigger, timeout_s=args.timeout, close_at_end=args.close_at_end,
                     stop_requested=lambda: interrupt.received() is not None)
    signum = interrupt.received()
    if signum is not None:
        print(f"stopped by {interrupt.signal_name(signum)}")
    if signum is not None and not res.batches:  # stopped before a batch ended: files may be waiting
        print("no batch ended before the stop; what landed since the last committed batch is read by the next run")
    else:
        print(batches_line(res.batches))  # each batch's own line is a progress line (stderr), as it ends
    for b in res.batches:
        for q in b["quarantined"]:
            print(f"  quarantined {q['file']}: {q['reason']}")
        for m in b.get("malformed_messages") or []:
            print(f"  malformed message {m['file']}: {m['reason']}")
    if res.closed_at_end:
        print(f"closed at end: {', '.join(res.closed_at_end)}")
    same, rolling = read_stream_metrics(spark, cfg), read_stream_rolling(spark, cfg)
    if not same.empty:
        same = same[same["slice_name"] == ALL]
        rolling = rolling[rolling["slice_name"] == ALL]
        metric = METRIC_NAME[cfg.task]

        def mean_all(s: pd.Series) -> float:  # n/a unless every run has a value: no mean over a subset of runs
            return float(s.mean(skipna=False))

        table = (same.groupby(["window_start", "model"])
                 .agg(runs=("run", "nunique"), vanilla=(metric, mean_all),
                      same_window=(f"calibrated_{metric}", mean_all), n_late=("n_late", "sum"))
                 .join(rolling.groupby(["window_start", "model"]).agg(
                     rolling=("calibrated", mean_all), status=("status", lambda s: "/".join(sorted(set(s))))))
                 .reset_index())
        print(f"\nClosed windows (mean {metric} over runs, n/a unless every run has one; same_window: hash-split "
              "bias, rolling: previous window's; status: every run's):")
        print(table.to_string(index=False, na_rep="n/a", float_format=lambda v: f"{v:.5f}"))
    p = res.paths
    print(f"\nmetrics -> {p.metrics}   rolling -> {p.rolling}   summaries -> {p.summaries}   counts (late, invalid, "
          f"quarantined files) -> {p.counts}   checkpoint -> {p.checkpoint}")
    return 0
