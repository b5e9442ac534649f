"""Pure-numpy metrics and solvers against independent references (scikit-learn, scipy).

Tolerances: metrics to 1e-12 relative; c* and T* to 1e-9 absolute against
scipy root finders run to 1e-14.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq
from scipy.special import expit, log_softmax
from sklearn import metrics as skm

from ctcalc_spark import (
    DegenerateBiasError,
    InputError,
    auc_score,
    calibrated_log_loss,
    calibrated_multiclass_log_loss,
    calibrated_quadratic_loss,
    calibration_ratio,
    log_loss_from_logits,
    log_loss_from_probs,
    mean_squared_error,
    multiclass_log_loss,
    normalized_entropy,
    solve_logit_shift,
    solve_mean_shift,
    solve_temperature,
)
from ctcalc_spark.core.metrics import CLIP_EPS, clip_probabilities

from tests._rows import binary_logits


BINARY = dict(mu=-1.5, scale=1.2, shift=0.3, weights=(0.2, 3.0))
"""The rows of the binary tests here: binary_logits(20_000, seed, **BINARY)."""


@pytest.mark.parametrize("weighted", [False, True])
def test_log_loss_matches_sklearn(weighted):
    y, z, w = binary_logits(20_000, 0, **BINARY)
    w = w if weighted else None
    ref = skm.log_loss(y, expit(z), sample_weight=w)
    assert log_loss_from_logits(y, z, sample_weight=w) == pytest.approx(ref, rel=1e-12)
    assert log_loss_from_probs(y, expit(z), sample_weight=w) == pytest.approx(ref, rel=1e-10)


def test_auc_mse_ne_calibration_match_references():
    y, z, w = binary_logits(20_000, 1, **BINARY)
    z_tied = np.round(z, 1)  # ties must count one half, as in sklearn
    assert auc_score(y, z_tied, sample_weight=w) == pytest.approx(skm.roc_auc_score(y, z_tied, sample_weight=w), rel=1e-12)
    p = expit(z)
    assert mean_squared_error(y, p, sample_weight=w) == pytest.approx(skm.mean_squared_error(y, p, sample_weight=w), rel=1e-12)
    base = np.average(y, weights=w)
    h = -(base * np.log(base) + (1 - base) * np.log(1 - base))
    assert normalized_entropy(y, z, sample_weight=w) == pytest.approx(skm.log_loss(y, p, sample_weight=w) / h, rel=1e-12)
    assert calibration_ratio(y, z, sample_weight=w) == pytest.approx(np.sum(w * p) / np.sum(w * y), rel=1e-12)


def test_multiclass_log_loss_matches_sklearn_and_scipy():
    rng = np.random.default_rng(2)
    z = rng.normal(0, 2, (3000, 5))
    y = rng.integers(0, 5, 3000)
    w = rng.uniform(0.5, 2, 3000)
    sm = np.exp(log_softmax(z, axis=1))
    assert multiclass_log_loss(y, z, sample_weight=w) == pytest.approx(
        skm.log_loss(y, sm, sample_weight=w, labels=range(5)), rel=1e-10)
    t = 1.7
    ref = -np.average(log_softmax(z / t, axis=1)[np.arange(3000), y], weights=w)
    assert multiclass_log_loss(y, z, sample_weight=w, temperature=t) == pytest.approx(ref, rel=1e-12)
    for bad in (0.0, -1.0, float("nan"), float("inf")):  # no NaN for a temperature that divides nothing sensibly
        with pytest.raises(InputError, match=r"temperature must be a finite number > 0 .*, got"):
            multiclass_log_loss(y, z, temperature=bad)


def _scipy_shift(y, z, w):
    return brentq(lambda c: np.sum(w * expit(z - c)) - np.sum(w * y), -200, 200, xtol=1e-14, rtol=1e-15)


@pytest.mark.parametrize("base_rate", [0.001, 0.01, 0.1, 0.5])
@pytest.mark.parametrize("scale", [0.5, 5.0, 40.0])
def test_logit_shift_converges_on_extreme_inputs(base_rate, scale):
    rng = np.random.default_rng(int(base_rate * 1e4 + scale))
    n = 50_000
    z = np.clip(rng.normal(0, scale, n), -40, 40)
    y = (rng.random(n) < base_rate).astype(float)
    y[0], y[1] = 1.0, 0.0
    w = rng.uniform(0.5, 2, n)
    c = solve_logit_shift(y, z, sample_weight=w)
    assert c == pytest.approx(_scipy_shift(y, z, w), abs=1e-9)
    # first-order condition: adjusted predictions sum to the labels
    assert np.sum(w * expit(z - c)) == pytest.approx(np.sum(w * y), rel=1e-10)


def test_mean_shift_and_calibrated_quadratic_loss():
    rng = np.random.default_rng(3)
    p = rng.normal(0, 1, 1000)
    y = p + 0.4 + rng.normal(0, 1, 1000)
    w = rng.uniform(0.5, 2, 1000)
    c = solve_mean_shift(y[:200], p[:200], sample_weight=w[:200])
    assert c == pytest.approx(np.average(y[:200] - p[:200], weights=w[:200]), abs=1e-12)
    cql = calibrated_quadratic_loss(y[:200], p[:200], y[200:], p[200:], sample_weight_bias=w[:200], sample_weight_remain=w[200:])
    assert cql == pytest.approx(skm.mean_squared_error(y[200:], p[200:] + c, sample_weight=w[200:]), rel=1e-12)


def test_temperature_matches_scipy():
    rng = np.random.default_rng(4)
    z = rng.normal(0, 3, (4000, 4))
    y = rng.integers(0, 4, 4000)
    z[np.arange(4000), y] += 2.0
    w = rng.uniform(0.5, 2, 4000)

    def dce(beta):
        lp = log_softmax(beta * z, axis=1)
        pr = np.exp(lp)
        return np.sum(w * (np.sum(pr * z, axis=1) - z[np.arange(4000), y]))

    beta = brentq(dce, 1e-6, 100, xtol=1e-15)
    assert solve_temperature(y, z, sample_weight=w) == pytest.approx(1 / beta, abs=1e-9)
    cml = calibrated_multiclass_log_loss(y[:1000], z[:1000], y[1000:], z[1000:])
    t = solve_temperature(y[:1000], z[:1000])
    assert cml == pytest.approx(multiclass_log_loss(y[1000:], z[1000:], temperature=t), rel=1e-12)


def test_calibrated_log_loss_is_algorithm_1():
    y, z, w = binary_logits(20_000, 5, **BINARY)
    c = _scipy_shift(y[:2000], z[:2000], w[:2000])
    ref = skm.log_loss(y[2000:], expit(z[2000:] - c), sample_weight=w[2000:])
    got = calibrated_log_loss(y[:2000], z[:2000], y[2000:], z[2000:], sample_weight_bias=w[:2000], sample_weight_remain=w[2000:])
    assert got == pytest.approx(ref, rel=1e-10)


@pytest.mark.parametrize(
    ("y", "status"),
    [([0, 0, 0], "bias_single_class_negative"), ([1, 1, 1], "bias_single_class_positive"), ([], "no_bias_rows")],
)
def test_degenerate_bias_sets_raise_with_status(y, status):
    z = np.zeros(len(y))
    with pytest.raises(DegenerateBiasError) as e:
        solve_logit_shift(y, z)
    assert e.value.status == status


def test_temperature_degenerate_cases():
    z = np.array([[5.0, 0.0], [0.0, 5.0]])
    with pytest.raises(DegenerateBiasError, match="classified correctly") as e:
        solve_temperature([0, 1], z)
    assert e.value.status == "temperature_unbounded"
    with pytest.raises(DegenerateBiasError) as e:
        solve_temperature([1, 0], z)
    assert e.value.status == "temperature_not_positive"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: log_loss_from_logits([0, 1], [np.nan, 0.0]), "NaN/inf"),
        (lambda: log_loss_from_logits([0, 2], [0.0, 0.0]), "values 0/1"),
        (lambda: log_loss_from_logits([0, 1], [0.0, 0.0], sample_weight=[1, -1]), "negative"),
        (lambda: log_loss_from_probs([0, 1], [0.5, 1.2]), r"outside"),
        (lambda: log_loss_from_logits([0, 1], [0.0]), "2 rows"),
    ],
)
def test_bad_inputs_raise_clear_errors(call, match):
    with pytest.raises(InputError, match=match):
        call()


def test_probability_clipping_rule_is_counted():
    p = np.array([0.0, 1.0, 0.5, 1e-17, 1 - 1e-17])
    pc, n = clip_probabilities(p)
    assert n == 4
    assert pc.min() == CLIP_EPS and pc.max() == 1 - CLIP_EPS
    ll = log_loss_from_probs([0, 1, 1, 0, 1], p)
    assert np.isfinite(ll)
