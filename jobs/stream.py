"""spark-submit entry point: spark-submit jobs/stream.py --config conf/stream_demo.yaml [--trigger availableNow]

Kafka source: add --packages org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0
"""
import sys

from ctcalc_spark.cli.main import main

if __name__ == "__main__":
    sys.exit(main(["stream", *sys.argv[1:]], submitted=True))
