"""Streaming benchmark (not a test): feed rows at a fixed rate, report sustained rows/s and latency.

``--source file`` (default): a thread lands one Parquet file every ``--file-every`` seconds (written aside, then
renamed into the source folder) with ``rate x file-every`` rows whose event times are
the wall clock, spread over the file's interval. ``--source kafka``: a thread produces the same rows as JSON
messages (keyed by example id) to a topic of ``--partitions`` partitions on a broker that scripts/kafka_start.sh
starts on 127.0.0.1 for the run (or ``--bootstrap``), every ``--file-every`` seconds; the stream reads it through
Spark's Kafka source. The query runs with a processing-time trigger. Reported:

* sustained rows/s: rows committed by the stream / feeding time, and whether it kept
  up (rows left unprocessed when feeding stopped, in seconds of feed);
* latency per window, from the moment it *can* close (window end + watermark delay,
  wall clock) to its metrics row being written (``finalized_at``): median, p95, max;
* micro-batch durations and their phases (read + file accounting, aggregate, table writes, window closing);
* how many Delta commits each of the stream's tables holds (one per batch that wrote to it).

* Kafka: the producer's CPU seconds (it shares the 2 cores with the broker and Spark).

Usage: .venv/bin/python bench/bench_stream.py --rate 100000 --duration 60 [--source kafka]
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq


def _commits(out: Path) -> dict[str, int]:
    """Commits per Delta table the stream wrote under ``out``."""
    from deltalake import DeltaTable

    tables = {p.name: p for p in out.iterdir() if p.name.startswith("stream_")}
    tables["stream_batches"] = out / "_stream" / "batches"
    return {name: DeltaTable(str(path)).version() + 1 for name, path in sorted(tables.items())
            if DeltaTable.is_deltatable(str(path))}


def _rows(n: int, t_lo: float, t_hi: float, first_id: int, rng: np.random.Generator) -> pa.Table:
    """n scored, labelled rows: 3 models x 2 runs over n/6 examples, event times in [t_lo, t_hi)."""
    n_ex = max(1, n // 6)
    ids = np.arange(first_id, first_id + n_ex, dtype=np.int64)
    t = np.sort(rng.uniform(t_lo, t_hi, n_ex))
    truth = rng.normal(-1.9, 1.0, n_ex)
    label = (rng.random(n_ex) < 1 / (1 + np.exp(-truth))).astype(np.int32)
    frames = []
    for m, off in (("baseline", 0.0), ("wide_deep", 0.05), ("dcn", -0.03)):
        for r in range(2):
            frames.append(pd.DataFrame({
                "model": m, "run": r, "example_id": ids, "label": label,
                "logit": truth + off + rng.normal(0, 0.3, n_ex),
                "event_time": pd.to_datetime(t, unit="s", utc=True),
            }))
    return pa.Table.from_pandas(pd.concat(frames, ignore_index=True), preserve_index=False)


def _json_messages(table: pa.Table) -> tuple[list[bytes], list[bytes]]:
    """(keys, values): each row as a JSON object, keyed by its example id."""
    cols = table.to_pydict()
    times = [t.isoformat(timespec="microseconds") for t in cols["event_time"]]
    values = [f'{{"model":"{m}","run":"{r}","example_id":{i},"label":{y},"logit":{z!r},"event_time":"{t}"}}'.encode()
              for m, r, i, y, z, t in zip(cols["model"], cols["run"], cols["example_id"], cols["label"], cols["logit"],
                                          times)]
    return [str(i).encode() for i in cols["example_id"]], values


class KafkaFeed:
    """A broker for the run (scripts/kafka_start.sh in a temporary folder, or ``bootstrap``), a topic, a producer."""

    def __init__(self, work: Path, bootstrap: str | None, partitions: int) -> None:
        import socket
        import subprocess

        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        self.env = None
        if bootstrap is None:
            ports = []
            for _ in range(2):
                with socket.socket() as sock:
                    sock.bind(("127.0.0.1", 0))
                    ports.append(sock.getsockname()[1])
            self.env = {**os.environ, "CTCALC_KAFKA_DIR": str(work / "kafka"), "CTCALC_KAFKA_PORT": str(ports[0]),
                        "CTCALC_KAFKA_CONTROLLER_PORT": str(ports[1])}
            subprocess.run(["bash", str(REPO / "scripts/kafka_start.sh")], env=self.env, check=True)
            bootstrap = f"127.0.0.1:{ports[0]}"
        self.bootstrap, self.topic = bootstrap, f"bench-{int(time.time())}"
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in self.admin.create_topics([NewTopic(self.topic, partitions, 1)]).values():
            f.result(60)
        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.size": 1_000_000,
                                  "compression.type": "lz4", "queue.buffering.max.messages": 2_000_000})
        self.cpu_s = 0.0

    def send(self, table: pa.Table) -> None:
        t = time.thread_time()
        keys, values = _json_messages(table)
        for k, v in zip(keys, values):
            try:
                self.producer.produce(self.topic, value=v, key=k)
            except BufferError:
                self.producer.poll(0.05)
                self.producer.produce(self.topic, value=v, key=k)
        self.producer.poll(0)
        self.cpu_s += time.thread_time() - t

    def close(self) -> None:
        import subprocess

        self.producer.flush(60)
        if self.env is not None:
            subprocess.run(["bash", str(REPO / "scripts/kafka_stop.sh")], env=self.env, check=False)


REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=int, default=100_000, help="rows per second fed")
    ap.add_argument("--file-every", type=float, default=1.0, help="seconds between files")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of feeding")
    ap.add_argument("--window", type=int, default=20, help="window length in seconds")
    ap.add_argument("--watermark", type=int, default=5, help="watermark delay in seconds")
    ap.add_argument("--trigger", type=int, default=5, help="processing-time trigger in seconds")
    ap.add_argument("--drain", type=float, default=30.0, help="seconds to let the stream catch up after feeding")
    ap.add_argument("--json", default=None, help="also write the figures to this JSON file")
    ap.add_argument("--source", choices=("file", "kafka"), default="file", help="landed Parquet files or Kafka")
    ap.add_argument("--bootstrap", default=None, help="Kafka: a running broker (default: start one for the run)")
    ap.add_argument("--partitions", type=int, default=2, help="Kafka: the topic's partitions")
    args = ap.parse_args()

    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.spark.session import build_session
    from ctcalc_spark.jobs.stream import read_stream_metrics, start_stream
    from ctcalc_spark.jobs.stream_source import KAFKA_PACKAGE

    work = Path(tempfile.mkdtemp(prefix="bench_stream_"))
    src, aside = work / "src", work / "aside"
    src.mkdir()
    aside.mkdir()
    rng = np.random.default_rng(0)
    # one file before the start so that the Parquet schema can be taken from it (100 rows, old event times)
    pq.write_table(_rows(96, time.time() - 3600, time.time() - 3590, 10**12, rng), str(src / "seed.parquet"),
                   coerce_timestamps="us", allow_truncated_timestamps=True)
    stream = {"path": str(src), "window": f"{args.window} seconds", "watermark": f"{args.watermark} seconds",
              "trigger": f"{args.trigger} seconds"}
    kafka = None
    conf: dict[str, str] = {}
    if args.source == "kafka":
        kafka = KafkaFeed(work, args.bootstrap, args.partitions)
        kafka.send(_rows(96, time.time() - 3600, time.time() - 3590, 10**12, rng))  # the warm-up rows
        kafka.producer.flush(60)
        cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ctcalc" / "ivy"
        conf = {"spark.jars.packages": KAFKA_PACKAGE, "spark.jars.ivy": str(cache)}
        stream = {**stream, "path": None, "source": "kafka", "kafka_bootstrap_servers": kafka.bootstrap,
                  "kafka_topic": kafka.topic,
                  "schema": "model STRING, run STRING, example_id BIGINT, label DOUBLE, logit DOUBLE, "
                            "event_time TIMESTAMP"}
    cfg = config_from_dict({
        "task": "binary", "input": {"path": str(src)}, "output": {"path": str(work / "out")}, "stream": stream,
        "spark": {"master": "local[2]", "shuffle_partitions": 2, "driver_memory": "4g", "conf": conf},
    })
    spark = build_session(cfg.spark, app_name="bench-stream")
    fed = {"rows": 96, "files": 1}
    stop = threading.Event()

    def feed() -> None:
        per_file = int(args.rate * args.file_every)
        next_t = time.time()
        t_lo = next_t
        first = 0
        while not stop.is_set():
            next_t += args.file_every
            time.sleep(max(0.0, next_t - time.time()))
            t_hi = time.time()
            if kafka is not None:
                kafka.send(_rows(per_file, t_lo, t_hi, first, rng))
                first += per_file // 6
                t_lo = t_hi
                fed["rows"] += (per_file // 6) * 6
                continue
            tmp = aside / f"f{fed['files']:06d}.parquet"
            pq.write_table(_rows(per_file, t_lo, t_hi, first, rng), str(tmp), coerce_timestamps="us",
                           allow_truncated_timestamps=True)
            os.rename(tmp, src / tmp.name)
            first += per_file // 6
            t_lo = t_hi
            fed["rows"] += (per_file // 6) * 6
            fed["files"] += 1

    load_at_start = os.getloadavg()[0]
    query, run = start_stream(spark, cfg)
    try:
        t_warm = time.time()  # warm-up: the seed file's batch (JVM and code paths warm) before the clock starts
        while run.load_state().batch_id < 0 and time.time() - t_warm < 300:
            time.sleep(0.5)
        feeder = threading.Thread(target=feed, daemon=True)
        t0 = time.time()
        feeder.start()
        time.sleep(args.duration)
        stop.set()
        feeder.join()
        if kafka is not None:
            kafka.producer.flush(60)
        t_feed_end = time.time()
        done_at_feed_end = run.load_state().rows
        fed_rows = fed["rows"]
        t_wait = time.time()
        while run.load_state().rows < fed_rows and time.time() - t_wait < args.drain:
            time.sleep(0.5)
        t_caught_up = time.time()
        caught_up = run.load_state().rows >= fed_rows
    finally:
        query.stop()
    metrics = read_stream_metrics(spark, cfg)
    state = run.load_state()
    lat = []
    for (ws, we), grp in metrics.groupby(["window_start", "window_end"]):
        close = dt.datetime.fromisoformat(we).replace(tzinfo=dt.timezone.utc).timestamp() + args.watermark
        if close < t0:
            continue  # the seed file's window
        first_written = min(dt.datetime.fromisoformat(f).timestamp() for f in grp["finalized_at"])
        lat.append(first_written - close)
    batches = [b for b in run.reports if b["rows"] > 0]
    secs = np.array([b["seconds"] for b in batches])
    feed_s = t_feed_end - t0
    figures = {
        "machine": f"{os.cpu_count()} cores, local[2]; load average at start {load_at_start:.1f}, at end "
                   f"{os.getloadavg()[0]:.1f}",
        "feed_rate_rows_per_s": args.rate, "feed_seconds": round(feed_s, 1), "rows_fed": fed_rows,
        "rows_committed_at_feed_end": done_at_feed_end,
        "backlog_at_feed_end_s": round((fed_rows - done_at_feed_end) / args.rate, 1),
        "caught_up": caught_up, "catch_up_s": round(t_caught_up - t_feed_end, 1),
        "sustained_rows_per_s": round(state.rows / (t_caught_up - t0)),  # fed rows / (feed + catch-up time)
        "batches": len(batches), "batch_rows_median": int(np.median([b["rows"] for b in batches])) if batches else 0,
        "batch_seconds_median": round(float(np.median(secs)), 2) if batches else None,
        "batch_seconds_max": round(float(secs.max()), 2) if batches else None,
        "batch_phase_seconds_median": {k: round(float(np.median([b["phase_seconds"].get(k, 0.0) for b in batches])), 2)
                                       for k in ("read", "aggregate", "write", "close")} if batches else None,
        "windows_closed": len(lat),
        "latency_s_median": round(float(np.median(lat)), 2) if lat else None,
        "latency_s_p95": round(float(np.percentile(lat, 95)), 2) if lat else None,
        "latency_s_max": round(float(np.max(lat)), 2) if lat else None,
        "delta_commits": _commits(work / "out"),
        "window_s": args.window, "watermark_s": args.watermark, "trigger_s": args.trigger, "source": args.source,
    }
    if kafka is not None:
        figures["kafka"] = {"partitions": args.partitions, "producer_cpu_s": round(kafka.cpu_s, 1)}
        kafka.close()
    print(json.dumps(figures, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
