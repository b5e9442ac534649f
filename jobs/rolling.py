"""spark-submit entry point: spark-submit jobs/rolling.py --config conf/demo.yaml --ds 2026-11-21"""
import sys

from ctcalc_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["rolling", *sys.argv[1:]], submitted=True))
