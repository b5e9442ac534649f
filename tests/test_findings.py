"""Findings about the evaluation rows, from small aggregates like those the scan collects, without Spark: their
codes and counts, and every catalogue message rendered once into tests/golden/messages.txt (a wording change is
a diff of that file; ``CTCALC_GOLDEN=write`` rewrites it)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ctcalc_spark.core import findings, sanity
from ctcalc_spark.core.findings import ERROR, HINT, NOTE, WARNING, Finding, render
from ctcalc_spark.spark import input_hints
from ctcalc_spark.spark.input_hints import csv_quoting_problems

GOLDEN = Path(__file__).parent / "golden" / "messages.txt"

DAYS = [f"2026-11-{d:02}" for d in range(10, 30)]
SWAPPED = np.array([[5, 90, 5], [3, 7, 90], [80, 10, 10]])
"""Val-bias rows by label (row) and highest class score (column): label i scores highest on class i + 1."""
EXTREME = pd.DataFrame({"model": ["mlp", "mlp", "lr", "lr", "lr", "lr", "lr"],
                        "run": ["0", "1", "0", "1", "2", "3", "4"], "n_rows": 48,
                        "n_extreme": [40, 0, 0, 0, 0, 0, 0], "n_clipped": [0, 0, 3, 0, 0, 0, 0]})

EXAMPLES = [  # (what the example is, its finding): every catalogue code at least once, some within others
    ("one day", Finding("invalid_rows", ERROR, {"null_label": 3, "text_not_number": 1},
                        {"days": ["2026-11-21"], "ds": "2026-11-21", "model": "lr", "run": "0", "task": "binary",
                         "label": "clicked"})),
    ("several days, a null model", Finding("invalid_rows", ERROR, {"null_model_or_run": 2},
                                           {"days": ["2026-11-20", "2026-11-21", "2026-11-23"], "ds": "2026-11-20",
                                            "model": None, "run": "7", "task": "regression", "label": "y"})),
    ("rows without a date", Finding("invalid_rows", ERROR, {"malformed_record": 1},
                                    {"days": [], "ds": None, "model": None, "run": None, "task": "multiclass",
                                     "label": "y"})),
    ("two days", Finding("all_rows_invalid", ERROR, {"score_not_finite": 800},
                         {"days": ["2024-03-01", "2024-03-02"]})),
    ("one group", Finding("duplicate_ids", ERROR, {"duplicate_rows": 6, "example_duplicate_rows": 6,
                                                   "example_repeated_ids": 5, "example_conflicting_ids": 1},
                          {"ds": "2026-11-21", "model": "a", "run": "0", "example_id": "example_id"})),
    ("arrays of 3", Finding("class_count_mismatch", ERROR, {"class_names": 2, "classes": 3},
                            {"ds": "2026-11-21", "model": "a", "run": "0"})),
    ("a range", Finding("too_many_bias_rows", ERROR, {"bias_rows": 2_000_001, "limit": 2_000_000},
                        {"first_day": "2026-11-01", "last_day": "2026-11-30"})),
    ("-1/1", Finding("labels_two_codes", HINT, {"zeros": 0, "ones": 200},
                     {"label": "label", "low": -1.0, "high": 1.0, "class_names": ["-1", "1"]})),
    ("0.1 to 0.9", Finding("labels_fractions", HINT, {"zeros": 0, "ones": 0},
                           {"label": "label", "low": 0.1, "high": 0.9})),
    ("0, 1, 2", Finding("labels_whole_numbers", HINT, {"zeros": 130, "ones": 140},
                        {"label": "label", "low": 2.0, "high": 2.0})),
    ("7.5", Finding("labels_other", HINT, {"zeros": 160, "ones": 160}, {"label": "label", "low": 7.5, "high": 7.5})),
    ("binary logits", Finding("probabilities_negative", HINT, {}, {"columns": ["score"], "low": -4.25, "high": 3.5})),
    ("multiclass logits", Finding("probabilities_negative", HINT, {},
                                  {"columns": ["p0", "p1", "p2"], "low": -6.5, "high": 5.0})),
    ("percentages", Finding("probabilities_percent", HINT, {}, {"columns": ["score"], "low": 1.5, "high": 99.2})),
    ("other values", Finding("probabilities_outside", HINT, {},
                             {"columns": ["p0", "p1"], "low": 0.5, "high": 1000.0})),
    ("labels 0/1", Finding("ranked_backwards", WARNING, {"groups": 4}, {"low": 0.21, "high": 0.3, "score": "logit"})),
    ("class names", Finding("ranked_backwards_named", WARNING, {"groups": 1},
                            {"low": 0.2, "high": 0.2, "score": "p", "reversed": [">50K", "<=50K"],
                             "positive": "<=50K"})),
    ("binary", Finding("logits_look_like_probabilities", WARNING, {"rows": 12_000},
                       {"column": "logit", "bin_width": 0.05})),
    ("columns", Finding("class_logits_look_like_probabilities", WARNING, {"rows": 600},
                        {"columns": ["p0", "p1", "p2"]})),
    ("an array", Finding("array_logits_look_like_probabilities", WARNING, {"rows": 600}, {"columns": ["logit"]})),
    ("names not listed", Finding("labels_not_in_class_names", HINT, {},
                                 {"label": "y", "labels": ["bird"], "class_names": ["cat", "dog"]})),
    ("three", Finding("text_labels_not_binary", HINT, {}, {"label": "y", "labels": ["no", "unknown", "yes"]})),
    ("two", Finding("text_labels_binary", HINT, {}, {"label": "income", "labels": ["<=50K", ">50K"],
                                                     "reversed": [">50K", "<=50K"], "positive": "<=50K"})),
    ("21 names", Finding("class_name_labels", HINT, {}, {"label": "y", "labels": [f"c{i:02}" for i in range(21)],
                                                         "names": [f"c{i:02}" for i in range(20)]})),
    ("a weight", Finding("text_not_number", HINT, {}, {"key": "weight", "column": "w", "value": "heavy"})),
    ("a score", Finding("decimal_comma", HINT, {}, {"key": "score", "column": "logit", "value": "-0,673585"})),
    ("no date", Finding("rows_uncounted", NOTE, {"rows": 6}, {"ds": None, "reason": "null date, or a date not "
                                                                   "written YYYY-MM-DD: the row belongs to no day "
                                                                   "and is never evaluated"})),
    ("a day", Finding("rows_uncounted", NOTE, {"rows": 2}, {"ds": "2026-11-21",
                                                          "reason": "null (or NaN) in the model or run column"})),
    ("one group", Finding("repeated_ids", NOTE, {"duplicate_rows": 6, "repeated_ids": 5, "conflicting_ids": 1},
                          {"ds": "2026-11-21", "model": "a", "run": "0"})),
    ("rounded to 0", Finding("label_class_clipped", WARNING, {"rows": 300, "clipped": 12},
                             {"clip_eps": 1e-15, "cost": 34.538776394910684, "loss_share": 0.62})),
    ("statuses", sanity.no_calibrated_value(pd.Series(["ok", "no_bias_rows", "bias_single_class_negative"]),
                                            "groups (day x model x run)")),
    ("a note besides", sanity.no_calibrated_value(pd.Series(["ok", "first_window", "incomplete_window"]), "rows",
                                                  has_value=pd.Series([True, False, True]))),
    ("some", sanity.one_label_groups(pd.DataFrame({"base_rate": [0.0, 0.0, 1.0, 0.4]}), "label")),
    ("all, named", sanity.one_label_groups(pd.DataFrame({"base_rate": [1.0]}), "y", ["no", "yes"])),
    ("named", sanity.class_order("m", SWAPPED, names=["cat", "dog", "bird"], scores=["p0", "p1", "p2"])),
    ("indices", sanity.class_order("m", SWAPPED, names=None, scores=["logits"])),
    *[(what, f) for what, metric in (("with the log loss", pd.Series([14059.0, 0.6, 0.7])), ("counts only", None))
      for f in sanity.extreme_scores(EXTREME.head(3), ["model", "run"], limit=50.0, metric=metric)],
    ("seven groups", sanity.extreme_scores(EXTREME.assign(run=[str(i) for i in range(7)], n_extreme=range(7),
                                                          n_clipped=0), ["model", "run"], limit=50.0)[0]),
    ("the stop", Finding("extreme_stop", ERROR)),
    ("a scoring call", sanity.scored_extreme({("fnn", 0): (30, 1000, -2.5, 60.0), ("lr", 1): (0, 10, -1.0, 1.0),
                                              **{("m", i): (1, 20, -70.5, 0.0) for i in range(6)}}, 50.0)),
    ("in the input", Finding("output_inside_input", ERROR, {}, {"output": "/data/eval/out", "input": "/data/eval"})),
    *[(fmt, Finding(f"{fmt}_table_folder", ERROR, {}, {"table": f"/data/{fmt}", "mark": mark, "format": "parquet",
                                                       "table_format": fmt}))
      for fmt, mark in (("delta", "_delta_log"), ("hudi", ".hoodie"), ("iceberg", "metadata"))],
    ("one file", Finding("temporary_files", ERROR, {}, {"table": "/data/eval", "files": ["3.csv.tmp"], "more": [],
                                                        "pattern": "*.csv"})),
    ("more files", Finding("temporary_files", ERROR, {}, {"table": "/data/eval", "files": ["a.parquet.part"],
                                                          "more": [Finding("and_more", NOTE)],
                                                          "pattern": "*.parquet"})),
    ("both, in a file", Finding("csv_quoting", ERROR, {}, {"file": "day/a.csv", "found": csv_quoting_problems(
        b'id,title\n1,"Blue ""XL"" shoe, wide"\n2,"Blue XL\nshoe"\n', {})})),
    ("a stream's file", Finding("csv_quoting_problems", NOTE, {}, {"found": csv_quoting_problems(
        b'1;"x ""y"" z"\n', {"sep": ";", "header": "false"}, "stream.options")})),
    ("one day", findings.missing_days(["2026-11-21"], [], where="/data/eval", allow_missing=False)),
    ("some of a range", findings.missing_days(DAYS, DAYS[3:5], where="db.eval", allow_missing=False)),
    ("a range, allowed", findings.missing_days(DAYS[:2], [], where="db.eval", allow_missing=True)),
    ("skipped", findings.missing_days(DAYS, DAYS[3:5], where="db.eval", allow_missing=True)),
    ("summaries of a range", findings.missing_summaries(DAYS, DAYS[3:5] + DAYS[6:8], where="/out/summaries",
                                                        allow_missing=False)),
    ("summaries, none", findings.missing_summaries(DAYS[:1], [], where="/out/summaries", allow_missing=True)),
    ("an empty folder", Finding("empty_folder", HINT)),
    ("four files", input_hints.unlisted_files(["ds=2026-01-04/a.csv", "2026/01/05/a.csv", "2026/01/06/a.csv",
                                               "x/a.csv", "y/a.csv"])),
    ("a README", input_hints.stray_file(["a.csv", "b.csv", "README.txt"], "README.txt", "/data/eval")),
    *[(f"Spark {v}", input_hints.missing_reader(fmt, v)) for fmt, v in (("avro", "4.2.1"), ("delta", "4.2.1"),
                                                                        ("iceberg", "4.1.0+local"))],
    ("one file has them", input_hints.columns_in_some(["ds=2026-11-21/a.parquet"], ["ds=2026-11-20/a.parquet",
                                                      "ds=2026-11-19/a.parquet"], ["country"])),
    ("one file lacks them", input_hints.columns_in_some(["b.parquet", "c.parquet"], ["a.parquet"], ["x", "y"])),
    ("a column", input_hints.csv_header_mismatch("/data/eval/b.csv", ["Expected: model but found: run"])),
    ("a count", input_hints.csv_header_mismatch("b.csv", [
        "Number of column in CSV header is not equal to number of fields in the schema: Header length: 3, schema "
        "size: 4."], " The files have 2 different headers: 1 file (a.csv): id, model, run; 1 file (b.csv): id, run.")),
    ("Parquet read as CSV", Finding("foreign_files", ERROR, {}, {"table": "/data/eval", "format": "csv", "hint": (
        " x.csv is a Parquet file: set input.format: parquet.")})),
    ("sliced", input_hints.result_too_large("1030.4 MiB", "1024.0 MiB", ["country"])),
    ("not sliced", input_hints.result_too_large("1030.4 MiB", "1024.0 MiB", [])),
    ("a stream batch", Finding("stream_invalid_rows", ERROR, {"null_label": 3, "no_event_time": 2},
                               {"batch": 7, "event_time": "event_time"})),
    ("a CSV", sanity.not_utf8({"model": ["mod\ufffdle"], "city": ["K\ufffdln"]}, "csv", "input.options")),
    ("a stream batch", sanity.not_utf8({"city": ["K\ufffdln"]}, "json", "stream.options", batch=7)),
    ("saturated", sanity.small_bias(median_bias_rows=30, median_rows=300, information=0.0, bias_fraction=0.1)),
    ("no fraction, days", sanity.small_bias(median_bias_rows=5, median_rows=48, information=0.2, bias_fraction=0.1,
                                            rows_per_day=48)),
    ("most of the rows, a day", sanity.small_bias(median_bias_rows=34, median_rows=400, information=None,
                                                  bias_fraction=0.1, task="regression", rows_per_day=400)),
    ("raise the fraction", sanity.small_bias(median_bias_rows=300, median_rows=30000, information=0.2,
                                             bias_fraction=0.1, from_base_rate=True)),
]


def codes_of(f: Finding) -> set[str]:
    """The codes of ``f``, of the findings its message holds and of the reasons it counts that are codes."""
    inner = [g for v in f.context.values() if isinstance(v, list) for g in v if isinstance(g, Finding)]
    return {f.code, *(f.counts.keys() & findings.CATALOGUE.keys())}.union(*map(codes_of, inner))


def golden_text() -> str:
    return "".join(f"## {f.code}: {what}\n{render(f)}\n\n" for what, f in EXAMPLES)


def test_every_catalogue_message_is_in_the_golden_file():
    assert set().union(*(codes_of(f) for _, f in EXAMPLES)) == set(findings.CATALOGUE)
    if os.environ.get("CTCALC_GOLDEN") == "write":
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(golden_text())
    assert GOLDEN.read_text() == golden_text(), "a message changed: CTCALC_GOLDEN=write rewrites tests/golden/"


def _tally(rows) -> pd.DataFrame:
    """A tally as the scan collects it: per (ds, model, run, invalid code), count."""
    return pd.DataFrame(rows, columns=["ds", "m", "r", "invalid", "count"])


def test_invalid_rows_count_per_reason_in_code_order_and_take_a_dated_example():
    tally = _tally([(None, None, None, 8, 4), ("2026-11-22", "b", "1", 11, 2), ("2026-11-21", "a", "0", 7, 1),
                    ("2026-11-21", "a", "0", 11, 3)])
    f = findings.invalid_rows(tally, model="m", run="r", task="binary", label="y")
    assert (f.code, f.severity) == ("invalid_rows", ERROR)
    assert list(f.counts.items()) == [("text_not_number", 1), ("malformed_record", 4), ("null_label", 5)]
    assert f.context == {"days": ["2026-11-21", "2026-11-22"], "ds": "2026-11-22", "model": "b", "run": "1",
                         "task": "binary", "label": "y"}
    assert render(f).startswith("Invalid evaluation rows for ds=2 days (2026-11-21..2026-11-22): 1 rows: text that")


def test_an_example_row_with_a_null_or_nan_key_shows_null():
    """The example row showed a null model as model=np.float64(nan)."""
    for null in (None, np.nan):
        f = findings.invalid_rows(_tally([("2026-11-21", null, "0", 9, 3)]), model="m", run="r", task="binary",
                                  label="y")
        assert f.counts == {"null_model_or_run": 3} and f.context["model"] is None
        assert "(e.g. ds=2026-11-21, model=null, run='0')" in render(f)


def test_rows_without_a_date_only_name_no_day():
    f = findings.invalid_rows(_tally([(None, "a", "0", 8, 2)]), model="m", run="r", task="regression", label="y")
    assert f.context["days"] == [] and f.counts == {"malformed_record": 2}
    assert render(f).startswith("Invalid evaluation rows for ds=unknown (rows without a date): 2 rows: malformed")


def test_all_rows_invalid_counts_every_reason_of_the_tally():
    tally = _tally([("2024-03-01", "a", "0", 2, 400), ("2024-03-02", "a", "0", 2, 399),
                    ("2024-03-02", "a", "0", 5, 1)])
    f = findings.all_rows_invalid(["2024-03-01", "2024-03-02"], tally)
    assert f.counts == {"score_not_finite": 799, "bad_weight": 1} and f.context == {"days": ["2024-03-01",
                                                                                             "2024-03-02"]}
    assert "(800 rows in all: 799 rows: NaN or infinite logit/prediction; 1 rows: negative" in render(f)


def test_duplicate_ids_total_every_group_and_show_the_first():
    columns = ["ds", "model", "run", "n_duplicate_rows", "n_repeated_ids", "n_conflicting_ids"]
    assert findings.duplicate_ids(pd.DataFrame(columns=columns), "id") is None
    found = pd.DataFrame([("2026-11-21", "a", "0", 6, 5, 1), ("2026-11-21", "b", "0", 2, 2, 0)], columns=columns)
    f = findings.duplicate_ids(found, "id")
    assert f.counts == {"duplicate_rows": 8, "example_duplicate_rows": 6, "example_repeated_ids": 5,
                        "example_conflicting_ids": 1}
    assert f.context == {"ds": "2026-11-21", "model": "a", "run": "0", "example_id": "id"}


def test_class_count_mismatch_names_the_first_group_whose_arrays_differ():
    keys = ["_ds", "m", "r"]
    classes = pd.DataFrame([("d", "a", "0", 3, 10), ("d", "b", "0", 2, 10)], columns=[*keys, "_k", "bias_rows"])
    assert findings.class_count_mismatch(classes, [], keys) is None
    assert findings.class_count_mismatch(classes.iloc[:1], ["x", "y", "z"], keys) is None
    f = findings.class_count_mismatch(classes, ["x", "y", "z"], keys)
    assert (f.counts, f.context) == ({"class_names": 3, "classes": 2}, {"ds": "d", "model": "b", "run": "0"})


def test_too_many_bias_rows_only_above_the_limit():
    assert findings.too_many_bias_rows(10, 10, ["d"]) is None
    f = findings.too_many_bias_rows(11, 10, ["d1", "d2"])
    assert f.counts == {"bias_rows": 11, "limit": 10} and f.context == {"first_day": "d1", "last_day": "d2"}


@pytest.mark.parametrize("code", sorted(findings.ROW_REASONS))
def test_every_row_reason_has_a_name_of_its_own(code):
    names = [name for name, _ in findings.ROW_REASONS.values()]
    assert names.count(findings.ROW_REASONS[code][0]) == 1


@pytest.mark.parametrize(("labels", "code", "shown"), [
    ([0.1, 0.9, 0.5], "labels_fractions", {"low": 0.1, "high": 0.9}),
    ([-1, 1, 1], "labels_two_codes", {"low": -1.0, "high": 1.0, "class_names": ["-1", "1"]}),
    ([1, 2, 2], "labels_two_codes", {"low": 1.0, "high": 2.0, "class_names": ["1", "2"]}),
    ([0, 1, 2, 2], "labels_whole_numbers", {"low": 2.0, "high": 2.0}),
    ([0, 1, 7.5], "labels_other", {"low": 7.5, "high": 7.5}),
    ([0, 1, -1], "labels_other", {"low": -1.0, "high": -1.0}),  # -1 with 0 labels: not a -1/1 coding
])
def test_binary_labels_other_than_0_and_1_are_told_apart(labels, code, shown):
    """From the aggregate the job collects of the labels (the lowest and highest other than 0 and 1, whether they
    are whole, the rows labelled 0 and 1), here of a handful of labels."""
    y = np.array(labels, dtype=float)
    other = y[~np.isin(y, [0.0, 1.0])]
    f = findings.binary_labels("label", low=other.min(), high=other.max(), whole=bool((other == np.floor(other)).all()),
                               zeros=int((y == 0).sum()), ones=int((y == 1).sum()))
    assert (f.code, f.severity, f.counts) == (code, HINT, {"zeros": int((y == 0).sum()), "ones": int((y == 1).sum())})
    assert f.context == {"label": "label", **shown}


def test_labels_that_are_not_finite_get_no_hint():
    assert findings.binary_labels("y", low=None, high=None, whole=False, zeros=1, ones=1) is None
    assert findings.binary_labels("y", low=2.0, high=float("inf"), whole=True, zeros=1, ones=1) is None


@pytest.mark.parametrize(("low", "high", "code"), [(-3.0, 2.0, "probabilities_negative"),
                                                   (0.5, 99.5, "probabilities_percent"),
                                                   (0.5, 100.0, "probabilities_percent"),
                                                   (1.5, 100.5, "probabilities_outside"),
                                                   (None, None, None), (-float("inf"), 0.5, None)])
def test_probabilities_outside_0_1_are_told_apart(low, high, code):
    f = findings.probabilities_outside(["p"], low=low, high=high)
    assert (f and f.code) == code
    if f is not None:
        assert f.context == {"columns": ["p"], "low": low, "high": high}


def test_warnings_from_the_metrics_and_counts_the_job_has():
    """The warnings data_notes prints, from the metrics rows, the summaries' bins and the scan's counts."""
    from ctcalc_spark.core.sanity import backwards_auc, clipped_label_class, probability_like_class_logits, \
        probability_like_logits

    metrics = pd.DataFrame({"auc": [0.3, 0.2, 0.9], "n_rows": [500, 400, 50]})  # the third: too few rows to count
    f = backwards_auc(metrics, "z", ["no", "yes"])
    assert (f.code, f.severity, f.counts) == ("ranked_backwards_named", WARNING, {"groups": 2})
    assert f.context == {"low": 0.2, "high": 0.3, "score": "z", "reversed": ["yes", "no"], "positive": "no"}
    assert backwards_auc(metrics.assign(auc=[0.3, 0.6, 0.1]), "z") is None
    bins = pd.DataFrame({"bin": [0, 5, 20], "count": [50, 40, 30]})  # logits in [0, 1.05) at a bin width of 0.05
    assert probability_like_logits(bins, column="z", bin_width=0.05).counts == {"rows": 120}
    assert probability_like_logits(bins.assign(bin=[-1, 5, 20]), column="z", bin_width=0.05) is None
    assert probability_like_class_logits(600, 600, columns=["z"], array_column=True).code == \
        "array_logits_look_like_probabilities"
    assert probability_like_class_logits(600, 599, columns=["p0"]) is None
    f = clipped_label_class(300, 12, 0.5, clip_eps=1e-15)
    assert f.counts == {"rows": 300, "clipped": 12} and f.context["cost"] == pytest.approx(34.5388, abs=1e-4)
    assert clipped_label_class(300, 0, 0.0, clip_eps=1e-15) is None


def test_notes_of_uncounted_rows_and_repeated_ids_one_per_row_of_their_frames():
    uncounted = pd.DataFrame({"ds": [None, "2026-11-21"], "reason": ["x", "y"], "n_rows": [6, 2]})
    assert [(f.code, f.severity, f.counts, f.context) for f in findings.uncounted_rows(uncounted)] == [
        ("rows_uncounted", NOTE, {"rows": 6}, {"ds": None, "reason": "x"}),
        ("rows_uncounted", NOTE, {"rows": 2}, {"ds": "2026-11-21", "reason": "y"})]
    found = pd.DataFrame([("2026-11-21", "a", "0", 6, 5, 1)], columns=["ds", "model", "run", "n_duplicate_rows",
                                                                       "n_repeated_ids", "n_conflicting_ids"])
    [f] = findings.repeated_ids(found)
    assert f.counts == {"duplicate_rows": 6, "repeated_ids": 5, "conflicting_ids": 1}
    assert findings.uncounted_rows(uncounted.iloc[:0]) == [] and findings.repeated_ids(found.iloc[:0]) == []


@pytest.mark.parametrize(("value", "code"), [("0,5", "decimal_comma"), (" -1,25e3 ", "decimal_comma"),
                                             ("1.000,5", "text_not_number"), ("n/a", "text_not_number")])
def test_text_in_a_number_column_tells_a_decimal_comma_from_other_text(value, code):
    f = findings.text_not_number("score", "logit", value)
    assert (f.code, f.context) == (code, {"key": "score", "column": "logit", "value": value})
    assert findings.text_not_number("label", "y", "x" * 50).context["value"] == "x" * 40


def test_text_labels_are_told_apart_by_the_task_and_the_class_names():
    def code(labels, task="binary", class_names=()):
        f = findings.text_labels("y", labels, task=task, class_names=class_names)
        return f and f.code

    assert code([]) is None
    assert code(["yes", "no"]) == "text_labels_binary" and code(["a", "b", "c"]) == "text_labels_not_binary"
    assert code(["bird", "cat"], task="multiclass") == "class_name_labels"
    assert code(["bird"], task="multiclass", class_names=["cat", "dog"]) == "labels_not_in_class_names"
    f = findings.text_labels("y", ["yes", "no"], task="binary", class_names=())
    assert f.context == {"label": "y", "labels": ["no", "yes"], "reversed": ["yes", "no"], "positive": "no"}
    many = [f"c{i:02}" for i in range(findings.LABELS_SHOWN + 1)]
    assert findings.text_labels("y", many, task="multiclass", class_names=()).context["names"] == many[:-1]


def test_values_not_read_as_utf8_are_named_per_column():
    frame = pd.DataFrame({"model": ["a", "mod\ufffdle"], "run": ["0", "1"], "city": ["K\ufffdln", None]})
    found = sanity.undecoded_values(frame, {"model": "model", "run": "run", "city": "town", "absent": "x"})
    assert found == {"model": ["mod\ufffdle"], "town": ["K\ufffdln"]}
    f = sanity.not_utf8(found, "csv", "input.options")
    assert (f.code, f.severity, f.context) == ("not_utf8", ERROR, {"values": found, "format": "CSV",
                                                                   "options": "input.options"})
    assert sanity.not_utf8(found, "json", "stream.options", batch=3).context["batch"] == 3
    assert sanity.undecoded_values(frame.iloc[:1], {"model": "model"}) == {}


def test_a_scoring_call_counts_models_with_extreme_logits_and_names_the_worst_first():
    extreme = {("fnn", 0): (30, 1000, -2.5, 60.0), ("lr", 1): (0, 10, -9.0, 9.0), ("m", 0): (5, 10, -70.5, 3.0)}
    f = sanity.scored_extreme(extreme, 50.0)
    assert (f.code, f.severity, f.counts) == ("scored_extreme_logits", WARNING,
                                              {"rows": 35, "of_rows": 1020, "groups": 2, "of_groups": 3})
    assert (f.context["limit"], f.context["low"], f.context["high"]) == (50.0, -70.5, 60.0)  # of the models hit
    assert [(g.code, g.counts, g.context["group"]) for g in f.context["shown"]] == [
        ("scored_model", {"rows": 5, "of_rows": 10}, {"model": "m", "run": 0}),
        ("scored_model", {"rows": 30, "of_rows": 1000}, {"model": "fnn", "run": 0})]
    assert "from -70.5 to 60: m run 0: 5 of 10 (50.0%); fnn run 0: 30 of 1,000 (3.0%)." in render(f)
    assert sanity.scored_extreme({("lr", 1): (0, 10, -9.0, 9.0)}, 50.0) is None
    assert sanity.scored_extreme({}, 50.0) is None


def test_days_without_rows_stop_a_run_unless_it_may_skip_them_and_has_one_day():
    assert findings.missing_days(DAYS[:3], DAYS, where="t", allow_missing=False) is None
    f = findings.missing_days(DAYS, DAYS[3:5], where="t", allow_missing=False)
    assert (f.code, f.severity, f.counts) == ("no_rows_for_days", ERROR, {"missing": 18, "asked": 20})
    assert f.context["missing_days"] == DAYS[:3] + DAYS[5:]
    assert [(g.code, g.counts, g.context) for g in f.context["held"]] == [("days_held", {"asked": 20, "held": 2},
                                                                            {"found": DAYS[3:5]})]
    assert [g.code for g in f.context["skip"]] == ["allow_missing_days"]
    f = findings.missing_days(DAYS, DAYS[3:5], where="t", allow_missing=True)
    assert (f.code, f.severity, f.counts) == ("days_skipped", NOTE, {"missing": 18, "asked": 20})
    f = findings.missing_days(DAYS[:2], [], where="t", allow_missing=True)  # every day missing: still an error
    assert (f.code, f.context["held"], [g.code for g in f.context["skip"]]) == (
        "no_rows_for_days", [], ["allow_missing_needs_a_day"])
    assert findings.missing_days(DAYS[:1], [], where="t", allow_missing=False).context["skip"] == []


def test_days_without_summaries_stop_a_run_over_them_as_days_without_rows_do():
    """The same days stop it (a note of skipped days is no error: None), and the error names the evaluate
    command for the missing days (up to five runs of them, else '...') and every day that has summaries."""
    assert findings.missing_summaries(DAYS, DAYS[3:5], where="s", allow_missing=True) is None
    assert findings.missing_summaries(DAYS[3:5], DAYS, where="s", allow_missing=False) is None
    f = findings.missing_summaries(DAYS, DAYS[3:5] + ["2026-12-24"], where="s", allow_missing=False)
    assert (f.code, f.severity, f.counts) == ("no_summaries_for_days", ERROR, {"missing": 18, "asked": 20})
    assert f.context["missing_days"] == DAYS[:3] + DAYS[5:] and f.context["available"] == DAYS[3:5] + ["2026-12-24"]
    assert f.context["todo"] == "2026-11-10..2026-11-12,2026-11-15..2026-11-29"
    assert [g.code for g in f.context["skip"]] == ["allow_missing_days"]
    assert findings.missing_summaries(DAYS[::2], [], where="s", allow_missing=False).context["todo"] == "..."
    f = findings.missing_summaries(DAYS[:2], [], where="s", allow_missing=True)
    assert [g.code for g in f.context["skip"]] == ["allow_missing_needs_a_day"]
    assert "(available: none) (--allow-missing-days skips days without rows" in render(f)


def test_files_spark_does_not_list_or_read_as_the_tables_are_named():
    assert input_hints.unlisted_files(["ds=2026-01-05/a.csv", "a.csv"]) is None  # key=value folders are read
    f = input_hints.unlisted_files(["ds=2026-01-05/a.csv", "2026/01/05/a.csv", "b/a.csv"])
    assert (f.code, f.severity, f.counts, f.context) == ("files_in_plain_folders", HINT, {"files": 2},
                                                         {"shown": ["2026/01/05/a.csv", "b/a.csv"], "more": []})
    assert [g.code for g in input_hints.unlisted_files([f"{i}/a.csv" for i in range(4)]).context["more"]] == \
        ["ellipsis"]
    f = input_hints.stray_file(["a.csv", "b.CSV", "c.CSV", "README.txt"], "README.txt", "/t")
    assert (f.code, f.severity, f.counts, f.context) == ("stray_file", HINT, {"files": 3}, {
        "file": "README.txt", "ending": ".CSV", "table": "/t", "pattern": "*{.CSV,.csv}"})  # as most spell it
    assert input_hints.stray_file(["a.csv", "b.csv", "README.txt"], "c.csv", "/t") is None  # named as the others
    assert input_hints.stray_file(["a.csv", "README.txt"], "README.txt", "/t") is None  # one file is no pattern


def test_columns_some_files_have_are_counted_per_file():
    f = input_hints.columns_in_some(["b.parquet"], ["a.parquet", "c.parquet"], ("country",))
    assert (f.code, f.severity, f.counts) == ("columns_in_some_files", HINT, {"have": 1, "lack": 2})
    assert f.context == {"files": 3, "missing": ["country"], "first_have": "b.parquet", "first_lack": "a.parquet"}
    assert render(f).startswith("1 of the 3 files has ['country'] (first: b.parquet), the others not (first: ")
    assert input_hints.columns_in_some([], ["a.parquet"], ["x"]) is None
    assert input_hints.columns_in_some(["a.parquet"], [], ["x"]) is None


def test_a_csv_header_unlike_the_table_is_told_by_column_or_by_count():
    f = input_hints.csv_header_mismatch("b.csv", ["CSV header does not conform", "Expected: model but found: run"])
    assert (f.code, f.severity, f.context["path"], f.context["told"]) == ("csv_header_differs", ERROR, "b.csv", "")
    assert [(g.code, g.context) for g in f.context["what"]] == [("csv_header_column", {"found": "run",
                                                                                         "expected": "model"})]
    lines = ["Number of column in CSV header is not equal to number of fields in the schema:", "Header length: 3"]
    [what] = input_hints.csv_header_mismatch("b.csv", lines).context["what"]
    assert (what.code, what.context) == ("csv_header_count", {"detail": []})  # the detail on another line: none
    [what] = input_hints.csv_header_mismatch("b.csv", [lines[0] + " Header length: 3, size: 4."]).context["what"]
    assert [(g.code, g.context) for g in what.context["detail"]] == [("csv_header_count_detail",
                                                                      {"detail": "Header length: 3, size: 4"})]


def test_a_reader_missing_is_named_by_format_and_spark_version():
    f = input_hints.missing_reader("iceberg", "4.1.0+local")
    assert (f.code, f.severity, f.context) == ("iceberg_reader_missing", HINT, {"version": "4.1.0", "minor": "4.1"})
    assert "'org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:<version>'" in render(f)
    assert "'org.apache.spark:spark-avro_2.13:4.2.1'" in render(input_hints.missing_reader("avro", "4.2.1"))
    assert input_hints.missing_reader("parquet", "4.2.1") is None
    assert input_hints.missing_source_hint(Exception("Path does not exist"), "avro") == ""


def test_a_result_over_max_result_size_names_its_likely_cause():
    f = input_hints.result_too_large("2.0 GiB", "1024.0 MiB", ("country",))
    assert (f.code, f.severity, f.context["size"], f.context["limit"]) == ("result_too_large", ERROR, "2.0 GiB",
                                                                            "1024.0 MiB")
    assert [(g.code, g.context) for g in f.context["cause"]] == [("many_slice_values", {"slices": ["country"]})]
    assert [g.code for g in input_hints.result_too_large("2.0 GiB", "1 GiB", []).context["cause"]] == ["many_groups"]


def test_an_empty_folder_and_files_in_plain_folders_are_told_from_the_folder(tmp_path):
    assert input_hints.no_data_files_hint(str(tmp_path)) == " " + render(Finding("empty_folder", HINT))
    (tmp_path / "2026" / "01").mkdir(parents=True)
    (tmp_path / "2026" / "01" / "a.csv").write_text("a\n1\n")
    assert input_hints.no_data_files_hint(str(tmp_path)).startswith(" Files of the folder lie in folders that are "
                                                                    "not key=value folders (2026/01/a.csv), and")
    assert input_hints.unlisted_files_hint(str(tmp_path), {"recursiveFileLookup": "true"}) == ""


@pytest.mark.parametrize(("data", "options", "codes", "columns"), [
    (b'id,title\n1,"Blue ""XL"" shoe, wide"\n', {}, ["csv_doubled_quotes"], ["title"]),
    (b'id;title\n1;"Blue ""XL"" shoe"\n', {"sep": ";"}, ["csv_doubled_quotes_other_separator"], ["title"]),
    (b'1,"Blue XL\nshoe"\n', {"header": "false"}, ["csv_line_break"], [None]),
    (b'id,title\n1,"a\nb"\n2,"x ""y"" z"\n', {}, ["csv_doubled_quotes", "csv_line_break"], ["title", "title"]),
    (b'id,title\n1,"Blue ""XL"" shoe"\n', {"escape": '"'}, [], []),  # the option that reads it
    (b'id,title\n1,"a\nb"\n', {"multiLine": "true"}, [], []),
    (b'id,title\n1,"Blue \\"XL\\" shoe"\n', {}, [], []),  # Spark's own escape
])
def test_csv_quoting_spark_would_misread_is_found_in_a_file_start(data, options, codes, columns):
    found = csv_quoting_problems(data, options)
    assert [f.code for f in found] == codes
    assert [f.context["in_column"][0].context["column"] if f.context["in_column"] else None for f in found] == columns
    assert all(f.context["option_key"] == "input.options" for f in found)


def test_files_under_a_temporary_name_are_named_before_spark_reads_them(tmp_path):
    """A writer still writing '3.csv.tmp' next to the finished files: the error names the file (the first 5, and
    'and more') and the pathGlobFilter that reads only the finished ones; no Spark needed, the folder is listed."""
    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.errors import InputError
    from ctcalc_spark.spark.input_hints import check_temporary_files

    (tmp_path / "one").mkdir()
    (tmp_path / "six").mkdir()
    (tmp_path / "one" / "0.csv").write_text("a\n1\n")
    (tmp_path / "one" / "3.csv.tmp").write_text("a\n")
    for i in range(6):
        (tmp_path / "six" / f"{i}.csv.part").write_text("a\n")

    def check(folder: str) -> str:
        cfg = config_from_dict({"input": {"path": str(tmp_path / folder), "format": "csv"},
                                "output": {"path": str(tmp_path / "out")}})
        with pytest.raises(InputError) as e:
            check_temporary_files([str(tmp_path / folder)], cfg)
        return str(e.value)

    assert "still being written: ['3.csv.tmp']. Spark would read" in check("one")
    assert "{pathGlobFilter: '*.csv'}" in check("one")
    assert "'4.csv.part'] and more. Spark" in check("six")


def test_a_table_folder_read_as_files_and_outputs_inside_the_input_are_refused(tmp_path):
    from ctcalc_spark.config import config_from_dict
    from ctcalc_spark.errors import ConfigError, InputError
    from ctcalc_spark.spark.input_hints import check_output_outside, check_table_format

    (tmp_path / "t" / "_delta_log").mkdir(parents=True)

    def cfg(fmt: str, output: str = "out"):
        return config_from_dict({"input": {"path": str(tmp_path / "t"), "format": fmt},
                                 "output": {"path": str(tmp_path / output)}})

    with pytest.raises(InputError, match=r"is a Delta Lake table \(it holds _delta_log/\), read as plain parquet "
                                         r"files: .* input.format: delta with Delta Lake's reader"):
        check_table_format(str(tmp_path / "t"), cfg("parquet"))
    check_table_format(str(tmp_path / "t"), cfg("delta"))  # read as the table it is
    check_output_outside(str(tmp_path / "t"), cfg("parquet"))
    with pytest.raises(ConfigError, match=r"^'output.path' '.*/t/out' is inside 'input.path' '.*/t', which is read "
                                          r"whole"):
        check_output_outside(str(tmp_path / "t"), cfg("parquet", "t/out"))
