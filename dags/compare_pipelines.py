from ctcalc_spark.orchestration.airflow_dags import compare_pipelines

dag = compare_pipelines(__file__)
