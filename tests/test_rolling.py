"""Rolling (previous-window) calibration: windows, window sums, drift, degenerate windows, exact in-scan sums, late data."""
from __future__ import annotations

import datetime as dt
import re
import time

import numpy as np
import pandas as pd
import pytest

from ctcalc_spark.core._math import sigmoid
from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.core.solvers import solve_logit_shift, solve_mean_shift
from ctcalc_spark.core.summary import BinarySummary, RegressionSummary, bias_error_bound
from ctcalc_spark.core.windows import (
    WindowSpec,
    finalize_rolling,
    finalize_windows,
    merge_windows,
    parts_within,
    previous_window,
    rolling_metrics,
    window_of,
    windows_between,
)
from ctcalc_spark.errors import InputError

from tests._rows import (
    binary_stream,
    binary_summary_rows,
    day_range,
    regression_drift_stream,
    regression_summary_rows,
    write_eval,
)


# ---- windows --------------------------------------------------------------------------------------

def test_window_assignment_calendar_and_rolling():
    assert window_of("2026-11-21", WindowSpec("day")).label == "2026-11-21"
    wk = window_of("2026-11-21", WindowSpec("week"))  # a Saturday
    assert (wk.start, wk.end, wk.label) == ("2026-11-16", "2026-11-22", "2026-W47")
    assert previous_window(wk, WindowSpec("week")).start == "2026-11-09"
    mo = window_of("2026-02-10", WindowSpec("month"))
    assert (mo.start, mo.end, mo.label) == ("2026-02-01", "2026-02-28", "2026-02")
    assert previous_window(mo, WindowSpec("month")).label == "2026-01"
    rw = window_of("2026-11-21", WindowSpec("rolling", 7))
    assert (rw.start, rw.end) == ("2026-11-15", "2026-11-21")
    prw = previous_window(rw, WindowSpec("rolling", 7))
    assert (prw.start, prw.end) == ("2026-11-08", "2026-11-14")  # disjoint from the current window
    assert len(windows_between("2026-11-01", "2026-11-30", WindowSpec("week"))) == 6
    assert len(windows_between("2026-11-01", "2026-11-30", WindowSpec("rolling", 3))) == 30


def test_parts_within_cut_runs_of_days_less_than_the_span_apart():
    days = day_range("2026-01-01", 70)
    parts = parts_within(days, str, span_days=32)
    assert [len(p) for p in parts] == [32, 32, 6] and sum(parts, []) == days
    weeks = windows_between("2026-01-01", "2026-03-31", WindowSpec("week"))
    parts = parts_within(weeks, lambda w: w.start, span_days=32)
    assert all(dt.date.fromisoformat(p[-1].start) - dt.date.fromisoformat(p[0].start) < dt.timedelta(days=32)
               for p in parts) and sum(parts, []) == weeks and len(parts) == 3
    assert parts_within(["2026-01-01T06:00:00", "2026-02-02T00:00:00"], str) == [["2026-01-01T06:00:00"],
                                                                               ["2026-02-02T00:00:00"]]
    assert parts_within([], str) == []


# ---- exact agreement of window sums with a direct computation --------------------------------------

def test_window_sum_equals_direct_summary_binary():
    days = day_range("2026-11-16", 10)
    raw = binary_stream(days)
    rows = binary_summary_rows(raw)
    spec = WindowSpec("week")
    wk = window_of("2026-11-18", spec)
    merged = merge_windows(rows, "binary", [wk])
    got = merged[merged["run"] == "0"].sort_values(["label", "bin"])
    direct_rows = raw[(raw["run"] == "0") & raw["ds"].between(wk.start, wk.end)]
    want = BinarySummary.from_logits(direct_rows["label"], direct_rows["logit"]).to_columns()  # label-major order
    np.testing.assert_array_equal(got["bin"].to_numpy(), want["bin"])
    np.testing.assert_array_equal(got["label"].to_numpy(), want["label"])
    np.testing.assert_array_equal(got["count"].to_numpy(), want["count"])
    for f in ("weight", "m1", "m2", "wmiss", "wloss"):
        np.testing.assert_allclose(got[f].to_numpy(), want[f], rtol=1e-12, atol=1e-12)
    assert int(got["n_days"].iloc[0]) == 7


def test_window_sums_do_not_depend_on_the_other_windows_merged():
    """A range job merges hundreds of windows in one call, a per-day job a few: the same window must come
    out with the same bits either way (sums in ds order, not in the order of the call's other windows)."""
    days = day_range("2026-10-26", 40)
    rows = binary_summary_rows(binary_stream(days, n=150))
    for spec in (WindowSpec("week"), WindowSpec("month"), WindowSpec("rolling", 5)):
        wins = sorted({window_of(d, spec) for d in days} | {previous_window(window_of(d, spec), spec) for d in days})
        together = merge_windows(rows, "binary", wins)
        for w in wins[::3]:
            alone = merge_windows(rows, "binary", [w])
            part = together[together["window"] == w.label].reset_index(drop=True)
            if alone.empty:
                assert part.empty
                continue
            pd.testing.assert_frame_equal(part, alone, check_exact=True, check_dtype=False)


def test_window_group_pairs_are_only_the_pairs_with_rows_when_groups_are_sparse():
    """The candidate (window, group) pairs of merge_windows: every pair when groups have rows on most days, only
    the pairs whose window holds a row of the group when that is far fewer (one day per group here)."""
    from ctcalc_spark.core.windows import _window_group_pairs

    span, n_groups = 30, 10
    first_day, last_day = np.arange(0, 28), np.arange(2, 30)  # 28 windows of 3 days
    n_windows = len(first_day)
    one_day = (np.arange(n_groups) * 3) % span  # group g has rows on one day only
    win, grp = _window_group_pairs(first_day, last_day, np.arange(n_groups) * span + one_day, span, n_groups)
    want = sorted((w, g) for g in range(n_groups) for w in range(n_windows)
                  if first_day[w] <= one_day[g] <= last_day[w])
    assert list(zip(win.tolist(), grp.tolist())) == want and 0 < len(want) < n_windows * n_groups
    # Groups 0..8 have rows on every day, group 9 none: the dense path gives every pair, group 9's included,
    # which the sparse path would leave out (so this tells which path ran).
    every_day = (np.arange(n_groups - 1)[:, None] * span + np.arange(span)[None, :]).ravel()
    win, grp = _window_group_pairs(first_day, last_day, every_day, span, n_groups)
    assert len(win) == n_windows * n_groups and (grp == n_groups - 1).sum() == n_windows
    assert list(zip(win.tolist(), grp.tolist())) == [(w, g) for w in range(n_windows) for g in range(n_groups)]


def test_window_sums_with_sparse_groups_equal_a_direct_sum():
    """Many rolling windows and slice values seen on one day each: merge_windows takes its sparse path (only
    the (window, group) pairs that have rows) and must equal summing each window's rows directly."""
    days = day_range("2026-09-01", 30)
    raw = binary_stream(days, runs=1, n=60)
    raw["campaign"] = "c" + raw["ds"].str[-2:]  # one value per day
    parts = []
    for (ds, model, run, split, campaign), g in raw.groupby(["ds", "model", "run", "split", "campaign"]):
        cols = BinarySummary.from_logits(g["label"], g["logit"]).to_columns()
        parts.append(pd.DataFrame(cols).assign(ds=ds, model=model, run=run, campaign=campaign, split=split))
    rows = pd.concat(parts, ignore_index=True)
    spec = WindowSpec("rolling", 3)
    wins = [window_of(d, spec) for d in days[2:]]
    got = merge_windows(rows, "binary", wins)
    fields = ["count", "clipped", "weight", "m1", "m2", "wmiss", "wloss"]
    want = []
    for w in wins:
        sel = rows[rows["ds"].isin(w.days())]
        summed = sel.groupby(["model", "run", "campaign", "bin", "label"])[fields].sum().reset_index()
        want.append(summed.assign(window=w.label, n_days=1))  # each campaign lives on one day
    want = pd.concat(want).sort_values(["window", "model", "run", "campaign", "bin", "label"])
    n_groups = got.groupby(["model", "run", "campaign", "bin", "label"]).ngroups
    assert len(got) == len(want) and len(got) < len(wins) * n_groups  # sparse: most (window, group) pairs empty
    np.testing.assert_array_equal(got["window"], want["window"])
    np.testing.assert_array_equal(got["campaign"], want["campaign"])
    np.testing.assert_array_equal(got["n_days"], want["n_days"])
    for f in fields:
        np.testing.assert_allclose(got[f].to_numpy(float), want[f].to_numpy(float), rtol=1e-15, atol=0)


def test_a_window_passed_twice_counts_its_days_once():
    days = day_range("2026-11-16", 7)
    rows = binary_summary_rows(binary_stream(days, n=100))
    wk = window_of(days[0], WindowSpec("week"))
    once, twice = merge_windows(rows, "binary", [wk]), merge_windows(rows, "binary", [wk, wk])
    pd.testing.assert_frame_equal(once, twice, check_exact=True)
    assert int(once["n_days"].max()) == 7


def test_window_rows_in_any_order_finalise_to_the_same_bits():
    """merge_windows output (sorted, one row per bin and label) is finalised without a re-sum; the same rows
    shuffled or with a slice column take the groupby path. All must give the same rolling rows."""
    days = day_range("2026-11-02", 21)
    raw = binary_stream(days, n=200)
    raw["country"] = np.where(np.arange(len(raw)) % 3 == 0, "de", "fr")
    spec = WindowSpec("week")
    wins = sorted({window_of(d, spec) for d in days})
    pairs = [(w, previous_window(w, spec)) for w in wins]
    kw = {"first": {wins[0].label}, "days": {w.label: (w.n_days, pw.n_days) for w, pw in pairs}}
    rows = binary_summary_rows(raw.drop(columns="country"))
    merged = merge_windows(rows, "binary", wins + [previous_window(wins[0], spec)])
    direct = finalize_windows(merged, "binary", pairs, spec, **kw)
    shuffled = finalize_windows(merged.sample(frac=1.0, random_state=3), "binary", pairs, spec, **kw)
    pd.testing.assert_frame_equal(direct, shuffled, check_exact=False, rtol=1e-15, atol=0)
    sliced = []
    for (ds, model, run, split, country), g in raw.groupby(["ds", "model", "run", "split", "country"]):
        cols = BinarySummary.from_logits(g["label"], g["logit"]).to_columns()
        sliced.append(pd.DataFrame(cols).assign(ds=ds, model=model, run=run, split=split, country=country,
                                                bin_width=0.05))
    by_slice = finalize_windows(merge_windows(pd.concat(sliced, ignore_index=True), "binary", wins), "binary",
                                pairs, spec, slices=["country"], **kw)
    overall = by_slice[by_slice["slice_name"] == ALL].reset_index(drop=True)
    assert len(overall) == len(direct) > 0
    np.testing.assert_array_equal(overall["n_rows"], direct["n_rows"])
    np.testing.assert_allclose(overall["vanilla"].astype(float), direct["vanilla"].astype(float), rtol=1e-12)



def test_a_null_slice_value_finalises_like_a_named_one():
    """A null slice value in the merged rows (the fast path's key runs cannot tell nulls apart) is re-summed by
    the groupby path: its rows equal those of the same rows under a named value."""
    days = day_range("2026-11-02", 14)
    raw = binary_stream(days, n=200)
    raw["country"] = np.where(np.arange(len(raw)) % 3 == 0, "de", "fr")
    sliced = []
    for (ds, model, run, split, country), g in raw.groupby(["ds", "model", "run", "split", "country"]):
        cols = BinarySummary.from_logits(g["label"], g["logit"]).to_columns()
        sliced.append(pd.DataFrame(cols).assign(ds=ds, model=model, run=run, split=split, country=country,
                                                bin_width=0.05))
    named = pd.concat(sliced, ignore_index=True)
    null = named.assign(country=named["country"].astype(object).where(named["country"] != "de", None))
    spec = WindowSpec("week")
    wins = sorted({window_of(d, spec) for d in days})
    pairs = [(w, previous_window(w, spec)) for w in wins]
    kw = {"slices": ["country"], "first": {wins[0].label},
          "days": {w.label: (w.n_days, pw.n_days) for w, pw in pairs}}
    out = [finalize_windows(merge_windows(rows, "binary", wins + [previous_window(wins[0], spec)]), "binary", pairs,
                            spec, **kw) for rows in (named, null)]
    assert (out[1]["slice_value"] == "nan").sum() == (out[0]["slice_value"] == "de").sum() > 0
    renamed = out[1].replace({"slice_value": {"nan": "de"}}).sort_values(
        ["window_start", "model", "run", "slice_name", "slice_value"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(out[0], renamed, check_exact=True)


def test_rolling_calibrated_log_loss_matches_direct_computation_within_bound():
    days = day_range("2026-11-16", 14)
    raw = binary_stream(days)
    spec = WindowSpec("week")
    table = rolling_metrics(binary_summary_rows(raw), "binary", windows_between(days[0], days[-1], spec), spec,
                            first_ds=days[0])
    row = table[(table["window"] == "2026-W48") & (table["run"] == "1")].iloc[0]
    prev = raw[(raw["run"] == "1") & raw["ds"].between("2026-11-16", "2026-11-22")]  # ALL rows, both splits
    cur = raw[(raw["run"] == "1") & raw["ds"].between("2026-11-23", "2026-11-29")]
    c = solve_logit_shift(prev["label"], prev["logit"])
    q = sigmoid(cur["logit"].to_numpy() - c)
    y = cur["label"].to_numpy()
    direct = float(np.mean(-(y * np.log(q) + (1 - y) * np.log1p(-q))))
    assert row["status"] == "ok"
    assert abs(row["prev_bias"] - c) <= bias_error_bound(0.05) + 1e-10
    assert abs(row["calibrated"] - direct) <= row["calibrated_bound"] + 1e-12
    assert row["calibrated_bound"] < 4e-6
    z = cur["logit"].to_numpy()
    assert row["vanilla"] == pytest.approx(float(np.mean(np.logaddexp(0, z) - y * z)), rel=1e-12)
    first = table[table["window"] == "2026-W47"]
    assert (first["status"] == "first_window").all() and first["calibrated"].isna().all()


def test_regression_rolling_exact_and_never_an_average_of_daily_values():
    rng = np.random.default_rng(3)
    days = day_range("2026-01-01", 62)
    frames = []
    for ds in days:
        n = int(rng.integers(5, 60))  # unequal day sizes: a mean of daily MSEs would differ
        p = rng.normal(0, 1, n)
        frames.append(pd.DataFrame({"ds": ds, "model": "m", "run": "0", "split": "remain",
                                    "prediction": p, "label": p + rng.normal(0.3, 1, n)}))
    raw = pd.concat(frames, ignore_index=True)
    spec = WindowSpec("month")
    table = rolling_metrics(regression_summary_rows(raw), "regression", windows_between(days[0], days[-1], spec), spec,
                            first_ds=days[0])
    feb = table[table["window"] == "2026-02"].iloc[0]
    jan_rows, feb_rows = raw[raw["ds"] < "2026-02-01"], raw[raw["ds"].between("2026-02-01", "2026-02-28")]
    c = solve_mean_shift(jan_rows["label"], jan_rows["prediction"])
    r = feb_rows["label"].to_numpy() - feb_rows["prediction"].to_numpy()
    assert feb["calibrated"] == pytest.approx(float(np.mean((r - c) ** 2)), rel=1e-12)
    assert feb["vanilla"] == pytest.approx(float(np.mean(r ** 2)), rel=1e-12)
    assert feb["bias_change"] == pytest.approx(float(np.mean(r)) - c, rel=1e-10)
    daily_mean = feb_rows.assign(r2=r ** 2).groupby("ds")["r2"].mean().mean()
    assert abs(feb["vanilla"] - daily_mean) > 1e-6


# ---- the stock-return setting: drifting level, several seeds -----------------------------------------

def test_rolling_calibrated_mse_spread_across_seeds_below_vanilla():
    seeds = range(8)
    rows = pd.concat([regression_summary_rows(regression_drift_stream(s)) for s in seeds], ignore_index=True)
    spec = WindowSpec("month")
    table = rolling_metrics(rows, "regression", windows_between("2026-01-01", "2026-12-31", spec), spec,
                            first_ds="2026-01-01")
    ok = table[table["status"] == "ok"]
    assert ok["window"].nunique() == 11 and ok["run"].nunique() == 8
    per_month = ok.groupby("window").agg(sv=("vanilla", "std"), sc=("calibrated", "std"))
    assert (per_month["sc"] < per_month["sv"]).mean() >= 0.9
    assert per_month["sc"].median() < 0.5 * per_month["sv"].median()
    # means stay close (the calibrated metric is not a different quantity)
    assert abs(ok["calibrated"].mean() - ok["vanilla"].mean()) < ok["vanilla"].mean()


# ---- degenerate windows -----------------------------------------------------------------------------

def test_degenerate_windows_have_string_statuses_and_no_nan_values():
    z = np.linspace(-2, 2, 50)
    ok_s = BinarySummary.from_logits((np.arange(50) % 3 == 0).astype(float), z)
    no_pos = BinarySummary.from_logits(np.zeros(50), z)
    no_neg = BinarySummary.from_logits(np.ones(50), z)
    cases = {
        "first_window": finalize_rolling(ok_s, None, first_window=True),
        "missing_previous_window": finalize_rolling(ok_s, None),
        "previous_window_no_positives": finalize_rolling(ok_s, no_pos),
        "previous_window_no_negatives": finalize_rolling(ok_s, no_neg),
        "previous_window_empty": finalize_rolling(ok_s, BinarySummary.empty()),
        "empty_window": finalize_rolling(BinarySummary.empty(), ok_s),
    }
    assert cases["previous_window_empty"]["status"] == "missing_previous_window"  # no rows at all = missing
    del cases["previous_window_empty"]
    for status, row in cases.items():
        assert row["status"] == status
        assert row["calibrated"] is None
        for v in row.values():
            assert not (isinstance(v, float) and not np.isfinite(v)), (status, row)
    cur_single = finalize_rolling(no_pos, ok_s)  # current window single-class: calibrated fine, own bias not
    assert cur_single["status"] == "ok" and cur_single["bias"] is None
    assert cur_single["bias_status"] == "bias_single_class_negative" and cur_single["bias_change"] is None
    reg = finalize_rolling(RegressionSummary(3, 3.0, 1.0, 2.0, 0.0, 1.0), RegressionSummary())
    assert reg["status"] == "missing_previous_window"
    zero_w = RegressionSummary(2, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert finalize_rolling(RegressionSummary(3, 3.0, 1.0, 2.0, 0.0, 1.0), zero_w)["status"] == "previous_window_empty"


def test_missing_previous_day_inside_the_table():
    days = day_range("2026-11-16", 5)
    rows = binary_summary_rows(binary_stream(days))
    rows = rows[rows["ds"] != "2026-11-18"]
    spec = WindowSpec("day")
    t = rolling_metrics(rows, "binary", windows_between(days[0], days[-1], spec), spec, first_ds=days[0])
    st = t.groupby("window")["status"].first().to_dict()
    assert st == {"2026-11-16": "first_window", "2026-11-17": "ok", "2026-11-19": "missing_previous_window",
                  "2026-11-20": "ok"}


# ---- windows over 90 days x 100 model/run pairs from stored summaries (each one's time printed, not asserted)

def _synthetic_binary_table(n_pairs: int, days: list[str], n_bins: int = 120) -> pd.DataFrame:
    """Summary-table rows of n_pairs model/run pairs x days x 2 splits x n_bins bins x 2 labels (vectorised)."""
    rng = np.random.default_rng(0)
    n_groups = n_pairs * len(days) * 2
    b = np.tile(np.arange(-80, -80 + n_bins), n_groups)
    w = rng.gamma(2.0, 10.0, b.size)
    p = np.clip(sigmoid((b + 0.5) * 0.05) * rng.uniform(0.8, 1.2, b.size), 0.0, 1.0)
    pair = np.repeat(np.arange(n_pairs), len(days) * 2 * n_bins)
    base = pd.DataFrame({
        "ds": np.tile(np.repeat(np.array(days), 2 * n_bins), n_pairs),
        "model": np.char.add("m", (pair // 10).astype(str)), "run": (pair % 10).astype(str),
        "split": np.tile(np.repeat(np.array(["bias", "remain"]), n_bins), n_pairs * len(days)),
        "bin": b, "clipped": 0, "m1": 0.0, "bin_width": 0.05,
    })
    q = sigmoid((b + 0.5) * 0.05)
    sides = []
    for label, wl, miss in ((0, w * (1 - p), q), (1, w * p, 1 - q)):
        sides.append(base.assign(label=label, count=np.ceil(wl).astype(np.int64), weight=wl, m2=wl * 2e-4,
                                 wmiss=wl * miss, wloss=wl * 0.4))
    return pd.concat(sides, ignore_index=True)


@pytest.mark.slow
def test_recompute_any_window_over_90_days_100_pairs_from_stored_summaries():
    days = day_range("2026-01-01", 90)
    rows = _synthetic_binary_table(100, days)
    cases = [
        ("month 2026-03 (previous 2026-02)", WindowSpec("month"), "2026-03-31"),
        ("rolling 45 days ending 2026-03-31 (previous 45 days)", WindowSpec("rolling", 45), "2026-03-31"),
        ("day 2026-03-31 (the daily job)", WindowSpec("day"), "2026-03-31"),
    ]
    for name, spec, ds in cases:
        t0 = time.perf_counter()
        t = rolling_metrics(rows, "binary", [window_of(ds, spec)], spec, first_ds=days[0])
        elapsed = time.perf_counter() - t0
        print(f"{name}: {len(rows):,} summary rows -> {len(t)} rows in {elapsed:.2f} s")
        assert len(t) == 100 and (t["status"] == "ok").all()  # (about 1-3 s each on an idle 2-core machine)


# ---- Spark: exact in-scan calibrated sums, the job, late data -------------------------------------

def _eval_stream(days: list[str], *, n: int = 300, seed: int = 1, shift: float = 0.0) -> pd.DataFrame:
    raw = binary_stream(days, runs=2, n=n, seed=seed)
    raw["logit"] = raw["logit"] + shift
    raw["example_id"] = np.arange(len(raw)) % (n * len(days))
    return raw.drop(columns=["split"])


def test_known_bias_exact_sum_in_the_same_scan_agrees_with_summary_path(spark, demo_config, tmp_path):
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import compute_rolling, previous_window_bias

    days = day_range("2026-11-18", 3)
    write_eval(_eval_stream(days), tmp_path / "eval", replace=True)
    cfg = demo_config(rolling={"window": "day"})
    plain = {}
    for ds in days[:2]:
        plain[ds] = evaluate(spark, cfg, ds)
    known = previous_window_bias(cfg, days[1])
    assert len(known) == 2
    res = evaluate(spark, cfg, days[1], known_bias=known)
    pd.testing.assert_frame_equal(  # the default outputs are unchanged by the extra sums
        res.summaries.sort_values(list(res.summaries.columns)).reset_index(drop=True),
        plain[days[1]].summaries.sort_values(list(res.summaries.columns)).reset_index(drop=True))
    assert set(res.paths) == {"metrics", "summaries", "calibrated_exact"}
    roll = compute_rolling(cfg, days[1]).table
    whole = roll[roll["slice_name"] == ALL]
    assert whole["calibrated_exact"].notna().all()
    gap = (whole["calibrated"] - whole["calibrated_exact"]).abs()
    assert (gap <= whole["calibrated_bound"]).all(), gap.tolist()


def test_rolling_scan_over_a_range_equals_the_day_by_day_scans(spark, demo_config, tmp_path, capsys):
    """`ctcalc rolling --scan` refused a range ('give one --ds'), so a backfill with exact sums was one CLI call, and
    one Spark start, per day. A range now runs the days in order in one session: the exact sums equal those of the
    day-by-day calls to 1e-12, including days whose previous window was written by the same command."""
    import yaml

    from ctcalc_spark.cli.main import EXIT_CONFIG, main
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import previous_window_bias
    from ctcalc_spark.tables import OutputStore

    days = day_range("2026-11-18", 4)
    write_eval(_eval_stream(days), tmp_path / "eval", replace=True)
    want_cfg = demo_config(rolling={"window": "day"}, output__path=str(tmp_path / "one_by_one"))
    for ds in days:
        evaluate(spark, want_cfg, ds, known_bias=previous_window_bias(want_cfg, ds))
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "input": {"path": str(tmp_path / "eval")},
                                    "output": {"path": str(tmp_path / "range")}, "rolling": {"window": "day"},
                                    "split": {"bias_fraction": 0.1, "salt": "t"}}))
    assert main(["rolling", "--config", str(conf), "--ds", f"{days[0]}..{days[-1]}", "--scan"]) == 0
    out = capsys.readouterr().out
    assert [line.split(" with ")[0] for line in out.splitlines() if line.startswith("evaluate ds=")] == [
        f"evaluate ds={d}" for d in days]
    keys = ["ds", "model", "run"]
    got = OutputStore(demo_config(output__path=str(tmp_path / "range"))).read("calibrated_exact").sort_values(keys)
    want = OutputStore(want_cfg).read("calibrated_exact").sort_values(keys)
    assert sorted(got["ds"].unique()) == days[1:]  # the first day has no previous window
    np.testing.assert_allclose(got["cal_loss"].to_numpy(float), want["cal_loss"].to_numpy(float), rtol=1e-12)
    assert main(["rolling", "--config", str(conf), "--ds", f"{days[1]}..{days[2]}", "--affected"]) == EXIT_CONFIG
    assert "--affected takes the one day whose rows changed (--ds DAY)" in capsys.readouterr().err  # it took days[1]


def test_rolling_job_idempotent_and_late_data_recomputes_like_a_clean_run(spark, demo_config, tmp_path):
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.core.windows import WindowSpec
    from ctcalc_spark.jobs.rolling import affected_days, run_rolling
    from ctcalc_spark.tables import OutputStore

    days = day_range("2026-11-16", 4)
    late, final = _eval_stream(days, seed=5), _eval_stream(days, seed=5)
    late = late[~((late["ds"] == days[1]) & (late["run"] == "1"))]  # run 1 of day 2 arrives late
    cfg = demo_config(rolling={"window": "rolling", "days": 2})
    spec = WindowSpec("rolling", 2)

    def run_all(cfg, frame):
        write_eval(frame, tmp_path / "eval", replace=True)
        for ds in days:
            evaluate(spark, cfg, ds)
        return {ds: run_rolling(spark, cfg, ds) for ds in days}

    first = run_all(cfg, late)
    again = run_rolling(spark, cfg, days[-1])
    pd.testing.assert_frame_equal(first[days[-1]].table, again.table)  # idempotent
    on_disk = OutputStore(cfg).read("rolling", days=[days[-1]], where={"window_spec": ["rolling_2d"]})
    assert len(on_disk) == len(again.table)  # the rerun replaced the day's partition, it did not add to it
    # run 1 lacks day 2 until the late delivery: its window says so instead of a plain 'ok'
    assert dict(zip(on_disk["run"], on_disk["status"])) == {"0": "ok", "1": "incomplete_previous_window"}

    write_eval(final, tmp_path / "eval", replace=True)  # late delivery: rerun the old day, then the affected windows
    evaluate(spark, cfg, days[1])
    todo = affected_days(days[1], spec, OutputStore(cfg).days("summaries"))
    assert todo == days[1:]
    for ds in todo:
        run_rolling(spark, cfg, ds)
    clean_cfg = demo_config(rolling={"window": "rolling", "days": 2}, output={"path": str(tmp_path / "clean")})
    clean = run_all(clean_cfg, final)
    for ds in days:
        got, want = (OutputStore(c).read("rolling", days=[ds]).sort_values(["model", "run"]).reset_index(drop=True)
                     for c in (cfg, clean_cfg))
        pd.testing.assert_frame_equal(got, want)
    assert clean[days[-1]].table["status"].eq("ok").all()


def test_week_and_month_rows_coexist_and_a_range_equals_the_per_day_jobs(spark, demo_config, tmp_path):
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling
    from ctcalc_spark.tables import OutputStore

    days = day_range("2026-10-28", 9)  # crosses a month end and an ISO week boundary
    write_eval(_eval_stream(days, n=300, seed=11), tmp_path / "eval", replace=True)
    range_cfg = demo_config()
    evaluate(spark, range_cfg, f"{days[0]}..{days[-1]}")
    store = OutputStore(range_cfg)
    assert store.days("summaries") == days
    for kind in ("week", "month"):
        run_rolling(spark, demo_config(rolling={"window": kind}), days)
    week = demo_config(rolling={"window": "week"})
    again = run_rolling(spark, week, days[-3:])  # a rerun of one spec's days leaves the other spec alone
    rolled = store.read("rolling")
    assert sorted(rolled["window_spec"].unique()) == ["month", "week"]
    for spec, kind in (("week", "week"), ("month", "month")):
        part = rolled[rolled["window_spec"] == spec]
        assert set(part["window_kind"]) == {kind} and sorted(part["ds"].unique()) == days
    week_rows = store.read("rolling", where={"window_spec": ["week"]}, with_run_id=True)
    assert set(week_rows.loc[week_rows["ds"].isin(days[-3:]), "run_id"]) == {again.run_id}

    per_day_cfg = demo_config(rolling={"window": "week"}, output={"path": str(tmp_path / "per_day")})
    for ds in days:
        evaluate(spark, per_day_cfg, ds)
        run_rolling(spark, per_day_cfg, ds)
    keys = ["ds", "model", "run", "slice_name", "slice_value"]
    got = store.read("rolling", where={"window_spec": ["week"]}).sort_values(keys).reset_index(drop=True)
    want = OutputStore(per_day_cfg).read("rolling").sort_values(keys).reset_index(drop=True)
    assert list(got.columns) == list(want.columns) and len(got) == len(want) > 0
    for col in got.columns:
        if pd.api.types.is_float_dtype(got[col]):
            np.testing.assert_allclose(got[col].to_numpy(float), want[col].to_numpy(float), rtol=1e-12, atol=1e-12,
                                       err_msg=col)
        else:
            assert got[col].tolist() == want[col].tolist(), col
    m_range = store.read("metrics").sort_values(keys).reset_index(drop=True)
    m_days = OutputStore(per_day_cfg).read("metrics").sort_values(keys).reset_index(drop=True)
    for col in m_range.columns:
        if pd.api.types.is_float_dtype(m_range[col]):
            np.testing.assert_allclose(m_range[col].to_numpy(float), m_days[col].to_numpy(float), rtol=1e-12,
                                       atol=1e-12, err_msg=col)
        else:
            assert m_range[col].tolist() == m_days[col].tolist(), col


def test_a_window_with_a_missing_day_gets_its_own_status(spark, demo_config, tmp_path):
    from ctcalc_spark.jobs.evaluate import evaluate
    from ctcalc_spark.jobs.rolling import run_rolling

    days = day_range("2026-11-09", 21)  # three Monday..Sunday weeks
    write_eval(_eval_stream(days, n=200, seed=3), tmp_path / "eval", replace=True)
    cfg = demo_config(rolling={"window": "week"})
    gap = "2026-11-19"  # the Thursday of the second week has no summaries partition
    evaluate(spark, cfg, [d for d in days if d != gap])
    res = run_rolling(spark, cfg, ["2026-11-22", "2026-11-29"])
    whole = res.table[res.table["slice_name"] == ALL].set_index("ds")
    second, third = whole.loc["2026-11-22"], whole.loc["2026-11-29"]
    assert (second["n_days"] == 6).all() and (second["n_days_expected"] == 7).all()
    assert set(second["status"]) == {"incomplete_window"} and second["calibrated"].notna().all()
    assert set(third["status"]) == {"incomplete_previous_window"} and (third["prev_n_days"] == 6).all()
    res2 = run_rolling(spark, demo_config(rolling={"window": "day"}), "2026-11-20")  # the day after the gap
    assert set(res2.table["status"]) == {"missing_previous_window"}
    # asked for the gap and days after the last summaries: the missing days as runs, with the evaluate command
    # for them (it listed the first ten one by one and said `ctcalc evaluate --ds ...`)
    with pytest.raises(InputError, match=re.escape(
            "No summaries partition for ds=2026-11-19, 2026-11-30..2026-12-20 (22 days) under ") + ".*" + re.escape(
            "; run `ctcalc evaluate --ds 2026-11-19,2026-11-30..2026-12-20` for those days first (available: "
            "2026-11-09..2026-11-18, 2026-11-20..2026-11-29), or pass --allow-missing-days to skip such days.")):
        run_rolling(spark, cfg, "2026-11-16..2026-12-20")


def test_binary_windows_finalised_at_once_equal_one_summary_at_a_time(monkeypatch):
    """finalize_windows reads binary groups through padded arrays (core/batch.py: every group's bias solved in one
    lockstep, its loss at 0, at its own c* and at the previous window's c* evaluated at once). The one-summary-at-a-
    time path (a BinarySummary per group, finalize_rolling on it) must give the same rows: statuses, counts and
    None fields equal, floats to 1e-12 relative (summation order; the bias to the Newton step). The data has a
    window with one class only, a run that starts late (missing previous window), weighted and sliced rows."""
    import ctcalc_spark.core.windows as W

    days = day_range("2026-10-26", 35)
    raw = binary_stream(days, runs=3, n=300, seed=4)
    raw = raw[~((raw["run"] == "2") & (raw["ds"] < "2026-11-09"))].copy()  # run 2 starts late
    one_class = (raw["run"] == "1") & raw["ds"].between("2026-11-16", "2026-11-22")
    raw.loc[one_class, "label"] = 1.0
    raw["country"] = np.where(np.arange(len(raw)) % 4 == 0, "de", "fr")
    sliced = []
    for (ds, model, run, split, country), g in raw.groupby(["ds", "model", "run", "split", "country"]):
        w = np.linspace(0.2, 2.0, len(g))
        cols = BinarySummary.from_logits(g["label"], g["logit"], sample_weight=w).to_columns()
        sliced.append(pd.DataFrame(cols).assign(ds=ds, model=model, run=run, split=split, country=country,
                                                bin_width=0.05))
    rows = pd.concat(sliced, ignore_index=True)
    spec = WindowSpec("week")
    wins = sorted({window_of(d, spec) for d in days})
    pairs = [(w, previous_window(w, spec)) for w in wins]
    kw = {"slices": ["country"], "first": {wins[0].label},
          "days": {w.label: (w.n_days, pw.n_days) for w, pw in pairs}}
    merged = merge_windows(rows, "binary", wins + [previous_window(wins[0], spec)])
    batched = finalize_windows(merged, "binary", pairs, spec, **kw)

    def one_at_a_time(merged, by, bin_width, pairs):
        groups = W._group_summaries(merged, "binary", by, bin_width)
        return groups, dict(zip(groups, W._biases_of([s for s, _ in groups.values()])))
    monkeypatch.setattr(W, "_binary_group_views", one_at_a_time)
    reference = finalize_windows(merged, "binary", pairs, spec, **kw)
    assert len(batched) == len(reference) > 30
    assert {"ok", "previous_window_no_negatives", "missing_previous_window", "first_window"} <= set(reference["status"])
    for col in reference.columns:
        a, b = batched[col], reference[col]
        assert (a.isna() == b.isna()).all(), col
        if a.dtype.kind in "fc" or a.dtype == object and a.dropna().map(lambda v: isinstance(v, float)).all():
            x, y = a.dropna().astype(float).to_numpy(), b.dropna().astype(float).to_numpy()
            scale = 1.0 + np.abs(y) if col in ("bias", "prev_bias", "bias_change") else np.abs(y)
            if col in ("calibration_gain", "best_shift_gain"):
                scale = np.abs(reference.loc[b.notna(), "vanilla"].astype(float).to_numpy())
            assert np.all(np.abs(x - y) <= 1e-12 * np.maximum(scale, 1e-300)), col
        else:
            assert a.tolist() == b.tolist(), col
