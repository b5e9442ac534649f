"""The compare report's rolling section: per-window Acc with intervals (plot and table) and the period definition."""
from __future__ import annotations

import datetime as dt
import html
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ctcalc_spark.core.rolling_compare import RollingComparison, period_description, window_summary
from ctcalc_spark.pathsafe import write_atomic
from ctcalc_spark.redact import spreadsheet_safe
from ctcalc_spark.reports.plotting import figure_png, img_tag, plain, pyplot

WINDOW_COLUMNS = ["window", "window_start", "window_end", "runs_a", "runs_b", "vanilla_acc", "vanilla_lo",
                  "vanilla_hi", "rolling_calibrated_acc", "rolling_calibrated_lo", "rolling_calibrated_hi",
                  "in_period", "note"]


def window_frame(rc: RollingComparison) -> pd.DataFrame:
    """One row per window: runs per pipeline, Acc and interval of both metrics (NaN where not compared)."""
    rows = []
    period = set(rc.period_windows)
    for r in rc.windows:
        rec: dict[str, Any] = {"window": r.window, "window_start": r.window_start, "window_end": r.window_end,
                               "runs_a": r.runs_a, "runs_b": r.runs_b, "in_period": r.window in period,
                               "note": r.note}
        for which, name in (("vanilla", "vanilla"), ("calibrated", "rolling_calibrated")):
            side = getattr(r.comparison, which) if r.comparison is not None else None
            rec[f"{name}_acc"] = side.acc if side else np.nan
            rec[f"{name}_lo"] = side.acc_ci[0] if side else np.nan
            rec[f"{name}_hi"] = side.acc_ci[1] if side else np.nan
        rows.append(rec)
    return pd.DataFrame(rows, columns=WINDOW_COLUMNS)


def accuracy_over_time_png(rc: RollingComparison) -> str:
    """Acc of A vs B per window under both metrics, with their bootstrap intervals, and the period's Acc."""
    plt = pyplot()
    f = window_frame(rc).dropna(subset=["vanilla_acc"])
    fig, ax = plt.subplots(figsize=(9.6, 3.6))
    x = [dt.date.fromisoformat(d) for d in f["window_end"]]
    for name, label, colour, acc in (("vanilla", rc.metric, "tab:blue", rc.period.vanilla.acc),
                                     ("rolling_calibrated", rc.calibrated_metric, "tab:orange",
                                      rc.period.calibrated.acc)):
        ax.plot(x, f[f"{name}_acc"], marker="o", ms=2.5, lw=1, color=colour, label=f"{label}, per window")
        ax.fill_between(x, f[f"{name}_lo"], f[f"{name}_hi"], color=colour, alpha=0.15,
                        label=f"{label}, {round(100 * rc.period.level)}% interval")
        ax.axhline(acc, color=colour, ls="--", lw=1, label=f"{label}, whole period: {100 * acc:.0f}%")
    ax.axhline(0.5, color="grey", lw=0.8)
    ax.set_ylim(-0.03, 1.03)
    ax.set_ylabel(plain(f"Acc: P({rc.name_a} < {rc.name_b})"))
    ax.set_title(plain(f"{rc.name_a} vs {rc.name_b}: metric accuracy per {rc.spec.label} window"), fontsize=10)
    ax.grid(alpha=0.3)
    ax.tick_params(axis="both", labelsize=9)
    ax.tick_params(axis="x", labelrotation=30)
    ax.legend(fontsize=9, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.3), frameon=False)
    return figure_png(fig, dpi=100, tight=True)


def _acc(v: float, lo: float, hi: float) -> str:
    return "–" if np.isnan(v) else f"{100 * v:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}]"


def section_html(rc: RollingComparison) -> str:
    """The HTML block: what was compared, the per-window summary, the plot, the period definition, the table."""
    f = window_frame(rc)
    head = ["window", "runs A / B", f"{rc.metric} Acc", f"{rc.calibrated_metric} Acc", "in period", "note"]
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in (
            r.window, f"{r.runs_a} / {r.runs_b}", _acc(r.vanilla_acc, r.vanilla_lo, r.vanilla_hi),
            _acc(r.rolling_calibrated_acc, r.rolling_calibrated_lo, r.rolling_calibrated_hi),
            "yes" if r.in_period else "no", r.note)) + "</tr>" for r in f.itertuples())
    table = ("<table><thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head)
             + f"</tr></thead><tbody>{body}</tbody></table>")
    kind = f"rolling {rc.spec.days}-day" if rc.spec.kind == "rolling" else rc.spec.kind
    parts = [
        "<section id='rolling'><h2>Rolling calibration: bias from the previous window</h2>",
        f"<p class='note'>{html.escape(kind)} windows, {rc.start} .. {rc.end}. In each window every run's predictions "
        "are shifted by the bias c* fitted on all rows of the same run's previous window (the paper's drift "
        f"setting); {html.escape(rc.calibrated_metric)} is the {html.escape(rc.metric)} of the shifted predictions. "
        "Acc per window uses the runs with a value in that window.</p>",
        *[f"<p>{html.escape(line)}</p>" for line in window_summary(rc)],
        img_tag(accuracy_over_time_png(rc), "metric accuracy per window"),
        f"<p class='note'>{html.escape(period_description(rc))}</p>",
    ]
    if not rc.left_out.empty:
        lo = rc.left_out
        shown = ", ".join(f"{w} ({r})" for w, r in zip(lo["window"].head(10), lo["reason"].head(10)))
        more = f" and {len(lo) - 10} more" if len(lo) > 10 else ""
        parts.append(f"<p class='note'>Windows left out of the period sums: {html.escape(shown)}{more}.</p>")
    for name, runs in rc.excluded.items():
        if runs:
            parts.append(f"<p class='note'>Runs of {html.escape(name)} without any rolling-calibrated value, left out: "
                         f"{html.escape(', '.join(runs))}.</p>")
    parts.append(f"<details><summary>Every window ({len(f)})</summary>{table}</details></section>")
    return "\n".join(parts)


def write_windows_csv(rc: RollingComparison, out_dir: str | Path) -> Path:
    """``windows.csv`` (per-window Acc) and ``runs.csv`` (per window and run: sums and both metrics) in out_dir."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "windows.csv", spreadsheet_safe(window_frame(rc)).to_csv(index=False))
    write_atomic(out / "runs.csv", spreadsheet_safe(rc.runs).to_csv(index=False))
    return out / "windows.csv"
