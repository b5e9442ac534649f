"""What is wrong with the evaluation rows, as data: a :class:`Finding` (a code, a severity, counts, context),
built by a pure function from a small aggregate the scan already collected (its tally of invalid rows per group
and code, the groups of repeated ids, the classes per group), and the one :data:`CATALOGUE` of the messages that
:func:`render` turns findings into.

A message's words live in the catalogue only; tests/golden/messages.txt holds every one rendered from a fixed
finding (``CTCALC_GOLDEN=write`` rewrites it).
"""
from __future__ import annotations

import math
import re
import string
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import pandas as pd

from ctcalc_spark.core.windows import day_runs
from ctcalc_spark.errors import yaml_list

ERROR = "error"
WARNING = "warning"
HINT = "hint"
"""The severity of a finding that says more about an error's rows (what a column holds), after its message."""
NOTE = "note"
"""The severity of a finding told with a run's results and in its log (rows that no metrics row counts)."""

ROW_REASONS = {
    1: ("null_split_or_id", "null split value or example id"),
    2: ("score_not_finite", "NaN or infinite logit/prediction"),
    3: ("probability_outside", "probability outside [0, 1]"),
    4: ("label_not_allowed", "label not allowed for the task"),
    5: ("bad_weight", "negative or non-finite weight"),
    6: ("split_value", "split value not 'bias'/'remain'"),
    7: ("text_not_number", "text that is not a number in the label, score or weight column"),
    8: ("malformed_record", "malformed record (the reader could not parse it)"),
    9: ("null_model_or_run", "null (or NaN) in the model or run column"),
    10: ("ragged_logits", "logit array length differs from the other rows of its model and run"),
    11: ("null_label", "null label"),
    12: ("null_score", "null score (logit or prediction)"),
    13: ("null_weight", "null weight"),
}
"""Codes of the scan's per-row ``invalid`` column (0 = valid) -> (the name a finding counts them under, the
reason a message, the ``uncounted`` rows and the stream's counts give). The scan packs the code into 4 bits of
its group key."""

LABEL_RULES = {"binary": "Binary labels must be 0/1 in '{}'", "regression": "Labels must be finite numbers in '{}'",
               "multiclass": "Multiclass labels must be class indices 0..K-1 in '{}' (K the classes)"}
"""Per task, what a label must be (``{}``: the label column)."""


@dataclass(frozen=True)
class Finding:
    """One thing wrong with the evaluation rows: ``code`` (a key of :data:`CATALOGUE`), ``severity``
    (:data:`ERROR` stops the run, :data:`WARNING` is told), ``counts`` (rows per reason, or other counts the
    message gives) and ``context`` (the days, an example group's keys, the column names it names)."""

    code: str
    severity: str
    counts: Mapping[str, int] = field(default_factory=dict)
    context: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Message:
    """A catalogue entry: what was found (``template``) and what to do about it (``fix``), as
    :meth:`str.format` templates over a finding's counts and context, with :class:`_Formatter`'s extras."""

    template: str
    fix: str = ""


_BACKWARDS = ("every one of the {{groups}} groups (day x model x run) ranks the rows backwards: AUC {{low:.3f}} to "
              "{{high:.3f}}, below 0.5. A score of the other class ({{score!r}} as 1 − p or −logit) or {labels} do "
              "that; the calibrated metric does not repair it (a shift does not reorder rows).")
_CLASS_SCORES_AS_PROBABILITIES = (
    "all {rows:,} rows have class scores ({columns:list}) between 0 and 1 that sum to 1: they look like "
    "probabilities, and were read as logits, so softmax flattened them and the log loss just written is of other "
    "scores.")
_ONE_LABEL = ("{groups} groups (day x model x run) have one label on every row ({{kinds:each; }} in {{label!r}}): "
              "no bias can be fitted to one class (c* runs off to infinity) and the AUC is undefined; the vanilla log "
              "loss is still written.")
_ONE_LABEL_FIX = ("If the labels have not landed yet (a join that runs later), evaluate the day again once they have; "
                  "if {label!r} is not the label (a flag that is always 0), set columns.label to the column that is.")
_CLASS_ORDER = ("model {model!r}: the highest class score matches the label on {as_given:.0%} of the val-bias rows in "
                "the class order given, and on {reordered:.0%} with the classes reordered, so the labels and the class "
                "scores ({scores:list}) are most likely in different orders and the metrics are of the wrong classes.")
_EXTREME = "{{rows:,}} of {{of_rows:,}} rows in {{groups}} of {{of_groups}} groups have {what}: {{shown:each; }}."
_EXTREME_FIX = ("Such scores usually mean broken model inputs (constant or unscaled features); a confidently wrong row "
                "adds about |logit| to the log loss sum.")
_SMALL_BIAS = ("hint: val-bias parts had a median of {{median_bias_rows:,.0f}} rows, so c* is only within about "
               "±{{now:.2g}} {unit} (95 %); about {{needed:,}} rows give ±{{tolerance:g}}{{information:each}}:")
_SMALL_BIAS_FIX = ("{advice:each; }; or set split.min_bias_rows: {needed} to give smaller parts status "
                   "too_few_bias_rows.")
_WHOLE_WINDOWS = ("fit the bias on whole previous windows instead (`ctcalc rolling`, `ctcalc compare --rolling`; "
                  "{span}, a week ±{{week:.2g}}, a month ±{{month:.2g}})")
LEGACY_CHARSETS_HINT = ("for windows-1252 (its € and curly quotes), Shift_JIS, GBK and the other encodings Java "
                        "knows, also set spark.conf: {spark.sql.legacy.javaCharsets: 'true'}")
"""How Spark 4's text readers take an encoding beyond the few they allow by default."""
_NOT_UTF8 = ("Text in the evaluation rows is not UTF-8, the encoding Spark reads {format} with: {values:undecoded} "
             "('\ufffd' stands for bytes it could not read, so values that differ there would count as one).")
_NOT_UTF8_FIX = ("Set {options}: {{encoding: 'ISO-8859-1'}} for Western European files from Excel or Windows, or the "
                 "files' own encoding (Spark reads ISO-8859-1, US-ASCII, UTF-16 and UTF-32 as they are; "
                 + LEGACY_CHARSETS_HINT.replace("{", "{{").replace("}", "}}") + "), or write the files as UTF-8.")
_DOUBLED_QUOTES = ("a quote inside a quoted field written twice ({{value!r}}{{in_column:each}}, as pandas, Excel and "
                   "Python's csv module write it), where Spark's reader takes a backslash before a quote: it would "
                   "read the value with its quotes, or split it at a {separator} inside;")
_DOUBLED_QUOTES_FIX = "{option_key}: {{escape: '{quote}'}} reads it"
_TABLE_FOLDER = ("The evaluation table {{table!r}} is {name} table (it holds {{mark}}/), read as plain {{format}} "
                 "files: its folder keeps the files of earlier versions, rows since deleted or replaced, until a "
                 "clean-up, and Spark would read those rows too.")
_READER = ("input.format {fmt} needs its reader on Spark's class path: add '{package}' to spark.jars.packages under "
           "spark.conf ({note}){more}, or pass --packages to spark-submit.")
_TABLE_FOLDER_FIX = ("Read it as a table: input.format: {{table_format}} with {reader}, or by name from the catalog: "
                     "input.table.")

CATALOGUE = {
    "invalid_rows": Message(
        "Invalid evaluation rows for ds={days:where}: {counts:reasons} (e.g. ds={ds!n}, model={model!q}, "
        "run={run!q}).",
        "{label_rule}, scores finite numbers, probabilities in [0, 1], weights >= 0, model and run set, records well "
        "formed. Fix the upstream table, or set on_invalid: drop to exclude and count them."),
    "all_rows_invalid": Message(
        "Every evaluation row for ds={days:list} is invalid ({total} rows in all: {counts:reasons})."),
    "duplicate_ids": Message(
        "{duplicate_rows} evaluation rows repeat an example id of their day, model and run (e.g. ds={ds!n}, "
        "model={model!q}, run={run!q}: {example_duplicate_rows} extra rows over {example_repeated_ids} ids, "
        "{example_conflicting_ids} with different labels); they would count twice in every metric.",
        "Deduplicate on '{example_id}' upstream, or set input.duplicate_ids: count to report them and go on."),
    "class_count_mismatch": Message(
        "'columns.class_names' lists {class_names} classes, and the logit arrays of ds={ds!n}, model={model!q}, "
        "run={run!q} hold {classes}:",
        "name one class per array element, in the same order."),
    "too_many_bias_rows": Message(
        "{bias_rows} val-bias rows for ds={first_day}..{last_day} exceed max_bias_rows_multiclass={limit};",
        "lower split.bias_fraction."),
    "labels_not_in_class_names": Message(
        "The label column {label!r} holds {labels:shown}, not in columns.class_names {class_names}:",
        "add them there in class order, or fix the labels upstream."),
    "text_labels_not_binary": Message("The label column {label!r} holds text labels {labels:shown}, not 0/1."),
    "text_labels_binary": Message(
        "The label column {label!r} holds the text labels {labels}, not 0/1:",
        "set columns.class_names: {labels:yaml}, the negative class first ({reversed:yaml} if {positive!r} is the "
        "positive one)."),
    "class_name_labels": Message(
        "The label column {label!r} holds class names ({labels:shown}), not class indices:",
        "set columns.class_names: {names:yaml} with every class in the order of the class scores (scikit-learn's "
        "predict_proba columns follow the model's classes_, sorted: that order)."),
    "text_not_number": Message("The {key} column {column!r} holds text such as {value!r}."),
    "decimal_comma": Message(
        "The {key} column {column!r} holds text such as {value!r}: a number written with a decimal comma, which Spark "
        "does not read as a number.", "Write the numbers with a decimal point (pandas: to_csv(..., decimal='.'))."),
    "rows_uncounted": Message("{rows} rows in no metrics row ({ds:day}): {reason}"),
    "repeated_ids": Message("ds={ds} model={model} run={run}: {duplicate_rows} rows repeat an example id "
                            "({repeated_ids} ids, {conflicting_ids} with different labels)"),
    "labels_two_codes": Message(
        "The label column {label!r} holds only {low:g} and {high:g}: two classes coded so, not 0/1.",
        "Set columns.class_names: {class_names:yaml}, the negative class first, or map the labels to 0/1 upstream."),
    "labels_fractions": Message(
        "The label column {label!r} holds fractions ({low:g} to {high:g}): soft labels or rates, which the binary "
        "metrics do not take.",
        "A row that stands for several events (clicks out of impressions) is two rows, label 1 weighted by the "
        "clicks and label 0 by the rest (columns.weight), which gives the same log loss."),
    "labels_whole_numbers": Message(
        "The label column {label!r} holds whole numbers up to {high:g}:",
        "classes need task: multiclass (scores in columns.logit, or one column per class in columns.class_logits or "
        "columns.class_probabilities), counts task: regression."),
    "labels_other": Message("The label column {label!r} holds values from {low:g} to {high:g} besides 0 and 1."),
    "probabilities_negative": Message(
        "{columns:holds} values from {low:g} to {high:g} outside [0, 1], negative ones among them: logits (log-odds) "
        "look like that.",
        "If they are, set {columns:as_logits}."),
    "probabilities_percent": Message("{columns:holds} values up to {high:g}:",
                                     "if they are percentages, divide them by 100 upstream."),
    "probabilities_outside": Message("{columns:holds} values up to {high:g}, outside [0, 1]."),
    "ranked_backwards": Message(
        _BACKWARDS.format(labels="labels with 1 for the negative class")),
    "ranked_backwards_named": Message(
        _BACKWARDS.format(labels="columns.class_names with the positive class first (it takes the negative one "
                                 "first: {reversed:yaml} if the score is for {positive!r})")),
    "logits_look_like_probabilities": Message(
        "all {rows:,} values of the logit column {column!r} are between 0 and 1 (to the histogram's bin width, "
        "{bin_width:g}), so every row was read as a probability between 0.5 and about 0.73.",
        "If they are probabilities, set columns.prediction: {column} and columns.logit: null, and run again: the "
        "metrics just written are of the wrong scores."),
    "class_logits_look_like_probabilities": Message(
        _CLASS_SCORES_AS_PROBABILITIES, "If they are probabilities, set columns.class_probabilities: "
        "[{columns:list}] and columns.class_logits: null, and run again."),
    "array_logits_look_like_probabilities": Message(
        _CLASS_SCORES_AS_PROBABILITIES, "If they are probabilities, write ln p as the array instead (np.log of the "
        "probabilities), or one column per class with columns.class_probabilities: [p0, p1, ...] and columns.logit: "
        "null, and run again."),
    "label_class_clipped": Message(
        "{clipped:,} of {rows:,} rows give their label's class a probability below clip_eps ({clip_eps:g}), most "
        "likely 0 after rounding in the file; each such row costs ln(1/clip_eps) = {cost:.1f} in the log loss, and "
        "together they make {loss_share:.0%} of it.",
        "If the file rounds the probabilities, write them with more digits (or as logits: columns.class_logits); if "
        "the model itself gives 0, the log loss is right."),
    "not_utf8": Message(_NOT_UTF8, _NOT_UTF8_FIX + " Nothing was written."),
    "not_utf8_stream": Message("Stream batch {batch}: " + _NOT_UTF8,
                               _NOT_UTF8_FIX + " Then start the stream again: the batch is read again."),
    "stream_invalid_rows": Message(
        "Invalid rows in stream batch {batch}: {counts:reasons}.", "Fix the producer, or set on_invalid: drop to "
        "exclude them and count them in stream_counts and n_invalid."),
    "no_event_time": Message("null or unparsable {event_time!r}"),
    "no_rows_for_days": Message("No evaluation rows for ds={missing_days:days} in {where!r}{held:each}; check the "
                                "dates and the 'columns.ds' name{skip:each}."),
    "days_held": Message(" (of the {asked} days asked for, the table has rows for {held}: {found:runs})"),
    "allow_missing_days": Message(", or pass --allow-missing-days to skip such days"),
    "allow_missing_needs_a_day": Message(" (--allow-missing-days skips days without rows, and needs one day with "
                                         "rows)"),
    "no_summaries_for_days": Message(
        "No summaries partition for ds={missing_days:days} under {where!r}; run `ctcalc evaluate --ds {todo}` for "
        "those days first (available: {available:runs}){skip:each}."),
    "days_skipped": Message("no evaluation rows for {missing} of {asked} days (skipped): {missing_days:days}"),
    "csv_quoting": Message("The CSV file {file} of the evaluation table has {found:each; and }. Nothing was read."),
    "csv_quoting_problems": Message("{found:each; and }"),
    "csv_doubled_quotes": Message(_DOUBLED_QUOTES.format(separator="comma"), _DOUBLED_QUOTES_FIX),
    "csv_doubled_quotes_other_separator": Message(_DOUBLED_QUOTES.format(separator="{separator!r}"),
                                                  _DOUBLED_QUOTES_FIX),
    "csv_line_break": Message(
        "a line break inside a quoted field ({value!r}{in_column:each}), where Spark's reader takes each line for a "
        "record: the rest of the value would be a record of its own (a row without a date);",
        "{option_key}: {{multiLine: 'true'}} reads it (each file whole, in one task)"),
    "in_column": Message(" in column {column!r}"),
    "temporary_files": Message(
        "The evaluation table {table!r} holds file(s) under a temporary name, still being written: {files}{more:each}. "
        "Spark would read their rows with the rest: part of them now, and the same rows again once the writer renames "
        "the file.", "Run again when the writer is done, or set input.options: {{pathGlobFilter: '{pattern}'}} to read "
        "only the files named so."),
    "and_more": Message(" and more"),
    "ellipsis": Message(", …"),
    "empty_folder": Message("The folder is empty: there are no files to read the table's columns and rows from."),
    "files_in_plain_folders": Message(
        "Files of the folder lie in folders that are not key=value folders ({shown:list}{more:each}), and Spark "
        "reads a table's own files and those of key=value folders (ds=2026-01-05/) only:",
        "set input.options: {{recursiveFileLookup: 'true'}} to read every file below it."),
    "stray_file": Message("{file} is not named like the folder's other files ({files:,} end in {ending}):",
                          "if it is not part of the table, move it out of {table!r}, or set input.options: "
                          "{{pathGlobFilter: '{pattern}'}} so Spark reads only the files named so."),
    "output_inside_input": Message(
        "'output.path' {output!r} is inside 'input.path' {input!r}, which is read whole (it has no <ds>=<day> "
        "folders): the job would read its own metrics and summaries as evaluation rows.",
        "Write the outputs beside the input (e.g. output.path: a sibling folder)."),
    "delta_table_folder": Message(_TABLE_FOLDER.format(name="a Delta Lake"), _TABLE_FOLDER_FIX.format(
        reader="Delta Lake's reader on Spark's class path (spark.conf: {{spark.jars.packages: 'io.delta:delta-spark_"
               "2.13:<version>', spark.sql.extensions: io.delta.sql.DeltaSparkSessionExtension}})")),
    "hudi_table_folder": Message(_TABLE_FOLDER.format(name="an Apache Hudi"), _TABLE_FOLDER_FIX.format(
        reader="Apache Hudi's Spark bundle on Spark's class path")),
    "iceberg_table_folder": Message(_TABLE_FOLDER.format(name="an Iceberg"), _TABLE_FOLDER_FIX.format(
        reader="the Iceberg runtime on Spark's class path and an Iceberg catalog")),
    "avro_reader_missing": Message(_READER.format(fmt="avro", package="org.apache.spark:spark-avro_2.13:{version}",
                                                  note="Spark's own module, this Spark's version", more="")),
    "delta_reader_missing": Message(_READER.format(
        fmt="delta", package="io.delta:delta-spark_2.13:<version>",
        note="the Delta Lake release for Spark {minor}, from Delta's compatibility table",
        more=" and set spark.sql.extensions: io.delta.sql.DeltaSparkSessionExtension")),
    "iceberg_reader_missing": Message(_READER.format(
        fmt="iceberg", package="org.apache.iceberg:iceberg-spark-runtime-{minor}_2.13:<version>",
        note="the Iceberg runtime for Spark {minor}", more=" and configure an Iceberg catalog")),
    "csv_header_differs": Message(
        "CSV file {path} of the evaluation table does not match the other files: {what:each} (the table's column "
        "names and order come from one file's header).{told} Spark reads CSV columns by position, so this file "
        "would be read into the wrong columns.", "Write every file with the same columns in the same order (or set "
        "input.options: {{enforceSchema: 'true'}} to read by position regardless, at your own risk)."),
    "csv_header_column": Message("its header has column {found!r} where the table has {expected!r}"),
    "csv_header_count": Message("its header has another number of columns than the table{detail:each}"),
    "csv_header_count_detail": Message(" ({detail})"),
    "foreign_files": Message("Cannot read the evaluation table {table!r} as input.format {format}:{hint}"),
    "columns_in_some_files": Message(
        "{have:,} of the {files:,} files {have:has|have} {missing} (first: {first_have}), {lack:the other|the others} "
        "not (first: {first_lack}): Spark took the columns from one of those.",
        "Set input.options: {{mergeSchema: 'true'}} to read every file's columns (rows of files without them are then "
        "invalid rows, counted, with null there), or evaluate only the days whose files have them."),
    "result_too_large": Message(
        "The scan's result ({size} and more) is larger than spark.driver.maxResultSize ({limit}): the summaries have "
        "a row per (day, model, run, slice value, split, label, histogram bin), and {cause:each}.",
        "Slice by a coarser column (a segment such as a country), evaluate fewer days at once, or raise "
        "spark.driver.maxResultSize (spark.conf, or spark-submit --conf) with the driver's memory."),
    "many_slice_values": Message("a slice column with very many values (columns.slices: {slices}) makes summary rows "
                                 "per value"),
    "many_groups": Message("very many models and runs, or a very small histogram.bin_width, make many summary rows"),
    "no_calibrated_value": Message("{missing} of {rows} {what} ({share:.1%}) have no calibrated value{parts:each}."),
    "statuses": Message(": {counts:pairs}"),
    "statuses_noted": Message("; {total} have one with a note: {counts:pairs}"),
    "one_label_all": Message("All " + _ONE_LABEL.format(groups="{groups}"), _ONE_LABEL_FIX),
    "one_label_some": Message(_ONE_LABEL.format(groups="{single} of the {groups}"), _ONE_LABEL_FIX),
    "one_label_class": Message("{groups} hold only {name}"),
    "class_order_named": Message(_CLASS_ORDER, "If the score columns are those of {order} in turn, set "
                                               "columns.class_names: {order:yaml}."),
    "class_order_indices": Message(_CLASS_ORDER, "The rows of each label score highest on another class "
                                                 "({moves:each, }): check how the labels were encoded."),
    "class_moved": Message("label {label} -> score {score}"),
    "extreme_logits": Message(_EXTREME.format(what="logits outside [-{limit:g}, {limit:g})"), _EXTREME_FIX),
    "clipped_probabilities": Message(_EXTREME.format(what="probabilities clipped at 0 or 1"), _EXTREME_FIX),
    "extreme_group": Message("{group:keys}: {rows:,} of {of_rows:,} rows ({share:.1%})"),
    "extreme_group_metric": Message("{group:keys}: {rows:,} of {of_rows:,} rows ({share:.1%}, {metric_name} "
                                    "{metric:.4g})"),
    "more_groups": Message("{groups} more"),
    "scored_extreme_logits": Message(
        "{rows:,} of {of_rows:,} scored rows ({groups} of {of_groups} models) have logits outside [-{limit:g}, "
        "{limit:g}) (sanity.max_abs_logit), from {low:,.6g} to {high:,.6g}: {shown:each; }.",
        "Such scores come from broken inputs: features constant in training (ctcalc train names them) or unscaled "
        "ones; a confidently wrong row adds about |logit| to the log loss."),
    "scored_model": Message("{group[model]} run {group[run]}: {rows:,} of {of_rows:,} ({share:.1%})"),
    "extreme_stop": Message("Nothing was written.", "Fix the model or its inputs, raise sanity.max_abs_logit, or set "
                                                    "sanity.on_extreme: warn to write the metrics anyway."),
    "bias_rows_saturated": Message(
        "hint: val-bias parts had a median of {median_bias_rows:,.0f} rows, and the predictions are so saturated "
        "(q(1-q) ≈ 0 on every row) that no number of rows pins c* down;", "check the model first."),
    "small_bias_parts": Message(_SMALL_BIAS.format(unit="logit"), _SMALL_BIAS_FIX),
    "small_bias_parts_regression": Message(_SMALL_BIAS.format(unit="residual stds"), _SMALL_BIAS_FIX),
    "information_rows": Message(" at this data's mean q(1-q) of {information:.3g} per row"),
    "information_base_rate": Message(" at this base rate's p(1-p) of {information:.3g} (a lower bound: a sharper "
                                     "model needs more)"),
    "raise_bias_fraction": Message("raise split.bias_fraction from {bias_fraction:g} to {fraction:g}"),
    "bias_fraction_most": Message("a split.bias_fraction of {fraction:g} would reach that with {group_rows:,.0f} "
                                  "rows per group but leave the metric only {left:.0%} of them"),
    "bias_fraction_none": Message("no split.bias_fraction reaches that with {group_rows:,.0f} rows per group"),
    "whole_windows_day": Message(_WHOLE_WINDOWS.format(span="1 day of {rows_per_day:,.0f} rows reaches it")),
    "whole_windows_days": Message(_WHOLE_WINDOWS.format(span="{days} days of {rows_per_day:,.0f} rows reach it")),
}
"""Finding code -> its message."""


class _Formatter(string.Formatter):
    """:meth:`str.format` with ``!q`` (a value quoted, or null), ``!n`` (a value as it is, or null), and the
    specs ``:reasons`` (counts per row reason as '<n> rows: <reason>; ...'; a reason not of
    :data:`ROW_REASONS` is a catalogue code, rendered from the same fields), ``:where`` (days as one day, a
    range and its count, or 'unknown (rows without a date)'), ``:day`` ('ds=<day>', or 'no date' for None),
    ``:runs`` (days as runs of days, :func:`day_runs`; 'none' for no days), ``:days`` (the same, 5 runs shown,
    and the count), ``:each<sep>`` (a list of findings rendered, joined by <sep>), ``:pairs`` (a mapping as
    'k v, ...'), ``:keys`` (a mapping as 'k=v ...'), ``:undecoded`` (values per column as "'c': ['v', ...]; ..."),
    ``:<one>|<more>`` (<one> for a count of 1, else <more>), ``:list`` (joined by ', '), ``:yaml`` (a YAML
    flow list), ``:shown`` (the first :data:`LABELS_SHOWN` of a list, and 'and more'), and for the score
    columns of a job ``:holds`` ('The prediction column 'p' holds', 'The class probability columns [...] hold')
    and ``:as_logits`` (the columns settings that read them as logits)."""

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        if conversion in ("q", "n"):
            return "null" if value is None else repr(str(value)) if conversion == "q" else str(value)
        return super().convert_field(value, conversion)

    def vformat(self, format_string: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        self.fields = kwargs  # for ``:reasons``
        return super().vformat(format_string, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == "reasons":
            text = dict(ROW_REASONS.values())
            return "; ".join(f"{n} rows: " + (text[name] if name in text else render(Finding(name, NOTE, {},
                                                                                                self.fields)))
                             for name, n in value.items())
        if format_spec == "where":
            return "unknown (rows without a date)" if not value else value[0] if len(value) == 1 else \
                f"{len(value)} days ({value[0]}..{value[-1]})"
        if format_spec == "runs":
            return day_runs(value) or "none"
        if format_spec == "days":  # a long stretch of days reads as a few ranges and a count
            return day_runs(value, shown=5) + (f" ({len(value)} days)" if len(value) > 1 else "")
        if format_spec == "day":
            return "no date" if value is None else f"ds={value}"
        if format_spec.startswith("each"):
            return format_spec[4:].join(render(f) for f in value)
        if format_spec == "pairs":
            return ", ".join(f"{k} {v}" for k, v in value.items())
        if format_spec == "keys":
            return " ".join(f"{k}={v}" for k, v in value.items())
        if format_spec == "undecoded":
            return "; ".join(f"{name!r}: {list(values)}" for name, values in value.items())
        if "|" in format_spec:
            return format_spec.split("|")[value != 1]
        if format_spec == "list":
            return ", ".join(value)
        if format_spec == "shown":
            return f"{list(value[:LABELS_SHOWN])}{' and more' if len(value) > LABELS_SHOWN else ''}"
        if format_spec == "yaml":
            return yaml_list(value)
        if format_spec == "holds":
            return f"The prediction column {value[0]!r} holds" if len(value) == 1 else \
                f"The class probability columns {list(value)} hold"
        if format_spec == "as_logits":
            return f"columns.logit: {value[0]} and columns.prediction: null" if len(value) == 1 else \
                f"columns.class_logits: [{', '.join(value)}] and columns.class_probabilities: null"
        return super().format_field(value, format_spec)


def render(finding: Finding) -> str:
    """The message of ``finding``: its catalogue template and fix, filled in from its counts and context (the
    fields ``counts``, ``total`` (their sum) and ``label_rule`` (from context ``task`` and ``label``) besides);
    'WARNING: ' in front of a warning."""
    message = CATALOGUE[finding.code]
    fields = {**finding.context, **finding.counts, "counts": finding.counts, "total": sum(finding.counts.values())}
    if "task" in finding.context:
        fields["label_rule"] = LABEL_RULES[finding.context["task"]].format(finding.context.get("label"))
    text = " ".join(filter(None, [message.template, message.fix]))
    return ("WARNING: " if finding.severity == WARNING else "") + _Formatter().format(text, **fields)


def _value(v: object) -> str | None:
    """A key of an example row as a finding holds it: None for a null or NaN, else its text."""
    return None if v is None or (not isinstance(v, (str, bytes)) and bool(pd.isna(v))) else str(v)


def reason_totals(tally: pd.DataFrame) -> dict[str, int]:
    """Rows per reason name (:data:`ROW_REASONS`, in code order) of a tally with columns ``invalid`` and
    ``count`` (code 0, valid rows, left out)."""
    by_code = tally[tally["invalid"] != 0].groupby("invalid")["count"].sum().sort_index()
    return {ROW_REASONS[int(code)][0]: int(n) for code, n in by_code.items()}


def invalid_rows(tally: pd.DataFrame, *, model: str, run: str, task: str, label: str) -> Finding:
    """The error for invalid rows that stop the run: ``tally`` rows per (ds, ``model``, ``run``, ..., invalid code)
    with column ``count`` (ds null for rows without a date); the example group is the first dated one."""
    dated = tally[tally["ds"].notna()]
    first = (dated if not dated.empty else tally).iloc[0]
    return Finding("invalid_rows", ERROR, reason_totals(tally), {
        "days": sorted(dated["ds"].astype(str).unique()), "ds": _value(first["ds"]), "model": _value(first[model]),
        "run": _value(first[run]), "task": task, "label": label})


def stream_invalid_rows(tally: pd.DataFrame, no_event_time: int, *, batch: int, event_time: str) -> Finding | None:
    """The error for a stream batch's invalid rows (``tally`` as for :func:`invalid_rows`) and rows without an
    event time, or None when there are none."""
    counts = {**reason_totals(tally), **({"no_event_time": no_event_time} if no_event_time else {})}
    return Finding("stream_invalid_rows", ERROR, counts, {"batch": batch, "event_time": event_time}) if counts else None


def missing_days(days: Sequence[str], present: Sequence[str], *, where: str, allow_missing: bool) -> Finding | None:
    """What the ``days`` asked for without rows (those not in ``present``) mean for a run that reads ``where``:
    the error that stops it (days missing without ``allow_missing``, or every day missing), the note of the days
    it skips, or None when every day has rows."""
    missing = sorted(set(days) - set(present))
    if not missing:
        return None
    counts, context = {"missing": len(missing), "asked": len(days)}, {"missing_days": missing, "where": where}
    if allow_missing and len(missing) < len(days):
        return Finding("days_skipped", NOTE, counts, context)
    found = sorted(set(days) & set(present))
    held = [Finding("days_held", NOTE, {"asked": len(days), "held": len(found)}, {"found": found})] if found else []
    skip = [] if len(days) == 1 else [Finding("allow_missing_needs_a_day" if allow_missing else "allow_missing_days",
                                              NOTE)]
    return Finding("no_rows_for_days", ERROR, counts, {**context, "held": held, "skip": skip})


def missing_summaries(days: Sequence[str], available: Sequence[str], *, where: str,
                      allow_missing: bool) -> Finding | None:
    """The error that stops a run over the daily summaries under ``where`` (those of the days ``available``) for
    the ``days`` without them that :func:`missing_days` stops on, naming the evaluate command that writes them;
    None when it goes on."""
    found = missing_days(days, available, where=where, allow_missing=allow_missing)
    if found is None or found.severity != ERROR:
        return None
    runs = day_runs(found.context["missing_days"], shown=len(days))
    todo = runs.replace(", ", ",") if runs.count(",") < 5 else "..."
    return replace(found, code="no_summaries_for_days", context={**found.context, "available": sorted(available),
                                                                  "todo": todo})


def all_rows_invalid(days: Sequence[str], tally: pd.DataFrame) -> Finding:
    """The error for ``days`` that have rows, none of them valid; ``tally`` as for :func:`invalid_rows`."""
    return Finding("all_rows_invalid", ERROR, reason_totals(tally), {"days": list(days)})


def duplicate_ids(found: pd.DataFrame, example_id: str) -> Finding | None:
    """The error for repeated example ids (``found``: per (ds, model, run) with some, n_duplicate_rows,
    n_repeated_ids, n_conflicting_ids; its first row is the example), or None when there are none."""
    if found.empty:
        return None
    r = found.iloc[0]
    return Finding("duplicate_ids", ERROR, {
        "duplicate_rows": int(found["n_duplicate_rows"].sum()), "example_duplicate_rows": int(r["n_duplicate_rows"]),
        "example_repeated_ids": int(r["n_repeated_ids"]), "example_conflicting_ids": int(r["n_conflicting_ids"])},
        {"ds": _value(r["ds"]), "model": _value(r["model"]), "run": _value(r["run"]), "example_id": example_id})


def uncounted_rows(uncounted: pd.DataFrame) -> list[Finding]:
    """A note per (ds, reason) of the rows that no metrics row counts (``uncounted``: columns ds, None for rows
    without a date, reason and n_rows)."""
    return [Finding("rows_uncounted", NOTE, {"rows": int(r.n_rows)}, {"ds": _value(r.ds), "reason": r.reason})
            for r in uncounted.itertuples(index=False)]


def repeated_ids(found: pd.DataFrame) -> list[Finding]:
    """A note per (ds, model, run) whose rows repeat example ids (``found`` as for :func:`duplicate_ids`)."""
    return [Finding("repeated_ids", NOTE, {"duplicate_rows": int(r.n_duplicate_rows),
                                           "repeated_ids": int(r.n_repeated_ids),
                                           "conflicting_ids": int(r.n_conflicting_ids)},
                    {"ds": _value(r.ds), "model": _value(r.model), "run": _value(r.run)})
            for r in found.itertuples(index=False)]


LABELS_SHOWN = 20
"""Distinct labels a message shows at most (the job reads one more, to know there are more)."""


def text_labels(label: str, labels: Sequence[str], *, task: str, class_names: Sequence[str]) -> Finding | None:
    """What the labels that stopped a binary or multiclass run are, from up to ``LABELS_SHOWN + 1`` of them
    (sorted here): names not in ``class_names`` (when given), two text labels (the class_names that read them),
    other text labels of a binary job, or class names of a multiclass one; None when there are none."""
    labels = sorted(labels)
    if not labels:
        return None
    context: dict[str, Any] = {"label": label, "labels": labels}
    if class_names:
        return Finding("labels_not_in_class_names", HINT, {}, {**context, "class_names": list(class_names)})
    if task != "binary":
        return Finding("class_name_labels", HINT, {}, {**context, "names": labels[:LABELS_SHOWN]})
    if len(labels) != 2:
        return Finding("text_labels_not_binary", HINT, {}, context)
    return Finding("text_labels_binary", HINT, {}, {**context, "reversed": labels[::-1], "positive": labels[0]})


_DECIMAL_COMMA = re.compile(r"\s*[-+]?\d*,\d+(?:[eE][-+]?\d+)?\s*")


def text_not_number(key: str, column: str, value: str) -> Finding:
    """What a ``key`` column (label, score, weight) that stopped the run on text holds, from one such ``value``
    (its first 40 characters shown): a number written with a decimal comma, or other text."""
    return Finding("decimal_comma" if _DECIMAL_COMMA.fullmatch(value) else "text_not_number", HINT, {},
                   {"key": key, "column": column, "value": value[:40]})


def class_count_mismatch(classes: pd.DataFrame, class_names: Sequence[str], keys: Sequence[str]) -> Finding | None:
    """The error for a multiclass job whose logit arrays hold another number of classes than
    ``columns.class_names`` lists (``classes``: per (ds, model, run) as ``keys`` name them, the number ``_k``),
    or None when they agree or no names are given."""
    wrong = classes[classes["_k"] != len(class_names)] if class_names else classes.iloc[:0]
    if wrong.empty:
        return None
    r = wrong.iloc[0]
    ds, model, run = (_value(r[k]) for k in keys)
    return Finding("class_count_mismatch", ERROR, {"class_names": len(class_names), "classes": int(r["_k"])},
                   {"ds": ds, "model": model, "run": run})


def too_many_bias_rows(bias_rows: int, limit: int, days: Sequence[str]) -> Finding | None:
    """The error for more val-bias rows than a multiclass job holds in memory (``limit``), or None."""
    if bias_rows <= limit:
        return None
    return Finding("too_many_bias_rows", ERROR, {"bias_rows": bias_rows, "limit": limit},
                   {"first_day": days[0], "last_day": days[-1]})


def binary_labels(label: str, *, low: float, high: float, whole: bool, zeros: int, ones: int) -> Finding | None:
    """What the labels other than 0 and 1 of a binary job are, from one aggregate of them: their lowest and
    highest value, whether all are whole numbers, and the rows labelled 0 and 1; None when there are none (or
    they are not finite): two classes coded -1/1 or 1/2 (``columns.class_names`` reads them), fractions, whole
    numbers (classes or counts), or other values."""
    if low is None or not all(map(math.isfinite, (low, high))):
        return None
    counts, context = {"zeros": zeros, "ones": ones}, {"label": label, "low": low, "high": high}
    pair = {-1.0: (-1.0, 1.0), 2.0: (1.0, 2.0)}.get(low) if low == high and zeros == 0 and ones else None
    if pair is not None:
        context.update(low=pair[0], high=pair[1], class_names=[f"{v:g}" for v in pair])
        code = "labels_two_codes"
    else:
        code = "labels_fractions" if 0.0 < low and high < 1.0 else \
            "labels_whole_numbers" if whole and low >= 0.0 else "labels_other"
    return Finding(code, HINT, counts, context)


def probabilities_outside(columns: Sequence[str], *, low: float, high: float) -> Finding | None:
    """What probability ``columns`` (binary: the prediction; multiclass: one per class) hold outside [0, 1], from
    the lowest and highest such value: logits (negative values), percentages (up to 100), or other values;
    None when there are none (or they are not finite)."""
    if low is None or not (math.isfinite(low) and math.isfinite(high)):
        return None
    code = "probabilities_negative" if low < 0.0 else "probabilities_percent" if high <= 100.0 else \
        "probabilities_outside"
    return Finding(code, HINT, {}, {"columns": list(columns), "low": low, "high": high})
