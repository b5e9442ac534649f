"""Airflow DAG file: compare two training pipelines on demand, built by the installed ctcalc-spark (docs/airflow.md)."""
from ctcalc_spark.orchestration.dags import compare_pipelines

dag = compare_pipelines(__file__)
