"""The paper's synthetic experiments (DESIGN.md §6), vectorised in numpy.

Two settings share the features ``X ~ N(-0.05, 0.25²·I_20)`` and ``β = 1``:

* **linear**: ``y = βᵀx + ε``, ``ε ~ N(1, 2)``, ordinary least squares, quadratic
  loss (QL) vs calibrated quadratic loss (CQL); validation = 1,000 val-bias +
  10,000 val-remain rows.
* **logistic**: ``y ~ Bernoulli(sigmoid(βᵀx))``, logistic regression fitted by
  Newton/IRLS (no penalty), log loss (LL) vs calibrated log loss (CLL);
  validation = 2,000 val-bias + 10,000 val-remain rows.

Pipeline A uses all 20 features, pipeline B the first 19, so A is truly better.
Each run draws a fresh training sample of 1,000 rows. A *round* trains
``runs`` models of each pipeline and computes the metric accuracy
(:func:`ctcalc_spark.core.accuracy.metric_accuracy`) of the vanilla and the
calibrated metric; the reported accuracy is the mean over rounds ± its standard
error (std across rounds / √rounds).

Setup reading (the paper leaves these open; each is a parameter here):

* ``N(1, 2)`` is read as mean 1, **standard deviation 2** (variance 4): the
  paper's QL mean of 4.07 is the noise variance plus a small estimation error,
  which fits a variance of 4, not 2.
* the validation set is **fixed per round** (shared by every run of both
  pipelines in the round, redrawn each round); ``validation='per_run'`` draws a
  fresh one for every trained model instead.
* both models fit an **intercept** (``fit_intercept=False`` drops it); the
  training samples of A's and B's runs are independent draws.
* the vanilla metric is computed on the whole validation set (val-bias +
  val-remain), the calibrated one on val-remain after the bias fitted on
  val-bias (DESIGN.md §2).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace
from typing import Any, Callable

import numpy as np

from ctcalc_spark.core._math import sigmoid, softplus
from ctcalc_spark.core.accuracy import metric_accuracy
from ctcalc_spark.errors import ConfigError

TASKS = ("linear", "logistic")
VALIDATION_MODES = ("per_round", "per_run")
IRLS_TOL = 1e-10
IRLS_MAX_ITER = 50


@dataclass(frozen=True)
class SyntheticSetting:
    """One synthetic experiment; defaults are the paper's linear-regression setting."""

    task: str = "linear"
    d: int = 20
    beta: float = 1.0
    x_mean: float = -0.05
    x_std: float = 0.25
    noise_mean: float = 1.0
    noise_std: float = 2.0
    n_train: int = 1000
    n_bias: int = 1000
    n_remain: int = 10_000
    features_a: int = 20
    features_b: int = 19
    fit_intercept: bool = True
    validation: str = "per_round"

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ConfigError(f"Expected task in {TASKS}, got {self.task!r}.")
        if self.validation not in VALIDATION_MODES:
            raise ConfigError(f"Expected validation in {VALIDATION_MODES}, got {self.validation!r}.")
        if not (1 <= self.features_b <= self.d and 1 <= self.features_a <= self.d):
            raise ConfigError(f"Expected 1 <= features_a, features_b <= d={self.d}.")
        if min(self.n_train, self.n_bias, self.n_remain) < 1:
            raise ConfigError("Expected n_train, n_bias and n_remain >= 1.")

    @property
    def metric(self) -> str:
        return "QL" if self.task == "linear" else "LL"


LINEAR = SyntheticSetting()
LOGISTIC = SyntheticSetting(task="logistic", n_bias=2000, noise_mean=0.0, noise_std=0.0)

PAPER = {
    # The paper's own published numbers (DESIGN.md §6), 100 runs x 100 rounds. Not computed here.
    "linear": {"acc": 0.935, "acc_se": 0.0019, "cacc": 0.9453, "cacc_se": 0.0017,
               "mean": 4.067, "cmean": 4.069, "std": 0.0298, "cstd": 0.0286},
    "logistic": {"acc": 0.8593, "acc_se": 0.0026, "cacc": 0.8936, "cacc_se": 0.0024,
                 "mean": 0.5249, "cmean": 0.5219, "std": 0.00376, "cstd": 0.00357},
}
PAPER_EARLIER_LOGISTIC = {"acc": 0.7962, "cacc": 0.837, "runs": 1000, "rounds": 20}


# ---- data ---------------------------------------------------------------------------------

def draw_x(rng: np.random.Generator, s: SyntheticSetting, shape: tuple[int, ...]) -> np.ndarray:
    """Features ``N(x_mean, x_std²)`` of shape ``shape + (d,)``."""
    return rng.normal(s.x_mean, s.x_std, size=(*shape, s.d))


def draw_y(rng: np.random.Generator, s: SyntheticSetting, x: np.ndarray) -> np.ndarray:
    """Labels of rows ``x``: ``βᵀx + ε`` (linear) or ``Bernoulli(sigmoid(βᵀx))`` (logistic)."""
    signal = s.beta * x.sum(axis=-1)
    if s.task == "linear":
        return signal + rng.normal(s.noise_mean, s.noise_std, size=signal.shape)
    return (rng.random(signal.shape) < sigmoid(signal)).astype(np.float64)


def _design(x: np.ndarray, k: int, fit_intercept: bool) -> np.ndarray:
    cols = x[..., :k]
    if not fit_intercept:
        return cols
    return np.concatenate([np.ones((*x.shape[:-1], 1)), cols], axis=-1)


# ---- fitting (batched over runs) ----------------------------------------------------------

def fit_ols(d: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Least squares for a batch: ``d`` (runs, n, p), ``y`` (runs, n) -> coefficients (runs, p)."""
    g = np.matmul(d.transpose(0, 2, 1), d)
    r = np.matmul(d.transpose(0, 2, 1), y[..., None])
    return np.linalg.solve(g, r)[..., 0]


def fit_logistic(d: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Unpenalised logistic regression by Newton/IRLS for a batch (runs, n, p) -> (runs, p).

    Newton steps with step halving on the log likelihood; stops when every
    step is below 1e-10 (max-abs). Raises if a sample is separable.
    """
    runs, _, p = d.shape
    w = np.zeros((runs, p))
    dt = d.transpose(0, 2, 1)

    def nll(wv: np.ndarray) -> np.ndarray:
        eta = np.matmul(d, wv[..., None])[..., 0]
        return np.sum(softplus(eta) - y * eta, axis=1)

    cur = nll(w)
    for _ in range(IRLS_MAX_ITER):
        eta = np.matmul(d, w[..., None])[..., 0]
        pr = sigmoid(eta)
        grad = np.matmul(dt, (y - pr)[..., None])[..., 0]
        hess = np.matmul(dt * (pr * (1.0 - pr))[:, None, :], d)
        step = np.linalg.solve(hess, grad[..., None])[..., 0]
        t = np.ones(runs)
        new = nll(w + step)
        for _ in range(30):  # step halving where the likelihood got worse
            worse = new > cur + 1e-12 * np.abs(cur)
            if not worse.any():
                break
            t = np.where(worse, t * 0.5, t)
            new = np.where(worse, nll(w + t[:, None] * step), new)
        w = w + t[:, None] * step
        cur = new
        if np.max(np.abs(t[:, None] * step)) < IRLS_TOL:
            return w
    if not np.isfinite(w).all() or np.max(np.abs(w)) > 1e3:
        raise RuntimeError("Logistic regression did not converge: a training sample looks separable.")
    return w


# ---- metrics of many models on shared rows ------------------------------------------------

def quadratic_metrics(y: np.ndarray, pred: np.ndarray, n_bias: int) -> tuple[np.ndarray, np.ndarray]:
    """(QL on all rows, CQL on rows[n_bias:] after the mean shift fitted on rows[:n_bias]) per column.

    ``y`` (n,) or (n, runs), ``pred`` (n, runs).
    """
    yy = y if y.ndim == 2 else y[:, None]
    r = yy - pred
    ql = np.mean(r * r, axis=0)
    c = np.mean(r[:n_bias], axis=0)
    rr = r[n_bias:] - c
    return ql, np.mean(rr * rr, axis=0)


def solve_logit_shifts(y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """Per column of ``z`` (n, runs): c* with Σ sigmoid(z - c*) = Σ y (vectorised Newton, damped)."""
    yy = y if y.ndim == 2 else y[:, None]
    pos = yy.sum(axis=0) * np.ones(z.shape[1])
    if np.any(pos <= 0) or np.any(pos >= z.shape[0]):
        raise RuntimeError("A val-bias set has a single class; c* is infinite. Use more val-bias rows.")
    c = np.zeros(z.shape[1])
    for _ in range(100):
        s = sigmoid(z - c)
        g = s.sum(axis=0) - pos
        h = np.sum(s * (1.0 - s), axis=0)
        step = np.clip(g / h, -1.0, 1.0)
        c = c + step
        if np.max(np.abs(step)) < 1e-12:
            break
    return c


def log_loss_metrics(y: np.ndarray, z: np.ndarray, n_bias: int) -> tuple[np.ndarray, np.ndarray]:
    """(LL on all rows, CLL on rows[n_bias:] with c* fitted on rows[:n_bias]) per column of logits ``z``."""
    yy = y if y.ndim == 2 else y[:, None]
    ll = np.mean(softplus(z) - yy * z, axis=0)
    c = solve_logit_shifts(yy[:n_bias], z[:n_bias])
    u = z[n_bias:] - c
    return ll, np.mean(softplus(u) - yy[n_bias:] * u, axis=0)


# ---- one round ------------------------------------------------------------------------------

def _fit(s: SyntheticSetting, d: np.ndarray, y: np.ndarray) -> np.ndarray:
    return fit_ols(d, y) if s.task == "linear" else fit_logistic(d, y)


def _metrics(s: SyntheticSetting, y: np.ndarray, pred: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return quadratic_metrics(y, pred, s.n_bias) if s.task == "linear" else log_loss_metrics(y, pred, s.n_bias)


def run_pipeline(
    s: SyntheticSetting, k: int, runs: int, rng: np.random.Generator, val: tuple[np.ndarray, np.ndarray] | None
) -> tuple[np.ndarray, np.ndarray]:
    """Train ``runs`` models on the first ``k`` features; per-run (vanilla, calibrated) metric values.

    ``val``: the shared (x, y) validation rows (per-round mode), or None to draw
    a fresh validation set for every model (per-run mode).
    """
    x = draw_x(rng, s, (runs, s.n_train))
    y = draw_y(rng, s, x)
    w = _fit(s, _design(x, k, s.fit_intercept), y)
    if val is not None:
        pred = _design(val[0], k, s.fit_intercept) @ w.T
        return _metrics(s, val[1], pred)
    van, cal = np.empty(runs), np.empty(runs)
    for i in range(runs):
        xv = draw_x(rng, s, (s.n_bias + s.n_remain,))
        yv = draw_y(rng, s, xv)
        v, c = _metrics(s, yv, (_design(xv, k, s.fit_intercept) @ w[i])[:, None])
        van[i], cal[i] = v[0], c[0]
    return van, cal


@dataclass(frozen=True)
class RoundResult:
    """Per-run metric values of one round and the two accuracies."""

    van_a: np.ndarray
    cal_a: np.ndarray
    van_b: np.ndarray
    cal_b: np.ndarray

    @property
    def acc(self) -> float:
        return metric_accuracy(self.van_a, self.van_b)

    @property
    def cacc(self) -> float:
        return metric_accuracy(self.cal_a, self.cal_b)


def run_round(s: SyntheticSetting, runs: int, rng: np.random.Generator) -> RoundResult:
    """One round: a validation set (per-round mode), ``runs`` models of A and of B."""
    val = None
    if s.validation == "per_round":
        xv = draw_x(rng, s, (s.n_bias + s.n_remain,))
        val = (xv, draw_y(rng, s, xv))
    va, ca = run_pipeline(s, s.features_a, runs, rng, val)
    vb, cb = run_pipeline(s, s.features_b, runs, rng, val)
    return RoundResult(va, ca, vb, cb)


# ---- the experiment ----------------------------------------------------------------------

@dataclass(frozen=True)
class SyntheticResult:
    """Summary over rounds; accuracies as fractions, standard errors across rounds."""

    setting: SyntheticSetting
    runs: int
    rounds: int
    seed: int
    acc: float
    acc_se: float
    cacc: float
    cacc_se: float
    gain_se: float
    mean_a: float
    cmean_a: float
    mean_b: float
    cmean_b: float
    std_a: float
    cstd_a: float
    std_b: float
    cstd_b: float
    frac_rounds_cal_better: float
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["setting"] = asdict(self.setting)
        return d


def run_experiment(
    s: SyntheticSetting,
    *,
    runs: int = 100,
    rounds: int = 100,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
) -> SyntheticResult:
    """``rounds`` rounds of ``runs`` models per pipeline; round r uses ``SeedSequence(seed).spawn(rounds)[r]``.

    Reported std of a metric = mean over rounds of the within-round std across
    runs (ddof=1); means are over all runs and rounds.
    """
    if runs < 2 or rounds < 2:
        raise ConfigError(f"Expected runs >= 2 and rounds >= 2 (for a standard error), got {runs} and {rounds}.")
    t0 = time.perf_counter()
    results: list[RoundResult] = []
    for r, child in enumerate(np.random.SeedSequence(seed).spawn(rounds)):
        results.append(run_round(s, runs, np.random.default_rng(child)))
        if progress is not None:
            progress(r + 1, rounds)
    acc = np.array([x.acc for x in results])
    cacc = np.array([x.cacc for x in results])
    se = lambda v: float(v.std(ddof=1) / np.sqrt(v.size))  # noqa: E731
    stack = lambda name: np.stack([getattr(x, name) for x in results])  # noqa: E731 (rounds, runs)
    va, ca, vb, cb = stack("van_a"), stack("cal_a"), stack("van_b"), stack("cal_b")
    wstd = lambda m: float(m.std(axis=1, ddof=1).mean())  # noqa: E731
    return SyntheticResult(
        s, runs, rounds, seed,
        float(acc.mean()), se(acc), float(cacc.mean()), se(cacc), se(cacc - acc),
        float(va.mean()), float(ca.mean()), float(vb.mean()), float(cb.mean()),
        wstd(va), wstd(ca), wstd(vb), wstd(cb),
        float(np.mean(cacc > acc)), time.perf_counter() - t0,
    )


def setup_reading(s: SyntheticSetting) -> str:
    """The interpretation used, in words (printed with every reproduction)."""
    noise = (f"y = βᵀx + ε, ε ~ N({s.noise_mean:g}, sd {s.noise_std:g}) (the paper's N(1, 2) read as sd 2, var 4)"
             if s.task == "linear" else "y ~ Bernoulli(sigmoid(βᵀx)), no extra noise")
    fit = "OLS" if s.task == "linear" else "logistic regression by Newton/IRLS, unpenalised"
    val = ("one validation set per round, shared by every run of A and B, redrawn each round"
           if s.validation == "per_round" else "a fresh validation set for every trained model")
    return (
        f"x ~ N({s.x_mean:g}, {s.x_std:g}²·I_{s.d}), β = {s.beta:g}·1; {noise}; {fit} "
        f"{'with' if s.fit_intercept else 'without'} intercept on {s.n_train} fresh training rows per run "
        f"(A and B runs drawn independently); A = {s.features_a} features, B = first {s.features_b}; "
        f"validation {s.n_bias} val-bias + {s.n_remain} val-remain rows, {val}; vanilla metric on all "
        f"{s.n_bias + s.n_remain} rows, calibrated metric on the val-remain rows after the bias fitted on val-bias; "
        "Acc ties count 1/2; ± = standard error across rounds."
    )


def _fmt_pct(x: float, se: float) -> str:
    return f"{100 * x:.2f}% ± {100 * se:.2f}%"


def format_comparison(res: SyntheticResult) -> str:
    """Side-by-side text table: our measured figures next to the paper's published ones."""
    s = res.setting
    p = PAPER[s.task]
    m, cm = s.metric, "C" + s.metric
    dec = 4 if s.task == "linear" else 5
    f = lambda x: f"{x:.{dec}f}"  # noqa: E731
    rows = [
        (f"{m} Acc", _fmt_pct(res.acc, res.acc_se), _fmt_pct(p["acc"], p["acc_se"])),
        (f"{cm} Acc", _fmt_pct(res.cacc, res.cacc_se), _fmt_pct(p["cacc"], p["cacc_se"])),
        (f"{cm} - {m} Acc", f"{100 * (res.cacc - res.acc):+.2f} pts ± {100 * res.gain_se:.2f}",
         f"{100 * (p['cacc'] - p['acc']):+.2f} pts"),
        (f"{m} mean  A | B", f"{f(res.mean_a)} | {f(res.mean_b)}", f"{p['mean']} (pipeline not stated)"),
        (f"{cm} mean A | B", f"{f(res.cmean_a)} | {f(res.cmean_b)}", f"{p['cmean']}"),
        (f"{m} std   A | B", f"{f(res.std_a)} | {f(res.std_b)}", f"{p['std']}"),
        (f"{cm} std  A | B", f"{f(res.cstd_a)} | {f(res.cstd_b)}", f"{p['cstd']}"),
        ("std reduction A | B", f"{100 * (1 - res.cstd_a / res.std_a):.1f}% | {100 * (1 - res.cstd_b / res.std_b):.1f}%",
         f"{100 * (1 - p['cstd'] / p['std']):.1f}%"),
        ("rounds where C-Acc > Acc", f"{100 * res.frac_rounds_cal_better:.0f}%", "n/a"),
    ]
    title = "linear regression, quadratic loss" if s.task == "linear" else "logistic regression, log loss"
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows + [("", "ours (measured)", "")])
    lines = [
        f"== Synthetic {title}: {res.runs} runs x {res.rounds} rounds, seed {res.seed}, {res.seconds:.1f} s ==",
        f"{'':<{w0}}  {'ours (measured)':<{w1}}  paper (published, 100 runs x 100 rounds)",
        "-" * (w0 + w1 + 45),
    ]
    lines += [f"{a:<{w0}}  {b:<{w1}}  {c}" for a, b, c in rows]
    if s.task == "logistic":
        e = PAPER_EARLIER_LOGISTIC
        lines.append(f"(paper, earlier version, {e['runs']} runs x {e['rounds']} rounds: LL Acc {100 * e['acc']:.2f}% "
                     f"vs CLL Acc {100 * e['cacc']:.1f}%)")
    lines.append("Setup reading: " + setup_reading(s))
    lines.append("Means over all runs and rounds; std = mean over rounds of the std across runs (ddof=1).")
    return "\n".join(lines)


def differences(res: SyntheticResult) -> list[str]:
    """Plain statements where our figures and the paper's differ by more than ~3 combined standard errors."""
    p = PAPER[res.setting.task]
    m = res.setting.metric
    out = []
    for key, label in (("acc", f"{m} Acc"), ("cacc", f"C{m} Acc")):
        ours, ours_se = getattr(res, key), getattr(res, key + "_se")
        z = (ours - p[key]) / float(np.hypot(ours_se, p[key + "_se"]))
        if abs(z) > 3:
            out.append(f"{label}: ours {100 * ours:.2f}% vs paper {100 * p[key]:.2f}% ({z:+.1f} combined s.e.).")
    gain, pgain = res.cacc - res.acc, p["cacc"] - p["acc"]
    if abs(gain - pgain) > 3 * max(res.gain_se, 1e-4):
        out.append(f"Accuracy gain from calibration: ours {100 * gain:+.2f} pts vs paper {100 * pgain:+.2f} pts.")
    return out


def with_overrides(s: SyntheticSetting, **kw: Any) -> SyntheticSetting:
    """A copy of ``s`` with fields replaced (None values ignored)."""
    return replace(s, **{k: v for k, v in kw.items() if v is not None})
