"""Binary summaries of many groups finalised at once; a single :class:`~ctcalc_spark.core.summary.BinarySummary`
is the one-group case of the same code.

A range job, or one day with slices, finalises thousands of groups (day x model x run x slice value), each a
few hundred histogram bins. Each group's bins are one row of an ``(n, width)`` array, every per-bin expression
(the loss and missed-mass expansions of :mod:`ctcalc_spark.core.summary`) is evaluated for all rows at once and
reduced along the row, and the val-bias parts are solved together by the lockstep solver
(:func:`ctcalc_spark.core.solvers.lockstep_solve`).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ctcalc_spark.core._math import binary_entropy
from ctcalc_spark.core.solvers import (
    STATUS_NO_BIAS_ROWS,
    STATUS_NO_REMAIN_ROWS,
    STATUS_OK,
    STATUS_ZERO_WEIGHT,
    PaddedSide,
    check_binary_bias_set,
    bias_or_error,
    lockstep_solve,
    logit_shift_start,
    sigmoid_pair,
)
from ctcalc_spark.core.state import BINARY
from ctcalc_spark.errors import DegenerateBiasError


def extreme_bin(max_abs_logit: float, bin_width: float) -> int:
    """K such that bins ``k >= K`` and ``k < -K`` hold exactly the logits outside ``[-K·h, K·h)``.

    ``K·h`` is ``max_abs_logit`` rounded up to a multiple of the bin width (equal to it when it is one).
    """
    return max(1, int(np.ceil(max_abs_logit / bin_width - 1e-9)))


PAD_CELLS = 1 << 16
"""Bins (groups x the widest one's bins) padded into one set of arrays; groups of similar width go together."""

BIAS, REMAIN = 0, 1


def finalize_binary_groups(
    columns: Mapping[str, np.ndarray],
    groups: Sequence[np.ndarray],
    is_bias: np.ndarray,
    *,
    bin_width: float,
    max_abs_logit: float,
) -> list[dict[str, Any]]:
    """The metrics row of each group (:func:`ctcalc_spark.core.summary.finalize_binary` describes it): ``groups``
    are row positions into ``columns`` (the cells and statistics of :data:`ctcalc_spark.core.state.BINARY`; rows
    of the same bin and label are summed), ``is_bias`` marks the val-bias rows."""
    out: list[dict[str, Any]] = [{}] * len(groups)
    for members, padded in _padded_chunks(columns, groups, is_bias, bin_width):
        for g, row in zip(members.tolist(), padded.finalize(max_abs_logit)):
            out[g] = row
    return out


class BinaryGroups:
    """The merged summaries of many groups (e.g. rolling windows), read the way :class:`BinarySummary` is read:
    totals, the bias solve, and the loss and predicted positives at a shift per group (exact where it is 0)."""

    def __init__(self, columns: Mapping[str, np.ndarray], groups: Sequence[np.ndarray], bin_width: float) -> None:
        self.n = len(groups)
        self.bin_width = float(bin_width)
        self._chunks = _padded_chunks(columns, groups, None, bin_width)
        self.n_rows = self._each(lambda p, rows: p.f["count"][BIAS][:, rows].sum(axis=(0, 2)), dtype=np.int64)
        self.total_pos_weight = self._each(lambda p, rows: p.f["weight"][BIAS, 1][rows].sum(axis=1))
        self.total_weight = self._each(lambda p, rows: p.f["weight"][BIAS, 0][rows].sum(axis=1)) + self.total_pos_weight

    def _each(self, fn: Any, dtype: Any = np.float64) -> np.ndarray:
        out = np.zeros(self.n, dtype)
        for members, padded in self._chunks:
            out[members] = fn(padded, np.arange(members.size))
        return out

    def solve(self) -> list[float | DegenerateBiasError]:
        """c* of each group, or its DegenerateBiasError."""
        out: list[float | DegenerateBiasError] = [0.0] * self.n
        for members, padded in self._chunks:
            for slot, c in padded.biases(BIAS, np.arange(members.size)).items():
                out[members[slot]] = c
        return out

    def sums_at(self, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Σw·logloss(y, σ(z - c)) and Σw·σ(z - c) of each group at its shift (:meth:`BinarySummary.loss_sum`,
        :meth:`BinarySummary.predicted_positives`), both from one evaluation of the bins at c."""
        c = np.asarray(c, np.float64)
        loss, positives = np.zeros(self.n), np.zeros(self.n)
        for members, padded in self._chunks:
            loss[members], positives[members] = padded.sums_at(BIAS, c[members], np.arange(members.size))
        return loss, positives


def _padded_chunks(columns: Mapping[str, np.ndarray], groups: Sequence[np.ndarray], is_bias: np.ndarray | None,
                   bin_width: float) -> list[tuple[np.ndarray, _Padded]]:
    """(group numbers, their padded arrays) for groups of similar width, at most :data:`PAD_CELLS` cells each;
    without ``is_bias`` every row is in the first part."""
    if not groups:
        return []
    lens = np.array([g.size for g in groups], dtype=np.int64)
    rows = np.concatenate(groups) if len(groups) > 1 else np.asarray(groups[0])
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
    chunk_of, slot = np.zeros(len(groups), np.int64), np.zeros(len(groups), np.int64)
    members_of = []
    start = 0
    while start < by_width.size:
        end = start + 1
        while end < by_width.size and (end + 1 - start) * width[by_width[end]] <= PAD_CELLS:
            end += 1
        members = by_width[start:end]
        chunk_of[members], slot[members] = len(members_of), np.arange(members.size)
        members_of.append(members)
        start = end
    by_chunk = np.argsort(chunk_of[gid], kind="stable")  # each chunk's rows, still in (group, bin) order
    bounds = np.searchsorted(chunk_of[gid][by_chunk], np.arange(len(members_of) + 1))
    split = np.full(rows.size, BIAS) if is_bias is None else np.where(np.asarray(is_bias)[rows], BIAS, REMAIN)
    out = []
    for k, members in enumerate(members_of):
        take = by_chunk[bounds[k]:bounds[k + 1]]
        out.append((members, _Padded(columns, rows[take], split[take], slot[gid[take]], col[take], bins[take],
                                     members.size, max(1, int(width[members].max())), bin_width)))
    return out


class _Padded:
    """Summary cells of ``n`` groups as arrays ``field[part, label]`` of shape (n, width); a group's bins sit
    in its row in ascending order (the union over both parts and labels), padding has zero weight."""

    def __init__(self, columns: Mapping[str, np.ndarray], rows: np.ndarray, split: np.ndarray, slot: np.ndarray,
                 col: np.ndarray, bins: np.ndarray, n: int, width: int, h: float) -> None:
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
        for name in BINARY.names:
            summed = np.bincount(flat, weights=np.asarray(columns[name], np.float64)[rows], minlength=4 * n * width)
            self.f[name] = summed.reshape(2, 2, n, width)
            if name in BINARY.counts:
                self.f[name] = np.rint(self.f[name]).astype(np.int64)
        self.centres = (self.bins + 0.5) * h
        self._zero_loss: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    def _side(self, part: int, label: int, c: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per bin of ``rows``, one label at each row's shift ``c``: σ(x) (x = s·(m - c), the centre's margin,
        s = 1 - 2·label), the expanded loss sum, and A = (expanded missed mass) / σ(x), which is > 0 for h <= 0.5.

        One exp per bin gives σ(x), σ(-x) and softplus(±x), with the operations of :mod:`ctcalc_spark.core._math`.
        """
        sign = 1.0 - 2.0 * label
        x = sign * (self.centres[rows] - c[:, None])
        s, sc, l1p = sigmoid_pair(x)
        f = self.f
        w, m1, m2 = f["weight"][part, label][rows], sign * f["m1"][part, label][rows], f["m2"][part, label][rows]
        loss = w * (np.maximum(x, 0.0) + l1p) + m1 * s + 0.5 * m2 * s * sc
        a = w + m1 * sc + 0.5 * m2 * sc * (sc - s)
        return s, loss, a

    def sums_at(self, part: int, c: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Σw·logloss(y, σ(z - c)) and Σw·σ(z - c) of one part of ``rows`` at their shifts, both exact where c is
        0. Elsewhere the loss is the exact vanilla sum plus the expanded sums' difference between c and 0, and
        the predicted positives are expanded."""
        w, wmiss = self.f["weight"][part][:, rows], self.f["wmiss"][part][:, rows]
        loss = self.f["wloss"][part][:, rows].sum(axis=(0, 2))
        positives = (wmiss[0] + w[1] - wmiss[1]).sum(axis=1)
        at = np.flatnonzero(c != 0.0)
        if at.size:
            r, cr = rows[at], c[at]
            s0, loss0, a0 = self._side(part, 0, cr, r)
            s1, loss1, a1 = self._side(part, 1, cr, r)
            d0 = loss0.sum(axis=1) - self._loss_at_zero(part, 0, r)
            d1 = loss1.sum(axis=1) - self._loss_at_zero(part, 1, r)
            loss[at] = loss[at] + (d0 + d1)
            positives[at] = (s0 * a0).sum(axis=1) + w[1][at].sum(axis=1) - (s1 * a1).sum(axis=1)
        return loss, positives

    def _loss_at_zero(self, part: int, label: int, rows: np.ndarray) -> np.ndarray:
        """The expanded loss sum of one part and label of each of ``rows`` at shift 0 (:meth:`_side`), each row's
        computed once and kept: every shift's :meth:`sums_at` subtracts it."""
        if (part, label) not in self._zero_loss:
            self._zero_loss[part, label] = (np.zeros(self.n), np.zeros(self.n, bool))
        value, known = self._zero_loss[part, label]
        todo = np.unique(rows[~known[rows]])
        if todo.size:
            value[todo] = self._side(part, label, np.zeros(todo.size), todo)[1].sum(axis=1)
            known[todo] = True
        return value[rows]

    def solve(self, part: int, rows: np.ndarray) -> np.ndarray:
        """c* of one part of ``rows`` (each holds weight in both labels)."""
        w = self.f["weight"][part][:, rows]
        pos = w[1].sum(axis=1)
        total = w[0].sum(axis=1) + pos
        per_bin = w[0] + w[1]
        live = per_bin > 0
        bins = self.bins[rows]
        z_lo = np.where(live, bins, np.iinfo(np.int64).max).min(axis=1) * self.h
        z_hi = (np.where(live, bins, np.iinfo(np.int64).min).max(axis=1) + 1) * self.h
        lo, hi, x0 = logit_shift_start(z_lo, z_hi, (per_bin * self.centres[rows]).sum(axis=1) / total, pos / total)
        sides = []
        for label in (0, 1):
            sign = 1.0 - 2.0 * label
            wl = w[label]
            sides.append(PaddedSide(sign, self.centres[rows], wl, sign * self.f["m1"][part, label][rows],
                                     self.f["m2"][part, label][rows], wl > 0))
        return lockstep_solve(sides[0], sides[1], lo, hi, x0)

    def biases(self, part: int, candidates: np.ndarray) -> dict[int, float | DegenerateBiasError]:
        """c* of one part of each of the ``candidates`` rows, or the DegenerateBiasError of a part that is empty,
        has one class only, or balances within float rounding."""
        w = self.f["weight"][part]
        pos = w[1].sum(axis=1)
        total = w[0].sum(axis=1) + pos  # == pos exactly when no negatives
        n_rows = self.f["count"][part].sum(axis=(0, 2))
        out: dict[int, float | DegenerateBiasError] = {}
        fit = []
        for i in np.asarray(candidates).tolist():
            try:
                check_binary_bias_set(float(pos[i]), float(total[i]), int(n_rows[i]))
                fit.append(i)
            except DegenerateBiasError as e:
                out[i] = e
        if fit:
            for i, c in zip(fit, self.solve(part, np.array(fit)).tolist()):
                out[i] = bias_or_error(c)
        return out

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

        solved = self.biases(BIAS, np.flatnonzero((total > 0) & (r_total > 0)))
        c = np.array([v if isinstance(v, float) else 0.0 for v in (solved.get(i) for i in range(self.n))])
        shifted = self.sums_at(REMAIN, c, np.arange(self.n))[0]  # at c*; c is 0 where nothing was fitted

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
                row["status"] = STATUS_NO_BIAS_ROWS if n_bias[i] == 0 else STATUS_ZERO_WEIGHT
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



class GroupView:
    """One group of a :class:`BinaryGroups` at the shifts computed for it, read by
    :func:`ctcalc_spark.core.windows.finalize_rolling` the way it reads a :class:`BinarySummary` (the loss and
    the predicted positives exist at those shifts only; another shift is a KeyError, i.e. a bug)."""

    __slots__ = ("n_rows", "total_weight", "total_pos_weight", "bin_width", "_loss", "_positives")

    def __init__(self, n_rows: int, total_weight: float, total_pos_weight: float, bin_width: float,
                 loss: dict[float, float], positives: dict[float, float]) -> None:
        self.n_rows, self.total_weight, self.total_pos_weight = n_rows, total_weight, total_pos_weight
        self.bin_width, self._loss, self._positives = bin_width, loss, positives

    def log_loss(self, c: float = 0.0) -> float:
        return self._loss[c] / self.total_weight

    def predicted_positives(self, c: float = 0.0) -> float:
        return self._positives[c]


def group_views(groups: BinaryGroups, solved: Sequence[float | DegenerateBiasError],
                previous: np.ndarray) -> list[GroupView]:
    """A view of each group with its loss at 0, at its own c* and at its previous window's c*, and its
    predicted positives at 0 and at the previous c*. ``previous``: the previous window's group number, or -1."""
    own = np.array([c if isinstance(c, float) else 0.0 for c in solved])
    prev = np.array([own[j] if j >= 0 and isinstance(solved[j], float) else 0.0 for j in previous.tolist()])
    (loss0, pp0), (loss_own, _), (loss_prev, pp_prev) = (groups.sums_at(c) for c in (np.zeros(groups.n), own, prev))
    h = groups.bin_width
    return [GroupView(n, w, p, h, {0.0: l0, co: lo, cp: lp}, {0.0: q0, cp: qp}) for n, w, p, co, cp, l0, lo, lp, q0, qp
            in zip(groups.n_rows.tolist(), groups.total_weight.tolist(), groups.total_pos_weight.tolist(),
                   own.tolist(), prev.tolist(), loss0.tolist(), loss_own.tolist(), loss_prev.tolist(), pp0.tolist(),
                   pp_prev.tolist())]
