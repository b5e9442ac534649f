"""``ctcalc stream`` from a real Kafka broker (KRaft, started by scripts/kafka_start.sh on 127.0.0.1) through Spark's
own Kafka source: each closed window equals the batch evaluate and rolling jobs on the same rows, malformed messages
are quarantined by topic/partition/offset, a kill -9 and a broker restart lose and double nothing, and messages gone
from Kafka before the stream read them stop the stream (failOnDataLoss) or, when allowed, are listed as lost.

The stream runs as the user runs it, ``ctcalc stream`` in its own process (Spark's Kafka source comes with
``spark.jars.packages``, a launch setting); the batch references run in this process's session. A broker that
cannot start fails these tests."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ctcalc_spark.config import config_from_dict
from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.errors import ConfigError
from ctcalc_spark.jobs.stream import read_stream_counts, read_stream_metrics, read_stream_rolling, read_stream_state
from ctcalc_spark.jobs.stream import kafka_data_loss, write_stream_demo_files
from ctcalc_spark.jobs.stream_source import KAFKA_PACKAGE, kafka_checkpoint_offsets, with_kafka_package
from tests._cli import REPO, run_cli
from tests.test_stream import DAYS, _assert_same_as_batch, _batch_reference

pytestmark = pytest.mark.slow

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ctcalc"
SCHEMA = "model STRING, run STRING, example_id BIGINT, label DOUBLE, logit DOUBLE, event_time TIMESTAMP"
COLUMNS = [c.split()[0] for c in SCHEMA.split(", ")]


class Broker:
    """One broker of scripts/kafka_start.sh: its address, and stop/start as the scripts do them."""

    def __init__(self, folder: Path, port: int, controller_port: int) -> None:
        self.env = {**os.environ, "CTCALC_KAFKA_DIR": str(folder), "CTCALC_KAFKA_PORT": str(port),
                    "CTCALC_KAFKA_CONTROLLER_PORT": str(controller_port)}
        self.bootstrap = f"127.0.0.1:{port}"

    def start(self) -> None:
        proc = subprocess.run(["bash", str(REPO / "scripts/kafka_start.sh")], env=self.env, capture_output=True,
                              text=True, timeout=600)
        if proc.returncode != 0:
            pytest.fail(f"the Kafka broker did not start (scripts/kafka_start.sh exit {proc.returncode}):\n"
                        f"{proc.stderr[-3000:]}")

    def stop(self) -> None:
        subprocess.run(["bash", str(REPO / "scripts/kafka_stop.sh")], env=self.env, check=True, timeout=120)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory, free_port):
    broker = Broker(tmp_path_factory.mktemp("kafka"), free_port(), free_port())
    broker.start()
    yield broker
    broker.stop()


def _admin(kafka):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": kafka.bootstrap})


def _topic(kafka, name: str, partitions: int) -> str:
    from confluent_kafka.admin import NewTopic

    admin = _admin(kafka)  # kept while its futures run: a collected client cancels them
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(60)
    return name


def _value(row: dict, encoding: str) -> bytes:
    """A scored row as a message value: a JSON object, or a CSV line of SCHEMA's columns in order."""
    if encoding == "json":
        return json.dumps(row).encode()
    return ",".join(str(row[c]) for c in COLUMNS).encode()


def _produce(kafka, topic: str, messages: list[tuple[str | None, bytes | None]]) -> list[tuple[int, int]]:
    """Produce (key, value) messages in order; returns each one's (partition, offset)."""
    from confluent_kafka import Producer

    where: list[tuple[int, int] | None] = [None] * len(messages)

    def done(i):
        def report(err, msg):
            assert err is None, err
            where[i] = (msg.partition(), msg.offset())
        return report

    producer = Producer({"bootstrap.servers": kafka.bootstrap, "linger.ms": 20, "enable.idempotence": True})
    for i, (key, value) in enumerate(messages):
        producer.produce(topic, key=key, value=value, on_delivery=done(i))
        producer.poll(0)
    assert producer.flush(60) == 0
    assert all(w is not None for w in where)
    return where  # type: ignore[return-value]


def _rows(src: Path, n_examples_per_day: int = 300) -> pd.DataFrame:
    """Three days of scored rows, written as Parquet files in src (the batch jobs' input) and returned."""
    return write_stream_demo_files(str(src), n_examples_per_day=n_examples_per_day, n_runs=2, n_days=3,
                                   files_per_day=1)


def _messages(rows: pd.DataFrame, encoding: str = "json") -> list[tuple[str, bytes]]:
    """The rows as messages keyed by example id (as a scoring job keys them: one example's rows in one partition)."""
    out = []
    for r in rows.to_dict("records"):
        row = {c: r[c] for c in COLUMNS}
        row["event_time"] = r["event_time"].floor("us").to_pydatetime().isoformat(timespec="microseconds")
        out.append((str(r["example_id"]), _value(row, encoding)))
    return out


def _config(tmp_path: Path, kafka, topic: str, name: str = "stream.yaml", **stream) -> Path:
    data = {
        "task": "binary", "input": {"path": str(tmp_path / "src")}, "output": {"path": str(tmp_path / "out")},
        "split": {"bias_fraction": 0.1, "salt": "t"},
        "spark": {"shuffle_partitions": 2, "conf": {"spark.jars.ivy": str(CACHE / "ivy")}},
        "stream": {"source": "kafka", "kafka_bootstrap_servers": kafka.bootstrap, "kafka_topic": topic,
                   "schema": SCHEMA, "window": "1 day", "watermark": "1 hour", **stream},
    }
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _cfg(path: Path):
    return config_from_dict(yaml.safe_load(path.read_text()))


def _stream(path: Path, *args: str, expect: int | None = 0) -> subprocess.CompletedProcess[str]:
    return run_cli(["stream", "--config", str(path), "--trigger", "availableNow", *args], expect=expect)


def _counted(cfg, kind: str) -> pd.DataFrame:
    counts = read_stream_counts(None, cfg)
    return counts[counts["kind"] == kind] if not counts.empty else counts


def _exactly_once(cfg, rows: pd.DataFrame) -> None:
    """Every row in the summaries once: per window, the closed metrics' rows equal the produced rows."""
    metrics = read_stream_metrics(None, cfg)
    got = metrics[metrics["slice_name"] == ALL].groupby("ds")["n_rows"].sum().to_dict()
    assert got == rows.groupby("ds").size().to_dict()


def test_kafka_config_is_checked_and_the_package_added():
    cfg = config_from_dict({"stream": {"source": "kafka", "kafka_bootstrap_servers": "b:9092", "kafka_topic": "t"}})
    assert with_kafka_package(cfg).spark.conf["spark.jars.packages"] == KAFKA_PACKAGE
    mine = config_from_dict({"stream": {"source": "kafka", "kafka_bootstrap_servers": "b:9092", "kafka_topic": "t"},
                             "spark": {"conf": {"spark.jars.packages": "a:b:1,org.apache.spark:spark-sql-kafka-0-10_"
                                                                       "2.13:4.2.0"}}})
    assert with_kafka_package(mine) is mine
    assert with_kafka_package(config_from_dict({})).spark.conf == {}
    with pytest.raises(ConfigError, match="needs 'stream.schema'"):
        config_from_dict({"stream": {"source": "kafka", "kafka_bootstrap_servers": "b:9092", "kafka_topic": "t",
                                     "kafka_format": "csv"}})
    with pytest.raises(ConfigError, match="kafka_format"):
        config_from_dict({"stream": {"kafka_format": "avro"}})


def test_a_data_loss_failure_is_one_line_naming_the_partition_and_offset():
    spark_text = ("org.apache.spark.sql.kafka010.KafkaIllegalStateException: [KAFKA_DATA_LOSS.COULD_NOT_READ_OFFSET_"
                  "RANGE] ...\nCaused by: org.apache.kafka.clients.consumer.OffsetOutOfRangeException: Fetch position "
                  "FetchPosition{offset=360, offsetEpoch=Optional.empty} is out of range for partition scored-0\n")
    error = kafka_data_loss(spark_text)
    assert error is not None and "\n" not in str(error)
    assert "(offset 360 of scored-0 is no longer in Kafka)" in str(error) and "failOnDataLoss" in str(error)
    moved = kafka_data_loss("[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] Partition t-1's offset was changed from 90 to 3")
    assert moved is not None and "the offsets of t-1 went from 90 to 3" in str(moved)
    spark4 = kafka_data_loss("[KAFKA_DATA_LOSS.PARTITION_OFFSET_CHANGED] ... Partition t-0 offset was changed from 540 "
                             "to 10.\nThis could be either 1) a user error ... or 2) the kafka topic-partition is "
                             "deleted and re-created.")
    assert spark4 is not None and "(the offsets of t-0 went from 540 to 10)" in str(spark4)
    assert "deleted and created again" in str(spark4) and "\n" not in str(spark4)
    assert kafka_data_loss("java.lang.OutOfMemoryError") is None


def test_the_kafka_offsets_a_batch_reads_up_to_come_from_the_checkpoint(tmp_path):
    log = tmp_path / "offsets"
    log.mkdir()
    (log / "3").write_text('v1\n{"batchWatermarkMs":0,"conf":{}}\n{"t":{"1":90,"0":540},"u":{"0":7}}\n')
    assert kafka_checkpoint_offsets(str(tmp_path), 3) == {"t:0": 540, "t:1": 90, "u:0": 7}
    assert kafka_checkpoint_offsets(str(tmp_path), 4) is None
    (log / "5").write_text('v1\n{"batchWatermarkMs":0}\n-\n')
    assert kafka_checkpoint_offsets(str(tmp_path), 5) is None


def test_json_messages_stream_like_the_batch_jobs_and_malformed_ones_are_quarantined(spark, demo_config, tmp_path,
                                                                                      kafka):
    """Three partitions keyed by example id; two days, then a consumer restart and the third: every window equals
    the batch jobs to 1e-12, every row once, and each malformed message is listed by its offset, in no window."""
    topic = _topic(kafka, "scored-json", 3)
    rows = _rows(tmp_path / "src")
    first, last = rows[rows["ds"] < DAYS[2]], rows[rows["ds"] == DAYS[2]]
    good = json.loads(_messages(rows.head(1))[0][1])
    bad = [("bad", b"{not json"), ("bad", json.dumps({k: v for k, v in good.items() if k != "label"}).encode()),
           ("bad", None), ("bad", json.dumps({**good, "logit": "high"}).encode()),
           ("bad", json.dumps({**good, "model": "x" * 70_000}).encode()),
           ("bad", json.dumps({**good, "event_time": None}).encode())]
    where = _produce(kafka, topic, _messages(first) + bad)
    path = _config(tmp_path, kafka, topic, max_offsets_per_trigger=2000)
    out = _stream(path).stdout
    assert "malformed message scored-json-" in out
    cfg = _cfg(path)
    assert read_stream_state(cfg).rows == len(first)

    _produce(kafka, topic, _messages(last))  # the consumer starts again where it stopped
    _stream(path, "--close-at-end")
    assert read_stream_state(cfg).rows == len(rows)
    _exactly_once(cfg, rows)
    _assert_same_as_batch(read_stream_metrics(None, cfg), read_stream_rolling(None, cfg),
                          _batch_reference(spark, demo_config, tmp_path / "src", tmp_path / "batch", DAYS), DAYS)

    malformed = _counted(cfg, "malformed_record").sort_values("file")
    partition, _ = where[-1]
    expected = {f"{topic}-{p}@{o}" for p, o in where[-len(bad):]}
    assert set(malformed["file"]) == expected and (malformed["n_rows"] == 1).all()
    assert all(f.startswith(f"{topic}-{partition}@") for f in malformed["file"])
    reasons = dict(zip(malformed["file"], malformed["reason"]))
    by_offset = [reasons[f"{topic}-{p}@{o}"] for p, o in where[-len(bad):]]
    assert by_offset[0] == "not a JSON object"
    assert by_offset[1] == "missing or null field(s): label"
    assert by_offset[2] == "null value"
    assert by_offset[3] == "a field of the wrong type (logit) for stream.schema"
    assert by_offset[4].startswith("a value of ") and "kafka_max_value_bytes (65536)" in by_offset[4]
    assert by_offset[5] == "missing or null field(s): event_time"
    assert (malformed["window"] == "none").all()


def test_csv_lines_stream_like_the_batch_jobs(spark, demo_config, tmp_path, kafka):
    """The CSV-line encoding (columns in stream.schema's order): same windows as the batch jobs; a short line and
    a line with text for a number are quarantined."""
    topic = _topic(kafka, "scored-csv", 2)
    rows = _rows(tmp_path / "src", n_examples_per_day=120)
    where = _produce(kafka, topic, _messages(rows, "csv") + [("bad", b"baseline,0,17"),
                                                            ("bad", b"baseline,0,17,yes,0.5,2026-11-15T01:00:00")])
    path = _config(tmp_path, kafka, topic, kafka_format="csv")
    _stream(path, "--close-at-end")
    cfg = _cfg(path)
    _exactly_once(cfg, rows)
    _assert_same_as_batch(read_stream_metrics(None, cfg), read_stream_rolling(None, cfg),
                          _batch_reference(spark, demo_config, tmp_path / "src", tmp_path / "batch", DAYS), DAYS)
    malformed = _counted(cfg, "malformed_record")
    assert set(malformed["file"]) == {f"{topic}-{p}@{o}" for p, o in where[-2:]}
    assert set(malformed["reason"]) == {"a CSV line that does not fit stream.schema (fields or their types)"}


def _wait(pred, what: str, timeout: float = 300) -> None:
    t0 = time.time()
    while not pred():
        assert time.time() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.5)


def _popen_stream(path: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "ctcalc_spark.cli", "stream", "--config", str(path), "--trigger",
                             "2 seconds"], env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)


def test_kill_9_and_a_broker_restart_lose_and_double_nothing(spark, demo_config, tmp_path, kafka):
    """A continuous stream killed with kill -9 after some batches, started again; the broker stopped under it and
    started again, the last day produced after that: every window once, equal to the batch jobs to 1e-12."""
    topic = _topic(kafka, "scored-kill", 3)
    rows = _rows(tmp_path / "src")
    first, last = rows[rows["ds"] < DAYS[2]], rows[rows["ds"] == DAYS[2]]
    _produce(kafka, topic, _messages(first))
    path = _config(tmp_path, kafka, topic, max_offsets_per_trigger=500)
    cfg = _cfg(path)
    proc = _popen_stream(path, tmp_path / "run1.log")
    try:
        _wait(lambda: read_stream_state(cfg).batch_id >= 1 or proc.poll() is not None, "two committed batches")
        assert proc.poll() is None, (tmp_path / "run1.log").read_text()[-3000:]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
        killed_at = read_stream_state(cfg).batch_id
        proc = _popen_stream(path, tmp_path / "run2.log")
        _wait(lambda: read_stream_state(cfg).batch_id > killed_at + 1 or proc.poll() is not None, "a batch more")
        assert proc.poll() is None, (tmp_path / "run2.log").read_text()[-3000:]
        kafka.stop()
        time.sleep(8)  # the stream's triggers meet no broker
        assert proc.poll() is None, "the stream ended while the broker was down: " + \
            (tmp_path / "run2.log").read_text()[-3000:]
        kafka.start()
        _produce(kafka, topic, _messages(last))
        _wait(lambda: read_stream_state(cfg).rows == len(rows) or proc.poll() is not None, "every row")
        assert proc.poll() is None, (tmp_path / "run2.log").read_text()[-3000:]
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(120) == 0, (tmp_path / "run2.log").read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    _stream(path, "--close-at-end")
    assert read_stream_state(cfg).rows == len(rows)
    _exactly_once(cfg, rows)
    _assert_same_as_batch(read_stream_metrics(None, cfg), read_stream_rolling(None, cfg),
                          _batch_reference(spark, demo_config, tmp_path / "src", tmp_path / "batch", DAYS), DAYS)


def _no_java_stack(stderr: str) -> None:
    """Spark's own log of the failed batch and query (their Java stacks, py4j's traceback) is left out: the one
    line says it (-v shows them)."""
    assert "\tat org.apache" not in stderr and "Exception in" not in stderr and "Traceback" not in stderr, stderr


def test_messages_gone_before_they_were_read_stop_the_stream_or_are_listed_as_lost(tmp_path, kafka):
    """Offsets deleted before the stream read them (as retention deletes them): the stream stops with one line
    naming the partition and offsets; with failOnDataLoss: false it goes on and lists exactly the lost offsets."""
    from confluent_kafka import TopicPartition

    topic = _topic(kafka, "scored-loss", 1)
    rows = _rows(tmp_path / "src", n_examples_per_day=60)
    messages = _messages(rows)
    cut = len(messages) // 3
    _produce(kafka, topic, messages[:cut])
    path = _config(tmp_path, kafka, topic)
    _stream(path)
    _produce(kafka, topic, messages[cut:])
    gone = cut + 40  # offsets cut..gone-1 deleted before the stream reads them
    admin = _admin(kafka)
    for f in admin.delete_records([TopicPartition(topic, 0, gone)]).values():
        f.result(60)
    proc = _stream(path, expect=None)
    assert proc.returncode != 0
    line = [ln for ln in proc.stderr.splitlines() if "Kafka messages the stream has not read are gone" in ln]
    assert line and "failOnDataLoss: 'false'" in line[0], proc.stderr[-3000:]
    assert f"offset {cut} of {topic}-0 is no longer in Kafka" in line[0], line[0]
    assert len(line) == 1
    _no_java_stack(proc.stderr)

    allowed = _config(tmp_path, kafka, topic, name="allowed.yaml", kafka_options={"failOnDataLoss": "false"})
    _stream(allowed)
    cfg = _cfg(allowed)
    assert read_stream_state(cfg).rows == len(messages) - (gone - cut)
    lost = _counted(cfg, "lost_offsets")
    assert list(lost["file"]) == [f"{topic}-0@{cut}..{gone - 1}"] and list(lost["n_rows"]) == [gone - cut]


def test_a_topic_deleted_and_created_again_stops_the_stream_or_is_listed_as_lost(tmp_path, kafka):
    """The topic deleted after the stream read it and created again with fewer messages: Spark sees the partition's
    offsets go back (PARTITION_OFFSET_CHANGED); the stream stops, exit 4, with one line naming the partition and
    offsets and saying the topic was created again, no Java stack. With failOnDataLoss: false it goes on: Spark
    skips the new topic's offsets below its latest one when the offsets went back, and a lost_offsets row (and one
    warning) names them and the offset the stream had read to; the messages after them are read."""
    topic = _topic(kafka, "scored-again", 1)
    messages = _messages(_rows(tmp_path / "src", n_examples_per_day=30))
    _produce(kafka, topic, messages)
    path = _config(tmp_path, kafka, topic)
    _stream(path)
    admin = _admin(kafka)
    for f in admin.delete_topics([topic]).values():
        f.result(60)
    _wait(lambda: topic not in admin.list_topics(timeout=30).topics, "the topic deleted")
    _wait(lambda: _created_again(kafka, topic), "the topic created again", timeout=120)
    _produce(kafka, topic, messages[:10])
    proc = _stream(path, expect=4)
    line = [ln for ln in proc.stderr.splitlines() if "offsets went back" in ln]
    assert len(line) == 1, proc.stderr[-3000:]
    assert f"the offsets of {topic}-0 went from {len(messages)} to 10" in line[0], line[0]
    assert "deleted and created again" in line[0] and "failOnDataLoss: 'false'" in line[0]
    _no_java_stack(proc.stderr)

    _produce(kafka, topic, messages[10:20])
    allowed = _config(tmp_path, kafka, topic, name="allowed.yaml", kafka_options={"failOnDataLoss": "false"})
    proc = _stream(allowed)
    cfg = _cfg(allowed)
    assert read_stream_state(cfg).rows == len(messages) + 10
    lost = _counted(cfg, "lost_offsets")
    assert list(lost["file"]) == [f"{topic}-0@0..9"] and list(lost["n_rows"]) == [10], lost.to_dict("records")
    assert f"went back from {len(messages)} to 10" in lost["reason"].iloc[0], lost["reason"].iloc[0]
    assert len([ln for ln in proc.stderr.splitlines() if "Kafka messages lost" in ln]) == 1, proc.stderr[-3000:]


def _created_again(kafka, topic: str) -> bool:
    """Creates the topic; False while the broker still deletes the old one."""
    try:
        _topic(kafka, topic, 1)
    except Exception as e:  # confluent_kafka's KafkaException (TOPIC_ALREADY_EXISTS while the deletion runs)
        if "already exists" in str(e) or "marked for deletion" in str(e):
            return False
        raise
    return True
