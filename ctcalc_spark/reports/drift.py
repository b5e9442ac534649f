"""Drift report: one self-contained HTML file (plots as base64 PNG) plus the same numbers as CSV and JSON.

Numbers come from the stored daily summaries, summed per window and finalised
by :func:`ctcalc_spark.core.windows.rolling_metrics` (the rolling job's math), so a
report never rescans evaluation rows and needs no Spark for a local output folder.
"""
from __future__ import annotations

import base64
import datetime as dt
import html
import io
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from ctcalc_spark.config import JobConfig, config_to_dict
from ctcalc_spark.errors import InputError
from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.spark.storage import OutputStore
from ctcalc_spark.core.summary import BinarySummary, RegressionSummary
from ctcalc_spark.core.windows import (
    METRIC_NAME,
    WindowSpec,
    attach_exact,
    previous_window,
    rolling_metrics,
    window_summaries,
    windows_between,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SECTIONS = ("metric", "bias", "calibration", "reliability", "gap")
"""Plot sections per model, in page order (each an embedded PNG)."""
SECTION_TITLES = {
    "metric": "Vanilla and calibrated {metric} over time",
    "bias": "Fitted bias c* per window",
    "calibration": "Calibration over time",
    "reliability": "Reliability diagram, latest window",
    "gap": "Gap vanilla − calibrated",
}


@dataclass
class DriftReport:
    """The report's data and where its files went."""

    start: str
    end: str
    spec: WindowSpec
    threshold: float
    table: pd.DataFrame
    flags: pd.DataFrame
    paths: dict[str, str] = field(default_factory=dict)


# ---- data ------------------------------------------------------------------------------------------

def build_report_data(
    cfg: JobConfig, start: str, end: str, *, spec: WindowSpec | None = None, threshold: float | None = None,
    spark: SparkSession | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, dict[tuple[str, str], Any], WindowSpec, float]:
    """(rolling table of every window touching [start, end], flagged windows, latest-window summaries, spec, threshold)."""
    spec = spec or WindowSpec.from_config(cfg.rolling)
    threshold = cfg.rolling.bias_threshold if threshold is None else float(threshold)
    windows = windows_between(start, end, spec)
    store = OutputStore(cfg, spark)
    root = store.location("summaries")
    available = store.days("summaries")
    days = sorted({d for w in windows for d in w.days(until=end)}
                  | {d for w in windows for d in previous_window(w, spec).days()})
    rows = store.read("summaries", days=[d for d in days if d in set(available)])
    if rows.empty or not rows["ds"].astype(str).between(start, end).any():
        raise InputError(f"No summaries between {start} and {end} under {root!r} "
                         f"(available: {available[0] + '..' + available[-1] if available else 'none'}).")
    c = cfg.columns
    table = rolling_metrics(rows, cfg.task, windows, spec, model=c.model, run=c.run, slices=c.slices,
                            bin_width=cfg.histogram.bin_width, first_ds=available[0], until=end)
    table = attach_exact(table, store.read("calibrated_exact", days=days, where={"window_spec": [spec.label]}))
    present = table[table["n_rows"] > 0]
    whole = present[present["slice_name"] == ALL]
    moved = pd.to_numeric(whole["bias_change"], errors="coerce").abs() > threshold  # all-None on first windows
    flags = whole[moved.fillna(False)][["window", "model", "run", "prev_bias", "bias", "bias_change", "status"]]
    latest = windows[-1]
    latest_rows = rows[rows["ds"].astype(str).between(latest.start, min(latest.end, end))]
    latest_summ = dict(window_summaries(latest_rows, cfg.task, latest, by=[c.model, c.run],
                                        bin_width=cfg.histogram.bin_width))
    return table, flags.reset_index(drop=True), latest_summ, spec, threshold


def spread_table(table: pd.DataFrame) -> pd.DataFrame:
    """Per model: median over windows of the across-run std of the vanilla and calibrated metric."""
    whole = table[(table["slice_name"] == ALL) & (table["status"] == "ok")]
    out = []
    for model, grp in whole.groupby("model", sort=True):
        per_w = grp.groupby("window").agg(
            runs=("run", "nunique"), sv=("vanilla", "std"), sc=("calibrated", "std"),
            gap=("calibration_gain", "mean"),
        )
        per_w = per_w[per_w["runs"] > 1]
        sv, sc = float(per_w["sv"].median()) if len(per_w) else math.nan, float(per_w["sc"].median()) if len(per_w) else math.nan
        out.append({"model": model, "windows": int(grp["window"].nunique()), "runs": int(grp["run"].nunique()),
                    "median_std_vanilla": sv, "median_std_calibrated": sc,
                    "std_reduction_pct": 100.0 * (1 - sc / sv) if sv and sv > 0 else math.nan,
                    "mean_gap": float(grp["calibration_gain"].mean())})
    return pd.DataFrame(out)


# ---- plots -----------------------------------------------------------------------------------------

def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _x(frame: pd.DataFrame) -> list[dt.date]:
    return [dt.date.fromisoformat(s) for s in frame["window_end"]]


def _band(ax: Any, grp: pd.DataFrame, col: str, label: str, color: str) -> None:
    """Mean across runs per window, with the min..max across runs shaded where there are several runs."""
    g = grp.dropna(subset=[col]).groupby("window_end")[col].agg(["mean", "min", "max", "count"]).reset_index()
    if g.empty:
        return
    x = [dt.date.fromisoformat(s) for s in g["window_end"]]
    ax.plot(x, g["mean"], marker="o", ms=3, color=color, label=f"{label} (mean of runs)")
    if (g["count"] > 1).any():
        ax.fill_between(x, g["min"], g["max"], color=color, alpha=0.2, label=f"{label} (min..max across runs)")


def _per_run(ax: Any, grp: pd.DataFrame, col: str) -> None:
    for run, r in grp.groupby("run", sort=True):
        r = r.dropna(subset=[col])
        if not r.empty:
            ax.plot(_x(r), r[col], marker=".", lw=1, label=f"run {run}")


def _finish_ax(ax: Any, title: str, ylabel: str) -> None:
    ax.set_title(title, fontsize=10)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.tick_params(axis="x", labelrotation=30, labelsize=8)
    handles, _ = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize=7, ncol=2 if len(handles) > 6 else 1)


def model_plots(model: str, grp: pd.DataFrame, latest: dict[tuple[str, str], Any], task: str,
                latest_label: str) -> dict[str, str]:
    """The five base64 PNGs of one model (keys: :data:`SECTIONS`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = METRIC_NAME[task]
    out: dict[str, str] = {}
    size = (7.0, 3.3)

    fig, ax = plt.subplots(figsize=size)
    _band(ax, grp, "vanilla", f"vanilla {metric}", "tab:blue")
    _band(ax, grp, "calibrated", f"calibrated {metric}", "tab:orange")
    _finish_ax(ax, f"{model}: vanilla vs rolling-calibrated {metric}", metric)
    out["metric"] = _png(fig)

    fig, ax = plt.subplots(figsize=size)
    _per_run(ax, grp, "bias")
    _finish_ax(ax, f"{model}: c* fitted on all of each window", "logit shift c*" if task == "binary" else "mean shift c*")
    out["bias"] = _png(fig)

    fig, ax = plt.subplots(figsize=size)
    if task == "binary":
        _per_run(ax, grp, "calibration")
        ax.axhline(1.0, color="grey", lw=1, ls="--")
        _finish_ax(ax, f"{model}: calibration ratio Σw·p / Σw·y", "ratio")
    else:
        _band(ax, grp, "mean_prediction", "mean prediction", "tab:blue")
        _band(ax, grp, "mean_label", "mean label", "tab:green")
        _finish_ax(ax, f"{model}: mean prediction vs mean label (ratio is unstable near 0)", "mean")
    out["calibration"] = _png(fig)

    fig, ax = plt.subplots(figsize=(4.6, 4.2))
    if task == "binary":
        for (m, run), s in sorted(latest.items()):
            if str(m) != model or not isinstance(s, BinarySummary) or s.total_weight <= 0:
                continue
            rel = s.reliability(10)
            ok = rel["weight"] > 0
            ax.plot(rel["mean_predicted"][ok], rel["observed_rate"][ok], marker="o", ms=3, lw=1, label=f"run {run}")
        ax.plot([0, 1], [0, 1], color="grey", ls="--", lw=1)
        ax.set_xlabel("mean predicted probability (bucket)")
        _finish_ax(ax, f"{model}: reliability, window {latest_label}", "observed rate")
    else:
        for (m, run), s in sorted(latest.items()):
            if str(m) == model and isinstance(s, RegressionSummary) and s.weight > 0:
                ax.scatter([s.wp / s.weight], [s.wy / s.weight], label=f"run {run}")
        lim = ax.get_xlim()
        ax.plot(lim, lim, color="grey", ls="--", lw=1)
        ax.set_xlabel("mean prediction")
        _finish_ax(ax, f"{model}: window {latest_label} (regression summaries keep no histogram)", "mean label")
    out["reliability"] = _png(fig)

    fig, ax = plt.subplots(figsize=size)
    _band(ax, grp, "calibration_gain", "vanilla − calibrated", "tab:red")
    _band(ax, grp, "best_shift_gain", "vanilla − metric at the window's own c*", "tab:purple")
    ax.axhline(0.0, color="grey", lw=1)
    _finish_ax(ax, f"{model}: loss a bias shift removes (invisible to the calibrated metric)", metric)
    out["gap"] = _png(fig)
    return out


# ---- HTML ------------------------------------------------------------------------------------------

def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    if isinstance(v, (float, np.floating)):
        return f"{v:.6g}"
    return html.escape(str(v))


def _html_table(frame: pd.DataFrame, empty: str) -> str:
    if frame.empty:
        return f"<p class='empty'>{html.escape(empty)}</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(v)}</td>" for v in row) + "</tr>"
                   for row in frame.astype(object).itertuples(index=False))
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222;max-width:1300px}
h1{font-size:22px} h2{font-size:18px;border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:32px}
h3{font-size:14px;margin:12px 0 4px}
table{border-collapse:collapse;font-size:12px;margin:8px 0} th,td{border:1px solid #ddd;padding:3px 7px;text-align:right}
th{background:#f3f3f3} td:first-child,th:first-child{text-align:left}
.grid{display:flex;flex-wrap:wrap;gap:10px} .plot{flex:0 0 auto} .note{color:#555;font-size:12px}
.flag{background:#fff4e5;border:1px solid #f0b35a;padding:6px 10px} .empty{color:#2a7a2a}
"""


def render_html(report: DriftReport, cfg: JobConfig, plots: dict[str, dict[str, str]]) -> str:
    """The whole page; every image is a data: URI, no external resource is referenced."""
    t = report.table
    metric = METRIC_NAME[cfg.task]
    whole = t[t["slice_name"] == ALL]
    not_ok = (whole[whole["status"] != "ok"].groupby(["window", "status"], sort=True)
              .agg(models=("model", lambda s: ", ".join(sorted(set(s)))), pairs=("run", "size")).reset_index())
    spec = report.spec
    wdesc = f"rolling {spec.days} days" if spec.kind == "rolling" else spec.kind
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>ctcalc drift report {report.start}..{report.end}</title><style>{_CSS}</style></head><body>",
        f"<h1>Drift report: {html.escape(cfg.task)} ({metric}), {report.start} .. {report.end}</h1>",
        f"<p class='note'>Windows: {html.escape(wdesc)}. Calibrated metric of window t = vanilla {metric} of window t "
        f"with every prediction shifted by the bias c* fitted on <b>all</b> of window t-1 (the paper's rolling "
        f"calibration). Window summaries are sums of the stored daily summaries, then finalised. "
        f"{'Binary values carry the histogram bound in calibrated_bound. ' if cfg.task == 'binary' else ''}"
        f"Output root: {html.escape(cfg.output.path)}. Generated {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC.</p>",
        "<section id='flags'>",
        f"<h2>Bias moves above the threshold |Δc*| &gt; {report.threshold:g}</h2>",
        "<div class='flag'>" if not report.flags.empty else "<div>",
        _html_table(report.flags, f"No window's bias moved more than {report.threshold:g}."), "</div>",
        "<h3>Windows without a calibrated value</h3>",
        _html_table(not_ok, "Every window has a calibrated value."),
        "</section>",
        "<section id='spread'><h2>Spread across runs</h2>",
        "<p class='note'>Median over windows of the across-run standard deviation; the calibrated metric should "
        "vary less across runs than the vanilla one when most run-to-run noise is a global bias.</p>",
        _html_table(spread_table(t), "Fewer than two runs per window: no spread."), "</section>",
    ]
    for model in sorted(plots):
        parts.append(f"<section id='model-{html.escape(model)}' class='model'><h2>Model {html.escape(model)}</h2>"
                     "<div class='grid'>")
        for sec in SECTIONS:
            title = SECTION_TITLES[sec].format(metric=metric)
            parts.append(f"<div class='plot' data-section='{sec}'><h3>{html.escape(title)}</h3>"
                         f"<img alt='{html.escape(model)} {sec}' src='data:image/png;base64,{plots[model][sec]}'></div>")
        parts.append("</div></section>")
    cols = ["window", "model", "run", "n_rows", "vanilla", "calibrated", "calibration_gain", "prev_bias", "bias",
            "bias_change", "calibration", "status"]
    parts += ["<section id='table'><h2>All windows (slice __all__)</h2>", _html_table(whole[cols], "No rows."),
              "<p class='note'>Same numbers, every slice view included: the CSV and JSON files next to this page.</p>",
              "</section></body></html>"]
    return "\n".join(parts)


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(frame.to_json(orient="records", double_precision=15))


def write_report(
    cfg: JobConfig, start: str, end: str, *, out_dir: str | None = None, spec: WindowSpec | None = None,
    threshold: float | None = None, spark: SparkSession | None = None,
) -> DriftReport:
    """Build the report over [start, end] and write drift_<start>_<end>.{html,csv,json} to ``out_dir``
    (default ``<output.path>/reports``)."""
    table, flags, latest, spec, threshold = build_report_data(cfg, start, end, spec=spec, threshold=threshold,
                                                              spark=spark)
    report = DriftReport(start, end, spec, threshold, table, flags)
    whole = table[table["slice_name"] == ALL]
    latest_label = windows_between(start, end, spec)[-1].label
    plots = {str(m): model_plots(str(m), g, latest, cfg.task, latest_label) for m, g in whole.groupby("model")}
    out = Path(out_dir or Path(cfg.output.path) / "reports")
    out.mkdir(parents=True, exist_ok=True)
    stem = f"drift_{start}_{end}"
    paths = {"html": out / f"{stem}.html", "csv": out / f"{stem}.csv", "json": out / f"{stem}.json"}
    _write_atomic(paths["html"], render_html(report, cfg, plots))
    _write_atomic(paths["csv"], table.to_csv(index=False))
    meta = {"start": start, "end": end, "task": cfg.task, "window": spec.kind, "days": spec.days,
            "bias_threshold": threshold, "config": config_to_dict(cfg),
            "spread": _records(spread_table(table)), "flags": _records(flags), "rows": _records(table)}
    _write_atomic(paths["json"], json.dumps(meta, indent=1, default=str, allow_nan=False))
    report.paths = {k: str(v) for k, v in paths.items()}
    return report


