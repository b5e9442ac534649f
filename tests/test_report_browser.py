"""The reports in a real browser (a 1400 x 900 window): headless Chromium lays out a 3-year drift report and a
comparison; the answer is on the first screen, and every plot's smallest text is 10 px or more as displayed.

Chromium comes from the Debian package (scripts/ensure_chromium.sh, which scripts/test.sh runs first).
Without it the test is skipped, unless CTCALC_REQUIRE_BROWSER=1 (set by scripts/test.sh) makes that a failure.
"""
from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.reports.drift import write_report_files

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WINDOW = (1400, 900)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", f"--window-size={WINDOW[0]},{WINDOW[1]}"]

if not os.access(CHROMIUM, os.X_OK):
    if os.environ.get("CTCALC_REQUIRE_BROWSER") == "1":
        raise RuntimeError(f"Expected headless Chromium at {CHROMIUM}, found none; run scripts/ensure_chromium.sh "
                           "(apt-get install chromium) or unset CTCALC_REQUIRE_BROWSER.")
    pytest.skip(f"no Chromium at {CHROMIUM}; run scripts/ensure_chromium.sh", allow_module_level=True)

pytestmark = pytest.mark.slow  # headless Chromium

# Every image: decoded, its natural and displayed width, its right edge, and the facts figure_png stored on it
# (the smallest text in image pixels, legends over their axes); and the smallest computed font of any page text.
_IMAGES = """
const IMAGES = () => [...document.images].map(i => ({loaded: i.complete, natural_width: i.naturalWidth,
  shown_width: i.getBoundingClientRect().width, right: i.getBoundingClientRect().right + scrollX,
  min_font_px: parseFloat(i.dataset.minFontPx), legends_over_axes: parseFloat(i.dataset.legendsOverAxes),
  alt: i.alt}));
const MIN_TEXT_PX = () => Math.min(...[...document.body.querySelectorAll('*')]
  .filter(e => [...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim()))
  .map(e => parseFloat(getComputedStyle(e).fontSize)));
"""

# Injected into a copy of the page (the report itself has no script): element boxes in page coordinates.
_MEASURE = """<script>""" + _IMAGES + """
addEventListener('load', () => {
  const box = (el) => { if (!el) return null; const r = el.getBoundingClientRect();
    return {top: r.top + scrollY, bottom: r.bottom + scrollY, left: r.left + scrollX, right: r.right + scrollX}; };
  const img = document.querySelector('img');
  const out = {innerHeight, innerWidth, scrollHeight: document.documentElement.scrollHeight, images: IMAGES(),
    summary: box(document.getElementById('summary')), flags: box(document.getElementById('flags')),
    first_img: Object.assign(box(img) || {}, {loaded: !!img && img.complete, natural_width: img ? img.naturalWidth : 0,
      section: img ? img.closest('section').id : null})};
  document.body.setAttribute('data-layout', JSON.stringify(out));
});
</script></body>"""


def _chromium(args: list[str], tmp_path: Path) -> str:
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    proc = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args], capture_output=True, text=True,
                          timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def layout(page: str, tmp_path: Path, name: str) -> dict[str, Any]:
    """Boxes of #summary, the first <img> and #flags as Chromium lays the page out, plus the viewport size."""
    probe = tmp_path / f"{name}.html"
    probe.write_text(page.replace("</body>", _MEASURE, 1), encoding="utf-8")
    dom = _chromium(["--dump-dom", probe.as_uri()], tmp_path)
    m = re.search(r'data-layout="([^"]*)"', dom)
    assert m, f"the measuring script left no data-layout attribute; DOM starts {dom[:300]!r}"
    return json.loads(html.unescape(m.group(1)))  # type: ignore[no-any-return]


def check_readable(images: list[dict[str, Any]]) -> None:
    """Every plot decoded, its smallest text at least MIN_FONT_PX as displayed (image pixels scaled by the displayed
    over the natural width), and no legend over its axes."""
    from ctcalc_spark.reports.plotting import MIN_FONT_PX

    assert images and all(i["loaded"] and i["natural_width"] > 0 for i in images), images
    shown = {i["alt"]: round(i["min_font_px"] * i["shown_width"] / i["natural_width"], 1) for i in images}
    small = {alt: px for alt, px in shown.items() if not px >= MIN_FONT_PX}
    assert not small, f"plot text below {MIN_FONT_PX} px as displayed: {small}"
    assert not [i["alt"] for i in images if i["legends_over_axes"] != 0], "a legend over its axes"


def _pixels(png: Path, box: dict[str, float]) -> np.ndarray:
    """RGB pixels (n, 3) of a screenshot inside a box."""
    from PIL import Image

    im = Image.open(png).convert("RGB")
    crop = im.crop((int(box["left"]), int(box["top"]), int(box["right"]), int(box["bottom"])))
    return np.asarray(crop, dtype=np.int16).reshape(-1, 3)


def test_summary_and_first_plot_are_on_the_first_screen(three_year_report, tmp_path):
    cfg, built = three_year_report  # 2 models x 5 runs x 3 years of daily summaries, weekly windows
    t0 = time.perf_counter()
    rep = write_report_files(built, cfg, tmp_path / "report")
    t_write = time.perf_counter() - t0
    whole = rep.table[rep.table["slice_name"] == ALL]
    assert len(whole) == 1550 and len(rep.moves) == 310  # thousands of model-run windows
    page = Path(rep.paths["html"]).read_text(encoding="utf-8")

    t1 = time.perf_counter()
    lay = layout(page, tmp_path, "report")
    screen = lay["innerHeight"]
    assert 600 <= screen <= WINDOW[1] and lay["innerWidth"] == WINDOW[0]
    assert lay["scrollHeight"] > 2 * screen  # a long page: the plots of both models and the tables follow
    summary, img, flags = lay["summary"], lay["first_img"], lay["flags"]
    assert summary["top"] < summary["bottom"] <= screen, f"summary {summary} not within the first {screen} px"
    assert img["section"] == "overview" and img["loaded"] and img["natural_width"] >= 500
    assert summary["bottom"] <= img["top"] < img["bottom"] <= screen, f"first plot {img} not within {screen} px"
    assert flags["top"] > img["bottom"]  # the flag table comes after the plots
    check_readable(lay["images"])

    # What a person sees: a screenshot of the first screen holds the summary text and the plot's coloured lines.
    shot = tmp_path / "first_screen.png"
    _chromium([f"--screenshot={shot}", Path(rep.paths["html"]).as_uri()], tmp_path)
    text = int((_pixels(shot, summary).max(axis=1) < 110).sum())  # dark: text and table rules
    px = _pixels(shot, img)
    lines = int((px.max(axis=1) - px.min(axis=1) > 90).sum())  # saturated: tab:blue / tab:orange / red crosses
    assert text > 2000 and lines > 300, f"screenshot: {text} dark pixels in the summary, {lines} coloured in the plot"
    t_browser = time.perf_counter() - t1

    # The check can fail: with the old page's all-windows table first, neither is on the first screen.
    legacy = page.replace("<section id='summary'>",
                          f"<section id='table'>{whole.to_html(index=False)}</section><section id='summary'>", 1)
    old = layout(legacy, tmp_path, "legacy")
    assert old["summary"]["top"] > screen and old["first_img"]["top"] > screen
    print(f"\n3-year weekly drift report: {len(page.encode('utf-8')) / 1e3:.0f} kB page, written in "
          f"{t_write:.1f} s; Chromium layout + screenshot {t_browser:.1f} s; summary ends at "
          f"{summary['bottom']:.0f} px, first plot at {img['top']:.0f}-{img['bottom']:.0f} px of a {screen} px screen")


# Injected like _MEASURE: every image decoded, the page's width against the window's, and where the accuracy
# table and each note and verdict paragraph sit.
_MEASURE_COMPARE = """<script>""" + _IMAGES + """
addEventListener('load', () => {
  const box = (el) => { if (!el) return null; const r = el.getBoundingClientRect();
    return {top: r.top + scrollY, bottom: r.bottom + scrollY, right: r.right + scrollX}; };
  const out = {innerHeight, innerWidth, scrollWidth: document.documentElement.scrollWidth, images: IMAGES(),
    min_text_px: MIN_TEXT_PX(), verdict: box(document.querySelector('section.verdict')),
    first_table: box(document.querySelector('table')),
    notes: [...document.querySelectorAll('p.note, p.verdict')].map(p => Object.assign(box(p), {text: p.textContent}))};
  document.body.setAttribute('data-layout', JSON.stringify(out));
});
</script></body>"""


def test_the_compare_report_lays_out_within_the_window_with_every_plot_decoded(tmp_path):
    """The comparison report (ctcalc compare, --rolling, ctcalc experiment) in Chromium: its plots decode, nothing
    is wider than a 1280 px window, the accuracy table is on the first screen, and the line that says how to read
    an Acc below 50 % (the better pipeline given as B) is on the page."""
    import itertools

    import pandas as pd

    from ctcalc_spark.core.rolling_compare import comparison_windows, compare_rolling, run_table
    from ctcalc_spark.core.summary import RegressionSummary
    from ctcalc_spark.core.windows import WindowSpec
    from ctcalc_spark.reports.comparison import orientation_note, write_report
    from ctcalc_spark.reports.rolling_comparison import section_html

    rng = np.random.default_rng(4)
    days = [(pd.Timestamp("2026-05-01") + pd.Timedelta(days=i)).date().isoformat() for i in range(12)]
    rows = []
    for i, ds in enumerate(days):
        y = rng.normal(0.3 * i, 1.0, 200)
        for model, run in itertools.product(("a_much_longer_pipeline_name_for_the_table", "b"), range(4)):
            p = y + rng.normal(0, 0.5, 200) + (0.3 * (i - 1) if model == "b" else 0.0) - 0.3 * i + 0.1 * run
            s = RegressionSummary.from_rows(y, p)
            rows.append({"ds": ds, "model": model, "run": str(run), "split": "remain", "count": s.count,
                         "weight": s.weight, "wr": s.wr, "wr2": s.wr2, "wp": s.wp, "wy": s.wy})
    spec = WindowSpec("day")
    table = run_table(pd.DataFrame(rows), "regression", comparison_windows(days[0], days[-1], spec), spec,
                      first_ds=days[0], end=days[-1])
    rc = compare_rolling(table, "regression", "a_much_longer_pipeline_name_for_the_table", "b", spec=spec,
                         start=days[0], end=days[-1], n_boot=200)
    c = rc.period
    assert c.ahead == "b" and orientation_note(c) is not None  # the better pipeline given as B
    paths = write_report(tmp_path / "report", [c], title="a vs b: day windows", sections=[section_html(rc)],
                         warnings=["an example warning line"])
    page = Path(paths["html"]).read_text(encoding="utf-8")
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", _MEASURE_COMPARE, 1), encoding="utf-8")
    dom = _chromium(["--dump-dom", probe.as_uri()], tmp_path)
    m = re.search(r'data-layout="([^"]*)"', dom)
    assert m, f"the measuring script left no data-layout attribute; DOM starts {dom[:300]!r}"
    lay = json.loads(html.unescape(m.group(1)))
    assert len(lay["images"]) == 2  # the runs' distributions and the accuracy per window
    assert all(i["loaded"] and i["natural_width"] >= 500 for i in lay["images"]), lay["images"]
    check_readable(lay["images"])
    assert lay["min_text_px"] >= 10, f"page text of {lay['min_text_px']} px"
    assert lay["scrollWidth"] <= lay["innerWidth"], f"the page is {lay['scrollWidth']} px wide in a " \
                                                     f"{lay['innerWidth']} px window"
    # the verdict first, on the first screen, before the tables
    assert lay["verdict"]["bottom"] <= lay["innerHeight"] and lay["verdict"]["bottom"] <= lay["first_table"]["top"]
    assert any(n["text"] == c.headline for n in lay["notes"]), c.headline
    assert any(n["text"].startswith("Acc is the share of run pairs in which a_much_longer") for n in lay["notes"])
    shot = tmp_path / "compare_first_screen.png"
    _chromium([f"--screenshot={shot}", Path(paths["html"]).as_uri()], tmp_path)
    px = _pixels(shot, {"left": 0, "right": WINDOW[0], **lay["verdict"]})
    assert int((px.max(axis=1) < 110).sum()) > 2000  # the verdict's text is drawn there


def test_the_regression_drift_report_lays_out_like_the_binary_one(tmp_path):
    """The drift report of a regression task (its own plots and units: residual stds, MSE) in Chromium: the summary
    and the first plot on the first screen, every plot decoded, nothing wider than the window."""
    import pandas as pd

    from ctcalc_spark.reports.drift import write_report
    from tests._rows import regression_drift_stream, regression_summary_rows
    from tests.test_report import _cfg, _store

    rows = pd.concat([regression_summary_rows(regression_drift_stream(s, months=3, per_day=10)) for s in range(3)])
    _store(tmp_path / "out", rows)
    rep = write_report(_cfg(tmp_path, "regression", window="week"), "2026-02-01", "2026-03-31",
                       out_dir=str(tmp_path / "rep"))
    page = Path(rep.paths["html"]).read_text(encoding="utf-8")
    lay = layout(page, tmp_path, "regression")
    screen = lay["innerHeight"]
    summary, img = lay["summary"], lay["first_img"]
    assert summary["bottom"] <= screen and img["loaded"] and img["natural_width"] >= 500
    assert summary["bottom"] <= img["top"] < img["bottom"] <= screen, f"first plot {img} not within {screen} px"
    probe = tmp_path / "probe.html"
    probe.write_text(page.replace("</body>", _MEASURE_COMPARE, 1), encoding="utf-8")
    m = re.search(r'data-layout="([^"]*)"', _chromium(["--dump-dom", probe.as_uri()], tmp_path))
    assert m
    whole = json.loads(html.unescape(m.group(1)))
    assert len(whole["images"]) >= 2 and all(i["loaded"] and i["natural_width"] > 0 for i in whole["images"])
    check_readable(whole["images"])
    assert whole["min_text_px"] >= 10, f"page text of {whole['min_text_px']} px"
    assert whole["scrollWidth"] <= whole["innerWidth"], f"{whole['scrollWidth']} px wide in {whole['innerWidth']}"
