"""Object storage: the tests' S3 server (moto on loopback, signed requests) and Delta commits on it.

deltalake 1.6 commits on S3 with a conditional put (``If-None-Match: *`` on the commit file, no lock table and
no unsafe rename); the server honours that header, so racing writers of one table version cannot both commit.
"""
from __future__ import annotations

import multiprocessing
import time
from collections import Counter

import pyarrow as pa
import pytest

pytestmark = pytest.mark.slow  # an S3 server, racing writer processes

WRITERS = 20
DAY = "2026-01-01"


def test_the_server_refuses_a_wrong_secret(s3_server):
    from botocore.exceptions import ClientError

    key = s3_server.fresh_prefix("probe")
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=b"1")
    with pytest.raises(ClientError) as refused:
        s3_server.client(secret="not-the-secret").get_object(Bucket=s3_server.bucket, Key=key)
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"  # S3's error code, not a message


def test_the_server_honours_if_none_match(s3_server):
    """The header delta-rs's commit rests on: a second create of one key fails."""
    from botocore.exceptions import ClientError

    key = s3_server.fresh_prefix("once")
    client = s3_server.client()
    client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"2", IfNoneMatch="*")
    assert refused.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=s3_server.bucket, Key=key)["Body"].read() == b"1"


def _race(args: tuple[str, dict[str, str], int, str, float]) -> str:
    """One writer: loads the table at its current version, waits for the start time, then writes ``i`` (replacing
    the day or appending). Returns 'ok' or the exception's class name."""
    from deltalake import DeltaTable, write_deltalake

    uri, options, i, mode, start = args
    table = DeltaTable(uri, storage_options=options)  # every writer starts from the same snapshot
    rows = pa.table({"ds": [DAY] * 3, "writer": [i] * 3})
    time.sleep(max(0.0, start - time.time()))
    try:
        if mode == "replace":
            write_deltalake(table, rows, mode="overwrite", predicate=f"ds = '{DAY}'")
        else:
            write_deltalake(table, rows, mode="append")
        return "ok"
    except Exception as e:  # noqa: BLE001 - the outcome is what the test counts
        return type(e).__name__


def _run_race(s3_server, mode: str) -> tuple[Counter[str], object]:
    from deltalake import DeltaTable, write_deltalake

    uri = s3_server.url(s3_server.fresh_prefix(f"race-{mode}"))
    options = s3_server.storage_options()
    write_deltalake(uri, pa.table({"ds": [DAY], "writer": [-1]}), partition_by=["ds"], storage_options=options)
    start = time.time() + 8.0  # after every process has started and loaded the table
    with multiprocessing.get_context("spawn").Pool(WRITERS) as pool:
        outcomes = pool.map(_race, [(uri, options, i, mode, start) for i in range(WRITERS)])
    return Counter(outcomes), DeltaTable(uri, storage_options=options)


def test_racing_replacements_of_one_day_commit_once(s3_server):
    """20 writers replace one day from the same table version: one commits, 19 stop with the conflict error, and
    the day holds the winner's rows alone."""
    outcomes, table = _run_race(s3_server, "replace")
    assert outcomes == Counter({"ok": 1, "CommitFailedError": WRITERS - 1})
    assert table.version() == 1
    writers = table.to_pyarrow_table().column("writer").to_pylist()
    assert len(writers) == 3 and len(set(writers)) == 1 and writers[0] >= 0


def test_racing_appends_lose_and_double_nothing(s3_server):
    """20 appends from the same version: each commit gets a version of its own (the losers of a version retry on
    the next), so every committed writer's rows are there once and no failed writer's are."""
    outcomes, table = _run_race(s3_server, "append")
    assert set(outcomes) <= {"ok", "CommitFailedError"}
    written = Counter(table.to_pyarrow_table().column("writer").to_pylist())
    assert written.pop(-1) == 1
    assert len(written) == outcomes["ok"] and all(n == 3 for n in written.values())
    assert table.version() == outcomes["ok"]
    assert [h["version"] for h in table.history()] == list(range(outcomes["ok"], -1, -1))


NO_SPARK = ("import sys; sys.modules['pyspark'] = None  # 'import pyspark' fails: no JVM can start\n"
            "from ctcalc_spark.cli.main import main\nsys.exit(main(sys.argv[1:]))")


def test_rolling_report_and_rolling_compare_on_s3_equal_a_folder_and_start_no_jvm(s3_server, tmp_path,
                                                                                   restore_ctcalc_logger):
    """Outputs on S3 as Delta tables: `ctcalc rolling` writes its table there, `ctcalc report` and `ctcalc compare
    --rolling` read them (deltalake, credentials from the environment alone), each in a process where importing
    pyspark fails. Every table and report file equals the same commands' on a local folder (run in this process);
    the secret key is in no output, report file or Delta commit."""
    import json
    import sys

    import pandas as pd

    from ctcalc_spark.cli.main import main
    from ctcalc_spark.core.finalize import metrics_from_summaries
    from tests._cli import run_cli
    from tests._frames import read_delta_table, write_outputs
    from tests._rows import binary_stream, binary_summary_rows, day_range

    days = day_range("2026-11-16", 4)
    raw = pd.concat([binary_stream(days, runs=3, n=300, seed=1).assign(model="a"),
                     binary_stream(days, runs=3, n=300, seed=2).assign(model="b")], ignore_index=True)
    summaries = binary_summary_rows(raw)
    write_outputs(tmp_path / "local" / "out", {"summaries": summaries, "metrics": metrics_from_summaries(
        summaries, "binary", keys=["ds", "model", "run"]).assign(task="binary")})
    prefix, client = s3_server.fresh_prefix("reports"), s3_server.client()
    local = tmp_path / "local" / "out"
    for f in sorted(local.rglob("*")):  # the same tables, byte for byte, on S3
        if f.is_file():
            client.upload_file(str(f), s3_server.bucket, f"{prefix}/out/{f.relative_to(local).as_posix()}")
    texts = []
    for where, output in (("local", str(local)), ("s3", s3_server.url(f"{prefix}/out"))):
        config = tmp_path / where / "c.yaml"
        config.parent.mkdir(exist_ok=True)
        config.write_text(f"input: {{path: eval}}\noutput: {{path: '{output}'}}\nrolling: {{window: day}}\n")
        for args in (["rolling", "--ds", f"{days[1]}..{days[-1]}"],
                     ["report", "--start", days[1], "--end", days[-1], "--out", str(tmp_path / where / "rep")],
                     ["compare", "--rolling", "--window", "day", "--a", "a", "--b", "b", "--ds-from", days[0],
                      "--ds-to", days[-1], "--bootstrap", "100", "--out", str(tmp_path / where / "cmp")]):
            if where == "local":
                assert main([*args, "--config", str(config)]) == 0
                continue
            proc = run_cli([*args, "--config", str(config)], command=[sys.executable, "-c", NO_SPARK],
                           env=s3_server.env())
            assert "Traceback" not in proc.stderr and "pyspark" not in proc.stderr, proc.stderr
            texts += [proc.stdout, proc.stderr]
    keep = ["window_spec", "ds", "model", "run", "slice_name", "slice_value"]
    local_rolling = read_delta_table(local / "rolling")
    s3_rolling = read_delta_table(s3_server.url(f"{prefix}/out/rolling"), storage_options=s3_server.storage_options())
    assert len(local_rolling) > 0 and sorted(set(s3_rolling["ds"])) == days[1:]
    varying = [c for c in ("run_id", "written_at", "config_hash", "input") if c in local_rolling.columns]
    pd.testing.assert_frame_equal(s3_rolling.drop(columns=varying).sort_values(keep).reset_index(drop=True),
                                  local_rolling.drop(columns=varying).sort_values(keep).reset_index(drop=True))
    files = {where: {f.relative_to(tmp_path / where).as_posix(): f.read_text()
                     for sub in ("rep", "cmp") for f in sorted((tmp_path / where / sub).rglob("*")) if f.is_file()}
             for where in ("local", "s3")}
    assert sorted(files["s3"]) == sorted(files["local"]) and any(n.endswith(".json") for n in files["s3"])
    for name, text in files["s3"].items():
        if name.endswith(".csv"):
            assert text == files["local"][name], name
        elif name.endswith(".json"):  # the report echoes its config (the output path): the rest is equal
            got, want = json.loads(text), json.loads(files["local"][name])
            assert {k: v for k, v in got.items() if k != "config"} == {k: v for k, v in want.items() if k != "config"}
    texts += files["s3"].values()
    for obj in client.list_objects_v2(Bucket=s3_server.bucket, Prefix=f"{prefix}/out/rolling/_delta_log")["Contents"]:
        texts.append(client.get_object(Bucket=s3_server.bucket, Key=obj["Key"])["Body"].read().decode())
    assert any("commitInfo" in t for t in texts)
    assert not [t[:200] for t in texts if s3_server.secret_key in t or s3_server.access_key in t]
