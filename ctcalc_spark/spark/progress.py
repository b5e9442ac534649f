"""Progress lines for long steps: ``with long_step("evaluate scan", spark): ...`` logs a line every few seconds.

A step that ends within ``after`` seconds prints nothing; a longer one prints, every ``every`` seconds, on the
``ctcalc_spark.progress`` logger (stderr, INFO; hidden by ``-q``)::

    evaluate scan running, 20 s, 37 of 120 Spark tasks done (31 %)

The share of tasks comes from public APIs only, never from a JVM handle of the session, so the same code
runs on classic sessions and on Spark Connect:

* Spark Connect: the session's progress handler (``SparkSession.registerProgressHandler``, pyspark 4), which the
  server feeds with the stages of each running operation;
* a classic session with its UI on (``spark.ui.enabled``, on under spark-submit; the ``ctcalc`` CLI turns it off
  unless ``spark.conf`` turns it on): the UI's REST API, ``/api/v1/applications/<app id>/stages``, the stages
  submitted since the step began;
* otherwise the elapsed time alone.

Reporting runs in a daemon thread and swallows its own errors: it never fails or blocks the step, and the step
never waits for it (leaving the block stops it).
"""
from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

from ctcalc_spark.spark.session import is_connect

progress_log = logging.getLogger("ctcalc_spark.progress")

AFTER_S = 5.0
"""A step shorter than this prints no progress line."""
EVERY_S = 15.0
"""Seconds between progress lines."""
UI_PORT_TRIES = 17
"""Ports tried from ``spark.ui.port``: Spark binds the next free one, up to ``spark.port.maxRetries`` (16) more."""
UI_TIMEOUT_S = 120.0
"""How long a reply from the UI may take. Its first reply can take many seconds on a busy machine, and a reader that
gives up closes the connection in the middle of the reply, which Spark logs as an error with a Java stack trace;
the step never waits for the reader, so a long wait costs nothing."""
UI_POLL_S = 1.0
"""Seconds between reads of the UI's stages."""


class _Tasks:
    """Done and total tasks of the stages a step started, from whichever source the session offers: pushed by the
    Connect server to a progress handler, or read from the UI by a thread of its own (a UI on a busy machine can
    take seconds to answer; the progress lines do not wait for it)."""

    def __init__(self, spark: Any, t0_wall: float, stop: threading.Event, delay: float) -> None:
        self.spark = spark
        self.t0_wall = t0_wall
        self.stop_event = stop
        self.delay = delay  # the UI is not read for a step that ends before
        self.stages: dict[int, tuple[int, int]] = {}  # stage id -> (done, total)
        self.lock = threading.Lock()
        self.handler: Callable[..., None] | None = None

    def update(self, stage: int, done: int, total: int) -> None:
        with self.lock:
            self.stages[stage] = (done, total)

    def start(self) -> None:
        """Register the Connect handler, or start reading a classic session's UI."""
        if self.spark is None:
            return
        if is_connect(self.spark):
            def handler(stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
                for s in stages or ():
                    self.update(int(s.stage_id), int(s.num_completed_tasks), int(s.num_tasks))

            self.spark.registerProgressHandler(handler)
            self.handler = handler
        else:
            threading.Thread(target=self._read_ui, name="ctcalc-progress-ui", daemon=True).start()

    def stop(self) -> None:
        if self.handler is not None:
            with contextlib.suppress(Exception):
                self.spark.removeProgressHandler(self.handler)

    def share(self) -> tuple[int, int] | None:
        """(done, total) tasks of the step's stages so far, or None when the session has told nothing."""
        with self.lock:
            counts = list(self.stages.values())
        if not counts:
            return None
        return sum(d for d, _ in counts), sum(t for _, t in counts)

    def _read_ui(self) -> None:
        if self.stop_event.wait(self.delay):
            return
        with contextlib.suppress(Exception):  # UI off or gone, a reply not understood: elapsed time only
            url = _find_ui(self.spark)
            while url is not None and not self.stop_event.is_set():
                for s in _read_json(url):
                    submitted = _ui_time(s.get("submissionTime"))
                    if s.get("status") != "SKIPPED" and submitted is not None and submitted >= self.t0_wall - 1.0:
                        self.update(int(s["stageId"]), int(s.get("numCompleteTasks", 0)), int(s.get("numTasks", 0)))
                self.stop_event.wait(UI_POLL_S)


def _read_json(url: str) -> Any:
    """The UI's reply at ``url``, read to its end before the connection closes: a connection closed while Spark
    still writes the reply (a long stages list is written in parts) makes Spark log a Java stack trace
    ("Connection reset by peer") on the user's console."""
    with urllib.request.urlopen(url, timeout=UI_TIMEOUT_S) as r:  # noqa: S310 - the driver's own UI
        return json.loads(r.read())


def _find_ui(spark: Any) -> str | None:
    """This application's stages endpoint on the driver's UI, or None (UI off, or not on the driver's ports).
    Each port is asked for the application itself, a short reply, read to its end (:func:`_read_json`)."""
    conf = spark.conf
    if str(conf.get("spark.ui.enabled", "true")).lower() == "false":
        return None
    app = conf.get("spark.app.id", None)
    if not app:
        return None
    host = conf.get("spark.driver.host", "localhost")
    first = int(conf.get("spark.ui.port", None) or 4040)
    for port in range(first, first + UI_PORT_TRIES):
        url = f"http://{host}:{port}/api/v1/applications/{app}"
        try:
            if _read_json(url).get("id") == app:
                return f"{url}/stages"
        except Exception:  # refused (no UI there) or another application's UI (404)
            continue
    return None


def _ui_time(text: Any) -> float | None:
    """Seconds since the epoch of the UI's '2026-11-28T17:08:31.123GMT'."""
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%Z").replace(tzinfo=dt.timezone.utc).timestamp()
    except ValueError:
        return None


def progress_line(label: str, seconds: float, tasks: tuple[int, int] | None) -> str:
    """``'<label> running, 20 s, 37 of 120 Spark tasks done (31 %)'`` (the tasks part only when known)."""
    line = f"{label} running, {seconds:.0f} s"
    if tasks is not None and tasks[1] > 0:
        done, total = tasks
        line += f", {done:,} of {total:,} Spark tasks done ({100 * done / total:.0f} %)"
    return line


@contextlib.contextmanager
def long_step(label: str, spark: Any = None, *, after: float = AFTER_S, every: float = EVERY_S,
             log: Callable[[str], None] | None = None) -> Iterator[None]:
    """Log a progress line every ``every`` seconds once the block has run ``after`` seconds (none before).

    ``spark``: the session whose tasks the block runs (None: elapsed time only). ``log``: where lines go
    (default: the ``ctcalc_spark.progress`` logger at INFO).
    """
    emit = log or progress_log.info
    t0, t0_wall = time.perf_counter(), time.time()
    stop = threading.Event()
    tasks = _Tasks(spark, t0_wall, stop, delay=after / 2)
    with contextlib.suppress(Exception):  # an older server or client: elapsed time only
        tasks.start()

    def report() -> None:
        wait = after
        while not stop.wait(wait):
            with contextlib.suppress(Exception):
                emit(progress_line(label, time.perf_counter() - t0, tasks.share()))
            wait = every

    thread = threading.Thread(target=report, name=f"ctcalc-progress-{label}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        tasks.stop()
