"""The ctcalc DAGs as factories in the installed package: an Airflow DAG file of two lines builds one, so the
DAGs always match the installed library and no checkout is needed anywhere (docs/airflow.md)::

    from ctcalc_spark.orchestration.airflow_dags import daily_calibrated_eval
    dag = daily_calibrated_eval(__file__)

(``airflow_dags`` re-exports the factories: its name gets the file past the dag-processor's safe-mode check.)

``dag_file`` (the calling DAG file) only sets the default of ``CTCALC_PROJECT_DIR``, the folder that relative
config paths start from: the folder above the DAG file's. The Spark tasks submit the package's own entry point
(``ctcalc_spark/submit.py``). Importing this module imports Airflow; nothing heavy is imported at parse time.
"""
from __future__ import annotations

import datetime as dt
from typing import Any

from airflow.sdk import Asset, CronDataIntervalTimetable, Param, PokeReturnValue, TriggerRule, dag, task

from ctcalc_spark import redact
from ctcalc_spark.orchestration import tasks as orch
from ctcalc_spark.orchestration.notify import BeforeStartNotifier, FailureNotifier
from ctcalc_spark.orchestration.operators import CtcalcSparkSubmitOperator

DAILY_DOC = """Daily calibrated evaluation of one **completed** day: wait until the day's input is complete and the
previous window is there, (optionally) score, evaluate, update the rolling metrics, write the drift
report, and give a drift verdict.

**Which day.** The schedule is a data-interval timetable (``CronDataIntervalTimetable``, midnight UTC):
the run of logical date D covers the interval [D, D+1 day), is created once that interval has ended,
and evaluates ``ds`` = D. Catch-up (``CTCALC_CATCHUP``) and ``airflow backfill create`` therefore give
exactly one run per completed day and none for the day in progress. A manual run evaluates the day of
the logical date it is given.

**Complete input.** The day counts as ready when its ``_SUCCESS`` marker exists (or the marker file /
metastore partition configured), never merely because some data files exist.

**History.** A day whose previous window has no summaries (that day's run failed or never ran) stops
with a message saying which days are missing; ``drift_check`` reports ``first_window``,
``no_previous_window``, ``no_drift`` or ``drift``, never a silent pass.

Every task reads and writes only the partitions of ``ds``; each table is replaced by one Delta commit, so
reruns and backfills are safe. Settings: parse time from ``CTCALC_*`` environment variables, run time
from params (only tuning ones unless ``CTCALC_TRUST_PARAMS=true``), Variables ``ctcalc_*`` and the job
config. See docs/airflow.md. Nothing heavy is imported at the top level.
"""

COMPARE_DOC = """Compare two training pipelines on demand: train `runs` seeds of each, score the evaluation
features, evaluate (calibrated metrics), and compare (metric accuracy, vanilla vs calibrated).

Trigger with params, e.g.::

    airflow dags trigger compare_pipelines --conf '{"pipeline_a": "deepfm_bn",
        "spec_a": {"arch": "deepfm", "batch_norm": true}, "pipeline_b": "deepfm",
        "spec_b": {"arch": "deepfm"}, "runs": 5, "ds": "2026-11-02",
        "train_path": "/data/ctr/train.parquet", "features_path": "/data/ctr/eval.parquet",
        "workdir": "/data/ctcalc/compare/deepfm_bn_vs_deepfm"}'

Everything is written under ``workdir``: models/, eval/ (the scored table), out/ (metrics,
summaries, compare report). A rerun with the same params replaces the same files. The paths have no
defaults; whoever may trigger this DAG chooses what it reads and writes, so a deployment can confine
them with ``CTCALC_COMPARE_ROOT`` (see docs/airflow.md, trust model).
"""


def daily_calibrated_eval(dag_file: str | None = None) -> Any:
    """The DAG ``daily_calibrated_eval`` (:data:`DAILY_DOC`), its parse-time settings read from the environment."""
    S = orch.parse_settings(dag_file)
    NOTIFY = FailureNotifier(S.on_failure)  # each task's, after its last try
    NOTIFY_RUN = FailureNotifier(S.on_failure, run_level=True)  # the run's: only what no task reported
    TASK_TIMEOUT = dt.timedelta(seconds=S.task_timeout_s)

    def _asset(table: str) -> Asset:
        """An output table as an Asset: downstream DAGs schedule on ``Asset.ref(name="ctcalc_daily_<table>")``."""
        name = f"ctcalc_daily_{table}"
        return Asset(name=name, uri=f"{S.asset_uri}/{table}") if S.asset_uri else Asset(name=name)

    METRICS, SUMMARIES, ROLLING = _asset("metrics"), _asset("summaries"), _asset("rolling")

    def _sensor_timeout(timeout_s: float) -> dt.timedelta:
        # In poke mode one try lasts the whole wait; in reschedule mode each poke is one short try.
        return dt.timedelta(seconds=timeout_s + S.task_timeout_s if S.sensor_mode == "poke" else S.task_timeout_s)

    @dag(
        dag_id="daily_calibrated_eval",
        schedule=CronDataIntervalTimetable("0 0 * * *", timezone="UTC"),
        start_date=S.start_date,
        catchup=S.catchup,
        max_active_runs=S.max_active_runs,
        dagrun_timeout=dt.timedelta(seconds=S.dagrun_timeout_s),
        on_failure_callback=NOTIFY_RUN,
        on_success_callback=BeforeStartNotifier(S.on_failure, S.start_date),  # a run before it ran no task
        default_args={
            "owner": S.owner,
            "retries": S.retries,
            "retry_delay": dt.timedelta(seconds=S.retry_delay_s),
            "retry_exponential_backoff": True,
            "max_retry_delay": dt.timedelta(seconds=S.max_retry_delay_s),
            "execution_timeout": TASK_TIMEOUT,
            "on_failure_callback": NOTIFY,
        },
        params={
            "bias_threshold": Param(None, type=["null", "number"],
                                    description=f"|bias change| threshold (default: Variable "
                                                f"{orch.VAR_BIAS_THRESHOLD}, then rolling.bias_threshold of the "
                                                "config)"),
            "score": Param(None, type=["null", "boolean"],
                           description=f"score before evaluating (default: Variable {orch.VAR_SCORE})"),
            "previous_window": Param(None, type=["null", "string"], enum=[None, *orch.PREVIOUS_WINDOW_POLICIES],
                                     description="'require' (default) or 'ignore' a missing previous window"),
            "report_days": Param(None, type=["null", "integer"], minimum=1,
                                 description=f"days of the drift report (default: Variable {orch.VAR_REPORT_DAYS})"),
            "config": Param(None, type=["null", "string"],
                            description=f"job YAML (default: Variable {orch.VAR_CONFIG}); accepted only with "
                                        "CTCALC_TRUST_PARAMS=true"),
            "drift_callback": Param(None, type=["null", "string"],
                                    description=f"'module:function' to call on drift instead of failing (default: "
                                                f"Variable {orch.VAR_DRIFT_CALLBACK}); only with "
                                                "CTCALC_TRUST_PARAMS=true"),
        },
        tags=["ctcalc"],
        doc_md=DAILY_DOC,
    )
    def build():  # type: ignore[no-untyped-def]
        @task(multiple_outputs=True)
        def settings(ds=None, params=None,  # type: ignore[no-untyped-def]
                     data_interval_start=None, data_interval_end=None):
            """Resolve config, overrides, partition paths, readiness and thresholds for the day ``ds``."""
            from airflow.sdk import Variable
            from airflow.sdk.log import mask_secret

            variables = {n: Variable.get(n, default=None) for n in orch.RUN_VARIABLES}
            interval = (data_interval_start, data_interval_end) if data_interval_start else None
            with orch.fail_for_good_on_config_errors():
                s = orch.run_settings(ds, params=params, variables=variables, parse=S, data_interval=interval)
            for value in redact.secret_values(s["spark_conf"], s["overrides"]):
                mask_secret(value)
            print("evaluating ds =", ds, "data interval =", s["data_interval"])
            print("settings:", redact.redact_settings(s))
            return s

        @task.sensor(poke_interval=S.sensor_poke_s, timeout=S.sensor_timeout_s, mode=S.sensor_mode,
                     execution_timeout=_sensor_timeout(S.sensor_timeout_s),
                     on_failure_callback=FailureNotifier(S.on_failure, waits_for="ready"))
        def wait_for_eval_partition(ready: dict, spark_conf: dict) -> PokeReturnValue:
            """Done when the day's input is complete: its marker file (default ``_SUCCESS``) or metastore partition."""
            done, reason = orch.input_ready(ready, spark_conf, conn_id=S.conn_id)
            print(reason)
            return PokeReturnValue(is_done=done)

        @task.sensor(poke_interval=S.sensor_poke_s, timeout=S.previous_timeout_s, mode=S.sensor_mode,
                     execution_timeout=_sensor_timeout(S.previous_timeout_s),
                     on_failure_callback=FailureNotifier(S.on_failure, waits_for="previous"))
        def wait_for_previous_window(previous: dict, ti=None) -> PokeReturnValue:  # type: ignore[no-untyped-def]
            """Done when the previous window's summaries are there; waits while the run before is still going."""
            from airflow.sdk.exceptions import AirflowFailException

            done, _, reason = orch.previous_window_ready(previous)
            print(reason)
            if done:
                return PokeReturnValue(is_done=True)
            if previous["policy"] == "ignore":
                print(f"{orch.VAR_PREVIOUS_WINDOW}=ignore: going on without it")
                return PokeReturnValue(is_done=True)
            before = ti.get_previous_dagrun()
            state = str(getattr(before.state, "value", before.state)) if before else None
            if state in ("running", "queued"):
                print(f"waiting: the run of {before.logical_date} is {state}")
                return PokeReturnValue(is_done=False)
            about = (f"The run before this one ({before.run_id}) ended {state}." if before
                     else "No earlier run of this DAG exists.")
            raise AirflowFailException(orch.missing_previous_message(reason, about, previous))

        @task.branch
        def maybe_score(score: bool) -> str:
            """Score with the registered models first, or go straight to evaluate."""
            return "score" if score else "evaluate"

        @task(execution_timeout=dt.timedelta(seconds=S.spark_timeout_s))
        def score(models: dict, features_path: str, eval_table: str, ds=None) -> str:  # type: ignore[no-untyped-def]
            """Score the day's feature rows with the registered models -> the day of the evaluation table (Delta),
            replaced in one commit."""
            return orch.score_partition(models, features_path, eval_table, ds)

        def spark_job(task_id: str, app: str, outlets: dict, doc: str,  # type: ignore[no-untyped-def]
                      **kwargs) -> CtcalcSparkSubmitOperator:
            # The master (local, spark://..., yarn, k8s) or the Spark Connect server comes from the connection alone.
            return CtcalcSparkSubmitOperator(
                task_id=task_id,
                doc_md=doc,
                conn_id=S.conn_id,
                pool=S.spark_pool,
                application=s[app],
                application_args=s[f"{task_id}_args"],
                conf=s["spark_conf"],
                name=f"ctcalc-{task_id}",
                execution_timeout=dt.timedelta(seconds=S.spark_timeout_s),
                outlets=list(outlets),
                asset_extra={a.name: {"ds": s["ds"], "path": s[path]} for a, path in outlets.items()},
                **kwargs,
            )

        @task(execution_timeout=dt.timedelta(seconds=S.report_timeout_s))
        def report(ti=None) -> str:  # type: ignore[no-untyped-def]
            """`ctcalc report` over the report window ending at ds -> <output>/reports/ds=<ds>."""
            import logging
            import os
            import shutil
            import subprocess
            import sys
            from pathlib import Path

            from airflow.sdk.log import mask_secret

            from ctcalc_spark.redact import redact_url, url_secrets

            # Pulled here, not passed as arguments: arguments are stored as rendered fields, unmasked.
            args = ti.xcom_pull(task_ids="settings", key="report_args")
            project_dir = ti.xcom_pull(task_ids="settings", key="project_dir")
            for value in redact.secret_values(args):
                mask_secret(value)
            # Catalog outputs are read through Spark: on the Connect server when the connection is a Connect one.
            remote = orch.spark_connect_url(S.conn_id)
            for value in url_secrets(remote or ""):
                mask_secret(value)
            exe = Path(sys.executable).with_name("ctcalc")
            cmd = [str(exe) if exe.exists() else (shutil.which("ctcalc") or "ctcalc"), *args]
            where = f" (Spark Connect: {redact_url(remote)})" if remote else ""
            print("running:", " ".join(redact.redact_args(cmd)) + where)
            # Each line at its own level: the command's stderr (its progress lines) is no error of the task.
            done = subprocess.Popen(cmd, cwd=project_dir, env={**os.environ, "SPARK_REMOTE": remote} if remote else None,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
            log, output = logging.getLogger("ctcalc_spark.report"), []
            for line in done.stdout:  # type: ignore[union-attr]
                output.append(line.rstrip("\n"))
                log.log(orch.line_level(output[-1]), "%s", output[-1])
            code = done.wait()
            final = orch.final_failure("report", code, "\n".join(output))  # config or input: a retry cannot mend it
            if final:
                from airflow.sdk.exceptions import AirflowFailException

                raise AirflowFailException(final)
            if code != 0:
                raise subprocess.CalledProcessError(code, redact.redact_args(cmd))
            return str(args[args.index("--out") + 1])

        @task(execution_timeout=dt.timedelta(seconds=S.report_timeout_s))
        def vacuum(ti=None) -> None:  # type: ignore[no-untyped-def]
            """`ctcalc tables vacuum --apply`: removes the files of replaced days that no version of the retention
            (CTCALC_VACUUM_RETENTION_HOURS, default 168) references, so that the folders stop growing and readers of
            them as plain Parquet stop counting replaced days. Nothing for catalog outputs."""
            import shutil
            import subprocess
            import sys
            from pathlib import Path

            args = ti.xcom_pull(task_ids="settings", key="vacuum_args")  # pulled: arguments are stored unmasked
            if not args:
                print("catalog outputs: nothing to vacuum here")
                return
            exe = Path(sys.executable).with_name("ctcalc")
            cmd = [str(exe) if exe.exists() else (shutil.which("ctcalc") or "ctcalc"), *args]
            print("running:", " ".join(redact.redact_args(cmd)))
            subprocess.run(cmd, cwd=ti.xcom_pull(task_ids="settings", key="project_dir"), check=True)

        @task
        def drift_check(rolling: dict, rolling_path: str, threshold: float,  # type: ignore[no-untyped-def]
                        callback: str | None, previous: dict, spark_conf: dict, ds=None) -> dict:
            """Verdict of the day: drift / no_drift / first_window / no_previous_window (fails unless ignored)."""
            from airflow.sdk.exceptions import AirflowFailException

            result, drifted = orch.drift_check(rolling, threshold, spark_conf=spark_conf, conn_id=S.conn_id)
            print(result)
            if result["outcome"] == "no_rows" or (result["outcome"] == "no_previous_window"
                                                   and previous["policy"] != "ignore"):
                raise AirflowFailException(orch.no_previous_message(result, rolling_path))
            if result["outcome"] != "drift":
                return result
            if callback:
                orch.load_callable(callback)(ds=ds, drifted=drifted, threshold=threshold, rolling_path=rolling_path)
                return result
            raise AirflowFailException(orch.drift_message(result, drifted, rolling_path))

        s = settings()
        wait = wait_for_eval_partition(s["ready"], s["spark_conf"])
        previous = wait_for_previous_window(s["previous"])
        branch = maybe_score(s["score"])
        scored = score(s["models"], s["sensor_path"], s["eval_table"])
        evaluate = spark_job("evaluate", "evaluate_app", {METRICS: "metrics_path", SUMMARIES: "summaries_path"},
                             "`ctcalc evaluate` of the day (spark-submit, or a Spark Connect client): its metrics and "
                             "summaries partitions, swapped in atomically. Exit codes 2-5 fail it for good.",
                             trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS)
        rolling = spark_job("rolling", "rolling_app", {ROLLING: "rolling_path"},
                            "`ctcalc rolling` of the day: calibrated metrics with the bias fitted on the previous "
                            "window's summaries, into its rolling partition. A plain process for Delta outputs "
                            "(no Spark needed); spark-submit or a Connect client for catalog tables.",
                            needs_spark=s["rolling_needs_spark"])
        [wait, previous] >> branch >> [scored, evaluate]
        scored >> evaluate >> rolling
        reported = report()
        s >> reported
        cleaned = vacuum()
        s >> cleaned
        reported >> cleaned
        rolling >> reported >> drift_check(s["rolling"], s["rolling_path"], s["bias_threshold"], s["drift_callback"],
                                           s["previous"], s["spark_conf"])

    return build()


def compare_pipelines(dag_file: str | None = None) -> Any:
    """The DAG ``compare_pipelines`` (:data:`COMPARE_DOC`), its parse-time settings read from the environment."""
    S = orch.parse_settings(dag_file)
    NOTIFY = FailureNotifier(S.on_failure)  # each task's, after its last try
    NOTIFY_RUN = FailureNotifier(S.on_failure, run_level=True)  # the run's: only what no task reported

    def _path_param(description: str) -> Param:
        # No default: a path is chosen by whoever triggers the run (and must lie under CTCALC_COMPARE_ROOT if set).
        return Param(None, type=["null", "string"], description=description)

    @dag(
        dag_id="compare_pipelines",
        schedule=None,
        start_date=S.start_date,
        catchup=False,
        dagrun_timeout=dt.timedelta(seconds=S.dagrun_timeout_s),
        on_failure_callback=NOTIFY_RUN,
        default_args={"owner": S.owner, "retries": S.retries, "retry_exponential_backoff": True,
                      "execution_timeout": dt.timedelta(seconds=S.task_timeout_s), "on_failure_callback": NOTIFY},
        params={
            "config": _path_param("job YAML (split, histogram, ...), e.g. conf/demo.yaml"),
            "pipeline_a": Param("deepfm_bn", type="string", description="name of pipeline A (the model column)"),
            "spec_a": Param({"arch": "deepfm", "batch_norm": True}, type="object", description="ModelSpec of A"),
            "pipeline_b": Param("deepfm", type="string", description="name of pipeline B"),
            "spec_b": Param({"arch": "deepfm"}, type="object", description="ModelSpec of B"),
            "runs": Param(5, type="integer", minimum=2, description="training runs (seeds) per pipeline"),
            "ds": Param(None, type=["null", "string"], description="evaluation day YYYY-MM-DD"),
            "train_path": _path_param("training rows (Parquet)"),
            "features_path": _path_param("evaluation rows to score (Parquet)"),
            "workdir": _path_param("folder for every output"),
        },
        tags=["ctcalc"],
        doc_md=COMPARE_DOC,
    )
    def build():  # type: ignore[no-untyped-def]
        def plan(params):  # type: ignore[no-untyped-def]
            from airflow.sdk import Variable

            orch.raise_problems(S)
            variables = {orch.VAR_PROJECT_DIR: Variable.get(orch.VAR_PROJECT_DIR, default=None)}
            project = orch.resolve("project_dir", {}, variables, S) or S.project_dir
            return orch.compare_plan(params, project, allowed_root=S.compare_root)

        @task(multiple_outputs=True)
        def settings(params=None):  # type: ignore[no-untyped-def]
            """Absolute paths and the job arguments (see ctcalc_spark.orchestration.tasks.compare_plan)."""
            with orch.fail_for_good_on_config_errors():
                return {k: v for k, v in plan(params).items() if k != "train_jobs"}

        @task
        def plan_runs(params=None) -> list[dict]:  # type: ignore[no-untyped-def]
            """One training job per (pipeline, run): what `train` is mapped over."""
            with orch.fail_for_good_on_config_errors():
                return plan(params)["train_jobs"]  # type: ignore[no-any-return]

        @task(max_active_tis_per_dagrun=2, execution_timeout=dt.timedelta(seconds=S.spark_timeout_s),
              doc_md="Train one run (seed = run) of one pipeline; save the model file.")  # a mapped task: no docstring
        def train(job: dict) -> dict:
            import pandas as pd

            from ctcalc_spark.upstream.models import ModelSpec
            from ctcalc_spark.upstream.train import save_model, train_model

            spec = ModelSpec(**job["spec"])
            model, meta = train_model(spec, pd.read_parquet(job["train_path"]), seed=int(job["run"]), progress=False)
            save_model(job["model_path"], model, spec, meta)
            return {"pipeline": job["pipeline"], "run": job["run"], "model_path": job["model_path"]}

        @task(execution_timeout=dt.timedelta(seconds=S.spark_timeout_s))
        def score(trained: list[dict], features_path: str, eval_path: str) -> str:
            """Score the evaluation rows with every trained run -> the evaluation table (replaced)."""
            from ctcalc_spark.upstream.score import write_scores

            models = {(t["pipeline"], int(t["run"])): t["model_path"] for t in trained}
            return str(write_scores(models, features_path, eval_path))

        s = settings()
        trained = train.expand(job=plan_runs())
        scored = score(trained, s["features_path"], s["eval_path"])
        spark_timeout = dt.timedelta(seconds=S.spark_timeout_s)
        evaluate = CtcalcSparkSubmitOperator(task_id="evaluate", conn_id=S.conn_id, application=s["evaluate_app"],
                                             application_args=s["evaluate_args"], name="ctcalc-compare-evaluate",
                                             execution_timeout=spark_timeout, pool=S.spark_pool,
                                             doc_md="`ctcalc evaluate` of the scored table: metrics and summaries.")
        compare = CtcalcSparkSubmitOperator(task_id="compare", conn_id=S.conn_id, application=s["compare_app"],
                                            application_args=s["compare_args"], name="ctcalc-compare",
                                            execution_timeout=spark_timeout, pool=S.spark_pool,
                                            doc_md="`ctcalc compare` of the two pipelines: metric accuracy, vanilla "
                                                   "vs calibrated, and the HTML report.")
        scored >> evaluate >> compare

    return build()
