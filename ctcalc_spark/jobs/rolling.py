"""The rolling job: previous-window calibration from stored daily summaries -> the rolling table.

For each day D of ``--ds`` (one day or a range) it takes the summaries of the window containing D (days
up to D) and of the window before it, sums them per window (no rescan of the evaluation rows), finalises
each (model, run, slice view) with :func:`ctcalc_spark.core.windows.rolling_metrics` and writes the
``(window_spec, ds=D)`` partitions of the rolling table in one commit: day, week, month and
rolling-N rows coexist, and a rerun replaces only its own spec's partitions. A range reads the summaries
once. After late data for an old day, :func:`affected_days` lists the partitions to recompute.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterable, Sequence

import pandas as pd

from ctcalc_spark.config import JobConfig
from ctcalc_spark.core.state import arrow_schema
from ctcalc_spark.core.finalize import SUMMARY_TYPES
from ctcalc_spark.core.findings import missing_summaries, render
from ctcalc_spark.core.windows import (
    ROLLING_TYPES,
    Window,
    WindowSpec,
    attach_exact,
    finalize_windows,
    merge_windows,
    parts_within,
    previous_window,
    read_in_parts,
    window_of,
    window_summaries,
)
from ctcalc_spark.errors import ConfigError, DegenerateBiasError, InputError
from ctcalc_spark.jobs.evaluate import parse_days
from ctcalc_spark.tables import OutputStore

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ROLLING_TABLE_TYPES = {**ROLLING_TYPES, "window_spec": "string", "ds": "string"}
"""Columns of the rolling table: the rows of :data:`ROLLING_TYPES` plus its partition columns."""


@dataclass
class RollingResult:
    """What one rolling run produced: ``table`` holds the rows of every day in ``days`` (column ``ds``)."""

    ds: str
    window: Window
    previous: Window
    table: pd.DataFrame
    path: str | None = None
    seconds: float = 0.0
    days_read: list[str] = field(default_factory=list)
    days: list[str] = field(default_factory=list)
    spec: str = "day"
    run_id: str | None = None


def affected_days(changed: str, spec: WindowSpec, days: Iterable[str]) -> list[str]:
    """Rolling partitions (among ``days``) whose numbers depend on day ``changed``: its window as of
    each later day, and the next window (whose bias comes from it)."""
    out = []
    for d in sorted(days):
        w = window_of(d, spec)
        if d >= changed and (w.start <= changed or previous_window(w, spec).contains(changed)):
            out.append(d)
    return out


def previous_window_bias(cfg: JobConfig, ds: str, *, store: OutputStore | None = None) -> pd.DataFrame:
    """(model, run, c): c* fitted on all of the window before the one containing ``ds``, from the summaries of
    ``store`` (``OutputStore(cfg)`` when not given; catalog outputs pass theirs, which holds the Spark session).

    Known before ``ds`` is scanned for day/week/month windows, so the evaluate scan can accumulate the
    exact calibrated sum in the same pass (``evaluate(known_bias=...)``). Groups whose previous window is
    missing or degenerate are left out.
    """
    spec = WindowSpec.from_config(cfg.rolling)
    if spec.kind == "rolling":
        raise ConfigError("In-scan exact sums need day/week/month windows: a rolling window's previous window "
                          "moves every day, so its days are not scanned with one known bias.")
    prev = previous_window(window_of(ds, spec), spec)
    rows = (store or OutputStore(cfg)).read("summaries", days=prev.days(), task=cfg.task)
    if rows.empty:
        return pd.DataFrame(columns=["model", "run", "c"])
    groups = window_summaries(rows, cfg.task, prev, by=[cfg.columns.model, cfg.columns.run],
                              bin_width=cfg.histogram.bin_width)
    out = []
    for (m, r), s in groups.items():
        try:
            out.append({"model": str(m), "run": str(r), "c": float(s.solve_bias())})
        except DegenerateBiasError as e:  # no finite bias, no exact sum
            log.info("no known bias for model=%s run=%s: %s", m, r, e)
    return pd.DataFrame(out, columns=["model", "run", "c"])


def check_rolling_task(cfg: JobConfig) -> None:
    """ConfigError for the multiclass task (before Spark starts, from the CLI): rolling has nothing to fit it on."""
    if cfg.task not in ("binary", "regression"):
        raise ConfigError(
            f"Previous-window (rolling) calibration fits each window's bias from the stored daily summaries, which "
            f"binary and regression have; task {cfg.task!r} fits a temperature, which needs its val-bias rows and "
            "has no summary to merge over days, so previous-window calibration is not available for it. `ctcalc "
            "evaluate` writes each day's calibrated multiclass metrics, and `ctcalc compare --ds DAY` compares "
            "pipelines on them a day at a time.")


def compute_rolling(cfg: JobConfig, ds: str | Sequence[str], *, store: OutputStore | None = None,
                    allow_missing_days: bool = False) -> RollingResult:
    """The rolling rows of the window containing each day of ``ds`` (days up to that day), from the summaries of
    ``store`` (``OutputStore(cfg)`` when not given), without writing."""
    t0 = time.perf_counter()
    days = parse_days(ds)
    check_rolling_task(cfg)
    spec = WindowSpec.from_config(cfg.rolling)
    store = store or OutputStore(cfg)
    with store.holding("summaries"):  # one version of the summaries, opened once for every read of a part
        return _compute_rolling(cfg, days, spec, store, allow_missing_days, t0)


def _compute_rolling(cfg: JobConfig, days: list[str], spec: WindowSpec, store: OutputStore, allow_missing_days: bool,
                     t0: float) -> RollingResult:
    available = store.days("summaries")
    if found := missing_summaries(days, available, where=store.location("summaries"), allow_missing=allow_missing_days):
        raise InputError(render(found))
    days = sorted(set(days).intersection(available))
    # One merge and one finalisation for every day: the window containing day d, as of d, is a window of its
    # own (label '<window>@<d>'), paired with its (complete) previous window; labels are mapped back after. As
    # of its last day it is the whole window, under the window's own label: the same window as the previous
    # window of the days after it, merged and solved once in a part that holds both.
    pairs, as_of = [], {}
    for d in days:
        w = window_of(d, spec)
        a = w if d == w.end else Window(w.start, d, f"{w.label}@{d}")
        pairs.append((a, previous_window(w, spec)))
        as_of[a.label] = (w, d)
    have = set(available)
    needed = sorted({x for a, pw in pairs for x in a.days() + pw.days()} & have)
    store.require_one_run(needed)
    c = cfg.columns
    first = {a.label for a, pw in pairs if pw.end < available[0]}
    n_days = {a.label: (a.n_days, pw.n_days) for a, pw in pairs}
    # a part of the days at a time, each read once: the windows as of each day overlap (a week's rows are summed
    # into up to seven of them), so merging every window at once would hold several times the summaries
    chunks = parts_within(pairs, lambda pair: pair[0].end)  # the as-of day of each pair
    part_days = [sorted({x for pair in chunk for w in pair for x in w.days()} & have) for chunk in chunks]
    # the summaries' columns but the split, which merge_windows merges
    columns = ["ds", c.model, c.run, *c.slices, *(n for n in SUMMARY_TYPES[cfg.task] if n != "split")]
    parts = []
    for chunk, rows in zip(chunks, read_in_parts(
            lambda d: store.read("summaries", days=d, task=cfg.task, columns=columns, categories=True), part_days)):
        merged = merge_windows(rows, cfg.task, sorted({x for pair in chunk for x in pair}))
        parts.append(finalize_windows(merged, cfg.task, chunk, spec, model=c.model, run=c.run, slices=c.slices,
                                      bin_width=cfg.histogram.bin_width, first=first, days=n_days))
    table = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    exact_rows = store.read("calibrated_exact", days=sorted({x for a, _ in pairs for x in a.days()}),
                            where={"window_spec": [spec.label]})
    if not exact_rows.empty:
        table = attach_exact(table, exact_rows)
    table["ds"] = [as_of[label][1] for label in table["window"]]
    table["window_end"] = [as_of[label][0].end for label in table["window"]]
    table["window"] = [as_of[label][0].label for label in table["window"]]
    table = table.sort_values(["ds", "model", "run", "slice_name", "slice_value"], kind="stable")
    table = table.reset_index(drop=True)[[*ROLLING_TYPES, "ds"]]
    last = days[-1]
    w_last = window_of(last, spec)
    return RollingResult(last, w_last, previous_window(w_last, spec), table, seconds=time.perf_counter() - t0,
                         days_read=needed, days=days, spec=spec.label)


def run_rolling(spark: SparkSession | None, cfg: JobConfig, ds: str | Sequence[str], *, write: bool = True,
                allow_missing_days: bool = False, store: OutputStore | None = None) -> RollingResult:
    """Compute the rolling rows for each day of ``ds`` and replace their ``(window_spec, ds)`` partitions.

    ``spark``: needed for catalog tables only (path outputs are Delta tables read and written here). ``store``:
    the command's output store, when it has one (else ``OutputStore(cfg, spark)``)."""
    store = store or OutputStore(cfg, spark)
    tx = None
    if write:
        spec = WindowSpec.from_config(cfg.rolling).label
        store.check_before_work("rolling", parse_days(ds), scope=f"window_spec={spec}", task=cfg.task)
        tx = store.transaction("rolling", scope=f"window_spec={spec}")
        tx.pin("rolling")
    result = compute_rolling(cfg, ds, store=store, allow_missing_days=allow_missing_days)
    if tx is not None:
        rows = result.table.assign(window_spec=result.spec)
        result.path = tx.write("rolling", rows, arrow_schema(ROLLING_TABLE_TYPES))
        result.run_id = tx.run_id
    return result
