"""Many binary groups finalised at once: :func:`ctcalc_spark.core.summary.finalize_binary` on padded arrays.

A range job, or one day with slices, finalises thousands of groups (day x model x run x slice value), each a
few hundred histogram bins. One group at a time, numpy's per-call overhead is most of the cost (about 0.75 ms
a group); here each group's bins are one row of an ``(n, width)`` array, every per-bin expression of
:class:`BinarySummary` is evaluated for all rows at once and reduced along the row. The numbers are those of
``finalize_binary`` up to summation order (the test suite checks 1e-13, relative); the bias solve is the
same lockstep solver as :func:`ctcalc_spark.core.summary.solve_biases`.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ctcalc_spark.core._math import binary_entropy, logit
from ctcalc_spark.core.solvers import STATUS_NO_BIAS_ROWS, _check_binary_bias_set
from ctcalc_spark.core.summary import (
    BINARY_COUNTS,
    BINARY_MOMENTS,
    STATUS_NO_REMAIN_ROWS,
    STATUS_OK,
    _PaddedSide,
    _sigmoid_pair,
    extreme_bin,
    lockstep_solve,
)
from ctcalc_spark.errors import DegenerateBiasError

PAD_CELLS = 1 << 16
"""Bins (groups x the widest one's bins) padded into one set of arrays; groups of similar width go together."""

BIAS, REMAIN = 0, 1
FIELDS = BINARY_COUNTS + BINARY_MOMENTS


def finalize_binary_groups(
    columns: Mapping[str, np.ndarray],
    groups: Sequence[np.ndarray],
    is_bias: np.ndarray,
    *,
    bin_width: float,
    max_abs_logit: float,
) -> list[dict[str, Any]]:
    """The ``finalize_binary`` row of each group: ``groups`` are row positions into ``columns`` (summary-table
    columns bin, label, count, clipped, weight, m1, m2, wmiss, wloss; rows of the same bin and label are summed),
    ``is_bias`` marks the val-bias rows."""
    out: list[dict[str, Any]] = [{}] * len(groups)
    if not groups:
        return out
    lens = np.array([g.size for g in groups], dtype=np.int64)
    rows = np.concatenate(groups) if len(groups) > 1 else groups[0]
    gid = np.repeat(np.arange(len(groups)), lens)
    bins = np.asarray(columns["bin"], np.int64)[rows]
    order = np.lexsort((bins, gid))  # stable: a cell's rows are summed in their order, as from_columns does
    rows, gid, bins = rows[order], gid[order], bins[order]
    new_cell = np.ones(rows.size, bool)
    new_cell[1:] = (gid[1:] != gid[:-1]) | (bins[1:] != bins[:-1])
    cell = np.cumsum(new_cell) - 1
    has_rows, first = np.unique(gid[new_cell], return_index=True)  # each group's first cell (rows in group order)
    first_cell = np.zeros(len(groups), np.int64)
    first_cell[has_rows] = cell[new_cell][first]
    col = cell - first_cell[gid]
    width = np.bincount(gid[new_cell], minlength=len(groups))
    by_width = np.argsort(width, kind="stable")
    start = 0
    while start < by_width.size:
        end = start + 1
        while end < by_width.size and (end + 1 - start) * width[by_width[end]] <= PAD_CELLS:
            end += 1
        members = by_width[start:end]
        slot = np.full(len(groups), -1)
        slot[members] = np.arange(members.size)
        take = np.flatnonzero(slot[gid] >= 0)
        padded = _Padded(columns, rows[take], slot[gid[take]], col[take], bins[take], members.size,
                         int(width[members].max()), is_bias, bin_width)
        for g, row in zip(members, padded.finalize(max_abs_logit)):
            out[g] = row
        start = end
    return out


class _Padded:
    """Summary cells of ``n`` groups as arrays ``field[split, label]`` of shape (n, width); a group's bins sit
    in its row in ascending order (the union over both splits and labels), padding has zero weight."""

    def __init__(self, columns: Mapping[str, np.ndarray], rows: np.ndarray, slot: np.ndarray, col: np.ndarray,
                 bins: np.ndarray, n: int, width: int, is_bias: np.ndarray, h: float) -> None:
        split = np.where(is_bias[rows], BIAS, REMAIN)
        label = np.asarray(columns["label"], np.int64)[rows]
        if label.size and not ((label == 0) | (label == 1)).all():
            raise ValueError(f"Summary labels must be 0/1, got {sorted(set(label.tolist()))[:5]}.")
        flat = ((split * 2 + label) * n + slot) * width + col
        self.n, self.h = n, h
        self.bins = np.zeros((n, width), np.int64)
        self.bins[slot, col] = bins
        self.valid = np.zeros((n, width), bool)
        self.valid[slot, col] = True
        self.f: dict[str, np.ndarray] = {}
        for name in FIELDS:
            summed = np.bincount(flat, weights=np.asarray(columns[name], np.float64)[rows], minlength=4 * n * width)
            self.f[name] = summed.reshape(2, 2, n, width)
            if name in BINARY_COUNTS:
                self.f[name] = np.rint(self.f[name]).astype(np.int64)
        self.centres = (self.bins + 0.5) * h

    def _total(self, name: str, split: int | None = None, label: int | None = None) -> np.ndarray:
        a = self.f[name]
        a = a.sum(axis=0) if split is None else a[split]
        a = a.sum(axis=0) if label is None else a[label]
        return a.sum(axis=1)

    def _side_loss(self, split: int, label: int, c: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Per group of ``rows``: Σ over its bins of BinarySummary._side's expanded loss at its shift ``c``."""
        sign = 1.0 - 2.0 * label
        x = sign * (self.centres[rows] - c[:, None])
        s, sc, l1p = _sigmoid_pair(x)
        f = self.f
        w, m1, m2 = f["weight"][split, label][rows], sign * f["m1"][split, label][rows], f["m2"][split, label][rows]
        return (w * (np.maximum(x, 0.0) + l1p) + m1 * s + 0.5 * m2 * s * sc).sum(axis=1)

    def _solve(self, rows: np.ndarray) -> np.ndarray:
        """c* of the val-bias part of ``rows`` (each holds both labels)."""
        w = self.f["weight"][BIAS][:, rows]
        pos = w[1].sum(axis=1)
        total = w[0].sum(axis=1) + pos
        per_bin = w[0] + w[1]
        live = per_bin > 0
        bins = self.bins[rows]
        z_lo = np.where(live, bins, np.iinfo(np.int64).max).min(axis=1) * self.h
        z_hi = (np.where(live, bins, np.iinfo(np.int64).min).max(axis=1) + 1) * self.h
        t = logit(pos / total)  # the bracket of logit_shift_bracket and the start of BinarySummary._solve_start
        lo, hi = z_lo - t, z_hi - t
        x0 = (per_bin * self.centres[rows]).sum(axis=1) / total - t
        sides = []
        for label in (0, 1):
            sign = 1.0 - 2.0 * label
            wl = w[label]
            sides.append(_PaddedSide(sign, self.centres[rows], wl, sign * self.f["m1"][BIAS, label][rows],
                                     self.f["m2"][BIAS, label][rows], wl > 0))
        return lockstep_solve(sides[0], sides[1], lo, hi, x0)

    def finalize(self, max_abs_logit: float) -> list[dict[str, Any]]:
        count = self.f["count"]
        n_bias, n_remain = count[BIAS].sum(axis=(0, 2)), count[REMAIN].sum(axis=(0, 2))
        k = extreme_bin(max_abs_logit, self.h)
        outside = self.valid & ((self.bins >= k) | (self.bins < -k))
        n_extreme = np.where(outside, count.sum(axis=(0, 1)), 0).sum(axis=1)
        n_clipped = self.f["clipped"].sum(axis=(0, 1, 3))
        weight = self.f["weight"]
        whole_w = weight[BIAS] + weight[REMAIN]  # (label, n, width)
        pos = whole_w[1].sum(axis=1)
        total = whole_w[0].sum(axis=1) + pos  # as BinarySummary.total_weight: == pos exactly when no negatives
        wloss = self.f["wloss"]
        loss = (wloss[BIAS] + wloss[REMAIN]).sum(axis=(0, 2))
        wmiss = self.f["wmiss"][BIAS] + self.f["wmiss"][REMAIN]
        wp = (wmiss[0] + whole_w[1] - wmiss[1]).sum(axis=1)
        neg_w, pos_w = whole_w[0], whole_w[1]
        neg_tot = neg_w.sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            pairs = pos * neg_tot
            auc = (pos_w * (np.cumsum(neg_w, axis=1) - neg_w + 0.5 * neg_w)).sum(axis=1) / pairs
            auc_bound = 0.5 * (pos_w * neg_w).sum(axis=1) / pairs
        r_pos = weight[REMAIN][1].sum(axis=1)
        r_total = weight[REMAIN][0].sum(axis=1) + r_pos
        r_loss = wloss[REMAIN].sum(axis=(0, 2))
        b_pos = weight[BIAS][1].sum(axis=1)
        b_total = weight[BIAS][0].sum(axis=1) + b_pos

        solved: dict[int, float | DegenerateBiasError] = {}
        fit = []
        for i in np.flatnonzero((total > 0) & (r_total > 0)).tolist():
            try:
                _check_binary_bias_set(float(b_pos[i]), float(b_total[i]), int(n_bias[i]))
                fit.append(i)
            except DegenerateBiasError as e:
                solved[i] = e
        c = np.zeros(self.n)
        if fit:
            c[fit] = self._solve(np.array(fit))
            for i in fit:
                solved[i] = float(c[i])
        shifted = r_loss.copy()  # remain.loss_sum(c): exact at c = 0, plus the expanded change elsewhere
        if fit:
            at = np.array([i for i in fit if c[i] != 0.0], dtype=np.int64)
            if at.size:
                zero = np.zeros(at.size)
                d0 = self._side_loss(REMAIN, 0, c[at], at) - self._side_loss(REMAIN, 0, zero, at)
                d1 = self._side_loss(REMAIN, 1, c[at], at) - self._side_loss(REMAIN, 1, zero, at)
                shifted[at] = r_loss[at] + (d0 + d1)

        rows: list[dict[str, Any]] = []
        for i in range(self.n):
            row: dict[str, Any] = {
                "n_rows": int(n_bias[i] + n_remain[i]), "n_bias": int(n_bias[i]), "n_remain": int(n_remain[i]),
                "n_clipped": int(n_clipped[i]), "n_extreme": int(n_extreme[i]), "weight": float(total[i]),
                "base_rate": None, "log_loss": None, "log_loss_remain": None, "calibrated_log_loss": None,
                "calibration_gain": None, "bias": None, "auc": None, "auc_bound": None, "normalized_entropy": None,
                "calibrated_normalized_entropy": None, "calibration": None, "status": STATUS_OK,
            }
            rows.append(row)
            if total[i] <= 0:
                row["status"] = STATUS_NO_BIAS_ROWS if n_bias[i] == 0 else "zero_weight"
                continue
            base = float(pos[i] / total[i])
            row["base_rate"] = base
            row["log_loss"] = float(loss[i] / total[i])
            if 0 < base < 1:
                row.update(auc=float(auc[i]), auc_bound=float(auc_bound[i]),
                           normalized_entropy=row["log_loss"] / binary_entropy(base))
            if pos[i] > 0:
                row["calibration"] = float(wp[i] / pos[i])
            if r_total[i] <= 0:
                row["status"] = STATUS_NO_REMAIN_ROWS
                continue
            row["log_loss_remain"] = float(r_loss[i] / r_total[i])
            fitted = solved[i]
            if isinstance(fitted, DegenerateBiasError):
                row["status"] = fitted.status
                continue
            cll = float(shifted[i] / r_total[i])
            row.update(bias=fitted, calibrated_log_loss=cll, calibration_gain=row["log_loss_remain"] - cll)
            rbase = float(r_pos[i] / r_total[i])
            if 0 < rbase < 1:
                row["calibrated_normalized_entropy"] = cll / binary_entropy(rbase)
        return rows

