"""The drift report: self-contained HTML with every section and embedded images, plus the same numbers as CSV/JSON."""
from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ctcalc_spark.config import config_from_dict
from ctcalc_spark.reports.drift import SECTIONS, write_report
from tests.test_rolling import _binary_rows, _binary_stream, _days, _regression_rows, drift_stream


def _store(root, rows: pd.DataFrame) -> None:
    for ds, g in rows.groupby("ds"):
        part = root / "summaries" / f"ds={ds}"
        part.mkdir(parents=True)
        pq.write_table(pa.Table.from_pandas(g.drop(columns="ds"), preserve_index=False), part / "part-0.parquet")


def _cfg(tmp_path, task: str, **rolling):
    extra = {"columns": {"prediction": "prediction", "logit": None}} if task == "regression" else {}
    return config_from_dict({"task": task, "input": {"path": str(tmp_path / "eval")},
                             "output": {"path": str(tmp_path / "out")}, "rolling": rolling, **extra})


def test_binary_report_has_every_section_embedded_images_and_matching_csv_json(tmp_path):
    days = _days("2026-11-16", 8)
    raw = _binary_stream(days, runs=3, n=300, seed=2)
    raw.loc[raw["ds"] == "2026-11-20", "logit"] += 0.8  # a bias jump to flag
    _store(tmp_path / "out", _binary_rows(raw))
    cfg = _cfg(tmp_path, "binary", window="day", bias_threshold=0.3)
    rep = write_report(cfg, days[1], days[-1])
    page = open(rep.paths["html"], encoding="utf-8").read()
    for sid in ("flags", "spread", "model-m", "table"):
        assert f"id='{sid}'" in page
    for sec in SECTIONS:
        assert f"data-section='{sec}'" in page
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == len(SECTIONS)
    assert all(len(i) > 1000 for i in images)
    assert not re.search(r"(src|href)=['\"]https?://", page)  # opens offline
    flagged = set(rep.flags["window"])
    assert {"2026-11-20", "2026-11-21"} <= flagged and "2026-11-18" not in flagged
    assert "2026-11-20" in page.split("id='spread'")[0]  # in the table at the top
    csv = pd.read_csv(rep.paths["csv"])
    data = json.load(open(rep.paths["json"]))
    assert len(csv) == len(data["rows"]) == len(rep.table)
    np.testing.assert_allclose(csv["calibrated"].to_numpy(float),
                               [np.nan if r["calibrated"] is None else r["calibrated"] for r in data["rows"]], rtol=1e-12)
    assert set(csv["status"]) <= {"ok", "first_window"}  # strings, never NaN
    assert len(data["flags"]) == len(rep.flags)


def test_regression_report_with_rolling_windows(tmp_path):
    rows = pd.concat([_regression_rows(drift_stream(s, months=3, per_day=10)) for s in range(3)])
    _store(tmp_path / "out", rows)
    cfg = _cfg(tmp_path, "regression", window="rolling", days=14)
    rep = write_report(cfg, "2026-02-01", "2026-03-31", out_dir=str(tmp_path / "rep"))
    page = open(rep.paths["html"], encoding="utf-8").read()
    assert page.count("data:image/png;base64,") == len(SECTIONS)
    ok = rep.table[rep.table["status"] == "ok"]
    assert ok["window"].nunique() == 59 and ok["run"].nunique() == 3


def test_report_of_first_windows_only(tmp_path):
    """Day 1 of a backfill: every window is a first window, every bias_change is None; no crash, no flag."""
    days = _days("2026-11-16", 1)
    _store(tmp_path / "out", _binary_rows(_binary_stream(days, runs=2, n=300, seed=3)))
    rep = write_report(_cfg(tmp_path, "binary", window="day", bias_threshold=0.1), days[0], days[0])
    assert rep.flags.empty
    assert set(rep.table["status"]) == {"first_window"}
    assert "data-section" in open(rep.paths["html"], encoding="utf-8").read()
