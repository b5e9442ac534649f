"""Tests of the paper's synthetic experiments: generator settings, fits, calibrated metrics, a quick run."""
from __future__ import annotations

import numpy as np
import pytest

from ctcalc_spark.core.calibrated import calibrated_log_loss, calibrated_quadratic_loss
from ctcalc_spark.core.metrics import log_loss_from_logits, mean_squared_error
from ctcalc_spark.paper.synthetic import (
    LINEAR,
    LOGISTIC,
    PAPER,
    draw_x,
    draw_y,
    fit_logistic,
    fit_ols,
    format_comparison,
    log_loss_metrics,
    quadratic_metrics,
    run_experiment,
    run_round,
    with_overrides,
)


def test_settings_match_design_section_6() -> None:
    assert (LINEAR.d, LINEAR.beta, LINEAR.x_mean, LINEAR.x_std) == (20, 1.0, -0.05, 0.25)
    assert (LINEAR.noise_mean, LINEAR.noise_std, LINEAR.n_train, LINEAR.n_bias, LINEAR.n_remain) == (1, 2, 1000, 1000, 10000)
    assert (LOGISTIC.n_train, LOGISTIC.n_bias, LOGISTIC.n_remain) == (1000, 2000, 10000)
    assert (LINEAR.features_a, LINEAR.features_b) == (20, 19) == (LOGISTIC.features_a, LOGISTIC.features_b)


def test_generator_moments() -> None:
    rng = np.random.default_rng(0)
    x = draw_x(rng, LINEAR, (200_000,))
    assert x.mean() == pytest.approx(-0.05, abs=2e-3) and x.std() == pytest.approx(0.25, abs=2e-3)
    y = draw_y(rng, LINEAR, x)
    resid = y - x.sum(axis=1)
    assert resid.mean() == pytest.approx(1.0, abs=0.02) and resid.std() == pytest.approx(2.0, abs=0.02)
    yl = draw_y(rng, LOGISTIC, x)
    assert set(np.unique(yl)) == {0.0, 1.0}
    assert yl.mean() == pytest.approx(np.mean(1 / (1 + np.exp(-x.sum(axis=1)))), abs=5e-3)


def test_fits_recover_the_coefficients() -> None:
    rng = np.random.default_rng(1)
    x = draw_x(rng, LINEAR, (2, 8_000))
    d = np.concatenate([np.ones((2, 8_000, 1)), x], axis=-1)
    w = fit_ols(d, draw_y(rng, LINEAR, x))
    assert w[:, 0] == pytest.approx([1.0, 1.0], abs=0.1) and np.abs(w[:, 1:] - 1).max() < 0.45
    wl = fit_logistic(d, draw_y(rng, LOGISTIC, x))
    assert np.abs(wl[:, 0]).max() < 0.15 and np.abs(wl[:, 1:] - 1).max() < 0.6
    # Independent reference: scipy's BFGS on the same unpenalised negative log likelihood.
    optimize = pytest.importorskip("scipy.optimize")
    x0 = x[0, :3000]
    d0 = d[0, :3000]
    y0 = draw_y(np.random.default_rng(2), LOGISTIC, x0)

    def nll(w: np.ndarray) -> tuple[float, np.ndarray]:
        eta = d0 @ w
        return float(np.sum(np.logaddexp(0, eta) - y0 * eta)), d0.T @ (1 / (1 + np.exp(-eta)) - y0)

    ref = optimize.minimize(nll, np.zeros(21), jac=True, method="BFGS", options={"gtol": 1e-9, "maxiter": 2000}).x
    assert fit_logistic(d0[None], y0[None])[0] == pytest.approx(ref, abs=1e-4)


def test_vectorised_metrics_equal_the_row_functions() -> None:
    rng = np.random.default_rng(3)
    n_bias, n = 300, 1300
    y = rng.normal(0, 1, n)
    pred = y[:, None] + rng.normal(0.2, 0.5, (n, 3))
    ql, cql = quadratic_metrics(y, pred, n_bias)
    for k in range(3):
        assert ql[k] == pytest.approx(mean_squared_error(y, pred[:, k]), rel=1e-12)
        assert cql[k] == pytest.approx(
            calibrated_quadratic_loss(y[:n_bias], pred[:n_bias, k], y[n_bias:], pred[n_bias:, k]), rel=1e-12)
    yb = (rng.random(n) < 0.3).astype(float)
    z = rng.normal(-1, 1, (n, 3)) + rng.normal(0, 0.3, 3)
    ll, cll = log_loss_metrics(yb, z, n_bias)
    for k in range(3):
        assert ll[k] == pytest.approx(log_loss_from_logits(yb, z[:, k]), rel=1e-12)
        assert cll[k] == pytest.approx(calibrated_log_loss(yb[:n_bias], z[:n_bias, k], yb[n_bias:], z[n_bias:, k]),
                                       rel=1e-10)


def test_round_shapes_and_a_better_than_b() -> None:
    r = run_round(LINEAR, 30, np.random.default_rng(4))
    assert r.van_a.shape == r.cal_b.shape == (30,)
    assert r.acc > 0.7 and r.cacc > 0.7  # A has the 20th feature: truly better
    assert r.van_a.mean() == pytest.approx(4.0, rel=0.06)  # noise variance 4 + estimation error


def test_per_run_validation_mode_runs() -> None:
    s = with_overrides(LOGISTIC, validation="per_run", n_remain=2000)
    r = run_round(s, 4, np.random.default_rng(5))
    assert np.isfinite(r.van_a).all() and np.isfinite(r.cal_b).all()


def test_quick_reproduction_prints_ours_next_to_the_paper() -> None:
    res = run_experiment(LOGISTIC, runs=12, rounds=3, seed=0)
    assert 0.5 < res.acc <= 1 and 0.5 < res.cacc <= 1 and res.acc_se > 0
    text = format_comparison(res)
    assert "ours (measured)" in text and "paper (published" in text and "Setup reading" in text
    assert f"{100 * PAPER['logistic']['acc']:.2f}%" in text  # the published figure, labelled as such
    assert res.to_dict()["setting"]["task"] == "logistic"


def test_reproduce_synthetic_cli_prints_and_saves_the_same_measured_figures(tmp_path, capsys) -> None:
    """``ctcalc reproduce-synthetic`` (in process: no Spark): the table on stdout, the JSON file, the same runs."""
    import json
    import re

    from ctcalc_spark.cli.main import main

    out = tmp_path / "synthetic.json"
    assert main(["reproduce-synthetic", "--task", "linear", "--runs", "10", "--rounds", "3", "--seed", "4",
                 "--json", str(out), "-q"]) == 0
    text = capsys.readouterr().out
    [saved] = json.loads(out.read_text())
    assert saved["setting"]["task"] == "linear" and (saved["runs"], saved["rounds"], saved["seed"]) == (10, 3, 4)
    assert re.search(rf"^QL Acc\s+{100 * saved['acc']:.2f}% ± {100 * saved['acc_se']:.2f}%\s+"
                     rf"{100 * PAPER['linear']['acc']:.2f}%", text, re.M), text
    assert re.search(rf"^CQL Acc\s+{100 * saved['cacc']:.2f}% ± {100 * saved['cacc_se']:.2f}%", text, re.M), text
    assert "Differences from the paper beyond 3 combined standard errors:" in text and "logistic" not in text
