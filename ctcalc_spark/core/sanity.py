"""Checks on user data that the metrics alone do not make visible (numpy and pandas only).

**Extreme scores.** A logit outside ``[-L, L)`` (``sanity.max_abs_logit``, default 50) puts a probability within
``e^-50`` of 0 or 1 on a row; a broken model (constant training features, unscaled inputs) produces millions of
them, and one confidently wrong such row adds ``|z|`` to the log loss sum. They are counted per group from the
logit histogram (bin ``k`` holds ``[k·h, (k+1)·h)``, so the count is exact when ``L`` is a multiple of the bin
width ``h``; otherwise ``L`` is rounded up to one): no per-row work in the scan. Saturated probabilities are
the rows already counted as ``n_clipped``.

**Rows needed for the bias.** c* is the maximum-likelihood estimate of one logit shift. Its variance is the
inverse Fisher information ``1 / Σ q(1-q)``, ``q = σ(z - c*)`` (unit weights), so with ``n`` val-bias rows

    se(c*) ≈ 1 / sqrt(n · ī),   ī = mean q(1-q) per row  (≤ p(1-p) at base rate p; = p(1-p) for a model
                                                           that predicts the base rate on every row)

and c* is within ``±δ`` with 95 % probability when ``n ≥ (1.96 / δ)² / ī``. For δ = 0.1 that is 384 / ī:
1,537 rows at ī = 0.25, 4,269 at a base rate of 10 % with an uninformative model, more for a sharp model
(small ī). ``tests/test_sanity.py`` checks the formula against simulated c* spreads. For a mean shift
(regression) ``se(c*) = s / sqrt(n)``, ``s`` the residual std, so ±0.1·s needs 385 rows.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Mapping, Sequence, TypeVar

import numpy as np
import pandas as pd

from ctcalc_spark.core._math import sigmoid
from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.core.findings import ERROR, HINT, NOTE, WARNING, Finding, render
from ctcalc_spark.core.batch import extreme_bin
from ctcalc_spark.core.summary import BinarySummary, solve_biases
from ctcalc_spark.core.windows import day_runs
from ctcalc_spark.errors import DegenerateBiasError, InputError

T = TypeVar("T")

Z_95 = 1.959963984540054
BIAS_TOLERANCE = 0.1
"""±δ on c* (logit units; regression: residual stds) that the rows-needed hint aims for, at 95 %."""
HINT_FROM = 2.0
"""The hints are printed when the median part gives c* only within more than HINT_FROM·BIAS_TOLERANCE."""
MAX_GROUPS_FOR_INFORMATION = 200
"""The per-row information is the median over at most this many groups (evenly spaced): it is a hint."""
SHOWN = 5
"""Groups named in a warning line."""


# ---- slice columns with very many values ----------------------------------------------------------

def many_slice_values_lines(metrics: pd.DataFrame, limit: int | None) -> list[str]:
    """A line per slice column with more than ``limit`` values on some day of the metrics rows (columns ds,
    slice_name, slice_value, status): how many, how many rows they made, the share without a calibrated value."""
    if limit is None or metrics.empty:
        return []
    from ctcalc_spark.core.finalize import ALL

    sliced = metrics[metrics["slice_name"] != ALL]
    if sliced.empty:
        return []
    per_day = sliced.groupby(["slice_name", "ds"])["slice_value"].nunique()
    out = []
    for name, counts in per_day.groupby(level="slice_name"):
        top = int(counts.max())
        if top <= limit:
            continue
        day = counts.droplevel("slice_name").idxmax()
        rows = sliced[sliced["slice_name"] == name]
        share = 100.0 * float((rows["status"] != "ok").mean())
        out.append(
            f"warning: slice column {name!r} has {top:,} values on {day} (more than sanity.max_slice_values = "
            f"{limit:,}): {len(rows):,} metrics rows, {share:.1f} % of them without a calibrated value. A slice is "
            "a segment to compare models in (a country, a device); a column of ids makes a metrics row and summary "
            "rows per value, and the scan's result grows toward the size of the input. Slice by a coarser column, "
            "or raise sanity.max_slice_values (null: no warning).")
    return out


# ---- extreme scores ------------------------------------------------------------------------------

def effective_limit(max_abs_logit: float, bin_width: float) -> float:
    """The limit actually counted: max_abs_logit rounded up to a multiple of the bin width."""
    return extreme_bin(max_abs_logit, bin_width) * bin_width


def extreme_counts(summaries: pd.DataFrame, by: Sequence[str], *, max_abs_logit: float,
                   bin_width: float) -> pd.DataFrame:
    """Per ``by`` group of binary summary-table rows: n_rows, n_extreme (logit outside [-L, L)), n_clipped."""
    cols = [*by, "n_rows", "n_extreme", "n_clipped"]
    if summaries.empty or "bin" not in summaries:
        return pd.DataFrame(columns=cols)
    k = extreme_bin(max_abs_logit, bin_width)
    b = summaries["bin"].to_numpy(np.int64)
    count = summaries["count"].to_numpy(np.int64)
    frame = summaries[list(by)].assign(n_rows=count, n_extreme=np.where((b >= k) | (b < -k), count, 0),
                                       n_clipped=summaries["clipped"].to_numpy(np.int64))
    sums = frame.groupby(list(by), sort=True, dropna=False, observed=True)[["n_rows", "n_extreme", "n_clipped"]].sum()
    return sums.reset_index()


def unequal_rows_line(per_run: pd.DataFrame, models: Sequence[str], where: str, split_column: str | None = None
                      ) -> str | None:
    """A warning when the compared runs were scored on different numbers of rows (``per_run``: columns model, run,
    n_rows, and n_bias when there is a val-bias split): their metrics are then over different rows, not like for
    like, e.g. a scoring job that lost a file of one pipeline's scores. With equal rows but different val-bias
    parts (n_bias), the example ids differ between the runs, so each is calibrated on other rows. ``where``: the
    days or windows the counts cover, for the message; ``split_column``: the config's columns.split, if any."""
    if per_run.empty or "n_rows" not in per_run:
        return None
    rows = per_run[per_run["model"].isin(list(models))]
    if "status" in rows:  # the runs compared: one left out (no rows, no calibrated value) is listed as such
        rows = rows[rows["status"] == "ok"]

    def spans(col: str) -> str | None:
        n = pd.to_numeric(rows[col], errors="coerce")
        if n.isna().all() or n.nunique() <= 1:
            return None
        out = []
        for model in models:
            m = n[rows["model"] == model].dropna().astype(np.int64)
            out.append(f"{model} none" if m.empty else f"{model} {m.min():,}" if m.min() == m.max()
                       else f"{model} {m.min():,} to {m.max():,}")
        return ", ".join(out)

    if counts := spans("n_rows"):
        return (f"WARNING: the compared runs were scored on different numbers of rows ({where}): {counts} per run. "
                "Their metrics are over different rows and do not compare like for like: check the scoring job of "
                "the run with fewer rows (a lost file or partition?), or compare days on which every run has the "
                "same rows." + _absent_days_text(rows, models))
    if "n_bias" in rows and (parts := spans("n_bias")):
        why = (f"The split column {split_column!r} marks other rows as val-bias in different runs" if split_column
               else "The split hashes columns.example_id, so the ids differ between the runs' scores")
        fix = ("mark the same rows in every model's scores" if split_column
               else "give every model's score of an evaluation row the same example id")
        return (f"WARNING: the compared runs have the same rows but different val-bias parts ({where}): {parts} "
                f"val-bias rows per run. {why}, and each run is calibrated on other rows: {fix}.")
    return None


def _absent_days_text(rows: pd.DataFrame, models: Sequence[str]) -> str:
    """' Days without rows: nn (runs 0, 1, 2) 2026-03-03.' from a ``missing_days`` column (comma-separated days
    per run, as compare over a range of days fills it); '' without one or when every run has every day."""
    if "missing_days" not in rows:
        return ""
    parts = []
    for model in models:
        mine = rows[(rows["model"] == model) & (rows["missing_days"].fillna("") != "")]
        if mine.empty:
            continue
        days = sorted({d for text in mine["missing_days"] for d in str(text).split(",")})
        parts.append(f"{model} (run{'s' if len(mine) > 1 else ''} {', '.join(map(str, mine['run']))}) "
                     f"{day_runs(days)}")
    return (" Days without rows: " + "; ".join(parts) + ".") if parts else ""


BACKWARDS_AUC_MIN_ROWS = 100
"""Rows per group below which :func:`backwards_auc` does not count a group (its AUC is too noisy)."""


def backwards_auc(metrics: pd.DataFrame, score: str, class_names: Sequence[str] = ()) -> Finding | None:
    """A warning when every model and run ranks the rows backwards (AUC below 0.5 in every whole-data group of
    100 rows or more): a score of the other class (1 − p, −z) or labels with 1 for the negative class give that,
    and the calibrated metric cannot repair it (a shift of the logit does not reorder rows)."""
    if metrics.empty or "auc" not in metrics:
        return None
    whole = metrics
    if "slice_name" in metrics:
        whole = metrics[(metrics["slice_name"] == ALL) & (metrics["slice_value"] == ALL)]
    auc = pd.to_numeric(whole["auc"], errors="coerce")
    auc = auc[(pd.to_numeric(whole["n_rows"], errors="coerce") >= BACKWARDS_AUC_MIN_ROWS) & auc.notna()]
    if auc.empty or auc.max() >= 0.5:
        return None
    named = {"reversed": list(class_names)[::-1], "positive": class_names[0]} if class_names else {}
    return Finding("ranked_backwards_named" if named else "ranked_backwards", WARNING, {"groups": len(auc)},
                   {"low": float(auc.min()), "high": float(auc.max()), "score": score, **named})


def one_label(whole: pd.DataFrame) -> pd.Series:
    """Which metrics rows' groups have one label on every row (base rate exactly 0 or 1); all False without a
    base rate (regression, multiclass). A zero-weight group's base rate is null: not one of them."""
    if "base_rate" not in whole:
        return pd.Series(False, index=whole.index)
    return pd.to_numeric(whole["base_rate"], errors="coerce").isin([0.0, 1.0])


def one_label_groups(whole: pd.DataFrame, label: str, class_names: Sequence[str] = ()) -> Finding | None:
    """A warning for the groups (day x model x run) whose every row has one label (:func:`one_label`), with the
    groups per label; None when there are none.

    No number of rows fits a bias to them (c* runs off to ∓∞) and their AUC is undefined; a table whose labels
    have not been joined yet, or ``columns.label`` naming a flag that is always 0, gives exactly that.
    """
    single = one_label(whole)
    if not single.any():
        return None
    rate = pd.to_numeric(whole["base_rate"], errors="coerce")
    names = (repr(class_names[0]), repr(class_names[1])) if len(class_names) == 2 else ("0", "1")
    kinds = [Finding("one_label_class", NOTE, {"groups": n}, {"name": names[k]})
             for k, n in enumerate((int((single & (rate == 0.0)).sum()), int((single & (rate == 1.0)).sum()))) if n]
    n = int(single.sum())
    return Finding("one_label_all" if n == len(whole) else "one_label_some", WARNING,
                   {"single": n, "groups": len(whole)}, {"label": label, "kinds": kinds})


PROBABILITY_LIKE_MIN_ROWS = 100
"""Rows below which :func:`probability_like_logits` says nothing (a handful of logits may all be small)."""


def probability_like_logits(summaries: pd.DataFrame, *, column: str, bin_width: float) -> Finding | None:
    """A warning when every logit of a binary job lies between 0 and 1, read from the summaries' histogram bins
    (no pass over the rows): probabilities given as ``columns.logit``. A model's logits fall on both sides of 0
    unless it predicts more than 50 % for every row, so such a column is almost surely of probabilities, which
    read as logits give every row a probability between 0.5 and about 0.73 and a log loss that means nothing."""
    if summaries.empty or "bin" not in summaries:
        return None
    b = summaries["bin"].to_numpy(np.int64)
    rows = int(summaries["count"].to_numpy(np.int64).sum())
    # bins 0 .. K hold the logits in [0, (K + 1)·h), K·h being 1 rounded up to the bin width (the scan's arithmetic)
    if rows < PROBABILITY_LIKE_MIN_ROWS or b.min() < 0 or b.max() > extreme_bin(1.0, bin_width):
        return None
    return Finding("logits_look_like_probabilities", WARNING, {"rows": rows},
                   {"column": column, "bin_width": bin_width})


def probability_like_class_logits(n_rows: int, n_probability_like: int, *, columns: Sequence[str],
                                  array_column: bool = False) -> Finding | None:
    """A warning when every valid row of a multiclass job given logits has scores in [0, 1] that sum to 1:
    probabilities (``predict_proba``'s columns, a softmax output) given as logits. Softmax of probabilities is
    close to uniform, so the log loss written is of other scores, not the model's. Logits sum to 1 with every
    class in [0, 1] only by accident, row after row. ``array_column``: the scores are one array column."""
    if n_rows < PROBABILITY_LIKE_MIN_ROWS or n_probability_like < n_rows:
        return None
    return Finding(f"{'array' if array_column else 'class'}_logits_look_like_probabilities", WARNING,
                   {"rows": n_rows}, {"columns": list(columns)})


def clipped_label_class(n_rows: int, n_clipped: int, loss_share: float, *, clip_eps: float) -> Finding | None:
    """A warning when rows of a multiclass job given probabilities give their label's class a probability below
    ``clip_eps`` (a CSV rounded to 4 digits writes 0 for p < 5e-5): each such row costs ln(1 / clip_eps), 34.5 at
    1e-15, in the log loss, so a few of them can make much of it. The multiclass metrics table has no
    ``n_clipped`` column (binary's has), so this line is where they are counted."""
    if n_clipped == 0:
        return None
    return Finding("label_class_clipped", WARNING, {"rows": n_rows, "clipped": n_clipped},
                   {"clip_eps": clip_eps, "cost": math.log(1 / clip_eps), "loss_share": loss_share})


CLASS_ORDER_MIN_ROWS = 100
"""Val-bias rows of a model below which :func:`class_order` says nothing."""
CLASS_ORDER_MARGIN = 0.1
"""How much more often (share of rows) the reordered classes must agree with the labels for a warning."""


def class_order(model: str, confusion: np.ndarray, *, names: Sequence[str] | None,
                scores: Sequence[str]) -> Finding | None:
    """A warning when a multiclass model's scores look like another class order than its labels'.

    ``confusion[i, j]``: rows with label class ``i`` whose highest score is class ``j``. When, for every label
    class, the class its rows most often score highest is a different class each time (a reordering of the
    classes, not the identity), and that order agrees with the labels on at least ``CLASS_ORDER_MARGIN`` more of
    the rows, the names or the score columns are most likely listed in another order than the data's (the
    metrics are then of the wrong classes, without an error). ``names``: ``columns.class_names`` (None when the
    labels are indices); ``scores``: the score columns, or one array column.

    >>> f = class_order("lr", np.array([[5, 90, 5], [3, 7, 90], [80, 10, 10]]), names=["a", "b", "c"],
    ...                 scores=["p0", "p1", "p2"])
    >>> f.code, f.context["order"]
    ('class_order_named', ['c', 'a', 'b'])
    >>> class_order("lr", np.array([[90, 5, 5], [7, 90, 3], [10, 10, 80]]), names=None, scores=["z"]) is None
    True
    """
    total = int(confusion.sum())
    if total < CLASS_ORDER_MIN_ROWS or confusion.shape[0] != confusion.shape[1]:
        return None
    seen = confusion.sum(axis=1) > 0
    best = confusion.argmax(axis=1)
    k = confusion.shape[0]
    if not seen.all() or len(set(best.tolist())) < k or (best == np.arange(k)).all():
        return None
    as_given, reordered = np.trace(confusion) / total, confusion[np.arange(k), best].sum() / total
    if reordered < as_given + CLASS_ORDER_MARGIN:
        return None
    context = {"model": model, "as_given": as_given, "reordered": reordered, "scores": list(scores)}
    if names is not None:  # the score column j belongs to the label named names[i] where best[i] == j
        order = [names[int(np.flatnonzero(best == j)[0])] for j in range(k)]
        return Finding("class_order_named", WARNING, {"rows": total}, {**context, "order": order})
    moves = [Finding("class_moved", NOTE, {}, {"label": i, "score": int(j)}) for i, j in enumerate(best) if i != j]
    return Finding("class_order_indices", WARNING, {"rows": total}, {**context, "moves": moves})


def extreme_scores(counts: pd.DataFrame, by: Sequence[str], *, limit: float, metric: pd.Series | None = None,
                   metric_name: str = "log_loss") -> list[Finding]:
    """Warnings for groups with extreme logits or clipped probabilities (empty when there are none), each naming
    the :data:`SHOWN` groups with the largest share of such rows.

    ``counts``: :func:`extreme_counts` rows (or metrics rows with n_rows, n_extreme, n_clipped);
    ``metric``: optional values aligned with ``counts`` shown next to each group.
    """
    if counts.empty:
        return []
    c = counts.assign(metric_value=metric.to_numpy() if metric is not None else np.nan)
    out = []
    for col, code in (("n_extreme", "extreme_logits"), ("n_clipped", "clipped_probabilities")):
        if col not in c:
            continue
        hit = c[pd.to_numeric(c[col], errors="coerce").fillna(0) > 0]
        if hit.empty:
            continue
        hit = hit.assign(share=hit[col].astype(float) / hit["n_rows"].astype(float).clip(lower=1))
        hit = hit.sort_values("share", ascending=False, kind="stable")
        shown = [Finding("extreme_group" if pd.isna(r["metric_value"]) else "extreme_group_metric", NOTE,
                         {"rows": int(r[col]), "of_rows": int(r["n_rows"])},
                         {"group": {k: r[k] for k in by}, "share": r["share"], "metric_name": metric_name,
                          "metric": float(r["metric_value"])})
                 for r in hit.head(SHOWN).to_dict("records")]  # records: column names need not be identifiers
        if len(hit) > SHOWN:
            shown.append(Finding("more_groups", NOTE, {"groups": len(hit) - SHOWN}))
        out.append(Finding(code, WARNING, {"rows": int(hit[col].sum()), "of_rows": int(c["n_rows"].sum()),
                                           "groups": len(hit), "of_groups": len(c)},
                           {"limit": limit, "shown": shown}))
    return out


def scored_extreme(extreme: Mapping[tuple[str, int], tuple[int, int, float, float]], limit: float) -> Finding | None:
    """The warning of a scoring call whose models scored logits outside [-limit, limit) (None when none):
    ``extreme`` holds per (model, run) such rows, rows, the lowest and the highest logit."""
    counts = pd.DataFrame([(*k, *v[:2]) for k, v in sorted(extreme.items())],
                          columns=["model", "run", "n_extreme", "n_rows"])
    if not (found := extreme_scores(counts, ["model", "run"], limit=limit)):
        return None
    hit = [v for v in extreme.values() if v[0]]
    shown = [replace(g, code="scored_model") if g.code == "extreme_group" else g for g in found[0].context["shown"]]
    return replace(found[0], code="scored_extreme_logits", context={
        **found[0].context, "shown": shown, "low": min(v[2] for v in hit), "high": max(v[3] for v in hit)})


def raise_on_extreme(counts: pd.DataFrame, by: Sequence[str], *, limit: float) -> None:
    """The ``sanity.on_extreme: error`` stop: an InputError naming the groups and counts (nothing written)."""
    if found := extreme_scores(counts, by, limit=limit):
        raise InputError(" ".join(render(replace(f, severity=ERROR)) for f in [*found, Finding("extreme_stop", ERROR)]))


# ---- rows needed for c* -----------------------------------------------------------------------------

def rows_needed(information: float, tolerance: float = BIAS_TOLERANCE) -> int | None:
    """Rows for c* within ±tolerance (95 %): ``(1.96 / tolerance)² / information``; None when no count reaches it."""
    if not (information > 1e-12 and math.isfinite(information)):
        return None
    return int(math.ceil((Z_95 / tolerance) ** 2 / information))


def tolerance_of(rows: float, information: float) -> float:
    """The 95 % half-width of c* from ``rows`` rows: 1.96 / sqrt(rows · information)."""
    return Z_95 / math.sqrt(max(rows, 1.0) * information) if information > 0 else math.inf


def logit_information(s: BinarySummary, c: float | DegenerateBiasError | None = None) -> float | None:
    """Mean q(1-q) per unit weight at the group's own c* (``c``, solved here when not given; c = 0 when there is
    none), from the bin centres."""
    if s.total_weight <= 0:
        return None
    if c is None:
        (c,) = solve_biases([s])
    q = sigmoid(s.centres - (c if isinstance(c, float) else 0.0))
    return float(np.sum(s.weight.sum(axis=0) * q * (1.0 - q)) / s.total_weight)


def median_information(summaries: pd.DataFrame, by: Sequence[str], bin_width: float) -> float | None:
    """Median of :func:`logit_information` over the ``by`` groups of binary summary rows (at most 200 groups)."""
    if summaries.empty or "bin" not in summaries:
        return None
    from ctcalc_spark.core.finalize import binary_summary_rows, groups

    cut = groups(summaries, by)
    summary_of = binary_summary_rows(summaries, bin_width)
    return information_of([summary_of(rows) for _, rows in information_picks(cut)])


def information_picks(groups: Sequence[T]) -> list[T]:
    """The groups (in their sorted order) whose information the median is taken of: every k-th, so that at most
    about :data:`MAX_GROUPS_FOR_INFORMATION` of them, evenly spaced."""
    return list(groups[::max(1, len(groups) // MAX_GROUPS_FOR_INFORMATION)])


def information_of(picked: Sequence[BinarySummary]) -> float | None:
    """Median of :func:`logit_information` over the ``picked`` summaries (their c* solved together)."""
    infos = [logit_information(p, c) for p, c in zip(picked, solve_biases(picked))]
    values = [info for info in infos if info is not None]
    return float(np.median(values)) if values else None


def no_calibrated_value(statuses: pd.Series, what: str = "metrics rows",
                        has_value: pd.Series | None = None) -> Finding | None:
    """A note of the ``what`` rows without a calibrated value, counted per status, or None when every one has one.

    ``has_value``: which rows have a calibrated value (default: status 'ok'); rows with a value and another
    status (e.g. incomplete_window) are counted in a second clause.
    """
    ok = (statuses == "ok") if has_value is None else has_value.astype(bool)
    bad, odd = statuses[~ok.to_numpy()], statuses[ok.to_numpy() & (statuses != "ok").to_numpy()]
    if bad.empty and odd.empty:
        return None
    parts = [Finding(code, NOTE, {str(k): int(v) for k, v in s.value_counts().items()})
             for code, s in (("statuses", bad), ("statuses_noted", odd)) if len(s)]
    return Finding("no_calibrated_value", NOTE, {"missing": len(bad), "noted": len(odd), "rows": len(statuses)},
                   {"what": what, "share": len(bad) / len(statuses), "parts": parts})


def small_bias(*, median_bias_rows: float, median_rows: float, information: float | None,
               bias_fraction: float, task: str = "binary", rows_per_day: float | None = None,
               from_base_rate: bool = False) -> Finding | None:
    """A hint: the val-bias parts' median size, the rows needed for c* within ±0.1, and what to change.

    None when the median val-bias part gives c* within ±0.2 (HINT_FROM · BIAS_TOLERANCE). ``median_rows``: rows
    per group (val-bias + val-remain); ``rows_per_day``: rows per (day, model, run), for the window suggestion;
    ``from_base_rate``: ``information`` is p(1-p) of the base rate, an upper bound (so the rows are a lower bound).
    """
    info = 1.0 if task == "regression" else information
    if info is None:
        return None
    needed = rows_needed(info)
    if needed is None:
        return Finding("bias_rows_saturated", HINT, {}, {"median_bias_rows": median_bias_rows})
    now = tolerance_of(median_bias_rows, info)
    if now <= HINT_FROM * BIAS_TOLERANCE:
        return None
    fraction = needed / median_rows if median_rows > 0 else math.inf
    rounded = _round_up(fraction) if fraction < 1.0 else None  # no fraction to name at 1 or more (inf: no rows)
    step = {"bias_fraction": bias_fraction, "fraction": rounded, "group_rows": median_rows,
            "left": None if rounded is None else 1 - rounded}
    advice = [Finding("raise_bias_fraction" if fraction <= 0.5 else "bias_fraction_most" if fraction < 1.0
                      else "bias_fraction_none", NOTE, {}, step)]
    if rows_per_day:
        days = math.ceil(needed / rows_per_day)
        advice.append(Finding("whole_windows_day" if days == 1 else "whole_windows_days", NOTE, {"days": days}, {
            "rows_per_day": rows_per_day, "week": tolerance_of(7 * rows_per_day, info),
            "month": tolerance_of(30 * rows_per_day, info)}))
    told = [] if task == "regression" else [Finding("information_base_rate" if from_base_rate else "information_rows",
                                                    NOTE, {}, {"information": info})]
    return Finding("small_bias_parts_regression" if task == "regression" else "small_bias_parts", HINT,
                   {"needed": needed}, {"median_bias_rows": median_bias_rows, "now": now, "tolerance": BIAS_TOLERANCE,
                                        "information": told, "advice": advice})


def _round_up(x: float) -> float:
    """Up to two significant digits (0.0312 -> 0.032)."""
    if x <= 0:
        return x
    scale = 10 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / scale - 1e-9) * scale


def previous_window_hint(*, median_prev_rows: float, information: float | None, rows_per_day: float | None,
                         task: str = "binary") -> str | None:
    """One line for rolling calibration: the previous windows' median size, the rows needed, a longer window.

    ``information``: p(1-p) at the base rate (an upper bound on the per-row information, so the rows needed are a
    lower bound). None when the median previous window gives c* within ±0.2 (HINT_FROM · BIAS_TOLERANCE).
    """
    info = 1.0 if task == "regression" else information
    needed = None if info is None else rows_needed(info)
    if needed is None or median_prev_rows <= 0 or tolerance_of(median_prev_rows, info) <= HINT_FROM * BIAS_TOLERANCE:
        return None
    assert info is not None
    unit = "residual stds" if task == "regression" else "logit"
    days = f" (rolling.window: rolling, rolling.days: {math.ceil(needed / rows_per_day)})" if rows_per_day else ""
    rate = "" if task == "regression" else " at this base rate (a lower bound: a sharper model needs more)"
    return (f"hint: previous windows had a median of {median_prev_rows:,.0f} rows, so the bias fitted on them is "
            f"within about ±{tolerance_of(median_prev_rows, info):.2g} {unit} (95 %) at best; about {needed:,} rows "
            f"give ±{BIAS_TOLERANCE:g}{rate}: a longer window{days} fits it better, though under drift its bias is "
            "older.")


REPLACEMENT_CHARACTER = "\ufffd"
"""What Spark's text readers put for bytes that are not UTF-8."""


def undecoded_values(frame: pd.DataFrame, columns: Mapping[str, str | None]) -> dict[str, list[str]]:
    """{shown name: up to 3 values} of ``frame``'s columns (column -> the name to show) whose text holds
    U+FFFD: files in another encoding than the reader's, so 'Köln' read as 'K\ufffdln' names a slice wrongly,
    and 'Köln' and 'Kèln', each with one byte unread, become one group."""
    found = {}
    for column, name in columns.items():
        if column not in frame or name is None:
            continue
        values = sorted(v for v in frame[column].dropna().astype(str).unique() if REPLACEMENT_CHARACTER in v)
        if values:
            found[name] = values[:3]
    return found


def not_utf8(found: Mapping[str, Sequence[str]], fmt: str, options: str, *, batch: int | None = None) -> Finding:
    """The error for :func:`undecoded_values`' findings in a ``fmt`` input read with the reader options at
    config key ``options``; ``batch``: the stream batch that read them."""
    context = {"values": dict(found), "format": fmt.upper(), "options": options}
    return Finding("not_utf8", ERROR, {}, context) if batch is None else \
        Finding("not_utf8_stream", ERROR, {}, {**context, "batch": batch})
