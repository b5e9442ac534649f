"""Column references by exact name: a name with a dot or a backtick is one top-level column, never a path."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from pyspark.sql import Column


def quoted(name: str) -> str:
    """``name`` as a Spark identifier: in backticks, a backtick inside doubled (``a.b`` -> ```a.b```)."""
    return "`" + name.replace("`", "``") + "`"


def col(name: str) -> Column:
    """The top-level column called exactly ``name`` (``F.col`` would read ``a.b`` as field b of struct a)."""
    from pyspark.sql import functions as F

    return F.col(quoted(name))


def header_slips(present: Sequence[str], missing: Sequence[str]) -> tuple[str | None, dict[str, str]]:
    """The usual reasons a table lacks named columns: (the delimiter, when the table has one column whose name
    holds ';', a tab or '|', i.e. a CSV read with the wrong one; each missing name's present column that differs
    only in letter case or surrounding spaces)."""
    have = list(present)
    sep = next((s for s in (";", "\t", "|") if len(have) == 1 and s in have[0]), None)
    folded = {h.strip().casefold(): h for h in have}
    return sep, {m: folded[m.strip().casefold()] for m in missing if m.strip().casefold() in folded}
