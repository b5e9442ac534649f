"""Self-contained HTML report of pipeline comparisons (plots embedded as base64 PNG, matplotlib Agg)."""
from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ctcalc_spark.core.accuracy import Comparison, NoiseCheck, describe_noise_check
from ctcalc_spark.pathsafe import child_path, report_root, write_atomic
from ctcalc_spark.reports.plotting import figure_png, img_tag, plain, pyplot

COLORS = ("#1f77b4", "#d62728")


def decimals_for(spread: float, *, significant: int = 2) -> int:
    """Decimals that show ``spread`` with ``significant`` digits (0.0031 -> 4); 6 when the spread is 0 or undefined."""
    if not (math.isfinite(spread) and spread > 0):
        return 6
    return max(0, min(12, significant - 1 - math.floor(math.log10(spread))))


def mean_sd(mean: float, sd: float, decimals: int) -> str:
    """``mean ± sd`` with the same number of decimals for both."""
    if not math.isfinite(mean):
        return "–"
    return f"{mean:.{decimals}f} ± {sd:.{decimals}f}" if math.isfinite(sd) else f"{mean:.{decimals}f} ± –"


def shared_bins(values: Sequence[np.ndarray], lo: float, hi: float) -> np.ndarray:
    """One set of histogram edges over [lo, hi] for every pipeline of a panel: about 2·√n bins (6 to 30), and
    more (up to 60) where a pipeline's runs spread over less than 4 of them, so its runs do not merge into a bar
    or two when the other pipeline's range is much wider."""
    n = int(np.clip(round(2 * math.sqrt(sum(v.size for v in values))), 6, 30))
    spans = [float(np.ptp(v)) for v in values if v.size > 1 and np.ptp(v) > 0]
    if spans and hi > lo:
        n = max(n, min(60, math.ceil(4 * (hi - lo) / min(spans))))
    return np.linspace(lo, hi, n + 1)


def _count_axis(ax: Any, top: int, rug_rows: int) -> list[float]:
    """Run counts: integer ticks from 0 only; returns the y of each rug row (below 0)."""
    from matplotlib.ticker import FixedLocator, MaxNLocator

    top = max(int(top), 1)
    ticks = [t for t in MaxNLocator(nbins=5, integer=True).tick_values(0, top) if 0 <= t <= top]
    ax.yaxis.set_major_locator(FixedLocator(ticks))
    step = 0.1 * top
    ax.set_ylim(-step * (rug_rows + 0.5), 1.1 * top)
    ax.axhline(0.0, color="0.6", lw=0.8)
    return [-step * (k + 1) for k in range(rug_rows)]


def distributions_figure(c: Comparison) -> Any:
    """The paper's Figure 1 for one pair: per-pipeline distribution of the vanilla and the calibrated metric.

    Both panels span the same x-range width, so the spreads compare directly; each panel's bins cover its own
    runs' range (both pipelines of a panel share them), so a panel whose runs lie close together still shows
    them as several bars; the y axis counts runs (integers from 0); legends sit below the panels, off the data.
    """
    plt = pyplot()
    metrics = (c.vanilla.metric, c.calibrated.metric)
    names = (c.name_a, c.name_b)
    values = {(p, m): np.asarray(c.runs[p][m], float) for p in names for m in metrics}
    width = max(float(np.ptp(np.concatenate([values[(c.name_a, m)], values[(c.name_b, m)]]))) for m in metrics)
    width = width if width > 0 else 1e-6
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), constrained_layout=True)
    for ax, m, side in zip(axes, metrics, (c.vanilla, c.calibrated)):
        both = [values[(p, m)] for p in names]
        data_lo, data_hi = min(v.min() for v in both), max(v.max() for v in both)
        centre = 0.5 * (data_lo + data_hi)
        lo, hi = centre - 0.55 * width, centre + 0.55 * width
        pad = 0.05 * (data_hi - data_lo) if data_hi > data_lo else 0.05 * width
        bins = shared_bins(both, data_lo - pad, data_hi + pad)
        sds = [float(v.std(ddof=1)) for v in both]
        nd = decimals_for(min((s for s in sds if s > 0), default=math.nan))
        top = 0
        for p, col, v, sd in zip(names, COLORS, both, sds):
            counts, _, _ = ax.hist(v, bins=bins, alpha=0.45, color=col,
                                   label=plain(f"{p}: mean {mean_sd(float(v.mean()), sd, nd)}"))
            top = max(top, int(counts.max()))
            ax.axvline(v.mean(), color=col, lw=1.2, ls="--")
        for y, col, v in zip(_count_axis(ax, top, len(both)), COLORS, both):  # one rug row of single runs each
            ax.plot(v, np.full(v.size, y), "|", color=col, markersize=8)
        ax.set_xlim(lo, hi)
        lo_ci, hi_ci = side.acc_ci
        ax.set_title(plain(f"{m}: Acc of {c.name_a} {100 * side.acc:.1f}% [{100 * lo_ci:.1f}%, {100 * hi_ci:.1f}%]"),
                     fontsize=10)
        ax.set_xlabel(f"{m} per run, lower is better")
        ax.set_ylabel("runs")
        ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1, frameon=False)
    fig.suptitle(plain(f"{c.name_a} vs {c.name_b}: {c.m_a} and {c.m_b} runs"), fontsize=11)
    return fig


def distributions_png(c: Comparison) -> str:
    """:func:`distributions_figure` as a base64 PNG."""
    return figure_png(distributions_figure(c), dpi=110)


def report_title(name_a: str, name_b: str, days: Sequence[str], *, dated: bool = True) -> str:
    """``A vs B, <day>`` or ``A vs B, <first>..<last>: N days, summaries merged`` (no nested parentheses);
    ``dated=False`` (a fixed evaluation set, ``columns.ds: null``, whose one day only labels the output partition):
    ``A vs B, fixed evaluation set``, no date."""
    if not dated:
        return f"{name_a} vs {name_b}, fixed evaluation set"
    if len(days) == 1:
        return f"{name_a} vs {name_b}, {days[0]}"
    return f"{name_a} vs {name_b}, {days[0]}..{days[-1]}: {len(days)} days, summaries merged"


def report_dir(output_root: str | Path, name_a: str, name_b: str) -> Path:
    """Default report folder ``<output_root>/compare/<A>_vs_<B>``, names made safe (never outside the root)."""
    return child_path(report_root(str(output_root)), "compare", f"{name_a}_vs_{name_b}")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%" if np.isfinite(x) else "–"


ACC_CHANGE = "Acc change, calibrated − vanilla"
"""The table's column of ``acc_gain``: A's Acc under the calibrated minus under the vanilla metric, the sign the
verdict prints too."""


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
            ACC_CHANGE: f"{100 * c.acc_gain:+.1f} pts [{100 * c.acc_gain_ci[0]:+.1f}, {100 * c.acc_gain_ci[1]:+.1f}]",
        })
    return rows


def orientation_note(c: Comparison, swapped: str | None = None) -> str | None:
    """A line for under the accuracy table when pipeline B is the one both metrics rank ahead: every Acc on the page
    is A's share, so B ahead reads as an Acc below 50 % (None when A is ahead).
    ``swapped``: how to give the pair the other way round in the command at hand (e.g. its flags)."""
    if c.ahead is None or c.ahead != c.name_b or c.name_a == c.name_b:
        return None
    return (f"Acc is the share of run pairs in which {c.name_a} (A) has the lower metric, in the tables, the plots "
            f"and the verdict alike: {c.name_b} ranks ahead here, so its Accs are below 50% ({_pct(c.vanilla.acc)} "
            f"under {c.vanilla.metric}, {_pct(c.calibrated.acc)} under {c.calibrated.metric}). The paper's layout "
            "puts the pipeline ahead first, as A" + (f": {swapped}." if swapped else "."))


def spread_table_rows(comparisons: Sequence[Comparison]) -> list[dict[str, Any]]:
    """Rows per pipeline (each once): mean ± std of both metrics and the std reduction.

    Within a metric column every row uses the same decimals, set by the smallest std shown.
    """
    sides: dict[str, tuple[int, float, float, float, float, float]] = {}
    for c in comparisons:
        sides.setdefault(c.name_a, (c.m_a, c.vanilla.mean_a, c.vanilla.std_a, c.calibrated.mean_a,
                                    c.calibrated.std_a, c.std_reduction_a))
        sides.setdefault(c.name_b, (c.m_b, c.vanilla.mean_b, c.vanilla.std_b, c.calibrated.mean_b,
                                    c.calibrated.std_b, c.std_reduction_b))
    if not comparisons:
        return []
    van, cal = comparisons[0].vanilla.metric, comparisons[0].calibrated.metric

    def smallest(i: int) -> float:
        return min((s[i] for s in sides.values() if math.isfinite(s[i]) and s[i] > 0), default=math.nan)

    nd_v, nd_c = decimals_for(smallest(2)), decimals_for(smallest(4))
    return [{"pipeline": name, "runs": m, f"{van} mean ± std": mean_sd(mv, sv, nd_v),
             f"{cal} mean ± std": mean_sd(mc, sc, nd_c), "std reduction": _pct(red)}
            for name, (m, mv, sv, mc, sc, red) in sides.items()]


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
font-size:0.9em}th{background:#f3f3f3}section.verdict{background:#f8f8f0;border-left:4px solid #b8a500;
padding:0.2em 1em;margin:0.6em 0 1em}p.verdict{font-size:1.05em}.detail{color:#333;font-size:0.92em}
.note{color:#555;font-size:0.88em}img{max-width:100%}
.warning{background:#fff0f0;border-left:4px solid #c62828;padding:0.6em 1em}
"""


def render_html(
    comparisons: Sequence[Comparison],
    *,
    title: str = "Pipeline comparison",
    notes: Sequence[str] = (),
    noise_checks: Sequence[tuple[str, str, Sequence[NoiseCheck]]] = (),
    warnings: Sequence[str] = (),
    sections: Sequence[str] = (),
) -> str:
    """One HTML page: the verdict of each pair first, then the accuracy table, the spread table, and per pair Figure 1.

    ``noise_checks``: (name_a, name_b, checks) of single-run helper results to include; ``warnings``: lines shown
    first, in a warning box (e.g. extreme logits); ``sections``: HTML blocks placed after the tables.
    """
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
             f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"]
    for c in comparisons:  # the answer first
        rest = c.verdict[len(c.headline):].strip() if c.verdict.startswith(c.headline) else c.verdict
        pair = f"{html.escape(c.name_a)} vs {html.escape(c.name_b)}: " if len(comparisons) > 1 else ""
        parts.append(f"<section class='verdict'><p class='verdict'><b>{pair}{html.escape(c.headline)}</b></p>"
                     f"<p class='detail'>{html.escape(rest)}</p></section>")
    parts += [f"<p class='warning'>{html.escape(w)}</p>" for w in warnings]
    if comparisons:
        c0 = comparisons[0]
        parts.append("<h2>Metric accuracy</h2>")
        parts.append(_html_table(accuracy_table_rows(comparisons)))
        parts.append(
            f"<p class='note'>Acc = share of run pairs (one run of A, one of B) in which A's metric is lower; "
            f"ties count 1/2. {ACC_CHANGE} is A's Acc under the calibrated metric minus under the vanilla one. "
            f"Brackets: {int(round(100 * c0.level))}% percentile bootstrap intervals "
            f"({c0.n_boot} resamples of runs within each pipeline; the accuracy change uses the same resamples "
            "for both metrics).</p>"
        )
        parts += [f"<p class='note'>{html.escape(n)}</p>" for n in map(orientation_note, comparisons) if n]
        parts.append("<h2>Mean and spread across runs</h2>")
        parts.append(_html_table(spread_table_rows(comparisons)))
        parts.append("<p class='note'>std reduction = 1 - std(calibrated) / std(vanilla) across runs. The calibrated "
                     "metric removes one global bias shift fitted on the val-bias rows; a pipeline whose real gain "
                     "is better calibration looks no better under it, so read both columns.</p>")
    parts += list(sections)
    for c in comparisons:
        parts.append(f"<h2>{html.escape(c.name_a)} vs {html.escape(c.name_b)}</h2>")
        parts.append(img_tag(distributions_png(c), f"{c.name_a} vs {c.name_b}: distributions of both metrics"))
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
    warnings: Sequence[str] = (),
    sections: Sequence[str] = (),
) -> dict[str, Path]:
    """Write ``report.html`` and ``comparison.json`` under ``out_dir``; returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    html_path, json_path = out / "report.html", out / "comparison.json"
    write_atomic(html_path, render_html(comparisons, title=title, notes=notes, noise_checks=noise_checks,
                                        warnings=warnings, sections=sections))
    payload = {
        "comparisons": [c.to_dict() for c in comparisons],
        "single_run": [
            {"a": a, "b": b, "checks": [ch.__dict__ for ch in checks]} for a, b, checks in noise_checks
        ],
        "warnings": list(warnings),
        **(extra or {}),
    }
    write_atomic(json_path, json.dumps(_json_safe(payload), indent=2, allow_nan=False, default=str))
    return {"html": html_path, "json": json_path}
