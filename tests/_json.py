"""Comparing JSON documents that two read paths produced from the same tables."""
from __future__ import annotations

import math
from typing import Any


def json_differences(a: Any, b: Any, *, rtol: float = 1e-12, path: str = "") -> list[str]:  # noqa: ANN401
    """Where ``a`` and ``b`` differ: structure, text and integers exactly; floats to ``rtol`` relative (and
    ``rtol``·1e-3 absolute, for values at or near 0), since the two paths may add the same numbers in another
    order. Empty when they agree."""
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return [f"{path or '.'}: keys {sorted(set(a) ^ set(b))} in one only"]
        return [d for k in sorted(a) for d in json_differences(a[k], b[k], rtol=rtol, path=f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items against {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in json_differences(x, y, rtol=rtol, path=f"{path}[{i}]")]
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        same = math.isclose(a, b, rel_tol=rtol, abs_tol=rtol * 1e-3) or (math.isnan(a) and math.isnan(b))
        return [] if same else [f"{path}: {a!r} against {b!r}"]
    return [] if a == b and type(a) is type(b) else [f"{path}: {a!r} against {b!r}"]
