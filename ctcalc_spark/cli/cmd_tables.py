"""``ctcalc tables history|vacuum|convert``: look after the Delta tables under ``output.path``."""
from __future__ import annotations

import argparse

from ctcalc_spark.cli.common import add_config_arguments, config_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=["history", "vacuum", "convert", "restore"],
                        help="history: each table's commits (version, time, run, job, days); vacuum: list (or with "
                             "--apply remove) data files no recent version references, such as those a killed run "
                             "left; convert: turn an output folder of ctcalc's earlier Parquet layout into Delta "
                             "tables in place; restore: write --ds DAY back as it was --as-of VERSION|TIME (a "
                             "replaced day, until a vacuum removes its files)")
    add_config_arguments(parser, ds=False)
    parser.add_argument("--table", help="history: only this table (default: metrics and summaries)")
    parser.add_argument("--ds", metavar="DAY", help="history: only the commits that wrote this day (a replaced day "
                                                  "stays readable with `ctcalc report --as-of VERSION` until a "
                                                  "vacuum removes its files)")
    parser.add_argument("--limit", type=int, default=10, help="history: the latest N commits per table (default 10)")
    parser.add_argument("--retention-hours", type=int, default=168,
                        help="vacuum: keep files a version of the last N hours references, so that readers and "
                             "--as-of of that period still work (default 168, a week)")
    parser.add_argument("--as-of", metavar="VERSION|TIME", help="restore: the version of the metrics table (or the "
                                                              "time) whose rows of --ds to write back")
    parser.add_argument("--apply", action="store_true", help="vacuum: remove the files (default: only list them)")


def run(args: argparse.Namespace) -> int:
    import datetime as dt

    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.tables import OutputStore, convert_layout, vacuum

    cfg = config_from_args(args)
    if cfg.output.catalog:
        raise ConfigError("`ctcalc tables` looks after the Delta tables under output.path; the outputs here are "
                          "catalog tables, which the catalog's own tools look after.")
    store = OutputStore(cfg)
    if args.action == "restore":
        from ctcalc_spark.cli.common import as_of_value
        from ctcalc_spark.tables import restore_days

        if not args.ds or not args.as_of:
            raise ConfigError("`ctcalc tables restore` needs --ds DAY and --as-of VERSION|TIME (see `ctcalc tables "
                              "history --ds DAY`).")
        tx = restore_days(store, [args.ds], as_of_value(args.as_of, cfg))
        print(f"restored ds={args.ds} as of {args.as_of} under {store.root} (run {tx.run_id})")
        return 0
    if args.action == "convert":
        done = convert_layout(store)
        print(f"converted {', '.join(done)} under {store.root} to Delta tables" if done
              else f"nothing to convert under {store.root}")
        return 0
    if args.action == "vacuum":
        if args.retention_hours < 0:
            raise ConfigError(f"--retention-hours must be >= 0, got {args.retention_hours}.")
        found = vacuum(store, args.retention_hours, args.apply)
        verb = "removed" if args.apply else "would remove (run again with --apply)"
        for table, files in found.items():
            print(f"{table}: {verb} {len(files)} file(s) no version of the last {args.retention_hours} h references")
        return 0
    tables = [args.table] if args.table else ["metrics", "summaries"]
    from ctcalc_spark.tables import wrote_day

    for table in tables:
        entries = store.history(table, None if args.ds else args.limit)
        if args.ds:
            entries = [e for e in entries if wrote_day(e, args.ds)][:args.limit]
        print(f"{table} ({store.location(table)}): {len(entries)} latest commit(s)" if entries
              else f"{table}: no table at {store.location(table)}")
        for e in entries:
            when = dt.datetime.fromtimestamp(e["timestamp"] / 1000, tz=dt.timezone.utc).isoformat(timespec="seconds")
            print(f"  version {e['version']}  {when}  {e.get('operation', '?'):<8} run {e.get('run_id', '-')}  "
                  f"job {e.get('job', '-')}  ds={e.get('days', '-')}")
    return 0
