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


def figure_png(fig: Any, *, dpi: int, tight: bool = False) -> str:
    """The figure as a base64 PNG string with a 256-colour palette (a third of the bytes of RGBA); the figure is closed.

    Line plots use a handful of colours plus their anti-aliasing shades, so the palette
    is not visible; the report page stays small.
    """
    from PIL import Image  # matplotlib's own dependency

    buf = io.BytesIO()
    try:
        fig.savefig(buf, format="png", dpi=dpi, **({"bbox_inches": "tight"} if tight else {}))
    finally:
        pyplot().close(fig)
    buf.seek(0)
    small = io.BytesIO()
    # method 1 (maximum coverage) keeps the white background exactly white; fast octree (2) shifts it to 254
    Image.open(buf).convert("RGB").quantize(colors=256, method=1).save(small, format="PNG", optimize=True)
    return base64.b64encode(small.getvalue()).decode("ascii")


def png_size(png_base64: str) -> tuple[int, int]:
    """(width, height) in pixels from the PNG header, for width/height attributes that keep the layout stable."""
    head = base64.b64decode(png_base64[:44])  # 33 bytes: signature, IHDR length and type, width, height
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        raise ValueError("Expected a base64 PNG, got other data.")
    width, height = struct.unpack(">II", head[16:24])
    return int(width), int(height)


def img_tag(png_base64: str, alt: str) -> str:
    """An ``<img>`` with the PNG inline and its pixel size (the page does not move while images decode)."""
    w, h = png_size(png_base64)
    return f"<img alt='{html.escape(alt)}' width='{w}' height='{h}' src='data:image/png;base64,{png_base64}'>"
