"""The drift report: answer first (summary, plots, capped flags), the flag rule, hostile names, redaction, CLI."""
from __future__ import annotations

import base64
import dataclasses
import html
import io
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from PIL import Image

from ctcalc_spark.cli.main import main
from ctcalc_spark.config import config_from_dict
from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.errors import EXIT_INPUT, EXIT_USAGE, ConfigError
from ctcalc_spark.reports.drift import (
    NOISE_Z,
    SECTIONS,
    FlagRule,
    ReportInput,
    build_report,
    write_report,
    write_report_files,
)
from tests._frames import write_outputs
from tests._rows import binary_stream, binary_summary_rows, day_range, regression_drift_stream, regression_summary_rows


def _store(root, rows: pd.DataFrame) -> None:
    write_outputs(root, {"summaries": rows})


def _cfg(tmp_path, task: str, *, extra: dict | None = None, **rolling):
    cols = {"columns": {"prediction": "prediction", "logit": None}} if task == "regression" else {}
    return config_from_dict({"task": task, "input": {"path": str(tmp_path / "eval")},
                             "output": {"path": str(tmp_path / "out")}, "rolling": rolling, **cols, **(extra or {})})


def _section_order(page: str) -> list[str]:
    return re.findall(r"<section id='([^']+)'", page)


@pytest.fixture(scope="module")
def three_year_reports(three_years_of_drift, three_year_report):
    """The 3-year weekly report under the default rule and under the old absolute limit 0.1."""
    days, inp, cfg = three_years_of_drift
    return cfg, three_year_report[1], build_report(inp, cfg, days[7], days[-1], rule=FlagRule(None, 0.1))


def test_binary_report_leads_with_summary_then_plots_then_flags(tmp_path):
    days = day_range("2026-11-16", 8)
    raw = binary_stream(days, runs=3, n=300, seed=2)
    raw.loc[raw["ds"] == "2026-11-20", "logit"] += 0.8  # a bias jump to flag, undone the next day
    _store(tmp_path / "out", binary_summary_rows(raw))
    rep = write_report(_cfg(tmp_path, "binary", window="day"), days[1], days[-1])
    page = open(rep.paths["html"], encoding="utf-8").read()
    assert _section_order(page) == ["summary", "overview", "model-m", "flags", "within-noise", "missing", "method"]
    for sec in SECTIONS:
        assert f"data-section='{sec}'" in page
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", page)
    assert len(images) == 1 + len(SECTIONS) and all(len(i) > 1000 for i in images)
    assert re.findall(r"width='\d+' height='\d+' [^>]*src='data:image/png", page)  # sized: no layout shift
    assert not re.search(r"(src|href)=['\"]https?://", page)  # opens offline
    # default rule: the runs' offsets 0, 0.2, 0.4 give a seed spread of 0.2, limit 0.4; the jump is 0.8
    assert rep.rule == FlagRule(2.0, 0.1)
    assert set(rep.flags["window"]) == {"2026-11-20", "2026-11-21"}
    assert sorted(np.sign(rep.flags["move"])) == [-1, 1] and (rep.flags["move"].abs() > 0.5).all()
    assert rep.flags["basis"].eq("2 x seed spread").all()
    summary = html.unescape(page.split("<section id='overview'")[0])
    assert "Bias moved beyond its limit and the labels' sampling noise in 2 of 7 model-windows" in summary
    assert "m: 2 windows" in summary
    csv = pd.read_csv(rep.paths["csv"])
    data = json.load(open(rep.paths["json"]))
    assert len(csv) == len(data["rows"]) == len(rep.table)
    from_json = [np.nan if r["calibrated"] is None else r["calibrated"] for r in data["rows"]]
    np.testing.assert_allclose(csv["calibrated"].to_numpy(float), from_json, rtol=1e-12)
    assert set(csv["status"]) <= {"ok", "first_window"}  # strings, never NaN
    assert len(data["flags"]) == len(pd.read_csv(rep.paths["flags_csv"])) == 2
    assert data["rule"]["spread_k"] == 2.0 and "seed spread" in data["rule"]["description"]


def test_moves_and_seed_spread_match_a_direct_computation(three_year_reports):
    _, rep, _ = three_year_reports
    w = rep.table[(rep.table["slice_name"] == ALL) & (rep.table["status"] == "ok")]
    bias = w.pivot(index="window", columns=["model", "run"], values="bias").astype(float)
    prev = w.pivot(index="window", columns=["model", "run"], values="prev_bias").astype(float)
    for model in ("ctr_a", "ctr_b"):
        spread = float(np.median(bias[model].std(axis=1, ddof=1)))
        assert spread == pytest.approx(0.25, rel=0.05)  # the generator's seed offsets have std 0.25
        mine = rep.moves[rep.moves["model"] == model].set_index("window")
        assert mine["seed_spread"].iloc[0] == pytest.approx(spread, rel=1e-12)
        move = (bias[model] - prev[model]).mean(axis=1)
        np.testing.assert_allclose(mine["move"].to_numpy(), move.loc[mine.index].to_numpy(), rtol=1e-9)
        np.testing.assert_allclose(mine["limit"], 2.0 * spread, rtol=1e-12)


def test_default_rule_flags_the_jumps_where_the_absolute_one_flags_a_quarter_of_the_windows(three_year_reports):
    _, rel, ab = three_year_reports
    assert len(rel.moves) == len(ab.moves) == 310
    assert list(zip(rel.flags["model"], rel.flags["window"])) == [("ctr_b", "2024-W10"), ("ctr_a", "2025-W02")]
    # the weekly drift of the population level alone moves c* by more than 0.1 in 84 windows; the flags are the
    # moves beyond the labels' sampling noise as well, the rest is listed apart
    beyond = ab.moves["move"].abs() > 0.1
    assert int(beyond.sum()) == 84 and len(ab.flags) + int(ab.moves["within_noise"].sum()) == 84
    assert {("ctr_b", "2024-W10"), ("ctr_a", "2025-W02")} <= set(zip(ab.flags["model"], ab.flags["window"]))
    assert (ab.flags["move"].abs() > ab.flags["label_noise"]).all() and len(ab.flags) < 10
    assert (ab.flags["basis"] == "absolute").all()
    top = ab.flags["move"].abs().to_numpy()
    assert (np.diff(top) <= 0).all()  # largest first
    s = rel.summary.set_index("model")
    assert s.loc["ctr_b", "largest_move_window"] == "2024-W10" and s.loc["ctr_b", "flagged"] == 1


def test_page_caps_the_flag_table_and_the_files_keep_every_flag(three_year_reports, tmp_path):
    cfg, _, ab = three_year_reports
    rep = write_report_files(dataclasses.replace(ab, top=2), cfg, tmp_path)
    page = open(rep.paths["html"], encoding="utf-8").read()
    flags = page.split("<section id='flags'>")[1].split("</section>")[0]
    assert flags.count("<tr>") == 1 + 2  # header + top 2
    assert f"2 of {len(rep.flags)}" in flags
    quiet = page.split("<section id='within-noise'>")[1].split("</section>")[0]
    n_quiet = int(rep.moves["within_noise"].sum())
    assert quiet.count("<tr>") == 1 + 2 and f"(not flagged): 2 of {n_quiet}" in quiet
    assert len(pd.read_csv(rep.paths["flags_csv"])) == len(rep.flags) > 2
    assert len(json.load(open(rep.paths["json"]))["flags"]) == len(rep.flags)
    size = len(page.encode("utf-8"))
    print(f"\ndrift report page, 1,550 weekly model-run windows, {len(rep.flags)} flagged: {size / 1e3:.0f} kB")
    assert size < 400_000  # palette PNGs, capped tables; the old page carried every window as a table row


def test_report_of_first_windows_only(tmp_path):
    """Day 1 of a backfill: every window is a first window, every bias_change is None; no crash, no flag."""
    days = day_range("2026-11-16", 1)
    _store(tmp_path / "out", binary_summary_rows(binary_stream(days, runs=2, n=300, seed=3)))
    rep = write_report(_cfg(tmp_path, "binary", window="day"), days[0], days[0])
    assert rep.flags.empty and rep.moves.empty
    assert set(rep.table["status"]) == {"first_window"}
    page = open(rep.paths["html"], encoding="utf-8").read()
    assert "data-section" in page and "No bias move to check: no window has a previous window" in page


def test_days_without_summaries_in_the_period_are_named(tmp_path):
    """A report over 2026-11-16..24 with summaries for 11-16..18 and 11-21 only printed '4 windows' and nothing of
    the 5 days it had no rows for; now a warning (stderr, the page, the JSON) names them as stretches."""
    days = day_range("2026-11-16", 9)
    kept = [days[0], days[1], days[2], days[5]]
    _store(tmp_path / "out", binary_summary_rows(binary_stream(kept, runs=2, n=300, seed=4)))
    rep = write_report(_cfg(tmp_path, "binary", window="day"), days[0], days[-1])
    want = ("WARNING: no daily summaries for 5 of the 9 days 2026-11-16..2026-11-24 (2026-11-19..2026-11-20, "
            "2026-11-22..2026-11-24) under ")
    assert [w for w in rep.warnings if w.startswith(want)], rep.warnings
    assert want in html.unescape(open(rep.paths["html"], encoding="utf-8").read())
    assert any(w.startswith(want) for w in json.load(open(rep.paths["json"], encoding="utf-8"))["warnings"])
    full = write_report(_cfg(tmp_path, "binary", window="day"), days[0], days[2])
    assert not any("no daily summaries" in w for w in full.warnings)


def test_reports_of_one_period_with_other_windows_sit_side_by_side(tmp_path):
    """The files were named drift_<start>_<end>.*: a week report of a period replaced its day report."""
    days = day_range("2026-11-16", 8)
    _store(tmp_path / "out", binary_summary_rows(binary_stream(days, runs=2, n=300, seed=5)))
    day = write_report(_cfg(tmp_path, "binary", window="day"), days[1], days[-1])
    week = write_report(_cfg(tmp_path, "binary", window="week"), days[1], days[-1])
    rolling = write_report(_cfg(tmp_path, "binary", window="rolling", days=3), days[1], days[-1])
    names = [Path(r.paths["html"]).name for r in (day, week, rolling)]
    assert names == ["drift_2026-11-17_2026-11-23_day.html", "drift_2026-11-17_2026-11-23_week.html",
                     "drift_2026-11-17_2026-11-23_rolling_3d.html"]
    assert all(Path(r.paths[k]).is_file() for r in (day, week, rolling) for k in r.paths)


def test_regression_report_with_rolling_windows_and_an_absolute_threshold(tmp_path):
    rows = pd.concat([regression_summary_rows(regression_drift_stream(s, months=3, per_day=10)) for s in range(3)])
    _store(tmp_path / "out", rows)
    cfg = _cfg(tmp_path, "regression", window="rolling", days=14)
    rep = write_report(cfg, "2026-02-01", "2026-03-31", out_dir=str(tmp_path / "rep"), threshold=0.05)
    page = open(rep.paths["html"], encoding="utf-8").read()
    assert page.count("data:image/png;base64,") == 1 + len(SECTIONS)
    ok = rep.table[rep.table["status"] == "ok"]
    assert ok["window"].nunique() == 59 and ok["run"].nunique() == 3
    assert rep.rule == FlagRule(None, 0.05) and "|Δc̄| &gt; 0.05, a fixed limit" in page
    moves = rep.moves
    beyond = (moves["move"].abs() > 0.05) & (moves["move"].abs() > moves["label_noise"])
    assert (moves["flagged"] == beyond).all() and moves["label_noise"].notna().all()
    assert (moves["within_noise"] == ((moves["move"].abs() > 0.05) & ~beyond)).all() and moves["within_noise"].any()


def test_single_run_model_falls_back_to_the_config_threshold(tmp_path):
    days = day_range("2026-11-16", 6)
    raw = binary_stream(days, runs=1, n=300, seed=4)
    raw.loc[raw["ds"] >= "2026-11-19", "logit"] += 0.8
    _store(tmp_path / "out", binary_summary_rows(raw))
    rep = write_report(_cfg(tmp_path, "binary", window="day", bias_threshold=0.3), days[1], days[-1])
    assert rep.moves["seed_spread"].isna().all() and (rep.moves["basis"] == "absolute").all()
    assert list(rep.flags["window"]) == ["2026-11-19"]


def test_hostile_model_names_draw_as_text_and_are_escaped(tmp_path):
    days = day_range("2026-11-16", 4)
    raw = binary_stream(days, runs=2, n=300, seed=5)
    hostile = ["$\\frac{a}{$", "<script>alert(1)</script>'\""]
    raw = pd.concat([raw.assign(model=hostile[0]), raw.assign(model=hostile[1])], ignore_index=True)
    _store(tmp_path / "out", binary_summary_rows(raw))
    rep = write_report(_cfg(tmp_path, "binary", window="day"), days[1], days[-1], threshold=0.0)
    page = open(rep.paths["html"], encoding="utf-8").read()
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "$\\frac{a}{$" in page  # plain text in HTML (no mathtext there)
    assert page.count("data:image/png;base64,") == 1 + 2 * len(SECTIONS)
    assert set(rep.moves["model"]) == set(hostile)


def test_echoed_config_is_redacted(tmp_path):
    days = day_range("2026-11-16", 3)
    _store(tmp_path / "out", binary_summary_rows(binary_stream(days, runs=2, n=300, seed=6)))
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required username='u' password='hunter2';"
    cfg = _cfg(tmp_path, "binary", window="day", extra={"spark": {
        "remote": "sc://connect:15002/;token=tok3n", "conf": {"spark.hadoop.fs.s3a.secret.key": "aws5ecret"}},
        "stream": {
        "source": "kafka", "kafka_bootstrap_servers": "broker:9092", "kafka_topic": "scores",
        "kafka_options": {"kafka.sasl.jaas.config": jaas, "kafka.ssl.key.password": "s3cret",
                          "kafka.security.protocol": "SASL_SSL"}}})
    rep = write_report(cfg, days[1], days[-1])
    for path in rep.paths.values():
        text = open(path, encoding="utf-8").read()
        assert not {"hunter2", "s3cret", "tok3n", "aws5ecret"} & set(re.findall(r"\w+", text)), path
    config = json.load(open(rep.paths["json"]))["config"]
    assert config["spark"]["remote"] == "sc://connect:15002/;token=***"
    assert config["spark"]["conf"] == {"spark.hadoop.fs.s3a.secret.key": "***"}
    opts = config["stream"]["kafka_options"]
    assert opts == {"kafka.sasl.jaas.config": "***", "kafka.ssl.key.password": "***",
                    "kafka.security.protocol": "SASL_SSL"}


def test_rule_options_are_validated():
    cfg = config_from_dict({"input": {"path": "x"}, "rolling": {"bias_threshold": 0.2}})
    assert FlagRule.from_options(cfg) == FlagRule(2.0, 0.2)
    assert FlagRule.from_options(cfg, spread_k=3) == FlagRule(3.0, 0.2)
    assert FlagRule.from_options(cfg, threshold=0.05) == FlagRule(None, 0.05)
    with pytest.raises(ConfigError, match="not both"):
        FlagRule.from_options(cfg, threshold=0.05, spread_k=2)
    with pytest.raises(ConfigError, match="positive --spread-k"):
        FlagRule(0.0, 0.1)
    with pytest.raises(ConfigError, match="threshold >= 0"):
        FlagRule(None, float("nan"))


def test_cli_report_with_threshold_and_top(tmp_path, capsys):
    days = day_range("2026-11-16", 5)
    _store(tmp_path / "out", binary_summary_rows(binary_stream(days, runs=2, n=300, seed=7)))
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"task": "binary", "input": {"path": str(tmp_path / "eval")},
                                    "output": {"path": str(tmp_path / "out")}, "rolling": {"window": "day"}}))
    assert main(["report", "--config", str(conf), "--start", days[1], "--end", days[-1], "--threshold", "0",
                 "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert ("4 windows x 1 models, 1 of 4 model-windows flagged by the rule |Δc̄| > 0, a fixed limit, and beyond "
            "the labels' sampling noise of c* (99 %)") in out
    assert "flags_csv:" in out
    page = (tmp_path / "out" / "reports" / f"drift_{days[1]}_{days[-1]}_day.html").read_text()
    assert "Largest flagged bias moves: 1 of 1" in page
    # --ds START..END, evaluate's way of naming the period, writes the same report; no period at all is named
    assert main(["report", "--config", str(conf), "--ds", f"{days[1]}..{days[-1]}", "--threshold", "0",
                 "--top", "2"]) == 0
    assert capsys.readouterr().out == out
    assert main(["report", "--config", str(conf), "--threshold", "0"]) == EXIT_USAGE
    assert capsys.readouterr().err == ("ctcalc report: error: Give the period: --start DAY --end DAY (inclusive), "
                                       "or --ds START..END.\n")
    with pytest.raises(SystemExit):
        main(["report", "--config", str(conf), "--start", days[1], "--end", days[-1], "--threshold", "0",
              "--spread-k", "2"])
    assert "not allowed with argument" in capsys.readouterr().err
    # a period without summaries: the job's own error (pyarrow's reader used to fail on an empty day list: an
    # ArrowTypeError reported as an internal error, exit 70)
    assert main(["report", "--config", str(conf), "--start", "2030-01-01", "--end", "2030-01-31"]) == EXIT_INPUT
    assert (f"error: No summaries between 2030-01-01 and 2030-01-31 under '{tmp_path / 'out' / 'summaries'}' "
            f"(available: {days[0]}..{days[-1]})") in capsys.readouterr().err


def test_many_models_get_distinct_lines_and_every_legend_outside_the_plot():
    """Twelve models: matplotlib's 10-colour cycle gave two pairs of models one colour, and a legend inside the
    plot covered the lines (the month gap plot's covered its peak): a few entries go below the axes, many beside."""
    from ctcalc_spark.reports.drift import LEGEND_BELOW, _finish_ax, series_styles
    from ctcalc_spark.reports.plotting import figure_png, layout_facts, png_facts, pyplot

    for n in (3, 12, 20, 45):
        styles = [(tuple(s["color"]), str(s["linestyle"])) for s in series_styles(n)]
        assert len(set(styles)) == n
        assert all(a[1] != b[1] for a, b in zip(styles, styles[1:]))  # neighbours differ in dash too
    plt = pyplot()
    for n, beside in ((LEGEND_BELOW, False), (12, True)):
        fig, ax = plt.subplots(figsize=(9.0, 3.0))
        for i, style in enumerate(series_styles(n)):
            ax.plot([0, 1], [i, i + 1], label=f"model {i}", **style)
        _finish_ax(ax, "t", "c*")
        facts = layout_facts(fig, 100)
        legend = ax.get_legend().get_window_extent()
        axes = ax.get_window_extent()
        assert facts["legends-over-axes"] == 0 and facts["min-font-px"] >= 11
        assert bool(legend.x0 >= axes.x1) is beside and bool(legend.y1 <= axes.y0) is not beside, n
        # figure_png takes the facts from the draw that saved it (no second draw): the same facts, drawn once, and
        # tight: the very pixels of savefig(bbox_inches="tight"), which draws twice (a layout pass, then the image)
        for tight in (False, True):
            saved, alone = (fig if not tight else _copy_plot(plt, n)), _copy_plot(plt, n)
            draws = {id(f): 0 for f in (saved, alone)}
            for f in (saved, alone):
                f.canvas.mpl_connect("draw_event", lambda e, f=f: draws.__setitem__(id(f), draws[id(f)] + 1))
            png = figure_png(saved, dpi=100, tight=tight)
            assert png_facts(png) == {k: f"{v:g}" for k, v in facts.items()}
            buf = io.BytesIO()
            alone.savefig(buf, format="png", dpi=100, **({"bbox_inches": "tight"} if tight else {}))
            plt.close(alone)
            assert draws[id(saved)] == 1 and draws[id(alone)] == (2 if tight else 1), (tight, draws)
            ours = np.asarray(Image.open(io.BytesIO(base64.b64decode(png))).convert("RGB"))
            theirs = np.asarray(Image.open(buf).convert("RGB").quantize(colors=256, method=1).convert("RGB"))
            assert ours.shape == theirs.shape and np.array_equal(ours, theirs), (tight, ours.shape, theirs.shape)


def _copy_plot(plt, n):
    from ctcalc_spark.reports.drift import _finish_ax, series_styles

    fig, ax = plt.subplots(figsize=(9.0, 3.0))
    for i, style in enumerate(series_styles(n)):
        ax.plot([0, 1], [i, i + 1], label=f"model {i}", **style)
    _finish_ax(ax, "t", "c*")
    return fig


def _no_drift_report(tmp_path, task: str, *, seed: int, n: int, runs: int):
    """A day-window report over 81 days of rows without drift: fixed scores, fresh labels each day (binary: a
    calibrated model's; regression: the prediction plus noise of std 1.5); the runs' scores differ a little, so
    the seed spread is small. Returns the report and its moves, checked to match their label noise."""
    rng = np.random.default_rng(seed)
    days = day_range("2026-01-01", 81)
    score = rng.normal(-1.0, 1.0, n) if task == "binary" else rng.normal(10.0, 2.0, n)
    name = "logit" if task == "binary" else "prediction"
    frames = []
    for ds in days:
        y = ((rng.random(n) < 1.0 / (1.0 + np.exp(-score))).astype(float) if task == "binary"
             else score + rng.normal(0.0, 1.5, n))
        for r in range(runs):
            frames.append(pd.DataFrame({"ds": ds, "model": "m", "run": str(r), "label": y,
                                        name: score + 0.02 * rng.normal(size=n), "split": "remain"}))
    rows = pd.concat(frames, ignore_index=True)
    _store(tmp_path / "out", binary_summary_rows(rows) if task == "binary" else regression_summary_rows(rows))
    rep = write_report(_cfg(tmp_path, task, window="day"), days[1], days[-1])
    moves = rep.moves
    assert len(moves) == 80 and moves["label_noise"].notna().all()
    predicted_sd = float(moves["label_noise"].median()) / NOISE_Z
    assert 0.8 < float(moves["move"].std()) / predicted_sd < 1.25
    assert (moves["move"].abs() > moves["label_noise"]).mean() < 0.05
    return rep, moves


def test_label_noise_is_the_spread_of_moves_without_drift_and_moves_within_it_are_not_flagged(tmp_path):
    """No drift at all (a calibrated model, fixed logits, fresh labels each day): c* moves only by the labels'
    sampling. The report's label_noise (2.576 · sqrt(1/(W_t ī) + 1/(W_t-1 ī))) must match the moves' spread. The
    runs' seed spread is tiny, so most moves pass 2 × it (306 of 348 such moves on 12 models were flagged as bias
    moves): they are within the noise, so they are listed apart and not flagged."""
    rep, moves = _no_drift_report(tmp_path, "binary", seed=11, n=1500, runs=3)
    within = int(moves["within_noise"].sum())
    assert within > 40 and len(rep.flags) <= 0.05 * len(moves)
    assert ((moves["move"].abs() > moves["limit"]) == (moves["flagged"] | moves["within_noise"])).all()
    page = html.unescape(open(rep.paths["html"], encoding="utf-8").read())
    assert f"{within:,} more model-windows moved beyond the limit but within the labels' sampling noise" in page
    assert "--threshold" not in page.split("<section id='overview'")[0]  # no hand-set limit advised
    assert "label noise (99 %)" in page and f"(not flagged): {min(within, 25)} of {within}" in page
    assert "within_noise" in json.loads(open(rep.paths["json"], encoding="utf-8").read())["moves"][0]


def test_regression_label_noise_is_the_standard_error_of_the_mean_residual_moves(tmp_path):
    """A regression report's moves (c* is the mean residual) with no drift: label_noise, from the residual's
    variance per day, is the standard error of a difference of two means (a regression report had no noise)."""
    _, moves = _no_drift_report(tmp_path, "regression", seed=5, n=400, runs=2)
    assert abs(float(moves["label_noise"].median()) - NOISE_Z * 1.5 * np.sqrt(2 / 400)) < 0.02


def test_a_multiclass_config_is_told_the_report_needs_summaries(tmp_path):
    """The multiclass task writes no summaries: the report said 'No summaries … run the evaluate job for those
    days first', which the user had just done."""
    from ctcalc_spark.core.windows import WindowSpec
    from ctcalc_spark.reports.drift import read_report_input

    cfg = config_from_dict({"task": "multiclass", "input": {"path": str(tmp_path / "eval")},
                            "output": {"path": str(tmp_path / "out")}})
    with pytest.raises(ConfigError, match=r"^The drift report is made from the daily summaries, which the "
                                          r"multiclass task does not write"):
        read_report_input(cfg, "2026-11-01", "2026-11-07", WindowSpec("week"))


def _generated_report(*, jumps=None, walk_std=0.0, seed=0):
    """A day-window drift report over 240 days of generated summaries (tests/_rows.py): 3 models x 4 runs,
    300 rows a day with labels drawn (their sampling noise), runs with their own bias offsets (std 0.1)."""
    from tests._rows import binary_drift_summaries

    days = day_range("2025-01-06", 240)
    rows = binary_drift_summaries(days, models=("m1", "m2", "m3"), runs=4, n=300, seed_std=0.1, walk_std=walk_std,
                                  jumps=jumps, sampled_labels=True, seed=seed)
    cfg = config_from_dict({"task": "binary", "input": {"path": "unused"}, "output": {"path": "unused"},
                            "histogram": {"bin_width": 0.1}, "rolling": {"window": "day"}})
    return build_report(ReportInput(rows, pd.DataFrame(), days[0], days[-1], "generated"), cfg, days[1], days[-1])


def test_stationary_data_flags_at_most_5_percent_of_model_windows():
    """Constant base rate, no jump: the moves are the labels' sampling and the runs' noise only. Under the seed
    spread alone (2 x 0.1 against a label noise of about ±0.5 per day) about half the model-windows were flagged;
    now at most 5 % are, and the rest are listed as within the noise."""
    rep = _generated_report(seed=1)
    moves = rep.moves
    share = len(rep.flags) / len(moves)
    beyond_limit = float((moves["move"].abs() > moves["limit"]).mean())
    print(f"\nstationary: {len(rep.flags)} of {len(moves)} model-windows flagged ({100 * share:.1f} %); "
          f"{int(moves['within_noise'].sum())} beyond 2 x seed spread but within the label noise "
          f"({100 * beyond_limit:.1f} % beyond the limit alone); median label noise "
          f"±{moves['label_noise'].median():.2f}")
    assert len(moves) == 3 * 239 and share <= 0.05
    assert beyond_limit > 0.3  # the seed-spread limit alone flags a third or more of them


def test_flags_follow_generated_level_shifts():
    """Level shifts of ±1 logit in one model at a time over a slowly drifting base rate, labels drawn: every shift
    is flagged on its day (the shift persists, so the next day's c* does not move again), and the other flags are
    no more than the stationary data's chance rate (the models share the rows, so a day of unusual labels moves
    every model's c* at once)."""
    jumps = {("m1", "2025-02-10"): 1.0, ("m2", "2025-04-07"): -1.0, ("m3", "2025-06-02"): 1.0,
             ("m1", "2025-07-14"): -1.0}
    rep = _generated_report(jumps=jumps, walk_std=0.02, seed=2)
    flagged = set(zip(rep.flags["model"], rep.flags["window"]))
    others = flagged - set(jumps)
    print(f"\nlevel shifts: {len(rep.flags)} of {len(rep.moves)} model-windows flagged, {len(set(jumps) & flagged)} of "
          f"the {len(jumps)} shifts and {len(others)} other windows")
    assert set(jumps) <= flagged and len(others) <= 0.02 * len(rep.moves)


def test_windows_with_a_calibrated_value_are_not_listed_as_without_one(tmp_path):
    """A day missing inside a week makes that week incomplete_window and the next incomplete_previous_window, and
    both still have a calibrated value: the table 'Windows without a calibrated value' listed them."""
    from ctcalc_spark.reports.drift import missing_table

    days = day_range("2026-11-02", 28)  # four ISO weeks, Monday to Sunday
    kept = [d for d in days if d != "2026-11-11"]
    _store(tmp_path / "out", binary_summary_rows(binary_stream(kept, runs=2, n=200, seed=8)))
    rep = write_report(_cfg(tmp_path, "binary", window="week"), days[0], days[-1])
    whole = rep.table[rep.table["slice_name"] == ALL]
    qualified = whole[whole["status"].str.startswith("incomplete") & whole["calibrated"].notna()]
    assert set(qualified["status"]) == {"incomplete_window", "incomplete_previous_window"}
    listed = missing_table(rep)
    assert set(listed["status"]) == {"first_window"} and int(listed["windows"].sum()) == 1
    page = open(rep.paths["html"], encoding="utf-8").read().split("<section id='missing'>")[1].split("</section>")[0]
    assert "incomplete" not in page and "first_window" in page


def test_model_information_finds_its_picked_groups_in_rows_of_any_column_type_and_with_nulls():
    """ModelInformation keeps only the rows of its picked (model, run, day) groups before summing them: the same
    information from plain and categorical columns, and a run that is null counts as a group of its own (as a
    run named 'zz', which sorts where a null does)."""
    from ctcalc_spark.reports.drift import ModelInformation
    from tests._rows import binary_drift_summaries

    cfg = config_from_dict({"input": {"path": "unused"}, "output": {"path": "unused"},
                            "histogram": {"bin_width": 0.1}})
    rows = binary_drift_summaries(day_range("2026-01-05", 120), runs=3, n=300)
    rows["run"] = rows["run"].astype(str)

    def information(frame: pd.DataFrame) -> dict[str, float]:
        info = ModelInformation(cfg, frame[["model", "run", "ds"]].astype(object).drop_duplicates(ignore_index=True))
        half = frame["ds"].astype(str) < "2026-03-01"
        info.add(frame[half.to_numpy()])
        info.add(frame[~half.to_numpy()])
        return info.result()

    plain = information(rows)
    assert set(plain) == {"ctr_a", "ctr_b"} and all(v > 0 for v in plain.values())
    categorical = rows.astype({"model": "category", "run": "category", "ds": "category"})
    assert information(categorical) == plain
    named, null = rows.copy(), rows.copy()
    named.loc[named["run"] == "2", "run"] = "zz"
    null.loc[null["run"] == "2", "run"] = None
    assert information(null) == information(named)
    assert information(null.astype({"run": "category"})) == information(named)


@pytest.mark.parametrize("days", [3, 40, 400, 800])
def test_fixed_date_ticks_draw_the_plot_matplotlib_draws(days):
    """fix_date_ticks keeps the ticks and labels matplotlib's date locator gives the axes' data (it is only not
    asked again at every draw): the same pixels, for spans of days to years."""
    import datetime as dt

    from ctcalc_spark.reports.plotting import fix_date_ticks, pyplot

    plt = pyplot()
    x = [dt.date(2025, 1, 1) + dt.timedelta(days=i) for i in range(days)]
    images = []
    for fixed in (False, True):
        fig, ax = plt.subplots(figsize=(6.0, 3.0))
        ax.plot(x, np.sin(np.arange(days) / 9.0))
        ax.tick_params(axis="x", labelrotation=30)
        if fixed:
            fix_date_ticks(ax)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
        plt.close(fig)
        images.append(np.asarray(Image.open(buf).convert("RGB")))
    assert images[0].shape == images[1].shape and np.array_equal(*images)
