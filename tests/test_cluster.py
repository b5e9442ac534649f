"""jobs/evaluate.py on a real Spark standalone cluster on loopback (scripts/cluster_start.sh),
checked against the same job on local[2]. The scripts are the ones docker/compose.yaml runs."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
DS = "2026-11-15"
MASTER = "spark://127.0.0.1:7077"
KEYS = ["model", "run", "slice_name", "slice_value"]
FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _env(run_dir: Path) -> dict[str, str]:
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "CTCALC_PYTHON": sys.executable,
            "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "CTCALC_CLUSTER_DIR": str(run_dir),
            "SPARK_WORKER_CORES": "2", "SPARK_WORKER_MEMORY": "2g"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Master + worker started by scripts/cluster_start.sh, stopped by scripts/cluster_stop.sh (by PID)."""
    run_dir = tmp_path_factory.mktemp("cluster")
    env = _env(run_dir)
    t = time.perf_counter()
    start = subprocess.run([str(REPO / "scripts" / "cluster_start.sh")], env=env, capture_output=True, text=True)
    started_s = time.perf_counter() - t
    if start.returncode != 0:
        logs = "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in run_dir.glob("*.log"))
        subprocess.run([str(REPO / "scripts" / "cluster_stop.sh")], env=env)
        pytest.fail(f"cluster_start.sh failed ({start.returncode}): {start.stderr}\n{logs}")
    pids = {n: int((run_dir / f"{n}.pid").read_text()) for n in ("master", "worker")}
    yield {"env": env, "run_dir": run_dir, "pids": pids, "start_s": started_s}
    stop = subprocess.run([str(REPO / "scripts" / "cluster_stop.sh")], env=env, capture_output=True, text=True)
    assert stop.returncode == 0, stop.stderr
    for pid in pids.values():
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def _submit(master: str, data: Path, out: Path, env: dict[str, str]) -> float:
    t = time.perf_counter()
    cmd = [str(Path(sys.executable).parent / "spark-submit"), "--master", master,
           "--conf", "spark.sql.shuffle.partitions=4", "--conf", "spark.ui.enabled=false",
           # Short-lived JVMs on 2 cores: C1 only and the serial GC halve the CPU time of a small job.
           "--conf", f"spark.driver.extraJavaOptions={FAST_JVM}",
           "--conf", f"spark.executor.extraJavaOptions={FAST_JVM}",
           str(REPO / "jobs" / "evaluate.py"), "--config", str(REPO / "conf" / "demo.yaml"), "--ds", DS,
           "--set", f"input.path={data}", "--set", f"output.path={out}"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return time.perf_counter() - t


def test_evaluate_on_standalone_cluster_matches_local(cluster, tmp_path):
    import numpy as np
    import pandas as pd

    from ctcalc_spark.config import OutputConfig
    from ctcalc_spark.demo import write_demo_eval
    from ctcalc_spark.tables import OutputStore

    data = tmp_path / "eval"
    write_demo_eval(data, n_examples_per_day=2000, n_runs=2, n_days=1)
    cluster_s = _submit(MASTER, data, tmp_path / "out_cluster", cluster["env"])
    local_s = _submit("local[2]", data, tmp_path / "out_local", cluster["env"])

    # The application ran on the cluster: the master lists it as completed, the worker launched its executor.
    with urllib.request.urlopen("http://127.0.0.1:8080/json/", timeout=5) as r:
        state = json.load(r)
    assert state["aliveworkers"] == 1
    assert any(a["name"] == "ctcalc-evaluate" for a in state["completedapps"]), state["completedapps"]
    assert "Asked to launch executor" in (cluster["run_dir"] / "worker.log").read_text()

    def read(out: Path, table: str, keys: list[str]) -> pd.DataFrame:  # without the run ids: two runs, their own
        df = OutputStore(OutputConfig(path=str(out))).read(table, days=[DS]).drop(columns="ds")
        return df.sort_values(keys).reset_index(drop=True)

    diffs = {}
    for table, keys in (("metrics", KEYS), ("summaries", ["model", "run", "split", "bin", "label"])):
        on_cluster, local = read(tmp_path / "out_cluster", table, keys), read(tmp_path / "out_local", table, keys)
        assert len(on_cluster) == len(local) > 0
        num = [c for c in local.columns if pd.api.types.is_numeric_dtype(local[c])]
        other = [c for c in local.columns if c not in num]
        pd.testing.assert_frame_equal(on_cluster[other], local[other], obj=table)
        a, b = on_cluster[num].to_numpy(np.float64), local[num].to_numpy(np.float64)
        assert np.array_equal(np.isnan(a), np.isnan(b))
        diffs[table] = float(np.nanmax(np.abs(a - b))) if a.size else 0.0
        assert diffs[table] <= 1e-12, (table, diffs[table])
    print(json.dumps({"cluster_start_s": round(cluster["start_s"], 1), "cluster_submit_s": round(cluster_s, 1),
                      "local_submit_s": round(local_s, 1), "max_abs_diff": diffs}))


def test_dag_reaches_the_cluster_through_the_connection_alone(cluster):
    """The SparkSubmitHook the DAG uses, with only AIRFLOW_CONN_SPARK_DEFAULT changed, targets the cluster."""
    code = ("from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook\n"
            "h = SparkSubmitHook(conn_id='spark_default')\n"
            "print(' '.join(h._build_spark_submit_command('jobs/evaluate.py')))\n")
    env = {**cluster["env"], "AIRFLOW_HOME": str(cluster["run_dir"] / "airflow_home"),
           "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
           "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": MASTER})}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"--master {MASTER}" in proc.stdout.strip().splitlines()[-1]
