"""Run by tests/test_airflow.py in a subprocess (Airflow reads AIRFLOW_HOME once, at import).

    python tests/_airflow_scenario.py <dags folder> <scratch dir> <result json> <day1> <day2> <today>

Runs after the real-scheduler catch-up of day1 and day2, on the same metadata DB and outputs, and
drives ``dag.test()`` through what that run does not cover (one process, so the in-process API server
starts once):

1. day 2 drift check only (other tasks marked success), tiny threshold, callback from the Variable
2. the same without a callback: the drift check fails the run (and the failure notifier records it)
3. a run param that chooses code (drift_callback) without CTCALC_TRUST_PARAMS: settings refuses it
4. day 2 with day 1's summaries deleted (a Delta commit, restored after): the previous-window check stops the
   run, saying why
5. today, whose partition has data files but no _SUCCESS: the sensor times out, nothing runs after it
6. day 1 from rows with a missing logit: evaluate exits 4 and its task fails for good (no retries)
7. compare_pipelines on tiny generated CTR data

``python tests/_airflow_scenario.py connect <dags folder> <result json> <day1> <day2> <bad input> <bad output>
<ctr folder> <compare workdir>`` runs both days, a bad day and compare_pipelines on a Spark Connect connection
instead (see :func:`connect_main`).
"""
from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
from pathlib import Path


def main(dags_folder: str, scratch: str, result_path: str, day1: str, day2: str, today: str) -> None:
    from airflow.dag_processing.dagbag import DagBag

    t0 = time.perf_counter()
    bag = DagBag(dag_folder=dags_folder)
    assert not bag.import_errors, bag.import_errors
    result: dict = {"runs": []}
    dag = bag.dags["daily_calibrated_eval"]
    out = Path(scratch) / "out"

    def record(name: str, dr, t: float, **extra) -> None:  # type: ignore[no-untyped-def]
        states = {(ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"):
                  str(getattr(ti.state, "value", ti.state)) for ti in dr.get_task_instances()}
        result["runs"].append({"name": name, "run_id": dr.run_id, "state": str(getattr(dr.state, "value", dr.state)),
                               "tasks": states, "seconds": time.perf_counter() - t, **extra})
        Path(result_path).write_text(json.dumps(result, indent=1, default=str))

    def run(name: str, day: str, **kwargs) -> None:  # type: ignore[no-untyped-def]
        t = time.perf_counter()
        dr = dag.test(logical_date=dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc), **kwargs)
        record(name, dr, t, ds=day)

    only_drift = r"^(score|evaluate|rolling|report)$"
    after_previous = r"^(score|evaluate|rolling|report|drift_check)$"
    # dag.test() in one process carries params of an earlier run_conf over: state every one each time.
    defaults = {"bias_threshold": None, "drift_callback": None}
    os.environ["AIRFLOW_VAR_CTCALC_DRIFT_CALLBACK"] = "probe:record_drift"  # read by Variable.get at run time
    run("drift_callback", day2, mark_success_pattern=only_drift, run_conf={**defaults, "bias_threshold": 1e-9})
    del os.environ["AIRFLOW_VAR_CTCALC_DRIFT_CALLBACK"]
    run("drift_fails", day2, mark_success_pattern=only_drift, run_conf={**defaults, "bias_threshold": 1e-9})
    run("untrusted_param", day2, run_conf={**defaults, "drift_callback": "probe:record_drift"})

    from deltalake import DeltaTable

    summaries = DeltaTable(str(out / "summaries"))
    kept = summaries.version()
    summaries.delete(f"ds = '{day1}'")
    try:
        run("missing_previous", day2, mark_success_pattern=after_previous, run_conf=defaults)
    finally:
        DeltaTable(str(out / "summaries")).restore(kept)
    run("partial_today", today, run_conf=defaults)
    # Day 1 from rows with a missing logit (written by the test): evaluate exits 4, the task fails without retries.
    overrides = os.environ["AIRFLOW_VAR_CTCALC_OVERRIDES"]
    os.environ["AIRFLOW_VAR_CTCALC_OVERRIDES"] = json.dumps({**json.loads(overrides), "output.path": str(out) + "_bad",
                                                             "input.path": str(Path(scratch) / "eval_bad")})
    run("bad_input", day1, run_conf=defaults)
    os.environ["AIRFLOW_VAR_CTCALC_OVERRIDES"] = overrides

    # compare_pipelines end to end on tiny generated CTR data: train 2 x 2 runs, score, evaluate, compare.
    t = time.perf_counter()
    record("compare", bag.dags["compare_pipelines"].test(logical_date=None, run_conf=compare_conf(
        Path(scratch) / "ctr", Path(scratch) / "compare")), t)
    result["total_s"] = time.perf_counter() - t0
    Path(result_path).write_text(json.dumps(result, indent=1, default=str))


def compare_conf(ctr: Path, workdir: Path) -> dict:
    """The params of a compare_pipelines run on the CTR tables in ``ctr``, writing under ``workdir``."""
    return {"pipeline_a": "lr_a", "spec_a": {"arch": "lr"}, "pipeline_b": "fm_b", "spec_b": {"arch": "fm"}, "runs": 2,
            "ds": "2026-11-02", "config": "conf/demo.yaml", "train_path": str(ctr / "train.parquet"),
            "features_path": str(ctr / "eval.parquet"), "workdir": str(workdir)}


def connect_main(dags_folder: str, result_path: str, day1: str, day2: str, bad_input: str, bad_output: str,
                 ctr: str, compare_workdir: str) -> None:
    """``connect`` mode: both days end to end with ``dag.test()``, the Spark connection being a Spark Connect one
    (the environment sets it, and the output path, before Airflow is imported); then day 1 again from
    ``bad_input`` (a missing logit) into ``bad_output``: evaluate must fail for good, without retries; then
    compare_pipelines on the CTR tables in ``ctr``, writing under ``compare_workdir``."""
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=dags_folder)
    assert not bag.import_errors, bag.import_errors
    dag = bag.dags["daily_calibrated_eval"]
    runs = []
    for day in (day1, day2, day1):
        t = time.perf_counter()
        dr = dag.test(logical_date=dt.datetime.fromisoformat(day).replace(tzinfo=dt.timezone.utc),
                      run_conf={"bias_threshold": None, "drift_callback": None})
        runs.append({"ds": day, "state": str(getattr(dr.state, "value", dr.state)), "seconds": time.perf_counter() - t,
                     "run_id": dr.run_id,
                     "tasks": {ti.task_id: str(getattr(ti.state, "value", ti.state)) for ti in dr.get_task_instances()}})
        if day == day2:  # then the bad day
            overrides = {**json.loads(os.environ["AIRFLOW_VAR_CTCALC_OVERRIDES"]), "input.path": bad_input,
                         "output.path": bad_output}
            os.environ["AIRFLOW_VAR_CTCALC_OVERRIDES"] = json.dumps(overrides)
    t = time.perf_counter()
    dr = bag.dags["compare_pipelines"].test(logical_date=None, run_conf=compare_conf(Path(ctr), Path(compare_workdir)))
    compare = {"state": str(getattr(dr.state, "value", dr.state)), "seconds": time.perf_counter() - t,
               "tasks": {f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id:
                         str(getattr(ti.state, "value", ti.state)) for ti in dr.get_task_instances()}}
    Path(result_path).write_text(json.dumps({"runs": runs, "compare": compare}, indent=1))


if __name__ == "__main__":
    if sys.argv[1] == "connect":
        connect_main(*sys.argv[2:10])
    else:
        main(*sys.argv[1:7])
