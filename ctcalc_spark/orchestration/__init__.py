"""Helpers the Airflow DAGs call (docs/airflow.md).

``tasks`` is light to import (standard library only; DAG files are parsed often); ``notify`` (the
failure notifier) and ``operators`` (the spark-submit operator) import Airflow and are for DAG files.
"""
