"""Self-contained HTML report of pipeline comparisons (plots embedded as base64 PNG, matplotlib Agg)."""
from __future__ import annotations

import base64
import html
import io
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ctcalc_spark.core.accuracy import Comparison, NoiseCheck, describe_noise_check

COLORS = ("#1f77b4", "#d62728")


def distributions_png(c: Comparison) -> str:
    """The paper's Figure 1 for one pair: per-pipeline distribution of the vanilla and the calibrated metric.

    Returns the PNG as a base64 string. Both panels use the same x-range width
    so the spreads are directly comparable.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = (c.vanilla.metric, c.calibrated.metric)
    values = {(p, m): np.asarray(c.runs[p][m], float) for p in (c.name_a, c.name_b) for m in metrics}
    width = max(float(np.ptp(np.concatenate([values[(c.name_a, m)], values[(c.name_b, m)]]))) for m in metrics)
    width = width if width > 0 else 1e-6
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), constrained_layout=True)
    for ax, m, side in zip(axes, metrics, (c.vanilla, c.calibrated)):
        both = np.concatenate([values[(c.name_a, m)], values[(c.name_b, m)]])
        centre = 0.5 * (both.min() + both.max())
        lo, hi = centre - 0.55 * width, centre + 0.55 * width
        bins = np.linspace(lo, hi, 25)
        for k, (p, col) in enumerate(zip((c.name_a, c.name_b), COLORS)):
            v = values[(p, m)]
            ax.hist(v, bins=bins, alpha=0.45, color=col, label=f"{p} (mean {v.mean():.5g}, sd {v.std(ddof=1):.2g})")
            ax.plot(v, np.full(v.size, -0.3 - 0.35 * k), "|", color=col, markersize=9)
            ax.axvline(v.mean(), color=col, lw=1.2, ls="--")
        ax.set_xlim(lo, hi)
        ax.set_title(f"{m}: Acc {100 * side.acc:.1f}% "
                     f"[{100 * side.acc_ci[0]:.1f}, {100 * side.acc_ci[1]:.1f}]", fontsize=10)
        ax.set_xlabel(f"{m} per run (lower is better)")
        ax.set_ylabel("runs")
        ax.legend(fontsize=8, loc="upper right")
    fig.suptitle(f"{c.name_a} vs {c.name_b}: {c.m_a} and {c.m_b} runs", fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _f(x: float | None, nd: int = 6) -> str:
    if x is None or (isinstance(x, float) and not np.isfinite(x)):
        return "–"
    return f"{x:.{nd}g}"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if np.isfinite(x) else "–"


def accuracy_table_rows(comparisons: Sequence[Comparison]) -> list[dict[str, Any]]:
    """Rows of the paper-style table: Pipeline A | Pipeline B | vanilla Acc | calibrated Acc (with intervals)."""
    rows = []
    for c in comparisons:
        rows.append({
            "Pipeline A": c.name_a,
            "Pipeline B": c.name_b,
            "runs": f"{c.m_a} / {c.m_b}",
            f"{c.vanilla.metric} Acc": f"{_pct(c.vanilla.acc)} [{_pct(c.vanilla.acc_ci[0])}, {_pct(c.vanilla.acc_ci[1])}]",
            f"{c.calibrated.metric} Acc":
                f"{_pct(c.calibrated.acc)} [{_pct(c.calibrated.acc_ci[0])}, {_pct(c.calibrated.acc_ci[1])}]",
            "Acc change": f"{100 * c.acc_gain:+.1f} pts [{100 * c.acc_gain_ci[0]:+.1f}, {100 * c.acc_gain_ci[1]:+.1f}]",
        })
    return rows


def spread_table_rows(comparisons: Sequence[Comparison]) -> list[dict[str, Any]]:
    """Rows per pipeline (each once): mean ± std of both metrics and the std reduction."""
    seen: dict[str, dict[str, Any]] = {}
    for c in comparisons:
        for name, red, mv, sv, mc, sc, m in (
            (c.name_a, c.std_reduction_a, c.vanilla.mean_a, c.vanilla.std_a, c.calibrated.mean_a,
             c.calibrated.std_a, c.m_a),
            (c.name_b, c.std_reduction_b, c.vanilla.mean_b, c.vanilla.std_b, c.calibrated.mean_b,
             c.calibrated.std_b, c.m_b),
        ):
            seen.setdefault(name, {
                "pipeline": name, "runs": m,
                f"{c.vanilla.metric} mean ± std": f"{_f(mv)} ± {_f(sv, 3)}",
                f"{c.calibrated.metric} mean ± std": f"{_f(mc)} ± {_f(sc, 3)}",
                "std reduction": _pct(red),
            })
    return list(seen.values())


def format_text_table(rows: list[dict[str, Any]]) -> str:
    """Fixed-width text of a list of equal-keyed dicts."""
    if not rows:
        return "(no rows)"
    keys = list(rows[0])
    widths = {k: max(len(k), *(len(str(r[k])) for r in rows)) for k in keys}
    head = " | ".join(f"{k:<{widths[k]}}" for k in keys)
    lines = [head, "-+-".join("-" * widths[k] for k in keys)]
    lines += [" | ".join(f"{str(r[k]):<{widths[k]}}" for k in keys) for r in rows]
    return "\n".join(lines)


def _html_table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>(no rows)</p>"
    keys = list(rows[0])
    head = "".join(f"<th>{html.escape(k)}</th>" for k in keys)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(r[k]))}</td>" for k in keys) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:0.6em 0 1.2em}th,td{border:1px solid #ccc;padding:4px 8px;text-align:left;
font-size:0.9em}th{background:#f3f3f3}.verdict{background:#f8f8f0;border-left:4px solid #b8a500;padding:0.6em 1em}
.note{color:#555;font-size:0.88em}img{max-width:100%}
"""


def render_html(
    comparisons: Sequence[Comparison],
    *,
    title: str = "Pipeline comparison",
    notes: Sequence[str] = (),
    noise_checks: Sequence[tuple[str, str, Sequence[NoiseCheck]]] = (),
) -> str:
    """One HTML page: the accuracy table, the spread table, and per pair Figure 1 and the verdict.

    ``noise_checks``: (name_a, name_b, checks) of single-run helper results to include.
    """
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    if comparisons:
        c0 = comparisons[0]
        parts.append("<h2>Metric accuracy</h2>")
        parts.append(_html_table(accuracy_table_rows(comparisons)))
        parts.append(
            f"<p class='note'>Acc = share of run pairs (one run of A, one of B) in which A's metric is lower; "
            f"ties count 1/2. Brackets: {int(round(100 * c0.level))}% percentile bootstrap intervals "
            f"({c0.n_boot} resamples of runs within each pipeline; the accuracy change uses the same resamples "
            "for both metrics).</p>"
        )
        parts.append("<h2>Mean and spread across runs</h2>")
        parts.append(_html_table(spread_table_rows(comparisons)))
        parts.append("<p class='note'>std reduction = 1 - std(calibrated) / std(vanilla) across runs. The calibrated "
                     "metric removes one global bias shift fitted on the val-bias rows; a pipeline whose real gain "
                     "is better calibration looks no better under it, so read both columns.</p>")
    for c in comparisons:
        parts.append(f"<h2>{html.escape(c.name_a)} vs {html.escape(c.name_b)}</h2>")
        parts.append(f"<img alt='distributions' src='data:image/png;base64,{distributions_png(c)}'>")
        parts.append(f"<p class='verdict'>{html.escape(c.verdict)}</p>")
    for name_a, name_b, checks in noise_checks:
        parts.append(f"<h2>Single run: {html.escape(name_a)} vs {html.escape(name_b)}</h2><ul>")
        parts += [f"<li>{html.escape(describe_noise_check(ch, name_a, name_b))}</li>" for ch in checks]
        parts.append("</ul><p class='note'>Noise model: with no real difference, the difference of two single runs "
                     "is N(0, 2·s²), s the std of the baseline runs; the empirical share uses the baseline's own "
                     "run pairs.</p>")
    for n in notes:
        parts.append(f"<p class='note'>{html.escape(n)}</p>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _json_safe(value: Any) -> Any:
    """Non-finite floats (an infinite z when the baseline spread is 0) become null: JSON has no inf/NaN."""
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    return value


def write_report(
    out_dir: str | Path,
    comparisons: Sequence[Comparison],
    *,
    title: str = "Pipeline comparison",
    notes: Sequence[str] = (),
    noise_checks: Sequence[tuple[str, str, Sequence[NoiseCheck]]] = (),
    extra: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Write ``report.html`` and ``comparison.json`` under ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html_path, json_path = out / "report.html", out / "comparison.json"
    html_path.write_text(render_html(comparisons, title=title, notes=notes, noise_checks=noise_checks))
    payload = {
        "comparisons": [c.to_dict() for c in comparisons],
        "single_run": [
            {"a": a, "b": b, "checks": [ch.__dict__ for ch in checks]} for a, b, checks in noise_checks
        ],
        **(extra or {}),
    }
    json_path.write_text(json.dumps(_json_safe(payload), indent=2, allow_nan=False, default=str))
    return {"html": html_path, "json": json_path}
