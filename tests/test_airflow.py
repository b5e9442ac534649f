"""The DAGs under real Airflow 3 (SQLite metadata DB in a temporary AIRFLOW_HOME).

* Cheap: the DAG files parse with no setting at all (DagBag in a subprocess), and the helpers the
  tasks call (settings, trust model, readiness, previous window, drift verdict, redaction).
* Slow, one module fixture each, sharing one AIRFLOW_HOME and one set of demo data:
  1. ``scheduler``: a real Airflow (api-server, dag-processor, scheduler, LocalExecutor) catches up
     the two completed days before today; today's partition is written without its ``_SUCCESS``.
  2. ``scenario``: tests/_airflow_scenario.py drives ``dag.test()`` through what the scheduler run
     does not cover (drift verdicts, trust refusal, missing previous window, partial day,
     compare_pipelines). Rerunning a day changes nothing: tests/test_evaluate.py and
     tests/test_rolling.py check that on the jobs the DAG submits.
"""
from __future__ import annotations

import contextlib
import datetime as dt
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
needs_airflow = pytest.mark.skipif(importlib.util.find_spec("airflow") is None,
                                   reason="Airflow is not installed (pip install -e '.[airflow]')")
DAILY_GRAPH = {
    "settings": ["drift_check", "evaluate", "maybe_score", "report", "rolling", "score", "vacuum",
                 "wait_for_eval_partition", "wait_for_previous_window"],
    "wait_for_eval_partition": ["maybe_score"],
    "wait_for_previous_window": ["maybe_score"],
    "maybe_score": ["evaluate", "score"],
    "score": ["evaluate"],
    "evaluate": ["rolling"],
    "rolling": ["report"],
    "report": ["drift_check", "vacuum"],
    "drift_check": [],
    "vacuum": [],
}
# A secret-looking override that every job receives: no log and no stored rendered field may show it.
SECRET = "jaas-" + secrets.token_hex(8)
# Short-lived JVMs on 2 cores: C1 only and the serial GC halve the CPU time of a small job.
SPARK_CONF = {"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
              "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"}
PROBE = '''
import json, os
def record_drift(ds, drifted, threshold, rolling_path, **_):
    with open(os.environ["PROBE_DRIFT_OUT"], "w") as f:
        json.dump({"ds": ds, "rows": len(drifted), "threshold": threshold, "path": rolling_path}, f)
def on_failure(**info):
    with open(os.environ["PROBE_FAILURE_OUT"], "a") as f:
        f.write(json.dumps(info) + "\\n")
'''


def _utc_today() -> dt.date:
    return dt.datetime.now(dt.timezone.utc).date()


def _day(offset: int, today: dt.date) -> str:
    return (today + dt.timedelta(days=offset)).isoformat()


def airflow_env(home: Path, scratch: Path, first_day: str) -> dict[str, str]:
    """Environment of every Airflow process of these tests: temp home, demo paths, local[2] connection."""
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(("CTCALC_", "AIRFLOW"))},
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_FOLDER": str(REPO / "dags"),
        "PATH": str(BIN) + os.pathsep + os.environ.get("PATH", ""),  # airflow, spark-submit, ctcalc of this venv
        # This checkout's code first (in every subprocess: scheduler, task runners, spark-submit), then probe.py.
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), str(scratch), os.environ.get("PYTHONPATH", "")) if p),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[2]"}),
        "AIRFLOW_VAR_CTCALC_CONFIG": "conf/demo.yaml",
        "AIRFLOW_VAR_CTCALC_OVERRIDES": json.dumps({"input.path": str(scratch / "eval"),
                                                    "output.path": str(scratch / "out"),
                                                    "stream.kafka_options": {"kafka.sasl.jaas.config": SECRET}}),
        "AIRFLOW_VAR_CTCALC_SPARK_CONF": json.dumps(SPARK_CONF),
        "AIRFLOW_VAR_CTCALC_BIAS_THRESHOLD": "0.5",
        "CTCALC_START_DATE": first_day,
        "CTCALC_CATCHUP": "true",
        "CTCALC_OWNER": "ml-eval",
        "CTCALC_ON_FAILURE": "probe:on_failure",
        "CTCALC_RETRIES": "0",  # a failure should fail the test now, not wait for a retry
        "CTCALC_SENSOR_MODE": "poke",
        "CTCALC_SENSOR_POKE_S": "2",
        "CTCALC_SENSOR_TIMEOUT_S": "8",
        "CTCALC_PREVIOUS_TIMEOUT_S": "8",
        "PROBE_DRIFT_OUT": str(scratch / "drift_alert.json"),
        "PROBE_FAILURE_OUT": str(scratch / "failures.jsonl"),
    }


# ---- cheap: parsing -------------------------------------------------------------------------------------

PARSE_PROBE = r'''
import json, os, sys
from airflow.dag_processing.dagbag import DagBag

def callbacks(c):
    return c if isinstance(c, list) else [c] if c else []

def describe():
    bag = DagBag(sys.argv[1])
    out = {"import_errors": {k: str(v) for k, v in bag.import_errors.items()}, "dags": {}}
    for dag_id, dag in bag.dags.items():
        out["dags"][dag_id] = {
            "timetable": type(dag.timetable).__name__, "start_date": str(dag.start_date), "catchup": dag.catchup,
            "max_active_runs": dag.max_active_runs, "dagrun_timeout": str(dag.dagrun_timeout),
            "on_failure_callback": type(dag.on_failure_callback).__name__, "params": sorted(dag.params.keys()),
            "tasks": {t.task_id: {"type": type(t).__name__, "downstream": sorted(t.downstream_task_ids),
                                  "owner": t.owner, "execution_timeout": str(t.execution_timeout),
                                  "retries": t.retries, "trigger_rule": str(t.trigger_rule),
                                  "on_failure": [type(c).__name__ for c in callbacks(t.on_failure_callback)],
                                  "outlets": [a.name for a in t.outlets], "mode": getattr(t, "mode", None),
                                  "timeout": getattr(t, "timeout", None), "conn_id": getattr(t, "_conn_id", None),
                                  "pool": t.pool, "doc": bool(t.doc_md)}
                      for t in dag.tasks}}
    return out

bare = describe()
os.environ.update({"CTCALC_START_DATE": "2026-11-15", "CTCALC_CATCHUP": "true", "CTCALC_OWNER": "ml-eval",
                   "CTCALC_SPARK_POOL": "ctcalc_spark",
                   "CTCALC_SENSOR_MODE": "poke", "CTCALC_SENSOR_TIMEOUT_S": "8", "CTCALC_RETRIES": "nope"})
print(json.dumps({"bare": bare, "set": describe()}))
'''


@pytest.fixture(scope="module")
def parsed(tmp_path_factory):
    """DagBag of dags/ in a subprocess with no CTCALC_* setting and no Variable at all, then with some."""
    home = tmp_path_factory.mktemp("parse_home")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTCALC_", "AIRFLOW"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)})
    proc = subprocess.run([sys.executable, "-c", PARSE_PROBE, str(REPO / "dags")], env=env, capture_output=True,
                          text=True, timeout=300, cwd=home)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@needs_airflow
def test_dags_parse_without_any_setting(parsed):
    bare = parsed["bare"]
    assert bare["import_errors"] == {}
    assert set(bare["dags"]) == {"daily_calibrated_eval", "compare_pipelines"}
    daily = bare["dags"]["daily_calibrated_eval"]
    # No start date set: no catch-up, no fixed demo date; the first run is the latest completed day.
    assert daily["timetable"] == "CronDataIntervalTimetable"
    assert daily["start_date"] == "None" and daily["catchup"] is False
    assert daily["dagrun_timeout"] == "1 day, 0:00:00" and daily["on_failure_callback"] == "FailureNotifier"
    assert {t: v["downstream"] for t, v in daily["tasks"].items()} == DAILY_GRAPH
    for dag in bare["dags"].values():
        for task_id, t in dag["tasks"].items():
            assert t["owner"] == "ctcalc", task_id
            assert t["execution_timeout"] != "None", task_id
            assert t["on_failure"] == ["FailureNotifier"], task_id
            assert t["doc"], f"{task_id} has no doc_md"
            assert t["pool"] == "default_pool", task_id  # until CTCALC_SPARK_POOL names one
    tasks = daily["tasks"]
    assert tasks["evaluate"]["outlets"] == ["ctcalc_daily_metrics", "ctcalc_daily_summaries"]
    assert tasks["rolling"]["outlets"] == ["ctcalc_daily_rolling"]
    for job in ("evaluate", "rolling"):
        assert tasks[job]["type"] == "CtcalcSparkSubmitOperator" and tasks[job]["conn_id"] == "spark_default"
        assert tasks[job]["execution_timeout"] == "4:00:00"
    assert tasks["evaluate"]["trigger_rule"].lower().endswith("none_failed_min_one_success")
    assert tasks["wait_for_eval_partition"]["mode"] == "reschedule"
    assert {"bias_threshold", "score", "previous_window", "config", "drift_callback"} <= set(daily["params"])
    compare = bare["dags"]["compare_pipelines"]
    assert compare["tasks"]["train"]["downstream"] == ["score"] and compare["tasks"]["evaluate"]["downstream"] == [
        "compare"]


SAFE_MODE_PROBE = r"""
import json, sys
from airflow.dag_processing.dagbag import DagBag

bag = DagBag(dag_folder=sys.argv[1], safe_mode=True)
print(json.dumps({"dags": sorted(bag.dags), "errors": {k: str(v) for k, v in bag.import_errors.items()}}))
"""


@needs_airflow
def test_the_documented_dag_file_parses_in_safe_mode(tmp_path):
    """The DAG file docs/airflow.md and docs/deploy.md show, written as a file of its own and parsed as the
    dag-processor does (safe mode: files without the words "dag" and "airflow" are skipped unread), gives its DAG;
    the repository's dags/ hold exactly those lines (the real-scheduler test runs them). A file importing the
    factories from ``ctcalc_spark.orchestration.dags`` alone is skipped: the check is not vacuous."""
    blocks = [b for doc in ("airflow.md", "deploy.md")
              for b in re.findall(r"```python\n(.*?)```", (REPO / "docs" / doc).read_text(), re.S)
              if "import daily_calibrated_eval" in b]
    assert len(blocks) == 2 and blocks[0] == blocks[1] == (REPO / "dags" / "daily_calibrated_eval.py").read_text()
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "daily.py").write_text(blocks[0])
    (tmp_path / "dags" / "compare.py").write_text((REPO / "dags" / "compare_pipelines.py").read_text())
    (tmp_path / "dags" / "skipped.py").write_text(blocks[0].replace(".airflow_dags import", ".dags import"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTCALC_", "AIRFLOW"))}
    env.update({"AIRFLOW_HOME": str(tmp_path / "home"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)})
    proc = subprocess.run([sys.executable, "-c", SAFE_MODE_PROBE, str(tmp_path / "dags")], env=env,
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found == {"dags": ["compare_pipelines", "daily_calibrated_eval"], "errors": {}}
    text = (tmp_path / "dags" / "skipped.py").read_text().lower()
    assert "airflow" not in text  # what safe mode skips it for


@pytest.mark.slow
@needs_airflow
def test_parse_time_settings_reach_the_dag(parsed):
    s = parsed["set"]
    assert s["import_errors"] == {}  # CTCALC_RETRIES=nope: reported by the first task of a run, not at parse
    daily = s["dags"]["daily_calibrated_eval"]
    assert daily["start_date"].startswith("2026-11-15 00:00:00") and daily["catchup"] is True
    assert {t["owner"] for t in daily["tasks"].values()} == {"ml-eval"}
    # the Spark drivers share the pool CTCALC_SPARK_POOL names, so it caps how many run at once
    assert {(d, i) for d, dag in s["dags"].items() for i, t in dag["tasks"].items() if t["pool"] == "ctcalc_spark"} \
        == {("daily_calibrated_eval", "evaluate"), ("daily_calibrated_eval", "rolling"), ("compare_pipelines", "evaluate"),
            ("compare_pipelines", "compare")}
    assert daily["tasks"]["settings"]["retries"] == 2  # the default, until CTCALC_RETRIES is fixed
    sensor = daily["tasks"]["wait_for_eval_partition"]
    assert sensor["mode"] == "poke" and sensor["timeout"] == 8
    assert sensor["execution_timeout"] == str(dt.timedelta(seconds=8 + 900))  # one poke-mode try waits it all


# ---- cheap: the helpers the tasks call -------------------------------------------------------------------

def _parse(**env: str):  # type: ignore[no-untyped-def]
    from ctcalc_spark.orchestration import tasks as orch

    return orch.parse_settings(REPO / "dags" / "daily_calibrated_eval.py",
                               env={f"CTCALC_{k.upper()}": v for k, v in env.items()})


def test_parse_settings_never_raise_and_report_problems():
    s = _parse(retries="x", catchup="true", sensor_mode="sometimes")
    assert s.retries == 2 and s.catchup is False and s.sensor_mode == "reschedule"
    assert any("CTCALC_RETRIES must be an integer >= 0, got 'x'" in p for p in s.problems)
    assert any("CTCALC_CATCHUP=true needs CTCALC_START_DATE" in p for p in s.problems)
    assert any("CTCALC_SENSOR_MODE" in p for p in s.problems)
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.orchestration.tasks import run_settings

    with pytest.raises(ConfigError, match="CTCALC_RETRIES"):
        run_settings("2026-11-16", variables={"ctcalc_config": "conf/demo.yaml"}, parse=s)
    ok = _parse(start_date="2026-11-15", catchup="true", owner="team")
    assert ok.problems == () and ok.catchup and ok.start_date == dt.datetime(2026, 11, 15, tzinfo=dt.timezone.utc)


@needs_airflow
def test_a_configuration_error_fails_the_settings_task_for_good():
    """A missing or bad setting fails `settings` at once (AirflowFailException: no retry), with the setting's own
    message; anything else (a file system error) keeps the task's retries."""
    from airflow.sdk.exceptions import AirflowFailException

    from ctcalc_spark.orchestration.tasks import fail_for_good_on_config_errors, run_settings

    with pytest.raises(AirflowFailException, match=r"^No job config: set the Airflow Variable ctcalc_config.* Not "
                                                   r"retried: .* Fix the setting, then clear the task\.$"):
        with fail_for_good_on_config_errors():
            run_settings("2026-11-16", parse=_parse())
    with pytest.raises(OSError, match="disk"):
        with fail_for_good_on_config_errors():
            raise OSError("disk")


@needs_airflow
def test_a_sensor_timeout_names_what_it_waited_for_and_a_run_before_the_start_date_warns():
    from ctcalc_spark.orchestration.notify import before_start_warning, describe_wait

    assert describe_wait({"mode": "marker", "marker": "/data/eval/ds=2026-11-16/_SUCCESS"}) == (
        "/data/eval/ds=2026-11-16/_SUCCESS")
    assert describe_wait({"mode": "marker", "markers": {"a": "/a/_SUCCESS", "b": "/b/_SUCCESS"}}) == (
        "a: /a/_SUCCESS, b: /b/_SUCCESS")
    assert describe_wait({"mode": "partition", "table": "db.ev", "column": "ds", "ds": "2026-11-16"}) == (
        "the partition ds=2026-11-16 of db.ev")
    assert describe_wait({"days": ["2026-11-15"], "summaries": "/o/summaries"}) == (
        "the summaries of 2026-11-15 in /o/summaries")
    start = dt.datetime(2026, 11, 15, tzinfo=dt.timezone.utc)
    assert before_start_warning("manual__x", start, start) is None
    warning = before_start_warning("manual__x", start - dt.timedelta(days=3), start)
    assert warning.startswith("run manual__x is dated 2026-11-12, before the DAG's start date 2026-11-15 "
                              "(CTCALC_START_DATE): Airflow ran no task of it, so nothing was evaluated")


@needs_airflow
def test_job_output_lines_reach_the_task_log_at_their_own_level():
    """A job's lines (Spark's log4j format and ctcalc's) go to the task log at their own level; the CLI's one-line
    failure at ERROR; anything else (results) at INFO. The spark-submit hook's logger is wrapped so."""
    import logging

    from ctcalc_spark.orchestration.operators import LineLevelLog
    from ctcalc_spark.orchestration.tasks import line_level

    assert line_level("26/11/29 06:43:53 INFO ctcalc_spark.progress: ctcalc evaluate: scanning ds=x") == logging.INFO
    assert line_level("26/11/29 06:43:57 WARN SparkContext: low memory") == logging.WARNING
    assert line_level("26/11/29 06:43:57 ERROR Executor: lost") == logging.ERROR
    assert line_level("ctcalc evaluate: error: Invalid evaluation rows") == logging.ERROR
    assert line_level("Whole period 2026-11-15..2026-11-21") == logging.INFO

    class Recorder:
        def __init__(self):
            self.got = []

        def log(self, level, msg, *args, **kwargs):
            self.got.append((level, msg % args if args else msg))

    rec = Recorder()
    wrapped = LineLevelLog(rec)
    wrapped.info("26/11/29 06:43:57 WARN SparkContext: w")
    wrapped.info("Identified spark driver id: %s", "driver-1")
    assert rec.got == [(logging.WARNING, "26/11/29 06:43:57 WARN SparkContext: w"),
                       (logging.INFO, "Identified spark driver id: driver-1")]


def test_run_settings_need_a_config_and_a_day():
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.orchestration.tasks import run_settings

    with pytest.raises(ConfigError, match="No job config: set the Airflow Variable ctcalc_config"):
        run_settings("2026-11-16", parse=_parse())
    with pytest.raises(ConfigError, match="no logical date"):
        run_settings(None, variables={"ctcalc_config": "conf/demo.yaml"}, parse=_parse())


def test_run_settings_paths_precedence_and_previous_window():
    from ctcalc_spark.orchestration import tasks as orch

    variables = {orch.VAR_CONFIG: "conf/demo.yaml", orch.VAR_OVERRIDES: json.dumps({"output.path": "/data/x"}),
                 orch.VAR_BIAS_THRESHOLD: "0.3"}
    s = orch.run_settings("2026-11-16", variables=variables, params={"bias_threshold": 0.2},
                          parse=_parse(start_date="2026-11-16", bias_threshold="0.9"))
    assert s["bias_threshold"] == 0.2  # param, then Variable, then CTCALC_<KEY>, then the config
    assert s["rolling_path"] == "/data/x/rolling/window_spec=day/ds=2026-11-16"
    assert s["rolling"] == {"location": "/data/x/rolling", "catalog": False, "window_spec": "day", "ds": "2026-11-16"}
    assert s["ready"] == {"mode": "marker", "marker": str(REPO / "output/demo/eval/ds=2026-11-16/_SUCCESS")}
    assert s["job_args"][:4] == ["--config", str(REPO / "conf/demo.yaml"), "--ds", "2026-11-16"]
    # the package's own spark-submit entry point, the command first: no jobs/ folder needed on a worker
    assert s["evaluate_app"] == s["rolling_app"] == str(REPO / "ctcalc_spark" / "submit.py")
    assert s["evaluate_args"] == ["evaluate", *s["job_args"]] and s["rolling_args"] == ["rolling", *s["job_args"]]
    assert s["rolling_needs_spark"] is False  # Delta outputs: rolling runs as a plain process
    catalog = {orch.VAR_OVERRIDES: json.dumps({"output.path": "/data/x", "output.database": "analytics"})}
    on_catalog = orch.run_settings("2026-11-16", variables={**variables, **catalog}, parse=_parse(start_date="2026-11-16"))
    assert on_catalog["rolling_needs_spark"] is True and on_catalog["rolling"]["catalog"] is True
    assert s["previous"] == {"label": "2026-11-15", "days": ["2026-11-15"], "output": "/data/x",
                             "summaries": "/data/x/summaries", "catalog": False, "policy": "require",
                             "first_day": "2026-11-16"}
    # The report (a session of its own for catalog tables) gets the Spark settings the submitted jobs get.
    conf = {"spark.hadoop.hive.metastore.uris": "thrift://meta:9083", "spark.sql.shuffle.partitions": "8"}
    with_conf = orch.run_settings("2026-11-16", variables={orch.VAR_CONFIG: "conf/demo.yaml",
                                                           orch.VAR_SPARK_CONF: json.dumps(conf)},
                                  parse=_parse(start_date="2026-11-16"))
    assert with_conf["spark_conf"] == conf and with_conf["report_args"][-4:] == [
        "--set", 'spark.conf.spark.hadoop.hive.metastore.uris="thrift://meta:9083"',
        "--set", 'spark.conf.spark.sql.shuffle.partitions="8"']
    env_only = orch.run_settings("2026-11-16", variables={orch.VAR_CONFIG: "conf/demo.yaml"},
                                 parse=_parse(bias_threshold="0.9", ready_marker="/flags/{ds}.done"))
    assert env_only["bias_threshold"] == 0.9 and env_only["ready"]["marker"] == "/flags/2026-11-16.done"
    # An input whose date column writes days as yyyyMMdd (Hive's dt=20261116): the sensor waits for that folder.
    hive = orch.run_settings("2026-11-16", variables={orch.VAR_CONFIG: "conf/demo.yaml", orch.VAR_OVERRIDES: json.dumps(
        {"input.path": "/data/eval", "columns.ds": "dt", "columns.ds_format": "yyyyMMdd"})}, parse=_parse())
    assert hive["eval_partition"] == "/data/eval/dt=20261116" and hive["job_args"][3] == "2026-11-16"
    assert hive["ready"] == {"mode": "marker", "marker": "/data/eval/dt=20261116/_SUCCESS"}
    marked = orch.run_settings("2026-11-16", variables={orch.VAR_CONFIG: "conf/demo.yaml", orch.VAR_OVERRIDES: json.dumps(
        {"columns.ds": "dt", "columns.ds_format": "dd.MM.yyyy"}),
        orch.VAR_READY_MARKER: "/flags/{ds_nodash}/{input_ds}/{ds}.done"}, parse=_parse())
    assert marked["ready"]["marker"] == "/flags/20261116/16.11.2026/2026-11-16.done"


def test_scoring_writes_the_delta_table_that_evaluate_reads():
    """With ctcalc_score on, the score task replaces the day of the Delta table at input.path, which evaluate reads;
    a config whose evaluate could not read that table, or without the day's feature rows elsewhere, fails the
    settings task with every reason."""
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.orchestration import tasks as orch

    base = {orch.VAR_CONFIG: "conf/demo.yaml", orch.VAR_SCORE: "true"}
    s = orch.run_settings("2026-11-16", variables={**base, orch.VAR_SENSOR_PATH: "/landing/{ds}"}, parse=_parse())
    assert s["score"] is True and s["sensor_path"] == "/landing/2026-11-16"
    assert s["eval_table"] == str(REPO / "output/demo/eval") and s["evaluate_args"][0] == "evaluate"
    with pytest.raises(ConfigError, match="ctcalc_sensor_path"):
        orch.run_settings("2026-11-16", variables=base, parse=_parse())
    hive = {orch.VAR_OVERRIDES: json.dumps({"input.format": "csv", "columns.ds": "dt", "columns.ds_format": "yyyyMMdd"})}
    with pytest.raises(ConfigError) as e:
        orch.run_settings("2026-11-16", variables={**base, **hive}, parse=_parse())
    assert "input.format is 'csv'" in str(e.value) and "columns.ds 'dt' with columns.ds_format" in str(e.value)
    on_s3 = {orch.VAR_OVERRIDES: json.dumps({"input.path": "s3a://lake/eval"}), orch.VAR_SENSOR_PATH: "/l/{ds}"}
    with pytest.raises(ConfigError, match="local or shared folder, but input.path is 's3a://lake/eval'"):
        orch.run_settings("2026-11-16", variables={**base, **on_s3}, parse=_parse())
    assert orch.run_settings("2026-11-16", variables={**base, **hive, orch.VAR_SCORE: "false"},
                             parse=_parse())["score"] is False  # without scoring the input is the user's own


def test_trust_model_refuses_code_choosing_params_and_untrusted_variables():
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.orchestration import tasks as orch

    base = {orch.VAR_CONFIG: "conf/demo.yaml"}
    for key, value in (("drift_callback", "os:system"), ("spark_conf", {"spark.driver.extraJavaOptions": "-X"}),
                       ("project_dir", "/tmp"), ("config", "/tmp/x.yaml")):
        with pytest.raises(ConfigError, match=f"run param '{key}' is not accepted.*CTCALC_TRUST_PARAMS"):
            orch.run_settings("2026-11-16", params={key: value}, variables=base, parse=_parse())
    trusted = orch.run_settings("2026-11-16", params={"drift_callback": "probe:record"}, variables=base,
                                parse=_parse(trust_params="true"))
    assert trusted["drift_callback"] == "probe:record"
    assert orch.run_settings("2026-11-16", params={"bias_threshold": 1.5, "previous_window": "ignore"},
                             variables=base, parse=_parse())["previous"]["policy"] == "ignore"  # tuning: allowed
    with pytest.raises(ConfigError, match="Variable ctcalc_drift_callback is set but CTCALC_TRUST_VARIABLES"):
        orch.run_settings("2026-11-16", variables={orch.VAR_DRIFT_CALLBACK: "os:system"},
                          parse=_parse(trust_variables="false", config="conf/demo.yaml"))
    locked = orch.run_settings("2026-11-16", variables={orch.VAR_BIAS_THRESHOLD: "0.7"},
                               parse=_parse(trust_variables="false", config="conf/demo.yaml",
                                            drift_callback="alerts:page"))
    # The environment is always trusted; tuning Variables still count.
    assert locked["drift_callback"] == "alerts:page" and locked["bias_threshold"] == 0.7


def test_readiness_is_a_marker_never_any_file(tmp_path):
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.orchestration import tasks as orch

    part = tmp_path / "ds=2026-11-15"
    spec = {"mode": "marker", "marker": str(part / "_SUCCESS")}
    assert orch.input_ready(spec) == (False, f"waiting for {part}/_SUCCESS: {part} does not exist yet (data files "
                                             "without the marker do not count)")
    part.mkdir()
    (part / "part-0.parquet").write_bytes(b"PAR1" * 100)  # a writer is still adding files
    ready, reason = orch.input_ready(spec)
    assert not ready and "exists but is not complete yet" in reason
    (part / "_SUCCESS").touch()
    assert orch.input_ready(spec)[0]
    table_cfg = {orch.VAR_CONFIG: "conf/demo.yaml", orch.VAR_OVERRIDES: json.dumps({"input.path": None,
                                                                                  "input.table": "db.events"})}
    with pytest.raises(ConfigError, match="metastore table 'db.events'.*readiness=partition"):
        orch.run_settings("2026-11-16", variables=table_cfg, parse=_parse())
    s = orch.run_settings("2026-11-16", variables={**table_cfg, orch.VAR_READINESS: "partition"}, parse=_parse())
    assert s["ready"] == {"mode": "partition", "table": "db.events", "column": "ds", "ds": "2026-11-16"}


def test_catalog_tables_partition_readiness_and_rolling_rows(spark, tmp_path):
    from ctcalc_spark.orchestration.tasks import drift_check, table_partition_ready

    # The catalog creates the default database's folder on first use: remove it again if this test made it.
    warehouse = Path(spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:"))
    existed = warehouse.exists()
    (tmp_path / "events").mkdir()  # else Spark logs a stack trace looking for its metadata
    spark.sql(f"CREATE TABLE ready_events (x INT, ds STRING) USING parquet PARTITIONED BY (ds) "
              f"LOCATION '{tmp_path / 'events'}'")
    try:
        spark.sql("INSERT INTO ready_events PARTITION (ds = '2026-11-15') VALUES (1)")
        assert table_partition_ready(spark, "ready_events", "ds", "2026-11-15")[0]
        assert table_partition_ready(spark, "ready_events", "ds", "2026-11-16") == (
            False, "waiting for the partition ds=2026-11-16 of ready_events")
        with pytest.raises(ValueError, match="plain table name"):
            table_partition_ready(spark, "ready_events; DROP TABLE x", "ds", "2026-11-15")
        # The drift check on a catalog rolling table: only the day's rows of its window spec.
        (tmp_path / "rolling").mkdir()
        spark.sql(f"CREATE TABLE ready_rolling (status STRING, bias_change DOUBLE, window_spec STRING, ds STRING) "
                  f"USING parquet PARTITIONED BY (window_spec, ds) LOCATION '{tmp_path / 'rolling'}'")
        spark.sql("INSERT INTO ready_rolling VALUES ('ok', 0.9, 'day', '2026-11-16'), ('ok', 0.1, 'week', "
                  "'2026-11-16'), ('ok', 0.2, 'week', '2026-11-16'), ('ok', 0.8, 'week', '2026-11-15')")
        spec = {"location": "ready_rolling", "catalog": True, "window_spec": "week", "ds": "2026-11-16"}
        result, drifted = drift_check(spec, 0.15, spark=spark)
        assert (result["outcome"], result["rows"], result["rows_drifted"]) == ("drift", 2, 1)
        assert drifted["bias_change"].tolist() == [0.2]
    finally:
        spark.sql("DROP TABLE IF EXISTS ready_events")
        spark.sql("DROP TABLE IF EXISTS ready_rolling")
        if not existed and warehouse.is_dir() and not any(warehouse.iterdir()):
            warehouse.rmdir()


CONNECT_CATALOG_PROBE = r"""
import json, sys
from ctcalc_spark.config import SparkConfig
from ctcalc_spark.orchestration.tasks import drift_check, input_ready
from ctcalc_spark.spark.session import build_session

url, folder = sys.argv[1], sys.argv[2]
spark = build_session(SparkConfig(remote=url), app_name="probe")  # the platform's writer, on the server
spark.sql(f"CREATE TABLE cc_events (x INT, ds STRING) USING parquet PARTITIONED BY (ds) LOCATION '{folder}/e'")
spark.sql("INSERT INTO cc_events PARTITION (ds = '2026-11-15') VALUES (1)")
spark.sql(f"CREATE TABLE cc_rolling (status STRING, bias_change DOUBLE, window_spec STRING, ds STRING) "
          f"USING parquet PARTITIONED BY (window_spec, ds) LOCATION '{folder}/r'")
spark.sql("INSERT INTO cc_rolling VALUES ('ok', 0.9, 'week', '2026-11-16'), ('ok', 0.1, 'week', '2026-11-16')")
ready = {"mode": "partition", "table": "cc_events", "column": "ds"}
out = {"ready": [input_ready({**ready, "ds": d}, conn_id="ctcalc_connect") for d in ("2026-11-15", "2026-11-16")]}
spec = {"location": "cc_rolling", "catalog": True, "window_spec": "week", "ds": "2026-11-16"}
out["drift"] = drift_check(spec, 0.5, conn_id="ctcalc_connect")[0]
spark = build_session(SparkConfig(remote=url), app_name="probe")  # the helpers stop the sessions they open
spark.sql("DROP TABLE cc_events")
spark.sql("DROP TABLE cc_rolling")
print(json.dumps(out))
"""


@pytest.mark.slow
@needs_airflow
def test_catalog_readiness_and_drift_check_on_a_spark_connect_connection(connect_server, tmp_path):
    """With a Spark Connect connection the sensor's partition lookup and the drift check on a catalog table use the
    server's catalog (where the jobs write): the tables below exist only there, so a local session would wait
    for ever and find no rolling rows."""
    from urllib.parse import urlparse

    url = urlparse(connect_server)
    conn = {"conn_type": "spark_connect", "host": url.hostname, "port": url.port,
            "password": connect_server.split("token=")[1]}
    (tmp_path / "probe.py").write_text(CONNECT_CATALOG_PROBE)
    proc = subprocess.run([sys.executable, str(tmp_path / "probe.py"), connect_server, str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={**{k: v for k, v in os.environ.items() if k != "SPARK_CONNECT_MODE_ENABLED"},
                               "PYTHONPATH": str(REPO), "AIRFLOW_CONN_CTCALC_CONNECT": json.dumps(conn)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ready"] == [[True, "cc_events has the partition ds=2026-11-15"],
                            [False, "waiting for the partition ds=2026-11-16 of cc_events"]]
    assert (out["drift"]["outcome"], out["drift"]["rows"], out["drift"]["rows_drifted"]) == ("drift", 2, 1)


def test_previous_window_ready(tmp_path):
    import pandas as pd
    from deltalake import DeltaTable

    from ctcalc_spark.orchestration.tasks import previous_window_ready
    from tests._frames import write_outputs

    out = tmp_path / "out"

    def write_summaries(day: str) -> None:  # one evaluate run's commit of the day
        write_outputs(out, {"summaries": pd.DataFrame({"ds": [day], "count": [1]})})

    prev = {"label": "2026-11-15", "days": ["2026-11-15"], "output": str(out), "summaries": str(out / "summaries"),
            "catalog": False, "policy": "require", "first_day": "2026-11-15"}
    assert previous_window_ready(prev) == (False, ["2026-11-15"], "the previous window 2026-11-15 has no committed "
                                                                 f"summaries for ds=2026-11-15 in {out}/summaries")
    assert previous_window_ready({**prev, "first_day": "2026-11-16"})[0]  # before the DAG's first day
    assert previous_window_ready({**prev, "first_day": None})[0]  # no start date, no history: first window
    write_summaries("2026-11-14")
    assert not previous_window_ready({**prev, "first_day": None})[0]  # history exists, the day before is missing
    # a data file of a run that never committed (killed before its commit): no Delta commit names it
    (out / "summaries" / "ds=2026-11-15").mkdir(parents=True)
    pd.DataFrame({"count": [1]}).to_parquet(out / "summaries" / "ds=2026-11-15" / "part-0.parquet")
    assert not previous_window_ready(prev)[0]
    write_summaries("2026-11-15")
    assert previous_window_ready(prev) == (True, [], f"previous window 2026-11-15 is complete (1 day(s) in "
                                                     f"{out}/summaries)")
    DeltaTable(str(out / "summaries")).delete("ds = '2026-11-15'")
    assert not previous_window_ready(prev)[0]  # committed once, removed by a later commit


def test_drift_check_tells_no_previous_window_from_no_drift(tmp_path):
    import pandas as pd

    from ctcalc_spark.orchestration.tasks import drift_check
    from tests._frames import write_outputs

    def verdict(rows: list[tuple[str, float | None]], threshold: float = 0.5) -> dict:
        root = tmp_path / f"out{len(list(tmp_path.iterdir()))}"
        frame = pd.DataFrame(rows, columns=["status", "bias_change"]).astype({"bias_change": float})
        write_outputs(root, {"rolling": frame.assign(window_spec="week", ds="2026-11-16")}, job="rolling")
        spec = {"location": str(root / "rolling"), "catalog": False, "window_spec": "week", "ds": "2026-11-16"}
        return drift_check(spec, threshold)[0]

    assert verdict([("first_window", None)] * 3)["outcome"] == "first_window"
    missing = verdict([("missing_previous_window", None), ("previous_window_empty", None)])
    assert missing["outcome"] == "no_previous_window" and missing["rows_checked"] == 0
    assert missing["statuses"] == {"missing_previous_window": 1, "previous_window_empty": 1}
    assert verdict([("ok", 0.1), ("ok", -0.2)])["outcome"] == "no_drift"
    drift = verdict([("ok", 0.1), ("ok", -0.7), ("missing_previous_window", None)])
    assert (drift["outcome"], drift["rows_checked"], drift["rows_drifted"]) == ("drift", 2, 1)
    assert drift["max_abs_bias_change"] == pytest.approx(0.7)
    # a Delta table has no empty partition: a day the rolling task wrote no rows for is no partition at all
    with pytest.raises(FileNotFoundError, match=r"^Rolling partition window_spec=week/ds=2026-11-16 of .* does not "
                                                r"exist; did the rolling task run\?$"):
        verdict([])


def test_redaction():
    from ctcalc_spark.redact import redact_args, redact_settings, secret_values

    args = ["report", "--set", "output.path=/data/o", "--set", "stream.kafka_options.kafka.sasl.jaas.config=JAAS",
            "--set", 'stream.kafka_options={"kafka.ssl.truststore.password": "PW", "kafka.topic": "t"}',
            "--set", "input.path=s3a://AKID:URLPW@bucket/eval", "--conf", "spark.hadoop.fs.s3a.access.key=AK",
            "--threshold", "0.5"]
    shown = " ".join(redact_args(args))
    for secret in ("JAAS", "PW", "AK"):
        assert secret not in shown
    assert "output.path=/data/o" in shown and '"kafka.topic": "t"' in shown and "0.5" in shown
    assert "input.path=s3a://***@bucket/eval" in shown
    assert secret_values(args, {"api_token": "TOK", "x": {"db_password": "DBPW"}}) == [
        "AK", "AKID:URLPW", "DBPW", "JAAS", "PW", "TOK", "s3a://AKID:URLPW@bucket/eval"]
    settings = {"spark_conf": {"spark.authenticate.secret": "S", "spark.executor.memory": "4g"},
                "job_args": ["--set", "token=T"]}
    assert redact_settings(settings) == {"spark_conf": {"spark.authenticate.secret": "***",
                                                             "spark.executor.memory": "4g"},
                                              "job_args": ["--set", "token=***"]}


def test_spark_connect_client_command():
    from ctcalc_spark.orchestration.tasks import connect_client_command

    args = ["--config", "/c.yaml", "--ds", "2026-11-21", "--set", "output.path=/o"]
    conf = {"spark.sql.shuffle.partitions": "2", "spark.driver.extraJavaOptions": "-Da=b -Dc"}
    cmd = connect_client_command("/p/jobs/evaluate.py", args, conf, python="py")
    assert cmd == ["py", "-m", "ctcalc_spark.cli", "evaluate", *args,
                   "--set", 'spark.conf.spark.sql.shuffle.partitions="2"',
                   "--set", 'spark.conf.spark.driver.extraJavaOptions="-Da=b -Dc"']
    # The --set values reach the session's settings as the same strings (quoted: YAML would read "2" as a number).
    from ctcalc_spark.cli.common import set_overrides
    from ctcalc_spark.config import apply_overrides, config_from_dict

    sets = set_overrides([cmd[i + 1] for i, x in enumerate(cmd) if x == "--set"])
    assert config_from_dict(apply_overrides({"input": {"path": "x"}}, sets)).spark.conf == conf
    assert connect_client_command("/site/ctcalc_spark/submit.py", ["rolling", "--ds", "d"], python="py") == [
        "py", "-m", "ctcalc_spark.cli", "rolling", "--ds", "d"]
    with pytest.raises(ValueError, match="Cannot run '/p/jobs/train.py' as a Spark Connect client"):
        connect_client_command("/p/jobs/train.py", [])


def test_jobs_that_a_retry_cannot_mend_fail_for_good():
    from ctcalc_spark.orchestration.tasks import ERROR_MARKERS, final_failure

    out = "INFO x\nctcalc evaluate: error: Invalid evaluation rows for ds=d: 1 rows: NaN\nmore\n"
    assert final_failure("evaluate", 4, out) == (
        "ctcalc evaluate stopped with exit code 4 (input data): ctcalc evaluate: error: Invalid evaluation rows for "
        "ds=d: 1 rows: NaN Not retried: running it again cannot change that. Fix the cause, then clear the task.")
    assert "(configuration): see the job's output above" in final_failure("rolling", 3, "")
    for code in (None, 0, 1, 70, 130, 137, 143):  # Spark or the file system (maybe transient), a bug, a stop: retried
        assert final_failure("evaluate", code, out) is None
    # the stop line is what a failed task quotes
    assert [m for m in ERROR_MARKERS if m in "ctcalc evaluate: stopped by SIGTERM"] == [": stopped by SIG"]


NOTIFY_DAG = r"""
import datetime as dt
from airflow.sdk import dag, task
from ctcalc_spark.orchestration.notify import FailureNotifier

@dag(dag_id="notify_probe", schedule=None, start_date=dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),
     on_failure_callback=FailureNotifier("probe:on_failure", run_level=True), dagrun_timeout=dt.timedelta(hours=2),
     default_args={"retries": 0, "on_failure_callback": FailureNotifier("probe:on_failure")})
def notify_probe():
    @task
    def fails():
        raise ValueError("the day is bad")

    @task
    def after():
        pass

    fails() >> after()

notify_probe()
"""
NOTIFY_RUNNER = r"""
import datetime as dt, sys
from airflow.dag_processing.dagbag import DagBag

d = DagBag(dag_folder=sys.argv[1]).dags["notify_probe"]
run = d.test(logical_date=dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc))
print("RUN", run.run_id, run.state)
# What the dag-processor passes for a run that dagrun_timeout ended (airflow.dag_processing.processor): no task
# failed, the last unfinished task is the context's ti.
class TI:
    task_id, dag_id, run_id, try_number, log_url = "after", "notify_probe", "timeout_run", 1, None
d.on_failure_callback({"dag": d, "run_id": "timeout_run", "reason": "timed_out", "ti": TI()})
"""


@pytest.mark.slow
@needs_airflow
def test_each_failure_notifies_once(tmp_path):
    """A failed task calls the function once (its own callback); the run it fails only logs. A run that failed with
    no task failure (dagrun_timeout) calls it once, naming the task left unfinished. (The DAG's callback notified
    every task failure a second time.)"""
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTCALC_", "AIRFLOW"))}
    env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "PROBE_FAILURE_OUT": str(tmp_path / "failures.jsonl"),
                "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), str(tmp_path), os.environ.get("PYTHONPATH", ""))
                                              if p)})
    (tmp_path / "probe.py").write_text(PROBE)
    (tmp_path / "dags").mkdir()
    (tmp_path / "dags" / "notify_probe.py").write_text(NOTIFY_DAG)
    (tmp_path / "runner.py").write_text(NOTIFY_RUNNER)
    env["AIRFLOW__CORE__DAGS_FOLDER"] = str(tmp_path / "dags")
    for step in (["db", "migrate"], ["dags", "reserialize"]):  # dag.test() needs the DAG serialized
        subprocess.run([str(BIN / "airflow"), *step], env=env, check=True, capture_output=True, cwd=tmp_path,
                       timeout=300)
    proc = subprocess.run([sys.executable, "runner.py", str(tmp_path / "dags")], env=env, capture_output=True, text=True, cwd=tmp_path,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run_id, state = next(line.split()[1:] for line in proc.stdout.splitlines() if line.startswith("RUN "))
    assert state == "failed"
    # the run's callback ran, and only logged
    assert "ctcalc run failed: dag_id=notify_probe run_id=" in proc.stdout and "task fails failed and was notified" \
        in proc.stdout
    notified = [json.loads(line) for line in (tmp_path / "failures.jsonl").read_text().splitlines()]
    assert [(n["kind"], n["run_id"], n["task_id"]) for n in notified] == [
        ("task", run_id, "fails"), ("dag_run", "timeout_run", "after")]
    assert notified[0]["reason"] == "ValueError: the day is bad"
    assert notified[1]["reason"] == ("the run exceeded its dagrun_timeout (2:00:00) while task after was unfinished "
                                     "(CTCALC_DAGRUN_TIMEOUT_S)")


OPERATOR_PROBE = r"""
from ctcalc_spark.orchestration.operators import CtcalcSparkSubmitOperator
from ctcalc_spark.where import submit_script
op = CtcalcSparkSubmitOperator(task_id="evaluate", conn_id="spark_default", application=str(submit_script()),
                               application_args=["evaluate", "--config", "missing.yaml", "--ds", "2026-11-15"],
                               conf={"spark.ui.enabled": "false"})
try:
    op.execute({})
except Exception as e:
    print("RAISED", type(e).__name__, e)
print("ARGS", op.application_args)
"""


@pytest.mark.slow
@needs_airflow
def test_the_spark_operator_reads_the_jobs_exit_code_from_its_result_record(tmp_path):
    """spark-submit of the packaged submit.py: the job writes its exit code to a result record the operator reads
    (the code was parsed out of the provider's error text); 3, a configuration error, fails for good."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTCALC_", "AIRFLOW"))}
    env.update({"AIRFLOW_HOME": str(tmp_path / "home"), "PATH": str(BIN) + os.pathsep + env.get("PATH", ""),
                "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": "local[1]"}),
                "TMPDIR": str(tmp_path / "tmp"),  # where the operator's record folder goes
                "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)})
    (tmp_path / "tmp").mkdir()
    proc = subprocess.run([sys.executable, "-c", OPERATOR_PROBE], env=env, capture_output=True, text=True,
                          cwd=tmp_path, timeout=300)
    out = proc.stdout + proc.stderr
    assert "the job's result record: exit code 3" in out, out[-3000:]
    raised = next(line for line in out.splitlines() if line.startswith("RAISED "))
    assert raised.startswith("RAISED AirflowFailException ctcalc evaluate stopped with exit code 3 (configuration): "
                             "ctcalc evaluate: error: Config file 'missing.yaml' does not exist"), raised
    assert "ARGS ['evaluate', '--config', 'missing.yaml', '--ds', '2026-11-15']" in out  # the record flag taken off
    assert not [p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("ctcalc-result-")]  # removed


def test_compare_plan_needs_paths_and_respects_the_root(tmp_path):
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.orchestration.tasks import compare_plan

    params = {"pipeline_a": "a", "spec_a": {"arch": "lr"}, "pipeline_b": "b", "spec_b": {"arch": "fm"}, "runs": 2,
              "ds": "2026-11-02", "config": "conf/demo.yaml", "train_path": str(tmp_path / "train.parquet"),
              "features_path": str(tmp_path / "eval.parquet"), "workdir": str(tmp_path / "work")}
    with pytest.raises(ConfigError, match=r"needs the params \['workdir'\]"):
        compare_plan({**params, "workdir": None}, str(REPO))
    with pytest.raises(ConfigError, match="outside CTCALC_COMPARE_ROOT"):
        compare_plan(params, str(REPO), allowed_root=str(tmp_path))  # the config lies in the repo
    plan = compare_plan({**params, "config": str(tmp_path / "c.yaml")}, str(REPO), allowed_root=str(tmp_path))
    assert len(plan["train_jobs"]) == 4 and plan["compare_app"] == str(REPO / "ctcalc_spark" / "submit.py")
    assert plan["evaluate_args"][0] == "evaluate" and plan["compare_args"][0] == "compare"


# ---- slow: a real scheduler catches up two completed days --------------------------------------------------

def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM each process group we started (the scheduler's serve-logs child included), then SIGKILL."""
    for p in reversed(procs):
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    for p in reversed(procs):
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(p.pid, signal.SIGKILL)  # whatever of the group is left
        except ProcessLookupError:
            pass
        p.wait()


def _db_rows(url: str, sql: str, **params: object) -> list[dict]:
    """Rows of the metadata DB (PostgreSQL); JSON columns back as JSON text, as SQLite gave them."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(url, poolclass=sqlalchemy.pool.NullPool)
    try:
        with engine.connect() as con:
            rows = con.execute(sqlalchemy.text(sql), params).mappings().all()
    finally:
        engine.dispose()
    return [{k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in r.items()} for r in rows]


def _ts(value: object) -> str | None:
    """A timestamp of the metadata DB as 'YYYY-MM-DD HH:MM:SS' (UTC)."""
    return None if value is None else str(value)[:19].replace("T", " ")


def _wait_for_http(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 300) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"exited early:\n{_tail(log)}"
        try:
            urllib.request.urlopen(url, timeout=5)
            return
        except OSError:
            time.sleep(2)
    raise AssertionError(f"{url} did not answer in {timeout_s} s:\n{_tail(log)}")


def _tail(path: Path, lines: int = 40) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""


@pytest.fixture(scope="session")
def postgres_url(free_port):
    """One PostgreSQL server for the test session (scripts/postgres_start.sh: a fresh cluster on 127.0.0.1, the
    Debian package's server; scripts/test.sh installs it when missing). Its URL, database 'airflow'."""
    proc = subprocess.run(["bash", str(REPO / "scripts" / "postgres_start.sh"), str(free_port())],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"PostgreSQL did not start:\n{proc.stderr[-3000:]}"
    found = dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)
    yield found["PG_URL"]
    subprocess.run(["bash", str(REPO / "scripts" / "postgres_stop.sh"), found["PG_DIR"]], timeout=120)


def _wheel_install(scratch: Path, env: dict[str, str]) -> tuple[Path, dict[str, str]]:
    """A fresh venv as the airflow image builds it: docker/locks/airflow.txt (Airflow with its Spark and FAB
    providers, pyspark, our pins) installed with ``--require-hashes --no-deps``, then the built wheel with
    ``--no-deps``, then ``pip check``; nothing of the checkout. Returns the venv and the environment of the Airflow
    processes: no checkout on PYTHONPATH (only probe.py's folder), the two-line DAG files copied into
    scratch/dags, the job config the wheel's packaged demo.yaml."""
    from tests._wheel import build_wheel, isolated

    whl = build_wheel(scratch / "build")
    venv = scratch / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, env=isolated(os.environ))
    python = venv / "bin" / "python"
    t0 = time.perf_counter()
    for args in (["install", "--require-hashes", "--no-deps", "-r", str(REPO / "docker" / "locks" / "airflow.txt")],
                 ["install", "--no-deps", str(whl)], ["check"]):
        done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *args, *(
                               ["--quiet"] if args[0] == "install" else [])],
                              env=isolated(os.environ), capture_output=True, text=True, timeout=1500)
        assert done.returncode == 0, f"pip {' '.join(args)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    print(f"\nAirflow venv from docker/locks/airflow.txt + the wheel in {time.perf_counter() - t0:.0f} s, "
          f"{size / 2**20:.0f} MiB")
    (scratch / "dags").mkdir()
    for dag_file in (REPO / "dags").glob("*.py"):
        shutil.copy2(dag_file, scratch / "dags" / dag_file.name)
    found = subprocess.run([str(python), "-c", "import airflow, ctcalc_spark, pyspark\nfor m in (ctcalc_spark, airflow, "
                            "pyspark): print(m.__file__)"], env=isolated(os.environ), cwd=scratch,
                           capture_output=True, text=True, check=True).stdout.split()
    package = Path(found[0]).parent
    # the wheel's package, not the checkout's; Airflow and pyspark the venv's own
    assert all(Path(f).is_relative_to(venv) for f in found), found
    wheel_env = {k: v for k, v in isolated(env).items()}
    wheel_env.update({
        "PYTHONPATH": str(scratch),  # probe.py only
        "PATH": os.pathsep.join([str(venv / "bin"), env["PATH"]]),  # the venv's ctcalc, airflow and spark-submit
        "PYSPARK_PYTHON": str(python),
        "PYSPARK_DRIVER_PYTHON": str(python),  # scripts/env.sh points it at this environment's python
        "AIRFLOW__CORE__DAGS_FOLDER": str(scratch / "dags"),
        "AIRFLOW_VAR_CTCALC_CONFIG": str(package / "conf" / "demo.yaml"),
    })
    return venv, wheel_env


N_DAYS = 5  # completed days the real scheduler catches up (three runs at a time: two waves, a kill between)
CONFLICT = ("conflict_a", "conflict_b")  # two manual runs of the last day, at 06:00 and 07:00: one ds


def _commands() -> dict[int, list[str]]:
    """{pid: argv} of the processes of this machine."""
    out = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                out[int(proc.name)] = [a.decode(errors="replace") for a in (proc / "cmdline").read_bytes().split(b"\0")
                                       if a]
    return out


def _driver_pids(day: str) -> list[int]:
    """PIDs of the Python driver of a running `submit.py evaluate ... --ds day` (not its JVM)."""
    return [pid for pid, args in _commands().items() if args and Path(args[0]).name.startswith("python")
            and any(a.endswith("ctcalc_spark/submit.py") for a in args) and "evaluate" in args and day in args]


def _pids_running(path: str) -> list[int]:
    """PIDs of the processes whose command line names ``path`` (this test's venv), this one excepted."""
    return [pid for pid, args in _commands().items() if pid != os.getpid() and any(path in a for a in args)]


def _run_states(url: str) -> dict[str, str]:
    return {r["run_id"]: r["state"] for r in _db_rows(
        url, "SELECT run_id, state FROM dag_run WHERE dag_id = 'daily_calibrated_eval'")}


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory, free_port, postgres_url):
    """A real Airflow on PostgreSQL with the LocalExecutor (api-server, dag-processor, scheduler) catches up the five
    completed days before today, three runs at a time; today's partition is written without its ``_SUCCESS``.
    Once two runs have succeeded, the scheduler's process group is killed (its executor's tasks with it) and a new
    scheduler started. Then two manual runs of the last day: the first's evaluate is held (SIGSTOP) after it pinned
    the tables, the second evaluates and commits the day, the first resumes and must commit nothing."""
    from ctcalc_spark.demo import write_demo_eval

    now = dt.datetime.now(dt.timezone.utc)
    to_midnight = (dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), tzinfo=dt.timezone.utc)
                   - now).total_seconds()
    if to_midnight < 30 * 60:
        # Which runs the scheduler creates depends on the days that have ended: the day must not turn while it runs.
        # Waiting for the new day pins it; a skip here would hide a failure.
        print(f"waiting {to_midnight:.0f} s for midnight UTC before the scheduler starts", file=sys.stderr)
        time.sleep(to_midnight + 5)
    today = _utc_today()
    days = [_day(i - N_DAYS, today) for i in range(N_DAYS)]
    scratch = tmp_path_factory.mktemp("airflow")
    home = scratch / "airflow_home"
    # The dag.test() scenarios evaluate the last two days; the first of them is their first window.
    env = airflow_env(home, scratch, days[-2])
    port = free_port()
    env.update({
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": postgres_url,
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "6",  # three runs, each a waiting sensor and a working task
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
        "AIRFLOW__API__HOST": "127.0.0.1",
        "AIRFLOW__API__PORT": str(port),
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(16),
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),  # not 8793: other runs may hold it
        # 5 s by default: a task start's call timed out (ReadTimeout) at a load average of 9-10 on 2 cores
        "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
        # The restarted scheduler takes over the killed one's tasks after this many seconds (default 30 and 300).
        "AIRFLOW__SCHEDULER__SCHEDULER_HEALTH_CHECK_THRESHOLD": "15",
        "AIRFLOW__SCHEDULER__ORPHANED_TASKS_CHECK_INTERVAL": "15",
    })
    (scratch / "probe.py").write_text(PROBE)
    write_demo_eval(scratch / "eval", n_examples_per_day=1000, n_runs=2, n_days=N_DAYS + 1, start_ds=days[0])
    (scratch / "eval" / f"ds={today.isoformat()}" / "_SUCCESS").unlink()  # today is still being written
    # The last day is larger: its evaluate's scan lasts long enough to be held between its pin and its commit.
    shutil.rmtree(scratch / "eval" / f"ds={days[-1]}")
    write_demo_eval(scratch / "big", n_examples_per_day=60_000, n_runs=2, n_days=1, start_ds=days[-1])
    shutil.move(scratch / "big" / f"ds={days[-1]}", scratch / "eval" / f"ds={days[-1]}")
    # The Airflow processes run from the built wheel alone (env stays the checkout's, for the dag.test() scenarios).
    venv, wheel_env = _wheel_install(scratch, env)
    wheel_env.update({"CTCALC_START_DATE": days[0], "CTCALC_MAX_ACTIVE_RUNS": "3",
                      # a day waits while the run of the day before computes its summaries
                      "CTCALC_PREVIOUS_TIMEOUT_S": "1500"})
    airflow = [str(venv / "bin" / "python"), "-m", "airflow"]
    t0 = time.perf_counter()
    subprocess.run([*airflow, "db", "migrate"], env=wheel_env, check=True, capture_output=True, cwd=scratch)
    migrate_s = time.perf_counter() - t0
    logs = scratch / "proc_logs"
    logs.mkdir()
    procs: dict[str, subprocess.Popen] = {}

    def start(name: str, cmd: list[str]) -> None:
        with (logs / f"{name}.log").open("w") as f:
            procs[name] = subprocess.Popen([*airflow, *cmd], env=wheel_env, cwd=scratch, stdout=f,
                                           stderr=subprocess.STDOUT, start_new_session=True)

    def wait_until(done, what: str, timeout_s: float) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            dead = [n for n, p in procs.items() if p.poll() is not None and n != "scheduler-killed"]
            assert not dead, f"{dead} exited early:\n" + "\n".join(_tail(logs / f"{n}.log") for n in dead)
            if done():
                return
            time.sleep(2)
        raise AssertionError(f"timed out waiting for {what}:\n{_tail(logs / 'scheduler.log')}")

    def scheduled() -> list[dict]:
        return _db_rows(postgres_url, "SELECT run_id, state FROM dag_run WHERE dag_id = 'daily_calibrated_eval' "
                                      "AND run_type = 'scheduled'")

    t1 = time.perf_counter()
    killed: list[dict] = []
    held: list[int] = []
    try:
        start("api-server", ["api-server", "--port", str(port), "--host", "127.0.0.1"])
        # the task runners call it: a task started before it listens fails at once
        _wait_for_http(f"http://127.0.0.1:{port}/api/v2/monitor/health", procs["api-server"], logs / "api-server.log")
        start("dag-processor", ["dag-processor"])
        start("scheduler", ["scheduler"])

        def two_done_and_one_running() -> bool:
            if sum(r["state"] == "success" for r in scheduled()) < 2:
                return False
            killed[:] = _db_rows(postgres_url, "SELECT run_id, task_id, try_number FROM task_instance WHERE "
                                               "dag_id = 'daily_calibrated_eval' AND state = 'running'")
            return bool(killed)

        wait_until(two_done_and_one_running, "two successful runs and a running task", 1200)
        # The scheduler, its executor's workers and their tasks (spark-submit included) die at once.
        os.killpg(procs["scheduler"].pid, signal.SIGKILL)
        procs["scheduler"].wait()
        procs["scheduler-killed"] = procs.pop("scheduler")
        (logs / "scheduler.log").rename(logs / "scheduler-killed.log")
        kill_s = time.perf_counter() - t1
        start("scheduler", ["scheduler"])
        wait_until(lambda: len(runs := scheduled()) >= N_DAYS and all(r["state"] in ("success", "failed")
                                                                       for r in runs), "the catch-up", 1800)
        run_s = time.perf_counter() - t1

        # Two task instances of one day that would commit over each other.
        last = days[-1]
        trigger = [*airflow, "dags", "trigger", "daily_calibrated_eval"]
        subprocess.run([*trigger, "-r", CONFLICT[0], "-l", f"{last}T06:00:00+00:00"], env=wheel_env, check=True,
                       capture_output=True, cwd=scratch)
        first_log = home / "logs" / "dag_id=daily_calibrated_eval" / f"run_id={CONFLICT[0]}" / "task_id=evaluate"

        def pinned() -> bool:  # the job logs "scanning" right after it pinned the tables' versions
            texts = [p.read_text(errors="replace") for p in first_log.glob("*.log")]
            if not any(f"scanning ds={last}" in t for t in texts):
                return False
            held[:] = _driver_pids(last)
            return bool(held)

        wait_until(pinned, "the first evaluate's scan", 900)
        for pid in held:
            os.kill(pid, signal.SIGSTOP)
        subprocess.run([*trigger, "-r", CONFLICT[1], "-l", f"{last}T07:00:00+00:00"], env=wheel_env, check=True,
                       capture_output=True, cwd=scratch)
        wait_until(lambda: _run_states(postgres_url).get(CONFLICT[1]) in ("success", "failed"), "the second run", 900)
        for pid in held:
            os.kill(pid, signal.SIGCONT)
        held.clear()
        wait_until(lambda: _run_states(postgres_url).get(CONFLICT[0]) in ("success", "failed"), "the first run", 900)
        time.sleep(3)  # a scheduler loop more: a run for today would show up now
        q = {"dag": "daily_calibrated_eval"}
        runs = _db_rows(postgres_url, "SELECT * FROM dag_run WHERE dag_id = :dag ORDER BY logical_date", **q)
        tis = _db_rows(postgres_url, "SELECT run_id, task_id, state, try_number, start_date, end_date "
                                     "FROM task_instance WHERE dag_id = :dag", **q)
        tries = _db_rows(postgres_url, "SELECT run_id, task_id, state, try_number FROM task_instance_history "
                                       "WHERE dag_id = :dag", **q)
        dag_row = _db_rows(postgres_url, "SELECT * FROM dag WHERE dag_id = :dag", **q)
        xcoms = _db_rows(postgres_url, "SELECT run_id, value FROM xcom WHERE dag_id = :dag "
                                       "AND task_id = 'drift_check' AND key = 'return_value'", **q)
        events = _db_rows(postgres_url, "SELECT a.name, e.extra, e.source_run_id FROM asset_event e "
                                        "JOIN asset a ON a.id = e.asset_id")
        rendered = _db_rows(postgres_url, "SELECT run_id, task_id, rendered_fields FROM "
                                          "rendered_task_instance_fields WHERE dag_id = :dag", **q)
    finally:
        for pid in held:
            os.kill(pid, signal.SIGCONT)
        _stop([p for n, p in procs.items() if n != "scheduler-killed"])
        # Task runners of the killed scheduler run in process groups of their own: end any left (all run this venv).
        for pid in _pids_running(str(venv)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    task_logs = {str(p.relative_to(home / "logs")): _tail(p, 15) for p in (home / "logs").rglob("*.log")
                 if "dag_id=daily" in str(p)}
    whole_logs = {str(p.relative_to(home / "logs")): p.read_text(errors="replace")
                  for p in (home / "logs").rglob("*.log") if "dag_id=daily" in str(p)}
    submitted = f"{venv}/lib/"  # spark-submit's command line names the wheel's ctcalc_spark/submit.py
    from_wheel = {"evaluate_logs_submitting_the_wheel": sorted(
                      name for name, text in whole_logs.items() if "task_id=evaluate" in name and submitted in text
                      and "ctcalc_spark/submit.py evaluate" in text),
                  # rolling on Delta outputs: a plain process of the venv's python, no spark-submit, no session
                  "rolling_logs_without_spark": sorted(
                      name for name, text in whole_logs.items() if "task_id=rolling" in name
                      and f"no Spark needed (Delta outputs): running {venv}/bin/python" in text
                      and "spark-submit" not in text and "SparkSession" not in text),
                  # every ctcalc_spark file a task log names (tracebacks, the command lines) is the venv's
                  # (a file:/// URI, the driver's log4j2 settings, gives the same folder with more slashes)
                  "package_folders": sorted({"/" + m.lstrip("/") for text in whole_logs.values()
                                             for m in re.findall(r"(/[\w./-]*)/ctcalc_spark/", text)})}
    result = {"today": today.isoformat(), "days": days, "pair": days[-2:], "runs": runs,
              "dag": dag_row[0] if dag_row else {}, "tis": tis, "tries": tries, "killed": killed,
              "drift": {x["run_id"]: json.loads(x["value"]) for x in xcoms}, "events": events,
              "rendered": rendered, "from_wheel": from_wheel, "migrate_s": migrate_s, "kill_s": kill_s,
              "run_s": run_s, "restarted_log": (logs / "scheduler.log").read_text(errors="replace"),
              "failures": [json.loads(line) for line in (scratch / "failures.jsonl").read_text().splitlines()]
              if (scratch / "failures.jsonl").exists() else [],
              "conflict_logs": {name: text for name, text in whole_logs.items() if "run_id=conflict_" in name},
              "debug": "\n".join([_tail(logs / "scheduler.log"), *[f"--- {k}\n{v}" for k, v in task_logs.items()
                                                                    if "run_id=conflict" in k or "evaluate" in k]])}
    (scratch / "scheduler_result.json").write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps({"migrate_s": round(migrate_s, 1), "kill_after_s": round(kill_s, 1),
                      "catch_up_s": round(run_s, 1), "with_conflict_runs_s": round(time.perf_counter() - t1, 1)}))
    return scratch, env, result


slow = pytest.mark.slow


def _scheduled(r: dict) -> list[dict]:
    return [x for x in r["runs"] if x["run_type"] == "scheduled"]


@needs_airflow
@slow
def test_scheduler_runs_exactly_the_completed_days(scheduler):
    _, _, r = scheduler
    runs, days, today = _scheduled(r), r["days"], r["today"]
    assert [(_ts(x["logical_date"]), x["state"]) for x in runs] == [
        (f"{d} 00:00:00", "success") for d in days], r["debug"]
    for run, d in zip(runs, days):
        # A data interval of one day that has ended before the run was created: the run evaluates that day.
        end = _day(1, dt.date.fromisoformat(d))
        assert (_ts(run["data_interval_start"]), _ts(run["data_interval_end"]), _ts(run["run_after"])) == (
            f"{d} 00:00:00", f"{end} 00:00:00", f"{end} 00:00:00")
    # No run for today: its interval ends tomorrow, and only then may its run be created.
    assert today not in {_ts(x["logical_date"])[:10] for x in r["runs"]}
    tomorrow = _day(1, dt.date.fromisoformat(today))
    assert _ts(r["dag"]["next_dagrun"]) == f"{today} 00:00:00"
    assert _ts(r["dag"]["next_dagrun_create_after"]) == f"{tomorrow} 00:00:00"


@needs_airflow
@slow
def test_scheduler_on_postgres_runs_days_and_tasks_in_parallel(scheduler):
    """max_active_runs 3 on the LocalExecutor: task instances of different days ran at the same time."""
    _, _, r = scheduler
    assert r["dag"]["max_active_runs"] == 3
    spans = sorted((dt.datetime.fromisoformat(str(t["start_date"])), dt.datetime.fromisoformat(str(t["end_date"])),
                    t["run_id"]) for t in r["tis"] if t["start_date"] and t["end_date"])
    overlapping = {(a[2], b[2]) for i, a in enumerate(spans) for b in spans[i + 1:] if b[0] < a[1] and a[2] != b[2]}
    assert len(overlapping) >= 3, overlapping


@needs_airflow
@slow
def test_scheduler_killed_and_restarted_finishes_every_day(scheduler):
    """The scheduler's process group was killed (SIGKILL) with task instances running; the new scheduler reset them
    (a new try each) and every day ended green, each killed task instance on its second try."""
    _, _, r = scheduler
    assert r["killed"], "no task instance was running at the kill"
    assert "Reset the following" in r["restarted_log"] and "orphaned TaskInstances" in r["restarted_log"]
    final = {(t["run_id"], t["task_id"]): t for t in r["tis"]}
    assert all(final[(k["run_id"], k["task_id"])]["state"] == "success" for k in r["killed"]), r["killed"]
    # A task runner has a process group of its own and may outlive its supervisor: the reset try then runs beside it
    # (tables: test_scheduler_runs_every_task_and_writes_each_day). At least one killed try was abandoned and rerun.
    reset = [k for k in r["killed"] if final[(k["run_id"], k["task_id"])]["try_number"] > k["try_number"]]
    assert reset, r["killed"]
    abandoned = {(h["run_id"], h["task_id"], h["try_number"]) for h in r["tries"]}
    assert all((k["run_id"], k["task_id"], k["try_number"]) in abandoned for k in reset)  # kept as history


@needs_airflow
@slow
def test_scheduler_runs_every_task_and_writes_each_day(scheduler, spark):
    import yaml

    from ctcalc_spark.cli.common import set_overrides
    from ctcalc_spark.config import OutputConfig, apply_overrides, config_from_dict
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling
    from ctcalc_spark.tables import OutputStore
    from tests._frames import assert_same_rows

    scratch, env, r = scheduler
    scheduled = {x["run_id"] for x in _scheduled(r)}
    by_run: dict[str, dict[str, str]] = {}
    for ti in r["tis"]:
        by_run.setdefault(ti["run_id"], {})[ti["task_id"]] = ti["state"]
    assert len(scheduled) == N_DAYS
    for run_id in scheduled:
        assert by_run[run_id] == {t: ("skipped" if t == "score" else "success") for t in DAILY_GRAPH}, r["debug"]
    out = scratch / "out"
    store = OutputStore(OutputConfig(path=str(out)))
    for table in ("metrics", "summaries"):
        assert store.days(table) == r["days"]
    assert store.partitions("rolling") == [{"window_spec": "day", "ds": d} for d in r["days"]]
    assert sorted(p.name for p in (out / "reports").glob("ds=*")) == [f"ds={d}" for d in r["days"]]
    assert store.check_days() == []  # each day's summaries and metrics come from one run
    for d in r["days"]:
        metrics = store.read("metrics", days=[d])
        assert set(metrics["status"]) == {"ok"} and len(metrics[metrics["slice_name"] == "__all__"]) == 3 * 2
        report = out / "reports" / f"ds={d}"
        assert sorted(p.suffix for p in report.iterdir()) == [".csv", ".csv", ".html", ".json"]  # rows, flags
        assert len(list(report.glob("drift_*_flags.csv"))) == 1
    # Every day's tables equal one evaluate + rolling of the five days here (a killed try and a rerun included).
    cfg = yaml.safe_load((REPO / "conf" / "demo.yaml").read_text())
    overrides = {k: v for k, v in json.loads(env["AIRFLOW_VAR_CTCALC_OVERRIDES"]).items() if k != "stream.kafka_options"}
    ref = config_from_dict(apply_overrides(cfg, set_overrides([f"{k}={json.dumps(v)}" for k, v in
                                                               {**overrides, "output.path": str(scratch / "ref")}.items()])))
    evaluate(spark, ref, f"{r['days'][0]}..{r['days'][-1]}")
    run_rolling(spark, ref, r["days"])
    want = OutputStore(ref)
    keys = ["ds", "model", "run", "slice_name", "slice_value"]
    assert_same_rows(store.read("metrics"), want.read("metrics"), keys)
    assert_same_rows(store.read("rolling"), want.read("rolling"), ["window_spec", *keys])
    d1, d2 = r["days"][:2]
    roll1, roll2 = (store.read("rolling", days=[d], where={"window_spec": ["day"]}) for d in (d1, d2))
    assert set(roll1["status"]) == {"first_window"} and roll1["bias_change"].isna().all()
    assert set(roll2["status"]) == {"ok"} and roll2["bias_change"].notna().all() and roll2["prev_window"].eq(d1).all()
    # The verdicts tell "nothing to compare with" from "compared, no drift".
    verdicts = {v["ds"]: v for run_id, v in r["drift"].items() if run_id in scheduled}
    assert verdicts[d1]["outcome"] == "first_window" and verdicts[d1]["rows_checked"] == 0
    assert all(verdicts[d]["outcome"] == "no_drift" and verdicts[d]["rows_checked"] > 0 for d in r["days"][1:])


@needs_airflow
@slow
def test_two_runs_of_one_day_never_commit_over_each_other(scheduler):
    """Two manual runs of the last day: the first's evaluate pinned the tables and was held; the second committed
    the day; the first, resumed, found that commit and stopped having written nothing (exit 1, the task failed,
    its run too), and the failure notifier was called once, for that task. The day's tables are the second's."""
    from deltalake import DeltaTable

    from ctcalc_spark.config import OutputConfig
    from ctcalc_spark.tables import OutputStore

    scratch, _, r = scheduler
    last = r["days"][-1]
    states = {x["run_id"]: x["state"] for x in r["runs"]}
    assert (states[CONFLICT[0]], states[CONFLICT[1]]) == ("failed", "success"), r["debug"]
    tasks = {t["task_id"]: t["state"] for t in r["tis"] if t["run_id"] == CONFLICT[0]}
    assert tasks["evaluate"] == "failed" and tasks["rolling"] == "upstream_failed"
    (log,) = [t for n, t in r["conflict_logs"].items() if f"run_id={CONFLICT[0]}" in n and "task_id=evaluate" in n]
    assert f"Another run committed ds={last}" in log and "this run wrote nothing to it" in log
    assert [(n["kind"], n["run_id"], n["task_id"]) for n in r["failures"]] == [("task", CONFLICT[0], "evaluate")]
    # The held run's id (its error names it) is in no commit of the tables it pinned; the day is one run's.
    held = re.search(r"while this evaluate run \((\S+)\) was computing it", log).group(1)
    for table in ("summaries", "metrics"):
        commits = json.dumps(DeltaTable(str(scratch / "out" / table)).history(), default=str)
        assert held not in commits and commits.count(f'"days": "{last}"') >= 2, table  # the backfill's, the 2nd run's
    store = OutputStore(OutputConfig(path=str(scratch / "out")))
    assert store.check_days() == [] and len(store.runs("summaries", [last])[last]) == 1


@needs_airflow
@slow
def test_scheduler_runs_from_the_installed_wheel_alone(scheduler):
    """The Airflow processes had the built wheel and the two-line DAG files, no checkout on any path: every evaluate
    submitted the wheel's own submit.py, and every ctcalc_spark file a task log names is the venv's."""
    scratch, _, r = scheduler
    assert len(r["from_wheel"]["evaluate_logs_submitting_the_wheel"]) >= N_DAYS + 2, r["debug"]
    assert len(r["from_wheel"]["rolling_logs_without_spark"]) >= N_DAYS + 1, r["debug"]
    (site,) = r["from_wheel"]["package_folders"]
    assert Path(site).is_relative_to(scratch / "venv") and not Path(site).is_relative_to(REPO)


@needs_airflow
@slow
def test_scheduler_run_updates_the_output_assets(scheduler):
    scratch, _, r = scheduler
    seen = {(e["name"], json.loads(e["extra"])["ds"]) for e in r["events"]}
    assert seen == {(f"ctcalc_daily_{t}", d) for t in ("metrics", "summaries", "rolling") for d in r["days"]}
    extra = next(json.loads(e["extra"]) for e in r["events"] if e["name"] == "ctcalc_daily_rolling")
    assert extra["path"] == str(scratch / "out" / "rolling" / "window_spec=day" / f"ds={extra['ds']}")


@needs_airflow
@slow
def test_scheduler_run_shows_no_secret(scheduler):
    scratch, _, r = scheduler
    # Task logs (what the UI shows) and the api-server's and dag-processor's output. Not the scheduler's stdout:
    # Airflow 3.3's LocalExecutor copies every task log line there (subprocess_logs_to_stdout=True) without
    # the task's masks; docs/airflow.md says so.
    logs = [*(scratch / "airflow_home" / "logs").rglob("*.log"), *(scratch / "proc_logs").glob("[ad]*.log")]
    texts = {str(p.relative_to(scratch)): p.read_text(errors="replace") for p in logs}
    assert len(texts) > 10 and [name for name, text in texts.items() if SECRET in text] == []
    # Not vacuous: the jobs got the setting, and the logs show it redacted.
    evaluate_logs = [t for name, t in texts.items() if "task_id=evaluate" in name]
    assert len(evaluate_logs) >= N_DAYS and all("kafka.sasl.jaas.config" in t and "***" in t for t in evaluate_logs)
    assert any("running: " in t and 'kafka.sasl.jaas.config\\": \\"***' in t for t in texts.values())  # report, JSON
    spark_fields = [f["rendered_fields"] for f in r["rendered"] if f["task_id"] in ("evaluate", "rolling")]
    assert len(spark_fields) >= 2 * N_DAYS
    assert all("kafka.sasl.jaas.config" in f and SECRET not in f for f in spark_fields)


@needs_airflow
@slow
def test_green_task_logs_show_no_error_and_no_spark_info(scheduler):
    """A task that succeeded logs no line at level error (log-based alerting would fire on success), and a green
    evaluate shows Spark at WARN: no Spark INFO line (ctcalc's own INFO progress lines stay)."""
    scratch, _, r = scheduler
    green = {(t["run_id"], t["task_id"]) for t in r["tis"] if t["state"] == "success"}
    records: dict[str, list[dict]] = {}
    for path in (scratch / "airflow_home" / "logs" / "dag_id=daily_calibrated_eval").rglob("*.log"):
        parts = dict(p.split("=", 1) for p in path.relative_to(scratch / "airflow_home" / "logs").parts if "=" in p)
        ti = next((t for t in r["tis"] if t["run_id"] == parts["run_id"] and t["task_id"] == parts["task_id"]), None)
        if (parts["run_id"], parts["task_id"]) in green and ti and f"attempt={ti['try_number']}.log" == path.name:
            records[str(path)] = [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]
    assert len(records) >= 5 * N_DAYS
    errors = {p: [x["event"] for x in recs if x.get("level") in ("error", "critical")] for p, recs in records.items()}
    assert {p: e for p, e in errors.items() if e} == {}
    spark_info = re.compile(r"\d\d:\d\d:\d\d INFO (?!ctcalc_spark)")
    evaluate = [recs for p, recs in records.items() if "task_id=evaluate" in p]
    assert evaluate and not [x["event"] for recs in evaluate for x in recs if spark_info.search(str(x.get("event")))]
    assert all(any("INFO ctcalc_spark.progress" in str(x.get("event")) and x.get("level") == "info" for x in recs)
               for recs in evaluate)


# ---- slow: dag.test() scenarios on the same home and data -------------------------------------------------

def _bad_day(scratch: Path, day: str) -> Path:
    """``scratch/eval_bad/ds=<day>``: the day's demo rows with one logit missing (null), marked complete."""
    import pandas as pd

    bad = scratch / "eval_bad" / f"ds={day}"
    if not (bad / "_SUCCESS").exists():
        bad.mkdir(parents=True, exist_ok=True)
        rows = pd.read_parquet(scratch / "eval" / f"ds={day}")
        rows.loc[rows.index[7], "logit"] = float("nan")
        rows.to_parquet(bad / "part-0.parquet", index=False)
        (bad / "_SUCCESS").touch()
    return bad


@pytest.fixture(scope="module")
def scenario(scheduler):
    """tests/_airflow_scenario.py on the scheduler's home and outputs; tiny CTR data for compare_pipelines."""
    from ctcalc_spark.upstream.data import write_ctr_tables

    scratch, env, sched = scheduler
    write_ctr_tables(scratch / "ctr", n_train=20_000, n_eval=4000, seed=0)  # eval day 2026-11-02
    _bad_day(scratch, sched["pair"][0])
    log = scratch / "scenario.log"
    with log.open("w") as f:
        proc = subprocess.run([sys.executable, str(REPO / "tests" / "_airflow_scenario.py"), str(REPO / "dags"),
                               str(scratch), str(scratch / "result.json"), *sched["pair"], sched["today"]],
                              env=env, stdout=f, stderr=subprocess.STDOUT, cwd=scratch, timeout=600)
    tail = "\n".join(log.read_text().splitlines()[-60:])
    assert proc.returncode == 0, f"scenario failed:\n{tail}"
    result = json.loads((scratch / "result.json").read_text())
    notified = scratch / "failures.jsonl"
    failures = [json.loads(line) for line in notified.read_text().splitlines()] if notified.exists() else []
    print(json.dumps({"total_s": round(result["total_s"], 1),
                      "runs": {r["name"]: round(r["seconds"], 1) for r in result["runs"]}}))
    return scratch, result, failures, sched, tail


def _run(result: dict, name: str) -> dict:
    return next(r for r in result["runs"] if r["name"] == name)


def _failed(scenario: tuple, name: str, task_id: str) -> tuple[dict, str]:
    """A scenario run that failed in ``task_id``, and the reason the failure notifier got for that task."""
    _, result, failures, _, _ = scenario
    run = _run(result, name)
    assert run["state"] == "failed" and run["tasks"][task_id] == "failed", run
    notified = [f for f in failures if f["run_id"] == run["run_id"] and f["task_id"]]
    assert [(f["dag_id"], f["task_id"]) for f in notified] == [("daily_calibrated_eval", task_id)]
    return run, notified[0]["reason"]


@needs_airflow
@slow
def test_drift_alerts_through_the_variable_callback(scenario):
    scratch, result, _, sched, _ = scenario
    run = _run(result, "drift_callback")
    assert run["state"] == "success" and run["tasks"]["drift_check"] == "success"
    alert = json.loads((scratch / "drift_alert.json").read_text())
    assert alert["ds"] == sched["pair"][1] and alert["rows"] > 0 and alert["threshold"] == 1e-9


@needs_airflow
@slow
def test_drift_fails_loudly_and_notifies(scenario):
    run, reason = _failed(scenario, "drift_fails", "drift_check")
    assert run["tasks"]["evaluate"] == "success"  # marked success: only the check ran
    assert reason.startswith("AirflowFailException: Bias drift on")


@needs_airflow
@slow
def test_untrusted_param_stops_the_run_in_settings(scenario):
    run, reason = _failed(scenario, "untrusted_param", "settings")
    assert all(s == "upstream_failed" for t, s in run["tasks"].items() if t != "settings")
    # failed for good: a configuration error stays wrong on every retry
    assert reason.startswith("AirflowFailException: ") and "run param 'drift_callback' is not accepted" in reason


@needs_airflow
@slow
def test_missing_previous_window_stops_with_a_message(scenario):
    run, reason = _failed(scenario, "missing_previous", "wait_for_previous_window")
    assert run["tasks"]["wait_for_eval_partition"] == "success"
    # failed at once, not by the sensor's timeout: the run before had ended, nothing would write the window
    assert "AirflowSensorTimeout" not in reason
    day1 = scenario[3]["pair"][0]
    assert f"no committed summaries for ds={day1}" in reason and "ctcalc_previous_window=ignore" in reason


@needs_airflow
@slow
def test_partial_day_is_not_evaluated(scenario):
    scratch, today = scenario[0], scenario[3]["today"]
    run, reason = _failed(scenario, "partial_today", "wait_for_eval_partition")
    assert run["seconds"] >= 8 and "AirflowSensorTimeout" in reason  # it waited for the sensor timeout
    assert reason.endswith(f"; it waited for {scratch / 'eval' / f'ds={today}' / '_SUCCESS'}")  # the alert says what
    assert all(run["tasks"][t] == "upstream_failed" for t in ("maybe_score", "evaluate", "rolling", "report",
                                                             "drift_check"))
    for table in ("metrics", "summaries", "rolling/window_spec=day", "reports"):
        assert (scratch / "out" / table).is_dir() and not (scratch / "out" / table / f"ds={today}").exists()


@needs_airflow
@slow
def test_bad_input_fails_the_spark_task_for_good(scenario):
    """spark-submit exits with the job's code 4 (input data); a retry cannot change that, so the task fails without
    its retries (AirflowFailException), saying why in the job's own words."""
    run, reason = _failed(scenario, "bad_input", "evaluate")
    day1 = scenario[3]["pair"][0]
    assert reason.startswith("AirflowFailException: ctcalc evaluate stopped with exit code 4 (input data): ctcalc "
                             f"evaluate: error: Invalid evaluation rows for ds={day1}"), reason
    assert reason.endswith("Not retried: running it again cannot change that. Fix the cause, then clear the task.")
    assert all(run["tasks"][t] == "upstream_failed" for t in ("rolling", "report", "drift_check"))
    assert not (scenario[0] / "out_bad" / "metrics").exists()


@needs_airflow
@slow
def test_compare_dag_runs_end_to_end(scenario):
    from ctcalc_spark.config import OutputConfig
    from ctcalc_spark.tables import OutputStore

    scratch, result, _, _, tail = scenario
    run = _run(result, "compare")
    assert run["state"] == "success", (run, tail)
    assert sum(t.startswith("train[") for t in run["tasks"]) == 4  # 2 pipelines x 2 runs, mapped
    out = scratch / "compare"
    assert sorted(p.name for p in (out / "models").iterdir()) == ["fm_b", "lr_a"]
    assert (out / "eval" / "_delta_log").is_dir() and (out / "eval" / "ds=2026-11-02").is_dir()  # a Delta table
    assert OutputStore(OutputConfig(path=str(out / "out"))).days("metrics") == ["2026-11-02"]
    c = json.loads((out / "out" / "compare" / "lr_a_vs_fm_b" / "comparison.json").read_text())["comparisons"][0]
    assert (c["name_a"], c["name_b"], c["m_a"], c["m_b"]) == ("lr_a", "fm_b", 2, 2)
    assert 0.0 <= c["vanilla"]["acc"] <= 1.0 and 0.0 <= c["calibrated"]["acc"] <= 1.0


@needs_airflow
@slow
def test_dags_on_a_spark_connect_connection(scheduler, scenario, connect_server):
    """The platform's Spark connection is a Spark Connect one (the provider's ``spark_connect`` type, token as its
    password): every task of both days runs, the Spark jobs as Connect clients of the server (spark-submit refuses
    a remote with the master the provider always passes), and the tables equal the spark-submit runs' to 1e-12.
    No log shows the token or the secret override. A day of bad input fails for good. compare_pipelines gives the
    comparison that the spark-submit scenario run gave."""
    from urllib.parse import urlparse

    from ctcalc_spark.config import OutputConfig
    from ctcalc_spark.tables import OutputStore
    from tests._frames import assert_same_rows
    from tests._json import json_differences

    scratch, env, sched = scheduler  # after the spark-submit scenario (its compare_pipelines run is compared below)
    url = urlparse(connect_server)
    token = connect_server.split("token=")[1]
    out = scratch / "out_connect"
    overrides = {**json.loads(env["AIRFLOW_VAR_CTCALC_OVERRIDES"]), "output.path": str(out)}
    failures = scratch / "connect_failures.jsonl"
    connect_env = {**env, "AIRFLOW_VAR_CTCALC_OVERRIDES": json.dumps(overrides), "PROBE_FAILURE_OUT": str(failures),
                   "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark_connect", "host": url.hostname,
                                                             "port": url.port, "password": token})}
    day1 = sched["pair"][0]
    bad = _bad_day(scratch, day1)
    log = scratch / "connect_scenario.log"
    with log.open("w") as f:
        proc = subprocess.run([sys.executable, str(REPO / "tests" / "_airflow_scenario.py"), "connect",
                               str(REPO / "dags"), str(scratch / "connect_result.json"), *sched["pair"],
                               str(bad.parent), str(scratch / "out_connect_bad"), str(scratch / "ctr"),
                               str(scratch / "compare_connect")],
                              env=connect_env, stdout=f, stderr=subprocess.STDOUT, cwd=scratch, timeout=600)
    text = log.read_text(errors="replace")
    tail = "\n".join(text.splitlines()[-80:])
    assert proc.returncode == 0, f"connect scenario failed:\n{tail}"
    result = json.loads((scratch / "connect_result.json").read_text())
    *runs, bad_run = result["runs"]
    print(json.dumps({r["ds"]: round(r["seconds"], 1) for r in runs}))
    # Bad input fails the task for good (AirflowFailException: no retry), with the job's own line; nothing written.
    assert bad_run["state"] == "failed" and bad_run["tasks"]["evaluate"] == "failed", (bad_run, tail)
    notified = [json.loads(line) for line in failures.read_text().splitlines()]
    assert [(n["run_id"], n["task_id"]) for n in notified] == [(bad_run["run_id"], "evaluate")], notified
    assert notified[0]["reason"].startswith("AirflowFailException: ctcalc evaluate stopped with exit code 4 (input "
                                            f"data): ctcalc evaluate: error: Invalid evaluation rows for ds={day1}")
    assert "Not retried" in notified[0]["reason"] and not (scratch / "out_connect_bad" / "metrics").exists()
    for run in runs:
        assert run["state"] == "success", (run, tail)
        assert run["tasks"] == {t: ("skipped" if t == "score" else "success") for t in DAILY_GRAPH}, (run, tail)
    # The jobs ran as clients of the server, not through spark-submit; rolling on Delta outputs needs no Spark.
    server = f"sc://localhost:{url.port}/;token=***"
    # evaluate on two days, evaluate of the bad day, compare_pipelines' evaluate and compare
    assert text.count(f"running as a client of {server}:") == 5, tail
    assert text.count("no Spark needed (Delta outputs): running ") == 2, tail  # rolling on two days
    assert text.count(f"Spark Connect session on {server}") >= 4 and "spark-submit --master" not in text
    # The token nowhere; the secret override not in the command lines this operator logs (dag.test() prints the
    # settings task's return value unmasked: the real-scheduler test checks the masked task logs).
    assert token not in text
    started = [line for line in text.splitlines() if "running as a client of" in line or "no Spark needed" in line]
    assert not [line for line in started if SECRET in line]
    assert sum("kafka.sasl.jaas.config" in line and "***" in line for line in started) == 5  # the daily DAG's jobs
    keys = {"metrics": ["ds", "model", "run", "slice_name", "slice_value"],
            "summaries": ["ds", "model", "run", "split", "bin", "label"],
            "rolling": ["window_spec", "ds", "model", "run", "slice_name", "slice_value"]}
    connect_store, submit_store = (OutputStore(OutputConfig(path=str(o))) for o in (out, scratch / "out"))
    # Here the pair's first day is the first window; under the scheduler it had one: its rolling rows differ.
    for table, cols in keys.items():
        days = sched["pair"][1:] if table == "rolling" else sched["pair"]
        assert_same_rows(connect_store.read(table, days=days), submit_store.read(table, days=days), cols)
    assert sorted(p.name for p in (out / "reports").glob("ds=*")) == [f"ds={d}" for d in sched["pair"]]
    # compare_pipelines: torch trains the same seeds on the workers, the jobs run on the server.
    assert result["compare"]["state"] == "success", (result["compare"], tail)
    comparisons = [json.loads((scratch / w / "out" / "compare" / "lr_a_vs_fm_b" / "comparison.json").read_text())
                   for w in ("compare_connect", "compare")]
    assert json_differences(*comparisons) == [], json_differences(*comparisons)[:5]


def test_one_path_per_model_reaches_the_jobs_as_absolute_paths_and_waits_for_each_models_day(tmp_path):
    """Each pipeline's folder lands on its own schedule: the sensor waits for every model's day marker (it asked
    for one marker file for all of them, ctcalc_ready_marker, which the scoring jobs do not write)."""
    from ctcalc_spark.orchestration import tasks as orch

    over = {"input.path": None, "input.model_paths": {"base": str(tmp_path / "base"), "cand": "scores/cand"}}
    variables = {orch.VAR_CONFIG: "conf/demo.yaml", orch.VAR_OVERRIDES: json.dumps(over)}
    s = orch.run_settings("2026-11-16", variables=variables, parse=_parse())
    base, cand = tmp_path / "base" / "ds=2026-11-16", REPO / "scores/cand/ds=2026-11-16"
    assert s["ready"] == {"mode": "marker", "markers": {"base": f"{base}/_SUCCESS", "cand": f"{cand}/_SUCCESS"}}
    s["ready"]["markers"]["cand"] = str(tmp_path / "cand" / "ds=2026-11-16" / "_SUCCESS")
    done, why = orch.input_ready(s["ready"])
    assert not done and why.startswith("2 of 2 models not complete yet: base: waiting for ")
    base.mkdir(parents=True)
    (base / "_SUCCESS").touch()
    done, why = orch.input_ready(s["ready"])
    assert not done and why.startswith("1 of 2 models not complete yet: cand: waiting for ")
    (tmp_path / "cand" / "ds=2026-11-16").mkdir(parents=True)
    (tmp_path / "cand" / "ds=2026-11-16" / "_SUCCESS").touch()
    done, why = orch.input_ready(s["ready"])
    assert done and why.startswith("every model's day is complete (base, cand): ")
    s = orch.run_settings("2026-11-16", variables={**variables, orch.VAR_READY_MARKER: "/flags/{ds}.done"},
                          parse=_parse())
    assert s["ready"] == {"mode": "marker", "marker": "/flags/2026-11-16.done"} and s["eval_partition"] is None
    sets = dict(a.split("=", 1) for a in s["overrides"])
    assert json.loads(sets["input.model_paths"]) == {"base": str(tmp_path / "base"), "cand": str(REPO / "scores/cand")}


def test_the_daily_run_vacuums_its_output_with_the_retention_of_the_environment(monkeypatch):
    from ctcalc_spark.errors import ConfigError
    from ctcalc_spark.orchestration import tasks as orch

    variables = {orch.VAR_CONFIG: "conf/demo.yaml", orch.VAR_OVERRIDES: json.dumps({"output.path": "/data/x"})}
    s = orch.run_settings("2026-11-16", variables=variables, parse=_parse())
    assert s["vacuum_args"][:7] == ["tables", "vacuum", "--apply", "--config", str(REPO / "conf/demo.yaml"),
                                    "--retention-hours", "168"]
    assert "output.path=/data/x" in s["vacuum_args"]
    monkeypatch.setenv("CTCALC_VACUUM_RETENTION_HOURS", "24")
    assert orch.run_settings("2026-11-16", variables=variables, parse=_parse())["vacuum_args"][6] == "24"
    monkeypatch.setenv("CTCALC_VACUUM_RETENTION_HOURS", "a week")
    with pytest.raises(ConfigError, match="CTCALC_VACUUM_RETENTION_HOURS must be a whole number"):
        orch.run_settings("2026-11-16", variables=variables, parse=_parse())
