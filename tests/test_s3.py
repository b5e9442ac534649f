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

WRITERS = 20
DAY = "2026-01-01"


def test_the_server_refuses_a_wrong_secret(s3_server):
    from botocore.exceptions import ClientError

    key = s3_server.fresh_prefix("probe")
    s3_server.client().put_object(Bucket=s3_server.bucket, Key=key, Body=b"1")
    with pytest.raises(ClientError, match="SignatureDoesNotMatch"):
        s3_server.client(secret="not-the-secret").get_object(Bucket=s3_server.bucket, Key=key)


def test_the_server_honours_if_none_match(s3_server):
    """The header delta-rs's commit rests on: a second create of one key fails."""
    from botocore.exceptions import ClientError

    key = s3_server.fresh_prefix("once")
    client = s3_server.client()
    client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError, match="PreconditionFailed"):
        client.put_object(Bucket=s3_server.bucket, Key=key, Body=b"2", IfNoneMatch="*")
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
