"""Mergeable summaries: the histogram path against the exact row path, and algebraic properties.

Stated bound (ctcalc_spark/core/summary.py): |Δc*| <= bias_error_bound(h) = (h/2)³/6 + (h/2)⁴/8 + … and
|Δ calibrated log loss| <= 1e-6 at the default bin width h = 0.05.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import expit
from sklearn.metrics import roc_auc_score

from ctcalc_spark import BinarySummary, RegressionSummary, calibrated_log_loss, log_loss_from_logits, solve_logit_shift
from ctcalc_spark.core.calibrated import calibrated_quadratic_loss
from ctcalc_spark.core.summary import bias_error_bound, finalize_binary, finalize_regression

from tests._rows import binary_logits

H = 0.05
C_BOUND = bias_error_bound(H)
LOSS_BOUND = 1e-6


CASES = {
    "ctr_realistic": dict(mu=-2.0, scale=1.0, shift=0.2),
    "base_rate_0.1pct": dict(mu=-7.0, scale=1.5, shift=0.3),
    "balanced_wide": dict(mu=0.0, scale=4.0, shift=-0.5),
    "extreme_logits_40": dict(mu=0.0, scale=25.0, shift=1.0),
    "overconfident": dict(mu=-3.0, scale=8.0, shift=-2.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_histogram_path_within_stated_bound(case):
    y, z, w = binary_logits(100_000, len(case), **CASES[case])
    nb = 10_000
    bias = BinarySummary.from_logits(y[:nb], z[:nb], sample_weight=w[:nb], bin_width=H)
    remain = BinarySummary.from_logits(y[nb:], z[nb:], sample_weight=w[nb:], bin_width=H)
    row = finalize_binary(bias, remain)
    c_exact = solve_logit_shift(y[:nb], z[:nb], sample_weight=w[:nb])
    cll_exact = calibrated_log_loss(y[:nb], z[:nb], y[nb:], z[nb:], sample_weight_bias=w[:nb], sample_weight_remain=w[nb:])
    assert row["status"] == "ok"
    assert abs(row["bias"] - c_exact) <= C_BOUND
    assert abs(row["calibrated_log_loss"] - cll_exact) <= LOSS_BOUND
    # vanilla values are exact sums, not approximations
    assert row["log_loss"] == pytest.approx(log_loss_from_logits(y, z, sample_weight=w), rel=1e-12)
    assert row["log_loss_remain"] == pytest.approx(log_loss_from_logits(y[nb:], z[nb:], sample_weight=w[nb:]), rel=1e-12)
    auc_exact = roc_auc_score(y, z, sample_weight=w)
    assert abs(row["auc"] - auc_exact) <= row["auc_bound"] + 1e-12
    assert row["calibration"] == pytest.approx(np.sum(w * expit(z)) / np.sum(w * y), rel=1e-12)


def test_loss_at_any_shift_matches_rows():
    y, z, w = binary_logits(50_000, 11, -1.0, 2.0)
    s = BinarySummary.from_logits(y, z, sample_weight=w, bin_width=H)
    for c in (-3.0, -0.4, 0.0, 0.05, 1.3, 6.0):
        assert abs(s.log_loss(c) - log_loss_from_logits(y, z - c, sample_weight=w)) <= LOSS_BOUND
    assert s.log_loss(0.0) == pytest.approx(log_loss_from_logits(y, z, sample_weight=w), rel=1e-13)


def test_from_probs_counts_clipped_rows():
    p = np.array([0.0, 1.0, 0.3, 0.7, 0.2])
    y = np.array([0, 1, 0, 1, 1])
    s = BinarySummary.from_probs(y, p)
    assert s.n_clipped == 2 and s.n_rows == 5
    assert np.isfinite(s.log_loss())


def test_degenerate_groups_get_status_not_nan():
    y, z, _ = binary_logits(1000, 3, -1.0, 1.0)
    remain = BinarySummary.from_logits(y, z)
    cases = {
        "bias_single_class_negative": BinarySummary.from_logits(np.zeros(50), z[:50]),
        "bias_single_class_positive": BinarySummary.from_logits(np.ones(50), z[:50]),
        "no_bias_rows": BinarySummary.empty(),
    }
    for status, bias in cases.items():
        row = finalize_binary(bias, remain)
        assert row["status"] == status
        assert row["calibrated_log_loss"] is None and row["bias"] is None
        assert all(v is None or np.isfinite(v) for v in row.values() if not isinstance(v, str))
    row = finalize_binary(remain, BinarySummary.empty())
    assert row["status"] == "no_remain_rows" and row["calibrated_log_loss"] is None


summaries = st.builds(
    lambda seed, n, mu: BinarySummary.from_logits(*binary_logits(n, seed, mu, 2.0)[:2], bin_width=H),
    st.integers(0, 10_000), st.integers(1, 300), st.floats(-5, 5),
)


def _close(a: BinarySummary, b: BinarySummary) -> None:
    np.testing.assert_array_equal(a.bins, b.bins)
    ca, cb = a.to_columns(dense=True), b.to_columns(dense=True)
    assert ca.keys() == cb.keys()
    for name, arr in ca.items():
        np.testing.assert_allclose(arr, cb[name], rtol=1e-12, atol=1e-12, err_msg=name)


@settings(max_examples=40, deadline=None)
@given(summaries, summaries, summaries)
def test_merge_is_associative_and_commutative(a, b, c):
    _close(a.merge(b).merge(c), a.merge(b.merge(c)))
    _close(a.merge(b), b.merge(a))
    _close(a.merge(BinarySummary.empty(H)), a)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(-6, 3), st.floats(0.3, 6), st.floats(0.1, 1.0))
def test_solved_bias_balances_predictions_and_labels(seed, mu, scale, frac):
    y, z, w = binary_logits(2000, seed, mu, scale)
    k = max(2, int(2000 * frac))
    y, z, w = y[:k], z[:k], w[:k]
    if y.sum() == 0 or y.sum() == k:
        return
    c = solve_logit_shift(y, z, sample_weight=w)
    assert np.sum(w * expit(z - c)) == pytest.approx(np.sum(w * y), rel=1e-9, abs=1e-9)
    s = BinarySummary.from_logits(y, z, sample_weight=w, bin_width=H)
    assert abs(s.solve_bias() - c) <= C_BOUND


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 12))
def test_summary_of_parts_equals_summary_of_whole(seed, parts):
    y, z, w = binary_logits(3000, seed, -1.0, 3.0)
    whole = BinarySummary.from_logits(y, z, sample_weight=w, bin_width=H)
    merged = BinarySummary.empty(H)
    for idx in np.array_split(np.arange(3000), parts):
        merged = merged.merge(BinarySummary.from_logits(y[idx], z[idx], sample_weight=w[idx], bin_width=H))
    _close(merged, whole)


def test_regression_summary_is_exact():
    rng = np.random.default_rng(5)
    p = rng.normal(0, 1, 5000)
    y = p + 0.3 + rng.normal(0, 2, 5000)
    w = rng.uniform(0.5, 2, 5000)
    bias = RegressionSummary.from_rows(y[:500], p[:500], sample_weight=w[:500])
    remain = RegressionSummary.from_rows(y[500:], p[500:], sample_weight=w[500:])
    row = finalize_regression(bias, remain)
    ref = calibrated_quadratic_loss(y[:500], p[:500], y[500:], p[500:], sample_weight_bias=w[:500], sample_weight_remain=w[500:])
    assert row["calibrated_mse"] == pytest.approx(ref, rel=1e-12)
    assert row["mse"] == pytest.approx(np.average((y - p) ** 2, weights=w), rel=1e-12)
    assert finalize_regression(RegressionSummary(), remain)["status"] == "no_bias_rows"


def test_stated_loss_bound_formula_covers_the_error():
    from ctcalc_spark.core.summary import calibrated_log_loss_bound

    for case, kw in CASES.items():
        y, z, w = binary_logits(40_000, 7 + len(case), **kw)
        bias = BinarySummary.from_logits(y[:4000], z[:4000], sample_weight=w[:4000])
        remain = BinarySummary.from_logits(y[4000:], z[4000:], sample_weight=w[4000:])
        c = bias.solve_bias()
        exact = calibrated_log_loss(y[:4000], z[:4000], y[4000:], z[4000:], sample_weight_bias=w[:4000], sample_weight_remain=w[4000:])
        bound = calibrated_log_loss_bound(remain, c)
        assert abs(remain.log_loss(c) - exact) <= bound, case
        assert bound <= 1e-6, case


def test_logit_shift_keeps_tiny_terms_when_every_bias_row_is_confidently_right():
    """Every val-bias row has |z| >= 30 and the right sign: the old residual Σw·y - Σw·σ(z - c) lost its
    e^-30-sized terms (c* off by 3.9e-3 on the histogram path, 7.1e-4 on rows). With |z - c| >= 25 each
    σ is e^-|margin| to 1e-11 relative, so c* = ½·(logsumexp(z_neg) - logsumexp(-z_pos)) to ~1e-11."""
    from scipy.special import logsumexp

    rng = np.random.default_rng(5)
    z_pos, z_neg = rng.uniform(30, 40, 60), -rng.uniform(30, 45, 240)
    y = np.concatenate([np.ones(60), np.zeros(240)])
    z = np.concatenate([z_pos, z_neg])
    w = rng.uniform(0.5, 2.0, y.size)
    want = 0.5 * (logsumexp(z_neg, b=w[60:]) - logsumexp(-z_pos, b=w[:60]))
    assert abs(solve_logit_shift(y, z, sample_weight=w) - want) < 1e-9
    hist = BinarySummary.from_logits(y, z, sample_weight=w, bin_width=H).solve_bias()
    assert abs(hist - want) <= C_BOUND  # the histogram path within its stated bound


def _root_by_scipy(y, z, w):
    """c* from scipy.optimize.brentq on Σw·σ(z - c) - Σw·y evaluated in 60-digit arithmetic (mpmath): a reference
    that shares no code and no formulation with either solver."""
    from mpmath import mp, mpf
    from scipy.optimize import brentq

    mp.dps = 60
    rows = [(mpf(float(a)), mpf(float(b)), mpf(float(c))) for a, b, c in zip(y, z, w)]
    target = sum(wi * yi for yi, _, wi in rows)

    def excess(c):
        c = mpf(c)
        return float(sum(wi / (1 + mp.exp(c - zi)) for _, zi, wi in rows) - target)

    return brentq(excess, float(np.min(z)) - 60, float(np.max(z)) + 60, xtol=1e-14, rtol=1e-15, maxiter=400)


def _confidently_wrong_rows(seed, ordinary):
    """Val-bias positives at logits -25..-40 and negatives at +25..+40 (every one wrong by e^-25 or less), in equal
    integer weight so that c* balances their tiny hit masses; ``ordinary`` adds as many ordinary rows."""
    rng = np.random.default_rng(seed)
    n = 150
    z = np.r_[-rng.uniform(25, 40, n), rng.uniform(25, 40, n)]
    y = np.r_[np.ones(n), np.zeros(n)]
    w_pos = rng.integers(1, 4, n).astype(float)
    w = np.r_[w_pos, rng.permutation(w_pos)]  # equal weight on both sides
    if ordinary:
        zo = rng.normal(0.0, 1.5, ordinary)
        yo = (rng.random(ordinary) < expit(zo)).astype(float)
        z, y, w = np.r_[z, zo], np.r_[y, yo], np.r_[w, rng.integers(1, 3, ordinary).astype(float)]
    return y, z, w


@pytest.mark.parametrize("seed,ordinary", [(0, 0), (1, 0), (2, 0), (3, 40), (4, 40), (5, 3)])
def test_confidently_wrong_val_bias_rows_give_c_within_the_bound_on_both_solvers(seed, ordinary):
    """The mirror image of the confidently right case: Q and P are both near Σw and c* is decided by their
    e^-25-sized difference. The row solver matches the scipy reference to 1e-9, the histogram solver (one summary,
    many in lockstep, and the finaliser) within the stated bound, every status 'ok'."""
    from ctcalc_spark.core.summary import solve_biases

    y, z, w = _confidently_wrong_rows(seed, ordinary)
    want = _root_by_scipy(y, z, w)
    assert abs(solve_logit_shift(y, z, sample_weight=w) - want) <= 1e-9
    bias = BinarySummary.from_logits(y, z, sample_weight=w, bin_width=H)
    assert abs(bias.solve_bias() - want) <= C_BOUND
    (batched,) = solve_biases([bias])
    assert abs(batched - want) <= C_BOUND
    row = finalize_binary(bias, BinarySummary.from_logits(y[::2], z[::2] * 0.1, bin_width=H))
    assert row["status"] == "ok" and abs(row["bias"] - want) <= C_BOUND


def test_confidently_wrong_rows_balanced_below_rounding_get_a_status_on_both_paths():
    """Weights of 0.1 (not a binary fraction) on confidently wrong rows in balance: c* then turns on the last
    bits of the weight sums (the two labels' sums of 0.1 differ by rounding alone), so no path reports a c*; each
    says why, with the same status, and the metrics row keeps its vanilla values."""
    from ctcalc_spark.errors import DegenerateBiasError

    rng = np.random.default_rng(1)
    z = np.r_[-rng.uniform(28, 35, 10), rng.uniform(28, 35, 10)]
    y, w = np.r_[np.ones(10), np.zeros(10)], np.full(20, 0.1)
    with pytest.raises(DegenerateBiasError) as rows_error:
        solve_logit_shift(y, z, sample_weight=w)
    bias = BinarySummary.from_logits(y, z, sample_weight=w, bin_width=H)
    with pytest.raises(DegenerateBiasError) as hist_error:
        bias.solve_bias()
    assert rows_error.value.status == hist_error.value.status == "bias_ill_conditioned"
    row = finalize_binary(bias, BinarySummary.from_logits(y, z * 0.01, bin_width=H))
    assert row["status"] == "bias_ill_conditioned"
    assert row["bias"] is None and row["calibrated_log_loss"] is None and row["log_loss"] is not None
    # the same rows with weight 1 sum exactly: c* is reported, and is right
    assert abs(solve_logit_shift(y, z) - _root_by_scipy(y, z, np.ones(20))) <= 1e-9


def test_bias_bound_is_its_closed_form():
    a = H / 2
    assert bias_error_bound(H) == pytest.approx(np.exp(a) * (1 - a + a * a / 2) - 1, rel=1e-9)
    assert bias_error_bound(H) == pytest.approx(a**3 / 6 + a**4 / 8 + a**5 / 20 + a**6 / 72, rel=1e-8)
    assert f"{bias_error_bound(H):.4e}" == "2.6535e-06"  # the figures docs/evaluate.md states
    assert f"{a**3 / 6:.4e}" == "2.6042e-06"
    assert f"{a**3 / (18 * np.sqrt(3)):.1e}" == "5.0e-07"  # the loss bound's own term


def test_per_row_ratio_behind_the_bias_bound_never_exceeds_it():
    """|Δc*| <= max over rows of |log(σ̃/σ)| / (1 - σ) (summary.py): σ̃ the second-order expansion of σ around
    the bin centre. On a grid of margins and offsets, in 60-digit arithmetic, that ratio stays within the bound
    and reaches it (to 1e-6 relative) at a logit on a bin edge far in a tail."""
    from mpmath import mp, mpf

    mp.dps = 60
    a = mpf(H) / 2
    worst = mpf(0)
    for x in np.r_[np.linspace(-40, -5, 36), np.linspace(-5, 5, 101), np.linspace(5, 40, 36)]:
        for d in np.linspace(-float(a), float(a), 9):
            x_, d_ = mpf(float(x)), mpf(float(d))
            s = 1 / (1 + mp.exp(-(x_ - d_)))  # σ at the bin centre
            expanded = s + s * (1 - s) * d_ + s * (1 - s) * (1 - 2 * s) * d_ * d_ / 2
            exact = 1 / (1 + mp.exp(-x_))
            worst = max(worst, abs(mp.log(expanded / exact)) / (1 - exact))
    assert float(worst) <= bias_error_bound(H) * (1 + 1e-12)
    assert float(worst) >= bias_error_bound(H) * (1 - 1e-6)


def _bias_error(z_pos, z_neg, w_pos, w_neg):
    y = np.r_[np.ones(len(z_pos)), np.zeros(len(z_neg))]
    z, w = np.r_[z_pos, z_neg], np.r_[w_pos, w_neg]
    exact = solve_logit_shift(y, z, sample_weight=w)
    return BinarySummary.from_logits(y, z, sample_weight=w, bin_width=H).solve_bias() - exact


def test_worst_cases_of_the_bias_bound():
    """Logits on bin edges (offset -h/2 from the centre) reach the bound, and stay within it:

    * every val-bias row extreme and correctly predicted (positives at 35, negatives at -35): the two labels'
      errors partly cancel, |Δc*| = 2.6047e-6 = (h/2)³/6 · 1.0002 (the leading term (h/2)³/6 = 2.6042e-6 alone is short);
    * 100,000 negatives at -10 (on a bin edge, confidently right) and one positive at -10.025 (a bin centre: no
      error of its own, and so badly missed that its side's log mass barely moves with c): the negatives' error
      is all of Δc*, |Δc*| = 2.6533e-6, 1.9 % over (h/2)³/6 and 0.01 % under the stated bound."""
    both_tails = _bias_error(np.array([35.0]), np.array([-35.0]), np.ones(1), np.ones(1))
    assert f"{abs(both_tails):.4e}" == "2.6047e-06"
    one_side = _bias_error(np.array([-10.025]), np.full(100_000, -10.0), np.ones(1), np.ones(100_000))
    assert f"{abs(one_side):.4e}" == "2.6533e-06"
    assert abs(one_side) > (H / 2) ** 3 / 6 * 1.018
    assert abs(both_tails) <= abs(one_side) <= C_BOUND


@pytest.mark.parametrize("scale", [1e3, 1e17, 1e300])
def test_any_finite_logit_gives_a_finite_bias_on_both_paths(scale):
    rng = np.random.default_rng(6)
    z = np.concatenate([rng.uniform(1, 2, 40), -rng.uniform(1, 2, 60)]) * scale
    y = np.concatenate([np.ones(40), np.zeros(60)])
    row = solve_logit_shift(y, z)
    summary = BinarySummary.from_logits(y, z, bin_width=H)
    hist = summary.solve_bias()
    assert np.isfinite(row) and np.isfinite(hist)
    assert np.isfinite(summary.log_loss()) and np.isfinite(summary.log_loss(hist))
    if scale <= 1e3:  # below the histogram clamp (1e9) both paths solve the same problem
        assert abs(row - hist) <= C_BOUND * max(1.0, abs(row))


def test_sigmoid_pair_is_bit_identical_to_the_math_functions():
    """The solver's one-exp helper gives exactly sigmoid(x), sigmoid(-x) and softplus(+-x) (no tolerance)."""
    from ctcalc_spark.core._math import sigmoid, softplus
    from ctcalc_spark.core.solvers import sigmoid_pair

    x = np.concatenate([np.linspace(-800, 800, 4001), [0.0, -0.0, 1e-300, -1e-300, 36.7, -36.7]])
    s, sc, l1p = sigmoid_pair(x)
    assert np.array_equal(s, sigmoid(x)) and np.array_equal(sc, sigmoid(-x))
    assert np.array_equal(np.maximum(x, 0.0) + l1p, softplus(x))
    assert np.array_equal(np.maximum(-x, 0.0) + l1p, softplus(-x))


def test_batched_bias_solves_equal_one_at_a_time_solves():
    """solve_biases (lockstep over padded bins) gives each summary's c* as its own solve_bias does, to the
    Newton stopping step (1e-13·(1+|c|)), and the same status for degenerate ones; summaries of very
    different widths, bin widths and weights in one call."""
    from ctcalc_spark.core.summary import solve_biases
    from ctcalc_spark.errors import DegenerateBiasError

    rng = np.random.default_rng(11)
    summaries = []
    for i in range(300):
        n = int(rng.integers(1, 2000))
        z = rng.normal(rng.normal(-2, 2), rng.uniform(0.1, 3), n) * (40 if i % 37 == 0 else 1)
        y = (rng.random(n) < expit(z + rng.normal(0, 1))).astype(float)
        if i % 50 == 1:
            y[:] = 0.0  # single class: no finite bias
        w = rng.uniform(0, 2, n) if i % 3 == 0 else None
        summaries.append(BinarySummary.from_logits(y, z, sample_weight=w, bin_width=(0.05, 0.1, 0.02)[i % 3]))
    summaries.append(BinarySummary.empty(H))
    got = solve_biases(summaries)
    n_degenerate = 0
    for s, c in zip(summaries, got):
        try:
            want = s.solve_bias()
        except DegenerateBiasError as e:
            assert isinstance(c, DegenerateBiasError) and c.status == e.status
            n_degenerate += 1
            continue
        assert isinstance(c, float) and abs(c - want) <= 2e-13 * (1.0 + abs(want))
    assert n_degenerate >= 7


def _battery_groups(rng, n_groups):
    """Summary-table rows of many groups of every kind finalize_binary tells apart, as (columns, groups, is_bias)."""
    from ctcalc_spark.core.state import BINARY

    names = [*BINARY.cell_names, *BINARY.names]
    cols = {n: [] for n in names}
    split, groups, start = [], [], 0
    for i in range(n_groups):
        kind = i % 10
        n = int(rng.integers(1, 3000)) if kind != 9 else 2
        z = rng.normal(rng.normal(-2, 2), rng.uniform(0.1, 4), n) * (30 if kind == 8 else 1)
        y = (rng.random(n) < expit(z + rng.normal(0, 1))).astype(float)
        w = rng.uniform(0, 3, n) if kind % 2 else None
        if kind == 1:
            y[:] = 1.0  # a single class everywhere
        if kind == 3:
            w = np.zeros(n)  # zero weight
        isb = rng.random(n) < (0.0 if kind == 5 else 1.0 if kind == 7 else 0.1)  # no bias / no remain rows
        if kind == 6:
            y[isb] = 0.0  # the val-bias part holds one class only
        parts = []
        for flag in (True, False):
            m = isb == flag
            if not m.any():
                continue
            # kind 4: the group's rows come in two slices that share bins (cells are summed, as the '__all__' view does)
            pieces = np.array_split(np.flatnonzero(m), 2) if kind == 4 else [np.flatnonzero(m)]
            for idx in pieces:
                s = BinarySummary.from_logits(y[idx], z[idx], sample_weight=None if w is None else w[idx], bin_width=H)
                c = s.to_columns()
                parts.append(c)
                split += [flag] * c["bin"].size
        for c in parts:
            for n_ in names:
                cols[n_].append(c[n_])
        size = sum(c["bin"].size for c in parts)
        groups.append(rng.permutation(np.arange(start, start + size)))  # row order must not matter beyond rounding
        start += size
    columns = {n: np.concatenate(v) for n, v in cols.items()}
    return columns, groups, np.array(split)


def test_many_groups_finalised_at_once_equal_finalize_binary_group_by_group():
    """finalize_binary_groups (padded arrays, one lockstep solve) gives each group the row finalize_binary gives
    its own summaries: the same statuses and None fields, counts equal, floats to 1e-13 relative (summation
    order; the bias to the Newton stopping step). The battery has single-class, zero-weight, no-bias, no-remain,
    bias-single-class, extreme-logit and two-row groups, and groups whose cells repeat across rows."""
    from ctcalc_spark.core.batch import finalize_binary_groups
    from ctcalc_spark.core.state import BINARY

    rng = np.random.default_rng(5)
    columns, groups, is_bias = _battery_groups(rng, 400)
    got = finalize_binary_groups(columns, groups, is_bias, bin_width=H, max_abs_logit=50.0)
    statuses = set()
    for idx, row in zip(groups, got):
        def summary(rows):
            if rows.size == 0:
                return BinarySummary.empty(H)
            return BinarySummary.from_columns(H, columns["bin"][rows], columns["label"][rows],
                                              **{n: columns[n][rows] for n in BINARY.names})
        want = finalize_binary(summary(np.sort(idx[is_bias[idx]])), summary(np.sort(idx[~is_bias[idx]])))
        assert set(row) == set(want)
        statuses.add(want["status"])
        for key, value in want.items():
            if value is None or isinstance(value, (str, int)):
                assert row[key] == value, (key, row, want)
            elif key == "bias":
                assert abs(row[key] - value) <= 2e-13 * (1.0 + abs(value)), key
            else:
                assert row[key] == pytest.approx(value, rel=1e-13, abs=1e-15), (key, row[key], value)
    assert statuses >= {"ok", "no_bias_rows", "no_remain_rows", "zero_weight", "bias_single_class_positive",
                        "bias_single_class_negative"}, statuses


@pytest.mark.parametrize("label", [0.0, 1.0])
def test_a_one_class_group_with_fractional_weights_is_one_class_whatever_the_rounding(label):
    """Σw over both labels used to be one sum of the (2, bins) array, which can round differently from Σw of the
    positives alone: a positive-only group then had a base rate just below 1, an AUC of NaN (0/0: a crash in
    check_row) and a bias fitted to rounding noise (calibrated log loss below 0). The total is now Σw(neg) + Σw(pos),
    equal to Σw(pos) exactly when no negative has weight."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        n = int(rng.integers(50, 3000))
        z = rng.normal(-1.0, 3.0, n)
        y = np.full(n, label)
        w = rng.uniform(0, 3, n)
        bias = BinarySummary.from_logits(y[: n // 5], z[: n // 5], sample_weight=w[: n // 5], bin_width=H)
        remain = BinarySummary.from_logits(y[n // 5:], z[n // 5:], sample_weight=w[n // 5:], bin_width=H)
        whole = bias.merge(remain)
        assert whole.total_pos_weight == (whole.total_weight if label else 0.0)
        row = finalize_binary(bias, remain)
        assert row["status"] == ("bias_single_class_positive" if label else "bias_single_class_negative")
        assert row["base_rate"] == label and row["auc"] is None and row["normalized_entropy"] is None
        assert row["calibrated_log_loss"] is None and row["bias"] is None


def test_a_mean_over_zero_weight_is_an_input_error_that_says_so():
    from ctcalc_spark.errors import InputError

    empty = BinarySummary.from_logits(np.array([1.0, 0.0]), np.array([0.3, -1.0]), sample_weight=np.zeros(2))
    with pytest.raises(InputError, match=r"BinarySummary\.log_loss: total weight is 0"):
        empty.log_loss()
    assert empty.loss_sum() == 0.0  # the sum itself is defined
    none = RegressionSummary.from_rows(np.array([1.0]), np.array([0.5]), sample_weight=np.zeros(1))
    with pytest.raises(InputError, match=r"RegressionSummary\.mse: total weight is 0"):
        none.mse(0.1)
