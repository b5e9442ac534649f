"""The failure notifier of the ctcalc DAGs: one log line per failure, then an optional configured function.

Used as ``on_failure_callback`` of every task (runs in the task's process once the task has failed with
no retry left) and of the DAG (runs in the dag-processor, e.g. when ``dagrun_timeout`` ends
a run). The function comes from ``CTCALC_ON_FAILURE`` (``package.module:function``), read at parse time
from the environment only, never from params or Variables (see docs/airflow.md, trust model); it is
called with keyword arguments ``dag_id, run_id, task_id, logical_date, try_number, reason, log_url``
and must accept ``**kwargs`` for fields added later. A failing function is logged, never raised: the
notifier must not hide the failure it reports.
"""
from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseNotifier

from ctcalc_spark.orchestration.tasks import load_callable
from ctcalc_spark.redact import redact_url

log = logging.getLogger(__name__)


def _masked(text: str) -> str:
    """``text`` with the values registered with Airflow's masker (the run's secrets) and URL credentials hidden:
    a failed spark-submit's message quotes its command line, and the notifier's function may post it anywhere."""
    try:
        from airflow.sdk.log import redact as airflow_masked
    except ImportError:  # a Task SDK without it: URL credentials only
        return redact_url(text)
    return redact_url(str(airflow_masked(text)))


def failure_info(context: Any) -> dict[str, Any]:
    """What failed, from an Airflow callback context (task-level or DAG-level)."""
    ti = context.get("ti") or context.get("task_instance")
    run = context.get("dag_run")
    dag = context.get("dag")
    exc = context.get("exception") or context.get("reason")
    logical = getattr(run, "logical_date", None) or context.get("logical_date")
    return {
        "dag_id": getattr(dag, "dag_id", None) or getattr(run, "dag_id", None) or getattr(ti, "dag_id", None),
        "run_id": getattr(run, "run_id", None) or getattr(ti, "run_id", None),
        "task_id": getattr(ti, "task_id", None),
        "logical_date": logical.isoformat() if hasattr(logical, "isoformat") else logical,
        "try_number": getattr(ti, "try_number", None),
        "reason": _masked(f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(exc or "")),
        "log_url": getattr(ti, "log_url", None),
    }


class FailureNotifier(BaseNotifier):
    """Log the failure; then call ``target`` (``package.module:function``) with :func:`failure_info`'s fields."""

    def __init__(self, target: str | None = None) -> None:
        super().__init__()
        self.target = target

    def notify(self, context: Any) -> None:
        info = failure_info(context)
        log.error("ctcalc failure: %s", " ".join(f"{k}={v}" for k, v in info.items() if v is not None))
        if not self.target:
            return
        try:
            load_callable(self.target)(**info)
        except Exception:  # the notifier reports a failure; it must not replace it with its own
            log.exception("The failure notifier's function %s raised; the failure above still stands.", self.target)
