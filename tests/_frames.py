"""Tables in tests: comparing two tables' rows (two engines, two layouts, two sessions), writing output tables,
reading a Delta table as ctcalc reads one (``tables._read_delta``: through delta-rs's own engine; a table read
through deltalake's Python file system, ``DeltaTable.to_pandas()``, can abort the test process at exit)."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import pyarrow as pa


def assert_same_rows(got: pd.DataFrame, want: pd.DataFrame, keys: Sequence[str], *, rtol: float = 1e-12) -> None:
    """The same rows, matched by ``keys``, and at least one: floats to ``rtol`` (relative and absolute; a null
    matches only a null), everything else (integers too) exactly, as text. ``run_id`` (which run wrote a row) is
    not compared, nor are columns that only ``got`` has."""
    want = want.drop(columns="run_id", errors="ignore").sort_values(list(keys)).reset_index(drop=True)
    got = got.sort_values(list(keys)).reset_index(drop=True)[list(want.columns)]
    assert len(got) == len(want) > 0, (len(got), len(want))
    for col in want.columns:
        if pd.api.types.is_float_dtype(got[col]) or pd.api.types.is_float_dtype(want[col]):  # integers: exactly
            a, b = (pd.to_numeric(f[col]).to_numpy(float) for f in (got, want))
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, err_msg=col)
        else:
            assert got[col].astype(str).tolist() == want[col].astype(str).tolist(), col


def delta_schema(frame: pd.DataFrame) -> pa.Schema:
    """The Arrow schema of a frame's columns (ctcalc_spark.core.state.arrow_schema of their types), from their
    dtypes."""
    from ctcalc_spark.core.state import arrow_schema

    def kind(dtype) -> str:
        if pd.api.types.is_bool_dtype(dtype):
            return "boolean"
        if pd.api.types.is_integer_dtype(dtype):
            return "long"
        if pd.api.types.is_float_dtype(dtype):
            return "double"
        return "string"

    return arrow_schema({name: kind(dtype) for name, dtype in frame.dtypes.items()})


def write_outputs(root, frames: dict[str, pd.DataFrame], job: str = "evaluate") -> str:
    """Write output tables under ``root`` as a job run does: one transaction (one run id), each table's partitions
    that its frame holds replaced by one Delta commit. Returns the run id."""
    from ctcalc_spark.config import OutputConfig
    from ctcalc_spark.tables import OutputStore

    tx = OutputStore(OutputConfig(path=str(root))).transaction(job)
    tx.write_all([(table, frame, delta_schema(frame)) for table, frame in frames.items()])
    return tx.run_id


def read_delta_table(path: str | Path, columns: Sequence[str] | None = None, *,
                     storage_options: dict[str, str] | None = None, **where: str) -> pd.DataFrame:
    """``columns`` (default: all) of the Delta table at ``path`` whose columns equal ``where``'s values, as pandas."""
    from deltalake import DeltaTable

    from ctcalc_spark.tables import _read_delta

    table = DeltaTable(str(path), storage_options=storage_options)
    columns = [f.name for f in table.schema().fields] if columns is None else columns
    return _read_delta(table, columns, {k: [v] for k, v in where.items()})
