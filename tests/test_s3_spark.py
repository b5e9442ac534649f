"""Spark and the product's commands on object storage: evaluation tables read over s3a:// (hadoop-aws loaded by
configuration from the Ivy cache), outputs written as Delta tables on S3 by deltalake, credentials only in the
environment. Each command runs in its own process, as a deployment runs it."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
import pytest
from scipy.special import expit

from tests._cli import run_cli
from tests._frames import read_delta_table

pytestmark = pytest.mark.slow  # an S3 server, and Spark with hadoop-aws in its own processes

DAYS = ["2026-11-20", "2026-11-21"]


def _eval_folder(root: Path) -> None:
    rng = np.random.default_rng(5)
    for i, day in enumerate(DAYS):
        n = 800 + 200 * i
        t = rng.normal(-1.2, 1.0, n)
        y = (rng.random(n) < expit(t)).astype(np.int64)
        frames = [pd.DataFrame({"model": m, "run": r, "example_id": np.arange(n), "label": y,
                                "logit": t + rng.normal(0.1 * r, 0.3, n)}) for m in ("a", "b") for r in (0, 1)]
        (root / f"ds={day}").mkdir(parents=True)
        pd.concat(frames, ignore_index=True).to_parquet(root / f"ds={day}" / "part-0.parquet", index=False)


def _config(path: Path, input_path: str, output_path: str) -> str:
    path.write_text(yaml.safe_dump({"task": "binary", "input": {"path": input_path},
                                    "output": {"path": output_path},
                                    "split": {"bias_fraction": 0.1, "salt": "s3"}}))
    return str(path)


def _metrics(uri: str, storage_options: dict[str, str] | None = None) -> pd.DataFrame:
    got = read_delta_table(uri, storage_options=storage_options)
    keep = [c for c in got.columns if c not in ("written_at", "run_id", "ctcalc_version", "config_hash", "input")]
    return got[keep].sort_values(["ds", "model", "run", "slice_name", "slice_value"]).reset_index(drop=True)


def test_evaluate_from_s3_equals_evaluate_from_a_folder(s3_server, tmp_path):
    """A range of days read over s3a:// with the metrics written as a Delta table on S3 gives the metrics of the
    same range read from a local folder; the secret key shows in no output, log line or commit."""
    local = tmp_path / "eval"
    _eval_folder(local)
    prefix = s3_server.fresh_prefix("evaluate")
    client = s3_server.client()
    for f in sorted(local.rglob("*.parquet")):
        client.upload_file(str(f), s3_server.bucket, f"{prefix}/eval/{f.relative_to(local).as_posix()}")
    env = s3_server.env()
    days = f"{DAYS[0]}..{DAYS[1]}"
    run_cli(["evaluate", "--config", _config(tmp_path / "local.yaml", str(local), str(tmp_path / "out")),
             "--ds", days])
    on_s3 = _config(tmp_path / "s3.yaml", s3_server.url(f"{prefix}/eval", "s3a"), s3_server.url(f"{prefix}/out"))
    proc = run_cli(["evaluate", "--config", on_s3, "--ds", days], env=env)
    want = _metrics(str(tmp_path / "out" / "metrics"))
    got = _metrics(s3_server.url(f"{prefix}/out/metrics"), s3_server.storage_options())
    assert len(want) > 0 and sorted(set(got["ds"])) == DAYS
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-12)
    # rolling and report read the metrics from S3 without Spark
    rolled = run_cli(["rolling", "--config", on_s3, "--ds", days], env=env)
    texts = [proc.stdout, proc.stderr, rolled.stdout, rolled.stderr]
    for obj in client.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/out")["Contents"]:
        if "_delta_log" in obj["Key"]:
            texts.append(client.get_object(Bucket=s3_server.bucket, Key=obj["Key"])["Body"].read().decode())
    assert not [t for t in texts if s3_server.secret_key in t]
    assert sum("_delta_log" in t or "commitInfo" in t for t in texts) > 0


def test_two_evaluates_of_one_day_on_s3_leave_the_day_once(s3_server, tmp_path):
    """Two `ctcalc evaluate` of the same day started together against S3: when their runs overlap, one commits and
    the other stops with the conflict error (exit 1); either way the day's metrics are there once."""
    import os
    import subprocess
    import sys

    from tests._cli import REPO

    local = tmp_path / "eval"
    _eval_folder(local)
    prefix = s3_server.fresh_prefix("race")
    client = s3_server.client()
    for f in sorted(local.rglob("*.parquet")):
        client.upload_file(str(f), s3_server.bucket, f"{prefix}/eval/{f.relative_to(local).as_posix()}")
    cfg = _config(tmp_path / "s3.yaml", s3_server.url(f"{prefix}/eval", "s3a"), s3_server.url(f"{prefix}/out"))
    env = {**os.environ, **s3_server.env(), "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-m", "ctcalc_spark.cli", "evaluate", "--config", cfg, "--ds", DAYS[1]],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=900), *p.communicate()) for p in procs]
    codes = sorted(rc for rc, _, _ in results)
    assert codes in ([0, 0], [0, 1]), [(rc, err[-600:]) for rc, _, err in results]
    if codes == [0, 1]:
        [err] = [err for rc, _, err in results if rc == 1]
        # which of the run's tables the loser meets first depends on timing: either one names the day
        assert re.search(r"Another run committed ds=2026-11-21 of the (summaries|calibrated_exact|metrics) table", err), err[-1500:]
    got = _metrics(s3_server.url(f"{prefix}/out/metrics"), s3_server.storage_options())
    assert not got.duplicated(["ds", "model", "run", "slice_name", "slice_value"]).any()
    assert sorted(set(got["ds"])) == [DAYS[1]] and len(got) > 0
    assert not [t for _, out, err in results for t in (out, err) if s3_server.secret_key in t]
    print("evaluate race exit codes:", codes)


def test_the_stream_writes_its_tables_on_s3_as_on_a_folder(s3_server, tmp_path):
    """`ctcalc stream` with output.path on S3 (its checkpoint in a local folder: Spark's checkpoint needs s3a) writes
    the stream tables as Delta tables there, equal to the same stream's on a local folder; the secret key is in no
    output, log line or commit."""
    prefix, client = s3_server.fresh_prefix("stream"), s3_server.client()
    texts, metrics = [], {}
    for where, out in (("local", str(tmp_path / "out")), ("s3", s3_server.url(f"{prefix}/out"))):
        proc = run_cli(["stream", "--config", "conf/stream_demo.yaml", "--trigger", "availableNow", "--generate-demo",
                        "1", "--close-at-end", "--set", f"output.path={out}",
                        "--set", f"stream.path={tmp_path / where / 'landing'}",
                        "--set", f"stream.checkpoint={tmp_path / where / 'checkpoint'}"],
                       env=s3_server.env() if where == "s3" else None)
        texts += [proc.stdout, proc.stderr]
        options = s3_server.storage_options() if where == "s3" else None
        got = read_delta_table(f"{out}/stream_metrics", storage_options=options)
        when = ("written_at", "finalized_at", "run_id", "ctcalc_version", "config_hash", "input", "batch_id")
        keep = [c for c in got.columns if c not in when]  # the rest is the stream's numbers
        metrics[where] = got[keep].sort_values(["window_start", "model", "run", "slice_name", "slice_value"]) \
            .reset_index(drop=True)
    assert len(metrics["local"]) > 0
    pd.testing.assert_frame_equal(metrics["s3"], metrics["local"], check_exact=False, rtol=1e-12)
    for obj in client.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/out")["Contents"]:
        if "_delta_log" in obj["Key"]:
            texts.append(client.get_object(Bucket=s3_server.bucket, Key=obj["Key"])["Body"].read().decode())
    assert any("commitInfo" in t for t in texts)
    assert not [t[:200] for t in texts if s3_server.secret_key in t]
