"""A day in ctcalc is a ``YYYY-MM-DD`` string (``--ds``, partition values, SQL text): its one parser. Standard library
only, so the config and the DAG helpers can use it without loading numpy."""
from __future__ import annotations

import datetime as dt


def parse_day(text: object) -> dt.date | None:
    """The date of a YYYY-MM-DD day; None for anything else. Python also parses forms such as 20261121 and
    2026-W47-1; they are refused, not read as that day."""
    try:
        day = dt.date.fromisoformat(text)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return day if day.isoformat() == text else None
