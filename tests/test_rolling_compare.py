"""Comparing pipelines under rolling (previous-window) calibration: windows, per-window and period Acc, CLI, report."""
from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from ctcalc_spark.core._math import softplus
from ctcalc_spark.core.metrics import probs_to_logits
from ctcalc_spark.core.rolling_compare import comparison_windows, compare_rolling, days_needed, run_table
from ctcalc_spark.core.solvers import solve_logit_shift
from ctcalc_spark.core.summary import BinarySummary
from ctcalc_spark.core.windows import WindowSpec
from ctcalc_spark.demo import generate_scored_rows
from ctcalc_spark.errors import EXIT_CONFIG, EXIT_INPUT, InputError


def _brute_acc(a, b) -> float:
    return float(np.mean([1.0 if x < y else 0.5 if x == y else 0.0 for x, y in itertools.product(a, b)]))


def _summaries(raw: pd.DataFrame) -> pd.DataFrame:
    """Summary-table rows per (ds, model, run) by the pure path (one split: windows merge splits anyway)."""
    out = []
    for (ds, model, run), g in raw.groupby(["date", "model", "run"]):
        cols = BinarySummary.from_probs(g["label"], g["score"]).to_columns()
        out.append(pd.DataFrame(cols).assign(ds=ds, model=model, run=str(run), split="remain", bin_width=0.05))
    return pd.concat(out, ignore_index=True)


def _direct(raw: pd.DataFrame, days_per_window: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per (window index, model, run) vanilla / rolling-calibrated loss sums, straight from the rows (exact c*)."""
    raw = raw.assign(z=probs_to_logits(raw["score"].to_numpy())[0],
                     w=(pd.to_datetime(raw["date"]) - pd.to_datetime(raw["date"].min())).dt.days // days_per_window)
    recs = []
    for (model, run), g in raw.groupby(["model", "run"]):
        for w in range(1, int(g["w"].max()) + 1):
            prev, cur = g[g["w"] == w - 1], g[g["w"] == w]
            c = solve_logit_shift(prev["label"], prev["z"])
            z, y = cur["z"].to_numpy(), cur["label"].to_numpy()
            recs.append({"w": w, "model": model, "run": str(run), "W": float(len(z)),
                         "V": float(np.sum(softplus(z) - y * z)), "C": float(np.sum(softplus(z - c) - y * (z - c)))})
    per = pd.DataFrame(recs)
    period = per.groupby(["model", "run"]).sum(numeric_only=True).reset_index()
    return per, period.assign(vanilla=period["V"] / period["W"], calibrated=period["C"] / period["W"])


@pytest.fixture(scope="module")
def drifting():
    """The example of docs/your-own-data.md: 2 pipelines x 5 runs x 90 days x 48 rows, 2026-01-01..2026-03-31."""
    raw = generate_scored_rows()
    return raw, _summaries(raw)


def test_windows_of_a_period():
    days = WindowSpec("day")
    assert [w.label for w in comparison_windows("2026-01-05", "2026-01-07", days)] == \
        ["2026-01-05", "2026-01-06", "2026-01-07"]
    weeks = comparison_windows("2026-01-07", "2026-01-20", WindowSpec("week"))  # Wednesday .. Tuesday
    assert [(w.label, w.start) for w in weeks] == [("2026-W02", "2026-01-05"), ("2026-W03", "2026-01-12"),
                                                    ("2026-W04", "2026-01-19")]
    tiles = comparison_windows("2026-01-05", "2026-01-20", WindowSpec("rolling", 7))  # disjoint, ending at --ds-to
    assert [(w.start, w.end) for w in tiles] == [("2025-12-31", "2026-01-06"), ("2026-01-07", "2026-01-13"),
                                                  ("2026-01-14", "2026-01-20")]
    needed = days_needed(tiles, WindowSpec("rolling", 7), "2026-01-20")
    assert needed[0] == "2025-12-24" and needed[-1] == "2026-01-20" and len(needed) == 28


def test_candidate_with_a_drifting_bias_loses_vanilla_and_wins_rolling_calibrated_like_numpy(drifting):
    raw, summaries = drifting
    spec = WindowSpec("day")
    windows = comparison_windows("2026-01-01", "2026-03-31", spec)
    table = run_table(summaries, "binary", windows, spec, first_ds="2026-01-01", end="2026-03-31")
    rc = compare_rolling(table, "binary", "candidate", "baseline", spec=spec, start="2026-01-01", end="2026-03-31",
                         n_boot=300)
    per, period = _direct(raw, 1)
    # the first day has no previous window: left out of the period, every other day is in it
    assert rc.left_out["window"].tolist() == ["2026-01-01"] and "first_window" in rc.left_out["reason"].iloc[0]
    assert len(rc.period_windows) == 89
    got = rc.period_runs.merge(period, on=["model", "run"], suffixes=("", "_np"))
    assert len(got) == 10
    np.testing.assert_allclose(got["vanilla"], got["vanilla_np"], rtol=1e-12)
    np.testing.assert_allclose(got["calibrated"], got["calibrated_np"], atol=2e-6)  # histogram bound: ~1e-6
    np.testing.assert_allclose(got["weight"], got["W"], rtol=1e-12)
    cand, base = period[period["model"] == "candidate"], period[period["model"] == "baseline"]
    # the known answer: the better-ranking candidate loses every run pair over the period under the vanilla
    # metric (its bias drifts) and wins every one once yesterday's bias is removed
    assert rc.period.vanilla.acc == _brute_acc(cand["vanilla"], base["vanilla"]) == 0.0
    assert rc.period.calibrated.acc == _brute_acc(cand["calibrated"], base["calibrated"]) == 1.0
    assert rc.period.calibrated.acc_ci == (1.0, 1.0) and rc.period.vanilla.acc_ci == (0.0, 0.0)
    # per window: Acc from the same runs' window values, as numpy computes them
    by_w = {r.window: r for r in rc.windows}
    for w in (1, 30, 60, 89):
        d = per[per["w"] == w]
        label = (pd.Timestamp("2026-01-01") + pd.Timedelta(days=w)).date().isoformat()
        comp = by_w[label].comparison
        c_np, b_np = d[d["model"] == "candidate"], d[d["model"] == "baseline"]
        assert comp.vanilla.acc == _brute_acc(c_np["V"] / c_np["W"], b_np["V"] / b_np["W"])
        assert comp.calibrated.acc == _brute_acc(c_np["C"] / c_np["W"], b_np["C"] / b_np["W"])
    assert by_w["2026-01-01"].comparison is None and "first_window" in by_w["2026-01-01"].note
    # a day-by-day reading disagrees with the period: the vanilla metric ranks the candidate ahead on many days
    ahead = sum(r.comparison.vanilla.acc > 0.5 for r in rc.windows if r.comparison is not None)
    assert 20 <= ahead <= 70, ahead


def test_period_value_is_summed_window_sums_not_an_average_of_window_values(drifting):
    raw, summaries = drifting
    spec = WindowSpec("rolling", 5)  # 90 days = 18 disjoint 5-day windows; the first has no previous one
    windows = comparison_windows("2026-01-01", "2026-03-31", spec)
    table = run_table(summaries, "binary", windows, spec, first_ds="2026-01-01", end="2026-03-31")
    rc = compare_rolling(table, "binary", "candidate", "baseline", spec=spec, start="2026-01-01", end="2026-03-31",
                         n_boot=300)
    _, period = _direct(raw, 5)
    got = rc.period_runs.merge(period, on=["model", "run"], suffixes=("", "_np"))
    assert len(got) == 10 and (got["windows"] == 17).all()
    np.testing.assert_allclose(got["calibrated"], got["calibrated_np"], atol=2e-6)
    # unequal window weights: run 0 loses 3 of the 5 days of its last window
    cut = summaries[~(summaries["ds"].isin(["2026-03-29", "2026-03-30", "2026-03-31"]) & (summaries["run"] == "0"))]
    t2 = run_table(cut, "binary", windows, spec, first_ds="2026-01-01", end="2026-03-31")
    r2 = compare_rolling(t2, "binary", "candidate", "baseline", spec=spec, start="2026-01-01", end="2026-03-31",
                         n_boot=300)
    w0 = r2.runs[(r2.runs["run"] == "0") & (r2.runs["model"] == "candidate") & r2.runs["calibrated"].notna()]
    assert sorted(w0["n_rows"])[:2] == [96, 240] and len(w0) == 17
    value = float(r2.period_runs.query("model == 'candidate' and run == '0'")["calibrated"].iloc[0])
    assert value == pytest.approx(w0["calibrated_sum"].sum() / w0["weight"].sum(), rel=1e-12)
    assert abs(value - w0["calibrated"].mean()) > 1e-4  # the average of window values is another number


def test_no_window_with_every_run_calibrated_is_an_error_that_says_why(drifting):
    _, summaries = drifting
    spec = WindowSpec("week")
    one_week = summaries[summaries["ds"] <= "2026-01-04"]  # 2026-W01 (a Thursday to Sunday of data)
    windows = comparison_windows("2026-01-01", "2026-01-04", spec)
    table = run_table(one_week, "binary", windows, spec, first_ds="2026-01-01", end="2026-01-04")
    with pytest.raises(InputError, match="0 of 5 runs of 'candidate'.*first_window.*has no previous window"):
        compare_rolling(table, "binary", "candidate", "baseline", spec=spec, start="2026-01-01", end="2026-01-04",
                        n_boot=200)
    with pytest.raises(InputError, match="models present"):
        compare_rolling(table, "binary", "nope", "baseline", spec=spec, start="2026-01-01", end="2026-01-04")


def test_rolling_cli_notes_say_why_windows_lack_a_value_and_that_daily_windows_are_small(drifting):
    from ctcalc_spark.cli.cmd_rolling import window_notes
    from ctcalc_spark.core.windows import rolling_metrics

    _, summaries = drifting
    spec = WindowSpec("day")
    table = rolling_metrics(summaries, "binary", comparison_windows("2026-01-01", "2026-01-10", spec), spec,
                            first_ds="2026-01-01", until="2026-01-10")
    notes = window_notes(table, "binary")
    assert notes[0] == ("10 of 100 rolling rows (model x run x window) (10.0%) have no calibrated value: "
                        "first_window 10.")
    assert notes[1].startswith("hint: previous windows had a median of 48 rows, so the bias fitted on them is "
                               "within about ±0.58 logit (95 %) at best; about 1,607 rows give ±0.1 at this base rate")
    assert "a longer window (rolling.window: rolling, rolling.days: 34) fits it better" in notes[1]
    # with slices the table has more rows than the line counts: it says which it counts (it said 100 of a
    # table of 500 rows without a word)
    sliced = pd.concat([table, table.assign(slice_name="country", slice_value="DE")], ignore_index=True)
    assert window_notes(sliced, "binary")[0] == (
        "10 of 100 whole-data rolling rows (model x run x window; the 100 slice rows not counted) (10.0%) have no "
        "calibrated value: first_window 10.")


def test_cli_from_a_csv_with_a_header_to_a_rolling_comparison(spark, tmp_path, capsys, restore_ctcalc_logger):
    """The path of docs/your-own-data.md: CSV of scored rows -> evaluate a range -> compare --rolling."""
    import yaml

    from ctcalc_spark.cli.main import main
    from ctcalc_spark.demo import write_scored_csv

    raw = write_scored_csv(tmp_path / "scored.csv", n_days=21)
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({
        "input": {"path": str(tmp_path / "scored.csv"), "format": "csv",
                  "options": {"header": "true", "inferSchema": "true"}},
        "columns": {"ds": "date", "label": "label", "logit": None, "prediction": "score", "example_id": "row_id"},
        "output": {"path": str(tmp_path / "out")}, "split": {"salt": "own"},
        "spark": {"master": "local[2]", "shuffle_partitions": 4}}))  # the session fixture's: main() reuses it
    assert main(["evaluate", "--config", str(conf), "--ds", "2026-01-01..2026-01-21"]) == 0
    out, _ = capsys.readouterr()
    assert "metrics rows" in out and "hint: val-bias parts had a median of " in out and "split.min_bias_rows" in out
    assert main(["compare", "--config", str(conf), "--a", "candidate", "--b", "baseline", "--rolling",
                 "--ds-from", "2026-01-01", "--ds-to", "2026-01-21", "--window", "day",
                 "--bootstrap", "300"]) == 0
    out, err = capsys.readouterr()
    assert "21 windows (2026-01-01..2026-01-21, days up to 2026-01-21), 20 in the period sums" in out
    # --ds START..END, as evaluate names the period, is the same comparison (it was refused: "--ds must be a date")
    assert main(["compare", "--config", str(conf), "--a", "candidate", "--b", "baseline", "--rolling",
                 "--ds", "2026-01-01..2026-01-21", "--window", "day", "--bootstrap", "300"]) == 0
    assert capsys.readouterr().out == out
    assert "Per window:" in out and "rolling_calibrated_log_loss: candidate ahead (Acc > 50%) in" in out
    assert "Period value per run = Σ over the 20 of 21 day windows" in out and "WARNING" not in err
    folder = tmp_path / "out" / "compare" / "candidate_vs_baseline" / "rolling_day"
    page = (folder / "report.html").read_text()
    assert "Rolling calibration: bias from the previous window" in page and page.count("data:image/png") == 2
    windows = pd.read_csv(folder / "windows.csv")
    assert len(windows) == 21 and windows["in_period"].sum() == 20 and windows["vanilla_acc"].notna().sum() == 20
    payload = json.loads((folder / "comparison.json").read_text())
    got = pd.DataFrame(payload["rolling"]["period_runs"]).assign(run=lambda f: f["run"].astype(str))
    _, period = _direct(raw, 1)
    both = got.merge(period, on=["model", "run"], suffixes=("", "_np"))
    assert len(both) == 10
    np.testing.assert_allclose(both["vanilla"], both["vanilla_np"], rtol=1e-11)
    np.testing.assert_allclose(both["calibrated"], both["calibrated_np"], atol=2e-6)
    acc = payload["comparisons"][0]["calibrated"]["acc"]
    cand, base = period[period["model"] == "candidate"], period[period["model"] == "baseline"]
    assert acc == _brute_acc(cand["calibrated"], base["calibrated"])

    # A model name that is not there is named with the models that are (the message listed only the other model of
    # the pair, the one the read had kept); a model compared with itself is a config error, not a report.
    common = ["--config", str(conf), "--bootstrap", "100"]
    for days, table in ((["--ds", "2026-01-05"], "metrics"), (["--ds-from", "2026-01-05", "--ds-to", "2026-01-07"],
                                                             "summaries"),
                        (["--ds", "2026-01-05..2026-01-07"], "summaries"),
                        (["--ds-from", "2026-01-05", "--ds-to", "2026-01-07", "--rolling", "--window", "day"],
                         "summaries")):
        assert main(["compare", *common, "--a", "candidate", "--b", "basline", *days]) == EXIT_INPUT
        err = capsys.readouterr().err
        assert f"error: No rows of model(s) ['basline'] in the {table} table on 2026-01-0" in err
        assert err.rstrip().endswith("the models there: ['baseline', 'candidate'].")
        assert main(["compare", *common, "--a", "baseline", "--b", "baseline", *days]) == EXIT_CONFIG
        assert "error: --a and --b both name 'baseline': a comparison needs two different pipelines" in \
            capsys.readouterr().err


def test_regression_rolling_comparison_is_exact():
    """MSE with a mean shift: window sums are exact, so the period values equal numpy to rounding."""
    from ctcalc_spark.core.summary import RegressionSummary

    rng = np.random.default_rng(4)
    days = [(pd.Timestamp("2026-05-01") + pd.Timedelta(days=i)).date().isoformat() for i in range(12)]
    rows, raw = [], []
    for i, ds in enumerate(days):
        y = rng.normal(0.3 * i, 1.0, 200)  # the level drifts; "a" tracks it with a lag, "b" not at all
        for model, run in itertools.product(("a", "b"), range(3)):
            p = y + rng.normal(0, 0.5, 200) + (0.3 * (i - 1) if model == "a" else 0.0) - 0.3 * i + 0.1 * run
            s = RegressionSummary.from_rows(y, p)
            rows.append({"ds": ds, "model": model, "run": str(run), "split": "remain", "count": s.count,
                         "weight": s.weight, "wr": s.wr, "wr2": s.wr2, "wp": s.wp, "wy": s.wy})
            raw.append((i, model, str(run), y, p))
    spec = WindowSpec("day")
    table = run_table(pd.DataFrame(rows), "regression", comparison_windows(days[0], days[-1], spec), spec,
                      first_ds=days[0], end=days[-1])
    rc = compare_rolling(table, "regression", "a", "b", spec=spec, start=days[0], end=days[-1], n_boot=200)
    assert rc.calibrated_metric == "rolling_calibrated_mse" and len(rc.period_windows) == 11
    for (model, run), grp in itertools.groupby(sorted(raw, key=lambda r: (r[1], r[2], r[0])), key=lambda r: r[1:3]):
        grp = list(grp)
        v = c = w = 0.0
        for (_, _, _, y_prev, p_prev), (_, _, _, y, p) in zip(grp[:-1], grp[1:]):
            shift = float(np.mean(y_prev - p_prev))
            v, c, w = v + np.sum((y - p) ** 2), c + np.sum((y - p - shift) ** 2), w + y.size
        got = rc.period_runs.query("model == @model and run == @run").iloc[0]
        assert got["vanilla"] == pytest.approx(v / w, rel=1e-12)
        assert got["calibrated"] == pytest.approx(c / w, rel=1e-12)


def test_rolling_comparison_of_pipelines_that_differ_only_by_a_bias_says_so(tmp_path, capsys):
    """Two pipelines whose logits differ by a constant 0.4 (run r of one is run r of the other, shifted), under a
    drifting base rate (tests/_rows.py), week windows: the vanilla log loss ranks the unshifted one ahead in
    every run pair, the previous week's bias removes the shift and the two tie. The CLI's first line after the
    title and the report's first block say that the difference is the bias and that the calibrated metric decides."""
    import yaml

    from ctcalc_spark.cli.main import main
    from tests._rows import binary_drift_summaries, day_range
    from tests.test_report import _store

    days = day_range("2026-01-05", 84)  # 12 ISO weeks, Monday to Sunday
    rows = binary_drift_summaries(days, models=("fresh", "shifted"), runs=6, n=150, seed_std=0.05,
                                  shifts={"shifted": 0.4}, shared_runs=True, seed=2)
    out = tmp_path / "out"
    _store(out, rows)
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "output": {"path": str(out)}, "histogram": {"bin_width": 0.1}}))
    assert main(["compare", "--config", str(conf), "--bootstrap", "300", "--rolling",
                 "--window", "week", "--a", "shifted", "--b", "fresh", "--ds", f"{days[0]}..{days[-1]}"]) == 0
    lines = capsys.readouterr().out.splitlines()
    verdict = next(line for line in lines if line.startswith("Verdict: "))
    assert lines.index(verdict) < lines.index("Whole period:") + 3  # before the tables
    assert verdict.startswith("Verdict: The difference is the bias (calibration): fresh ranks ahead of shifted under "
                              "log_loss (Acc of shifted 0.0%), but once each run's bias is removed the two tie under "
                              "rolling_calibrated_log_loss")
    assert "rolling_calibrated_log_loss decides: it does not tell them apart, so fresh is only better calibrated" \
        in verdict
    payload = json.loads((out / "compare" / "shifted_vs_fresh" / "rolling_week" / "comparison.json").read_text())
    c = payload["comparisons"][0]
    assert c["vanilla"]["acc_ci"] == [0.0, 0.0] and c["calibrated"]["acc_ci"][0] < 0.5 < c["calibrated"]["acc_ci"][1]
    page = (out / "compare" / "shifted_vs_fresh" / "rolling_week" / "report.html").read_text()
    body = page.split("</h1>", 1)[1]
    assert body.lstrip().startswith("<section class='verdict'><p class='verdict'><b>The difference is the bias")
