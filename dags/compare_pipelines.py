"""Compare two training pipelines on demand: train `runs` seeds of each, score the evaluation
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
from __future__ import annotations

import datetime as dt

from airflow.sdk import Param, dag, task

from ctcalc_spark.orchestration import tasks as orch
from ctcalc_spark.orchestration.notify import FailureNotifier
from ctcalc_spark.orchestration.operators import CtcalcSparkSubmitOperator

S = orch.parse_settings(__file__)
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
    doc_md=__doc__,
)
def compare_pipelines():  # type: ignore[no-untyped-def]
    def plan(params):  # type: ignore[no-untyped-def]
        from airflow.sdk import Variable

        orch.raise_problems(S)
        variables = {orch.VAR_PROJECT_DIR: Variable.get(orch.VAR_PROJECT_DIR, default=None)}
        project = orch.resolve("project_dir", {}, variables, S) or S.project_dir
        return orch.compare_plan(params, project, allowed_root=S.compare_root)

    @task(multiple_outputs=True)
    def settings(params=None):  # type: ignore[no-untyped-def]
        """Absolute paths and the job arguments (see ctcalc_spark.orchestration.tasks.compare_plan)."""
        return {k: v for k, v in plan(params).items() if k != "train_jobs"}

    @task
    def plan_runs(params=None) -> list[dict]:  # type: ignore[no-untyped-def]
        """One training job per (pipeline, run): what `train` is mapped over."""
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


compare_pipelines()
