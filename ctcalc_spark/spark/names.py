"""Column references by exact name: a name with a dot or a backtick is one top-level column, never a path."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from pyspark.sql import Column


def quoted(name: str) -> str:
    """``name`` as a Spark identifier: in backticks, a backtick inside doubled (``a.b`` -> ```a.b```)."""
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal: in single quotes, backslashes and quotes inside escaped."""
    return "'" + str(text).replace("\\", "\\\\").replace("'", "\\'") + "'"


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


def excel_sep_line(present: Sequence[str], sep: str = ",") -> str | None:
    """The delimiter that Excel's ``sep=;`` first line names, when a CSV's header came out as that line (columns
    ``sep=;``, or ``sep=`` and ``_c1`` where it names the reader's own ``sep``); None for any other header."""
    m = next((m for m in (re.fullmatch(r"\s*sep=(.?)\s*", h, re.IGNORECASE) for h in present) if m), None)
    return None if m is None else (m.group(1) or sep)


def sep_line_fix(delimiter: str, sep: str, option: str) -> str:
    """The error's sentence for a CSV whose first line is Excel's ``sep=`` line (:func:`excel_sep_line`):
    ``option`` is how the delimiter is given (``"input.options: {sep: ';'}"``) when it is not ``sep``."""
    return (f"The files' first line is 'sep={delimiter}', the line Excel writes (and reads) to name a CSV's "
            "delimiter, not the header: it was taken for the header and the header for a row. Remove that line "
            "from the files (e.g. sed -i 1d FILE, or export them without it)"
            + ("." if delimiter == sep else f", and give the delimiter: {option}."))
