"""The DAGs under real Airflow 3 (SQLite metadata DB in a temporary AIRFLOW_HOME).

Airflow runs in one subprocess (tests/_airflow_scenario.py): it reads AIRFLOW_HOME at import,
and one process keeps the in-process API server start-up of ``dag.test()`` to a single time.
The daily DAG runs on two days of demo data through SparkSubmitOperator on ``local[2]``.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
DAY1, DAY2, DAY3 = "2026-11-15", "2026-11-16", "2026-11-17"
DAILY_GRAPH = {
    "settings": ["drift_check", "evaluate", "maybe_score", "report", "rolling", "score", "wait_for_eval_partition"],
    "wait_for_eval_partition": ["maybe_score"],
    "maybe_score": ["evaluate", "score"],
    "score": ["evaluate"],
    "evaluate": ["rolling"],
    "rolling": ["report"],
    "report": ["drift_check"],
    "drift_check": [],
}
# Short-lived JVMs on 2 cores: C1 only and the serial GC halve the CPU time of a small job.
SPARK_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
              "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
DRIFT_PROBE = '''
import json, os
def record(ds, drifted, threshold, rolling_path, **_):
    with open(os.environ["DRIFT_PROBE_OUT"], "w") as f:
        json.dump({"ds": ds, "rows": len(drifted), "threshold": threshold, "path": rolling_path}, f)
'''


def airflow_env(home: Path, scratch: Path) -> dict[str, str]:
    """Environment of every Airflow process of these tests: temp home, demo paths, local[2] connection."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),  # spark-submit and ctcalc of this venv
        # drift_probe.py, the test's alert callback
        "PYTHONPATH": os.pathsep.join(p for p in (str(scratch), os.environ.get("PYTHONPATH", "")) if p),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_VAR_CTCALC_OVERRIDES": json.dumps({"input.path": str(scratch / "eval"),
                                                    "output.path": str(scratch / "out")}),
        "AIRFLOW_VAR_CTCALC_SPARK_CONF": json.dumps(SPARK_CONF),
        "AIRFLOW_VAR_CTCALC_BIAS_THRESHOLD": "0.5",
        "CTCALC_RETRIES": "0",  # a failure should fail the test now, not wait for a retry
        "CTCALC_SENSOR_MODE": "poke",
        "CTCALC_SENSOR_POKE_S": "2",
        "CTCALC_SENSOR_TIMEOUT_S": "8",
        "DRIFT_PROBE_OUT": str(scratch / "drift_alert.json"),
    }


@pytest.fixture(scope="module")
def scenario(tmp_path_factory):
    """Migrate a fresh metadata DB, write 2 days of demo data, run tests/_airflow_scenario.py once."""
    from ctcalc_spark.upstream.data import write_ctr_tables
    from ctcalc_spark.demo import write_demo_eval

    scratch = tmp_path_factory.mktemp("airflow")
    env = airflow_env(scratch / "airflow_home", scratch)
    (scratch / "drift_probe.py").write_text(DRIFT_PROBE)
    write_demo_eval(scratch / "eval", n_examples_per_day=2000, n_runs=2, n_days=2)
    write_ctr_tables(scratch / "ctr", n_train=20_000, n_eval=4000, seed=0)  # eval day 2026-11-02
    t = time.perf_counter()
    subprocess.run([str(Path(sys.executable).parent / "airflow"), "db", "migrate"], env=env, check=True,
                   capture_output=True, cwd=scratch)
    migrate_s = time.perf_counter() - t
    log = scratch / "scenario.log"
    with log.open("w") as f:
        proc = subprocess.run([sys.executable, str(REPO / "tests" / "_airflow_scenario.py"), str(REPO / "dags"),
                               str(scratch), str(scratch / "result.json")], env=env, stdout=f,
                              stderr=subprocess.STDOUT, cwd=scratch, timeout=600)
    tail = "\n".join(log.read_text().splitlines()[-60:])
    assert proc.returncode == 0, f"scenario failed:\n{tail}"
    result = json.loads((scratch / "result.json").read_text())
    result["migrate_s"] = migrate_s
    print(json.dumps({"migrate_s": round(migrate_s, 1), "total_s": round(result["total_s"], 1),
                      "runs": {r["name"]: round(r["seconds"], 1) for r in result["runs"]}}))
    return scratch, result, tail


def _run(result: dict, name: str) -> dict:
    return next(r for r in result["runs"] if r["name"] == name)


def test_dagbag_has_no_import_errors(scenario):
    _, result, _ = scenario
    assert result["import_errors"] == {}
    assert {"daily_calibrated_eval", "compare_pipelines"} <= set(result["dag_ids"])


def test_daily_task_graph(scenario):
    _, result, _ = scenario
    g = result["graphs"]["daily_calibrated_eval"]
    assert {t: v["downstream"] for t, v in g["tasks"].items()} == DAILY_GRAPH
    assert g["schedule"] == "@daily" and g["max_active_runs"] == 1
    assert {"config", "bias_threshold", "score", "drift_callback"} <= set(g["params"])
    tasks = g["tasks"]
    for job, script in (("evaluate", "jobs/evaluate.py"), ("rolling", "jobs/rolling.py")):
        assert tasks[job]["type"] == "SparkSubmitOperator" and tasks[job]["conn_id"] == "spark_default"
        assert tasks[job]["application"].endswith(script)
    assert tasks["evaluate"]["trigger_rule"].lower().endswith("none_failed_min_one_success")
    assert tasks["wait_for_eval_partition"]["mode"] == "poke" and tasks["wait_for_eval_partition"]["timeout"] == 8
    assert all(t["retry_exponential_backoff"] for t in tasks.values())


def test_compare_task_graph(scenario):
    _, result, _ = scenario
    g = result["graphs"]["compare_pipelines"]
    assert g["schedule"] == "None"
    down = {t: v["downstream"] for t, v in g["tasks"].items()}
    assert down["train"] == ["score"] and down["score"] == ["evaluate"] and down["evaluate"] == ["compare"]
    assert g["tasks"]["evaluate"]["type"] == g["tasks"]["compare"]["type"] == "SparkSubmitOperator"
    assert {"pipeline_a", "pipeline_b", "runs", "ds"} <= set(g["params"])


def test_compare_dag_runs_end_to_end(scenario):
    scratch, result, tail = scenario
    run = _run(result, "compare")
    assert run["state"] == "success", (run, tail)
    assert sum(t.startswith("train[") for t in run["tasks"]) == 4  # 2 pipelines x 2 runs, mapped
    out = scratch / "compare"
    assert sorted(p.name for p in (out / "models").iterdir()) == ["fm_b", "lr_a"]
    assert (out / "eval" / "ds=2026-11-02").is_dir() and (out / "out" / "metrics" / "ds=2026-11-02").is_dir()
    c = json.loads((out / "out" / "compare" / "lr_a_vs_fm_b" / "comparison.json").read_text())["comparisons"][0]
    assert (c["name_a"], c["name_b"], c["m_a"], c["m_b"]) == ("lr_a", "fm_b", 2, 2)
    assert 0.0 <= c["vanilla"]["acc"] <= 1.0 and 0.0 <= c["calibrated"]["acc"] <= 1.0


def test_daily_dag_runs_two_days_end_to_end(scenario):
    import pandas as pd

    scratch, result, tail = scenario
    out = scratch / "out"
    for name, day in (("day1", DAY1), ("day2", DAY2)):
        run = _run(result, name)
        assert run["state"] == "success", (run, tail)
        assert run["tasks"]["score"] == "skipped"
        assert all(run["tasks"][t] == "success" for t in DAILY_GRAPH if t != "score"), run
        for table in ("metrics", "summaries", "rolling"):
            part = pd.read_parquet(out / table / f"ds={day}")
            assert len(part) > 0
        metrics = pd.read_parquet(out / "metrics" / f"ds={day}")
        assert set(metrics["status"]) == {"ok"}
        assert len(metrics[metrics["slice_name"] == "__all__"]) == 3 * 2  # 3 demo models x 2 runs
        report = out / "reports" / f"ds={day}"
        assert sorted(p.suffix for p in report.iterdir()) == [".csv", ".csv", ".html", ".json"]  # rows, flags
        assert len(list(report.glob("drift_*_flags.csv"))) == 1
    # Only the days that ran exist: every task wrote the partition of its own logical date.
    for table in ("metrics", "summaries", "rolling"):
        assert sorted(p.name for p in (out / table).glob("ds=*")) == [f"ds={DAY1}", f"ds={DAY2}"]
    whole = pd.read_parquet(out / "metrics")  # the table as a reader sees it: ds from the folder names
    assert sorted(whole["ds"].astype(str).unique()) == [DAY1, DAY2]
    rolling2 = pd.read_parquet(out / "rolling" / f"ds={DAY2}")
    assert rolling2["bias_change"].notna().all() and rolling2["prev_window"].eq(DAY1).all()


def _table_contents(root: Path) -> dict[str, object]:
    """Partition -> sorted rows (Parquet) or bytes (reports, minus the generation timestamp)."""
    import pandas as pd

    found: dict[str, object] = {}
    for table in ("metrics", "summaries", "rolling"):
        for part in sorted((root / table).glob("ds=*")):
            df = pd.read_parquet(part)
            found[f"{table}/{part.name}"] = df.sort_values(list(df.columns)).reset_index(drop=True)
    for f in sorted((root / "reports").rglob("*.*")):
        text = f.read_text()
        found[str(f.relative_to(root))] = re.sub(r"Generated [0-9: -]+ UTC", "Generated <t> UTC", text)
    return found


def test_rerun_of_a_day_changes_nothing(scenario):
    import pandas as pd

    scratch, result, tail = scenario
    assert _run(result, "day2_rerun")["state"] == "success", tail
    before = _table_contents(scratch / "snap_before_rerun")
    after = _table_contents(scratch / "snap_after_rerun")
    assert sorted(before) == sorted(after) and len(before) >= 8
    for key, value in before.items():
        if isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(value, after[key], check_exact=True, obj=key)
        else:
            assert value == after[key], key
    # No leftovers of the atomic swaps next to the partitions.
    assert not list((scratch / "snap_after_rerun").rglob("*.old.*"))


def test_drift_check_alerts_through_callback(scenario):
    scratch, result, _ = scenario
    run = _run(result, "drift_callback")
    assert run["state"] == "success" and run["tasks"]["drift_check"] == "success"
    alert = json.loads((scratch / "drift_alert.json").read_text())
    assert alert["ds"] == DAY2 and alert["rows"] > 0 and alert["threshold"] == 1e-9


def test_drift_check_fails_loudly_without_callback(scenario):
    _, result, _ = scenario
    run = _run(result, "drift_fails")
    assert run["state"] == "failed" and run["tasks"]["drift_check"] == "failed"
    assert run["tasks"]["evaluate"] == "success"  # marked success: only the check ran


def test_missing_day_times_out_in_the_sensor(scenario):
    scratch, result, _ = scenario
    run = _run(result, "missing_day")
    assert run["state"] == "failed"
    assert run["tasks"]["wait_for_eval_partition"] == "failed"
    assert run["seconds"] >= 8  # it waited for the sensor timeout
    assert all(run["tasks"][t] == "upstream_failed" for t in ("maybe_score", "evaluate", "rolling", "report",
                                                             "drift_check"))
    for table in ("metrics", "summaries", "rolling", "reports"):
        assert not (scratch / "out" / table / f"ds={DAY3}").exists()


def test_drift_rows_and_run_settings(scenario):
    """The helpers the tasks call, on the rolling partition the DAG wrote."""
    from ctcalc_spark.orchestration import tasks as orch

    scratch, _, _ = scenario
    part = str(scratch / "out" / "rolling" / f"ds={DAY2}")
    drifted, n, max_abs = orch.drift_rows(part, 1e-9)
    assert n == len(drifted) > 0 and max_abs > 0
    assert orch.drift_rows(part, max_abs)[0].empty
    s = orch.run_settings(DAY2, variables={orch.VAR_OVERRIDES: json.dumps({"output.path": "/data/x"}),
                                           orch.VAR_BIAS_THRESHOLD: "0.3"},
                          params={"bias_threshold": 0.2}, project_dir=str(REPO))
    assert s["bias_threshold"] == 0.2 and s["rolling_path"] == f"/data/x/rolling/ds={DAY2}"
    assert s["sensor_path"] == str(REPO / "output/demo/eval" / f"ds={DAY2}")
    assert s["job_args"][:4] == ["--config", str(REPO / "conf/demo.yaml"), "--ds", DAY2]
    assert orch.parse_settings(env={}).retries == 2 and orch.parse_settings(env={}).sensor_mode == "reschedule"


def test_partition_ready(tmp_path):
    from ctcalc_spark.orchestration.tasks import partition_ready

    part = tmp_path / "ds=2026-11-15"
    assert not partition_ready(str(part))[0]
    part.mkdir()
    assert not partition_ready(str(part))[0]
    (part / "part-0.parquet").write_bytes(b"")
    assert not partition_ready(str(part))[0]  # an empty file is not data
    (part / "_SUCCESS").write_text("")
    assert partition_ready(str(part))[0]
    (part / "_SUCCESS").unlink()
    (part / "part-0.parquet").write_bytes(b"PAR1")
    assert partition_ready(str(part))[0]


def test_score_partition_replaces_only_its_day(scenario, tmp_path):
    """The daily DAG's optional `score` step, with model files trained by the compare DAG run."""
    import pandas as pd

    from ctcalc_spark.orchestration.tasks import score_partition

    scratch, _, _ = scenario
    models = {"lr_a": [str(scratch / "compare" / "models" / "lr_a" / f"run{r}.pt") for r in (0, 1)]}
    other = tmp_path / "eval" / "ds=2026-11-01"
    other.mkdir(parents=True)
    (other / "keep.parquet").write_bytes(b"x")
    target = tmp_path / "eval" / "ds=2026-11-02"
    for _ in range(2):  # the second call replaces the first
        score_partition(models, str(scratch / "ctr" / "eval.parquet"), str(target), "2026-11-02")
    scored = pd.read_parquet(target)
    assert len(scored) == 2 * 4000 and set(scored["model"]) == {"lr_a"} and sorted(scored["run"].unique()) == [0, 1]
    assert scored["logit"].notna().all()
    assert (other / "keep.parquet").read_bytes() == b"x"
    assert sorted(p.name for p in (tmp_path / "eval").iterdir()) == ["_staging", "ds=2026-11-01", "ds=2026-11-02"]
    assert not list((tmp_path / "eval" / "_staging").iterdir())
