"""Helpers the Airflow DAGs call. Light to import: DAG files are parsed often."""
