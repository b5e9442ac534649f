"""Write the example CSV of docs/your-own-data.md: 2 pipelines x 5 runs x 90 days x 48 scored rows, with drift.

    python scripts/own_data_example.py [--out output/own_data/scored.csv] [--days 90] [--rows-per-day 48]
"""
from __future__ import annotations

import argparse
import time

from ctcalc_spark.demo import write_scored_csv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="output/own_data/scored.csv")
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--rows-per-day", type=int, default=48)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    t0 = time.perf_counter()
    df = write_scored_csv(args.out, n_days=args.days, rows_per_day=args.rows_per_day, runs=args.runs)
    print(f"{len(df):,} rows ({df['model'].nunique()} pipelines x {args.runs} runs x {args.days} days x "
          f"{args.rows_per_day} rows) -> {args.out} in {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
