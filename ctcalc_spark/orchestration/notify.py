"""The failure notifier of the ctcalc DAGs: one log line per failure, then an optional configured function, called
once per failure.

``FailureNotifier(target)`` is the ``on_failure_callback`` of every task: it runs in the task's process once the
task has failed with no retry left, and calls the function with ``kind="task"``.
``FailureNotifier(target, run_level=True)`` is the DAG's: it runs in the dag-processor when a run fails. A run that
failed because a task failed was notified by that task already, so it only logs; a run that failed with no task
failure (``dagrun_timeout`` ended it, or no task could run any more) calls the function once with
``kind="dag_run"``, ``task_id`` naming the task that was still unfinished. Every failure reaches the function
exactly once.

The function comes from ``CTCALC_ON_FAILURE`` (``package.module:function``), read at parse time from the environment
only, never from params or Variables (see docs/airflow.md, trust model); it is called with keyword arguments
``kind, dag_id, run_id, task_id, logical_date, try_number, reason, log_url`` and must accept ``**kwargs`` for
fields added later. A failing function is logged, never raised: the notifier must not hide the failure it reports.
"""
from __future__ import annotations

import json
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


# Airflow's reason for a failed run (the DAG callback's context["reason"]) when a task failure caused it.
RUN_FAILED_BY_TASK = "task_failure"


def run_failure_reason(reason: str, task_id: str | None, timeout: Any = None) -> str:
    """What a run-level failure that no task reported means, naming the unfinished task."""
    task = f"task {task_id}" if task_id else "a task"
    if reason == "timed_out":
        limit = f" ({timeout})" if timeout else ""
        return f"the run exceeded its dagrun_timeout{limit} while {task} was unfinished (CTCALC_DAGRUN_TIMEOUT_S)"
    if reason == "all_tasks_deadlocked":
        return f"no task of the run could start any more ({task} among those left): check the run's task states"
    return f"the run failed ({reason or 'no reason given'}) at {task}"


def describe_wait(spec: Any) -> str:
    """What a sensor waited for, from the ``settings`` XCom it was given: the marker file(s), the metastore
    partition, or the previous window's days in the summaries table."""
    if not isinstance(spec, dict):
        return "its input (the settings task's values were not available)"
    if spec.get("marker"):
        return str(spec["marker"])
    if spec.get("markers"):
        return ", ".join(f"{model}: {path}" for model, path in spec["markers"].items())
    if spec.get("mode") == "partition":
        return f"the partition {spec.get('column')}={spec.get('ds')} of {spec.get('table')}"
    if spec.get("summaries"):
        return f"the summaries of {', '.join(spec.get('days') or [])} in {spec['summaries']}"
    return json.dumps(spec, default=str)


class FailureNotifier(BaseNotifier):
    """Log the failure; then call ``target`` (``package.module:function``) with :func:`failure_info`'s fields and
    ``kind``, once per failure (see the module's docstring): ``run_level`` for the DAG's callback. ``waits_for``
    (a sensor's): the key of the ``settings`` XCom that says what it waited for, named in a timeout's reason."""

    def __init__(self, target: str | None = None, *, run_level: bool = False, waits_for: str | None = None) -> None:
        super().__init__()
        self.target = target
        self.run_level = run_level
        self.waits_for = waits_for

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Nothing to render: no field is templated. (BaseNotifier's own asks the DAG for a template environment,
        which the serialized DAG of ``dag.test()`` lacks: the run's callback then failed there.)"""

    def notify(self, context: Any) -> None:
        info = {"kind": "dag_run" if self.run_level else "task", **failure_info(context)}
        if self.run_level:
            reason = str(context.get("reason") or "")
            if reason == RUN_FAILED_BY_TASK:
                log.error("ctcalc run failed: dag_id=%s run_id=%s; task %s failed and was notified by its own "
                          "callback", info["dag_id"], info["run_id"], info["task_id"])
                return
            dag = context.get("dag")
            info["reason"] = run_failure_reason(reason, info["task_id"], getattr(dag, "dagrun_timeout", None))
        elif self.waits_for and "Timeout" in type(context.get("exception")).__name__:
            ti = context.get("ti") or context.get("task_instance")
            try:
                spec = ti.xcom_pull(task_ids="settings", key=self.waits_for)
            except Exception:  # the alert goes out all the same
                spec = None
            info["reason"] = _masked(f"{info['reason']}; it waited for {describe_wait(spec)}")
        log.error("ctcalc failure: %s", " ".join(f"{k}={v}" for k, v in info.items() if v is not None))
        if not self.target:
            return
        try:
            load_callable(self.target)(**info)
        except Exception:  # the notifier reports a failure; it must not replace it with its own
            log.exception("The failure notifier's function %s raised; the failure above still stands.", self.target)


def before_start_warning(run_id: str | None, logical_date: Any, start_date: Any) -> str | None:
    """The warning for a run dated before the DAG's start date (None otherwise): Airflow creates no task instance
    for it, so the run shows success having evaluated nothing."""
    if logical_date is None or start_date is None or logical_date >= start_date:
        return None
    return (f"run {run_id} is dated {logical_date:%Y-%m-%d}, before the DAG's start date {start_date:%Y-%m-%d} "
            "(CTCALC_START_DATE): Airflow ran no task of it, so nothing was evaluated although the run shows success. "
            "Trigger the day with a logical date on or after the start date, or move CTCALC_START_DATE back.")


class BeforeStartNotifier(BaseNotifier):
    """The daily DAG's ``on_success_callback`` (it runs in the dag-processor): a run dated before ``start_date``
    logs :func:`before_start_warning` and calls ``target`` with ``kind="run_before_start_date"``."""

    def __init__(self, target: str | None, start_date: Any) -> None:
        super().__init__()
        self.target = target
        self.start_date = start_date

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Nothing to render (see FailureNotifier)."""

    def notify(self, context: Any) -> None:
        run = context.get("dag_run")
        warning = before_start_warning(getattr(run, "run_id", None), getattr(run, "logical_date", None),
                                       self.start_date)
        if warning is None:
            return
        log.warning("ctcalc: %s", warning)
        if self.target:
            info = {**failure_info(context), "kind": "run_before_start_date", "task_id": None, "reason": warning}
            try:
                load_callable(self.target)(**info)
            except Exception:
                log.exception("The notifier's function %s raised.", self.target)
