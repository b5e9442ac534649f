"""Evaluate and rolling on a Spark Connect session (a Connect server process, as shared and serverless
platforms run it) give the same tables as on the classic session, to 1e-12; so does the CLI, pointed at the
server by a config's ``spark.remote``."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pytest

from tests._cli import REPO, run_cli
from tests._frames import assert_same_rows, read_delta_table
from tests._json import json_differences

pytestmark = pytest.mark.slow

DAYS = ["2026-11-15", "2026-11-16", "2026-11-17"]
METRIC_KEYS = ["ds", "model", "run", "slice_name", "slice_value"]


@pytest.mark.parametrize("task", ["binary", "regression"])
def test_evaluate_and_rolling_on_spark_connect_equal_classic(spark, connect_spark, demo_config, tmp_path,
                                                             monkeypatch, task):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ctcalc_spark.demo import generate_demo_eval
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling
    from ctcalc_spark.spark.session import is_connect
    from ctcalc_spark.tables import OutputStore

    rows = generate_demo_eval(n_examples_per_day=1500, n_runs=3, n_days=len(DAYS), seed=4, start_ds=DAYS[0])
    rows["parity"] = np.where(rows["example_id"] % 2 == 0, "even", "odd")  # a slice column
    pq.write_to_dataset(pa.Table.from_pandas(rows, preserve_index=False), str(tmp_path / "eval"), partition_cols=["ds"])
    over = {"rolling": {"window": "day"}, "columns": {"slices": ["parity"]}} if task == "binary" else {
        "task": "regression", "columns": {"logit": None, "prediction": "logit"}, "rolling": {"window": "week"}}
    cfgs = {name: demo_config(output={"path": str(tmp_path / name)}, **over) for name in ("connect", "classic")}

    assert is_connect(connect_spark)
    from ctcalc_spark.spark.session import BASE_CONF

    for session in (spark, connect_spark):  # the runtime settings reach both kinds of session
        assert {k: session.conf.get(k) for k in BASE_CONF} == BASE_CONF
    evaluate(connect_spark, cfgs["connect"], f"{DAYS[0]}..{DAYS[-1]}")
    run_rolling(connect_spark, cfgs["connect"], DAYS)
    with monkeypatch.context() as m:  # classic columns for the classic session
        m.delenv("SPARK_CONNECT_MODE_ENABLED", raising=False)
        evaluate(spark, cfgs["classic"], f"{DAYS[0]}..{DAYS[-1]}")
        run_rolling(spark, cfgs["classic"], DAYS)

    got, want = OutputStore(cfgs["connect"]), OutputStore(cfgs["classic"])
    assert_same_rows(got.read("metrics"), want.read("metrics"), METRIC_KEYS)
    summary_keys = ["ds", "model", "run", "split"] + (["bin", "label", "parity"] if task == "binary" else [])
    assert_same_rows(got.read("summaries"), want.read("summaries"), summary_keys)
    assert_same_rows(got.read("rolling"), want.read("rolling"), ["window_spec", *METRIC_KEYS])
    assert got.check_days(DAYS) == [] and want.check_days(DAYS) == []
    via = OutputStore(cfgs["connect"], connect_spark)  # with a session given, path tables are still read as Delta
    read = via.read("metrics")
    assert_same_rows(read, want.read("metrics"), METRIC_KEYS)
    assert "run_id" not in read.columns and "run_id" in via.read("metrics", with_run_id=True).columns


def _cli(args: list[str], cwd: Path, *, command: list[str] | None = None, remote: str | None = None,
         session: bool = True) -> str:
    """The CLI (or ``command``) as a user runs it: no Connect flag in its environment, ``SPARK_REMOTE`` only when
    ``remote`` is given; exit 0, and (``session``) its log names the Connect session, and no other. Its stdout."""
    proc = run_cli(args, cwd=cwd, command=command, drop=("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE"),
                   env={"SPARK_REMOTE": remote} if remote else None)
    log = proc.stderr + proc.stdout  # under spark-submit the log lines reach stdout
    assert ("Spark Connect session on sc://localhost:" in log) is session, log[-3000:]
    assert re.search(r"token=(?!\*\*\*)", log) is None, log[-3000:]  # the server's token is never printed
    return proc.stdout


def test_cli_on_a_connect_server_equals_classic(spark, connect_server, tmp_path):
    """The CLI's evaluate, rolling, compare and report, pointed at a Connect server by ``spark.remote``, each in a
    process of its own: evaluate (through the server) and rolling (no session: it reads and writes the Delta tables
    here) write what the classic session writes, and compare and the report, which start no session either, give
    what they give on the classic session's tables. A submitted job (``spark-submit jobs/evaluate.py``) reaches the
    server through ``SPARK_REMOTE``."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.demo import generate_demo_eval
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling
    from ctcalc_spark.tables import OutputStore

    rows = generate_demo_eval(n_examples_per_day=1500, n_runs=3, n_days=len(DAYS), seed=5, start_ds=DAYS[0])
    pq.write_to_dataset(pa.Table.from_pandas(rows, preserve_index=False), str(tmp_path / "eval"), partition_cols=["ds"])
    job = {"task": "binary", "input": {"path": str(tmp_path / "eval")}, "split": {"bias_fraction": 0.1, "salt": "t"},
           "rolling": {"window": "day"}}
    cfgs = {name: config_from_dict({**job, "output": {"path": str(tmp_path / name)}})
            for name in ("connect", "classic", "submitted")}
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({**job, "output": {"path": str(tmp_path / "connect")},
                                    "spark": {"remote": connect_server}}))
    span = f"{DAYS[0]}..{DAYS[-1]}"
    _cli(["evaluate", "--config", str(conf), "--ds", span], tmp_path)
    _cli(["rolling", "--config", str(conf), "--ds", span], tmp_path, session=False)
    submitted = tmp_path / "submitted.yaml"
    submitted.write_text(yaml.safe_dump({**job, "output": {"path": str(tmp_path / "submitted")}}))
    _cli(["--config", str(submitted), "--ds", span], tmp_path, remote=connect_server,
         command=[str(Path(sys.executable).parent / "spark-submit"), str(REPO / "jobs" / "evaluate.py")])
    evaluate(spark, cfgs["classic"], span)
    run_rolling(spark, cfgs["classic"], DAYS)
    got, want = OutputStore(cfgs["connect"]), OutputStore(cfgs["classic"])
    assert_same_rows(got.read("metrics"), want.read("metrics"), METRIC_KEYS)
    assert_same_rows(OutputStore(cfgs["submitted"]).read("metrics"), want.read("metrics"), METRIC_KEYS)
    assert_same_rows(got.read("rolling"), want.read("rolling"), ["window_spec", *METRIC_KEYS])

    classic = tmp_path / "classic.yaml"
    classic.write_text(yaml.safe_dump({**job, "output": {"path": str(tmp_path / "classic")}}))
    pair = ["--a", "baseline", "--b", "dcn", "--ds-from", DAYS[0], "--ds-to", DAYS[-1], "--bootstrap", "200"]
    for name, config in (("connect", conf), ("classic", classic)):
        _cli(["compare", "--config", str(config), *pair, "--out", str(tmp_path / f"cmp_{name}")], tmp_path,
             session=False)
        _cli(["report", "--config", str(config), "--start", DAYS[0], "--end", DAYS[-1],
              "--out", str(tmp_path / f"rep_{name}")], tmp_path, session=False)
    names = ("connect", "classic")
    cmp = {n: json.loads((tmp_path / f"cmp_{n}" / "comparison.json").read_text()) for n in names}
    assert json_differences(cmp["connect"], cmp["classic"]) == [] and cmp["connect"]["comparisons"][0]["m_a"] == 3
    rep = {n: json.loads(next((tmp_path / f"rep_{n}").glob(f"drift_{DAYS[0]}_{DAYS[-1]}_*.json")).read_text())
           for n in names}
    for r in rep.values():
        r.pop("config")  # the two configs differ in where the tables are
    assert json_differences(rep["connect"], rep["classic"]) == [] and len(rep["connect"]["rows"]) > 0


def test_score_on_a_connect_server_from_relative_paths(connect_server, tmp_path):
    """``ctcalc score --engine spark`` on a Connect server whose working folder is not the client's: the relative
    table, models and output paths are the client's (made absolute before they reach the server), and the
    scores equal the local engine's (logits to float32 rounding: the engines batch differently)."""
    pytest.importorskip("torch")
    from ctcalc_spark.upstream.config import TableColumns, TableSource
    from ctcalc_spark.upstream.data import write_census_like
    from ctcalc_spark.upstream.models import ModelSpec
    from ctcalc_spark.upstream.score import find_models, score_table
    from ctcalc_spark.upstream.table import read_table
    from ctcalc_spark.upstream.train import train_table_models

    census = write_census_like(tmp_path / "data", n_train=2_000, n_eval=1_500, seed=4, eval_days=2)
    cols = TableColumns(categorical=("work class", "education", "sex"), numeric=("age", "hours-per-week"),
                        label="income", positive_label=">50K", example_id="person id", ds="interview date",
                        null_values=("?",))
    train_table_models({"lr": ModelSpec(arch="lr", batch_size=512)}, read_table(TableSource(
        path=str(census["train"]), format="csv")), cols, seeds=[0], models_dir=tmp_path / "models")
    local = score_table(find_models(tmp_path / "models"), TableSource(path=str(census["eval"]), format="csv"),
                        tmp_path / "local")
    relative = census["eval"].relative_to(tmp_path)
    _cli(["score", "--eval", str(relative), "--format", "csv", "--models-dir", "models", "--out", "scores",
          "--engine", "spark", "--set", f"spark.remote={connect_server}"], tmp_path)
    a, b = (read_delta_table(tmp_path / name) for name in ("local", "scores"))  # the scorer's Delta tables
    both = a.merge(b, on=["model", "run", "example_id"], suffixes=("_local", "_spark"), validate="one_to_one")
    assert len(both) == len(a) == len(b) == 1_500 and sorted(local.rows_per_day) == sorted(b["ds"].astype(str).unique())
    assert (both["label_local"] == both["label_spark"]).all()
    np.testing.assert_allclose(both["logit_local"], both["logit_spark"], rtol=0, atol=1e-6)


def test_connect_server_that_refuses_the_client_fails_in_one_line(connect_server, tmp_path):
    """A wrong token: pyspark's error is a multi-line gRPC dump whose first line (all the CLI used to show) says
    only '<_InactiveRpcError of RPC that terminated with:'. A token to a host other than 'localhost' makes pyspark
    use TLS, and against this server (no TLS) its client retried the handshake for minutes (run_cli's timeout of 2
    minutes fails such a wait). The server's own words for the refusal (after the gRPC status) are not asserted."""
    from urllib.parse import urlparse

    from ctcalc_spark.errors import EXIT_CONFIG, EXIT_RUNTIME
    from ctcalc_spark.spark.session import PROXY_VARIABLES

    port = urlparse(connect_server).port
    args = ["evaluate", "--config", str(REPO / "conf" / "demo.yaml"), "--ds", DAYS[0],
            "--set", f"output.path={tmp_path / 'out'}"]
    drop = ("SPARK_CONNECT_MODE_ENABLED", *PROXY_VARIABLES)
    wrong = run_cli([*args, "--set", f"spark.remote=sc://localhost:{port}/;token=wrong-w1"], drop=drop,
                    expect=EXIT_CONFIG, timeout=120)
    assert re.search(r"The Spark Connect server refused this client: Spark Connect call failed: UNAUTHENTICATED: "
                     r"\S.*\. Check the token in spark\.remote", wrong.stderr), wrong.stderr
    assert "wrong-w1" not in wrong.stderr and "RpcError" not in wrong.stderr
    token = connect_server.split("token=")[1]
    tls = run_cli([*args, "--set", f"spark.remote=sc://127.0.0.1:{port}/;token={token}"], drop=drop,
                  expect=EXIT_RUNTIME, timeout=120)
    assert f"The Spark Connect server sc://127.0.0.1:{port}/;token=*** (127.0.0.1:{port}) does not answer TLS" \
        in tls.stderr
    assert "write its host as localhost" in tls.stderr and token not in tls.stderr
    assert not (tmp_path / "out").exists()
