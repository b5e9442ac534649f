"""Data checks: extreme logits from the bins, min_bias_rows, the rows-needed formula and hints, the CLI lines."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ctcalc_spark.config import config_from_dict
from ctcalc_spark.core._math import sigmoid
from ctcalc_spark.core.finalize import metrics_from_summaries
from ctcalc_spark.core.findings import WARNING, render
from ctcalc_spark.core.sanity import (
    class_order,
    effective_limit,
    extreme_counts,
    extreme_scores,
    logit_information,
    no_calibrated_value,
    one_label_groups,
    raise_on_extreme,
    rows_needed,
    small_bias,
    tolerance_of,
)
from ctcalc_spark.core.solvers import solve_logit_shift
from ctcalc_spark.core.summary import BinarySummary
from ctcalc_spark.errors import ConfigError, InputError


def test_n_extreme_is_exact_from_the_bins_at_the_boundaries():
    z = np.array([-1e6, -50.0001, -50.0, -49.99999, 0.0, 49.99999, 50.0, 50.00001, 9e4, 3.0])
    y = np.array([0, 1, 0, 1, 0, 1, 0, 1, 1, 0])
    s = BinarySummary.from_logits(y, z)
    # outside [-50, 50): -1e6, -50.0001, 50.0, 50.00001, 9e4 (z = -50 exactly is inside, as bin -1000 holds it)
    assert s.n_extreme(50.0) == int(np.sum((z >= 50) | (z < -50))) == 5
    assert s.n_extreme(1e9) == 0
    # a limit that is not a multiple of the bin width is rounded up to one: 50.02 -> 50.05
    assert effective_limit(50.02, 0.05) == pytest.approx(50.05)
    assert s.n_extreme(50.02) == int(np.sum((z >= 50.05) | (z < -50.05))) == 2
    rows = pd.DataFrame(s.to_columns()).assign(model="m", run="0")
    got = extreme_counts(rows, ["model", "run"], max_abs_logit=50.0, bin_width=0.05)
    assert got[["n_rows", "n_extreme", "n_clipped"]].values.tolist() == [[10, 5, 0]]


def test_rows_needed_formula_matches_the_simulated_spread_of_c_star():
    """se(c*) = 1 / sqrt(n · mean q(1-q)): the spread of c* over 400 simulated val-bias parts agrees."""
    rng = np.random.default_rng(5)
    n, c0 = 300, 0.4
    cs, infos = [], []
    for _ in range(400):
        z = rng.normal(-1.0, 1.5, n)  # an informative model, base rate about 0.3
        y = (rng.random(n) < sigmoid(z - c0)).astype(float)
        c = solve_logit_shift(y, z)
        q = sigmoid(z - c)
        cs.append(c)
        infos.append(float(np.mean(q * (1 - q))))
    se = 1.0 / np.sqrt(n * np.median(infos))
    assert np.std(cs) == pytest.approx(se, rel=0.1)
    half = tolerance_of(n, float(np.median(infos)))
    assert np.mean(np.abs(np.array(cs) - c0) <= half) == pytest.approx(0.95, abs=0.03)
    # the figures the docs quote
    assert rows_needed(0.25) == 1537 and rows_needed(0.1 * 0.9) == 4269 and rows_needed(0.0) is None
    s = BinarySummary.from_logits(y, z)
    assert logit_information(s) == pytest.approx(infos[-1], rel=0.02)  # bin centres vs rows


def _bias_remain_rows(n_bias: int, n_remain: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    out = []
    for split, n in (("bias", n_bias), ("remain", n_remain)):
        if n == 0:
            continue
        z = rng.normal(0, 1, n)
        y = (rng.random(n) < sigmoid(z)).astype(float)
        y[:2] = [0, 1]  # both classes
        out.append(pd.DataFrame(BinarySummary.from_logits(y, z).to_columns()).assign(split=split))
    return pd.concat(out, ignore_index=True)


def test_min_bias_rows_gives_a_status_and_no_calibrated_value():
    small = _bias_remain_rows(5, 200).assign(model="m", run="small")
    big = _bias_remain_rows(60, 200, seed=1).assign(model="m", run="big")
    none = _bias_remain_rows(0, 200, seed=2).assign(model="m", run="none")
    rows = pd.concat([small, big, none], ignore_index=True)
    off = metrics_from_summaries(rows, "binary", keys=["model", "run"]).set_index("run")
    assert off.loc["small", "status"] == "ok" and off.loc["small", "calibrated_log_loss"] is not None
    on = metrics_from_summaries(rows, "binary", keys=["model", "run"], min_bias_rows=50).set_index("run")
    assert on.loc["small", "status"] == "too_few_bias_rows" and on.loc["small", "n_bias"] == 5
    assert on.loc["small", ["calibrated_log_loss", "calibration_gain", "bias"]].isna().all()
    assert on.loc["small", "log_loss"] == off.loc["small", "log_loss"]  # the vanilla metric is kept
    assert on.loc["big", "status"] == "ok" and on.loc["none", "status"] == "no_bias_rows"


def test_hint_names_the_rows_needed_and_what_to_change():
    def codes(f):
        return [f.code, [a.code for a in f.context["advice"]], [i.code for i in f.context["information"]]]

    # the user's case: 48 rows a day, val-bias parts of about 5 rows
    hint = small_bias(median_bias_rows=5, median_rows=48, information=0.2, bias_fraction=0.1, rows_per_day=48)
    assert codes(hint) == ["small_bias_parts", ["bias_fraction_none", "whole_windows_days"], ["information_rows"]]
    assert hint.counts == {"needed": 1921} and hint.context["advice"][1].counts == {"days": 41}
    assert render(hint).startswith("hint: val-bias parts had a median of 5 rows")
    one_day = small_bias(median_bias_rows=34, median_rows=400, information=None, bias_fraction=0.1,
                         task="regression", rows_per_day=400)
    assert codes(one_day) == ["small_bias_parts_regression", ["bias_fraction_most", "whole_windows_day"], []]
    assert "1 day of 400 rows reaches it" in render(one_day)  # it read "1 day of 400 rows reach it"
    assert small_bias(median_bias_rows=3000, median_rows=30000, information=0.2, bias_fraction=0.1) is None
    quiet = small_bias(median_bias_rows=500, median_rows=30000, information=0.2, bias_fraction=0.1)
    assert quiet is None  # c* within ±0.196: under twice the ±0.1 target
    # More than half of a group's rows: possible, but it said "no split.bias_fraction reaches that" (1,921 of 3,000)
    most = small_bias(median_bias_rows=300, median_rows=3000, information=0.2, bias_fraction=0.1)
    assert codes(most) == ["small_bias_parts", ["bias_fraction_most"], ["information_rows"]]
    assert most.context["advice"][0].context["fraction"] == pytest.approx(0.65)
    raise_it = small_bias(median_bias_rows=300, median_rows=30000, information=0.2, bias_fraction=0.1,
                          from_base_rate=True)
    assert codes(raise_it) == ["small_bias_parts", ["raise_bias_fraction"], ["information_base_rate"]]
    assert raise_it.context["advice"][0].context["fraction"] == pytest.approx(0.065)
    assert small_bias(median_bias_rows=300, median_rows=3000, information=0.0, bias_fraction=0.1).code == \
        "bias_rows_saturated"
    # groups of no rows (median 0): the hint says no fraction reaches it, it does not fail on the infinite fraction
    empty = small_bias(median_bias_rows=0, median_rows=0, information=0.2, bias_fraction=0.1)
    assert codes(empty) == ["small_bias_parts", ["bias_fraction_none"], ["information_rows"]]
    assert "no split.bias_fraction reaches that with 0 rows per group" in render(empty)


def test_groups_without_a_calibrated_value_are_counted_per_status():
    f = no_calibrated_value(pd.Series(["ok", "ok", "bias_single_class_negative", "no_bias_rows"]), "groups")
    assert (f.code, f.counts) == ("no_calibrated_value", {"missing": 2, "noted": 0, "rows": 4})
    assert [(p.code, p.counts) for p in f.context["parts"]] == [
        ("statuses", {"bias_single_class_negative": 1, "no_bias_rows": 1})]
    rolling = pd.Series(["ok", "first_window", "incomplete_window", "incomplete_window"])
    f = no_calibrated_value(rolling, "rows", has_value=pd.Series([True, False, True, True]))
    assert f.counts == {"missing": 1, "noted": 2, "rows": 4}
    assert [(p.code, p.counts) for p in f.context["parts"]] == [("statuses", {"first_window": 1}),
                                                                 ("statuses_noted", {"incomplete_window": 2})]
    assert no_calibrated_value(pd.Series(["ok", "ok"])) is None


def test_groups_of_one_label_are_counted_per_label():
    """A table whose labels had not been joined yet (every label 0) gives a base rate of 0 per group: no number
    of rows fits a bias to one class, and the warning counts such groups per label (named by class_names)."""
    whole = pd.DataFrame({"base_rate": [0.0, 0.0, 0.3, 1.0, np.nan]})
    f = one_label_groups(whole, "label")
    assert (f.code, f.severity, f.counts) == ("one_label_some", WARNING, {"single": 3, "groups": 5})
    assert [(k.counts, k.context) for k in f.context["kinds"]] == [({"groups": 2}, {"name": "0"}),
                                                                   ({"groups": 1}, {"name": "1"})]
    f = one_label_groups(whole.iloc[3:4], "label", ["no", "yes"])
    assert (f.code, f.counts) == ("one_label_all", {"single": 1, "groups": 1})
    assert f.context["kinds"][0].context == {"name": "'yes'"}
    assert one_label_groups(whole.iloc[2:3], "label") is None
    assert one_label_groups(pd.DataFrame({"n_rows": [5]}), "label") is None  # no base rate: regression


def test_a_class_order_other_than_the_labels_is_found_from_the_confusion_counts():
    swapped = np.array([[5, 90, 5], [3, 7, 90], [80, 10, 10]])  # label i scores highest on class (i + 1) % 3
    f = class_order("m", swapped, names=["cat", "dog", "bird"], scores=["p0", "p1", "p2"])
    assert (f.code, f.counts, f.context["order"]) == ("class_order_named", {"rows": 300}, ["bird", "cat", "dog"])
    assert (f.context["as_given"], f.context["reordered"]) == pytest.approx((22 / 300, 260 / 300))
    f = class_order("m", swapped, names=None, scores=["z"])
    assert f.code == "class_order_indices"
    assert [m.context for m in f.context["moves"]] == [{"label": 0, "score": 1}, {"label": 1, "score": 2},
                                                       {"label": 2, "score": 0}]
    assert class_order("m", swapped // 10, names=None, scores=["z"]) is None  # under 100 rows
    assert class_order("m", swapped + [[0, 0, 0], [0, 90, 0], [0, 0, 0]], names=None, scores=["z"]) is None
    assert class_order("m", swapped[:, [1, 2, 0]], names=None, scores=["z"]) is None  # the order given is best


def test_extreme_warning_and_error_name_groups_and_counts():
    counts = pd.DataFrame({"model": ["mlp", "mlp", "lr"], "run": ["0", "1", "0"], "n_rows": [48, 48, 48],
                           "n_extreme": [40, 0, 0], "n_clipped": [0, 0, 3]})
    found = extreme_scores(counts, ["model", "run"], limit=50.0, metric=pd.Series([14059.0, 0.6, 0.7]))
    assert [(f.code, f.counts) for f in found] == [
        ("extreme_logits", {"rows": 40, "of_rows": 144, "groups": 1, "of_groups": 3}),
        ("clipped_probabilities", {"rows": 3, "of_rows": 144, "groups": 1, "of_groups": 3})]
    [group] = found[0].context["shown"]
    assert (group.code, group.counts, group.context["group"]) == ("extreme_group_metric", {"rows": 40, "of_rows": 48},
                                                                  {"model": "mlp", "run": "0"})
    assert extreme_scores(counts, ["model", "run"], limit=50.0)[0].context["shown"][0].code == "extreme_group"
    many = pd.DataFrame({"model": "m", "run": [str(i) for i in range(7)], "n_rows": 10, "n_extreme": 1})
    [f] = extreme_scores(many, ["model", "run"], limit=50.0)
    assert [g.code for g in f.context["shown"]][-2:] == ["extreme_group", "more_groups"]
    assert f.context["shown"][-1].counts == {"groups": 2}
    with pytest.raises(InputError, match="model=mlp run=0: 40 of 48 rows.*Nothing was written.*on_extreme: warn"):
        raise_on_extreme(counts, ["model", "run"], limit=50.0)
    raise_on_extreme(counts.assign(n_extreme=0, n_clipped=0), ["model", "run"], limit=50.0)  # nothing to stop


@pytest.mark.parametrize("key, value, match", [
    ("sanity", {"on_extreme": "ignore"}, "on_extreme"),
    ("sanity", {"max_abs_logit": -1}, "max_abs_logit"),
    ("sanity", {"max_abs_logit": "fifty"}, "max_abs_logit"),  # numeric text such as "50" or "1e-9" is read as a number
    ("split", {"min_bias_rows": -3}, "min_bias_rows"),
    ("split", {"min_bias_rows": 2.5}, "min_bias_rows"),
    ("sanity", {"max_slice_values": 0}, "max_slice_values"),
    ("sanity", {"max_slice_values": "many"}, "max_slice_values"),
])
def test_new_config_keys_are_validated(key, value, match):
    with pytest.raises(ConfigError, match=match):
        config_from_dict({"input": {"path": "x"}, key: value})
    cfg = config_from_dict({"input": {"path": "x"}, "sanity": {"max_abs_logit": 30, "on_extreme": "error"},
                            "split": {"min_bias_rows": 100}})
    assert cfg.sanity.max_abs_logit == 30 and cfg.split.min_bias_rows == 100


SHARED_SESSION = {"master": "local[2]", "shuffle_partitions": 4}
"""The CLI's session settings for these tests: those of the session fixture, which main() reuses (and would
otherwise change for the tests that run after it)."""


def test_extreme_logits_are_counted_and_reported_by_evaluate_compare_and_the_drift_report(
        spark, tmp_path, capsys, restore_ctcalc_logger):
    import json

    import yaml

    from ctcalc_spark.cli.main import main
    from ctcalc_spark.tables import OutputStore

    rng = np.random.default_rng(0)
    n, frames = 2000, []
    x = rng.normal(-1, 1, n)
    y = (rng.random(n) < sigmoid(x)).astype(int)
    for run in (0, 1):
        frames.append(pd.DataFrame({"model": "good", "run": run, "logit": x + rng.normal(0, 0.3, n)}))
        broken = x + rng.normal(0, 0.3, n)
        wild = rng.random(n) < 0.3  # constant training features: logits from -6.5e5 to +9e4 on 30 % of rows
        broken[wild] = rng.uniform(-6.5e5, 9e4, wild.sum())
        frames.append(pd.DataFrame({"model": "broken", "run": run, "logit": broken}))
    df = pd.concat([f.assign(ds="2026-03-02", example_id=np.arange(n), label=y) for f in frames], ignore_index=True)
    df.to_parquet(tmp_path / "eval.parquet")
    conf = tmp_path / "job.yaml"
    conf.write_text(yaml.safe_dump({"input": {"path": str(tmp_path / "eval.parquet")},
                                    "output": {"path": str(tmp_path / "out")}, "split": {"salt": "s"},
                                    "spark": SHARED_SESSION}))
    assert main(["evaluate", "--config", str(conf), "--ds", "2026-03-02"]) == 0
    out, err = capsys.readouterr()
    assert "WARNING: " in err and "logits outside [-50, 50)" in err and "model=broken run=" in err
    assert "model=good" not in err
    m = OutputStore(config_from_dict(yaml.safe_load(conf.read_text()))).read("metrics")
    m = m[m["slice_name"] == "__all__"].set_index(["model", "run"])
    for run in ("0", "1"):
        z = df[(df["model"] == "broken") & (df["run"] == int(run))]["logit"]
        assert m.loc[("broken", run), "n_extreme"] == int(((z >= 50) | (z < -50)).sum()) > 500
        assert m.loc[("good", run), "n_extreme"] == 0
    # compare: a warning in the text and in the report
    assert main(["compare", "--config", str(conf), "--a", "good", "--b", "broken", "--ds", "2026-03-02",
                 "--bootstrap", "200"]) == 0
    out, err = capsys.readouterr()
    assert "WARNING: " in err and "model=broken run=" in err
    page = (tmp_path / "out" / "compare" / "good_vs_broken" / "report.html").read_text()
    assert "class='warning'" in page and "logits outside [-50, 50)" in page
    assert json.loads((tmp_path / "out" / "compare" / "good_vs_broken" / "comparison.json").read_text())["warnings"]
    # the drift report: a warning line in its summary
    assert main(["report", "--config", str(conf), "--start", "2026-03-02", "--end", "2026-03-02"]) == 0
    out, err = capsys.readouterr()
    assert "model=broken run=" in err
    html = (tmp_path / "out" / "reports" / "drift_2026-03-02_2026-03-02_day.html").read_text()
    summary = html.split("<section id='summary'>")[1].split("</section>")[0]
    assert "<p class='flag'>WARNING: " in summary and "model=broken" in summary
    # on_extreme: error stops before writing, naming the groups
    strict = ["--set", "sanity.on_extreme=error", "--set", f"output.path={tmp_path / 'strict'}"]
    assert main(["evaluate", "--config", str(conf), "--ds", "2026-03-02", *strict]) == 4
    err = capsys.readouterr().err
    assert "ds=2026-03-02 model=broken run=0" in err and "Nothing was written" in err
    assert not (tmp_path / "strict" / "metrics").exists()


def test_a_slice_column_with_very_many_values_is_named_with_its_cost():
    from ctcalc_spark.core.finalize import ALL
    from ctcalc_spark.core.sanity import many_slice_values_lines

    def rows(ds, name, n, ok):
        return pd.DataFrame({"ds": ds, "slice_name": name, "slice_value": [str(i) for i in range(n)],
                             "status": ["ok"] * ok + ["no_bias_rows"] * (n - ok)})

    metrics = pd.concat([rows("d1", ALL, 1, 1).assign(slice_value=ALL), rows("d1", "user", 40, 4),
                         rows("d2", "user", 50, 5), rows("d1", "country", 30, 30)], ignore_index=True)
    [line] = many_slice_values_lines(metrics, 30)  # country has 30 values: not more than the limit
    assert line.startswith("warning: slice column 'user' has 50 values on d2 (more than sanity.max_slice_values "
                           "= 30): 90 metrics rows, 90.0 % of them without a calibrated value.")
    assert many_slice_values_lines(metrics, 50) == [] and many_slice_values_lines(metrics, None) == []
    assert len(many_slice_values_lines(metrics, 29)) == 2
