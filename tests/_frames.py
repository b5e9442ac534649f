"""Comparing two tables' rows in tests (two engines, two layouts, two sessions)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


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
