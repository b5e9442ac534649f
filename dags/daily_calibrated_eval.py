"""Daily calibrated evaluation: wait for the day's evaluation partition, (optionally) score it,
evaluate, update the rolling metrics, write the drift report, and flag bias drift.

Every task reads and writes only the partition of the run's logical date ``{{ ds }}``, so
backfills (``catchup`` or ``airflow backfill create``) and reruns are safe: the Spark jobs
replace their ``ds=`` partitions atomically and the report folder is per day.

Parse-time settings come from ``CTCALC_*`` environment variables and run-time settings from
DAG params, Airflow Variables ``ctcalc_*`` and the job config: see ctcalc_spark/orchestration/tasks.py.
Nothing heavy is imported at the top level.
"""
from __future__ import annotations

import datetime as dt

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Param, PokeReturnValue, TriggerRule, dag, task

from ctcalc_spark.orchestration import tasks as orch

S = orch.parse_settings(__file__)
# Jinja: the project dir (jobs/) may be moved by a Variable without touching the code.
PROJECT = "{{ var.value.get('%s', '%s') }}" % (orch.VAR_PROJECT_DIR, S.project_dir)


@dag(
    dag_id="daily_calibrated_eval",
    schedule="@daily",
    start_date=S.start_date,
    catchup=S.catchup,
    max_active_runs=1,
    default_args={
        "retries": S.retries,
        "retry_delay": dt.timedelta(seconds=S.retry_delay_s),
        "retry_exponential_backoff": True,
        "max_retry_delay": dt.timedelta(seconds=S.max_retry_delay_s),
    },
    params={
        "config": Param(None, type=["null", "string"], description=f"job YAML (default: Variable {orch.VAR_CONFIG})"),
        "bias_threshold": Param(None, type=["null", "number"],
                                description=f"|bias change| threshold (default: Variable {orch.VAR_BIAS_THRESHOLD}, "
                                            "then rolling.bias_threshold of the config)"),
        "score": Param(None, type=["null", "boolean"],
                       description=f"score before evaluating (default: Variable {orch.VAR_SCORE})"),
        "drift_callback": Param(None, type=["null", "string"],
                                description=f"'module:function' to call on drift instead of failing "
                                            f"(default: Variable {orch.VAR_DRIFT_CALLBACK})"),
    },
    tags=["ctcalc"],
    doc_md=__doc__,
)
def daily_calibrated_eval():  # type: ignore[no-untyped-def]
    @task(multiple_outputs=True)
    def settings(ds=None, params=None):  # type: ignore[no-untyped-def]
        """Resolve config path, overrides, partition paths and thresholds for this logical date."""
        from airflow.sdk import Variable

        variables = {n: Variable.get(n, default=None) for n in orch.RUN_VARIABLES}
        return orch.run_settings(ds, params=params, variables=variables, project_dir=S.project_dir)

    @task.sensor(poke_interval=S.sensor_poke_s, timeout=S.sensor_timeout_s, mode=S.sensor_mode)
    def wait_for_eval_partition(path: str) -> PokeReturnValue:
        """Done when the day's partition has a _SUCCESS marker or a non-empty data file."""
        ready, reason = orch.partition_ready(path)
        print(reason)
        return PokeReturnValue(is_done=ready)

    @task.branch
    def maybe_score(score: bool) -> str:
        """Score with the registered models first, or go straight to evaluate."""
        return "score" if score else "evaluate"

    def spark_job(task_id: str, script: str, **kwargs) -> SparkSubmitOperator:  # type: ignore[no-untyped-def]
        # The master (local, spark://..., yarn, k8s) comes from the connection alone.
        return SparkSubmitOperator(
            task_id=task_id,
            conn_id=S.conn_id,
            application=f"{PROJECT}/jobs/{script}",
            application_args=s["job_args"],
            conf=s["spark_conf"],
            name=f"ctcalc-{task_id}",
            **kwargs,
        )

    @task
    def score(models: dict, features_path: str, eval_partition: str | None,  # type: ignore[no-untyped-def]
              ds=None) -> str:
        """Score the day's feature rows with the registered models -> the day's evaluation partition."""
        if not eval_partition:
            raise ValueError("Scoring writes the evaluation table, so the config needs 'input.path'.")
        return orch.score_partition(models, features_path, eval_partition, ds)

    @task
    def report(args: list[str], project_dir: str) -> str:
        """`ctcalc report` over the report window ending at ds -> <output>/reports/ds=<ds>."""
        import shutil
        import subprocess
        import sys
        from pathlib import Path

        exe = Path(sys.executable).with_name("ctcalc")
        cmd = [str(exe) if exe.exists() else (shutil.which("ctcalc") or "ctcalc"), *args]
        print("running:", " ".join(cmd))
        subprocess.run(cmd, check=True, cwd=project_dir)
        return args[args.index("--out") + 1]

    @task
    def drift_check(rolling_path: str, threshold: float, callback: str | None,  # type: ignore[no-untyped-def]
                    ds=None) -> dict:
        """Fail (or call the configured callback) when any |bias change| of the day exceeds the threshold."""
        from airflow.sdk.exceptions import AirflowFailException

        drifted, n_checked, max_abs = orch.drift_rows(rolling_path, threshold)
        result = {"ds": ds, "rows_checked": n_checked, "rows_drifted": len(drifted), "max_abs_bias_change": max_abs,
                  "threshold": threshold}
        print(result)
        if drifted.empty:
            return result
        if callback:
            orch.load_callable(callback)(ds=ds, drifted=drifted, threshold=threshold, rolling_path=rolling_path)
            return result
        raise AirflowFailException(
            f"Bias drift on {ds}: {len(drifted)} of {n_checked} rows have |{orch.BIAS_CHANGE_COLUMN}| > {threshold} "
            f"(max {max_abs:.4g}) in {rolling_path}:\n{drifted.head(20).to_string(index=False)}\n"
            f"Set the Variable {orch.VAR_DRIFT_CALLBACK} to alert instead of failing."
        )

    s = settings()
    wait = wait_for_eval_partition(s["sensor_path"])
    branch = maybe_score(s["score"])
    scored = score(s["models"], s["sensor_path"], s["eval_partition"])
    evaluate = spark_job("evaluate", "evaluate.py", trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
    rolling = spark_job("rolling", "rolling.py")
    wait >> branch >> [scored, evaluate]
    scored >> evaluate >> rolling
    reported = report(s["report_args"], s["project_dir"])
    rolling >> reported >> drift_check(s["rolling_path"], s["bias_threshold"], s["drift_callback"])


daily_calibrated_eval()
