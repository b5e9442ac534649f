from ctcalc_spark.orchestration.airflow_dags import daily_calibrated_eval

dag = daily_calibrated_eval(__file__)
