"""Ctrl-C and SIGTERM during a job: stop Spark's work, then the process, with one line and no stack traces.

pyspark's own SIGINT handler cancels the jobs over the py4j connection the main thread is blocked on (py4j then
logs a "reentrant call" traceback) and raises ``KeyboardInterrupt`` in the middle of reading a result (the JVM
then logs a broken pipe with its stack, and the cancelled job's error replaces the interrupt, so the CLI said
"a Spark or file-system failure", exit 1). SIGTERM, which schedulers send to stop a task, ended the process at
once, with no message.

:func:`install` puts one handler on both signals, in the CLI's main thread: for every command as it starts (a
signal then raises ``KeyboardInterrupt`` at once), and again by ``session_for`` once the session exists:

* The first signal is recorded (:func:`received`), and a helper thread calls ``spark.interruptAll()`` (classic
  and Connect) over a connection of its own, again every half second, so that a Spark action started after it
  (the next write) ends too. If the main thread is inside a Spark call, that call then ends with Spark's
  cancellation error; otherwise ``KeyboardInterrupt`` is raised at once.
* The job's ``finally`` blocks run as for any failure. A table's commit is whole or not made (Delta).
* A first signal during a run's commits (:func:`deferred`) lets them all finish (milliseconds), then stops the run
  as above: a day's tables never come from two runs because of a signal.
* A second signal raises ``KeyboardInterrupt`` at once.

``ctcalc stream`` asks :func:`received` between waits and stops its query itself (a clean stop, not an error).
The CLI reports any exception after a signal as the interruption (exit 130 for SIGINT, 143 for SIGTERM), and
:func:`uninstall` puts the previous handlers back when the command returns.
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

log = logging.getLogger(__name__)

INTERRUPT_EVERY_S = 0.5
INTERRUPT_FOR_S = 60.0
_SPARK_MODULES = ("py4j", "pyspark", "grpc")


@dataclass
class _State:
    signum: int | None = None  # the first signal since install()
    spark: Any = None
    stop_spark: bool = True  # False: only record the signal
    deferring: int = 0  # depth of deferred() blocks
    previous: dict[int, Any] = field(default_factory=dict)  # the handlers install() replaced (empty: not installed)
    interrupter: threading.Thread | None = None
    stop: threading.Event = field(default_factory=threading.Event)  # set: the interrupter ends


_STATE = _State()
_COUNT = threading.Lock()


def received() -> int | None:
    """The first SIGINT or SIGTERM this process received since :func:`install` (None if none, or uninstalled)."""
    return _STATE.signum


def signal_name(signum: int) -> str:
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def install(spark: Any, *, stop_spark: bool = True) -> bool:
    """Handle SIGINT and SIGTERM as described above; False (nothing done) outside the main thread.

    ``spark=None`` (a command before or without a session): a signal raises ``KeyboardInterrupt`` at once.
    ``stop_spark=False``: only record the signal (the caller stops its work itself, as the stream job does).
    """
    if threading.current_thread() is not threading.main_thread():
        return False
    uninstall()
    _STATE.spark, _STATE.stop_spark, _STATE.signum = spark, stop_spark, None
    _STATE.interrupter, _STATE.stop = None, threading.Event()
    _STATE.previous = {signum: signal.signal(signum, _handle) for signum in (signal.SIGINT, signal.SIGTERM)}
    return True


def uninstall() -> None:
    """The handlers from before :func:`install` again; the thread interrupting Spark's work (if any) ends."""
    for signum, handler in _STATE.previous.items():
        signal.signal(signum, handler)
    _STATE.previous = {}
    _STATE.stop.set()
    if _STATE.interrupter is not None:
        _STATE.interrupter.join(timeout=5.0)  # it waits on the event: returns at once, or after its one call
    _STATE.spark, _STATE.interrupter, _STATE.signum = None, None, None


@contextmanager
def deferred() -> Iterator[None]:
    """A first signal inside the block lets it run to its end, then acts there; after one, the block does not start.
    A block in another thread (a stream batch's commits) defers the signal as well: the main thread goes on
    until its own deferred block or the write ends, whichever is later, and stops there.

    For a run's commits: they take milliseconds, and stopping between two would leave a day whose summaries and
    metrics come from different runs.
    """
    if _stopping() and not _STATE.deferring:
        _stop(None)
    with _COUNT:  # a block in another thread defers too
        _STATE.deferring += 1
    try:
        yield
    finally:
        with _COUNT:
            _STATE.deferring -= 1
    if _stopping() and not _STATE.deferring:
        _stop(None)


def _stopping() -> bool:
    return _STATE.signum is not None and _STATE.stop_spark and bool(_STATE.previous)


def _handle(signum: int, frame: FrameType | None) -> None:
    if _STATE.signum is not None:
        raise KeyboardInterrupt  # the second signal: at once
    _STATE.signum = signum
    if _STATE.stop_spark and not _STATE.deferring:
        _stop(frame)


def _stop(frame: FrameType | None) -> None:
    if _STATE.spark is None:  # no session yet (or none at all): nothing to cancel, so nothing to wait for
        raise KeyboardInterrupt
    if _STATE.interrupter is None:
        _STATE.interrupter = threading.Thread(target=_interrupt_spark, args=(_STATE.spark, _STATE.stop),
                                              name="ctcalc-interrupt", daemon=True)
        _STATE.interrupter.start()
    if not in_spark_call(frame):
        raise KeyboardInterrupt


def in_spark_call(frame: FrameType | None) -> bool:
    """Whether the main thread is inside pyspark, py4j or gRPC (waiting for Spark, or reading its result)."""
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).split(".")[0] in _SPARK_MODULES:
            return True
        frame = frame.f_back
    return False


def _interrupt_spark(spark: Any, stop: threading.Event) -> None:
    deadline = time.monotonic() + INTERRUPT_FOR_S
    while time.monotonic() < deadline and not stop.is_set():
        try:
            if not _STATE.deferring:  # a deferred block runs to its end, then raises
                spark.interruptAll()
        except Exception as e:  # noqa: BLE001 - the session is stopping or gone: nothing left to interrupt
            log.debug("interruptAll: %s", e)
            return
        stop.wait(INTERRUPT_EVERY_S)
