"""spark-submit entry point: spark-submit jobs/compare.py --config conf/demo.yaml --a dcn --b baseline --ds 2026-11-21"""
import sys

from ctcalc_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["compare", *sys.argv[1:]], submitted=True))
