"""Column references by exact name: a name with a dot or a backtick is one top-level column, never a path."""
from __future__ import annotations

from typing import TYPE_CHECKING

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
