"""Run by tests/test_airflow.py in a subprocess (Airflow reads AIRFLOW_HOME once, at import).

    python tests/_airflow_scenario.py <dags folder> <scratch dir> <result json>

Loads the DAGs with DagBag, records the task graphs, then drives ``dag.test()`` through the
scenario the tests check (one process, so the in-process API server starts once):

1. day 1, day 2 end to end; copy the outputs to <scratch>/snap_before_rerun
2. day 2 again; copy the outputs to <scratch>/snap_after_rerun
3. day 2 drift check only (other tasks marked success), tiny threshold + callback: alerts, succeeds
4. the same without a callback: the drift check fails the run
5. day 3, which has no evaluation partition: the sensor times out, nothing downstream runs
6. compare_pipelines on tiny generated CTR data
"""
from __future__ import annotations

import datetime as dt
import json
import shutil
import sys
import time
from pathlib import Path


def graph(dag) -> dict:  # type: ignore[no-untyped-def]
    tasks = {}
    for t in dag.tasks:
        tasks[t.task_id] = {
            "type": type(t).__name__,
            "downstream": sorted(t.downstream_task_ids),
            "trigger_rule": str(t.trigger_rule),
            "retries": t.retries,
            "retry_exponential_backoff": bool(t.retry_exponential_backoff),
            "conn_id": getattr(t, "_conn_id", None),
            "application": getattr(t, "application", None),
            "timeout": getattr(t, "timeout", None),
            "mode": getattr(t, "mode", None),
        }
    return {"schedule": str(getattr(dag, "schedule", None)), "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs, "params": sorted(dag.params.keys()), "tasks": tasks}


def main(dags_folder: str, scratch: str, result_path: str) -> None:
    from airflow.dag_processing.dagbag import DagBag

    t0 = time.perf_counter()
    bag = DagBag(dag_folder=dags_folder)
    result: dict = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()},
                    "dag_ids": sorted(bag.dag_ids), "dagbag_s": time.perf_counter() - t0, "runs": []}
    result["graphs"] = {d: graph(bag.get_dag(d)) for d in bag.dag_ids}
    dag = bag.get_dag("daily_calibrated_eval")
    out = Path(scratch) / "out"

    def run(name: str, day: str, **kwargs) -> None:  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        dr = dag.test(logical_date=dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc), **kwargs)
        states = {ti.task_id: str(ti.state.value if hasattr(ti.state, "value") else ti.state)
                  for ti in dr.get_task_instances()}
        state = str(dr.state.value if hasattr(dr.state, "value") else dr.state)
        result["runs"].append({"name": name, "ds": day, "state": state, "tasks": states,
                               "seconds": time.perf_counter() - t})
        Path(result_path).write_text(json.dumps(result, indent=1, default=str))

    only_drift = r"^(score|evaluate|rolling|report)$"
    # dag.test() in one process carries params of an earlier run_conf over: state every one each time.
    defaults = {"bias_threshold": None, "drift_callback": None}
    run("day1", "2026-11-15", run_conf=defaults)
    run("day2", "2026-11-16", run_conf=defaults)
    shutil.copytree(out, Path(scratch) / "snap_before_rerun")
    run("day2_rerun", "2026-11-16", run_conf=defaults)
    shutil.copytree(out, Path(scratch) / "snap_after_rerun")
    run("drift_callback", "2026-11-16", mark_success_pattern=only_drift,
        run_conf={"bias_threshold": 1e-9, "drift_callback": "drift_probe:record"})
    run("drift_fails", "2026-11-16", mark_success_pattern=only_drift,
        run_conf={"bias_threshold": 1e-9, "drift_callback": None})
    run("missing_day", "2026-11-17", run_conf=defaults)

    # compare_pipelines end to end on tiny generated CTR data: train 2 x 2 runs, score, evaluate, compare.
    cmp_dag = bag.get_dag("compare_pipelines")
    ctr = Path(scratch) / "ctr"
    t = time.perf_counter()
    dr = cmp_dag.test(logical_date=None, run_conf={
        "pipeline_a": "lr_a", "spec_a": {"arch": "lr"}, "pipeline_b": "fm_b", "spec_b": {"arch": "fm"}, "runs": 2,
        "ds": "2026-11-02", "train_path": str(ctr / "train.parquet"), "features_path": str(ctr / "eval.parquet"),
        "workdir": str(Path(scratch) / "compare")})
    result["runs"].append({"name": "compare", "state": str(getattr(dr.state, "value", dr.state)),
                           "tasks": {f"{ti.task_id}[{ti.map_index}]": str(getattr(ti.state, "value", ti.state))
                                     for ti in dr.get_task_instances()},
                           "seconds": time.perf_counter() - t})
    result["total_s"] = time.perf_counter() - t0
    Path(result_path).write_text(json.dumps(result, indent=1, default=str))


if __name__ == "__main__":
    main(*sys.argv[1:4])
