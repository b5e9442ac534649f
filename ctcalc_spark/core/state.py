"""The summary state of each task, declared once: its cells, its statistics, their types and how they merge.

A summary is a set of rows (``cells``: a binary summary's logit bin and label; a regression summary has one
row) holding additive statistics. Everything that handles summaries reads this declaration: the scan's Spark
aggregate (each statistic's :attr:`Stat.spark`, applied by ``ctcalc_spark.spark.scan.state_sums``), the pandas merges over days, splits and batches
(:meth:`SummaryState.merge`), the numpy merges of the finalisers and the rolling windows, and the
summaries table's columns and types (:meth:`SummaryState.column_types`, gathered in
``ctcalc_spark.core.finalize.SUMMARY_TYPES``), which the stream's ``stream_summaries`` table extends with its
window and batch. Every output table's Arrow schema comes from such column types through :func:`arrow_schema`.

Multiclass keeps no summaries table: its temperature is fitted on the val-bias rows themselves, not on sums of
them. Its metrics row is still made from one aggregate of per-group sums, declared here (:data:`MULTICLASS`) and
computed by the evaluate job's scan after the temperature is known.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:
    import pyarrow as pa

MERGES = {"sum": np.add}
"""How a statistic of two disjoint row sets combines: the numpy ufunc of each merge name (pandas uses the name)."""


KINDS = ("string", "long", "double", "boolean")
"""The column types of the output tables' declarations (Delta's names for Arrow's string, int64, float64, bool)."""


def arrow_schema(types: Mapping[str, str]) -> pa.Schema:
    """The Arrow schema of columns declared as ``types`` ({name: one of :data:`KINDS`}), in their order."""
    import pyarrow as pa

    arrow = dict(zip(KINDS, (pa.string(), pa.int64(), pa.float64(), pa.bool_())))
    fields = []
    for name, kind in types.items():
        if kind not in arrow:
            raise TypeError(f"unknown column type {kind!r} for {name!r}")
        fields.append(pa.field(name, arrow[kind]))
    return pa.schema(fields)


@dataclass(frozen=True)
class Stat:
    """One column of a summary: its name, its type ('long' or 'double'), how it merges (a :data:`MERGES` name)
    and the Spark aggregate that computes it from per-row terms ('count' counts rows and takes no term)."""

    name: str
    kind: str
    merge: str = "sum"
    spark: str = "sum"

    @property
    def dtype(self) -> type:
        return np.int64 if self.kind == "long" else np.float64


@dataclass(frozen=True)
class SummaryState:
    """The declaration of one task's summary: ``cells`` (keys inside a summary, not merged), ``stats`` (merged
    by their :attr:`Stat.merge`) and ``settings`` (one value per table, e.g. the bin width, not merged)."""

    task: str
    cells: tuple[Stat, ...]
    stats: tuple[Stat, ...]
    settings: tuple[Stat, ...] = ()

    @property
    def cell_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.cells)

    @property
    def names(self) -> tuple[str, ...]:
        """The statistics, in table-column order."""
        return tuple(s.name for s in self.stats)

    @property
    def counts(self) -> tuple[str, ...]:
        """The integer statistics."""
        return tuple(s.name for s in self.stats if s.kind == "long")

    def column_types(self) -> dict[str, str]:
        """Columns of the summaries table after its group keys: the split, the cells, the stats, the settings."""
        return {"split": "string", **{s.name: s.kind for s in (*self.cells, *self.stats, *self.settings)}}

    def arrow_schema(self, keys: Sequence[str] = ()) -> pa.Schema:
        """The summaries table's Arrow schema: the group ``keys`` (text), then :meth:`column_types`."""
        return arrow_schema({**{k: "string" for k in keys}, **self.column_types()})

    def merge(self, frame: Any, by: Sequence[str]) -> Any:
        """Rows of ``frame`` merged per (``by``, cells), sorted that way: each statistic by its merge."""
        keys = [*by, *self.cell_names]
        return frame.groupby(keys, dropna=False, sort=True).agg({s.name: s.merge for s in self.stats}).reset_index()

    def reduceat(self, columns: Mapping[str, np.ndarray], starts: np.ndarray) -> dict[str, np.ndarray]:
        """Each statistic of ``columns`` merged over the runs of rows that begin at ``starts`` (numpy)."""
        return {s.name: MERGES[s.merge].reduceat(np.asarray(columns[s.name], s.dtype), starts) for s in self.stats}


BINARY = SummaryState(
    "binary",
    cells=(Stat("bin", "long"), Stat("label", "long")),
    stats=(Stat("count", "long", spark="count"), Stat("clipped", "long"), Stat("weight", "double"),
           Stat("m1", "double"), Stat("m2", "double"), Stat("wmiss", "double"), Stat("wloss", "double")),
    settings=(Stat("bin_width", "double"),),
)
"""Per (logit bin, label): rows, clipped rows, Σw, Σw·d, Σw·d² (d = z - bin centre), the exact Σw·σ(t) and
Σw·softplus(t) (t the row's margin against its label); see :mod:`ctcalc_spark.core.summary`."""

REGRESSION = SummaryState(
    "regression",
    cells=(),
    stats=(Stat("count", "long", spark="count"), Stat("weight", "double"), Stat("wr", "double"),
           Stat("wr2", "double"), Stat("wp", "double"), Stat("wy", "double")),
)
"""Rows, Σw, Σw·r, Σw·r², Σw·p, Σw·y with r = y - p."""

MULTICLASS = SummaryState(
    "multiclass",
    cells=(),
    stats=(Stat("n_rows", "long"), Stat("n_bias", "long"), Stat("n_remain", "long"), Stat("n_invalid", "long"),
           Stat("weight", "double"), Stat("ce_sum", "double"), Stat("w_remain", "double"),
           Stat("ce_remain", "double"), Stat("cce_remain", "double"), Stat("w_hit", "double"),
           Stat("n_prob_like", "long"), Stat("n_label_clipped", "long"), Stat("ce_label_clipped", "double")),
)
"""Per (day, model, run, slice view): valid rows (all, val-bias, val-remain), invalid rows, and over valid rows Σw,
Σw·CE, the val-remain Σw, Σw·CE and Σw·CE at the fitted temperature, Σw·(arg max = label); with logits given the
rows that look like probabilities, with probabilities given the rows whose label's class was clipped and their
Σw·CE."""

STATES: dict[str, SummaryState] = {s.task: s for s in (BINARY, REGRESSION)}
"""The tasks that keep summaries."""
