"""Airflow DAG file: the daily calibrated evaluation, built by the installed ctcalc-spark (docs/airflow.md)."""
from ctcalc_spark.orchestration.dags import daily_calibrated_eval

dag = daily_calibrated_eval(__file__)
