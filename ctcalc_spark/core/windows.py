"""Calendar and rolling windows over ``ds`` and rolling (previous-window) calibration from daily summaries.

Pure: numpy and pandas only. A window's summary is the **sum** of its daily
summary rows (every split merged: the bias is fitted on *all* of a window),
then finalised by :mod:`ctcalc_spark.core.summary`; daily metric values are never
averaged.

Windows (``WindowSpec.kind``):

* ``day``: one ``ds``; the previous window is the day before.
* ``week``: ISO week, Monday..Sunday, labelled ``2026-W47``.
* ``month``: calendar month, labelled ``2026-11``.
* ``rolling``: the ``days`` days ending at a ``ds``, labelled
  ``2026-11-15..2026-11-21``; its previous window is the ``days`` days right
  before it (disjoint, so the bias is never fitted on the rows it is applied to).
* ``fixed``: fixed-length event-time windows of ``seconds`` seconds aligned to
  the Unix epoch (the streaming job's tumbling windows), ``[start, end)``
  instants in UTC, labelled by the start ``20261115T000000``; keyed by event
  time, not by ``ds`` (:func:`fixed_window`).

Both jobs finalise windows with :func:`finalize_windows`: the batch rolling job
on windows of daily summary rows (:func:`rolling_metrics`), the streaming job on
event-time windows of per-batch summary rows (:func:`sum_windows`). One
finalizer, one row schema (:data:`ROLLING_TYPES`), one status vocabulary.

Rolling calibration (the paper's stock-return setting): with ``c*(t-1)``
fitted on all rows of window ``t-1``, the calibrated metric of window ``t`` is
the vanilla metric of window ``t``'s rows shifted by ``c*(t-1)``:
``BinarySummary.log_loss(c)`` (histogram path; its error bound is reported per
row as ``calibrated_bound``) or ``RegressionSummary.mse(c)`` (exact).
"""
from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from collections import defaultdict
from typing import Any, Callable, Collection, Iterable, Iterator, Mapping, Sequence, TypeVar

import numpy as np
import pandas as pd

from ctcalc_spark.errors import ConfigError, DegenerateBiasError
from ctcalc_spark.core.days import parse_day
from ctcalc_spark.core.finalize import ALL
from ctcalc_spark.core.solvers import STATUS_OK, STATUS_ZERO_WEIGHT
from ctcalc_spark.core.state import BINARY, MERGES, STATES
from ctcalc_spark.core.summary import (
    BinarySummary,
    RegressionSummary,
    bias_error_bound,
    solve_biases,
)

T = TypeVar("T")

WINDOW_KINDS = ("day", "week", "month", "rolling", "fixed")
US = 1_000_000
"""Microseconds per second: fixed windows are handled in integer microseconds since the epoch (UTC)."""
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)

STATUS_FIRST_WINDOW = "first_window"
STATUS_MISSING_PREVIOUS = "missing_previous_window"
STATUS_EMPTY_WINDOW = "empty_window"
STATUS_INCOMPLETE_WINDOW = "incomplete_window"
STATUS_INCOMPLETE_PREVIOUS = "incomplete_previous_window"
_PREVIOUS_DEGENERATE = {
    "no_bias_rows": "previous_window_empty",
    STATUS_ZERO_WEIGHT: "previous_window_empty",
    "bias_single_class_negative": "previous_window_no_positives",
    "bias_single_class_positive": "previous_window_no_negatives",
}

METRIC_NAME = {"binary": "log_loss", "regression": "mse"}

# Rolling table columns after the partition column ds: name -> 'string' | 'long' | 'double'. The day counts
# (n_days, n_days_expected, prev_n_days) are null for fixed (event-time) windows, which are complete once closed.
ROLLING_TYPES: dict[str, str] = {
    "task": "string", "window_kind": "string", "window": "string", "window_start": "string",
    "window_end": "string", "prev_window": "string", "model": "string", "run": "string",
    "slice_name": "string", "slice_value": "string", "metric": "string",
    "n_days": "long", "n_days_expected": "long", "prev_n_days": "long",
    "n_rows": "long", "prev_n_rows": "long", "weight": "double", "prev_weight": "double",
    "vanilla": "double", "calibrated": "double", "calibrated_bound": "double", "calibrated_exact": "double",
    "calibration_gain": "double", "best_shift_gain": "double",
    "bias": "double", "prev_bias": "double", "bias_change": "double",
    "calibration": "double", "mean_prediction": "double", "mean_label": "double",
    "bias_status": "string", "status": "string",
}


# ---- windows ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class WindowSpec:
    """Which windows: ``kind`` in day/week/month/rolling/fixed; ``days`` is the rolling length, ``seconds``
    the fixed length."""

    kind: str = "day"
    days: int = 7
    seconds: int = 0

    def __post_init__(self) -> None:
        if self.kind not in WINDOW_KINDS:
            raise ConfigError(f"Window kind must be one of {list(WINDOW_KINDS)}, got {self.kind!r}.")
        if self.kind == "rolling" and self.days < 1:
            raise ConfigError(f"A rolling window needs days >= 1, got {self.days}.")
        if self.kind == "fixed" and self.seconds < 1:
            raise ConfigError(f"A fixed window needs a length of seconds >= 1, got {self.seconds}.")

    @classmethod
    def from_config(cls, rolling: Any) -> WindowSpec:
        """From a :class:`ctcalc_spark.config.RollingConfig`."""
        return cls(rolling.window, int(rolling.days))

    @property
    def label(self) -> str:
        """The spec as a partition value: 'day', 'week', 'month', 'rolling_<N>d' or 'fixed_<S>s'."""
        if self.kind == "rolling":
            return f"rolling_{self.days}d"
        return f"fixed_{self.seconds}s" if self.kind == "fixed" else self.kind

    @property
    def calendar(self) -> bool:
        """Whether windows are made of whole days keyed by ``ds`` (every kind but 'fixed')."""
        return self.kind != "fixed"


@dataclass(frozen=True, order=True)
class Window:
    """Calendar windows: the inclusive range of days [start, end] (ISO dates). Fixed windows: the instants
    [start, end) as 'YYYY-MM-DD HH:MM:SS' (UTC). With its label."""

    start: str
    end: str
    label: str

    @property
    def n_days(self) -> int:
        return (_date(self.end) - _date(self.start)).days + 1

    def days(self, until: str | None = None) -> list[str]:
        """Every ds of the window (up to ``until`` inclusive, if given)."""
        last = min(_date(self.end), _date(until)) if until else _date(self.end)
        d0 = _date(self.start)
        return [(d0 + dt.timedelta(days=i)).isoformat() for i in range((last - d0).days + 1)]

    def contains(self, ds: str) -> bool:
        return self.start <= ds <= self.end


def _date(ds: str) -> dt.date:
    day = parse_day(ds)
    if day is None:
        raise ConfigError(f"Expected a date like 2026-11-21, got {ds!r}.")
    return day


def day_runs(days: Sequence[str], shown: int = 3) -> str:
    """Sorted ISO days as runs of consecutive days: '2025-01-01..2025-12-31', '2026-03-01, 2026-03-03..2026-03-05'
    (the first ``shown`` runs, then a count)."""
    runs: list[list[str]] = []
    for d in days:
        if runs and _date(d) - _date(runs[-1][-1]) == dt.timedelta(days=1):
            runs[-1].append(d)
        else:
            runs.append([d])
    text = ", ".join(r[0] if len(r) == 1 else f"{r[0]}..{r[-1]}" for r in runs[:shown])
    more = len(runs) - shown
    return text + (f" and {more} more stretch{'es' if more != 1 else ''}" if more > 0 else "")


def window_of(ds: str, spec: WindowSpec) -> Window:
    """The window containing ``ds`` (for 'rolling': the ``days`` days ending at ``ds``)."""
    if not spec.calendar:
        raise ConfigError(f"Window kind {spec.kind!r} is keyed by event time, not by a day: use fixed_window().")
    d = _date(ds)
    if spec.kind == "day":
        return Window(d.isoformat(), d.isoformat(), d.isoformat())
    if spec.kind == "week":
        start = d - dt.timedelta(days=d.weekday())
        year, week, _ = start.isocalendar()
        return Window(start.isoformat(), (start + dt.timedelta(days=6)).isoformat(), f"{year}-W{week:02d}")
    if spec.kind == "month":
        start = d.replace(day=1)
        nxt = (start + dt.timedelta(days=32)).replace(day=1)
        return Window(start.isoformat(), (nxt - dt.timedelta(days=1)).isoformat(), f"{d.year}-{d.month:02d}")
    start = d - dt.timedelta(days=spec.days - 1)
    return Window(start.isoformat(), d.isoformat(), f"{start.isoformat()}..{d.isoformat()}")


def previous_window(w: Window, spec: WindowSpec) -> Window:
    """The window right before ``w`` (disjoint from it)."""
    if not spec.calendar:
        return fixed_window(window_start_us(w) - spec.seconds * US, spec)
    day_before = (_date(w.start) - dt.timedelta(days=1)).isoformat()
    return window_of(day_before, spec)


def instant_text(us: int) -> str:
    """An instant (microseconds since the epoch) as 'YYYY-MM-DD HH:MM:SS' (UTC)."""
    return (_EPOCH + dt.timedelta(microseconds=int(us))).strftime("%Y-%m-%d %H:%M:%S")


def fixed_window(event_us: int, spec: WindowSpec) -> Window:
    """The fixed window containing the instant ``event_us``: labelled by its start as 'YYYYMMDDTHHMMSS'."""
    if spec.calendar:
        raise ConfigError(f"fixed_window() needs a 'fixed' window spec, got {spec.kind!r}.")
    length = spec.seconds * US
    start = int(event_us) - int(event_us) % length
    label = (_EPOCH + dt.timedelta(microseconds=start)).strftime("%Y%m%dT%H%M%S")
    return Window(instant_text(start), instant_text(start + length), label)


def window_start_us(w: Window) -> int:
    """The start of a fixed window in microseconds since the epoch."""
    start = dt.datetime.strptime(w.start, "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.timezone.utc)
    return (start - _EPOCH) // dt.timedelta(microseconds=1)


def windows_between(start: str, end: str, spec: WindowSpec) -> list[Window]:
    """Windows to report for days in [start, end]: each calendar window touching the range,
    or for 'rolling' the window ending at each day."""
    days = Window(_date(start).isoformat(), _date(end).isoformat(), "").days()
    if not days:
        raise ConfigError(f"--start {start} is after --end {end}.")
    return sorted({window_of(d, spec) for d in days})


# ---- merging daily summary rows per window --------------------------------------------------------

def _cell_columns(rows: pd.DataFrame, task: str) -> list[str]:
    state = STATES[task]
    data = {*state.names, *state.cell_names, *(s.name for s in state.settings), "ds", "split", "run_id"}
    return [c for c in rows.columns if c not in data]


def sum_windows(rows: pd.DataFrame, task: str) -> pd.DataFrame:
    """Summary rows that carry a 'window' label, summed per (window, group cells[, bin, label]).

    Every column that is neither a summary field nor 'ds'/'split'/'run_id' is a group cell; days, splits and
    (streaming) micro-batches are merged. Pass only the label, the group columns and the summary fields.
    """
    cells = [c for c in _cell_columns(rows, task) if c != "window"]
    return STATES[task].merge(rows, ["window", *cells])


def _run_starts(codes: np.ndarray) -> np.ndarray:
    """Positions where a run of equal values starts in ``codes`` (sorted or grouped; non-empty): 0 and every change."""
    return np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])


def _window_group_pairs(first_day: np.ndarray, last_day: np.ndarray, daily_key: np.ndarray, span: int,
                        n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidate (window, group) index pairs, sorted, for windows ``first_day[i]..last_day[i]`` (day indices)
    and the (group * span + day) keys of the rows that exist.

    Every pair when that is no more than twice the rows' window memberships (the usual case: each group has
    rows on most days); otherwise only the pairs that have a row, so that many windows times many sparse
    groups (e.g. a slice value seen on one day) never build a windows x groups array.
    """
    n_windows = len(first_day)
    member_day = np.concatenate([np.arange(f, e + 1) for f, e in zip(first_day, last_day)])
    per_day = np.bincount(member_day, minlength=span)  # windows holding each day
    day = daily_key % span
    if n_windows * n_groups <= 2 * int(per_day[day].sum()):
        return np.repeat(np.arange(n_windows), n_groups), np.tile(np.arange(n_groups), n_windows)
    member_win = np.repeat(np.arange(n_windows), last_day - first_day + 1)  # only the sparse path needs it
    member_win = member_win[np.argsort(member_day, kind="stable")]  # windows of day 0, then of day 1, ...
    first_member = np.cumsum(per_day) - per_day
    reps = per_day[day]
    row = np.repeat(np.arange(len(day)), reps)
    nth = np.arange(len(row)) - np.repeat(np.cumsum(reps) - reps, reps)
    pair = np.unique(member_win[first_member[day[row]] + nth] * n_groups + daily_key[row] // span)
    return pair // n_groups, pair % n_groups


PART_DAYS = 32
"""Rolling and the report merge and finalise the windows of this many days at a time (:func:`parts_within`)."""


def parts_within(items: Sequence[T], day_of: Callable[[T], str], span_days: int = PART_DAYS) -> list[list[T]]:
    """``items`` (in increasing ``day_of``) cut into runs, each of the items whose day lies fewer than ``span_days``
    days after its run's first: the parts that :func:`read_in_parts` reads one at a time."""
    parts: list[list[T]] = []
    first = dt.date.min
    for item in items:
        day = parse_day(day_of(item)[:10])  # a fixed window's start has a time of day too
        if parts and (day - first).days < span_days:  # type: ignore[operator]
            parts[-1].append(item)
        else:
            parts.append([item])
            first = day  # type: ignore[assignment]
    return parts


def read_in_parts(read: Callable[[list[str]], pd.DataFrame],
                  parts: Iterable[Sequence[str]]) -> Iterator[pd.DataFrame]:
    """The rows of each of ``parts`` (lists of days, in increasing order), one frame at a time: ``read(days)`` of the
    part's days that the part before did not hold, after the rows of those it did (kept, not read again). So
    every day is read once, and two parts' rows are held at a time, not years of summaries. Categorical text
    columns (``read`` of ``categories=True``) stay categoricals."""
    held, held_days = None, set()
    for days in parts:
        new, kept = [d for d in days if d not in held_days], [d for d in days if d in held_days]
        rows = _concat(([held[held["ds"].isin(kept)]] if kept else []) + ([read(new)] if new or not kept else []))
        held, held_days = rows, set(days)
        yield rows


def _concat(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Frames of the same columns one after the other; categoricals of other categories stay categoricals (their
    categories united), where ``pd.concat`` would turn them into Python strings."""
    frames = [f for f in frames if len(f)] or list(frames[-1:])
    if len(frames) == 1:
        return frames[0]
    return pd.DataFrame({c: pd.api.types.union_categoricals([f[c] for f in frames], sort_categories=True)
                         if isinstance(frames[0][c].dtype, pd.CategoricalDtype)
                         else pd.concat([f[c] for f in frames], ignore_index=True) for c in frames[0].columns})


def day_positions(ds: pd.Series, day_names: pd.Index) -> np.ndarray:
    """The position of each row's day in ``day_names`` (-1: none), one look-up per category of a categorical."""
    if isinstance(ds.dtype, pd.CategoricalDtype):
        of_category = np.r_[day_names.get_indexer(ds.cat.categories.astype(str)), -1]
        return of_category[ds.cat.codes.to_numpy()]  # code -1 (missing) takes the last entry
    return day_names.get_indexer(ds.astype(str))


def _group_codes(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """``frame.groupby(columns, dropna=False, sort=True).ngroup()``, from each column's sorted codes combined into
    one integer (a few distinct model, run and slice values, and integer bins, over millions of rows: hashing the
    tuples of every row costs several times as much)."""
    key, radix = np.zeros(len(frame), np.int64), 1
    for c in columns:
        col = frame[c]
        if col.dtype.kind in "iu" and len(col):  # e.g. bins: offsets from the least value keep their order
            values = col.to_numpy()
            least, most = int(values.min()), int(values.max())
            if most - least >= len(values):
                uniques, codes = np.unique(values, return_inverse=True)
            else:
                uniques, codes = range(most - least + 1), (values - least).astype(np.int64)
        else:
            codes, uniques = pd.factorize(col, sort=True, use_na_sentinel=False)
        n = max(len(uniques), 1)
        if radix > (1 << 62) // n:
            return frame.groupby(list(columns), dropna=False, sort=True).ngroup().to_numpy(np.int64)
        key, radix = key * n + codes, radix * n
    return np.unique(key, return_inverse=True)[1].astype(np.int64)


def _running_sums(daily: Mapping[str, np.ndarray], lo: np.ndarray, hi: np.ndarray,
                  merges: Mapping[str, np.ufunc]) -> dict[str, np.ndarray]:
    """Each column of ``daily`` merged (``merges[name]``, e.g. ``np.add``) over rows ``lo[i]:hi[i]`` (non-empty)
    for every i: the first row merged with the running merge of the others, ``r[lo] + ((r[lo+1] + r[lo+2]) +
    ...)``, whatever the other slices are. That is the order in which ``np.add.reduceat`` adds a run of up to 8
    rows, so such slices sum to its bits.

    Slices that start at the same row are prefixes of the longest of them, so each start's running sum is computed
    once, over its longest slice, and every slice takes its value where it ends.
    """
    first, slot = np.unique(lo, return_inverse=True)
    last = np.zeros(first.size, np.int64)
    np.maximum.at(last, slot, hi)
    length = last - first
    begin = np.cumsum(length) - length  # where each start's running sum begins in ``src`` and the sums
    src = np.arange(int(length.sum())) - np.repeat(begin - first, length)
    steps = [begin[length > k] + k for k in range(2, int(length.max(initial=1)))]  # the k-th row of each longer sum
    end = begin[slot] + (hi - lo) - 1
    more = hi - lo > 1
    out = {}
    for name, column in daily.items():
        merge = merges[name]
        rest = column[src]
        for k in steps:
            rest[k] = merge(rest[k], rest[k - 1])
        summed = column[lo]
        summed[more] = merge(summed[more], rest[end[more]])
        out[name] = summed
    return out


def merge_windows(summaries: pd.DataFrame, task: str, windows: Iterable[Window]) -> pd.DataFrame:
    """Summary rows summed per (window label, group cells[, bin, label]) over days and splits.

    ``summaries``: summaries-table rows with a string 'ds' column. Rows whose ds is
    in no window are dropped; with overlapping (rolling) windows a day counts in each.
    The output has 'window' and a 'n_days' column (distinct days with rows, per group), sorted by
    (window, cells[, bin, label]).

    Vectorised with index arrays, no frame per window: a window is a run of consecutive days, so once the
    rows are summed per (group, day) and sorted that way, each (window, group) sum is a contiguous slice of
    them, added up one day after another in ascending ``ds`` order (:func:`_running_sums`: windows that start
    on the same day, such as a week as of each of its days, share one running sum). A window's sums therefore
    do not depend on which other windows are merged in the same call: a range job and a per-day job give the
    same bits.
    """
    wins = list(windows)
    if summaries.empty or not wins:
        return pd.DataFrame()
    state = STATES[task]
    cells, keys, fields = _cell_columns(summaries, task), list(state.cell_names), list(state.names)
    columns = ["window", *cells, *keys, *fields, "n_days"]
    spans: dict[str, set[str]] = defaultdict(set)
    for w in wins:
        spans[w.label].update(w.days())
    labels = sorted(spans)
    day_names = pd.Index(sorted(set().union(*spans.values())))
    day = day_positions(summaries["ds"], day_names)  # -1: in no window
    inside = day >= 0
    # a range's rolling job keeps every row: selecting them all would copy a year's summaries for nothing
    rows, day = (summaries, day) if inside.all() else (summaries[inside], day[inside])
    if rows.empty:
        return pd.DataFrame(columns=columns)
    first_day, last_day = np.zeros(len(labels), np.int64), np.zeros(len(labels), np.int64)
    for i, label in enumerate(labels):  # a label's days are consecutive calendar days, so consecutive in day_names
        idx = day_names.get_indexer(sorted(spans[label]))
        if idx[-1] - idx[0] + 1 != len(idx):
            raise ValueError(f"window {label!r} is not a run of consecutive days")
        first_day[i], last_day[i] = idx[0], idx[-1]
    span = len(day_names)
    group = _group_codes(rows, [*cells, *keys])  # sorted codes
    group_values = rows.iloc[np.unique(group, return_index=True)[1]][[*cells, *keys]].reset_index(drop=True)
    group_values = group_values.astype({c: object for c in group_values.columns
                                        if isinstance(group_values[c].dtype, pd.CategoricalDtype)})
    n_groups = len(group_values)
    # 1. one row per (group, day), sorted that way: the day's splits summed in input order
    key = group * span + day
    order = np.argsort(key, kind="stable")
    key = key[order]
    cut = _run_starts(key)
    daily_key = key[cut]
    daily = state.reduceat({f: rows[f].to_numpy()[order] for f in fields}, cut)
    # 2. each (window, group): the slice of daily rows from its first to its last day
    win, grp = _window_group_pairs(first_day, last_day, daily_key, span, n_groups)
    lo = np.searchsorted(daily_key, grp * span + first_day[win])
    hi = np.searchsorted(daily_key, grp * span + last_day[win], side="right")
    some = hi > lo
    win, grp, lo, hi = win[some], grp[some], lo[some], hi[some]
    out = group_values.iloc[grp].reset_index(drop=True)
    out.insert(0, "window", np.asarray(labels, dtype=object)[win])
    merges = {s.name: MERGES[s.merge] for s in state.stats}
    for f, summed in _running_sums(daily, lo, hi, merges).items():
        out[f] = summed
    # 3. distinct days with rows per (window, cells)
    cell = (group_values.groupby(cells, dropna=False, sort=False).ngroup().to_numpy(np.int64) if cells
            else np.zeros(n_groups, dtype=np.int64))
    cell_day = np.unique(cell[daily_key // span] * span + daily_key % span)
    c = cell[grp]
    out["n_days"] = (np.searchsorted(cell_day, c * span + last_day[win], side="right")
                     - np.searchsorted(cell_day, c * span + first_day[win]))
    return out  # built in the order of ``columns``: selecting them would only copy it


Summary = BinarySummary | RegressionSummary


def _key_runs(frame: pd.DataFrame, keys: Sequence[str]) -> np.ndarray | None:
    """Start rows of the runs of equal ``keys`` values in ``frame`` (non-empty), each row compared with the one
    before; None where a key is null (pandas' grouping tells nulls apart) or its values do not compare."""
    if frame.empty:
        return None
    new_run = np.zeros(len(frame), dtype=bool)
    new_run[0] = True
    try:
        for c in keys:
            col = frame[c]
            values = col.cat.codes.to_numpy() if isinstance(col.dtype, pd.CategoricalDtype) else col.to_numpy()
            new_run[1:] |= values[1:] != values[:-1]
    except (TypeError, ValueError):
        return None
    starts = np.flatnonzero(new_run)
    # a null row that starts no run equals the row before it, so a null key shows at some run's start
    return None if frame[list(keys)].iloc[starts].isna().to_numpy().any() else starts


def _presummed_groups(merged: pd.DataFrame, task: str, by: Sequence[str]) -> np.ndarray | None:
    """Start rows of the (window, *by) groups when ``merged`` needs no re-summing for this view, else None.

    True for the output of :func:`merge_windows` / :func:`sum_windows` viewed by exactly its own cells (no
    slice merged away): one row per (bin, label) in increasing order inside each group, groups contiguous.
    Checked, not assumed; any other frame (a null key among them) takes the groupby path.
    """
    cells = [c for c in _cell_columns(merged, task) if c not in ("window", "n_days")]
    if task != "binary" or cells != list(by):
        return None
    keys = ["window", *by]
    starts = _key_runs(merged, keys)
    if starts is None or len(set(merged[keys].iloc[starts].itertuples(index=False, name=None))) < starts.size:
        return None  # a null key, or a key in two runs (its rows not contiguous)
    cell = merged["bin"].to_numpy(np.int64) * 2 + merged["label"].to_numpy(np.int64)
    inside = np.ones(len(merged), dtype=bool)
    inside[starts] = False
    if np.any(np.diff(cell)[inside[1:]] <= 0):
        return None
    return starts


def _binary_cells(merged: pd.DataFrame, by: Sequence[str]) -> tuple[list[tuple], list[tuple[int, int]],
                                                                     list[int | None], dict[str, np.ndarray]]:
    """Binary summary cells per (window, *by) group: the groups' key values, each group's (start, end) rows in
    the columns, its n_days (None without an 'n_days' column) and the columns (bin, label, counts, moments)."""
    keys = ["window", *by]
    with_days = "n_days" in merged.columns
    fields = list(BINARY.names)
    agg, starts = merged, _presummed_groups(merged, "binary", by)
    if starts is None:  # re-sum per (window, *by, bin, label); n_days: the most of any cell merged
        per_cell = {s.name: (s.name, s.merge) for s in BINARY.stats} | (
            {"n_days": ("n_days", "max")} if with_days else {})
        agg = merged.groupby([*keys, *BINARY.cell_names], dropna=False, sort=True).agg(**per_cell).reset_index()
        starts = _run_starts(agg.groupby(keys, dropna=False, sort=False).ngroup().to_numpy())  # sorted by keys
    ends = np.r_[starts[1:], len(agg)]
    key_vals = list(agg[keys].iloc[starts].itertuples(index=False, name=None))
    n_days = (np.maximum.reduceat(agg["n_days"].to_numpy(), starts).tolist() if with_days
              else [None] * len(starts))
    cols = {n: agg[n].to_numpy() for n in [*BINARY.cell_names, *fields]}
    return key_vals, list(zip(starts.tolist(), ends.tolist())), n_days, cols


def _binary_group_views(
    merged: pd.DataFrame, by: Sequence[str], bin_width: float, pairs: Sequence[tuple[Window, Window]]
) -> tuple[dict[tuple, tuple[Any, int | None]], dict[tuple, tuple[float | None, str]]]:
    """:func:`_group_summaries` and :func:`_biases_of` for binary rolling, all groups at once
    (:mod:`ctcalc_spark.core.batch`): (window, *by) -> (a view finalize_rolling reads, n_days), and -> (c*, status)."""
    from ctcalc_spark.core.batch import BinaryGroups, group_views

    if merged.empty:
        return {}, {}
    key_vals, bounds, n_days, cols = _binary_cells(merged, by)
    groups = BinaryGroups(cols, [np.arange(s, e) for s, e in bounds], bin_width)
    solved = groups.solve()
    index = {k: i for i, k in enumerate(key_vals)}
    previous_label = {w.label: pw.label for w, pw in pairs}
    previous = np.array([index.get((previous_label[k[0]], *k[1:]), -1) if k[0] in previous_label else -1
                         for k in key_vals], dtype=np.int64)
    views = group_views(groups, solved, previous)
    biases = [(None, c.status) if isinstance(c, DegenerateBiasError) else (c, STATUS_OK) for c in solved]
    return ({k: (v, n) for k, v, n in zip(key_vals, views, n_days)}, dict(zip(key_vals, biases)))


def _group_summaries(
    merged: pd.DataFrame, task: str, by: Sequence[str], bin_width: float
) -> dict[tuple, tuple[Summary, int | None]]:
    """(window, *by values) -> (summary of the group's cells merged, n_days or None without an 'n_days' column)."""
    out: dict[tuple, tuple[Summary, int | None]] = {}
    if merged.empty:
        return out
    keys = ["window", *by]
    with_days = "n_days" in merged.columns
    if task == "binary":
        key_vals, bounds, n_days, cols = _binary_cells(merged, by)
        for k, (s, e), n in zip(key_vals, bounds, n_days):
            summary = BinarySummary.from_columns(float(bin_width), cols["bin"][s:e], cols["label"][s:e],
                                                 **{f: cols[f][s:e] for f in BINARY.names})
            out[k] = (summary, n)
        return out
    state = STATES[task]
    agg = merged.groupby(keys, dropna=False, sort=True).agg(
        **{s.name: (s.name, s.merge) for s in state.stats}, **({"n_days": ("n_days", "max")} if with_days else {})
    ).reset_index()
    for rec in agg.itertuples(index=False):
        d = rec._asdict()
        k = tuple(d[c] for c in keys) if len(keys) > 1 else (d[keys[0]],)
        summary = RegressionSummary(**{n: int(d[n]) if n in state.counts else float(d[n]) for n in state.names})
        out[k] = (summary, int(d["n_days"]) if with_days else None)
    return out


# ---- rolling finalisation --------------------------------------------------------------------------

def binary_calibrated_bound(current: BinarySummary, c: float) -> float:
    """Bound on |histogram - exact| mean calibrated log loss of ``current`` at the previous window's c.

    ``(h/2)³/(9√3)`` for evaluating L(c) from the bins plus ``|mean(y - q)|`` times the histogram error in the
    previous window's c* (:func:`~ctcalc_spark.core.summary.bias_error_bound`).
    """
    h3 = (current.bin_width / 2.0) ** 3
    resid = abs(current.total_pos_weight - current.predicted_positives(c)) / current.total_weight
    return h3 / (9.0 * math.sqrt(3.0)) + min(1.0, resid) * bias_error_bound(current.bin_width)


def _bias_of(s: Summary | None) -> tuple[float | None, str]:
    if s is None:
        return None, "no_bias_rows"
    try:
        return float(s.solve_bias()), STATUS_OK
    except DegenerateBiasError as e:
        return None, e.status


def _biases_of(summaries: Sequence[Summary]) -> list[tuple[float | None, str]]:
    """:func:`_bias_of` of each summary; binary ones solved together (:func:`solve_biases`)."""
    out = [_bias_of(s) if not isinstance(s, BinarySummary) else None for s in summaries]
    binary = [i for i, s in enumerate(summaries) if isinstance(s, BinarySummary)]
    for i, c in zip(binary, solve_biases([summaries[i] for i in binary])):
        out[i] = (None, c.status) if isinstance(c, DegenerateBiasError) else (c, STATUS_OK)
    return out  # type: ignore[return-value]


def _weight(s: Summary) -> float:
    return s.weight if isinstance(s, RegressionSummary) else s.total_weight


def _rows(s: Summary) -> int:
    return s.count if isinstance(s, RegressionSummary) else s.n_rows


def _metric(s: Summary, c: float = 0.0) -> float:
    return s.mse(c) if isinstance(s, RegressionSummary) else s.log_loss(c)


def finalize_rolling(
    current: Summary,
    previous: Summary | None,
    *,
    first_window: bool = False,
    bias: tuple[float | None, str] | None = None,
    prev_bias: tuple[float | None, str] | None = None,
) -> dict[str, Any]:
    """One rolling row from the merged summaries of window t (``current``) and t-1 (``previous``).

    ``vanilla`` is the metric of window t; ``calibrated`` the same metric with every
    prediction shifted by c*(t-1) (fitted on all of window t-1); ``bias`` is c*(t)
    and ``bias_change = bias - prev_bias``. ``status`` says why ``calibrated`` is
    missing: first_window, missing_previous_window, previous_window_empty,
    previous_window_no_positives / _no_negatives (binary), empty_window.
    ``bias``/``prev_bias``: precomputed (c, status) pairs, to solve each window once.
    Values that cannot be computed are None, never NaN or inf. A window computed without some of its days
    gets status incomplete_window (or incomplete_previous_window) from :func:`rolling_metrics`.
    """
    row: dict[str, Any] = {k: None for k in (
        "vanilla", "calibrated", "calibrated_bound", "calibration_gain", "best_shift_gain", "bias", "prev_bias",
        "bias_change", "calibration", "mean_prediction", "mean_label", "prev_weight")}
    row.update(n_rows=_rows(current), weight=_weight(current), prev_n_rows=0 if previous is None else _rows(previous))
    if _weight(current) <= 0:
        row.update(bias_status="no_bias_rows", status=STATUS_EMPTY_WINDOW)
        return row
    binary = not isinstance(current, RegressionSummary)  # a BinarySummary or a batch GroupView
    vanilla = _metric(current)
    row["vanilla"] = vanilla
    if binary:
        row["mean_label"] = current.total_pos_weight / current.total_weight
        row["mean_prediction"] = current.predicted_positives() / current.total_weight
    else:
        assert isinstance(current, RegressionSummary)
        row["mean_label"] = current.wy / current.weight
        row["mean_prediction"] = current.wp / current.weight
    if row["mean_label"] != 0:
        row["calibration"] = row["mean_prediction"] / row["mean_label"]
    c_cur, row["bias_status"] = bias if bias is not None else _bias_of(current)
    if c_cur is not None:
        row["bias"] = c_cur
        row["best_shift_gain"] = vanilla - _metric(current, c_cur)
    if previous is None or _rows(previous) == 0:
        row["status"] = STATUS_FIRST_WINDOW if first_window else STATUS_MISSING_PREVIOUS
        return row
    row["prev_weight"] = _weight(previous)
    c_prev, prev_status = prev_bias if prev_bias is not None else _bias_of(previous)
    if c_prev is None:
        row["status"] = _PREVIOUS_DEGENERATE.get(prev_status, f"previous_window_{prev_status}")
        return row
    calibrated = _metric(current, c_prev)
    row.update(prev_bias=c_prev, calibrated=calibrated, calibration_gain=vanilla - calibrated, status=STATUS_OK)
    row["calibrated_bound"] = binary_calibrated_bound(current, c_prev) if binary else 0.0
    if c_cur is not None:
        row["bias_change"] = c_cur - c_prev
    return row


def _check_task(task: str) -> None:
    if task not in METRIC_NAME:
        raise ConfigError(f"Rolling calibration supports tasks {list(METRIC_NAME)}, got {task!r}.")


def finalize_windows(
    merged: pd.DataFrame,
    task: str,
    pairs: Sequence[tuple[Window, Window]],
    spec: WindowSpec,
    *,
    model: str = "model",
    run: str = "run",
    slices: Sequence[str] = (),
    bin_width: float = 0.05,
    first: Collection[str] = (),
    days: Mapping[str, tuple[int, int]] | None = None,
) -> pd.DataFrame:
    """One rolling row per (model, run, window, slice view) for each (window, previous window) of ``pairs``.

    ``merged``: summary rows summed per window (:func:`merge_windows` or :func:`sum_windows`), holding the
    windows of ``pairs`` and their previous windows. Slice views as in ``metrics_from_summaries``: every
    slice merged ('__all__') and each slice column's values, each with its own bias. ``first``: labels of
    the windows whose previous window precedes all data (status first_window instead of
    missing_previous_window). ``days`` (calendar windows): label -> (days expected in the window, days of
    its previous window); fills the day counts and the incomplete_window / incomplete_previous_window
    statuses. Without it (fixed windows) the day counts are null. Columns: :data:`ROLLING_TYPES`.
    """
    _check_task(task)
    views: list[tuple[str, str | None]] = [(ALL, None)] + [(s, s) for s in slices]
    out: list[dict[str, Any]] = []
    for slice_name, col in views:
        by = [model, run] + ([col] if col else [])
        if task == "binary":
            groups, biases = _binary_group_views(merged, by, bin_width, pairs)
        else:
            groups = _group_summaries(merged, task, by, bin_width)
            biases = dict(zip(groups, _biases_of([s for s, _ in groups.values()])))
        in_window: dict[str, list[tuple]] = defaultdict(list)
        for key in groups:
            in_window[key[0]].append(key)
        for w, pw in pairs:
            is_first = w.label in first
            for key in in_window.get(w.label, []):
                cur, n_days = groups[key]
                pkey = (pw.label, *key[1:])
                prev, prev_days = groups.get(pkey, (None, 0 if days is not None else None))
                rec = finalize_rolling(cur, prev, first_window=is_first, bias=biases[key],
                                       prev_bias=biases.get(pkey))
                rec.update(
                    task=task, window_kind=spec.kind, window=w.label, window_start=w.start, window_end=w.end,
                    prev_window=pw.label, model=str(key[1]), run=str(key[2]), slice_name=slice_name,
                    slice_value=ALL if col is None else str(key[3]), metric=METRIC_NAME[task], n_days=n_days,
                    n_days_expected=None, prev_n_days=prev_days, calibrated_exact=None,
                )
                if days is not None:
                    expected, prev_expected = days[w.label]
                    rec["n_days_expected"] = expected
                    if rec["status"] == STATUS_OK and n_days < expected:
                        rec["status"] = STATUS_INCOMPLETE_WINDOW
                    elif rec["status"] == STATUS_OK and not is_first and prev_days < prev_expected:
                        rec["status"] = STATUS_INCOMPLETE_PREVIOUS
                out.append(rec)
    frame = pd.DataFrame(out, columns=list(ROLLING_TYPES))
    return frame.sort_values(["window_start", "model", "run", "slice_name", "slice_value"], kind="stable").reset_index(
        drop=True
    )


def rolling_metrics(
    summaries: pd.DataFrame,
    task: str,
    windows: Sequence[Window],
    spec: WindowSpec,
    *,
    model: str = "model",
    run: str = "run",
    slices: Sequence[str] = (),
    bin_width: float = 0.05,
    first_ds: str | None = None,
    until: str | None = None,
) -> pd.DataFrame:
    """One row per (model, run, window, slice view) of calendar ``windows`` with its rolling calibrated metric.

    ``summaries`` must hold the days of ``windows`` and of their previous windows
    (other days are ignored); see :func:`finalize_windows` for the slice views.
    ``first_ds``: the earliest day that has summaries at all; a window whose previous
    window ends before it is the first window. ``until``: days after it do not count
    (a partial current window when the job runs mid-week/month).
    Columns: :data:`ROLLING_TYPES` (no ds).
    """
    _check_task(task)
    if not spec.calendar:
        raise ConfigError(f"rolling_metrics() takes calendar windows keyed by ds, got kind {spec.kind!r}; fixed "
                          "windows are finalised with sum_windows() and finalize_windows().")
    pairs = [(w, previous_window(w, spec)) for w in sorted(set(windows))]
    needed = sorted({x for pair in pairs for x in pair})
    rows = summaries
    if until is not None and not summaries.empty:
        rows = summaries[summaries["ds"].astype(str) <= until]
    merged = merge_windows(rows, task, needed)
    first = {w.label for w, pw in pairs if first_ds is None or pw.end < first_ds}
    days = {w.label: (len(w.days(until)), pw.n_days) for w, pw in pairs}
    return finalize_windows(merged, task, pairs, spec, model=model, run=run, slices=slices, bin_width=bin_width,
                            first=first, days=days)


def attach_exact(rolling: pd.DataFrame, exact: pd.DataFrame, *, rtol: float = 1e-9) -> pd.DataFrame:
    """Fill ``calibrated_exact`` from in-scan exact sums (item: known bias during the scan).

    ``exact``: rows of the calibrated_exact table (ds, model, run, c, cal_weight,
    cal_loss). A window gets a value only where every day with summaries in it has an
    exact row whose c equals the row's prev_bias (to ``rtol``) and the weights agree.
    Only the '__all__' slice view is covered.
    """
    out = rolling.copy()
    if exact.empty or out.empty:
        return out
    ex = exact.assign(ds=exact["ds"].astype(str), model=exact["model"].astype(str), run=exact["run"].astype(str))
    for i, r in out.iterrows():
        if r["slice_name"] != ALL or r["prev_bias"] is None or pd.isna(r["prev_bias"]):
            continue
        sel = ex[(ex["model"] == r["model"]) & (ex["run"] == r["run"])
                 & (ex["ds"] >= r["window_start"]) & (ex["ds"] <= r["window_end"])]
        if len(sel) != int(r["n_days"]):
            continue
        if not np.allclose(sel["c"].to_numpy(float), float(r["prev_bias"]), rtol=rtol, atol=1e-12):
            continue
        w = float(sel["cal_weight"].sum())
        if w > 0 and math.isclose(w, float(r["weight"]), rel_tol=1e-9):
            out.at[i, "calibrated_exact"] = float(sel["cal_loss"].sum()) / w
    return out


def window_summaries(
    summaries: pd.DataFrame, task: str, window: Window, *, by: Sequence[str], bin_width: float = 0.05
) -> Mapping[tuple, Summary]:
    """Merged summary per ``by`` group for one window (e.g. for a reliability diagram)."""
    merged = merge_windows(summaries, task, [window])
    return {k[1:]: s for k, (s, _) in _group_summaries(merged, task, list(by), bin_width).items()}
