"""What both reports share for their plots: matplotlib on Agg, user text kept plain, figures as base64 PNG."""
from __future__ import annotations

import base64
import html
import io
import struct
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend (no display needed); imported on first use only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plain(text: object) -> str:
    """User text (a model or pipeline name) for a matplotlib label, shown as typed.

    Matplotlib reads text between two ``$`` as mathtext, so a name like ``$\\frac{a}{$``
    would fail to draw; an escaped ``\\$`` is drawn as a literal dollar sign.
    """
    return str(text).replace("$", r"\$")


def fix_date_ticks(ax: Any) -> None:
    """The x axis's date ticks and their labels, as matplotlib places them for the axes' data now, fixed: its date
    locator would place them again (the same) at every layout step and draw. Call it when every artist is on the
    axes. Nothing for an x axis of numbers."""
    from matplotlib.dates import AutoDateLocator
    from matplotlib.ticker import FixedFormatter, FixedLocator

    locator = ax.xaxis.get_major_locator()
    if not isinstance(locator, AutoDateLocator):
        return
    locs = locator()  # of the view limits from the data
    labels = ax.xaxis.get_major_formatter().format_ticks(locs)
    ax.xaxis.set_major_locator(FixedLocator(locs))
    ax.xaxis.set_major_formatter(FixedFormatter(labels))


MIN_FONT_PX = 10.0
"""Smallest text in a report plot, in CSS pixels at a 1400 px wide window (tests/test_report_browser.py)."""
_FACTS = ("min-font-px", "legends-over-axes")
"""What :func:`figure_png` measures on a figure and stores in the PNG's text chunks; :func:`img_tag` shows them
as ``data-`` attributes, so a browser test can check the text size as displayed."""


def layout_facts(fig: Any, dpi: float, *, drawn: bool = False) -> dict[str, float]:
    """The figure's smallest drawn text in image pixels at ``dpi``, and how many legends overlap their axes
    (a legend over the axes hides data). ``drawn``: the figure was just drawn (saved), so its layout is known
    and it is not drawn again."""
    from matplotlib.text import Text

    if not drawn:
        fig.canvas.draw()
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    over = 0
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is not None and legend.get_visible():
            over += bool(legend.get_window_extent().overlaps(ax.get_window_extent()))
    return {"min-font-px": round(min(sizes) * dpi / 72.0, 2) if sizes else 0.0, "legends-over-axes": float(over)}


def figure_png(fig: Any, *, dpi: int, tight: bool = False) -> str:
    """The figure as a base64 PNG string with a 256-colour palette (a third of the bytes of RGBA); the figure is closed.

    ``tight``: cropped to the drawn artists plus ``savefig.pad_inches``, the image of
    ``savefig(bbox_inches="tight")``; the box is measured without matplotlib's extra layout draw, so the figure
    is drawn once. Line plots use a handful of colours plus their anti-aliasing shades, so the palette
    is not visible; the report page stays small. :func:`layout_facts` go into the PNG's text chunks.
    """
    import matplotlib
    from PIL import Image  # matplotlib's own dependency
    from PIL.PngImagePlugin import PngInfo

    buf = io.BytesIO()
    try:
        box = None
        if tight:
            fig.set_dpi(dpi)  # the box is measured with text sized at the saving resolution
            box = fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])
        # uncompressed: it is decoded right away, and only the quantized copy below is kept
        fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 0}, bbox_inches=box)
        facts = layout_facts(fig, dpi, drawn=True)  # saving drew it: a second draw would double the time
    finally:
        pyplot().close(fig)
    buf.seek(0)
    info = PngInfo()
    for key, value in facts.items():
        info.add_text(f"ctcalc:{key}", f"{value:g}")
    small = io.BytesIO()
    # method 1 (maximum coverage) keeps the white background exactly white; fast octree (2) shifts it to 254.
    # zlib's default level: optimize=True (level 9 and filter trials) saves only about 5 % of the bytes
    Image.open(buf).convert("RGB").quantize(colors=256, method=1).save(small, format="PNG", compress_level=6,
                                                                       pnginfo=info)
    return base64.b64encode(small.getvalue()).decode("ascii")


def png_facts(png_base64: str) -> dict[str, str]:
    """The :func:`layout_facts` a PNG of :func:`figure_png` carries ({} for another PNG)."""
    from PIL import Image

    text = Image.open(io.BytesIO(base64.b64decode(png_base64))).text  # type: ignore[attr-defined]
    return {k: text[f"ctcalc:{k}"] for k in _FACTS if f"ctcalc:{k}" in text}


def png_size(png_base64: str) -> tuple[int, int]:
    """(width, height) in pixels from the PNG header, for width/height attributes that keep the layout stable."""
    head = base64.b64decode(png_base64[:44])  # 33 bytes: signature, IHDR length and type, width, height
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError("Expected a base64 PNG, got other data.")
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def img_tag(png_base64: str, alt: str) -> str:
    """An ``<img>`` with the PNG inline, its pixel size (the page does not move while images decode) and its layout
    facts as ``data-`` attributes."""
    w, h = png_size(png_base64)
    data = "".join(f" data-{k}='{html.escape(v)}'" for k, v in png_facts(png_base64).items())
    return f"<img alt='{html.escape(alt)}' width='{w}' height='{h}'{data} src='data:image/png;base64,{png_base64}'>"
